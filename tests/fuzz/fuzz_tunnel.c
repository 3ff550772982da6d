/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: CONNECT request lines and what follows them. Random bytes, split
 * at random points, into pacerd's connection layer over a socketpair, with an
 * owner that does what intake does with a CONNECT: parses the authority
 * (connect_parse), decides with route_connect over the route fixture, and
 * turns a provider's connection into a terminated tunnel (hreq_tunnel_tls,
 * a real leaf of a CA made at start); everything after that goes into the TLS
 * server's state (a ClientHello, garbage, plain HTTP, a cut). Requests read
 * inside a tunnel are answered like any.
 *
 * Input: byte 0 = flags (bit 0: answer a CONNECT to a non-provider with 403
 * rather than tunnel it anyway, to reach the TLS side more often); then
 * pieces, each a length byte (1..64) and that many bytes sent by the client,
 * with the event loop run after each. The client end is drained as it goes,
 * then closed; the connection must be gone after. */
#include <event2/event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/ca.h"
#include "core/log.h"
#include "http/connect.h"
#include "http/httpd.h"
#include "http/tls.h"
#include "httpd_feed.h"
#include "proxy/route.h"
#include "route_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *base;
static struct httpd *httpd;
static struct ca *ca;
static SSL_CTX *ctx;
static unsigned flags;

static void on_request(struct hreq *r, void *arg)
{
	(void)arg;
	if (strcmp(hreq_method(r), "CONNECT") != 0) {
		/* Inside a tunnel, or plain: answered as intake would route it. */
		struct route rt;
		const char *host = hreq_tunnel_host(r);
		if (host != NULL)
			(void)route_resolve_tunnel(&cfg, host, hreq_target(r), &rt);
		hreq_respond(r, 200, NULL, 0, "ok", 2);
		return;
	}
	struct connect_target t;
	hreq_close_after(r);
	if (hreq_tunnel_host(r) != NULL || !connect_parse(hreq_target(r), hreq_target_len(r), &t)) {
		hreq_error(r, 400, "bad_request", "bad CONNECT", NULL, 0);
		return;
	}
	const struct provider_conf *p;
	enum connect_verdict v = route_connect(&cfg, t.host, t.port, &p);
	if (v != CONNECT_TERMINATE && (flags & 1)) {
		hreq_error(r, 403, "host_not_allowed", "no", NULL, 0);
		return;
	}
	X509 *leaf = ca_leaf(ca, t.host);
	SSL *ssl = leaf != NULL ? tls_conn_new(ctx, leaf, ca_leaf_key(ca), ca_cert(ca)) : NULL;
	if (ssl == NULL) {
		hreq_error(r, 503, "ca_unavailable", "no", NULL, 0);
		return;
	}
	hreq_tunnel_tls(r, ssl, t.host);
}

static void setup(void)
{
	/* mkdtemp's template: the Xs become a unique name */
	char err[512], dir[] = "/tmp/pacerd-fuzz-tunnel-XXXXXX";
	httpd = feed_httpd_new(&base, on_request);
	cfg.forward.intercept = true;
	static char *tunnel[] = {"pypi.org", "localhost:8443"};
	cfg.forward.tunnel = tunnel;
	cfg.forward.n_tunnel = 2;
	if (mkdtemp(dir) == NULL ||
	    (ca = ca_open(NULL, NULL, dir, NULL, err, sizeof(err))) == NULL ||
	    (ctx = tls_server_ctx_new(err, sizeof(err))) == NULL) {
		fprintf(stderr, "fuzz_tunnel setup: %s\n", err);
		abort();
	}
	/* The CA lives in memory from here on: the files are not needed. */
	char path[64];
	snprintf(path, sizeof(path), "%s/ca.key", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/ca.pem", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/ca.lock", dir);
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (base == NULL)
		setup();
	if (size < 1)
		return 0;
	flags = data[0];
	/* The authority parser alone, on the whole input. */
	struct connect_target t;
	(void)connect_parse((const char *)data + 1, size - 1, &t);
	if (feed_connection(base, httpd, data, size, 1, NULL) > 0)
		abort(); /* a connection whose client left must be closed */
	return 0;
}
