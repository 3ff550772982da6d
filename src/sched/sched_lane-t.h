/* SPDX-License-Identifier: Apache-2.0 */
/* sched_lane-t — the lane's type, private to the scheduler: sched.c, its
 * views (sched_view.c) and the lane table (registry.c) are the only code that
 * reads or writes a lane's fields. Everyone else, the lanes module that drives
 * lanes included, holds a struct sched_lane * as an opaque handle and goes
 * through sched.h: the functions, the accessors and sched_lane_view()
 * (HAProxy's types-apart-from-functions: include/haproxy/<x>-t.h beside
 * <x>.h); make lint refuses an include of it outside src/sched/. Unit tests
 * include it to build lanes on the stack, to set up a state, and to check
 * their size. */
#ifndef PACERD_SCHED_LANE_T_H
#define PACERD_SCHED_LANE_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/list.h"
#include "provider/ratelimit_headers.h"
#include "sched/aimd.h"
#include "sched/cost.h"
#include "sched/fairq.h"
#include "sched/gcra.h"
#include "sched/gradient.h"
#include "sched/lane_mode.h"
#include "sched/learned.h"
#include "sched/margin.h"
#include "sched/pheap.h"
#include "sched/rate_probe.h"
#include "sched/sched.h"
#include "sched/slow_start.h"

/* The idle lanes of a registry, least recently active first: a lane is on it
 * exactly while sched_lane_idle() holds, so evicting the coldest one, or every
 * one idle for longer than a TTL, never looks at a busy lane (nginx limit_req's
 * LRU queue). Owned by the registry; sched keeps it up to date. */
struct sched_idle_list {
	struct list lanes; /* of sched_lane.idle_link: coldest first, hottest last */
	size_t n;
};

/* Sets up an empty list (the registry calls it once). */
static inline void sched_idle_list_init(struct sched_idle_list *l)
{
	list_init(&l->lanes);
	l->n = 0;
}

/* The least recently active idle lane, or NULL. */
static inline struct sched_lane *sched_idle_coldest(const struct sched_idle_list *l);

struct sched_agents; /* agents with requests in flight or passed over (sched.c) */

/* What a lane that refusals alone teach keeps beyond AIMD's limit and delay
 * (issue 30): the slow start of its open limit, on a lane whose provider
 * sends no rate-limit headers, and its dispatch delay's rate probe, once a
 * refusal cut the delay. Allocated when first needed (sched.c, quiet_of). */
struct sched_quiet {
	struct slow_start start;
	struct rate_probe rate;
};

/* A lane. It takes a few hundred bytes; what only some lanes need is
 * allocated when first needed: the learned budgets when a response first
 * reports one, the agent table when agents.mode first serializes or rejects
 * an agent, the latency controller when its mode may engage it, the slow
 * start and rate probe of a lane without headers (quiet) when it first
 * opens or meets a refusal.
 * sched_lane_release() frees them. */
struct sched_lane {
	/* Identity (set by the registry). */
	const struct provider_conf *provider;
	const struct plan_conf *plan;
	/* A lane is (provider, limit scope, model group): DESIGN §2. */
	uint64_t scope;    /* scope_id(): the key, a configured scope, an identity */
	const char *model; /* the model group, interned (registry); NULL: none */
	char key_id[24];   /* the scope's name: "3f9a1c0b7d2e", "scope:NAME", "id:…" */
	char key_hash[65]; /* the key that made the lane: its own plan applies */
	bool fine_resets;  /* the dialect reports resets to the ms (OpenAI) */
	bool idle_linked;  /* on idle_list */
	/* Taken up from what a previous process saved (sched_lane_import), and
	 * no answer since: shown so until the first answer (restored_age_s). */
	bool restored;
	/* What the lane is doing: its mode (learning, open, probing) and what it
	 * refuses (quota, day), changed only through lane_state_next (set_state
	 * in sched.c; lane_mode.c draws the diagrams). */
	struct lane_state st;
	/* A property of its provider, not a state of the lane: its answers carry
	 * no rate-limit headers, so LEARNING waits for nothing (set by the lanes
	 * from what the provider's other lanes saw). */
	bool provider_silent;
	/* Its provider answered successes with event streams (the lanes say):
	 * the latency controller, which reads streams, may engage (auto). */
	bool provider_streams;
	/* restored: how old what it took up was then (seconds, at most
	 * UINT16_MAX; here and restored in bytes that were padding, so that a
	 * lane stays within 960 bytes). */
	uint16_t restored_age_s;
	enum agents_mode agents_mode;
	/* Requests whose capacity answer's headers hold the lane until it is
	 * decided (it->holding): a count of requests, like in_flight, since the
	 * hold lasts until the last of them is decided. */
	unsigned holding;

	/* Queue. SCHED_QUEUED items are in the ready heap in dispatch order,
	 * or parked on their busy agent's heap (serialize); new ones are also
	 * in fairq, which orders and counts them (fq.n: the queue's depth). */
	struct pheap ready;
	struct fairq fq;
	size_t n_due;         /* due retries queued (ready or parked) */
	struct pheap waiting; /* retries waiting for their time, by (ready_ms, seq) */
	size_t n_parked;
	uint64_t seq; /* numbers items as they enter a heap */

	size_t in_flight;
	struct sched_agents *agents; /* NULL until agents.mode needs it */

	/* Gates. */
	struct gates gates; /* request-rate windows and the token gate */
	/* The RLH_N_BUDGETS budgets the headers report, each allocated when a
	 * response first reports it; until then a shared, read-only one that
	 * has observed nothing (n_obs 0), in a shared table until the lane
	 * learns its first. Prefer sched_learned(). */
	struct learned **learned;
	double charged[RLH_N_BUDGETS]; /* units dispatched per budget: learned's marks */
	struct aimd conc;              /* adaptive concurrency: refusals */
	/* adaptive concurrency from latency (gradient_engaged): allocated when
	 * the plan's concurrency.mode may engage it (gradient; auto once the
	 * provider is known silent), NULL until then */
	struct gradient *grad;
	struct aimd_delay delay;   /* dispatch-delay AIMD */
	struct sched_quiet *quiet; /* NULL until a silent lane's slow start or a first cut */
	/* What strict gates keep beyond T, learned (margin.h): allocated at
	 * the first outcome of a request sent at a strict gate's spacing (or
	 * a margin the store holds); NULL: MARGIN_MIN. */
	struct margin *margin;
	int64_t last_dispatch_ms;
	/* Holds: time windows over the lane's mode, shown "held" while they run.
	 * A retry-after holds it until hold_until_ms (and puts it in PROBING:
	 * one request goes first once it ends, the probe); a capacity answer
	 * holds it from its headers until its body is decided (holding), or
	 * until pending_until_ms at the latest. */
	int64_t hold_until_ms;    /* server said wait (retry-after on a capacity error) */
	int64_t pending_until_ms; /* the longest a pending hold lasts */
	/* Quota (LANE_QUOTA): a final answer said the account cannot be served.
	 * New requests are refused (SCHED_QUOTA) but one every
	 * plan->quota_probe_s, which goes upstream; a success sent after
	 * quota_seq ends it. A number, not a mode: several requests may be in
	 * flight across a quota answer, one probe per interval, and only those
	 * sent after the last one can say the quota is back. */
	int64_t quota_probe_at_ms;
	uint64_t quota_seq;
	/* The plan's daily budget (max_requests_per_day, max_tokens_per_day):
	 * what this day spent, and when it starts over (set by the caller,
	 * sched_day_reset; 0: not yet). LANE_DAY_OUT once the next request does
	 * not fit: until the reset, the lane refuses and drains. */
	struct {
		double requests, tokens;
		int64_t resets_at_ms;
	} day;
	/* The shared store. While SHARED, a request leaves only with a permit
	 * (a "go" the store gave): the lanes ask for as many as could leave
	 * now (sched_permits_wanted), several in flight at once; a "not before"
	 * holds the lane until shared_until_ms. The local gates stay charged by
	 * this replica's own dispatches: at the full limit they never hold back
	 * what the shared gates allow, and they say how many to ask for. */
	enum sched_gates_mode gates_mode;
	/* (the queue's, here beside gates_mode where it fills what was padding)
	 * items parked in an older epoch are not (unpark_all) */
	uint32_t park_epoch;
	double gates_scale; /* the share of the plan the local gates apply (0: all) */
	unsigned permits, asking;
	int64_t shared_until_ms;
	/* Dispatches are numbered; a capacity error counts only from a request
	 * sent after the lane last reacted (its number above signal_seq). */
	uint64_t dispatch_seq, signal_seq;

	struct sched_lane_stats stats;
	struct cost_lane cost;   /* what its requests are charged (cost.h) */
	uint64_t cost_count_seq; /* dispatch_seq when the last output budget count came */
	int64_t last_active_ms;  /* for idle eviction */
	void *shell;             /* the event-loop side's state (its timer) */
	struct sched_idle_list *idle_list;
	struct list idle_link; /* on idle_list while idle_linked */
};

static inline struct sched_lane *sched_idle_coldest(const struct sched_idle_list *l)
{
	struct list *first = list_first(&l->lanes);
	return first != NULL ? LIST_ITEM(first, struct sched_lane, idle_link) : NULL;
}

#endif
