/* SPDX-License-Identifier: Apache-2.0 */
/* pacerd-mock — the test and benchmark upstream (tests/mock/README.md is the contract).
 *
 * One event loop, one thread. Files by concern:
 *   mock_main.c    command line, listeners (plain and TLS), connections, signals
 *   mock_routes.c  request intake, per-request control, answers, deferred answers
 *   mock_stream.c  SSE streams (OpenAI and Anthropic), chunk timing
 *   mock_responses.c  OpenAI's Responses API: input as counted, answers, events, held history
 *   mock_limits.c  provider-like behaviour: config, per-key buckets, 429 dialects
 *   mock_record.c  counters and request records, /_mock/stats and /_mock/requests
 *   mock_ws.c      WebSocket endpoints (Responses API WebSocket mode, Realtime-shaped)
 */
#ifndef PACERD_MOCK_H
#define PACERD_MOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

struct mock_key;
struct mock_engine_req;

/* One client connection that has carried at least one request. Owned by mock_main.c;
 * freed by its close callback, which evhttp runs when the connection goes away. */
struct mock_conn {
	struct evhttp_connection *evcon;
	int fd;
	struct mock_req *cur;           /* deferred request in progress on it, or NULL */
	struct mock_engine_req *engine; /* engine mode's request on it (mock_engine.c), or NULL */
};

enum mock_kind {
	MOCK_K_OTHER,
	MOCK_K_CHAT,
	MOCK_K_MESSAGES,
	MOCK_K_EMBED,
	MOCK_K_MODELS,
	MOCK_K_RESPONSES
};
enum mock_mode { MOCK_MODE_NONE, MOCK_MODE_HEADERS, MOCK_MODE_BODY };

/* The window a 429 held for latency_ms opens when it leaves (budget NULL: none). */
struct budget;
struct mock_resp;
struct mock_window {
	struct budget *budget;
	uint64_t adv_us; /* what it advertises */
	uint64_t gen;    /* the budgets' generation it was decided in */
};

/* A request whose answer is not sent from inside the request callback: delayed,
 * hanging, reset, or streamed. Owned by its connection slot (conn->cur). */
struct mock_req {
	struct evhttp_request *req;
	struct mock_conn *conn;
	struct mock_key *key;      /* for the per-key concurrency count, or NULL */
	struct mock_window window; /* a 429's window, opened when the status line goes */
	struct event *timer;       /* delay, then chunk spacing */
	struct event *watch;       /* EV_CLOSED on the fd until the status line is out */
	struct evbuffer *body;     /* the prepared answer (non-stream) */
	int status;
	enum mock_mode hang, reset;
	bool started; /* status line sent */
	bool streaming;
	/* stream state (mock_stream.c) */
	enum mock_kind kind;
	long chunks, sent, chunk_ms, chunk_bytes;
	long usage_pad; /* x-mock-usage-pad: a "pad" member this long before the final usage */
	long prompt_tokens, completion_tokens;
	bool include_usage, truncated;
	bool reset_now;   /* the timer fires the body-mode reset */
	bool cache_usage; /* /v1/messages with cache_control: usage names the cache fields */
	long cache_read, cache_creation;
	char model[64];
	struct mock_resp *resp; /* a Responses API stream's state (owned), or NULL */
};

/* ---- mock_main.c ---- */
extern struct event_base *mock_base;
uint64_t mock_now_ms(void); /* monotonic milliseconds since the mock started */
uint64_t mock_now_us(void); /* the same in microseconds */
struct mock_conn *mock_conn_of(struct evhttp_request *req);

/* ---- mock_record.c ---- */
struct mock_stats {
	uint64_t requests, in_flight, in_flight_max;
	uint64_t connections_opened, connections_closed;
	uint64_t streams_completed, streams_aborted;
	uint64_t responses[600];
	uint64_t rate_limited, window_violations;
	uint64_t request_seq; /* x-request-id numbering; not reset */
};
extern struct mock_stats mock_stats;
extern bool mock_record_enabled;
extern size_t mock_record_cap;
void mock_record_add(struct evhttp_request *req, uint64_t t_ms);
void mock_record_reset(void);
void mock_record_free(void);
void mock_record_requests(struct evbuffer *b);
/* "GET", "POST", …: the method as the client sent it. */
const char *mock_method_name(enum evhttp_cmd_type c);
/* A decimal integer in [lo, hi], the whole string; 0 or -1. */
int mock_parse_long(const char *s, long lo, long hi, long *out);
json_t *mock_record_stats_json(void);
void mock_count_response(int status);
void mock_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- mock_limits.c ---- */
struct mock_limit_in {
	const unsigned char *key_sha;        /* 32 bytes, or NULL for requests without a key */
	long cost_tokens;                    /* prompt estimate + max_tokens (or 16) */
	long input_tokens, output_tokens;    /* its parts */
	long produced_tokens;                /* output tokens the answer will carry */
	const char *model;                   /* the model of the budgets: "" for none */
	bool messages;                       /* /v1/messages: Anthropic identity headers */
	const char *want_project, *want_org; /* OpenAI-Project / OpenAI-Organization, or NULL */
	bool cacheable;                      /* /v1/messages with a cache_control block */
	long prefix_tokens;                  /* tokens of the cacheable prefix (in input_tokens) */
	unsigned char prefix_sha[32];        /* SHA-256 of the prefix */
};
struct mock_limit_out {
	struct mock_key *key;      /* holds a concurrency slot when status == 0 */
	struct mock_window window; /* to open when the answer leaves */
	int status;                /* 0: go on; else answer this status with body */
	struct evbuffer *body;
	long cache_read, cache_creation; /* when cacheable and status == 0 */
};
int mock_limits_configure(const char *json, size_t len, char *err, size_t errlen);
long mock_limits_latency_ms(void);
/* strict_fields: a chat completion naming a member the mock does not know
 * (stream_options, as Mistral's API refused it) is answered 422. */
bool mock_limits_strict_fields(void);
void mock_limits_check(const struct mock_limit_in *in, struct evkeyvalq *out_headers,
                       const char *request_id, struct mock_limit_out *out);
void mock_limits_release(struct mock_key *key);
void mock_limits_window_sent(const struct mock_window *w);
void mock_limits_reset(void);
void mock_limits_free(void);
void mock_limits_stats_json(json_t *keys);
/* "models", "scopes", "cache_reads", "cache_creations" of /_mock/stats */
void mock_limits_stats_more(json_t *root);
void mock_go_duration(uint64_t ms, char *out, size_t outlen);
struct evbuffer *mock_error_body(bool anthropic, const char *type, const char *code,
                                 const char *message, const char *details_code,
                                 const char *request_id);

/* ---- mock_routes.c ---- */
void mock_routes_handle(struct evhttp_request *req, void *arg);
void mock_req_conn_closed(struct mock_req *mr);
void mock_req_done(struct mock_req *mr);
void mock_req_written(struct evhttp_connection *evcon, void *arg);
void mock_routes_free(void);
const char *mock_reason(int status);
void mock_put_chunk_text(struct evbuffer *b, long chunk_bytes);
void mock_put_long(struct evbuffer *b, long v);

/* ---- mock_responses.c ---- */
/* The per-request controls a Responses answer reads (README "Responses API"). */
struct mock_resp_ctl {
	int status; /* x-mock-status (0: none) */
	long chunks, chunk_ms, chunk_bytes;
	long completed_bytes;  /* x-mock-completed-bytes: response.completed padded to it */
	long reasoning_tokens; /* x-mock-reasoning-tokens */
};
/* Answers POST /v1/responses; lin holds the key and the project named. A request naming
 * history the mock does not hold is a 400 before any limit; then the limits (lo), the
 * x-mock-status, and the answer: whole in out, or a stream handed to tmpl (its resp).
 * Returns the status. */
int mock_responses_answer(struct evhttp_request *req, const struct mock_resp_ctl *ctl,
                          struct mock_limit_in *lin, const char *rid, struct evbuffer *out,
                          struct mock_req *tmpl, struct mock_limit_out *lo);
void mock_responses_head(struct evbuffer *b, struct mock_resp *r);
void mock_responses_delta(struct evbuffer *b, struct mock_resp *r);
void mock_responses_tail(struct evbuffer *b, struct mock_resp *r);
void mock_responses_free(struct mock_resp *r);
/* Forgets every held history (POST /_mock/reset; at exit). */
void mock_responses_reset(void);

/* ---- mock_ws.c ---- */
/* Whether req is a GET with Upgrade: websocket. */
bool mock_ws_wanted(struct evhttp_request *req);
/* Takes the connection of req over as a WebSocket (/v1/responses, /v1/realtime),
 * or answers 400 (another path) or the x-mock-status refusal. */
void mock_ws_accept(struct evhttp_request *req, const char *path, struct evkeyvalq *query);
/* GET /_mock/ws: sockets, turns as they arrived, the flood's progress. */
json_t *mock_ws_stats_json(void);
void mock_ws_reset(void);

/* ---- mock_stream.c ---- */
void mock_stream_start(struct mock_req *mr);
void mock_stream_next(struct mock_req *mr);
/* The events of a stream whose pace another decides (mock_engine.c): the opening ones,
 * one content chunk, the closing ones. */
void mock_stream_head(struct evbuffer *b, const struct mock_req *mr);
void mock_stream_content(struct evbuffer *b, const struct mock_req *mr);
void mock_stream_tail(struct evbuffer *b, const struct mock_req *mr);

#endif
