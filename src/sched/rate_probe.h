/* SPDX-License-Identifier: Apache-2.0 */
/* rate_probe — the pace of a lane that refusals alone teach, once they have
 * shown the rate its provider carries (issue 30; docs/pacing.md, "dispatch
 * delay"). Pure: no I/O, no clock; instants are int64 ms passed in by the
 * caller.
 *
 * A lane with no limit configured and no rate-limit headers is paced by the
 * dispatch delay's AIMD (aimd.h): cut at a refusal, +recovery_rps per second
 * of successes. Alone, that probes into the next refusal forever: against
 * 600 RPM enforced as a bucket of 10 it met one every ~1.5 s, 5 % of its
 * requests. This module remembers what the refusals said, holds near it,
 * and probes above it later and more gently the longer the limit stays put.
 *
 * What a refusal says. A bucket refuses when it is empty: between two
 * refusals it gave out what it refilled, and no more (what it refilled while
 * full is lost). So the successes of the requests sent between the two
 * refused ones, S over the time T between their dispatches, bound the
 * provider's rate from below: rate >= (S - 1) / T (the bucket held less than
 * one unit at the first). RATE_PROBE_SPAN_MIN_MS and _MIN_N keep short,
 * noisy spans out; a request still in flight at the second refusal is left
 * out of S (its answer comes later), which only lowers the bound.
 *
 * Searching. Until the limit settles, the lane searches: the delay's AIMD,
 * untouched (this module says nothing). The limit is settled at a refusal
 * whose span gives a bound b when no change was ever seen (a fresh lane: its
 * first bound), or when b agrees with the previous span's (within
 * RATE_PROBE_MOVE, and a success either way for each: 2 req/s over a span of
 * a second) and the limit last changed RATE_PROBE_SETTLE_MS ago or more: a provider whose capacity
 * keeps moving (20, then 5, then 20 req/s, 10 s each) stays with the AIMD, whose steady probing
 * finds each rise in seconds, at the cost of the refusals it meets.
 *
 * Holding. From the refusal that settles it, the lane paces along a curve of
 * the time t since its last refusal, shaped as TCP CUBIC's window (RFC 9438),
 * with K = RATE_PROBE_K_MIN_MS << calm:
 *
 *   t < K    from RATE_PROBE_MARGIN × b up to b, fast at first and flat as
 *            it nears b (the bucket fills again below it);
 *   t >= K   above b, slowly at first: b × (1 + RATE_PROBE_STEP × ((t - K) / K)^3),
 *            RATE_PROBE_STEP over b at 2K, 8 × that at 3K.
 *
 * A refusal met past K whose span's bound agrees with b is the same limit met
 * again: b becomes that bound, the curve starts over, and calm + 1 doubles K
 * (up to RATE_PROBE_K_MAX_MS): a steady lane meets its limit later and more
 * gently each time (with K from 12 s: a refusal after ~30 s, then ~60 s …).
 *
 * A change of the limit sends the lane back to searching (calm 0): a refusal
 * before K (the limit fell below b), one whose span bounds nothing (refused
 * again at once), one whose bound moved by more than RATE_PROBE_MOVE, and
 * successes at a higher rate (those since the last refusal came at more than
 * (1 + RATE_PROBE_MOVE) × b: the limit rose). */
#ifndef PACERD_RATE_PROBE_H
#define PACERD_RATE_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#define RATE_PROBE_MARGIN 0.95      /* the curve starts this far below the bound */
#define RATE_PROBE_SPAN_MIN_MS 1000 /* a span between refusals that bounds the rate */
#define RATE_PROBE_SPAN_MIN_N 4     /* ... with at least this many successes */
#define RATE_PROBE_MOVE 0.2         /* bounds this far apart: the limit changed */
#define RATE_PROBE_SETTLE_MS 15000  /* after a change, the limit settled this long */
#define RATE_PROBE_K_MIN_MS 12000   /* the curve's K once settled */
#define RATE_PROBE_K_MAX_MS 64000   /* ... and at its calmest */
#define RATE_PROBE_STEP 0.1         /* above the bound at 2K */

struct rate_probe {
	float bound;        /* b, req/s; 0: searching */
	float last;         /* the last span's bound, req/s; 0: none yet */
	float from;         /* where the curve starts, req/s */
	uint8_t calm;       /* refusals that met the same limit since it settled */
	bool refused;       /* a refusal was seen: cut_ms means something */
	bool changed;       /* a change was seen: changed_ms means something */
	uint32_t n;         /* successes of requests sent after cut_ms */
	int64_t cut_ms;     /* the last counted refusal's request was sent then */
	int64_t at_ms;      /* the curve's origin (t = 0) */
	int64_t changed_ms; /* the limit last changed */
};

void rate_probe_init(struct rate_probe *p);

/* A refusal the lane reacts to (one per burst, as AIMD's), of a request
 * sent at sent_ms, at now_ms; search_rps: the rate the delay's AIMD cut to.
 * Returns the rate to pace at, req/s: search_rps while searching. */
double rate_probe_refused(struct rate_probe *p, int64_t now_ms, int64_t sent_ms, double search_rps);

/* A success at now_ms of a request sent at sent_ms. Returns the rate to
 * pace at, req/s, or 0 while searching (the delay's AIMD goes on). */
double rate_probe_succeeded(struct rate_probe *p, int64_t now_ms, int64_t sent_ms);

/* The curve at now_ms, req/s; 0 while searching. */
double rate_probe_rate(const struct rate_probe *p, int64_t now_ms);

/* The curve's K now, ms. */
int64_t rate_probe_k_ms(const struct rate_probe *p);

#endif
