/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for grow: doubling, and the limit a declared length sets. */
#include <stdlib.h>

#include "core/grow.h"
#include "unit.h"

START_TEST(doubles_from_first)
{
	char *b = NULL;
	size_t cap = 0;
	ck_assert(grow_bytes(&b, &cap, 10, 4096));
	ck_assert_uint_eq(cap, 4096);
	ck_assert(grow_bytes(&b, &cap, 4096, 4096));
	ck_assert_uint_eq(cap, 4096); /* enough already */
	ck_assert(grow_bytes(&b, &cap, 4097, 4096));
	ck_assert_uint_eq(cap, 8192);
	ck_assert(grow_bytes(&b, &cap, 40000, 4096));
	ck_assert_uint_eq(cap, 65536);
	free(b);
}
END_TEST

START_TEST(never_past_the_limit)
{
	char *b = NULL;
	size_t cap = 0;
	/* a 32 MiB declaration and 10 bytes: the first step, not 32 MiB */
	ck_assert(grow_bytes_upto(&b, &cap, 10, 16384, 32u << 20));
	ck_assert_uint_eq(cap, 16384);
	/* a small declaration: exactly it */
	char *c = NULL;
	size_t ccap = 0;
	ck_assert(grow_bytes_upto(&c, &ccap, 10, 16384, 1000));
	ck_assert_uint_eq(ccap, 1000);
	free(c);
	/* doubling stops at the limit */
	ck_assert(grow_bytes_upto(&b, &cap, 16385, 16384, 100000));
	ck_assert_uint_eq(cap, 32768);
	ck_assert(grow_bytes_upto(&b, &cap, 70000, 16384, 100000));
	ck_assert_uint_eq(cap, 100000);
	ck_assert(grow_bytes_upto(&b, &cap, 100000, 16384, 100000));
	ck_assert_uint_eq(cap, 100000);
	/* a need above the limit still gets its room */
	ck_assert(grow_bytes_upto(&b, &cap, 100001, 16384, 100000));
	ck_assert_uint_eq(cap, 100001);
	free(b);
}
END_TEST

static Suite *grow_suite(void)
{
	Suite *s = suite_create("grow");
	TCase *tc = tcase_create("grow");
	tcase_add_test(tc, doubles_from_first);
	tcase_add_test(tc, never_past_the_limit);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("grow", grow_suite)
