/* SPDX-License-Identifier: Apache-2.0 */
/* fairq — the order of a lane's waiting requests: priorities, and inside one
 * priority a fair share between flows (agents, or client addresses).
 *
 * A higher priority goes first. Inside a priority, start-time fair queuing
 * (Goyal et al., SFQ): a request gets the start tag
 *     tag = max(V, finish of its flow),   finish of its flow = tag + cost
 * where V is the tag of the priority's last request dispatched, and requests
 * go in (tag, arrival) order. That is round robin between flows when every
 * cost is 1, and deficit round robin weighted by cost when the cost is a token
 * estimate, without DRR's rounds: a flow that arrives with one request gets
 * tag V and goes before every request of a backlog but the one already
 * tagged V, so one flow's backlog never delays another flow's request by
 * more than one dispatch. Inside a flow, tags grow: FIFO.
 *
 * fairq keeps the tags, the counts per priority and per flow, and each
 * priority's arrival order (for queue.max_wait_s and for evicting the newest
 * request of the lowest priority); the caller keeps the requests themselves in
 * a heap ordered by fairq_before. Pure and allocation-light: the tables exist
 * only while something waits. */
#ifndef PACERD_FAIRQ_H
#define PACERD_FAIRQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/htable.h"
#include "core/list.h"

#define FAIRQ_PRIORITY_MIN (-100)
#define FAIRQ_PRIORITY_MAX 100

/* Embedded in each waiting request. */
struct fairq_node {
	struct list link; /* its priority's arrival order */
	uint64_t flow;    /* 0 is a flow like any other */
	double tag;       /* start tag: its order inside its priority */
	double cost;      /* > 0 */
	int priority;
};

struct fairq_level; /* one per priority with requests waiting (fairq.c) */
struct fairq_flow;  /* one per (flow, priority) with requests waiting */

struct fairq {
	struct fairq_level *levels; /* highest priority first; NULL when empty */
	size_t n_levels, levels_cap;
	struct htable flows; /* of struct fairq_flow; empty with the queue */
	size_t n;            /* requests waiting */
};

/* Tags `node` and counts it at the tail of its priority's arrival order.
 * False when out of memory (nothing changed). */
bool fairq_push(struct fairq *q, struct fairq_node *node, int priority, uint64_t flow, double cost);

/* `node` leaves; dispatched: it went upstream (its tag becomes the priority's
 * V), else it was cancelled, expired or evicted. Frees the tables when the
 * last request leaves. */
void fairq_leave(struct fairq *q, struct fairq_node *node, bool dispatched);

/* Dispatch order of two pushed nodes: higher priority, then smaller tag. Ties
 * are the caller's (its arrival numbers). Returns -1, 0 or 1. */
static inline int fairq_compare(const struct fairq_node *a, const struct fairq_node *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	return 0;
}

/* The request waiting longest (its priority's oldest; compared by the
 * caller's clock through `arrived`), or NULL. O(priorities waiting). */
struct fairq_node *fairq_oldest(const struct fairq *q,
                                int64_t (*arrived)(const struct fairq_node *));

/* The newest request of the lowest priority waiting, or NULL. */
struct fairq_node *fairq_newest_lowest(const struct fairq *q);

/* Requests that would go before a new one of `flow` (NULL: a flow with
 * nothing waiting) at `priority`: all of the higher priorities, and of its own
 * an upper bound from the fair share (each other flow sends at most as many
 * as the newcomer's flow will have sent, itself included). */
size_t fairq_ahead(const struct fairq *q, int priority, const uint64_t *flow);

/* Per priority waiting, highest first: i in [0, n_levels). */
struct fairq_level_view {
	int priority;
	size_t waiting, flows;
};
void fairq_level_at(const struct fairq *q, size_t i, struct fairq_level_view *out);

/* Bytes the tables hold (memory accounting). */
size_t fairq_heap_bytes(const struct fairq *q);

/* Frees the tables (the caller dropped its requests). */
void fairq_release(struct fairq *q);

#endif
