/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for identity: which budget a request and an answer name beyond
 * their key, through each built-in provider's profile (PROVIDERS.md §10). */
#include <string.h>

#include "core/config.h"
#include "proxy/identity.h"
#include "proxy/lanes.h"
#include "unit.h"

static struct config *cfg;

static void setup(void)
{
	char err[256];
	cfg = config_load(NULL, NULL, err, sizeof err);
	ck_assert_msg(cfg != NULL, "%s", err);
}

static void teardown(void)
{
	config_free(cfg);
}

static void add(struct intake_headers *ih, const char *name, const char *value)
{
	intake_headers_add(ih, name, strlen(name), value, strlen(value));
}

START_TEST(a_request_names_the_narrowest)
{
	const struct provider_conf *oa = config_provider(cfg, "openai");
	struct intake_headers ih;
	intake_headers_init(&ih, NULL);
	ck_assert_uint_eq(identity_of_request(oa, &ih), 0);
	add(&ih, "OpenAI-Organization", "org-1");
	ck_assert_uint_eq(identity_of_request(oa, &ih), lanes_identity(oa, "org", "org-1", 5));
	add(&ih, "openai-project", "proj_a");
	/* the project is narrower than the organization, whatever their order */
	ck_assert_uint_eq(identity_of_request(oa, &ih), lanes_identity(oa, "project", "proj_a", 6));
	intake_headers_init(&ih, NULL);
	add(&ih, "openai-project", "");
	ck_assert_uint_eq(identity_of_request(oa, &ih), 0); /* empty: none */
}
END_TEST

START_TEST(an_answer_names_what_it_billed)
{
	const struct provider_conf *an = config_provider(cfg, "anthropic");
	const struct provider_conf *oa = config_provider(cfg, "openai");
	struct up_header h[] = {
	    {"content-type", 12, "application/json", 16},
	    {"anthropic-organization-id", 25, "org-9", 5},
	    {"Anthropic-Workspace-Id", 22, "wrk-3", 5},
	};
	ck_assert_uint_eq(identity_of_answer(an, h, 3),
	                  lanes_identity(an, "workspace", "wrk-3", 5));
	ck_assert_uint_eq(identity_of_answer(an, h, 2), lanes_identity(an, "org", "org-9", 5));
	ck_assert_uint_eq(identity_of_answer(an, h, 1), 0);
	/* the first field of a name counts: an empty one does not teach */
	struct up_header e[] = {
	    {"openai-project", 14, "", 0},
	    {"openai-project", 14, "proj_late", 9},
	    {"openai-organization", 19, "org-2", 5},
	};
	ck_assert_uint_eq(identity_of_answer(oa, e, 3), lanes_identity(oa, "org", "org-2", 5));
	/* the same value under two providers is two identities */
	ck_assert_uint_ne(lanes_identity(oa, "org", "org-2", 5),
	                  lanes_identity(an, "org", "org-2", 5));
}
END_TEST

static Suite *identity_suite(void)
{
	Suite *s = suite_create("identity");
	TCase *tc = tcase_create("identity");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_request_names_the_narrowest);
	tcase_add_test(tc, an_answer_names_what_it_billed);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("identity", identity_suite)
