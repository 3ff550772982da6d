/* SPDX-License-Identifier: Apache-2.0 */
/* tls — server-side TLS for the tunnels pacerd terminates (CONNECT to a
 * provider's host), on OpenSSL's libssl over memory BIOs.
 *
 * Why memory BIOs rather than SSL_set_fd: httpd keeps its own socket I/O (one
 * persistent read event, writev of one output buffer per loop turn), and a
 * client may send its ClientHello in the same packet as the CONNECT head; with
 * BIOs the bytes httpd already read are simply handed over, every byte the
 * library holds is visible (no data hidden from the event loop), and the
 * ciphertext goes out through the same output path as plain answers.
 *
 * The context: TLS 1.2 and 1.3 only, no renegotiation, no session tickets kept
 * across restarts (stateless tickets with a key of this process), ALPN offers
 * http/1.1 alone (pacerd's HTTP layer speaks HTTP/1.1), and an SNI that names
 * another host than the one the tunnel was opened for ends the handshake with
 * an unrecognized_name alert: a tunnel is routed by its CONNECT authority, and
 * a certificate is made for that name only. */
#ifndef PACERD_TLS_H
#define PACERD_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/buffer.h>
#include <openssl/ssl.h>

enum tls_status {
	TLS_DATA,      /* plaintext returned */
	TLS_WANT,      /* nothing more until more ciphertext arrives */
	TLS_CLOSED,    /* the client sent close_notify */
	TLS_FAILED,    /* a handshake or record error: close the connection */
	TLS_PLAINTEXT, /* the client spoke HTTP where a ClientHello belonged */
};

/* The context every terminated tunnel shares. NULL with err set. */
SSL_CTX *tls_server_ctx_new(char *err, size_t errlen);

/* One connection's TLS: a server SSL with cert and key (copied references),
 * the issuing CA sent along with it, reading from a memory BIO. NULL when out
 * of memory. */
SSL *tls_conn_new(SSL_CTX *ctx, X509 *cert, EVP_PKEY *key, X509 *ca);
/* The tunnel's host, which an SNI must match; kept by the caller as long as
 * the SSL lives. */
void tls_conn_expect_host(SSL *ssl, const char *host);
/* Ciphertext from the client. -1 when out of memory. */
int tls_conn_feed(SSL *ssl, const void *data, size_t len);
/* Runs the handshake as far as the input allows, then returns plaintext
 * (at most cap bytes) in buf: TLS_DATA with *n set, or another status.
 * *handshake_done is set when the handshake completed in this call. */
enum tls_status tls_conn_read(SSL *ssl, char *buf, size_t cap, size_t *n, bool *handshake_done);
/* Encrypts len bytes (the handshake must be done). -1 on failure. */
int tls_conn_write(SSL *ssl, const void *data, size_t len);
/* Sends close_notify (queued as ciphertext). */
void tls_conn_close_notify(SSL *ssl);
/* Moves the ciphertext the library produced into out. */
void tls_conn_drain(SSL *ssl, struct evbuffer *out);
/* Bytes of ciphertext or plaintext the library still holds for reading. */
bool tls_conn_pending(SSL *ssl);
bool tls_conn_established(SSL *ssl);
/* Why the last TLS_FAILED happened, for a log line ("no shared cipher", …). */
const char *tls_conn_error(void);

#endif
