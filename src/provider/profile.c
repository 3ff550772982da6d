/* SPDX-License-Identifier: Apache-2.0 */
/* profile — see profile.h. */
#include "provider/profile.h"

#include <fnmatch.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Every place a key travels, in the order intake tries them after the
 * provider's own key_header. Every provider takes them all: a key found in
 * the "wrong" header is still the client's key (issue 27 keeps it so). */
static const enum key_source key_anywhere[] = {
    KEY_AUTHORIZATION, KEY_X_API_KEY, KEY_API_KEY, KEY_X_GOOG_API_KEY, KEY_QUERY_KEY,
};

/* OpenAI's request headers naming a project or an organization: the SDKs send
 * them when told to (OPENAI_PROJECT_ID, OPENAI_ORG_ID). Every profile reads
 * them, as pacerd always has: an OpenAI SDK pointed at another provider's
 * compatible endpoint still sends them. */
static const struct profile_identity request_openai[] = {
    {"openai-project", "project"},
    {"openai-organization", "org"},
};

/* What answers name (PROVIDERS.md §10): OpenAI's openai-project (else
 * openai-organization), Anthropic's anthropic-workspace-id (else
 * anthropic-organization-id). Every profile reads every one of them, as
 * pacerd always has: a compatible gateway in front of either relays them.
 * Narrowing a row to its own provider's names is the provider-fidelity
 * issue's to decide. */
static const struct profile_identity answer_known[] = {
    {"openai-project", "project"},
    {"anthropic-workspace-id", "workspace"},
    {"openai-organization", "org"},
    {"anthropic-organization-id", "org"},
};

/* Anthropic (docs.anthropic.com/en/api/rate-limits, read 2025-11: "rate
 * limits are applied per model class"; the Opus 4.x limit "is a total limit
 * that applies to combined traffic across" Opus 4, 4.1 and 4.5, and the
 * Sonnet 4.x one likewise across Sonnet 4 and 4.5): one group per class.
 * The classes of older models (Haiku 4.5, Sonnet 3.7, Haiku 3.5, Haiku 3,
 * Opus 3) are rows of the same table; that a dated snapshot and its alias
 * (claude-3-7-sonnet-20250219, claude-3-7-sonnet-latest) are one class is our
 * reading of the table, an assumption.
 *
 * No built-in rows elsewhere: OpenAI says "some model families share rate
 * limits" without a list (each answer's x-ratelimit-* headers describe the
 * budget of the model that answered); Gemini keeps quotas per model
 * (…PerProjectPerModel… quota ids); Groq limits per model; an Azure
 * deployment is its own model. A user who knows better writes model_groups. */
static struct model_rule anthropic_groups[] = {
    {.pattern = (char *)"claude-opus-4*", .value = (char *)"claude-opus-4"},
    {.pattern = (char *)"claude-sonnet-4*", .value = (char *)"claude-sonnet-4"},
    {.pattern = (char *)"claude-haiku-4-5*", .value = (char *)"claude-haiku-4-5"},
    {.pattern = (char *)"claude-3-7-sonnet*", .value = (char *)"claude-3-7-sonnet"},
    {.pattern = (char *)"claude-3-5-haiku*", .value = (char *)"claude-3-5-haiku"},
    {.pattern = (char *)"claude-3-haiku*", .value = (char *)"claude-3-haiku"},
    {.pattern = (char *)"claude-3-opus*", .value = (char *)"claude-3-opus"},
};

/* Anthropic counts cache reads toward input tokens per minute on Claude Haiku 3
 * and 3.5 only (marked † on its rate-limits page; PROVIDERS.md §11): their
 * lanes charge a cached prompt in full. The patterns match the groups of
 * anthropic_groups and the models' own names. */
static const char *const anthropic_reads_counted[] = {"claude-3-haiku*", "claude-3-5-haiku*"};

/* What every row shares today: keys anywhere, the known identity headers. */
#define COMMON                                                                                     \
	.key_fallbacks = key_anywhere, .n_key_fallbacks = COUNT(key_anywhere),                     \
	.request_identity = request_openai, .n_request_identity = COUNT(request_openai),           \
	.answer_identity = answer_known, .n_answer_identity = COUNT(answer_known)

/* The built-in providers, in the order they are activated without a
 * providers: section. cached_input: cache reads do not count toward the
 * input-token limits at Anthropic and Groq (PROVIDERS.md §10), but on the
 * models of cache_reads_counted (Anthropic's Haiku 3 and 3.5, §11).
 *
 * output_charge: Anthropic's OTPM counts output as it is produced (its
 * rate-limits page: max_tokens does not factor into OTPM); OpenAI's TPM counts
 * max_tokens when the request arrives, and the others are taken to do the same
 * until their remaining counters say otherwise (PROVIDERS.md §10, §11).
 *
 * add_stream_usage is false where asking is useless or
 * harmful: Mistral refused stream_options with 422 extra_forbidden in
 * 2024-2025 (avante.nvim#2347, openai-agents-python#442; PROVIDERS.md §11)
 * and sends usage in its last chunk anyway; OpenRouter always sends usage at
 * the end of a stream (OpenRouterTeam docs, api_reference/limits). Where it
 * stays true, an upstream that refuses the rewritten body still gets the
 * client's own bytes (proxy/rewrites.h). */
static struct provider_profile builtins[] = {
    {.conf = {"openai", "https://api.openai.com", "/", "api.openai.com", KEY_AUTHORIZATION,
              DIALECT_OPENAI, CACHED_INPUT_CHARGED},
     COMMON,
     .add_stream_usage = true},
    {.conf = {"anthropic", "https://api.anthropic.com", "/anthropic", "api.anthropic.com",
              KEY_X_API_KEY, DIALECT_ANTHROPIC, CACHED_INPUT_FREE},
     COMMON,
     .add_stream_usage = true,
     .output_charge = OUTPUT_PRODUCED,
     .cache_reads_counted = anthropic_reads_counted,
     .n_cache_reads_counted = COUNT(anthropic_reads_counted),
     .model_groups = anthropic_groups,
     .n_model_groups = COUNT(anthropic_groups)},
    /* No upstream: every Azure resource has its own host. */
    {.conf = {"azure", NULL, "/azure", NULL, KEY_API_KEY, DIALECT_AZURE, CACHED_INPUT_CHARGED},
     COMMON,
     .add_stream_usage = true},
    /* No rate-limit headers (PROVIDERS.md §5): error bodies say it all. */
    {.conf = {"gemini", "https://generativelanguage.googleapis.com", "/gemini",
              "generativelanguage.googleapis.com", KEY_X_GOOG_API_KEY, DIALECT_NONE,
              CACHED_INPUT_CHARGED},
     COMMON,
     .add_stream_usage = true},
    {.conf = {"openrouter", "https://openrouter.ai/api", "/openrouter", "openrouter.ai",
              KEY_AUTHORIZATION, DIALECT_OPENAI, CACHED_INPUT_CHARGED},
     COMMON,
     .add_stream_usage = false},
    {.conf = {"groq", "https://api.groq.com/openai", "/groq", "api.groq.com", KEY_AUTHORIZATION,
              DIALECT_OPENAI, CACHED_INPUT_FREE},
     COMMON,
     .add_stream_usage = true},
    {.conf = {"mistral", "https://api.mistral.ai", "/mistral", "api.mistral.ai", KEY_AUTHORIZATION,
              DIALECT_OPENAI, CACHED_INPUT_CHARGED},
     COMMON,
     .add_stream_usage = false},
    {.conf = {"together", "https://api.together.xyz", "/together", "api.together.xyz",
              KEY_AUTHORIZATION, DIALECT_OPENAI, CACHED_INPUT_CHARGED},
     COMMON,
     .add_stream_usage = true},
};

/* The rows as core/config reads them (config_set_builtins). */
static const struct config_builtin *const builtin_confs[] = {
    &builtins[0].conf, &builtins[1].conf, &builtins[2].conf, &builtins[3].conf,
    &builtins[4].conf, &builtins[5].conf, &builtins[6].conf, &builtins[7].conf,
};
_Static_assert(COUNT(builtin_confs) == COUNT(builtins), "one config row per profile");
_Static_assert(offsetof(struct provider_profile, conf) == 0, "profile_of reads conf as the row");

/* A provider of the user's own: what pacerd does for any provider. */
static const struct provider_profile generic = {COMMON, .add_stream_usage = true};

void profile_install(void)
{
	char msg[64];
	/* The rows' specificity (the patterns are valid: the unit test checks
	 * them through config_model_pattern as well). */
	for (size_t i = 0; i < COUNT(builtins); i++)
		for (size_t j = 0; j < builtins[i].n_model_groups; j++)
			config_model_pattern(builtins[i].model_groups[j].pattern,
			                     &builtins[i].model_groups[j], msg, sizeof(msg));
	config_set_builtins(builtin_confs, COUNT(builtin_confs));
}

const struct provider_profile *profile_of(const struct provider_conf *p)
{
	if (p == NULL || p->builtin == NULL)
		return &generic;
	/* Only profile_install feeds config_load its rows: p->builtin is the
	 * first member (conf) of one of builtins[]. */
	return (const struct provider_profile *)(const void *)p->builtin;
}

const struct provider_profile *profile_find(const char *name)
{
	for (size_t i = 0; name != NULL && i < COUNT(builtins); i++)
		if (strcmp(builtins[i].conf.name, name) == 0)
			return &builtins[i];
	return NULL;
}

const struct provider_profile *profile_builtins(size_t *n)
{
	*n = COUNT(builtins);
	return builtins;
}

bool profile_cache_reads_free(const struct provider_conf *p, const char *model)
{
	if (p == NULL || p->cached_input != CACHED_INPUT_FREE)
		return false;
	const struct provider_profile *pf = profile_of(p);
	for (size_t i = 0; model != NULL && i < pf->n_cache_reads_counted; i++)
		if (fnmatch(pf->cache_reads_counted[i], model, 0) == 0)
			return false;
	return true;
}

/* ---------- what a request is for ---------- */

/* Paths that end a count of tokens (PROVIDERS.md §11: Anthropic's
 * /v1/messages/count_tokens has its own RPM and counts against nothing
 * else; OpenAI's /v1/responses/input_tokens; Gemini's :countTokens). */
static const char *const count_tokens_ends[] = {
    "/messages/count_tokens",
    "/responses/input_tokens",
    ":countTokens",
};

/* A path segment that names uploads or batch jobs: OpenAI's /v1/files,
 * /v1/uploads/…/parts, /v1/batches, vector stores' …/files; Anthropic's
 * /v1/files and /v1/messages/batches; Gemini's /upload/v1beta/files; Azure's
 * /openai/files and /openai/batches. */
static const char *const files_segments[] = {"files", "uploads", "batches"};

static bool ends_with(const char *p, size_t n, const char *end)
{
	size_t e = strlen(end);
	return n >= e && memcmp(p + n - e, end, e) == 0;
}

enum endpoint_kind profile_endpoint(const char *method, const char *path, size_t len)
{
	if (path == NULL)
		return ENDPOINT_GENERATION;
	const char *q = memchr(path, '?', len);
	size_t n = q != NULL ? (size_t)(q - path) : len;
	for (size_t i = 0; i < COUNT(count_tokens_ends); i++)
		if (ends_with(path, n, count_tokens_ends[i]))
			return ENDPOINT_COUNT_TOKENS;
	/* The segments, and the one before the last. */
	const char *last = NULL, *before = NULL;
	size_t last_len = 0, before_len = 0;
	for (size_t i = 0; i < n;) {
		while (i < n && path[i] == '/')
			i++;
		size_t j = i;
		while (j < n && path[j] != '/')
			j++;
		if (j == i)
			break;
		for (size_t k = 0; k < COUNT(files_segments); k++)
			if (j - i == strlen(files_segments[k]) &&
			    memcmp(path + i, files_segments[k], j - i) == 0)
				return ENDPOINT_FILES;
		before = last;
		before_len = last_len;
		last = path + i;
		last_len = j - i;
		i = j;
	}
	bool get = method != NULL && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0);
	if (get && last != NULL &&
	    ((last_len == 6 && memcmp(last, "models", 6) == 0) ||
	     (before != NULL && before_len == 6 && memcmp(before, "models", 6) == 0 &&
	      memchr(last, ':', last_len) == NULL)))
		return ENDPOINT_MODELS;
	return ENDPOINT_GENERATION;
}

const char *profile_endpoint_lane(enum endpoint_kind k)
{
	switch (k) {
	case ENDPOINT_COUNT_TOKENS:
		return ":count_tokens";
	case ENDPOINT_MODELS:
		return ":models";
	case ENDPOINT_FILES:
		return ":files";
	case ENDPOINT_GENERATION:
		break;
	}
	return NULL;
}

/* The uploads: every body sent to a files, uploads or batches path
 * (ENDPOINT_FILES) with a method that carries one. The ones that are large
 * and never need parsing (provider docs, 2026): OpenAI POST /v1/files
 * (multipart, up to 512 MB a file), POST /v1/uploads/{id}/parts (64 MB a
 * part), POST /v1/containers/{id}/files; Anthropic POST /v1/files (500 MB)
 * and POST /v1/messages/batches (a JSON body up to 256 MB); Gemini's
 * /upload/v1beta/files (multipart, or resumable: the start's metadata, then
 * "upload, finalize" with up to 2 GB, by POST or PUT); Azure OpenAI's
 * /openai/files and /openai/batches. The small bodies of the same family
 * (create a batch from a file id, attach a file to a vector store) stream
 * too: one rule, and a body small enough to hold is still resent on a
 * retry (httpd.h: hreq_body_rewind). Audio transcriptions and image edits
 * are multipart too, but generation, and under the 32 MiB cap: read whole. */
bool profile_endpoint_streams(enum endpoint_kind k, const char *method)
{
	return k == ENDPOINT_FILES && method != NULL &&
	       (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
	        strcmp(method, "PATCH") == 0);
}

/* ---------- the key ---------- */

const char *profile_key_header(enum key_source src)
{
	switch (src) {
	case KEY_AUTHORIZATION:
		return "authorization";
	case KEY_X_API_KEY:
		return "x-api-key";
	case KEY_API_KEY:
		return "api-key";
	case KEY_X_GOOG_API_KEY:
		return "x-goog-api-key";
	case KEY_QUERY_KEY:
		break;
	}
	return NULL;
}

bool profile_key_from_header(enum key_source src, const char *value, const char **key, size_t *len)
{
	if (value == NULL)
		return false;
	while (*value == ' ' || *value == '\t')
		value++;
	if (src == KEY_AUTHORIZATION) {
		/* Auth scheme names are case-insensitive (RFC 9110 §11.1). */
		if (strncasecmp(value, "Bearer ", 7) != 0)
			return false;
		value += 7;
		while (*value == ' ')
			value++;
	}
	size_t n = strlen(value);
	while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
		n--;
	if (n == 0)
		return false;
	*key = value;
	*len = n;
	return true;
}

bool profile_key_from_query(const char *query, size_t qlen, const char **key, size_t *len)
{
	const char *p = query, *end = query + qlen;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *param_end = amp ? amp : end;
		if (param_end - p > 4 && memcmp(p, "key=", 4) == 0) {
			*key = p + 4;
			*len = (size_t)(param_end - p - 4);
			return true;
		}
		p = param_end + 1;
	}
	return false;
}
