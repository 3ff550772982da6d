/* SPDX-License-Identifier: Apache-2.0 */
/* tls: the server side over memory BIOs, driven by an OpenSSL client in the
 * same process (no sockets): a handshake with the SNI of the tunnel's host
 * and ALPN http/1.1, data both ways, close_notify; an SNI for another host;
 * plain HTTP where a ClientHello belongs; garbage. */
#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ca.h"
#include "http/tls.h"
#include "unit.h"

static struct ca *ca;
static SSL_CTX *sctx, *cctx;
static char dir[64];

static void setup(void)
{
	char err[512];
	snprintf(dir, sizeof(dir), "/tmp/pacerd-unit-tls-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ca = ca_open(NULL, NULL, dir, NULL, err, sizeof(err));
	ck_assert_msg(ca != NULL, "%s", err);
	sctx = tls_server_ctx_new(err, sizeof(err));
	ck_assert_ptr_nonnull(sctx);
	cctx = SSL_CTX_new(TLS_client_method());
	X509_STORE_add_cert(SSL_CTX_get_cert_store(cctx), ca_cert(ca));
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
}

static void teardown(void)
{
	char cmd[128];
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	ca_free(ca);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A client over memory BIOs: what it writes is read from cw, what it reads is
 * written into cr. */
struct client {
	SSL *ssl;
	BIO *cr, *cw;
};

static void client_new(struct client *c, const char *sni, const char *verify_host)
{
	c->ssl = SSL_new(cctx);
	c->cr = BIO_new(BIO_s_mem());
	c->cw = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(c->cr, -1);
	SSL_set_bio(c->ssl, c->cr, c->cw);
	SSL_set_connect_state(c->ssl);
	if (sni != NULL)
		SSL_set_tlsext_host_name(c->ssl, sni);
	SSL_set1_host(c->ssl, verify_host);
	static const unsigned char alpn[] = "\x02h2\x08http/1.1";
	SSL_set_alpn_protos(c->ssl, alpn, sizeof(alpn) - 1);
}

/* Moves the client's output into the server and the server's into the client. */
static void pump(struct client *c, SSL *s, struct evbuffer *wire)
{
	char *data;
	long n = BIO_get_mem_data(c->cw, &data);
	if (n > 0) {
		ck_assert_int_eq(tls_conn_feed(s, data, (size_t)n), 0);
		(void)BIO_reset(c->cw);
	}
	tls_conn_drain(s, wire);
	size_t len = evbuffer_get_length(wire);
	if (len > 0) {
		BIO_write(c->cr, evbuffer_pullup(wire, -1), (int)len);
		evbuffer_drain(wire, len);
	}
}

static SSL *server_for(const char *host)
{
	SSL *s = tls_conn_new(sctx, ca_leaf(ca, host), ca_leaf_key(ca), ca_cert(ca));
	ck_assert_ptr_nonnull(s);
	tls_conn_expect_host(s, host);
	return s;
}

START_TEST(handshake_data_close)
{
	static const char host[] = "api.openai.com";
	SSL *s = server_for(host);
	struct client c;
	client_new(&c, host, host);
	struct evbuffer *wire = evbuffer_new();
	char buf[256];
	size_t n = 0;
	bool done = false, any_done = false;
	enum tls_status st = TLS_WANT;
	for (int i = 0; i < 10 && !SSL_is_init_finished(c.ssl); i++) {
		SSL_do_handshake(c.ssl);
		pump(&c, s, wire);
		st = tls_conn_read(s, buf, sizeof(buf), &n, &done);
		any_done |= done;
		ck_assert_int_eq(st, TLS_WANT);
		pump(&c, s, wire);
	}
	ck_assert(SSL_is_init_finished(c.ssl));
	ck_assert_int_eq(SSL_get_verify_result(c.ssl), X509_V_OK);
	const unsigned char *proto;
	unsigned plen;
	SSL_get0_alpn_selected(c.ssl, &proto, &plen);
	ck_assert_uint_eq(plen, 8);
	ck_assert_int_eq(memcmp(proto, "http/1.1", 8), 0);
	/* Data from the client: the server's handshake completes on it (TLS 1.3). */
	ck_assert_int_eq(SSL_write(c.ssl, "GET / HTTP/1.1\r\n\r\n", 18), 18);
	pump(&c, s, wire);
	st = tls_conn_read(s, buf, sizeof(buf), &n, &done);
	any_done |= done;
	ck_assert(any_done);
	ck_assert(tls_conn_established(s));
	ck_assert_int_eq(st, TLS_DATA);
	ck_assert_uint_eq(n, 18);
	ck_assert_int_eq(memcmp(buf, "GET / HTTP/1.1\r\n\r\n", 18), 0);
	ck_assert_int_eq(tls_conn_read(s, buf, sizeof(buf), &n, &done), TLS_WANT);
	/* And back. */
	ck_assert_int_eq(tls_conn_write(s, "HTTP/1.1 200 OK\r\n\r\n", 19), 0);
	pump(&c, s, wire);
	ck_assert_int_eq(SSL_read(c.ssl, buf, sizeof(buf)), 19);
	/* close_notify from the client. */
	SSL_shutdown(c.ssl);
	pump(&c, s, wire);
	ck_assert_int_eq(tls_conn_read(s, buf, sizeof(buf), &n, &done), TLS_CLOSED);
	tls_conn_close_notify(s);
	evbuffer_free(wire);
	SSL_free(c.ssl);
	SSL_free(s);
}
END_TEST

START_TEST(sni_for_another_host_fails)
{
	SSL *s = server_for("api.openai.com");
	struct client c;
	client_new(&c, "api.anthropic.com", "api.anthropic.com");
	struct evbuffer *wire = evbuffer_new();
	char buf[64];
	size_t n;
	bool done;
	SSL_do_handshake(c.ssl);
	pump(&c, s, wire);
	ck_assert_int_eq(tls_conn_read(s, buf, sizeof(buf), &n, &done), TLS_FAILED);
	ck_assert(!tls_conn_established(s));
	pump(&c, s, wire); /* the alert reaches the client */
	ck_assert_int_le(SSL_do_handshake(c.ssl), 0);
	ERR_clear_error();
	evbuffer_free(wire);
	SSL_free(c.ssl);
	SSL_free(s);
}
END_TEST

START_TEST(plain_http_and_garbage)
{
	char buf[64];
	size_t n;
	bool done;
	SSL *s = server_for("api.openai.com");
	static const char get[] = "GET /v1/models HTTP/1.1\r\nHost: api.openai.com\r\n\r\n";
	ck_assert_int_eq(tls_conn_feed(s, get, sizeof(get) - 1), 0);
	ck_assert_int_eq(tls_conn_read(s, buf, sizeof(buf), &n, &done), TLS_PLAINTEXT);
	SSL_free(s);
	s = server_for("api.openai.com");
	char junk[300];
	memset(junk, 0x41, sizeof(junk));
	ck_assert_int_eq(tls_conn_feed(s, junk, sizeof(junk)), 0);
	ck_assert_int_eq(tls_conn_read(s, buf, sizeof(buf), &n, &done), TLS_FAILED);
	ck_assert_str_ne(tls_conn_error(), "");
	SSL_free(s);
	/* Half a record header: waits for more. */
	s = server_for("api.openai.com");
	static const unsigned char half[] = {0x16, 0x03, 0x01};
	ck_assert_int_eq(tls_conn_feed(s, half, sizeof(half)), 0);
	ck_assert_int_eq(tls_conn_read(s, buf, sizeof(buf), &n, &done), TLS_WANT);
	ck_assert(tls_conn_pending(s));
	SSL_free(s);
}
END_TEST

static Suite *tls_suite(void)
{
	Suite *s = suite_create("tls");
	TCase *c = tcase_create("core");
	tcase_add_checked_fixture(c, setup, teardown);
	tcase_set_timeout(c, 30);
	tcase_add_test(c, handshake_data_close);
	tcase_add_test(c, sni_for_another_host_fails);
	tcase_add_test(c, plain_http_and_garbage);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("tls", tls_suite)
