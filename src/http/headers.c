/* SPDX-License-Identifier: Apache-2.0 */
/* headers — hop-by-hop filtering. See headers.h. */
#include "http/headers.h"

#include <string.h>
#include <strings.h>

/* The fields that never cross, whatever Connection says: hop-by-hop ones, and
 * (requests only) those libcurl writes itself for the upstream connection. */
enum { HOP = 1, CURL_OWN = 2 };
static const struct {
	const char *name;
	unsigned char len, kind;
} fixed[] = {
    {"te", 2, HOP},
    {"host", 4, CURL_OWN},
    {"expect", 6, CURL_OWN},
    {"trailer", 7, HOP},
    {"upgrade", 7, HOP},
    {"connection", 10, HOP},
    {"keep-alive", 10, HOP},
    {"content-length", 14, CURL_OWN},
    {"proxy-connection", 16, HOP},
    {"transfer-encoding", 17, HOP},
    {"proxy-authenticate", 18, HOP},
    {"proxy-authorization", 19, HOP},
};

/* Which of the kinds above name is (len bytes); 0: none. The length is
 * compared first: a field name is short, and most are none of these. */
static unsigned kind_of(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (fixed[i].len == len && strncasecmp(name, fixed[i].name, len) == 0)
			return fixed[i].kind;
	return 0;
}

bool hdr_is_hop_by_hop(const char *name)
{
	return kind_of(name, strlen(name)) == HOP;
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

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

bool hdr_forward_request(const char *name, const char *connection)
{
	size_t len = strlen(name);
	bool pacer = len >= 8 && (name[0] | 0x20) == 'x' && strncasecmp(name, "x-pacer-", 8) == 0;
	return !pacer && kind_of(name, len) == 0 && !hdr_in_connection(connection, name);
}

/* A positive decimal number of at most 12 integer digits and 6 decimals,
 * times `scale`; -1 for anything else. strtod would take "inf", hex, "1e9". */
static long long parse_time(const char *s, long long scale)
{
	if (s == NULL)
		return -1;
	while (is_ows(*s))
		s++;
	long long whole = 0, frac = 0, frac_scale = 1;
	int digits = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (++digits > 12)
			return -1;
		whole = whole * 10 + (*s - '0');
	}
	if (*s == '.') {
		s++;
		for (int n = 0; *s >= '0' && *s <= '9'; s++, n++) {
			if (n >= 6)
				continue; /* finer than a microsecond: ignored */
			frac = frac * 10 + (*s - '0');
			frac_scale *= 10;
			digits++;
		}
	}
	while (is_ows(*s))
		s++;
	if (*s != '\0' || digits == 0)
		return -1;
	long long v = whole * scale + frac * scale / frac_scale;
	return v > 0 && v <= 366LL * 86400 * 1000 ? v : -1;
}

long long hdr_client_timeout_ms(const char *pacer_timeout_ms, const char *request_timeout_ms,
                                const char *stainless_timeout)
{
	long long ms = parse_time(pacer_timeout_ms, 1);
	if (ms > 0)
		return ms;
	long long req = parse_time(request_timeout_ms, 1);
	long long sdk = parse_time(stainless_timeout, 1000);
	if (req > 0 && (sdk <= 0 || req < sdk))
		return req;
	return sdk;
}

bool hdr_forward_response(const char *name, const char *connection)
{
	return !hdr_is_hop_by_hop(name) && !hdr_in_connection(connection, name);
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
