/* SPDX-License-Identifier: Apache-2.0 */
/* route — which provider a request goes to, the upstream URL, and the lane
 * identity of its API key (DESIGN §2). Pure: no I/O, no allocation. */
#ifndef PACERD_ROUTE_H
#define PACERD_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "core/keyid.h"

enum route_status {
	ROUTE_OK,
	ROUTE_NO_PROVIDER,      /* 404 unknown_provider: no prefix matches the path */
	ROUTE_HOST_NOT_ALLOWED, /* 403 host_not_allowed: absolute URI for a host not configured */
	ROUTE_BAD_TARGET,       /* 400 bad_request: not origin-form nor http(s) absolute-form */
	ROUTE_UNSAFE_PATH,      /* 400 bad_request: a dot segment, an encoded '/' or '\',
	                         * or a path that begins with "//" (see route.c) */
};

struct route {
	const struct provider_conf *provider;
	bool forward_proxy; /* the request target was an absolute URI, or came through a tunnel */
	bool tunnel;        /* it came through a CONNECT tunnel pacerd terminated */
	/* The part of the target sent upstream, path and query ("/v1/x?y"), not
	 * NUL-terminated: it points into the target given to route_resolve. */
	const char *path;
	size_t path_len;
};

/* Resolves a request target (origin-form "/p?q" or absolute-form
 * "http://host[:port]/p?q") against the configured providers: the longest
 * matching prefix (stripped), or the provider listing the absolute URI's host. */
enum route_status route_resolve(const struct config *cfg, const char *target, struct route *out);

/* A request read inside a tunnel pacerd terminated for host: routed like the
 * absolute URI https://host<target>. target must be origin-form. */
enum route_status route_resolve_tunnel(const struct config *cfg, const char *host,
                                       const char *target, struct route *out);

/* What a CONNECT to host:port gets (DESIGN §2). */
enum connect_verdict {
	CONNECT_TERMINATE, /* a provider's host, port 443, forward.intercept: TLS ends here */
	CONNECT_BLIND,     /* listed in forward.tunnel (host: port 443, host:port, "*": any host
	                    * on 443): bytes pass untouched */
	CONNECT_DENY,      /* 403 host_not_allowed */
};
/* host: lower case, as connect_parse gives it. *provider: the provider for
 * CONNECT_TERMINATE, else NULL. */
enum connect_verdict route_connect(const struct config *cfg, const char *host, unsigned port,
                                   const struct provider_conf **provider);

/* Whether the request's body streams upstream as it arrives (an upload:
 * profile_endpoint_streams on the routed path), decided when its head is
 * complete, before any byte of the body is read. method and target as sent;
 * tunnel_host: the host of the terminated tunnel it came through, or NULL. A
 * target that does not route is read whole: its answer (404, 403, 400) does
 * not wait for the body anyway. */
bool route_streams_body(const struct config *cfg, const char *method, const char *target,
                        const char *tunnel_host);

/* Writes the upstream URL: the provider's upstream base joined with the path
 * (origin-form), or the upstream's scheme://authority with the path as given
 * (absolute-form, which already carries the provider's full path). Returns the
 * length, or -1 when it does not fit. */
int route_upstream_url(const struct route *r, char *buf, size_t len);

#endif
