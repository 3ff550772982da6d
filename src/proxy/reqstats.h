/* SPDX-License-Identifier: Apache-2.0 */
/* reqstats — what finished requests add up to, per provider: one fixed table
 * of histograms and counters (label `provider` only, never the key: the
 * number of series is bounded by the number of provider names, at most
 * REQSTATS_MAX_PROVIDERS). The exchange observes each finished request with
 * one call; /metrics (admin/metrics.c) writes the table out. The row is found
 * by the provider pointer of the current configuration, else by name, so
 * series survive a reload and requests accepted under an older configuration
 * land in the row of their provider's name. */
#ifndef PACERD_REQSTATS_H
#define PACERD_REQSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "core/stats.h"

struct config;
struct provider_conf;

#define REQSTATS_MAX_PROVIDERS 64

struct reqstats_row {
	char *name;                       /* the provider's; NULL: unused */
	const struct provider_conf *prov; /* of the configuration last bound, or NULL */
	struct stats_hist queue_wait, first_byte, duration, attempts;
	double tokens_estimated;
	uint64_t tokens_reported;
};

struct reqstats {
	struct reqstats_row rows[REQSTATS_MAX_PROVIDERS];
	size_t n_rows;
};

/* One finished request, as the exchange knows it; times in ms, -1: did not
 * happen (never dispatched, no answer head). */
struct reqstats_request {
	int64_t queue_ms;      /* arrival to first dispatch */
	int64_t first_byte_ms; /* last dispatch to its answer's head */
	int64_t duration_ms;   /* arrival to the end */
	unsigned attempts;
	double tokens_estimated;   /* the estimate charged to the token gates (0: none) */
	long long tokens_reported; /* the upstream's usage, -1: none */
};

/* NULL when out of memory. */
struct reqstats *reqstats_new(void);
void reqstats_free(struct reqstats *m);
/* A new configuration: gives each of its providers a row (an existing one
 * when the name was seen before) and remembers its pointers for lookups.
 * Call before cfg's providers are used for reqstats_observe; cfg must stay
 * alive until the next call. */
void reqstats_bind(struct reqstats *m, const struct config *cfg);
/* Counts one finished request of prov (NULL: ignored). No allocation. */
void reqstats_observe(struct reqstats *m, const struct provider_conf *prov,
                      const struct reqstats_request *r);

#endif
