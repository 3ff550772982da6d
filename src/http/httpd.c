/* SPDX-License-Identifier: Apache-2.0 */
/* httpd — pacerd's HTTP/1.1 server layer. See httpd.h.
 *
 * A connection's states:
 *
 *   IDLE ──first byte──▶ READING ──message complete──▶ ACTIVE (with the owner)
 *    ▲                      │ bad input / limit            │ response ended
 *    │                      ▼                              │
 *    │                   CLOSING ◀── not keep-alive ───────┤
 *    │                      │ output flushed               │ keep-alive
 *    │                      ▼                              ▼
 *    │                   LINGER (SHUT_WR, read and discard until EOF or 2 s)
 *    └──────────────────────────────────────────────── IDLE (next pipelined request)
 *
 * One persistent EV_READ event per connection, armed for its whole life: a
 * client that leaves is seen at once in every state, with no extra watch.
 * Bytes that arrive while a request is ACTIVE wait unparsed (pipelining); past
 * a cap the event is switched to EV_CLOSED alone, so a flood is not read but a
 * departure still is. Output goes to an evbuffer that is written (writev) once
 * per loop turn from the flush event; EV_WRITE is armed only while a write
 * could not complete. One timer per connection, lazy: it is armed for the
 * earliest deadline and, when it fires early for the current state, re-armed
 * for what is left (a deadline that moves later costs nothing).
 *
 * A terminated tunnel (hreq_tunnel_tls) is the same connection with a TLS
 * session between the socket and the parser (tls.c, memory BIOs): bytes read
 * are fed to the session and its plaintext parsed as above; output is
 * encrypted into tls_out on the way to the same writev. The CONNECT's 200
 * goes out in clear first, the handshake shares READING's deadline with the
 * first head, and every state, timer and cap above applies unchanged. A blind
 * tunnel is not this layer's, nor an upgraded WebSocket: hreq_take_over hands
 * the connection over as a bufferevent (in a terminated tunnel, an OpenSSL
 * filter that carries the TLS session on).
 *
 * Nothing is freed from inside a callback that may be on the stack: closed
 * connections go on a reap list handled on the next loop turn, and go back to
 * a pool with their buffers (no allocation per request or per connection once
 * warm). */
#include "http/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event_struct.h>
#include <event2/listener.h>
#include <http_parser.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/grow.h"
#include "core/list.h"
#include "core/log.h"
#include "core/pool.h"
#include "http/tls.h"

#define LISTEN_BACKLOG 4096
#define READ_CHUNK (64 * 1024)
/* Pipelined input held while a request is with the owner; past it, stop reading. */
#define PENDING_CAP (256 * 1024)
/* Output under which a paused writer is told to go on. */
#define OUT_LOW (64 * 1024)
#define LINGER_MS 2000
/* Buffers larger than this are freed when a request ends, not kept for the next. */
#define KEEP_HEAD_BYTES 8192
#define KEEP_BODY_BYTES (64 * 1024)
/* A body's buffer starts this big (or at its declared length, when smaller)
 * and doubles as bytes arrive, never past the declared length: a client that
 * declares 32 MiB and sends 10 bytes costs 16 KiB (nginx's
 * client_body_buffer_size, in spirit). */
#define BODY_FIRST_BYTES (16 * 1024)
/* The largest TLS record's plaintext: answers are encrypted in records this big. */
#define TLS_RECORD (16 * 1024)

enum hc_state { HC_IDLE, HC_READING, HC_ACTIVE, HC_CLOSING, HC_LINGER, HC_DEAD };
enum hc_last { K_NONE, K_URL, K_FIELD, K_VALUE };

struct hoff {
	uint32_t name, name_len, value, value_len;
};

struct hreq {
	struct hconn *conn;
	/* The request line's target and the fields, NUL-terminated pieces. */
	char *head;
	size_t head_len, head_cap;
	uint32_t target_len;
	struct hoff *hdrs;
	size_t n_hdrs, hdrs_cap;
	char *body;
	size_t body_len, body_cap;
	size_t body_most; /* the body's declared length, else limits.max_body_bytes */
	/* A streamed body (hreq_streamed): the bytes that arrived and are held
	 * (the evbuffer is kept with the connection), how many of them the
	 * owner has read, and what became of it. */
	struct evbuffer *stream;
	size_t stream_off;
	uint64_t stream_in; /* body bytes parsed so far */
	int64_t body_size;  /* Content-Length; -1: chunked */
	int body_fail;      /* the answer it failed with; 0: none */
	const char *body_fail_code, *body_fail_msg;
	bool streamed, body_done, body_dropped, continue_owed;
	const char *method;
	char id[HREQ_ID_MAX + 1];
	unsigned short major, minor;
	bool keep_alive, head_method;
	/* The response. */
	const struct hreq_events *ev;
	void *ctx;
	bool started, chunked, no_body, full;
};

struct hconn {
	struct httpd *h;
	evutil_socket_t fd;
	struct event rd, wr, timer;
	bool rd_added, wr_added, rd_closed_only;
	int64_t timer_at; /* instant the timer is armed for; 0 = not armed */
	struct evbuffer *out;
	http_parser parser;
	enum hc_state state;
	struct hreq req;
	/* Input that arrived while a request was active, not parsed yet. */
	char *pend;
	size_t pend_off, pend_len, pend_cap;
	/* Parse bookkeeping. */
	const char *exec_end; /* end of the bytes given to the current execute */
	enum hc_last last;
	bool value_at_end; /* the last value piece ended at exec_end (split read) */
	bool in_head;
	bool headers_done; /* what the parser reports as fields now are trailers */
	char last_byte;
	int reject; /* an answer a parser callback decided on (status) */
	const char *reject_code, *reject_msg;
	int64_t head_start_ms, last_read_ms, last_write_ms, linger_start_ms;
	int64_t body_start_ms;       /* the head ended: the body's allowance counts from here */
	char peer[INET6_ADDRSTRLEN]; /* the client's address; "" when not known */
	/* A terminated tunnel (hreq_tunnel_tls): the TLS session, its host, and
	 * the ciphertext waiting for the socket (out holds plaintext then). */
	SSL *ssl;
	struct evbuffer *tls_out;
	char tunnel_host[HREQ_HOST_MAX + 1];
	bool tls_notified; /* close_notify queued */
	bool close_after;
	/* The answer ended before a streamed body did: the lingering close lasts
	 * while the client keeps sending, so that one that writes its whole
	 * body before it reads gets the answer rather than a reset. */
	bool linger_upload;
	bool flush_queued, reap_queued;
	struct list flush_link; /* h->flushq while flush_queued */
	struct list link;       /* h->conns while open, then h->reaped, then h->pool */
};

struct httpd {
	struct event_base *base;
	struct httpd_conf conf;
	httpd_request_fn on_request;
	void *arg;
	httpd_stream_fn streams; /* NULL: every body is read whole */
	void *streams_arg;
	struct evconnlistener *listener;
	struct event *accept_retry;
	bool listener_paused; /* at max_connections */
	bool accept_backoff;  /* out of fds: waiting for accept_retry */
	bool closing;
	struct event *flush_ev;
	struct list flushq; /* connections with output to write this turn, in order */
	struct event *reap_ev;
	struct list reaped; /* closed this turn: pooled on the next */
	struct list conns;
	struct pool pool; /* closed connections with their buffers */
	size_t n_conns, n_active;
	uint64_t accepted;
	uint64_t responses[6];
	uint64_t tunnels, handshakes, handshake_failures, tunnel_requests;
	unsigned id_prefix;
	unsigned long long next_id;
	char scratch[READ_CHUNK];
	char tls_plain[TLS_RECORD]; /* plaintext gathered into one record */
};

static const http_parser_settings parser_settings;
static void conn_close(struct hconn *c);
static void conn_release(struct hconn *c, bool close_fd);
static void conn_destroy(void *obj);
static void conn_queue_flush(struct hconn *c);
static void conn_arm(struct hconn *c);
static void conn_parse_pending(struct hconn *c);
static void set_read_mode(struct hconn *c, bool closed_only);
static bool pend_save(struct hconn *c, const char *data, size_t len);
static void on_read(evutil_socket_t fd, short what, void *arg);
static void tls_pump(struct hconn *c);
static void tls_failed(struct hconn *c, const char *why);
static bool writable(const struct hreq *r);

/* Output not yet written to the socket: plaintext, and ciphertext in a tunnel. */
static size_t out_len(const struct hconn *c)
{
	return evbuffer_get_length(c->out) + (c->tls_out ? evbuffer_get_length(c->tls_out) : 0);
}

static int64_t now_ms(void)
{
	return clock_now_ms();
}

const char *httpd_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 304:
		return "Not Modified";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 402:
		return "Payment Required";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 413:
		return "Payload Too Large";
	case 417:
		return "Expectation Failed";
	case 422:
		return "Unprocessable Entity";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 529:
		return "Site Overloaded";
	default:
		return "";
	}
}

/* ---- small writers (no printf on the hot path) ---- */

size_t hhdr_u64(char *buf, uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

static size_t put_hex(char *buf, uint64_t v, int width)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = digits[v & 15];
		v >>= 4;
	} while (v != 0 || (int)n < width);
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

/* A response head is built in one stack buffer and added to the output once;
 * a head larger than the buffer spills into the evbuffer in pieces. */
struct headbuf {
	char b[4096];
	size_t len;
	struct evbuffer *out;
};

static void hb_put(struct headbuf *hb, const char *s, size_t n)
{
	if (hb->len + n > sizeof(hb->b)) {
		evbuffer_add(hb->out, hb->b, hb->len);
		hb->len = 0;
		if (n > sizeof(hb->b)) {
			evbuffer_add(hb->out, s, n);
			return;
		}
	}
	memcpy(hb->b + hb->len, s, n);
	hb->len += n;
}

static void hb_str(struct headbuf *hb, const char *s)
{
	hb_put(hb, s, strlen(s));
}

static void hb_field(struct headbuf *hb, const char *name, size_t nlen, const char *value,
                     size_t vlen)
{
	hb_put(hb, name, nlen);
	hb_put(hb, ": ", 2);
	hb_put(hb, value, vlen);
	hb_put(hb, "\r\n", 2);
}

static void hb_status(struct headbuf *hb, int status, const char *reason)
{
	char line[32] = "HTTP/1.1 ";
	size_t n = 9;
	if (status < 100 || status > 999)
		status = 500;
	line[n++] = (char)('0' + status / 100);
	line[n++] = (char)('0' + status / 10 % 10);
	line[n++] = (char)('0' + status % 10);
	line[n++] = ' ';
	hb_put(hb, line, n);
	if (reason == NULL || reason[0] == '\0')
		reason = httpd_reason(status);
	/* A reason relayed from an upstream must not end the line early. */
	size_t rl = strcspn(reason, "\r\n");
	hb_put(hb, reason, rl);
	hb_put(hb, "\r\n", 2);
}

static void hb_done(struct headbuf *hb)
{
	evbuffer_add(hb->out, hb->b, hb->len);
	hb->len = 0;
}

static bool name_is(const char *name, size_t len, const char *lit, size_t litlen)
{
	return len == litlen && strncasecmp(name, lit, len) == 0;
}

/* ---- request ids ---- */

static bool request_id_acceptable(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > HREQ_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)id[i] <= 0x20 || (unsigned char)id[i] >= 0x7f)
			return false;
	return true;
}

/* "pcr_" + 8 hex digits of this process + 12 of a counter. */
static void make_id(struct httpd *h, char *out)
{
	memcpy(out, "pcr_", 4);
	size_t n = 4;
	n += put_hex(out + n, h->id_prefix, 8);
	n += put_hex(out + n, ++h->next_id & 0xffffffffffffULL, 12);
	out[n] = '\0';
}

/* ---- the request's storage ---- */

static bool head_append(struct hreq *r, const char *at, size_t len)
{
	if (!grow_bytes(&r->head, &r->head_cap, r->head_len + len + 1, 1024))
		return false;
	memcpy(r->head + r->head_len, at, len);
	r->head_len += len;
	return true;
}

static bool head_terminate(struct hreq *r)
{
	if (!head_append(r, "", 0))
		return false;
	r->head[r->head_len++] = '\0';
	return true;
}

static void req_reset(struct hreq *r)
{
	if (r->head_cap > KEEP_HEAD_BYTES) {
		free(r->head);
		r->head = NULL;
		r->head_cap = 0;
	}
	if (r->body_cap > KEEP_BODY_BYTES) {
		free(r->body);
		r->body = NULL;
		r->body_cap = 0;
	}
	if (r->hdrs_cap > 64) {
		free(r->hdrs);
		r->hdrs = NULL;
		r->hdrs_cap = 0;
	}
	r->head_len = 0;
	r->target_len = 0;
	r->n_hdrs = 0;
	r->body_len = 0;
	if (r->stream != NULL)
		evbuffer_drain(r->stream, evbuffer_get_length(r->stream));
	r->stream_off = 0;
	r->stream_in = 0;
	r->body_size = -1;
	r->body_fail = 0;
	r->streamed = r->body_done = r->body_dropped = r->continue_owed = false;
	r->method = "";
	r->id[0] = '\0';
	r->keep_alive = r->head_method = false;
	r->ev = NULL;
	r->ctx = NULL;
	r->started = r->chunked = r->no_body = r->full = false;
}

/* ---- parser callbacks ---- */

static struct hconn *conn_of(http_parser *p)
{
	return p->data;
}

static int reject(struct hconn *c, int status, const char *code, const char *msg)
{
	if (c->reject == 0) {
		c->reject = status;
		c->reject_code = code;
		c->reject_msg = msg;
	}
	return -1;
}

static int over_header_limit(struct hconn *c)
{
	if (c->parser.nread > c->h->conf.max_header_bytes)
		return reject(c, 431, "headers_too_large",
		              "the request line and header fields exceed limits.max_header_bytes");
	return 0;
}

/* Control characters other than HTAB (RFC 9110 §5.5). libhttp-parser checks
 * a value's bytes after its first one only: this checks them all. */
static bool has_ctl(const char *at, size_t len, bool allow_tab)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)at[i];
		if ((ch < 0x20 && !(allow_tab && ch == '\t')) || ch == 0x7f)
			return true;
	}
	return false;
}

static int on_message_begin(http_parser *p)
{
	struct hconn *c = conn_of(p);
	req_reset(&c->req);
	c->last = K_NONE;
	c->value_at_end = false;
	c->in_head = true;
	c->headers_done = false;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct hconn *c = conn_of(p);
	if (over_header_limit(c) != 0)
		return -1;
	if (has_ctl(at, len, false))
		return reject(c, 400, "bad_request", "a control character in the request target");
	if (!head_append(&c->req, at, len))
		return reject(c, 503, "out_of_memory", "pacerd is out of memory");
	c->req.target_len += (uint32_t)len;
	c->last = K_URL;
	return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct hconn *c = conn_of(p);
	struct hreq *r = &c->req;
	if (c->headers_done)
		return 0; /* a trailer of a chunked body: not forwarded */
	if (over_header_limit(c) != 0)
		return -1;
	if (c->last != K_FIELD) {
		/* A new field: end the target or the previous value. */
		if (!head_terminate(r))
			return reject(c, 503, "out_of_memory", "pacerd is out of memory");
		if (r->n_hdrs == r->hdrs_cap) {
			size_t cap = r->hdrs_cap ? r->hdrs_cap * 2 : 32;
			struct hoff *nh = realloc(r->hdrs, cap * sizeof(*nh));
			if (nh == NULL)
				return reject(c, 503, "out_of_memory", "pacerd is out of memory");
			r->hdrs = nh;
			r->hdrs_cap = cap;
		}
		struct hoff *o = &r->hdrs[r->n_hdrs++];
		o->name = (uint32_t)r->head_len;
		o->name_len = 0;
		o->value = 0;
		o->value_len = 0;
	}
	if (!head_append(r, at, len))
		return reject(c, 503, "out_of_memory", "pacerd is out of memory");
	r->hdrs[r->n_hdrs - 1].name_len += (uint32_t)len;
	c->last = K_FIELD;
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct hconn *c = conn_of(p);
	struct hreq *r = &c->req;
	if (c->headers_done)
		return 0;
	if (over_header_limit(c) != 0)
		return -1;
	if (c->last == K_VALUE && !c->value_at_end)
		/* A second piece of a value within the same input: the parser
		 * joined a continuation line (obs-fold, RFC 9112 §5.2). */
		return reject(c, 400, "bad_request", "obsolete line folding in a header field");
	if (has_ctl(at, len, true))
		return reject(c, 400, "bad_request", "a control character in a header field");
	if (c->last == K_FIELD) {
		struct hoff *o = &r->hdrs[r->n_hdrs - 1];
		const char *name = r->head + o->name;
		/* No white space between a field name and its colon (RFC 9112 §5.1). */
		if (o->name_len == 0 || name[o->name_len - 1] == ' ' ||
		    name[o->name_len - 1] == '\t')
			return reject(c, 400, "bad_request",
			              "white space before a header field's colon");
		if (!head_terminate(r))
			return reject(c, 503, "out_of_memory", "pacerd is out of memory");
		o->value = (uint32_t)r->head_len;
	}
	if (!head_append(r, at, len))
		return reject(c, 503, "out_of_memory", "pacerd is out of memory");
	r->hdrs[r->n_hdrs - 1].value_len += (uint32_t)len;
	c->last = K_VALUE;
	c->value_at_end = at + len == c->exec_end;
	return 0;
}

static const char *find_header(const struct hreq *r, const char *name, size_t len)
{
	for (size_t i = 0; i < r->n_hdrs; i++) {
		const struct hoff *o = &r->hdrs[i];
		if (name_is(r->head + o->name, o->name_len, name, len))
			return r->head + o->value;
	}
	return NULL;
}

/* The most a body of r may be: max_upload_bytes for a streamed one (0: no
 * limit), else max_body_bytes. */
static uint64_t body_cap(const struct httpd *h, const struct hreq *r)
{
	if (!r->streamed)
		return h->conf.max_body_bytes;
	return h->conf.max_upload_bytes ? h->conf.max_upload_bytes : UINT64_MAX;
}

static int too_large(struct hconn *c, const struct hreq *r)
{
	return reject(c, 413, "body_too_large",
	              r->streamed ? "the upload exceeds limits.max_upload_bytes"
	                          : "the request body exceeds limits.max_body_bytes");
}

static int on_headers_complete(http_parser *p)
{
	struct hconn *c = conn_of(p);
	struct hreq *r = &c->req;
	struct httpd *h = c->h;
	if (over_header_limit(c) != 0)
		return -1;
	if (c->last == K_FIELD)
		return reject(c, 400, "bad_request", "a header field without a value");
	if (!head_terminate(r))
		return reject(c, 503, "out_of_memory", "pacerd is out of memory");
	if (r->n_hdrs == 0)
		r->target_len = (uint32_t)(r->head_len - 1);
	c->in_head = false;
	c->headers_done = true;
	c->body_start_ms = now_ms();
	r->major = p->http_major;
	r->minor = p->http_minor;
	r->method = http_method_str((enum http_method)p->method);
	r->head_method = p->method == HTTP_HEAD;
	if (p->http_major != 1)
		return reject(c, 400, "bad_request", "unsupported HTTP version");
	if (r->target_len == 0)
		return reject(c, 400, "bad_request", "malformed request target");

	const char *te = find_header(r, "transfer-encoding", 17);
	if (te != NULL && strcasecmp(te, "chunked") != 0)
		/* Only chunked is understood; anything else could be read as a
		 * different body by the next hop (a smuggling vector). */
		return reject(c, 400, "bad_request", "unsupported Transfer-Encoding");
	bool chunked = (p->flags & F_CHUNKED) != 0;
	bool has_length = !chunked && p->content_length != ULLONG_MAX;
	bool has_body = chunked || (has_length && p->content_length > 0);
	r->streamed = has_body && h->streams != NULL && h->streams(r, h->streams_arg);
	r->body_size = has_length ? (int64_t)p->content_length : -1;
	if (has_length && p->content_length > body_cap(h, r))
		return too_large(c, r);

	const char *expect = find_header(r, "expect", 6);
	if (expect != NULL) {
		if (strcasecmp(expect, "100-continue") != 0)
			return reject(c, 417, "expectation_failed",
			              "only 100-continue is understood");
		if (p->http_minor >= 1 && has_body) {
			/* The body is welcome: say so now, the client waits for it;
			 * a streamed one when the owner asks for it (hreq_body_read),
			 * so a request refused before it leaves is never sent. */
			if (r->streamed) {
				r->continue_owed = true;
			} else {
				evbuffer_add(c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
				conn_queue_flush(c);
			}
		}
	}
	if (r->streamed && r->stream == NULL && (r->stream = evbuffer_new()) == NULL)
		return reject(c, 503, "out_of_memory", "pacerd is out of memory");
	/* A declared length is a limit, not an allocation: the body's buffer
	 * grows as its bytes arrive (on_body), up to it. */
	r->body_most = has_length ? (size_t)p->content_length : (size_t)h->conf.max_body_bytes;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct hconn *c = conn_of(p);
	struct hreq *r = &c->req;
	if (r->streamed) {
		if (len > body_cap(c->h, r) - r->stream_in)
			return too_large(c, r);
		if (evbuffer_add(r->stream, at, len) != 0)
			return reject(c, 503, "out_of_memory", "pacerd is out of memory");
		r->stream_in += len;
		return 0;
	}
	if (r->body_len + len > c->h->conf.max_body_bytes)
		return too_large(c, r);
	if (!grow_bytes_upto(&r->body, &r->body_cap, r->body_len + len, BODY_FIRST_BYTES,
	                     r->body_most))
		return reject(c, 503, "out_of_memory", "pacerd is out of memory");
	memcpy(r->body + r->body_len, at, len);
	r->body_len += len;
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct hconn *c = conn_of(p);
	/* A streamed body may end after its answer began, with connection:
	 * close (hreq_start): that stands. */
	c->req.keep_alive = http_should_keep_alive(p) != 0 && !c->req.started;
	c->req.body_done = true;
	c->in_head = true; /* what follows is the next request's head */
	/* One request at a time: the rest waits until this one is answered. */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- answers of the layer itself ---- */

static void count_response(struct httpd *h, int status)
{
	if (status >= 100 && status < 600)
		h->responses[status / 100]++;
}

/* JSON string contents into buf (escaped; cut at cap, never mid-escape). */
static size_t json_escape(char *buf, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch >= 0x20 && ch != '"' && ch != '\\') {
			if (n + 1 > cap)
				break;
			buf[n++] = (char)ch;
		} else if (ch == '"' || ch == '\\') {
			if (n + 2 > cap)
				break;
			buf[n++] = '\\';
			buf[n++] = (char)ch;
		} else {
			if (n + 6 > cap)
				break;
			memcpy(buf + n, "\\u00", 4);
			buf[n + 4] = hex[ch >> 4];
			buf[n + 5] = hex[ch & 15];
			n += 6;
		}
	}
	return n;
}

/* Writes a whole JSON error answer to c's output; connection: its value
 * ("close", "keep-alive") or NULL. */
static void put_error(struct hconn *c, int status, const char *code, const char *message,
                      const char *id, const struct hhdr *extra, size_t n, const char *connection)
{
	char body[1536];
	size_t bl = 0;
	memcpy(body, "{\"error\":{\"message\":\"", 21);
	bl = 21;
	bl += json_escape(body + bl, 1024, message);
	memcpy(body + bl, "\",\"type\":\"pacer_error\",\"code\":\"", 31);
	bl += 31;
	bl += json_escape(body + bl, 256, code);
	memcpy(body + bl, "\"}}\n", 4);
	bl += 4;

	struct headbuf hb = {.len = 0, .out = c->out};
	char num[24];
	hb_status(&hb, status, NULL);
	hb_str(&hb, "content-type: application/json\r\n");
	hb_field(&hb, "content-length", 14, num, hhdr_u64(num, bl));
	hb_field(&hb, "x-request-id", 12, id, strlen(id));
	for (size_t i = 0; i < n; i++)
		hb_field(&hb, extra[i].name, extra[i].name_len, extra[i].value, extra[i].value_len);
	if (connection != NULL)
		hb_field(&hb, "connection", 10, connection, strlen(connection));
	hb_put(&hb, "\r\n", 2);
	hb_put(&hb, body, bl);
	hb_done(&hb);
	count_response(c->h, status);
}

/* The layer answers the request being read and closes the connection. */
static void conn_reject(struct hconn *c, int status, const char *code, const char *msg)
{
	char id[HREQ_ID_MAX + 1];
	make_id(c->h, id);
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "rejected")) {
		log_str(&l, "request_id", id);
		log_int(&l, "status", status);
		log_str(&l, "error", code);
		log_str(&l, "message", msg);
		log_end(&l);
	}
	put_error(c, status, code, msg, id, NULL, 0, "close");
	c->state = HC_CLOSING;
	c->last_write_ms = now_ms();
	conn_queue_flush(c);
	conn_arm(c);
}

static const char *parser_error_message(enum http_errno e)
{
	switch (e) {
	case HPE_INVALID_METHOD:
		return "invalid method";
	case HPE_INVALID_URL:
		return "malformed request target";
	case HPE_INVALID_VERSION:
		return "malformed HTTP version";
	case HPE_INVALID_HEADER_TOKEN:
		return "invalid character in a header field";
	case HPE_LF_EXPECTED:
		return "a CR not followed by LF";
	case HPE_UNEXPECTED_CONTENT_LENGTH:
		return "Content-Length repeated or sent with Transfer-Encoding";
	case HPE_INVALID_CONTENT_LENGTH:
		return "invalid Content-Length";
	case HPE_INVALID_TRANSFER_ENCODING:
		return "unsupported Transfer-Encoding";
	case HPE_INVALID_CHUNK_SIZE:
		return "invalid chunk size";
	default:
		return "malformed HTTP request";
	}
}

/* ---- parsing ---- */

/* Where a bare LF (one not preceded by CR) is in data, or len. RFC 9112 lets a
 * recipient accept one as a line end; pacerd refuses it in a request head, as
 * an ambiguity between hops is what request smuggling lives on. */
static size_t bare_lf_at(const struct hconn *c, const char *data, size_t len)
{
	const char *p = data, *end = data + len;
	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		char before = p == data ? c->last_byte : p[-1];
		if (before != '\r')
			return (size_t)(p - data);
		p++;
	}
	return len;
}

/* Feeds bytes to the parser; returns how many it took. A bare LF inside a head
 * is refused. */
static size_t feed(struct hconn *c, const char *data, size_t len)
{
	size_t done = 0;
	while (done < len) {
		size_t n = len - done;
		size_t lf = c->in_head ? bare_lf_at(c, data + done, n) : n;
		size_t part = lf < n ? lf : n;
		c->exec_end = data + done + part;
		size_t took =
		    part ? http_parser_execute(&c->parser, &parser_settings, data + done, part) : 0;
		if (took > 0)
			c->last_byte = data[done + took - 1];
		done += took;
		if (took < part || HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || c->reject)
			return done;
		if (lf < n) {
			if (c->in_head) {
				reject(c, 400, "bad_request", "a bare LF in the request head");
				return done;
			}
			/* The head ended before the LF: the rest is body. */
		}
	}
	return done;
}

static void dispatch_request(struct hconn *c)
{
	struct hreq *r = &c->req;
	struct httpd *h = c->h;
	if (r->head_len == 0 || r->head[r->head_len - 1] != '\0')
		head_terminate(r);
	const char *given = find_header(r, "x-request-id", 12);
	if (given != NULL && request_id_acceptable(given))
		memcpy(r->id, given, strlen(given) + 1);
	else
		make_id(h, r->id);
	if (h->closing)
		r->keep_alive = false;
	if (c->ssl != NULL)
		h->tunnel_requests++;
	c->state = HC_ACTIVE;
	c->last_write_ms = now_ms();
	h->n_active++;
	h->on_request(r, h->arg);
}

/* ---- a streamed body ---- */

static size_t stream_unread(const struct hreq *r)
{
	return evbuffer_get_length(r->stream) - r->stream_off;
}

/* Whether the connection is read for a streamed body now (not failed, not
 * held back by its cap): the client must keep sending then. */
static bool stream_reading(const struct hconn *c)
{
	const struct hreq *r = &c->req;
	return c->state == HC_ACTIVE && r->streamed && !r->body_done && r->body_fail == 0 &&
	       !c->rd_closed_only;
}

static void stream_fail(struct hconn *c, int status, const char *code, const char *msg)
{
	struct hreq *r = &c->req;
	if (r->body_fail != 0)
		return;
	r->body_fail = status;
	r->body_fail_code = code;
	r->body_fail_msg = msg;
}

/* After body bytes were parsed: past the cap, the connection is not read
 * until the owner takes some; then the owner is told. Last: the owner may
 * end the request from its callback. */
static void stream_moved(struct hconn *c)
{
	struct hreq *r = &c->req;
	if (c->state != HC_ACTIVE || !r->streamed)
		return;
	if (!r->body_done && stream_unread(r) >= HREQ_BODY_CAP)
		set_read_mode(c, true);
	conn_arm(c);
	if (r->ev != NULL && r->ev->body != NULL)
		r->ev->body(r->ctx);
}

/* Bytes of a streamed body, while the owner has its request: parsed into
 * the body; what follows its end waits as a pipelined request does. */
static void stream_input(struct hconn *c, const char *data, size_t n)
{
	struct hreq *r = &c->req;
	if (r->body_fail != 0)
		return; /* discarded: the connection closes after the owner's answer */
	size_t took = feed(c, data, n);
	enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
	if (c->reject) {
		stream_fail(c, c->reject, c->reject_code, c->reject_msg);
		c->reject = 0;
	} else if (e == HPE_PAUSED) {
		/* The body ended; the rest is the next request's. */
		http_parser_pause(&c->parser, 0);
		if (!pend_save(c, data + took, n - took) || c->pend_len >= PENDING_CAP)
			set_read_mode(c, true);
	} else if (e != HPE_OK) {
		stream_fail(c, 400, "bad_request", parser_error_message(e));
	}
	stream_moved(c);
}

/* Saves bytes that cannot be parsed yet. False when over the cap. */
static bool pend_save(struct hconn *c, const char *data, size_t len)
{
	if (len == 0)
		return true;
	if (c->pend_off > 0 && c->pend_len > 0)
		memmove(c->pend, c->pend + c->pend_off, c->pend_len);
	c->pend_off = 0;
	if (!grow_bytes(&c->pend, &c->pend_cap, c->pend_len + len, 4096))
		return false;
	memcpy(c->pend + c->pend_len, data, len);
	c->pend_len += len;
	return true;
}

/* Parses from data (which may be c->pend's own bytes) while a request can be
 * read. Leftover bytes go to (or stay in) c->pend. */
static void conn_parse(struct hconn *c, const char *data, size_t len, bool from_pend)
{
	while (len > 0 && (c->state == HC_IDLE || c->state == HC_READING)) {
		if (c->state == HC_IDLE) {
			c->state = HC_READING;
			c->head_start_ms = now_ms();
		}
		size_t took = feed(c, data, len);
		data += took;
		len -= took;
		if (from_pend) {
			c->pend_off += took;
			c->pend_len -= took;
		}
		enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
		if (c->reject) {
			conn_reject(c, c->reject, c->reject_code, c->reject_msg);
			break;
		}
		if (e == HPE_PAUSED) {
			http_parser_pause(&c->parser, 0);
			if (!from_pend && !pend_save(c, data, len)) {
				conn_reject(c, 503, "out_of_memory", "pacerd is out of memory");
				break;
			}
			dispatch_request(c);
			return;
		}
		if (e != HPE_OK) {
			if (e == HPE_HEADER_OVERFLOW)
				conn_reject(c, 431, "headers_too_large",
				            "the request line and header fields exceed "
				            "limits.max_header_bytes");
			else
				conn_reject(c, 400, "bad_request", parser_error_message(e));
			break;
		}
		if (took == 0)
			break;
	}
	/* A streamed body's head is complete: the owner has the request now,
	 * and its body follows as it arrives (stream_input). */
	if (c->state == HC_READING && c->req.streamed && !c->in_head) {
		dispatch_request(c);
		stream_moved(c);
		return;
	}
	if (c->state == HC_CLOSING || c->state == HC_LINGER) {
		c->pend_len = 0;
		c->pend_off = 0;
	}
}

static void conn_parse_pending(struct hconn *c)
{
	if (c->pend_len > 0 && (c->state == HC_IDLE || c->state == HC_READING))
		conn_parse(c, c->pend + c->pend_off, c->pend_len, true);
	if (c->pend_len == 0)
		c->pend_off = 0;
}

/* ---- connection I/O ---- */

static void set_read_mode(struct hconn *c, bool closed_only)
{
	if (c->rd_closed_only == closed_only)
		return;
	event_del(&c->rd);
	event_assign(&c->rd, c->h->base, c->fd,
	             (short)((closed_only ? 0 : EV_READ) | EV_CLOSED | EV_PERSIST), on_read, c);
	event_add(&c->rd, NULL);
	c->rd_closed_only = closed_only;
}

/* The client went away (or stopped reading for good). */
static void conn_gone(struct hconn *c)
{
	if (c->state == HC_DEAD)
		return;
	if (c->state == HC_ACTIVE) {
		const struct hreq_events *ev = c->req.ev;
		void *ctx = c->req.ctx;
		c->req.ev = NULL;
		c->req.ctx = NULL;
		c->state = HC_CLOSING; /* no more writes from the owner */
		c->h->n_active--;
		if (ev != NULL && ev->gone != NULL)
			ev->gone(ctx);
	}
	conn_close(c);
}

/* Plaintext from the client: parsed now, or kept for after the answer. */
static void conn_input(struct hconn *c, const char *data, size_t n)
{
	switch (c->state) {
	case HC_IDLE:
	case HC_READING:
		if (c->pend_len > 0) {
			if (!pend_save(c, data, (size_t)n)) {
				conn_reject(c, 503, "out_of_memory", "pacerd is out of memory");
				return;
			}
			conn_parse_pending(c);
		} else {
			conn_parse(c, data, (size_t)n, false);
		}
		if (c->state == HC_READING)
			conn_arm(c);
		break;
	case HC_ACTIVE:
		if (c->req.streamed && !c->req.body_done) {
			stream_input(c, data, n);
			break;
		}
		/* Pipelined: kept for after this answer, within a cap. */
		if (!pend_save(c, data, (size_t)n) || c->pend_len >= PENDING_CAP)
			set_read_mode(c, true);
		break;
	case HC_CLOSING:
	case HC_LINGER:
	case HC_DEAD:
		break; /* discarded: the connection is closing */
	}
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct hconn *c = arg;
	if (c->state == HC_DEAD)
		return;
	if (c->rd_closed_only) {
		(void)what;
		conn_gone(c);
		return;
	}
	ssize_t n = read(fd, c->h->scratch, sizeof(c->h->scratch));
	if (n <= 0 && c->ssl != NULL && !tls_conn_established(c->ssl) &&
	    (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))) {
		/* A client that gave up on the handshake (an untrusted
		 * certificate, often, closed without an alert). */
		tls_failed(c, n == 0 ? "closed by the client during the handshake"
		                     : "reset during the handshake");
		return;
	}
	if (n == 0) {
		conn_gone(c);
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			conn_gone(c);
		else if (c->ssl != NULL)
			tls_pump(c); /* woken for what the TLS session already holds */
		return;
	}
	c->last_read_ms = now_ms();
	if (c->ssl == NULL) {
		conn_input(c, c->h->scratch, (size_t)n);
		return;
	}
	if (c->state == HC_CLOSING || c->state == HC_LINGER)
		return; /* discarded, as in clear */
	if (tls_conn_feed(c->ssl, c->h->scratch, (size_t)n) != 0) {
		conn_gone(c);
		return;
	}
	tls_pump(c);
}

/* ---- terminated tunnels ---- */

/* A handshake that failed, timed out or was cut: counted, logged (the reason
 * and host, nothing the client sent), and the connection closed without an
 * answer, as no TLS session exists to carry one. */
static void tls_failed(struct hconn *c, const char *why)
{
	c->h->handshake_failures++;
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "tls_handshake_failed")) {
		log_str(&l, "host", c->tunnel_host);
		if (c->peer[0])
			log_str(&l, "peer", c->peer);
		log_str(&l, "reason", why);
		log_end(&l);
	}
	conn_close(c);
}

/* Runs the session on what it holds: handshake messages out, plaintext to the
 * parser, for as long as the connection takes input. */
static void tls_pump(struct hconn *c)
{
	while (c->ssl != NULL && !c->rd_closed_only &&
	       (c->state == HC_IDLE || c->state == HC_READING || c->state == HC_ACTIVE)) {
		size_t n = 0;
		bool done = false;
		enum tls_status st =
		    tls_conn_read(c->ssl, c->h->scratch, sizeof(c->h->scratch), &n, &done);
		if (done)
			c->h->handshakes++;
		size_t queued = evbuffer_get_length(c->tls_out);
		tls_conn_drain(c->ssl, c->tls_out);
		if (evbuffer_get_length(c->tls_out) > queued)
			conn_queue_flush(c);
		switch (st) {
		case TLS_DATA:
			conn_input(c, c->h->scratch, n);
			continue;
		case TLS_WANT:
			return;
		case TLS_CLOSED:
			conn_gone(c);
			return;
		case TLS_PLAINTEXT:
			/* Plain HTTP where a ClientHello belonged: a client that
			 * took the proxy for the origin. Told so in clear. */
			c->h->handshake_failures++;
			SSL_free(c->ssl);
			c->ssl = NULL;
			conn_reject(c, 400, "tls_expected",
			            "this tunnel expects a TLS ClientHello, not plain HTTP");
			return;
		case TLS_FAILED:
			if (!tls_conn_established(c->ssl)) {
				tls_failed(c, tls_conn_error());
			} else {
				conn_gone(c);
			}
			return;
		}
	}
}

void hreq_tunnel_tls(struct hreq *r, struct ssl_st *ssl, const char *host)
{
	struct hconn *c = r->conn;
	struct httpd *h = c->h;
	if (!writable(r) || r->started) {
		SSL_free(ssl);
		return;
	}
	if (c->tls_out == NULL && (c->tls_out = evbuffer_new()) == NULL) {
		SSL_free(ssl);
		hreq_close_after(r);
		hreq_error(r, 503, "out_of_memory", "pacerd is out of memory", NULL, 0);
		return;
	}
	snprintf(c->tunnel_host, sizeof(c->tunnel_host), "%s", host);
	tls_conn_expect_host(ssl, c->tunnel_host);
	/* The answer goes out in clear, before any byte of the session. */
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	evbuffer_add(c->tls_out, ok, sizeof(ok) - 1);
	count_response(h, 200);
	c->ssl = ssl;
	c->tls_notified = false;
	h->tunnels++;
	if (c->pend_len > 0) {
		/* A ClientHello sent without waiting for the 200: the session
		 * reads it on the next loop turn (not inside the owner's call). */
		if (tls_conn_feed(ssl, c->pend + c->pend_off, c->pend_len) != 0)
			c->close_after = true;
		c->pend_len = c->pend_off = 0;
		event_active(&c->rd, EV_READ, 1);
	}
	r->ev = NULL;
	r->ctx = NULL;
	h->n_active--;
	/* The handshake and the first request's head are one slow client's
	 * allowance: both within client_timeout_s from now. */
	int64_t now = now_ms();
	c->state = HC_READING;
	c->in_head = true;
	c->last = K_NONE;
	c->last_byte = '\n';
	c->head_start_ms = c->last_read_ms = c->last_write_ms = now;
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	conn_queue_flush(c);
	conn_arm(c);
}

/* The socket's bufferevent for a new owner, with r's pipelined plaintext in
 * the input of `top` (the socket's own, or the filter made over it later).
 * NULL when out of memory (nothing changed). */
static struct bufferevent *wire_new(struct hconn *c)
{
	struct bufferevent *wire = bufferevent_socket_new(c->h->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (wire == NULL)
		return NULL;
	if (c->ssl != NULL) {
		/* Ciphertext the session has not read yet: it reads it from the
		 * socket's input once the filter is over it. */
		char *data = NULL;
		long n = BIO_get_mem_data(SSL_get_rbio(c->ssl), &data);
		if (n > 0 && evbuffer_add(bufferevent_get_input(wire), data, (size_t)n) != 0) {
			bufferevent_free(wire);
			return NULL;
		}
	}
	return wire;
}

struct bufferevent *hreq_take_over(struct hreq *r, bool *gone)
{
	struct hconn *c = r->conn;
	*gone = false;
	if (!writable(r) || r->started || evbuffer_get_length(c->out) > 0)
		return NULL;
	struct evbuffer *plain = evbuffer_new();
	struct bufferevent *wire = plain != NULL ? wire_new(c) : NULL;
	if (wire == NULL ||
	    (c->pend_len > 0 && evbuffer_add(plain, c->pend + c->pend_off, c->pend_len) != 0)) {
		if (wire != NULL)
			bufferevent_free(wire);
		if (plain != NULL)
			evbuffer_free(plain);
		return NULL;
	}
	/* Past here the connection is the new owner's. */
	evutil_socket_t fd = c->fd;
	SSL *ssl = c->ssl;
	c->ssl = NULL;
	if (c->tls_out != NULL) /* the session's own bytes not written yet go first */
		evbuffer_add_buffer(bufferevent_get_output(wire), c->tls_out);
	conn_release(c, false);
	bufferevent_setfd(wire, fd);
	struct bufferevent *top = wire;
	if (ssl != NULL) {
		tls_conn_expect_host(ssl, NULL); /* the host's copy goes with the connection */
		top =
		    bufferevent_openssl_filter_new(c->h->base, wire, ssl, BUFFEREVENT_SSL_OPEN,
		                                   BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		if (top == NULL) { /* the SSL is freed with it */
			bufferevent_free(wire);
			evbuffer_free(plain);
			*gone = true;
			return NULL;
		}
		bufferevent_openssl_set_allow_dirty_shutdown(top, 1);
		/* The filter encrypts ahead at most HREQ_WIRE_CAP: what waits
		 * for a slow client waits in its own output, in plaintext. */
		bufferevent_setwatermark(wire, EV_WRITE, HREQ_WIRE_CAP / 4, HREQ_WIRE_CAP);
		bufferevent_setwatermark(wire, EV_READ, 0, READ_CHUNK);
	}
	evbuffer_add_buffer(bufferevent_get_input(top), plain);
	evbuffer_free(plain);
	return top;
}

const char *hreq_tunnel_host(const struct hreq *r)
{
	return r->conn->ssl != NULL ? r->conn->tunnel_host : NULL;
}

/* Moves the plaintext output through the TLS session into tls_out, in
 * records of up to TLS_RECORD bytes (an SSE chunk's size line, data and CRLF
 * are one record, not three). -1 on a TLS failure. */
static int tls_encrypt(struct hconn *c)
{
	if (!tls_conn_established(c->ssl))
		return 0; /* nothing of the owner's can be there before the handshake */
	size_t len;
	while ((len = evbuffer_get_length(c->out)) > 0) {
		if (len > TLS_RECORD)
			len = TLS_RECORD;
		int got = evbuffer_remove(c->out, c->h->tls_plain, len);
		if (got <= 0 || tls_conn_write(c->ssl, c->h->tls_plain, (size_t)got) != 0)
			return -1;
	}
	tls_conn_drain(c->ssl, c->tls_out);
	return 0;
}

static void conn_write(struct hconn *c)
{
	if (c->state == HC_DEAD)
		return;
	struct evbuffer *wire = c->out;
	if (c->ssl != NULL) {
		if (tls_encrypt(c) != 0) {
			conn_gone(c);
			return;
		}
		wire = c->tls_out;
	} else if (c->tls_out != NULL && evbuffer_get_length(c->tls_out) > 0) {
		/* TLS given up for a plain answer: what was queued goes first. */
		evbuffer_add_buffer(c->tls_out, c->out);
		wire = c->tls_out;
	}
	size_t before = evbuffer_get_length(wire);
	if (before > 0) {
		int n = evbuffer_write(wire, c->fd);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			conn_gone(c);
			return;
		}
		if (n > 0)
			c->last_write_ms = now_ms();
	}
	size_t left = out_len(c);
	if (left > 0 && !c->wr_added) {
		event_add(&c->wr, NULL);
		c->wr_added = true;
		conn_arm(c);
	} else if (left == 0 && c->wr_added) {
		event_del(&c->wr);
		c->wr_added = false;
	}
	if (c->state == HC_ACTIVE && c->req.full && left < OUT_LOW) {
		c->req.full = false;
		if (c->req.ev != NULL && c->req.ev->drained != NULL)
			c->req.ev->drained(c->req.ctx);
		return; /* the owner may have written more: flushed on its own */
	}
	if (left > 0)
		return;
	if (c->state == HC_CLOSING && c->ssl != NULL && !c->tls_notified) {
		/* A TLS client told the end, so it can tell it from a cut. */
		c->tls_notified = true;
		tls_conn_close_notify(c->ssl);
		tls_conn_drain(c->ssl, c->tls_out);
		if (evbuffer_get_length(c->tls_out) > 0) {
			conn_write(c);
			return;
		}
	}
	if (c->state == HC_CLOSING) {
		/* Lingering close: stop sending, keep reading a little so that a
		 * client still sending its body does not reset the answer away. */
		shutdown(c->fd, SHUT_WR);
		c->state = HC_LINGER;
		c->linger_start_ms = now_ms();
		set_read_mode(c, false);
		conn_arm(c);
	}
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_write(arg);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct httpd *h = arg;
	(void)fd;
	(void)what;
	/* The first each time: writing may close (and unlink) any other. */
	struct list *first;
	while ((first = list_first(&h->flushq)) != NULL) {
		struct hconn *c = LIST_ITEM(first, struct hconn, flush_link);
		list_remove(first);
		c->flush_queued = false;
		conn_write(c);
		/* Pipelined requests go on once the answer before them ended
		 * and its client keeps up. */
		if ((c->state == HC_IDLE || c->state == HC_READING) && out_len(c) < HREQ_OUT_CAP) {
			if (c->rd_closed_only && c->pend_len < PENDING_CAP)
				set_read_mode(c, false);
			conn_parse_pending(c);
			/* Plaintext the session holds wakes no read event. */
			if (c->ssl != NULL && (c->state == HC_IDLE || c->state == HC_READING) &&
			    !c->rd_closed_only && tls_conn_pending(c->ssl))
				tls_pump(c);
			if (c->state == HC_IDLE || c->state == HC_READING)
				conn_arm(c);
		}
	}
}

static void conn_queue_flush(struct hconn *c)
{
	if (c->flush_queued || c->state == HC_DEAD)
		return;
	struct httpd *h = c->h;
	c->flush_queued = true;
	list_insert_tail(&h->flushq, &c->flush_link);
	event_active(h->flush_ev, EV_TIMEOUT, 1);
}

/* ---- timeouts ---- */

/* A body trickled in to hold a connection (slow-body slowloris) keeps moving,
 * so a deadline per read never fires. It must also arrive at BODY_MIN_RATE
 * on average after a grace of client_timeout_s: a 10 MiB upload may take 160 s
 * more, one byte a second is cut at the timeout (Apache's mod_reqtimeout
 * MinRate; nginx has only the per-read timeout). */
#define BODY_MIN_RATE (64 * 1024) /* bytes per second */

static int64_t body_deadline(const struct hconn *c, int64_t t)
{
	int64_t by_read = c->last_read_ms + t;
	int64_t by_rate = c->body_start_ms + t + (int64_t)(c->req.body_len * 1000 / BODY_MIN_RATE);
	return by_read < by_rate ? by_read : by_rate;
}

static int64_t conn_deadline(const struct hconn *c)
{
	int64_t t = (int64_t)c->h->conf.client_timeout_s * 1000;
	switch (c->state) {
	case HC_IDLE:
		return c->last_write_ms + t;
	case HC_READING:
		/* The head must be complete within the timeout of its first
		 * byte (slowloris); a body must keep moving, and come at a
		 * minimum rate (body_deadline). */
		return c->in_head ? c->head_start_ms + t : body_deadline(c, t);
	case HC_ACTIVE:
	case HC_CLOSING: {
		/* Only a write that makes no progress counts; an answer that
		 * is still being produced is the owner's business. A streamed
		 * body being read must keep moving (not at a minimum rate: the
		 * upstream sets its pace). */
		int64_t w = out_len(c) > 0 ? c->last_write_ms + t : 0;
		int64_t b = stream_reading(c) ? c->last_read_ms + t : 0;
		return w == 0 || (b != 0 && b < w) ? b : w;
	}
	case HC_LINGER:
		if (c->linger_upload) {
			/* While the upload keeps coming, up to client_timeout_s. */
			int64_t last = c->last_read_ms > c->linger_start_ms ? c->last_read_ms
			                                                    : c->linger_start_ms;
			int64_t quiet = last + LINGER_MS, most = c->linger_start_ms + t;
			return quiet < most ? quiet : most;
		}
		return c->linger_start_ms + LINGER_MS;
	case HC_DEAD:
		break;
	}
	return 0;
}

static void timer_set(struct hconn *c, int64_t at, int64_t now)
{
	int64_t d = at > now ? at - now : 0;
	struct timeval tv = {(time_t)(d / 1000), (suseconds_t)((d % 1000) * 1000)};
	evtimer_add(&c->timer, &tv);
	c->timer_at = at;
}

/* Arms the timer for the current deadline unless it already fires earlier. */
static void conn_arm(struct hconn *c)
{
	int64_t at = conn_deadline(c);
	if (at == 0 || (c->timer_at != 0 && c->timer_at <= at))
		return;
	timer_set(c, at, now_ms());
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct hconn *c = arg;
	(void)fd;
	(void)what;
	c->timer_at = 0;
	if (c->state == HC_DEAD)
		return;
	int64_t now = now_ms();
	int64_t at = conn_deadline(c);
	if (at == 0)
		return; /* nothing to time now; re-armed on the next state change */
	if (at > now) {
		timer_set(c, at, now);
		return;
	}
	switch (c->state) {
	case HC_IDLE:
	case HC_LINGER:
	case HC_CLOSING:
		conn_close(c);
		break;
	case HC_READING:
		if (c->ssl != NULL && !tls_conn_established(c->ssl)) {
			tls_failed(c, "handshake not complete within limits.client_timeout_s");
			break;
		}
		conn_reject(c, 408, "request_timeout",
		            "the request was not complete within limits.client_timeout_s");
		break;
	case HC_ACTIVE:
		if (stream_reading(c) &&
		    c->last_read_ms + (int64_t)c->h->conf.client_timeout_s * 1000 <= now) {
			/* The client stopped sending its upload: the owner answers. */
			stream_fail(c, 408, "request_timeout",
			            "the upload stopped for limits.client_timeout_s");
			stream_moved(c);
			break;
		}
		conn_gone(c); /* the client stopped reading */
		break;
	case HC_DEAD:
		break;
	}
}

/* ---- connections ---- */

static void update_listener(struct httpd *h)
{
	if (h->listener == NULL || h->closing || h->accept_backoff)
		return;
	bool full = h->conf.max_connections > 0 && h->n_conns >= h->conf.max_connections;
	if (full && !h->listener_paused) {
		evconnlistener_disable(h->listener);
		h->listener_paused = true;
	} else if (!full && h->listener_paused) {
		evconnlistener_enable(h->listener);
		h->listener_paused = false;
	}
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct httpd *h = arg;
	(void)fd;
	(void)what;
	struct list *first;
	while ((first = list_first(&h->reaped)) != NULL) {
		struct hconn *c = LIST_ITEM(first, struct hconn, link);
		list_remove(first);
		c->reap_queued = false;
		if (!pool_put(&h->pool, c))
			conn_destroy(c);
	}
}

static void conn_close(struct hconn *c)
{
	conn_release(c, true);
}

/* Closes (or, close_fd false, forgets) the connection; reaped next turn. */
static void conn_release(struct hconn *c, bool close_fd)
{
	struct httpd *h = c->h;
	if (c->state == HC_DEAD)
		return;
	if (c->state == HC_ACTIVE) {
		h->n_active--;
		c->req.ev = NULL;
		c->req.ctx = NULL;
	}
	c->state = HC_DEAD;
	event_del(&c->rd);
	if (c->wr_added)
		event_del(&c->wr);
	evtimer_del(&c->timer);
	c->rd_added = c->wr_added = false;
	c->timer_at = 0;
	if (close_fd)
		close(c->fd);
	c->fd = -1;
	evbuffer_drain(c->out, evbuffer_get_length(c->out));
	if (c->ssl != NULL) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->tls_out != NULL)
		evbuffer_drain(c->tls_out, evbuffer_get_length(c->tls_out));
	req_reset(&c->req);
	c->pend_len = c->pend_off = 0;
	if (c->pend_cap > KEEP_HEAD_BYTES) {
		free(c->pend);
		c->pend = NULL;
		c->pend_cap = 0;
	}
	/* Off the flush queue now, rather than skipped there later: a pooled
	 * (or reused) connection is on no queue. */
	if (c->flush_queued) {
		list_remove(&c->flush_link);
		c->flush_queued = false;
	}
	list_remove(&c->link);
	h->n_conns--;
	list_insert_head(&h->reaped, &c->link);
	c->reap_queued = true;
	event_active(h->reap_ev, EV_TIMEOUT, 1);
	update_listener(h);
}

static struct hconn *conn_get(struct httpd *h)
{
	struct hconn *c = pool_get(&h->pool);
	if (c != NULL)
		return c;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->out = evbuffer_new();
	if (c->out == NULL) {
		free(c);
		return NULL;
	}
	c->h = h;
	c->req.conn = c;
	c->req.method = "";
	return c;
}

static void conn_destroy(void *obj)
{
	struct hconn *c = obj;
	free(c->req.head);
	free(c->req.hdrs);
	free(c->req.body);
	if (c->req.stream != NULL)
		evbuffer_free(c->req.stream);
	free(c->pend);
	evbuffer_free(c->out);
	if (c->tls_out != NULL)
		evbuffer_free(c->tls_out);
	free(c);
}

/* The address without the port: one machine (or container) is one client,
 * whatever connections its pool opens. */
static void format_peer(const struct sockaddr *sa, char *out, size_t len)
{
	out[0] = '\0';
	if (sa == NULL)
		return;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
		          (socklen_t)len);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
		          out, (socklen_t)len);
}

static int adopt(struct httpd *h, evutil_socket_t fd, const struct sockaddr *peer)
{
	struct hconn *c = conn_get(h);
	if (c == NULL) {
		close(fd);
		return -1;
	}
	format_peer(peer, c->peer, sizeof(c->peer));
	c->fd = fd;
	c->state = HC_IDLE;
	c->rd_closed_only = false;
	c->close_after = false;
	c->linger_upload = false;
	c->flush_queued = c->reap_queued = false;
	c->last = K_NONE;
	c->in_head = true;
	c->last_byte = '\n';
	c->reject = 0;
	c->pend_len = c->pend_off = 0;
	c->timer_at = 0;
	c->ssl = NULL;
	c->tunnel_host[0] = '\0';
	c->tls_notified = false;
	int64_t now = now_ms();
	c->head_start_ms = c->last_read_ms = c->last_write_ms = now;
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	event_assign(&c->rd, h->base, fd, EV_READ | EV_CLOSED | EV_PERSIST, on_read, c);
	event_assign(&c->wr, h->base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
	evtimer_assign(&c->timer, h->base, on_timer, c);
	c->rd_added = event_add(&c->rd, NULL) == 0;
	c->wr_added = false;
	list_insert_head(&h->conns, &c->link);
	h->n_conns++;
	h->accepted++;
	conn_arm(c);
	update_listener(h);
	return 0;
}

int httpd_adopt(struct httpd *h, evutil_socket_t fd)
{
	return adopt(h, fd, NULL);
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
	struct httpd *h = arg;
	(void)lev;
	(void)len;
	if (h->closing) {
		close(fd);
		return;
	}
	adopt(h, fd, sa);
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	struct httpd *h = arg;
	(void)fd;
	(void)what;
	h->accept_backoff = false;
	if (h->listener != NULL && !h->closing) {
		evconnlistener_enable(h->listener);
		h->listener_paused = false;
		update_listener(h);
	}
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct httpd *h = arg;
	int err = EVUTIL_SOCKET_ERROR();
	/* Out of fds (EMFILE/ENFILE) or memory: the listening socket stays
	 * readable, so pause accepting for a moment instead of spinning. */
	struct log_line l;
	if (log_begin(&l, LOG_WARN, "accept_error")) {
		log_str(&l, "message", evutil_socket_error_to_string(err));
		log_end(&l);
	}
	evconnlistener_disable(lev);
	h->accept_backoff = true;
	struct timeval tv = {0, 100 * 1000};
	evtimer_add(h->accept_retry, &tv);
}

static int bind_listener(struct httpd *h, const char *listen, char *err, size_t errlen)
{
	char host[256];
	unsigned port;
	if (config_split_hostport(listen, host, sizeof(host), &port) != 0) {
		snprintf(err, errlen, "listen: invalid address '%s'", listen);
		return -1;
	}
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	socklen_t sslen;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	const char *a = host[0] ? host : "0.0.0.0";
	if (strcmp(a, "localhost") == 0)
		a = "127.0.0.1";
	if (inet_pton(AF_INET, a, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		sslen = sizeof(*sin);
	} else if (inet_pton(AF_INET6, a, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		sslen = sizeof(*sin6);
	} else {
		snprintf(err, errlen, "listen: '%s' is not an IP address", a);
		return -1;
	}
	h->listener = evconnlistener_new_bind(h->base, on_accept, h,
	                                      LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE |
	                                          LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_DISABLED,
	                                      LISTEN_BACKLOG, (struct sockaddr *)&ss, (int)sslen);
	if (h->listener == NULL) {
		snprintf(err, errlen, "listen %s: %s", listen,
		         evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		return -1;
	}
	/* TCP_NODELAY on the listening socket is inherited by every accepted one
	 * (Linux): SSE chunks are small and must not wait for Nagle. */
	int one = 1;
	setsockopt(evconnlistener_get_fd(h->listener), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	evconnlistener_set_error_cb(h->listener, on_accept_error);
	evconnlistener_enable(h->listener);
	return 0;
}

/* libhttp-parser's header limit is one for the process: the largest any
 * server asks for; each server checks its own (over_header_limit). */
static void raise_parser_limit(size_t max_header_bytes)
{
	static uint32_t global;
	uint32_t want =
	    max_header_bytes > UINT32_MAX - 1024 ? UINT32_MAX : (uint32_t)max_header_bytes + 1024;
	if (want > global) {
		global = want;
		http_parser_set_max_header_size(want);
	}
}

struct httpd *httpd_new(struct event_base *base, const char *listen, const struct httpd_conf *conf,
                        httpd_request_fn on_request, void *arg, char *err, size_t errlen)
{
	struct httpd *h = calloc(1, sizeof(*h));
	if (h == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	list_init(&h->flushq);
	list_init(&h->reaped);
	list_init(&h->conns);
	pool_init(&h->pool, offsetof(struct hconn, link), 0);
	h->base = base;
	h->conf = *conf;
	h->on_request = on_request;
	h->arg = arg;
	h->id_prefix = (unsigned)arc4random();
	h->flush_ev = event_new(base, -1, 0, on_flush, h);
	h->reap_ev = event_new(base, -1, 0, on_reap, h);
	h->accept_retry = evtimer_new(base, on_accept_retry, h);
	if (h->flush_ev == NULL || h->reap_ev == NULL || h->accept_retry == NULL) {
		snprintf(err, errlen, "out of memory");
		httpd_free(h);
		return NULL;
	}
	raise_parser_limit(conf->max_header_bytes);
	if (listen != NULL && bind_listener(h, listen, err, errlen) != 0) {
		httpd_free(h);
		return NULL;
	}
	return h;
}

void httpd_set_conf(struct httpd *h, const struct httpd_conf *conf)
{
	h->conf = *conf;
	raise_parser_limit(conf->max_header_bytes);
	update_listener(h);
}

void httpd_set_streaming(struct httpd *h, httpd_stream_fn fn, void *arg)
{
	h->streams = fn;
	h->streams_arg = arg;
}

void httpd_shutdown(struct httpd *h)
{
	h->closing = true;
	/* Close the listening socket: a disabled listener would still complete
	 * handshakes from its backlog, and those clients would wait for nothing. */
	if (h->listener != NULL) {
		evconnlistener_free(h->listener);
		h->listener = NULL;
	}
	evtimer_del(h->accept_retry);
	/* Idle keep-alive connections stay open: a request that was already on
	 * its way gets a clear 503 from the owner rather than a reset. */
}

void httpd_free(struct httpd *h)
{
	if (h == NULL)
		return;
	struct list *first;
	while ((first = list_first(&h->conns)) != NULL)
		conn_gone(LIST_ITEM(first, struct hconn, link));
	on_reap(-1, 0, h);
	pool_trim(&h->pool, true, conn_destroy);
	if (h->listener != NULL)
		evconnlistener_free(h->listener);
	if (h->flush_ev != NULL)
		event_free(h->flush_ev);
	if (h->reap_ev != NULL)
		event_free(h->reap_ev);
	if (h->accept_retry != NULL)
		event_free(h->accept_retry);
	free(h);
}

size_t httpd_trim(struct httpd *h, bool all)
{
	return pool_trim(&h->pool, all, conn_destroy);
}

void httpd_get_stats(const struct httpd *h, struct httpd_stats *st)
{
	memcpy(st->responses, h->responses, sizeof(st->responses));
	st->accepted = h->accepted;
	st->connections = h->n_conns;
	st->active = h->n_active;
	st->busy = 0;
	st->tunnels = h->tunnels;
	st->handshakes = h->handshakes;
	st->handshake_failures = h->handshake_failures;
	st->tunnel_requests = h->tunnel_requests;
	st->tunnels_open = 0;
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &h->conns) {
		const struct hconn *c = LIST_ITEM(node, struct hconn, link);
		st->tunnels_open += c->ssl != NULL;
		if (c->state == HC_READING || c->state == HC_ACTIVE ||
		    (c->state == HC_CLOSING && out_len(c) > 0) ||
		    (c->state == HC_IDLE && c->pend_len > 0))
			st->busy++;
	}
}

/* ---- the request, read side ---- */

const char *hreq_method(const struct hreq *r)
{
	return r->method;
}

const char *hreq_target(const struct hreq *r)
{
	return r->head;
}

size_t hreq_target_len(const struct hreq *r)
{
	return r->target_len;
}

const char *hreq_header(const struct hreq *r, const char *name)
{
	return find_header(r, name, strlen(name));
}

size_t hreq_n_headers(const struct hreq *r)
{
	return r->n_hdrs;
}

void hreq_header_at(const struct hreq *r, size_t i, struct hhdr *out)
{
	const struct hoff *o = &r->hdrs[i];
	out->name = r->head + o->name;
	out->name_len = o->name_len;
	out->value = r->head + o->value;
	out->value_len = o->value_len;
}

const char *hreq_body(const struct hreq *r, size_t *len)
{
	*len = r->body_len;
	return r->body_len ? r->body : NULL;
}

bool hreq_streamed(const struct hreq *r)
{
	return r->streamed;
}

int64_t hreq_body_size(const struct hreq *r)
{
	return r->body_size;
}

enum hreq_body hreq_body_read(struct hreq *r, char *buf, size_t cap, size_t *n)
{
	struct hconn *c = r->conn;
	*n = 0;
	if (!r->streamed || !writable(r) || r->body_fail != 0)
		return HREQ_BODY_FAILED;
	if (r->continue_owed) {
		/* Only to a client still waiting: none of its body came yet. */
		r->continue_owed = false;
		if (!r->started && r->stream_in == 0) {
			evbuffer_add(c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
			conn_queue_flush(c);
		}
	}
	size_t k = stream_unread(r) < cap ? stream_unread(r) : cap;
	if (k > 0) {
		struct evbuffer_ptr at;
		evbuffer_ptr_set(r->stream, &at, r->stream_off, EVBUFFER_PTR_SET);
		ev_ssize_t got = evbuffer_copyout_from(r->stream, &at, buf, k);
		if (got < 0)
			return HREQ_BODY_FAILED;
		r->stream_off += (size_t)got;
		*n = (size_t)got;
		if (r->stream_in > HREQ_BODY_CAP || r->body_size > HREQ_BODY_CAP) {
			/* Too large to hold whole: what was read goes. */
			evbuffer_drain(r->stream, r->stream_off);
			r->stream_off = 0;
			r->body_dropped = true;
		}
	}
	if (c->rd_closed_only && !r->body_done && stream_unread(r) < HREQ_BODY_CAP / 2) {
		/* Room again: read the client, which must keep sending from now
		 * on; plaintext a TLS session holds is read on the next turn. */
		set_read_mode(c, false);
		c->last_read_ms = now_ms();
		conn_arm(c);
		if (c->ssl != NULL)
			event_active(&c->rd, EV_READ, 1);
	}
	return *n == 0 && r->body_done && stream_unread(r) == 0 ? HREQ_BODY_END : HREQ_BODY_MORE;
}

bool hreq_body_rewindable(const struct hreq *r)
{
	return r->streamed && !r->body_dropped && r->body_fail == 0;
}

bool hreq_body_rewind(struct hreq *r)
{
	if (!hreq_body_rewindable(r))
		return false;
	r->stream_off = 0;
	return true;
}

bool hreq_body_failure(const struct hreq *r, int *status, const char **code, const char **message)
{
	if (!r->streamed || r->body_fail == 0)
		return false;
	*status = r->body_fail;
	*code = r->body_fail_code;
	*message = r->body_fail_msg;
	return true;
}

const char *hreq_id(const struct hreq *r)
{
	return r->id;
}

const char *hreq_peer(const struct hreq *r)
{
	return r->conn->peer;
}

/* ---- the response ---- */

static bool writable(const struct hreq *r)
{
	return r->conn->state == HC_ACTIVE;
}

void hreq_set_events(struct hreq *r, const struct hreq_events *ev, void *ctx)
{
	r->ev = ev;
	r->ctx = ctx;
}

void hreq_close_after(struct hreq *r)
{
	r->keep_alive = false;
}

bool hreq_client_left(struct hreq *r)
{
	struct hconn *c = r->conn;
	if (c->state != HC_ACTIVE)
		return false;
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0 || (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
		return false;
	conn_gone(c); /* EOF, or an error such as a reset */
	return true;
}

void hreq_start(struct hreq *r, int status, const char *reason, const struct hhdr *h, size_t n)
{
	struct hconn *c = r->conn;
	if (!writable(r) || r->started)
		return;
	r->started = true;
	if (c->h->closing)
		r->keep_alive = false;
	r->no_body =
	    r->head_method || (status >= 100 && status < 200) || status == 204 || status == 304;
	bool has_length = false;
	struct headbuf hb = {.len = 0, .out = c->out};
	hb_status(&hb, status, reason);
	for (size_t i = 0; i < n; i++) {
		if (name_is(h[i].name, h[i].name_len, "connection", 10) ||
		    name_is(h[i].name, h[i].name_len, "transfer-encoding", 17))
			continue;
		if (name_is(h[i].name, h[i].name_len, "content-length", 14))
			has_length = true;
		hb_field(&hb, h[i].name, h[i].name_len, h[i].value, h[i].value_len);
	}
	if (!r->no_body && !has_length) {
		if (r->minor >= 1)
			r->chunked = true;
		else
			r->keep_alive = false; /* HTTP/1.0: the body ends with the connection */
	}
	if (r->chunked)
		hb_str(&hb, "transfer-encoding: chunked\r\n");
	if (!r->keep_alive)
		hb_str(&hb, "connection: close\r\n");
	else if (r->minor == 0)
		hb_str(&hb, "connection: keep-alive\r\n");
	hb_put(&hb, "\r\n", 2);
	hb_done(&hb);
	count_response(c->h, status);
	conn_queue_flush(c);
}

bool hreq_write(struct hreq *r, const char *data, size_t len)
{
	struct hconn *c = r->conn;
	if (!writable(r))
		return true;
	if (!r->started)
		hreq_start(r, 200, NULL, NULL, 0);
	if (len > 0 && !r->no_body) {
		if (r->chunked) {
			char line[24];
			size_t n = put_hex(line, len, 1);
			line[n++] = '\r';
			line[n++] = '\n';
			evbuffer_add(c->out, line, n);
			evbuffer_add(c->out, data, len);
			evbuffer_add(c->out, "\r\n", 2);
		} else {
			evbuffer_add(c->out, data, len);
		}
		conn_queue_flush(c);
	}
	if (out_len(c) >= HREQ_OUT_CAP) {
		r->full = true;
		return false;
	}
	return true;
}

void hreq_end(struct hreq *r, bool complete)
{
	struct hconn *c = r->conn;
	if (!writable(r))
		return;
	if (!r->started)
		hreq_start(r, complete ? 200 : 502, NULL, NULL, 0);
	if (complete && r->chunked)
		evbuffer_add(c->out, "0\r\n\r\n", 5);
	r->ev = NULL;
	r->ctx = NULL;
	c->h->n_active--;
	bool upload_cut = r->streamed && !r->body_done;
	if (!complete || !r->keep_alive || c->h->closing || c->close_after || upload_cut) {
		c->state = HC_CLOSING;
		c->linger_upload = upload_cut;
		c->pend_len = c->pend_off = 0;
	} else {
		c->state = HC_IDLE; /* r stays readable until the next request begins */
	}
	c->last_write_ms = now_ms();
	conn_queue_flush(c);
	conn_arm(c);
}

void hreq_error(struct hreq *r, int status, const char *code, const char *message,
                const struct hhdr *extra, size_t n)
{
	struct hconn *c = r->conn;
	if (!writable(r))
		return;
	if (r->started) {
		hreq_end(r, false); /* too late for an answer of its own: cut */
		return;
	}
	r->started = true;
	if (c->h->closing)
		r->keep_alive = false;
	put_error(c, status, code, message, r->id, extra, n,
	          !r->keep_alive  ? "close"
	          : r->minor == 0 ? "keep-alive"
	                          : NULL);
	conn_queue_flush(c);
	hreq_end(r, true);
}

void hreq_respond(struct hreq *r, int status, const struct hhdr *h, size_t n, const char *body,
                  size_t len)
{
	struct hhdr all[32];
	char num[24];
	if (n > 31)
		n = 31;
	if (n > 0)
		memcpy(all, h, n * sizeof(*h));
	all[n] = (struct hhdr){"content-length", 14, num, hhdr_u64(num, len)};
	hreq_start(r, status, NULL, all, n + 1);
	if (len > 0)
		hreq_write(r, body, len);
	hreq_end(r, true);
}
