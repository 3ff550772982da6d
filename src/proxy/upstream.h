/* SPDX-License-Identifier: Apache-2.0 */
/* upstream — HTTP transfers to the providers: libcurl's multi interface driven
 * by the libevent loop (DESIGN §11), streaming the response in as it arrives.
 *
 * Contract with the caller (exchange.c):
 *   - on_headers, on_body, on_read and on_rewind run inside libcurl
 *     callbacks: they must not start transfers; upstream_abort,
 *     upstream_resume and upstream_resume_send are safe anywhere (they defer
 *     themselves to the next loop turn when needed).
 *   - on_done never runs inside a libcurl callback; after it (or after
 *     upstream_abort) the transfer handle is gone.
 * Easy handles, transfer objects and socket watchers are pooled: no allocation
 * per request once warm, and no epoll_ctl for a reused keep-alive connection. */
#ifndef PACERD_UPSTREAM_H
#define PACERD_UPSTREAM_H

#include <curl/curl.h> /* up_request.headers: a curl_slist its callers build and walk */
#include <stdbool.h>
#include <stddef.h>

struct event_base;    /* event2/event.h */
struct provider_conf; /* core/config.h */

struct upstream;
struct up_xfer;

/* Valid during on_headers; name and value are also NUL-terminated. */
struct up_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

enum up_error {
	UP_OK,
	UP_CONNECT,    /* could not connect: nothing was sent */
	UP_RESOLVE,    /* the upstream's host name did not resolve: nothing was sent */
	UP_TLS,        /* TLS handshake failed */
	UP_TLS_VERIFY, /* the upstream's certificate failed verification (untrusted, wrong name) */
	UP_RESET,      /* connection reset or closed early (before or during the body) */
	UP_TIMEOUT,    /* connect, first-byte or idle timeout */
	UP_TOO_LARGE,  /* response headers over the cap */
	UP_INTERNAL,   /* anything else libcurl reports */
};

struct up_request {
	const char *url;
	const char *method;               /* as received: "GET", "POST", … */
	const struct curl_slist *headers; /* owned by the caller until done */
	const char *body;                 /* owned by the caller until done */
	size_t body_len;
	/* The body is read as it arrives instead (body NULL): the handler's
	 * on_read gives its bytes, body_size is its length or -1 when unknown
	 * (sent chunked). The first-byte timeout counts from its end; while it
	 * is sent, the idle timeout applies to the upstream taking it. */
	bool body_streamed;
	int64_t body_size;
	const struct provider_conf *provider; /* tls, timeouts, http2 */
};

/* What a streamed body's reader gives (up_handler.on_read). */
enum up_read {
	UP_READ_DATA,  /* *n > 0 bytes */
	UP_READ_WAIT,  /* none yet: sending pauses until upstream_resume_send */
	UP_READ_END,   /* the body is complete */
	UP_READ_ABORT, /* it will not be: the transfer fails (UP_INTERNAL) */
};

struct up_handler {
	/* The final response's status line and header fields are complete
	 * (1xx interim responses are skipped). Return false to abort the
	 * transfer (on_done then reports UP_INTERNAL). */
	bool (*on_headers)(void *ctx, int status, const char *reason, const struct up_header *h,
	                   size_t n);
	/* Response body bytes. Return true when consumed; false to pause the
	 * transfer: the same bytes are delivered again after upstream_resume. */
	bool (*on_body)(void *ctx, const char *data, size_t len);
	/* The transfer ended: UP_OK when the whole response arrived. */
	void (*on_done)(void *ctx, enum up_error err, const char *detail);
	/* The connection is ready and the request is written next (libcurl's
	 * PREREQFUNCTION): where pacing is measured. The owner may give the
	 * transfer up from here (upstream_abort): then nothing is sent, and
	 * on_done is not called. Optional (NULL). */
	void (*on_sent)(void *ctx);
	/* A streamed body (up_request.body_streamed): up to len of its next
	 * bytes into buf, *n set to how many. */
	enum up_read (*on_read)(void *ctx, char *buf, size_t len, size_t *n);
	/* Start the streamed body over: libcurl sends the request again on a
	 * fresh connection when a reused one died before any answer. False
	 * when its first bytes are gone (the transfer then fails). */
	bool (*on_rewind)(void *ctx);
};

struct upstream *upstream_new(struct event_base *base, char *err, size_t errlen);
/* Aborts every transfer still running (without calling on_done). */
void upstream_free(struct upstream *up);

struct up_xfer *upstream_start(struct upstream *up, const struct up_request *req,
                               const struct up_handler *h, void *ctx);
/* Stops the transfer; on_done will not be called. Safe from any callback. */
void upstream_abort(struct up_xfer *x);
/* Continues a transfer paused by on_body returning false (next loop turn). */
void upstream_resume(struct up_xfer *x);
/* Continues sending a body whose on_read said UP_READ_WAIT (next loop turn). */
void upstream_resume_send(struct up_xfer *x);

/* Frees the pooled transfers (easy handles and their buffers) that none
 * needed since the last call (the pool's low-water mark); all: every pooled
 * one. Returns how many. */
size_t upstream_trim(struct upstream *up, bool all);

const char *upstream_error_name(enum up_error e);

#endif
