/* htable — see htable.h. */
#include "core/htable.h"

#include <stdlib.h>
#include <string.h>

#define HTABLE_MIN_CAP 8

static size_t home_of(const struct htable *t, const struct htable_type *ty, const void *slot,
                      const void *ctx)
{
	return (size_t)ty->hash(slot, ctx) & (t->cap - 1);
}

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

bool htable_reserve(struct htable *t, const struct htable_type *ty, void *ctx)
{
	if (2 * (t->n + 1) <= t->cap)
		return true;
	size_t cap = t->cap ? 2 * t->cap : HTABLE_MIN_CAP;
	if (cap > SIZE_MAX / 2 / ty->size)
		return false;
	struct htable grown = {calloc(cap, ty->size), cap, t->n};
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

void *htable_insert(struct htable *t, const struct htable_type *ty, uint64_t hash)
{
	t->n++;
	return empty_from(t, ty, hash);
}

/* Whether the record at slot j, whose home is `home`, may move back into the
 * hole at slot `hole` (j follows hole in its run): not when its home lies
 * cyclically in (hole, j], where a lookup would no longer pass the hole. */
static bool may_fill(size_t hole, size_t j, size_t home)
{
	return hole <= j ? !(hole < home && home <= j) : !(hole < home || home <= j);
}

void htable_delete(struct htable *t, const struct htable_type *ty, void *slot, void *ctx)
{
	size_t mask = t->cap - 1;
	size_t hole = (size_t)((char *)slot - (char *)t->slots) / ty->size;
	for (size_t j = (hole + 1) & mask;; j = (j + 1) & mask) {
		void *s = htable_at(t, ty, j);
		if (!ty->used(s))
			break;
		if (!may_fill(hole, j, home_of(t, ty, s, ctx)))
			continue;
		void *h = htable_at(t, ty, hole);
		memcpy(h, s, ty->size);
		if (ty->moved != NULL)
			ty->moved(h, ctx);
		hole = j;
	}
	memset(htable_at(t, ty, hole), 0, ty->size);
	t->n--;
}

void htable_free(struct htable *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
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
