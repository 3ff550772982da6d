/* SPDX-License-Identifier: Apache-2.0 */
/* Micro-benchmark: ns per call of the cost and scope work done per request and
 * per answer (make build/bench_cost && ./build/bench_cost). */
#include <stdio.h>

#include "core/clock.h"
#include "sched/cost.h"
#include "sched/scope.h"

static double now_ns(void)
{
	return (double)clock_mono_ns();
}

static volatile double sink;

int main(void)
{
	enum { N = 2000000, KEYS = 100000 };
	struct cost_lane c;
	cost_lane_init(&c);
	/* a full prompts table and a full output ring */
	for (uint64_t k = 1; k <= 64; k++) {
		struct cost_request r = {10000, 9000, 1 + k % COST_PROMPTS, 0, -1};
		struct cost_usage u = {500, 0, 9500, (int64_t)(100 + k * 7 % 900), false};
		cost_observe(&c, &r, &u, (int64_t)k);
	}
	struct cost_charge ch;
	double t0 = now_ns();
	for (int i = 0; i < N; i++) {
		struct cost_request r = {10000, 9000, 1 + (uint64_t)i % (2 * COST_PROMPTS), 0, -1};
		cost_charge(&c, &r, true, COST_OUTPUT_RESERVED, 1024, COST_CACHE_TTL_MS, 100, &ch);
		sink += ch.input + ch.output;
	}
	double t1 = now_ns();
	for (int i = 0; i < N / 10; i++) {
		struct cost_request r = {10000, 9000, 1 + (uint64_t)i % COST_PROMPTS, 0, -1};
		struct cost_usage u = {500, 0, 9500, 100 + i % 900, false};
		cost_observe(&c, &r, &u, 100 + i);
	}
	double t2 = now_ns();
	printf("cost_charge (16 prompts, half the lookups missing): %.0f ns/call\n", (t1 - t0) / N);
	printf("cost_observe (prompt update + p90 over 64): %.0f ns/call\n", (t2 - t1) / (N / 10));
	printf("cost lane: %zu bytes inline + %zu heap\n", sizeof(c), cost_lane_heap_bytes(&c));
	cost_lane_free(&c);

	struct scope_table t;
	scope_init(&t, KEYS, 0);
	for (uint64_t k = 0; k < KEYS; k++)
		scope_learn(&t, k * 0x9e3779b97f4a7c15ULL, 0, 1 + k % 100, (int64_t)k);
	double t3 = now_ns();
	for (int i = 0; i < N; i++)
		sink += (double)scope_of(&t, (uint64_t)(i % (2 * KEYS)) * 0x9e3779b97f4a7c15ULL, 0,
		                         KEYS + i);
	double t4 = now_ns();
	printf("scope_of (%d learned keys, half the lookups missing): %.0f ns/call\n", KEYS,
	       (t4 - t3) / N);
	printf("scope table: %zu entries, %zu heap bytes (%.0f per entry)\n", scope_count(&t),
	       scope_heap_bytes(&t), (double)scope_heap_bytes(&t) / (double)scope_count(&t));
	scope_free(&t);
	return 0;
}
