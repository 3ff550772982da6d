/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for rewrites: a provider that refused a rewritten body while it
 * took the client's own stops being rewritten, once, and says when and why. */
#include <string.h>

#include "proxy/rewrites.h"
#include "unit.h"

START_TEST(a_refused_rewrite_stops_that_provider_only)
{
	struct rewrites r;
	rewrites_init(&r);
	ck_assert(rewrites_allowed(&r, "mistral"));
	ck_assert(rewrites_allowed(&r, "openai"));
	ck_assert(rewrites_stop(&r, "strict", 422, 200, "stream_options.include_usage", 1000));
	ck_assert(!rewrites_allowed(&r, "strict"));
	ck_assert(rewrites_allowed(&r, "openai"));
	const struct rewrite_stop *s = rewrites_stopped(&r, "strict");
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(s->status, 422);
	ck_assert_int_eq(s->resent_status, 200);
	ck_assert_str_eq(s->what, "stream_options.include_usage");
	ck_assert_int_eq(s->at_ms, 1000);
	/* the second refusal is not news: logged once, the first instant kept */
	ck_assert(!rewrites_stop(&r, "strict", 400, 200, "stream_options.include_usage", 2000));
	ck_assert_int_eq(rewrites_stopped(&r, "strict")->at_ms, 1000);
	ck_assert_ptr_null(rewrites_stopped(&r, "openai"));
}
END_TEST

START_TEST(a_full_table_stops_every_rewrite)
{
	struct rewrites r;
	rewrites_init(&r);
	char name[16];
	for (int i = 0; i < REWRITES_MAX; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		ck_assert(rewrites_stop(&r, name, 400, 200, "x", i));
	}
	ck_assert(!rewrites_stop(&r, "another", 400, 200, "x", 0));
	ck_assert(!rewrites_allowed(&r, "another")); /* never break a request */
}
END_TEST

static Suite *rewrites_suite(void)
{
	Suite *s = suite_create("rewrites");
	TCase *tc = tcase_create("rewrites");
	tcase_add_test(tc, a_refused_rewrite_stops_that_provider_only);
	tcase_add_test(tc, a_full_table_stops_every_rewrite);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("rewrites", rewrites_suite)
