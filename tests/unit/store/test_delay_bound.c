/* SPDX-License-Identifier: Apache-2.0 */
/* delay_bound: the margin's estimator, a high quantile of recent delays, with
 * the time passed in. */
#include <math.h>

#include "store/delay_bound.h"
#include "unit.h"

START_TEST(empty_gives_the_default)
{
	struct delay_bound b = {0};
	ck_assert_double_eq(delay_bound_ms(&b, 1000, 1.5), 1.5);
	/* what is not a delay is not a sample */
	delay_bound_add(&b, -1, 1000);
	delay_bound_add(&b, NAN, 1000);
	delay_bound_add(&b, INFINITY, 1000);
	ck_assert_double_eq(delay_bound_ms(&b, 1000, 1.5), 1.5);
}
END_TEST

START_TEST(few_samples_their_largest)
{
	struct delay_bound b = {0};
	delay_bound_add(&b, 0.3, 1000);
	ck_assert_double_eq(delay_bound_ms(&b, 1000, 1), 0.3);
	delay_bound_add(&b, 0.8, 1010);
	delay_bound_add(&b, 0.2, 1020);
	/* fewer than DELAY_BOUND_FORGIVE: nothing forgiven */
	ck_assert_double_eq(delay_bound_ms(&b, 1020, 1), 0.8);
}
END_TEST

START_TEST(one_stall_is_forgiven_two_are_not)
{
	struct delay_bound b = {0};
	int64_t t = 0;
	for (int i = 0; i < 20; i++)
		delay_bound_add(&b, 0.2 + 0.01 * i, t += 100); /* 0.20 .. 0.39 */
	ck_assert_double_eq_tol(delay_bound_ms(&b, t, 1), 0.38, 1e-9);
	delay_bound_add(&b, 25, t += 100); /* the process descheduled once */
	ck_assert_double_eq_tol(delay_bound_ms(&b, t, 1), 0.39, 1e-9);
	delay_bound_add(&b, 4, t += 100); /* a slower regime: its first sample counts */
	ck_assert_double_eq_tol(delay_bound_ms(&b, t, 1), 4, 1e-9);
}
END_TEST

START_TEST(old_samples_age_out)
{
	struct delay_bound b = {0};
	for (int i = 0; i < 10; i++)
		delay_bound_add(&b, 5, 1000 + i);
	ck_assert_double_eq(delay_bound_ms(&b, 1009, 1), 5);
	/* fast again: the slow ones still count until they are old */
	for (int i = 0; i < 10; i++)
		delay_bound_add(&b, 0.5, 5000 + i);
	ck_assert_double_eq(delay_bound_ms(&b, 5009, 1), 5);
	ck_assert_double_eq(delay_bound_ms(&b, 1008 + DELAY_BOUND_AGE_MS, 1), 5);
	ck_assert_double_eq(delay_bound_ms(&b, 1010 + DELAY_BOUND_AGE_MS, 1), 0.5);
	/* and none at all: the default again */
	ck_assert_double_eq(delay_bound_ms(&b, 5010 + DELAY_BOUND_AGE_MS, 1), 1);
}
END_TEST

START_TEST(keeps_the_last_n)
{
	struct delay_bound b = {0};
	delay_bound_add(&b, 9, 0);
	delay_bound_add(&b, 9, 0);
	/* DELAY_BOUND_N newer samples push both nines out */
	for (int i = 0; i < DELAY_BOUND_N; i++)
		delay_bound_add(&b, 1, 1);
	ck_assert_double_eq(delay_bound_ms(&b, 1, 0), 1);
	ck_assert_uint_eq(b.n, DELAY_BOUND_N);
}
END_TEST

static Suite *delay_bound_suite(void)
{
	Suite *s = suite_create("delay_bound");
	TCase *c = tcase_create("estimator");
	tcase_add_test(c, empty_gives_the_default);
	tcase_add_test(c, few_samples_their_largest);
	tcase_add_test(c, one_stall_is_forgiven_two_are_not);
	tcase_add_test(c, old_samples_age_out);
	tcase_add_test(c, keeps_the_last_n);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("delay_bound", delay_bound_suite)
