/* server — the client side: evhttp listener, request intake, pacerd's own
 * answers (DESIGN §6), and relaying upstream responses as they stream in with
 * backpressure (a slow client pauses the upstream transfer). */
#ifndef PACERD_SERVER_H
#define PACERD_SERVER_H

#include <event2/event.h>
#include <stddef.h>

#include "config.h"
#include "upstream.h"

struct server;

/* Binds cfg->listen and starts accepting. The server takes the configuration
 * over (it frees it, also on failure). NULL with err set on failure. */
struct server *server_new(struct event_base *base, struct config *cfg, struct upstream *up,
                          char *err, size_t errlen);

/* Switches to a new, valid configuration (the server takes it over): the next
 * requests route by it, every lane paces by its new plan from its next
 * dispatch, and nothing in flight is dropped. What cannot change without a
 * restart (the listen address) is reported in a warning and kept. */
void server_reload(struct server *srv, struct config *cfg);

/* The configuration in force (owned by the server). */
const struct config *server_config(const struct server *srv);
void server_free(struct server *srv);

/* Graceful shutdown: stop accepting, answer new requests on open connections
 * with 503 shutting_down, and call drained(arg) once no request is in flight. */
void server_shutdown(struct server *srv, void (*drained)(void *), void *arg);
/* Drain deadline passed: answer or cut every request still in flight. */
void server_abort_all(struct server *srv);
size_t server_in_flight(const struct server *srv);

#endif
