/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the SSE framer: the lines of a stream whatever its chunks
 * (cut at every position, in two and three pieces, one byte at a time), a CR
 * at the end of a chunk, every byte given back once and in order, the cap on
 * a line, the byte order mark, and the fields of a line. */
#include <stdlib.h>
#include <string.h>

#include "provider/sse.h"
#include "unit.h"

/* What the framer gave, in a form that does not depend on the chunks: each
 * line as L<text> (~ when the stream stopped in it), each line over the cap
 * as C<its raw bytes>, pieces joined; and every raw byte, in order. */
struct got {
	char lines[4096];
	size_t n;
	char raw[4096];
	size_t raw_len;
	bool in_cut; /* pieces of a cut line are being joined */
	int calls;
};

static void put(struct got *g, const char *p, size_t n)
{
	ck_assert_uint_lt(g->n + n, sizeof(g->lines));
	memcpy(g->lines + g->n, p, n);
	g->n += n;
	g->lines[g->n] = '\0';
}

static void on_line(void *ctx, const struct sse_line *l)
{
	struct got *g = ctx;
	g->calls++;
	/* text lies inside raw; raw bytes all accounted for */
	ck_assert(l->text >= l->raw && l->text + l->len <= l->raw + l->raw_len);
	ck_assert_uint_lt(g->raw_len + l->raw_len, sizeof(g->raw));
	memcpy(g->raw + g->raw_len, l->raw, l->raw_len);
	g->raw_len += l->raw_len;
	if (l->cut) {
		ck_assert_uint_eq(l->len, 0);
		ck_assert_uint_gt(l->raw_len, 0);
		if (!g->in_cut)
			put(g, "C", 1);
		put(g, l->raw, l->raw_len);
		g->in_cut = !l->ended;
		if (l->ended)
			put(g, "|", 1);
		return;
	}
	ck_assert(!g->in_cut);
	put(g, "L", 1);
	put(g, l->text, l->len);
	put(g, l->ended ? "|" : "~|", l->ended ? 1 : 2);
}

/* Feeds `in` cut at the positions in cuts[0..k) (ascending), then finishes. */
static void frame(const char *in, size_t len, size_t max, const size_t *cuts, size_t k,
                  struct got *g)
{
	struct sse_framer f;
	memset(g, 0, sizeof(*g));
	sse_framer_init(&f, max);
	size_t at = 0;
	for (size_t i = 0; i <= k; i++) {
		size_t to = i < k ? cuts[i] : len;
		sse_framer_feed(&f, in + at, to - at, on_line, g);
		at = to;
	}
	sse_framer_finish(&f, on_line, g);
	sse_framer_free(&f);
	/* every byte back, once, in order */
	ck_assert_uint_eq(g->raw_len, len);
	ck_assert(memcmp(g->raw, in, len) == 0);
}

/* The same lines whatever the chunks: cut once at every position, twice at
 * every pair of positions, and one byte at a time. */
static void same_for_every_cut(const char *in, size_t max, const char *want)
{
	size_t len = strlen(in);
	struct got whole, g;
	frame(in, len, max, NULL, 0, &whole);
	ck_assert_str_eq(whole.lines, want);
	for (size_t i = 0; i <= len; i++) {
		frame(in, len, max, &i, 1, &g);
		ck_assert_str_eq(g.lines, want);
		for (size_t j = i; j <= len; j++) {
			size_t cuts[2] = {i, j};
			frame(in, len, max, cuts, 2, &g);
			ck_assert_str_eq(g.lines, want);
		}
	}
	size_t bytes[512];
	ck_assert_uint_lt(len, 512);
	for (size_t i = 0; i < len; i++)
		bytes[i] = i + 1;
	frame(in, len, max, bytes, len > 0 ? len - 1 : 0, &g);
	ck_assert_str_eq(g.lines, want);
}

START_TEST(every_line_end)
{
	/* CRLF, LF and a bare CR each end a line; CR CR is two lines */
	same_for_every_cut("\xEF\xBB\xBF"
	                   "data: a\r\n\r\nevent: error\rdata: b\n\n: comment\r\rdata: c\r\n",
	                   64, "Ldata: a|L|Levent: error|Ldata: b|L|L: comment|L|Ldata: c|");
}
END_TEST

START_TEST(a_cr_that_ends_a_chunk_waits)
{
	struct sse_framer f;
	struct got g;
	memset(&g, 0, sizeof(g));
	sse_framer_init(&f, 64);
	sse_framer_feed(&f, "data: x\r", 8, on_line, &g);
	ck_assert_int_eq(g.calls, 0); /* CR LF or CR? not known yet */
	sse_framer_feed(&f, "", 0, on_line, &g);
	ck_assert_int_eq(g.calls, 0);
	sse_framer_feed(&f, "\n", 1, on_line, &g);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_str_eq(g.lines, "Ldata: x|");
	ck_assert_uint_eq(g.raw_len, 9); /* the LF is that line's */
	/* a CR then another line: the CR alone was the end */
	sse_framer_feed(&f, "\r", 1, on_line, &g); /* a blank line, ended by CR */
	sse_framer_feed(&f, "data: y\n", 8, on_line, &g);
	ck_assert_str_eq(g.lines, "Ldata: x|L|Ldata: y|");
	/* the stream ends after a CR: the line is whole */
	sse_framer_feed(&f, "data: z\r", 8, on_line, &g);
	sse_framer_finish(&f, on_line, &g);
	ck_assert_str_eq(g.lines, "Ldata: x|L|Ldata: y|Ldata: z|");
	sse_framer_free(&f);
}
END_TEST

START_TEST(a_stream_that_stops_in_a_line)
{
	same_for_every_cut("data: a\ndata: b", 64, "Ldata: a|Ldata: b~|");
	same_for_every_cut("", 64, "");
	same_for_every_cut("\n\n\r\n", 64, "L|L|L|");
}
END_TEST

START_TEST(lines_over_the_cap_come_as_pieces)
{
	/* 8 bytes of text fit; 9 do not, wherever the chunks cut them */
	same_for_every_cut("12345678\n123456789\r\nab\n", 8, "L12345678|C123456789\r\n|Lab|");
	same_for_every_cut("123456789012\rab\r", 8, "C123456789012\r|Lab|");
	same_for_every_cut("abc\n0123456789", 8, "Labc|C0123456789");
}
END_TEST

START_TEST(the_byte_order_mark_once)
{
	same_for_every_cut("\xEF\xBB\xBF:x\n\xEF\xBB\xBF:y\n", 64, "L:x|L\xEF\xBB\xBF:y|");
	same_for_every_cut("\xEF\xBB\n", 64, "L\xEF\xBB|");
}
END_TEST

START_TEST(fields)
{
	struct sse_field f;
	ck_assert_int_eq(sse_field_of("", 0, &f), SSE_BLANK);
	ck_assert_int_eq(sse_field_of(": keep-alive", 12, &f), SSE_COMMENT);
	ck_assert_int_eq(sse_field_of("data: {\"a\":1}", 13, &f), SSE_FIELD);
	ck_assert(sse_field_is(&f, "data"));
	ck_assert(!sse_field_is(&f, "dat"));
	ck_assert(!sse_field_is(&f, "Data"));
	ck_assert_uint_eq(f.value_len, 7);
	ck_assert(memcmp(f.value, "{\"a\":1}", 7) == 0);
	sse_field_of("data:x", 6, &f); /* no space */
	ck_assert_uint_eq(f.value_len, 1);
	sse_field_of("data:  x", 8, &f); /* one space dropped, not two */
	ck_assert_uint_eq(f.value_len, 2);
	sse_field_of("data", 4, &f); /* no colon: all name */
	ck_assert(sse_field_is(&f, "data"));
	ck_assert_uint_eq(f.value_len, 0);
	sse_field_of("event:error:x", 13, &f); /* the first colon */
	ck_assert(sse_field_is(&f, "event"));
	ck_assert_uint_eq(f.value_len, 7);
}
END_TEST

static Suite *sse_suite(void)
{
	Suite *s = suite_create("sse");
	TCase *tc = tcase_create("framer");
	tcase_add_test(tc, every_line_end);
	tcase_add_test(tc, a_cr_that_ends_a_chunk_waits);
	tcase_add_test(tc, a_stream_that_stops_in_a_line);
	tcase_add_test(tc, lines_over_the_cap_come_as_pieces);
	tcase_add_test(tc, the_byte_order_mark_once);
	tcase_add_test(tc, fields);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("sse", sse_suite)
