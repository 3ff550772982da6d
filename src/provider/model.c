/* SPDX-License-Identifier: Apache-2.0 */
/* model — see model.h. */
#include "provider/model.h"

#include "core/model_memo.h"
#include "provider/profile.h"

#include <string.h>

const struct model_rule *model_builtin_groups(const struct provider_conf *prov, size_t *n)
{
	const struct provider_profile *pp = profile_of(prov);
	*n = pp->n_model_groups;
	return pp->n_model_groups > 0 ? pp->model_groups : NULL;
}

static const char *group_by_scan(const struct provider_conf *prov, const char *model)
{
	const struct model_rule *r =
	    config_model_rule(prov->model_groups, prov->n_model_groups, model);
	size_t n;
	if (r == NULL) {
		const struct model_rule *rows = model_builtin_groups(prov, &n);
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

/* The paths that name a model (PROVIDERS.md §10), one row each: the segment
 * before the name, the one right before that (NULL: any), and whether the
 * segment is NAME:METHOD (the name ends at its first ':', and a method
 * follows). Read for every provider: a gateway in front of Gemini or an Azure
 * resource speaks their paths. */
static const struct model_path {
	const char *parent, *grandparent;
	bool method;
} model_paths[] = {
    {"models", NULL, true},           /* Gemini: …/models/gemini-2.5-flash:generateContent */
    {"tunedModels", NULL, true},      /* Gemini: …/tunedModels/NAME:generateContent */
    {"deployments", "openai", false}, /* Azure: …/openai/deployments/NAME/chat/completions */
};

/* Whether `seg` (n bytes), after the segments prev and prev2 (NULL: none),
 * names a model as row r says; *name_len then. */
static bool path_names(const struct model_path *r, const char *path, const char *prev2,
                       size_t prev2_n, const char *prev, size_t prev_n, const char *seg, size_t n,
                       size_t *name_len)
{
	if (prev == NULL || !seg_is(prev, prev_n, r->parent))
		return false;
	/* the grandparent right before the parent, one '/' between, and a '/'
	 * before it ("/openai/deployments/") */
	if (r->grandparent != NULL &&
	    (prev2 == NULL || prev2 == path || prev2[-1] != '/' ||
	     !seg_is(prev2, prev2_n, r->grandparent) || prev2 + prev2_n + 1 != prev))
		return false;
	size_t k = n;
	if (r->method) {
		const char *colon = memchr(seg, ':', n);
		if (colon == NULL || colon + 1 >= seg + n)
			return false;
		k = (size_t)(colon - seg);
	}
	if (!name_valid(seg, k))
		return false;
	*name_len = k;
	return true;
}

bool model_from_path(const char *path, size_t len, const char **name, size_t *name_len)
{
	const char *end = path, *stop = path + len;
	const char *prev = NULL, *prev2 = NULL;
	size_t prev_n = 0, prev2_n = 0;
	*name = NULL;
	*name_len = 0;
	while (end < stop && *end != '?' && *end != '#')
		end++;
	/* Segment by segment, remembering the two before. */
	for (const char *p = path; p < end;) {
		while (p < end && *p == '/')
			p++;
		const char *seg = p;
		while (p < end && *p != '/')
			p++;
		size_t n = (size_t)(p - seg);
		if (n == 0)
			break;
		for (size_t i = 0; i < sizeof(model_paths) / sizeof(model_paths[0]); i++)
			if (path_names(&model_paths[i], path, prev2, prev2_n, prev, prev_n, seg, n,
			               name_len)) {
				*name = seg;
				return true;
			}
		prev2 = prev;
		prev2_n = prev_n;
		prev = seg;
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
