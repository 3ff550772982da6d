/* SPDX-License-Identifier: Apache-2.0 */
/* ca — pacerd's CA and its leaf certificates. See ca.h. */
#include "core/ca.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/certcache.h"
#include "core/config.h"
#include "core/state_dir.h"

#define CA_DAYS 3650
/* Apple's and Chrome's ceiling for a server certificate's life is 398 days. */
#define LEAF_DAYS 397
#define BACKDATE_S 3600 /* a client whose clock is a little behind still accepts */

struct ca {
	X509 *cert;
	EVP_PKEY *key;
	EVP_PKEY *leaf_key;
	char cert_path[PATH_MAX];
	char key_path[PATH_MAX];
	struct certcache leaves;
};

static void set_ossl_err(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";
	if (e != 0)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	snprintf(err, errlen, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

static EVP_PKEY *make_p256(void)
{
	return EVP_EC_gen("P-256");
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (ext == NULL)
		return -1;
	int ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

static int random_serial(X509 *cert)
{
	unsigned char b[16];
	if (RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f; /* positive, as RFC 5280 asks */
	BIGNUM *bn = BN_bin2bn(b, sizeof(b), NULL);
	if (bn == NULL)
		return -1;
	int ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
	BN_free(bn);
	return ok ? 0 : -1;
}

/* The fields every certificate here shares: version 3, a random serial,
 * validity from an hour ago for `days`, the subject's CN. */
static X509 *cert_base(EVP_PKEY *pub, const char *cn, long days)
{
	X509 *cert = X509_new();
	if (cert == NULL)
		return NULL;
	X509_NAME *name = X509_get_subject_name(cert);
	if (X509_set_version(cert, 2) != 1 || random_serial(cert) != 0 ||
	    X509_gmtime_adj(X509_getm_notBefore(cert), -BACKDATE_S) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400L) == NULL ||
	    X509_set_pubkey(cert, pub) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
	                               0) != 1) {
		X509_free(cert);
		return NULL;
	}
	return cert;
}

static X509 *make_ca_cert(EVP_PKEY *key)
{
	char cn[128], host[64] = "";
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	snprintf(cn, sizeof(cn), "pacerd CA (%s)", host[0] ? host : "local");
	X509 *cert = cert_base(key, cn, CA_DAYS);
	if (cert == NULL)
		return NULL;
	X509_NAME *name = X509_get_subject_name(cert);
	if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"pacerd",
	                               -1, -1, 0) != 1 ||
	    X509_set_issuer_name(cert, name) != 1 ||
	    add_ext(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") != 0 ||
	    add_ext(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign") != 0 ||
	    add_ext(cert, cert, NID_subject_key_identifier, "hash") != 0 ||
	    add_ext(cert, cert, NID_authority_key_identifier, "keyid:always") != 0 ||
	    X509_sign(cert, key, EVP_sha256()) == 0) {
		X509_free(cert);
		return NULL;
	}
	return cert;
}

/* Writes data to path through a temporary file in the same directory. */
static int write_file(const char *path, mode_t mode, int (*put)(FILE *, void *), void *arg,
                      char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd == -1) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	fchmod(fd, mode); /* whatever the umask said */
	FILE *f = fdopen(fd, "w");
	if (f == NULL) {
		close(fd);
		unlink(tmp);
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	int ok = put(f, arg) == 0;
	ok = fflush(f) == 0 && ok;
	ok = fsync(fileno(f)) == 0 && ok;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int put_key(FILE *f, void *arg)
{
	return PEM_write_PrivateKey(f, arg, NULL, NULL, 0, NULL, NULL) == 1 ? 0 : -1;
}

static int put_cert(FILE *f, void *arg)
{
	return PEM_write_X509(f, arg) == 1 ? 0 : -1;
}

static X509 *read_cert(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	X509 *c = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (c == NULL)
		set_ossl_err(err, errlen, "not a PEM certificate");
	return c;
}

/* The key's own errors are named, never its bytes. */
static EVP_PKEY *read_key(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
		fclose(f);
		snprintf(err, errlen,
		         "%s: the CA key is readable by others (mode %03o); chmod 600 it", path,
		         (unsigned)(st.st_mode & 0777));
		return NULL;
	}
	EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (k == NULL) {
		ERR_clear_error();
		snprintf(err, errlen, "%s: not a PEM private key (without a passphrase)", path);
	}
	return k;
}

static int check_ca(X509 *cert, EVP_PKEY *key, const char *cert_path, char *err, size_t errlen)
{
	if (X509_check_private_key(cert, key) != 1) {
		ERR_clear_error();
		snprintf(err, errlen, "%s: the CA key does not belong to this certificate",
		         cert_path);
		return -1;
	}
	if (X509_check_ca(cert) == 0) {
		snprintf(err, errlen, "%s: not a CA certificate (basicConstraints CA:TRUE)",
		         cert_path);
		return -1;
	}
	return 0;
}

static void x509_free_void(void *p)
{
	X509_free(p);
}

/* Loads the pair in the state directory, or makes it; under the lock. */
static int load_or_make(struct ca *ca, const char *dir, bool *created, char *err, size_t errlen)
{
	if (access(ca->cert_path, F_OK) == 0 || access(ca->key_path, F_OK) == 0) {
		if ((ca->cert = read_cert(ca->cert_path, err, errlen)) == NULL ||
		    (ca->key = read_key(ca->key_path, err, errlen)) == NULL)
			return -1;
		return 0;
	}
	if ((ca->key = make_p256()) == NULL || (ca->cert = make_ca_cert(ca->key)) == NULL) {
		set_ossl_err(err, errlen, "making the CA");
		return -1;
	}
	/* The key first: a certificate without its key would be an error at
	 * the next start, a key alone is made again. */
	if (write_file(ca->key_path, 0600, put_key, ca->key, err, errlen) != 0 ||
	    write_file(ca->cert_path, 0644, put_cert, ca->cert, err, errlen) != 0) {
		unlink(ca->key_path);
		return -1;
	}
	(void)dir;
	if (created != NULL)
		*created = true;
	return 0;
}

struct ca *ca_open(const char *cert_file, const char *key_file, const char *state_dir,
                   bool *created, char *err, size_t errlen)
{
	if (created != NULL)
		*created = false;
	struct ca *ca = calloc(1, sizeof(*ca));
	if (ca == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	certcache_init(&ca->leaves, CERTCACHE_MAX, x509_free_void);
	int rc = -1;
	if (cert_file != NULL && cert_file[0] != '\0') {
		snprintf(ca->cert_path, sizeof(ca->cert_path), "%s", cert_file);
		snprintf(ca->key_path, sizeof(ca->key_path), "%s", key_file ? key_file : "");
		if ((ca->cert = read_cert(cert_file, err, errlen)) != NULL &&
		    (ca->key = read_key(key_file, err, errlen)) != NULL)
			rc = 0;
	} else if (state_dir == NULL || state_dir[0] == '\0') {
		snprintf(err, errlen,
		         "no state directory for the CA: set state_dir (or STATE_DIRECTORY, "
		         "XDG_STATE_HOME, HOME), or forward.ca_cert and forward.ca_key");
	} else if (atomic_file_mkdir(state_dir, err, errlen) == 0) {
		snprintf(ca->cert_path, sizeof(ca->cert_path), "%s/ca.pem", state_dir);
		snprintf(ca->key_path, sizeof(ca->key_path), "%s/ca.key", state_dir);
		char lock[PATH_MAX];
		snprintf(lock, sizeof(lock), "%s/ca.lock", state_dir);
		int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (lfd == -1) {
			snprintf(err, errlen, "%s: %s", lock, strerror(errno));
		} else {
			/* At start only: another pacerd making the CA this
			 * millisecond is waited for, not raced. */
			if (flock(lfd, LOCK_EX) == 0)
				rc = load_or_make(ca, state_dir, created, err, errlen);
			else
				snprintf(err, errlen, "%s: %s", lock, strerror(errno));
			close(lfd);
		}
	}
	if (rc == 0 && check_ca(ca->cert, ca->key, ca->cert_path, err, errlen) != 0)
		rc = -1;
	if (rc == 0 && (ca->leaf_key = make_p256()) == NULL) {
		set_ossl_err(err, errlen, "making the leaf key");
		rc = -1;
	}
	if (rc != 0) {
		ca_free(ca);
		return NULL;
	}
	return ca;
}

struct ca *ca_open_config(const struct config *cfg, char *const *env, bool *created,
                          char *state_dir, size_t state_dir_len, char *err, size_t errlen)
{
	char dir[PATH_MAX] = "";
	if (cfg->forward.ca_cert[0] == '\0' &&
	    state_dir_resolve(cfg->state_dir, env, STATE_DIR_VAR_LIB, dir, sizeof(dir)) ==
	        STATE_DIR_NONE)
		(void)state_dir_user(env, dir, sizeof(dir));
	if (state_dir != NULL && state_dir_len > 0)
		snprintf(state_dir, state_dir_len, "%s", dir);
	return ca_open(cfg->forward.ca_cert, cfg->forward.ca_key, dir, created, err, errlen);
}

void ca_free(struct ca *ca)
{
	if (ca == NULL)
		return;
	certcache_clear(&ca->leaves);
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	free(ca);
}

const char *ca_cert_path(const struct ca *ca)
{
	return ca->cert_path;
}

const char *ca_key_path(const struct ca *ca)
{
	return ca->key_path;
}

X509 *ca_cert(const struct ca *ca)
{
	return ca->cert;
}

EVP_PKEY *ca_leaf_key(const struct ca *ca)
{
	return ca->leaf_key;
}

size_t ca_leaves(const struct ca *ca)
{
	return ca->leaves.n;
}

void ca_fingerprint(const struct ca *ca, char out[96])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	out[0] = '\0';
	if (X509_digest(ca->cert, EVP_sha256(), md, &n) != 1)
		return;
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (unsigned i = 0; i < n && o + 3 < 96; i++) {
		if (i > 0)
			out[o++] = ':';
		out[o++] = hex[md[i] >> 4];
		out[o++] = hex[md[i] & 15];
	}
	out[o] = '\0';
}

static X509 *make_leaf(struct ca *ca, const char *host)
{
	X509 *cert = cert_base(ca->leaf_key, host, LEAF_DAYS);
	if (cert == NULL)
		return NULL;
	/* Not past the CA's own end: a chain is only as valid as its root. */
	if (ASN1_TIME_compare(X509_get0_notAfter(cert), X509_get0_notAfter(ca->cert)) > 0)
		X509_set1_notAfter(cert, X509_get0_notAfter(ca->cert));
	char san[300];
	unsigned char ip[16];
	size_t hl = strlen(host);
	if (host[0] == '[' && hl > 2) {
		snprintf(san, sizeof(san), "IP:%.*s", (int)(hl - 2), host + 1);
	} else if (inet_pton(AF_INET, host, ip) == 1) {
		snprintf(san, sizeof(san), "IP:%s", host);
	} else {
		snprintf(san, sizeof(san), "DNS:%s", host);
	}
	if (X509_set_issuer_name(cert, X509_get_subject_name(ca->cert)) != 1 ||
	    add_ext(cert, ca->cert, NID_basic_constraints, "critical,CA:FALSE") != 0 ||
	    add_ext(cert, ca->cert, NID_key_usage, "critical,digitalSignature") != 0 ||
	    add_ext(cert, ca->cert, NID_ext_key_usage, "serverAuth") != 0 ||
	    add_ext(cert, ca->cert, NID_subject_alt_name, san) != 0 ||
	    add_ext(cert, ca->cert, NID_subject_key_identifier, "hash") != 0 ||
	    add_ext(cert, ca->cert, NID_authority_key_identifier, "keyid:always") != 0 ||
	    X509_sign(cert, ca->key, EVP_sha256()) == 0) {
		ERR_clear_error();
		X509_free(cert);
		return NULL;
	}
	return cert;
}

X509 *ca_leaf(struct ca *ca, const char *host)
{
	X509 *c = certcache_get(&ca->leaves, host);
	if (c != NULL)
		return c;
	if ((c = make_leaf(ca, host)) == NULL)
		return NULL;
	if (certcache_put(&ca->leaves, host, c) != 0)
		return NULL;
	return c;
}

struct bundle_arg {
	const char *system_store;
	X509 *cert;
};

static int put_bundle(FILE *f, void *arg)
{
	struct bundle_arg *b = arg;
	FILE *in = fopen(b->system_store, "re");
	if (in != NULL) {
		char buf[8192];
		size_t n;
		int last = '\n';
		while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
			if (fwrite(buf, 1, n, f) != n) {
				fclose(in);
				return -1;
			}
			last = buf[n - 1];
		}
		fclose(in);
		if (last != '\n')
			fputc('\n', f);
	}
	fputs("# pacerd CA\n", f);
	return put_cert(f, b->cert);
}

int ca_write_bundle(const struct ca *ca, const char *system_store, const char *out_path, char *err,
                    size_t errlen)
{
	struct bundle_arg b = {system_store, ca->cert};
	return write_file(out_path, 0644, put_bundle, &b, err, errlen);
}
