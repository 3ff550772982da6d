/* SPDX-License-Identifier: Apache-2.0 */
/* ws_status — the WebSocket transports in /status and /metrics. See
 * ws_status.h. */
#include "admin/ws_status.h"

#include <event2/buffer.h>

#include "admin/metrics.h"
#include "proxy/wsrelay.h"

/* The open sockets listed in /status at most (the counts cover them all). */
#define SOCKETS_LISTED 100

static void add_socket(void *arg, const char *id, const char *provider, const char *key,
                       const char *model, uint64_t turns, size_t in_flight, size_t waiting,
                       int64_t age_ms)
{
	json_t *arr = arg;
	if (json_array_size(arr) >= SOCKETS_LISTED)
		return;
	json_array_append_new(
	    arr, json_pack("{s:s,s:s,s:s,s:s?,s:I,s:I,s:I,s:I}", "request_id", id, "provider",
	                   provider, "key", key, "model", model[0] ? model : NULL, "turns",
	                   (json_int_t)turns, "turns_in_flight", (json_int_t)in_flight,
	                   "turns_waiting", (json_int_t)waiting, "age_ms", (json_int_t)age_ms));
}

json_t *ws_status_json(const struct wsrelay *w)
{
	struct wsrelay_stats st;
	wsrelay_get_stats(w, &st);
	json_t *sockets = json_array();
	wsrelay_each(w, add_socket, sockets);
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "open", (json_int_t)st.open,
	                 "opening", (json_int_t)st.opening, "opened", (json_int_t)st.opened,
	                 "refused", (json_int_t)st.refused, "turns", (json_int_t)st.turns,
	                 "turns_resent", (json_int_t)st.resent, "refusals_inside",
	                 (json_int_t)st.refusals, "turns_in_flight", (json_int_t)st.turns_in_flight,
	                 "turns_waiting", (json_int_t)st.turns_waiting, "sockets", sockets);
}

static void turn_line(struct evbuffer *out, const struct wsrelay_turn_row *r, const char *outcome,
                      uint64_t n)
{
	evbuffer_add_printf(out, "pacerd_websocket_turns_total{provider=");
	metrics_label_value(out, r->provider);
	evbuffer_add_printf(out, ",model=");
	metrics_label_value(out, r->model);
	evbuffer_add_printf(out, ",outcome=\"%s\"} %llu\n", outcome, (unsigned long long)n);
}

void ws_metrics_write(struct evbuffer *out, const struct wsrelay *w)
{
	struct wsrelay_stats st;
	wsrelay_get_stats(w, &st);
	metrics_family(
	    out, "pacerd_websockets_open", "gauge",
	    "WebSocket transports open now (upgraded; Responses WebSocket mode, Realtime).");
	evbuffer_add_printf(out, "pacerd_websockets_open %zu\n", st.open);
	metrics_family(out, "pacerd_websockets_total", "counter",
	               "WebSocket upgrades asked for, by outcome.");
	evbuffer_add_printf(out, "pacerd_websockets_total{outcome=\"opened\"} %llu\n",
	                    (unsigned long long)st.opened);
	evbuffer_add_printf(out, "pacerd_websockets_total{outcome=\"refused\"} %llu\n",
	                    (unsigned long long)st.refused);
	metrics_family(out, "pacerd_websocket_turns_waiting", "gauge",
	               "Turns (response.create) held for their lane now.");
	evbuffer_add_printf(out, "pacerd_websocket_turns_waiting %zu\n", st.turns_waiting);
	metrics_family(out, "pacerd_websocket_turns_in_flight", "gauge",
	               "Turns sent to the provider and not ended yet.");
	evbuffer_add_printf(out, "pacerd_websocket_turns_in_flight %zu\n", st.turns_in_flight);
	metrics_family(out, "pacerd_websocket_turns_total", "counter",
	               "Turns inside WebSockets that ended, by provider, model and outcome "
	               "(completed, refused: a rate-limit error event relayed, failed: anything "
	               "else).");
	size_t n;
	const struct wsrelay_turn_row *rows = wsrelay_turn_rows(w, &n);
	for (size_t i = 0; i < n; i++) {
		turn_line(out, &rows[i], "completed", rows[i].completed);
		turn_line(out, &rows[i], "refused", rows[i].refused);
		turn_line(out, &rows[i], "failed", rows[i].failed);
	}
	metrics_family(out, "pacerd_websocket_turns_resent_total", "counter",
	               "Turns sent again after a rate-limit refusal inside the socket.");
	evbuffer_add_printf(out, "pacerd_websocket_turns_resent_total %llu\n",
	                    (unsigned long long)st.resent);
}
