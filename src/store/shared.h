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
 *  - max_concurrent_global: leases in a sorted set, renewed while in flight,
 *    expiring by themselves when a replica dies, handed out first come, first
 *    served across replicas (a decision waiting for one keeps its place in
 *    the store's lease queue while it asks again).
 * Concurrency (AIMD) and the probe after a hold stay per replica.
 *
 * While the store is down, on_error says what lanes do: `local` paces each
 * lane here at its plan's limits / replicas (logged once: store_unavailable,
 * then store_restored); `fail` answers 503 store_unavailable to what waits.
 * Nothing accepted is lost either way. */
#ifndef PACERD_SHARED_H
#define PACERD_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* shared_stats() hands its callers the store's counters to read. */
#include "store/store.h"

struct event_base; /* event2/event.h */
struct config;     /* core/config.h */
struct sched_lane; /* sched/sched.h */

struct shared;
struct shared_lane;  /* a lane's decisions and leases, kept by the lane's shell */
struct shared_lease; /* one max_concurrent_global lease held by a request in flight */

/* What shared needs from the lanes' owner (proxy/lanes.c). */
struct shared_hooks {
	void (*kick)(struct sched_lane *lane);       /* a decision came back: run the lane */
	void (*quota_out)(struct sched_lane *lane);  /* another replica found the quota out */
	void (*quota_back)(struct sched_lane *lane); /* ... and back */
	void (*store_changed)(void *arg, bool up);   /* every lane must look again */
	void *arg;
};

/* NULL with err[0] == '\0' for store.kind: local; NULL with err set when the
 * store refuses scripts (pacerd must not start). */
struct shared *shared_new(struct event_base *base, const struct config *cfg,
                          const struct shared_hooks *hooks, char *err, size_t errlen);
void shared_free(struct shared *sh);

/* Before the lane's dispatch loop: applies the store's state to the lane
 * (SHARED while up; FALLBACK or refusal while down), gives back permits no
 * request needs, and asks the store for the decisions the lane wants now.
 * Returns false when the lane must refuse what waits (on_error: fail, store
 * down): the caller answers 503 store_unavailable. */
bool shared_pump(struct shared *sh, struct sched_lane *lane, struct shared_lane **sl,
                 int64_t now_ms);

/* The store's "go" a dispatched request used, kept until its send
 * (shared_sent): when it was asked, how long after its instant in Redis it
 * said to go, and the margin it was charged with. */
struct shared_grant {
	double asked_ms, wait_ms, margin_ms; /* ms of the monotonic clock, with their fraction */
	bool valid;                          /* false: none (local gates, or already sent) */
};

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
 * the lane's gates without slack (sh NULL: nothing). Clears grant->valid:
 * a second write of the same attempt pushes nothing more. */
void shared_sent(struct shared *sh, struct shared_lane *sl, struct shared_grant *grant,
                 double dispatched_ms, double sent_ms);
/* The margin this replica's decisions carry: a bound on the time from a
 * decision's instant in Redis to its request on the wire, the sum of the
 * bounds (delay_bound.h) of its three steps: the decision's round trip, its
 * answer to the dispatch, the dispatch to the write. A gate without slack
 * keeps it after each send, so that whichever replica decides next sends at
 * least T after this one's request left. */
double shared_margin_ms(struct shared *sh, int64_t now_ms);

/* The lane learned from headers (sched_observe): every learned budget with a
 * known pace is shared. */
void shared_observed(struct shared *sh, struct sched_lane *lane);
/* A retry-after on a capacity answer: every replica holds for hold_ms. */
void shared_hold(struct shared *sh, struct sched_lane *lane, int64_t hold_ms);
/* This replica found the quota out (true) or back (false). */
void shared_quota(struct shared *sh, struct sched_lane *lane, bool out);
/* The token gates' correction: actual usage minus the estimate charged. */
void shared_tokens_used(struct shared *sh, struct sched_lane *lane, double d_tokens, double d_input,
                        double d_output);

/* The lane is gone (evicted): its leases too. */
void shared_lane_free(struct shared *sh, struct shared_lane *sl);

/* On error `fail` with the store down: refuse (503) new requests now. */
bool shared_refusing(const struct shared *sh);
int64_t shared_retry_in_ms(const struct shared *sh);
struct store_stats *shared_stats(struct shared *sh);
const char *shared_on_error(const struct shared *sh);
unsigned shared_replicas(const struct shared *sh);

#endif
