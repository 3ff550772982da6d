/* SPDX-License-Identifier: Apache-2.0 */
/* refusal — pacerd's own answers to a request the exchange took over: what
 * each of the lanes' refusals (lanes.h, enum lane_refusal) and each failed
 * transport becomes for the client, as one table (DESIGN §6). Pure: the
 * exchange writes the answer (its headers, the access log) and logs the event
 * named here with the request.
 *
 * The retry hints follow PROVIDERS.md §8: retry-after (seconds, rounded up)
 * and retry-after-ms only where waiting is worth it, and never beyond what
 * every SDK honours (60 s), except for a full queue's, which is its ETA
 * clamped to 1..60 s. x-should-retry: false where an SDK's retry cannot help
 * (the quota is out; the day's budget starts over in more than 60 s). */
#ifndef PACERD_REFUSAL_H
#define PACERD_REFUSAL_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/lanes.h"
#include "proxy/upstream.h"
#include "sched/retry.h"

#define REFUSAL_MESSAGE_MAX 256

struct refusal {
	int status;
	const char *code; /* pacerd's error code (static) */
	char message[REFUSAL_MESSAGE_MAX];
	long long retry_after_ms; /* -1: no retry-after */
	bool no_retry;            /* x-should-retry: false */
	/* LANE_REFUSE_QUOTA: the lane's kept refusal from the provider is
	 * replayed when there is one (lanes_quota_answer); this answer is given
	 * when there is none (another replica saw it). */
	bool replay_quota;
	/* The log event of this refusal (info), with one number or none;
	 * NULL: none. Static. */
	const char *log_event;
	const char *log_key;
	long long log_value;
};

/* The answer to a refusal. waited_ms: how long the request was in its queue
 * (QUEUE_TIMEOUT says so); allowed_ms: how long the request allows from its
 * start (its deadline; DEADLINE says so). */
void refusal_of_lane(const struct lane_refusal_info *r, int64_t waited_ms, int64_t allowed_ms,
                     struct refusal *out);

/* The answer when the upstream could not be reached, or did not answer in
 * time, and no retry is left: 504 upstream_timeout or 502
 * upstream_unreachable, with libcurl's detail (NULL: none) in the message. */
void refusal_of_transport(enum up_error err, const char *detail, struct refusal *out);

/* What kind of failure err is for the retry verdict (retry.h): one that never
 * reached the server (connect, resolve, TLS), a timeout, a certificate that
 * failed verification, or a reset; UP_OK: none (an answer came). */
enum retry_transport refusal_transport_class(enum up_error err);

#endif
