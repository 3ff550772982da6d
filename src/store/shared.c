/* SPDX-License-Identifier: Apache-2.0 */
/* shared — lanes' gates in the shared store; see shared.h.
 *
 * The store's side of a lane (keys, decisions, leases), driven by the lanes'
 * owner like the scheduler is, beside it and not below it: it never sees the
 * scheduler's lane. What the lane's gates are comes in with each call (struct
 * shared_gates, the store's terms: rates, budgets); what Redis decided goes
 * back out as one event per decision (shared_hooks.decided), which the lanes
 * hand to the scheduler. */
#include "store/shared.h"

#include <event2/event.h>
#include <event2/event_struct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/list.h"
#include "core/log.h"
#include "provider/ratelimit_headers.h"
#include "store/batch.h"
#include "store/delay_bound.h"
#include "store/fleet.h"
#include "store/store.h"
#include "store/store_script.h"

#define MEMBER_MAX 96
/* A decision asked again within this long after its "wait" keeps its place in
 * the lease queue (decide forgets a waiter after QUEUE_STALE, 150 ms). */
#define WAITING_REUSE_MS 100
/* A step of the margin no sample has measured yet: a quarter of a ms, more
 * than each step measured on one machine (a Redis round trip 0.2-0.5 ms is
 * measured before the first go is used; the others took 0.01-0.15 ms). */
#define MARGIN_STEP_EMPTY_MS 0.25
/* How much before the store's instant a lane asks again after a "wait": the
 * store answers a go for that instant (RESERVE_MS, 5, in store_script.c)
 * where an ask on time would arrive late by its own delays. */
#define ASK_EARLY_MS 2.0
/* The shortest interval of a strict gate charged without a margin, its
 * dispatches pushing it instead (shared_pump). */
#define PUSH_IN_TIME_MS 20.0
/* Token corrections (actual usage minus the estimate charged) are summed per
 * lane and sent this often, one command per lane, not one per request: they
 * come after an answer already, seconds after the charge; a few ms more
 * change nothing, and a busy lane's commands per request fall well below one. */
#define CORRECT_EVERY_MS 10
#define CORRECTIONS_MAX 64
/* The gates a correction touches: the plan's token gates, the learned ones. */
#define CORRECT_FIELDS 7
static const char *const correct_fields[CORRECT_FIELDS] = {"t", "ti", "to", "l1", "l2", "l3", "l4"};

/* One lane's corrections not sent yet. */
struct correction {
	char key[STORE_KEY_MAX];
	struct store_gate g[CORRECT_FIELDS]; /* cost: the sum of the deltas */
	bool used[CORRECT_FIELDS];
};

static const char *const request_fields[SHARED_REQUEST_GATES] = {"r0", "r1", "r2", "r3"};
static const char *const learned_fields[RLH_N_BUDGETS] = {"l0", "l1", "l2", "l3", "l4"};

struct shared_lease {
	struct list link; /* sh->leases: renewed while in flight */
	uint64_t seq;
	char leases_key[STORE_KEY_MAX];
};

/* A decision's lease member (0: no lease asked) and when it was answered. */
struct asked_seq {
	uint64_t seq;
	double at_ms;
};

/* A "go" not used yet: its lease, when it was due (the margin's
 * answer-to-dispatch step starts there), and what bounds its send: asked at
 * asked_ms, for wait_ms after the store's instant, with margin_ms promised. */
struct granted {
	uint64_t seq;
	double due_ms, asked_ms, wait_ms, margin_ms;
};

/* Decisions asked and answered, in order: Redis answers one connection's
 * commands in the order they were sent, so the lease of each answer is the
 * oldest asked. */
struct shared_lane {
	void *owner; /* handed back with each decision (shared_hooks.decided) */
	uint64_t asked[SHARED_PERMITS_MAX];
	unsigned asked_head, asked_n;
	/* "go"s not used yet, in the order the lane uses its permits */
	struct granted granted[SHARED_PERMITS_MAX];
	unsigned granted_head, granted_n;
	/* the lane's request gates without slack, as last asked, and what each
	 * keeps after a send: a send later than its margin pushes them
	 * (late_send) */
	struct store_gate strict[SHARED_REQUEST_GATES];
	int strict_w[SHARED_REQUEST_GATES]; /* which request window each is */
	size_t n_strict;
	/* members answered "wait": asked again first, they keep their place in
	 * the lease queue */
	struct asked_seq waiting[SHARED_PERMITS_MAX];
	unsigned waiting_head, waiting_n;
	struct store_lane_names names;
	bool fell_back; /* counted in stats.fallbacks until decided here again */
	/* when this replica last wrote the lane's margin (mono ms): decisions
	 * asked before it read what it replaced */
	double margin_sent_ms;
};

struct shared {
	struct store *store;
	struct shared_hooks hooks;
	char prefix[80];
	double idle_ms, lease_ms;
	enum store_on_error on_error;
	/* The replicas sharing the store, from their heartbeats: what the
	 * plans' limits are divided by while it is down. */
	struct fleet fleet;
	char fleet_key[STORE_KEY_MAX];
	struct event beat;
	char replica[64]; /* names this process's leases and heartbeats */
	uint64_t lease_seq;
	struct list leases; /* newest first */
	/* The margin's three steps, from a decision's instant in Redis to its
	 * request on the wire: the decision's round trip (the instant is
	 * somewhere inside it), its answer to the dispatch, the dispatch to the
	 * write (shared_sent). */
	struct delay_bound rtt, to_dispatch, to_wire;
	struct event_base *base;
	struct list reserved; /* decisions: goes held until their instant */
	struct event renew;
	bool closing; /* shared_free: the lanes may be gone already */
	struct correction corrections[CORRECTIONS_MAX];
	unsigned n_corrections;
	struct event flush;
	bool flush_armed;
};

struct decision {
	struct shared *sh;
	struct shared_lane *sl;
	double asked_ms, margin_ms;
	/* a go for a later instant, held until due_ms (sh->reserved) */
	struct event ev;
	struct list link;
	uint64_t seq;
	double answered_ms, due_ms;
	bool quota;
	double margin;    /* the lane's margin the answer carried (0: none) */
	unsigned permits; /* 1, or a batch's size (store/batch.h) */
};

/* CLOCK_MONOTONIC now, in fractional ms, not the turn's cached value: the
 * margin's steps are fractions of a millisecond. */
static double mono_ms(void)
{
	return (double)clock_mono_ns() / 1e6;
}

/* ---- keys ---- */

static void member_of(const struct shared *sh, uint64_t seq, char *out)
{
	snprintf(out, MEMBER_MAX, "%s:%llu", sh->replica, (unsigned long long)seq);
}

/* ---- leases ---- */

static void on_renew(evutil_socket_t fd, short what, void *arg)
{
	struct shared *sh = arg;
	(void)fd;
	(void)what;
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &sh->leases) {
		if (!store_up(sh->store))
			break;
		const struct shared_lease *l = LIST_ITEM(node, struct shared_lease, link);
		char member[MEMBER_MAX];
		struct store_cmd cmd;
		member_of(sh, l->seq, member);
		store_cmd_renew(&cmd, l->leases_key, sh->lease_ms, member);
		store_send(sh->store, &cmd, NULL, NULL);
	}
}

static void release_member(struct shared *sh, const char *leases_key, uint64_t seq)
{
	char member[MEMBER_MAX];
	struct store_cmd cmd;
	member_of(sh, seq, member);
	store_cmd_release(&cmd, leases_key, member);
	store_send(sh->store, &cmd, NULL, NULL);
}

/* A request left later after its store's instant than the margin its
 * decision promised (its round trip or its timer was slow: the process was
 * not running; or it was charged without a margin, shared_pump): the gates
 * without slack are pushed by the difference, so that the next request,
 * whichever replica sends it, still leaves T after this one. Its store's
 * instant was after asked_ms: the send at sent_ms is at most
 * sent_ms - asked_ms - wait_ms after it, measured at the write itself, not
 * bounded. The next decision is about T away: the push is there before it.
 * Only a send later than a promised margin counts in late_sends. */
static void late_send(struct shared *sh, struct shared_lane *sl, const struct shared_grant *g,
                      double sent_ms, const struct shared_gates *now)
{
	double excess = sent_ms - g->asked_ms - g->wait_ms - g->margin_ms;
	/* Charged without a margin: the push also keeps what a strict gate keeps
	 * beyond T for the network and the provider's receiving (gcra_sent). */
	bool unmargined = g->margin_ms <= 0;
	if ((excess <= 0 && !unmargined) || sl->n_strict == 0 || !store_up(sh->store))
		return;
	struct store_gate push[SHARED_REQUEST_GATES];
	for (size_t i = 0; i < sl->n_strict; i++) {
		push[i] = sl->strict[i];
		push[i].cost = fmax(excess, 0) / push[i].t_ms;
		/* what the lane keeps now: a margin adopted from this very
		 * decision's answer, after the ask, spaces the next request */
		if (unmargined)
			push[i].cost += now->req[sl->strict_w[i]].keep;
	}
	struct store_cmd cmd;
	store_cmd_adjust(&cmd, sl->names.key, sh->idle_ms, push, sl->n_strict);
	store_send(sh->store, &cmd, NULL, NULL);
	if (!unmargined)
		store_stats(sh->store)->late_sends++;
}

struct shared_lease *shared_dispatched(struct shared *sh, struct shared_lane *sl,
                                       struct shared_grant *grant)
{
	grant->valid = false;
	if (sh == NULL || sl == NULL || sl->granted_n == 0)
		return NULL;
	struct granted g = sl->granted[sl->granted_head];
	sl->granted_head = (sl->granted_head + 1) % SHARED_PERMITS_MAX;
	sl->granted_n--;
	double now = mono_ms();
	delay_bound_add(&sh->to_dispatch, now - g.due_ms, clock_now_ms());
	*grant = (struct shared_grant){
	    .asked_ms = g.asked_ms, .wait_ms = g.wait_ms, .margin_ms = g.margin_ms, .valid = true};
	if (g.seq == 0)
		return NULL;
	struct shared_lease *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		release_member(sh, sl->names.leases, g.seq);
		return NULL;
	}
	l->seq = g.seq;
	memcpy(l->leases_key, sl->names.leases, STORE_KEY_MAX);
	list_insert_head(&sh->leases, &l->link);
	return l;
}

void shared_sent(struct shared *sh, struct shared_lane *sl, struct shared_grant *grant,
                 double dispatched_ms, double sent_ms, const struct shared_gates *now)
{
	if (sh == NULL || !grant->valid)
		return;
	grant->valid = false;
	delay_bound_add(&sh->to_wire, sent_ms - dispatched_ms, clock_now_ms());
	if (sl != NULL)
		late_send(sh, sl, grant, sent_ms, now);
}

void shared_release(struct shared *sh, struct shared_lease *l)
{
	if (sh == NULL || l == NULL)
		return;
	release_member(sh, l->leases_key, l->seq);
	list_remove(&l->link);
	free(l);
}

/* ---- decisions ---- */

/* The gates of one decision for a request costing c: the plan's (at its full
 * limits: the store holds every replica's charges) and the learned budgets.
 * A learned budget this replica has no pace for goes with t_ms 0: the store
 * applies what another replica learned, if any did. */
static size_t decision_gates(const struct shared_gates *s, const struct shared_ask *c,
                             struct store_gate *g)
{
	size_t n = 0;
	for (int w = 0; w < SHARED_REQUEST_GATES; w++)
		if (s->req[w].t_ms > 0)
			g[n++] = (struct store_gate){request_fields[w], s->req[w].t_ms,
			                             s->req[w].burst, 1};
	if (s->tokens.t_ms > 0 && c->tokens > 0)
		g[n++] = (struct store_gate){"t", s->tokens.t_ms, s->tokens.burst, c->tokens};
	if (s->input.t_ms > 0 && c->prompt > 0)
		g[n++] = (struct store_gate){"ti", s->input.t_ms, s->input.burst, c->prompt};
	if (s->output.t_ms > 0 && c->output > 0)
		g[n++] = (struct store_gate){"to", s->output.t_ms, s->output.burst, c->output};
	const double costs[RLH_N_BUDGETS] = {1, c->tokens, c->prompt, c->output, c->tokens};
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		if (costs[b] <= 0)
			continue;
		struct store_gate gate = {learned_fields[b], 0, 0, costs[b]};
		const struct shared_budget *l = &s->learned[b];
		if (l->known && l->t_ms > 0 && l->capacity > 0) {
			gate.t_ms = l->t_ms;
			gate.burst = l->capacity;
		}
		g[n++] = gate;
	}
	return n;
}

/* What Redis decided, told to the lane's owner: every permit the decision
 * asked for is answered so, with the quota flag and the margin every
 * verdict carries. */
static void tell(const struct decision *d, enum shared_verdict verdict, int64_t until_ms,
                 bool quota)
{
	const struct shared_answer a = {.verdict = verdict,
	                                .permits = d->permits,
	                                .until_ms = until_ms,
	                                .quota = quota,
	                                .margin = verdict == SHARED_FAILED ? 0 : d->margin};
	d->sh->hooks.decided(d->sl->owner, &a);
}

/* A "go" the lane may use from now: a permit, and its lease when it has one;
 * due_ms is when it was meant to be used (the margin's answer-to-dispatch
 * step starts there). */
static void grant(const struct decision *d, uint64_t seq, double due_ms, double wait_ms)
{
	struct shared_lane *sl = d->sl;
	store_stats(d->sh->store)->permits += d->permits;
	for (unsigned i = 0; i < d->permits && sl->granted_n < SHARED_PERMITS_MAX; i++) {
		sl->granted[(sl->granted_head + sl->granted_n) % SHARED_PERMITS_MAX] =
		    (struct granted){seq, due_ms, d->asked_ms, wait_ms, d->margin_ms};
		sl->granted_n++;
	}
}

/* A go for a later instant (its gates open a few ms after the decision): held
 * here until then, on a microsecond timer, as if the answer came then. */
static void on_reserved(evutil_socket_t fd, short what, void *arg)
{
	struct decision *d = arg;
	(void)fd;
	(void)what;
	list_remove(&d->link);
	grant(d, d->seq, d->due_ms, d->due_ms - d->answered_ms);
	tell(d, SHARED_GO, 0, d->quota);
	free(d);
}

static bool reserve(struct decision *d, uint64_t seq, double answered,
                    const struct store_verdict *v)
{
	d->seq = seq;
	d->answered_ms = answered;
	d->due_ms = answered + v->wait_ms;
	d->quota = v->quota;
	if (evtimer_assign(&d->ev, d->sh->base, on_reserved, d) != 0)
		return false;
	/* libevent counts a timer from the loop's cached time, which is as old
	 * as this turn: the timer would fire early by the turn's work so far */
	event_base_update_cache_time(d->sh->base);
	double late = mono_ms() - answered;
	int64_t us = (int64_t)((v->wait_ms - late) * 1000.0) + 1;
	if (us < 1)
		us = 1;
	struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
	if (evtimer_add(&d->ev, &tv) != 0)
		return false;
	list_insert_head(&d->sh->reserved, &d->link);
	return true;
}

static void on_decided(void *arg, const redisReply *r)
{
	struct decision *d = arg;
	struct shared *sh = d->sh;
	struct shared_lane *sl = d->sl;
	if (sh->closing) {
		free(d);
		return;
	}
	uint64_t seq = 0;
	if (sl->asked_n > 0) {
		seq = sl->asked[sl->asked_head];
		sl->asked_head = (sl->asked_head + 1) % SHARED_PERMITS_MAX;
		sl->asked_n--;
	}
	double answered = mono_ms();
	struct store_verdict v;
	struct store_stats *st = store_stats(sh->store);
	bool parsed = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
	              r->element[0]->type == REDIS_REPLY_INTEGER &&
	              r->element[1]->type == REDIS_REPLY_STRING &&
	              r->element[2]->type == REDIS_REPLY_INTEGER &&
	              store_parse_verdict(r->element[0]->integer, r->element[1]->str,
	                                  r->element[1]->len, r->element[2]->integer, &v);
	if (parsed)
		delay_bound_add(&sh->rtt, answered - d->asked_ms, clock_now_ms());
	/* The lane's margin, unless this replica changed it after asking: what
	 * the answer holds is what that change replaced. */
	if (parsed && r->elements >= 4 && r->element[3]->type == REDIS_REPLY_STRING &&
	    d->asked_ms >= sl->margin_sent_ms &&
	    !store_parse_margin(r->element[3]->str, r->element[3]->len, &d->margin))
		d->margin = 0;
	if (parsed && v.go) {
		st->decisions_go++;
		if (v.wait_ms > 0 && reserve(d, seq, answered, &v))
			return; /* d is the reservation's until on_reserved */
		grant(d, seq, answered, 0);
		tell(d, SHARED_GO, 0, v.quota);
	} else if (parsed) {
		st->decisions_wait++;
		if (seq != 0 && sl->waiting_n < SHARED_PERMITS_MAX) {
			sl->waiting[(sl->waiting_head + sl->waiting_n) % SHARED_PERMITS_MAX] =
			    (struct asked_seq){seq, answered};
			sl->waiting_n++;
		}
		/* Asked again a little early (never more than ASK_EARLY_MS, counted
		 * from the answer, which came after the store's instant): the
		 * store answers a go for the exact instant. */
		int64_t until = (int64_t)ceil(answered + v.wait_ms - ASK_EARLY_MS);
		tell(d, SHARED_WAIT, until, v.quota);
	} else {
		tell(d, SHARED_FAILED, 0, false);
	}
	free(d);
}

/* Reservations of a lane that goes, or of every lane: their leases are given
 * back (their charges stay: the store cannot know they were not used). */
static void cancel_reserved(struct shared *sh, const struct shared_lane *sl)
{
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &sh->reserved) {
		struct decision *d = LIST_ITEM(node, struct decision, link);
		if (sl != NULL && d->sl != sl)
			continue;
		event_del(&d->ev);
		list_remove(&d->link);
		if (d->seq != 0 && !sh->closing)
			release_member(sh, d->sl->names.leases, d->seq);
		free(d);
	}
}

/* The lease member a decision asks under: the oldest answered "wait" lately
 * (it keeps its place in the lease queue), else a new one. */
static uint64_t member_to_ask(struct shared *sh, struct shared_lane *sl, double now)
{
	while (sl->waiting_n > 0) {
		struct asked_seq w = sl->waiting[sl->waiting_head];
		sl->waiting_head = (sl->waiting_head + 1) % SHARED_PERMITS_MAX;
		sl->waiting_n--;
		if (now - w.at_ms <= WAITING_REUSE_MS)
			return w.seq;
	}
	return ++sh->lease_seq;
}

double shared_margin_ms(struct shared *sh, int64_t now_ms)
{
	if (sh == NULL)
		return 0;
	return delay_bound_ms(&sh->rtt, now_ms, MARGIN_STEP_EMPTY_MS) +
	       delay_bound_ms(&sh->to_dispatch, now_ms, MARGIN_STEP_EMPTY_MS) +
	       delay_bound_ms(&sh->to_wire, now_ms, MARGIN_STEP_EMPTY_MS);
}

/* The "go"s not used yet: their leases go back. */
static void release_granted(struct shared *sh, struct shared_lane *sl)
{
	for (; sl->granted_n > 0; sl->granted_n--) {
		if (sl->granted[sl->granted_head].seq != 0)
			release_member(sh, sl->names.leases, sl->granted[sl->granted_head].seq);
		sl->granted_head = (sl->granted_head + 1) % SHARED_PERMITS_MAX;
	}
}

void shared_settle(struct shared *sh, struct shared_lane *sl, unsigned unused, unsigned held,
                   const struct shared_gates *s)
{
	if (sh == NULL || sl == NULL || !(unused > 0 || (sl->granted_n > 0 && held == 0)))
		return;
	release_granted(sh, sl);
	if (!store_up(sh->store))
		return;
	struct store_gate g[SHARED_REQUEST_GATES];
	size_t k = 0;
	for (int w = 0; w < SHARED_REQUEST_GATES; w++)
		if (s->req[w].t_ms > 0)
			g[k++] = (struct store_gate){request_fields[w], s->req[w].t_ms, 0,
			                             -(double)unused};
	if (k == 0)
		return;
	struct store_cmd cmd;
	store_cmd_adjust(&cmd, sl->names.key, sh->idle_ms, g, k);
	store_send(sh->store, &cmd, NULL, NULL);
}

/* How many permits the next decision takes (store/batch.h): more than one
 * only on a busy lane whose gates all have a burst and that holds no leases;
 * then each gate's cost in g is multiplied by it. room: requests that could
 * leave now. */
static unsigned batch_of(struct shared *sh, const struct shared_lane *sl, unsigned cap,
                         unsigned room, struct store_gate *g, size_t ng, int64_t now_ms)
{
	if (sl->n_strict > 0 || cap > 0)
		return 1;
	double interval = INFINITY, burst = INFINITY;
	for (size_t i = 0; i < ng; i++) {
		if (!(g[i].t_ms > 0))
			continue; /* a learned budget only another replica knows: its own limits */
		if (g[i].field[0] == 'r')
			interval = fmin(interval, g[i].t_ms);
		if (g[i].cost > 0)
			burst = fmin(burst, g[i].burst / g[i].cost);
	}
	unsigned k = batch_size(room, SHARED_PERMITS_MAX, interval, burst,
	                        delay_bound_ms(&sh->rtt, now_ms, MARGIN_STEP_EMPTY_MS));
	for (size_t i = 0; k > 1 && i < ng; i++)
		g[i].cost *= k;
	return k;
}

struct shared_lane *shared_lane_new(struct shared *sh, const char *provider, const char *key_id,
                                    const char *model, void *owner)
{
	if (sh == NULL)
		return NULL;
	struct shared_lane *sl = calloc(1, sizeof(*sl));
	if (sl == NULL)
		return NULL;
	if (!store_lane_names_of(sh->prefix, provider, key_id, model, &sl->names)) {
		free(sl);
		return NULL;
	}
	sl->owner = owner;
	return sl;
}

enum shared_mode shared_lane_mode(struct shared *sh, struct shared_lane *sl)
{
	if (store_up(sh->store)) {
		sl->fell_back = false;
		return SHARED_DECIDES;
	}
	if (sh->on_error == STORE_ON_ERROR_FAIL)
		return SHARED_REFUSES;
	if (!sl->fell_back) {
		sl->fell_back = true;
		store_stats(sh->store)->fallbacks++;
	}
	return SHARED_FALLBACK;
}

unsigned shared_ask(struct shared *sh, struct shared_lane *sl, const struct shared_ask *a,
                    const struct shared_gates *s, int64_t now_ms)
{
	if (sh == NULL || sl == NULL || a->decisions == 0)
		return 0;
	struct store_gate g[STORE_MAX_GATES];
	size_t ng = decision_gates(s, a, g);
	unsigned cap = a->lease_cap;
	sl->n_strict = 0;
	double strict_t = INFINITY, keep_ms = 0;
	for (int w = 0; w < SHARED_REQUEST_GATES; w++)
		if (s->req[w].burst <= 1 && s->req[w].t_ms > 0) {
			sl->strict[sl->n_strict] = (struct store_gate){
			    request_fields[w], s->req[w].t_ms, s->req[w].burst, 1};
			sl->strict_w[sl->n_strict++] = w;
			if (s->req[w].t_ms < strict_t) {
				strict_t = s->req[w].t_ms;
				keep_ms = s->req[w].keep * s->req[w].t_ms;
			}
		}
	/* A strict gate slow enough that a push reaches the store long before
	 * the next decision (T >= PUSH_IN_TIME_MS, against round trips of a
	 * fraction of a millisecond) is charged without a margin, and each
	 * dispatch pushes it by its own measured delay (late_send): the
	 * spacing costs what each request really took, not the bound of the
	 * slowest (the sum of three bounds was ~2-4 ms on a loaded machine:
	 * 97-98 % of the rate at 600 RPM). A faster gate keeps the bound, and
	 * the store keeps the lane's strict margin beyond it (keep_ms: what
	 * the path past this replica adds, which the bound does not measure);
	 * a send is late only past the bound. */
	double margin =
	    sl->n_strict > 0 && strict_t >= PUSH_IN_TIME_MS ? 0 : shared_margin_ms(sh, now_ms);
	double kept = margin > 0 && sl->n_strict > 0 ? keep_ms : 0;
	unsigned permits = batch_of(sh, sl, cap, a->room, g, ng, now_ms);
	unsigned n = permits > 1 ? 1 : a->decisions; /* one decision for a batch */
	unsigned sent = 0, asked = 0;
	for (; sent < n && sl->asked_n < SHARED_PERMITS_MAX; sent++) {
		struct decision *d = malloc(sizeof(*d));
		if (d == NULL)
			break;
		*d = (struct decision){.sh = sh,
		                       .sl = sl,
		                       .asked_ms = mono_ms(),
		                       .margin_ms = margin,
		                       .permits = permits};
		uint64_t seq = cap > 0 ? member_to_ask(sh, sl, d->asked_ms) : 0;
		char member[MEMBER_MAX];
		member_of(sh, seq, member);
		struct store_cmd cmd;
		store_cmd_decide(&cmd, &sl->names, sh->idle_ms, cap, member, sh->lease_ms,
		                 margin + kept, g, ng);
		if (!store_send(sh->store, &cmd, on_decided, d)) {
			free(d);
			break;
		}
		sl->asked[(sl->asked_head + sl->asked_n) % SHARED_PERMITS_MAX] = seq;
		sl->asked_n++;
		asked += permits;
	}
	return asked;
}

bool shared_permit_stale(double late_ms, double interval_ms)
{
	return late_ms > interval_ms / 2 && late_ms > SHARED_STALE_MIN_MS;
}

unsigned shared_stale(struct shared *sh, struct shared_lane *sl)
{
	if (sh == NULL || sl == NULL || sl->n_strict == 0 || sl->granted_n == 0)
		return 0;
	double t = INFINITY;
	for (size_t i = 0; i < sl->n_strict; i++)
		t = fmin(t, sl->strict[i].t_ms);
	double now = mono_ms();
	unsigned n = 0;
	for (; sl->granted_n > 0; sl->granted_n--, n++) {
		const struct granted *g = &sl->granted[sl->granted_head];
		if (!shared_permit_stale(now - g->due_ms, t))
			break;
		if (g->seq != 0)
			release_member(sh, sl->names.leases, g->seq);
		sl->granted_head = (sl->granted_head + 1) % SHARED_PERMITS_MAX;
	}
	store_stats(sh->store)->stale_permits += n;
	return n;
}

/* ---- what a replica learned ---- */

static void send_simple(struct shared *sh, struct shared_lane *sl,
                        void (*build)(struct store_cmd *, const char *, double, void *), void *arg)
{
	struct store_cmd cmd;
	if (sh == NULL || sl == NULL || !store_up(sh->store))
		return;
	build(&cmd, sl->names.key, sh->idle_ms, arg);
	store_send(sh->store, &cmd, NULL, NULL);
}

void shared_observed(struct shared *sh, struct shared_lane *sl,
                     const struct shared_budget learned[RLH_N_BUDGETS])
{
	if (sh == NULL || sl == NULL || !store_up(sh->store))
		return;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct shared_budget *l = &learned[b];
		if (!l->known || !(l->t_ms > 0) || l->capacity <= 0 || l->remaining < 0)
			continue;
		struct store_cmd cmd;
		store_cmd_observe(&cmd, sl->names.key, sh->idle_ms, learned_fields[b], l->t_ms,
		                  l->capacity, l->remaining);
		store_send(sh->store, &cmd, NULL, NULL);
	}
}

void shared_margin(struct shared *sh, struct shared_lane *sl, double from, double to)
{
	if (sh == NULL || sl == NULL || !store_up(sh->store) || from == to)
		return;
	struct store_cmd cmd;
	store_cmd_margin(&cmd, sl->names.key, sh->idle_ms, from, to);
	if (store_send(sh->store, &cmd, NULL, NULL))
		sl->margin_sent_ms = mono_ms();
}

static void build_hold(struct store_cmd *cmd, const char *key, double idle_ms, void *arg)
{
	store_cmd_hold(cmd, key, idle_ms, (double)*(int64_t *)arg);
}

void shared_hold(struct shared *sh, struct shared_lane *sl, int64_t hold_ms)
{
	if (hold_ms > 0)
		send_simple(sh, sl, build_hold, &hold_ms);
}

static void build_quota(struct store_cmd *cmd, const char *key, double idle_ms, void *arg)
{
	store_cmd_quota(cmd, key, idle_ms, *(bool *)arg);
}

void shared_quota(struct shared *sh, struct shared_lane *sl, bool out)
{
	send_simple(sh, sl, build_quota, &out);
}

/* Sends every lane's summed corrections (one adjust each). */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct shared *sh = arg;
	(void)fd;
	(void)what;
	sh->flush_armed = false;
	for (unsigned i = 0; i < sh->n_corrections; i++) {
		const struct correction *c = &sh->corrections[i];
		struct store_gate g[CORRECT_FIELDS];
		size_t n = 0;
		for (int f = 0; f < CORRECT_FIELDS; f++)
			if (c->used[f] && c->g[f].cost != 0)
				g[n++] = c->g[f];
		if (n == 0 || !store_up(sh->store))
			continue;
		struct store_cmd cmd;
		store_cmd_adjust(&cmd, c->key, sh->idle_ms, g, n);
		store_send(sh->store, &cmd, NULL, NULL);
	}
	sh->n_corrections = 0;
}

/* The lane's entry among the corrections not sent yet (NULL: the table is
 * full; the caller sends at once). */
static struct correction *correction_of(struct shared *sh, const char *key)
{
	for (unsigned i = 0; i < sh->n_corrections; i++)
		if (strcmp(sh->corrections[i].key, key) == 0)
			return &sh->corrections[i];
	if (sh->n_corrections == CORRECTIONS_MAX)
		return NULL;
	struct correction *c = &sh->corrections[sh->n_corrections++];
	memset(c, 0, sizeof(*c));
	snprintf(c->key, sizeof(c->key), "%s", key);
	return c;
}

void shared_tokens_used(struct shared *sh, struct shared_lane *sl, const struct shared_gates *s,
                        double d_tokens, double d_input, double d_output)
{
	if (sh == NULL || sl == NULL || !store_up(sh->store))
		return;
	const struct store_lane_names *names = &sl->names;
	/* by correct_fields' order; the learned token budgets take the same
	 * correction, at the pace stored (t_ms 0) */
	struct store_gate g[CORRECT_FIELDS] = {
	    {correct_fields[0], s->tokens.t_ms, s->tokens.burst, d_tokens},
	    {correct_fields[1], s->input.t_ms, s->input.burst, d_input},
	    {correct_fields[2], s->output.t_ms, s->output.burst, d_output},
	    {correct_fields[3], 0, 0, d_tokens},
	    {correct_fields[4], 0, 0, d_input},
	    {correct_fields[5], 0, 0, d_output},
	    {correct_fields[6], 0, 0, d_tokens},
	};
	bool on[CORRECT_FIELDS] = {
	    s->tokens.t_ms > 0 && d_tokens != 0,
	    s->input.t_ms > 0 && d_input != 0,
	    s->output.t_ms > 0 && d_output != 0,
	    d_tokens != 0 && s->learned[RLH_TOKENS].known,
	    d_input != 0 && s->learned[RLH_INPUT_TOKENS].known,
	    d_output != 0 && s->learned[RLH_OUTPUT_TOKENS].known,
	    d_tokens != 0 && s->learned[RLH_PROJECT_TOKENS].known,
	};
	struct correction *c = correction_of(sh, names->key);
	if (c == NULL) {
		struct store_gate now[CORRECT_FIELDS];
		size_t n = 0;
		for (int f = 0; f < CORRECT_FIELDS; f++)
			if (on[f])
				now[n++] = g[f];
		if (n == 0)
			return;
		struct store_cmd cmd;
		store_cmd_adjust(&cmd, names->key, sh->idle_ms, now, n);
		store_send(sh->store, &cmd, NULL, NULL);
		return;
	}
	for (int f = 0; f < CORRECT_FIELDS; f++) {
		if (!on[f])
			continue;
		double sum = c->used[f] ? c->g[f].cost : 0;
		c->g[f] = g[f];
		c->g[f].cost = sum + g[f].cost;
		c->used[f] = true;
	}
	if (!sh->flush_armed) {
		struct timeval tv = {0, CORRECT_EVERY_MS * 1000};
		evtimer_add(&sh->flush, &tv);
		sh->flush_armed = true;
	}
}

void shared_lane_free(struct shared *sh, struct shared_lane *sl)
{
	if (sl == NULL)
		return;
	if (sh != NULL)
		cancel_reserved(sh, sl);
	if (sh != NULL)
		release_granted(sh, sl);
	free(sl);
}

/* ---- the fleet ---- */

static void fleet_stats(struct shared *sh)
{
	struct store_stats *st = store_stats(sh->store);
	st->replicas = fleet_heard_any(&sh->fleet) ? fleet_divisor(&sh->fleet) : 0;
	st->fallback_divisor = fleet_divisor(&sh->fleet);
}

static void on_beat_reply(void *arg, const redisReply *r)
{
	struct shared *sh = arg;
	if (sh->closing || r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < 0)
		return;
	unsigned alive = r->integer > 100000 ? 100000 : (unsigned)r->integer;
	fleet_heard(&sh->fleet, alive, clock_now_ms());
	store_stats(sh->store)->heartbeats++;
	fleet_stats(sh);
}

/* One heartbeat: this replica is alive; the answer counts the fleet. */
static void send_beat(struct shared *sh)
{
	if (!store_up(sh->store) || sh->fleet_key[0] == '\0')
		return;
	struct store_cmd cmd;
	store_cmd_beat(&cmd, sh->fleet_key, sh->replica, FLEET_TTL_MS);
	store_send(sh->store, &cmd, on_beat_reply, sh);
}

static void on_beat(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	send_beat(arg);
}

/* ---- the store's state ---- */

static void on_store_state(void *arg, bool up)
{
	struct shared *sh = arg;
	if (up)
		send_beat(sh); /* a Redis back (perhaps restarted empty) counts us at once */
	if (sh->hooks.store_changed != NULL)
		sh->hooks.store_changed(sh->hooks.arg, up);
}

/* The store's log lines say what the lanes do now: decided in the store,
 * or here at the plans' limits divided by the fleet as last heard. */
static void describe_state(void *arg, struct log_line *l, bool up)
{
	struct shared *sh = arg;
	if (up) {
		log_str(l, "gates", "shared");
		return;
	}
	if (sh->on_error == STORE_ON_ERROR_FAIL) {
		log_str(l, "gates", "refused");
		return;
	}
	log_str(l, "gates", "local");
	log_int(l, "fallback_divisor", fleet_divisor(&sh->fleet));
	log_str(l, "replicas_from",
	        fleet_heard_any(&sh->fleet) ? "heartbeats" : "store.redis.replicas");
}

struct shared *shared_new(struct event_base *base, const struct config *cfg,
                          const struct shared_hooks *hooks, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	if (cfg->store.kind != STORE_REDIS)
		return NULL;
	struct shared *sh = calloc(1, sizeof(*sh));
	if (sh == NULL) {
		snprintf(err, errlen, "store: out of memory");
		return NULL;
	}
	list_init(&sh->leases);
	list_init(&sh->reserved);
	sh->base = base;
	sh->hooks = *hooks;
	snprintf(sh->prefix, sizeof(sh->prefix), "%s", cfg->store.redis.key_prefix);
	/* A lane's keys outlive its state by the lanes' own idle time. */
	sh->idle_ms = (double)cfg->limits.idle_ttl_s * 1000;
	sh->lease_ms = cfg->store.redis.lease_ms;
	sh->on_error = cfg->store.redis.on_error;
	fleet_init(&sh->fleet, cfg->store.redis.replicas);
	if (!store_fleet_key(sh->prefix, sh->fleet_key, sizeof(sh->fleet_key)))
		sh->fleet_key[0] = '\0';
	char host[40] = "pacerd";
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	/* Unique among replicas, also for a restarted one with the same pid. */
	snprintf(sh->replica, sizeof(sh->replica), "%.32s:%d:%llx", host, (int)getpid(),
	         (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
	const struct store_hooks store_hooks = {on_store_state, describe_state, sh};
	sh->store = store_new(base, cfg, &store_hooks, err, errlen);
	if (sh->store == NULL) {
		free(sh);
		return NULL;
	}
	fleet_stats(sh);
	evtimer_assign(&sh->flush, base, on_flush, sh);
	event_assign(&sh->beat, base, -1, EV_PERSIST, on_beat, sh);
	struct timeval beat = {FLEET_BEAT_MS / 1000, (FLEET_BEAT_MS % 1000) * 1000};
	event_add(&sh->beat, &beat);
	/* Leases renewed at a third of their life: two renewals may be lost. */
	event_assign(&sh->renew, base, -1, EV_PERSIST, on_renew, sh);
	int64_t every = (int64_t)sh->lease_ms / 3;
	struct timeval tv = {(time_t)(every / 1000), (suseconds_t)(every % 1000) * 1000};
	event_add(&sh->renew, &tv);
	return sh;
}

void shared_free(struct shared *sh)
{
	if (sh == NULL)
		return;
	sh->closing = true;
	event_del(&sh->renew);
	event_del(&sh->flush);
	event_del(&sh->beat);
	cancel_reserved(sh, NULL);
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &sh->leases)
		free(LIST_ITEM(node, struct shared_lease, link));
	store_free(sh->store);
	free(sh);
}

bool shared_up(const struct shared *sh)
{
	return sh != NULL && store_up(sh->store);
}

bool shared_refusing(const struct shared *sh)
{
	return sh != NULL && sh->on_error == STORE_ON_ERROR_FAIL && !store_up(sh->store);
}

int64_t shared_retry_in_ms(const struct shared *sh)
{
	return sh != NULL ? store_retry_in_ms(sh->store) : 0;
}

struct store_stats *shared_stats(struct shared *sh)
{
	return sh != NULL ? store_stats(sh->store) : NULL;
}

const char *shared_on_error(const struct shared *sh)
{
	return sh != NULL && sh->on_error == STORE_ON_ERROR_FAIL ? "fail" : "local";
}

unsigned shared_fallback_divisor(const struct shared *sh)
{
	return sh != NULL ? fleet_divisor(&sh->fleet) : 1;
}
