/* SPDX-License-Identifier: Apache-2.0 */
/* wshandshake — the HTTP side of opening a WebSocket. See wshandshake.h. */
#include "http/wshandshake.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>
#include <strings.h>

#include "http/headers.h"

static const char GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* Whether token is one of the comma-separated items of list. */
static bool has_token(const char *list, const char *token)
{
	size_t tl = strlen(token);
	const char *p = list;
	while (p != NULL && *p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *end = p;
		while (*end != '\0' && *end != ',')
			end++;
		const char *last = end;
		while (last > p && (last[-1] == ' ' || last[-1] == '\t'))
			last--;
		if ((size_t)(last - p) == tl && strncasecmp(p, token, tl) == 0)
			return true;
		p = end;
	}
	return false;
}

bool wsh_wants_upgrade(const char *upgrade, const char *connection)
{
	return upgrade != NULL && connection != NULL && has_token(upgrade, "websocket") &&
	       hdr_in_connection(connection, "upgrade");
}

bool wsh_key_valid(const char *key)
{
	if (key == NULL || strlen(key) != WSH_KEY_LEN || key[22] != '=' || key[23] != '=')
		return false;
	unsigned char raw[20];
	/* EVP_DecodeBlock counts the padding as zero bytes: 24 characters give 18. */
	int n = EVP_DecodeBlock(raw, (const unsigned char *)key, WSH_KEY_LEN);
	return n == 18;
}

void wsh_accept(const char *key, char out[WSH_ACCEPT_LEN + 1])
{
	unsigned char md[20];
	unsigned int mdlen = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (c == NULL || EVP_DigestInit_ex(c, EVP_sha1(), NULL) != 1 ||
	    EVP_DigestUpdate(c, key, strlen(key)) != 1 ||
	    EVP_DigestUpdate(c, GUID, sizeof(GUID) - 1) != 1 ||
	    EVP_DigestFinal_ex(c, md, &mdlen) != 1 || mdlen != 20) {
		EVP_MD_CTX_free(c);
		out[0] = '\0'; /* matches no peer's value */
		return;
	}
	EVP_MD_CTX_free(c);
	EVP_EncodeBlock((unsigned char *)out, md, 20);
	out[WSH_ACCEPT_LEN] = '\0';
}

int wsh_new_key(char out[WSH_KEY_LEN + 1])
{
	unsigned char raw[16];
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, raw, sizeof(raw));
	out[WSH_KEY_LEN] = '\0';
	return 0;
}

bool wsh_hop_field(const char *name)
{
	static const char *const names[] = {"sec-websocket-key", "sec-websocket-accept",
	                                    "sec-websocket-version", "sec-websocket-extensions"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i]) == 0)
			return true;
	return false;
}
