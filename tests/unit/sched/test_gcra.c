/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for gcra: single gates and the gate set of a lane. */
#include <math.h>
#include <string.h>

#include "core/config.h"
#include "sched/gcra.h"
#include "unit.h"

static struct plan_conf plan(void)
{
	struct plan_conf p;
	memset(&p, 0, sizeof(p));
	p.burst = 1;
	return p;
}

/* Dispatches n units of `cost` as soon as the gate allows, from t = 0; returns the
 * instant of the last one. */
static int64_t run_gate(struct gcra *g, int n, double cost)
{
	int64_t t = 0;
	for (int i = 0; i < n; i++) {
		t = gcra_ready_at(g, t, cost);
		gcra_charge(g, t, cost);
	}
	return t;
}

START_TEST(even_spacing_600rpm)
{
	struct gcra g;
	gcra_init(&g, 60000.0 / 600, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 0);
	gcra_charge(&g, 0, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 100);
	ck_assert_int_eq(gcra_ready_at(&g, 50, 1), 100);
	ck_assert_int_eq(gcra_ready_at(&g, 100, 1), 100);
	gcra_charge(&g, 100, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 100, 1), 200);
}
END_TEST

/* 1,000,000 per second with burst 1: the millisecond clock cannot space units
 * 1 µs apart, so a millisecond's worth passes at once, and no more. */
START_TEST(faster_than_the_clock)
{
	struct gcra g;
	gcra_init(&g, 0.001, 1);
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 0);
		gcra_charge(&g, 0, 1);
	}
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 1);
	/* Steady state: 1000 per millisecond, over 50 ms exactly 50,000. */
	int passed = 0;
	for (int64_t t = 1; t <= 50; t++)
		while (gcra_ready_at(&g, t, 1) == t) {
			gcra_charge(&g, t, 1);
			passed++;
		}
	ck_assert_int_eq(passed, 50000);
	/* 4000 per second (T = 0.25 ms): 4 per millisecond. */
	gcra_init(&g, 0.25, 1);
	passed = 0;
	for (int64_t t = 0; t < 1000; t++)
		while (gcra_ready_at(&g, t, 1) == t) {
			gcra_charge(&g, t, 1);
			passed++;
		}
	ck_assert_int_eq(passed, 4000);
}
END_TEST

START_TEST(idle_gate_is_ready_now)
{
	struct gcra g;
	gcra_init(&g, 100, 1);
	gcra_charge(&g, 0, 1);
	/* long idle: ready at once, and no credit is banked beyond burst 1 */
	ck_assert_int_eq(gcra_ready_at(&g, 5000, 1), 5000);
	gcra_charge(&g, 5000, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 5000, 1), 5100);
}
END_TEST

START_TEST(burst_then_spacing)
{
	struct gcra g;
	gcra_init(&g, 100, 5);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 0);
		gcra_charge(&g, 0, 1);
	}
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 100);
	gcra_charge(&g, 100, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 100, 1), 200);
}
END_TEST

START_TEST(burst_refills_to_tolerance_only)
{
	struct gcra g;
	gcra_init(&g, 100, 3);
	run_gate(&g, 3, 1); /* all at t = 0 */
	/* after 10 s idle, exactly 3 again pass at once, not 100 */
	int64_t t = 10000;
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(gcra_ready_at(&g, t, 1), t);
		gcra_charge(&g, t, 1);
	}
	ck_assert_int_eq(gcra_ready_at(&g, t, 1), t + 100);
}
END_TEST

START_TEST(partial_refill_after_short_idle)
{
	struct gcra g;
	gcra_init(&g, 100, 4);
	run_gate(&g, 4, 1); /* TAT = 400 */
	/* 250 ms later two units have been earned back */
	ck_assert_int_eq(gcra_ready_at(&g, 250, 1), 250);
	gcra_charge(&g, 250, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 250, 1), 250);
	gcra_charge(&g, 250, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 250, 1), 300);
}
END_TEST

START_TEST(disabled_gate_always_open)
{
	struct gcra g;
	gcra_init(&g, 0, 1);
	ck_assert(!gcra_enabled(&g));
	gcra_charge(&g, 0, 1000);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1e9), 0);
	gcra_init(&g, NAN, 1);
	ck_assert(!gcra_enabled(&g));
	gcra_init(&g, -5, 1);
	ck_assert(!gcra_enabled(&g));
}
END_TEST

START_TEST(fractional_interval_rounds_up)
{
	struct gcra g;
	gcra_init(&g, 1000.0 / 3, 1);
	gcra_charge(&g, 0, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 334);
	/* on the precise clock the unit leaves at 333.33 and the next one
	 * 333.33 later: no rounding is carried into the schedule */
	ck_assert(gcra_ready_at_precise(&g, 0, 1) > 333.33 &&
	          gcra_ready_at_precise(&g, 0, 1) < 333.34);
	gcra_charge(&g, gcra_ready_at_precise(&g, 0, 1), 1);
	ck_assert_int_eq(gcra_ready_at(&g, 334, 1), 667);
	/* on the millisecond clock a burst-1 gate charged at 334 (0.67 ms
	 * late) restarts from there: 667.33, rounded up */
	gcra_init(&g, 1000.0 / 3, 1);
	gcra_charge(&g, 0, 1);
	gcra_charge(&g, 334, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 334, 1), 668);
}
END_TEST

START_TEST(no_drift_with_fractional_interval)
{
	struct gcra g;
	gcra_init(&g, 1000.0 / 3, 1); /* 3 rps, on the precise clock */
	double t = 0;
	for (int i = 0; i < 301; i++) {
		t = gcra_ready_at_precise(&g, t, 1);
		gcra_charge(&g, t, 1);
	}
	/* 300 intervals of 333.33 ms: 100 s, within a millisecond */
	ck_assert(t >= 99999 && t <= 100001);
}
END_TEST

START_TEST(simulation_1000_requests_600rpm)
{
	struct gcra g;
	gcra_init(&g, 60000.0 / 600, 1);
	int64_t last = run_gate(&g, 1000, 1);
	/* the 1000th starts at 99.9 s and the run ends one interval later */
	int64_t total = last + 100;
	ck_assert_int_ge(total, 99000);
	ck_assert_int_le(total, 101000);
}
END_TEST

START_TEST(simulation_with_late_timer)
{
	/* a loop that wakes 3 ms late every time still never exceeds the rate */
	struct gcra g;
	gcra_init(&g, 100, 1);
	int64_t t = 0, first = -1;
	for (int i = 0; i < 100; i++) {
		int64_t r = gcra_ready_at(&g, t, 1);
		t = r + 3;
		ck_assert_int_ge(t - first, first < 0 ? 0 : 100);
		gcra_charge(&g, t, 1);
		first = t;
	}
}
END_TEST

/* Dispatches n units, each `late(i)` ms after the gate allows it, into t[]. */
static void run_late(struct gcra *g, int n, int64_t *t, int (*late)(int))
{
	int64_t now = 0;
	for (int i = 0; i < n; i++) {
		now = gcra_ready_at(g, now, 1) + late(i);
		gcra_charge(g, now, 1);
		t[i] = now;
	}
}

static int late_jitter(int i)
{
	return (i * 7) % 5; /* 0..4 ms, as timer wake-ups are */
}

START_TEST(late_wakeups_do_not_drift)
{
	/* 10 req/s with a burst of 2, every dispatch 0-4 ms late: the schedule
	 * holds (the burst forgives a request's worth of lateness), so 300
	 * requests span 299 intervals plus at most one lateness (not 299 of
	 * them: 9.7 req/s), and no 1-s window holds more than burst + 10. */
	struct gcra g;
	gcra_init(&g, 100, 2);
	int64_t t[300];
	gcra_charge(&g, 0, 1); /* the burst spent: every unit waits its turn */
	run_late(&g, 300, t, late_jitter);
	ck_assert_int_ge(t[299] - t[0], 29900 - 4);
	ck_assert_int_le(t[299] - t[0], 29900 + 4);
	for (int i = 0, j = 0; i < 300; i++) {
		while (t[i] - t[j] >= 1000)
			j++;
		ck_assert_int_le(i - j + 1, 12);
	}
}
END_TEST

START_TEST(burst_one_never_spaces_closer_than_t)
{
	/* Burst 1: a provider's bucket of one refuses anything sooner than T
	 * after the previous arrival, so a late unit is not counted on
	 * schedule: every gap is at least T, and the lateness shows in the
	 * rate instead (before: a unit 4 ms late let the next go 96 ms after). */
	struct gcra g;
	gcra_init(&g, 100, 1);
	int64_t t[300];
	run_late(&g, 300, t, late_jitter);
	for (int i = 1; i < 300; i++)
		ck_assert_int_ge(t[i] - t[i - 1], 100);
	ck_assert_int_le(t[299] - t[0], 299 * 104);
}
END_TEST

START_TEST(sent_keeps_the_distance_from_the_send)
{
	/* Charged at its dispatch (0), the request left 0.8 ms later: the next
	 * goes T (and the strict margin) after the send, not after the
	 * decision. */
	struct gcra g;
	gcra_init(&g, 100, 1);
	gcra_charge(&g, 0, 1);
	ck_assert(gcra_ready_at_precise(&g, 0, 1) == 100);
	gcra_sent(&g, 0.8, 1, GCRA_STRICT_MARGIN);
	double at = gcra_ready_at_precise(&g, 0, 1);
	ck_assert(at >= 100.8 + 100 * GCRA_STRICT_MARGIN - 1e-9);
	ck_assert(at <= 100.8 + 100 * GCRA_STRICT_MARGIN + 1e-9);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 102);
	/* a send reported late (after later charges) never moves it back */
	gcra_charge(&g, 102, 1);
	double tat = gcra_ready_at_precise(&g, 0, 1);
	gcra_sent(&g, 0.9, 1, GCRA_STRICT_MARGIN);
	ck_assert(gcra_ready_at_precise(&g, 0, 1) == tat);
	/* with a burst of 2 the slack covers a send 5 ms after its decision:
	 * nothing moves (the schedule stays drift-free) */
	gcra_init(&g, 100, 2);
	gcra_charge(&g, 0, 1);
	gcra_charge(&g, 0, 1);
	double before = gcra_ready_at_precise(&g, 0, 1);
	gcra_sent(&g, 5, 1, GCRA_STRICT_MARGIN);
	ck_assert(gcra_ready_at_precise(&g, 0, 1) == before);
	/* a disabled gate ignores it */
	gcra_init(&g, 0, 1);
	gcra_sent(&g, 5, 1, GCRA_STRICT_MARGIN);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 0);
	ck_assert(gcra_strict_keep(&g, 0.05) == 0);
}
END_TEST

START_TEST(strict_keep_is_what_sent_keeps)
{
	/* What a shared strict gate is pushed by after a send charged without
	 * a margin (store/shared.c): what gcra_sent keeps here, in units, at
	 * the least margin and at a learned one (sched/margin.h) */
	const double t_ms[] = {20, 100, 999, 1000, 5000, 60000};
	const double margins[] = {GCRA_STRICT_MARGIN, 0.04, 0.10};
	for (size_t i = 0; i < sizeof(t_ms) / sizeof(t_ms[0]); i++)
		for (size_t k = 0; k < sizeof(margins) / sizeof(margins[0]); k++) {
			struct gcra g;
			gcra_init(&g, t_ms[i], 1);
			gcra_charge(&g, 0, 1);
			gcra_sent(&g, 0, 1, margins[k]);
			double kept = gcra_ready_at_precise(&g, 0, 1) - t_ms[i];
			ck_assert_msg(fabs(gcra_strict_keep(&g, margins[k]) * t_ms[i] - kept) <
			                  1e-9,
			              "T %g, margin %g", t_ms[i], margins[k]);
		}
	struct gcra g;
	gcra_init(&g, 100, 1);
	/* a learned margin is kept whole at 100 ms: 4 % is 4 ms */
	ck_assert(fabs(gcra_strict_keep(&g, 0.04) - 0.04) < 1e-12);
	/* less than the least margin (or none) is the least */
	ck_assert(fabs(gcra_strict_keep(&g, 0) - GCRA_STRICT_MARGIN) < 1e-12);
	ck_assert(fabs(gcra_strict_keep(&g, NAN) - GCRA_STRICT_MARGIN) < 1e-12);
	gcra_init(&g, 60000, 1); /* capped at the slack: 10 ms of a minute */
	ck_assert(fabs(gcra_strict_keep(&g, GCRA_STRICT_MARGIN) - GCRA_SLACK_MS / 60000) < 1e-12);
	/* and a learned margin widens the cap alike: 4 × 10 ms */
	ck_assert(fabs(gcra_strict_keep(&g, 0.04) - 4 * GCRA_SLACK_MS / 60000) < 1e-12);
}
END_TEST

START_TEST(gates_keep_the_margin_they_are_given)
{
	struct plan_conf plan = {0};
	plan.max_requests_per_minute = 600;
	plan.burst = 1;
	struct gates s;
	gates_init(&s, &plan);
	gates_charge(&s, 0, 0, 0, 0);
	gates_sent(&s, 0, 0, 0, 0, GCRA_STRICT_MARGIN);
	ck_assert(fabs(gates_ready_at(&s, 0, 0, 0, 0) - 101) < 1e-9);
	gates_charge(&s, 101, 0, 0, 0);
	gates_sent(&s, 101, 0, 0, 0, 0.05);
	ck_assert(fabs(gates_ready_at(&s, 101, 0, 0, 0) - 206) < 1e-9);
	gates_charge(&s, 206, 0, 0, 0);
	gates_sent(&s, 206, 0, 0, 0, 0.001); /* never below the least */
	ck_assert(fabs(gates_ready_at(&s, 206, 0, 0, 0) - 307) < 1e-9);
}
END_TEST

START_TEST(precise_ready_is_not_rounded)
{
	/* 3 req/s: T = 333.33 ms; the precise instant keeps the fraction, the
	 * millisecond one rounds it up */
	struct gcra g;
	gcra_init(&g, 1000.0 / 3, 1);
	gcra_charge(&g, 0.25, 1);
	double at = gcra_ready_at_precise(&g, 0, 1);
	ck_assert(at > 333.58 && at < 333.59);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 334);
	ck_assert(gcra_ready_at_precise(&g, 400.5, 1) == 400.5);
}
END_TEST

static int late_idle(int i)
{
	return i == 5 ? 500 : 0;
}

START_TEST(real_idleness_restarts_the_schedule)
{
	/* lateness beyond the slack is idleness: no catching up afterwards */
	struct gcra g;
	gcra_init(&g, 100, 1);
	int64_t t[10];
	run_late(&g, 10, t, late_idle);
	ck_assert_int_eq(t[5], 1000);
	for (int i = 6; i < 10; i++)
		ck_assert_int_eq(t[i] - t[i - 1], 100);
}
END_TEST

START_TEST(slack_is_what_the_burst_grants)
{
	/* Burst 1: no slack at all: 2 ms late at T = 100 restarts from the
	 * late instant */
	struct gcra g;
	gcra_init(&g, 100, 1);
	gcra_charge(&g, 0, 1);
	gcra_charge(&g, 102, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 102, 1), 202);
	/* Burst 2 at T = 4 ms grants 4 ms: 3 ms late is on schedule */
	gcra_init(&g, 4, 2);
	gcra_charge(&g, 0, 1);
	gcra_charge(&g, 0, 1);  /* TAT 8 */
	gcra_charge(&g, 11, 1); /* 3 ms late: TAT 12 */
	ck_assert_int_eq(gcra_ready_at(&g, 11, 1), 11);
	gcra_charge(&g, 11, 1); /* TAT 16 */
	ck_assert_int_eq(gcra_ready_at(&g, 11, 1), 12);
	/* 2 ms late at T = 100 ms with a burst of 2 is on schedule */
	gcra_init(&g, 100, 2);
	gcra_charge(&g, 0, 1);
	gcra_charge(&g, 0, 1); /* TAT 200 */
	gcra_charge(&g, 202, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 202, 1), 202);
	gcra_charge(&g, 202, 1); /* TAT 400 */
	ck_assert_int_eq(gcra_ready_at(&g, 202, 1), 300);
	/* 10 ms is the most: 11 ms late restarts */
	gcra_charge(&g, 411, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 411, 1), 411);
	gcra_charge(&g, 411, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 411, 1), 511);
}
END_TEST

START_TEST(token_weighting)
{
	/* 60000 tpm: 1 ms per token, tolerance 1000 tokens (one second) */
	struct gcra g;
	gcra_init(&g, 60000.0 / 60000, 1000);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 500), 0);
	gcra_charge(&g, 0, 500);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 500), 0);
	gcra_charge(&g, 0, 500);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 500), 500);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 100), 100);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1000), 1000);
}
END_TEST

START_TEST(oversize_cost_passes_on_idle_gate)
{
	/* 6000 tpm: 10 ms per token, tolerance 100 tokens */
	struct gcra g;
	gcra_init(&g, 10, 100);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1000), 0);
	gcra_charge(&g, 0, 1000); /* TAT = 10000 */
	/* a small request waits for the debt minus its tolerance */
	ck_assert_int_eq(gcra_ready_at(&g, 0, 10), 10000 - 90 * 10);
	/* another oversize one waits until the gate is idle again */
	ck_assert_int_eq(gcra_ready_at(&g, 0, 5000), 10000);
	ck_assert_int_eq(gcra_ready_at(&g, 10000, 5000), 10000);
}
END_TEST

START_TEST(charge_beyond_ready_goes_into_debt)
{
	struct gcra g;
	gcra_init(&g, 100, 1);
	gcra_charge(&g, 0, 1);
	gcra_charge(&g, 0, 1); /* forced through */
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 200);
}
END_TEST

START_TEST(adjust_refund)
{
	struct gcra g;
	gcra_init(&g, 1, 100);    /* 1 ms per token */
	gcra_charge(&g, 0, 1000); /* estimate; TAT 1000 */
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 901);
	gcra_adjust(&g, 0, -900); /* actual 100 */
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 1);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 100), 100);
}
END_TEST

START_TEST(adjust_refund_never_below_now)
{
	struct gcra g;
	gcra_init(&g, 1, 100);
	gcra_charge(&g, 0, 1000);
	gcra_adjust(&g, 500, -100000);
	/* idle at 500, with the tolerance and no more */
	ck_assert_int_eq(gcra_ready_at(&g, 500, 100), 500);
	gcra_charge(&g, 500, 100);
	ck_assert_int_eq(gcra_ready_at(&g, 500, 1), 501);
}
END_TEST

START_TEST(adjust_late_refund_gives_nothing_back)
{
	struct gcra g;
	gcra_init(&g, 1, 100);
	gcra_charge(&g, 0, 1000);
	gcra_adjust(&g, 5000, -900); /* gate idle since 1000 */
	ck_assert_int_eq(gcra_ready_at(&g, 5000, 100), 5000);
	gcra_charge(&g, 5000, 100);
	ck_assert_int_eq(gcra_ready_at(&g, 5000, 100), 5100);
}
END_TEST

START_TEST(adjust_charge_more)
{
	struct gcra g;
	gcra_init(&g, 1, 100);
	gcra_charge(&g, 0, 100);
	gcra_adjust(&g, 0, 400); /* actual 500 */
	ck_assert_int_eq(gcra_ready_at(&g, 0, 100), 500);
	gcra_adjust(&g, 0, 0);
	gcra_adjust(&g, 0, NAN);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 100), 500);
}
END_TEST

START_TEST(set_rate_keeps_debt_in_units)
{
	struct gcra g;
	gcra_init(&g, 100, 1);
	run_gate(&g, 5, 1); /* last at 400, TAT 500 */
	gcra_set_rate(&g, 400, 200, 1);
	/* one unit owed: 200 ms at the new rate */
	ck_assert_int_eq(gcra_ready_at(&g, 400, 1), 600);
	gcra_set_rate(&g, 400, 50, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 400, 1), 450);
}
END_TEST

START_TEST(set_rate_disable_and_enable)
{
	struct gcra g;
	gcra_init(&g, 100, 1);
	gcra_charge(&g, 0, 10);
	gcra_set_rate(&g, 0, 0, 1);
	ck_assert(!gcra_enabled(&g));
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 0);
	gcra_set_rate(&g, 0, 100, 1);
	ck_assert(gcra_enabled(&g));
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 0); /* enabled afresh: idle */
	gcra_charge(&g, 0, 1);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 100);
}
END_TEST

START_TEST(set_rate_on_idle_gate_and_burst)
{
	struct gcra g;
	gcra_init(&g, 100, 1);
	gcra_charge(&g, 0, 1);
	gcra_set_rate(&g, 1000, 10, 3); /* idle: nothing owed, new burst 3 */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(gcra_ready_at(&g, 1000, 1), 1000);
		gcra_charge(&g, 1000, 1);
	}
	ck_assert_int_eq(gcra_ready_at(&g, 1000, 1), 1010);
}
END_TEST

START_TEST(odd_costs_are_safe)
{
	struct gcra g;
	gcra_init(&g, 100, 1);
	gcra_charge(&g, 0, -5);
	gcra_charge(&g, 0, NAN);
	ck_assert_int_eq(gcra_ready_at(&g, 0, 1), 0);
	gcra_charge(&g, 0, 1e300); /* absurd: clamped, not undefined */
	ck_assert_int_gt(gcra_ready_at(&g, 0, 1), (int64_t)1e15);
	gcra_init(&g, 100, 0); /* burst 0 means 1 */
	ck_assert(g.burst == 1);
}
END_TEST

/* --- gate sets ---------------------------------------------------------- */

START_TEST(gates_empty_plan_open)
{
	struct plan_conf p = plan();
	struct gates s;
	gates_init(&s, &p);
	gates_charge(&s, 0, 5000, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 5000, 0, 0), 0);
	ck_assert(gates_min_interval_ms(&s) == 0);
	ck_assert(!gates_enabled(&s));
	p.max_tokens_per_minute = 1000;
	gates_init(&s, &p);
	ck_assert(gates_enabled(&s));
	p.max_tokens_per_minute = 0;
	p.max_requests_per_hour = 10;
	gates_init(&s, &p);
	ck_assert(gates_enabled(&s));
}
END_TEST

/* How many requests to ask a shared store for: what the local gates would
 * let through one after the other, as gcra_ready_at says. */
START_TEST(gates_requests_available_counts_what_would_pass)
{
	struct plan_conf p = plan();
	struct gates s;
	gates_init(&s, &p);
	ck_assert_uint_eq(gates_requests_available(&s, 0, 16), 16); /* no gate */
	p.max_requests_per_second = 10;                             /* 100 ms */
	p.burst = 3;
	gates_init(&s, &p);
	ck_assert_uint_eq(gates_requests_available(&s, 0, 16), 3);
	for (unsigned k = 3; k > 0; k--) {
		ck_assert_uint_eq(gates_requests_available(&s, 0, 16), k);
		ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 0);
		gates_charge(&s, 0, 0, 0, 0);
	}
	ck_assert_uint_eq(gates_requests_available(&s, 0, 16), 0);
	ck_assert_int_gt(gates_ready_at(&s, 0, 0, 0, 0), 0);
	ck_assert_uint_eq(gates_requests_available(&s, 100, 16), 1);
	ck_assert_uint_eq(gates_requests_available(&s, 100, 0), 0);
	/* Faster than the clock: a millisecond's worth passes at once. */
	p.max_requests_per_second = 1000000;
	p.burst = 1;
	gates_init(&s, &p);
	gates_charge(&s, 0, 0, 0, 0);
	ck_assert_uint_eq(gates_requests_available(&s, 0, 16), 16);
	ck_assert_uint_eq(gates_requests_available(&s, 0, 5000), 999);
	/* A replica's share while the store is down: 10 / 4 per second. */
	p.max_requests_per_second = 10;
	p.burst = 4;
	gates_init(&s, &p);
	gates_reconfigure_scaled(&s, &p, 0.25, 0);
	ck_assert_uint_eq(gates_requests_available(&s, 0, 16), 1);
	gates_charge(&s, 0, 0, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 400);
}
END_TEST

START_TEST(gates_most_restrictive_wins)
{
	struct plan_conf p = plan();
	p.max_requests_per_second = 10;  /* 100 ms */
	p.max_requests_per_minute = 300; /* 200 ms */
	p.max_requests_per_hour = 36000; /* 100 ms */
	struct gates s;
	gates_init(&s, &p);
	ck_assert_double_eq_tol(gates_min_interval_ms(&s), 200, 1e-9);
	gates_charge(&s, 0, 0, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 200);
}
END_TEST

START_TEST(gates_hour_window_wins)
{
	struct plan_conf p = plan();
	p.max_requests_per_second = 10;
	p.max_requests_per_hour = 3600; /* 1000 ms */
	struct gates s;
	gates_init(&s, &p);
	gates_charge(&s, 0, 0, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 1000);
	ck_assert_double_eq_tol(gates_min_interval_ms(&s), 1000, 1e-9);
}
END_TEST

START_TEST(gates_min_ms_spacing)
{
	struct plan_conf p = plan();
	p.min_ms_per_request = 250;
	p.max_requests_per_minute = 600;
	struct gates s;
	gates_init(&s, &p);
	ck_assert_double_eq_tol(gates_min_interval_ms(&s), 250, 1e-9);
	gates_charge(&s, 0, 0, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 250);
}
END_TEST

START_TEST(gates_min_ms_admits_no_burst)
{
	struct plan_conf p = plan();
	p.min_ms_per_request = 100;
	p.max_requests_per_second = 100;
	p.burst = 5;
	struct gates s;
	gates_init(&s, &p);
	gates_charge(&s, 0, 0, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 100);
}
END_TEST

START_TEST(gates_burst_applies_to_windows)
{
	struct plan_conf p = plan();
	p.max_requests_per_minute = 60; /* 1 s */
	p.burst = 3;
	struct gates s;
	gates_init(&s, &p);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 0);
		gates_charge(&s, 0, 0, 0, 0);
	}
	ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 1000);
}
END_TEST

START_TEST(gates_token_gate_default_burst)
{
	struct plan_conf p = plan();
	p.max_tokens_per_minute = 60000; /* 1 ms per token, burst 1000 */
	struct gates s;
	gates_init(&s, &p);
	ck_assert_double_eq_tol(s.tokens.burst, 1000, 1e-9);
	gates_charge(&s, 0, 1000, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 1, 0, 0), 1);
	ck_assert_int_eq(gates_ready_at(&s, 0, 300, 0, 0), 300);
}
END_TEST

START_TEST(gates_token_burst_configured)
{
	struct plan_conf p = plan();
	p.max_tokens_per_minute = 60000;
	p.token_burst = 100;
	struct gates s;
	gates_init(&s, &p);
	gates_charge(&s, 0, 100, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 100, 0, 0), 100);
	/* over the tolerance: waits until idle, then passes */
	ck_assert_int_eq(gates_ready_at(&s, 0, 5000, 0, 0), 100);
}
END_TEST

START_TEST(gates_tokens_and_requests_combined)
{
	struct plan_conf p = plan();
	p.max_requests_per_second = 10;   /* 100 ms */
	p.max_tokens_per_minute = 600000; /* 0.1 ms per token, burst 10000 */
	struct gates s;
	gates_init(&s, &p);
	gates_charge(&s, 0, 12000, 0, 0); /* TAT tokens 1200 */
	/* tokens owe 200 ms beyond the tolerance of a 10000-token request */
	ck_assert_int_eq(gates_ready_at(&s, 0, 10000, 0, 0), 1200);
	ck_assert_int_eq(gates_ready_at(&s, 0, 10, 0, 0), 201);
	ck_assert_int_eq(gates_ready_at(&s, 0, 0, 0, 0), 200);
}
END_TEST

START_TEST(gates_input_and_output_apart)
{
	/* 60000 input tokens per minute (1 ms per token, 1000 at once) and 6000
	 * output tokens per minute (10 ms per token, 100 at once) */
	struct plan_conf p = plan();
	p.max_input_tokens_per_minute = 60000;
	p.max_output_tokens_per_minute = 6000;
	struct gates s;
	gates_init(&s, &p);
	ck_assert(gates_enabled(&s));
	/* a long prompt, a short answer: the input gate paces */
	gates_charge(&s, 0, 1010, 1000, 10);
	ck_assert_int_eq(gates_ready_at(&s, 0, 1010, 1000, 10), 1000);
	/* a short prompt, a long answer: the output gate paces */
	ck_assert_int_eq(gates_ready_at(&s, 0, 110, 10, 100), 100);
	/* the usage corrects each part: 500 of the 1000 prompt tokens were cache reads */
	gates_adjust_tokens(&s, 0, -500, -500, 0);
	ck_assert_int_eq(gates_ready_at(&s, 0, 1010, 1000, 10), 500);
}
END_TEST

START_TEST(gates_adjust_tokens_refund)
{
	struct plan_conf p = plan();
	p.max_tokens_per_minute = 60000;
	p.token_burst = 100;
	struct gates s;
	gates_init(&s, &p);
	gates_charge(&s, 0, 2000, 0, 0);
	gates_adjust_tokens(&s, 10, -1900, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 10, 100, 0, 0), 100);
	gates_adjust_tokens(&s, 10, 1000, 0, 0);
	ck_assert_int_eq(gates_ready_at(&s, 10, 100, 0, 0), 1100);
}
END_TEST

START_TEST(gates_reconfigure_keeps_state)
{
	struct plan_conf p = plan();
	p.max_requests_per_minute = 600; /* 100 ms */
	struct gates s;
	gates_init(&s, &p);
	gates_charge(&s, 0, 0, 0, 0);
	p.max_requests_per_minute = 300; /* 200 ms */
	p.max_requests_per_second = 1;   /* new window: starts idle */
	gates_reconfigure(&s, &p, 50);
	/* 0.5 unit owed at 200 ms per unit, and the new per-second gate is open */
	ck_assert_int_eq(gates_ready_at(&s, 50, 0, 0, 0), 150);
	p.max_requests_per_minute = 0;
	p.max_requests_per_second = 0;
	gates_reconfigure(&s, &p, 50);
	ck_assert_int_eq(gates_ready_at(&s, 50, 0, 0, 0), 50);
}
END_TEST

START_TEST(gates_simulated_rpm_and_tpm)
{
	/* 120 rpm and 60000 tpm with 1000-token requests: tokens bind (60 per
	 * minute after the one-second tolerance), so 61 requests take ~60 s */
	struct plan_conf p = plan();
	p.max_requests_per_minute = 120;
	p.max_tokens_per_minute = 60000;
	struct gates s;
	gates_init(&s, &p);
	int64_t t = 0;
	for (int i = 0; i < 61; i++) {
		t = gates_ready_at(&s, t, 1000, 0, 0);
		gates_charge(&s, t, 1000, 0, 0);
	}
	ck_assert_int_ge(t, 59000);
	ck_assert_int_le(t, 61000);
}
END_TEST

static Suite *gcra_suite(void)
{
	Suite *s = suite_create("gcra");
	TCase *g = tcase_create("gate");
	tcase_add_test(g, even_spacing_600rpm);
	tcase_add_test(g, idle_gate_is_ready_now);
	tcase_add_test(g, burst_then_spacing);
	tcase_add_test(g, burst_refills_to_tolerance_only);
	tcase_add_test(g, partial_refill_after_short_idle);
	tcase_add_test(g, disabled_gate_always_open);
	tcase_add_test(g, fractional_interval_rounds_up);
	tcase_add_test(g, no_drift_with_fractional_interval);
	tcase_add_test(g, late_wakeups_do_not_drift);
	tcase_add_test(g, real_idleness_restarts_the_schedule);
	tcase_add_test(g, slack_is_what_the_burst_grants);
	tcase_add_test(g, burst_one_never_spaces_closer_than_t);
	tcase_add_test(g, sent_keeps_the_distance_from_the_send);
	tcase_add_test(g, strict_keep_is_what_sent_keeps);
	tcase_add_test(g, gates_keep_the_margin_they_are_given);
	tcase_add_test(g, precise_ready_is_not_rounded);
	tcase_add_test(g, simulation_1000_requests_600rpm);
	tcase_add_test(g, simulation_with_late_timer);
	tcase_add_test(g, token_weighting);
	tcase_add_test(g, oversize_cost_passes_on_idle_gate);
	tcase_add_test(g, charge_beyond_ready_goes_into_debt);
	tcase_add_test(g, adjust_refund);
	tcase_add_test(g, adjust_refund_never_below_now);
	tcase_add_test(g, adjust_late_refund_gives_nothing_back);
	tcase_add_test(g, adjust_charge_more);
	tcase_add_test(g, set_rate_keeps_debt_in_units);
	tcase_add_test(g, set_rate_disable_and_enable);
	tcase_add_test(g, set_rate_on_idle_gate_and_burst);
	tcase_add_test(g, odd_costs_are_safe);
	tcase_add_test(g, faster_than_the_clock);
	suite_add_tcase(s, g);
	TCase *set = tcase_create("gates");
	tcase_add_test(set, gates_empty_plan_open);
	tcase_add_test(set, gates_most_restrictive_wins);
	tcase_add_test(set, gates_hour_window_wins);
	tcase_add_test(set, gates_min_ms_spacing);
	tcase_add_test(set, gates_min_ms_admits_no_burst);
	tcase_add_test(set, gates_burst_applies_to_windows);
	tcase_add_test(set, gates_token_gate_default_burst);
	tcase_add_test(set, gates_token_burst_configured);
	tcase_add_test(set, gates_tokens_and_requests_combined);
	tcase_add_test(set, gates_adjust_tokens_refund);
	tcase_add_test(set, gates_input_and_output_apart);
	tcase_add_test(set, gates_reconfigure_keeps_state);
	tcase_add_test(set, gates_simulated_rpm_and_tpm);
	tcase_add_test(set, gates_requests_available_counts_what_would_pass);
	suite_add_tcase(s, set);
	return s;
}

UNIT_MAIN("gcra", gcra_suite)
