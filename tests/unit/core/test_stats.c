/* SPDX-License-Identifier: Apache-2.0 */
/* stats: the fixed-bounds histogram (cumulative buckets, sum, count, NaN and
 * negative values, the cap on bounds). Its text is metrics' (test_metrics). */
#include <math.h>

#include "core/stats.h"
#include "unit.h"

static const double b5[] = {1, 2, 3, 5, 10};

START_TEST(hist_buckets_are_cumulative)
{
	struct stats_hist h;
	stats_hist_init(&h, b5, 5);
	double v[] = {1, 1.5, 2, 4, 7, 11, 0.2};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		stats_hist_observe(&h, v[i]);
	/* <=1: 1, 0.2; <=2: + 1.5, 2; <=3: same; <=5: + 4; <=10: + 7; +Inf: + 11 */
	ck_assert_uint_eq(h.counts[0], 2);
	ck_assert_uint_eq(h.counts[1], 4);
	ck_assert_uint_eq(h.counts[2], 4);
	ck_assert_uint_eq(h.counts[3], 5);
	ck_assert_uint_eq(h.counts[4], 6);
	ck_assert_uint_eq(h.count, 7);
	ck_assert(fabs(h.sum - 26.7) < 1e-9);
	for (size_t i = 1; i < h.n_bounds; i++)
		ck_assert_uint_ge(h.counts[i], h.counts[i - 1]);
}
END_TEST

START_TEST(hist_nan_ignored_negative_is_zero)
{
	struct stats_hist h;
	stats_hist_init(&h, b5, 5);
	stats_hist_observe(&h, NAN);
	ck_assert_uint_eq(h.count, 0);
	stats_hist_observe(&h, -3);
	ck_assert_uint_eq(h.count, 1);
	ck_assert_uint_eq(h.counts[0], 1);
	ck_assert(h.sum == 0);
}
END_TEST

START_TEST(hist_bounds_capped)
{
	double many[STATS_HIST_MAX_BUCKETS + 4];
	for (size_t i = 0; i < sizeof(many) / sizeof(many[0]); i++)
		many[i] = (double)i;
	struct stats_hist h;
	stats_hist_init(&h, many, sizeof(many) / sizeof(many[0]));
	ck_assert_uint_eq(h.n_bounds, STATS_HIST_MAX_BUCKETS);
	stats_hist_observe(&h, 1000);
	ck_assert_uint_eq(h.count, 1);
	ck_assert_uint_eq(h.counts[STATS_HIST_MAX_BUCKETS - 1], 0);
}
END_TEST

static Suite *stats_suite(void)
{
	Suite *s = suite_create("stats");
	TCase *t = tcase_create("hist");
	tcase_add_test(t, hist_buckets_are_cumulative);
	tcase_add_test(t, hist_nan_ignored_negative_is_zero);
	tcase_add_test(t, hist_bounds_capped);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("stats", stats_suite)
