/* SPDX-License-Identifier: Apache-2.0 */
/* lanes — the event-loop side of the lanes (DESIGN §2, §3): the table of
 * lanes, each lane's one timer and its pump, dispatch, refusals, the quota
 * answer a lane replays, daily budgets, and the shared store's hooks. It is
 * the only caller of the scheduler (sched_*) and, through the limiter, of the
 * shared store (shared_*): the exchange never sees a lane's inside.
 *
 * A request's place in its lane is a struct lane_ticket embedded in the
 * exchange. The exchange tells the lanes what happened to it (one call per
 * event: the answer's headers, the attempt's end, the tokens it used, a retry,
 * a quota refusal, the client leaving); the lanes tell the exchange what to do
 * through a small table of callbacks (lanes_events), as the upstream does with
 * up_handler: send it now, or answer it without the upstream and why.
 *
 * Callbacks run from the lane's timer, which lanes_submit and lanes_pump
 * kick for later in the same loop turn (a dispatch never runs anywhere
 * else), and, for refusals, inside lanes_submit and lanes_quota; a
 * callback may end its exchange (finish → lanes_cancel) but must not free it
 * before the next loop turn. */
#ifndef PACERD_LANES_H
#define PACERD_LANES_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/stopwatch.h"
#include "sched/cost.h"
#include "sched/retry.h"
#include "sched/sched.h"
#include "store/shared.h"

struct config_ref;
struct evbuffer;
struct lanes;
struct log_line;
struct provider_conf;
struct registry;
struct scope_table;
struct shared;
struct shared_lease;
struct tokens_usage;

struct lanes_events;

/* A request's place in its lane. */
struct lane_ticket {
	struct sched_item item;     /* its place in the scheduler */
	struct sched_lane *lane;    /* NULL until lanes_find found its lane */
	struct shared_lease *lease; /* max_concurrent_global: held while in flight */
	struct cost_request cost;   /* what it was charged for (lanes_charge), for cost_observe */
	bool metered; /* a token budget paced its lane at lanes_charge: its gates were charged */
	double dispatched_at;      /* the instant the lane let it go, ms with their fraction */
	struct shared_grant grant; /* the store's "go" it left under, until its send */
	/* Its owner's callbacks when it is not an exchange's (a WebSocket's
	 * turn, wsrelay.c); NULL: those given to lanes_new. */
	const struct lanes_events *ev;
};

/* What picks a request's lane (DESIGN §2): the provider's limit scope and
 * model group. */
struct lane_request {
	const char *key_hash; /* 64 hex digits; NULL: no key (the anonymous scope) */
	const char *model;    /* as sent, model_len bytes (not NUL-terminated); NULL: none */
	size_t model_len;
	uint64_t identity; /* lanes_identity() of its own OpenAI-Project or
	                    * OpenAI-Organization header; 0: none */
	/* A side endpoint's lane name (profile_endpoint_lane: ":count_tokens",
	 * …), which takes the model group's place; NULL: generation. */
	const char *side;
};

/* What a request would be charged (cost.h), before its lane's share,
 * held history and percentile apply. */
struct lane_cost {
	int64_t input;        /* the input estimate (tokens.h) */
	int64_t prefix;       /* of which the cacheable prefix */
	uint64_t prompt_key;  /* the prefix's key; 0: none */
	int64_t max_output;   /* the output the request names; -1: none */
	int64_t cache_ttl_ms; /* its cache marks' lifetime; 0: the provider's default */
	/* History the provider holds (tokens.h): named, kept for a later
	 * request, the conversation's key (0: none), the input items' estimate */
	bool chained, stored;
	uint64_t conversation;
	int64_t items;
};

struct tokens_cost;
/* What the estimate of a body (tokens.h) asks of its lane: the cacheable
 * prefix is the marked head where the client marked one, else the prefix the
 * provider caches by itself. One place for the HTTP and WebSocket paths. */
struct lane_cost lane_cost_of(const struct tokens_cost *cost);

/* Why the lanes answer a request themselves. */
enum lane_refusal {
	LANE_REFUSE_TOO_MANY_LANES, /* limits.max_lanes, and no lane idle to evict */
	LANE_REFUSE_STORE_DOWN,     /* store.redis.on_error: fail, with the store down */
	LANE_REFUSE_DEADLINE,       /* the queue needs longer than the client allows */
	LANE_REFUSE_QUEUE_FULL,     /* queue.max_depth */
	LANE_REFUSE_EVICTED,        /* a request of a higher priority took its place */
	LANE_REFUSE_QUEUE_TIMEOUT,  /* queue.max_wait_s passed */
	LANE_REFUSE_AGENT_BUSY,     /* agents.mode: reject */
	LANE_REFUSE_QUOTA,          /* the quota is out: lanes_quota_answer has the answer */
	LANE_REFUSE_DAY_OUT,        /* the daily budget is spent */
};

struct lane_refusal_info {
	enum lane_refusal why;
	/* When a request like it would find room (QUEUE_FULL, EVICTED,
	 * DEADLINE, STORE_DOWN), or when the day starts over (DAY_OUT); -1:
	 * unknown. Not clamped. */
	int64_t wait_ms;
	long long depth;   /* QUEUE_FULL, EVICTED: the queue's depth */
	long long limit_s; /* QUEUE_TIMEOUT: queue.max_wait_s */
};

struct lanes_events {
	/* Send it now: its slot is taken and the gates are charged. */
	void (*dispatch)(struct lane_ticket *t);
	/* Answer it now without the upstream (the ticket is out of the lane). */
	void (*refuse)(struct lane_ticket *t, const struct lane_refusal_info *r);
};

/* With store.kind: redis, connects the shared store first; NULL with err set
 * when it cannot be used (a Redis that refuses scripts). */
struct lanes *lanes_new(struct event_base *base, struct config_ref *cref,
                        const struct lanes_events *ev, char *err, size_t errlen);
/* Every lane must be empty (their requests finished). */
void lanes_free(struct lanes *ls);
/* A new configuration: lanes whose provider still exists take its plan for
 * their next dispatch; the others keep theirs until they empty. */
void lanes_reconfigure(struct lanes *ls, struct config_ref *cref);

/* Finds (or makes) t's lane: the scope (the request's own identity, else
 * the key's configured scope, else the identity its answers named, else the
 * key) and the model group of r at prov. Its plan, or NULL when the lanes
 * refused t (the refuse callback has run). */
const struct plan_conf *lanes_find(struct lanes *ls, struct lane_ticket *t,
                                   const struct provider_conf *prov, const struct lane_request *r,
                                   int64_t now_ms);
/* The hash of an identity a provider names (kind: "project", "org",
 * "workspace"; the narrowest one the request or answer gives), the same in
 * every replica; value is value_len bytes. 0 when value is empty. */
uint64_t lanes_identity(const struct provider_conf *prov, const char *kind, const char *value,
                        size_t value_len);
/* The answer to t (r: its request as lanes_find took it) named the identity
 * whose budget it billed: the key's next requests go to that identity's
 * lanes, shared with every key whose answers name it. A lane the identity
 * gets this way starts with what t's lane learned (sched_lane_inherit). */
void lanes_learn_identity(struct lanes *ls, struct lane_ticket *t, const struct provider_conf *prov,
                          const struct lane_request *r, uint64_t answer_identity, int64_t now_ms);
/* The plan t's lane applies now (a reload may change it). */
const struct plan_conf *lanes_plan(const struct lane_ticket *t);
/* Whether the answer's usage would teach t's lane what a prompt costs even
 * though no token budget paces it yet: a cacheable prompt where cache reads
 * are free, so that the lane knows the cache's share by the time a budget
 * is learned (a coding agent's first wave is not charged ten full prompts);
 * a request whose history the provider holds or will hold, with a chain to
 * learn it for (the next turn is not charged its new items alone). Call after
 * lanes_charge. */
bool lanes_learns_cost(const struct lane_ticket *t, const struct lane_cost *c);
/* What t will be charged, into rq's costs: when a token budget paces the
 * lane (then t->metered: the caller reads the answer's usage and meters
 * streams), what the provider will count of c (cost.h: the
 * prompt's cache share where cache reads are free, the lane's output
 * percentile when no maximum is named); else nothing. */
void lanes_charge(struct lane_ticket *t, struct sched_request *rq, const struct lane_cost *c,
                  int64_t now_ms);
/* Queues t (charged rq's costs) and runs the lane later in this loop turn
 * (lane_kick); or refuses it through the
 * callback (queue full, agent busy, quota, day out, or — with client_ms > 0,
 * the client's own timeout — a wait that would end after deadline_ms).
 * Returns the queue's depth when t has to wait (0: it goes in this turn or
 * was refused), for the caller's queueing log line. */
size_t lanes_submit(struct lanes *ls, struct lane_ticket *t, const struct sched_request *rq,
                    long long client_ms, int64_t deadline_ms, int64_t now_ms);

/* The headers of t's answer (its HTTP status; event_stream: its body is an
 * event stream): what they teach the lane's gates, whether its provider is
 * silent and streams (the latency controller's cue), and the holds the head
 * verdict asks for. Returns true when what the lane knows of its limits
 * changed (lanes_log_learned writes it). */
bool lanes_headers(struct lanes *ls, struct lane_ticket *t, int status,
                   const struct rlh_result *rlh, const struct retry_head_verdict *hv,
                   bool event_stream, int64_t now_ms);
void lanes_log_learned(const struct lane_ticket *t, struct log_line *l, int64_t now_ms);

/* What an attempt's end changed, for the caller's log lines. */
struct lane_change {
	unsigned limit_from, limit_to; /* the concurrency limit (equal: unchanged) */
	bool quota_restored;           /* a success ended the lane's quota refusal */
};
/* t's attempt ended (its lease goes back, its slot is released); hold_ms > 0:
 * the answer asked the whole lane to wait (a capacity hint). */
void lanes_complete(struct lanes *ls, struct lane_ticket *t, enum retry_lane_outcome outcome,
                    bool hinted, int64_t hold_ms, int64_t now_ms, struct lane_change *ch);
/* t's refusal named the budget it refused, its limit and window (struct
 * retry_verdict's told): the lane learns it when no header taught it
 * (sched_learn_told). Returns true when it learned (a limit_learned line). */
bool lanes_learn_told(struct lanes *ls, struct lane_ticket *t, int budget, int64_t limit,
                      int64_t window_ms, int64_t now_ms);
/* The usage the answer reported (tokens.h), as the lane's provider counts it
 * (tokens_usage_counted: cache reads where they count), corrects the token
 * gates and teaches the lane what its requests cost (cost.h). Returns the
 * total it counted. */
int64_t lanes_tokens_used(struct lanes *ls, struct lane_ticket *t,
                          const struct tokens_usage *reported, int64_t now_ms);
/* Whether t's lane reads the latency of its answers (sched_timing_wanted):
 * then the exchange times t's answer (stopwatch.h) and tells the two calls
 * below. */
bool lanes_timing_wanted(const struct lane_ticket *t);
/* t's streamed answer brought its first data event, first_ms after its
 * dispatch: a lane in slow start may grow (and send more at once). */
void lanes_first_token(struct lanes *ls, struct lane_ticket *t, double first_ms, int64_t now_ms);
/* t's answer ended complete and successful (before lanes_complete), timed
 * by w: what it teaches the lane's limit. */
void lanes_answer_timed(struct lanes *ls, struct lane_ticket *t, const struct stopwatch *w,
                        int64_t now_ms);
/* t waits without a slot until ready_ms, then queues again ahead of the new. */
void lanes_retry(struct lanes *ls, struct lane_ticket *t, int64_t ready_ms);

/* t's answer says the quota is out: the lane keeps the answer (head: n
 * name\0value\0 pairs in head_len bytes, then the body) to replay it to every
 * request it refuses, and refuses what waits now. *fresh: the lane was not
 * refusing yet; returns how many waiting requests it refused. */
size_t lanes_quota(struct lanes *ls, struct lane_ticket *t, struct evbuffer *answer, size_t n,
                   size_t head_len, int status, const char *reason, bool *fresh);
/* The answer a lane refusing for quota replays: false when it has none (the
 * quota was found out by another replica). */
bool lanes_quota_answer(const struct lane_ticket *t, struct evbuffer *dst, size_t *n,
                        size_t *head_len, int *status, const char **reason);

/* t's request is being written to the provider now (the upstream's
 * connection is ready): a paced lane's gates keep their distance from this
 * instant, where the provider counts, rather than from the dispatch. */
void lanes_sent(struct lanes *ls, struct lane_ticket *t);
/* ... unless a refusal held its lane since it was let go (sched_recall):
 * then it is taken back, and true: the caller gives the transfer up and
 * queues it again (lanes_retry, due now). */
bool lanes_recall(struct lanes *ls, struct lane_ticket *t);

/* The client left, or the exchange ended otherwise: t leaves its lane
 * wherever it is (queued, waiting for a retry, in flight). */
void lanes_cancel(struct lanes *ls, struct lane_ticket *t);
/* Runs the lane (after a decision that may let requests go) later in this
 * loop turn, once every answer the turn read is told (lane_kick). */
void lanes_pump(struct lanes *ls, struct sched_lane *lane);

/* For log lines and answers: the lane's in flight and limits. */
size_t lanes_in_flight(const struct lane_ticket *t);
unsigned lanes_concurrency(const struct lane_ticket *t);
int64_t lanes_dispatch_delay_ms(const struct lane_ticket *t);

size_t lanes_count(const struct lanes *ls);
/* The lanes, read-only, for /status and /metrics. */
struct registry *lanes_registry(const struct lanes *ls);
/* The identities keys' answers named (sched/scope.h), for the state file. */
struct scope_table *lanes_scopes(struct lanes *ls);
/* restore(arg, lane, now_ms) is called with every lane the lanes make, once,
 * before its first request is queued (proxy/persist.c takes up there what a
 * previous process saved of it). NULL: none. */
void lanes_set_restore(struct lanes *ls,
                       void (*restore)(void *arg, struct sched_lane *lane, int64_t now_ms),
                       void *arg);
/* The shared store (NULL: store.kind local), for /status and /metrics. */
struct shared *lanes_shared(const struct lanes *ls);

#endif
