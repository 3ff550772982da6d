/* SPDX-License-Identifier: Apache-2.0 */
/* fleet — the replicas sharing the store, from their heartbeats; see fleet.h. */
#include "store/fleet.h"

void fleet_init(struct fleet *f, unsigned configured)
{
	*f = (struct fleet){.configured = configured > 0 ? configured : 1, .lower_since_ms = -1};
}

void fleet_heard(struct fleet *f, unsigned alive, int64_t now_ms)
{
	if (alive == 0)
		alive = 1;
	if (alive >= f->alive) {
		f->alive = alive;
		f->lower_since_ms = -1;
		return;
	}
	if (f->lower_since_ms < 0 || now_ms < f->lower_since_ms) {
		f->lower = alive;
		f->lower_since_ms = now_ms;
		return;
	}
	if (alive > f->lower)
		f->lower = alive;
	if (now_ms - f->lower_since_ms >= FLEET_TTL_MS) {
		f->alive = f->lower;
		f->lower_since_ms = -1;
	}
}

unsigned fleet_divisor(const struct fleet *f)
{
	return f->alive > 0 ? f->alive : f->configured;
}

bool fleet_heard_any(const struct fleet *f)
{
	return f->alive > 0;
}
