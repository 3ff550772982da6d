/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for usage_sse: the usage an event stream reports, read line by
 * line as it arrives in chunks of any size; data: lines of any length. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider/usage_sse.h"
#include "unit.h"

/* Feeds `stream` split once at every byte position, in 1-byte pieces and in
 * pieces of a few odd sizes; every way must give the same result. */
static void check_splits_n(const char *stream, size_t n, int64_t in, int64_t out, int64_t total,
                           bool err)
{
	static const size_t odd[] = {2, 3, 7, 100, 1023, 1025, 4096};
	size_t ways = n + 2 + sizeof odd / sizeof odd[0];
	for (size_t way = 0; way < ways; way++) {
		struct usage_sse s;
		usage_sse_init(&s);
		if (way <= n) {
			usage_sse_feed(&s, stream, way);
			usage_sse_feed(&s, stream + way, n - way);
		} else {
			size_t step = way == n + 1 ? 1 : odd[way - n - 2];
			for (size_t i = 0; i < n; i += step)
				usage_sse_feed(&s, stream + i, n - i < step ? n - i : step);
		}
		usage_sse_finish(&s);
		ck_assert_msg(s.usage.present == (in >= 0), "way %zu", way);
		if (in >= 0) {
			ck_assert_msg(s.usage.input == in, "way %zu: input %lld", way,
			              (long long)s.usage.input);
			ck_assert_msg(s.usage.output == out, "way %zu: output %lld", way,
			              (long long)s.usage.output);
			ck_assert_msg(s.usage.total == total, "way %zu", way);
		}
		ck_assert_msg(s.error == err, "way %zu: error", way);
		ck_assert_uint_le(s.framer.cap, USAGE_SSE_LINE_KEEP + 2);
		usage_sse_free(&s);
	}
}

static void check_splits(const char *stream, int64_t in, int64_t out, int64_t total, bool err)
{
	check_splits_n(stream, strlen(stream), in, out, total, err);
}

static const char openai_stream[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the "
    "\\\"usage\\\" and \\\"error\\\" words\"}}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
    "\"stop\"}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
    "\"completion_tokens\":12,\"total_tokens\":21}}\n\n"
    "data: [DONE]\n\n";

START_TEST(openai_include_usage)
{
	check_splits(openai_stream, 9, 12, 21, false);
}
END_TEST

/* A CR that ends the stream ends its last line: read at the stream's end
 * (the framer waits for the byte after a CR), not before. */
START_TEST(last_line_ended_by_cr)
{
	static const char stream[] = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,"
	                             "\"completion_tokens\":1,\"total_tokens\":5}}\r";
	check_splits(stream, 4, 1, 5, false);
	struct usage_sse s;
	usage_sse_init(&s);
	usage_sse_feed(&s, stream, sizeof(stream) - 1);
	ck_assert(!s.usage.present);
	usage_sse_finish(&s);
	ck_assert(s.usage.present);
	usage_sse_free(&s);
}
END_TEST

START_TEST(openai_crlf_and_comments)
{
	check_splits(": OPENROUTER PROCESSING\r\n\r\n"
	             ": OPENROUTER PROCESSING\r\n\r\n"
	             "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\n"
	             ":\"usage\":{\"prompt_tokens\":999}\r\n"
	             "data:{\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1,"
	             "\"total_tokens\":5}}\r\r"
	             "data: [DONE]\r\n\r\n",
	             4, 1, 5, false);
}
END_TEST

static const char anthropic_stream[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
    "\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{"
    "\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
    "\"text\":\"\"}}\n\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"Hello\"}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},\"usage\":{"
    "\"output_tokens\":7}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{"
    "\"output_tokens\":15}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

START_TEST(anthropic_cumulative)
{
	check_splits(anthropic_stream, 25, 15, 40, false);
}
END_TEST

START_TEST(errors_after_200)
{
	check_splits("event: message_start\n"
	             "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":"
	             "3,\"output_tokens\":1}}}\n\n"
	             "event: error\n"
	             "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
	             "\"message\":\"Overloaded\"}}\n\n",
	             3, 1, 4, true);
	/* event: error alone is enough, whatever its data */
	check_splits("event: error\ndata: oops\n\n", -1, 0, 0, true);
	/* OpenRouter: a data: JSON with a top-level error */
	check_splits(": OPENROUTER PROCESSING\n\n"
	             "data: {\"id\":\"g1\",\"object\":\"chat.completion.chunk\",\"error\":{"
	             "\"code\":502,\"message\":\"Provider returned error\"},\"choices\":[{"
	             "\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n",
	             -1, 0, 0, true);
	/* "error" inside content text is not an error, nor an event named otherwise */
	check_splits("data: {\"choices\":[{\"delta\":{\"content\":\"\\\"error\\\"\"}}]}\n\n"
	             "event: errors\ndata: {}\n\n",
	             -1, 0, 0, false);
}
END_TEST

START_TEST(gemini_and_responses)
{
	check_splits("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],"
	             "\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":1,"
	             "\"totalTokenCount\":6}}\r\n\r\n"
	             "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]}}],"
	             "\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":9,"
	             "\"totalTokenCount\":14}}\r\n\r\n",
	             5, 9, 14, false);
	check_splits(
	    "event: response.created\n"
	    "data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n"
	    "event: response.completed\n"
	    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\","
	    "\"usage\":{\"input_tokens\":11,\"output_tokens\":22,\"total_tokens\":33}}}\n\n",
	    11, 22, 33, false);
}
END_TEST

START_TEST(interrupted_and_empty)
{
	/* no usage chunk (an interrupted stream), a trailing partial line */
	check_splits("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n"
	             "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1",
	             -1, 0, 0, false);
	/* a whole line the stream stopped in, without its end, is not read */
	check_splits("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}", -1, 0, 0, false);
	check_splits(": keep-alive\n\n\n\n: keep-alive\n\n", -1, 0, 0, false);
	struct usage_sse s;
	usage_sse_init(&s);
	usage_sse_feed(&s, "", 0);
	usage_sse_feed(&s, NULL, 0);
	ck_assert(!s.usage.present && !s.error);
	usage_sse_free(&s);
	usage_sse_free(&s); /* idempotent */
}
END_TEST

/* A line of `len` bytes (its end included): `head`, padding of JSON text,
 * `tail`, `end`. */
static char *long_line(const char *head, const char *tail, const char *end, size_t len, size_t *n)
{
	static const char pad[] = "ab \\\"c\\\" {[,:]} caf\xc3\xa9 \\\\ \\n ";
	size_t h = strlen(head), t = strlen(tail), e = strlen(end);
	char *b = malloc(len + sizeof pad + h + t + e);
	ck_assert_ptr_nonnull(b);
	memcpy(b, head, h);
	size_t k = h;
	while (k + t + e < len) {
		memcpy(b + k, pad, sizeof pad - 1);
		k += sizeof pad - 1;
	}
	memcpy(b + k, tail, t);
	memcpy(b + k + t, end, e);
	*n = k + t + e;
	return b;
}

static const char completed_head[] =
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{"
    "\"id\":\"resp_1\",\"instructions\":\"";
static const char completed_tail[] =
    "\",\"output\":[{\"type\":\"message\",\"content\":[{\"text\":\"ok\"}]}],\"usage\":{"
    "\"input_tokens\":52000,\"input_tokens_details\":{\"cached_tokens\":48000},"
    "\"output_tokens\":310,\"total_tokens\":52310}}}";

/* Lines over the framer's cap come in pieces and are read as they come,
 * every line end, every cut: the usage of a response.completed line. */
START_TEST(lines_over_the_cap_are_read)
{
	static const char *const ends[] = {"\n\n", "\r\n\r\n", "\r\r", "\n"};
	for (size_t e = 0; e < 4; e++) {
		size_t n;
		char *line = long_line(completed_head, completed_tail, ends[e], 3000, &n);
		check_splits_n(line, n, 4000, 310, 4310, false);
		free(line);
	}
	/* a stream that begins with a byte order mark and a long data: line,
	 * and with the same line without its space; a long comment, a long
	 * "data" without a colon, a long field of another name: not read */
	static const struct {
		const char *head;
		bool read;
	} lines[] = {
	    {"\xEF\xBB\xBF"
	     "data: {\"usage\":{\"prompt_tokens\":4},\"pad\":\"",
	     true},
	    {"data:{\"usage\":{\"prompt_tokens\":4},\"pad\":\"", true},
	    {": {\"usage\":{\"prompt_tokens\":4},\"pad\":\"", false},
	    {"dat: {\"usage\":{\"prompt_tokens\":4},\"pad\":\"", false},
	    {"\xEF\xBB"
	     "data: {\"usage\":{\"prompt_tokens\":4},\"pad\":\"",
	     false},
	    {"datadata: {\"usage\":{\"prompt_tokens\":4},\"pad\":\"", false},
	};
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		size_t n;
		char *line = long_line(lines[i].head, "\"}", "\n\n", 2000, &n);
		check_splits_n(line, n, lines[i].read ? 4 : -1, 0, 4, false);
		free(line);
	}
	/* a long data: line with a top-level error */
	size_t n;
	char *line = long_line("data: {\"error\":{\"message\":\"", "\"}}", "\n\n", 5000, &n);
	check_splits_n(line, n, -1, 0, 0, true);
	free(line);
	/* a long line the stream stopped in is not read */
	line = long_line(completed_head, completed_tail, "", 5000, &n);
	check_splits_n(line, n, -1, 0, 0, false);
	free(line);
}
END_TEST

/* The 200 KiB and 2 MiB response.completed lines of a Responses API agent
 * (issue 28), after the usual small events, in network-sized chunks; the
 * memory held does not grow with the line. */
START_TEST(a_long_response_completed_is_read)
{
	static const char before[] =
	    "event: response.created\n"
	    "data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n"
	    "event: response.output_text.delta\n"
	    "data: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n";
	static const size_t sizes[] = {200 * 1024, 2 * 1024 * 1024};
	static const size_t chunks[] = {16384, 1400, 65536 + 7};
	for (size_t i = 0; i < 2; i++) {
		size_t n;
		char *line = long_line(completed_head, completed_tail, "\n\n", sizes[i], &n);
		for (size_t c = 0; c < 3; c++) {
			struct usage_sse s;
			usage_sse_init(&s);
			usage_sse_feed(&s, before, sizeof before - 1);
			for (size_t at = 0; at < n; at += chunks[c])
				usage_sse_feed(&s, line + at,
				               n - at < chunks[c] ? n - at : chunks[c]);
			usage_sse_finish(&s);
			ck_assert(s.usage.present && !s.error);
			ck_assert_int_eq(s.usage.input, 4000);
			ck_assert_int_eq(s.usage.cache_read, 48000);
			ck_assert_int_eq(s.usage.output, 310);
			ck_assert_int_eq(s.usage.total, 4310);
			ck_assert_uint_le(s.framer.cap, USAGE_SSE_LINE_KEEP + 2);
			ck_assert_uint_le(s.doc.value_cap, 512);
			usage_sse_free(&s);
		}
		free(line);
	}
}
END_TEST

/* A caller's framer with a larger cap (the meter's, when the usage_strip
 * filter runs) gives long lines whole: read the same. */
static void to_reader(void *ctx, const struct sse_line *l)
{
	usage_sse_line(ctx, l);
}

START_TEST(lines_from_a_callers_framer)
{
	size_t n;
	char *line = long_line(completed_head, completed_tail, "\r\n\r\n", 300 * 1024, &n);
	static const size_t caps[] = {16, 1024, 1024 * 1024};
	for (size_t c = 0; c < 3; c++) {
		struct sse_framer f;
		struct usage_sse s;
		sse_framer_init(&f, caps[c]);
		usage_sse_init(&s);
		for (size_t at = 0; at < n; at += 5000)
			sse_framer_feed(&f, line + at, n - at < 5000 ? n - at : 5000, to_reader,
			                &s);
		sse_framer_finish(&f, to_reader, &s);
		ck_assert_msg(s.usage.present, "cap %zu", caps[c]);
		ck_assert_int_eq(s.usage.total, 4310);
		/* a new stream forgets it */
		usage_sse_start(&s);
		ck_assert(!s.usage.present && !s.error);
		sse_framer_free(&f);
		usage_sse_free(&s);
	}
	free(line);
}
END_TEST

static Suite *usage_sse_suite(void)
{
	Suite *s = suite_create("usage_sse");
	TCase *tc = tcase_create("usage_sse");
	tcase_add_test(tc, openai_include_usage);
	tcase_add_test(tc, last_line_ended_by_cr);
	tcase_add_test(tc, openai_crlf_and_comments);
	tcase_add_test(tc, anthropic_cumulative);
	tcase_add_test(tc, errors_after_200);
	tcase_add_test(tc, gemini_and_responses);
	tcase_add_test(tc, interrupted_and_empty);
	tcase_add_test(tc, lines_over_the_cap_are_read);
	tcase_add_test(tc, a_long_response_completed_is_read);
	tcase_add_test(tc, lines_from_a_callers_framer);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("usage_sse", usage_sse_suite)
