/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daily: a zone resolved once, then the reset instant of a
 * daily budget across daylight-saving changes, by arithmetic alone. Every
 * expected instant was read off `TZ=zone date -d ... +%s` (tzdata 2024+):
 *   America/Los_Angeles 2026: spring forward March 8, fall back November 1
 *   America/New_York    2026: 02:00 EST -> 03:00 EDT on March 8 (07:00Z),
 *                             02:00 EDT -> 01:00 EST on November 1 (06:00Z)
 *   Europe/Berlin       2026: 02:00 CET -> 03:00 CEST on March 29 (01:00Z),
 *                             03:00 CEST -> 02:00 CET on October 25 (01:00Z)
 *   Australia/Lord_Howe 2026: half-hour changes: 02:00 +11 -> 01:30 +1030 on
 *                             April 5 (15:00Z April 4), 02:00 +1030 -> 02:30
 *                             +11 on October 4 (15:30Z October 3)
 *   Europe/Dublin       2027: its winter time is the "daylight saving" one
 *                             (negative DST): 01:00 -> 02:00 on March 28 */
#include <stdlib.h>
#include <string.h>

#include "core/daily.h"
#include "unit.h"

#define S(x) ((int64_t)(x)*1000)
#define LA "America/Los_Angeles"
#define NY "America/New_York"
#define BERLIN "Europe/Berlin"
#define LORD_HOWE "Australia/Lord_Howe"

#define JAN_2026 INT64_C(1767225600) /* 2026-01-01T00:00:00Z: where the tests resolve */

static struct daily_zone *zone(const char *name)
{
	struct daily_zone *z = daily_zone_resolve(name, JAN_2026);
	ck_assert_ptr_nonnull(z);
	return z;
}

START_TEST(midnight_pacific_across_spring_forward)
{
	struct daily_zone *z = zone(LA);
	/* Saturday 12:00 PST: the next midnight is 08:00 UTC */
	ck_assert_int_eq(daily_next_reset_ms(S(1772913600), 0, z), S(1772956800));
	/* Sunday 13:00 PDT: the next midnight is 07:00 UTC, 23 hours after the last */
	ck_assert_int_eq(daily_next_reset_ms(S(1773000000), 0, z), S(1773039600));
	ck_assert_int_eq(S(1773039600) - S(1772956800), S(23 * 3600));
	daily_zone_free(z);
}
END_TEST

START_TEST(midnight_pacific_across_fall_back)
{
	struct daily_zone *z = zone(LA);
	ck_assert_int_eq(daily_next_reset_ms(S(1793476800), 0, z), S(1793516400));
	ck_assert_int_eq(daily_next_reset_ms(S(1793563200), 0, z), S(1793606400));
	ck_assert_int_eq(S(1793606400) - S(1793516400), S(25 * 3600)); /* a 25-hour day */
	daily_zone_free(z);
}
END_TEST

START_TEST(a_time_the_clock_skips)
{
	struct daily_zone *z = zone(LA);
	/* 02:30 does not exist on March 8 in Los Angeles: as far after the gap,
	 * 03:30 PDT (10:30 UTC) */
	ck_assert_int_eq(daily_next_reset_ms(S(1772956800), 150, z), S(1772965800));
	daily_zone_free(z);
}
END_TEST

START_TEST(new_york_both_ways)
{
	struct daily_zone *z = zone(NY);
	/* the shifts themselves, to the second */
	ck_assert_int_eq(daily_zone_offset(z, 1772953199), -5 * 3600);
	ck_assert_int_eq(daily_zone_offset(z, 1772953200), -4 * 3600);
	ck_assert_int_eq(daily_zone_offset(z, 1793512799), -4 * 3600);
	ck_assert_int_eq(daily_zone_offset(z, 1793512800), -5 * 3600);
	/* midnight: Saturday noon EST -> 05:00Z; Sunday noon EDT -> 04:00Z, 23 h later */
	ck_assert_int_eq(daily_next_reset_ms(S(1772902800), 0, z), S(1772946000));
	ck_assert_int_eq(daily_next_reset_ms(S(1772985600), 0, z), S(1773028800));
	/* 02:30 on March 8 is skipped: 03:30 EDT */
	ck_assert_int_eq(daily_next_reset_ms(S(1772947800), 150, z), S(1772955000));
	/* 01:30 on November 1 comes twice: the first (EDT), once that day */
	ck_assert_int_eq(daily_next_reset_ms(S(1793505600), 90, z), S(1793511000));
	ck_assert_int_eq(daily_next_reset_ms(S(1793511000), 90, z), S(1793601000));
	ck_assert_int_eq(daily_next_reset_ms(S(1793511900), 90, z), S(1793601000));
	/* between the two readings of 01:30 (01:10 EST): that day's is done */
	ck_assert_int_eq(daily_next_reset_ms(S(1793513400), 90, z), S(1793601000));
	daily_zone_free(z);
}
END_TEST

START_TEST(berlin_both_ways)
{
	struct daily_zone *z = zone(BERLIN);
	/* midnight across the fall back: a 25-hour day */
	ck_assert_int_eq(daily_next_reset_ms(S(1792836000), 0, z), S(1792879200));
	ck_assert_int_eq(daily_next_reset_ms(S(1792926000), 0, z), S(1792969200));
	ck_assert_int_eq(S(1792969200) - S(1792879200), S(25 * 3600));
	/* 02:30 on March 29 is skipped: 03:30 CEST */
	ck_assert_int_eq(daily_next_reset_ms(S(1774738800), 150, z), S(1774747800));
	/* 02:30 on October 25 comes twice: the first, CEST */
	ck_assert_int_eq(daily_next_reset_ms(S(1792879200), 150, z), S(1792888200));
	daily_zone_free(z);
}
END_TEST

START_TEST(lord_howe_half_hours)
{
	struct daily_zone *z = zone(LORD_HOWE);
	ck_assert_int_eq(daily_zone_offset(z, 1775314799), 11 * 3600);
	ck_assert_int_eq(daily_zone_offset(z, 1775314800), 10 * 3600 + 1800);
	/* midnight across the half-hour fall back: a day of 24.5 hours */
	ck_assert_int_eq(daily_next_reset_ms(S(1775264400), 0, z), S(1775307600));
	ck_assert_int_eq(daily_next_reset_ms(S(1775352600), 0, z), S(1775395800));
	ck_assert_int_eq(S(1775395800) - S(1775307600), S(24 * 3600 + 1800));
	/* 01:45 on April 5 comes twice: the first, +11 */
	ck_assert_int_eq(daily_next_reset_ms(S(1775307600), 105, z), S(1775313900));
	/* 02:15 on October 4 is skipped (02:00 -> 02:30): 02:45 +11 */
	ck_assert_int_eq(daily_next_reset_ms(S(1791034200), 135, z), S(1791042300));
	daily_zone_free(z);
}
END_TEST

START_TEST(a_gap_in_a_zone_whose_winter_is_its_daylight_time)
{
	/* Dublin's summer time is its standard time: the C library's mktime read
	 * the skipped 01:18 the other way round here (00:18 GMT); the rule is the
	 * same in every zone: 02:18 IST */
	struct daily_zone *z = zone("Europe/Dublin");
	ck_assert_int_eq(daily_next_reset_ms(S(1806184200), 78, z), S(1806196680));
	daily_zone_free(z);
}
END_TEST

START_TEST(utc_and_the_reset_instant_itself)
{
	struct daily_zone *z = zone("UTC");
	ck_assert_uint_eq(z->n, 1);
	ck_assert_int_eq(daily_next_reset_ms(S(1795391999), 0, z), S(1795392000));
	/* at the reset instant, the next one is a day later */
	ck_assert_int_eq(daily_next_reset_ms(S(1795392000), 0, z), S(1795478400));
	ck_assert_int_eq(daily_next_reset_ms(S(1795392000) + 1, 0, NULL), S(1795478400));
	ck_assert_int_eq(daily_next_reset_ms(S(1795392000) + 1, 450, NULL),
	                 S(1795392000 + 450 * 60));
	daily_zone_free(z);
}
END_TEST

START_TEST(a_resolved_zone_reads_nothing_and_sets_nothing)
{
	setenv("TZ", "Europe/Paris", 1);
	struct daily_zone *z = zone(NY);
	ck_assert_str_eq(getenv("TZ"), "Europe/Paris"); /* put back */
	unsetenv("TZ");
	daily_zone_free(zone(NY));
	ck_assert_ptr_null(getenv("TZ"));
	/* with the database out of reach, the answers stay: they come from z */
	setenv("TZDIR", "/nonexistent", 1);
	setenv("TZ", "Asia/Tokyo", 1);
	ck_assert_int_eq(daily_next_reset_ms(S(1772902800), 0, z), S(1772946000));
	ck_assert_int_eq(daily_next_reset_ms(S(1793505600), 90, z), S(1793511000));
	ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");
	unsetenv("TZ");
	unsetenv("TZDIR");
	daily_zone_free(z);
}
END_TEST

START_TEST(the_horizon)
{
	struct daily_zone *z = zone(NY);
	/* two shifts a year for 30 years and more (from 2025: DAILY_FLOOR_S) */
	ck_assert_uint_ge(z->n, 2 * 30);
	ck_assert_uint_le(z->n, 2 * 33 + 1);
	ck_assert_int_le(z->shift[0].at_s, DAILY_FLOOR_S - 2 * 86400);
	ck_assert_int_ge(z->shift[z->n - 1].at_s, JAN_2026 + (int64_t)29 * 365 * 86400);
	/* 2050, still both ways: 02:00 EST -> 03:00 EDT on March 13 (07:00Z) */
	ck_assert_int_eq(daily_zone_offset(z, 2530767600 - 1), -5 * 3600);
	ck_assert_int_eq(daily_zone_offset(z, 2530767600), -4 * 3600);
	daily_zone_free(z);
	/* a clock not set yet at the load (1970): 2026 is still known */
	z = daily_zone_resolve(NY, 0);
	ck_assert_ptr_nonnull(z);
	ck_assert_int_eq(daily_zone_offset(z, 1772953200), -4 * 3600);
	ck_assert_int_eq(daily_next_reset_ms(S(1793505600), 90, z), S(1793511000));
	daily_zone_free(z);
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
	ck_assert(daily_zone_known(LORD_HOWE));
	ck_assert(!daily_zone_known("Mars/Olympus_Mons"));
	ck_assert(!daily_zone_known("../../etc/passwd"));
	ck_assert(!daily_zone_known("/etc/localtime"));
	ck_assert(!daily_zone_known(""));
	ck_assert(!daily_zone_known("America"));  /* a directory: glibc would read UTC */
	ck_assert(!daily_zone_known("zone.tab")); /* a file of the database, not a zone */
}
END_TEST

static Suite *daily_suite(void)
{
	Suite *s = suite_create("daily");
	TCase *tc = tcase_create("daily");
	tcase_add_test(tc, midnight_pacific_across_spring_forward);
	tcase_add_test(tc, midnight_pacific_across_fall_back);
	tcase_add_test(tc, a_time_the_clock_skips);
	tcase_add_test(tc, new_york_both_ways);
	tcase_add_test(tc, berlin_both_ways);
	tcase_add_test(tc, lord_howe_half_hours);
	tcase_add_test(tc, a_gap_in_a_zone_whose_winter_is_its_daylight_time);
	tcase_add_test(tc, utc_and_the_reset_instant_itself);
	tcase_add_test(tc, a_resolved_zone_reads_nothing_and_sets_nothing);
	tcase_add_test(tc, the_horizon);
	tcase_add_test(tc, hhmm_and_zones);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("daily", daily_suite)
