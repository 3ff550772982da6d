/* SPDX-License-Identifier: Apache-2.0 */
/* httpd — pacerd's HTTP/1.1 server layer on libevent: the listener, client
 * connections, request parsing (libhttp-parser, strict), the bytes of every
 * answer, limits and client timeouts. It knows nothing of providers, lanes or
 * upstreams: a complete request is handed to the owner's callback, and the
 * owner answers through the hreq_* functions below (the seam; the exchange
 * uses nothing else of the client side).
 *
 * A connection carries one request at a time. Pipelined requests wait in its
 * input until the answer to the one before has ended, so answers go out in
 * order. What the layer answers by itself, always as pacerd's JSON error body
 * and then closing the connection: malformed requests and smuggling attempts
 * (400 bad_request), a request line or header block over max_header_bytes
 * (431 headers_too_large), a body over max_body_bytes (413 body_too_large,
 * before the body is read when Content-Length announces it), an unknown
 * expectation (417), a request not complete within client_timeout_s (408).
 *
 * A streamed body (httpd_set_streaming: uploads, which pacerd never parses)
 * is not read first: the request is handed over as soon as its head is
 * complete, and the owner reads the body in pieces as it arrives
 * (hreq_body_read, told by events->body). At most HREQ_BODY_CAP unread bytes
 * are buffered; past that the connection is not read until the owner has
 * taken some (TCP slows the client down). max_upload_bytes replaces
 * max_body_bytes for it, and an Expect: 100-continue is answered when the
 * owner first asks for the body, not before. What goes wrong once the owner
 * has the request (a bad chunk, the upload over its cap, a client that stops
 * sending for client_timeout_s) is not answered by the layer: the body
 * fails (hreq_body_failure says with what answer) and the owner answers. An
 * answer that ends before the body does closes the connection after a
 * lingering close that lasts while the client keeps sending (up to
 * client_timeout_s), so a client that writes its whole body before reading
 * still gets the answer.
 *
 * Life of an hreq: handed to on_request; the owner starts, writes and ends the
 * response (or answers with hreq_error / hreq_respond). After the response
 * ended, or after events->gone ran, the hreq belongs to the layer again: the
 * owner must drop its pointer, and everything read through it (target,
 * headers, body) is gone. */
#ifndef PACERD_HTTPD_H
#define PACERD_HTTPD_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HREQ_ID_MAX 128
/* The host of a CONNECT tunnel (a DNS name, or an IP literal). */
#define HREQ_HOST_MAX 255

/* Bytes waiting for a client above which hreq_write asks the writer to pause:
 * the memory a slow reader can pin is about this plus one upstream buffer. */
#define HREQ_OUT_CAP (256 * 1024)
/* A streamed body's unread bytes above which its connection is not read; a
 * body no larger than this is also held whole after it was read, so that it
 * can be read again (hreq_body_rewind). The memory a streamed upload pins is
 * about this plus one read (64 KiB). */
#define HREQ_BODY_CAP (256 * 1024)

struct httpd;
struct hreq;
struct ssl_st; /* OpenSSL's SSL */

struct httpd_conf {
	size_t max_header_bytes;   /* request line and header fields (431 above) */
	uint64_t max_body_bytes;   /* request body read whole (413 above) */
	uint64_t max_upload_bytes; /* a streamed body (413 above); 0: no limit */
	size_t max_connections;    /* accepting pauses at this many open connections */
	unsigned client_timeout_s; /* idle keep-alive, slow request, stuck write */
};

/* One header field; name and value need not be NUL-terminated. */
struct hhdr {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* The decimal digits of v for a header value (buf: at least 21 bytes, not
 * NUL-terminated); returns their count. No printf on the request path. */
size_t hhdr_u64(char *buf, uint64_t v);

struct hreq_events {
	/* The output fell back under its cap after hreq_write returned false. */
	void (*drained)(void *ctx);
	/* The client closed or reset its connection, or stopped reading for
	 * client_timeout_s, before the response ended. The hreq is gone. */
	void (*gone)(void *ctx);
	/* A streamed body moved: bytes arrived, it ended, or it failed
	 * (hreq_body_read says which). The owner may answer from here. */
	void (*body)(void *ctx);
};

struct httpd_stats {
	uint64_t responses[6];       /* answers by status class: [2] = 2xx … */
	uint64_t accepted;           /* connections, since start */
	size_t connections;          /* open now */
	size_t active;               /* requests with the owner now */
	size_t busy;                 /* connections reading a request or writing an answer (O(n)) */
	uint64_t tunnels;            /* CONNECTs turned into terminated tunnels, since start */
	uint64_t handshakes;         /* TLS handshakes completed in them */
	uint64_t handshake_failures; /* failed, cut or timed out before completing */
	uint64_t tunnel_requests;    /* requests read inside tunnels */
	size_t tunnels_open;         /* connections in TLS now (O(n)) */
};

typedef void (*httpd_request_fn)(struct hreq *r, void *arg);
/* Whether r's body is streamed: asked once r's head is complete, only when a
 * body follows (a Content-Length above 0, or chunked), before a byte of it is
 * read. r's method, target, fields and tunnel host are readable; it must not
 * answer r. */
typedef bool (*httpd_stream_fn)(const struct hreq *r, void *arg);

/* Listens on `listen` (an IP literal and port; "localhost" = 127.0.0.1);
 * listen NULL: no listener (connections come through httpd_adopt). NULL with
 * err set on failure. */
struct httpd *httpd_new(struct event_base *base, const char *listen, const struct httpd_conf *conf,
                        httpd_request_fn on_request, void *arg, char *err, size_t errlen);
/* New limits, from the next request on. */
void httpd_set_conf(struct httpd *h, const struct httpd_conf *conf);
/* Which bodies are streamed (fn NULL: none, the default). */
void httpd_set_streaming(struct httpd *h, httpd_stream_fn fn, void *arg);
/* Serves an already connected, non-blocking socket (tests, the fuzzer). */
int httpd_adopt(struct httpd *h, evutil_socket_t fd);
/* Graceful stop: the listening socket is closed and every later answer
 * carries `connection: close` (idle keep-alive connections stay open until
 * the owner frees the server: a request already on its way gets an answer). */
void httpd_shutdown(struct httpd *h);
/* Closes every connection at once; requests with the owner get events->gone. */
void httpd_free(struct httpd *h);
/* Frees the pooled connections that no request needed since the last call
 * (the pool's low-water mark), so that the pool follows recent demand rather
 * than the highest concurrency ever seen; all: every pooled one. Returns how
 * many. */
size_t httpd_trim(struct httpd *h, bool all);
void httpd_get_stats(const struct httpd *h, struct httpd_stats *st);
/* The standard reason phrase of a status ("" when unknown). */
const char *httpd_reason(int status);

/* ---- the request ---- */
const char *hreq_method(const struct hreq *r); /* "GET", "POST", … */
const char *hreq_target(const struct hreq *r); /* as sent: origin or absolute form */
size_t hreq_target_len(const struct hreq *r);
/* The first field of that name (case-insensitive), NUL-terminated; NULL. */
const char *hreq_header(const struct hreq *r, const char *name);
size_t hreq_n_headers(const struct hreq *r);
/* Field i in arrival order; name and value are NUL-terminated. */
void hreq_header_at(const struct hreq *r, size_t i, struct hhdr *out);
/* The whole body, de-chunked (NULL and 0 when there is none, or when it is
 * streamed). */
const char *hreq_body(const struct hreq *r, size_t *len);

/* ---- a streamed body ---- */
/* Whether r's body is streamed (httpd_set_streaming). */
bool hreq_streamed(const struct hreq *r);
/* Its declared length (Content-Length), or -1 when chunked. */
int64_t hreq_body_size(const struct hreq *r);
enum hreq_body {
	HREQ_BODY_MORE,   /* *n bytes read (0: none yet; events->body when some come) */
	HREQ_BODY_END,    /* every byte has been read (*n 0) */
	HREQ_BODY_FAILED, /* it will not arrive whole: hreq_body_failure */
};
/* Copies up to cap of the body's next bytes to buf (*n: how many). The
 * first call sends the 100 Continue a client waits for. */
enum hreq_body hreq_body_read(struct hreq *r, char *buf, size_t cap, size_t *n);
/* Whether the body can be read again from its first byte: every byte read so
 * far is still held. A body of at most HREQ_BODY_CAP is held whole; a larger
 * one (by its Content-Length, or once that much of it came) only until the
 * owner reads from it. */
bool hreq_body_rewindable(const struct hreq *r);
/* Reads it again from its first byte; false (nothing changed) when not
 * rewindable. */
bool hreq_body_rewind(struct hreq *r);
/* Why the body failed: the answer the layer would give (400 bad_request,
 * 408 request_timeout, 413 body_too_large), for the owner to give; the
 * connection closes after it. False when it has not failed. */
bool hreq_body_failure(const struct hreq *r, int *status, const char **code, const char **message);
/* The client's x-request-id when acceptable, else one made here. */
const char *hreq_id(const struct hreq *r);
/* The client's IP address as text (no port); "" when not known (a connection
 * given to httpd_adopt). */
const char *hreq_peer(const struct hreq *r);

/* ---- the response (the seam) ---- */
void hreq_set_events(struct hreq *r, const struct hreq_events *ev, void *ctx);
/* Status line and header fields. Framing is the layer's: a given
 * content-length is kept and trusted; without one the body is chunked (HTTP/1.1
 * clients) or ends with the connection (HTTP/1.0). Connection and
 * Transfer-Encoding fields given here are ignored. reason NULL or "": the
 * standard phrase. */
void hreq_start(struct hreq *r, int status, const char *reason, const struct hhdr *h, size_t n);
/* Queues body bytes (copied). False when the client's output is over
 * HREQ_OUT_CAP: write no more until events->drained. */
bool hreq_write(struct hreq *r, const char *data, size_t len);
/* Ends the response: complete, or truncated (what was written is delivered,
 * then the connection is closed so that the client sees an incomplete
 * message). */
void hreq_end(struct hreq *r, bool complete);
/* pacerd's own answer: {"error":{"message","type":"pacer_error","code"}} with
 * x-request-id and the extra fields, then ends the response. After
 * hreq_start it can only cut the response (hreq_end(r, false)). */
void hreq_error(struct hreq *r, int status, const char *code, const char *message,
                const struct hhdr *extra, size_t n);
/* A complete answer in one call (content-length is added). */
void hreq_respond(struct hreq *r, int status, const struct hhdr *h, size_t n, const char *body,
                  size_t len);
/* Closes the connection after this answer (no keep-alive). */
void hreq_close_after(struct hreq *r);
/* Whether the client has closed its connection (or reset it), looked at on
 * the socket itself with one recv(MSG_PEEK): for an owner about to send r on
 * after a wait, since a close that arrived after the loop last polled is not
 * known yet. When it has, the connection goes as if its read event had seen
 * it: events->gone runs from here, and r is gone on return (true). A close
 * behind bytes not read yet is not seen. */
bool hreq_client_left(struct hreq *r);

/* ---- CONNECT tunnels terminated here ---- */
/* Answers a CONNECT with 200 and turns its connection into a TLS server
 * session (ssl: from tls_conn_new, taken over, freed with the connection)
 * for host. The request ends here (the owner drops r); what follows on the
 * connection is a TLS handshake, then HTTP/1.1 requests handed to on_request
 * like any others, with hreq_tunnel_host set. The handshake must complete,
 * and the first request's head arrive, within client_timeout_s (the slow
 * client's rule); a handshake that fails is closed at once, a client that
 * sends plain HTTP instead gets a plain 400 tls_expected. */
void hreq_tunnel_tls(struct hreq *r, struct ssl_st *ssl, const char *host);
/* Gives the connection of r up to a new owner (a blind tunnel, an upgraded
 * WebSocket), as a bufferevent on the layer's base with no callbacks: in
 * clear, the socket's own; inside a terminated tunnel, an OpenSSL filter
 * (BEV_OPT_DEFER_CALLBACKS) over the socket's, carrying the tunnel's TLS
 * session on, with the ciphertext the session had not read yet in the
 * socket's input and what it had not written yet in the socket's output.
 * The plaintext the client sent after the request head is in the returned
 * bufferevent's input. The layer forgets the connection (not counted in
 * max_connections any more); freeing the bufferevent closes the socket.
 * Nothing of the answer may have been written.
 *
 * Under a filter (bufferevent_get_underlying), the socket's write watermark
 * lets at most HREQ_WIRE_CAP bytes be encrypted ahead, so what waits for a
 * slow client waits in the filter's output; a write deadline belongs on the
 * socket's bufferevent (libevent 2.1 re-arms a filter's own write timer after
 * every write, even with nothing left waiting), and the owner that needs to
 * know when the socket's output drained watches that output itself.
 *
 * NULL when not possible: *gone false, r untouched (answer it); *gone true
 * when memory ran out half-way through a tunnel's hand-over: the connection
 * was closed and r is gone (drop it; events->gone is not called). */
#define HREQ_WIRE_CAP (32 * 1024)
struct bufferevent *hreq_take_over(struct hreq *r, bool *gone);
/* The host of the tunnel the request came through, or NULL (not in one). */
const char *hreq_tunnel_host(const struct hreq *r);

#endif
