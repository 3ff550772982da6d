/* SPDX-License-Identifier: Apache-2.0 */
/* ws_event — what one WebSocket message of the Responses API's WebSocket
 * mode or of the Realtime API says for pacing (PROVIDERS.md §11; issue 31):
 * a client's turn (response.create), the model a Realtime session names
 * (session.update), the end of a turn with its usage (response.completed,
 * response.done, response.failed, response.incomplete), the provider's own
 * counters (rate_limits.updated: Realtime), and an error event, of which a
 * rate-limit refusal is told apart with its wait.
 *
 * Messages may be large (a response.completed repeats the whole response):
 * the type is found by a structural scan of the top level, the usage by
 * usage_read (any length), and only messages under WS_EVENT_PARSE_CAP are
 * parsed whole (jansson) for the fields of rate_limits.updated and error
 * events, which are small. Pure: no I/O, no clock. */
#ifndef PACERD_WS_EVENT_H
#define PACERD_WS_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider/ratelimit_headers.h"
#include "provider/tokens.h"

#define WS_EVENT_PARSE_CAP (64 * 1024)
#define WS_EVENT_TYPE_MAX 48
#define WS_EVENT_MODEL_MAX 128

enum ws_event_kind {
	WSE_OTHER,       /* anything else: relayed as it is */
	WSE_TURN,        /* client: response.create, a request of the lane */
	WSE_SESSION,     /* client: session.update (Realtime; model may name the lane) */
	WSE_TURN_END,    /* server: the oldest turn in flight ended (usage when reported) */
	WSE_RATE_LIMITS, /* server: rate_limits.updated, in limits */
	WSE_REFUSED,     /* server: an error event refusing for a rate limit */
	WSE_ERROR,       /* server: another error event */
};

struct ws_event {
	enum ws_event_kind kind;
	char type[WS_EVENT_TYPE_MAX]; /* the message's "type" ("" when none or too long) */
	/* WSE_TURN_END: whether the response completed (response.completed, or
	 * response.done with status completed), and its usage (usage.present). */
	bool completed;
	struct tokens_usage usage;
	/* WSE_RATE_LIMITS: requests and tokens budgets (limit, remaining,
	 * reset from reset_seconds). */
	struct rlh_result limits;
	/* WSE_REFUSED: the wait the message names ("try again in 1.5s"). */
	bool has_hint;
	int64_t hint_ms;
	/* WSE_REFUSED, WSE_ERROR: the error's code (or type), truncated. */
	char code[48];
	/* WSE_SESSION: the model a session.update names (session.model); "" none. */
	char model[WS_EVENT_MODEL_MAX];
};

/* Reads one text message (len bytes) sent by the client (from_client) or by
 * the provider into *out (always initialised). A message that is not a JSON
 * object is WSE_OTHER. */
void ws_event_read(const char *msg, size_t len, bool from_client, struct ws_event *out);

/* The value of the top-level "type" member of a JSON object, found by a
 * structural scan (strings, escapes, nesting; nothing decoded), into type
 * (NUL-terminated, at most cap - 1 bytes). False when there is none, it is
 * not a plain string, or it does not fit. */
bool ws_event_type(const char *msg, size_t len, char *type, size_t cap);

#endif
