/* SPDX-License-Identifier: Apache-2.0 */
/* metrics: the text a histogram (core/stats) writes, label escaping, the per-provider table across
 * a reload, and the top_lanes cut of the per-lane series. */
#include <check.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/metrics.h"
#include "core/config.h"
#include "core/stats.h"
#include "proxy/reqstats.h"
#include "sched/registry.h"
#include "sched/sched_lane-t.h"
#include "unit.h"

static const double b5[] = {1, 2, 3, 5, 10};

/* The evbuffer's text, NUL-terminated; the caller frees it. */
static char *text_of(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	evbuffer_copyout(b, s, n);
	s[n] = '\0';
	return s;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

START_TEST(hist_text)
{
	struct stats_hist h;
	stats_hist_init(&h, b5, 5);
	stats_hist_observe(&h, 2);
	stats_hist_observe(&h, 20);
	struct evbuffer *b = evbuffer_new();
	metrics_hist_write(b, "x_attempts", "provider=\"p\"", &h);
	metrics_hist_write(b, "y", "", &h);
	char *s = text_of(b);
	ck_assert_str_eq(s, "x_attempts_bucket{provider=\"p\",le=\"1\"} 0\n"
	                    "x_attempts_bucket{provider=\"p\",le=\"2\"} 1\n"
	                    "x_attempts_bucket{provider=\"p\",le=\"3\"} 1\n"
	                    "x_attempts_bucket{provider=\"p\",le=\"5\"} 1\n"
	                    "x_attempts_bucket{provider=\"p\",le=\"10\"} 1\n"
	                    "x_attempts_bucket{provider=\"p\",le=\"+Inf\"} 2\n"
	                    "x_attempts_sum{provider=\"p\"} 22\n"
	                    "x_attempts_count{provider=\"p\"} 2\n"
	                    "y_bucket{le=\"1\"} 0\n"
	                    "y_bucket{le=\"2\"} 1\n"
	                    "y_bucket{le=\"3\"} 1\n"
	                    "y_bucket{le=\"5\"} 1\n"
	                    "y_bucket{le=\"10\"} 1\n"
	                    "y_bucket{le=\"+Inf\"} 2\n"
	                    "y_sum 22\n"
	                    "y_count 2\n");
	free(s);
	evbuffer_free(b);
}
END_TEST

START_TEST(label_escaping)
{
	struct evbuffer *b = evbuffer_new();
	metrics_label_value(b, "a\"b\\c\nd");
	char *s = text_of(b);
	ck_assert_str_eq(s, "\"a\\\"b\\\\c\\nd\"");
	free(s);
	evbuffer_free(b);
}
END_TEST

static struct config *defaults(void)
{
	char err[256];
	struct config *cfg = config_load(NULL, NULL, err, sizeof(err));
	ck_assert_msg(cfg != NULL, "%s", err);
	ck_assert_uint_ge(cfg->n_providers, 1);
	return cfg;
}

static char *scrape(struct reqstats *m, struct registry *reg, unsigned top)
{
	struct metrics_process p = {0};
	struct evbuffer *b = evbuffer_new();
	ck_assert_int_eq(metrics_write(b, m, &p, reg, top, 0), 0);
	char *s = text_of(b);
	evbuffer_free(b);
	return s;
}

START_TEST(series_survive_reload_by_name)
{
	struct config *a = defaults(), *c = defaults();
	struct reqstats *m = reqstats_new();
	struct registry *reg = registry_new(1);
	reqstats_bind(m, a);
	const struct provider_conf *pa = &a->providers[0];
	struct reqstats_request rq = {.queue_ms = 5,
	                              .first_byte_ms = 100,
	                              .duration_ms = 150,
	                              .attempts = 2,
	                              .tokens_estimated = 40,
	                              .tokens_reported = 30};
	reqstats_observe(m, pa, &rq);
	/* A reload: a new configuration with the same names. A request accepted
	 * under the old one still counts in its provider's row. */
	reqstats_bind(m, c);
	reqstats_observe(m, pa, &rq);
	rq.queue_ms = -1;
	rq.first_byte_ms = -1;
	rq.tokens_reported = -1;
	reqstats_observe(m, &c->providers[0], &rq);
	reqstats_observe(m, NULL, &rq);

	char *s = scrape(m, reg, 100);
	char line[256];
	snprintf(line, sizeof(line), "pacerd_request_duration_seconds_count{provider=\"%s\"} 3\n",
	         pa->name);
	ck_assert_msg(strstr(s, line) != NULL, "%s", s);
	snprintf(line, sizeof(line), "pacerd_queue_wait_seconds_count{provider=\"%s\"} 2\n",
	         pa->name);
	ck_assert_msg(strstr(s, line) != NULL, "%s", s);
	snprintf(line, sizeof(line), "pacerd_request_attempts_bucket{provider=\"%s\",le=\"1\"} 0\n",
	         pa->name);
	ck_assert_msg(strstr(s, line) != NULL, "%s", s);
	snprintf(line, sizeof(line), "pacerd_request_attempts_bucket{provider=\"%s\",le=\"2\"} 3\n",
	         pa->name);
	ck_assert_msg(strstr(s, line) != NULL, "%s", s);
	snprintf(line, sizeof(line), "pacerd_tokens_estimated_total{provider=\"%s\"} 120\n",
	         pa->name);
	ck_assert_msg(strstr(s, line) != NULL, "%s", s);
	snprintf(line, sizeof(line), "pacerd_tokens_reported_total{provider=\"%s\"} 60\n",
	         pa->name);
	ck_assert_msg(strstr(s, line) != NULL, "%s", s);
	/* One series per provider name, however many reloads. */
	snprintf(line, sizeof(line), "pacerd_request_duration_seconds_count{provider=\"%s\"}",
	         pa->name);
	ck_assert_uint_eq(count_of(s, line), 1);
	/* Every family once, with HELP and TYPE. */
	ck_assert_uint_eq(count_of(s, "# TYPE pacerd_request_duration_seconds histogram\n"), 1);
	ck_assert_uint_eq(count_of(s, "# HELP pacerd_request_duration_seconds "), 1);
	ck_assert_uint_eq(count_of(s, "# TYPE "), count_of(s, "# HELP "));
	ck_assert(strstr(s, "_ms") == NULL);
	free(s);
	registry_free(reg, NULL, NULL);
	reqstats_free(m);
	config_free(a);
	config_free(c);
}
END_TEST

START_TEST(top_lanes_most_dispatched)
{
	struct config *cfg = defaults();
	struct reqstats *m = reqstats_new();
	reqstats_bind(m, cfg);
	struct registry *reg = registry_new(1);
	const struct provider_conf *prov = &cfg->providers[0];
	for (int i = 0; i < 10; i++) {
		char hash[65];
		snprintf(hash, sizeof(hash), "%064x", i + 1);
		struct sched_lane *lane =
		    registry_key_lane(reg, cfg, prov, hash, 1000 + i, NULL, NULL);
		ck_assert_ptr_nonnull(lane);
		lane->stats.dispatched = (uint64_t)((i * 7) % 10); /* 0 7 4 1 8 5 2 9 6 3 */
		/* Two lanes refusing, neither among the 3 most dispatched. */
		if (i == 0)
			lane->st.admission = LANE_QUOTA;
		if (i == 3)
			lane->st.admission = LANE_DAY_OUT;
	}
	char *s = scrape(m, reg, 3);
	ck_assert_uint_eq(count_of(s, "\npacerd_lane_dispatched_total{"), 3);
	ck_assert_msg(strstr(s, "pacerd_lanes 10\n") != NULL, "%s", s);
	ck_assert_msg(strstr(s, "pacerd_lanes_exported 3\n") != NULL, "%s", s);
	ck_assert(strstr(s, "} 9\n") != NULL && strstr(s, "} 8\n") != NULL &&
	          strstr(s, "} 7\n") != NULL);
	ck_assert_msg(count_of(s, "pacerd_lane_dispatched_total{") == 3, "%s", s);
	ck_assert(strstr(s, "pacerd_lane_dispatched_total{provider") != NULL);
	ck_assert(strstr(s, "\"} 6\n") == NULL);
	/* Counted over every lane, whatever admin.top_lanes exports. */
	ck_assert_msg(strstr(s, "pacerd_lanes_refusing{state=\"quota_exhausted\"} 1\n") != NULL,
	              "%s", s);
	ck_assert_msg(strstr(s, "pacerd_lanes_refusing{state=\"daily_budget_exhausted\"} 1\n") !=
	                  NULL,
	              "%s", s);
	free(s);
	s = scrape(m, reg, 0);
	ck_assert_uint_eq(count_of(s, "pacerd_lane_dispatched_total{"), 0);
	ck_assert(strstr(s, "pacerd_lanes_refusing{state=\"quota_exhausted\"} 1\n") != NULL);
	ck_assert_uint_eq(count_of(s, "# TYPE pacerd_lane_dispatched_total counter\n"), 1);
	free(s);
	s = scrape(m, reg, 100);
	ck_assert_uint_eq(count_of(s, "pacerd_lane_dispatched_total{"), 10);
	/* queue_full, agent_busy, quota_exhausted, daily_budget_exhausted per lane */
	ck_assert_uint_eq(count_of(s, "pacerd_lane_rejected_total{"), 40);
	free(s);
	registry_free(reg, NULL, NULL);
	reqstats_free(m);
	config_free(cfg);
}
END_TEST

/* A lane whose limit follows latency shows what its controller reads; a
 * lane of refusals alone shows 0 and no latency series. */
START_TEST(latency_controlled_lanes)
{
	struct config *cfg = defaults();
	struct reqstats *m = reqstats_new();
	reqstats_bind(m, cfg);
	struct registry *reg = registry_new(1);
	const struct provider_conf *prov = &cfg->providers[0];
	char hash[65];
	snprintf(hash, sizeof(hash), "%064x", 1);
	struct sched_lane *silent = registry_key_lane(reg, cfg, prov, hash, 1000, NULL, NULL);
	sched_set_provider_silent(silent, true); /* concurrency.mode auto */
	sched_set_provider_streams(silent, true);
	ck_assert_ptr_nonnull(silent->grad);
	silent->grad->token_ms = 20;
	silent->grad->base_token_ms = 16;
	silent->grad->base_token_n = 1;
	silent->grad->queue = 0.5;
	snprintf(hash, sizeof(hash), "%064x", 2);
	ck_assert_ptr_nonnull(registry_key_lane(reg, cfg, prov, hash, 1000, NULL, NULL));
	char *s = scrape(m, reg, 100);
	ck_assert_uint_eq(count_of(s, "pacerd_lane_latency_controlled{"), 2);
	ck_assert_uint_eq(count_of(s, ",model=\"\"} 1\n"), 1); /* the silent lane's */
	ck_assert_uint_eq(count_of(s, "pacerd_lane_token_latency_seconds{"), 2);
	ck_assert(strstr(s, ",estimate=\"current\"} 0.02\n") != NULL);
	ck_assert(strstr(s, ",estimate=\"baseline\"} 0.016\n") != NULL);
	ck_assert_uint_eq(count_of(s, "pacerd_lane_first_token_seconds{"), 2);
	ck_assert_uint_eq(count_of(s, "pacerd_lane_server_queue{"), 1);
	ck_assert(strstr(s, "pacerd_lane_server_queue{provider") != NULL &&
	          strstr(s, "\"} 0.5\n") != NULL);
	ck_assert_uint_eq(count_of(s, "# TYPE "), count_of(s, "# HELP "));
	free(s);
	registry_free(reg, NULL, NULL);
	reqstats_free(m);
	config_free(cfg);
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *t = tcase_create("hist");
	tcase_add_test(t, hist_text);
	tcase_add_test(t, label_escaping);
	suite_add_tcase(s, t);
	t = tcase_create("table");
	tcase_add_test(t, series_survive_reload_by_name);
	tcase_add_test(t, top_lanes_most_dispatched);
	tcase_add_test(t, latency_controlled_lanes);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("metrics", metrics_suite)
