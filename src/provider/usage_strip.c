/* SPDX-License-Identifier: Apache-2.0 */
/* usage_strip — see usage_strip.h. */
#include "provider/usage_strip.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "provider/sse.h"

static const char usage_null[] = ",\"usage\":null";

int usage_inject_request(const char *body, size_t len, const struct tokens_cost *cost, char **out,
                         size_t *out_len)
{
	const struct tokens_edit *e = &cost->ask_usage;
	if (e->text == NULL)
		return 0;
	size_t add = strlen(e->text), n = len - e->cut + add;
	char *b = malloc(n + 1);
	if (b == NULL)
		return -1;
	memcpy(b, body, e->at);
	memcpy(b + e->at, e->text, add);
	memcpy(b + e->at + add, body + e->at + e->cut, len - e->at - e->cut);
	b[n] = '\0';
	*out = b;
	*out_len = n;
	return 1;
}

void usage_strip_init(struct usage_strip *s)
{
	memset(s, 0, sizeof(*s));
	sse_framer_init(&s->framer, USAGE_STRIP_EVENT_MAX);
}

void usage_strip_free(struct usage_strip *s)
{
	sse_framer_free(&s->framer);
	free(s->held);
	s->held = NULL;
	s->held_len = s->held_cap = 0;
}

/* Whether the n bytes at p contain the literal lit. */
static bool contains(const char *p, size_t n, const char *lit)
{
	return memmem(p, n, lit, strlen(lit)) != NULL;
}

/* The injected usage chunk: "choices":[] and a "usage" object. */
static bool is_usage_chunk(const struct sse_field *data)
{
	return contains(data->value, data->value_len, "\"choices\":[]") &&
	       contains(data->value, data->value_len, "\"usage\":{");
}

/* Stops filtering: what is held goes, and every byte after it as it is. */
static void pass_through(struct usage_strip *s)
{
	s->passthrough = true;
	if (s->held_len > 0)
		s->emit(s->ctx, s->held, s->held_len);
	s->held_len = 0;
}

static void flush_held(struct usage_strip *s)
{
	if (s->held_len > 0)
		s->emit(s->ctx, s->held, s->held_len);
	s->held_len = 0;
}

/* A line of an event the client gets: a data line without a trailing
 * ,"usage":null before its closing brace. */
static void emit_line(struct usage_strip *s, const struct sse_line *l, bool data)
{
	size_t n = sizeof(usage_null) - 1;
	const char *close = l->text + l->len - 1; /* the brace, if it is one */
	if (data && l->len > n && *close == '}' && memcmp(close - n, usage_null, n) == 0) {
		s->emit(s->ctx, l->raw, (size_t)(close - n - l->raw));
		s->emit(s->ctx, close, (size_t)(l->raw + l->raw_len - close));
		return;
	}
	s->emit(s->ctx, l->raw, l->raw_len);
}

/* One line of the stream (sse.h). An event's fate is known at its first data
 * line: the usage chunk is dropped up to its blank line, any other event goes
 * on at once; lines before the first data line (event:, id:, comments) wait
 * for it. */
static void strip_line(void *ctx, const struct sse_line *l)
{
	struct usage_strip *s = ctx;
	if (!s->passthrough && l->cut)
		pass_through(s); /* a line this long is no chunk of a chat stream */
	if (s->passthrough) {
		s->emit(s->ctx, l->raw, l->raw_len);
		return;
	}
	struct sse_field f;
	enum sse_kind kind = sse_field_of(l->text, l->len, &f);
	bool data = kind == SSE_FIELD && sse_field_is(&f, "data");
	if (kind == SSE_BLANK) {
		if (s->event != USAGE_STRIP_DROP) {
			flush_held(s);
			s->emit(s->ctx, l->raw, l->raw_len);
		}
		s->event = USAGE_STRIP_OPEN;
		return;
	}
	if (s->event == USAGE_STRIP_DROP)
		return;
	if (s->event == USAGE_STRIP_OPEN && data) {
		if (is_usage_chunk(&f)) {
			s->event = USAGE_STRIP_DROP;
			s->dropped = true;
			s->held_len = 0;
			return;
		}
		s->event = USAGE_STRIP_KEEP;
		flush_held(s);
	}
	if (s->event == USAGE_STRIP_KEEP) {
		emit_line(s, l, data);
		return;
	}
	if (l->raw_len > USAGE_STRIP_EVENT_MAX - s->held_len ||
	    !grow_bytes(&s->held, &s->held_cap, s->held_len + l->raw_len, 256)) {
		pass_through(s);
		s->emit(s->ctx, l->raw, l->raw_len);
		return;
	}
	memcpy(s->held + s->held_len, l->raw, l->raw_len);
	s->held_len += l->raw_len;
}

void usage_strip_feed(struct usage_strip *s, const char *data, size_t n, usage_strip_emit emit,
                      void *ctx)
{
	s->emit = emit;
	s->ctx = ctx;
	sse_framer_feed(&s->framer, data, n, strip_line, s);
}

void usage_strip_line(struct usage_strip *s, const struct sse_line *l, usage_strip_emit emit,
                      void *ctx)
{
	s->emit = emit;
	s->ctx = ctx;
	strip_line(s, l);
}

void usage_strip_finish(struct usage_strip *s, usage_strip_emit emit, void *ctx)
{
	s->emit = emit;
	s->ctx = ctx;
	sse_framer_finish(&s->framer, strip_line, s);
	usage_strip_end(s, emit, ctx);
}

void usage_strip_end(struct usage_strip *s, usage_strip_emit emit, void *ctx)
{
	s->emit = emit;
	s->ctx = ctx;
	if (s->event != USAGE_STRIP_DROP)
		flush_held(s); /* an event the stream ended in, with no data line */
	s->held_len = 0;
	s->event = USAGE_STRIP_OPEN;
}

bool usage_api_is_chat_completions(const char *path, size_t len)
{
	static const char tail[] = "/chat/completions";
	const size_t n = sizeof(tail) - 1;
	if (path == NULL)
		return false;
	const char *q = memchr(path, '?', len);
	if (q != NULL)
		len = (size_t)(q - path);
	while (len > 0 && path[len - 1] == '/')
		len--;
	return len >= n && memcmp(path + len - n, tail, n) == 0;
}
