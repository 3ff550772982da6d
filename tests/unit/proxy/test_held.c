/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for held: an upstream answer kept back whole and read back as
 * it came, its body capped. */
#include <string.h>

#include "proxy/held.h"
#include "sched/retry.h"
#include "unit.h"

#define UH(n, v)                                                                                   \
	{                                                                                          \
		n, sizeof(n) - 1, v, sizeof(v) - 1                                                 \
	}

START_TEST(an_answer_reads_back_as_it_came)
{
	const struct up_header in[] = {UH("content-type", "application/json"),
	                               UH("retry-after", "2"), UH("x-empty", "")};
	struct held h = {0};
	for (int round = 0; round < 2; round++) { /* the buffer serves again */
		ck_assert(held_start(&h, in, 3, "Too Many Requests"));
		ck_assert(held_add(&h, "{\"error\":", 9));
		ck_assert(held_add(&h, "{}}", 3));
		ck_assert_str_eq(h.reason, "Too Many Requests");
		struct up_header out[4];
		ck_assert_uint_eq(held_head(&h, out, 4), 3);
		for (size_t i = 0; i < 3; i++) {
			ck_assert_uint_eq(out[i].name_len, in[i].name_len);
			ck_assert_str_eq(out[i].name, in[i].name);
			ck_assert_uint_eq(out[i].value_len, in[i].value_len);
			ck_assert_str_eq(out[i].value, in[i].value);
		}
		ck_assert_uint_eq(held_head(&h, out, 2), 2); /* at most max */
		size_t len;
		const char *body = held_body(&h, &len);
		ck_assert_uint_eq(len, 12);
		ck_assert(memcmp(body, "{\"error\":{}}", 12) == 0);
		held_clear(&h);
		ck_assert_uint_eq(held_head(&h, out, 4), 0);
		ck_assert_ptr_null(held_body(&h, &len));
		ck_assert_uint_eq(len, 0);
		ck_assert_str_eq(h.reason, "");
	}
	held_free(&h);
}
END_TEST

START_TEST(the_body_is_capped)
{
	static char big[RETRY_BODY_CAP];
	memset(big, 'x', sizeof(big));
	const struct up_header in[] = {UH("a", "b")};
	struct held h = {0};
	ck_assert(held_start(&h, in, 1, NULL));
	ck_assert_str_eq(h.reason, "");
	ck_assert(held_add(&h, big, sizeof(big) - 1));
	ck_assert(!held_add(&h, "yz", 2)); /* one byte too many: nothing added */
	ck_assert(held_add(&h, "y", 1));   /* exactly the cap */
	size_t len;
	const char *body = held_body(&h, &len);
	ck_assert_uint_eq(len, RETRY_BODY_CAP);
	ck_assert_int_eq(body[len - 1], 'y');
	held_free(&h);
}
END_TEST

START_TEST(nothing_held)
{
	struct held h = {0};
	struct up_header out[1];
	size_t len = 7;
	ck_assert_uint_eq(held_head(&h, out, 1), 0);
	ck_assert_ptr_null(held_body(&h, &len));
	ck_assert_uint_eq(len, 0);
	held_clear(&h);
	ck_assert(held_ready(&h));
	ck_assert_ptr_nonnull(h.buf);
	held_free(&h);
	ck_assert_ptr_null(h.buf);
}
END_TEST

static Suite *held_suite(void)
{
	Suite *s = suite_create("held");
	TCase *tc = tcase_create("held");
	tcase_add_test(tc, an_answer_reads_back_as_it_came);
	tcase_add_test(tc, the_body_is_capped);
	tcase_add_test(tc, nothing_held);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("held", held_suite)
