/* SPDX-License-Identifier: Apache-2.0 */
/* error_body — what an upstream error body says, read with one jansson parse
 * (PROVIDERS.md §2-§6, §11; DESIGN §3).
 *
 * Every provider's error codes live here and nowhere else: the retry verdict
 * (sched/retry.c) decides from the facts below and names no provider's
 * strings. One parse yields both the facts that steer a retry and the hints
 * that say when to come back and which budget refused.
 *
 * Shapes read (each element of a JSON array the same way: Gemini's
 * OpenAI-compatible endpoint answers [{"error":{...}}]):
 *   OpenAI, Groq, Mistral, Together, OpenRouter, Azure:
 *     {"error":{"message","type","code",...}}, code a string or a number
 *   OpenRouter: {"error":{"code":402,"message","metadata":{"reason"}}}
 *   Anthropic: {"type":"error","error":{"type","message","details":{"error_code"}}}
 *   Gemini:    {"error":{"code":429,"status","message","details":[
 *                {"@type":"…QuotaFailure","violations":[{"quotaId","quotaValue"}]},
 *                {"@type":"…RetryInfo","retryDelay":"47s"}]}}
 *   {"error":"text"}: the text is both the code and the message.
 * Any other text is prose: only the hints are looked for.
 *
 * Pure: no I/O, no clock. Malformed input is ignored, never fatal. */
#ifndef PACERD_ERROR_BODY_H
#define PACERD_ERROR_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider/ratelimit_headers.h"

/* Largest body looked at (DESIGN §3: an error body is read whole, cap 64 KiB);
 * a longer one reads as empty. */
#define ERROR_BODY_CAP (64 * 1024)

/* The facts a retry decision needs. The codes are static strings of this
 * module (the code as the provider wrote it), for logs and metrics. */
struct error_facts {
	/* The account cannot pay: insufficient_quota (in code or type), a credit
	 * balance, a spend or usage limit, Anthropic's enforced spend limit.
	 * Waiting does not help. NULL: none said. */
	const char *money;
	/* The provider is overloaded or rate limiting: Gemini RESOURCE_EXHAUSTED,
	 * OpenAI slow_down and server_is_overloaded, Anthropic rate_limit_error
	 * and overloaded_error. NULL: none said. */
	const char *capacity;
	/* The request alone is over the budget (OpenAI "Request too large for
	 * …"): it can never pass. */
	bool too_large;
	/* A refused quota is a daily one (Gemini: a violation's quotaId contains
	 * "PerDay"): read from structured fields only. */
	bool daily_cap;
	/* Whose shortage a refusal names, when it is not the account's budget
	 * (the taxonomy of refusals, docs/pacing.md). NULL: none said.
	 * in_flight: OpenRouter's transient 402 (error.metadata.reason
	 *   in_flight_budget_exhausted): what the key has in flight costs more
	 *   than its balance covers; it passes once those end (Retry-After).
	 * overload: the provider as a whole is short (Anthropic
	 *   overloaded_error): a hold and a retry, not a cut of the account's pace.
	 * tier: one service tier is short (OpenAI flex resource_unavailable,
	 *   Groq 498 capacity_exceeded): only that tier's requests wait. */
	const char *in_flight;
	const char *overload;
	const char *tier;
};

/* What the refusal says of the budget it refused. */
struct error_hints {
	/* When to try again: Gemini RetryInfo.retryDelay, which wins; else the
	 * first message (or prose body) with "try again in <Go duration>"
	 * (OpenAI), "retry in <duration>" (Gemini), "retry after N seconds" /
	 * "try again in N seconds" (Azure): rlh_text_hint. */
	bool has_delay;
	int64_t delay_ms;
	/* The refused budget's size: Gemini quotaValue, OpenAI and Groq "Limit
	 * N", Anthropic "of N input tokens per minute". */
	bool has_limit;
	int64_t limit;
	/* Which budget: Gemini's quotaId (Requests, InputTokens, OutputTokens,
	 * Tokens), the message's "requests per …", "input tokens per …", "output
	 * tokens per …", "tokens per …"; RLH_N_BUDGETS when not said. */
	enum rlh_budget_kind budget;
	/* Its window in seconds (per second / minute / hour / day, also Gemini's
	 * PerMinute, PerDay in quotaId); 0 when not said. */
	int64_t window_s;
};

struct error_body {
	struct error_facts facts;
	struct error_hints hints;
};

/* Parses body/len once into *out (always initialised: no facts, no hints,
 * budget RLH_N_BUDGETS). NULL / 0, or a body over ERROR_BODY_CAP, gives an
 * empty one. Of repeated facts the first found wins: the elements of an
 * array in order, and in each "code", then "type", then "status", then
 * details.error_code; of hints, the first element that says one. */
void error_body_parse(const char *body, size_t len, struct error_body *out);

#endif
