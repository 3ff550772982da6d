/* SPDX-License-Identifier: Apache-2.0 */
/* redis_conn — one connection to Redis: the bytes over a libevent
 * bufferevent, plain or TLS (bufferevent_openssl), to a host name resolved
 * with evdns (never a blocking resolver: hiredis 0.14's connect calls
 * getaddrinfo), an IP or a Unix socket; commands formatted and replies read
 * by hiredis (redisFormatCommandArgv, redisReader). It knows nothing of what
 * the commands mean: store.c matches each reply to its command, in order.
 *
 * A name is resolved again at every open, so a failover that moves the name
 * is followed at the next reconnect; its addresses are tried in turn. */
#ifndef PACERD_REDIS_CONN_H
#define PACERD_REDIS_CONN_H

#include <hiredis.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>

struct event_base; /* event2/event.h */
struct evdns_base; /* event2/dns.h */
struct store_address;

struct redis_conn;

struct redis_conn_hooks {
	/* Connected (and the TLS handshake done): commands may go. */
	void (*up)(void *arg);
	/* One reply, in the order of the commands; freed after the call. */
	void (*reply)(void *arg, redisReply *r);
	/* The connection failed or ended (reason for the log; refused: the
	 * server's certificate was refused, a setting to fix, not a state to
	 * wait out). The connection frees itself after this call: forget it. */
	void (*down)(void *arg, const char *reason, bool refused);
	void *arg;
};

/* Starts connecting to `addr` (resolving its host on `dns`); over TLS when
 * tls is not NULL, the server checked against tls_name. NULL when out of
 * memory. Callbacks come from the loop, never from inside this call. */
struct redis_conn *redis_conn_open(struct event_base *base, struct evdns_base *dns,
                                   const struct store_address *addr, SSL_CTX *tls,
                                   const char *tls_name, const struct redis_conn_hooks *hooks);

/* Queues one command (its bytes copied into the output buffer). false when
 * it could not be formatted or queued. */
bool redis_conn_send(struct redis_conn *c, int argc, const char **argv, const size_t *lens);

/* Closes without any further callback. Safe from inside a callback. */
void redis_conn_free(struct redis_conn *c);

#endif
