/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for learned: inference of capacity and rate, pacing, noise. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sched/learned.h"
#include "unit.h"

static struct learned_obs obs(double mark, double remaining, double reset_ms, double limit)
{
	struct learned_obs o = {
	    .mark = mark, .remaining = remaining, .reset_ms = reset_ms, .limit = limit};
	return o;
}

/* Observes (remaining, reset) at now, as the answer to the latest dispatch (no
 * other request in flight). */
static int see(struct learned *l, int64_t now, double remaining, double reset_ms, double limit)
{
	struct learned_obs o = obs(l->cum_cost, remaining, reset_ms, limit);
	return learned_observe(l, now, &o);
}

static double rate_per_min(const struct learned *l)
{
	struct learned_view v;
	learned_view(l, 0, &v);
	return v.rate_per_min;
}

/* A continuous bucket of 1000 units refilling 1000 per minute, learned from two
 * observations without a limit header. */
static void learn_1000_per_min(struct learned *l)
{
	learned_init(l, NULL);
	see(l, 0, 900, 6000, 0);
	see(l, 1000, 700, 18000, 0);
}

START_TEST(nothing_known_nothing_held)
{
	struct learned l;
	learned_init(&l, NULL);
	ck_assert_int_eq(learned_ready_at(&l, 123, 1), 123);
	learned_charge(&l, 123, 1);
	ck_assert_int_eq(learned_ready_at(&l, 123, 1), 123);
	struct learned_view v;
	learned_view(&l, 123, &v);
	ck_assert_int_eq(v.shape, LEARNED_UNKNOWN);
	ck_assert(v.remaining == -1);
}
END_TEST

/* "300 RPM" enforced as a bucket of 5 refilling 5 per second: the headers say
 * limit 300, but remaining never passes 4 and resets are under a second. */
static void learn_short_window(struct learned *l)
{
	struct learned_params p;
	learned_params_default(&p);
	p.time_noise_ms = 50; /* OpenAI's millisecond resets */
	learned_init(l, &p);
	see(l, 0, 4, 200, 300);
	learned_charge(l, 0, 1);
	see(l, 10, 3, 390, 300);
	learned_charge(l, 10, 1);
	see(l, 20, 2, 580, 300);
	learned_charge(l, 20, 1);
	see(l, 30, 1, 770, 300);
}

/* A burst into "600 RPM" enforced as a bucket of 10 refilling 10 per second,
 * as a fresh lane sends it (64 at once, nothing known yet): 10 answers count
 * down R = 9..0 with resets 100..1000 ms, 54 refusals say R = 0, reset ~1 s;
 * then a stream of answers at R = 0 whose resets scatter over 905..1000 ms
 * (the bucket's level anywhere in [0, 1)). The bucket stays 10 at 600/min: a
 * fit of R on r read that scatter as a flat line, ρ 600 times too small, and
 * held the lane for minutes; forgetting the burst must not bring back the 600
 * the headers name as the capacity either. */
START_TEST(a_burst_at_zero_keeps_the_small_bucket_and_its_rate)
{
	struct learned_params p;
	learned_params_default(&p);
	p.time_noise_ms = 50;
	struct learned l;
	learned_init(&l, &p);
	double marks[64];
	for (int i = 0; i < 64; i++)
		marks[i] = learned_charge(&l, 0, 1);
	for (int i = 0; i < 64; i++) {
		double rem = i < 10 ? 9 - i : 0;
		struct learned_obs o = obs(marks[i], rem, i < 10 ? (10 - rem) * 100 : 1000, 600);
		learned_observe(&l, 3, &o);
	}
	learned_on_capacity_signal(&l, 3, LEARNED_PENALTY_HINTED);
	for (int k = 0; k < 40; k++) {
		int64_t t =
		    120 + 120 * k; /* a little slower than the pace (0.95 × 0.95 × 600/min) */
		double m = learned_charge(&l, t, 1);
		struct learned_obs o = obs(m, 0, 905 + (k * 37) % 95, 600);
		learned_observe(&l, t + 3, &o);
		struct learned_view v;
		learned_view(&l, t + 3, &v);
		ck_assert_msg(v.capacity > 8 && v.capacity < 12, "capacity %.2f after %d",
		              v.capacity, k);
		ck_assert_msg(v.rate_per_min > 540 && v.rate_per_min < 660,
		              "rate %.1f/min after %d", v.rate_per_min, k);
		/* never held past the bucket's next unit or two (the old fit: minutes) */
		ck_assert_int_le(learned_ready_at(&l, t + 3, 1), t + 3 + 200);
	}
}
END_TEST

START_TEST(a_limit_far_above_the_bucket_is_not_its_capacity)
{
	struct learned l;
	learn_short_window(&l);
	struct learned_view v;
	learned_view(&l, 30, &v);
	/* anchored to L = 300 the refill would be (300 - 1) / 0.77 s: ~23 000/min */
	ck_assert(l.short_window);
	ck_assert_double_eq_tol(v.capacity, 5, 0.5);
	ck_assert_double_eq_tol(v.rate_per_min, 300, 30);
}
END_TEST

START_TEST(a_drained_bucket_with_a_known_rate_waits_for_one_unit_not_the_reset)
{
	/* remaining 0 with reset 1 s on a bucket refilling 5/s: the next unit is
	 * there in 1 / (0.95 x 5/s) = 211 ms, not when the bucket is full again */
	struct learned l;
	learn_short_window(&l);
	learned_charge(&l, 30, 1);
	learned_charge(&l, 30, 1);
	see(&l, 40, 0, 960, 300);
	ck_assert_int_eq(l.shape, LEARNED_CONTINUOUS);
	int64_t at = learned_held_until(&l, 40, 1);
	ck_assert_int_gt(at, 40 + 150);
	ck_assert_int_lt(at, 40 + 300);
	ck_assert_int_ge(learned_ready_at(&l, 40, 1), at);   /* (the pace gate may ask more) */
	ck_assert_int_eq(learned_held_until(&l, at, 1), at); /* over: not held */
}
END_TEST

/* Issue 28: a refusal's body told the budget (Gemini: quotaValue 30 per
 * minute) and no header ever did: a bucket of 30 refilled at 30/min, empty
 * now with what is in flight counted; the next request waits for one unit
 * at the paced rate (60 s / (0.95 x 30) = 2105 ms), not for the minute. */
START_TEST(a_limit_told_by_a_refusal_paces_at_its_rate)
{
	struct learned l;
	learned_init(&l, NULL);
	for (int i = 0; i < 5; i++)
		learned_charge(&l, 100, 1); /* 5 sent blind, the refused one among them */
	ck_assert(learned_told(&l, 200, 30, 60000));
	ck_assert_int_eq(l.shape, LEARNED_CONTINUOUS);
	ck_assert(fabs(rate_per_min(&l) - 30) < 1e-6);
	int64_t at = learned_held_until(&l, 200, 1);
	ck_assert_int_ge(at, 200 + 2100);
	ck_assert_int_le(at, 200 + 2110);
	ck_assert_int_ge(learned_ready_at(&l, 200, 1), at);
	struct learned_view v;
	learned_view(&l, 200, &v);
	ck_assert(v.limit == 30 && v.capacity == 30 && fabs(v.pace_per_min - 28.5) < 1e-6);
	/* told once: a second refusal, or one with nonsense, changes nothing */
	ck_assert(!learned_told(&l, 300, 60, 60000));
	ck_assert(l.limit == 30);
	struct learned fresh;
	learned_init(&fresh, NULL);
	ck_assert(!learned_told(&fresh, 0, 0, 60000));
	ck_assert(!learned_told(&fresh, 0, 30, 0));
	ck_assert(!learned_told(&fresh, 0, NAN, 60000));
	ck_assert_int_eq(fresh.n_obs, 0);
	/* headers first: they know better than a refusal */
	ck_assert_int_ge(see(&fresh, 10, 5, 1000, 10), 0);
	ck_assert(!learned_told(&fresh, 20, 30, 60000));
}
END_TEST

/* Issue 19: the first answers to a fresh lane's blind requests (4 sent at 0
 * into "300 RPM" enforced as a bucket of 5 refilling 5/s, 150 ms latency) say
 * 4 then 3 left, resets 200 and 399 ms. Two answers a unit apart already tell
 * a bucket far below L; anchored to L they read as a refill of ~45 000/min,
 * the lane thought the bucket refilled at once and sent the next 16 into it. */
START_TEST(two_answers_a_unit_apart_find_the_small_bucket)
{
	struct learned_params p;
	learned_params_default(&p);
	p.time_noise_ms = 50;
	struct learned l;
	learned_init(&l, &p);
	double marks[4];
	for (int i = 0; i < 4; i++)
		marks[i] = learned_charge(&l, 0, 1);
	struct learned_obs o1 = obs(marks[0], 4, 200, 300), o2 = obs(marks[1], 3, 399, 300);
	learned_observe(&l, 150, &o1);
	learned_observe(&l, 152, &o2);
	struct learned_view v;
	learned_view(&l, 152, &v);
	ck_assert(l.short_window);
	ck_assert_msg(v.capacity < 10, "capacity %.1f", v.capacity);
	ck_assert_msg(v.rate_per_min > 150 && v.rate_per_min < 450, "rate %.1f/min",
	              v.rate_per_min);
	/* 3 left less the 2 still in flight: one more goes now, the next waits
	 * for the refill (1 / (0.95 x 5/s) = 211 ms), not 2 ms */
	ck_assert_int_eq(learned_ready_at(&l, 152, 1), 152);
	learned_charge(&l, 152, 1);
	ck_assert_int_gt(learned_ready_at(&l, 152, 1), 152 + 150);
}
END_TEST

START_TEST(a_rough_fit_does_not_shrink_a_drained_large_bucket)
{
	/* a real 300 bucket refilling 5/s, drained: two answers a unit apart
	 * whose resets carry a unit's rounding (true 200 ms apart, seen 390).
	 * The rough fit says a bucket of ~200 at most: not short. */
	struct learned l;
	learned_init(&l, NULL);
	learned_charge(&l, 0, 1);
	see(&l, 0, 100, 40000, 300);
	learned_charge(&l, 0, 1);
	see(&l, 10, 99, 40390, 300);
	ck_assert(!l.short_window);
	struct learned_view v;
	learned_view(&l, 10, &v);
	ck_assert_double_eq(v.capacity, 300);
}
END_TEST

START_TEST(blind_requests_wait_for_the_first_answer)
{
	/* fewer than LEARNED_BLIND_MAX in flight: go */
	ck_assert_int_eq(learned_blind_ready_at(0, 0, 500), 500);
	ck_assert_int_eq(learned_blind_ready_at(LEARNED_BLIND_MAX - 1, 480, 500), 500);
	/* that many: wait for an answer, at most LEARNED_BLIND_WAIT_MS after the
	 * last blind dispatch */
	ck_assert_int_eq(learned_blind_ready_at(LEARNED_BLIND_MAX, 480, 500),
	                 480 + LEARNED_BLIND_WAIT_MS);
	ck_assert_int_eq(learned_blind_ready_at(LEARNED_BLIND_MAX + 3, 480, 5000), 5000);
}
END_TEST

START_TEST(a_full_sized_bucket_keeps_its_limit)
{
	/* a real 300 bucket seen drained (remaining low, resets of a minute):
	 * the free fit agrees with L, which stays the capacity */
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 10, 58000, 300);
	learned_charge(&l, 0, 1);
	see(&l, 1000, 14, 57200, 300);
	learned_charge(&l, 1000, 1);
	see(&l, 2000, 18, 56400, 300);
	learned_charge(&l, 2000, 1);
	see(&l, 3000, 22, 55600, 300);
	ck_assert(!l.short_window);
	struct learned_view v;
	learned_view(&l, 3000, &v);
	ck_assert_double_eq(v.capacity, 300);
}
END_TEST

START_TEST(two_observations_give_capacity_and_rate)
{
	struct learned l;
	learn_1000_per_min(&l);
	struct learned_view v;
	learned_view(&l, 1000, &v);
	ck_assert_double_eq_tol(v.capacity, 1000, 1e-6);
	ck_assert_double_eq_tol(v.rate_per_min, 1000, 1e-6);
	ck_assert_int_eq(v.shape, LEARNED_CONTINUOUS);
	ck_assert_uint_eq(v.observations, 2);
}
END_TEST

START_TEST(one_observation_with_limit_gives_rate)
{
	struct learned l;
	learned_init(&l, NULL);
	ck_assert_int_eq(see(&l, 0, 900, 6000, 1000), 1);
	struct learned_view v;
	learned_view(&l, 0, &v);
	ck_assert_double_eq_tol(v.capacity, 1000, 1e-9);
	ck_assert_double_eq_tol(v.rate_per_min, 1000, 1e-6);
	/* but one observation does not tell a bucket from a window: no pacing yet */
	ck_assert_int_eq(v.shape, LEARNED_UNKNOWN);
	ck_assert(v.pace_per_min == 0);
}
END_TEST

/* Spends, at one instant, what the budget has above the proactive threshold:
 * it passes at once, without pacing (DESIGN §3.4), and leaves the pace gate
 * idle. Returns how many units went. */
static int spend_headroom(struct learned *l, int64_t at)
{
	int n = 0;
	while (n < 100000) {
		struct learned_view v;
		learned_view(l, at, &v);
		if (v.remaining - 1 < l->p.proactive_threshold * v.capacity)
			break;
		ck_assert_int_eq(learned_ready_at(l, at, 1), at);
		learned_charge(l, at, 1);
		n++;
	}
	return n;
}

START_TEST(headroom_goes_at_once_then_paced)
{
	struct learned l;
	learn_1000_per_min(&l); /* remaining 700 of 1000 (one unit since), threshold 10 % */
	/* 699 left after the probe; the threshold, 10 % of 1000, falls exactly
	 * on a unit, so the fit's last bit of rounding decides between 599 and 600 */
	int spent = spend_headroom(&l, 2000);
	ck_assert_int_ge(spent, 599);
	ck_assert_int_le(spent, 600);
	/* at the threshold: the pace gate starts idle, then 0.95 ρ */
	ck_assert_int_eq(learned_ready_at(&l, 2000, 1), 2000);
	learned_charge(&l, 2000, 1);
	ck_assert_int_eq(learned_ready_at(&l, 2000, 1), 2064);
}
END_TEST

START_TEST(paces_below_rate)
{
	struct learned l;
	learn_1000_per_min(&l);
	struct learned_view v;
	learned_view(&l, 1000, &v);
	ck_assert_double_eq_tol(v.pace_per_min, 950, 1e-6);
	spend_headroom(&l, 2000);
	learned_charge(&l, 2000, 1);
	/* 60 ms per unit at ρ; 63.2 ms at 0.95 ρ */
	ck_assert_int_eq(learned_ready_at(&l, 2000, 1), 2064);
	/* charged at 2064, 0.84 ms after the gate opened (2063.16): a pace of
	 * burst 1 has no slack, so it counts from 2064: 2127.16, rounded up */
	learned_charge(&l, 2064, 1);
	ck_assert_int_eq(learned_ready_at(&l, 2064, 1), 2128);
}
END_TEST

START_TEST(margin_is_a_parameter)
{
	struct learned_params p;
	learned_params_default(&p);
	p.margin = 0.5;
	struct learned l;
	learned_init(&l, &p);
	see(&l, 0, 900, 6000, 0);
	see(&l, 1000, 700, 18000, 0);
	spend_headroom(&l, 2000);
	learned_charge(&l, 2000, 1);
	ck_assert_int_eq(learned_ready_at(&l, 2000, 1), 2120);
}
END_TEST

START_TEST(pacing_sustains_without_running_dry)
{
	/* simulate the bucket: paced at 0.95 ρ it never reports 0 */
	struct learned l;
	learned_init(&l, NULL);
	const double cap = 600, rho = 600.0 / 60000; /* 600 per minute */
	double level = cap;
	int64_t t = 0, last = 0;
	int dispatched = 0;
	double min_level = cap;
	while (t < 600000) {
		t = learned_ready_at(&l, t, 1);
		level = fmin(cap, level + rho * (double)(t - last)) - 1;
		last = t;
		learned_charge(&l, t, 1);
		dispatched++;
		min_level = fmin(min_level, level);
		ck_assert(level >= 0);
		see(&l, t, floor(level), (cap - level) / rho, cap);
	}
	/* the bucket drains once (unknown shape), then the rate is learned and
	 * the lane settles at 0.95 ρ: about 600 + 0.95·6000 in ten minutes */
	ck_assert_int_eq(l.shape, LEARNED_CONTINUOUS);
	ck_assert_int_le(dispatched, 600 + 6000 + 10);
	ck_assert_int_ge(dispatched, 600 + 5500);
}
END_TEST

START_TEST(spreads_below_threshold)
{
	struct learned l;
	learned_init(&l, NULL);
	learned_charge(&l, 0, 1);
	see(&l, 0, 5, 10000, 100); /* 5 % left, reset in 10 s */
	ck_assert_int_eq(learned_ready_at(&l, 0, 1), 2000);
	ck_assert_int_eq(learned_ready_at(&l, 1500, 1), 2000);
	learned_charge(&l, 2000, 1);
	ck_assert_int_eq(learned_ready_at(&l, 2000, 1), 4000);
	learned_charge(&l, 4000, 1);
	ck_assert_int_eq(learned_ready_at(&l, 4000, 1), 6000);
}
END_TEST

START_TEST(no_spreading_above_threshold)
{
	struct learned l;
	learned_init(&l, NULL);
	learned_charge(&l, 0, 1);
	see(&l, 0, 50, 10000, 100);
	ck_assert_int_eq(learned_ready_at(&l, 0, 1), 0);
	learned_charge(&l, 0, 1);
	ck_assert_int_eq(learned_ready_at(&l, 0, 1), 0);
}
END_TEST

START_TEST(threshold_is_a_parameter)
{
	struct learned_params p;
	learned_params_default(&p);
	p.proactive_threshold = 0.6;
	struct learned l;
	learned_init(&l, &p);
	learned_charge(&l, 0, 1);
	see(&l, 0, 50, 10000, 100);
	ck_assert_int_eq(learned_ready_at(&l, 0, 1), 200);
}
END_TEST

START_TEST(threshold_without_limit_uses_largest_seen)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 100, 0, 0);
	learned_charge(&l, 100, 1);
	see(&l, 100, 4, 8000, 0); /* 4 of at least 100 */
	ck_assert_int_eq(learned_ready_at(&l, 100, 1), 100 + 2000);
}
END_TEST

START_TEST(holds_at_zero_until_reset)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 1000, 0, 5000, 100);
	ck_assert_int_eq(learned_ready_at(&l, 1000, 1), 6000);
	ck_assert_int_eq(learned_ready_at(&l, 5999, 1), 6000);
	ck_assert_int_eq(learned_ready_at(&l, 6000, 1), 6000);
	ck_assert_int_eq(learned_ready_at(&l, 7000, 1), 7000);
}
END_TEST

START_TEST(own_dispatches_count_down)
{
	struct learned_params p;
	learned_params_default(&p);
	p.proactive_threshold = 0; /* isolate the hold */
	struct learned l;
	learned_init(&l, &p);
	learned_charge(&l, 0, 1);
	see(&l, 0, 3, 10000, 100);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(learned_ready_at(&l, 10, 1), 10);
		learned_charge(&l, 10, 1);
	}
	ck_assert_int_eq(learned_ready_at(&l, 10, 1), 10000);
}
END_TEST

START_TEST(in_flight_requests_counted)
{
	struct learned_params p;
	learned_params_default(&p);
	p.proactive_threshold = 0;
	struct learned l;
	learned_init(&l, &p);
	double mark = learned_charge(&l, 100, 1);     /* the request whose answer we read */
	ck_assert(learned_charge(&l, 150, 1) > mark); /* sent after it, in flight */
	learned_charge(&l, 200, 1);
	struct learned_obs o = obs(mark, 2, 10000, 100);
	learned_observe(&l, 300, &o);
	/* 2 remaining as of the request sent at 100, and 2 sent since */
	ck_assert_int_eq(learned_ready_at(&l, 300, 1), 10300);
	struct learned_view v;
	learned_view(&l, 300, &v);
	ck_assert(v.remaining == 0);
}
END_TEST

START_TEST(token_cost_weighting)
{
	struct learned l;
	learned_init(&l, NULL);
	learned_charge(&l, 0, 1000);
	see(&l, 0, 5000, 20000, 100000);
	/* 5 % left: 5000 tokens over 20 s, a 1000-token request per 4 s */
	ck_assert_int_eq(learned_ready_at(&l, 0, 1000), 4000);
	/* more than what remains: hold until reset */
	ck_assert_int_eq(learned_ready_at(&l, 0, 6000), 20000);
}
END_TEST

START_TEST(oversize_cost_passes_after_reset)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 900, 3000, 1000);
	ck_assert_int_eq(learned_ready_at(&l, 0, 5000), 3000);
	ck_assert_int_eq(learned_ready_at(&l, 3000, 5000), 3000);
}
END_TEST

/* A continuous bucket (capacity 100, 600 per minute) behind 2 s of latency with
 * up to 64 requests in flight (32 per second could be sent): answers describe the bucket as it was
 * at dispatch, so every observation is stale by the requests sent since. */
START_TEST(in_flight_simulation_never_runs_dry)
{
	struct pending {
		int64_t due;
		double mark, remaining, reset;
	} q[64] = {0};
	int nq = 0, dispatched = 0, dry = 0;
	const double cap = 100, rho = 600.0 / 60000;
	double level = cap;
	int64_t t = 0, last = 0;
	struct learned l;
	learned_init(&l, NULL);
	while (t < 300000) {
		int64_t next = nq < 64 ? learned_ready_at(&l, t, 1) : INT64_MAX;
		int first = -1;
		for (int i = 0; i < nq; i++)
			if (first < 0 || q[i].due < q[first].due)
				first = i;
		if (first >= 0 && q[first].due <= next) {
			t = q[first].due;
			struct learned_obs o =
			    obs(q[first].mark, q[first].remaining, q[first].reset, cap);
			learned_observe(&l, t, &o);
			q[first] = q[--nq];
			continue;
		}
		t = next;
		level = fmin(cap, level + rho * (double)(t - last));
		last = t;
		if (level < 1)
			dry++; /* the upstream would answer 429 */
		else
			level -= 1;
		double mark = learned_charge(&l, t, 1);
		q[nq++] = (struct pending){t + 2000, mark, floor(level), (cap - level) / rho};
		dispatched++;
	}
	ck_assert_int_eq(dry, 0);
	ck_assert_int_eq(l.shape, LEARNED_CONTINUOUS);
	/* 100 up front, then close to 0.95 × 600 per minute for 5 minutes */
	ck_assert_int_ge(dispatched, 100 + 2500);
	ck_assert_int_le(dispatched, 100 + 3000 + 64);
}
END_TEST

START_TEST(out_of_order_ignored)
{
	struct learned l;
	learned_init(&l, NULL);
	double m1 = learned_charge(&l, 0, 1);
	double m2 = learned_charge(&l, 10, 1);
	struct learned_obs newer = obs(m2, 10, 1000, 100);
	struct learned_obs older = obs(m1, 90, 1000, 100);
	ck_assert_int_ge(learned_observe(&l, 1000, &newer), 0);
	ck_assert_int_eq(learned_observe(&l, 1100, &older), -1);
	struct learned_view v;
	learned_view(&l, 1100, &v);
	ck_assert(v.remaining == 10);
	ck_assert_uint_eq(v.observations, 1);
}
END_TEST

START_TEST(invalid_observations_ignored)
{
	struct learned l;
	learned_init(&l, NULL);
	struct learned_obs o = obs(0, NAN, 1000, 100);
	ck_assert_int_eq(learned_observe(&l, 0, &o), -1);
	o = obs(0, -1, 1000, 100);
	ck_assert_int_eq(learned_observe(&l, 0, &o), -1);
	o = obs(0, 5, -1, 100);
	ck_assert_int_eq(learned_observe(&l, 0, &o), -1);
	o = obs(0, 5, INFINITY, 100);
	ck_assert_int_eq(learned_observe(&l, 0, &o), -1);
	ck_assert_int_eq(learned_ready_at(&l, 0, 1), 0);
}
END_TEST

START_TEST(remaining_above_limit_clamped)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 150, 1000, 100);
	struct learned_view v;
	learned_view(&l, 0, &v);
	ck_assert(v.remaining == 100);
}
END_TEST

START_TEST(window_budget_detected)
{
	/* 100 per minute in a fixed window ending at 60 s */
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 99, 60000, 100);
	see(&l, 5000, 90, 55000, 100);
	ck_assert_int_eq(l.shape, LEARNED_WINDOW);
	struct learned_view v;
	learned_view(&l, 5000, &v);
	ck_assert(v.pace_per_min == 0);
	ck_assert(v.rate_per_min == 0);
	/* no rate pacing: a single observation suggested 1 per minute */
	learned_charge(&l, 5000, 1);
	ck_assert_int_eq(learned_ready_at(&l, 5000, 1), 5000);
}
END_TEST

START_TEST(window_budget_resets_to_limit)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 60, 60000, 100);
	see(&l, 10000, 40, 50000, 100);
	see(&l, 50000, 0, 10000, 100);
	ck_assert_int_eq(l.shape, LEARNED_WINDOW);
	ck_assert_int_eq(learned_ready_at(&l, 50000, 1), 60000);
	/* the window rolls over: back to the limit, nothing held */
	see(&l, 60000, 99, 60000, 100);
	ck_assert_int_eq(l.shape, LEARNED_WINDOW);
	ck_assert_int_eq(learned_ready_at(&l, 60000, 1), 60000);
}
END_TEST

START_TEST(window_spreads_remaining_until_reset)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 50, 60000, 100);
	see(&l, 20000, 30, 40000, 100);
	learned_charge(&l, 40000, 1);
	see(&l, 40000, 8, 20000, 100);
	ck_assert_int_eq(l.shape, LEARNED_WINDOW);
	ck_assert_int_eq(learned_ready_at(&l, 40000, 1), 42500);
}
END_TEST

START_TEST(refill_proves_continuous)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 50, 30000, 100);
	ck_assert_int_eq(see(&l, 5000, 58, 25200, 100), 1);
	ck_assert_int_eq(l.shape, LEARNED_CONTINUOUS);
}
END_TEST

START_TEST(quick_observations_stay_unknown)
{
	/* two answers 200 ms apart can not tell the shapes apart */
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 99, 60000, 100);
	see(&l, 200, 98, 59800, 100);
	ck_assert_int_eq(l.shape, LEARNED_UNKNOWN);
}
END_TEST

START_TEST(reset_passed_lifts_hold)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 0, 3000, 100);
	learned_charge(&l, 3000, 1);
	learned_charge(&l, 3000, 1);
	ck_assert_int_eq(learned_ready_at(&l, 3000, 1), 3000);
	struct learned_view v;
	learned_view(&l, 3000, &v);
	ck_assert(v.remaining == -1);
	ck_assert_int_eq(v.reset_in_ms, 0);
}
END_TEST

/* An Anthropic-like bucket: 80 000 tokens per minute, remaining rounded to the
 * thousand, reset in whole seconds, drained at 3000 tokens a second. */
static void simulate_rounded(struct learned *l, bool send_limit)
{
	const double cap = 80000, rho = cap / 60000;
	double level = cap;
	learned_init(l, NULL);
	for (int64_t t = 1000; t <= 40000; t += 1000) {
		level = fmin(cap, level + rho * 1000) - 3000;
		double reported = round(level / 1000) * 1000;
		double reset = ceil((cap - level) / rho / 1000) * 1000;
		see(l, t, reported, reset, send_limit ? cap : 0);
	}
}

START_TEST(noise_rounded_with_limit)
{
	struct learned l;
	simulate_rounded(&l, true);
	ck_assert(l.thousands);
	ck_assert_int_eq(l.shape, LEARNED_CONTINUOUS);
	ck_assert_double_eq_tol(rate_per_min(&l), 80000, 8000);
	struct learned_view v;
	learned_view(&l, 40000, &v);
	ck_assert(v.capacity == 80000);
}
END_TEST

START_TEST(noise_rounded_without_limit)
{
	struct learned l;
	simulate_rounded(&l, false);
	ck_assert_int_eq(l.shape, LEARNED_CONTINUOUS);
	ck_assert_double_eq_tol(rate_per_min(&l), 80000, 8000);
	struct learned_view v;
	learned_view(&l, 40000, &v);
	ck_assert_double_eq_tol(v.capacity, 80000, 8000);
}
END_TEST

START_TEST(noise_single_outlier_damped)
{
	struct learned l;
	learned_init(&l, NULL);
	/* exact points of 1000 per minute, capacity 1000, limit sent */
	for (int i = 0; i < 10; i++)
		see(&l, i * 1000, 500, 30000, 1000);
	see(&l, 10000, 500, 20000, 1000); /* an outlier: 1500 per minute */
	ck_assert(rate_per_min(&l) < 1250);
	ck_assert(rate_per_min(&l) > 1000);
}
END_TEST

START_TEST(steady_full_bucket_keeps_rate)
{
	/* learned once, then a paced lane sees a nearly full bucket whose reset
	 * (60 ms) is rounded up to a whole second, over and over */
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 500, 30000, 1000);
	ck_assert_double_eq_tol(rate_per_min(&l), 1000, 1e-6);
	for (int i = 1; i <= 500; i++)
		see(&l, i * 100, 999, 1000, 1000);
	ck_assert_double_eq_tol(rate_per_min(&l), 1000, 1e-6);
}
END_TEST

START_TEST(limit_change_relearns)
{
	struct learned l;
	learned_init(&l, NULL);
	see(&l, 0, 900, 6000, 1000);
	ck_assert_double_eq_tol(rate_per_min(&l), 1000, 1e-6);
	ck_assert_int_eq(see(&l, 1000, 1800, 12000, 2000), 1);
	ck_assert_double_eq_tol(rate_per_min(&l), 1000, 1e-6);
	struct learned_view v;
	learned_view(&l, 1000, &v);
	ck_assert(v.capacity == 2000);
}
END_TEST

START_TEST(observe_reports_change_once)
{
	struct learned l;
	learned_init(&l, NULL);
	ck_assert_int_eq(see(&l, 0, 900, 6000, 1000), 1);
	ck_assert_int_eq(see(&l, 100, 900, 6000, 1000), 0);
}
END_TEST

START_TEST(summary_is_readable)
{
	struct learned l;
	learn_1000_per_min(&l);
	char buf[200];
	int n = learned_summary(&l, 1000, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(strstr(buf, "continuous"));
	ck_assert_ptr_nonnull(strstr(buf, "capacity=1000"));
	ck_assert_ptr_nonnull(strstr(buf, "rate=1000.0/min"));
	ck_assert_ptr_nonnull(strstr(buf, "pace=950.0/min"));
	char small[8];
	learned_summary(&l, 1000, small, sizeof(small));
	ck_assert_uint_eq(strlen(small), 7);
}
END_TEST

START_TEST(params_sanitized)
{
	struct learned_params p = {0, 2, -5, 1};
	struct learned l;
	learned_init(&l, &p);
	ck_assert(l.p.margin == 0.95);
	ck_assert(l.p.proactive_threshold == 0.10);
	ck_assert(l.p.time_noise_ms == 1000);
	ck_assert(l.p.forget == 0.8);
	ck_assert_str_eq(learned_shape_name(LEARNED_WINDOW), "window");
	ck_assert_str_eq(learned_shape_name(LEARNED_CONTINUOUS), "continuous");
	ck_assert_str_eq(learned_shape_name(LEARNED_UNKNOWN), "unknown");
}
END_TEST

START_TEST(capacity_signal_lowers_pace)
{
	struct learned l;
	learn_1000_per_min(&l);
	learned_on_capacity_signal(&l, 1000, LEARNED_PENALTY);
	struct learned_view v;
	learned_view(&l, 1000, &v);
	ck_assert_double_eq_tol(v.pace_per_min, 950 * LEARNED_PENALTY, 1e-6);
	ck_assert_double_eq_tol(v.rate_per_min, 1000, 1e-6); /* inference unchanged */
	spend_headroom(&l, 2000);
	learned_charge(&l, 2000, 1);
	ck_assert_int_eq(learned_ready_at(&l, 2000, 1), 2079); /* 78.9 ms */
}
END_TEST

START_TEST(capacity_signal_floor_and_recovery)
{
	struct learned l;
	learn_1000_per_min(&l);
	for (int i = 0; i < 50; i++)
		learned_on_capacity_signal(&l, 1000, LEARNED_PENALTY);
	struct learned_view v;
	learned_view(&l, 1000, &v);
	ck_assert_double_eq_tol(v.pace_per_min, 950 * LEARNED_PENALTY_FLOOR, 1e-6);
	/* healthy answers (budget well above the threshold) give it back */
	for (int i = 0; i < 100; i++)
		see(&l, 2000 + i * 100, 700, 18000, 0);
	learned_view(&l, 20000, &v);
	ck_assert(v.pace_per_min > 940);
	ck_assert(v.pace_per_min <= 950 + 1e-6);
}
END_TEST

START_TEST(capacity_signal_without_rate_is_harmless)
{
	struct learned l;
	learned_init(&l, NULL);
	learned_on_capacity_signal(&l, 0, LEARNED_PENALTY);
	ck_assert_int_eq(learned_ready_at(&l, 0, 1), 0);
}
END_TEST

static Suite *learned_suite(void)
{
	Suite *s = suite_create("learned");
	TCase *inf = tcase_create("inference");
	tcase_add_test(inf, a_limit_told_by_a_refusal_paces_at_its_rate);
	tcase_add_test(inf, nothing_known_nothing_held);
	tcase_add_test(inf, two_observations_give_capacity_and_rate);
	tcase_add_test(inf, a_limit_far_above_the_bucket_is_not_its_capacity);
	tcase_add_test(inf, a_burst_at_zero_keeps_the_small_bucket_and_its_rate);
	tcase_add_test(inf, a_drained_bucket_with_a_known_rate_waits_for_one_unit_not_the_reset);
	tcase_add_test(inf, a_full_sized_bucket_keeps_its_limit);
	tcase_add_test(inf, two_answers_a_unit_apart_find_the_small_bucket);
	tcase_add_test(inf, a_rough_fit_does_not_shrink_a_drained_large_bucket);
	tcase_add_test(inf, blind_requests_wait_for_the_first_answer);
	tcase_add_test(inf, one_observation_with_limit_gives_rate);
	tcase_add_test(inf, limit_change_relearns);
	tcase_add_test(inf, observe_reports_change_once);
	tcase_add_test(inf, refill_proves_continuous);
	tcase_add_test(inf, quick_observations_stay_unknown);
	tcase_add_test(inf, summary_is_readable);
	tcase_add_test(inf, params_sanitized);
	suite_add_tcase(s, inf);
	TCase *pace = tcase_create("pacing");
	tcase_add_test(pace, headroom_goes_at_once_then_paced);
	tcase_add_test(pace, paces_below_rate);
	tcase_add_test(pace, margin_is_a_parameter);
	tcase_add_test(pace, pacing_sustains_without_running_dry);
	tcase_add_test(pace, spreads_below_threshold);
	tcase_add_test(pace, no_spreading_above_threshold);
	tcase_add_test(pace, threshold_is_a_parameter);
	tcase_add_test(pace, threshold_without_limit_uses_largest_seen);
	tcase_add_test(pace, holds_at_zero_until_reset);
	tcase_add_test(pace, own_dispatches_count_down);
	tcase_add_test(pace, token_cost_weighting);
	tcase_add_test(pace, oversize_cost_passes_after_reset);
	tcase_add_test(pace, reset_passed_lifts_hold);
	tcase_add_test(pace, capacity_signal_lowers_pace);
	tcase_add_test(pace, capacity_signal_floor_and_recovery);
	tcase_add_test(pace, capacity_signal_without_rate_is_harmless);
	suite_add_tcase(s, pace);
	TCase *win = tcase_create("window");
	tcase_add_test(win, window_budget_detected);
	tcase_add_test(win, window_budget_resets_to_limit);
	tcase_add_test(win, window_spreads_remaining_until_reset);
	suite_add_tcase(s, win);
	TCase *noise = tcase_create("noise");
	tcase_add_test(noise, in_flight_requests_counted);
	tcase_add_test(noise, in_flight_simulation_never_runs_dry);
	tcase_add_test(noise, out_of_order_ignored);
	tcase_add_test(noise, invalid_observations_ignored);
	tcase_add_test(noise, remaining_above_limit_clamped);
	tcase_add_test(noise, noise_rounded_with_limit);
	tcase_add_test(noise, noise_rounded_without_limit);
	tcase_add_test(noise, noise_single_outlier_damped);
	tcase_add_test(noise, steady_full_bucket_keeps_rate);
	suite_add_tcase(s, noise);
	return s;
}

UNIT_MAIN("learned", learned_suite)
