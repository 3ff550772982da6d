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
	*m = (struct margin){.frac = MARGIN_MIN, .since_ms = now_ms, .adopted_ms = INT64_MIN / 2};
}

bool margin_refused(struct margin *m, uint64_t dispatch_seq, int64_t dispatched_ms,
                    uint64_t last_seq, int64_t now_ms)
{
	/* sent before the last widening, or before the fleet can have heard
	 * of one adopted: nothing new */
	if (dispatch_seq <= m->widened_seq || dispatched_ms < m->adopted_ms + MARGIN_SETTLE_MS)
		return false;
	m->widened_seq = last_seq;
	return set(m, m->frac * MARGIN_WIDEN, now_ms);
}

bool margin_succeeded(struct margin *m, int64_t now_ms)
{
	m->oks++;
	if (m->frac <= MARGIN_MIN || m->oks < MARGIN_NARROW_OKS ||
	    now_ms - m->since_ms < MARGIN_NARROW_AFTER_MS)
		return false;
	return set(m, m->frac * MARGIN_NARROW, now_ms);
}

bool margin_adopt(struct margin *m, double frac, uint64_t last_seq, int64_t now_ms)
{
	if (!isfinite(frac) || fabs(clamp(frac) - m->frac) < MARGIN_SAME)
		return false;
	if (frac > m->frac) {
		if (last_seq > m->widened_seq)
			m->widened_seq = last_seq;
		m->adopted_ms = now_ms;
	}
	return set(m, frac, now_ms);
}
