/* SPDX-License-Identifier: Apache-2.0 */
/* page — the status page's document and its view without JavaScript. See
 * page.h. */
#include "admin/page.h"

#include <event2/buffer.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* src/admin/page.html as bytes: the Makefile writes page_html.inc (od and
 * sed, always on a Debian system, unlike xxd) into the build tree. */
static const unsigned char page_doc[] = {
#include "admin/page_html.inc"
};

static const char view_mark[] = "<!--pacerd:view-->";

static void put(struct evbuffer *o, const char *s)
{
	evbuffer_add(o, s, strlen(s));
}

void page_escape(struct evbuffer *out, const char *s, size_t len)
{
	size_t start = 0;
	for (size_t i = 0; i < len; i++) {
		const char *ref;
		switch (s[i]) {
		case '&':
			ref = "&amp;";
			break;
		case '<':
			ref = "&lt;";
			break;
		case '>':
			ref = "&gt;";
			break;
		case '"':
			ref = "&quot;";
			break;
		case '\'':
			ref = "&#39;";
			break;
		default:
			continue;
		}
		evbuffer_add(out, s + start, i - start);
		put(out, ref);
		start = i + 1;
	}
	evbuffer_add(out, s + start, len - start);
}

static void esc(struct evbuffer *o, const char *s)
{
	if (s != NULL)
		page_escape(o, s, strlen(s));
}

/* ---- values as the script shows them ---- */

static double num_at(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/* A number as text: integers without a fraction, else 2 decimals below 10
 * and 1 above (the script's num()). */
static void put_num(struct evbuffer *o, double v)
{
	if (!isfinite(v))
		put(o, "\xe2\x80\x93");
	else if (v == floor(v) && fabs(v) < 1e15)
		evbuffer_add_printf(o, "%.0f", v);
	else
		evbuffer_add_printf(o, fabs(v) < 10 ? "%.2f" : "%.1f", v);
}

/* A duration: "–" for none, ms below a second, then s, m+s, h+m (the
 * script's ms()). */
static void put_ms(struct evbuffer *o, double v)
{
	if (!(v > 0))
		put(o, "\xe2\x80\x93");
	else if (v < 1000)
		evbuffer_add_printf(o, "%.0f ms", round(v));
	else if (v < 60000)
		evbuffer_add_printf(o, "%.1f s", v / 1000);
	else if (v < 3600000)
		evbuffer_add_printf(o, "%.0fm%02.0fs", floor(v / 60000), fmod(floor(v / 1000), 60));
	else
		evbuffer_add_printf(o, "%.0fh%02.0fm", floor(v / 3600000),
		                    fmod(floor(v / 60000), 60));
}

/* Any JSON value as text, escaped: strings as they are, numbers as put_num,
 * the rest as compact JSON. */
static void put_value(struct evbuffer *o, const json_t *v)
{
	if (json_is_string(v)) {
		page_escape(o, json_string_value(v), json_string_length(v));
	} else if (json_is_number(v)) {
		put_num(o, json_number_value(v));
	} else if (v != NULL) {
		char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		esc(o, text);
		free(text);
	}
}

static void td_open(struct evbuffer *o, const char *cls)
{
	put(o, "<td class=\"");
	put(o, cls);
	put(o, "\">");
}

static void td_text(struct evbuffer *o, const char *cls, const char *text)
{
	td_open(o, cls);
	esc(o, text);
	put(o, "</td>");
}

/* A definition list of obj's members; id: the element's id, or NULL. */
static void dl_id(struct evbuffer *o, const char *id, const json_t *obj)
{
	const char *k;
	const json_t *v;
	put(o, "<dl");
	if (id != NULL) {
		put(o, " id=\"");
		esc(o, id);
		put(o, "\"");
	}
	put(o, ">");
	json_object_foreach((json_t *)obj, k, v)
	{
		put(o, "<dt>");
		esc(o, k);
		put(o, "</dt><dd>");
		put_value(o, v);
		put(o, "</dd>");
	}
	put(o, "</dl>");
}

static void dl(struct evbuffer *o, const json_t *obj)
{
	dl_id(o, NULL, obj);
}

static void section(struct evbuffer *o, const char *title, const json_t *obj)
{
	put(o, "<section><h2>");
	esc(o, title);
	put(o, "</h2>");
	dl(o, obj);
	put(o, "</section>");
}

/* ---- lanes ---- */

/* The lane's rate limit as the script's limitOf(): configured first, else the
 * learned pace (marked ~). */
static void put_limit(struct evbuffer *o, const json_t *lane)
{
	const json_t *g = json_object_get(lane, "gates");
	const json_t *req = json_object_get(json_object_get(lane, "learned"), "requests");
	double rate = 0;
	bool learned = false;
	if (num_at(g, "max_requests_per_second") > 0)
		rate = num_at(g, "max_requests_per_second");
	else if (num_at(g, "max_requests_per_minute") > 0)
		rate = num_at(g, "max_requests_per_minute") / 60;
	else if (num_at(g, "max_requests_per_hour") > 0)
		rate = num_at(g, "max_requests_per_hour") / 3600;
	else if (num_at(g, "min_ms_per_request") > 0)
		rate = 1000 / num_at(g, "min_ms_per_request");
	else if (num_at(req, "pace_per_min") > 0) {
		rate = num_at(req, "pace_per_min") / 60;
		learned = true;
	}
	if (rate > 0) {
		put(o, learned ? "learned pace ~" : "limit ");
		put_num(o, rate);
		put(o, "/s \xc2\xb7 ");
	}
}

static void put_refusals(struct evbuffer *o, const json_t *c)
{
	static const char *const reasons[][2] = {
	    {"rejected_queue_full", "queue full"}, {"queue_timeouts", "queue timeout"},
	    {"rejected_agent_busy", "agent busy"}, {"quota_refused", "quota"},
	    {"day_refused", "daily budget"},       {"capacity_signals", "429s upstream"},
	};
	bool any = false;
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		double n = num_at(c, reasons[i][0]);
		if (n > 0) {
			put(o, any ? ", " : "");
			put(o, reasons[i][1]);
			put(o, " ");
			put_num(o, n);
			any = true;
		}
	}
	if (!any)
		put(o, "\xe2\x80\x93");
}

static void put_learned(struct evbuffer *o, const json_t *lane)
{
	const char *budget;
	const json_t *v;
	bool any = false;
	json_object_foreach((json_t *)json_object_get(lane, "learned"), budget, v)
	{
		put(o, any ? "; " : "");
		esc(o, budget);
		put(o, " ");
		put_num(o, num_at(v, "remaining"));
		put(o, "/");
		put_num(o, num_at(v, "limit") > 0 ? num_at(v, "limit") : num_at(v, "capacity"));
		if (num_at(v, "reset_in_ms") > 0) {
			put(o, ", resets in ");
			put_ms(o, num_at(v, "reset_in_ms"));
		}
		any = true;
	}
	const json_t *day = json_object_get(lane, "day");
	if (day != NULL) {
		put(o, any ? "; day " : "day ");
		put_num(o, num_at(day, "requests"));
		put(o, " req, resets in ");
		put_ms(o, num_at(day, "resets_in_ms"));
		any = true;
	}
	if (!any)
		put(o, "\xe2\x80\x93");
}

static void lane_row(struct evbuffer *o, const json_t *l)
{
	const json_t *c = json_object_get(l, "counters");
	const char *state = json_string_value(json_object_get(l, "state"));
	const char *model = json_string_value(json_object_get(l, "model"));
	bool busy = num_at(l, "in_flight") > 0 || num_at(l, "queue_depth") > 0;
	put(o, busy ? "<tr class=\"lane\" data-key=\"" : "<tr class=\"lane quiet\" data-key=\"");
	esc(o, json_string_value(json_object_get(l, "key")));
	put(o, "\">");
	td_text(o, "provider", json_string_value(json_object_get(l, "provider")));
	td_open(o, "key");
	esc(o, json_string_value(json_object_get(l, "scope_kind")));
	put(o, " ");
	esc(o, json_string_value(json_object_get(l, "key")));
	put(o, "</td>");
	td_text(o, "model", model != NULL ? model : "\xe2\x80\x93");
	td_text(o, "plan", json_string_value(json_object_get(l, "plan")));
	put(o, "<td class=\"state state-");
	esc(o, state);
	put(o, "\">");
	esc(o, state);
	put(o, "</td>");
	td_open(o, "num inflight");
	put_num(o, num_at(l, "in_flight"));
	put(o, "/");
	put_num(o, num_at(l, "concurrency_limit"));
	put(o, "</td>");
	td_open(o, "num queue");
	put_num(o, num_at(l, "queue_depth"));
	if (num_at(l, "retry_waiting") > 0) {
		put(o, " +");
		put_num(o, num_at(l, "retry_waiting"));
		put(o, " retrying");
	}
	put(o, "</td>");
	td_open(o, "num wait");
	put_ms(o, num_at(l, "oldest_wait_ms"));
	put(o, "</td>");
	td_open(o, "rate");
	put(o, "<span class=\"ratetext\">");
	put_limit(o, l);
	put_num(o, num_at(c, "dispatched"));
	put(o, " sent</span></td>");
	td_open(o, "refused");
	put_refusals(o, c);
	put(o, "</td>");
	td_open(o, "learned");
	put_learned(o, l);
	put(o, "</td></tr>\n");
}

static void lanes_table(struct evbuffer *o, const json_t *lanes)
{
	static const char *const heads[] = {
	    "provider", "scope",       "model",         "plan",    "state",          "in flight",
	    "queue",    "oldest wait", "admitted rate", "refused", "learned budgets"};
	evbuffer_add_printf(o, "<section><h2>Lanes (%zu)</h2>\n<table id=\"lanes\"><thead><tr>",
	                    json_array_size(lanes));
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		put(o, "<th>");
		put(o, heads[i]);
		put(o, "</th>");
	}
	put(o, "</tr></thead><tbody>\n");
	for (size_t i = 0; i < json_array_size(lanes); i++)
		lane_row(o, json_array_get(lanes, i));
	if (json_array_size(lanes) == 0)
		put(o, "<tr><td class=\"none\" colspan=\"11\">no lanes yet</td></tr>\n");
	put(o, "</tbody></table></section>\n");
}

/* ---- the last errors: log lines, ts, level and event first ---- */

static void errors_table(struct evbuffer *o, const json_t *list)
{
	put(o, "<section><h2>Last errors</h2>\n<table id=\"errors\"><thead><tr><th>time</th>"
	       "<th>level</th><th>event</th><th>details</th></tr></thead><tbody>\n");
	for (size_t i = 0; i < json_array_size(list); i++) {
		const json_t *e = json_array_get(list, i);
		const char *level = json_string_value(json_object_get(e, "level"));
		put(o, "<tr>");
		td_text(o, "ts", json_string_value(json_object_get(e, "ts")));
		put(o, "<td class=\"level-");
		esc(o, level);
		put(o, "\">");
		esc(o, level);
		put(o, "</td>");
		td_text(o, "event", json_string_value(json_object_get(e, "event")));
		td_open(o, "detail");
		const char *k;
		const json_t *v;
		bool first = true;
		json_object_foreach((json_t *)e, k, v)
		{
			if (strcmp(k, "ts") == 0 || strcmp(k, "level") == 0 ||
			    strcmp(k, "event") == 0)
				continue;
			put(o, first ? "" : " ");
			esc(o, k);
			put(o, "=");
			put_value(o, v);
			first = false;
		}
		put(o, "</td></tr>\n");
	}
	if (json_array_size(list) == 0)
		put(o, "<tr><td class=\"none\" colspan=\"4\">none</td></tr>\n");
	put(o, "</tbody></table></section>\n");
}

void page_view(struct evbuffer *out, const json_t *status)
{
	/* The process as the script shows it: uptime as a duration. */
	json_t *process = json_object();
	struct evbuffer *up = evbuffer_new();
	if (process != NULL && up != NULL) {
		put_ms(up, num_at(status, "uptime_s") * 1000);
		json_object_set(process, "version", json_object_get(status, "version"));
		json_object_set(process, "listen", json_object_get(status, "listen"));
		json_object_set(process, "config", json_object_get(status, "config"));
		json_object_set_new(
		    process, "uptime",
		    json_stringn((const char *)evbuffer_pullup(up, -1), evbuffer_get_length(up)));
		json_object_set(process, "in flight", json_object_get(status, "in_flight"));
		json_object_set(process, "lanes", json_object_get(status, "lanes_count"));
		json_object_set(process, "draining", json_object_get(status, "draining"));
	}
	if (up != NULL)
		evbuffer_free(up);
	put(out, "<div class=\"facts\" id=\"process\">");
	dl(out, process);
	dl(out, json_object_get(status, "responses"));
	put(out, "</div>\n");
	json_decref(process);

	lanes_table(out, json_object_get(status, "lanes"));

	put(out, "<div class=\"facts\">");
	section(out, "Store", json_object_get(status, "store"));
	put(out, "<section><h2>Connections, tunnels and WebSockets</h2>");
	dl(out, json_object_get(status, "connections"));
	dl(out, json_object_get(status, "tunnels"));
	/* The sockets as the script shows them (the same names, the same order). */
	const json_t *w = json_object_get(status, "websockets");
	json_t *ws = json_object();
	static const char *const ws_rows[][2] = {
	    {"websockets open", "open"},
	    {"opening", "opening"},
	    {"turns", "turns"},
	    {"turns in flight", "turns_in_flight"},
	    {"turns waiting", "turns_waiting"},
	    {"turns resent", "turns_resent"},
	};
	for (size_t i = 0; ws != NULL && i < sizeof(ws_rows) / sizeof(ws_rows[0]); i++)
		if (json_object_get(w, ws_rows[i][1]) != NULL)
			json_object_set(ws, ws_rows[i][0], json_object_get(w, ws_rows[i][1]));
	dl_id(out, "websockets", ws);
	put(out, "</section>");
	json_decref(ws);
	json_t *prov = json_object();
	const char *name;
	const json_t *p;
	json_object_foreach(json_object_get(status, "providers"), name, p)
	{
		const char *rw = json_string_value(json_object_get(p, "rewrites"));
		char text[64];
		snprintf(text, sizeof(text), "rewrites %s", rw != NULL ? rw : "?");
		json_object_set_new(prov, name, json_string(text));
	}
	section(out, "Providers", prov);
	json_decref(prov);
	if (json_object_get(status, "events") != NULL)
		section(out, "This page", json_object_get(status, "events"));
	put(out, "</div>\n");

	errors_table(out, json_object_get(status, "last_errors"));
}

int page_write(struct evbuffer *out, const json_t *status)
{
	const char *doc = (const char *)page_doc;
	const char *mark = memmem(doc, sizeof(page_doc), view_mark, sizeof(view_mark) - 1);
	if (mark == NULL) /* a page.html without its mark: the document alone */
		return evbuffer_add(out, doc, sizeof(page_doc));
	size_t before = (size_t)(mark - doc);
	size_t after = before + sizeof(view_mark) - 1;
	if (evbuffer_add(out, doc, before) != 0)
		return -1;
	page_view(out, status);
	return evbuffer_add(out, doc + after, sizeof(page_doc) - after);
}

/* 'sha256-BASE64' of what the document holds between open and close, into
 * buf; "'none'" when it holds no such element. */
static void element_hash(const char *open, const char *close, char *buf, size_t len)
{
	const char *doc = (const char *)page_doc;
	const char *a = memmem(doc, sizeof(page_doc), open, strlen(open));
	const char *b = a != NULL
	                    ? memmem(a, sizeof(page_doc) - (size_t)(a - doc), close, strlen(close))
	                    : NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;
	unsigned char b64[64];
	if (b == NULL || EVP_Digest(a + strlen(open), (size_t)(b - a) - strlen(open), md, &md_len,
	                            EVP_sha256(), NULL) != 1) {
		snprintf(buf, len, "'none'");
		return;
	}
	EVP_EncodeBlock(b64, md, (int)md_len);
	snprintf(buf, len, "'sha256-%s'", (const char *)b64);
}

const char *page_csp(void)
{
	static char csp[512];
	if (csp[0] == '\0') {
		char script[96], style[96];
		element_hash("<script>", "</script>", script, sizeof(script));
		element_hash("<style>", "</style>", style, sizeof(style));
		snprintf(
		    csp, sizeof(csp),
		    "default-src 'none'; script-src %s; style-src %s; connect-src 'self'; "
		    "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		    script, style);
	}
	return csp;
}
