/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for tokens: what a request sends the model, item by item (issue
 * 28 items 1 and 5): every Responses API input item kind, tool definitions in
 * the four APIs, cache_control lifetimes, the history a provider holds; each
 * against a number computed by hand, and the scanner against the tree walk of
 * tokens_ref.h on these shapes and their mutations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider/tokens.h"
#include "unit.h"

/* Only the estimate's half of the reference is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "json_mutations.h"
#include "tokens_ref.h"

static struct tokens_cost cost_of(const char *body)
{
	struct tokens_cost c;
	tokens_estimate(body, strlen(body), 1024, &c);
	return c;
}

/* One Responses API input item (its JSON) alone in "input": its prompt. */
static int64_t item_prompt(const char *item)
{
	char body[1024];
	snprintf(body, sizeof body, "{\"model\":\"gpt-5\",\"input\":[%s],\"max_output_tokens\":9}",
	         item);
	struct tokens_cost c = cost_of(body);
	ck_assert_msg(c.json, "%s", body);
	ck_assert_int_eq(c.output, 9);
	return c.prompt;
}

/* Each row: an item, the characters it sends the model (counted by hand in
 * the comment), and the tokens: characters / 4 rounded up. */
static const struct item_row {
	const char *item;
	int64_t tokens;
} item_rows[] = {
    /* a message, content a string: "12345678" 8 → 2 */
    {"{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"12345678\"}", 2},
    /* input_text and output_text parts; an image counts nothing: 4 + 8 = 12 → 3 */
    {"{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
     "\"abcd\"},{\"type\":\"input_image\",\"image_url\":\"https://example.com/a.png\"},"
     "{\"type\":\"output_text\",\"text\":\"efghijkl\",\"annotations\":[]}]}",
     3},
    /* function_call: name "shell" 5 + arguments {"cmd":"ls"} 12 = 17 → 5 */
    {"{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"shell\","
     "\"arguments\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}",
     5},
    /* function_call_output, a string: "file1\nfile2\n" 12 → 3 */
    {"{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"file1\\nfile2\\n\"}",
     3},
    /* function_call_output, parts: "abcdefghi" 9 → 3 (the file counts nothing) */
    {"{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":[{\"type\":"
     "\"input_text\",\"text\":\"abcdefghi\"},{\"type\":\"input_file\",\"file_id\":\"file-1\"}]}",
     3},
    /* custom_tool_call: name "apply_patch" 11 + input "*** Begin Patch" 15 = 26 → 7 */
    {"{\"type\":\"custom_tool_call\",\"call_id\":\"c\",\"name\":\"apply_patch\",\"input\":"
     "\"*** Begin Patch\"}",
     7},
    /* custom_tool_call_output: "done" 4 → 1 */
    {"{\"type\":\"custom_tool_call_output\",\"call_id\":\"c\",\"output\":\"done\"}", 1},
    /* reasoning: summary "abcdefghijkl" 12 + 3/4 of the 12 base64 characters of
     * encrypted_content, 9 = 21 → 6 */
    {"{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[{\"type\":\"summary_text\",\"text\":"
     "\"abcdefghijkl\"}],\"encrypted_content\":\"QUJDREVGR0g=\"}",
     6},
    /* reasoning with its text as content parts: 8 → 2 */
    {"{\"type\":\"reasoning\",\"id\":\"rs_2\",\"summary\":[],\"content\":[{\"type\":"
     "\"reasoning_text\",\"text\":\"thinking\"}]}",
     2},
    /* a reasoning item that is only sealed: 3/4 of 10 is 7 (floor) → 2 */
    {"{\"type\":\"reasoning\",\"id\":\"rs_3\",\"summary\":[],\"encrypted_content\":"
     "\"gAAAAABoZx\"}",
     2},
    /* file_search_call: queries "rate limits" 11 + results[].text "abcdefgh" 8 = 19 → 5 */
    {"{\"type\":\"file_search_call\",\"id\":\"fs_1\",\"status\":\"completed\",\"queries\":"
     "[\"rate limits\"],\"results\":[{\"file_id\":\"f\",\"filename\":\"a.md\",\"score\":0.9,"
     "\"text\":\"abcdefgh\"}]}",
     5},
    /* web_search_call carries no text of its results; an item_reference names a
     * stored item, whose text is not in the request */
    {"{\"type\":\"web_search_call\",\"id\":\"ws_1\",\"status\":\"completed\",\"action\":"
     "{\"type\":\"search\",\"query\":\"pacerd\"}}",
     0},
    {"{\"type\":\"item_reference\",\"id\":\"msg_1\"}", 0},
    /* Anthropic's tool_use in the same shape: its name, and its input object as
     * compact JSON text, as tools count: "get_time" 8 + {"tz":"UTC"} 12 = 20 → 5 */
    {"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"get_time\",\"input\":{\"tz\":\"UTC\"}}", 5},
    /* blanks inside the object count nothing: the same 5 */
    {"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"get_time\",\"input\": { \"tz\" : \"UTC\" } }",
     5},
    /* Gemini's parts: functionCall {name, args} and functionResponse {name,
     * response}: "get_time" 8 + {"tz":"UTC"} 12 = 20 → 5; 8 + {"t":"12:00"} 13 = 21 → 6 */
    {"{\"functionCall\":{\"name\":\"get_time\",\"args\":{\"tz\":\"UTC\"}}}", 5},
    {"{\"functionResponse\":{\"name\":\"get_time\",\"response\":{\"t\":\"12:00\"}}}", 6},
    /* a number as the input: one token's worth (4 characters) → 1 */
    {"{\"type\":\"tool_use\",\"id\":\"t\",\"input\":7}", 1},
};

START_TEST(responses_item_kinds)
{
	const struct item_row *r = &item_rows[_i];
	ck_assert_msg(item_prompt(r->item) == r->tokens, "row %d: %lld, not %lld: %s", _i,
	              (long long)item_prompt(r->item), (long long)r->tokens, r->item);
}
END_TEST

/* An agent's turn: instructions and every kind at once; the characters add up
 * before the one division: 4 + 8 + 12 + 17 + 12 + 9 + 26 + 4 + 21 = 113 → 29. */
START_TEST(responses_turn_adds_up)
{
	const char *body =
	    "{\"model\":\"gpt-5-codex\",\"instructions\":\"abcd\",\"input\":["
	    "{\"role\":\"user\",\"content\":\"12345678\"},"
	    "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
	    "\"text\":\"abcdefghijkl\"}]},"
	    "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"shell\",\"arguments\":"
	    "\"{\\\"cmd\\\":\\\"ls\\\"}\"},"
	    "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"file1\\nfile2\\n\"}"
	    ","
	    "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":[{\"type\":"
	    "\"input_text\",\"text\":\"abcdefghi\"}]},"
	    "{\"type\":\"custom_tool_call\",\"call_id\":\"c2\",\"name\":\"apply_patch\",\"input\":"
	    "\"*** Begin Patch\"},"
	    "{\"type\":\"custom_tool_call_output\",\"call_id\":\"c2\",\"output\":\"done\"},"
	    "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":"
	    "\"abcdefghijkl\"}],\"encrypted_content\":\"QUJDREVGR0g=\"}],"
	    "\"max_output_tokens\":100}";
	struct tokens_cost c = cost_of(body);
	ck_assert_int_eq(c.prompt, 29);
	ck_assert_int_eq(c.total, 129);
	ck_assert_int_eq(c.tools_tokens, 0);
	/* the items are the input's: 109 characters → 28 */
	ck_assert_int_eq(c.items_tokens, 28);
	/* the instructions key the prompt */
	ck_assert_uint_ne(c.prompt_key, 0);
	ck_assert_int_eq(c.prefix_tokens, 1);
}
END_TEST

/* Tool definitions by their compact JSON text (counted with a JSON
 * serializer: JSON.stringify's length, each number 4), / 4 rounded up. */
static const struct tools_row {
	const char *body;
	int64_t tools_tokens, prompt;
} tools_rows[] = {
    /* Chat Completions: 128 characters → 32; the user's "hi" → 1 */
    {"{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{"
     "\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"Current "
     "time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]}",
     32, 33},
    /* the same, pretty-printed: blanks count nothing */
    {"{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\": [\n"
     "  {\n    \"type\": \"function\",\n    \"function\": {\n      \"name\": \"get_time\",\n"
     "      \"description\": \"Current time\",\n      \"parameters\": {\"type\": \"object\", "
     "\"properties\": {}}\n    }\n  }\n]}",
     32, 33},
    /* Chat's legacy functions: 30 → 8 */
    {"{\"messages\":[],\"functions\":[{\"name\":\"f\",\"parameters\":{}}]}", 8, 8},
    /* both: 128 + 30 = 158 → 40 */
    {"{\"messages\":[],\"functions\":[{\"name\":\"f\",\"parameters\":{}}],\"tools\":[{"
     "\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"Current "
     "time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]}",
     40, 40},
    /* Responses API (true is 4 characters): 62 → 16; instructions "abcdefgh" → 2 */
    {"{\"model\":\"gpt-5\",\"instructions\":\"abcdefgh\",\"tools\":[{\"type\":\"function\","
     "\"name\":\"f\",\"parameters\":{},\"strict\":true}]}",
     16, 18},
    /* Anthropic: 149 → 38; the message "Weather?" 8 → 2 */
    {"{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":5,\"tools\":[{\"name\":\"get_weather\","
     "\"description\":\"Get the weather\",\"input_schema\":{\"type\":\"object\",\"properties\":"
     "{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}],\"messages\":[{\"role\":"
     "\"user\",\"content\":\"Weather?\"}]}",
     38, 40},
    /* Gemini functionDeclarations: 90 → 23 (22.5); "abcd" → 1 */
    {"{\"contents\":[{\"parts\":[{\"text\":\"abcd\"}]}],\"tools\":[{\"functionDeclarations\":"
     "[{\"name\":\"f\",\"description\":\"d\",\"parameters\":{\"type\":\"OBJECT\"}}]}]}",
     23, 24},
    /* a number is one token's worth (4), however written: 41 - 1 + 4 = 44 → 11 */
    {"{\"tools\":[{\"name\":\"n\",\"parameters\":{\"minimum\":0}}]}", 11, 11},
    {"{\"tools\":[{\"name\":\"n\",\"parameters\":{\"minimum\":0.5e1}}]}", 11, 11},
    /* escapes count as the character they stand for, UTF-8 by code points:
     * [{"d":"\"é\""}] is 13 characters → 4 */
    {"{\"tools\":[{\"d\":\"\\\"\xc3\xa9\\\"\"}]}", 4, 4},
    /* a repeated member name counts as written, both times: [{"a":1,"a":2}]
     * 1+1+3+1+4+1+3+1+4+1+1 = 21 → 6 */
    {"{\"tools\":[{\"a\":1,\"a\":2}]}", 6, 6},
    /* not an array: nothing */
    {"{\"tools\":null,\"functions\":{\"name\":\"f\"}}", 0, 0},
    {"{\"tools\":[]}", 1, 1}, /* [] is 2 characters */
};

START_TEST(tools_counted)
{
	const struct tools_row *r = &tools_rows[_i];
	struct tokens_cost c = cost_of(r->body);
	ck_assert_msg(c.tools_tokens == r->tools_tokens && c.prompt == r->prompt,
	              "row %d: tools %lld prompt %lld: %s", _i, (long long)c.tools_tokens,
	              (long long)c.prompt, r->body);
}
END_TEST

/* Tools come first in the prompt: they join whatever prefix keys it, and seed
 * its key; a tool that carries cache_control marks them. */
START_TEST(tools_in_the_prefix)
{
	static const char tools1[] = "[{\"name\":\"f\",\"parameters\":{}}]"; /* 30 → 8 */
	static const char tools2[] = "[{\"name\":\"g\",\"parameters\":{}}]";
	char b1[512], b2[512], b3[512];
	/* unmarked: instructions (8 → 2) keyed with the tools before them */
	snprintf(b1, sizeof b1, "{\"instructions\":\"abcdefgh\",\"input\":\"q\",\"tools\":%s}",
	         tools1);
	snprintf(b2, sizeof b2, "{\"instructions\":\"abcdefgh\",\"input\":\"q\",\"tools\":%s}",
	         tools2);
	snprintf(b3, sizeof b3, "{\"instructions\":\"abcdefgh\",\"input\":\"q\"}");
	struct tokens_cost c1 = cost_of(b1), c2 = cost_of(b2), c3 = cost_of(b3);
	ck_assert_int_eq(c1.tools_tokens, 8);
	ck_assert_int_eq(c1.prefix_tokens, 8 + 2);
	ck_assert_int_eq(c1.head_tokens, 8 + 2);
	ck_assert_int_eq(c3.prefix_tokens, 2);
	ck_assert_uint_ne(c1.prompt_key, c2.prompt_key); /* other tools, another prompt */
	ck_assert_uint_ne(c1.prompt_key, c3.prompt_key);
	/* tools alone key nothing */
	ck_assert_uint_eq(cost_of("{\"input\":\"q\",\"tools\":[{\"name\":\"f\"}]}").prompt_key, 0);
	/* Anthropic: marked system block (16 → 4) after the tools */
	snprintf(b1, sizeof b1,
	         "{\"tools\":%s,\"system\":[{\"type\":\"text\",\"text\":\"0123456789abcdef\","
	         "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":\"user\","
	         "\"content\":\"q\"}]}",
	         tools1);
	c1 = cost_of(b1);
	ck_assert(c1.cache_marked);
	ck_assert_int_eq(c1.prefix_tokens, 8 + 4);
	ck_assert_int_eq(c1.head_tokens, 8 + 4);
	ck_assert_uint_eq(c1.head_key, c1.prompt_key);
	/* a mark on the tool: the tools are the head; the system block the rest */
	snprintf(b2, sizeof b2,
	         "{\"tools\":[{\"name\":\"f\",\"parameters\":{},\"cache_control\":{\"type\":"
	         "\"ephemeral\"}}],\"system\":[{\"type\":\"text\",\"text\":\"0123456789abcdef\","
	         "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[]}");
	c2 = cost_of(b2);
	/* [{"name":"f","parameters":{},"cache_control":{"type":"ephemeral"}}]: 30 +
	 * ,"cache_control":{"type":"ephemeral"} 37 = 67 → 17 */
	ck_assert_int_eq(c2.tools_tokens, 17);
	ck_assert(c2.cache_marked);
	ck_assert_int_eq(c2.head_tokens, 17);
	ck_assert_int_eq(c2.prefix_tokens, 17 + 4);
	ck_assert_uint_ne(c2.head_key, c2.prompt_key);
	/* marked tools and nothing else */
	c3 = cost_of("{\"tools\":[{\"name\":\"f\",\"cache_control\":{}}],\"messages\":[{\"role\":"
	             "\"user\",\"content\":\"hello\"}]}");
	ck_assert(c3.cache_marked);
	ck_assert_uint_ne(c3.prompt_key, 0);
	ck_assert_uint_eq(c3.head_key, c3.prompt_key);
	/* [{"name":"f","cache_control":{}}] = 1+1+6+1+3+1+15+1+2+1+1 = 33 → 9 */
	ck_assert_int_eq(c3.prefix_tokens, 9);
	ck_assert_int_eq(c3.prompt, 9 + 2);
}
END_TEST

/* cache_control's ttl: the longest a mark names, 0 when none names one. */
static const struct ttl_row {
	const char *body;
	int64_t ttl_ms;
} ttl_rows[] = {
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\"}}]}",
     3600000},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"5m\"}}]}",
     300000},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"type\":\"ephemeral\"}}]}", 0},
    {"{\"system\":\"a\",\"messages\":[]}", 0},
    /* a 1h block before a 5m one (Anthropic's order): the 1h */
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"1h\"}}],\"messages\":[{"
     "\"content\":[{\"text\":\"b\",\"cache_control\":{\"ttl\":\"5m\"}}]}]}",
     3600000},
    /* on a tool; nested in a tool result */
    {"{\"tools\":[{\"name\":\"f\",\"cache_control\":{\"ttl\":\"1h\"}}],\"messages\":[]}", 3600000},
    {"{\"messages\":[{\"content\":[{\"type\":\"tool_result\",\"content\":[{\"text\":\"x\","
     "\"cache_control\":{\"ttl\":\"90s\"}}]}]}]}",
     90000},
    /* the last ttl of the last cache_control; escapes decoded */
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"1h\"},\"cache_control\":{"
     "\"ttl\":\"5m\"}}]}",
     300000},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"1h\",\"ttl\":null}}]}", 0},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"\\u0031h\"}}]}", 3600000},
    /* at most a day; not a duration */
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"100h\"}}]}", 86400000},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"1d\"}}]}", 0},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"h\"}}]}", 0},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":3600}}]}", 0},
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"1234567h\"}}]}", 0},
    /* not a mark: cache_control not an object, or outside system, messages, tools */
    {"{\"system\":[{\"text\":\"a\",\"cache_control\":\"1h\"}]}", 0},
    {"{\"input\":[{\"content\":[{\"text\":\"a\",\"cache_control\":{\"ttl\":\"1h\"}}]}]}", 0},
};

START_TEST(cache_ttl_read)
{
	const struct ttl_row *r = &ttl_rows[_i];
	struct tokens_cost c = cost_of(r->body);
	ck_assert_msg(c.cache_ttl_ms == r->ttl_ms, "row %d: %lld: %s", _i,
	              (long long)c.cache_ttl_ms, r->body);
}
END_TEST

/* History the provider holds: chained, stored, the conversation's key. */
START_TEST(held_history_flags)
{
	struct tokens_cost c = cost_of(
	    "{\"model\":\"gpt-5\",\"previous_response_id\":\"resp_1\",\"input\":["
	    "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"abcdefgh\"}]}");
	ck_assert(c.chained && c.stored);
	ck_assert_uint_eq(c.chain_key, 0);
	ck_assert_int_eq(c.items_tokens, 2);
	/* a conversation, by name or as an object: one key; another id, another */
	struct tokens_cost a = cost_of("{\"conversation\":\"conv_1\",\"input\":\"hi\"}");
	struct tokens_cost b = cost_of("{\"conversation\":{\"id\":\"conv_1\"},\"input\":\"hi\"}");
	struct tokens_cost d = cost_of("{\"conversation\":\"conv_2\",\"input\":\"hi\"}");
	ck_assert(a.chained && b.chained && d.chained);
	ck_assert_uint_ne(a.chain_key, 0);
	ck_assert_uint_eq(a.chain_key, b.chain_key);
	ck_assert_uint_ne(a.chain_key, d.chain_key);
	/* a first turn: stored, not chained */
	c = cost_of("{\"model\":\"gpt-5\",\"instructions\":\"x\",\"input\":\"hi\"}");
	ck_assert(!c.chained && c.stored);
	c = cost_of("{\"model\":\"gpt-5\",\"instructions\":\"x\"}");
	ck_assert(c.stored);
	ck_assert_int_eq(c.items_tokens, 0);
	/* named as nothing */
	c = cost_of("{\"previous_response_id\":null,\"conversation\":\"\",\"input\":\"hi\"}");
	ck_assert(!c.chained);
	c = cost_of(
	    "{\"previous_response_id\":\"r\",\"previous_response_id\":\"\",\"input\":\"x\"}");
	ck_assert(!c.chained);
	c = cost_of("{\"conversation\":{\"id\":5},\"input\":\"x\"}");
	ck_assert(!c.chained);
	ck_assert_uint_eq(c.chain_key, 0);
	/* not kept: store false; not the Responses API */
	c = cost_of("{\"store\":false,\"input\":\"hi\"}");
	ck_assert(!c.stored);
	c = cost_of("{\"store\":true,\"input\":\"hi\"}");
	ck_assert(c.stored);
	ck_assert(!cost_of("{\"messages\":[],\"input\":\"hi\"}").stored);
	ck_assert(!cost_of("{\"model\":\"text-embedding-3-small\",\"input\":\"hi\"}").stored);
	ck_assert(!cost_of("{\"contents\":[],\"instructions\":\"x\"}").stored);
	ck_assert(!cost_of("{\"prompt\":\"hi\"}").stored);
	ck_assert(!cost_of("not json \"previous_response_id\"").chained);
}
END_TEST

/* ---- the scanner agrees with the tree walk on these shapes ---- */

static int disagreements;

static void compare_one(const char *b, size_t n)
{
	if (memchr(b, '\0', n) != NULL) { /* tokens_ref.h: jansson drops a NUL byte */
		struct tokens_cost c;
		tokens_estimate(b, n, 1000, &c);
		return;
	}
	struct tokens_cost a, r;
	tokens_estimate(b, n, 1000, &a);
	ref_tokens_estimate(b, n, 1000, &r);
	if ((!ref_estimate_agrees(b, n, &a, &r) || !ref_prefix_agrees(b, n, &a)) &&
	    disagreements++ < 5)
		fprintf(stderr,
		        "disagree on [%.*s]: json %d/%d prompt %lld/%lld tools %lld/%lld "
		        "ttl %lld chained %d stored %d items %lld\n",
		        (int)(n > 300 ? 300 : n), b, a.json, r.json, (long long)a.prompt,
		        (long long)r.prompt, (long long)a.tools_tokens, (long long)r.tools_tokens,
		        (long long)a.cache_ttl_ms, a.chained, a.stored, (long long)a.items_tokens);
}

/* Every mutation of body (json_mutations.h), compared. */
static void compare_mutations(const char *body)
{
	json_mutations(body, compare_one);
}

static const char *const agree_bodies[] = {
    "{\"model\":\"gpt-5\",\"instructions\":\"ab\",\"previous_response_id\":\"r\",\"input\":["
    "{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"},{\"type\":"
    "\"function_call_output\",\"output\":[{\"text\":\"x\"}]},{\"type\":\"reasoning\","
    "\"summary\":[{\"text\":\"s\"}],\"encrypted_content\":\"QUJD\"}],\"store\":true}",
    "{\"input\":[{\"type\":\"custom_tool_call\",\"name\":\"p\",\"input\":\"*\"},{\"type\":"
    "\"file_search_call\",\"queries\":[\"q\"],\"results\":[{\"text\":\"t\",\"score\":1}]}],"
    "\"conversation\":{\"id\":\"c\"},\"tools\":[{\"type\":\"function\",\"name\":\"f\","
    "\"strict\":false,\"parameters\":{\"a\":[1,null,true]}}]}",
    "{\"tools\":[{\"name\":\"f\",\"cache_control\":{\"ttl\":\"1h\"}}],\"system\":[{\"text\":"
    "\"abcd\",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"5m\"}}],\"messages\":[{"
    "\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"name\":\"n\",\"input\":{}},{"
    "\"text\":\"q\",\"cache_control\":{}}]}],\"functions\":[{\"a\":1,\"a\":2}]}",
    "{\"contents\":[{\"parts\":[{\"text\":\"a\"}]}],"
    "\"tools\":[{\"functionDeclarations\":[{\"name\":\"f\",\"d\":\"\\u00e9\\\"\"}]}],"
    "\"conversation\":\"conv\",\"store\":false}",
};

START_TEST(items_agree_with_jansson)
{
	for (size_t i = 0; i < sizeof agree_bodies / sizeof agree_bodies[0]; i++)
		compare_mutations(agree_bodies[i]);
	ck_assert_int_eq(disagreements, 0);
}
END_TEST

static Suite *items_suite(void)
{
	Suite *s = suite_create("tokens_items");
	TCase *e = tcase_create("items");
	tcase_add_loop_test(e, responses_item_kinds, 0,
	                    (int)(sizeof item_rows / sizeof item_rows[0]));
	tcase_add_test(e, responses_turn_adds_up);
	tcase_add_loop_test(e, tools_counted, 0, (int)(sizeof tools_rows / sizeof tools_rows[0]));
	tcase_add_test(e, tools_in_the_prefix);
	tcase_add_loop_test(e, cache_ttl_read, 0, (int)(sizeof ttl_rows / sizeof ttl_rows[0]));
	tcase_add_test(e, held_history_flags);
	suite_add_tcase(s, e);
	TCase *ref = tcase_create("reference");
	tcase_set_timeout(ref, 60);
	tcase_add_test(ref, items_agree_with_jansson);
	suite_add_tcase(s, ref);
	return s;
}

UNIT_MAIN("tokens_items", items_suite)
