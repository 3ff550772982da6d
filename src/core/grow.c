/* SPDX-License-Identifier: Apache-2.0 */
/* grow — see grow.h. */
#include "core/grow.h"

#include <stdint.h>
#include <stdlib.h>

bool grow_bytes_upto(char **buf, size_t *cap, size_t need, size_t first, size_t most)
{
	if (need <= *cap)
		return true;
	if (most < need)
		most = need;
	size_t n = *cap ? *cap : first;
	if (n == 0)
		n = 1;
	while (n < need)
		n = n > most / 2 ? most : n * 2;
	if (n > most)
		n = most;
	char *b = realloc(*buf, n);
	if (b == NULL)
		return false;
	*buf = b;
	*cap = n;
	return true;
}

bool grow_bytes(char **buf, size_t *cap, size_t need, size_t first)
{
	return grow_bytes_upto(buf, cap, need, first, SIZE_MAX);
}
