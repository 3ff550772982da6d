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
 * learned per lane from what the provider answers (docs/pacing.md, "A strict
 * gate's margin", works the numbers through):
 *
 *  - It starts at MARGIN_MIN (1 %, the fixed margin before issue 30).
 *  - A request sent at the gate's own spacing (the gate held it back) and
 *    refused for capacity says that the path moved an arrival by more than
 *    the margin. How much to widen depends on what the margin had shown:
 *    one that had not held MARGIN_HELD_INTERVALS intervals since it was last
 *    widened (or since the start) is far from what the path needs, and is
 *    multiplied by MARGIN_WIDEN (2.5: 1 → 2.5 → 6.25 %); one that had held
 *    is near it, the refusal one from the path's rare tail, and is nudged by
 *    MARGIN_NUDGE (×1.15), up to MARGIN_MAX. The refusals of requests sent
 *    before that widening say nothing new (a burst of them is one signal, as
 *    for AIMD). Nor, with shared gates, do those of requests sent within
 *    MARGIN_SETTLE_INTERVALS (2) intervals of a widening, adopted from the
 *    store or this replica's own (margin_settle): each send's push keeps
 *    the margin its sender has then (store/shared.c), but a request is
 *    spaced by the push before it, which a replica whose "go" was granted
 *    before the widening reached the store made with the old one; within
 *    two intervals every sender has heard. (Three replicas at 600 RPM: a
 *    refusal 200 ms after a widening to 6.25 %, spaced by a replica that had
 *    not heard, took the margin to 10 %; a second's settling, as before,
 *    let refusals at 2.5 % go unanswered for ten intervals.) A replica's
 *    own widening applies to its next send when its gates are its own.
 *  - MARGIN_NARROW_INTERVALS intervals without a refusal since the last
 *    change, with at least MARGIN_NARROW_OKS successes at the spacing,
 *    narrow it by MARGIN_NARROW, never below MARGIN_MIN. The first narrowing
 *    after a coarse widening comes after MARGIN_RECHECK_INTERVALS: that step
 *    overshoots by up to ×2.5, and a margin 10 % narrower is still wider than
 *    what the refusal showed.
 *
 * Where it settles: each refusal at the edge adds ln MARGIN_NUDGE to the
 * logarithm of the margin, each narrowing takes ln(1 / MARGIN_NARROW) off,
 * one per MARGIN_NARROW_INTERVALS requests; they balance where a request is
 * refused with probability ln(1/0.9) / (300 · ln 1.15) = 0.25 %, one in 400.
 * Against arrivals moved by up to ±3 ms (a bucket of one at 600 RPM) that is
 * a margin of about 5.2 % (95.1 % of the rate); no spacing does better than
 * that trade (docs/pacing.md).
 *
 * Intervals are counted in time (T × (1 + margin) each, the lane's pace at
 * its gate), not in successes, so that replicas sharing a lane through the
 * store (each sees a third of its requests) judge and narrow it at the pace
 * one would; each replica's change is written to the store, whose value
 * every replica adopts (margin_adopt). */
#ifndef PACERD_MARGIN_H
#define PACERD_MARGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/gcra.h"

#define MARGIN_MIN GCRA_STRICT_MARGIN
#define MARGIN_MAX 0.10
#define MARGIN_WIDEN 2.5
#define MARGIN_NUDGE 1.15
#define MARGIN_HELD_INTERVALS 50
#define MARGIN_NARROW 0.9
#define MARGIN_NARROW_INTERVALS 300
#define MARGIN_RECHECK_INTERVALS 50
#define MARGIN_NARROW_OKS 20
#define MARGIN_SETTLE_INTERVALS 2

struct margin {
	double frac;          /* of the interval, in [MARGIN_MIN, MARGIN_MAX] */
	int64_t since_ms;     /* the last change (or start): narrowing counts from here */
	int64_t widened_ms;   /* the last widening (or start): whether it has held since */
	int64_t adopted_ms;   /* the last wider margin adopted from the store */
	unsigned oks;         /* successes at the spacing since the last change */
	bool coarse;          /* the last change was a coarse widening (MARGIN_WIDEN) */
	uint64_t widened_seq; /* requests dispatched up to this one came before the last widening */
};

void margin_init(struct margin *m, int64_t now_ms);

/* A request dispatched as dispatch_seq at dispatched_ms, at the gate's
 * spacing, was refused for capacity; last_seq: the lane's newest dispatch;
 * interval_ms: the strict gate's T (> 0; else every margin counts as held).
 * True when the margin widened. */
bool margin_refused(struct margin *m, uint64_t dispatch_seq, int64_t dispatched_ms,
                    uint64_t last_seq, double interval_ms, int64_t now_ms);
/* A request at the gate's spacing succeeded (interval_ms as above). True
 * when the margin narrowed. */
bool margin_succeeded(struct margin *m, double interval_ms, int64_t now_ms);
/* The lane's gates are shared through the store: its next sends are spaced
 * by what each replica's last push kept, and the others learn this
 * replica's widening at now_ms only at their next decision; so its own
 * widening settles as an adopted one does (MARGIN_SETTLE_INTERVALS). */
void margin_settle(struct margin *m, int64_t now_ms);
/* The lane's margin as the store holds it (another replica widened or
 * narrowed it): taken as this replica's own, its clock started again; a
 * wider one is a widening here too (the refusals of requests up to
 * last_seq, sent before it, say nothing new). Values outside [MARGIN_MIN,
 * MARGIN_MAX] are clamped, not finite ones ignored. True when it changed. */
bool margin_adopt(struct margin *m, double frac, uint64_t last_seq, int64_t now_ms);

#endif
