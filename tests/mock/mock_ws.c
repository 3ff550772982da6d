/* SPDX-License-Identifier: Apache-2.0 */
/* mock_ws.c — WebSocket endpoints (README "WebSocket"): the Responses API's
 * WebSocket mode (GET /v1/responses with Upgrade: websocket) and a
 * Realtime-shaped one (GET /v1/realtime), framed with libwslay.
 *
 * evhttp (libevent 2.1) cannot hand a connection over, so the upgrade takes
 * the socket from under it: the connection's events are switched off, the
 * socket is duplicated for the WebSocket, its old descriptor number is
 * pointed at a fresh unconnected socket (dup2), and evhttp frees its
 * connection on the next loop turn, closing only that stand-in (its
 * shutdown cannot reach the real socket). */
#include "mock.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <openssl/evp.h>
#include <wslay/wslay.h>

#define FLOOD_CHUNK (64 * 1024)
#define OUT_CAP (256 * 1024)
#define TURNS_MAX 10000

struct ws_turn_rec {
	uint64_t t_ms;
	unsigned socket;
	char key[17]; /* the key's SHA-256, first 16 hex digits */
	char model[64];
	bool refused;
};

static struct {
	uint64_t opened, open, closed, messages, turns, refused, flood_sent, flood_done;
	uint64_t bytes_in; /* the payloads of the messages received */
	uint16_t last_close_code;
	struct ws_turn_rec turns_rec[TURNS_MAX];
	size_t n_turns;
} wst;

struct ws_peer {
	struct bufferevent *bev;
	wslay_event_context_ptr ctx;
	unsigned id;
	bool realtime;
	char key[17];
	long chunks, chunk_bytes, refuse_turn, refuse_ms, flood_bytes, drop_turn, hang_turn;
	long turn_no;
	struct event *resume; /* x-mock-ws-pause-read-ms: reading starts again */
	long flood_left;      /* bytes of delta events still to send */
	bool closing;
	bool dropped;
};

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	struct ws_peer *p = user;
	(void)flags;
	int n = evbuffer_remove(bufferevent_get_input(p->bev), buf, len);
	if (n <= 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	return n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
	struct ws_peer *p = user;
	(void)flags;
	struct evbuffer *out = bufferevent_get_output(p->bev);
	/* Past the cap the mock waits for the socket to drain: a reader that
	 * stops slows the mock down (what the flood test measures). */
	if (evbuffer_get_length(out) >= OUT_CAP) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	evbuffer_add(out, data, len);
	return (ssize_t)len;
}

static void peer_free(struct ws_peer *p)
{
	if (p->resume != NULL)
		event_free(p->resume);
	bufferevent_free(p->bev);
	wslay_event_context_free(p->ctx);
	free(p);
	wst.open--;
	wst.closed++;
}

static void queue_text(struct ws_peer *p, const char *s, size_t n)
{
	struct wslay_event_msg m = {
	    .opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *)s, .msg_length = n};
	wslay_event_queue_msg(p->ctx, &m);
}

static void queue_json(struct ws_peer *p, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	if (s != NULL)
		queue_text(p, s, strlen(s));
	free(s);
	json_decref(j);
}

/* The events that end a turn, with its usage. */
static void turn_tail(struct ws_peer *p, long input, long output, const char *model)
{
	if (p->realtime) {
		queue_json(p, json_pack("{s:s,s:[{s:s,s:i,s:i,s:f},{s:s,s:i,s:i,s:f}]}", "type",
		                        "rate_limits.updated", "rate_limits", "name", "requests",
		                        "limit", 1000, "remaining", 999, "reset_seconds", 0.06,
		                        "name", "tokens", "limit", 100000, "remaining", 99000,
		                        "reset_seconds", 0.6));
		queue_json(p,
		           json_pack("{s:s,s:{s:s,s:s,s:{s:i,s:i,s:i}}}", "type", "response.done",
		                     "response", "object", "realtime.response", "status",
		                     "completed", "usage", "total_tokens", input + output,
		                     "input_tokens", input, "output_tokens", output));
		return;
	}
	queue_json(p, json_pack("{s:s,s:{s:s,s:s,s:s,s:{s:i,s:i,s:i}}}", "type",
	                        "response.completed", "response", "object", "response", "status",
	                        "completed", "model", model, "usage", "input_tokens", input,
	                        "output_tokens", output, "total_tokens", input + output));
}

static void delta(struct ws_peer *p, long bytes)
{
	/* a delta event of about `bytes` bytes: "tok " and then filler bytes (x) */
	static char buf[FLOOD_CHUNK + 128];
	long n = bytes < 4 ? 4 : bytes;
	if (n > FLOOD_CHUNK)
		n = FLOOD_CHUNK;
	int h =
	    snprintf(buf, sizeof(buf), "{\"type\":\"response.output_text.delta\",\"delta\":\"tok ");
	memset(buf + h, 'x', (size_t)(n - 4));
	memcpy(buf + h + n - 4, "\"}", 2);
	queue_text(p, buf, (size_t)(h + n - 4 + 2));
}

static void on_turn(struct ws_peer *p, json_t *msg)
{
	p->turn_no++;
	wst.turns++;
	const char *model = json_string_value(json_object_get(msg, "model"));
	if (model == NULL)
		model = p->realtime ? "gpt-realtime-mock" : "gpt-mock";
	struct ws_turn_rec *r = wst.n_turns < TURNS_MAX ? &wst.turns_rec[wst.n_turns++] : NULL;
	if (r != NULL) {
		r->t_ms = mock_now_ms();
		r->socket = p->id;
		memcpy(r->key, p->key, sizeof(r->key));
		snprintf(r->model, sizeof(r->model), "%s", model);
		r->refused = false;
	}
	if (p->drop_turn > 0 && p->turn_no == p->drop_turn) {
		p->dropped = true; /* closes without a close frame (pump) */
		return;
	}
	if (p->refuse_turn > 0 && p->turn_no == p->refuse_turn) {
		wst.refused++;
		if (r != NULL)
			r->refused = true;
		char m[160];
		snprintf(m, sizeof(m),
		         "Rate limit reached for requests. Please try again in %ldms.",
		         p->refuse_ms);
		queue_json(p, json_pack("{s:s,s:i,s:{s:s,s:s,s:s}}", "type", "error", "status", 429,
		                        "error", "type", "requests", "code", "rate_limit_exceeded",
		                        "message", m));
		return;
	}
	/* input: the message's bytes / 4, as the mock counts everywhere */
	char *text = json_dumps(msg, JSON_COMPACT);
	long input = text != NULL ? (long)strlen(text) / 4 : 1;
	free(text);
	queue_json(p, json_pack("{s:s,s:{s:s,s:s}}", "type", "response.created", "response",
	                        "status", "in_progress", "model", model));
	if (p->hang_turn > 0 && p->turn_no == p->hang_turn)
		return; /* never ends */
	if (p->flood_bytes > 0 && p->turn_no == 1) {
		p->flood_left = p->flood_bytes;
		return; /* on_write sends it as the socket drains, then the tail */
	}
	for (long i = 0; i < p->chunks; i++)
		delta(p, p->chunk_bytes);
	turn_tail(p, input < 1 ? 1 : input, p->chunks, model);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                   void *user)
{
	struct ws_peer *p = user;
	(void)ctx;
	if (a->opcode == WSLAY_CONNECTION_CLOSE) {
		wst.last_close_code = a->status_code;
		p->closing = true;
		return;
	}
	if (a->opcode != WSLAY_TEXT_FRAME)
		return;
	wst.messages++;
	wst.bytes_in += a->msg_length;
	json_t *j = json_loadb((const char *)a->msg, a->msg_length, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	if (type != NULL && strcmp(type, "response.create") == 0)
		on_turn(p, j);
	else if (type != NULL && strcmp(type, "session.update") == 0)
		queue_json(p, json_pack("{s:s}", "type", "session.updated"));
	json_decref(j);
}

/* Sends what is queued, and the flood's next events while the socket takes
 * them; closes once the close handshake is over. */
static void pump(struct ws_peer *p)
{
	struct evbuffer *out = bufferevent_get_output(p->bev);
	if (p->dropped) {
		peer_free(p);
		return;
	}
	while (p->flood_left > 0 && evbuffer_get_length(out) < OUT_CAP &&
	       wslay_event_get_queued_msg_count(p->ctx) == 0) {
		long n = p->flood_left < FLOOD_CHUNK ? p->flood_left : FLOOD_CHUNK;
		delta(p, n);
		p->flood_left -= n;
		wst.flood_sent += (uint64_t)n;
		wslay_event_send(p->ctx);
		if (p->flood_left == 0) {
			wst.flood_done = mock_now_ms();
			turn_tail(p, 1, p->flood_bytes / FLOOD_CHUNK, "gpt-mock");
		}
	}
	wslay_event_send(p->ctx);
	if ((wslay_event_get_close_sent(p->ctx) && wslay_event_get_close_received(p->ctx) &&
	     !wslay_event_want_write(p->ctx) && evbuffer_get_length(out) == 0) ||
	    (!wslay_event_want_read(p->ctx) && !wslay_event_want_write(p->ctx) &&
	     evbuffer_get_length(out) == 0))
		peer_free(p);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct ws_peer *p = arg;
	(void)bev;
	wslay_event_recv(p->ctx);
	pump(p);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	pump(arg);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct ws_peer *p = arg;
	(void)fd;
	(void)what;
	bufferevent_enable(p->bev, EV_READ);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		peer_free(arg);
}

static void free_evcon(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	evhttp_connection_free(arg);
}

static long ctl_long(struct evhttp_request *req, struct evkeyvalq *q, const char *name, long dflt)
{
	char h[64];
	snprintf(h, sizeof(h), "x-mock-%s", name);
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), h);
	if (v == NULL && q != NULL)
		v = evhttp_find_header(q, name);
	long out;
	return v != NULL && mock_parse_long(v, 0, 1L << 40, &out) == 0 ? out : dflt;
}

bool mock_ws_wanted(struct evhttp_request *req)
{
	const char *up = evhttp_find_header(evhttp_request_get_input_headers(req), "upgrade");
	return up != NULL && strcasecmp(up, "websocket") == 0 &&
	       evhttp_request_get_command(req) == EVHTTP_REQ_GET;
}

void mock_ws_accept(struct evhttp_request *req, const char *path, struct evkeyvalq *query)
{
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	const char *key = evhttp_find_header(ih, "sec-websocket-key");
	bool realtime = strcmp(path, "/v1/realtime") == 0;
	if (key == NULL || strlen(key) != 24 || (!realtime && strcmp(path, "/v1/responses") != 0)) {
		evhttp_send_error(req, 400, "mock: not a WebSocket endpoint");
		return;
	}
	long status = ctl_long(req, query, "status", 0);
	if (status >= 400) {
		struct evbuffer *b = evbuffer_new();
		evbuffer_add_printf(b, "{\"error\":{\"message\":\"mock: refused\",\"type\":"
		                       "\"requests\",\"code\":\"rate_limit_exceeded\"}}");
		evhttp_add_header(evhttp_request_get_output_headers(req), "retry-after", "1");
		evhttp_send_reply(req, (int)status, "Refused", b);
		evbuffer_free(b);
		return;
	}
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *hb = evhttp_connection_get_bufferevent(evcon);
	int fd = bufferevent_getfd(hb);
	struct ws_peer *p = calloc(1, sizeof(*p));
	int mine = fd >= 0 ? dup(fd) : -1;
	int stand_in = socket(AF_INET, SOCK_STREAM, 0);
	if (p == NULL || mine < 0 || stand_in < 0) {
		free(p);
		if (mine >= 0)
			close(mine);
		if (stand_in >= 0)
			close(stand_in);
		evhttp_send_error(req, 500, "mock: cannot upgrade");
		return;
	}
	/* evhttp lets go of the socket: no event of its own stays on it */
	bufferevent_disable(hb, EV_READ | EV_WRITE);
	struct evbuffer *early = evbuffer_new();
	evbuffer_add_buffer(early, bufferevent_get_input(hb));
	dup2(stand_in, fd);
	close(stand_in);
	struct timeval zero = {0, 0};
	event_base_once(mock_base, -1, EV_TIMEOUT, free_evcon, evcon, &zero);

	p->id = (unsigned)++wst.opened;
	wst.open++;
	p->realtime = realtime;
	p->chunks = ctl_long(req, query, "chunks", 3);
	p->chunk_bytes = ctl_long(req, query, "chunk-bytes", 8);
	p->refuse_turn = ctl_long(req, query, "ws-refuse", 0);
	p->refuse_ms = ctl_long(req, query, "ws-refuse-ms", 1000);
	p->flood_bytes = ctl_long(req, query, "ws-flood-bytes", 0);
	p->drop_turn = ctl_long(req, query, "ws-drop-turn", 0);
	p->hang_turn = ctl_long(req, query, "ws-hang-turn", 0);
	const char *auth = evhttp_find_header(ih, "authorization");
	char hex[65] = "";
	if (auth != NULL)
		mock_sha256_hex(auth, strlen(auth), hex);
	memcpy(p->key, hex, 16);
	evutil_make_socket_nonblocking(mine);
	p->bev = bufferevent_socket_new(mock_base, mine, BEV_OPT_CLOSE_ON_FREE);
	static const struct wslay_event_callbacks cbs = {
	    .recv_callback = recv_cb, .send_callback = send_cb, .on_msg_recv_callback = on_msg};
	wslay_event_context_server_init(&p->ctx, &cbs, p);
	/* the accept value (RFC 6455 §4.2.2) */
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	unsigned char md[20];
	unsigned int mdlen = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha1(), NULL);
	EVP_DigestUpdate(c, key, strlen(key));
	EVP_DigestUpdate(c, guid, sizeof(guid) - 1);
	EVP_DigestFinal_ex(c, md, &mdlen);
	EVP_MD_CTX_free(c);
	char accept[32];
	EVP_EncodeBlock((unsigned char *)accept, md, 20);
	struct evbuffer *out = bufferevent_get_output(p->bev);
	evbuffer_add_printf(out,
	                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	                    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
	                    "x-request-id: req_mock_ws_%u\r\n"
	                    "x-ratelimit-limit-requests: 10000\r\n"
	                    "x-ratelimit-remaining-requests: 9999\r\n"
	                    "x-ratelimit-reset-requests: 6ms\r\n\r\n",
	                    accept, p->id);
	if (realtime)
		queue_json(p, json_pack("{s:s,s:{s:s}}", "type", "session.created", "session",
		                        "model", "gpt-realtime-mock"));
	bufferevent_setcb(p->bev, on_read, on_write, on_event, p);
	bufferevent_setwatermark(p->bev, EV_WRITE, OUT_CAP / 4, 0);
	/* A slow reader: nothing read for the first N ms (wslay reads only
	 * what the bufferevent holds, so the sender's bytes wait in TCP). */
	bufferevent_setwatermark(p->bev, EV_READ, 0, OUT_CAP);
	long pause_ms = ctl_long(req, query, "ws-pause-read-ms", 0);
	bufferevent_enable(p->bev, pause_ms > 0 ? EV_WRITE : EV_READ | EV_WRITE);
	if (pause_ms > 0) {
		struct timeval tv = {pause_ms / 1000, (pause_ms % 1000) * 1000};
		p->resume = evtimer_new(mock_base, on_resume, p);
		evtimer_add(p->resume, &tv);
	}
	if (evbuffer_get_length(early) > 0)
		evbuffer_add_buffer(bufferevent_get_input(p->bev), early);
	evbuffer_free(early);
	if (evbuffer_get_length(bufferevent_get_input(p->bev)) > 0)
		on_read(p->bev, p);
	else
		pump(p);
}

json_t *mock_ws_stats_json(void)
{
	json_t *turns = json_array();
	for (size_t i = 0; i < wst.n_turns; i++) {
		const struct ws_turn_rec *r = &wst.turns_rec[i];
		json_array_append_new(turns,
		                      json_pack("{s:I,s:i,s:s,s:s,s:b}", "t_ms",
		                                (json_int_t)r->t_ms, "socket", r->socket, "key",
		                                r->key, "model", r->model, "refused", r->refused));
	}
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:o}", "bytes_in",
	                 (json_int_t)wst.bytes_in, "opened", (json_int_t)wst.opened, "open",
	                 (json_int_t)wst.open, "closed", (json_int_t)wst.closed, "messages",
	                 (json_int_t)wst.messages, "turns", (json_int_t)wst.turns, "refused",
	                 (json_int_t)wst.refused, "flood_sent", (json_int_t)wst.flood_sent,
	                 "flood_done_ms", (json_int_t)wst.flood_done, "last_close_code",
	                 wst.last_close_code, "turn_list", turns);
}

void mock_ws_reset(void)
{
	uint64_t open = wst.open;
	memset(&wst, 0, sizeof(wst));
	wst.open = open;
}
