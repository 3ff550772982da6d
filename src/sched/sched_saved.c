/* SPDX-License-Identifier: Apache-2.0 */
/* sched_saved — what is left of a saved lane after time passed (sched.h:
 * sched_saved_age). Pure: a function of the saved value and the wall-clock
 * time; apart from sched.c because it reads no lane. */
#include "sched/sched.h"

#include <string.h>

unsigned sched_saved_budgets(const struct sched_lane_saved *s)
{
	unsigned n = 0;
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		n += (s->budgets >> b) & 1u;
	return n;
}

bool sched_saved_age(struct sched_lane_saved *s, struct learned *budgets, int64_t wall_ms,
                     int64_t idle_ms)
{
	if (wall_ms - s->last_active_ms >= idle_ms)
		return false; /* evicted by now */
	if (s->hold_until_ms != 0 && s->hold_until_ms <= wall_ms)
		s->hold_until_ms = 0; /* over; a probe still goes first (probing) */
	if (s->quota_out && s->quota_probe_at_ms < wall_ms)
		s->quota_probe_at_ms = wall_ms;
	if (s->day_resets_at_ms != 0 && s->day_resets_at_ms <= wall_ms) {
		s->day_requests = s->day_tokens = 0; /* a new day */
		s->day_resets_at_ms = 0;
	}
	/* Budgets: each aged alone; those with nothing left go, the others
	 * close up in b's order. */
	unsigned in = 0, out = 0;
	uint8_t mask = 0;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		if (!(s->budgets & (1u << b)))
			continue;
		struct learned *l = &budgets[in++];
		if (!learned_age(l, wall_ms))
			continue;
		if (out != in - 1)
			budgets[out] = *l;
		out++;
		mask |= (uint8_t)(1u << b);
	}
	s->budgets = mask;
	return true;
}
