/* SPDX-License-Identifier: Apache-2.0 */
/* clock — see clock.h. */
#include "core/clock.h"

#include <math.h>
#include <stdbool.h>
#include <time.h>

static long long clock_mono_cache, clock_wall_cache;
static bool clock_mono_valid, clock_wall_valid;
static unsigned long long clock_turns;

long long clock_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

long long clock_now_ms(void)
{
	if (!clock_mono_valid) {
		clock_mono_cache = clock_mono_ns() / 1000000;
		clock_mono_valid = true;
	}
	return clock_mono_cache;
}

long long clock_wall_ms(void)
{
	if (!clock_wall_valid) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		clock_wall_cache = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		clock_wall_valid = true;
	}
	return clock_wall_cache;
}

long long clock_fresh_ms(void)
{
	clock_mono_cache = clock_mono_ns() / 1000000;
	clock_mono_valid = true;
	return clock_mono_cache;
}

double clock_precise_ms(void)
{
	long long ns = clock_mono_ns();
	clock_mono_cache = ns / 1000000;
	clock_mono_valid = true;
	return (double)(ns / 1000000) + (double)(ns % 1000000) / 1e6;
}

long long clock_us_until(double at_ms)
{
	/* Rounded up: a timer never fires before its instant. */
	double us = ceil(at_ms * 1000.0) - (double)(clock_mono_ns() / 1000);
	return us > 0 ? (long long)us : 0;
}

void clock_turn_end(void)
{
	clock_mono_valid = false;
	clock_wall_valid = false;
	clock_turns++;
}

unsigned long long clock_turn(void)
{
	return clock_turns;
}
