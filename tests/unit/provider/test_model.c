/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for model: the model of a request (path or body), groups, and
 * the memo of what the rules answered per model (model_memo.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/model_memo.h"
#include "provider/model.h"
#include "provider/profile.h"
#include "unit.h"

/* The model a path names, or "" when none. */
static const char *from_path(const char *path, char *out)
{
	const char *n;
	size_t len;
	if (!model_from_path(path, strlen(path), &n, &len))
		len = 0;
	memcpy(out, n ? n : "", len);
	out[len] = '\0';
	return out;
}

START_TEST(path_gemini_and_azure)
{
	char o[TOKENS_MODEL_MAX + 1];
	ck_assert_str_eq(from_path("/v1beta/models/gemini-2.5-flash:generateContent", o),
	                 "gemini-2.5-flash");
	ck_assert_str_eq(
	    from_path("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", o),
	    "gemini-2.5-pro");
	ck_assert_str_eq(from_path("/v1/models/gemini-1.5-flash-002:countTokens", o),
	                 "gemini-1.5-flash-002");
	ck_assert_str_eq(from_path("/v1alpha/models/text-embedding-004:embedContent", o),
	                 "text-embedding-004");
	ck_assert_str_eq(from_path("/gemini/v1beta/tunedModels/my-model-x1:generateContent", o),
	                 "my-model-x1");
	ck_assert_str_eq(from_path("/v1/projects/p/locations/us-central1/publishers/google/models/"
	                           "gemini-2.0-flash-001:generateContent",
	                           o),
	                 "gemini-2.0-flash-001");
	/* no method, no name, a listing, a query that only looks like one */
	ck_assert_str_eq(from_path("/v1beta/models/gemini-2.5-pro", o), "");
	ck_assert_str_eq(from_path("/v1beta/models/gemini-2.5-pro:", o), "");
	ck_assert_str_eq(from_path("/v1beta/models/:generateContent", o), "");
	ck_assert_str_eq(from_path("/v1beta/models", o), "");
	ck_assert_str_eq(from_path("/v1/models", o), "");
	ck_assert_str_eq(from_path("/v1/files?x=/models/a:b", o), "");
	ck_assert_str_eq(from_path("/v1/chat/completions", o), "");
	ck_assert_str_eq(from_path("", o), "");
	/* Azure */
	ck_assert_str_eq(
	    from_path("/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21", o),
	    "my-gpt4o");
	ck_assert_str_eq(from_path("/azure/openai/deployments/emb_3/embeddings", o), "emb_3");
	ck_assert_str_eq(from_path("/openai/deployments/d1", o), "d1");
	ck_assert_str_eq(from_path("/openai/deployments/", o), "");
	ck_assert_str_eq(from_path("/openai/v1/chat/completions", o), "");
	ck_assert_str_eq(from_path("/other/deployments/x/chat", o), "");
	/* a huge name is no name */
	char path[400], name[TOKENS_MODEL_MAX + 2];
	memset(name, 'g', sizeof name);
	name[TOKENS_MODEL_MAX] = '\0';
	snprintf(path, sizeof path, "/v1beta/models/%s:generateContent", name);
	ck_assert_str_eq(from_path(path, o), name);
	name[TOKENS_MODEL_MAX] = 'g';
	name[TOKENS_MODEL_MAX + 1] = '\0';
	snprintf(path, sizeof path, "/v1beta/models/%s:generateContent", name);
	ck_assert_str_eq(from_path(path, o), "");
	/* the length given is the end, not a NUL */
	const char *p = "/openai/deployments/abcdef/chat";
	const char *n;
	size_t len;
	ck_assert(model_from_path(p, 23, &n, &len));
	ck_assert_uint_eq(len, 3);
}
END_TEST

START_TEST(path_first_then_body)
{
	char buf[TOKENS_MODEL_MAX];
	const char *name;
	size_t len;
	struct tokens_cost c;
	const char *body = "{\"model\":\"gpt-4o\",\"messages\":[]}";
	tokens_estimate(body, strlen(body), 1024, &c);
	const char *path = "/openai/deployments/dep1/chat/completions";
	ck_assert_int_eq(model_of_request(path, strlen(path), &c, buf, &name, &len), MODEL_PATH);
	ck_assert_uint_eq(len, 4);
	ck_assert(memcmp(name, "dep1", 4) == 0);
	ck_assert_int_eq(model_of_request("/v1/chat/completions", 20, &c, buf, &name, &len),
	                 MODEL_BODY);
	ck_assert_ptr_eq(name, body + 10);
	ck_assert_uint_eq(len, 6);
	/* escaped: decoded into buf */
	const char *esc = "{\"model\":\"a\\/b\"}";
	tokens_estimate(esc, strlen(esc), 1024, &c);
	ck_assert_int_eq(model_of_request("/v1/chat/completions", 20, &c, buf, &name, &len),
	                 MODEL_BODY);
	ck_assert_ptr_eq(name, buf);
	ck_assert_uint_eq(len, 3);
	ck_assert(memcmp(name, "a/b", 3) == 0);
	/* no model anywhere: a listing, a body that is not JSON, no body */
	tokens_estimate("not json", 8, 1024, &c);
	ck_assert_int_eq(model_of_request("/v1/models", 10, &c, buf, &name, &len), MODEL_NONE);
	ck_assert_ptr_null(name);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(model_of_request("/v1/models", 10, NULL, buf, &name, &len), MODEL_NONE);
}
END_TEST

static void rule(struct model_rule *r, const char *pattern, const char *value)
{
	char msg[256];
	r->pattern = (char *)pattern;
	r->value = (char *)value;
	ck_assert_int_eq(config_model_pattern(pattern, r, msg, sizeof msg), 0);
}

START_TEST(groups_most_specific_wins)
{
	struct model_rule rows[5];
	rule(&rows[0], "gpt-4o*", "four-o");
	rule(&rows[1], "gpt-4o-mini*", "mini");
	rule(&rows[2], "gpt-4o-mini-2024-07-18", "exact");
	rule(&rows[3], "gpt-?o-mini*", "other-minis"); /* one literal fewer than [1] */
	rule(&rows[4], "o[13]*", "o-series");
	struct provider_conf p = {
	    .name = (char *)"openai", .model_groups = rows, .n_model_groups = 5};
	ck_assert_str_eq(model_group(&p, "gpt-4o-2024-08-06"), "four-o");
	ck_assert_str_eq(model_group(&p, "gpt-4o-mini"), "mini");
	ck_assert_str_eq(model_group(&p, "gpt-4o-mini-2024-07-18"), "exact");
	ck_assert_str_eq(model_group(&p, "gpt-5o-mini"), "other-minis");
	ck_assert_str_eq(model_group(&p, "o3-mini"), "o-series");
	ck_assert_ptr_null(model_group(&p, "o2"));
	ck_assert_ptr_null(model_group(&p, "gpt-4.1")); /* its own group */
	/* '*' matches '/' too: model names hold slashes */
	struct model_rule slash[1];
	rule(&slash[0], "meta-llama/*", "llama");
	struct provider_conf q = {
	    .name = (char *)"together", .model_groups = slash, .n_model_groups = 1};
	ck_assert_str_eq(model_group(&q, "meta-llama/Llama-3.3-70B-Instruct-Turbo"), "llama");
}
END_TEST

START_TEST(groups_builtin_anthropic)
{
	/* a provider config_load started from the anthropic row */
	struct provider_conf a = {.name = (char *)"anthropic",
	                          .builtin = &profile_find("anthropic")->conf};
	ck_assert_str_eq(model_group(&a, "claude-sonnet-4-5-20250929"), "claude-sonnet-4");
	ck_assert_str_eq(model_group(&a, "claude-sonnet-4-20250514"), "claude-sonnet-4");
	ck_assert_str_eq(model_group(&a, "claude-sonnet-4-5"), "claude-sonnet-4");
	ck_assert_str_eq(model_group(&a, "claude-opus-4-1-20250805"), "claude-opus-4");
	ck_assert_str_eq(model_group(&a, "claude-haiku-4-5"), "claude-haiku-4-5");
	ck_assert_str_eq(model_group(&a, "claude-3-7-sonnet-latest"), "claude-3-7-sonnet");
	ck_assert_ptr_null(model_group(&a, "claude-3-5-sonnet-20241022"));
	/* the user's rows come first */
	struct model_rule mine[1];
	rule(&mine[0], "claude-sonnet-4-5*", "sonnet-4-5-alone");
	a.model_groups = mine;
	a.n_model_groups = 1;
	ck_assert_str_eq(model_group(&a, "claude-sonnet-4-5-20250929"), "sonnet-4-5-alone");
	ck_assert_str_eq(model_group(&a, "claude-sonnet-4-20250514"), "claude-sonnet-4");
	/* other providers have none built in */
	struct provider_conf o = {.name = (char *)"openai",
	                          .builtin = &profile_find("openai")->conf};
	ck_assert_ptr_null(model_group(&o, "claude-sonnet-4-5"));
	size_t n;
	ck_assert_ptr_null(model_builtin_groups(&o, &n));
	ck_assert_uint_eq(n, 0);
	/* the rows come with the profile, not with the name */
	struct provider_conf named = {.name = (char *)"anthropic"};
	ck_assert_ptr_null(model_group(&named, "claude-sonnet-4-5"));
	const struct model_rule *rows = model_builtin_groups(&a, &n);
	ck_assert_uint_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		struct model_rule r;
		char msg[256];
		ck_assert_int_eq(config_model_pattern(rows[i].pattern, &r, msg, sizeof msg), 0);
		ck_assert_uint_eq(r.literal, rows[i].literal);
	}
}
END_TEST

START_TEST(groups_interned)
{
	struct intern *t = intern_new(3);
	struct provider_conf a = {.name = (char *)"anthropic",
	                          .builtin = &profile_find("anthropic")->conf};
	const char *g1 = model_group_intern(t, &a, "claude-sonnet-4-5xyz", 17);
	const char *g2 = model_group_intern(t, &a, "claude-sonnet-4-20250514", 24);
	const char *g3 = model_group_intern(t, &a, "claude-3-5-sonnet", 17);
	ck_assert_ptr_eq(g1, g2);
	ck_assert_str_eq(g1, "claude-sonnet-4");
	ck_assert_str_eq(g3, "claude-3-5-sonnet");
	ck_assert_uint_eq(intern_count(t), 2);
	ck_assert_ptr_null(model_group_intern(t, &a, "x", 0));
	ck_assert_ptr_null(model_group_intern(t, &a, "x", TOKENS_MODEL_MAX + 1));
	intern_put(t, g1);
	intern_put(t, g2);
	intern_put(t, g3);
	ck_assert_uint_eq(intern_count(t), 0);
	intern_free(t);
}
END_TEST

/* ---------- the memo: the same answers as the scan ---------- */

static struct config *load_yaml(const char *yaml)
{
	char path[] = "/tmp/pacerd-test-model-XXXXXX", err[512];
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	struct config *c = config_load(path, NULL, err, sizeof err);
	unlink(path);
	ck_assert_msg(c != NULL, "%s", err);
	return c;
}

static const char *const some_models[] = {
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4o-mini-2024-07-18",
    "gpt-4o-2024-08-06",
    "o1",
    "o3-mini",
    "o2",
    "gpt-4",
    "gpt-4.1",
    "gpt-4-turbo",
    "claude-sonnet-4-5-20250929",
    "claude-sonnet-4-20250514",
    "claude-3-5-sonnet",
    "claude-opus-4-1",
    "x",
    "meta-llama/Llama-3.3-70B",
};
#define N_SOME (sizeof(some_models) / sizeof(some_models[0]))

static const char *plan_name(const struct plan_conf *p)
{
	return p != NULL ? p->name : "(none)";
}

/* Every provider of c answers every model, twice (the second from its memo),
 * as a copy of it without a memo (a scan of its rows) does; returns how many
 * answers were asked. */
static size_t same_as_the_scan(const struct config *c)
{
	size_t asked = 0;
	for (size_t i = 0; i < c->n_providers; i++) {
		const struct provider_conf *p = &c->providers[i];
		struct provider_conf scan = *p;
		scan.memo = NULL;
		ck_assert_ptr_nonnull(p->memo);
		for (int round = 0; round < 2; round++)
			for (size_t m = 0; m < N_SOME; m++) {
				const char *g = model_group(p, some_models[m]);
				const char *want = model_group(&scan, some_models[m]);
				ck_assert_msg(g == want || (g && want && !strcmp(g, want)),
				              "%s %s: group %s, the scan says %s", p->name,
				              some_models[m], g ? g : "(own)",
				              want ? want : "(own)");
				const char *lane_model = g != NULL ? g : some_models[m];
				ck_assert_str_eq(
				    plan_name(config_plan_for(c, p, NULL, lane_model)),
				    plan_name(config_plan_for(c, &scan, NULL, lane_model)));
				asked++;
			}
	}
	return asked;
}

START_TEST(memo_answers_as_the_scan_and_a_reload_starts_over)
{
	struct config *a = load_yaml("plans:\n"
	                             "  small: {max_requests_per_second: 20}\n"
	                             "  big: {max_requests_per_second: 2}\n"
	                             "providers:\n"
	                             "  openai:\n"
	                             "    plan: big\n"
	                             "    model_groups:\n"
	                             "      \"gpt-4o*\": gpt-4o\n"
	                             "      \"gpt-4o-mini*\": gpt-4o-mini\n"
	                             "      \"o[13]*\": o-series\n"
	                             "    model_plans:\n"
	                             "      \"gpt-4o-mini*\": small\n"
	                             "      o-series: small\n"
	                             "      gpt-4o: big\n"
	                             "  anthropic:\n"
	                             "    model_groups:\n"
	                             "      \"claude-sonnet-4-5*\": sonnet-4-5-alone\n"
	                             "    model_plans:\n"
	                             "      \"claude-opus*\": small\n"
	                             "  together:\n"
	                             "    model_groups: {\"meta-llama/*\": llama}\n");
	ck_assert_uint_gt(same_as_the_scan(a), 0);
	const struct provider_conf *oa = config_provider(a, "openai");
	ck_assert_str_eq(model_group(oa, "o3-mini"), "o-series");
	ck_assert_str_eq(config_plan_for(a, oa, NULL, "o-series")->name, "small");
	ck_assert_str_eq(model_group(config_provider(a, "anthropic"), "claude-sonnet-4-20250514"),
	                 "claude-sonnet-4"); /* a built-in row, remembered too */
	/* one entry per name asked: the models and the groups config_plan_for saw */
	ck_assert_uint_ge(model_memo_count(oa->memo), N_SOME);
	ck_assert_uint_le(model_memo_count(oa->memo), N_SOME + 4);

	/* A reload: new rules, a new configuration, new (empty) memos; the old one
	 * still answers by its own rules while requests hold it. */
	struct config *b = load_yaml("plans:\n"
	                             "  small: {max_requests_per_second: 20}\n"
	                             "providers:\n"
	                             "  openai:\n"
	                             "    model_groups: {\"gpt-4*\": gpt-4}\n"
	                             "    model_plans: {gpt-4: small, \"o*\": small}\n"
	                             "  anthropic: {}\n");
	const struct provider_conf *ob = config_provider(b, "openai");
	ck_assert_uint_eq(model_memo_count(ob->memo), 0);
	ck_assert_uint_gt(same_as_the_scan(b), 0);
	ck_assert_str_eq(model_group(ob, "gpt-4o-mini"), "gpt-4");
	ck_assert_ptr_null(model_group(ob, "o3-mini"));
	ck_assert_str_eq(config_plan_for(b, ob, NULL, "o3-mini")->name, "small");
	ck_assert_str_eq(config_plan_for(b, ob, NULL, "gpt-4.1")->name, "default");
	ck_assert_str_eq(model_group(config_provider(b, "anthropic"), "claude-sonnet-4-5-20250929"),
	                 "claude-sonnet-4");
	ck_assert_str_eq(model_group(oa, "gpt-4o-mini"), "gpt-4o-mini");
	/* a lane made under b for a request accepted under a: a's rows, b's plans */
	ck_assert_str_eq(config_plan_for(b, oa, NULL, "o-series")->name, "small");
	config_free(a);
	ck_assert_uint_gt(same_as_the_scan(b), 0);
	config_free(b);
}
END_TEST

START_TEST(memo_remembers_and_stays_bounded)
{
	struct model_rule rows[2];
	rule(&rows[0], "gpt-4o*", "four-o");
	rule(&rows[1], "m-1*", "ones");
	struct provider_conf p = {.name = (char *)"openai",
	                          .model_groups = rows,
	                          .n_model_groups = 2,
	                          .memo = model_memo_new()};
	ck_assert_str_eq(model_group(&p, "gpt-4o-mini"), "four-o");
	/* The answer is the memo's now: rules that changed under it (which a
	 * loaded configuration never does: a reload makes a new one) are not
	 * read again. */
	/* cppcheck-suppress unreadVariable ; model_group() reads it through p.model_groups */
	rows[0].value = (char *)"changed";
	ck_assert_str_eq(model_group(&p, "gpt-4o-mini"), "four-o");
	ck_assert_str_eq(model_group(&p, "gpt-4o"), "changed");
	/* Names from clients: never more than MODEL_MEMO_MAX kept, and every
	 * answer still right after the memo starts over. */
	char name[32];
	for (unsigned i = 0; i < 3 * MODEL_MEMO_MAX; i++) {
		snprintf(name, sizeof name, "m-%u", i);
		const char *g = model_group(&p, name);
		if (name[2] == '1')
			ck_assert_str_eq(g, "ones");
		else
			ck_assert_ptr_null(g);
		ck_assert_uint_le(model_memo_count(p.memo), MODEL_MEMO_MAX);
	}
	ck_assert_uint_gt(model_memo_count(p.memo), 0);
	/* a name longer than any model: answered by the scan, not kept */
	char longname[CONFIG_MODEL_MAX + 8];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	ck_assert_ptr_null(model_memo_get(p.memo, longname));
	ck_assert_ptr_null(model_group(&p, longname));
	model_memo_free(p.memo);
}
END_TEST

static Suite *model_suite(void)
{
	Suite *s = suite_create("model");
	TCase *c = tcase_create("model");
	tcase_add_test(c, path_gemini_and_azure);
	tcase_add_test(c, path_first_then_body);
	tcase_add_test(c, groups_most_specific_wins);
	tcase_add_test(c, groups_builtin_anthropic);
	tcase_add_test(c, groups_interned);
	tcase_add_test(c, memo_answers_as_the_scan_and_a_reload_starts_over);
	tcase_add_test(c, memo_remembers_and_stays_bounded);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("model", model_suite)
