/* SPDX-License-Identifier: Apache-2.0 */
/* shared — a lane's gates decided in the shared store (store.kind: redis), for
 * several pacerd replicas that pace one API key together (DESIGN §8: the
 * store plugs in beside the local gates).
 *
 * What is shared, all kept by store_script.h's scripts on the server's clock:
 *  - every rate gate of the plan (requests per second/minute/hour, spacing,
 *    tokens, input and output tokens): a dispatch needs a "go" from the store,
 *    one decision per request, several in flight at once (sched's permits);
 *  - what a replica learned from the provider's headers: each learned budget
 *    with a known pace is a bucket in the store (capacity, refill at the pace),
 *    charged by every replica's dispatches and pulled down by every replica's
 *    observations of what remains, so one replica's evidence slows all;
 *  - a capacity hold (retry-after): no replica sends before it ends;
 *  - the quota state: one replica's insufficient_quota stops the others, one
 *    replica's successful probe restarts them;
 *  - the strict gates' margin the replicas learn from refusals (widened by
 *    any replica's, narrowed by time without: sched/margin.h), read back
 *    with every decision;
 *  - max_concurrent_global: leases in a sorted set, renewed while in flight,
 *    expiring by themselves when a replica dies, handed out first come, first
 *    served across replicas (a decision waiting for one keeps its place in
 *    the store's lease queue while it asks again).
 * Concurrency (AIMD) and the probe after a hold stay per replica.
 *
 * While the store is down, on_error says what lanes do: `local` paces each
 * lane here at its plan's limits / the replicas alive at the last heartbeats
 * (every replica beats once a second into the store: store/fleet.h; logged
 * once: store_unavailable with the divisor, then store_restored); `fail`
 * answers 503 store_unavailable to what waits. Nothing accepted is lost
 * either way.
 *
 * The seam. The store never sees a lane: it keeps its own side of one (struct
 * shared_lane: keys, decisions, leases), made by the lanes' owner
 * (proxy/lanes.c, the only caller of both the scheduler and the store), which
 * hands it, with each call, what the scheduler said in the store's terms (the
 * gates as rates, the permits wanted, what was learned) and hands what Redis
 * answered to the scheduler: a decision comes back as one event
 * (shared_hooks.decided: so many permits go, or wait until, or failed; the
 * shared quota's state). Nothing here includes sched/ (make lint). */
#ifndef PACERD_SHARED_H
#define PACERD_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider/ratelimit_headers.h"
/* shared_stats() hands its callers the store's counters to read. */
#include "store/store.h"

struct event_base; /* event2/event.h */
struct config;     /* core/config.h */

struct shared;
struct shared_lane;  /* a lane's keys, decisions and leases, kept by the lane's shell */
struct shared_lease; /* one max_concurrent_global lease held by a request in flight */

/* Permits a lane holds or has asked for at once, at most (the scheduler's
 * SCHED_PERMITS_MAX, which the lanes check is no larger). */
#define SHARED_PERMITS_MAX 64
/* Request gates of a lane: min_ms_per_request, per second, minute, hour (the
 * scheduler's windows, in its order). */
#define SHARED_REQUEST_GATES 4

/* What a decision came back with (shared_hooks.decided). */
enum shared_verdict {
	SHARED_GO,     /* `permits` requests may go */
	SHARED_WAIT,   /* none: ask again at until_ms */
	SHARED_FAILED, /* no answer (an error, a timeout, the store went down) */
};
struct shared_answer {
	enum shared_verdict verdict;
	unsigned permits; /* the permits the decision asked for, each answered so */
	int64_t until_ms; /* SHARED_WAIT: the monotonic clock's ms */
	bool quota;       /* GO, WAIT: the shared quota is out (FAILED: unknown) */
	/* GO, WAIT: the lane's strict margin as the store holds it (a fraction
	 * of the interval, sched/margin.h); 0: none, or read before this
	 * replica's own last change of it reached the store */
	double margin;
};

/* What shared tells the lanes' owner (proxy/lanes.c). */
struct shared_hooks {
	/* A decision of the lane made with `owner` (shared_lane_new) came back:
	 * the owner tells its scheduler, and runs the lane. */
	void (*decided)(void *owner, const struct shared_answer *a);
	void (*store_changed)(void *arg, bool up); /* every lane must look again */
	void *arg;
};

/* NULL with err[0] == '\0' for store.kind: local; NULL with err set when the
 * store refuses scripts (pacerd must not start). */
struct shared *shared_new(struct event_base *base, const struct config *cfg,
                          const struct shared_hooks *hooks, char *err, size_t errlen);
void shared_free(struct shared *sh);
bool shared_up(const struct shared *sh);

/* The store's side of one lane, named by its provider, its scope's name and
 * its model group (NULL: none) as every replica names them; owner comes back
 * with its decisions. NULL when out of memory or when its keys do not fit
 * (the lane is then paced here alone). */
struct shared_lane *shared_lane_new(struct shared *sh, const char *provider, const char *key_id,
                                    const char *model, void *owner);
/* The lane is gone (evicted): its leases too. */
void shared_lane_free(struct shared *sh, struct shared_lane *sl);

/* Where a lane's gates are decided now, by the store's state. */
enum shared_mode {
	SHARED_DECIDES,  /* up: a request goes with a "go" from the store */
	SHARED_FALLBACK, /* down, on_error local: here, at the plan's limits / the fleet */
	SHARED_REFUSES,  /* down, on_error fail: what waits is answered 503 */
};
/* The mode for sl now (a lane's fall-back is counted once, in stats). */
enum shared_mode shared_lane_mode(struct shared *sh, struct shared_lane *sl);

/* One rate gate as the store applies it: t_ms per unit (<= 0: off), burst
 * in units; keep: what the gate keeps beyond t_ms after a strict send, in
 * units (gcra_strict_keep; request gates only). */
struct shared_rate {
	double t_ms, burst, keep;
};
/* One learned budget: known once a response reported it; t_ms per unit at
 * the learned pace (0: no pace learned here: the store applies another
 * replica's), its capacity and what remains now (< 0: unknown). */
struct shared_budget {
	bool known;
	double t_ms, capacity, remaining;
};
/* A lane's gates, as the store applies them: the plan's at their full
 * limits (the store holds every replica's charges), and the learned ones. */
struct shared_gates {
	struct shared_rate req[SHARED_REQUEST_GATES];
	struct shared_rate tokens, input, output;
	struct shared_budget learned[RLH_N_BUDGETS];
};

/* The lane took back `unused` permits no request waits for any more, and
 * holds `held` still: their charges (at the request gates in g) and their
 * leases go back. */
void shared_settle(struct shared *sh, struct shared_lane *sl, unsigned unused, unsigned held,
                   const struct shared_gates *g);

/* What a lane asks of the store now. */
struct shared_ask {
	unsigned decisions;            /* single decisions wanted (counting none in flight) */
	unsigned room;                 /* requests that could leave now: what a batch may fill */
	double tokens, prompt, output; /* the costs of the request that would go first */
	unsigned lease_cap;            /* max_concurrent_global; 0: no leases */
};
/* Sends the decisions a asks for, for the gates in g (their learned budgets
 * filled). Returns the permits asked: each comes back in one
 * shared_hooks.decided. */
unsigned shared_ask(struct shared *sh, struct shared_lane *sl, const struct shared_ask *a,
                    const struct shared_gates *g, int64_t now_ms);

/* The store's "go" a dispatched request used, kept until its send
 * (shared_sent): when it was asked, how long after its instant in Redis it
 * said to go, and the margin it was charged with. */
struct shared_grant {
	double asked_ms, wait_ms, margin_ms; /* ms of the monotonic clock, with their fraction */
	bool valid;                          /* false: none (local gates, or already sent) */
};

/* The "go"s of a lane with a gate without slack whose instant passed by
 * more than half its interval, while the lane held them (a hold, a dispatch
 * delay): dropped, their leases given back; how many, for the scheduler to
 * drop as many permits (sched_permits_drop). Sent that late, a request would
 * leave close behind those other replicas were given since, whose spacing
 * its push comes too late to keep; a dropped "go" costs one interval. */
unsigned shared_stale(struct shared *sh, struct shared_lane *sl);

/* Whether a "go" late_ms past its instant, on a strict gate of interval_ms,
 * is stale: later than half the interval, and later than SHARED_STALE_MIN_MS
 * whatever the interval. The floor is what any "go" spends in the store's
 * round trip and the loop's turn: without it a fast gate (1 ms, 1 us) found
 * every "go" stale on arrival and its lane asked again forever, answering
 * nothing (make bench's pacerd+store path, 1,000,000 req/s). The "go"s this
 * guards against were held for a refusal's hold, seconds, not milliseconds. */
#define SHARED_STALE_MIN_MS 10.0
bool shared_permit_stale(double late_ms, double interval_ms);

/* A request the lane just dispatched under a permit: its lease, when the
 * plan has max_concurrent_global (else NULL), renewed until shared_release;
 * its "go" in *grant. */
struct shared_lease *shared_dispatched(struct shared *sh, struct shared_lane *sl,
                                       struct shared_grant *grant);
/* Its attempt ended: the lease goes back at once (NULL: none). */
void shared_release(struct shared *sh, struct shared_lease *lease);

/* A request dispatched under a permit at dispatched_ms is written to the
 * provider at sent_ms (the monotonic clock, fractional ms): the last step
 * of the margin learns it, and a send later than its "go" promised pushes
 * the lane's gates without slack (sh NULL: nothing), by what `now` (the
 * lane's gates at the send) says each keeps. Clears
 * grant->valid: a second write of the same attempt pushes nothing more. */
void shared_sent(struct shared *sh, struct shared_lane *sl, struct shared_grant *grant,
                 double dispatched_ms, double sent_ms, const struct shared_gates *now);
/* The margin this replica's decisions carry: a bound on the time from a
 * decision's instant in Redis to its request on the wire, the sum of the
 * bounds (delay_bound.h) of its three steps: the decision's round trip, its
 * answer to the dispatch, the dispatch to the write. A gate without slack
 * keeps it after each send, so that whichever replica decides next sends at
 * least T after this one's request left. */
double shared_margin_ms(struct shared *sh, int64_t now_ms);

/* The lane learned from headers: every learned budget with a known pace is
 * shared (learned: each budget's pace, capacity and what remains). */
void shared_observed(struct shared *sh, struct shared_lane *sl,
                     const struct shared_budget learned[RLH_N_BUDGETS]);
/* This replica's lane changed its strict margin from `from` to `to`
 * (sched/margin.h): the store keeps the widest of the replicas' widenings,
 * and a narrowing no replica's widening overtook. Decisions asked before it
 * carry no margin back (shared_answer.margin 0). */
void shared_margin(struct shared *sh, struct shared_lane *sl, double from, double to);
/* A retry-after on a capacity answer: every replica holds for hold_ms. */
void shared_hold(struct shared *sh, struct shared_lane *sl, int64_t hold_ms);
/* This replica found the quota out (true) or back (false). */
void shared_quota(struct shared *sh, struct shared_lane *sl, bool out);
/* The token gates' correction: actual usage minus the estimate charged, for
 * the token gates of g and the learned token budgets it knows. */
void shared_tokens_used(struct shared *sh, struct shared_lane *sl, const struct shared_gates *g,
                        double d_tokens, double d_input, double d_output);

/* On error `fail` with the store down: refuse (503) new requests now. */
bool shared_refusing(const struct shared *sh);
int64_t shared_retry_in_ms(const struct shared *sh);
struct store_stats *shared_stats(struct shared *sh);
const char *shared_on_error(const struct shared *sh);
/* What a lane's limits are divided by while the store is down (on_error:
 * local): the replicas alive at the last heartbeats this replica heard, or
 * store.redis.replicas before any (store/fleet.h). */
unsigned shared_fallback_divisor(const struct shared *sh);

#endif
