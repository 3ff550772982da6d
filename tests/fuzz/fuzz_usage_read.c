/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: the usage of an answer read as its bytes arrive.
 *   - the input as one JSON document, fed in one piece and in pieces of
 *     sizes picked from the input: every way must say the same;
 *   - when jansson loads it (and it holds no NUL byte, which jansson drops
 *     after a number or a literal), what the tree says (tests/unit/usage_ref.h);
 *   - the same document as an SSE data: line, framed and cut: the same again;
 *   - the input as an event stream of its own, in pieces: no crash, no leak.
 * Any difference aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/usage_read.h"
#include "provider/usage_sse.h"
#include "usage_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct said {
	bool complete, error;
	struct tokens_usage u;
};

static void read_doc(struct usage_read *r, const char *d, size_t n, size_t step, size_t jitter,
                     struct said *out)
{
	memset(out, 0, sizeof(*out));
	usage_read_start(r);
	for (size_t at = 0, k = 0; at < n; k++) {
		size_t s = step + (jitter != 0 ? (k * 7919) % jitter : 0);
		if (s > n - at)
			s = n - at;
		usage_read_feed(r, d + at, s);
		at += s;
	}
	out->complete = usage_read_end(r, &out->u, &out->error);
}

static bool same(const struct said *a, const struct said *b)
{
	return a->complete == b->complete && a->error == b->error && ref_usage_same(&a->u, &b->u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *d = (const char *)data;
	struct usage_read r;
	struct said whole, cut;
	usage_read_init(&r);
	read_doc(&r, d, size, size > 0 ? size : 1, 0, &whole);
	size_t step = size > 0 ? data[0] % 17 + 1 : 1;
	read_doc(&r, d, size, step, 0, &cut);
	if (!same(&whole, &cut))
		abort();
	read_doc(&r, d, size, 1, size > 1 ? data[size - 1] % 61 + 1 : 0, &cut);
	if (!same(&whole, &cut))
		abort();
	usage_read_free(&r);

	if (memchr(d, '\0', size) == NULL) {
		struct tokens_usage ref, sse_ref = {0};
		bool valid, ref_error = false;
		ref_tokens_usage_json(d, size, &ref, &valid);
		if (valid) {
			ref_sse_data(d, size, &sse_ref, &ref_error);
			if (!ref_usage_same(&whole.u, &ref) ||
			    !ref_usage_same(&whole.u, &sse_ref) || whole.error != ref_error)
				abort();
		}
	}

	/* as a data: line, when it is one line */
	if (memchr(d, '\n', size) == NULL && memchr(d, '\r', size) == NULL) {
		struct usage_sse s;
		usage_sse_init(&s);
		usage_sse_feed(&s, "data:", 5);
		for (size_t at = 0; at < size; at += step)
			usage_sse_feed(&s, d + at, size - at < step ? size - at : step);
		usage_sse_feed(&s, "\n\n", 2);
		usage_sse_finish(&s);
		/* one leading space is the field's, not the document's */
		struct usage_read r2;
		struct said line;
		usage_read_init(&r2);
		size_t skip = size > 0 && d[0] == ' ' ? 1 : 0;
		read_doc(&r2, d + skip, size - skip, size, 0, &line);
		usage_read_free(&r2);
		if (s.error != line.error || !ref_usage_same(&s.usage, &line.u))
			abort();
		usage_sse_free(&s);
	}

	/* as a stream */
	struct usage_sse s;
	usage_sse_init(&s);
	for (size_t at = 0; at < size; at += step * 97)
		usage_sse_feed(&s, d + at, size - at < step * 97 ? size - at : step * 97);
	usage_sse_finish(&s);
	usage_sse_free(&s);
	return 0;
}
