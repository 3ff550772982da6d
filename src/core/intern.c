/* intern — see intern.h. */
#include "core/intern.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	struct entry *next; /* in its bucket's chain */
	uint64_t hash;
	uint32_t refs;
	uint32_t len;
	char s[]; /* len bytes and a NUL */
};

struct intern {
	struct entry **buckets;
	size_t n_buckets; /* a power of two */
	size_t count;
	size_t bytes; /* entries, headers included */
	uint64_t seed;
};

#define MIN_BUCKETS 64

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

struct intern *intern_new(uint64_t seed)
{
	struct intern *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->buckets = calloc(MIN_BUCKETS, sizeof(*t->buckets));
	if (t->buckets == NULL) {
		free(t);
		return NULL;
	}
	t->n_buckets = MIN_BUCKETS;
	t->seed = seed;
	return t;
}

void intern_free(struct intern *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->n_buckets; i++) {
		struct entry *e = t->buckets[i];
		while (e != NULL) {
			struct entry *next = e->next;
			free(e);
			e = next;
		}
	}
	free(t->buckets);
	free(t);
}

/* Doubles the bucket array; on failure the chains just get longer. */
static void grow(struct intern *t)
{
	size_t n = t->n_buckets * 2;
	struct entry **b = calloc(n, sizeof(*b));
	if (b == NULL)
		return;
	for (size_t i = 0; i < t->n_buckets; i++) {
		struct entry *e = t->buckets[i];
		while (e != NULL) {
			struct entry *next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->n_buckets = n;
}

const char *intern_get(struct intern *t, const char *s, size_t n)
{
	if (t == NULL || (s == NULL && n > 0) || n > INTERN_MAX_LEN)
		return NULL;
	uint64_t h = intern_hash(s, n, t->seed);
	struct entry **b = &t->buckets[h & (t->n_buckets - 1)];
	for (struct entry *e = *b; e != NULL; e = e->next)
		if (e->hash == h && e->len == n && memcmp(e->s, s, n) == 0) {
			if (e->refs == UINT32_MAX)
				return NULL;
			e->refs++;
			return e->s;
		}
	struct entry *e = malloc(sizeof(*e) + n + 1);
	if (e == NULL)
		return NULL;
	e->hash = h;
	e->refs = 1;
	e->len = (uint32_t)n;
	if (n > 0)
		memcpy(e->s, s, n);
	e->s[n] = '\0';
	e->next = *b;
	*b = e;
	t->count++;
	t->bytes += sizeof(*e) + n + 1;
	if (t->count > t->n_buckets)
		grow(t);
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
	struct entry **pp = &t->buckets[e->hash & (t->n_buckets - 1)];
	while (*pp != NULL && *pp != e)
		pp = &(*pp)->next;
	if (*pp == e)
		*pp = e->next;
	t->count--;
	t->bytes -= sizeof(*e) + e->len + 1;
	free(e);
}

size_t intern_len(const char *s)
{
	return s != NULL ? entry_of(s)->len : 0;
}

size_t intern_count(const struct intern *t)
{
	return t != NULL ? t->count : 0;
}

size_t intern_bytes(const struct intern *t)
{
	return t != NULL ? sizeof(*t) + t->bytes + t->n_buckets * sizeof(*t->buckets) : 0;
}
