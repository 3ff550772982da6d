/* SPDX-License-Identifier: Apache-2.0 */
/* sched, a lane whose provider sends no rate-limit headers (issue 30): its
 * open limit starts slowly (slow_start.h) and a refusal ends that; a request
 * not written when a refusal held the lane is taken back (sched_recall); the
 * dispatch delay follows rate_probe.h once refusals bound the rate. Clock
 * injected. */
#include <math.h>
#include <string.h>

#include "core/config.h"
#include "sched/sched.h"
#include "sched/sched_lane-t.h"
#include "unit.h"

static struct config *cfg;
static struct plan_conf plan;
static struct provider_conf *prov;
static struct sched_lane lane;
static struct sched_item items[64];
static struct rlh_result no_headers;

static void setup(void)
{
	char err[256];
	cfg = config_load(NULL, NULL, err, sizeof(err));
	ck_assert_msg(cfg != NULL, "%s", err);
	plan = *config_plan(cfg, "default");
	prov = (struct provider_conf *)config_provider(cfg, "openai");
	memset(items, 0, sizeof(items));
	memset(&lane, 0, sizeof(lane));
	memset(&no_headers, 0, sizeof(no_headers));
}

static void teardown(void)
{
	sched_lane_release(&lane);
	config_free(cfg);
}

static void init_lane(void)
{
	sched_lane_release(&lane);
	sched_lane_init(&lane, prov, &plan, AGENTS_OFF, 1000);
}

static void submit_n(int from, int n, int64_t now)
{
	for (int i = from; i < from + n; i++) {
		struct sched_request rq = {.cost_prompt = 0};
		struct sched_item *evicted;
		ck_assert_int_eq(sched_submit(&lane, &items[i], &rq, now, &evicted), SCHED_OK);
	}
}

/* Dispatches what the lane lets go at now: how many. */
static int dispatch_all(int64_t now)
{
	int n = 0;
	while (sched_next(&lane, (double)now) != NULL)
		n++;
	return n;
}

/* An answer without rate-limit headers to items[i], as the lanes tell it:
 * the provider is silent, the headers observed, then the outcome. */
static void answer(int i, enum sched_outcome o, int64_t now)
{
	sched_set_provider_silent(&lane, true);
	sched_observe(&lane, &items[i], &no_headers, o == SCHED_CAPACITY, now);
	sched_complete(&lane, &items[i], o, now);
}

START_TEST(the_first_lane_of_a_silent_provider_doubles_per_round_trip)
{
	/* Not known silent yet: 4 go blind, then the lane waits for their
	 * headers. Before: open at 64 once they said nothing. */
	init_lane();
	submit_n(0, 40, 1000);
	ck_assert_int_eq(dispatch_all(1000), LEARNED_BLIND_MAX);
	/* their answers say nothing: they are slow start's first round */
	answer(0, SCHED_SUCCESS, 1200);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), LEARNED_BLIND_MAX);
	ck_assert(lane.conc.starting);
	struct sched_lane_view v; /* what /status shows */
	sched_lane_view(&lane, 1200, &v);
	ck_assert(v.slow_start);
	ck_assert_uint_eq(v.concurrency_limit, LEARNED_BLIND_MAX);
	ck_assert(v.probe_bound_rps == 0);
	answer(1, SCHED_SUCCESS, 1200);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 8);
	answer(2, SCHED_SUCCESS, 1201);
	answer(3, SCHED_SUCCESS, 1201);
	ck_assert_int_eq(dispatch_all(1201), 8);
	ck_assert_ptr_null(sched_next(&lane, 1201));
	/* the next round trip: 16 */
	for (int i = 4; i < 8; i++)
		answer(i, SCHED_SUCCESS, 1400);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 16);
	ck_assert_int_eq(dispatch_all(1400), 12); /* 16 in flight, 4 of them before */
	/* a refusal ends it: AIMD from what was in flight */
	answer(8, SCHED_CAPACITY, 1500);
	ck_assert(!lane.conc.open && !lane.conc.starting);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 8);
	sched_lane_view(&lane, 1500, &v);
	ck_assert(!v.slow_start);
	for (int i = 9; i < 24; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1600);
}
END_TEST

START_TEST(a_lane_of_a_known_silent_provider_starts_at_slow_start)
{
	plan.concurrency.slow_start = 3;
	plan.concurrency.reopen_after_s = 30;
	init_lane();
	sched_set_provider_silent(&lane, true); /* another lane said so */
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 3);
	submit_n(0, 20, 1000);
	ck_assert_int_eq(dispatch_all(1000), 3);
	answer(0, SCHED_SUCCESS, 1100);
	answer(1, SCHED_SUCCESS, 1100);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 6);
	answer(2, SCHED_SUCCESS, 1100);
	ck_assert_int_eq(dispatch_all(1100), 6);
	for (int i = 3; i < 9; i++)
		answer(i, SCHED_SUCCESS, 1200);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 12);
	/* the 11 left: twice the most in flight again */
	ck_assert_int_eq(dispatch_all(1200), 11);
	for (int i = 9; i < 20; i++)
		answer(i, SCHED_SUCCESS, 1300);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 22);
	/* idle for reopen_after_s: slowly again */
	submit_n(20, 1, 40000);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 3);
	ck_assert_int_eq(dispatch_all(40000), 1);
	answer(20, SCHED_SUCCESS, 40100);
}
END_TEST

START_TEST(no_slow_start_where_something_else_decides)
{
	/* a provider that sends headers: they say how much room there is */
	init_lane();
	sched_set_provider_silent(&lane, false);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 64);
	/* headers after a silent start: it stops */
	sched_set_provider_silent(&lane, true);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 20);
	sched_set_provider_silent(&lane, false);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 64);
	/* a plan that paces the lane */
	plan.max_requests_per_minute = 600;
	init_lane();
	sched_set_provider_silent(&lane, true);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 64);
	plan.max_requests_per_minute = 0;
	/* the latency controller's own (streams): not two at once */
	plan.concurrency.slow_start = 6;
	init_lane();
	sched_set_provider_silent(&lane, true);
	ck_assert(lane.conc.starting);
	sched_set_provider_streams(&lane, true);
	ck_assert(!lane.conc.starting);
	ck_assert(sched_timing_wanted(&lane));
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 6);
	/* mode aimd: refusals alone, open until the first */
	plan.concurrency.mode = CONCURRENCY_AIMD;
	init_lane();
	sched_set_provider_silent(&lane, true);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 64);
	plan.concurrency.mode = CONCURRENCY_AUTO;
	/* not adaptive */
	plan.concurrency.adaptive = false;
	init_lane();
	sched_set_provider_silent(&lane, true);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), 64);
}
END_TEST

START_TEST(a_request_not_written_when_a_hold_came_is_taken_back)
{
	init_lane();
	sched_set_provider_silent(&lane, true);
	submit_n(0, 6, 1000);
	ck_assert_int_eq(dispatch_all(1000), 6);
	/* not held: it leaves */
	ck_assert(!sched_recall(&lane, &items[0], 1001));
	ck_assert_uint_eq(items[0].attempts, 1);
	/* a refusal's retry-after holds the lane: items 1 and 2, not written
	 * yet, come back; their attempts do not count */
	answer(0, SCHED_CAPACITY, 1002);
	ck_assert(!sched_held(&lane, 1002));
	sched_hold(&lane, 4002);
	ck_assert(sched_held(&lane, 1003) && sched_held(&lane, 4001) && !sched_held(&lane, 4002));
	size_t in_flight = lane.in_flight;
	ck_assert(sched_recall(&lane, &items[1], 1003));
	ck_assert(sched_recall(&lane, &items[2], 1003));
	ck_assert_uint_eq(lane.in_flight, in_flight - 2);
	ck_assert_uint_eq(items[1].attempts, 0);
	ck_assert(!sched_recall(&lane, &items[1], 1003)); /* not in flight any more */
	/* queued again, due now: the hold keeps them */
	sched_retry(&lane, &items[1], 1003);
	sched_retry(&lane, &items[2], 1003);
	ck_assert_ptr_null(sched_next(&lane, 1004));
	for (int i = 3; i < 6; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1010);
	/* after the hold, one goes first (the probe), and it is a retry */
	struct sched_item *probe = sched_next(&lane, 4003);
	ck_assert(probe == &items[1]);
	ck_assert_ptr_null(sched_next(&lane, 4003));
	/* a probe not written when another hold came is taken back too: the
	 * next probe follows once this hold is over */
	sched_hold(&lane, 6000);
	ck_assert(sched_recall(&lane, &items[1], 4004));
	sched_retry(&lane, &items[1], 4004);
	ck_assert_ptr_null(sched_next(&lane, 5000));
	ck_assert(sched_next(&lane, 6001) == &items[2]); /* due first */
	ck_assert_ptr_null(sched_next(&lane, 6001));
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 6100);
	ck_assert(sched_next(&lane, 6100) == &items[1]);
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 6200);
}
END_TEST

/* Item i submitted and dispatched at t, answered o 50 ms later. */
static void one_request(int i, enum sched_outcome o, int64_t t)
{
	submit_n(i, 1, t);
	ck_assert_int_eq(dispatch_all(t), 1);
	answer(i, o, t + 50);
}

/* After a first refusal of item 0 sent at 1000: 20 successes (items 1-20),
 * one every 100 ms, then the next refusal, of item 21 sent 2.1 s after the
 * first. */
static void successes_then_refusal(void)
{
	for (int i = 1; i <= 20; i++) {
		one_request(i, SCHED_SUCCESS, 1000 + 100 * i);
		items[i].state = SCHED_NONE;
	}
	one_request(21, SCHED_CAPACITY, 3100);
}

START_TEST(the_dispatch_delay_follows_the_bound_refusals_give)
{
	/* a lane answered without headers, already paced by its delay */
	init_lane();
	sched_set_provider_silent(&lane, true);
	one_request(0, SCHED_CAPACITY, 1000); /* the first refusal: the AIMD's cut */
	ck_assert_ptr_nonnull(lane.quiet);
	ck_assert(lane.delay.delay_ms > 0);
	ck_assert(lane.quiet->rate.bound == 0);
	/* the provider carried (20 - 1) / 2.1 s at least; paced at 95 % of it */
	successes_then_refusal();
	ck_assert(fabs(lane.quiet->rate.bound - 19 / 2.1) < 1e-3);
	ck_assert_int_eq(sched_dispatch_delay_ms(&lane),
	                 (int64_t)ceil(1000.0 / (0.95 * lane.quiet->rate.bound) - 1e-9));
	/* /status shows the bound, the curve's pace now and later, its K */
	struct sched_lane_view v;
	sched_lane_view(&lane, 3150, &v);
	ck_assert(fabs(v.probe_bound_rps - 19 / 2.1) < 1e-3);
	ck_assert(fabs(v.probe_rate_rps - 0.95 * v.probe_bound_rps) < 1e-3);
	ck_assert_int_eq(v.probe_k_ms, RATE_PROBE_K_MIN_MS);
	ck_assert_uint_eq(v.probe_calm, 0);
	sched_lane_view(&lane, 3150 + RATE_PROBE_K_MIN_MS, &v);
	ck_assert(fabs(v.probe_rate_rps - v.probe_bound_rps) < 1e-3);
	ck_assert_uint_ge(sched_lane_heap_bytes(&lane), sizeof(*lane.quiet));
}
END_TEST

START_TEST(no_rate_probe_where_the_plan_paces_the_lane)
{
	/* the same answers on a lane the plan paces (6,000 RPM): refusals at
	 * its spacing are the strict margin's (margin.h); no probe bounds its
	 * rate (it held a 600 RPM gate at 67 % of it) */
	plan.max_requests_per_minute = 6000;
	init_lane();
	sched_set_provider_silent(&lane, true);
	one_request(0, SCHED_CAPACITY, 1000);
	successes_then_refusal();
	ck_assert(lane.quiet == NULL || lane.quiet->rate.bound == 0);
	struct sched_lane_view v;
	sched_lane_view(&lane, 3150, &v);
	ck_assert(v.probe_bound_rps == 0);
	plan.max_requests_per_minute = 0;
}
END_TEST

static Suite *sched_silent_suite(void)
{
	Suite *s = suite_create("sched_silent");
	TCase *c = tcase_create("core");
	tcase_add_checked_fixture(c, setup, teardown);
	tcase_add_test(c, the_first_lane_of_a_silent_provider_doubles_per_round_trip);
	tcase_add_test(c, a_lane_of_a_known_silent_provider_starts_at_slow_start);
	tcase_add_test(c, no_slow_start_where_something_else_decides);
	tcase_add_test(c, a_request_not_written_when_a_hold_came_is_taken_back);
	tcase_add_test(c, the_dispatch_delay_follows_the_bound_refusals_give);
	tcase_add_test(c, no_rate_probe_where_the_plan_paces_the_lane);
	suite_add_tcase(s, c);
	return s;
}

UNIT_MAIN("sched_silent", sched_silent_suite)
