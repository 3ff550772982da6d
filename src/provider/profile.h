/* SPDX-License-Identifier: Apache-2.0 */
/* profile — what each provider pacerd knows by name IS: one row per built-in
 * provider (PROVIDERS.md), read by every layer instead of a string table of
 * its own.
 *
 * A row holds: the configuration's starting values (struct config_builtin:
 * upstream, prefix, forward-proxy host, key header, rate-limit header
 * dialect, whether cached input counts), handed to core/config with
 * profile_install() because core cannot include provider (DESIGN §8); where
 * else a request's key may travel; the headers by which a request, and an
 * answer, name the identity a budget belongs to (PROVIDERS.md §10); which
 * rewrites of a request the provider accepts; the models that share one
 * budget.
 *
 * A provider whose name has no row (a providers: entry of the user's own) gets
 * the generic profile: every place a key travels, every identity header
 * pacerd knows, the rewrites, no model groups. What the others differ in is
 * kept elsewhere in this folder, each in one table: rate-limit header
 * dialects (ratelimit_headers.c, chosen by the provider's dialect), error
 * bodies (error_body.c), the model in a path (model.c), usage fields
 * (tokens.c, which reads every API's shape whatever the provider).
 *
 * Pure data and lookups: no I/O. */
#ifndef PACERD_PROFILE_H
#define PACERD_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"

/* A header naming the identity whose budget a request or answer bills, and
 * the kind of identity it is (lanes_identity's kind: "project", "workspace",
 * "org"). */
struct profile_identity {
	const char *header; /* lower case */
	const char *kind;
};

/* How a provider counts a request's max_tokens against its output budget
 * (PROVIDERS.md §10, §11): reserved in full when the request arrives (OpenAI's
 * TPM), or only what the answer produces (Anthropic's OTPM). The starting
 * point: the lanes learn the truth from the provider's remaining counters
 * (sched/cost.h). */
enum output_charge { OUTPUT_RESERVED, OUTPUT_PRODUCED };

struct provider_profile {
	struct config_builtin conf; /* first (profile_of); conf.name NULL: the generic profile */
	/* Where else the key may travel, tried in this order after the provider's
	 * key_header (an Anthropic SDK given an auth token sends Authorization:
	 * Bearer; a Gemini client may use ?key=), so that a request with a key
	 * never lands in the anonymous lane. */
	const enum key_source *key_fallbacks;
	size_t n_key_fallbacks;
	/* The identity a request names for itself (a key may bill several
	 * projects or organizations, each with its own budget), and the one an
	 * answer names (whose budget it billed): the first header present, in
	 * this order, narrowest first. */
	const struct profile_identity *request_identity;
	size_t n_request_identity;
	const struct profile_identity *answer_identity;
	size_t n_answer_identity;
	/* Rewrites of a request the provider accepts: may pacerd add
	 * stream_options.include_usage to a streamed chat completion to meter it
	 * (usage_inject_request)? A strict upstream refuses members it does not
	 * know (PROVIDERS.md §11). */
	bool add_stream_usage;
	/* How it counts max_tokens: OUTPUT_RESERVED (0) unless documented. */
	enum output_charge output_charge;
	/* Models whose cache reads count toward the input-token limit although
	 * the provider's do not (cached_input free): fnmatch(3) patterns matched
	 * against a lane's model (its group's name, else its own). */
	const char *const *cache_reads_counted;
	size_t n_cache_reads_counted;
	/* Models that share one budget (model.h): only where the provider
	 * documents the sharing. Their literal, prefix and exact are filled at
	 * profile_install(). */
	struct model_rule *model_groups;
	size_t n_model_groups;
};

/* Hands the built-in rows to config_load (config_set_builtins) and works out
 * the model rows' specificity. Called once before the first config_load:
 * main() and every test's main. */
void profile_install(void);

/* The profile of p: its built-in row (p->builtin, set by config_load), else
 * the generic profile. Never NULL; O(1). */
const struct provider_profile *profile_of(const struct provider_conf *p);

/* The built-in row named `name`, or NULL. */
const struct provider_profile *profile_find(const char *name);

/* The built-in rows, for tests and docs: *n set to their count. */
const struct provider_profile *profile_builtins(size_t *n);

/* Whether cache reads of a prompt are free of p's input-token limit for
 * `model` (a lane's model, NUL-terminated; NULL: none): p's cached_input is
 * free and the model matches none of its profile's cache_reads_counted. */
bool profile_cache_reads_free(const struct provider_conf *p, const char *model);

/* ---- what a request is for ---- */

/* Side endpoints are not generation (issue 28 item 6): each kind has a lane
 * of its own per scope (beside the model lanes) and charges no token budget;
 * its answers are not metered. */
enum endpoint_kind {
	ENDPOINT_GENERATION,
	ENDPOINT_COUNT_TOKENS, /* Anthropic messages/count_tokens, OpenAI responses/input_tokens,
	                        * Gemini models/NAME:countTokens */
	ENDPOINT_MODELS,       /* GET …/models, GET …/models/NAME: listings */
	ENDPOINT_FILES,        /* …/files, …/uploads, …/batches (any method): uploads and
	                        * batch jobs, bodies pacerd does not read */
};

/* The kind of a request to path (len bytes, a query allowed) with method;
 * every provider, as gateways speak each other's paths. */
enum endpoint_kind profile_endpoint(const char *method, const char *path, size_t len);
/* The name of a side kind's lane (its model dimension in /status and logs:
 * ":count_tokens", ":models", ":files", which no model name starts with);
 * NULL for generation. */
const char *profile_endpoint_lane(enum endpoint_kind k);
/* Whether the body of a request of kind k with method is streamed upstream as
 * it arrives instead of being read whole first (issue 28 item 6): an upload,
 * which pacerd never parses, so neither limits.max_body_bytes nor a token
 * charge applies to it (limits.max_upload_bytes does). */
bool profile_endpoint_streams(enum endpoint_kind k, const char *method);

/* ---- the key ---- */

/* The request header that carries the key for src, or NULL for
 * KEY_QUERY_KEY. */
const char *profile_key_header(enum key_source src);

/* Finds the API key in a header value (key_source other than KEY_QUERY_KEY):
 * "Bearer <key>" for authorization (the scheme case-insensitive, RFC 9110
 * §11.1), the bare value otherwise; spaces and tabs around it dropped. Sets
 * *key and *len; false when there is no usable key. */
bool profile_key_from_header(enum key_source src, const char *value, const char **key, size_t *len);

/* Finds the raw value of the `key` parameter in a query string ("a=1&key=xyz":
 * Gemini's ?key=). The value is hashed as it appears (percent-encoding
 * included). */
bool profile_key_from_query(const char *query, size_t qlen, const char **key, size_t *len);

#endif
