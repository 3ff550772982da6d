/* SPDX-License-Identifier: Apache-2.0 */
/* ca: made once in a state directory (key 0600) and loaded again; a leaf per
 * host that verifies against the CA for that name only, made once; a
 * configured pair that does not match is refused. Files in a temporary
 * directory; no network. (Which directory: test_state_dir.c.) */
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ca.h"
#include "unit.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/pacerd-unit-ca-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static int verify(X509 *ca, X509 *leaf, const char *host)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_add_cert(st, ca);
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_STORE_CTX_init(ctx, st, leaf, NULL);
	X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER);
	if (host[0] == '[' || (host[0] >= '0' && host[0] <= '9'))
		X509_VERIFY_PARAM_set1_ip_asc(p, host[0] == '[' ? "::1" : host);
	else
		X509_VERIFY_PARAM_set1_host(p, host, 0);
	int ok = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

START_TEST(made_once_then_loaded)
{
	char sub[128], path[192];
	snprintf(sub, sizeof(sub), "%s/a/b", dir);
	bool created = false;
	char err[512];
	struct ca *ca = ca_open("", "", sub, &created, err, sizeof(err));
	ck_assert_msg(ca != NULL, "%s", err);
	ck_assert(created);
	struct stat st;
	snprintf(path, sizeof(path), "%s/ca.key", sub);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(stat(sub, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(X509_check_ca(ca_cert(ca)), 1);
	char fp1[96], fp2[96];
	ca_fingerprint(ca, fp1);
	ck_assert_uint_eq(strlen(fp1), 95);
	ca_free(ca);
	ca = ca_open(NULL, NULL, sub, &created, err, sizeof(err));
	ck_assert_msg(ca != NULL, "%s", err);
	ck_assert(!created);
	ca_fingerprint(ca, fp2);
	ck_assert_str_eq(fp1, fp2);
	ca_free(ca);
	/* A key others can read is refused, as ssh refuses one. */
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_ptr_null(ca_open(NULL, NULL, sub, NULL, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "chmod 600"));
	ck_assert_ptr_null(strstr(err, "PRIVATE"));
}
END_TEST

START_TEST(leaves_verify_for_their_host_only)
{
	char err[512];
	struct ca *ca = ca_open(NULL, NULL, dir, NULL, err, sizeof(err));
	ck_assert_msg(ca != NULL, "%s", err);
	X509 *a = ca_leaf(ca, "api.openai.com");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(ca_leaf(ca, "api.openai.com"), a); /* made once */
	ck_assert_uint_eq(ca_leaves(ca), 1);
	ck_assert_int_eq(verify(ca_cert(ca), a, "api.openai.com"), 1);
	ck_assert_int_ne(verify(ca_cert(ca), a, "api.anthropic.com"), 1);
	ck_assert_int_eq(X509_check_ca(a), 0);
	ck_assert_int_eq(X509_check_private_key(a, ca_leaf_key(ca)), 1);
	X509 *ip = ca_leaf(ca, "127.0.0.1");
	ck_assert_int_eq(verify(ca_cert(ca), ip, "127.0.0.1"), 1);
	X509 *v6 = ca_leaf(ca, "[::1]");
	ck_assert_int_eq(verify(ca_cert(ca), v6, "[::1]"), 1);
	ck_assert_uint_eq(ca_leaves(ca), 3);
	/* Not past the CA's own end. */
	ck_assert_int_le(ASN1_TIME_compare(X509_get0_notAfter(a), X509_get0_notAfter(ca_cert(ca))),
	                 0);
	ca_free(ca);
}
END_TEST

START_TEST(configured_pair_must_match)
{
	char d1[128], d2[128], cert[192], key[192], err[512];
	snprintf(d1, sizeof(d1), "%s/one", dir);
	snprintf(d2, sizeof(d2), "%s/two", dir);
	ca_free(ca_open(NULL, NULL, d1, NULL, err, sizeof(err)));
	ca_free(ca_open(NULL, NULL, d2, NULL, err, sizeof(err)));
	snprintf(cert, sizeof(cert), "%s/ca.pem", d1);
	snprintf(key, sizeof(key), "%s/ca.key", d1);
	struct ca *ca = ca_open(cert, key, NULL, NULL, err, sizeof(err));
	ck_assert_msg(ca != NULL, "%s", err);
	ck_assert_str_eq(ca_cert_path(ca), cert);
	ca_free(ca);
	snprintf(key, sizeof(key), "%s/ca.key", d2);
	ck_assert_ptr_null(ca_open(cert, key, NULL, NULL, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "does not belong"));
	ck_assert_ptr_null(ca_open(cert, "/nonexistent/key", NULL, NULL, err, sizeof(err)));
	ck_assert_ptr_null(ca_open(key, key, NULL, NULL, err, sizeof(err))); /* a key for a cert */
	ck_assert_ptr_null(ca_open(NULL, NULL, "", NULL, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "state_dir"));
}
END_TEST

START_TEST(bundle_is_store_then_ca)
{
	char store[128], out[128], err[512];
	snprintf(store, sizeof(store), "%s/store.pem", dir);
	snprintf(out, sizeof(out), "%s/bundle.pem", dir);
	FILE *f = fopen(store, "w");
	fputs("SYSTEM ROOTS", f); /* no final newline */
	fclose(f);
	struct ca *ca = ca_open(NULL, NULL, dir, NULL, err, sizeof(err));
	ck_assert_int_eq(ca_write_bundle(ca, store, out, err, sizeof(err)), 0);
	f = fopen(out, "r");
	char buf[4096];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	ck_assert_ptr_eq(strstr(buf, "SYSTEM ROOTS\n# pacerd CA\n-----BEGIN CERTIFICATE-----"),
	                 buf);
	ck_assert_ptr_null(strstr(buf, "PRIVATE KEY"));
	ca_free(ca);
}
END_TEST

static Suite *ca_suite(void)
{
	Suite *s = suite_create("ca");
	TCase *c = tcase_create("core");
	tcase_add_checked_fixture(c, setup, teardown);
	tcase_set_timeout(c, 30);
	tcase_add_test(c, made_once_then_loaded);
	tcase_add_test(c, leaves_verify_for_their_host_only);
	tcase_add_test(c, configured_pair_must_match);
	tcase_add_test(c, bundle_is_store_then_ca);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("ca", ca_suite)
