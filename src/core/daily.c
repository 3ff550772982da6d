/* SPDX-License-Identifier: Apache-2.0 */
/* daily — see daily.h.
 *
 * Why a list of offsets rather than localtime_r/mktime per request: the C
 * library keeps one time zone for the process (TZ), and switching it means
 * setenv + tzset, which reads the zone's file from disk; mktime on top of it
 * chooses between the two readings of a time the clock repeats by what it was
 * asked before. Resolving at load asks the library once per zone, off the
 * request path, and the list answers every later question the same way.
 *
 * Why not parse TZif ourselves: the library already does, including the POSIX
 * rule at the end of the file that extends a zone past its last listed change;
 * sampling localtime_r() is enough to find the shifts (below). */
#include "core/daily.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DAY_S 86400

int daily_parse_hhmm(const char *s)
{
	if (s == NULL || strlen(s) != 5 || !isdigit((unsigned char)s[0]) ||
	    !isdigit((unsigned char)s[1]) || s[2] != ':' || !isdigit((unsigned char)s[3]) ||
	    !isdigit((unsigned char)s[4]))
		return -1;
	int h = (s[0] - '0') * 10 + (s[1] - '0'), m = (s[3] - '0') * 10 + (s[4] - '0');
	return h < 24 && m < 60 ? h * 60 + m : -1;
}

/* The directory of the tz database (TZDIR, as glibc reads it). */
static const char *tz_dir(void)
{
	const char *d = getenv("TZDIR");
	return d != NULL && *d ? d : "/usr/share/zoneinfo";
}

static bool is_utc(const char *zone)
{
	return zone == NULL || *zone == '\0' || strcmp(zone, "UTC") == 0;
}

bool daily_zone_known(const char *zone)
{
	if (zone == NULL || *zone == '\0')
		return false;
	if (strcmp(zone, "UTC") == 0)
		return true;
	/* A name of the database, never a path out of it. */
	if (zone[0] == '/' || strstr(zone, "..") != NULL)
		return false;
	char path[512];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", tz_dir(), zone) >= sizeof(path))
		return false;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd == -1)
		return false;
	struct stat st;
	char magic[4];
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	          read(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) &&
	          memcmp(magic, "TZif", 4) == 0;
	close(fd);
	return ok;
}

/* ---- resolving a zone (load time) ---- */

/* Runs with TZ set to zone, then puts TZ back as it was. */
struct tz_saved {
	char *old;
	bool had;
};

static void tz_enter(struct tz_saved *sv, const char *zone)
{
	const char *old = getenv("TZ");
	sv->had = old != NULL;
	sv->old = old != NULL ? strdup(old) : NULL;
	setenv("TZ", zone, 1);
	tzset();
}

static void tz_leave(struct tz_saved *sv)
{
	if (sv->had && sv->old != NULL)
		setenv("TZ", sv->old, 1);
	else
		unsetenv("TZ");
	free(sv->old);
	tzset();
}

static int32_t offset_by_libc(int64_t t_s)
{
	time_t t = (time_t)t_s;
	struct tm tm;
	return localtime_r(&t, &tm) != NULL ? (int32_t)tm.tm_gmtoff : 0;
}

static bool push_shift(struct daily_zone **z, size_t *cap, int64_t at_s, int32_t offset_s)
{
	if ((*z)->n == *cap) {
		size_t ncap = *cap * 2;
		struct daily_zone *nz = realloc(*z, sizeof(**z) + ncap * sizeof((*z)->shift[0]));
		if (nz == NULL)
			return false;
		*z = nz;
		*cap = ncap;
	}
	(*z)->shift[(*z)->n++] = (struct daily_shift){.at_s = at_s, .offset_s = offset_s};
	return true;
}

/* The shifts of the current TZ over [from, until): a sample a day, and where
 * two samples differ, the second of the change found by bisection. Zones
 * change their offset at most a few times a year, never twice within a day
 * and back (a change undone within a day would be missed). About 12,000
 * localtime_r() calls for the 30-year horizon: a few milliseconds. */
static bool sample_shifts(struct daily_zone **z, size_t *cap, int64_t from, int64_t until)
{
	int64_t t = from;
	int32_t o = offset_by_libc(t);
	if (!push_shift(z, cap, from, o))
		return false;
	while (t < until) {
		int64_t next = t + DAY_S;
		if (offset_by_libc(next) == o) {
			t = next;
			continue;
		}
		int64_t lo = t, hi = next; /* o at lo, another offset at hi */
		while (hi - lo > 1) {
			int64_t mid = lo + (hi - lo) / 2;
			if (offset_by_libc(mid) == o)
				lo = mid;
			else
				hi = mid;
		}
		o = offset_by_libc(hi);
		if (!push_shift(z, cap, hi, o))
			return false;
		t = hi;
	}
	return true;
}

struct daily_zone *daily_zone_resolve(const char *zone, int64_t from_s)
{
	size_t cap = 8;
	struct daily_zone *z = malloc(sizeof(*z) + cap * sizeof(z->shift[0]));
	if (z == NULL)
		return NULL;
	z->n = 0;
	int64_t from = (from_s < DAILY_FLOOR_S ? from_s : DAILY_FLOOR_S) - 2 * DAY_S;
	int64_t until =
	    (from_s > DAILY_FLOOR_S ? from_s : DAILY_FLOOR_S) + (int64_t)DAILY_HORIZON_DAYS * DAY_S;
	if (is_utc(zone)) {
		z->shift[z->n++] = (struct daily_shift){.at_s = from, .offset_s = 0};
		return z;
	}
	struct tz_saved sv;
	tz_enter(&sv, zone);
	bool ok = sample_shifts(&z, &cap, from, until);
	tz_leave(&sv);
	if (!ok) {
		free(z);
		return NULL;
	}
	return z;
}

void daily_zone_free(struct daily_zone *z)
{
	free(z);
}

/* ---- the request path: arithmetic on the shifts ---- */

/* The index of the shift in force at t_s: the last one at or before it, or
 * the first for instants before the horizon. */
static size_t shift_at(const struct daily_zone *z, int64_t t_s)
{
	size_t lo = 0, hi = z->n; /* the answer is in [lo, hi) */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->shift[mid].at_s <= t_s)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

int32_t daily_zone_offset(const struct daily_zone *z, int64_t t_s)
{
	return z != NULL ? z->shift[shift_at(z, t_s)].offset_s : 0;
}

/* The instant (UTC seconds) at which the local clock of z reads `local_s`
 * (seconds since the epoch, on the local clock): the first of two in a fold;
 * in a gap, local_s read with the offset before the gap. Offsets stay well
 * within a day, so only the shifts from two days before local_s matter. */
static int64_t utc_of_local(const struct daily_zone *z, int64_t local_s)
{
	if (z == NULL)
		return local_s;
	for (size_t i = shift_at(z, local_s - 2 * DAY_S); i < z->n; i++) {
		bool first = i == 0, last = i + 1 == z->n;
		int64_t t = local_s - z->shift[i].offset_s;
		if ((first || t >= z->shift[i].at_s) && (last || t < z->shift[i + 1].at_s))
			return t;
		if (!last && t >= z->shift[i + 1].at_s &&
		    local_s - z->shift[i + 1].offset_s < z->shift[i + 1].at_s)
			return t; /* in the gap before shift i + 1 */
	}
	return local_s - z->shift[z->n - 1].offset_s; /* not reached: the last shift holds */
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

int64_t daily_next_reset_ms(int64_t wall_now_ms, int minute_of_day, const struct daily_zone *z)
{
	int64_t now = wall_now_ms / 1000;
	int64_t day = floor_div(now + daily_zone_offset(z, now), DAY_S);
	int64_t t = now;
	for (int d = 0; d <= 2 && t <= now; d++)
		t = utc_of_local(z, (day + d) * DAY_S + (int64_t)minute_of_day * 60);
	return t * 1000;
}
