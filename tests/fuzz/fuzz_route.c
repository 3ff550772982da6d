/* libFuzzer: request targets through provider resolution and URL building,
 * and key extraction from header values and query strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *openai_hosts[] = {"api.openai.com"};
static char *anthropic_hosts[] = {"api.anthropic.com"};
static struct provider_conf providers[] = {
    {.name = "openai",
     .upstream = "https://api.openai.com",
     .prefix = "/",
     .key_source = KEY_AUTHORIZATION,
     .hosts = openai_hosts,
     .n_hosts = 1},
    {.name = "anthropic",
     .upstream = "https://api.anthropic.com/base",
     .prefix = "/anthropic",
     .key_source = KEY_X_API_KEY,
     .hosts = anthropic_hosts,
     .n_hosts = 1},
};
static struct config cfg = {.providers = providers, .n_providers = 2};

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
	char hex[ROUTE_KEY_HEX + 1], id[ROUTE_KEY_ID_SIZE];
	if (route_key_from_header(KEY_AUTHORIZATION, s, &key, &len)) {
		route_key_hash(key, len, hex);
		route_key_id(hex, id);
	}
	route_key_from_query(s, size, &key, &len);
	free(s);
	return 0;
}
