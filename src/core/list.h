/* SPDX-License-Identifier: Apache-2.0 */
/* list — one intrusive doubly-linked list (nginx's ngx_queue, HAProxy's list.h).
 *
 * A `struct list` is embedded in each object that can be on a list, and one
 * more serves as the list's head: a sentinel, so that the list is circular and
 * inserting or removing never tests for an end. An empty head points to
 * itself; list_init makes it so, and a head must be initialised before use
 * (a zeroed one is not empty, it is broken).
 *
 * A node is on at most one list at a time through one `struct list`; an object
 * on two lists embeds two. list_remove leaves the node linked to itself, so a
 * node removed twice, or removed after list_init, is harmless; a node never
 * inserted nor initialised (calloc'd) must not be removed.
 *
 * A head holds its own address in its neighbours: a head that moves (memmove,
 * realloc of an array of heads) must be told with list_moved. */
#ifndef PACERD_LIST_H
#define PACERD_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list {
	struct list *prev, *next;
};

/* The object of type `type` whose member `member` (a struct list) is at `ptr`.
 * Not LIST_ENTRY: <sys/queue.h> and libevent's event_struct.h define that
 * name for their own lists. */
#define LIST_ITEM(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Every node of `head`, first to last; the body may remove (and free) `node`,
 * but no other node: `tmp` already holds the next one. */
#define LIST_FOR_EACH_SAFE(node, tmp, head)                                                        \
	for ((node) = (head)->next, (tmp) = (node)->next; (node) != (head);                        \
	     (node) = (tmp), (tmp) = (node)->next)

static inline void list_init(struct list *l)
{
	l->prev = l;
	l->next = l;
}

static inline bool list_empty(const struct list *head)
{
	return head->next == head;
}

/* Puts `node` right after `pos` (a head or a node on the list). */
static inline void list_insert_after(struct list *pos, struct list *node)
{
	node->prev = pos;
	node->next = pos->next;
	pos->next->prev = node;
	pos->next = node;
}

static inline void list_insert_head(struct list *head, struct list *node)
{
	list_insert_after(head, node);
}

static inline void list_insert_tail(struct list *head, struct list *node)
{
	list_insert_after(head->prev, node);
}

/* Takes `node` off its list; it is left linked to itself. */
static inline void list_remove(struct list *node)
{
	node->prev->next = node->next;
	node->next->prev = node->prev;
	list_init(node);
}

/* The first (last) node, or NULL when the list is empty. */
static inline struct list *list_first(const struct list *head)
{
	return list_empty(head) ? NULL : head->next;
}

static inline struct list *list_last(const struct list *head)
{
	return list_empty(head) ? NULL : head->prev;
}

/* `head` was copied to where it is now (memmove, realloc) while its list held
 * nodes: points the first and last of them back at it. Only for a non-empty
 * list: an empty head that moved points at its old address, which may be gone,
 * and is list_init'ed instead. */
static inline void list_moved(struct list *head)
{
	head->next->prev = head;
	head->prev->next = head;
}

#endif
