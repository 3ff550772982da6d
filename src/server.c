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
#include "proxy.h"
#include "route.h"

#define LISTEN_BACKLOG 4096
#define LANE_SWEEP_S 10

/* ---- pacerd's own answers ---- */

const char *proxy_status_reason(int status)
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

void proxy_add_pacer_headers(struct evkeyvalq *out, const char *request_id, int attempts,
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
static void send_error(struct evhttp_request *req, struct server *srv, int status, const char *code,
                       const char *message, const char *request_id, int attempts,
                       long long queue_ms, long long retry_after_ms)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	json_t *body = json_pack("{s:{s:s,s:s,s:s}}", "error", "message", message, "type",
	                         "pacer_error", "code", code);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct evbuffer *buf = evbuffer_new();

	evhttp_add_header(out, "content-type", "application/json");
	proxy_add_pacer_headers(out, request_id, attempts, queue_ms);
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
		/* evhttp leaves the length out for CONNECT; say it always. */
		char len[24];
		snprintf(len, sizeof(len), "%zu", evbuffer_get_length(buf));
		evhttp_add_header(out, "content-length", len);
	}
	evhttp_send_reply(req, status, proxy_status_reason(status), buf);
	if (buf != NULL)
		evbuffer_free(buf);
	free(text);
	json_decref(body);
}

/* ---- configurations ---- */

struct cfgref *cfgref_new(struct config *cfg)
{
	struct cfgref *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->cfg = cfg;
	r->refs = 1;
	return r;
}

struct cfgref *cfgref_get(struct cfgref *r)
{
	r->refs++;
	return r;
}

void cfgref_put(struct cfgref *r)
{
	if (r == NULL || --r->refs > 0)
		return;
	config_free(r->cfg);
	free(r);
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
	if (xr->held != NULL)
		evbuffer_free(xr->held);
	if (xr->json != NULL)
		evbuffer_free(xr->json);
	tokens_sse_free(&xr->sse_scan);
	curl_slist_free_all(xr->up_headers);
	free(xr->url);
	cfgref_put(xr->cref);
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

void xreq_maybe_free(struct xreq *xr)
{
	if (!xr->upstream_done || !xr->client_done || xr->reaping)
		return;
	xr->reaping = true;
	xr->next_reap = xr->srv->reap_list;
	xr->srv->reap_list = xr;
	event_active(xr->srv->reap, 0, 0);
}

static void count_response(struct server *srv, int status)
{
	if (status >= 100 && status < 600)
		srv->responses[status / 100]++;
}

void xreq_log_request(struct xreq *xr)
{
	count_response(xr->srv, xr->status);
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
	if (xr->agent[0])
		log_str(&l, "agent", xr->agent);
	log_int(&l, "attempts", xr->item.attempts);
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
	if (xr->up_detail[0])
		log_str(&l, "upstream_detail", xr->up_detail);
	log_end(&l);
}

void xreq_stop_close_watch(struct xreq *xr)
{
	if (xr->close_watch != NULL) {
		event_free(xr->close_watch);
		xr->close_watch = NULL;
	}
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
	xreq_stop_close_watch(xr);
	if (!xr->client_done) {
		if (xr->status == 0)
			xr->status = 499; /* client closed request, as nginx logs it */
		xr->client_closed = true;
		xreq_log_request(xr);
	}
	xr->client_done = true;
	exchange_abort(xr);
	xreq_maybe_free(xr);
}

static void on_close_watch(evutil_socket_t fd, short what, void *arg)
{
	struct xreq *xr = arg;
	struct evhttp_connection *evcon = xr->evcon;
	(void)fd;
	(void)what;
	xreq_stop_close_watch(xr);
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
	xreq_log_request(xr);
	xr->client_done = true;
	exchange_abort(xr);
	evhttp_connection_free(evcon);
	xreq_maybe_free(xr);
}

void xreq_restore_client_timeouts(struct xreq *xr)
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
	xreq_restore_client_timeouts(xr);
	if (xr->evcon != NULL)
		evhttp_connection_set_closecb(xr->evcon, NULL, NULL);
	xr->req = NULL;
	xr->evcon = NULL;
	xreq_stop_close_watch(xr);
	if (!xr->client_done)
		xreq_log_request(xr);
	xr->client_done = true;
	xreq_maybe_free(xr);
}

/* pacerd answers for an accepted request (after intake). */
void xreq_error(struct xreq *xr, int status, const char *code, const char *message,
                long long retry_after_ms)
{
	if (xr->req == NULL || xr->response_started)
		return;
	xreq_stop_close_watch(xr);
	xr->response_started = true;
	xr->status = status;
	xr->error_code = code;
	long long queue_ms = (xr->t_dispatch ? xr->t_dispatch : mono_ms()) - xr->t_start;
	send_error(xr->req, xr->srv, status, code, message, xr->request_id, (int)xr->item.attempts,
	           queue_ms, retry_after_ms);
}

/* Cuts the client connection now (an upstream broken off mid-body). */
void xreq_close_client_now(struct xreq *xr)
{
	struct evhttp_connection *evcon = xr->evcon;
	if (evcon == NULL)
		return;
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	xr->req = NULL;
	xr->evcon = NULL;
	if (!xr->client_done)
		xreq_log_request(xr);
	xr->client_done = true;
	evhttp_connection_free(evcon);
}

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
		/* libcurl copies the line: build it on the stack, on the heap
		 * only when it is larger than a typical header. */
		char small[512];
		size_t n = strlen(kv->key) + strlen(kv->value) + 3;
		char *line = n <= sizeof(small) ? small : malloc(n);
		if (line == NULL)
			goto fail;
		/* libcurl reads "Name:" as "remove Name"; "Name;" sends it empty. */
		if (kv->value[0] == '\0')
			snprintf(line, n, "%s;", kv->key);
		else
			snprintf(line, n, "%s: %s", kv->key, kv->value);
		tmp = curl_slist_append(list, line);
		if (line != small)
			free(line);
		if (tmp == NULL)
			goto fail;
		list = tmp;
	}
	/* Expect: 100-continue would cost a round trip for bodies over 1 MiB. */
	const char *blanks[] = {
	    "Expect:", has_accept ? NULL : "Accept:", has_ctype ? NULL : "Content-Type:"};
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

/* The key comes from the provider's key header first; failing that from any
 * other place a key can travel (an Anthropic SDK given an auth token sends
 * Authorization: Bearer, a Gemini client may use ?key=), so that a request
 * with a key never lands in the anonymous lane. */
static bool key_from(struct xreq *xr, struct evhttp_request *req, enum key_source src,
                     const char **key, size_t *key_len)
{
	if (src == KEY_QUERY_KEY) {
		const char *q = memchr(xr->route.path, '?', xr->route.path_len);
		return q != NULL &&
		       route_key_from_query(q + 1,
		                            xr->route.path_len - (size_t)(q + 1 - xr->route.path),
		                            key, key_len);
	}
	const char *v =
	    evhttp_find_header(evhttp_request_get_input_headers(req), route_key_header_name(src));
	return route_key_from_header(src, v, key, key_len);
}

static void find_key(struct xreq *xr, struct evhttp_request *req)
{
	static const enum key_source fallbacks[] = {KEY_AUTHORIZATION, KEY_X_API_KEY, KEY_API_KEY,
	                                            KEY_X_GOOG_API_KEY, KEY_QUERY_KEY};
	const char *key = NULL;
	size_t key_len = 0;
	bool found = key_from(xr, req, xr->route.provider->key_source, &key, &key_len);
	for (size_t i = 0; !found && i < sizeof(fallbacks) / sizeof(fallbacks[0]); i++)
		found = key_from(xr, req, fallbacks[i], &key, &key_len);
	if (found)
		route_key_hash(key, key_len, xr->key_hash);
	route_key_id(found ? xr->key_hash : NULL, xr->key_id);
}

static void reply_early(struct server *srv, struct evhttp_request *req, int status,
                        const char *code, const char *message)
{
	char id[REQUEST_ID_MAX + 1];
	make_request_id(srv, req, id, sizeof(id));
	count_response(srv, status);
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
	xr->cref = cfgref_get(srv->cref);
	xr->req = req;
	xr->evcon = evhttp_request_get_connection(req);
	xr->t_start = mono_ms();
	tokens_sse_init(&xr->sse_scan);
	xr->next = srv->live;
	if (srv->live)
		srv->live->prev = xr;
	srv->live = xr;
	srv->n_live++;
	return xr;
}

static void end_after_answer(struct evhttp_request *req, void *arg)
{
	(void)arg;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	/* Half-close: the client reads the answer, then EOF; evhttp frees the
	 * connection when the client closes its side. */
	if (evcon != NULL)
		shutdown(bufferevent_getfd(evhttp_connection_get_bufferevent(evcon)), SHUT_WR);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct server *srv = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *target = evhttp_request_get_uri(req);

	if (srv->shutting_down) {
		char id[REQUEST_ID_MAX + 1];
		make_request_id(srv, req, id, sizeof(id));
		count_response(srv, 503);
		send_error(req, srv, 503, "shutting_down", "pacerd is shutting down", id, 0, 0,
		           1000);
		return;
	}
	if (cmd == EVHTTP_REQ_CONNECT) {
		/* The client expects a tunnel on this connection, and evhttp never
		 * closes one after CONNECT: end it once the answer is written. */
		evhttp_add_header(evhttp_request_get_output_headers(req), "connection", "close");
		evhttp_request_set_on_complete_cb(req, end_after_answer, NULL);
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
		xr->upstream_done = true;
		xreq_error(xr, 503, "out_of_memory", "pacerd is out of memory", -1);
		return;
	}
	const char *agent = srv->cfg->agents.mode == AGENTS_OFF
	                        ? NULL
	                        : evhttp_find_header(evhttp_request_get_input_headers(req),
	                                             srv->cfg->agents.header);
	if (agent != NULL)
		snprintf(xr->agent, sizeof(xr->agent), "%s", agent);

	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	xr->body_len = evbuffer_get_length(in);
	xr->body = xr->body_len ? (const char *)evbuffer_pullup(in, -1) : NULL;

	evhttp_request_set_on_complete_cb(req, on_complete, xr);
	evhttp_connection_set_closecb(xr->evcon, on_client_close, xr);
	int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(xr->evcon));
	xr->close_watch = event_new(srv->base, fd, EV_CLOSED, on_close_watch, xr);
	if (xr->close_watch != NULL)
		event_add(xr->close_watch, NULL);

	exchange_submit(xr);
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
	srv->listener = evconnlistener_new_bind(srv->base, NULL, NULL,
	                                        LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE |
	                                            LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_DISABLED,
	                                        LISTEN_BACKLOG, (struct sockaddr *)&ss, (int)sslen);
	if (srv->listener == NULL) {
		snprintf(err, errlen, "listen %s: %s", listen,
		         evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		return -1;
	}
	srv->bound = evhttp_bind_listener(srv->http, srv->listener);
	if (srv->bound == NULL) {
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

/* Lanes idle for limits.idle_ttl_s are forgotten. */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	(void)fd;
	(void)what;
	registry_evict_idle(srv->reg, mono_ms(), (int64_t)srv->cfg->limits.idle_ttl_s * 1000,
	                    exchange_lane_evicted, srv);
}

static void apply_http_limits(struct server *srv)
{
	const struct config *cfg = srv->cfg;
	evhttp_set_max_headers_size(srv->http, cfg->limits.max_header_bytes);
	evhttp_set_max_body_size(srv->http, (ev_ssize_t)cfg->limits.max_body_bytes);
	evhttp_set_timeout(srv->http, (int)cfg->limits.client_timeout_s);
}

struct server *server_new(struct event_base *base, struct config *cfg, struct upstream *up,
                          char *err, size_t errlen)
{
	struct server *srv = calloc(1, sizeof(*srv));
	struct cfgref *cref = srv ? cfgref_new(cfg) : NULL;
	if (cref == NULL) {
		snprintf(err, errlen, "out of memory");
		free(srv);
		config_free(cfg);
		return NULL;
	}
	srv->base = base;
	srv->cref = cref;
	srv->cfg = cfg;
	srv->up = up;
	srv->id_prefix = (unsigned)arc4random();
	srv->http = evhttp_new(base);
	srv->reap = event_new(base, -1, 0, reap_cb, srv);
	srv->accept_retry = evtimer_new(base, on_accept_retry, srv);
	srv->sweep = event_new(base, -1, EV_PERSIST, on_sweep, srv);
	srv->reg = registry_new();
	srv->rng = ((uint64_t)arc4random() << 32) | arc4random() | 1;
	if (srv->http == NULL || srv->reap == NULL || srv->accept_retry == NULL ||
	    srv->sweep == NULL || srv->reg == NULL) {
		snprintf(err, errlen, "out of memory");
		server_free(srv);
		return NULL;
	}
	evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
	                                          EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	                                          EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
	                                          EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	apply_http_limits(srv);
	/* Never invent a Content-Type for an upstream answer that had none. */
	evhttp_set_default_content_type(srv->http, NULL);
	evhttp_set_gencb(srv->http, on_request, srv);
	if (bind_listener(srv, cfg->listen, err, errlen) != 0) {
		server_free(srv);
		return NULL;
	}
	struct timeval sweep = {LANE_SWEEP_S, 0};
	event_add(srv->sweep, &sweep);
	return srv;
}

const struct config *server_config(const struct server *srv)
{
	return srv->cfg;
}

void server_reload(struct server *srv, struct config *cfg)
{
	struct cfgref *cref = cfgref_new(cfg);
	if (cref == NULL) {
		log_msg(LOG_ERROR, "config_reload_failed",
		        "out of memory; the running configuration stays");
		config_free(cfg);
		return;
	}
	if (strcmp(cfg->listen, srv->cfg->listen) != 0) {
		struct log_line l;
		if (log_begin(&l, LOG_WARN, "config_reload")) {
			log_str(&l, "message", "a new listen address takes effect at restart");
			log_str(&l, "listen", srv->cfg->listen);
			log_str(&l, "configured", cfg->listen);
			log_end(&l);
		}
		/* Keep describing the socket actually bound. */
		char *keep = strdup(srv->cfg->listen);
		if (keep != NULL) {
			free(cfg->listen);
			cfg->listen = keep;
		}
	}
	struct cfgref *old = srv->cref;
	srv->cref = cref;
	srv->cfg = cfg;
	apply_http_limits(srv);
	exchange_reconfigure(srv);
	cfgref_put(old); /* freed once no request or lane uses it */
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "config_reloaded")) {
		log_str(&l, "config", cfg->source);
		log_int(&l, "providers", (long long)cfg->n_providers);
		log_int(&l, "plans", (long long)cfg->n_plans);
		log_int(&l, "lanes", (long long)registry_count(srv->reg));
		log_end(&l);
	}
}

void server_shutdown(struct server *srv, void (*drained)(void *), void *arg)
{
	srv->shutting_down = true;
	/* Close the listening socket: a disabled listener would still complete
	 * handshakes from its backlog, and those clients would wait for nothing. */
	if (srv->bound != NULL) {
		evhttp_del_accept_socket(srv->http, srv->bound);
		srv->bound = NULL;
		srv->listener = NULL;
	}
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
		exchange_abort(xr);
		if (!xr->response_started && xr->req != NULL)
			xreq_error(xr, 503, "shutting_down",
			           "pacerd stopped before the upstream answered", 1000);
		else
			xreq_close_client_now(xr);
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
		exchange_abort(xr);
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
	registry_free(srv->reg, exchange_lane_evicted, srv);
	if (srv->reap != NULL)
		event_free(srv->reap);
	if (srv->accept_retry != NULL)
		event_free(srv->accept_retry);
	if (srv->sweep != NULL)
		event_free(srv->sweep);
	cfgref_put(srv->cref);
	free(srv);
}
