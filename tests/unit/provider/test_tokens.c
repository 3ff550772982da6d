/* Unit tests for tokens: estimates, usage in JSON responses, and the SSE
 * scanner fed at every possible split point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider/tokens.h"
#include "tokens_ref.h"
#include "unit.h"

static int64_t est(const char *body, unsigned def, struct tokens_cost *c)
{
	return tokens_estimate(body, strlen(body), def, c);
}

START_TEST(estimate_chat)
{
	struct tokens_cost c;
	/* 9 + 12 characters = 21 → 6 tokens, plus max_tokens */
	ck_assert_int_eq(est("{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"system\",\"content\":"
	                     "\"You help.\"},{\"role\":\"user\",\"content\":\"Hello there!\"}],"
	                     "\"max_tokens\":100}",
	                     1024, &c),
	                 6 + 100);
	ck_assert(c.json);
	ck_assert_int_eq(c.prompt, 6);
	ck_assert_int_eq(c.output, 100);
	/* no maximum: the default; 9 characters round up to 3 tokens */
	ck_assert_int_eq(
	    est("{\"messages\":[{\"role\":\"user\",\"content\":\"123456789\"}]}", 1024, &c),
	    3 + 1024);
	/* content parts: only text counts */
	ck_assert_int_eq(est("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	                     "\"text\":\"abcd\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
	                     "\"https://example.com/a-long-url.png\"}},{\"type\":\"text\",\"text\":"
	                     "\"efgh\"}]}],\"max_completion_tokens\":10}",
	                     1024, &c),
	                 2 + 10);
	/* earlier tool calls' arguments are prompt text */
	ck_assert_int_eq(
	    est("{\"messages\":[{\"role\":\"assistant\",\"content\":null,"
	        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{"
	        "\"name\":\"f\",\"arguments\":\"{\\\"q\\\":1}\"}}]}],\"max_tokens\":1}",
	        1024, &c),
	    2 + 1); /* {"q":1} is 7 characters */
	/* n choices multiply the output */
	ck_assert_int_eq(est("{\"messages\":[{\"role\":\"user\",\"content\":\"abcd\"}],"
	                     "\"max_tokens\":50,\"n\":3}",
	                     1024, &c),
	                 1 + 150);
	ck_assert_int_eq(est("{\"messages\":[],\"n\":4}", 100, &c), 400);
	/* the largest maximum named wins */
	ck_assert_int_eq(est("{\"max_tokens\":10,\"max_completion_tokens\":30}", 1024, &c), 30);
}
END_TEST

START_TEST(estimate_utf8_characters)
{
	struct tokens_cost c;
	/* "héllo wörld" is 11 characters in 13 bytes → 3 tokens */
	est("{\"messages\":[{\"role\":\"user\",\"content\":\"h\xc3\xa9llo w\xc3\xb6rld\"}],"
	    "\"max_tokens\":1}",
	    0, &c);
	ck_assert_int_eq(c.prompt, 3);
	/* escapes count as the character they stand for: \u00e9 is one */
	est("{\"prompt\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\",\"max_tokens\":1}", 0, &c);
	ck_assert_int_eq(c.prompt, 2);
}
END_TEST

START_TEST(estimate_embeddings)
{
	struct tokens_cost c;
	ck_assert_int_eq(est("{\"model\":\"text-embedding-3-small\",\"input\":\"The food was "
	                     "delicious\"}",
	                     1024, &c),
	                 6); /* 22 characters, no output */
	ck_assert_int_eq(c.output, 0);
	ck_assert_int_eq(est("{\"model\":\"text-embedding-3-small\",\"input\":[\"abcd\",\"efgh\","
	                     "\"ij\"]}",
	                     1024, &c),
	                 3);
	/* token ids: one token each */
	ck_assert_int_eq(
	    est("{\"model\":\"text-embedding-ada-002\",\"input\":[1,2,3,4,5]}", 1024, &c), 5);
	ck_assert_int_eq(
	    est("{\"model\":\"text-embedding-ada-002\",\"input\":[[1,2],[3]]}", 1024, &c), 3);
}
END_TEST

START_TEST(estimate_anthropic)
{
	struct tokens_cost c;
	ck_assert_int_eq(est("{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1024,\"system\":"
	                     "\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":"
	                     "\"Hello, Claude\"}]}",
	                     4096, &c),
	                 6 + 1024); /* 9 + 13 = 22 characters */
	/* system as blocks, tool results with nested content */
	ck_assert_int_eq(
	    est("{\"max_tokens\":8,\"system\":[{\"type\":\"text\",\"text\":\"abcd\"},"
	        "{\"type\":\"text\",\"text\":\"efgh\",\"cache_control\":{\"type\":"
	        "\"ephemeral\"}}],\"messages\":[{\"role\":\"user\",\"content\":[{"
	        "\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":[{\"type\":"
	        "\"text\",\"text\":\"ijkl\"}]}]}]}",
	        4096, &c),
	    3 + 8);
}
END_TEST

START_TEST(estimate_other_apis)
{
	struct tokens_cost c;
	/* legacy completions */
	ck_assert_int_eq(est("{\"model\":\"gpt-3.5-turbo-instruct\",\"prompt\":\"Say this is a "
	                     "test\",\"max_tokens\":7}",
	                     1024, &c),
	                 5 + 7);
	ck_assert_int_eq(est("{\"prompt\":[\"abcd\",\"efgh\"],\"max_tokens\":1}", 0, &c), 3);
	/* Responses API */
	ck_assert_int_eq(est("{\"model\":\"gpt-5\",\"instructions\":\"abcd\",\"input\":[{\"role\":"
	                     "\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"efgh\"}]}],"
	                     "\"max_output_tokens\":20}",
	                     1024, &c),
	                 2 + 20);
	/* Gemini generateContent */
	ck_assert_int_eq(
	    est("{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"abcdefgh\"}]}"
	        "],\"systemInstruction\":{\"parts\":[{\"text\":\"ijkl\"}]},"
	        "\"generationConfig\":{\"maxOutputTokens\":64,\"candidateCount\":2}}",
	        1024, &c),
	    3 + 128);
}
END_TEST

START_TEST(estimate_not_json)
{
	struct tokens_cost c;
	ck_assert_int_eq(est("this is not json", 1024, &c), 1024);
	ck_assert(!c.json);
	ck_assert_int_eq(c.prompt, 0);
	ck_assert_int_eq(est("{\"messages\":[", 1024, &c), 1024);
	ck_assert_int_eq(est("[1,2,3]", 1024, &c), 1024); /* JSON, not an object */
	ck_assert(!c.json);
	/* A NUL byte is not JSON anywhere (jansson let one pass after a number). */
	ck_assert_int_eq(tokens_estimate("{\"max_tokens\":5\0}", 17, 1024, &c), 1024);
	ck_assert(!c.json);
	ck_assert_int_eq(tokens_estimate("{\"max_tokens\":5 }", 17, 1024, &c), 5);
	ck_assert_int_eq(est(" \r\n{\"max_tokens\":5}", 1024, &c), 5); /* leading blanks */
	ck_assert(c.json);
	ck_assert_int_eq(tokens_estimate("", 0, 1024, &c), 0); /* GET: nothing */
	ck_assert_int_eq(tokens_estimate(NULL, 0, 1024, NULL), 0);
	/* odd types are ignored, absurd maxima clamped */
	ck_assert_int_eq(est("{\"messages\":\"x\",\"max_tokens\":\"9\",\"n\":-2}", 10, &c), 10);
	ck_assert_int_eq(est("{\"max_tokens\":-5}", 10, &c), 10);
	ck_assert_int_eq(est("{\"max_tokens\":99999999999999,\"n\":1000000}", 10, &c),
	                 INT64_C(100000000) * 128);
	/* deep nesting does not recurse without bound */
	char deep[4096];
	size_t k = 0;
	k += (size_t)snprintf(deep, sizeof deep, "{\"max_tokens\":1,\"messages\":[{\"content\":");
	for (int i = 0; i < 500; i++)
		deep[k++] = '[';
	for (int i = 0; i < 500; i++)
		deep[k++] = ']';
	k += (size_t)snprintf(deep + k, sizeof deep - k, "}]}");
	ck_assert_int_eq(tokens_estimate(deep, k, 10, &c), 1); /* parsed; our walk stops at 8 */
}
END_TEST

static struct tokens_usage usage(const char *body)
{
	struct tokens_usage u;
	tokens_usage_json(body, strlen(body), &u);
	return u;
}

START_TEST(usage_json_responses)
{
	struct tokens_usage u =
	    usage("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
	          "\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"}}],\"usage\":{"
	          "\"prompt_tokens\":13,\"completion_tokens\":7,\"total_tokens\":20,"
	          "\"prompt_tokens_details\":{\"cached_tokens\":0}}}");
	ck_assert(u.present && u.has_input && u.has_output);
	ck_assert_int_eq(u.input, 13);
	ck_assert_int_eq(u.output, 7);
	ck_assert_int_eq(u.total, 20);

	u = usage("{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],"
	          "\"usage\":{\"input_tokens\":2095,\"output_tokens\":503,"
	          "\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":4000}}");
	ck_assert_int_eq(u.input, 2195);
	ck_assert_int_eq(u.output, 503);
	ck_assert_int_eq(u.total, 2698);

	u = usage("{\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":10,"
	          "\"candidatesTokenCount\":20,\"thoughtsTokenCount\":5,\"totalTokenCount\":35}}");
	ck_assert_int_eq(u.input, 10);
	ck_assert_int_eq(u.output, 25);
	ck_assert_int_eq(u.total, 35);

	u = usage("{\"object\":\"list\",\"data\":[],\"usage\":{\"prompt_tokens\":8,"
	          "\"total_tokens\":8}}");
	ck_assert(u.present && u.has_input && !u.has_output);
	ck_assert_int_eq(u.total, 8);

	u = usage("{\"usage\":null}");
	ck_assert(!u.present);
	u = usage("{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":\"7\"}}");
	ck_assert(!u.present);
	u = usage("not json");
	ck_assert(!u.present);
	u = usage("[{\"usage\":{\"prompt_tokens\":1}}]");
	ck_assert(!u.present);
}
END_TEST

/* Feeds `stream` split once at every byte position, and in 1-byte pieces;
 * every way must give the same result. */
static void check_splits(const char *stream, int64_t in, int64_t out, int64_t total, bool err)
{
	size_t n = strlen(stream);
	for (size_t cut = 0; cut <= n + 1; cut++) {
		struct tokens_sse s;
		tokens_sse_init(&s);
		if (cut <= n) {
			tokens_sse_feed(&s, stream, cut);
			tokens_sse_feed(&s, stream + cut, n - cut);
		} else {
			for (size_t i = 0; i < n; i++)
				tokens_sse_feed(&s, stream + i, 1);
		}
		tokens_sse_finish(&s);
		ck_assert_msg(s.usage.present == (in >= 0), "cut %zu", cut);
		if (in >= 0) {
			ck_assert_msg(s.usage.input == in, "cut %zu: input %lld", cut,
			              (long long)s.usage.input);
			ck_assert_msg(s.usage.output == out, "cut %zu: output %lld", cut,
			              (long long)s.usage.output);
			ck_assert_msg(s.usage.total == total, "cut %zu", cut);
		}
		ck_assert_msg(s.error == err, "cut %zu: error", cut);
		tokens_sse_free(&s);
	}
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

START_TEST(sse_openai_include_usage)
{
	check_splits(openai_stream, 9, 12, 21, false);
}
END_TEST

/* A CR that ends the stream ends its last line: read at the stream's end
 * (the framer waits for the byte after a CR), not before. */
START_TEST(sse_last_line_ended_by_cr)
{
	static const char stream[] = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,"
	                             "\"completion_tokens\":1,\"total_tokens\":5}}\r";
	check_splits(stream, 4, 1, 5, false);
	struct tokens_sse s;
	tokens_sse_init(&s);
	tokens_sse_feed(&s, stream, sizeof(stream) - 1);
	ck_assert(!s.usage.present);
	tokens_sse_finish(&s);
	ck_assert(s.usage.present);
	tokens_sse_free(&s);
}
END_TEST

START_TEST(sse_openai_crlf_and_comments)
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

/* Whether the request named its output (the cost model then charges that, or
 * else the lane's percentile), and Anthropic's cache counts in the usage. */
START_TEST(output_named_and_cache_usage)
{
	struct tokens_cost c;
	tokens_estimate("{\"messages\":[{\"content\":\"abcd\"}],\"max_tokens\":7}",
	                strlen("{\"messages\":[{\"content\":\"abcd\"}],\"max_tokens\":7}"), 1024,
	                &c);
	ck_assert(c.output_named);
	ck_assert_int_eq(c.output, 7);
	tokens_estimate("{\"messages\":[{\"content\":\"abcd\"}]}",
	                strlen("{\"messages\":[{\"content\":\"abcd\"}]}"), 1024, &c);
	ck_assert(!c.output_named);
	ck_assert_int_eq(c.output, 1024);
	tokens_estimate("{\"model\":\"text-embedding-3\",\"input\":\"abcd\"}",
	                strlen("{\"model\":\"text-embedding-3\",\"input\":\"abcd\"}"), 1024, &c);
	ck_assert(c.output_named); /* an embedding names its output: none */
	ck_assert_int_eq(c.output, 0);
	tokens_estimate("not json", strlen("not json"), 1024, &c);
	ck_assert(!c.output_named);

	struct tokens_usage u;
	static const char warm[] =
	    "{\"usage\":{\"input_tokens\":100,\"cache_creation_input_tokens\":0,"
	    "\"cache_read_input_tokens\":10000,\"output_tokens\":5}}";
	ck_assert(tokens_usage_json(warm, sizeof(warm) - 1, &u));
	ck_assert(u.has_cache);
	ck_assert_int_eq(u.input, 100); /* reads do not count */
	ck_assert_int_eq(u.cache_read, 10000);
	ck_assert_int_eq(u.cache_creation, 0);
	static const char cold[] = "{\"usage\":{\"input_tokens\":100,"
	                           "\"cache_creation_input_tokens\":10000,\"output_tokens\":5}}";
	ck_assert(tokens_usage_json(cold, sizeof(cold) - 1, &u));
	ck_assert(u.has_cache);
	ck_assert_int_eq(u.input, 10100); /* creation counts */
	ck_assert_int_eq(u.cache_creation, 10000);
	ck_assert_int_eq(u.cache_read, 0);
	static const char plain[] = "{\"usage\":{\"prompt_tokens\":13,\"completion_tokens\":7}}";
	ck_assert(tokens_usage_json(plain, sizeof(plain) - 1, &u));
	ck_assert(!u.has_cache);
}
END_TEST

START_TEST(sse_anthropic_cumulative)
{
	check_splits(anthropic_stream, 25, 15, 40, false);
}
END_TEST

START_TEST(sse_errors_after_200)
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
	/* "error" inside content text is not an error */
	check_splits("data: {\"choices\":[{\"delta\":{\"content\":\"\\\"error\\\"\"}}]}\n\n"
	             "event: errors\ndata: {}\n\n",
	             -1, 0, 0, false);
}
END_TEST

START_TEST(sse_gemini_and_responses)
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

START_TEST(sse_interrupted_and_empty)
{
	/* no usage chunk (an interrupted stream), a trailing partial line */
	check_splits("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n"
	             "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1",
	             -1, 0, 0, false);
	check_splits(": keep-alive\n\n\n\n: keep-alive\n\n", -1, 0, 0, false);
	struct tokens_sse s;
	tokens_sse_init(&s);
	tokens_sse_feed(&s, "", 0);
	tokens_sse_feed(&s, NULL, 0);
	ck_assert(!s.usage.present && !s.error);
	tokens_sse_free(&s);
	tokens_sse_free(&s); /* idempotent */
}
END_TEST

/* A line over the cap is skipped whole, in one chunk or straddling many, and
 * the scanner is fine afterwards; memory stays bounded. */
START_TEST(sse_long_lines_skipped)
{
	const char *usage_line = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,"
	                         "\"completion_tokens\":3,\"total_tokens\":5}}\n\n";
	size_t big = TOKENS_SSE_LINE_MAX + 1000;
	char *line = malloc(big);
	ck_assert_ptr_nonnull(line);
	const char *head = "data: {\"error\":{\"usage\":{\"prompt_tokens\":77}}, \"pad\":\"";
	memset(line, 'x', big);
	memcpy(line, head, strlen(head));

	for (int mode = 0; mode < 3; mode++) {
		struct tokens_sse s;
		tokens_sse_init(&s);
		if (mode == 0) {
			tokens_sse_feed(&s, line, big);
		} else {
			size_t step = mode == 1 ? 4096 : 7;
			for (size_t i = 0; i < big; i += step)
				tokens_sse_feed(&s, line + i, big - i < step ? big - i : step);
		}
		tokens_sse_feed(&s, "\"}\n\n", 4);
		ck_assert(s.framer.cap <= TOKENS_SSE_LINE_MAX + 2); /* the line and its end */
		ck_assert(!s.error && !s.usage.present);
		tokens_sse_feed(&s, usage_line, strlen(usage_line));
		ck_assert(s.usage.present);
		ck_assert_int_eq(s.usage.total, 5);
		tokens_sse_free(&s);
	}
	free(line);
}
END_TEST

/* A line of exactly the cap is still read when it straddles chunks. */
START_TEST(sse_line_at_cap)
{
	const char *head = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":6,"
	                   "\"completion_tokens\":1},\"pad\":\"";
	size_t n = TOKENS_SSE_LINE_MAX;
	char *line = malloc(n + 1);
	ck_assert_ptr_nonnull(line);
	memset(line, 'y', n);
	memcpy(line, head, strlen(head));
	memcpy(line + n - 2, "\"}", 2);
	line[n] = '\n';
	struct tokens_sse s;
	tokens_sse_init(&s);
	tokens_sse_feed(&s, line, 1000);
	tokens_sse_feed(&s, line + 1000, n + 1 - 1000);
	ck_assert(s.usage.present);
	ck_assert_int_eq(s.usage.total, 7);
	tokens_sse_free(&s);
	free(line);
}
END_TEST

/* ---- the scanner agrees with the jansson tree walk (tokens_ref.h) ---- */

static int disagreements;

static void compare_one(const char *b, size_t n)
{
	/* The one known difference: jansson drops a NUL byte that follows a
	 * number or a literal (its stream_unget forgets it), so it accepts
	 * {"n":1<NUL>}; the scanner refuses it, as RFC 8259 does. */
	if (memchr(b, '\0', n) != NULL) {
		struct tokens_cost c;
		struct tokens_usage u;
		tokens_estimate(b, n, 1000, &c);
		tokens_usage_json(b, n, &u);
		return;
	}
	struct tokens_cost a, r;
	tokens_estimate(b, n, 1000, &a);
	ref_tokens_estimate(b, n, 1000, &r);
	struct tokens_usage ua, ur;
	tokens_usage_json(b, n, &ua);
	ref_tokens_usage_json(b, n, &ur);
	bool same = a.json == r.json && a.prompt == r.prompt && a.output == r.output &&
	            a.total == r.total && memcmp(&ua, &ur, sizeof ua) == 0 &&
	            ref_prefix_agrees(b, n, &a);
	/* The SSE path: a data: line that mentions "error" is always parsed. */
	if (memmem(b, n, "\"error\"", 7) != NULL && memchr(b, '\n', n) == NULL &&
	    memchr(b, '\r', n) == NULL) {
		struct tokens_sse sse;
		tokens_sse_init(&sse);
		tokens_sse_feed(&sse, "data: ", 6);
		tokens_sse_feed(&sse, b, n);
		tokens_sse_feed(&sse, "\n", 1);
		struct tokens_usage us;
		memset(&us, 0, sizeof us);
		bool err = false;
		/* the scanner drops one leading space after "data:" */
		const char *v = b;
		size_t vn = n;
		ref_sse_data(v, vn, &us, &err);
		same = same && sse.error == err && memcmp(&sse.usage, &us, sizeof us) == 0;
		tokens_sse_free(&sse);
	}
	if (!same && disagreements++ < 5)
		fprintf(stderr,
		        "disagree on [%.*s]: json %d/%d prompt %lld/%lld output %lld/%lld usage "
		        "%d,%lld,%lld,%lld/%d,%lld,%lld,%lld\n",
		        (int)(n > 300 ? 300 : n), b, a.json, r.json, (long long)a.prompt,
		        (long long)r.prompt, (long long)a.output, (long long)r.output, ua.present,
		        (long long)ua.input, (long long)ua.output, (long long)ua.total, ur.present,
		        (long long)ur.input, (long long)ur.output, (long long)ur.total);
}

/* Every prefix, and every byte replaced by each of a set of bytes that change
 * the meaning of JSON text. */
static void compare_mutations(const char *body)
{
	static const char swaps[] = "\"\\{}[]:, 0-9eE.u\x01\x7f";
	static const unsigned char high[] = {0x80, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xF4, 0xF5, 0xFF};
	size_t n = strlen(body);
	char *b = malloc(n + 1);
	ck_assert_ptr_nonnull(b);
	for (size_t cut = 0; cut <= n; cut++)
		compare_one(body, cut);
	for (size_t i = 0; i < n; i++) {
		memcpy(b, body, n);
		for (size_t k = 0; k < sizeof swaps - 1 + sizeof high; k++) {
			b[i] = k < sizeof swaps - 1 ? swaps[k] : (char)high[k - (sizeof swaps - 1)];
			compare_one(b, n);
		}
		b[i] = '\0';
		compare_one(b, n);
	}
	free(b);
}

static const char *const agree_bodies[] = {
    "{\"model\":\"claude-x\",\"system\":[{\"text\":\"abcdef\",\"cache_control\":{}},"
    "{\"text\":\"gh\"}],\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"ij\","
    "\"cache_control\":{\"type\":\"ephemeral\"}}]},{\"role\":\"user\",\"content\":\"k\"}]}",
    "{\"messages\":[{\"role\":\"developer\",\"content\":\"abcdefgh\"}],\"model\":\"o\\/3\"}",
    "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"system\",\"content\":\"You help.\"},"
    "{\"role\":\"user\",\"content\":\"Hello there!\"}],\"max_tokens\":100,\"n\":2}",
    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"ab\"},"
    "{\"type\":\"tool_result\",\"content\":[{\"text\":\"cd\"}]}]},{\"role\":\"assistant\","
    "\"tool_calls\":[{\"function\":{\"arguments\":\"{\\\"q\\\":1}\"}}]}],"
    "\"max_completion_tokens\":7}",
    "{\"model\":\"text-embedding-3\",\"input\":[1,[2,3],\"abc\",-1,1.5],\"prompt\":\"x\"}",
    "{\"contents\":[{\"parts\":[{\"text\":\"h\\u00e9\\ud83d\\ude00\"}]}],"
    "\"generationConfig\":{\"maxOutputTokens\":64,\"candidateCount\":3},"
    "\"system_instruction\":{\"parts\":[{\"text\":\"s\"}]}}",
    "{\"m\\u0065ssages\":[{\"content\":\"abcd\"}],\"max_tokens\":1e2,\"max_output_tokens\":5,"
    "\"model\":\"\\u0065mbed\",\"t\":[true,false,null,{}],\"x\":-0.5E-3}",
    "{\"messages\":[{\"content\":\"a\"}],\"messages\":[{\"content\":\"abcdefgh\"}],"
    "\"max_tokens\":3,\"max_tokens\":-3,\"n\":9223372036854775807}",
    "{\"usage\":{\"prompt_tokens\":13,\"completion_tokens\":7,\"total_tokens\":20}}",
    "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,"
    "\"cache_creation_input_tokens\":5,\"output_tokens\":1}},\"error\":null}",
    "{\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":1,"
    "\"thoughtsTokenCount\":2},\"response\":{\"usage\":{\"output_tokens\":9}},"
    "\"x_groq\":{\"usage\":{\"prompt_tokens\":1}},\"error\":{\"code\":1}}",
    "{\"usage\":{\"prompt_tokens\":1},\"usage\":{\"total_tokens\":-1,\"output_tokens\":2}}",
    "[{\"usage\":{\"prompt_tokens\":1}}]",
};

START_TEST(agrees_with_jansson)
{
	for (size_t i = 0; i < sizeof agree_bodies / sizeof agree_bodies[0]; i++)
		compare_mutations(agree_bodies[i]);
	ck_assert_int_eq(disagreements, 0);
}
END_TEST

/* Limits jansson sets: nesting depth, integer range, real overflow. */
START_TEST(agrees_at_the_limits)
{
	static char deep[2 * 2100 + 64];
	for (int levels = 2045; levels <= 2050; levels++) {
		for (int scalar = 0; scalar < 2; scalar++) {
			size_t k = 0;
			deep[k++] = '{';
			memcpy(deep + k, "\"a\":", 4);
			k += 4;
			for (int i = 1; i < levels; i++)
				deep[k++] = '[';
			if (scalar)
				deep[k++] = '1';
			for (int i = 1; i < levels; i++)
				deep[k++] = ']';
			deep[k++] = '}';
			compare_one(deep, k);
		}
	}
	static const char *const nums[] = {
	    "{\"n\":9223372036854775807}",
	    "{\"n\":9223372036854775808}",
	    "{\"n\":-9223372036854775808}",
	    "{\"n\":-9223372036854775809}",
	    "{\"n\":1e308}",
	    "{\"n\":1e309}",
	    "{\"n\":-1.8e308}",
	    "{\"n\":1e-400}",
	    "{\"n\":0.0000001e314}",
	    "{\"n\":01}",
	    "{\"n\":-}",
	    "{\"n\":1.}",
	    "{\"n\":.5}",
	    "{\"n\":1e+}",
	    "{\"n\":+1}",
	    "{\"n\":2,\"max_tokens\":18446744073709551616}",
	};
	for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
		compare_one(nums[i], strlen(nums[i]));
	char big[400] = "{\"n\":";
	size_t k = strlen(big);
	for (int i = 0; i < 320; i++)
		big[k++] = '9';
	memcpy(big + k, ".5}", 3);
	compare_one(big, k + 3);
	ck_assert_int_eq(disagreements, 0);
}
END_TEST

/* The model name as tokens_model_name() reads it, or "" when none. */
static const char *model_of(const char *body, char *out)
{
	struct tokens_cost c;
	char buf[TOKENS_MODEL_MAX];
	size_t n;
	tokens_estimate(body, strlen(body), 1024, &c);
	const char *m = tokens_model_name(&c, buf, &n);
	memcpy(out, m ? m : "", n);
	out[n] = '\0';
	return out;
}

START_TEST(estimate_model)
{
	char out[TOKENS_MODEL_MAX + 1];
	ck_assert_str_eq(model_of("{\"model\":\"gpt-4o-mini\",\"messages\":[]}", out),
	                 "gpt-4o-mini");
	/* Anthropic, after the messages; the last one wins as for every member */
	ck_assert_str_eq(
	    model_of("{\"messages\":[],\"model\":\"x\",\"model\":\"claude-sonnet-4-5\"}", out),
	    "claude-sonnet-4-5");
	/* escapes are decoded (PHP writes "\/" for "/") */
	ck_assert_str_eq(model_of("{\"model\":\"meta-llama\\/Llama-3.3-70B\\u002dInstruct\"}", out),
	                 "meta-llama/Llama-3.3-70B-Instruct");
	/* nested models are not the request's */
	ck_assert_str_eq(model_of("{\"messages\":[{\"role\":\"user\",\"model\":\"gpt-4o\","
	                          "\"content\":\"hi\"}],\"metadata\":{\"model\":\"o3\"}}",
	                          out),
	                 "");
	/* no model, not a string, empty, a space, a control character, not JSON */
	ck_assert_str_eq(model_of("{\"messages\":[]}", out), "");
	ck_assert_str_eq(model_of("{\"model\":42}", out), "");
	ck_assert_str_eq(model_of("{\"model\":{\"name\":\"gpt-4o\"}}", out), "");
	ck_assert_str_eq(model_of("{\"model\":\"\"}", out), "");
	ck_assert_str_eq(model_of("{\"model\":\"gpt 4o\"}", out), "");
	ck_assert_str_eq(model_of("{\"model\":\"gpt\\n4o\"}", out), "");
	ck_assert_str_eq(model_of("{\"model\":\"caf\xc3\xa9\"}", out), "");
	ck_assert_str_eq(model_of("{\"model\":\"gpt-4o\"", out), ""); /* truncated */
	ck_assert_str_eq(model_of("--boundary\r\nmodel: gpt-4o", out), "");
	ck_assert_str_eq(model_of("[{\"model\":\"gpt-4o\"}]", out), "");
	/* 128 bytes are a name; 129 are none (not a truncated name) */
	char body[400];
	char name[TOKENS_MODEL_MAX + 2];
	memset(name, 'm', sizeof name);
	name[TOKENS_MODEL_MAX] = '\0';
	snprintf(body, sizeof body, "{\"model\":\"%s\"}", name);
	ck_assert_str_eq(model_of(body, out), name);
	name[TOKENS_MODEL_MAX] = 'm';
	name[TOKENS_MODEL_MAX + 1] = '\0';
	snprintf(body, sizeof body, "{\"model\":\"%s\"}", name);
	ck_assert_str_eq(model_of(body, out), "");
	/* the pointer is into the body */
	const char *b = "{\"model\":\"o3\"}";
	struct tokens_cost c;
	tokens_estimate(b, strlen(b), 1024, &c);
	ck_assert_ptr_eq(c.model, b + 10);
	ck_assert_uint_eq(c.model_len, 2);
	ck_assert(!c.model_escaped);
	/* an embedding model still generates nothing, a valid name or not */
	tokens_estimate("{\"model\":\"text embedding\"}", 26, 1024, &c);
	ck_assert_int_eq(c.output, 0);
	ck_assert_ptr_null(c.model);
}
END_TEST

static struct tokens_cost cost_of(const char *body)
{
	struct tokens_cost c;
	tokens_estimate(body, strlen(body), 1024, &c);
	return c;
}

START_TEST(estimate_prompt_prefix)
{
	/* Anthropic: a marked system block; the question after it is not in the prefix */
	const char *a1 = "{\"model\":\"claude-sonnet-4-5\",\"system\":[{\"type\":\"text\",\"text\":"
	                 "\"0123456789abcdef\",\"cache_control\":{\"type\":\"ephemeral\"}},"
	                 "{\"type\":\"text\",\"text\":\"today\"}],\"messages\":[{\"role\":\"user\","
	                 "\"content\":\"What now?\"}],\"max_tokens\":100}";
	const char *a2 = "{\"model\":\"claude-sonnet-4-5\",\"system\":[{\"type\":\"text\",\"text\":"
	                 "\"0123456789abcdef\",\"cache_control\":{\"type\":\"ephemeral\"}},"
	                 "{\"type\":\"text\",\"text\":\"today\"}],\"messages\":[{\"role\":\"user\","
	                 "\"content\":\"And then? Another question.\"}],\"max_tokens\":100}";
	struct tokens_cost c1 = cost_of(a1), c2 = cost_of(a2);
	ck_assert(c1.cache_marked);
	ck_assert_uint_ne(c1.prompt_key, 0);
	ck_assert_uint_eq(c1.prompt_key, c2.prompt_key); /* same prefix, other question */
	ck_assert_int_eq(c1.prefix_tokens, 4);           /* 16 characters */
	ck_assert_uint_eq(c1.head_key, c1.prompt_key);
	ck_assert_int_eq(c1.head_tokens, 4);
	/* a changed byte in the prefix is another prompt */
	char a3[600];
	snprintf(a3, sizeof a3, "%s", a1);
	*strstr(a3, "abcdef") = 'A';
	ck_assert_uint_ne(cost_of(a3).prompt_key, c1.prompt_key);
	/* a breakpoint on the last message: the prefix runs through it; the head
	 * stays at the system block */
	const char *a4 = "{\"system\":[{\"type\":\"text\",\"text\":\"0123456789abcdef\","
	                 "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":["
	                 "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"12345678\","
	                 "\"cache_control\":{\"type\":\"ephemeral\"}}]},{\"role\":\"assistant\","
	                 "\"content\":\"abcd\"}]}";
	struct tokens_cost c4 = cost_of(a4);
	ck_assert(c4.cache_marked);
	ck_assert_int_eq(c4.prefix_tokens, 6); /* 16 + 8 */
	ck_assert_int_eq(c4.head_tokens, 4);
	ck_assert_uint_ne(c4.prompt_key, c4.head_key);
	ck_assert_int_eq(c4.prompt, 7);
	/* marks only in messages, "system" after them in the body: system counts first */
	const char *a5 = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
	                 "\"content\":[{\"type\":\"text\",\"text\":\"abcdefgh\",\"cache_control\":"
	                 "{\"type\":\"ephemeral\"}}]}]}],\"system\":\"0123\"}";
	struct tokens_cost c5 = cost_of(a5);
	ck_assert(c5.cache_marked);
	ck_assert_int_eq(c5.prefix_tokens, 3); /* 4 + 8 = 12 characters */
	ck_assert_uint_eq(c5.head_key, c5.prompt_key);
	/* cache_control that is not an object, or nested too deep, is no mark */
	struct tokens_cost c6 =
	    cost_of("{\"system\":[{\"text\":\"abcd\",\"cache_control\":null}],\"messages\":[]}");
	ck_assert(!c6.cache_marked);
	ck_assert_int_eq(c6.prefix_tokens, 1); /* keyed by the system text */
	/* OpenAI: the system message keys the prompt, whatever its length */
	const char *o1 = "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"developer\",\"content\":"
	                 "\"You help.\"},{\"role\":\"user\",\"content\":\"Hello there!\"}]}";
	struct tokens_cost co = cost_of(o1);
	ck_assert(!co.cache_marked);
	ck_assert_uint_ne(co.prompt_key, 0);
	ck_assert_int_eq(co.prefix_tokens, 3);
	/* a short first user message is not worth a key; a long one is */
	ck_assert_uint_eq(
	    cost_of("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}").prompt_key, 0);
	static char big[TOKENS_LONG_PREFIX_CHARS + 200];
	int k = snprintf(big, sizeof big, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
	memset(big + k, 'x', TOKENS_LONG_PREFIX_CHARS);
	snprintf(big + k + TOKENS_LONG_PREFIX_CHARS, 100,
	         "\"},{\"role\":\"user\",\"content\":\"q\"}]}");
	struct tokens_cost cb = cost_of(big);
	ck_assert_uint_ne(cb.prompt_key, 0);
	ck_assert_int_eq(cb.prefix_tokens, TOKENS_LONG_PREFIX_CHARS / 4);
	/* Responses API instructions; Gemini systemInstruction */
	ck_assert_int_eq(cost_of("{\"instructions\":\"abcdefgh\",\"input\":\"q\"}").prefix_tokens,
	                 2);
	ck_assert_int_eq(
	    cost_of("{\"systemInstruction\":{\"parts\":[{\"text\":\"abcd\"}]},\"contents\":[]}")
	        .prefix_tokens,
	    1);
	/* not JSON, or nothing to key */
	ck_assert_uint_eq(cost_of("not json \"cache_control\"").prompt_key, 0);
	ck_assert_uint_eq(cost_of("{\"input\":\"short\"}").prompt_key, 0);
}
END_TEST

/* The request's own service tier, read in the one scan of the body: the
 * top-level "service_tier" only. */
static const struct tier_vector {
	const char *body;
	bool flex;
} tier_vectors[] = {
    {"{\"model\":\"o3\",\"service_tier\":\"flex\",\"messages\":[]}", true},
    {"{\"service_tier\" : \"flex\"}", true},
    {" \n{\"model\":\"o3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
     "\"service_tier\":\"flex\"}",
     true},
    {"{\"service_tier\":\"flex\",\"service_tier\":\"auto\"}", false}, /* the last one */
    {"{\"model\":\"o3\",\"service_tier\":\"auto\"}", false},
    {"{\"model\":\"o3\",\"service_tier\":\"default\"}", false},
    {"{\"model\":\"o3\",\"service_tier\":\"flexible\"}", false},
    {"{\"model\":\"o3\",\"service_tier\":[\"flex\"]}", false},
    {"{\"model\":\"o3\"}", false},
    /* nested or inside a string: not the request's */
    {"{\"metadata\":{\"service_tier\":\"flex\"}}", false},
    {"{\"messages\":[{\"content\":\"\\\"service_tier\\\":\\\"flex\\\"\"}]}", false},
    {"{\"tools\":[{\"parameters\":{\"service_tier\":\"flex\"}}],\"model\":\"x\"}", false},
    {"{\"a\":\"service_tier\",\"b\":\"flex\"}", false},
    {"[{\"service_tier\":\"flex\"}]", false},
    {"not json \"service_tier\":\"flex\"", false},
    {"{\"service_tier\":\"fle", false},
    {"", false},
};

START_TEST(estimate_service_tier)
{
	const struct tier_vector *v = &tier_vectors[_i];
	struct tokens_cost c;
	tokens_estimate(v->body, strlen(v->body), 0, &c);
	ck_assert_msg(c.flex_tier == v->flex, "row %d: %s", _i, v->body);
}
END_TEST

static Suite *tokens_suite(void)
{
	Suite *s = suite_create("tokens");
	TCase *e = tcase_create("estimate");
	tcase_add_test(e, estimate_chat);
	tcase_add_test(e, estimate_utf8_characters);
	tcase_add_test(e, estimate_embeddings);
	tcase_add_test(e, estimate_anthropic);
	tcase_add_test(e, estimate_other_apis);
	tcase_add_test(e, estimate_not_json);
	tcase_add_test(e, estimate_model);
	tcase_add_test(e, estimate_prompt_prefix);
	tcase_add_loop_test(e, estimate_service_tier, 0,
	                    (int)(sizeof tier_vectors / sizeof tier_vectors[0]));
	tcase_add_test(e, output_named_and_cache_usage);
	suite_add_tcase(s, e);
	TCase *u = tcase_create("usage");
	tcase_add_test(u, usage_json_responses);
	suite_add_tcase(s, u);
	TCase *sse = tcase_create("sse");
	tcase_set_timeout(sse, 30);
	tcase_add_test(sse, sse_openai_include_usage);
	tcase_add_test(sse, sse_openai_crlf_and_comments);
	tcase_add_test(sse, sse_last_line_ended_by_cr);
	tcase_add_test(sse, sse_anthropic_cumulative);
	tcase_add_test(sse, sse_errors_after_200);
	tcase_add_test(sse, sse_gemini_and_responses);
	tcase_add_test(sse, sse_interrupted_and_empty);
	tcase_add_test(sse, sse_long_lines_skipped);
	tcase_add_test(sse, sse_line_at_cap);
	suite_add_tcase(s, sse);
	TCase *ref = tcase_create("reference");
	tcase_set_timeout(ref, 60);
	tcase_add_test(ref, agrees_with_jansson);
	tcase_add_test(ref, agrees_at_the_limits);
	suite_add_tcase(s, ref);
	return s;
}

UNIT_MAIN("tokens", tokens_suite)
