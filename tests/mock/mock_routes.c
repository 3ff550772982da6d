/* SPDX-License-Identifier: Apache-2.0 */
/* mock_routes.c — request intake: per-request control, provider limits, the answers of
 * each endpoint, and the lifecycle of answers that are not sent at once (delay, hang,
 * reset, stream). */
#include "mock.h"
#include "mock_engine.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <openssl/evp.h>

#define MAX_CHUNKS 1000000L
#define MAX_CHUNK_BYTES (16L * 1024 * 1024)
#define BLOB_BLOCK (1u << 20)
#define MAX_BLOB (4LL * 1024 * 1024 * 1024)

/* Per-request control, from x-mock-* headers or query parameters. */
struct ctl {
	int status;
	const char *ecode, *etype, *emsg;
	long delay_ms, chunks, chunk_ms, chunk_bytes, usage_pad;
	long completed_bytes, reasoning_tokens; /* Responses API (mock_responses.c) */
	enum mock_mode hang, reset;
};

/* The one body buffer of answers sent at once: evhttp_send_reply moves its contents
 * out, so it is empty again after every request and never reallocated. */
static struct evbuffer *out_buf;
static unsigned char *blob_block;

static const char models_json[] =
    "{\"object\":\"list\",\"data\":["
    "{\"id\":\"gpt-mock\",\"object\":\"model\",\"created\":1700000000,\"owned_by\":\"mock\"},"
    "{\"id\":\"gpt-4o-mini\",\"object\":\"model\",\"created\":1700000000,\"owned_by\":\"mock\"},"
    "{\"id\":\"claude-mock\",\"object\":\"model\",\"created\":1700000000,\"owned_by\":\"mock\"}"
    "]}";
static const char not_found_json[] = "{\"error\":{\"message\":\"mock: no route\",\"type\":"
                                     "\"invalid_request_error\",\"code\":\"not_found\"}}";

/* ---------- small helpers ---------- */

static enum mock_mode parse_mode(const char *v)
{
	if (strcasecmp(v, "headers") == 0)
		return MOCK_MODE_HEADERS;
	if (strcasecmp(v, "body") == 0)
		return MOCK_MODE_BODY;
	return MOCK_MODE_NONE;
}

/* "Name: value" → an extra response header. */
static void add_extra_header(struct evkeyvalq *h, const char *v)
{
	const char *colon = strchr(v, ':');
	if (colon == NULL || colon == v)
		return;
	char name[256];
	size_t n = (size_t)(colon - v);
	if (n >= sizeof(name))
		return;
	memcpy(name, v, n);
	name[n] = '\0';
	const char *val = colon + 1;
	while (*val == ' ' || *val == '\t')
		val++;
	evhttp_add_header(h, name, val);
}

/* One control name (without the x-mock- prefix) and its value. */
static void ctl_set(struct ctl *c, struct evkeyvalq *oh, const char *name, const char *v)
{
	long n;
	if (strcasecmp(name, "status") == 0 && mock_parse_long(v, 100, 599, &n) == 0)
		c->status = (int)n;
	else if (strcasecmp(name, "error-code") == 0)
		c->ecode = v;
	else if (strcasecmp(name, "error-type") == 0)
		c->etype = v;
	else if (strcasecmp(name, "error-message") == 0)
		c->emsg = v;
	else if (strcasecmp(name, "delay-ms") == 0 && mock_parse_long(v, 0, 86400000, &n) == 0)
		c->delay_ms = n;
	else if (strcasecmp(name, "chunks") == 0 && mock_parse_long(v, 0, MAX_CHUNKS, &n) == 0)
		c->chunks = n;
	else if (strcasecmp(name, "chunk-ms") == 0 && mock_parse_long(v, 0, 86400000, &n) == 0)
		c->chunk_ms = n;
	else if (strcasecmp(name, "chunk-bytes") == 0 &&
	         mock_parse_long(v, 0, MAX_CHUNK_BYTES, &n) == 0)
		c->chunk_bytes = n;
	else if (strcasecmp(name, "usage-pad") == 0 &&
	         mock_parse_long(v, 0, MAX_CHUNK_BYTES, &n) == 0)
		c->usage_pad = n;
	else if (strcasecmp(name, "completed-bytes") == 0 &&
	         mock_parse_long(v, 0, 64L * 1024 * 1024, &n) == 0)
		c->completed_bytes = n;
	else if (strcasecmp(name, "reasoning-tokens") == 0 &&
	         mock_parse_long(v, 0, MAX_CHUNKS, &n) == 0)
		c->reasoning_tokens = n;
	else if (strcasecmp(name, "hang") == 0)
		c->hang = parse_mode(v);
	else if (strcasecmp(name, "reset") == 0)
		c->reset = parse_mode(v);
	else if (strcasecmp(name, "header") == 0)
		add_extra_header(oh, v);
}

static void ctl_parse(struct ctl *c, struct evhttp_request *req, struct evkeyvalq *query)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	for (struct evkeyval *kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next)
		if (strncasecmp(kv->key, "x-mock-", 7) == 0)
			ctl_set(c, oh, kv->key + 7, kv->value);
	if (query != NULL)
		for (struct evkeyval *kv = query->tqh_first; kv != NULL; kv = kv->next.tqe_next)
			ctl_set(c, oh, kv->key, kv->value);
}

/* SHA-256 of the API key: Authorization: Bearer <key>, else x-api-key. */
static bool key_sha(struct evhttp_request *req, unsigned char sha[32])
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *k = evhttp_find_header(in, "authorization");
	if (k != NULL && strncasecmp(k, "Bearer ", 7) == 0)
		k += 7;
	else if (k == NULL)
		k = evhttp_find_header(in, "x-api-key");
	if (k == NULL)
		k = evhttp_find_header(in, "api-key"); /* Azure */
	if (k == NULL || *k == '\0')
		return false;
	unsigned int len = 0;
	EVP_Digest(k, strlen(k), sha, &len, EVP_sha256(), NULL);
	return true;
}

static long utf8_chars(const char *s)
{
	long n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* What the answer depends on, read from the request JSON. */
struct llm_in {
	bool stream, include_usage;
	long max_tokens; /* 0 when absent */
	long chars;      /* characters of all message contents (or embedding inputs) */
	long inputs;     /* embeddings: number of inputs */
	char model[64];  /* echoed in the answer */
	char bmodel[64]; /* the model of the budgets: the body's (or the path's), "" for none */
	bool cacheable;  /* /v1/messages: a block carries cache_control */
	long prefix_chars;
	unsigned char prefix_sha[32];
	char extra[40]; /* chat: the first member outside known_chat[] ("": none) */
};

/* The members a strict upstream takes in a chat completion (Mistral's
 * parameters and OpenAI's common ones); strict_fields refuses the rest. */
static const char *const known_chat[] = {"model",
                                         "messages",
                                         "stream",
                                         "max_tokens",
                                         "temperature",
                                         "top_p",
                                         "n",
                                         "stop",
                                         "tools",
                                         "tool_choice",
                                         "response_format",
                                         "seed",
                                         "random_seed",
                                         "presence_penalty",
                                         "frequency_penalty",
                                         "safe_prompt",
                                         "user",
                                         "parallel_tool_calls",
                                         "prediction",
                                         "max_completion_tokens"};

static void find_extra(json_t *j, struct llm_in *li)
{
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		size_t i = 0;
		while (i < sizeof(known_chat) / sizeof(known_chat[0]) &&
		       strcmp(k, known_chat[i]) != 0)
			i++;
		if (i == sizeof(known_chat) / sizeof(known_chat[0])) {
			snprintf(li->extra, sizeof(li->extra), "%s", k);
			return;
		}
	}
}

static long content_chars(json_t *content)
{
	if (json_is_string(content))
		return utf8_chars(json_string_value(content));
	long n = 0;
	size_t i;
	json_t *part;
	/* json_array_foreach yields nothing for a non-array */
	json_array_foreach(content, i, part)
	{
		json_t *t = json_object_get(part, "text");
		if (json_is_string(t))
			n += utf8_chars(json_string_value(t));
	}
	return n;
}

/* Anthropic's blocks in order: the system prompt, then every message's content. A string
 * is one block without cache_control. The cacheable prefix runs up to and including the
 * last block with cache_control; stop >= 0: hash the blocks up to index stop. */
struct walk {
	long idx, last_cc, chars, prefix_chars, stop;
	EVP_MD_CTX *md;
};

static void walk_block(struct walk *w, const char *role, json_t *block)
{
	const char *text = NULL;
	if (json_is_string(block))
		text = json_string_value(block);
	else if (json_is_string(json_object_get(block, "text")))
		text = json_string_value(json_object_get(block, "text"));
	long c = text != NULL ? utf8_chars(text) : 0;
	if (w->md != NULL && w->idx <= w->stop) {
		EVP_DigestUpdate(w->md, role, strlen(role) + 1);
		if (text != NULL) {
			EVP_DigestUpdate(w->md, text, strlen(text) + 1);
		} else {
			/* another kind of block (image, tool use): its whole JSON */
			char *d = json_dumps(block, JSON_COMPACT | JSON_SORT_KEYS);
			if (d != NULL)
				EVP_DigestUpdate(w->md, d, strlen(d) + 1);
			free(d);
		}
	}
	if (json_is_object(json_object_get(block, "cache_control"))) {
		w->last_cc = w->idx;
		w->prefix_chars = w->chars + c;
	}
	w->chars += c;
	w->idx++;
}

static void walk_content(struct walk *w, const char *role, json_t *content)
{
	size_t i = 0;
	json_t *b = NULL;
	if (json_is_string(content))
		walk_block(w, role, content);
	else
		json_array_foreach(content, i, b)
		{
			walk_block(w, role, b);
		}
}

static void walk_messages(struct walk *w, json_t *j)
{
	size_t i;
	json_t *msg;
	walk_content(w, "system", json_object_get(j, "system"));
	json_array_foreach(json_object_get(j, "messages"), i, msg)
	{
		json_t *r = json_object_get(msg, "role");
		walk_content(w, json_is_string(r) ? json_string_value(r) : "",
		             json_object_get(msg, "content"));
	}
}

/* /v1/messages: characters of the system prompt and the messages, and the cacheable
 * prefix (its characters, the SHA-256 of its blocks). */
static void messages_parse(json_t *j, struct llm_in *li)
{
	struct walk w = {.last_cc = -1, .stop = -1};
	walk_messages(&w, j);
	li->chars = w.chars;
	if (w.last_cc < 0)
		return;
	li->cacheable = true;
	li->prefix_chars = w.prefix_chars;
	struct walk h = {.last_cc = -1, .stop = w.last_cc, .md = EVP_MD_CTX_new()};
	if (h.md == NULL)
		return;
	EVP_DigestInit_ex(h.md, EVP_sha256(), NULL);
	walk_messages(&h, j);
	unsigned int len = 0;
	EVP_DigestFinal_ex(h.md, li->prefix_sha, &len);
	EVP_MD_CTX_free(h.md);
}

static bool model_echoable(const char *m, size_t n)
{
	return n > 0 && n < 64 &&
	       strspn(m, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                 "0123456789._:/-@") == n;
}

static void llm_parse(struct evhttp_request *req, struct llm_in *li, const char *model,
                      enum mock_kind kind, const char *path_model)
{
	memset(li, 0, sizeof(*li));
	snprintf(li->model, sizeof(li->model), "%s", model);
	if (path_model != NULL) { /* Azure: the deployment names the model */
		snprintf(li->bmodel, sizeof(li->bmodel), "%s", path_model);
		if (model_echoable(path_model, strlen(path_model)))
			snprintf(li->model, sizeof(li->model), "%s", path_model);
	}
	struct evbuffer *b = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(b);
	if (len == 0)
		return;
	const char *p = (const char *)evbuffer_pullup(b, -1);
	json_t *j = json_loadb(p, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return; /* not JSON: answered with the defaults */
	}
	li->stream = json_is_true(json_object_get(j, "stream"));
	li->include_usage =
	    json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage"));
	json_t *mt = json_object_get(j, "max_tokens");
	if (!json_is_integer(mt))
		mt = json_object_get(j, "max_completion_tokens");
	if (json_is_integer(mt) && json_integer_value(mt) > 0)
		li->max_tokens =
		    json_integer_value(mt) > MAX_CHUNKS ? MAX_CHUNKS : (long)json_integer_value(mt);
	/* The model name is echoed only when it needs no JSON escaping. */
	json_t *m = json_object_get(j, "model");
	if (json_is_string(m) && model_echoable(json_string_value(m), json_string_length(m)))
		snprintf(li->model, sizeof(li->model), "%s", json_string_value(m));
	if (json_is_string(m) && json_string_length(m) < sizeof(li->bmodel) &&
	    li->bmodel[0] == '\0')
		snprintf(li->bmodel, sizeof(li->bmodel), "%s", json_string_value(m));
	size_t i;
	json_t *msg, *msgs = json_object_get(j, "messages");
	if (kind == MOCK_K_CHAT && mock_limits_strict_fields())
		find_extra(j, li);
	if (kind == MOCK_K_MESSAGES)
		messages_parse(j, li);
	else
		json_array_foreach(msgs, i, msg)
		{
			li->chars += content_chars(json_object_get(msg, "content"));
		}
	json_t *input = json_object_get(j, "input");
	if (json_is_string(input)) {
		li->inputs = 1;
		li->chars += utf8_chars(json_string_value(input));
	} else if (json_is_array(input)) {
		json_t *e;
		li->inputs =
		    json_is_integer(json_array_get(input, 0)) ? 1 : (long)json_array_size(input);
		json_array_foreach(input, i, e)
		{
			if (json_is_string(e))
				li->chars += utf8_chars(json_string_value(e));
		}
	}
	json_decref(j);
}

static void put_long(struct evbuffer *b, long v)
{
	char s[24];
	int n = snprintf(s, sizeof(s), "%ld", v);
	evbuffer_add(b, s, (size_t)n);
}

#define PUT(b, lit) evbuffer_add((b), (lit), sizeof(lit) - 1)

/* The content of one chunk: "tok " padded with 'x' to chunk_bytes. */
static const char pad_x[] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
static void put_chunk_text(struct evbuffer *b, long chunk_bytes)
{
	PUT(b, "tok ");
	const long step = (long)sizeof(pad_x) - 1;
	for (long left = chunk_bytes - 4; left > 0; left -= step)
		evbuffer_add(b, pad_x, (size_t)(left < step ? left : step));
}

/* Shared with mock_stream.c, so that streamed and whole answers agree. */
void mock_put_chunk_text(struct evbuffer *b, long chunk_bytes)
{
	put_chunk_text(b, chunk_bytes);
}

void mock_put_long(struct evbuffer *b, long v)
{
	put_long(b, v);
}

static void chat_body(struct evbuffer *b, const struct llm_in *li, long prompt, long completion,
                      long chunk_bytes, bool truncated)
{
	PUT(b, "{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion\",\"created\":1700000000,"
	       "\"model\":\"");
	evbuffer_add(b, li->model, strlen(li->model));
	PUT(b, "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"");
	for (long i = 0; i < completion; i++)
		put_chunk_text(b, chunk_bytes);
	PUT(b, "\"},\"logprobs\":null,\"finish_reason\":\"");
	if (truncated)
		PUT(b, "length");
	else
		PUT(b, "stop");
	PUT(b, "\"}],\"usage\":{\"prompt_tokens\":");
	put_long(b, prompt);
	PUT(b, ",\"completion_tokens\":");
	put_long(b, completion);
	PUT(b, ",\"total_tokens\":");
	put_long(b, prompt + completion);
	PUT(b, "}}");
}

static void messages_body(struct evbuffer *b, const struct llm_in *li, long prompt, long completion,
                          long chunk_bytes, bool truncated, const struct mock_limit_out *lo)
{
	PUT(b, "{\"id\":\"msg_mock\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"");
	evbuffer_add(b, li->model, strlen(li->model));
	PUT(b, "\",\"content\":[{\"type\":\"text\",\"text\":\"");
	for (long i = 0; i < completion; i++)
		put_chunk_text(b, chunk_bytes);
	PUT(b, "\"}],\"stop_reason\":\"");
	if (truncated)
		PUT(b, "max_tokens");
	else
		PUT(b, "end_turn");
	PUT(b, "\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":");
	put_long(b, prompt);
	if (li->cacheable) {
		PUT(b, ",\"cache_creation_input_tokens\":");
		put_long(b, lo->cache_creation);
		PUT(b, ",\"cache_read_input_tokens\":");
		put_long(b, lo->cache_read);
	}
	PUT(b, ",\"output_tokens\":");
	put_long(b, completion);
	PUT(b, "}}");
}

static void embeddings_body(struct evbuffer *b, const struct llm_in *li, long prompt)
{
	long n = li->inputs > 0 ? li->inputs : 1;
	if (n > 10000)
		n = 10000;
	PUT(b, "{\"object\":\"list\",\"data\":[");
	for (long i = 0; i < n; i++) {
		if (i > 0)
			PUT(b, ",");
		PUT(b, "{\"object\":\"embedding\",\"index\":");
		put_long(b, i);
		PUT(b, ",\"embedding\":[0.125,-0.25,0.375,-0.5,0.625,-0.75,0.875,-1.0]}");
	}
	PUT(b, "],\"model\":\"");
	evbuffer_add(b, li->model, strlen(li->model));
	PUT(b, "\",\"usage\":{\"prompt_tokens\":");
	put_long(b, prompt);
	PUT(b, ",\"total_tokens\":");
	put_long(b, prompt);
	PUT(b, "}}");
}

/* Deterministic bytes, not UTF-8 (every 0xFF byte is invalid UTF-8), built once and
 * then added by reference: a large blob costs no copying. */
static void blob_body(struct evbuffer *b, long long n)
{
	if (blob_block == NULL) {
		blob_block = malloc(BLOB_BLOCK);
		if (blob_block == NULL)
			return;
		uint32_t x = 2463534242u;
		for (unsigned i = 0; i < BLOB_BLOCK; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			blob_block[i] = (unsigned char)(x >> 24);
		}
		blob_block[0] = 0xFF;
	}
	while (n > 0) {
		size_t part = n > BLOB_BLOCK ? BLOB_BLOCK : (size_t)n;
		evbuffer_add_reference(b, blob_block, part, NULL, NULL);
		n -= (long long)part;
	}
}

/* evhttp 2.1 knows no phrase for 429 and 529 ("Client Error", "Server Error"). */
const char *mock_reason(int status)
{
	switch (status) {
	case 429:
		return "Too Many Requests";
	case 529:
		return "Site Overloaded";
	}
	return NULL;
}

/* ---------- answers sent later ---------- */

static void on_timer(evutil_socket_t fd, short what, void *arg);

static void free_req_state(struct mock_req *mr)
{
	if (mr->timer != NULL)
		event_free(mr->timer);
	if (mr->watch != NULL)
		event_free(mr->watch);
	if (mr->body != NULL)
		evbuffer_free(mr->body);
	mock_responses_free(mr->resp);
	mock_limits_release(mr->key);
	if (mock_stats.in_flight > 0)
		mock_stats.in_flight--;
	if (mr->conn != NULL)
		mr->conn->cur = NULL;
	free(mr);
}

/* Normal end: the caller sends the last bytes right after, on mr->req (saved first):
 * evhttp may free the connection inside that call, so nothing of ours may point
 * at the request any more. */
void mock_req_done(struct mock_req *mr)
{
	free_req_state(mr);
}

/* The connection is going away (client left, our reset, or shutdown). */
void mock_req_conn_closed(struct mock_req *mr)
{
	struct evhttp_request *req = mr->req;
	/* also a stream still waiting for its first byte: the client gave up on it */
	if (mr->streaming && mr->reset == MOCK_MODE_NONE)
		mock_stats.streams_aborted++;
	/* evhttp detaches a request the client abandoned and leaves it to us; a request
	 * still attached is freed with the connection. */
	bool detached = evhttp_request_get_connection(req) == NULL;
	free_req_state(mr);
	if (detached)
		evhttp_send_reply_end(req);
}

/* From the clock read now, not the loop turn's start: a burst of requests read in one
 * turn would otherwise answer up to the turn's length early. */
static void arm(struct mock_req *mr, long ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	event_base_update_cache_time(mock_base);
	evtimer_add(mr->timer, &tv);
}

/* TCP RST: SO_LINGER {1, 0} makes the last close of the socket abort the connection.
 * evhttp_connection_free would shutdown(SHUT_WR) first, which sends a FIN, and the
 * client would read a clean EOF before the RST. So the socket is closed here, by
 * replacing its descriptor with /dev/null (dup2: the number stays valid for evhttp,
 * no other thread can take it), after every event on it is removed; evhttp then
 * frees the connection and closes the placeholder. */
static void do_reset(struct mock_req *mr)
{
	struct linger lg = {1, 0};
	struct evhttp_connection *evcon = mr->conn->evcon;
	int fd = mr->conn->fd;
	if (mr->watch != NULL) {
		event_free(mr->watch);
		mr->watch = NULL;
	}
	bufferevent_disable(evhttp_connection_get_bufferevent(evcon), EV_READ | EV_WRITE);
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, fd);
		close(nul);
	}
	evhttp_connection_free(evcon); /* runs the close callback, which frees mr */
}

void mock_req_written(struct evhttp_connection *evcon, void *arg)
{
	struct mock_req *mr = arg;
	(void)evcon;
	if (mr->reset == MOCK_MODE_BODY) {
		/* not from inside evhttp's write callback: the connection is freed */
		mr->reset_now = true;
		arm(mr, 0);
	} else if (mr->hang == MOCK_MODE_BODY) {
		/* keep the connection open until the client leaves */
	} else if (mr->streaming) {
		arm(mr, mr->chunk_ms);
	}
}

static void on_watch(evutil_socket_t fd, short what, void *arg)
{
	struct mock_req *mr = arg;
	(void)fd;
	(void)what;
	/* The client left while evhttp was not reading: drop the connection ourselves. */
	evhttp_connection_free(mr->conn->evcon);
}

static void begin(struct mock_req *mr)
{
	if (mr->reset == MOCK_MODE_HEADERS) {
		do_reset(mr);
		return;
	}
	/* From the status line on, evhttp reads again and sees the client leave. */
	event_free(mr->watch);
	mr->watch = NULL;
	if (mr->streaming) {
		mock_stream_start(mr);
		return;
	}
	struct evhttp_request *req = mr->req;
	if (mr->hang == MOCK_MODE_BODY || mr->reset == MOCK_MODE_BODY) {
		size_t len = evbuffer_get_length(mr->body);
		char cl[24];
		snprintf(cl, sizeof(cl), "%zu", len);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", cl);
		evhttp_send_reply_start(req, mr->status, mock_reason(mr->status));
		mock_limits_window_sent(&mr->window);
		mock_count_response(mr->status);
		mr->started = true;
		struct evbuffer *half = evbuffer_new();
		evbuffer_remove_buffer(mr->body, half, len / 2);
		if (evbuffer_get_length(half) > 0)
			evhttp_send_reply_chunk_with_cb(req, half, mock_req_written, mr);
		else
			mock_req_written(NULL, mr);
		evbuffer_free(half);
		return;
	}
	struct evbuffer *body = mr->body;
	int status = mr->status;
	struct mock_window w = mr->window;
	mr->body = NULL;
	mock_req_done(mr);
	evhttp_send_reply(req, status, mock_reason(status), body);
	mock_limits_window_sent(&w);
	mock_count_response(status);
	evbuffer_free(body);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct mock_req *mr = arg;
	(void)fd;
	(void)what;
	if (mr->reset_now)
		do_reset(mr);
	else if (!mr->started)
		begin(mr);
	else if (mr->streaming)
		mock_stream_next(mr);
}

/* Hands the answer to a mock_req; false when that is impossible (the caller answers
 * at once instead). */
static bool defer(struct evhttp_request *req, const struct ctl *c, int status, long delay,
                  struct mock_req *tmpl)
{
	struct mock_conn *conn = mock_conn_of(req);
	if (conn == NULL || conn->cur != NULL)
		return false;
	struct mock_req *mr = malloc(sizeof(*mr));
	if (mr == NULL)
		return false;
	*mr = *tmpl;
	mr->req = req;
	mr->conn = conn;
	mr->status = status;
	mr->hang = c->hang;
	mr->reset = c->reset;
	mr->body = evbuffer_new();
	evbuffer_add_buffer(mr->body, out_buf);
	mr->timer = evtimer_new(mock_base, on_timer, mr);
	mr->watch = event_new(mock_base, conn->fd, EV_CLOSED | EV_PERSIST, on_watch, mr);
	conn->cur = mr;
	event_add(mr->watch, NULL);
	/* hang before the headers: no timer, only the watch for the client leaving */
	if (!(c->hang == MOCK_MODE_HEADERS && c->reset == MOCK_MODE_NONE))
		arm(mr, delay);
	return true;
}

/* ---------- /_mock ---------- */

static void free_ref(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	free((void *)data);
}

static void send_json(struct evhttp_request *req, int status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	                  "application/json");
	/* The output buffer keeps referring to s until it is written: it frees s then. */
	if (s != NULL)
		evbuffer_add_reference(out_buf, s, strlen(s), free_ref, NULL);
	evhttp_send_reply(req, status, mock_reason(status), out_buf);
}

static void admin(struct evhttp_request *req, const char *path)
{
	if (strcmp(path, "/_mock/stats") == 0) {
		send_json(req, 200, mock_record_stats_json());
	} else if (strcmp(path, "/_mock/requests") == 0) {
		mock_record_requests(out_buf);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
		                  "application/json");
		evhttp_send_reply(req, 200, NULL, out_buf);
	} else if (strcmp(path, "/_mock/ws") == 0) {
		send_json(req, 200, mock_ws_stats_json());
	} else if (strcmp(path, "/_mock/reset") == 0) {
		mock_ws_reset();
		mock_record_reset();
		mock_limits_reset();
		mock_engine_reset();
		mock_responses_reset();
		send_json(req, 200, json_pack("{s:b}", "ok", 1));
	} else if (strcmp(path, "/_mock/config") == 0) {
		struct evbuffer *b = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(b);
		char err[256];
		const char *p = (const char *)evbuffer_pullup(b, -1);
		if (mock_limits_configure(p ? p : "", len, err, sizeof(err)) == 0)
			send_json(req, 200, json_pack("{s:b}", "ok", 1));
		else
			send_json(req, 400, json_pack("{s:b,s:s}", "ok", 0, "error", err));
	} else if (!mock_engine_admin(req, path)) {
		send_json(req, 404, json_loads(not_found_json, 0, NULL));
	}
}

/* ---------- intake ---------- */

/* Azure OpenAI: /openai/deployments/NAME/chat/completions or …/embeddings; the
 * deployment NAME goes to dep (at most 63 bytes). */
static enum mock_kind azure_route(enum evhttp_cmd_type m, const char *path, char dep[64])
{
	static const char pre[] = "/openai/deployments/";
	if (m != EVHTTP_REQ_POST || strncmp(path, pre, sizeof(pre) - 1) != 0)
		return MOCK_K_OTHER;
	const char *name = path + sizeof(pre) - 1, *slash = strchr(name, '/');
	if (slash == NULL || slash == name || slash - name >= 64)
		return MOCK_K_OTHER;
	enum mock_kind k = strcmp(slash, "/chat/completions") == 0 ? MOCK_K_CHAT
	                   : strcmp(slash, "/embeddings") == 0     ? MOCK_K_EMBED
	                                                           : MOCK_K_OTHER;
	if (k != MOCK_K_OTHER) {
		memcpy(dep, name, (size_t)(slash - name));
		dep[slash - name] = '\0';
	}
	return k;
}

/* Gemini native: /v1beta/models/NAME:generateContent (answered as a chat
 * completion: pacerd reads its status and its error bodies); NAME goes to dep. */
static enum mock_kind gemini_route(enum evhttp_cmd_type m, const char *path, char dep[64])
{
	static const char pre[] = "/v1beta/models/", verb[] = ":generateContent";
	if (m != EVHTTP_REQ_POST || strncmp(path, pre, sizeof(pre) - 1) != 0)
		return MOCK_K_OTHER;
	const char *name = path + sizeof(pre) - 1, *colon = strchr(name, ':');
	if (colon == NULL || colon == name || colon - name >= 64 || strcmp(colon, verb) != 0)
		return MOCK_K_OTHER;
	memcpy(dep, name, (size_t)(colon - name));
	dep[colon - name] = '\0';
	return MOCK_K_CHAT;
}

static enum mock_kind route(enum evhttp_cmd_type m, const char *path)
{
	if (m == EVHTTP_REQ_POST && strcmp(path, "/v1/chat/completions") == 0)
		return MOCK_K_CHAT;
	if ((m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD) && strcmp(path, "/v1/models") == 0)
		return MOCK_K_MODELS;
	if (m == EVHTTP_REQ_POST && strcmp(path, "/v1/messages") == 0)
		return MOCK_K_MESSAGES;
	if (m == EVHTTP_REQ_POST && strcmp(path, "/v1/embeddings") == 0)
		return MOCK_K_EMBED;
	/* OpenAI's, and Azure's v1 and preview paths (the model in the body) */
	if (m == EVHTTP_REQ_POST &&
	    (strcmp(path, "/v1/responses") == 0 || strcmp(path, "/openai/v1/responses") == 0 ||
	     strcmp(path, "/openai/responses") == 0))
		return MOCK_K_RESPONSES;
	return MOCK_K_OTHER;
}

/* POST /v1/responses: the key and the project named, then mock_responses.c answers. */
static int responses(struct evhttp_request *req, const struct ctl *c, const char *rid,
                     struct mock_req *tmpl, struct mock_limit_out *lo)
{
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	const char *wp = evhttp_find_header(ih, "openai-project");
	const char *wo = evhttp_find_header(ih, "openai-organization");
	unsigned char sha[32];
	struct mock_limit_in lin = {.key_sha = key_sha(req, sha) ? sha : NULL,
	                            .want_project = wp != NULL && *wp ? wp : NULL,
	                            .want_org = wo != NULL && *wo ? wo : NULL};
	const struct mock_resp_ctl rc = {c->status,      c->chunks,          c->chunk_ms,
	                                 c->chunk_bytes, c->completed_bytes, c->reasoning_tokens};
	return mock_responses_answer(req, &rc, &lin, rid, out_buf, tmpl, lo);
}

void mock_routes_handle(struct evhttp_request *req, void *arg)
{
	(void)arg;
	if (out_buf == NULL)
		out_buf = evbuffer_new();
	const char *uri = evhttp_request_get_uri(req);
	/* The path, without the query and without scheme://host of an absolute target. */
	const char *p = uri;
	if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
		p = strchr(p + 8, '/');
		if (p == NULL)
			p = "/";
	}
	char path[512];
	size_t plen = strcspn(p, "?");
	if (plen >= sizeof(path))
		plen = sizeof(path) - 1;
	memcpy(path, p, plen);
	path[plen] = '\0';
	const char *q = p[plen] == '?' ? p + plen + 1 : NULL;

	if (strncmp(path, "/_mock/", 7) == 0) {
		admin(req, path);
		return;
	}

	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	struct evkeyvalq query, *qp = NULL;
	if (q != NULL && evhttp_parse_query_str(q, &query) == 0)
		qp = &query;
	if (mock_ws_wanted(req)) {
		mock_ws_accept(req, path, qp);
		if (qp != NULL)
			evhttp_clear_headers(qp);
		return;
	}

	/* registers the connection (counts, TCP_NODELAY, close callback) on first use */
	(void)mock_conn_of(req);
	mock_stats.requests++;
	mock_stats.in_flight++;
	if (mock_stats.in_flight > mock_stats.in_flight_max)
		mock_stats.in_flight_max = mock_stats.in_flight;
	mock_record_add(req, mock_now_ms());
	char rid[40];
	snprintf(rid, sizeof(rid), "req_mock_%" PRIu64, ++mock_stats.request_seq);
	evhttp_add_header(oh, "x-request-id", rid);

	struct ctl c = {.chunks = 5};
	ctl_parse(&c, req, qp);

	struct mock_req tmpl;
	memset(&tmpl, 0, sizeof(tmpl));
	enum mock_kind kind = route(method, path);
	char dep[64];
	bool azure = false;
	if (kind == MOCK_K_OTHER && path[1] == 'o') {
		kind = azure_route(method, path, dep);
		azure = kind != MOCK_K_OTHER;
	} else if (kind == MOCK_K_OTHER && path[1] == 'v') {
		kind = gemini_route(method, path, dep);
		azure = kind != MOCK_K_OTHER; /* the path names the model, as Azure's */
	}
	int status = 200;
	const char *ctype = "application/json";
	struct mock_limit_out lo = {0};
	bool engine = false; /* engine mode: mock_engine.c answers */
	long eng_prompt = 0, eng_output = 0;

	if (kind == MOCK_K_RESPONSES) {
		status = responses(req, &c, rid, &tmpl, &lo);
	} else if (kind != MOCK_K_OTHER) {
		struct llm_in li;
		llm_parse(req, &li, kind == MOCK_K_MESSAGES ? "claude-mock" : "gpt-mock", kind,
		          azure ? dep : NULL);
		long prompt = li.chars / 4 > 0 ? li.chars / 4 : 1;
		long prefix = li.prefix_chars / 4 < prompt ? li.prefix_chars / 4 : prompt;
		long completion = c.chunks;
		bool truncated = li.max_tokens > 0 && li.max_tokens < completion;
		if (truncated)
			completion = li.max_tokens;
		engine = kind == MOCK_K_CHAT && mock_engine_enabled();
		if (engine) {
			completion = mock_engine_output_tokens(req, li.max_tokens, &truncated);
			eng_prompt = prompt;
			eng_output = completion;
		}
		unsigned char sha[32];
		long out_tokens = li.max_tokens > 0 ? li.max_tokens : 16;
		struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
		const char *wp = evhttp_find_header(ih, "openai-project");
		const char *wo = evhttp_find_header(ih, "openai-organization");
		struct mock_limit_in lin = {.key_sha = key_sha(req, sha) ? sha : NULL,
		                            .cost_tokens = prompt + out_tokens,
		                            .input_tokens = prompt,
		                            .output_tokens = out_tokens,
		                            .produced_tokens = completion,
		                            .model = li.bmodel,
		                            .messages = kind == MOCK_K_MESSAGES,
		                            .want_project = wp != NULL && *wp ? wp : NULL,
		                            .want_org = wo != NULL && *wo ? wo : NULL,
		                            .cacheable = li.cacheable,
		                            .prefix_tokens = prefix};
		memcpy(lin.prefix_sha, li.prefix_sha, 32);
		if (li.extra[0] != '\0') { /* strict_fields: Mistral's 422 extra_forbidden */
			lo.status = 422;
			lo.body = evbuffer_new();
			evbuffer_add_printf(
			    lo.body,
			    "{\"object\":\"error\",\"message\":{\"detail\":[{\"type\":"
			    "\"extra_forbidden\",\"loc\":[\"body\",\"%s\"],\"msg\":"
			    "\"Extra inputs are not permitted\"}]},\"type\":"
			    "\"invalid_request_error\",\"param\":null,\"code\":null}",
			    li.extra);
		} else {
			mock_limits_check(&lin, oh, rid, &lo);
		}
		/* usage: input_tokens is what is neither read from nor written to the cache */
		if (li.cacheable)
			prompt -= prefix;
		if (lo.status != 0) {
			status = lo.status;
			evbuffer_add_buffer(out_buf, lo.body);
			evbuffer_free(lo.body);
		} else if (c.status != 0 && c.status != 200) {
			status = c.status;
		} else if (kind == MOCK_K_MODELS) {
			evbuffer_add_reference(out_buf, models_json, sizeof(models_json) - 1, NULL,
			                       NULL);
		} else if (kind == MOCK_K_EMBED) {
			embeddings_body(out_buf, &li, prompt);
		} else if (li.stream) {
			tmpl.streaming = true;
			tmpl.kind = kind;
			tmpl.chunks = completion;
			tmpl.chunk_ms = c.chunk_ms;
			tmpl.chunk_bytes = c.chunk_bytes;
			tmpl.usage_pad = c.usage_pad;
			tmpl.prompt_tokens = prompt;
			tmpl.completion_tokens = completion;
			tmpl.include_usage = li.include_usage;
			tmpl.truncated = truncated;
			tmpl.cache_usage = li.cacheable;
			tmpl.cache_read = lo.cache_read;
			tmpl.cache_creation = lo.cache_creation;
			memcpy(tmpl.model, li.model, sizeof(tmpl.model));
		} else if (kind == MOCK_K_CHAT) {
			chat_body(out_buf, &li, prompt, completion, c.chunk_bytes, truncated);
		} else {
			messages_body(out_buf, &li, prompt, completion, c.chunk_bytes, truncated,
			              &lo);
		}
	} else if (c.status != 0 && c.status != 200) {
		status = c.status;
	} else if (method == EVHTTP_REQ_POST && strcmp(path, "/v1/messages/count_tokens") == 0) {
		/* Anthropic's count: {"input_tokens": N}, N = body bytes / 4; no limits */
		size_t n = evbuffer_get_length(evhttp_request_get_input_buffer(req)) / 4;
		evbuffer_add_printf(out_buf, "{\"input_tokens\":%zu}", n > 0 ? n : 1);
	} else if (method == EVHTTP_REQ_POST && strcmp(path, "/v1/files") == 0) {
		/* An upload: OpenAI's file object; /_mock/requests has its hash */
		size_t n = evbuffer_get_length(evhttp_request_get_input_buffer(req));
		evbuffer_add_printf(out_buf,
		                    "{\"id\":\"file-mock\",\"object\":\"file\",\"bytes\":%zu}", n);
	} else if (strcmp(path, "/echo") == 0 || strncmp(path, "/echo/", 6) == 0) {
		const char *ct =
		    evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
		ctype = ct ? ct : "application/octet-stream";
		evhttp_add_header(oh, "x-mock-method", mock_method_name(method));
		evhttp_add_header(oh, "x-mock-uri", uri);
		evbuffer_add_buffer(out_buf, evhttp_request_get_input_buffer(req));
	} else if (strcmp(path, "/blob") == 0 &&
	           (method == EVHTTP_REQ_GET || method == EVHTTP_REQ_HEAD)) {
		const char *v = qp ? evhttp_find_header(qp, "bytes") : NULL;
		long n = 0;
		ctype = "application/octet-stream";
		if (v != NULL && mock_parse_long(v, 0, LONG_MAX, &n) == 0 && n <= MAX_BLOB)
			blob_body(out_buf, n);
		else
			status = 400;
	} else {
		status = 404;
		evbuffer_add_reference(out_buf, not_found_json, sizeof(not_found_json) - 1, NULL,
		                       NULL);
	}

	/* x-mock-status (and a bad /blob): an OpenAI-shaped error body. */
	if (status != 200 && lo.status == 0 && evbuffer_get_length(out_buf) == 0) {
		char msg[64];
		snprintf(msg, sizeof(msg), "mock: status %d", status);
		struct evbuffer *e = mock_error_body(false, c.etype ? c.etype : "mock_error",
		                                     c.ecode, c.emsg ? c.emsg : msg, NULL, rid);
		evbuffer_add_buffer(out_buf, e);
		evbuffer_free(e);
		ctype = "application/json";
	}
	evhttp_add_header(oh, "Content-Type", tmpl.streaming ? "text/event-stream" : ctype);
	tmpl.key = lo.key;
	tmpl.window = lo.window;

	if (engine && status == 200 &&
	    mock_engine_submit(req, eng_prompt, eng_output, &tmpl, out_buf)) {
		if (qp != NULL)
			evhttp_clear_headers(&query);
		return;
	}
	long delay = mock_limits_latency_ms() + c.delay_ms;
	bool later =
	    tmpl.streaming || delay > 0 || c.hang != MOCK_MODE_NONE || c.reset != MOCK_MODE_NONE;
	/* defer fails only when out of memory: then an empty answer, at once */
	if (!later || !defer(req, &c, status, delay, &tmpl)) {
		evhttp_send_reply(req, status, mock_reason(status), out_buf);
		mock_limits_window_sent(&lo.window);
		mock_count_response(status);
		mock_limits_release(lo.key);
		mock_responses_free(tmpl.resp);
		mock_stats.in_flight--;
	}
	if (qp != NULL)
		evhttp_clear_headers(&query);
}

void mock_routes_free(void)
{
	if (out_buf != NULL)
		evbuffer_free(out_buf);
	out_buf = NULL;
	free(blob_block);
	blob_block = NULL;
}
