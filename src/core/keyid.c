/* SPDX-License-Identifier: Apache-2.0 */
/* keyid — SHA-256 names of secrets (keyid.h). */
#include "core/keyid.h"

#include <openssl/evp.h>
#include <string.h>

void keyid_hash(const char *value, size_t len, char hex[KEYID_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int md_len = 0;

	EVP_Digest(value, len, md, &md_len, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[KEYID_HEX] = '\0';
}

void keyid_name(const char *hash_hex_or_null, char id[KEYID_NAME_SIZE])
{
	if (hash_hex_or_null == NULL || hash_hex_or_null[0] == '\0') {
		memcpy(id, "anonymous", 10);
		return;
	}
	memcpy(id, hash_hex_or_null, KEYID_NAME_LEN);
	id[KEYID_NAME_LEN] = '\0';
}
