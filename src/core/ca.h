/* SPDX-License-Identifier: Apache-2.0 */
/* ca — pacerd's own certificate authority for CONNECT tunnels it terminates
 * (README: docs/https-proxy.md), and the leaf certificates it signs.
 *
 * The CA is either configured (forward.ca_cert and forward.ca_key, PEM) or
 * made at first start in the state directory: ca.pem (the certificate, mode
 * 0644: clients must trust it) and ca.key (mode 0600, never logged, never
 * served). Both are ECDSA P-256: every TLS client of the last decade accepts
 * it, and making one takes about a millisecond, so even a first start does
 * not stall. Two processes starting at once with the same directory agree on
 * one CA (a lock file around load-or-create).
 *
 * Leaves: one ECDSA P-256 key per process for every leaf (the leaf key never
 * leaves memory), a certificate per host signed on first use (about 0.1 ms
 * with a P-256 CA key) and kept in a certcache. Reading and writing files
 * happens only in ca_open and ca_write_bundle: at start and in `pacerd ca`. */
#ifndef PACERD_CA_H
#define PACERD_CA_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

struct ca;

/* cert_file and key_file both set: loads them (the key must match). Else
 * loads state_dir/ca.pem and ca.key, making them (and the directory, 0700)
 * when absent. NULL with err set on failure; the message never contains key
 * material. *created (may be NULL): true when made now. */
struct ca *ca_open(const char *cert_file, const char *key_file, const char *state_dir,
                   bool *created, char *err, size_t errlen);
void ca_free(struct ca *ca);

struct config; /* core/config.h */
/* ca_open with the forward section of cfg: forward.ca_cert/ca_key, else the
 * state directory (core/state_dir.h: state_dir, $STATE_DIRECTORY,
 * /var/lib/pacerd), else the user's (state_dir_user). state_dir (may be
 * NULL): the directory used, "" for a configured CA. */
struct ca *ca_open_config(const struct config *cfg, char *const *env, bool *created,
                          char *state_dir, size_t state_dir_len, char *err, size_t errlen);

const char *ca_cert_path(const struct ca *ca);
const char *ca_key_path(const struct ca *ca);
X509 *ca_cert(const struct ca *ca);
/* The SHA-256 fingerprint of the CA certificate, "AB:CD:…" (96 bytes). */
void ca_fingerprint(const struct ca *ca, char out[96]);

/* The leaf certificate for host (lower case: a DNS name or an IP literal,
 * IPv6 in brackets), made and cached on first use. NULL when it cannot be
 * made. Owned by the CA. */
X509 *ca_leaf(struct ca *ca, const char *host);
/* The private key of every leaf. */
EVP_PKEY *ca_leaf_key(const struct ca *ca);
size_t ca_leaves(const struct ca *ca); /* cached now */

/* Writes out_path: the certificates of system_store (PEM, copied as is)
 * followed by pacerd's CA, for clients whose variable replaces the trust
 * store (SSL_CERT_FILE, REQUESTS_CA_BUNDLE). Written to a temporary file and
 * renamed. -1 with err set. */
int ca_write_bundle(const struct ca *ca, const char *system_store, const char *out_path, char *err,
                    size_t errlen);

#endif
