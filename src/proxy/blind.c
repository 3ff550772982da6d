/* SPDX-License-Identifier: Apache-2.0 */
/* blind — tunnels passed through untouched. See blind.h. */
#include "proxy/blind.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/list.h"
#include "core/log.h"

struct tunnel {
	struct blind *b;
	struct hreq *client; /* until the take-over; NULL after, or once gone */
	struct bufferevent *up, *down;
	char request_id[HREQ_ID_MAX + 1];
	char host[264];
	unsigned port;
	int64_t last_ms; /* the last byte either way */
	uint64_t bytes_up, bytes_down;
	struct list link;
};

struct blind {
	struct event_base *base;
	struct evdns_base *dns;
	struct list live;
	size_t n, max;
	unsigned idle_s;
	uint64_t opened, failed;
};

static void tunnel_free(struct tunnel *t)
{
	if (t->up != NULL)
		bufferevent_free(t->up);
	if (t->down != NULL)
		bufferevent_free(t->down);
	list_remove(&t->link);
	t->b->n--;
	free(t);
}

static void log_end_of(const struct tunnel *t, const char *why)
{
	struct log_line l;
	if (log_begin(&l, LOG_DEBUG, "tunnel_closed")) {
		log_str(&l, "request_id", t->request_id);
		log_str(&l, "host", t->host);
		log_int(&l, "port", t->port);
		log_str(&l, "mode", "blind");
		log_int(&l, "bytes_up", (long long)t->bytes_up);
		log_int(&l, "bytes_down", (long long)t->bytes_down);
		log_str(&l, "reason", why);
		log_end(&l);
	}
}

/* ---- before the take-over: the client is an hreq ---- */

static void on_client_gone(void *ctx)
{
	struct tunnel *t = ctx;
	t->client = NULL;
	tunnel_free(t); /* the pending connect or lookup is cancelled with up */
}

static const struct hreq_events client_events = {.drained = NULL, .gone = on_client_gone};

/* ---- after: bytes both ways ---- */

static struct bufferevent *other(struct tunnel *t, struct bufferevent *bev)
{
	return bev == t->up ? t->down : t->up;
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct bufferevent *to = other(t, bev);
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);
	if (to == NULL) { /* the other side ended: nobody to give it to */
		evbuffer_drain(in, n);
		return;
	}
	if (bev == t->up)
		t->bytes_down += n;
	else
		t->bytes_up += n;
	t->last_ms = clock_now_ms();
	evbuffer_add_buffer(bufferevent_get_output(to), in);
	if (evbuffer_get_length(bufferevent_get_output(to)) >= BLIND_OUT_CAP) {
		/* The reader on the other side is slower: stop reading here
		 * until its output drains to half (the write watermark). */
		bufferevent_disable(bev, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, BLIND_OUT_CAP / 2, 0);
	}
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct bufferevent *from = other(t, bev);
	if (from == NULL) {
		/* The other side is gone: this was the last of its bytes. */
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
			log_end_of(t, "closed");
			tunnel_free(t);
		}
		return;
	}
	t->last_ms = clock_now_ms();
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_enable(from, EV_READ);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;
	if (what & BEV_EVENT_TIMEOUT) {
		int64_t idle = clock_now_ms() - t->last_ms;
		if (idle < (int64_t)t->b->idle_s * 1000 && other(t, bev) != NULL) {
			/* This side was quiet, the other was not: go on. */
			bufferevent_enable(bev, EV_READ);
			return;
		}
		log_end_of(t, "idle");
		tunnel_free(t);
		return;
	}
	/* EOF or an error on one side: what it sent reaches the other side,
	 * then the other side is closed too. */
	struct bufferevent *to = other(t, bev);
	if (to != NULL) /* what the ending side sent last, not read yet */
		evbuffer_add_buffer(bufferevent_get_output(to), bufferevent_get_input(bev));
	if (bev == t->up)
		t->up = NULL;
	else
		t->down = NULL;
	bufferevent_free(bev);
	if (to != NULL) {
		if (evbuffer_get_length(bufferevent_get_output(to)) > 0) {
			bufferevent_disable(to, EV_READ);
			bufferevent_setwatermark(to, EV_WRITE, 0, 0);
			return; /* on_write frees the tunnel once flushed */
		}
	}
	log_end_of(t, (what & BEV_EVENT_EOF) ? "closed" : "error");
	tunnel_free(t);
}

/* False when the take-over failed (answered, or the connection is gone):
 * the caller frees the tunnel. */
static bool start_copying(struct tunnel *t)
{
	struct hreq *r = t->client;
	bool gone;
	t->down = hreq_take_over(r, &gone);
	if (t->down == NULL) {
		t->client = NULL;
		if (!gone) {
			hreq_set_events(r, NULL, NULL);
			hreq_close_after(r);
			hreq_error(r, 503, "out_of_memory", "pacerd is out of memory", NULL, 0);
		}
		return false;
	}
	t->client = NULL;
	struct evbuffer *pending = bufferevent_get_input(t->down);
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	bufferevent_write(t->down, ok, sizeof(ok) - 1);
	t->bytes_up += evbuffer_get_length(pending);
	bufferevent_write_buffer(t->up, pending); /* a ClientHello sent early */
	struct timeval tv = {(time_t)t->b->idle_s, 0};
	bufferevent_set_timeouts(t->up, &tv, NULL);
	bufferevent_set_timeouts(t->down, &tv, NULL);
	bufferevent_setcb(t->up, on_read, on_write, on_event, t);
	bufferevent_setcb(t->down, on_read, on_write, on_event, t);
	bufferevent_enable(t->up, EV_READ | EV_WRITE);
	bufferevent_enable(t->down, EV_READ | EV_WRITE);
	t->last_ms = clock_now_ms();
	t->b->opened++;
	return true;
}

static void on_connect_event(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;
	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		if (!start_copying(t))
			tunnel_free(t);
		return;
	}
	/* The lookup or the connect failed: a 502 the client can read. */
	char msg[400];
	int dns = bufferevent_socket_get_dns_error(t->up);
	snprintf(msg, sizeof(msg), "the tunnel to %s:%u could not be opened: %s", t->host, t->port,
	         dns != 0 ? evutil_gai_strerror(dns)
	                  : evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	t->b->failed++;
	struct hreq *r = t->client;
	t->client = NULL;
	hreq_set_events(r, NULL, NULL);
	hreq_close_after(r);
	hreq_error(r, 502, "tunnel_unreachable", msg, NULL, 0);
	log_end_of(t, "unreachable");
	tunnel_free(t);
}

/* The resolver, made at the first blind tunnel: most pacerds never open one
 * and need hold no UDP socket for it, and one whose /etc/resolv.conf names no
 * nameserver (a container without a network) must still start. It reads
 * /etc/resolv.conf and /etc/hosts then, once (two small local files). A
 * resolv.conf that cannot be read or names no nameserver leaves libevent's
 * default, 127.0.0.1: a tunnel then fails to resolve, a 502 the client can
 * read. NULL: out of memory. */
static struct evdns_base *resolver(struct blind *b)
{
	if (b->dns == NULL) {
		b->dns = evdns_base_new(b->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
		if (b->dns != NULL)
			(void)evdns_base_resolv_conf_parse(b->dns, DNS_OPTIONS_ALL,
			                                   "/etc/resolv.conf");
	}
	return b->dns;
}

void blind_open(struct blind *b, struct hreq *r, const char *host, unsigned port)
{
	hreq_close_after(r);
	if (b->max > 0 && b->n >= b->max) {
		hreq_error(r, 503, "too_many_tunnels",
		           "as many blind tunnels are open as limits.max_connections allows", NULL,
		           0);
		return;
	}
	struct tunnel *t = calloc(1, sizeof(*t));
	if (t == NULL) {
		hreq_error(r, 503, "out_of_memory", "pacerd is out of memory", NULL, 0);
		return;
	}
	t->b = b;
	t->client = r;
	t->port = port;
	snprintf(t->request_id, sizeof(t->request_id), "%s", hreq_id(r));
	/* evdns takes an IPv6 literal without its brackets. */
	size_t hl = strlen(host);
	if (host[0] == '[' && hl > 2)
		snprintf(t->host, sizeof(t->host), "%.*s", (int)(hl - 2), host + 1);
	else
		snprintf(t->host, sizeof(t->host), "%s", host);
	list_insert_tail(&b->live, &t->link);
	b->n++;
	t->up = bufferevent_socket_new(b->base, -1, BEV_OPT_CLOSE_ON_FREE);
	/* Never without evdns: a NULL base would resolve with a blocking
	 * getaddrinfo on the loop. */
	if (t->up == NULL || resolver(b) == NULL) {
		t->client = NULL;
		tunnel_free(t);
		hreq_error(r, 503, "out_of_memory", "pacerd is out of memory", NULL, 0);
		return;
	}
	hreq_set_events(r, &client_events, t);
	bufferevent_setcb(t->up, NULL, NULL, on_connect_event, t);
	struct log_line l;
	if (log_begin(&l, LOG_DEBUG, "tunnel")) {
		log_str(&l, "request_id", t->request_id);
		log_str(&l, "host", t->host);
		log_int(&l, "port", port);
		log_str(&l, "mode", "blind");
		log_end(&l);
	}
	/* The connect may fail at once: on_connect_event then runs inside this
	 * call and answers r; nothing of t is used after it. */
	bufferevent_socket_connect_hostname(t->up, b->dns, AF_UNSPEC, t->host, (int)port);
}

struct blind *blind_new(struct event_base *base, char *err, size_t errlen)
{
	struct blind *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	b->base = base;
	b->idle_s = 900;
	list_init(&b->live);
	return b;
}

void blind_set_limits(struct blind *b, size_t max, unsigned idle_s)
{
	b->max = max;
	b->idle_s = idle_s > 0 ? idle_s : 1;
}

void blind_free(struct blind *b)
{
	if (b == NULL)
		return;
	struct list *first;
	while ((first = list_first(&b->live)) != NULL) {
		struct tunnel *t = LIST_ITEM(first, struct tunnel, link);
		if (t->client != NULL) {
			hreq_set_events(t->client, NULL, NULL);
			t->client = NULL;
		}
		tunnel_free(t);
	}
	if (b->dns != NULL)
		evdns_base_free(b->dns, 1);
	free(b);
}

void blind_get_stats(const struct blind *b, struct blind_stats *st)
{
	st->opened = b->opened;
	st->failed = b->failed;
	st->open = b->n;
}
