/* SPDX-License-Identifier: Apache-2.0 */
/* stats — the fixed-bounds histogram. See stats.h. */
#include "core/stats.h"

#include <math.h>
#include <string.h>

void stats_hist_init(struct stats_hist *h, const double *bounds, size_t n)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n_bounds = n < STATS_HIST_MAX_BUCKETS ? n : STATS_HIST_MAX_BUCKETS;
}

void stats_hist_observe(struct stats_hist *h, double v)
{
	if (isnan(v))
		return;
	if (v < 0)
		v = 0;
	/* Bounds ascend: the buckets that take v are a suffix. */
	for (size_t i = h->n_bounds; i > 0 && h->bounds[i - 1] >= v; i--)
		h->counts[i - 1]++;
	h->count++;
	h->sum += v;
}
