/* SPDX-License-Identifier: Apache-2.0 */
/* retry — what an upstream answer means for a retry, and how long to wait
 * (DESIGN §3, PROVIDERS.md §2-§6, §8).
 *
 * Pure: no I/O, no clock, no hidden randomness (the caller passes a uniform
 * random value). retry_classify says what an answer is, retry_decide whether
 * and when to send the request again; retry_verdict_head and retry_verdict
 * put them together into what the exchange does with an answer.
 *
 * No provider's strings here: what an error body says is read by
 * provider/error_body (one parse: the facts and the hints), and this module
 * decides from those facts. */
#ifndef PACERD_RETRY_H
#define PACERD_RETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider/error_body.h"
#include "provider/ratelimit_headers.h"

struct plan_conf; /* core/config.h */

enum retry_class {
	RETRY_FINAL,          /* relay as it is */
	RETRY_FINAL_NO_RETRY, /* relay at once with x-should-retry: false, never retry */
	RETRY_CAPACITY,       /* overload: signal AIMD, retry until the deadline */
	RETRY_TRANSIENT,      /* retry at most max_attempts attempts in all */
};

/* How the attempt ended below HTTP; RETRY_TRANSPORT_NONE when there is a status. */
enum retry_transport {
	RETRY_TRANSPORT_NONE,
	RETRY_TRANSPORT_CONNECT, /* could not connect (DNS, refused, TLS handshake) */
	RETRY_TRANSPORT_RESET,   /* connection lost before the response headers */
	RETRY_TRANSPORT_TIMEOUT, /* connect, first-byte or idle timeout */
	RETRY_TRANSPORT_CERT,    /* the upstream's certificate failed verification */
};

/* Largest error body looked at (DESIGN §3: read whole, cap 64 KiB). */
#define RETRY_BODY_CAP ERROR_BODY_CAP

/* Classifies one answer. status: the HTTP status (ignored when transport is
 * not NONE). hdrs: rlh_parse of the response headers, for x-should-retry (may
 * be NULL). facts: what the error body says (error_body_parse; NULL: no
 * body). If reason is not NULL it receives a static string naming the rule
 * that decided, for logs (the provider's own code for a money or capacity
 * fact, such as "insufficient_quota"; else "rate_limited", "status_503",
 * "daily_quota", ...); if quota is not NULL it is set when that rule says the
 * account cannot be served at all (money, a daily cap, 402): every request of
 * the key would get the same answer, not only this one.
 *
 * Rules, first match wins: a certificate that fails verification is
 * final_no_retry (every attempt, pacerd's or the SDK's, would fail the same
 * way: it is a configuration matter, not a passing fault); any other
 * transport error is transient; 1xx/2xx/3xx are
 * final (a 200 is never an overload signal, whatever its body); then for
 * errors: x-should-retry: false → final_no_retry; money (facts->money), a
 * request too large (facts->too_large), a 402 (unless its body says
 * in_flight: OpenRouter's transient one → capacity), and a daily cap
 * (facts->daily_cap) → final_no_retry; 429, 503, 529 and bodies saying
 * capacity (facts->capacity) → capacity; 408, 409, 500, 502, 504 and other
 * 5xx except 501, 505, 511 → transient; x-should-retry: true on anything else
 * → transient (the official SDKs trust it too); the rest is final. */
enum retry_class retry_classify(int status, enum retry_transport transport,
                                const struct rlh_result *hdrs, const struct error_facts *facts,
                                const char **reason, bool *quota);

const char *retry_class_name(enum retry_class c);

struct retry_decision {
	bool retry;        /* false: give up and relay the last answer */
	int64_t delay_ms;  /* when retry: wait this long (>= 0) before going back to the queue */
	bool no_retry_hdr; /* when giving up: relay with x-should-retry: false */
	const char *why;   /* static string for logs */
};

/* Decides the next step after a failed attempt.
 * cls: from retry_classify. attempt: attempts made so far, 1-based (0 is
 * taken as 1). has_hint/hint_ms: the server's hint (rlh_server_hint), ignored
 * when negative. plan->retry: the settings used (initial_delay_ms,
 * max_delay_ms, jitter, max_attempts; deadline_s is the caller's business:
 * it passes time_left_ms, the time until the request's deadline). rnd: uniform
 * in [0, 1) (clamped into it).
 *
 * backoff = min(initial * 2^(attempt-1) + jitter, max), jitter = rnd * 500 ms
 * (additive) — or, with full jitter, backoff = rnd * min(initial * 2^(attempt-1), max);
 * delay = max(hint, backoff). Final classes never retry (final_no_retry sets
 * no_retry_hdr). Transient stops once attempt >= max_attempts. Both stop when
 * the delay does not fit in time_left_ms; when it is the server's hint that
 * lands past the deadline (a daily cap), no_retry_hdr is set, so that the
 * client's SDK does not wait for nothing either. */
struct retry_decision retry_decide(enum retry_class cls, unsigned attempt, bool has_hint,
                                   int64_t hint_ms, const struct plan_conf *plan,
                                   int64_t time_left_ms, double rnd);

/* The backoff part alone (no hint, no deadline), for tests and /status. */
int64_t retry_backoff_ms(unsigned attempt, const struct plan_conf *plan, double rnd);

/* ---- the verdict: what the exchange does with an answer ----
 *
 * The two calls below are the whole retry policy the exchange follows: it
 * keeps no status set and no quota rule of its own. */

/* When the headers of an attempt's answer arrive. */
struct retry_head_verdict {
	bool hold_body;  /* the answer may be retried: hold it back (up to RETRY_BODY_CAP)
	                  * until it is whole (402, 408, 409, 429, >= 500) */
	bool capacity;   /* a capacity status (429, 503, 529): the lane holds until this
	                  * answer is decided (sched_hold_pending) */
	int64_t hold_ms; /* > 0: the header's server hint (rlh_server_hint): hold the
	                  * lane this long from now */
};

/* Reads an answer's status and parsed headers (hdrs: rlh_parse, may be NULL).
 * Every status that retry_classify could make capacity or transient, or
 * final_no_retry by its body (402), is held: the body decides, and what is
 * held can still be retried because no byte has reached the client. A
 * capacity status holds the lane at once, before its body is read: what would
 * leave meanwhile reaches a provider that has just refused; a retry hint in
 * the headers (not the body, not yet read) holds it for that long. hold_ms is
 * 0 for other statuses, whatever their headers say.
 * own_tier: the request asked for a service tier of its own (flex,
 * tokens_cost.flex_tier): its capacity answer may be that tier's shortage,
 * which must not hold the lane's other requests, so nothing is held before
 * its body says whose shortage it is (capacity false, hold_ms 0). Groq's 498
 * (a flex shortage) is held for its body too. */
struct retry_head_verdict retry_verdict_head(int status, const struct rlh_result *hdrs,
                                             bool own_tier);

/* What an attempt's answer means for the lane (sched_complete's outcome). */
enum retry_lane_outcome {
	RETRY_LANE_SUCCESS,
	RETRY_LANE_CAPACITY,
	RETRY_LANE_TRANSIENT,
	RETRY_LANE_QUOTA_OUT,
	RETRY_LANE_OVERLOAD, /* capacity, but the provider's (Anthropic 529): the lane
	                      * holds, its pace and concurrency are not cut */
	RETRY_LANE_TIER,     /* capacity of one service tier (flex): nothing of the
	                      * lane is held or cut; the request waits alone */
};

enum retry_action {
	RETRY_ACTION_RELAY,   /* the answer is final: relay it (the held one), or it
	                       * was streamed already */
	RETRY_ACTION_RETRY,   /* wait delay_ms without a slot, then back to the lane */
	RETRY_ACTION_GIVE_UP, /* retrying stopped: relay the held answer, or pacerd's
	                       * own 502/504 for a transport failure */
};

struct retry_input {
	int status;                     /* HTTP status; ignored when transport != NONE,
	                                 * except for a streamed answer */
	enum retry_transport transport; /* NONE when there is an HTTP answer */
	const struct rlh_result *hdrs;  /* NULL: none */
	const char *body;               /* the held error body; NULL / 0: none */
	size_t body_len;                /* its length */
	bool held;                      /* the answer was held back (not streamed):
	                                 * body is read only then */
	bool streamed;                  /* bytes already reached the client: final
	                                 * whatever it says */
	bool body_gone;                 /* the request cannot be sent again (an
	                                 * upload whose first bytes are gone): what
	                                 * would be retried is given up on */
	unsigned attempt;               /* attempts made so far, 1-based */
	int64_t now_ms, deadline_ms;    /* the request's deadline (monotonic) */
	const struct plan_conf *plan;   /* retry settings and retry.deadline_s (the
	                                 * quota rule) */
	double rnd;                     /* uniform [0, 1) for jitter */
};

struct retry_verdict {
	enum retry_action action;
	enum retry_lane_outcome outcome; /* for the lane (sched_complete) */
	enum retry_class cls;
	int64_t delay_ms;   /* RETRY: the wait */
	int64_t hold_ms;    /* > 0: hold the whole lane this long from now (a
	                     * capacity hint: retry-after etc.) */
	bool hinted;        /* the answer said when (a positive server hint) */
	bool quota;         /* the account cannot be served: the lane's quota is
	                     * out; the lane answers what waits with this answer */
	bool no_retry_hdr;  /* relay with x-should-retry: false */
	const char *reason; /* static: why the class (retry_classify's reason);
	                     * NULL for a streamed answer */
	const char *stop;   /* static, when an answer that could be retried is given
	                     * up on: "max_attempts", "deadline", "hint_past_deadline",
	                     * "body_gone"
	                     * (retry_decide's why); NULL otherwise */
	/* A capacity refusal of the account's that named its budget, its limit
	 * and a window under a day (error_hints: Gemini's quotaId and quotaValue,
	 * OpenAI's "Limit N"): what the lane may learn when no header told it.
	 * limit 0: none. */
	struct {
		enum rlh_budget_kind budget;
		int64_t limit;
		int64_t window_ms;
	} told;
};

/* Decides on one attempt's answer once it is whole (or cut, or never came).
 *
 * A streamed answer (in->streamed) reached the client already: it is relayed
 * whatever it says, and only tells the lane something: capacity for 429, 503,
 * 529 (even when a transport error cut it), transient when a transport error
 * cut it, success otherwise; nothing else is set (cls RETRY_FINAL, reason
 * NULL).
 *
 * Otherwise the body, when held (in->held, transport NONE), is parsed once
 * (error_body_parse): its facts give the class (retry_classify; a transport
 * error has no headers, no body and no hint), its hints the server's hint
 * with the headers (rlh_server_hint). Then:
 * - quota: an HTTP answer, held, whose class says the account cannot be
 *   served (retry_classify's quota), or a capacity answer whose hint is at least
 *   retry.deadline_s (no request could wait it out): every request of the key
 *   would get the same answer. outcome is then QUOTA_OUT; quota is set only
 *   when the answer is not retried (it then becomes the lane's answer).
 * - outcome otherwise: a transport error is transient even when final (never
 *   a success for the lane); capacity → CAPACITY, transient → TRANSIENT,
 *   final → SUCCESS.
 * - capacity and transient go to retry_decide with the time left until
 *   deadline_ms: RETRY with its delay, or GIVE_UP with stop = its why and its
 *   no_retry_hdr (a hint past the deadline). A request whose body is gone
 *   (in->body_gone) is GIVE_UP where it would be retried, stop "body_gone",
 *   without x-should-retry: false (the client still has its body); the
 *   lane's outcome and hold are those of a retry. A transport error given up on,
 *   a certificate failure included, is GIVE_UP too: there is no answer to
 *   relay, pacerd answers its own.
 * - final classes of an HTTP answer are RELAY; final_no_retry with
 *   no_retry_hdr.
 * - hold_ms: a capacity answer's positive hint holds the whole lane, retried
 *   or not (the provider would refuse what goes before it ends); so does a
 *   daily cap's (Gemini's retryDelay: the quota's probe waits for the reset).
 * - whose capacity (error_facts): a tier's shortage (flex) is outcome TIER
 *   and holds nothing (hold_ms 0, the request waits its own delay); a
 *   provider's overload (overloaded_error, any 529) is outcome OVERLOAD and
 *   holds the lane for its hint, or else for the retry's delay; OpenRouter's
 *   in-flight 402 is a capacity answer of the account's (retried after its
 *   Retry-After), the other 402s stay final.
 * - told: a CAPACITY answer whose body named a budget, its limit and a window
 *   under a day (else limit 0). */
struct retry_verdict retry_verdict(const struct retry_input *in);

#endif
