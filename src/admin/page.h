/* SPDX-License-Identifier: Apache-2.0 */
/* page — the admin listener's status page (GET /): one self-contained HTML
 * document, src/admin/page.html, compiled in as bytes (the Makefile turns it
 * into page_html.inc with od and sed).
 *
 * The server fills the document's view (at its <!--pacerd:view--> mark) from
 * a /status snapshot: every lane as a table row, the store, tunnels and
 * sockets, the providers, the last errors. That is the whole page without
 * JavaScript; with it, the document's own script replaces the view with one
 * built from each snapshot of GET /events (page_events.h) and draws the
 * admitted rate of every lane as a sparkline.
 *
 * Every value from the snapshot is escaped (page_escape): model and agent
 * names come from clients. The document loads nothing else, and page_csp()
 * says so to the browser: its one inline script and style are allowed by
 * their SHA-256, nothing else runs, the only connection it may open is to
 * its own origin. */
#ifndef PACERD_PAGE_H
#define PACERD_PAGE_H

#include <jansson.h>
#include <stddef.h>

struct evbuffer; /* event2/buffer.h */

/* Appends s[0..len) as HTML text or a quoted attribute value: & < > " '
 * become character references; everything else is copied as it is. */
void page_escape(struct evbuffer *out, const char *s, size_t len);

/* Appends the view for a /status snapshot (the object handle_status
 * answers): what the document shows without JavaScript. Missing members
 * show as empty; nothing in status is trusted to be markup. */
void page_view(struct evbuffer *out, const json_t *status);

/* Appends the whole document with the view of status. 0; -1 when out of
 * memory. */
int page_write(struct evbuffer *out, const json_t *status);

/* The Content-Security-Policy of the document (computed once: the digests of
 * its script and style). */
const char *page_csp(void);

#endif
