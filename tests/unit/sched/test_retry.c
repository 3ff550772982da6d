/* Unit tests for retry: the DESIGN §3 table row by row, the bodies of
 * PROVIDERS.md §2-§6, backoff with jitter, deadlines and attempt limits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/retry.h"
#include "unit.h"

/* The body parsed once (retry_body_parse) must say what the two parses of
 * retry_classify and rlh_body_hint say. */
static void same_as_parsed(int status, const struct rlh_result *hdrs, const char *body, size_t len,
                           enum retry_class c, const char *why)
{
	struct retry_body rb;
	const char *why2 = NULL;
	retry_body_parse(body, len, &rb);
	ck_assert_int_eq(retry_classify_body(status, RETRY_TRANSPORT_NONE, hdrs, &rb, &why2), c);
	ck_assert_str_eq(why2, why);
	struct rlh_body_hint h;
	if (len <= RETRY_BODY_CAP) {
		rlh_body_hint(body, len, &h);
		ck_assert(h.has_delay == rb.hint.has_delay && h.daily_cap == rb.hint.daily_cap);
		ck_assert_int_eq(h.delay_ms, rb.hint.delay_ms);
	}
	int64_t a = -1, b = -1;
	ck_assert(rlh_server_hint(hdrs, len <= RETRY_BODY_CAP ? &h : NULL, &a) ==
	          retry_server_hint(hdrs, &rb, &b));
	ck_assert_int_eq(a, b);
}

static enum retry_class cls(int status, const char *body)
{
	const char *why = NULL;
	size_t len = body ? strlen(body) : 0;
	enum retry_class c = retry_classify(status, RETRY_TRANSPORT_NONE, NULL, body, len, &why);
	ck_assert_ptr_nonnull(why);
	same_as_parsed(status, NULL, body, len, c, why);
	return c;
}

static enum retry_class cls_hdr(int status, const char *should_retry)
{
	struct rlh_header h = {"x-should-retry", should_retry, strlen(should_retry)};
	struct rlh_result r;
	rlh_parse(DIALECT_OPENAI, &h, 1, 0, &r);
	return retry_classify(status, RETRY_TRANSPORT_NONE, &r, NULL, 0, NULL);
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
	ck_assert_int_eq(retry_classify(0, RETRY_TRANSPORT_CONNECT, NULL, NULL, 0, &why),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "connect_error");
	ck_assert_int_eq(retry_classify(0, RETRY_TRANSPORT_RESET, NULL, NULL, 0, &why),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "reset_before_headers");
	ck_assert_int_eq(retry_classify(200, RETRY_TRANSPORT_TIMEOUT, NULL, NULL, 0, &why),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "timeout");
	/* An untrusted certificate: final, and the SDK is told not to retry either. */
	ck_assert_int_eq(retry_classify(0, RETRY_TRANSPORT_CERT, NULL, NULL, 0, &why),
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
	ck_assert_int_eq(retry_classify(429, RETRY_TRANSPORT_NONE, NULL, big, strlen(big), &why),
	                 RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "request_too_large");

	const char *quota =
	    "{\"error\":{\"message\":\"You exceeded your current quota, please "
	    "check your plan and billing details.\",\"type\":\"insufficient_quota\","
	    "\"param\":null,\"code\":\"insufficient_quota\"}}";
	ck_assert_int_eq(
	    retry_classify(429, RETRY_TRANSPORT_NONE, NULL, quota, strlen(quota), &why),
	    RETRY_FINAL_NO_RETRY);
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
		ck_assert_int_eq(
		    retry_classify(429, RETRY_TRANSPORT_NONE, NULL, body, (size_t)n, &why),
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
	ck_assert_int_eq(
	    retry_classify(429, RETRY_TRANSPORT_NONE, NULL, spend, strlen(spend), &why),
	    RETRY_FINAL_NO_RETRY);
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

START_TEST(gemini_bodies)
{
	const char *why = NULL;
	ck_assert_int_eq(cls(429, gemini_minute), RETRY_CAPACITY);
	const char *day = "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":"
	                  "[{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\","
	                  "\"violations\":[{\"quotaId\":\"GenerateRequestsPerDayPerProjectPerModel"
	                  "-FreeTier\"}]}]}}";
	ck_assert_int_eq(retry_classify(429, RETRY_TRANSPORT_NONE, NULL, day, strlen(day), &why),
	                 RETRY_FINAL_NO_RETRY);
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
	ck_assert_int_eq(retry_classify(429, RETRY_TRANSPORT_NONE, NULL, b, n, NULL),
	                 RETRY_CAPACITY);
	ck_assert_int_eq(retry_classify(429, RETRY_TRANSPORT_NONE, NULL, b, RETRY_BODY_CAP, NULL),
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
	enum retry_class c = retry_classify(v->status, RETRY_TRANSPORT_NONE, &r, v->body,
	                                    v->body ? strlen(v->body) : 0, &why);
	ck_assert_msg(c == v->want, "row %d: %d -> %s (%s), want %s", _i, v->status,
	              retry_class_name(c), why, retry_class_name(v->want));
	same_as_parsed(v->status, &r, v->body, v->body ? strlen(v->body) : 0, c, why);
}
END_TEST

START_TEST(parsed_body)
{
	struct retry_body rb;
	/* one parse: facts and hints together */
	static const char gemini_day[] =
	    "[{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"message\":"
	    "\"Please retry in 25.4s.\",\"details\":[{\"violations\":[{\"quotaId\":"
	    "\"GenerateRequestsPerDayPerProjectPerModel\"}]}]}}]";
	retry_body_parse(gemini_day, strlen(gemini_day), &rb);
	ck_assert_str_eq(rb.capacity, "RESOURCE_EXHAUSTED");
	ck_assert_ptr_null(rb.money);
	ck_assert(!rb.too_large && rb.hint.daily_cap && rb.hint.has_delay);
	ck_assert_int_eq(rb.hint.delay_ms, 25400);
	const char *why = NULL;
	ck_assert_int_eq(retry_classify_body(429, RETRY_TRANSPORT_NONE, NULL, &rb, &why),
	                 RETRY_FINAL_NO_RETRY);
	ck_assert_str_eq(why, "daily_quota");
	/* prose: no JSON facts, but the hint */
	retry_body_parse("slow down, retry after 3 seconds", 32, &rb);
	ck_assert(rb.money == NULL && rb.capacity == NULL && !rb.too_large);
	ck_assert(rb.hint.has_delay && rb.hint.delay_ms == 3000);
	int64_t ms = 0;
	ck_assert(retry_server_hint(NULL, &rb, &ms));
	ck_assert_int_eq(ms, 3000);
	/* no body, and a transport error with no body at all */
	retry_body_parse(NULL, 0, &rb);
	ck_assert(rb.money == NULL && !rb.hint.has_delay && !rb.hint.daily_cap);
	ck_assert(!retry_server_hint(NULL, NULL, &ms));
	ck_assert_int_eq(retry_classify_body(0, RETRY_TRANSPORT_RESET, NULL, NULL, &why),
	                 RETRY_TRANSIENT);
	ck_assert_str_eq(why, "reset_before_headers");
	ck_assert_int_eq(retry_classify_body(503, RETRY_TRANSPORT_NONE, NULL, NULL, &why),
	                 RETRY_CAPACITY);
	ck_assert_int_eq(retry_classify_body(200, RETRY_TRANSPORT_NONE, NULL, NULL, &why),
	                 RETRY_FINAL);
	/* over the cap: not looked at */
	size_t n = RETRY_BODY_CAP + 1;
	char *b = malloc(n);
	ck_assert_ptr_nonnull(b);
	memset(b, ' ', n);
	static const char head[] =
	    "{\"error\":{\"code\":\"insufficient_quota\",\"message\":\"try again in 5s\"}}";
	memcpy(b, head, sizeof head - 1);
	retry_body_parse(b, n, &rb);
	ck_assert(rb.money == NULL && !rb.hint.has_delay);
	retry_body_parse(b, RETRY_BODY_CAP, &rb);
	ck_assert_str_eq(rb.money, "insufficient_quota");
	ck_assert(rb.hint.has_delay && rb.hint.delay_ms == 5000);
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
	tcase_add_loop_test(v, decide_vector, 0,
	                    (int)(sizeof decide_vectors / sizeof decide_vectors[0]));
	suite_add_tcase(s, v);
	return s;
}

UNIT_MAIN("retry", retry_suite)
