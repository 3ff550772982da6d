/* SPDX-License-Identifier: Apache-2.0 */
/* limiter — one call per event for the local and the shared gates, and the
 * seam between the scheduler and the store (limiter.h). */
#include "proxy/limiter.h"

#include <stddef.h>

#include "core/clock.h"
#include "sched/gcra.h"
#include "sched/learned.h"
#include "store/shared.h"

/* The store keeps what the scheduler may hold or ask, in its own arrays and
 * in the scheduler's order of windows. */
_Static_assert(SCHED_PERMITS_MAX <= SHARED_PERMITS_MAX, "the store keeps every permit");
_Static_assert(GATES_N_WINDOWS == SHARED_REQUEST_GATES, "one store gate per request window");

/* One gate in the store's terms; what a strict one keeps after a send is
 * the lane's learned margin (sched/margin.h). */
static struct shared_rate rate_of(const struct gcra *g, double margin)
{
	if (!gcra_enabled(g))
		return (struct shared_rate){0, 0, 0};
	return (struct shared_rate){g->t_ms, g->burst, gcra_strict_keep(g, margin)};
}

/* The lane's gates in the store's terms: the plan's request and token gates
 * (cheap: copies); with views, what each learned budget's pace, capacity and
 * remainder are at now_ms, else only which budgets are known. */
static void gates_of(const struct sched_lane *lane, bool views, int64_t now_ms,
                     struct shared_gates *out)
{
	const struct gates *s = sched_lane_gates(lane);
	double margin = sched_lane_margin(lane);
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		out->req[w] = rate_of(&s->req[w], margin);
	out->tokens = rate_of(&s->tokens, margin);
	out->input = rate_of(&s->input, margin);
	out->output = rate_of(&s->output, margin);
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct learned *l = sched_learned(lane, b);
		struct shared_budget *sb = &out->learned[b];
		*sb = (struct shared_budget){.known = l != NULL, .remaining = -1};
		if (l == NULL || !views)
			continue;
		struct learned_view v;
		learned_view(l, now_ms, &v);
		sb->t_ms = v.pace_per_min > 0 ? 60000.0 / v.pace_per_min : 0;
		sb->capacity = v.capacity;
		sb->remaining = v.remaining;
	}
}

bool limiter_pump(struct shared *sh, struct sched_lane *lane, struct shared_lane **slp, void *owner,
                  int64_t now_ms)
{
	if (sh == NULL)
		return true;
	if (*slp == NULL)
		*slp = shared_lane_new(sh, sched_lane_provider(lane)->name, sched_lane_key_id(lane),
		                       sched_lane_model(lane), owner);
	struct shared_lane *sl = *slp;
	if (sl == NULL)
		return true; /* local gates, as if down: better than nothing */
	enum shared_mode mode = shared_lane_mode(sh, sl);
	enum sched_gates_mode want =
	    mode == SHARED_FALLBACK ? SCHED_GATES_FALLBACK : SCHED_GATES_SHARED;
	if (sched_lane_gates_mode(lane) != want)
		sched_set_gates_mode(lane, want, 1.0 / shared_fallback_divisor(sh), now_ms);
	struct shared_gates g;
	gates_of(lane, false, now_ms, &g);
	shared_settle(sh, sl, sched_permits_unused(lane), sched_lane_permits(lane), &g);
	if (mode != SHARED_DECIDES)
		return mode == SHARED_FALLBACK;
	sched_permits_drop(lane, shared_stale(sh, sl));

	struct sched_costs head;
	unsigned n = sched_permits_wanted(lane, now_ms, &head);
	if (n == 0)
		return true;
	gates_of(lane, true, now_ms, &g);
	const struct shared_ask ask = {
	    .decisions = n,
	    .room = sched_permits_room(lane, now_ms),
	    .tokens = head.tokens,
	    .prompt = head.prompt,
	    .output = head.output,
	    .lease_cap = sched_lane_plan(lane)->max_concurrent_global,
	};
	sched_permits_asked(lane, shared_ask(sh, sl, &ask, &g, now_ms));
	return true;
}

void limiter_decided(struct sched_lane *lane, const struct shared_answer *a)
{
	enum sched_permit_answer pa = a->verdict == SHARED_GO     ? SCHED_PERMIT_GO
	                              : a->verdict == SHARED_WAIT ? SCHED_PERMIT_WAIT
	                                                          : SCHED_PERMIT_FAILED;
	for (unsigned i = 0; i < a->permits; i++)
		sched_permit_answer(lane, pa, a->until_ms);
	/* what the replicas learned of the path: the lane's margin */
	if (a->margin > 0)
		sched_margin_adopt(lane, a->margin, clock_now_ms());
}

struct sched_item *limiter_next(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                                double now_ms, struct shared_lease **lease,
                                struct shared_grant *grant)
{
	struct sched_item *it = sched_next(lane, now_ms);
	grant->valid = false;
	*lease = it != NULL ? shared_dispatched(sh, sl, grant) : NULL;
	return it;
}

void limiter_sent(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                  const struct sched_item *it, struct shared_grant *grant, double dispatched_ms,
                  double sent_ms)
{
	sched_sent(lane, it, sent_ms);
	if (sh == NULL || !grant->valid)
		return;
	/* The strict gates' keep as the lane has it now: the answer that
	 * granted this send may have carried a wider margin (another replica
	 * widened), which the push then spaces the next request by, whichever
	 * replica sends it, not one interval later (three replicas at 600 RPM:
	 * a widening to 6.25 % and a refusal 200 ms later, in about half the
	 * runs, spaced by a replica's push that kept the 2.5 % it had asked
	 * with). */
	struct shared_gates g;
	gates_of(lane, false, 0, &g);
	shared_sent(sh, sl, grant, dispatched_ms, sent_ms, &g);
}

bool limiter_observe(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                     const struct sched_item *it, const struct rlh_result *h, bool refused,
                     int64_t now_ms)
{
	bool changed = sched_observe(lane, it, h, refused, now_ms);
	if (sl != NULL && shared_up(sh)) {
		struct shared_gates g;
		gates_of(lane, true, clock_now_ms(), &g);
		shared_observed(sh, sl, g.learned);
	}
	return changed;
}

void limiter_hold(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                  int64_t hold_ms, int64_t fresh_ms)
{
	sched_hold(lane, fresh_ms + hold_ms);
	shared_hold(sh, sl, hold_ms);
}

bool limiter_complete(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                      struct sched_item *it, struct shared_lease **lease,
                      enum sched_outcome outcome, int64_t now_ms)
{
	bool quota_before = sched_quota_out(lane);
	double margin_before = sched_lane_margin(lane);
	if (*lease != NULL) {
		shared_release(sh, *lease);
		*lease = NULL;
	}
	sched_complete(lane, it, outcome, now_ms);
	/* the outcome widened or narrowed the lane's margin: the others learn it */
	if (sched_lane_margin(lane) != margin_before)
		shared_margin(sh, sl, margin_before, sched_lane_margin(lane));
	if (quota_before && !sched_quota_out(lane)) {
		shared_quota(sh, sl, false);
		return true;
	}
	return false;
}

bool limiter_recall(struct shared *sh, struct sched_lane *lane, struct sched_item *it,
                    struct shared_lease **lease, int64_t now_ms)
{
	if (!sched_recall(lane, it, now_ms))
		return false;
	if (*lease != NULL) {
		shared_release(sh, *lease);
		*lease = NULL;
	}
	return true;
}

bool limiter_quota_out(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                       int64_t now_ms)
{
	bool fresh = sched_quota_exhausted(lane, now_ms);
	if (fresh)
		shared_quota(sh, sl, true);
	return fresh;
}

void limiter_tokens_used(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                         struct sched_item *it, double total, double input, double output,
                         int64_t now_ms)
{
	double d_in = input >= 0 ? input - it->cost_prompt : 0;
	double d_out = output >= 0 ? output - it->cost_output : 0;
	if (sl != NULL && sched_lane_gates_mode(lane) == SCHED_GATES_SHARED && shared_up(sh)) {
		struct shared_gates g;
		gates_of(lane, false, now_ms, &g);
		shared_tokens_used(sh, sl, &g, total - it->cost_tokens, d_in, d_out);
	}
	sched_tokens_used(lane, it, total, input, output, now_ms);
}
