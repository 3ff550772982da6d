/* SPDX-License-Identifier: Apache-2.0 */
/* connect — the request target of a CONNECT (RFC 9110 §9.3.6): authority-form
 * "host:port", nothing else. Pure: no I/O, no allocation.
 *
 * Accepted: a DNS name (letters, digits, '-', '.', '_'; at most 253 bytes,
 * labels of 1..63) or an IPv4 literal, or an IPv6 literal in brackets, then
 * ':' and a decimal port 1..65535 (no sign, no leading zero). Refused: no
 * port, userinfo ('@'), a path, percent-encoding, white space, an empty label.
 * The host is lower-cased into the caller's buffer, so that routing compares
 * it with the configured hosts as DNS does (case-insensitively). */
#ifndef PACERD_CONNECT_H
#define PACERD_CONNECT_H

#include <stdbool.h>
#include <stddef.h>

#define CONNECT_HOST_MAX 255 /* a DNS name (253) or a bracketed IPv6 literal */

struct connect_target {
	char host[CONNECT_HOST_MAX + 1]; /* lower case; IPv6 keeps its brackets */
	unsigned port;
	bool ip_literal;
};

/* Parses target[0..len) into out; false when it is not a valid authority. */
bool connect_parse(const char *target, size_t len, struct connect_target *out);

#endif
