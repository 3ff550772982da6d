/* SPDX-License-Identifier: Apache-2.0 */
/* wshandshake — the HTTP side of opening a WebSocket (RFC 6455 §4): whether
 * a request asks for one, the key a client sends, and the accept value a
 * server answers with. Pure (the key's randomness is OpenSSL's). */
#ifndef PACERD_WSHANDSHAKE_H
#define PACERD_WSHANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>

/* Sec-WebSocket-Key: base64 of 16 bytes; Sec-WebSocket-Accept: of 20. */
#define WSH_KEY_LEN 24
#define WSH_ACCEPT_LEN 28

/* Whether a request's Upgrade and Connection fields ask for a WebSocket:
 * "websocket" is a token of upgrade and "upgrade" one of connection (both
 * case-insensitive, in comma-separated lists). Either may be NULL. */
bool wsh_wants_upgrade(const char *upgrade, const char *connection);
/* Whether a Sec-WebSocket-Key is what RFC 6455 §4.1 asks for: base64 (with
 * its padding) of exactly 16 bytes. NULL: false. */
bool wsh_key_valid(const char *key);
/* The Sec-WebSocket-Accept of key (§4.2.2: base64 of SHA-1 of the key and
 * the protocol's GUID), NUL-terminated. */
void wsh_accept(const char *key, char out[WSH_ACCEPT_LEN + 1]);
/* A fresh random key for pacerd's own request upstream. -1 when OpenSSL's
 * generator fails. */
int wsh_new_key(char out[WSH_KEY_LEN + 1]);
/* Whether name is a field that belongs to one WebSocket handshake and is
 * not forwarded as it is: the key, the accept value, the version and the
 * extensions (pacerd frames messages itself and offers none). */
bool wsh_hop_field(const char *name);

#endif
