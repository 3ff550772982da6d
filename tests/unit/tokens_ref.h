/* The token estimate and usage reading as they were written on jansson trees,
 * kept as the reference the JSON scanner of tokens.c must agree with: the unit
 * test and the fuzzer compare the two on every input. Include once. */
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

/* ---------- usage ---------- */

static bool ref_get_count(json_t *obj, const char *key, int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (int64_t)json_integer_value(v);
	return true;
}

/* Merges one usage object into *u: the fields it carries replace the earlier
 * ones (Anthropic's message_delta carries only the cumulative output). */
static bool ref_merge_usage(json_t *usage, struct tokens_usage *u, bool gemini)
{
	int64_t in = 0, out = 0, total = 0, extra = 0;
	bool has_in, has_out, has_total;

	if (!json_is_object(usage))
		return false;
	if (gemini) {
		has_in = ref_get_count(usage, "promptTokenCount", &in);
		has_out = ref_get_count(usage, "candidatesTokenCount", &out);
		if (ref_get_count(usage, "thoughtsTokenCount", &extra)) {
			out += extra;
			has_out = true;
		}
		has_total = ref_get_count(usage, "totalTokenCount", &total);
	} else {
		has_in = ref_get_count(usage, "prompt_tokens", &in) ||
		         ref_get_count(usage, "input_tokens", &in);
		if (has_in && ref_get_count(usage, "cache_creation_input_tokens", &extra))
			in += extra;
		has_out = ref_get_count(usage, "completion_tokens", &out) ||
		          ref_get_count(usage, "output_tokens", &out);
		has_total = ref_get_count(usage, "total_tokens", &total);
	}
	if (!has_in && !has_out && !has_total)
		return false;
	if (has_in) {
		u->has_input = true;
		u->input = in;
	}
	if (has_out) {
		u->has_output = true;
		u->output = out;
	}
	u->total = has_total ? total : u->input + u->output;
	u->present = true;
	return true;
}

/* Where each API keeps its usage object. */
static bool ref_usage_from_object(json_t *root, struct tokens_usage *u)
{
	json_t *msg = json_object_get(root, "message");   /* Anthropic message_start */
	json_t *resp = json_object_get(root, "response"); /* Responses API events */
	json_t *groq = json_object_get(root, "x_groq");   /* Groq stream */
	bool found = ref_merge_usage(json_object_get(root, "usage"), u, false);
	found |= ref_merge_usage(json_object_get(root, "usageMetadata"), u, true);
	found |= ref_merge_usage(json_object_get(msg, "usage"), u, false);
	found |= ref_merge_usage(json_object_get(resp, "usage"), u, false);
	found |= ref_merge_usage(json_object_get(groq, "usage"), u, false);
	return found;
}

static bool ref_tokens_usage_json(const char *body, size_t len, struct tokens_usage *out)
{
	memset(out, 0, sizeof *out);
	if (body == NULL || len == 0)
		return false;
	json_t *root = json_loadb(body, len, 0, NULL);
	if (json_is_object(root))
		ref_usage_from_object(root, out);
	json_decref(root);
	return out->present;
}

/* What tokens_sse_feed takes from one data: line. */
__attribute__((unused)) static void ref_sse_data(const char *v, size_t n, struct tokens_usage *u,
                                                 bool *error)
{
	json_t *root = json_loadb(v, n, 0, NULL);
	if (json_is_object(root)) {
		if (json_object_get(root, "error") != NULL)
			*error = true;
		ref_usage_from_object(root, u);
	}
	json_decref(root);
}

#endif
