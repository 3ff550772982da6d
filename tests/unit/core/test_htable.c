/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for htable: insert, find, delete, growth, collisions (runs that
 * wrap round the end of the slots), records that move and are told so, and
 * deletion during iteration; every random sequence checked against a plain
 * model of which keys are in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/htable.h"
#include "unit.h"

#define KEYS 4096

struct rec {
	uint64_t key; /* 0: empty */
	uint64_t value;
};

/* Where each key's record is, kept by rec_moved: a back pointer as sched's
 * agent heap keeps them. */
static struct rec *where[KEYS + 1];
static size_t moves;
/* 0: spread keys; else every hash is key % collide (long runs), plus an
 * offset that puts the runs at the end of the slots, so that they wrap. */
static uint64_t collide;

static uint64_t key_hash(uint64_t key)
{
	return collide ? (uint64_t)-1 - key % collide : hash_u64(key);
}

static bool rec_used(const void *slot)
{
	return ((const struct rec *)slot)->key != 0;
}

static uint64_t rec_hash(const void *slot, const void *ctx)
{
	(void)ctx;
	return key_hash(((const struct rec *)slot)->key);
}

static bool rec_match(const void *slot, const void *key, const void *ctx)
{
	(void)ctx;
	return ((const struct rec *)slot)->key == *(const uint64_t *)key;
}

static void rec_moved(void *slot, void *ctx)
{
	struct rec *r = slot;
	ck_assert_ptr_eq(ctx, &moves); /* the caller's ctx, handed through */
	where[r->key] = r;
	moves++;
}

static const struct htable_type rec_type = {
    .size = sizeof(struct rec),
    .used = rec_used,
    .hash = rec_hash,
    .match = rec_match,
    .moved = rec_moved,
};

static struct rec *find(const struct htable *t, uint64_t key)
{
	return htable_find(t, &rec_type, key_hash(key), &key, &moves);
}

static void add(struct htable *t, uint64_t key)
{
	ck_assert(htable_reserve(t, &rec_type, &moves));
	struct rec *r = htable_insert(t, &rec_type, key_hash(key));
	ck_assert(!rec_used(r));
	r->key = key;
	r->value = key * 3;
	where[key] = r;
}

static void del(struct htable *t, uint64_t key)
{
	struct rec *r = find(t, key);
	ck_assert_ptr_nonnull(r);
	where[key] = NULL;
	htable_delete(t, &rec_type, r, &moves);
}

/* Every key the model has is found, with its value and where the back
 * pointer says; no other is; the count agrees; at most half full. */
static void check(const struct htable *t, const bool *in)
{
	size_t n = 0;
	for (uint64_t k = 1; k <= KEYS; k++) {
		struct rec *r = find(t, k);
		if (!in[k]) {
			ck_assert_ptr_null(r);
			continue;
		}
		ck_assert_ptr_nonnull(r);
		ck_assert_uint_eq(r->value, k * 3);
		ck_assert_ptr_eq(where[k], r);
		n++;
	}
	ck_assert_uint_eq(t->n, n);
	ck_assert_uint_le(2 * t->n, t->cap);
}

static void reset(uint64_t collide_with)
{
	memset(where, 0, sizeof(where));
	moves = 0;
	collide = collide_with;
}

START_TEST(empty_table)
{
	reset(0);
	struct htable t = {0};
	uint64_t k = 5;
	ck_assert_ptr_null(find(&t, k));
	ck_assert_uint_eq(htable_bytes(&t, &rec_type), 0);
	struct htable_iter it;
	htable_iter_init(&t, &rec_type, &it);
	ck_assert_ptr_null(htable_iter_next(&t, &rec_type, &it));
	htable_free(&t);
	ck_assert_uint_eq(t.cap, 0);
}
END_TEST

START_TEST(insert_find_delete)
{
	reset(0);
	struct htable t = {0};
	bool in[KEYS + 1] = {false};
	add(&t, 7);
	in[7] = true;
	ck_assert_uint_eq(t.cap, 8); /* the first slots: a few */
	ck_assert_uint_eq(htable_bytes(&t, &rec_type), 8 * sizeof(struct rec));
	check(&t, in);
	del(&t, 7);
	in[7] = false;
	check(&t, in);
	ck_assert_uint_eq(t.cap, 8); /* kept for the next record */
	htable_free(&t);
}
END_TEST

/* get: the record when it is there, else a new slot for it; one count. */
START_TEST(get_finds_or_adds)
{
	reset(11);
	struct htable t = {0};
	bool in[KEYS + 1] = {false};
	for (int round = 0; round < 2; round++)
		for (uint64_t k = 1; k <= 100; k++) {
			ck_assert(htable_reserve(&t, &rec_type, &moves));
			bool added;
			struct rec *r = htable_get(&t, &rec_type, key_hash(k), &k, &moves, &added);
			ck_assert(added == (round == 0));
			if (added) {
				ck_assert(!rec_used(r));
				r->key = k;
				r->value = k * 3;
				where[k] = r;
				in[k] = true;
			}
			ck_assert_uint_eq(r->key, k);
		}
	check(&t, in);
	ck_assert_uint_eq(t.n, 100);
	htable_free(&t);
}
END_TEST

START_TEST(grows_and_moves)
{
	reset(0);
	struct htable t = {0};
	bool in[KEYS + 1] = {false};
	size_t caps = 0, last_cap = 0;
	for (uint64_t k = 1; k <= KEYS; k++) {
		add(&t, k);
		in[k] = true;
		if (t.cap != last_cap) {
			caps++;
			last_cap = t.cap;
		}
	}
	check(&t, in);
	ck_assert_uint_eq(t.cap, 2 * KEYS); /* at most half full */
	ck_assert_uint_eq(caps, 11);        /* 8, 16, …, 8192 */
	ck_assert_uint_eq(moves, 4092);     /* each growth moved every record: 4 + 8 + … + 2048 */
	htable_free(&t);
}
END_TEST

/* Random inserts and deletes against the model, spread and colliding. */
static void random_ops(uint64_t collide_with, unsigned seed)
{
	reset(collide_with);
	struct htable t = {0};
	static bool in[KEYS + 1];
	memset(in, 0, sizeof(in));
	srand(seed);
	for (int op = 0; op < 20000; op++) {
		uint64_t k = 1 + (uint64_t)rand() % (collide_with ? 300 : KEYS);
		if (in[k]) {
			del(&t, k);
			in[k] = false;
		} else {
			add(&t, k);
			in[k] = true;
		}
		if (op % 997 == 0)
			check(&t, in);
	}
	check(&t, in);
	htable_free(&t);
}

START_TEST(random_spread)
{
	random_ops(0, 1);
}
END_TEST

START_TEST(random_colliding)
{
	/* Eleven homes at the end of the slots: runs of dozens that wrap
	 * round to slot 0, where deletion must shift records across. */
	random_ops(11, 2);
	random_ops(1, 3); /* one home: every record in one run */
}
END_TEST

/* Visits every record once, deleting those `drop` says, through the iterator. */
static void iterate(struct htable *t, bool *in, bool (*drop)(uint64_t))
{
	static unsigned seen[KEYS + 1];
	static bool was[KEYS + 1];
	memcpy(was, in, sizeof(was));
	memset(seen, 0, sizeof(seen));
	struct htable_iter it;
	htable_iter_init(t, &rec_type, &it);
	for (struct rec *r; (r = htable_iter_next(t, &rec_type, &it)) != NULL;) {
		seen[r->key]++;
		if (drop(r->key)) {
			in[r->key] = false;
			where[r->key] = NULL;
			htable_iter_delete(t, &rec_type, &it, &moves);
		}
	}
	for (uint64_t k = 1; k <= KEYS; k++)
		ck_assert_uint_eq(seen[k], was[k] ? 1 : 0);
}

static bool drop_odd(uint64_t k)
{
	return k % 2 == 1;
}

static bool drop_all(uint64_t k)
{
	(void)k;
	return true;
}

static bool drop_none(uint64_t k)
{
	(void)k;
	return false;
}

START_TEST(deletion_during_iteration)
{
	uint64_t collides[] = {0, 7, 1};
	for (size_t c = 0; c < sizeof(collides) / sizeof(collides[0]); c++) {
		reset(collides[c]);
		struct htable t = {0};
		static bool in[KEYS + 1];
		memset(in, 0, sizeof(in));
		uint64_t n = collides[c] ? 200 : KEYS;
		for (uint64_t k = 1; k <= n; k++) {
			add(&t, k);
			in[k] = true;
		}
		iterate(&t, in, drop_odd);
		check(&t, in);
		iterate(&t, in, drop_none);
		check(&t, in);
		iterate(&t, in, drop_all);
		ck_assert_uint_eq(t.n, 0);
		check(&t, in);
		htable_free(&t);
	}
}
END_TEST

START_TEST(fnv1a_and_u64)
{
	/* The published FNV-1a 64 vectors. */
	ck_assert_uint_eq(hash_fnv1a(HASH_FNV1A_INIT, "", 0), UINT64_C(0xcbf29ce484222325));
	ck_assert_uint_eq(hash_fnv1a(HASH_FNV1A_INIT, "a", 1), UINT64_C(0xaf63dc4c8601ec8c));
	ck_assert_uint_eq(hash_fnv1a(HASH_FNV1A_INIT, "foobar", 6), UINT64_C(0x85944171f73967e8));
	/* in pieces as in one go */
	ck_assert_uint_eq(hash_fnv1a(hash_fnv1a(HASH_FNV1A_INIT, "foo", 3), "bar", 3),
	                  hash_fnv1a(HASH_FNV1A_INIT, "foobar", 6));
	/* consecutive integers spread over the low bits */
	unsigned hit[64] = {0};
	for (uint64_t k = 0; k < 64 * 16; k++)
		hit[hash_u64(k << 12) & 63]++;
	for (int i = 0; i < 64; i++)
		ck_assert_uint_gt(hit[i], 0);
	ck_assert_uint_ne(hash_u64_pair(1, 2), hash_u64_pair(2, 1));
}
END_TEST

static Suite *htable_suite(void)
{
	Suite *s = suite_create("htable");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, empty_table);
	tcase_add_test(tc, insert_find_delete);
	tcase_add_test(tc, grows_and_moves);
	tcase_add_test(tc, get_finds_or_adds);
	tcase_add_test(tc, random_spread);
	tcase_add_test(tc, random_colliding);
	tcase_add_test(tc, deletion_during_iteration);
	tcase_add_test(tc, fnv1a_and_u64);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("htable", htable_suite)
