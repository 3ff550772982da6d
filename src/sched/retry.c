/* SPDX-License-Identifier: Apache-2.0 */
/* retry — see retry.h. */
#include "sched/retry.h"

#include <string.h>

/* Additive jitter is uniform in [0, 500 ms) (DESIGN §3). */
#define JITTER_MS 500
/* The exponential term stops doubling here; far above any sane max_delay_ms. */
#define BACKOFF_CEIL (INT64_C(1) << 40)

static enum retry_class by_status(int status, const char **why)
{
	switch (status) {
	case 429:
		*why = "rate_limited";
		return RETRY_CAPACITY;
	case 503:
		*why = "status_503";
		return RETRY_CAPACITY;
	case 529:
		*why = "status_529";
		return RETRY_CAPACITY;
	case 408:
		*why = "status_408";
		return RETRY_TRANSIENT;
	case 409:
		*why = "status_409";
		return RETRY_TRANSIENT;
	/* 501, 505, 511 (unknown method, HTTP version, network authentication):
	 * the same request would fail the same way again. */
	case 501:
	case 505:
	case 511:
		*why = "final";
		return RETRY_FINAL;
	default:
		break;
	}
	if (status >= 500 && status <= 599) {
		*why = "server_error";
		return RETRY_TRANSIENT;
	}
	*why = "final";
	return RETRY_FINAL;
}

static const char *transport_reason(enum retry_transport t)
{
	switch (t) {
	case RETRY_TRANSPORT_CONNECT:
		return "connect_error";
	case RETRY_TRANSPORT_RESET:
		return "reset_before_headers";
	case RETRY_TRANSPORT_TIMEOUT:
		return "timeout";
	case RETRY_TRANSPORT_CERT:
		return "tls_verify";
	case RETRY_TRANSPORT_NONE:
		break;
	}
	return "transport";
}

static enum retry_class classify_error(int status, const struct rlh_result *hdrs,
                                       const struct error_facts *f, const char **why, bool *quota)
{
	if (hdrs != NULL && hdrs->has_should_retry && !hdrs->should_retry) {
		*why = "x_should_retry_false";
		return RETRY_FINAL_NO_RETRY;
	}
	if (f->money != NULL) {
		*why = f->money;
		*quota = true;
		return RETRY_FINAL_NO_RETRY;
	}
	if (f->too_large) {
		*why = "request_too_large";
		return RETRY_FINAL_NO_RETRY;
	}
	if (status == 402 && f->in_flight != NULL) { /* OpenRouter: passes once some end */
		*why = f->in_flight;
		return RETRY_CAPACITY;
	}
	if (status == 402) { /* no credits (OpenRouter) */
		*why = "payment_required";
		*quota = true;
		return RETRY_FINAL_NO_RETRY;
	}
	if (f->daily_cap) {
		*why = "daily_quota";
		*quota = true;
		return RETRY_FINAL_NO_RETRY;
	}
	enum retry_class c = by_status(status, why);
	if (c != RETRY_CAPACITY && f->capacity != NULL) {
		*why = f->capacity;
		return RETRY_CAPACITY;
	}
	if (c == RETRY_FINAL && hdrs != NULL && hdrs->has_should_retry && hdrs->should_retry) {
		*why = "x_should_retry_true";
		return RETRY_TRANSIENT;
	}
	return c;
}

enum retry_class retry_classify(int status, enum retry_transport transport,
                                const struct rlh_result *hdrs, const struct error_facts *facts,
                                const char **reason, bool *quota)
{
	static const struct error_facts none;
	const char *why;
	bool q = false;
	enum retry_class c;

	if (transport != RETRY_TRANSPORT_NONE) {
		why = transport_reason(transport);
		/* An untrusted certificate stays untrusted: no retry, no SDK retry. */
		c = transport == RETRY_TRANSPORT_CERT ? RETRY_FINAL_NO_RETRY : RETRY_TRANSIENT;
	} else if (status < 400) {
		why = "final";
		c = RETRY_FINAL;
	} else {
		c = classify_error(status, hdrs, facts != NULL ? facts : &none, &why, &q);
	}
	if (reason != NULL)
		*reason = why;
	if (quota != NULL)
		*quota = q;
	return c;
}

const char *retry_class_name(enum retry_class c)
{
	switch (c) {
	case RETRY_FINAL:
		return "final";
	case RETRY_FINAL_NO_RETRY:
		return "final_no_retry";
	case RETRY_CAPACITY:
		return "capacity";
	case RETRY_TRANSIENT:
		return "transient";
	}
	return "unknown";
}

static double clamp_unit(double rnd)
{
	if (!(rnd >= 0)) /* also NaN */
		return 0;
	if (rnd >= 1)
		return 0x1.fffffffffffffp-1; /* largest double below 1 */
	return rnd;
}

int64_t retry_backoff_ms(unsigned attempt, const struct plan_conf *plan, double rnd)
{
	int64_t max = plan->retry.max_delay_ms;
	int64_t base = plan->retry.initial_delay_ms;

	rnd = clamp_unit(rnd);
	for (unsigned i = 1; i < attempt && base < max && base < BACKOFF_CEIL; i++)
		base *= 2;
	if (plan->retry.jitter == JITTER_FULL)
		return (int64_t)(rnd * (double)(base < max ? base : max));
	int64_t b = base + (int64_t)(rnd * JITTER_MS);
	return b < max ? b : max;
}

static struct retry_decision give_up(const char *why, bool no_retry_hdr)
{
	return (struct retry_decision){.retry = false, .no_retry_hdr = no_retry_hdr, .why = why};
}

struct retry_decision retry_decide(enum retry_class cls, unsigned attempt, bool has_hint,
                                   int64_t hint_ms, const struct plan_conf *plan,
                                   int64_t time_left_ms, double rnd)
{
	if (attempt == 0)
		attempt = 1;
	switch (cls) {
	case RETRY_FINAL:
		return give_up("final", false);
	case RETRY_FINAL_NO_RETRY:
		return give_up("never_retry", true);
	case RETRY_TRANSIENT:
		if (attempt >= plan->retry.max_attempts)
			return give_up("max_attempts", false);
		break;
	case RETRY_CAPACITY:
		break;
	}
	int64_t backoff = retry_backoff_ms(attempt, plan, rnd);
	bool hinted = has_hint && hint_ms >= 0;
	int64_t delay = hinted && hint_ms > backoff ? hint_ms : backoff;
	if (delay >= time_left_ms) {
		/* the server asked for more time than is left: say so to the client too */
		if (hinted && hint_ms >= time_left_ms)
			return give_up("hint_past_deadline", true);
		return give_up("deadline", false);
	}
	return (struct retry_decision){.retry = true, .delay_ms = delay, .why = "retry"};
}

/* The statuses that hold the lane from their headers on (DESIGN §3). */
static bool capacity_status(int status)
{
	return status == 429 || status == 503 || status == 529;
}

struct retry_head_verdict retry_verdict_head(int status, const struct rlh_result *hdrs,
                                             bool own_tier)
{
	struct retry_head_verdict v = {
	    .hold_body = status == 402 || status == 408 || status == 409 || status == 429 ||
	                 status == 498 || status >= 500,
	    .capacity = capacity_status(status) && !own_tier,
	};
	int64_t hint;
	if (v.capacity && rlh_server_hint(hdrs, NULL, &hint) && hint > 0)
		v.hold_ms = hint;
	return v;
}

/* Whose shortage a capacity answer is (error_facts' in_flight, overload,
 * tier): the account's budget (the lane is told: AIMD, the learned pace), or
 * not (the lane is not cut). A 529 is Anthropic's overload whatever its body. */
static enum retry_lane_outcome capacity_outcome(int status, const struct error_facts *f)
{
	if (f->tier != NULL)
		return RETRY_LANE_TIER;
	if (f->overload != NULL || status == 529)
		return RETRY_LANE_OVERLOAD;
	return RETRY_LANE_CAPACITY;
}

static enum retry_lane_outcome lane_outcome(enum retry_class cls)
{
	switch (cls) {
	case RETRY_CAPACITY:
		return RETRY_LANE_CAPACITY;
	case RETRY_TRANSIENT:
		return RETRY_LANE_TRANSIENT;
	case RETRY_FINAL:
	case RETRY_FINAL_NO_RETRY:
		break;
	}
	return RETRY_LANE_SUCCESS;
}

struct retry_verdict retry_verdict(const struct retry_input *in)
{
	struct retry_verdict v = {.action = RETRY_ACTION_RELAY, .cls = RETRY_FINAL};
	bool http = in->transport == RETRY_TRANSPORT_NONE;

	if (in->streamed) {
		if (capacity_status(in->status))
			v.outcome = in->status == 529 ? RETRY_LANE_OVERLOAD : RETRY_LANE_CAPACITY;
		else if (!http)
			v.outcome = RETRY_LANE_TRANSIENT;
		return v;
	}
	struct error_body eb;
	bool with_body = http && in->held;
	bool quota_class = false;
	error_body_parse(with_body ? in->body : NULL, with_body ? in->body_len : 0, &eb);
	v.cls = http ? retry_classify(in->status, RETRY_TRANSPORT_NONE, in->hdrs, &eb.facts,
	                              &v.reason, &quota_class)
	             : retry_classify(0, in->transport, NULL, NULL, &v.reason, NULL);
	int64_t hint = -1;
	bool has_hint = http && rlh_server_hint(in->hdrs, &eb.hints, &hint);
	bool quota = http && in->held &&
	             (quota_class || (v.cls == RETRY_CAPACITY && has_hint &&
	                              hint >= (int64_t)in->plan->retry.deadline_s * 1000));
	v.hinted = has_hint && hint > 0;
	v.outcome = quota   ? RETRY_LANE_QUOTA_OUT
	            : !http ? RETRY_LANE_TRANSIENT
	                    : lane_outcome(v.cls);
	if (v.outcome == RETRY_LANE_CAPACITY)
		v.outcome = capacity_outcome(in->status, &eb.facts);
	/* What the refusal says of the budget it refused, for the lane to learn
	 * (a budget no header describes: Gemini's quotaValue). Not a daily cap:
	 * that one is the quota's. */
	if (v.outcome == RETRY_LANE_CAPACITY && eb.hints.has_limit && eb.hints.limit > 0 &&
	    eb.hints.budget != RLH_N_BUDGETS && eb.hints.window_s > 0 &&
	    eb.hints.window_s < 86400) {
		v.told.budget = eb.hints.budget;
		v.told.limit = eb.hints.limit;
		v.told.window_ms = eb.hints.window_s * 1000;
	}

	if (v.cls == RETRY_FINAL || v.cls == RETRY_FINAL_NO_RETRY) {
		v.action = http ? RETRY_ACTION_RELAY : RETRY_ACTION_GIVE_UP;
		v.no_retry_hdr = v.cls == RETRY_FINAL_NO_RETRY;
		v.quota = quota;
		/* A daily cap that says when it comes back (Gemini's retryDelay)
		 * holds the lane until then: its quota probe waits for the reset
		 * (sched's quota_next_probe). Money says no such thing. */
		if (quota && eb.facts.daily_cap && has_hint && hint > 0)
			v.hold_ms = hint;
		return v;
	}
	struct retry_decision d = retry_decide(v.cls, in->attempt, has_hint, hint, in->plan,
	                                       in->deadline_ms - in->now_ms, in->rnd);
	/* A capacity hint holds the whole lane; a tier's shortage holds none of
	 * it (only that tier's requests wait, each its own delay); an overload
	 * holds it for the hint, or else for the backoff the retry waits. */
	if (v.cls == RETRY_CAPACITY && has_hint && hint > 0 && v.outcome != RETRY_LANE_TIER)
		v.hold_ms = hint;
	else if (v.outcome == RETRY_LANE_OVERLOAD && d.retry)
		v.hold_ms = d.delay_ms;
	if (d.retry && !in->body_gone) {
		v.action = RETRY_ACTION_RETRY;
		v.delay_ms = d.delay_ms;
		return v;
	}
	v.action = RETRY_ACTION_GIVE_UP;
	v.no_retry_hdr = d.retry ? false : d.no_retry_hdr;
	v.quota = quota;
	v.stop = d.retry ? "body_gone" : d.why;
	return v;
}
