/* SPDX-License-Identifier: Apache-2.0 */
/* ws_status — the WebSocket transports in /status and /metrics (issue 31):
 * sockets open, opening and opened, the turns they carried by provider and
 * model and how each ended, and each open socket. */
#ifndef PACERD_WS_STATUS_H
#define PACERD_WS_STATUS_H

#include <jansson.h>

struct evbuffer;
struct wsrelay;

/* /status "websockets". */
json_t *ws_status_json(const struct wsrelay *w);
/* The pacerd_websocket* families, appended to out. */
void ws_metrics_write(struct evbuffer *out, const struct wsrelay *w);

#endif
