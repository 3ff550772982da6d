/* SPDX-License-Identifier: Apache-2.0 */
/* model_memo — what a provider's model rules answered for a model name,
 * remembered, so that a request pays a lookup rather than a scan of patterns
 * (fnmatch per row) for its model's group and, for a new lane, its plan
 * (issue 27.6).
 *
 * One memo per provider of a loaded configuration, owned by it (config_free
 * frees it): a reload builds a new configuration, hence new, empty memos, so
 * no answer outlives the rules it came from. The only part of a loaded
 * configuration that changes after the load; one thread (the loop) uses it.
 *
 * Names come from requests: the memo holds MODEL_MEMO_MAX names at most and
 * starts over empty when full, so a client that sends a new name every time
 * costs a scan per request, as without the memo, and no more memory.
 * Pure: no I/O. */
#ifndef PACERD_MODEL_MEMO_H
#define PACERD_MODEL_MEMO_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"

#define MODEL_MEMO_MAX 1024

/* What the rules said of one name; each half is filled by its reader the
 * first time it asks (model_group() and config_plan_for()). */
struct model_answer {
	bool group_known;
	bool plan_known;
	const char *group;                  /* the group of the best group row; NULL: its own */
	const struct model_rule *plan_rule; /* the best model_plans row; NULL: none */
};

struct model_memo;

struct model_memo *model_memo_new(void);
void model_memo_free(struct model_memo *m);

/* The answer kept for `name` (NUL-terminated, at most CONFIG_MODEL_MAX
 * bytes), added blank (nothing known) when absent. Valid until the next call
 * on the memo. NULL when the name is too long or out of memory: the caller
 * scans. */
struct model_answer *model_memo_get(struct model_memo *m, const char *name);

/* Names held. */
size_t model_memo_count(const struct model_memo *m);

#endif
