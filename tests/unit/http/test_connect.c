/* SPDX-License-Identifier: Apache-2.0 */
/* connect: the authority-form target of a CONNECT, accepted and refused. */
#include <string.h>

#include "http/connect.h"
#include "unit.h"

static bool parse(const char *s, struct connect_target *t)
{
	return connect_parse(s, strlen(s), t);
}

START_TEST(names_and_ports)
{
	struct connect_target t;
	ck_assert(parse("api.openai.com:443", &t));
	ck_assert_str_eq(t.host, "api.openai.com");
	ck_assert_uint_eq(t.port, 443);
	ck_assert(!t.ip_literal);
	ck_assert(parse("API.OpenAI.Com:8443", &t));
	ck_assert_str_eq(t.host, "api.openai.com"); /* lower case, as routing compares */
	ck_assert_uint_eq(t.port, 8443);
	ck_assert(parse("a:1", &t));
	ck_assert(parse("x_y-z.example:65535", &t));
	ck_assert_uint_eq(t.port, 65535);
}
END_TEST

START_TEST(ip_literals)
{
	struct connect_target t;
	ck_assert(parse("127.0.0.1:443", &t));
	ck_assert(t.ip_literal);
	ck_assert_str_eq(t.host, "127.0.0.1");
	ck_assert(parse("[::1]:443", &t));
	ck_assert(t.ip_literal);
	ck_assert_str_eq(t.host, "[::1]");
	ck_assert(parse("[2001:DB8::1]:443", &t));
	ck_assert_str_eq(t.host, "[2001:db8::1]");
	ck_assert(!parse("[::1]", &t));
	ck_assert(!parse("[::1]443", &t));
	ck_assert(!parse("[nothex]:443", &t));
	ck_assert(!parse("[]:443", &t));
	ck_assert(!parse("::1:443", &t)); /* a bare IPv6 literal: ambiguous */
}
END_TEST

START_TEST(refused)
{
	static const char *bad[] = {
	    "",
	    "api.openai.com",      /* no port */
	    "api.openai.com:",     /* empty port */
	    ":443",                /* no host */
	    "api.openai.com:0",    /* port 0 */
	    "api.openai.com:0443", /* a leading zero */
	    "api.openai.com:65536",
	    "api.openai.com:443x",
	    "api.openai.com:+443",
	    "api.openai.com:-1",
	    "api.openai.com:123456",
	    "user@api.openai.com:443", /* userinfo */
	    "api.openai.com:443/x",    /* a path */
	    "api.openai.com.:443",     /* a trailing dot names another certificate */
	    ".api.openai.com:443",
	    "api..openai.com:443",
	    "api%2eopenai.com:443",
	    "api openai.com:443",
	    "http://api.openai.com:443",
	    "api.openai.com:443:443",
	};
	struct connect_target t;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!parse(bad[i], &t), "accepted '%s'", bad[i]);
	char label[80];
	memset(label, 'a', 64);
	memcpy(label + 64, ".x:443", 7);
	ck_assert(!parse(label, &t)); /* a label over 63 bytes */
	char longname[300];
	memset(longname, 'a', sizeof(longname));
	for (size_t i = 50; i < 290; i += 51)
		longname[i] = '.';
	memcpy(longname + 290, ":443", 5);
	ck_assert(!parse(longname, &t)); /* a name over 253 bytes */
	ck_assert(!connect_parse(NULL, 0, &t));
	/* The length given is what counts, not a NUL. */
	ck_assert(connect_parse("a.b:443garbage", 7, &t));
	ck_assert_uint_eq(t.port, 443);
}
END_TEST

static Suite *connect_suite(void)
{
	Suite *s = suite_create("connect");
	TCase *c = tcase_create("core");
	tcase_add_test(c, names_and_ports);
	tcase_add_test(c, ip_literals);
	tcase_add_test(c, refused);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("connect", connect_suite)
