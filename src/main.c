/* SPDX-License-Identifier: Apache-2.0 */
/* main — command line, daemon lifecycle and signals.
 *
 *   pacerd [-c FILE] [--listen ADDR] [--check-config] [--version] [--help]
 *   pacerd --config-keys             every configuration key (pacerd.yaml(5))
 *   pacerd plan --requests N [...]   the pre-flight report (plan_cli.h)
 *   pacerd top [--admin ADDR] [...]  a live view of a running pacerd (top.h)
 *
 * Precedence of settings: command line > PACERD_* environment > file > built-in
 * defaults. SIGTERM/SIGINT drain (stop accepting, let requests in flight finish
 * within drain_timeout_s, exit 0); a second signal stops at once. */
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/admin.h"
#include "cli/ca_cli.h"
#include "cli/plan_cli.h"
#include "cli/top.h"
#include "core/ca.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/notify.h"
#include "core/state_dir.h"
#include "provider/profile.h"
#include "proxy/server.h"
#include "proxy/upstream.h"

#include "core/version.h"

extern char **environ;

struct daemon {
	struct event_base *base;
	struct config *cfg;      /* until server_new takes it over; then server_config() */
	const char *config_path; /* NULL: built-in defaults */
	const char *listen_override;
	struct upstream *up;
	struct server *srv;
	struct admin *admin;
	struct event *sigterm, *sigint, *sighup;
	struct event *drain_timer;
	struct event *exit_timer;
	struct event *watchdog;
	int signals_seen;
};

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: pacerd [-c FILE] [--listen ADDR] [--check-config] [--version] [--help]\n"
	        "       pacerd plan --requests N [LIMITS] [--time-budget DURATION] [--json]\n"
	        "       pacerd top [--admin ADDR] [--interval SECONDS] [--count N]\n"
	        "       pacerd ca [-c FILE] [--bundle FILE]\n"
	        "\n"
	        "  -c, --config FILE   configuration file (default: conf/pacerd.yaml beside the\n"
	        "                      build tree, else /etc/pacerd/pacerd.yaml, else built-in)\n"
	        "  --listen ADDR       listen address, overrides the file and PACERD_LISTEN\n"
	        "  --check-config      validate the configuration and exit (0 = valid)\n"
	        "  --version           print the version and exit\n"
	        "  --config-keys       print every configuration key: type, bounds, default\n"
	        "  plan ...            the pre-flight report of a run: duration, throughput,\n"
	        "                      the binding limit (pacerd plan --help)\n"
	        "  top ...             a live view of a running pacerd's admin /status: lanes,\n"
	        "                      queues, rates, 429s (pacerd top --help)\n"
	        "  ca ...              where pacerd's CA for HTTPS_PROXY clients is, and how to\n"
	        "                      trust it (pacerd ca --help)\n");
}

/* conf/pacerd.yaml beside the build tree the binary runs from (build/pacerd ->
 * ../conf/pacerd.yaml), then /etc/pacerd/pacerd.yaml; NULL = built-in defaults. */
static const char *default_config_path(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash != NULL) {
			*slash = '\0';
			snprintf(buf, len, "%s/../conf/pacerd.yaml", exe);
			if (access(buf, R_OK) == 0)
				return buf;
		}
	}
	if (access("/etc/pacerd/pacerd.yaml", R_OK) == 0)
		return "/etc/pacerd/pacerd.yaml";
	return NULL;
}

static void exit_now(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	(void)fd;
	(void)what;
	event_base_loopexit(d->base, NULL);
}

static void on_drained(void *arg)
{
	struct daemon *d = arg;
	log_msg(LOG_INFO, "drained", "no request in flight; exiting");
	/* Let the last responses leave the socket buffers on this loop turn. */
	struct timeval tv = {0, 0};
	evtimer_add(d->exit_timer, &tv);
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	(void)fd;
	(void)what;
	struct log_line l;
	if (log_begin(&l, LOG_WARN, "drain_timeout")) {
		log_int(&l, "in_flight", (long long)server_in_flight(d->srv));
		log_end(&l);
	}
	server_abort_all(d->srv);
	/* Give the 503s a moment to be written, then stop regardless. */
	struct timeval tv = {1, 0};
	evtimer_add(d->exit_timer, &tv);
}

static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	(void)what;
	if (++d->signals_seen > 1) {
		log_msg(LOG_WARN, "shutdown", "second signal: stopping now");
		server_abort_all(d->srv);
		struct timeval tv = {0, 200 * 1000};
		evtimer_add(d->exit_timer, &tv);
		return;
	}
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "shutdown")) {
		log_str(&l, "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
		log_int(&l, "in_flight", (long long)server_in_flight(d->srv));
		log_int(&l, "drain_timeout_s", server_config(d->srv)->drain_timeout_s);
		log_end(&l);
	}
	struct timeval tv = {(time_t)server_config(d->srv)->drain_timeout_s, 0};
	evtimer_add(d->drain_timer, &tv);
	notify_stopping();
	server_shutdown(d->srv, on_drained, d);
}

/* Loads the configuration as at start (file, environment, --listen). NULL
 * with err set when anything is invalid. */
static struct config *load_config(const struct daemon *d, char *err, size_t errlen)
{
	struct config *cfg = config_load(d->config_path, environ, err, errlen);
	if (cfg == NULL || d->listen_override == NULL)
		return cfg;
	char *copy = strdup(d->listen_override);
	if (copy == NULL) {
		snprintf(err, errlen, "out of memory");
		config_free(cfg);
		return NULL;
	}
	free(cfg->listen);
	cfg->listen = copy;
	return cfg;
}

/* The CA for CONNECT tunnels (forward.intercept), at start: made in the state
 * directory the first time. A configured CA that cannot be read refuses the
 * start; a state directory that cannot be written only turns tunnels off
 * (503 ca_unavailable), as base-URL traffic does not need it. */
static int open_ca(struct daemon *d)
{
	const struct config *cfg = server_config(d->srv);
	if (!cfg->forward.intercept)
		return 0;
	char err[1024], dir[PATH_MAX];
	bool created = false;
	struct ca *ca = ca_open_config(cfg, environ, &created, dir, sizeof(dir), err, sizeof(err));
	if (ca == NULL) {
		if (cfg->forward.ca_cert[0] != '\0') {
			log_flush();
			fprintf(stderr, "pacerd: forward.ca_cert: %s\n", err);
			return -1;
		}
		struct log_line l;
		if (log_begin(&l, LOG_WARN, "ca_unavailable")) {
			log_str(&l, "message", err);
			log_str(&l, "effect", "CONNECT to a provider's host is answered 503");
			log_end(&l);
		}
		return 0;
	}
	char fp[96];
	ca_fingerprint(ca, fp);
	struct log_line l;
	if (log_begin(&l, created ? LOG_INFO : LOG_DEBUG, created ? "ca_created" : "ca_loaded")) {
		log_str(&l, "cert", ca_cert_path(ca));
		log_str(&l, "sha256", fp);
		log_end(&l);
	}
	if (server_set_ca(d->srv, ca, err, sizeof(err)) != 0) {
		log_flush();
		fprintf(stderr, "pacerd: %s\n", err);
		return -1;
	}
	return 0;
}

/* Reads the file again (SIGHUP, POST /reload); an invalid one is reported and
 * the running configuration stays. 0 on success, -1 with err set. */
static int reload(void *arg, char *err, size_t errlen)
{
	struct daemon *d = arg;
	notify_reloading();
	struct config *cfg = load_config(d, err, errlen);
	if (cfg == NULL) {
		notify_ready(); /* still serving, with the old configuration */
		struct log_line l;
		if (log_begin(&l, LOG_ERROR, "config_reload_failed")) {
			log_str(&l, "error", err);
			log_str(&l, "message", "the running configuration stays");
			log_end(&l);
		}
		return -1;
	}
	const struct config *old = server_config(d->srv);
	if (cfg->deprecated != NULL)
		log_msg(LOG_WARN, "config_deprecated", cfg->deprecated);
	if (strcmp(cfg->admin.listen, old->admin.listen) != 0)
		log_msg(LOG_WARN, "config_reload",
		        "a new admin.listen address takes effect at restart");
	char lerr[256];
	if (strcmp(cfg->log.file, server_config(d->srv)->log.file) != 0 &&
	    log_open(cfg->log.file, cfg->log.level, lerr, sizeof(lerr)) != 0)
		log_msg(LOG_ERROR, "config_reload", lerr); /* keeps the old log file */
	log_set_level(cfg->log.level);
	server_reload(d->srv, cfg);
	notify_ready();
	return 0;
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	notify_send("WATCHDOG=1");
}

static void on_sighup(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	char err[1024];
	reload(arg, err, sizeof(err));
}

/* The work done once per loop turn: a fresh clock for the next turn, and the
 * turn's log lines written with one write(2). */
static void turn_end(void)
{
	clock_turn_end();
	log_flush();
}

/* event_base_dispatch, one turn at a time, so that each turn ends with
 * turn_end(). EVLOOP_ONCE returns after the callbacks of one wake-up have run:
 * 0, and got_exit / got_break tell a loopexit or loopbreak (they stay set until
 * the next event_base_loop call clears them); 1 when no events are left and -1
 * on error, where dispatch would return too. */
static void loop(struct event_base *base)
{
	turn_end(); /* start-up read the clock and logged "started" */
	while (!event_base_got_exit(base) && !event_base_got_break(base)) {
		int rc = event_base_loop(base, EVLOOP_ONCE);
		turn_end();
		if (rc != 0)
			break;
	}
}

static int run(struct daemon *d)
{
	char err[512];
	/* The epoll changelist folds the add/del pairs made on every
	 * request into one epoll_ctl each. Precise timers (timerfd,
	 * microseconds): a paced lane's timer fires within ~0.1 ms of its
	 * instant instead of 1-5 ms after it (epoll_wait's millisecond
	 * timeout), for one timerfd_settime per loop turn (docs/performance.md
	 * has the figures). */
	struct event_config *ec = event_config_new();
	if (ec != NULL) {
		event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
		event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
		d->base = event_base_new_with_config(ec);
		event_config_free(ec);
	}
	if (d->base == NULL) {
		log_flush();
		fprintf(stderr, "pacerd: cannot create event loop\n");
		return 1;
	}
	d->up = upstream_new(d->base, err, sizeof(err));
	if (d->up == NULL) {
		log_flush();
		fprintf(stderr, "pacerd: %s\n", err);
		return 1;
	}
	/* The signals are libevent's before the listeners open: a SIGHUP sent as
	 * soon as the port answers (a supervisor's reload) must reach on_sighup,
	 * not the default action, which ends the process. The handlers run from
	 * the loop, once everything below is set up. */
	d->sigterm = evsignal_new(d->base, SIGTERM, on_stop_signal, d);
	d->sigint = evsignal_new(d->base, SIGINT, on_stop_signal, d);
	d->sighup = evsignal_new(d->base, SIGHUP, on_sighup, d);
	d->drain_timer = evtimer_new(d->base, on_drain_timeout, d);
	d->exit_timer = evtimer_new(d->base, exit_now, d);
	if (!d->sigterm || !d->sigint || !d->sighup || !d->drain_timer || !d->exit_timer) {
		log_flush();
		fprintf(stderr, "pacerd: out of memory\n");
		return 1;
	}
	event_add(d->sigterm, NULL);
	event_add(d->sigint, NULL);
	event_add(d->sighup, NULL);
	struct config *cfg = d->cfg;
	d->cfg = NULL; /* the server owns it now, also when it fails */
	d->srv = server_new(d->base, cfg, d->up, err, sizeof(err));
	if (d->srv == NULL) {
		log_flush();
		fprintf(stderr, "pacerd: %s\n", err);
		return 1;
	}
	if (open_ca(d) != 0)
		return 1;
	/* What the lanes learned, kept in the state directory (state_dir.h):
	 * read back now, written every 30 s and at shutdown. */
	char state[PATH_MAX];
	enum state_dir_from from = state_dir_resolve(server_config(d->srv)->state_dir, environ,
	                                             STATE_DIR_VAR_LIB, state, sizeof(state));
	server_keep_state(d->srv, state, state_dir_from_name(from));
	d->admin = admin_new(d->base, d->srv, reload, d, err, sizeof(err));
	if (d->admin == NULL && err[0] != '\0') {
		log_flush();
		fprintf(stderr, "pacerd: %s\n", err);
		return 1;
	}
	/* systemd's watchdog: a ping at half the interval, from the loop itself,
	 * so that a stuck loop is what stops the pings. */
	uint64_t wd = notify_watchdog_usec();
	if (wd > 0) {
		d->watchdog = event_new(d->base, -1, EV_PERSIST, on_watchdog, d);
		struct timeval tv = {(time_t)(wd / 2 / 1000000), (suseconds_t)(wd / 2 % 1000000)};
		if (d->watchdog != NULL)
			event_add(d->watchdog, &tv);
	}
	notify_ready();

	struct log_line l;
	if (log_begin(&l, LOG_INFO, "started")) {
		log_str(&l, "version", pacerd_version);
		const struct config *c = server_config(d->srv);
		log_str(&l, "listen", c->listen);
		log_str(&l, "config", c->source);
		log_int(&l, "providers", (long long)c->n_providers);
		log_str(&l, "default_provider", c->default_provider);
		log_end(&l);
	}
	loop(d->base);
	server_save_state(d->srv);
	log_msg(LOG_INFO, "stopped", "pacerd exited cleanly");
	return 0;
}

static void cleanup(struct daemon *d)
{
	admin_free(d->admin);
	server_free(d->srv);
	upstream_free(d->up);
	struct event *evs[] = {d->sigterm,     d->sigint,     d->sighup,
	                       d->drain_timer, d->exit_timer, d->watchdog};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
	if (d->base != NULL)
		event_base_free(d->base);
	config_free(d->cfg);
	notify_close();
	log_close();
}

int main(int argc, char **argv)
{
	const char *config_path = NULL;
	const char *listen = NULL;
	bool check_only = false;
	char pathbuf[PATH_MAX + 32];

	/* The built-in providers, before any configuration is read (core cannot
	 * include provider: the rows are handed over). */
	profile_install();
	if (argc > 1 && strcmp(argv[1], "plan") == 0)
		return plan_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "top") == 0)
		return top_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "ca") == 0)
		return ca_main(argc - 1, argv + 1, environ,
		               default_config_path(pathbuf, sizeof(pathbuf)));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) && i + 1 < argc) {
			config_path = argv[++i];
		} else if (strcmp(a, "--listen") == 0 && i + 1 < argc) {
			listen = argv[++i];
		} else if (strcmp(a, "--check-config") == 0) {
			check_only = true;
		} else if (strcmp(a, "--version") == 0) {
			printf("pacerd %s\n", pacerd_version);
			return 0;
		} else if (strcmp(a, "--config-keys") == 0) {
			config_keys_print(stdout);
			return 0;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (!check_only || config_path != NULL || a[0] == '-') {
			fprintf(stderr, "pacerd: unknown argument '%s'\n", a);
			usage(stderr);
			return 2;
		} else {
			config_path = a; /* pacerd --check-config FILE */
		}
	}
	if (config_path == NULL)
		config_path = default_config_path(pathbuf, sizeof(pathbuf));

	char err[1024];
	struct daemon d;
	memset(&d, 0, sizeof(d));
	if (listen != NULL) {
		char host[256];
		unsigned port;
		if (config_split_hostport(listen, host, sizeof(host), &port) != 0) {
			fprintf(stderr, "--listen: invalid address '%s'\n", listen);
			return 1;
		}
	}
	d.config_path = config_path;
	d.listen_override = listen;
	d.cfg = load_config(&d, err, sizeof(err));
	if (d.cfg == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (check_only) {
		printf("%s: configuration ok\n", d.cfg->source);
		fflush(stdout);
		if (d.cfg->deprecated != NULL)
			fprintf(stderr, "warning: %s\n", d.cfg->deprecated);
		/* Where the store's password comes from, never the password. */
		if (d.cfg->store.kind == STORE_REDIS)
			printf(
			    "store: redis at %s%s, password %s%s%s\n", d.cfg->store.redis.address,
			    d.cfg->store.redis.tls.enabled ? " over TLS" : "",
			    d.cfg->store.redis.password_from == NULL ? "none (no AUTH)" : "from ",
			    d.cfg->store.redis.password_from == NULL ? ""
			    : d.cfg->store.redis.password_from[0] == 'p'
			        ? d.cfg->store.redis.password_file
			        : "PACERD_STORE_PASSWORD",
			    d.cfg->store.redis.username[0] != '\0' ? " (ACL user)" : "");
		config_free(d.cfg);
		return 0;
	}
	if (log_open(d.cfg->log.file, d.cfg->log.level, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		config_free(d.cfg);
		return 1;
	}
	log_hook_libevent();
	if (d.cfg->deprecated != NULL)
		log_msg(LOG_WARN, "config_deprecated", d.cfg->deprecated);
	if (notify_init() != 0)
		log_msg(LOG_WARN, "notify",
		        "NOTIFY_SOCKET is malformed; systemd notifications are off");
	/* libevent writes without MSG_NOSIGNAL: a client gone mid-write must not
	 * kill the process. */
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_flush();
		fprintf(stderr, "pacerd: cannot initialise libcurl\n");
		config_free(d.cfg);
		return 1;
	}
	int rc = run(&d);
	/* Stopping already: a late SIGTERM must not turn a clean exit into a
	 * killed process when libevent restores the default handlers. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	cleanup(&d);
	curl_global_cleanup();
	libevent_global_shutdown();
	return rc;
}
