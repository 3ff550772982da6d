/* SPDX-License-Identifier: Apache-2.0 */
/* intern — see intern.h. */
#include "core/intern.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/htable.h"

struct entry {
	uint64_t hash;
	uint32_t refs;
	uint32_t len;
	char s[]; /* len bytes and a NUL */
};

struct intern {
	struct htable strings; /* of struct entry * */
	size_t bytes;          /* entries, headers included */
	uint64_t seed;
};

static struct entry *entry_of(const char *s)
{
	return (struct entry *)(void *)(s - offsetof(struct entry, s));
}

/* ---------- hash ---------- */

static uint64_t read8(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* 64x64 -> 128 bit multiply, folded: the mixing step of wyhash-like hashes. */
static uint64_t mum(uint64_t a, uint64_t b)
{
	__extension__ unsigned __int128 r = (unsigned __int128)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

#define K0 0xa0761d6478bd642fULL
#define K1 0xe7037ed1a0b428dbULL
#define K2 0x8ebc6af09c88c6e3ULL
#define K3 0x589965cc75374cc3ULL

uint64_t intern_hash(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *p = data;
	size_t left = n;
	uint64_t s0 = seed ^ mum(seed ^ K0, K1), s1 = s0, s2 = s0;
	/* Three independent chains, 48 bytes a turn: the multiplies overlap. */
	while (left > 48) {
		s0 = mum(read8(p) ^ K1, read8(p + 8) ^ s0);
		s1 = mum(read8(p + 16) ^ K2, read8(p + 24) ^ s1);
		s2 = mum(read8(p + 32) ^ K3, read8(p + 40) ^ s2);
		p += 48;
		left -= 48;
	}
	s0 ^= s1 ^ s2;
	while (left > 16) {
		s0 = mum(read8(p) ^ K1, read8(p + 8) ^ s0);
		p += 16;
		left -= 16;
	}
	uint64_t a = 0, b = 0;
	if (left >= 8) {
		a = read8(p);
		b = read8(p + left - 8); /* overlaps a when left < 16 */
	} else if (left > 0) {
		unsigned char t[8] = {0};
		memcpy(t, p, left);
		a = read8(t);
	}
	return mum(K1 ^ (uint64_t)n, mum(a ^ K1, b ^ s0));
}

/* ---------- table ---------- */

/* What a string is looked up by: its bytes and their hash. */
struct key {
	const char *s;
	size_t n;
	uint64_t hash;
};

static struct entry *slot_entry(const void *slot)
{
	return *(struct entry *const *)slot;
}

static uint64_t slot_hash(const void *slot, const void *ctx)
{
	(void)ctx;
	return slot_entry(slot)->hash;
}

static bool slot_match(const void *slot, const void *key, const void *ctx)
{
	(void)ctx;
	const struct entry *e = slot_entry(slot);
	const struct key *k = key;
	return e->hash == k->hash && e->len == k->n && memcmp(e->s, k->s, k->n) == 0;
}

static const struct htable_type string_table = {
    .size = sizeof(struct entry *),
    .used = htable_ptr_used,
    .hash = slot_hash,
    .match = slot_match,
};

struct intern *intern_new(uint64_t seed)
{
	struct intern *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->seed = seed;
	return t;
}

void intern_free(struct intern *t)
{
	if (t == NULL)
		return;
	struct htable_iter it;
	htable_iter_init(&t->strings, &string_table, &it);
	for (void *s; (s = htable_iter_next(&t->strings, &string_table, &it)) != NULL;)
		free(slot_entry(s));
	htable_free(&t->strings);
	free(t);
}

const char *intern_get(struct intern *t, const char *s, size_t n)
{
	if (t == NULL || (s == NULL && n > 0) || n > INTERN_MAX_LEN)
		return NULL;
	struct key k = {n > 0 ? s : "", n, intern_hash(s, n, t->seed)};
	void *slot = htable_find(&t->strings, &string_table, k.hash, &k, NULL);
	if (slot != NULL) {
		struct entry *e = slot_entry(slot);
		if (e->refs == UINT32_MAX)
			return NULL;
		e->refs++;
		return e->s;
	}
	if (!htable_reserve(&t->strings, &string_table, NULL))
		return NULL;
	struct entry *e = malloc(sizeof(*e) + n + 1);
	if (e == NULL)
		return NULL;
	e->hash = k.hash;
	e->refs = 1;
	e->len = (uint32_t)n;
	if (n > 0)
		memcpy(e->s, s, n);
	e->s[n] = '\0';
	*(struct entry **)htable_insert(&t->strings, &string_table, k.hash) = e;
	t->bytes += sizeof(*e) + n + 1;
	return e->s;
}

const char *intern_ref(const char *s)
{
	if (s != NULL)
		entry_of(s)->refs++;
	return s;
}

void intern_put(struct intern *t, const char *s)
{
	if (t == NULL || s == NULL)
		return;
	struct entry *e = entry_of(s);
	if (--e->refs > 0)
		return;
	struct key k = {e->s, e->len, e->hash};
	void *slot = htable_find(&t->strings, &string_table, k.hash, &k, NULL);
	if (slot != NULL)
		htable_delete(&t->strings, &string_table, slot, NULL);
	t->bytes -= sizeof(*e) + e->len + 1;
	free(e);
}

size_t intern_len(const char *s)
{
	return s != NULL ? entry_of(s)->len : 0;
}

size_t intern_count(const struct intern *t)
{
	return t != NULL ? t->strings.n : 0;
}

size_t intern_bytes(const struct intern *t)
{
	return t != NULL ? sizeof(*t) + t->bytes + htable_bytes(&t->strings, &string_table) : 0;
}
