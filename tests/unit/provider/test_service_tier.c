/* Unit tests for service_tier: a request's own tier read from the top level
 * of its JSON body only. */
#include <string.h>

#include "provider/service_tier.h"
#include "unit.h"

static const struct tier_vector {
	const char *body;
	bool flex;
} vectors[] = {
    {"{\"model\":\"o3\",\"service_tier\":\"flex\",\"messages\":[]}", true},
    {"{\"service_tier\" : \"flex\"}", true},
    {" \n{\"model\":\"o3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
     "\"service_tier\":\"flex\"}",
     true},
    {"{\"model\":\"o3\",\"service_tier\":\"auto\"}", false},
    {"{\"model\":\"o3\",\"service_tier\":\"default\"}", false},
    {"{\"model\":\"o3\",\"service_tier\":\"flexible\"}", false},
    {"{\"model\":\"o3\"}", false},
    /* nested or inside a string: not the request's */
    {"{\"metadata\":{\"service_tier\":\"flex\"}}", false},
    {"{\"messages\":[{\"content\":\"\\\"service_tier\\\":\\\"flex\\\"\"}]}", false},
    {"{\"tools\":[{\"parameters\":{\"service_tier\":\"flex\"}}],\"model\":\"x\"}", false},
    {"{\"a\":\"service_tier\",\"b\":\"flex\"}", false},
    {"[{\"service_tier\":\"flex\"}]", false},
    {"not json \"service_tier\":\"flex\"", false},
    {"{\"service_tier\":\"fle", false},
    {"", false},
};

START_TEST(tier_vector)
{
	const struct tier_vector *v = &vectors[_i];
	ck_assert_msg(service_tier_flex(v->body, strlen(v->body)) == v->flex, "row %d: %s", _i,
	              v->body);
}
END_TEST

START_TEST(null_and_bound)
{
	ck_assert(!service_tier_flex(NULL, 0));
	ck_assert(!service_tier_flex("{\"service_tier\":\"flex\"}", SERVICE_TIER_SCAN_MAX + 1));
}
END_TEST

static Suite *service_tier_suite(void)
{
	Suite *s = suite_create("service_tier");
	TCase *t = tcase_create("tier");
	tcase_add_loop_test(t, tier_vector, 0, (int)(sizeof vectors / sizeof vectors[0]));
	tcase_add_test(t, null_and_bound);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("service_tier", service_tier_suite)
