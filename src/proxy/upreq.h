/* SPDX-License-Identifier: Apache-2.0 */
/* upreq — the request pacerd sends upstream for a client's: the upstream URL
 * and the header list libcurl sends, built once per request before it enters
 * its lane, and read by every attempt (upstream.h's up_request).
 *
 * What crosses: every end-to-end field of the client's request
 * (hdr_forward_request: not hop-by-hop, not listed in Connection, not Host,
 * Content-Length or Expect, not pacerd's own x-pacer-*), in arrival order, as
 * sent (an empty value stays empty); and blanks for the defaults libcurl would
 * otherwise add by itself (Expect always; Accept and Content-Type when the
 * client sent none).
 *
 * Memory: the URL and the lines live in an arena, the list's nodes in an
 * array (libcurl only reads a curl_slist: its nodes need not come from
 * curl_slist_append); both are kept across uses (upreq_reset), so a warm
 * exchange allocates nothing. */
#ifndef PACERD_UPREQ_H
#define PACERD_UPREQ_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/httpd.h"
#include "proxy/intake.h"
#include "proxy/route.h"

struct upreq {
	const char *url;            /* in arena; NULL until built */
	struct curl_slist *headers; /* NULL: none */

	/* Kept across uses. */
	char *arena;
	size_t arena_cap;
	struct curl_slist *nodes;
	size_t nodes_cap;
};

/* Builds u for the client's request routed by route (which its strings point
 * into), whose fields intake read into ih. False when out of memory. */
bool upreq_build(struct upreq *u, const struct route *route, const struct hreq *client,
                 const struct intake_headers *ih);
/* Forgets what was built and keeps the memory for the next request. */
void upreq_reset(struct upreq *u);
void upreq_free(struct upreq *u);

#endif
