/* SPDX-License-Identifier: Apache-2.0 */
/* pool — see pool.h. */
#include "core/pool.h"

static void *object_of(const struct pool *p, struct list *link)
{
	return (char *)link - p->link_offset;
}

static struct list *link_of(const struct pool *p, void *obj)
{
	return (struct list *)(void *)((char *)obj + p->link_offset);
}

void pool_init(struct pool *p, size_t link_offset, size_t max)
{
	list_init(&p->kept);
	p->link_offset = link_offset;
	p->max = max;
	p->n = 0;
	p->low = 0;
}

void *pool_get(struct pool *p)
{
	struct list *link = list_first(&p->kept);
	if (link == NULL)
		return NULL;
	list_remove(link);
	p->n--;
	if (p->n < p->low)
		p->low = p->n;
	return object_of(p, link);
}

bool pool_put(struct pool *p, void *obj)
{
	if (p->max > 0 && p->n >= p->max)
		return false;
	list_insert_head(&p->kept, link_of(p, obj));
	p->n++;
	return true;
}

size_t pool_trim(struct pool *p, bool all, void (*destroy)(void *obj))
{
	size_t want = all ? p->n : p->low, freed = 0;
	struct list *link;
	/* low <= n always (pool_get lowers it to n, pool_put only raises n). */
	while (freed < want && (link = list_first(&p->kept)) != NULL) {
		list_remove(link);
		p->n--;
		destroy(object_of(p, link));
		freed++;
	}
	p->low = p->n;
	return freed;
}
