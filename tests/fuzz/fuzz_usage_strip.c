/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: usage_strip, both sides.
 *
 * The stream: the input fed whole and in chunks of the size its first byte
 * picks must give the client the same bytes; a stream with no usage chunk
 * dropped and no ,"usage":null in it must come out as it went in.
 * The request: the input as a body; the edit tokens_estimate() finds and
 * usage_inject_request() applies must be the one jansson's reading of the
 * body calls for (stream true, stream_options absent or an object without
 * include_usage true), and what it makes must load with jansson as the body
 * with stream_options.include_usage set to true. Any difference aborts. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/tokens.h"
#include "provider/usage_strip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct out {
	char *buf;
	size_t len, cap;
};

static void collect(void *ctx, const char *data, size_t len)
{
	struct out *o = ctx;
	if (o->len + len > o->cap) {
		size_t cap = 2 * (o->len + len);
		char *b = realloc(o->buf, cap);
		if (b == NULL)
			abort();
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, data, len);
	o->len += len;
}

static void strip(const char *in, size_t n, size_t step, struct out *o, bool *dropped)
{
	struct usage_strip s;
	usage_strip_init(&s);
	for (size_t off = 0; off < n; off += step)
		usage_strip_feed(&s, in + off, n - off < step ? n - off : step, collect, o);
	usage_strip_finish(&s, collect, o);
	*dropped = s.dropped;
	usage_strip_free(&s);
}

static void check_stream(const char *in, size_t n, size_t step)
{
	struct out whole = {0}, chunked = {0};
	bool d1, d2;
	strip(in, n, n > 0 ? n : 1, &whole, &d1);
	strip(in, n, step, &chunked, &d2);
	if (whole.len != chunked.len || d1 != d2 ||
	    (whole.len > 0 && memcmp(whole.buf, chunked.buf, whole.len) != 0))
		abort();
	if (!d1 && memmem(in, n, ",\"usage\":null", 13) == NULL &&
	    (whole.len != n || (n > 0 && memcmp(whole.buf, in, n) != 0)))
		abort();
	free(whole.buf);
	free(chunked.buf);
}

/* What the body needs, read by jansson the way usage_strip.c once did it. */
static json_t *expected_body(const char *body, size_t len)
{
	json_t *root = json_loadb(body, len, 0, NULL);
	if (root == NULL || !json_is_object(root) || !json_is_true(json_object_get(root, "stream")))
		goto none;
	json_t *so = json_object_get(root, "stream_options");
	if (so == NULL) {
		so = json_object();
		if (json_object_set_new(root, "stream_options", so) != 0)
			abort();
	} else if (!json_is_object(so) || json_is_true(json_object_get(so, "include_usage"))) {
		goto none;
	}
	if (json_object_set_new(so, "include_usage", json_true()) != 0)
		abort();
	return root;
none:
	json_decref(root);
	return NULL;
}

static void check_request(const char *body, size_t len)
{
	struct tokens_cost cost;
	tokens_estimate(body, len, 0, &cost);
	char *out = NULL;
	size_t out_len = 0;
	int rc = usage_inject_request(body, len, &cost, &out, &out_len);
	if (rc == -1)
		return;
	/* jansson drops a NUL byte after a number or literal, the scanner
	 * refuses it (fuzz_tokens.c): no comparison there. */
	if (memchr(body, '\0', len) == NULL) {
		json_t *want = expected_body(body, len);
		if ((rc == 1) != (want != NULL))
			abort();
		if (rc == 1) {
			json_t *got = json_loadb(out, out_len, 0, NULL);
			if (got == NULL || !json_equal(got, want))
				abort();
			json_decref(got);
		}
		json_decref(want);
	}
	if (rc == 1 && out[out_len] != '\0')
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t step = size > 0 ? (size_t)data[0] % 17 + 1 : 1;
	const char *in = size > 0 ? (const char *)data + 1 : "";
	size_t n = size > 0 ? size - 1 : 0;
	check_stream(in, n, step);
	check_request((const char *)data, size);
	return 0;
}
