/* SPDX-License-Identifier: Apache-2.0 */
/* route: provider resolution, upstream URLs, key extraction and hashing. */
#include <string.h>

#include "proxy/route.h"
#include "route_fixture.h"
#include "unit.h"

static struct config cfg_no_root = {.providers = providers + 1, .n_providers = 3};

static const char *url_for(const char *target)
{
	static char buf[512];
	struct route r;
	ck_assert_int_eq(route_resolve(&cfg, target, &r), ROUTE_OK);
	ck_assert_int_gt(route_upstream_url(&r, buf, sizeof(buf)), 0);
	return buf;
}

START_TEST(root_prefix_keeps_path_and_query)
{
	ck_assert_str_eq(url_for("/v1/chat/completions?a=1&b=2"),
	                 "https://api.openai.com/v1/chat/completions?a=1&b=2");
	ck_assert_str_eq(url_for("/"), "https://api.openai.com/");
}
END_TEST

START_TEST(longest_prefix_wins_and_is_stripped)
{
	struct route r;
	ck_assert_int_eq(route_resolve(&cfg, "/anthropic/v1/messages", &r), ROUTE_OK);
	ck_assert_str_eq(r.provider->name, "anthropic");
	ck_assert_str_eq(url_for("/anthropic/v1/messages"),
	                 "https://api.anthropic.com/v1/messages");
	ck_assert_str_eq(url_for("/groq/v1/models"), "https://api.groq.com/openai/v1/models");
	ck_assert_str_eq(url_for("/gemini/v1/models?key=x"), "http://127.0.0.1:9/models?key=x");
}
END_TEST

START_TEST(prefix_needs_a_segment_boundary)
{
	struct route r;
	ck_assert_int_eq(route_resolve(&cfg, "/anthropicx/v1", &r), ROUTE_OK);
	ck_assert_str_eq(r.provider->name, "openai");
	ck_assert_str_eq(url_for("/anthropic"), "https://api.anthropic.com/");
	ck_assert_str_eq(url_for("/anthropic?x=1"), "https://api.anthropic.com/?x=1");
}
END_TEST

START_TEST(no_root_provider_is_404)
{
	struct route r;
	ck_assert_int_eq(route_resolve(&cfg_no_root, "/v1/models", &r), ROUTE_NO_PROVIDER);
	ck_assert_int_eq(route_resolve(&cfg_no_root, "/anthropic/v1/messages", &r), ROUTE_OK);
}
END_TEST

START_TEST(absolute_form_only_for_listed_hosts)
{
	struct route r;
	ck_assert_int_eq(route_resolve(&cfg, "http://api.openai.com/v1/models", &r), ROUTE_OK);
	ck_assert_str_eq(r.provider->name, "openai");
	ck_assert(r.forward_proxy);
	ck_assert_str_eq(url_for("http://API.OpenAI.com:80/v1/models?q=1"),
	                 "https://api.openai.com/v1/models?q=1");
	/* The absolute URI carries the provider's own base path. */
	ck_assert_str_eq(url_for("https://api.groq.com/openai/v1/models"),
	                 "https://api.groq.com/openai/v1/models");
	ck_assert_str_eq(url_for("http://api.anthropic.com"), "https://api.anthropic.com/");
	ck_assert_int_eq(route_resolve(&cfg, "http://example.com/v1/models", &r),
	                 ROUTE_HOST_NOT_ALLOWED);
	ck_assert_int_eq(route_resolve(&cfg, "http://api.openai.com.evil.com/", &r),
	                 ROUTE_HOST_NOT_ALLOWED);
	ck_assert_int_eq(route_resolve(&cfg, "http://user@api.openai.com/", &r), ROUTE_BAD_TARGET);
	ck_assert_int_eq(route_resolve(&cfg, "http:///v1", &r), ROUTE_BAD_TARGET);
}
END_TEST

START_TEST(other_targets_are_bad)
{
	struct route r;
	ck_assert_int_eq(route_resolve(&cfg, "api.openai.com:443", &r), ROUTE_BAD_TARGET);
	ck_assert_int_eq(route_resolve(&cfg, "*", &r), ROUTE_BAD_TARGET);
	ck_assert_int_eq(route_resolve(&cfg, "", &r), ROUTE_BAD_TARGET);
	ck_assert_int_eq(route_resolve(&cfg, "ftp://api.openai.com/", &r), ROUTE_BAD_TARGET);
}
END_TEST

START_TEST(unsafe_paths_are_refused)
{
	static const char *const bad[] = {"/%2e%2e/v1/models",
	                                  "/%2E%2E/v1/models",
	                                  "/.%2e/v1",
	                                  "/%2e./v1",
	                                  "/./v1/models",
	                                  "/anthropic/%2e%2e/v1/chat/completions",
	                                  "/anthropic/../v1/chat/completions",
	                                  "/v1/../anthropic/v1/messages",
	                                  "/anthropic/..",
	                                  "/anthropic/.",
	                                  "/..",
	                                  "/v1/..?x=1",
	                                  "/v1/..#f",
	                                  "/anthropic%2f..%2fv1",
	                                  "/v1%2Fmodels",
	                                  "/anthropic/..%5cv1",
	                                  "/anthropic/..\\v1",
	                                  "//evil.example/v1/models",
	                                  "//",
	                                  "/anthropic//evil.example/v1",
	                                  "/groq/../../v1",
	                                  "http://api.anthropic.com/../v1/models",
	                                  "http://api.openai.com//evil.example/",
	                                  "https://api.openai.com/%2e%2e/x"};
	struct route r;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum route_status st = route_resolve(&cfg, bad[i], &r);
		ck_assert_msg(st == ROUTE_UNSAFE_PATH, "%s: %d", bad[i], (int)st);
	}
	/* Dots inside a segment, an empty segment further on, anything in the query,
	 * and other escapes are ordinary. */
	ck_assert_str_eq(url_for("/v1/models/gpt-4.1..x"),
	                 "https://api.openai.com/v1/models/gpt-4.1..x");
	ck_assert_str_eq(url_for("/v1/.well"), "https://api.openai.com/v1/.well");
	ck_assert_str_eq(url_for("/v1/..."), "https://api.openai.com/v1/...");
	ck_assert_str_eq(url_for("/v1//models"), "https://api.openai.com/v1//models");
	ck_assert_str_eq(url_for("/v1/models?x=../..%2f&y=//z"),
	                 "https://api.openai.com/v1/models?x=../..%2f&y=//z");
	ck_assert_str_eq(url_for("/v1/a%20b%2"), "https://api.openai.com/v1/a%20b%2");
	ck_assert_str_eq(url_for("/anthropic?x=/.."), "https://api.anthropic.com/?x=/..");
	/* A foreign host is refused as foreign, whatever its path. */
	ck_assert_int_eq(route_resolve(&cfg, "http://evil.example/../x", &r),
	                 ROUTE_HOST_NOT_ALLOWED);
}
END_TEST

START_TEST(url_buffer_too_small)
{
	struct route r;
	char buf[16];
	ck_assert_int_eq(route_resolve(&cfg, "/v1/chat/completions", &r), ROUTE_OK);
	ck_assert_int_eq(route_upstream_url(&r, buf, sizeof(buf)), -1);
}
END_TEST

/* The class is decided on the routed path: the prefix is stripped first,
 * and a target that does not route is read whole (issue 28 item 6). */
START_TEST(uploads_stream_by_routed_path)
{
	ck_assert(route_streams_body(&cfg, "POST", "/v1/files", NULL));
	ck_assert(route_streams_body(&cfg, "POST", "/anthropic/v1/messages/batches", NULL));
	ck_assert(route_streams_body(&cfg, "PUT", "/gemini/v1/upload/files?key=k", NULL));
	ck_assert(
	    route_streams_body(&cfg, "POST", "http://api.openai.com/v1/uploads/u/parts", NULL));
	ck_assert(route_streams_body(&cfg, "POST", "/v1/files", "api.anthropic.com"));
	ck_assert(!route_streams_body(&cfg, "POST", "/v1/chat/completions", NULL));
	ck_assert(!route_streams_body(&cfg, "GET", "/v1/files/f/content", NULL));
	/* Not routed: 403, 404 or 400 without reading the body. */
	ck_assert(!route_streams_body(&cfg, "POST", "http://evil.example/v1/files", NULL));
	ck_assert(!route_streams_body(&cfg_no_root, "POST", "/v1/files", NULL));
	ck_assert(!route_streams_body(&cfg, "POST", "/v1/../v1/files", NULL));
	ck_assert(!route_streams_body(&cfg, "POST", "/v1/files", "evil.example"));
}
END_TEST

START_TEST(key_hash_is_sha256_hex)
{
	char hex[KEYID_HEX + 1], id[KEYID_NAME_SIZE];
	/* sha256("abc") */
	keyid_hash("abc", 3, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	keyid_name(hex, id);
	ck_assert_str_eq(id, "ba7816bf8f01");
	keyid_name(NULL, id);
	ck_assert_str_eq(id, "anonymous");
}
END_TEST

static Suite *route_suite(void)
{
	Suite *s = suite_create("route");
	TCase *tc = tcase_create("route");
	tcase_add_test(tc, root_prefix_keeps_path_and_query);
	tcase_add_test(tc, longest_prefix_wins_and_is_stripped);
	tcase_add_test(tc, prefix_needs_a_segment_boundary);
	tcase_add_test(tc, no_root_provider_is_404);
	tcase_add_test(tc, absolute_form_only_for_listed_hosts);
	tcase_add_test(tc, other_targets_are_bad);
	tcase_add_test(tc, unsafe_paths_are_refused);
	tcase_add_test(tc, url_buffer_too_small);
	tcase_add_test(tc, uploads_stream_by_routed_path);
	tcase_add_test(tc, key_hash_is_sha256_hex);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("route", route_suite)
