/* SPDX-License-Identifier: Apache-2.0 */
/* clock — the time, read at most once per event-loop turn (STYLE: "time once
 * per loop turn"; nginx's ngx_time_update, h2o's timestamp cache).
 *
 * Everything that runs in one turn (the callbacks of one event_base_loop
 * EVLOOP_ONCE call) sees the same instant: the first read of a turn asks the
 * kernel (vDSO), the others return the cached value. main drives the loop one
 * turn at a time and calls clock_turn_end() after each, so the next turn
 * starts with a fresh read:
 *
 *     clock_turn_end();
 *     while (...) { event_base_loop(base, EVLOOP_ONCE); clock_turn_end(); ... }
 *
 * Nothing reads the clock between clock_turn_end() and the blocking wait of
 * the next turn, so a cached value never spans a wait. A turn is short
 * (callbacks never block), so "now" is at most one turn's work late; that is
 * the price of not asking the kernel ten times per request.
 *
 * Outside a running loop (start-up, tests) the value stays cached until the
 * next clock_turn_end(). */
#ifndef PACERD_CLOCK_H
#define PACERD_CLOCK_H

/* CLOCK_MONOTONIC in milliseconds: intervals, deadlines, timers. */
long long clock_now_ms(void);

/* CLOCK_MONOTONIC read now, and cached as the turn's time from here on: for
 * decisions that must not run early by however long the turn has lasted so
 * far (a paced lane's dispatch: a stale "now" would shorten its spacing). */
long long clock_fresh_ms(void);
/* Microseconds from now until the monotonic instant at_ms (0 when past), read
 * now, not cached: a timer for a paced lane is set to the microsecond, so that
 * it fires at its millisecond instead of up to one millisecond after it (the
 * millisecond clock's truncation would otherwise be added to every wake-up).
 * at_ms may carry a fraction: the paced lanes' gates open between two
 * milliseconds. */
long long clock_us_until(double at_ms);

/* CLOCK_MONOTONIC read now, in milliseconds with their fraction (to the
 * microsecond), and cached as the turn's time like clock_fresh_ms: for the
 * paced lanes, whose gates space requests to the fraction of a millisecond
 * (a whole-millisecond clock would cost up to one per interval). */
double clock_precise_ms(void);

/* CLOCK_MONOTONIC read now, in nanoseconds, and not cached: for measuring
 * within a turn (a store round trip, a benchmark) and for handing the
 * instant to another process (sd_notify's MONOTONIC_USEC). The one reading
 * of the monotonic clock: the functions above are made of it. */
long long clock_mono_ns(void);

/* CLOCK_REALTIME in milliseconds since the epoch: log timestamps and the
 * "now" that provider dates (HTTP-date, RFC 3339 resets) are measured from. */
long long clock_wall_ms(void);

/* Ends the turn: the next clock_now_ms / clock_wall_ms read the clock again. */
void clock_turn_end(void);

/* The turn's number: one more after every clock_turn_end(). Whether two
 * things happened in the same turn (no event was polled between them). */
unsigned long long clock_turn(void);

#endif
