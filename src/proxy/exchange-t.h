/* SPDX-License-Identifier: Apache-2.0 */
/* exchange-t — the type of one exchange (exchange.c's opening comment draws
 * its life), shared by the exchange's own files only: exchange.c, which owns
 * and changes it, and xlog.c, which reads it to write the request's log
 * lines. Nothing else includes this header: the rest of pacerd sees the
 * exchange through exchange.h. */
#ifndef PACERD_EXCHANGE_T_H
#define PACERD_EXCHANGE_T_H

#include <event2/event_struct.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/keyid.h"
#include "core/list.h"
#include "http/httpd.h"
#include "provider/ratelimit_headers.h"
#include "provider/tokens.h"
#include "proxy/held.h"
#include "proxy/lanes.h"
#include "proxy/meter.h"
#include "proxy/route.h"
#include "proxy/stopwatch.h"
#include "proxy/upreq.h"
#include "proxy/upstream.h"
#include "proxy/xstate.h"

#define AGENT_MAX 64

struct exchange {
	struct exchanges *xs;
	enum xstate state;
	struct hreq *client;     /* NULL once the response ended or the client left */
	struct config_ref *cref; /* the configuration it was accepted under */
	struct route route;
	struct upreq upreq; /* the URL and header lines sent upstream (kept across uses) */
	const char *body;   /* the client's, valid while client != NULL, or the meter's */
	size_t body_len;
	/* An upload (hreq_streamed): its body goes upstream as it arrives, never
	 * read here; body is NULL, upload_bytes counts what was sent. */
	bool upload;
	uint64_t upload_bytes;
	const char *method;
	char key_hash[KEYID_HEX + 1];
	char key_id[KEYID_NAME_SIZE];
	char request_id[HREQ_ID_MAX + 1];
	char agent[AGENT_MAX];
	int priority;                     /* x-pacer-priority or the agent's; logged when not 0 */
	char model[TOKENS_MODEL_MAX + 1]; /* as sent; "": none */
	uint64_t identity; /* lanes_identity() of its OpenAI-Project/-Organization; 0: none */

	/* Scheduling. */
	struct lane_ticket ticket;
	int64_t t_start, t_dispatch, t_headers; /* monotonic ms */
	int64_t t_first_dispatch;               /* 0: never dispatched */
	unsigned long long turn_start;          /* the loop turn it came in (clock_turn) */
	int64_t retry_deadline;
	/* Pending while XS_RETRY_WAIT: at retry_deadline the last answer is
	 * given, however busy the lane still is. Assigned each time it is
	 * armed (the struct is recycled with memset). */
	struct event retry_timer;

	/* The current attempt. */
	struct up_xfer *xfer; /* the transfer running, or NULL */
	int status;
	struct held held; /* XS_HELD: the answer, kept whole (its buffer kept across uses) */
	struct rlh_result rlh;
	struct meter meter;     /* the answer's usage (kept across uses) */
	struct stopwatch watch; /* when its tokens came, for a lane that reads latency */
	bool no_retry_hdr;      /* relay with x-should-retry: false */
	/* The status (400, 422) the upstream gave the body pacerd rewrote, when
	 * the client's own bytes were resent (rewrites.h); 0: none. */
	int rewrite_refused;
	bool own_tier;           /* the request asks for a tier of its own (flex: the body
	                          * scan's tokens_cost.flex_tier) */
	long long tokens_used;   /* the usage the answer reported, -1: none */
	double tokens_estimated; /* the estimate charged before dispatch (0: none made) */

	/* Relaying. */
	bool client_full; /* hreq_write said stop: the transfer pauses */
	uint64_t bytes_out;
	const char *error_code; /* pacerd's own answer, for the access log */
	enum up_error up_error;
	char up_detail[128]; /* libcurl's message for a failed attempt, for the log */
	/* The response began but the upstream broke off (reset, idle timeout):
	 * the client got a cut message, and the request line says so. */
	bool truncated;
	/* Why retrying stopped (the verdict's stop: "max_attempts",
	 * "deadline", …) when an answer that could be retried was given up
	 * on; NULL otherwise. Static. */
	const char *retry_stop;
	bool client_closed;
	struct list link; /* on xs->live, then xs->reap_list, then in xs->pool */
};

#define X_OF_TICKET(t) ((struct exchange *)(void *)((char *)(t)-offsetof(struct exchange, ticket)))

#endif
