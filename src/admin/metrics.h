/* SPDX-License-Identifier: Apache-2.0 */
/* metrics — what /metrics says, in the Prometheus text format (0.0.4).
 *
 * Two parts, over core/stats.h's histograms:
 *   - the per-provider histograms and counters of finished requests, which
 *     the exchange keeps (proxy/reqstats.h) and this file writes out;
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

/* Writes the family's _bucket (cumulative, le ascending, then +Inf), _sum and
 * _count lines for one series; labels is `name="value"` pairs without braces
 * ("" = none), already escaped. No HELP/TYPE: see metrics_family. */
void metrics_hist_write(struct evbuffer *out, const char *name, const char *labels,
                        const struct stats_hist *h);
/* # HELP and # TYPE lines of a family. */
void metrics_family(struct evbuffer *out, const char *name, const char *type, const char *help);
/* Appends s as a label value (\\, \" and \n escaped). */
void metrics_label_value(struct evbuffer *out, const char *s);

struct reqstats;
struct store_stats; /* store.h */

/* The process, as the server reports it. */
struct metrics_process {
	const struct store_stats *store; /* store.kind: redis; NULL: local */
	bool draining;
	size_t in_flight, connections;
	uint64_t accepted;
	uint64_t responses[6]; /* [1..5]: by status class */
	/* CONNECT tunnels (server_tunnel_stats). */
	struct {
		uint64_t terminated, blind, denied, unreachable, handshakes, handshake_failures,
		    requests;
		size_t open;
	} tunnels;
};

/* The whole exposition: process families, per-provider histograms and
 * counters, and per-lane families for at most top_lanes lanes of reg (the
 * most dispatched, see metrics.c). 0, or -1 when out of memory. */
int metrics_write(struct evbuffer *out, const struct reqstats *m, const struct metrics_process *p,
                  struct registry *reg, unsigned top_lanes, int64_t now_ms);

#endif
