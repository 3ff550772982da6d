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
