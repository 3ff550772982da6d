/* registry: one lane per (provider, key), per-key plans, the max_lanes cap,
 * idle eviction. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "registry.h"
#include "unit.h"

static struct config *cfg;
static struct registry *reg;
static int evicted;

static void count_evicted(struct sched_lane *lane, void *arg)
{
	(void)lane;
	(void)arg;
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
	reg = registry_new();
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
	struct sched_lane *a = registry_lane(reg, cfg, openai, ABC, 1000, count_evicted, NULL);
	struct sched_lane *b = registry_lane(reg, cfg, openai, ABC, 1001, count_evicted, NULL);
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
	struct sched_lane *a = registry_lane(reg, cfg, openai, ABC, 1000, NULL, NULL);
	struct sched_lane *b = registry_lane(reg, cfg, anthropic, ABC, 1000, NULL, NULL);
	ck_assert_ptr_ne(a, b);
	teardown();
	setup();
	openai = config_provider(cfg, "openai");
	struct sched_lane *anon = registry_lane(reg, cfg, openai, NULL, 1000, NULL, NULL);
	ck_assert_ptr_nonnull(anon);
	ck_assert_str_eq(anon->key_id, "anonymous");
	ck_assert_ptr_eq(anon, registry_lane(reg, cfg, openai, "", 1000, NULL, NULL));
}
END_TEST

START_TEST(plan_by_key_prefix)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	ck_assert_str_eq(registry_plan_for(cfg, openai, ABC)->name, "slow");
	ck_assert_str_eq(registry_plan_for(cfg, openai, OTHER)->name, "default");
	ck_assert_str_eq(registry_plan_for(cfg, openai, NULL)->name, "default");
	ck_assert_str_eq(registry_plan_for(cfg, config_provider(cfg, "anthropic"), ABC)->name,
	                 "default");
	struct sched_lane *l = registry_lane(reg, cfg, openai, ABC, 1000, NULL, NULL);
	ck_assert_str_eq(l->plan->name, "slow");
}
END_TEST

START_TEST(cap_evicts_one_idle_lane)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	ck_assert_ptr_nonnull(registry_lane(reg, cfg, openai, ABC, 1000, count_evicted, NULL));
	ck_assert_ptr_nonnull(registry_lane(reg, cfg, openai, OTHER, 1001, count_evicted, NULL));
	/* Both idle: a third key takes the place of one of them only. */
	ck_assert_ptr_nonnull(registry_lane(reg, cfg, openai, NULL, 1002, count_evicted, NULL));
	ck_assert_int_eq(evicted, 1);
	ck_assert_int_eq(registry_count(reg), 2);
}
END_TEST

START_TEST(cap_refuses_when_nothing_is_idle)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	struct sched_item a, b;
	struct sched_lane *la = registry_lane(reg, cfg, openai, ABC, 1000, count_evicted, NULL);
	struct sched_lane *lb = registry_lane(reg, cfg, openai, OTHER, 1000, count_evicted, NULL);
	sched_submit(la, &a, 0, 0, 0, 1000);
	sched_submit(lb, &b, 0, 0, 0, 1000);
	ck_assert_ptr_null(registry_lane(reg, cfg, openai, NULL, 1000, count_evicted, NULL));
	ck_assert_int_eq(evicted, 0);
	sched_cancel(la, &a);
	sched_cancel(lb, &b);
}
END_TEST

START_TEST(idle_ttl)
{
	const struct provider_conf *openai = config_provider(cfg, "openai");
	struct sched_item it;
	struct sched_lane *busy = registry_lane(reg, cfg, openai, ABC, 1000, NULL, NULL);
	registry_lane(reg, cfg, openai, OTHER, 1000, NULL, NULL);
	sched_submit(busy, &it, 0, 0, 0, 1000);
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
		struct sched_lane *l = registry_lane(reg, cfg, openai, key, 1000, NULL, NULL);
		ck_assert_ptr_nonnull(l);
		if (i == 0)
			first = l;
	}
	ck_assert_int_eq(registry_count(reg), 1000);
	snprintf(key, sizeof(key), "%064x", 0);
	ck_assert_ptr_eq(registry_lane(reg, cfg, openai, key, 1000, NULL, NULL), first);
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
	tcase_add_test(tc, cap_refuses_when_nothing_is_idle);
	tcase_add_test(tc, idle_ttl);
	tcase_add_test(tc, grows_past_initial_buckets);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("registry", registry_suite)
