/* SPDX-License-Identifier: Apache-2.0 */
/* tls — server-side TLS over memory BIOs. See tls.h. */
#include "http/tls.h"

#include <openssl/err.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static _Thread_local char last_error[128];

static void note_error(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
	snprintf(last_error, sizeof(last_error), "%s", r != NULL ? r : "handshake failed");
	ERR_clear_error();
}

const char *tls_conn_error(void)
{
	return last_error;
}

/* An SNI other than the tunnel's host is refused (see tls.h); no SNI at all
 * (an IP literal, an old client) takes the tunnel's certificate. */
static int on_servername(SSL *ssl, int *alert, void *arg)
{
	(void)arg;
	const char *want = SSL_get_app_data(ssl);
	const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	if (sni == NULL || want == NULL)
		return SSL_TLSEXT_ERR_OK;
	if (strcasecmp(sni, want) == 0)
		return SSL_TLSEXT_ERR_OK;
	*alert = SSL_AD_UNRECOGNIZED_NAME;
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char ours[] = "\x08http/1.1";
	(void)ssl;
	(void)arg;
	unsigned char *sel = NULL;
	if (SSL_select_next_proto(&sel, outlen, ours, sizeof(ours) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK; /* no ALPN: HTTP/1.1 is still what it gets */
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *tls_server_ctx_new(char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL) {
		snprintf(err, errlen, "SSL_CTX_new failed");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
	                             SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
	SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
	return ctx;
}

SSL *tls_conn_new(SSL_CTX *ctx, X509 *cert, EVP_PKEY *key, X509 *ca)
{
	SSL *ssl = SSL_new(ctx);
	if (ssl == NULL)
		return NULL;
	BIO *rbio = BIO_new(BIO_s_mem());
	BIO *wbio = BIO_new(BIO_s_mem());
	if (rbio == NULL || wbio == NULL || SSL_use_certificate(ssl, cert) != 1 ||
	    SSL_use_PrivateKey(ssl, key) != 1 ||
	    (ca != NULL && SSL_add1_chain_cert(ssl, ca) != 1)) {
		BIO_free(rbio);
		BIO_free(wbio);
		SSL_free(ssl);
		ERR_clear_error();
		return NULL;
	}
	/* An empty read BIO says "retry", not "end of file". */
	BIO_set_mem_eof_return(rbio, -1);
	SSL_set_bio(ssl, rbio, wbio);
	SSL_set_accept_state(ssl);
	return ssl;
}

void tls_conn_expect_host(SSL *ssl, const char *host)
{
	SSL_set_app_data(ssl, (void *)host);
}

int tls_conn_feed(SSL *ssl, const void *data, size_t len)
{
	if (len == 0)
		return 0;
	return BIO_write(SSL_get_rbio(ssl), data, (int)len) == (int)len ? 0 : -1;
}

/* A first record that reads as an HTTP method: a client that skipped TLS. */
static bool plaintext_error(void)
{
	unsigned long e = ERR_peek_last_error();
	return ERR_GET_LIB(e) == ERR_LIB_SSL && (ERR_GET_REASON(e) == SSL_R_HTTP_REQUEST ||
	                                         ERR_GET_REASON(e) == SSL_R_HTTPS_PROXY_REQUEST);
}

enum tls_status tls_conn_read(SSL *ssl, char *buf, size_t cap, size_t *n, bool *handshake_done)
{
	*n = 0;
	*handshake_done = false;
	if (!SSL_is_init_finished(ssl)) {
		int r = SSL_do_handshake(ssl);
		if (r != 1) {
			int e = SSL_get_error(ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return TLS_WANT;
			if (plaintext_error()) {
				ERR_clear_error();
				return TLS_PLAINTEXT;
			}
			note_error();
			return TLS_FAILED;
		}
		*handshake_done = true;
	}
	size_t got = 0;
	int r = SSL_read_ex(ssl, buf, cap, &got);
	if (r == 1) {
		*n = got;
		return TLS_DATA;
	}
	int e = SSL_get_error(ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return TLS_WANT;
	if (e == SSL_ERROR_ZERO_RETURN)
		return TLS_CLOSED;
	note_error();
	return TLS_FAILED;
}

int tls_conn_write(SSL *ssl, const void *data, size_t len)
{
	size_t done = 0;
	if (len == 0)
		return 0;
	if (SSL_write_ex(ssl, data, len, &done) != 1 || done != len) {
		note_error();
		return -1;
	}
	return 0;
}

void tls_conn_close_notify(SSL *ssl)
{
	if (SSL_is_init_finished(ssl))
		SSL_shutdown(ssl);
	ERR_clear_error();
}

void tls_conn_drain(SSL *ssl, struct evbuffer *out)
{
	BIO *w = SSL_get_wbio(ssl);
	char *data = NULL;
	long n = BIO_get_mem_data(w, &data);
	if (n > 0) {
		evbuffer_add(out, data, (size_t)n);
		(void)BIO_reset(w);
	}
}

bool tls_conn_pending(SSL *ssl)
{
	return SSL_has_pending(ssl) == 1 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0;
}

bool tls_conn_established(SSL *ssl)
{
	return SSL_is_init_finished(ssl);
}
