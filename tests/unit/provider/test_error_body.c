/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for error_body: real error bodies of each provider (PROVIDERS.md
 * §2-§6, §11, and the issues cited there), each parsed once, asserting the
 * retry facts and the hints that one parse gives. */
#include <stdlib.h>
#include <string.h>

#include "provider/error_body.h"
#include "unit.h"

#define NONE RLH_N_BUDGETS

static const struct body_vector {
	const char *name;
	const char *body; /* NULL: no body */
	/* facts */
	const char *money, *capacity; /* NULL: none */
	bool too_large, daily_cap;
	/* hints: -1 / NONE when the body does not say */
	int64_t delay_ms, limit;
	enum rlh_budget_kind budget;
	int64_t window_s;
} vectors[] = {
    /* ---- OpenAI (platform.openai.com/docs/guides/error-codes; community threads) ---- */
    {"openai 429 tokens per minute",
     "{\"error\":{\"message\":\"Rate limit reached for gpt-4o in organization org-x on tokens "
     "per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms. Visit "
     "https://platform.openai.com/account/rate-limits to learn more.\",\"type\":\"tokens\","
     "\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
     NULL, NULL, false, false, 644, 30000, RLH_TOKENS, 60},
    {"openai 429 requests per minute",
     "{\"error\":{\"message\":\"Rate limit reached for gpt-3.5-turbo in organization org-x on "
     "requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit "
     "https://platform.openai.com/account/rate-limits to learn more. You can increase your "
     "rate limit by adding a payment method to your account at "
     "https://platform.openai.com/account/billing.\",\"type\":\"requests\",\"param\":null,"
     "\"code\":\"rate_limit_exceeded\"}}",
     NULL, NULL, false, false, 20000, 3, RLH_REQUESTS, 60},
    /* A day named in prose is a hint only: daily_cap comes from structured
     * fields (today's retry behaviour). */
    {"openai 429 requests per day",
     "{\"error\":{\"message\":\"Rate limit reached for gpt-4o-mini in organization org-x on "
     "requests per day (RPD): Limit 200, Used 200, Requested 1. Please try again in 7m12s.\","
     "\"type\":\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
     NULL, NULL, false, false, 432000, 200, RLH_REQUESTS, 86400},
    {"openai 429 request too large",
     "{\"error\":{\"message\":\"Request too large for gpt-4 in organization org-x on tokens "
     "per min (TPM): Limit 10000, Requested 24691. The input or output tokens must be reduced "
     "in order to run successfully. Visit https://platform.openai.com/account/rate-limits to "
     "learn more.\",\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
     NULL, NULL, true, false, -1, 10000, RLH_TOKENS, 60},
    {"openai 429 insufficient_quota",
     "{\"error\":{\"message\":\"You exceeded your current quota, please check your plan and "
     "billing details. For more information on this error, read the docs: "
     "https://platform.openai.com/docs/guides/error-codes/api-errors.\",\"type\":"
     "\"insufficient_quota\",\"param\":null,\"code\":\"insufficient_quota\"}}",
     "insufficient_quota", NULL, false, false, -1, -1, NONE, 0},
    {"openai 429 insufficient_quota, older: code null",
     "{\"error\":{\"message\":\"You exceeded your current quota\",\"type\":"
     "\"insufficient_quota\",\"param\":null,\"code\":null}}",
     "insufficient_quota", NULL, false, false, -1, -1, NONE, 0},
    {"openai 429 project spend limit",
     "{\"error\":{\"message\":\"Project spend limit reached.\",\"type\":\"invalid_request_error\","
     "\"param\":null,\"code\":\"project_spend_limit_exceeded\"}}",
     "project_spend_limit_exceeded", NULL, false, false, -1, -1, NONE, 0},
    {"openai 503 server_is_overloaded",
     "{\"error\":{\"message\":\"The server is overloaded or not ready yet.\",\"type\":"
     "\"server_error\",\"param\":null,\"code\":\"server_is_overloaded\"}}",
     NULL, "server_is_overloaded", false, false, -1, -1, NONE, 0},
    {"openai 429 slow_down",
     "{\"error\":{\"message\":\"Please reduce your request rate.\",\"type\":\"requests\","
     "\"param\":null,\"code\":\"slow_down\"}}",
     NULL, "slow_down", false, false, -1, -1, NONE, 0},
    /* ---- Anthropic (docs.anthropic.com errors and rate-limits pages) ---- */
    {"anthropic 429 rate_limit_error, input tokens",
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"This request "
     "would exceed the rate limit for your organization (3f0c2a1e) of 50,000 input tokens per "
     "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see "
     "the response headers for current usage. Please reduce the prompt length or the maximum "
     "tokens requested, or try again later.\"},\"request_id\":\"req_011CV\"}",
     NULL, "rate_limit_error", false, false, -1, 50000, RLH_INPUT_TOKENS, 60},
    {"anthropic 429 rate_limit_error, output tokens",
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"This request "
     "would exceed the rate limit for your organization (3f0c2a1e) of 8,000 output tokens per "
     "minute.\"},\"request_id\":\"req_011CW\"}",
     NULL, "rate_limit_error", false, false, -1, 8000, RLH_OUTPUT_TOKENS, 60},
    {"anthropic 429 rate_limit_error, older message",
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Number of "
     "request tokens has exceeded your per-minute rate limit\"},\"request_id\":\"req_011\"}",
     NULL, "rate_limit_error", false, false, -1, -1, NONE, 0},
    {"anthropic 529 overloaded_error",
     "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},"
     "\"request_id\":null}",
     NULL, "overloaded_error", false, false, -1, -1, NONE, 0},
    {"anthropic 429 enforced spend limit",
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"You have "
     "reached your specified API usage limits. You will regain access on 2026-03-01 at 00:00 "
     "UTC.\",\"details\":{\"error_code\":\"enforced_spend_limit_reached\"}},\"request_id\":"
     "\"req_013\"}",
     "enforced_spend_limit_reached", "rate_limit_error", false, false, -1, -1, NONE, 0},
    /* ---- Azure OpenAI (openai-python#937, learn.microsoft.com Q&A 2156987) ---- */
    {"azure 429 token rate limit",
     "{\"error\":{\"code\":\"429\",\"message\":\"Requests to the ChatCompletions_Create "
     "Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of "
     "your current OpenAI S0 pricing tier. Please retry after 86400 seconds. Please go here: "
     "https://aka.ms/oai/quotaincrease if you would like to further increase the default rate "
     "limit.\"}}",
     NULL, NULL, false, false, 86400000, -1, NONE, 0},
    {"azure 429 from the gateway, no error wrapper",
     "{\"statusCode\":429,\"message\":\"Rate limit is exceeded. Try again in 12 seconds.\"}", NULL,
     NULL, false, false, 12000, -1, NONE, 0},
    /* ---- Gemini (python-genai#2044, gemini-cli#22486, page-assist#406) ---- */
    {"gemini 429 per minute: RetryInfo beats the message",
     "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota, please check "
     "your plan and billing details. Please retry in 25.4s.\",\"status\":"
     "\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc."
     "QuotaFailure\",\"violations\":[{\"quotaMetric\":\"generativelanguage.googleapis.com/"
     "generate_content_free_tier_requests\",\"quotaId\":\"GenerateRequestsPerMinutePerProject"
     "PerModel-FreeTier\",\"quotaDimensions\":{\"location\":\"global\",\"model\":"
     "\"gemini-2.0-flash\"},\"quotaValue\":\"15\"}]},{\"@type\":\"type.googleapis.com/"
     "google.rpc.Help\",\"links\":[{\"description\":\"Learn more\",\"url\":"
     "\"https://ai.google.dev/gemini-api/docs/rate-limits\"}]},{\"@type\":\"type.googleapis."
     "com/google.rpc.RetryInfo\",\"retryDelay\":\"47s\"}]}}",
     NULL, "RESOURCE_EXHAUSTED", false, false, 47000, 15, RLH_REQUESTS, 60},
    {"gemini 429 per day: a daily cap",
     "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota.\",\"status\":"
     "\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc."
     "QuotaFailure\",\"violations\":[{\"quotaId\":\"GenerateRequestsPerDayPerProjectPerModel-"
     "FreeTier\",\"quotaValue\":\"200\"}]},{\"@type\":\"type.googleapis.com/google.rpc."
     "RetryInfo\",\"retryDelay\":\"0.734s\"}]}}",
     NULL, "RESOURCE_EXHAUSTED", false, true, 734, 200, RLH_REQUESTS, 86400},
    {"gemini 429 input tokens, quotaValue a number",
     "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
     "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaId\":"
     "\"GenerateContentInputTokensPerModelPerMinute-FreeTier\",\"quotaValue\":250000}]},"
     "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":"
     "\"57.238747106s\"}]}}",
     NULL, "RESOURCE_EXHAUSTED", false, false, 57239, 250000, RLH_INPUT_TOKENS, 60},
    {"gemini OpenAI-compatible endpoint: an array",
     "[{\"error\":{\"code\":429,\"message\":\"Resource has been exhausted (e.g. check "
     "quota).\",\"status\":\"RESOURCE_EXHAUSTED\"}}]",
     NULL, "RESOURCE_EXHAUSTED", false, false, -1, -1, NONE, 0},
    {"gemini array with a message hint",
     "[{\"error\":{\"code\":429,\"message\":\"Please retry in 25.4s.\"}}]", NULL, NULL, false,
     false, 25400, -1, NONE, 0},
    /* ---- OpenRouter (api_reference/limits and errors pages) ---- */
    {"openrouter 402 no credits",
     "{\"error\":{\"code\":402,\"message\":\"Insufficient credits. This account never "
     "purchased credits. Make sure your key is on the correct account or org, and if so, "
     "purchase more at https://openrouter.ai/settings/credits\"}}",
     NULL, NULL, false, false, -1, -1, NONE, 0},
    {"openrouter 429 free models per day",
     "{\"error\":{\"message\":\"Rate limit exceeded: free-models-per-day. Add 10 credits to "
     "unlock 1000 free model requests per day\",\"code\":429,\"metadata\":{\"headers\":"
     "{\"X-RateLimit-Limit\":\"50\",\"X-RateLimit-Remaining\":\"0\",\"X-RateLimit-Reset\":"
     "\"1741305600000\"},\"provider_name\":null}},\"user_id\":\"user_x\"}",
     NULL, NULL, false, false, -1, -1, RLH_REQUESTS, 86400},
    /* ---- Groq, Mistral ---- */
    {"groq 429 tokens per minute",
     "{\"error\":{\"message\":\"Rate limit reached for model `llama-3.3-70b-versatile` in "
     "organization `org_x` service tier `on_demand` on tokens per minute (TPM): Limit 6000, "
     "Used 5791, Requested 1013. Please try again in 8.04s. Need more tokens? Upgrade to Dev "
     "Tier today at https://console.groq.com/settings/billing\",\"type\":\"tokens\",\"code\":"
     "\"rate_limit_exceeded\"}}",
     NULL, NULL, false, false, 8040, 6000, RLH_TOKENS, 60},
    {"mistral 429", "{\"message\":\"Requests rate limit exceeded\"}", NULL, NULL, false, false, -1,
     -1, NONE, 0},
    {"mistral 422 extra_forbidden: the message is an object",
     "{\"object\":\"error\",\"message\":{\"detail\":[{\"type\":\"extra_forbidden\",\"loc\":"
     "[\"body\",\"stream_options\"],\"msg\":\"Extra inputs are not permitted\",\"input\":"
     "{\"include_usage\":true}}]},\"type\":\"invalid_request_error\",\"param\":null,\"code\":"
     "null}",
     NULL, NULL, false, false, -1, -1, NONE, 0},
    /* ---- odd bodies ---- */
    {"no body", NULL, NULL, NULL, false, false, -1, -1, NONE, 0},
    {"an empty body", "", NULL, NULL, false, false, -1, -1, NONE, 0},
    {"an envoy 503 in prose",
     "upstream connect error or disconnect/reset before headers. reset reason: overflow", NULL,
     NULL, false, false, -1, -1, NONE, 0},
    {"html", "<html><body><h1>502 Bad Gateway</h1></body></html>", NULL, NULL, false, false, -1, -1,
     NONE, 0},
    {"prose with a hint", "Too many requests, retry after 3 seconds", NULL, NULL, false, false,
     3000, -1, NONE, 0},
    {"truncated JSON: prose, no facts",
     "{\"error\":{\"code\":\"insufficient_quota\",\"message\":\"try again in 5s\"", NULL, NULL,
     false, false, 5000, -1, NONE, 0},
    {"a JSON string", "\"insufficient_quota\"", NULL, NULL, false, false, -1, -1, NONE, 0},
    {"an array of scalars", "[1, \"x\", null]", NULL, NULL, false, false, -1, -1, NONE, 0},
    {"an array: facts of every element, the first of each kind",
     "[{\"error\":{\"code\":\"credit_balance_exhausted\"}},{\"error\":{\"code\":"
     "\"insufficient_quota\",\"status\":\"RESOURCE_EXHAUSTED\"}}]",
     "credit_balance_exhausted", "RESOURCE_EXHAUSTED", false, false, -1, -1, NONE, 0},
    {"error as a string: code and message at once", "{\"error\":\"insufficient_quota\"}",
     "insufficient_quota", NULL, false, false, -1, -1, NONE, 0},
    {"error as a string with a hint", "{\"error\":\"Please try again in 2s\"}", NULL, NULL, false,
     false, 2000, -1, NONE, 0},
    {"error as a string: request too large", "{\"error\":\"Request too large for this model\"}",
     NULL, NULL, true, false, -1, -1, NONE, 0},
    {"wrong types everywhere",
     "{\"error\":{\"code\":429,\"type\":[\"x\"],\"status\":{},\"details\":\"x\",\"message\":5}}",
     NULL, NULL, false, false, -1, -1, NONE, 0},
    {"details of the wrong shapes",
     "{\"error\":{\"details\":[{\"retryDelay\":\"soon\"},{\"violations\":7},{\"violations\":"
     "[{\"quotaId\":5,\"quotaValue\":\"x\"}]}]}}",
     NULL, NULL, false, false, -1, -1, NONE, 0},
    {"a negative retryDelay is no delay",
     "{\"error\":{\"details\":[{\"retryDelay\":\"-5s\"}],\"message\":\"retry in 2s\"}}", NULL, NULL,
     false, false, 2000, -1, NONE, 0},
    {"codes are case-sensitive", "{\"error\":{\"code\":\"INSUFFICIENT_QUOTA\"}}", NULL, NULL, false,
     false, -1, -1, NONE, 0},
};

START_TEST(body_vector)
{
	const struct body_vector *v = &vectors[_i];
	struct error_body eb;
	memset(&eb, 0x5a, sizeof eb); /* always initialised */
	error_body_parse(v->body, v->body ? strlen(v->body) : 0, &eb);
	const struct error_facts *f = &eb.facts;
	const struct error_hints *h = &eb.hints;
	if (v->money == NULL)
		ck_assert_msg(f->money == NULL, "%s: money %s", v->name, f->money);
	else
		ck_assert_msg(f->money && strcmp(f->money, v->money) == 0, "%s: money", v->name);
	if (v->capacity == NULL)
		ck_assert_msg(f->capacity == NULL, "%s: capacity %s", v->name, f->capacity);
	else
		ck_assert_msg(f->capacity && strcmp(f->capacity, v->capacity) == 0, "%s: capacity",
		              v->name);
	ck_assert_msg(f->too_large == v->too_large, "%s: too_large", v->name);
	ck_assert_msg(f->daily_cap == v->daily_cap, "%s: daily_cap", v->name);
	ck_assert_msg(h->has_delay == (v->delay_ms >= 0), "%s: has_delay", v->name);
	if (v->delay_ms >= 0)
		ck_assert_msg(h->delay_ms == v->delay_ms, "%s: delay %lld", v->name,
		              (long long)h->delay_ms);
	ck_assert_msg(h->has_limit == (v->limit >= 0), "%s: has_limit", v->name);
	if (v->limit >= 0)
		ck_assert_msg(h->limit == v->limit, "%s: limit %lld", v->name, (long long)h->limit);
	ck_assert_msg(h->budget == v->budget, "%s: budget %d", v->name, h->budget);
	ck_assert_msg(h->window_s == v->window_s, "%s: window %lld", v->name,
	              (long long)h->window_s);
}
END_TEST

/* Whose shortage a refusal names (the taxonomy of refusals): each body, and
 * the facts in_flight, overload and tier it gives (NULL: none) with its
 * capacity code. */
static const struct whose_vector {
	const char *name, *body;
	const char *capacity, *in_flight, *overload, *tier;
} whose[] = {
    /* OpenRouter (OpenRouterTeam docs, api_reference/limits) */
    {"openrouter 402 in-flight budget: transient",
     "{\"error\":{\"code\":402,\"message\":\"Your in-flight requests would exceed your "
     "credit balance.\",\"metadata\":{\"reason\":\"in_flight_budget_exhausted\","
     "\"limit_source\":\"openrouter_in_flight_budget\"}}}",
     "in_flight_budget_exhausted", "in_flight_budget_exhausted", NULL, NULL},
    {"openrouter 402 credits: none of them",
     "{\"error\":{\"code\":402,\"message\":\"Insufficient credits.\"}}", NULL, NULL, NULL, NULL},
    {"openrouter metadata without a reason",
     "{\"error\":{\"code\":402,\"message\":\"x\",\"metadata\":{\"provider_name\":null}}}", NULL,
     NULL, NULL, NULL},
    /* Anthropic 529 (docs.anthropic.com errors page) */
    {"anthropic 529 overloaded_error: the provider's",
     "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
     "\"Overloaded\"},\"request_id\":\"req_011CV\"}",
     "overloaded_error", NULL, "overloaded_error", NULL},
    {"anthropic 429 rate_limit_error: the account's",
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"x\"}}",
     "rate_limit_error", NULL, NULL, NULL},
    /* OpenAI flex processing (platform.openai.com/docs/guides/flex-processing) */
    {"openai flex 429 resource_unavailable: the tier's",
     "{\"error\":{\"message\":\"Resource unavailable. Please try again later.\",\"type\":"
     "\"invalid_request_error\",\"param\":null,\"code\":\"resource_unavailable\"}}",
     "resource_unavailable", NULL, NULL, "resource_unavailable"},
    /* Groq (console.groq.com/docs/errors: 498 Flex Tier Capacity Exceeded) */
    {"groq 498 capacity_exceeded: the tier's",
     "{\"error\":{\"message\":\"Flex tier capacity exceeded. This is a temporary error "
     "due to high demand.\",\"type\":\"internal_server_error\",\"code\":"
     "\"capacity_exceeded\"}}",
     "capacity_exceeded", NULL, NULL, "capacity_exceeded"},
    {"openai 503 server_is_overloaded: capacity, no more said",
     "{\"error\":{\"message\":\"The server is overloaded.\",\"type\":\"server_error\","
     "\"code\":\"server_is_overloaded\"}}",
     "server_is_overloaded", NULL, NULL, NULL},
    {"a tier word in a message is not a code",
     "{\"error\":{\"message\":\"resource_unavailable\",\"type\":\"x\"}}", NULL, NULL, NULL, NULL},
};

static bool same(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

START_TEST(whose_vector)
{
	const struct whose_vector *v = &whose[_i];
	struct error_body eb;
	error_body_parse(v->body, strlen(v->body), &eb);
	ck_assert_msg(same(eb.facts.capacity, v->capacity), "%s: capacity", v->name);
	ck_assert_msg(same(eb.facts.in_flight, v->in_flight), "%s: in_flight", v->name);
	ck_assert_msg(same(eb.facts.overload, v->overload), "%s: overload", v->name);
	ck_assert_msg(same(eb.facts.tier, v->tier), "%s: tier", v->name);
	ck_assert_msg(eb.facts.money == NULL, "%s: money", v->name);
}
END_TEST

/* A code found is the module's own static string, not the parse's: it
 * outlives the body (logs and metrics keep it). */
START_TEST(codes_outlive_the_body)
{
	char *body = strdup("{\"error\":{\"code\":\"insufficient_quota\",\"type\":\"slow_down\"}}");
	ck_assert_ptr_nonnull(body);
	struct error_body eb;
	error_body_parse(body, strlen(body), &eb);
	memset(body, 'x', strlen(body));
	free(body);
	ck_assert_str_eq(eb.facts.money, "insufficient_quota");
	ck_assert_str_eq(eb.facts.capacity, "slow_down");
}
END_TEST

START_TEST(cap)
{
	size_t n = ERROR_BODY_CAP + 1;
	char *b = malloc(n);
	ck_assert_ptr_nonnull(b);
	memset(b, ' ', n);
	static const char head[] =
	    "{\"error\":{\"code\":\"insufficient_quota\",\"message\":\"try again in 5s\"}}";
	memcpy(b, head, sizeof head - 1);
	struct error_body eb;
	error_body_parse(b, n, &eb); /* over the cap: not looked at */
	ck_assert(eb.facts.money == NULL && !eb.hints.has_delay);
	ck_assert_int_eq(eb.hints.budget, RLH_N_BUDGETS);
	error_body_parse(b, ERROR_BODY_CAP, &eb); /* at the cap: read */
	ck_assert_str_eq(eb.facts.money, "insufficient_quota");
	ck_assert(eb.hints.has_delay && eb.hints.delay_ms == 5000);
	free(b);
}
END_TEST

/* The length given is the end: bytes past it are not read. */
START_TEST(length_is_the_end)
{
	static const char two[] = "{\"error\":{\"code\":\"slow_down\"}}{\"error\":{\"code\":"
	                          "\"insufficient_quota\"}}";
	struct error_body eb;
	error_body_parse(two, 30, &eb);
	ck_assert_str_eq(eb.facts.capacity, "slow_down");
	ck_assert_ptr_null(eb.facts.money);
	error_body_parse(two, sizeof two - 1, &eb); /* trailing data: not JSON, prose */
	ck_assert_ptr_null(eb.facts.capacity);
}
END_TEST

static Suite *error_body_suite(void)
{
	Suite *s = suite_create("error_body");
	TCase *v = tcase_create("vectors");
	tcase_add_loop_test(v, body_vector, 0, (int)(sizeof vectors / sizeof vectors[0]));
	tcase_add_loop_test(v, whose_vector, 0, (int)(sizeof whose / sizeof whose[0]));
	suite_add_tcase(s, v);
	TCase *o = tcase_create("other");
	tcase_add_test(o, codes_outlive_the_body);
	tcase_add_test(o, cap);
	tcase_add_test(o, length_is_the_end);
	suite_add_tcase(s, o);
	return s;
}

UNIT_MAIN("error_body", error_body_suite)
