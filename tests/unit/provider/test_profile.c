/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for profile: the built-in rows as config_load reads them, the
 * lookups, the generic profile of a provider of the user's own, where a key
 * travels, and the identity headers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "provider/model.h"
#include "provider/profile.h"
#include "unit.h"

/* Writes text to a file under /tmp and loads it; NULL on failure (err set). */
static struct config *load_text(const char *text, char *err, size_t errlen)
{
	char path[] = "/tmp/pacerd-test-profile-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	struct config *c = config_load(path, NULL, err, errlen);
	unlink(path);
	return c;
}

START_TEST(builtin_rows)
{
	size_t n;
	const struct provider_profile *rows = profile_builtins(&n);
	static const char *const names[] = {"openai",     "anthropic", "azure",   "gemini",
	                                    "openrouter", "groq",      "mistral", "together"};
	ck_assert_uint_eq(n, sizeof names / sizeof names[0]);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(rows[i].conf.name, names[i]);
		ck_assert_ptr_eq(profile_find(names[i]), &rows[i]);
		ck_assert(rows[i].conf.prefix[0] == '/');
		ck_assert_uint_ge(rows[i].n_key_fallbacks, 1);
		ck_assert_uint_ge(rows[i].n_answer_identity, 1);
	}
	ck_assert_ptr_null(profile_find("local"));
	ck_assert_ptr_null(profile_find(NULL));
	ck_assert_ptr_null(profile_find("OpenAI")); /* names are exact */
	/* what each provider IS */
	const struct provider_profile *a = profile_find("anthropic");
	ck_assert_int_eq(a->conf.key_source, KEY_X_API_KEY);
	ck_assert_int_eq(a->conf.dialect, DIALECT_ANTHROPIC);
	ck_assert_int_eq(a->conf.cached_input, CACHED_INPUT_FREE);
	ck_assert_uint_gt(a->n_model_groups, 0);
	const struct provider_profile *az = profile_find("azure");
	ck_assert_ptr_null(az->conf.upstream);
	ck_assert_int_eq(az->conf.key_source, KEY_API_KEY);
	ck_assert_int_eq(az->conf.dialect, DIALECT_AZURE);
	ck_assert_int_eq(profile_find("gemini")->conf.key_source, KEY_X_GOOG_API_KEY);
	ck_assert_int_eq(profile_find("gemini")->conf.dialect, DIALECT_NONE);
	ck_assert_int_eq(profile_find("groq")->conf.cached_input, CACHED_INPUT_FREE);
	ck_assert_int_eq(profile_find("openai")->conf.cached_input, CACHED_INPUT_CHARGED);
	ck_assert_uint_eq(profile_find("openai")->n_model_groups, 0);
}
END_TEST

/* config_load starts every built-in provider from its row, and each knows
 * its row again (profile_of). */
START_TEST(config_reads_the_rows)
{
	char err[256];
	struct config *c = config_load(NULL, NULL, err, sizeof err);
	ck_assert_msg(c != NULL, "%s", err);
	for (size_t i = 0; i < c->n_providers; i++) {
		const struct provider_conf *p = &c->providers[i];
		const struct provider_profile *pp = profile_of(p);
		ck_assert_ptr_eq(pp, profile_find(p->name));
		ck_assert_ptr_eq(p->builtin, &pp->conf);
		ck_assert_str_eq(p->upstream, pp->conf.upstream);
		ck_assert_str_eq(p->prefix, pp->conf.prefix);
		ck_assert_int_eq(p->key_source, pp->conf.key_source);
		ck_assert_int_eq(p->dialect, pp->conf.dialect);
		ck_assert_int_eq(p->cached_input, pp->conf.cached_input);
		ck_assert_uint_eq(p->n_hosts, 1);
		ck_assert_str_eq(p->hosts[0], pp->conf.host);
	}
	config_free(c);

	/* a listed built-in keeps its row (the file's values on top); a name of the
	 * user's own gets the generic profile */
	c = load_text("providers:\n"
	              "  anthropic:\n"
	              "    upstream: http://127.0.0.1:9\n"
	              "    key_header: authorization\n"
	              "  local:\n"
	              "    upstream: http://127.0.0.1:8\n"
	              "    dialect: anthropic\n",
	              err, sizeof err);
	ck_assert_msg(c != NULL, "%s", err);
	const struct provider_conf *an = config_provider(c, "anthropic");
	ck_assert_ptr_eq(profile_of(an), profile_find("anthropic"));
	ck_assert_int_eq(an->key_source, KEY_AUTHORIZATION);
	const struct provider_conf *local = config_provider(c, "local");
	ck_assert_ptr_null(local->builtin);
	const struct provider_profile *g = profile_of(local);
	ck_assert_ptr_null(g->conf.name);
	ck_assert(g->add_stream_usage);
	/* output: Anthropic counts what is produced; the others, and a provider of
	 * the user's own, reserve max_tokens until their counters say otherwise */
	ck_assert_int_eq(profile_of(an)->output_charge, OUTPUT_PRODUCED);
	ck_assert_int_eq(profile_find("openai")->output_charge, OUTPUT_RESERVED);
	ck_assert_int_eq(g->output_charge, OUTPUT_RESERVED);
	ck_assert_uint_eq(g->n_model_groups, 0);
	/* usage comes unasked at Mistral (which refused stream_options) and
	 * OpenRouter: no rewrite; the others accept it */
	ck_assert(!profile_find("mistral")->add_stream_usage);
	ck_assert(!profile_find("openrouter")->add_stream_usage);
	ck_assert(profile_find("openai")->add_stream_usage);
	ck_assert(profile_find("groq")->add_stream_usage);
	ck_assert_uint_eq(g->n_key_fallbacks, 5);
	/* a dialect does not make a profile: groups stay the built-in row's */
	size_t n;
	ck_assert_ptr_null(model_builtin_groups(local, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_nonnull(model_builtin_groups(an, &n));
	ck_assert_uint_gt(n, 0);
	config_free(c);
	ck_assert_ptr_eq(profile_of(NULL), g);
}
END_TEST

/* Cache reads: free at Anthropic and Groq, but on Anthropic's Haiku 3 and 3.5
 * (counted toward input tokens per minute, PROVIDERS.md §11), by the lane's
 * model: its group's name or its own; a provider set to charged, or of the
 * user's own set to free, by its setting alone. */
START_TEST(cache_reads_by_model)
{
	char err[256];
	struct config *c = load_text("providers:\n"
	                             "  anthropic: {}\n"
	                             "  groq: {}\n"
	                             "  openai: {}\n"
	                             "  local:\n"
	                             "    upstream: http://127.0.0.1:8\n"
	                             "    cached_input: free\n",
	                             err, sizeof err);
	ck_assert_msg(c != NULL, "%s", err);
	const struct provider_conf *an = config_provider(c, "anthropic");
	static const char *const counted[] = {"claude-3-haiku", "claude-3-haiku-20240307",
	                                      "claude-3-5-haiku", "claude-3-5-haiku-latest"};
	static const char *const free_reads[] = {"claude-sonnet-4",  "claude-haiku-4-5",
	                                         "claude-opus-4-1",  "claude-3-7-sonnet",
	                                         "claude-3-opus",    "claude-3-5-sonnet-20241022",
	                                         "my-haiku-3-proxy", NULL};
	for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++)
		ck_assert_msg(!profile_cache_reads_free(an, counted[i]), "%s", counted[i]);
	for (size_t i = 0; i < sizeof free_reads / sizeof free_reads[0]; i++)
		ck_assert_msg(profile_cache_reads_free(an, free_reads[i]), "%s",
		              free_reads[i] ? free_reads[i] : "(none)");
	/* the built-in groups name the Haiku classes so that the rule finds them */
	ck_assert_str_eq(model_group(an, "claude-3-5-haiku-20241022"), "claude-3-5-haiku");
	ck_assert(!profile_cache_reads_free(an, model_group(an, "claude-3-5-haiku-20241022")));
	ck_assert(profile_cache_reads_free(config_provider(c, "groq"), "llama-3.3-70b"));
	ck_assert(profile_cache_reads_free(config_provider(c, "local"), "claude-3-haiku"));
	ck_assert(!profile_cache_reads_free(config_provider(c, "openai"), "gpt-4o"));
	ck_assert(!profile_cache_reads_free(NULL, "gpt-4o"));
	config_free(c);
	/* set to charged, Anthropic counts every read on every model */
	c = load_text("providers:\n  anthropic: {cached_input: charged}\n", err, sizeof err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert(!profile_cache_reads_free(config_provider(c, "anthropic"), "claude-sonnet-4"));
	config_free(c);
}
END_TEST

/* Every place a key travels is tried by every profile, the generic one too:
 * a request with a key never lands in the anonymous lane. */
START_TEST(key_fallbacks_cover_every_source)
{
	size_t n;
	const struct provider_profile *rows = profile_builtins(&n);
	static const enum key_source all[] = {KEY_AUTHORIZATION, KEY_X_API_KEY, KEY_API_KEY,
	                                      KEY_X_GOOG_API_KEY, KEY_QUERY_KEY};
	for (size_t i = 0; i <= n; i++) {
		const struct provider_profile *pp = i < n ? &rows[i] : profile_of(NULL);
		for (size_t s = 0; s < sizeof all / sizeof all[0]; s++) {
			bool found = false;
			for (size_t k = 0; k < pp->n_key_fallbacks; k++)
				found |= pp->key_fallbacks[k] == all[s];
			ck_assert_msg(found, "%s: key source %d",
			              pp->conf.name ? pp->conf.name : "-", all[s]);
		}
	}
}
END_TEST

START_TEST(key_header_names)
{
	ck_assert_str_eq(profile_key_header(KEY_AUTHORIZATION), "authorization");
	ck_assert_str_eq(profile_key_header(KEY_X_API_KEY), "x-api-key");
	ck_assert_str_eq(profile_key_header(KEY_API_KEY), "api-key");
	ck_assert_str_eq(profile_key_header(KEY_X_GOOG_API_KEY), "x-goog-api-key");
	ck_assert_ptr_null(profile_key_header(KEY_QUERY_KEY));
	/* the header names are the YAML's key_header values */
	for (int k = KEY_AUTHORIZATION; k < KEY_QUERY_KEY; k++)
		ck_assert_str_eq(profile_key_header((enum key_source)k),
		                 config_key_source_name((enum key_source)k));
}
END_TEST

START_TEST(bearer_key)
{
	const char *k;
	size_t n;
	ck_assert(profile_key_from_header(KEY_AUTHORIZATION, "Bearer sk-abc", &k, &n));
	ck_assert_int_eq(n, 6);
	ck_assert(memcmp(k, "sk-abc", 6) == 0);
	ck_assert(profile_key_from_header(KEY_AUTHORIZATION, "bearer   sk-abc  ", &k, &n));
	ck_assert_int_eq(n, 6);
	ck_assert(!profile_key_from_header(KEY_AUTHORIZATION, "Basic dXNlcg==", &k, &n));
	ck_assert(!profile_key_from_header(KEY_AUTHORIZATION, "Bearer ", &k, &n));
	ck_assert(!profile_key_from_header(KEY_AUTHORIZATION, NULL, &k, &n));
	ck_assert(profile_key_from_header(KEY_X_API_KEY, "sk-ant-1", &k, &n));
	ck_assert_int_eq(n, 8);
	ck_assert(profile_key_from_header(KEY_X_API_KEY, "\t sk-ant-2\t", &k, &n));
	ck_assert(n == 8 && memcmp(k, "sk-ant-2", 8) == 0);
	ck_assert(!profile_key_from_header(KEY_X_API_KEY, "  ", &k, &n));
}
END_TEST

START_TEST(query_key)
{
	const char *k;
	size_t n;
	const char *q = "alt=sse&key=AIza123&x=1";
	ck_assert(profile_key_from_query(q, strlen(q), &k, &n));
	ck_assert_int_eq(n, 7);
	ck_assert(memcmp(k, "AIza123", 7) == 0);
	q = "monkey=1&key=z";
	ck_assert(profile_key_from_query(q, strlen(q), &k, &n));
	ck_assert(memcmp(k, "z", 1) == 0 && n == 1);
	q = "monkey=1&keys=2";
	ck_assert(!profile_key_from_query(q, strlen(q), &k, &n));
	ck_assert(!profile_key_from_query("key=", 4, &k, &n));
	ck_assert(!profile_key_from_query("", 0, &k, &n));
}
END_TEST

/* The identity headers, narrowest first (PROVIDERS.md §10). */
START_TEST(identity_headers)
{
	const struct provider_profile *o = profile_find("openai");
	ck_assert_uint_eq(o->n_request_identity, 2);
	ck_assert_str_eq(o->request_identity[0].header, "openai-project");
	ck_assert_str_eq(o->request_identity[0].kind, "project");
	ck_assert_str_eq(o->request_identity[1].header, "openai-organization");
	ck_assert_str_eq(o->request_identity[1].kind, "org");
	const struct provider_profile *a = profile_find("anthropic");
	bool workspace = false;
	size_t ws_at = 0, org_at = 0;
	for (size_t i = 0; i < a->n_answer_identity; i++) {
		if (strcmp(a->answer_identity[i].header, "anthropic-workspace-id") == 0) {
			workspace = strcmp(a->answer_identity[i].kind, "workspace") == 0;
			ws_at = i;
		}
		if (strcmp(a->answer_identity[i].header, "anthropic-organization-id") == 0)
			org_at = i;
	}
	ck_assert(workspace);
	ck_assert_uint_lt(ws_at, org_at); /* a workspace is narrower than its organization */
	/* header names are lower case: they are compared as such */
	size_t n;
	const struct provider_profile *rows = profile_builtins(&n);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < rows[i].n_answer_identity; j++)
			for (const char *c = rows[i].answer_identity[j].header; *c; c++)
				ck_assert(!(*c >= 'A' && *c <= 'Z'));
}
END_TEST

/* The model rows are valid patterns, their specificity worked out at
 * profile_install (config_model_pattern). */
START_TEST(model_rows_are_patterns)
{
	size_t n;
	const struct provider_profile *rows = profile_builtins(&n);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < rows[i].n_model_groups; j++) {
			const struct model_rule *r = &rows[i].model_groups[j];
			struct model_rule check = {0};
			char msg[128];
			ck_assert_int_eq(config_model_pattern(r->pattern, &check, msg, sizeof msg),
			                 0);
			ck_assert_uint_eq(check.literal, r->literal);
			ck_assert_uint_eq(check.prefix, r->prefix);
			ck_assert(check.exact == r->exact);
			ck_assert_uint_gt(r->literal, 0);
		}
}
END_TEST

/* Side endpoints by path and method (issue 28 item 6). */
START_TEST(side_endpoints)
{
	static const struct {
		const char *method, *path;
		enum endpoint_kind kind;
	} rows[] = {
	    {"POST", "/v1/chat/completions", ENDPOINT_GENERATION},
	    {"POST", "/v1/messages", ENDPOINT_GENERATION},
	    {"POST", "/v1/responses", ENDPOINT_GENERATION},
	    {"POST", "/v1beta/models/gemini-2.0-flash:generateContent", ENDPOINT_GENERATION},
	    {"POST", "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
	     ENDPOINT_GENERATION},
	    {"POST", "/openai/deployments/gpt4o/chat/completions?api-version=1",
	     ENDPOINT_GENERATION},
	    {"POST", "/v1/messages/count_tokens", ENDPOINT_COUNT_TOKENS},
	    {"POST", "/v1/messages/count_tokens?beta=true", ENDPOINT_COUNT_TOKENS},
	    {"POST", "/v1/responses/input_tokens", ENDPOINT_COUNT_TOKENS},
	    {"POST", "/v1beta/models/gemini-2.0-flash:countTokens", ENDPOINT_COUNT_TOKENS},
	    {"GET", "/v1/models", ENDPOINT_MODELS},
	    {"GET", "/v1/models/", ENDPOINT_MODELS},
	    {"HEAD", "/v1/models/gpt-4o", ENDPOINT_MODELS},
	    {"GET", "/v1beta/models?pageSize=50", ENDPOINT_MODELS},
	    {"GET", "/v1beta/models/gemini-2.0-flash", ENDPOINT_MODELS},
	    {"GET", "/openai/models?api-version=1", ENDPOINT_MODELS},
	    {"POST", "/v1/models", ENDPOINT_GENERATION}, /* a listing is a GET */
	    {"GET", "/v1/modelsx", ENDPOINT_GENERATION},
	    {"POST", "/v1/files", ENDPOINT_FILES},
	    {"GET", "/v1/files/file-abc/content", ENDPOINT_FILES},
	    {"POST", "/v1/uploads/upload_abc/parts", ENDPOINT_FILES},
	    {"POST", "/v1/batches", ENDPOINT_FILES},
	    {"POST", "/v1/messages/batches", ENDPOINT_FILES},
	    {"POST", "/upload/v1beta/files?uploadType=resumable", ENDPOINT_FILES},
	    {"POST", "/v1/vector_stores/vs_1/files", ENDPOINT_FILES},
	    {"POST", "/v1/filesystem", ENDPOINT_GENERATION},
	    {"POST", "", ENDPOINT_GENERATION},
	    {"POST", "/", ENDPOINT_GENERATION},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_msg(profile_endpoint(rows[i].method, rows[i].path,
		                               strlen(rows[i].path)) == rows[i].kind,
		              "%s %s", rows[i].method, rows[i].path);
	ck_assert_int_eq(profile_endpoint("POST", NULL, 0), ENDPOINT_GENERATION);
	ck_assert_ptr_null(profile_endpoint_lane(ENDPOINT_GENERATION));
	ck_assert_str_eq(profile_endpoint_lane(ENDPOINT_COUNT_TOKENS), ":count_tokens");
	ck_assert_str_eq(profile_endpoint_lane(ENDPOINT_MODELS), ":models");
	ck_assert_str_eq(profile_endpoint_lane(ENDPOINT_FILES), ":files");
}
END_TEST

/* Which bodies stream upstream as they arrive: uploads (issue 28 item 6). */
START_TEST(upload_bodies_stream)
{
	static const struct {
		const char *method, *path;
		bool streams;
	} rows[] = {
	    {"POST", "/v1/files", true},                    /* OpenAI, Anthropic: multipart */
	    {"POST", "/v1/uploads/upload_abc/parts", true}, /* OpenAI: 64 MB parts */
	    {"POST", "/v1/messages/batches", true},         /* Anthropic: JSON up to 256 MB */
	    {"POST", "/upload/v1beta/files?uploadType=multipart", true}, /* Gemini */
	    {"PUT", "/upload/v1beta/files?upload_id=x&upload_protocol=resumable", true},
	    {"POST", "/openai/files?api-version=2024-10-21", true}, /* Azure */
	    {"POST", "/openai/batches?api-version=2024-10-21", true},
	    {"PATCH", "/v1/files/file-1", true},
	    {"POST", "/v1/batches", true}, /* small, but of the family: held for a retry */
	    {"GET", "/v1/files/file-abc/content", false}, /* a download has no body */
	    {"HEAD", "/v1/files", false},
	    {"DELETE", "/v1/files/file-abc", false},
	    {"POST", "/v1/chat/completions", false}, /* parsed: read whole, under the cap */
	    {"POST", "/v1/messages", false},
	    {"POST", "/v1/messages/count_tokens", false},
	    {"POST", "/v1/audio/transcriptions", false}, /* multipart, but generation */
	    {"POST", "/v1/filesystem", false},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		enum endpoint_kind k =
		    profile_endpoint(rows[i].method, rows[i].path, strlen(rows[i].path));
		ck_assert_msg(profile_endpoint_streams(k, rows[i].method) == rows[i].streams,
		              "%s %s", rows[i].method, rows[i].path);
	}
	ck_assert(!profile_endpoint_streams(ENDPOINT_FILES, NULL));
	ck_assert(!profile_endpoint_streams(ENDPOINT_GENERATION, "POST"));
}
END_TEST

static Suite *profile_suite(void)
{
	Suite *s = suite_create("profile");
	TCase *t = tcase_create("profile");
	tcase_add_test(t, builtin_rows);
	tcase_add_test(t, config_reads_the_rows);
	tcase_add_test(t, cache_reads_by_model);
	tcase_add_test(t, key_fallbacks_cover_every_source);
	tcase_add_test(t, key_header_names);
	tcase_add_test(t, bearer_key);
	tcase_add_test(t, query_key);
	tcase_add_test(t, identity_headers);
	tcase_add_test(t, model_rows_are_patterns);
	tcase_add_test(t, side_endpoints);
	tcase_add_test(t, upload_bodies_stream);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("profile", profile_suite)
