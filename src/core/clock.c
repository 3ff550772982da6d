/* clock — see clock.h. */
#include "core/clock.h"

#include <math.h>
#include <stdbool.h>
#include <time.h>

static long long clock_mono_cache, clock_wall_cache;
static bool clock_mono_valid, clock_wall_valid;

static long long clock_read_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long clock_now_ms(void)
{
	if (!clock_mono_valid) {
		clock_mono_cache = clock_read_ms(CLOCK_MONOTONIC);
		clock_mono_valid = true;
	}
	return clock_mono_cache;
}

long long clock_wall_ms(void)
{
	if (!clock_wall_valid) {
		clock_wall_cache = clock_read_ms(CLOCK_REALTIME);
		clock_wall_valid = true;
	}
	return clock_wall_cache;
}

long long clock_fresh_ms(void)
{
	clock_mono_cache = clock_read_ms(CLOCK_MONOTONIC);
	clock_mono_valid = true;
	return clock_mono_cache;
}

double clock_precise_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	clock_mono_cache = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	clock_mono_valid = true;
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

long long clock_us_until(double at_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* Rounded up: a timer never fires before its instant. */
	double us = ceil(at_ms * 1000.0) - ((double)ts.tv_sec * 1e6 + (double)(ts.tv_nsec / 1000));
	return us > 0 ? (long long)us : 0;
}

void clock_turn_end(void)
{
	clock_mono_valid = false;
	clock_wall_valid = false;
}
