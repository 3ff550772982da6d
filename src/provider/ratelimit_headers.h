/* SPDX-License-Identifier: Apache-2.0 */
/* ratelimit_headers — what an upstream response says about its rate limits
 * (DESIGN §4, PROVIDERS.md §1-§7): header dialects, Go durations, RFC 3339 and
 * HTTP dates, IETF RateLimit fields, and delays written in prose (error
 * bodies themselves are error_body's).
 *
 * Pure: no I/O, no clock. Time comes in as now_ms (Unix epoch, milliseconds) and
 * every instant a provider sends is turned into a delay relative to it.
 * Malformed values are ignored (their flag stays unset); nothing here aborts. */
#ifndef PACERD_RATELIMIT_HEADERS_H
#define PACERD_RATELIMIT_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

/* One response header: name NUL-terminated, compared case-insensitively;
 * value is value_len bytes, not necessarily NUL-terminated. */
struct rlh_header {
	const char *name;
	const char *value;
	size_t value_len;
};

enum rlh_budget_kind {
	RLH_REQUESTS,       /* also Cerebras requests-day, Mistral req-minute */
	RLH_TOKENS,         /* combined tokens (OpenAI, Anthropic, Together, Mistral, Cerebras) */
	RLH_INPUT_TOKENS,   /* Anthropic input-tokens, Fireworks tokens-prompt */
	RLH_OUTPUT_TOKENS,  /* Anthropic output-tokens, Fireworks tokens-generated */
	RLH_PROJECT_TOKENS, /* OpenAI project-tokens: the project's own token limit,
	                     * beside the model's (PROVIDERS.md §11) */
	RLH_N_BUDGETS
};

/* One budget as observed in one response. reset_ms is relative to now_ms and
 * never negative (an instant in the past is 0).
 *
 * reset_coarse: the reset came as a whole number of seconds (Azure, Together,
 * IETF delta-seconds), so it is a bound, not an instant: the budget is full
 * again by reset_ms, and may be up to a second sooner (Azure's "1" covers
 * anything from 1 ms to 1 s). window_ms: the window the header's name states
 * for the limit (Mistral and Cerebras "-minute", Cerebras "-day"); 0 when the
 * name states none (never assume one: Groq's request headers are per day). */
struct rlh_budget {
	bool has_limit, has_remaining, has_reset;
	bool reset_coarse;
	int64_t limit;
	int64_t remaining;
	int64_t reset_ms;
	int64_t window_ms;
	/* Which source set each field (higher wins): private to rlh_parse. */
	uint8_t prio_limit, prio_remaining, prio_reset;
};

struct rlh_result {
	struct rlh_budget budget[RLH_N_BUDGETS];
	/* Strongest explicit retry hint: retry-after-ms, then x-ms-retry-after-ms,
	 * then retry-after (delta seconds, decimal, or HTTP-date). */
	bool has_hint;
	int64_t hint_ms;
	/* x-should-retry: true / false (OpenAI, Anthropic). */
	bool has_should_retry;
	bool should_retry;
	/* Fireworks x-ratelimit-over-limit: yes */
	bool over_limit;
};

/* Parses `n` headers per `dialect` into *out (always fully initialised).
 * DIALECT_OPENAI also knows OpenAI's project-tokens and the Groq, Mistral,
 * Together, OpenRouter, Fireworks and Cerebras names; DIALECT_AZURE knows the OpenAI names plus
 * Azure's hyphenated x-rate-limit-reset-tokens; every dialect but NONE knows the IETF fields; retry
 * hints and x-should-retry are read in every dialect, NONE included (they steer retries, not
 * learning). A provider-specific header wins over an IETF field for the same value whatever their
 * order; among repeats of one header the last wins, except RateLimit and RateLimit-Policy, of which
 * the first line is read (providers send one). */
void rlh_parse(enum dialect dialect, const struct rlh_header *h, size_t n, int64_t now_ms,
               struct rlh_result *out);

/* The reset delay to wait for when some budget reports remaining 0 and a reset
 * (the largest such reset): the fourth server hint of DESIGN §3. Returns true
 * and sets *ms when there is one. */
bool rlh_exhausted_reset(const struct rlh_result *r, int64_t *ms);

/* ---- standalone value parsers (each accepts surrounding spaces/tabs) ---- */

/* Decimal number: [+-] digits [. digits] or [+-] . digits; no exponent, no
 * hex, no inf/nan, independent of the locale. Returns 0 / -1. */
int rlh_parse_decimal(const char *s, size_t len, double *out);

/* Go time.Duration text (PROVIDERS.md §1): "0", or [+-] (number unit)+ with
 * units ns, us, µs (U+00B5), μs (U+03BC), ms, s, m, h and fractions ("1.5h",
 * ".5s", "1.s"). Result in nanoseconds; -1 on syntax error or overflow. */
int rlh_parse_go_duration(const char *s, size_t len, int64_t *ns);

/* Longest prefix of s that is a Go duration (for hints inside prose, "644ms."):
 * returns the bytes consumed (0: none) and sets *ns. */
size_t rlh_go_duration_prefix(const char *s, size_t len, int64_t *ns);

/* RFC 3339 date-time: YYYY-MM-DD(T|t| )hh:mm:ss[.frac](Z|z|+hh:mm|-hh:mm).
 * Fractions are truncated to milliseconds. Sets *epoch_ms; returns 0 / -1. */
int rlh_parse_rfc3339(const char *s, size_t len, int64_t *epoch_ms);

/* HTTP-date (RFC 9110 §5.6.7), read by libcurl's curl_getdate(): IMF-fixdate
 * "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT"
 * (yy <= 70 is 20yy), asctime "Sun Nov  6 08:49:37 1994", and what curl takes
 * beside them (another zone than GMT, no time of day: midnight; a day past its
 * month's end counts on into the next). Sets *epoch_ms; returns 0 / -1. */
int rlh_parse_http_date(const char *s, size_t len, int64_t *epoch_ms);

/* A bare number of unknown meaning (promptfoo's rule): < 1e9 relative seconds,
 * < 1e10 epoch seconds, else epoch milliseconds. Negative (Azure's -1) means
 * unknown: returns -1. Otherwise sets *rel_ms (>= 0) and returns 0. */
int rlh_guess_number_ms(double v, int64_t now_ms, int64_t *rel_ms);

/* Any reset value: Go duration, RFC 3339 instant, HTTP-date, or a bare number
 * (rlh_guess_number_ms). Sets *rel_ms (>= 0, rounded up); returns 0 / -1. */
int rlh_parse_reset(const char *s, size_t len, int64_t now_ms, int64_t *rel_ms);

/* Retry-After: delay-seconds, a decimal number of seconds, or an HTTP-date.
 * Sets *rel_ms (>= 0, rounded up); returns 0 / -1. */
int rlh_parse_retry_after(const char *s, size_t len, int64_t now_ms, int64_t *rel_ms);

/* ---- IETF RateLimit fields (PROVIDERS.md §7) ---- */

#define RLH_IETF_MAX_ITEMS 8

enum rlh_ietf_unit { RLH_UNIT_REQUESTS, RLH_UNIT_TOKENS, RLH_UNIT_OTHER };

struct rlh_ietf_item {
	char name[32]; /* policy name, truncated; "" for the draft-07 form */
	bool has_q, has_w, has_r, has_t;
	int64_t q, w, r, t;      /* quota, window s, remaining, seconds until reset */
	enum rlh_ietf_unit unit; /* qu; requests when absent */
};

/* Parses one RateLimit or RateLimit-Policy field value: the draft-10
 * structured list ("name";r=50;t=30, ...; params q w r t qu) or the draft-07
 * dictionary (limit=100, remaining=50, reset=5 → one unnamed item with q, r, t).
 * Fills up to `max` items and returns how many; items with a malformed
 * parameter are dropped, and a malformed list yields the items before it. */
size_t rlh_parse_ietf(const char *s, size_t len, struct rlh_ietf_item *items, size_t max);

/* ---- delays in prose (error_body reads bodies with it) ---- */

/* Finds a delay in prose, case-insensitive: "try again in <Go duration>"
 * (OpenAI), "retry in <duration>" (Gemini), "retry after N seconds" / "try
 * again in N seconds" (Azure); N in ms, s, min or h words. 0 / -1. */
int rlh_text_hint(const char *s, size_t len, int64_t *ms);

/* The server's hint in DESIGN §3 order of strength: the header hint
 * (retry-after-ms, x-ms-retry-after-ms, retry-after) when there is one; else
 * the reset of an exhausted budget (rlh_exhausted_reset) or the body's delay
 * (error_body.h's hints, b->has_delay),
 * the smaller of the two when both are there (a reset is the time until the
 * budget is full again, the body says when this request fits). Either
 * argument may be NULL. Returns true and sets *ms when there is a hint. */
struct error_hints; /* provider/error_body.h */
bool rlh_server_hint(const struct rlh_result *r, const struct error_hints *b, int64_t *ms);

#endif
