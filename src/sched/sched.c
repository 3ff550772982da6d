/* SPDX-License-Identifier: Apache-2.0 */
/* sched — lanes, queue, gates, dispatch order. See sched.h.
 *
 * Dispatch order: a higher priority first; inside a priority, due retries
 * first (they already waited their turn once), then new requests in the fair
 * share order fairq gives them (round robin between flows, FIFO inside one).
 * With agents.mode serialize, a request whose agent already has one in flight
 * is passed over and the next one goes instead, so one busy agent never
 * blocks the others. Gates are lane-wide: when the first request in that
 * order cannot pass them, nothing behind it passes either (a large request is
 * never starved by small ones).
 *
 * Cost: no operation looks at every request of a queue or every lane.
 *  - The requests ready to go (new ones and due retries) are a pairing heap
 *    in dispatch order, the retries waiting for their time another by
 *    (ready_ms, seq): O(1) insert, O(log n) amortized removal, no allocation.
 *  - Agents with requests in flight are a hash table: one probe per question.
 *  - With serialize, a request passed over because its agent is busy leaves
 *    the ready heap for its agent's own heap (parked): no request is passed
 *    over twice. When the agent frees, its best parked request competes again;
 *    among such agents a heap keyed by their best parked request gives it.
 *  - Each priority's arrival order (fairq) gives the oldest request (for
 *    queue.max_wait_s) and the newest of the lowest priority (evicted when
 *    the queue is full) at once.
 *  - The lane is on its registry's idle list exactly while it is idle, so the
 *    registry evicts without scanning its table.
 *
 * What the lane is doing (learning, open, probing after a hold; refusing for
 * quota or for the day) is one struct lane_state, whose diagrams are drawn in
 * lane_mode.c; every change goes through set_state below, which stops the
 * process on a transition they do not allow. */
#include "sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/htable.h"
#include "core/log.h"
#include "provider/profile.h"
#include "sched/lane_mode.h"
#include "sched/sched_lane-t.h"

#define ITEM_OF(n) ((struct sched_item *)(void *)((char *)(n)-offsetof(struct sched_item, hn)))
#define ITEM_OF_FQ(n) ((struct sched_item *)(void *)((char *)(n)-offsetof(struct sched_item, fq)))

/* ---- the lane's state ---- */

/* Every change of a lane's state goes through here: a transition the
 * diagrams (lane_mode.c) do not allow is a bug that would let a lane refuse
 * forever or never probe, so it stops the process in every build, with what
 * it saw (as the exchange's set_state does). */
static void set_state(struct sched_lane *lane, enum lane_event e)
{
	struct lane_state was = lane->st;
	if (lane_state_next(&lane->st, e))
		return;
	fprintf(stderr, "pacerd: lane %s: bad transition %s/%s on %s\n", lane->key_id,
	        lane_mode_name(was.mode), lane_admission_name(was.admission), lane_event_name(e));
	log_flush();
	abort();
}

/* ---- the concurrency limit ---- */

/* Whether the latency of the lane's answers sets its limit as well as
 * refusals (plan concurrency.mode): always with gradient; with auto while its
 * provider is silent (no rate-limit headers), streams (what the controller
 * reads), and no refusal closed the AIMD limit, since a provider that says
 * nothing and never refuses is one that queues (docs/pacing.md, "Engines
 * that queue"). */
static bool gradient_engaged(const struct sched_lane *lane)
{
	const struct plan_conf *p = lane->plan;
	if (lane->grad == NULL || !p->concurrency.adaptive)
		return false;
	switch (p->concurrency.mode) {
	case CONCURRENCY_GRADIENT:
		return true;
	case CONCURRENCY_AUTO:
		return lane->provider_silent && lane->provider_streams && lane->conc.open;
	case CONCURRENCY_AIMD:
		break;
	}
	return false;
}

/* Allocates the lane's latency controller when its plan may engage it now:
 * a fresh one, in slow start from now_ms. Out of memory, the lane stays
 * AIMD's. */
static void gradient_attach(struct sched_lane *lane, int64_t now_ms)
{
	const struct plan_conf *p = lane->plan;
	if (lane->grad != NULL || !p->concurrency.adaptive ||
	    !(p->concurrency.mode == CONCURRENCY_GRADIENT ||
	      (p->concurrency.mode == CONCURRENCY_AUTO && lane->provider_silent &&
	       lane->provider_streams)))
		return;
	lane->grad = malloc(sizeof(*lane->grad));
	if (lane->grad == NULL)
		return;
	struct gradient_params gp;
	gradient_params_of(p, &gp);
	gradient_init(lane->grad, &gp, now_ms);
}

/* The lane's limit: AIMD's, and the gradient's where it is engaged (the
 * lower: refusals stay the loss signal). */
static unsigned lane_limit(const struct sched_lane *lane)
{
	unsigned a = aimd_limit(&lane->conc);
	if (!gradient_engaged(lane))
		return a;
	unsigned g = gradient_limit(lane->grad);
	return g < a ? g : a;
}

/* ---- a lane without headers: its slow start, its rate probe ---- */

/* The lane's quiet state (sched_lane-t.h), made on first use; NULL when out
 * of memory (the lane opens at once, and its delay's AIMD goes on alone). */
static struct sched_quiet *quiet_of(struct sched_lane *lane)
{
	if (lane->quiet == NULL && (lane->quiet = malloc(sizeof(*lane->quiet))) != NULL) {
		slow_start_end(&lane->quiet->start);
		rate_probe_init(&lane->quiet->rate);
	}
	return lane->quiet;
}

/* A lane whose provider sends no rate-limit headers, with nothing else to
 * go by, opens by a slow start (issue 30): its provider says nothing of the
 * room it has until it refuses, and a refusal (retry-after) meets whatever
 * was sent at once. With concurrency.mode auto (aimd: refusals alone, as
 * before; gradient: the latency controller's own), not where the latency
 * controller is engaged, nor where the plan's gates pace the lane. */
static bool start_wanted(const struct sched_lane *lane)
{
	return lane->conc.adaptive && lane->conc.open && lane->provider_silent &&
	       lane->plan->concurrency.mode == CONCURRENCY_AUTO && !gates_enabled(&lane->gates) &&
	       !gradient_engaged(lane);
}

/* The slow start from `window`, its first round begun at now_ms. */
static void start_from(struct sched_lane *lane, unsigned window, int64_t now_ms)
{
	struct sched_quiet *q = quiet_of(lane);
	if (q == NULL)
		return;
	slow_start_begin(&q->start, now_ms, lane->in_flight);
	aimd_start(&lane->conc, window);
}

/* What the lane knows of its provider changed: a lane that has not answered
 * yet starts slowly if it should (from concurrency.slow_start; or, when its
 * first answer is what says the provider is silent, from what went before
 * it, whose answers are the first round), and one that should not any more
 * stops. */
static void start_fit(struct sched_lane *lane)
{
	if (!start_wanted(lane)) {
		if (lane->conc.starting)
			aimd_start_stop(&lane->conc);
		if (lane->quiet != NULL)
			slow_start_end(&lane->quiet->start);
		return;
	}
	if (lane->conc.starting || lane->st.mode != LANE_LEARNING)
		return;
	if (lane->dispatch_seq == 0) {
		start_from(lane, lane->plan->concurrency.slow_start, lane->last_active_ms);
		return;
	}
	struct sched_quiet *q = quiet_of(lane);
	if (q == NULL)
		return;
	unsigned sent = lane->dispatch_seq < UINT32_MAX ? (unsigned)lane->dispatch_seq : UINT32_MAX;
	slow_start_adopt(&q->start, INT64_MIN / 2, sent, lane->in_flight);
	aimd_start(&lane->conc, lane->in_flight > LEARNED_BLIND_MAX ? (unsigned)lane->in_flight
	                                                            : LEARNED_BLIND_MAX);
}

/* ---- orders ---- */

/* Retries waiting: by ready_ms, ties in the order they were scheduled. */
static bool wait_before(const struct pheap_node *na, const struct pheap_node *nb)
{
	const struct sched_item *a = ITEM_OF(na), *b = ITEM_OF(nb);
	return a->ready_ms < b->ready_ms || (a->ready_ms == b->ready_ms && a->seq < b->seq);
}

/* Dispatch order (ready heap, parked heaps): priority, then due retries in the
 * order they came due, then new requests by fair-share tag and arrival. */
static bool dispatch_before(const struct pheap_node *na, const struct pheap_node *nb)
{
	const struct sched_item *a = ITEM_OF(na), *b = ITEM_OF(nb);
	if (a->fq.priority != b->fq.priority)
		return a->fq.priority > b->fq.priority;
	if (a->retried != b->retried)
		return a->retried;
	if (!a->retried && a->fq.tag != b->fq.tag)
		return a->fq.tag < b->fq.tag;
	return a->seq < b->seq;
}

static int64_t fq_arrived(const struct fairq_node *n)
{
	return ITEM_OF_FQ(n)->arrived_ms;
}

static struct sched_item *heap_first(const struct pheap *h)
{
	return h->root != NULL ? ITEM_OF(h->root) : NULL;
}

/* ---- agents ----
 *
 * One record per agent that has requests in flight or parked, in an htable
 * (core/htable.h) of the records themselves. The ready heap holds the agents
 * with nothing in flight and requests parked, ordered by their first parked
 * request. A record's `ready` is 1 + its place in that heap, 0 when not
 * there; a record the table moves moves its heap entry's pointer with it. */

struct sched_agent {
	uint64_t id;   /* 0: free slot */
	uint32_t busy; /* requests in flight counted for it */
	uint32_t ready;
	struct pheap park; /* its requests passed over while it was busy (serialize) */
};

struct sched_agents {
	struct htable table; /* of struct sched_agent */
	size_t n_ready;
	struct sched_agent **heap; /* heap_cap >= table.cap entries */
	size_t heap_cap;
};

static bool agent_used(const void *slot)
{
	return ((const struct sched_agent *)slot)->id != 0;
}

static uint64_t agent_hash(const void *slot, const void *ctx)
{
	(void)ctx;
	return hash_u64(((const struct sched_agent *)slot)->id);
}

static bool agent_match(const void *slot, const void *key, const void *ctx)
{
	(void)ctx;
	return ((const struct sched_agent *)slot)->id == *(const uint64_t *)key;
}

static void agent_moved(void *slot, void *ctx)
{
	struct sched_agents *a = ctx;
	struct sched_agent *ag = slot;
	if (ag->ready)
		a->heap[ag->ready - 1] = ag;
}

static const struct htable_type agent_table = {
    .size = sizeof(struct sched_agent),
    .used = agent_used,
    .hash = agent_hash,
    .match = agent_match,
    .moved = agent_moved,
};

static size_t agents_bytes(const struct sched_agents *a)
{
	return sizeof(*a) + htable_bytes(&a->table, &agent_table) +
	       a->heap_cap * sizeof(a->heap[0]);
}

static void agents_free(struct sched_agents *a)
{
	if (a == NULL)
		return;
	htable_free(&a->table);
	free(a->heap);
	free(a);
}

static struct sched_agent *agent_find(const struct sched_lane *lane, uint64_t id)
{
	struct sched_agents *a = lane->agents;
	if (a == NULL || id == 0)
		return NULL;
	return htable_find(&a->table, &agent_table, hash_u64(id), &id, NULL);
}

/* Whether an agent has a request in flight that counts (see agent_count). */
static bool agent_busy(const struct sched_lane *lane, uint64_t id)
{
	const struct sched_agent *ag = agent_find(lane, id);
	return ag != NULL && ag->busy > 0;
}

/* --- the ready heap, by each agent's first parked request --- */

static bool ready_before(const struct sched_agent *a, const struct sched_agent *b)
{
	return dispatch_before(a->park.root, b->park.root);
}

static void ready_set(struct sched_agents *a, size_t i, struct sched_agent *ag)
{
	a->heap[i] = ag;
	ag->ready = (uint32_t)(i + 1);
}

static void ready_sift(struct sched_agents *a, size_t i)
{
	struct sched_agent *ag = a->heap[i];
	while (i > 0 && ready_before(ag, a->heap[(i - 1) / 2])) {
		ready_set(a, i, a->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= a->n_ready)
			break;
		if (c + 1 < a->n_ready && ready_before(a->heap[c + 1], a->heap[c]))
			c++;
		if (!ready_before(a->heap[c], ag))
			break;
		ready_set(a, i, a->heap[c]);
		i = c;
	}
	ready_set(a, i, ag);
}

static void ready_push(struct sched_agents *a, struct sched_agent *ag)
{
	ready_set(a, a->n_ready++, ag);
	ready_sift(a, a->n_ready - 1);
}

static void ready_remove(struct sched_agents *a, struct sched_agent *ag)
{
	size_t i = ag->ready - 1;
	ag->ready = 0;
	if (--a->n_ready > i) {
		ready_set(a, i, a->heap[a->n_ready]);
		ready_sift(a, i);
	}
}

/* --- records --- */

static void agent_delete(struct sched_agents *a, struct sched_agent *ag)
{
	if (ag->ready)
		ready_remove(a, ag);
	htable_delete(&a->table, &agent_table, ag, a);
}

/* A record goes once nothing is in flight for it and nothing parked. */
static void agent_maybe_delete(struct sched_lane *lane, struct sched_agent *ag)
{
	if (ag->busy == 0 && ag->park.n == 0)
		agent_delete(lane->agents, ag);
}

/* The record of `id`, created when missing; NULL when out of memory. */
static struct sched_agent *agent_get(struct sched_lane *lane, uint64_t id)
{
	struct sched_agents *a = lane->agents;
	if (a == NULL) {
		a = calloc(1, sizeof(*a));
		if (a == NULL)
			return NULL;
		lane->agents = a;
	}
	if (!htable_reserve(&a->table, &agent_table, a))
		return NULL;
	if (a->heap_cap < a->table.cap) {
		struct sched_agent **heap = realloc(a->heap, a->table.cap * sizeof(*heap));
		if (heap == NULL)
			return NULL;
		a->heap = heap;
		a->heap_cap = a->table.cap;
	}
	bool added;
	struct sched_agent *ag =
	    htable_get(&a->table, &agent_table, hash_u64(id), &id, NULL, &added);
	if (added) {
		ag->id = id;
		pheap_init(&ag->park, dispatch_before);
	}
	return ag;
}

/* A request of `it->agent` goes in flight. With the table bounded by memory
 * only, a record that cannot be made leaves the agent not serialized (rather
 * than failing the request). */
static void agent_count(struct sched_lane *lane, struct sched_item *it)
{
	if (it->agent == 0 || lane->agents_mode == AGENTS_OFF)
		return;
	struct sched_agent *ag = agent_get(lane, it->agent);
	if (ag == NULL)
		return;
	ag->busy++;
	it->agent_counted = true;
	if (ag->ready)
		ready_remove(lane->agents, ag);
}

static void agent_uncount(struct sched_lane *lane, struct sched_item *it)
{
	if (!it->agent_counted)
		return;
	it->agent_counted = false;
	struct sched_agent *ag = agent_find(lane, it->agent);
	if (ag == NULL || --ag->busy > 0)
		return;
	if (ag->park.n > 0)
		ready_push(lane->agents, ag);
	else
		agent_delete(lane->agents, ag);
}

/* --- parking (serialize) --- */

/* `it`, passed over because its agent is busy, leaves the ready heap for its
 * agent's own, in the same order. */
static void park(struct sched_lane *lane, struct sched_item *it)
{
	struct sched_agent *ag = agent_find(lane, it->agent);
	pheap_remove(&lane->ready, &it->hn);
	pheap_insert(&ag->park, &it->hn);
	it->park_epoch = lane->park_epoch;
	lane->n_parked++;
}

/* Parked: on its agent's heap since the lane last let every parked request
 * go (unpark_all moves to a new epoch instead of visiting each one). */
static bool is_parked(const struct sched_lane *lane, const struct sched_item *it)
{
	return it->park_epoch == lane->park_epoch;
}

static void unpark(struct sched_lane *lane, struct sched_item *it)
{
	struct sched_agent *ag = agent_find(lane, it->agent);
	bool was_first = ag->park.root == &it->hn;
	pheap_remove(&ag->park, &it->hn);
	it->park_epoch = 0;
	lane->n_parked--;
	if (ag->ready && ag->park.n == 0)
		ready_remove(lane->agents, ag);
	else if (ag->ready && was_first)
		ready_sift(lane->agents, ag->ready - 1);
	agent_maybe_delete(lane, ag);
}

/* Every parked request back into the ready heap: agents.mode is no longer
 * serialize (a reload), or the lane drains. */
static void unpark_all(struct sched_lane *lane)
{
	struct sched_agents *a = lane->agents;
	if (a == NULL || lane->n_parked == 0)
		return;
	a->n_ready = 0;
	struct htable_iter it;
	htable_iter_init(&a->table, &agent_table, &it);
	for (struct sched_agent *ag;
	     (ag = htable_iter_next(&a->table, &agent_table, &it)) != NULL;) {
		pheap_meld(&lane->ready, &ag->park);
		ag->ready = 0;
		if (ag->busy == 0)
			htable_iter_delete(&a->table, &agent_table, &it, a);
	}
	lane->n_parked = 0;
	if (++lane->park_epoch == 0)
		lane->park_epoch = 1; /* 0 marks an item never parked */
}

/* ---- the lane's lists ---- */

/* Takes a SCHED_QUEUED item out of the ready heap (or its agent's), and a new
 * request out of fairq (dispatched: it went upstream). */
static void queue_remove(struct sched_lane *lane, struct sched_item *it, bool dispatched)
{
	if (is_parked(lane, it))
		unpark(lane, it);
	else
		pheap_remove(&lane->ready, &it->hn);
	if (it->retried)
		lane->n_due--;
	else
		fairq_leave(&lane->fq, &it->fq, dispatched);
}

/* ---- the idle list ---- */

static void idle_unlink(struct sched_lane *lane)
{
	list_remove(&lane->idle_link);
	lane->idle_linked = false;
	lane->idle_list->n--;
}

/* At the hot end. The list stays ordered by last_active_ms, so that an idle
 * sweep stops at the first lane not expired: a lane that goes idle without a
 * clock reading (sched_cancel) counts as active when the hottest lane was,
 * which is no later than now. */
static void idle_link(struct sched_lane *lane)
{
	struct sched_idle_list *l = lane->idle_list;
	struct list *last = list_last(&l->lanes);
	const struct sched_lane *hot = last ? LIST_ITEM(last, struct sched_lane, idle_link) : NULL;
	if (hot != NULL && lane->last_active_ms < hot->last_active_ms)
		lane->last_active_ms = hot->last_active_ms;
	list_insert_tail(&l->lanes, &lane->idle_link);
	lane->idle_linked = true;
	l->n++;
}

/* Puts the lane on its idle list or takes it off, after any change of what it
 * holds. */
static void idle_update(struct sched_lane *lane)
{
	if (lane->idle_list == NULL)
		return;
	bool idle = sched_lane_idle(lane);
	if (idle && !lane->idle_linked)
		idle_link(lane);
	else if (!idle && lane->idle_linked)
		idle_unlink(lane);
}

/* ---- learned budgets ---- */

/* What a lane reads for a budget no response has reported: nothing
 * observed; and the table a lane points to until one does. Read-only:
 * sched.c writes only to a lane's own allocations. */
static const struct learned sched_no_learned;
static struct learned *const sched_no_budgets[RLH_N_BUDGETS] = {
    (struct learned *)&sched_no_learned, (struct learned *)&sched_no_learned,
    (struct learned *)&sched_no_learned, (struct learned *)&sched_no_learned,
    (struct learned *)&sched_no_learned};
_Static_assert(RLH_N_BUDGETS == 5, "one sched_no_budgets entry per budget");

/* Whether the lane has a table of its own (a response reported a budget). */
static bool lane_has_budgets(const struct sched_lane *lane)
{
	return lane->learned != NULL && lane->learned != (struct learned **)sched_no_budgets;
}

/* Whether budget b has an allocation of its own (a response reported it). */
static bool budget_learns(const struct sched_lane *lane, int b)
{
	return lane_has_budgets(lane) && lane->learned[b] != &sched_no_learned;
}

/* Budget b as read: the lane's, or the one that observed nothing. */
static const struct learned *budget(const struct sched_lane *lane, int b)
{
	return budget_learns(lane, b) ? lane->learned[b] : &sched_no_learned;
}

static bool lane_learns(const struct sched_lane *lane)
{
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (budget_learns(lane, b))
			return true;
	return false;
}

static void lane_learn_none(struct sched_lane *lane)
{
	lane->learned = (struct learned **)sched_no_budgets;
}

/* The lane's own table of budgets, made the first time one is learned. */
static bool lane_budgets(struct sched_lane *lane)
{
	if (lane_has_budgets(lane))
		return true;
	struct learned **t = malloc(sizeof(sched_no_budgets));
	if (t == NULL)
		return false;
	memcpy(t, sched_no_budgets, sizeof(sched_no_budgets));
	lane->learned = t;
	return true;
}

/* Allocates budget b, the first time a response reports it (most answers
 * report one or two of RLH_N_BUDGETS), set up as if it had followed every
 * dispatch so far (learned_charge's marks and its last pass), so that
 * answers to requests sent before still line up. */
static bool lane_learn_start(struct sched_lane *lane, int b)
{
	if (budget_learns(lane, b))
		return true;
	struct learned *l = lane_budgets(lane) ? malloc(sizeof(*l)) : NULL;
	if (l == NULL)
		return false;
	struct learned_params lp;
	learned_params_default(&lp);
	lp.proactive_threshold = lane->plan->proactive_threshold;
	/* OpenAI-style resets are Go durations to the millisecond; the others
	 * (RFC 3339 instants, integer seconds) are whole seconds. */
	if (lane->fine_resets)
		lp.time_noise_ms = 50;
	learned_init(l, &lp);
	l->cum_cost = lane->charged[b];
	l->passed = lane->dispatch_seq > 0;
	l->last_pass_ms = l->passed ? lane->last_dispatch_ms : 0;
	lane->learned[b] = l;
	return true;
}

bool sched_lane_inherit(struct sched_lane *to, const struct sched_lane *from)
{
	if (to == from || to->dispatch_seq > 0 || lane_learns(to) || !lane_learns(from))
		return false;
	struct learned *l[RLH_N_BUDGETS] = {NULL};
	if (!lane_budgets(to))
		return false;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		if (!budget_learns(from, b))
			continue;
		l[b] = malloc(sizeof(*l[b]));
		if (l[b] == NULL) {
			for (int i = 0; i < b; i++)
				free(l[i]);
			return false;
		}
		memcpy(l[b], from->learned[b], sizeof(*l[b]));
	}
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (l[b] != NULL)
			to->learned[b] = l[b];
	memcpy(to->charged, from->charged, sizeof(to->charged));
	to->conc = from->conc;
	if (from->grad != NULL && (to->grad != NULL || (to->grad = malloc(sizeof(*to->grad)))))
		*to->grad = *from->grad;
	to->delay = from->delay;
	if (from->quiet != NULL && quiet_of(to) != NULL)
		*to->quiet = *from->quiet;
	else if (to->conc.starting)
		aimd_start_stop(&to->conc); /* no round to grow it by */
	if (from->hold_until_ms > to->hold_until_ms)
		to->hold_until_ms = from->hold_until_ms;
	/* It knows the budgets now: its first answer would teach it nothing
	 * it must wait for. */
	if (to->st.mode == LANE_LEARNING)
		set_state(to, LANE_EV_ANSWERED);
	return true;
}

/* ---- across a restart (sched.h) ---- */

unsigned sched_lane_export(const struct sched_lane *lane, int64_t now_ms, int64_t wall_ms,
                           struct sched_lane_saved *out, struct learned *budgets)
{
	int64_t to_wall = wall_ms - now_ms;
	memset(out, 0, sizeof(*out));
	snprintf(out->provider, sizeof(out->provider), "%s", lane->provider->name);
	out->scope = lane->scope;
	memcpy(out->scope_name, lane->key_id, sizeof(out->scope_name));
	out->scope_name[sizeof(out->scope_name) - 1] = '\0';
	if (lane->model != NULL)
		snprintf(out->model, sizeof(out->model), "%s", lane->model);
	out->last_active_ms = lane->last_active_ms + to_wall;
	out->answered = lane->st.mode != LANE_LEARNING;
	out->probing = lane->st.mode == LANE_PROBING || lane_probe_out(lane->st);
	out->hold_until_ms = lane->hold_until_ms > now_ms ? lane->hold_until_ms + to_wall : 0;
	aimd_save(&lane->conc, &lane->delay, &out->aimd);
	out->strict_margin = lane->margin != NULL ? lane->margin->frac : 0;
	out->quota_out = lane_quota_out(lane->st);
	out->quota_probe_at_ms = out->quota_out ? lane->quota_probe_at_ms + to_wall : 0;
	if (lane->day.resets_at_ms != 0) {
		out->day_requests = lane->day.requests;
		out->day_tokens = lane->day.tokens;
		out->day_resets_at_ms = lane->day.resets_at_ms + to_wall;
	}
	unsigned n = 0;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct learned *l = sched_learned(lane, b);
		if (l == NULL)
			continue;
		budgets[n] = *l;
		learned_shift(&budgets[n++], (double)to_wall);
		out->budgets |= (uint8_t)(1u << b);
	}
	out->n_outputs = (uint8_t)cost_outputs_save(&lane->cost, out->outputs, &out->output_rule);
	return n;
}

int64_t sched_lane_restored_age_ms(const struct sched_lane *lane)
{
	return lane->restored ? (int64_t)lane->restored_age_s * 1000 : -1;
}

bool sched_lane_import(struct sched_lane *lane, const struct sched_lane_saved *s,
                       const struct learned *budgets, int64_t now_ms, int64_t wall_ms)
{
	if (lane->dispatch_seq > 0 || lane_learns(lane))
		return false;
	int64_t to_mono = now_ms - wall_ms;
	unsigned i = 0;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		if (!(s->budgets & (1u << b)))
			continue;
		const struct learned *from = &budgets[i++];
		if (!lane_learn_start(lane, b))
			break; /* out of memory: the answers teach it again */
		struct learned *l = lane->learned[b];
		struct learned_params p = l->p; /* this lane's plan and dialect */
		*l = *from;
		l->p = p;
		learned_shift(l, (double)to_mono);
		/* Its marks count on from where the saved ones stood. */
		lane->charged[b] = l->cum_cost;
	}
	/* What the signals taught goes stale with idleness, as in
	 * sched_submit: a lane idle for reopen_after_s is open again. */
	struct aimd_saved a = s->aimd;
	if (wall_ms - s->last_active_ms >= (int64_t)lane->plan->concurrency.reopen_after_s * 1000)
		a.open = true;
	aimd_resume(&lane->conc, &lane->delay, &a);
	/* A margin the path had widened: as if adopted from the store. */
	if (s->strict_margin > MARGIN_MIN)
		sched_margin_adopt(lane, s->strict_margin, now_ms);
	if (s->answered && lane->st.mode == LANE_LEARNING)
		set_state(lane, LANE_EV_ANSWERED);
	if (s->hold_until_ms > wall_ms) {
		sched_hold(lane, s->hold_until_ms + to_mono);
	} else if (s->probing) {
		/* The provider had refused and no probe has said it is back:
		 * one request goes first. */
		set_state(lane, LANE_EV_HOLD);
	}
	if (s->quota_out) {
		set_state(lane, LANE_EV_QUOTA_OUT);
		lane->quota_seq = 0; /* any success of this process ends it */
		lane->quota_probe_at_ms =
		    s->quota_probe_at_ms > wall_ms ? s->quota_probe_at_ms + to_mono : now_ms;
	}
	/* The day's spending stands; when it ends is asked again of the plan
	 * (sched_day_reset), whose zone may have changed. */
	if (s->day_resets_at_ms > wall_ms) {
		lane->day.requests = s->day_requests;
		lane->day.tokens = s->day_tokens;
	}
	(void)cost_outputs_resume(&lane->cost, s->outputs, s->n_outputs, s->output_rule);
	/* how old it was when taken up: to the second, two bytes' worth */
	int64_t age_s = (wall_ms - s->last_active_ms) / 1000;
	lane->restored = true;
	lane->restored_age_s = (uint16_t)(age_s < 0 ? 0 : age_s > UINT16_MAX ? UINT16_MAX : age_s);
	return true;
}

const struct learned *sched_learned(const struct sched_lane *lane, int b)
{
	if (b < 0 || b >= RLH_N_BUDGETS || !budget_learns(lane, b) || lane->learned[b]->n_obs == 0)
		return NULL;
	return lane->learned[b];
}

/* ---- lane setup ---- */

void sched_lane_init(struct sched_lane *lane, const struct provider_conf *prov,
                     const struct plan_conf *plan, enum agents_mode agents, int64_t now_ms)
{
	memset(lane, 0, sizeof(*lane));
	lane->provider = prov;
	lane->plan = plan;
	lane->agents_mode = agents;
	lane->st = LANE_STATE_FRESH;
	lane->fine_resets = prov->dialect == DIALECT_OPENAI;
	lane_learn_none(lane);
	gates_init_burst(&lane->gates, plan, prov->dialect == DIALECT_ANTHROPIC ? 60 : 1);
	cost_lane_init(&lane->cost);
	aimd_init_plan(&lane->conc, plan);
	gradient_attach(lane, now_ms);
	aimd_delay_init_plan(&lane->delay, plan);
	lane->last_dispatch_ms = INT64_MIN / 2;
	lane->last_active_ms = now_ms;
	pheap_init(&lane->ready, dispatch_before);
	pheap_init(&lane->waiting, wait_before);
	lane->park_epoch = 1;
}

void sched_lane_release(struct sched_lane *lane)
{
	if (lane->idle_linked)
		idle_unlink(lane);
	lane->idle_list = NULL;
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (budget_learns(lane, b))
			free(lane->learned[b]);
	if (lane_has_budgets(lane))
		free(lane->learned);
	lane_learn_none(lane);
	free(lane->margin);
	lane->margin = NULL;
	agents_free(lane->agents);
	lane->agents = NULL;
	free(lane->grad);
	lane->grad = NULL;
	free(lane->quiet);
	lane->quiet = NULL;
	fairq_release(&lane->fq);
	cost_lane_free(&lane->cost);
}

void sched_lane_track_idle(struct sched_lane *lane, struct sched_idle_list *list)
{
	if (lane->idle_linked)
		idle_unlink(lane);
	lane->idle_list = list;
	idle_update(lane);
}

size_t sched_lane_heap_bytes(const struct sched_lane *lane)
{
	size_t n = 0;
	if (lane_has_budgets(lane))
		n += sizeof(sched_no_budgets);
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (budget_learns(lane, b))
			n += sizeof(struct learned);
	if (lane->agents != NULL)
		n += agents_bytes(lane->agents);
	if (lane->margin != NULL)
		n += sizeof(*lane->margin);
	if (lane->grad != NULL)
		n += sizeof(*lane->grad);
	if (lane->quiet != NULL)
		n += sizeof(*lane->quiet);
	return n + fairq_heap_bytes(&lane->fq) + cost_lane_heap_bytes(&lane->cost);
}

void sched_lane_reconfigure(struct sched_lane *lane, const struct provider_conf *prov,
                            const struct plan_conf *plan, enum agents_mode agents, int64_t now_ms)
{
	lane->provider = prov;
	lane->agents_mode = agents;
	lane->plan = plan;
	/* What the day spent stands; when it starts over is asked again (the
	 * reset time or zone may have changed), and a larger budget may fit. */
	lane->day.resets_at_ms = 0;
	if (lane_day_out(lane->st))
		set_state(lane, LANE_EV_DAY_NEW);
	gates_reconfigure_scaled(&lane->gates, plan, lane->gates_scale > 0 ? lane->gates_scale : 1,
	                         now_ms);
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (budget_learns(lane, b))
			lane->learned[b]->p.proactive_threshold = plan->proactive_threshold;
	aimd_reconfigure(&lane->conc, plan);
	if (lane->grad != NULL) {
		struct gradient_params gp;
		gradient_params_of(plan, &gp);
		gradient_reconfigure(lane->grad, &gp, now_ms);
	}
	gradient_attach(lane, now_ms);
	if (!start_wanted(lane) && lane->conc.starting)
		start_fit(lane); /* a plan that paces it now, or another mode */
	double delay = lane->delay.delay_ms;
	aimd_delay_init_plan(&lane->delay, plan);
	if (lane->delay.adaptive && delay > lane->delay.min_ms)
		lane->delay.delay_ms = delay < lane->delay.max_ms ? delay : lane->delay.max_ms;
}

void sched_lane_set_shell(struct sched_lane *lane, void *shell)
{
	lane->shell = shell;
}

unsigned sched_concurrency_limit(const struct sched_lane *lane)
{
	return lane_limit(lane);
}

bool sched_timing_wanted(const struct sched_lane *lane)
{
	return gradient_engaged(lane);
}

bool sched_first_token(struct sched_lane *lane, const struct sched_item *it, double first_ms,
                       double prompt_tokens, int64_t now_ms)
{
	if (it->state != SCHED_IN_FLIGHT || !gradient_engaged(lane))
		return false;
	unsigned was = lane_limit(lane);
	struct gradient_first f = {
	    .dispatched_ms = it->dispatched_ms,
	    .first_ms = first_ms,
	    .prompt_tokens = prompt_tokens,
	    .in_flight = lane->in_flight,
	};
	gradient_on_first(lane->grad, now_ms, &f);
	return lane_limit(lane) > was;
}

bool sched_answer_timed(struct sched_lane *lane, const struct sched_item *it,
                        const struct sched_timing *tm, int64_t now_ms)
{
	if (it->state != SCHED_IN_FLIGHT || !gradient_engaged(lane))
		return false;
	struct gradient_sample s = {
	    .dispatched_ms = it->dispatched_ms,
	    .first_ms = tm->first_ms,
	    .stream_ms = tm->stream_ms,
	    .max_gap_ms = tm->max_gap_ms,
	    .events = tm->events,
	    .prompt_tokens = tm->prompt_tokens,
	    .in_flight = lane->in_flight,
	    .saturated = it->saturated,
	};
	unsigned was = lane_limit(lane);
	gradient_on_sample(lane->grad, now_ms, &s);
	return lane_limit(lane) != was;
}

bool sched_lane_idle(const struct sched_lane *lane)
{
	return lane->ready.n == 0 && lane->n_parked == 0 && lane->in_flight == 0 &&
	       lane->waiting.n == 0 && lane->asking == 0;
}

/* ---- submit ---- */

/* While the quota is out, one request goes upstream per quota_probe_s, and
 * none before a hold the provider asked for ends (a daily cap's reset). */
static int64_t quota_next_probe(const struct sched_lane *lane, int64_t now_ms)
{
	int64_t t = now_ms + (int64_t)lane->plan->quota_probe_s * 1000;
	return t > lane->hold_until_ms ? t : lane->hold_until_ms;
}

/* The queue is full: the newest request of the lowest priority makes room for
 * one of a higher priority, else the newcomer is the one refused. */
static bool queue_has_room(struct sched_lane *lane, int priority, struct sched_item **evicted)
{
	if (lane->fq.n < lane->plan->queue.max_depth)
		return true;
	struct fairq_node *low = fairq_newest_lowest(&lane->fq);
	if (low == NULL || low->priority >= priority)
		return false;
	struct sched_item *it = ITEM_OF_FQ(low);
	queue_remove(lane, it, false);
	it->state = SCHED_NONE;
	lane->stats.rejected_queue_full++;
	*evicted = it;
	return true;
}

enum sched_submit_result sched_submit(struct sched_lane *lane, struct sched_item *it,
                                      const struct sched_request *rq, int64_t now_ms,
                                      struct sched_item **evicted)
{
	*evicted = NULL;
	/* What the signals taught goes stale with idleness: a lane idle for
	 * reopen_after_s is open again, as a fresh one, and its latency
	 * controller starts slowly again. */
	if (sched_lane_idle(lane) && now_ms - lane->last_active_ms >=
	                                 (int64_t)lane->plan->concurrency.reopen_after_s * 1000) {
		if (!lane->conc.open)
			aimd_reopen(&lane->conc);
		if (lane->grad != NULL)
			gradient_restart(lane->grad, now_ms);
		if (start_wanted(lane))
			start_from(lane, lane->plan->concurrency.slow_start, now_ms);
	}
	lane->last_active_ms = now_ms;
	enum sched_submit_result refused = SCHED_OK;
	if (lane_quota_out(lane->st) && now_ms < lane->quota_probe_at_ms) {
		lane->stats.quota_refused++;
		refused = SCHED_QUOTA;
	} else if (lane_day_out(lane->st)) {
		lane->stats.day_refused++;
		refused = SCHED_DAY_OUT;
	} else if (lane->agents_mode == AGENTS_REJECT && agent_busy(lane, rq->agent)) {
		lane->stats.rejected_agent_busy++;
		refused = SCHED_AGENT_BUSY;
	} else if (!queue_has_room(lane, rq->priority, evicted)) {
		lane->stats.rejected_queue_full++;
		refused = SCHED_QUEUE_FULL;
	}
	if (refused == SCHED_OK) {
		memset(it, 0, sizeof(*it));
		double cost = rq->cost_prompt + rq->cost_output;
		if (!fairq_push(&lane->fq, &it->fq, rq->priority, rq->flow, cost))
			refused = SCHED_QUEUE_FULL; /* out of memory */
	}
	if (refused != SCHED_OK) {
		/* Still a use: an idle lane moves to the hot end. */
		if (lane->idle_linked) {
			idle_unlink(lane);
			idle_link(lane);
		}
		return refused;
	}
	/* Accepted while the quota is out: this one goes upstream as the
	 * probe, the next one an interval later. */
	if (lane_quota_out(lane->st))
		lane->quota_probe_at_ms = quota_next_probe(lane, now_ms);
	it->lane = lane;
	it->state = SCHED_QUEUED;
	it->arrived_ms = it->queued_ms = now_ms;
	it->cost_prompt = rq->cost_prompt;
	it->cost_output = rq->cost_output;
	it->cost_tokens = rq->cost_prompt + rq->cost_output;
	it->agent = lane->agents_mode == AGENTS_OFF ? 0 : rq->agent;
	it->seq = ++lane->seq;
	pheap_insert(&lane->ready, &it->hn);
	idle_update(lane);
	return SCHED_OK;
}

/* ---- the gates ---- */

/* The units a request costs in each learned budget. */
static double budget_cost(const struct sched_item *it, int budget)
{
	switch (budget) {
	case RLH_REQUESTS:
		return 1;
	case RLH_TOKENS:
		return it->cost_tokens;
	case RLH_INPUT_TOKENS:
		return it->cost_prompt;
	case RLH_OUTPUT_TOKENS:
		return it->cost_output;
	default: /* the project's tokens count what the model's do */
		return it->cost_tokens;
	}
}

/* Earliest instant `it` may leave, by every time gate (concurrency and agents
 * are checked separately). */
static double lane_ready_at(const struct sched_lane *lane, const struct sched_item *it,
                            double precise_ms)
{
	int64_t now_ms = (int64_t)precise_ms;
	double t = gates_ready_at(&lane->gates, precise_ms, it->cost_tokens, it->cost_prompt,
	                          it->cost_output);
	/* A budget no response reported lets everything pass. */
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		/* A token budget without a token estimate cannot be paced. */
		double cost = budget_cost(it, b);
		if (b != RLH_REQUESTS && cost <= 0)
			continue;
		double g = (double)learned_ready_at(budget(lane, b), now_ms, cost);
		if (g > t)
			t = g;
	}
	if (lane->st.mode == LANE_LEARNING && !lane->provider_silent &&
	    !gates_enabled(&lane->gates)) {
		double b =
		    (double)learned_blind_ready_at(lane->in_flight, lane->last_dispatch_ms, now_ms);
		if (b > t)
			t = b;
	}
	if ((double)lane->hold_until_ms > t)
		t = (double)lane->hold_until_ms;
	if (lane->gates_mode == SCHED_GATES_SHARED && (double)lane->shared_until_ms > t)
		t = (double)lane->shared_until_ms;
	double d = (double)aimd_delay_ready_at(&lane->delay, now_ms);
	if (d > t)
		t = d;
	return t;
}

/* The first request allowed to go next, ignoring time: the ready heap's
 * first; with serialize, the first whose agent is free (a free agent's best
 * parked request competes with it). Not const: with serialize it parks what
 * it passes over. */
static struct sched_item *first_eligible(struct sched_lane *lane)
{
	if (lane->agents_mode != AGENTS_SERIALIZE) {
		unpark_all(lane);
		return heap_first(&lane->ready);
	}
	const struct sched_agents *a = lane->agents;
	struct pheap_node *parked = a != NULL && a->n_ready > 0 ? a->heap[0]->park.root : NULL;
	for (;;) {
		struct sched_item *it = heap_first(&lane->ready);
		if (parked != NULL && (it == NULL || dispatch_before(parked, &it->hn)))
			return ITEM_OF(parked);
		if (it == NULL || !agent_busy(lane, it->agent))
			return it;
		park(lane, it);
	}
}

static void promote_due_retries(struct sched_lane *lane, int64_t now_ms)
{
	while (lane->waiting.root != NULL && ITEM_OF(lane->waiting.root)->ready_ms <= now_ms) {
		struct sched_item *it = ITEM_OF(lane->waiting.root);
		pheap_remove(&lane->waiting, &it->hn);
		it->state = SCHED_QUEUED;
		it->retried = true;
		it->queued_ms = now_ms;
		it->seq = ++lane->seq;
		pheap_insert(&lane->ready, &it->hn);
		lane->n_due++;
	}
}

/* Whether a capacity answer not decided yet holds the lane at now_ms. */
static bool pending_hold(const struct sched_lane *lane, int64_t now_ms)
{
	return lane->holding > 0 && now_ms < lane->pending_until_ms;
}

/* Whether a hold keeps everything back whatever the gates say: a capacity
 * answer not decided yet, or the probe after a hold still out. */
static bool held_back(const struct sched_lane *lane, int64_t now_ms)
{
	return pending_hold(lane, now_ms) || lane_probe_out(lane->st);
}

/* A learned budget at 0 until its reset is a hold like a retry-after: its end
 * is probed with one request. Not when the reset is nearer than a round trip:
 * the probe would cost more time than the hold (a small bucket that refills
 * every 20 ms reports 0 all the time). */
static void note_learned_hold(struct sched_lane *lane, const struct sched_item *it, int64_t now_ms)
{
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		double cost = budget_cost(it, b);
		if (b != RLH_REQUESTS && cost <= 0)
			continue;
		int64_t until = learned_held_until(budget(lane, b), now_ms, cost);
		if (until > now_ms && (double)(until - now_ms) >= lane->conc.rtt_ms) {
			set_state(lane, LANE_EV_HOLD);
			return;
		}
	}
}

bool sched_day_limited(const struct sched_lane *lane)
{
	return lane->plan->max_requests_per_day > 0 || lane->plan->max_tokens_per_day > 0;
}

/* Whether `it` fits in what is left of the day's budget. */
static bool day_fits(const struct sched_lane *lane, const struct sched_item *it)
{
	const struct plan_conf *p = lane->plan;
	if (p->max_requests_per_day > 0 && lane->day.requests + 1 > p->max_requests_per_day)
		return false;
	return !(p->max_tokens_per_day > 0 &&
	         lane->day.tokens + it->cost_tokens > p->max_tokens_per_day);
}

void sched_day_reset(struct sched_lane *lane, int64_t resets_at_ms, bool new_day)
{
	if (new_day) {
		lane->day.requests = lane->day.tokens = 0;
		if (lane_day_out(lane->st))
			set_state(lane, LANE_EV_DAY_NEW);
	}
	lane->day.resets_at_ms = resets_at_ms;
}

bool sched_day_out(const struct sched_lane *lane)
{
	return lane_day_out(lane->st);
}

struct sched_item *sched_next(struct sched_lane *lane, double precise_ms)
{
	int64_t now_ms = (int64_t)precise_ms;
	promote_due_retries(lane, now_ms);
	if (lane->in_flight >= lane_limit(lane) || held_back(lane, now_ms))
		return NULL;
	struct sched_item *it = first_eligible(lane);
	if (it == NULL)
		return NULL;
	if (lane_ready_at(lane, it, precise_ms) > precise_ms) {
		note_learned_hold(lane, it, now_ms);
		return NULL;
	}
	if (!day_fits(lane, it)) {
		set_state(lane, LANE_EV_DAY_SPENT); /* FIFO: nothing behind it goes either */
		return NULL;
	}
	if (lane->gates_mode == SCHED_GATES_SHARED) {
		if (lane->permits == 0)
			return NULL; /* the lanes ask the store (sched_permits_wanted) */
		lane->permits--;
	}

	queue_remove(lane, it, true);
	int64_t waited = now_ms - it->queued_ms;
	if (waited > lane->stats.queue_wait_max_ms)
		lane->stats.queue_wait_max_ms = waited;

	it->state = SCHED_IN_FLIGHT;
	it->gap_before_ms = fmin((double)now_ms - (double)lane->last_dispatch_ms, 1e12);
	it->dispatched_ms = now_ms;
	it->dispatch_seq = ++lane->dispatch_seq;
	it->attempts++;
	it->hinted = false;
	if (lane->st.mode == LANE_PROBING) {
		set_state(lane, LANE_EV_PROBE_SENT);
		it->probe = true;
		lane->stats.probes++;
	}
	lane->in_flight++;
	it->saturated = lane->in_flight >= lane_limit(lane);
	if (gradient_engaged(lane))
		gradient_on_dispatch(lane->grad, now_ms, lane->in_flight);
	if (lane->conc.starting && lane->quiet != NULL)
		slow_start_sent(&lane->quiet->start, lane->in_flight);
	agent_count(lane, it);
	gates_charge(&lane->gates, precise_ms, it->cost_tokens, it->cost_prompt, it->cost_output);
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		/* The same sum learned_charge keeps, for budgets learned later. */
		double cost = budget_cost(it, b);
		lane->charged[b] += (isfinite(cost) && cost > 0) ? cost : 0;
		bool learns = budget_learns(lane, b);
		it->marks[b] =
		    learns ? learned_charge(lane->learned[b], now_ms, cost) : lane->charged[b];
		it->levels[b] = learns ? learned_shadow_level(lane->learned[b]) : NAN;
	}
	aimd_delay_charge(&lane->delay, now_ms);
	lane->day.requests += 1;
	lane->day.tokens += it->cost_tokens;
	lane->last_dispatch_ms = now_ms;
	lane->last_active_ms = now_ms;
	lane->stats.dispatched++;
	return it;
}

bool sched_held(const struct sched_lane *lane, int64_t now_ms)
{
	return lane->hold_until_ms > now_ms || pending_hold(lane, now_ms);
}

bool sched_recall(struct sched_lane *lane, struct sched_item *it, int64_t now_ms)
{
	/* A hold in force now began after `it` left: nothing leaves a held
	 * lane but the probe that ends a hold, which goes once it is over. */
	if (it->state != SCHED_IN_FLIGHT || !sched_held(lane, now_ms))
		return false;
	it->state = SCHED_NONE;
	lane->in_flight--;
	agent_uncount(lane, it);
	if (it->attempts > 0)
		it->attempts--;
	if (it->probe) {
		it->probe = false;
		set_state(lane, LANE_EV_PROBE_FAILED);
	}
	idle_update(lane);
	return true;
}

void sched_sent(struct sched_lane *lane, const struct sched_item *it, double sent_ms)
{
	if (it->state != SCHED_IN_FLIGHT)
		return;
	gates_sent(&lane->gates, sent_ms, it->cost_tokens, it->cost_prompt, it->cost_output,
	           sched_lane_margin(lane));
}

double sched_wake_at(struct sched_lane *lane, double precise_ms)
{
	int64_t now_ms = (int64_t)precise_ms;
	double wake = (double)SCHED_NEVER;
	if (lane->waiting.root != NULL)
		wake = (double)ITEM_OF(lane->waiting.root)->ready_ms;
	/* Queued requests time out after queue.max_wait_s. Retries are bounded
	 * by their own deadline, decided elsewhere. */
	const struct fairq_node *oldest = fairq_oldest(&lane->fq, fq_arrived);
	if (oldest != NULL && lane->plan->queue.max_wait_s > 0) {
		int64_t t = fq_arrived(oldest) + (int64_t)lane->plan->queue.max_wait_s * 1000;
		if ((double)t < wake)
			wake = (double)t;
	}
	if (pending_hold(lane, now_ms) && (double)lane->pending_until_ms < wake)
		wake = (double)lane->pending_until_ms;
	if (lane->in_flight < lane_limit(lane) && !held_back(lane, now_ms) &&
	    !lane_day_out(lane->st)) {
		const struct sched_item *it = first_eligible(lane);
		if (it != NULL) {
			double t = lane_ready_at(lane, it, precise_ms);
			/* Ready but for the store's answer: its reply wakes the lane. */
			bool deciding = lane->gates_mode == SCHED_GATES_SHARED && t <= precise_ms &&
			                lane->permits == 0 && lane->asking > 0;
			if (t < wake && !deciding)
				wake = t;
		}
	}
	return wake;
}

int64_t sched_oldest_wait_ms(const struct sched_lane *lane, int64_t now_ms)
{
	const struct fairq_node *oldest = fairq_oldest(&lane->fq, fq_arrived);
	return oldest != NULL && fq_arrived(oldest) < now_ms ? now_ms - fq_arrived(oldest) : 0;
}

/* Every queued request has the same max wait, so the oldest is the only one
 * to look at. */
struct sched_item *sched_expired(struct sched_lane *lane, int64_t now_ms)
{
	struct fairq_node *oldest = fairq_oldest(&lane->fq, fq_arrived);
	if (oldest == NULL || lane->plan->queue.max_wait_s == 0)
		return NULL;
	struct sched_item *it = ITEM_OF_FQ(oldest);
	if (it->arrived_ms + (int64_t)lane->plan->queue.max_wait_s * 1000 > now_ms)
		return NULL;
	queue_remove(lane, it, false);
	it->state = SCHED_NONE;
	lane->stats.queue_timeouts++;
	idle_update(lane);
	return it;
}

/* ---- the strict gates' margin (margin.h) ---- */

/* The interval of the lane's gate without slack (burst 1) that spaces it
 * most; 0: none. */
static double strict_interval(const struct sched_lane *lane)
{
	double t = 0;
	for (int w = 0; w < GATES_N_WINDOWS; w++) {
		const struct gcra *g = &lane->gates.req[w];
		if (gcra_enabled(g) && g->burst <= 1 && g->t_ms > t)
			t = g->t_ms;
	}
	return t;
}

/* The lane's margin state, made on first use; NULL when out of memory (the
 * lane keeps MARGIN_MIN). */
static struct margin *lane_margin(struct sched_lane *lane, int64_t now_ms)
{
	if (lane->margin == NULL && (lane->margin = malloc(sizeof(*lane->margin))) != NULL)
		margin_init(lane->margin, now_ms);
	return lane->margin;
}

/* An attempt's outcome teaches the margin when `it` left at its strict
 * gate's own spacing: it waited for its dispatch (the gate held it), or left
 * within the widest margin of the lane's previous dispatch. A request sent
 * into an idle gate says nothing of the path's jitter. True when the
 * outcome is a refusal the margin answers: at the spacing, with the margin
 * still below MARGIN_MAX (its widening is the lane's reaction; at the bound,
 * refusals go on to the lane's AIMD as any other). */
static bool learn_margin(struct sched_lane *lane, const struct sched_item *it,
                         enum sched_outcome outcome, int64_t now_ms)
{
	if (outcome != SCHED_SUCCESS && outcome != SCHED_CAPACITY)
		return false;
	double t = strict_interval(lane);
	if (!(t > 0) ||
	    !(it->dispatched_ms > it->queued_ms || it->gap_before_ms <= t * (1 + MARGIN_MAX) + 1))
		return false;
	struct margin *m = lane_margin(lane, now_ms);
	if (m == NULL)
		return false;
	if (outcome == SCHED_SUCCESS) {
		margin_succeeded(m, t, now_ms);
		return false;
	}
	bool below_max = m->frac < MARGIN_MAX;
	if (margin_refused(m, it->dispatch_seq, it->dispatched_ms, lane->dispatch_seq, t, now_ms) &&
	    lane->gates_mode == SCHED_GATES_SHARED)
		margin_settle(m, now_ms);
	return below_max;
}

void sched_margin_adopt(struct sched_lane *lane, double frac, int64_t now_ms)
{
	struct margin *m = lane_margin(lane, now_ms);
	if (m != NULL)
		margin_adopt(m, frac, lane->dispatch_seq, now_ms);
}

/* ---- feedback ---- */

/* A success of `it` is a round trip of the lane's slow start: the window
 * doubles when the round says so (slow_start.h). */
static void start_back(struct sched_lane *lane, const struct sched_item *it, int64_t now_ms)
{
	if (!lane->conc.starting || lane->quiet == NULL)
		return;
	unsigned next = 0;
	if (slow_start_back(&lane->quiet->start, now_ms, it->dispatched_ms, false, lane->in_flight,
	                    &next) == SLOW_START_GROW)
		aimd_start_grow(&lane->conc, next);
	if (!lane->conc.starting)
		slow_start_end(&lane->quiet->start);
}

/* Whether refusals alone teach the lane its rate, so that the rate probe
 * (rate_probe.h) paces it once they bound it: a silent provider, and no
 * gate of the plan. Where the plan's gates pace the lane, a refusal at
 * their spacing is the path's jitter, which the strict margin answers
 * (margin.h); a probe's curve there held a 600 RPM gate at 67 % of it. */
static bool rate_probe_wanted(const struct sched_lane *lane)
{
	return lane->provider_silent && !gates_enabled(&lane->gates);
}

/* The dispatch delay after a success: the rate probe's curve once refusals
 * have bounded the provider's rate, else the AIMD's increase. */
static void delay_success(struct sched_lane *lane, const struct sched_item *it, int64_t now_ms)
{
	double rps = lane->quiet != NULL && rate_probe_wanted(lane)
	                 ? rate_probe_succeeded(&lane->quiet->rate, now_ms, it->dispatched_ms)
	                 : 0;
	if (rps > 0)
		aimd_delay_converged(&lane->delay, rps);
	else
		aimd_delay_on_success(&lane->delay, now_ms);
}

/* The dispatch delay after a refusal the lane reacts to: the AIMD's cut,
 * or where the rate probe puts it once refusals bound the rate. */
static void delay_refused(struct sched_lane *lane, const struct sched_item *it, int64_t now_ms)
{
	aimd_delay_on_capacity(&lane->delay, now_ms);
	struct sched_quiet *q =
	    lane->delay.adaptive && rate_probe_wanted(lane) ? quiet_of(lane) : NULL;
	if (q == NULL || !(lane->delay.delay_ms > 0))
		return;
	aimd_delay_converged(&lane->delay, rate_probe_refused(&q->rate, now_ms, it->dispatched_ms,
	                                                      1000.0 / lane->delay.delay_ms));
}

void sched_complete(struct sched_lane *lane, struct sched_item *it, enum sched_outcome outcome,
                    int64_t now_ms)
{
	if (it->state != SCHED_IN_FLIGHT)
		return;
	it->state = SCHED_NONE;
	lane->in_flight--;
	agent_uncount(lane, it);
	lane->last_active_ms = now_ms;
	int64_t rtt = now_ms - it->dispatched_ms;
	if (it->holding) {
		it->holding = false;
		lane->holding--;
	}
	bool margin_answers = learn_margin(lane, it, outcome, now_ms);
	/* Decided: a success ends the hold (unless another came while it was
	 * out); anything else lets another probe go. */
	if (it->probe) {
		it->probe = false;
		set_state(lane, outcome == SCHED_SUCCESS ? LANE_EV_PROBE_OK : LANE_EV_PROBE_FAILED);
	}

	switch (outcome) {
	case SCHED_SUCCESS:
		lane->stats.succeeded++;
		/* Only a request sent after the quota answer can tell that it is
		 * over. */
		if (lane_quota_out(lane->st) && it->dispatch_seq > lane->quota_seq)
			set_state(lane, LANE_EV_QUOTA_BACK);
		aimd_on_success(&lane->conc, now_ms, (double)rtt, it->saturated);
		start_back(lane, it, now_ms);
		delay_success(lane, it, now_ms);
		break;
	case SCHED_CAPACITY:
		lane->stats.capacity_signals++;
		aimd_observe_rtt(&lane->conc, (double)rtt);
		/* A refusal at a strict gate's own spacing is the path's jitter
		 * meeting its margin, not a rate too high: the margin widens, and
		 * cutting concurrency and delaying dispatches as well took a
		 * lane at 600 RPM down to 2-7 req/s for a second or two after
		 * each one (issue 30). */
		if (margin_answers)
			break;
		/* A burst of errors is one signal, not ten (DESIGN §4): only a
		 * request sent after the lane last reacted can tell it something
		 * new, as TCP ignores losses from before its last cut. */
		if (it->dispatch_seq <= lane->signal_seq)
			break;
		lane->signal_seq = lane->dispatch_seq;
		lane->stats.capacity_reactions++;
		/* A capacity error also says the learned rate was too optimistic.
		 * One that said when to come back is mostly about when (the lane
		 * holds for it), so it cuts the rate by a margin's worth, not by a
		 * fifth: not more than the evidence says, yet enough that a pace a
		 * few % above the provider's rate does not meet refusals forever. */
		/* With the gradient engaged (mode gradient: auto leaves it at the
		 * first refusal), the cut is one for both. */
		bool engaged = gradient_engaged(lane);
		if (aimd_on_capacity_signal(&lane->conc, now_ms, lane->in_flight + 1)) {
			if (engaged)
				gradient_cut(lane->grad, now_ms, aimd_limit(&lane->conc));
			for (int b = 0; b < RLH_N_BUDGETS; b++)
				if (budget_learns(lane, b) && lane->learned[b]->n_obs > 0)
					learned_on_capacity_signal(
					    lane->learned[b], now_ms,
					    it->hinted ? LEARNED_PENALTY_HINTED : LEARNED_PENALTY);
		}
		delay_refused(lane, it, now_ms);
		break;
	case SCHED_TRANSIENT:
		lane->stats.transient_errors++;
		break;
	case SCHED_QUOTA_OUT:
		aimd_observe_rtt(&lane->conc, (double)rtt);
		break;
	case SCHED_ABORTED:
		lane->stats.cancelled++;
		break;
	case SCHED_OVERLOAD:
		/* The provider's or a tier's shortage says nothing of the
		 * account's pace: the lane holds (the lanes' hold), not cuts. */
		lane->stats.capacity_signals++;
		aimd_observe_rtt(&lane->conc, (double)rtt);
		break;
	}
	idle_update(lane);
}

bool sched_learn_told(struct sched_lane *lane, int b, double limit, int64_t window_ms,
                      int64_t now_ms)
{
	if (b < 0 || b >= RLH_N_BUDGETS || !(limit > 0) || window_ms <= 0)
		return false;
	if (budget(lane, b)->n_obs > 0)
		return false; /* headers describe it: they know better than a refusal */
	/* The plan sets the lane's rates (the user told the limits): a refusal
	 * does not add a learned pace at a margin below them. */
	if (gates_enabled(&lane->gates))
		return false;
	if (!lane_learn_start(lane, b))
		return false;
	return learned_told(lane->learned[b], now_ms, limit, (double)window_ms);
}

/* How long `it` was alone on the wire: the time between its dispatch and the
 * nearest other one, as far as the lane knows (0 when a later one's time is
 * not kept). Requests closer than that may reach the upstream in either order. */
static double alone_ms(const struct sched_lane *lane, const struct sched_item *it)
{
	double after = 0;
	if (lane->dispatch_seq == it->dispatch_seq)
		after = INFINITY; /* nothing left after it before it was answered */
	else if (lane->dispatch_seq == it->dispatch_seq + 1)
		after = (double)(lane->last_dispatch_ms - it->dispatched_ms);
	return fmin(it->gap_before_ms, after);
}

bool sched_observe(struct sched_lane *lane, const struct sched_item *it, const struct rlh_result *h,
                   bool refused, int64_t now_ms)
{
	bool changed = false;
	lane->restored = false; /* what it knows is this process's own from now on */
	if (lane->st.mode == LANE_LEARNING)
		set_state(lane, LANE_EV_ANSWERED);
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct rlh_budget *rb = &h->budget[b];
		/* Learn from what remains: with a precise reset from the pair,
		 * without one (or with a reset in whole seconds) from successive
		 * counts; never from limit alone: its window is not in the
		 * header name (DESIGN §4). */
		if (!rb->has_remaining) {
			if (budget_learns(lane, b))
				learned_unreported(lane->learned[b], it->marks[b]);
			continue;
		}
		if (!lane_learn_start(lane, b))
			break; /* out of memory: the next answer teaches it */
		double cost = budget_cost(it, b);
		struct learned_obs o = {
		    .mark = it->marks[b],
		    .remaining = (double)rb->remaining,
		    .reset_ms = rb->has_reset ? (double)rb->reset_ms : 0,
		    .limit = rb->has_limit ? (double)rb->limit : 0,
		    .no_reset = !rb->has_reset,
		    .coarse_reset = rb->has_reset && rb->reset_coarse,
		    .sent_ms = (double)it->dispatched_ms,
		    .cost = isfinite(cost) && cost > 0 ? cost : 0,
		    .refused = refused,
		    .alone_ms = alone_ms(lane, it),
		    .window_ms = (double)rb->window_ms,
		    .has_level_at_send = isfinite(it->levels[b]),
		    .level_at_send = it->levels[b],
		};
		if (learned_observe(lane->learned[b], now_ms, &o) > 0)
			changed = true;
	}
	return changed;
}

bool sched_wants_tokens(const struct sched_lane *lane)
{
	for (int b = RLH_TOKENS; b < RLH_N_BUDGETS; b++)
		if (budget(lane, b)->n_obs > 0)
			return true;
	const struct plan_conf *p = lane->plan;
	return p->max_tokens_per_minute > 0 || p->max_input_tokens_per_minute > 0 ||
	       p->max_output_tokens_per_minute > 0 || p->max_tokens_per_day > 0;
}

void sched_set_provider_silent(struct sched_lane *lane, bool silent)
{
	lane->provider_silent = silent;
	gradient_attach(lane, lane->last_active_ms);
	start_fit(lane);
}

void sched_set_provider_streams(struct sched_lane *lane, bool streams)
{
	lane->provider_streams = streams;
	gradient_attach(lane, lane->last_active_ms);
	start_fit(lane);
}

bool sched_answered(const struct sched_lane *lane)
{
	return lane->st.mode != LANE_LEARNING;
}

void sched_hold(struct sched_lane *lane, int64_t until_ms)
{
	if (until_ms > lane->hold_until_ms)
		lane->hold_until_ms = until_ms;
	set_state(lane, LANE_EV_HOLD);
}

void sched_hold_pending(struct sched_lane *lane, struct sched_item *it, int64_t until_ms)
{
	if (it->state != SCHED_IN_FLIGHT || it->holding)
		return;
	it->holding = true;
	if (lane->holding++ == 0 || until_ms > lane->pending_until_ms)
		lane->pending_until_ms = until_ms;
}

bool sched_quota_exhausted(struct sched_lane *lane, int64_t now_ms)
{
	bool was = lane_quota_out(lane->st);
	set_state(lane, LANE_EV_QUOTA_OUT);
	lane->quota_seq = lane->dispatch_seq;
	if (!was)
		lane->quota_probe_at_ms = quota_next_probe(lane, now_ms);
	return !was;
}

void sched_quota_restored(struct sched_lane *lane)
{
	if (lane_quota_out(lane->st))
		set_state(lane, LANE_EV_QUOTA_BACK);
}

bool sched_quota_out(const struct sched_lane *lane)
{
	return lane_quota_out(lane->st);
}

struct sched_item *sched_drain(struct sched_lane *lane)
{
	unpark_all(lane);
	struct sched_item *it = heap_first(&lane->ready);
	if (it != NULL)
		queue_remove(lane, it, false);
	else if ((it = heap_first(&lane->waiting)) != NULL)
		pheap_remove(&lane->waiting, &it->hn);
	else
		return NULL;
	it->state = SCHED_NONE;
	lane->stats.drained++;
	idle_update(lane);
	return it;
}

void sched_cost_charge(const struct sched_lane *lane, const struct cost_request *r, int64_t now_ms,
                       struct cost_charge *out)
{
	enum cost_output_rule rule = profile_of(lane->provider)->output_charge == OUTPUT_PRODUCED
	                                 ? COST_OUTPUT_PRODUCED
	                                 : COST_OUTPUT_RESERVED;
	cost_charge(&lane->cost, r, profile_cache_reads_free(lane->provider, lane->model), rule,
	            lane->plan->default_output_tokens, now_ms, out);
}

void sched_cost_headers(struct sched_lane *lane, const struct sched_item *it,
                        const struct cost_request *r, const struct rlh_result *h, int64_t now_ms)
{
	const struct rlh_budget *b = &h->budget[RLH_OUTPUT_TOKENS];
	if (!b->has_remaining)
		b = &h->budget[RLH_TOKENS];
	if (!b->has_remaining || r->max_output <= 0)
		return;
	struct cost_output_count n = {
	    .max_output = r->max_output,
	    .limit = b->has_limit ? (double)b->limit : 0,
	    .remaining = (double)b->remaining,
	    .at_ms = now_ms,
	    /* only this request between the previous count and this one */
	    .alone = lane->in_flight <= 1 && it->dispatch_seq == lane->dispatch_seq &&
	             lane->cost_count_seq + 1 == it->dispatch_seq,
	};
	cost_output_headers(&lane->cost, &n);
	lane->cost_count_seq = lane->dispatch_seq;
}

void sched_cost_observe(struct sched_lane *lane, const struct cost_request *r,
                        const struct cost_usage *u, int64_t sent_ms)
{
	cost_observe(&lane->cost, r, u, sent_ms);
}

void sched_tokens_used(struct sched_lane *lane, struct sched_item *it, double actual_tokens,
                       double actual_input, double actual_output, int64_t now_ms)
{
	double d_in = actual_input >= 0 ? actual_input - it->cost_prompt : 0;
	double d_out = actual_output >= 0 ? actual_output - it->cost_output : 0;
	gates_adjust_tokens(&lane->gates, now_ms, actual_tokens - it->cost_tokens, d_in, d_out);
	lane->day.tokens += actual_tokens - it->cost_tokens;
	it->cost_tokens = actual_tokens;
	it->cost_prompt += d_in;
	it->cost_output += d_out;
}

void sched_retry(struct sched_lane *lane, struct sched_item *it, int64_t ready_ms)
{
	it->state = SCHED_RETRY_WAIT;
	it->ready_ms = ready_ms;
	it->seq = ++lane->seq;
	lane->stats.retries++;
	pheap_insert(&lane->waiting, &it->hn);
	idle_update(lane);
}

void sched_cancel(struct sched_lane *lane, struct sched_item *it)
{
	switch (it->state) {
	case SCHED_QUEUED:
		queue_remove(lane, it, false);
		break;
	case SCHED_RETRY_WAIT:
		pheap_remove(&lane->waiting, &it->hn);
		break;
	case SCHED_IN_FLIGHT:
	case SCHED_NONE:
		return;
	}
	it->state = SCHED_NONE;
	lane->stats.cancelled++;
	idle_update(lane);
}

/* ---- the shared store ---- */

void sched_set_gates_mode(struct sched_lane *lane, enum sched_gates_mode mode, double scale,
                          int64_t now_ms)
{
	if (mode != SCHED_GATES_FALLBACK)
		scale = 1;
	bool rescale = (lane->gates_mode == SCHED_GATES_FALLBACK) != (mode == SCHED_GATES_FALLBACK);
	lane->gates_mode = mode;
	lane->gates_scale = scale;
	if (rescale)
		gates_reconfigure_scaled(&lane->gates, lane->plan, scale, now_ms);
	if (mode != SCHED_GATES_SHARED)
		lane->shared_until_ms = 0;
}

/* A dispatch delay or a learned pace spaces this lane's requests here: one
 * at a time. */
static bool spaced_here(const struct sched_lane *lane)
{
	bool spaced = lane->delay.delay_ms > 0;
	for (int b = 0; !spaced && b < RLH_N_BUDGETS; b++)
		spaced = budget(lane, b)->n_obs > 0;
	return spaced;
}

/* SHARED and open now: the requests that could leave on free slots, at most
 * cap; 0 when the lane is local, full, held back or out of its day. */
static size_t shared_room(struct sched_lane *lane, int64_t now_ms, size_t cap)
{
	if (lane->gates_mode != SCHED_GATES_SHARED)
		return 0;
	unsigned limit = lane_limit(lane);
	if (lane->in_flight >= limit || held_back(lane, now_ms) || lane_day_out(lane->st))
		return 0;
	size_t queued = lane->fq.n + lane->n_due;
	size_t n = limit - lane->in_flight;
	if (queued < n)
		n = queued;
	return n < cap ? n : cap;
}

unsigned sched_permits_wanted(struct sched_lane *lane, int64_t now_ms, struct sched_costs *head)
{
	if (lane->gates_mode != SCHED_GATES_SHARED)
		return 0;
	promote_due_retries(lane, now_ms);
	/* As many as could leave now: free slots, requests waiting, what the
	 * local gates (this replica's own dispatches) would let through; one at
	 * a time while a learned pace, a dispatch delay or a token gate spaces
	 * them here. */
	size_t n = shared_room(lane, now_ms, SCHED_ASKS_MAX);
	if (n == 0)
		return 0;
	struct sched_item *it = first_eligible(lane);
	if (it == NULL || lane_ready_at(lane, it, (double)now_ms) > (double)now_ms)
		return 0;
	n = gates_requests_available(&lane->gates, now_ms, (unsigned)n);
	bool spaced = spaced_here(lane) || gcra_enabled(&lane->gates.tokens) ||
	              gcra_enabled(&lane->gates.input) || gcra_enabled(&lane->gates.output);
	if (spaced && n > 1)
		n = 1;
	size_t have = (size_t)lane->asking + lane->permits;
	if (n <= have)
		return 0;
	head->tokens = it->cost_tokens;
	head->prompt = it->cost_prompt;
	head->output = it->cost_output;
	return (unsigned)(n - have);
}

unsigned sched_permits_room(struct sched_lane *lane, int64_t now_ms)
{
	size_t n = shared_room(lane, now_ms, SCHED_PERMITS_MAX);
	if (spaced_here(lane) && n > 1)
		n = 1;
	size_t have = (size_t)lane->asking + lane->permits;
	return n > have ? (unsigned)(n - have) : 0;
}

void sched_permits_asked(struct sched_lane *lane, unsigned n)
{
	lane->asking += n;
	idle_update(lane);
}

void sched_permit_answer(struct sched_lane *lane, enum sched_permit_answer a, int64_t until_ms)
{
	if (lane->asking > 0)
		lane->asking--;
	if (a == SCHED_PERMIT_GO)
		lane->permits++; /* outside SHARED: given back by sched_permits_unused */
	else if (a == SCHED_PERMIT_WAIT && until_ms > lane->shared_until_ms)
		lane->shared_until_ms = until_ms;
	idle_update(lane);
}

unsigned sched_permits_unused(struct sched_lane *lane)
{
	if (lane->permits == 0)
		return 0;
	if (lane->gates_mode == SCHED_GATES_SHARED && lane->fq.n + lane->n_due > 0 &&
	    lane->in_flight < lane_limit(lane))
		return 0;
	unsigned n = lane->permits;
	lane->permits = 0;
	return n;
}

void sched_permits_drop(struct sched_lane *lane, unsigned n)
{
	if (n == 0)
		return;
	lane->permits = n < lane->permits ? lane->permits - n : 0;
	idle_update(lane);
}

/* Requests ahead of a newcomer leave at the lane's effective pace: the
 * slowest of the rate gates and of concurrency over the typical latency. */
static int64_t eta_for(const struct sched_lane *lane, size_t ahead, int64_t now_ms)
{
	double per_request_ms = gates_min_interval_ms(&lane->gates);
	if (budget_learns(lane, RLH_REQUESTS)) {
		struct learned_view v;
		learned_view(lane->learned[RLH_REQUESTS], now_ms, &v);
		if (v.pace_per_min > 0 && 60000.0 / v.pace_per_min > per_request_ms)
			per_request_ms = 60000.0 / v.pace_per_min;
	}
	int64_t d = aimd_delay_ms(&lane->delay);
	if ((double)d > per_request_ms)
		per_request_ms = (double)d;
	double by_conc = lane->conc.rtt_ms / (double)lane_limit(lane);
	if (by_conc > per_request_ms)
		per_request_ms = by_conc;
	/* Retries go first; they are few, counted whatever their priority. */
	ahead += lane->n_due + lane->waiting.n;
	int64_t eta = (int64_t)(per_request_ms * (double)ahead);
	struct sched_item probe = {.cost_tokens = 0};
	int64_t gate = (int64_t)ceil(lane_ready_at(lane, &probe, (double)now_ms)) - now_ms;
	return eta + (gate > 0 ? gate : 0);
}

int64_t sched_queue_eta_ms(const struct sched_lane *lane, const struct sched_request *rq,
                           int64_t now_ms)
{
	size_t ahead = rq != NULL ? fairq_ahead(&lane->fq, rq->priority, &rq->flow) : lane->fq.n;
	return eta_for(lane, ahead, now_ms);
}

int64_t sched_priority_eta_ms(const struct sched_lane *lane, int priority, int64_t now_ms)
{
	return eta_for(lane, fairq_ahead(&lane->fq, priority, NULL), now_ms);
}

const char *sched_lane_state(const struct sched_lane *lane, int64_t now_ms)
{
	bool held = lane->hold_until_ms > now_ms || pending_hold(lane, now_ms);
	return lane_state_name(lane->st, held, !lane->conc.open);
}
