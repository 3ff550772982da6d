/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for aimd: adaptive concurrency and the dispatch delay. */
#include <string.h>

#include "core/config.h"
#include "sched/aimd.h"
#include "unit.h"

static struct plan_conf plan(void)
{
	struct plan_conf p;
	memset(&p, 0, sizeof(p));
	p.max_concurrent = 64;
	p.concurrency.adaptive = true;
	p.concurrency.min = 1;
	p.concurrency.decrease_factor = 0.5;
	p.dispatch_delay.adaptive = true;
	p.dispatch_delay.min_ms = 0;
	p.dispatch_delay.max_ms = 5000;
	p.dispatch_delay.backoff_multiplier = 1.5;
	p.dispatch_delay.recovery_rps = 3;
	return p;
}

/* A limit closed at `limit` by a first capacity signal long ago (2 × limit in
 * flight, × 0.5), so that the lockout of later signals is over. */
static void closed_at(struct aimd *a, unsigned limit, unsigned min, unsigned max)
{
	aimd_init(a, true, min, max, 0.5);
	ck_assert(aimd_on_capacity_signal(a, -1000000, 2 * (size_t)limit));
	ck_assert(!a->open);
	ck_assert_uint_eq(aimd_limit(a), limit);
}

/* One round: as many saturated successes as the limit. */
static void round_of_successes(struct aimd *a, int64_t now_ms)
{
	unsigned n = aimd_limit(a);
	for (unsigned i = 0; i < n; i++)
		aimd_on_success(a, now_ms, 0, true);
}

START_TEST(starts_open_at_max)
{
	struct plan_conf p = plan();
	struct aimd a;
	aimd_init_plan(&a, &p);
	ck_assert(a.open);
	ck_assert_uint_eq(aimd_limit(&a), 64);
	/* successes say nothing while open: it stays at max */
	for (int i = 0; i < 100; i++)
		aimd_on_success(&a, i, 100, true);
	ck_assert_uint_eq(aimd_limit(&a), 64);
}
END_TEST

START_TEST(first_signal_closes_at_in_flight_times_factor)
{
	struct aimd a;
	aimd_init(&a, true, 1, 64, 0.5);
	ck_assert(aimd_on_capacity_signal(&a, 0, 20));
	ck_assert(!a.open);
	ck_assert_uint_eq(aimd_limit(&a), 10);
	/* the burst's other signals within one RTT are the same signal */
	ck_assert(!aimd_on_capacity_signal(&a, 10, 19));
	ck_assert_uint_eq(aimd_limit(&a), 10);
	/* more in flight than the ceiling: from the ceiling */
	aimd_init(&a, true, 1, 8, 0.5);
	ck_assert(aimd_on_capacity_signal(&a, 0, 100));
	ck_assert_uint_eq(aimd_limit(&a), 4);
	/* one in flight: the floor */
	aimd_init(&a, true, 2, 8, 0.5);
	ck_assert(aimd_on_capacity_signal(&a, 0, 1));
	ck_assert_uint_eq(aimd_limit(&a), 2);
}
END_TEST

START_TEST(reopen_after_idleness)
{
	struct aimd a;
	closed_at(&a, 4, 1, 64);
	aimd_reopen(&a);
	ck_assert(a.open);
	ck_assert_uint_eq(aimd_limit(&a), 64);
	/* and closes again from what is in flight then, with no lockout left */
	ck_assert(aimd_on_capacity_signal(&a, 0, 30));
	ck_assert_uint_eq(aimd_limit(&a), 15);
	/* a fixed limit never opens */
	aimd_init(&a, false, 1, 10, 0.5);
	aimd_reopen(&a);
	ck_assert(!a.open);
	ck_assert_uint_eq(aimd_limit(&a), 10);
}
END_TEST

START_TEST(plus_one_per_saturated_round)
{
	struct aimd a;
	closed_at(&a, 4, 1, 64);
	round_of_successes(&a, 0);
	ck_assert_uint_eq(aimd_limit(&a), 5);
	round_of_successes(&a, 0);
	ck_assert_uint_eq(aimd_limit(&a), 6);
	for (int i = 0; i < 4; i++)
		round_of_successes(&a, 0);
	ck_assert_uint_eq(aimd_limit(&a), 10);
}
END_TEST

START_TEST(partial_round_is_not_enough)
{
	struct aimd a;
	closed_at(&a, 4, 1, 64);
	for (int i = 0; i < 3; i++)
		aimd_on_success(&a, 0, 0, true);
	ck_assert_uint_eq(aimd_limit(&a), 4);
	aimd_on_success(&a, 0, 0, true);
	ck_assert_uint_eq(aimd_limit(&a), 5);
}
END_TEST

START_TEST(no_growth_when_not_saturated)
{
	struct aimd a;
	closed_at(&a, 4, 1, 64);
	for (int i = 0; i < 1000; i++)
		aimd_on_success(&a, i, 100, false);
	ck_assert_uint_eq(aimd_limit(&a), 4);
}
END_TEST

START_TEST(growth_stops_at_max)
{
	struct aimd a;
	closed_at(&a, 3, 1, 6);
	for (int i = 0; i < 100; i++)
		round_of_successes(&a, 0);
	ck_assert_uint_eq(aimd_limit(&a), 6);
}
END_TEST

START_TEST(capacity_signal_halves)
{
	struct aimd a;
	closed_at(&a, 16, 1, 64);
	ck_assert(aimd_on_capacity_signal(&a, 0, 0));
	ck_assert_uint_eq(aimd_limit(&a), 8);
}
END_TEST

START_TEST(burst_of_signals_counts_once)
{
	struct aimd a;
	closed_at(&a, 32, 1, 64);
	aimd_on_success(&a, 0, 1000, false); /* RTT ~1 s */
	ck_assert(aimd_on_capacity_signal(&a, 10000, 0));
	int decreased = 0;
	for (int i = 1; i < 10; i++)
		decreased += aimd_on_capacity_signal(&a, 10000 + i * 20, 0);
	ck_assert_int_eq(decreased, 0);
	ck_assert_uint_eq(aimd_limit(&a), 16);
}
END_TEST

START_TEST(second_signal_after_rtt_counts)
{
	struct aimd a;
	closed_at(&a, 32, 1, 64);
	ck_assert(aimd_on_capacity_signal(&a, 0, 0));
	ck_assert(!aimd_on_capacity_signal(&a, 999, 0)); /* initial RTT 1 s */
	ck_assert(aimd_on_capacity_signal(&a, 1000, 0));
	ck_assert_uint_eq(aimd_limit(&a), 8);
}
END_TEST

START_TEST(rtt_follows_latencies)
{
	struct aimd a;
	closed_at(&a, 32, 1, 64);
	for (int i = 0; i < 50; i++)
		aimd_on_success(&a, 0, 5000, false);
	ck_assert_double_eq_tol(a.rtt_ms, 5000, 1);
	ck_assert(aimd_on_capacity_signal(&a, 100000, 0));
	ck_assert(!aimd_on_capacity_signal(&a, 104000, 0));
	ck_assert(aimd_on_capacity_signal(&a, 105001, 0));
}
END_TEST

START_TEST(decrease_bounded_by_min)
{
	struct aimd a;
	closed_at(&a, 8, 2, 64);
	for (int i = 0; i < 10; i++)
		aimd_on_capacity_signal(&a, (int64_t)i * 100000, 0);
	ck_assert_uint_eq(aimd_limit(&a), 2);
}
END_TEST

START_TEST(long_retry_after_does_not_freeze)
{
	/* a 429 with an hour's retry-after, the lane holds, then comes back */
	struct aimd a;
	closed_at(&a, 16, 1, 64);
	ck_assert(aimd_on_capacity_signal(&a, 0, 0));
	/* the requests that waited the hour report their latency: clamped */
	for (int i = 0; i < 10; i++)
		aimd_on_success(&a, 3600000, 3600000, false);
	ck_assert(a.rtt_ms <= AIMD_RTT_MAX_MS);
	/* growth resumes at once after the hold, one per round */
	unsigned before = aimd_limit(&a);
	round_of_successes(&a, 3600001);
	ck_assert_uint_eq(aimd_limit(&a), before + 1);
	/* a new overload is heard, and the one after it too: the lockout is one
	 * clamped RTT, never the length of a retry-after */
	ck_assert(aimd_on_capacity_signal(&a, 3700000, 0));
	ck_assert(aimd_on_capacity_signal(&a, 3700000 + (int64_t)AIMD_RTT_MAX_MS, 0));
}
END_TEST

START_TEST(latency_samples_clamped)
{
	struct aimd a;
	closed_at(&a, 4, 1, 64);
	for (int i = 0; i < 100; i++)
		aimd_observe_rtt(&a, 1e9);
	ck_assert(a.rtt_ms <= AIMD_RTT_MAX_MS);
	for (int i = 0; i < 100; i++)
		aimd_observe_rtt(&a, 0.001);
	ck_assert(a.rtt_ms >= AIMD_RTT_MIN_MS);
	double r = a.rtt_ms;
	aimd_observe_rtt(&a, -1);
	aimd_observe_rtt(&a, 0);
	ck_assert(a.rtt_ms == r);
}
END_TEST

START_TEST(recovers_after_decrease)
{
	struct aimd a;
	closed_at(&a, 8, 1, 64);
	aimd_on_capacity_signal(&a, 0, 0);
	ck_assert_uint_eq(aimd_limit(&a), 4);
	for (int i = 0; i < 4; i++)
		round_of_successes(&a, 1000);
	ck_assert_uint_eq(aimd_limit(&a), 8);
}
END_TEST

START_TEST(not_adaptive_stays_at_max)
{
	struct plan_conf p = plan();
	p.concurrency.adaptive = false;
	p.max_concurrent = 10;
	struct aimd a;
	aimd_init_plan(&a, &p);
	ck_assert_uint_eq(aimd_limit(&a), 10);
	ck_assert(!aimd_on_capacity_signal(&a, 0, 0));
	round_of_successes(&a, 0);
	ck_assert_uint_eq(aimd_limit(&a), 10);
}
END_TEST

START_TEST(init_corrects_arguments)
{
	struct aimd a;
	aimd_init(&a, true, 0, 8, 1.5);
	ck_assert_uint_eq(aimd_limit(&a), 8); /* open: at max */
	ck_assert_uint_eq(a.min, 1);
	ck_assert(a.decrease_factor == 0.5);
	aimd_init(&a, true, 3, 2, 0.5); /* max < min */
	ck_assert_uint_eq(a.max, 3);
	ck_assert_uint_eq(aimd_limit(&a), 3);
}
END_TEST

START_TEST(reconfigure_clamps)
{
	struct plan_conf p = plan();
	struct aimd a;
	aimd_init_plan(&a, &p);
	ck_assert(aimd_on_capacity_signal(&a, -1000000, 8));
	for (int i = 0; i < 20; i++)
		round_of_successes(&a, 0);
	ck_assert_uint_eq(aimd_limit(&a), 24);
	p.max_concurrent = 10;
	aimd_reconfigure(&a, &p);
	ck_assert_uint_eq(aimd_limit(&a), 10);
	p.concurrency.adaptive = false;
	aimd_reconfigure(&a, &p);
	ck_assert_uint_eq(aimd_limit(&a), 10);
	p.concurrency.adaptive = true;
	aimd_reconfigure(&a, &p);
	ck_assert(a.open); /* adaptive afresh: open */
	ck_assert_uint_eq(aimd_limit(&a), 10);
}
END_TEST

/* --- dispatch delay ----------------------------------------------------- */

START_TEST(delay_starts_at_zero)
{
	struct plan_conf p = plan();
	struct aimd_delay d;
	aimd_delay_init_plan(&d, &p);
	ck_assert_int_eq(aimd_delay_ms(&d), 0);
	ck_assert_int_eq(aimd_delay_ready_at(&d, 7), 7);
}
END_TEST

START_TEST(delay_backoff_sequence)
{
	/* no success seen: the start value, then x1.5, clamped at max */
	struct plan_conf p = plan();
	struct aimd_delay d;
	aimd_delay_init_plan(&d, &p);
	const int64_t want[] = {100, 150, 225, 338, 507, 760, 1140, 1709, 2563, 3845, 5000, 5000};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		aimd_delay_on_capacity(&d, 1000);
		ck_assert_int_eq(aimd_delay_ms(&d), want[i]);
	}
}
END_TEST

START_TEST(delay_first_cut_from_the_last_second)
{
	/* 20 successes in the second before the first refusal: 20 req/s was
	 * too much; the spacing starts at 50 ms x 1.5 (13.3 req/s) */
	struct plan_conf p = plan();
	struct aimd_delay d;
	aimd_delay_init_plan(&d, &p);
	for (int i = 0; i < 20; i++)
		aimd_delay_on_success(&d, 1000 + i * 50);
	aimd_delay_on_capacity(&d, 2010);
	ck_assert_int_eq(aimd_delay_ms(&d), 75);
	/* a window with nothing for over two seconds forgets the rate */
	aimd_delay_init_plan(&d, &p);
	for (int i = 0; i < 20; i++)
		aimd_delay_on_success(&d, 1000 + i * 50);
	aimd_delay_on_capacity(&d, 5000);
	ck_assert_int_eq(aimd_delay_ms(&d), 100);
}
END_TEST

START_TEST(delay_recovery_adds_a_rate_per_second)
{
	/* at 5 req/s (200 ms), 3 req/s are gained per second of successes,
	 * whatever the rate: 5 successes take it to ~8 req/s, not to 0 ms */
	struct aimd_delay d;
	aimd_delay_init(&d, true, 0, 5000, 1.5, 3);
	d.delay_ms = 200;
	for (int i = 0; i < 5; i++)
		aimd_delay_on_success(&d, 1000 + i * 200);
	double rate = 1000.0 / d.delay_ms;
	ck_assert(rate > 7.5 && rate < 8.2);
	/* at 20 req/s a second of successes (20) adds 3 too */
	d.delay_ms = 50;
	for (int i = 0; i < 20; i++)
		aimd_delay_on_success(&d, 3000 + i * 50);
	rate = 1000.0 / d.delay_ms;
	ck_assert(rate > 22.8 && rate < 23.2);
	/* far above any rate a spacing means: open again */
	d.delay_ms = 1.0;
	aimd_delay_on_success(&d, 5000);
	ck_assert_int_eq(aimd_delay_ms(&d), 0);
}
END_TEST

START_TEST(delay_min_floor)
{
	struct plan_conf p = plan();
	p.dispatch_delay.min_ms = 300;
	struct aimd_delay d;
	aimd_delay_init_plan(&d, &p);
	ck_assert_int_eq(aimd_delay_ms(&d), 300);
	aimd_delay_on_capacity(&d, 1000);
	ck_assert_int_eq(aimd_delay_ms(&d), 450);
	for (int i = 0; i < 1000; i++)
		aimd_delay_on_success(&d, 1000 + i);
	ck_assert_int_eq(aimd_delay_ms(&d), 300);
}
END_TEST

START_TEST(delay_start_above_max_clamped)
{
	struct aimd_delay d;
	aimd_delay_init(&d, true, 0, 50, 2.0, 3);
	aimd_delay_on_capacity(&d, 1000); /* 100 clamped to max 50 */
	ck_assert_int_eq(aimd_delay_ms(&d), 50);
}
END_TEST

START_TEST(delay_disabled)
{
	struct plan_conf p = plan();
	p.dispatch_delay.adaptive = false;
	struct aimd_delay d;
	aimd_delay_init_plan(&d, &p);
	for (int i = 0; i < 5; i++)
		aimd_delay_on_capacity(&d, 1000);
	ck_assert_int_eq(aimd_delay_ms(&d), 0);
	aimd_delay_charge(&d, 1000);
	ck_assert_int_eq(aimd_delay_ready_at(&d, 1000), 1000);
}
END_TEST

START_TEST(delay_ready_at_spacing)
{
	struct plan_conf p = plan();
	struct aimd_delay d;
	aimd_delay_init_plan(&d, &p);
	aimd_delay_on_capacity(&d, 1000);
	aimd_delay_on_capacity(&d, 1000); /* 150 */
	aimd_delay_charge(&d, 1000);
	ck_assert_int_eq(aimd_delay_ready_at(&d, 1000), 1150);
	ck_assert_int_eq(aimd_delay_ready_at(&d, 1500), 1500);
}
END_TEST

START_TEST(delay_other_multiplier)
{
	struct aimd_delay d;
	aimd_delay_init(&d, true, 0, 10000, 2.0, 3);
	aimd_delay_on_capacity(&d, 1000);
	aimd_delay_on_capacity(&d, 1000);
	ck_assert_int_eq(aimd_delay_ms(&d), 200);
	aimd_delay_init(&d, true, 0, 10000, 0.5, -1); /* corrected to 1.5 and 3 */
	aimd_delay_on_capacity(&d, 1000);
	aimd_delay_on_capacity(&d, 1000);
	ck_assert_int_eq(aimd_delay_ms(&d), 150);
	ck_assert(d.recovery_rps == 3);
}
END_TEST

/* Across a restart: the limit and the delay where they stood, within the
 * bounds of now; an open limit stays open; the RTT clamped. */
START_TEST(save_and_resume)
{
	struct aimd a, b;
	struct aimd_delay d, e;
	aimd_init(&a, true, 1, 64, 0.5);
	aimd_delay_init(&d, true, 0, 5000, 1.5, 3);
	ck_assert(aimd_on_capacity_signal(&a, 1000, 20)); /* closed at 10 */
	aimd_observe_rtt(&a, 400);
	aimd_delay_on_capacity(&d, 1000);
	aimd_delay_on_capacity(&d, 1000);
	struct aimd_saved s;
	aimd_save(&a, &d, &s);
	ck_assert(!s.open);
	ck_assert(s.limit == 10);
	aimd_init(&b, true, 1, 64, 0.5);
	aimd_delay_init(&e, true, 0, 5000, 1.5, 3);
	aimd_resume(&b, &e, &s);
	ck_assert_uint_eq(aimd_limit(&b), 10);
	ck_assert(!b.open);
	ck_assert(b.rtt_ms == a.rtt_ms);
	ck_assert_int_eq(aimd_delay_ms(&e), aimd_delay_ms(&d));
	/* a plan that allows less now: clamped */
	aimd_init(&b, true, 1, 6, 0.5);
	aimd_delay_init(&e, true, 0, 120, 1.5, 3);
	aimd_resume(&b, &e, &s);
	ck_assert_uint_eq(aimd_limit(&b), 6);
	ck_assert_int_eq(aimd_delay_ms(&e), 120);
	/* not adaptive: nothing taken */
	aimd_init(&b, false, 1, 64, 0.5);
	aimd_delay_init(&e, false, 7, 120, 1.5, 3);
	aimd_resume(&b, &e, &s);
	ck_assert_uint_eq(aimd_limit(&b), 64);
	ck_assert_int_eq(aimd_delay_ms(&e), 7);
	/* an open limit stays open */
	s.open = true;
	aimd_init(&b, true, 1, 64, 0.5);
	aimd_resume(&b, &e, &s);
	ck_assert(b.open);
	ck_assert_uint_eq(aimd_limit(&b), 64);
}
END_TEST

/* --- a slow start's window while open (issue 30) --------------------- */

START_TEST(open_limit_at_a_slow_start_window)
{
	struct aimd a;
	aimd_init(&a, true, 1, 64, 0.5);
	aimd_start(&a, 4);
	ck_assert(a.open && a.starting);
	ck_assert_uint_eq(aimd_limit(&a), 4);
	/* successes alone do not move it: the caller's round trips do */
	for (int i = 0; i < 10; i++)
		aimd_on_success(&a, i, 100, true);
	ck_assert_uint_eq(aimd_limit(&a), 4);
	ck_assert(aimd_start_grow(&a, 8));
	ck_assert_uint_eq(aimd_limit(&a), 8);
	/* never shrinks */
	ck_assert(!aimd_start_grow(&a, 6));
	ck_assert_uint_eq(aimd_limit(&a), 8);
	/* at max it is simply open */
	ck_assert(aimd_start_grow(&a, 100));
	ck_assert(!a.starting && a.open);
	ck_assert_uint_eq(aimd_limit(&a), 64);
	ck_assert(!aimd_start_grow(&a, 200));
	/* a window at max or over: open at once */
	aimd_init(&a, true, 1, 64, 0.5);
	aimd_start(&a, 64);
	ck_assert(!a.starting);
	/* within [min, max] */
	aimd_init(&a, true, 3, 64, 0.5);
	aimd_start(&a, 1);
	ck_assert_uint_eq(aimd_limit(&a), 3);
}
END_TEST

START_TEST(a_refusal_ends_the_slow_start)
{
	struct aimd a;
	aimd_init(&a, true, 1, 64, 0.5);
	aimd_start(&a, 8);
	/* 8 in flight refused: closed at 8 x 0.5, no longer starting */
	ck_assert(aimd_on_capacity_signal(&a, 1000, 8));
	ck_assert(!a.open && !a.starting);
	ck_assert_uint_eq(aimd_limit(&a), 4);
	ck_assert(!aimd_start_grow(&a, 16));
	aimd_start(&a, 16); /* closed: no effect */
	ck_assert_uint_eq(aimd_limit(&a), 4);
	/* reopened (idle): open at max, the caller starts it again */
	aimd_reopen(&a);
	ck_assert(a.open && !a.starting);
	ck_assert_uint_eq(aimd_limit(&a), 64);
	/* stopped: open at max */
	aimd_start(&a, 4);
	aimd_start_stop(&a);
	ck_assert_uint_eq(aimd_limit(&a), 64);
	/* not adaptive: never */
	aimd_init(&a, false, 1, 64, 0.5);
	aimd_start(&a, 4);
	ck_assert(!a.starting);
	ck_assert_uint_eq(aimd_limit(&a), 64);
}
END_TEST

START_TEST(reconfigure_keeps_the_window)
{
	struct plan_conf p = plan();
	struct aimd a;
	aimd_init_plan(&a, &p);
	aimd_start(&a, 16);
	p.max_concurrent = 10;
	aimd_reconfigure(&a, &p);
	ck_assert(!a.starting); /* the new max is under the window: open */
	ck_assert_uint_eq(aimd_limit(&a), 10);
	p.max_concurrent = 64;
	aimd_reconfigure(&a, &p);
	aimd_start(&a, 16);
	p.max_concurrent = 32;
	aimd_reconfigure(&a, &p);
	ck_assert(a.starting);
	ck_assert_uint_eq(aimd_limit(&a), 16);
}
END_TEST

START_TEST(delay_converged_paces_at_a_rate)
{
	struct aimd_delay d;
	aimd_delay_init(&d, true, 0, 5000, 1.5, 3);
	aimd_delay_converged(&d, 8);
	ck_assert_int_eq(aimd_delay_ms(&d), 125);
	aimd_delay_converged(&d, 0.1); /* clamped to max_ms */
	ck_assert_int_eq(aimd_delay_ms(&d), 5000);
	aimd_delay_converged(&d, 0); /* no rate: nothing changes */
	ck_assert_int_eq(aimd_delay_ms(&d), 5000);
	aimd_delay_init(&d, false, 0, 5000, 1.5, 3);
	aimd_delay_converged(&d, 8); /* not adaptive */
	ck_assert_int_eq(aimd_delay_ms(&d), 0);
}
END_TEST

static Suite *aimd_suite(void)
{
	Suite *s = suite_create("aimd");
	TCase *c = tcase_create("concurrency");
	tcase_add_test(c, starts_open_at_max);
	tcase_add_test(c, first_signal_closes_at_in_flight_times_factor);
	tcase_add_test(c, reopen_after_idleness);
	tcase_add_test(c, plus_one_per_saturated_round);
	tcase_add_test(c, partial_round_is_not_enough);
	tcase_add_test(c, no_growth_when_not_saturated);
	tcase_add_test(c, growth_stops_at_max);
	tcase_add_test(c, capacity_signal_halves);
	tcase_add_test(c, burst_of_signals_counts_once);
	tcase_add_test(c, second_signal_after_rtt_counts);
	tcase_add_test(c, rtt_follows_latencies);
	tcase_add_test(c, decrease_bounded_by_min);
	tcase_add_test(c, long_retry_after_does_not_freeze);
	tcase_add_test(c, latency_samples_clamped);
	tcase_add_test(c, recovers_after_decrease);
	tcase_add_test(c, not_adaptive_stays_at_max);
	tcase_add_test(c, init_corrects_arguments);
	tcase_add_test(c, reconfigure_clamps);
	tcase_add_test(c, save_and_resume);
	tcase_add_test(c, open_limit_at_a_slow_start_window);
	tcase_add_test(c, a_refusal_ends_the_slow_start);
	tcase_add_test(c, reconfigure_keeps_the_window);
	suite_add_tcase(s, c);
	TCase *d = tcase_create("dispatch_delay");
	tcase_add_test(d, delay_starts_at_zero);
	tcase_add_test(d, delay_backoff_sequence);
	tcase_add_test(d, delay_first_cut_from_the_last_second);
	tcase_add_test(d, delay_recovery_adds_a_rate_per_second);
	tcase_add_test(d, delay_min_floor);
	tcase_add_test(d, delay_start_above_max_clamped);
	tcase_add_test(d, delay_disabled);
	tcase_add_test(d, delay_ready_at_spacing);
	tcase_add_test(d, delay_other_multiplier);
	tcase_add_test(d, delay_converged_paces_at_a_rate);
	suite_add_tcase(s, d);
	return s;
}

UNIT_MAIN("aimd", aimd_suite)
