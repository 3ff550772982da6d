/* SPDX-License-Identifier: Apache-2.0 */
/* rate_probe: the pace of a lane that refusals alone teach (issue 30 item 6):
 * the bound two refusals give, the level below it, probes that come later
 * and smaller, what resets them; and the dispatch delay's AIMD with it
 * against a simulated bucket (bucket_sim below), beside the AIMD alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/aimd.h"
#include "sched/rate_probe.h"
#include "unit.h"

#define NEAR(a, b, tol)                                                                            \
	ck_assert_msg(fabs((double)(a) - (double)(b)) <= (tol), "%.4f != %.4f", (double)(a),       \
	              (double)(b))

/* n successes of requests sent after from_ms, one every every_ms from
 * start_ms on; returns the last rate asked for. */
static double successes(struct rate_probe *p, int64_t start_ms, int64_t every_ms, int n)
{
	double r = 0;
	for (int i = 0; i < n; i++)
		r = rate_probe_succeeded(p, start_ms + i * every_ms, start_ms + i * every_ms - 50);
	return r;
}

START_TEST(searches_until_two_refusals_bound_the_rate)
{
	struct rate_probe p;
	rate_probe_init(&p);
	/* the first refusal bounds nothing: the search's own cut */
	NEAR(rate_probe_refused(&p, 100, 50, 6.7), 6.7, 1e-9);
	ck_assert(p.bound == 0);
	/* successes while searching: the delay's AIMD goes on */
	ck_assert(successes(&p, 200, 100, 20) == 0);
	/* 20 successes of requests sent in the 2 s between the refused ones:
	 * the provider carries at least (20 - 1) / 2 s; the curve starts 5 %
	 * below that */
	NEAR(rate_probe_refused(&p, 2100, 2050, 13), 0.95 * 9.5, 1e-4);
	NEAR(p.bound, 9.5, 1e-4);
	ck_assert_uint_eq(p.calm, 0);
}
END_TEST

START_TEST(a_short_span_bounds_nothing)
{
	struct rate_probe p;
	rate_probe_init(&p);
	rate_probe_refused(&p, 100, 50, 6.7);
	successes(&p, 200, 20, 40);
	/* 40 successes, but the refused requests left 900 ms apart */
	NEAR(rate_probe_refused(&p, 1000, 950, 8), 8, 1e-9);
	ck_assert(p.bound == 0);
	/* 3 successes over 5 s: too few */
	successes(&p, 1000, 1000, 3);
	NEAR(rate_probe_refused(&p, 6000, 5950, 4), 4, 1e-9);
	ck_assert(p.bound == 0);
	/* a request sent before the refusal it follows counts for nothing */
	for (int i = 0; i < 10; i++)
		rate_probe_succeeded(&p, 6100 + i, 5000);
	NEAR(rate_probe_refused(&p, 8000, 7950, 4), 4, 1e-9);
	ck_assert(p.bound == 0);
}
END_TEST

/* A lane whose last two refusals bounded the rate at 10 req/s, at 0 ms:
 * 31 successes of requests sent in the 3 s between the refused ones. */
static struct rate_probe converged(void)
{
	struct rate_probe p;
	rate_probe_init(&p);
	rate_probe_refused(&p, -3000, -3000, 5);
	successes(&p, -2900, 95, 31);
	NEAR(rate_probe_refused(&p, 0, 0, 5), 9.5, 1e-4);
	NEAR(p.bound, 10, 1e-4);
	return p;
}

START_TEST(the_curve_holds_near_the_bound_then_probes_above)
{
	struct rate_probe p = converged();
	int64_t k = RATE_PROBE_K_MIN_MS;
	ck_assert_int_eq(rate_probe_k_ms(&p), k);
	NEAR(rate_probe_rate(&p, 0), 9.5, 1e-4);
	/* concave up to the bound: most of the way by K/2, flat near it */
	NEAR(rate_probe_rate(&p, k / 2), 9.5 + 0.5 * (1 - 0.125), 1e-4);
	NEAR(rate_probe_rate(&p, k), 10, 1e-4);
	NEAR(rate_probe_rate(&p, k + k / 2), 10 * (1 + 0.1 * 0.125), 1e-4);
	/* convex above it: the step over the bound at 2K, 8 steps at 3K */
	NEAR(rate_probe_rate(&p, 2 * k), 10 * (1 + RATE_PROBE_STEP), 1e-4);
	NEAR(rate_probe_rate(&p, 3 * k), 10 * (1 + 8 * RATE_PROBE_STEP), 1e-4);
	/* what a success asks for is the curve (no rise: the successes came
	 * below the bound) */
	NEAR(successes(&p, 100, 125, 40), rate_probe_rate(&p, 100 + 39 * 125), 1e-9);
}
END_TEST

START_TEST(the_same_limit_met_again_calms_the_probes)
{
	struct rate_probe p = converged();
	int64_t t = 0;
	for (int i = 1; i <= 5; i++) {
		int64_t k = rate_probe_k_ms(&p);
		/* met again past K, at about the same bound (10 req/s over
		 * the span) */
		int64_t span = k + k / 4;
		successes(&p, t + 10, 100, (int)(span / 100) + 1);
		rate_probe_refused(&p, t + span, t + span, 5);
		t += span;
		ck_assert_uint_eq(p.calm, i);
		ck_assert(p.bound > 9.9 && p.bound < 10.1);
		int64_t want = RATE_PROBE_K_MIN_MS << i;
		ck_assert_int_eq(rate_probe_k_ms(&p),
		                 want < RATE_PROBE_K_MAX_MS ? want : RATE_PROBE_K_MAX_MS);
	}
	/* the step above the bound comes later each time: at 2K */
	NEAR(rate_probe_rate(&p, t + 2 * RATE_PROBE_K_MAX_MS), p.bound * 1.1, 1e-3);
}
END_TEST

START_TEST(a_change_of_the_limit_searches_again)
{
	/* refused before K: below the bound, the limit fell */
	struct rate_probe p = converged();
	p.calm = 3;
	successes(&p, 10, 200, 30);
	NEAR(rate_probe_refused(&p, 6000, 6000, 5), 5, 1e-9);
	ck_assert(p.bound == 0);
	ck_assert_uint_eq(p.calm, 0);
	NEAR(p.last, 28.0 / 6, 1e-4);
	ck_assert(rate_probe_succeeded(&p, 6100, 6050) == 0); /* the AIMD's again */
	/* met past K, but at a bound that moved by more than RATE_PROBE_MOVE */
	p = converged();
	int64_t k = rate_probe_k_ms(&p);
	successes(&p, 10, 150, (int)(k * 1.25 / 150));
	NEAR(rate_probe_refused(&p, k + k / 4, k + k / 4, 5), 5, 1e-9);
	ck_assert(p.last < 8);
	ck_assert(p.bound == 0);
	/* refused again before a span bounds the rate (a window still closed) */
	p = converged();
	successes(&p, 10, 100, 3);
	NEAR(rate_probe_refused(&p, 500, 500, 6), 6, 1e-9);
	ck_assert(p.bound == 0);
}
END_TEST

START_TEST(after_a_change_the_limit_settles_before_it_is_held)
{
	struct rate_probe p = converged();
	successes(&p, 10, 200, 30);
	rate_probe_refused(&p, 6000, 6000, 5); /* the limit fell: searching since 6 s */
	int64_t t = 6000;
	/* spans of 2 s at ~5 req/s agree with each other, but the limit
	 * changed less than RATE_PROBE_SETTLE_MS ago: the AIMD goes on */
	while (t + 2000 - 6000 < RATE_PROBE_SETTLE_MS) {
		successes(&p, t + 10, 200, 10);
		t += 2000;
		NEAR(rate_probe_refused(&p, t, t, 4), 4, 1e-9);
		ck_assert(p.bound == 0);
	}
	/* one that moves starts the wait over */
	successes(&p, t + 10, 100, 20);
	t += 2000;
	rate_probe_refused(&p, t, t, 4);
	ck_assert(p.bound == 0);
	int64_t moved = t;
	successes(&p, t + 10, 100, 20);
	t += 2000;
	rate_probe_refused(&p, t, t, 4);
	ck_assert(p.bound == 0); /* agrees, but only 2 s after the move */
	while (t - moved < RATE_PROBE_SETTLE_MS) {
		successes(&p, t + 10, 100, 20);
		t += 2000;
		rate_probe_refused(&p, t, t, 4);
	}
	/* settled: held, calm 0 */
	NEAR(p.bound, 18.0 / 2, 1e-4);
	ck_assert_uint_eq(p.calm, 0);
}
END_TEST

START_TEST(successes_at_a_higher_rate_mean_the_limit_rose)
{
	struct rate_probe p = converged();
	p.calm = 2;
	int64_t k = rate_probe_k_ms(&p);
	/* 12.5 req/s since the last refusal, for longer than K: over 120 % of
	 * the bound: the limit rose, the AIMD searches for it */
	double r = successes(&p, 10, 80, (int)(k / 80) + 10);
	ck_assert(r == 0);
	ck_assert(p.bound == 0);
	ck_assert_uint_eq(p.calm, 0);
	/* 11 req/s, over as long: nothing changes */
	p = converged();
	p.calm = 2;
	successes(&p, 10, 91, (int)(k / 91) + 10);
	ck_assert_uint_eq(p.calm, 2);
	NEAR(p.bound, 10, 1e-4);
}
END_TEST

/* --- the dispatch delay with it, against a bucket ---------------------- */

/* A provider's bucket (capacity cap, refilling rate(t) per second), a lane
 * that always has a request waiting and paces at the dispatch delay, each
 * answer latency_ms after its dispatch; a refusal holds the lane until the
 * bucket has a unit again (retry-after), as a counted signal once per
 * burst (only a request sent after the last reaction reacts). SIM_TRACE=1
 * in the environment prints each run: its refusals, and every 2 s its
 * pace, the bucket and the probe's state. */
struct bucket_sim {
	double cap, latency_ms; /* cap 0: a second's worth of the rate */
	double hold_ms;         /* a refusal's retry-after; 0: until a unit is back */
	double (*rate)(double t_ms);
	bool probe; /* the delay with rate_probe (else the AIMD alone) */
	/* out */
	unsigned ok, refused, refused_after[2], ok_after[2];
	double after_ms[2];
	double admissible;      /* what the bucket could have given (refill + cap) */
	double refill_after[2]; /* what it refilled from after_ms[i] on */
};

#define SIM_QUEUE 256

static void bucket_run(struct bucket_sim *s, double until_ms)
{
	struct aimd_delay d;
	aimd_delay_init(&d, true, 0, 5000, 1.5, 3);
	struct rate_probe p;
	rate_probe_init(&p);
	bool trace = getenv("SIM_TRACE") != NULL;
	double level = s->cap > 0 ? s->cap : s->rate(0), hold_ms = 0;
	/* answers due: dispatch instant, whether refused, dispatch number */
	struct {
		double sent, due;
		bool refused;
		unsigned seq;
	} q[SIM_QUEUE];
	unsigned head = 0, n = 0, seq = 0, signal_seq = 0;
	s->admissible = level;
	for (double t = 0; t < until_ms; t += 1) {
		if (trace && (int)t % 2000 == 0)
			printf("    t %.0f: delay %.1f ms (%.2f/s) ok %u bucket %.1f bound %.2f "
			       "calm %u\n",
			       t, d.delay_ms, d.delay_ms > 0 ? 1000 / d.delay_ms : 0, s->ok, level,
			       p.bound, p.calm);
		double add = s->rate(t) / 1000.0;
		s->admissible += add;
		for (int i = 0; i < 2; i++)
			s->refill_after[i] += t >= s->after_ms[i] ? add : 0;
		level = fmin(s->cap > 0 ? s->cap : fmax(1, s->rate(t)), level + add);
		while (n > 0 && q[head].due <= t) {
			bool refused = q[head].refused;
			int64_t sent = (int64_t)q[head].sent;
			unsigned sq = q[head].seq;
			head = (head + 1) % SIM_QUEUE;
			n--;
			if (!refused) {
				double rps =
				    s->probe ? rate_probe_succeeded(&p, (int64_t)t, sent) : 0;
				if (rps > 0)
					aimd_delay_converged(&d, rps);
				else
					aimd_delay_on_success(&d, (int64_t)t);
				continue;
			}
			/* held until the bucket has a unit again, or as told */
			double wait =
			    s->hold_ms > 0 ? s->hold_ms : (1 - level) * 1000.0 / s->rate(t);
			hold_ms = fmax(hold_ms, t + wait);
			if (sq <= signal_seq)
				continue;
			signal_seq = seq;
			aimd_delay_on_capacity(&d, (int64_t)t);
			if (s->probe && d.delay_ms > 0)
				aimd_delay_converged(&d, rate_probe_refused(&p, (int64_t)t, sent,
				                                            1000.0 / d.delay_ms));
		}
		if (t < hold_ms || n == SIM_QUEUE || t < aimd_delay_ready_at(&d, (int64_t)t))
			continue;
		aimd_delay_charge(&d, (int64_t)t);
		bool refused = level < 1;
		if (refused && trace)
			printf(
			    "    refused at %.0f ms, delay %.1f ms, calm %u bound %.2f last %.2f\n",
			    t, d.delay_ms, p.calm, p.bound, p.last);
		if (refused) {
			s->refused++;
			for (int i = 0; i < 2; i++)
				s->refused_after[i] += t >= s->after_ms[i];
		} else {
			level -= 1;
			s->ok++;
			for (int i = 0; i < 2; i++)
				s->ok_after[i] += t >= s->after_ms[i];
		}
		unsigned at = (head + n++) % SIM_QUEUE;
		q[at].sent = t;
		q[at].due = t + s->latency_ms;
		q[at].refused = refused;
		q[at].seq = ++seq;
	}
}

static double ten(double t_ms)
{
	(void)t_ms;
	return 10;
}

START_TEST(steady_bucket_meets_a_refusal_at_most_every_30_s)
{
	/* the lane: 600 RPM as a bucket of 10, 50 ms away, 60 s */
	struct bucket_sim s = {
	    .cap = 10, .latency_ms = 50, .rate = ten, .probe = true, .after_ms = {5000, 30000}};
	bucket_run(&s, 60000);
	double used = s.ok_after[0] / s.refill_after[0];
	printf("  rate_probe, 600 RPM bucket 10: %u refused (%u after 5 s, %u after 30 s), "
	       "%.1f %% of the limit after 5 s\n",
	       s.refused, s.refused_after[0], s.refused_after[1], 100 * used);
	ck_assert_uint_le(s.refused_after[0], 2);
	ck_assert_uint_le(s.refused_after[1], 1);
	ck_assert(used >= 0.9);
	/* the AIMD alone, as before: a refusal every second or two */
	struct bucket_sim a = {.cap = 10, .latency_ms = 50, .rate = ten, .after_ms = {5000, 30000}};
	bucket_run(&a, 60000);
	printf("  AIMD alone: %u refused (%u after 5 s), %.1f %% of the limit after 5 s\n",
	       a.refused, a.refused_after[0], 100 * a.ok_after[0] / a.refill_after[0]);
	ck_assert_uint_ge(a.refused_after[0], 20);
}
END_TEST

static double falls(double t_ms)
{
	return t_ms < 60000 ? 10 : 5;
}

static double rises(double t_ms)
{
	return t_ms < 60000 ? 10 : 20;
}

START_TEST(a_change_of_the_limit_is_followed)
{
	/* 10 -> 5 req/s at 60 s: the AIMD's refusals until the new limit has
	 * held RATE_PROBE_SETTLE_MS, then quiet again */
	struct bucket_sim s = {
	    .cap = 10, .latency_ms = 50, .rate = falls, .probe = true, .after_ms = {60000, 90000}};
	bucket_run(&s, 150000);
	double used = s.ok_after[1] / s.refill_after[1];
	printf("  10 -> 5 req/s at 60 s: %u refused after the fall, %u from 30 s after it, "
	       "when it carried %.1f %% of the limit\n",
	       s.refused_after[0], s.refused_after[1], 100 * used);
	ck_assert_uint_le(s.refused_after[1], 2);
	ck_assert(used >= 0.9);
	/* 10 -> 20 req/s at 60 s: probed above and found, not at once */
	struct bucket_sim r = {
	    .cap = 10, .latency_ms = 50, .rate = rises, .probe = true, .after_ms = {60000, 180000}};
	bucket_run(&r, 240000);
	used = r.ok_after[1] / r.refill_after[1];
	printf("  10 -> 20 req/s at 60 s: %u refused after the rise, %.1f %% of the limit 2 to 3 "
	       "minutes after it (%.1f %% over the 3 minutes)\n",
	       r.refused_after[0], 100 * used, 100 * r.ok_after[0] / r.refill_after[0]);
	ck_assert(used >= 0.8);
}
END_TEST

static double flapping(double t_ms)
{
	return (int)(t_ms / 10000) % 2 == 0 ? 20 : 5;
}

START_TEST(a_flapping_capacity_is_followed)
{
	/* sched_learning 5's provider: a global capacity of 20, then 5 req/s,
	 * 10 s each, a bucket of a second's worth, retry-after 1 s, 100 ms away:
	 * the limit changes at every phase, and the probes stay agile */
	struct bucket_sim s = {.latency_ms = 100,
	                       .hold_ms = 1000,
	                       .rate = flapping,
	                       .probe = true,
	                       .after_ms = {0, 5000}};
	bucket_run(&s, 60000);
	double used = s.ok / s.admissible;
	printf("  capacity 20/5 req/s every 10 s: %u refused of %u (%.1f %%), %.1f %% of the "
	       "capacity\n",
	       s.refused, s.ok + s.refused, 100.0 * s.refused / (s.ok + s.refused), 100 * used);
	struct bucket_sim a = {
	    .latency_ms = 100, .hold_ms = 1000, .rate = flapping, .after_ms = {0, 5000}};
	bucket_run(&a, 60000);
	printf("  AIMD alone: %u refused of %u (%.1f %%), %.1f %%\n", a.refused, a.ok + a.refused,
	       100.0 * a.refused / (a.ok + a.refused), 100 * a.ok / a.admissible);
	/* as the AIMD alone did: the limit never settles */
	ck_assert(used >= 0.85);
	ck_assert(s.refused <= a.refused + 0.02 * (s.ok + s.refused));
}
END_TEST

static Suite *rate_probe_suite(void)
{
	Suite *s = suite_create("rate_probe");
	TCase *c = tcase_create("core");
	tcase_add_test(c, searches_until_two_refusals_bound_the_rate);
	tcase_add_test(c, a_short_span_bounds_nothing);
	tcase_add_test(c, the_curve_holds_near_the_bound_then_probes_above);
	tcase_add_test(c, the_same_limit_met_again_calms_the_probes);
	tcase_add_test(c, a_change_of_the_limit_searches_again);
	tcase_add_test(c, after_a_change_the_limit_settles_before_it_is_held);
	tcase_add_test(c, successes_at_a_higher_rate_mean_the_limit_rose);
	tcase_add_test(c, steady_bucket_meets_a_refusal_at_most_every_30_s);
	tcase_add_test(c, a_change_of_the_limit_is_followed);
	tcase_add_test(c, a_flapping_capacity_is_followed);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("rate_probe", rate_probe_suite)
