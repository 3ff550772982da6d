/* SPDX-License-Identifier: Apache-2.0 */
/* slow_start — a concurrency limit that doubles per round trip, as TCP's
 * slow start does per RTT (RFC 5681), counted in requests. Pure: no I/O, no
 * clock; instants are int64 ms passed in by the caller.
 *
 * One slow start serves two controllers (docs/pacing.md):
 *  - the latency controller (gradient.h), from concurrency.slow_start, where
 *    a round trip is a streamed answer's first token (a stream keeps its
 *    slot long after the server admitted it) and a first token may have
 *    waited inside the server;
 *  - AIMD's open limit on a silent lane (aimd.h): a provider that sends no
 *    rate-limit headers says nothing of the room it has until it refuses,
 *    so the lane releases what it holds by doublings, not all at once; a
 *    round trip is an answer, and none waited.
 *
 * A round is the requests sent since it began. Once half of them are back
 * (an answer that came back for a request sent before the round began is
 * the previous round's, and counts in none):
 *  - more than a fifth of those back waited: slow start ends where it is
 *    (SLOW_START_END);
 *  - else the limit may become twice the most the lane had in flight during
 *    the round (SLOW_START_GROW, *next): a lane that never filled its limit
 *    learns nothing by raising it, and one that did fill it had that many
 *    answered without a wait. Streams keep their slots: the most in flight
 *    is what is in flight. Answers free theirs, and the half of a round
 *    that is back left the lane with half of it in flight: the most in
 *    flight, not what is left, is what the round carried.
 * A new round begins at either verdict. The caller keeps the limit, ends the
 * slow start at a refusal (slow_start_end) and once the limit is its
 * ceiling. */
#ifndef PACERD_SLOW_START_H
#define PACERD_SLOW_START_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOW_START_WAITED_SHARE 5 /* more than one in this many back waited: it ends */

struct slow_start {
	bool on;
	int64_t round_ms; /* the round began: requests sent since are its */
	/* requests the round sent; of those, back without a wait and after one */
	unsigned sent, clean, waited;
	unsigned most; /* the most in flight since the round began */
};

enum slow_start_step {
	SLOW_START_WAIT, /* not half the round back yet (or off) */
	SLOW_START_GROW, /* a round trip without waits: *next is twice its most in flight */
	SLOW_START_END,  /* too many waited: it is over */
};

/* Starts at now_ms with in_flight requests already out, which count in no
 * round (their answers are the last burst's). */
void slow_start_begin(struct slow_start *s, int64_t now_ms, size_t in_flight);

/* Starts with the round that sent `sent` requests since since_ms already
 * out (in_flight of them in flight): a lane that let a first burst go
 * before it knew it would slow start, whose answers are this round's. */
void slow_start_adopt(struct slow_start *s, int64_t since_ms, unsigned sent, size_t in_flight);

/* A request was sent; in_flight counts it. */
void slow_start_sent(struct slow_start *s, size_t in_flight);

/* A request sent at sent_ms came back at now_ms (its first token, or its
 * answer), waited or not, with in_flight in flight (which counts toward the
 * round's most): the verdict above; *next is set on SLOW_START_GROW. */
enum slow_start_step slow_start_back(struct slow_start *s, int64_t now_ms, int64_t sent_ms,
                                     bool waited, size_t in_flight, unsigned *next);

/* A refusal, a cut or the ceiling: no more doublings. */
void slow_start_end(struct slow_start *s);

#endif
