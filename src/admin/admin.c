/* SPDX-License-Identifier: Apache-2.0 */
/* admin — /healthz, /readyz, /status, /metrics, /reload, the status page (/
 * and /events). See admin.h.
 *
 * Read-only views of the lanes, built on request: the admin port is for
 * operators and scrapers, so clarity beats speed here (jansson for JSON). */
#include "admin/admin.h"

#include <event2/buffer.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "admin/metrics.h"
#include "admin/page.h"
#include "admin/page_events.h"
#include "admin/ws_status.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/version.h"
#include "http/httpd.h"
#include "provider/profile.h"
#include "provider/ratelimit_headers.h"
#include "proxy/rewrites.h"
#include "proxy/server.h"
#include "sched/learned.h"
#include "sched/registry.h"
#include "sched/sched.h"
#include "store/shared.h"
#include "store/store.h"

struct admin {
	struct server *srv;
	struct httpd *http;
	admin_reload_fn reload;
	void *reload_arg;
	long long started_ms;
	struct page_events *events; /* GET /events */
};

static const char *const budget_names[RLH_N_BUDGETS] = {"requests", "tokens", "input_tokens",
                                                        "output_tokens", "project_tokens"};

/* Where the token may come as HTTP Basic's password (a browser asks for it
 * and sends it again with the page's event stream), the 401 says so too. */
static const char basic_challenge[] = "Basic realm=\"pacerd admin\", charset=\"UTF-8\"";

static bool reads(const struct hreq *req)
{
	const char *m = hreq_method(req);
	return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
}

static void reply(struct hreq *req, int code, const char *ctype, const char *body, size_t len)
{
	struct hhdr h[4] = {
	    {"content-type", 12, ctype, strlen(ctype)},
	    {"cache-control", 13, "no-store", 8},
	};
	size_t n = 2;
	if (code == 401) {
		h[n++] = (struct hhdr){"www-authenticate", 16, "Bearer", 6};
		if (reads(req))
			h[n++] = (struct hhdr){"www-authenticate", 16, basic_challenge,
			                       sizeof(basic_challenge) - 1};
	}
	hreq_respond(req, code, h, n, body, len);
}

static void reply_json(struct hreq *req, int code, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (text == NULL) {
		reply(req, 500, "application/json", "{\"error\":\"out of memory\"}\n", 25);
	} else {
		size_t n = strlen(text);
		char *withnl = realloc(text, n + 2);
		if (withnl != NULL) {
			text = withnl;
			text[n++] = '\n';
			text[n] = '\0';
		}
		reply(req, code, "application/json", text, n);
	}
	free(text);
	json_decref(j);
}

static json_t *error_json(const char *code, const char *message)
{
	return json_pack("{s:{s:s,s:s,s:s}}", "error", "message", message, "type", "pacer_error",
	                 "code", code);
}

/* ---- /status ---- */

static json_t *learned_json(const struct learned_view *v)
{
	return json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:I,s:i}", "shape", learned_shape_name(v->shape),
	                 "limit", v->limit, "capacity", v->capacity, "rate_per_min",
	                 v->rate_per_min, "pace_per_min", v->pace_per_min, "remaining",
	                 v->remaining, "reset_in_ms", (json_int_t)v->reset_in_ms, "observations",
	                 (int)v->observations);
}

/* What waits per priority, highest first, with the wait a request of a new
 * agent would see there (fair share lets it in after one turn of each agent
 * waiting at its priority, after everything of the higher ones). */
static json_t *priorities_json(const struct sched_lane *lane, size_t n_levels, int64_t now)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n_levels; i++) {
		struct sched_level_view v;
		sched_lane_level(lane, i, now, &v);
		json_array_append_new(a, json_pack("{s:i,s:I,s:I,s:I}", "priority", v.priority,
		                                   "queued", (json_int_t)v.queued, "agents",
		                                   (json_int_t)v.agents, "eta_ms",
		                                   (json_int_t)v.eta_ms));
	}
	return a;
}

/* /status "concurrency": what sets the lane's limit, and with the latency
 * controller (sched/gradient.h) what it reads: per output token and to the
 * first token, now and queue-free, the queue it sees inside the server, and
 * why the limit last moved. */
static json_t *concurrency_json(const struct sched_lane_view *lv)
{
	if (!lv->gradient)
		return json_pack("{s:s}", "mode", lv->concurrency_mode);
	const struct gradient_view *g = &lv->grad;
	return json_pack("{s:s,s:i,s:b,s:f,s:f,s:f,s:f,s:f,s:s,s:I}", "mode", lv->concurrency_mode,
	                 "limit", (int)g->limit, "slow_start", g->slow_start, "token_ms",
	                 g->token_ms, "token_ms_baseline", g->base_token_ms, "first_token_ms",
	                 g->first_ms, "first_token_ms_baseline", g->base_first_ms, "server_queue",
	                 g->queue, "why", g->why, "moved_ms_ago", (json_int_t)g->moved_ago_ms);
}

static void lane_status(struct sched_lane *lane, void *arg)
{
	json_t *lanes = arg;
	int64_t now = clock_now_ms();
	struct sched_lane_view lv;
	sched_lane_view(lane, now, &lv);
	const struct sched_lane_stats *st = &lv.stats;
	json_t *learned = json_object();
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (lv.has_learned[b])
			json_object_set_new(learned, budget_names[b], learned_json(&lv.learned[b]));
	json_t *counters =
	    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "dispatched",
	              (json_int_t)st->dispatched, "succeeded", (json_int_t)st->succeeded,
	              "capacity_signals", (json_int_t)st->capacity_signals, "capacity_reactions",
	              (json_int_t)st->capacity_reactions, "transient_errors",
	              (json_int_t)st->transient_errors, "retries", (json_int_t)st->retries,
	              "rejected_queue_full", (json_int_t)st->rejected_queue_full,
	              "rejected_agent_busy", (json_int_t)st->rejected_agent_busy, "queue_timeouts",
	              (json_int_t)st->queue_timeouts, "cancelled", (json_int_t)st->cancelled,
	              "queue_wait_max_ms", (json_int_t)st->queue_wait_max_ms);
	json_object_set_new(counters, "probes", json_integer((json_int_t)st->probes));
	json_object_set_new(counters, "quota_refused", json_integer((json_int_t)st->quota_refused));
	json_object_set_new(counters, "drained", json_integer((json_int_t)st->drained));
	json_object_set_new(counters, "day_refused", json_integer((json_int_t)st->day_refused));
	json_t *gates = json_pack(
	    "{s:f,s:f,s:f,s:f,s:i,s:f,s:i}", "max_requests_per_second", lv.max_requests_per_second,
	    "max_requests_per_minute", lv.max_requests_per_minute, "max_requests_per_hour",
	    lv.max_requests_per_hour, "min_ms_per_request", lv.min_ms_per_request, "burst",
	    (int)lv.burst, "max_tokens_per_minute", lv.max_tokens_per_minute, "max_concurrent",
	    (int)lv.max_concurrent);
	json_t *j = json_pack(
	    "{s:s,s:s,s:s,s:I,s:I,s:I,s:i,s:I,s:I,s:I,s:I,s:o,s:o,s:o}", "provider", lv.provider,
	    "key", lv.key_id, "plan", lv.plan, "queue_depth", (json_int_t)lv.queue_depth,
	    "retry_waiting", (json_int_t)lv.retry_waiting, "in_flight", (json_int_t)lv.in_flight,
	    "concurrency_limit", (int)lv.concurrency_limit, "dispatch_delay_ms",
	    (json_int_t)lv.dispatch_delay_ms, "hold_ms", (json_int_t)lv.hold_ms, "queue_eta_ms",
	    (json_int_t)lv.queue_eta_ms, "idle_ms", (json_int_t)lv.idle_ms, "gates", gates,
	    "learned", learned, "counters", counters);
	if (j != NULL && lv.day_limited)
		json_object_set_new(j, "day",
		                    json_pack("{s:f,s:f,s:f,s:f,s:I}", "requests", lv.day_requests,
		                              "max_requests", lv.max_requests_per_day, "tokens",
		                              lv.day_tokens, "max_tokens", lv.max_tokens_per_day,
		                              "resets_in_ms", (json_int_t)lv.day_resets_in_ms));
	if (j != NULL) {
		json_object_set_new(j, "model",
		                    lv.model != NULL ? json_string(lv.model) : json_null());
		json_object_set_new(j, "scope_kind", json_string(lv.scope_kind));
		json_object_set_new(j, "output_estimate",
		                    json_integer((json_int_t)lv.output_estimate));
		json_object_set_new(j, "priorities", priorities_json(lane, lv.n_levels, now));
		json_object_set_new(j, "state", json_string(lv.state));
		/* Taken up from the state file at start, and no answer since. */
		json_object_set_new(j, "restored", json_boolean(lv.restored_age_ms >= 0));
		if (lv.restored_age_ms >= 0)
			json_object_set_new(j, "restored_age_ms",
			                    json_integer((json_int_t)lv.restored_age_ms));
		json_object_set_new(j, "oldest_wait_ms",
		                    json_integer((json_int_t)lv.oldest_wait_ms));
		json_object_set_new(j, "concurrency", concurrency_json(&lv));
		static const char *const modes[] = {"local", "shared", "fallback"};
		json_object_set_new(j, "gates_decided", json_string(modes[lv.gates_mode]));
		json_object_set_new(j, "strict_margin", json_real(lv.strict_margin));
		/* A silent lane's search (issue 30): its slow start, and the rate
		 * probe's bound once refusals settled it (null: none, searching). */
		json_object_set_new(j, "slow_start", json_boolean(lv.slow_start));
		json_object_set_new(
		    j, "rate_probe",
		    lv.probe_bound_rps > 0
		        ? json_pack("{s:f,s:f,s:I,s:i}", "bound_rps", lv.probe_bound_rps,
		                    "rate_rps", lv.probe_rate_rps, "k_ms",
		                    (json_int_t)lv.probe_k_ms, "calm", (int)lv.probe_calm)
		        : json_null());
		json_array_append_new(lanes, j);
	}
}

/* /status "store": where lanes' gates are decided. */
static json_t *store_json(struct shared *sh)
{
	struct store_stats *s = shared_stats(sh);
	if (s == NULL)
		return json_pack("{s:s}", "kind", "local");
	const struct stats_hist *h = &s->latency;
	return json_pack(
	    "{s:s,s:s,s:b,s:b,s:s,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,s:f,s:I,s:I}",
	    "kind", "redis", "address", s->address, "connected", s->connected, "fallback",
	    !s->connected && !shared_refusing(sh), "on_error", shared_on_error(sh), "replicas",
	    (int)s->replicas, "fallback_divisor", (int)s->fallback_divisor, "heartbeats",
	    (json_int_t)s->heartbeats, "decisions",
	    (json_int_t)(s->decisions_go + s->decisions_wait), "decisions_go",
	    (json_int_t)s->decisions_go, "decisions_wait", (json_int_t)s->decisions_wait,
	    "commands", (json_int_t)s->commands, "errors", (json_int_t)s->errors, "timeouts",
	    (json_int_t)s->timeouts, "fallbacks", (json_int_t)s->fallbacks, "refused",
	    (json_int_t)s->refused, "command_ms_avg",
	    h->count > 0 ? h->sum / (double)h->count * 1000 : 0.0, "late_sends",
	    (json_int_t)s->late_sends, "margin_ms", shared_margin_ms(sh, clock_now_ms()), "permits",
	    (json_int_t)s->permits, "stale_permits", (json_int_t)s->stale_permits);
}

/* /status "tunnels": CONNECTs and what came through them. */
static json_t *tunnels_json(const struct server *srv)
{
	struct server_tunnel_stats t;
	server_get_tunnel_stats(srv, &t);
	return json_pack("{s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "ca", t.ca, "terminated",
	                 (json_int_t)t.terminated, "blind", (json_int_t)t.blind, "blind_open",
	                 (json_int_t)t.blind_open, "blind_failed", (json_int_t)t.blind_failed,
	                 "denied", (json_int_t)t.denied, "open", (json_int_t)t.open, "handshakes",
	                 (json_int_t)t.handshakes, "handshake_failures",
	                 (json_int_t)t.handshake_failures, "requests", (json_int_t)t.requests,
	                 "certificates", (json_int_t)t.leaves);
}

/* /status "providers": what pacerd does to each provider's requests.
 * rewrites: "on" (it may add stream_options.include_usage to meter a stream),
 * "never" (the provider's profile accepts no rewrite), "off" (the upstream
 * refused a rewritten body and took the client's own: rewrites_off says
 * which status, and when). */
static json_t *providers_json(const struct config *cfg, const struct rewrites *rw)
{
	json_t *o = json_object();
	for (size_t i = 0; i < cfg->n_providers; i++) {
		const struct provider_conf *p = &cfg->providers[i];
		const struct rewrite_stop *st = rewrites_stopped(rw, p->name);
		const char *state = !profile_of(p)->add_stream_usage               ? "never"
		                    : st != NULL || !rewrites_allowed(rw, p->name) ? "off"
		                                                                   : "on";
		json_t *j = json_pack("{s:s}", "rewrites", state);
		if (j != NULL && st != NULL) {
			char at[32];
			time_t t = (time_t)(st->at_ms / 1000);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
			json_object_set_new(
			    j, "rewrites_off",
			    json_pack(
			        "{s:s,s:i,s:i,s:s,s:s}", "rewrite", st->what, "refused_status",
			        st->status, "resent_status", st->resent_status, "reason",
			        "the upstream refused the rewritten body and took the client's own",
			        "at", at));
		}
		json_object_set_new(o, p->name, j);
	}
	return o;
}

/* /status "last_errors": the log's recent problems (warn and error lines,
 * requests that ended in an error), newest first, each the logged object; a
 * line cut at LOG_LINE_MAX may not parse: {"line": its text} then. */
static json_t *last_errors_json(void)
{
	struct log_recent_line lines[LOG_RECENT_MAX];
	size_t n = log_recent(lines, LOG_RECENT_MAX);
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_loadb(lines[i].text, lines[i].len, 0, NULL);
		if (o == NULL)
			o = json_pack("{s:s%}", "line", lines[i].text, lines[i].len);
		if (o != NULL)
			json_array_append_new(a, o);
	}
	return a;
}

/* /status "events": the status page's streams (page_events.h). */
static json_t *events_json(const struct page_events *pe)
{
	struct page_events_stats st = {0};
	if (pe != NULL)
		page_events_stats(pe, &st);
	return json_pack("{s:I,s:i,s:I,s:I,s:I}", "clients", (json_int_t)st.clients, "max_clients",
	                 PAGE_EVENTS_MAX_CLIENTS, "served", (json_int_t)st.served, "refused",
	                 (json_int_t)st.refused, "dropped_slow", (json_int_t)st.dropped_slow);
}

static json_t *status_json(struct admin *adm)
{
	struct server *srv = adm->srv;
	const struct config *cfg = server_config(srv);
	struct server_stats st;
	server_get_stats(srv, &st);
	json_t *lanes = json_array();
	registry_foreach(server_lanes(srv), lane_status, lanes);
	json_t *j = json_pack(
	    "{s:s,s:I,s:s,s:s,s:b,s:I,s:I,s:{s:I,s:I,s:I,s:I,s:I},s:o}", "version", pacerd_version,
	    "uptime_s", (json_int_t)((clock_now_ms() - adm->started_ms) / 1000), "listen",
	    cfg->listen, "config", cfg->source, "draining", st.draining, "in_flight",
	    (json_int_t)st.in_flight, "lanes_count", (json_int_t)registry_count(server_lanes(srv)),
	    "responses", "1xx", (json_int_t)st.responses[1], "2xx", (json_int_t)st.responses[2],
	    "3xx", (json_int_t)st.responses[3], "4xx", (json_int_t)st.responses[4], "5xx",
	    (json_int_t)st.responses[5], "lanes", lanes);
	if (j != NULL) {
		json_object_set_new(j, "store", store_json(server_shared(srv)));
		json_object_set_new(j, "tunnels", tunnels_json(srv));
		json_object_set_new(j, "websockets", ws_status_json(server_websockets(srv)));
		json_object_set_new(j, "providers", providers_json(cfg, server_rewrites(srv)));
		struct httpd_stats hs;
		httpd_get_stats(adm->http, &hs);
		json_object_set_new(j, "connections",
		                    json_pack("{s:I,s:I,s:I}", "open", (json_int_t)st.connections,
		                              "accepted", (json_int_t)st.accepted, "admin_open",
		                              (json_int_t)hs.connections));
		json_object_set_new(j, "uptime_ms",
		                    json_integer((json_int_t)(clock_now_ms() - adm->started_ms)));
		json_object_set_new(j, "events", events_json(adm->events));
		json_object_set_new(j, "last_errors", last_errors_json());
	}
	return j;
}

static void handle_status(struct admin *adm, struct hreq *req)
{
	reply_json(req, 200, status_json(adm));
}

/* ---- the status page ---- */

static char *snapshot_text(void *arg, size_t *len)
{
	json_t *j = status_json(arg);
	char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (text != NULL)
		*len = strlen(text);
	return text;
}

static void handle_page(struct admin *adm, struct hreq *req)
{
	json_t *st = status_json(adm);
	struct evbuffer *b = evbuffer_new();
	if (st == NULL || b == NULL || page_write(b, st) != 0) {
		json_decref(st);
		if (b != NULL)
			evbuffer_free(b);
		reply(req, 500, "text/plain", "out of memory\n", 14);
		return;
	}
	json_decref(st);
	const char *csp = page_csp();
	const struct hhdr h[] = {
	    {"content-type", 12, "text/html; charset=utf-8", 24},
	    {"cache-control", 13, "no-store", 8},
	    {"content-security-policy", 23, csp, strlen(csp)},
	    {"x-content-type-options", 22, "nosniff", 7},
	    {"referrer-policy", 15, "no-referrer", 11},
	    {"x-frame-options", 15, "DENY", 4},
	};
	size_t len = evbuffer_get_length(b);
	hreq_respond(req, 200, h, sizeof(h) / sizeof(h[0]), (const char *)evbuffer_pullup(b, -1),
	             len);
	evbuffer_free(b);
}

/* ---- /metrics ---- */

static void handle_metrics(struct admin *adm, struct hreq *req)
{
	struct server *srv = adm->srv;
	struct server_stats st;
	server_get_stats(srv, &st);
	struct metrics_process p = {.store = shared_stats(server_shared(srv)),
	                            .draining = st.draining,
	                            .in_flight = st.in_flight,
	                            .connections = st.connections,
	                            .accepted = st.accepted};
	memcpy(p.responses, st.responses, sizeof(p.responses));
	struct server_tunnel_stats ts;
	server_get_tunnel_stats(srv, &ts);
	p.tunnels.terminated = ts.terminated;
	p.tunnels.blind = ts.blind;
	p.tunnels.denied = ts.denied;
	p.tunnels.unreachable = ts.blind_failed;
	p.tunnels.handshakes = ts.handshakes;
	p.tunnels.handshake_failures = ts.handshake_failures;
	p.tunnels.requests = ts.requests;
	p.tunnels.open = ts.open;
	struct evbuffer *b = evbuffer_new();
	if (b == NULL || metrics_write(b, server_metrics(srv), &p, server_lanes(srv),
	                               server_config(srv)->admin.top_lanes, clock_now_ms()) != 0) {
		if (b != NULL)
			evbuffer_free(b);
		reply(req, 500, "text/plain", "out of memory\n", 14);
		return;
	}
	ws_metrics_write(b, server_websockets(srv));
	size_t len = evbuffer_get_length(b);
	reply(req, 200, "text/plain; version=0.0.4; charset=utf-8",
	      (const char *)evbuffer_pullup(b, -1), len);
	evbuffer_free(b);
}

/* ---- routing ---- */

/* The token is compared as SHA-256 digests, with CRYPTO_memcmp over their
 * fixed 32 bytes: neither the time of a wrong guess nor an early length check
 * tells how much of it, or how long it, is right. */
static bool token_matches(const char *token, const char *given, size_t given_len)
{
	unsigned char want[EVP_MAX_MD_SIZE], got[EVP_MAX_MD_SIZE];
	unsigned int want_len = 0, got_len = 0;
	if (EVP_Digest(token, strlen(token), want, &want_len, EVP_sha256(), NULL) != 1 ||
	    EVP_Digest(given, given_len, got, &got_len, EVP_sha256(), NULL) != 1 ||
	    want_len != 32 || got_len != 32)
		return false;
	return CRYPTO_memcmp(want, got, 32) == 0;
}

/* HTTP Basic's password (RFC 7617; the user name is not looked at) matches
 * the token. b64: what follows "Basic ". */
static bool basic_matches(const char *token, const char *b64)
{
	unsigned char plain[768];
	size_t n = strlen(b64);
	if (n == 0 || n % 4 != 0 || n / 4 * 3 > sizeof(plain) - 1)
		return false;
	int len = EVP_DecodeBlock(plain, (const unsigned char *)b64, (int)n);
	if (len < 0)
		return false;
	/* EVP_DecodeBlock counts the padding's zero bytes. */
	for (size_t pad = n; pad > n - 2 && b64[pad - 1] == '='; pad--)
		len--;
	const unsigned char *colon = memchr(plain, ':', (size_t)len);
	if (colon == NULL)
		return false;
	size_t user = (size_t)(colon - plain);
	return token_matches(token, (const char *)colon + 1, (size_t)len - user - 1);
}

/* With admin.token set: `Authorization: Bearer TOKEN` on every path, or
 * the token as HTTP Basic's password on the paths that only read (GET,
 * HEAD): a browser cannot send a bearer token when it opens the status page,
 * but asks for Basic credentials when told to (the 401's challenge) and
 * sends them again with the page's event stream. Not for POST /reload:
 * credentials a browser remembers are sent by any site's form, and only the
 * reading paths are safe from that. The scheme names are case-insensitive
 * (RFC 9110 §11.1). */
/* Whether a Host header names this machine's loopback: "localhost", an
 * address of 127.0.0.0/8 or [::1], with or without a port. */
static bool host_is_loopback(const char *host)
{
	size_t n = strlen(host);
	if (host[0] == '[') {
		const char *close = strchr(host, ']');
		return close != NULL && (size_t)(close - host) == 4 &&
		       strncmp(host, "[::1]", 5) == 0 && (close[1] == '\0' || close[1] == ':');
	}
	const char *colon = strchr(host, ':');
	if (colon != NULL)
		n = (size_t)(colon - host);
	if (n == 9 && strncasecmp(host, "localhost", 9) == 0)
		return true;
	if (n < 7 || n > 15 || strncmp(host, "127.", 4) != 0)
		return false;
	for (size_t i = 4; i < n; i++)
		if (host[i] != '.' && (host[i] < '0' || host[i] > '9'))
			return false;
	return true;
}

static bool authorized(struct admin *adm, struct hreq *req)
{
	const char *token = server_config(adm->srv)->admin.token;
	if (token == NULL || token[0] == '\0')
		return true;
	const char *auth = hreq_header(req, "authorization");
	if (auth == NULL)
		return false;
	if (strncasecmp(auth, "Bearer ", 7) == 0)
		return token_matches(token, auth + 7, strlen(auth + 7));
	if (strncasecmp(auth, "Basic ", 6) == 0 && reads(req))
		return basic_matches(token, auth + 6);
	return false;
}

static void on_admin_request(struct hreq *req, void *arg)
{
	struct admin *adm = arg;
	const char *uri = hreq_target(req);
	size_t path_len = strcspn(uri, "?");
	const char *method = hreq_method(req);
	bool get = reads(req);
	bool post = strcmp(method, "POST") == 0;
#define PATH_IS(p) (path_len == strlen(p) && strncmp(uri, p, path_len) == 0)

	const char *token = server_config(adm->srv)->admin.token;
	const char *host = hreq_header(req, "host");
	if ((token == NULL || token[0] == '\0') && host != NULL && !host_is_loopback(host)) {
		/* Without a token the listener is on loopback (config.c), and the
		 * one way in from elsewhere is a browser tricked by DNS rebinding: a
		 * site whose name now resolves to 127.0.0.1 would read the page and
		 * /status as same-origin. Its requests carry that site's name as
		 * Host, so only loopback names are served. */
		reply_json(req, 403,
		           error_json("host_not_loopback",
		                      "without admin.token only a loopback Host is served "
		                      "(localhost, 127.0.0.0/8, [::1]): set admin.token to "
		                      "reach the admin listener by another name"));
		return;
	}
	if (!authorized(adm, req)) {
		reply_json(
		    req, 401,
		    error_json("unauthorized",
		               reads(req)
		                   ? "admin.token is required: Authorization: Bearer "
		                     "TOKEN, or TOKEN as the password of HTTP Basic"
		                   : "admin.token is required: Authorization: Bearer TOKEN"));
		return;
	}
	if (PATH_IS("/healthz") && get) {
		reply(req, 200, "application/json", "{\"status\":\"ok\"}\n", 16);
	} else if (PATH_IS("/readyz") && get) {
		if (server_draining(adm->srv))
			reply(req, 503, "application/json", "{\"status\":\"draining\"}\n", 22);
		else
			reply(req, 200, "application/json", "{\"status\":\"ready\"}\n", 19);
	} else if (PATH_IS("/status") && get) {
		handle_status(adm, req);
	} else if (PATH_IS("/metrics") && get) {
		handle_metrics(adm, req);
	} else if (PATH_IS("/") && get) {
		handle_page(adm, req);
	} else if (PATH_IS("/events") && strcmp(method, "GET") == 0) {
		page_events_serve(adm->events, req);
	} else if (PATH_IS("/reload") && post) {
		char err[1024];
		if (adm->reload(adm->reload_arg, err, sizeof(err)) == 0)
			reply(req, 200, "application/json", "{\"ok\":true}\n", 12);
		else
			reply_json(req, 400, error_json("invalid_config", err));
	} else if (PATH_IS("/healthz") || PATH_IS("/readyz") || PATH_IS("/status") ||
	           PATH_IS("/metrics") || PATH_IS("/reload") || PATH_IS("/") ||
	           PATH_IS("/events")) {
		reply_json(req, 405,
		           error_json("method_not_allowed", "wrong method for this path"));
	} else {
		reply_json(req, 404,
		           error_json("not_found",
		                      "admin paths: / /events /healthz /readyz /status /metrics "
		                      "/reload"));
	}
#undef PATH_IS
}

struct admin *admin_new(struct event_base *base, struct server *srv, admin_reload_fn reload,
                        void *reload_arg, char *err, size_t errlen)
{
	const char *listen = server_config(srv)->admin.listen;
	err[0] = '\0';
	if (listen == NULL || listen[0] == '\0')
		return NULL;
	struct admin *adm = calloc(1, sizeof(*adm));
	if (adm == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	adm->srv = srv;
	adm->reload = reload;
	adm->reload_arg = reload_arg;
	adm->started_ms = clock_now_ms();
	adm->events = page_events_new(base, PAGE_EVENTS_INTERVAL_MS, snapshot_text, adm);
	if (adm->events == NULL) {
		snprintf(err, errlen, "out of memory");
		free(adm);
		return NULL;
	}
	/* Small limits: operators and scrapers send small requests. */
	struct httpd_conf hc = {.max_header_bytes = 16384,
	                        .max_body_bytes = 65536,
	                        .max_connections = 256,
	                        .client_timeout_s = 30};
	char e[256];
	adm->http = httpd_new(base, listen, &hc, on_admin_request, adm, e, sizeof(e));
	if (adm->http == NULL) {
		snprintf(err, errlen, "admin.%s", e);
		page_events_free(adm->events);
		free(adm);
		return NULL;
	}
	return adm;
}

void admin_free(struct admin *adm)
{
	if (adm == NULL)
		return;
	httpd_free(adm->http); /* the event streams are gone first */
	page_events_free(adm->events);
	free(adm);
}
