/* SPDX-License-Identifier: Apache-2.0 */
/* model_memo — see model_memo.h.
 *
 * A sorted array of names and a binary search: a provider sees a few dozen
 * model names, each added once; the insertion's move is bounded by
 * MODEL_MEMO_MAX pointers, and nothing a client sends can make a lookup
 * slower than log2(MODEL_MEMO_MAX) string comparisons. */
#include "core/model_memo.h"

#include <stdlib.h>
#include <string.h>

struct memo_entry {
	struct model_answer answer;
	char name[];
};

struct model_memo {
	size_t n;
	struct memo_entry *entry[MODEL_MEMO_MAX]; /* sorted by name */
};

struct model_memo *model_memo_new(void)
{
	return calloc(1, sizeof(struct model_memo));
}

static void forget_all(struct model_memo *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->entry[i]);
	m->n = 0;
}

void model_memo_free(struct model_memo *m)
{
	if (m == NULL)
		return;
	forget_all(m);
	free(m);
}

size_t model_memo_count(const struct model_memo *m)
{
	return m != NULL ? m->n : 0;
}

struct model_answer *model_memo_get(struct model_memo *m, const char *name)
{
	size_t len = strnlen(name, CONFIG_MODEL_MAX + 1);
	if (m == NULL || len > CONFIG_MODEL_MAX)
		return NULL;
	size_t lo = 0, hi = m->n; /* where name is, or goes */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(m->entry[mid]->name, name);
		if (r == 0)
			return &m->entry[mid]->answer;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	struct memo_entry *e = calloc(1, sizeof(*e) + len + 1);
	if (e == NULL)
		return NULL;
	memcpy(e->name, name, len + 1);
	if (m->n == MODEL_MEMO_MAX) {
		forget_all(m);
		lo = 0;
	}
	memmove(&m->entry[lo + 1], &m->entry[lo], (m->n - lo) * sizeof(m->entry[0]));
	m->entry[lo] = e;
	m->n++;
	return &e->answer;
}
