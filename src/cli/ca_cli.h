/* SPDX-License-Identifier: Apache-2.0 */
/* ca_cli — `pacerd ca`: where pacerd's CA for terminated CONNECT tunnels is
 * (made now if it was not yet), its fingerprint, a bundle of the system trust
 * store plus the CA, and the variables that make the common clients trust it
 * (docs/https-proxy.md). Never prints the key, only its path. */
#ifndef PACERD_CA_CLI_H
#define PACERD_CA_CLI_H

/* argv[0] is "ca". default_config: the file pacerd itself would read without
 * -c (NULL: built-in defaults). Returns 0, 1 on failure, 2 on bad usage. */
int ca_main(int argc, char **argv, char *const *env, const char *default_config);

#endif
