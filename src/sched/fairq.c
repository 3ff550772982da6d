/* fairq — see fairq.h. */
#include "sched/fairq.h"

#include <stdlib.h>
#include <string.h>

#include "core/probe.h"

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

#define FLOWS_MIN_CAP 8
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

/* ---- flows: open addressing, at most half full, backward-shift deletion ---- */

static size_t flow_home(const struct fairq *q, uint64_t flow, int priority)
{
	uint64_t h = (flow ^ ((uint64_t)(uint32_t)priority << 40)) * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h ^ (h >> 29)) & (q->flows_cap - 1);
}

static struct fairq_flow *flow_slot(const struct fairq *q, uint64_t flow, int priority)
{
	size_t mask = q->flows_cap - 1;
	for (size_t i = flow_home(q, flow, priority);; i = (i + 1) & mask) {
		struct fairq_flow *f = &q->flows[i];
		if (f->n == 0 || (f->flow == flow && f->priority == priority))
			return f;
	}
}

static struct fairq_flow *flow_find(const struct fairq *q, uint64_t flow, int priority)
{
	if (q->flows == NULL)
		return NULL;
	struct fairq_flow *f = flow_slot(q, flow, priority);
	return f->n != 0 ? f : NULL;
}

static bool flows_reserve(struct fairq *q)
{
	if (2 * (q->n_flows + 1) <= q->flows_cap)
		return true;
	size_t cap = q->flows_cap ? 2 * q->flows_cap : FLOWS_MIN_CAP;
	struct fairq_flow *old = q->flows;
	size_t old_cap = q->flows_cap;
	q->flows = calloc(cap, sizeof(*q->flows));
	if (q->flows == NULL) {
		q->flows = old;
		return false;
	}
	q->flows_cap = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].n != 0)
			*flow_slot(q, old[i].flow, old[i].priority) = old[i];
	free(old);
	return true;
}

static void flow_delete(struct fairq *q, struct fairq_flow *f)
{
	size_t mask = q->flows_cap - 1, i = (size_t)(f - q->flows);
	for (size_t j = (i + 1) & mask; q->flows[j].n != 0; j = (j + 1) & mask) {
		if (!probe_may_fill(i, j, flow_home(q, q->flows[j].flow, q->flows[j].priority)))
			continue;
		q->flows[i] = q->flows[j];
		i = j;
	}
	memset(&q->flows[i], 0, sizeof(q->flows[i]));
	q->n_flows--;
}

/* ---- the queue ---- */

bool fairq_push(struct fairq *q, struct fairq_node *node, int priority, uint64_t flow, double cost)
{
	if (!levels_reserve(q) || !flows_reserve(q))
		return false;
	struct fairq_level *l = level_get(q, priority);
	struct fairq_flow *f = flow_slot(q, flow, priority);
	if (f->n == 0) {
		f->flow = flow;
		f->priority = priority;
		f->finish = l->vtime;
		q->n_flows++;
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
		flow_delete(q, f);
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
	return q->levels_cap * sizeof(struct fairq_level) +
	       q->flows_cap * sizeof(struct fairq_flow);
}

void fairq_release(struct fairq *q)
{
	free(q->levels);
	free(q->flows);
	memset(q, 0, sizeof(*q));
}
