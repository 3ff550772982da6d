/* SPDX-License-Identifier: Apache-2.0 */
/* certcache — the leaf certificates pacerd has made, by host name, kept in
 * memory so that each host's certificate is signed once per process.
 *
 * A small table, not a general map: terminated tunnels go only to configured
 * providers' hosts (a handful), so a linear scan is cheaper than hashing. Its
 * size is capped all the same (a reload may change the hosts many times): at
 * the cap, the entry made longest ago is freed to make room. Values are
 * opaque to the cache (X509 * in pacerd) and freed through the function
 * given at init. Pure: no I/O; allocation only for the host names. */
#ifndef PACERD_CERTCACHE_H
#define PACERD_CERTCACHE_H

#include <stddef.h>
#include <stdint.h>

#define CERTCACHE_MAX 64

struct certcache_entry {
	char *host;
	void *value;
	uint64_t made; /* insertion order */
};

struct certcache {
	struct certcache_entry e[CERTCACHE_MAX];
	size_t n, cap;
	uint64_t seq;
	void (*free_value)(void *);
};

/* cap: 1..CERTCACHE_MAX (0 or more: CERTCACHE_MAX). */
void certcache_init(struct certcache *cc, size_t cap, void (*free_value)(void *));
/* The value kept for host (exact match, hosts are lower case), or NULL. */
void *certcache_get(const struct certcache *cc, const char *host);
/* Keeps value for host (the cache owns it from now on; a value already kept
 * for host is freed first). -1 when out of memory: value is freed too. */
int certcache_put(struct certcache *cc, const char *host, void *value);
void certcache_clear(struct certcache *cc);

#endif
