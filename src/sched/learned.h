/* learned — pacing learned from an upstream's rate-limit headers (DESIGN §3.4, §4).
 * Pure: no I/O, no clock; instants are int64 ms passed in by the caller. One
 * struct learned follows one budget (the requests budget, or the tokens budget)
 * of one lane; the header parsing itself lives elsewhere.
 *
 * The model. Each response reports (remaining R, reset r[, limit L]) for a budget.
 * Two shapes of budget exist:
 *
 *  - continuous (token bucket: OpenAI, Anthropic, Groq): the budget refills at a
 *    rate ρ up to a capacity C, and reset is the time until it is full again, so
 *    every observation lies on the line  R + ρ·r = C.  Two observations with
 *    different r give ρ and C; with L sent, C = L and each observation alone gives
 *    ρ = (L − R) / r, unless the budget never comes near L and a fit without
 *    L puts it far below (a per-minute L enforced as a small bucket,
 *    PROVIDERS.md §10: learned.c's fit_with_limit). Estimates come from least
 *    squares with exponential
 *    forgetting (learned_params.forget), so rounding (Anthropic reports thousands,
 *    whole seconds) averages out and long resets, the precise ones, weigh most.
 *    Resets under 2 × time_noise_ms are left out of the fit with L: near a full
 *    bucket a rounded reset only bounds ρ, and a lane paced below ρ sees little
 *    else. When the resets in memory stop differing (steady state), the fit
 *    without L keeps its previous answer.
 *  - window (fixed window: counts down, jumps back to the limit at reset): the
 *    absolute reset instant (now + r) stays put while R falls.
 *
 * The shape is decided from evidence between consecutive observations, using
 * the absolute reset instant a = now + r (noise tolerance q = time_noise_ms):
 *  - continuous: R rose before the previous reset instant (refill), or a moved
 *    later by more than q while R fell (every unit consumed in a bucket moves
 *    its "full again" instant by 1/ρ);
 *  - window: at least 2q of time passed, R fell, and a moved by at most q.
 * Until then the shape is unknown.
 *
 * Pacing, the most restrictive of:
 *  1. hold: the remaining estimate (R minus what this lane dispatched since the
 *     observed request was sent) is below the cost: nothing passes until reset
 *     (for a continuous budget with ρ known: until the refill since the
 *     observation covers the cost; a reset says when the budget is full, not
 *     when the next unit is there);
 *  2. spread: the remaining estimate is below proactive_threshold × capacity
 *     (L, else the inferred C, else the largest R seen): the remaining units are
 *     spread evenly until reset;
 *  3. rate: for a budget known to be continuous, units are spaced at margin × ρ
 *     (e.g. 0.95 ρ), so the budget stays full in steady state and clients never
 *     see remaining 0. A window budget, or an unknown shape, is never rate-paced:
 *     a single observation of a fixed window would suggest a uselessly slow ρ.
 * Once the reset instant has passed, 1 and 2 no longer apply until the next
 * observation: the budget is full again in both shapes.
 *
 * 429s correct the inference (learned_on_capacity_signal): each one multiplies
 * the paced rate by LEARNED_PENALTY (down to LEARNED_PENALTY_FLOOR × margin × ρ),
 * for the case the headers mislead (another client spends the same key, or the
 * server enforces over a shorter window); each later observation that shows the
 * budget above the threshold takes back LEARNED_RECOVERY of the distance to 1.
 *
 * Noise. learned_charge hands out a mark (the cumulative cost dispatched so far)
 * that the caller keeps with the request and passes back with the observation
 * its answer carries. An observation whose mark is older than the newest
 * accepted is out of order (it describes the budget before requests already
 * reported) and is ignored. What was dispatched after the mark (the requests in
 * flight, which the answer can not count yet) is subtracted from the reported
 * remaining (1.): exact, and O(1) memory per budget.
 * Remaining values that are all multiples of 1000 are taken as rounded to the
 * thousand. */
#ifndef PACERD_LEARNED_H
#define PACERD_LEARNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/gcra.h"

#define LEARNED_PENALTY 0.8         /* paced rate multiplier per capacity signal */
#define LEARNED_PENALTY_HINTED 0.95 /* ... for one that said when (retry-after, a reset) */
#define LEARNED_PENALTY_FLOOR 0.25  /* the correction never goes below this */
#define LEARNED_RECOVERY 0.05       /* share of the gap to 1 recovered per healthy answer */
#define LEARNED_SHORT_MIN_OBS 2     /* observations before a limit may be found too large */
#define LEARNED_SHORT_SHARE 0.5     /* ... when remaining and the free fit stay below this × L */
#define LEARNED_BLIND_MAX 4         /* requests in flight before any answer reported a budget */
#define LEARNED_BLIND_WAIT_MS 1000  /* ... the longest the others wait for that answer */

enum learned_shape { LEARNED_UNKNOWN, LEARNED_CONTINUOUS, LEARNED_WINDOW };

struct learned_params {
	double margin;              /* pace at margin × ρ; in (0, 1]; default 0.95 */
	double proactive_threshold; /* spread below threshold × capacity; default 0.10 */
	double time_noise_ms;       /* resolution of resets, ms; default 1000 (whole
	                             * seconds: Anthropic, Azure, IETF); ~50 suits
	                             * OpenAI's millisecond durations */
	double forget;              /* weight kept by older observations, [0, 1); 0.8 */
};

/* One observation of a budget, as read from one response's headers. */
struct learned_obs {
	double mark;      /* learned_charge's answer for the request that carried it */
	double remaining; /* >= 0 */
	double reset_ms;  /* >= 0: time until reset, from the now_ms of learned_observe */
	double limit;     /* > 0 when sent, 0 when absent */
};

/* For /status and the limit_learned log line. */
struct learned_view {
	enum learned_shape shape;
	double limit;          /* as last sent, 0: never sent */
	double capacity;       /* L, else inferred C, else 0 */
	double rate_per_min;   /* inferred ρ per minute, 0: unknown */
	double pace_per_min;   /* the rate paced at (margin × ρ), 0: not rate-paced */
	double remaining;      /* local estimate now, -1: no information */
	int64_t reset_in_ms;   /* until the observed reset, 0: passed or unknown */
	unsigned observations; /* accepted so far */
};

struct learned {
	struct learned_params p;
	enum learned_shape shape;
	unsigned n_obs;
	/* the newest accepted observation */
	double obs_mark;
	int64_t obs_at_ms, reset_at_ms;
	double obs_remaining;
	double limit, max_remaining;
	bool thousands; /* every remaining seen so far is a multiple of 1000 */
	/* forgetting least squares: through (0, L) when L is known, free otherwise */
	double s_w, s_r, s_R, s_RR, s_rR; /* free fit sums over (r, R) */
	double s_dr, s_r2;                /* anchored fit: Σ (L − R)·r, Σ r² */
	double rho;                       /* units per ms, 0: unknown */
	bool short_window; /* L is a per-window figure over a smaller bucket (learned.c) */
	double capacity;   /* inferred C, 0: unknown */
	double correction; /* from 429s, in [LEARNED_PENALTY_FLOOR, 1] */
	/* dispatches, for the in-flight correction and the spreading */
	double cum_cost; /* total cost dispatched: the marks */
	int64_t last_pass_ms;
	bool passed;
	struct gcra pace; /* rate pacing at margin × ρ, disabled when not trusted */
};

/* Fills the defaults listed in struct learned_params. */
void learned_params_default(struct learned_params *p);

/* Sets up an empty budget; p NULL means the defaults. Out-of-range parameters are
 * replaced by their defaults. */
void learned_init(struct learned *l, const struct learned_params *p);

/* Takes an observation made at now_ms. Returns -1 when it is ignored (out of
 * order, or not finite / negative values), 1 when it changed what is learned
 * (shape, limit, or capacity or rate by more than 5 %: worth a limit_learned log
 * line), 0 otherwise. */
int learned_observe(struct learned *l, int64_t now_ms, const struct learned_obs *o);

/* Earliest instant >= now_ms at which `cost` units (1 for a request, the token
 * estimate for a token budget) may pass. With no observation yet: now_ms. */
int64_t learned_ready_at(const struct learned *l, int64_t now_ms, double cost);

/* Until when the budget holds `cost` units because the remaining estimate is
 * below it (rule 1): the reset, or for a budget known to refill continuously
 * the instant the refill covers the cost; now_ms when it does not hold. The end
 * of a long hold is where the caller sends one request first. */
int64_t learned_held_until(const struct learned *l, int64_t now_ms, double cost);

/* Records that `cost` units were dispatched at now_ms. Returns the mark to pass
 * back in the learned_obs of that request's answer (non-decreasing). */
double learned_charge(struct learned *l, int64_t now_ms, double cost);

/* Before the first answer. A lane with no plan that has had no answer yet
 * knows nothing of its budget, and a burst sent blind meets whatever bucket is
 * there: 20 clients starting at once against a bucket of 5 (a per-minute limit
 * enforced over a shorter window, PROVIDERS.md §10) were 15 refusals, every
 * one before the first answer came back. So at most LEARNED_BLIND_MAX requests
 * go blind; the rest wait for the first answer's headers, which say what is
 * left (learned_observe takes over) or that nothing is reported (the lane is
 * open), and never longer than LEARNED_BLIND_WAIT_MS after the last blind
 * dispatch (a non-streamed answer's headers come with its whole body).
 * Returns the earliest instant >= now_ms the next request may go, given the
 * requests in flight (all blind until an answer) and the last dispatch. */
int64_t learned_blind_ready_at(size_t in_flight, int64_t last_dispatch_ms, int64_t now_ms);

/* A capacity signal (429, 503, 529) reached this lane at now_ms: the paced rate
 * is multiplied by `penalty` (LEARNED_PENALTY; LEARNED_PENALTY_HINTED for a
 * refusal that said when to come back: mostly information about when, but still
 * proof that the pace was a little too fast). Call it once per signal that
 * counts (e.g. when aimd_on_capacity_signal returned true), not once per 429 of
 * a burst. */
void learned_on_capacity_signal(struct learned *l, int64_t now_ms, double penalty);

/* A refusal (not headers) told the budget's limit per window (Gemini's
 * quotaValue per its quotaId's minute) when nothing had been observed: the
 * budget is taken as a continuous bucket of `limit` refilled at
 * limit / window_ms, empty at now_ms with every unit charged so far counted
 * (the requests still in flight were sent into the same empty budget: they
 * are refused too, or were counted before it). Returns false, changing
 * nothing, when values are not positive and finite or the budget has
 * observations already (headers know better). */
bool learned_told(struct learned *l, int64_t now_ms, double limit, double window_ms);

/* What is learned, as seen at now_ms. */
void learned_view(const struct learned *l, int64_t now_ms, struct learned_view *v);

/* One readable line for /status or a log, e.g.
 * "continuous capacity=1000 rate=1000.0/min pace=950.0/min remaining=812 reset_in=11280ms".
 * Returns what snprintf returns. */
int learned_summary(const struct learned *l, int64_t now_ms, char *buf, size_t len);

/* "unknown", "continuous" or "window". */
const char *learned_shape_name(enum learned_shape s);

#endif
