/* SPDX-License-Identifier: Apache-2.0 */
/* slowdns — an LD_PRELOAD shim for the integration tests (cases/faults.mjs):
 * getaddrinfo() of a name ending in ".slow.invalid" sleeps SLOWDNS_MS
 * milliseconds (default 1000), then fails with EAI_NONAME; every other name
 * goes to the real getaddrinfo. A DNS lookup that takes long, without a DNS
 * server: whether pacerd's event loop keeps running during a lookup (libcurl's
 * threaded resolver) or blocks in it (a synchronous one) shows in the latency
 * of the requests that do not need it. The test compiles it (cc -shared). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
	static const char suffix[] = ".slow.invalid";
	size_t n = node != NULL ? strlen(node) : 0;
	if (n >= sizeof(suffix) - 1 && strcmp(node + n - (sizeof(suffix) - 1), suffix) == 0) {
		const char *env = getenv("SLOWDNS_MS");
		long ms = env != NULL ? strtol(env, NULL, 10) : 1000;
		if (ms < 0)
			ms = 0;
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0)
			;
		return EAI_NONAME;
	}
	gai_fn real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
	return real != NULL ? real(node, service, hints, res) : EAI_FAIL;
}
