/* SPDX-License-Identifier: Apache-2.0 */
/* margin — what a strict gate keeps beyond its interval, learned from the
 * path (issue 30). Pure: every instant is an argument.
 *
 * A gate without slack (burst 1, min_ms_per_request) spaces two sends by its
 * interval T and a margin of it (gcra_sent): the network and the provider's
 * own receiving move each arrival by a little, differently for each request,
 * and a bucket of one refuses an arrival that comes even that much early.
 * How much a path moves arrivals is not known beforehand and differs (a
 * local mock: nothing; a path over a network: a few ms), so the margin is
 * learned per lane from what the provider answers:
 *
 *  - It starts at MARGIN_MIN (1 %, the fixed margin before issue 30).
 *  - A request sent at the gate's own spacing (the gate held it back) and
 *    refused for capacity says that the path moved an arrival by more than
 *    the margin: it is multiplied by MARGIN_WIDEN, up to MARGIN_MAX. The
 *    refusals of requests sent before that widening say nothing new (a burst
 *    of them is one signal, as for AIMD). Nor, after a wider margin adopted
 *    from the store, do those of requests sent within MARGIN_SETTLE_MS of
 *    it: the replicas sharing the lane learn a widening at their next
 *    decision, and until then each keeps the spacing it had (three replicas
 *    at 600 RPM: one widened, another adopted it and met a refusal 200 ms
 *    later, spaced by a third that had not heard yet, and took 6.25 % to
 *    10 %). A replica's own widening applies to its next send: no wait.
 *  - MARGIN_NARROW_AFTER_MS without such a refusal, with at least
 *    MARGIN_NARROW_OKS successes at the spacing, narrow it by MARGIN_NARROW,
 *    never below MARGIN_MIN; the clock starts again at every change. Slowly:
 *    at equilibrium a steady lane meets one refusal per ln 2.5 / ln(1/0.9)
 *    ≈ 8.7 narrowings, about one in three minutes, and between them sends
 *    at the spacing the path needs. (The period sets how often a lane
 *    probes, not how wide it runs on average; 10 s met a second refusal
 *    within a 300-request run about once in two.) Against arrivals moved
 *    by up to ±3 ms (a bucket of one at 600 RPM), simulated: 2.3 refusals
 *    in 300 requests (1 % fixed: a third refused) at 94.6 % of the rate;
 *    ×2 took 3.0 at 93.7 % (1, 2, 4, 8 % where 1, 2.5, 6.25 % suffice).
 *    No fixed spacing does both ≤ 1 % refused and ≥ 95 % of the rate
 *    there: two arrivals' jitters differ by up to 6 ms, and a margin of
 *    5.3 ms still sees 0.8 % of them closer than T.
 *
 * Time, not a count of successes, narrows it, so that replicas sharing a
 * lane through the store (each sees a third of its successes) narrow it at
 * the pace one would; each replica's change is written to the store, whose
 * value every replica adopts (margin_adopt). */
#ifndef PACERD_MARGIN_H
#define PACERD_MARGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/gcra.h"

#define MARGIN_MIN GCRA_STRICT_MARGIN
#define MARGIN_MAX 0.10
#define MARGIN_WIDEN 2.5
#define MARGIN_NARROW 0.9
#define MARGIN_NARROW_AFTER_MS 20000
#define MARGIN_NARROW_OKS 20
#define MARGIN_SETTLE_MS 1000

struct margin {
	double frac;          /* of the interval, in [MARGIN_MIN, MARGIN_MAX] */
	int64_t since_ms;     /* the last change (or start): narrowing counts from here */
	int64_t adopted_ms;   /* the last wider margin adopted from the store */
	unsigned oks;         /* successes at the spacing since then */
	uint64_t widened_seq; /* requests dispatched up to this one came before the last widening */
};

void margin_init(struct margin *m, int64_t now_ms);

/* A request dispatched as dispatch_seq at dispatched_ms, at the gate's
 * spacing, was refused for capacity; last_seq: the lane's newest dispatch.
 * True when the margin widened. */
bool margin_refused(struct margin *m, uint64_t dispatch_seq, int64_t dispatched_ms,
                    uint64_t last_seq, int64_t now_ms);
/* A request at the gate's spacing succeeded. True when the margin narrowed. */
bool margin_succeeded(struct margin *m, int64_t now_ms);
/* The lane's margin as the store holds it (another replica widened or
 * narrowed it): taken as this replica's own, its clock started again; a
 * wider one is a widening here too (the refusals of requests up to
 * last_seq, sent before it, say nothing new). Values outside [MARGIN_MIN,
 * MARGIN_MAX] are clamped, not finite ones ignored. True when it changed. */
bool margin_adopt(struct margin *m, double frac, uint64_t last_seq, int64_t now_ms);

#endif
