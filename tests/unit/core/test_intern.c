/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for intern: sharing, reference counts, memory accounting, and
 * the hash every byte of whose input matters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/intern.h"
#include "unit.h"

START_TEST(shares_one_copy)
{
	struct intern *t = intern_new(42);
	ck_assert_ptr_nonnull(t);
	const char *a = intern_get(t, "gpt-4o-mini", 11);
	const char *b = intern_get(t, "gpt-4o-mini!", 11); /* the same 11 bytes */
	const char *c = intern_get(t, "gpt-4o", 6);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(a, b);
	ck_assert_ptr_ne(a, c);
	ck_assert_str_eq(a, "gpt-4o-mini");
	ck_assert_uint_eq(intern_len(a), 11);
	ck_assert_uint_eq(intern_count(t), 2);
	/* the empty string and NUL bytes inside are strings like others */
	const char *e = intern_get(t, "", 0);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(e, "");
	const char *z = intern_get(t, "a\0b", 3);
	ck_assert_uint_eq(intern_len(z), 3);
	ck_assert_ptr_ne(z, intern_get(t, "a", 1));
	ck_assert_ptr_null(intern_get(t, "x", INTERN_MAX_LEN + 1));
	intern_free(t);
}
END_TEST

START_TEST(refcounts_free_with_the_last)
{
	struct intern *t = intern_new(7);
	/* the table's slots, made by the first string, stay when it goes */
	intern_put(t, intern_get(t, "x", 1));
	ck_assert_uint_eq(intern_count(t), 0);
	size_t empty = intern_bytes(t);
	const char *a = intern_get(t, "claude-sonnet-4", 15);
	ck_assert_ptr_eq(intern_ref(a), a);
	ck_assert_ptr_eq(intern_get(t, "claude-sonnet-4", 15), a); /* 3 references */
	ck_assert_uint_gt(intern_bytes(t), empty);
	intern_put(t, a);
	intern_put(t, a);
	ck_assert_uint_eq(intern_count(t), 1);
	intern_put(t, a);
	ck_assert_uint_eq(intern_count(t), 0);
	ck_assert_uint_eq(intern_bytes(t), empty);
	intern_put(t, NULL); /* nothing */
	intern_free(t);
}
END_TEST

/* 100,000 holders of a few names: one copy each, a few hundred bytes. */
START_TEST(many_holders_few_names)
{
	struct intern *t = intern_new(1);
	static const char *const names[] = {"gpt-4o", "gpt-4o-mini", "claude-sonnet-4",
	                                    "claude-haiku-4-5"};
	const char **held = malloc(100000 * sizeof(*held));
	for (int i = 0; i < 100000; i++) {
		const char *n = names[i % 4];
		held[i] = intern_get(t, n, strlen(n));
		ck_assert_ptr_nonnull(held[i]);
	}
	ck_assert_uint_eq(intern_count(t), 4);
	ck_assert_uint_lt(intern_bytes(t), 2048);
	for (int i = 0; i < 100000; i++)
		intern_put(t, held[i]);
	ck_assert_uint_eq(intern_count(t), 0);
	free(held);
	intern_free(t);
}
END_TEST

/* Many distinct names: the table grows, every name is found again, and
 * releasing them in another order leaves it empty. */
START_TEST(grows_and_shrinks)
{
	struct intern *t = intern_new(99);
	enum { N = 20000 };
	const char **held = malloc(N * sizeof(*held));
	char buf[32];
	for (int i = 0; i < N; i++) {
		int n = snprintf(buf, sizeof buf, "model-%d", i);
		held[i] = intern_get(t, buf, (size_t)n);
		ck_assert_ptr_nonnull(held[i]);
	}
	ck_assert_uint_eq(intern_count(t), N);
	for (int i = 0; i < N; i++) {
		int n = snprintf(buf, sizeof buf, "model-%d", i);
		const char *again = intern_get(t, buf, (size_t)n);
		ck_assert_ptr_eq(again, held[i]);
		intern_put(t, again);
	}
	for (int i = N - 1; i >= 0; i -= 2)
		intern_put(t, held[i]);
	for (int i = N - 2; i >= 0; i -= 2)
		intern_put(t, held[i]);
	ck_assert_uint_eq(intern_count(t), 0);
	free(held);
	intern_free(t);
}
END_TEST

START_TEST(hash_every_byte_counts)
{
	unsigned char buf[300];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	for (size_t n = 0; n <= sizeof buf; n += (n < 70 ? 1 : 37)) {
		uint64_t h = intern_hash(buf, n, 5);
		ck_assert_uint_eq(h, intern_hash(buf, n, 5));
		ck_assert_uint_ne(h, intern_hash(buf, n, 6));
		if (n > 0)
			ck_assert_uint_ne(h, intern_hash(buf, n - 1, 5));
		for (size_t i = 0; i < n; i++) {
			buf[i] ^= 1;
			ck_assert_uint_ne(h, intern_hash(buf, n, 5));
			buf[i] ^= 1;
		}
	}
}
END_TEST

static Suite *intern_suite(void)
{
	Suite *s = suite_create("intern");
	TCase *c = tcase_create("intern");
	tcase_set_timeout(c, 30);
	tcase_add_test(c, shares_one_copy);
	tcase_add_test(c, refcounts_free_with_the_last);
	tcase_add_test(c, many_holders_few_names);
	tcase_add_test(c, grows_and_shrinks);
	tcase_add_test(c, hash_every_byte_counts);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("intern", intern_suite)
