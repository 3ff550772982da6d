/* SPDX-License-Identifier: Apache-2.0 */
/* sched_view — what a lane shows to those who may not read it: the view and
 * the accessors of sched.h. Apart from sched.c because they only read the
 * lane: none of sched's decisions lives here. */
#include "sched/sched.h"

#include <string.h>

#include "sched/aimd.h"
#include "sched/gradient.h"
#include "sched/rate_probe.h"
#include "sched/sched_lane-t.h"
#include "sched/scope.h"

size_t sched_queue_depth(const struct sched_lane *lane)
{
	return lane->fq.n;
}

void sched_lane_view(const struct sched_lane *lane, int64_t now_ms, struct sched_lane_view *v)
{
	const struct plan_conf *p = lane->plan;
	memset(v, 0, sizeof(*v));
	v->provider = lane->provider->name;
	v->key_id = lane->key_id;
	v->plan = p->name;
	v->model = lane->model;
	static const char *const kinds[] = {
	    [SCOPE_KEY] = "key", [SCOPE_NAMED] = "configured", [SCOPE_IDENTITY] = "identity"};
	enum scope_kind kind = scope_kind_of(lane->scope);
	v->scope_kind = (unsigned)kind < 3 ? kinds[kind] : "key";
	int64_t p90 = cost_output_percentile(&lane->cost);
	v->output_estimate = p90 >= 0 ? p90 : (int64_t)p->default_output_tokens;
	v->max_requests_per_second = p->max_requests_per_second;
	v->max_requests_per_minute = p->max_requests_per_minute;
	v->max_requests_per_hour = p->max_requests_per_hour;
	v->min_ms_per_request = p->min_ms_per_request;
	v->max_tokens_per_minute = p->max_tokens_per_minute;
	v->burst = p->burst;
	v->max_concurrent = p->max_concurrent;
	v->max_requests_per_day = p->max_requests_per_day;
	v->max_tokens_per_day = p->max_tokens_per_day;

	v->queue_depth = sched_queue_depth(lane);
	v->oldest_wait_ms = sched_oldest_wait_ms(lane, now_ms);
	v->retry_waiting = lane->waiting.n;
	v->in_flight = lane->in_flight;
	v->concurrency_limit = sched_concurrency_limit(lane);
	v->gradient = sched_timing_wanted(lane);
	v->concurrency_mode = v->gradient ? "gradient" : "aimd";
	if (v->gradient)
		gradient_view(lane->grad, now_ms, &v->grad);
	v->dispatch_delay_ms = aimd_delay_ms(&lane->delay);
	v->slow_start = lane->conc.open && lane->conc.starting;
	if (lane->quiet != NULL && lane->quiet->rate.bound > 0) {
		const struct rate_probe *rp = &lane->quiet->rate;
		v->probe_bound_rps = rp->bound;
		v->probe_rate_rps = rate_probe_rate(rp, now_ms);
		v->probe_k_ms = rate_probe_k_ms(rp);
		v->probe_calm = rp->calm;
	}
	v->hold_ms = lane->hold_until_ms > now_ms ? lane->hold_until_ms - now_ms : 0;
	v->queue_eta_ms = sched_queue_eta_ms(lane, NULL, now_ms);
	v->idle_ms = now_ms - lane->last_active_ms;
	v->state = sched_lane_state(lane, now_ms);
	v->restored_age_ms = sched_lane_restored_age_ms(lane);
	v->gates_mode = lane->gates_mode;
	v->strict_margin = sched_lane_margin(lane);
	v->n_levels = lane->fq.n_levels;
	v->stats = lane->stats;

	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct learned *l = sched_learned(lane, b);
		v->has_learned[b] = l != NULL;
		if (l != NULL)
			learned_view(l, now_ms, &v->learned[b]);
	}

	v->day_limited = sched_day_limited(lane);
	if (v->day_limited) {
		v->day_requests = lane->day.requests;
		v->day_tokens = lane->day.tokens;
		v->day_resets_in_ms =
		    lane->day.resets_at_ms > now_ms ? lane->day.resets_at_ms - now_ms : 0;
	}
}

void sched_lane_level(const struct sched_lane *lane, size_t i, int64_t now_ms,
                      struct sched_level_view *v)
{
	struct fairq_level_view fl;
	fairq_level_at(&lane->fq, i, &fl);
	v->priority = fl.priority;
	v->queued = fl.waiting;
	v->agents = fl.flows;
	v->eta_ms = sched_priority_eta_ms(lane, fl.priority, now_ms);
}

const struct provider_conf *sched_lane_provider(const struct sched_lane *lane)
{
	return lane->provider;
}

const struct plan_conf *sched_lane_plan(const struct sched_lane *lane)
{
	return lane->plan;
}

const char *sched_lane_key_id(const struct sched_lane *lane)
{
	return lane->key_id;
}

const char *sched_lane_key_hash(const struct sched_lane *lane)
{
	return lane->key_hash;
}

const char *sched_lane_model(const struct sched_lane *lane)
{
	return lane->model;
}

uint64_t sched_lane_scope(const struct sched_lane *lane)
{
	return lane->scope;
}

const struct sched_lane_stats *sched_lane_stats(const struct sched_lane *lane)
{
	return &lane->stats;
}

int64_t sched_lane_last_active_ms(const struct sched_lane *lane)
{
	return lane->last_active_ms;
}

const struct gates *sched_lane_gates(const struct sched_lane *lane)
{
	return &lane->gates;
}

double sched_lane_margin(const struct sched_lane *lane)
{
	return lane->margin != NULL ? lane->margin->frac : MARGIN_MIN;
}

enum sched_gates_mode sched_lane_gates_mode(const struct sched_lane *lane)
{
	return lane->gates_mode;
}

unsigned sched_lane_permits(const struct sched_lane *lane)
{
	return lane->permits;
}

void *sched_lane_shell(const struct sched_lane *lane)
{
	return lane->shell;
}

size_t sched_in_flight(const struct sched_lane *lane)
{
	return lane->in_flight;
}

int64_t sched_dispatch_delay_ms(const struct sched_lane *lane)
{
	return aimd_delay_ms(&lane->delay);
}

int64_t sched_day_resets_at_ms(const struct sched_lane *lane)
{
	return lane->day.resets_at_ms;
}
