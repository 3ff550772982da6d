/* SPDX-License-Identifier: Apache-2.0 */
/* metrics — histograms, the per-provider table and the text exposition. See
 * metrics.h. */
#include "admin/metrics.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/stats.h"
#include "core/version.h"
#include "provider/ratelimit_headers.h"
#include "proxy/reqstats.h"
#include "sched/learned.h"
#include "sched/registry.h"
#include "sched/sched.h"
#include "store/store.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- text ---- */

void metrics_family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_label_value(struct evbuffer *out, const char *s)
{
	evbuffer_add(out, "\"", 1);
	for (const char *p = s; *p; p++) {
		size_t run = strcspn(p, "\\\"\n");
		evbuffer_add(out, p, run);
		p += run;
		if (*p == '\0')
			break;
		evbuffer_add(out, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n", 2);
	}
	evbuffer_add(out, "\"", 1);
}

void metrics_hist_write(struct evbuffer *out, const char *name, const char *labels,
                        const struct stats_hist *h)
{
	const char *sep = labels[0] ? "," : "";
	for (size_t i = 0; i < h->n_bounds; i++)
		evbuffer_add_printf(out, "%s_bucket{%s%sle=\"%.17g\"} %llu\n", name, labels, sep,
		                    h->bounds[i], (unsigned long long)h->counts[i]);
	evbuffer_add_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
	                    (unsigned long long)h->count);
	const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
	evbuffer_add_printf(out, "%s_sum%s%s%s %.17g\n", name, open, labels, close, h->sum);
	evbuffer_add_printf(out, "%s_count%s%s%s %llu\n", name, open, labels, close,
	                    (unsigned long long)h->count);
}

/* ---- the per-provider table ---- */

/* ---- lanes ---- */

static const char *const budget_names[RLH_N_BUDGETS] = {"requests", "tokens", "input_tokens",
                                                        "output_tokens", "project_tokens"};

/* The order of activity: more dispatches first, then the more recently
 * active. The dispatch count, not the last activity, ranks: it changes
 * slowly, so the exported set of series stays the same from one scrape to
 * the next (every lane that enters or leaves the set starts or ends series
 * in Prometheus), and the lanes that carry the traffic are the ones kept. */
static bool more_active(const struct sched_lane *a, const struct sched_lane *b)
{
	uint64_t da = sched_lane_stats(a)->dispatched, db = sched_lane_stats(b)->dispatched;
	if (da != db)
		return da > db;
	return sched_lane_last_active_ms(a) > sched_lane_last_active_ms(b);
}

/* A min-heap (by activity) of the top lanes seen so far. */
struct top {
	struct sched_lane **v;
	size_t n, cap;
};

static void top_sift_down(struct top *t, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, least = i;
		if (l < t->n && more_active(t->v[least], t->v[l]))
			least = l;
		if (r < t->n && more_active(t->v[least], t->v[r]))
			least = r;
		if (least == i)
			return;
		struct sched_lane *tmp = t->v[i];
		t->v[i] = t->v[least];
		t->v[least] = tmp;
		i = least;
	}
}

static void top_add(struct sched_lane *lane, void *arg)
{
	struct top *t = arg;
	if (t->n < t->cap) {
		size_t i = t->n++;
		t->v[i] = lane;
		while (i > 0 && more_active(t->v[(i - 1) / 2], t->v[i])) {
			struct sched_lane *tmp = t->v[i];
			t->v[i] = t->v[(i - 1) / 2];
			t->v[(i - 1) / 2] = tmp;
			i = (i - 1) / 2;
		}
	} else if (t->cap > 0 && more_active(lane, t->v[0])) {
		t->v[0] = lane;
		top_sift_down(t, 0);
	}
}

/* Lanes that answer every request at once, for want of money or of the day's
 * budget: counted over every lane, not only the admin.top_lanes exported, so
 * that an alert on an empty account sees it whatever the traffic. */
struct refusing {
	size_t quota, day;
};

static void count_refusing(struct sched_lane *lane, void *arg)
{
	struct refusing *r = arg;
	if (sched_quota_out(lane))
		r->quota++;
	else if (sched_day_out(lane))
		r->day++;
}

static int by_activity(const void *a, const void *b)
{
	const struct sched_lane *x = *(struct sched_lane *const *)a;
	const struct sched_lane *y = *(struct sched_lane *const *)b;
	return more_active(x, y) ? -1 : more_active(y, x) ? 1 : 0;
}

enum lane_value {
	LV_QUEUE_DEPTH,
	LV_IN_FLIGHT,
	LV_CONCURRENCY_LIMIT,
	LV_DISPATCH_DELAY,
	LV_DISPATCHED,
	LV_RETRIES,
	LV_CAPACITY_SIGNALS,
	LV_QUEUE_TIMEOUTS,
	LV_REJECTED,
	LV_LEARNED_RATE,
	LV_GRADIENT,
	LV_TOKEN_LATENCY,
	LV_FIRST_TOKEN,
	LV_SERVER_QUEUE,
};

static const struct {
	enum lane_value v;
	const char *name, *type, *help;
} lane_families[] = {
    {LV_QUEUE_DEPTH, "pacerd_lane_queue_depth", "gauge", "Requests waiting in the lane's queue."},
    {LV_IN_FLIGHT, "pacerd_lane_in_flight", "gauge",
     "Requests of the lane sent upstream, not finished."},
    {LV_CONCURRENCY_LIMIT, "pacerd_lane_concurrency_limit", "gauge",
     "The lane's adaptive concurrency limit."},
    {LV_DISPATCH_DELAY, "pacerd_lane_dispatch_delay_seconds", "gauge",
     "The lane's adaptive delay between dispatches."},
    {LV_DISPATCHED, "pacerd_lane_dispatched_total", "counter",
     "Upstream attempts sent by the lane."},
    {LV_RETRIES, "pacerd_lane_retries_total", "counter", "Attempts the lane scheduled again."},
    {LV_CAPACITY_SIGNALS, "pacerd_lane_capacity_signals_total", "counter",
     "429/503/529 answers to the lane."},
    {LV_QUEUE_TIMEOUTS, "pacerd_lane_queue_timeouts_total", "counter",
     "Requests answered 504 queue_timeout."},
    {LV_REJECTED, "pacerd_lane_rejected_total", "counter",
     "Requests refused by the lane, by reason."},
    {LV_LEARNED_RATE, "pacerd_lane_learned_rate_per_second", "gauge",
     "Refill rate inferred from rate-limit headers, per budget (units of the budget per "
     "second)."},
    {LV_GRADIENT, "pacerd_lane_latency_controlled", "gauge",
     "1 while the lane's concurrency limit follows the latency of its answers "
     "(concurrency.mode), else 0."},
    {LV_TOKEN_LATENCY, "pacerd_lane_token_latency_seconds", "gauge",
     "Time per output token of the lane's streamed answers: now (a moving average) and "
     "queue-free (its baseline), where the latency controller reads them."},
    {LV_FIRST_TOKEN, "pacerd_lane_first_token_seconds", "gauge",
     "Time from dispatch to the first token of the lane's streamed answers: now and "
     "queue-free (for the last answer's prompt size)."},
    {LV_SERVER_QUEUE, "pacerd_lane_server_queue", "gauge",
     "Requests of the lane waiting inside the server, as the latency controller's last "
     "round of answers read it."},
};

static void lane_labels(struct evbuffer *out, const char *name, const struct sched_lane_view *lv)
{
	evbuffer_add_printf(out, "%s{provider=", name);
	metrics_label_value(out, lv->provider);
	evbuffer_add(out, ",key=", 5);
	metrics_label_value(out, lv->key_id);
	evbuffer_add(out, ",model=", 7);
	metrics_label_value(out, lv->model != NULL ? lv->model : "");
}

static void lane_write(struct evbuffer *out, size_t f, const struct sched_lane_view *lv)
{
	const struct sched_lane_stats *st = &lv->stats;
	const char *n = lane_families[f].name;
	double v = 0;
	switch (lane_families[f].v) {
	case LV_QUEUE_DEPTH:
		v = (double)lv->queue_depth;
		break;
	case LV_IN_FLIGHT:
		v = (double)lv->in_flight;
		break;
	case LV_CONCURRENCY_LIMIT:
		v = lv->concurrency_limit;
		break;
	case LV_DISPATCH_DELAY:
		v = (double)lv->dispatch_delay_ms / 1000.0;
		break;
	case LV_DISPATCHED:
		v = (double)st->dispatched;
		break;
	case LV_RETRIES:
		v = (double)st->retries;
		break;
	case LV_CAPACITY_SIGNALS:
		v = (double)st->capacity_signals;
		break;
	case LV_QUEUE_TIMEOUTS:
		v = (double)st->queue_timeouts;
		break;
	case LV_REJECTED: {
		const struct {
			const char *reason;
			uint64_t n;
		} rej[] = {{"queue_full", st->rejected_queue_full},
		           {"agent_busy", st->rejected_agent_busy},
		           {"quota_exhausted", st->quota_refused},
		           {"daily_budget_exhausted", st->day_refused}};
		for (size_t i = 0; i < sizeof(rej) / sizeof(rej[0]); i++) {
			lane_labels(out, n, lv);
			evbuffer_add_printf(out, ",reason=\"%s\"} %llu\n", rej[i].reason,
			                    (unsigned long long)rej[i].n);
		}
		return;
	}
	case LV_GRADIENT:
		v = lv->gradient ? 1 : 0;
		break;
	case LV_TOKEN_LATENCY:
	case LV_FIRST_TOKEN: {
		if (!lv->gradient)
			return;
		bool token = lane_families[f].v == LV_TOKEN_LATENCY;
		double now = token ? lv->grad.token_ms : lv->grad.first_ms;
		double base = token ? lv->grad.base_token_ms : lv->grad.base_first_ms;
		lane_labels(out, n, lv);
		evbuffer_add_printf(out, ",estimate=\"current\"} %.17g\n", now / 1000.0);
		lane_labels(out, n, lv);
		evbuffer_add_printf(out, ",estimate=\"baseline\"} %.17g\n", base / 1000.0);
		return;
	}
	case LV_SERVER_QUEUE:
		if (!lv->gradient)
			return;
		v = lv->grad.queue;
		break;
	case LV_LEARNED_RATE:
		for (int b = 0; b < RLH_N_BUDGETS; b++) {
			if (!lv->has_learned[b])
				continue;
			lane_labels(out, n, lv);
			evbuffer_add_printf(out, ",budget=\"%s\"} %.17g\n", budget_names[b],
			                    lv->learned[b].rate_per_min / 60.0);
		}
		return;
	}
	lane_labels(out, n, lv);
	evbuffer_add_printf(out, "} %.17g\n", v);
}

/* ---- the exposition ---- */

/* `provider="NAME"`, escaped, cut to fit cap (names are short: config.c
 * checks them). */
static void provider_label(char *buf, size_t cap, const char *name)
{
	size_t n = (size_t)snprintf(buf, cap, "provider=\"");
	for (const char *p = name; *p && n + 4 < cap; p++) {
		if (*p == '\\' || *p == '"' || *p == '\n')
			buf[n++] = '\\';
		buf[n++] = *p == '\n' ? 'n' : *p;
	}
	buf[n++] = '"';
	buf[n] = '\0';
}

static void provider_hists(struct evbuffer *out, const struct reqstats *m, const char *name,
                           const char *help, size_t off)
{
	metrics_family(out, name, "histogram", help);
	for (size_t i = 0; i < m->n_rows; i++) {
		const struct reqstats_row *r = &m->rows[i];
		char labels[256];
		provider_label(labels, sizeof(labels), r->name);
		metrics_hist_write(
		    out, name, labels,
		    (const struct stats_hist *)(const void *)((const char *)r + off));
	}
}

/* The shared store (store.kind: redis): its counters, one family each. */
static void store_families(struct evbuffer *out, const struct store_stats *s)
{
	const struct {
		const char *name, *help;
		uint64_t value;
	} counters[] = {
	    {"pacerd_store_commands_total", "Commands sent to the store.", s->commands},
	    {"pacerd_store_errors_total",
	     "Store commands that failed: an error, a timeout, a lost connection.", s->errors},
	    {"pacerd_store_timeouts_total",
	     "Store commands not answered within store.redis.timeout_ms.", s->timeouts},
	    {"pacerd_store_fallbacks_total",
	     "Lanes that fell back to local gates at limit / the fleet (store down).",
	     s->fallbacks},
	    {"pacerd_store_refused_total",
	     "Requests answered 503 store_unavailable (store.redis.on_error: fail).", s->refused},
	    {"pacerd_store_heartbeats_total", "Heartbeats the store answered (one a second).",
	     s->heartbeats},
	    {"pacerd_store_late_sends_total",
	     "Requests that left later after their decision than the margin allowed for: their "
	     "strict gates were pushed.",
	     s->late_sends},
	};
	metrics_family(out, "pacerd_store_connected", "gauge",
	               "1 while the shared store (Redis) answers, 0 while lanes fall back.");
	evbuffer_add_printf(out, "pacerd_store_connected %d\n", s->connected ? 1 : 0);
	metrics_family(out, "pacerd_store_replicas", "gauge",
	               "Replicas alive at the last heartbeats in the store (0: none heard yet).");
	evbuffer_add_printf(out, "pacerd_store_replicas %u\n", s->replicas);
	metrics_family(out, "pacerd_store_fallback_divisor", "gauge",
	               "While the store is down (on_error: local), lanes pace at their plan's "
	               "limits divided by this: the replicas alive at the last heartbeats, or "
	               "store.redis.replicas before any.");
	evbuffer_add_printf(out, "pacerd_store_fallback_divisor %u\n", s->fallback_divisor);
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		metrics_family(out, counters[i].name, "counter", counters[i].help);
		evbuffer_add_printf(out, "%s %llu\n", counters[i].name,
		                    (unsigned long long)counters[i].value);
	}
	metrics_family(out, "pacerd_store_decisions_total", "counter",
	               "Dispatch decisions the store made, by verdict.");
	evbuffer_add_printf(out, "pacerd_store_decisions_total{verdict=\"go\"} %llu\n",
	                    (unsigned long long)s->decisions_go);
	evbuffer_add_printf(out, "pacerd_store_decisions_total{verdict=\"wait\"} %llu\n",
	                    (unsigned long long)s->decisions_wait);
	metrics_family(out, "pacerd_store_command_seconds", "histogram",
	               "Round trip of one store command.");
	metrics_hist_write(out, "pacerd_store_command_seconds", "", &s->latency);
}

int metrics_write(struct evbuffer *out, const struct reqstats *m, const struct metrics_process *p,
                  struct registry *reg, unsigned top_lanes, int64_t now_ms)
{
	metrics_family(out, "pacerd_up", "gauge", "1 while pacerd runs.");
	evbuffer_add_printf(out, "pacerd_up 1\n");
	metrics_family(out, "pacerd_build_info", "gauge",
	               "1, labelled with the version pacerd was built as (scripts/version.sh).");
	evbuffer_add_printf(out, "pacerd_build_info{version=");
	metrics_label_value(out, pacerd_version);
	evbuffer_add_printf(out, "} 1\n");
	metrics_family(out, "pacerd_draining", "gauge", "1 while pacerd drains before exiting.");
	evbuffer_add_printf(out, "pacerd_draining %d\n", p->draining ? 1 : 0);
	metrics_family(out, "pacerd_in_flight_requests", "gauge",
	               "Accepted requests not answered yet.");
	evbuffer_add_printf(out, "pacerd_in_flight_requests %zu\n", p->in_flight);
	metrics_family(out, "pacerd_connections", "gauge", "Open client connections.");
	evbuffer_add_printf(out, "pacerd_connections %zu\n", p->connections);
	metrics_family(out, "pacerd_connections_accepted_total", "counter",
	               "Client connections accepted.");
	evbuffer_add_printf(out, "pacerd_connections_accepted_total %llu\n",
	                    (unsigned long long)p->accepted);
	metrics_family(out, "pacerd_responses_total", "counter",
	               "Responses to clients, by status class.");
	for (int c = 1; c <= 5; c++)
		evbuffer_add_printf(out, "pacerd_responses_total{class=\"%dxx\"} %llu\n", c,
		                    (unsigned long long)p->responses[c]);

	metrics_family(out, "pacerd_tunnels_total", "counter",
	               "CONNECT requests, by outcome: terminated with pacerd's CA, passed blindly "
	               "(forward.tunnel), denied (403), unreachable (a blind tunnel's host: 502).");
	evbuffer_add_printf(out, "pacerd_tunnels_total{outcome=\"terminated\"} %llu\n",
	                    (unsigned long long)p->tunnels.terminated);
	evbuffer_add_printf(out, "pacerd_tunnels_total{outcome=\"blind\"} %llu\n",
	                    (unsigned long long)p->tunnels.blind);
	evbuffer_add_printf(out, "pacerd_tunnels_total{outcome=\"denied\"} %llu\n",
	                    (unsigned long long)p->tunnels.denied);
	evbuffer_add_printf(out, "pacerd_tunnels_total{outcome=\"unreachable\"} %llu\n",
	                    (unsigned long long)p->tunnels.unreachable);
	metrics_family(out, "pacerd_tunnels_open", "gauge", "Terminated tunnels open now.");
	evbuffer_add_printf(out, "pacerd_tunnels_open %zu\n", p->tunnels.open);
	metrics_family(out, "pacerd_tls_handshakes_total", "counter",
	               "TLS handshakes in terminated tunnels, by result (failed: a bad or cut "
	               "handshake, an SNI for another host, plain HTTP, or not done within "
	               "limits.client_timeout_s).");
	evbuffer_add_printf(out, "pacerd_tls_handshakes_total{result=\"ok\"} %llu\n",
	                    (unsigned long long)p->tunnels.handshakes);
	evbuffer_add_printf(out, "pacerd_tls_handshakes_total{result=\"failed\"} %llu\n",
	                    (unsigned long long)p->tunnels.handshake_failures);
	metrics_family(out, "pacerd_tunnel_requests_total", "counter",
	               "Requests read inside terminated tunnels.");
	evbuffer_add_printf(out, "pacerd_tunnel_requests_total %llu\n",
	                    (unsigned long long)p->tunnels.requests);

	provider_hists(out, m, "pacerd_queue_wait_seconds",
	               "Time from arrival to the first dispatch upstream, per finished request.",
	               offsetof(struct reqstats_row, queue_wait));
	provider_hists(out, m, "pacerd_upstream_first_byte_seconds",
	               "Time from the last dispatch to the upstream's answer head.",
	               offsetof(struct reqstats_row, first_byte));
	provider_hists(out, m, "pacerd_request_duration_seconds",
	               "Time from arrival to the end of the answer.",
	               offsetof(struct reqstats_row, duration));
	provider_hists(out, m, "pacerd_request_attempts", "Upstream attempts per finished request.",
	               offsetof(struct reqstats_row, attempts));
	metrics_family(out, "pacerd_tokens_estimated_total", "counter",
	               "Tokens estimated before dispatch (on token-paced lanes).");
	for (size_t i = 0; i < m->n_rows; i++) {
		evbuffer_add_printf(out, "pacerd_tokens_estimated_total{provider=");
		metrics_label_value(out, m->rows[i].name);
		evbuffer_add_printf(out, "} %.17g\n", m->rows[i].tokens_estimated);
	}
	metrics_family(out, "pacerd_tokens_reported_total", "counter",
	               "Tokens the upstream reported as used.");
	for (size_t i = 0; i < m->n_rows; i++) {
		evbuffer_add_printf(out, "pacerd_tokens_reported_total{provider=");
		metrics_label_value(out, m->rows[i].name);
		evbuffer_add_printf(out, "} %llu\n",
		                    (unsigned long long)m->rows[i].tokens_reported);
	}

	if (p->store != NULL)
		store_families(out, p->store);

	size_t n_lanes = registry_count(reg);
	metrics_family(out, "pacerd_lanes", "gauge", "Lanes (provider, API key) known.");
	evbuffer_add_printf(out, "pacerd_lanes %zu\n", n_lanes);
	struct refusing r = {0, 0};
	registry_foreach(reg, count_refusing, &r);
	metrics_family(out, "pacerd_lanes_refusing", "gauge",
	               "Lanes answering every request at once, by state: quota_exhausted (a "
	               "final quota answer), daily_budget_exhausted (the plan's daily budget).");
	evbuffer_add_printf(out, "pacerd_lanes_refusing{state=\"quota_exhausted\"} %zu\n", r.quota);
	evbuffer_add_printf(out, "pacerd_lanes_refusing{state=\"daily_budget_exhausted\"} %zu\n",
	                    r.day);
	struct top t = {.cap = n_lanes < top_lanes ? n_lanes : top_lanes};
	struct sched_lane_view *views = NULL;
	if (t.cap > 0) {
		t.v = malloc(t.cap * sizeof(*t.v));
		views = malloc(t.cap * sizeof(*views));
		if (t.v == NULL || views == NULL) {
			free(t.v);
			free(views);
			return -1;
		}
		registry_foreach(reg, top_add, &t);
		qsort(t.v, t.n, sizeof(*t.v), by_activity);
		for (size_t i = 0; i < t.n; i++)
			sched_lane_view(t.v[i], now_ms, &views[i]);
	}
	metrics_family(out, "pacerd_lanes_exported", "gauge",
	               "Lanes whose pacerd_lane_* series this scrape holds (admin.top_lanes).");
	evbuffer_add_printf(out, "pacerd_lanes_exported %zu\n", t.n);
	for (size_t f = 0; f < N_OF(lane_families); f++) {
		metrics_family(out, lane_families[f].name, lane_families[f].type,
		               lane_families[f].help);
		for (size_t i = 0; i < t.n; i++)
			lane_write(out, f, &views[i]);
	}
	free(views);
	free(t.v);
	return 0;
}
