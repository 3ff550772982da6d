/* SPDX-License-Identifier: Apache-2.0 */
/* margin: a strict gate's margin learned from the path (issue 30): widened by
 * refusals at the spacing (once per burst), narrowed slowly by time without
 * one, bounded, adopted from the store. */
#include <math.h>

#include "sched/margin.h"
#include "unit.h"

#define EQ(a, b) ck_assert_msg(fabs((a) - (b)) < 1e-12, "%.6f != %.6f", (double)(a), (double)(b))

START_TEST(starts_at_the_least)
{
	struct margin m;
	margin_init(&m, 5000);
	EQ(m.frac, MARGIN_MIN);
	EQ(MARGIN_MIN, GCRA_STRICT_MARGIN);
	/* successes alone never go below it */
	for (int i = 0; i < 1000; i++)
		ck_assert(!margin_succeeded(&m, 5000 + 100 * i));
	EQ(m.frac, MARGIN_MIN);
}
END_TEST

START_TEST(a_refusal_widens_multiplicatively_up_to_the_max)
{
	struct margin m;
	margin_init(&m, 0);
	uint64_t seq = 0;
	double want = MARGIN_MIN;
	for (int i = 0; i < 10; i++) {
		seq += 3;
		int64_t t = 100 * i;
		bool changed = margin_refused(&m, seq, t, seq, t);
		want = fmin(want * MARGIN_WIDEN, MARGIN_MAX);
		EQ(m.frac, want);
		ck_assert(changed == (i < 3)); /* 2.5, 6.25, 10 %, then the bound */
	}
	EQ(m.frac, MARGIN_MAX);
}
END_TEST

/* A burst of refusals of requests sent before the margin widened is one
 * signal; a request dispatched after the widening counts again. */
START_TEST(a_burst_of_refusals_is_one_signal)
{
	struct margin m;
	margin_init(&m, 0);
	/* requests 1..5 were out when the first refusal came (lane's last: 5) */
	ck_assert(margin_refused(&m, 2, 0, 5, 100));
	EQ(m.frac, MARGIN_WIDEN * MARGIN_MIN);
	ck_assert(!margin_refused(&m, 3, 10, 6, 110));
	ck_assert(!margin_refused(&m, 5, 30, 6, 120));
	EQ(m.frac, MARGIN_WIDEN * MARGIN_MIN);
	/* request 6 left after the widening: it is news, at once */
	ck_assert(margin_refused(&m, 6, 300, 9, 400));
	EQ(m.frac, MARGIN_WIDEN * MARGIN_WIDEN * MARGIN_MIN);
}
END_TEST

/* Narrowed by MARGIN_NARROW once MARGIN_NARROW_AFTER_MS have passed since the
 * last change with at least MARGIN_NARROW_OKS successes, then the clock
 * starts again; a refusal starts it again too. */
START_TEST(a_long_run_of_successes_narrows_slowly)
{
	struct margin m;
	margin_init(&m, 0);
	margin_refused(&m, 1, 0, 1, 0);
	int64_t t = 100;
	margin_refused(&m, 2, t, 2, t); /* 6.25 % */
	EQ(m.frac, 0.0625);
	const int per_period = MARGIN_NARROW_AFTER_MS / 100; /* at 10 req/s */
	/* the success at MARGIN_NARROW_AFTER_MS narrows, not one before */
	for (int i = 1; i < per_period; i++)
		ck_assert(!margin_succeeded(&m, t += 100));
	ck_assert(margin_succeeded(&m, t += 100));
	EQ(m.frac, 0.0625 * MARGIN_NARROW);
	/* the next narrowing waits its own period */
	ck_assert(!margin_succeeded(&m, t += MARGIN_NARROW_AFTER_MS / 2));
	for (int i = 0; i < per_period / 2; i++)
		margin_succeeded(&m, t += 100);
	EQ(m.frac, 0.0625 * MARGIN_NARROW * MARGIN_NARROW);
	/* time alone does not narrow: a slow lane needs its successes */
	double f = m.frac;
	for (int i = 1; i < MARGIN_NARROW_OKS; i++)
		ck_assert(!margin_succeeded(&m, t += 60000));
	EQ(m.frac, f);
	ck_assert(margin_succeeded(&m, t += 60000));
	EQ(m.frac, f * MARGIN_NARROW);
	/* a refusal starts the period again */
	t += 100;
	margin_refused(&m, 10, t, 10, t);
	f = m.frac;
	for (int i = 1; i < per_period; i++)
		ck_assert(!margin_succeeded(&m, t += 100));
	ck_assert(margin_succeeded(&m, t += 100));
	EQ(m.frac, f * MARGIN_NARROW);
}
END_TEST

START_TEST(narrowing_stops_at_the_least)
{
	struct margin m;
	margin_init(&m, 0);
	margin_refused(&m, 1, 0, 1, 0); /* 2.5 % */
	int64_t t = 0;
	for (int i = 0; i < 40 * MARGIN_NARROW_AFTER_MS / 100; i++)
		margin_succeeded(&m, t += 100);
	EQ(m.frac, MARGIN_MIN);
}
END_TEST

/* A closed loop against a path that moves arrivals by up to ±j ms, a
 * strict bucket of T = 100 ms: the margin settles where refusals are rare,
 * and below the bound. */
START_TEST(settles_against_a_jittery_path)
{
	struct margin m;
	margin_init(&m, 0);
	uint64_t state = 88172645463325252ull;
	double t = 0, prev_arrival = -1e9;
	int refused = 0, late_refused = 0;
	uint64_t seq = 0;
	for (int i = 0; i < 6000; i++) { /* 10 min at 10 req/s */
		t += 100 * (1 + m.frac);
		state ^= state << 13, state ^= state >> 7, state ^= state << 17;
		double u = (double)(state >> 11) / 9007199254740992.0 * 6 - 3; /* ±3 ms */
		double arrival = t + u;
		seq++;
		if (arrival - prev_arrival < 100) {
			refused++;
			if (i >= 600)
				late_refused++;
			margin_refused(&m, seq, (int64_t)t, seq, (int64_t)t);
		} else {
			prev_arrival = arrival;
			margin_succeeded(&m, (int64_t)t);
		}
	}
	/* 1 % would be refused about a third of the time (2000 of 6000) */
	ck_assert_msg(refused <= 30, "%d refusals in 6000", refused);
	/* after the first minute, about one in three minutes */
	ck_assert_msg(late_refused <= 8, "%d refusals after the first minute", late_refused);
	ck_assert_msg(m.frac > 0.03 && m.frac <= MARGIN_MAX, "margin %.4f", m.frac);
}
END_TEST

START_TEST(adopt_takes_the_stores_value)
{
	struct margin m;
	margin_init(&m, 0);
	/* another replica widened it: this one's refusals of requests sent
	 * before that say nothing new */
	ck_assert(margin_adopt(&m, 0.04, 7, 1000));
	EQ(m.frac, 0.04);
	ck_assert(!margin_refused(&m, 6, 900, 8, 1100));
	/* sent after it, but within the time the other replicas take to
	 * adopt it: the spacing it met may be theirs */
	ck_assert(!margin_refused(&m, 8, 1500, 9, 1600));
	ck_assert(!margin_refused(&m, 9, 1000 + MARGIN_SETTLE_MS - 1, 9, 2100));
	int64_t t = 1000 + MARGIN_SETTLE_MS;
	ck_assert(margin_refused(&m, 9, t, 10, t));
	EQ(m.frac, MARGIN_MAX);
	/* the same value again changes nothing, not even the clock */
	for (int i = 0; i < 50; i++)
		margin_succeeded(&m, t + 100 * i);
	ck_assert(!margin_adopt(&m, MARGIN_MAX, 10, t + 6000));
	t += MARGIN_NARROW_AFTER_MS;
	ck_assert(margin_succeeded(&m, t));
	EQ(m.frac, MARGIN_MAX * MARGIN_NARROW);
	/* narrowed elsewhere: taken, and the clock starts again */
	ck_assert(margin_adopt(&m, 0.05, 9, t += 1000));
	EQ(m.frac, 0.05);
	for (int i = 1; i < MARGIN_NARROW_AFTER_MS / 100; i++)
		ck_assert(!margin_succeeded(&m, t + 100 * i));
	/* clamped, and what is not a number ignored */
	ck_assert(margin_adopt(&m, 0.5, 9, 13000)); /* clamped */
	EQ(m.frac, MARGIN_MAX);
	ck_assert(margin_adopt(&m, 0, 9, 13000));
	EQ(m.frac, MARGIN_MIN);
	ck_assert(!margin_adopt(&m, NAN, 9, 13000));
	ck_assert(!margin_adopt(&m, INFINITY, 9, 13000));
	EQ(m.frac, MARGIN_MIN);
}
END_TEST

static Suite *margin_suite(void)
{
	Suite *s = suite_create("margin");
	TCase *c = tcase_create("learning");
	tcase_add_test(c, starts_at_the_least);
	tcase_add_test(c, a_refusal_widens_multiplicatively_up_to_the_max);
	tcase_add_test(c, a_burst_of_refusals_is_one_signal);
	tcase_add_test(c, a_long_run_of_successes_narrows_slowly);
	tcase_add_test(c, narrowing_stops_at_the_least);
	tcase_add_test(c, settles_against_a_jittery_path);
	tcase_add_test(c, adopt_takes_the_stores_value);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("margin", margin_suite)
