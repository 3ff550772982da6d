/* SPDX-License-Identifier: Apache-2.0 */
/* server — the proxy's front: its HTTP server (httpd), intake (the request's
 * header fields read once, intake.h; what pacerd answers before a request
 * reaches a lane: shutting down, TRACE, no provider, a host that is not
 * configured), CONNECT (a provider's host terminated with the CA, a
 * forward.tunnel host handed to blind.c, anything else 403), and the
 * daemon-level life of configurations. A routed request, with its key found
 * and hashed, is handed to the exchange, whether it came in clear or through
 * a tunnel. See server.h. */
#include "proxy/server.h"

#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#include "core/ca.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/priority.h"
#include "http/connect.h"
#include "http/headers.h"
#include "http/httpd.h"
#include "http/tls.h"
#include "provider/profile.h"
#include "proxy/blind.h"
#include "proxy/exchange.h"
#include "proxy/intake.h"
#include "proxy/persist.h"
#include "proxy/route.h"
#include "proxy/upstream.h"
#include "proxy/wsrelay.h"

/* Memory follows recent demand, not the highest concurrency ever seen. The
 * pools of client connections, exchanges and libcurl transfers keep what a
 * burst needed, for reuse (no allocation per request once warm); kept for
 * good, they would hold about 7 KiB per request ever in flight at once, and
 * the heap the pages the peak had needed (docs/development.md, the soak). So
 * every TRIM_S each pool frees what stayed unused for the whole interval, and
 * once nothing has been in flight for IDLE_TRIM_MS the pools are emptied;
 * then malloc_trim hands the free pages inside the heap back to the kernel
 * (glibc by itself returns only the top of the heap). */
#define TRIM_S 60
#define IDLE_TRIM_MS 500

struct server {
	struct event_base *base;
	struct config_ref *cref; /* the configuration in force */
	struct httpd *http;
	struct exchanges *xs;
	struct upstream *up;
	struct event *trim;
	struct event *drain_check;
	bool shutting_down;
	void (*drained)(void *);
	void *drained_arg;
	struct ca *ca;           /* NULL: tunnels cannot be terminated (ca_unavailable) */
	SSL_CTX *tls_ctx;        /* with ca */
	uint64_t denied;         /* CONNECTs refused (403) */
	struct blind *blind;     /* tunnels passed through (forward.tunnel) */
	struct persist *persist; /* the lanes' state across restarts (persist.h) */
	struct wsrelay *ws;      /* WebSocket transports */
};

static void http_conf_of(const struct config *cfg, struct httpd_conf *hc)
{
	hc->max_header_bytes = cfg->limits.max_header_bytes;
	hc->max_body_bytes = cfg->limits.max_body_bytes;
	hc->max_upload_bytes = cfg->limits.max_upload_bytes;
	hc->max_connections = cfg->limits.max_connections;
	hc->client_timeout_s = cfg->limits.client_timeout_s;
}

/* An answer of intake's own (no lane involved). */
static void reply_early(struct hreq *r, int status, const char *code, const char *message,
                        long long retry_after_s)
{
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "rejected")) {
		log_str(&l, "request_id", hreq_id(r));
		log_int(&l, "status", status);
		log_str(&l, "error", code);
		log_end(&l);
	}
	struct hhdr h[4];
	size_t n = 0;
	h[n++] = (struct hhdr){"x-pacer-attempts", 16, "0", 1};
	h[n++] = (struct hhdr){"x-pacer-queue-ms", 16, "0", 1};
	char ra[24], ra_ms[24];
	if (retry_after_s >= 0) {
		h[n++] =
		    (struct hhdr){"retry-after", 11, ra, hhdr_u64(ra, (uint64_t)retry_after_s)};
		h[n++] = (struct hhdr){"retry-after-ms", 14, ra_ms,
		                       hhdr_u64(ra_ms, (uint64_t)retry_after_s * 1000)};
	}
	hreq_error(r, status, code, message, h, n);
}

/* The key comes from the provider's key header first; failing that from the
 * other places its profile says a key may travel (profile.h). */
static bool key_from(const struct route *route, const struct intake_headers *ih,
                     enum key_source src, const char **key, size_t *key_len)
{
	if (src == KEY_QUERY_KEY) {
		const char *q = memchr(route->path, '?', route->path_len);
		return q != NULL &&
		       profile_key_from_query(
		           q + 1, route->path_len - (size_t)(q + 1 - route->path), key, key_len);
	}
	return profile_key_from_header(src, intake_header(ih, profile_key_header(src)), key,
	                               key_len);
}

static bool find_key(const struct route *route, const struct intake_headers *ih,
                     char hash[KEYID_HEX + 1])
{
	const struct provider_profile *pp = profile_of(route->provider);
	const char *key = NULL;
	size_t key_len = 0;
	bool found = key_from(route, ih, route->provider->key_source, &key, &key_len);
	for (size_t i = 0; !found && i < pp->n_key_fallbacks; i++)
		found = key_from(route, ih, pp->key_fallbacks[i], &key, &key_len);
	if (found)
		keyid_hash(key, key_len, hash);
	return found;
}

/* FNV-1a of "kind:s": an agent named like an address is another flow. Never
 * 0 (0 means none). */
static uint64_t id_hash(const char *kind, const char *s)
{
	uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, kind, strlen(kind));
	h = hash_fnv1a(hash_fnv1a(h, ":", 1), s, strlen(s));
	return h ? h : 1;
}

/* The request's own x-pacer-priority, else its agent's configured one, else
 * 0. False when the header is there but not a priority. */
static bool request_priority(const struct config *cfg, const struct intake_headers *ih,
                             const char *agent, int *priority)
{
	const char *h = ih->value[IF_X_PACER_PRIORITY];
	*priority = 0;
	if (h != NULL)
		return priority_parse(h, priority);
	if (agent != NULL)
		config_agent_priority(cfg, agent, priority);
	return true;
}

/* Whose turn a request waits for inside its priority (agents.fair_share). A
 * connection without a known address (never from the listener) shares 0. */
static uint64_t fair_share_flow(enum fair_share by, uint64_t agent_id, const char *peer)
{
	uint64_t address = peer[0] != '\0' ? id_hash("address", peer) : 0;
	switch (by) {
	case FAIR_AGENT_OR_ADDRESS:
		return agent_id != 0 ? agent_id : address;
	case FAIR_AGENT:
		return agent_id;
	case FAIR_ADDRESS:
		return address;
	case FAIR_OFF:
		break;
	}
	return 0;
}

/* CONNECT host:port (DESIGN §2): a provider's host is terminated here with a
 * certificate of pacerd's CA, and its requests go through the same intake as
 * any; a host in forward.tunnel passes blindly; anything else is 403. Every
 * refusal closes the connection: the client expected a tunnel on it. */
static void on_connect(struct server *srv, struct hreq *r)
{
	const struct config *cfg = srv->cref->cfg;
	struct connect_target t;
	hreq_close_after(r);
	if (hreq_tunnel_host(r) != NULL) {
		reply_early(r, 400, "bad_request", "CONNECT inside a tunnel", -1);
		return;
	}
	if (!connect_parse(hreq_target(r), hreq_target_len(r), &t)) {
		reply_early(r, 400, "bad_request", "CONNECT needs host:port as its target", -1);
		return;
	}
	const struct provider_conf *prov = NULL;
	switch (route_connect(cfg, t.host, t.port, &prov)) {
	case CONNECT_TERMINATE:
		break;
	case CONNECT_BLIND:
		blind_open(srv->blind, r, t.host, t.port);
		return;
	case CONNECT_DENY:
		srv->denied++;
		reply_early(
		    r, 403, "host_not_allowed",
		    "CONNECT only to a configured provider's host on port 443 (or a host in "
		    "forward.tunnel); pacerd is not an open proxy",
		    -1);
		return;
	}
	X509 *leaf = srv->ca != NULL ? ca_leaf(srv->ca, t.host) : NULL;
	SSL *ssl = leaf != NULL
	               ? tls_conn_new(srv->tls_ctx, leaf, ca_leaf_key(srv->ca), ca_cert(srv->ca))
	               : NULL;
	if (ssl == NULL) {
		reply_early(r, 503, "ca_unavailable",
		            srv->ca == NULL ? "pacerd has no CA to terminate tunnels with (see the "
		                              "ca_unavailable line at start, or `pacerd ca`)"
		                            : "no certificate could be made for this host",
		            -1);
		return;
	}
	struct log_line l;
	if (log_begin(&l, LOG_DEBUG, "tunnel")) {
		log_str(&l, "request_id", hreq_id(r));
		log_str(&l, "host", t.host);
		log_str(&l, "provider", prov->name);
		log_str(&l, "mode", "terminate");
		log_end(&l);
	}
	hreq_tunnel_tls(r, ssl, t.host);
}

/* An upload's body streams upstream as it arrives (route_streams_body). */
static bool streams_body(const struct hreq *r, void *arg)
{
	const struct server *srv = arg;
	return route_streams_body(srv->cref->cfg, hreq_method(r), hreq_target(r),
	                          hreq_tunnel_host(r));
}

static void on_request(struct hreq *r, void *arg)
{
	struct server *srv = arg;
	const struct config *cfg = srv->cref->cfg;
	const char *method = hreq_method(r);

	if (srv->shutting_down) {
		reply_early(r, 503, "shutting_down", "pacerd is shutting down", 1);
		return;
	}
	if (strcmp(method, "CONNECT") == 0) {
		on_connect(srv, r);
		return;
	}
	if (strcmp(method, "TRACE") == 0) {
		reply_early(r, 405, "method_not_allowed", "TRACE is not forwarded", -1);
		return;
	}
	/* The one pass over the header fields: everything below reads ih. */
	struct intake_headers ih;
	intake_headers_read(&ih, r, cfg->agents.header);
	if (ih.hosts > 1) {
		/* RFC 9112 §3.2: a server must answer 400 to more than one Host
		 * field; an intermediary could route by either. */
		reply_early(r, 400, "bad_request", "more than one Host header field", -1);
		return;
	}

	struct exchange_intake in = {.cref = srv->cref, .headers = &ih};
	const char *tunnel = hreq_tunnel_host(r);
	enum route_status rs = tunnel != NULL
	                           ? route_resolve_tunnel(cfg, tunnel, hreq_target(r), &in.route)
	                           : route_resolve(cfg, hreq_target(r), &in.route);
	switch (rs) {
	case ROUTE_OK:
		break;
	case ROUTE_NO_PROVIDER:
		reply_early(r, 404, "unknown_provider", "no provider is configured for this path",
		            -1);
		return;
	case ROUTE_HOST_NOT_ALLOWED:
		reply_early(r, 403, "host_not_allowed",
		            "this host is not a configured provider; pacerd is not an open proxy",
		            -1);
		return;
	case ROUTE_BAD_TARGET:
		reply_early(r, 400, "bad_request", "malformed request target", -1);
		return;
	case ROUTE_UNSAFE_PATH:
		reply_early(r, 400, "bad_request",
		            "the path has a dot segment, an encoded slash or backslash, or begins "
		            "with //; pacerd does not forward it",
		            -1);
		return;
	}
	char hash[KEYID_HEX + 1];
	if (find_key(&in.route, &ih, hash))
		in.key_hash = hash;
	in.agent = ih.agent != NULL && ih.agent[0] != '\0' ? ih.agent : NULL;
	if (!request_priority(cfg, &ih, in.agent, &in.priority)) {
		reply_early(r, 400, "invalid_priority",
		            "x-pacer-priority must be an integer from -100 to 100", -1);
		return;
	}
	in.agent_id = in.agent != NULL ? id_hash("agent", in.agent) : 0;
	in.flow = fair_share_flow(cfg->agents.fair_share, in.agent_id, hreq_peer(r));
	if (wsrelay_wanted(r, ih.value[IF_CONNECTION])) {
		wsrelay_start(srv->ws, r, &in); /* in a tunnel too: over its TLS */
		return;
	}
	exchange_start(srv->xs, r, &in);
}

/* ---- lifecycle ---- */

/* Drained once no request is in flight and every answer has been written (or
 * its client left); idle keep-alive connections do not hold the drain. */
static void on_drain_check(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	(void)fd;
	(void)what;
	struct httpd_stats st;
	httpd_get_stats(srv->http, &st);
	if (st.busy > 0 || exchanges_live(srv->xs) > 0 || wsrelay_live(srv->ws) > 0 ||
	    srv->drained == NULL)
		return;
	void (*drained)(void *) = srv->drained;
	srv->drained = NULL;
	event_del(srv->drain_check);
	drained(srv->drained_arg);
}

static void trim_memory(struct server *srv, bool all)
{
	size_t n =
	    httpd_trim(srv->http, all) + exchanges_trim(srv->xs, all) + upstream_trim(srv->up, all);
#ifdef __GLIBC__
	if (n > 0)
		malloc_trim(0);
#else
	(void)n;
#endif
}

static void on_trim(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	trim_memory(arg, false);
}

static void on_idle(void *arg)
{
	trim_memory(arg, true);
}

struct server *server_new(struct event_base *base, struct config *cfg, struct upstream *up,
                          char *err, size_t errlen)
{
	struct server *srv = calloc(1, sizeof(*srv));
	struct config_ref *cref = config_ref_new(cfg);
	if (srv == NULL || cref == NULL) {
		snprintf(err, errlen, "out of memory");
		free(srv);
		if (cref != NULL)
			config_ref_put(cref);
		return NULL;
	}
	srv->base = base;
	srv->cref = cref;
	srv->up = up;
	srv->xs = exchanges_new(base, up, cref, err, errlen);
	if (srv->xs == NULL) {
		server_free(srv);
		return NULL;
	}
	srv->ws = wsrelay_new(base, exchanges_lane_table(srv->xs), cref, err, errlen);
	if (srv->ws == NULL) {
		server_free(srv);
		return NULL;
	}
	srv->blind = blind_new(base, err, errlen);
	if (srv->blind == NULL) {
		server_free(srv);
		return NULL;
	}
	blind_set_limits(srv->blind, cfg->limits.max_connections, cfg->limits.client_timeout_s);
	srv->drain_check = event_new(base, -1, EV_PERSIST, on_drain_check, srv);
	srv->trim = event_new(base, -1, EV_PERSIST, on_trim, srv);
	if (srv->drain_check == NULL || srv->trim == NULL) {
		snprintf(err, errlen, "out of memory");
		server_free(srv);
		return NULL;
	}
	struct httpd_conf hc;
	http_conf_of(cfg, &hc);
	srv->http = httpd_new(base, cfg->listen, &hc, on_request, srv, err, errlen);
	if (srv->http == NULL) {
		server_free(srv);
		return NULL;
	}
	httpd_set_streaming(srv->http, streams_body, srv);
	struct timeval tv = {TRIM_S, 0};
	event_add(srv->trim, &tv);
	exchanges_on_idle(srv->xs, IDLE_TRIM_MS, on_idle, srv);
	return srv;
}

const struct config *server_config(const struct server *srv)
{
	return srv->cref->cfg;
}

static bool same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The store is read at start: a reload that changes any of its settings (its
 * password too, read from its file or variable again) only warns. */
static bool store_conf_changed(const struct config *a, const struct config *b)
{
#define SAME_STR(f) same_str(a->store.redis.f, b->store.redis.f)
#define SAME(f) (a->store.redis.f == b->store.redis.f)
	return a->store.kind != b->store.kind || !SAME_STR(address) || !SAME_STR(key_prefix) ||
	       !SAME(timeout_ms) || !SAME(on_error) || !SAME(replicas) || !SAME(lease_ms) ||
	       !SAME_STR(username) || !SAME_STR(password) || !SAME_STR(resolv_conf) ||
	       !SAME(tls.enabled) || !SAME_STR(tls.ca_file) || !SAME_STR(tls.server_name) ||
	       !SAME_STR(tls.cert_file) || !SAME_STR(tls.key_file);
#undef SAME
#undef SAME_STR
}

void server_reload(struct server *srv, struct config *cfg)
{
	const struct config *cur = srv->cref->cfg;
	if (strcmp(cfg->listen, cur->listen) != 0) {
		struct log_line l;
		if (log_begin(&l, LOG_WARN, "config_reload")) {
			log_str(&l, "message", "a new listen address takes effect at restart");
			log_str(&l, "listen", cur->listen);
			log_str(&l, "configured", cfg->listen);
			log_end(&l);
		}
		/* Keep describing the socket actually bound. */
		char *keep = strdup(cur->listen);
		if (keep != NULL) {
			free(cfg->listen);
			cfg->listen = keep;
		}
	}
	if (store_conf_changed(cfg, cur))
		log_msg(LOG_WARN, "config_reload",
		        "a changed store section takes effect at restart; the running store stays");
	if (strcmp(cfg->forward.ca_cert, cur->forward.ca_cert) != 0 ||
	    strcmp(cfg->forward.ca_key, cur->forward.ca_key) != 0 ||
	    (cfg->forward.intercept && !cur->forward.intercept && srv->ca == NULL))
		log_msg(LOG_WARN, "config_reload",
		        "a changed CA (forward.ca_cert, ca_key) takes effect at restart; "
		        "the running CA stays");
	if (strcmp(cfg->state_dir, cur->state_dir) != 0)
		log_msg(LOG_WARN, "config_reload",
		        "a changed state_dir takes effect at restart (the CA and lanes.state stay "
		        "where they are)");
	struct config_ref *cref = config_ref_new(cfg);
	if (cref == NULL) {
		log_msg(LOG_ERROR, "config_reload_failed",
		        "out of memory; the running configuration stays");
		return;
	}
	struct config_ref *old = srv->cref;
	srv->cref = cref;
	struct httpd_conf hc;
	http_conf_of(cfg, &hc);
	httpd_set_conf(srv->http, &hc);
	blind_set_limits(srv->blind, cfg->limits.max_connections, cfg->limits.client_timeout_s);
	exchanges_reconfigure(srv->xs, cref);
	wsrelay_reconfigure(srv->ws, cref);
	config_ref_put(old); /* freed once no request or lane uses it */
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "config_reloaded")) {
		log_str(&l, "config", cfg->source);
		log_int(&l, "providers", (long long)cfg->n_providers);
		log_int(&l, "plans", (long long)cfg->n_plans);
		log_int(&l, "lanes", (long long)exchanges_lane_count(srv->xs));
		log_end(&l);
	}
}

void server_shutdown(struct server *srv, void (*drained)(void *), void *arg)
{
	srv->shutting_down = true;
	httpd_shutdown(srv->http);
	wsrelay_shutdown(srv->ws);
	srv->drained = drained;
	srv->drained_arg = arg;
	/* Polled every 20 ms rather than hooked into every close: a drain
	 * happens once in a process's life. */
	struct timeval tv = {0, 20 * 1000};
	event_add(srv->drain_check, &tv);
	event_active(srv->drain_check, EV_TIMEOUT, 1);
}

void server_abort_all(struct server *srv)
{
	wsrelay_abort_all(srv->ws);
	exchanges_abort_all(srv->xs);
}

void server_get_stats(const struct server *srv, struct server_stats *st)
{
	struct httpd_stats hs;
	httpd_get_stats(srv->http, &hs);
	memcpy(st->responses, hs.responses, sizeof(st->responses));
	st->connections = hs.connections;
	st->accepted = hs.accepted;
	st->in_flight = exchanges_live(srv->xs);
	st->draining = srv->shutting_down;
}

int server_set_ca(struct server *srv, struct ca *ca, char *err, size_t errlen)
{
	SSL_CTX *ctx = tls_server_ctx_new(err, errlen);
	if (ctx == NULL) {
		ca_free(ca);
		return -1;
	}
	if (srv->tls_ctx != NULL)
		SSL_CTX_free(srv->tls_ctx);
	ca_free(srv->ca);
	srv->ca = ca;
	srv->tls_ctx = ctx;
	return 0;
}

void server_get_tunnel_stats(const struct server *srv, struct server_tunnel_stats *st)
{
	struct httpd_stats hs;
	httpd_get_stats(srv->http, &hs);
	st->terminated = hs.tunnels;
	st->open = hs.tunnels_open;
	st->handshakes = hs.handshakes;
	st->handshake_failures = hs.handshake_failures;
	st->requests = hs.tunnel_requests;
	st->denied = srv->denied;
	struct blind_stats bs;
	blind_get_stats(srv->blind, &bs);
	st->blind = bs.opened;
	st->blind_open = bs.open;
	st->blind_failed = bs.failed;
	st->ca = srv->ca != NULL;
	st->leaves = srv->ca != NULL ? ca_leaves(srv->ca) : 0;
}

bool server_draining(const struct server *srv)
{
	return srv->shutting_down;
}

size_t server_in_flight(const struct server *srv)
{
	return exchanges_live(srv->xs);
}

const struct wsrelay *server_websockets(const struct server *srv)
{
	return srv->ws;
}

struct registry *server_lanes(const struct server *srv)
{
	return exchanges_lanes(srv->xs);
}

struct shared *server_shared(const struct server *srv)
{
	return exchanges_shared(srv->xs);
}

const struct reqstats *server_metrics(const struct server *srv)
{
	return exchanges_metrics(srv->xs);
}

const struct rewrites *server_rewrites(const struct server *srv)
{
	return exchanges_rewrites(srv->xs);
}

void server_keep_state(struct server *srv, const char *dir, const char *from)
{
	if (srv->persist != NULL)
		return;
	srv->persist = persist_open(srv->base, exchanges_lane_table(srv->xs), dir, from,
	                            (int64_t)server_config(srv)->limits.idle_ttl_s * 1000);
}

void server_save_state(struct server *srv)
{
	persist_save_now(srv->persist);
}

const struct persist *server_persist(const struct server *srv)
{
	return srv->persist;
}

void server_free(struct server *srv)
{
	if (srv == NULL)
		return;
	/* Its thread joined before the lanes it snapshots go. */
	persist_free(srv->persist);
	srv->persist = NULL;
	/* Connections first: requests still open are told their client is gone
	 * and end their exchanges; then the lanes. */
	if (srv->xs != NULL)
		exchanges_on_idle(srv->xs, 0, NULL, NULL);
	httpd_free(srv->http);
	if (srv->blind != NULL)
		blind_free(srv->blind);
	wsrelay_free(srv->ws); /* its turns leave the lanes first */
	exchanges_free(srv->xs);
	if (srv->drain_check != NULL)
		event_free(srv->drain_check);
	if (srv->trim != NULL)
		event_free(srv->trim);
	if (srv->tls_ctx != NULL)
		SSL_CTX_free(srv->tls_ctx);
	ca_free(srv->ca);
	config_ref_put(srv->cref);
	free(srv);
}
