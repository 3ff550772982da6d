/* server — client side of the proxy. See server.h.
 *
 * One struct xreq per accepted request, owned here. Its two halves end
 * separately: the client half when evhttp has written the whole response
 * (on_complete) or the client went away (on_client_close, on_close_watch); the
 * upstream half when the transfer ends (on_up_done) or is aborted. The xreq is
 * freed on the next loop turn after both have ended (xreq_maybe_free), never
 * from inside an evhttp or libcurl callback that may still use it.
 *
 * evhttp traps handled here (DESIGN §11): evhttp reads nothing while the
 * handler runs, so a client that leaves before the response starts is seen
 * through our own EV_CLOSED event on its fd; the close callback belongs to the
 * connection and is cleared when the request completes; a detached request
 * must still be freed; the read timeout is lifted while a response is written
 * so that a long stream to a silent client is not cut. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "headers.h"
#include "log.h"
#include "route.h"

/* Bytes waiting in a client's output buffer above which the upstream transfer
 * is paused: the memory a slow reader can pin is about this plus one libcurl
 * buffer (16 KiB). */
#define STREAM_OUT_CAP (256 * 1024)
#define LISTEN_BACKLOG 4096
#define REQUEST_ID_MAX 128

struct xreq {
	struct server *srv;
	struct evhttp_request *req;      /* NULL once evhttp freed it */
	struct evhttp_connection *evcon; /* NULL once the client is gone */
	bool req_detached;               /* evhttp let go of req: we free it */
	struct route route;
	char *url;
	struct curl_slist *up_headers;
	const char *body;
	size_t body_len;
	char key_id[ROUTE_KEY_ID_SIZE];
	char request_id[REQUEST_ID_MAX + 1];
	const char *method;
	int attempts;
	int status;
	long long t_start, t_dispatch, t_headers;
	size_t bytes_out;
	bool client_closed; /* the client left before the response was complete */
	struct up_xfer *xfer;
	struct event *close_watch; /* EV_CLOSED on the client fd until the response starts */
	struct evbuffer *chunk;
	const char *error_code; /* pacerd's own answer, for the access log */
	enum up_error up_error;
	bool response_started, paused, abort_when_drained;
	bool upstream_done, client_done, reaping;
	struct xreq *prev, *next;   /* srv->live */
	struct xreq *next_reap;
};

struct server {
	struct event_base *base;
	const struct config *cfg;
	struct upstream *up;
	struct evhttp *http;
	struct evconnlistener *listener;
	struct event *accept_retry;
	struct event *reap;
	struct xreq *live;
	struct xreq *reap_list;
	size_t n_live;
	unsigned long long next_id;
	unsigned id_prefix;
	bool shutting_down;
	void (*drained)(void *);
	void *drained_arg;
};

static const struct up_handler relay_handler;

/* ---- pacerd's own answers ---- */

static const char *status_reason(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 409:
		return "Conflict";
	case 413:
		return "Payload Too Large";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return NULL;
	}
}

static void add_pacer_headers(struct evkeyvalq *out, const char *request_id, int attempts,
			      long long queue_ms)
{
	char num[24];
	if (evhttp_find_header(out, "x-request-id") == NULL)
		evhttp_add_header(out, "x-request-id", request_id);
	snprintf(num, sizeof(num), "%d", attempts);
	evhttp_add_header(out, "x-pacer-attempts", num);
	snprintf(num, sizeof(num), "%lld", queue_ms < 0 ? 0 : queue_ms);
	evhttp_add_header(out, "x-pacer-queue-ms", num);
}

/* Sends {"error":{"message","type":"pacer_error","code"}} with `status`.
 * retry_after_ms >= 0 adds retry-after (seconds, rounded up) and retry-after-ms. */
static void send_error(struct evhttp_request *req, struct server *srv, int status,
		       const char *code, const char *message, const char *request_id,
		       int attempts, long long queue_ms, long long retry_after_ms)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	json_t *body = json_pack("{s:{s:s,s:s,s:s}}", "error", "message", message, "type",
				 "pacer_error", "code", code);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct evbuffer *buf = evbuffer_new();

	evhttp_add_header(out, "content-type", "application/json");
	add_pacer_headers(out, request_id, attempts, queue_ms);
	if (retry_after_ms >= 0) {
		char num[24];
		snprintf(num, sizeof(num), "%lld", (retry_after_ms + 999) / 1000);
		evhttp_add_header(out, "retry-after", num);
		snprintf(num, sizeof(num), "%lld", retry_after_ms);
		evhttp_add_header(out, "retry-after-ms", num);
	}
	if (srv->shutting_down)
		evhttp_add_header(out, "connection", "close");
	if (buf != NULL && text != NULL) {
		evbuffer_add(buf, text, strlen(text));
		evbuffer_add(buf, "\n", 1);
	}
	evhttp_send_reply(req, status, status_reason(status), buf);
	if (buf != NULL)
		evbuffer_free(buf);
	free(text);
	json_decref(body);
}

/* ---- request ids ---- */

static bool request_id_acceptable(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > REQUEST_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)id[i] <= 0x20 || (unsigned char)id[i] >= 0x7f)
			return false;
	return true;
}

static void make_request_id(struct server *srv, struct evhttp_request *req, char *out,
			    size_t outlen)
{
	const char *given =
	    evhttp_find_header(evhttp_request_get_input_headers(req), "x-request-id");
	if (given != NULL && request_id_acceptable(given)) {
		snprintf(out, outlen, "%s", given);
		return;
	}
	snprintf(out, outlen, "pcr_%08x%012llx", srv->id_prefix, ++srv->next_id);
}

/* ---- lifecycle of an xreq ---- */

static void reap_cb(evutil_socket_t fd, short what, void *arg);

static void xreq_destroy(struct xreq *xr)
{
	struct server *srv = xr->srv;
	if (xr->req != NULL && xr->req_detached)
		evhttp_request_free(xr->req);
	if (xr->close_watch != NULL)
		event_free(xr->close_watch);
	if (xr->chunk != NULL)
		evbuffer_free(xr->chunk);
	curl_slist_free_all(xr->up_headers);
	free(xr->url);
	if (xr->prev)
		xr->prev->next = xr->next;
	else
		srv->live = xr->next;
	if (xr->next)
		xr->next->prev = xr->prev;
	srv->n_live--;
	free(xr);
	if (srv->shutting_down && srv->n_live == 0 && srv->drained != NULL) {
		void (*drained)(void *) = srv->drained;
		srv->drained = NULL;
		drained(srv->drained_arg);
	}
}

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	(void)fd;
	(void)what;
	while (srv->reap_list != NULL) {
		struct xreq *xr = srv->reap_list;
		srv->reap_list = xr->next_reap;
		xreq_destroy(xr);
	}
}

static void xreq_maybe_free(struct xreq *xr)
{
	if (!xr->upstream_done || !xr->client_done || xr->reaping)
		return;
	xr->reaping = true;
	xr->next_reap = xr->srv->reap_list;
	xr->srv->reap_list = xr;
	event_active(xr->srv->reap, 0, 0);
}

static void log_request(struct xreq *xr)
{
	struct log_line l;
	if (!log_begin(&l, LOG_INFO, "request"))
		return;
	long long now = mono_ms();
	log_str(&l, "request_id", xr->request_id);
	log_str(&l, "provider", xr->route.provider ? xr->route.provider->name : "");
	log_str(&l, "key", xr->key_id);
	log_str(&l, "method", xr->method);
	/* The path only: a query string may carry an API key (?key=). */
	if (xr->route.path != NULL)
		log_strn(&l, "path", xr->route.path, strcspn(xr->route.path, "?"));
	log_int(&l, "status", xr->status);
	log_int(&l, "attempts", xr->attempts);
	log_int(&l, "queue_ms", xr->t_dispatch ? xr->t_dispatch - xr->t_start : 0);
	log_int(&l, "upstream_ms", xr->t_dispatch ? now - xr->t_dispatch : 0);
	log_int(&l, "duration_ms", now - xr->t_start);
	log_int(&l, "bytes", (long long)xr->bytes_out);
	if (xr->error_code != NULL)
		log_str(&l, "error", xr->error_code);
	if (xr->client_closed)
		log_bool(&l, "client_closed", true);
	if (xr->up_error != UP_OK)
		log_str(&l, "upstream_error", upstream_error_name(xr->up_error));
	log_end(&l);
}

static void stop_close_watch(struct xreq *xr)
{
	if (xr->close_watch != NULL) {
		event_free(xr->close_watch);
		xr->close_watch = NULL;
	}
}

/* The client is gone: stop the upstream side too. */
static void abort_upstream(struct xreq *xr)
{
	if (xr->xfer != NULL) {
		upstream_abort(xr->xfer);
		xr->xfer = NULL;
	}
	xr->upstream_done = true;
}

static void on_client_close(struct evhttp_connection *evcon, void *arg)
{
	struct xreq *xr = arg;
	/* evhttp frees requests still queued on the connection right after this
	 * callback; one it detached (evcon NULL) is ours to free. */
	if (xr->req != NULL) {
		if (evhttp_request_get_connection(xr->req) == NULL)
			xr->req_detached = true;
		else
			xr->req = NULL;
	}
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	xr->evcon = NULL;
	stop_close_watch(xr);
	if (!xr->client_done) {
		if (xr->status == 0)
			xr->status = 499; /* client closed request, as nginx logs it */
		xr->client_closed = true;
		log_request(xr);
	}
	xr->client_done = true;
	abort_upstream(xr);
	xreq_maybe_free(xr);
}

static void on_close_watch(evutil_socket_t fd, short what, void *arg)
{
	struct xreq *xr = arg;
	struct evhttp_connection *evcon = xr->evcon;
	(void)fd;
	(void)what;
	stop_close_watch(xr);
	if (evcon == NULL)
		return;
	/* Left before the response started: evhttp has not noticed (it reads
	 * nothing while a handler runs). Free the connection; the request queued
	 * on it goes with it. */
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	xr->req = NULL;
	xr->evcon = NULL;
	xr->status = 499;
	xr->client_closed = true;
	log_request(xr);
	xr->client_done = true;
	abort_upstream(xr);
	evhttp_connection_free(evcon);
	xreq_maybe_free(xr);
}

static void restore_client_timeouts(struct xreq *xr)
{
	if (xr->evcon == NULL)
		return;
	struct timeval tv = {(time_t)xr->srv->cfg->limits.client_timeout_s, 0};
	bufferevent_set_timeouts(evhttp_connection_get_bufferevent(xr->evcon), &tv, &tv);
}

static void on_complete(struct evhttp_request *req, void *arg)
{
	struct xreq *xr = arg;
	(void)req;
	/* The response is written; evhttp frees req right after this. */
	restore_client_timeouts(xr);
	if (xr->evcon != NULL)
		evhttp_connection_set_closecb(xr->evcon, NULL, NULL);
	xr->req = NULL;
	xr->evcon = NULL;
	stop_close_watch(xr);
	if (!xr->client_done)
		log_request(xr);
	xr->client_done = true;
	xreq_maybe_free(xr);
}

/* pacerd answers for an accepted request (after intake). */
static void xreq_error(struct xreq *xr, int status, const char *code, const char *message,
		       long long retry_after_ms)
{
	if (xr->req == NULL || xr->response_started)
		return;
	stop_close_watch(xr);
	xr->response_started = true;
	xr->status = status;
	xr->error_code = code;
	long long queue_ms = (xr->t_dispatch ? xr->t_dispatch : mono_ms()) - xr->t_start;
	send_error(xr->req, xr->srv, status, code, message, xr->request_id, xr->attempts,
		   queue_ms, retry_after_ms);
}

/* ---- relaying the upstream response ---- */

static bool copy_header(struct evkeyvalq *out, const struct up_header *h, const char *connection)
{
	char name[256];
	if (h->name_len >= sizeof(name))
		return true; /* absurd name: drop it rather than cut it */
	memcpy(name, h->name, h->name_len);
	name[h->name_len] = '\0';
	if (!hdr_forward_response(name, connection))
		return true;
	char *value = strndup(h->value, h->value_len);
	if (value == NULL)
		return false;
	evhttp_add_header(out, name, value);
	free(value);
	return true;
}

static char *find_header_value(const struct up_header *h, size_t n, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < n; i++)
		if (h[i].name_len == len && strncasecmp(h[i].name, name, len) == 0)
			return strndup(h[i].value, h[i].value_len);
	return NULL;
}

static bool on_up_headers(void *ctx, int status, const char *reason, const struct up_header *h,
			  size_t n)
{
	struct xreq *xr = ctx;
	if (xr->req == NULL || xr->evcon == NULL)
		return false;
	xr->t_headers = mono_ms();
	xr->status = status;
	stop_close_watch(xr); /* evhttp watches the connection while it writes */

	struct evkeyvalq *out = evhttp_request_get_output_headers(xr->req);
	char *connection = find_header_value(h, n, "connection");
	bool ok = true;
	for (size_t i = 0; i < n && ok; i++)
		ok = copy_header(out, &h[i], connection);
	free(connection);
	if (!ok)
		return false;
	add_pacer_headers(out, xr->request_id, xr->attempts, xr->t_dispatch - xr->t_start);
	if (xr->srv->shutting_down)
		evhttp_add_header(out, "connection", "close");

	/* A long stream to a client that sends nothing must not hit the read
	 * timeout (libevent #715): only a stuck write counts while we answer. */
	struct timeval tv = {(time_t)xr->srv->cfg->limits.client_timeout_s, 0};
	bufferevent_set_timeouts(evhttp_connection_get_bufferevent(xr->evcon), NULL, &tv);

	xr->response_started = true;
	evhttp_send_reply_start(xr->req, status, reason[0] ? reason : status_reason(status));
	return true;
}

static void close_client_now(struct xreq *xr)
{
	struct evhttp_connection *evcon = xr->evcon;
	if (evcon == NULL)
		return;
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	xr->req = NULL;
	xr->evcon = NULL;
	if (!xr->client_done)
		log_request(xr);
	xr->client_done = true;
	evhttp_connection_free(evcon);
}

static void on_client_drained(struct evhttp_connection *evcon, void *arg)
{
	struct xreq *xr = arg;
	(void)evcon;
	if (xr->abort_when_drained) {
		close_client_now(xr);
		xreq_maybe_free(xr);
		return;
	}
	if (xr->paused && xr->xfer != NULL) {
		xr->paused = false;
		upstream_resume(xr->xfer);
	}
}

static size_t client_backlog(struct xreq *xr)
{
	return evbuffer_get_length(
	    bufferevent_get_output(evhttp_connection_get_bufferevent(xr->evcon)));
}

static bool on_up_body(void *ctx, const char *data, size_t len)
{
	struct xreq *xr = ctx;
	if (xr->req == NULL || xr->evcon == NULL)
		return true; /* the client is gone; the transfer is being aborted */
	if (client_backlog(xr) >= STREAM_OUT_CAP) {
		/* Slow reader: hold the upstream until evhttp drains the buffer. */
		xr->paused = true;
		return false;
	}
	evbuffer_add(xr->chunk, data, len);
	xr->bytes_out += len;
	evhttp_send_reply_chunk_with_cb(xr->req, xr->chunk, on_client_drained, xr);
	return true;
}

static void on_up_done(void *ctx, enum up_error err, const char *detail)
{
	struct xreq *xr = ctx;
	xr->xfer = NULL;
	xr->up_error = err;
	xr->upstream_done = true;

	if (xr->req == NULL) {
		xreq_maybe_free(xr);
		return;
	}
	if (xr->response_started) {
		if (err == UP_OK) {
			evhttp_send_reply_end(xr->req);
		} else if (xr->evcon != NULL) {
			/* Cut mid-body: the client must see an incomplete message,
			 * not a clean end; deliver what arrived, then close. */
			log_msg(LOG_WARN, "upstream_aborted", detail);
			xr->abort_when_drained = true;
			if (client_backlog(xr) == 0)
				close_client_now(xr);
		}
	} else if (err == UP_TIMEOUT) {
		xreq_error(xr, 504, "upstream_timeout", "the upstream did not answer in time", -1);
	} else {
		char msg[256];
		snprintf(msg, sizeof(msg), "the upstream could not be reached: %s (%s)",
			 upstream_error_name(err), detail ? detail : "");
		xreq_error(xr, 502, "upstream_unreachable", msg, -1);
	}
	xreq_maybe_free(xr);
}

static const struct up_handler relay_handler = {
	.on_headers = on_up_headers,
	.on_body = on_up_body,
	.on_done = on_up_done,
};

/* ---- intake ---- */

static const char *method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	}
	return "GET";
}

/* Builds the header list sent upstream: every end-to-end field of the client,
 * and blanks for the defaults libcurl would otherwise add by itself. */
static struct curl_slist *upstream_headers(struct evhttp_request *req)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *connection = evhttp_find_header(in, "connection");
	struct curl_slist *list = NULL, *tmp;
	bool has_accept = false, has_ctype = false;
	struct evkeyval *kv;

	for (kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
		if (!hdr_forward_request(kv->key, connection))
			continue;
		if (strcasecmp(kv->key, "accept") == 0)
			has_accept = true;
		else if (strcasecmp(kv->key, "content-type") == 0)
			has_ctype = true;
		size_t n = strlen(kv->key) + strlen(kv->value) + 3;
		char *line = malloc(n);
		if (line == NULL)
			goto fail;
		/* libcurl reads "Name:" as "remove Name"; "Name;" sends it empty. */
		if (kv->value[0] == '\0')
			snprintf(line, n, "%s;", kv->key);
		else
			snprintf(line, n, "%s: %s", kv->key, kv->value);
		tmp = curl_slist_append(list, line);
		free(line);
		if (tmp == NULL)
			goto fail;
		list = tmp;
	}
	/* Expect: 100-continue would cost a round trip for bodies over 1 MiB. */
	const char *blanks[] = {"Expect:", has_accept ? NULL : "Accept:",
				has_ctype ? NULL : "Content-Type:"};
	for (size_t i = 0; i < sizeof(blanks) / sizeof(blanks[0]); i++) {
		if (blanks[i] == NULL)
			continue;
		tmp = curl_slist_append(list, blanks[i]);
		if (tmp == NULL)
			goto fail;
		list = tmp;
	}
	return list;
fail:
	curl_slist_free_all(list);
	return NULL;
}

static void find_key(struct xreq *xr, struct evhttp_request *req)
{
	const struct provider_conf *p = xr->route.provider;
	const char *key = NULL;
	size_t key_len = 0;
	bool found;

	if (p->key_source == KEY_QUERY_KEY) {
		const char *q = memchr(xr->route.path, '?', xr->route.path_len);
		found = q != NULL && route_key_from_query(q + 1, xr->route.path_len -
								     (size_t)(q + 1 - xr->route.path),
							  &key, &key_len);
	} else {
		const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
						   route_key_header_name(p->key_source));
		found = route_key_from_header(p->key_source, v, &key, &key_len);
	}
	char hash[ROUTE_KEY_HEX + 1];
	if (found)
		route_key_hash(key, key_len, hash);
	route_key_id(found ? hash : NULL, xr->key_id);
}

static void dispatch(struct xreq *xr)
{
	struct up_request ur = {
	    .url = xr->url,
	    .method = xr->method,
	    .headers = xr->up_headers,
	    .body = xr->body,
	    .body_len = xr->body_len,
	    .provider = xr->route.provider,
	};
	xr->attempts++;
	xr->t_dispatch = mono_ms();
	xr->upstream_done = false;
	xr->xfer = upstream_start(xr->srv->up, &ur, &relay_handler, xr);
	if (xr->xfer == NULL) {
		xr->upstream_done = true;
		xreq_error(xr, 502, "upstream_unreachable", "cannot start the upstream transfer", -1);
	}
}

static void reply_early(struct server *srv, struct evhttp_request *req, int status,
			const char *code, const char *message)
{
	char id[REQUEST_ID_MAX + 1];
	make_request_id(srv, req, id, sizeof(id));
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "rejected")) {
		log_str(&l, "request_id", id);
		log_int(&l, "status", status);
		log_str(&l, "error", code);
		log_end(&l);
	}
	send_error(req, srv, status, code, message, id, 0, 0, -1);
}

static struct xreq *xreq_new(struct server *srv, struct evhttp_request *req)
{
	struct xreq *xr = calloc(1, sizeof(*xr));
	if (xr == NULL)
		return NULL;
	xr->chunk = evbuffer_new();
	if (xr->chunk == NULL) {
		free(xr);
		return NULL;
	}
	xr->srv = srv;
	xr->req = req;
	xr->evcon = evhttp_request_get_connection(req);
	xr->t_start = mono_ms();
	xr->upstream_done = true; /* until dispatched */
	xr->next = srv->live;
	if (srv->live)
		srv->live->prev = xr;
	srv->live = xr;
	srv->n_live++;
	return xr;
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct server *srv = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *target = evhttp_request_get_uri(req);

	if (srv->shutting_down) {
		char id[REQUEST_ID_MAX + 1];
		make_request_id(srv, req, id, sizeof(id));
		send_error(req, srv, 503, "shutting_down", "pacerd is shutting down", id, 0, 0,
			   1000);
		return;
	}
	if (cmd == EVHTTP_REQ_CONNECT) {
		reply_early(srv, req, 405, "method_not_allowed",
			    "CONNECT is not supported: a TLS tunnel cannot be paced per request. "
			    "Send plain HTTP to pacerd (set the SDK base URL to "
			    "http://HOST:PORT/v1) instead of using it as an HTTPS proxy");
		return;
	}
	if (cmd == EVHTTP_REQ_TRACE) {
		reply_early(srv, req, 405, "method_not_allowed", "TRACE is not forwarded");
		return;
	}

	struct route route;
	switch (route_resolve(srv->cfg, target, &route)) {
	case ROUTE_OK:
		break;
	case ROUTE_NO_PROVIDER:
		reply_early(srv, req, 404, "unknown_provider",
			    "no provider is configured for this path");
		return;
	case ROUTE_HOST_NOT_ALLOWED:
		reply_early(srv, req, 403, "host_not_allowed",
			    "this host is not a configured provider; pacerd is not an open proxy");
		return;
	case ROUTE_BAD_TARGET:
		reply_early(srv, req, 400, "bad_request", "malformed request target");
		return;
	}

	struct xreq *xr = xreq_new(srv, req);
	if (xr == NULL) {
		reply_early(srv, req, 503, "out_of_memory", "pacerd is out of memory");
		return;
	}
	xr->route = route;
	xr->method = method_name(cmd);
	make_request_id(srv, req, xr->request_id, sizeof(xr->request_id));
	find_key(xr, req);

	char small[2048];
	int n = route_upstream_url(&xr->route, small, sizeof(small));
	if (n < 0) {
		size_t need = strlen(xr->route.provider->upstream) + xr->route.path_len + 2;
		xr->url = malloc(need);
		if (xr->url != NULL && route_upstream_url(&xr->route, xr->url, need) < 0) {
			free(xr->url);
			xr->url = NULL;
		}
	} else {
		xr->url = strdup(small);
	}
	xr->up_headers = upstream_headers(req);
	if (xr->url == NULL || xr->up_headers == NULL) {
		evhttp_request_set_on_complete_cb(req, on_complete, xr);
		xreq_error(xr, 503, "out_of_memory", "pacerd is out of memory", -1);
		return;
	}

	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	xr->body_len = evbuffer_get_length(in);
	xr->body = xr->body_len ? (const char *)evbuffer_pullup(in, -1) : NULL;

	evhttp_request_set_on_complete_cb(req, on_complete, xr);
	evhttp_connection_set_closecb(xr->evcon, on_client_close, xr);
	int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(xr->evcon));
	xr->close_watch = event_new(srv->base, fd, EV_CLOSED, on_close_watch, xr);
	if (xr->close_watch != NULL)
		event_add(xr->close_watch, NULL);

	dispatch(xr);
}

/* ---- listener ---- */

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	(void)fd;
	(void)what;
	if (!srv->shutting_down)
		evconnlistener_enable(srv->listener);
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct server *srv = arg;
	int err = EVUTIL_SOCKET_ERROR();
	/* Out of fds (EMFILE/ENFILE) or memory: the listening socket stays
	 * readable, so pause accepting for a moment instead of spinning. */
	struct log_line l;
	if (log_begin(&l, LOG_WARN, "accept_error")) {
		log_str(&l, "message", evutil_socket_error_to_string(err));
		log_end(&l);
	}
	evconnlistener_disable(lev);
	struct timeval tv = {0, 100 * 1000};
	evtimer_add(srv->accept_retry, &tv);
}

static int bind_listener(struct server *srv, const char *listen, char *err, size_t errlen)
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
	const char *h = host[0] ? host : "0.0.0.0";
	if (strcmp(h, "localhost") == 0)
		h = "127.0.0.1";
	if (inet_pton(AF_INET, h, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		sslen = sizeof(*sin);
	} else if (inet_pton(AF_INET6, h, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		sslen = sizeof(*sin6);
	} else {
		snprintf(err, errlen, "listen: '%s' is not an IP address", h);
		return -1;
	}
	srv->listener = evconnlistener_new_bind(
	    srv->base, NULL, NULL,
	    LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_DISABLED,
	    LISTEN_BACKLOG, (struct sockaddr *)&ss, (int)sslen);
	if (srv->listener == NULL) {
		snprintf(err, errlen, "listen %s: %s", listen,
			 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		return -1;
	}
	if (evhttp_bind_listener(srv->http, srv->listener) == NULL) {
		snprintf(err, errlen, "listen %s: cannot attach HTTP server", listen);
		return -1;
	}
	/* TCP_NODELAY on the listening socket is inherited by every accepted one
	 * (Linux): SSE chunks are small and must not wait for Nagle. */
	int one = 1;
	setsockopt(evconnlistener_get_fd(srv->listener), IPPROTO_TCP, TCP_NODELAY, &one,
		   sizeof(one));
	evconnlistener_set_error_cb(srv->listener, on_accept_error);
	evconnlistener_enable(srv->listener);
	return 0;
}

struct server *server_new(struct event_base *base, const struct config *cfg,
			  struct upstream *up, char *err, size_t errlen)
{
	struct server *srv = calloc(1, sizeof(*srv));
	if (srv == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	srv->base = base;
	srv->cfg = cfg;
	srv->up = up;
	srv->id_prefix = (unsigned)arc4random();
	srv->http = evhttp_new(base);
	srv->reap = event_new(base, -1, 0, reap_cb, srv);
	srv->accept_retry = evtimer_new(base, on_accept_retry, srv);
	if (srv->http == NULL || srv->reap == NULL || srv->accept_retry == NULL) {
		snprintf(err, errlen, "out of memory");
		server_free(srv);
		return NULL;
	}
	evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						  EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						  EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
						  EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(srv->http, cfg->limits.max_header_bytes);
	evhttp_set_max_body_size(srv->http, (ev_ssize_t)cfg->limits.max_body_bytes);
	evhttp_set_timeout(srv->http, (int)cfg->limits.client_timeout_s);
	/* Never invent a Content-Type for an upstream answer that had none. */
	evhttp_set_default_content_type(srv->http, NULL);
	evhttp_set_gencb(srv->http, on_request, srv);
	if (bind_listener(srv, cfg->listen, err, errlen) != 0) {
		server_free(srv);
		return NULL;
	}
	return srv;
}

void server_shutdown(struct server *srv, void (*drained)(void *), void *arg)
{
	srv->shutting_down = true;
	if (srv->listener != NULL)
		evconnlistener_disable(srv->listener);
	evtimer_del(srv->accept_retry);
	srv->drained = drained;
	srv->drained_arg = arg;
	if (srv->n_live == 0) {
		srv->drained = NULL;
		drained(arg);
	}
}

void server_abort_all(struct server *srv)
{
	for (struct xreq *xr = srv->live; xr != NULL; xr = xr->next) {
		if (xr->reaping)
			continue;
		abort_upstream(xr);
		if (!xr->response_started && xr->req != NULL)
			xreq_error(xr, 503, "shutting_down",
				   "pacerd stopped before the upstream answered", 1000);
		else
			close_client_now(xr);
		xreq_maybe_free(xr);
	}
}

size_t server_in_flight(const struct server *srv)
{
	return srv->n_live;
}

void server_free(struct server *srv)
{
	if (srv == NULL)
		return;
	/* Requests still open are cut; their connections go with evhttp. */
	for (struct xreq *xr = srv->live; xr != NULL; xr = xr->next) {
		abort_upstream(xr);
		if (xr->evcon != NULL)
			evhttp_connection_set_closecb(xr->evcon, NULL, NULL);
		if (!xr->req_detached)
			xr->req = NULL;
		xr->client_done = true;
	}
	if (srv->http != NULL)
		evhttp_free(srv->http); /* frees the bound listener too */
	while (srv->live != NULL) {
		struct xreq *xr = srv->live;
		xr->reaping = true;
		srv->reap_list = NULL;
		xreq_destroy(xr);
	}
	if (srv->reap != NULL)
		event_free(srv->reap);
	if (srv->accept_retry != NULL)
		event_free(srv->accept_retry);
	free(srv);
}
