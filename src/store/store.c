/* SPDX-License-Identifier: Apache-2.0 */
/* store — the Redis connection of the shared store; see store.h. */
#include "store/store.h"

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/list.h"
#include "core/log.h"
#include "store/redis_conn.h"
#include "store/store_address.h"
#include "store/store_script.h"
#include "store/store_tls.h"

#define RECONNECT_MIN_MS 50
#define RECONNECT_MAX_MS 500
/* A connection not up (resolved, connected, TLS, AUTH, scripts loaded) within
 * this long is given up and tried again: the kernel would wait minutes for a
 * SYN that no one answers, and commands' watchdog does not cover the connect. */
#define CONNECT_TIMEOUT_MIN_MS 1000
/* The start-up check waits at least this long (names, TLS, AUTH: several round
 * trips to a managed Redis), at most max(this, timeout_ms × 4). */
#define CHECK_MIN_MS 1000

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
	struct evdns_base *dns;
	char address[128];
	struct store_address addr;
	SSL_CTX *tls; /* NULL: plain TCP */
	char tls_name[256];
	char *username, *password; /* NULL: no AUTH; the password never leaves here */
	unsigned timeout_ms;
	struct redis_conn *conn;
	bool up; /* connected and scripts loaded */
	bool ever_up;
	bool freeing;
	unsigned loading; /* SCRIPT LOAD replies awaited after a connect */
	int64_t backoff_ms;
	int64_t reconnect_at_ms;
	struct event reconnect;
	struct store_hooks hooks;
	/* Every pending, oldest first. One timer watches the oldest, not one
	 * per command: arming and disarming a timer per command cost as much
	 * as the command itself. */
	struct list pending;
	struct event watchdog;
	bool watchdog_armed;
	struct event connecting; /* the connect's deadline */
	struct pending *grace;   /* the oldest, late, given one more loop turn */
	struct store_stats stats;
	char last_reason[200];
	/* the text of the error reply being answered (as NULL) */
	char reply_error[160];
	bool is_reply_error;
	/* The start-up check (store_new): the same connection on a loop of
	 * its own, run until it decides. */
	bool checking, check_done;
	int check_rc; /* 1 usable, 0 no answer, -1 refused (check_err says why) */
	char check_err[300];
};

static int64_t mono_us(void)
{
	return clock_mono_ns() / 1000;
}

static void log_state(const char *event, const struct store *st, const char *reason)
{
	struct log_line l;
	if (st->checking)
		return; /* the check's verdict is store_new's error */
	if (log_begin(&l, strcmp(event, "store_unavailable") == 0 ? LOG_WARN : LOG_INFO, event)) {
		log_str(&l, "store", "redis");
		log_str(&l, "address", st->address);
		if (reason != NULL)
			log_str(&l, "reason", reason);
		if (st->hooks.describe != NULL)
			st->hooks.describe(st->hooks.arg, &l,
			                   strcmp(event, "store_unavailable") != 0);
		log_end(&l);
	}
}

/* The start-up check has its answer: its loop stops. */
static void check_finish(struct store *st, int rc, const char *why)
{
	if (!st->checking || st->check_done)
		return;
	st->check_done = true;
	st->check_rc = rc;
	if (why != NULL)
		snprintf(st->check_err, sizeof(st->check_err), "store: the Redis at %.100s %.170s",
		         st->address, why);
	event_base_loopbreak(st->base);
}

static void send_check(struct store *st);

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
		if (st->checking)
			send_check(st);
	} else {
		log_state("store_unavailable", st, reason);
		check_finish(st, 0, NULL);
	}
	if (st->hooks.on_state != NULL && !st->freeing && !st->checking)
		st->hooks.on_state(st->hooks.arg, up);
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

/* Every command in flight fails (the connection that carried them is gone). */
static void fail_pending(struct store *st)
{
	struct list *first;
	st->grace = NULL;
	while ((first = list_first(&st->pending)) != NULL) {
		struct pending *p = LIST_ITEM(first, struct pending, link);
		list_remove(&p->link);
		list_init(&p->link);
		pending_answer(p, NULL);
		free(p);
	}
}

/* The next reply of the connection: the oldest command's (Redis answers a
 * connection's commands in order). */
static void on_conn_reply(void *arg, redisReply *reply)
{
	struct store *st = arg;
	struct list *first = list_first(&st->pending);
	if (first == NULL) {
		drop_connection(st, "a reply to no command");
		return;
	}
	struct pending *p = LIST_ITEM(first, struct pending, link);
	if (st->grace == p)
		st->grace = NULL;
	if (reply->type == REDIS_REPLY_ERROR && p->script != SCRIPT_N && !p->answered &&
	    strncmp(reply->str, "NOSCRIPT", 8) == 0 && st->up) {
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
	/* Off the list before its owner hears: what the owner does (drop the
	 * connection, send more) must not find it there. */
	list_remove(&p->link);
	list_init(&p->link);
	if (reply->type == REDIS_REPLY_ERROR) {
		size_t n = reply->len < sizeof(st->reply_error) - 1 ? reply->len
		                                                    : sizeof(st->reply_error) - 1;
		memcpy(st->reply_error, reply->str, n);
		st->reply_error[n] = '\0';
		st->is_reply_error = true;
		struct log_line l;
		if (!st->checking && log_begin(&l, LOG_WARN, "store_error")) {
			log_str(&l, "store", "redis");
			log_str(&l, "error", st->reply_error);
			log_end(&l);
		}
		pending_answer(p, NULL);
		st->is_reply_error = false;
	} else {
		pending_answer(p, reply);
	}
	free(p);
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
	struct pending *p = oldest_unanswered(st);
	if (p == NULL)
		return;
	int64_t age = mono_us() - p->sent_us;
	if (age < limit) {
		arm_watchdog(st, limit - age);
		return;
	}
	/* An answer already in the socket is not late: a loop turn that ran
	 * long (a busy or instrumented process) may reach this timer before the
	 * read event. One more turn of the loop reads what is there (its I/O
	 * runs before its timers). */
	if (st->grace != p) {
		st->grace = p;
		arm_watchdog(st, 0);
		return;
	}
	st->grace = NULL;
	st->stats.timeouts++;
	char reason[96];
	snprintf(reason, sizeof(reason), "no answer within timeout_ms (%u)", st->timeout_ms);
	/* Down before the owner hears of the failure: what it sends in
	 * response must not go onto the connection about to be closed. */
	set_up(st, false, reason);
	pending_answer(p, NULL);
	drop_connection(st, reason); /* fails every other pending */
}

static bool submit(struct store *st, struct pending *p)
{
	if (st->conn == NULL || !redis_conn_send(st->conn, p->argc, p->argv, p->lens))
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

/* Submits p (NULL: out of memory), or frees it when it cannot go. */
static bool send_pending(struct store *st, struct pending *p)
{
	if (p == NULL)
		return false;
	if (!submit(st, p)) {
		pending_free(p);
		return false;
	}
	return true;
}

/* Sends a command whether the store is up or not (the connection's own
 * set-up: AUTH, SCRIPT LOAD). */
static bool send_raw(struct store *st, int argc, const char *const *argv, const size_t *lens,
                     store_reply_fn fn, void *arg)
{
	return send_pending(st, pending_new(st, argc, argv, lens, SCRIPT_N, fn, arg));
}

bool store_send(struct store *st, const struct store_cmd *cmd, store_reply_fn fn, void *arg)
{
	if (st == NULL || !st->up)
		return false;
	return send_pending(
	    st, pending_new(st, cmd->argc, cmd->argv, cmd->argvlen, script_of(cmd), fn, arg));
}

/* ---- the connection ---- */

static void schedule_reconnect(struct store *st)
{
	if (st->freeing || st->checking)
		return;
	int64_t ms = st->backoff_ms;
	st->backoff_ms =
	    st->backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : st->backoff_ms * 2;
	st->reconnect_at_ms = mono_us() / 1000 + ms;
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(&st->reconnect, &tv);
}

/* Closes the connection: every command in flight is answered NULL, then the
 * reconnect timer runs. Safe from inside the connection's callbacks. */
static void drop_connection(struct store *st, const char *reason)
{
	if (st->conn == NULL)
		return;
	set_up(st, false, reason);
	redis_conn_free(st->conn);
	st->conn = NULL;
	st->loading = 0;
	fail_pending(st);
	check_finish(st, 0, NULL);
	schedule_reconnect(st);
}

static void on_script_loaded(void *arg, const redisReply *r)
{
	struct store *st = arg;
	if (st->loading == 0)
		return;
	if (r == NULL || r->type != REDIS_REPLY_STRING) {
		st->loading = 0;
		if (st->is_reply_error) {
			char why[240];
			snprintf(why, sizeof(why), "refuses scripts (SCRIPT LOAD: %s)",
			         st->reply_error);
			check_finish(st, -1, why);
		}
		return; /* the failure took the connection down, or will */
	}
	if (--st->loading == 0) {
		evtimer_del(&st->connecting);
		set_up(st, true, NULL);
	}
}

/* AUTH's answer: a refused password or user is a setting to fix. At start it
 * stops pacerd; later (a password rotated on the server) the store stays
 * down, logged, and keeps trying. */
static void on_auth(void *arg, const redisReply *r)
{
	struct store *st = arg;
	if (r != NULL || !st->is_reply_error)
		return; /* OK; or the connection went: handled there */
	char why[240];
	snprintf(why, sizeof(why), "refuses AUTH%s (%s)",
	         st->username != NULL ? " for the user" : "", st->reply_error);
	check_finish(st, -1, why);
	char reason[260];
	snprintf(reason, sizeof(reason), "AUTH refused (%s)", st->reply_error);
	drop_connection(st, reason);
}

static void on_conn_up(void *arg)
{
	struct store *st = arg;
	if (st->password != NULL) {
		/* Pipelined ahead of the scripts: Redis answers in order. */
		const char *argv[3] = {"AUTH"};
		size_t lens[3] = {4};
		int argc = 1;
		if (st->username != NULL) {
			argv[argc] = st->username;
			lens[argc++] = strlen(st->username);
		}
		argv[argc] = st->password;
		lens[argc++] = strlen(st->password);
		if (!send_raw(st, argc, argv, lens, on_auth, st)) {
			drop_connection(st, "out of memory");
			return;
		}
	}
	/* Load every script before the store counts as up: a Redis restarted
	 * since has forgotten them (EVALSHA would find none). Sent directly:
	 * store_send refuses while the store is down. */
	st->loading = SCRIPT_N;
	for (int id = 0; id < SCRIPT_N; id++) {
		const char *argv[] = {"SCRIPT", "LOAD", store_script_source(id)};
		size_t lens[] = {6, 4, strlen(argv[2])};
		if (!send_raw(st, 3, argv, lens, on_script_loaded, st)) {
			drop_connection(st, "out of memory");
			return;
		}
	}
}

static void on_conn_down(void *arg, const char *reason, bool refused)
{
	struct store *st = arg;
	st->conn = NULL; /* it frees itself */
	st->loading = 0;
	char why[260];
	snprintf(why, sizeof(why), "%s%s",
	         st->ever_up ? "connection lost: " : "cannot connect: ", reason);
	if (refused)
		check_finish(st, -1, why);
	if (!st->ever_up && !st->up && st->last_reason[0] == '\0')
		log_state("store_unavailable", st, why);
	set_up(st, false, why);
	snprintf(st->last_reason, sizeof(st->last_reason), "%.190s", why);
	fail_pending(st);
	check_finish(st, 0, NULL);
	schedule_reconnect(st);
}

/* The connection did not come up in time: dropped, tried again later. */
static void on_connect_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct store *st = arg;
	(void)fd;
	(void)what;
	if (st->conn == NULL || st->up)
		return;
	char reason[96];
	snprintf(reason, sizeof(reason), "cannot connect: not up within %u ms",
	         st->timeout_ms * 20 < CONNECT_TIMEOUT_MIN_MS ? CONNECT_TIMEOUT_MIN_MS
	                                                      : st->timeout_ms * 20);
	drop_connection(st, reason);
}

static void on_reconnect(evutil_socket_t fd, short what, void *arg)
{
	struct store *st = arg;
	(void)fd;
	(void)what;
	if (st->conn != NULL)
		return;
	const struct redis_conn_hooks hooks = {on_conn_up, on_conn_reply, on_conn_down, st};
	st->conn = redis_conn_open(st->base, st->dns, &st->addr, st->tls, st->tls_name, &hooks);
	if (st->conn != NULL) {
		int64_t ms = (int64_t)st->timeout_ms * 20;
		if (ms < CONNECT_TIMEOUT_MIN_MS)
			ms = CONNECT_TIMEOUT_MIN_MS;
		struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
		evtimer_add(&st->connecting, &tv);
	} else {
		set_up(st, false, "cannot connect (out of memory)");
		check_finish(st, 0, NULL);
		schedule_reconnect(st);
	}
}

/* ---- start-up check ---- */

static void on_check_reply(void *arg, const redisReply *r)
{
	struct store *st = arg;
	if (r != NULL && r->type == REDIS_REPLY_ARRAY) {
		check_finish(st, 1, NULL);
	} else if (r != NULL || st->is_reply_error) {
		char why[240];
		snprintf(why, sizeof(why), "refuses scripts (EVALSHA: %s)",
		         r == NULL ? st->reply_error : "unexpected reply");
		check_finish(st, -1, why);
	}
}

/* EVALSHA can be renamed away on its own: one decision with no gate (it
 * reads, writes nothing). */
static void send_check(struct store *st)
{
	struct store_lane_names names;
	struct store_cmd cmd;
	store_lane_names_of(st->check_err, "pacerd", "startup-check", NULL, &names);
	store_cmd_decide(&cmd, &names, 1000, 0, "", 0, 0, NULL, 0);
	if (!store_send(st, &cmd, on_check_reply, st))
		check_finish(st, 0, NULL);
}

/* Before the loop runs: does this Redis take our password and run our
 * scripts? The connection of every later moment (names through evdns, TLS,
 * AUTH, SCRIPT LOAD) on a loop of its own, for at most timeout_ms × 4.
 * Returns 1 yes, 0 it does not answer (not an error: it may come later), -1
 * it refuses (err says how). */
static int check_start(struct store *st, const char *prefix, const char *resolv_conf, char *err,
                       size_t errlen)
{
	struct event_base *base = event_base_new();
	struct evdns_base *dns = base != NULL ? evdns_base_new(base, 0) : NULL;
	if (dns == NULL) {
		if (base != NULL)
			event_base_free(base);
		return 0;
	}
	evdns_base_resolv_conf_parse(dns, DNS_OPTIONS_ALL, resolv_conf);
	st->base = base;
	st->dns = dns;
	st->checking = true;
	/* the check's key prefix rides in check_err until a verdict */
	snprintf(st->check_err, sizeof(st->check_err), "%s", prefix);
	evtimer_assign(&st->reconnect, base, on_reconnect, st);
	evtimer_assign(&st->watchdog, base, on_watchdog, st);
	evtimer_assign(&st->connecting, base, on_connect_timeout, st);
	unsigned check_ms = st->timeout_ms * 4 > CHECK_MIN_MS ? st->timeout_ms * 4 : CHECK_MIN_MS;
	struct timeval tv = {(time_t)(check_ms / 1000), (suseconds_t)(check_ms % 1000) * 1000};
	event_base_loopexit(base, &tv);
	on_reconnect(-1, 0, st);
	event_base_dispatch(base);
	int rc = st->check_done ? st->check_rc : 0;
	if (rc < 0)
		snprintf(err, errlen, "%s", st->check_err);
	else if (rc == 0) /* why it did not answer, for the first store_unavailable */
		snprintf(st->check_err, sizeof(st->check_err), "%s",
		         st->last_reason[0] != '\0' ? st->last_reason : "no answer");
	st->check_done = true; /* nothing below changes the verdict */
	if (st->conn != NULL) {
		redis_conn_free(st->conn);
		st->conn = NULL;
	}
	fail_pending(st);
	evtimer_del(&st->reconnect);
	evtimer_del(&st->watchdog);
	evtimer_del(&st->connecting);
	st->watchdog_armed = false;
	evdns_base_free(dns, 0);
	event_base_free(base);
	st->dns = NULL;
	st->base = NULL;
	st->checking = false;
	st->up = st->ever_up = false;
	st->loading = 0;
	st->backoff_ms = RECONNECT_MIN_MS;
	st->last_reason[0] = '\0';
	memset(&st->stats, 0, sizeof(st->stats));
	stats_hist_init(&st->stats.latency, latency_bounds,
	                sizeof(latency_bounds) / sizeof(latency_bounds[0]));
	st->stats.address = st->address;
	return rc;
}

static void store_destroy(struct store *st)
{
	if (st->password != NULL) {
		explicit_bzero(st->password, strlen(st->password));
		free(st->password);
	}
	free(st->username);
	if (st->tls != NULL)
		SSL_CTX_free(st->tls);
	if (st->dns != NULL)
		evdns_base_free(st->dns, 0);
	free(st);
}

struct store *store_new(struct event_base *base, const struct config *cfg,
                        const struct store_hooks *hooks, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof(*st));
	if (st == NULL) {
		snprintf(err, errlen, "store: out of memory");
		return NULL;
	}
	list_init(&st->pending);
	snprintf(st->address, sizeof(st->address), "%s", cfg->store.redis.address);
	st->stats.address = st->address;
	st->timeout_ms = cfg->store.redis.timeout_ms;
	st->backoff_ms = RECONNECT_MIN_MS;
	stats_hist_init(&st->stats.latency, latency_bounds,
	                sizeof(latency_bounds) / sizeof(latency_bounds[0]));
	if (store_address_parse(cfg->store.redis.address, &st->addr) != 0) {
		snprintf(err, errlen, "store: cannot use the address '%s'", st->address);
		free(st);
		return NULL;
	}
	if (cfg->store.redis.tls.enabled) {
		if ((st->tls = store_tls_ctx(cfg, err, errlen)) == NULL) {
			free(st);
			return NULL;
		}
		snprintf(st->tls_name, sizeof(st->tls_name), "%s",
		         store_address_tls_name(&st->addr, cfg->store.redis.tls.server_name));
	}
	if (cfg->store.redis.password != NULL) {
		st->password = strdup(cfg->store.redis.password);
		if (cfg->store.redis.username[0] != '\0')
			st->username = strdup(cfg->store.redis.username);
		if (st->password == NULL ||
		    (cfg->store.redis.username[0] != '\0' && st->username == NULL)) {
			snprintf(err, errlen, "store: out of memory");
			store_destroy(st);
			return NULL;
		}
	}
	int ok =
	    check_start(st, cfg->store.redis.key_prefix, cfg->store.redis.resolv_conf, err, errlen);
	if (ok < 0) {
		store_destroy(st);
		return NULL;
	}
	/* The loop's own resolver: nameservers and /etc/hosts read once, here;
	 * each connect asks again (evdns keeps no cache of answers). */
	st->base = base;
	st->dns = evdns_base_new(base, 0);
	if (st->dns == NULL) {
		snprintf(err, errlen, "store: cannot create a resolver");
		store_destroy(st);
		return NULL;
	}
	evdns_base_resolv_conf_parse(st->dns, DNS_OPTIONS_ALL, cfg->store.redis.resolv_conf);
	evtimer_assign(&st->reconnect, base, on_reconnect, st);
	evtimer_assign(&st->watchdog, base, on_watchdog, st);
	evtimer_assign(&st->connecting, base, on_connect_timeout, st);
	st->hooks = *hooks;
	if (ok == 0) {
		char reason[360];
		snprintf(reason, sizeof(reason), "no answer at start (%s); retrying",
		         st->check_err);
		log_state("store_unavailable", st, reason);
		snprintf(st->last_reason, sizeof(st->last_reason), "no answer at start");
	}
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
	evtimer_del(&st->connecting);
	if (st->conn != NULL) {
		redis_conn_free(st->conn);
		st->conn = NULL;
	}
	fail_pending(st);
	store_destroy(st);
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
