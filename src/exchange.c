/* exchange — a request's way through its lane and to the upstream: queueing,
 * dispatch, the retry decision, and relaying the answer as it streams in.
 *
 * The decisions are made by the pure modules (sched, retry, ratelimit_headers,
 * tokens); this file only carries them out. Each lane has one timer, armed for
 * the earliest instant its state can change by itself (sched_wake_at): no
 * polling. Nothing here calls into libcurl from inside a libcurl callback:
 * on_up_headers and on_up_body only kick the lane timer, and dispatching
 * happens from intake, from on_up_done (which libcurl does not have on the
 * stack) or from the timer. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "headers.h"
#include "log.h"
#include "proxy.h"
#include "retry.h"

/* Bytes waiting in a client's output buffer above which the upstream transfer
 * is paused: the memory a slow reader can pin is about this plus one libcurl
 * buffer (16 KiB). */
#define STREAM_OUT_CAP (256 * 1024)
/* A JSON answer larger than this is relayed without reading its usage. */
#define USAGE_JSON_CAP (256 * 1024)

static const struct up_handler relay_handler;

static int64_t now_ms(void)
{
	return mono_ms();
}

/* xorshift64*: jitter needs speed and spread, not secrecy. */
static double rand_unit(struct server *srv)
{
	uint64_t x = srv->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	srv->rng = x;
	return (double)((x * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static void log_lane_event(struct xreq *xr, const char *event, enum log_level level, const char *k1,
                           long long v1)
{
	struct log_line l;
	if (!log_begin(&l, level, event))
		return;
	log_str(&l, "request_id", xr->request_id);
	log_str(&l, "provider", xr->route.provider->name);
	log_str(&l, "key", xr->key_id);
	if (xr->agent[0])
		log_str(&l, "agent", xr->agent);
	if (k1 != NULL)
		log_int(&l, k1, v1);
	log_end(&l);
}

static void log_limit_learned(struct xreq *xr)
{
	static const char *const names[RLH_N_BUDGETS] = {"requests", "tokens", "input_tokens",
	                                                 "output_tokens"};
	struct log_line l;
	if (!log_begin(&l, LOG_INFO, "limit_learned"))
		return;
	log_str(&l, "request_id", xr->request_id);
	log_str(&l, "provider", xr->route.provider->name);
	log_str(&l, "key", xr->key_id);
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		if (xr->lane->learned[b].n_obs == 0)
			continue;
		char line[256];
		learned_summary(&xr->lane->learned[b], xr->t_headers, line, sizeof(line));
		log_str(&l, names[b], line);
	}
	log_end(&l);
}

/* ---- the lane's timer ---- */

static void lane_pump(struct lane_shell *ls);

static void on_lane_timer(evutil_socket_t fd, short what, void *arg)
{
	struct lane_shell *ls = arg;
	(void)fd;
	(void)what;
	ls->armed_ms = SCHED_NEVER;
	lane_pump(ls);
}

static struct lane_shell *lane_shell_of(struct server *srv, struct sched_lane *lane)
{
	if (lane->shell != NULL)
		return lane->shell;
	struct lane_shell *ls = calloc(1, sizeof(*ls));
	if (ls == NULL)
		return NULL;
	ls->timer = evtimer_new(srv->base, on_lane_timer, ls);
	if (ls->timer == NULL) {
		free(ls);
		return NULL;
	}
	ls->srv = srv;
	ls->lane = lane;
	ls->cref = cfgref_get(srv->cref);
	ls->armed_ms = SCHED_NEVER;
	ls->last_limit = sched_concurrency_limit(lane);
	lane->shell = ls;
	return ls;
}

void exchange_lane_evicted(struct sched_lane *lane, void *arg)
{
	struct lane_shell *ls = lane->shell;
	(void)arg;
	if (ls == NULL)
		return;
	event_free(ls->timer);
	cfgref_put(ls->cref);
	free(ls);
	lane->shell = NULL;
}

static void lane_arm(struct lane_shell *ls, int64_t wake, int64_t now)
{
	if (wake == ls->armed_ms)
		return;
	ls->armed_ms = wake;
	if (wake == SCHED_NEVER) {
		evtimer_del(ls->timer);
		return;
	}
	int64_t d = wake > now ? wake - now : 0;
	struct timeval tv = {(time_t)(d / 1000), (suseconds_t)((d % 1000) * 1000)};
	evtimer_add(ls->timer, &tv);
}

/* Runs the lane on the next loop turn: safe from inside any callback. */
static void lane_kick(struct sched_lane *lane)
{
	struct lane_shell *ls = lane->shell;
	if (ls == NULL)
		return;
	ls->armed_ms = 0;
	event_active(ls->timer, EV_TIMEOUT, 1);
}

static void note_limit_change(struct lane_shell *ls, struct xreq *xr)
{
	unsigned limit = sched_concurrency_limit(ls->lane);
	if (limit == ls->last_limit)
		return;
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "concurrency_changed")) {
		log_str(&l, "request_id", xr->request_id);
		log_str(&l, "provider", ls->lane->provider->name);
		log_str(&l, "key", ls->lane->key_id);
		log_int(&l, "from", ls->last_limit);
		log_int(&l, "to", limit);
		log_end(&l);
	}
	ls->last_limit = limit;
}

/* ---- one attempt ---- */

static void reset_attempt(struct xreq *xr)
{
	xr->status = 0;
	xr->buffering = false;
	xr->no_retry_hdr = false;
	xr->sse = false;
	if (xr->held != NULL)
		evbuffer_drain(xr->held, evbuffer_get_length(xr->held));
	if (xr->json != NULL)
		evbuffer_drain(xr->json, evbuffer_get_length(xr->json));
	tokens_sse_free(&xr->sse_scan);
	tokens_sse_init(&xr->sse_scan);
	memset(&xr->rlh, 0, sizeof(xr->rlh));
	if (xr->req != NULL)
		evhttp_clear_headers(evhttp_request_get_output_headers(xr->req));
}

static void give_up_transport(struct xreq *xr, enum up_error err, const char *detail)
{
	snprintf(xr->up_detail, sizeof(xr->up_detail), "%s", detail ? detail : "");
	if (err == UP_TIMEOUT) {
		xreq_error(xr, 504, "upstream_timeout", "the upstream did not answer in time", -1);
		return;
	}
	char msg[256];
	snprintf(msg, sizeof(msg), "the upstream could not be reached: %s (%s)",
	         upstream_error_name(err), detail ? detail : "");
	xreq_error(xr, 502, "upstream_unreachable", msg, -1);
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
	reset_attempt(xr);
	xr->t_dispatch = now_ms();
	log_lane_event(xr, "acquired", LOG_DEBUG, "active_slots", (long long)xr->lane->in_flight);
	xr->xfer = upstream_start(xr->srv->up, &ur, &relay_handler, xr);
	if (xr->xfer == NULL) {
		sched_complete(xr->lane, &xr->item, SCHED_TRANSIENT, now_ms());
		xr->upstream_done = true;
		give_up_transport(xr, UP_INTERNAL, "cannot start the upstream transfer");
		xreq_maybe_free(xr);
	}
}

static void queue_timeout(struct xreq *xr)
{
	long long waited_s = (now_ms() - xr->item.arrived_ms) / 1000;
	log_lane_event(xr, "timeout", LOG_INFO, "timeout_s",
	               (long long)xr->lane->plan->queue.max_wait_s);
	char msg[160];
	snprintf(msg, sizeof(msg), "waited %llds in the queue of this key without being sent",
	         waited_s);
	xr->upstream_done = true;
	xreq_error(xr, 504, "queue_timeout", msg, -1);
	xreq_maybe_free(xr);
}

static void lane_pump(struct lane_shell *ls)
{
	struct sched_lane *lane = ls->lane;
	int64_t now = now_ms();
	struct sched_item *it;
	while ((it = sched_expired(lane, now)) != NULL)
		queue_timeout(XREQ_OF_ITEM(it));
	while ((it = sched_next(lane, now)) != NULL)
		dispatch(XREQ_OF_ITEM(it));
	lane_arm(ls, sched_wake_at(lane, now), now);
}

/* ---- entry ---- */

static uint64_t agent_hash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h ? h : 1;
}

void exchange_submit(struct xreq *xr)
{
	struct server *srv = xr->srv;
	int64_t now = now_ms();
	struct sched_lane *lane = registry_lane(srv->reg, srv->cfg, xr->route.provider,
	                                        xr->key_hash, now, exchange_lane_evicted, srv);
	struct lane_shell *ls = lane ? lane_shell_of(srv, lane) : NULL;
	if (ls == NULL) {
		xr->upstream_done = true;
		xreq_error(xr, 503, "too_many_keys",
		           "pacerd tracks as many API keys as limits.max_lanes allows", 1000);
		return;
	}
	xr->lane = lane;
	const struct plan_conf *plan = lane->plan;
	xr->retry_deadline = now + (int64_t)plan->retry.deadline_s * 1000;

	/* The token estimate parses the body: only when a token budget paces
	 * this lane. */
	struct tokens_cost cost = {0};
	if (sched_wants_tokens(lane)) {
		tokens_estimate(xr->body, xr->body_len, plan->default_output_tokens, &cost);
		xr->want_usage = true;
	}
	uint64_t agent = xr->agent[0] ? agent_hash(xr->agent) : 0;

	switch (
	    sched_submit(lane, &xr->item, (double)cost.prompt, (double)cost.output, agent, now)) {
	case SCHED_OK:
		break;
	case SCHED_QUEUE_FULL: {
		int64_t eta = sched_queue_eta_ms(lane, now);
		/* Every SDK honours a hint up to 60 s (PROVIDERS.md §8). */
		if (eta < 1000)
			eta = 1000;
		if (eta > 60000)
			eta = 60000;
		xr->upstream_done = true;
		log_lane_event(xr, "rejected", LOG_INFO, "queue_depth", (long long)lane->q_depth);
		xreq_error(xr, 503, "queue_full", "the queue of this API key is full", eta);
		return;
	}
	case SCHED_AGENT_BUSY:
		xr->upstream_done = true;
		log_lane_event(xr, "rejected", LOG_INFO, NULL, 0);
		xreq_error(xr, 409, "agent_busy",
		           "this agent already has a request in flight (agents.mode: reject)", -1);
		return;
	}
	if (lane->q_depth > 1 || lane->in_flight >= sched_concurrency_limit(lane))
		log_lane_event(xr, "queueing", LOG_DEBUG, "queue_depth", (long long)lane->q_depth);
	lane_pump(ls);
}

static void reconfigure_lane(struct sched_lane *lane, void *arg)
{
	struct server *srv = arg;
	struct lane_shell *ls = lane->shell;
	const struct provider_conf *prov = config_provider(srv->cfg, lane->provider->name);
	if (ls == NULL || prov == NULL)
		return; /* its provider is gone: it keeps its old plan until it empties */
	lane->provider = prov;
	lane->agents_mode = srv->cfg->agents.mode;
	sched_lane_set_plan(lane, registry_plan_for(srv->cfg, prov, lane->key_hash), mono_ms());
	cfgref_put(ls->cref);
	ls->cref = cfgref_get(srv->cref);
	lane_kick(lane); /* the new limits may open a gate now */
}

void exchange_reconfigure(struct server *srv)
{
	registry_foreach(srv->reg, reconfigure_lane, srv);
}

void exchange_abort(struct xreq *xr)
{
	if (xr->upstream_done)
		return;
	if (xr->xfer != NULL) {
		upstream_abort(xr->xfer);
		xr->xfer = NULL;
		sched_complete(xr->lane, &xr->item, SCHED_ABORTED, now_ms());
	} else if (xr->lane != NULL) {
		sched_cancel(xr->lane, &xr->item);
	}
	xr->upstream_done = true;
	if (xr->lane != NULL)
		lane_kick(xr->lane);
}

/* ---- relaying ---- */

static bool copy_header(struct evkeyvalq *out, const struct up_header *h, const char *connection)
{
	if (!hdr_forward_response(h->name, connection))
		return true;
	return evhttp_add_header(out, h->name, h->value) == 0;
}

static const char *find_header(const struct up_header *h, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(h[i].name, name) == 0)
			return h[i].value;
	return NULL;
}

/* Whether an answer might be retried: it is then held back (at most
 * RETRY_BODY_CAP) until the whole error body is known. */
static bool maybe_retryable(int status)
{
	return status == 402 || status == 408 || status == 409 || status == 429 || status >= 500;
}

static void start_response(struct xreq *xr)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(xr->req);
	if (xr->no_retry_hdr) {
		evhttp_remove_header(out, "x-should-retry");
		evhttp_add_header(out, "x-should-retry", "false");
	}
	proxy_add_pacer_headers(out, xr->request_id, (int)xr->item.attempts,
	                        xr->t_dispatch - xr->item.arrived_ms);
	if (xr->srv->shutting_down)
		evhttp_add_header(out, "connection", "close");
	xreq_stop_close_watch(xr); /* evhttp watches the connection while it writes */
	/* A long stream to a client that sends nothing must not hit the read
	 * timeout (libevent #715): only a stuck write counts while we answer. */
	struct timeval tv = {(time_t)xr->srv->cfg->limits.client_timeout_s, 0};
	bufferevent_set_timeouts(evhttp_connection_get_bufferevent(xr->evcon), NULL, &tv);
	xr->response_started = true;
	evhttp_send_reply_start(xr->req, xr->status,
	                        xr->held_reason[0] ? xr->held_reason
	                                           : proxy_status_reason(xr->status));
}

static bool on_up_headers(void *ctx, int status, const char *reason, const struct up_header *h,
                          size_t n)
{
	struct xreq *xr = ctx;
	if (xr->req == NULL || xr->evcon == NULL)
		return false;
	xr->t_headers = now_ms();
	xr->status = status;
	snprintf(xr->held_reason, sizeof(xr->held_reason), "%s", reason);

	struct rlh_header rh[128];
	size_t nr = 0;
	for (size_t i = 0; i < n && nr < sizeof(rh) / sizeof(rh[0]); i++)
		rh[nr++] = (struct rlh_header){h[i].name, h[i].value, h[i].value_len};
	rlh_parse(xr->route.provider->dialect, rh, nr, log_wall_ms(), &xr->rlh);
	if (sched_observe(xr->lane, &xr->item, &xr->rlh, xr->t_headers))
		log_limit_learned(xr);
	lane_kick(xr->lane); /* what was learned may move the lane's next instant */

	struct evkeyvalq *out = evhttp_request_get_output_headers(xr->req);
	evhttp_clear_headers(out);
	const char *connection = find_header(h, n, "connection");
	for (size_t i = 0; i < n; i++)
		if (!copy_header(out, &h[i], connection))
			return false;

	const char *ctype = find_header(h, n, "content-type");
	xr->sse =
	    xr->want_usage && ctype != NULL && strncasecmp(ctype, "text/event-stream", 17) == 0;

	if (maybe_retryable(status)) {
		xr->buffering = true;
		return true;
	}
	start_response(xr);
	return true;
}

static void on_client_drained(struct evhttp_connection *evcon, void *arg)
{
	struct xreq *xr = arg;
	(void)evcon;
	if (xr->abort_when_drained) {
		xreq_close_client_now(xr);
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

static void note_usage_bytes(struct xreq *xr, const char *data, size_t len)
{
	if (!xr->want_usage)
		return;
	if (xr->sse) {
		tokens_sse_feed(&xr->sse_scan, data, len);
		return;
	}
	if (xr->json == NULL)
		xr->json = evbuffer_new();
	if (xr->json != NULL && evbuffer_get_length(xr->json) + len <= USAGE_JSON_CAP)
		evbuffer_add(xr->json, data, len);
}

static void send_chunk(struct xreq *xr, const char *data, size_t len)
{
	evbuffer_add(xr->chunk, data, len);
	xr->bytes_out += len;
	evhttp_send_reply_chunk_with_cb(xr->req, xr->chunk, on_client_drained, xr);
}

static bool on_up_body(void *ctx, const char *data, size_t len)
{
	struct xreq *xr = ctx;
	if (xr->req == NULL || xr->evcon == NULL)
		return true; /* the client is gone; the transfer is being aborted */
	if (xr->buffering) {
		if (xr->held == NULL)
			xr->held = evbuffer_new();
		if (xr->held != NULL && evbuffer_get_length(xr->held) + len <= RETRY_BODY_CAP) {
			evbuffer_add(xr->held, data, len);
			return true;
		}
		/* Too large for an error body worth deciding on: relay it as is. */
		xr->buffering = false;
		start_response(xr);
		if (xr->held != NULL && evbuffer_get_length(xr->held) > 0) {
			xr->bytes_out += evbuffer_get_length(xr->held);
			evhttp_send_reply_chunk_with_cb(xr->req, xr->held, on_client_drained, xr);
		}
	}
	if (client_backlog(xr) >= STREAM_OUT_CAP) {
		/* Slow reader: hold the upstream until evhttp drains the buffer. */
		xr->paused = true;
		return false;
	}
	note_usage_bytes(xr, data, len);
	send_chunk(xr, data, len);
	return true;
}

/* The real token usage corrects the token gate by the difference. */
static void settle_tokens(struct xreq *xr)
{
	if (!xr->want_usage)
		return;
	struct tokens_usage u;
	memset(&u, 0, sizeof(u));
	if (xr->sse) {
		u = xr->sse_scan.usage;
	} else if (xr->json != NULL && evbuffer_get_length(xr->json) > 0) {
		size_t n = evbuffer_get_length(xr->json);
		tokens_usage_json((const char *)evbuffer_pullup(xr->json, -1), n, &u);
	}
	if (u.present)
		sched_tokens_used(xr->lane, &xr->item, (double)u.total, now_ms());
}

static void relay_held(struct xreq *xr)
{
	start_response(xr);
	if (xr->held != NULL && evbuffer_get_length(xr->held) > 0) {
		xr->bytes_out += evbuffer_get_length(xr->held);
		evhttp_send_reply_chunk(xr->req, xr->held);
	}
	evhttp_send_reply_end(xr->req);
}

static enum sched_outcome outcome_of(enum retry_class cls)
{
	switch (cls) {
	case RETRY_CAPACITY:
		return SCHED_CAPACITY;
	case RETRY_TRANSIENT:
		return SCHED_TRANSIENT;
	case RETRY_FINAL:
	case RETRY_FINAL_NO_RETRY:
		break;
	}
	return SCHED_SUCCESS;
}

static enum retry_transport transport_of(enum up_error err)
{
	switch (err) {
	case UP_CONNECT:
	case UP_TLS:
		return RETRY_TRANSPORT_CONNECT;
	case UP_TIMEOUT:
		return RETRY_TRANSPORT_TIMEOUT;
	default:
		return RETRY_TRANSPORT_RESET;
	}
}

/* The answer was an error that may be retried (held back), or no answer at
 * all: retry after the delay, or relay / answer it now. */
static void decide(struct xreq *xr, enum up_error err, const char *detail)
{
	int64_t now = now_ms();
	const char *body = NULL;
	size_t body_len = 0;
	if (err == UP_OK && xr->held != NULL) {
		body_len = evbuffer_get_length(xr->held);
		body = body_len ? (const char *)evbuffer_pullup(xr->held, -1) : NULL;
	}
	const char *why = NULL;
	enum retry_class cls =
	    err == UP_OK
	        ? retry_classify(xr->status, RETRY_TRANSPORT_NONE, &xr->rlh, body, body_len, &why)
	        : retry_classify(0, transport_of(err), NULL, NULL, 0, &why);

	struct lane_shell *ls = xr->lane->shell;
	sched_complete(xr->lane, &xr->item, outcome_of(cls), now);
	note_limit_change(ls, xr);

	struct retry_decision d = {.retry = false, .no_retry_hdr = cls == RETRY_FINAL_NO_RETRY};
	int64_t hint = -1;
	if (cls == RETRY_CAPACITY || cls == RETRY_TRANSIENT) {
		struct rlh_body_hint bh;
		rlh_body_hint(body, body_len, &bh);
		bool has_hint = err == UP_OK && rlh_server_hint(&xr->rlh, &bh, &hint);
		d = retry_decide(cls, xr->item.attempts, has_hint, hint, xr->lane->plan,
		                 xr->retry_deadline - now, rand_unit(xr->srv));
		/* A capacity hint speaks for the whole key: nothing of this lane
		 * goes before it ends (the provider would refuse it anyway). */
		if (cls == RETRY_CAPACITY && has_hint && hint > 0)
			sched_hold(xr->lane, now + hint);
	}
	if (d.retry) {
		struct log_line l;
		if (log_begin(&l, LOG_INFO, "retry")) {
			log_str(&l, "request_id", xr->request_id);
			log_str(&l, "provider", xr->route.provider->name);
			log_str(&l, "key", xr->key_id);
			if (xr->agent[0])
				log_str(&l, "agent", xr->agent);
			log_int(&l, "attempt", xr->item.attempts);
			log_int(&l, "status_code", err == UP_OK ? xr->status : 0);
			if (err != UP_OK)
				log_str(&l, "upstream_error", upstream_error_name(err));
			log_str(&l, "class", retry_class_name(cls));
			log_str(&l, "reason", why);
			log_num(&l, "delay_s", (double)d.delay_ms / 1000.0);
			log_int(&l, "concurrency", sched_concurrency_limit(xr->lane));
			log_int(&l, "dispatch_delay_ms", aimd_delay_ms(&xr->lane->delay));
			log_end(&l);
		}
		reset_attempt(xr);
		sched_retry(xr->lane, &xr->item, now + d.delay_ms);
		lane_pump(ls);
		return;
	}
	xr->upstream_done = true;
	xr->no_retry_hdr = d.no_retry_hdr;
	if (err == UP_OK)
		relay_held(xr);
	else
		give_up_transport(xr, err, detail);
	lane_pump(ls);
}

static void on_up_done(void *ctx, enum up_error err, const char *detail)
{
	struct xreq *xr = ctx;
	xr->xfer = NULL;
	xr->up_error = err;

	if (xr->req == NULL) { /* the client left; exchange_abort ran already */
		xreq_maybe_free(xr);
		return;
	}
	if (!xr->response_started) {
		decide(xr, err, detail);
		xreq_maybe_free(xr);
		return;
	}
	/* Streamed answer: its bytes reached the client, so it is final. */
	int64_t now = now_ms();
	enum sched_outcome outcome = SCHED_SUCCESS;
	if (xr->status == 429 || xr->status == 503 || xr->status == 529)
		outcome = SCHED_CAPACITY;
	else if (err != UP_OK)
		outcome = SCHED_TRANSIENT;
	sched_complete(xr->lane, &xr->item, outcome, now);
	note_limit_change(xr->lane->shell, xr);
	if (err == UP_OK)
		settle_tokens(xr);
	xr->upstream_done = true;
	log_lane_event(xr, "released", LOG_DEBUG, "active_slots", (long long)xr->lane->in_flight);
	if (err == UP_OK) {
		evhttp_send_reply_end(xr->req);
	} else if (xr->evcon != NULL) {
		/* Cut mid-body: the client must see an incomplete message, not a
		 * clean end; deliver what arrived, then close. */
		log_msg(LOG_WARN, "upstream_aborted", detail);
		xr->abort_when_drained = true;
		if (client_backlog(xr) == 0)
			xreq_close_client_now(xr);
	}
	lane_pump(xr->lane->shell);
	xreq_maybe_free(xr);
}

static const struct up_handler relay_handler = {
    .on_headers = on_up_headers,
    .on_body = on_up_body,
    .on_done = on_up_done,
};
