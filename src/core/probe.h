/* probe — the one rule of deletion from a linear-probing hash table (backward
 * shift, no tombstones), shared by the lane's agent table (sched.c) and its
 * fair-share flow table (fairq.c). */
#ifndef PACERD_PROBE_H
#define PACERD_PROBE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the record at slot j, whose home slot is `home`, may move back into
 * the hole at slot `hole` (j follows hole in its probe run): not when its home
 * lies cyclically in (hole, j], where a lookup would no longer pass the hole. */
static inline bool probe_may_fill(size_t hole, size_t j, size_t home)
{
	return hole <= j ? !(hole < home && home <= j) : !(hole < home || home <= j);
}

#endif
