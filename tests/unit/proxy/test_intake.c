/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for intake: the request's header fields read in one pass, found
 * by name in any case, the first of each name winning. */
#include <string.h>

#include "provider/profile.h"
#include "proxy/intake.h"
#include "unit.h"

static void add(struct intake_headers *ih, const char *name, const char *value)
{
	intake_headers_add(ih, name, strlen(name), value, strlen(value));
}

START_TEST(every_known_name_is_found_in_any_case)
{
	ck_assert_uint_gt(intake_fields(), IF_FIXED);
	ck_assert_uint_le(intake_fields(), INTAKE_FIELDS_MAX);
	for (size_t f = 0; f < intake_fields(); f++) {
		const char *name = intake_field_name(f);
		size_t len = strlen(name);
		ck_assert_uint_gt(len, 0);
		ck_assert_int_eq(intake_field_of(name, len), (int)f);
		char upper[INTAKE_NAME_MAX + 2];
		ck_assert_uint_le(len, INTAKE_NAME_MAX);
		for (size_t i = 0; i < len; i++)
			upper[i] =
			    name[i] >= 'a' && name[i] <= 'z' ? (char)(name[i] - 32) : name[i];
		ck_assert_int_eq(intake_field_of(upper, len), (int)f);
		/* one letter off, or one longer or shorter: not it */
		char near[INTAKE_NAME_MAX + 2];
		memcpy(near, name, len);
		near[len - 1] = near[len - 1] == 'z' ? 'y' : 'z';
		ck_assert_int_eq(intake_field_of(near, len), -1);
		near[0] = name[0] == 'q' ? 'r' : 'q';
		near[len - 1] = name[len - 1];
		ck_assert_int_eq(intake_field_of(near, len), -1);
		near[0] = name[0];
		near[len] = 's';
		ck_assert_int_eq(intake_field_of(near, len + 1), -1);
		ck_assert_int_eq(intake_field_of(name, len - 1), -1);
	}
	ck_assert_str_eq(intake_field_name(IF_HOST), "host");
	ck_assert_str_eq(intake_field_name(IF_X_STAINLESS_TIMEOUT), "x-stainless-timeout");
	ck_assert_str_eq(intake_field_name(IF_REQUEST_TIMEOUT_MS), "request-timeout-ms");
	ck_assert_int_eq(intake_field_of("Request-Timeout-Ms", 18), IF_REQUEST_TIMEOUT_MS);
	const char *others[] = {
	    "user-agent", "x-stainless-os", "content-encoding",  "cookie",
	    "",           "openai-beta",    "anthropic-version", "x-request-id"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		ck_assert_int_eq(intake_field_of(others[i], strlen(others[i])), -1);
}
END_TEST

/* Looked up on every request: never by a scan. */
static void assert_known(const char *name)
{
	ck_assert_ptr_nonnull(name);
	ck_assert_msg(intake_field_of(name, strlen(name)) >= 0, "%s is not a known name", name);
}

START_TEST(every_profile_name_a_request_is_read_for_is_known)
{
	for (int s = KEY_AUTHORIZATION; s <= KEY_QUERY_KEY; s++)
		if (s != KEY_QUERY_KEY)
			assert_known(profile_key_header((enum key_source)s));
	size_t n;
	const struct provider_profile *rows = profile_builtins(&n);
	ck_assert_uint_gt(n, 0);
	for (size_t r = 0; r <= n; r++) {
		const struct provider_profile *pp = r < n ? &rows[r] : profile_of(NULL);
		assert_known(profile_key_header(pp->conf.key_source));
		for (size_t i = 0; i < pp->n_key_fallbacks; i++)
			if (pp->key_fallbacks[i] != KEY_QUERY_KEY)
				assert_known(profile_key_header(pp->key_fallbacks[i]));
		for (size_t i = 0; i < pp->n_request_identity; i++)
			assert_known(pp->request_identity[i].header);
	}
}
END_TEST

START_TEST(one_pass_reads_what_intake_and_the_exchange_need)
{
	struct intake_headers ih;
	intake_headers_init(&ih, "x-agent-id");
	add(&ih, "Host", "api.openai.com");
	add(&ih, "User-Agent", "OpenAI/JS 4.77.0");
	add(&ih, "Authorization", "Bearer sk-1");
	add(&ih, "X-Stainless-Timeout", "600");
	add(&ih, "OpenAI-Organization", "org-1");
	add(&ih, "X-Agent-ID", "planner");
	add(&ih, "Connection", "keep-alive");
	add(&ih, "x-pacer-priority", "");
	add(&ih, "authorization", "Bearer sk-2"); /* not the first: ignored */
	add(&ih, "x-agent-id", "other");
	ck_assert_uint_eq(ih.n, 10);
	size_t bytes = 0;
	const char *pairs[] = {"Host",
	                       "api.openai.com",
	                       "User-Agent",
	                       "OpenAI/JS 4.77.0",
	                       "Authorization",
	                       "Bearer sk-1",
	                       "X-Stainless-Timeout",
	                       "600",
	                       "OpenAI-Organization",
	                       "org-1",
	                       "X-Agent-ID",
	                       "planner",
	                       "Connection",
	                       "keep-alive",
	                       "x-pacer-priority",
	                       "",
	                       "authorization",
	                       "Bearer sk-2",
	                       "x-agent-id",
	                       "other"};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		bytes += strlen(pairs[i]);
	ck_assert_uint_eq(ih.bytes, bytes);
	ck_assert_uint_eq(ih.hosts, 1);
	ck_assert_str_eq(ih.value[IF_HOST], "api.openai.com");
	ck_assert_str_eq(intake_header(&ih, "authorization"), "Bearer sk-1");
	ck_assert_str_eq(ih.value[IF_X_STAINLESS_TIMEOUT], "600");
	ck_assert_str_eq(intake_header(&ih, "openai-organization"), "org-1");
	ck_assert_str_eq(ih.value[IF_CONNECTION], "keep-alive");
	ck_assert_str_eq(ih.value[IF_X_PACER_PRIORITY], ""); /* there, empty */
	ck_assert_ptr_null(intake_header(&ih, "openai-project"));
	ck_assert_ptr_null(intake_header(&ih, "x-api-key"));
	ck_assert_ptr_null(ih.value[IF_CONTENT_TYPE]);
	ck_assert_str_eq(ih.agent, "planner");
	/* by name, in any case */
	ck_assert_str_eq(intake_header(&ih, "AUTHORIZATION"), "Bearer sk-1");
	ck_assert_str_eq(intake_header(&ih, "x-agent-id"), "planner");
	ck_assert_ptr_null(intake_header(&ih, "x-api-key"));
	ck_assert_ptr_null(intake_header(&ih, "user-agent")); /* not listed, no request to scan */
}
END_TEST

START_TEST(host_fields_are_counted)
{
	struct intake_headers ih;
	intake_headers_init(&ih, "x-agent-id");
	ck_assert_uint_eq(ih.hosts, 0);
	add(&ih, "host", "a");
	add(&ih, "HOST", "b");
	ck_assert_uint_eq(ih.hosts, 2);
	ck_assert_str_eq(ih.value[IF_HOST], "a");
}
END_TEST

START_TEST(the_agent_header_may_be_a_known_name)
{
	struct intake_headers ih;
	intake_headers_init(&ih, "openai-project");
	add(&ih, "OpenAI-Project", "proj-1");
	ck_assert_str_eq(ih.agent, "proj-1");
	ck_assert_str_eq(intake_header(&ih, "openai-project"), "proj-1");
	/* and nothing is an agent without an agents.header */
	intake_headers_init(&ih, NULL);
	add(&ih, "x-agent-id", "a");
	ck_assert_ptr_null(ih.agent);
	ck_assert_ptr_null(intake_header(&ih, "x-agent-id"));
}
END_TEST

static Suite *intake_suite(void)
{
	Suite *s = suite_create("intake");
	TCase *tc = tcase_create("intake");
	tcase_add_test(tc, every_known_name_is_found_in_any_case);
	tcase_add_test(tc, every_profile_name_a_request_is_read_for_is_known);
	tcase_add_test(tc, one_pass_reads_what_intake_and_the_exchange_need);
	tcase_add_test(tc, host_fields_are_counted);
	tcase_add_test(tc, the_agent_header_may_be_a_known_name);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("intake", intake_suite)
