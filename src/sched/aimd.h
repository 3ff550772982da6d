/* SPDX-License-Identifier: Apache-2.0 */
/* aimd — adaptive concurrency and adaptive dispatch delay (DESIGN §3). Pure: no
 * I/O, no clock; instants are int64 ms passed in by the caller.
 *
 * Concurrency (struct aimd): additive increase, multiplicative decrease, as TCP
 * congestion avoidance. Each success that completes while the lane was saturated
 * (in flight had reached the limit) adds 1/limit, so a full round of successes
 * adds 1. A capacity signal (429, 503, 529, remaining 0) multiplies the limit by
 * decrease_factor, at most once per round-trip time: the signals one overload
 * produces all come back within about one RTT of each other, so ten 429s from one
 * burst are one signal. The RTT is an EWMA of the latencies the caller reports,
 * clamped to [AIMD_RTT_MIN_MS, AIMD_RTT_MAX_MS].
 *
 * Open until the first capacity signal: a lane that has seen none lets
 * everything through up to max (a proxy that promises zero configuration must
 * never be slower than no proxy: 20 streams through a fresh lane do not wait
 * behind a starting limit of 4). The first signal sets the limit from what was
 * in flight when it came, × decrease_factor, and AIMD runs from there; a lane
 * idle long enough (aimd_reopen, the caller's decision) is open again.
 * Open may be starting (aimd_start): the caller's slow start (slow_start.h)
 * holds the open limit at a window that doubles per round trip up to max, on
 * a lane whose provider says nothing of its room until it refuses (issue 30).
 *
 * Two traps avoided by construction: nothing here depends on a retry-after, so a
 * long server hint (a daily cap, an hour's retry-after) cannot freeze the limit:
 * increases are never suspended, and the decrease lockout lasts one (clamped) RTT
 * after the signal, whatever the hint said. Growth needs no time to pass either:
 * when the lane comes back after the hold, successes raise the limit at once.
 *
 * Dispatch delay (struct aimd_delay): the spacing between a lane's dispatches,
 * the rate control of a lane without configured or learned limits (concurrency
 * cannot slow a lane below one request per round trip). Rate AIMD, as TCP's
 * congestion avoidance in requests per second: none until the first capacity
 * error, which sets the spacing from the successes of the last second (so the
 * first cut starts from what the upstream was carrying, × 1 / multiplier);
 * each later capacity error multiplies the spacing by backoff_multiplier (1.5,
 * the rate × 0.67); each success adds recovery_rps / rate to the rate, so a
 * second of successes adds recovery_rps (3) requests per second, whatever the
 * rate. Clamped to [min_ms, max_ms]; a spacing under 1 ms opens it again.
 * (Constant steps in milliseconds were wrong at both ends: −50 ms per success
 * took 5 req/s to 20 req/s in two successes, and 20 req/s to 200 in one.) */
#ifndef PACERD_AIMD_H
#define PACERD_AIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct plan_conf; /* core/config.h */

#define AIMD_RTT_INITIAL_MS 1000.0 /* RTT assumed before any latency is reported */
#define AIMD_RTT_MIN_MS 50.0       /* a 429 answered in 2 ms still spans a burst */
#define AIMD_RTT_MAX_MS 30000.0    /* bounds the decrease lockout */
#define AIMD_RTT_ALPHA 0.2         /* weight of a new latency sample in the EWMA */
#define AIMD_DELAY_START_MS 100.0  /* first delay after a capacity error from 0 */

struct aimd {
	bool adaptive;          /* false: the limit stays at max */
	bool open;              /* no capacity signal yet (or idle since): the limit is max */
	bool decreased;         /* whether last_decrease_ms is meaningful */
	bool starting;          /* open, at a slow start's window (limit) below max */
	double limit;           /* fractional; aimd_limit() rounds down */
	unsigned min, max;      /* 1 <= min <= max */
	double decrease_factor; /* in (0, 1) */
	double rtt_ms;          /* EWMA of reported latencies, clamped */
	int64_t last_decrease_ms;
};

/* Sets up an open limit (max until the first capacity signal), bounded by
 * [min, max]. Out-of-range arguments are corrected (min >= 1, max >= min,
 * factor outside (0, 1) taken as 0.5). When adaptive is false the limit is
 * fixed at max. */
void aimd_init(struct aimd *a, bool adaptive, unsigned min, unsigned max, double decrease_factor);

/* aimd_init from a plan: concurrency.{adaptive,min,decrease_factor} and
 * max_concurrent as the hard ceiling. */
void aimd_init_plan(struct aimd *a, const struct plan_conf *plan);

/* A request succeeded at now_ms. latency_ms (> 0; <= 0: none) feeds the RTT
 * estimate. saturated: in flight had reached the limit when it was dispatched
 * (or while it ran); only then does the limit grow, by 1 / limit, because
 * successes below the limit say nothing about whether more would succeed. */
void aimd_on_success(struct aimd *a, int64_t now_ms, double latency_ms, bool saturated);

/* Reports a round-trip latency that is not a success (an error answer, say). */
void aimd_observe_rtt(struct aimd *a, double latency_ms);

/* A capacity signal at now_ms, with in_flight requests in flight when it came
 * (the one that carried it included). An open limit closes at in_flight ×
 * decrease_factor; a closed one is multiplied by decrease_factor. Returns true
 * when it decreased the limit, false when it was absorbed because a decrease
 * already happened less than one RTT ago (or the limit is not adaptive). */
bool aimd_on_capacity_signal(struct aimd *a, int64_t now_ms, size_t in_flight);

/* The lane was idle long enough for what the signals taught to be stale: open
 * again (no effect when not adaptive). */
void aimd_reopen(struct aimd *a);

/* While open: the limit is a slow start's window, `window` for now (within
 * [min, max]; at max it is simply open). No effect when closed or not
 * adaptive. */
void aimd_start(struct aimd *a, unsigned window);

/* The slow start's round trip allows `window`: the limit grows to it (never
 * shrinks), and once at max the lane is simply open. Returns whether it
 * grew. */
bool aimd_start_grow(struct aimd *a, unsigned window);

/* No slow start any more: open at max again (while open). */
void aimd_start_stop(struct aimd *a);

/* The current concurrency limit, an integer in [min, max]. */
unsigned aimd_limit(const struct aimd *a);

/* Changes the bounds (reload) keeping the current limit where it still fits. */
void aimd_reconfigure(struct aimd *a, const struct plan_conf *plan);

struct aimd_delay {
	bool adaptive;   /* false: the delay stays at min_ms */
	bool dispatched; /* whether last_dispatch_ms is meaningful */
	double delay_ms;
	double min_ms, max_ms;     /* 0 <= min_ms <= max_ms */
	double backoff_multiplier; /* >= 1 */
	double recovery_rps;       /* rate gained per second of successes */
	int64_t last_dispatch_ms;
	/* successes per second: this second's count and the last one's */
	int64_t win_start_ms;
	unsigned win_n, prev_n;
};

/* Sets up a dispatch delay at min_ms; arguments are corrected as in aimd_init
 * (max_ms >= min_ms, multiplier >= 1, recovery_rps >= 0). */
void aimd_delay_init(struct aimd_delay *d, bool adaptive, unsigned min_ms, unsigned max_ms,
                     double backoff_multiplier, double recovery_rps);

/* aimd_delay_init from the plan's dispatch_delay block. */
void aimd_delay_init_plan(struct aimd_delay *d, const struct plan_conf *plan);

/* A capacity error at now_ms that counts (one per signal, as for
 * concurrency): from no delay, the spacing of the last second's successes ×
 * backoff_multiplier (AIMD_DELAY_START_MS when there were none); else the
 * delay × backoff_multiplier; clamped to [min_ms, max_ms]. */
void aimd_delay_on_capacity(struct aimd_delay *d, int64_t now_ms);

/* A success at now_ms: the rate (1000 / delay) gains recovery_rps / rate. */
void aimd_delay_on_success(struct aimd_delay *d, int64_t now_ms);

/* Paces at rps requests per second from now on (rate_probe.h's level or
 * probe, in place of the additive increase), within [min_ms, max_ms]. */
void aimd_delay_converged(struct aimd_delay *d, double rps);

/* The current delay between dispatches, in whole ms (rounded up). */
int64_t aimd_delay_ms(const struct aimd_delay *d);

/* Earliest instant >= now_ms at which the next dispatch may happen. */
int64_t aimd_delay_ready_at(const struct aimd_delay *d, int64_t now_ms);

/* Records a dispatch at now_ms. */
void aimd_delay_charge(struct aimd_delay *d, int64_t now_ms);

/* What survives a restart (sched_lane_export): where the limit and the
 * spacing stood, and the RTT that times the decreases. */
struct aimd_saved {
	bool open;       /* no capacity signal since the lane opened */
	double limit;    /* the concurrency limit, fractional */
	double rtt_ms;   /* the RTT estimate */
	double delay_ms; /* the dispatch delay */
};
void aimd_save(const struct aimd *a, const struct aimd_delay *d, struct aimd_saved *out);
/* Takes the limit and the delay up where s left them, within a's and d's
 * bounds now (a plan may have changed meanwhile). A limit that is not
 * adaptive stays at its max; a delay that is not adaptive at its min_ms. */
void aimd_resume(struct aimd *a, struct aimd_delay *d, const struct aimd_saved *s);

#endif
