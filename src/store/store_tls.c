/* SPDX-License-Identifier: Apache-2.0 */
/* store_tls — TLS to Redis; see store_tls.h. */
#include "store/store_tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"

static void ssl_error(const char *what, const char *file, char *err, size_t errlen)
{
	char e[160];
	ERR_error_string_n(ERR_get_error(), e, sizeof(e));
	snprintf(err, errlen, "store.redis.tls: %s '%s': %s", what, file, e);
	ERR_clear_error();
}

SSL_CTX *store_tls_ctx(const struct config *cfg, char *err, size_t errlen)
{
	const char *ca = cfg->store.redis.tls.ca_file;
	const char *cert = cfg->store.redis.tls.cert_file;
	const char *key = cfg->store.redis.tls.key_file;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL) {
		snprintf(err, errlen, "store.redis.tls: cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (ca[0] != '\0' ? SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1
	                  : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		ssl_error("cannot load the CA file", ca[0] != '\0' ? ca : "(system)", err, errlen);
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (cert[0] != '\0') {
		if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
			ssl_error("cannot load the client certificate", cert, err, errlen);
			SSL_CTX_free(ctx);
			return NULL;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_check_private_key(ctx) != 1) {
			ssl_error("cannot use the client key", key, err, errlen);
			SSL_CTX_free(ctx);
			return NULL;
		}
	}
	return ctx;
}

SSL *store_tls_ssl(SSL_CTX *ctx, const char *name)
{
	SSL *ssl = SSL_new(ctx);
	if (ssl == NULL)
		return NULL;
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
	int ok;
	if (is_ip) {
		ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
	} else {
		/* No partial wildcards ("r*.example.com"): what browsers accept. */
		SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		ok = SSL_set1_host(ssl, name) == 1 && SSL_set_tlsext_host_name(ssl, name) == 1;
	}
	if (!ok) {
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

bool store_tls_failure(SSL *ssl, unsigned long lib_err, char *out, size_t outlen)
{
	long v = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (v != X509_V_OK) {
		snprintf(out, outlen, "TLS: certificate verify failed: %s",
		         X509_verify_cert_error_string(v));
		return true;
	}
	if (lib_err != 0) {
		char e[160];
		ERR_error_string_n(lib_err, e, sizeof(e));
		snprintf(out, outlen, "TLS: %s", e);
		return false;
	}
	snprintf(out, outlen, "TLS: handshake failed");
	return false;
}
