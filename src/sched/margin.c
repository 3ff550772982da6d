/* SPDX-License-Identifier: Apache-2.0 */
/* margin — a strict gate's margin learned from the path; see margin.h. */
#include "sched/margin.h"

#include <math.h>

/* Two margins closer than this are one (the store keeps 6 decimals). */
#define MARGIN_SAME 1e-6

static double clamp(double f)
{
	return f < MARGIN_MIN ? MARGIN_MIN : f > MARGIN_MAX ? MARGIN_MAX : f;
}

/* `n` intervals of a gate of T = interval_ms at the lane's pace there (T and
 * the margin), in ms; 0 for a T that is not a positive number. */
static double intervals_ms(const struct margin *m, double interval_ms, double n)
{
	return interval_ms > 0 && isfinite(interval_ms) ? n * interval_ms * (1 + m->frac) : 0;
}

/* The margin is f from now_ms on: the narrowing's clock starts again. */
static bool set(struct margin *m, double f, int64_t now_ms)
{
	f = clamp(f);
	m->since_ms = now_ms;
	m->oks = 0;
	if (fabs(f - m->frac) < MARGIN_SAME)
		return false;
	m->frac = f;
	return true;
}

void margin_init(struct margin *m, int64_t now_ms)
{
	*m = (struct margin){.frac = MARGIN_MIN,
	                     .since_ms = now_ms,
	                     .widened_ms = now_ms,
	                     .adopted_ms = INT64_MIN / 2};
}

bool margin_refused(struct margin *m, uint64_t dispatch_seq, int64_t dispatched_ms,
                    uint64_t last_seq, double interval_ms, int64_t now_ms)
{
	/* sent before the last widening, or before the fleet can have heard
	 * of one adopted: nothing new */
	if (dispatch_seq <= m->widened_seq ||
	    (double)(dispatched_ms - m->adopted_ms) <
	        intervals_ms(m, interval_ms, MARGIN_SETTLE_INTERVALS))
		return false;
	bool held =
	    (double)(now_ms - m->widened_ms) >= intervals_ms(m, interval_ms, MARGIN_HELD_INTERVALS);
	m->widened_seq = last_seq;
	m->widened_ms = now_ms;
	m->coarse = !held;
	return set(m, m->frac * (held ? MARGIN_NUDGE : MARGIN_WIDEN), now_ms);
}

bool margin_succeeded(struct margin *m, double interval_ms, int64_t now_ms)
{
	m->oks++;
	double after = m->coarse ? MARGIN_RECHECK_INTERVALS : MARGIN_NARROW_INTERVALS;
	if (m->frac <= MARGIN_MIN || m->oks < MARGIN_NARROW_OKS ||
	    (double)(now_ms - m->since_ms) < intervals_ms(m, interval_ms, after))
		return false;
	m->coarse = false;
	return set(m, m->frac * MARGIN_NARROW, now_ms);
}

void margin_settle(struct margin *m, int64_t now_ms)
{
	m->adopted_ms = now_ms;
}

bool margin_adopt(struct margin *m, double frac, uint64_t last_seq, int64_t now_ms)
{
	if (!isfinite(frac) || fabs(clamp(frac) - m->frac) < MARGIN_SAME)
		return false;
	if (frac > m->frac) {
		if (last_seq > m->widened_seq)
			m->widened_seq = last_seq;
		m->adopted_ms = now_ms;
		m->widened_ms = now_ms;
	}
	/* whichever replica widened coarsely narrows first, and the others
	 * adopt that */
	m->coarse = false;
	return set(m, frac, now_ms);
}
