/* SPDX-License-Identifier: Apache-2.0 */
/* headers: hop-by-hop filtering (RFC 9110 §7.6.1) and header line splitting. */
#include <string.h>

#include "core/priority.h"
#include "http/headers.h"
#include "unit.h"

START_TEST(hop_by_hop_fields_are_dropped)
{
	const char *hop[] = {
	    "Connection",        "keep-alive",        "Proxy-Connection", "TE",
	    "Trailer",           "Transfer-Encoding", "Upgrade",          "Proxy-Authorization",
	    "proxy-authenticate"};
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++) {
		ck_assert_msg(!hdr_forward_request(hop[i], NULL), "%s forwarded", hop[i]);
		ck_assert_msg(!hdr_forward_response(hop[i], NULL), "%s relayed", hop[i]);
	}
}
END_TEST

START_TEST(end_to_end_fields_cross)
{
	const char *e2e[] = {"Authorization", "Content-Type",      "Accept",
	                     "x-api-key",     "anthropic-version", "OpenAI-Organization",
	                     "User-Agent",    "Accept-Encoding",   "x-request-id"};
	for (size_t i = 0; i < sizeof(e2e) / sizeof(e2e[0]); i++)
		ck_assert_msg(hdr_forward_request(e2e[i], "close"), "%s dropped", e2e[i]);
	ck_assert(hdr_forward_response("Content-Length", NULL));
	ck_assert(hdr_forward_response("x-ratelimit-remaining-requests", NULL));
}
END_TEST

START_TEST(connection_listed_fields_are_dropped)
{
	ck_assert(hdr_in_connection("close, X-Foo", "x-foo"));
	ck_assert(hdr_in_connection("X-Foo,x-bar", "X-Bar"));
	ck_assert(!hdr_in_connection("X-Foobar", "x-foo"));
	ck_assert(!hdr_in_connection(NULL, "x-foo"));
	ck_assert(!hdr_forward_request("X-Foo", "keep-alive, x-foo"));
	ck_assert(!hdr_forward_response("X-Foo", "x-foo"));
	ck_assert(hdr_forward_request("X-Foo", "keep-alive"));
}
END_TEST

START_TEST(curl_owned_request_fields)
{
	ck_assert(!hdr_forward_request("Host", NULL));
	ck_assert(!hdr_forward_request("content-length", NULL));
	ck_assert(!hdr_forward_request("Expect", NULL));
	/* only on requests; and only those names, not their neighbours */
	ck_assert(hdr_forward_response("Host", NULL));
	ck_assert(hdr_forward_response("Expect", NULL));
	const char *near[] = {
	    "Hosts", "hos",      "Expects",    "content-lengths", "te2",
	    "t",     "trailers", "keep-alivf", "x-pacer",         "Upgrade-Insecure-Requests"};
	for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		ck_assert_msg(hdr_forward_request(near[i], NULL), "%s dropped", near[i]);
		ck_assert_msg(hdr_forward_response(near[i], NULL), "%s not relayed", near[i]);
	}
}
END_TEST

START_TEST(priorities)
{
	int p = 99;
	ck_assert(priority_parse("0", &p) && p == 0);
	ck_assert(priority_parse("10", &p) && p == 10);
	ck_assert(priority_parse(" -100 ", &p) && p == -100);
	ck_assert(priority_parse("+100", &p) && p == 100);
	ck_assert(priority_parse("007", &p) && p == 7);
	const char *bad[] = {"",
	                     " ",
	                     "-",
	                     "101",
	                     "-101",
	                     "1.5",
	                     "1e2",
	                     "high",
	                     "5 5",
	                     "0x10",
	                     "99999999999999999999",
	                     "--1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = 42;
		ck_assert_msg(!priority_parse(bad[i], &p), "'%s' parsed", bad[i]);
		ck_assert_int_eq(p, 42);
	}
}
END_TEST

START_TEST(client_timeouts)
{
	/* X-Stainless-Timeout: seconds, as the official SDKs send them */
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, "600"), 600000);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, "2"), 2000);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, " 1.5 "), 1500);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, "0.0005"), -1); /* under 1 ms */
	/* x-pacer-timeout-ms wins, in ms */
	ck_assert_int_eq(hdr_client_timeout_ms("250", NULL, "600"), 250);
	ck_assert_int_eq(hdr_client_timeout_ms("bad", NULL, "3"), 3000);
	/* nothing else is a time */
	const char *bad[] = {"",    "0",    "-1",    "1e3", "inf",
	                     "nan", "0x10", "1.2.3", "10s", "1234567890123"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(hdr_client_timeout_ms(bad[i], NULL, NULL), -1);
		ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, bad[i]), -1);
	}
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, NULL), -1);
	/* Request-Timeout-Ms: ms; the earlier of it and X-Stainless-Timeout;
	 * x-pacer-timeout-ms still wins */
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, "1500", NULL), 1500);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, " 2500.5 ", NULL), 2500);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, "1500", "600"), 1500);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, "900000", "600"), 600000);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, "bad", "2"), 2000);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, "0", NULL), -1);
	ck_assert_int_eq(hdr_client_timeout_ms("250", "1500", "600"), 250);
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, "31622400"), 31622400000LL); /* a year */
	ck_assert_int_eq(hdr_client_timeout_ms(NULL, NULL, "31622401"), -1);
}
END_TEST

START_TEST(pacer_fields_stay_here)
{
	ck_assert(!hdr_forward_request("x-pacer-timeout-ms", NULL));
	ck_assert(!hdr_forward_request("X-Pacer-Priority", NULL));
	ck_assert(hdr_forward_request("x-stainless-timeout", NULL));
	ck_assert(hdr_forward_request("x-pacers", NULL));
}
END_TEST

START_TEST(split_lines)
{
	const char *n, *v;
	size_t nl, vl;
	const char *line = "X-RateLimit-Remaining:   59 \r\n";
	ck_assert(hdr_split_line(line, strlen(line), &n, &nl, &v, &vl));
	ck_assert_int_eq(nl, 21);
	ck_assert(memcmp(n, "X-RateLimit-Remaining", 21) == 0);
	ck_assert_int_eq(vl, 2);
	ck_assert(memcmp(v, "59", 2) == 0);
	line = "Empty:\r\n";
	ck_assert(hdr_split_line(line, strlen(line), &n, &nl, &v, &vl));
	ck_assert_int_eq(vl, 0);
	ck_assert(!hdr_split_line("\r\n", 2, &n, &nl, &v, &vl));
	ck_assert(!hdr_split_line(" folded\r\n", 9, &n, &nl, &v, &vl));
	ck_assert(!hdr_split_line("no colon\r\n", 10, &n, &nl, &v, &vl));
	ck_assert(!hdr_split_line("bad name: x\r\n", 13, &n, &nl, &v, &vl));
	ck_assert(!hdr_split_line(":x\r\n", 4, &n, &nl, &v, &vl));
}
END_TEST

static Suite *headers_suite(void)
{
	Suite *s = suite_create("headers");
	TCase *tc = tcase_create("headers");
	tcase_add_test(tc, hop_by_hop_fields_are_dropped);
	tcase_add_test(tc, end_to_end_fields_cross);
	tcase_add_test(tc, connection_listed_fields_are_dropped);
	tcase_add_test(tc, curl_owned_request_fields);
	tcase_add_test(tc, split_lines);
	tcase_add_test(tc, client_timeouts);
	tcase_add_test(tc, priorities);
	tcase_add_test(tc, pacer_fields_stay_here);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("headers", headers_suite)
