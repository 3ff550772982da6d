/* Unit tests for daily: the reset instant of a daily budget, across
 * daylight-saving changes (America/Los_Angeles, 2026: spring forward on
 * March 8, fall back on November 1). */
#include <stdlib.h>
#include <string.h>

#include "core/daily.h"
#include "unit.h"

#define S(x) ((int64_t)(x)*1000)
#define LA "America/Los_Angeles"

START_TEST(midnight_pacific_across_spring_forward)
{
	/* Saturday 12:00 PST: the next midnight is 08:00 UTC */
	ck_assert_int_eq(daily_next_reset_ms(S(1772913600), 0, LA), S(1772956800));
	/* Sunday 13:00 PDT: the next midnight is 07:00 UTC, 23 hours after the last */
	ck_assert_int_eq(daily_next_reset_ms(S(1773000000), 0, LA), S(1773039600));
	ck_assert_int_eq(S(1773039600) - S(1772956800), S(23 * 3600));
}
END_TEST

START_TEST(midnight_pacific_across_fall_back)
{
	ck_assert_int_eq(daily_next_reset_ms(S(1793476800), 0, LA), S(1793516400));
	ck_assert_int_eq(daily_next_reset_ms(S(1793563200), 0, LA), S(1793606400));
	ck_assert_int_eq(S(1793606400) - S(1793516400), S(25 * 3600)); /* a 25-hour day */
}
END_TEST

START_TEST(a_time_the_clock_skips)
{
	/* 02:30 does not exist on March 8 in Los Angeles: the instant after the
	 * gap, 03:30 PDT (10:30 UTC) */
	ck_assert_int_eq(daily_next_reset_ms(S(1772956800), 150, LA), S(1772965800));
}
END_TEST

START_TEST(utc_and_the_reset_instant_itself)
{
	ck_assert_int_eq(daily_next_reset_ms(S(1795391999), 0, "UTC"), S(1795392000));
	/* at the reset instant, the next one is a day later */
	ck_assert_int_eq(daily_next_reset_ms(S(1795392000), 0, "UTC"), S(1795478400));
	ck_assert_int_eq(daily_next_reset_ms(S(1795392000) + 1, 0, NULL), S(1795478400));
}
END_TEST

START_TEST(tz_is_put_back)
{
	setenv("TZ", "Europe/Paris", 1);
	daily_next_reset_ms(S(1795391999), 0, LA);
	ck_assert_str_eq(getenv("TZ"), "Europe/Paris");
	unsetenv("TZ");
	daily_next_reset_ms(S(1795391999), 0, LA);
	ck_assert_ptr_null(getenv("TZ"));
}
END_TEST

START_TEST(hhmm_and_zones)
{
	ck_assert_int_eq(daily_parse_hhmm("00:00"), 0);
	ck_assert_int_eq(daily_parse_hhmm("23:59"), 1439);
	ck_assert_int_eq(daily_parse_hhmm("07:30"), 450);
	const char *bad[] = {"24:00", "7:00", "07:60", "0700", "07:00 ", "", "ab:cd"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(daily_parse_hhmm(bad[i]), -1);
	ck_assert(daily_zone_known("UTC"));
	ck_assert(daily_zone_known(LA));
	ck_assert(!daily_zone_known("Mars/Olympus_Mons"));
	ck_assert(!daily_zone_known("../../etc/passwd"));
	ck_assert(!daily_zone_known("/etc/localtime"));
	ck_assert(!daily_zone_known(""));
}
END_TEST

static Suite *daily_suite(void)
{
	Suite *s = suite_create("daily");
	TCase *tc = tcase_create("daily");
	tcase_add_test(tc, midnight_pacific_across_spring_forward);
	tcase_add_test(tc, midnight_pacific_across_fall_back);
	tcase_add_test(tc, a_time_the_clock_skips);
	tcase_add_test(tc, utc_and_the_reset_instant_itself);
	tcase_add_test(tc, tz_is_put_back);
	tcase_add_test(tc, hhmm_and_zones);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("daily", daily_suite)
