/* SPDX-License-Identifier: Apache-2.0 */
/* mock_main.c — command line, listeners (plain and TLS), connection tracking, signals. */
#include "mock.h"
#include "mock_engine.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

struct event_base *mock_base;
static uint64_t start_ms;
static SSL_CTX *ssl_ctx;

/* Connections by fd: evhttp gives no per-connection hook at accept time that knows
 * the evhttp_connection, so a connection is registered at its first request. */
static struct mock_conn **conns;
static size_t nconns;

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t mock_now_ms(void)
{
	return mono_ms() - start_ms;
}

uint64_t mock_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u - start_ms * 1000u;
}

/* evhttp runs this when the connection goes away: client EOF or error (the request in
 * progress is already detached then), our own evhttp_connection_free, or evhttp_free. */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct mock_conn *c = arg;
	(void)evcon;
	if (c->cur != NULL)
		mock_req_conn_closed(c->cur);
	if (c->engine != NULL)
		mock_engine_conn_closed(c->engine);
	if (c->fd >= 0 && (size_t)c->fd < nconns && conns[c->fd] == c)
		conns[c->fd] = NULL;
	mock_stats.connections_closed++;
	free(c);
}

struct mock_conn *mock_conn_of(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	if (evcon == NULL)
		return NULL;
	int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
	if (fd < 0)
		return NULL;
	if ((size_t)fd < nconns && conns[fd] != NULL && conns[fd]->evcon == evcon)
		return conns[fd];
	if ((size_t)fd >= nconns) {
		size_t n = nconns ? nconns : 256;
		while (n <= (size_t)fd)
			n *= 2;
		struct mock_conn **p = realloc(conns, n * sizeof(*p));
		if (p == NULL)
			return NULL;
		memset(p + nconns, 0, (n - nconns) * sizeof(*p));
		conns = p;
		nconns = n;
	}
	struct mock_conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->evcon = evcon;
	c->fd = fd;
	conns[fd] = c;
	/* Small SSE chunks must leave at once, not wait for Nagle. */
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	evhttp_connection_set_closecb(evcon, conn_closed, c);
	mock_stats.connections_opened++;
	return c;
}

static struct bufferevent *tls_bev(struct event_base *base, void *arg)
{
	(void)arg;
	SSL *ssl = SSL_new(ssl_ctx);
	if (ssl == NULL)
		return NULL;
	return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
	                                      BEV_OPT_CLOSE_ON_FREE);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	event_base_loopexit(mock_base, NULL);
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: pacerd-mock [--host 127.0.0.1] [--port 0] [--tls-port 0 --cert FILE "
	        "--key FILE]\n"
	        "                   [--config JSON] [--engine JSON] [--no-record] [--record-cap "
	        "N]\n");
}

int mock_parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static struct evhttp *new_http(void)
{
	struct evhttp *h = evhttp_new(mock_base);
	if (h == NULL)
		return NULL;
	evhttp_set_max_body_size(h, 256 * 1024 * 1024); /* uploads.mjs sends 100 MiB */
	evhttp_set_max_headers_size(h, 1024 * 1024);
	/* evhttp answers 501 to methods it was not told to allow: the echo route takes any. */
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
	                                  EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	                                  EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_gencb(h, mock_routes_handle, NULL);
	return h;
}

/* Listen on host:port with a large backlog (evhttp_bind_socket uses 128); returns the
 * bound port or -1. */
static int bind_http(struct evhttp *h, const char *host, long port)
{
	struct addrinfo hints, *res = NULL;
	char portstr[16];
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(portstr, sizeof(portstr), "%ld", port);
	int rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "pacerd-mock: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	struct evconnlistener *l = evconnlistener_new_bind(
	    mock_base, NULL, NULL,
	    LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 1024, res->ai_addr,
	    (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (l == NULL) {
		fprintf(stderr, "pacerd-mock: bind %s:%ld: %s\n", host, port, strerror(errno));
		return -1;
	}
	if (evhttp_bind_listener(h, l) == NULL) {
		evconnlistener_free(l);
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&ss, &sl) != 0)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int setup_tls(const char *cert, const char *key)
{
	ssl_ctx = SSL_CTX_new(TLS_server_method());
	if (ssl_ctx == NULL)
		return -1;
	if (SSL_CTX_use_certificate_chain_file(ssl_ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ssl_ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ssl_ctx) != 1) {
		fprintf(stderr, "pacerd-mock: cannot load %s / %s: ", cert, key);
		ERR_print_errors_fp(stderr);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1", *cert = NULL, *key = NULL, *config = NULL, *engine = NULL;
	long port = 0, tls_port = -1, cap = 100000;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--no-record") == 0) {
			mock_record_enabled = false;
			continue;
		}
		if (v == NULL) {
			usage();
			return 2;
		}
		i++;
		if (strcmp(a, "--host") == 0)
			host = v;
		else if (strcmp(a, "--port") == 0 && mock_parse_long(v, 0, 65535, &port) == 0)
			;
		else if (strcmp(a, "--tls-port") == 0 &&
		         mock_parse_long(v, 0, 65535, &tls_port) == 0)
			;
		else if (strcmp(a, "--cert") == 0)
			cert = v;
		else if (strcmp(a, "--key") == 0)
			key = v;
		else if (strcmp(a, "--config") == 0)
			config = v;
		else if (strcmp(a, "--engine") == 0)
			engine = v;
		else if (strcmp(a, "--record-cap") == 0 &&
		         mock_parse_long(v, 1, 10000000, &cap) == 0)
			;
		else {
			usage();
			return 2;
		}
	}
	mock_record_cap = (size_t)cap;
	if (tls_port >= 0 && (cert == NULL || key == NULL)) {
		fprintf(stderr, "pacerd-mock: --tls-port needs --cert and --key\n");
		return 2;
	}
	if (tls_port < 0 && (cert != NULL || key != NULL))
		tls_port = 0; /* a certificate alone asks for TLS on a free port */

	start_ms = mono_ms();
	/* libevent writes without MSG_NOSIGNAL: a vanished client must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	/* The changelist folds evhttp's enable/disable toggles within one loop turn into
	 * one epoll_ctl per fd (measured: 4 epoll_ctl per keep-alive request without it). */
	struct event_config *ecfg = event_config_new();
	if (ecfg == NULL)
		return 1;
	event_config_set_flag(ecfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	/* Timers on CLOCK_MONOTONIC, not its coarse variant (a jiffy behind, up to 4 ms):
	 * a 429 held for latency_ms must not leave before the window it advertises opens
	 * (mock_now_ms() + latency_ms), or a client that waits out the window from the
	 * 429's arrival is counted inside it. */
	event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	mock_base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	if (mock_base == NULL)
		return 1;
	if (config != NULL) {
		char err[256];
		if (mock_limits_configure(config, strlen(config), err, sizeof(err)) != 0) {
			fprintf(stderr, "pacerd-mock: --config: %s\n", err);
			return 2;
		}
	}
	if (engine != NULL) {
		char err[256];
		if (mock_engine_configure(engine, strlen(engine), err, sizeof(err)) != 0) {
			fprintf(stderr, "pacerd-mock: --engine: %s\n", err);
			return 2;
		}
	}

	struct evhttp *h = new_http(), *hs = NULL;
	if (h == NULL)
		return 1;
	int hport = bind_http(h, host, port), sport = 0;
	if (hport < 0)
		return 1;
	if (tls_port >= 0) {
		if (setup_tls(cert, key) != 0)
			return 1;
		hs = new_http();
		if (hs == NULL)
			return 1;
		evhttp_set_bevcb(hs, tls_bev, NULL);
		sport = bind_http(hs, host, tls_port);
		if (sport < 0)
			return 1;
	}

	struct event *sigterm = evsignal_new(mock_base, SIGTERM, on_signal, NULL);
	struct event *sigint = evsignal_new(mock_base, SIGINT, on_signal, NULL);
	if (sigterm == NULL || sigint == NULL || event_add(sigterm, NULL) != 0 ||
	    event_add(sigint, NULL) != 0)
		return 1;

	printf("{\"http\":%d,\"https\":%d}\n", hport, sport);
	fflush(stdout);

	event_base_dispatch(mock_base);

	/* Orderly teardown so that valgrind and ASan report real leaks only: freeing the
	 * evhttp closes every connection, which runs conn_closed for each. */
	evhttp_free(h);
	if (hs != NULL)
		evhttp_free(hs);
	event_free(sigterm);
	event_free(sigint);
	mock_record_free();
	mock_limits_free();
	mock_responses_reset();
	mock_routes_free();
	mock_engine_free();
	free(conns);
	if (ssl_ctx != NULL)
		SSL_CTX_free(ssl_ctx);
	event_base_free(mock_base);
	return 0;
}
