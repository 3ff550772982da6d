/* SPDX-License-Identifier: Apache-2.0 */
/* bench-lanes — what a lane costs: heap bytes per lane of the registry's table,
 * and the time of one dispatch cycle as the number of lanes and the depth of a
 * queue grow. Both should stay flat (DESIGN §2: max_lanes keys, §3: one timer
 * per lane, nothing that scans).
 *
 * Prints one JSON object on stdout:
 *   {"lanes":[{"n":1,"bytes_per_lane":B,"dispatch_ns":T},...],
 *    "queues":[{"depth":10,"dispatch_ns":T},...]}
 *
 * bytes_per_lane: the growth of the heap (mallinfo2: arena plus mmapped blocks,
 * malloc's own headers included) from before registry_new to after n lanes
 * were created, divided by n. It includes the hash table, every per-lane
 * allocation, and the registry itself (which is why n = 1 costs more). Built
 * with SAN=1 the sanitizer's allocator hides the heap from mallinfo2: the
 * figure is then meaningless.
 *
 * dispatch_ns (lanes): one request's way through a lane among n: the registry
 * lookup by key, sched_submit, sched_next, sched_complete.
 * dispatch_ns (queues): one lane holding `depth` queued requests; each cycle
 * does what the event loop does on a wake-up (sched_expired, sched_next,
 * sched_wake_at), completes the dispatched request and submits it again at the
 * tail, so the depth stays put.
 *
 * Two more cases, beyond the brief's shape, for the paths that used to scan:
 *   "retries": `waiting` requests wait for their retry time (spread over a
 *   long future); each cycle sends one request, puts it back to wait for a
 *   random time and cancels another waiting one, so the count stays put.
 *   "agents": agents.mode serialize; one agent has a request in flight and
 *   `depth` more queued behind it; each cycle dispatches, completes and
 *   resubmits the request of another agent at the tail of the queue. */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/config.h"
#include "provider/profile.h"
#include "sched/registry.h"
#include "sched/sched.h"

static struct sched_item *evicted; /* what sched_submit evicted: never, here */

#define BENCH_MIN_NS 150000000LL /* measure each case for at least this long */
#define BENCH_MIN_CYCLES 1024    /* one batch, however slow */

static int64_t bench_ns(void)
{
	return clock_mono_ns();
}

static size_t bench_heap(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* Distinct, well-spread 64-hex-digit key hashes, as keyid_hash makes. */
static void bench_key(uint64_t i, char out[65])
{
	uint64_t x = i * 0x9e3779b97f4a7c15ULL + 1;
	for (int part = 0; part < 4; part++) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		z ^= z >> 31;
		snprintf(out + part * 16, 17, "%016" PRIx64, z);
	}
}

static void bench_fail(const char *what)
{
	fprintf(stderr, "bench-lanes: %s\n", what);
	exit(1);
}

struct bench_lanes_result {
	double bytes_per_lane;
	double dispatch_ns;
};

static struct bench_lanes_result bench_lanes(struct config *cfg, unsigned n)
{
	const struct provider_conf *prov = config_provider(cfg, "openai");
	struct bench_lanes_result r;
	char key[65], probe[65];
	int64_t now = 1000000;

	cfg->limits.max_lanes = n;
	size_t heap0 = bench_heap();
	struct registry *reg = registry_new(1);
	if (reg == NULL)
		bench_fail("registry_new failed");
	for (unsigned i = 0; i < n; i++) {
		bench_key(i, key);
		if (registry_key_lane(reg, cfg, prov, key, now, NULL, NULL) == NULL)
			bench_fail("registry_lane refused a lane under max_lanes");
	}
	size_t heap1 = bench_heap();
	r.bytes_per_lane = (double)(heap1 - heap0) / n;

	/* One lane in the middle of the table, found by key every time. */
	bench_key(n / 2, probe);
	struct sched_item it;
	long cycles = 0;
	int64_t t0 = bench_ns(), t1;
	do {
		for (int k = 0; k < 1024; k++, cycles++, now++) {
			struct sched_lane *lane =
			    registry_key_lane(reg, cfg, prov, probe, now, NULL, NULL);
			if (lane == NULL || sched_submit(lane, &it, &(struct sched_request){0}, now,
			                                 &evicted) != SCHED_OK)
				bench_fail("submit refused");
			struct sched_item *d = sched_next(lane, now);
			if (d != &it)
				bench_fail("sched_next did not dispatch");
			sched_complete(lane, d, SCHED_SUCCESS, now);
		}
		t1 = bench_ns();
	} while (t1 - t0 < BENCH_MIN_NS || cycles < BENCH_MIN_CYCLES);
	r.dispatch_ns = (double)(t1 - t0) / (double)cycles;
	registry_free(reg, NULL, NULL);
	return r;
}

static double bench_queue(struct config *cfg, unsigned depth)
{
	const struct provider_conf *prov = config_provider(cfg, "openai");
	struct plan_conf *plan = (struct plan_conf *)config_plan(cfg, prov->plan);
	plan->queue.max_depth = depth + 1;
	plan->queue.max_wait_s = 86400; /* kept on: the expiry check is part of the cycle */
	cfg->limits.max_lanes = 1;
	int64_t now = 1000000;

	struct registry *reg = registry_new(1);
	struct sched_item *items = calloc(depth, sizeof(*items));
	if (reg == NULL || items == NULL)
		bench_fail("out of memory");
	struct sched_lane *lane = registry_key_lane(reg, cfg, prov, NULL, now, NULL, NULL);
	if (lane == NULL)
		bench_fail("registry_lane failed");
	for (unsigned i = 0; i < depth; i++)
		if (sched_submit(lane, &items[i], &(struct sched_request){0}, now, &evicted) !=
		    SCHED_OK)
			bench_fail("submit refused while filling the queue");

	long cycles = 0;
	int64_t t0 = bench_ns(), t1;
	do {
		for (int k = 0; k < 1024; k++, cycles++, now++) {
			if (sched_expired(lane, now) != NULL)
				bench_fail("a request expired");
			struct sched_item *d = sched_next(lane, now);
			if (d == NULL)
				bench_fail("sched_next did not dispatch");
			(void)sched_wake_at(lane, now);
			sched_complete(lane, d, SCHED_SUCCESS, now);
			if (sched_submit(lane, d, &(struct sched_request){0}, now, &evicted) !=
			    SCHED_OK)
				bench_fail("submit refused");
		}
		t1 = bench_ns();
	} while (t1 - t0 < BENCH_MIN_NS || cycles < BENCH_MIN_CYCLES);
	while (sched_next(lane, now) != NULL)
		;
	registry_free(reg, NULL, NULL);
	free(items);
	return (double)(t1 - t0) / (double)cycles;
}

static uint64_t bench_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static struct sched_lane *bench_one_lane(struct config *cfg, struct registry **reg, unsigned depth,
                                         int64_t now)
{
	const struct provider_conf *prov = config_provider(cfg, "openai");
	struct plan_conf *plan = (struct plan_conf *)config_plan(cfg, prov->plan);
	plan->queue.max_depth = depth + 1;
	plan->queue.max_wait_s = 86400;
	cfg->limits.max_lanes = 1;
	*reg = registry_new(1);
	if (*reg == NULL)
		bench_fail("out of memory");
	struct sched_lane *lane = registry_key_lane(*reg, cfg, prov, NULL, now, NULL, NULL);
	if (lane == NULL)
		bench_fail("registry_lane failed");
	return lane;
}

static double bench_retries(struct config *cfg, unsigned waiting)
{
	int64_t now = 1000000;
	struct registry *reg;
	struct sched_lane *lane = bench_one_lane(cfg, &reg, 1, now);
	struct sched_item *items = calloc(waiting + 1, sizeof(*items));
	if (items == NULL)
		bench_fail("out of memory");
	uint64_t seed = 88172645463325252ULL;
	const int64_t far = 1000000000000LL;
	for (unsigned i = 0; i < waiting; i++) {
		if (sched_submit(lane, &items[i], &(struct sched_request){0}, now, &evicted) !=
		    SCHED_OK)
			bench_fail("submit refused");
		struct sched_item *d = sched_next(lane, now);
		sched_complete(lane, d, SCHED_TRANSIENT, now);
		sched_retry(lane, d, far + (int64_t)(bench_rand(&seed) % 1000000000));
	}
	struct sched_item *spare = &items[waiting];
	long cycles = 0;
	int64_t t0 = bench_ns(), t1;
	do {
		for (int k = 0; k < 1024; k++, cycles++, now++) {
			if (sched_submit(lane, spare, &(struct sched_request){0}, now, &evicted) !=
			    SCHED_OK)
				bench_fail("submit refused");
			struct sched_item *d = sched_next(lane, now);
			if (d != spare)
				bench_fail("sched_next did not dispatch");
			sched_complete(lane, d, SCHED_TRANSIENT, now);
			sched_retry(lane, d, far + (int64_t)(bench_rand(&seed) % 1000000000));
			(void)sched_wake_at(lane, now);
			spare = &items[bench_rand(&seed) % (waiting + 1)];
			if (spare->state != SCHED_RETRY_WAIT)
				spare = d;
			sched_cancel(lane, spare);
		}
		t1 = bench_ns();
	} while (t1 - t0 < BENCH_MIN_NS || cycles < BENCH_MIN_CYCLES);
	for (unsigned i = 0; i <= waiting; i++)
		sched_cancel(lane, &items[i]);
	registry_free(reg, NULL, NULL);
	free(items);
	return (double)(t1 - t0) / (double)cycles;
}

static double bench_agents(struct config *cfg, unsigned depth)
{
	int64_t now = 1000000;
	enum agents_mode mode = cfg->agents.mode;
	cfg->agents.mode = AGENTS_SERIALIZE;
	struct registry *reg;
	struct sched_lane *lane = bench_one_lane(cfg, &reg, depth + 2, now);
	struct sched_item *items = calloc(depth + 2, sizeof(*items));
	if (items == NULL)
		bench_fail("out of memory");
	/* Agent 1: one in flight, `depth` waiting behind it. */
	for (unsigned i = 0; i <= depth; i++)
		if (sched_submit(lane, &items[i], &(struct sched_request){.agent = 1, .flow = 1},
		                 now, &evicted) != SCHED_OK)
			bench_fail("submit refused");
	if (sched_next(lane, now) != &items[0])
		bench_fail("sched_next did not dispatch");
	struct sched_item *other = &items[depth + 1];
	long cycles = 0;
	int64_t t0 = bench_ns(), t1;
	do {
		for (int k = 0; k < 1024; k++, cycles++, now++) {
			if (sched_submit(lane, other,
			                 &(struct sched_request){.agent = 2, .flow = 2}, now,
			                 &evicted) != SCHED_OK)
				bench_fail("submit refused");
			struct sched_item *d = sched_next(lane, now);
			if (d != other)
				bench_fail("sched_next did not pass over the busy agent");
			(void)sched_wake_at(lane, now);
			sched_complete(lane, d, SCHED_SUCCESS, now);
		}
		t1 = bench_ns();
	} while (t1 - t0 < BENCH_MIN_NS || cycles < BENCH_MIN_CYCLES);
	sched_complete(lane, &items[0], SCHED_SUCCESS, now);
	for (unsigned i = 1; i <= depth; i++)
		sched_cancel(lane, &items[i]);
	registry_free(reg, NULL, NULL);
	free(items);
	cfg->agents.mode = mode;
	return (double)(t1 - t0) / (double)cycles;
}

int main(void)
{
	char err[512];
	profile_install(); /* the built-in providers, as main() does */
	struct config *cfg = config_load(NULL, NULL, err, sizeof(err));
	if (cfg == NULL)
		bench_fail(err);
	static const unsigned ns[] = {1, 1000, 100000};
	static const unsigned depths[] = {10, 100000};

	printf("{\"lanes\":[");
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct bench_lanes_result r = bench_lanes(cfg, ns[i]);
		printf("%s{\"n\":%u,\"bytes_per_lane\":%.0f,\"dispatch_ns\":%.1f}", i ? "," : "",
		       ns[i], r.bytes_per_lane, r.dispatch_ns);
	}
	printf("],\"queues\":[");
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++)
		printf("%s{\"depth\":%u,\"dispatch_ns\":%.1f}", i ? "," : "", depths[i],
		       bench_queue(cfg, depths[i]));
	printf("],\"retries\":[");
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++)
		printf("%s{\"waiting\":%u,\"dispatch_ns\":%.1f}", i ? "," : "", depths[i],
		       bench_retries(cfg, depths[i]));
	printf("],\"agents\":[");
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++)
		printf("%s{\"depth\":%u,\"dispatch_ns\":%.1f}", i ? "," : "", depths[i],
		       bench_agents(cfg, depths[i]));
	printf("]}\n");
	config_free(cfg);
	return 0;
}
