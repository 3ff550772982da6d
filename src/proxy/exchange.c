/* SPDX-License-Identifier: Apache-2.0 */
/* exchange — one request's life: from intake to its lane, to the upstream,
 * and back to the client, as the answer streams in.
 *
 * The request's state is one enum (enum xstate) that every step checks
 * (set_state: the allowed transitions of xstate.c, asserted in every
 * build), and finish() tears down by it:
 *
 *   NEW        exchange_start builds the upstream request and finds the lane.
 *   QUEUED     in its lane (lanes.h): the lanes call dispatch() when it may
 *              go, or refuse() with why (queue full, timeout, quota, …).
 *   UPSTREAM   a transfer runs (upstream.h); no answer yet.
 *   HELD       the answer's headers say it may be retried (retry_verdict_head):
 *              it is held back whole (at most RETRY_BODY_CAP) until the
 *              transfer ends and retry_verdict decides.
 *   STREAMING  the client's response has begun: the answer is final; its
 *              body is relayed chunk by chunk (on_up_body), pausing the
 *              transfer while the client's output is over its cap
 *              (hreq_write → false) until it drains (on_client_drained).
 *
 * An upload (hreq_streamed) has the same life; its body is not read here but
 * handed to the transfer as it arrives (on_up_read, upstream_resume_send on
 * on_client_body), and it is sent again only while httpd still holds its
 * first byte (hreq_body_rewindable; else the verdict's body_gone).
 *   RETRY_WAIT the verdict said retry: it waits in the lane without a slot,
 *              then is dispatched again; at the request's deadline the last
 *              answer is given (on_retry_deadline).
 *   DONE       answered, or the client left (on_client_gone); the memory is
 *              recycled on the next loop turn.
 *
 * What an answer means is decided by retry.c (retry_verdict_head,
 * retry_verdict); what it means for the lane by the lanes. This file carries
 * the decisions out. What is a thing of its own lives beside it: the request
 * sent upstream (upreq.c), the answer held back (held.c), its usage
 * (meter.c), pacerd's own answers (refusal.c), the request's log lines and
 * metrics (xlog.c); the exchange's type is in exchange-t.h.
 *
 * Nothing here calls into libcurl from inside a libcurl callback:
 * on_up_headers and on_up_body only tell the lanes, which kick the lane's
 * timer; dispatching happens from intake, from on_up_done (which libcurl
 * does not have on the stack) or from the lane's timer. The client half is
 * reached only through the hreq seam, and only until the response ended or
 * the client went away. */
#include "proxy/exchange.h"

#include <event2/event_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/list.h"
#include "core/log.h"
#include "core/pool.h"
#include "http/headers.h"
#include "provider/model.h"
#include "provider/profile.h"
#include "provider/tokens.h"
#include "proxy/exchange-t.h"
#include "proxy/held.h"
#include "proxy/identity.h"
#include "proxy/lanes.h"
#include "proxy/meter.h"
#include "proxy/refusal.h"
#include "proxy/reqstats.h"
#include "proxy/rewrites.h"
#include "proxy/upreq.h"
#include "proxy/xlog.h"
#include "proxy/xstate.h"
#include "sched/retry.h"

#define RESP_HEADERS_MAX 260
/* Exchanges kept for reuse after a burst; the rest are freed. */
#define POOL_MAX 4096

struct exchanges {
	struct event_base *base;
	struct upstream *up;
	struct config_ref *cref; /* the current configuration */
	struct lanes *lanes;
	struct reqstats *stats; /* per provider: what /metrics reports */
	struct event *reap;
	struct list live;      /* exchanges not finished */
	struct list reap_list; /* finished, recycled on the next loop turn */
	struct pool pool;      /* recycled, kept for reuse */
	size_t n_live;
	struct event *idle; /* armed when the last exchange in flight ends */
	unsigned idle_ms;
	void (*idle_fn)(void *);
	void *idle_arg;
	uint64_t rng;
	struct rewrites rewrites; /* the providers pacerd no longer rewrites requests of */
};

static const struct up_handler relay_handler;
static const struct hreq_events client_events;

static int64_t now_ms(void)
{
	return clock_now_ms();
}

/* Every state change goes through here: a transition the diagram does not
 * allow is a bug that would leak a slot or answer twice, so it stops the
 * process in every build (as Redis' serverAssert does) with what it saw. */
static void set_state(struct exchange *x, enum xstate to)
{
	if (!xstate_allowed(x->state, to)) {
		fprintf(stderr, "pacerd: exchange %s: bad transition %s -> %s\n", x->request_id,
		        xstate_name(x->state), xstate_name(to));
		log_flush();
		abort();
	}
	x->state = to;
}

/* xorshift64*: jitter needs speed and spread, not secrecy. */
static double rand_unit(struct exchanges *xs)
{
	uint64_t x = xs->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	xs->rng = x;
	return (double)((x * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* Copies at most cap - 1 bytes of src and a NUL. */
static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- the one teardown ---- */

static void exchange_destroy(struct exchange *x)
{
	held_free(&x->held);
	meter_free(&x->meter);
	upreq_free(&x->upreq);
	free(x);
}

/* Clears an exchange for its next use, keeping what it owns that can serve
 * again: the upstream request's memory and (drained) buffers. */
static void exchange_recycle(struct exchange *x)
{
	held_clear(&x->held);
	struct held held = x->held;
	struct upreq upreq = x->upreq;
	meter_reset(&x->meter);
	struct meter meter = x->meter;
	config_ref_put(x->cref);
	memset(x, 0, sizeof(*x));
	x->held = held;
	x->meter = meter;
	x->upreq = upreq;
	upreq_reset(&x->upreq);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct exchanges *xs = arg;
	(void)fd;
	(void)what;
	while (!list_empty(&xs->reap_list)) {
		struct exchange *x = LIST_ITEM(list_first(&xs->reap_list), struct exchange, link);
		list_remove(&x->link);
		exchange_recycle(x); /* clears the link too: the pool links it again */
		if (!pool_put(&xs->pool, x))
			exchange_destroy(x);
	}
}

static struct exchange *exchange_get(struct exchanges *xs)
{
	struct exchange *x = pool_get(&xs->pool);
	return x != NULL ? x : calloc(1, sizeof(*x));
}

static void exchange_destroy_cb(void *x)
{
	exchange_destroy(x);
}

/* Ends the exchange, undoing what its state holds: a transfer that still
 * runs is aborted, its place in the lane is given up (queued, waiting for a
 * retry or in flight), a retry's deadline timer is stopped; then the access
 * log line, and the client half is let go (its response must have ended
 * already, or the client is gone). */
static void finish(struct exchange *x)
{
	struct exchanges *xs = x->xs;
	switch (x->state) {
	case XS_DONE:
		return;
	case XS_RETRY_WAIT:
		evtimer_del(&x->retry_timer);
		break;
	case XS_UPSTREAM:
	case XS_HELD:
	case XS_STREAMING: /* the transfer may have ended already (xfer NULL) */
		if (x->xfer != NULL) {
			upstream_abort(x->xfer);
			x->xfer = NULL;
		}
		break;
	case XS_NEW:
	case XS_QUEUED:
	case XS_N:
		break;
	}
	lanes_cancel(xs->lanes, &x->ticket); /* a no-op once out of the lane */
	set_state(x, XS_DONE);
	int64_t now = now_ms();
	xlog_request(x, now);
	xlog_observe(x, xs->stats, now);
	x->client = NULL;
	x->body = NULL;
	list_remove(&x->link);
	xs->n_live--;
	if (xs->n_live == 0 && xs->idle_fn != NULL) {
		struct timeval tv = {(time_t)(xs->idle_ms / 1000),
		                     (suseconds_t)(xs->idle_ms % 1000 * 1000)};
		evtimer_add(xs->idle, &tv);
	}
	list_insert_tail(&xs->reap_list, &x->link);
	event_active(xs->reap, EV_TIMEOUT, 1);
}

/* ---- answers ---- */

/* x-request-id (unless the upstream sent one), x-pacer-attempts,
 * x-pacer-queue-ms; nums holds their digits. Returns how many were added. */
static size_t pacer_headers(struct exchange *x, struct hhdr *h, bool with_id, char nums[2][24])
{
	size_t n = 0;
	if (with_id)
		h[n++] = (struct hhdr){"x-request-id", 12, x->request_id, strlen(x->request_id)};
	int64_t queue_ms = (x->t_dispatch ? x->t_dispatch : now_ms()) - x->t_start;
	h[n++] = (struct hhdr){"x-pacer-attempts", 16, nums[0],
	                       hhdr_u64(nums[0], x->ticket.item.attempts)};
	h[n++] = (struct hhdr){"x-pacer-queue-ms", 16, nums[1],
	                       hhdr_u64(nums[1], queue_ms < 0 ? 0 : (uint64_t)queue_ms)};
	return n;
}

/* pacerd's own answer; retry_after_ms >= 0 adds retry-after (seconds,
 * rounded up) and retry-after-ms. Ends the exchange. */
static void answer(struct exchange *x, int status, const char *code, const char *message,
                   long long retry_after_ms)
{
	if (x->client != NULL && x->state == XS_STREAMING) {
		hreq_end(x->client, false); /* too late for an answer of our own */
	} else if (x->client != NULL) {
		struct hhdr h[6];
		char nums[2][24], ra[24], ra_ms[24];
		size_t n = pacer_headers(x, h, false, nums);
		if (x->no_retry_hdr)
			h[n++] = (struct hhdr){"x-should-retry", 14, "false", 5};
		if (retry_after_ms >= 0) {
			h[n++] =
			    (struct hhdr){"retry-after", 11, ra,
			                  hhdr_u64(ra, (uint64_t)(retry_after_ms + 999) / 1000)};
			h[n++] = (struct hhdr){"retry-after-ms", 14, ra_ms,
			                       hhdr_u64(ra_ms, (uint64_t)retry_after_ms)};
		}
		x->status = status;
		x->error_code = code;
		hreq_error(x->client, status, code, message, h, n);
	}
	finish(x);
}

/* Gives pacerd's own answer r. Ends the exchange. x-should-retry: false
 * also when the verdict said so (a certificate that fails verification). */
static void refuse(struct exchange *x, const struct refusal *r)
{
	if (r->no_retry)
		x->no_retry_hdr = true;
	answer(x, r->status, r->code, r->message, r->retry_after_ms);
}

static void give_up_transport(struct exchange *x, enum up_error err, const char *detail)
{
	copy_str(x->up_detail, sizeof(x->up_detail), detail ? detail : "");
	struct refusal r;
	refusal_of_transport(err, detail, &r);
	refuse(x, &r);
}

static void relay_held(struct exchange *x);

/* The lanes answer x without the upstream (refusal.c says how). A quota
 * refusal replays the provider's own refusal that the lane kept, with
 * x-should-retry: false: the account cannot be served, and the SDK should
 * not try again either. */
static void on_lane_refuse(struct lane_ticket *t, const struct lane_refusal_info *info)
{
	struct exchange *x = X_OF_TICKET(t);
	struct refusal r;
	refusal_of_lane(info, now_ms() - x->ticket.item.arrived_ms, x->retry_deadline - x->t_start,
	                &r);
	if (r.log_event != NULL)
		xlog_event(x, r.log_event, LOG_INFO, r.log_key, r.log_value);
	const char *reason;
	if (r.replay_quota && held_ready(&x->held) &&
	    lanes_quota_answer(&x->ticket, x->held.buf, &x->held.n, &x->held.head_len, &x->status,
	                       &reason)) {
		x->no_retry_hdr = true;
		copy_str(x->held.reason, sizeof(x->held.reason), reason);
		x->error_code = r.code;
		relay_held(x);
		return;
	}
	refuse(x, &r); /* for a quota: no refusal of its own to replay (another replica saw it) */
}

/* ---- one attempt ---- */

static void reset_attempt(struct exchange *x)
{
	x->status = 0;
	x->no_retry_hdr = false;
	x->watch.on = false;
	held_clear(&x->held);
	memset(&x->rlh, 0, sizeof(x->rlh));
}

/* The lanes let x go now. */
static void on_lane_dispatch(struct lane_ticket *t)
{
	struct exchange *x = X_OF_TICKET(t);
	/* Rewrites of its provider stopped while it waited: the client's own
	 * bytes go (rewrites.h). */
	if (meter_rewrote(&x->meter) &&
	    !rewrites_allowed(&x->xs->rewrites, x->route.provider->name)) {
		meter_unrewrite(&x->meter);
		x->body = hreq_body(x->client, &x->body_len);
	}
	struct up_request ur = {
	    .url = x->upreq.url,
	    .method = x->method,
	    .headers = x->upreq.headers,
	    .body = x->body,
	    .body_len = x->body_len,
	    .body_streamed = x->upload,
	    .body_size = x->upload ? hreq_body_size(x->client) : 0,
	    .provider = x->route.provider,
	};
	/* An attempt sends the upload from its first byte (decide() retries
	 * one only while it can be). */
	if (x->upload) {
		hreq_body_rewind(x->client);
		x->upload_bytes = 0;
	}
	if (x->state == XS_RETRY_WAIT)
		evtimer_del(&x->retry_timer);
	set_state(x, XS_UPSTREAM);
	reset_attempt(x);
	x->up_detail[0] = '\0'; /* a failed attempt's words are not this one's */
	x->t_dispatch = now_ms();
	if (x->t_first_dispatch == 0)
		x->t_first_dispatch = x->t_dispatch;
	xlog_event(x, "acquired", LOG_DEBUG, "active_slots", (long long)lanes_in_flight(t));
	x->xfer = upstream_start(x->xs->up, &ur, &relay_handler, x);
	if (x->xfer == NULL) {
		struct lane_change ch;
		lanes_complete(x->xs->lanes, t, RETRY_LANE_TRANSIENT, false, 0, now_ms(), &ch);
		give_up_transport(x, UP_INTERNAL, "cannot start the upstream transfer");
	}
}

/* ---- entry ---- */

void exchange_start(struct exchanges *xs, struct hreq *client, const struct exchange_intake *in)
{
	int64_t now = now_ms();
	struct exchange *x = exchange_get(xs);
	if (x == NULL) {
		hreq_error(client, 503, "out_of_memory", "pacerd is out of memory", NULL, 0);
		return;
	}
	x->xs = xs;
	x->state = XS_NEW;
	x->client = client;
	x->tokens_used = -1;
	x->cref = config_ref_get(in->cref);
	x->route = in->route;
	x->method = hreq_method(client);
	x->body = hreq_body(client, &x->body_len);
	x->upload = hreq_streamed(client);
	x->t_start = now;
	x->turn_start = clock_turn();
	copy_str(x->request_id, sizeof(x->request_id), hreq_id(client));
	if (in->key_hash != NULL)
		memcpy(x->key_hash, in->key_hash, KEYID_HEX + 1);
	keyid_name(in->key_hash, x->key_id);
	if (in->agent != NULL)
		copy_str(x->agent, sizeof(x->agent), in->agent);
	x->priority = in->priority;
	list_insert_head(&xs->live, &x->link);
	if (xs->n_live++ == 0)
		evtimer_del(xs->idle);
	hreq_set_events(client, &client_events, x);

	if (!upreq_build(&x->upreq, &x->route, client, in->headers)) {
		answer(x, 503, "out_of_memory", "pacerd is out of memory", -1);
		return;
	}
	/* The one scan of the body: the model, what the request costs, how to
	 * ask its stream for its usage (meter_request), and its service tier. */
	const struct provider_conf *prov = x->route.provider;
	struct tokens_cost cost;
	tokens_estimate(x->body, x->body_len, 0, &cost);
	char model_buf[TOKENS_MODEL_MAX];
	const char *model;
	size_t model_len;
	model_of_request(x->route.path, x->route.path_len, &cost, model_buf, &model, &model_len);
	if (model_len > 0)
		memcpy(x->model, model, model_len);
	x->model[model_len] = '\0';
	x->identity = identity_of_request(prov, in->headers);
	x->own_tier = cost.flex_tier;
	/* A side endpoint (count_tokens, a model listing, files and batches)
	 * has a lane of its own and charges no generation budget. */
	const char *side =
	    profile_endpoint_lane(profile_endpoint(x->method, x->route.path, x->route.path_len));
	struct lane_request lr = {
	    .key_hash = x->key_hash[0] ? x->key_hash : NULL,
	    .model = model_len > 0 ? x->model : NULL,
	    .model_len = model_len,
	    .identity = x->identity,
	    .side = side,
	};
	const struct plan_conf *plan = lanes_find(xs->lanes, &x->ticket, prov, &lr, now);
	if (plan == NULL)
		return; /* refused (on_lane_refuse) */
	/* The request's deadline: the earlier of the plan's retry.deadline_s
	 * and the client's own timeout, which the official SDKs send. */
	x->retry_deadline = now + (int64_t)plan->retry.deadline_s * 1000;
	long long client_ms = hdr_client_timeout_ms(in->headers->value[IF_X_PACER_TIMEOUT_MS],
	                                            in->headers->value[IF_REQUEST_TIMEOUT_MS],
	                                            in->headers->value[IF_X_STAINLESS_TIMEOUT]);
	if (client_ms > 0 && now + client_ms < x->retry_deadline)
		x->retry_deadline = now + client_ms;
	struct sched_request rq = {
	    .agent = in->agent_id, .flow = in->flow, .priority = in->priority};

	/* What the provider will count of it, when a token budget paces the
	 * lane: then its usage is read too. */
	struct lane_cost lc = lane_cost_of(&cost);
	if (side == NULL)
		lanes_charge(&x->ticket, &rq, &lc, now);
	/* A chat completion streamed without include_usage on a token-paced
	 * lane never says what it cost: the meter asks for the usage (keyed on
	 * the API the request speaks, not on the provider's rate-limit header
	 * dialect: an OpenAI-compatible provider may send none), where the
	 * provider's profile accepts the rewrite. */
	if (x->ticket.metered)
		meter_request(&x->meter,
		              plan->stream_usage == STREAM_USAGE_INJECT &&
		                  profile_of(prov)->add_stream_usage &&
		                  rewrites_allowed(&xs->rewrites, prov->name),
		              x->route.path, x->route.path_len, &cost, &x->body, &x->body_len);
	else if (side == NULL && lanes_learns_cost(&x->ticket, &lc))
		meter_request(&x->meter, false, x->route.path, x->route.path_len, &cost, &x->body,
		              &x->body_len);
	x->tokens_estimated = rq.cost_prompt + rq.cost_output;

	set_state(x, XS_QUEUED);
	size_t depth = lanes_submit(xs->lanes, &x->ticket, &rq, client_ms, x->retry_deadline, now);
	if (depth > 0)
		xlog_event(x, "queueing", LOG_DEBUG, "queue_depth", (long long)depth);
}

/* ---- the client side's events ---- */

static void on_client_gone(void *ctx)
{
	struct exchange *x = ctx;
	if (x->status == 0)
		x->status = 499; /* client closed request, as nginx logs it */
	x->client_closed = true;
	finish(x); /* logs while the client's fields are still readable */
}

static void on_client_drained(void *ctx)
{
	struct exchange *x = ctx;
	x->client_full = false;
	if (x->xfer != NULL)
		upstream_resume(x->xfer);
}

/* An upload's body moved: more bytes for a transfer waiting for them; or it
 * failed (a bad chunk, over limits.max_upload_bytes, the client stopped
 * sending): pacerd's answer, and the transfer is aborted (finish) before
 * the upstream has the whole request. */
static void on_client_body(void *ctx)
{
	struct exchange *x = ctx;
	int status;
	const char *code, *message;
	if (hreq_body_failure(x->client, &status, &code, &message)) {
		xlog_event(x, "upload_failed", LOG_INFO, "status_code", status);
		answer(x, status, code, message, -1);
		return;
	}
	if (x->xfer != NULL)
		upstream_resume_send(x->xfer);
}

static const struct hreq_events client_events = {
    .drained = on_client_drained,
    .gone = on_client_gone,
    .body = on_client_body,
};

/* ---- relaying ---- */

static const char *find_up_header(const struct up_header *h, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(h[i].name, name) == 0)
			return h[i].value;
	return NULL;
}

/* Starts the client's response with the upstream's end-to-end fields and
 * pacerd's own. */
static void start_response(struct exchange *x, const struct up_header *uh, size_t un,
                           const char *reason)
{
	struct hhdr h[RESP_HEADERS_MAX];
	size_t n = 0;
	bool has_id = false;
	const char *connection = find_up_header(uh, un, "connection");
	for (size_t i = 0; i < un && n < RESP_HEADERS_MAX - 5; i++) {
		if (!hdr_forward_response(uh[i].name, connection))
			continue;
		if (x->no_retry_hdr && strcasecmp(uh[i].name, "x-should-retry") == 0)
			continue;
		if (uh[i].name_len == 12 && strcasecmp(uh[i].name, "x-request-id") == 0)
			has_id = true;
		h[n++] = (struct hhdr){uh[i].name, uh[i].name_len, uh[i].value, uh[i].value_len};
	}
	if (x->no_retry_hdr)
		h[n++] = (struct hhdr){"x-should-retry", 14, "false", 5};
	char nums[2][24];
	n += pacer_headers(x, h + n, !has_id, nums);
	set_state(x, XS_STREAMING);
	hreq_start(x->client, x->status, reason, h, n);
}

/* Starts the response from the held head; returns the held body. */
static void start_held(struct exchange *x, const char **body, size_t *body_len)
{
	struct up_header uh[RESP_HEADERS_MAX];
	size_t n = held_head(&x->held, uh, RESP_HEADERS_MAX);
	start_response(x, uh, n, x->held.reason);
	*body = held_body(&x->held, body_len);
}

/* The answer names whose budget it billed (identity.h): the key's next
 * requests share that identity's lanes with every key whose answers name it. */
static void learn_identity(struct exchange *x, const struct up_header *h, size_t n)
{
	uint64_t id = x->key_hash[0] != '\0' ? identity_of_answer(x->route.provider, h, n) : 0;
	if (id == 0)
		return;
	struct lane_request lr = {.key_hash = x->key_hash, .identity = x->identity};
	lanes_learn_identity(x->xs->lanes, &x->ticket, x->route.provider, &lr, id, x->t_headers);
}

/* The upstream refused the body pacerd rewrote (x->rewrite_refused) and
 * answered status to the client's own bytes: the rewrite broke a request that
 * works direct, so that provider's requests are no longer rewritten. Logged
 * once per provider; /status shows it. */
static void rewrite_stop(struct exchange *x, int status)
{
	if (rewrites_stop(&x->xs->rewrites, x->route.provider->name, x->rewrite_refused, status,
	                  USAGE_INJECTED, clock_wall_ms()))
		xlog_rewrites_off(x, USAGE_INJECTED, status);
}

static bool on_up_headers(void *ctx, int status, const char *reason, const struct up_header *h,
                          size_t n)
{
	struct exchange *x = ctx;
	if (x->client == NULL)
		return false;
	x->t_headers = now_ms();
	x->status = status;

	struct rlh_header rh[128];
	size_t nr = 0;
	for (size_t i = 0; i < n && nr < sizeof(rh) / sizeof(rh[0]); i++)
		rh[nr++] = (struct rlh_header){h[i].name, h[i].value, h[i].value_len};
	rlh_parse(x->route.provider->dialect, rh, nr, clock_wall_ms(), &x->rlh);
	learn_identity(x, h, n);
	struct retry_head_verdict hv = retry_verdict_head(status, &x->rlh, x->own_tier);
	const char *ctype = find_up_header(h, n, "content-type");
	bool sse = ctype != NULL && strncasecmp(ctype, "text/event-stream", 17) == 0;
	if (lanes_headers(x->xs->lanes, &x->ticket, status, &x->rlh, &hv, sse, x->t_headers))
		xlog_limit_learned(x);

	meter_answer(&x->meter, ctype);
	/* A success is timed for a lane whose limit reads latency. */
	stopwatch_start(&x->watch, status >= 200 && status < 300 && lanes_timing_wanted(&x->ticket),
	                sse, x->t_dispatch);
	if (x->rewrite_refused != 0 && status < 400)
		rewrite_stop(x, status);
	/* The body pacerd rewrote was refused: held back, the client's own
	 * bytes are resent (decide). */
	if (meter_rewrote(&x->meter) && (status == 400 || status == 422))
		hv.hold_body = true;
	if (hv.hold_body) {
		set_state(x, XS_HELD);
		return held_start(&x->held, h, n, reason);
	}
	start_response(x, h, n, reason);
	return true;
}

static void relay(struct exchange *x, const char *data, size_t len)
{
	x->bytes_out += len;
	if (!hreq_write(x->client, data, len))
		x->client_full = true;
}

static void relay_cb(void *ctx, const char *data, size_t len)
{
	relay(ctx, data, len);
}

static bool on_up_body(void *ctx, const char *data, size_t len)
{
	struct exchange *x = ctx;
	if (x->client == NULL)
		return true; /* the client is gone; the transfer is being aborted */
	if (x->state == XS_HELD) {
		if (held_add(&x->held, data, len))
			return true;
		/* Too large for an error body worth deciding on: relay it as is. */
		const char *body;
		size_t body_len;
		start_held(x, &body, &body_len);
		if (body_len > 0)
			relay(x, body, body_len);
	}
	if (x->client_full)
		return false; /* slow reader: hold the upstream until it drains */
	if (x->watch.sse && stopwatch_feed(&x->watch, data, len, now_ms()))
		lanes_first_token(x->xs->lanes, &x->ticket, stopwatch_first_ms(&x->watch),
		                  now_ms());
	meter_feed(&x->meter, data, len, relay_cb, x);
	return true;
}

/* The answer ended complete: what the meter held back reaches the client,
 * and the real token usage corrects the token gate by the difference. */
static void settle_tokens(struct exchange *x)
{
	struct tokens_usage u;
	if (!meter_finish(&x->meter, x->client != NULL ? relay_cb : NULL, x, &u))
		return;
	x->tokens_used = lanes_tokens_used(x->xs->lanes, &x->ticket, &u, now_ms());
}

static void relay_held(struct exchange *x)
{
	if (x->client != NULL) {
		const char *body;
		size_t body_len;
		start_held(x, &body, &body_len);
		if (body_len > 0)
			relay(x, body, body_len);
		hreq_end(x->client, true);
	}
	finish(x);
}

/* ---- deciding ---- */

/* x's answer says the key's quota is out: every request waiting in the lane
 * gets the same answer now, instead of being paced into certain refusals. */
static void quota_begin(struct exchange *x, const char *why)
{
	bool fresh;
	size_t drained = lanes_quota(x->xs->lanes, &x->ticket, x->held.buf, x->held.n,
	                             x->held.head_len, x->status, x->held.reason, &fresh);
	if (!fresh && drained == 0)
		return;
	struct log_line l;
	if (xlog_begin(&l, LOG_WARN, "quota_exhausted", x)) {
		log_int(&l, "status_code", x->status);
		log_str(&l, "reason", why);
		log_int(&l, "drained", (long long)drained);
		log_int(&l, "probe_s", lanes_plan(&x->ticket)->quota_probe_s);
		log_end(&l);
	}
}

/* A retry still waiting in its lane when the request's deadline came: the
 * last answer now (the held upstream answer, or pacerd's own 502 / 504 for a
 * transport failure), as when a retry's delay does not fit the deadline. */
static void on_retry_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct exchange *x = arg;
	(void)fd;
	(void)what;
	if (x->state != XS_RETRY_WAIT)
		return;
	struct sched_lane *lane = x->ticket.lane;
	x->retry_stop = "deadline";
	if (x->up_error == UP_OK) { /* its answer was held (XS_HELD) */
		relay_held(x);      /* finish() takes it out of the lane */
	} else {
		char detail[sizeof(x->up_detail)];
		copy_str(detail, sizeof(detail), x->up_detail);
		give_up_transport(x, x->up_error != UP_OK ? x->up_error : UP_INTERNAL, detail);
	}
	lanes_pump(x->xs->lanes, lane);
}

/* x waits without a slot for delay_ms, then goes again; at its deadline the
 * last answer is given (on_retry_deadline). */
static void wait_to_retry(struct exchange *x, int64_t now, int64_t delay_ms)
{
	struct exchanges *xs = x->xs;
	set_state(x, XS_RETRY_WAIT);
	lanes_retry(xs->lanes, &x->ticket, now + delay_ms);
	evtimer_assign(&x->retry_timer, xs->base, on_retry_deadline, x);
	int64_t left = x->retry_deadline - now;
	struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
	evtimer_add(&x->retry_timer, &tv);
}

/* The upstream refused (400, 422) the body pacerd rewrote: the client never
 * sees an error pacerd caused, so its own bytes go again, at once (a
 * request the lane has already paced, sent again as a retry). The refusal
 * is dropped: should the deadline come first, the client gets pacerd's 504,
 * not an answer to a body it did not send. */
static void resend_own_bytes(struct exchange *x, int64_t now)
{
	struct lane_change ch;
	lanes_complete(x->xs->lanes, &x->ticket, RETRY_LANE_SUCCESS, false, 0, now, &ch);
	xlog_event(x, "rewrite_refused", LOG_INFO, "status_code", x->status);
	x->rewrite_refused = x->status;
	meter_unrewrite(&x->meter);
	x->body = hreq_body(x->client, &x->body_len);
	held_clear(&x->held);
	x->up_error = UP_TIMEOUT;
	copy_str(x->up_detail, sizeof(x->up_detail),
	         "the deadline passed before the client's own body was resent");
	wait_to_retry(x, now, 0);
	lanes_pump(x->xs->lanes, x->ticket.lane);
}

/* The transfer ended before the client's response began: the answer was
 * held back (XS_HELD), or there was none (a transport error). The verdict
 * says what to do: retry after a delay, or relay / answer it now. */
static void decide(struct exchange *x, enum up_error err, const char *detail)
{
	struct exchanges *xs = x->xs;
	int64_t now = now_ms();
	bool held = err == UP_OK && x->state == XS_HELD;
	if (held && meter_rewrote(&x->meter) && (x->status == 400 || x->status == 422)) {
		resend_own_bytes(x, now);
		return;
	}
	const char *body = NULL;
	size_t body_len = 0;
	if (held)
		body = held_body(&x->held, &body_len);
	struct retry_input in = {
	    .status = x->status,
	    .transport = refusal_transport_class(err),
	    .hdrs = err == UP_OK ? &x->rlh : NULL,
	    .body = body,
	    .body_len = body_len,
	    .held = held,
	    .streamed = false,
	    /* an upload is sent again only from its first byte */
	    .body_gone = x->upload && (x->client == NULL || !hreq_body_rewindable(x->client)),
	    .attempt = x->ticket.item.attempts,
	    .now_ms = now,
	    .deadline_ms = x->retry_deadline,
	    .plan = lanes_plan(&x->ticket),
	    .rnd = rand_unit(xs),
	};
	struct retry_verdict v = retry_verdict(&in);
	struct sched_lane *lane = x->ticket.lane;
	struct lane_change ch;
	lanes_complete(xs->lanes, &x->ticket, v.outcome, v.hinted, v.hold_ms, now, &ch);
	xlog_lane_change(x, &ch);
	if (v.told.limit > 0 && lanes_learn_told(xs->lanes, &x->ticket, (int)v.told.budget,
	                                         v.told.limit, v.told.window_ms, now))
		xlog_limit_learned(x);
	if (v.quota)
		quota_begin(x, v.reason);
	x->retry_stop = v.stop;
	if (v.action == RETRY_ACTION_RETRY) {
		xlog_retry(x, err, &v);
		/* The held answer stays until the next dispatch (which resets
		 * the attempt): it is what the client gets if the deadline comes
		 * first. A retry that is due still queues behind the lane's gates
		 * (a lane slowed by a storm of 503s spaces its dispatches by
		 * seconds); without this timer it would wait up to
		 * queue.max_wait_s past its deadline, then be sent anyway. */
		if (err != UP_OK) /* kept for the deadline's answer */
			copy_str(x->up_detail, sizeof(x->up_detail), detail ? detail : "");
		wait_to_retry(x, now, v.delay_ms);
		lanes_pump(xs->lanes, lane);
		return;
	}
	x->no_retry_hdr = v.no_retry_hdr;
	if (held)
		relay_held(x);
	else
		give_up_transport(x, err, detail);
	lanes_pump(xs->lanes, lane);
}

static void on_up_done(void *ctx, enum up_error err, const char *detail)
{
	struct exchange *x = ctx;
	x->xfer = NULL;
	x->up_error = err;
	struct sched_lane *lane = x->ticket.lane;

	if (x->state != XS_STREAMING) {
		decide(x, err, detail);
		return;
	}
	/* Streamed answer: its bytes reached the client, so it is final. */
	int64_t now = now_ms();
	struct retry_input in = {
	    .status = x->status,
	    .transport = refusal_transport_class(err),
	    .streamed = true,
	    .attempt = x->ticket.item.attempts,
	    .now_ms = now,
	    .deadline_ms = x->retry_deadline,
	    .plan = lanes_plan(&x->ticket),
	};
	struct retry_verdict v = retry_verdict(&in);
	if (err == UP_OK && x->watch.on && v.outcome == RETRY_LANE_SUCCESS)
		lanes_answer_timed(x->xs->lanes, &x->ticket, &x->watch, now);
	struct lane_change ch;
	lanes_complete(x->xs->lanes, &x->ticket, v.outcome, false, 0, now, &ch);
	xlog_lane_change(x, &ch);
	if (err == UP_OK)
		settle_tokens(x);
	xlog_event(x, "released", LOG_DEBUG, "active_slots",
	           (long long)lanes_in_flight(&x->ticket));
	if (err != UP_OK) {
		/* Cut mid-body: the client must see an incomplete message, not a
		 * clean end; what arrived is delivered, then the connection closes. */
		struct log_line l;
		if (xlog_begin(&l, LOG_WARN, "upstream_aborted", x)) {
			log_str(&l, "upstream_error", upstream_error_name(err));
			log_str(&l, "detail", detail ? detail : "");
			log_int(&l, "bytes", (long long)x->bytes_out);
			log_end(&l);
		}
		copy_str(x->up_detail, sizeof(x->up_detail), detail ? detail : "");
		x->truncated = true;
	}
	if (x->client != NULL)
		hreq_end(x->client, err == UP_OK);
	finish(x);
	lanes_pump(x->xs->lanes, lane);
}

/* The request leaves now, unless its client gave up while it waited (in its
 * lane, for a retry, for a connection). The client's close may have come
 * after the loop last polled (a dispatch runs late in a turn, a new
 * connection a turn or more later), so its socket is asked, at the last
 * moment: one recv, only for a request that did not leave in the turn it
 * came (the common case, for which nothing was polled since it was read). */
static void on_up_sent(void *ctx)
{
	struct exchange *x = ctx;
	if (x->turn_start != clock_turn() && hreq_client_left(x->client))
		return; /* on_client_gone finished it (499, its slot given back): nothing is sent */
	/* A refusal held the lane while this one waited for its connection:
	 * it would reach the provider inside the window just announced. It
	 * queues again instead (due now: the hold keeps it). */
	if (lanes_recall(x->xs->lanes, &x->ticket)) {
		int64_t now = now_ms();
		upstream_abort(x->xfer);
		x->xfer = NULL;
		xlog_event(x, "recalled", LOG_DEBUG, "active_slots",
		           (long long)lanes_in_flight(&x->ticket));
		x->up_error = UP_TIMEOUT; /* should the deadline come first */
		copy_str(x->up_detail, sizeof(x->up_detail),
		         "the deadline passed while its lane was held");
		wait_to_retry(x, now, 0);
		lanes_pump(x->xs->lanes, x->ticket.lane);
		return;
	}
	lanes_sent(x->xs->lanes, &x->ticket);
}

/* The upload's next bytes for the transfer, as the client sends them. */
static enum up_read on_up_read(void *ctx, char *buf, size_t len, size_t *n)
{
	struct exchange *x = ctx;
	*n = 0;
	if (x->client == NULL)
		return UP_READ_ABORT;
	switch (hreq_body_read(x->client, buf, len, n)) {
	case HREQ_BODY_MORE:
		x->upload_bytes += *n;
		return *n > 0 ? UP_READ_DATA : UP_READ_WAIT;
	case HREQ_BODY_END:
		return UP_READ_END;
	case HREQ_BODY_FAILED:
		break;
	}
	return UP_READ_ABORT;
}

static bool on_up_rewind(void *ctx)
{
	struct exchange *x = ctx;
	if (x->client == NULL || !hreq_body_rewind(x->client))
		return false;
	x->upload_bytes = 0;
	return true;
}

static const struct up_handler relay_handler = {
    .on_headers = on_up_headers,
    .on_body = on_up_body,
    .on_done = on_up_done,
    .on_sent = on_up_sent,
    .on_read = on_up_read,
    .on_rewind = on_up_rewind,
};

/* ---- the set ---- */

void exchanges_reconfigure(struct exchanges *xs, struct config_ref *cref)
{
	struct config_ref *old = xs->cref;
	xs->cref = config_ref_get(cref);
	reqstats_bind(xs->stats, cref->cfg);
	lanes_reconfigure(xs->lanes, cref);
	config_ref_put(old);
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct exchanges *xs = arg;
	(void)fd;
	(void)what;
	if (xs->n_live == 0 && xs->idle_fn != NULL)
		xs->idle_fn(xs->idle_arg);
}

struct exchanges *exchanges_new(struct event_base *base, struct upstream *up,
                                struct config_ref *cref, char *err, size_t errlen)
{
	struct exchanges *xs = calloc(1, sizeof(*xs));
	if (xs == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	xs->base = base;
	xs->up = up;
	xs->cref = config_ref_get(cref);
	list_init(&xs->live);
	list_init(&xs->reap_list);
	pool_init(&xs->pool, offsetof(struct exchange, link), POOL_MAX);
	xs->stats = reqstats_new();
	if (xs->stats != NULL)
		reqstats_bind(xs->stats, cref->cfg);
	xs->reap = event_new(base, -1, 0, on_reap, xs);
	xs->idle = evtimer_new(base, on_idle, xs);
	xs->rng = ((uint64_t)arc4random() << 32) | arc4random() | 1;
	rewrites_init(&xs->rewrites);
	if (xs->stats == NULL || xs->reap == NULL || xs->idle == NULL) {
		snprintf(err, errlen, "out of memory");
		exchanges_free(xs);
		return NULL;
	}
	static const struct lanes_events events = {
	    .dispatch = on_lane_dispatch,
	    .refuse = on_lane_refuse,
	};
	xs->lanes = lanes_new(base, cref, &events, err, errlen);
	if (xs->lanes == NULL) {
		exchanges_free(xs);
		return NULL;
	}
	return xs;
}

void exchanges_abort_all(struct exchanges *xs)
{
	while (!list_empty(&xs->live)) {
		struct exchange *x = LIST_ITEM(list_first(&xs->live), struct exchange, link);
		/* answer() cuts a response that has begun. */
		answer(x, 503, "shutting_down", "pacerd stopped before the upstream answered",
		       1000);
	}
}

size_t exchanges_lane_count(const struct exchanges *xs)
{
	return lanes_count(xs->lanes);
}

size_t exchanges_live(const struct exchanges *xs)
{
	return xs->n_live;
}

struct registry *exchanges_lanes(const struct exchanges *xs)
{
	return lanes_registry(xs->lanes);
}

struct lanes *exchanges_lane_table(struct exchanges *xs)
{
	return xs->lanes;
}

const struct rewrites *exchanges_rewrites(const struct exchanges *xs)
{
	return &xs->rewrites;
}

struct shared *exchanges_shared(const struct exchanges *xs)
{
	return lanes_shared(xs->lanes);
}

const struct reqstats *exchanges_metrics(const struct exchanges *xs)
{
	return xs->stats;
}

void exchanges_on_idle(struct exchanges *xs, unsigned ms, void (*fn)(void *), void *arg)
{
	xs->idle_ms = ms;
	xs->idle_fn = fn;
	xs->idle_arg = arg;
}

size_t exchanges_trim(struct exchanges *xs, bool all)
{
	return pool_trim(&xs->pool, all, exchange_destroy_cb);
}

void exchanges_free(struct exchanges *xs)
{
	if (xs == NULL)
		return;
	while (!list_empty(&xs->live))
		finish(LIST_ITEM(list_first(&xs->live), struct exchange, link));
	on_reap(-1, 0, xs);
	pool_trim(&xs->pool, true, exchange_destroy_cb);
	lanes_free(xs->lanes);
	if (xs->reap != NULL)
		event_free(xs->reap);
	if (xs->idle != NULL)
		event_free(xs->idle);
	reqstats_free(xs->stats);
	config_ref_put(xs->cref);
	free(xs);
}
