/* SPDX-License-Identifier: Apache-2.0 */
/* refusal — pacerd's own answers, one row per refusal. See refusal.h. */
#include "proxy/refusal.h"

#include <stdio.h>
#include <string.h>

/* Where the retry hint comes from: the refusal's wait_ms (-1: unknown). */
enum hint {
	HINT_NONE,
	HINT_WAIT,        /* as it is: none when unknown */
	HINT_AT_LEAST_1S, /* at least 1 s, also when unknown */
	HINT_1S_TO_60S,   /* clamped to 1..60 s (a full queue's ETA) */
	HINT_UP_TO_60S,   /* when it is at most 60 s, else none */
};

/* The numbers the message is written with, in the order of its %lld. */
enum msg_args {
	ARGS_NONE,
	ARGS_WAIT_ALLOWED, /* the queue's wait, the request's allowance (ms) */
	ARGS_WAITED_S,     /* how long it waited, whole seconds */
	ARGS_RESET_S,      /* the wait until the day starts over, seconds rounded up */
};

/* What the log event carries. */
enum log_num { NUM_NONE, NUM_WAIT_MS, NUM_DEPTH, NUM_LIMIT_S };

struct row {
	int status;
	const char *code;
	const char *message; /* a printf format of args */
	enum msg_args args;
	enum hint hint;
	bool no_retry_over_60s; /* x-should-retry: false when the wait is over 60 s */
	bool replay_quota;
	const char *log_event;
	const char *log_key;
	enum log_num log_num;
};

/* The answer's status, code, message (a format of args) and hint. */
#define ANSWER(st, c, msg, a, h) .status = st, .code = c, .message = msg, .args = a, .hint = h

static const struct row rows[] = {
    [LANE_REFUSE_TOO_MANY_LANES] = {ANSWER(
        503, "too_many_keys", "pacerd tracks as many API keys as limits.max_lanes allows",
        ARGS_NONE, HINT_WAIT)},
    [LANE_REFUSE_STORE_DOWN] = {ANSWER(503, "store_unavailable",
                                       "the shared store (store.redis) does not answer, and "
                                       "store.redis.on_error is fail",
                                       ARGS_NONE, HINT_AT_LEAST_1S)},
    [LANE_REFUSE_DEADLINE] = {ANSWER(503, "deadline_unreachable",
                                     "the queue of this API key needs about %lld ms, more than "
                                     "the %lld ms this request allows",
                                     ARGS_WAIT_ALLOWED, HINT_UP_TO_60S),
                              .log_event = "rejected", .log_key = "eta_ms", .log_num = NUM_WAIT_MS},
    [LANE_REFUSE_QUEUE_FULL] = {ANSWER(503, "queue_full", "the queue of this API key is full",
                                       ARGS_NONE, HINT_1S_TO_60S),
                                .log_event = "rejected", .log_key = "queue_depth",
                                .log_num = NUM_DEPTH},
    [LANE_REFUSE_EVICTED] = {ANSWER(503, "queue_full",
                                    "the queue of this API key is full, and requests of a "
                                    "higher priority took this one's place",
                                    ARGS_NONE, HINT_1S_TO_60S),
                             .log_event = "evicted", .log_key = "queue_depth",
                             .log_num = NUM_DEPTH},
    [LANE_REFUSE_QUEUE_TIMEOUT] = {ANSWER(504, "queue_timeout",
                                          "waited %llds in the queue of this key without being "
                                          "sent",
                                          ARGS_WAITED_S, HINT_NONE),
                                   .log_event = "timeout", .log_key = "timeout_s",
                                   .log_num = NUM_LIMIT_S},
    [LANE_REFUSE_AGENT_BUSY] = {ANSWER(409, "agent_busy",
                                       "this agent already has a request in flight "
                                       "(agents.mode: reject)",
                                       ARGS_NONE, HINT_NONE),
                                .log_event = "rejected"},
    [LANE_REFUSE_QUOTA] = {ANSWER(429, "quota_exhausted", "the quota of this API key is exhausted",
                                  ARGS_NONE, HINT_NONE),
                           .replay_quota = true},
    /* 429, with retry-after when the reset is within 60 s (every SDK
     * honours that), else x-should-retry: false (waiting hours is not what
     * an SDK's retry is for). */
    [LANE_REFUSE_DAY_OUT] = {ANSWER(429, "daily_budget_exhausted",
                                    "the daily budget of this API key is spent "
                                    "(max_requests_per_day, max_tokens_per_day); it starts "
                                    "over in %llds",
                                    ARGS_RESET_S, HINT_UP_TO_60S),
                             .no_retry_over_60s = true},
};

_Static_assert(sizeof(rows) / sizeof(rows[0]) == LANE_REFUSE_DAY_OUT + 1,
               "a row for every lane refusal");

static long long hint_of(enum hint h, int64_t wait_ms)
{
	switch (h) {
	case HINT_NONE:
		break;
	case HINT_WAIT:
		return wait_ms;
	case HINT_AT_LEAST_1S:
		return wait_ms < 1000 ? 1000 : wait_ms;
	case HINT_1S_TO_60S:
		return wait_ms < 1000 ? 1000 : wait_ms > 60000 ? 60000 : wait_ms;
	case HINT_UP_TO_60S:
		return wait_ms <= 60000 ? wait_ms : -1;
	}
	return -1;
}

void refusal_of_lane(const struct lane_refusal_info *r, int64_t waited_ms, int64_t allowed_ms,
                     struct refusal *out)
{
	const struct row *row = &rows[r->why];
	memset(out, 0, sizeof(*out));
	out->status = row->status;
	out->code = row->code;
	switch (row->args) {
	case ARGS_NONE:
		snprintf(out->message, sizeof(out->message), "%s", row->message);
		break;
	case ARGS_WAIT_ALLOWED:
		snprintf(out->message, sizeof(out->message), row->message, (long long)r->wait_ms,
		         (long long)allowed_ms);
		break;
	case ARGS_WAITED_S:
		snprintf(out->message, sizeof(out->message), row->message,
		         (long long)waited_ms / 1000);
		break;
	case ARGS_RESET_S:
		snprintf(out->message, sizeof(out->message), row->message,
		         (long long)(r->wait_ms + 999) / 1000);
		break;
	}
	out->retry_after_ms = hint_of(row->hint, r->wait_ms);
	out->no_retry = row->replay_quota || (row->no_retry_over_60s && r->wait_ms > 60000);
	out->replay_quota = row->replay_quota;
	out->log_event = row->log_event;
	out->log_key = row->log_key;
	switch (row->log_num) {
	case NUM_NONE:
		break;
	case NUM_WAIT_MS:
		out->log_value = r->wait_ms;
		break;
	case NUM_DEPTH:
		out->log_value = r->depth;
		break;
	case NUM_LIMIT_S:
		out->log_value = r->limit_s;
		break;
	}
}

void refusal_of_transport(enum up_error err, const char *detail, struct refusal *out)
{
	memset(out, 0, sizeof(*out));
	out->retry_after_ms = -1;
	if (detail == NULL)
		detail = "";
	if (err == UP_TIMEOUT) {
		/* detail names the timeout that fired (connect_s, first_byte_s) */
		out->status = 504;
		out->code = "upstream_timeout";
		snprintf(out->message, sizeof(out->message),
		         "the upstream did not answer in time (%s)", detail);
		return;
	}
	out->status = 502;
	out->code = "upstream_unreachable";
	snprintf(out->message, sizeof(out->message), "the upstream could not be reached: %s (%s)",
	         upstream_error_name(err), detail);
}

enum retry_transport refusal_transport_class(enum up_error err)
{
	switch (err) {
	case UP_OK:
		return RETRY_TRANSPORT_NONE;
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
