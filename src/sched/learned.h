/* SPDX-License-Identifier: Apache-2.0 */
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
 * thousand.
 *
 * Counted budgets. Many answers carry a remaining count and no reset (Azure's
 * usual x-ratelimit-remaining-requests / -tokens, Mistral, Together's
 * x-tokenlimit-*, Fireworks), or a reset in whole seconds (Azure: "1" for
 * anything from 1 ms to 1 s), which bounds the instant the budget is full and
 * says little more. Such a budget is learned from its successive counts
 * instead, for good (the first such observation decides). While a bucket is
 * not full, its level is the count R after the request, and
 *     Y = R + (what this lane had sent up to that request) = Y0 + ρ·s,
 * s the instant the request was sent: Y grows at the refill rate. Refill is
 * lost only while the bucket is full, which shows: if R + (what was sent
 * since the previous observation) + q reaches the highest level seen C
 * (q the rounding of R), the bucket may have been full in between
 * ("clipped"). From pairs of observations a, j (Y is known to within q,
 * exactly when the request found the bucket full and was alone on the wire):
 *   - ρ > (Yj − Ya − qa) / (sj − sa) always (the refill was at least that);
 *   - ρ < (Yj + q − Ya) / (sj − sa) when no clip lay between them;
 *   - ρ ≥ (C − R − q) / (reset + the answer's age), from a coarse reset.
 * Pairs are taken from the start of the current run of unclipped answers
 * (long spans: the rounding matters less and less) and from consecutive ones;
 * the bounds fade over LEARNED_COUNT_MEMORY_MS. The estimate is the middle of
 * the bounds once they are within a factor 2, else the refill seen over
 * unclipped stretches (Σ ΔY / Σ Δs, whose rounding errors cancel along a run),
 * kept within the bounds; else limit / stated window (Mistral "-minute").
 * Noise: an answer whose request left within LEARNED_ORDER_GAP_MS of another
 * may have been counted in the other order, so its bounds allow for one more
 * request's cost; a request the upstream refused was not charged, so its cost
 * is taken back from Y (learned_obs.refused). Answers older than the newest
 * are ignored, as above; the first answer only anchors.
 *
 * Pacing a counted budget: a shadow bucket forecasts the level. It refills at
 * ρ' = margin × ρ up to C, each dispatch takes its cost, and each answer
 * corrects it by the difference between the level the answer shows (R, or
 * more when the previous answer's level plus the refill at the lower bound
 * since, less what was sent, says so: a count rounds down) and what the
 * shadow had right after that request's own charge (learned_shadow_level):
 * the dispatches since are in both, so a refused request's cost comes back
 * and more requests in flight than the bucket holds are no trouble. It is full
 * again (but for what was sent since) at a coarse reset's instant, and never
 * below min(C, ρ'·(t − the last dispatch)) (the bucket held at least nothing
 * after it). A request of cost c goes when the level is at least c +
 * proactive_threshold × C (the threshold once ρ is known). Every answer
 * corrects the forecast, so ρ matters over one round trip only: errors do
 * not pile up.
 * Until ρ is known and nothing says when units come back, one request goes
 * every probe interval (LEARNED_PROBE_MS, doubled while the counts show no
 * refill). A request the forecast held back that still found the bucket full
 * says the pace is below the refill, and nothing more (full buckets lose
 * refill): the estimate's low end is raised to LEARNED_PROBE_UP × ρ, once a
 * round trip (a guess, kept apart from the proven bound), until the bucket
 * drains and the counts bound ρ from above. */
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
#define LEARNED_ORDER_GAP_MS 20     /* counted: a request alone on the wire this long either side */
#define LEARNED_COUNT_MEMORY_MS 30000 /* counted: how long evidence of the rate counts */
#define LEARNED_SPAN_MIN_MS 50        /* counted: shortest pair of answers bounding the rate */
#define LEARNED_BOUNDS_SPREAD 2       /* counted: bounds this close decide the rate alone */
#define LEARNED_RUN_MAX_MS 30000      /* counted: a run of answers longer than this starts over */
#define LEARNED_PROBE_MS 250          /* counted: first probe interval while the rate is unknown */
#define LEARNED_PROBE_MAX_MS 30000
#define LEARNED_PROBE_UP 1.25    /* counted: a held request that found the bucket full */
#define LEARNED_UNREPORTED_MAX 3 /* counted: answers in a row without it, and it is forgotten */

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
	/* For counted budgets (see above); zero for a precise (remaining, reset) pair: */
	bool no_reset;     /* the answer had no reset for this budget (reset_ms ignored) */
	bool coarse_reset; /* reset_ms is whole seconds: full by then, up to 1 s sooner */
	double sent_ms;    /* when the request that carried it was dispatched (now_ms's clock) */
	double cost;       /* what that request was charged here (learned_charge's cost) */
	bool refused;      /* the upstream refused it (429, 503, 529): it was not charged */
	double alone_ms;   /* time between its dispatch and the nearest other one
	                    * (either side; 0: unknown) */
	double window_ms;  /* the window the header names for the limit, 0: none */
	bool has_level_at_send; /* level_at_send is learned_shadow_level after that */
	double level_at_send;   /* request's charge (a number, not NAN) */
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
	bool counted;          /* learned from successive counts (no precise reset) */
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
	/* counted budgets: capacity is C (the highest level seen), rho ρ,
	 * reset_at_ms a coarse reset's instant (0: none) */
	bool counted;
	double refunded;             /* cost of the requests the upstream refused */
	double obs_net, obs_sent_ms; /* the newest answer's mark net of refunds; its dispatch */
	double obs_level;            /* ... the level it leaves, at least (>= its remaining) */
	double sh_level, sh_at_ms;   /* the forecast: the level after its last event, when */
	bool sh_valid;
	double sh_shift;           /* the corrections made to it so far */
	double probe_up_ms;        /* the last upward probe: answers of requests sent after */
	unsigned unreported;       /* newer answers in a row that did not report it */
	double run_sent_ms, run_y; /* the first answer of the current unclipped run */
	double run_q, run_nu;      /* ... its rounding and its order allowance */
	bool run_open, run_summed; /* ... and whether the sums have a step of it */
	double lo, hi;             /* bounds on ρ, units per ms (0: none) */
	double probe_lo;           /* ... and where an upward probe put the low end */
	int64_t bounds_at_ms;      /* when they last faded */
	double s_dy, s_dt;         /* fading sums over unclipped increments */
	double prior;              /* limit / stated window, 0: none */
	double probe_ms;           /* wait before a probe while ρ is unknown */
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

/* An answer to the request of `mark` did not report this budget. A counted
 * budget has no reset to bound what it holds: once LEARNED_UNREPORTED_MAX
 * answers newer than its last count in a row leave it out (an endpoint that
 * does not report it, or a provider that stopped), it is forgotten, as if it
 * had never been reported (what was sent stays counted); the next count
 * teaches it again. */
void learned_unreported(struct learned *l, double mark);

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

/* A counted budget's forecast of its level right after the last
 * learned_charge, less the corrections made to it so far (NAN for other
 * budgets): the caller keeps it with the request
 * and passes it back as learned_obs.level_at_send (when a number), so that the
 * answer corrects the forecast by what it got wrong then, not by what was
 * sent since. */
double learned_shadow_level(const struct learned *l);

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

/* ---- across a restart (sched_lane_export, sched_lane_import) ----
 * A struct learned holds no pointer: it is saved as it is, its instants moved
 * from one clock to another by learned_shift (from the monotonic clock to the
 * wall clock to save it, and back in the next process), so that it behaves
 * as if the time between had passed without an answer. What it counted
 * (cum_cost and the marks) stays in its own units: the lane that takes it up
 * counts on from cum_cost. A field added to struct learned is added to
 * sched/state_file.c's table too. */

/* Moves every instant of l by delta_ms (the "none" of a counted budget's
 * reset, 0, stays none; a gate never used stays so). */
void learned_shift(struct learned *l, double delta_ms);

/* What is left of l at now_ms (the clock of its instants) after time passed
 * without an answer: a reset that has passed is forgotten (the budget is full
 * again: its count and reset no longer hold anything back), a rate learned
 * is kept. False when nothing worth keeping is left: a budget that knew no
 * rate, only a count and a reset that has passed. */
bool learned_age(struct learned *l, int64_t now_ms);

/* What is learned, as seen at now_ms. */
void learned_view(const struct learned *l, int64_t now_ms, struct learned_view *v);

/* One readable line for /status or a log, e.g.
 * "continuous capacity=1000 rate=1000.0/min pace=950.0/min remaining=812 reset_in=11280ms"
 * (a counted budget's line ends " from=counts"). Returns what snprintf returns. */
int learned_summary(const struct learned *l, int64_t now_ms, char *buf, size_t len);

/* "unknown", "continuous" or "window". */
const char *learned_shape_name(enum learned_shape s);

#endif
