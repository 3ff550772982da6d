/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for tokens: estimates, checked against the jansson tree walk
 * (usage: test_usage_read.c and test_usage_sse.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_mutations.h"
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

/* Whether the request named its output (the cost model then charges that, or
 * else the lane's percentile). */
START_TEST(output_named)
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
		tokens_estimate(b, n, 1000, &c);
		return;
	}
	struct tokens_cost a, r;
	tokens_estimate(b, n, 1000, &a);
	ref_tokens_estimate(b, n, 1000, &r);
	bool same = ref_estimate_agrees(b, n, &a, &r) && ref_prefix_agrees(b, n, &a);
	if (!same && disagreements++ < 5)
		fprintf(stderr,
		        "disagree on [%.*s]: json %d/%d prompt %lld/%lld output %lld/%lld\n",
		        (int)(n > 300 ? 300 : n), b, a.json, r.json, (long long)a.prompt,
		        (long long)r.prompt, (long long)a.output, (long long)r.output);
}

/* Every mutation of body (json_mutations.h), compared. */
static void compare_mutations(const char *body)
{
	json_mutations(body, compare_one);
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
	tcase_add_test(e, output_named);
	suite_add_tcase(s, e);
	TCase *ref = tcase_create("reference");
	tcase_set_timeout(ref, 60);
	tcase_add_test(ref, agrees_with_jansson);
	tcase_add_test(ref, agrees_at_the_limits);
	suite_add_tcase(s, ref);
	return s;
}

UNIT_MAIN("tokens", tokens_suite)
