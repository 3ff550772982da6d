/* SPDX-License-Identifier: Apache-2.0 */
/* daily — when a daily budget resets (issue 8.4). A per-day limit is a budget,
 * not a rate: it is spent as fast as the other gates allow and starts over at a
 * fixed local time of a fixed zone (Gemini: midnight US Pacific), whatever the
 * length of that day (23 or 25 hours across a daylight-saving change).
 *
 * A zone is resolved once, when the configuration loads (and so again at every
 * reload): daily_zone_resolve() asks the C library (TZ, tzset, localtime_r:
 * the tz database read from disk, global state) for the zone's UTC offsets
 * over DAILY_HORIZON_DAYS and keeps them as a list of shifts. The request
 * path's daily_next_reset_ms() is then pure arithmetic on that list: no file
 * I/O, no setenv, no tzset (STYLE.md practice 8; docs/decisions.md). */
#ifndef PACERD_DAILY_H
#define PACERD_DAILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How far ahead of its resolution a zone's offsets are known: a pacerd that
 * runs longer without a reload keeps the last offset of the horizon. */
#define DAILY_HORIZON_DAYS (30 * 366)
/* 2025-01-01T00:00:00Z: the horizon always covers from here on, so that a
 * machine whose clock is not set yet when pacerd starts (1970) still knows
 * the zone once it is. */
#define DAILY_FLOOR_S INT64_C(1735689600)

/* One change of a zone's UTC offset: from at_s on (seconds since the epoch),
 * local time is UTC + offset_s. */
struct daily_shift {
	int64_t at_s;
	int32_t offset_s;
};

/* A zone's offsets over its horizon. shift[0] holds from the start of the
 * horizon and, before it, for all earlier instants too; the last shift holds
 * to the end of time. Immutable once resolved. */
struct daily_zone {
	size_t n; /* >= 1 */
	struct daily_shift shift[];
};

/* "HH:MM" (00:00 to 23:59) into minutes after midnight; -1 when malformed. */
int daily_parse_hhmm(const char *s);

/* Whether `zone` names a zone of the tz database: "UTC", or a regular file
 * under TZDIR (/usr/share/zoneinfo) that starts with the TZif magic (not a
 * directory such as "America", which the C library would read as UTC). */
bool daily_zone_known(const char *zone);

/* The offsets of `zone` (a name daily_zone_known() accepts; NULL or "" is
 * UTC) from two days before the earlier of from_s and DAILY_FLOOR_S to
 * DAILY_HORIZON_DAYS after the later of them. Reads the tz
 * database through TZ and tzset(), and puts TZ back as it was: for the
 * configuration loader, never the request path. NULL when out of memory. */
struct daily_zone *daily_zone_resolve(const char *zone, int64_t from_s);
void daily_zone_free(struct daily_zone *z);

/* The UTC offset of z at t_s (seconds). */
int32_t daily_zone_offset(const struct daily_zone *z, int64_t t_s);

/* The next reset after wall_now_ms (ms since the epoch) of a budget that resets
 * at minute_of_day (after midnight) in zone z (NULL: UTC). One reset per local
 * date: the instant of that date whose local time is minute_of_day; a time the
 * clock shows twice (fall back) is the first of the two, a time it skips
 * (spring forward) is as far after the gap as it was after the gap's start
 * (02:30 on a day that skips 02:00 to 03:00 is 03:30). The first such instant
 * after wall_now_ms. Pure. */
int64_t daily_next_reset_ms(int64_t wall_now_ms, int minute_of_day, const struct daily_zone *z);

#endif
