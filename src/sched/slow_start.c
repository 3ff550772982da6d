/* SPDX-License-Identifier: Apache-2.0 */
/* slow_start — doubling per round trip; see slow_start.h. */
#include "sched/slow_start.h"

static unsigned count_of(size_t n)
{
	return n < UINT32_MAX ? (unsigned)n : UINT32_MAX;
}

/* A new round at now_ms: what leaves from now on is its. */
static void round_begin(struct slow_start *s, int64_t now_ms, size_t in_flight)
{
	s->round_ms = now_ms;
	s->sent = s->clean = s->waited = 0;
	s->most = count_of(in_flight);
}

void slow_start_begin(struct slow_start *s, int64_t now_ms, size_t in_flight)
{
	s->on = true;
	round_begin(s, now_ms, in_flight);
}

void slow_start_adopt(struct slow_start *s, int64_t since_ms, unsigned sent, size_t in_flight)
{
	slow_start_begin(s, since_ms, in_flight);
	s->sent = sent;
	if (s->most < sent)
		s->most = sent;
}

void slow_start_sent(struct slow_start *s, size_t in_flight)
{
	if (!s->on)
		return;
	if (s->sent < UINT32_MAX)
		s->sent++;
	if (s->most < count_of(in_flight))
		s->most = count_of(in_flight);
}

enum slow_start_step slow_start_back(struct slow_start *s, int64_t now_ms, int64_t sent_ms,
                                     bool waited, size_t in_flight, unsigned *next)
{
	if (!s->on || sent_ms < s->round_ms)
		return SLOW_START_WAIT;
	if (waited)
		s->waited++;
	else
		s->clean++;
	if (s->most < count_of(in_flight))
		s->most = count_of(in_flight);
	unsigned back = s->clean + s->waited, waited_n = s->waited, most = s->most;
	if (2 * (uint64_t)back < s->sent)
		return SLOW_START_WAIT;
	round_begin(s, now_ms, in_flight);
	if (SLOW_START_WAITED_SHARE * (uint64_t)waited_n > back) {
		s->on = false;
		return SLOW_START_END;
	}
	*next = most < UINT32_MAX / 2 ? 2 * most : UINT32_MAX;
	return SLOW_START_GROW;
}

void slow_start_end(struct slow_start *s)
{
	s->on = false;
}
