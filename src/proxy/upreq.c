/* SPDX-License-Identifier: Apache-2.0 */
/* upreq — the upstream request's URL and header list. See upreq.h. */
#include "proxy/upreq.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/grow.h"
#include "http/headers.h"

bool upreq_build(struct upreq *u, const struct route *route, const struct hreq *client,
                 const struct intake_headers *ih)
{
	static const char expect_blank[] = "Expect:", accept_blank[] = "Accept:",
	                  ctype_blank[] = "Content-Type:";
	const char *connection = ih->value[IF_CONNECTION];
	/* Its usual value names only a field that never crosses anyway. */
	if (connection != NULL && strcasecmp(connection, "keep-alive") == 0)
		connection = NULL;
	size_t n = hreq_n_headers(client);
	size_t url_cap = strlen(route->provider->upstream) + route->path_len + 2;
	/* a line is name, ": ", value and a NUL at most */
	size_t need = url_cap + sizeof(expect_blank) + sizeof(accept_blank) + sizeof(ctype_blank) +
	              ih->bytes + 3 * n;
	if (!grow_bytes(&u->arena, &u->arena_cap, need, 1024))
		return false;
	if (n + 3 > u->nodes_cap) {
		size_t cap = n + 3 > 32 ? n + 3 : 32;
		struct curl_slist *nodes = realloc(u->nodes, cap * sizeof(*nodes));
		if (nodes == NULL)
			return false;
		u->nodes = nodes;
		u->nodes_cap = cap;
	}
	int len = route_upstream_url(route, u->arena, url_cap);
	if (len < 0)
		return false;
	u->url = u->arena;
	char *pos = u->arena + len + 1;
	size_t k = 0;
	bool has_accept = false, has_ctype = false;
	for (size_t i = 0; i < n; i++) {
		struct hhdr h;
		hreq_header_at(client, i, &h);
		if (!hdr_forward_request(h.name, connection))
			continue;
		if (h.name_len == 6 && strcasecmp(h.name, "accept") == 0)
			has_accept = true;
		else if (h.name_len == 12 && strcasecmp(h.name, "content-type") == 0)
			has_ctype = true;
		/* libcurl reads "Name:" as "remove Name"; "Name;" sends it empty. */
		char *line = pos;
		memcpy(pos, h.name, h.name_len);
		pos += h.name_len;
		if (h.value_len == 0) {
			*pos++ = ';';
		} else {
			*pos++ = ':';
			*pos++ = ' ';
			memcpy(pos, h.value, h.value_len);
			pos += h.value_len;
		}
		*pos++ = '\0';
		u->nodes[k++].data = line;
	}
	/* Expect: 100-continue would cost a round trip for bodies over 1 MiB. */
	const char *blanks[] = {expect_blank, has_accept ? NULL : accept_blank,
	                        has_ctype ? NULL : ctype_blank};
	for (size_t i = 0; i < sizeof(blanks) / sizeof(blanks[0]); i++) {
		if (blanks[i] == NULL)
			continue;
		size_t blen = strlen(blanks[i]) + 1;
		memcpy(pos, blanks[i], blen);
		u->nodes[k++].data = pos;
		pos += blen;
	}
	for (size_t i = 0; i < k; i++)
		u->nodes[i].next = i + 1 < k ? &u->nodes[i + 1] : NULL;
	u->headers = k ? u->nodes : NULL;
	return true;
}

void upreq_reset(struct upreq *u)
{
	u->url = NULL;
	u->headers = NULL;
}

void upreq_free(struct upreq *u)
{
	free(u->arena);
	free(u->nodes);
	memset(u, 0, sizeof(*u));
}
