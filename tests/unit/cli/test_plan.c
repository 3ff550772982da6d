/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for plan (the arithmetic of `pacerd plan`) and plan_report (its
 * table, warning and JSON). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/plan.h"
#include "cli/plan_report.h"
#include "unit.h"

/* 2023-11-14 22:13:20 UTC */
#define START_MS 1700000000000LL

static struct plan_input run_of(uint64_t requests)
{
	struct plan_input in;
	memset(&in, 0, sizeof(in));
	in.requests = requests;
	return in;
}

static struct plan_result compute(const struct plan_input *in)
{
	struct plan_result r;
	char err[128] = "";
	ck_assert_msg(plan_compute(in, START_MS, &r, err, sizeof(err)) == 0, "%s", err);
	return r;
}

static void set_budget(struct plan_input *in, const char *text)
{
	ck_assert_int_eq(plan_parse_duration(text, &in->budget_ms, &in->budget_unit), 0);
}

/* ---- the two examples ---- */

/* 200 requests at 60 RPM, 3 workers, 1,500 ms each: 3 min 20 s at 60/min,
 * each worker every 3 s, staggered 1 s. Two of the three are ever in flight
 * at once (1.5 s spans two 1 s intervals). */
START_TEST(example_200_requests_at_60_rpm_with_3_workers)
{
	struct plan_input in = run_of(200);
	in.rpm = 60;
	in.concurrency = 3;
	in.concurrency_is_workers = true;
	in.latency_ms = 1500;
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_RPM);
	ck_assert(!r.unbounded);
	ck_assert_double_eq_tol(r.throughput_rps * 60, 60, 1e-9);
	ck_assert_double_eq(r.duration_ms, 200000);
	ck_assert_uint_eq(r.workers, 3);
	ck_assert_double_eq(r.worker_interval_ms, 3000);
	ck_assert_double_eq(r.stagger_ms, 1000);
	ck_assert_uint_eq(r.effective_concurrency, 2);
	ck_assert_int_eq(r.end_ms, START_MS + 200000);
	ck_assert(r.fits);
	char d[32];
	ck_assert_str_eq(plan_report_duration(r.duration_ms, d, sizeof(d)), "3 min 20 s");
}
END_TEST

/* 1,000 requests at 60 RPM in 10 minutes: 16 min 40 s does not fit; 600
 * requests do, or 17 minutes (whole minutes: the budget was in minutes), or
 * 100 RPM. */
START_TEST(example_1000_requests_at_60_rpm_in_10_minutes)
{
	struct plan_input in = run_of(1000);
	in.rpm = 60;
	set_budget(&in, "10m");
	struct plan_result r = compute(&in);
	ck_assert(r.has_budget);
	ck_assert(!r.fits);
	ck_assert_double_eq(r.duration_ms, 1000000);
	ck_assert_uint_eq(r.fitting_requests, 600);
	ck_assert_int_eq(r.needed_budget_ms, 17 * 60000);
	ck_assert_uint_eq(r.n_changes, 1);
	ck_assert_int_eq(r.changes[0].limit, PLAN_RPM);
	ck_assert_double_eq(r.changes[0].value, 100);
}
END_TEST

/* A budget in seconds: the budget needed is the duration to the second. */
START_TEST(budget_in_seconds_needs_whole_seconds)
{
	struct plan_input in = run_of(1000);
	in.rpm = 60;
	set_budget(&in, "600");
	struct plan_result r = compute(&in);
	ck_assert(!r.fits);
	ck_assert_int_eq(r.needed_budget_ms, 1000000);

	in.rpm = 61; /* 983.6 s: rounded up to 984 */
	r = compute(&in);
	ck_assert_int_eq(r.needed_budget_ms, 984000);
}
END_TEST

/* Hours round to whole minutes, not whole hours. */
START_TEST(budget_in_hours_needs_whole_minutes)
{
	struct plan_input in = run_of(1000);
	in.rph = 400; /* 2 h 30 min */
	set_budget(&in, "2h");
	struct plan_result r = compute(&in);
	ck_assert(!r.fits);
	ck_assert_int_eq(r.needed_budget_ms, 150 * 60000);
	ck_assert_int_eq(r.changes[0].limit, PLAN_RPH);
	ck_assert_double_eq(r.changes[0].value, 500);
}
END_TEST

START_TEST(exactly_the_budget_fits)
{
	struct plan_input in = run_of(1000);
	in.rpm = 100;
	set_budget(&in, "10m");
	struct plan_result r = compute(&in);
	ck_assert(r.fits);
	ck_assert_uint_eq(r.n_changes, 0);
}
END_TEST

/* ---- each constraint binding ---- */

START_TEST(rps_binds)
{
	struct plan_input in = run_of(100);
	in.rps = 2;   /* 500 ms */
	in.rpm = 600; /* 100 ms */
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_RPS);
	ck_assert_double_eq(r.interval_ms, 500);
	ck_assert_double_eq(r.throughput_rps, 2);
	ck_assert_double_eq(r.duration_ms, 50000);
	ck_assert_uint_eq(r.n_constraints, 2);
}
END_TEST

START_TEST(rph_binds)
{
	struct plan_input in = run_of(10);
	in.rpm = 120;  /* 500 ms */
	in.rph = 3600; /* 1000 ms */
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_RPH);
	ck_assert_double_eq(r.interval_ms, 1000);
	ck_assert_double_eq(r.duration_ms, 10000);
}
END_TEST

START_TEST(min_ms_binds)
{
	struct plan_input in = run_of(10);
	in.rps = 5;      /* 200 ms */
	in.min_ms = 250; /* 250 ms */
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_MIN_MS);
	ck_assert_double_eq(r.interval_ms, 250);
	ck_assert_double_eq(r.throughput_rps, 4);
}
END_TEST

/* tpm with avg-tokens: 60000 x 1000 / 90000 = 666.7 ms between requests;
 * tokens = requests x avg_tokens. */
START_TEST(tpm_binds_with_avg_tokens)
{
	struct plan_input in = run_of(90);
	in.rpm = 500; /* 120 ms */
	in.tpm = 90000;
	in.avg_tokens = 1000;
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_TPM);
	ck_assert_double_eq_tol(r.interval_ms, 2000.0 / 3, 1e-9);
	ck_assert_double_eq_tol(r.duration_ms, 60000, 1e-6);
	ck_assert(r.has_tokens);
	ck_assert_double_eq(r.tokens, 90000);
	ck_assert(!r.tpm_ignored);
}
END_TEST

START_TEST(tpm_without_avg_tokens_is_not_counted)
{
	struct plan_input in = run_of(10);
	in.rpm = 60;
	in.tpm = 1; /* would bind by far */
	struct plan_result r = compute(&in);
	ck_assert(r.tpm_ignored);
	ck_assert_int_eq(r.binding, PLAN_RPM);
	ck_assert_uint_eq(r.n_constraints, 1);
	ck_assert(!r.has_tokens);
}
END_TEST

/* 4 workers of 2 s each: one request every 500 ms, below the 600 RPM; each
 * worker goes back to back. */
START_TEST(concurrency_binds)
{
	struct plan_input in = run_of(100);
	in.rpm = 600;
	in.concurrency = 4;
	in.concurrency_is_workers = true;
	in.latency_ms = 2000;
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_CONCURRENCY);
	ck_assert_double_eq(r.interval_ms, 500);
	ck_assert_double_eq(r.throughput_rps, 2);
	ck_assert_uint_eq(r.effective_concurrency, 4);
	ck_assert_uint_eq(r.workers, 4);
	ck_assert_double_eq(r.worker_interval_ms, 2000);
	ck_assert_double_eq(r.stagger_ms, 500);
	ck_assert_double_eq(r.duration_ms, 50000);
}
END_TEST

/* A configured max_concurrent is a ceiling: the schedule uses the workers
 * needed, ceil(L / interval). */
START_TEST(concurrency_ceiling_schedules_the_workers_needed)
{
	struct plan_input in = run_of(200);
	in.rpm = 60;
	in.concurrency = 64;
	in.latency_ms = 1500;
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_RPM);
	ck_assert_uint_eq(r.effective_concurrency, 2);
	ck_assert_uint_eq(r.workers, 2);
	ck_assert_double_eq(r.worker_interval_ms, 2000);
	ck_assert_double_eq(r.stagger_ms, 1000);
}
END_TEST

/* Without latency no request overlaps the next: one worker. */
START_TEST(no_latency_one_worker)
{
	struct plan_input in = run_of(200);
	in.rpm = 60;
	in.concurrency = 8;
	struct plan_result r = compute(&in);
	ck_assert_uint_eq(r.effective_concurrency, 1);
	ck_assert_uint_eq(r.workers, 1);
	ck_assert_uint_eq(r.n_constraints, 1); /* concurrency limits nothing without latency */
}
END_TEST

/* Exact multiples do not round up: 3 s over 1 s intervals is 3 in flight. */
START_TEST(effective_concurrency_exact_multiple)
{
	struct plan_input in = run_of(100);
	in.rps = 10;
	in.latency_ms = 300;
	struct plan_result r = compute(&in);
	ck_assert_uint_eq(r.effective_concurrency, 3);
	in.latency_ms = 301;
	r = compute(&in);
	ck_assert_uint_eq(r.effective_concurrency, 4);
}
END_TEST

START_TEST(workers_never_exceed_requests)
{
	struct plan_input in = run_of(2);
	in.rps = 10;
	in.latency_ms = 5000;
	in.concurrency = 10;
	in.concurrency_is_workers = true;
	struct plan_result r = compute(&in);
	ck_assert_uint_eq(r.effective_concurrency, 2);
	ck_assert_uint_eq(r.workers, 2);
}
END_TEST

/* A tie goes to the first in enum order. */
START_TEST(tie_goes_to_the_first)
{
	struct plan_input in = run_of(10);
	in.rps = 1;
	in.rpm = 60;
	in.rph = 3600;
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_RPS);
}
END_TEST

START_TEST(nothing_given_is_unbounded)
{
	struct plan_input in = run_of(50);
	set_budget(&in, "1s");
	struct plan_result r = compute(&in);
	ck_assert(r.unbounded);
	ck_assert_int_eq(r.binding, PLAN_LIMIT_NONE);
	ck_assert(isinf(r.throughput_rps));
	ck_assert_double_eq(r.interval_ms, 0);
	ck_assert_double_eq(r.duration_ms, 0);
	ck_assert_uint_eq(r.effective_concurrency, 50);
	ck_assert(r.fits);
	ck_assert_str_eq(plan_limit_name(r.binding), "none");
}
END_TEST

/* Concurrency without latency bounds nothing either; the workers are C. */
START_TEST(concurrency_without_latency_is_unbounded)
{
	struct plan_input in = run_of(50);
	in.concurrency = 5;
	in.concurrency_is_workers = true;
	struct plan_result r = compute(&in);
	ck_assert(r.unbounded);
	ck_assert_uint_eq(r.effective_concurrency, 5);
	ck_assert_uint_eq(r.workers, 5);
}
END_TEST

/* Only concurrency and latency: C / L. */
START_TEST(concurrency_and_latency_alone)
{
	struct plan_input in = run_of(60);
	in.concurrency = 2;
	in.latency_ms = 1000;
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.binding, PLAN_CONCURRENCY);
	ck_assert_double_eq(r.throughput_rps, 2);
	ck_assert_double_eq(r.duration_ms, 30000);
	ck_assert_uint_eq(r.workers, 2);
}
END_TEST

/* ---- the options when the budget is too short ---- */

/* Every limit too tight on its own is listed, the binding one first: rpm 60
 * binds (1 s), tpm 30000 at 400 tokens (800 ms) is too tight as well for
 * 1,000 requests in 10 min (600 ms needed); rps 10 is not. */
START_TEST(every_tight_limit_is_an_option)
{
	struct plan_input in = run_of(1000);
	in.rps = 10;
	in.rpm = 60;
	in.tpm = 30000;
	in.avg_tokens = 400;
	set_budget(&in, "10m");
	struct plan_result r = compute(&in);
	ck_assert(!r.fits);
	ck_assert_uint_eq(r.n_changes, 2);
	ck_assert_int_eq(r.changes[0].limit, PLAN_RPM);
	ck_assert_double_eq(r.changes[0].value, 100);
	ck_assert_int_eq(r.changes[1].limit, PLAN_TPM);
	ck_assert_double_eq(r.changes[1].value, 40000);
}
END_TEST

/* min-ms needs a lower value (rounded down); concurrency a higher one
 * (rounded up); rps below 100 to the hundredth, rounded up. */
START_TEST(option_rounding)
{
	struct plan_input in = run_of(1000);
	in.min_ms = 1000;
	set_budget(&in, "10m");
	struct plan_result r = compute(&in);
	ck_assert_int_eq(r.changes[0].limit, PLAN_MIN_MS);
	ck_assert_double_eq(r.changes[0].value, 600);

	in = run_of(1000);
	in.concurrency = 2;
	in.latency_ms = 2000;
	set_budget(&in, "10m");
	r = compute(&in);
	ck_assert_int_eq(r.changes[0].limit, PLAN_CONCURRENCY);
	ck_assert_double_eq(r.changes[0].value, 4); /* 3.33 -> 4 */

	in = run_of(1000);
	in.rps = 1;
	set_budget(&in, "10m");
	r = compute(&in);
	ck_assert_int_eq(r.changes[0].limit, PLAN_RPS);
	ck_assert_double_eq_tol(r.changes[0].value, 1.67, 1e-9); /* 1.6667 -> 1.67 */
}
END_TEST

START_TEST(budget_shorter_than_one_request)
{
	struct plan_input in = run_of(10);
	in.rph = 1;
	set_budget(&in, "90s");
	struct plan_result r = compute(&in);
	ck_assert(!r.fits);
	ck_assert_uint_eq(r.fitting_requests, 0);
	ck_assert_int_eq(r.needed_budget_ms, 36000000);
}
END_TEST

/* ---- what is not a run ---- */

START_TEST(nonsense_is_refused)
{
	char err[128];
	struct plan_result r;
	struct plan_input in = run_of(0);
	ck_assert_int_eq(plan_compute(&in, START_MS, &r, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "requests"));

	in = run_of(10);
	in.rpm = -60;
	ck_assert_int_eq(plan_compute(&in, START_MS, &r, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "rpm"));

	in = run_of(10);
	in.latency_ms = NAN;
	ck_assert_int_eq(plan_compute(&in, START_MS, &r, err, sizeof(err)), -1);

	in = run_of(10);
	in.rps = 1e-300; /* would make the duration infinite */
	ck_assert_int_eq(plan_compute(&in, START_MS, &r, err, sizeof(err)), -1);

	in = run_of(10);
	in.budget_ms = -1;
	ck_assert_int_eq(plan_compute(&in, START_MS, &r, err, sizeof(err)), -1);
}
END_TEST

/* The slowest run the bounds allow still has a finite duration; its end is
 * past any calendar. */
START_TEST(extreme_run_stays_finite)
{
	struct plan_input in = run_of((uint64_t)PLAN_MAX_VALUE);
	in.rph = PLAN_MIN_VALUE;
	struct plan_result r = compute(&in);
	ck_assert(isfinite(r.duration_ms));
	ck_assert(!r.end_known);
	char d[48];
	ck_assert_str_eq(plan_report_duration(r.duration_ms, d, sizeof(d)), "over 30,000 years");
}
END_TEST

/* ---- durations ---- */

START_TEST(duration_parsing)
{
	int64_t ms;
	enum plan_unit u;
	ck_assert_int_eq(plan_parse_duration("90s", &ms, &u), 0);
	ck_assert_int_eq(ms, 90000);
	ck_assert_int_eq(u, PLAN_UNIT_S);
	ck_assert_int_eq(plan_parse_duration("10m", &ms, &u), 0);
	ck_assert_int_eq(ms, 600000);
	ck_assert_int_eq(u, PLAN_UNIT_M);
	ck_assert_int_eq(plan_parse_duration("2h", &ms, &u), 0);
	ck_assert_int_eq(ms, 7200000);
	ck_assert_int_eq(u, PLAN_UNIT_H);
	ck_assert_int_eq(plan_parse_duration("45", &ms, &u), 0);
	ck_assert_int_eq(ms, 45000);
	ck_assert_int_eq(u, PLAN_UNIT_S);
	ck_assert_int_eq(plan_parse_duration("1.5h", &ms, &u), 0);
	ck_assert_int_eq(ms, 5400000);
	ck_assert_int_eq(plan_parse_duration("0.25", &ms, &u), 0);
	ck_assert_int_eq(ms, 250);
}
END_TEST

START_TEST(duration_parsing_refuses)
{
	const char *bad[] = {"",    "abc", "10x",  "-5", "0",  "0s",  "10 m", "10ms",  "s",
	                     "inf", "nan", "0x10", " 5", "+5", "5mm", "1e20", "0.0001"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t ms = 7;
		enum plan_unit u = PLAN_UNIT_H;
		ck_assert_msg(plan_parse_duration(bad[i], &ms, &u) == -1, "'%s' accepted", bad[i]);
		ck_assert_int_eq(ms, 7);
	}
	int64_t ms;
	enum plan_unit u;
	ck_assert_int_eq(plan_parse_duration(NULL, &ms, &u), -1);
}
END_TEST

START_TEST(duration_printing)
{
	char d[48];
	ck_assert_str_eq(plan_report_duration(200000, d, sizeof(d)), "3 min 20 s");
	ck_assert_str_eq(plan_report_duration(3900000, d, sizeof(d)), "1 h 05 min");
	ck_assert_str_eq(plan_report_duration(45000, d, sizeof(d)), "45 s");
	ck_assert_str_eq(plan_report_duration(850, d, sizeof(d)), "850 ms");
	ck_assert_str_eq(plan_report_duration(1500, d, sizeof(d)), "1.5 s");
	ck_assert_str_eq(plan_report_duration(3000, d, sizeof(d)), "3 s");
	ck_assert_str_eq(plan_report_duration(16.666, d, sizeof(d)), "16.7 ms");
	ck_assert_str_eq(plan_report_duration(1020000, d, sizeof(d)), "17 min");
	ck_assert_str_eq(plan_report_duration(185000, d, sizeof(d)), "3 min 05 s");
	ck_assert_str_eq(plan_report_duration(7200000, d, sizeof(d)), "2 h");
	ck_assert_str_eq(plan_report_duration(59600, d, sizeof(d)), "1 min");
	ck_assert_str_eq(plan_report_duration(3599600, d, sizeof(d)), "1 h");
	ck_assert_str_eq(plan_report_duration(999.7, d, sizeof(d)), "1 s");
	ck_assert_str_eq(plan_report_duration(0, d, sizeof(d)), "0 ms");
	ck_assert_str_eq(plan_report_duration(600000000, d, sizeof(d)), "166 h 40 min");
}
END_TEST

/* ---- the report ---- */

static void utc(void)
{
	setenv("TZ", "UTC", 1);
	tzset();
}

static char *text_of(const struct plan_input *in, const struct plan_result *r,
                     const struct plan_source *src, bool ascii)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	plan_report_text(f, in, r, src, ascii);
	fclose(f);
	return buf;
}

static json_t *json_of(const struct plan_input *in, const struct plan_result *r,
                       const struct plan_source *src)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(plan_report_json(f, in, r, src), 0);
	fclose(f);
	json_error_t e;
	json_t *j = json_loads(buf, 0, &e);
	ck_assert_msg(j != NULL, "%s: %s", e.text, buf);
	free(buf);
	return j;
}

/* The table's row whose label is `label`: its value, trimmed, or NULL. */
static const char *row_value(const char *text, const char *label, const char *bar)
{
	static char value[256];
	char needle[128];
	snprintf(needle, sizeof(needle), "%s %s ", bar, label);
	const char *p = strstr(text, needle);
	if (p == NULL)
		return NULL;
	p = strstr(p + strlen(needle), bar); /* the middle bar */
	ck_assert_ptr_nonnull(p);
	p += strlen(bar) + 1;
	const char *end = strstr(p, bar);
	ck_assert_ptr_nonnull(end);
	while (end > p && end[-1] == ' ')
		end--;
	snprintf(value, sizeof(value), "%.*s", (int)(end - p), p);
	return value;
}

static size_t utf8_width(const char *s, size_t n)
{
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		w += ((unsigned char)s[i] & 0xC0) != 0x80;
	return w;
}

/* Every line of the box as wide as the first. */
static void assert_box_aligned(const char *text)
{
	const char *line = text;
	size_t width = 0;
	while (*line == '\xe2' || *line == '+' || *line == '|') { /* box lines only */
		const char *nl = strchr(line, '\n');
		ck_assert_ptr_nonnull(nl);
		size_t w = utf8_width(line, (size_t)(nl - line));
		if (width == 0)
			width = w;
		ck_assert_uint_eq(w, width);
		line = nl + 1;
	}
	ck_assert_uint_gt(width, 0);
}

static struct plan_input example_200(void)
{
	struct plan_input in = run_of(200);
	in.rpm = 60;
	in.concurrency = 3;
	in.concurrency_is_workers = true;
	in.latency_ms = 1500;
	return in;
}

START_TEST(table_shows_the_plan)
{
	utc();
	struct plan_input in = example_200();
	struct plan_result r = compute(&in);
	char *t = text_of(&in, &r, NULL, false);
	const char *bar = "\u2502";
	ck_assert_msg(strncmp(t, "\u250c\u2500", 6) == 0, "%s", t);
	ck_assert_str_eq(row_value(t, "pacerd plan", bar), "200 requests");
	ck_assert_str_eq(row_value(t, "rpm 60", bar), "60 req/min  <- binds");
	ck_assert_str_eq(row_value(t, "concurrency 3, 1.5 s each", bar), "2 req/s");
	ck_assert_str_eq(row_value(t, "binding constraint", bar), "rpm 60");
	ck_assert_str_eq(row_value(t, "throughput", bar), "60 req/min (1 req/s)");
	ck_assert_str_eq(row_value(t, "effective concurrency", bar), "2 in flight at most");
	ck_assert_str_eq(row_value(t, "workers", bar), "3, each sending every 3 s");
	ck_assert_str_eq(row_value(t, "stagger", bar), "1 s between workers");
	ck_assert_str_eq(row_value(t, "estimated duration", bar), "3 min 20 s");
	ck_assert_str_eq(row_value(t, "start", bar), "2023-11-14 22:13:20 UTC");
	ck_assert_str_eq(row_value(t, "completion", bar), "2023-11-14 22:16:40 UTC");
	ck_assert_str_eq(row_value(t, "estimated tokens", bar), "unknown: no --avg-tokens");
	ck_assert_str_eq(row_value(t, "time budget", bar), "none");
	ck_assert_ptr_null(strstr(t, "warning"));
	assert_box_aligned(t);
	free(t);
}
END_TEST

/* --ascii: + - | and not one byte >= 0x80, also from a configuration's
 * names. */
START_TEST(ascii_table_is_ascii)
{
	utc();
	struct plan_input in = example_200();
	in.tpm = 100000;
	in.avg_tokens = 900;
	struct plan_result r = compute(&in);
	struct plan_source src = {
	    .config = "x.yaml", .provider = "op\u00e9nai", .plan = "caf\u00e9"};
	char *t = text_of(&in, &r, &src, true);
	for (const char *p = t; *p != '\0'; p++)
		ck_assert_msg((unsigned char)*p < 0x80, "byte 0x%02x at %zu", (unsigned char)*p,
		              (size_t)(p - t));
	ck_assert(strncmp(t, "+--", 3) == 0);
	ck_assert_str_eq(row_value(t, "plan", "|"), "caf? (provider op?nai)");
	ck_assert_str_eq(row_value(t, "estimated tokens", "|"), "180,000");
	ck_assert_str_eq(row_value(t, "workers", "|"), "3, each sending every 3 s");
	assert_box_aligned(t);
	free(t);
}
END_TEST

/* Non-ASCII names keep the box aligned in UTF-8 (one column each). */
START_TEST(utf8_names_keep_the_box_aligned)
{
	utc();
	struct plan_input in = example_200();
	struct plan_result r = compute(&in);
	struct plan_source src = {.provider = "openai",
	                          .plan = "\u00e9t\u00e9",
	                          .key = "3f9a1c0b7d2e",
	                          .key_override = true};
	char *t = text_of(&in, &r, &src, false);
	ck_assert_str_eq(row_value(t, "plan", "\u2502"),
	                 "\u00e9t\u00e9 (keys: entry for openai, key 3f9a1c0b7d2e)");
	assert_box_aligned(t);
	free(t);
}
END_TEST

START_TEST(warning_lists_the_options)
{
	utc();
	struct plan_input in = run_of(1000);
	in.rpm = 60;
	set_budget(&in, "10m");
	struct plan_result r = compute(&in);
	char *t = text_of(&in, &r, NULL, true);
	ck_assert_str_eq(row_value(t, "time budget", "|"), "10 min: does not fit");
	ck_assert_ptr_nonnull(
	    strstr(t, "\nwarning: 1,000 requests take 16 min 40 s; the time budget is 10 min.\n"));
	ck_assert_ptr_nonnull(
	    strstr(t, "  - fewer requests: 600 fit in 10 min (--requests 600)\n"));
	ck_assert_ptr_nonnull(strstr(t, "  - a longer budget: 17 min (--time-budget 17m)\n"));
	ck_assert_ptr_nonnull(strstr(t, "  - a higher limit: rpm 100 (--rpm 100)\n"));
	free(t);

	in.tpm = 30000;
	in.avg_tokens = 400;
	r = compute(&in);
	t = text_of(&in, &r, NULL, true);
	ck_assert_ptr_nonnull(
	    strstr(t, "  - a higher limit: rpm 100 and tpm 40000 (--rpm 100 --tpm 40000)\n"));
	free(t);
}
END_TEST

START_TEST(table_says_unbounded)
{
	utc();
	struct plan_input in = run_of(10);
	in.tpm = 5000; /* without avg_tokens */
	struct plan_result r = compute(&in);
	char *t = text_of(&in, &r, NULL, true);
	ck_assert_str_eq(row_value(t, "throughput", "|"), "unbounded");
	ck_assert_str_eq(row_value(t, "binding constraint", "|"), "none: the run is not limited");
	ck_assert_str_eq(row_value(t, "estimated duration", "|"), "not limited");
	ck_assert_str_eq(row_value(t, "tpm 5000", "|"), "not counted: no --avg-tokens");
	free(t);
}
END_TEST

START_TEST(json_has_the_plan)
{
	utc();
	struct plan_input in = example_200();
	struct plan_result r = compute(&in);
	json_t *j = json_of(&in, &r, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "requests")), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "binding")), "rpm");
	ck_assert(json_is_false(json_object_get(j, "unbounded")));
	ck_assert_double_eq(json_number_value(json_object_get(j, "throughput_rps")), 1);
	ck_assert_double_eq(json_number_value(json_object_get(j, "throughput_rpm")), 60);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "effective_concurrency")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "workers")), 3);
	ck_assert_double_eq(json_number_value(json_object_get(j, "worker_interval_ms")), 3000);
	ck_assert_double_eq(json_number_value(json_object_get(j, "stagger_ms")), 1000);
	ck_assert_double_eq(json_number_value(json_object_get(j, "duration_ms")), 200000);
	ck_assert_str_eq(json_string_value(json_object_get(j, "duration")), "3 min 20 s");
	ck_assert_str_eq(json_string_value(json_object_get(j, "start")),
	                 "2023-11-14T22:13:20+00:00");
	ck_assert_str_eq(json_string_value(json_object_get(j, "completion")),
	                 "2023-11-14T22:16:40+00:00");
	ck_assert(json_is_null(json_object_get(j, "estimated_tokens")));
	ck_assert(json_is_null(json_object_get(j, "time_budget_ms")));
	ck_assert(json_is_true(json_object_get(j, "fits")));
	ck_assert(json_is_null(json_object_get(j, "options")));
	ck_assert_ptr_null(json_object_get(j, "source"));
	json_t *c = json_object_get(j, "constraints");
	ck_assert_uint_eq(json_array_size(c), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(c, 0), "name")), "rpm");
	ck_assert(json_is_true(json_object_get(json_array_get(c, 0), "binding")));
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(c, 1), "name")),
	                 "concurrency");
	ck_assert_double_eq(
	    json_number_value(json_object_get(json_array_get(c, 1), "throughput_rps")), 2);
	json_decref(j);
}
END_TEST

START_TEST(json_has_the_options)
{
	utc();
	struct plan_input in = run_of(1000);
	in.rpm = 60;
	in.avg_tokens = 500;
	set_budget(&in, "10m");
	struct plan_result r = compute(&in);
	struct plan_source src = {.config = "p.yaml",
	                          .provider = "openai",
	                          .plan = "batch",
	                          .key = "3f9a1c0b7d2e",
	                          .key_override = true};
	json_t *j = json_of(&in, &r, &src);
	ck_assert(json_is_false(json_object_get(j, "fits")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "time_budget_ms")), 600000);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "estimated_tokens")), 500000);
	json_t *o = json_object_get(j, "options");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "requests")), 600);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "time_budget_ms")), 1020000);
	ck_assert_str_eq(json_string_value(json_object_get(o, "time_budget")), "17m");
	json_t *l = json_array_get(json_object_get(o, "limits"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(l, "name")), "rpm");
	ck_assert_int_eq(json_integer_value(json_object_get(l, "value")), 100);
	json_t *s = json_object_get(j, "source");
	ck_assert_str_eq(json_string_value(json_object_get(s, "plan")), "batch");
	ck_assert_str_eq(json_string_value(json_object_get(s, "key_sha256")), "3f9a1c0b7d2e");
	ck_assert(json_is_true(json_object_get(s, "key_override")));
	json_decref(j);
}
END_TEST

START_TEST(json_unbounded_is_null)
{
	utc();
	struct plan_input in = run_of(10);
	in.concurrency = 4; /* without latency */
	struct plan_result r = compute(&in);
	json_t *j = json_of(&in, &r, NULL);
	ck_assert(json_is_true(json_object_get(j, "unbounded")));
	ck_assert(json_is_null(json_object_get(j, "binding")));
	ck_assert(json_is_null(json_object_get(j, "throughput_rps")));
	ck_assert(json_is_null(json_object_get(j, "duration_ms")));
	ck_assert(json_is_null(json_object_get(j, "completion")));
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "not_counted"), 0)),
	                 "concurrency");
	json_decref(j);
}
END_TEST

START_TEST(utf8_locale)
{
	ck_assert(plan_report_utf8_locale(NULL, NULL, "en_US.UTF-8"));
	ck_assert(plan_report_utf8_locale("", "", "de_DE.utf8"));
	ck_assert(plan_report_utf8_locale(NULL, "C.UTF-8", "C"));
	ck_assert(!plan_report_utf8_locale("C", NULL, "en_US.UTF-8")); /* LC_ALL wins */
	ck_assert(!plan_report_utf8_locale(NULL, NULL, "POSIX"));
	ck_assert(!plan_report_utf8_locale(NULL, NULL, NULL));
}
END_TEST

/* A configuration's plan with no rate limit: the report says how its lanes
 * find their concurrency; with a rate limit, or without a configuration, it
 * says nothing more. */
START_TEST(no_rate_limit_explains_the_controller)
{
	utc();
	struct plan_input in = run_of(2000);
	in.concurrency = 64;
	struct plan_result r = compute(&in);
	struct plan_source src = {.config = "p.yaml",
	                          .provider = "vllm",
	                          .plan = "default",
	                          .concurrency = {.known = true,
	                                          .adaptive = true,
	                                          .mode = "auto",
	                                          .min = 1,
	                                          .max = 64,
	                                          .slow_start = 20,
	                                          .tolerance = 1}};
	char *t = text_of(&in, &r, &src, true);
	ck_assert_ptr_nonnull(strstr(t, "\nconcurrency: no rate limit is configured"));
	ck_assert_ptr_nonnull(strstr(t, "(concurrency.mode: auto)"));
	ck_assert_ptr_nonnull(strstr(t, "starts at 20 in flight"));
	ck_assert_ptr_nonnull(strstr(t, "more than 2 times"));
	for (const char *line = t; *line != '\0'; line = strchr(line, '\n') + 1)
		ck_assert_uint_le(strcspn(line, "\n"), 78);
	free(t);
	json_t *j = json_of(&in, &r, &src);
	ck_assert_str_eq(json_string_value(json_object_get(
	                     json_object_get(json_object_get(j, "source"), "concurrency"), "mode")),
	                 "auto");
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "concurrency_note")),
	                             "follows the latency"));
	json_decref(j);
	/* refusals alone (mode aimd): no word of latency */
	src.concurrency.mode = "aimd";
	t = text_of(&in, &r, &src, true);
	ck_assert_ptr_nonnull(strstr(t, "halves the limit (AIMD)"));
	ck_assert_ptr_null(strstr(t, "follows the latency"));
	free(t);
	/* fixed */
	src.concurrency.adaptive = false;
	t = text_of(&in, &r, &src, true);
	ck_assert_ptr_nonnull(strstr(t, "fixed at max_concurrent 64"));
	free(t);
	/* a rate limit: nothing to explain */
	src.concurrency.adaptive = true;
	in.rpm = 600;
	r = compute(&in);
	t = text_of(&in, &r, &src, true);
	ck_assert_ptr_null(strstr(t, "\nconcurrency:"));
	free(t);
	j = json_of(&in, &r, &src);
	ck_assert_ptr_null(json_object_get(j, "concurrency_note"));
	json_decref(j);
	/* flags only */
	in.rpm = 0;
	r = compute(&in);
	t = text_of(&in, &r, NULL, true);
	ck_assert_ptr_null(strstr(t, "\nconcurrency:"));
	free(t);
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("arithmetic");
	tcase_add_test(tc, example_200_requests_at_60_rpm_with_3_workers);
	tcase_add_test(tc, example_1000_requests_at_60_rpm_in_10_minutes);
	tcase_add_test(tc, budget_in_seconds_needs_whole_seconds);
	tcase_add_test(tc, budget_in_hours_needs_whole_minutes);
	tcase_add_test(tc, exactly_the_budget_fits);
	tcase_add_test(tc, rps_binds);
	tcase_add_test(tc, rph_binds);
	tcase_add_test(tc, min_ms_binds);
	tcase_add_test(tc, tpm_binds_with_avg_tokens);
	tcase_add_test(tc, tpm_without_avg_tokens_is_not_counted);
	tcase_add_test(tc, concurrency_binds);
	tcase_add_test(tc, concurrency_ceiling_schedules_the_workers_needed);
	tcase_add_test(tc, no_latency_one_worker);
	tcase_add_test(tc, effective_concurrency_exact_multiple);
	tcase_add_test(tc, workers_never_exceed_requests);
	tcase_add_test(tc, tie_goes_to_the_first);
	tcase_add_test(tc, nothing_given_is_unbounded);
	tcase_add_test(tc, concurrency_without_latency_is_unbounded);
	tcase_add_test(tc, concurrency_and_latency_alone);
	tcase_add_test(tc, every_tight_limit_is_an_option);
	tcase_add_test(tc, option_rounding);
	tcase_add_test(tc, budget_shorter_than_one_request);
	tcase_add_test(tc, nonsense_is_refused);
	tcase_add_test(tc, extreme_run_stays_finite);
	tcase_add_test(tc, duration_parsing);
	tcase_add_test(tc, duration_parsing_refuses);
	tcase_add_test(tc, duration_printing);
	suite_add_tcase(s, tc);
	TCase *report = tcase_create("report");
	tcase_add_test(report, table_shows_the_plan);
	tcase_add_test(report, ascii_table_is_ascii);
	tcase_add_test(report, utf8_names_keep_the_box_aligned);
	tcase_add_test(report, warning_lists_the_options);
	tcase_add_test(report, table_says_unbounded);
	tcase_add_test(report, json_has_the_plan);
	tcase_add_test(report, json_has_the_options);
	tcase_add_test(report, json_unbounded_is_null);
	tcase_add_test(report, utf8_locale);
	tcase_add_test(report, no_rate_limit_explains_the_controller);
	suite_add_tcase(s, report);
	return s;
}

UNIT_MAIN("plan", plan_suite)
