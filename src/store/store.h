/* SPDX-License-Identifier: Apache-2.0 */
/* store — the connection to the shared store (store.kind: redis), the only
 * code that talks to Redis. It sends the commands store_script.h builds and
 * hands each reply to its caller; what they mean for a lane is shared.c's
 * business. The bytes go through redis_conn.h (a bufferevent, plain or TLS,
 * to a name resolved by evdns; hiredis formats the commands and reads the
 * replies): hiredis 0.14's own async connection resolves names with a
 * blocking call and has no TLS (DESIGN §11).
 *
 * Each (re)connect resolves the name again, sends AUTH when a password is
 * set (pipelined with the scripts' SCRIPT LOAD), and counts as up once every
 * script is loaded; one not up within max(timeout_ms × 20, 1 s) is dropped and
 * tried again. Every command is watched (store.redis.timeout_ms, one
 * timer for the oldest), and reconnecting runs from a timer with backoff (50
 * ms doubling to 500 ms, so that a restarted Redis is back in use within a
 * second). A command that times out takes the connection down with it: a
 * Redis that stops answering is treated like one that is gone, every command
 * in flight is answered "failed", and the reconnect timer starts. Nothing
 * here blocks the loop: store_new's start-up check runs the same connection
 * on a loop of its own, before pacerd's. */
#ifndef PACERD_STORE_H
#define PACERD_STORE_H

#include <hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/stats.h"

struct event_base; /* event2/event.h */
struct config;     /* core/config.h */
struct log_line;   /* core/log.h */
struct store_cmd;  /* store/store_script.h */

struct store;

/* What /status and /metrics show. */
struct store_stats {
	bool connected; /* up: scripts loaded, answering */
	const char *address;
	uint64_t commands; /* sent */
	uint64_t errors;   /* failed: an error reply, a timeout, a lost connection */
	uint64_t timeouts;
	uint64_t decisions_go, decisions_wait;
	uint64_t permits;          /* granted by the "go"s: more than decisions_go with batches */
	uint64_t fallbacks;        /* decisions made locally because the store was down */
	uint64_t late_sends;       /* sends later than their margin: strict gates pushed */
	uint64_t stale_permits;    /* "go"s of strict gates dropped, too late to use */
	uint64_t refused;          /* requests answered 503 store_unavailable (on_error: fail) */
	uint64_t heartbeats;       /* heartbeats answered (store/fleet.h) */
	unsigned replicas;         /* replicas alive at the last heartbeats; 0: none heard */
	unsigned fallback_divisor; /* the plans' limits are divided by it while the store is down */
	struct stats_hist latency; /* seconds per command, reply or failure */
};

/* A command's outcome: the reply (never an error reply), or NULL when it
 * failed (error reply, timeout, connection lost, store freed). */
typedef void (*store_reply_fn)(void *arg, const redisReply *reply);

/* What the store tells its owner (shared.c). */
struct store_hooks {
	/* The store went up (true) or down (false), after its log line. */
	void (*on_state)(void *arg, bool up);
	/* Adds the owner's fields to the line that logs a change of state
	 * (store_unavailable, store_restored, store_connected): what the lanes
	 * do now. NULL: nothing. */
	void (*describe)(void *arg, struct log_line *l, bool up);
	void *arg;
};

/* Connects to cfg->store.redis.address and checks, blocking for at most
 * max(timeout_ms × 4, 1 s), that it takes the password and runs scripts: AUTH, SCRIPT
 * LOAD of each and one EVALSHA. A Redis that refuses them, or whose TLS
 * certificate is refused, is an error (NULL, err says why): pacerd must not
 * run with per-replica limits while it believes they are shared. A Redis
 * that does not answer is not: the store starts down and keeps trying.
 * hooks->on_state is called from the loop on every change (not for this
 * first state). */
struct store *store_new(struct event_base *base, const struct config *cfg,
                        const struct store_hooks *hooks, char *err, size_t errlen);
/* Fails every command in flight (their callbacks get NULL) and closes the
 * connection; on_state is not called. */
void store_free(struct store *st);

bool store_up(const struct store *st);
/* How long until the next reconnect attempt, ms (0 when up): a retry-after
 * for requests refused while the store is down. */
int64_t store_retry_in_ms(const struct store *st);

/* Sends cmd (its strings are copied); fn(arg, reply) later, always (NULL:
 * failed, also when the store is freed). Returns false, without calling fn,
 * when the store is down. */
bool store_send(struct store *st, const struct store_cmd *cmd, store_reply_fn fn, void *arg);

struct store_stats *store_stats(struct store *st);

#endif
