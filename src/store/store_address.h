/* SPDX-License-Identifier: Apache-2.0 */
/* store_address — what store.redis.address names (pure): a TCP host and port
 * (a name to resolve at each connect, or an IP literal) or a Unix socket, and
 * the name a TLS certificate must carry. */
#ifndef PACERD_STORE_ADDRESS_H
#define PACERD_STORE_ADDRESS_H

#include <stdbool.h>

struct store_address {
	bool unix_socket;
	bool ip;        /* host is an IP literal: nothing to resolve */
	char host[256]; /* without brackets for IPv6 */
	unsigned port;
	char path[108]; /* unix_socket: sun_path */
};

/* "host:port", "IP:port", "[v6]:port" or "unix:/path". Returns 0, or -1 for
 * anything else (config.c's check_store_address says why, at load). */
int store_address_parse(const char *s, struct store_address *out);

/* The name a server's certificate is checked against: server_name when set,
 * else the address's host (an IP literal is checked as an IP address). */
const char *store_address_tls_name(const struct store_address *a, const char *server_name);

#endif
