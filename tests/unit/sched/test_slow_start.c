/* SPDX-License-Identifier: Apache-2.0 */
/* slow_start: rounds of requests sent, the verdict once half of one is
 * back (twice the most in flight, or the end when more than a fifth waited),
 * what counts in no round, a first burst adopted as a round. */
#include "sched/slow_start.h"
#include "unit.h"

/* n requests sent, in flight counting up from `from` */
static void sent(struct slow_start *s, unsigned n, size_t from)
{
	for (unsigned i = 1; i <= n; i++)
		slow_start_sent(s, from + i);
}

START_TEST(doubles_once_half_a_round_is_back)
{
	struct slow_start s;
	slow_start_begin(&s, 100, 0);
	ck_assert(s.on);
	sent(&s, 4, 0);
	unsigned next = 0;
	/* answers free their slots: 3 in flight after the first */
	ck_assert_int_eq(slow_start_back(&s, 200, 100, false, 3, &next), SLOW_START_WAIT);
	ck_assert_int_eq(slow_start_back(&s, 201, 100, false, 2, &next), SLOW_START_GROW);
	/* the most in flight during the round, not what is left */
	ck_assert_uint_eq(next, 8);
	ck_assert_int_eq(s.round_ms, 201);
	ck_assert_uint_eq(s.sent, 0);
	/* the previous round's other answers count in none */
	ck_assert_int_eq(slow_start_back(&s, 202, 100, false, 1, &next), SLOW_START_WAIT);
	ck_assert_int_eq(slow_start_back(&s, 203, 100, true, 0, &next), SLOW_START_WAIT);
	ck_assert_uint_eq(s.clean + s.waited, 0);
	/* the next round: 8 sent, 4 back -> 16 */
	sent(&s, 8, 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(slow_start_back(&s, 300 + i, 210, false, 7 - i, &next),
		                 SLOW_START_WAIT);
	ck_assert_int_eq(slow_start_back(&s, 303, 210, false, 4, &next), SLOW_START_GROW);
	ck_assert_uint_eq(next, 16);
}
END_TEST

START_TEST(streams_keep_their_slots)
{
	/* what is in flight when they come back counts toward the most (the
	 * latency controller's first tokens: streams stay in flight) */
	struct slow_start s;
	slow_start_begin(&s, 0, 0);
	for (int i = 0; i < 20; i++)
		slow_start_sent(&s, 0); /* in flight not told */
	unsigned next = 0;
	for (int i = 0; i < 9; i++)
		ck_assert_int_eq(slow_start_back(&s, 100 + i, 10, false, 20, &next),
		                 SLOW_START_WAIT);
	ck_assert_int_eq(slow_start_back(&s, 110, 10, false, 20, &next), SLOW_START_GROW);
	ck_assert_uint_eq(next, 40);
}
END_TEST

START_TEST(too_many_waits_end_it)
{
	struct slow_start s;
	slow_start_begin(&s, 0, 0);
	sent(&s, 10, 0);
	unsigned next = 7;
	/* 2 of 5 back waited: more than a fifth */
	slow_start_back(&s, 100, 10, true, 9, &next);
	slow_start_back(&s, 101, 10, false, 8, &next);
	slow_start_back(&s, 102, 10, false, 7, &next);
	slow_start_back(&s, 103, 10, true, 6, &next);
	ck_assert_int_eq(slow_start_back(&s, 104, 10, false, 5, &next), SLOW_START_END);
	ck_assert(!s.on);
	ck_assert_uint_eq(next, 7); /* untouched */
	/* one in five is noise */
	slow_start_begin(&s, 0, 0);
	sent(&s, 10, 0);
	slow_start_back(&s, 100, 10, true, 9, &next);
	for (int i = 0; i < 3; i++)
		slow_start_back(&s, 101 + i, 10, false, 8 - i, &next);
	ck_assert_int_eq(slow_start_back(&s, 104, 10, false, 5, &next), SLOW_START_GROW);
	ck_assert_uint_eq(next, 20);
	/* once over, nothing counts */
	slow_start_end(&s);
	slow_start_sent(&s, 1);
	ck_assert_int_eq(slow_start_back(&s, 200, 150, false, 0, &next), SLOW_START_WAIT);
}
END_TEST

START_TEST(a_first_burst_is_adopted_as_the_first_round)
{
	/* 4 went out before the lane knew it would start slowly (its provider
	 * was not known silent yet): their answers are the first round */
	struct slow_start s;
	slow_start_adopt(&s, INT64_MIN / 2, 4, 4);
	ck_assert(s.on);
	unsigned next = 0;
	ck_assert_int_eq(slow_start_back(&s, 300, 100, false, 3, &next), SLOW_START_WAIT);
	ck_assert_int_eq(slow_start_back(&s, 300, 100, false, 2, &next), SLOW_START_GROW);
	ck_assert_uint_eq(next, 8);
	/* requests already out when it began count in no round */
	slow_start_begin(&s, 1000, 6);
	ck_assert_uint_eq(s.most, 6);
	ck_assert_int_eq(slow_start_back(&s, 1100, 900, false, 5, &next), SLOW_START_WAIT);
	ck_assert_uint_eq(s.clean, 0);
}
END_TEST

static Suite *slow_start_suite(void)
{
	Suite *s = suite_create("slow_start");
	TCase *c = tcase_create("core");
	tcase_add_test(c, doubles_once_half_a_round_is_back);
	tcase_add_test(c, streams_keep_their_slots);
	tcase_add_test(c, too_many_waits_end_it);
	tcase_add_test(c, a_first_burst_is_adopted_as_the_first_round);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("slow_start", slow_start_suite)
