/* SPDX-License-Identifier: Apache-2.0 */
/* htable — the one hash table: open addressing, linear probing, at most half
 * full, deletion by backward shift (no tombstones, so a table that sees
 * endless inserts and deletes never degrades nor needs a rebuild).
 *
 * A slot holds a record of the user's (its own bytes, type->size of them):
 * the record itself when it is small and owned by the table (a lane's flows
 * and agents), or a pointer or an index to a record kept elsewhere (the
 * registry's lanes, large and allocated one by one; intern's strings;
 * scope's slab). The table never looks inside a record but through its
 * type's functions, which also say which slots are empty: an empty slot is
 * all zero bytes, and a used one is never.
 *
 * Records move when the table grows and when a deletion shifts the ones after
 * it back: a pointer to a slot is good until the next reserve or delete, and
 * a type whose records are pointed at from elsewhere (a heap's back
 * pointers) is told through type->moved. Memory: cap slots, cap a power of
 * two at least twice the records (so 2 to 4 slots a record); nothing until
 * the first record, and the table never shrinks but with htable_free.
 * O(1) expected per operation whatever the size, with hashes spread over
 * their low bits (core/hash.h). Not thread-safe (pacerd has one loop). */
#ifndef PACERD_HTABLE_H
#define PACERD_HTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct htable {
	void *slots; /* cap slots of type->size bytes; NULL while cap is 0 */
	size_t cap;  /* 0, or a power of two */
	size_t n;    /* records */
};

struct htable_type {
	size_t size; /* bytes of a slot */
	/* Whether the slot holds a record (an empty one is all zero bytes). */
	bool (*used)(const void *slot);
	/* The hash of the record in a used slot: the one it was inserted with. */
	uint64_t (*hash)(const void *slot, const void *ctx);
	/* Whether the record in a used slot is the one `key` names. */
	bool (*match)(const void *slot, const void *key, const void *ctx);
	/* A record was moved into `slot` (growth, a deletion's shift). NULL:
	 * nothing points at slots. */
	void (*moved)(void *slot, void *ctx);
};

/* ctx, wherever it appears, is the caller's and is handed to the type's
 * functions as it is. The operations a request pays for are inline: with
 * the type a constant where they are called, its functions and its size are
 * compiled in (no call through a pointer, no memcpy of a variable size). */

static inline void *htable_at(const struct htable *t, const struct htable_type *ty, size_t i)
{
	return (char *)t->slots + i * ty->size;
}

/* The slot of the record with this hash that `key` names, or NULL. Inline:
 * with a type known where it is called, its functions are inlined too. */
static inline void *htable_find(const struct htable *t, const struct htable_type *ty, uint64_t hash,
                                const void *key, const void *ctx)
{
	if (t->n == 0)
		return NULL;
	size_t mask = t->cap - 1;
	for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
		void *s = htable_at(t, ty, i);
		if (!ty->used(s))
			return NULL;
		if (ty->match(s, key, ctx))
			return s;
	}
}

/* For a type whose slots hold a pointer to a record kept elsewhere (intern's
 * strings, the registry's lanes): a slot is used when the pointer is set. */
static inline bool htable_ptr_used(const void *slot)
{
	return *(void *const *)slot != NULL;
}

#define HTABLE_MIN_CAP 8

/* Doubles the slots, records moved (htable_reserve's slow path). */
bool htable_grow(struct htable *t, const struct htable_type *ty, void *ctx);

/* Room for one record more: grows (records move) when it would be more than
 * half full. False when out of memory (nothing changed). The first slots
 * are made here: a table that a lane makes and frees with each request it
 * queues (fairq's) pays no more than the allocation. */
static inline bool htable_reserve(struct htable *t, const struct htable_type *ty, void *ctx)
{
	if (2 * (t->n + 1) <= t->cap)
		return true;
	if (t->cap == 0) {
		t->slots = calloc(HTABLE_MIN_CAP, ty->size);
		t->cap = t->slots != NULL ? HTABLE_MIN_CAP : 0;
		return t->slots != NULL;
	}
	return htable_grow(t, ty, ctx);
}

/* The empty slot where a new record of this hash goes, counted in t->n; the
 * caller fills it at once (so that type->used says so). Room must have been
 * reserved, and no record the key names be in the table. */
static inline void *htable_insert(struct htable *t, const struct htable_type *ty, uint64_t hash)
{
	size_t mask = t->cap - 1;
	t->n++;
	for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
		void *s = htable_at(t, ty, i);
		if (!ty->used(s))
			return s;
	}
}

/* The slot of the record `key` names, or when there is none a new one, as
 * htable_insert gives it (*added then true, and the caller fills it at
 * once): one probe where find and insert would make two. Room must have been
 * reserved. */
static inline void *htable_get(struct htable *t, const struct htable_type *ty, uint64_t hash,
                               const void *key, const void *ctx, bool *added)
{
	size_t mask = t->cap - 1;
	for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
		void *s = htable_at(t, ty, i);
		if (!ty->used(s)) {
			t->n++;
			*added = true;
			return s;
		}
		if (ty->match(s, key, ctx)) {
			*added = false;
			return s;
		}
	}
}

/* Whether the record at slot j, whose home is `home`, may move back into the
 * hole at slot `hole` (j follows hole in its run): not when its home lies
 * cyclically in (hole, j], where a lookup would no longer pass the hole. */
static inline bool htable_may_fill(size_t hole, size_t j, size_t home)
{
	return hole <= j ? !(hole < home && home <= j) : !(hole < home || home <= j);
}

/* Takes the record in `slot` out (the slot is zeroed, or filled by a record
 * moved back into it). */
static inline void htable_delete(struct htable *t, const struct htable_type *ty, void *slot,
                                 void *ctx)
{
	size_t mask = t->cap - 1;
	size_t hole = (size_t)((char *)slot - (char *)t->slots) / ty->size;
	for (size_t j = (hole + 1) & mask;; j = (j + 1) & mask) {
		void *s = htable_at(t, ty, j);
		if (!ty->used(s))
			break;
		if (!htable_may_fill(hole, j, (size_t)ty->hash(s, ctx) & mask))
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

/* Frees the slots (not what they point at); the table is empty and usable. */
static inline void htable_free(struct htable *t)
{
	free(t->slots);
	t->slots = NULL;
	t->cap = t->n = 0;
}

/* Bytes of the slots on the heap. */
size_t htable_bytes(const struct htable *t, const struct htable_type *ty);

/* Every record once, in no set order:
 *
 *     struct htable_iter it;
 *     htable_iter_init(t, ty, &it);
 *     for (void *s; (s = htable_iter_next(t, ty, &it)) != NULL;)
 *             if (done_with(s))
 *                     htable_iter_delete(t, ty, &it, ctx);
 *
 * The loop may delete the record it is at, through htable_iter_delete only
 * (the record shifted into its place is visited next), and must neither
 * insert nor reserve. */
struct htable_iter {
	size_t i, left;
	bool stay; /* the slot at i was just refilled by a deletion's shift */
};
void htable_iter_init(const struct htable *t, const struct htable_type *ty, struct htable_iter *it);
void *htable_iter_next(const struct htable *t, const struct htable_type *ty,
                       struct htable_iter *it);
void htable_iter_delete(struct htable *t, const struct htable_type *ty, struct htable_iter *it,
                        void *ctx);

#endif
