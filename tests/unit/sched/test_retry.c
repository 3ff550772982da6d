/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for retry: the DESIGN §3 table row by row, the bodies of
 * PROVIDERS.md §2-§6, backoff with jitter, deadlines and attempt limits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/retry.h"
#include "unit.h"

/* An answer classified from its body, as retry_verdict does: one
 * error_body_parse, then retry_classify on its facts. */
static enum retry_class classify_raw(int status, const struct rlh_result *hdrs, const char *body,
                                     size_t len, const char **why)
{
	struct error_body eb;
	error_body_parse(body, len, &eb);
	return retry_classify(status, RETRY_TRANSPORT_NONE, hdrs, &eb.facts, why, NULL);
}

static enum retry_class cls(int status, const char *body)
{
	const char *why = NULL;
	size_t len = body ? strlen(body) : 0;
	enum retry_class c = classify_raw(status, NULL, body, len, &why);
	ck_assert_ptr_nonnull(why);
	return c;
}

static enum retry_class cls_hdr(int status, const char *should_retry)
{
	struct rlh_header h = {"x-should-retry", should_retry, strlen(should_retry)};
	struct rlh_result r;
	rlh_parse(DIALECT_OPENAI, &h, 1, 0, &r);
	return retry_classify(status, RETRY_TRANSPORT_NONE, &r, NULL, NULL, NULL);
}

START_TEST(final_statuses)
{
	static const int finals[] = {100, 101, 200, 201, 204, 301, 304, 400,
	                             401, 403, 404, 413, 422, 501, 505, 511};
	for (size_t i = 0; i < sizeof finals / sizeof finals[0]; i++)
		ck_assert_int_eq(cls(finals[i], NULL), RETRY_FINAL);
}
END_TEST

START_TEST(a_200_is_never_overload)
{
	ck_assert_int_eq(cls(200, "{\"error\":{\"type\":\"server_is_overloaded\"}}"), RETRY_FINAL);
	ck_assert_int_eq(cls(200, "{\"error\":{\"code\":\"insufficient_quota\"}}"), RETRY_FINAL);
	ck_assert_int_eq(cls(200, "[{\"error\":{\"status\":\"RESOURCE_EXHAUSTED\"}}]"),
	                 RETRY_FINAL);
	ck_assert_int_eq(cls_hdr(200, "false"), RETRY_FINAL);
	ck_assert_int_eq(cls_hdr(200, "true"), RETRY_FINAL);
}
END_TEST

START_TEST(capacity_statuses)
{
	ck_assert_int_eq(cls(429, NULL), RETRY_CAPACITY);
	ck_assert_int_eq(cls(503, NULL), RETRY_CAPACITY);
	ck_assert_int_eq(cls(529, NULL), RETRY_CAPACITY);
	ck_assert_int_eq(cls(429, "not json at all"), RETRY_CAPACITY);
	ck_assert_int_eq(cls(429, "{\"error\":"), RETRY_CAPACITY);
}
END_TEST

START_TEST(transient_statuses_and_transport)
{
	static const int t[] = {408, 409, 500, 502, 504, 520, 524};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		ck_assert_int_eq(cls(t[i], NULL), RETRY_TRANSIENT);
	const char *why = NULL;
	ck_assert_int_eq(retry_classify(0, RETRY_TRANSPORT_CONNECT, NULL, NULL, &why, NULL),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "connect_error");
	ck_assert_int_eq(retry_classify(0, RETRY_TRANSPORT_RESET, NULL, NULL, &why, NULL),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "reset_before_headers");
	ck_assert_int_eq(retry_classify(200, RETRY_TRANSPORT_TIMEOUT, NULL, NULL, &why, NULL),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "timeout");
	/* An untrusted certificate: final, and the SDK is told not to retry either. */
	ck_assert_int_eq(retry_classify(0, RETRY_TRANSPORT_CERT, NULL, NULL, &why, NULL),
	                 RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "tls_verify");
	const struct plan_conf *pc =
	    &(struct plan_conf){.retry = {.max_attempts = 3, .deadline_s = 300}};
	struct retry_decision d = retry_decide(RETRY_FINAL_NO_RETRY, 1, false, -1, pc, 300000, 0.5);
	ck_assert(!d.retry && d.no_retry_hdr);
}
END_TEST

START_TEST(openai_bodies)
{
	const char *why = NULL;
	const char *rate = "{\"error\":{\"message\":\"Rate limit reached for gpt-4o in "
	                   "organization org-x on tokens per min (TPM): Limit 30000, Used 29937, "
	                   "Requested 385. Please try again in 644ms.\",\"type\":\"tokens\","
	                   "\"param\":null,\"code\":\"rate_limit_exceeded\"}}";
	ck_assert_int_eq(cls(429, rate), RETRY_CAPACITY);

	const char *big = "{\"error\":{\"message\":\"Request too large for gpt-4 in organization "
	                  "org-x on tokens per min (TPM): Limit 10000, Requested 24691.\","
	                  "\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}";
	ck_assert_int_eq(classify_raw(429, NULL, big, strlen(big), &why), RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "request_too_large");

	const char *quota =
	    "{\"error\":{\"message\":\"You exceeded your current quota, please "
	    "check your plan and billing details.\",\"type\":\"insufficient_quota\","
	    "\"param\":null,\"code\":\"insufficient_quota\"}}";
	ck_assert_int_eq(classify_raw(429, NULL, quota, strlen(quota), &why), RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "insufficient_quota");
	/* older bodies: code null, the type says it */
	ck_assert_int_eq(cls(429, "{\"error\":{\"message\":\"quota\",\"type\":"
	                          "\"insufficient_quota\",\"param\":null,\"code\":null}}"),
	                 RETRY_FINAL_NO_RETRY);
	ck_assert_int_eq(cls(503, "{\"error\":{\"message\":\"The server is overloaded\","
	                          "\"type\":\"server_error\",\"code\":\"server_is_overloaded\"}}"),
	                 RETRY_CAPACITY);
	ck_assert_int_eq(cls(429, "{\"error\":{\"message\":\"slow down\",\"code\":"
	                          "\"slow_down\"}}"),
	                 RETRY_CAPACITY);
}
END_TEST

START_TEST(money_codes)
{
	static const char *const codes[] = {
	    "insufficient_quota",
	    "credit_balance_exhausted",
	    "organization_spend_limit_exceeded",
	    "project_spend_limit_exceeded",
	    "organization_usage_limit_exceeded",
	};
	char body[256];
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		const char *why = NULL;
		int n = snprintf(body, sizeof body,
		                 "{\"error\":{\"message\":\"m\",\"type\":\"x\",\"code\":\"%s\"}}",
		                 codes[i]);
		ck_assert_int_eq(classify_raw(429, NULL, body, (size_t)n, &why),
		                 RETRY_FINAL_NO_RETRY);
		ck_assert_str_eq(why, codes[i]);
	}
}
END_TEST

START_TEST(anthropic_bodies)
{
	ck_assert_int_eq(cls(429, "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
	                          "\"message\":\"Number of request tokens has exceeded your "
	                          "per-minute rate limit\"},\"request_id\":\"req_011\"}"),
	                 RETRY_CAPACITY);
	ck_assert_int_eq(cls(529, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
	                          "\"message\":\"Overloaded\"},\"request_id\":\"req_012\"}"),
	                 RETRY_CAPACITY);
	const char *why = NULL;
	const char *spend = "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
	                    "\"message\":\"You have reached your specified API usage limits.\","
	                    "\"details\":{\"error_code\":\"enforced_spend_limit_reached\"}},"
	                    "\"request_id\":\"req_013\"}";
	ck_assert_int_eq(classify_raw(429, NULL, spend, strlen(spend), &why), RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "enforced_spend_limit_reached");
}
END_TEST

START_TEST(azure_and_openrouter)
{
	ck_assert_int_eq(cls(429,
	                     "{\"error\":{\"code\":\"429\",\"message\":\"Requests to the "
	                     "ChatCompletions_Create Operation have exceeded token rate limit. "
	                     "Please retry after 86400 seconds.\"}}"),
	                 RETRY_CAPACITY);
	ck_assert_int_eq(
	    cls(402, "{\"error\":{\"message\":\"Insufficient credits\",\"code\":402}}"),
	    RETRY_FINAL_NO_RETRY);
	ck_assert_int_eq(cls(402, NULL), RETRY_FINAL_NO_RETRY);
}
END_TEST

static const char gemini_minute[] =
    "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota. Please retry "
    "in 25.4s.\",\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type."
    "googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaId\":"
    "\"GenerateRequestsPerMinutePerProjectPerModel-FreeTier\"}]},{\"@type\":\"type."
    "googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"47s\"}]}}";

static const char gemini_minute_value[] =
    "{\"error\":{\"code\":429,\"message\":\"Resource has been exhausted.\",\"status\":"
    "\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc."
    "QuotaFailure\",\"violations\":[{\"quotaMetric\":\"generativelanguage.googleapis.com/"
    "generate_content_free_tier_requests\",\"quotaId\":\"GenerateRequestsPerMinutePer"
    "ProjectPerModel-FreeTier\",\"quotaDimensions\":{\"model\":\"gemini-2.0-flash\"},"
    "\"quotaValue\":\"15\"}]},{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
    "\"retryDelay\":\"0.734s\"}]}}";
static const char gemini_tokens_value[] =
    "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
    "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaId\":"
    "\"GenerateContentInputTokensPerModelPerMinute-FreeTier\",\"quotaValue\":250000}]},"
    "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"12s\"}]}}";
static const char gemini_day_value[] =
    "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
    "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaId\":"
    "\"GenerateRequestsPerDayPerProjectPerModel-FreeTier\",\"quotaValue\":\"200\"}]},"
    "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"3600s\"}]}}";
/* OpenRouter's 402s (OpenRouterTeam docs, api_reference/limits and errors). */
static const char openrouter_in_flight[] =
    "{\"error\":{\"code\":402,\"message\":\"Your in-flight requests would exceed your "
    "credit balance. Please retry shortly.\",\"metadata\":{\"reason\":"
    "\"in_flight_budget_exhausted\",\"limit_source\":\"openrouter_in_flight_budget\"}}}";
static const char openrouter_credits[] =
    "{\"error\":{\"code\":402,\"message\":\"Insufficient credits. Add more using "
    "https://openrouter.ai/settings/credits\"}}";
/* OpenAI flex processing (platform.openai.com/docs/guides/flex-processing). */
static const char openai_flex[] =
    "{\"error\":{\"message\":\"Resource unavailable. Please try again later.\",\"type\":"
    "\"invalid_request_error\",\"param\":null,\"code\":\"resource_unavailable\"}}";
/* Groq (console.groq.com/docs/errors: 498 Flex Tier Capacity Exceeded). */
static const char groq_flex[] =
    "{\"error\":{\"message\":\"Flex tier capacity exceeded. This is a temporary error "
    "due to high demand.\",\"type\":\"internal_server_error\",\"code\":"
    "\"capacity_exceeded\"}}";

START_TEST(gemini_bodies)
{
	const char *why = NULL;
	ck_assert_int_eq(cls(429, gemini_minute), RETRY_CAPACITY);
	const char *day = "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":"
	                  "[{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\","
	                  "\"violations\":[{\"quotaId\":\"GenerateRequestsPerDayPerProjectPerModel"
	                  "-FreeTier\"}]}]}}";
	ck_assert_int_eq(classify_raw(429, NULL, day, strlen(day), &why), RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "daily_quota");
	/* the OpenAI-compatible endpoint answers with an array */
	ck_assert_int_eq(cls(429, "[{\"error\":{\"code\":429,\"message\":\"Resource has been "
	                          "exhausted\",\"status\":\"RESOURCE_EXHAUSTED\"}}]"),
	                 RETRY_CAPACITY);
	ck_assert_int_eq(cls(429, "[{\"error\":{\"code\":\"insufficient_quota\"}}]"),
	                 RETRY_FINAL_NO_RETRY);
	/* RESOURCE_EXHAUSTED under another status is still capacity */
	ck_assert_int_eq(cls(400, "{\"error\":{\"status\":\"RESOURCE_EXHAUSTED\"}}"),
	                 RETRY_CAPACITY);
}
END_TEST

START_TEST(should_retry_header)
{
	ck_assert_int_eq(cls_hdr(429, "false"), RETRY_FINAL_NO_RETRY);
	ck_assert_int_eq(cls_hdr(500, "false"), RETRY_FINAL_NO_RETRY);
	ck_assert_int_eq(cls_hdr(400, "true"), RETRY_TRANSIENT);
	ck_assert_int_eq(cls_hdr(429, "true"), RETRY_CAPACITY);
	ck_assert_int_eq(cls_hdr(400, "perhaps"), RETRY_FINAL);
}
END_TEST

START_TEST(oversized_body_not_parsed)
{
	size_t n = RETRY_BODY_CAP + 100;
	char *b = malloc(n + 1);
	ck_assert_ptr_nonnull(b);
	const char *head = "{\"error\":{\"code\":\"insufficient_quota\",\"message\":\"";
	memset(b, 'x', n);
	memcpy(b, head, strlen(head));
	memcpy(b + n - 3, "\"}}", 3);
	b[n] = '\0';
	ck_assert_int_eq(classify_raw(429, NULL, b, n, NULL), RETRY_CAPACITY);
	ck_assert_int_eq(classify_raw(429, NULL, b, RETRY_BODY_CAP, NULL),
	                 RETRY_CAPACITY); /* truncated: not JSON */
	free(b);
}
END_TEST

START_TEST(class_names)
{
	ck_assert_str_eq(retry_class_name(RETRY_FINAL), "final");
	ck_assert_str_eq(retry_class_name(RETRY_FINAL_NO_RETRY), "final_no_retry");
	ck_assert_str_eq(retry_class_name(RETRY_CAPACITY), "capacity");
	ck_assert_str_eq(retry_class_name(RETRY_TRANSIENT), "transient");
}
END_TEST

static struct plan_conf plan(enum jitter_mode j)
{
	struct plan_conf p;
	memset(&p, 0, sizeof p);
	p.retry.max_attempts = 3;
	p.retry.initial_delay_ms = 1000;
	p.retry.max_delay_ms = 60000;
	p.retry.jitter = j;
	p.retry.deadline_s = 300;
	return p;
}

#define RND_MAX 0.9999999999

START_TEST(backoff_additive)
{
	struct plan_conf p = plan(JITTER_ADDITIVE);
	ck_assert_int_eq(retry_backoff_ms(1, &p, 0), 1000);
	ck_assert_int_eq(retry_backoff_ms(1, &p, RND_MAX), 1499);
	ck_assert_int_eq(retry_backoff_ms(2, &p, 0), 2000);
	ck_assert_int_eq(retry_backoff_ms(2, &p, RND_MAX), 2499);
	ck_assert_int_eq(retry_backoff_ms(3, &p, 0.5), 4250);
	ck_assert_int_eq(retry_backoff_ms(6, &p, 0), 32000);
	ck_assert_int_eq(retry_backoff_ms(7, &p, 0), 60000); /* 64 s capped */
	ck_assert_int_eq(retry_backoff_ms(1000, &p, RND_MAX), 60000);
	ck_assert_int_eq(retry_backoff_ms(4000000000u, &p, 0), 60000);
	/* jitter cannot push past max either */
	p.retry.max_delay_ms = 1200;
	ck_assert_int_eq(retry_backoff_ms(1, &p, RND_MAX), 1200);
	/* random values out of range are clamped */
	p = plan(JITTER_ADDITIVE);
	ck_assert_int_eq(retry_backoff_ms(1, &p, -3), 1000);
	ck_assert_int_eq(retry_backoff_ms(1, &p, 7), 1499);
	ck_assert_int_eq(retry_backoff_ms(1, &p, NAN), 1000);
	ck_assert_int_eq(retry_backoff_ms(0, &p, 0), 1000);
}
END_TEST

START_TEST(backoff_full_jitter)
{
	struct plan_conf p = plan(JITTER_FULL);
	ck_assert_int_eq(retry_backoff_ms(3, &p, 0), 0);
	ck_assert_int_eq(retry_backoff_ms(3, &p, 0.5), 2000);
	ck_assert_int_eq(retry_backoff_ms(3, &p, RND_MAX), 3999);
	ck_assert_int_eq(retry_backoff_ms(20, &p, 0.5), 30000);
	ck_assert_int_eq(retry_backoff_ms(20, &p, RND_MAX), 59999);
}
END_TEST

START_TEST(decide_final_classes)
{
	struct plan_conf p = plan(JITTER_ADDITIVE);
	struct retry_decision d = retry_decide(RETRY_FINAL, 1, false, 0, &p, 300000, 0);
	ck_assert(!d.retry && !d.no_retry_hdr);
	d = retry_decide(RETRY_FINAL_NO_RETRY, 1, true, 10, &p, 300000, 0);
	ck_assert(!d.retry && d.no_retry_hdr);
}
END_TEST

START_TEST(decide_transient_max_attempts)
{
	struct plan_conf p = plan(JITTER_ADDITIVE);
	struct retry_decision d = retry_decide(RETRY_TRANSIENT, 1, false, 0, &p, 300000, 0);
	ck_assert(d.retry);
	ck_assert_int_eq(d.delay_ms, 1000);
	d = retry_decide(RETRY_TRANSIENT, 2, false, 0, &p, 300000, RND_MAX);
	ck_assert(d.retry);
	ck_assert_int_eq(d.delay_ms, 2499);
	d = retry_decide(RETRY_TRANSIENT, 3, false, 0, &p, 300000, 0);
	ck_assert(!d.retry && !d.no_retry_hdr);
	ck_assert_str_eq(d.why, "max_attempts");
	p.retry.max_attempts = 1;
	d = retry_decide(RETRY_TRANSIENT, 1, false, 0, &p, 300000, 0);
	ck_assert(!d.retry);
}
END_TEST

START_TEST(decide_capacity_until_deadline)
{
	struct plan_conf p = plan(JITTER_ADDITIVE);
	struct retry_decision d = retry_decide(RETRY_CAPACITY, 3, false, 0, &p, 300000, 0);
	ck_assert(d.retry);
	ck_assert_int_eq(d.delay_ms, 4000);
	d = retry_decide(RETRY_CAPACITY, 50, false, 0, &p, 300000, 0);
	ck_assert(d.retry); /* no attempt limit for capacity */
	ck_assert_int_eq(d.delay_ms, 60000);
	d = retry_decide(RETRY_CAPACITY, 50, false, 0, &p, 30000, 0);
	ck_assert(!d.retry && !d.no_retry_hdr); /* backoff past the deadline */
	ck_assert_str_eq(d.why, "deadline");
	d = retry_decide(RETRY_CAPACITY, 1, false, 0, &p, 0, 0);
	ck_assert(!d.retry);
}
END_TEST

START_TEST(decide_hints)
{
	struct plan_conf p = plan(JITTER_ADDITIVE);
	/* delay = max(hint, backoff) */
	struct retry_decision d = retry_decide(RETRY_CAPACITY, 1, true, 644, &p, 300000, 0);
	ck_assert(d.retry);
	ck_assert_int_eq(d.delay_ms, 1000);
	d = retry_decide(RETRY_CAPACITY, 1, true, 47000, &p, 300000, RND_MAX);
	ck_assert_int_eq(d.delay_ms, 47000);
	d = retry_decide(RETRY_TRANSIENT, 1, true, 5000, &p, 300000, 0);
	ck_assert_int_eq(d.delay_ms, 5000);
	/* a hint above max_delay is still honoured when it fits the deadline */
	d = retry_decide(RETRY_CAPACITY, 1, true, 120000, &p, 300000, 0);
	ck_assert(d.retry);
	ck_assert_int_eq(d.delay_ms, 120000);
	/* Azure's "retry after 86400 seconds": give up now, tell the SDK not to wait */
	d = retry_decide(RETRY_CAPACITY, 1, true, 86400000, &p, 300000, 0);
	ck_assert(!d.retry && d.no_retry_hdr);
	ck_assert_str_eq(d.why, "hint_past_deadline");
	d = retry_decide(RETRY_TRANSIENT, 1, true, 400000, &p, 300000, 0);
	ck_assert(!d.retry && d.no_retry_hdr);
	/* a negative hint is ignored */
	d = retry_decide(RETRY_CAPACITY, 2, true, -5, &p, 300000, 0);
	ck_assert(d.retry);
	ck_assert_int_eq(d.delay_ms, 2000);
}
END_TEST

/* The DESIGN §3 table as data: (status, x-should-retry, body) → class. */
static const struct class_vector {
	int status;
	const char *should_retry; /* NULL: header absent */
	const char *body;         /* NULL: no body */
	enum retry_class want;
} class_vectors[] = {
    {200, NULL, NULL, RETRY_FINAL},
    {200, NULL, "{\"error\":{\"code\":\"rate_limit_exceeded\"}}", RETRY_FINAL},
    {200, "false", NULL, RETRY_FINAL},
    {201, NULL, NULL, RETRY_FINAL},
    {101, NULL, NULL, RETRY_FINAL},
    {302, NULL, NULL, RETRY_FINAL},
    {400, NULL, "{\"error\":{\"type\":\"invalid_request_error\"}}", RETRY_FINAL},
    {401, NULL, NULL, RETRY_FINAL},
    {404, NULL, NULL, RETRY_FINAL},
    {402, NULL, NULL, RETRY_FINAL_NO_RETRY},
    {429, "false", NULL, RETRY_FINAL_NO_RETRY},
    {429, NULL, "{\"error\":{\"type\":\"insufficient_quota\",\"code\":null}}",
     RETRY_FINAL_NO_RETRY},
    {429, NULL, "{\"error\":{\"code\":\"credit_balance_exhausted\"}}", RETRY_FINAL_NO_RETRY},
    {429, NULL,
     "{\"error\":{\"message\":\"Request too large for o1 in organization org-1 "
     "on tokens per min (TPM): Limit 30000, Requested 45000.\",\"code\":"
     "\"rate_limit_exceeded\"}}",
     RETRY_FINAL_NO_RETRY},
    {429, NULL,
     "{\"error\":{\"message\":\"Rate limit reached for o1. Please try again in "
     "6m0s.\",\"code\":\"rate_limit_exceeded\"}}",
     RETRY_CAPACITY},
    {429, NULL,
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"details\":"
     "{\"error_code\":\"enforced_spend_limit_reached\"}}}",
     RETRY_FINAL_NO_RETRY},
    {429, NULL, "[{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\"}}]", RETRY_CAPACITY},
    {429, NULL,
     "{\"error\":{\"details\":[{\"violations\":[{\"quotaId\":"
     "\"GenerateContentInputTokensPerModelPerDay-FreeTier\"}]}]}}",
     RETRY_FINAL_NO_RETRY},
    {429, "true", NULL, RETRY_CAPACITY},
    {503, NULL, "upstream connect error or disconnect/reset before headers", RETRY_CAPACITY},
    {529, NULL, NULL, RETRY_CAPACITY},
    {408, NULL, NULL, RETRY_TRANSIENT},
    {409, NULL, NULL, RETRY_TRANSIENT},
    {500, NULL, "{\"error\":{\"type\":\"server_error\"}}", RETRY_TRANSIENT},
    {502, NULL, "<html>Bad Gateway</html>", RETRY_TRANSIENT},
    {504, NULL, NULL, RETRY_TRANSIENT},
    {500, "false", NULL, RETRY_FINAL_NO_RETRY},
    {403, "true", NULL, RETRY_TRANSIENT},
    {413, NULL, NULL, RETRY_FINAL},
    {501, NULL, NULL, RETRY_FINAL},
};

START_TEST(class_vector)
{
	const struct class_vector *v = &class_vectors[_i];
	struct rlh_result r;
	struct rlh_header h = {"x-should-retry", v->should_retry,
	                       v->should_retry ? strlen(v->should_retry) : 0};
	rlh_parse(DIALECT_OPENAI, &h, v->should_retry ? 1 : 0, 0, &r);
	const char *why = NULL;
	enum retry_class c =
	    classify_raw(v->status, &r, v->body, v->body ? strlen(v->body) : 0, &why);
	ck_assert_msg(c == v->want, "row %d: %d -> %s (%s), want %s", _i, v->status,
	              retry_class_name(c), why, retry_class_name(v->want));
}
END_TEST

/* The decision from facts alone, whoever's codes they are: retry.c names
 * none (the reason is the code the facts carry). */
static const struct facts_vector {
	int status;
	struct error_facts facts;
	enum retry_class want;
	const char *why;
	bool quota;
} facts_vectors[] = {
    {429, {0}, RETRY_CAPACITY, "rate_limited", false},
    {429, {.money = "some_money_code"}, RETRY_FINAL_NO_RETRY, "some_money_code", true},
    {503, {.money = "m", .capacity = "c"}, RETRY_FINAL_NO_RETRY, "m", true},
    {429, {.too_large = true}, RETRY_FINAL_NO_RETRY, "request_too_large", false},
    {429, {.too_large = true, .daily_cap = true}, RETRY_FINAL_NO_RETRY, "request_too_large", false},
    {429, {.daily_cap = true}, RETRY_FINAL_NO_RETRY, "daily_quota", true},
    {402, {0}, RETRY_FINAL_NO_RETRY, "payment_required", true},
    {402, {.capacity = "c"}, RETRY_FINAL_NO_RETRY, "payment_required", true},
    {402, {.capacity = "i", .in_flight = "i"}, RETRY_CAPACITY, "i", false},
    {402, {.money = "m", .in_flight = "i"}, RETRY_FINAL_NO_RETRY, "m", true},
    {498, {.capacity = "t", .tier = "t"}, RETRY_CAPACITY, "t", false},
    {400, {.capacity = "busy_code"}, RETRY_CAPACITY, "busy_code", false},
    {500, {.capacity = "busy_code"}, RETRY_CAPACITY, "busy_code", false},
    {429, {.capacity = "busy_code"}, RETRY_CAPACITY, "rate_limited", false},
    {529, {.capacity = "busy_code"}, RETRY_CAPACITY, "status_529", false},
    {500, {0}, RETRY_TRANSIENT, "server_error", false},
    {400, {0}, RETRY_FINAL, "final", false},
    {200, {.money = "m", .daily_cap = true}, RETRY_FINAL, "final", false},
};

START_TEST(facts_vector)
{
	const struct facts_vector *v = &facts_vectors[_i];
	const char *why = NULL;
	bool quota = !v->quota;
	enum retry_class c =
	    retry_classify(v->status, RETRY_TRANSPORT_NONE, NULL, &v->facts, &why, &quota);
	ck_assert_msg(c == v->want, "row %d: %s", _i, retry_class_name(c));
	ck_assert_str_eq(why, v->why);
	ck_assert_msg(quota == v->quota, "row %d: quota %d", _i, quota);
	/* x-should-retry: false beats every fact, and is no quota */
	struct rlh_header h = {"x-should-retry", "false", 5};
	struct rlh_result r;
	rlh_parse(DIALECT_NONE, &h, 1, 0, &r);
	c = retry_classify(v->status, RETRY_TRANSPORT_NONE, &r, &v->facts, &why, &quota);
	if (v->status >= 400) {
		ck_assert_int_eq(c, RETRY_FINAL_NO_RETRY);
		ck_assert_str_eq(why, "x_should_retry_false");
		ck_assert(!quota);
	}
}
END_TEST

START_TEST(parsed_body)
{
	struct error_body eb;
	const char *why = NULL;
	bool quota = false;
	/* one parse: the facts decide, the hints say when */
	static const char gemini_daily[] =
	    "[{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"message\":"
	    "\"Please retry in 25.4s.\",\"details\":[{\"violations\":[{\"quotaId\":"
	    "\"GenerateRequestsPerDayPerProjectPerModel\"}]}]}}]";
	error_body_parse(gemini_daily, strlen(gemini_daily), &eb);
	ck_assert_int_eq(retry_classify(429, RETRY_TRANSPORT_NONE, NULL, &eb.facts, &why, &quota),
	                 RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "daily_quota");
	ck_assert(quota);
	int64_t ms = 0;
	ck_assert(rlh_server_hint(NULL, &eb.hints, &ms));
	ck_assert_int_eq(ms, 25400);
	/* prose: no facts, but the hint */
	error_body_parse("slow down, retry after 3 seconds", 32, &eb);
	ck_assert_int_eq(retry_classify(429, RETRY_TRANSPORT_NONE, NULL, &eb.facts, &why, &quota),
	                 RETRY_CAPACITY);
	ck_assert_str_eq(why, "rate_limited");
	ck_assert(!quota);
	ck_assert(rlh_server_hint(NULL, &eb.hints, &ms));
	ck_assert_int_eq(ms, 3000);
	/* no body at all */
	ck_assert(!rlh_server_hint(NULL, NULL, &ms));
	ck_assert_int_eq(retry_classify(0, RETRY_TRANSPORT_RESET, NULL, NULL, &why, &quota),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "reset_before_headers");
	ck_assert_int_eq(retry_classify(503, RETRY_TRANSPORT_NONE, NULL, NULL, &why, NULL),
	                 RETRY_CAPACITY);
	ck_assert_int_eq(retry_classify(200, RETRY_TRANSPORT_NONE, NULL, NULL, &why, NULL),
	                 RETRY_FINAL);
	/* over the cap: not looked at */
	size_t n = RETRY_BODY_CAP + 1;
	char *b = malloc(n);
	ck_assert_ptr_nonnull(b);
	memset(b, ' ', n);
	static const char head[] =
	    "{\"error\":{\"code\":\"insufficient_quota\",\"message\":\"try again in 5s\"}}";
	memcpy(b, head, sizeof head - 1);
	ck_assert_int_eq(classify_raw(429, NULL, b, n, &why), RETRY_CAPACITY);
	ck_assert_int_eq(classify_raw(429, NULL, b, RETRY_BODY_CAP, &why), RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "insufficient_quota");
	free(b);
}
END_TEST

/* retry_decide as data, with the default plan (1 s, 60 s, additive, 3 attempts). */
static const struct decide_vector {
	enum retry_class cls;
	unsigned attempt;
	int64_t hint; /* -1: none */
	int64_t left;
	double rnd;
	bool retry;
	int64_t delay;
	bool no_retry_hdr;
} decide_vectors[] = {
    {RETRY_CAPACITY, 1, -1, 300000, 0.0, true, 1000, false},
    {RETRY_CAPACITY, 1, -1, 300000, 0.999999, true, 1499, false},
    {RETRY_CAPACITY, 2, -1, 300000, 0.0, true, 2000, false},
    {RETRY_CAPACITY, 4, -1, 300000, 0.2, true, 8100, false},
    {RETRY_CAPACITY, 10, -1, 300000, 0.999999, true, 60000, false},
    {RETRY_CAPACITY, 1, 644, 300000, 0.0, true, 1000, false},
    {RETRY_CAPACITY, 1, 25400, 300000, 0.0, true, 25400, false},
    {RETRY_CAPACITY, 1, 299999, 300000, 0.0, true, 299999, false},
    {RETRY_CAPACITY, 1, 300000, 300000, 0.0, false, 0, true},
    {RETRY_CAPACITY, 1, 86400000, 300000, 0.0, false, 0, true},
    {RETRY_CAPACITY, 7, -1, 59000, 0.0, false, 0, false},
    {RETRY_TRANSIENT, 1, -1, 300000, 0.0, true, 1000, false},
    {RETRY_TRANSIENT, 2, -1, 300000, 0.5, true, 2250, false},
    {RETRY_TRANSIENT, 3, -1, 300000, 0.0, false, 0, false},
    {RETRY_TRANSIENT, 2, 90000000, 300000, 0.0, false, 0, true},
    {RETRY_FINAL, 1, -1, 300000, 0.0, false, 0, false},
    {RETRY_FINAL_NO_RETRY, 1, -1, 300000, 0.0, false, 0, true},
};

START_TEST(decide_vector)
{
	const struct decide_vector *v = &decide_vectors[_i];
	struct plan_conf p = plan(JITTER_ADDITIVE);
	struct retry_decision d =
	    retry_decide(v->cls, v->attempt, v->hint >= 0, v->hint, &p, v->left, v->rnd);
	ck_assert_msg(d.retry == v->retry, "row %d: retry %d (%s)", _i, d.retry, d.why);
	if (v->retry)
		ck_assert_msg(d.delay_ms == v->delay, "row %d: delay %lld", _i,
		              (long long)d.delay_ms);
	ck_assert_msg(d.no_retry_hdr == v->no_retry_hdr, "row %d: no_retry_hdr", _i);
	ck_assert_ptr_nonnull(d.why);
}
END_TEST

/* ---- the verdict (retry_verdict_head, retry_verdict) ---- */

/* Parses up to two headers (NULL names end the list) in the OpenAI dialect. */
static void parse_hdrs(const char *const *kv, struct rlh_result *r)
{
	struct rlh_header h[2];
	size_t n = 0;
	for (; n < 2 && kv[2 * n] != NULL; n++)
		h[n] = (struct rlh_header){kv[2 * n], kv[2 * n + 1], strlen(kv[2 * n + 1])};
	rlh_parse(DIALECT_OPENAI, h, n, 0, r);
}

static const struct head_vector {
	int status;
	const char *hdr[4]; /* name, value, name, value; NULL: none */
	bool hold_body, capacity;
	int64_t hold_ms;
	bool own_tier; /* the request asked for a tier of its own (flex) */
} head_vectors[] = {
    {200, {NULL}, false, false, 0, false},
    {200, {"retry-after", "3"}, false, false, 0, false},
    {400, {NULL}, false, false, 0, false},
    {402, {NULL}, true, false, 0, false},
    {408, {NULL}, true, false, 0, false},
    {409, {NULL}, true, false, 0, false},
    {429, {NULL}, true, true, 0, false},
    {429, {"retry-after", "3"}, true, true, 3000, false},
    {429, {"retry-after-ms", "1500", "retry-after", "2"}, true, true, 1500, false},
    {429, {"retry-after", "0"}, true, true, 0, false},
    {429,
     {"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2s"},
     true,
     true,
     2000,
     false},
    {503, {NULL}, true, true, 0, false},
    {503, {"retry-after", "10"}, true, true, 10000, false},
    {529, {NULL}, true, true, 0, false},
    /* a flex request's 429 or 503 holds nothing before its body says whose
     * shortage it is; Groq's 498 (flex capacity) is held for its body */
    {429, {"retry-after", "3"}, true, false, 0, true},
    {503, {NULL}, true, false, 0, true},
    {498, {NULL}, true, false, 0, false},
    {498, {NULL}, true, false, 0, true},
    {500, {"retry-after", "3"}, true, false, 0, false},
    {501, {NULL}, true, false, 0, false},
    {599, {NULL}, true, false, 0, false},
};

START_TEST(verdict_head_vector)
{
	const struct head_vector *v = &head_vectors[_i];
	struct rlh_result r;
	parse_hdrs(v->hdr, &r);
	struct retry_head_verdict h = retry_verdict_head(v->status, &r, v->own_tier);
	ck_assert_msg(h.hold_body == v->hold_body, "row %d (%d): hold_body", _i, v->status);
	ck_assert_msg(h.capacity == v->capacity, "row %d (%d): capacity", _i, v->status);
	ck_assert_msg(h.hold_ms == v->hold_ms, "row %d (%d): hold_ms %lld", _i, v->status,
	              (long long)h.hold_ms);
}
END_TEST

START_TEST(verdict_head_no_headers)
{
	struct retry_head_verdict h = retry_verdict_head(429, NULL, false);
	ck_assert(h.hold_body && h.capacity && h.hold_ms == 0);
	h = retry_verdict_head(200, NULL, false);
	ck_assert(!h.hold_body && !h.capacity && h.hold_ms == 0);
}
END_TEST

#define T0 INT64_C(1000000) /* now_ms of every row */

static const char anthropic_overloaded[] =
    "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
static const char gemini_day[] =
    "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
    "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaId\":"
    "\"GenerateRequestsPerDayPerProjectPerModel-FreeTier\"}]}]}}";
static const char openai_rate[] =
    "{\"error\":{\"message\":\"Rate limit reached for requests\",\"type\":\"requests\","
    "\"code\":\"rate_limit_exceeded\"}}";
static const char openai_644ms[] =
    "{\"error\":{\"message\":\"Rate limit reached for gpt-4o on tokens per min (TPM): "
    "Limit 30000, Used 29937, Requested 385. Please try again in 644ms.\",\"type\":"
    "\"tokens\",\"code\":\"rate_limit_exceeded\"}}";
static const char insufficient_quota[] =
    "{\"error\":{\"message\":\"You exceeded your current quota\",\"type\":"
    "\"insufficient_quota\",\"code\":\"insufficient_quota\"}}";

/* One answer per row: what exchange.c knows of it, and the verdict wanted.
 * Zeros are defaults: attempt 1, left (deadline - now) 300 s, the plan of
 * plan() (1 s, 60 s, additive jitter, 3 attempts, deadline_s 300). */
static const struct verdict_vector {
	const char *name;
	/* the answer */
	int status;
	enum retry_transport transport;
	const char *hdr[4]; /* name, value, name, value */
	const char *body;
	bool held, streamed, body_gone;
	unsigned attempt;
	int64_t left; /* deadline_ms - now_ms; 0: 300 s; < 0: 0 */
	unsigned max_attempts, deadline_s;
	enum jitter_mode jitter;
	double rnd;
	/* the verdict */
	enum retry_action action;
	enum retry_lane_outcome outcome;
	enum retry_class cls;
	int64_t delay_ms; /* checked when RETRY */
	int64_t hold_ms;
	bool hinted, quota, no_retry_hdr;
	const char *reason; /* NULL: NULL */
	const char *stop;   /* NULL: NULL */
	/* what the refusal told of its budget (told.limit 0: nothing) */
	enum rlh_budget_kind told_budget;
	int64_t told_limit, told_window_ms;
} verdict_vectors[] = {
    {.name = "200 relay",
     .status = 200,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL,
     .reason = "final"},
    {.name = "400 held: final relay",
     .status = 400,
     .body = "{\"error\":{\"type\":\"invalid_request_error\"}}",
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL,
     .reason = "final"},
    {.name = "501 held: final relay",
     .status = 501,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL,
     .reason = "final"},
    {.name = "429 rate limit: backoff",
     .status = 429,
     .body = openai_rate,
     .held = true,
     .attempt = 2,
     .rnd = 0.5,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 2250,
     .reason = "rate_limited"},
    {.name = "429 retry-after 3 s",
     .status = 429,
     .hdr = {"retry-after", "3"},
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 3000,
     .hold_ms = 3000,
     .hinted = true,
     .reason = "rate_limited"},
    {.name = "429 retry-after 0: no hint to hold by",
     .status = 429,
     .hdr = {"retry-after", "0"},
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 1000,
     .reason = "rate_limited"},
    {.name = "429 try again in 644ms: backoff wins the delay, the hint holds the lane",
     .status = 429,
     .body = openai_644ms,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 1000,
     .hold_ms = 644,
     .hinted = true,
     .reason = "rate_limited",
     /* the message names the budget too: the lane learns it only when no
      * header described it (sched_learn_told) */
     .told_budget = RLH_TOKENS,
     .told_limit = 30000,
     .told_window_ms = 60000},
    {.name = "429 retry-after past the request's deadline",
     .status = 429,
     .hdr = {"retry-after", "120"},
     .held = true,
     .left = 60000,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .hold_ms = 120000,
     .hinted = true,
     .no_retry_hdr = true,
     .reason = "rate_limited",
     .stop = "hint_past_deadline"},
    {.name = "429 retry-after >= deadline_s: quota",
     .status = 429,
     .hdr = {"retry-after", "300"},
     .held = true,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_CAPACITY,
     .hold_ms = 300000,
     .hinted = true,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "rate_limited",
     .stop = "hint_past_deadline"},
    {.name = "429 hint >= deadline_s but retried (a longer deadline): quota outcome only",
     .status = 429,
     .hdr = {"retry-after", "90"},
     .held = true,
     .deadline_s = 60,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_CAPACITY,
     .delay_ms = 90000,
     .hold_ms = 90000,
     .hinted = true,
     .reason = "rate_limited"},
    {.name = "429 insufficient_quota",
     .status = 429,
     .body = insufficient_quota,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_FINAL_NO_RETRY,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "insufficient_quota"},
    {.name = "429 insufficient_quota with retry-after: final all the same",
     .status = 429,
     .hdr = {"retry-after", "5"},
     .body = insufficient_quota,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_FINAL_NO_RETRY,
     .hinted = true,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "insufficient_quota"},
    {.name = "402",
     .status = 402,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_FINAL_NO_RETRY,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "payment_required"},
    {.name = "402 not held: no quota (there is no answer to keep)",
     .status = 402,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL_NO_RETRY,
     .no_retry_hdr = true,
     .reason = "payment_required"},
    {.name = "500 x-should-retry: false",
     .status = 500,
     .hdr = {"x-should-retry", "false"},
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL_NO_RETRY,
     .no_retry_hdr = true,
     .reason = "x_should_retry_false"},
    {.name = "429 x-should-retry: false",
     .status = 429,
     .hdr = {"x-should-retry", "false", "retry-after", "2"},
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL_NO_RETRY,
     .hinted = true,
     .no_retry_hdr = true,
     .reason = "x_should_retry_false"},
    {.name = "409 x-should-retry: true",
     .status = 409,
     .hdr = {"x-should-retry", "true"},
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .delay_ms = 1000,
     .reason = "status_409"},
    {.name = "503",
     .status = 503,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 1000,
     .reason = "status_503"},
    {.name = "503 with retry-after 10 s, attempt 5: capacity has no attempt limit",
     .status = 503,
     .hdr = {"retry-after", "10"},
     .held = true,
     .attempt = 5,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 16000,
     .hold_ms = 10000,
     .hinted = true,
     .reason = "status_503"},
    /* A 529 is the provider's overload (Anthropic-wide): the lane holds for
     * the retry's backoff and is not cut (outcome OVERLOAD). */
    {.name = "529, full jitter: an overload, the lane holds for the backoff",
     .status = 529,
     .held = true,
     .attempt = 3,
     .jitter = JITTER_FULL,
     .rnd = 0.5,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_OVERLOAD,
     .cls = RETRY_CAPACITY,
     .delay_ms = 2000,
     .hold_ms = 2000,
     .reason = "status_529"},
    {.name = "529 Anthropic overloaded_error",
     .status = 529,
     .body = anthropic_overloaded,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_OVERLOAD,
     .cls = RETRY_CAPACITY,
     .delay_ms = 1000,
     .hold_ms = 1000,
     .reason = "status_529"},
    {.name = "529 with retry-after 5 s: the hint holds the lane, no cut",
     .status = 529,
     .hdr = {"retry-after", "5"},
     .body = anthropic_overloaded,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_OVERLOAD,
     .cls = RETRY_CAPACITY,
     .delay_ms = 5000,
     .hold_ms = 5000,
     .hinted = true,
     .reason = "status_529"},
    {.name = "529 streamed: an overload for the lane",
     .status = 529,
     .streamed = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_OVERLOAD,
     .cls = RETRY_FINAL},
    {.name = "500 Anthropic overloaded_error: the body makes it capacity",
     .status = 500,
     .body = anthropic_overloaded,
     .held = true,
     .attempt = 4,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_OVERLOAD,
     .cls = RETRY_CAPACITY,
     .delay_ms = 8000,
     .hold_ms = 8000,
     .reason = "overloaded_error"},
    {.name = "529 past the deadline: given up, nothing held",
     .status = 529,
     .body = anthropic_overloaded,
     .held = true,
     .left = 500,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_OVERLOAD,
     .cls = RETRY_CAPACITY,
     .reason = "status_529",
     .stop = "deadline"},
    {.name = "429 Gemini RESOURCE_EXHAUSTED per minute",
     .status = 429,
     .body = gemini_minute,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 47000,
     .hold_ms = 47000,
     .hinted = true,
     .reason = "rate_limited"},
    {.name = "429 Gemini with quotaValue: the budget told, the retryDelay the hold",
     .status = 429,
     .body = gemini_minute_value,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 1000,
     .hold_ms = 734,
     .hinted = true,
     .reason = "rate_limited",
     .told_budget = RLH_REQUESTS,
     .told_limit = 15,
     .told_window_ms = 60000},
    {.name = "429 Gemini input tokens per minute told",
     .status = 429,
     .body = gemini_tokens_value,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 12000,
     .hold_ms = 12000,
     .hinted = true,
     .reason = "rate_limited",
     .told_budget = RLH_INPUT_TOKENS,
     .told_limit = 250000,
     .told_window_ms = 60000},
    {.name = "429 Gemini per day with quotaValue: quota until its retryDelay, nothing told",
     .status = 429,
     .body = gemini_day_value,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_FINAL_NO_RETRY,
     .hold_ms = 3600000,
     .hinted = true,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "daily_quota"},
    /* OpenRouter's two 402s (PROVIDERS.md §11) */
    {.name = "402 OpenRouter in_flight_budget_exhausted, Retry-After 2: held, retried",
     .status = 402,
     .hdr = {"retry-after", "2"},
     .body = openrouter_in_flight,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .delay_ms = 2000,
     .hold_ms = 2000,
     .hinted = true,
     .reason = "in_flight_budget_exhausted"},
    {.name = "402 OpenRouter in-flight past the deadline: given up, no quota",
     .status = 402,
     .hdr = {"retry-after", "2"},
     .body = openrouter_in_flight,
     .held = true,
     .left = 1500,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .hold_ms = 2000,
     .hinted = true,
     .no_retry_hdr = true,
     .reason = "in_flight_budget_exhausted",
     .stop = "hint_past_deadline"},
    {.name = "402 OpenRouter credits: final, the lane's quota",
     .status = 402,
     .body = openrouter_credits,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_FINAL_NO_RETRY,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "payment_required"},
    /* a service tier's shortage: retried, nothing of the lane held or cut */
    {.name = "429 OpenAI flex resource_unavailable: the tier's, not the lane's",
     .status = 429,
     .hdr = {"retry-after", "3"},
     .body = openai_flex,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TIER,
     .cls = RETRY_CAPACITY,
     .delay_ms = 3000,
     .hinted = true,
     .reason = "rate_limited"},
    {.name = "498 Groq capacity_exceeded: capacity of the flex tier",
     .status = 498,
     .body = groq_flex,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TIER,
     .cls = RETRY_CAPACITY,
     .delay_ms = 1000,
     .reason = "capacity_exceeded"},
    {.name = "498 without a body: final",
     .status = 498,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL,
     .reason = "final"},
    {.name = "429 Gemini RESOURCE_EXHAUSTED per day: quota",
     .status = 429,
     .body = gemini_day,
     .held = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_FINAL_NO_RETRY,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "daily_quota"},
    {.name = "500 attempt 1",
     .status = 500,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .delay_ms = 1000,
     .reason = "server_error"},
    {.name = "502 attempt 2",
     .status = 502,
     .body = "<html>Bad Gateway</html>",
     .held = true,
     .attempt = 2,
     .rnd = 0.5,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .delay_ms = 2250,
     .reason = "server_error"},
    {.name = "504 attempt 3: max_attempts",
     .status = 504,
     .held = true,
     .attempt = 3,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .reason = "server_error",
     .stop = "max_attempts"},
    {.name = "500 attempt 2 of max_attempts 5, retry-after 4 s",
     .status = 500,
     .hdr = {"retry-after", "4"},
     .held = true,
     .attempt = 2,
     .max_attempts = 5,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .delay_ms = 4000,
     .hinted = true,
     .reason = "server_error"},
    {.name = "500 whose backoff overruns the deadline",
     .status = 500,
     .held = true,
     .attempt = 2,
     .left = 1500,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .reason = "server_error",
     .stop = "deadline"},
    {.name = "503 past the deadline already",
     .status = 503,
     .held = true,
     .left = -1,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .reason = "status_503",
     .stop = "deadline"},
    {.name = "connect error",
     .transport = RETRY_TRANSPORT_CONNECT,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .delay_ms = 1000,
     .reason = "connect_error"},
    {.name = "reset before headers, attempt 2",
     .transport = RETRY_TRANSPORT_RESET,
     .attempt = 2,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .delay_ms = 2000,
     .reason = "reset_before_headers"},
    {.name = "reset while a 429 was held: its headers and body say nothing",
     .status = 429,
     .transport = RETRY_TRANSPORT_RESET,
     .hdr = {"retry-after", "3"},
     .body = insufficient_quota,
     .held = true,
     .action = RETRY_ACTION_RETRY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .delay_ms = 1000,
     .reason = "reset_before_headers"},
    {.name = "timeout, attempt 3: max_attempts",
     .transport = RETRY_TRANSPORT_TIMEOUT,
     .attempt = 3,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .reason = "timeout",
     .stop = "max_attempts"},
    {.name = "certificate failure: never retried, never a success",
     .transport = RETRY_TRANSPORT_CERT,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_FINAL_NO_RETRY,
     .no_retry_hdr = true,
     .reason = "tls_verify"},
    /* an upload whose first bytes are gone (issue 28 item 6): never sent again */
    {.name = "upload, body gone: 429 with retry-after given up, the lane held",
     .status = 429,
     .hdr = {"retry-after", "3"},
     .body = openai_644ms,
     .held = true,
     .body_gone = true,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_CAPACITY,
     .hold_ms = 3000,
     .hinted = true,
     .reason = "rate_limited",
     .stop = "body_gone",
     .told_budget = RLH_TOKENS,
     .told_limit = 30000,
     .told_window_ms = 60000},
    {.name = "upload, body gone: connect error given up",
     .transport = RETRY_TRANSPORT_RESET,
     .body_gone = true,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .reason = "reset_before_headers",
     .stop = "body_gone"},
    {.name = "upload, body gone: quota still the lane's",
     .status = 429,
     .body = insufficient_quota,
     .held = true,
     .body_gone = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_QUOTA_OUT,
     .cls = RETRY_FINAL_NO_RETRY,
     .quota = true,
     .no_retry_hdr = true,
     .reason = "insufficient_quota"},
    {.name = "upload, body gone: 504 at max_attempts says max_attempts",
     .status = 504,
     .held = true,
     .attempt = 3,
     .body_gone = true,
     .action = RETRY_ACTION_GIVE_UP,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_TRANSIENT,
     .reason = "server_error",
     .stop = "max_attempts"},
    {.name = "streamed 200",
     .status = 200,
     .streamed = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL},
    {.name = "streamed 429 (too large to hold): capacity, relayed",
     .status = 429,
     .hdr = {"retry-after", "3"},
     .streamed = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_FINAL},
    {.name = "streamed 200 cut by a reset",
     .status = 200,
     .transport = RETRY_TRANSPORT_RESET,
     .streamed = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_TRANSIENT,
     .cls = RETRY_FINAL},
    {.name = "streamed 503 cut by a timeout: capacity first",
     .status = 503,
     .transport = RETRY_TRANSPORT_TIMEOUT,
     .streamed = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_CAPACITY,
     .cls = RETRY_FINAL},
    {.name = "streamed 500: final, a success for the lane",
     .status = 500,
     .streamed = true,
     .action = RETRY_ACTION_RELAY,
     .outcome = RETRY_LANE_SUCCESS,
     .cls = RETRY_FINAL},
};

static bool same_str(const char *a, const char *b)
{
	return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

START_TEST(verdict_vector)
{
	const struct verdict_vector *v = &verdict_vectors[_i];
	struct plan_conf p = plan(v->jitter);
	if (v->max_attempts)
		p.retry.max_attempts = v->max_attempts;
	if (v->deadline_s)
		p.retry.deadline_s = v->deadline_s;
	struct rlh_result r;
	parse_hdrs(v->hdr, &r);
	int64_t left = v->left == 0 ? 300000 : v->left < 0 ? 0 : v->left;
	struct retry_input in = {
	    .status = v->status,
	    .transport = v->transport,
	    .hdrs = &r,
	    .body = v->body,
	    .body_len = v->body ? strlen(v->body) : 0,
	    .held = v->held,
	    .streamed = v->streamed,
	    .body_gone = v->body_gone,
	    .attempt = v->attempt ? v->attempt : 1,
	    .now_ms = T0,
	    .deadline_ms = T0 + left,
	    .plan = &p,
	    .rnd = v->rnd,
	};
	struct retry_verdict d = retry_verdict(&in);
	ck_assert_msg(d.action == v->action, "%s: action %d", v->name, d.action);
	ck_assert_msg(d.outcome == v->outcome, "%s: outcome %d", v->name, d.outcome);
	ck_assert_msg(d.cls == v->cls, "%s: class %s", v->name, retry_class_name(d.cls));
	ck_assert_msg(d.delay_ms == (v->action == RETRY_ACTION_RETRY ? v->delay_ms : 0),
	              "%s: delay %lld", v->name, (long long)d.delay_ms);
	if (d.action == RETRY_ACTION_RETRY)
		ck_assert_msg(d.delay_ms < left, "%s: the retry lands past the deadline", v->name);
	ck_assert_msg(d.hold_ms == v->hold_ms, "%s: hold_ms %lld", v->name, (long long)d.hold_ms);
	ck_assert_msg(d.hinted == v->hinted, "%s: hinted", v->name);
	ck_assert_msg(d.quota == v->quota, "%s: quota", v->name);
	ck_assert_msg(d.no_retry_hdr == v->no_retry_hdr, "%s: no_retry_hdr", v->name);
	ck_assert_msg(same_str(d.reason, v->reason), "%s: reason %s", v->name,
	              d.reason ? d.reason : "NULL");
	ck_assert_msg(same_str(d.stop, v->stop), "%s: stop %s", v->name, d.stop ? d.stop : "NULL");
	ck_assert_msg(d.told.limit == v->told_limit, "%s: told.limit %lld", v->name,
	              (long long)d.told.limit);
	if (v->told_limit > 0)
		ck_assert_msg(d.told.budget == v->told_budget &&
		                  d.told.window_ms == v->told_window_ms,
		              "%s: told budget %d window %lld", v->name, (int)d.told.budget,
		              (long long)d.told.window_ms);
	/* the verdict agrees with the pieces it is made of */
	if (!v->streamed) {
		const char *why = NULL;
		bool http = v->transport == RETRY_TRANSPORT_NONE;
		bool body = http && v->held;
		struct error_body eb;
		error_body_parse(body ? v->body : NULL, body ? in.body_len : 0, &eb);
		ck_assert_int_eq(retry_classify(v->status, v->transport, http ? &r : NULL,
		                                &eb.facts, &why, NULL),
		                 d.cls);
		ck_assert_str_eq(why, d.reason);
	}
}
END_TEST

/* A verdict reads only what it is given: the same input, the same verdict. */
START_TEST(verdict_is_pure)
{
	struct plan_conf p = plan(JITTER_ADDITIVE);
	struct retry_input in = {.status = 429,
	                         .body = openai_644ms,
	                         .body_len = sizeof openai_644ms - 1,
	                         .held = true,
	                         .attempt = 2,
	                         .now_ms = T0,
	                         .deadline_ms = T0 + 300000,
	                         .plan = &p,
	                         .rnd = 0.25};
	struct retry_verdict a = retry_verdict(&in), b = retry_verdict(&in);
	ck_assert(a.action == b.action && a.delay_ms == b.delay_ms && a.hold_ms == b.hold_ms);
	ck_assert_int_eq(a.delay_ms, 2125);
	ck_assert_str_eq(a.reason, b.reason);
	/* no headers (hdrs NULL): the body's hint holds the lane */
	ck_assert_int_eq(a.hold_ms, 644);
}
END_TEST

static Suite *retry_suite(void)
{
	Suite *s = suite_create("retry");
	TCase *c = tcase_create("classify");
	tcase_add_test(c, final_statuses);
	tcase_add_test(c, a_200_is_never_overload);
	tcase_add_test(c, capacity_statuses);
	tcase_add_test(c, transient_statuses_and_transport);
	tcase_add_test(c, openai_bodies);
	tcase_add_test(c, money_codes);
	tcase_add_test(c, anthropic_bodies);
	tcase_add_test(c, azure_and_openrouter);
	tcase_add_test(c, gemini_bodies);
	tcase_add_test(c, should_retry_header);
	tcase_add_test(c, oversized_body_not_parsed);
	tcase_add_test(c, class_names);
	tcase_add_test(c, parsed_body);
	suite_add_tcase(s, c);
	TCase *d = tcase_create("decide");
	tcase_add_test(d, backoff_additive);
	tcase_add_test(d, backoff_full_jitter);
	tcase_add_test(d, decide_final_classes);
	tcase_add_test(d, decide_transient_max_attempts);
	tcase_add_test(d, decide_capacity_until_deadline);
	tcase_add_test(d, decide_hints);
	suite_add_tcase(s, d);
	TCase *v = tcase_create("vectors");
	tcase_add_loop_test(v, class_vector, 0,
	                    (int)(sizeof class_vectors / sizeof class_vectors[0]));
	tcase_add_loop_test(v, facts_vector, 0,
	                    (int)(sizeof facts_vectors / sizeof facts_vectors[0]));
	tcase_add_loop_test(v, decide_vector, 0,
	                    (int)(sizeof decide_vectors / sizeof decide_vectors[0]));
	tcase_add_loop_test(v, verdict_head_vector, 0,
	                    (int)(sizeof head_vectors / sizeof head_vectors[0]));
	tcase_add_loop_test(v, verdict_vector, 0,
	                    (int)(sizeof verdict_vectors / sizeof verdict_vectors[0]));
	suite_add_tcase(s, v);
	TCase *w = tcase_create("verdict");
	tcase_add_test(w, verdict_head_no_headers);
	tcase_add_test(w, verdict_is_pure);
	suite_add_tcase(s, w);
	return s;
}

UNIT_MAIN("retry", retry_suite)
