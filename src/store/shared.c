/* shared — lanes' gates in the shared store; see shared.h.
 *
 * It reads a lane through sched.h's accessors, not its fields: it is the
 * store's side of a lane (keys, decisions, leases), driven by the lanes'
 * owner like the scheduler is, and it only copies the lane's limits into the
 * store's scripts; the lane's state changes only through sched's functions. */
#include "store/shared.h"

#include <event2/event.h>
#include <event2/event_struct.h>
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
#include "sched/gcra.h"
#include "sched/learned.h"
#include "sched/sched.h"
#include "store/store.h"
#include "store/store_script.h"

#define KEY_MAX 384 /* prefix, provider, scope, a model group of up to 128 bytes */
#define MEMBER_MAX 96

static const char *const request_fields[GATES_N_WINDOWS] = {"r0", "r1", "r2", "r3"};
static const char *const learned_fields[RLH_N_BUDGETS] = {"l0", "l1", "l2", "l3"};

struct shared_lease {
	struct list link; /* sh->leases: renewed while in flight */
	uint64_t seq;
	char leases_key[KEY_MAX];
};

/* Decisions asked and answered, in order: Redis answers one connection's
 * commands in the order they were sent, so the lease of each answer is the
 * oldest asked. */
struct shared_lane {
	uint64_t asked[SCHED_PERMITS_MAX];
	unsigned asked_head, asked_n;
	uint64_t granted[SCHED_PERMITS_MAX]; /* leases of "go"s not used yet */
	unsigned granted_head, granted_n;
	char leases_key[KEY_MAX];
	bool fell_back; /* counted in stats.fallbacks until SHARED again */
};

struct shared {
	struct store *store;
	struct shared_hooks hooks;
	char prefix[80];
	double idle_ms, lease_ms;
	enum store_on_error on_error;
	unsigned replicas;
	char replica[64]; /* names this process's leases */
	uint64_t lease_seq;
	struct list leases; /* newest first */
	struct event renew;
	bool closing; /* shared_free: the lanes may be gone already */
};

struct decision {
	struct shared *sh;
	struct sched_lane *lane;
	struct shared_lane *sl;
};

/* ---- keys ---- */

static bool lane_keys(const struct shared *sh, const struct sched_lane *lane, char *key,
                      char *leases)
{
	return store_lane_keys(sh->prefix, sched_lane_provider(lane)->name, sched_lane_key_id(lane),
	                       sched_lane_model(lane), key, KEY_MAX, leases, KEY_MAX);
}

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

struct shared_lease *shared_dispatched(struct shared *sh, struct shared_lane *sl)
{
	if (sh == NULL || sl == NULL || sl->granted_n == 0)
		return NULL;
	uint64_t seq = sl->granted[sl->granted_head];
	sl->granted_head = (sl->granted_head + 1) % SCHED_PERMITS_MAX;
	sl->granted_n--;
	struct shared_lease *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		release_member(sh, sl->leases_key, seq);
		return NULL;
	}
	l->seq = seq;
	memcpy(l->leases_key, sl->leases_key, KEY_MAX);
	list_insert_head(&sh->leases, &l->link);
	return l;
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
static size_t lane_gates(const struct sched_lane *lane, const struct sched_costs *c, int64_t now_ms,
                         struct store_gate *g)
{
	size_t n = 0;
	const struct gates *s = sched_lane_gates(lane);
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		if (gcra_enabled(&s->req[w]))
			g[n++] = (struct store_gate){request_fields[w], s->req[w].t_ms,
			                             s->req[w].burst, 1};
	if (gcra_enabled(&s->tokens) && c->tokens > 0)
		g[n++] = (struct store_gate){"t", s->tokens.t_ms, s->tokens.burst, c->tokens};
	if (gcra_enabled(&s->input) && c->prompt > 0)
		g[n++] = (struct store_gate){"ti", s->input.t_ms, s->input.burst, c->prompt};
	if (gcra_enabled(&s->output) && c->output > 0)
		g[n++] = (struct store_gate){"to", s->output.t_ms, s->output.burst, c->output};
	const double costs[RLH_N_BUDGETS] = {1, c->tokens, c->prompt, c->output};
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		if (costs[b] <= 0)
			continue;
		struct store_gate gate = {learned_fields[b], 0, 0, costs[b]};
		const struct learned *l = sched_learned(lane, b);
		if (l != NULL) {
			struct learned_view v;
			learned_view(l, now_ms, &v);
			if (v.pace_per_min > 0 && v.capacity > 0) {
				gate.t_ms = 60000.0 / v.pace_per_min;
				gate.burst = v.capacity;
			}
		}
		g[n++] = gate;
	}
	return n;
}

static void on_decided(void *arg, const redisReply *r)
{
	struct decision *d = arg;
	struct shared *sh = d->sh;
	struct sched_lane *lane = d->lane;
	struct shared_lane *sl = d->sl;
	free(d);
	if (sh->closing)
		return;
	uint64_t seq = 0;
	if (sl->asked_n > 0) {
		seq = sl->asked[sl->asked_head];
		sl->asked_head = (sl->asked_head + 1) % SCHED_PERMITS_MAX;
		sl->asked_n--;
	}
	struct store_verdict v;
	struct store_stats *st = store_stats(sh->store);
	bool parsed = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	              r->element[0]->type == REDIS_REPLY_INTEGER &&
	              r->element[1]->type == REDIS_REPLY_STRING &&
	              r->element[2]->type == REDIS_REPLY_INTEGER &&
	              store_parse_verdict(r->element[0]->integer, r->element[1]->str,
	                                  r->element[1]->len, r->element[2]->integer, &v);
	if (!parsed) {
		sched_permit_answer(lane, SCHED_PERMIT_FAILED, 0);
	} else if (v.go) {
		st->decisions_go++;
		if (seq != 0 && sl->granted_n < SCHED_PERMITS_MAX) {
			sl->granted[(sl->granted_head + sl->granted_n) % SCHED_PERMITS_MAX] = seq;
			sl->granted_n++;
		}
		sched_permit_answer(lane, SCHED_PERMIT_GO, 0);
	} else {
		st->decisions_wait++;
		/* Rounded up: never before the store's instant. */
		int64_t wait = (int64_t)v.wait_ms + 1;
		sched_permit_answer(lane, SCHED_PERMIT_WAIT, clock_fresh_ms() + wait);
	}
	if (parsed && v.quota && !sched_quota_out(lane) && sh->hooks.quota_out != NULL)
		sh->hooks.quota_out(lane);
	else if (parsed && !v.quota && sched_quota_out(lane) && sh->hooks.quota_back != NULL)
		sh->hooks.quota_back(lane);
	sh->hooks.kick(lane);
}

/* Permits no request needs any more: their charges and leases go back. */
static void give_back(struct shared *sh, struct sched_lane *lane, struct shared_lane *sl,
                      unsigned n)
{
	for (; sl->granted_n > 0; sl->granted_n--) {
		release_member(sh, sl->leases_key, sl->granted[sl->granted_head]);
		sl->granted_head = (sl->granted_head + 1) % SCHED_PERMITS_MAX;
	}
	if (!store_up(sh->store))
		return;
	const struct gates *s = sched_lane_gates(lane);
	struct store_gate g[GATES_N_WINDOWS];
	size_t k = 0;
	for (int w = 0; w < GATES_N_WINDOWS; w++)
		if (gcra_enabled(&s->req[w]))
			g[k++] =
			    (struct store_gate){request_fields[w], s->req[w].t_ms, 0, -(double)n};
	if (k == 0)
		return;
	char key[KEY_MAX], leases[KEY_MAX];
	struct store_cmd cmd;
	if (!lane_keys(sh, lane, key, leases))
		return;
	store_cmd_adjust(&cmd, key, sh->idle_ms, g, k);
	store_send(sh->store, &cmd, NULL, NULL);
}

bool shared_pump(struct shared *sh, struct sched_lane *lane, struct shared_lane **slp,
                 int64_t now_ms)
{
	if (sh == NULL)
		return true;
	struct shared_lane *sl = *slp;
	if (sl == NULL) {
		if ((sl = calloc(1, sizeof(*sl))) == NULL)
			return true; /* local gates, as if down: better than nothing */
		char key[KEY_MAX];
		lane_keys(sh, lane, key, sl->leases_key);
		*slp = sl;
	}
	bool up = store_up(sh->store);
	enum sched_gates_mode want = up                                    ? SCHED_GATES_SHARED
	                             : sh->on_error == STORE_ON_ERROR_FAIL ? SCHED_GATES_SHARED
	                                                                   : SCHED_GATES_FALLBACK;
	if (sched_lane_gates_mode(lane) != want)
		sched_set_gates_mode(lane, want, 1.0 / sh->replicas, now_ms);
	if (!up && want == SCHED_GATES_FALLBACK && !sl->fell_back) {
		sl->fell_back = true;
		store_stats(sh->store)->fallbacks++;
	} else if (up) {
		sl->fell_back = false;
	}
	unsigned unused = sched_permits_unused(lane);
	if (unused > 0 || (sl->granted_n > 0 && sched_lane_permits(lane) == 0))
		give_back(sh, lane, sl, unused);
	if (!up)
		return sh->on_error == STORE_ON_ERROR_LOCAL;

	struct sched_costs head;
	unsigned n = sched_permits_wanted(lane, now_ms, &head);
	if (n == 0)
		return true;
	char key[KEY_MAX], leases[KEY_MAX];
	if (!lane_keys(sh, lane, key, leases))
		return true;
	struct store_gate g[STORE_MAX_GATES];
	size_t ng = lane_gates(lane, &head, now_ms, g);
	unsigned cap = sched_lane_plan(lane)->max_concurrent_global;
	unsigned sent = 0;
	for (; sent < n && sl->asked_n < SCHED_PERMITS_MAX; sent++) {
		struct decision *d = malloc(sizeof(*d));
		if (d == NULL)
			break;
		*d = (struct decision){sh, lane, sl};
		uint64_t seq = ++sh->lease_seq;
		char member[MEMBER_MAX];
		member_of(sh, seq, member);
		struct store_cmd cmd;
		store_cmd_decide(&cmd, key, leases, sh->idle_ms, cap, member, sh->lease_ms, g, ng);
		if (!store_send(sh->store, &cmd, on_decided, d)) {
			free(d);
			break;
		}
		sl->asked[(sl->asked_head + sl->asked_n) % SCHED_PERMITS_MAX] = cap > 0 ? seq : 0;
		sl->asked_n++;
	}
	sched_permits_asked(lane, sent);
	return true;
}

/* ---- what a replica learned ---- */

static void send_simple(struct shared *sh, struct sched_lane *lane,
                        void (*build)(struct store_cmd *, const char *, double, void *), void *arg)
{
	char key[KEY_MAX], leases[KEY_MAX];
	struct store_cmd cmd;
	if (sh == NULL || !store_up(sh->store) || !lane_keys(sh, lane, key, leases))
		return;
	build(&cmd, key, sh->idle_ms, arg);
	store_send(sh->store, &cmd, NULL, NULL);
}

void shared_observed(struct shared *sh, struct sched_lane *lane)
{
	char key[KEY_MAX], leases[KEY_MAX];
	if (sh == NULL || !store_up(sh->store) || !lane_keys(sh, lane, key, leases))
		return;
	int64_t now = clock_now_ms();
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct learned *l = sched_learned(lane, b);
		struct learned_view v;
		if (l == NULL)
			continue;
		learned_view(l, now, &v);
		if (v.pace_per_min <= 0 || v.capacity <= 0 || v.remaining < 0)
			continue;
		struct store_cmd cmd;
		store_cmd_observe(&cmd, key, sh->idle_ms, learned_fields[b],
		                  60000.0 / v.pace_per_min, v.capacity, v.remaining);
		store_send(sh->store, &cmd, NULL, NULL);
	}
}

static void build_hold(struct store_cmd *cmd, const char *key, double idle_ms, void *arg)
{
	store_cmd_hold(cmd, key, idle_ms, (double)*(int64_t *)arg);
}

void shared_hold(struct shared *sh, struct sched_lane *lane, int64_t hold_ms)
{
	if (hold_ms > 0)
		send_simple(sh, lane, build_hold, &hold_ms);
}

static void build_quota(struct store_cmd *cmd, const char *key, double idle_ms, void *arg)
{
	store_cmd_quota(cmd, key, idle_ms, *(bool *)arg);
}

void shared_quota(struct shared *sh, struct sched_lane *lane, bool out)
{
	send_simple(sh, lane, build_quota, &out);
}

void shared_tokens_used(struct shared *sh, struct sched_lane *lane, double d_tokens, double d_input,
                        double d_output)
{
	char key[KEY_MAX], leases[KEY_MAX];
	if (sh == NULL || sched_lane_gates_mode(lane) != SCHED_GATES_SHARED ||
	    !store_up(sh->store) || !lane_keys(sh, lane, key, leases))
		return;
	const struct gates *s = sched_lane_gates(lane);
	struct store_gate g[3 + RLH_N_BUDGETS];
	size_t n = 0;
	if (gcra_enabled(&s->tokens) && d_tokens != 0)
		g[n++] = (struct store_gate){"t", s->tokens.t_ms, 0, d_tokens};
	if (gcra_enabled(&s->input) && d_input != 0)
		g[n++] = (struct store_gate){"ti", s->input.t_ms, 0, d_input};
	if (gcra_enabled(&s->output) && d_output != 0)
		g[n++] = (struct store_gate){"to", s->output.t_ms, 0, d_output};
	/* The learned token budgets take the same correction, at the pace
	 * stored (t_ms 0). */
	const double d[RLH_N_BUDGETS] = {0, d_tokens, d_input, d_output};
	for (int b = 1; b < RLH_N_BUDGETS; b++)
		if (d[b] != 0 && sched_learned(lane, b) != NULL)
			g[n++] = (struct store_gate){learned_fields[b], 0, 0, d[b]};
	if (n == 0)
		return;
	struct store_cmd cmd;
	store_cmd_adjust(&cmd, key, sh->idle_ms, g, n);
	store_send(sh->store, &cmd, NULL, NULL);
}

void shared_lane_free(struct shared *sh, struct shared_lane *sl)
{
	if (sl == NULL)
		return;
	for (; sh != NULL && sl->granted_n > 0; sl->granted_n--) {
		release_member(sh, sl->leases_key, sl->granted[sl->granted_head]);
		sl->granted_head = (sl->granted_head + 1) % SCHED_PERMITS_MAX;
	}
	free(sl);
}

/* ---- the store's state ---- */

static void on_store_state(void *arg, bool up)
{
	struct shared *sh = arg;
	if (sh->hooks.store_changed != NULL)
		sh->hooks.store_changed(sh->hooks.arg, up);
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
	sh->hooks = *hooks;
	snprintf(sh->prefix, sizeof(sh->prefix), "%s", cfg->store.redis.key_prefix);
	/* A lane's keys outlive its state by the lanes' own idle time. */
	sh->idle_ms = (double)cfg->limits.idle_ttl_s * 1000;
	sh->lease_ms = cfg->store.redis.lease_ms;
	sh->on_error = cfg->store.redis.on_error;
	sh->replicas = cfg->store.redis.replicas > 0 ? cfg->store.redis.replicas : 1;
	char host[40] = "pacerd";
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	/* Unique among replicas, also for a restarted one with the same pid. */
	snprintf(sh->replica, sizeof(sh->replica), "%.32s:%d:%llx", host, (int)getpid(),
	         (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
	sh->store = store_new(base, cfg, on_store_state, sh, err, errlen);
	if (sh->store == NULL) {
		free(sh);
		return NULL;
	}
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
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &sh->leases)
		free(LIST_ITEM(node, struct shared_lease, link));
	store_free(sh->store);
	free(sh);
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

unsigned shared_replicas(const struct shared *sh)
{
	return sh != NULL ? sh->replicas : 1;
}
