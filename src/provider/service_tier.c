/* service_tier — see service_tier.h. */
#include "provider/service_tier.h"

#include <string.h>

/* The end of the JSON string that opens at s[i] == '"': the index of its
 * closing quote, or len when it does not close. */
static size_t string_end(const char *s, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (s[i] == '\\')
			i++;
		else if (s[i] == '"')
			return i;
	}
	return len;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* One pass over the object's top level: a key is the string that follows
 * its '{' or a ',' at depth 1; nested values and strings are skipped whole,
 * so a "service_tier" inside a message or a tool schema is not the request's. */
bool service_tier_flex(const char *body, size_t len)
{
	static const char key[] = "\"service_tier\"";
	static const char flex[] = "\"flex\"";
	if (body == NULL || len > SERVICE_TIER_SCAN_MAX)
		return false;
	size_t i = 0;
	while (i < len && is_space(body[i]))
		i++;
	if (i == len || body[i] != '{')
		return false;
	int depth = 0;
	bool want_key = false;
	for (; i < len; i++) {
		char c = body[i];
		if (c == '"') {
			size_t end = string_end(body, len, i);
			if (end == len)
				return false;
			if (depth == 1 && want_key && end + 1 - i == sizeof key - 1 &&
			    memcmp(body + i, key, sizeof key - 1) == 0) {
				size_t v = end + 1;
				while (v < len && (is_space(body[v]) || body[v] == ':'))
					v++;
				return len - v >= sizeof flex - 1 &&
				       memcmp(body + v, flex, sizeof flex - 1) == 0;
			}
			want_key = false;
			i = end;
		} else if (c == '{' || c == '[') {
			depth++;
			want_key = depth == 1;
		} else if (c == '}' || c == ']') {
			if (--depth <= 0)
				return false;
		} else if (c == ',') {
			want_key = depth == 1;
		}
	}
	return false;
}
