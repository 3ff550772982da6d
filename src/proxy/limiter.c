/* limiter — one call per event for the local and the shared gates (limiter.h). */
#include "proxy/limiter.h"

#include <stddef.h>

#include "store/shared.h"

bool limiter_pump(struct shared *sh, struct sched_lane *lane, struct shared_lane **sl,
                  int64_t now_ms)
{
	return shared_pump(sh, lane, sl, now_ms);
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
	shared_sent(sh, sl, grant, dispatched_ms, sent_ms);
}

bool limiter_observe(struct shared *sh, struct sched_lane *lane, const struct sched_item *it,
                     const struct rlh_result *h, int64_t now_ms)
{
	bool changed = sched_observe(lane, it, h, now_ms);
	shared_observed(sh, lane);
	return changed;
}

void limiter_hold(struct shared *sh, struct sched_lane *lane, int64_t hold_ms, int64_t fresh_ms)
{
	sched_hold(lane, fresh_ms + hold_ms);
	shared_hold(sh, lane, hold_ms);
}

bool limiter_complete(struct shared *sh, struct sched_lane *lane, struct sched_item *it,
                      struct shared_lease **lease, enum sched_outcome outcome, int64_t now_ms)
{
	bool quota_before = sched_quota_out(lane);
	if (*lease != NULL) {
		shared_release(sh, *lease);
		*lease = NULL;
	}
	sched_complete(lane, it, outcome, now_ms);
	if (quota_before && !sched_quota_out(lane)) {
		shared_quota(sh, lane, false);
		return true;
	}
	return false;
}

bool limiter_quota_out(struct shared *sh, struct sched_lane *lane, int64_t now_ms)
{
	bool fresh = sched_quota_exhausted(lane, now_ms);
	if (fresh)
		shared_quota(sh, lane, true);
	return fresh;
}

void limiter_tokens_used(struct shared *sh, struct sched_lane *lane, struct sched_item *it,
                         double total, double input, double output, int64_t now_ms)
{
	double d_in = input >= 0 ? input - it->cost_prompt : 0;
	double d_out = output >= 0 ? output - it->cost_output : 0;
	shared_tokens_used(sh, lane, total - it->cost_tokens, d_in, d_out);
	sched_tokens_used(lane, it, total, input, output, now_ms);
}
