/* SPDX-License-Identifier: Apache-2.0 */
/* plan — the arithmetic of `pacerd plan` (model in plan.h). */
#include "cli/plan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 9999-12-31T23:59:59.999Z: past it, no calendar line can show the end. */
#define PLAN_LAST_SHOWABLE_MS 253402300799999LL

/* Ratios of exact decimal inputs (100.00000000000001 for 1000 x 60000 /
 * 600000) must not round a whole number up or down by one. */
static double ceil_tolerant(double x)
{
	return ceil(x - 1e-9 * fmax(1.0, fabs(x)));
}

static double floor_tolerant(double x)
{
	return floor(x + 1e-9 * fmax(1.0, fabs(x)));
}

const char *plan_limit_name(enum plan_limit l)
{
	static const char *const names[] = {"rps", "rpm", "rph", "min-ms", "tpm", "concurrency"};
	return (unsigned)l < PLAN_N_LIMITS ? names[l] : "none";
}

static double limit_value(const struct plan_input *in, enum plan_limit l)
{
	switch (l) {
	case PLAN_RPS:
		return in->rps;
	case PLAN_RPM:
		return in->rpm;
	case PLAN_RPH:
		return in->rph;
	case PLAN_MIN_MS:
		return in->min_ms;
	case PLAN_TPM:
		return in->tpm;
	case PLAN_CONCURRENCY:
		return in->concurrency;
	default:
		return 0;
	}
}

/* The shortest interval between two requests that limit `l` allows; 0 when
 * it is not given or cannot be counted (tpm without avg_tokens, concurrency
 * without latency). */
static double limit_interval_ms(const struct plan_input *in, enum plan_limit l)
{
	double v = limit_value(in, l);
	if (v <= 0)
		return 0;
	switch (l) {
	case PLAN_RPS:
		return 1000.0 / v;
	case PLAN_RPM:
		return 60000.0 / v;
	case PLAN_RPH:
		return 3600000.0 / v;
	case PLAN_MIN_MS:
		return v;
	case PLAN_TPM:
		return in->avg_tokens > 0 ? 60000.0 * in->avg_tokens / v : 0;
	case PLAN_CONCURRENCY:
		return in->latency_ms > 0 ? in->latency_ms / v : 0;
	default:
		return 0;
	}
}

static bool in_bounds(double v)
{
	return v == 0 || (isfinite(v) && v >= PLAN_MIN_VALUE && v <= PLAN_MAX_VALUE);
}

static int validate(const struct plan_input *in, char *err, size_t errlen)
{
	if (in->requests < 1 || (double)in->requests > PLAN_MAX_VALUE) {
		snprintf(err, errlen, "requests: from 1 to %.0f", PLAN_MAX_VALUE);
		return -1;
	}
	const struct {
		const char *name;
		double v;
	} numbers[] = {
	    {"rps", in->rps},
	    {"rpm", in->rpm},
	    {"rph", in->rph},
	    {"min-ms", in->min_ms},
	    {"tpm", in->tpm},
	    {"avg-tokens", in->avg_tokens},
	    {"latency-ms", in->latency_ms},
	    {"concurrency", (double)in->concurrency},
	};
	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
		if (!in_bounds(numbers[i].v)) {
			snprintf(err, errlen, "%s: 0 (none) or from %g to %g", numbers[i].name,
			         PLAN_MIN_VALUE, PLAN_MAX_VALUE);
			return -1;
		}
	}
	if (in->budget_ms < 0 || (double)in->budget_ms > PLAN_MAX_VALUE * 1000.0) {
		snprintf(err, errlen, "time budget: from 1 ms to %g s", PLAN_MAX_VALUE);
		return -1;
	}
	return 0;
}

/* The constraints that yield an interval, in enum order, and the binding one:
 * the longest interval, the first on a tie. */
static void collect_constraints(const struct plan_input *in, struct plan_result *out)
{
	out->binding = PLAN_LIMIT_NONE;
	out->tpm_ignored = in->tpm > 0 && in->avg_tokens <= 0;
	for (int l = 0; l < PLAN_N_LIMITS; l++) {
		double interval = limit_interval_ms(in, (enum plan_limit)l);
		if (interval <= 0)
			continue;
		out->constraints[out->n_constraints++] = (struct plan_constraint){
		    .limit = (enum plan_limit)l,
		    .value = limit_value(in, (enum plan_limit)l),
		    .interval_ms = interval,
		};
		if (interval > out->interval_ms) {
			out->interval_ms = interval;
			out->binding = (enum plan_limit)l;
		}
	}
	out->unbounded = out->binding == PLAN_LIMIT_NONE;
	out->throughput_rps = out->unbounded ? INFINITY : 1000.0 / out->interval_ms;
}

static uint64_t at_most(double n, uint64_t cap)
{
	return n >= (double)cap ? cap : (uint64_t)n;
}

/* Requests in flight at once, at most: one more each time the latency spans
 * another interval; all of them when nothing paces the run. */
static uint64_t effective_concurrency(const struct plan_input *in, const struct plan_result *r)
{
	uint64_t cap = in->requests;
	if (in->concurrency > 0 && in->concurrency < cap)
		cap = in->concurrency;
	if (r->unbounded)
		return cap;
	if (in->latency_ms <= 0)
		return 1;
	double needed = ceil_tolerant(in->latency_ms / r->interval_ms);
	return needed < 1 ? 1 : at_most(needed, cap);
}

static void schedule_workers(const struct plan_input *in, struct plan_result *r)
{
	r->effective_concurrency = effective_concurrency(in, r);
	r->workers = r->effective_concurrency;
	if (in->concurrency_is_workers && in->concurrency > 0)
		r->workers = at_most(in->concurrency, in->requests);
	r->worker_interval_ms = (double)r->workers * r->interval_ms;
	r->stagger_ms = r->interval_ms;
}

static void schedule_time(const struct plan_input *in, int64_t start_ms, struct plan_result *r)
{
	r->duration_ms = (double)in->requests * r->interval_ms;
	r->start_ms = start_ms;
	r->end_known = (double)start_ms + r->duration_ms <= (double)PLAN_LAST_SHOWABLE_MS;
	r->end_ms = r->end_known ? start_ms + (int64_t)llround(r->duration_ms) : 0;
	r->has_tokens = in->avg_tokens > 0;
	r->tokens = r->has_tokens ? (double)in->requests * in->avg_tokens : 0;
}

/* A limit large enough: whole above 100, else to the hundredth. */
static double round_up_limit(double x)
{
	return x >= 100 ? ceil_tolerant(x) : ceil_tolerant(x * 100) / 100;
}

static double round_down_limit(double x)
{
	return x >= 100 ? floor_tolerant(x) : floor_tolerant(x * 100) / 100;
}

/* The value limit `l` needs for `requests` to fit in `budget_ms`. */
static double needed_limit(const struct plan_input *in, enum plan_limit l, double budget_ms)
{
	double n = (double)in->requests;
	switch (l) {
	case PLAN_RPS:
		return round_up_limit(n * 1000.0 / budget_ms);
	case PLAN_RPM:
		return round_up_limit(n * 60000.0 / budget_ms);
	case PLAN_RPH:
		return round_up_limit(n * 3600000.0 / budget_ms);
	case PLAN_MIN_MS:
		return round_down_limit(budget_ms / n);
	case PLAN_TPM:
		return round_up_limit(n * in->avg_tokens * 60000.0 / budget_ms);
	case PLAN_CONCURRENCY:
		return ceil_tolerant(n * in->latency_ms / budget_ms);
	default:
		return 0;
	}
}

static void add_change(const struct plan_input *in, struct plan_result *r, enum plan_limit l)
{
	r->changes[r->n_changes++] = (struct plan_change){
	    .limit = l,
	    .value = needed_limit(in, l, (double)in->budget_ms),
	};
}

/* The three ways to fit: fewer requests, a longer budget, and for every
 * limit too tight on its own (the binding one first) the value it needs. */
static void budget_options(const struct plan_input *in, struct plan_result *r)
{
	double budget = (double)in->budget_ms;
	r->fitting_requests = at_most(floor_tolerant(budget / r->interval_ms), in->requests);

	int64_t unit = in->budget_unit == PLAN_UNIT_S ? 1000 : 60000;
	int64_t duration = (int64_t)ceil_tolerant(r->duration_ms);
	r->needed_budget_ms = (duration + unit - 1) / unit * unit;

	add_change(in, r, r->binding);
	for (size_t i = 0; i < r->n_constraints; i++) {
		const struct plan_constraint *c = &r->constraints[i];
		if (c->limit != r->binding &&
		    (double)in->requests * c->interval_ms > budget * (1 + 1e-12))
			add_change(in, r, c->limit);
	}
}

int plan_compute(const struct plan_input *in, int64_t start_ms, struct plan_result *out, char *err,
                 size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (validate(in, err, errlen) != 0)
		return -1;
	collect_constraints(in, out);
	schedule_workers(in, out);
	schedule_time(in, start_ms, out);
	out->has_budget = in->budget_ms > 0;
	out->fits = !out->has_budget || out->duration_ms <= (double)in->budget_ms * (1 + 1e-12);
	if (!out->fits)
		budget_options(in, out);
	return 0;
}

int plan_parse_duration(const char *s, int64_t *ms, enum plan_unit *unit)
{
	if (s == NULL || !((*s >= '0' && *s <= '9') || *s == '.') || strpbrk(s, "xX") != NULL)
		return -1; /* no sign, no space, no "inf", no hexadecimal */
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || !isfinite(v) || v <= 0)
		return -1;
	double scale = 1000;
	enum plan_unit u = PLAN_UNIT_S;
	if (*end == 'm') {
		scale = 60000;
		u = PLAN_UNIT_M;
	} else if (*end == 'h') {
		scale = 3600000;
		u = PLAN_UNIT_H;
	} else if (*end != 's' && *end != '\0') {
		return -1;
	}
	if (*end != '\0' && end[1] != '\0')
		return -1;
	double total = v * scale;
	if (total > PLAN_MAX_VALUE * 1000.0 || llround(total) < 1)
		return -1;
	*ms = llround(total);
	*unit = u;
	return 0;
}
