/* exchange — a request's way through its lane and to the upstream: queueing,
 * dispatch, the retry decision, and relaying the answer as it streams in.
 *
 * The life of a request:
 *
 *   server.c (intake) routes it and finds its key, then exchange_start:
 *     QUEUED     in its lane's queue (sched_submit); the lane's one timer is
 *                armed for the earliest instant its state can change by
 *                itself (sched_wake_at): no polling.
 *     UPSTREAM   sched_next chose it: dispatch() starts an upstream transfer.
 *                Headers arrive (on_up_headers): an answer that may be
 *                retried (429, 5xx, …) is held back whole; any other starts
 *                the client's response at once, and its body is relayed
 *                chunk by chunk (on_up_body), pausing the transfer while the
 *                client's output is over its cap (hreq_write → false) until
 *                the client drains (on_client_drained).
 *     RETRY_WAIT the transfer ended (on_up_done) with a held answer or none:
 *                decide() asks retry.c; a retry waits in the lane without a
 *                slot, then goes back to UPSTREAM.
 *     DONE       the answer was relayed or pacerd answered itself
 *                (hreq_error), or the client left (on_client_gone) and the
 *                transfer was aborted. finish() is the one teardown: the
 *                access log line, the lane released, the client half let go;
 *                the memory is freed on the next loop turn.
 *
 * The decisions are made by the pure modules (sched, retry,
 * ratelimit_headers, tokens); this file only carries them out. Nothing here
 * calls into libcurl from inside a libcurl callback: on_up_headers and
 * on_up_body only kick the lane timer, and dispatching happens from intake,
 * from on_up_done (which libcurl does not have on the stack) or from the
 * timer. The client half is reached only through the hreq seam, and only
 * until the response ended or the client went away. */
#include "proxy/exchange.h"

#include <event2/buffer.h>
#include <event2/event_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "sched/daily.h"
#include "core/grow.h"
#include "http/headers.h"
#include "core/log.h"
#include "admin/metrics.h"
#include "sched/retry.h"
#include "sched/sched.h"
#include "sched/sched_lane-t.h"
#include "store/shared.h"
#include "provider/tokens.h"
#include "provider/usage_strip.h"

/* A JSON answer larger than this is relayed without reading its usage. */
#define USAGE_JSON_CAP (256 * 1024)
#define LANE_SWEEP_S 10
#define AGENT_MAX 64
#define RESP_HEADERS_MAX 260
/* The longest a capacity answer's headers hold the lane while its body is
 * still coming (an error body is small: it normally takes microseconds). */
#define PENDING_HOLD_MAX_MS 1000
/* Exchanges kept for reuse after a burst; the rest are freed. */
#define POOL_MAX 4096

enum xstate { XS_QUEUED, XS_UPSTREAM, XS_RETRY_WAIT, XS_DONE };

struct exchange {
	struct exchanges *xs;
	enum xstate state;
	struct hreq *client;     /* NULL once the response ended or the client left */
	struct config_ref *cref; /* the configuration it was accepted under */
	struct route route;
	const char *url;               /* in arena */
	struct curl_slist *up_headers; /* nodes in hdr_nodes, lines in arena */
	const char *body;              /* the client's, valid while client != NULL, or body_own */
	size_t body_len;
	char *body_own;   /* the body pacerd rewrote (include_usage added), or NULL */
	bool strip_usage; /* and so gives the client the stream without what it added */
	struct usage_strip strip;
	const char *method;
	char key_hash[ROUTE_KEY_HEX + 1];
	char key_id[ROUTE_KEY_ID_SIZE];
	char request_id[HREQ_ID_MAX + 1];
	char agent[AGENT_MAX];
	int priority; /* x-pacer-priority or the agent's; logged when not 0 */

	/* Scheduling. */
	struct sched_lane *lane;
	struct sched_item item;
	struct shared_lease *lease; /* max_concurrent_global: held while in flight */
	int64_t t_start, t_dispatch, t_headers; /* monotonic ms */
	int64_t t_first_dispatch;               /* 0: never dispatched */
	int64_t retry_deadline;
	/* Armed while a retry waits (XS_RETRY_WAIT): at retry_deadline the
	 * last answer is given, however busy the lane still is. Assigned each
	 * time it is armed (the struct is recycled with memset). */
	struct event retry_timer;
	bool retry_timer_armed;

	/* The current attempt. */
	struct up_xfer *xfer;
	int status;
	bool buffering;        /* an error answer held back for the retry decision */
	struct evbuffer *held; /* its head (name\0value\0 …) and body, at most RETRY_BODY_CAP */
	size_t held_n, held_head_len;
	char held_reason[64];
	struct rlh_result rlh;
	bool want_usage;
	bool sse; /* the response is an event stream: scan it */
	struct tokens_sse sse_scan;
	struct evbuffer *json;   /* a JSON response, kept for its usage (capped) */
	bool no_retry_hdr;       /* relay with x-should-retry: false */
	long long tokens_used;   /* the usage the answer reported, -1: none */
	double tokens_estimated; /* the estimate charged before dispatch (0: none made) */

	/* Relaying. */
	bool started;     /* the client's response has begun: the answer is final */
	bool client_full; /* hreq_write said stop: the transfer pauses */
	uint64_t bytes_out;
	const char *error_code; /* pacerd's own answer, for the access log */
	enum up_error up_error;
	char up_detail[128]; /* libcurl's message for a failed attempt, for the log */
	/* The response began but the upstream broke off (reset, idle timeout):
	 * the client got a cut message, and the request line says so. */
	bool truncated;
	/* Why retrying stopped (retry_decide's why: "max_attempts",
	 * "deadline", …) when an answer that could be retried was given up
	 * on; NULL otherwise. Static. */
	const char *retry_stop;
	bool client_closed;
	struct exchange *prev, *next; /* xs->live */
	struct exchange *next_reap;   /* xs->reap_list, then xs->pool */

	/* Kept across uses (exchanges are pooled): no allocation per request
	 * once warm. */
	char *arena; /* the upstream URL and header lines */
	size_t arena_cap;
	struct curl_slist *hdr_nodes;
	size_t hdr_nodes_cap;
};

#define X_OF_ITEM(it) ((struct exchange *)(void *)((char *)(it)-offsetof(struct exchange, item)))

/* The event-loop side of a lane: its one timer. */
struct lane_shell {
	struct exchanges *xs;
	struct sched_lane *lane;
	struct config_ref *cref; /* the configuration lane->provider and lane->plan point into */
	struct event timer;
	int64_t armed_ms; /* instant the timer is set for; SCHED_NEVER = not armed */
	unsigned last_limit;
	/* While the lane's quota is out: the upstream's refusal, replayed to
	 * every request the lane refuses (a held answer's layout: head
	 * name\0value\0 pairs, then the body). */
	struct evbuffer *quota_answer;
	size_t quota_n, quota_head_len;
	int quota_status;
	char quota_reason[64];
	struct shared_lane *shared; /* the shared store's decisions and leases */
};

struct exchanges {
	struct event_base *base;
	struct upstream *up;
	struct config_ref *cref; /* the current configuration */
	struct registry *reg;
	struct metrics *metrics; /* per provider: what /metrics reports */
	struct event *sweep;     /* idle lane eviction */
	struct event *reap;
	struct exchange *live;
	struct exchange *reap_list;
	struct exchange *pool; /* finished exchanges kept for reuse */
	size_t n_live, n_pool;
	size_t pool_low;    /* the fewest pooled since the last exchanges_trim */
	struct event *idle; /* armed when the last exchange in flight ends */
	unsigned idle_ms;
	void (*idle_fn)(void *);
	void *idle_arg;
	uint64_t rng;
	struct shared *shared; /* store.kind: redis; NULL: local */
};

static const struct up_handler relay_handler;
static const struct hreq_events client_events;

static int64_t now_ms(void)
{
	return clock_now_ms();
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

/* ---- logs ---- */

/* Starts a log line of this exchange: the fields every one carries. */
static bool log_begin_x(struct log_line *l, enum log_level level, const char *event,
                        const struct exchange *x)
{
	if (!log_begin(l, level, event))
		return false;
	log_str(l, "request_id", x->request_id);
	log_str(l, "provider", x->route.provider ? x->route.provider->name : "");
	log_str(l, "key", x->key_id);
	if (x->agent[0])
		log_str(l, "agent", x->agent);
	if (x->priority != 0)
		log_int(l, "priority", x->priority);
	return true;
}

static void log_lane_event(struct exchange *x, const char *event, enum log_level level,
                           const char *k1, long long v1)
{
	struct log_line l;
	if (!log_begin_x(&l, level, event, x))
		return;
	if (k1 != NULL)
		log_int(&l, k1, v1);
	log_end(&l);
}

static void log_limit_learned(struct exchange *x)
{
	static const char *const names[RLH_N_BUDGETS] = {"requests", "tokens", "input_tokens",
	                                                 "output_tokens"};
	struct log_line l;
	if (!log_begin_x(&l, LOG_INFO, "limit_learned", x))
		return;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct learned *lb = sched_learned(x->lane, b);
		if (lb == NULL)
			continue;
		char line[256];
		learned_summary(lb, x->t_headers, line, sizeof(line));
		log_str(&l, names[b], line);
	}
	log_end(&l);
}

/* The access log line: one per request, when it is over. */
static void log_request(struct exchange *x)
{
	struct log_line l;
	if (!log_begin_x(&l, LOG_INFO, "request", x))
		return;
	int64_t now = now_ms();
	log_str(&l, "method", x->method);
	/* The path only: a query string may carry an API key (?key=). */
	if (x->route.path != NULL && x->client != NULL)
		log_strn(&l, "path", x->route.path, strcspn(x->route.path, "?"));
	log_int(&l, "status", x->status);
	log_int(&l, "attempts", x->item.attempts);
	log_int(&l, "queue_ms", x->t_dispatch ? x->t_dispatch - x->t_start : 0);
	log_int(&l, "upstream_ms", x->t_dispatch ? now - x->t_dispatch : 0);
	log_int(&l, "duration_ms", now - x->t_start);
	log_int(&l, "bytes", (long long)x->bytes_out);
	if (x->tokens_used >= 0)
		log_int(&l, "tokens", x->tokens_used);
	if (x->error_code != NULL)
		log_str(&l, "error", x->error_code);
	if (x->client_closed)
		log_bool(&l, "client_closed", true);
	if (x->truncated)
		log_bool(&l, "truncated", true);
	if (x->retry_stop != NULL)
		log_str(&l, "retry_stop", x->retry_stop);
	if (x->up_error != UP_OK)
		log_str(&l, "upstream_error", upstream_error_name(x->up_error));
	if (x->up_detail[0])
		log_str(&l, "upstream_detail", x->up_detail);
	log_end(&l);
}

/* The request's part of /metrics, counted where its access log line is
 * written: once per request. */
static void observe(const struct exchange *x)
{
	int64_t now = now_ms();
	struct metrics_request r = {
	    .queue_ms = x->t_first_dispatch ? x->t_first_dispatch - x->t_start : -1,
	    .first_byte_ms =
	        x->t_dispatch && x->t_headers >= x->t_dispatch ? x->t_headers - x->t_dispatch : -1,
	    .duration_ms = now - x->t_start,
	    .attempts = x->item.attempts,
	    .tokens_estimated = x->tokens_estimated,
	    .tokens_reported = x->tokens_used,
	};
	metrics_observe(x->xs->metrics, x->route.provider, &r);
}

/* ---- the one teardown ---- */

static void exchange_destroy(struct exchange *x)
{
	if (x->held != NULL)
		evbuffer_free(x->held);
	if (x->json != NULL)
		evbuffer_free(x->json);
	tokens_sse_free(&x->sse_scan);
	usage_strip_free(&x->strip);
	free(x->body_own);
	free(x->arena);
	free(x->hdr_nodes);
	free(x);
}

/* Clears an exchange for its next use, keeping what it owns that can serve
 * again: its arena, header nodes and (drained) buffers. */
static void exchange_recycle(struct exchange *x)
{
	struct evbuffer *held = x->held, *json = x->json;
	char *arena = x->arena;
	size_t arena_cap = x->arena_cap;
	struct curl_slist *nodes = x->hdr_nodes;
	size_t nodes_cap = x->hdr_nodes_cap;
	tokens_sse_free(&x->sse_scan);
	usage_strip_free(&x->strip);
	free(x->body_own);
	config_ref_put(x->cref);
	if (held != NULL)
		evbuffer_drain(held, evbuffer_get_length(held));
	if (json != NULL)
		evbuffer_drain(json, evbuffer_get_length(json));
	memset(x, 0, sizeof(*x));
	x->held = held;
	x->json = json;
	x->arena = arena;
	x->arena_cap = arena_cap;
	x->hdr_nodes = nodes;
	x->hdr_nodes_cap = nodes_cap;
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct exchanges *xs = arg;
	(void)fd;
	(void)what;
	while (xs->reap_list != NULL) {
		struct exchange *x = xs->reap_list;
		xs->reap_list = x->next_reap;
		exchange_recycle(x);
		if (xs->n_pool >= POOL_MAX) {
			exchange_destroy(x);
			continue;
		}
		x->next_reap = xs->pool;
		xs->pool = x;
		xs->n_pool++;
	}
}

static struct exchange *exchange_get(struct exchanges *xs)
{
	struct exchange *x = xs->pool;
	if (x != NULL) {
		xs->pool = x->next_reap;
		x->next_reap = NULL;
		xs->n_pool--;
		if (xs->n_pool < xs->pool_low)
			xs->pool_low = xs->n_pool;
		return x;
	}
	return calloc(1, sizeof(*x));
}

static void lane_kick(struct sched_lane *lane);
static void quota_answer(struct exchange *x, const struct lane_shell *ls);

static void retry_timer_disarm(struct exchange *x)
{
	if (x->retry_timer_armed) {
		evtimer_del(&x->retry_timer);
		x->retry_timer_armed = false;
	}
}

/* The attempt's max_concurrent_global lease goes back to the store. */
static void lane_release(struct exchange *x)
{
	if (x->lease != NULL) {
		shared_release(x->xs->shared, x->lease);
		x->lease = NULL;
	}
}

/* Ends the exchange: the upstream side is stopped if it still runs, the lane
 * lets go of it, the access log line is written, and the client half is left
 * (its response must have ended already, or the client is gone). */
static void finish(struct exchange *x)
{
	struct exchanges *xs = x->xs;
	if (x->state == XS_DONE)
		return;
	retry_timer_disarm(x);
	if (x->xfer != NULL) {
		upstream_abort(x->xfer);
		x->xfer = NULL;
		lane_release(x);
		sched_complete(x->lane, &x->item, SCHED_ABORTED, now_ms());
		lane_kick(x->lane);
	} else if (x->lane != NULL &&
	           (x->item.state == SCHED_QUEUED || x->item.state == SCHED_RETRY_WAIT)) {
		sched_cancel(x->lane, &x->item);
		lane_kick(x->lane);
	}
	x->state = XS_DONE;
	log_request(x);
	observe(x);
	x->client = NULL;
	x->body = NULL;
	if (x->prev)
		x->prev->next = x->next;
	else
		xs->live = x->next;
	if (x->next)
		x->next->prev = x->prev;
	xs->n_live--;
	if (xs->n_live == 0 && xs->idle_fn != NULL) {
		struct timeval tv = {(time_t)(xs->idle_ms / 1000),
		                     (suseconds_t)(xs->idle_ms % 1000 * 1000)};
		evtimer_add(xs->idle, &tv);
	}
	x->next_reap = xs->reap_list;
	xs->reap_list = x;
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
	h[n++] =
	    (struct hhdr){"x-pacer-attempts", 16, nums[0], hhdr_u64(nums[0], x->item.attempts)};
	h[n++] = (struct hhdr){"x-pacer-queue-ms", 16, nums[1],
	                       hhdr_u64(nums[1], queue_ms < 0 ? 0 : (uint64_t)queue_ms)};
	return n;
}

/* pacerd's own answer; retry_after_ms >= 0 adds retry-after (seconds,
 * rounded up) and retry-after-ms. Ends the exchange. */
static void answer(struct exchange *x, int status, const char *code, const char *message,
                   long long retry_after_ms)
{
	if (x->client != NULL && x->started) {
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

static struct lane_shell *lane_shell_of(struct exchanges *xs, struct sched_lane *lane)
{
	if (lane->shell != NULL)
		return lane->shell;
	struct lane_shell *ls = calloc(1, sizeof(*ls));
	if (ls == NULL)
		return NULL;
	evtimer_assign(&ls->timer, xs->base, on_lane_timer, ls);
	ls->xs = xs;
	ls->lane = lane;
	ls->cref = config_ref_get(xs->cref);
	ls->armed_ms = SCHED_NEVER;
	ls->last_limit = sched_concurrency_limit(lane);
	lane->shell = ls;
	return ls;
}

static void lane_evicted(struct sched_lane *lane, void *arg)
{
	struct lane_shell *ls = lane->shell;
	struct exchanges *xs = arg;
	if (ls == NULL)
		return;
	shared_lane_free(xs != NULL ? xs->shared : NULL, ls->shared);
	evtimer_del(&ls->timer);
	config_ref_put(ls->cref);
	if (ls->quota_answer != NULL)
		evbuffer_free(ls->quota_answer);
	free(ls);
	lane->shell = NULL;
}

static void lane_arm(struct lane_shell *ls, int64_t wake, int64_t now)
{
	if (wake == ls->armed_ms)
		return;
	ls->armed_ms = wake;
	if (wake == SCHED_NEVER) {
		evtimer_del(&ls->timer);
		return;
	}
	/* To the microsecond: from the clock read now, not from `now`'s whole
	 * millisecond, which would make every wake-up up to 1 ms late. */
	int64_t us = wake > now ? (int64_t)clock_us_until(wake) : 0;
	struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
	evtimer_add(&ls->timer, &tv);
}

/* Runs the lane on the next loop turn: safe from inside any callback. */
static void lane_kick(struct sched_lane *lane)
{
	struct lane_shell *ls = lane->shell;
	if (ls == NULL)
		return;
	ls->armed_ms = 0;
	event_active(&ls->timer, EV_TIMEOUT, 1);
}

static void note_limit_change(struct lane_shell *ls, struct exchange *x)
{
	unsigned limit = sched_concurrency_limit(ls->lane);
	if (limit == ls->last_limit)
		return;
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "concurrency_changed")) {
		log_str(&l, "request_id", x->request_id);
		log_str(&l, "provider", ls->lane->provider->name);
		log_str(&l, "key", ls->lane->key_id);
		log_int(&l, "from", ls->last_limit);
		log_int(&l, "to", limit);
		log_end(&l);
	}
	ls->last_limit = limit;
}

/* ---- one attempt ---- */

static void reset_attempt(struct exchange *x)
{
	x->status = 0;
	x->buffering = false;
	x->no_retry_hdr = false;
	x->sse = false;
	x->held_n = x->held_head_len = 0;
	x->held_reason[0] = '\0';
	if (x->held != NULL)
		evbuffer_drain(x->held, evbuffer_get_length(x->held));
	if (x->json != NULL)
		evbuffer_drain(x->json, evbuffer_get_length(x->json));
	tokens_sse_free(&x->sse_scan);
	tokens_sse_init(&x->sse_scan);
	usage_strip_free(&x->strip);
	usage_strip_init(&x->strip);
	memset(&x->rlh, 0, sizeof(x->rlh));
}

static void give_up_transport(struct exchange *x, enum up_error err, const char *detail)
{
	copy_str(x->up_detail, sizeof(x->up_detail), detail ? detail : "");
	char msg[256];
	if (err == UP_TIMEOUT) {
		/* detail names the timeout that fired (connect_s, first_byte_s) */
		snprintf(msg, sizeof(msg), "the upstream did not answer in time (%s)",
		         detail ? detail : "");
		answer(x, 504, "upstream_timeout", msg, -1);
		return;
	}
	snprintf(msg, sizeof(msg), "the upstream could not be reached: %s (%s)",
	         upstream_error_name(err), detail ? detail : "");
	answer(x, 502, "upstream_unreachable", msg, -1);
}

static void dispatch(struct exchange *x)
{
	struct up_request ur = {
	    .url = x->url,
	    .method = x->method,
	    .headers = x->up_headers,
	    .body = x->body,
	    .body_len = x->body_len,
	    .provider = x->route.provider,
	};
	retry_timer_disarm(x);
	reset_attempt(x);
	x->up_detail[0] = '\0'; /* a failed attempt's words are not this one's */
	x->state = XS_UPSTREAM;
	x->t_dispatch = now_ms();
	if (x->t_first_dispatch == 0)
		x->t_first_dispatch = x->t_dispatch;
	log_lane_event(x, "acquired", LOG_DEBUG, "active_slots", (long long)x->lane->in_flight);
	x->xfer = upstream_start(x->xs->up, &ur, &relay_handler, x);
	if (x->xfer == NULL) {
		lane_release(x);
		sched_complete(x->lane, &x->item, SCHED_TRANSIENT, now_ms());
		give_up_transport(x, UP_INTERNAL, "cannot start the upstream transfer");
	}
}

static void queue_timeout(struct exchange *x)
{
	long long waited_s = (now_ms() - x->item.arrived_ms) / 1000;
	log_lane_event(x, "timeout", LOG_INFO, "timeout_s",
	               (long long)x->lane->plan->queue.max_wait_s);
	char msg[160];
	snprintf(msg, sizeof(msg), "waited %llds in the queue of this key without being sent",
	         waited_s);
	answer(x, 504, "queue_timeout", msg, -1);
}

/* 503 queue_full, with when a request like it would find room (rq; NULL for
 * one evicted from the queue: when the queue would be sent). */
static void queue_full(struct exchange *x, const struct sched_request *rq, int64_t now)
{
	int64_t eta = sched_queue_eta_ms(x->lane, rq, now);
	/* Every SDK honours a hint up to 60 s (PROVIDERS.md §8). */
	if (eta < 1000)
		eta = 1000;
	if (eta > 60000)
		eta = 60000;
	log_lane_event(x, rq != NULL ? "rejected" : "evicted", LOG_INFO, "queue_depth",
	               (long long)sched_queue_depth(x->lane));
	answer(x, 503, "queue_full",
	       rq != NULL ? "the queue of this API key is full"
	                  : "the queue of this API key is full, and requests of a higher priority "
	                    "took this one's place",
	       eta);
}

/* A paced lane decides on a fresh clock: the turn's cached one may be late
 * by however long the turn has run, and every dispatch charged that early
 * would shorten the spacing. An unpaced lane takes the turn's time. */
static int64_t pump_now(const struct sched_lane *lane)
{
	if (gates_enabled(&lane->gates) || lane->gates_mode == SCHED_GATES_SHARED)
		return clock_fresh_ms();
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (sched_learned(lane, b) != NULL)
			return clock_fresh_ms();
	return now_ms();
}

/* store.redis.on_error: fail, with the store down: 503 until it is back. */
static void store_unavailable(struct exchange *x)
{
	struct store_stats *st = shared_stats(x->xs->shared);
	if (st != NULL)
		st->refused++;
	int64_t retry = shared_retry_in_ms(x->xs->shared);
	answer(x, 503, "store_unavailable",
	       "the shared store (store.redis) does not answer, and store.redis.on_error is fail",
	       retry < 1000 ? 1000 : retry);
}

/* The plan's daily budget is spent: 429, with retry-after when the reset is
 * within 60 s (every SDK honours that), else x-should-retry: false (waiting
 * hours is not what an SDK's retry is for). */
static void day_answer(struct exchange *x)
{
	int64_t left = x->lane->day.resets_at_ms - now_ms();
	if (left < 0)
		left = 0;
	x->no_retry_hdr = left > 60000;
	char msg[192];
	snprintf(msg, sizeof(msg),
	         "the daily budget of this API key is spent (max_requests_per_day, "
	         "max_tokens_per_day); it starts over in %llds",
	         (long long)(left + 999) / 1000);
	answer(x, 429, "daily_budget_exhausted", msg, left <= 60000 ? left : -1);
}

/* Keeps the daily budget's day: when the lane has none yet, or its reset has
 * come, asks daily.c for the next reset in the plan's zone (on the wall clock,
 * then carried over to the monotonic one). */
static void day_tick(struct sched_lane *lane, int64_t now)
{
	if (!sched_day_limited(lane))
		return;
	bool new_day = lane->day.resets_at_ms != 0 && now >= lane->day.resets_at_ms;
	if (lane->day.resets_at_ms != 0 && !new_day)
		return;
	int64_t wall = clock_wall_ms();
	int64_t next =
	    daily_next_reset_ms(wall, lane->plan->day_reset_minute, lane->plan->day_time_zone);
	sched_day_reset(lane, now + (next - wall), new_day);
}

static void lane_pump(struct lane_shell *ls)
{
	struct sched_lane *lane = ls->lane;
	int64_t now = pump_now(lane);
	struct sched_item *it;
	day_tick(lane, now);
	while ((it = sched_expired(lane, now)) != NULL)
		queue_timeout(X_OF_ITEM(it));
	if (!shared_pump(ls->xs->shared, lane, &ls->shared, now)) {
		/* on_error: fail, and the store is down: what waits is answered. */
		while ((it = sched_drain(lane)) != NULL)
			store_unavailable(X_OF_ITEM(it));
	}
	while ((it = sched_next(lane, now)) != NULL) {
		struct exchange *x = X_OF_ITEM(it);
		x->lease = shared_dispatched(ls->xs->shared, ls->shared);
		dispatch(x);
	}
	/* A day's budget spent: what waits could only wait for tomorrow. */
	if (sched_day_out(lane))
		while ((it = sched_drain(lane)) != NULL)
			day_answer(X_OF_ITEM(it));
	int64_t wake = sched_wake_at(lane, now);
	if (sched_day_limited(lane) && lane->day.resets_at_ms < wake)
		wake = lane->day.resets_at_ms;
	lane_arm(ls, wake, now);
}

/* ---- entry ---- */

/* An OpenAI chat completion streamed without include_usage on a token-paced
 * lane never says what it cost: ask for the usage (the body pacerd sends
 * upstream gets stream_options.include_usage), and give the client the
 * stream it asked for (usage_strip). A body that is not JSON goes as it is. */
static void meter_stream(struct exchange *x, const struct plan_conf *plan)
{
	if (plan->stream_usage != STREAM_USAGE_INJECT ||
	    x->route.provider->dialect != DIALECT_OPENAI || x->route.path == NULL ||
	    strstr(x->route.path, "/chat/completions") == NULL)
		return;
	char *body;
	size_t len;
	if (usage_inject_request(x->body, x->body_len, &body, &len) != 1)
		return;
	x->body_own = body;
	x->body = body;
	x->body_len = len;
	x->strip_usage = true;
}

/* The URL and the header list sent upstream, built in the exchange's arena
 * (libcurl only reads a curl_slist: its nodes need not come from
 * curl_slist_append): every end-to-end field of the client, and blanks for
 * the defaults libcurl would otherwise add by itself. False when out of
 * memory. */
static bool build_upstream_request(struct exchange *x, struct hreq *client)
{
	static const char expect_blank[] = "Expect:", accept_blank[] = "Accept:",
	                  ctype_blank[] = "Content-Type:";
	const char *connection = hreq_header(client, "connection");
	size_t n = hreq_n_headers(client);
	size_t url_cap = strlen(x->route.provider->upstream) + x->route.path_len + 2;
	size_t need = url_cap + sizeof(expect_blank) + sizeof(accept_blank) + sizeof(ctype_blank);
	for (size_t i = 0; i < n; i++) {
		struct hhdr h;
		hreq_header_at(client, i, &h);
		need += h.name_len + h.value_len + 3;
	}
	if (!grow_bytes(&x->arena, &x->arena_cap, need, 1024))
		return false;
	if (n + 3 > x->hdr_nodes_cap) {
		size_t cap = n + 3 > 32 ? n + 3 : 32;
		struct curl_slist *nodes = realloc(x->hdr_nodes, cap * sizeof(*nodes));
		if (nodes == NULL)
			return false;
		x->hdr_nodes = nodes;
		x->hdr_nodes_cap = cap;
	}
	int u = route_upstream_url(&x->route, x->arena, url_cap);
	if (u < 0)
		return false;
	x->url = x->arena;
	char *pos = x->arena + u + 1;
	size_t k = 0;
	bool has_accept = false, has_ctype = false;
	for (size_t i = 0; i < n; i++) {
		struct hhdr h;
		hreq_header_at(client, i, &h);
		if (!hdr_forward_request(h.name, connection))
			continue;
		if (h.name_len == 6 && strcasecmp(h.name, "accept") == 0)
			has_accept = true;
		else if (h.name_len == 12 && strcasecmp(h.name, "content-type") == 0)
			has_ctype = true;
		/* libcurl reads "Name:" as "remove Name"; "Name;" sends it empty. */
		char *line = pos;
		memcpy(pos, h.name, h.name_len);
		pos += h.name_len;
		if (h.value_len == 0) {
			*pos++ = ';';
		} else {
			*pos++ = ':';
			*pos++ = ' ';
			memcpy(pos, h.value, h.value_len);
			pos += h.value_len;
		}
		*pos++ = '\0';
		x->hdr_nodes[k++].data = line;
	}
	/* Expect: 100-continue would cost a round trip for bodies over 1 MiB. */
	const char *blanks[] = {expect_blank, has_accept ? NULL : accept_blank,
	                        has_ctype ? NULL : ctype_blank};
	for (size_t i = 0; i < sizeof(blanks) / sizeof(blanks[0]); i++) {
		if (blanks[i] == NULL)
			continue;
		size_t len = strlen(blanks[i]) + 1;
		memcpy(pos, blanks[i], len);
		x->hdr_nodes[k++].data = pos;
		pos += len;
	}
	for (size_t i = 0; i < k; i++)
		x->hdr_nodes[i].next = i + 1 < k ? &x->hdr_nodes[i + 1] : NULL;
	x->up_headers = k ? x->hdr_nodes : NULL;
	return true;
}

void exchange_start(struct exchanges *xs, struct hreq *client, const struct exchange_intake *in)
{
	int64_t now = now_ms();
	struct exchange *x = exchange_get(xs);
	if (x == NULL) {
		hreq_error(client, 503, "out_of_memory", "pacerd is out of memory", NULL, 0);
		return;
	}
	x->xs = xs;
	x->state = XS_QUEUED;
	x->client = client;
	x->tokens_used = -1;
	x->cref = config_ref_get(in->cref);
	x->route = in->route;
	x->method = hreq_method(client);
	x->body = hreq_body(client, &x->body_len);
	x->t_start = now;
	copy_str(x->request_id, sizeof(x->request_id), hreq_id(client));
	if (in->key_hash != NULL)
		memcpy(x->key_hash, in->key_hash, ROUTE_KEY_HEX + 1);
	route_key_id(in->key_hash, x->key_id);
	if (in->agent != NULL)
		copy_str(x->agent, sizeof(x->agent), in->agent);
	x->priority = in->priority;
	tokens_sse_init(&x->sse_scan);
	x->next = xs->live;
	if (xs->live)
		xs->live->prev = x;
	xs->live = x;
	if (xs->n_live++ == 0)
		evtimer_del(xs->idle);
	hreq_set_events(client, &client_events, x);

	if (!build_upstream_request(x, client)) {
		answer(x, 503, "out_of_memory", "pacerd is out of memory", -1);
		return;
	}

	if (shared_refusing(xs->shared)) {
		store_unavailable(x);
		return;
	}
	const struct config *cfg = xs->cref->cfg;
	struct sched_lane *lane =
	    registry_lane(xs->reg, cfg, x->route.provider, x->key_hash, now, lane_evicted, xs);
	struct lane_shell *ls = lane ? lane_shell_of(xs, lane) : NULL;
	if (ls == NULL) {
		answer(x, 503, "too_many_keys",
		       "pacerd tracks as many API keys as limits.max_lanes allows", 1000);
		return;
	}
	x->lane = lane;
	const struct plan_conf *plan = lane->plan;
	/* The request's deadline: the earlier of the plan's retry.deadline_s
	 * and the client's own timeout, which the official SDKs send. */
	x->retry_deadline = now + (int64_t)plan->retry.deadline_s * 1000;
	long long client_ms = hdr_client_timeout_ms(hreq_header(client, "x-pacer-timeout-ms"),
	                                            hreq_header(client, "x-stainless-timeout"));
	if (client_ms > 0 && now + client_ms < x->retry_deadline)
		x->retry_deadline = now + client_ms;
	struct sched_request rq = {
	    .agent = in->agent_id, .flow = in->flow, .priority = in->priority};
	/* A wait longer than the client will wait is a wait for nothing: say
	 * so now, with when there will be room, so that the SDK's own retry
	 * lands then. */
	int64_t wait_ms = client_ms > 0 ? sched_queue_eta_ms(lane, &rq, now) : 0;
	if (client_ms > 0 && now + wait_ms >= x->retry_deadline) {
		log_lane_event(x, "rejected", LOG_INFO, "eta_ms", (long long)wait_ms);
		char msg[160];
		snprintf(
		    msg, sizeof(msg),
		    "the queue of this API key needs about %lld ms, more than the %lld ms this "
		    "request allows",
		    (long long)wait_ms, client_ms);
		answer(x, 503, "deadline_unreachable", msg, wait_ms <= 60000 ? wait_ms : -1);
		return;
	}

	/* The token estimate reads the body: only when a token budget paces
	 * this lane. */
	struct tokens_cost cost = {0};
	if (sched_wants_tokens(lane)) {
		tokens_estimate(x->body, x->body_len, plan->default_output_tokens, &cost);
		x->want_usage = true;
		meter_stream(x, plan);
	}
	rq.cost_prompt = (double)cost.prompt;
	rq.cost_output = (double)cost.output;
	x->tokens_estimated = rq.cost_prompt + rq.cost_output;
	day_tick(lane, now);

	struct sched_item *evicted;
	switch (sched_submit(lane, &x->item, &rq, now, &evicted)) {
	case SCHED_OK:
		/* It took the place of the newest request of a lower priority. */
		if (evicted != NULL)
			queue_full(X_OF_ITEM(evicted), NULL, now);
		break;
	case SCHED_QUEUE_FULL:
		queue_full(x, &rq, now);
		return;
	case SCHED_AGENT_BUSY:
		log_lane_event(x, "rejected", LOG_INFO, NULL, 0);
		answer(x, 409, "agent_busy",
		       "this agent already has a request in flight (agents.mode: reject)", -1);
		return;
	case SCHED_QUOTA:
		quota_answer(x, ls);
		return;
	case SCHED_DAY_OUT:
		day_answer(x);
		return;
	}
	if (sched_queue_depth(lane) > 1 || lane->in_flight >= sched_concurrency_limit(lane))
		log_lane_event(x, "queueing", LOG_DEBUG, "queue_depth",
		               (long long)sched_queue_depth(lane));
	lane_pump(ls);
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

static const struct hreq_events client_events = {
    .drained = on_client_drained,
    .gone = on_client_gone,
};

/* ---- relaying ---- */

static const char *find_up_header(const struct up_header *h, size_t n, const char *name)
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
	x->started = true;
	hreq_start(x->client, x->status, reason, h, n);
}

/* Keeps the head of an answer held back for the retry decision. */
static bool hold_head(struct exchange *x, const struct up_header *h, size_t n)
{
	if (x->held == NULL && (x->held = evbuffer_new()) == NULL)
		return false;
	for (size_t i = 0; i < n; i++) {
		evbuffer_add(x->held, h[i].name, h[i].name_len + 1);
		evbuffer_add(x->held, h[i].value, h[i].value_len + 1);
	}
	x->held_n = n;
	x->held_head_len = evbuffer_get_length(x->held);
	return true;
}

/* Starts the response from the held head; returns the held body. */
static void start_held(struct exchange *x, const char **body, size_t *body_len)
{
	size_t total = evbuffer_get_length(x->held);
	const char *p = (const char *)evbuffer_pullup(x->held, -1);
	struct up_header uh[RESP_HEADERS_MAX];
	size_t n = 0;
	const char *q = p;
	for (size_t i = 0; i < x->held_n && n < RESP_HEADERS_MAX; i++) {
		uh[n].name = q;
		uh[n].name_len = strlen(q);
		q += uh[n].name_len + 1;
		uh[n].value = q;
		uh[n].value_len = strlen(q);
		q += uh[n].value_len + 1;
		n++;
	}
	start_response(x, uh, n, x->held_reason);
	*body = p + x->held_head_len;
	*body_len = total - x->held_head_len;
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
	if (sched_observe(x->lane, &x->item, &x->rlh, x->t_headers))
		log_limit_learned(x);
	shared_observed(x->xs->shared, x->lane);
	lane_kick(x->lane); /* what was learned may move the lane's next instant */

	const char *ctype = find_up_header(h, n, "content-type");
	x->sse = x->want_usage && ctype != NULL && strncasecmp(ctype, "text/event-stream", 17) == 0;

	/* A capacity answer holds the lane from its headers on: what would
	 * leave in between reaches a provider that has just refused. Until its
	 * body is decided (PENDING_HOLD_MAX_MS at most), and for the header's
	 * retry-after, which needs no body. */
	if (status == 429 || status == 503 || status == 529) {
		int64_t hint, fresh = clock_fresh_ms();
		if (rlh_server_hint(&x->rlh, NULL, &hint) && hint > 0) {
			sched_hold(x->lane, fresh + hint);
			shared_hold(x->xs->shared, x->lane, hint);
		}
		sched_hold_pending(x->lane, &x->item, fresh + PENDING_HOLD_MAX_MS);
	}
	if (maybe_retryable(status)) {
		copy_str(x->held_reason, sizeof(x->held_reason), reason);
		x->buffering = true;
		return hold_head(x, h, n);
	}
	start_response(x, h, n, reason);
	return true;
}

static void note_usage_bytes(struct exchange *x, const char *data, size_t len)
{
	if (!x->want_usage)
		return;
	if (x->sse) {
		tokens_sse_feed(&x->sse_scan, data, len);
		return;
	}
	if (x->json == NULL)
		x->json = evbuffer_new();
	if (x->json != NULL && evbuffer_get_length(x->json) + len <= USAGE_JSON_CAP)
		evbuffer_add(x->json, data, len);
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
	if (x->buffering) {
		if (evbuffer_get_length(x->held) - x->held_head_len + len <= RETRY_BODY_CAP) {
			evbuffer_add(x->held, data, len);
			return true;
		}
		/* Too large for an error body worth deciding on: relay it as is. */
		x->buffering = false;
		const char *body;
		size_t body_len;
		start_held(x, &body, &body_len);
		if (body_len > 0)
			relay(x, body, body_len);
	}
	if (x->client_full)
		return false; /* slow reader: hold the upstream until it drains */
	note_usage_bytes(x, data, len);
	if (x->strip_usage && x->sse)
		usage_strip_feed(&x->strip, data, len, relay_cb, x);
	else
		relay(x, data, len);
	return true;
}

/* The real token usage corrects the token gate by the difference. */
static void settle_tokens(struct exchange *x)
{
	if (!x->want_usage)
		return;
	struct tokens_usage u;
	memset(&u, 0, sizeof(u));
	if (x->sse) {
		u = x->sse_scan.usage;
	} else if (x->json != NULL && evbuffer_get_length(x->json) > 0) {
		size_t n = evbuffer_get_length(x->json);
		tokens_usage_json((const char *)evbuffer_pullup(x->json, -1), n, &u);
	}
	if (!u.present)
		return;
	x->tokens_used = u.total;
	const struct sched_item *it = &x->item;
	double d_tokens = (double)u.total - it->cost_tokens;
	double d_in = u.has_input ? (double)u.input - it->cost_prompt : 0;
	double d_out = u.has_output ? (double)u.output - it->cost_output : 0;
	shared_tokens_used(x->xs->shared, x->lane, d_tokens, d_in, d_out);
	sched_tokens_used(x->lane, &x->item, (double)u.total, u.has_input ? (double)u.input : -1,
	                  u.has_output ? (double)u.output : -1, now_ms());
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

/* ---- quota ---- */

/* Keeps x's held answer (a quota refusal) as the lane's answer to every
 * request it refuses while the quota is out. The upstream's x-request-id is
 * left out: it names the request that was refused, not the ones that get a
 * copy (they get their own). */
static void quota_keep(struct lane_shell *ls, const struct exchange *x)
{
	if (ls->quota_answer == NULL && (ls->quota_answer = evbuffer_new()) == NULL)
		return;
	evbuffer_drain(ls->quota_answer, evbuffer_get_length(ls->quota_answer));
	size_t total = evbuffer_get_length(x->held);
	const char *p = (const char *)evbuffer_pullup(x->held, -1);
	const char *q = p;
	size_t n = 0;
	for (size_t i = 0; i < x->held_n; i++) {
		size_t name_len = strlen(q);
		const char *v = q + name_len + 1;
		size_t value_len = strlen(v);
		if (strcasecmp(q, "x-request-id") != 0) {
			evbuffer_add(ls->quota_answer, q, name_len + 1 + value_len + 1);
			n++;
		}
		q = v + value_len + 1;
	}
	ls->quota_n = n;
	ls->quota_head_len = evbuffer_get_length(ls->quota_answer);
	evbuffer_add(ls->quota_answer, p + x->held_head_len, total - x->held_head_len);
	ls->quota_status = x->status;
	copy_str(ls->quota_reason, sizeof(ls->quota_reason), x->held_reason);
}

/* Answers x with the lane's kept refusal and x-should-retry: false: the
 * account cannot be served, and the SDK should not try again either. */
static void quota_answer(struct exchange *x, const struct lane_shell *ls)
{
	if (ls->quota_answer == NULL || evbuffer_get_length(ls->quota_answer) == 0 ||
	    (x->held == NULL && (x->held = evbuffer_new()) == NULL)) {
		/* No refusal of our own to replay (another replica saw it). */
		x->no_retry_hdr = true;
		answer(x, 429, "quota_exhausted", "the quota of this API key is exhausted", -1);
		return;
	}
	evbuffer_drain(x->held, evbuffer_get_length(x->held));
	size_t len = evbuffer_get_length(ls->quota_answer);
	evbuffer_add(x->held, evbuffer_pullup(ls->quota_answer, -1), len);
	x->held_n = ls->quota_n;
	x->held_head_len = ls->quota_head_len;
	x->status = ls->quota_status;
	copy_str(x->held_reason, sizeof(x->held_reason), ls->quota_reason);
	x->no_retry_hdr = true;
	x->error_code = "quota_exhausted";
	relay_held(x);
}

/* x's answer says the key's quota is out: every request waiting in the lane
 * gets the same answer now, instead of being paced into certain refusals. */
static void quota_begin(struct exchange *x, const char *why)
{
	struct sched_lane *lane = x->lane;
	struct lane_shell *ls = lane->shell;
	quota_keep(ls, x);
	bool fresh = sched_quota_exhausted(lane, now_ms());
	if (fresh)
		shared_quota(x->xs->shared, lane, true);
	size_t drained = 0;
	struct sched_item *it;
	while ((it = sched_drain(lane)) != NULL) {
		quota_answer(X_OF_ITEM(it), ls);
		drained++;
	}
	if (!fresh && drained == 0)
		return;
	struct log_line l;
	if (log_begin_x(&l, LOG_WARN, "quota_exhausted", x)) {
		log_int(&l, "status_code", x->status);
		log_str(&l, "reason", why);
		log_int(&l, "drained", (long long)drained);
		log_int(&l, "probe_s", lane->plan->quota_probe_s);
		log_end(&l);
	}
}

/* Ends x's attempt in its lane (sched_complete) and reports what that
 * changed: the concurrency limit, a quota that a success restored. */
static void complete_attempt(struct exchange *x, enum sched_outcome outcome, int64_t now)
{
	struct sched_lane *lane = x->lane;
	bool quota_before = sched_quota_out(lane);
	lane_release(x);
	sched_complete(lane, &x->item, outcome, now);
	note_limit_change(lane->shell, x);
	if (quota_before && !sched_quota_out(lane)) {
		struct lane_shell *ls = lane->shell;
		if (ls->quota_answer != NULL)
			evbuffer_drain(ls->quota_answer, evbuffer_get_length(ls->quota_answer));
		log_lane_event(x, "quota_restored", LOG_INFO, NULL, 0);
		shared_quota(x->xs->shared, lane, false);
	}
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
	case UP_RESOLVE:
	case UP_TLS:
		return RETRY_TRANSPORT_CONNECT;
	case UP_TIMEOUT:
		return RETRY_TRANSPORT_TIMEOUT;
	case UP_TLS_VERIFY:
		return RETRY_TRANSPORT_CERT;
	default:
		return RETRY_TRANSPORT_RESET;
	}
}

static void log_retry(struct exchange *x, enum up_error err, enum retry_class cls, const char *why,
                      int64_t delay_ms)
{
	struct log_line l;
	if (!log_begin_x(&l, LOG_INFO, "retry", x))
		return;
	log_int(&l, "attempt", x->item.attempts);
	log_int(&l, "status_code", err == UP_OK ? x->status : 0);
	if (err != UP_OK)
		log_str(&l, "upstream_error", upstream_error_name(err));
	log_str(&l, "class", retry_class_name(cls));
	log_str(&l, "reason", why);
	log_num(&l, "delay_s", (double)delay_ms / 1000.0);
	log_int(&l, "concurrency", sched_concurrency_limit(x->lane));
	log_int(&l, "dispatch_delay_ms", aimd_delay_ms(&x->lane->delay));
	log_end(&l);
}

/* A retry still waiting in its lane when the request's deadline came: the
 * last answer now (the held upstream answer, or pacerd's own 502 / 504 for a
 * transport failure), as when a retry's delay does not fit the deadline. */
static void on_retry_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct exchange *x = arg;
	(void)fd;
	(void)what;
	x->retry_timer_armed = false;
	if (x->state != XS_RETRY_WAIT)
		return;
	struct lane_shell *ls = x->lane->shell;
	x->retry_stop = "deadline";
	if (x->up_error == UP_OK && x->held != NULL) {
		relay_held(x); /* finish() takes it out of the lane */
	} else {
		char detail[sizeof(x->up_detail)];
		copy_str(detail, sizeof(detail), x->up_detail);
		give_up_transport(x, x->up_error != UP_OK ? x->up_error : UP_INTERNAL, detail);
	}
	lane_pump(ls);
}

/* The answer was an error that may be retried (held back), or no answer at
 * all: retry after the delay, or relay / answer it now. */
static void decide(struct exchange *x, enum up_error err, const char *detail)
{
	int64_t now = now_ms();
	const char *body = NULL;
	size_t body_len = 0;
	if (err == UP_OK && x->held != NULL) {
		size_t total = evbuffer_get_length(x->held);
		const char *p = (const char *)evbuffer_pullup(x->held, -1);
		body_len = total - x->held_head_len;
		body = body_len ? p + x->held_head_len : NULL;
	}
	/* The error body is parsed once, for the classification and the
	 * hints both. */
	struct retry_body rb;
	retry_body_parse(body, body_len, &rb);
	const char *why = NULL;
	enum retry_class cls =
	    err == UP_OK ? retry_classify_body(x->status, RETRY_TRANSPORT_NONE, &x->rlh, &rb, &why)
	                 : retry_classify_body(0, transport_of(err), NULL, NULL, &why);

	struct sched_lane *lane = x->lane;
	struct lane_shell *ls = lane->shell;
	int64_t hint = -1;
	bool has_hint = err == UP_OK && retry_server_hint(&x->rlh, &rb, &hint);
	/* An answer for money, or a capacity hint no request could wait out (a
	 * daily cap), says the key cannot be served: a quota. */
	bool quota =
	    err == UP_OK && x->held != NULL &&
	    (retry_reason_is_quota(why) || (cls == RETRY_CAPACITY && has_hint &&
	                                    hint >= (int64_t)lane->plan->retry.deadline_s * 1000));
	x->item.hinted = has_hint && hint > 0;
	/* A transport failure is never a success for the lane, final or not. */
	complete_attempt(x,
	                 quota          ? SCHED_QUOTA_OUT
	                 : err != UP_OK ? SCHED_TRANSIENT
	                                : outcome_of(cls),
	                 now);

	struct retry_decision d = {.retry = false, .no_retry_hdr = cls == RETRY_FINAL_NO_RETRY};
	if (cls == RETRY_CAPACITY || cls == RETRY_TRANSIENT) {
		d = retry_decide(cls, x->item.attempts, has_hint, hint, lane->plan,
		                 x->retry_deadline - now, rand_unit(x->xs));
		/* A capacity hint speaks for the whole key: nothing of this lane
		 * goes before it ends (the provider would refuse it anyway). From
		 * a fresh clock: the turn's may predate the answer's arrival (a
		 * libcurl timer can read a socket), and a hold that ends before
		 * the provider's window does sends the next request into it. */
		if (cls == RETRY_CAPACITY && has_hint && hint > 0) {
			sched_hold(lane, clock_fresh_ms() + hint);
			shared_hold(x->xs->shared, lane, hint);
		}
	}
	if (quota && !d.retry)
		quota_begin(x, why);
	if ((cls == RETRY_CAPACITY || cls == RETRY_TRANSIENT) && !d.retry)
		x->retry_stop = d.why;
	if (d.retry) {
		log_retry(x, err, cls, why, d.delay_ms);
		/* The held answer stays until the next dispatch (which resets
		 * the attempt): it is what the client gets if the deadline comes
		 * first. A retry that is due still queues behind the lane's gates
		 * (a lane slowed by a storm of 503s spaces its dispatches by
		 * seconds); without this timer it would wait up to
		 * queue.max_wait_s past its deadline, then be sent anyway. */
		if (err != UP_OK) /* kept for the deadline's answer */
			copy_str(x->up_detail, sizeof(x->up_detail), detail ? detail : "");
		x->state = XS_RETRY_WAIT;
		sched_retry(lane, &x->item, now + d.delay_ms);
		evtimer_assign(&x->retry_timer, x->xs->base, on_retry_deadline, x);
		int64_t left = x->retry_deadline - now;
		struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
		x->retry_timer_armed = evtimer_add(&x->retry_timer, &tv) == 0;
		lane_pump(ls);
		return;
	}
	x->no_retry_hdr = d.no_retry_hdr;
	if (err == UP_OK)
		relay_held(x);
	else
		give_up_transport(x, err, detail);
	lane_pump(ls);
}

static void on_up_done(void *ctx, enum up_error err, const char *detail)
{
	struct exchange *x = ctx;
	x->xfer = NULL;
	x->up_error = err;
	struct sched_lane *lane = x->lane;

	if (!x->started) {
		decide(x, err, detail);
		return;
	}
	/* Streamed answer: its bytes reached the client, so it is final. */
	int64_t now = now_ms();
	enum sched_outcome outcome = SCHED_SUCCESS;
	if (x->status == 429 || x->status == 503 || x->status == 529)
		outcome = SCHED_CAPACITY;
	else if (err != UP_OK)
		outcome = SCHED_TRANSIENT;
	complete_attempt(x, outcome, now);
	if (err == UP_OK)
		settle_tokens(x);
	log_lane_event(x, "released", LOG_DEBUG, "active_slots", (long long)lane->in_flight);
	if (err != UP_OK) {
		/* Cut mid-body: the client must see an incomplete message, not a
		 * clean end; what arrived is delivered, then the connection closes. */
		struct log_line l;
		if (log_begin_x(&l, LOG_WARN, "upstream_aborted", x)) {
			log_str(&l, "upstream_error", upstream_error_name(err));
			log_str(&l, "detail", detail ? detail : "");
			log_int(&l, "bytes", (long long)x->bytes_out);
			log_end(&l);
		}
		copy_str(x->up_detail, sizeof(x->up_detail), detail ? detail : "");
		x->truncated = true;
	}
	if (x->client != NULL && x->strip_usage && x->sse && err == UP_OK)
		usage_strip_finish(&x->strip, relay_cb, x);
	if (x->client != NULL)
		hreq_end(x->client, err == UP_OK);
	finish(x);
	lane_pump(lane->shell);
}

static const struct up_handler relay_handler = {
    .on_headers = on_up_headers,
    .on_body = on_up_body,
    .on_done = on_up_done,
};

/* ---- the set ---- */

static void reconfigure_lane(struct sched_lane *lane, void *arg)
{
	struct exchanges *xs = arg;
	struct lane_shell *ls = lane->shell;
	const struct config *cfg = xs->cref->cfg;
	const struct provider_conf *prov = config_provider(cfg, lane->provider->name);
	if (ls == NULL || prov == NULL)
		return; /* its provider is gone: it keeps its old plan until it empties */
	lane->provider = prov;
	lane->agents_mode = cfg->agents.mode;
	sched_lane_set_plan(lane, registry_plan_for(cfg, prov, lane->key_hash), now_ms());
	config_ref_put(ls->cref);
	ls->cref = config_ref_get(xs->cref);
	lane_kick(lane); /* the new limits may open a gate now */
}

void exchanges_reconfigure(struct exchanges *xs, struct config_ref *cref)
{
	struct config_ref *old = xs->cref;
	xs->cref = config_ref_get(cref);
	metrics_bind(xs->metrics, cref->cfg);
	registry_foreach(xs->reg, reconfigure_lane, xs);
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

/* Lanes idle for limits.idle_ttl_s are forgotten. */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct exchanges *xs = arg;
	(void)fd;
	(void)what;
	registry_evict_idle(xs->reg, now_ms(), (int64_t)xs->cref->cfg->limits.idle_ttl_s * 1000,
	                    lane_evicted, xs);
}

/* ---- the shared store's hooks ---- */

/* Another replica found the quota out: this lane stops as if it had. */
static void on_shared_quota_out(struct sched_lane *lane)
{
	struct lane_shell *ls = lane->shell;
	sched_quota_exhausted(lane, now_ms());
	size_t drained = 0;
	struct sched_item *it;
	while ((it = sched_drain(lane)) != NULL) {
		quota_answer(X_OF_ITEM(it), ls);
		drained++;
	}
	struct log_line l;
	if (log_begin(&l, LOG_WARN, "quota_exhausted")) {
		log_str(&l, "provider", lane->provider->name);
		log_str(&l, "key", lane->key_id);
		log_str(&l, "reason", "another replica's answer (shared store)");
		log_int(&l, "drained", (long long)drained);
		log_end(&l);
	}
}

/* ... and back: a probe of another replica succeeded. */
static void on_shared_quota_back(struct sched_lane *lane)
{
	struct lane_shell *ls = lane->shell;
	sched_quota_restored(lane);
	if (ls != NULL && ls->quota_answer != NULL)
		evbuffer_drain(ls->quota_answer, evbuffer_get_length(ls->quota_answer));
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "quota_restored")) {
		log_str(&l, "provider", lane->provider->name);
		log_str(&l, "key", lane->key_id);
		log_str(&l, "reason", "another replica's answer (shared store)");
		log_end(&l);
	}
}

static void kick_busy_lane(struct sched_lane *lane, void *arg)
{
	(void)arg;
	if (!sched_lane_idle(lane))
		lane_kick(lane);
}

/* The store went up or down: every lane with something waiting looks again
 * (to fall back, to refuse, or to be shared again) now, not at its timer. */
static void on_store_changed(void *arg, bool up)
{
	struct exchanges *xs = arg;
	(void)up;
	registry_foreach(xs->reg, kick_busy_lane, NULL);
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
	xs->reg = registry_new();
	xs->metrics = metrics_new();
	if (xs->metrics != NULL)
		metrics_bind(xs->metrics, cref->cfg);
	xs->reap = event_new(base, -1, 0, on_reap, xs);
	xs->sweep = event_new(base, -1, EV_PERSIST, on_sweep, xs);
	xs->idle = evtimer_new(base, on_idle, xs);
	xs->rng = ((uint64_t)arc4random() << 32) | arc4random() | 1;
	if (xs->reg == NULL || xs->metrics == NULL || xs->reap == NULL || xs->sweep == NULL ||
	    xs->idle == NULL) {
		snprintf(err, errlen, "out of memory");
		exchanges_free(xs);
		return NULL;
	}
	const struct shared_hooks hooks = {
	    .kick = lane_kick,
	    .quota_out = on_shared_quota_out,
	    .quota_back = on_shared_quota_back,
	    .store_changed = on_store_changed,
	    .arg = xs,
	};
	xs->shared = shared_new(base, cref->cfg, &hooks, err, errlen);
	if (xs->shared == NULL && err[0] != '\0') {
		exchanges_free(xs);
		return NULL;
	}
	struct timeval sweep = {LANE_SWEEP_S, 0};
	event_add(xs->sweep, &sweep);
	return xs;
}

void exchanges_abort_all(struct exchanges *xs)
{
	while (xs->live != NULL) {
		struct exchange *x = xs->live;
		/* answer() cuts a response that has begun. */
		answer(x, 503, "shutting_down", "pacerd stopped before the upstream answered",
		       1000);
	}
}

size_t exchanges_lane_count(const struct exchanges *xs)
{
	return registry_count(xs->reg);
}

size_t exchanges_live(const struct exchanges *xs)
{
	return xs->n_live;
}

struct registry *exchanges_lanes(const struct exchanges *xs)
{
	return xs->reg;
}

struct shared *exchanges_shared(const struct exchanges *xs)
{
	return xs->shared;
}

const struct metrics *exchanges_metrics(const struct exchanges *xs)
{
	return xs->metrics;
}

void exchanges_on_idle(struct exchanges *xs, unsigned ms, void (*fn)(void *), void *arg)
{
	xs->idle_ms = ms;
	xs->idle_fn = fn;
	xs->idle_arg = arg;
}

size_t exchanges_trim(struct exchanges *xs, bool all)
{
	size_t n = all ? xs->n_pool : xs->pool_low;
	for (size_t i = 0; i < n && xs->pool != NULL; i++) {
		struct exchange *x = xs->pool;
		xs->pool = x->next_reap;
		xs->n_pool--;
		exchange_destroy(x);
	}
	xs->pool_low = xs->n_pool;
	return n;
}

void exchanges_free(struct exchanges *xs)
{
	if (xs == NULL)
		return;
	while (xs->live != NULL)
		finish(xs->live);
	on_reap(-1, 0, xs);
	while (xs->pool != NULL) {
		struct exchange *x = xs->pool;
		xs->pool = x->next_reap;
		exchange_destroy(x);
	}
	if (xs->reg != NULL)
		registry_free(xs->reg, lane_evicted, xs);
	shared_free(xs->shared);
	if (xs->reap != NULL)
		event_free(xs->reap);
	if (xs->sweep != NULL)
		event_free(xs->sweep);
	if (xs->idle != NULL)
		event_free(xs->idle);
	metrics_free(xs->metrics);
	config_ref_put(xs->cref);
	free(xs);
}
