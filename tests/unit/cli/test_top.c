/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for top_model (the numbers and lines of `pacerd top`): rates
 * from counter differences, the sorts, truncation to the width, lanes that
 * come and go between polls, an unreachable admin. */
#include <jansson.h>
#include <string.h>

#include "cli/top_model.h"
#include "unit.h"

/* A /status lane with the fields top reads. */
static json_t *lane(const char *provider, const char *key, long long dispatched, long long signals,
                    long long queue)
{
	return json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:i,s:s,s:{s:f,s:f},s:{},s:{s:I,s:I}}",
	                 "provider", provider, "key", key, "plan", "default", "queue_depth",
	                 (json_int_t)queue, "queue_eta_ms", (json_int_t)(queue * 200), "in_flight",
	                 (json_int_t)1, "concurrency_limit", 4, "state", "open", "gates",
	                 "max_requests_per_second", 5.0, "max_requests_per_minute", 0.0, "learned",
	                 "counters", "dispatched", (json_int_t)dispatched, "capacity_signals",
	                 (json_int_t)signals);
}

/* A /status document of the given lanes (the reference is taken). */
static json_t *status(long long uptime, json_t *lanes)
{
	return json_pack("{s:I,s:I,s:{s:I,s:I,s:I},s:o}", "uptime_s", (json_int_t)uptime,
	                 "in_flight", (json_int_t)2, "responses", "2xx", (json_int_t)90, "4xx",
	                 (json_int_t)7, "5xx", (json_int_t)3, "lanes", lanes);
}

static void update(struct top_model *m, json_t *doc, int64_t now_ms)
{
	char err[128] = "";
	ck_assert_msg(top_model_update(m, doc, now_ms, err, sizeof(err)) == 0, "%s", err);
	json_decref(doc);
}

static const struct top_row *row_of(const struct top_model *m, const char *key)
{
	for (size_t i = 0; i < top_model_n_rows(m); i++)
		if (strcmp(top_model_row(m, i)->key, key) == 0)
			return top_model_row(m, i);
	return NULL;
}

/* Two lanes: a dispatched 10 then 30 (20 in 2 s: 10/s), b 5 then 9 (2/s). */
static struct top_model *two_polls(void)
{
	struct top_model *m = top_model_new();
	ck_assert_ptr_nonnull(m);
	update(m,
	       status(10, json_pack("[o,o]", lane("openai", "aaaa", 10, 1, 0),
	                            lane("anthropic", "bbbb", 5, 0, 3))),
	       1000);
	update(m,
	       status(12, json_pack("[o,o]", lane("openai", "aaaa", 30, 4, 0),
	                            lane("anthropic", "bbbb", 9, 2, 3))),
	       3000);
	return m;
}

START_TEST(rates_from_counter_differences)
{
	struct top_model *m = two_polls();
	const struct top_header *h = top_model_header(m);
	ck_assert(h->have_rate);
	ck_assert_double_eq_tol(h->req_per_s, 12.0, 1e-9);
	ck_assert_int_eq(h->uptime_s, 12);
	ck_assert_int_eq(h->lanes, 2);
	ck_assert_int_eq(h->responses_2xx, 90);
	ck_assert_int_eq(h->responses_4xx, 7);
	ck_assert_int_eq(h->responses_5xx, 3);
	ck_assert_int_eq(h->absorbed_429, 6);
	ck_assert_double_eq_tol(row_of(m, "aaaa")->dispatched_per_s, 10.0, 1e-9);
	ck_assert_double_eq_tol(row_of(m, "bbbb")->dispatched_per_s, 2.0, 1e-9);
	ck_assert_double_eq_tol(row_of(m, "aaaa")->rate_per_s, 5.0, 1e-9);
	/* 429s of the last minute: against the first poll. */
	ck_assert_int_eq(row_of(m, "aaaa")->signals_last_min, 3);
	ck_assert_int_eq(row_of(m, "bbbb")->signals_last_min, 2);
	top_model_free(m);
}
END_TEST

START_TEST(the_header_shows_the_shared_store)
{
	struct top_model *m = top_model_new();
	char buf[TOP_LINE_MAX];
	json_t *doc = status(1, json_array());
	update(m, json_incref(doc), 0);
	top_format_header(m, 0, "127.0.0.1:9090", buf, 200);
	ck_assert_ptr_null(strstr(buf, "store"));
	json_object_set_new(
	    doc, "store",
	    json_pack("{s:s,s:b,s:b}", "kind", "redis", "connected", 1, "fallback", 0));
	update(m, json_incref(doc), 1000);
	top_format_header(m, 0, "127.0.0.1:9090", buf, 200);
	ck_assert_ptr_nonnull(strstr(buf, "lanes 0  store redis up  sort: "));
	json_object_set_new(
	    doc, "store",
	    json_pack("{s:s,s:b,s:b}", "kind", "redis", "connected", 0, "fallback", 1));
	update(m, json_incref(doc), 2000);
	top_format_header(m, 0, "127.0.0.1:9090", buf, 200);
	ck_assert_ptr_nonnull(strstr(buf, "store redis DOWN (local gates)"));
	json_decref(doc);
	top_model_free(m);
}
END_TEST

START_TEST(the_header_shows_websockets_once_one_opened)
{
	struct top_model *m = top_model_new();
	char buf[TOP_LINE_MAX];
	json_t *doc = status(1, json_array());
	json_object_set_new(doc, "websockets",
	                    json_pack("{s:i,s:i,s:i}", "open", 0, "opened", 0, "turns_waiting", 0));
	update(m, json_incref(doc), 0);
	top_format_header(m, 1, "127.0.0.1:9090", buf, 200);
	ck_assert_ptr_null(strstr(buf, "websockets"));
	json_object_set_new(doc, "websockets",
	                    json_pack("{s:i,s:i,s:i}", "open", 2, "opened", 3, "turns_waiting", 1));
	update(m, json_incref(doc), 1000);
	top_format_header(m, 1, "127.0.0.1:9090", buf, 200);
	ck_assert_ptr_nonnull(strstr(buf, "websockets 2 (turns waiting 1)"));
	json_decref(doc);
	top_model_free(m);
}
END_TEST

START_TEST(first_poll_has_no_rate)
{
	struct top_model *m = top_model_new();
	update(m, status(1, json_pack("[o]", lane("openai", "aaaa", 100, 9, 0))), 0);
	ck_assert(!top_model_header(m)->have_rate);
	ck_assert_double_eq(row_of(m, "aaaa")->dispatched_per_s, 0);
	ck_assert_int_eq(row_of(m, "aaaa")->signals_last_min, 0);
	char buf[TOP_LINE_MAX];
	top_format_header(m, 0, "127.0.0.1:9090", buf, 200);
	ck_assert_ptr_nonnull(strstr(buf, "req/s -"));
	top_model_free(m);
}
END_TEST

/* The signals of the last minute forget the polls older than 60 s. */
START_TEST(signals_window_is_one_minute)
{
	struct top_model *m = top_model_new();
	for (int s = 0; s <= 90; s++)
		update(m, status(s, json_pack("[o]", lane("openai", "aaaa", s, s / 10, 0))),
		       (int64_t)s * 1000);
	/* At 90 s the baseline is the poll at 30 s: 9 - 3. */
	ck_assert_int_eq(row_of(m, "aaaa")->signals_last_min, 6);
	ck_assert_double_eq_tol(row_of(m, "aaaa")->dispatched_per_s, 1.0, 1e-9);
	top_model_free(m);
}
END_TEST

START_TEST(sort_by_each_key)
{
	struct top_model *m = top_model_new();
	update(m,
	       status(1, json_pack("[o,o,o]", lane("openai", "cccc", 0, 0, 1),
	                           lane("anthropic", "aaaa", 0, 0, 9),
	                           lane("mistral", "bbbb", 0, 0, 4))),
	       0);
	update(m,
	       status(2, json_pack("[o,o,o]", lane("openai", "cccc", 50, 0, 1),
	                           lane("anthropic", "aaaa", 10, 0, 9),
	                           lane("mistral", "bbbb", 30, 0, 4))),
	       1000);
	static const struct {
		enum top_sort by;
		const char *order[3];
	} cases[] = {
	    {TOP_SORT_ACTIVITY, {"cccc", "bbbb", "aaaa"}},
	    {TOP_SORT_QUEUE, {"aaaa", "bbbb", "cccc"}},
	    {TOP_SORT_KEY, {"aaaa", "bbbb", "cccc"}},
	    {TOP_SORT_PROVIDER, {"aaaa", "bbbb", "cccc"}}, /* anthropic, mistral, openai */
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		top_model_sort(m, cases[c].by);
		ck_assert_int_eq(top_model_sort_key(m), cases[c].by);
		for (size_t i = 0; i < 3; i++)
			ck_assert_msg(strcmp(top_model_row(m, i)->key, cases[c].order[i]) == 0,
			              "sort %s row %zu: %s", top_sort_name(cases[c].by), i,
			              top_model_row(m, i)->key);
	}
	top_model_sort(m, TOP_SORT_PROVIDER);
	/* A new poll keeps the chosen sort. */
	update(m,
	       status(3, json_pack("[o,o,o]", lane("openai", "cccc", 60, 0, 1),
	                           lane("anthropic", "aaaa", 100, 0, 9),
	                           lane("mistral", "bbbb", 30, 0, 4))),
	       2000);
	ck_assert_str_eq(top_model_row(m, 0)->provider, "anthropic");
	top_model_sort(m, TOP_SORT_ACTIVITY);
	ck_assert_str_eq(top_model_row(m, 0)->key, "aaaa"); /* 90/s now */
	ck_assert_str_eq(top_sort_name(TOP_SORT_QUEUE), "queue");
	top_model_free(m);
}
END_TEST

START_TEST(lane_appears_and_disappears)
{
	struct top_model *m = top_model_new();
	update(m, status(1, json_pack("[o]", lane("openai", "gone", 40, 0, 0))), 0);
	/* "gone" was evicted; "new" came with 6 dispatched: counted from 0. */
	update(m, status(2, json_pack("[o]", lane("openai", "new1", 6, 2, 0))), 2000);
	ck_assert_uint_eq(top_model_n_rows(m), 1);
	ck_assert_ptr_null(row_of(m, "gone"));
	ck_assert_double_eq_tol(row_of(m, "new1")->dispatched_per_s, 3.0, 1e-9);
	ck_assert_int_eq(row_of(m, "new1")->signals_last_min, 2);
	ck_assert_double_eq_tol(top_model_header(m)->req_per_s, 3.0, 1e-9);
	/* A counter that went back (pacerd restarted) counts from 0, never < 0. */
	update(m, status(0, json_pack("[o]", lane("openai", "new1", 1, 0, 0))), 3000);
	ck_assert_double_eq_tol(row_of(m, "new1")->dispatched_per_s, 1.0, 1e-9);
	ck_assert_int_ge(row_of(m, "new1")->signals_last_min, 0);
	top_model_free(m);
}
END_TEST

START_TEST(unreachable_admin_is_an_error_line)
{
	struct top_model *m = top_model_new();
	top_model_set_error(m, "127.0.0.1:9 unreachable: Connection refused");
	ck_assert_str_eq(top_model_error(m), "127.0.0.1:9 unreachable: Connection refused");
	ck_assert(!top_model_has_data(m));
	ck_assert_uint_eq(top_model_n_rows(m), 0);
	char buf[TOP_LINE_MAX];
	top_format_summary(m, 0, buf, 200);
	ck_assert_ptr_nonnull(strstr(buf, "error: 127.0.0.1:9 unreachable"));
	top_format_header(m, 0, "127.0.0.1:9", buf, 200);
	ck_assert_ptr_nonnull(strstr(buf, "in flight 0"));
	/* Not a /status document: an error, the model unchanged. */
	char err[128] = "";
	json_t *bad = json_pack("{s:s}", "status", "ok");
	ck_assert_int_eq(top_model_update(m, bad, 0, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "lanes"));
	json_decref(bad);
	ck_assert_int_eq(top_model_update(m, NULL, 0, err, sizeof(err)), -1);
	/* A good poll clears the error. */
	update(m, status(1, json_array()), 0);
	ck_assert_str_eq(top_model_error(m), "");
	ck_assert(top_model_has_data(m));
	top_model_free(m);
}
END_TEST

START_TEST(lines_fit_the_width)
{
	struct top_model *m = two_polls();
	char buf[TOP_LINE_MAX];
	for (size_t w = 0; w <= 200; w += 7) {
		top_format_header(m, 0, "127.0.0.1:9090", buf, w);
		ck_assert_uint_le(strlen(buf), w);
		top_format_header(m, 1, "127.0.0.1:9090", buf, w);
		ck_assert_uint_le(strlen(buf), w);
		top_format_columns(buf, w);
		ck_assert_uint_le(strlen(buf), w);
		top_format_row(top_model_row(m, 0), buf, w);
		ck_assert_uint_le(strlen(buf), w);
		top_format_summary(m, 0, buf, w);
		ck_assert_uint_le(strlen(buf), w);
	}
	/* Wide enough: every column, aligned with the titles. */
	char titles[TOP_LINE_MAX];
	top_format_columns(titles, 160);
	top_model_sort(m, TOP_SORT_KEY);
	top_format_row(top_model_row(m, 0), buf, 160);
	ck_assert_ptr_nonnull(strstr(buf, "openai"));
	ck_assert_ptr_nonnull(strstr(buf, "10.0/5.0"));
	ck_assert_ptr_nonnull(strstr(buf, "open"));
	ck_assert_int_eq(strstr(titles, "STATE") - titles, strstr(buf, " open") + 1 - buf);
	/* Far wider than a line: capped at TOP_LINE_MAX - 1. */
	top_format_row(top_model_row(m, 0), buf, 100000);
	ck_assert_uint_lt(strlen(buf), TOP_LINE_MAX);
	top_model_free(m);
}
END_TEST

START_TEST(fit_keeps_utf8_whole)
{
	char s[TOP_LINE_MAX];
	snprintf(s, sizeof(s), "ab\xc3\xa9z"); /* "abéz" */
	top_fit(s, 3);                         /* would cut é in half */
	ck_assert_str_eq(s, "ab");
	snprintf(s, sizeof(s), "short");
	top_fit(s, 80);
	ck_assert_str_eq(s, "short");
}
END_TEST

START_TEST(learned_pace_when_no_gate)
{
	json_t *l = lane("openai", "aaaa", 0, 0, 0);
	json_object_set_new(
	    l, "gates",
	    json_pack("{s:f,s:f}", "max_requests_per_second", 0.0, "max_requests_per_minute", 0.0));
	json_object_set_new(l, "learned",
	                    json_pack("{s:{s:f,s:f,s:I}}", "requests", "pace_per_min", 120.0,
	                              "remaining", 37.0, "reset_in_ms", (json_int_t)15000));
	struct top_model *m = top_model_new();
	update(m, status(1, json_pack("[o]", l)), 0);
	const struct top_row *r = row_of(m, "aaaa");
	ck_assert(r->rate_learned);
	ck_assert_double_eq_tol(r->rate_per_s, 2.0, 1e-9);
	ck_assert(r->has_learned);
	char buf[TOP_LINE_MAX];
	top_format_row(r, buf, 200);
	ck_assert_ptr_nonnull(strstr(buf, "0.0/~2.0"));
	ck_assert_ptr_nonnull(strstr(buf, " 37 "));
	ck_assert_ptr_nonnull(strstr(buf, "15s"));
	top_model_free(m);
}
END_TEST

START_TEST(what_sets_the_limit)
{
	json_t *l = lane("openai", "aaaa", 0, 0, 0);
	json_object_set_new(l, "concurrency",
	                    json_pack("{s:s,s:s,s:f,s:f,s:f,s:f}", "mode", "gradient", "why",
	                              "server_queue", "token_ms", 17.25, "token_ms_baseline", 16.0,
	                              "first_token_ms", 140.0, "first_token_ms_baseline", 66.0));
	json_t *b = lane("openai", "bbbb", 0, 0, 0);
	json_object_set_new(b, "concurrency", json_pack("{s:s}", "mode", "aimd"));
	struct top_model *m = top_model_new();
	update(m, status(1, json_pack("[o,o,o]", l, b, lane("openai", "cccc", 0, 0, 0))), 0);
	const struct top_row *r = row_of(m, "aaaa");
	ck_assert(r->gradient);
	ck_assert_str_eq(r->limit_by, "server_queue");
	char buf[TOP_LINE_MAX], titles[TOP_LINE_MAX];
	top_format_columns(titles, 300);
	top_format_row(r, buf, 300);
	ck_assert_ptr_nonnull(strstr(buf, "server_queue"));
	ck_assert_ptr_nonnull(strstr(buf, "17.2/16.0"));
	ck_assert_ptr_nonnull(strstr(buf, "140/66"));
	ck_assert_int_eq(strstr(titles, "LIMIT BY") - titles, strstr(buf, "server_queue") - buf);
	ck_assert_int_eq(strstr(titles, "STATE") - titles, strstr(buf, " open") + 1 - buf);
	r = row_of(m, "bbbb");
	ck_assert(!r->gradient);
	top_format_row(r, buf, 300);
	ck_assert_ptr_nonnull(strstr(buf, " aimd "));
	/* an older pacerd's /status: no "concurrency" */
	top_format_row(row_of(m, "cccc"), buf, 300);
	ck_assert_ptr_nonnull(strstr(buf, " - "));
	top_model_free(m);
}
END_TEST

START_TEST(per_minute_gate_shown_per_second)
{
	json_t *l = lane("openai", "aaaa", 0, 0, 0);
	json_object_set_new(l, "gates",
	                    json_pack("{s:f,s:f}", "max_requests_per_second", 0.0,
	                              "max_requests_per_minute", 30.0));
	struct top_model *m = top_model_new();
	update(m, status(1, json_pack("[o]", l)), 0);
	ck_assert(!row_of(m, "aaaa")->rate_learned);
	ck_assert_double_eq_tol(row_of(m, "aaaa")->rate_per_s, 0.5, 1e-9);
	top_model_free(m);
}
END_TEST

START_TEST(summary_names_the_busiest_lane)
{
	struct top_model *m = two_polls();
	top_model_sort(m, TOP_SORT_KEY); /* whatever the sort */
	char buf[TOP_LINE_MAX];
	top_format_summary(m, 0, buf, TOP_LINE_MAX);
	ck_assert_ptr_nonnull(strstr(buf, "in_flight 2 req/s 12.0 lanes 2"));
	ck_assert_ptr_nonnull(strstr(buf, "busiest openai/aaaa 10.0/s"));
	ck_assert_ptr_null(strchr(buf, '\033'));
	top_model_free(m);
}
END_TEST

/* A lane taken up from the state file shows so, with how old what it took
 * up is, until its first answer (then /status says restored: false). */
/* A silent lane: its slow start in STATE, the rate probe's pace as the
 * learned one once refusals settled it. */
START_TEST(silent_lane_shows_its_search)
{
	json_t *l = lane("openai", "aaaa", 0, 0, 0);
	json_object_set_new(l, "state", json_string("open"));
	json_object_set_new(l, "slow_start", json_true());
	json_object_set_new(l, "rate_probe", json_null());
	json_t *k = lane("openai", "bbbb", 0, 0, 0);
	json_object_set_new(k, "state", json_string("open"));
	json_object_set_new(k, "slow_start", json_false());
	/* no gate of the plan: where pacerd runs the probe */
	json_object_set_new(
	    l, "gates",
	    json_pack("{s:f,s:f}", "max_requests_per_second", 0.0, "max_requests_per_minute", 0.0));
	json_object_set_new(
	    k, "gates",
	    json_pack("{s:f,s:f}", "max_requests_per_second", 0.0, "max_requests_per_minute", 0.0));
	json_object_set_new(k, "rate_probe",
	                    json_pack("{s:f,s:f,s:I,s:i}", "bound_rps", 9.77, "rate_rps", 9.31,
	                              "k_ms", (json_int_t)24000, "calm", 1));
	struct top_model *m = top_model_new();
	update(m, status(1, json_pack("[o,o]", l, k)), 0);
	char buf[TOP_LINE_MAX];
	top_format_row(row_of(m, "aaaa"), buf, 300);
	ck_assert_ptr_nonnull(strstr(buf, "open, slow start"));
	ck_assert(row_of(m, "aaaa")->rate_per_s == 0);
	const struct top_row *r = row_of(m, "bbbb");
	ck_assert(r->rate_learned);
	ck_assert_double_eq_tol(r->rate_per_s, 9.31, 1e-9);
	top_format_row(r, buf, 300);
	ck_assert_ptr_nonnull(strstr(buf, "0.0/~9.3"));
	ck_assert_ptr_null(strstr(buf, "slow start"));
	top_model_free(m);
}
END_TEST

START_TEST(restored_lane_says_so)
{
	json_t *l = lane("openai", "aaaa", 0, 0, 0);
	json_object_set_new(l, "state", json_string("open"));
	json_object_set_new(l, "restored", json_true());
	json_object_set_new(l, "restored_age_ms", json_integer(83000));
	json_t *k = lane("openai", "bbbb", 0, 0, 0);
	json_object_set_new(k, "restored", json_false());
	struct top_model *m = top_model_new();
	update(m, status(1, json_pack("[o,o]", l, k)), 0);
	ck_assert(row_of(m, "aaaa")->restored);
	ck_assert(!row_of(m, "bbbb")->restored);
	char buf[TOP_LINE_MAX];
	top_format_row(row_of(m, "aaaa"), buf, 300);
	ck_assert_ptr_nonnull(strstr(buf, "open, restored 1m23s"));
	top_format_row(row_of(m, "bbbb"), buf, 300);
	ck_assert_ptr_null(strstr(buf, "restored"));
	top_format_summary(m, 0, buf, TOP_LINE_MAX);
	ck_assert_ptr_nonnull(strstr(buf, "(restored)"));
	top_model_free(m);
}
END_TEST

static Suite *top_suite(void)
{
	Suite *s = suite_create("top");
	TCase *tc = tcase_create("model");
	tcase_add_test(tc, rates_from_counter_differences);
	tcase_add_test(tc, restored_lane_says_so);
	tcase_add_test(tc, silent_lane_shows_its_search);
	tcase_add_test(tc, first_poll_has_no_rate);
	tcase_add_test(tc, the_header_shows_websockets_once_one_opened);
	tcase_add_test(tc, the_header_shows_the_shared_store);
	tcase_add_test(tc, signals_window_is_one_minute);
	tcase_add_test(tc, sort_by_each_key);
	tcase_add_test(tc, lane_appears_and_disappears);
	tcase_add_test(tc, unreachable_admin_is_an_error_line);
	tcase_add_test(tc, lines_fit_the_width);
	tcase_add_test(tc, fit_keeps_utf8_whole);
	tcase_add_test(tc, learned_pace_when_no_gate);
	tcase_add_test(tc, per_minute_gate_shown_per_second);
	tcase_add_test(tc, what_sets_the_limit);
	tcase_add_test(tc, summary_names_the_busiest_lane);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("top", top_suite)
