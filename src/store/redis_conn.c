/* SPDX-License-Identifier: Apache-2.0 */
/* redis_conn — the bytes of one Redis connection; see redis_conn.h. */
#include "store/redis_conn.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "store/store_address.h"
#include "store/store_tls.h"

/* Bytes read from the socket per feed of the reader: a decision's reply is
 * tens of bytes, a burst of them a few kB. */
#define READ_CHUNK 16384

struct redis_conn {
	struct event_base *base;
	struct evdns_base *dns;
	struct store_address addr;
	SSL_CTX *tls;
	char tls_name[256];
	struct redis_conn_hooks hooks;
	struct event start; /* the first step runs from the loop, not from open */
	struct evdns_getaddrinfo_request *req;
	struct evutil_addrinfo *ai_list, *ai_next;
	struct sockaddr_un sun; /* a Unix socket's address */
	struct bufferevent *bev;
	SSL *ssl; /* owned by bev */
	redisReader *reader;
	bool connected;
	unsigned in_cb; /* callbacks on the stack: a free waits for them */
	bool dead;
	char reason[200]; /* the last attempt's failure */
};

static void destroy(struct redis_conn *c)
{
	if (c->start.ev_base != NULL)
		event_del(&c->start);
	if (c->req != NULL) {
		struct evdns_getaddrinfo_request *req = c->req;
		c->req = NULL;
		evdns_getaddrinfo_cancel(req); /* its callback sees EVUTIL_EAI_CANCEL */
	}
	if (c->bev != NULL)
		bufferevent_free(c->bev); /* closes the socket, frees the SSL */
	if (c->ai_list != NULL)
		evutil_freeaddrinfo(c->ai_list);
	if (c->reader != NULL)
		redisReaderFree(c->reader);
	free(c);
}

void redis_conn_free(struct redis_conn *c)
{
	if (c == NULL)
		return;
	memset(&c->hooks, 0, sizeof(c->hooks));
	if (c->in_cb > 0)
		c->dead = true;
	else
		destroy(c);
}

/* Leaves a callback: frees the connection when it was closed from inside. */
static bool leave(struct redis_conn *c)
{
	c->in_cb--;
	if (c->in_cb == 0 && c->dead) {
		destroy(c);
		return false;
	}
	return !c->dead;
}

/* The connection is over: tell the owner, then free it. */
static void fail(struct redis_conn *c, bool refused)
{
	if (c->hooks.down != NULL)
		c->hooks.down(c->hooks.arg, c->reason, refused);
	memset(&c->hooks, 0, sizeof(c->hooks));
	c->dead = true;
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct redis_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char buf[READ_CHUNK];
	c->in_cb++;
	while (!c->dead && evbuffer_get_length(in) > 0) {
		int n = evbuffer_remove(in, buf, sizeof(buf));
		if (n <= 0 || redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
			snprintf(c->reason, sizeof(c->reason), "protocol error");
			fail(c, false);
			break;
		}
		void *reply = NULL;
		while (!c->dead) {
			if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
				snprintf(c->reason, sizeof(c->reason), "protocol error (%s)",
				         c->reader->errstr);
				fail(c, false);
				break;
			}
			if (reply == NULL)
				break;
			if (c->hooks.reply != NULL)
				c->hooks.reply(c->hooks.arg, reply);
			freeReplyObject(reply);
		}
	}
	leave(c);
}

static void try_next(struct redis_conn *c);

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct redis_conn *c = arg;
	c->in_cb++;
	if (what & BEV_EVENT_CONNECTED) {
		c->connected = true;
		evutil_socket_t fd = bufferevent_getfd(bev);
		int one = 1;
		if (!c->addr.unix_socket)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (c->hooks.up != NULL)
			c->hooks.up(c->hooks.arg);
		leave(c);
		return;
	}
	bool refused = false;
	int e = EVUTIL_SOCKET_ERROR();
	if (c->ssl != NULL && !c->connected) {
		refused = store_tls_failure(c->ssl, bufferevent_get_openssl_error(bev), c->reason,
		                            sizeof(c->reason));
		if (!refused && (what & BEV_EVENT_EOF))
			snprintf(c->reason, sizeof(c->reason), "TLS: closed during the handshake");
	} else if (what & BEV_EVENT_EOF) {
		snprintf(c->reason, sizeof(c->reason), "closed by the server");
	} else {
		snprintf(c->reason, sizeof(c->reason), "%s", evutil_socket_error_to_string(e));
	}
	if (!c->connected && !refused && c->ai_next != NULL) {
		bufferevent_free(c->bev); /* the next address of the name */
		c->bev = NULL;
		c->ssl = NULL;
		try_next(c);
	} else {
		fail(c, refused);
	}
	leave(c);
}

/* Connects a fresh bufferevent to one address; false when it cannot start. */
static bool connect_to(struct redis_conn *c, const struct sockaddr *sa, int len)
{
	if (c->tls != NULL) {
		c->ssl = store_tls_ssl(c->tls, c->tls_name);
		if (c->ssl == NULL) {
			snprintf(c->reason, sizeof(c->reason), "TLS: cannot set up '%.120s'",
			         c->tls_name);
			return false;
		}
		c->bev = bufferevent_openssl_socket_new(
		    c->base, -1, c->ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (c->bev == NULL) {
			SSL_free(c->ssl);
			c->ssl = NULL;
		} else {
			/* Redis closes without a close_notify: that is an end, not an attack. */
			bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
		}
	} else {
		c->bev = bufferevent_socket_new(c->base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (c->bev == NULL) {
		snprintf(c->reason, sizeof(c->reason), "out of memory");
		return false;
	}
	bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, sa, len) != 0) {
		snprintf(c->reason, sizeof(c->reason), "cannot connect (%s)",
		         evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		bufferevent_free(c->bev);
		c->bev = NULL;
		c->ssl = NULL;
		return false;
	}
	return true;
}

/* The next address of the name, until one starts connecting. */
static void try_next(struct redis_conn *c)
{
	while (c->ai_next != NULL) {
		struct evutil_addrinfo *ai = c->ai_next;
		c->ai_next = ai->ai_next;
		if (connect_to(c, ai->ai_addr, (int)ai->ai_addrlen))
			return;
	}
	fail(c, false);
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	if (result == EVUTIL_EAI_CANCEL)
		return; /* freed: c is gone or going */
	struct redis_conn *c = arg;
	c->req = NULL;
	c->in_cb++;
	if (result != 0 || res == NULL) {
		snprintf(c->reason, sizeof(c->reason), "cannot resolve '%.120s' (%s)", c->addr.host,
		         evutil_gai_strerror(result));
		if (res != NULL)
			evutil_freeaddrinfo(res);
		fail(c, false);
	} else {
		c->ai_list = c->ai_next = res;
		try_next(c);
	}
	leave(c);
}

static void on_start(evutil_socket_t fd, short what, void *arg)
{
	struct redis_conn *c = arg;
	(void)fd;
	(void)what;
	c->in_cb++;
	if (c->addr.unix_socket) {
		c->sun.sun_family = AF_UNIX;
		memcpy(c->sun.sun_path, c->addr.path, strlen(c->addr.path) + 1);
		if (!connect_to(c, (const struct sockaddr *)&c->sun, (int)sizeof(c->sun)))
			fail(c, false);
	} else {
		/* evdns answers IP literals and /etc/hosts names at once (perhaps
		 * from inside this call), others over the network: the loop runs. */
		struct evutil_addrinfo hints;
		char port[8];
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_protocol = IPPROTO_TCP;
		hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
		snprintf(port, sizeof(port), "%u", c->addr.port);
		struct evdns_getaddrinfo_request *req =
		    evdns_getaddrinfo(c->dns, c->addr.host, port, &hints, on_resolved, c);
		if (!c->dead && c->bev == NULL && c->ai_list == NULL && !c->connected)
			c->req = req; /* still pending: NULL once answered */
	}
	leave(c);
}

struct redis_conn *redis_conn_open(struct event_base *base, struct evdns_base *dns,
                                   const struct store_address *addr, SSL_CTX *tls,
                                   const char *tls_name, const struct redis_conn_hooks *hooks)
{
	struct redis_conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->base = base;
	c->dns = dns;
	c->addr = *addr;
	c->tls = tls;
	snprintf(c->tls_name, sizeof(c->tls_name), "%s", tls_name != NULL ? tls_name : "");
	c->hooks = *hooks;
	c->reader = redisReaderCreate();
	if (c->reader == NULL || evtimer_assign(&c->start, base, on_start, c) != 0) {
		if (c->reader != NULL)
			redisReaderFree(c->reader);
		free(c);
		return NULL;
	}
	struct timeval now = {0, 0};
	evtimer_add(&c->start, &now);
	return c;
}

bool redis_conn_send(struct redis_conn *c, int argc, const char **argv, const size_t *lens)
{
	if (c == NULL || c->dead || c->bev == NULL)
		return false;
	char *cmd = NULL;
	int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
	if (len < 0 || cmd == NULL)
		return false;
	int rc = bufferevent_write(c->bev, cmd, (size_t)len);
	free(cmd);
	return rc == 0;
}
