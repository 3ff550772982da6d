/* SPDX-License-Identifier: Apache-2.0 */
/* gcra — GCRA virtual scheduling gates; see gcra.h for the model. */
#include "sched/gcra.h"

#include <math.h>

#include "core/config.h"

/* Instants far beyond any real schedule (~146 000 years): clamping there keeps the
 * double -> int64 conversion defined even for absurd costs or rates. */
#define GCRA_FAR_MS 4.6e18

/* A fractional instant rounded up to whole ms, so no unit passes early. The small
 * epsilon absorbs floating-point error (100 · 0.1 must not become 11 ms). */
static int64_t ceil_ms(double ms)
{
	double c = ceil(ms - 1e-6);
	if (c > GCRA_FAR_MS)
		return (int64_t)GCRA_FAR_MS;
	if (c < -GCRA_FAR_MS)
		return -(int64_t)GCRA_FAR_MS;
	return (int64_t)c;
}

static double sane_interval(double t_ms)
{
	return (isfinite(t_ms) && t_ms > 0) ? t_ms : 0;
}

static double sane_burst(double burst)
{
	return (isfinite(burst) && burst > 0) ? burst : 1;
}

static double sane_cost(double cost)
{
	return (isfinite(cost) && cost > 0) ? cost : 0;
}

void gcra_init(struct gcra *g, double t_ms, double burst)
{
	g->t_ms = sane_interval(t_ms);
	g->burst = sane_burst(burst);
	g->tat = -INFINITY;
}

bool gcra_enabled(const struct gcra *g)
{
	return g->t_ms > 0;
}

double gcra_ready_at_precise(const struct gcra *g, double now_ms, double cost)
{
	if (!gcra_enabled(g) || g->tat == -INFINITY)
		return now_ms;
	/* An oversize cost is checked as if it were exactly the tolerance: the
	 * condition becomes TAT <= t, i.e. "the gate is idle". */
	double c = fmin(sane_cost(cost), g->burst);
	/* A gate faster than the millisecond clock (T < 1 ms) lets one
	 * millisecond's worth through at once: the clock cannot space units
	 * finer, and rounding each one up to the next millisecond would cap the
	 * gate at 1000 per second whatever its rate. */
	double tolerance = g->burst * g->t_ms;
	if (g->t_ms < 1.0 && tolerance < 1.0)
		tolerance = 1.0;
	double at = fmin(g->tat + c * g->t_ms - tolerance, GCRA_FAR_MS);
	return at > now_ms ? at : now_ms;
}

int64_t gcra_ready_at(const struct gcra *g, int64_t now_ms, double cost)
{
	int64_t at = ceil_ms(gcra_ready_at_precise(g, (double)now_ms, cost));
	return at > now_ms ? at : now_ms;
}

/* How late after the TAT a unit may pass and still count as on schedule:
 * timer wake-ups are late by a fraction of a millisecond, and a gate that
 * restarted from every late instant would add that to every interval (10
 * req/s became 9.7). But only within the tolerance the burst grants: a unit
 * counted on schedule lets the next one pass that much sooner after it, and
 * a provider's bucket of `burst` forgives (burst − cost) intervals of that,
 * no more. So a gate of burst 1 (and a token gate whose tolerance is one
 * request's worth) has no slack at all: a late unit restarts the schedule
 * from its own instant, and no two units are ever closer than T. At most
 * GCRA_SLACK_MS. */
static double charge_slack(const struct gcra *g, double cost)
{
	double grant = (g->burst - fmin(cost, g->burst)) * g->t_ms;
	return fmin(GCRA_SLACK_MS, grant);
}

/* The instant a charge of `cost` starts from: the TAT while the gate is
 * behind schedule or late by less than the slack, else now (real idleness).
 * The slack is measured in the interval this charge stands for (a token
 * gate's unit is a token, its charge a request's worth of them). */
static double charge_base(const struct gcra *g, double now_ms, double cost)
{
	if (now_ms <= g->tat)
		return g->tat;
	return now_ms < g->tat + charge_slack(g, cost) ? g->tat : now_ms;
}

void gcra_charge(struct gcra *g, double now_ms, double cost)
{
	if (!gcra_enabled(g))
		return;
	double c = sane_cost(cost);
	double base = charge_base(g, now_ms, c);
	g->tat = fmin(base + c * g->t_ms, GCRA_FAR_MS);
}

/* A margin as a strict gate keeps it: at least GCRA_STRICT_MARGIN. */
static double sane_margin(double margin)
{
	return isfinite(margin) && margin > GCRA_STRICT_MARGIN ? margin : GCRA_STRICT_MARGIN;
}

void gcra_sent(struct gcra *g, double sent_ms, double cost, double margin)
{
	if (!gcra_enabled(g) || !isfinite(sent_ms))
		return;
	double c = sane_cost(cost);
	double slack = charge_slack(g, c);
	double at = sent_ms + c * g->t_ms - slack;
	/* A strict gate (no slack) keeps a margin of the interval beyond it:
	 * the network and the provider's own receiving add a fraction of a
	 * millisecond or more that differs from one request to the next (a
	 * new connection's first request arrives later after its send than
	 * one on a warm connection), and a bucket of one refuses a request
	 * that arrives even that much early. */
	if (slack <= 0)
		at += c * g->t_ms * gcra_strict_keep(g, margin);
	if (at > g->tat)
		g->tat = fmin(at, GCRA_FAR_MS);
}

double gcra_strict_keep(const struct gcra *g, double margin)
{
	if (!gcra_enabled(g))
		return 0;
	double m = sane_margin(margin);
	return m * fmin(1, GCRA_SLACK_MS / (GCRA_STRICT_MARGIN * g->t_ms));
}

void gcra_adjust(struct gcra *g, int64_t now_ms, double delta_units)
{
	if (!gcra_enabled(g) || !isfinite(delta_units) || delta_units == 0)
		return;
	if (delta_units > 0) {
		gcra_charge(g, now_ms, delta_units);
		return;
	}
	g->tat = fmax(g->tat + delta_units * g->t_ms, (double)now_ms);
}

void gcra_set_rate(struct gcra *g, int64_t now_ms, double t_ms, double burst)
{
	double t_new = sane_interval(t_ms);
	double now = (double)now_ms;
	g->burst = sane_burst(burst);
	if (t_new == 0 || g->t_ms == 0) {
		/* Disabled, or enabled afresh: nothing owed. */
		g->t_ms = t_new;
		g->tat = -INFINITY;
		return;
	}
	if (g->tat > now) {
		double owed_units = (g->tat - now) / g->t_ms;
		g->tat = fmin(now + owed_units * t_new, GCRA_FAR_MS);
	}
	g->t_ms = t_new;
}

/* --- the gates of one lane ------------------------------------------------ */

static double per_window(double window_ms, double limit)
{
	return (isfinite(limit) && limit > 0) ? window_ms / limit : 0;
}

static double plan_interval(const struct plan_conf *plan, enum gates_window w)
{
	switch (w) {
	case GATES_MIN_MS:
		return plan->min_ms_per_request;
	case GATES_PER_SECOND:
		return per_window(1000.0, plan->max_requests_per_second);
	case GATES_PER_MINUTE:
		return per_window(60000.0, plan->max_requests_per_minute);
	case GATES_PER_HOUR:
		return per_window(3600000.0, plan->max_requests_per_hour);
	case GATES_N_WINDOWS:
		break;
	}
	return 0;
}

static double plan_burst(const struct plan_conf *plan, enum gates_window w)
{
	if (w == GATES_MIN_MS || plan->burst < 1)
		return 1;
	return plan->burst;
}

static double plan_token_burst(const struct plan_conf *plan, double burst_s)
{
	return plan->token_burst > 0 ? plan->token_burst
	                             : plan->max_tokens_per_minute / 60.0 * burst_s;
}

void gates_init(struct gates *s, const struct plan_conf *plan)
{
	gates_init_burst(s, plan, 1);
}

void gates_init_burst(struct gates *s, const struct plan_conf *plan, double token_burst_s)
{
	s->token_burst_s = token_burst_s >= 1 ? token_burst_s : 1;
	double b = s->token_burst_s;
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		gcra_init(&s->req[w], plan_interval(plan, (enum gates_window)w),
		          plan_burst(plan, (enum gates_window)w));
	gcra_init(&s->tokens, per_window(60000.0, plan->max_tokens_per_minute),
	          plan_token_burst(plan, b));
	gcra_init(&s->input, per_window(60000.0, plan->max_input_tokens_per_minute),
	          plan->max_input_tokens_per_minute / 60.0 * b);
	gcra_init(&s->output, per_window(60000.0, plan->max_output_tokens_per_minute),
	          plan->max_output_tokens_per_minute / 60.0 * b);
}

void gates_reconfigure(struct gates *s, const struct plan_conf *plan, int64_t now_ms)
{
	gates_reconfigure_scaled(s, plan, 1.0, now_ms);
}

void gates_reconfigure_scaled(struct gates *s, const struct plan_conf *plan, double scale,
                              int64_t now_ms)
{
	if (!(scale > 0 && scale <= 1))
		scale = 1;
	double b = s->token_burst_s >= 1 ? s->token_burst_s : 1;
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		gcra_set_rate(&s->req[w], now_ms, plan_interval(plan, (enum gates_window)w) / scale,
		              fmax(1, floor(plan_burst(plan, (enum gates_window)w) * scale)));
	gcra_set_rate(&s->tokens, now_ms, per_window(60000.0, plan->max_tokens_per_minute * scale),
	              plan_token_burst(plan, b) * scale);
	gcra_set_rate(&s->input, now_ms,
	              per_window(60000.0, plan->max_input_tokens_per_minute * scale),
	              plan->max_input_tokens_per_minute * scale / 60.0 * b);
	gcra_set_rate(&s->output, now_ms,
	              per_window(60000.0, plan->max_output_tokens_per_minute * scale),
	              plan->max_output_tokens_per_minute * scale / 60.0 * b);
}

unsigned gates_requests_available(const struct gates *s, int64_t now_ms, unsigned cap)
{
	unsigned n = cap;
	for (int w = 0; w < GATES_N_WINDOWS; w++) {
		const struct gcra *g = &s->req[w];
		if (!gcra_enabled(g))
			continue;
		/* The tolerance gcra_ready_at allows (a millisecond's worth for a
		 * gate faster than the clock), less what is owed: TAT no earlier
		 * than now (an idle gate holds its whole burst). */
		double tolerance = g->burst * g->t_ms;
		if (g->t_ms < 1.0 && tolerance < 1.0)
			tolerance = 1.0;
		double left =
		    (tolerance - (fmax(g->tat, (double)now_ms) - (double)now_ms)) / g->t_ms;
		unsigned k = left <= 0 ? 0 : left >= cap ? cap : (unsigned)floor(left + 1e-9);
		if (k < n)
			n = k;
	}
	return n;
}

bool gates_enabled(const struct gates *s)
{
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		if (gcra_enabled(&s->req[w]))
			return true;
	return gcra_enabled(&s->tokens) || gcra_enabled(&s->input) || gcra_enabled(&s->output);
}

double gates_ready_at(const struct gates *s, double now_ms, double tokens, double input,
                      double output)
{
	double at = gcra_ready_at_precise(&s->tokens, now_ms, tokens);
	at = fmax(at, gcra_ready_at_precise(&s->input, now_ms, input));
	at = fmax(at, gcra_ready_at_precise(&s->output, now_ms, output));
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		at = fmax(at, gcra_ready_at_precise(&s->req[w], now_ms, 1));
	return at;
}

void gates_charge(struct gates *s, double now_ms, double tokens, double input, double output)
{
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		gcra_charge(&s->req[w], now_ms, 1);
	gcra_charge(&s->tokens, now_ms, tokens);
	gcra_charge(&s->input, now_ms, input);
	gcra_charge(&s->output, now_ms, output);
}

void gates_sent(struct gates *s, double sent_ms, double tokens, double input, double output,
                double margin)
{
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		gcra_sent(&s->req[w], sent_ms, 1, margin);
	if (tokens > 0)
		gcra_sent(&s->tokens, sent_ms, tokens, margin);
	if (input > 0)
		gcra_sent(&s->input, sent_ms, input, margin);
	if (output > 0)
		gcra_sent(&s->output, sent_ms, output, margin);
}

void gates_adjust_tokens(struct gates *s, int64_t now_ms, double delta_tokens, double delta_input,
                         double delta_output)
{
	gcra_adjust(&s->tokens, now_ms, delta_tokens);
	gcra_adjust(&s->input, now_ms, delta_input);
	gcra_adjust(&s->output, now_ms, delta_output);
}

double gates_min_interval_ms(const struct gates *s)
{
	double m = 0;
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		m = fmax(m, s->req[w].t_ms);
	return m;
}
