/* SPDX-License-Identifier: Apache-2.0 */
/* xlog — what one exchange writes. See xlog.h. */
#include "proxy/xlog.h"

#include <string.h>

#include "core/log.h"

/* Starts a log line of this exchange: the fields every one carries. */
bool xlog_begin(struct log_line *l, enum log_level level, const char *event,
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

void xlog_event(const struct exchange *x, const char *event, enum log_level level, const char *k1,
                long long v1)
{
	struct log_line l;
	if (!xlog_begin(&l, level, event, x))
		return;
	if (k1 != NULL)
		log_int(&l, k1, v1);
	log_end(&l);
}

void xlog_limit_learned(const struct exchange *x)
{
	struct log_line l;
	if (!xlog_begin(&l, LOG_INFO, "limit_learned", x))
		return;
	lanes_log_learned(&x->ticket, &l, x->t_headers);
	log_end(&l);
}

/* What an attempt's end changed in the lane, logged with this request. */
void xlog_lane_change(const struct exchange *x, const struct lane_change *ch)
{
	if (ch->limit_from != ch->limit_to) {
		struct log_line l;
		if (log_begin(&l, LOG_INFO, "concurrency_changed")) {
			log_str(&l, "request_id", x->request_id);
			log_str(&l, "provider", x->route.provider->name);
			log_str(&l, "key", x->key_id);
			log_int(&l, "from", ch->limit_from);
			log_int(&l, "to", ch->limit_to);
			log_end(&l);
		}
	}
	if (ch->quota_restored)
		xlog_event(x, "quota_restored", LOG_INFO, NULL, 0);
}

/* The access log line: one per request, when it is over. */
void xlog_request(const struct exchange *x, int64_t now)
{
	struct log_line l;
	if (!xlog_begin(&l, LOG_INFO, "request", x))
		return;
	log_str(&l, "method", x->method);
	if (x->model[0])
		log_str(&l, "model", x->model);
	/* The path only: a query string may carry an API key (?key=). */
	if (x->route.path != NULL && x->client != NULL)
		log_strn(&l, "path", x->route.path, strcspn(x->route.path, "?"));
	log_int(&l, "status", x->status);
	if (x->route.tunnel)
		log_bool(&l, "tunnel", true);
	log_int(&l, "attempts", x->ticket.item.attempts);
	log_int(&l, "queue_ms", x->t_dispatch ? x->t_dispatch - x->t_start : 0);
	log_int(&l, "upstream_ms", x->t_dispatch ? now - x->t_dispatch : 0);
	log_int(&l, "duration_ms", now - x->t_start);
	log_int(&l, "bytes", (long long)x->bytes_out);
	if (x->upload)
		log_int(&l, "upload_bytes", (long long)x->upload_bytes);
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
	/* Among the operator's last errors (admin /status): pacerd's own
	 * refusals, failed transfers, and 429s and 5xx passed on. */
	if (x->error_code != NULL || x->up_error != UP_OK || x->status == 429 || x->status >= 500)
		log_keep(&l);
	log_end(&l);
}

/* The request's part of /metrics, counted where its access log line is
 * written: once per request. */
void xlog_observe(const struct exchange *x, struct reqstats *stats, int64_t now)
{
	struct reqstats_request r = {
	    .queue_ms = x->t_first_dispatch ? x->t_first_dispatch - x->t_start : -1,
	    .first_byte_ms =
	        x->t_dispatch && x->t_headers >= x->t_dispatch ? x->t_headers - x->t_dispatch : -1,
	    .duration_ms = now - x->t_start,
	    .attempts = x->ticket.item.attempts,
	    .tokens_estimated = x->tokens_estimated,
	    .tokens_reported = x->tokens_used,
	};
	reqstats_observe(stats, x->route.provider, &r);
}

void xlog_retry(const struct exchange *x, enum up_error err, const struct retry_verdict *v)
{
	struct log_line l;
	if (!xlog_begin(&l, LOG_INFO, "retry", x))
		return;
	log_int(&l, "attempt", x->ticket.item.attempts);
	log_int(&l, "status_code", err == UP_OK ? x->status : 0);
	if (err != UP_OK)
		log_str(&l, "upstream_error", upstream_error_name(err));
	log_str(&l, "class", retry_class_name(v->cls));
	log_str(&l, "reason", v->reason);
	log_num(&l, "delay_s", (double)v->delay_ms / 1000.0);
	log_int(&l, "concurrency", lanes_concurrency(&x->ticket));
	log_int(&l, "dispatch_delay_ms", lanes_dispatch_delay_ms(&x->ticket));
	log_end(&l);
}

void xlog_rewrites_off(const struct exchange *x, const char *what, int resent_status)
{
	struct log_line l;
	if (!xlog_begin(&l, LOG_WARN, "rewrites_off", x))
		return;
	log_str(&l, "rewrite", what);
	log_int(&l, "refused_status", x->rewrite_refused);
	log_int(&l, "resent_status", resent_status);
	log_str(&l, "detail",
	        "the upstream refused the body pacerd rewrote and took the "
	        "client's own: its requests go as sent from now on");
	log_end(&l);
}
