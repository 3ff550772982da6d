/* SPDX-License-Identifier: Apache-2.0 */
/* batch: permits per decision, from the lane's rate, its burst, the round
 * trip and its waiting requests. */
#include <math.h>

#include "store/batch.h"
#include "unit.h"

START_TEST(idle_and_slow_lanes_one_per_request)
{
	/* one request waiting */
	ck_assert_uint_eq(batch_size(1, 16, 0.001, 1000, 0.3), 1);
	/* 600 RPM: T = 100 ms against a 0.3 ms round trip */
	ck_assert_uint_eq(batch_size(16, 16, 100, 100, 0.3), 1);
	/* 100 req/s, 2 ms round trip: 4 × 2 / 10 < 1 */
	ck_assert_uint_eq(batch_size(16, 16, 10, 100, 2), 1);
}
END_TEST

START_TEST(busy_lanes_by_rate_and_round_trip)
{
	/* 10k req/s (T 0.1 ms), 0.3 ms round trip: ceil(12) */
	ck_assert_uint_eq(batch_size(64, 64, 0.1, 1000, 0.3), 12);
	/* 1000 req/s, 0.5 ms: ceil(2) */
	ck_assert_uint_eq(batch_size(64, 64, 1, 1000, 0.5), 2);
	/* far above the load: the waiting requests and max_k bound it (burst 1e6) */
	ck_assert_uint_eq(batch_size(9, 16, 0.001, 1e6, 0.3), 9);
	ck_assert_uint_eq(batch_size(64, 16, 0.001, 1e6, 0.3), 16);
}
END_TEST

START_TEST(never_beyond_half_the_burst)
{
	ck_assert_uint_eq(batch_size(64, 16, 0.001, 10, 0.3), 5);
	ck_assert_uint_eq(batch_size(64, 16, 0.001, 11.9, 0.3), 5);
	ck_assert_uint_eq(batch_size(64, 16, 0.001, 4, 0.3), 2);
	/* no burst, or too little for two at half of it: one per request */
	ck_assert_uint_eq(batch_size(64, 16, 0.001, 1, 0.3), 1);
	ck_assert_uint_eq(batch_size(64, 16, 0.001, 3.9, 0.3), 1);
}
END_TEST

START_TEST(the_early_bound_holds)
{
	/* (k - 1) T < 4 round trips, whatever the rate */
	for (double t = 0.01; t < 50; t *= 1.7)
		for (double rtt = 0.05; rtt < 20; rtt *= 2.3) {
			unsigned k = batch_size(1000, 1000, t, 1e9, rtt);
			ck_assert_msg((k - 1) * t < 4 * rtt + 1e-9, "k %u T %g rtt %g", k, t, rtt);
			ck_assert_uint_ge(k, 1);
		}
}
END_TEST

START_TEST(nonsense_is_one)
{
	ck_assert_uint_eq(batch_size(0, 16, 0.1, 100, 0.3), 1);
	ck_assert_uint_eq(batch_size(16, 0, 0.1, 100, 0.3), 1);
	ck_assert_uint_eq(batch_size(16, 16, 0, 100, 0.3), 1);
	ck_assert_uint_eq(batch_size(16, 16, INFINITY, 100, 0.3), 1);
	ck_assert_uint_eq(batch_size(16, 16, 0.1, NAN, 0.3), 1);
	ck_assert_uint_eq(batch_size(16, 16, 0.1, 100, 0), 1);
	ck_assert_uint_eq(batch_size(16, 16, 0.1, 100, NAN), 1);
}
END_TEST

static Suite *batch_suite(void)
{
	Suite *s = suite_create("batch");
	TCase *c = tcase_create("size");
	tcase_add_test(c, idle_and_slow_lanes_one_per_request);
	tcase_add_test(c, busy_lanes_by_rate_and_round_trip);
	tcase_add_test(c, never_beyond_half_the_burst);
	tcase_add_test(c, the_early_bound_holds);
	tcase_add_test(c, nonsense_is_one);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("batch", batch_suite)
