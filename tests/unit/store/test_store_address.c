/* SPDX-License-Identifier: Apache-2.0 */
/* store_address: what store.redis.address names, and the name a TLS
 * certificate is checked against. */
#include <string.h>

#include "store/store_address.h"
#include "unit.h"

START_TEST(host_names_and_ips)
{
	struct store_address a;
	ck_assert_int_eq(store_address_parse("redis.example.com:6380", &a), 0);
	ck_assert(!a.unix_socket && !a.ip);
	ck_assert_str_eq(a.host, "redis.example.com");
	ck_assert_uint_eq(a.port, 6380);
	ck_assert_int_eq(store_address_parse("localhost:6379", &a), 0);
	ck_assert(!a.ip);
	ck_assert_int_eq(store_address_parse("127.0.0.1:6379", &a), 0);
	ck_assert(a.ip);
	ck_assert_str_eq(a.host, "127.0.0.1");
	ck_assert_int_eq(store_address_parse("[::1]:7000", &a), 0);
	ck_assert(a.ip);
	ck_assert_str_eq(a.host, "::1");
	ck_assert_uint_eq(a.port, 7000);
}
END_TEST

START_TEST(unix_sockets)
{
	struct store_address a;
	ck_assert_int_eq(store_address_parse("unix:/run/redis/redis.sock", &a), 0);
	ck_assert(a.unix_socket);
	ck_assert_str_eq(a.path, "/run/redis/redis.sock");
	ck_assert_int_eq(store_address_parse("unix:relative.sock", &a), -1);
	char longpath[200] = "unix:/";
	memset(longpath + 6, 'x', sizeof(longpath) - 7);
	longpath[sizeof(longpath) - 1] = '\0';
	ck_assert_int_eq(store_address_parse(longpath, &a), -1);
}
END_TEST

START_TEST(refused)
{
	struct store_address a;
	static const char *const bad[] = {"",
	                                  "redis.example.com",
	                                  "redis.example.com:0",
	                                  "redis.example.com:65536",
	                                  ":6379",
	                                  "::1:6379",
	                                  "[::1]6379",
	                                  "red is:6379",
	                                  "redis://127.0.0.1:6379"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(store_address_parse(bad[i], &a) == -1, "accepted '%s'", bad[i]);
	ck_assert_int_eq(store_address_parse(NULL, &a), -1);
}
END_TEST

START_TEST(tls_name)
{
	struct store_address a;
	ck_assert_int_eq(store_address_parse("redis.internal:6380", &a), 0);
	ck_assert_str_eq(store_address_tls_name(&a, ""), "redis.internal");
	ck_assert_str_eq(store_address_tls_name(&a, NULL), "redis.internal");
	ck_assert_str_eq(store_address_tls_name(&a, "cache.example.com"), "cache.example.com");
	ck_assert_int_eq(store_address_parse("10.0.0.7:6380", &a), 0);
	ck_assert_str_eq(store_address_tls_name(&a, ""), "10.0.0.7");
}
END_TEST

static Suite *store_address_suite(void)
{
	Suite *s = suite_create("store_address");
	TCase *c = tcase_create("parse");
	tcase_add_test(c, host_names_and_ips);
	tcase_add_test(c, unix_sockets);
	tcase_add_test(c, refused);
	tcase_add_test(c, tls_name);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("store_address", store_address_suite)
