/* SPDX-License-Identifier: Apache-2.0 */
/* The usage of an answer as it was read from jansson trees, kept as the
 * reference provider/usage_read.c must agree with: the unit tests and the
 * fuzzer compare the two on every document jansson accepts. Include once. */
#ifndef PACERD_USAGE_REF_H
#define PACERD_USAGE_REF_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "provider/tokens.h"

/* Field by field (a struct's padding is not compared). */
__attribute__((unused)) static bool ref_usage_same(const struct tokens_usage *a,
                                                   const struct tokens_usage *b)
{
	return a->present == b->present && a->has_input == b->has_input &&
	       a->has_output == b->has_output && a->input == b->input && a->output == b->output &&
	       a->reasoning == b->reasoning && a->total == b->total &&
	       a->has_cache == b->has_cache && a->cache_creation == b->cache_creation &&
	       a->cache_read == b->cache_read;
}

static bool ref_get_count(json_t *obj, const char *key, int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (int64_t)json_integer_value(v);
	return true;
}

/* A count inside a details object (prompt_tokens_details.cached_tokens, …). */
static bool ref_get_detail(json_t *obj, const char *details, const char *key, int64_t *out)
{
	return ref_get_count(json_object_get(obj, details), key, out);
}

/* Merges one usage object into *u: the fields it carries replace the earlier
 * ones (Anthropic's message_delta carries only the cumulative output). */
static bool ref_merge_usage(json_t *usage, struct tokens_usage *u, bool gemini)
{
	int64_t in = 0, out = 0, total = 0, extra = 0, reasoning = 0;
	bool has_in, has_out, has_total, has_reasoning;

	if (!json_is_object(usage))
		return false;
	if (gemini) {
		has_in = ref_get_count(usage, "promptTokenCount", &in);
		has_out = ref_get_count(usage, "candidatesTokenCount", &out);
		has_reasoning = ref_get_count(usage, "thoughtsTokenCount", &reasoning);
		if (has_reasoning) {
			out += reasoning;
			has_out = true;
		}
		has_total = ref_get_count(usage, "totalTokenCount", &total);
	} else {
		has_in = ref_get_count(usage, "prompt_tokens", &in) ||
		         ref_get_count(usage, "input_tokens", &in);
		if (has_in && ref_get_count(usage, "cache_creation_input_tokens", &extra))
			in += extra;
		int64_t cc = 0, cr = 0, cached = 0;
		bool hcc = ref_get_count(usage, "cache_creation_input_tokens", &cc);
		bool hcr = ref_get_count(usage, "cache_read_input_tokens", &cr);
		/* OpenAI's cached_tokens are inside its input count; Anthropic's
		 * reads are not, and win where both are sent */
		bool cached_in =
		    !hcr &&
		    (ref_get_detail(usage, "prompt_tokens_details", "cached_tokens", &cached) ||
		     ref_get_detail(usage, "input_tokens_details", "cached_tokens", &cached));
		if (hcc || hcr || cached_in) {
			u->has_cache = true;
			u->cache_creation = hcc ? cc : 0;
			u->cache_read = cached_in ? cached : hcr ? cr : 0;
		}
		has_out = ref_get_count(usage, "completion_tokens", &out) ||
		          ref_get_count(usage, "output_tokens", &out);
		has_reasoning =
		    ref_get_detail(usage, "completion_tokens_details", "reasoning_tokens",
		                   &reasoning) ||
		    ref_get_detail(usage, "output_tokens_details", "reasoning_tokens", &reasoning);
		has_total = ref_get_count(usage, "total_tokens", &total);
		if (cached_in) {
			in = in > cached ? in - cached : 0;
			total = total > cached ? total - cached : 0;
		}
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
	if (has_reasoning)
		u->reasoning = reasoning;
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

/* The usage of a whole body; *valid: jansson loaded it (any JSON value). */
__attribute__((unused)) static bool ref_tokens_usage_json(const char *body, size_t len,
                                                          struct tokens_usage *out, bool *valid)
{
	memset(out, 0, sizeof *out);
	*valid = false;
	if (body == NULL || len == 0)
		return false;
	json_t *root = json_loadb(body, len, 0, NULL);
	*valid = root != NULL;
	if (json_is_object(root))
		ref_usage_from_object(root, out);
	json_decref(root);
	return out->present;
}

/* What usage_sse takes from one data: line. */
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
