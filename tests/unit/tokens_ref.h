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

/* Text of a content value: a string, an array of parts or strings, or one part
 * ({"text"}, {"content": ...} of a tool result, {"parts": [...]} of Gemini). */
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
		n += ref_string_chars(json_object_get(v, "text"));
		n += ref_content_chars(json_object_get(v, "content"), depth + 1);
		n += ref_content_chars(json_object_get(v, "parts"), depth + 1);
	}
	return n;
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
			c.prompt = (ref_prompt_chars(root) + 3) / 4;
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

/* ---------- model and prompt prefix (tokens.h) ---------- */

struct ref_prefix {
	bool has_model;
	char model[TOKENS_MODEL_MAX];
	size_t model_len;
	bool marked, keyed;
	int64_t prefix_tokens, head_tokens;
};

static bool ref_content_mark(json_t *v, int depth)
{
	if (depth > REF_MAX_DEPTH)
		return false;
	if (json_is_array(v)) {
		size_t i;
		json_t *el;
		bool m = false;
		json_array_foreach(v, i, el) m |= ref_content_mark(el, depth + 1);
		return m;
	}
	if (!json_is_object(v))
		return false;
	return json_is_object(json_object_get(v, "cache_control")) ||
	       ref_content_mark(json_object_get(v, "content"), depth + 1) ||
	       ref_content_mark(json_object_get(v, "parts"), depth + 1);
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

/* false when the body is not a JSON object (nothing to compare). */
static bool ref_prefix_of(const char *body, size_t len, struct ref_prefix *r)
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
	json_t *sys = json_object_get(root, "system"), *msgs = json_object_get(root, "messages");
	int64_t sys_chars = ref_content_chars(sys, 0), sys_first = -1, sys_last = -1;
	if (json_is_array(sys)) {
		size_t i;
		json_t *el;
		int64_t run = 0;
		json_array_foreach(sys, i, el)
		{
			run += ref_content_chars(el, 1);
			if (ref_content_mark(el, 1)) {
				if (sys_first < 0)
					sys_first = run;
				sys_last = run;
			}
		}
	} else if (ref_content_mark(sys, 0)) {
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
			if (ref_content_mark(json_object_get(m, "content"), 1)) {
				if (m_first < 0)
					m_first = run;
				m_last = run;
			}
		}
	}
	r->marked = sys_last >= 0 || m_last >= 0;
	if (r->marked) {
		r->keyed = true;
		r->prefix_tokens = m_last >= 0 ? (sys_chars + m_last + 3) / 4 : (sys_last + 3) / 4;
		r->head_tokens =
		    sys_first >= 0 ? (sys_first + 3) / 4 : (sys_chars + m_first + 3) / 4;
	} else {
		static const char *const order[] = {"system", "instructions", "systemInstruction",
		                                    "system_instruction"};
		int64_t chars = 0;
		for (size_t i = 0; i < 4 && chars == 0; i++)
			chars = ref_content_chars(json_object_get(root, order[i]), 0);
		if (chars == 0 && m0 && (m0_system || m0_chars >= TOKENS_LONG_PREFIX_CHARS))
			chars = m0_chars;
		r->keyed = chars > 0;
		r->prefix_tokens = r->head_tokens = (chars + 3) / 4;
	}
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
	if (!ref_prefix_of(body, len, &r))
		return a->model == NULL && a->prompt_key == 0 && !a->cache_marked;
	if (r.has_model != (name != NULL))
		return false;
	if (r.has_model && (n != r.model_len || memcmp(name, r.model, n) != 0))
		return false;
	return r.marked == a->cache_marked && r.keyed == (a->prompt_key != 0) &&
	       r.keyed == (a->head_key != 0) && r.prefix_tokens == a->prefix_tokens &&
	       r.head_tokens == a->head_tokens;
}

#endif
