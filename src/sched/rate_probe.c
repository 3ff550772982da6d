/* SPDX-License-Identifier: Apache-2.0 */
/* rate_probe — the pace of a lane that refusals alone teach; see
 * rate_probe.h for the model. */
#include "sched/rate_probe.h"

#include <math.h>
#include <string.h>

/* calm beyond which K stops growing (K_MAX is reached well before) */
#define CALM_MAX 8
/* the curve's highest rate, req/s: far beyond, it is no pace at all */
#define RATE_MAX 1e6

void rate_probe_init(struct rate_probe *p)
{
	memset(p, 0, sizeof(*p));
}

int64_t rate_probe_k_ms(const struct rate_probe *p)
{
	int64_t k = (int64_t)RATE_PROBE_K_MIN_MS << p->calm;
	return k < RATE_PROBE_K_MAX_MS ? k : RATE_PROBE_K_MAX_MS;
}

double rate_probe_rate(const struct rate_probe *p, int64_t now_ms)
{
	if (p->bound <= 0)
		return 0;
	double k = (double)rate_probe_k_ms(p);
	double t = now_ms > p->at_ms ? (double)(now_ms - p->at_ms) : 0;
	if (t < k) {
		double x = 1 - t / k;
		return p->from + (p->bound - p->from) * (1 - x * x * x);
	}
	double y = (t - k) / k;
	return fmin(p->bound * (1 + RATE_PROBE_STEP * y * y * y), RATE_MAX);
}

/* The provider's rate is at least this (req/s): the successes since the
 * last refusal over span_ms (rate_probe.h); 0: the span says too little. */
static double carried(const struct rate_probe *p, double span_ms)
{
	if (!p->refused || p->n < RATE_PROBE_SPAN_MIN_N || span_ms < RATE_PROBE_SPAN_MIN_MS)
		return 0;
	return ((double)p->n - 1) / (span_ms / 1000.0);
}

/* Whether a span of span_ms that bounds the rate at a says the same as b:
 * within RATE_PROBE_MOVE, and the counts' own noise (a success either way
 * for each bound: over a 1 s span, 2 req/s). */
static bool near(double a, double b, double span_ms)
{
	return fabs(a - b) <= RATE_PROBE_MOVE * b + 2000.0 / span_ms;
}

/* The curve from now_ms on, at bound b. */
static void hold(struct rate_probe *p, int64_t now_ms, double b)
{
	p->bound = (float)b;
	p->from = (float)(RATE_PROBE_MARGIN * b);
	p->at_ms = now_ms;
}

/* The limit changed: search again (the delay's AIMD). */
static void change(struct rate_probe *p, int64_t now_ms)
{
	p->bound = 0;
	p->calm = 0;
	p->changed = true;
	p->changed_ms = now_ms;
}

double rate_probe_refused(struct rate_probe *p, int64_t now_ms, int64_t sent_ms, double search_rps)
{
	double span_ms = (double)(sent_ms - p->cut_ms);
	double b = carried(p, span_ms);
	if (p->bound > 0) {
		/* Met again past K, at the bound it had: the same limit, probed
		 * later and more gently from now on. Anything else is a change. */
		if (b > 0 && now_ms - p->at_ms >= rate_probe_k_ms(p) &&
		    near(b, p->bound, span_ms)) {
			if (p->calm < CALM_MAX)
				p->calm++;
			hold(p, now_ms, b);
		} else {
			change(p, now_ms);
		}
	} else if (b > 0) {
		/* Searching: settled when nothing moved yet, or when two spans
		 * agree long enough after the last change. */
		bool agree = p->last > 0 && near(b, p->last, span_ms);
		if (p->last > 0 && !agree)
			change(p, now_ms);
		if (!p->changed || (agree && now_ms - p->changed_ms >= RATE_PROBE_SETTLE_MS))
			hold(p, now_ms, b);
	}
	if (b > 0)
		p->last = (float)b;
	p->refused = true;
	p->cut_ms = sent_ms;
	p->n = 0;
	return p->bound > 0 ? rate_probe_rate(p, now_ms) : search_rps;
}

double rate_probe_succeeded(struct rate_probe *p, int64_t now_ms, int64_t sent_ms)
{
	if (p->refused && sent_ms > p->cut_ms && p->n < UINT32_MAX)
		p->n++;
	if (p->bound <= 0)
		return 0;
	if (now_ms - p->at_ms >= rate_probe_k_ms(p) &&
	    carried(p, (double)(now_ms - p->cut_ms)) > (1 + RATE_PROBE_MOVE) * p->bound) {
		/* Successes at a rate the bound says the provider did not
		 * carry: the limit rose. The search finds where to. */
		change(p, now_ms);
		return 0;
	}
	return rate_probe_rate(p, now_ms);
}
