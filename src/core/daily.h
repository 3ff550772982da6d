/* daily — when a daily budget resets (issue 8.4). A per-day limit is a budget,
 * not a rate: it is spent as fast as the other gates allow and starts over at a
 * fixed local time of a fixed zone (Gemini: midnight US Pacific), whatever the
 * length of that day (23 or 25 hours across a daylight-saving change).
 *
 * Pure but for the C library's time zone state: the zone is set through TZ for
 * the length of one call and restored after, which is safe in pacerd's single
 * thread; the answer depends only on the arguments and the tz database. */
#ifndef PACERD_DAILY_H
#define PACERD_DAILY_H

#include <stdbool.h>
#include <stdint.h>

/* "HH:MM" (00:00 to 23:59) into minutes after midnight; -1 when malformed. */
int daily_parse_hhmm(const char *s);

/* Whether `zone` names an IANA zone of the tz database ("UTC" always does). */
bool daily_zone_known(const char *zone);

/* The first instant after wall_now_ms (ms since the epoch) at which the local
 * time in `zone` is minute_of_day after midnight (a time that a spring-forward
 * skips resolves to the instant after the gap). */
int64_t daily_next_reset_ms(int64_t wall_now_ms, int minute_of_day, const char *zone);

#endif
