/* SPDX-License-Identifier: Apache-2.0 */
/* pheap — an intrusive pairing heap: O(1) insert and meld, O(log n)
 * amortized removal of any node, no allocation (the links live in the nodes).
 * The lane keeps its retries waiting, its requests ready to go and each busy
 * agent's parked requests in these (sched.c), each with its own order. */
#ifndef PACERD_PHEAP_H
#define PACERD_PHEAP_H

#include <stdbool.h>
#include <stddef.h>

/* A node's prev is its parent when it is the first child, else its left
 * sibling; next is its right sibling; the root has neither. */
struct pheap_node {
	struct pheap_node *prev, *next, *child;
};

/* Whether a goes before b. Equal keys must be ordered by a tie-breaker for a
 * deterministic order (a sequence number). */
typedef bool (*pheap_before_fn)(const struct pheap_node *a, const struct pheap_node *b);

struct pheap {
	struct pheap_node *root;
	size_t n;
	pheap_before_fn before;
};

static inline void pheap_init(struct pheap *h, pheap_before_fn before)
{
	h->root = NULL;
	h->n = 0;
	h->before = before;
}

void pheap_insert(struct pheap *h, struct pheap_node *x);
/* x must be in h. */
void pheap_remove(struct pheap *h, struct pheap_node *x);
/* Moves every node of `from` (same order) into `into`; `from` is empty after. */
void pheap_meld(struct pheap *into, struct pheap *from);

#endif
