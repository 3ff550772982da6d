/* SPDX-License-Identifier: Apache-2.0 */
/* ca_cli — `pacerd ca`. See ca_cli.h. */
#include "cli/ca_cli.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/ca.h"
#include "core/config.h"

/* Debian's (and most distributions') file of the system's trusted roots. */
#define SYSTEM_STORE "/etc/ssl/certs/ca-certificates.crt"

static void usage(FILE *out)
{
	fprintf(out, "usage: pacerd ca [-c FILE] [--bundle FILE] [--system-store FILE]\n"
	             "\n"
	             "  Prints where pacerd's CA for HTTPS_PROXY clients is (making it in the\n"
	             "  state directory if there is none yet), and how to trust it. Writes a\n"
	             "  bundle of the system store plus the CA, for the variables that replace\n"
	             "  a client's store (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE).\n"
	             "\n"
	             "  -c, --config FILE     pacerd's configuration (its forward: section)\n"
	             "  --bundle FILE         where to write the bundle (default: bundle.pem in\n"
	             "                        the state directory, or beside forward.ca_cert)\n"
	             "  --system-store FILE   the system's roots (default " SYSTEM_STORE ")\n");
}

int ca_main(int argc, char **argv, char *const *env, const char *default_config)
{
	const char *config_path = default_config, *bundle = NULL, *store = SYSTEM_STORE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) && i + 1 < argc) {
			config_path = argv[++i];
		} else if (strcmp(a, "--bundle") == 0 && i + 1 < argc) {
			bundle = argv[++i];
		} else if (strcmp(a, "--system-store") == 0 && i + 1 < argc) {
			store = argv[++i];
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "pacerd ca: unknown argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	char err[1024];
	struct config *cfg = config_load(config_path, env, err, sizeof(err));
	if (cfg == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	char dir[PATH_MAX], listen[300];
	bool created = false;
	struct ca *ca = ca_open_config(cfg, env, &created, dir, sizeof(dir), err, sizeof(err));
	/* The proxy address clients set: the configured listen ("0.0.0.0" and
	 * ":port" are reached through loopback on this machine). */
	const char *l = cfg->listen;
	if (strncmp(l, "0.0.0.0:", 8) == 0)
		l += 7;
	snprintf(listen, sizeof(listen), "%s%s", l[0] == ':' ? "127.0.0.1" : "", l);
	config_free(cfg);
	if (ca == NULL) {
		fprintf(stderr, "pacerd ca: %s\n", err);
		return 1;
	}
	char bundle_buf[PATH_MAX + 16];
	if (bundle == NULL) {
		if (dir[0] != '\0') {
			snprintf(bundle_buf, sizeof(bundle_buf), "%s/bundle.pem", dir);
		} else {
			/* Beside the configured certificate. */
			const char *cp = ca_cert_path(ca);
			const char *slash = strrchr(cp, '/');
			int n = slash != NULL ? (int)(slash - cp) : 1;
			snprintf(bundle_buf, sizeof(bundle_buf), "%.*s/bundle.pem", n,
			         slash != NULL ? cp : ".");
		}
		bundle = bundle_buf;
	}
	bool have_store = access(store, R_OK) == 0;
	int rc = ca_write_bundle(ca, store, bundle, err, sizeof(err));
	char fp[96];
	ca_fingerprint(ca, fp);
	printf("pacerd CA%s\n", created ? " (made now)" : "");
	printf("  certificate  %s\n", ca_cert_path(ca));
	printf("  key          %s (mode 0600: whoever reads it can impersonate any "
	       "host to clients that trust the CA)\n",
	       ca_key_path(ca));
	printf("  sha256       %s\n", fp);
	if (rc == 0)
		printf("  bundle       %s (%s + pacerd's CA)\n", bundle,
		       have_store ? store : "no system store found");
	else
		printf("  bundle       not written: %s\n", err);
	const char *b = rc == 0 ? bundle : ca_cert_path(ca);
	printf(
	    "\nTrust it in the programs that use pacerd as their HTTPS proxy:\n"
	    "  export HTTPS_PROXY=http://%s\n"
	    "  export NODE_EXTRA_CA_CERTS=%s   # Node: added to its own roots\n"
	    "  export SSL_CERT_FILE=%s   # Python httpx, OpenSSL: replaces the roots\n"
	    "  export REQUESTS_CA_BUNDLE=%s   # Python requests\n"
	    "  export CURL_CA_BUNDLE=%s   # curl\n"
	    "Node's own fetch needs a proxy agent: undici's ProxyAgent, or NODE_USE_ENV_PROXY=1\n"
	    "(Node 24+). System-wide (Debian): cp the certificate to\n"
	    "/usr/local/share/ca-certificates/pacerd.crt && update-ca-certificates.\n",
	    listen, ca_cert_path(ca), b, b, b);
	ca_free(ca);
	return rc == 0 ? 0 : 1;
}
