/* SPDX-License-Identifier: Apache-2.0 */
/* route — provider resolution, upstream URLs, key extraction. See route.h. */
#include "proxy/route.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/connect.h"
#include "provider/profile.h"

static bool prefix_matches(const char *prefix, const char *path, size_t path_len)
{
	size_t n = strlen(prefix);
	if (n == 1 && prefix[0] == '/')
		return true;
	if (path_len < n || memcmp(path, prefix, n) != 0)
		return false;
	/* "/anthropic" matches "/anthropic", "/anthropic/…" and "/anthropic?…",
	 * not "/anthropicx". */
	return path_len == n || path[n] == '/' || path[n] == '?';
}

/* A path pacerd forwards has no dot segment ("." or "..", plain or with its
 * dots percent-encoded), no percent-encoded slash or backslash, no backslash, and does not
 * begin with "//". An upstream, or anything between pacerd and it, that
 * resolves or decodes them would serve a path other than the one routed: out
 * of the provider's prefix ("/anthropic/../v1/…" on the root provider) or out
 * of its upstream's base path ("https://openrouter.ai/api" + "/../…"); and a
 * "//host/…" that something resolves as a reference names an authority. No
 * LLM API uses any of them, so they are refused rather than normalized. Only
 * the path is looked at, up to '?' or '#': a query may hold anything. */
static bool path_is_safe(const char *path, size_t len)
{
	size_t end = 0;
	while (end < len && path[end] != '?' && path[end] != '#')
		end++;
	if (end >= 2 && path[0] == '/' && path[1] == '/')
		return false;
	size_t dots = 0;    /* dots in the current segment */
	bool other = false; /* the current segment has something else */
	for (size_t i = 0; i <= end; i++) {
		if (i == end || path[i] == '/') {
			if (!other && (dots == 1 || dots == 2))
				return false;
			dots = 0;
			other = false;
		} else if (path[i] == '\\') {
			return false;
		} else if (path[i] == '%' && i + 2 < end) {
			char a = path[i + 1], b = (char)(path[i + 2] | 0x20); /* hex case */
			if ((a == '2' && b == 'f') || (a == '5' && b == 'c'))
				return false;
			if (a == '2' && b == 'e')
				dots++;
			else
				other = true;
			i += 2;
		} else if (path[i] == '.') {
			dots++;
		} else {
			other = true;
		}
	}
	return true;
}

static enum route_status resolve_origin_form(const struct config *cfg, const char *target,
                                             struct route *out)
{
	size_t tlen = strlen(target);
	const struct provider_conf *best = NULL;
	size_t best_len = 0;

	if (!path_is_safe(target, tlen))
		return ROUTE_UNSAFE_PATH;

	for (size_t i = 0; i < cfg->n_providers; i++) {
		const struct provider_conf *p = &cfg->providers[i];
		size_t n = strlen(p->prefix);
		if (prefix_matches(p->prefix, target, tlen) && (best == NULL || n > best_len)) {
			best = p;
			best_len = n;
		}
	}
	if (best == NULL)
		return ROUTE_NO_PROVIDER;

	out->provider = best;
	out->forward_proxy = false;
	if (best_len == 1) { /* the root prefix strips nothing */
		out->path = target;
		out->path_len = tlen;
	} else {
		out->path = target + best_len;
		out->path_len = tlen - best_len;
		/* "/anthropic//host/…": what is forwarded begins with "//". */
		if (!path_is_safe(out->path, out->path_len))
			return ROUTE_UNSAFE_PATH;
	}
	return ROUTE_OK;
}

static bool host_listed(const struct provider_conf *p, const char *host, size_t n)
{
	for (size_t i = 0; i < p->n_hosts; i++)
		if (strlen(p->hosts[i]) == n && strncasecmp(p->hosts[i], host, n) == 0)
			return true;
	return false;
}

static enum route_status resolve_absolute_form(const struct config *cfg, const char *target,
                                               size_t scheme_len, struct route *out)
{
	const char *auth = target + scheme_len;
	size_t auth_len = strcspn(auth, "/?#");
	const char *rest = auth + auth_len;

	if (auth_len == 0 || memchr(auth, '@', auth_len) != NULL)
		return ROUTE_BAD_TARGET; /* no host, or userinfo: never forwarded */

	/* Host without the port; IPv6 literals keep their brackets. */
	size_t host_len = auth_len;
	if (auth[0] == '[') {
		const char *close = memchr(auth, ']', auth_len);
		if (close == NULL)
			return ROUTE_BAD_TARGET;
		host_len = (size_t)(close - auth) + 1;
	} else {
		const char *colon = memchr(auth, ':', auth_len);
		if (colon != NULL)
			host_len = (size_t)(colon - auth);
	}

	for (size_t i = 0; i < cfg->n_providers; i++) {
		const struct provider_conf *p = &cfg->providers[i];
		if (host_listed(p, auth, host_len)) {
			if (!path_is_safe(rest, strlen(rest)))
				return ROUTE_UNSAFE_PATH;
			out->provider = p;
			out->forward_proxy = true;
			out->path = rest;
			out->path_len = strcspn(rest, "#");
			return ROUTE_OK;
		}
	}
	return ROUTE_HOST_NOT_ALLOWED;
}

static const struct provider_conf *provider_for_host(const struct config *cfg, const char *host,
                                                     size_t n)
{
	for (size_t i = 0; i < cfg->n_providers; i++)
		if (host_listed(&cfg->providers[i], host, n))
			return &cfg->providers[i];
	return NULL;
}

enum route_status route_resolve_tunnel(const struct config *cfg, const char *host,
                                       const char *target, struct route *out)
{
	memset(out, 0, sizeof(*out));
	if (target == NULL || target[0] != '/')
		return ROUTE_BAD_TARGET; /* inside a tunnel only origin-form is meant */
	/* The provider may have left the config since the tunnel opened. */
	const struct provider_conf *p = provider_for_host(cfg, host, strlen(host));
	if (p == NULL)
		return ROUTE_HOST_NOT_ALLOWED;
	size_t tlen = strlen(target);
	if (!path_is_safe(target, tlen))
		return ROUTE_UNSAFE_PATH;
	out->provider = p;
	out->forward_proxy = true;
	out->tunnel = true;
	out->path = target;
	out->path_len = strcspn(target, "#");
	return ROUTE_OK;
}

enum connect_verdict route_connect(const struct config *cfg, const char *host, unsigned port,
                                   const struct provider_conf **provider)
{
	*provider = NULL;
	const struct provider_conf *p = provider_for_host(cfg, host, strlen(host));
	if (p != NULL && port == 443 && cfg->forward.intercept) {
		*provider = p;
		return CONNECT_TERMINATE;
	}
	/* Port 443 unless an entry names another: a tunnel is for HTTPS, not a
	 * way to reach any service the proxy's host can see. */
	for (size_t i = 0; i < cfg->forward.n_tunnel; i++) {
		const char *t = cfg->forward.tunnel[i];
		if (strcmp(t, "*") == 0) {
			if (port == 443)
				return CONNECT_BLIND;
			continue;
		}
		char buf[CONNECT_HOST_MAX + 16];
		struct connect_target e;
		bool has_port = t[0] == '[' ? strstr(t, "]:") != NULL : strchr(t, ':') != NULL;
		int n = snprintf(buf, sizeof(buf), "%s%s", t, has_port ? "" : ":443");
		if (n > 0 && (size_t)n < sizeof(buf) && connect_parse(buf, (size_t)n, &e) &&
		    e.port == port && strcmp(e.host, host) == 0)
			return CONNECT_BLIND;
	}
	return CONNECT_DENY;
}

enum route_status route_resolve(const struct config *cfg, const char *target, struct route *out)
{
	memset(out, 0, sizeof(*out));
	if (target == NULL || target[0] == '\0')
		return ROUTE_BAD_TARGET;
	if (target[0] == '/')
		return resolve_origin_form(cfg, target, out);
	if (strncasecmp(target, "http://", 7) == 0)
		return resolve_absolute_form(cfg, target, 7, out);
	if (strncasecmp(target, "https://", 8) == 0)
		return resolve_absolute_form(cfg, target, 8, out);
	return ROUTE_BAD_TARGET;
}

bool route_streams_body(const struct config *cfg, const char *method, const char *target,
                        const char *tunnel_host)
{
	struct route r;
	enum route_status rs = tunnel_host != NULL
	                           ? route_resolve_tunnel(cfg, tunnel_host, target, &r)
	                           : route_resolve(cfg, target, &r);
	return rs == ROUTE_OK &&
	       profile_endpoint_streams(profile_endpoint(method, r.path, r.path_len), method);
}

int route_upstream_url(const struct route *r, char *buf, size_t len)
{
	const char *base = r->provider->upstream;
	size_t base_len = strlen(base);

	if (r->forward_proxy) {
		/* Keep scheme://authority only: the absolute URI has the full path. */
		const char *auth = strstr(base, "://");
		auth = auth ? auth + 3 : base;
		base_len = (size_t)(auth - base) + strcspn(auth, "/");
	}
	const char *path = r->path;
	size_t path_len = r->path_len;
	/* "/anthropic" alone or "/anthropic?x" strip to "" or "?x": start with '/'. */
	bool need_slash = path_len == 0 || path[0] != '/';
	int n = snprintf(buf, len, "%.*s%s%.*s", (int)base_len, base, need_slash ? "/" : "",
	                 (int)path_len, path);
	if (n < 0 || (size_t)n >= len)
		return -1;
	return n;
}
