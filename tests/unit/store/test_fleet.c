/* SPDX-License-Identifier: Apache-2.0 */
/* fleet: the divisor of the local fallback, a pure function of the heartbeats
 * heard and their times (issue 30). */
#include "store/fleet.h"
#include "unit.h"

START_TEST(before_any_beat_the_configured_count)
{
	struct fleet f;
	fleet_init(&f, 4);
	ck_assert(!fleet_heard_any(&f));
	ck_assert_uint_eq(fleet_divisor(&f), 4);
	/* replicas left unset (or 0) means one: pace at the whole limit */
	fleet_init(&f, 0);
	ck_assert_uint_eq(fleet_divisor(&f), 1);
}
END_TEST

START_TEST(the_first_beat_replaces_the_configured_count)
{
	struct fleet f;
	fleet_init(&f, 1); /* store.redis.replicas not set */
	fleet_heard(&f, 3, 1000);
	ck_assert(fleet_heard_any(&f));
	ck_assert_uint_eq(fleet_divisor(&f), 3);
	/* and a fleet smaller than configured divides by what it is */
	fleet_init(&f, 8);
	fleet_heard(&f, 2, 1000);
	ck_assert_uint_eq(fleet_divisor(&f), 2);
	/* an answer of 0 still counts this replica */
	fleet_init(&f, 5);
	fleet_heard(&f, 0, 1000);
	ck_assert_uint_eq(fleet_divisor(&f), 1);
}
END_TEST

START_TEST(a_rise_is_believed_at_once)
{
	struct fleet f;
	fleet_init(&f, 1);
	fleet_heard(&f, 2, 1000);
	fleet_heard(&f, 5, 2000);
	ck_assert_uint_eq(fleet_divisor(&f), 5);
}
END_TEST

START_TEST(a_fall_is_believed_after_it_held_for_the_ttl)
{
	struct fleet f;
	fleet_init(&f, 1);
	int64_t t = 1000;
	fleet_heard(&f, 3, t);
	/* one replica gone: its absence is certain only after FLEET_TTL_MS */
	for (int64_t dt = 0; dt < FLEET_TTL_MS; dt += FLEET_BEAT_MS) {
		fleet_heard(&f, 2, t + FLEET_BEAT_MS + dt);
		ck_assert_uint_eq(fleet_divisor(&f), 3);
	}
	fleet_heard(&f, 2, t + FLEET_BEAT_MS + FLEET_TTL_MS);
	ck_assert_uint_eq(fleet_divisor(&f), 2);
}
END_TEST

START_TEST(a_fall_takes_the_largest_count_of_its_time)
{
	struct fleet f;
	fleet_init(&f, 1);
	fleet_heard(&f, 6, 0);
	fleet_heard(&f, 2, 1000);
	fleet_heard(&f, 4, 2000); /* a beat late: 4 were still there */
	fleet_heard(&f, 3, 3000);
	ck_assert_uint_eq(fleet_divisor(&f), 6);
	fleet_heard(&f, 3, 4000);
	ck_assert_uint_eq(fleet_divisor(&f), 4);
	/* and the next fall waits its own time */
	fleet_heard(&f, 3, 5000);
	ck_assert_uint_eq(fleet_divisor(&f), 4);
	fleet_heard(&f, 3, 8000);
	ck_assert_uint_eq(fleet_divisor(&f), 3);
}
END_TEST

START_TEST(a_rise_during_a_fall_cancels_it)
{
	struct fleet f;
	fleet_init(&f, 1);
	fleet_heard(&f, 3, 0);
	fleet_heard(&f, 1, 1000);
	fleet_heard(&f, 3, 2000); /* everyone is back */
	fleet_heard(&f, 2, 3500);
	fleet_heard(&f, 2, 4500);
	/* the fall that counts started at 3500, not 1000 */
	ck_assert_uint_eq(fleet_divisor(&f), 3);
	fleet_heard(&f, 2, 6500);
	ck_assert_uint_eq(fleet_divisor(&f), 2);
}
END_TEST

/* Redis restarted empty after an outage: the first answers count only the
 * replicas that beat since. If the store fails again within the TTL, the
 * divisor is still the fleet's, not the few that beat first. */
START_TEST(a_store_restarted_empty_keeps_the_fleet)
{
	struct fleet f;
	fleet_init(&f, 1);
	for (int64_t t = 0; t <= 5000; t += FLEET_BEAT_MS)
		fleet_heard(&f, 3, t);
	/* down from 5500 to 20000: no beat answered */
	fleet_heard(&f, 1, 20000); /* this replica beat first */
	ck_assert_uint_eq(fleet_divisor(&f), 3);
	fleet_heard(&f, 2, 20400);
	ck_assert_uint_eq(fleet_divisor(&f), 3);
	fleet_heard(&f, 3, 21000);
	ck_assert_uint_eq(fleet_divisor(&f), 3);
	/* and the time passed while down does not count as time the lower
	 * count held */
	fleet_init(&f, 1);
	fleet_heard(&f, 3, 0);
	fleet_heard(&f, 1, 60000);
	ck_assert_uint_eq(fleet_divisor(&f), 3);
}
END_TEST

START_TEST(a_clock_that_goes_back_restarts_the_fall)
{
	struct fleet f;
	fleet_init(&f, 1);
	fleet_heard(&f, 3, 10000);
	fleet_heard(&f, 2, 10000);
	fleet_heard(&f, 2, 5000); /* not a monotonic clock: start again from here */
	ck_assert_uint_eq(fleet_divisor(&f), 3);
	fleet_heard(&f, 2, 5000 + FLEET_TTL_MS);
	ck_assert_uint_eq(fleet_divisor(&f), 2);
}
END_TEST

static Suite *fleet_suite(void)
{
	Suite *s = suite_create("fleet");
	TCase *c = tcase_create("divisor");
	tcase_add_test(c, before_any_beat_the_configured_count);
	tcase_add_test(c, the_first_beat_replaces_the_configured_count);
	tcase_add_test(c, a_rise_is_believed_at_once);
	tcase_add_test(c, a_fall_is_believed_after_it_held_for_the_ttl);
	tcase_add_test(c, a_fall_takes_the_largest_count_of_its_time);
	tcase_add_test(c, a_rise_during_a_fall_cancels_it);
	tcase_add_test(c, a_store_restarted_empty_keeps_the_fleet);
	tcase_add_test(c, a_clock_that_goes_back_restarts_the_fall);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("fleet", fleet_suite)
