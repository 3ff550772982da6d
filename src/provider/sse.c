/* SPDX-License-Identifier: Apache-2.0 */
/* sse — see sse.h. */
#include "provider/sse.h"

#include <stdlib.h>
#include <string.h>

static const char bom[] = "\xEF\xBB\xBF", crlf[] = "\r\n";

void sse_framer_init(struct sse_framer *f, size_t max)
{
	memset(f, 0, sizeof(*f));
	f->max = max;
}

void sse_framer_free(struct sse_framer *f)
{
	free(f->buf);
	f->buf = NULL;
	f->len = f->cap = 0;
}

/* A whole line: raw_len bytes at raw, the first text_len its text. */
static void give(struct sse_framer *f, const char *raw, size_t raw_len, size_t text_len, bool ended,
                 sse_line_fn fn, void *ctx)
{
	struct sse_line l = {raw, text_len, raw, raw_len, false, ended};
	if (!f->started) {
		f->started = true;
		if (text_len >= 3 && memcmp(raw, bom, 3) == 0) {
			l.text += 3;
			l.len -= 3;
		}
	}
	fn(ctx, &l);
}

/* n raw bytes of a line over the cap; `end`: they include the line's end. */
static void give_piece(struct sse_framer *f, const char *raw, size_t n, bool end, sse_line_fn fn,
                       void *ctx)
{
	f->started = true;
	if (n == 0)
		return;
	struct sse_line l = {raw, 0, raw, n, true, end};
	fn(ctx, &l);
}

/* Room for need bytes (need <= max + 2): doubled from 256, the last step
 * only as far as the cap, so that a line at the cap does not cost twice. */
static bool room(struct sse_framer *f, size_t need)
{
	if (need <= f->cap)
		return true;
	size_t cap = f->cap ? f->cap : 256;
	while (cap < need)
		cap *= 2;
	if (cap > f->max + 2)
		cap = f->max + 2;
	char *b = realloc(f->buf, cap);
	if (b == NULL)
		return false;
	f->buf = b;
	f->cap = cap;
	return true;
}

/* Keeps k more bytes of the text of a line that goes on, with room for its
 * end (CR LF) after them. Over the cap, or out of memory, the line is cut:
 * what was kept and these bytes go as pieces, and so will the rest. */
static void keep(struct sse_framer *f, const char *p, size_t k, sse_line_fn fn, void *ctx)
{
	if (f->cut) {
		give_piece(f, p, k, false, fn, ctx);
		return;
	}
	if (k > f->max - f->len || !room(f, f->len + k + 2)) {
		f->cut = true;
		give_piece(f, f->buf, f->len, false, fn, ctx);
		f->len = 0;
		give_piece(f, p, k, false, fn, ctx);
		return;
	}
	memcpy(f->buf + f->len, p, k);
	f->len += k;
}

/* The line at start (text bytes of text, then its end of term bytes) ends. */
static void end_line(struct sse_framer *f, const char *start, size_t text, size_t term,
                     sse_line_fn fn, void *ctx)
{
	if (f->len == 0 && !f->cut) {
		if (text <= f->max)
			give(f, start, text + term, text, true, fn, ctx); /* no copy */
		else
			give_piece(f, start, text + term, true, fn, ctx);
		return;
	}
	keep(f, start, text, fn, ctx);
	if (f->cut) {
		give_piece(f, start + text, term, true, fn, ctx);
		f->cut = false;
		return;
	}
	memcpy(f->buf + f->len, start + text, term);
	give(f, f->buf, f->len + term, f->len, true, fn, ctx);
	f->len = 0;
}

void sse_framer_feed(struct sse_framer *f, const char *data, size_t n, sse_line_fn fn, void *ctx)
{
	size_t i = 0;
	if (n == 0)
		return;
	/* A CR ended the last chunk: an LF here is the rest of that line's end. */
	if (f->cr) {
		f->cr = false;
		size_t text = f->len - 1;
		if (data[0] == '\n') {
			f->buf[f->len++] = '\n';
			i = 1;
		}
		give(f, f->buf, f->len, text, true, fn, ctx);
		f->len = 0;
	} else if (f->cut_cr) {
		f->cut_cr = false;
		i = data[0] == '\n' ? 1 : 0;
		give_piece(f, crlf, 1 + i, true, fn, ctx);
	}
	while (i < n) {
		const char *start = data + i;
		const char *lf = memchr(start, '\n', n - i);
		size_t span = lf != NULL ? (size_t)(lf - start) : n - i;
		const char *end = memchr(start, '\r', span);
		if (end == NULL)
			end = lf;
		if (end == NULL) {
			keep(f, start, n - i, fn, ctx);
			return;
		}
		size_t text = (size_t)(end - start), e = (size_t)(end - data);
		if (*end == '\r' && e + 1 == n) {
			/* Its end is a CR that ends the chunk: the line is
			 * given once the next byte says whether LF follows. */
			keep(f, start, text, fn, ctx);
			if (f->cut) {
				f->cut = false;
				f->cut_cr = true; /* its last piece, the CR, waits too */
			} else {
				f->buf[f->len++] = '\r';
				f->cr = true;
			}
			return;
		}
		size_t term = *end == '\r' && end[1] == '\n' ? 2 : 1;
		end_line(f, start, text, term, fn, ctx);
		i = e + term;
	}
}

void sse_framer_finish(struct sse_framer *f, sse_line_fn fn, void *ctx)
{
	if (f->cr)
		give(f, f->buf, f->len, f->len - 1, true, fn, ctx);
	else if (f->cut_cr)
		give_piece(f, crlf, 1, true, fn, ctx);
	else if (f->len > 0)
		give(f, f->buf, f->len, f->len, false, fn, ctx);
	f->len = 0;
	f->cr = f->cut = f->cut_cr = f->started = false;
}

enum sse_kind sse_field_of(const char *text, size_t len, struct sse_field *out)
{
	if (len == 0)
		return SSE_BLANK;
	if (text[0] == ':')
		return SSE_COMMENT;
	const char *colon = memchr(text, ':', len);
	out->name = text;
	out->name_len = colon != NULL ? (size_t)(colon - text) : len;
	out->value = colon != NULL ? colon + 1 : text + len;
	out->value_len = (size_t)(text + len - out->value);
	if (out->value_len > 0 && out->value[0] == ' ') {
		out->value++;
		out->value_len--;
	}
	return SSE_FIELD;
}

bool sse_field_is(const struct sse_field *f, const char *name)
{
	size_t n = strlen(name);
	return f->name_len == n && memcmp(f->name, name, n) == 0;
}
