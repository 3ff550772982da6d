/* sched — lanes, queue, gates, dispatch order. See sched.h.
 *
 * Dispatch order: due retries first (they already waited their turn once),
 * then the FIFO. With agents.mode serialize, a request whose agent already has
 * one in flight is passed over and the next eligible one goes instead, so one
 * busy agent never blocks the others. Gates are lane-wide: when the first
 * eligible request cannot pass them, nothing behind it passes either (FIFO,
 * and a large request is never starved by small ones). */
#include "sched.h"

#include <string.h>

/* ---- lists ---- */

static void list_remove(struct sched_item **head, struct sched_item **tail, struct sched_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		*head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else if (tail != NULL)
		*tail = it->prev;
	it->prev = it->next = NULL;
}

static void list_append(struct sched_item **head, struct sched_item **tail, struct sched_item *it)
{
	it->next = NULL;
	it->prev = *tail;
	if (*tail)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
}

/* Retries waiting for their time, sorted by ready_ms (short list). */
static void waiting_insert(struct sched_lane *lane, struct sched_item *it)
{
	struct sched_item **pp = &lane->w_head, *prev = NULL;
	while (*pp != NULL && (*pp)->ready_ms <= it->ready_ms) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	it->prev = prev;
	it->next = *pp;
	if (*pp)
		(*pp)->prev = it;
	*pp = it;
	lane->n_waiting++;
}

/* ---- agents ---- */

static bool agent_busy(const struct sched_lane *lane, uint64_t agent)
{
	if (agent == 0)
		return false;
	for (size_t i = 0; i < lane->n_busy_agents; i++)
		if (lane->busy_agents[i] == agent)
			return true;
	return false;
}

static void agent_set_busy(struct sched_lane *lane, uint64_t agent)
{
	if (agent == 0 || lane->agents_mode == AGENTS_OFF)
		return;
	/* The table is bounded; past it an agent is simply not serialized
	 * (documented), rather than failing the request. */
	if (lane->n_busy_agents < sizeof(lane->busy_agents) / sizeof(lane->busy_agents[0]))
		lane->busy_agents[lane->n_busy_agents++] = agent;
}

static void agent_set_free(struct sched_lane *lane, uint64_t agent)
{
	for (size_t i = 0; i < lane->n_busy_agents; i++) {
		if (lane->busy_agents[i] == agent) {
			lane->busy_agents[i] = lane->busy_agents[--lane->n_busy_agents];
			return;
		}
	}
}

/* ---- lane setup ---- */

void sched_lane_init(struct sched_lane *lane, const struct provider_conf *prov,
                     const struct plan_conf *plan, enum agents_mode agents, int64_t now_ms)
{
	memset(&lane->stats, 0, sizeof(lane->stats));
	lane->provider = prov;
	lane->plan = plan;
	lane->agents_mode = agents;
	lane->q_head = lane->q_tail = NULL;
	lane->r_head = lane->r_tail = NULL;
	lane->w_head = NULL;
	lane->q_depth = lane->n_waiting = lane->in_flight = lane->n_busy_agents = 0;
	gates_init(&lane->gates, plan);
	struct learned_params lp;
	learned_params_default(&lp);
	lp.proactive_threshold = plan->proactive_threshold;
	/* OpenAI-style resets are Go durations to the millisecond; the others
	 * (RFC 3339 instants, integer seconds) are whole seconds. */
	if (prov->dialect == DIALECT_OPENAI)
		lp.time_noise_ms = 50;
	for (int i = 0; i < RLH_N_BUDGETS; i++)
		learned_init(&lane->learned[i], &lp);
	aimd_init_plan(&lane->conc, plan);
	aimd_delay_init_plan(&lane->delay, plan);
	lane->last_dispatch_ms = INT64_MIN / 2;
	lane->hold_until_ms = 0;
	lane->dispatch_seq = lane->signal_seq = 0;
	lane->last_active_ms = now_ms;
}

void sched_lane_set_plan(struct sched_lane *lane, const struct plan_conf *plan, int64_t now_ms)
{
	lane->plan = plan;
	gates_reconfigure(&lane->gates, plan, now_ms);
	for (int i = 0; i < RLH_N_BUDGETS; i++)
		lane->learned[i].p.proactive_threshold = plan->proactive_threshold;
	aimd_reconfigure(&lane->conc, plan);
	double delay = lane->delay.delay_ms;
	aimd_delay_init_plan(&lane->delay, plan);
	if (lane->delay.adaptive && delay > lane->delay.min_ms)
		lane->delay.delay_ms = delay < lane->delay.max_ms ? delay : lane->delay.max_ms;
}

unsigned sched_concurrency_limit(const struct sched_lane *lane)
{
	return aimd_limit(&lane->conc);
}

bool sched_lane_idle(const struct sched_lane *lane)
{
	return lane->q_depth == 0 && lane->in_flight == 0 && lane->n_waiting == 0 &&
	       lane->r_head == NULL;
}

/* ---- submit ---- */

enum sched_submit_result sched_submit(struct sched_lane *lane, struct sched_item *it,
                                      double cost_prompt, double cost_output, uint64_t agent,
                                      int64_t now_ms)
{
	lane->last_active_ms = now_ms;
	if (lane->q_depth >= lane->plan->queue.max_depth) {
		lane->stats.rejected_queue_full++;
		return SCHED_QUEUE_FULL;
	}
	if (lane->agents_mode == AGENTS_REJECT && agent_busy(lane, agent)) {
		lane->stats.rejected_agent_busy++;
		return SCHED_AGENT_BUSY;
	}
	memset(it, 0, sizeof(*it));
	it->lane = lane;
	it->state = SCHED_QUEUED;
	it->arrived_ms = it->queued_ms = now_ms;
	it->cost_prompt = cost_prompt;
	it->cost_output = cost_output;
	it->cost_tokens = cost_prompt + cost_output;
	it->agent = lane->agents_mode == AGENTS_OFF ? 0 : agent;
	list_append(&lane->q_head, &lane->q_tail, it);
	lane->q_depth++;
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
	default:
		return it->cost_output;
	}
}

/* Earliest instant `it` may leave, by every time gate (concurrency and agents
 * are checked separately). */
static int64_t lane_ready_at(const struct sched_lane *lane, const struct sched_item *it,
                             int64_t now_ms)
{
	int64_t t = gates_ready_at(&lane->gates, now_ms, it->cost_tokens);
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		/* A token budget without a token estimate cannot be paced. */
		double cost = budget_cost(it, b);
		if (b != RLH_REQUESTS && cost <= 0)
			continue;
		int64_t g = learned_ready_at(&lane->learned[b], now_ms, cost);
		if (g > t)
			t = g;
	}
	if (lane->hold_until_ms > t)
		t = lane->hold_until_ms;
	int64_t d = aimd_delay_ready_at(&lane->delay, now_ms);
	if (d > t)
		t = d;
	return t;
}

/* The first request allowed to go next, ignoring time: due retries first,
 * then the FIFO; with serialize, the first whose agent is free. */
static struct sched_item *first_eligible(const struct sched_lane *lane)
{
	for (struct sched_item *it = lane->r_head; it != NULL; it = it->next)
		if (lane->agents_mode != AGENTS_SERIALIZE || !agent_busy(lane, it->agent))
			return it;
	for (struct sched_item *it = lane->q_head; it != NULL; it = it->next)
		if (lane->agents_mode != AGENTS_SERIALIZE || !agent_busy(lane, it->agent))
			return it;
	return NULL;
}

static void promote_due_retries(struct sched_lane *lane, int64_t now_ms)
{
	while (lane->w_head != NULL && lane->w_head->ready_ms <= now_ms) {
		struct sched_item *it = lane->w_head;
		list_remove(&lane->w_head, NULL, it);
		lane->n_waiting--;
		it->state = SCHED_QUEUED;
		it->retried = true;
		it->queued_ms = now_ms;
		list_append(&lane->r_head, &lane->r_tail, it);
	}
}

struct sched_item *sched_next(struct sched_lane *lane, int64_t now_ms)
{
	promote_due_retries(lane, now_ms);
	if (lane->in_flight >= aimd_limit(&lane->conc))
		return NULL;
	struct sched_item *it = first_eligible(lane);
	if (it == NULL || lane_ready_at(lane, it, now_ms) > now_ms)
		return NULL;

	if (it->retried)
		list_remove(&lane->r_head, &lane->r_tail, it);
	else {
		list_remove(&lane->q_head, &lane->q_tail, it);
		lane->q_depth--;
	}
	int64_t waited = now_ms - it->queued_ms;
	if (waited > lane->stats.queue_wait_max_ms)
		lane->stats.queue_wait_max_ms = waited;

	it->state = SCHED_IN_FLIGHT;
	it->dispatched_ms = now_ms;
	it->dispatch_seq = ++lane->dispatch_seq;
	it->attempts++;
	lane->in_flight++;
	it->saturated = lane->in_flight >= aimd_limit(&lane->conc);
	agent_set_busy(lane, it->agent);
	gates_charge(&lane->gates, now_ms, it->cost_tokens);
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		it->marks[b] = learned_charge(&lane->learned[b], now_ms, budget_cost(it, b));
	aimd_delay_charge(&lane->delay, now_ms);
	lane->last_dispatch_ms = now_ms;
	lane->last_active_ms = now_ms;
	lane->stats.dispatched++;
	return it;
}

int64_t sched_wake_at(const struct sched_lane *lane, int64_t now_ms)
{
	int64_t wake = SCHED_NEVER;
	if (lane->w_head != NULL)
		wake = lane->w_head->ready_ms;
	/* Queued requests time out after queue.max_wait_s; the FIFO head is the
	 * oldest. Retries are bounded by their own deadline, decided elsewhere. */
	if (lane->q_head != NULL && lane->plan->queue.max_wait_s > 0) {
		int64_t t = lane->q_head->arrived_ms + (int64_t)lane->plan->queue.max_wait_s * 1000;
		if (t < wake)
			wake = t;
	}
	if (lane->in_flight < aimd_limit(&lane->conc)) {
		const struct sched_item *it = first_eligible(lane);
		if (it != NULL) {
			int64_t t = lane_ready_at(lane, it, now_ms);
			if (t < wake)
				wake = t;
		}
	}
	return wake;
}

struct sched_item *sched_expired(struct sched_lane *lane, int64_t now_ms)
{
	struct sched_item *it = lane->q_head;
	if (it == NULL || lane->plan->queue.max_wait_s == 0)
		return NULL;
	if (it->arrived_ms + (int64_t)lane->plan->queue.max_wait_s * 1000 > now_ms)
		return NULL;
	list_remove(&lane->q_head, &lane->q_tail, it);
	lane->q_depth--;
	it->state = SCHED_NONE;
	lane->stats.queue_timeouts++;
	return it;
}

/* ---- feedback ---- */

void sched_complete(struct sched_lane *lane, struct sched_item *it, enum sched_outcome outcome,
                    int64_t now_ms)
{
	if (it->state != SCHED_IN_FLIGHT)
		return;
	it->state = SCHED_NONE;
	lane->in_flight--;
	agent_set_free(lane, it->agent);
	lane->last_active_ms = now_ms;
	int64_t rtt = now_ms - it->dispatched_ms;

	switch (outcome) {
	case SCHED_SUCCESS:
		lane->stats.succeeded++;
		aimd_on_success(&lane->conc, now_ms, (double)rtt, it->saturated);
		aimd_delay_on_success(&lane->delay);
		break;
	case SCHED_CAPACITY:
		lane->stats.capacity_signals++;
		aimd_observe_rtt(&lane->conc, (double)rtt);
		/* A burst of errors is one signal, not ten (DESIGN §4): only a
		 * request sent after the lane last reacted can tell it something
		 * new, as TCP ignores losses from before its last cut. */
		if (it->dispatch_seq <= lane->signal_seq)
			break;
		lane->signal_seq = lane->dispatch_seq;
		lane->stats.capacity_reactions++;
		/* A capacity error also says the learned rate was too optimistic. */
		if (aimd_on_capacity_signal(&lane->conc, now_ms))
			for (int b = 0; b < RLH_N_BUDGETS; b++)
				if (lane->learned[b].n_obs > 0)
					learned_on_capacity_signal(&lane->learned[b], now_ms);
		aimd_delay_on_capacity(&lane->delay);
		break;
	case SCHED_TRANSIENT:
		lane->stats.transient_errors++;
		break;
	case SCHED_ABORTED:
		lane->stats.cancelled++;
		break;
	}
}

bool sched_observe(struct sched_lane *lane, const struct sched_item *it, const struct rlh_result *h,
                   int64_t now_ms)
{
	bool changed = false;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct rlh_budget *rb = &h->budget[b];
		/* Learn from (remaining, reset) pairs, never from limit alone:
		 * its window is not in the header name (DESIGN §4). */
		if (!rb->has_remaining || !rb->has_reset)
			continue;
		struct learned_obs o = {
		    .mark = it->marks[b],
		    .remaining = (double)rb->remaining,
		    .reset_ms = (double)rb->reset_ms,
		    .limit = rb->has_limit ? (double)rb->limit : 0,
		};
		if (learned_observe(&lane->learned[b], now_ms, &o) > 0)
			changed = true;
	}
	return changed;
}

bool sched_wants_tokens(const struct sched_lane *lane)
{
	for (int b = RLH_TOKENS; b < RLH_N_BUDGETS; b++)
		if (lane->learned[b].n_obs > 0)
			return true;
	return lane->plan->max_tokens_per_minute > 0;
}

void sched_hold(struct sched_lane *lane, int64_t until_ms)
{
	if (until_ms > lane->hold_until_ms)
		lane->hold_until_ms = until_ms;
}

void sched_tokens_used(struct sched_lane *lane, struct sched_item *it, double actual_tokens,
                       int64_t now_ms)
{
	gates_adjust_tokens(&lane->gates, now_ms, actual_tokens - it->cost_tokens);
	it->cost_tokens = actual_tokens;
}

void sched_retry(struct sched_lane *lane, struct sched_item *it, int64_t ready_ms)
{
	it->state = SCHED_RETRY_WAIT;
	it->ready_ms = ready_ms;
	lane->stats.retries++;
	waiting_insert(lane, it);
}

void sched_cancel(struct sched_lane *lane, struct sched_item *it)
{
	switch (it->state) {
	case SCHED_QUEUED:
		if (it->retried) {
			list_remove(&lane->r_head, &lane->r_tail, it);
		} else {
			list_remove(&lane->q_head, &lane->q_tail, it);
			lane->q_depth--;
		}
		break;
	case SCHED_RETRY_WAIT:
		list_remove(&lane->w_head, NULL, it);
		lane->n_waiting--;
		break;
	case SCHED_IN_FLIGHT:
	case SCHED_NONE:
		return;
	}
	it->state = SCHED_NONE;
	lane->stats.cancelled++;
}

int64_t sched_queue_eta_ms(const struct sched_lane *lane, int64_t now_ms)
{
	/* Requests ahead of a newcomer leave at the lane's effective pace: the
	 * slowest of the rate gates and of concurrency over the typical latency. */
	double per_request_ms = gates_min_interval_ms(&lane->gates);
	struct learned_view v;
	learned_view(&lane->learned[RLH_REQUESTS], now_ms, &v);
	if (v.pace_per_min > 0 && 60000.0 / v.pace_per_min > per_request_ms)
		per_request_ms = 60000.0 / v.pace_per_min;
	int64_t d = aimd_delay_ms(&lane->delay);
	if ((double)d > per_request_ms)
		per_request_ms = (double)d;
	double by_conc = lane->conc.rtt_ms / (double)aimd_limit(&lane->conc);
	if (by_conc > per_request_ms)
		per_request_ms = by_conc;
	size_t ahead = lane->q_depth + (size_t)(lane->r_head != NULL) + lane->n_waiting;
	int64_t eta = (int64_t)(per_request_ms * (double)ahead);
	struct sched_item probe = {.cost_tokens = 0};
	int64_t gate = lane_ready_at(lane, &probe, now_ms) - now_ms;
	return eta + (gate > 0 ? gate : 0);
}
