/* SPDX-License-Identifier: Apache-2.0 */
/* usage_sse — see usage_sse.h. */
#include "provider/usage_sse.h"

#include <string.h>

/* Where a line that comes in pieces is: not in one, at its start (a byte
 * order mark may come first on the stream's first line), in its field name,
 * after "data:" (one space may follow), in the data, or in a line not read. */
enum { CUT_NONE, CUT_BOM, CUT_NAME, CUT_SPACE, CUT_DATA, CUT_SKIP };

static const char bom[] = "\xEF\xBB\xBF", data_field[] = "data:";

void usage_sse_init(struct usage_sse *s)
{
	memset(s, 0, sizeof(*s));
	sse_framer_init(&s->framer, USAGE_SSE_LINE_KEEP);
	usage_read_init(&s->doc);
}

void usage_sse_start(struct usage_sse *s)
{
	memset(&s->usage, 0, sizeof(s->usage));
	s->error = false;
	s->cut = CUT_NONE;
	s->matched = 0;
	s->started = false;
	sse_framer_free(&s->framer);
	sse_framer_init(&s->framer, USAGE_SSE_LINE_KEEP);
	usage_read_start(&s->doc);
}

void usage_sse_free(struct usage_sse *s)
{
	sse_framer_free(&s->framer);
	usage_read_free(&s->doc);
}

static void data_end(struct usage_sse *s)
{
	usage_read_end(&s->doc, &s->usage, &s->error);
}

/* A whole line. Blank lines end events, ':' starts a comment
 * (": OPENROUTER PROCESSING", ": keep-alive"). */
static void whole_line(struct usage_sse *s, const struct sse_line *l)
{
	struct sse_field f;
	s->cut = CUT_NONE;
	if (!l->ended || sse_field_of(l->text, l->len, &f) != SSE_FIELD)
		return;
	if (sse_field_is(&f, "event")) {
		if (f.value_len == 5 && memcmp(f.value, "error", 5) == 0)
			s->error = true;
	} else if (sse_field_is(&f, "data")) {
		usage_read_start(&s->doc);
		usage_read_feed(&s->doc, f.value, f.value_len);
		data_end(s);
	}
}

/* A piece of a line over the framer's cap: only a data: line is read (an
 * "event: error" line is never that long). */
static void piece(struct usage_sse *s, const struct sse_line *l)
{
	const char *p = l->raw;
	size_t n = l->raw_len;
	if (l->ended) { /* its last piece ends with the line's end */
		if (n > 0 && p[n - 1] == '\n')
			n--;
		if (n > 0 && p[n - 1] == '\r')
			n--;
	}
	if (s->cut == CUT_NONE) {
		s->cut = s->started ? CUT_NAME : CUT_BOM;
		s->matched = 0;
		usage_read_start(&s->doc);
	}
	s->started = true;
	while (n > 0 && s->cut != CUT_DATA && s->cut != CUT_SKIP) {
		unsigned char c = (unsigned char)*p;
		if (s->cut == CUT_BOM) {
			if (c != (unsigned char)bom[s->matched]) {
				s->cut = s->matched == 0 ? CUT_NAME : CUT_SKIP;
				s->matched = 0;
				continue;
			}
			if (++s->matched == 3) {
				s->cut = CUT_NAME;
				s->matched = 0;
			}
		} else if (s->cut == CUT_NAME) {
			if (c != (unsigned char)data_field[s->matched]) {
				s->cut = CUT_SKIP;
				break;
			}
			if (++s->matched == 5)
				s->cut = CUT_SPACE;
		} else { /* CUT_SPACE */
			s->cut = CUT_DATA;
			if (c != ' ')
				continue;
		}
		p++;
		n--;
	}
	if (s->cut == CUT_DATA)
		usage_read_feed(&s->doc, p, n);
	if (l->ended) {
		if (s->cut == CUT_DATA || s->cut == CUT_SPACE)
			data_end(s);
		s->cut = CUT_NONE;
	}
}

void usage_sse_line(struct usage_sse *s, const struct sse_line *l)
{
	if (l->cut) {
		piece(s, l);
		return;
	}
	s->started = true;
	whole_line(s, l);
}

static void own_line(void *ctx, const struct sse_line *l)
{
	usage_sse_line(ctx, l);
}

void usage_sse_feed(struct usage_sse *s, const char *data, size_t n)
{
	sse_framer_feed(&s->framer, data, n, own_line, s);
}

void usage_sse_finish(struct usage_sse *s)
{
	sse_framer_finish(&s->framer, own_line, s);
	s->cut = CUT_NONE;
	s->started = false;
}
