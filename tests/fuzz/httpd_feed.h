/* SPDX-License-Identifier: Apache-2.0 */
/* What the two fuzzers of the connection layer (fuzz_httpd, fuzz_tunnel) share:
 * the input fed to an httpd connection over a socketpair in chunks, the loop
 * turned after each, and the check that a connection whose client left is
 * closed. Included by each harness (one binary each). */
#ifndef PACERD_FUZZ_HTTPD_FEED_H
#define PACERD_FUZZ_HTTPD_FEED_H

#include <event2/event.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "http/httpd.h"

/* The loop and the connection layer a harness feeds: small caps, so that
 * inputs reach them; SIGPIPE ignored as pacerd does (writes to a gone client
 * fail with EPIPE); logs to /dev/null. Aborts when it cannot be made. */
static struct httpd *feed_httpd_new(struct event_base **base, httpd_request_fn on_request)
{
	char err[256];
	signal(SIGPIPE, SIG_IGN);
	log_open("/dev/null", LOG_ERROR, err, sizeof(err));
	*base = event_base_new();
	struct httpd_conf hc = {.max_header_bytes = 1024,
	                        .max_body_bytes = 2048,
	                        .max_upload_bytes = 4096,
	                        .max_connections = 16,
	                        .client_timeout_s = 30};
	struct httpd *h =
	    *base != NULL ? httpd_new(*base, NULL, &hc, on_request, NULL, err, sizeof(err)) : NULL;
	if (h == NULL)
		abort();
	return h;
}

static void feed_drain_client(int fd)
{
	char buf[65536];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* data[from..size) goes to a new connection of h: each chunk is a length byte
 * (1-64) and that many bytes; after each, three turns of the loop, what the
 * client got read, and after_chunk(last byte of the chunk) when not NULL.
 * Then the client leaves; returns the number of connections still open after
 * up to 50 more turns (0 is what must be). -1: no socketpair. */
static int feed_connection(struct event_base *base, struct httpd *h, const uint8_t *data,
                           size_t size, size_t from, void (*after_chunk)(uint8_t last))
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
		return -1;
	httpd_adopt(h, sv[0]);
	size_t i = from;
	while (i < size) {
		size_t n = (data[i] % 64) + 1;
		i++;
		if (n > size - i)
			n = size - i;
		if (n > 0 && write(sv[1], data + i, n) < 0)
			break;
		i += n;
		for (int k = 0; k < 3; k++)
			event_base_loop(base, EVLOOP_NONBLOCK);
		feed_drain_client(sv[1]);
		if (after_chunk != NULL)
			after_chunk(data[i - 1]);
	}
	close(sv[1]);
	struct httpd_stats st;
	for (int k = 0; k < 50; k++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		httpd_get_stats(h, &st);
		if (st.connections == 0)
			break;
	}
	httpd_get_stats(h, &st);
	return (int)st.connections;
}

#endif
