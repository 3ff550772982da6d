/* SPDX-License-Identifier: Apache-2.0 */
/* sched — one lane per (provider, API key): its queue (priorities, fair
 * share between agents: fairq), its gates, its
 * adaptive limits, and the dispatch decision (DESIGN §3). Pure: time is an
 * argument, nothing here does I/O or owns a timer. The lanes module
 * (proxy/lanes.c) asks sched_next() for the next request to send and arms one
 * timer per lane for sched_wake_at().
 *
 * A request is a struct sched_item embedded in the caller's own request
 * object; the lane links it into its lists but never frees it. What a lane
 * allocates for itself (sched_lane_release frees it) is only what few lanes
 * need. No call looks at every request of a lane: each costs O(1) or
 * O(log n) in the requests waiting (see sched.c).
 *
 * The lane itself is opaque here: its fields are sched's (sched_lane-t.h says
 * who else may include it). Readers outside take sched_lane_view(), a copy of
 * what /status and /metrics show, or the few accessors below. */
#ifndef PACERD_SCHED_H
#define PACERD_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "provider/ratelimit_headers.h"
#include "sched/aimd.h"
#include "sched/cost.h"
#include "sched/fairq.h"
#include "sched/gradient.h"
#include "sched/learned.h"
#include "sched/pheap.h"

#define SCHED_NEVER INT64_MAX

enum sched_state {
	SCHED_NONE,       /* not in a lane */
	SCHED_QUEUED,     /* waiting to go (new, or a due retry) */
	SCHED_RETRY_WAIT, /* waiting for its retry time; holds no slot */
	SCHED_IN_FLIGHT,  /* dispatched, holds a concurrency slot */
};

struct sched_lane;      /* sched_lane-t.h */
struct sched_idle_list; /* sched_lane-t.h: the registry's idle lanes */
struct gates;           /* gcra.h */
struct cost_request;    /* cost.h */
struct cost_usage;      /* cost.h */
struct cost_charge;     /* cost.h */

struct sched_item {
	struct sched_lane *lane;
	struct pheap_node hn; /* in the ready heap, its agent's (parked) or the retries' */
	struct fairq_node fq; /* priority and fair-share place; a new request is in fairq */
	enum sched_state state;
	int64_t arrived_ms; /* first entry into the lane */
	int64_t queued_ms;  /* entry into the current wait */
	int64_t ready_ms;   /* SCHED_RETRY_WAIT: not before this */
	int64_t dispatched_ms;
	uint64_t dispatch_seq; /* the lane's dispatch number of its last attempt */
	uint64_t seq;          /* arrival, due or retry-scheduled order: ties in the heaps */
	double cost_tokens;    /* estimate charged to the token gate: prompt + output */
	double cost_prompt;    /* its parts, for learned input/output token budgets */
	double cost_output;
	double marks[RLH_N_BUDGETS]; /* learned_charge's marks, echoed by observations */
	uint64_t agent;              /* hash of the agent id; 0 = none */
	unsigned attempts;           /* dispatches so far */
	bool saturated;              /* the lane was at its concurrency limit when dispatched */
	bool retried;                /* came back from a retry: before new ones of its priority */
	uint32_t park_epoch;         /* parked while equal to its lane's (serialize) */
	bool agent_counted;          /* counted among its agent's requests in flight */
	bool holding;                /* its capacity answer holds the lane until decided */
	bool probe;                  /* it left as its lane's probe (lane_mode.h) */
	bool hinted;                 /* its capacity answer said when (retry-after, a reset) */

	/* for counted budgets (learned.h), echoed by observations too */
	double levels[RLH_N_BUDGETS]; /* learned_shadow_level after the marks' charges */
	double gap_before_ms;         /* since the lane's dispatch before this one's */
};

/* A new request, as sched_submit takes it. */
struct sched_request {
	double cost_prompt, cost_output; /* token estimate (0 when no token budget paces) */
	uint64_t agent;                  /* agents.mode: hash of the agent id; 0 = none */
	uint64_t flow;                   /* fair share: hash of the agent id or client address */
	int priority;                    /* FAIRQ_PRIORITY_MIN..MAX; higher goes first */
};

enum sched_submit_result {
	SCHED_OK,         /* queued: call sched_next */
	SCHED_QUEUE_FULL, /* 503 queue_full */
	SCHED_AGENT_BUSY, /* 409 agent_busy (agents.mode reject) */
	SCHED_QUOTA,      /* the lane's quota is exhausted: answer with its refusal */
	SCHED_DAY_OUT,    /* the plan's daily budget is spent: 429 daily_budget_exhausted */
};

/* What an attempt's answer means for the lane. */
enum sched_outcome {
	SCHED_SUCCESS,   /* a final answer from the upstream (2xx… or a final error) */
	SCHED_CAPACITY,  /* 429 rate limit, 503, 529: capacity signal */
	SCHED_TRANSIENT, /* 5xx, transport errors: no capacity signal */
	SCHED_QUOTA_OUT, /* a final refusal for money or a daily cap (sched_quota_exhausted) */
	SCHED_ABORTED,   /* the client left: release only */
	SCHED_OVERLOAD,  /* capacity that is not the account's budget (a provider's
	                  * overload, a service tier's shortage): counted as a
	                  * capacity signal, never a cut of AIMD or the learned pace */
};

struct sched_lane_stats {
	uint64_t dispatched, succeeded, capacity_signals, capacity_reactions, transient_errors,
	    retries, rejected_queue_full, rejected_agent_busy, queue_timeouts, cancelled, probes,
	    quota_refused, drained, day_refused;
	int64_t queue_wait_max_ms;
};

/* Where a lane's rate gates are decided (store.kind: redis): the lanes set
 * it from the store's state (proxy/limiter.c). */
enum sched_gates_mode {
	SCHED_GATES_LOCAL,    /* here, at the plan's limits (store.kind: local) */
	SCHED_GATES_SHARED,   /* in the shared store: one "go" (a permit) per dispatch */
	SCHED_GATES_FALLBACK, /* here, at the plan's limits × 1 / replicas (store down) */
};

/* Decisions asked of the store at once per lane, at most. */
#define SCHED_ASKS_MAX 16
/* Permits a lane holds or has asked for at once, at most: SCHED_ASKS_MAX
 * single decisions, or the batches of a busy lane (store/batch.h), whose
 * size is bounded by the round trip and the gates' burst, not by this. The
 * store keeps as many (SHARED_PERMITS_MAX; proxy/limiter.c checks). */
#define SCHED_PERMITS_MAX 64

/* Sets up a lane for `plan` at now_ms (the registry calls this) on memory that
 * holds no lane, or a released one. */
void sched_lane_init(struct sched_lane *lane, const struct provider_conf *prov,
                     const struct plan_conf *plan, enum agents_mode agents, int64_t now_ms);
/* Frees what the lane allocated and takes it off its idle list. The lane must
 * hold no request (sched_lane_idle). */
void sched_lane_release(struct sched_lane *lane);
/* From now on the lane is on `list` whenever it is idle (put there at once
 * when idle now, as the most recently active). */
void sched_lane_track_idle(struct sched_lane *lane, struct sched_idle_list *list);
/* Bytes the lane allocated beyond its struct (memory accounting). */
size_t sched_lane_heap_bytes(const struct sched_lane *lane);
/* A new configuration (reload): the lane's provider (the same name, in the
 * new configuration), its plan and agents.mode. Gates keep what they know
 * where they can. */
void sched_lane_reconfigure(struct sched_lane *lane, const struct provider_conf *prov,
                            const struct plan_conf *plan, enum agents_mode agents, int64_t now_ms);
/* The event-loop side's state of the lane (the lanes module's shell: its
 * timer), which sched keeps for it and never reads; NULL until set. */
void sched_lane_set_shell(struct sched_lane *lane, void *shell);
void *sched_lane_shell(const struct sched_lane *lane);

/* Queues a new request, or refuses it. When the queue is full, a request of a
 * higher priority than the lowest waiting takes the place of the newest of
 * those: *evicted (else NULL) is then out of the lane, to be answered 503
 * queue_full by the caller. */
enum sched_submit_result sched_submit(struct sched_lane *lane, struct sched_item *it,
                                      const struct sched_request *rq, int64_t now_ms,
                                      struct sched_item **evicted);

/* Requests waiting to go (not retries): the queue's depth. */
size_t sched_queue_depth(const struct sched_lane *lane);
/* How long the request waiting longest has waited at now_ms; 0: none waits. */
int64_t sched_oldest_wait_ms(const struct sched_lane *lane, int64_t now_ms);

/* The next request to send now, or NULL. The caller must then dispatch it (the
 * item is already counted in flight and the gates are charged). now_ms may
 * carry a fraction of a millisecond: the gates space requests that finely. */
struct sched_item *sched_next(struct sched_lane *lane, double now_ms);
/* `it`, dispatched, left for the provider at sent_ms (its bytes were written):
 * the gates keep their distance from that instant (gates_sent), since the
 * provider counts arrivals, not decisions. */
void sched_sent(struct sched_lane *lane, const struct sched_item *it, double sent_ms);

/* The earliest instant something may change without outside input: a gate
 * opens for the head of the queue, a retry becomes due, or a queued request
 * reaches its max wait; to the fraction of a millisecond where a gate opens.
 * SCHED_NEVER (as a double) when nothing is waiting for time. Not
 * const: with agents.mode serialize it records the requests it passes over,
 * as sched_next does, so that no call looks at them again. */
double sched_wake_at(struct sched_lane *lane, double now_ms);

/* Removes and returns one queued request whose max wait has passed (504
 * queue_timeout), or NULL. Call until NULL. O(priorities waiting): only the
 * oldest of a priority can be due first. */
struct sched_item *sched_expired(struct sched_lane *lane, int64_t now_ms);

/* Whether a hold keeps the lane at now_ms: a retry-after's, or a capacity
 * answer's while it is decided. */
bool sched_held(const struct sched_lane *lane, int64_t now_ms);

/* `it` is in flight but not written yet (the upstream's connection is ready
 * and it goes next), and the lane is held at now_ms: a refusal came after it
 * was let go, and it would reach the provider inside the window the refusal
 * announced. Taken back: its slot is released and its attempt uncounted, to
 * be queued again (sched_retry, due now: the hold keeps it). False when it
 * may leave. */
bool sched_recall(struct sched_lane *lane, struct sched_item *it, int64_t now_ms);

/* The attempt of an in-flight item ended. Releases its slot and feeds the
 * adaptive limits with the time since its dispatch. */
void sched_complete(struct sched_lane *lane, struct sched_item *it, enum sched_outcome outcome,
                    int64_t now_ms);

/* What the exchange timed of an answer (the lanes hand it down): the
 * latency-gradient controller's input (gradient.h). */
struct sched_timing {
	double first_ms;      /* dispatch to the first data event; < 0: not a stream */
	double stream_ms;     /* the first data event to the last */
	double max_gap_ms;    /* the longest gap between two chunks after the first */
	unsigned events;      /* data events after the first chunk's */
	double prompt_tokens; /* the prompt's estimate */
};

/* Whether the lane's limit reads the latency of its answers now (its plan's
 * concurrency.mode: gradient; auto while its provider is silent and no
 * refusal closed its AIMD limit): only then is it worth timing them. */
bool sched_timing_wanted(const struct sched_lane *lane);
/* The first data event of the streamed answer to `it` (in flight) came,
 * first_ms after its dispatch. Returns true when the limit grew (the lane
 * may send more now). */
bool sched_first_token(struct sched_lane *lane, const struct sched_item *it, double first_ms,
                       double prompt_tokens, int64_t now_ms);
/* The answer to `it` (in flight: before sched_complete) ended complete and
 * successful, timed as *tm. Returns true when the limit moved. */
bool sched_answer_timed(struct sched_lane *lane, const struct sched_item *it,
                        const struct sched_timing *tm, int64_t now_ms);

/* Rate-limit headers seen on the response to `it` (dispatched at
 * it->dispatched_ms); refused: the upstream refused it (a capacity status),
 * so it was charged nothing there. Returns true when what the lane knows of
 * its limits changed (worth a limit_learned log line). */
bool sched_observe(struct sched_lane *lane, const struct sched_item *it, const struct rlh_result *h,
                   bool refused, int64_t now_ms);

/* A capacity refusal named budget b's limit per window_ms (Gemini's
 * quotaValue and quotaId: no header ever describes it). When the lane has
 * learned nothing of b from headers and its plan sets no rate (a plan's
 * limits are the user's word), it takes the budget as a bucket of
 * `limit` refilled over window_ms, empty at now_ms (learned_told), so that
 * the next requests are paced below it instead of meeting the next refusal.
 * Returns true when it learned (worth a limit_learned log line). */
bool sched_learn_told(struct sched_lane *lane, int b, double limit, int64_t window_ms,
                      int64_t now_ms);

/* Whether a learned token budget paces the lane (the caller must then
 * estimate token costs). */
bool sched_wants_tokens(const struct sched_lane *lane);

/* The server asked to wait (retry-after on a capacity error): no request of
 * the lane leaves before until_ms, and then one goes alone first (the probe). */
void sched_hold(struct sched_lane *lane, int64_t until_ms);
/* Whether the lane's provider is known to answer without rate-limit headers
 * (its last answer, on any lane, had none; or its dialect reads none). Until
 * its first answer, a lane with no plan sends a few requests and waits for
 * that answer's headers (learned_blind_ready_at), unless there is nothing to
 * learn from them: then it is open from the start. The lanes say it again at
 * every answer: with concurrency.mode auto, a silent provider that streams
 * has its lanes' limits follow latency (sched_set_provider_streams). */
void sched_set_provider_silent(struct sched_lane *lane, bool silent);
/* Whether the lane's provider answers successes with event streams: with
 * concurrency.mode auto, a silent provider's lanes read the latency of their
 * answers from then on (the controller reads streams: a lane of JSON answers
 * alone has nothing to read and stays AIMD's). */
void sched_set_provider_streams(struct sched_lane *lane, bool streams);
/* Whether the lane has left LEARNING (lane_mode.h): an answer's headers came
 * back, or it took what another lane learned (sched_lane_inherit). */
bool sched_answered(const struct sched_lane *lane);

/* The headers of a capacity answer (429, 503, 529) to `it` arrived: nothing
 * of the lane leaves until that answer is decided (sched_complete of `it`),
 * or until_ms at the latest (a body that never comes must not stall the
 * lane): requests sent in between would reach a provider that has just
 * refused. */
void sched_hold_pending(struct sched_lane *lane, struct sched_item *it, int64_t until_ms);

/* A final answer said the account cannot be served (insufficient quota, a
 * spend cap, a daily cap past the deadline). Returns true when the lane was
 * not in that state already (worth a quota_exhausted log line). The caller
 * then answers every request sched_drain gives it. */
bool sched_quota_exhausted(struct sched_lane *lane, int64_t now_ms);

/* Whether the plan has a daily budget. */
bool sched_day_limited(const struct sched_lane *lane);

/* When the lane's daily budget starts over next (monotonic ms); with new_day,
 * a new day begins now: nothing spent. */
void sched_day_reset(struct sched_lane *lane, int64_t resets_at_ms, bool new_day);

/* Whether the daily budget is spent (until its reset): the caller answers what
 * sched_drain gives it, and sched_submit refuses (SCHED_DAY_OUT). */
bool sched_day_out(const struct sched_lane *lane);

/* Another replica's probe found the quota back (the shared store). */
void sched_quota_restored(struct sched_lane *lane);

/* Whether the lane's quota is exhausted. */
bool sched_quota_out(const struct sched_lane *lane);

/* Removes and returns one request waiting in the lane (queued or waiting for
 * a retry), or NULL: call until NULL. */
struct sched_item *sched_drain(struct sched_lane *lane);

/* What request r would be charged on the lane at now_ms (cost.h's
 * cost_charge, with the lane's provider and plan: the prompt's cache share
 * where cache reads are free for the lane's model (profile_cache_reads_free),
 * the history the provider holds for a chained request, the output
 * percentile, max_output where the provider reserves it: its profile's
 * output_charge until its counters told). */
void sched_cost_charge(const struct sched_lane *lane, const struct cost_request *r, int64_t now_ms,
                       struct cost_charge *out);
/* The rate-limit headers of the answer to it (request r) teach the lane how
 * the provider charges r's max_output (cost_output_headers): from its output
 * tokens budget, else its combined tokens budget. */
void sched_cost_headers(struct sched_lane *lane, const struct sched_item *it,
                        const struct cost_request *r, const struct rlh_result *h, int64_t now_ms);
/* The usage of the answer to r, which went upstream at sent_ms, teaches the
 * lane what its requests cost (cost_observe). */
void sched_cost_observe(struct sched_lane *lane, const struct cost_request *r,
                        const struct cost_usage *u, int64_t sent_ms);

/* Corrects the token gates once the real usage is known: in all, and the
 * input and output parts (< 0: not reported, that gate keeps the estimate). */
void sched_tokens_used(struct sched_lane *lane, struct sched_item *it, double actual_tokens,
                       double actual_input, double actual_output, int64_t now_ms);

/* A completed attempt will be retried at ready_ms: the item waits without a
 * slot, then goes back ahead of the new requests of its priority. */
void sched_retry(struct sched_lane *lane, struct sched_item *it, int64_t ready_ms);

/* The client left: drop the item wherever it waits (not for SCHED_IN_FLIGHT,
 * which ends with sched_complete(SCHED_ABORTED)). */
void sched_cancel(struct sched_lane *lane, struct sched_item *it);

/* The lane's strict-gate margin as the shared store holds it (another
 * replica widened or narrowed it: sched/margin.h); the lane's own outcomes
 * change it in sched_complete. Its value: sched_lane_margin. */
void sched_margin_adopt(struct sched_lane *lane, double frac, int64_t now_ms);

/* Where the lane's gates are decided from now on; scale: the share of the
 * plan's limits the local gates apply (FALLBACK: 1 / the fleet, else 1). */
void sched_set_gates_mode(struct sched_lane *lane, enum sched_gates_mode mode, double scale,
                          int64_t now_ms);

/* What one decision asked of the store is for: the head of the queue. */
struct sched_costs {
	double tokens, prompt, output;
};

/* SHARED: how many decisions to ask the store for now (0 to
 * SCHED_ASKS_MAX, counting those asked and not answered), with the costs of
 * the request that would go first. 0 when nothing could leave now. */
unsigned sched_permits_wanted(struct sched_lane *lane, int64_t now_ms, struct sched_costs *head);
/* SHARED: how many requests could leave now whatever the token gates say
 * (free slots and waiting requests, minus permits held or asked; one while a
 * dispatch delay or a learned pace spaces them here): the room a batch of
 * permits may fill (store/batch.h). */
unsigned sched_permits_room(struct sched_lane *lane, int64_t now_ms);
/* n decisions were sent to the store. */
void sched_permits_asked(struct sched_lane *lane, unsigned n);
/* One decision came back: go (a permit), else not before until_ms (the
 * store said wait), or failed (until_ms ignored; the caller decides what a
 * store that fails means). */
enum sched_permit_answer { SCHED_PERMIT_GO, SCHED_PERMIT_WAIT, SCHED_PERMIT_FAILED };
void sched_permit_answer(struct sched_lane *lane, enum sched_permit_answer a, int64_t until_ms);
/* Permits no request waits for any more (the queue emptied, the lane left
 * SHARED): they are taken back and counted, for the store to refund. */
unsigned sched_permits_unused(struct sched_lane *lane);
/* n permits held too long to be used (shared_stale): gone, not refunded. */
void sched_permits_drop(struct sched_lane *lane, unsigned n);

/* Estimated wait for `rq` entering the queue now (its priority and fair
 * share), for deadline_unreachable and retry-after on queue_full; NULL: the
 * time to send everything waiting. */
int64_t sched_queue_eta_ms(const struct sched_lane *lane, const struct sched_request *rq,
                           int64_t now_ms);

/* Estimated wait for a request of a new agent at `priority` (/status). */
int64_t sched_priority_eta_ms(const struct sched_lane *lane, int priority, int64_t now_ms);

/* The lane's state in one word, for /status (lane_state_name): its
 * admission's ("quota_exhausted", "daily_budget_exhausted"), "held" (a
 * retry-after, or a capacity answer being decided), or its mode's: "probing"
 * (a hold ended, one request goes first), "open" (no capacity signal yet: up
 * to max_concurrent) or "adaptive" (AIMD after a signal). */
const char *sched_lane_state(const struct sched_lane *lane, int64_t now_ms);

/* Current concurrency limit. */
unsigned sched_concurrency_limit(const struct sched_lane *lane);
/* Requests in flight. */
size_t sched_in_flight(const struct sched_lane *lane);
/* The dispatch-delay AIMD's delay now, ms. */
int64_t sched_dispatch_delay_ms(const struct sched_lane *lane);
/* When the daily budget starts over next (sched_day_reset; 0: not set yet). */
int64_t sched_day_resets_at_ms(const struct sched_lane *lane);

/* True when the lane holds nothing: no queue, no flight, no retry waiting,
 * no decision asked of the store. */
bool sched_lane_idle(const struct sched_lane *lane);

/* A fresh lane (nothing dispatched, nothing learned) takes what `from`
 * learned of the provider's budgets, its adaptive limits and its hold: the
 * lane of a scope that keys were just found to share starts where the lane
 * of the key that found it was, instead of sending a fresh lane's first
 * burst into a budget already spent. False when it took nothing. */
bool sched_lane_inherit(struct sched_lane *to, const struct sched_lane *from);

/* ---- what survives a restart ----
 *
 * A lane's owner saves and restores it (issue 30): the lanes hand the plain
 * value below to the state file (sched/state_file.h) and take it back into a
 * fresh lane of the same identity in the next process. Instants in it are
 * wall-clock ms since the Unix epoch: the monotonic clock of one process means
 * nothing to the next. */

#define SCHED_SAVED_NAME_MAX 64   /* a provider's name (config.c's names) */
#define SCHED_SAVED_MODEL_MAX 128 /* a model group (CONFIG_MODEL_MAX, TOKENS_MODEL_MAX) */

struct sched_lane_saved {
	/* Identity: what keys the lane in the registry, never a key (a key's
	 * scope is the first 64 bits of its SHA-256, its name 12 hex digits). */
	char provider[SCHED_SAVED_NAME_MAX + 1];
	uint64_t scope;
	char scope_name[24];
	char model[SCHED_SAVED_MODEL_MAX + 1]; /* "": the scope's model-less lane */
	int64_t last_active_ms;                /* its last request or answer */
	/* Its mode. */
	bool answered;         /* it had left LEARNING: an answer came back */
	bool probing;          /* a hold had come and no probe had succeeded since */
	int64_t hold_until_ms; /* a retry-after's end; 0: none */
	/* Its adaptive limits, and its strict gates' margin (margin.h; 0: none
	 * learned, MARGIN_MIN). */
	struct aimd_saved aimd;
	double strict_margin;
	/* What it refuses. */
	bool quota_out;
	int64_t quota_probe_at_ms;       /* the next probe while quota_out */
	double day_requests, day_tokens; /* spent this day */
	int64_t day_resets_at_ms;        /* when that day ends; 0: not known */
	/* Budgets learned: bit b for budget b (enum rlh_budget). The budgets
	 * themselves travel beside, one struct learned each, in b's order
	 * (sched_lane_export), instants on the wall clock too. */
	uint8_t budgets;
	/* What its answers produced (cost.h). */
	uint8_t output_rule;
	uint8_t n_outputs;
	uint32_t outputs[COST_OUTPUTS];
};

/* How many budgets saved's mask names. */
unsigned sched_saved_budgets(const struct sched_lane_saved *s);

/* The lane as a saved value at now_ms, whose wall-clock time is wall_ms:
 * *out, and its budgets into budgets[0 .. the returned count) (room for
 * RLH_N_BUDGETS). O(1): reads nothing but the lane. */
unsigned sched_lane_export(const struct sched_lane *lane, int64_t now_ms, int64_t wall_ms,
                           struct sched_lane_saved *out, struct learned *budgets);

/* A lane restored by sched_lane_import shows as restored until its first
 * answer: how old what it took up was when it took it up (since its
 * last_active_ms then; whole seconds, at most 65,535 s). -1: not restored,
 * or answered since. */
int64_t sched_lane_restored_age_ms(const struct sched_lane *lane);

/* What is left of s at wall_ms, a pure function of both: a retry-after that
 * has ended is over, a quota probe that is due is due now, a day that has
 * ended is a new one, a budget whose reset has passed is full again
 * (learned_age: kept when it knew a rate, dropped when not). The concurrency
 * limit and the dispatch delay stay where they were (a lane idle for
 * reopen_after_s opens again by itself, from last_active_ms). False when
 * nothing is worth restoring: a lane idle for idle_ms or longer, which the
 * registry would have evicted by now. budgets: sched_saved_budgets(s) of
 * them; those dropped are removed from s's mask and from the array. */
bool sched_saved_age(struct sched_lane_saved *s, struct learned *budgets, int64_t wall_ms,
                     int64_t idle_ms);

/* Takes s (aged) up into a fresh lane of its identity (nothing dispatched,
 * nothing learned): its budgets, adaptive limits, hold, quota and day, its
 * output percentile. now_ms on the lane's clock is wall_ms on the wall
 * clock. False when the lane is not fresh (it took nothing). */
bool sched_lane_import(struct sched_lane *lane, const struct sched_lane_saved *s,
                       const struct learned *budgets, int64_t now_ms, int64_t wall_ms);

/* What the lane learned of budget b (enum rlh_budget) from rate-limit
 * headers, or NULL while no response reported it. */
const struct learned *sched_learned(const struct sched_lane *lane, int b);

/* ---- what a lane shows (/status, /metrics, the shared store) ---- */

/* A copy of what the operator sees of a lane at one instant. The strings
 * point into the lane and its configuration: valid until the lane is evicted
 * or the configuration freed (read the view at once). */
struct sched_lane_view {
	/* Identity. */
	const char *provider; /* the provider's name */
	const char
	    *key_id; /* the scope's name: a key's short id (keyid_name), "scope:NAME", "id:…" */
	const char *plan;       /* the plan's name */
	const char *model;      /* the model group; NULL: the scope's model-less lane */
	const char *scope_kind; /* "key", "configured" or "identity" */
	/* The output tokens a request that names no maximum is charged now: the
	 * p90 of what the lane's answers reported, or default_output_tokens
	 * before any (cost.h). */
	int64_t output_estimate;
	/* The plan's limits, as configured (/status "gates" and "day"). */
	double max_requests_per_second, max_requests_per_minute, max_requests_per_hour;
	double min_ms_per_request, max_tokens_per_minute;
	unsigned burst, max_concurrent;
	double max_requests_per_day, max_tokens_per_day;
	/* Queue, flight and limits now. */
	size_t queue_depth;     /* sched_queue_depth */
	int64_t oldest_wait_ms; /* sched_oldest_wait_ms */
	size_t retry_waiting;   /* retries waiting for their time */
	size_t in_flight;
	unsigned concurrency_limit; /* sched_concurrency_limit */
	/* What sets it: "aimd" (refusals) or "gradient" (latency as well), and
	 * what the latency controller reads (meaningful where gradient). */
	const char *concurrency_mode;
	bool gradient;
	struct gradient_view grad;
	int64_t dispatch_delay_ms; /* the dispatch-delay AIMD's delay */
	/* A silent lane's own search (issue 30): slow_start while its open
	 * limit doubles per round trip (concurrency_limit is that window);
	 * the rate probe's bound once refusals settled it (rate_probe.h; 0:
	 * searching, the dispatch delay's AIMD decides), the pace its curve
	 * sets now, its K, and the refusals that met the same limit since. */
	bool slow_start;
	double probe_bound_rps, probe_rate_rps;
	int64_t probe_k_ms;
	unsigned probe_calm;
	int64_t hold_ms;         /* until a retry-after hold ends; 0: none */
	int64_t queue_eta_ms;    /* sched_queue_eta_ms(lane, NULL, now) */
	int64_t idle_ms;         /* since the lane's last activity */
	const char *state;       /* sched_lane_state */
	int64_t restored_age_ms; /* sched_lane_restored_age_ms: -1 not restored */
	enum sched_gates_mode gates_mode;
	double strict_margin; /* what a strict gate keeps beyond T, learned (margin.h) */
	size_t n_levels;      /* priorities with requests waiting: sched_lane_level() */
	struct sched_lane_stats stats;
	/* What the headers taught, per budget (enum rlh_budget): learned[b] is
	 * meaningful only where has_learned[b] (sched_learned() is not NULL). */
	bool has_learned[RLH_N_BUDGETS];
	struct learned_view learned[RLH_N_BUDGETS];
	/* The daily budget: the rest is 0 unless day_limited. */
	bool day_limited;                /* sched_day_limited */
	double day_requests, day_tokens; /* spent this day */
	int64_t day_resets_in_ms;        /* 0: passed or not set yet */
};

/* Fills *v with what the lane shows at now_ms. O(budgets + priorities
 * waiting): fine per scrape for the lanes shown, not for every lane of a big
 * table (rank those with sched_lane_stats/sched_lane_last_active_ms). */
void sched_lane_view(const struct sched_lane *lane, int64_t now_ms, struct sched_lane_view *v);

/* One priority with requests waiting, i in [0, view.n_levels), highest
 * first: how many wait there, from how many agents, and the wait a request
 * of a new agent would see there (sched_priority_eta_ms). */
struct sched_level_view {
	int priority;
	size_t queued, agents;
	int64_t eta_ms;
};
void sched_lane_level(const struct sched_lane *lane, size_t i, int64_t now_ms,
                      struct sched_level_view *v);

/* Accessors, O(1): for code that reads one thing of many lanes (ranking
 * them for /metrics), that drives a lane (proxy/lanes.c), or that hands a
 * lane's limits to the shared store in the store's terms (proxy/limiter.c). */
const struct provider_conf *sched_lane_provider(const struct sched_lane *lane);
const struct plan_conf *sched_lane_plan(const struct sched_lane *lane);
const char *sched_lane_key_id(const struct sched_lane *lane);
/* The hash of the key that made the lane (its own plan applies; "": none). */
const char *sched_lane_key_hash(const struct sched_lane *lane);
/* The model group (NULL: none) and the scope (scope.h's id) of the lane. */
const char *sched_lane_model(const struct sched_lane *lane);
uint64_t sched_lane_scope(const struct sched_lane *lane);
const struct sched_lane_stats *sched_lane_stats(const struct sched_lane *lane);
int64_t sched_lane_last_active_ms(const struct sched_lane *lane);
/* The lane's local gates (request windows, token gates): their parameters. */
const struct gates *sched_lane_gates(const struct sched_lane *lane);
/* What the lane's strict gates keep beyond their interval after a send, a
 * fraction of it: learned (sched/margin.h), MARGIN_MIN before. */
double sched_lane_margin(const struct sched_lane *lane);
enum sched_gates_mode sched_lane_gates_mode(const struct sched_lane *lane);
/* Permits (SHARED: "go"s from the store) not yet used by a dispatch. */
unsigned sched_lane_permits(const struct sched_lane *lane);

#endif
