/* SPDX-License-Identifier: Apache-2.0 */
/* blind — tunnels pacerd passes through untouched (forward.tunnel): after a
 * CONNECT to a listed host, pacerd resolves it (evdns: never a blocking
 * lookup), connects, answers 200, and copies bytes both ways until either
 * side ends. Never decrypted, never paced. The client's connection is taken
 * over from httpd (hreq_take_over) once the upstream socket is connected, so a
 * failed connect is still answered through the hreq seam (502).
 *
 * Backpressure as in libevent's le-proxy: a side stops being read while the
 * other side's output holds more than BLIND_OUT_CAP, and resumes once it has
 * drained to half. A tunnel with no byte either way for idle_s is closed. */
#ifndef PACERD_BLIND_H
#define PACERD_BLIND_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "http/httpd.h"

#define BLIND_OUT_CAP (256 * 1024)

struct blind;

struct blind_stats {
	uint64_t opened; /* tunnels connected, since start */
	uint64_t failed; /* CONNECTs whose upstream could not be reached */
	size_t open;     /* tunnels open now (connected or connecting) */
};

/* NULL when out of memory or when no resolver can be set up (err set). */
struct blind *blind_new(struct event_base *base, char *err, size_t errlen);
/* Closes every tunnel at once. */
void blind_free(struct blind *b);
/* Limits from the next tunnel on: at most max open (503 beyond), idle_s of
 * silence both ways closes one. */
void blind_set_limits(struct blind *b, size_t max, unsigned idle_s);
/* Starts a tunnel for the CONNECT r to host (as connect_parse gives it: IPv6
 * in brackets) and port; r is answered (200, 502 or 503) by the tunnel. */
void blind_open(struct blind *b, struct hreq *r, const char *host, unsigned port);
void blind_get_stats(const struct blind *b, struct blind_stats *st);

#endif
