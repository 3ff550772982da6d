/* SPDX-License-Identifier: Apache-2.0 */
/* registry: one lane per (provider, key), per-key plans, the max_lanes cap
 * (LRU eviction of idle lanes), idle eviction, memory per lane. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/intern.h"
#include "sched/registry.h"
#include "sched/sched_lane-t.h"
#include "sched/scope.h"
#include "unit.h"

static struct config *cfg;
static struct registry *reg;
static int evicted;
static char evicted_keys[8][24]; /* key_id of the first evicted lanes, in order */
static struct sched_item *ev;    /* what sched_submit evicted: never, here */

static void count_evicted(struct sched_lane *lane, void *arg)
{
	(void)arg;
	if (evicted < 8)
		snprintf(evicted_keys[evicted], sizeof(evicted_keys[0]), "%s", lane->key_id);
	evicted++;
}

static struct config *load(const char *yaml)
{
	char path[] = "/tmp/pacerd-test-registry-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	char err[512];
	struct config *c = config_load(path, NULL, err, sizeof(err));
	unlink(path);
	ck_assert_msg(c != NULL, "%s", err);
	return c;
}

static void setup(void)
{
	cfg = load("limits: { max_lanes: 2 }\n"
	           "plans:\n"
	           "  slow: { max_requests_per_second: 5 }\n"
	           "keys:\n"
	           "  - { provider: openai, key_sha256: ba7816bf8f01, plan: slow }\n");
	reg = registry_new(1);
	evicted = 0;
}

static void teardown(void)
{
	registry_free(reg, count_evicted, NULL);
	config_free(cfg);
}

/* sha256("abc") */
static const char *ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char *OTHER = "0000000000000000000000000000000000000000000000000000000000000001";

START_TEST(same_key_same_lane)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	struct sched_lane *a = registry_key_lane(reg, cfg, openai, ABC, 1000, count_evicted, NULL);
	struct sched_lane *b = registry_key_lane(reg, cfg, openai, ABC, 1001, count_evicted, NULL);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(a, b);
	ck_assert_int_eq(registry_count(reg), 1);
	ck_assert_str_eq(a->key_id, "ba7816bf8f01");
}
END_TEST

START_TEST(providers_and_anonymous_are_separate)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	const struct provider_conf *anthropic = config_provider(cfg, "anthropic");
	struct sched_lane *a = registry_key_lane(reg, cfg, openai, ABC, 1000, NULL, NULL);
	struct sched_lane *b = registry_key_lane(reg, cfg, anthropic, ABC, 1000, NULL, NULL);
	ck_assert_ptr_ne(a, b);
	teardown();
	setup();
	openai = config_provider(cfg, "openai");
	struct sched_lane *anon = registry_key_lane(reg, cfg, openai, NULL, 1000, NULL, NULL);
	ck_assert_ptr_nonnull(anon);
	ck_assert_str_eq(anon->key_id, "anonymous");
	ck_assert_ptr_eq(anon, registry_key_lane(reg, cfg, openai, "", 1000, NULL, NULL));
}
END_TEST

START_TEST(plan_by_key_prefix)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	ck_assert_str_eq(config_plan_for(cfg, openai, ABC, NULL)->name, "slow");
	ck_assert_str_eq(config_plan_for(cfg, openai, OTHER, NULL)->name, "default");
	ck_assert_str_eq(config_plan_for(cfg, openai, NULL, NULL)->name, "default");
	ck_assert_str_eq(config_plan_for(cfg, config_provider(cfg, "anthropic"), ABC, NULL)->name,
	                 "default");
	struct sched_lane *l = registry_key_lane(reg, cfg, openai, ABC, 1000, NULL, NULL);
	ck_assert_str_eq(l->plan->name, "slow");
}
END_TEST

START_TEST(cap_evicts_one_idle_lane)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, openai, ABC, 1000, count_evicted, NULL));
	ck_assert_ptr_nonnull(
	    registry_key_lane(reg, cfg, openai, OTHER, 1001, count_evicted, NULL));
	/* Both idle: a third key takes the place of the older one only. */
	ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, openai, NULL, 1002, count_evicted, NULL));
	ck_assert_int_eq(evicted, 1);
	ck_assert_str_eq(evicted_keys[0], "ba7816bf8f01");
	ck_assert_int_eq(registry_count(reg), 2);
	ck_assert_int_eq(registry_idle_count(reg), 2);
}
END_TEST

/* A request through the lane at `now`: it leaves the lane idle, and the most
 * recently used. */
static void use(struct sched_lane *l, int64_t now)
{
	struct sched_item it;
	ck_assert_int_eq(sched_submit(l, &it, &(struct sched_request){0}, now, &ev), SCHED_OK);
	ck_assert_ptr_eq(sched_next(l, now), &it);
	sched_complete(l, &it, SCHED_SUCCESS, now);
	ck_assert(sched_lane_idle(l));
}

/* Key hashes whose 12 first digits (the key_id) tell them apart. */
static void key(int i, char out[65])
{
	snprintf(out, 65, "%012x%052x", i, 0);
}

START_TEST(cap_evicts_the_least_recently_used)
{
	config_free(cfg);
	cfg = load("limits: { max_lanes: 4 }\n");
	const struct provider_conf *openai = config_provider(cfg, "openai");
	char k[65];
	struct sched_lane *l[4];
	for (int i = 0; i < 4; i++) {
		key(i, k);
		l[i] = registry_key_lane(reg, cfg, openai, k, 1000 + i, count_evicted, NULL);
		ck_assert_ptr_nonnull(l[i]);
	}
	/* Used in the order 2, 0, 3, 1: 2 is now the least recently used. */
	use(l[2], 2000);
	use(l[0], 2001);
	use(l[3], 2002);
	use(l[1], 2003);
	/* A lookup of a known key is not a new lane: nothing goes. */
	key(3, k);
	ck_assert_ptr_eq(registry_key_lane(reg, cfg, openai, k, 2004, count_evicted, NULL), l[3]);
	ck_assert_int_eq(evicted, 0);

	key(4, k);
	ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, openai, k, 2005, count_evicted, NULL));
	ck_assert_int_eq(evicted, 1);
	ck_assert_str_eq(evicted_keys[0], "000000000002");
	/* The others are the same lanes as before. */
	for (int i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		key(i, k);
		ck_assert_ptr_eq(registry_key_lane(reg, cfg, openai, k, 2006, count_evicted, NULL),
		                 l[i]);
	}
	ck_assert_int_eq(evicted, 1);
	/* Next in line: 0, then 3 (1 was used last, the new lane 4 after it). */
	key(5, k);
	registry_key_lane(reg, cfg, openai, k, 2007, count_evicted, NULL);
	key(6, k);
	registry_key_lane(reg, cfg, openai, k, 2008, count_evicted, NULL);
	ck_assert_int_eq(evicted, 3);
	ck_assert_str_eq(evicted_keys[1], "000000000000");
	ck_assert_str_eq(evicted_keys[2], "000000000003");
	ck_assert_int_eq(registry_count(reg), 4);
}
END_TEST

START_TEST(a_busy_lane_is_never_evicted)
{
	config_free(cfg);
	cfg = load("limits: { max_lanes: 4 }\n");
	const struct provider_conf *openai = config_provider(cfg, "openai");
	char k[65];
	struct sched_item q, f, w;
	struct sched_lane *l[4];
	for (int i = 0; i < 4; i++) {
		key(i, k);
		l[i] = registry_key_lane(reg, cfg, openai, k, 1000 + i, count_evicted, NULL);
	}
	/* The three oldest busy three ways: queued, in flight, retry waiting. */
	sched_submit(l[0], &q, &(struct sched_request){0}, 1000, &ev);
	sched_submit(l[1], &f, &(struct sched_request){0}, 1001, &ev);
	ck_assert_ptr_eq(sched_next(l[1], 1001), &f);
	sched_submit(l[2], &w, &(struct sched_request){0}, 1002, &ev);
	ck_assert_ptr_eq(sched_next(l[2], 1002), &w);
	sched_complete(l[2], &w, SCHED_TRANSIENT, 1003);
	sched_retry(l[2], &w, 500000);
	ck_assert_int_eq(registry_idle_count(reg), 1);

	key(10, k);
	ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, openai, k, 5000, count_evicted, NULL));
	ck_assert_int_eq(evicted, 1);
	ck_assert_str_eq(evicted_keys[0], "000000000003"); /* the idle one */
	/* The new lane 10 is idle: the next new key takes its place... */
	key(11, k);
	ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, openai, k, 5001, count_evicted, NULL));
	ck_assert_int_eq(evicted, 2);
	ck_assert_str_eq(evicted_keys[1], "00000000000a");
	/* ...and once it is busy too, a new key is refused. */
	struct sched_item x;
	sched_submit(registry_key_lane(reg, cfg, openai, k, 5002, count_evicted, NULL), &x,
	             &(struct sched_request){0}, 5002, &ev);
	key(12, k);
	ck_assert_ptr_null(registry_key_lane(reg, cfg, openai, k, 5003, count_evicted, NULL));
	ck_assert_int_eq(evicted, 2);
	ck_assert_int_eq(registry_evict_idle(reg, 1000000, 1, count_evicted, NULL), 0);
	for (int i = 0; i < 3; i++) {
		key(i, k);
		ck_assert_ptr_eq(registry_key_lane(reg, cfg, openai, k, 5004, count_evicted, NULL),
		                 l[i]);
	}
	sched_cancel(l[0], &q);
	sched_complete(l[1], &f, SCHED_SUCCESS, 5005);
	sched_cancel(l[2], &w);
	key(11, k);
	sched_cancel(registry_key_lane(reg, cfg, openai, k, 5006, count_evicted, NULL), &x);
	ck_assert_int_eq(registry_idle_count(reg), 4);
}
END_TEST

START_TEST(idle_sweep_evicts_exactly_the_expired)
{
	config_free(cfg);
	cfg = load("limits: { max_lanes: 100 }\n");
	const struct provider_conf *openai = config_provider(cfg, "openai");
	char k[65];
	struct sched_item busy_item;
	/* Lane 0 busy since 500; lanes 1..5 last used at 1000, 2000, ... 5000. */
	key(0, k);
	struct sched_lane *busy = registry_key_lane(reg, cfg, openai, k, 500, count_evicted, NULL);
	sched_submit(busy, &busy_item, &(struct sched_request){0}, 500, &ev);
	for (int i = 5; i >= 1; i--) { /* created in reverse: the list follows use */
		key(i, k);
		registry_key_lane(reg, cfg, openai, k, 600, count_evicted, NULL);
	}
	for (int i = 1; i <= 5; i++) {
		key(i, k);
		use(registry_key_lane(reg, cfg, openai, k, i * 1000, count_evicted, NULL),
		    i * 1000);
	}
	ck_assert_int_eq(registry_evict_idle(reg, 10999, 10000, count_evicted, NULL), 0);
	/* At 12500 with a TTL of 10 s: idle since 1000 and 2000 expire, 3000 not. */
	ck_assert_int_eq(registry_evict_idle(reg, 12500, 10000, count_evicted, NULL), 2);
	ck_assert_int_eq(evicted, 2);
	key(1, k);
	ck_assert(strncmp(evicted_keys[0], k, 12) == 0);
	key(2, k);
	ck_assert(strncmp(evicted_keys[1], k, 12) == 0);
	ck_assert_int_eq(registry_count(reg), 4);
	ck_assert_int_eq(registry_evict_idle(reg, 15000, 10000, count_evicted, NULL), 3);
	ck_assert_int_eq(registry_count(reg), 1); /* the busy lane, idle-aged or not */
	key(0, k);
	ck_assert_ptr_eq(registry_key_lane(reg, cfg, openai, k, 15000, count_evicted, NULL), busy);
	sched_cancel(busy, &busy_item);
	ck_assert_int_eq(registry_evict_idle(reg, 15000, 0, count_evicted, NULL), 1);
	ck_assert_int_eq(registry_count(reg), 0);
}
END_TEST

/* 1,000 lanes through the registry: each costs at most 1 KiB of heap,
 * counted by the registry's own accounting and, where malloc can tell (not
 * under the sanitizers, whose allocator mallinfo2 does not see), by the heap's
 * growth with malloc's overhead included. */
START_TEST(a_lane_takes_at_most_1_kib)
{
	config_free(cfg);
	cfg = load("limits: { max_lanes: 100000 }\n");
	const struct provider_conf *openai = config_provider(cfg, "openai");
	char k[65];
	const int n = 1000;
	registry_free(reg, NULL, NULL);
	struct mallinfo2 m0 = mallinfo2();
	reg = registry_new(1);
	for (int i = 0; i < n; i++) {
		key(i, k);
		ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, openai, k, 1000, NULL, NULL));
	}
	struct mallinfo2 m1 = mallinfo2();
	size_t counted = registry_heap_bytes(reg);
	ck_assert_uint_le(counted / n, 1024);
	size_t grown = (m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd);
	ck_assert_uint_le(grown / n, 1024);
	/* The struct itself, with room left for the registry's entry (24 B)
	 * and the allocator's header within the 1 KiB (it is 952 B with the
	 * input and output token gates, the holds, the quota, the daily budget,
	 * and since issue 18 the scope, the model group and the cost model). */
	ck_assert_uint_le(sizeof(struct sched_lane), 960);

	/* What a lane allocates later is counted, and freed with it. */
	key(0, k);
	struct sched_lane *l = registry_key_lane(reg, cfg, openai, k, 1000, NULL, NULL);
	struct sched_item it;
	use(l, 1000);
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_TOKENS] = (struct rlh_budget){
	    .has_remaining = true, .has_reset = true, .remaining = 5000, .reset_ms = 1000};
	sched_submit(l, &it, &(struct sched_request){.cost_prompt = 10, .cost_output = 10}, 1001,
	             &ev);
	ck_assert_ptr_eq(sched_next(l, 1001), &it);
	sched_observe(l, &it, &h, false, 1002);
	sched_complete(l, &it, SCHED_SUCCESS, 1002);
	ck_assert_ptr_nonnull(sched_learned(l, RLH_TOKENS));
	ck_assert_uint_gt(registry_heap_bytes(reg), counted);
	ck_assert_int_eq(registry_evict_idle(reg, 1003, 0, NULL, NULL), n);
}
END_TEST

START_TEST(cap_refuses_when_nothing_is_idle)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	struct sched_item a, b;
	struct sched_lane *la = registry_key_lane(reg, cfg, openai, ABC, 1000, count_evicted, NULL);
	struct sched_lane *lb =
	    registry_key_lane(reg, cfg, openai, OTHER, 1000, count_evicted, NULL);
	sched_submit(la, &a, &(struct sched_request){0}, 1000, &ev);
	sched_submit(lb, &b, &(struct sched_request){0}, 1000, &ev);
	ck_assert_ptr_null(registry_key_lane(reg, cfg, openai, NULL, 1000, count_evicted, NULL));
	ck_assert_int_eq(evicted, 0);
	sched_cancel(la, &a);
	sched_cancel(lb, &b);
}
END_TEST

START_TEST(idle_ttl)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	struct sched_item it;
	struct sched_lane *busy = registry_key_lane(reg, cfg, openai, ABC, 1000, NULL, NULL);
	registry_key_lane(reg, cfg, openai, OTHER, 1000, NULL, NULL);
	sched_submit(busy, &it, &(struct sched_request){0}, 1000, &ev);
	ck_assert_int_eq(registry_evict_idle(reg, 5000, 10000, count_evicted, NULL), 0);
	ck_assert_int_eq(registry_evict_idle(reg, 11000, 10000, count_evicted, NULL), 1);
	ck_assert_int_eq(registry_count(reg), 1);
	sched_cancel(busy, &it);
}
END_TEST

START_TEST(grows_past_initial_buckets)
{
	config_free(cfg);
	cfg = load("limits: { max_lanes: 100000 }\n");
	const struct provider_conf *openai = config_provider(cfg, "openai");
	char key[65];
	struct sched_lane *first = NULL;
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "%064x", i);
		struct sched_lane *l = registry_key_lane(reg, cfg, openai, key, 1000, NULL, NULL);
		ck_assert_ptr_nonnull(l);
		if (i == 0)
			first = l;
	}
	ck_assert_int_eq(registry_count(reg), 1000);
	snprintf(key, sizeof(key), "%064x", 0);
	ck_assert_ptr_eq(registry_key_lane(reg, cfg, openai, key, 1000, NULL, NULL), first);
}
END_TEST

static void count_seen(struct sched_lane *lane, void *arg)
{
	int *seen = arg;
	seen[strtol(lane->key_id, NULL, 16)]++;
}

/* A walk a slice at a time sees every lane once while nothing changes, goes
 * on past lanes evicted between slices, and starts over when the table
 * grows. */
START_TEST(walk_in_slices)
{
	config_free(cfg);
	cfg = load("limits: { max_lanes: 100000, idle_ttl_s: 1 }\n");
	const struct provider_conf *openai = config_provider(cfg, "openai");
	char key[65];
	static int seen[4096];
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "%012x%052d", i, 0);
		ck_assert_ptr_nonnull(
		    registry_key_lane(reg, cfg, openai, key, 1000 + i, NULL, NULL));
	}
	struct registry_walk w;
	registry_walk_start(reg, &w);
	int slices = 0;
	enum registry_walk_state st;
	while ((st = registry_walk_slice(reg, &w, 7, count_seen, seen)) == REGISTRY_WALK_MORE)
		slices++;
	ck_assert_int_eq(st, REGISTRY_WALK_DONE);
	ck_assert_int_ge(slices, 300 / 7 - 1);
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(seen[i], 1);
	/* lanes evicted between slices: the walk goes on to the end */
	memset(seen, 0, sizeof(seen));
	registry_walk_start(reg, &w);
	ck_assert_int_eq(registry_walk_slice(reg, &w, 50, count_seen, seen), REGISTRY_WALK_MORE);
	ck_assert_uint_eq(registry_evict_idle(reg, 1000 + 100 + 1000, 1000, NULL, NULL), 101);
	while ((st = registry_walk_slice(reg, &w, 50, count_seen, seen)) == REGISTRY_WALK_MORE)
		;
	ck_assert_int_eq(st, REGISTRY_WALK_DONE);
	for (int i = 101; i < 300; i++)
		ck_assert_int_le(seen[i], 2); /* at most twice: around the table's end */
	/* grown between slices: over again */
	registry_walk_start(reg, &w);
	ck_assert_int_eq(registry_walk_slice(reg, &w, 5, count_seen, seen), REGISTRY_WALK_MORE);
	for (int i = 300; i < 2000; i++) {
		snprintf(key, sizeof(key), "%012x%052d", i, 0);
		ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, openai, key, 5000, NULL, NULL));
	}
	ck_assert_int_eq(registry_walk_slice(reg, &w, 5, count_seen, seen), REGISTRY_WALK_AGAIN);
	memset(seen, 0, sizeof(seen));
	while ((st = registry_walk_slice(reg, &w, 64, count_seen, seen)) == REGISTRY_WALK_MORE)
		;
	for (int i = 101; i < 2000; i++)
		ck_assert_int_eq(seen[i], 1);
}
END_TEST

/* A lane is (provider, scope, model group): the same key's requests for two
 * models are two lanes; two keys in one scope and model share one; a model
 * group is interned once however many lanes name it; the plan follows the
 * model (model_plans). */
START_TEST(lanes_by_scope_and_model)
{
	teardown();
	cfg = load("plans:\n"
	           "  small: { max_requests_per_second: 20 }\n"
	           "  big: { max_requests_per_second: 2 }\n"
	           "providers:\n"
	           "  openai:\n"
	           "    model_plans: { \"gpt-big*\": big, \"gpt-small\": small }\n");
	reg = registry_new(7);
	evicted = 0;
	const struct provider_conf *openai = config_provider(cfg, "openai");
	struct intern *names = registry_intern(reg);
	const char *big = intern_get(names, "gpt-big", 7);
	const char *small = intern_get(names, "gpt-small", 9);
	struct registry_lane_id id = {
	    .scope = registry_key_scope(ABC), .scope_name = "ba7816bf8f01", .key_hash = ABC};
	id.model = big;
	struct sched_lane *lb = registry_lane(reg, cfg, openai, &id, 1000, NULL, NULL);
	id.model = small;
	struct sched_lane *ls = registry_lane(reg, cfg, openai, &id, 1000, NULL, NULL);
	id.model = NULL;
	struct sched_lane *ln = registry_lane(reg, cfg, openai, &id, 1000, NULL, NULL);
	ck_assert_ptr_nonnull(lb);
	ck_assert_ptr_nonnull(ls);
	ck_assert_ptr_nonnull(ln);
	ck_assert_ptr_ne(lb, ls);
	ck_assert_ptr_ne(lb, ln);
	ck_assert_ptr_ne(ls, ln);
	ck_assert_str_eq(lb->plan->name, "big");
	ck_assert_str_eq(ls->plan->name, "small");
	ck_assert_str_eq(ln->plan->name, "default");
	ck_assert_str_eq(sched_lane_model(lb), "gpt-big");
	ck_assert_ptr_null(sched_lane_model(ln));
	ck_assert_ptr_eq(ln, registry_key_lane(reg, cfg, openai, ABC, 1000, NULL, NULL));

	/* Two keys in one identity scope, one model: one lane, named by the
	 * scope; each key alone is another. */
	struct registry_lane_id shared = {.scope = scope_id(SCOPE_IDENTITY, 0xabcdef12345678),
	                                  .scope_name = "id:00abcdef1234",
	                                  .model = big,
	                                  .key_hash = ABC};
	struct sched_lane *s1 = registry_lane(reg, cfg, openai, &shared, 1000, NULL, NULL);
	shared.key_hash = OTHER;
	struct sched_lane *s2 = registry_lane(reg, cfg, openai, &shared, 1000, NULL, NULL);
	ck_assert_ptr_eq(s1, s2);
	ck_assert_ptr_ne(s1, lb);
	ck_assert_str_eq(s1->key_id, "id:00abcdef1234");
	ck_assert_int_eq(registry_count(reg), 4);

	/* The lanes hold the names: the caller's references can go. */
	intern_put(names, big);
	intern_put(names, small);
	ck_assert_uint_eq(intern_count(names), 2);
	ck_assert_ptr_eq(registry_lane(reg, cfg, openai, &shared, 1000, NULL, NULL), s1);
}
END_TEST

/* Keys whose hashes share their first 64 bits are still two lanes. */
START_TEST(key_lanes_compare_the_whole_hash)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	const char *k1 = "1111111111111111000000000000000000000000000000000000000000000001";
	const char *k2 = "1111111111111111000000000000000000000000000000000000000000000002";
	ck_assert_uint_eq(registry_key_scope(k1), registry_key_scope(k2));
	struct sched_lane *a = registry_key_lane(reg, cfg, openai, k1, 1000, NULL, NULL);
	struct sched_lane *b = registry_key_lane(reg, cfg, openai, k2, 1000, NULL, NULL);
	ck_assert_ptr_ne(a, b);
	ck_assert_ptr_eq(a, registry_key_lane(reg, cfg, openai, k1, 1000, NULL, NULL));
}
END_TEST

static Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("registry");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, same_key_same_lane);
	tcase_add_test(tc, providers_and_anonymous_are_separate);
	tcase_add_test(tc, plan_by_key_prefix);
	tcase_add_test(tc, cap_evicts_one_idle_lane);
	tcase_add_test(tc, cap_evicts_the_least_recently_used);
	tcase_add_test(tc, a_busy_lane_is_never_evicted);
	tcase_add_test(tc, idle_sweep_evicts_exactly_the_expired);
	tcase_add_test(tc, a_lane_takes_at_most_1_kib);
	tcase_add_test(tc, cap_refuses_when_nothing_is_idle);
	tcase_add_test(tc, idle_ttl);
	tcase_add_test(tc, grows_past_initial_buckets);
	tcase_add_test(tc, walk_in_slices);
	tcase_add_test(tc, lanes_by_scope_and_model);
	tcase_add_test(tc, key_lanes_compare_the_whole_hash);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("registry", registry_suite)
