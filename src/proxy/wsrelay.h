/* SPDX-License-Identifier: Apache-2.0 */
/* wsrelay — WebSocket transports (issue 31; PROVIDERS.md §11): a GET with
 * Upgrade: websocket to a provider's route (the Responses API's WebSocket
 * mode, /v1/responses; the Realtime API, /v1/realtime) becomes a socket to
 * the provider, its messages carried both ways, and what runs inside it
 * paced and metered per turn (docs/decisions.md: "WebSocket transports").
 *
 * Life of a socket:
 *
 *   OPENING   its opening is a request of its lane, at no token cost: it
 *             waits for the lane's gates like any request. With ?model=
 *             (Realtime) or a subprotocol asked for, the lane of ?model=
 *             (else the scope's model-less lane), the client waiting for
 *             the provider's answer. Otherwise (the Responses API's mode)
 *             pacerd answers the upgrade itself ("early") and the opening
 *             goes to its lane with the first message's model; what the
 *             client sends meanwhile waits, in order.
 *   CONNECTING  the lane let it go: a TCP connection (evdns; TLS with
 *             bufferevent_openssl for https upstreams) and pacerd's own GET
 *             with a key of its own.
 *   HANDSHAKE the answer's head (libhttp-parser): a 101 whose accept value
 *             matches is relayed to the client with the client's own accept
 *             value (the opening's slot is given back, its headers teach the
 *             lane); anything else is relayed as a plain answer, or, early,
 *             as an error event and a close.
 *   OPEN      messages both ways (wsframe.h). Each response.create of the
 *             client is a turn: a request of its lane (the model it names,
 *             else the socket's), held (not dropped) until the lane lets it
 *             go, charged its estimate, corrected by the usage of the event
 *             that ends it (response.completed, response.done); what the
 *             client sends behind a held turn waits behind it, in order.
 *             rate_limits.updated teaches the lane; an error event refusing
 *             for a rate limit holds the lane like a 429, and the turn is
 *             sent again once the hold ends if the client sent nothing
 *             since. A turn the provider leaves silent past
 *             timeouts.first_byte_s (nothing since its dispatch) or
 *             timeouts.idle_s (since its last message) ends as a 504 and
 *             closes the socket (1011).
 *   CLOSING   a close frame went one way: it is passed on, and the socket
 *             ends when both sides closed (or after CLOSE_LINGER_MS).
 *
 * The client's side is the bufferevent the HTTP layer hands over
 * (hreq_take_over): its socket, or inside a terminated CONNECT tunnel the
 * TLS filter that carries the tunnel's session on.
 *
 * Backpressure both ways: past WSRELAY_OUT_CAP bytes waiting for one side,
 * the other is not read (its bytes wait in the kernel, and TCP slows its
 * sender); reading resumes below a quarter of it. A message is at most
 * limits.max_body_bytes (1009 above). A client that reads nothing for
 * limits.client_timeout_s while bytes wait for it is cut (1008). */
#ifndef PACERD_WSRELAY_H
#define PACERD_WSRELAY_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "http/httpd.h"
#include "proxy/exchange.h"

struct lanes;
struct wsrelay;

/* Bytes waiting for one side above which the other is not read. */
#define WSRELAY_OUT_CAP (256 * 1024)

struct wsrelay_stats {
	size_t open;       /* sockets open (upgraded) now */
	size_t opening;    /* waiting for their lane, connecting or in the handshake */
	uint64_t opened;   /* upgraded since start */
	uint64_t refused;  /* answered without an upgrade (the provider's or pacerd's) */
	uint64_t turns;    /* turns sent upstream (a resent one once) */
	uint64_t resent;   /* turns sent again after a refusal inside the socket */
	uint64_t refusals; /* rate-limit error events from providers */
	size_t turns_in_flight;
	size_t turns_waiting; /* held for their lane */
};

/* One row per (provider, model) of the turns that ended, for /metrics. */
struct wsrelay_turn_row {
	const char *provider;
	char model[64];
	uint64_t completed, refused, failed;
};

struct wsrelay *wsrelay_new(struct event_base *base, struct lanes *lanes, struct config_ref *cref,
                            char *err, size_t errlen);
/* Closes every socket (1001 going away) and frees what is left. */
void wsrelay_free(struct wsrelay *w);
void wsrelay_reconfigure(struct wsrelay *w, struct config_ref *cref);
/* Whether r asks for a WebSocket (GET, Upgrade: websocket, Connection:
 * upgrade); connection: its Connection field (intake). */
bool wsrelay_wanted(const struct hreq *r, const char *connection);
/* Takes r over (in: as exchange_start's; its route a provider's). */
void wsrelay_start(struct wsrelay *w, struct hreq *r, const struct exchange_intake *in);
/* Shutting down: sockets with no turn in flight close now (1001), the
 * others once their turns end. */
void wsrelay_shutdown(struct wsrelay *w);
/* The drain's deadline passed: every socket ends now (1001, or 503
 * shutting_down before the upgrade). */
void wsrelay_abort_all(struct wsrelay *w);
/* Sockets not finished (a drain waits for them). */
size_t wsrelay_live(const struct wsrelay *w);
void wsrelay_get_stats(const struct wsrelay *w, struct wsrelay_stats *st);
/* The rows of turns by provider and model; *n how many. */
const struct wsrelay_turn_row *wsrelay_turn_rows(const struct wsrelay *w, size_t *n);
/* Calls fn for each open socket (for /status): its request id, provider,
 * key name, model, turns so far, in flight, waiting, age in ms. */
void wsrelay_each(const struct wsrelay *w,
                  void (*fn)(void *arg, const char *id, const char *provider, const char *key,
                             const char *model, uint64_t turns, size_t in_flight, size_t waiting,
                             int64_t age_ms),
                  void *arg);

#endif
