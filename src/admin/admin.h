/* SPDX-License-Identifier: Apache-2.0 */
/* admin — the operator's listener (DESIGN §7), default 127.0.0.1:9090:
 *
 *   GET  /          the status page: one HTML document, every lane live
 *                   (page.h), usable without JavaScript
 *   GET  /events    the page's feed: a /status snapshot a second as
 *                   server-sent events (page_events.h)
 *   GET  /healthz   200 while the process runs
 *   GET  /readyz    200 while accepting requests, 503 while draining
 *   GET  /status    JSON: every lane (queue, in flight, limits, what it learned,
 *                   counters, queue ETA) and the process
 *   GET  /metrics   Prometheus text format
 *   POST /reload    reads the configuration again (as SIGHUP); 400 with the
 *                   file:line:column error when it is invalid
 *
 * With admin.token set, every request needs `Authorization: Bearer TOKEN`;
 * GET and HEAD also take the token as HTTP Basic's password (any user name),
 * which is how a browser sends it: the 401 of a GET offers Basic too. */
#ifndef PACERD_ADMIN_H
#define PACERD_ADMIN_H

#include <stddef.h>

struct event_base; /* event2/event.h */
struct server;     /* proxy/server.h */

struct admin;

/* Reloads the configuration; 0 on success, -1 with err set. */
typedef int (*admin_reload_fn)(void *arg, char *err, size_t errlen);

/* Listens on the server's admin.listen ("" = no admin listener: returns NULL
 * with err empty). NULL with err set on failure. */
struct admin *admin_new(struct event_base *base, struct server *srv, admin_reload_fn reload,
                        void *reload_arg, char *err, size_t errlen);
void admin_free(struct admin *adm);

#endif
