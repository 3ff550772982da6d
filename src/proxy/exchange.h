/* SPDX-License-Identifier: Apache-2.0 */
/* exchange — one request's way through its lane to the upstream and back
 * (see the life of a request at the top of exchange.c). The server's intake
 * hands each routed request over with exchange_start; from then on the
 * exchange answers the client through the hreq seam (httpd.h) and nothing
 * else of the client side.
 *
 * struct exchanges is the set of them: the lane table, each lane's timer, and
 * the upstream transfers, one per server. */
#ifndef PACERD_EXCHANGE_H
#define PACERD_EXCHANGE_H

#include <event2/event.h>
#include <stddef.h>

#include "core/config.h"
#include "http/httpd.h"
#include "proxy/intake.h"
#include "proxy/route.h"
#include "proxy/upstream.h"
#include "sched/registry.h"

struct exchanges;
struct reqstats;
struct rewrites;

/* What intake found out about a request. */
struct exchange_intake {
	struct config_ref *cref; /* the configuration route points into (a ref is taken) */
	const struct intake_headers *headers; /* the request's, read during exchange_start */
	struct route route;
	const char *key_hash; /* 64 hex digits, or NULL: no key */
	const char *agent;    /* the agents.header value, or NULL */
	uint64_t agent_id;    /* a hash of agent; 0: none */
	uint64_t flow;        /* its fair-share turn: the agent, the address (agents.fair_share) */
	int priority;         /* x-pacer-priority, else agents.priorities, else 0 */
};

/* With store.kind: redis, connects the shared store first; NULL with err
 * set when it cannot be used (a Redis that refuses scripts). */
struct exchanges *exchanges_new(struct event_base *base, struct upstream *up,
                                struct config_ref *cref, char *err, size_t errlen);
/* Aborts what is left (the clients are gone by then) and frees the lanes. */
void exchanges_free(struct exchanges *xs);

/* Takes the request over: enters it into its lane, or answers it (queue full,
 * agent busy, too many keys). */
void exchange_start(struct exchanges *xs, struct hreq *client, const struct exchange_intake *in);

/* A new configuration: lanes whose provider still exists take its plan for
 * their next dispatch; the others keep theirs until they empty. */
void exchanges_reconfigure(struct exchanges *xs, struct config_ref *cref);
/* Drain deadline passed: every exchange is stopped now; a client still
 * waiting for its answer gets 503 shutting_down, a stream is cut. */
void exchanges_abort_all(struct exchanges *xs);
/* Frees the pooled exchanges that no request needed since the last call (the
 * pool's low-water mark); all: every pooled one. Returns how many. */
size_t exchanges_trim(struct exchanges *xs, bool all);
/* fn(arg) once nothing has been in flight for ms since the last request in
 * flight finished (not again until a request has come and gone). */
void exchanges_on_idle(struct exchanges *xs, unsigned ms, void (*fn)(void *), void *arg);
size_t exchanges_live(const struct exchanges *xs);
size_t exchanges_lane_count(const struct exchanges *xs);
/* The lanes, read-only, for /status and /metrics. */
struct registry *exchanges_lanes(const struct exchanges *xs);
/* The lanes themselves, for what keeps their state across restarts (persist.h)
 * and the WebSocket relay, whose turns are tickets of its own (wsrelay.h). */
struct lanes *exchanges_lane_table(struct exchanges *xs);
/* The shared store (NULL: store.kind local), for /status and /metrics. */
struct shared *exchanges_shared(const struct exchanges *xs);
/* Per-provider histograms and counters, read-only, for /metrics. */
const struct reqstats *exchanges_metrics(const struct exchanges *xs);
/* The providers whose requests pacerd no longer rewrites, for /status. */
const struct rewrites *exchanges_rewrites(const struct exchanges *xs);

#endif
