/* SPDX-License-Identifier: Apache-2.0 */
/* lanes — each lane's timer and pump, dispatch, refusals, quota replay, daily
 * budgets and the shared store's hooks (lanes.h). The decisions are the
 * scheduler's (sched.h) and the limiter's; this file carries them out on the
 * event loop.
 *
 * Nothing here calls back into the exchange from inside a libcurl callback:
 * lanes_headers only kicks the lane (its timer runs on the next loop turn);
 * dispatching happens from lanes_submit (intake), from the calls the exchange
 * makes once an attempt is over, or from the timer. */
#include "proxy/lanes.h"

#include <event2/buffer.h>
#include <event2/event_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/daily.h"
#include "core/intern.h"
#include "core/keyid.h"
#include "core/log.h"
#include "provider/model.h"
#include "provider/profile.h"
#include "provider/tokens.h"
#include "proxy/limiter.h"
#include "sched/gcra.h"
#include "sched/learned.h"
#include "sched/registry.h"
#include "sched/scope.h"
#include "store/shared.h"

#define LANE_SWEEP_S 10
/* Providers whose answers' headers are remembered (a configuration has a
 * handful; past this many, the others count as unknown). */
#define LANES_PROVIDERS_MAX 64
/* The longest a capacity answer's headers hold the lane while its body is
 * still coming (an error body is small: it normally takes microseconds). */
#define PENDING_HOLD_MAX_MS 1000

/* The event-loop side of a lane: its one timer, and the refusal it replays
 * while its quota is out. */
struct lane_shell {
	struct lanes *ls;
	struct sched_lane *lane;
	struct config_ref *cref; /* the configuration the lane's provider and plan point into */
	struct event timer;
	double armed_ms;     /* instant the timer is set for; SCHED_NEVER = not armed */
	unsigned last_limit; /* the concurrency limit last reported (lane_change) */
	/* While the lane's quota is out: the upstream's refusal, replayed to
	 * every request the lane refuses (a held answer's layout: head
	 * name\0value\0 pairs, then the body). */
	struct evbuffer *quota_answer;
	size_t quota_n, quota_head_len;
	int quota_status;
	char quota_reason[64];
	struct shared_lane *shared; /* the shared store's decisions and leases */
};

struct lanes {
	struct event_base *base;
	struct config_ref *cref; /* the current configuration */
	struct registry *reg;
	struct event *sweep; /* idle lane eviction */
	struct lanes_events ev;
	struct shared *shared;     /* store.kind: redis; NULL: local */
	struct scope_table scopes; /* the identities keys' answers named */
	/* Told of every lane made (lanes_set_restore): what a previous process
	 * saved of it is taken up before its first request. */
	void (*restore)(void *arg, struct sched_lane *lane, int64_t now_ms);
	void *restore_arg;
	/* Providers whose last answer carried no rate-limit headers, by name:
	 * their new lanes need not wait for a first answer (sched.h). */
	struct provider_news {
		char name[64];
		bool silent;
		bool streams; /* it answered a success with an event stream */
	} news[LANES_PROVIDERS_MAX];
	size_t n_news;
};

/* Identities a key's answers named, kept at most (least recently used out),
 * and forgotten after a day without use. */
#define SCOPES_MAX 100000
#define SCOPE_IDLE_MS (24 * 3600 * 1000)
/* Identity hashes and the key ids of the scope table: a fixed seed, so that
 * replicas name the same scope the same (the shared store's keys). */
#define IDENTITY_SEED UINT64_C(0x7061636572642d69)

#define T_OF_ITEM(it)                                                                              \
	((struct lane_ticket *)(void *)((char *)(it)-offsetof(struct lane_ticket, item)))

static int64_t now_ms(void)
{
	return clock_now_ms();
}

static void refuse(struct lanes *ls, struct lane_ticket *t, enum lane_refusal why, int64_t wait_ms)
{
	struct lane_refusal_info r = {.why = why, .wait_ms = wait_ms};
	if (t->lane != NULL) {
		r.depth = (long long)sched_queue_depth(t->lane);
		r.limit_s = (long long)sched_lane_plan(t->lane)->queue.max_wait_s;
	}
	(t->ev != NULL ? t->ev : &ls->ev)->refuse(t, &r);
}

/* ---- the lane's timer ---- */

static void lane_pump(struct lane_shell *sh);

static void on_lane_timer(evutil_socket_t fd, short what, void *arg)
{
	struct lane_shell *sh = arg;
	(void)fd;
	(void)what;
	sh->armed_ms = (double)SCHED_NEVER;
	lane_pump(sh);
}

static struct lane_shell *lane_shell_of(struct lanes *ls, struct sched_lane *lane)
{
	struct lane_shell *have = sched_lane_shell(lane);
	if (have != NULL)
		return have;
	struct lane_shell *sh = calloc(1, sizeof(*sh));
	if (sh == NULL)
		return NULL;
	evtimer_assign(&sh->timer, ls->base, on_lane_timer, sh);
	sh->ls = ls;
	sh->lane = lane;
	sh->cref = config_ref_get(ls->cref);
	sh->armed_ms = (double)SCHED_NEVER;
	sched_lane_set_shell(lane, sh);
	if (ls->restore != NULL)
		ls->restore(ls->restore_arg, lane, now_ms());
	sh->last_limit = sched_concurrency_limit(lane);
	return sh;
}

static void lane_evicted(struct sched_lane *lane, void *arg)
{
	struct lane_shell *sh = sched_lane_shell(lane);
	struct lanes *ls = arg;
	if (sh == NULL)
		return;
	shared_lane_free(ls != NULL ? ls->shared : NULL, sh->shared);
	evtimer_del(&sh->timer);
	config_ref_put(sh->cref);
	if (sh->quota_answer != NULL)
		evbuffer_free(sh->quota_answer);
	free(sh);
	sched_lane_set_shell(lane, NULL);
}

static void lane_arm(struct lane_shell *sh, double wake, double now)
{
	if (wake == sh->armed_ms)
		return;
	sh->armed_ms = wake;
	if (wake >= (double)SCHED_NEVER) {
		evtimer_del(&sh->timer);
		return;
	}
	/* To the microsecond: from the clock read now, not from `now`'s whole
	 * millisecond, which would make every wake-up up to 1 ms late. */
	int64_t us = wake > now ? (int64_t)clock_us_until(wake) : 0;
	struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
	evtimer_add(&sh->timer, &tv);
}

/* The store's side of the lane (NULL: store.kind local, or not made yet). */
static struct shared_lane *lane_shared(const struct sched_lane *lane)
{
	const struct lane_shell *sh = sched_lane_shell(lane);
	return sh != NULL ? sh->shared : NULL;
}

/* Runs the lane later in this loop turn, after every event the turn's wait
 * returned (event_active queues the timer behind them): safe from inside any
 * callback, and the way a lane decides after a submit or an answer. A 429
 * that arrived with the 200 or the new request that made room (its socket
 * ready in the same turn) then holds the lane before anything leaves:
 * deciding at once would send a request into the window of an answer pacerd
 * already had. Kicks in one turn run the lane once. */
static void lane_kick(struct sched_lane *lane)
{
	struct lane_shell *sh = sched_lane_shell(lane);
	if (sh == NULL)
		return;
	sh->armed_ms = 0;
	event_active(&sh->timer, EV_TIMEOUT, 1);
}

/* Whether the lane's own or shared request and token gates space its
 * dispatches (then its decisions and its sends are timed finely). */
static bool lane_gated(const struct sched_lane *lane)
{
	return gates_enabled(sched_lane_gates(lane)) ||
	       sched_lane_gates_mode(lane) == SCHED_GATES_SHARED;
}

/* A paced lane decides on a fresh clock: the turn's cached one may be late
 * by however long the turn has run, and every dispatch charged that early
 * would shorten the spacing. An unpaced lane takes the turn's time. */
static double pump_now(const struct sched_lane *lane)
{
	if (lane_gated(lane))
		return clock_precise_ms();
	for (int b = 0; b < RLH_N_BUDGETS; b++)
		if (sched_learned(lane, b) != NULL)
			return clock_precise_ms();
	return (double)now_ms();
}

/* Keeps the daily budget's day: when the lane has none yet, or its reset has
 * come, asks daily.c for the next reset in the plan's zone (on the wall clock,
 * then carried over to the monotonic one). */
static void day_tick(struct sched_lane *lane, int64_t now)
{
	if (!sched_day_limited(lane))
		return;
	int64_t resets_at = sched_day_resets_at_ms(lane);
	bool new_day = resets_at != 0 && now >= resets_at;
	if (resets_at != 0 && !new_day)
		return;
	const struct plan_conf *plan = sched_lane_plan(lane);
	int64_t wall = clock_wall_ms();
	int64_t next = daily_next_reset_ms(wall, plan->day_reset_minute, plan->day_zone);
	sched_day_reset(lane, now + (next - wall), new_day);
}

static int64_t day_left_ms(const struct sched_lane *lane)
{
	int64_t left = sched_day_resets_at_ms(lane) - now_ms();
	return left < 0 ? 0 : left;
}

/* store.redis.on_error: fail, with the store down: 503 until it is back. */
static void refuse_store_down(struct lanes *ls, struct lane_ticket *t)
{
	struct store_stats *st = shared_stats(ls->shared);
	if (st != NULL)
		st->refused++;
	refuse(ls, t, LANE_REFUSE_STORE_DOWN, shared_retry_in_ms(ls->shared));
}

static void lane_pump(struct lane_shell *sh)
{
	struct lanes *ls = sh->ls;
	struct sched_lane *lane = sh->lane;
	double precise = pump_now(lane);
	int64_t now = (int64_t)precise;
	struct sched_item *it;
	day_tick(lane, now);
	while ((it = sched_expired(lane, now)) != NULL)
		refuse(ls, T_OF_ITEM(it), LANE_REFUSE_QUEUE_TIMEOUT, -1);
	if (!limiter_pump(ls->shared, lane, &sh->shared, sh, now)) {
		/* on_error: fail, and the store is down: what waits is answered. */
		while ((it = sched_drain(lane)) != NULL)
			refuse_store_down(ls, T_OF_ITEM(it));
	}
	struct shared_lease *lease;
	struct shared_grant grant;
	while ((it = limiter_next(ls->shared, lane, sh->shared, precise, &lease, &grant)) != NULL) {
		struct lane_ticket *t = T_OF_ITEM(it);
		t->lease = lease;
		t->grant = grant;
		t->dispatched_at = precise;
		(t->ev != NULL ? t->ev : &ls->ev)->dispatch(t);
	}
	/* A day's budget spent: what waits could only wait for tomorrow. */
	if (sched_day_out(lane))
		while ((it = sched_drain(lane)) != NULL)
			refuse(ls, T_OF_ITEM(it), LANE_REFUSE_DAY_OUT, day_left_ms(lane));
	double wake = sched_wake_at(lane, precise);
	if (sched_day_limited(lane) && (double)sched_day_resets_at_ms(lane) < wake)
		wake = (double)sched_day_resets_at_ms(lane);
	lane_arm(sh, wake, precise);
}

void lanes_pump(struct lanes *ls, struct sched_lane *lane)
{
	(void)ls;
	if (lane != NULL)
		lane_kick(lane);
}

/* ---- entry ---- */

uint64_t lanes_identity(const struct provider_conf *prov, const char *kind, const char *value,
                        size_t value_len)
{
	char buf[256];
	if (value == NULL || value_len == 0)
		return 0;
	int n = snprintf(buf, sizeof(buf), "%s:%s:%.*s", prov->name, kind,
	                 (int)(value_len < 200 ? value_len : 200), value);
	if (n <= 0)
		return 0;
	uint64_t h =
	    intern_hash(buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, IDENTITY_SEED);
	return h != 0 ? h : 1;
}

/* The key's id in the scope table: its whole hash, and the provider (an API
 * key sent to two providers is two keys). */
static uint64_t scope_key(const struct provider_conf *prov, const char *key_hash)
{
	uint64_t h = intern_hash(key_hash, strlen(key_hash), IDENTITY_SEED);
	uint64_t p = intern_hash(prov->name, strlen(prov->name), IDENTITY_SEED);
	return scope_id(SCOPE_KEY, h ^ p);
}

void lanes_learn_identity(struct lanes *ls, struct lane_ticket *t, const struct provider_conf *prov,
                          const struct lane_request *r, uint64_t answer_identity, int64_t now)
{
	if (answer_identity == 0 || r->key_hash == NULL)
		return;
	uint64_t key = scope_key(prov, r->key_hash);
	if (scope_learn(&ls->scopes, key, r->identity, answer_identity, now) != 1)
		return;
	char kid[KEYID_NAME_SIZE], sid[32];
	keyid_name(r->key_hash, kid);
	uint64_t scope = scope_id(SCOPE_IDENTITY, answer_identity);
	scope_format(scope, sid, sizeof(sid));
	/* The identity's lane for this model, made now from what this key's
	 * lane knows of the budget (the headers it has seen describe the
	 * identity's budget, not the key's), unless it exists already; not for
	 * a key whose configured scope wins over what answers say. */
	if (config_scope_for(ls->cref->cfg, prov, r->key_hash) == NULL) {
		struct registry_lane_id id = {.scope = scope,
		                              .scope_name = sid,
		                              .model = sched_lane_model(t->lane),
		                              .key_hash = r->key_hash};
		struct sched_lane *lane =
		    registry_lane(ls->reg, ls->cref->cfg, prov, &id, now, lane_evicted, ls);
		if (lane != NULL && lane_shell_of(ls, lane) != NULL)
			sched_lane_inherit(lane, t->lane);
	}
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "scope_learned")) {
		log_str(&l, "provider", prov->name);
		log_str(&l, "key", kid);
		log_str(&l, "scope", sid);
		log_end(&l);
	}
}

/* The scope of r (lanes_find) and its name. */
static uint64_t scope_of_request(struct lanes *ls, const struct provider_conf *prov,
                                 const struct lane_request *r, int64_t now, char *name, size_t cap)
{
	uint64_t scope;
	const char *named;
	if (r->identity != 0) {
		scope = scope_id(SCOPE_IDENTITY, r->identity);
	} else if ((named = config_scope_for(ls->cref->cfg, prov, r->key_hash)) != NULL) {
		snprintf(name, cap, "scope:%s", named);
		return scope_id(SCOPE_NAMED, intern_hash(named, strlen(named), IDENTITY_SEED));
	} else if (r->key_hash == NULL || r->key_hash[0] == '\0') {
		keyid_name(NULL, name);
		return registry_key_scope(NULL);
	} else {
		uint64_t key = scope_key(prov, r->key_hash);
		scope = scope_of(&ls->scopes, key, 0, now);
		if (scope == key) { /* the key is its own scope */
			keyid_name(r->key_hash, name);
			return registry_key_scope(r->key_hash);
		}
	}
	scope_format(scope, name, cap);
	return scope;
}

static struct provider_news *provider_news(struct lanes *ls, const char *name, bool add)
{
	for (size_t i = 0; i < ls->n_news; i++)
		if (strcmp(ls->news[i].name, name) == 0)
			return &ls->news[i];
	if (!add || ls->n_news == LANES_PROVIDERS_MAX || strlen(name) >= sizeof(ls->news[0].name))
		return NULL;
	struct provider_news *n = &ls->news[ls->n_news++];
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->silent = false;
	n->streams = false;
	return n;
}

/* Whether prov's answers teach nothing: its dialect reads no rate-limit
 * headers, or its last answer had none. Unknown (no answer yet): false. */
static bool provider_silent(struct lanes *ls, const struct provider_conf *prov)
{
	if (prov->dialect == DIALECT_NONE)
		return true;
	const struct provider_news *n = provider_news(ls, prov->name, false);
	return n != NULL && n->silent;
}

/* Whether prov answered a success with an event stream (ever). */
static bool provider_streams(struct lanes *ls, const struct provider_conf *prov)
{
	const struct provider_news *n = provider_news(ls, prov->name, false);
	return n != NULL && n->streams;
}

/* What an answer of prov said of its headers (streamed: a success with an
 * event stream); tells the lane whether its provider is silent and streams. */
static void provider_answered(struct lanes *ls, struct sched_lane *lane,
                              const struct rlh_result *rlh, bool streamed)
{
	bool told = false;
	for (int b = 0; b < RLH_N_BUDGETS && !told; b++)
		told = rlh->budget[b].has_limit || rlh->budget[b].has_remaining;
	struct provider_news *n = provider_news(ls, sched_lane_provider(lane)->name, true);
	if (n != NULL) {
		n->silent = !told;
		n->streams |= streamed;
	}
	sched_set_provider_silent(lane, !told);
	if (streamed)
		sched_set_provider_streams(lane, true);
}

const struct plan_conf *lanes_find(struct lanes *ls, struct lane_ticket *t,
                                   const struct provider_conf *prov, const struct lane_request *r,
                                   int64_t now)
{
	if (shared_refusing(ls->shared)) {
		refuse_store_down(ls, t);
		return NULL;
	}
	struct intern *names = registry_intern(ls->reg);
	const char *group = r->side != NULL ? intern_get(names, r->side, strlen(r->side))
	                    : r->model != NULL
	                        ? model_group_intern(names, prov, r->model, r->model_len)
	                        : NULL;
	char scope_name[32];
	struct registry_lane_id id = {
	    .scope = scope_of_request(ls, prov, r, now, scope_name, sizeof(scope_name)),
	    .scope_name = scope_name,
	    .model = group,
	    .key_hash = r->key_hash,
	};
	struct sched_lane *lane =
	    registry_lane(ls->reg, ls->cref->cfg, prov, &id, now, lane_evicted, ls);
	intern_put(names, group); /* the lane holds its own reference */
	if (lane == NULL || lane_shell_of(ls, lane) == NULL) {
		refuse(ls, t, LANE_REFUSE_TOO_MANY_LANES, 1000);
		return NULL;
	}
	t->lane = lane;
	if (!sched_answered(lane)) {
		sched_set_provider_streams(lane, provider_streams(ls, prov));
		sched_set_provider_silent(lane, provider_silent(ls, prov));
		/* A fresh lane's first limit is no change (the latency
		 * controller's slow start may set it below max_concurrent). */
		if (sched_lane_stats(lane)->dispatched == 0)
			((struct lane_shell *)sched_lane_shell(lane))->last_limit =
			    sched_concurrency_limit(lane);
	}
	return sched_lane_plan(lane);
}

const struct plan_conf *lanes_plan(const struct lane_ticket *t)
{
	return sched_lane_plan(t->lane);
}

bool lanes_learns_cost(const struct lane_ticket *t, const struct lane_cost *c)
{
	const struct cost_request *r = &t->cost;
	if ((r->chained || r->stored) && (r->conversation || r->agent || r->prompt_key))
		return true;
	return c->prompt_key != 0 &&
	       profile_cache_reads_free(sched_lane_provider(t->lane), sched_lane_model(t->lane));
}

struct lane_cost lane_cost_of(const struct tokens_cost *cost)
{
	return (struct lane_cost){
	    .input = cost->prompt,
	    .prefix = cost->cache_marked ? cost->head_tokens : cost->prefix_tokens,
	    .prompt_key = cost->cache_marked ? cost->head_key : cost->prompt_key,
	    .max_output = cost->output_named ? cost->output : -1,
	    .cache_ttl_ms = cost->cache_ttl_ms,
	    .chained = cost->chained,
	    .stored = cost->stored,
	    .conversation = cost->chain_key,
	    .items = cost->items_tokens,
	};
}

void lanes_charge(struct lane_ticket *t, struct sched_request *rq, const struct lane_cost *c,
                  int64_t now)
{
	struct sched_lane *lane = t->lane;
	t->cost = (struct cost_request){
	    .input_estimate = c->input,
	    .prefix_tokens = c->prefix,
	    .prompt_key = c->prompt_key,
	    .agent = rq->agent,
	    .max_output = c->max_output,
	    .cache_ttl_ms = c->cache_ttl_ms,
	    .chained = c->chained,
	    .stored = c->stored,
	    .conversation = c->conversation,
	    .items = c->items,
	};
	t->metered = sched_wants_tokens(lane);
	if (!t->metered) {
		rq->cost_prompt = rq->cost_output = 0;
		return;
	}
	struct cost_charge ch;
	sched_cost_charge(lane, &t->cost, now, &ch);
	rq->cost_prompt = ch.input;
	rq->cost_output = ch.output;
}

size_t lanes_submit(struct lanes *ls, struct lane_ticket *t, const struct sched_request *rq,
                    long long client_ms, int64_t deadline_ms, int64_t now)
{
	struct sched_lane *lane = t->lane;
	/* A wait longer than the client will wait is a wait for nothing: say
	 * so now, with when there will be room, so that the SDK's own retry
	 * lands then. */
	if (client_ms > 0) {
		int64_t wait_ms = sched_queue_eta_ms(lane, rq, now);
		if (now + wait_ms >= deadline_ms) {
			refuse(ls, t, LANE_REFUSE_DEADLINE, wait_ms);
			return 0;
		}
	}
	day_tick(lane, now);
	struct sched_item *evicted;
	switch (sched_submit(lane, &t->item, rq, now, &evicted)) {
	case SCHED_OK:
		/* It took the place of the newest request of a lower priority. */
		if (evicted != NULL)
			refuse(ls, T_OF_ITEM(evicted), LANE_REFUSE_EVICTED,
			       sched_queue_eta_ms(lane, NULL, now));
		break;
	case SCHED_QUEUE_FULL:
		refuse(ls, t, LANE_REFUSE_QUEUE_FULL, sched_queue_eta_ms(lane, rq, now));
		return 0;
	case SCHED_AGENT_BUSY:
		refuse(ls, t, LANE_REFUSE_AGENT_BUSY, -1);
		return 0;
	case SCHED_QUOTA:
		refuse(ls, t, LANE_REFUSE_QUOTA, -1);
		return 0;
	case SCHED_DAY_OUT:
		refuse(ls, t, LANE_REFUSE_DAY_OUT, day_left_ms(lane));
		return 0;
	}
	/* The lane decides later in this turn (lane_kick): the request queues
	 * when no slot is left for it once those ahead have gone, or when those
	 * ahead wait already (a gate, a hold). */
	size_t depth = sched_queue_depth(lane);
	bool no_slot = sched_in_flight(lane) + depth > sched_concurrency_limit(lane);
	bool held = depth > 1 && sched_wake_at(lane, now) > now;
	lane_kick(lane);
	return no_slot || held ? depth : 0;
}

/* ---- what the exchange tells ---- */

/* A server's hint holds the lane hold_ms from now: from a fresh clock (the
 * turn's may predate the answer's arrival: a libcurl timer can read a
 * socket), and from the millisecond after it, because the clock truncates.
 * The provider's window began when its answer left, before now; a hold
 * that ends even a fraction of a millisecond before the window does sends
 * its probe into it, and a provider that punishes starts the window over. */
static void hold_for_hint(struct lanes *ls, struct sched_lane *lane, int64_t hold_ms)
{
	limiter_hold(ls->shared, lane, lane_shared(lane), hold_ms, clock_fresh_ms() + 1);
}

bool lanes_headers(struct lanes *ls, struct lane_ticket *t, int status,
                   const struct rlh_result *rlh, const struct retry_head_verdict *hv,
                   bool event_stream, int64_t now)
{
	struct sched_lane *lane = t->lane;
	/* Each answer says again whether the provider is silent: the lane's
	 * concurrency follows its latency while it is, once it streams
	 * (concurrency.mode auto). */
	provider_answered(ls, lane, rlh, event_stream && status >= 200 && status < 300);
	/* Only an answer the provider serves was charged its output: a refusal's
	 * count says nothing of how max_tokens is counted. */
	if (status >= 200 && status < 300)
		sched_cost_headers(lane, &t->item, &t->cost, rlh, now);
	bool learned =
	    limiter_observe(ls->shared, lane, lane_shared(lane), &t->item, rlh, hv->capacity, now);
	lane_kick(lane); /* what was learned may move the lane's next instant */
	/* A capacity answer holds the lane from its headers on: what would
	 * leave in between reaches a provider that has just refused. Until its
	 * body is decided (PENDING_HOLD_MAX_MS at most), and for the
	 * header's retry-after, which needs no body. */
	if (hv->capacity) {
		if (hv->hold_ms > 0)
			hold_for_hint(ls, lane, hv->hold_ms);
		sched_hold_pending(lane, &t->item, clock_fresh_ms() + PENDING_HOLD_MAX_MS);
	}
	return learned;
}

void lanes_log_learned(const struct lane_ticket *t, struct log_line *l, int64_t now)
{
	static const char *const names[RLH_N_BUDGETS] = {"requests", "tokens", "input_tokens",
	                                                 "output_tokens", "project_tokens"};
	const char *model = sched_lane_model(t->lane);
	if (model != NULL)
		log_str(l, "model", model);
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct learned *lb = sched_learned(t->lane, b);
		if (lb == NULL)
			continue;
		char line[256];
		learned_summary(lb, now, line, sizeof(line));
		log_str(l, names[b], line);
	}
}

static enum sched_outcome sched_outcome_of(enum retry_lane_outcome o)
{
	switch (o) {
	case RETRY_LANE_CAPACITY:
		return SCHED_CAPACITY;
	case RETRY_LANE_TRANSIENT:
		return SCHED_TRANSIENT;
	case RETRY_LANE_QUOTA_OUT:
		return SCHED_QUOTA_OUT;
	case RETRY_LANE_OVERLOAD:
	case RETRY_LANE_TIER:
		return SCHED_OVERLOAD;
	case RETRY_LANE_SUCCESS:
		break;
	}
	return SCHED_SUCCESS;
}

void lanes_complete(struct lanes *ls, struct lane_ticket *t, enum retry_lane_outcome outcome,
                    bool hinted, int64_t hold_ms, int64_t now, struct lane_change *ch)
{
	struct sched_lane *lane = t->lane;
	struct lane_shell *sh = sched_lane_shell(lane);
	t->item.hinted = hinted;
	ch->quota_restored = limiter_complete(ls->shared, lane, sh->shared, &t->item, &t->lease,
	                                      sched_outcome_of(outcome), now);
	ch->limit_from = sh->last_limit;
	ch->limit_to = sh->last_limit = sched_concurrency_limit(lane);
	if (ch->quota_restored && sh->quota_answer != NULL)
		evbuffer_drain(sh->quota_answer, evbuffer_get_length(sh->quota_answer));
	/* A capacity hint speaks for the whole key: nothing of this lane goes
	 * before it ends (the provider would refuse it anyway). */
	if (hold_ms > 0)
		hold_for_hint(ls, lane, hold_ms);
}

bool lanes_learn_told(struct lanes *ls, struct lane_ticket *t, int budget, int64_t limit,
                      int64_t window_ms, int64_t now_ms)
{
	(void)ls;
	if (t->lane == NULL || limit <= 0 ||
	    !sched_learn_told(t->lane, budget, (double)limit, window_ms, now_ms))
		return false;
	lane_kick(t->lane); /* the lane's next instant moved */
	return true;
}

int64_t lanes_tokens_used(struct lanes *ls, struct lane_ticket *t,
                          const struct tokens_usage *reported, int64_t now)
{
	struct sched_lane *lane = t->lane;
	/* Cache reads count where the provider's limits count them, and on the
	 * models whose reads count although their provider's do not (Anthropic's
	 * Haiku 3 and 3.5: profile.h). */
	bool reads_free =
	    profile_cache_reads_free(sched_lane_provider(lane), sched_lane_model(lane));
	struct tokens_usage c = tokens_usage_counted(reported, reads_free);
	const struct tokens_usage *u = &c;
	if (t->metered)
		limiter_tokens_used(ls->shared, lane, lane_shared(lane), &t->item, (double)u->total,
		                    u->has_input ? (double)u->input : -1,
		                    u->has_output ? (double)u->output : -1, now);
	/* Where cache reads count as input there is no cached share to learn. */
	bool cache = u->has_cache && reads_free;
	struct cost_usage cu = {
	    .charged_input = u->has_input ? u->input : -1,
	    .cache_creation = cache ? u->cache_creation : -1,
	    .cache_read = cache ? u->cache_read : -1,
	    .output = u->has_output ? u->output : -1,
	    .output_capped =
	        u->has_output && t->cost.max_output > 0 && u->output >= t->cost.max_output,
	};
	sched_cost_observe(lane, &t->cost, &cu, t->item.dispatched_ms);
	return u->total;
}

bool lanes_timing_wanted(const struct lane_ticket *t)
{
	return t->lane != NULL && sched_timing_wanted(t->lane);
}

void lanes_first_token(struct lanes *ls, struct lane_ticket *t, double first_ms, int64_t now)
{
	(void)ls;
	if (sched_first_token(t->lane, &t->item, first_ms, (double)t->cost.input_estimate, now))
		lane_kick(t->lane); /* room for more at once */
}

void lanes_answer_timed(struct lanes *ls, struct lane_ticket *t, const struct stopwatch *w,
                        int64_t now)
{
	(void)ls;
	struct stopwatch_times st;
	stopwatch_times(w, &st);
	struct sched_timing tm = {
	    .first_ms = w->sse ? st.first_ms : -1,
	    .stream_ms = st.stream_ms,
	    .max_gap_ms = st.max_gap_ms,
	    .events = st.events,
	    .prompt_tokens = (double)t->cost.input_estimate,
	};
	sched_answer_timed(t->lane, &t->item, &tm, now);
}

void lanes_retry(struct lanes *ls, struct lane_ticket *t, int64_t ready_ms)
{
	(void)ls;
	sched_retry(t->lane, &t->item, ready_ms);
}

void lanes_sent(struct lanes *ls, struct lane_ticket *t)
{
	struct sched_lane *lane = t->lane;
	/* Only a paced lane spaces its sends; the others need not read the
	 * clock. */
	if (lane == NULL || !lane_gated(lane))
		return;
	limiter_sent(ls->shared, lane, lane_shared(lane), &t->item, &t->grant, t->dispatched_at,
	             clock_precise_ms());
}

bool lanes_recall(struct lanes *ls, struct lane_ticket *t)
{
	struct sched_lane *lane = t->lane;
	/* Held at the turn's clock, and still at a fresh one: a hold that
	 * ended within the turn lets the probe that ends it go (and nothing
	 * else is held at a fresh clock that was not at the turn's, so the
	 * common path reads no clock). */
	return lane != NULL && sched_held(lane, clock_now_ms()) &&
	       limiter_recall(ls->shared, lane, &t->item, &t->lease, clock_fresh_ms());
}

void lanes_cancel(struct lanes *ls, struct lane_ticket *t)
{
	struct sched_lane *lane = t->lane;
	if (lane == NULL)
		return;
	switch (t->item.state) {
	case SCHED_IN_FLIGHT:
		limiter_complete(ls->shared, lane, lane_shared(lane), &t->item, &t->lease,
		                 SCHED_ABORTED, now_ms());
		break;
	case SCHED_QUEUED:
	case SCHED_RETRY_WAIT:
		sched_cancel(lane, &t->item);
		break;
	case SCHED_NONE:
		return;
	}
	lane_kick(lane);
}

/* ---- quota ---- */

/* Keeps a quota refusal as the lane's answer to every request it refuses
 * while the quota is out. The upstream's x-request-id is left out: it names
 * the request that was refused, not the ones that get a copy (they get their
 * own). */
static void quota_keep(struct lane_shell *sh, struct evbuffer *answer, size_t n_head,
                       size_t head_len, int status, const char *reason)
{
	if (sh->quota_answer == NULL && (sh->quota_answer = evbuffer_new()) == NULL)
		return;
	evbuffer_drain(sh->quota_answer, evbuffer_get_length(sh->quota_answer));
	size_t total = evbuffer_get_length(answer);
	const char *p = (const char *)evbuffer_pullup(answer, -1);
	const char *q = p;
	size_t n = 0;
	for (size_t i = 0; i < n_head; i++) {
		size_t name_len = strlen(q);
		const char *v = q + name_len + 1;
		size_t value_len = strlen(v);
		if (strcasecmp(q, "x-request-id") != 0) {
			evbuffer_add(sh->quota_answer, q, name_len + 1 + value_len + 1);
			n++;
		}
		q = v + value_len + 1;
	}
	sh->quota_n = n;
	sh->quota_head_len = evbuffer_get_length(sh->quota_answer);
	evbuffer_add(sh->quota_answer, p + head_len, total - head_len);
	sh->quota_status = status;
	size_t rn = strnlen(reason, sizeof(sh->quota_reason) - 1);
	memcpy(sh->quota_reason, reason, rn);
	sh->quota_reason[rn] = '\0';
}

bool lanes_quota_answer(const struct lane_ticket *t, struct evbuffer *dst, size_t *n,
                        size_t *head_len, int *status, const char **reason)
{
	const struct lane_shell *sh = t->lane != NULL ? sched_lane_shell(t->lane) : NULL;
	if (sh == NULL || sh->quota_answer == NULL || evbuffer_get_length(sh->quota_answer) == 0)
		return false;
	evbuffer_drain(dst, evbuffer_get_length(dst));
	size_t len = evbuffer_get_length(sh->quota_answer);
	evbuffer_add(dst, evbuffer_pullup(sh->quota_answer, -1), len);
	*n = sh->quota_n;
	*head_len = sh->quota_head_len;
	*status = sh->quota_status;
	*reason = sh->quota_reason;
	return true;
}

static size_t quota_drain(struct lanes *ls, struct sched_lane *lane)
{
	size_t drained = 0;
	struct sched_item *it;
	while ((it = sched_drain(lane)) != NULL) {
		refuse(ls, T_OF_ITEM(it), LANE_REFUSE_QUOTA, -1);
		drained++;
	}
	return drained;
}

size_t lanes_quota(struct lanes *ls, struct lane_ticket *t, struct evbuffer *answer, size_t n,
                   size_t head_len, int status, const char *reason, bool *fresh)
{
	struct sched_lane *lane = t->lane;
	quota_keep(sched_lane_shell(lane), answer, n, head_len, status, reason);
	*fresh = limiter_quota_out(ls->shared, lane, lane_shared(lane), now_ms());
	return quota_drain(ls, lane);
}

/* ---- readings ---- */

size_t lanes_in_flight(const struct lane_ticket *t)
{
	return sched_in_flight(t->lane);
}

unsigned lanes_concurrency(const struct lane_ticket *t)
{
	return sched_concurrency_limit(t->lane);
}

int64_t lanes_dispatch_delay_ms(const struct lane_ticket *t)
{
	return sched_dispatch_delay_ms(t->lane);
}

size_t lanes_count(const struct lanes *ls)
{
	return registry_count(ls->reg);
}

struct registry *lanes_registry(const struct lanes *ls)
{
	return ls->reg;
}

struct scope_table *lanes_scopes(struct lanes *ls)
{
	return &ls->scopes;
}

void lanes_set_restore(struct lanes *ls,
                       void (*restore)(void *arg, struct sched_lane *lane, int64_t now_ms),
                       void *arg)
{
	ls->restore = restore;
	ls->restore_arg = arg;
}

struct shared *lanes_shared(const struct lanes *ls)
{
	return ls->shared;
}

/* ---- the set ---- */

static void reconfigure_lane(struct sched_lane *lane, void *arg)
{
	struct lanes *ls = arg;
	struct lane_shell *sh = sched_lane_shell(lane);
	const struct config *cfg = ls->cref->cfg;
	const struct provider_conf *prov = config_provider(cfg, sched_lane_provider(lane)->name);
	if (sh == NULL || prov == NULL)
		return; /* its provider is gone: it keeps its old plan until it empties */
	const struct plan_conf *plan =
	    config_plan_for(cfg, prov, sched_lane_key_hash(lane), sched_lane_model(lane));
	sched_lane_reconfigure(lane, prov, plan, cfg->agents.mode, now_ms());
	config_ref_put(sh->cref);
	sh->cref = config_ref_get(ls->cref);
	lane_kick(lane); /* the new limits may open a gate now */
}

void lanes_reconfigure(struct lanes *ls, struct config_ref *cref)
{
	struct config_ref *old = ls->cref;
	ls->cref = config_ref_get(cref);
	registry_foreach(ls->reg, reconfigure_lane, ls);
	config_ref_put(old);
}

/* Lanes idle for limits.idle_ttl_s are forgotten. */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct lanes *ls = arg;
	(void)fd;
	(void)what;
	registry_evict_idle(ls->reg, now_ms(), (int64_t)ls->cref->cfg->limits.idle_ttl_s * 1000,
	                    lane_evicted, ls);
}

/* ---- the shared store's hooks ---- */

static void log_lane_store_event(const struct sched_lane *lane, enum log_level level,
                                 const char *event, long long drained)
{
	struct log_line l;
	if (!log_begin(&l, level, event))
		return;
	log_str(&l, "provider", sched_lane_provider(lane)->name);
	log_str(&l, "key", sched_lane_key_id(lane));
	log_str(&l, "reason", "another replica's answer (shared store)");
	if (drained >= 0)
		log_int(&l, "drained", drained);
	log_end(&l);
}

/* Another replica found the quota out: this lane stops as if it had. */
static void on_shared_quota_out(struct sched_lane *lane)
{
	struct lane_shell *sh = sched_lane_shell(lane);
	sched_quota_exhausted(lane, now_ms());
	size_t drained = sh != NULL ? quota_drain(sh->ls, lane) : 0;
	log_lane_store_event(lane, LOG_WARN, "quota_exhausted", (long long)drained);
}

/* ... and back: a probe of another replica succeeded. */
static void on_shared_quota_back(struct sched_lane *lane)
{
	struct lane_shell *sh = sched_lane_shell(lane);
	sched_quota_restored(lane);
	if (sh != NULL && sh->quota_answer != NULL)
		evbuffer_drain(sh->quota_answer, evbuffer_get_length(sh->quota_answer));
	log_lane_store_event(lane, LOG_INFO, "quota_restored", -1);
}

/* A decision of the store came back: its permits to the scheduler, the
 * shared quota's state compared with the lane's (not after a failure, which
 * says nothing of it), then the lane runs. */
static void on_shared_decided(void *owner, const struct shared_answer *a)
{
	struct lane_shell *sh = owner;
	struct sched_lane *lane = sh->lane;
	limiter_decided(lane, a);
	if (a->verdict != SHARED_FAILED) {
		if (a->quota && !sched_quota_out(lane))
			on_shared_quota_out(lane);
		else if (!a->quota && sched_quota_out(lane))
			on_shared_quota_back(lane);
	}
	lane_kick(lane);
}

static void kick_busy_lane(struct sched_lane *lane, void *arg)
{
	(void)arg;
	if (!sched_lane_idle(lane))
		lane_kick(lane);
}

/* The store went up or down: every lane with something waiting looks again
 * (to fall back, to refuse, or to be shared again) now, not at its timer. */
static void on_store_changed(void *arg, bool up)
{
	struct lanes *ls = arg;
	(void)up;
	registry_foreach(ls->reg, kick_busy_lane, NULL);
}

struct lanes *lanes_new(struct event_base *base, struct config_ref *cref,
                        const struct lanes_events *ev, char *err, size_t errlen)
{
	struct lanes *ls = calloc(1, sizeof(*ls));
	if (ls == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ls->base = base;
	ls->ev = *ev;
	ls->cref = config_ref_get(cref);
	ls->reg = registry_new(((uint64_t)arc4random() << 32) | arc4random());
	scope_init(&ls->scopes, SCOPES_MAX, SCOPE_IDLE_MS);
	ls->sweep = event_new(base, -1, EV_PERSIST, on_sweep, ls);
	if (ls->reg == NULL || ls->sweep == NULL) {
		snprintf(err, errlen, "out of memory");
		lanes_free(ls);
		return NULL;
	}
	const struct shared_hooks hooks = {
	    .decided = on_shared_decided,
	    .store_changed = on_store_changed,
	    .arg = ls,
	};
	ls->shared = shared_new(base, cref->cfg, &hooks, err, errlen);
	if (ls->shared == NULL && err[0] != '\0') {
		lanes_free(ls);
		return NULL;
	}
	struct timeval sweep = {LANE_SWEEP_S, 0};
	event_add(ls->sweep, &sweep);
	return ls;
}

void lanes_free(struct lanes *ls)
{
	if (ls == NULL)
		return;
	if (ls->reg != NULL)
		registry_free(ls->reg, lane_evicted, ls);
	shared_free(ls->shared);
	scope_free(&ls->scopes);
	if (ls->sweep != NULL)
		event_free(ls->sweep);
	config_ref_put(ls->cref);
	free(ls);
}
