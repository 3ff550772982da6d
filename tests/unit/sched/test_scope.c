/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for scope: keys joining the scope their answers name, the
 * request's own identity, and the table's bounds. (Configured scopes are the
 * caller's: proxy/lanes.c.) */
#include <stdint.h>
#include <string.h>

#include "sched/scope.h"
#include "unit.h"

#define K1 0x3fa2b1c0d9e80001ULL
#define K2 0x7c01aa5512340002ULL
#define K3 0x0123456789ab0003ULL
#define PROJ_A 0xa1a1a1a1a1a1a1a1ULL
#define PROJ_B 0xb2b2b2b2b2b2b2b2ULL
#define TEAM 0x5eed5eed5eed5eedULL

START_TEST(key_is_own_scope)
{
	struct scope_table t;
	scope_init(&t, 100, 0);
	uint64_t s = scope_of(&t, K1, 0, 0);
	ck_assert_uint_eq(s, scope_id(SCOPE_KEY, K1));
	ck_assert_uint_ne(s, scope_of(&t, K2, 0, 0));
	ck_assert_int_eq(scope_kind_of(s), SCOPE_KEY);
	char buf[32];
	scope_format(s, buf, sizeof(buf));
	ck_assert_str_eq(buf, "key:3fa2b1c0d9e8"); /* the key's own 12 hex digits */
	scope_format(scope_id(SCOPE_IDENTITY, PROJ_A), buf, sizeof(buf));
	ck_assert_str_eq(buf, "id:a1a1a1a1a1a1");
	scope_format(scope_id(SCOPE_NAMED, TEAM), buf, sizeof(buf));
	ck_assert_str_eq(buf, "scope:5eed5eed5eed");
	/* the kinds never collide, even for one hash */
	ck_assert_uint_ne(scope_id(SCOPE_KEY, PROJ_A), scope_id(SCOPE_IDENTITY, PROJ_A));
	ck_assert_uint_ne(scope_id(SCOPE_NAMED, PROJ_A), scope_id(SCOPE_IDENTITY, PROJ_A));
	ck_assert_uint_eq(scope_count(&t), 0);
	ck_assert_uint_eq(scope_heap_bytes(&t), 0);
	scope_free(&t);
}
END_TEST

START_TEST(two_keys_learn_one_identity)
{
	struct scope_table t;
	scope_init(&t, 100, 0);
	ck_assert_int_eq(scope_learn(&t, K1, 0, PROJ_A, 10), 1);
	ck_assert_int_eq(scope_learn(&t, K1, 0, PROJ_A, 20), 0); /* nothing new */
	ck_assert_int_eq(scope_learn(&t, K2, 0, PROJ_A, 30), 1);
	uint64_t s = scope_of(&t, K1, 0, 40);
	ck_assert_uint_eq(s, scope_of(&t, K2, 0, 40));
	ck_assert_uint_eq(s, scope_id(SCOPE_IDENTITY, PROJ_A));
	/* an answer without identity teaches nothing */
	ck_assert_int_eq(scope_learn(&t, K1, 0, 0, 50), 0);
	ck_assert_uint_eq(scope_of(&t, K1, 0, 60), s);
	scope_free(&t);
}
END_TEST

START_TEST(other_identity_apart)
{
	struct scope_table t;
	scope_init(&t, 100, 0);
	scope_learn(&t, K1, 0, PROJ_A, 0);
	scope_learn(&t, K2, 0, PROJ_A, 0);
	scope_learn(&t, K3, 0, PROJ_B, 0);
	ck_assert_uint_ne(scope_of(&t, K3, 0, 1), scope_of(&t, K1, 0, 1));
	ck_assert_uint_eq(scope_of(&t, K3, 0, 1), scope_id(SCOPE_IDENTITY, PROJ_B));
	/* a key nobody learned anything about stays alone */
	ck_assert_uint_eq(scope_of(&t, 42, 0, 1), scope_id(SCOPE_KEY, 42));
	ck_assert_uint_eq(scope_count(&t), 3);
	scope_free(&t);
}
END_TEST

START_TEST(identity_changes_followed)
{
	struct scope_table t;
	scope_init(&t, 100, 0);
	scope_learn(&t, K1, 0, PROJ_A, 0);
	scope_learn(&t, K2, 0, PROJ_A, 0);
	/* K1 moved to project B */
	ck_assert_int_eq(scope_learn(&t, K1, 0, PROJ_B, 10), 1);
	ck_assert_uint_eq(scope_of(&t, K1, 0, 11), scope_id(SCOPE_IDENTITY, PROJ_B));
	ck_assert_uint_eq(scope_of(&t, K2, 0, 11), scope_id(SCOPE_IDENTITY, PROJ_A));
	ck_assert_uint_eq(scope_count(&t), 2);
	scope_free(&t);
}
END_TEST

START_TEST(request_identity_first)
{
	struct scope_table t;
	scope_init(&t, 100, 0);
	scope_learn(&t, K2, 0, PROJ_A, 0);
	/* a key billing two projects has two budgets */
	ck_assert_uint_eq(scope_of(&t, K3, PROJ_A, 1), scope_id(SCOPE_IDENTITY, PROJ_A));
	ck_assert_uint_eq(scope_of(&t, K3, PROJ_B, 1), scope_id(SCOPE_IDENTITY, PROJ_B));
	/* over a learned scope */
	ck_assert_uint_eq(scope_of(&t, K2, PROJ_B, 1), scope_id(SCOPE_IDENTITY, PROJ_B));
	/* and a request naming the project its key's answers name shares that budget */
	ck_assert_uint_eq(scope_of(&t, K3, PROJ_A, 1), scope_of(&t, K2, 0, 1));
	/* answers to such requests say nothing about the key */
	ck_assert_int_eq(scope_learn(&t, K3, PROJ_B, PROJ_B, 2), 0);
	ck_assert_uint_eq(scope_of(&t, K3, 0, 3), scope_id(SCOPE_KEY, K3));
	ck_assert_uint_eq(scope_peek(&t, K2, PROJ_B), scope_id(SCOPE_IDENTITY, PROJ_B));
	scope_free(&t);
}
END_TEST

START_TEST(eviction_bound)
{
	struct scope_table t;
	scope_init(&t, 100, 0);
	for (uint64_t k = 1; k <= 100; k++)
		scope_learn(&t, k, 0, PROJ_A, (int64_t)k);
	/* key 1 is used again: key 2 is now the least recently used */
	scope_of(&t, 1, 0, 1000);
	size_t bytes = scope_heap_bytes(&t);
	for (uint64_t k = 1000; k < 11000; k++) {
		scope_learn(&t, k, 0, k % 2 ? PROJ_A : PROJ_B, (int64_t)k);
		if (k == 1000) {
			ck_assert_uint_eq(scope_peek(&t, 2, 0), scope_id(SCOPE_KEY, 2));
			ck_assert_uint_eq(scope_peek(&t, 1, 0), scope_id(SCOPE_IDENTITY, PROJ_A));
		}
		ck_assert_uint_le(scope_count(&t), 100);
	}
	ck_assert_uint_eq(scope_count(&t), 100);
	ck_assert_uint_le(scope_heap_bytes(&t), bytes);
	ck_assert_uint_le(scope_heap_bytes(&t), 128 * 48);
	/* the newest 100 are kept */
	for (uint64_t k = 10900; k < 11000; k++)
		ck_assert_uint_eq(scope_peek(&t, k, 0),
		                  scope_id(SCOPE_IDENTITY, k % 2 ? PROJ_A : PROJ_B));
	ck_assert_uint_eq(scope_peek(&t, 1, 0), scope_id(SCOPE_KEY, 1));
	scope_free(&t);
	ck_assert_uint_eq(scope_heap_bytes(&t), 0);
}
END_TEST

START_TEST(idle_expiry)
{
	struct scope_table t;
	scope_init(&t, 100, 60000);
	scope_learn(&t, K1, 0, PROJ_A, 0);
	scope_learn(&t, K2, 0, PROJ_A, 0);
	ck_assert_uint_eq(scope_of(&t, K1, 0, 60000), scope_id(SCOPE_IDENTITY, PROJ_A));
	/* K2 idle past the TTL: dropped on the next call; K1 was used at 60 s */
	ck_assert_uint_eq(scope_of(&t, K3, 0, 60001), scope_id(SCOPE_KEY, K3));
	ck_assert_uint_eq(scope_count(&t), 1);
	ck_assert_uint_eq(scope_of(&t, K2, 0, 60002), scope_id(SCOPE_KEY, K2));
	ck_assert_uint_eq(scope_of(&t, K1, 0, 120000), scope_id(SCOPE_IDENTITY, PROJ_A));
	ck_assert_uint_eq(scope_of(&t, K1, 0, 180001), scope_id(SCOPE_KEY, K1));
	ck_assert_uint_eq(scope_count(&t), 0);
	scope_free(&t);
}
END_TEST

/* Across a restart: the learned entries least recently used first; learned
 * again in that order, the table answers and expires as before. */
START_TEST(save_and_learn_back)
{
	struct scope_table t, u;
	scope_init(&t, 100, 60000);
	scope_learn(&t, K1, 0, PROJ_A, 1000);
	scope_learn(&t, K2, 0, PROJ_A, 2000);
	scope_learn(&t, K3, 0, PROJ_B, 3000);
	scope_of(&t, K1, 0, 4000); /* K1 used last */
	struct scope_saved s[8];
	ck_assert_uint_eq(scope_save(&t, s, 8), 3);
	ck_assert_uint_eq(s[0].key, K2);
	ck_assert_uint_eq(s[1].key, K3);
	ck_assert_uint_eq(s[2].key, K1);
	ck_assert_int_eq(s[2].last_ms, 4000);
	ck_assert_uint_eq(s[1].identity, PROJ_B);
	ck_assert_uint_eq(scope_save(&t, s, 2), 2);
	scope_init(&u, 100, 60000);
	scope_save(&t, s, 8);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(scope_learn(&u, s[i].key, 0, s[i].identity, s[i].last_ms), 1);
	ck_assert_uint_eq(scope_peek(&u, K3, 0), scope_id(SCOPE_IDENTITY, PROJ_B));
	/* K2 (2000) expires first, K1 (4000) last */
	scope_of(&u, 0x99ULL, 0, 62001);
	ck_assert_uint_eq(scope_count(&u), 2);
	ck_assert_uint_eq(scope_peek(&u, K2, 0), scope_id(SCOPE_KEY, K2));
	ck_assert_uint_eq(scope_peek(&u, K1, 0), scope_id(SCOPE_IDENTITY, PROJ_A));
	scope_free(&t);
	scope_free(&u);
}
END_TEST

/* ---- against a reference model: random operations on a few keys ---- */

#define REF_KEYS 48
#define REF_MAX 12

struct ref_key {
	bool present;
	uint64_t learned;
	uint64_t seq; /* LRU order of the entries */
};

static uint64_t ref_scope(const struct ref_key *r, uint64_t key)
{
	if (r->present && r->learned)
		return scope_id(SCOPE_IDENTITY, r->learned);
	return scope_id(SCOPE_KEY, key);
}

static void ref_evict(struct ref_key *ref)
{
	size_t n = 0, victim = REF_KEYS;
	for (size_t i = 0; i < REF_KEYS; i++) {
		if (!ref[i].present)
			continue;
		n++;
		if (victim == REF_KEYS || ref[i].seq < ref[victim].seq)
			victim = i;
	}
	if (n > REF_MAX)
		ref[victim].present = false;
}

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

START_TEST(matches_reference_model)
{
	struct scope_table t;
	scope_init(&t, REF_MAX, 0);
	struct ref_key ref[REF_KEYS];
	memset(ref, 0, sizeof(ref));
	uint32_t s = 2463534242u;
	uint64_t seq = 1;
	/* keys that collide in the index: only their low bits differ */
	uint64_t keys[REF_KEYS];
	for (size_t i = 0; i < REF_KEYS; i++)
		keys[i] = (uint64_t)i << 58 | (i % 3);
	for (int step = 0; step < 20000; step++) {
		size_t i = rnd(&s) % REF_KEYS;
		uint64_t id = 1 + rnd(&s) % 4;
		struct ref_key *r = &ref[i];
		switch (rnd(&s) % 3) {
		case 0:
		case 1: { /* learn */
			uint64_t before = ref_scope(r, keys[i]);
			if (!r->present) {
				r->present = true;
				r->seq = seq++;
				r->learned = id;
				ref_evict(ref);
			} else {
				r->learned = id;
				r->seq = seq++;
			}
			int rc = scope_learn(&t, keys[i], 0, id, step);
			ck_assert_int_eq(rc, ref_scope(r, keys[i]) != before);
			break;
		}
		default: /* a request */
			if (r->present)
				r->seq = seq++;
			ck_assert_uint_eq(scope_of(&t, keys[i], 0, step), ref_scope(r, keys[i]));
			break;
		}
		size_t n = 0;
		for (size_t k = 0; k < REF_KEYS; k++) {
			n += ref[k].present;
			ck_assert_uint_eq(scope_peek(&t, keys[k], 0), ref_scope(&ref[k], keys[k]));
		}
		ck_assert_uint_eq(scope_count(&t), n);
	}
	scope_free(&t);
}
END_TEST

static Suite *scope_suite(void)
{
	Suite *s = suite_create("scope");
	TCase *tc = tcase_create("scope");
	tcase_add_test(tc, key_is_own_scope);
	tcase_add_test(tc, two_keys_learn_one_identity);
	tcase_add_test(tc, other_identity_apart);
	tcase_add_test(tc, identity_changes_followed);
	tcase_add_test(tc, request_identity_first);
	suite_add_tcase(s, tc);
	TCase *mem = tcase_create("memory");
	tcase_add_test(mem, eviction_bound);
	tcase_add_test(mem, idle_expiry);
	tcase_add_test(mem, save_and_learn_back);
	tcase_add_test(mem, matches_reference_model);
	suite_add_tcase(s, mem);
	return s;
}

UNIT_MAIN("scope", scope_suite)
