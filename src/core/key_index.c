/* SPDX-License-Identifier: Apache-2.0 */
/* key_index — see key_index.h.
 *
 * A sorted array and a binary search (simpler than a hash table, and nothing
 * a client sends can make it slower): the rows are ordered by provider, then
 * the 48-bit value of the entry's first 12 hex digits, then the entry's place
 * in the file. Every entry that can prefix a hash shares those 12 digits with
 * it, so the candidates of a lookup are one run of rows, tried in file order;
 * entries longer than 12 digits that share the first 12 are rare, so the run
 * is one row in practice. */
#include "core/key_index.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_DIGITS 12 /* the shortest key_sha256 config.c accepts */

struct key_row {
	const char *provider;
	uint64_t head; /* the first HEAD_DIGITS hex digits, as a number */
	size_t pos;    /* in the file */
	const struct key_conf *key;
};

struct key_index {
	size_t n;
	struct key_row row[];
};

/* The value of s's first HEAD_DIGITS digits (lower-case hex only, as
 * config.c stores them); false when s is shorter or holds anything else. */
static bool head_of(const char *s, uint64_t *v)
{
	uint64_t x = 0;
	for (size_t i = 0; i < HEAD_DIGITS; i++) {
		char ch = s[i];
		unsigned d;
		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else
			return false; /* also the NUL of a shorter string */
		x = x << 4 | d;
	}
	*v = x;
	return true;
}

/* Orders by provider and head; `pos` breaks ties when given. */
static int cmp_row(const struct key_row *a, const struct key_row *b, bool by_pos)
{
	int r = strcmp(a->provider, b->provider);
	if (r != 0)
		return r;
	if (a->head != b->head)
		return a->head < b->head ? -1 : 1;
	return by_pos ? (a->pos > b->pos) - (a->pos < b->pos) : 0;
}

static int cmp_sort(const void *a, const void *b)
{
	return cmp_row(a, b, true);
}

struct key_index *key_index_build(const struct key_conf *keys, size_t n)
{
	struct key_index *ix = malloc(sizeof(*ix) + n * sizeof(ix->row[0]));
	if (ix == NULL)
		return NULL;
	ix->n = 0;
	for (size_t i = 0; i < n; i++) {
		struct key_row r = {.provider = keys[i].provider, .pos = i, .key = &keys[i]};
		if (head_of(keys[i].key_sha256, &r.head)) /* always, for a loaded entry */
			ix->row[ix->n++] = r;
	}
	qsort(ix->row, ix->n, sizeof(ix->row[0]), cmp_sort);
	return ix;
}

void key_index_free(struct key_index *ix)
{
	free(ix);
}

const struct key_conf *key_index_find(const struct key_index *ix, const char *provider,
                                      const char *key_hash)
{
	struct key_row want = {.provider = provider};
	if (ix == NULL || provider == NULL || key_hash == NULL || !head_of(key_hash, &want.head))
		return NULL;
	/* The first row of the run equal to (provider, head). */
	size_t lo = 0, hi = ix->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cmp_row(&ix->row[mid], &want, false) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < ix->n && cmp_row(&ix->row[i], &want, false) == 0; i++) {
		const char *p = ix->row[i].key->key_sha256;
		if (strncmp(p, key_hash, strlen(p)) == 0)
			return ix->row[i].key;
	}
	return NULL;
}
