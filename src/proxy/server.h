/* SPDX-License-Identifier: Apache-2.0 */
/* server — the proxy's front: its HTTP/1.1 server (httpd.c), request intake
 * (routing, keys, pacerd's answers before a lane: DESIGN §6), and the
 * configuration in force; routed requests go to the exchange (exchange.h). */
#ifndef PACERD_SERVER_H
#define PACERD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base; /* event2/event.h */
struct config;     /* core/config.h */
struct registry;   /* sched/registry.h */
struct upstream;   /* proxy/upstream.h */
struct shared;     /* store/shared.h */

struct server;
struct reqstats;
struct rewrites; /* proxy/rewrites.h */

/* Binds cfg->listen and starts accepting. The server takes the configuration
 * over (it frees it, also on failure). NULL with err set on failure. */
struct server *server_new(struct event_base *base, struct config *cfg, struct upstream *up,
                          char *err, size_t errlen);

/* Switches to a new, valid configuration (the server takes it over): the next
 * requests route by it, every lane paces by its new plan from its next
 * dispatch, and nothing in flight is dropped. What cannot change without a
 * restart (the listen address) is reported in a warning and kept. */
void server_reload(struct server *srv, struct config *cfg);

/* The configuration in force (owned by the server). */
const struct config *server_config(const struct server *srv);
void server_free(struct server *srv);

/* Graceful shutdown: stop accepting, answer new requests on open connections
 * with 503 shutting_down, and call drained(arg) once no request is in flight. */
void server_shutdown(struct server *srv, void (*drained)(void *), void *arg);
/* Drain deadline passed: answer or cut every request still in flight. */
void server_abort_all(struct server *srv);
size_t server_in_flight(const struct server *srv);
bool server_draining(const struct server *srv);

struct server_stats {
	uint64_t responses[6]; /* answers to clients by status class: [2] = 2xx … */
	uint64_t accepted;     /* connections since start */
	size_t connections;    /* open now */
	size_t in_flight;      /* requests not answered yet */
	bool draining;
};
void server_get_stats(const struct server *srv, struct server_stats *st);
/* Keeps what the lanes learn in dir across restarts (persist.h: reads what is
 * there now, writes every 30 s); dir NULL or "": nothing is kept. from: where
 * dir came from, for the log. Once, at start, before the loop runs. */
void server_keep_state(struct server *srv, const char *dir, const char *from);
/* Writes the lanes' state now (at shutdown, once drained). */
void server_save_state(struct server *srv);
struct persist; /* proxy/persist.h */
const struct persist *server_persist(const struct server *srv);
/* The CA for terminated tunnels (taken over, also on failure). -1 with err. */
struct ca; /* core/ca.h */
int server_set_ca(struct server *srv, struct ca *ca, char *err, size_t errlen);

struct server_tunnel_stats {
	uint64_t terminated;         /* CONNECTs terminated with pacerd's CA */
	uint64_t blind;              /* CONNECTs passed blindly (forward.tunnel), connected */
	uint64_t blind_failed;       /* of those, upstreams that could not be reached (502) */
	size_t blind_open;           /* blind tunnels open (or connecting) now */
	uint64_t denied;             /* CONNECTs refused (403) */
	uint64_t handshakes;         /* TLS handshakes completed */
	uint64_t handshake_failures; /* failed, cut, or not done within client_timeout_s */
	uint64_t requests;           /* requests read inside terminated tunnels */
	size_t open;                 /* terminated tunnels open now */
	size_t leaves;               /* leaf certificates in memory */
	bool ca;                     /* a CA is loaded */
};
void server_get_tunnel_stats(const struct server *srv, struct server_tunnel_stats *st);

/* The lane table, for /status and /metrics. */
/* The WebSocket transports, read-only, for /status and /metrics. */
struct wsrelay;
const struct wsrelay *server_websockets(const struct server *srv);
struct registry *server_lanes(const struct server *srv);
/* Per-provider histograms and counters, for /metrics. */
const struct reqstats *server_metrics(const struct server *srv);
/* The providers whose requests pacerd no longer rewrites (rewrites.h). */
const struct rewrites *server_rewrites(const struct server *srv);
/* The shared store, NULL with store.kind: local. */
struct shared *server_shared(const struct server *srv);

#endif
