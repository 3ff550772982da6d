/* SPDX-License-Identifier: Apache-2.0 */
/* fairq — see fairq.h. */
#include "sched/fairq.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

struct fairq_level {
	int priority;
	size_t n, n_flows;
	double vtime;        /* tag of this priority's last request dispatched */
	struct list waiting; /* oldest first; never empty while the level exists */
};

struct fairq_flow {
	uint64_t flow;
	int priority;
	uint32_t n; /* requests waiting; 0: a free slot */
	double finish;
};

#define LEVELS_MIN_CAP 2

/* ---- priorities: a small array, highest first ---- */

/* Levels [from, n_levels) were moved in the array: their lists' ends point
 * back at their new places. */
static void levels_moved(struct fairq *q, size_t from)
{
	for (size_t i = from; i < q->n_levels; i++)
		list_moved(&q->levels[i].waiting);
}

static struct fairq_level *level_find(const struct fairq *q, int priority)
{
	for (size_t i = 0; i < q->n_levels; i++)
		if (q->levels[i].priority == priority)
			return &q->levels[i];
	return NULL;
}

static bool levels_reserve(struct fairq *q)
{
	if (q->n_levels < q->levels_cap)
		return true;
	size_t cap = q->levels_cap ? 2 * q->levels_cap : LEVELS_MIN_CAP;
	struct fairq_level *l = realloc(q->levels, cap * sizeof(*l));
	if (l == NULL)
		return false;
	q->levels = l;
	q->levels_cap = cap;
	levels_moved(q, 0);
	return true;
}

/* The level of `priority`, made in its place when missing (room reserved). */
static struct fairq_level *level_get(struct fairq *q, int priority)
{
	size_t i = 0;
	while (i < q->n_levels && q->levels[i].priority > priority)
		i++;
	if (i < q->n_levels && q->levels[i].priority == priority)
		return &q->levels[i];
	memmove(&q->levels[i + 1], &q->levels[i], (q->n_levels - i) * sizeof(q->levels[0]));
	q->n_levels++;
	levels_moved(q, i + 1);
	memset(&q->levels[i], 0, sizeof(q->levels[i]));
	q->levels[i].priority = priority;
	list_init(&q->levels[i].waiting);
	return &q->levels[i];
}

static void level_delete(struct fairq *q, struct fairq_level *l)
{
	size_t i = (size_t)(l - q->levels);
	memmove(&q->levels[i], &q->levels[i + 1], (q->n_levels - i - 1) * sizeof(q->levels[0]));
	q->n_levels--;
	levels_moved(q, i);
}

/* ---- flows: an htable of the records themselves ---- */

struct flow_key {
	uint64_t flow;
	int priority;
};

/* One multiply: the priority (101 values) goes where a flow id's bits matter
 * least to the fold. */
static uint64_t flow_hash(uint64_t flow, int priority)
{
	return hash_u64(flow ^ ((uint64_t)(uint32_t)priority << 40));
}

static bool flow_used(const void *slot)
{
	return ((const struct fairq_flow *)slot)->n != 0;
}

static uint64_t flow_slot_hash(const void *slot, const void *ctx)
{
	(void)ctx;
	const struct fairq_flow *f = slot;
	return flow_hash(f->flow, f->priority);
}

static bool flow_match(const void *slot, const void *key, const void *ctx)
{
	(void)ctx;
	const struct fairq_flow *f = slot;
	const struct flow_key *k = key;
	return f->flow == k->flow && f->priority == k->priority;
}

static const struct htable_type flow_table = {
    .size = sizeof(struct fairq_flow),
    .used = flow_used,
    .hash = flow_slot_hash,
    .match = flow_match,
};

static struct fairq_flow *flow_find(const struct fairq *q, uint64_t flow, int priority)
{
	struct flow_key k = {flow, priority};
	return htable_find(&q->flows, &flow_table, flow_hash(flow, priority), &k, NULL);
}

/* ---- the queue ---- */

bool fairq_push(struct fairq *q, struct fairq_node *node, int priority, uint64_t flow, double cost)
{
	if (!levels_reserve(q) || !htable_reserve(&q->flows, &flow_table, NULL))
		return false;
	struct fairq_level *l = level_get(q, priority);
	struct flow_key k = {flow, priority};
	bool added;
	struct fairq_flow *f =
	    htable_get(&q->flows, &flow_table, flow_hash(flow, priority), &k, NULL, &added);
	if (added) {
		f->flow = flow;
		f->priority = priority;
		f->finish = l->vtime;
		l->n_flows++;
	}
	f->n++;
	node->flow = flow;
	node->priority = priority;
	node->cost = cost > 0 ? cost : 1;
	node->tag = f->finish > l->vtime ? f->finish : l->vtime;
	f->finish = node->tag + node->cost;
	list_insert_tail(&l->waiting, &node->link);
	l->n++;
	q->n++;
	return true;
}

void fairq_leave(struct fairq *q, struct fairq_node *node, bool dispatched)
{
	struct fairq_level *l = level_find(q, node->priority);
	if (dispatched && node->tag > l->vtime)
		l->vtime = node->tag;
	list_remove(&node->link);
	/* A flow with nothing waiting is forgotten: its next request starts at
	 * V, as a flow that comes back in DRR starts with no deficit. */
	struct fairq_flow *f = flow_find(q, node->flow, node->priority);
	if (--f->n == 0) {
		htable_delete(&q->flows, &flow_table, f, NULL);
		l->n_flows--;
	}
	if (--l->n == 0)
		level_delete(q, l);
	if (--q->n == 0)
		fairq_release(q);
}

struct fairq_node *fairq_oldest(const struct fairq *q,
                                int64_t (*arrived)(const struct fairq_node *))
{
	struct fairq_node *best = NULL;
	for (size_t i = 0; i < q->n_levels; i++) {
		struct fairq_node *h =
		    LIST_ITEM(list_first(&q->levels[i].waiting), struct fairq_node, link);
		if (best == NULL || arrived(h) < arrived(best))
			best = h;
	}
	return best;
}

struct fairq_node *fairq_newest_lowest(const struct fairq *q)
{
	if (q->n_levels == 0)
		return NULL;
	return LIST_ITEM(list_last(&q->levels[q->n_levels - 1].waiting), struct fairq_node, link);
}

size_t fairq_ahead(const struct fairq *q, int priority, const uint64_t *flow)
{
	size_t ahead = 0;
	for (size_t i = 0; i < q->n_levels; i++) {
		const struct fairq_level *l = &q->levels[i];
		if (l->priority > priority) {
			ahead += l->n;
			continue;
		}
		if (l->priority < priority)
			break;
		const struct fairq_flow *f = flow != NULL ? flow_find(q, *flow, priority) : NULL;
		size_t own = f != NULL ? f->n : 0;
		size_t others = l->n - own, other_flows = l->n_flows - (own > 0);
		size_t share = other_flows * (own + 1);
		ahead += own + (share < others ? share : others);
	}
	return ahead;
}

void fairq_level_at(const struct fairq *q, size_t i, struct fairq_level_view *out)
{
	out->priority = q->levels[i].priority;
	out->waiting = q->levels[i].n;
	out->flows = q->levels[i].n_flows;
}

size_t fairq_heap_bytes(const struct fairq *q)
{
	return q->levels_cap * sizeof(struct fairq_level) + htable_bytes(&q->flows, &flow_table);
}

void fairq_release(struct fairq *q)
{
	free(q->levels);
	htable_free(&q->flows);
	memset(q, 0, sizeof(*q));
}
