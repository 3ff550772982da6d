/* SPDX-License-Identifier: Apache-2.0 */
/* pool — objects kept for reuse, and freed again when demand falls.
 *
 * An owner puts an object it is done with back (pool_put) and takes one before
 * allocating (pool_get), so that a warm process allocates nothing per request
 * or connection. The pool links its objects through a struct list inside each
 * (at link_offset: the link an object is not using while pooled, often the one
 * that put it on its owner's list of live objects) and never allocates itself:
 * the owner allocates when pool_get finds nothing, and frees when pool_put
 * refuses (at max) and through pool_trim.
 *
 * Demand: the pool remembers the fewest objects it held since the last trim
 * ("low"). That many sat unused the whole time, so pool_trim frees exactly
 * those, and a pool called on a timer follows the recent peak instead of the
 * highest concurrency ever seen (docs/development.md, the soak). */
#ifndef PACERD_POOL_H
#define PACERD_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/list.h"

struct pool {
	struct list kept;   /* most recently put first */
	size_t link_offset; /* of the struct list inside an object */
	size_t max;         /* objects kept at most; 0: no cap */
	size_t n;           /* objects kept now */
	size_t low;         /* the fewest kept since the last pool_trim */
};

/* An empty pool of objects whose struct list is at link_offset
 * (offsetof(type, member)); max 0 keeps any number. */
void pool_init(struct pool *p, size_t link_offset, size_t max);

/* The object put last, or NULL when the pool is empty (the caller allocates).
 * The object is as it was put back, its link linked to itself. */
void *pool_get(struct pool *p);

/* Keeps `obj`; false when the pool holds max already (the caller frees it). */
bool pool_put(struct pool *p, void *obj);

/* Frees, through destroy, the objects not used since the last trim (the low
 * mark; all: every one), most recently put first, and starts the next period
 * at the count left. Returns how many it freed. */
size_t pool_trim(struct pool *p, bool all, void (*destroy)(void *obj));

#endif
