/* SPDX-License-Identifier: Apache-2.0 */
/* gcra — request-rate and token gates (DESIGN §3.2, §3.3). Pure: no I/O, no clock;
 * every instant is an int64 count of milliseconds passed in by the caller.
 *
 * One gate is GCRA in its virtual-scheduling form. The gate keeps a theoretical
 * arrival time (TAT): the instant at which the gate would be back to "idle" if
 * units kept arriving at exactly the emission interval T. A unit of cost c may
 * pass at instant t when TAT + c·T − burst·T ≤ t, and passing moves
 * TAT to max(TAT, t) + c·T. So burst units pass at once on an idle gate, then
 * one per T; with burst 1 every unit is T after the previous one.
 *
 * The interface is deliberately two questions, "when may the next unit pass?"
 * (gcra_ready_at) and "record that it passed" (gcra_charge), plus corrections:
 * a shared (Redis-backed) gate for several replicas can offer the same calls.
 *
 * A struct gates is the set of gates of one lane, built from a plan: one gate per
 * configured request window and one token gate; the most restrictive wins. */
#ifndef PACERD_GCRA_H
#define PACERD_GCRA_H

#include <stdbool.h>
#include <stdint.h>

struct plan_conf; /* core/config.h */

/* Lateness of a unit still counted on schedule, at most (see gcra_charge). */
#define GCRA_SLACK_MS 10.0
/* What a strict gate (burst 1) keeps beyond its interval between two sends,
 * as a fraction of it, at least (see gcra_sent): the rate is 99 % of the
 * limit. A lane learns more from a path that needs it (sched/margin.h). */
#define GCRA_STRICT_MARGIN 0.01

struct gcra {
	double t_ms;  /* emission interval per unit, ms; 0 = disabled (always open) */
	double burst; /* tolerance in units (> 0): that many may pass at once */
	double tat;   /* theoretical arrival time, ms; -INFINITY = never used */
};

/* Sets up a gate with emission interval t_ms (ms per unit; <= 0 or not finite
 * disables the gate) and tolerance burst (units; <= 0 is taken as 1). The gate
 * starts idle. */
void gcra_init(struct gcra *g, double t_ms, double burst);

/* Whether the gate limits anything (t_ms > 0). */
bool gcra_enabled(const struct gcra *g);

/* Earliest instant >= now_ms at which `cost` units may pass (cost >= 0; 1 for a
 * request). A cost larger than the tolerance passes as soon as the gate is idle
 * (TAT <= now), so that nothing starves; it then pushes the gate into debt. A
 * disabled gate always answers now_ms. Fractional instants round up: a unit is
 * never let through early. A gate faster than the clock (T < 1 ms) admits a
 * millisecond's worth of units at once (at least 1 ms of tolerance). */
int64_t gcra_ready_at(const struct gcra *g, int64_t now_ms, double cost);
/* The same, to the fraction of a millisecond and not rounded: for a caller
 * whose clock and timers are finer than the millisecond (the lanes' paced
 * dispatch), so that strict spacing costs no rounding per interval. */
double gcra_ready_at_precise(const struct gcra *g, double now_ms, double cost);

/* Records that `cost` units passed at now_ms. Charging before gcra_ready_at allows
 * it is permitted (the gate goes into debt and later units wait). A unit passing
 * less than the slack after the TAT (GCRA_SLACK_MS, at most the (burst − cost)
 * intervals the tolerance grants: none at burst 1) is counted as on schedule: the
 * gate advances from its own schedule, not from the late instant its timer fired,
 * so late wake-ups never make the rate drift where the burst forgives them;
 * beyond that, and on a gate of burst 1, the schedule restarts from now. */
void gcra_charge(struct gcra *g, double now_ms, double cost);

/* The `cost` units charged at their dispatch actually left at sent_ms (the
 * request's bytes went to the provider then, a little after the decision):
 * the schedule moves so that the next units keep their distance from this
 * instant, where the provider measures, not from the decision (within the
 * same slack as gcra_charge; a strict gate keeps `margin` more, a fraction
 * of the interval: gcra_strict_keep). Never moves the TAT back. */
void gcra_sent(struct gcra *g, double sent_ms, double cost, double margin);

/* What gcra_sent keeps beyond the interval after one unit's send when the
 * gate is strict (no slack: burst 1), in units: `margin` of it (at least
 * GCRA_STRICT_MARGIN), at most margin / GCRA_STRICT_MARGIN × GCRA_SLACK_MS
 * (10 ms at 1 %: a slow gate's margin is a path's jitter, not a share of
 * seconds). For a shared gate that is pushed by each send (the store's,
 * store/shared.c). 0 for a disabled gate. */
double gcra_strict_keep(const struct gcra *g, double margin);

/* Corrects an earlier charge once the actual cost is known: delta_units > 0 is
 * charged as at now_ms; delta_units < 0 is refunded, but the TAT never moves below
 * now_ms. Every TAT <= now means the same thing (idle, full burst available), so a
 * refund can not bank credit beyond the tolerance, and a late refund for usage
 * long past gives nothing back that the gate has not already given back. */
void gcra_adjust(struct gcra *g, int64_t now_ms, double delta_units);

/* Changes the emission interval and tolerance (reload, learning). The debt the
 * gate holds, counted in units (TAT − now) / T, is kept and re-expressed at the new
 * interval: halving the rate doubles the wait still owed. A gate enabled from the
 * disabled state starts idle; a disabled gate forgets its state. */
void gcra_set_rate(struct gcra *g, int64_t now_ms, double t_ms, double burst);

/* Which request window a gate of struct gates stands for. */
enum gates_window {
	GATES_MIN_MS,     /* min_ms_per_request: strict spacing, burst always 1 */
	GATES_PER_SECOND, /* max_requests_per_second, with the plan's burst */
	GATES_PER_MINUTE,
	GATES_PER_HOUR,
	GATES_N_WINDOWS
};

/* The rate gates of one lane. A window configured 0 is a disabled gate. */
struct gates {
	struct gcra req[GATES_N_WINDOWS]; /* cost 1 per request */
	struct gcra tokens;               /* cost = tokens; T = 60000 / tpm */
	struct gcra input, output;        /* cost = the prompt's / the output's part */
	/* Seconds' worth of tokens a token gate tolerates when the plan names
	 * no token_burst: 1 (Azure checks per-minute limits over 1 s or 10 s
	 * windows), or 60 where the provider's bucket refills continuously up to
	 * a full minute's worth (Anthropic: PROVIDERS.md §10), so that a burst
	 * the provider would take is not spread over a minute. */
	double token_burst_s;
};

/* Builds the gates from a plan: T = 1000 / rps, 60000 / rpm, 3600000 / rph,
 * min_ms_per_request, each with the plan's burst (min_ms excepted: a minimum
 * gap between requests admits no burst); the token gate has T = 60000 / tpm and a
 * tolerance of token_burst tokens (0: tpm / 60, one second's worth); the input
 * and output token gates (max_input_tokens_per_minute, max_output_tokens_per_minute:
 * Anthropic limits them apart) have one second's worth each. */
void gates_init(struct gates *s, const struct plan_conf *plan);
/* gates_init with token gates that tolerate token_burst_s seconds' worth of
 * tokens (above) where the plan names no token_burst. */
void gates_init_burst(struct gates *s, const struct plan_conf *plan, double token_burst_s);

/* Applies a changed plan (reload) at now_ms, keeping each gate's debt
 * (gcra_set_rate). */
void gates_reconfigure(struct gates *s, const struct plan_conf *plan, int64_t now_ms);
/* The same with every rate and burst multiplied by scale in (0, 1] (bursts
 * at least 1): one replica's share of a limit while the shared store is down. */
void gates_reconfigure_scaled(struct gates *s, const struct plan_conf *plan, double scale,
                              int64_t now_ms);
/* How many requests (cost 1; tokens not counted) the request gates would
 * let through at now_ms, one after the other, at most `cap`. */
unsigned gates_requests_available(const struct gates *s, int64_t now_ms, unsigned cap);

/* Whether any gate of the set limits anything. */
bool gates_enabled(const struct gates *s);
/* Earliest instant >= now_ms at which a request estimated at `tokens` tokens
 * (`input` of them the prompt's, `output` the requested output's) may pass every
 * gate: the maximum over the gates (most restrictive wins), to the fraction of
 * a millisecond (gcra_ready_at_precise). */
double gates_ready_at(const struct gates *s, double now_ms, double tokens, double input,
                      double output);

/* Records that such a request passed at now_ms. */
void gates_charge(struct gates *s, double now_ms, double tokens, double input, double output);
/* Such a request, charged at its dispatch, left for the provider at sent_ms
 * (gcra_sent: a strict gate keeps `margin` of its interval more). */
void gates_sent(struct gates *s, double sent_ms, double tokens, double input, double output,
                double margin);

/* Charges (delta > 0) or refunds (delta < 0) the token gates the difference
 * between the actual usage and the estimate charged at dispatch, in all and
 * per part (0 where the usage did not say). */
void gates_adjust_tokens(struct gates *s, int64_t now_ms, double delta_tokens, double delta_input,
                         double delta_output);

/* The effective minimum delay between requests, in ms, as in
 * max(min_ms, 1000/rps, 60000/rpm, 3600000/rph); 0 when no request gate is set. */
double gates_min_interval_ms(const struct gates *s);

#endif
