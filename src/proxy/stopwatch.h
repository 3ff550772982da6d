/* SPDX-License-Identifier: Apache-2.0 */
/* stopwatch — when an answer's tokens came: the time to its first data event,
 * the stream after it, and its longest gap, for a lane whose concurrency
 * limit reads latency (sched/gradient.h). Pure: the caller gives the
 * instants (the loop turn's clock: a chunk is timed when pacerd reads it).
 *
 * A token is an event-stream `data:` line (SSE; an engine sends one per
 * token or per few). Comments (`: keep-alive`, which some providers send
 * while a request waits), `event:` lines and bytes before the first data
 * line are not tokens: the response head, which Starlette-based engines send
 * before the first token, says nothing either. Counting is O(1) per line
 * (memchr to each line's end), with no allocation; lines split across
 * chunks are followed across them. An answer that is not an event stream is
 * timed as a whole (its first data event is unknown). */
#ifndef PACERD_STOPWATCH_H
#define PACERD_STOPWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stopwatch {
	bool on;  /* this answer is timed */
	bool sse; /* it is an event stream */
	bool line_start;
	unsigned char match; /* bytes of "data:" matched at the start of this line */
	int64_t start_ms;    /* its dispatch */
	int64_t first_ms, last_ms;
	unsigned events;       /* data events so far */
	unsigned first_events; /* of which in the first chunk that had any */
	int64_t max_gap_ms;
};

/* Starts timing an answer to a request dispatched at start_ms (on: the lane
 * wants it; sse: the answer is an event stream), or turns the watch off. */
void stopwatch_start(struct stopwatch *w, bool on, bool sse, int64_t start_ms);

/* n bytes of the answer's body, read at now_ms. Returns true when they held
 * its first data event (stopwatch_first_ms tells when it came). */
bool stopwatch_feed(struct stopwatch *w, const char *data, size_t n, int64_t now_ms);

/* The dispatch to the first data event, ms; -1 while none came. */
double stopwatch_first_ms(const struct stopwatch *w);

/* What the answer showed, once it ended: first_ms (-1: not a stream, or no
 * data event), the stream after the first chunk (ms, its events, its
 * longest gap). */
struct stopwatch_times {
	double first_ms, stream_ms, max_gap_ms;
	unsigned events;
};
void stopwatch_times(const struct stopwatch *w, struct stopwatch_times *out);

#endif
