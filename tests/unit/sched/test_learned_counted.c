/* SPDX-License-Identifier: Apache-2.0 */
/* learned, counted budgets (learned.h "Counted budgets"): the refill learned
 * from successive remaining counts, without a reset (Azure's usual answer) or
 * with one in whole seconds. A token bucket stands in for the provider. */
#include <math.h>
#include <string.h>

#include "sched/learned.h"
#include "unit.h"

/* The provider's bucket: cap units, refilled per_ms, full at the start. */
struct bucket {
	double level, cap, per_ms;
	int64_t at;
};

static struct bucket bucket(double cap, double per_s)
{
	return (struct bucket){cap, cap, per_s / 1000.0, 0};
}

static void bucket_at(struct bucket *b, int64_t t)
{
	b->level = fmin(b->cap, b->level + (double)(t - b->at) * b->per_ms);
	b->at = t;
}

/* One request of cost c sent at t through l: charged to the bucket if it
 * fits (else refused), and the observation its answer carries: the count
 * rounded down, a reset in whole seconds rounded up when `coarse`. */
static struct learned_obs send(struct bucket *b, struct learned *l, int64_t t, double c,
                               double alone_ms, bool coarse)
{
	bucket_at(b, t);
	double mark = learned_charge(l, t, c), shadow = learned_shadow_level(l);
	struct learned_obs o = {.mark = mark,
	                        .has_level_at_send = isfinite(shadow),
	                        .level_at_send = shadow,
	                        .no_reset = !coarse,
	                        .coarse_reset = coarse,
	                        .sent_ms = (double)t,
	                        .cost = c,
	                        .alone_ms = alone_ms};
	if (b->level >= c)
		b->level -= c;
	else
		o.refused = true;
	o.remaining = floor(b->level);
	if (coarse)
		o.reset_ms = ceil((b->cap - b->level) / b->per_ms / 1000) * 1000;
	return o;
}

static struct learned_obs remaining_only(double mark, double remaining, double sent_ms, double cost)
{
	return (struct learned_obs){.mark = mark,
	                            .remaining = remaining,
	                            .no_reset = true,
	                            .sent_ms = sent_ms,
	                            .cost = cost,
	                            .alone_ms = INFINITY};
}

static struct learned_view view(const struct learned *l, int64_t now)
{
	struct learned_view v;
	learned_view(l, now, &v);
	return v;
}

START_TEST(the_first_count_anchors_and_is_spent_down)
{
	struct learned l;
	learned_init(&l, NULL);
	double m = learned_charge(&l, 0, 1);
	struct learned_obs o = remaining_only(m, 9, 0, 1);
	ck_assert_int_ge(learned_observe(&l, 30, &o), 0);
	struct learned_view v = view(&l, 30);
	ck_assert(v.counted);
	ck_assert_double_eq(v.capacity, 10); /* 9 left after a request of 1 */
	ck_assert_double_eq(v.rate_per_min, 0);
	ck_assert_double_eq(v.remaining, 9);
	/* no rate yet, so no reserve: the 9 go at once ... */
	for (int i = 0; i < 9; i++) {
		ck_assert_int_eq(learned_ready_at(&l, 30, 1), 30);
		learned_charge(&l, 30, 1);
	}
	/* ... and then, with the 9 still out (their answers will say more), a
	 * probe after LEARNED_BLIND_WAIT_MS at most, not the reset nobody sent */
	ck_assert_int_eq(learned_ready_at(&l, 30, 1), 30 + LEARNED_BLIND_WAIT_MS);
	ck_assert_int_eq(learned_held_until(&l, 30, 1), 30 + LEARNED_BLIND_WAIT_MS);
	char line[160];
	learned_summary(&l, 30, line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "from=counts"));
}
END_TEST

/* A probe whose count shows no refill doubles the wait before the next. */
START_TEST(a_probe_that_shows_no_refill_waits_longer)
{
	struct learned l;
	learned_init(&l, NULL);
	double m = learned_charge(&l, 0, 1);
	struct learned_obs o = remaining_only(m, 0, 0, 1);
	learned_observe(&l, 10, &o);
	int64_t t = learned_ready_at(&l, 10, 1);
	ck_assert_int_eq(t, LEARNED_PROBE_MS);
	m = learned_charge(&l, t, 1);
	o = remaining_only(m, 0, (double)t, 1);
	o.refused = true; /* nothing came back: refused at 0 */
	learned_observe(&l, t + 10, &o);
	ck_assert_double_eq(view(&l, t + 10).rate_per_min, 0);
	ck_assert_int_eq(learned_ready_at(&l, t + 10, 1), t + 2 * LEARNED_PROBE_MS);
}
END_TEST

/* A table of series: a bucket of `cap` refilled `per_s`, one request of `cost`
 * every `gap_ms` (each answered 5 ms later, before the next leaves), `n` of
 * them. Learned: the capacity, and the rate within `tol` of the truth; the
 * wait it gives from an empty bucket is the time the next unit takes at the
 * paced rate, plus the reserve's. */
static const struct series {
	double cap, per_s, cost;
	int64_t gap_ms;
	int n;
	bool coarse;
	double tol;
} series[] = {
    {10, 10, 1, 80, 60, false, 0.10},      /* 600 RPM in a bucket of 10, drained */
    {10, 10, 1, 95, 200, false, 0.06},     /* ... barely drained: longer runs */
    {2, 2, 1, 400, 60, false, 0.15},       /* 2 req/s, a bucket of 2 */
    {2, 2, 1, 400, 60, true, 0.15},        /* ... with Azure's whole-second resets */
    {20, 20, 1, 40, 200, true, 0.08},      /* 20 req/s, whole-second resets */
    {20, 1, 1, 700, 120, false, 0.10},     /* 60 RPM, a bucket of 20 */
    {1000, 500, 50, 80, 300, false, 0.06}, /* tokens: 30 000/min, requests of 50 */
};

START_TEST(series_learn_rate_capacity_and_wait)
{
	const struct series *s = &series[_i];
	struct learned l;
	learned_init(&l, NULL);
	struct bucket b = bucket(s->cap, s->per_s);
	int64_t t = 0;
	for (int k = 0; k < s->n; k++, t += s->gap_ms) {
		struct learned_obs o = send(&b, &l, t, s->cost, (double)s->gap_ms, s->coarse);
		learned_observe(&l, t + 5, &o);
	}
	struct learned_view v = view(&l, t);
	double rate = v.rate_per_min / 60.0;
	ck_assert_msg(v.counted, "row %d: counted", _i);
	ck_assert_msg(fabs(v.capacity - s->cap) <= s->cost / 2, "row %d: capacity %.1f, not %.0f",
	              _i, v.capacity, s->cap);
	ck_assert_msg(fabs(rate - s->per_s) <= s->tol * s->per_s, "row %d: rate %.3f/s, not %.3f/s",
	              _i, rate, s->per_s);
	/* Drain what is left: the wait for the next request is its cost and the
	 * reserve at the paced rate, give or take the rounding of the count. */
	while (learned_ready_at(&l, t, s->cost) == t) {
		struct learned_obs o = send(&b, &l, t, s->cost, 0, s->coarse);
		learned_observe(&l, t, &o);
	}
	double paced = v.pace_per_min / 60000.0;
	double need = s->cost + 0.10 * v.capacity;
	int64_t wait = learned_ready_at(&l, t, s->cost) - t;
	ck_assert_msg(wait <= (int64_t)ceil(need / paced) + 1, "row %d: waits %lld ms (> %.0f)", _i,
	              (long long)wait, need / paced);
	ck_assert_msg(wait >= (int64_t)((need - s->cost) / paced) - 1, "row %d: waits %lld ms", _i,
	              (long long)wait);
	/* and the bucket has the request then (the forecast is not ahead of it) */
	bucket_at(&b, t + wait);
	ck_assert_msg(b.level >= s->cost, "row %d: level %.2f at the forecast's instant", _i,
	              b.level);
}
END_TEST

/* Requests slower than the refill: the bucket stays full, every interval
 * lost refill at the top, and the counts bound the rate from below only.
 * Nothing may be held: the next request always fits. */
START_TEST(a_full_bucket_never_holds)
{
	struct learned l;
	learned_init(&l, NULL);
	struct bucket b = bucket(10, 10);
	for (int64_t t = 0; t < 20000; t += 250) {
		ck_assert_int_eq(learned_ready_at(&l, t, 1), t);
		struct learned_obs o = send(&b, &l, t, 1, 250, false);
		learned_observe(&l, t + 5, &o);
		ck_assert_double_eq(o.remaining, 9);
	}
	ck_assert_double_le(view(&l, 20000).rate_per_min, 600 * 1.05);
}
END_TEST

/* Azure's reset "1" says the bucket is full within a second, nothing more. A
 * bucket of 10 refilling 10/s, drained: with the rate learned, the wait for
 * the next unit is about a tenth of a second, not the rounded-up second. */
START_TEST(a_whole_second_reset_is_a_bound_not_the_wait)
{
	struct learned l;
	learned_init(&l, NULL);
	struct bucket b = bucket(10, 10);
	int64_t t = 0;
	for (int k = 0; k < 80; k++, t += 90) {
		struct learned_obs o = send(&b, &l, t, 1, 90, true);
		learned_observe(&l, t + 5, &o);
		ck_assert(!o.refused);
		ck_assert_double_eq(o.reset_ms, 1000); /* always "1" */
	}
	while (learned_ready_at(&l, t, 1) == t) {
		struct learned_obs o = send(&b, &l, t, 1, 0, true);
		learned_observe(&l, t, &o);
	}
	int64_t wait = learned_ready_at(&l, t, 1) - t;
	ck_assert_int_lt(wait, 250);
	bucket_at(&b, t + wait);
	ck_assert_double_ge(b.level, 1);
	/* without any rate, the rounded-up reset still bounds the wait */
	struct learned fresh;
	learned_init(&fresh, NULL);
	double m = learned_charge(&fresh, 0, 1);
	struct learned_obs o = {.mark = m,
	                        .remaining = 0,
	                        .reset_ms = 1000,
	                        .coarse_reset = true,
	                        .sent_ms = 0,
	                        .cost = 1,
	                        .alone_ms = INFINITY};
	learned_observe(&fresh, 2, &o);
	ck_assert_int_le(learned_ready_at(&fresh, 2, 1), 1002);
}
END_TEST

/* Concurrent requests: their answers count what was charged before each, and
 * what this lane sent after the newest answered one is still to come off. */
START_TEST(requests_in_flight_come_off_the_count)
{
	struct learned l;
	learned_init(&l, NULL);
	double m[6];
	for (int i = 0; i < 6; i++)
		m[i] = learned_charge(&l, 0, 1);
	/* the first answer: 9 left after it, five more in flight */
	struct learned_obs o = remaining_only(m[0], 9, 0, 1);
	learned_observe(&l, 20, &o);
	ck_assert_double_eq(view(&l, 20).remaining, 4);
	/* an older answer arriving late is ignored (out of order) */
	struct learned_obs newer = remaining_only(m[3], 6, 0, 1);
	struct learned_obs older = remaining_only(m[2], 7, 0, 1);
	ck_assert_int_ge(learned_observe(&l, 21, &newer), 0);
	ck_assert_int_eq(learned_observe(&l, 22, &older), -1);
	ck_assert_double_eq(view(&l, 22).remaining, 4);
}
END_TEST

/* A refusal was not charged: the count it carries must not read as refill
 * (Y = R + sent would jump by its cost), nor stay counted as in flight. */
START_TEST(a_refusal_is_not_refill)
{
	struct learned l;
	learned_init(&l, NULL);
	struct bucket b = bucket(5, 1); /* 60 RPM, a bucket of 5 */
	int64_t t = 0;
	/* drained at 2 per second: learns about 1/s */
	for (int k = 0; k < 40; k++, t += 500) {
		struct learned_obs o = send(&b, &l, t, 1, 500, false);
		learned_observe(&l, t + 5, &o);
	}
	double before = view(&l, t).rate_per_min;
	ck_assert_double_eq_tol(before, 60, 8);
	/* a burst of 20 refusals 1 ms apart */
	int refused = 0;
	for (int k = 0; k < 20; k++, t += 1) {
		struct learned_obs o = send(&b, &l, t, 1, 1, false);
		refused += o.refused;
		learned_observe(&l, t, &o);
	}
	ck_assert_int_ge(refused, 18);
	double after = view(&l, t).rate_per_min;
	ck_assert_msg(after < before * 1.15, "rate %.1f/min after refusals (%.1f before)", after,
	              before);
	ck_assert_double_lt(view(&l, t).remaining, 1); /* nothing left, nothing owed */
}
END_TEST

/* Answers of requests sent together may be counted in either order: a burst
 * whose counts came swapped must not raise the learned rate far above the
 * truth (each bound allows a request's cost for it). */
START_TEST(counts_of_a_burst_in_either_order)
{
	struct learned l;
	learned_init(&l, NULL);
	struct bucket b = bucket(10, 10);
	int64_t t = 0;
	for (int k = 0; k < 40; k++, t += 200) {
		/* two at once; the provider counts the second first */
		bucket_at(&b, t);
		double m1 = learned_charge(&l, t, 1), m2 = learned_charge(&l, t, 1);
		double r2 = b.level >= 1 ? floor(b.level -= 1) : floor(b.level);
		double r1 = b.level >= 1 ? floor(b.level -= 1) : floor(b.level);
		struct learned_obs o2 = remaining_only(m2, r2, (double)t, 1);
		struct learned_obs o1 = remaining_only(m1, r1, (double)t, 1);
		o1.alone_ms = o2.alone_ms = 0;
		learned_observe(&l, t + 5, &o2); /* the newer first: the older is ignored */
		learned_observe(&l, t + 6, &o1);
	}
	double rate = view(&l, t).rate_per_min;
	ck_assert_msg(rate < 600 * 1.15, "rate %.1f/min (10/s sent, 10/s refilled)", rate);
}
END_TEST

/* Mistral's "-minute" names state the window: limit / window is where the
 * rate starts before the counts say more. */
START_TEST(a_stated_window_gives_the_first_rate)
{
	struct learned l;
	learned_init(&l, NULL);
	double m = learned_charge(&l, 0, 1);
	struct learned_obs o = remaining_only(m, 59, 0, 1);
	o.limit = 60;
	o.window_ms = 60000;
	learned_observe(&l, 10, &o);
	ck_assert_double_eq_tol(view(&l, 10).rate_per_min, 60, 1e-9);
}
END_TEST

/* One answer said 7 left, and then answers stop reporting the budget (an
 * endpoint that does not): without a rate nothing says when units come back,
 * and the lane would probe for ever. Three newer answers in a row without it,
 * and it is forgotten; what was sent stays counted for the marks. */
START_TEST(a_budget_no_longer_reported_is_forgotten)
{
	struct learned l;
	learned_init(&l, NULL);
	double m = learned_charge(&l, 0, 1);
	struct learned_obs o = remaining_only(m, 7, 0, 1);
	learned_observe(&l, 5, &o);
	double marks[10];
	for (int i = 0; i < 10; i++)
		marks[i] = learned_charge(&l, 10, 1);
	ck_assert_int_gt(learned_ready_at(&l, 10, 1), 10); /* 7 spent, 3 more out */
	learned_unreported(&l, m);                         /* not newer: no matter */
	learned_unreported(&l, marks[0]);
	learned_unreported(&l, marks[1]);
	ck_assert_int_eq(l.n_obs, 1);
	learned_unreported(&l, marks[2]);
	ck_assert_int_eq(l.n_obs, 0);
	ck_assert_int_eq(learned_ready_at(&l, 20, 1), 20);
	ck_assert_double_eq(learned_charge(&l, 20, 1), 12); /* marks go on */
	/* a count again: learned afresh */
	o = remaining_only(12, 3, 20, 1);
	learned_observe(&l, 25, &o);
	ck_assert(view(&l, 25).counted);
	ck_assert_double_eq(view(&l, 25).remaining, 3);
}
END_TEST

/* A counted budget learns from the refusal's count, not from the 429 signal. */
START_TEST(a_capacity_signal_does_not_cut_a_counted_rate)
{
	struct learned l;
	learned_init(&l, NULL);
	struct bucket b = bucket(10, 10);
	int64_t t = 0;
	for (int k = 0; k < 40; k++, t += 80) {
		struct learned_obs o = send(&b, &l, t, 1, 80, false);
		learned_observe(&l, t + 5, &o);
	}
	double pace = view(&l, t).pace_per_min;
	learned_on_capacity_signal(&l, t, LEARNED_PENALTY);
	ck_assert_double_eq(view(&l, t).pace_per_min, pace);
}
END_TEST

/* Closed loop: clients behind the lane send as soon as they may; the bucket
 * answers after `latency_ms`; a refusal says when the next unit is there
 * (retry-after-ms) and the request waits that long; the first LEARNED_BLIND_MAX
 * go before any answer. Over `run_ms`, the share of what the bucket could
 * admit (cap + rate × time) that passed, and the refusals. */
static const struct loop {
	double cap, per_s;
	int64_t latency_ms, run_ms;
	int clients;
	bool coarse, stated; /* whole-second resets; limit per minute stated */
	double min_used;
	int max_refused;
} loops[] = {
    {10, 10, 50, 30000, 10, false, false, 0.97, 2}, /* the remaining-only case */
    {10, 10, 200, 30000, 10, false, false, 0.96, 2},
    {2, 2, 1, 7000, 20, true, true, 0.90, 3},    /* Azure, 2 req/s */
    {2, 2, 100, 7000, 20, true, true, 0.90, 3},  /* ... answers after 100 ms */
    {20, 20, 1, 7000, 20, true, true, 0.95, 0},  /* Azure, 20 req/s */
    {2, 2, 1, 20000, 20, false, false, 0.88, 3}, /* a bucket of 2, counts alone */
    {5, 5, 100, 20000, 10, true, false, 0.95, 1},
    {100, 1, 1, 60000, 5, true, false, 0.90, 1}, /* a minute's bucket, 60 RPM */
    /* answers slower than the bucket refills: more in flight than it holds */
    {10, 10, 2000, 30000, 30, false, false, 0.75, 4},
    {10, 10, 2000, 30000, 30, true, true, 0.88, 0},
    {60, 1, 5000, 120000, 20, false, false, 0.90, 1},
    {4, 4, 1000, 30000, 20, true, true, 0.92, 2},
};

struct flight {
	int64_t answer_at, hint;
	struct learned_obs o;
	uint64_t seq;
};

START_TEST(closed_loop_uses_the_budget_without_refusals)
{
	const struct loop *c = &loops[_i];
	struct learned l;
	learned_init(&l, NULL);
	struct bucket b = bucket(c->cap, c->per_s);
	struct flight fl[128];
	int nfl = 0, queued = c->clients, passed = 0, refused = 0;
	bool answered = false;
	uint64_t seq = 0;
	int64_t last = INT64_MIN / 2, hold = 0;
	for (int64_t t = 0; t < c->run_ms; t++) {
		for (int i = 0; i < nfl; i++) {
			if (fl[i].answer_at != t)
				continue;
			double after = seq == fl[i].seq ? INFINITY
			               : seq == fl[i].seq + 1
			                   ? (double)(last - (int64_t)fl[i].o.sent_ms)
			                   : 0;
			fl[i].o.alone_ms = fmin(fl[i].o.alone_ms, after);
			learned_observe(&l, t, &fl[i].o);
			answered = true;
			if (fl[i].o.refused && t + fl[i].hint > hold)
				hold = t + fl[i].hint;
			queued++; /* retried, or the client's next */
			fl[i] = fl[--nfl];
			i--;
		}
		while (queued > 0 && t >= hold && nfl < 128) {
			if (!answered && nfl >= LEARNED_BLIND_MAX)
				break;
			if (learned_ready_at(&l, t, 1) > t)
				break;
			struct flight *f = &fl[nfl++];
			f->o = send(&b, &l, t, 1, (double)(t - last), c->coarse);
			if (c->stated) {
				f->o.limit = c->per_s * 60;
				f->o.window_ms = 60000;
			}
			f->seq = ++seq;
			f->answer_at = t + c->latency_ms;
			f->hint = (int64_t)ceil((1 - b.level) / b.per_ms);
			last = t;
			queued--;
			passed += !f->o.refused;
			refused += f->o.refused;
		}
	}
	double used = passed / (c->cap + c->per_s * (double)c->run_ms / 1000);
	ck_assert_msg(used >= c->min_used, "row %d: used %.3f (< %.2f), %d refused", _i, used,
	              c->min_used, refused);
	ck_assert_msg(refused <= c->max_refused, "row %d: %d refused (> %d), used %.3f", _i,
	              refused, c->max_refused, used);
}
END_TEST

static Suite *counted_suite(void)
{
	Suite *s = suite_create("learned_counted");
	TCase *tc = tcase_create("counts");
	tcase_add_test(tc, the_first_count_anchors_and_is_spent_down);
	tcase_add_test(tc, a_probe_that_shows_no_refill_waits_longer);
	tcase_add_loop_test(tc, series_learn_rate_capacity_and_wait, 0,
	                    (int)(sizeof(series) / sizeof(series[0])));
	tcase_add_test(tc, a_full_bucket_never_holds);
	tcase_add_test(tc, a_whole_second_reset_is_a_bound_not_the_wait);
	tcase_add_test(tc, a_stated_window_gives_the_first_rate);
	suite_add_tcase(s, tc);
	TCase *noise = tcase_create("noise");
	tcase_add_test(noise, requests_in_flight_come_off_the_count);
	tcase_add_test(noise, a_refusal_is_not_refill);
	tcase_add_test(noise, counts_of_a_burst_in_either_order);
	tcase_add_test(noise, a_capacity_signal_does_not_cut_a_counted_rate);
	tcase_add_test(noise, a_budget_no_longer_reported_is_forgotten);
	suite_add_tcase(s, noise);
	TCase *loop = tcase_create("closed loop");
	tcase_add_loop_test(loop, closed_loop_uses_the_budget_without_refusals, 0,
	                    (int)(sizeof(loops) / sizeof(loops[0])));
	suite_add_tcase(s, loop);
	return s;
}

UNIT_MAIN("learned_counted", counted_suite)
