/* SPDX-License-Identifier: Apache-2.0 */
/* error_body — see error_body.h. */
#include "provider/error_body.h"

#include <jansson.h>
#include <string.h>
#include <strings.h>

/* Codes (in error.code, error.type, error.status or error.details.error_code)
 * that mean money, not rate: waiting does not help, and retrying only burns
 * the client's time (PROVIDERS.md §2, §3). */
static const char *const money_codes[] = {
    "insufficient_quota",                /* OpenAI (also older bodies' type) */
    "credit_balance_exhausted",          /* OpenAI */
    "organization_spend_limit_exceeded", /* OpenAI */
    "project_spend_limit_exceeded",      /* OpenAI */
    "organization_usage_limit_exceeded", /* OpenAI */
    "enforced_spend_limit_reached",      /* Anthropic error.details.error_code */
};

/* Codes, types and statuses that say "overloaded, come back later". */
static const char *const capacity_codes[] = {
    "RESOURCE_EXHAUSTED",         /* Gemini status */
    "slow_down",                  /* OpenAI 429 */
    "server_is_overloaded",       /* OpenAI 503 */
    "rate_limit_error",           /* Anthropic 429 */
    "overloaded_error",           /* Anthropic 529 */
    "resource_unavailable",       /* OpenAI flex 429 */
    "capacity_exceeded",          /* Groq 498 (flex) */
    "in_flight_budget_exhausted", /* OpenRouter 402 error.metadata.reason */
};

/* Of those, the ones that are not the account's budget (PROVIDERS.md §11). */
static const char *const overload_codes[] = {
    "overloaded_error", /* Anthropic 529: Anthropic-wide capacity */
};
static const char *const tier_codes[] = {
    "resource_unavailable", /* OpenAI: flex capacity is short */
    "capacity_exceeded",    /* Groq 498: flex capacity */
};
static const char *const in_flight_codes[] = {
    "in_flight_budget_exhausted", /* OpenRouter 402, with Retry-After */
};

/* What one parse carries between the elements of a body. */
struct scan {
	bool has_retry_info; /* a Gemini RetryInfo gave the delay: it wins */
	bool has_msg_delay;  /* the first message that gave a delay */
	int64_t msg_delay_ms;
};

static int lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

/* Whether s[0..len) starts with the literal lit, ignoring case (the C
 * locale's: pacerd never calls setlocale). */
static bool ci_at(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len >= n && strncasecmp(s, lit, n) == 0;
}

static const char *match(const char *s, const char *const *list, size_t n)
{
	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return list[i];
	return NULL;
}

static void note_code(struct error_facts *f, const char *s)
{
	const char *m = match(s, money_codes, sizeof money_codes / sizeof money_codes[0]);
	const char *c = match(s, capacity_codes, sizeof capacity_codes / sizeof capacity_codes[0]);
	if (m != NULL && f->money == NULL)
		f->money = m;
	if (c != NULL && f->capacity == NULL)
		f->capacity = c;
	if (c == NULL)
		return;
	const char *o = match(s, overload_codes, sizeof overload_codes / sizeof overload_codes[0]);
	const char *t = match(s, tier_codes, sizeof tier_codes / sizeof tier_codes[0]);
	const char *i =
	    match(s, in_flight_codes, sizeof in_flight_codes / sizeof in_flight_codes[0]);
	if (o != NULL && f->overload == NULL)
		f->overload = o;
	if (t != NULL && f->tier == NULL)
		f->tier = t;
	if (i != NULL && f->in_flight == NULL)
		f->in_flight = i;
}

/* OpenAI's "Request too large for gpt-4 in organization ...": Requested >
 * Limit, so the request can never pass. */
static bool is_too_large(const char *msg)
{
	if (msg == NULL)
		return false;
	while (*msg == ' ' || *msg == '\t' || *msg == '\n')
		msg++;
	return ci_at(msg, strlen(msg), "request too large");
}

/* ---------- which budget, from words ---------- */

/* A count written with or without thousands separators ("50,000", "30000"),
 * digits at s[0..len): -1 when there are none or too many. */
static int64_t count_at(const char *s, size_t len)
{
	int64_t v = 0;
	int digits = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == ',')
			continue;
		if (!is_digit((unsigned char)s[i]) || ++digits > 15)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return digits > 0 ? v : -1;
}

/* The window a word after "per " names, in seconds; 0 for none. */
static int64_t window_word(const char *s, size_t len)
{
	if (ci_at(s, len, "sec"))
		return 1;
	if (ci_at(s, len, "min"))
		return 60;
	if (ci_at(s, len, "hour"))
		return 3600;
	if (ci_at(s, len, "day"))
		return 86400;
	return 0;
}

/* The number written right before s[at] ("of 50,000 input tokens"), or -1. */
static int64_t count_before(const char *s, size_t at)
{
	if (at < 2 || s[at - 1] != ' ')
		return -1;
	size_t end = at - 1, start = end;
	while (start > 0 && (is_digit((unsigned char)s[start - 1]) || s[start - 1] == ','))
		start--;
	return count_at(s + start, end - start);
}

/* "Limit N" (OpenAI, Groq: "…(TPM): Limit 30000, Used 29937"), or -1. */
static int64_t limit_word(const char *s, size_t len)
{
	for (size_t i = 0; i + 6 < len; i++) {
		if (lower((unsigned char)s[i]) != 'l' || !ci_at(s + i, len - i, "limit "))
			continue;
		size_t j = i + 6, k = j;
		while (k < len && (is_digit((unsigned char)s[k]) || s[k] == ','))
			k++;
		int64_t v = count_at(s + j, k - j);
		if (v >= 0)
			return v;
	}
	return -1;
}

/* Which budget a message names, its window and its size: "on tokens per min
 * (TPM): Limit 30000" (OpenAI, Groq), "on requests per day (RPD): Limit 200",
 * "of 50,000 input tokens per minute" (Anthropic). The first phrase wins;
 * " per " is looked for as the providers write it, in lower case. */
static void budget_from_text(const char *s, size_t len, struct error_hints *h)
{
	const char *end = s + len;
	for (const char *p = s; (p = memmem(p, (size_t)(end - p), " per ", 5)) != NULL; p += 5) {
		size_t at = (size_t)(p - s), start;
		enum rlh_budget_kind kind;
		if (at >= 6 && ci_at(p - 6, 6, "tokens")) {
			kind = RLH_TOKENS;
			start = at - 6;
		} else if (at >= 8 && ci_at(p - 8, 8, "requests")) {
			kind = RLH_REQUESTS;
			start = at - 8;
		} else {
			continue;
		}
		if (kind == RLH_TOKENS && start >= 6 && ci_at(s + start - 6, 6, "input ")) {
			kind = RLH_INPUT_TOKENS;
			start -= 6;
		} else if (kind == RLH_TOKENS && start >= 7 && ci_at(s + start - 7, 7, "output ")) {
			kind = RLH_OUTPUT_TOKENS;
			start -= 7;
		}
		h->budget = kind;
		h->window_s = window_word(p + 5, (size_t)(end - p) - 5);
		int64_t limit = count_before(s, start);
		if (limit < 0)
			limit = limit_word(p, (size_t)(end - p));
		if (limit >= 0) {
			h->has_limit = true;
			h->limit = limit;
		}
		return;
	}
}

/* A Gemini quotaId ("GenerateContentInputTokensPerModelPerMinute-FreeTier",
 * "GenerateRequestsPerDayPerProjectPerModel"): which budget, which window. */
static void budget_from_quota_id(const char *q, struct error_hints *h)
{
	if (strstr(q, "InputTokens") != NULL)
		h->budget = RLH_INPUT_TOKENS;
	else if (strstr(q, "OutputTokens") != NULL)
		h->budget = RLH_OUTPUT_TOKENS;
	else if (strstr(q, "Tokens") != NULL)
		h->budget = RLH_TOKENS;
	else if (strstr(q, "Requests") != NULL)
		h->budget = RLH_REQUESTS;
	if (strstr(q, "PerDay") != NULL)
		h->window_s = 86400;
	else if (strstr(q, "PerHour") != NULL)
		h->window_s = 3600;
	else if (strstr(q, "PerMinute") != NULL)
		h->window_s = 60;
	else if (strstr(q, "PerSecond") != NULL)
		h->window_s = 1;
}

/* Gemini's quotaValue: an int64 that protobuf's JSON writes as a string. */
static void limit_from_quota_value(const json_t *v, struct error_hints *h)
{
	int64_t n = -1;
	if (json_is_integer(v))
		n = json_integer_value(v);
	else if (json_is_string(v))
		n = count_at(json_string_value(v), json_string_length(v));
	if (n >= 0) {
		h->has_limit = true;
		h->limit = n;
	}
}

/* ---------- one element ---------- */

/* google.rpc details: RetryInfo.retryDelay (the first wins) and QuotaFailure
 * violations (any PerDay one is a daily cap; the first one names the budget). */
static void gemini_details(const json_t *details, struct error_body *b, struct scan *sc)
{
	size_t i, j;
	json_t *d, *v;
	json_array_foreach(details, i, d)
	{
		const char *delay = json_string_value(json_object_get(d, "retryDelay"));
		int64_t ns;
		if (delay != NULL && !sc->has_retry_info &&
		    rlh_parse_go_duration(delay, strlen(delay), &ns) == 0 && ns >= 0) {
			sc->has_retry_info = true;
			b->hints.has_delay = true;
			b->hints.delay_ms = ns / 1000000 + (ns % 1000000 != 0);
		}
		json_array_foreach(json_object_get(d, "violations"), j, v)
		{
			const char *q = json_string_value(json_object_get(v, "quotaId"));
			if (q == NULL)
				continue;
			if (strstr(q, "PerDay") != NULL)
				b->facts.daily_cap = true;
			if (b->hints.budget == RLH_N_BUDGETS) {
				budget_from_quota_id(q, &b->hints);
				limit_from_quota_value(json_object_get(v, "quotaValue"), &b->hints);
			}
		}
	}
}

/* One element of the body: {"error":{...}}, {"error":"text"}, or the error
 * object itself. */
static void read_element(const json_t *obj, struct error_body *b, struct scan *sc)
{
	const json_t *err = json_object_get(obj, "error");
	const char *msg;
	if (json_is_string(err)) {
		msg = json_string_value(err);
		note_code(&b->facts, msg);
	} else {
		if (json_is_object(err))
			obj = err;
		note_code(&b->facts, json_string_value(json_object_get(obj, "code")));
		note_code(&b->facts, json_string_value(json_object_get(obj, "type")));
		note_code(&b->facts, json_string_value(json_object_get(obj, "status")));
		const json_t *details = json_object_get(obj, "details");
		if (json_is_object(details))
			note_code(&b->facts,
			          json_string_value(json_object_get(details, "error_code")));
		/* OpenRouter: error.metadata.reason tells its two 402s apart. */
		note_code(&b->facts, json_string_value(json_object_get(
		                         json_object_get(obj, "metadata"), "reason")));
		msg = json_string_value(json_object_get(obj, "message"));
	}
	b->facts.too_large |= is_too_large(msg);
	gemini_details(json_object_get(obj, "details"), b, sc);
	if (msg == NULL)
		return;
	size_t n = strlen(msg);
	if (!sc->has_msg_delay && rlh_text_hint(msg, n, &sc->msg_delay_ms) == 0)
		sc->has_msg_delay = true;
	if (b->hints.budget == RLH_N_BUDGETS)
		budget_from_text(msg, n, &b->hints);
}

void error_body_parse(const char *body, size_t len, struct error_body *out)
{
	struct scan sc = {0};
	memset(out, 0, sizeof *out);
	out->hints.budget = RLH_N_BUDGETS;
	if (body == NULL || len == 0 || len > ERROR_BODY_CAP)
		return;
	json_t *root = json_loadb(body, len, JSON_DECODE_ANY, NULL);
	if (root == NULL) { /* prose: a delay and a budget in words, no facts */
		if (rlh_text_hint(body, len, &out->hints.delay_ms) == 0)
			out->hints.has_delay = true;
		budget_from_text(body, len, &out->hints);
		return;
	}
	if (json_is_array(root)) {
		size_t i;
		json_t *el;
		json_array_foreach(root, i, el)
		{
			if (json_is_object(el))
				read_element(el, out, &sc);
		}
	} else if (json_is_object(root)) {
		read_element(root, out, &sc);
	}
	json_decref(root);
	if (!sc.has_retry_info && sc.has_msg_delay) {
		out->hints.has_delay = true;
		out->hints.delay_ms = sc.msg_delay_ms;
	}
}
