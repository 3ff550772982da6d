/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: request targets through provider resolution and URL building,
 * and key extraction from header values and query strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/profile.h"
#include "proxy/route.h"
#include "route_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	struct route r;
	if (route_resolve(&cfg, s, &r) == ROUTE_OK) {
		char url[256];
		route_upstream_url(&r, url, sizeof(url));
		char big[16384];
		route_upstream_url(&r, big, sizeof(big));
	}
	const char *key;
	size_t len;
	char hex[KEYID_HEX + 1], id[KEYID_NAME_SIZE];
	if (profile_key_from_header(KEY_AUTHORIZATION, s, &key, &len)) {
		keyid_hash(key, len, hex);
		keyid_name(hex, id);
	}
	profile_key_from_query(s, size, &key, &len);
	free(s);
	return 0;
}
