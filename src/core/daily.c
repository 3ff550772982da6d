/* daily — see daily.h. */
#include "core/daily.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	snprintf(path, sizeof(path), "%s/%s", tz_dir(), zone);
	return access(path, R_OK) == 0;
}

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

/* The instant of minute_of_day on the local date of `day` (a struct tm from
 * localtime_r), days_ahead days later. mktime normalises the day overflow and,
 * with tm_isdst -1, finds whether daylight saving applies on that date. */
static time_t at_minute(struct tm day, int days_ahead, int minute_of_day)
{
	day.tm_mday += days_ahead;
	day.tm_hour = minute_of_day / 60;
	day.tm_min = minute_of_day % 60;
	day.tm_sec = 0;
	day.tm_isdst = -1;
	return mktime(&day);
}

int64_t daily_next_reset_ms(int64_t wall_now_ms, int minute_of_day, const char *zone)
{
	struct tz_saved sv;
	tz_enter(&sv, zone != NULL && *zone ? zone : "UTC");
	time_t now = (time_t)(wall_now_ms / 1000);
	struct tm local;
	localtime_r(&now, &local);
	time_t t = at_minute(local, 0, minute_of_day);
	for (int d = 1; t <= now && d <= 2; d++)
		t = at_minute(local, d, minute_of_day);
	tz_leave(&sv);
	return (int64_t)t * 1000;
}
