/* SPDX-License-Identifier: Apache-2.0 */
/* model — which model a request is for, and which group of models shares its
 * budget (DESIGN §2, PROVIDERS.md §10).
 *
 * The model comes from the path for Gemini (models/NAME:method) and Azure
 * (openai/deployments/NAME/...), else from the JSON body's top-level "model"
 * (tokens_estimate() reads it in its one scan). Models that share a budget
 * form a group: the provider's model_groups rows first, then its profile's
 * rows (profile.c: only where the provider documents the sharing), else the
 * model is its own group. Pure: no I/O. */
#ifndef PACERD_MODEL_H
#define PACERD_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "core/intern.h"
#include "provider/tokens.h"

/* The model a path names: Gemini's .../models/NAME:METHOD (tunedModels too,
 * any version or Vertex AI prefix before it; METHOD non-empty, such as
 * generateContent, streamGenerateContent, countTokens, embedContent) and
 * Azure's .../openai/deployments/NAME[/...]. The query is not looked at.
 * True with *name (into path) and *len when the path names a valid model (the
 * rules of tokens.h: 1 to TOKENS_MODEL_MAX bytes, printable ASCII but space,
 * '"' and '\\'); false otherwise (/v1/models, /v1beta/models/NAME without a
 * method, files, batches). Percent-escapes are kept as they are. */
bool model_from_path(const char *path, size_t len, const char **name, size_t *name_len);

enum model_source { MODEL_NONE, MODEL_PATH, MODEL_BODY };

/* The model of a request: the path's when it names one, else the body's
 * (cost: tokens_estimate()'s detail of the body, or NULL). *name points into
 * the path, the body, or buf (TOKENS_MODEL_MAX bytes: an escaped body name,
 * decoded); not NUL-terminated. MODEL_NONE (*name NULL, *len 0): the request
 * has no model (listing models, files): the scope's model-less lane. */
enum model_source model_of_request(const char *path, size_t path_len,
                                   const struct tokens_cost *cost, char *buf, const char **name,
                                   size_t *len);

/* The group of `model` (NUL-terminated) at prov: the best row of
 * prov->model_groups, else of its profile's rows (same rules:
 * an exact name first, then the most literal characters, then the first).
 * NULL when none matches: the model is its own group. The rows are scanned
 * once per name: the answer is kept in prov->memo (model_memo.h). */
const char *model_group(const struct provider_conf *prov, const char *model);

/* The group of model[0..len) at prov, interned in t (one more reference, to
 * let go with intern_put()): the group's name, or the model's own. NULL when
 * len is 0 or above TOKENS_MODEL_MAX, or out of memory. */
const char *model_group_intern(struct intern *t, const struct provider_conf *prov,
                               const char *model, size_t len);

/* The built-in rows of a provider (its profile's), for `pacerd plan` and the
 * docs: n set to their count; NULL when it has none. */
const struct model_rule *model_builtin_groups(const struct provider_conf *prov, size_t *n);

#endif
