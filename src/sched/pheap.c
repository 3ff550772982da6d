/* SPDX-License-Identifier: Apache-2.0 */
/* pheap — see pheap.h. */
#include "sched/pheap.h"

/* Two heaps (roots without siblings) into one; returns its root. */
static struct pheap_node *meld_roots(pheap_before_fn before, struct pheap_node *a,
                                     struct pheap_node *b)
{
	if (a == NULL)
		return b;
	if (b == NULL)
		return a;
	if (before(b, a)) {
		struct pheap_node *t = a;
		a = b;
		b = t;
	}
	b->prev = a;
	b->next = a->child;
	if (a->child != NULL)
		a->child->prev = b;
	a->child = b;
	a->prev = a->next = NULL;
	return a;
}

/* The siblings from `first` on into one heap: meld them in pairs left to
 * right, then the pairs right to left (the two passes that make removals
 * O(log n) amortized). Iterative: no recursion on long lists. */
static struct pheap_node *merge_siblings(pheap_before_fn before, struct pheap_node *first)
{
	struct pheap_node *pairs = NULL; /* a stack through next */
	while (first != NULL) {
		struct pheap_node *a = first, *b = a->next;
		first = b != NULL ? b->next : NULL;
		a->prev = a->next = NULL;
		if (b != NULL)
			b->prev = b->next = NULL;
		struct pheap_node *m = meld_roots(before, a, b);
		m->next = pairs;
		pairs = m;
	}
	struct pheap_node *root = NULL;
	while (pairs != NULL) {
		struct pheap_node *p = pairs;
		pairs = p->next;
		p->next = NULL;
		root = meld_roots(before, root, p);
	}
	return root;
}

void pheap_insert(struct pheap *h, struct pheap_node *x)
{
	x->prev = x->next = x->child = NULL;
	h->root = meld_roots(h->before, h->root, x);
	h->n++;
}

void pheap_remove(struct pheap *h, struct pheap_node *x)
{
	if (x == h->root) {
		h->root = merge_siblings(h->before, x->child);
	} else {
		if (x->prev->child == x)
			x->prev->child = x->next;
		else
			x->prev->next = x->next;
		if (x->next != NULL)
			x->next->prev = x->prev;
		x->prev = x->next = NULL;
		h->root = meld_roots(h->before, h->root, merge_siblings(h->before, x->child));
	}
	x->child = NULL;
	h->n--;
}

void pheap_meld(struct pheap *into, struct pheap *from)
{
	into->root = meld_roots(into->before, into->root, from->root);
	into->n += from->n;
	from->root = NULL;
	from->n = 0;
}
