/* SPDX-License-Identifier: Apache-2.0 */
/* store_script — the Lua scripts that decide a lane's gates in Redis, and the
 * arguments and replies they take (pure: builds argument vectors, parses
 * replies; store.c sends them, test_store_script runs them on a real Redis).
 *
 * Every decision runs on the server's clock (redis.call('TIME')), so replicas
 * whose clocks differ agree on one schedule. A gate is GCRA in the same form as
 * gcra.c (virtual scheduling: a theoretical arrival time, TAT, per gate; the
 * same tolerance, the same slack for late decisions), kept as one field of the
 * lane's hash, as a decimal string of milliseconds on the server's clock:
 *
 *   KEY  <prefix>{<provider>:<key hash prefix>}       a hash, one per lane
 *        r0 r1 r2 r3   request gates (min_ms, per second, per minute, per hour)
 *        t ti to       token gates (all, input, output)
 *        l0 l1 l2 l3   learned budgets (requests, tokens, input, output tokens):
 *                      the provider's bucket, refilled at the learned pace;
 *                      lN:T and lN:B its interval and capacity, as the last
 *                      replica that learned them wrote them
 *        hold          no request before this instant (a retry-after)
 *        quota         present while the account's quota is out
 *        sm            the strict gates' margin the replicas learned, a
 *                      fraction of the interval (sched/margin.h)
 *   KEY  <same>:leases  a sorted set: max_concurrent_global leases, scored by expiry
 *   KEY  <same>:leases:queue  a sorted set: decisions waiting for a lease, scored
 *                      by their first ask (served first come, first served)
 *   KEY  <same>:leases:asked  the same members, scored by their last ask (a
 *                      waiter that stops asking leaves the queue)
 *   KEY  <prefix>replicas  a sorted set: every replica's name, scored by its
 *                      last heartbeat (store/fleet.h), one per prefix
 *
 * Keys expire once their state is back to idle, plus the idle time the
 * caller passes: a gate whose TAT has passed means the same as no gate. */
#ifndef PACERD_STORE_SCRIPT_H
#define PACERD_STORE_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>

enum store_script_id {
	SCRIPT_DECIDE,  /* may a request go now? charges every gate when it may */
	SCRIPT_ADJUST,  /* corrects charges: actual tokens, unused decisions */
	SCRIPT_OBSERVE, /* a replica's observation of a learned budget */
	SCRIPT_HOLD,    /* a retry-after: hold every replica */
	SCRIPT_QUOTA,   /* the quota is out / back */
	SCRIPT_RENEW,   /* renews leases still in flight */
	SCRIPT_BEAT,    /* a replica's heartbeat: how many replicas are alive */
	SCRIPT_MARGIN,  /* a replica widened or narrowed the lane's strict margin */
	SCRIPT_N
};

/* The script's source, and its SHA-1 as hex (computed once, for EVALSHA). */
const char *store_script_source(enum store_script_id id);
const char *store_script_sha(enum store_script_id id);
const char *store_script_name(enum store_script_id id);

/* Most gates a decision carries: 4 request windows, 3 token gates, 5 learned. */
#define STORE_MAX_GATES 12
/* Arguments of the longest command: EVALSHA sha numkeys, 4 keys, 6 + 4 per gate. */
#define STORE_MAX_ARGS (3 + 4 + 6 + 4 * STORE_MAX_GATES)
/* The longest key name: prefix, provider, scope, a model group of up to 128
 * bytes, and a suffix. */
#define STORE_KEY_MAX 400
#define STORE_ARG_LEN 64

/* One gate of a decision or an adjustment. field: "r0".."r3", "t", "ti",
 * "to", "l0".."l3". t_ms <= 0 on a learned gate: use what another replica
 * stored (skipped when none did). */
struct store_gate {
	const char *field;
	double t_ms, burst, cost;
};

/* An argument vector the caller sends as is (redisAsyncCommandArgv). */
struct store_cmd {
	int argc;
	const char *argv[STORE_MAX_ARGS];
	size_t argvlen[STORE_MAX_ARGS];
	char buf[STORE_MAX_ARGS][STORE_ARG_LEN]; /* numbers formatted here */
};

/* The key names of a lane: prefix + '{' + provider + ':' + its scope's name
 * ("-" for the anonymous lane), then for a lane of a model group ':m' + the
 * group's length + ':' + the group (the length keeps a group named like the
 * suffix apart), + '}', and the same + ":leases". The braces are a Redis
 * Cluster hash tag: every key of a lane (and so every script) in one slot. Every replica names a
 * lane the same: scopes and groups come from the configuration, the answers and fixed-seed hashes.
 * Returns false when they do not fit. */
bool store_lane_keys(const char *prefix, const char *provider, const char *key_id,
                     const char *model, char *key, size_t keylen, char *leases, size_t leaseslen);

/* Every key a decision names: store_lane_keys's two, and the lease queue's
 * two (the leases key + ":queue", + ":asked"). */
struct store_lane_names {
	char key[STORE_KEY_MAX], leases[STORE_KEY_MAX];
	char queue[STORE_KEY_MAX + 8], asked[STORE_KEY_MAX + 8];
};
bool store_lane_names_of(const char *prefix, const char *provider, const char *key_id,
                         const char *model, struct store_lane_names *out);

/* EVALSHA decide: the gates (n <= STORE_MAX_GATES), a lease when lease_cap > 0
 * (member names it, replica id and a number, and keeps the decision's place in
 * the lease queue while it is asked again under the same name). margin_ms:
 * the most this replica takes from the decision's instant to its request on
 * the wire; a gate without slack keeps it after its charge (see charged()).
 * Strings must outlive cmd. */
void store_cmd_decide(struct store_cmd *cmd, const struct store_lane_names *names, double idle_ms,
                      unsigned lease_cap, const char *member, double lease_ms, double margin_ms,
                      const struct store_gate *gates, size_t n);
/* EVALSHA adjust: gate.cost is the correction (> 0 charged, < 0 refunded),
 * gate.burst the gate's (its slack). */
void store_cmd_adjust(struct store_cmd *cmd, const char *key, double idle_ms,
                      const struct store_gate *gates, size_t n);
/* EVALSHA observe: learned budget `field` has capacity `burst`, interval t_ms
 * per unit, and about `remaining` units left now. */
void store_cmd_observe(struct store_cmd *cmd, const char *key, double idle_ms, const char *field,
                       double t_ms, double burst, double remaining);
/* EVALSHA hold: no request of the lane before hold_ms from the server's now. */
void store_cmd_hold(struct store_cmd *cmd, const char *key, double idle_ms, double hold_ms);
/* EVALSHA quota: out (true) or back (false). */
void store_cmd_quota(struct store_cmd *cmd, const char *key, double idle_ms, bool out);
/* EVALSHA margin: this replica changed the lane's strict margin from `from`
 * to `to` (fractions of the interval). A widening is kept unless the store
 * holds a wider one already; a narrowing only while the store holds no more
 * than `from` (no replica widened it since) and more than `to`. The reply
 * is 1 when it was written. */
void store_cmd_margin(struct store_cmd *cmd, const char *key, double idle_ms, double from,
                      double to);
/* EVALSHA renew: the lease `member` lives lease_ms more (one per command). */
void store_cmd_renew(struct store_cmd *cmd, const char *leases, double lease_ms,
                     const char *member);
/* The fleet's key: prefix + "replicas" (no hash tag: a key of its own).
 * False when it does not fit. */
bool store_fleet_key(const char *prefix, char *key, size_t keylen);
/* EVALSHA beat: `member` (this replica) is alive now; names not seen for
 * ttl_ms leave. The reply is how many are left, this one included. */
void store_cmd_beat(struct store_cmd *cmd, const char *fleet_key, const char *member,
                    double ttl_ms);
/* ZREM: the lease is given back. */
void store_cmd_release(struct store_cmd *cmd, const char *leases, const char *member);
/* Replaces EVALSHA by EVAL with the script's source (after NOSCRIPT). */
void store_cmd_as_eval(struct store_cmd *cmd, enum store_script_id id);

/* A decision's answer: go (send wait_ms from now: the instant its gates open,
 * when that was a few ms ahead), or ask again wait_ms from now; quota: the
 * shared quota is out. Its fourth element, the lane's strict margin as the
 * store holds it ("" when none), is read by store_parse_margin. */
struct store_verdict {
	bool go;
	double wait_ms;
	bool quota;
};

/* Parses decide's reply, given as its three elements (integer, string,
 * integer). Returns false for a reply of another shape. */
bool store_parse_verdict(long long go, const char *wait, size_t wait_len, long long quota,
                         struct store_verdict *v);
/* The margin decide's reply carries (its fourth element): a fraction in
 * (0, 1) in *out; false when there is none ("") or it is not one. */
bool store_parse_margin(const char *s, size_t len, double *out);

#endif
