/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for stopwatch: when an answer's tokens came, read from its body
 * in pieces of any size. */
#include <string.h>

#include "proxy/stopwatch.h"
#include "unit.h"

static const char STREAM[] = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
                             "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
                             "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
                             "data: [DONE]\n\n";

START_TEST(times_the_first_event_and_the_stream)
{
	struct stopwatch w;
	stopwatch_start(&w, true, true, 1000);
	ck_assert(stopwatch_first_ms(&w) < 0);
	/* a comment while the request waits is no token */
	ck_assert(!stopwatch_feed(&w, ": keep-alive\n\n", 14, 1100));
	ck_assert(stopwatch_feed(&w, "data: {\"x\":1}\n\n", 15, 1250));
	ck_assert_double_eq(stopwatch_first_ms(&w), 250);
	ck_assert(!stopwatch_feed(&w, "data: {\"x\":2}\n\ndata: {\"x\":3}\n\n", 30, 1270));
	ck_assert(!stopwatch_feed(&w, "event: delta\ndata: {\"x\":4}\n\n", 28, 1400));
	ck_assert(!stopwatch_feed(&w, "data: {\"x\":5}\n\n", 15, 1410));
	struct stopwatch_times t;
	stopwatch_times(&w, &t);
	ck_assert_double_eq(t.first_ms, 250);
	ck_assert_double_eq(t.stream_ms, 160);
	ck_assert_uint_eq(t.events, 4); /* after the first chunk's one */
	ck_assert_double_eq(t.max_gap_ms, 130);
}
END_TEST

START_TEST(pieces_of_any_size)
{
	/* the same stream cut at every offset into two pieces, and byte by
	 * byte: always 4 data events, the first in the piece that holds its
	 * colon */
	size_t n = strlen(STREAM);
	for (size_t cut = 0; cut <= n; cut++) {
		struct stopwatch w;
		stopwatch_start(&w, true, true, 0);
		bool a = stopwatch_feed(&w, STREAM, cut, 10);
		bool b = stopwatch_feed(&w, STREAM + cut, n - cut, 20);
		ck_assert_uint_eq(w.events, 4);
		ck_assert(a != b);
		ck_assert_int_eq(a, cut >= 5);
	}
	struct stopwatch w;
	stopwatch_start(&w, true, true, 0);
	for (size_t i = 0; i < n; i++)
		stopwatch_feed(&w, STREAM + i, 1, (int64_t)i);
	ck_assert_uint_eq(w.events, 4);
}
END_TEST

START_TEST(data_only_at_the_start_of_a_line)
{
	struct stopwatch w;
	stopwatch_start(&w, true, true, 0);
	const char *s = "event: x\nid: data: no\n: data:\ndatum: 1\ndat\n\r\ndata:1\r\n";
	ck_assert(stopwatch_feed(&w, s, strlen(s), 5));
	ck_assert_uint_eq(w.events, 1);
}
END_TEST

START_TEST(off_and_not_a_stream)
{
	struct stopwatch w;
	stopwatch_start(&w, false, true, 0);
	ck_assert(!w.on && !w.sse);
	ck_assert(!stopwatch_feed(&w, STREAM, strlen(STREAM), 5));
	stopwatch_start(&w, true, false, 0);
	ck_assert(w.on && !w.sse);
	ck_assert(!stopwatch_feed(&w, STREAM, strlen(STREAM), 5));
	struct stopwatch_times t;
	stopwatch_times(&w, &t);
	ck_assert(t.first_ms < 0);
	ck_assert_uint_eq(t.events, 0);
}
END_TEST

static Suite *stopwatch_suite(void)
{
	Suite *s = suite_create("stopwatch");
	TCase *c = tcase_create("core");
	tcase_add_test(c, times_the_first_event_and_the_stream);
	tcase_add_test(c, pieces_of_any_size);
	tcase_add_test(c, data_only_at_the_start_of_a_line);
	tcase_add_test(c, off_and_not_a_stream);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("stopwatch", stopwatch_suite)
