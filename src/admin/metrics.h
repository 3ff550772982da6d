/* metrics — what /metrics says, in the Prometheus text format (0.0.4).
 *
 * Two parts, over core/stats.h's histograms:
 *   - struct metrics: one fixed table of histograms and counters per provider
 *     (label `provider` only, never the key: the number of series is bounded
 *     by the number of provider names, at most METRICS_MAX_PROVIDERS).
 *     A finished request is observed with one call; the row is found by the
 *     provider pointer of the current configuration, else by name, so series
 *     survive a reload and requests accepted under an older configuration
 *     land in the row of their provider's name.
 *   - metrics_write: the whole exposition (process, per provider, the
 *     admin.top_lanes most active lanes), every family with HELP and TYPE,
 *     in base units (seconds). */
#ifndef PACERD_METRICS_H
#define PACERD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;      /* event2/buffer.h */
struct config;        /* core/config.h */
struct provider_conf; /* core/config.h */
struct registry;      /* sched/registry.h */
struct stats_hist;    /* core/stats.h */

#define METRICS_MAX_PROVIDERS 64

/* Writes the family's _bucket (cumulative, le ascending, then +Inf), _sum and
 * _count lines for one series; labels is `name="value"` pairs without braces
 * ("" = none), already escaped. No HELP/TYPE: see metrics_family. */
void metrics_hist_write(struct evbuffer *out, const char *name, const char *labels,
                        const struct stats_hist *h);
/* # HELP and # TYPE lines of a family. */
void metrics_family(struct evbuffer *out, const char *name, const char *type, const char *help);
/* Appends s as a label value (\\, \" and \n escaped). */
void metrics_label_value(struct evbuffer *out, const char *s);

/* One finished request, as exchange.c knows it; times in ms, -1: did not
 * happen (never dispatched, no answer head). */
struct metrics_request {
	int64_t queue_ms;      /* arrival to first dispatch */
	int64_t first_byte_ms; /* last dispatch to its answer's head */
	int64_t duration_ms;   /* arrival to the end */
	unsigned attempts;
	double tokens_estimated;   /* the estimate charged to the token gates (0: none) */
	long long tokens_reported; /* the upstream's usage, -1: none */
};

struct metrics;

/* NULL when out of memory. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
/* A new configuration: gives each of its providers a row (an existing one
 * when the name was seen before) and remembers its pointers for lookups.
 * Call before cfg's providers are used for metrics_observe; cfg must stay
 * alive until the next call. */
void metrics_bind(struct metrics *m, const struct config *cfg);
/* Counts one finished request of prov (NULL: ignored). No allocation. */
void metrics_observe(struct metrics *m, const struct provider_conf *prov,
                     const struct metrics_request *r);

struct store_stats; /* store.h */

/* The process, as the server reports it. */
struct metrics_process {
	const struct store_stats *store; /* store.kind: redis; NULL: local */
	bool draining;
	size_t in_flight, connections;
	uint64_t accepted;
	uint64_t responses[6]; /* [1..5]: by status class */
};

/* The whole exposition: process families, per-provider histograms and
 * counters, and per-lane families for at most top_lanes lanes of reg (the
 * most dispatched, see metrics.c). 0, or -1 when out of memory. */
int metrics_write(struct evbuffer *out, const struct metrics *m, const struct metrics_process *p,
                  struct registry *reg, unsigned top_lanes, int64_t now_ms);

#endif
