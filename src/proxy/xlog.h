/* SPDX-License-Identifier: Apache-2.0 */
/* xlog — what one exchange writes about itself: its log lines (each carries
 * request_id, provider, key (the hash prefix), and agent and priority when
 * set: DESIGN §7), the access log line when it ends ("request"), and its part
 * of /metrics (reqstats), counted where the access line is written: once per
 * request. It reads the exchange (exchange-t.h) and changes nothing in it. */
#ifndef PACERD_XLOG_H
#define PACERD_XLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/log.h"
#include "proxy/exchange-t.h"
#include "proxy/lanes.h"
#include "proxy/reqstats.h"
#include "sched/retry.h"

/* Starts a log line of x: the fields every one carries. False when the
 * level is off (then nothing is to be added or ended). */
bool xlog_begin(struct log_line *l, enum log_level level, const char *event,
                const struct exchange *x);
/* A lane event of x, with one number (k1 NULL: none). */
void xlog_event(const struct exchange *x, const char *event, enum log_level level, const char *k1,
                long long v1);
/* limit_learned: what the lane learned from x's answer. */
void xlog_limit_learned(const struct exchange *x);
/* What an attempt's end changed in the lane (concurrency_changed,
 * quota_restored), logged with x. */
void xlog_lane_change(const struct exchange *x, const struct lane_change *ch);
/* rewrites_off (once per provider): the upstream refused the body pacerd
 * rewrote (what) and took the client's own bytes with resent_status. */
void xlog_rewrites_off(const struct exchange *x, const char *what, int resent_status);
/* retry: the verdict v on x's attempt that ended with err (UP_OK: an answer). */
void xlog_retry(const struct exchange *x, enum up_error err, const struct retry_verdict *v);
/* The access log line: one per request, when it is over. */
void xlog_request(const struct exchange *x, int64_t now);
/* The request's part of /metrics. */
void xlog_observe(const struct exchange *x, struct reqstats *stats, int64_t now);

#endif
