/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for clock: one reading per turn, a fresh one after the turn ends. */
#include <time.h>

#include "core/clock.h"
#include "unit.h"

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1)
		;
}

START_TEST(constant_within_a_turn)
{
	clock_turn_end();
	long long m0 = clock_now_ms();
	long long w0 = clock_wall_ms();
	sleep_ms(20);
	ck_assert_int_eq(clock_now_ms(), m0);
	ck_assert_int_eq(clock_wall_ms(), w0);
}
END_TEST

START_TEST(fresh_after_turn_end)
{
	clock_turn_end();
	long long m0 = clock_now_ms();
	long long w0 = clock_wall_ms();
	sleep_ms(20);
	clock_turn_end();
	long long m1 = clock_now_ms();
	long long w1 = clock_wall_ms();
	ck_assert_int_ge(m1 - m0, 19);
	ck_assert_int_lt(m1 - m0, 5000);
	/* The wall clock may be stepped, but not by minutes in a test run. */
	ck_assert_int_ge(w1 - w0, 0);
	ck_assert_int_lt(w1 - w0, 60000);
	/* And it is the wall clock: after 2020-01-01. */
	ck_assert_int_gt(w1, 1577836800000LL);
}
END_TEST

/* A turn's number is the same all through it, one more after it ends. */
START_TEST(turn_numbers)
{
	unsigned long long t = clock_turn();
	clock_now_ms();
	clock_fresh_ms();
	ck_assert_uint_eq(clock_turn(), t);
	clock_turn_end();
	ck_assert_uint_eq(clock_turn(), t + 1);
	clock_turn_end();
	ck_assert_uint_eq(clock_turn(), t + 2);
}
END_TEST

/* clock_fresh_ms reads now, and the turn goes on with that value. */
START_TEST(fresh_reads_now_and_caches_it)
{
	clock_turn_end();
	long long a = clock_now_ms();
	struct timespec d = {0, 30 * 1000 * 1000};
	nanosleep(&d, NULL);
	ck_assert_int_eq(clock_now_ms(), a); /* still the turn's time */
	long long f = clock_fresh_ms();
	ck_assert_int_ge(f - a, 25);
	ck_assert_int_eq(clock_now_ms(), f);
}
END_TEST

START_TEST(each_clock_read_lazily)
{
	/* Reading one clock does not freeze the other one's first read. */
	clock_turn_end();
	long long m0 = clock_now_ms();
	sleep_ms(20);
	long long w0 = clock_wall_ms();
	clock_turn_end();
	long long w1 = clock_wall_ms();
	ck_assert_int_ge(clock_now_ms() - m0, 19);
	ck_assert_int_lt(w1 - w0, 19);
}
END_TEST

/* clock_mono_ns reads now every time, caches nothing, and is the clock the
 * turn's milliseconds come from. */
START_TEST(mono_ns_is_now_and_not_cached)
{
	clock_turn_end();
	long long a = clock_now_ms();
	long long n0 = clock_mono_ns();
	ck_assert_int_ge(n0 / 1000000, a);
	ck_assert_int_le(n0 / 1000000 - a, 1000); /* the same clock (not a timing bound) */
	sleep_ms(20);
	long long n1 = clock_mono_ns();
	ck_assert_int_ge(n1 - n0, 19 * 1000000LL);
	ck_assert_int_eq(clock_now_ms(), a); /* the turn's time did not move */
	ck_assert_int_ge(clock_fresh_ms(), n1 / 1000000);
}
END_TEST

static Suite *clock_suite(void)
{
	Suite *s = suite_create("clock");
	TCase *t = tcase_create("turns");
	tcase_add_test(t, constant_within_a_turn);
	tcase_add_test(t, fresh_after_turn_end);
	tcase_add_test(t, turn_numbers);
	tcase_add_test(t, each_clock_read_lazily);
	tcase_add_test(t, fresh_reads_now_and_caches_it);
	tcase_add_test(t, mono_ns_is_now_and_not_cached);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("clock", clock_suite)
