/* SPDX-License-Identifier: Apache-2.0 */
/* limiter — a lane's gates behind one call per event: the local ones (the
 * scheduler's: sched.h) and, with store.kind: redis, the ones several
 * replicas share (shared.h). Each function is what one event means for both,
 * so that the lanes never call the two in pairs and cannot forget one.
 *
 * It is also the seam between them: the scheduler and the store never call
 * each other. What the store needs of a lane (its gates, the permits it
 * wants, what it learned) is read from sched.h here and handed over in the
 * store's terms (struct shared_gates, struct shared_ask); what the store
 * decided comes back as an event (shared_hooks.decided) that lanes.c hands
 * to limiter_decided.
 *
 * The shared side is NULL with store.kind: local (sh), or for a lane whose
 * keys do not fit in the store (sl); every call then touches the local gates
 * only. Used by the lanes module alone (lanes.c). */
#ifndef PACERD_LIMITER_H
#define PACERD_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/sched.h"

struct rlh_result;
struct shared;
struct shared_answer;
struct shared_lane;
struct shared_lease;
struct shared_grant;

/* Before the lane's dispatch loop: the store's state applied to the lane
 * (its gates decided there, here at the replicas' share, or refused),
 * permits no request needs given back, decisions asked for. *sl is made on
 * the first call (owner: what the store's decisions come back with). False:
 * the lane must refuse what waits (on_error: fail, store down). */
bool limiter_pump(struct shared *sh, struct sched_lane *lane, struct shared_lane **sl, void *owner,
                  int64_t now_ms);
/* A decision of the store came back: its permits go to the scheduler, and
 * the strict margin it carries (sched_margin_adopt). The caller then looks
 * at the quota the answer carries (not for a failure) and runs the lane. */
void limiter_decided(struct sched_lane *lane, const struct shared_answer *a);
/* The next request the gates let go now (its lease in *lease, the store's
 * "go" it used in *grant), or NULL. */
struct sched_item *limiter_next(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                                double now_ms, struct shared_lease **lease,
                                struct shared_grant *grant);
/* `it`, dispatched at dispatched_ms, left for the provider at sent_ms (ms with
 * their fraction): the local gates keep their distance from that instant, and
 * the shared gates are pushed by what its send took beyond its "go"
 * (shared_sent). */
void limiter_sent(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                  const struct sched_item *it, struct shared_grant *grant, double dispatched_ms,
                  double sent_ms);
/* Rate-limit headers of an answer (refused: a capacity status): learned by
 * the lane, shared with the replicas. True when what the lane knows changed. */
bool limiter_observe(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                     const struct sched_item *it, const struct rlh_result *h, bool refused,
                     int64_t now_ms);
/* The provider asked every request of the lane to wait hold_ms from fresh_ms
 * (a fresh clock: the answer may have arrived after the turn began). */
void limiter_hold(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                  int64_t hold_ms, int64_t fresh_ms);
/* An attempt ended: its lease goes back, its slot is released, the adaptive
 * limits and the strict margin learn the outcome (a margin changed is written
 * to the store). True when a success restored the lane's quota. */
bool limiter_complete(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                      struct sched_item *it, struct shared_lease **lease,
                      enum sched_outcome outcome, int64_t now_ms);
/* `it` was not written yet and the lane is held (sched_recall): taken back,
 * its lease given back. True when it must not leave now. */
bool limiter_recall(struct shared *sh, struct sched_lane *lane, struct sched_item *it,
                    struct shared_lease **lease, int64_t now_ms);
/* The quota is out, found here. True when the lane was not refusing yet. */
bool limiter_quota_out(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                       int64_t now_ms);
/* The real usage corrects the token gates (< 0: that part not reported). */
void limiter_tokens_used(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                         struct sched_item *it, double total, double input, double output,
                         int64_t now_ms);

#endif
