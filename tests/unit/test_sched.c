/* sched: dispatch order (FIFO, agent serialization, retries at the head),
 * the concurrency and rate gates, queue limits, holds. Clock injected. */
#include <string.h>

#include "config.h"
#include "sched.h"
#include "unit.h"

static struct config *cfg;
static struct plan_conf plan;
static struct provider_conf *prov;
static struct sched_lane lane;
static struct sched_item items[16];

static void setup(void)
{
	char err[256];
	cfg = config_load(NULL, NULL, err, sizeof(err));
	ck_assert_msg(cfg != NULL, "%s", err);
	plan = *config_plan(cfg, "default");
	prov = (struct provider_conf *)config_provider(cfg, "openai");
	memset(items, 0, sizeof(items));
}

static void teardown(void)
{
	sched_lane_release(&lane);
	config_free(cfg);
}

static void fixed_concurrency(unsigned n)
{
	plan.concurrency.adaptive = false;
	plan.max_concurrent = n;
	plan.concurrency.initial = n;
	plan.concurrency.min = 1;
}

static void init_lane(enum agents_mode mode)
{
	sched_lane_release(&lane);
	sched_lane_init(&lane, prov, &plan, mode, 1000);
}

static int idx(struct sched_item *it)
{
	return it == NULL ? -1 : (int)(it - items);
}

START_TEST(fifo_order)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sched_submit(&lane, &items[i], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_int_eq(lane.q_depth, 3);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 2);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert_int_eq(lane.in_flight, 3);
	ck_assert_int_eq(items[0].attempts, 1);
}
END_TEST

START_TEST(concurrency_gate)
{
	fixed_concurrency(2);
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		sched_submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	/* Blocked by concurrency only: nothing to wake for but the max wait. */
	ck_assert_int_eq(sched_wake_at(&lane, 1000), 1000 + (int64_t)plan.queue.max_wait_s * 1000);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1200);
	ck_assert_int_eq(idx(sched_next(&lane, 1200)), 2);
}
END_TEST

START_TEST(rate_gate_spaces_requests)
{
	plan.max_requests_per_second = 10; /* one per 100 ms */
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		sched_submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	int64_t wake = sched_wake_at(&lane, 1000);
	ck_assert_int_ge(wake, 1099);
	ck_assert_int_le(wake, 1100);
	ck_assert_ptr_null(sched_next(&lane, 1050));
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 1);
	ck_assert_int_eq(idx(sched_next(&lane, 1200)), 2);
}
END_TEST

START_TEST(queue_full)
{
	plan.queue.max_depth = 2;
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	ck_assert_int_eq(sched_submit(&lane, &items[0], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_int_eq(sched_submit(&lane, &items[1], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_int_eq(sched_submit(&lane, &items[2], 0, 0, 0, 1000), SCHED_QUEUE_FULL);
	ck_assert_int_eq(lane.stats.rejected_queue_full, 1);
	/* Dispatching frees a place. */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(sched_submit(&lane, &items[2], 0, 0, 0, 1000), SCHED_OK);
}
END_TEST

START_TEST(queue_timeout)
{
	plan.queue.max_wait_s = 2;
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	sched_submit(&lane, &items[0], 0, 0, 0, 1000);
	sched_submit(&lane, &items[1], 0, 0, 0, 1500);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(sched_wake_at(&lane, 1000), 3500);
	ck_assert_ptr_null(sched_expired(&lane, 3499));
	ck_assert_int_eq(idx(sched_expired(&lane, 3500)), 1);
	ck_assert_ptr_null(sched_expired(&lane, 3500));
	ck_assert_int_eq(lane.q_depth, 0);
	ck_assert_int_eq(lane.stats.queue_timeouts, 1);
}
END_TEST

START_TEST(agents_serialize)
{
	init_lane(AGENTS_SERIALIZE);
	sched_submit(&lane, &items[0], 0, 0, 7, 1000); /* agent 7 */
	sched_submit(&lane, &items[1], 0, 0, 7, 1000); /* agent 7 again */
	sched_submit(&lane, &items[2], 0, 0, 9, 1000); /* agent 9 */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	/* Agent 7 is busy: the next eligible request goes instead. */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 2);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 1);
}
END_TEST

START_TEST(agents_reject)
{
	init_lane(AGENTS_REJECT);
	ck_assert_int_eq(sched_submit(&lane, &items[0], 0, 0, 7, 1000), SCHED_OK);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(sched_submit(&lane, &items[1], 0, 0, 7, 1000), SCHED_AGENT_BUSY);
	ck_assert_int_eq(sched_submit(&lane, &items[2], 0, 0, 8, 1000), SCHED_OK);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	ck_assert_int_eq(sched_submit(&lane, &items[1], 0, 0, 7, 1100), SCHED_OK);
}
END_TEST

START_TEST(agents_off_ignores_agent)
{
	init_lane(AGENTS_OFF);
	sched_submit(&lane, &items[0], 0, 0, 7, 1000);
	sched_submit(&lane, &items[1], 0, 0, 7, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
}
END_TEST

START_TEST(retry_goes_back_to_the_head)
{
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		sched_submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_complete(&lane, &items[0], SCHED_TRANSIENT, 1100);
	sched_retry(&lane, &items[0], 1600);
	ck_assert_int_eq(items[0].state, SCHED_RETRY_WAIT);
	/* The slot is free while the retry waits: the next request uses it. */
	ck_assert_int_eq(lane.in_flight, 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 1);
	ck_assert_int_eq(sched_wake_at(&lane, 1100), 1600);
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 1700);
	/* Due now: the retry goes before request 2, which waited longer. */
	ck_assert_int_eq(idx(sched_next(&lane, 1700)), 0);
	ck_assert_int_eq(items[0].attempts, 2);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1800);
	ck_assert_int_eq(idx(sched_next(&lane, 1800)), 2);
	ck_assert(sched_lane_idle(&lane) == false);
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 1900);
	ck_assert(sched_lane_idle(&lane));
}
END_TEST

START_TEST(retries_are_paced_like_new_requests)
{
	plan.max_requests_per_second = 10;
	init_lane(AGENTS_OFF);
	sched_submit(&lane, &items[0], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_complete(&lane, &items[0], SCHED_TRANSIENT, 1010);
	sched_retry(&lane, &items[0], 1020);
	ck_assert_ptr_null(sched_next(&lane, 1020)); /* due, but the gate says 1100 */
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 0);
}
END_TEST

START_TEST(cancel_anywhere)
{
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		sched_submit(&lane, &items[i], 0, 0, 0, 1000);
	sched_cancel(&lane, &items[1]);
	ck_assert_int_eq(lane.q_depth, 2);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1100);
	sched_retry(&lane, &items[0], 5000);
	sched_cancel(&lane, &items[0]);
	ck_assert_int_eq(lane.n_waiting, 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 2);
	ck_assert_ptr_null(sched_next(&lane, 6000));
	sched_complete(&lane, &items[2], SCHED_ABORTED, 6000);
	ck_assert(sched_lane_idle(&lane));
}
END_TEST

START_TEST(hold_blocks_the_lane)
{
	init_lane(AGENTS_OFF);
	sched_hold(&lane, 4000);
	sched_submit(&lane, &items[0], 0, 0, 0, 1000);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert_int_eq(sched_wake_at(&lane, 1000), 4000);
	ck_assert_ptr_null(sched_next(&lane, 3999));
	ck_assert_int_eq(idx(sched_next(&lane, 4000)), 0);
}
END_TEST

START_TEST(empty_lane_never_wakes)
{
	init_lane(AGENTS_OFF);
	ck_assert_int_eq(sched_wake_at(&lane, 1000), SCHED_NEVER);
	ck_assert(sched_lane_idle(&lane));
	ck_assert_ptr_null(sched_next(&lane, 1000));
}
END_TEST

START_TEST(saturation_is_recorded)
{
	fixed_concurrency(2);
	init_lane(AGENTS_OFF);
	sched_submit(&lane, &items[0], 0, 0, 0, 1000);
	sched_submit(&lane, &items[1], 0, 0, 0, 1000);
	sched_next(&lane, 1000);
	sched_next(&lane, 1000);
	ck_assert(!items[0].saturated);
	ck_assert(items[1].saturated);
}
END_TEST

START_TEST(a_burst_of_capacity_errors_is_one_signal)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 6; i++)
		sched_submit(&lane, &items[i], 0, 0, 0, 1000);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000 + i)), i);
	/* All four were sent before the first error came back: one reaction. */
	for (int i = 0; i < 4; i++)
		sched_complete(&lane, &items[i], SCHED_CAPACITY, 1200 + i);
	ck_assert_int_eq(lane.stats.capacity_signals, 4);
	ck_assert_int_eq(lane.stats.capacity_reactions, 1);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 2); /* 4 x 0.5, once */
	ck_assert_int_eq(aimd_delay_ms(&lane.delay), 100);   /* from 0: 100 ms, once */
	/* A request sent after the reaction that fails again is news. */
	int64_t t = sched_wake_at(&lane, 1300);
	ck_assert_int_eq(idx(sched_next(&lane, t)), 4);
	sched_complete(&lane, &items[4], SCHED_CAPACITY, t + 2000);
	ck_assert_int_eq(lane.stats.capacity_reactions, 2);
	ck_assert_int_eq(aimd_delay_ms(&lane.delay), 200);
}
END_TEST

static Suite *sched_suite(void)
{
	Suite *s = suite_create("sched");
	TCase *tc = tcase_create("sched");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, fifo_order);
	tcase_add_test(tc, concurrency_gate);
	tcase_add_test(tc, rate_gate_spaces_requests);
	tcase_add_test(tc, queue_full);
	tcase_add_test(tc, queue_timeout);
	tcase_add_test(tc, agents_serialize);
	tcase_add_test(tc, agents_reject);
	tcase_add_test(tc, agents_off_ignores_agent);
	tcase_add_test(tc, retry_goes_back_to_the_head);
	tcase_add_test(tc, retries_are_paced_like_new_requests);
	tcase_add_test(tc, cancel_anywhere);
	tcase_add_test(tc, hold_blocks_the_lane);
	tcase_add_test(tc, empty_lane_never_wakes);
	tcase_add_test(tc, saturation_is_recorded);
	tcase_add_test(tc, a_burst_of_capacity_errors_is_one_signal);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("sched", sched_suite)
