/* SPDX-License-Identifier: Apache-2.0 */
/* scope — which limit scope a key's requests belong to; see scope.h. */
#include "sched/scope.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

struct scope_entry {
	uint64_t key;
	uint64_t learned;    /* identity the newest answer carried */
	int64_t last_ms;     /* last request or answer */
	uint32_t prev, next; /* LRU neighbours, slab position + 1; 0: none */
};

#define SCOPE_MIN_CAP 8
#define SCOPE_MAX_LEARNED ((size_t)1 << 30) /* positions are 32-bit */
#define SCOPE_EXPIRE_PER_CALL 2

uint64_t scope_id(enum scope_kind kind, uint64_t hash)
{
	return (hash & ~(uint64_t)3) | (uint64_t)kind;
}

enum scope_kind scope_kind_of(uint64_t id)
{
	switch (id & 3) {
	case SCOPE_NAMED:
		return SCOPE_NAMED;
	case SCOPE_IDENTITY:
		return SCOPE_IDENTITY;
	default:
		return SCOPE_KEY;
	}
}

int scope_format(uint64_t id, char *buf, size_t len)
{
	static const char *const names[] = {"key", "scope", "id"};
	return snprintf(buf, len, "%s:%012" PRIx64, names[scope_kind_of(id)], id >> 16);
}

void scope_init(struct scope_table *t, size_t max_learned, int64_t idle_ttl_ms)
{
	memset(t, 0, sizeof(*t));
	t->max_learned = max_learned == 0                  ? 1
	                 : max_learned > SCOPE_MAX_LEARNED ? SCOPE_MAX_LEARNED
	                                                   : max_learned;
	t->idle_ttl_ms = idle_ttl_ms;
}

void scope_free(struct scope_table *t)
{
	free(t->slab);
	htable_free(&t->index);
	scope_init(t, t->max_learned, t->idle_ttl_ms);
}

size_t scope_count(const struct scope_table *t)
{
	return t->n;
}

/* ---- the index: slab positions by key ---- */

static const struct scope_entry *slot_entry(const void *slot, const void *ctx)
{
	const struct scope_table *t = ctx;
	return &t->slab[*(const uint32_t *)slot - 1];
}

static bool slot_used(const void *slot)
{
	return *(const uint32_t *)slot != 0;
}

static uint64_t slot_hash(const void *slot, const void *ctx)
{
	return hash_u64(slot_entry(slot, ctx)->key);
}

static bool slot_match(const void *slot, const void *key, const void *ctx)
{
	return slot_entry(slot, ctx)->key == *(const uint64_t *)key;
}

static const struct htable_type index_type = {
    .size = sizeof(uint32_t),
    .used = slot_used,
    .hash = slot_hash,
    .match = slot_match,
};

size_t scope_heap_bytes(const struct scope_table *t)
{
	return t->slab_cap * sizeof(struct scope_entry) + htable_bytes(&t->index, &index_type);
}

/* The index slot of key, or NULL. */
static uint32_t *slot_of(const struct scope_table *t, uint64_t key)
{
	return htable_find(&t->index, &index_type, hash_u64(key), &key, t);
}

static struct scope_entry *find(const struct scope_table *t, uint64_t key)
{
	uint32_t *s = slot_of(t, key);
	return s != NULL ? &t->slab[*s - 1] : NULL;
}

/* Room for one more entry: in the slab and in the index. */
static bool reserve(struct scope_table *t)
{
	if (!htable_reserve(&t->index, &index_type, t))
		return false;
	if (t->n < t->slab_cap)
		return true;
	size_t cap = t->slab_cap ? 2 * t->slab_cap : SCOPE_MIN_CAP;
	if (cap > UINT32_MAX / 2)
		return false;
	struct scope_entry *slab = realloc(t->slab, cap * sizeof(*slab));
	if (slab == NULL)
		return false;
	t->slab = slab;
	t->slab_cap = cap;
	return true;
}

/* ---- the LRU of learned entries ---- */

static uint32_t pos1(const struct scope_table *t, const struct scope_entry *e)
{
	return (uint32_t)(e - t->slab) + 1;
}

static void lru_unlink(struct scope_table *t, struct scope_entry *e)
{
	if (e->prev)
		t->slab[e->prev - 1].next = e->next;
	else
		t->lru_head = e->next;
	if (e->next)
		t->slab[e->next - 1].prev = e->prev;
	else
		t->lru_tail = e->prev;
	e->prev = e->next = 0;
	t->n_learned--;
}

static void lru_push(struct scope_table *t, struct scope_entry *e)
{
	uint32_t p = pos1(t, e);
	e->prev = 0;
	e->next = t->lru_head;
	if (t->lru_head)
		t->slab[t->lru_head - 1].prev = p;
	else
		t->lru_tail = p;
	t->lru_head = p;
	t->n_learned++;
}

static void touch(struct scope_table *t, struct scope_entry *e, int64_t now_ms)
{
	if (now_ms > e->last_ms)
		e->last_ms = now_ms;
	if (t->lru_head != pos1(t, e)) {
		lru_unlink(t, e);
		lru_push(t, e);
	}
}

/* Removes an entry; the last of the slab moves into its place. */
static void entry_delete(struct scope_table *t, struct scope_entry *e)
{
	lru_unlink(t, e);
	htable_delete(&t->index, &index_type, slot_of(t, e->key), t);
	struct scope_entry *last = &t->slab[t->n - 1];
	if (e != last) {
		uint32_t to = pos1(t, e);
		*slot_of(t, last->key) = to;
		*e = *last;
		if (e->prev)
			t->slab[e->prev - 1].next = to;
		else
			t->lru_head = to;
		if (e->next)
			t->slab[e->next - 1].prev = to;
		else
			t->lru_tail = to;
	}
	t->n--;
}

/* Drops learned entries idle for longer than the TTL, a few from the LRU's tail. */
static void expire(struct scope_table *t, int64_t now_ms)
{
	if (t->idle_ttl_ms <= 0)
		return;
	for (int i = 0; i < SCOPE_EXPIRE_PER_CALL && t->lru_tail; i++) {
		struct scope_entry *e = &t->slab[t->lru_tail - 1];
		if (now_ms - e->last_ms <= t->idle_ttl_ms)
			return;
		entry_delete(t, e);
	}
}

/* A new entry for key (room reserved), not in the LRU. */
static struct scope_entry *entry_add(struct scope_table *t, uint64_t key)
{
	struct scope_entry *e = &t->slab[t->n];
	memset(e, 0, sizeof(*e));
	e->key = key;
	*(uint32_t *)htable_insert(&t->index, &index_type, hash_u64(key)) = (uint32_t)(t->n + 1);
	t->n++;
	return e;
}

/* ---- the scope ---- */

static uint64_t entry_scope(const struct scope_entry *e, uint64_t key)
{
	if (e != NULL && e->learned != 0)
		return scope_id(SCOPE_IDENTITY, e->learned);
	return scope_id(SCOPE_KEY, key);
}

uint64_t scope_peek(const struct scope_table *t, uint64_t key_id, uint64_t request_identity)
{
	if (request_identity != 0)
		return scope_id(SCOPE_IDENTITY, request_identity);
	return entry_scope(find(t, key_id), key_id);
}

uint64_t scope_of(struct scope_table *t, uint64_t key_id, uint64_t request_identity, int64_t now_ms)
{
	expire(t, now_ms);
	struct scope_entry *e = find(t, key_id);
	if (e != NULL)
		touch(t, e, now_ms);
	if (request_identity != 0)
		return scope_id(SCOPE_IDENTITY, request_identity);
	return entry_scope(e, key_id);
}

int scope_learn(struct scope_table *t, uint64_t key_id, uint64_t request_identity,
                uint64_t answer_identity, int64_t now_ms)
{
	if (answer_identity == 0 || request_identity != 0)
		return 0;
	expire(t, now_ms);
	struct scope_entry *e = find(t, key_id);
	if (e != NULL) {
		uint64_t before = entry_scope(e, key_id);
		e->learned = answer_identity;
		touch(t, e, now_ms);
		return entry_scope(e, key_id) != before;
	}
	if (t->n_learned >= t->max_learned)
		entry_delete(t, &t->slab[t->lru_tail - 1]);
	if (!reserve(t))
		return -1;
	e = entry_add(t, key_id);
	e->learned = answer_identity;
	e->last_ms = now_ms;
	lru_push(t, e);
	return 1;
}

size_t scope_save(const struct scope_table *t, struct scope_saved *out, size_t max)
{
	size_t n = 0;
	for (uint32_t p = t->lru_tail; p != 0 && n < max; p = t->slab[p - 1].prev) {
		const struct scope_entry *e = &t->slab[p - 1];
		out[n++] = (struct scope_saved){e->key, e->learned, e->last_ms};
	}
	return n;
}
