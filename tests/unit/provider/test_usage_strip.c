/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for usage_strip: the include_usage pacerd adds to a streamed
 * chat completion, and the stream the client gets back without it. */
#include <stdlib.h>
#include <string.h>

#include "provider/tokens.h"
#include "provider/usage_strip.h"
#include "unit.h"

struct out {
	char buf[8192];
	size_t len;
};

static void collect(void *ctx, const char *data, size_t len)
{
	struct out *o = ctx;
	ck_assert_uint_le(o->len + len, sizeof(o->buf));
	memcpy(o->buf + o->len, data, len);
	o->len += len;
}

#define CHUNK(c) "data: {\"id\":\"x\",\"choices\":[" c "]}\n\n"
#define CHUNK_U(c) "data: {\"id\":\"x\",\"choices\":[" c "],\"usage\":null}\n\n"
#define USAGE                                                                                      \
	"data: "                                                                                   \
	"{\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":5,"     \
	"\"total_tokens\":11}}\n\n"
#define DONE "data: [DONE]\n\n"

static const char asked[] =
    CHUNK("{\"delta\":{\"role\":\"assistant\"}}") CHUNK("{\"delta\":{\"content\":\"tok \"}}") DONE;
static const char metered[] = CHUNK_U("{\"delta\":{\"role\":\"assistant\"}}")
    CHUNK_U("{\"delta\":{\"content\":\"tok \"}}") USAGE DONE;

/* Feeds `in` in pieces of `step` bytes. */
static struct out strip(const char *in, size_t step, bool *dropped)
{
	struct usage_strip s;
	struct out o = {.len = 0};
	usage_strip_init(&s);
	size_t n = strlen(in);
	for (size_t i = 0; i < n; i += step)
		usage_strip_feed(&s, in + i, i + step <= n ? step : n - i, collect, &o);
	usage_strip_finish(&s, collect, &o);
	*dropped = s.dropped;
	usage_strip_free(&s);
	return o;
}

START_TEST(the_client_gets_the_stream_it_asked_for)
{
	/* whatever the pieces the upstream's bytes come in */
	const size_t steps[] = {1, 2, 3, 7, 64, 100000};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		bool dropped;
		struct out o = strip(metered, steps[i], &dropped);
		ck_assert_uint_eq(o.len, strlen(asked));
		ck_assert(memcmp(o.buf, asked, o.len) == 0);
		ck_assert(dropped);
	}
}
END_TEST

START_TEST(other_streams_pass_untouched)
{
	const char *in[] = {
	    asked,
	    /* Anthropic's events, CRLF lines, an event with no blank line at the end */
	    "event: message_start\r\ndata: "
	    "{\"type\":\"message_start\",\"usage\":{\"input_tokens\":3}}\r\n\r\n",
	    "data: {\"choices\":[{\"delta\":{}}],\"usage\":nullish}\n\n",
	    "data: {\"choices\":[],\"x\":1}\n\ndata: {\"choices\":[1]",
	};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		bool dropped;
		struct out o = strip(in[i], 5, &dropped);
		ck_assert_uint_eq(o.len, strlen(in[i]));
		ck_assert(memcmp(o.buf, in[i], o.len) == 0);
		ck_assert(!dropped);
	}
}
END_TEST

/* s with every LF replaced by `eol` (CR LF or CR). */
static char *with_eol(const char *s, const char *eol)
{
	char *out = malloc(2 * strlen(s) + 1), *o = out;
	ck_assert_ptr_nonnull(out);
	for (; *s; s++) {
		if (*s != '\n') {
			*o++ = *s;
			continue;
		}
		memcpy(o, eol, strlen(eol));
		o += strlen(eol);
	}
	*o = '\0';
	return out;
}

/* Lines may end with LF, CR LF or CR alone (the WHATWG stream format), and
 * the events may carry an event: line before their data: line; the stream
 * cut in two at every position. */
START_TEST(every_line_end_every_cut)
{
	static const char in_lf[] = "event: chunk\n" CHUNK_U(
	    "{\"delta\":{\"role\":\"assistant\"}}") ": note\n\n"
	                                            "event: chunk\n" USAGE DONE;
	static const char want_lf[] =
	    "event: chunk\n" CHUNK("{\"delta\":{\"role\":\"assistant\"}}") ": note\n\n" DONE;
	static const char *const eols[] = {"\n", "\r\n", "\r"};
	for (size_t e = 0; e < 3; e++) {
		char *in = with_eol(in_lf, eols[e]), *want = with_eol(want_lf, eols[e]);
		size_t n = strlen(in);
		for (size_t cut = 0; cut <= n; cut++) {
			struct usage_strip s;
			struct out o = {.len = 0};
			usage_strip_init(&s);
			usage_strip_feed(&s, in, cut, collect, &o);
			usage_strip_feed(&s, in + cut, n - cut, collect, &o);
			usage_strip_finish(&s, collect, &o);
			ck_assert_msg(o.len == strlen(want) && memcmp(o.buf, want, o.len) == 0,
			              "eol %zu, cut %zu: %.*s", e, cut, (int)o.len, o.buf);
			ck_assert(s.dropped);
			usage_strip_free(&s);
		}
		free(in);
		free(want);
	}
}
END_TEST

static void count(void *ctx, const char *data, size_t len)
{
	(void)data;
	*(size_t *)ctx += len;
}

START_TEST(an_event_over_the_cap_passes_through)
{
	struct usage_strip s;
	usage_strip_init(&s);
	char *big = malloc(USAGE_STRIP_EVENT_MAX + 10);
	memset(big, 'a', USAGE_STRIP_EVENT_MAX + 10);
	memcpy(big, "data: ", 6);
	size_t total = 0, n = USAGE_STRIP_EVENT_MAX + 10;
	for (size_t i = 0; i < n; i += 4096)
		usage_strip_feed(&s, big + i, i + 4096 <= n ? 4096 : n - i, count, &total);
	ck_assert(s.passthrough);
	ck_assert_uint_eq(total, n); /* every byte, none held */
	usage_strip_free(&s);
	free(big);
}
END_TEST

static int inject(const char *body, char **out, size_t *len)
{
	struct tokens_cost c;
	tokens_estimate(body, strlen(body), 0, &c);
	return usage_inject_request(body, strlen(body), &c, out, len);
}

START_TEST(chat_completions_is_the_api_not_the_dialect)
{
#define IS(p) usage_api_is_chat_completions(p, strlen(p))
	ck_assert(IS("/v1/chat/completions"));
	ck_assert(IS("/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"));
	ck_assert(IS("/openai/v1/chat/completions"));     /* Groq */
	ck_assert(IS("/v1beta/openai/chat/completions")); /* Gemini's OpenAI layer */
	ck_assert(IS("/v1/chat/completions/"));
	ck_assert(!IS("/v1/completions"));
	ck_assert(!IS("/v1/messages"));
	ck_assert(!IS("/v1/chat/completions/abc123")); /* a stored completion */
	ck_assert(!IS("/v1/chat/completionsx"));
	ck_assert(!IS("/x?next=/chat/completions"));
	ck_assert(!IS(""));
	ck_assert(!usage_api_is_chat_completions(NULL, 0));
#undef IS
}
END_TEST

START_TEST(include_usage_is_added_as_the_client_wrote_it)
{
	char *out;
	size_t len;
	ck_assert_int_eq(
	    inject("{\"model\":\"m\", \"stream\": true, \"messages\":[]}\n", &out, &len), 1);
	ck_assert_str_eq(out, "{\"model\":\"m\", \"stream\": true, "
	                      "\"messages\":[],\"stream_options\":{\"include_usage\":true}}\n");
	ck_assert_uint_eq(len, strlen(out));
	free(out);
	/* stream_options without include_usage: set in it */
	ck_assert_int_eq(
	    inject("{\"stream\":true,\"stream_options\":{\"include_obfuscation\":false}}", &out,
	           &len),
	    1);
	ck_assert_str_eq(out, "{\"stream\":true,\"stream_options\":{\"include_obfuscation\":false,"
	                      "\"include_usage\":true}}");
	free(out);
	/* as the client wrote it there too; an empty object; a false one; the last
	 * of repeated members is the one that counts (jansson's and the
	 * provider's reading) */
	ck_assert_int_eq(
	    inject("{ \"stream\" : true , \"stream_options\" : { \"a\" : 1 } }", &out, &len), 1);
	ck_assert_str_eq(out, "{ \"stream\" : true , \"stream_options\" : { \"a\" : 1 ,"
	                      "\"include_usage\":true} }");
	free(out);
	ck_assert_int_eq(inject("{\"stream\":true,\"stream_options\":{}}", &out, &len), 1);
	ck_assert_str_eq(out, "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
	free(out);
	ck_assert_int_eq(
	    inject("{\"stream\":true,\"stream_options\":{\"include_usage\": false,\"b\":2}}", &out,
	           &len),
	    1);
	ck_assert_str_eq(out,
	                 "{\"stream\":true,\"stream_options\":{\"include_usage\": true,\"b\":2}}");
	free(out);
	ck_assert_int_eq(inject("{\"stream\":false,\"stream_options\":null,\"stream\":true,"
	                        "\"stream_options\":{\"include_usage\":true,\"include_usage\":0}}",
	                        &out, &len),
	                 1);
	ck_assert_str_eq(out,
	                 "{\"stream\":false,\"stream_options\":null,\"stream\":true,"
	                 "\"stream_options\":{\"include_usage\":true,\"include_usage\":true}}");
	free(out);
	/* nothing to do */
	const char *same[] = {"{\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
	                      "{\"stream\":false}",
	                      "{\"messages\":[]}",
	                      "not json",
	                      "[{\"stream\":true}]",
	                      "{\"stream\":true",
	                      "{\"stream\":true,\"stream_options\":null}",
	                      "{\"stream\":true,\"stream\":false}",
	                      "{\"stream\":\"true\"}",
	                      "{\"stream\":true,\"stream_options\":{\"include_usage\":1,"
	                      "\"include_usage\":true}}",
	                      "{\"x\":{\"stream\":true}}",
	                      ""};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		ck_assert_int_eq(inject(same[i], &out, &len), 0);
}
END_TEST

static Suite *usage_strip_suite(void)
{
	Suite *s = suite_create("usage_strip");
	TCase *tc = tcase_create("usage_strip");
	tcase_add_test(tc, the_client_gets_the_stream_it_asked_for);
	tcase_add_test(tc, other_streams_pass_untouched);
	tcase_add_test(tc, every_line_end_every_cut);
	tcase_add_test(tc, an_event_over_the_cap_passes_through);
	tcase_add_test(tc, include_usage_is_added_as_the_client_wrote_it);
	tcase_add_test(tc, chat_completions_is_the_api_not_the_dialect);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("usage_strip", usage_strip_suite)
