/* proxy — the state shared by the client side (server.c) and the exchange with
 * the upstream (exchange.c). Internal to those two files.
 *
 * One struct xreq per accepted request. Its two halves end separately: the
 * client half when evhttp has written the whole response or the client went
 * away; the upstream half when the exchange is over (answered, given up, or
 * the client left). It is freed on the next loop turn after both have ended
 * (xreq_maybe_free), never from inside an evhttp or libcurl callback. */
#ifndef PACERD_PROXY_H
#define PACERD_PROXY_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ratelimit_headers.h"
#include "registry.h"
#include "route.h"
#include "sched.h"
#include "tokens.h"
#include "upstream.h"

#define REQUEST_ID_MAX 128

/* A configuration and the number of holders: the server (the current one),
 * every request accepted under it (its route points into it), and every lane
 * whose provider or plan does. Freed when the last holder lets go, so a reload
 * never pulls a configuration from under a request in flight. */
struct cfgref {
	struct config *cfg;
	unsigned refs;
};

struct cfgref *cfgref_new(struct config *cfg);
struct cfgref *cfgref_get(struct cfgref *r);
void cfgref_put(struct cfgref *r);

struct server {
	struct event_base *base;
	const struct config *cfg; /* = cref->cfg, the current configuration */
	struct cfgref *cref;
	struct upstream *up;
	struct registry *reg;
	struct evhttp *http;
	struct evconnlistener *listener;
	struct evhttp_bound_socket *bound;
	struct event *accept_retry;
	struct event *reap;
	struct event *sweep; /* idle lane eviction */
	struct xreq *live;
	struct xreq *reap_list;
	size_t n_live;
	unsigned long long next_id;
	unsigned id_prefix;
	uint64_t responses[6]; /* answers to clients by status class: [2] = 2xx … */
	uint64_t rng;
	bool shutting_down;
	void (*drained)(void *);
	void *drained_arg;
};

/* The event-loop side of a lane: its one timer. */
struct lane_shell {
	struct server *srv;
	struct sched_lane *lane;
	struct cfgref *cref; /* the configuration lane->provider and lane->plan point into */
	struct event *timer;
	int64_t armed_ms; /* instant the timer is set for; SCHED_NEVER = not armed */
	unsigned last_limit;
};

struct xreq {
	struct server *srv;
	struct cfgref *cref;             /* the configuration it was accepted under */
	struct evhttp_request *req;      /* NULL once evhttp freed it */
	struct evhttp_connection *evcon; /* NULL once the client is gone */
	bool req_detached;               /* evhttp let go of req: we free it */
	struct route route;
	char *url;
	struct curl_slist *up_headers;
	const char *body;
	size_t body_len;
	char key_hash[ROUTE_KEY_HEX + 1];
	char key_id[ROUTE_KEY_ID_SIZE];
	char request_id[REQUEST_ID_MAX + 1];
	char agent[64];
	const char *method;

	/* Scheduling. */
	struct sched_lane *lane;
	struct sched_item item;
	int64_t t_start, t_dispatch, t_headers; /* monotonic ms */
	int64_t retry_deadline;

	/* The current attempt. */
	struct up_xfer *xfer;
	int status;
	bool buffering;        /* an error answer held back for the retry decision */
	struct evbuffer *held; /* its body, at most RETRY_BODY_CAP */
	char held_reason[64];
	struct rlh_result rlh;
	bool want_usage;
	bool sse; /* the response is an event stream: scan it */
	struct tokens_sse sse_scan;
	struct evbuffer *json; /* a JSON response, kept for its usage (capped) */
	bool no_retry_hdr;     /* relay with x-should-retry: false */

	/* Client side. */
	struct event *close_watch; /* EV_CLOSED on the client fd until the response starts */
	struct evbuffer *chunk;
	size_t bytes_out;
	const char *error_code; /* pacerd's own answer, for the access log */
	enum up_error up_error;
	char up_detail[128]; /* libcurl's message for a failed attempt, for the log */
	bool client_closed;
	bool response_started, paused, abort_when_drained;
	bool upstream_done, client_done, reaping;
	struct xreq *prev, *next; /* srv->live */
	struct xreq *next_reap;
};

#define XREQ_OF_ITEM(it) ((struct xreq *)(void *)((char *)(it)-offsetof(struct xreq, item)))

/* server.c */
void xreq_maybe_free(struct xreq *xr);
void xreq_error(struct xreq *xr, int status, const char *code, const char *message,
                long long retry_after_ms);
void xreq_log_request(struct xreq *xr);
void xreq_stop_close_watch(struct xreq *xr);
void xreq_close_client_now(struct xreq *xr);
void xreq_restore_client_timeouts(struct xreq *xr);
void proxy_add_pacer_headers(struct evkeyvalq *out, const char *request_id, int attempts,
                             long long queue_ms);
const char *proxy_status_reason(int status);

/* exchange.c */
/* Enters the request into its lane (or answers it: queue full, agent busy,
 * too many keys). Called from intake, never inside a libcurl callback. */
void exchange_submit(struct xreq *xr);
/* Stops the upstream side of a request now (the client left, or the drain
 * deadline passed): drops it from its lane or aborts its transfer. */
void exchange_abort(struct xreq *xr);
void exchange_lane_evicted(struct sched_lane *lane, void *arg);
/* A new configuration: lanes whose provider still exists take its plan for
 * their next dispatch; the others keep theirs until they empty. */
void exchange_reconfigure(struct server *srv);

#endif
