/* SPDX-License-Identifier: Apache-2.0 */
/* store_address — store.redis.address, parsed; see store_address.h. */
#include "store/store_address.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"

int store_address_parse(const char *s, struct store_address *out)
{
	memset(out, 0, sizeof(*out));
	if (s == NULL)
		return -1;
	if (strncmp(s, "unix:", 5) == 0) {
		size_t n = strlen(s + 5);
		if (s[5] != '/' || n >= sizeof(out->path))
			return -1;
		out->unix_socket = true;
		memcpy(out->path, s + 5, n + 1);
		return 0;
	}
	if (config_split_hostport(s, out->host, sizeof(out->host), &out->port) != 0 ||
	    out->port == 0 || out->host[0] == '\0')
		return -1;
	unsigned char addr[16];
	out->ip =
	    inet_pton(AF_INET, out->host, addr) == 1 || inet_pton(AF_INET6, out->host, addr) == 1;
	return 0;
}

const char *store_address_tls_name(const struct store_address *a, const char *server_name)
{
	if (server_name != NULL && server_name[0] != '\0')
		return server_name;
	return a->unix_socket ? "" : a->host;
}
