/* SPDX-License-Identifier: Apache-2.0 */
/* priority — the one syntax of a request's priority, shared by the
 * x-pacer-priority header (proxy/server.c) and agents.priorities in the
 * configuration (core/config.c), so that the two cannot drift. */
#ifndef PACERD_PRIORITY_H
#define PACERD_PRIORITY_H

#include <stdbool.h>

#define PRIORITY_MIN (-100)
#define PRIORITY_MAX 100

/* An integer from -100 to 100, optional sign, optional spaces or tabs around
 * it. False for anything else. */
static inline bool priority_parse(const char *s, int *out)
{
	while (*s == ' ' || *s == '\t')
		s++;
	bool neg = *s == '-';
	if (*s == '-' || *s == '+')
		s++;
	int v = 0, digits = 0;
	for (; *s >= '0' && *s <= '9'; s++, digits++) {
		v = v * 10 + (*s - '0');
		if (v > PRIORITY_MAX)
			return false;
	}
	while (*s == ' ' || *s == '\t')
		s++;
	if (digits == 0 || *s != '\0')
		return false;
	*out = neg ? -v : v;
	return true;
}

#endif
