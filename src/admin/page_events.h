/* SPDX-License-Identifier: Apache-2.0 */
/* page_events — GET /events on the admin listener: the status page's live
 * feed, as server-sent events (text/event-stream). Each client gets a
 * `retry:` field, then one `data:` line per interval (the admin listener's:
 * PAGE_EVENTS_INTERVAL_MS) holding a compact /status snapshot, the first one
 * at once.
 *
 * Bounded: at most PAGE_EVENTS_MAX_CLIENTS streams at once (the next gets 503
 * too_many_clients); one snapshot is made per tick and written to every
 * client; a client whose output is over the httpd cap (hreq_write refused
 * more) gets no snapshot until it drained, and is cut after
 * PAGE_EVENTS_MAX_BEHIND ticks without draining, so a slow reader pins at
 * most the cap plus one snapshot. The tick's timer runs only while a client
 * is connected; a client that leaves frees its slot at once (events->gone). */
#ifndef PACERD_PAGE_EVENTS_H
#define PACERD_PAGE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base; /* event2/event.h */
struct hreq;       /* http/httpd.h */

#define PAGE_EVENTS_MAX_CLIENTS 16
#define PAGE_EVENTS_INTERVAL_MS 1000
#define PAGE_EVENTS_MAX_BEHIND 10

/* A snapshot as JSON text on one line (malloc'd; the hub frees it), *len set;
 * NULL when it cannot be made. */
typedef char *(*page_snapshot_fn)(void *arg, size_t *len);

struct page_events;

struct page_events_stats {
	size_t clients;        /* streams open now */
	uint64_t served;       /* streams started, since start */
	uint64_t refused;      /* 503s: PAGE_EVENTS_MAX_CLIENTS were open */
	uint64_t dropped_slow; /* cut: PAGE_EVENTS_MAX_BEHIND ticks without draining */
};

/* A snapshot every interval_ms while a client is connected. NULL when out of
 * memory. */
struct page_events *page_events_new(struct event_base *base, unsigned interval_ms,
                                    page_snapshot_fn snapshot, void *arg);
/* The clients must be gone first (httpd_free tells them). */
void page_events_free(struct page_events *pe);
/* Answers the request: the stream, or 503 when full. */
void page_events_serve(struct page_events *pe, struct hreq *req);
void page_events_stats(const struct page_events *pe, struct page_events_stats *st);
/* Whether the tick's timer is armed (only while a client is connected). */
bool page_events_ticking(const struct page_events *pe);

#endif
