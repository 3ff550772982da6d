/* SPDX-License-Identifier: Apache-2.0 */
/* aimd — adaptive concurrency and dispatch delay; see aimd.h for the model. */
#include "sched/aimd.h"

#include <math.h>

#include "core/config.h"

static double clampd(double v, double lo, double hi)
{
	return v < lo ? lo : (v > hi ? hi : v);
}

static void set_bounds(struct aimd *a, unsigned min, unsigned max, double decrease_factor)
{
	a->min = min >= 1 ? min : 1;
	a->max = max >= a->min ? max : a->min;
	a->decrease_factor =
	    (isfinite(decrease_factor) && decrease_factor > 0 && decrease_factor < 1)
	        ? decrease_factor
	        : 0.5;
}

void aimd_init(struct aimd *a, bool adaptive, unsigned min, unsigned max, double decrease_factor)
{
	set_bounds(a, min, max, decrease_factor);
	a->adaptive = adaptive;
	a->open = adaptive;
	a->starting = false;
	a->limit = a->max;
	a->rtt_ms = AIMD_RTT_INITIAL_MS;
	a->last_decrease_ms = 0;
	a->decreased = false;
}

void aimd_init_plan(struct aimd *a, const struct plan_conf *plan)
{
	aimd_init(a, plan->concurrency.adaptive, plan->concurrency.min, plan->max_concurrent,
	          plan->concurrency.decrease_factor);
}

void aimd_observe_rtt(struct aimd *a, double latency_ms)
{
	if (!isfinite(latency_ms) || latency_ms <= 0)
		return;
	/* Clamped before it enters the average: one request that sat an hour behind
	 * a retry-after must not stretch the lockout to an hour. */
	double s = clampd(latency_ms, AIMD_RTT_MIN_MS, AIMD_RTT_MAX_MS);
	a->rtt_ms = (1 - AIMD_RTT_ALPHA) * a->rtt_ms + AIMD_RTT_ALPHA * s;
}

void aimd_on_success(struct aimd *a, int64_t now_ms, double latency_ms, bool saturated)
{
	(void)now_ms; /* growth is per success, never per time: see aimd.h */
	aimd_observe_rtt(a, latency_ms);
	if (!a->adaptive || a->open || !saturated)
		return;
	/* 1 / (the integer limit in force), so that a round of exactly that many
	 * successes adds exactly 1, as DESIGN §3 states. */
	a->limit = fmin(a->limit + 1.0 / aimd_limit(a), (double)a->max);
}

bool aimd_on_capacity_signal(struct aimd *a, int64_t now_ms, size_t in_flight)
{
	if (!a->adaptive)
		return false;
	if (a->open) {
		/* What was in flight is what the upstream refused to carry: the
		 * first cut starts from there, not from the ceiling nobody used
		 * (nor from a slow start's window: a refusal ends it). */
		a->open = false;
		a->starting = false;
		a->limit = fmin((double)in_flight, (double)a->max);
	} else if (a->decreased && (double)(now_ms - a->last_decrease_ms) < a->rtt_ms) {
		return false;
	}
	a->limit = fmax(a->limit * a->decrease_factor, (double)a->min);
	a->last_decrease_ms = now_ms;
	a->decreased = true;
	return true;
}

void aimd_reopen(struct aimd *a)
{
	if (!a->adaptive)
		return;
	a->open = true;
	a->starting = false;
	a->limit = a->max;
	a->decreased = false;
}

void aimd_start(struct aimd *a, unsigned window)
{
	if (!a->adaptive || !a->open)
		return;
	a->limit = clampd(window, a->min, a->max);
	a->starting = a->limit < a->max;
}

bool aimd_start_grow(struct aimd *a, unsigned window)
{
	if (!a->open || !a->starting || window <= a->limit)
		return false;
	a->limit = fmin(window, a->max);
	a->starting = a->limit < a->max;
	return true;
}

void aimd_start_stop(struct aimd *a)
{
	if (!a->open)
		return;
	a->starting = false;
	a->limit = a->max;
}

unsigned aimd_limit(const struct aimd *a)
{
	if (a->open && !a->starting)
		return a->max;
	/* The small epsilon keeps 4.9999999 (sums of 1/limit) from reading as 4. */
	double l = clampd(floor(a->limit + 1e-9), a->min, a->max);
	return (unsigned)l;
}

void aimd_reconfigure(struct aimd *a, const struct plan_conf *plan)
{
	bool was_adaptive = a->adaptive;
	set_bounds(a, plan->concurrency.min, plan->max_concurrent,
	           plan->concurrency.decrease_factor);
	a->adaptive = plan->concurrency.adaptive;
	if (!a->adaptive) {
		a->open = false;
		a->starting = false;
		a->limit = a->max;
	} else if (was_adaptive && a->starting) {
		aimd_start(a, (unsigned)a->limit); /* within the new bounds */
	} else if (!was_adaptive || a->open) {
		aimd_reopen(a);
	} else {
		a->limit = clampd(a->limit, a->min, a->max);
	}
}

/* --- dispatch delay ----------------------------------------------------- */

void aimd_delay_init(struct aimd_delay *d, bool adaptive, unsigned min_ms, unsigned max_ms,
                     double backoff_multiplier, double recovery_rps)
{
	d->adaptive = adaptive;
	d->min_ms = min_ms;
	d->max_ms = max_ms >= min_ms ? max_ms : min_ms;
	d->backoff_multiplier =
	    (isfinite(backoff_multiplier) && backoff_multiplier >= 1) ? backoff_multiplier : 1.5;
	d->recovery_rps = (isfinite(recovery_rps) && recovery_rps >= 0) ? recovery_rps : 3;
	d->delay_ms = d->min_ms;
	d->last_dispatch_ms = 0;
	d->dispatched = false;
	d->win_start_ms = 0;
	d->win_n = d->prev_n = 0;
}

void aimd_delay_init_plan(struct aimd_delay *d, const struct plan_conf *plan)
{
	aimd_delay_init(d, plan->dispatch_delay.adaptive, plan->dispatch_delay.min_ms,
	                plan->dispatch_delay.max_ms, plan->dispatch_delay.backoff_multiplier,
	                plan->dispatch_delay.recovery_rps);
}

/* Moves the one-second success window to now_ms. */
static void delay_window(struct aimd_delay *d, int64_t now_ms)
{
	if (now_ms - d->win_start_ms < 1000)
		return;
	d->prev_n = now_ms - d->win_start_ms < 2000 ? d->win_n : 0;
	d->win_n = 0;
	d->win_start_ms = now_ms;
}

void aimd_delay_on_capacity(struct aimd_delay *d, int64_t now_ms)
{
	if (!d->adaptive)
		return;
	double next;
	if (d->delay_ms > 0) {
		next = d->delay_ms * d->backoff_multiplier;
	} else {
		/* The first cut: from the rate the upstream carried in the
		 * last second, not from a constant that fits no provider. */
		delay_window(d, now_ms);
		unsigned n = d->prev_n > d->win_n ? d->prev_n : d->win_n;
		next = n > 0 ? 1000.0 / n * d->backoff_multiplier : AIMD_DELAY_START_MS;
	}
	d->delay_ms = clampd(next, d->min_ms, d->max_ms);
}

void aimd_delay_on_success(struct aimd_delay *d, int64_t now_ms)
{
	delay_window(d, now_ms);
	d->win_n++;
	if (!d->adaptive || d->delay_ms <= d->min_ms || d->delay_ms <= 0)
		return;
	double rate = 1000.0 / d->delay_ms;
	rate += d->recovery_rps / rate;
	double next = 1000.0 / rate;
	if (next < 1.0)
		next = 0; /* under a millisecond: open again */
	d->delay_ms = clampd(next, d->min_ms, d->max_ms);
}

void aimd_delay_converged(struct aimd_delay *d, double rps)
{
	if (!d->adaptive || !isfinite(rps) || rps <= 0)
		return;
	d->delay_ms = clampd(1000.0 / rps, d->min_ms, d->max_ms);
}

int64_t aimd_delay_ms(const struct aimd_delay *d)
{
	return (int64_t)ceil(d->delay_ms - 1e-9);
}

int64_t aimd_delay_ready_at(const struct aimd_delay *d, int64_t now_ms)
{
	if (!d->dispatched)
		return now_ms;
	int64_t at = d->last_dispatch_ms + aimd_delay_ms(d);
	return at > now_ms ? at : now_ms;
}

void aimd_delay_charge(struct aimd_delay *d, int64_t now_ms)
{
	d->last_dispatch_ms = now_ms;
	d->dispatched = true;
}

/* --- across a restart --------------------------------------------------- */

void aimd_save(const struct aimd *a, const struct aimd_delay *d, struct aimd_saved *out)
{
	out->open = a->open;
	out->limit = a->limit;
	out->rtt_ms = a->rtt_ms;
	out->delay_ms = d->delay_ms;
}

void aimd_resume(struct aimd *a, struct aimd_delay *d, const struct aimd_saved *s)
{
	if (isfinite(s->rtt_ms) && s->rtt_ms > 0)
		a->rtt_ms = clampd(s->rtt_ms, AIMD_RTT_MIN_MS, AIMD_RTT_MAX_MS);
	if (a->adaptive && !s->open && isfinite(s->limit)) {
		a->open = false;
		a->limit = clampd(s->limit, a->min, a->max);
	}
	if (d->adaptive && isfinite(s->delay_ms) && s->delay_ms > d->min_ms)
		d->delay_ms = s->delay_ms < d->max_ms ? s->delay_ms : d->max_ms;
}
