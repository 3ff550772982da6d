/* SPDX-License-Identifier: Apache-2.0 */
/* mock_responses.c — OpenAI's Responses API (POST /v1/responses; PROVIDERS.md §11,
 * openai-python types/responses/): the input counted as the provider counts it
 * (instructions, every input item kind, tools, and the history the server holds for
 * previous_response_id and conversation), the answer whole or as the event stream
 * OpenAI sends, and the bounded tables of what the server holds. */
#include "mock.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#define PUT(b, lit) evbuffer_add((b), (lit), sizeof(lit) - 1)

#define HELD_SLOTS 65536 /* the newest responses whose history is held */
#define CONV_SLOTS 4096  /* conversations; 3/4 full: all forgotten */
#define HEAD_SLOTS 4096  /* heads (instructions and tools) seen: cached_tokens */
#define MAX_PAD (64L * 1024 * 1024)
#define MAX_REASONING 1000000L

/* One answer of the Responses API, from the request's reading to the stream's end. */
struct mock_resp {
	char id[40];      /* resp_mock_<n>, issued when the request passes */
	uint64_t seq;     /* that n */
	char model[64];   /* echoed */
	char bmodel[64];  /* the model of the budgets: the body's, "" for none */
	char conv[64];    /* the conversation named ("": none) */
	char *instr_json; /* the request's instructions as JSON text, "null" when absent */
	char *tools_json; /* its tools as JSON text, "[]" when absent */
	char *prev_json;  /* previous_response_id as JSON text, "null" when absent */
	long input_tokens, output_tokens, text_tokens, reasoning_tokens, cached_tokens;
	long held_after;   /* what a later previous_response_id or the conversation carries */
	long max_output;   /* max_output_tokens, 0: none */
	long chunk_bytes;  /* each output_text delta's size */
	long pad_to;       /* response.completed's data: line (or the whole body) this long */
	bool truncated;    /* max_output_tokens cut the text: status incomplete */
	bool store;        /* "store": false keeps nothing for previous_response_id */
	bool reasoning;    /* a reasoning item comes first in the output */
	uint64_t head_key; /* instructions and tools, for cached_tokens */
	long seq_no;       /* the sequence_number of the next event */
	long pad;          /* the reasoning item's encrypted_content, bytes (-1: not measured) */
};

struct held {
	uint64_t seq; /* 0: empty */
	long tokens;
};
struct conv {
	char id[64];
	long tokens;
};

static struct held *held;  /* HELD_SLOTS, by seq % HELD_SLOTS */
static struct conv *convs; /* CONV_SLOTS, open addressing; id[0] == '\0': empty */
static size_t nconvs;
static uint64_t *heads; /* HEAD_SLOTS, open addressing; 0: empty */
static size_t nheads;
static uint64_t resp_seq; /* ids keep counting across resets: an old id is unknown */

static long utf8_chars(const char *s)
{
	long n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

static long str_chars(json_t *v)
{
	return json_is_string(v) ? utf8_chars(json_string_value(v)) : 0;
}

/* A string, or an array of content parts: the text of each part ("text" of
 * input_text, output_text, summary_text, reasoning_text; "refusal"). */
static long parts_chars(json_t *v)
{
	if (json_is_string(v))
		return utf8_chars(json_string_value(v));
	long n = 0;
	size_t i;
	json_t *p;
	json_array_foreach(v, i, p)
	{
		n += str_chars(json_object_get(p, "text")) +
		     str_chars(json_object_get(p, "refusal"));
	}
	return n;
}

/* One input item, counted by every member the model reads: a message's content,
 * a function_call's name and arguments, a custom_tool_call's input, a
 * function_call_output's (or custom_tool_call_output's) output, a reasoning
 * item's summary and content. */
static long item_chars(json_t *item)
{
	if (json_is_string(item))
		return utf8_chars(json_string_value(item));
	return parts_chars(json_object_get(item, "content")) +
	       str_chars(json_object_get(item, "name")) +
	       str_chars(json_object_get(item, "arguments")) +
	       str_chars(json_object_get(item, "input")) +
	       parts_chars(json_object_get(item, "output")) +
	       parts_chars(json_object_get(item, "summary"));
}

/* "input" or "instructions": a string, or an array of items. */
static long items_chars(json_t *v)
{
	if (json_is_string(v))
		return utf8_chars(json_string_value(v));
	long n = 0;
	size_t i;
	json_t *it;
	json_array_foreach(v, i, it)
	{
		n += item_chars(it);
	}
	return n;
}

static char *dump_or(json_t *v, const char *dflt)
{
	char *s = v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	return s != NULL ? s : strdup(dflt);
}

static uint64_t fnv64(const char *a, const char *b)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = a; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h = (h ^ 0xffu) * 1099511628211ull;
	for (const char *p = b; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return h ? h : 1;
}

/* ---------- what the server holds ---------- */

/* The held history of a response id this mock issued, or -1 when unknown
 * (never issued, not stored, or past the newest HELD_SLOTS). */
static long held_of(const char *id)
{
	static const char pre[] = "resp_mock_";
	long n;
	if (held == NULL || strncmp(id, pre, sizeof(pre) - 1) != 0 ||
	    mock_parse_long(id + sizeof(pre) - 1, 1, LONG_MAX, &n) != 0)
		return -1;
	const struct held *h = &held[(uint64_t)n % HELD_SLOTS];
	return h->seq == (uint64_t)n ? h->tokens : -1;
}

static struct conv *conv_slot(const char *id, bool add)
{
	if (convs == NULL) {
		if (!add || (convs = calloc(CONV_SLOTS, sizeof(*convs))) == NULL)
			return NULL;
	}
	uint64_t h = fnv64(id, "");
	for (size_t i = 0; i < CONV_SLOTS; i++) {
		struct conv *c = &convs[(h + i) % CONV_SLOTS];
		if (c->id[0] == '\0') {
			if (!add)
				return NULL;
			if (nconvs >= CONV_SLOTS * 3 / 4) {
				memset(convs, 0, CONV_SLOTS * sizeof(*convs));
				nconvs = 0;
				return conv_slot(id, add);
			}
			snprintf(c->id, sizeof(c->id), "%s", id);
			nconvs++;
			return c;
		}
		if (strcmp(c->id, id) == 0)
			return c;
	}
	return NULL;
}

static bool head_seen(uint64_t key, bool add)
{
	if (heads == NULL) {
		if (!add || (heads = calloc(HEAD_SLOTS, sizeof(*heads))) == NULL)
			return false;
	}
	for (size_t i = 0; i < HEAD_SLOTS; i++) {
		uint64_t *s = &heads[(key + i) % HEAD_SLOTS];
		if (*s == key)
			return true;
		if (*s == 0) {
			if (add) {
				if (nheads >= HEAD_SLOTS * 3 / 4) {
					memset(heads, 0, HEAD_SLOTS * sizeof(*heads));
					nheads = 0;
					s = &heads[key % HEAD_SLOTS];
				}
				*s = key;
				nheads++;
			}
			return false;
		}
	}
	return false;
}

void mock_responses_reset(void)
{
	free(held);
	free(convs);
	free(heads);
	held = NULL;
	convs = NULL;
	heads = NULL;
	nconvs = nheads = 0;
}

/* ---------- the request ---------- */

void mock_responses_free(struct mock_resp *r)
{
	if (r == NULL)
		return;
	free(r->instr_json);
	free(r->tools_json);
	free(r->prev_json);
	free(r);
}

static struct evbuffer *invalid(const char *param, const char *code, const char *msg)
{
	struct evbuffer *b = evbuffer_new();
	json_t *j = json_pack("{s:{s:s,s:s,s:s,s:s?}}", "error", "message", msg, "type",
	                      "invalid_request_error", "param", param, "code", code);
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	evbuffer_add(b, s != NULL ? s : "{}", s != NULL ? strlen(s) : 2);
	free(s);
	json_decref(j);
	return b;
}

/* Reads the request: the answer to give (NULL: out of memory), the limits' input
 * (model, costs) in *lin, whether it streams; *status 400 and *err its body when it
 * names what the mock does not hold. */
static struct mock_resp *read_request(struct evhttp_request *req, const struct mock_resp_ctl *ctl,
                                      struct mock_limit_in *lin, bool *stream, int *status,
                                      struct evbuffer **err)
{
	struct mock_resp *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	*stream = false;
	*status = 0;
	*err = NULL;
	r->store = true;
	r->pad = -1;
	r->chunk_bytes = ctl->chunk_bytes;
	r->pad_to = ctl->completed_bytes > MAX_PAD ? MAX_PAD : ctl->completed_bytes;
	snprintf(r->model, sizeof(r->model), "gpt-mock");
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	json_t *j =
	    len > 0 ? json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, NULL) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		j = json_object(); /* not JSON: answered with the defaults */
	}
	*stream = json_is_true(json_object_get(j, "stream"));
	r->store = !json_is_false(json_object_get(j, "store"));
	json_t *m = json_object_get(j, "model");
	if (json_is_string(m) && json_string_length(m) > 0 && json_string_length(m) < 64) {
		/* the budgets' model as given; echoed only when it needs no escaping */
		if (strspn(json_string_value(m),
		           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		           "0123456789._:/-@") == json_string_length(m))
			snprintf(r->model, sizeof(r->model), "%s", json_string_value(m));
		snprintf(r->bmodel, sizeof(r->bmodel), "%s", json_string_value(m));
	}
	json_t *mo = json_object_get(j, "max_output_tokens");
	if (json_is_integer(mo) && json_integer_value(mo) > 0)
		r->max_output =
		    json_integer_value(mo) > 100000000 ? 100000000 : (long)json_integer_value(mo);
	json_t *instr = json_object_get(j, "instructions"), *tools = json_object_get(j, "tools");
	json_t *prev = json_object_get(j, "previous_response_id");
	json_t *conv = json_object_get(j, "conversation");
	if (json_is_object(conv))
		conv = json_object_get(conv, "id");
	r->instr_json = dump_or(json_is_null(instr) ? NULL : instr, "null");
	r->tools_json = dump_or(json_is_array(tools) ? tools : NULL, "[]");
	r->prev_json = dump_or(json_is_string(prev) ? prev : NULL, "null");
	if (json_is_string(conv)) /* the first 63 bytes of its id */
		snprintf(r->conv, sizeof(r->conv), "%s", json_string_value(conv));
	if (r->instr_json == NULL || r->tools_json == NULL || r->prev_json == NULL) {
		json_decref(j);
		mock_responses_free(r);
		return NULL;
	}

	/* What the server holds: a previous response's, or the conversation's. */
	long history = 0;
	if (json_is_string(prev) && r->conv[0] != '\0') {
		*status = 400;
		*err =
		    invalid("conversation", NULL,
		            "Mutually exclusive parameters: Ensure you are only providing one of: "
		            "'previous_response_id' or 'conversation'.");
	} else if (json_is_string(prev) && (history = held_of(json_string_value(prev))) < 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "Previous response with id '%.100s' not found.",
		         json_string_value(prev));
		*status = 400;
		*err = invalid("previous_response_id", "previous_response_not_found", msg);
		history = 0;
	} else if (r->conv[0] != '\0') {
		const struct conv *c = conv_slot(r->conv, false);
		history = c != NULL ? c->tokens : 0;
	}

	/* Input as the provider counts it: characters / 4 of the instructions, every
	 * input item and the tools' JSON, plus the history held. */
	long instr_t = items_chars(instr) / 4;
	long tools_t = json_is_array(tools) ? utf8_chars(r->tools_json) / 4 : 0;
	long items_t = items_chars(json_object_get(j, "input")) / 4;
	r->input_tokens = instr_t + tools_t + items_t + history;
	if (r->input_tokens < 1)
		r->input_tokens = 1;
	/* Cached: the held history, and the head when an earlier request had it
	 * (OpenAI caches prefixes from 1,024 tokens on, in steps of 128). */
	r->head_key = fnv64(r->instr_json, r->tools_json);
	long cached = history + (head_seen(r->head_key, false) ? instr_t + tools_t : 0);
	r->cached_tokens = cached < 1024 ? 0 : cached - cached % 128;

	/* Output: the reasoning tokens asked for, then one token per text chunk, as far
	 * as max_output_tokens lets them. */
	r->reasoning_tokens =
	    ctl->reasoning_tokens > MAX_REASONING ? MAX_REASONING : ctl->reasoning_tokens;
	r->text_tokens = ctl->chunks;
	if (r->max_output > 0 && r->reasoning_tokens + r->text_tokens > r->max_output) {
		r->truncated = true;
		if (r->reasoning_tokens > r->max_output)
			r->reasoning_tokens = r->max_output;
		r->text_tokens = r->max_output - r->reasoning_tokens;
	}
	r->output_tokens = r->reasoning_tokens + r->text_tokens;
	r->reasoning = r->reasoning_tokens > 0 || r->pad_to > 0;
	/* What a next turn carries: this one's input and output, without the
	 * instructions and tools, which are not carried over (they are sent again). */
	r->held_after = r->input_tokens - instr_t - tools_t + r->output_tokens;

	long out_charge = r->max_output > 0 ? r->max_output : 16;
	lin->model = r->bmodel;
	lin->cost_tokens = r->input_tokens + out_charge;
	lin->input_tokens = r->input_tokens;
	lin->output_tokens = out_charge;
	lin->produced_tokens = r->output_tokens;
	json_decref(j);
	return r;
}

/* The request passed the limits: its id is issued and its history held. */
static void passed(struct mock_resp *r)
{
	r->seq = ++resp_seq;
	snprintf(r->id, sizeof(r->id), "resp_mock_%llu", (unsigned long long)r->seq);
	if (r->store) {
		if (held == NULL)
			held = calloc(HELD_SLOTS, sizeof(*held));
		if (held != NULL)
			held[r->seq % HELD_SLOTS] = (struct held){r->seq, r->held_after};
	}
	if (r->conv[0] != '\0') {
		struct conv *c = conv_slot(r->conv, true);
		if (c != NULL)
			c->tokens = r->held_after;
	}
	(void)head_seen(r->head_key, true);
}

/* ---------- the answer ---------- */

static void put_text(struct evbuffer *b, const struct mock_resp *r)
{
	for (long i = 0; i < r->text_tokens; i++)
		mock_put_chunk_text(b, r->chunk_bytes);
}

static void put_pad(struct evbuffer *b, long n)
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const long step = (long)sizeof(alphabet) - 1;
	for (; n > 0; n -= step)
		evbuffer_add(b, alphabet, (size_t)(n < step ? n : step));
}

static void put_reasoning_item(struct evbuffer *b, const struct mock_resp *r, bool done, long pad)
{
	PUT(b, "{\"id\":\"rs_mock_");
	mock_put_long(b, (long)r->seq);
	PUT(b, "\",\"type\":\"reasoning\",\"summary\":[");
	if (done)
		PUT(b, "{\"type\":\"summary_text\",\"text\":\"**Reading the task** The mock "
		       "thinks before it answers.\"}");
	PUT(b, "],\"encrypted_content\":");
	if (done) {
		PUT(b, "\"");
		put_pad(b, pad);
		PUT(b, "\"}");
	} else {
		PUT(b, "null}");
	}
}

static void put_message_item(struct evbuffer *b, const struct mock_resp *r, bool done)
{
	PUT(b, "{\"id\":\"msg_mock_");
	mock_put_long(b, (long)r->seq);
	PUT(b, "\",\"type\":\"message\",\"status\":\"");
	if (!done) {
		PUT(b, "in_progress\",\"content\":[],\"role\":\"assistant\"}");
		return;
	}
	if (r->truncated)
		PUT(b, "incomplete");
	else
		PUT(b, "completed");
	PUT(b, "\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],"
	       "\"text\":\"");
	put_text(b, r);
	PUT(b, "\"}],\"role\":\"assistant\"}");
}

/* The Response object, in the order of OpenAI's members. final: its output and
 * usage (status completed, or incomplete when max_output_tokens cut it). */
static void put_response(struct evbuffer *b, const struct mock_resp *r, bool final, long pad)
{
	PUT(b, "{\"id\":\"");
	evbuffer_add(b, r->id, strlen(r->id));
	PUT(b, "\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"");
	if (!final)
		PUT(b, "in_progress");
	else if (r->truncated)
		PUT(b, "incomplete");
	else
		PUT(b, "completed");
	PUT(b, "\",\"background\":false,");
	if (final)
		PUT(b, "\"completed_at\":1700000001,");
	PUT(b, "\"error\":null,\"incomplete_details\":");
	if (final && r->truncated)
		PUT(b, "{\"reason\":\"max_output_tokens\"}");
	else
		PUT(b, "null");
	PUT(b, ",\"instructions\":");
	evbuffer_add(b, r->instr_json, strlen(r->instr_json));
	PUT(b, ",\"max_output_tokens\":");
	if (r->max_output > 0)
		mock_put_long(b, r->max_output);
	else
		PUT(b, "null");
	PUT(b, ",\"max_tool_calls\":null,\"model\":\"");
	evbuffer_add(b, r->model, strlen(r->model));
	PUT(b, "\",\"output\":[");
	if (final) {
		if (r->reasoning) {
			put_reasoning_item(b, r, true, pad);
			PUT(b, ",");
		}
		put_message_item(b, r, true);
	}
	PUT(b, "],\"parallel_tool_calls\":true,\"previous_response_id\":");
	evbuffer_add(b, r->prev_json, strlen(r->prev_json));
	if (r->conv[0] != '\0') {
		/* the id as given (JSON text: it may need escapes) */
		json_t *c = json_pack("{s:s}", "id", r->conv);
		char *s = c != NULL ? json_dumps(c, JSON_COMPACT) : NULL;
		PUT(b, ",\"conversation\":");
		evbuffer_add(b, s != NULL ? s : "null", s != NULL ? strlen(s) : 4);
		free(s);
		json_decref(c);
	}
	PUT(b, ",\"prompt_cache_key\":null,\"reasoning\":{\"effort\":\"medium\",\"summary\":null},"
	       "\"safety_identifier\":null,\"service_tier\":\"default\",\"store\":");
	if (r->store)
		PUT(b, "true");
	else
		PUT(b, "false");
	PUT(b, ",\"temperature\":1.0,\"text\":{\"format\":{\"type\":\"text\"},\"verbosity\":"
	       "\"medium\"},\"tool_choice\":\"auto\",\"tools\":");
	evbuffer_add(b, r->tools_json, strlen(r->tools_json));
	PUT(b, ",\"top_logprobs\":0,\"top_p\":1.0,\"truncation\":\"disabled\",\"usage\":");
	if (final) {
		PUT(b, "{\"input_tokens\":");
		mock_put_long(b, r->input_tokens);
		PUT(b, ",\"input_tokens_details\":{\"cached_tokens\":");
		mock_put_long(b, r->cached_tokens);
		PUT(b, "},\"output_tokens\":");
		mock_put_long(b, r->output_tokens);
		PUT(b, ",\"output_tokens_details\":{\"reasoning_tokens\":");
		mock_put_long(b, r->reasoning_tokens);
		PUT(b, "},\"total_tokens\":");
		mock_put_long(b, r->input_tokens + r->output_tokens);
		PUT(b, "}");
	} else {
		PUT(b, "null");
	}
	PUT(b, ",\"user\":null,\"metadata\":{}}");
}

/* How many events come before response.completed: its sequence_number. */
static long completed_seq(const struct mock_resp *r)
{
	return 2 + (r->reasoning ? 2 : 0) + 2 + r->text_tokens + 3;
}

/* The closing event's data: line, without its newline. */
static void completed_line(struct evbuffer *b, const struct mock_resp *r, long pad)
{
	PUT(b, "data: {\"type\":\"");
	if (r->truncated)
		PUT(b, "response.incomplete");
	else
		PUT(b, "response.completed");
	PUT(b, "\",\"response\":");
	put_response(b, r, true, pad);
	PUT(b, ",\"sequence_number\":");
	mock_put_long(b, completed_seq(r));
	PUT(b, "}");
}

/* The reasoning item's encrypted_content that makes response.completed's data:
 * line (stream) or the whole body pad_to bytes long: measured once without it. */
static long pad_of(struct mock_resp *r, bool stream)
{
	if (r->pad >= 0)
		return r->pad;
	r->pad = 0;
	struct evbuffer *t = r->pad_to > 0 ? evbuffer_new() : NULL;
	if (t == NULL)
		return 0;
	if (stream)
		completed_line(t, r, 0);
	else
		put_response(t, r, true, 0);
	long n = (long)evbuffer_get_length(t);
	evbuffer_free(t);
	r->pad = r->pad_to > n ? r->pad_to - n : 0;
	return r->pad;
}

int mock_responses_answer(struct evhttp_request *req, const struct mock_resp_ctl *ctl,
                          struct mock_limit_in *lin, const char *rid, struct evbuffer *out,
                          struct mock_req *tmpl, struct mock_limit_out *lo)
{
	bool stream;
	int status;
	struct mock_resp *r = read_request(req, ctl, lin, &stream, &status, &lo->body);
	if (r == NULL)
		return 500;
	if (lo->body == NULL)
		mock_limits_check(lin, evhttp_request_get_output_headers(req), rid, lo);
	else
		lo->status = status;
	if (lo->status != 0 || (ctl->status != 0 && ctl->status != 200)) {
		if (lo->status != 0) {
			evbuffer_add_buffer(out, lo->body);
			evbuffer_free(lo->body);
		}
		mock_responses_free(r);
		return lo->status != 0 ? lo->status : ctl->status;
	}
	passed(r);
	if (!stream) {
		put_response(out, r, true, pad_of(r, false));
		mock_responses_free(r);
		return 200;
	}
	tmpl->streaming = true;
	tmpl->kind = MOCK_K_RESPONSES;
	tmpl->chunks = r->text_tokens;
	tmpl->chunk_ms = ctl->chunk_ms;
	tmpl->chunk_bytes = ctl->chunk_bytes;
	tmpl->resp = r;
	return 200;
}

/* ---------- the event stream ---------- */

/* "event: TYPE\ndata: {"type":"TYPE"," and the rest is the caller's. */
static void event_open(struct evbuffer *b, const char *type)
{
	PUT(b, "event: ");
	evbuffer_add(b, type, strlen(type));
	PUT(b, "\ndata: {\"type\":\"");
	evbuffer_add(b, type, strlen(type));
	PUT(b, "\",");
}

static void event_close(struct evbuffer *b, struct mock_resp *r)
{
	PUT(b, "\"sequence_number\":");
	mock_put_long(b, r->seq_no++);
	PUT(b, "}\n\n");
}

static void put_indices(struct evbuffer *b, const struct mock_resp *r)
{
	PUT(b, "\"item_id\":\"msg_mock_");
	mock_put_long(b, (long)r->seq);
	PUT(b, "\",\"output_index\":");
	mock_put_long(b, r->reasoning ? 1 : 0);
	PUT(b, ",\"content_index\":0,");
}

static void put_text_part(struct evbuffer *b, const struct mock_resp *r, bool done)
{
	PUT(b, "\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"");
	if (done)
		put_text(b, r);
	PUT(b, "\"},");
}

/* response.created and .in_progress (each repeating instructions and tools, as
 * OpenAI's do), the reasoning item when there is one, the message item and its
 * text part opened. */
void mock_responses_head(struct evbuffer *b, struct mock_resp *r)
{
	event_open(b, "response.created");
	PUT(b, "\"response\":");
	put_response(b, r, false, 0);
	PUT(b, ",");
	event_close(b, r);
	event_open(b, "response.in_progress");
	PUT(b, "\"response\":");
	put_response(b, r, false, 0);
	PUT(b, ",");
	event_close(b, r);
	if (r->reasoning) {
		event_open(b, "response.output_item.added");
		PUT(b, "\"output_index\":0,\"item\":");
		put_reasoning_item(b, r, false, 0);
		PUT(b, ",");
		event_close(b, r);
		event_open(b, "response.output_item.done");
		PUT(b, "\"output_index\":0,\"item\":");
		put_reasoning_item(b, r, true, pad_of(r, true));
		PUT(b, ",");
		event_close(b, r);
	}
	event_open(b, "response.output_item.added");
	PUT(b, "\"output_index\":");
	mock_put_long(b, r->reasoning ? 1 : 0);
	PUT(b, ",\"item\":");
	put_message_item(b, r, false);
	PUT(b, ",");
	event_close(b, r);
	event_open(b, "response.content_part.added");
	put_indices(b, r);
	put_text_part(b, r, false);
	event_close(b, r);
}

void mock_responses_delta(struct evbuffer *b, struct mock_resp *r)
{
	event_open(b, "response.output_text.delta");
	put_indices(b, r);
	PUT(b, "\"delta\":\"");
	mock_put_chunk_text(b, r->chunk_bytes);
	PUT(b, "\",\"logprobs\":[],");
	event_close(b, r);
}

/* The text done, the part done, the item done, and response.completed (or
 * response.incomplete) with the whole response and its usage. */
void mock_responses_tail(struct evbuffer *b, struct mock_resp *r)
{
	event_open(b, "response.output_text.done");
	put_indices(b, r);
	PUT(b, "\"text\":\"");
	put_text(b, r);
	PUT(b, "\",\"logprobs\":[],");
	event_close(b, r);
	event_open(b, "response.content_part.done");
	put_indices(b, r);
	put_text_part(b, r, true);
	event_close(b, r);
	event_open(b, "response.output_item.done");
	PUT(b, "\"output_index\":");
	mock_put_long(b, r->reasoning ? 1 : 0);
	PUT(b, ",\"item\":");
	put_message_item(b, r, true);
	PUT(b, ",");
	event_close(b, r);
	PUT(b, "event: ");
	if (r->truncated)
		PUT(b, "response.incomplete");
	else
		PUT(b, "response.completed");
	PUT(b, "\n");
	completed_line(b, r, pad_of(r, true));
	PUT(b, "\n\n");
	r->seq_no++;
}
