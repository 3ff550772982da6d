/* SPDX-License-Identifier: Apache-2.0 */
/* certcache: one value per host, replaced in place, the oldest evicted at the
 * cap, every value freed exactly once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/certcache.h"
#include "unit.h"

static int freed;

static void count_free(void *p)
{
	freed++;
	free(p);
}

static void *val(int v)
{
	int *p = malloc(sizeof(*p));
	*p = v;
	return p;
}

static int get(struct certcache *cc, const char *host)
{
	int *p = certcache_get(cc, host);
	return p != NULL ? *p : -1;
}

START_TEST(get_put_replace)
{
	struct certcache cc;
	freed = 0;
	certcache_init(&cc, 4, count_free);
	ck_assert_ptr_null(certcache_get(&cc, "api.openai.com"));
	ck_assert_int_eq(certcache_put(&cc, "api.openai.com", val(1)), 0);
	ck_assert_int_eq(certcache_put(&cc, "api.anthropic.com", val(2)), 0);
	ck_assert_int_eq(get(&cc, "api.openai.com"), 1);
	ck_assert_int_eq(get(&cc, "api.anthropic.com"), 2);
	ck_assert_int_eq(get(&cc, "API.OPENAI.COM"), -1); /* hosts come lower-cased */
	ck_assert_int_eq(certcache_put(&cc, "api.openai.com", val(3)), 0);
	ck_assert_int_eq(freed, 1);
	ck_assert_int_eq(get(&cc, "api.openai.com"), 3);
	ck_assert_uint_eq(cc.n, 2);
	certcache_clear(&cc);
	ck_assert_int_eq(freed, 3);
	ck_assert_uint_eq(cc.n, 0);
}
END_TEST

START_TEST(cap_evicts_the_oldest)
{
	struct certcache cc;
	char host[32];
	freed = 0;
	certcache_init(&cc, 3, count_free);
	for (int i = 0; i < 3; i++) {
		snprintf(host, sizeof(host), "h%d", i);
		certcache_put(&cc, host, val(i));
	}
	certcache_put(&cc, "h0", val(10)); /* replaced: now the newest */
	certcache_put(&cc, "h3", val(3));  /* evicts h1, the oldest */
	ck_assert_int_eq(get(&cc, "h1"), -1);
	ck_assert_int_eq(get(&cc, "h0"), 10);
	ck_assert_int_eq(get(&cc, "h2"), 2);
	ck_assert_int_eq(get(&cc, "h3"), 3);
	ck_assert_uint_eq(cc.n, 3);
	/* Many hosts through a small cache: bounded, nothing leaked. */
	for (int i = 0; i < 1000; i++) {
		snprintf(host, sizeof(host), "x%d", i);
		certcache_put(&cc, host, val(i));
		ck_assert_uint_le(cc.n, 3);
	}
	ck_assert_int_eq(get(&cc, "x999"), 999);
	certcache_clear(&cc);
	ck_assert_int_eq(freed, 1 + 3 + 1 + 1000);
	certcache_init(&cc, 0, count_free);
	ck_assert_uint_eq(cc.cap, CERTCACHE_MAX);
	certcache_init(&cc, CERTCACHE_MAX + 5, count_free);
	ck_assert_uint_eq(cc.cap, CERTCACHE_MAX);
}
END_TEST

static Suite *certcache_suite(void)
{
	Suite *s = suite_create("certcache");
	TCase *c = tcase_create("core");
	tcase_add_test(c, get_put_replace);
	tcase_add_test(c, cap_evicts_the_oldest);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("certcache", certcache_suite)
