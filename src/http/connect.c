/* SPDX-License-Identifier: Apache-2.0 */
/* connect — the authority-form target of a CONNECT. See connect.h. */
#include "http/connect.h"

#include <arpa/inet.h>
#include <string.h>

static bool name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

/* A DNS name, already lower case: labels of 1..63 name characters. */
static bool dns_name_ok(const char *h, size_t n)
{
	if (n == 0 || n > 253)
		return false;
	size_t label = 0;
	for (size_t i = 0; i < n; i++) {
		if (h[i] == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!name_char(h[i]) || ++label > 63)
			return false;
	}
	return label > 0; /* no trailing dot: it would name another certificate */
}

static bool port_ok(const char *p, size_t n, unsigned *port)
{
	if (n == 0 || n > 5 || p[0] == '0')
		return false; /* "0443" is 443 to some, an error to others: refused */
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v == 0 || v > 65535)
		return false;
	*port = v;
	return true;
}

bool connect_parse(const char *target, size_t len, struct connect_target *out)
{
	memset(out, 0, sizeof(*out));
	if (target == NULL || len == 0)
		return false;
	const char *colon;
	size_t host_len;
	if (target[0] == '[') {
		const char *close = memchr(target, ']', len);
		if (close == NULL || close + 1 >= target + len || close[1] != ':')
			return false;
		host_len = (size_t)(close - target) + 1;
		colon = close + 1;
		char inner[INET6_ADDRSTRLEN];
		size_t in_len = host_len - 2;
		unsigned char buf[16];
		if (in_len == 0 || in_len >= sizeof(inner))
			return false;
		memcpy(inner, target + 1, in_len);
		inner[in_len] = '\0';
		if (inet_pton(AF_INET6, inner, buf) != 1)
			return false;
		out->ip_literal = true;
	} else {
		colon = memchr(target, ':', len);
		if (colon == NULL)
			return false;
		host_len = (size_t)(colon - target);
	}
	if (host_len == 0 || host_len > CONNECT_HOST_MAX)
		return false;
	if (!port_ok(colon + 1, len - host_len - 1, &out->port))
		return false;
	for (size_t i = 0; i < host_len; i++) {
		char ch = target[i];
		out->host[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
	}
	out->host[host_len] = '\0';
	if (out->ip_literal)
		return true;
	unsigned char v4[4];
	if (inet_pton(AF_INET, out->host, v4) == 1) {
		out->ip_literal = true;
		return true;
	}
	return dns_name_ok(out->host, host_len);
}
