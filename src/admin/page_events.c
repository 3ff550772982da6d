/* SPDX-License-Identifier: Apache-2.0 */
/* page_events — the status page's server-sent events. See page_events.h. */
#include "admin/page_events.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "http/httpd.h"

/* A slot; free when req is NULL. */
struct page_client {
	struct page_events *pe;
	struct hreq *req;
	bool behind;     /* hreq_write refused more: nothing until drained */
	unsigned missed; /* ticks spent behind */
};

struct page_events {
	struct event *tick;
	struct timeval interval;
	page_snapshot_fn snapshot;
	void *arg;
	struct page_client clients[PAGE_EVENTS_MAX_CLIENTS];
	struct page_events_stats st;
};

/* EventSource waits this long before it connects again after a cut. */
static const char stream_head[] = "retry: 5000\n\n";

static void on_drained(void *ctx)
{
	struct page_client *c = ctx;
	c->behind = false;
	c->missed = 0;
}

static void release(struct page_client *c)
{
	struct page_events *pe = c->pe;
	c->req = NULL;
	c->behind = false;
	c->missed = 0;
	pe->st.clients--;
	if (pe->st.clients == 0)
		event_del(pe->tick);
}

static void on_gone(void *ctx)
{
	release(ctx);
}

static const struct hreq_events client_events = {.drained = on_drained, .gone = on_gone};

/* "data: JSON\n\n" of a new snapshot (malloc'd), or NULL. */
static char *frame(struct page_events *pe, size_t *len)
{
	size_t n = 0;
	char *json = pe->snapshot(pe->arg, &n);
	if (json == NULL)
		return NULL;
	char *f = malloc(n + 8);
	if (f != NULL) {
		memcpy(f, "data: ", 6);
		memcpy(f + 6, json, n);
		memcpy(f + 6 + n, "\n\n", 2);
		*len = n + 8;
	}
	free(json);
	return f;
}

static void send_to(struct page_client *c, const char *f, size_t len)
{
	if (!hreq_write(c->req, f, len)) {
		c->behind = true;
		c->missed = 0;
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct page_events *pe = arg;
	size_t len = 0;
	char *f = frame(pe, &len);
	for (size_t i = 0; i < PAGE_EVENTS_MAX_CLIENTS; i++) {
		struct page_client *c = &pe->clients[i];
		if (c->req == NULL)
			continue;
		if (c->behind) {
			if (++c->missed >= PAGE_EVENTS_MAX_BEHIND) {
				/* Cut: what is queued still goes out, nothing more
				 * is added, and the httpd's stuck-write timeout
				 * closes it if the reader never takes it. */
				struct hreq *req = c->req;
				pe->st.dropped_slow++;
				release(c);
				hreq_end(req, false);
			}
			continue;
		}
		if (f != NULL)
			send_to(c, f, len);
	}
	free(f);
}

struct page_events *page_events_new(struct event_base *base, unsigned interval_ms,
                                    page_snapshot_fn snapshot, void *arg)
{
	struct page_events *pe = calloc(1, sizeof(*pe));
	if (pe == NULL)
		return NULL;
	pe->interval.tv_sec = interval_ms / 1000;
	pe->interval.tv_usec = (suseconds_t)(interval_ms % 1000) * 1000;
	pe->snapshot = snapshot;
	pe->arg = arg;
	pe->tick = event_new(base, -1, EV_PERSIST, on_tick, pe);
	if (pe->tick == NULL) {
		free(pe);
		return NULL;
	}
	for (size_t i = 0; i < PAGE_EVENTS_MAX_CLIENTS; i++)
		pe->clients[i].pe = pe;
	return pe;
}

void page_events_free(struct page_events *pe)
{
	if (pe == NULL)
		return;
	for (size_t i = 0; i < PAGE_EVENTS_MAX_CLIENTS; i++)
		if (pe->clients[i].req != NULL) {
			hreq_set_events(pe->clients[i].req, NULL, NULL);
			hreq_end(pe->clients[i].req, false);
		}
	event_free(pe->tick);
	free(pe);
}

void page_events_serve(struct page_events *pe, struct hreq *req)
{
	struct page_client *c = NULL;
	for (size_t i = 0; i < PAGE_EVENTS_MAX_CLIENTS && c == NULL; i++)
		if (pe->clients[i].req == NULL)
			c = &pe->clients[i];
	if (c == NULL) {
		pe->st.refused++;
		struct hhdr retry = {"retry-after", 11, "30", 2};
		hreq_error(req, 503, "too_many_clients",
		           "the status page's event stream has as many clients as it serves",
		           &retry, 1);
		return;
	}
	const struct hhdr h[] = {
	    {"content-type", 12, "text/event-stream; charset=utf-8", 32},
	    {"cache-control", 13, "no-store", 8},
	    {"x-content-type-options", 22, "nosniff", 7},
	};
	hreq_start(req, 200, NULL, h, sizeof(h) / sizeof(h[0]));
	c->req = req;
	c->behind = false;
	c->missed = 0;
	hreq_set_events(req, &client_events, c);
	pe->st.served++;
	if (pe->st.clients++ == 0)
		event_add(pe->tick, &pe->interval);
	hreq_write(req, stream_head, sizeof(stream_head) - 1);
	/* The first snapshot at once (counting this client); without one, the
	 * next tick's. */
	size_t len = 0;
	char *f = frame(pe, &len);
	if (f != NULL)
		send_to(c, f, len);
	free(f);
}

void page_events_stats(const struct page_events *pe, struct page_events_stats *st)
{
	*st = pe->st;
}

bool page_events_ticking(const struct page_events *pe)
{
	return event_pending(pe->tick, EV_TIMEOUT, NULL) != 0;
}
