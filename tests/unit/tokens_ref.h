/* SPDX-License-Identifier: Apache-2.0 */
/* The token estimate as it was written on jansson trees, kept as the
 * reference the JSON scanner of tokens.c must agree with: the unit test and
 * the fuzzer compare the two on every input (the usage: usage_ref.h).
 * Include once. */
#ifndef PACERD_TOKENS_REF_H
#define PACERD_TOKENS_REF_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "provider/tokens.h"

#define REF_MAX_N 128
#define REF_MAX_OUTPUT INT64_C(100000000)
#define REF_MAX_DEPTH 8
#define REF_CHARS_PER_TOKEN 4

/* ---------- estimate ---------- */

static int64_t ref_utf8_chars(const char *s, size_t len)
{
	int64_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

static int64_t ref_string_chars(json_t *v)
{
	return json_is_string(v) ? ref_utf8_chars(json_string_value(v), json_string_length(v)) : 0;
}

/* Members of a part or item whose string counts, and those holding content. */
static const char *const ref_string_members[] = {"text", "name", "arguments"};
/* A string's characters, else the value's compact JSON text (ref_json_chars). */
static const char *const ref_json_members[] = {"input", "args", "response"};
static const char *const ref_content_members[] = {"content",      "parts",           "output",
                                                  "summary",      "queries",         "results",
                                                  "functionCall", "functionResponse"};
#define REF_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Text of a content value: a string, an array of parts or strings, or one part
 * or item ({"text"}, {"content": ...} of a tool result, {"parts": [...]} of
 * Gemini, the Responses API's items: name, arguments, input, output, summary,
 * 3/4 of encrypted_content, file search queries and results). */
static int64_t ref_json_chars(json_t *v);

static int64_t ref_content_chars(json_t *v, int depth)
{
	if (depth > REF_MAX_DEPTH)
		return 0;
	if (json_is_string(v))
		return ref_string_chars(v);
	if (json_is_integer(v)) /* a token id */
		return REF_CHARS_PER_TOKEN;
	int64_t n = 0;
	if (json_is_array(v)) {
		size_t i;
		json_t *el;
		json_array_foreach(v, i, el) n += ref_content_chars(el, depth + 1);
	} else if (json_is_object(v)) {
		for (size_t i = 0; i < REF_COUNT(ref_string_members); i++)
			n += ref_string_chars(json_object_get(v, ref_string_members[i]));
		for (size_t i = 0; i < REF_COUNT(ref_json_members); i++) {
			json_t *m = json_object_get(v, ref_json_members[i]);
			n += m == NULL           ? 0
			     : json_is_string(m) ? ref_string_chars(m)
			                         : ref_json_chars(m);
		}
		n += ref_string_chars(json_object_get(v, "encrypted_content")) * 3 / 4;
		for (size_t i = 0; i < REF_COUNT(ref_content_members); i++)
			n += ref_content_chars(json_object_get(v, ref_content_members[i]),
			                       depth + 1);
	}
	return n;
}

/* Characters of a value's compact JSON text, as tokens.c counts tools: a
 * number one token's worth. */
static int64_t ref_json_chars(json_t *v)
{
	size_t i, n;
	json_t *el;
	const char *key;
	int64_t c = 2;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		n = json_object_size(v);
		json_object_foreach(v, key, el)
		{
			c += ref_utf8_chars(key, strlen(key)) + 3 + ref_json_chars(el);
		}
		return c + (n > 0 ? (int64_t)n - 1 : 0);
	case JSON_ARRAY:
		n = json_array_size(v);
		json_array_foreach(v, i, el) c += ref_json_chars(el);
		return c + (n > 0 ? (int64_t)n - 1 : 0);
	case JSON_STRING:
		return ref_string_chars(v) + 2;
	case JSON_INTEGER:
	case JSON_REAL:
		return REF_CHARS_PER_TOKEN;
	case JSON_FALSE:
		return 5;
	default: /* true, null */
		return 4;
	}
}

/* Tool definitions: "tools" and "functions", when arrays, by their JSON text. */
static int64_t ref_tools_tokens(json_t *root)
{
	int64_t n = 0;
	json_t *t = json_object_get(root, "tools"), *f = json_object_get(root, "functions");
	if (json_is_array(t))
		n += ref_json_chars(t);
	if (json_is_array(f))
		n += ref_json_chars(f);
	return (n + 3) / 4;
}

/* jansson keeps the last of an object's members of one name; the scanner
 * counts the JSON text of tools as written, duplicates too: the one place the
 * two may differ (besides a NUL byte). Whether the body has such duplicates. */
static bool ref_has_duplicates(const char *body, size_t len)
{
	json_t *strict = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	json_decref(strict);
	return strict == NULL;
}

/* The arguments of an assistant's earlier tool calls are prompt text too: in
 * agent loops they are often the bulk of it. */
static int64_t ref_tool_call_chars(json_t *calls)
{
	int64_t n = 0;
	size_t i;
	json_t *c;
	json_array_foreach(calls, i, c) n +=
	    ref_string_chars(json_object_get(json_object_get(c, "function"), "arguments"));
	return n;
}

static int64_t ref_prompt_chars(json_t *root)
{
	static const char *const fields[] = {"input",
	                                     "prompt",
	                                     "system",
	                                     "contents",
	                                     "instructions",
	                                     "systemInstruction",
	                                     "system_instruction"};
	int64_t n = 0;
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(root, "messages"), i, m)
	{
		n += ref_content_chars(json_object_get(m, "content"), 1);
		n += ref_tool_call_chars(json_object_get(m, "tool_calls"));
	}
	for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
		n += ref_content_chars(json_object_get(root, fields[f]), 0);
	return n;
}

/* A positive integer member, clamped; 0 when absent or not positive. */
static int64_t ref_positive(json_t *obj, const char *key, int64_t cap)
{
	json_t *v = json_object_get(obj, key);
	json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
	if (x <= 0)
		return 0;
	return x > cap ? cap : (int64_t)x;
}

static bool ref_is_embedding(json_t *root)
{
	const char *model = json_string_value(json_object_get(root, "model"));
	return model != NULL && strstr(model, "embed") != NULL;
}

static int64_t ref_output_tokens(json_t *root, unsigned default_output)
{
	static const char *const fields[] = {"max_tokens", "max_completion_tokens",
	                                     "max_output_tokens"};
	json_t *gen = json_object_get(root, "generationConfig");
	int64_t out = ref_positive(gen, "maxOutputTokens", REF_MAX_OUTPUT);

	if (ref_is_embedding(root))
		return 0;
	for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
		int64_t v = ref_positive(root, fields[f], REF_MAX_OUTPUT);
		if (v > out)
			out = v;
	}
	if (out == 0)
		out = default_output;
	int64_t n = ref_positive(root, "n", REF_MAX_N);
	int64_t cand = ref_positive(gen, "candidateCount", REF_MAX_N);
	if (cand > n)
		n = cand;
	return n > 1 ? out * n : out;
}

/* Whether the first non-blank byte opens an object: a multipart upload or
 * other binary body is then dismissed without running the parser over it. */
static bool ref_looks_like_object(const char *s, size_t len)
{
	size_t i = 0;
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
		i++;
	return i < len && s[i] == '{';
}

static int64_t ref_tokens_estimate(const char *body, size_t len, unsigned default_output_tokens,
                                   struct tokens_cost *detail)
{
	struct tokens_cost c = {0};

	if (body != NULL && len > 0) {
		json_t *root =
		    ref_looks_like_object(body, len) ? json_loadb(body, len, 0, NULL) : NULL;
		c.json = json_is_object(root);
		if (c.json) {
			c.tools_tokens = ref_tools_tokens(root);
			c.prompt = (ref_prompt_chars(root) + 3) / 4 + c.tools_tokens;
			c.output = ref_output_tokens(root, default_output_tokens);
		} else {
			c.output = default_output_tokens;
		}
		json_decref(root);
	}
	c.total = c.prompt + c.output;
	if (detail != NULL)
		*detail = c;
	return c.total;
}

/* Whether the scanner's estimate a agrees with the tree walk's r (both of
 * body): where the body repeats a member name, the tools' count is the
 * scanner's (ref_has_duplicates) and the rest must agree. */
static bool ref_estimate_agrees(const char *body, size_t len, const struct tokens_cost *a,
                                const struct tokens_cost *r)
{
	int64_t tools = r->tools_tokens;
	bool dup = (a->tools_tokens != r->tools_tokens || a->prompt != r->prompt) &&
	           ref_has_duplicates(body, len);
	if (dup && a->tools_tokens != r->tools_tokens && r->tools_tokens > 0)
		tools = a->tools_tokens;
	int64_t prompt = r->prompt - r->tools_tokens + tools;
	/* A tool call's arguments as an object (tool_use input, functionCall
	 * args) count as JSON text as written, as tools do: with a repeated
	 * member name inside, the scanner counts both and the tree keeps one. */
	if (dup && a->prompt != prompt)
		prompt = a->prompt;
	return a->json == r->json && a->prompt == prompt && a->output == r->output &&
	       a->total == prompt + r->output && a->tools_tokens == tools;
}

/* ---------- model and prompt prefix (tokens.h) ---------- */

struct ref_prefix {
	bool has_model;
	char model[TOKENS_MODEL_MAX];
	size_t model_len;
	bool marked, keyed;
	int64_t prefix_tokens, head_tokens;
	int64_t ttl_ms;
	bool chained, stored, conversation;
	int64_t items_tokens;
};

/* A mark: whether there is one, the longest ttl named. */
struct ref_mark {
	bool on;
	int64_t ttl_ms;
};

static void ref_mark_merge(struct ref_mark *m, struct ref_mark o)
{
	m->on |= o.on;
	if (o.ttl_ms > m->ttl_ms)
		m->ttl_ms = o.ttl_ms;
}

/* "5m", "1h": digits (1 to 6) and s, m or h; at most a day; 0 otherwise. */
static int64_t ref_ttl_ms(json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = s != NULL ? json_string_length(v) : 0;
	if (n < 2 || n > 7)
		return 0;
	int64_t x = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		x = x * 10 + (s[i] - '0');
	}
	switch (s[n - 1]) {
	case 's':
		x *= 1000;
		break;
	case 'm':
		x *= 60000;
		break;
	case 'h':
		x *= 3600000;
		break;
	default:
		return 0;
	}
	return x < 86400000 ? x : 86400000;
}

/* The mark of an object's "cache_control" (an object), with its ttl. */
static struct ref_mark ref_cache_control(json_t *obj)
{
	json_t *cc = json_object_get(obj, "cache_control");
	struct ref_mark m = {json_is_object(cc), 0};
	if (m.on)
		m.ttl_ms = ref_ttl_ms(json_object_get(cc, "ttl"));
	return m;
}

static struct ref_mark ref_content_mark(json_t *v, int depth)
{
	struct ref_mark m = {false, 0};
	if (depth > REF_MAX_DEPTH)
		return m;
	if (json_is_array(v)) {
		size_t i;
		json_t *el;
		json_array_foreach(v, i, el)
		{
			ref_mark_merge(&m, ref_content_mark(el, depth + 1));
		}
		return m;
	}
	if (!json_is_object(v))
		return m;
	m = ref_cache_control(v);
	for (size_t i = 0; i < REF_COUNT(ref_content_members); i++)
		ref_mark_merge(
		    &m, ref_content_mark(json_object_get(v, ref_content_members[i]), depth + 1));
	return m;
}

/* The marks of the tools: a tool that is an object with a cache_control. */
static struct ref_mark ref_tools_mark(json_t *root)
{
	static const char *const fields[] = {"tools", "functions"};
	struct ref_mark m = {false, 0};
	for (size_t f = 0; f < 2; f++) {
		json_t *t = json_object_get(root, fields[f]);
		size_t i;
		json_t *el;
		if (!json_is_array(t))
			continue;
		json_array_foreach(t, i, el)
		{
			ref_mark_merge(&m, ref_cache_control(el));
		}
	}
	return m;
}

static bool ref_nonempty(json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0;
}

static bool ref_model_valid(const char *p, size_t n)
{
	if (n == 0 || n > TOKENS_MODEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
			return false;
	}
	return true;
}

/* false when the body is not a JSON object (nothing to compare). tools: the
 * tools' tokens to take (ref_estimate_agrees), or -1: the tree's. */
static bool ref_prefix_of(const char *body, size_t len, int64_t tools, struct ref_prefix *r)
{
	memset(r, 0, sizeof *r);
	json_t *root = ref_looks_like_object(body, len) ? json_loadb(body, len, 0, NULL) : NULL;
	if (!json_is_object(root)) {
		json_decref(root);
		return false;
	}
	json_t *model = json_object_get(root, "model");
	if (json_is_string(model) &&
	    ref_model_valid(json_string_value(model), json_string_length(model))) {
		r->has_model = true;
		r->model_len = json_string_length(model);
		memcpy(r->model, json_string_value(model), r->model_len);
	}
	if (tools < 0)
		tools = ref_tools_tokens(root);
	struct ref_mark tmark = ref_tools_mark(root), mk = tmark, m1;
	json_t *sys = json_object_get(root, "system"), *msgs = json_object_get(root, "messages");
	int64_t sys_chars = ref_content_chars(sys, 0), sys_first = -1, sys_last = -1;
	if (json_is_array(sys)) {
		size_t i;
		json_t *el;
		int64_t run = 0;
		json_array_foreach(sys, i, el)
		{
			run += ref_content_chars(el, 1);
			if ((m1 = ref_content_mark(el, 1)).on) {
				ref_mark_merge(&mk, m1);
				if (sys_first < 0)
					sys_first = run;
				sys_last = run;
			}
		}
	} else if ((m1 = ref_content_mark(sys, 0)).on) {
		ref_mark_merge(&mk, m1);
		sys_first = sys_last = sys_chars;
	}
	int64_t m_first = -1, m_last = -1, m0_chars = 0, run = 0;
	bool m0 = false, m0_system = false;
	if (json_is_array(msgs)) {
		size_t i;
		json_t *m;
		json_array_foreach(msgs, i, m)
		{
			int64_t c = ref_content_chars(json_object_get(m, "content"), 1) +
			            ref_tool_call_chars(json_object_get(m, "tool_calls"));
			run += c;
			if (i == 0) {
				const char *role = json_string_value(json_object_get(m, "role"));
				m0 = true;
				m0_chars = c;
				m0_system = role != NULL && (strcmp(role, "system") == 0 ||
				                             strcmp(role, "developer") == 0);
			}
			if ((m1 = ref_content_mark(json_object_get(m, "content"), 1)).on) {
				ref_mark_merge(&mk, m1);
				if (m_first < 0)
					m_first = run;
				m_last = run;
			}
		}
	}
	r->marked = tmark.on || sys_last >= 0 || m_last >= 0;
	r->ttl_ms = mk.ttl_ms;
	if (r->marked) {
		r->keyed = true;
		r->prefix_tokens = tools + (m_last >= 0     ? (sys_chars + m_last + 3) / 4
		                            : sys_last >= 0 ? (sys_last + 3) / 4
		                                            : 0);
		r->head_tokens = tools + (tmark.on         ? 0
		                          : sys_first >= 0 ? (sys_first + 3) / 4
		                                           : (sys_chars + m_first + 3) / 4);
	} else {
		static const char *const order[] = {"system", "instructions", "systemInstruction",
		                                    "system_instruction"};
		int64_t chars = 0;
		for (size_t i = 0; i < 4 && chars == 0; i++)
			chars = ref_content_chars(json_object_get(root, order[i]), 0);
		if (chars == 0 && m0 && (m0_system || m0_chars >= TOKENS_LONG_PREFIX_CHARS))
			chars = m0_chars;
		r->keyed = chars > 0;
		r->prefix_tokens = r->head_tokens = r->keyed ? tools + (chars + 3) / 4 : 0;
	}
	/* History the provider holds */
	json_t *conv = json_object_get(root, "conversation");
	if (json_is_object(conv))
		conv = json_object_get(conv, "id");
	r->conversation = ref_nonempty(conv);
	r->chained = r->conversation || ref_nonempty(json_object_get(root, "previous_response_id"));
	r->stored = !json_is_false(json_object_get(root, "store")) &&
	            json_object_get(root, "messages") == NULL &&
	            json_object_get(root, "contents") == NULL && !ref_is_embedding(root) &&
	            (json_object_get(root, "input") != NULL ||
	             json_object_get(root, "instructions") != NULL);
	r->items_tokens = (ref_content_chars(json_object_get(root, "input"), 0) + 3) / 4;
	json_decref(root);
	return true;
}

/* Whether the scanner's model and prefix outputs agree with the tree walk. */
static bool ref_prefix_agrees(const char *body, size_t len, const struct tokens_cost *a)
{
	struct ref_prefix r;
	char buf[TOKENS_MODEL_MAX];
	size_t n;
	const char *name = tokens_model_name(a, buf, &n);
	if (a->model != NULL && (a->model < body || a->model + a->model_len > body + len))
		return false;
	struct tokens_cost rc;
	ref_tokens_estimate(body, len, 0, &rc);
	int64_t tools = a->tools_tokens != rc.tools_tokens && rc.tools_tokens > 0 &&
	                        ref_has_duplicates(body, len)
	                    ? a->tools_tokens
	                    : -1;
	if (!ref_prefix_of(body, len, tools, &r))
		return a->model == NULL && a->prompt_key == 0 && !a->cache_marked && !a->chained &&
		       !a->stored && a->chain_key == 0 && a->items_tokens == 0 &&
		       a->cache_ttl_ms == 0;
	if (r.has_model != (name != NULL))
		return false;
	if (r.has_model && (n != r.model_len || memcmp(name, r.model, n) != 0))
		return false;
	/* Counts over a tool call's arguments as an object differ where a member
	 * name repeats inside them (ref_estimate_agrees). */
	bool counts = (r.prefix_tokens == a->prefix_tokens && r.head_tokens == a->head_tokens &&
	               r.items_tokens == a->items_tokens) ||
	              ref_has_duplicates(body, len);
	return r.marked == a->cache_marked && r.keyed == (a->prompt_key != 0) &&
	       r.keyed == (a->head_key != 0) && counts && r.ttl_ms == a->cache_ttl_ms &&
	       r.chained == a->chained && r.stored == a->stored &&
	       r.conversation == (a->chain_key != 0);
}

#endif
