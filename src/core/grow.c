/* grow — see grow.h. */
#include "core/grow.h"

#include <stdlib.h>

bool grow_bytes(char **buf, size_t *cap, size_t need, size_t first)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : first;
	if (n == 0)
		n = 1;
	while (n < need)
		n *= 2;
	char *b = realloc(*buf, n);
	if (b == NULL)
		return false;
	*buf = b;
	*cap = n;
	return true;
}
