/* model — see model.h. */
#include "provider/model.h"

#include "core/model_memo.h"

#include <string.h>

/* ---------- built-in groups ----------
 *
 * Only where the provider documents that models share one budget.
 *
 * Anthropic (docs.anthropic.com/en/api/rate-limits, read 2025-11: "rate
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
struct builtin_rows {
	const char *provider;
	struct model_rule *rows;
	size_t n;
};

static struct model_rule anthropic_rows[] = {
    {.pattern = (char *)"claude-opus-4*", .value = (char *)"claude-opus-4"},
    {.pattern = (char *)"claude-sonnet-4*", .value = (char *)"claude-sonnet-4"},
    {.pattern = (char *)"claude-haiku-4-5*", .value = (char *)"claude-haiku-4-5"},
    {.pattern = (char *)"claude-3-7-sonnet*", .value = (char *)"claude-3-7-sonnet"},
    {.pattern = (char *)"claude-3-5-haiku*", .value = (char *)"claude-3-5-haiku"},
    {.pattern = (char *)"claude-3-haiku*", .value = (char *)"claude-3-haiku"},
    {.pattern = (char *)"claude-3-opus*", .value = (char *)"claude-3-opus"},
};

static struct builtin_rows builtin[] = {
    {"anthropic", anthropic_rows, sizeof(anthropic_rows) / sizeof(anthropic_rows[0])},
};

/* The rows' specificity, worked out once (the patterns are valid: the unit
 * test checks them through config_model_pattern as well). */
static void builtin_init(void)
{
	static bool done;
	char msg[64];
	if (done)
		return;
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		for (size_t j = 0; j < builtin[i].n; j++)
			config_model_pattern(builtin[i].rows[j].pattern, &builtin[i].rows[j], msg,
			                     sizeof(msg));
	done = true;
}

const struct model_rule *model_builtin_groups(const char *provider, size_t *n)
{
	builtin_init();
	for (size_t i = 0; provider != NULL && i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (strcmp(builtin[i].provider, provider) == 0) {
			*n = builtin[i].n;
			return builtin[i].rows;
		}
	*n = 0;
	return NULL;
}

static const char *group_by_scan(const struct provider_conf *prov, const char *model)
{
	const struct model_rule *r =
	    config_model_rule(prov->model_groups, prov->n_model_groups, model);
	size_t n;
	if (r == NULL) {
		const struct model_rule *rows = model_builtin_groups(prov->name, &n);
		r = config_model_rule(rows, n, model);
	}
	return r != NULL ? r->value : NULL;
}

const char *model_group(const struct provider_conf *prov, const char *model)
{
	struct model_answer *a = model_memo_get(prov->memo, model);
	if (a != NULL && a->group_known)
		return a->group;
	const char *g = group_by_scan(prov, model);
	if (a != NULL) {
		a->group = g; /* a row of prov's configuration, or a built-in one */
		a->group_known = true;
	}
	return g;
}

const char *model_group_intern(struct intern *t, const struct provider_conf *prov,
                               const char *model, size_t len)
{
	char buf[TOKENS_MODEL_MAX + 1];
	if (len == 0 || len > TOKENS_MODEL_MAX)
		return NULL;
	memcpy(buf, model, len);
	buf[len] = '\0';
	const char *g = model_group(prov, buf);
	return g != NULL ? intern_get(t, g, strlen(g)) : intern_get(t, buf, len);
}

/* ---------- the model of a request ---------- */

static bool name_valid(const char *p, size_t n)
{
	if (n == 0 || n > TOKENS_MODEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
			return false;
	}
	return true;
}

static bool seg_is(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

bool model_from_path(const char *path, size_t len, const char **name, size_t *name_len)
{
	const char *end = path, *stop = path + len;
	const char *prev = NULL, *seg;
	size_t prev_n = 0;
	*name = NULL;
	*name_len = 0;
	while (end < stop && *end != '?' && *end != '#')
		end++;
	/* Segment by segment, remembering the one before. */
	for (const char *p = path; p < end; prev = seg) {
		while (p < end && *p == '/')
			p++;
		seg = p;
		while (p < end && *p != '/')
			p++;
		size_t n = (size_t)(p - seg);
		if (n == 0)
			break;
		if (prev != NULL &&
		    (seg_is(prev, prev_n, "models") || seg_is(prev, prev_n, "tunedModels"))) {
			const char *colon = memchr(seg, ':', n);
			if (colon != NULL && colon > seg && colon + 1 < seg + n &&
			    name_valid(seg, (size_t)(colon - seg))) {
				*name = seg;
				*name_len = (size_t)(colon - seg);
				return true;
			}
		}
		if (prev != NULL && seg_is(prev, prev_n, "deployments") && seg > path + 8 &&
		    name_valid(seg, n)) {
			/* .../openai/deployments/NAME */
			const char *q = prev - 1;
			if (q - path >= 7 && memcmp(q - 7, "/openai", 7) == 0) {
				*name = seg;
				*name_len = n;
				return true;
			}
		}
		prev_n = n;
	}
	return false;
}

enum model_source model_of_request(const char *path, size_t path_len,
                                   const struct tokens_cost *cost, char *buf, const char **name,
                                   size_t *len)
{
	if (path != NULL && model_from_path(path, path_len, name, len))
		return MODEL_PATH;
	if (cost != NULL && (*name = tokens_model_name(cost, buf, len)) != NULL)
		return MODEL_BODY;
	*name = NULL;
	*len = 0;
	return MODEL_NONE;
}
