/* SPDX-License-Identifier: Apache-2.0 */
/* certcache — leaf certificates by host. See certcache.h. */
#include "core/certcache.h"

#include <stdlib.h>
#include <string.h>

void certcache_init(struct certcache *cc, size_t cap, void (*free_value)(void *))
{
	memset(cc, 0, sizeof(*cc));
	cc->cap = cap == 0 || cap > CERTCACHE_MAX ? CERTCACHE_MAX : cap;
	cc->free_value = free_value;
}

static long find(const struct certcache *cc, const char *host)
{
	for (size_t i = 0; i < cc->n; i++)
		if (strcmp(cc->e[i].host, host) == 0)
			return (long)i;
	return -1;
}

void *certcache_get(const struct certcache *cc, const char *host)
{
	long i = find(cc, host);
	return i < 0 ? NULL : cc->e[i].value;
}

static void drop(struct certcache *cc, size_t i)
{
	free(cc->e[i].host);
	if (cc->free_value != NULL)
		cc->free_value(cc->e[i].value);
	cc->e[i] = cc->e[--cc->n];
}

int certcache_put(struct certcache *cc, const char *host, void *value)
{
	long at = find(cc, host);
	if (at >= 0)
		drop(cc, (size_t)at);
	if (cc->n == cc->cap) {
		size_t oldest = 0;
		for (size_t i = 1; i < cc->n; i++)
			if (cc->e[i].made < cc->e[oldest].made)
				oldest = i;
		drop(cc, oldest);
	}
	struct certcache_entry *e = &cc->e[cc->n];
	e->host = strdup(host);
	if (e->host == NULL) {
		if (cc->free_value != NULL)
			cc->free_value(value);
		return -1;
	}
	e->value = value;
	e->made = ++cc->seq;
	cc->n++;
	return 0;
}

void certcache_clear(struct certcache *cc)
{
	while (cc->n > 0)
		drop(cc, cc->n - 1);
}
