/* SPDX-License-Identifier: Apache-2.0 */
/* stats — a histogram with fixed upper bounds, below everything that measures:
 * the store times its commands with one (store.h), /metrics keeps them per
 * provider and writes them out (metrics.h). Counts are kept cumulative
 * (counts[i] = observations <= bounds[i], as Prometheus exposes them), with
 * their sum and their number. Pure: no allocation, no clock, no output. */
#ifndef PACERD_STATS_H
#define PACERD_STATS_H

#include <stddef.h>
#include <stdint.h>

#define STATS_HIST_MAX_BUCKETS 16

struct stats_hist {
	const double *bounds; /* ascending upper bounds, +Inf implied after the last */
	size_t n_bounds;      /* <= STATS_HIST_MAX_BUCKETS */
	uint64_t counts[STATS_HIST_MAX_BUCKETS]; /* cumulative: observations <= bounds[i] */
	uint64_t count;                          /* all observations (the +Inf bucket) */
	double sum;
};

/* bounds must outlive h and be ascending; n is capped at STATS_HIST_MAX_BUCKETS. */
void stats_hist_init(struct stats_hist *h, const double *bounds, size_t n);
/* Counts v in every bucket whose bound is >= v. NaN is ignored; a negative
 * value (a clock step) counts as 0. */
void stats_hist_observe(struct stats_hist *h, double v);

#endif
