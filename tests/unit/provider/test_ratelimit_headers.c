/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for ratelimit_headers: every header example of PROVIDERS.md. */
#include <string.h>

#include "provider/error_body.h"
#include "provider/ratelimit_headers.h"
#include "unit.h"

/* 2026-02-25T20:01:32Z: one minute before the Anthropic example reset. */
#define NOW INT64_C(1772049692000)

#define H(n, v)                                                                                    \
	{                                                                                          \
		(n), (v), sizeof(v) - 1                                                            \
	}
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int64_t go_ms(const char *s)
{
	int64_t ns = -42;
	ck_assert_int_eq(rlh_parse_go_duration(s, strlen(s), &ns), 0);
	return ns / 1000000;
}

static int64_t go_ns(const char *s)
{
	int64_t ns = -42;
	ck_assert_int_eq(rlh_parse_go_duration(s, strlen(s), &ns), 0);
	return ns;
}

static int go_bad(const char *s)
{
	int64_t ns = 7;
	return rlh_parse_go_duration(s, strlen(s), &ns) == -1 && ns == 7;
}

START_TEST(go_duration_provider_examples)
{
	ck_assert_int_eq(go_ms("1s"), 1000);
	ck_assert_int_eq(go_ms("6m0s"), 360000);
	ck_assert_int_eq(go_ms("20ms"), 20);
	ck_assert_int_eq(go_ms("120ms"), 120);
	ck_assert_int_eq(go_ms("4m12.172s"), 252172);
	ck_assert_int_eq(go_ms("2m59.56s"), 179560);
	ck_assert_int_eq(go_ms("23h18m29.144s"), 83909144);
	ck_assert_int_eq(go_ms("0s"), 0);
	ck_assert_int_eq(go_ms("25h0m0s"), 90000000);
	ck_assert_int_eq(go_ms("1h2m3.5s"), 3723500);
}
END_TEST

START_TEST(go_duration_grammar)
{
	ck_assert_int_eq(go_ns("0"), 0);
	ck_assert_int_eq(go_ns("-0"), 0);
	ck_assert_int_eq(go_ns("+5s"), 5000000000);
	ck_assert_int_eq(go_ns("-1.5s"), -1500000000);
	ck_assert_int_eq(go_ns("1.5h"), 5400000000000);
	ck_assert_int_eq(go_ns(".5s"), 500000000);
	ck_assert_int_eq(go_ns("1.s"), 1000000000);
	ck_assert_int_eq(go_ns("300ns"), 300);
	ck_assert_int_eq(go_ns("12us"), 12000);
	ck_assert_int_eq(go_ns("12\xc2\xb5s"), 12000); /* U+00B5 */
	ck_assert_int_eq(go_ns("12\xce\xbcs"), 12000); /* U+03BC */
	ck_assert_int_eq(go_ns("1.5us"), 1500);
	ck_assert_int_eq(go_ns("1h1m1s1ms1us1ns"), 3661001001001);
	ck_assert_int_eq(go_ns(" 2s "), 2000000000);
	ck_assert_int_eq(go_ns("0.000000001s"), 1);
	ck_assert(go_bad(""));
	ck_assert(go_bad("5"));
	ck_assert(go_bad("1d"));
	ck_assert(go_bad("."));
	ck_assert(go_bad(".s"));
	ck_assert(go_bad("s"));
	ck_assert(go_bad("1s2"));
	ck_assert(go_bad("1S"));
	ck_assert(go_bad("--1s"));
	ck_assert(go_bad("1e3s"));
	ck_assert(go_bad("3000000h")); /* overflows int64 ns */
	ck_assert(go_bad("99999999999999999999s"));
	ck_assert(go_bad("1\xc2s")); /* truncated UTF-8 */
}
END_TEST

START_TEST(go_duration_prefix_in_prose)
{
	int64_t ns = 0;
	ck_assert_uint_eq(rlh_go_duration_prefix("644ms. Visit", 12, &ns), 5);
	ck_assert_int_eq(ns, 644000000);
	ck_assert_uint_eq(rlh_go_duration_prefix("1.5s.", 5, &ns), 4);
	ck_assert_int_eq(ns, 1500000000);
	ck_assert_uint_eq(rlh_go_duration_prefix("20 seconds", 10, &ns), 0);
}
END_TEST

static int dec(const char *s, double *v)
{
	return rlh_parse_decimal(s, strlen(s), v);
}

START_TEST(decimal_numbers)
{
	double v = 0;
	ck_assert_int_eq(dec("55", &v), 0);
	ck_assert(v == 55);
	ck_assert_int_eq(dec("-1", &v), 0);
	ck_assert(v == -1);
	ck_assert_int_eq(dec(" 1.25\t", &v), 0);
	ck_assert(v == 1.25);
	ck_assert_int_eq(dec(".5", &v), 0);
	ck_assert(v == 0.5);
	ck_assert_int_eq(dec("1772049722000", &v), 0);
	ck_assert(v == 1772049722000.0);
	ck_assert_int_eq(dec("1e3", &v), -1);
	ck_assert_int_eq(dec("0x10", &v), -1);
	ck_assert_int_eq(dec("inf", &v), -1);
	ck_assert_int_eq(dec("nan", &v), -1);
	ck_assert_int_eq(dec("1,5", &v), -1);
	ck_assert_int_eq(dec("", &v), -1);
	ck_assert_int_eq(dec("-", &v), -1);
	ck_assert_int_eq(dec("1 2", &v), -1);
}
END_TEST

static int64_t rfc(const char *s)
{
	int64_t ms = -1;
	ck_assert_int_eq(rlh_parse_rfc3339(s, strlen(s), &ms), 0);
	return ms;
}

static int rfc_bad(const char *s)
{
	int64_t ms;
	return rlh_parse_rfc3339(s, strlen(s), &ms) == -1;
}

START_TEST(rfc3339_instants)
{
	ck_assert_int_eq(rfc("2026-02-25T20:02:32Z"), NOW + 60000);
	ck_assert_int_eq(rfc("2026-02-25t20:02:32z"), NOW + 60000);
	ck_assert_int_eq(rfc("2026-02-25 20:02:32Z"), NOW + 60000);
	ck_assert_int_eq(rfc("2026-02-25T20:02:32.5Z"), NOW + 60500);
	ck_assert_int_eq(rfc("2026-02-25T20:02:32.123456789Z"), NOW + 60123);
	ck_assert_int_eq(rfc("2026-02-25T21:02:32+01:00"), NOW + 60000);
	ck_assert_int_eq(rfc("2026-02-25T14:32:32-05:30"), NOW + 60000);
	ck_assert_int_eq(rfc("1970-01-01T00:00:00Z"), 0);
	ck_assert_int_eq(rfc("2024-02-29T00:00:00Z"), INT64_C(1709164800000));
	ck_assert(rfc_bad("2026-02-25T20:02:32"));  /* no offset */
	ck_assert(rfc_bad("2026-02-30T00:00:00Z")); /* no such day */
	ck_assert(rfc_bad("2025-02-29T00:00:00Z")); /* not a leap year */
	ck_assert(rfc_bad("2026-13-01T00:00:00Z"));
	ck_assert(rfc_bad("2026-02-25T24:00:00Z"));
	ck_assert(rfc_bad("2026-02-25T20:02:32.Z"));
	ck_assert(rfc_bad("2026-02-25T20:02:32+0100"));
	ck_assert(rfc_bad("2026-2-25T20:02:32Z"));
	ck_assert(rfc_bad("garbage"));
}
END_TEST

static int64_t hdate(const char *s)
{
	int64_t ms = -1;
	ck_assert_int_eq(rlh_parse_http_date(s, strlen(s), &ms), 0);
	return ms;
}

START_TEST(http_dates)
{
	ck_assert_int_eq(hdate("Sun, 06 Nov 1994 08:49:37 GMT"), INT64_C(784111777000));
	ck_assert_int_eq(hdate("Sunday, 06-Nov-94 08:49:37 GMT"), INT64_C(784111777000));
	ck_assert_int_eq(hdate("Sun Nov  6 08:49:37 1994"), INT64_C(784111777000));
	ck_assert_int_eq(hdate("Wed, 25 Feb 2026 20:02:32 GMT"), NOW + 60000);
	ck_assert_int_eq(hdate("  Sun, 06 Nov 1994 08:49:37 GMT "), INT64_C(784111777000));
	/* libcurl's reading, looser than RFC 9110's grammar: another zone, no
	 * time of day, a day past the month's end */
	ck_assert_int_eq(hdate("Sun, 06 Nov 1994 08:49:37 UTC"), INT64_C(784111777000));
	ck_assert_int_eq(hdate("Sun, 06 Nov 1994 09:49:37 +0100"), INT64_C(784111777000));
	ck_assert_int_eq(hdate("Sun, 06 Nov 1994"), INT64_C(784080000000));
	ck_assert_int_eq(hdate("Sun, 31 Nov 1994 08:49:37 GMT"), INT64_C(786271777000));
	/* garbage */
	int64_t ms = 42;
	static const char *const bad[] = {"Xyz, 06 Nov 1994 08:49:37 GMT",
	                                  "Sun, 06 Foo 1994 08:49:37 GMT",
	                                  "Sun, 06 Nov 1994 24:49:37 GMT",
	                                  "garbage",
	                                  "5s",
	                                  "1e3",
	                                  "12",
	                                  "2026-02-25T20:02:32Z",
	                                  "   ",
	                                  "",
	                                  "Sun, 06 Nov 08:49:37 GMT"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(rlh_parse_http_date(bad[i], strlen(bad[i]), &ms) == -1, "%s", bad[i]);
	ck_assert_int_eq(rlh_parse_http_date("Sun, 06 Nov 1994\0 08:49:37 GMT", 30, &ms), -1);
	ck_assert_int_eq(ms, 42); /* untouched */
	/* only its len bytes are read */
	ck_assert_int_eq(rlh_parse_http_date("Sun, 06 Nov 1994 08:49:37 GMTxyz", 29, &ms), 0);
	ck_assert_int_eq(ms, INT64_C(784111777000));
}
END_TEST

START_TEST(bare_number_guess)
{
	int64_t ms = -1;
	ck_assert_int_eq(rlh_guess_number_ms(55, NOW, &ms), 0); /* Azure: seconds */
	ck_assert_int_eq(ms, 55000);
	ck_assert_int_eq(rlh_guess_number_ms(-1, NOW, &ms), -1);          /* Azure: unknown */
	ck_assert_int_eq(rlh_guess_number_ms(1772049752.0, NOW, &ms), 0); /* epoch s */
	ck_assert_int_eq(ms, 60000);
	ck_assert_int_eq(rlh_guess_number_ms(1772049722000.0, NOW, &ms), 0); /* epoch ms */
	ck_assert_int_eq(ms, 30000);
	ck_assert_int_eq(rlh_guess_number_ms(1700000000.0, NOW, &ms), 0); /* past */
	ck_assert_int_eq(ms, 0);
	ck_assert_int_eq(rlh_guess_number_ms(0.0015, NOW, &ms), 0); /* rounds up */
	ck_assert_int_eq(ms, 2);
}
END_TEST

static int64_t reset(const char *s)
{
	int64_t ms = -1;
	ck_assert_int_eq(rlh_parse_reset(s, strlen(s), NOW, &ms), 0);
	return ms;
}

START_TEST(reset_any_form)
{
	ck_assert_int_eq(reset("6m0s"), 360000);
	ck_assert_int_eq(reset("55"), 55000);
	ck_assert_int_eq(reset("2026-02-25T20:02:32Z"), 60000);
	ck_assert_int_eq(reset("1772049722000"), 30000);
	ck_assert_int_eq(reset("Wed, 25 Feb 2026 20:02:32 GMT"), 60000);
	ck_assert_int_eq(reset("2026-02-25T20:00:00Z"), 0); /* already past */
	ck_assert_int_eq(reset("-5s"), 0);
	ck_assert_int_eq(reset("1us"), 1); /* sub-ms rounds up */
	int64_t ms = 9;
	ck_assert_int_eq(rlh_parse_reset("-1", 2, NOW, &ms), -1);
	ck_assert_int_eq(rlh_parse_reset("soon", 4, NOW, &ms), -1);
	ck_assert_int_eq(rlh_parse_reset("", 0, NOW, &ms), -1);
	ck_assert_int_eq(ms, 9);
}
END_TEST

START_TEST(retry_after_values)
{
	int64_t ms = -1;
	ck_assert_int_eq(rlh_parse_retry_after("5", 1, NOW, &ms), 0);
	ck_assert_int_eq(ms, 5000);
	ck_assert_int_eq(rlh_parse_retry_after("0.25", 4, NOW, &ms), 0);
	ck_assert_int_eq(ms, 250);
	ck_assert_int_eq(rlh_parse_retry_after("Wed, 25 Feb 2026 20:02:32 GMT", 29, NOW, &ms), 0);
	ck_assert_int_eq(ms, 60000);
	ck_assert_int_eq(rlh_parse_retry_after("-3", 2, NOW, &ms), -1);
	ck_assert_int_eq(rlh_parse_retry_after("1e3", 3, NOW, &ms), -1);
	ck_assert_int_eq(rlh_parse_retry_after("5s", 2, NOW, &ms), -1);
}
END_TEST

static void parse(enum dialect d, const struct rlh_header *h, size_t n, struct rlh_result *r)
{
	rlh_parse(d, h, n, NOW, r);
}

#define B(r, k) (&(r).budget[k])

START_TEST(openai_headers)
{
	static const struct rlh_header h[] = {
	    H("x-ratelimit-limit-requests", "60"),
	    H("X-RateLimit-Limit-Tokens", "150000"),
	    H("x-ratelimit-remaining-requests", "59"),
	    H("x-ratelimit-remaining-tokens", "149984"),
	    H("x-ratelimit-reset-requests", "1s"),
	    H("x-ratelimit-reset-tokens", "6m0s"),
	    H("x-ratelimit-limit-tokens_usage_based", "1"),
	    H("x-request-id", "req_1"),
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, h, COUNT(h), &r);
	ck_assert(B(r, RLH_REQUESTS)->has_limit && B(r, RLH_REQUESTS)->limit == 60);
	ck_assert(B(r, RLH_REQUESTS)->has_remaining && B(r, RLH_REQUESTS)->remaining == 59);
	ck_assert(B(r, RLH_REQUESTS)->has_reset && B(r, RLH_REQUESTS)->reset_ms == 1000);
	ck_assert(B(r, RLH_TOKENS)->has_limit && B(r, RLH_TOKENS)->limit == 150000);
	ck_assert(B(r, RLH_TOKENS)->has_remaining && B(r, RLH_TOKENS)->remaining == 149984);
	ck_assert(B(r, RLH_TOKENS)->has_reset && B(r, RLH_TOKENS)->reset_ms == 360000);
	ck_assert(!B(r, RLH_INPUT_TOKENS)->has_limit);
	ck_assert(!r.has_hint && !r.has_should_retry);

	/* the same headers mean nothing to the Anthropic dialect */
	parse(DIALECT_ANTHROPIC, h, COUNT(h), &r);
	ck_assert(!B(r, RLH_REQUESTS)->has_limit && !B(r, RLH_TOKENS)->has_reset);
}
END_TEST

START_TEST(groq_headers)
{
	static const struct rlh_header h[] = {
	    H("x-ratelimit-limit-requests", "14400"),
	    H("x-ratelimit-remaining-requests", "14370"),
	    H("x-ratelimit-reset-requests", "2m59.56s"),
	    H("x-ratelimit-reset-tokens", "4m12.172s"),
	    H("retry-after", "2"),
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, h, COUNT(h), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 179560);
	ck_assert_int_eq(B(r, RLH_TOKENS)->reset_ms, 252172);
	ck_assert(r.has_hint);
	ck_assert_int_eq(r.hint_ms, 2000);
}
END_TEST

START_TEST(anthropic_headers)
{
	static const struct rlh_header h[] = {
	    H("anthropic-ratelimit-requests-limit", "50"),
	    H("anthropic-ratelimit-requests-remaining", "49"),
	    H("anthropic-ratelimit-requests-reset", "2026-02-25T20:02:32Z"),
	    H("anthropic-ratelimit-tokens-limit", "38000"),
	    H("anthropic-ratelimit-tokens-remaining", "36000"),
	    H("anthropic-ratelimit-tokens-reset", "2026-02-25T20:01:33Z"),
	    H("anthropic-ratelimit-input-tokens-limit", "30000"),
	    H("anthropic-ratelimit-input-tokens-remaining", "0"),
	    H("anthropic-ratelimit-input-tokens-reset", "2026-02-25T20:01:42Z"),
	    H("anthropic-ratelimit-output-tokens-limit", "8000"),
	    H("anthropic-ratelimit-output-tokens-remaining", "8000"),
	    H("anthropic-ratelimit-output-tokens-reset", "2026-02-25T20:01:32Z"),
	    H("retry-after", "5"),
	};
	struct rlh_result r;
	parse(DIALECT_ANTHROPIC, h, COUNT(h), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 50);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 49);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 60000);
	ck_assert_int_eq(B(r, RLH_TOKENS)->limit, 38000);
	ck_assert_int_eq(B(r, RLH_TOKENS)->remaining, 36000);
	ck_assert_int_eq(B(r, RLH_TOKENS)->reset_ms, 1000);
	ck_assert_int_eq(B(r, RLH_INPUT_TOKENS)->limit, 30000);
	ck_assert(B(r, RLH_INPUT_TOKENS)->has_remaining);
	ck_assert_int_eq(B(r, RLH_INPUT_TOKENS)->remaining, 0);
	ck_assert_int_eq(B(r, RLH_INPUT_TOKENS)->reset_ms, 10000);
	ck_assert_int_eq(B(r, RLH_OUTPUT_TOKENS)->limit, 8000);
	ck_assert_int_eq(B(r, RLH_OUTPUT_TOKENS)->reset_ms, 0);
	ck_assert(r.has_hint && r.hint_ms == 5000);
	int64_t ms = 0;
	ck_assert(rlh_exhausted_reset(&r, &ms));
	ck_assert_int_eq(ms, 10000);
	/* header hint beats the exhausted reset */
	ck_assert(rlh_server_hint(&r, NULL, &ms));
	ck_assert_int_eq(ms, 5000);
}
END_TEST

START_TEST(azure_headers)
{
	static const struct rlh_header h[] = {
	    H("x-ratelimit-remaining-requests", "0"),
	    H("x-ratelimit-remaining-tokens", "0"),
	    H("x-ratelimit-limit-tokens", "120000"),
	    H("x-ratelimit-reset-tokens", "55"),
	    H("x-rate-limit-reset-tokens", "-1"),
	    H("x-ms-retry-after-ms", "54000"),
	    H("retry-after", "55"),
	};
	struct rlh_result r;
	parse(DIALECT_AZURE, h, COUNT(h), &r);
	ck_assert_int_eq(B(r, RLH_TOKENS)->limit, 120000);
	ck_assert(B(r, RLH_TOKENS)->has_remaining && B(r, RLH_TOKENS)->remaining == 0);
	ck_assert(B(r, RLH_TOKENS)->has_reset);
	ck_assert_int_eq(B(r, RLH_TOKENS)->reset_ms, 55000); /* -1 did not erase it */
	ck_assert(B(r, RLH_REQUESTS)->has_remaining && !B(r, RLH_REQUESTS)->has_reset);
	ck_assert(r.has_hint);
	ck_assert_int_eq(r.hint_ms, 54000); /* x-ms-retry-after-ms beats retry-after */

	static const struct rlh_header h2[] = {
	    H("x-ratelimit-reset-tokens", "-1"),
	    H("retry-after", "55"),
	    H("retry-after-ms", "54321.5"),
	    H("x-ms-retry-after-ms", "54000"),
	};
	parse(DIALECT_AZURE, h2, COUNT(h2), &r);
	ck_assert(!B(r, RLH_TOKENS)->has_reset); /* -1 = unknown */
	ck_assert_int_eq(r.hint_ms, 54322);      /* retry-after-ms first, rounded up */

	/* The usual answer: remaining counts only (Azure-Samples/openai#80's capture) */
	static const struct rlh_header h3[] = {
	    H("x-ratelimit-remaining-requests", "79"),
	    H("x-ratelimit-remaining-tokens", "61353"),
	};
	parse(DIALECT_AZURE, h3, COUNT(h3), &r);
	for (int b = RLH_REQUESTS; b <= RLH_TOKENS; b++) {
		ck_assert(B(r, b)->has_remaining);
		ck_assert(!B(r, b)->has_limit && !B(r, b)->has_reset);
	}
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 79);
	ck_assert_int_eq(B(r, RLH_TOKENS)->remaining, 61353);

	/* "no data" (openai-dotnet#838): -1 counts are no counts; the reset 0
	 * that came with them is read, whole seconds */
	static const struct rlh_header h4[] = {
	    H("x-ratelimit-limit-tokens", "-1"),
	    H("x-ratelimit-remaining-tokens", "-1"),
	    H("x-ratelimit-reset-tokens", "0"),
	};
	parse(DIALECT_AZURE, h4, COUNT(h4), &r);
	ck_assert(!B(r, RLH_TOKENS)->has_limit && !B(r, RLH_TOKENS)->has_remaining);
	ck_assert(B(r, RLH_TOKENS)->has_reset && B(r, RLH_TOKENS)->reset_coarse);
}
END_TEST

/* OpenAI's project-level token limit is a budget of its own beside the
 * model's; Cerebras' request budget is per day and its tokens per minute,
 * resets in float seconds (PROVIDERS.md §11). */
START_TEST(project_tokens_and_cerebras_budgets)
{
	static const struct rlh_header oai[] = {
	    H("x-ratelimit-limit-tokens", "30000"),
	    H("x-ratelimit-remaining-tokens", "29000"),
	    H("x-ratelimit-reset-tokens", "2s"),
	    H("x-ratelimit-limit-project-tokens", "5000000"),
	    H("x-ratelimit-remaining-project-tokens", "4990000"),
	    H("x-ratelimit-reset-project-tokens", "120ms"),
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, oai, COUNT(oai), &r);
	ck_assert_int_eq(B(r, RLH_TOKENS)->remaining, 29000);
	ck_assert_int_eq(B(r, RLH_TOKENS)->reset_ms, 2000);
	ck_assert_int_eq(B(r, RLH_PROJECT_TOKENS)->limit, 5000000);
	ck_assert_int_eq(B(r, RLH_PROJECT_TOKENS)->remaining, 4990000);
	ck_assert_int_eq(B(r, RLH_PROJECT_TOKENS)->reset_ms, 120);
	ck_assert(!B(r, RLH_PROJECT_TOKENS)->reset_coarse);
	/* Azure knows no project tokens */
	parse(DIALECT_AZURE, oai, COUNT(oai), &r);
	ck_assert(!B(r, RLH_PROJECT_TOKENS)->has_limit);

	static const struct rlh_header cerebras[] = {
	    H("x-ratelimit-limit-requests-day", "14400"),
	    H("x-ratelimit-remaining-requests-day", "14370"),
	    H("x-ratelimit-reset-requests-day", "33011.382867"),
	    H("x-ratelimit-limit-tokens-minute", "60000"),
	    H("x-ratelimit-remaining-tokens-minute", "59800"),
	    H("x-ratelimit-reset-tokens-minute", "11.382867"),
	};
	parse(DIALECT_OPENAI, cerebras, COUNT(cerebras), &r);
	const struct rlh_budget *rq = B(r, RLH_REQUESTS), *tk = B(r, RLH_TOKENS);
	ck_assert(rq->has_limit && rq->has_remaining && rq->has_reset);
	ck_assert_int_eq(rq->limit, 14400);
	ck_assert_int_eq(rq->remaining, 14370);
	ck_assert_int_eq(rq->reset_ms, 33011383);
	ck_assert_int_eq(rq->window_ms, 86400000);
	ck_assert(!rq->reset_coarse);
	ck_assert_int_eq(tk->limit, 60000);
	ck_assert_int_eq(tk->remaining, 59800);
	ck_assert_int_eq(tk->reset_ms, 11383);
	ck_assert_int_eq(tk->window_ms, 60000);
	for (int b = RLH_INPUT_TOKENS; b < RLH_N_BUDGETS; b++)
		ck_assert(!B(r, b)->has_limit && !B(r, b)->has_remaining && !B(r, b)->has_reset);
}
END_TEST

START_TEST(mistral_headers)
{
	static const struct rlh_header h[] = {
	    H("x-ratelimit-limit-req-minute", "120"),
	    H("x-ratelimit-remaining-req-minute", "119"),
	    H("x-ratelimit-limit-tokens-minute", "500000"),
	    H("x-ratelimit-remaining-tokens-minute", "499000"),
	    H("x-ratelimit-tokens-query-cost", "1000"),
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, h, COUNT(h), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 120);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 119);
	ck_assert_int_eq(B(r, RLH_TOKENS)->limit, 500000);
	ck_assert_int_eq(B(r, RLH_TOKENS)->remaining, 499000);
	ck_assert(!B(r, RLH_REQUESTS)->has_reset && !B(r, RLH_TOKENS)->has_reset);
}
END_TEST

START_TEST(together_and_openrouter_headers)
{
	static const struct rlh_header together[] = {
	    H("x-ratelimit-limit", "10"),        H("x-ratelimit-remaining", "9"),
	    H("x-ratelimit-reset", "1"),         H("x-tokenlimit-limit", "3333"),
	    H("x-tokenlimit-remaining", "3000"),
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, together, COUNT(together), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 10);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 9);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 1000);
	ck_assert_int_eq(B(r, RLH_TOKENS)->limit, 3333);
	ck_assert_int_eq(B(r, RLH_TOKENS)->remaining, 3000);

	static const struct rlh_header openrouter[] = {
	    H("X-RateLimit-Limit", "20"),
	    H("X-RateLimit-Remaining", "0"),
	    H("X-RateLimit-Reset", "1772049722000"),
	};
	parse(DIALECT_OPENAI, openrouter, COUNT(openrouter), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 20);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 0);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 30000);
	int64_t ms = 0;
	ck_assert(rlh_server_hint(&r, NULL, &ms));
	ck_assert_int_eq(ms, 30000);
}
END_TEST

START_TEST(fireworks_headers)
{
	static const struct rlh_header h[] = {
	    H("x-ratelimit-limit-requests", "600"),
	    H("x-ratelimit-limit-tokens-prompt", "60000"),
	    H("x-ratelimit-limit-tokens-generated", "6000"),
	    H("x-ratelimit-remaining-requests", "599"),
	    H("x-ratelimit-remaining-tokens-prompt", "59000"),
	    H("x-ratelimit-remaining-tokens-generated", "5900"),
	    H("x-ratelimit-over-limit", "yes"),
	    H("retry-after", "1"),
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, h, COUNT(h), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 600);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 599);
	ck_assert_int_eq(B(r, RLH_INPUT_TOKENS)->limit, 60000);
	ck_assert_int_eq(B(r, RLH_INPUT_TOKENS)->remaining, 59000);
	ck_assert_int_eq(B(r, RLH_OUTPUT_TOKENS)->limit, 6000);
	ck_assert_int_eq(B(r, RLH_OUTPUT_TOKENS)->remaining, 5900);
	ck_assert(r.over_limit);
	ck_assert_int_eq(r.hint_ms, 1000);
}
END_TEST

START_TEST(should_retry_header)
{
	static const struct rlh_header f[] = {H("X-Should-Retry", " false ")};
	static const struct rlh_header t[] = {H("x-should-retry", "true")};
	static const struct rlh_header bad[] = {H("x-should-retry", "maybe")};
	struct rlh_result r;
	parse(DIALECT_NONE, f, 1, &r);
	ck_assert(r.has_should_retry && !r.should_retry);
	parse(DIALECT_OPENAI, t, 1, &r);
	ck_assert(r.has_should_retry && r.should_retry);
	parse(DIALECT_OPENAI, bad, 1, &r);
	ck_assert(!r.has_should_retry);
}
END_TEST

START_TEST(malformed_values_ignored)
{
	static const struct rlh_header h[] = {
	    H("x-ratelimit-limit-requests", "sixty"),
	    H("x-ratelimit-remaining-requests", "-3"),
	    H("x-ratelimit-reset-requests", "1d"),
	    H("x-ratelimit-limit-tokens", ""),
	    H("x-ratelimit-remaining-tokens", "1e5"),
	    H("x-ratelimit-reset-tokens", "2026-02-25T20:02:32"),
	    H("retry-after", "soon"),
	    H("retry-after-ms", "-5"),
	    {NULL, "x", 1},
	    {"x-ratelimit-limit-requests", NULL, 0},
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, h, COUNT(h), &r);
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		ck_assert(!r.budget[b].has_limit);
		ck_assert(!r.budget[b].has_remaining);
		ck_assert(!r.budget[b].has_reset);
	}
	ck_assert(!r.has_hint);
	/* value not NUL-terminated: only value_len bytes count */
	struct rlh_header cut = {"x-ratelimit-limit-requests", "6000", 2};
	parse(DIALECT_OPENAI, &cut, 1, &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 60);
}
END_TEST

START_TEST(dialect_none_learns_nothing)
{
	static const struct rlh_header h[] = {
	    H("x-ratelimit-remaining-requests", "0"),
	    H("RateLimit", "\"default\";r=0;t=30"),
	    H("retry-after", "7"),
	};
	struct rlh_result r;
	parse(DIALECT_NONE, h, COUNT(h), &r);
	ck_assert(!B(r, RLH_REQUESTS)->has_remaining);
	ck_assert(r.has_hint && r.hint_ms == 7000);
	parse(DIALECT_IETF, h, COUNT(h), &r); /* IETF only: OpenAI names ignored */
	ck_assert(B(r, RLH_REQUESTS)->has_remaining);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 0);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 30000);
}
END_TEST

START_TEST(ietf_draft10_fields)
{
	struct rlh_ietf_item it[RLH_IETF_MAX_ITEMS];
	const char *pol = "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400";
	ck_assert_uint_eq(rlh_parse_ietf(pol, strlen(pol), it, RLH_IETF_MAX_ITEMS), 2);
	ck_assert_str_eq(it[0].name, "burst");
	ck_assert(it[0].has_q && it[0].q == 100 && it[0].has_w && it[0].w == 60);
	ck_assert_str_eq(it[1].name, "daily");
	ck_assert(it[1].q == 1000 && it[1].w == 86400);
	ck_assert_int_eq(it[1].unit, RLH_UNIT_REQUESTS);

	const char *rl = "\"default\";r=50;t=30";
	ck_assert_uint_eq(rlh_parse_ietf(rl, strlen(rl), it, RLH_IETF_MAX_ITEMS), 1);
	ck_assert(it[0].has_r && it[0].r == 50 && it[0].has_t && it[0].t == 30);

	const char *tok = "\"tpm\";q=1000;w=60;qu=\"tokens\";pk=:abc=:";
	ck_assert_uint_eq(rlh_parse_ietf(tok, strlen(tok), it, RLH_IETF_MAX_ITEMS), 1);
	ck_assert_int_eq(it[0].unit, RLH_UNIT_TOKENS);

	const char *bad = "\"a\";r=1, \"b\";r=oops, \"c\";r=3";
	ck_assert_uint_eq(rlh_parse_ietf(bad, strlen(bad), it, RLH_IETF_MAX_ITEMS), 1);
	ck_assert_uint_eq(rlh_parse_ietf("\"unterminated;r=1", 17, it, 8), 0);
	ck_assert_uint_eq(rlh_parse_ietf(pol, strlen(pol), it, 1), 1); /* respects max */
}
END_TEST

START_TEST(ietf_draft07_and_older)
{
	struct rlh_ietf_item it[RLH_IETF_MAX_ITEMS];
	const char *d7 = "limit=100, remaining=50, reset=5";
	ck_assert_uint_eq(rlh_parse_ietf(d7, strlen(d7), it, RLH_IETF_MAX_ITEMS), 1);
	ck_assert(it[0].q == 100 && it[0].r == 50 && it[0].t == 5);

	static const struct rlh_header h7[] = {H("RateLimit", "limit=100, remaining=50, reset=5")};
	struct rlh_result r;
	parse(DIALECT_IETF, h7, 1, &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 100);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 50);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 5000);

	static const struct rlh_header old[] = {
	    H("RateLimit-Limit", "100, 100;w=60"),
	    H("RateLimit-Remaining", "7"),
	    H("RateLimit-Reset", "12"),
	};
	parse(DIALECT_ANTHROPIC, old, COUNT(old), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 100);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 7);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 12000);
}
END_TEST

START_TEST(ietf_in_response_and_precedence)
{
	/* the binding item is the one with the fewest remaining; limit from its policy */
	static const struct rlh_header h[] = {
	    H("RateLimit", "\"burst\";r=50;t=30, \"daily\";r=3;t=4000"),
	    H("RateLimit-Policy", "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400"),
	    H("Retry-After", "9"),
	};
	struct rlh_result r;
	parse(DIALECT_OPENAI, h, COUNT(h), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 3);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 4000000);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->limit, 1000);
	ck_assert_int_eq(r.hint_ms, 9000); /* Retry-After wins as the hint */

	/* a provider header beats the IETF field whatever the order */
	static const struct rlh_header both[] = {
	    H("x-ratelimit-remaining-requests", "11"),
	    H("RateLimit", "\"default\";r=50;t=30"),
	    H("RateLimit-Remaining", "40"),
	};
	parse(DIALECT_OPENAI, both, COUNT(both), &r);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->remaining, 11);
	ck_assert_int_eq(B(r, RLH_REQUESTS)->reset_ms, 30000);
}
END_TEST

static int text_ms(const char *s)
{
	int64_t ms = -1;
	return rlh_text_hint(s, strlen(s), &ms) == 0 ? (int)ms : -1;
}

/* Delays in prose (error bodies' messages: error_body reads them with this). */
START_TEST(text_hints)
{
	ck_assert_int_eq(text_ms("Please try again in 644ms. Visit https://x"), 644);
	ck_assert_int_eq(text_ms("Please try again in 1.5s."), 1500);
	ck_assert_int_eq(text_ms("Please try again in 6m0s."), 360000);
	ck_assert_int_eq(text_ms("Please retry after 86400 seconds. Please go here"), 86400000);
	ck_assert_int_eq(text_ms("Rate limit is exceeded. Try again in 12 seconds."), 12000);
	ck_assert_int_eq(text_ms("You exceeded your current quota. Please retry in 25.4s."), 25400);
	ck_assert_int_eq(text_ms("retry after 2 minutes"), 120000);
	ck_assert_int_eq(text_ms("RETRY AFTER 1 hour"), 3600000);
	ck_assert_int_eq(text_ms("try again in 250 milliseconds"), 250);
	ck_assert_int_eq(text_ms("no hint here"), -1);
	ck_assert_int_eq(text_ms("try again in a moment"), -1);
	ck_assert_int_eq(text_ms("try again in"), -1);
	ck_assert_int_eq(text_ms(""), -1);
}
END_TEST

/* The server's hint: header hint, else the smaller of an exhausted reset and
 * the body's delay. */
START_TEST(server_hint_order)
{
	struct error_hints bh = {.has_delay = true, .delay_ms = 1234};
	int64_t ms = 0;
	ck_assert(rlh_server_hint(NULL, &bh, &ms));
	ck_assert_int_eq(ms, 1234);
	ck_assert(!rlh_server_hint(NULL, NULL, &ms));
	struct error_hints none = {.has_delay = false, .delay_ms = 99};
	ck_assert(!rlh_server_hint(NULL, &none, &ms));
	/* OpenAI 429: tokens at 0, full refill in 6m0s, but the body says 644ms */
	static const struct rlh_header oai[] = {
	    H("x-ratelimit-remaining-tokens", "0"),
	    H("x-ratelimit-reset-tokens", "6m0s"),
	};
	struct rlh_result r;
	rlh_parse(DIALECT_OPENAI, oai, 2, NOW, &r);
	bh.delay_ms = 644;
	ck_assert(rlh_server_hint(&r, &bh, &ms));
	ck_assert_int_eq(ms, 644);
	ck_assert(rlh_server_hint(&r, NULL, &ms));
	ck_assert_int_eq(ms, 360000);
	bh.delay_ms = 500000; /* a body asking for longer than the reset */
	ck_assert(rlh_server_hint(&r, &bh, &ms));
	ck_assert_int_eq(ms, 360000);
	/* a header hint beats both */
	static const struct rlh_header with_ra[] = {
	    H("x-ratelimit-remaining-tokens", "0"),
	    H("x-ratelimit-reset-tokens", "6m0s"),
	    H("retry-after", "7"),
	};
	rlh_parse(DIALECT_OPENAI, with_ra, 3, NOW, &r);
	ck_assert(rlh_server_hint(&r, &bh, &ms));
	ck_assert_int_eq(ms, 7000);
}
END_TEST

/* Table-driven: every header example of PROVIDERS.md as (dialect, header,
 * value) → (budget, field, expected). One check per row. */
enum fld { LIM, REM, RST };

static const struct vector {
	enum dialect d;
	const char *name, *value;
	enum rlh_budget_kind b;
	enum fld f;
	int64_t want; /* -1: the field must stay unset */
} vectors[] = {
    {DIALECT_OPENAI, "x-ratelimit-limit-requests", "60", RLH_REQUESTS, LIM, 60},
    {DIALECT_OPENAI, "x-ratelimit-limit-tokens", "150000", RLH_TOKENS, LIM, 150000},
    {DIALECT_OPENAI, "x-ratelimit-remaining-requests", "59", RLH_REQUESTS, REM, 59},
    {DIALECT_OPENAI, "x-ratelimit-remaining-tokens", "149984", RLH_TOKENS, REM, 149984},
    {DIALECT_OPENAI, "x-ratelimit-reset-requests", "1s", RLH_REQUESTS, RST, 1000},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens", "6m0s", RLH_TOKENS, RST, 360000},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens", "20ms", RLH_TOKENS, RST, 20},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens", "120ms", RLH_TOKENS, RST, 120},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens", "4m12.172s", RLH_TOKENS, RST, 252172},
    {DIALECT_OPENAI, "x-ratelimit-reset-requests", "2m59.56s", RLH_REQUESTS, RST, 179560},
    {DIALECT_OPENAI, "x-ratelimit-reset-requests", "23h18m29.144s", RLH_REQUESTS, RST, 83909144},
    {DIALECT_OPENAI, "x-ratelimit-reset-requests", "0s", RLH_REQUESTS, RST, 0},
    {DIALECT_OPENAI, "x-ratelimit-reset-requests", "25h0m0s", RLH_REQUESTS, RST, 90000000},
    {DIALECT_OPENAI, "x-ratelimit-reset-requests", "1h2m3.5s", RLH_REQUESTS, RST, 3723500},
    {DIALECT_OPENAI, "X-RATELIMIT-RESET-TOKENS", "1s", RLH_TOKENS, RST, 1000},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens", "1 s", RLH_TOKENS, RST, -1},
    {DIALECT_AZURE, "x-ratelimit-reset-tokens", "55", RLH_TOKENS, RST, 55000},
    {DIALECT_AZURE, "x-ratelimit-reset-tokens", "-1", RLH_TOKENS, RST, -1},
    {DIALECT_AZURE, "x-rate-limit-reset-tokens", "55", RLH_TOKENS, RST, 55000},
    {DIALECT_AZURE, "x-ratelimit-remaining-requests", "0", RLH_REQUESTS, REM, 0},
    {DIALECT_AZURE, "x-ratelimit-limit-req-minute", "120", RLH_REQUESTS, LIM, -1},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-requests-limit", "50", RLH_REQUESTS, LIM, 50},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-requests-remaining", "49", RLH_REQUESTS, REM, 49},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-requests-reset", "2026-02-25T20:02:32Z", RLH_REQUESTS,
     RST, 60000},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-tokens-limit", "38000", RLH_TOKENS, LIM, 38000},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-tokens-remaining", "36000", RLH_TOKENS, REM, 36000},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-input-tokens-limit", "30000", RLH_INPUT_TOKENS, LIM,
     30000},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-output-tokens-limit", "8000", RLH_OUTPUT_TOKENS, LIM,
     8000},
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-output-tokens-reset", "2026-02-25T20:02:32.250+00:00",
     RLH_OUTPUT_TOKENS, RST, 60250},
    {DIALECT_ANTHROPIC, "x-ratelimit-limit-requests", "60", RLH_REQUESTS, LIM, -1},
    {DIALECT_OPENAI, "x-ratelimit-limit-req-minute", "120", RLH_REQUESTS, LIM, 120},
    {DIALECT_OPENAI, "x-ratelimit-remaining-tokens-minute", "499000", RLH_TOKENS, REM, 499000},
    {DIALECT_OPENAI, "x-ratelimit-reset", "1", RLH_REQUESTS, RST, 1000},
    {DIALECT_OPENAI, "x-ratelimit-reset", "1772049722000", RLH_REQUESTS, RST, 30000},
    {DIALECT_OPENAI, "x-ratelimit-reset", "1772049752", RLH_REQUESTS, RST, 60000},
    {DIALECT_OPENAI, "x-tokenlimit-remaining", "3000", RLH_TOKENS, REM, 3000},
    {DIALECT_OPENAI, "x-ratelimit-remaining-tokens-generated", "5900", RLH_OUTPUT_TOKENS, REM,
     5900},
    {DIALECT_OPENAI, "x-ratelimit-limit-tokens-prompt", "60000", RLH_INPUT_TOKENS, LIM, 60000},
    {DIALECT_IETF, "RateLimit-Remaining", "7", RLH_REQUESTS, REM, 7},
    {DIALECT_IETF, "RateLimit-Reset", "12", RLH_REQUESTS, RST, 12000},
    {DIALECT_IETF, "RateLimit", "\"default\";r=50;t=30", RLH_REQUESTS, RST, 30000},
    {DIALECT_IETF, "RateLimit", "limit=100, remaining=50, reset=5", RLH_REQUESTS, LIM, 100},
    {DIALECT_IETF, "RateLimit", "\"default\";r=-5;t=30", RLH_REQUESTS, REM, -1},
    {DIALECT_IETF, "x-ratelimit-remaining-requests", "5", RLH_REQUESTS, REM, -1},
    {DIALECT_NONE, "RateLimit-Remaining", "7", RLH_REQUESTS, REM, -1},
    {DIALECT_OPENAI, "x-ratelimit-remaining-requests", "5.0", RLH_REQUESTS, REM, 5},
    {DIALECT_OPENAI, "x-ratelimit-remaining-requests", "0x10", RLH_REQUESTS, REM, -1},
    {DIALECT_OPENAI, "x-ratelimit-remaining-requests", "1e3", RLH_REQUESTS, REM, -1},
};

START_TEST(header_vector)
{
	const struct vector *v = &vectors[_i];
	struct rlh_header h = {v->name, v->value, strlen(v->value)};
	struct rlh_result r;
	rlh_parse(v->d, &h, 1, NOW, &r);
	const struct rlh_budget *b = &r.budget[v->b];
	bool has = v->f == LIM ? b->has_limit : v->f == REM ? b->has_remaining : b->has_reset;
	int64_t got = v->f == LIM ? b->limit : v->f == REM ? b->remaining : b->reset_ms;
	if (v->want < 0) {
		ck_assert_msg(!has, "%s: %s set", v->name, v->value);
	} else {
		ck_assert_msg(has, "%s: %s unset", v->name, v->value);
		ck_assert_msg(got == v->want, "%s: %s -> %lld, want %lld", v->name, v->value,
		              (long long)got, (long long)v->want);
	}
}
END_TEST

/* What a budget's headers say besides the numbers (issue 28): whether its
 * reset is whole seconds (a bound, not an instant), and the window its
 * name states (0: none). One header each. */
static const struct shape_vector {
	enum dialect d;
	const char *name, *value;
	enum rlh_budget_kind b;
	bool coarse;
	int64_t window_ms;
} shape_vectors[] = {
    {DIALECT_AZURE, "x-ratelimit-reset-requests", "1", RLH_REQUESTS, true, 0},
    {DIALECT_AZURE, "x-ratelimit-reset-tokens", "55", RLH_TOKENS, true, 0},
    {DIALECT_AZURE, "x-rate-limit-reset-tokens", "0", RLH_TOKENS, true, 0},
    /* Azure's limits are its RPM and TPM; OpenAI's and Groq's names say no window */
    {DIALECT_AZURE, "x-ratelimit-limit-requests", "120", RLH_REQUESTS, false, 60000},
    {DIALECT_AZURE, "x-ratelimit-limit-tokens", "120000", RLH_TOKENS, false, 60000},
    {DIALECT_OPENAI, "x-ratelimit-limit-requests", "14400", RLH_REQUESTS, false, 0},
    {DIALECT_OPENAI, "x-ratelimit-limit-tokens", "6000", RLH_TOKENS, false, 0},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens", "1s", RLH_TOKENS, false, 0},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens", "6m0s", RLH_TOKENS, false, 0},
    {DIALECT_OPENAI, "x-ratelimit-reset", "1", RLH_REQUESTS, true, 0},              /* Together */
    {DIALECT_OPENAI, "x-ratelimit-reset", "1772049722000", RLH_REQUESTS, false, 0}, /* OpenRouter */
    {DIALECT_OPENAI, "x-ratelimit-limit-req-minute", "120", RLH_REQUESTS, false, 60000},
    {DIALECT_OPENAI, "x-ratelimit-remaining-tokens-minute", "499000", RLH_TOKENS, false, 60000},
    {DIALECT_OPENAI, "x-ratelimit-reset-requests-day", "33011.382867", RLH_REQUESTS, false,
     86400000},
    {DIALECT_OPENAI, "x-ratelimit-reset-tokens-minute", "59", RLH_TOKENS, true, 60000},
    {DIALECT_OPENAI, "x-ratelimit-limit-project-tokens", "5000000", RLH_PROJECT_TOKENS, false, 0},
    /* instants are precise, even to the second: Anthropic stays with its (remaining, reset) fit */
    {DIALECT_ANTHROPIC, "anthropic-ratelimit-requests-reset", "2026-02-25T20:02:32Z", RLH_REQUESTS,
     false, 0},
    {DIALECT_IETF, "RateLimit", "\"default\";r=50;t=30", RLH_REQUESTS, true, 0},
    {DIALECT_IETF, "RateLimit-Reset", "12", RLH_REQUESTS, true, 0},
    {DIALECT_IETF, "RateLimit-Reset", "12.5", RLH_REQUESTS, false, 0},
};

START_TEST(shape_vector)
{
	const struct shape_vector *v = &shape_vectors[_i];
	struct rlh_header h = {v->name, v->value, strlen(v->value)};
	struct rlh_result r;
	rlh_parse(v->d, &h, 1, NOW, &r);
	const struct rlh_budget *b = &r.budget[v->b];
	ck_assert_msg(b->has_limit || b->has_remaining || b->has_reset, "%s: nothing read",
	              v->name);
	ck_assert_msg(b->reset_coarse == v->coarse, "%s: %s coarse %d", v->name, v->value,
	              b->reset_coarse);
	ck_assert_msg(b->window_ms == v->window_ms, "%s: window %lld", v->name,
	              (long long)b->window_ms);
}
END_TEST

/* Server hints, one header each: value → hint ms (-1: none). */
static const struct hint_vector {
	const char *name, *value;
	int64_t want;
} hint_vectors[] = {
    {"retry-after", "5", 5000},
    {"Retry-After", "0", 0},
    {"retry-after", "1.5", 1500},
    {"retry-after", "Wed, 25 Feb 2026 20:02:32 GMT", 60000},
    {"retry-after", "Wednesday, 25-Feb-26 20:02:32 GMT", 60000},
    {"retry-after", "Wed Feb 25 20:02:32 2026", 60000},
    {"retry-after", "Wed, 25 Feb 2026 20:00:00 GMT", 0},
    {"retry-after", "-1", -1},
    {"retry-after", "5s", -1},
    {"retry-after", "", -1},
    {"retry-after-ms", "644", 644},
    {"retry-after-ms", "0.4", 1},
    {"retry-after-ms", "abc", -1},
    {"x-ms-retry-after-ms", "54000", 54000},
    {"x-retry-after", "5", -1},
};

START_TEST(hint_vector)
{
	const struct hint_vector *v = &hint_vectors[_i];
	struct rlh_header h = {v->name, v->value, strlen(v->value)};
	struct rlh_result r;
	rlh_parse(DIALECT_NONE, &h, 1, NOW, &r);
	if (v->want < 0) {
		ck_assert_msg(!r.has_hint, "%s: %s", v->name, v->value);
	} else {
		ck_assert_msg(r.has_hint, "%s: %s", v->name, v->value);
		ck_assert_msg(r.hint_ms == v->want, "%s: %s -> %lld", v->name, v->value,
		              (long long)r.hint_ms);
	}
}
END_TEST

static Suite *ratelimit_headers_suite(void)
{
	Suite *s = suite_create("ratelimit_headers");
	TCase *p = tcase_create("parsers");
	tcase_add_test(p, go_duration_provider_examples);
	tcase_add_test(p, go_duration_grammar);
	tcase_add_test(p, go_duration_prefix_in_prose);
	tcase_add_test(p, decimal_numbers);
	tcase_add_test(p, rfc3339_instants);
	tcase_add_test(p, http_dates);
	tcase_add_test(p, bare_number_guess);
	tcase_add_test(p, reset_any_form);
	tcase_add_test(p, retry_after_values);
	suite_add_tcase(s, p);
	TCase *d = tcase_create("dialects");
	tcase_add_test(d, openai_headers);
	tcase_add_test(d, groq_headers);
	tcase_add_test(d, anthropic_headers);
	tcase_add_test(d, azure_headers);
	tcase_add_test(d, project_tokens_and_cerebras_budgets);
	tcase_add_test(d, mistral_headers);
	tcase_add_test(d, together_and_openrouter_headers);
	tcase_add_test(d, fireworks_headers);
	tcase_add_test(d, should_retry_header);
	tcase_add_test(d, malformed_values_ignored);
	tcase_add_test(d, dialect_none_learns_nothing);
	suite_add_tcase(s, d);
	TCase *v = tcase_create("vectors");
	tcase_add_loop_test(v, header_vector, 0, (int)COUNT(vectors));
	tcase_add_loop_test(v, hint_vector, 0, (int)COUNT(hint_vectors));
	tcase_add_loop_test(v, shape_vector, 0, (int)COUNT(shape_vectors));
	suite_add_tcase(s, v);
	TCase *i = tcase_create("ietf");
	tcase_add_test(i, ietf_draft10_fields);
	tcase_add_test(i, ietf_draft07_and_older);
	tcase_add_test(i, ietf_in_response_and_precedence);
	suite_add_tcase(s, i);
	TCase *b = tcase_create("hints");
	tcase_add_test(b, text_hints);
	tcase_add_test(b, server_hint_order);
	suite_add_tcase(s, b);
	return s;
}

UNIT_MAIN("ratelimit_headers", ratelimit_headers_suite)
