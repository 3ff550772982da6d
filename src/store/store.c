/* store — the Redis connection of the shared store; see store.h. */
#include "store/store.h"

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* hiredis' libevent adapter is a header of static functions written for
 * older warning sets. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wshadow"
#include <adapters/libevent.h>
#pragma GCC diagnostic pop

#include "core/config.h"
#include "core/list.h"
#include "core/log.h"
#include "store/store_script.h"

#define RECONNECT_MIN_MS 50
#define RECONNECT_MAX_MS 500

/* Seconds per command: loopback answers in tens of µs; timeout_ms is 50 by default. */
static const double latency_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                        0.005,  0.01,    0.025,  0.05,  0.1};

/* One command in flight, on the store's list in the order sent (the order
 * Redis answers in). Its argv is copied, in the same allocation, so that a
 * NOSCRIPT can be sent again as EVAL. Freed when hiredis is done with it (a
 * reply, or NULL when the connection goes); `fn` is called once, at the
 * first of reply, timeout or loss. */
struct pending {
	struct store *st;
	struct list link; /* st->pending */
	store_reply_fn fn;
	void *arg;
	bool answered;
	enum store_script_id script; /* SCRIPT_N: not a script */
	int64_t sent_us;
	int argc;
	const char **argv; /* into the allocation, or static (EVAL, a source) */
	size_t *lens;
};

struct store {
	struct event_base *base;
	char address[128];
	unsigned timeout_ms;
	redisAsyncContext *ac;
	bool up; /* connected and scripts loaded */
	bool ever_up;
	bool freeing;
	unsigned loading; /* SCRIPT LOAD replies awaited after a connect */
	int64_t backoff_ms;
	int64_t reconnect_at_ms;
	struct event reconnect;
	store_state_fn on_state;
	void *state_arg;
	/* Every pending, oldest first. One timer watches the oldest, not one
	 * per command: arming and disarming a timer per command cost as much
	 * as the command itself. */
	struct list pending;
	struct event watchdog;
	bool watchdog_armed;
	struct store_stats stats;
	char last_reason[160];
};

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void log_state(const char *event, const struct store *st, const char *reason)
{
	struct log_line l;
	if (log_begin(&l, strcmp(event, "store_unavailable") == 0 ? LOG_WARN : LOG_INFO, event)) {
		log_str(&l, "store", "redis");
		log_str(&l, "address", st->address);
		if (reason != NULL)
			log_str(&l, "reason", reason);
		log_end(&l);
	}
}

/* The store is usable again, or no longer: tell the owner, log once per change. */
static void set_up(struct store *st, bool up, const char *reason)
{
	if (up == st->up) {
		if (!up && reason != NULL)
			snprintf(st->last_reason, sizeof(st->last_reason), "%s", reason);
		return;
	}
	st->up = up;
	st->stats.connected = up;
	if (up) {
		log_state(st->ever_up ? "store_restored" : "store_connected", st, NULL);
		st->ever_up = true;
		st->backoff_ms = RECONNECT_MIN_MS;
	} else {
		log_state("store_unavailable", st, reason);
	}
	if (st->on_state != NULL && !st->freeing)
		st->on_state(st->state_arg, up);
}

/* ---- commands ---- */

static void pending_free(struct pending *p)
{
	list_remove(&p->link);
	free(p);
}

/* Calls the owner once: reply NULL for a failure. */
static void pending_answer(struct pending *p, const redisReply *r)
{
	if (p->answered)
		return;
	p->answered = true;
	struct store *st = p->st;
	stats_hist_observe(&st->stats.latency, (double)(mono_us() - p->sent_us) / 1e6);
	if (r == NULL)
		st->stats.errors++;
	if (p->fn != NULL)
		p->fn(p->arg, r);
}

static void drop_connection(struct store *st, const char *reason);
static bool submit(struct store *st, struct pending *p);

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
	struct pending *p = privdata;
	struct store *st = p->st;
	const redisReply *reply = r;
	(void)ac;
	if (reply != NULL && reply->type == REDIS_REPLY_ERROR && p->script != SCRIPT_N &&
	    !p->answered && strncmp(reply->str, "NOSCRIPT", 8) == 0 && st->up) {
		/* The script cache was flushed (a restarted Redis): EVAL caches it
		 * again, so the next EVALSHA finds it. */
		p->argv[0] = "EVAL";
		p->lens[0] = 4;
		p->argv[1] = store_script_source(p->script);
		p->lens[1] = strlen(p->argv[1]);
		list_remove(&p->link);
		list_insert_tail(&st->pending, &p->link);
		if (submit(st, p))
			return;
	}
	if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
		struct log_line l;
		if (log_begin(&l, LOG_WARN, "store_error")) {
			log_str(&l, "store", "redis");
			log_strn(&l, "error", reply->str, reply->len < 200 ? reply->len : 200);
			log_end(&l);
		}
		pending_answer(p, NULL);
	} else {
		pending_answer(p, reply);
	}
	pending_free(p);
}

static void arm_watchdog(struct store *st, int64_t in_us)
{
	struct timeval tv = {(time_t)(in_us / 1000000), (suseconds_t)(in_us % 1000000)};
	evtimer_add(&st->watchdog, &tv);
	st->watchdog_armed = true;
}

static struct pending *oldest_unanswered(struct store *st)
{
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &st->pending) {
		struct pending *p = LIST_ITEM(node, struct pending, link);
		if (!p->answered)
			return p;
	}
	return NULL;
}

/* The oldest command not answered yet decides: past timeout_ms, the store
 * counts as down; else the watchdog sleeps until that command's deadline. */
static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	struct store *st = arg;
	(void)fd;
	(void)what;
	st->watchdog_armed = false;
	int64_t limit = (int64_t)st->timeout_ms * 1000;
	struct pending *p = NULL;
	for (int pass = 0; pass < 2; pass++) {
		p = oldest_unanswered(st);
		if (p == NULL)
			return;
		int64_t age = mono_us() - p->sent_us;
		if (age < limit) {
			arm_watchdog(st, limit - age);
			return;
		}
		/* An answer already in the socket is not late: a loop turn that
		 * ran long (a busy or instrumented process) may reach this timer
		 * before the read event. Read what is there, then look again. */
		if (pass == 0 && st->ac != NULL)
			redisAsyncHandleRead(st->ac);
	}
	st->stats.timeouts++;
	char reason[96];
	snprintf(reason, sizeof(reason), "no answer within timeout_ms (%u)", st->timeout_ms);
	/* Down before the owner hears of the failure: what it sends in
	 * response must not go onto the connection about to be closed. */
	set_up(st, false, reason);
	pending_answer(p, NULL);
	drop_connection(st, reason); /* frees every pending through on_reply(NULL) */
}

static bool submit(struct store *st, struct pending *p)
{
	if (st->ac == NULL ||
	    redisAsyncCommandArgv(st->ac, on_reply, p, p->argc, p->argv, p->lens) != REDIS_OK)
		return false;
	st->stats.commands++;
	p->sent_us = mono_us();
	if (!st->watchdog_armed)
		arm_watchdog(st, (int64_t)st->timeout_ms * 1000);
	return true;
}

static struct pending *pending_new(struct store *st, int argc, const char *const *argv,
                                   const size_t *lens, enum store_script_id script,
                                   store_reply_fn fn, void *arg)
{
	size_t bytes = sizeof(struct pending) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
	for (int i = 0; i < argc; i++)
		bytes += lens[i] + 1;
	struct pending *p = malloc(bytes);
	if (p == NULL)
		return NULL;
	memset(p, 0, sizeof(*p));
	p->st = st;
	p->fn = fn;
	p->arg = arg;
	p->script = script;
	p->argc = argc;
	p->argv = (const char **)(p + 1);
	p->lens = (size_t *)(p->argv + argc);
	char *text = (char *)(p->lens + argc);
	for (int i = 0; i < argc; i++) {
		memcpy(text, argv[i], lens[i]);
		text[lens[i]] = '\0';
		p->argv[i] = text;
		p->lens[i] = lens[i];
		text += lens[i] + 1;
	}
	list_insert_tail(&st->pending, &p->link);
	return p;
}

static enum store_script_id script_of(const struct store_cmd *cmd)
{
	if (cmd->argc < 2 || strcmp(cmd->argv[0], "EVALSHA") != 0)
		return SCRIPT_N;
	for (int id = 0; id < SCRIPT_N; id++)
		if (strcmp(cmd->argv[1], store_script_sha(id)) == 0)
			return id;
	return SCRIPT_N;
}

bool store_send(struct store *st, const struct store_cmd *cmd, store_reply_fn fn, void *arg)
{
	if (st == NULL || !st->up)
		return false;
	struct pending *p =
	    pending_new(st, cmd->argc, cmd->argv, cmd->argvlen, script_of(cmd), fn, arg);
	if (p == NULL)
		return false;
	if (!submit(st, p)) {
		pending_free(p);
		return false;
	}
	return true;
}

/* ---- the connection ---- */

static void schedule_reconnect(struct store *st)
{
	if (st->freeing)
		return;
	int64_t ms = st->backoff_ms;
	st->backoff_ms =
	    st->backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : st->backoff_ms * 2;
	st->reconnect_at_ms = mono_us() / 1000 + ms;
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(&st->reconnect, &tv);
}

/* Closes the connection from outside hiredis' callbacks: every command in
 * flight is answered NULL (on_reply), then the reconnect timer runs. */
static void drop_connection(struct store *st, const char *reason)
{
	redisAsyncContext *ac = st->ac;
	if (ac == NULL)
		return;
	set_up(st, false, reason);
	ac->data = NULL; /* on_disconnect: already handled */
	redisAsyncFree(ac);
	st->ac = NULL;
	schedule_reconnect(st);
}

static void on_script_loaded(void *arg, const redisReply *r)
{
	struct store *st = arg;
	if (st->loading == 0)
		return;
	if (r == NULL || r->type != REDIS_REPLY_STRING) {
		st->loading = 0;
		return; /* the failure took the connection down, or will */
	}
	if (--st->loading == 0)
		set_up(st, true, NULL);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct store *st = ac->data;
	(void)status;
	if (st == NULL)
		return; /* dropped by us */
	st->ac = NULL;
	st->loading = 0;
	char reason[160];
	snprintf(reason, sizeof(reason), "connection lost (%s)",
	         ac->errstr[0] != '\0' ? ac->errstr : "closed");
	set_up(st, false, reason);
	schedule_reconnect(st);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct store *st = ac->data;
	if (st == NULL)
		return;
	if (status != REDIS_OK) {
		/* hiredis frees the context after this callback */
		st->ac = NULL;
		char reason[160];
		snprintf(reason, sizeof(reason), "cannot connect (%s)",
		         ac->errstr[0] != '\0' ? ac->errstr : "error");
		if (!st->ever_up && st->last_reason[0] == '\0')
			log_state("store_unavailable", st, reason);
		set_up(st, false, reason);
		snprintf(st->last_reason, sizeof(st->last_reason), "%s", reason);
		schedule_reconnect(st);
		return;
	}
	/* Load every script before the store counts as up: a Redis restarted
	 * since has forgotten them (EVALSHA would find none). Sent directly:
	 * store_send refuses while the store is down. */
	st->loading = SCRIPT_N;
	for (int id = 0; id < SCRIPT_N; id++) {
		const char *argv[] = {"SCRIPT", "LOAD", store_script_source(id)};
		size_t lens[] = {6, 4, strlen(argv[2])};
		struct pending *p = pending_new(st, 3, argv, lens, SCRIPT_N, on_script_loaded, st);
		if (p == NULL || !submit(st, p)) {
			if (p != NULL)
				pending_free(p);
			drop_connection(st, "out of memory");
			return;
		}
	}
}

static redisAsyncContext *async_connect(const char *address)
{
	if (strncmp(address, "unix:", 5) == 0)
		return redisAsyncConnectUnix(address + 5);
	char host[64];
	unsigned port;
	if (config_split_hostport(address, host, sizeof(host), &port) != 0)
		return NULL;
	return redisAsyncConnect(host, (int)port);
}

static void on_reconnect(evutil_socket_t fd, short what, void *arg)
{
	struct store *st = arg;
	(void)fd;
	(void)what;
	if (st->ac != NULL)
		return;
	redisAsyncContext *ac = async_connect(st->address);
	if (ac == NULL || ac->err) {
		char reason[160];
		snprintf(reason, sizeof(reason), "cannot connect (%s)",
		         ac != NULL ? ac->errstr : "out of memory");
		if (ac != NULL)
			redisAsyncFree(ac);
		set_up(st, false, reason);
		schedule_reconnect(st);
		return;
	}
	ac->data = st;
	st->ac = ac;
	redisLibeventAttach(ac, st->base);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

/* ---- start-up check ---- */

/* Blocking, before the loop runs: does this Redis run our scripts? Returns
 * 1 yes, 0 it does not answer (not an error: it may come later), -1 it
 * refuses (err says how). */
static int check_scripts(const char *address, unsigned timeout_ms, const char *prefix, char *err,
                         size_t errlen)
{
	struct timeval tv = {(time_t)(timeout_ms * 4 / 1000),
	                     (suseconds_t)(timeout_ms * 4 % 1000) * 1000};
	redisContext *c;
	if (strncmp(address, "unix:", 5) == 0) {
		c = redisConnectUnixWithTimeout(address + 5, tv);
	} else {
		char host[64];
		unsigned port;
		if (config_split_hostport(address, host, sizeof(host), &port) != 0)
			return 0;
		c = redisConnectWithTimeout(host, (int)port, tv);
	}
	if (c == NULL || c->err) {
		if (c != NULL)
			redisFree(c);
		return 0;
	}
	redisSetTimeout(c, tv);
	int rc = 1;
	for (int id = 0; id < SCRIPT_N && rc == 1; id++) {
		const char *argv[] = {"SCRIPT", "LOAD", store_script_source(id)};
		size_t lens[] = {6, 4, strlen(argv[2])};
		redisReply *r = redisCommandArgv(c, 3, argv, lens);
		if (r == NULL) {
			rc = 0;
		} else if (r->type != REDIS_REPLY_STRING ||
		           strcmp(r->str, store_script_sha(id)) != 0) {
			snprintf(
			    err, errlen, "store: the Redis at %s refuses scripts (SCRIPT LOAD: %s)",
			    address, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
			rc = -1;
		}
		if (r != NULL)
			freeReplyObject(r);
	}
	if (rc == 1) {
		/* EVALSHA can be renamed away on its own: one decision with no
		 * gate (it reads, writes nothing). */
		struct store_lane_names names;
		struct store_cmd cmd;
		store_lane_names_of(prefix, "pacerd", "startup-check", NULL, &names);
		store_cmd_decide(&cmd, &names, 1000, 0, "", 0, 0, NULL, 0);
		redisReply *r = redisCommandArgv(c, cmd.argc, cmd.argv, cmd.argvlen);
		if (r == NULL) {
			rc = 0;
		} else if (r->type != REDIS_REPLY_ARRAY) {
			snprintf(err, errlen,
			         "store: the Redis at %s refuses scripts (EVALSHA: %s)", address,
			         r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
			rc = -1;
		}
		if (r != NULL)
			freeReplyObject(r);
	}
	redisFree(c);
	return rc;
}

struct store *store_new(struct event_base *base, const struct config *cfg, store_state_fn on_state,
                        void *arg, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof(*st));
	if (st == NULL) {
		snprintf(err, errlen, "store: out of memory");
		return NULL;
	}
	list_init(&st->pending);
	st->base = base;
	snprintf(st->address, sizeof(st->address), "%s", cfg->store.redis.address);
	st->stats.address = st->address;
	st->timeout_ms = cfg->store.redis.timeout_ms;
	st->backoff_ms = RECONNECT_MIN_MS;
	stats_hist_init(&st->stats.latency, latency_bounds,
	                sizeof(latency_bounds) / sizeof(latency_bounds[0]));
	evtimer_assign(&st->reconnect, base, on_reconnect, st);
	evtimer_assign(&st->watchdog, base, on_watchdog, st);
	int rc =
	    check_scripts(st->address, st->timeout_ms, cfg->store.redis.key_prefix, err, errlen);
	if (rc < 0) {
		free(st);
		return NULL;
	}
	if (rc == 0) {
		log_state("store_unavailable", st, "no answer at start; retrying");
		snprintf(st->last_reason, sizeof(st->last_reason), "no answer at start");
	}
	st->on_state = on_state;
	st->state_arg = arg;
	on_reconnect(-1, 0, st);
	return st;
}

void store_free(struct store *st)
{
	if (st == NULL)
		return;
	st->freeing = true;
	evtimer_del(&st->reconnect);
	evtimer_del(&st->watchdog);
	if (st->ac != NULL) {
		redisAsyncContext *ac = st->ac;
		ac->data = NULL;
		st->ac = NULL;
		redisAsyncFree(ac); /* on_reply(NULL) frees each pending */
	}
	struct list *first;
	while ((first = list_first(&st->pending)) != NULL)
		pending_free(LIST_ITEM(first, struct pending, link)); /* not sent (never happens) */
	free(st);
}

bool store_up(const struct store *st)
{
	return st != NULL && st->up;
}

int64_t store_retry_in_ms(const struct store *st)
{
	if (st == NULL || st->up)
		return 0;
	int64_t left = st->reconnect_at_ms - mono_us() / 1000;
	return left > 0 ? left : 0;
}

struct store_stats *store_stats(struct store *st)
{
	return &st->stats;
}
