/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for refusal: each refusal of the lanes, and each failed
 * transport, as the client sees it (DESIGN §6; PROVIDERS.md §8's hints). */
#include <string.h>

#include "proxy/refusal.h"
#include "unit.h"

static struct refusal lane(enum lane_refusal why, int64_t wait_ms)
{
	struct lane_refusal_info info = {.why = why, .wait_ms = wait_ms, .depth = 7, .limit_s = 30};
	struct refusal r;
	refusal_of_lane(&info, 31500, 12000, &r);
	return r;
}

START_TEST(every_refusal_has_its_status_and_code)
{
	static const struct {
		enum lane_refusal why;
		int status;
		const char *code;
	} want[] = {
	    {LANE_REFUSE_TOO_MANY_LANES, 503, "too_many_keys"},
	    {LANE_REFUSE_STORE_DOWN, 503, "store_unavailable"},
	    {LANE_REFUSE_DEADLINE, 503, "deadline_unreachable"},
	    {LANE_REFUSE_QUEUE_FULL, 503, "queue_full"},
	    {LANE_REFUSE_EVICTED, 503, "queue_full"},
	    {LANE_REFUSE_QUEUE_TIMEOUT, 504, "queue_timeout"},
	    {LANE_REFUSE_AGENT_BUSY, 409, "agent_busy"},
	    {LANE_REFUSE_QUOTA, 429, "quota_exhausted"},
	    {LANE_REFUSE_DAY_OUT, 429, "daily_budget_exhausted"},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct refusal r = lane(want[i].why, 5000);
		ck_assert_int_eq(r.status, want[i].status);
		ck_assert_str_eq(r.code, want[i].code);
		ck_assert_uint_gt(strlen(r.message), 20);
		ck_assert(r.replay_quota == (want[i].why == LANE_REFUSE_QUOTA));
	}
}
END_TEST

START_TEST(transport_failures_have_their_retry_class)
{
	ck_assert_int_eq(refusal_transport_class(UP_OK), RETRY_TRANSPORT_NONE);
	ck_assert_int_eq(refusal_transport_class(UP_CONNECT), RETRY_TRANSPORT_CONNECT);
	ck_assert_int_eq(refusal_transport_class(UP_RESOLVE), RETRY_TRANSPORT_CONNECT);
	ck_assert_int_eq(refusal_transport_class(UP_TLS), RETRY_TRANSPORT_CONNECT);
	ck_assert_int_eq(refusal_transport_class(UP_TLS_VERIFY), RETRY_TRANSPORT_CERT);
	ck_assert_int_eq(refusal_transport_class(UP_TIMEOUT), RETRY_TRANSPORT_TIMEOUT);
	ck_assert_int_eq(refusal_transport_class(UP_RESET), RETRY_TRANSPORT_RESET);
	ck_assert_int_eq(refusal_transport_class(UP_TOO_LARGE), RETRY_TRANSPORT_RESET);
	ck_assert_int_eq(refusal_transport_class(UP_INTERNAL), RETRY_TRANSPORT_RESET);
}
END_TEST

START_TEST(messages_say_the_numbers)
{
	struct refusal r = lane(LANE_REFUSE_DEADLINE, 45000);
	ck_assert_str_eq(r.message, "the queue of this API key needs about 45000 ms, more than the "
	                            "12000 ms this request allows");
	r = lane(LANE_REFUSE_QUEUE_TIMEOUT, -1);
	ck_assert_str_eq(r.message, "waited 31s in the queue of this key without being sent");
	r = lane(LANE_REFUSE_DAY_OUT, 3600001); /* rounded up */
	ck_assert_str_eq(r.message,
	                 "the daily budget of this API key is spent (max_requests_per_day, "
	                 "max_tokens_per_day); it starts over in 3601s");
	r = lane(LANE_REFUSE_EVICTED, 1);
	ck_assert_ptr_nonnull(strstr(r.message, "higher priority"));
}
END_TEST

START_TEST(retry_hints)
{
	/* a full queue's ETA, clamped to 1..60 s, also when unknown */
	ck_assert_int_eq(lane(LANE_REFUSE_QUEUE_FULL, 250).retry_after_ms, 1000);
	ck_assert_int_eq(lane(LANE_REFUSE_QUEUE_FULL, -1).retry_after_ms, 1000);
	ck_assert_int_eq(lane(LANE_REFUSE_QUEUE_FULL, 4321).retry_after_ms, 4321);
	ck_assert_int_eq(lane(LANE_REFUSE_EVICTED, 600000).retry_after_ms, 60000);
	/* the store: at least a second */
	ck_assert_int_eq(lane(LANE_REFUSE_STORE_DOWN, -1).retry_after_ms, 1000);
	ck_assert_int_eq(lane(LANE_REFUSE_STORE_DOWN, 5000).retry_after_ms, 5000);
	/* too many keys: the wait as it is, none when unknown */
	ck_assert_int_eq(lane(LANE_REFUSE_TOO_MANY_LANES, 1500).retry_after_ms, 1500);
	ck_assert_int_eq(lane(LANE_REFUSE_TOO_MANY_LANES, -1).retry_after_ms, -1);
	/* a deadline and the day: only a wait an SDK honours */
	ck_assert_int_eq(lane(LANE_REFUSE_DEADLINE, 60000).retry_after_ms, 60000);
	ck_assert_int_eq(lane(LANE_REFUSE_DEADLINE, 60001).retry_after_ms, -1);
	ck_assert_int_eq(lane(LANE_REFUSE_DAY_OUT, 30000).retry_after_ms, 30000);
	ck_assert_int_eq(lane(LANE_REFUSE_DAY_OUT, 7200000).retry_after_ms, -1);
	/* none at all */
	ck_assert_int_eq(lane(LANE_REFUSE_QUEUE_TIMEOUT, 5000).retry_after_ms, -1);
	ck_assert_int_eq(lane(LANE_REFUSE_AGENT_BUSY, 5000).retry_after_ms, -1);
	ck_assert_int_eq(lane(LANE_REFUSE_QUOTA, 5000).retry_after_ms, -1);
}
END_TEST

START_TEST(no_retry_where_an_sdk_retry_cannot_help)
{
	ck_assert(lane(LANE_REFUSE_QUOTA, -1).no_retry);
	ck_assert(lane(LANE_REFUSE_DAY_OUT, 60001).no_retry);
	ck_assert(!lane(LANE_REFUSE_DAY_OUT, 60000).no_retry);
	const enum lane_refusal others[] = {LANE_REFUSE_TOO_MANY_LANES, LANE_REFUSE_STORE_DOWN,
	                                    LANE_REFUSE_DEADLINE,       LANE_REFUSE_QUEUE_FULL,
	                                    LANE_REFUSE_EVICTED,        LANE_REFUSE_QUEUE_TIMEOUT,
	                                    LANE_REFUSE_AGENT_BUSY};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		ck_assert(!lane(others[i], 3600000).no_retry);
}
END_TEST

START_TEST(log_events)
{
	struct refusal r = lane(LANE_REFUSE_DEADLINE, 45000);
	ck_assert_str_eq(r.log_event, "rejected");
	ck_assert_str_eq(r.log_key, "eta_ms");
	ck_assert_int_eq(r.log_value, 45000);
	r = lane(LANE_REFUSE_QUEUE_FULL, 1);
	ck_assert_str_eq(r.log_event, "rejected");
	ck_assert_str_eq(r.log_key, "queue_depth");
	ck_assert_int_eq(r.log_value, 7);
	r = lane(LANE_REFUSE_EVICTED, 1);
	ck_assert_str_eq(r.log_event, "evicted");
	ck_assert_int_eq(r.log_value, 7);
	r = lane(LANE_REFUSE_QUEUE_TIMEOUT, 1);
	ck_assert_str_eq(r.log_event, "timeout");
	ck_assert_str_eq(r.log_key, "timeout_s");
	ck_assert_int_eq(r.log_value, 30);
	r = lane(LANE_REFUSE_AGENT_BUSY, 1);
	ck_assert_str_eq(r.log_event, "rejected");
	ck_assert_ptr_null(r.log_key);
	ck_assert_ptr_null(lane(LANE_REFUSE_TOO_MANY_LANES, 1).log_event);
	ck_assert_ptr_null(lane(LANE_REFUSE_STORE_DOWN, 1).log_event);
	ck_assert_ptr_null(lane(LANE_REFUSE_QUOTA, 1).log_event);
	ck_assert_ptr_null(lane(LANE_REFUSE_DAY_OUT, 1).log_event);
}
END_TEST

START_TEST(transport_failures)
{
	struct refusal r;
	refusal_of_transport(UP_TIMEOUT, "first_byte_s", &r);
	ck_assert_int_eq(r.status, 504);
	ck_assert_str_eq(r.code, "upstream_timeout");
	ck_assert_str_eq(r.message, "the upstream did not answer in time (first_byte_s)");
	ck_assert_int_eq(r.retry_after_ms, -1);
	ck_assert(!r.no_retry);
	refusal_of_transport(UP_CONNECT, "Connection refused", &r);
	ck_assert_int_eq(r.status, 502);
	ck_assert_str_eq(r.code, "upstream_unreachable");
	ck_assert_str_eq(r.message,
	                 "the upstream could not be reached: connect (Connection refused)");
	refusal_of_transport(UP_RESET, NULL, &r);
	ck_assert_str_eq(r.message, "the upstream could not be reached: reset ()");
	ck_assert_ptr_null(r.log_event);
}
END_TEST

static Suite *refusal_suite(void)
{
	Suite *s = suite_create("refusal");
	TCase *tc = tcase_create("refusal");
	tcase_add_test(tc, every_refusal_has_its_status_and_code);
	tcase_add_test(tc, messages_say_the_numbers);
	tcase_add_test(tc, transport_failures_have_their_retry_class);
	tcase_add_test(tc, retry_hints);
	tcase_add_test(tc, no_retry_where_an_sdk_retry_cannot_help);
	tcase_add_test(tc, log_events);
	tcase_add_test(tc, transport_failures);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("refusal", refusal_suite)
