/* SPDX-License-Identifier: Apache-2.0 */
/* delay_bound — a bound on a delay that varies, from its recent samples: how
 * long, at most, one step between a decision in the shared store and its
 * request on the wire takes in this replica (shared.c keeps one per step and
 * adds them up: the margin a strict gate keeps after each of its sends).
 *
 * The estimator: a high quantile of the last DELAY_BOUND_N samples younger
 * than DELAY_BOUND_AGE_MS: their largest while there are fewer than
 * DELAY_BOUND_FORGIVE, else their second largest. A slower regime (a loaded
 * machine, a farther Redis) raises it with its first sample; a one-off stall
 * (the process descheduled once) is forgiven instead of costing every
 * decision of the next seconds its length; old samples age out, so it comes
 * back down when the replica is fast again. Pure: time is an argument. */
#ifndef PACERD_DELAY_BOUND_H
#define PACERD_DELAY_BOUND_H

#include <stdint.h>

#define DELAY_BOUND_N 32
#define DELAY_BOUND_AGE_MS 10000
#define DELAY_BOUND_FORGIVE 8

struct delay_bound {
	double ms[DELAY_BOUND_N];
	int64_t at_ms[DELAY_BOUND_N];
	unsigned next, n;
};

/* A delay of `ms` (negative or not finite: ignored) measured at now_ms. */
void delay_bound_add(struct delay_bound *b, double ms, int64_t now_ms);
/* The bound at now_ms; `empty_ms` while no sample is young enough. */
double delay_bound_ms(const struct delay_bound *b, int64_t now_ms, double empty_ms);

#endif
