/* SPDX-License-Identifier: Apache-2.0 */
/* wsrelay — WebSocket transports, paced per turn. See wsrelay.h.
 *
 * One struct ws_sock per socket; its client half is an hreq until the
 * upgrade (refusals go through the hreq seam), then the client's socket
 * (hreq_take_over) in a bufferevent. Messages from the client wait in outq,
 * in order; a turn at its head is in its lane until dispatched; turns sent
 * are in flight (a FIFO: the provider answers them in order) until the
 * event that ends them. Nothing is freed inside a libevent callback: a
 * finished socket goes on the reap list, freed on the next loop turn. */
#include "proxy/wsrelay.h"

#include <curl/curl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event_struct.h>
#include <http_parser.h>
#include <jansson.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/keyid.h"
#include "core/list.h"
#include "core/log.h"
#include "http/headers.h"
#include "http/wsframe.h"
#include "http/wshandshake.h"
#include "provider/ratelimit_headers.h"
#include "provider/tokens.h"
#include "provider/ws_event.h"
#include "proxy/lanes.h"
#include "proxy/refusal.h"
#include "sched/retry.h"

#define OUT_LOW (WSRELAY_OUT_CAP / 4)
/* The input read from one side before its messages are handed on. */
#define READ_HIGH (64 * 1024)
/* The provider's answer to the upgrade: its head, and a refusal's body. */
#define HEAD_CAP (64 * 1024)
#define REFUSAL_BODY_CAP (64 * 1024)
#define CLOSE_LINGER_MS 2000
#define TURN_ROWS_MAX 64
#define UP_HEADERS_MAX 128

enum ws_state { WS_OPENING, WS_CONNECTING, WS_HANDSHAKE, WS_OPEN, WS_CLOSING, WS_DONE };
enum turn_state { T_LOCAL, T_IN_LANE, T_IN_FLIGHT, T_RETRY };

struct ws_msg {
	struct list link; /* s->outq, then s->flight for a turn sent */
	struct ws_sock *s;
	struct lane_ticket ticket; /* a turn's */
	bool text, turn;
	enum turn_state state;
	unsigned attempts;
	uint64_t seq;       /* the client's messages before and including this one */
	uint64_t no;        /* the turn's number in its socket */
	int64_t t_arrive;   /* when it arrived */
	int64_t t_dispatch; /* when it was last sent */
	int64_t estimate;   /* tokens charged */
	bool submitted;     /* in its lane (queued, in flight, or waiting to retry) */
	char model[WS_EVENT_MODEL_MAX];
	size_t len;
	char data[];
};

struct ws_sock {
	struct wsrelay *w;
	struct list link; /* w->live, then w->reaped */
	enum ws_state state;
	struct config_ref *cref;
	const struct provider_conf *prov;
	struct hreq *client; /* until the upgrade (or its refusal) */
	char request_id[HREQ_ID_MAX + 1];
	char key_hash[KEYID_HEX + 1];
	char key_id[KEYID_NAME_SIZE];
	char agent[64];
	char model[WS_EVENT_MODEL_MAX]; /* the socket's: ?model=, or session.update */
	char client_key[WSH_KEY_LEN + 1];
	char up_key[WSH_KEY_LEN + 1];
	char *path; /* the upstream URL */
	uint64_t agent_id, flow;
	int priority;
	bool realtime; /* an error event does not end a turn (Realtime) */
	/* pacerd answers the client's upgrade itself, before the provider's
	 * socket opens with the first message's model (wsrelay.h) */
	bool early;
	bool tunnel; /* inside a terminated CONNECT tunnel (over its TLS) */
	struct lane_ticket open_ticket;
	bool open_submitted, open_asked;
	bool counted_open;        /* the client's socket is upgraded (w->n_open) */
	struct evbuffer *up_head; /* pacerd's GET, written once connected */
	/* the answer's head */
	http_parser parser;
	struct evbuffer *head; /* names and values, NUL-terminated */
	size_t hdr_name[UP_HEADERS_MAX], hdr_value[UP_HEADERS_MAX], n_hdrs;
	bool in_value, head_done, head_over;
	int status;
	struct evbuffer *refusal; /* a refused upgrade's body */
	/* the sockets: down is the client's (under it, down_wire: the socket
	 * of a terminated tunnel's TLS filter, whose output down_wire_cb
	 * watches) */
	struct bufferevent *up, *down, *down_wire;
	struct evbuffer_cb_entry *down_wire_cb;
	struct wsf *up_f, *down_f;
	SSL_CTX *ssl_ctx;
	/* connect and handshake deadline, then the turns' (WS_OPEN), then the
	 * close's linger */
	struct event timer;
	bool timer_on;
	struct event kick;  /* work for the next loop turn (not inside a callback) */
	int64_t last_up_ms; /* the provider's last message */
	bool up_held;       /* the provider is not read (the client is slow) */
	/* the turns */
	struct list outq;   /* messages from the client not sent yet, in order */
	struct list flight; /* turns sent, oldest first */
	size_t outq_bytes, n_flight, n_waiting;
	uint64_t client_seq, turns, turn_seq;
	uint64_t bytes_up, bytes_down;
	int64_t t_start;
	uint16_t close_code; /* the code the socket ended with */
	const char *close_why;
	bool up_closed, down_closed; /* each side's connection is gone */
	bool pumping;                /* inside pump_out */
};

struct wsrelay {
	struct event_base *base;
	struct evdns_base *dns;
	struct lanes *lanes;
	struct config_ref *cref;
	struct list live, reaped;
	struct event *reap;
	bool closing;
	size_t n_live, n_open;
	uint64_t opened, refused, turns, resent, refusals;
	struct wsrelay_turn_row rows[TURN_ROWS_MAX];
	size_t n_rows;
};

static const struct lanes_events turn_events;
static void sock_end(struct ws_sock *s, uint16_t code, const char *why);
static void turn_timer(struct ws_sock *s);
static void open_submit(struct ws_sock *s);
static void send_own_error(struct ws_sock *s, const char *code, const char *message);
static void pump_out(struct ws_sock *s);
static void flush(struct ws_sock *s);

static int64_t now_ms(void)
{
	return clock_now_ms();
}

static void copy_str(char *dst, size_t cap, const char *src, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- log lines and counters ---- */

static struct wsrelay_turn_row *turn_row(struct wsrelay *w, const struct ws_sock *s,
                                         const char *model)
{
	for (size_t i = 0; i < w->n_rows; i++)
		if (w->rows[i].provider == s->prov->name && strcmp(w->rows[i].model, model) == 0)
			return &w->rows[i];
	if (w->n_rows == TURN_ROWS_MAX)
		model = "other"; /* past the cap: one row for the rest */
	for (size_t i = 0; i < w->n_rows; i++)
		if (w->rows[i].provider == s->prov->name && strcmp(w->rows[i].model, model) == 0)
			return &w->rows[i];
	if (w->n_rows == TURN_ROWS_MAX)
		return &w->rows[TURN_ROWS_MAX - 1];
	struct wsrelay_turn_row *r = &w->rows[w->n_rows++];
	memset(r, 0, sizeof(*r));
	r->provider = s->prov->name;
	copy_str(r->model, sizeof(r->model), model, strlen(model));
	return r;
}

static bool sock_log_begin(struct log_line *l, enum log_level level, const char *event,
                           const struct ws_sock *s)
{
	if (!log_begin(l, level, event))
		return false;
	log_str(l, "request_id", s->request_id);
	log_str(l, "provider", s->prov->name);
	log_str(l, "key", s->key_id);
	if (s->agent[0] != '\0')
		log_str(l, "agent", s->agent);
	log_str(l, "transport", "websocket");
	if (s->tunnel)
		log_bool(l, "tunnel", true);
	return true;
}

/* The access-log line of one turn (DESIGN §7's request line). */
static void log_turn(struct ws_msg *m, int status, const char *error, int64_t tokens)
{
	struct ws_sock *s = m->s;
	int64_t now = now_ms();
	struct wsrelay_turn_row *row = turn_row(s->w, s, m->model[0] ? m->model : "-");
	if (status == 200)
		row->completed++;
	else if (status == 429)
		row->refused++;
	else
		row->failed++;
	struct log_line l;
	if (!log_begin(&l, LOG_INFO, "request"))
		return;
	char id[HREQ_ID_MAX + 24];
	snprintf(id, sizeof(id), "%s.%llu", s->request_id, (unsigned long long)m->no);
	log_str(&l, "request_id", id);
	log_str(&l, "provider", s->prov->name);
	log_str(&l, "key", s->key_id);
	if (s->agent[0] != '\0')
		log_str(&l, "agent", s->agent);
	log_str(&l, "transport", "websocket");
	if (s->tunnel)
		log_bool(&l, "tunnel", true);
	log_str(&l, "method", "response.create");
	if (m->model[0] != '\0')
		log_str(&l, "model", m->model);
	log_int(&l, "status", status);
	log_int(&l, "attempts", m->attempts);
	log_int(&l, "queue_ms", m->t_dispatch ? m->t_dispatch - m->t_arrive : now - m->t_arrive);
	log_int(&l, "upstream_ms", m->t_dispatch ? now - m->t_dispatch : 0);
	log_int(&l, "tokens_estimated", m->estimate);
	if (tokens >= 0)
		log_int(&l, "tokens", tokens);
	if (error != NULL)
		log_str(&l, "error", error);
	log_end(&l);
}

/* ---- memory ---- */

static void msg_free(struct ws_msg *m)
{
	list_remove(&m->link);
	if (m->state == T_LOCAL || m->state == T_IN_LANE || m->state == T_RETRY)
		m->s->outq_bytes -= m->len;
	if (m->state == T_IN_LANE || m->state == T_RETRY)
		m->s->n_waiting--;
	if (m->state == T_IN_FLIGHT)
		m->s->n_flight--;
	if (m->submitted)
		lanes_cancel(m->s->w->lanes, &m->ticket);
	free(m);
}

static void sock_free(struct ws_sock *s)
{
	while (!list_empty(&s->outq))
		msg_free(LIST_ITEM(list_first(&s->outq), struct ws_msg, link));
	while (!list_empty(&s->flight))
		msg_free(LIST_ITEM(list_first(&s->flight), struct ws_msg, link));
	if (s->open_submitted)
		lanes_cancel(s->w->lanes, &s->open_ticket);
	if (s->timer_on)
		evtimer_del(&s->timer);
	event_del(&s->kick);
	if (s->up != NULL)
		bufferevent_free(s->up);
	if (s->down_wire_cb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(s->down_wire), s->down_wire_cb);
	if (s->down != NULL)
		bufferevent_free(s->down);
	wsf_free(s->up_f);
	wsf_free(s->down_f);
	if (s->ssl_ctx != NULL)
		SSL_CTX_free(s->ssl_ctx);
	if (s->up_head != NULL)
		evbuffer_free(s->up_head);
	if (s->head != NULL)
		evbuffer_free(s->head);
	if (s->refusal != NULL)
		evbuffer_free(s->refusal);
	free(s->path);
	config_ref_put(s->cref);
	free(s);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct wsrelay *w = arg;
	(void)fd;
	(void)what;
	while (!list_empty(&w->reaped)) {
		struct ws_sock *s = LIST_ITEM(list_first(&w->reaped), struct ws_sock, link);
		list_remove(&s->link);
		sock_free(s);
	}
}

/* The one teardown: the turns still in flight end for their lanes, what
 * waits leaves them, the log line, then the memory on the next loop turn. */
static void sock_finish(struct ws_sock *s)
{
	struct wsrelay *w = s->w;
	if (s->state == WS_DONE)
		return;
	int64_t now = now_ms();
	while (!list_empty(&s->flight)) {
		struct ws_msg *m = LIST_ITEM(list_first(&s->flight), struct ws_msg, link);
		struct lane_change ch;
		lanes_complete(w->lanes, &m->ticket, RETRY_LANE_TRANSIENT, false, 0, now, &ch);
		m->submitted = false;
		log_turn(m, 499, "socket_closed", -1);
		lanes_pump(w->lanes, m->ticket.lane);
		msg_free(m);
	}
	while (!list_empty(&s->outq))
		msg_free(LIST_ITEM(list_first(&s->outq), struct ws_msg, link));
	if (s->open_submitted) {
		lanes_cancel(w->lanes, &s->open_ticket);
		s->open_submitted = false;
	}
	if (s->counted_open)
		w->n_open--;
	struct log_line l;
	if (s->counted_open && sock_log_begin(&l, LOG_INFO, "websocket_closed", s)) {
		if (s->model[0] != '\0')
			log_str(&l, "model", s->model);
		log_int(&l, "code", s->close_code);
		if (s->close_why != NULL)
			log_str(&l, "reason", s->close_why);
		log_int(&l, "turns", (long long)s->turns);
		log_int(&l, "bytes_up", (long long)s->bytes_up);
		log_int(&l, "bytes_down", (long long)s->bytes_down);
		log_int(&l, "duration_ms", now - s->t_start);
		log_end(&l);
	}
	s->state = WS_DONE;
	if (s->client != NULL) {
		hreq_set_events(s->client, NULL, NULL);
		s->client = NULL;
	}
	if (s->up != NULL)
		bufferevent_disable(s->up, EV_READ | EV_WRITE);
	if (s->down != NULL)
		bufferevent_disable(s->down, EV_READ | EV_WRITE);
	list_remove(&s->link);
	w->n_live--;
	list_insert_tail(&w->reaped, &s->link);
	event_active(w->reap, EV_TIMEOUT, 1);
}

/* ---- timers ---- */

static void arm(struct ws_sock *s, int64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(&s->timer, &tv);
	s->timer_on = true;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct ws_sock *s = arg;
	(void)fd;
	(void)what;
	s->timer_on = false;
	switch (s->state) {
	case WS_CONNECTING:
	case WS_HANDSHAKE:
		sock_end(s, WSF_TRY_AGAIN, "upstream_timeout");
		break;
	case WS_OPEN:
		turn_timer(s);
		break;
	case WS_CLOSING:
		sock_finish(s); /* the close handshake did not finish in time */
		break;
	default:
		break;
	}
}

/* ---- pacerd's own answers before the upgrade ---- */

/* Answers the client (still an hreq) with pacerd's own error and ends the
 * socket. */
static void refuse_plain(struct ws_sock *s, int status, const char *code, const char *message)
{
	s->w->refused++;
	if (s->client != NULL) {
		struct hreq *r = s->client;
		hreq_set_events(r, NULL, NULL);
		s->client = NULL;
		hreq_error(r, status, code, message, NULL, 0);
	}
	sock_finish(s);
}

/* A socket refused before the provider's is open: pacerd's plain answer
 * while the client is a request, else (pacerd answered the upgrade
 * itself) its error event and a close: 1013 for a refusal to try again
 * later, 1011 for the provider's failure, 1008 for the rest. */
static void refuse(struct ws_sock *s, int status, const char *code, const char *message)
{
	if (s->down_f == NULL) {
		refuse_plain(s, status, code, message);
		return;
	}
	s->w->refused++;
	send_own_error(s, code, message);
	sock_end(s,
	         status == 429 || status == 503 || status == 504 ? WSF_TRY_AGAIN
	         : status >= 500                                 ? WSF_INTERNAL
	                                                         : WSF_POLICY,
	         message);
}

/* Ends the socket: before the upgrade, pacerd's own answer; after it, a
 * close frame each way with code (the sockets close once they are sent,
 * or after CLOSE_LINGER_MS). */
static void sock_end(struct ws_sock *s, uint16_t code, const char *why)
{
	if (s->close_code == 0) {
		s->close_code = code;
		s->close_why = why;
	}
	if (s->down_f == NULL) { /* the client is still a request */
		refuse_plain(s, code == WSF_TRY_AGAIN ? 504 : 502,
		             code == WSF_TRY_AGAIN ? "upstream_timeout" : "upstream_unreachable",
		             why != NULL ? why : "the provider's WebSocket could not be opened");
		return;
	}
	if (s->state == WS_DONE)
		return;
	if (s->up_f != NULL && !wsf_close_sent(s->up_f))
		wsf_close(s->up_f,
		          code == WSF_PROTOCOL_ERROR || code == WSF_INVALID_DATA ||
		                  code == WSF_TOO_BIG || code == WSF_INTERNAL
		              ? WSF_GOING_AWAY
		              : code,
		          why);
	if (s->down_f != NULL && !wsf_close_sent(s->down_f))
		wsf_close(s->down_f, code, why);
	if (s->state < WS_OPEN) {
		/* pacerd answered the upgrade: the provider's socket, not open
		 * yet, is given up (freed with the rest) */
		if (s->open_submitted) {
			lanes_cancel(s->w->lanes, &s->open_ticket);
			s->open_submitted = false;
		}
		if (s->up != NULL) {
			bufferevent_setcb(s->up, NULL, NULL, NULL, NULL);
			bufferevent_disable(s->up, EV_READ | EV_WRITE);
		}
		s->up_closed = true;
	}
	if (s->state != WS_CLOSING) {
		s->state = WS_CLOSING;
		if (s->timer_on)
			evtimer_del(&s->timer);
		arm(s, CLOSE_LINGER_MS);
	}
	flush(s);
}

/* ---- the turns ---- */

/* A message of pacerd's own to the client inside the socket: an error event
 * shaped as the provider's ({"type":"error","error":{...}}). */
static void send_own_error(struct ws_sock *s, const char *code, const char *message)
{
	json_t *j = json_pack("{s:s,s:{s:s,s:s,s:s}}", "type", "error", "error", "type",
	                      "pacer_error", "code", code, "message", message);
	char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	if (text != NULL && s->down_f != NULL)
		wsf_queue(s->down_f, true, text, strlen(text));
	free(text);
	json_decref(j);
}

/* The lanes refused a turn (queue full, timeout, quota, …): the client gets
 * pacerd's error event in its place, and what followed it goes on. */
static void on_turn_refuse(struct lane_ticket *t, const struct lane_refusal_info *info)
{
	struct ws_msg *m = (struct ws_msg *)((char *)t - offsetof(struct ws_msg, ticket));
	struct ws_sock *s = m->s;
	struct refusal r;
	refusal_of_lane(info, now_ms() - m->t_arrive, now_ms() - m->t_arrive, &r);
	m->submitted = false;
	send_own_error(s, r.code, r.message);
	log_turn(m, r.status, r.code, -1);
	msg_free(m);
	/* From the lane's timer, what waited behind it goes on now; from
	 * inside lanes_find or lanes_submit, pump_out's loop goes on by itself. */
	if (s->state == WS_OPEN && !s->pumping)
		pump_out(s);
}

/* The model a turn names (data: its message), "" when none. */
static void turn_model(const uint8_t *data, size_t len, char *out, size_t cap)
{
	struct tokens_cost cost;
	tokens_estimate((const char *)data, len, 0, &cost);
	char buf[TOKENS_MODEL_MAX];
	size_t mlen = 0;
	const char *model = tokens_model_name(&cost, buf, &mlen);
	copy_str(out, cap, model != NULL ? model : "", model != NULL ? mlen : 0);
}

/* Submits the turn m (at the head of outq) to its lane. */
static void turn_submit(struct ws_msg *m)
{
	struct ws_sock *s = m->s;
	struct wsrelay *w = s->w;
	int64_t now = now_ms();
	struct tokens_cost cost;
	tokens_estimate(m->data, m->len, 0, &cost);
	char buf[TOKENS_MODEL_MAX];
	size_t mlen = 0;
	const char *model = tokens_model_name(&cost, buf, &mlen);
	if (model == NULL || mlen == 0) {
		model = s->model;
		mlen = strlen(s->model);
	}
	copy_str(m->model, sizeof(m->model), model, mlen);
	m->ticket.ev = &turn_events;
	struct lane_request lr = {
	    .key_hash = s->key_hash[0] ? s->key_hash : NULL,
	    .model = mlen > 0 ? m->model : NULL,
	    .model_len = strlen(m->model),
	};
	m->state = T_IN_LANE;
	s->n_waiting++;
	m->submitted = true;
	const struct plan_conf *plan = lanes_find(w->lanes, &m->ticket, s->prov, &lr, now);
	if (plan == NULL)
		return; /* refused: on_turn_refuse freed it */
	struct sched_request rq = {.agent = s->agent_id, .flow = s->flow, .priority = s->priority};
	struct lane_cost lc = lane_cost_of(&cost);
	lanes_charge(&m->ticket, &rq, &lc, now);
	m->estimate = rq.cost_prompt + rq.cost_output;
	lanes_submit(w->lanes, &m->ticket, &rq, -1, now + (int64_t)plan->retry.deadline_s * 1000,
	             now);
}

/* Sends what waits at the head of outq, up to a turn that waits for its
 * lane. */
static void pump_out(struct ws_sock *s)
{
	s->pumping = true;
	while (s->state == WS_OPEN && !list_empty(&s->outq)) {
		struct ws_msg *m = LIST_ITEM(list_first(&s->outq), struct ws_msg, link);
		if (m->turn) {
			if (m->state == T_LOCAL) {
				turn_submit(m);
				continue; /* dispatched, refused, or waiting: look again */
			}
			break; /* held for its lane */
		}
		wsf_queue(s->up_f, m->text, m->data, m->len);
		s->bytes_up += m->len;
		msg_free(m);
	}
	s->pumping = false;
	flush(s);
}

/* The lane lets turn m go (the first time, or again after a refusal). */
static void on_turn_dispatch(struct lane_ticket *t)
{
	struct ws_msg *m = (struct ws_msg *)((char *)t - offsetof(struct ws_msg, ticket));
	struct ws_sock *s = m->s;
	struct wsrelay *w = s->w;
	if (s->state != WS_OPEN) {
		/* closing: it is not sent; its slot goes back */
		struct lane_change ch;
		lanes_complete(w->lanes, t, RETRY_LANE_SUCCESS, false, 0, now_ms(), &ch);
		m->submitted = false;
		log_turn(m, 499, "socket_closed", -1);
		msg_free(m);
		return;
	}
	list_remove(&m->link);
	s->outq_bytes -= m->len;
	s->n_waiting--;
	m->state = T_IN_FLIGHT;
	m->attempts++;
	m->t_dispatch = now_ms();
	list_insert_tail(&s->flight, &m->link);
	s->n_flight++;
	w->turns++;
	if (m->attempts == 1)
		s->turns++;
	wsf_queue(s->up_f, m->text, m->data, m->len);
	s->bytes_up += m->len;
	lanes_sent(w->lanes, t);
	if (!s->timer_on) /* the turns' deadline (turn_timer) */
		arm(s, (int64_t)s->prov->timeouts.first_byte_s * 1000);
	pump_out(s);
}

static const struct lanes_events turn_events = {.dispatch = on_turn_dispatch,
                                                .refuse = on_turn_refuse};

/* The ticket of the moment learn_limits finds a lane with: never queued. */
static void find_only_dispatch(struct lane_ticket *t)
{
	(void)t;
}

static void find_only_refuse(struct lane_ticket *t, const struct lane_refusal_info *info)
{
	(void)t;
	(void)info;
}

static const struct lanes_events find_only_events = {.dispatch = find_only_dispatch,
                                                     .refuse = find_only_refuse};

/* The oldest turn in flight, or NULL. */
static struct ws_msg *oldest_in_flight(struct ws_sock *s)
{
	return list_empty(&s->flight) ? NULL
	                              : LIST_ITEM(list_first(&s->flight), struct ws_msg, link);
}

static void turn_end(struct ws_sock *s, const struct ws_event *e)
{
	struct ws_msg *m = oldest_in_flight(s);
	if (m == NULL)
		return;
	struct wsrelay *w = s->w;
	int64_t now = now_ms();
	int64_t used = -1;
	if (e->usage.present && m->ticket.metered)
		used = lanes_tokens_used(w->lanes, &m->ticket, &e->usage, now);
	else if (e->usage.present)
		used = e->usage.total;
	struct sched_lane *lane = m->ticket.lane;
	struct lane_change ch;
	lanes_complete(w->lanes, &m->ticket, RETRY_LANE_SUCCESS, false, 0, now, &ch);
	m->submitted = false;
	log_turn(m,
	         e->kind == WSE_ERROR ? 400
	         : e->completed       ? 200
	                              : 500,
	         e->kind == WSE_ERROR ? (e->code[0] ? e->code : "error") : NULL, used);
	msg_free(m);
	lanes_pump(w->lanes, lane);
	if (w->closing && s->n_flight == 0)
		sock_end(s, WSF_GOING_AWAY, "pacerd is shutting down");
}

/* When the oldest turn in flight m is late: timeouts.first_byte_s after its
 * dispatch while the provider sent nothing since, then timeouts.idle_s
 * after the provider's last message (a plain request's deadlines: its
 * answer's head, then silence in its body). *first: which of the two. */
static int64_t turn_deadline(const struct ws_sock *s, const struct ws_msg *m, bool *first)
{
	*first = s->last_up_ms < m->t_dispatch;
	return *first ? m->t_dispatch + (int64_t)s->prov->timeouts.first_byte_s * 1000
	              : s->last_up_ms + (int64_t)s->prov->timeouts.idle_s * 1000;
}

/* The socket's timer while open (armed at a dispatch, re-armed lazily): a
 * turn past its deadline ends as a 504 would, its slot given back, the
 * client told by pacerd's error event, and the socket closed (1011; the
 * provider gets 1001): what the provider might still send for it could
 * not be told from the next turn's. While the provider is not read
 * because the client is slow, no deadline runs (flush restarts it). */
static void turn_timer(struct ws_sock *s)
{
	struct ws_msg *m = oldest_in_flight(s);
	if (m == NULL)
		return;
	int64_t now = now_ms();
	bool first;
	int64_t at = turn_deadline(s, m, &first);
	if (s->up_held || now < at) {
		arm(s, s->up_held ? (int64_t)s->prov->timeouts.idle_s * 1000 : at - now);
		return;
	}
	struct wsrelay *w = s->w;
	struct sched_lane *lane = m->ticket.lane;
	struct lane_change ch;
	lanes_complete(w->lanes, &m->ticket, RETRY_LANE_TRANSIENT, false, 0, now, &ch);
	m->submitted = false;
	log_turn(m, 504, "upstream_timeout", -1);
	msg_free(m);
	lanes_pump(w->lanes, lane);
	const char *why = first ? "no event from the provider within timeouts.first_byte_s"
	                        : "no event from the provider within timeouts.idle_s";
	send_own_error(s, "upstream_timeout", why);
	sock_end(s, WSF_INTERNAL, why);
}

/* A rate-limit refusal inside the socket: the lane holds as for a 429; the
 * turn goes again once the hold ends when the client sent nothing since
 * (and its attempts allow), else the client gets the refusal. Returns true
 * when the refusal is kept from the client. */
static bool turn_refused(struct ws_sock *s, const struct ws_event *e)
{
	struct ws_msg *m = oldest_in_flight(s);
	s->w->refusals++;
	if (m == NULL)
		return false;
	struct wsrelay *w = s->w;
	int64_t now = now_ms();
	const struct plan_conf *plan = lanes_plan(&m->ticket);
	int64_t hold = e->has_hint ? e->hint_ms : (int64_t)plan->retry.initial_delay_ms;
	struct sched_lane *lane = m->ticket.lane;
	struct lane_change ch;
	lanes_complete(w->lanes, &m->ticket, RETRY_LANE_CAPACITY, e->has_hint, hold, now, &ch);
	bool again =
	    s->client_seq == m->seq && m->attempts < plan->retry.max_attempts && !w->closing;
	if (!again) {
		m->submitted = false;
		log_turn(m, 429, e->code[0] ? e->code : "rate_limited", -1);
		msg_free(m);
		lanes_pump(w->lanes, lane);
		return false;
	}
	struct log_line l;
	if (sock_log_begin(&l, LOG_INFO, "retry", s)) {
		log_int(&l, "attempt", m->attempts);
		log_int(&l, "status_code", 429);
		log_str(&l, "reason", e->code[0] ? e->code : "rate_limited");
		log_int(&l, "delay_ms", hold);
		log_end(&l);
	}
	/* Back at the head of what waits: nothing came behind it. */
	list_remove(&m->link);
	s->n_flight--;
	m->state = T_RETRY;
	s->n_waiting++;
	s->outq_bytes += m->len;
	list_insert_head(&s->outq, &m->link);
	w->resent++;
	lanes_retry(w->lanes, &m->ticket, now + hold);
	lanes_pump(w->lanes, lane);
	return true;
}

/* What the provider said in the socket teaches the lane of the socket's
 * turns (rate_limits.updated): through the turn in flight, else a ticket
 * of the moment that only finds the lane. */
static void learn_limits(struct ws_sock *s, const struct ws_event *e)
{
	struct wsrelay *w = s->w;
	int64_t now = now_ms();
	struct retry_head_verdict hv = {0};
	struct ws_msg *m = oldest_in_flight(s);
	if (m != NULL) {
		lanes_headers(w->lanes, &m->ticket, 0, &e->limits, &hv, false, now);
		return;
	}
	struct lane_ticket t;
	memset(&t, 0, sizeof(t));
	t.ev = &find_only_events; /* a refusal of lanes_find (too many lanes) is ignored */
	struct lane_request lr = {
	    .key_hash = s->key_hash[0] ? s->key_hash : NULL,
	    .model = s->model[0] ? s->model : NULL,
	    .model_len = strlen(s->model),
	};
	if (lanes_find(w->lanes, &t, s->prov, &lr, now) != NULL)
		lanes_headers(w->lanes, &t, 0, &e->limits, &hv, false, now);
}

/* ---- messages ---- */

static void on_client_message(void *ctx, bool text, const uint8_t *data, size_t len)
{
	struct ws_sock *s = ctx;
	if (s->state == WS_CLOSING || s->state == WS_DONE)
		return;
	struct ws_event e;
	if (text)
		ws_event_read((const char *)data, len, true, &e);
	else
		e.kind = WSE_OTHER;
	if (e.kind == WSE_SESSION && e.model[0] != '\0' && s->model[0] == '\0')
		memcpy(s->model, e.model, sizeof(s->model));
	if (e.kind == WSE_TURN && s->model[0] == '\0')
		turn_model(data, len, s->model, sizeof(s->model));
	if (!s->open_asked)
		open_submit(s); /* pacerd answered first: the first message's lane */
	struct ws_msg *m = malloc(sizeof(*m) + len);
	if (m == NULL) {
		sock_end(s, WSF_INTERNAL, "out of memory");
		return;
	}
	memset(m, 0, sizeof(*m));
	m->s = s;
	m->text = text;
	m->turn = e.kind == WSE_TURN;
	m->state = T_LOCAL;
	m->seq = ++s->client_seq;
	m->t_arrive = now_ms();
	m->len = len;
	if (m->turn)
		m->no = ++s->turn_seq;
	memcpy(m->data, data, len);
	list_insert_tail(&s->outq, &m->link);
	s->outq_bytes += len;
	pump_out(s);
}

static void on_up_message(void *ctx, bool text, const uint8_t *data, size_t len)
{
	struct ws_sock *s = ctx;
	if (s->state != WS_OPEN && s->state != WS_CLOSING)
		return;
	s->last_up_ms = now_ms();
	struct ws_event e;
	if (text)
		ws_event_read((const char *)data, len, false, &e);
	else
		e.kind = WSE_OTHER;
	switch (e.kind) {
	case WSE_TURN_END:
		turn_end(s, &e);
		break;
	case WSE_RATE_LIMITS:
		learn_limits(s, &e);
		break;
	case WSE_REFUSED:
		if (turn_refused(s, &e))
			return; /* sent again later: the client does not see it */
		break;
	case WSE_ERROR:
		if (!s->realtime)
			turn_end(s, &e); /* the Responses API answers a failed turn with it */
		break;
	default:
		break;
	}
	if (s->down_f != NULL && wsf_queue(s->down_f, text, data, len) == 0)
		s->bytes_down += len;
}

static void on_client_closed(void *ctx, uint16_t code, const uint8_t *reason, size_t len)
{
	struct ws_sock *s = ctx;
	(void)reason;
	(void)len;
	s->down_closed = true;
	sock_end(s, code == WSF_NO_STATUS ? WSF_NORMAL : code, "client closed");
}

static void on_up_closed(void *ctx, uint16_t code, const uint8_t *reason, size_t len)
{
	struct ws_sock *s = ctx;
	(void)reason;
	(void)len;
	s->up_closed = true;
	sock_end(s, code == WSF_NO_STATUS ? WSF_NORMAL : code, "upstream closed");
}

static const struct wsf_events client_frame_events = {.message = on_client_message,
                                                      .closed = on_client_closed};
static const struct wsf_events up_frame_events = {.message = on_up_message, .closed = on_up_closed};

/* ---- bytes: backpressure and the end of the close handshake ---- */

static size_t waiting_for(struct bufferevent *bev)
{
	return bev != NULL ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

/* Moves queued frames to the sockets, then decides who is read: a side is
 * not read while the other has WSRELAY_OUT_CAP bytes waiting (or, for the
 * client, while its held turns pass the same cap). What waits for the
 * client includes what a tunnel's TLS filter encrypted ahead. */
static void flush(struct ws_sock *s)
{
	if (s->down_f == NULL || s->state == WS_DONE)
		return;
	if ((s->up_f != NULL && wsf_send(s->up_f, bufferevent_get_output(s->up)) != 0) ||
	    wsf_send(s->down_f, bufferevent_get_output(s->down)) != 0) {
		sock_finish(s);
		return;
	}
	size_t to_client = waiting_for(s->down) + waiting_for(s->down_wire);
	size_t to_up = s->up_f != NULL ? waiting_for(s->up) : 0;
	bool hold_up = to_client >= WSRELAY_OUT_CAP;
	bool hold_down = to_up >= WSRELAY_OUT_CAP || s->outq_bytes >= WSRELAY_OUT_CAP;
	bool free_up = to_client <= OUT_LOW,
	     free_down = to_up <= OUT_LOW && s->outq_bytes <= OUT_LOW;
	if (s->up_f != NULL && hold_up) {
		wsf_hold(s->up_f, true);
		bufferevent_disable(s->up, EV_READ);
		s->up_held = true;
	} else if (s->up_f != NULL && free_up && !s->up_closed) {
		wsf_hold(s->up_f, false);
		bufferevent_enable(s->up, EV_READ);
		if (s->up_held) /* the turns' deadline counts from now again */
			s->last_up_ms = now_ms();
		s->up_held = false;
	}
	if (hold_down) {
		wsf_hold(s->down_f, true);
		bufferevent_disable(s->down, EV_READ);
	} else if (free_down && !s->down_closed) {
		wsf_hold(s->down_f, false);
		bufferevent_enable(s->down, EV_READ);
	}
	if (s->state == WS_CLOSING && to_client == 0 && to_up == 0 &&
	    (wsf_finished(s->down_f) || s->down_closed) &&
	    (s->up_f == NULL || wsf_finished(s->up_f) || s->up_closed))
		sock_finish(s);
}

/* Runs on the next loop turn: what the client's or the provider's input
 * already holds, then flush (bytes that came with a handshake, a tunnel's
 * socket that drained). */
static void on_kick(evutil_socket_t fd, short what, void *arg);

static void kick(struct ws_sock *s)
{
	event_active(&s->kick, EV_TIMEOUT, 1);
}

/* A tunnel's socket under its TLS filter wrote bytes: the filter calls
 * nobody when it drained, so that the relay learns it here. */
static void on_wire_out(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	(void)buf;
	if (info->n_deleted > 0)
		kick(arg);
}

static void on_up_read(struct bufferevent *bev, void *arg)
{
	struct ws_sock *s = arg;
	if (s->state == WS_DONE || s->up_f == NULL)
		return;
	if (wsf_recv(s->up_f, bufferevent_get_input(bev)) != 0) {
		sock_end(s, WSF_INTERNAL, "out of memory");
		return;
	}
	if (!wsf_reading(s->up_f) && !s->up_closed && s->state == WS_OPEN)
		/* the provider's frames broke the protocol */
		sock_end(s, WSF_PROTOCOL_ERROR, "the provider sent an invalid frame");
	flush(s);
}

static void on_down_read(struct bufferevent *bev, void *arg)
{
	struct ws_sock *s = arg;
	if (s->state == WS_DONE)
		return;
	if (wsf_recv(s->down_f, bufferevent_get_input(bev)) != 0) {
		sock_end(s, WSF_INTERNAL, "out of memory");
		return;
	}
	if (!wsf_reading(s->down_f) && !s->down_closed && s->state != WS_CLOSING) {
		/* wslay queued its close (1002, 1007, 1009): send it to learn its
		 * code, and the provider is told the client went away */
		wsf_send(s->down_f, bufferevent_get_output(s->down));
		uint16_t code = wsf_close_code(s->down_f);
		s->down_closed = true;
		sock_end(s, code ? code : WSF_PROTOCOL_ERROR,
		         code == WSF_TOO_BIG        ? "message over limits.max_body_bytes"
		         : code == WSF_INVALID_DATA ? "text that is not UTF-8"
		                                    : "invalid frame");
		return;
	}
	flush(s);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	flush(arg);
}

static void on_down_event(struct bufferevent *bev, short what, void *arg)
{
	struct ws_sock *s = arg;
	(void)bev;
	if (what & BEV_EVENT_TIMEOUT) {
		/* Bytes waited for the client for client_timeout_s: what waits
		 * for it is dropped, and the provider is told it went away (its
		 * close handshake goes on, up to CLOSE_LINGER_MS). */
		bufferevent_disable(s->down, EV_READ | EV_WRITE);
		evbuffer_drain(bufferevent_get_output(s->down), (size_t)-1);
		if (s->down_wire != NULL) {
			bufferevent_disable(s->down_wire, EV_READ | EV_WRITE);
			evbuffer_drain(bufferevent_get_output(s->down_wire), (size_t)-1);
		}
		s->down_closed = true;
		if (s->up_f != NULL && !wsf_close_sent(s->up_f))
			wsf_close(s->up_f, WSF_GOING_AWAY, "the client stopped reading");
		sock_end(s, WSF_POLICY, "the client stopped reading");
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		s->down_closed = true;
		if (s->state != WS_CLOSING && s->state != WS_DONE)
			sock_end(s, WSF_GOING_AWAY, "client connection closed");
		if (s->state == WS_CLOSING)
			sock_finish(s);
	}
}

/* ---- the upstream: connect, handshake ---- */

static void on_up_event(struct bufferevent *bev, short what, void *arg);

static int on_hdr_field(http_parser *p, const char *at, size_t len)
{
	struct ws_sock *s = p->data;
	if (s->in_value || s->n_hdrs == 0) {
		if (s->n_hdrs == UP_HEADERS_MAX) {
			s->head_over = true;
			return -1;
		}
		if (s->n_hdrs > 0)
			evbuffer_add(s->head, "", 1);
		s->hdr_name[s->n_hdrs++] = evbuffer_get_length(s->head);
		s->in_value = false;
	}
	evbuffer_add(s->head, at, len);
	return 0;
}

static int on_hdr_value(http_parser *p, const char *at, size_t len)
{
	struct ws_sock *s = p->data;
	if (!s->in_value) {
		evbuffer_add(s->head, "", 1);
		s->hdr_value[s->n_hdrs - 1] = evbuffer_get_length(s->head);
		s->in_value = true;
	}
	evbuffer_add(s->head, at, len);
	if (evbuffer_get_length(s->head) > HEAD_CAP) {
		s->head_over = true;
		return -1;
	}
	return 0;
}

static int on_head_done(http_parser *p)
{
	struct ws_sock *s = p->data;
	evbuffer_add(s->head, "", 1);
	s->head_done = true;
	s->status = p->status_code;
	return s->status == 101 ? 2 : 0; /* 101: no body (the socket follows) */
}

static int on_refusal_body(http_parser *p, const char *at, size_t len)
{
	struct ws_sock *s = p->data;
	size_t have = evbuffer_get_length(s->refusal);
	if (have < REFUSAL_BODY_CAP)
		evbuffer_add(s->refusal, at,
		             len < REFUSAL_BODY_CAP - have ? len : REFUSAL_BODY_CAP - have);
	return 0;
}

static int on_refusal_done(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings answer_settings = {
    .on_header_field = on_hdr_field,
    .on_header_value = on_hdr_value,
    .on_headers_complete = on_head_done,
    .on_body = on_refusal_body,
    .on_message_complete = on_refusal_done,
};

/* The answer's fields, pointing into s->head (pulled up). */
static size_t answer_fields(struct ws_sock *s, struct hhdr *h, size_t cap)
{
	const char *base = (const char *)evbuffer_pullup(s->head, -1);
	size_t n = 0;
	for (size_t i = 0; i < s->n_hdrs && n < cap; i++) {
		const char *name = base + s->hdr_name[i];
		const char *value = s->hdr_value[i] ? base + s->hdr_value[i] : "";
		h[n++] = (struct hhdr){name, strlen(name), value, strlen(value)};
	}
	return n;
}

static const char *field(const struct hhdr *h, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(h[i].name, name) == 0)
			return h[i].value;
	return NULL;
}

/* What the answer's head teaches the opening's lane; then its slot goes
 * back (capacity: held as for any 429). */
static void open_answered(struct ws_sock *s, const struct hhdr *h, size_t n)
{
	struct wsrelay *w = s->w;
	int64_t now = now_ms();
	struct rlh_header rh[UP_HEADERS_MAX];
	for (size_t i = 0; i < n; i++)
		rh[i] = (struct rlh_header){h[i].name, h[i].value, h[i].value_len};
	struct rlh_result rlh;
	rlh_parse(s->prov->dialect, rh, n, clock_wall_ms(), &rlh);
	int status = s->status == 101 ? 200 : s->status;
	struct retry_head_verdict hv = retry_verdict_head(status, &rlh, false);
	lanes_headers(w->lanes, &s->open_ticket, status, &rlh, &hv, false, now);
	enum retry_lane_outcome out = hv.capacity        ? RETRY_LANE_CAPACITY
	                              : s->status >= 500 ? RETRY_LANE_TRANSIENT
	                                                 : RETRY_LANE_SUCCESS;
	struct sched_lane *lane = s->open_ticket.lane;
	struct lane_change ch;
	lanes_complete(w->lanes, &s->open_ticket, out, hv.hold_ms > 0, hv.hold_ms, now, &ch);
	s->open_submitted = false;
	lanes_pump(w->lanes, lane);
}

/* The provider refused the upgrade after pacerd answered the client's
 * itself: an error event in the provider's shape ({"type":"error",
 * "status":N,"error":{…}}, the error object of its body when it has one),
 * then a close (refuse's codes). */
static void refusal_inside(struct ws_sock *s)
{
	size_t blen = evbuffer_get_length(s->refusal);
	json_t *body =
	    blen ? json_loadb((const char *)evbuffer_pullup(s->refusal, -1), blen, 0, NULL) : NULL;
	json_t *err = json_object_get(body, "error");
	json_t *ev =
	    json_is_object(err)
	        ? json_pack("{s:s,s:i,s:O}", "type", "error", "status", s->status, "error", err)
	        : json_pack("{s:s,s:i,s:{s:s,s:s,s:s}}", "type", "error", "status", s->status,
	                    "error", "type", "pacer_error", "code", "upgrade_refused", "message",
	                    "the provider refused the WebSocket");
	char *text = ev != NULL ? json_dumps(ev, JSON_COMPACT) : NULL;
	if (text != NULL)
		wsf_queue(s->down_f, true, text, strlen(text));
	free(text);
	json_decref(ev);
	json_decref(body);
	s->w->refused++;
	sock_end(s,
	         s->status == 429 || s->status == 503 ? WSF_TRY_AGAIN
	         : s->status >= 500                   ? WSF_INTERNAL
	                                              : WSF_POLICY,
	         "the provider refused the WebSocket");
}

/* The provider refused the upgrade: its answer goes to the client as it is
 * (status, end-to-end fields, body up to REFUSAL_BODY_CAP), or inside the
 * socket when pacerd answered the client first. */
static void relay_refusal(struct ws_sock *s)
{
	struct hhdr h[UP_HEADERS_MAX];
	size_t n = answer_fields(s, h, UP_HEADERS_MAX);
	open_answered(s, h, n);
	struct log_line l;
	if (sock_log_begin(&l, LOG_INFO, "request", s)) {
		log_str(&l, "method", "GET");
		log_int(&l, "status", s->status);
		log_str(&l, "error", "upgrade_refused");
		log_end(&l);
	}
	if (s->down_f != NULL) {
		refusal_inside(s);
		return;
	}
	struct hhdr out[UP_HEADERS_MAX];
	size_t k = 0;
	const char *conn = field(h, n, "connection");
	for (size_t i = 0; i < n; i++)
		if (hdr_forward_response(h[i].name, conn) &&
		    strcasecmp(h[i].name, "content-length") && !wsh_hop_field(h[i].name))
			out[k++] = h[i];
	s->w->refused++;
	struct hreq *r = s->client;
	s->client = NULL;
	if (r != NULL) {
		hreq_set_events(r, NULL, NULL);
		size_t blen = evbuffer_get_length(s->refusal);
		const char *body = blen ? (const char *)evbuffer_pullup(s->refusal, -1) : "";
		hreq_respond(r, s->status, out, k, body, blen);
	}
	sock_finish(s);
}

/* The client's connection taken over from the HTTP layer (in a terminated
 * tunnel, its TLS filter) and its 101: pacerd's accept value, with the
 * provider's other end-to-end fields when it answered first (h, n; conn:
 * its Connection field), none when pacerd answers first. False when the
 * socket ended instead. */
static bool client_upgrade(struct ws_sock *s, const struct hhdr *h, size_t n, const char *conn)
{
	struct wsrelay *w = s->w;
	const struct config *cfg = s->cref->cfg;
	bool gone;
	struct bufferevent *down = hreq_take_over(s->client, &gone);
	if (down == NULL) {
		if (gone) {
			s->client = NULL;
			sock_finish(s);
		} else {
			refuse_plain(s, 503, "out_of_memory", "pacerd is out of memory");
		}
		return false;
	}
	s->client = NULL;
	s->down = down;
	s->down_wire = bufferevent_get_underlying(down);
	s->counted_open = true; /* the teardown uncounts it */
	w->n_open++;
	w->opened++;
	s->t_start = now_ms();
	s->down_f =
	    wsf_new(WSF_SERVER, (size_t)cfg->limits.max_body_bytes, &client_frame_events, s);
	if (s->down_wire != NULL)
		s->down_wire_cb =
		    evbuffer_add_cb(bufferevent_get_output(s->down_wire), on_wire_out, s);
	if (s->down_f == NULL || (s->down_wire != NULL && s->down_wire_cb == NULL)) {
		sock_finish(s);
		return false;
	}
	char mine[WSH_ACCEPT_LEN + 1];
	wsh_accept(s->client_key, mine);
	struct evbuffer *o = bufferevent_get_output(s->down);
	evbuffer_add_printf(o,
	                    "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n"
	                    "connection: Upgrade\r\nsec-websocket-accept: %s\r\n",
	                    mine);
	for (size_t i = 0; i < n; i++)
		if (hdr_forward_response(h[i].name, conn) && !wsh_hop_field(h[i].name))
			evbuffer_add_printf(o, "%s: %s\r\n", h[i].name, h[i].value);
	evbuffer_add(o, "\r\n", 2);
	bufferevent_setcb(s->down, on_down_read, on_write, on_down_event, s);
	bufferevent_setwatermark(s->down, EV_READ, 0, READ_HIGH);
	bufferevent_setwatermark(s->down, EV_WRITE, OUT_LOW, 0);
	/* A client that takes nothing for client_timeout_s while bytes wait
	 * for it is cut: the socket's timer (a TLS filter's own would run with
	 * nothing waiting). */
	struct timeval wt = {(time_t)cfg->limits.client_timeout_s, 0};
	bufferevent_set_timeouts(s->down_wire != NULL ? s->down_wire : s->down, NULL, &wt);
	bufferevent_enable(s->down, EV_READ | EV_WRITE);
	struct log_line l;
	if (sock_log_begin(&l, LOG_INFO, "websocket_open", s)) {
		if (s->model[0] != '\0')
			log_str(&l, "model", s->model);
		if (!s->early)
			log_int(&l, "queue_ms", now_ms() - s->open_ticket.item.arrived_ms);
		else
			log_bool(&l, "early", true);
		log_end(&l);
	}
	kick(s); /* frames that came behind the head */
	return true;
}

/* The provider's socket is open: messages both ways, what the client sent
 * meanwhile first. */
static void up_open(struct ws_sock *s)
{
	const struct config *cfg = s->cref->cfg;
	s->up_f = wsf_new(WSF_CLIENT, (size_t)cfg->limits.max_body_bytes, &up_frame_events, s);
	if (s->up_f == NULL) {
		sock_end(s, WSF_INTERNAL, "out of memory");
		return;
	}
	s->state = WS_OPEN;
	s->last_up_ms = now_ms();
	if (s->timer_on) {
		evtimer_del(&s->timer);
		s->timer_on = false;
	}
	bufferevent_setcb(s->up, on_up_read, on_write, on_up_event, s);
	bufferevent_setwatermark(s->up, EV_READ, 0, READ_HIGH);
	bufferevent_setwatermark(s->up, EV_WRITE, OUT_LOW, 0);
	bufferevent_enable(s->up, EV_READ | EV_WRITE);
	kick(s); /* the provider's first frames, behind its 101 */
	pump_out(s);
}

/* The provider accepted: the client's 101 (unless pacerd gave it first),
 * then messages both ways. */
static void upstream_accepted(struct ws_sock *s)
{
	struct hhdr h[UP_HEADERS_MAX];
	size_t n = answer_fields(s, h, UP_HEADERS_MAX);
	char want[WSH_ACCEPT_LEN + 1];
	wsh_accept(s->up_key, want);
	const char *accept = field(h, n, "sec-websocket-accept");
	open_answered(s, h, n);
	if (accept == NULL || strcmp(accept, want) != 0) {
		sock_end(s, WSF_PROTOCOL_ERROR,
		         "the provider's 101 has a wrong Sec-WebSocket-Accept");
		return;
	}
	if (s->client != NULL && !client_upgrade(s, h, n, field(h, n, "connection")))
		return;
	up_open(s);
}

static void on_handshake_read(struct bufferevent *bev, void *arg)
{
	struct ws_sock *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	while (evbuffer_get_length(in) > 0 && s->state == WS_HANDSHAKE) {
		struct evbuffer_iovec v;
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		size_t took =
		    http_parser_execute(&s->parser, &answer_settings, v.iov_base, v.iov_len);
		enum http_errno e = HTTP_PARSER_ERRNO(&s->parser);
		evbuffer_drain(in, took);
		if (s->head_done && s->status == 101) {
			/* what follows the head is the provider's first frames */
			upstream_accepted(s);
			return;
		}
		if (e == HPE_PAUSED) {
			relay_refusal(s);
			return;
		}
		if (e != HPE_OK || s->head_over) {
			sock_end(s, WSF_PROTOCOL_ERROR,
			         "the provider's answer to the upgrade is not HTTP");
			return;
		}
		if (took < v.iov_len)
			break;
	}
}

static void on_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct ws_sock *s = arg;
	if (what & BEV_EVENT_CONNECTED) {
		s->state = WS_HANDSHAKE;
		bufferevent_write_buffer(bev, s->up_head);
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return;
	}
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	if (s->state == WS_HANDSHAKE && s->head_done && s->status != 101) {
		/* a refusal whose body ends with the connection */
		http_parser_execute(&s->parser, &answer_settings, NULL, 0);
		relay_refusal(s);
		return;
	}
	s->up_closed = true;
	if (s->state < WS_OPEN) {
		sock_end(s, WSF_INTERNAL, "cannot reach the provider's WebSocket");
		return;
	}
	if (s->state == WS_OPEN)
		sock_end(s, WSF_INTERNAL, "the provider closed without a close frame");
	else
		flush(s);
}

/* The upstream URL's parts (libcurl's URL parser). */
static bool url_parts(const char *url, bool *tls, char *host, size_t host_cap, int *port,
                      char **path)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *h = NULL, *p = NULL, *pq = NULL, *q = NULL;
	bool ok = u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	          curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	          curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
	          curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK &&
	          curl_url_get(u, CURLUPART_PATH, &pq, 0) == CURLUE_OK;
	if (ok) {
		*tls = strcasecmp(scheme, "https") == 0;
		size_t hl = strlen(h);
		/* an IPv6 literal comes in brackets */
		const char *hs = h;
		if (hl >= 2 && h[0] == '[') {
			hs = h + 1;
			hl -= 2;
		}
		ok = hl < host_cap;
		if (ok) {
			memcpy(host, hs, hl);
			host[hl] = '\0';
		}
		*port = (int)strtol(p, NULL, 10);
		curl_url_get(u, CURLUPART_QUERY, &q, 0);
		size_t n = strlen(pq) + (q != NULL ? strlen(q) + 1 : 0) + 1;
		*path = malloc(n);
		if (*path == NULL)
			ok = false;
		else
			snprintf(*path, n, "%s%s%s", pq, q != NULL ? "?" : "", q != NULL ? q : "");
	}
	curl_free(scheme);
	curl_free(h);
	curl_free(p);
	curl_free(pq);
	curl_free(q);
	curl_url_cleanup(u);
	return ok;
}

static SSL_CTX *client_tls(const struct provider_conf *prov)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (prov->tls.verify) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		int ok = prov->tls.ca_file != NULL && prov->tls.ca_file[0] != '\0'
		             ? SSL_CTX_load_verify_locations(ctx, prov->tls.ca_file, NULL)
		             : SSL_CTX_set_default_verify_paths(ctx);
		if (ok != 1) {
			SSL_CTX_free(ctx);
			return NULL;
		}
	}
	return ctx;
}

/* The opening's lane let it go: connect to the provider. */
static void on_open_dispatch(struct lane_ticket *t)
{
	struct ws_sock *s = (struct ws_sock *)((char *)t - offsetof(struct ws_sock, open_ticket));
	struct wsrelay *w = s->w;
	bool tls;
	if (s->state != WS_OPENING) { /* ended meanwhile: its slot goes back */
		struct lane_change ch;
		lanes_complete(w->lanes, t, RETRY_LANE_SUCCESS, false, 0, now_ms(), &ch);
		s->open_submitted = false;
		return;
	}
	char host[256];
	int port;
	char *path = NULL;
	if (!url_parts(s->path, &tls, host, sizeof(host), &port, &path)) {
		free(path);
		struct lane_change ch;
		lanes_complete(w->lanes, t, RETRY_LANE_SUCCESS, false, 0, now_ms(), &ch);
		s->open_submitted = false;
		refuse(s, 502, "upstream_unreachable", "the provider's upstream URL is not usable");
		return;
	}
	s->state = WS_CONNECTING;
	/* pacerd's own GET: the request line and Host are written here. */
	struct evbuffer *hb = s->up_head;
	struct evbuffer *fields = evbuffer_new();
	if (fields != NULL) {
		evbuffer_add_buffer(fields, hb);
		evbuffer_add_printf(hb, "GET %s HTTP/1.1\r\nhost: %s", path, host);
		if ((tls && port != 443) || (!tls && port != 80))
			evbuffer_add_printf(hb, ":%d", port);
		evbuffer_add(hb, "\r\n", 2);
		evbuffer_add_buffer(hb, fields);
		evbuffer_free(fields);
	}
	free(path);
	if (tls) {
		s->ssl_ctx = client_tls(s->prov);
		SSL *ssl = s->ssl_ctx != NULL ? SSL_new(s->ssl_ctx) : NULL;
		if (ssl != NULL) {
			SSL_set_tlsext_host_name(ssl, host);
			if (s->prov->tls.verify)
				SSL_set1_host(ssl, host);
			s->up = bufferevent_openssl_socket_new(
			    w->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
			if (s->up == NULL)
				SSL_free(ssl);
		}
	} else {
		s->up = bufferevent_socket_new(w->base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (s->up == NULL) {
		struct lane_change ch;
		lanes_complete(w->lanes, t, RETRY_LANE_SUCCESS, false, 0, now_ms(), &ch);
		s->open_submitted = false;
		refuse(s, 503, "out_of_memory", "pacerd is out of memory");
		return;
	}
	lanes_sent(w->lanes, t);
	http_parser_init(&s->parser, HTTP_RESPONSE);
	s->parser.data = s;
	bufferevent_setcb(s->up, on_handshake_read, NULL, on_up_event, s);
	arm(s, (int64_t)(s->prov->timeouts.connect_s + s->prov->timeouts.first_byte_s) * 1000);
	if (bufferevent_socket_connect_hostname(s->up, w->dns, AF_UNSPEC, host, port) != 0) {
		struct lane_change ch;
		lanes_complete(w->lanes, t, RETRY_LANE_TRANSIENT, false, 0, now_ms(), &ch);
		s->open_submitted = false;
		sock_end(s, WSF_INTERNAL, "cannot connect to the provider");
	}
}

static void on_open_refuse(struct lane_ticket *t, const struct lane_refusal_info *info)
{
	struct ws_sock *s = (struct ws_sock *)((char *)t - offsetof(struct ws_sock, open_ticket));
	s->open_submitted = false;
	struct refusal r;
	refusal_of_lane(info, now_ms() - s->t_start, now_ms() - s->t_start, &r);
	refuse(s, r.status, r.code, r.message);
}

static const struct lanes_events open_events = {.dispatch = on_open_dispatch,
                                                .refuse = on_open_refuse};

/* ---- the client before the upgrade ---- */

static void on_client_gone(void *ctx)
{
	struct ws_sock *s = ctx;
	s->client = NULL;
	sock_finish(s);
}

static const struct hreq_events hreq_client_events = {.gone = on_client_gone};

bool wsrelay_wanted(const struct hreq *r, const char *connection)
{
	return connection != NULL && hdr_in_connection(connection, "upgrade") &&
	       strcmp(hreq_method(r), "GET") == 0 &&
	       wsh_wants_upgrade(hreq_header(r, "upgrade"), connection);
}

/* The model a query names (?model=NAME: Realtime's). */
static void query_model(const char *path, size_t len, char *out, size_t cap)
{
	const char *q = memchr(path, '?', len);
	out[0] = '\0';
	while (q != NULL && (size_t)(q - path) < len) {
		q++;
		size_t rest = len - (size_t)(q - path);
		if (rest > 6 && memcmp(q, "model=", 6) == 0) {
			size_t n = strcspn(q + 6, "&#");
			if (n > rest - 6)
				n = rest - 6;
			for (size_t i = 0; i < n; i++)
				if (!(q[6 + i] == '-' || q[6 + i] == '.' || q[6 + i] == '_' ||
				      q[6 + i] == ':' || (q[6 + i] >= '0' && q[6 + i] <= '9') ||
				      (q[6 + i] >= 'a' && q[6 + i] <= 'z') ||
				      (q[6 + i] >= 'A' && q[6 + i] <= 'Z')))
					return; /* escaped or odd: not a lane's name */
			copy_str(out, cap, q + 6, n);
			return;
		}
		q = memchr(q, '&', rest);
	}
}

/* The opening is a request of its lane (the socket's model), at no token
 * cost. */
static void open_submit(struct ws_sock *s)
{
	struct wsrelay *w = s->w;
	int64_t now = now_ms();
	s->open_asked = true;
	s->open_ticket.ev = &open_events;
	struct lane_request lr = {
	    .key_hash = s->key_hash[0] ? s->key_hash : NULL,
	    .model = s->model[0] ? s->model : NULL,
	    .model_len = strlen(s->model),
	};
	s->open_submitted = true;
	const struct plan_conf *plan = lanes_find(w->lanes, &s->open_ticket, s->prov, &lr, now);
	if (plan == NULL)
		return; /* refused */
	struct sched_request rq = {.agent = s->agent_id, .flow = s->flow, .priority = s->priority};
	lanes_submit(w->lanes, &s->open_ticket, &rq, -1,
	             now + (int64_t)plan->retry.deadline_s * 1000, now);
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	struct ws_sock *s = arg;
	(void)fd;
	(void)what;
	if (s->state == WS_DONE)
		return;
	if (s->client != NULL) {
		if (s->early && s->state == WS_OPENING)
			client_upgrade(s, NULL, 0, NULL);
		return;
	}
	if (s->down != NULL && evbuffer_get_length(bufferevent_get_input(s->down)) > 0)
		on_down_read(s->down, s);
	if (s->state != WS_DONE && s->up_f != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->up)) > 0)
		on_up_read(s->up, s);
	flush(s);
}

void wsrelay_start(struct wsrelay *w, struct hreq *r, const struct exchange_intake *in)
{
	const char *version = hreq_header(r, "sec-websocket-version");
	const char *key = hreq_header(r, "sec-websocket-key");
	if (version == NULL || strcmp(version, "13") != 0) {
		struct hhdr h = {"sec-websocket-version", 21, "13", 2};
		hreq_error(r, 426, "upgrade_required", "only WebSocket version 13 is spoken", &h,
		           1);
		return;
	}
	if (!wsh_key_valid(key)) {
		hreq_error(r, 400, "bad_request", "Sec-WebSocket-Key is not 16 bytes in base64",
		           NULL, 0);
		return;
	}
	if (w->closing) {
		hreq_error(r, 503, "shutting_down", "pacerd is shutting down", NULL, 0);
		return;
	}
	struct ws_sock *s = calloc(1, sizeof(*s));
	char url[4096];
	int ulen = route_upstream_url(&in->route, url, sizeof(url));
	if (s == NULL || ulen < 0 || (s->path = strdup(url)) == NULL ||
	    (s->up_head = evbuffer_new()) == NULL || (s->head = evbuffer_new()) == NULL ||
	    (s->refusal = evbuffer_new()) == NULL || wsh_new_key(s->up_key) != 0) {
		if (s != NULL) {
			s->cref = config_ref_get(in->cref);
			s->w = w;
			sock_free(s);
		}
		hreq_error(r, 503, "out_of_memory", "pacerd is out of memory", NULL, 0);
		return;
	}
	s->w = w;
	s->cref = config_ref_get(in->cref);
	s->prov = in->route.provider;
	s->client = r;
	s->state = WS_OPENING;
	s->t_start = now_ms();
	list_init(&s->outq);
	list_init(&s->flight);
	evtimer_assign(&s->timer, w->base, on_timer, s);
	event_assign(&s->kick, w->base, -1, 0, on_kick, s);
	copy_str(s->request_id, sizeof(s->request_id), hreq_id(r), strlen(hreq_id(r)));
	copy_str(s->client_key, sizeof(s->client_key), key, strlen(key));
	if (in->key_hash != NULL)
		memcpy(s->key_hash, in->key_hash, KEYID_HEX + 1);
	keyid_name(in->key_hash, s->key_id);
	if (in->agent != NULL)
		copy_str(s->agent, sizeof(s->agent), in->agent, strlen(in->agent));
	s->agent_id = in->agent_id;
	s->flow = in->flow;
	s->priority = in->priority;
	query_model(in->route.path, in->route.path_len, s->model, sizeof(s->model));
	size_t plen = strcspn(in->route.path, "?");
	s->tunnel = hreq_tunnel_host(r) != NULL;
	s->realtime = plen >= 9 && memcmp(in->route.path + plen - 9, "/realtime", 9) == 0;
	/* pacerd's GET upstream: the client's end-to-end fields (its key among
	 * them), with a key and a version of pacerd's own; no extensions. */
	evbuffer_add_printf(s->up_head,
	                    "upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: %s\r\n"
	                    "sec-websocket-version: 13\r\n",
	                    s->up_key);
	const char *conn = in->headers->value[IF_CONNECTION];
	for (size_t i = 0; i < hreq_n_headers(r); i++) {
		struct hhdr f;
		hreq_header_at(r, i, &f);
		if (hdr_forward_request(f.name, conn) && !wsh_hop_field(f.name))
			evbuffer_add_printf(s->up_head, "%s: %s\r\n", f.name, f.value);
	}
	evbuffer_add(s->up_head, "\r\n", 2);
	list_insert_tail(&w->live, &s->link);
	w->n_live++;
	hreq_set_events(r, &hreq_client_events, s);
	/* No model named, Responses (not Realtime, whose server speaks first),
	 * no subprotocol to agree on: pacerd answers the upgrade itself, on
	 * the next loop turn (not inside the HTTP layer's call), and the
	 * provider's socket opens in the lane of the first message's model. */
	s->early =
	    s->model[0] == '\0' && !s->realtime && hreq_header(r, "sec-websocket-protocol") == NULL;
	if (s->early)
		kick(s);
	else
		open_submit(s);
}

/* ---- the set ---- */

struct wsrelay *wsrelay_new(struct event_base *base, struct lanes *lanes, struct config_ref *cref,
                            char *err, size_t errlen)
{
	struct wsrelay *w = calloc(1, sizeof(*w));
	if (w == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->base = base;
	w->lanes = lanes;
	w->cref = config_ref_get(cref);
	list_init(&w->live);
	list_init(&w->reaped);
	w->reap = event_new(base, -1, 0, on_reap, w);
	w->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	if (w->dns == NULL) /* no resolv.conf: names fail, addresses still work */
		w->dns = evdns_base_new(base, 0);
	if (w->reap == NULL || w->dns == NULL) {
		snprintf(err, errlen, "out of memory");
		wsrelay_free(w);
		return NULL;
	}
	return w;
}

void wsrelay_free(struct wsrelay *w)
{
	if (w == NULL)
		return;
	while (!list_empty(&w->live)) {
		struct ws_sock *s = LIST_ITEM(list_first(&w->live), struct ws_sock, link);
		sock_finish(s);
	}
	on_reap(-1, 0, w);
	if (w->reap != NULL)
		event_free(w->reap);
	if (w->dns != NULL)
		evdns_base_free(w->dns, 0);
	config_ref_put(w->cref);
	free(w);
}

void wsrelay_reconfigure(struct wsrelay *w, struct config_ref *cref)
{
	struct config_ref *old = w->cref;
	w->cref = config_ref_get(cref);
	config_ref_put(old);
}

void wsrelay_shutdown(struct wsrelay *w)
{
	w->closing = true;
	struct list *it, *next;
	LIST_FOR_EACH_SAFE(it, next, &w->live) {
		struct ws_sock *s = LIST_ITEM(it, struct ws_sock, link);
		if (s->down_f == NULL)
			refuse_plain(s, 503, "shutting_down", "pacerd is shutting down");
		else if (s->state != WS_CLOSING && s->n_flight == 0)
			sock_end(s, WSF_GOING_AWAY, "pacerd is shutting down");
	}
}

void wsrelay_abort_all(struct wsrelay *w)
{
	w->closing = true;
	while (!list_empty(&w->live)) {
		struct ws_sock *s = LIST_ITEM(list_first(&w->live), struct ws_sock, link);
		if (s->down_f == NULL) {
			refuse_plain(s, 503, "shutting_down", "pacerd is shutting down");
			continue;
		}
		sock_end(s, WSF_GOING_AWAY, "pacerd is shutting down");
		sock_finish(s); /* the close frames go as far as one write takes them */
	}
}

size_t wsrelay_live(const struct wsrelay *w)
{
	return w->n_live;
}

void wsrelay_get_stats(const struct wsrelay *w, struct wsrelay_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->open = w->n_open;
	st->opening = 0;
	st->opened = w->opened;
	st->refused = w->refused;
	st->turns = w->turns;
	st->resent = w->resent;
	st->refusals = w->refusals;
	const struct list *it;
	for (it = w->live.next; it != &w->live; it = it->next) {
		const struct ws_sock *s = LIST_ITEM(it, struct ws_sock, link);
		if (!s->counted_open)
			st->opening++;
		st->turns_in_flight += s->n_flight;
		st->turns_waiting += s->n_waiting;
	}
}

const struct wsrelay_turn_row *wsrelay_turn_rows(const struct wsrelay *w, size_t *n)
{
	*n = w->n_rows;
	return w->rows;
}

void wsrelay_each(const struct wsrelay *w,
                  void (*fn)(void *arg, const char *id, const char *provider, const char *key,
                             const char *model, uint64_t turns, size_t in_flight, size_t waiting,
                             int64_t age_ms),
                  void *arg)
{
	int64_t now = now_ms();
	const struct list *it;
	for (it = w->live.next; it != &w->live; it = it->next) {
		const struct ws_sock *s = LIST_ITEM(it, struct ws_sock, link);
		if (s->counted_open)
			fn(arg, s->request_id, s->prov->name, s->key_id, s->model, s->turns,
			   s->n_flight, s->n_waiting, now - s->t_start);
	}
}
