/* SPDX-License-Identifier: Apache-2.0 */
/* keyid — how pacerd names a secret it must not keep: an API key, or an
 * organization or project identity that answers carry. Only the SHA-256 of
 * the value is kept (lower-case hex); its first 12 digits name it in logs,
 * metrics and /status. */
#ifndef PACERD_KEYID_H
#define PACERD_KEYID_H

#include <stddef.h>

#define KEYID_HEX 64
#define KEYID_NAME_LEN 12
#define KEYID_NAME_SIZE 16

/* SHA-256 of the value as lower-case hex (65 bytes with the NUL). */
void keyid_hash(const char *value, size_t len, char hex[KEYID_HEX + 1]);

/* The name in logs, metrics and /status: the first 12 hex digits of the hash,
 * or "anonymous" for none (NULL or ""). */
void keyid_name(const char *hash_hex_or_null, char id[KEYID_NAME_SIZE]);

#endif
