/* headers — hop-by-hop filtering. See headers.h. */
#include "headers.h"

#include <string.h>
#include <strings.h>

static const char *const hop_by_hop[] = {
    "connection", "keep-alive",         "proxy-connection",    "te", "trailer", "transfer-encoding",
    "upgrade",    "proxy-authenticate", "proxy-authorization",
};

bool hdr_is_hop_by_hop(const char *name)
{
	for (size_t i = 0; i < sizeof(hop_by_hop) / sizeof(hop_by_hop[0]); i++)
		if (strcasecmp(name, hop_by_hop[i]) == 0)
			return true;
	return false;
}

bool hdr_in_connection(const char *connection, const char *name)
{
	if (connection == NULL)
		return false;
	size_t name_len = strlen(name);
	const char *p = connection;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		size_t n = strcspn(p, ", \t");
		if (n == name_len && n > 0 && strncasecmp(p, name, n) == 0)
			return true;
		p += n;
	}
	return false;
}

bool hdr_forward_request(const char *name, const char *connection)
{
	if (hdr_is_hop_by_hop(name) || hdr_in_connection(connection, name))
		return false;
	return strcasecmp(name, "host") != 0 && strcasecmp(name, "content-length") != 0 &&
	       strcasecmp(name, "expect") != 0;
}

bool hdr_forward_response(const char *name, const char *connection)
{
	return !hdr_is_hop_by_hop(name) && !hdr_in_connection(connection, name);
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

bool hdr_split_line(const char *line, size_t len, const char **name, size_t *name_len,
                    const char **value, size_t *value_len)
{
	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len == 0 || is_ows(line[0]))
		return false;
	const char *colon = memchr(line, ':', len);
	if (colon == NULL || colon == line)
		return false;
	size_t nlen = (size_t)(colon - line);
	for (size_t i = 0; i < nlen; i++) /* a field name is a token: no white space */
		if (is_ows(line[i]))
			return false;
	const char *v = colon + 1;
	const char *end = line + len;
	while (v < end && is_ows(*v))
		v++;
	while (end > v && is_ows(end[-1]))
		end--;
	*name = line;
	*name_len = nlen;
	*value = v;
	*value_len = (size_t)(end - v);
	return true;
}
