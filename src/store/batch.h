/* SPDX-License-Identifier: Apache-2.0 */
/* batch — how many permits one decision in the shared store takes for a busy
 * lane (pure).
 *
 * One decision per request costs a Redis round trip each: on a busy lane the
 * round trips, not the limit, set the pace. A decision may take k permits at
 * once instead (every gate charged k times at the decision's instant, the
 * token gates k times the head request's estimate), which the lane's waiting
 * requests use as they could have used k single "go"s.
 *
 * k = min(room, max_k, half the smallest burst of the lane's gates, ceil(4 ×
 * rtt / T)) with T the shortest interval of its request gates (a gate with a
 * burst under 4 does not batch): a lane that sends
 * fewer than one request per quarter round trip (idle, slow, or limited by a
 * gate measured in seconds) keeps one decision per request. Never batched:
 * lanes with a gate without burst (burst 1, min_ms_per_request: their exact
 * spacing is decided per request, store/shared.c), lanes with
 * max_concurrent_global (a lease per request) and lanes without a request gate.
 *
 * The bound. A gate lets k requests go at one instant only when its burst
 * holds k (k <= burst / 2): a batch draws on the burst the plan allows, and every
 * request of it leaves at or after the instant it was charged at, so no
 * replica and no fleet passes a gate's limit. What changes is the order
 * within the schedule: the last request of a batch may leave up to (k − 1) ×
 * T before the instant a gate at its full rate, asked once per request, would
 * have given it; by the formula above that is less than 4 round trips (< 2 ms
 * on a loopback Redis, 4 × the measured bound in general). */
#ifndef PACERD_STORE_BATCH_H
#define PACERD_STORE_BATCH_H

/* room: requests that could leave now (free slots, waiting requests, minus
 * permits held or asked); interval_ms: the shortest interval of the lane's
 * request gates (<= 0 or not finite: none); min_burst: the smallest burst
 * of its gates in requests (for a token gate: its tolerance over the head
 * request's cost); rtt_ms: the bound on a decision's round trip. A batch
 * waits until all its permits fit at once: half the burst at most, so that a
 * waiting batch never needs the gate's whole tolerance. */
unsigned batch_size(unsigned room, unsigned max_k, double interval_ms, double min_burst,
                    double rtt_ms);

#endif
