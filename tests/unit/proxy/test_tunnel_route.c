/* SPDX-License-Identifier: Apache-2.0 */
/* route_connect and route_resolve_tunnel: what a CONNECT gets (terminated,
 * blind, denied) and how a request inside a tunnel is routed. */
#include <string.h>

#include "proxy/route.h"
#include "route_fixture.h"
#include "unit.h"

static void forward(bool intercept, char **tunnel, size_t n)
{
	cfg.forward.intercept = intercept;
	cfg.forward.tunnel = tunnel;
	cfg.forward.n_tunnel = n;
}

START_TEST(provider_hosts_on_443_are_terminated)
{
	const struct provider_conf *p;
	forward(true, NULL, 0);
	ck_assert_int_eq(route_connect(&cfg, "api.openai.com", 443, &p), CONNECT_TERMINATE);
	ck_assert_str_eq(p->name, "openai");
	ck_assert_int_eq(route_connect(&cfg, "api.anthropic.com", 443, &p), CONNECT_TERMINATE);
	ck_assert_str_eq(p->name, "anthropic");
	/* Another port, another host, a provider without hosts: denied. */
	ck_assert_int_eq(route_connect(&cfg, "api.openai.com", 80, &p), CONNECT_DENY);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(route_connect(&cfg, "api.openai.com", 8443, &p), CONNECT_DENY);
	ck_assert_int_eq(route_connect(&cfg, "evil.example", 443, &p), CONNECT_DENY);
	ck_assert_int_eq(route_connect(&cfg, "127.0.0.1", 443, &p), CONNECT_DENY);
	ck_assert_int_eq(route_connect(&cfg, "api.openai.com.evil.example", 443, &p), CONNECT_DENY);
	ck_assert_int_eq(route_connect(&cfg, "openai.com", 443, &p), CONNECT_DENY);
}
END_TEST

START_TEST(tunnel_list_passes_blindly_on_443_only)
{
	const struct provider_conf *p;
	static char *list[] = {"pypi.org", "files.pythonhosted.org"};
	forward(true, list, 2);
	ck_assert_int_eq(route_connect(&cfg, "pypi.org", 443, &p), CONNECT_BLIND);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(route_connect(&cfg, "files.pythonhosted.org", 443, &p), CONNECT_BLIND);
	ck_assert_int_eq(route_connect(&cfg, "pypi.org", 22, &p), CONNECT_DENY);
	ck_assert_int_eq(route_connect(&cfg, "evil.pypi.org", 443, &p), CONNECT_DENY);
	static char *ports[] = {"registry.example:8443", "[::1]:9000", "127.0.0.1"};
	forward(true, ports, 3);
	ck_assert_int_eq(route_connect(&cfg, "registry.example", 8443, &p), CONNECT_BLIND);
	ck_assert_int_eq(route_connect(&cfg, "registry.example", 443, &p), CONNECT_DENY);
	ck_assert_int_eq(route_connect(&cfg, "[::1]", 9000, &p), CONNECT_BLIND);
	ck_assert_int_eq(route_connect(&cfg, "127.0.0.1", 443, &p), CONNECT_BLIND);
	ck_assert_int_eq(route_connect(&cfg, "127.0.0.1", 80, &p), CONNECT_DENY);
	/* A provider's host is still terminated: pacing wins over the list. */
	ck_assert_int_eq(route_connect(&cfg, "api.openai.com", 443, &p), CONNECT_TERMINATE);
	static char *any[] = {"*"};
	forward(true, any, 1);
	ck_assert_int_eq(route_connect(&cfg, "anything.example", 443, &p), CONNECT_BLIND);
	ck_assert_int_eq(route_connect(&cfg, "anything.example", 8080, &p), CONNECT_DENY);
	/* intercept off: a provider's host is only tunnelled when listed. */
	forward(false, NULL, 0);
	ck_assert_int_eq(route_connect(&cfg, "api.openai.com", 443, &p), CONNECT_DENY);
	forward(false, any, 1);
	ck_assert_int_eq(route_connect(&cfg, "api.openai.com", 443, &p), CONNECT_BLIND);
	forward(true, NULL, 0);
}
END_TEST

START_TEST(requests_in_a_tunnel_route_by_its_host)
{
	struct route r;
	char url[256];
	forward(true, NULL, 0);
	ck_assert_int_eq(route_resolve_tunnel(&cfg, "api.anthropic.com", "/v1/messages?x=1", &r),
	                 ROUTE_OK);
	ck_assert_str_eq(r.provider->name, "anthropic");
	ck_assert(r.tunnel && r.forward_proxy);
	ck_assert_int_gt(route_upstream_url(&r, url, sizeof(url)), 0);
	ck_assert_str_eq(url, "https://api.anthropic.com/v1/messages?x=1");
	/* The path is not stripped of a prefix: it is the real host's path. */
	ck_assert_int_eq(route_resolve_tunnel(&cfg, "api.groq.com", "/openai/v1/models", &r),
	                 ROUTE_OK);
	ck_assert_int_gt(route_upstream_url(&r, url, sizeof(url)), 0);
	ck_assert_str_eq(url, "https://api.groq.com/openai/v1/models");
	/* Only origin-form; the usual unsafe paths; a host gone from the config. */
	ck_assert_int_eq(route_resolve_tunnel(&cfg, "api.openai.com", "http://x/v1", &r),
	                 ROUTE_BAD_TARGET);
	ck_assert_int_eq(route_resolve_tunnel(&cfg, "api.openai.com", "*", &r), ROUTE_BAD_TARGET);
	ck_assert_int_eq(route_resolve_tunnel(&cfg, "api.openai.com", "/v1/../x", &r),
	                 ROUTE_UNSAFE_PATH);
	ck_assert_int_eq(route_resolve_tunnel(&cfg, "api.openai.com", "//evil/x", &r),
	                 ROUTE_UNSAFE_PATH);
	ck_assert_int_eq(route_resolve_tunnel(&cfg, "gone.example", "/v1/models", &r),
	                 ROUTE_HOST_NOT_ALLOWED);
}
END_TEST

static Suite *tunnel_route_suite(void)
{
	Suite *s = suite_create("tunnel_route");
	TCase *c = tcase_create("core");
	tcase_add_test(c, provider_hosts_on_443_are_terminated);
	tcase_add_test(c, tunnel_list_passes_blindly_on_443_only);
	tcase_add_test(c, requests_in_a_tunnel_route_by_its_host);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("tunnel_route", tunnel_route_suite)
