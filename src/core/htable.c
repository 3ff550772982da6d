/* SPDX-License-Identifier: Apache-2.0 */
/* htable — see htable.h. */
#include "core/htable.h"

#include <stdlib.h>
#include <string.h>

/* The first empty slot from the home of `hash` on. */
static void *empty_from(const struct htable *t, const struct htable_type *ty, uint64_t hash)
{
	size_t mask = t->cap - 1;
	for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
		void *s = htable_at(t, ty, i);
		if (!ty->used(s))
			return s;
	}
}

bool htable_grow(struct htable *t, const struct htable_type *ty, void *ctx)
{
	if (t->cap > SIZE_MAX / 4)
		return false;
	size_t cap = t->cap ? 2 * t->cap : HTABLE_MIN_CAP;
	struct htable grown = {calloc(cap, ty->size), cap, t->n}; /* calloc checks cap * size */
	if (grown.slots == NULL)
		return false;
	for (size_t i = 0; i < t->cap; i++) {
		const void *from = htable_at(t, ty, i);
		if (!ty->used(from))
			continue;
		void *to = empty_from(&grown, ty, ty->hash(from, ctx));
		memcpy(to, from, ty->size);
		if (ty->moved != NULL)
			ty->moved(to, ctx);
	}
	free(t->slots);
	*t = grown;
	return true;
}

size_t htable_bytes(const struct htable *t, const struct htable_type *ty)
{
	return t->cap * ty->size;
}

/* The walk starts after an empty slot (there is one: the table is at most
 * half full) and goes once round. A deletion shifts back only records of the
 * run it is in, which ends before that empty slot: the records it moves come
 * from slots not visited yet, into the one being visited. */
void htable_iter_init(const struct htable *t, const struct htable_type *ty, struct htable_iter *it)
{
	it->i = 0;
	it->left = 0;
	it->stay = false;
	if (t->n == 0)
		return;
	while (ty->used(htable_at(t, ty, it->i)))
		it->i++;
	it->left = t->cap - 1;
}

void *htable_iter_next(const struct htable *t, const struct htable_type *ty, struct htable_iter *it)
{
	if (it->stay) {
		it->stay = false;
		void *s = htable_at(t, ty, it->i);
		if (ty->used(s))
			return s;
	}
	while (it->left > 0) {
		it->left--;
		it->i = (it->i + 1) & (t->cap - 1);
		void *s = htable_at(t, ty, it->i);
		if (ty->used(s))
			return s;
	}
	return NULL;
}

void htable_iter_delete(struct htable *t, const struct htable_type *ty, struct htable_iter *it,
                        void *ctx)
{
	htable_delete(t, ty, htable_at(t, ty, it->i), ctx);
	it->stay = true;
}
