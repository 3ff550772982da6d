/* SPDX-License-Identifier: Apache-2.0 */
/* store_tls — OpenSSL settings of the connection to Redis (store.redis.tls):
 * the peer is always verified (the CA file, or the system's store), against
 * the server name (tls.server_name, or the host of the address: a DNS name
 * or an IP address), with an optional client certificate. The bytes are
 * carried by libevent's bufferevent_openssl (redis_conn.c). */
#ifndef PACERD_STORE_TLS_H
#define PACERD_STORE_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>

struct config; /* core/config.h */

/* NULL with err set when a file cannot be used (the CA, the certificate, its
 * key, or a key that is not the certificate's). */
SSL_CTX *store_tls_ctx(const struct config *cfg, char *err, size_t errlen);

/* One connection's SSL, checking the peer against `name` (an IP literal is
 * checked as an address, a name as a DNS name and sent as SNI). */
SSL *store_tls_ssl(SSL_CTX *ctx, const char *name);

/* Why a handshake failed, for the log: the verification's verdict when there
 * was one ("certificate verify failed: ..."), else OpenSSL's last error.
 * Returns true when the peer's certificate was refused. */
bool store_tls_failure(SSL *ssl, unsigned long lib_err, char *out, size_t outlen);

#endif
