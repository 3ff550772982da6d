/* SPDX-License-Identifier: Apache-2.0 */
/* fleet — how many replicas share the store, from their heartbeats. Pure: the
 * time is an argument (the monotonic clock's ms).
 *
 * Every replica beats once every FLEET_BEAT_MS into one sorted set of the
 * store (store_script.h's beat: its name scored by the server's clock, the
 * names not seen for FLEET_TTL_MS pruned), and the answer is how many beat
 * within FLEET_TTL_MS, itself included. While the store is down, with
 * on_error: local, a replica paces each lane at its plan's limits divided by
 * fleet_divisor: the replicas alive at the last beats it heard, so a fleet
 * that grew or shrank since it was configured divides by what it is, and
 * the operator keeps no count by hand. store.redis.replicas counts only
 * until the first beat is answered (a replica that started with the store
 * down).
 *
 * A count that rises is believed at once: a new replica makes every share
 * smaller now, and a divisor too large only paces under the limit. One that
 * falls is believed once it has held for FLEET_TTL_MS of beats (the largest
 * count heard over that time): every replica still alive has beaten in
 * it. So a Redis restarted empty, whose first answers count only the
 * replicas that have beaten since, does not halve the divisor for the
 * second it takes the others to beat again; and a replica that died leaves
 * the count FLEET_TTL_MS after its last beat in the store, and as long
 * again here. */
#ifndef PACERD_FLEET_H
#define PACERD_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#define FLEET_BEAT_MS 1000
/* A replica not heard for this long is gone: three beats missed. */
#define FLEET_TTL_MS 3000

struct fleet {
	unsigned configured; /* store.redis.replicas: before any beat */
	unsigned alive;      /* believed: replicas alive at the last beats; 0: none heard */
	/* a lower count than `alive`, the largest heard since lower_since_ms
	 * (-1: none): believed once it has held for FLEET_TTL_MS */
	unsigned lower;
	int64_t lower_since_ms;
};

/* A fleet that heard no beat yet: its divisor is `configured` (>= 1). */
void fleet_init(struct fleet *f, unsigned configured);
/* A beat was answered at now_ms: `alive` replicas beat within FLEET_TTL_MS
 * (0 is taken as 1: this replica beat). */
void fleet_heard(struct fleet *f, unsigned alive, int64_t now_ms);
/* What the plan's limits are divided by while the store is down: the
 * replicas believed alive, or store.redis.replicas before any beat. */
unsigned fleet_divisor(const struct fleet *f);
/* Whether a beat was ever answered (the divisor comes from the beats). */
bool fleet_heard_any(const struct fleet *f);

#endif
