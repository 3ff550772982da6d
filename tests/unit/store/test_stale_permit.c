/* SPDX-License-Identifier: Apache-2.0 */
/* shared_permit_stale: which "go"s of a strict gate are too late to send. */
#include "store/shared.h"
#include "unit.h"

START_TEST(slow_gate_half_its_interval)
{
	/* 600 RPM, burst 1: 100 ms apart; a "go" held past 50 ms is stale */
	ck_assert(!shared_permit_stale(0, 100));
	ck_assert(!shared_permit_stale(49.9, 100));
	ck_assert(!shared_permit_stale(50, 100));
	ck_assert(shared_permit_stale(50.1, 100));
	/* held through a refusal's hold of a second */
	ck_assert(shared_permit_stale(1000, 100));
}
END_TEST

START_TEST(fast_gate_keeps_the_floor)
{
	/* 1,000,000 req/s: a "go" a store round trip old is not stale (it was,
	 * and the lane asked again forever) */
	ck_assert(!shared_permit_stale(0.5, 0.001));
	ck_assert(!shared_permit_stale(SHARED_STALE_MIN_MS, 0.001));
	ck_assert(shared_permit_stale(SHARED_STALE_MIN_MS + 0.1, 0.001));
	/* 10 ms apart: the floor rules below 20 ms */
	ck_assert(!shared_permit_stale(8, 10));
	ck_assert(shared_permit_stale(11, 10));
	/* early or on time is never stale */
	ck_assert(!shared_permit_stale(-5, 0.001));
}
END_TEST

static Suite *stale_permit_suite(void)
{
	Suite *s = suite_create("stale_permit");
	TCase *c = tcase_create("stale");
	tcase_add_test(c, slow_gate_half_its_interval);
	tcase_add_test(c, fast_gate_keeps_the_floor);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("stale_permit", stale_permit_suite)
