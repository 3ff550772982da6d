/* SPDX-License-Identifier: Apache-2.0 */
/* tokens — a request's token cost before dispatch, and the usage the upstream
 * reports after (DESIGN §5, PROVIDERS.md §2, §3, §9).
 *
 * Pure: no I/O. The estimate is deliberately cheap (characters / 4, never a
 * tokenizer): the token gate is corrected afterwards by the reported usage. */
#ifndef PACERD_TOKENS_H
#define PACERD_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest model name taken from a request; a longer one is no model at all
 * (truncating would merge different names into one lane). */
#define TOKENS_MODEL_MAX 128
/* A first message this long (1024 tokens' worth of characters) is worth a
 * prompt key: OpenAI and Groq cache prompt prefixes from 1024 tokens on. */
#define TOKENS_LONG_PREFIX_CHARS 4096

/* An edit of a request body: the `cut` bytes at offset `at` replaced by the
 * text (static, NUL-terminated); text NULL: none. */
struct tokens_edit {
	const char *text;
	size_t at, cut;
};

struct tokens_cost {
	int64_t prompt;    /* characters of the prompt text / 4, rounded up */
	int64_t output;    /* requested output tokens times n, or the default */
	bool output_named; /* the request named its output (max_tokens, …; an
	                    * embedding's 0): else output is the default */
	int64_t total;     /* prompt + output */
	bool json;         /* the body parsed as a JSON object */

	/* The top-level "model" (the last one, as for every member): raw bytes of
	 * the JSON string inside the body, quotes excluded; NULL/0 when there is
	 * none, it is not a string, or it is not a valid name: 1 to
	 * TOKENS_MODEL_MAX bytes once unescaped, each printable ASCII but space,
	 * '"' and '\\'. A "model" nested anywhere else is never taken. When
	 * model_escaped, the raw bytes hold JSON escapes: read the name with
	 * tokens_model_name(). */
	const char *model;
	size_t model_len;
	bool model_escaped;

	/* The cacheable prompt prefix, for the cost model (PROVIDERS.md §10).
	 * cache_marked: a block in "system" or "messages" carries a
	 * "cache_control" object (Anthropic prompt caching). Then prompt_key hashes
	 * the prompt up to and including the last marked element (a block of
	 * "system", a whole message of "messages"; "system" comes first, as
	 * Anthropic reads it), and prefix_tokens estimates that prefix; head_key
	 * and head_tokens are the same up to the first marked element (stable
	 * while an agent moves its last breakpoint from call to call).
	 * Without marks (automatic prefix caching, OpenAI and Groq): the key
	 * hashes the system prompt ("system", else "instructions", else Gemini's
	 * "systemInstruction"/"system_instruction", else a first message whose
	 * role is "system" or "developer"), or lacking one a first message of at
	 * least TOKENS_LONG_PREFIX_CHARS characters; head_* equal prompt_* then.
	 * 0 (and 0 tokens) when there is nothing worth keying. Keys hash the raw
	 * JSON text of the prefix (so a client that re-encodes the same prompt
	 * differently makes another key), with a fixed seed: replicas agree. A
	 * marked prompt's key is never 0. */
	uint64_t prompt_key;
	int64_t prefix_tokens;
	uint64_t head_key;
	int64_t head_tokens;
	bool cache_marked;
	/* The longest lifetime the marks name (cache_control's "ttl": "5m",
	 * "1h"; digits and s, m or h, at most a day), in ms; 0 when none names
	 * one (the provider's default, 5 minutes). The longest is the head's:
	 * Anthropic requires marks of a longer ttl to come before shorter ones. */
	int64_t cache_ttl_ms;

	/* Tool definitions, sent with every request and billed as input: the
	 * top-level "tools" (Chat Completions, Responses, Anthropic; Gemini's
	 * [{"functionDeclarations": [...]}]) and "functions" (Chat's legacy
	 * form), when arrays, by the characters of their compact JSON text / 4,
	 * rounded up. Part of prompt (added to the text's tokens, each rounded
	 * on its own), and of prefix_tokens and head_tokens whenever a prefix is
	 * keyed: tools come first in the prompt every provider renders (and
	 * seed the prefix's key). A tool carrying a "cache_control" object marks
	 * the tools as one element, ahead of "system". */
	int64_t tools_tokens;

	/* History the provider holds (OpenAI Responses API, PROVIDERS.md §11).
	 * chained: the request names history it does not carry: a top-level
	 * "previous_response_id" that is a non-empty string, or a "conversation"
	 * that is one (or an object whose "id" is one). chain_key: a hash of the
	 * conversation's id (raw JSON bytes, fixed seed; never 0), 0 without
	 * one. stored: a Responses API request the provider keeps for a later
	 * one to name: "input" or "instructions" at the top level, no "messages"
	 * or "contents", not an embedding model, and "store" not false.
	 * items_tokens: the estimate of its "input" (the items that join the
	 * held history; instructions and tools are sent again each time). */
	bool chained, stored;
	uint64_t chain_key;
	int64_t items_tokens;

	/* What asks a streamed request for its usage (usage_strip.h): when the
	 * top-level "stream" is true and "stream_options" (the last one) is
	 * absent, the edit that adds ,"stream_options":{"include_usage":true}
	 * before the object's closing brace; when it is an object without
	 * "include_usage", the one that adds that member last in it; when its
	 * "include_usage" (the last) is not true, the one that makes it true.
	 * Every other byte stays as the client wrote it. Text NULL when nothing is
	 * to be done: not streamed, asked already, stream_options not an object,
	 * or not a JSON object. */
	struct tokens_edit ask_usage;

	/* The request asks for a service tier of its own (PROVIDERS.md §11): its
	 * top-level "service_tier" (the last one) is the string "flex", as the
	 * OpenAI and Groq APIs name it ("auto", "default", "scale", "priority"
	 * and none are the standard capacity; one nested in a message or a tool
	 * schema is not the request's). Such a tier has a capacity of its own:
	 * when it is short the provider refuses only its requests (OpenAI 429
	 * resource_unavailable, Groq 498 capacity_exceeded), and the lane, shared
	 * by the tiers, must not take the refusal as its own. */
	bool flex_tier;
};

/* Estimates the token cost of a request body.
 *
 * Prompt: Unicode characters (UTF-8 code points) of the text in
 * messages[].content (a string, or an array of parts whose "text" counts,
 * nested "content" too, as in Anthropic tool results) and
 * messages[].tool_calls[].function.arguments, input (a string, an
 * array of strings, of token ids — 1 token each — or of Responses API
 * items), prompt, system (a string or an array of blocks), instructions,
 * and Gemini contents[].parts[].text and systemInstruction; divided by 4,
 * rounded up; plus tools_tokens (above).
 * Every Responses API input item counts what it sends the model: a message's
 * content (a string, or parts whose "text" counts: input_text, output_text),
 * function_call "name" and "arguments", function_call_output "output" (a
 * string or parts), custom_tool_call "name" and "input" (a string),
 * custom_tool_call_output "output", a reasoning item's summary[].text (and
 * content[].text) and 3/4 of its "encrypted_content" (below),
 * file_search_call "queries" and results[].text. These members count in any
 * part or item object, whatever its "type" says (one pass, no look-ahead).
 * A tool call's arguments sent as an object count as their compact JSON text,
 * as tools do (tools_tokens): Anthropic's tool_use "name" and "input", and
 * Gemini's parts' functionCall "name" and "args" and functionResponse "name"
 * and "response" (in agent loops, these are much of the context).
 * encrypted_content is base64: N characters carry 3N/4 bytes of ciphertext,
 * and an AEAD's ciphertext is as long as the text it seals (plus a fixed
 * tag): the reasoning text the provider decrypts and bills as input is
 * about 3N/4 characters long, counted as such (floor, per string).
 * Output: the largest of max_tokens, max_completion_tokens, max_output_tokens,
 * generationConfig.maxOutputTokens; default_output_tokens when none is there;
 * times n (or generationConfig.candidateCount) when it is above 1 (capped at
 * 128). Embedding requests (a "model" whose name contains "embed") generate
 * nothing: output 0.
 * Not a JSON object (a multipart upload, text, a JSON array): costs
 * default_output_tokens alone — an audio file's bytes are not prompt tokens,
 * so bytes / 4 would only overcharge; usage corrects the rest afterwards.
 * An empty body (GET /v1/models) costs 0. Images, files and other non-text
 * parts are not counted.
 * Returns the total; fills *detail when it is not NULL. */
int64_t tokens_estimate(const char *body, size_t len, unsigned default_output_tokens,
                        struct tokens_cost *detail);

/* The model name of c (tokens_estimate()'s detail, while the body it scanned
 * is alive): c->model itself, or decoded into buf (TOKENS_MODEL_MAX bytes)
 * when escaped. Not NUL-terminated; *len its length. NULL (*len 0) when
 * there is no model. */
const char *tokens_model_name(const struct tokens_cost *c, char *buf, size_t *len);

struct tokens_usage {
	bool present; /* some usage was found */
	bool has_input, has_output;
	/* Input tokens not read from a prompt cache: OpenAI's prompt_tokens (or
	 * the Responses API's input_tokens) less their cached_tokens, Anthropic's
	 * input_tokens + cache_creation_input_tokens (its input_tokens leave the
	 * cache reads out already), Gemini's promptTokenCount. What counts toward
	 * an input limit where cache reads are free (tokens_usage_counted). */
	int64_t input;
	int64_t output; /* completion / output tokens (reasoning and thoughts included) */
	/* Of output, the reasoning: OpenAI's reasoning_tokens (already inside its
	 * output count), Gemini's thoughtsTokenCount (added to it); 0 when not
	 * reported. */
	int64_t reasoning;
	int64_t total; /* total_tokens (less its cache reads) when sent, else input + output */
	/* The prompt cache: has_cache when the answer reported a creation or a
	 * read; cache_creation is part of input, cache_read is not (Anthropic's
	 * cache_read_input_tokens, OpenAI's cached_tokens). */
	bool has_cache;
	int64_t cache_creation, cache_read;
};

/* u as a provider's limits count it: cache reads are left out of input and
 * total where they are free (cache_reads_free: Anthropic, Groq), and counted
 * in both where they are not (OpenAI: "caching does not affect rate limits",
 * so an OpenAI answer counts its whole prompt_tokens). */
struct tokens_usage tokens_usage_counted(const struct tokens_usage *u, bool cache_reads_free);

/* The counts one usage object holds, as tokens_usage_object() read them:
 * each as its last occurrence says (a count is an integer >= 0). For
 * provider/usage_read.c, which finds the objects in a document. */
#define TOKENS_USAGE_COUNTS 15
struct tokens_usage_obj {
	bool object; /* the value was an object */
	bool has[TOKENS_USAGE_COUNTS];
	int64_t v[TOKENS_USAGE_COUNTS];
};

/* Reads text (len bytes: one JSON value, blanks around it allowed, checked as
 * strictly as tokens_estimate() checks a body) as a usage object, its counts
 * named as OpenAI (prompt_tokens, completion_tokens, total_tokens, and
 * prompt_tokens_details.cached_tokens, completion_tokens_details
 * .reasoning_tokens), the Responses API and Anthropic (input_tokens,
 * output_tokens, input_tokens_details.cached_tokens,
 * output_tokens_details.reasoning_tokens, cache_creation_input_tokens,
 * cache_read_input_tokens) and Gemini (promptTokenCount,
 * candidatesTokenCount, thoughtsTokenCount, totalTokenCount) name them. A
 * value that is not an object has no counts (o->object false). Returns false,
 * *o empty, when text is not one JSON value. */
bool tokens_usage_object(const char *text, size_t len, struct tokens_usage_obj *o);

/* Merges one usage object into *u: the counts it carries replace the earlier
 * ones (Anthropic's message_delta carries only the cumulative output).
 * gemini: read Gemini's names, else the others'. Where both conventions meet
 * (cache_read_input_tokens and cached_tokens), Anthropic's wins: its input
 * leaves the reads out. An object without input, output or total changes
 * nothing but the cache counts. */
void tokens_usage_merge(const struct tokens_usage_obj *o, bool gemini, struct tokens_usage *u);

#endif
