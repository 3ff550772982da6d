/* SPDX-License-Identifier: Apache-2.0 */
/* sched: dispatch order (FIFO, agent serialization, retries at the head),
 * the concurrency and rate gates, queue limits, holds, the idle list, what a
 * lane allocates, and the dispatch order checked against a full scan under
 * random operations. Clock injected. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "sched/sched.h"
#include "sched/sched_lane-t.h"
#include "unit.h"

/* sched_wake_at on the millisecond clock the tests keep: the instant rounded
 * up (a gate may open between two milliseconds), SCHED_NEVER as it is. */
static int64_t wake_ms(struct sched_lane *lane, int64_t now)
{
	double w = sched_wake_at(lane, (double)now);
	return w >= (double)SCHED_NEVER ? SCHED_NEVER : (int64_t)ceil(w);
}

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
	plan.concurrency.min = 1;
}

static void init_lane(enum agents_mode mode)
{
	sched_lane_release(&lane);
	sched_lane_init(&lane, prov, &plan, mode, 1000);
}

/* A new request of one flow (0) at priority 0: FIFO, as before priorities;
 * nothing is ever evicted here. */
static enum sched_submit_result submit(struct sched_lane *l, struct sched_item *it, double prompt,
                                       double output, uint64_t agent, int64_t now)
{
	struct sched_request rq = {.cost_prompt = prompt, .cost_output = output, .agent = agent};
	struct sched_item *evicted;
	enum sched_submit_result r = sched_submit(l, it, &rq, now, &evicted);
	ck_assert_ptr_null(evicted);
	return r;
}

static int idx(struct sched_item *it)
{
	return it == NULL ? -1 : (int)(it - items);
}

START_TEST(fifo_order)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(submit(&lane, &items[i], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_int_eq(sched_queue_depth(&lane), 3);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 2);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert_int_eq(lane.in_flight, 3);
	ck_assert_int_eq(items[0].attempts, 1);
}
END_TEST

/* The oldest wait is the age of the request waiting longest: 0 with none,
 * the next one's once the oldest is sent. */
START_TEST(oldest_wait)
{
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	ck_assert_int_eq(sched_oldest_wait_ms(&lane, 5000), 0);
	submit(&lane, &items[0], 0, 0, 0, 1000);
	submit(&lane, &items[1], 0, 0, 0, 1500);
	submit(&lane, &items[2], 0, 0, 0, 2500);
	ck_assert_int_eq(sched_oldest_wait_ms(&lane, 3000), 2000);
	ck_assert_int_eq(idx(sched_next(&lane, 3000)), 0);
	ck_assert_int_eq(sched_oldest_wait_ms(&lane, 3000), 1500);
	struct sched_lane_view v;
	sched_lane_view(&lane, 3100, &v);
	ck_assert_int_eq(v.oldest_wait_ms, 1600);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 3200);
	ck_assert_int_eq(idx(sched_next(&lane, 3200)), 1);
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 3300);
	ck_assert_int_eq(idx(sched_next(&lane, 3300)), 2);
	ck_assert_int_eq(sched_oldest_wait_ms(&lane, 9000), 0);
}
END_TEST

START_TEST(concurrency_gate)
{
	fixed_concurrency(2);
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	/* Blocked by concurrency only: nothing to wake for but the max wait. */
	ck_assert_int_eq(wake_ms(&lane, 1000), 1000 + (int64_t)plan.queue.max_wait_s * 1000);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1200);
	ck_assert_int_eq(idx(sched_next(&lane, 1200)), 2);
}
END_TEST

START_TEST(rate_gate_spaces_requests)
{
	plan.max_requests_per_second = 10; /* one per 100 ms */
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	int64_t wake = wake_ms(&lane, 1000);
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
	ck_assert_int_eq(submit(&lane, &items[0], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_int_eq(submit(&lane, &items[1], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_int_eq(submit(&lane, &items[2], 0, 0, 0, 1000), SCHED_QUEUE_FULL);
	ck_assert_int_eq(lane.stats.rejected_queue_full, 1);
	/* Dispatching frees a place. */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(submit(&lane, &items[2], 0, 0, 0, 1000), SCHED_OK);
}
END_TEST

START_TEST(queue_timeout)
{
	plan.queue.max_wait_s = 2;
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	submit(&lane, &items[0], 0, 0, 0, 1000);
	submit(&lane, &items[1], 0, 0, 0, 1500);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(wake_ms(&lane, 1000), 3500);
	ck_assert_ptr_null(sched_expired(&lane, 3499));
	ck_assert_int_eq(idx(sched_expired(&lane, 3500)), 1);
	ck_assert_ptr_null(sched_expired(&lane, 3500));
	ck_assert_int_eq(sched_queue_depth(&lane), 0);
	ck_assert_int_eq(lane.stats.queue_timeouts, 1);
}
END_TEST

START_TEST(agents_serialize)
{
	init_lane(AGENTS_SERIALIZE);
	submit(&lane, &items[0], 0, 0, 7, 1000); /* agent 7 */
	submit(&lane, &items[1], 0, 0, 7, 1000); /* agent 7 again */
	submit(&lane, &items[2], 0, 0, 9, 1000); /* agent 9 */
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
	ck_assert_int_eq(submit(&lane, &items[0], 0, 0, 7, 1000), SCHED_OK);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(submit(&lane, &items[1], 0, 0, 7, 1000), SCHED_AGENT_BUSY);
	ck_assert_int_eq(submit(&lane, &items[2], 0, 0, 8, 1000), SCHED_OK);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	ck_assert_int_eq(submit(&lane, &items[1], 0, 0, 7, 1100), SCHED_OK);
}
END_TEST

START_TEST(agents_off_ignores_agent)
{
	init_lane(AGENTS_OFF);
	submit(&lane, &items[0], 0, 0, 7, 1000);
	submit(&lane, &items[1], 0, 0, 7, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
}
END_TEST

START_TEST(retry_goes_back_to_the_head)
{
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_complete(&lane, &items[0], SCHED_TRANSIENT, 1100);
	sched_retry(&lane, &items[0], 1600);
	ck_assert_int_eq(items[0].state, SCHED_RETRY_WAIT);
	/* The slot is free while the retry waits: the next request uses it. */
	ck_assert_int_eq(lane.in_flight, 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 1);
	ck_assert_int_eq(wake_ms(&lane, 1100), 1600);
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
	submit(&lane, &items[0], 0, 0, 0, 1000);
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
		submit(&lane, &items[i], 0, 0, 0, 1000);
	sched_cancel(&lane, &items[1]);
	ck_assert_int_eq(sched_queue_depth(&lane), 2);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1100);
	sched_retry(&lane, &items[0], 5000);
	sched_cancel(&lane, &items[0]);
	ck_assert_int_eq(lane.waiting.n, 0);
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
	submit(&lane, &items[0], 0, 0, 0, 1000);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert_int_eq(wake_ms(&lane, 1000), 4000);
	ck_assert_ptr_null(sched_next(&lane, 3999));
	ck_assert_int_eq(idx(sched_next(&lane, 4000)), 0);
}
END_TEST

START_TEST(fresh_lane_is_open_up_to_max_concurrent)
{
	/* No capacity signal yet: once the first answer's headers are in, the
	 * rest leave at once, not 4 at a time. Before that, LEARNED_BLIND_MAX
	 * go blind (issue 19: 20 blind requests met a bucket of 5). */
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 16; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	for (int i = 0; i < LEARNED_BLIND_MAX; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert_int_eq(sched_wake_at(&lane, 1000), 1000 + LEARNED_BLIND_WAIT_MS);
	struct rlh_result h; /* an answer that reports no budget */
	memset(&h, 0, sizeof(h));
	sched_observe(&lane, &items[0], &h, false, 1020);
	for (int i = LEARNED_BLIND_MAX; i < 16; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1020)), i);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 64);
	/* The first signal closes it at what was in flight x 0.5. */
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1100);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 8);
	for (int i = 1; i < 16; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1100);
}
END_TEST

START_TEST(idle_lane_opens_again)
{
	plan.concurrency.reopen_after_s = 30;
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 4; i++) {
		submit(&lane, &items[i], 0, 0, 0, 1000);
		sched_next(&lane, 1000);
	}
	for (int i = 0; i < 4; i++)
		sched_complete(&lane, &items[i], SCHED_CAPACITY, 1100);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 2);
	/* idle for less than reopen_after_s: still closed */
	submit(&lane, &items[4], 0, 0, 0, 20000);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 2);
	ck_assert_int_eq(idx(sched_next(&lane, 20000)), 4);
	sched_complete(&lane, &items[4], SCHED_SUCCESS, 20100);
	/* idle for 30 s: open */
	submit(&lane, &items[5], 0, 0, 0, 50100);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 64);
	ck_assert_int_eq(idx(sched_next(&lane, 50100)), 5);
	sched_complete(&lane, &items[5], SCHED_SUCCESS, 50200);
}
END_TEST

/* ---- the latency controller (gradient.h) beside AIMD ---- */

/* A lane whose provider answers streams without rate-limit headers (the
 * lanes say so), starting the gradient at `start`. */
static void init_silent_lane(unsigned start)
{
	plan.concurrency.slow_start = start;
	init_lane(AGENTS_OFF);
	sched_set_provider_silent(&lane, true);
	sched_set_provider_streams(&lane, true);
}

static void dispatch_n(int from, int n, int64_t now)
{
	for (int i = from; i < from + n; i++)
		submit(&lane, &items[i], 0, 0, 0, now);
}

START_TEST(auto_a_silent_lane_starts_slowly)
{
	/* silent, but no stream seen yet: nothing for the controller to read;
	 * AIMD's open limit starts slowly instead (the same slow start) */
	plan.concurrency.slow_start = 2;
	init_lane(AGENTS_OFF);
	sched_set_provider_silent(&lane, true);
	ck_assert(!sched_timing_wanted(&lane));
	ck_assert_ptr_null(lane.grad);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 2);
	init_silent_lane(2);
	ck_assert(sched_timing_wanted(&lane));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 2);
	dispatch_n(0, 4, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	/* half the round's first tokens back, not waiting: twice what is in
	 * flight may go */
	ck_assert(sched_first_token(&lane, &items[0], 80, 500, 1080));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 4);
	ck_assert_int_eq(idx(sched_next(&lane, 1080)), 2);
	ck_assert_int_eq(idx(sched_next(&lane, 1080)), 3);
	/* the other of the first round counts for nothing more */
	ck_assert(!sched_first_token(&lane, &items[1], 85, 500, 1085));
	/* the view says what sets it */
	struct sched_lane_view v;
	sched_lane_view(&lane, 1085, &v);
	ck_assert_str_eq(v.concurrency_mode, "gradient");
	ck_assert(v.gradient && v.grad.slow_start);
	ck_assert_int_eq(v.grad.limit, 4);
	ck_assert_str_eq(v.grad.why, "slow_start");
	ck_assert_str_eq(v.state, "open"); /* AIMD's word: no refusal yet */
	for (int i = 0; i < 4; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 2000);
}
END_TEST

START_TEST(auto_a_lane_that_hears_headers_is_aimd)
{
	plan.concurrency.slow_start = 2;
	init_lane(AGENTS_OFF);
	sched_set_provider_silent(&lane, false);
	ck_assert(!sched_timing_wanted(&lane));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 64);
	struct sched_lane_view v;
	sched_lane_view(&lane, 1000, &v);
	ck_assert_str_eq(v.concurrency_mode, "aimd");
	ck_assert(!v.gradient);
	/* timings of its answers change nothing */
	dispatch_n(0, 1, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert(!sched_first_token(&lane, &items[0], 80, 500, 1080));
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 2000);
	/* mode aimd: silent or not */
	plan.concurrency.mode = CONCURRENCY_AIMD;
	init_silent_lane(2);
	ck_assert(!sched_timing_wanted(&lane));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 64);
	/* not adaptive: neither */
	plan.concurrency.mode = CONCURRENCY_GRADIENT;
	plan.concurrency.adaptive = false;
	init_silent_lane(2);
	ck_assert(!sched_timing_wanted(&lane));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 64);
}
END_TEST

START_TEST(auto_a_refusal_hands_the_lane_to_aimd)
{
	init_silent_lane(8);
	dispatch_n(0, 8, 1000);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1100);
	/* AIMD closed at 8 × 0.5; the lane is no longer silent and refusing */
	ck_assert(!sched_timing_wanted(&lane));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 4);
	for (int i = 1; i < 8; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1200);
}
END_TEST

START_TEST(gradient_mode_the_lower_limit_and_one_cut)
{
	plan.concurrency.mode = CONCURRENCY_GRADIENT;
	init_silent_lane(8);
	ck_assert(sched_timing_wanted(&lane));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 8);
	dispatch_n(0, 8, 1000);
	for (int i = 0; i < 8; i++)
		ck_assert_ptr_nonnull(sched_next(&lane, 1000));
	/* a refusal: AIMD closes at 4, and the gradient with it */
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1100);
	ck_assert(sched_timing_wanted(&lane));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 4);
	ck_assert_int_eq(gradient_limit(lane.grad), 4);
	ck_assert_int_eq(lane.grad->why, GRADIENT_WHY_REFUSAL);
	/* and it stays engaged, unlike auto: its headers or refusals aside */
	sched_set_provider_silent(&lane, false);
	ck_assert(sched_timing_wanted(&lane));
	for (int i = 1; i < 8; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1200);
}
END_TEST

START_TEST(timed_answers_feed_the_gradient)
{
	init_silent_lane(4);
	dispatch_n(0, 4, 1000);
	for (int i = 0; i < 4; i++)
		ck_assert_ptr_nonnull(sched_next(&lane, 1000));
	/* not a stream: a round trip; half the round back: slow start doubles */
	struct sched_timing json = {.first_ms = -1};
	ck_assert(!sched_answer_timed(&lane, &items[3], &json, 1500));
	ck_assert(sched_answer_timed(&lane, &items[0], &json, 1500));
	ck_assert_int_eq(sched_concurrency_limit(&lane), 8);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1500);
	/* after its end, an item says nothing */
	ck_assert(!sched_answer_timed(&lane, &items[0], &json, 1500));
	ck_assert(!sched_first_token(&lane, &items[0], 50, 10, 1500));
	/* a stream: its per-token time is shown */
	struct sched_timing st = {
	    .first_ms = 60, .stream_ms = 990, .max_gap_ms = 12, .events = 99, .prompt_tokens = 100};
	sched_answer_timed(&lane, &items[1], &st, 1600);
	struct sched_lane_view v;
	sched_lane_view(&lane, 1600, &v);
	ck_assert_double_eq_tol(v.grad.token_ms, 10, 0.001);
	for (int i = 1; i < 4; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1600);
}
END_TEST

START_TEST(an_idle_gradient_lane_starts_slowly_again)
{
	plan.concurrency.reopen_after_s = 30;
	init_silent_lane(2);
	dispatch_n(0, 4, 1000);
	for (int i = 0; i < 2; i++)
		sched_next(&lane, 1000);
	for (int i = 0; i < 2; i++)
		sched_first_token(&lane, &items[i], 50, 100, 1050);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 4);
	for (int i = 2; i < 4; i++)
		sched_next(&lane, 1050);
	for (int i = 0; i < 4; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1100);
	/* idle for less than reopen_after_s: where it was */
	submit(&lane, &items[4], 0, 0, 0, 20000);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 4);
	sched_next(&lane, 20000);
	sched_complete(&lane, &items[4], SCHED_SUCCESS, 20100);
	/* idle for 30 s: slow start again */
	submit(&lane, &items[5], 0, 0, 0, 50100);
	ck_assert_int_eq(sched_concurrency_limit(&lane), 2);
	ck_assert(lane.grad->ss.on);
	sched_next(&lane, 50100);
	sched_complete(&lane, &items[5], SCHED_SUCCESS, 50200);
}
END_TEST

START_TEST(capacity_headers_hold_until_decided)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	/* a 429's headers arrive: nothing leaves until its body is decided */
	sched_hold_pending(&lane, &items[0], 2001);
	ck_assert_ptr_null(sched_next(&lane, 1001));
	ck_assert_str_eq(sched_lane_state(&lane, 1001), "held");
	/* the only instant to wake for: the pending hold's cap */
	ck_assert_int_eq(wake_ms(&lane, 1001), 2001);
	/* decided: a capacity error with retry-after 2 s */
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1002);
	sched_hold(&lane, 3002);
	ck_assert_ptr_null(sched_next(&lane, 1002));
	ck_assert_int_eq(wake_ms(&lane, 1002), 3002);
	/* the hold ends: one goes alone (the probe) */
	ck_assert_int_eq(idx(sched_next(&lane, 3002)), 1);
	ck_assert_ptr_null(sched_next(&lane, 3002));
	ck_assert_int_eq(lane.stats.probes, 1);
	/* the probe succeeds: the rest follow */
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 3100);
	ck_assert_int_eq(idx(sched_next(&lane, 3100)), 2);
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 3200);
}
END_TEST

START_TEST(a_pending_hold_is_capped)
{
	/* a 429 whose body never comes holds the lane until its cap only */
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 2; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_hold_pending(&lane, &items[0], 2000);
	ck_assert_ptr_null(sched_next(&lane, 1999));
	ck_assert_int_eq(idx(sched_next(&lane, 2000)), 1);
	sched_complete(&lane, &items[0], SCHED_ABORTED, 2100);
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 2100);
	ck_assert_int_eq(lane.holding, 0);
}
END_TEST

START_TEST(a_refused_probe_holds_again)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	sched_hold(&lane, 2000);
	ck_assert_int_eq(idx(sched_next(&lane, 2000)), 0);
	ck_assert_ptr_null(sched_next(&lane, 2000));
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 2010);
	sched_hold(&lane, 5010);
	ck_assert_ptr_null(sched_next(&lane, 5009));
	/* one probe again, not the whole lane */
	ck_assert_int_eq(idx(sched_next(&lane, 5010)), 1);
	ck_assert_ptr_null(sched_next(&lane, 5010));
	/* a probe that dies (client gone) lets another probe go */
	sched_complete(&lane, &items[1], SCHED_ABORTED, 5020);
	int64_t t = wake_ms(&lane, 5020); /* the dispatch delay after two refusals */
	ck_assert_int_le(t, 5010 + 200);
	ck_assert_int_eq(idx(sched_next(&lane, t)), 2);
	ck_assert_int_eq(lane.stats.probes, 3);
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 5100);
	ck_assert_int_eq(lane.st.mode, LANE_OPEN);
}
END_TEST

START_TEST(a_success_sent_before_the_hold_does_not_end_it)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 4; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1010);
	sched_hold(&lane, 2000);
	/* item 1 left before the refusal: its success says nothing of after */
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 2500);
	ck_assert_int_eq(idx(sched_next(&lane, 2500)), 2);
	ck_assert_ptr_null(sched_next(&lane, 2500));
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 2600);
	ck_assert_int_eq(idx(sched_next(&lane, 2600)), 3);
	sched_complete(&lane, &items[3], SCHED_SUCCESS, 2700);
}
END_TEST

START_TEST(a_hold_while_the_probe_is_out_needs_another_probe)
{
	/* the probe leaves; an answer to a request sent before it holds the
	 * lane again: the probe's success cannot tell that this hold is over */
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 4; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_hold(&lane, 2000);
	ck_assert_int_eq(lane.st.mode, LANE_PROBING);
	ck_assert_int_eq(idx(sched_next(&lane, 2000)), 1);
	ck_assert_int_eq(lane.st.mode, LANE_PROBE_OUT);
	ck_assert(items[1].probe && !items[0].probe);
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 2010);
	sched_hold(&lane, 2500);
	ck_assert_int_eq(lane.st.mode, LANE_PROBE_STALE);
	ck_assert_str_eq(sched_lane_state(&lane, 2010), "held");
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 2100);
	ck_assert(!items[1].probe);
	ck_assert_int_eq(lane.st.mode, LANE_PROBING);
	ck_assert_str_eq(sched_lane_state(&lane, 2500), "probing");
	/* another probe, alone; its success opens the lane */
	ck_assert_int_eq(idx(sched_next(&lane, 2500)), 2);
	ck_assert_ptr_null(sched_next(&lane, 2500));
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 2600);
	ck_assert_int_eq(lane.st.mode, LANE_OPEN);
	ck_assert_int_eq(idx(sched_next(&lane, 2600)), 3);
	sched_complete(&lane, &items[3], SCHED_SUCCESS, 2700);
	ck_assert_int_eq(lane.stats.probes, 2);
}
END_TEST

START_TEST(the_quota_and_the_day_coincide)
{
	/* the day is spent, then the quota found out: the lane shows and
	 * refuses for the quota; the new day leaves the quota; the quota's
	 * end leaves the lane as it was before both (a probe still due) */
	plan.max_requests_per_day = 2;
	plan.quota_probe_s = 10;
	init_lane(AGENTS_OFF);
	sched_day_reset(&lane, 50000, false);
	for (int i = 0; i < 3; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	sched_hold(&lane, 1500);
	ck_assert_ptr_null(sched_next(&lane, 1500)); /* the third does not fit */
	ck_assert_str_eq(sched_lane_state(&lane, 1500), "daily_budget_exhausted");
	ck_assert_int_eq(idx(sched_drain(&lane)), 2);
	sched_complete(&lane, &items[0], SCHED_QUOTA_OUT, 1600);
	ck_assert(sched_quota_exhausted(&lane, 1600));
	ck_assert_int_eq(lane.st.admission, LANE_QUOTA_DAY_OUT);
	ck_assert(sched_quota_out(&lane) && sched_day_out(&lane));
	ck_assert_str_eq(sched_lane_state(&lane, 1600), "quota_exhausted");
	ck_assert_int_eq(submit(&lane, &items[3], 0, 0, 0, 1700), SCHED_QUOTA);
	/* at the probe's time the day still refuses */
	ck_assert_int_eq(submit(&lane, &items[3], 0, 0, 0, 11600), SCHED_DAY_OUT);
	sched_day_reset(&lane, 50000 + 86400000, true);
	ck_assert_int_eq(lane.st.admission, LANE_QUOTA);
	sched_quota_restored(&lane); /* another replica's probe */
	ck_assert_int_eq(lane.st.admission, LANE_ADMIT_ALL);
	ck_assert_str_eq(sched_lane_state(&lane, 50000), "probing");
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 50000);
	ck_assert_int_eq(lane.st.mode, LANE_PROBING); /* sent before the hold */
}
END_TEST

START_TEST(a_forbidden_transition_stops_the_process)
{
	/* a probe's answer where no probe is out: a bug, caught in every build */
	init_lane(AGENTS_OFF);
	submit(&lane, &items[0], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		fclose(stderr); /* the message is expected: keep the test's output clean */
		items[0].probe = true;
		sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
		_exit(0);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
}
END_TEST

START_TEST(a_learned_budget_at_zero_ends_with_a_probe)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 4; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_REQUESTS] = (struct rlh_budget){
	    .has_remaining = true, .has_reset = true, .remaining = 0, .reset_ms = 2000};
	sched_observe(&lane, &items[0], &h, false, 1100);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	ck_assert_ptr_null(sched_next(&lane, 1100));
	ck_assert_int_eq(wake_ms(&lane, 1100), 3100);
	ck_assert_int_eq(idx(sched_next(&lane, 3100)), 1);
	ck_assert_ptr_null(sched_next(&lane, 3100)); /* alone */
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 3200);
	ck_assert_int_eq(idx(sched_next(&lane, 3200)), 2);
	ck_assert_int_eq(idx(sched_next(&lane, 3200)), 3);
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 3300);
	sched_complete(&lane, &items[3], SCHED_SUCCESS, 3300);
}
END_TEST

START_TEST(a_refusal_that_says_when_cuts_the_learned_rate_by_a_margin_only)
{
	/* a 429 with retry-after is mostly about when (the lane holds): the
	 * learned rate loses a margin's worth (x0.95); one without a hint x0.8 */
	init_lane(AGENTS_OFF);
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_REQUESTS] = (struct rlh_budget){
	    .has_remaining = true, .has_reset = true, .remaining = 50, .reset_ms = 30000};
	for (int i = 0; i < 3; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_observe(&lane, &items[0], &h, false, 1100);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 1);
	items[1].hinted = true;
	sched_complete(&lane, &items[1], SCHED_CAPACITY, 1200);
	ck_assert(lane.learned[RLH_REQUESTS]->correction == LEARNED_PENALTY_HINTED);
	ck_assert_int_eq(idx(sched_next(&lane, wake_ms(&lane, 1200))), 2);
	sched_complete(&lane, &items[2], SCHED_CAPACITY, 5000);
	ck_assert(lane.learned[RLH_REQUESTS]->correction ==
	          LEARNED_PENALTY_HINTED * LEARNED_PENALTY);
}
END_TEST

START_TEST(quota_drains_refuses_and_probes)
{
	plan.quota_probe_s = 10;
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 5; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	sched_complete(&lane, &items[0], SCHED_QUOTA_OUT, 1100); /* a final 429 */
	sched_complete(&lane, &items[1], SCHED_TRANSIENT, 1100);
	sched_retry(&lane, &items[1], 5000); /* a retry waiting */
	ck_assert(sched_quota_exhausted(&lane, 1100));
	ck_assert(!sched_quota_exhausted(&lane, 1100)); /* once */
	ck_assert(sched_quota_out(&lane));
	/* every request waiting comes out, queued and retrying alike */
	int n = 0;
	struct sched_item *it;
	while ((it = sched_drain(&lane)) != NULL) {
		ck_assert_int_eq(it->state, SCHED_NONE);
		n++;
	}
	ck_assert_int_eq(n, 4);
	ck_assert(sched_lane_idle(&lane));
	/* new requests are refused until the probe interval */
	ck_assert_int_eq(submit(&lane, &items[5], 0, 0, 0, 2000), SCHED_QUOTA);
	ck_assert_int_eq(submit(&lane, &items[5], 0, 0, 0, 11099), SCHED_QUOTA);
	ck_assert_int_eq(submit(&lane, &items[5], 0, 0, 0, 11100), SCHED_OK);
	ck_assert_int_eq(submit(&lane, &items[6], 0, 0, 0, 11101), SCHED_QUOTA);
	ck_assert_int_eq(lane.stats.quota_refused, 3);
	/* the probe is refused again: still out, next probe an interval later */
	ck_assert_int_eq(idx(sched_next(&lane, 11100)), 5);
	sched_complete(&lane, &items[5], SCHED_QUOTA_OUT, 11200);
	ck_assert(sched_quota_out(&lane));
	ck_assert(!sched_quota_exhausted(&lane, 11200));
	ck_assert_int_eq(submit(&lane, &items[6], 0, 0, 0, 15000), SCHED_QUOTA);
	ck_assert_int_eq(submit(&lane, &items[6], 0, 0, 0, 21100), SCHED_OK);
	ck_assert_int_eq(idx(sched_next(&lane, 21100)), 6);
	sched_complete(&lane, &items[6], SCHED_SUCCESS, 21200);
	ck_assert(!sched_quota_out(&lane)); /* a success sent after it ends it */
	ck_assert_int_eq(submit(&lane, &items[7], 0, 0, 0, 21300), SCHED_OK);
	sched_cancel(&lane, &items[7]);
}
END_TEST

START_TEST(a_daily_budget_is_spent_then_refused_until_the_reset)
{
	plan.max_requests_per_day = 3;
	init_lane(AGENTS_OFF);
	ck_assert(sched_day_limited(&lane));
	sched_day_reset(&lane, 50000, false);
	for (int i = 0; i < 5; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	/* spent as fast as the other gates allow: three at once */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert(sched_day_out(&lane));
	ck_assert_str_eq(sched_lane_state(&lane, 1000), "daily_budget_exhausted");
	ck_assert_int_eq(wake_ms(&lane, 1000), 1000 + (int64_t)plan.queue.max_wait_s * 1000);
	/* what waits is drained; new requests are refused */
	ck_assert_int_eq(idx(sched_drain(&lane)), 3);
	ck_assert_int_eq(idx(sched_drain(&lane)), 4);
	ck_assert_ptr_null(sched_drain(&lane));
	ck_assert_int_eq(submit(&lane, &items[5], 0, 0, 0, 2000), SCHED_DAY_OUT);
	for (int i = 0; i < 3; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 2000);
	/* a new day */
	sched_day_reset(&lane, 50000 + 86400000, true);
	ck_assert(!sched_day_out(&lane));
	ck_assert_int_eq(submit(&lane, &items[5], 0, 0, 0, 50000), SCHED_OK);
	ck_assert_int_eq(idx(sched_next(&lane, 50000)), 5);
	sched_complete(&lane, &items[5], SCHED_SUCCESS, 50100);
}
END_TEST

START_TEST(a_daily_token_budget_counts_the_estimate_then_the_usage)
{
	plan.max_tokens_per_day = 1000;
	init_lane(AGENTS_OFF);
	sched_day_reset(&lane, 50000, false);
	submit(&lane, &items[0], 100, 500, 0, 1000);
	submit(&lane, &items[1], 100, 500, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_ptr_null(sched_next(&lane, 1000)); /* 600 + 600 > 1000 */
	ck_assert(sched_day_out(&lane));
	sched_drain(&lane);
	/* the real usage was 150: the rest of the day is there again on reload
	 * (a reload asks again whether the next request fits) */
	sched_tokens_used(&lane, &items[0], 150, -1, -1, 1100);
	ck_assert(lane.day.tokens == 150);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
}
END_TEST

START_TEST(empty_lane_never_wakes)
{
	init_lane(AGENTS_OFF);
	ck_assert_int_eq(wake_ms(&lane, 1000), SCHED_NEVER);
	ck_assert(sched_lane_idle(&lane));
	ck_assert_ptr_null(sched_next(&lane, 1000));
}
END_TEST

START_TEST(saturation_is_recorded)
{
	fixed_concurrency(2);
	init_lane(AGENTS_OFF);
	submit(&lane, &items[0], 0, 0, 0, 1000);
	submit(&lane, &items[1], 0, 0, 0, 1000);
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
		submit(&lane, &items[i], 0, 0, 0, 1000);
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
	int64_t t = wake_ms(&lane, 1300);
	ck_assert_int_eq(idx(sched_next(&lane, t)), 4);
	sched_complete(&lane, &items[4], SCHED_CAPACITY, t + 2000);
	ck_assert_int_eq(lane.stats.capacity_reactions, 2);
	ck_assert_int_eq(aimd_delay_ms(&lane.delay), 150); /* x1.5 */
}
END_TEST

/* Issue 30: a strict gate's margin is learned from refusals at its own
 * spacing, not from a refusal of a request sent into an idle gate; the local
 * gate keeps it after each send, and the store's value is adopted. */
START_TEST(a_strict_gate_learns_its_margin_from_refusals_at_its_spacing)
{
	plan.max_requests_per_minute = 600; /* burst 1: one per 100 ms, strict */
	fixed_concurrency(8);
	init_lane(AGENTS_OFF);
	ck_assert(fabs(sched_lane_margin(&lane) - MARGIN_MIN) < 1e-12);
	for (int i = 0; i < 4; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	/* the first goes into an idle gate: its refusal says nothing of the path */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_sent(&lane, &items[0], 1000);
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1050);
	ck_assert(fabs(sched_lane_margin(&lane) - MARGIN_MIN) < 1e-12);
	ck_assert_ptr_null(lane.margin); /* nothing learned: nothing allocated */
	/* the second waited for the gate: refused, the margin widens */
	int64_t t = wake_ms(&lane, 1050);
	ck_assert_int_ge(t, 1101);
	ck_assert_int_eq(idx(sched_next(&lane, t)), 1);
	sched_sent(&lane, &items[1], (double)t);
	sched_complete(&lane, &items[1], SCHED_CAPACITY, t + 50);
	ck_assert(fabs(sched_lane_margin(&lane) - MARGIN_MIN * MARGIN_WIDEN) < 1e-12);
	ck_assert_ptr_nonnull(lane.margin);
	size_t heap = sched_lane_heap_bytes(&lane);
	free(lane.margin);
	lane.margin = NULL;
	ck_assert_uint_eq(sched_lane_heap_bytes(&lane), heap - sizeof(struct margin));
	sched_margin_adopt(&lane, MARGIN_MIN * MARGIN_WIDEN, t + 50);
	/* the local gate keeps it after a send: T and 2.5 % of it */
	int64_t t2 = wake_ms(&lane, t + 50);
	ck_assert_int_eq(idx(sched_next(&lane, t2)), 2);
	sched_sent(&lane, &items[2], (double)t2);
	double ready = gates_ready_at(sched_lane_gates(&lane), (double)t2, 0, 0, 0);
	ck_assert_msg(fabs(ready - (t2 + 100 + 2.5)) < 1e-9, "ready %.3f after %lld", ready,
	              (long long)t2);
	/* what another replica learned, through the store */
	sched_margin_adopt(&lane, 0.05, t2);
	ck_assert(fabs(sched_lane_margin(&lane) - 0.05) < 1e-12);
	struct sched_lane_view v;
	sched_lane_view(&lane, t2, &v);
	ck_assert(fabs(v.strict_margin - 0.05) < 1e-12);
	/* a lane without a strict gate learns nothing */
	sched_complete(&lane, &items[2], SCHED_SUCCESS, t2 + 10);
	plan.max_requests_per_minute = 0;
	init_lane(AGENTS_OFF);
	submit(&lane, &items[3], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 3);
	sched_complete(&lane, &items[3], SCHED_CAPACITY, 1010);
	ck_assert(fabs(sched_lane_margin(&lane) - MARGIN_MIN) < 1e-12);
}
END_TEST

/* Issue 30: a refusal at a strict gate's spacing is the path meeting the
 * margin: the margin widens, and the lane's concurrency and dispatch delay
 * are left alone (cutting them too took a 600 RPM lane to 2-7 req/s for two
 * seconds after each one). Once the margin is at its bound, refusals are the
 * lane's AIMD's again. */
START_TEST(a_refusal_the_margin_answers_cuts_nothing_else)
{
	plan.max_requests_per_minute = 600; /* burst 1: one per 100 ms, strict */
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 16; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	unsigned limit = sched_concurrency_limit(&lane);
	int64_t t = 1000;
	int i = 0;
	/* the first goes into an idle gate; each next waits for the gate and
	 * is refused: 1 -> 2.5 -> 6.25 -> 10 %, nothing else moves */
	for (; sched_lane_margin(&lane) < MARGIN_MAX; i++) {
		ck_assert_int_eq(idx(sched_next(&lane, t)), i);
		sched_sent(&lane, &items[i], (double)t);
		sched_complete(&lane, &items[i], i == 0 ? SCHED_SUCCESS : SCHED_CAPACITY, t + 5);
		t = wake_ms(&lane, t + 5);
		ck_assert_uint_eq(sched_concurrency_limit(&lane), limit);
		ck_assert_int_eq(aimd_delay_ms(&lane.delay), 0);
	}
	ck_assert_int_eq(i, 4);
	ck_assert_int_eq(lane.stats.capacity_signals, 3);
	ck_assert_int_eq(lane.stats.capacity_reactions, 0);
	/* at the bound: the lane's own reaction */
	ck_assert_int_eq(idx(sched_next(&lane, t)), i);
	sched_sent(&lane, &items[i], (double)t);
	sched_complete(&lane, &items[i], SCHED_CAPACITY, t + 5);
	ck_assert_int_eq(lane.stats.capacity_reactions, 1);
	ck_assert_int_gt(aimd_delay_ms(&lane.delay), 0);
	ck_assert_uint_lt(sched_concurrency_limit(&lane), limit);
}
END_TEST

/* One permit from the store, used at `now`: the item the lane sends. */
static struct sched_item *shared_next(int64_t now)
{
	struct sched_costs head;
	if (sched_permits_wanted(&lane, now, &head) > 0)
		sched_permits_asked(&lane, 1);
	sched_permit_answer(&lane, SCHED_PERMIT_GO, 0);
	return sched_next(&lane, now);
}

/* Shared gates: a refusal of a request this replica sent within a second
 * of its own widening may have been spaced by another replica that still
 * kept the old margin: no second widening for it (with local gates, the
 * widening spaced it: a second one). */
START_TEST(a_shared_lanes_widening_settles_before_the_next)
{
	plan.max_requests_per_minute = 600;
	fixed_concurrency(8);
	for (int shared = 0; shared < 2; shared++) {
		init_lane(AGENTS_OFF);
		if (shared)
			sched_set_gates_mode(&lane, SCHED_GATES_SHARED, 1, 1000);
		for (int i = 0; i < 3; i++)
			submit(&lane, &items[i], 0, 0, 0, 1000);
		int64_t t = 1000;
		for (int i = 0; i < 3; i++) {
			if (i > 0)
				t = shared ? t + 200 : wake_ms(&lane, t + 5);
			struct sched_item *it = shared ? shared_next(t) : sched_next(&lane, t);
			ck_assert_int_eq(idx(it), i);
			sched_sent(&lane, it, (double)t);
			sched_complete(&lane, it, i == 0 ? SCHED_SUCCESS : SCHED_CAPACITY, t + 5);
		}
		double want =
		    shared ? MARGIN_MIN * MARGIN_WIDEN : MARGIN_MIN * MARGIN_WIDEN * MARGIN_WIDEN;
		ck_assert_msg(fabs(sched_lane_margin(&lane) - want) < 1e-12, "%s: %.4f",
		              shared ? "shared" : "local", sched_lane_margin(&lane));
	}
}
END_TEST

/* Issue 28: an overload that is not the account's (Anthropic 529, a flex
 * tier's shortage) is counted, never a cut: no AIMD reaction, the learned
 * pace kept; a capacity answer of the account's still cuts. */
START_TEST(an_overload_is_counted_not_cut)
{
	init_lane(AGENTS_OFF);
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_REQUESTS] = (struct rlh_budget){
	    .has_remaining = true, .has_reset = true, .remaining = 50, .reset_ms = 30000};
	for (int i = 0; i < 6; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	sched_observe(&lane, &items[0], &h, false, 1100);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	unsigned limit = sched_concurrency_limit(&lane);
	for (int i = 1; i < 4; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1100 + i)), i);
	for (int i = 1; i < 4; i++)
		sched_complete(&lane, &items[i], SCHED_OVERLOAD, 1300 + i);
	ck_assert_int_eq(lane.stats.capacity_signals, 3);
	ck_assert_int_eq(lane.stats.capacity_reactions, 0);
	ck_assert_uint_eq(sched_concurrency_limit(&lane), limit);
	ck_assert(lane.learned[RLH_REQUESTS]->correction == 1);
	ck_assert_int_eq(aimd_delay_ms(&lane.delay), 0);
	int64_t t = wake_ms(&lane, 1400);
	ck_assert_int_eq(idx(sched_next(&lane, t)), 4);
	sched_complete(&lane, &items[4], SCHED_CAPACITY, t + 100);
	ck_assert_int_eq(lane.stats.capacity_reactions, 1);
}
END_TEST

/* A refusal's body that named the budget teaches a lane no header taught,
 * and only such a lane. */
START_TEST(a_told_limit_is_learned_once_and_never_over_headers)
{
	init_lane(AGENTS_OFF);
	ck_assert_ptr_null(sched_learned(&lane, RLH_REQUESTS));
	ck_assert(sched_learn_told(&lane, RLH_REQUESTS, 30, 60000, 1000));
	const struct learned *l = sched_learned(&lane, RLH_REQUESTS);
	ck_assert_ptr_nonnull(l);
	ck_assert(l->limit == 30 && l->shape == LEARNED_CONTINUOUS);
	ck_assert(!sched_learn_told(&lane, RLH_REQUESTS, 60, 60000, 2000));
	ck_assert(!sched_learn_told(&lane, RLH_N_BUDGETS, 60, 60000, 2000));
	ck_assert(!sched_learn_told(&lane, RLH_TOKENS, 0, 60000, 2000));
	/* the next request waits for one unit at the paced rate */
	submit(&lane, &items[0], 0, 0, 0, 1000);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert_int_ge(wake_ms(&lane, 1000), 1000 + 2100);
	/* headers taught the tokens budget: a refusal does not overrule them */
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_TOKENS] = (struct rlh_budget){
	    .has_remaining = true, .has_reset = true, .remaining = 5000, .reset_ms = 30000};
	sched_observe(&lane, &items[0], &h, false, 1100);
	ck_assert(!sched_learn_told(&lane, RLH_TOKENS, 100, 60000, 1200));
	/* a plan's rate is the user's word: nothing learned over it */
	plan.max_requests_per_minute = 600;
	init_lane(AGENTS_OFF);
	ck_assert(!sched_learn_told(&lane, RLH_REQUESTS, 600, 60000, 1000));
	ck_assert_ptr_null(sched_learned(&lane, RLH_REQUESTS));
}
END_TEST

/* ---- cost and memory (lanes that scale) ---- */

START_TEST(retries_leave_in_ready_order)
{
	/* Retry times with ties and out of order; two cancelled in the middle.
	 * Due retries go in (ready_ms, order of sched_retry), as a sorted list did. */
	static const int64_t ready[12] = {5000, 3000, 3000, 9000, 1500, 3000,
	                                  7000, 1500, 2000, 9000, 2500, 3000};
	fixed_concurrency(12);
	init_lane(AGENTS_OFF);
	lane.st.mode = LANE_OPEN; /* not blind (learned_blind_ready_at) */
	for (int i = 0; i < 12; i++)
		submit(&lane, &items[i], 0, 0, 0, 1000);
	for (int i = 0; i < 12; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	for (int i = 0; i < 12; i++) {
		sched_complete(&lane, &items[i], SCHED_TRANSIENT, 1100);
		sched_retry(&lane, &items[i], ready[i]);
	}
	ck_assert_int_eq(lane.waiting.n, 12);
	ck_assert_int_eq(wake_ms(&lane, 1100), 1500);
	sched_cancel(&lane, &items[5]);
	sched_cancel(&lane, &items[4]);
	ck_assert_int_eq(lane.waiting.n, 10);
	ck_assert_int_eq(wake_ms(&lane, 1100), 1500); /* item 7 */
	static const int expect[10] = {7, 8, 10, 1, 2, 11, 0, 6, 3, 9};
	ck_assert_ptr_null(sched_next(&lane, 1499));
	for (int k = 0; k < 10; k++)
		ck_assert_int_eq(idx(sched_next(&lane, 10000)), expect[k]);
	ck_assert_ptr_null(sched_next(&lane, 10000));
	ck_assert_int_eq(lane.waiting.n, 0);
}
END_TEST

START_TEST(serialize_parked_requests_keep_their_place)
{
	fixed_concurrency(8);
	init_lane(AGENTS_SERIALIZE);
	submit(&lane, &items[0], 0, 0, 7, 1000);
	submit(&lane, &items[1], 0, 0, 7, 1000);
	submit(&lane, &items[2], 0, 0, 7, 1000);
	submit(&lane, &items[3], 0, 0, 9, 1000);
	submit(&lane, &items[4], 0, 0, 7, 1000);
	submit(&lane, &items[5], 0, 0, 0, 1000); /* no agent: never held */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 3); /* passes over 1 and 2 */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 5); /* and 4 */
	ck_assert_ptr_null(sched_next(&lane, 1000));
	ck_assert_int_eq(lane.n_parked, 3);
	/* A newer request of a free agent does not overtake agent 7's older ones
	 * once 7 is free. */
	submit(&lane, &items[6], 0, 0, 9, 1000);
	sched_complete(&lane, &items[3], SCHED_SUCCESS, 1100);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 1);
	ck_assert_int_eq(idx(sched_next(&lane, 1100)), 6);
	ck_assert_ptr_null(sched_next(&lane, 1100));
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 1200);
	ck_assert_int_eq(idx(sched_next(&lane, 1200)), 2);
	sched_complete(&lane, &items[2], SCHED_TRANSIENT, 1300);
	/* Agent 7's retry, once due, goes before its queued request 4. */
	sched_retry(&lane, &items[2], 1400);
	ck_assert_int_eq(idx(sched_next(&lane, 1300)), 4);
	sched_complete(&lane, &items[4], SCHED_SUCCESS, 1350);
	ck_assert_int_eq(idx(sched_next(&lane, 1400)), 2);
	ck_assert_int_eq(lane.n_parked, 0);
}
END_TEST

START_TEST(serialize_off_after_reload_frees_parked_requests)
{
	fixed_concurrency(8);
	init_lane(AGENTS_SERIALIZE);
	lane.st.mode = LANE_OPEN; /* not blind (learned_blind_ready_at) */
	for (int i = 0; i < 4; i++)
		submit(&lane, &items[i], 0, 0, 7, 1000);
	submit(&lane, &items[4], 0, 0, 8, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 4);
	ck_assert_int_eq(lane.n_parked, 3);
	lane.agents_mode = AGENTS_OFF; /* what a reload does */
	for (int i = 1; i < 4; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	ck_assert_int_eq(lane.n_parked, 0);
	for (int i = 0; i < 5; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1100);
	ck_assert(sched_lane_idle(&lane));
}
END_TEST

START_TEST(parked_requests_expire_from_the_head)
{
	plan.queue.max_wait_s = 2;
	fixed_concurrency(8);
	init_lane(AGENTS_SERIALIZE);
	submit(&lane, &items[0], 0, 0, 7, 1000);
	submit(&lane, &items[1], 0, 0, 7, 1100);
	submit(&lane, &items[2], 0, 0, 8, 1200);
	submit(&lane, &items[3], 0, 0, 7, 1300);
	ck_assert_int_eq(idx(sched_next(&lane, 1300)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1300)), 2);
	ck_assert_int_eq(lane.n_parked, 1); /* 1; the scan stopped at 2 */
	ck_assert_int_eq(wake_ms(&lane, 1300), 3100);
	ck_assert_int_eq(lane.n_parked, 2); /* 3 too, looking for one to wake for */
	ck_assert_ptr_null(sched_expired(&lane, 3099));
	ck_assert_int_eq(idx(sched_expired(&lane, 3300)), 1);
	ck_assert_int_eq(idx(sched_expired(&lane, 3300)), 3);
	ck_assert_ptr_null(sched_expired(&lane, 3300));
	ck_assert_int_eq(sched_queue_depth(&lane), 0);
	ck_assert_int_eq(lane.n_parked, 0);
	ck_assert_int_eq(lane.stats.queue_timeouts, 2);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 3400);
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 3400);
	ck_assert(sched_lane_idle(&lane));
}
END_TEST

START_TEST(expiry_takes_the_fifo_in_order)
{
	plan.queue.max_wait_s = 1;
	plan.queue.max_depth = 3;
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	submit(&lane, &items[0], 0, 0, 0, 1000);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	for (int i = 1; i <= 3; i++)
		ck_assert_int_eq(submit(&lane, &items[i], 0, 0, 0, 1000 + i * 100), SCHED_OK);
	ck_assert_int_eq(submit(&lane, &items[4], 0, 0, 0, 1400), SCHED_QUEUE_FULL);
	ck_assert_int_eq(idx(sched_expired(&lane, 2250)), 1);
	ck_assert_int_eq(idx(sched_expired(&lane, 2250)), 2);
	ck_assert_ptr_null(sched_expired(&lane, 2250));
	ck_assert_int_eq(wake_ms(&lane, 2250), 2300);
	ck_assert_int_eq(submit(&lane, &items[4], 0, 0, 0, 2250), SCHED_OK);
	ck_assert_int_eq(sched_queue_depth(&lane), 2);
	ck_assert_int_eq(lane.stats.rejected_queue_full, 1);
	ck_assert_int_eq(lane.stats.queue_timeouts, 2);
}
END_TEST

START_TEST(reject_counts_every_request_of_an_agent)
{
	init_lane(AGENTS_REJECT);
	submit(&lane, &items[0], 0, 0, 7, 1000);
	submit(&lane, &items[1], 0, 0, 7, 1000); /* accepted: 7 not in flight yet */
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 1);
	sched_complete(&lane, &items[0], SCHED_SUCCESS, 1100);
	/* One of agent 7's requests is still in flight. */
	ck_assert_int_eq(submit(&lane, &items[2], 0, 0, 7, 1100), SCHED_AGENT_BUSY);
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 1200);
	ck_assert_int_eq(submit(&lane, &items[2], 0, 0, 7, 1200), SCHED_OK);
}
END_TEST

START_TEST(many_agents_are_all_serialized)
{
	/* The old table held 64 agents and let the 65th through unserialized. */
	static struct sched_item many[2 * 100];
	fixed_concurrency(1000);
	init_lane(AGENTS_SERIALIZE);
	lane.st.mode = LANE_OPEN; /* not blind (learned_blind_ready_at) */
	for (int i = 0; i < 100; i++) {
		submit(&lane, &many[2 * i], 0, 0, (uint64_t)i + 1, 1000);
		submit(&lane, &many[2 * i + 1], 0, 0, (uint64_t)i + 1, 1000);
	}
	for (int i = 0; i < 100; i++)
		ck_assert_ptr_eq(sched_next(&lane, 1000), &many[2 * i]);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	for (int i = 99; i >= 0; i--)
		sched_complete(&lane, &many[2 * i], SCHED_SUCCESS, 1100);
	for (int i = 0; i < 100; i++)
		ck_assert_ptr_eq(sched_next(&lane, 1100), &many[2 * i + 1]);
	for (int i = 0; i < 100; i++)
		sched_complete(&lane, &many[2 * i + 1], SCHED_SUCCESS, 1200);
	ck_assert(sched_lane_idle(&lane));
}
END_TEST

START_TEST(learned_budgets_allocated_on_first_report)
{
	fixed_concurrency(8);
	init_lane(AGENTS_OFF);
	ck_assert_ptr_null(sched_learned(&lane, RLH_REQUESTS));
	ck_assert_int_eq(sched_lane_heap_bytes(&lane), 0);
	ck_assert_int_eq(lane.learned[RLH_REQUESTS]->n_obs, 0); /* readable before */
	for (int i = 0; i < 3; i++) {
		submit(&lane, &items[i], 0, 0, 0, 1000);
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	}
	/* The first answer reports 10 left: the two sent after it count. */
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_REQUESTS] = (struct rlh_budget){.has_limit = true,
	                                             .has_remaining = true,
	                                             .has_reset = true,
	                                             .limit = 100,
	                                             .remaining = 10,
	                                             .reset_ms = 60000};
	ck_assert(sched_observe(&lane, &items[0], &h, false, 1100));
	const struct learned *l = sched_learned(&lane, RLH_REQUESTS);
	ck_assert_ptr_nonnull(l);
	ck_assert_ptr_null(sched_learned(&lane, RLH_TOKENS));
	ck_assert_int_gt(sched_lane_heap_bytes(&lane), 0);
	struct learned_view v;
	learned_view(l, 1100, &v);
	ck_assert(v.remaining == 8);
	ck_assert_int_eq(lane.learned[RLH_REQUESTS]->n_obs, 1);
	for (int i = 0; i < 3; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1200);
}
END_TEST

/* A scope's lane made when keys are found to share it starts with what the
 * lane of the key that found it learned (sched_lane_inherit); never over a
 * lane that has dispatched or learned already. */
START_TEST(a_fresh_lane_inherits_what_was_learned)
{
	init_lane(AGENTS_OFF);
	for (int i = 0; i < 3; i++) {
		submit(&lane, &items[i], 0, 0, 0, 1000);
		ck_assert_ptr_nonnull(sched_next(&lane, 1000));
	}
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_REQUESTS] = (struct rlh_budget){.has_limit = true,
	                                             .has_remaining = true,
	                                             .has_reset = true,
	                                             .limit = 100,
	                                             .remaining = 10,
	                                             .reset_ms = 60000};
	ck_assert(sched_observe(&lane, &items[0], &h, false, 1100));
	static struct sched_lane fresh, busy;
	sched_lane_init(&fresh, prov, &plan, AGENTS_OFF, 1100);
	ck_assert_ptr_null(sched_learned(&fresh, RLH_REQUESTS));
	ck_assert(sched_lane_inherit(&fresh, &lane));
	const struct learned *l = sched_learned(&fresh, RLH_REQUESTS);
	ck_assert_ptr_nonnull(l);
	struct learned_view v, w;
	learned_view(l, 1100, &v);
	learned_view(sched_learned(&lane, RLH_REQUESTS), 1100, &w);
	ck_assert(v.remaining == w.remaining);
	ck_assert(!sched_lane_inherit(&fresh, &lane)); /* it has learned now */
	/* a lane that has dispatched keeps its own */
	sched_lane_init(&busy, prov, &plan, AGENTS_OFF, 1100);
	struct sched_item it;
	submit(&busy, &it, 0, 0, 0, 1100);
	ck_assert_ptr_nonnull(sched_next(&busy, 1100));
	ck_assert(!sched_lane_inherit(&busy, &lane));
	ck_assert_ptr_null(sched_learned(&busy, RLH_REQUESTS));
	sched_complete(&busy, &it, SCHED_SUCCESS, 1200);
	sched_lane_release(&busy);
	sched_lane_release(&fresh);
	for (int i = 0; i < 3; i++)
		sched_complete(&lane, &items[i], SCHED_SUCCESS, 1200);
}
END_TEST

START_TEST(idle_list_follows_the_lane)
{
	static struct sched_idle_list list; /* outlives the test: teardown unlinks */
	static struct sched_lane other;
	fixed_concurrency(1);
	plan.queue.max_wait_s = 10;
	init_lane(AGENTS_OFF);
	sched_idle_list_init(&list);
	sched_lane_init(&other, prov, &plan, AGENTS_OFF, 500);
	sched_lane_track_idle(&other, &list);
	sched_lane_track_idle(&lane, &list);
	ck_assert_int_eq(list.n, 2);
	ck_assert_ptr_eq(sched_idle_coldest(&list), &other);
	ck_assert_ptr_eq(LIST_ITEM(list_last(&list.lanes), struct sched_lane, idle_link), &lane);

	submit(&other, &items[0], 0, 0, 0, 2000); /* queued: busy */
	ck_assert_int_eq(list.n, 1);
	ck_assert_ptr_eq(sched_idle_coldest(&list), &lane);
	ck_assert_ptr_eq(sched_next(&other, 2000), &items[0]); /* in flight */
	ck_assert_int_eq(list.n, 1);
	sched_complete(&other, &items[0], SCHED_TRANSIENT, 2100);
	sched_retry(&other, &items[0], 3000); /* a retry waiting is not idle */
	ck_assert_int_eq(list.n, 1);
	sched_cancel(&other, &items[0]);
	ck_assert_int_eq(list.n, 2);
	ck_assert_ptr_eq(LIST_ITEM(list_last(&list.lanes), struct sched_lane, idle_link), &other);
	/* Cancelled without a clock: active no earlier than the hottest lane. */
	ck_assert_int_ge(other.last_active_ms, lane.last_active_ms);

	submit(&lane, &items[1], 0, 0, 0, 3000);
	submit(&lane, &items[2], 0, 0, 0, 3000);
	ck_assert_ptr_eq(sched_next(&lane, 3000), &items[1]);
	ck_assert_ptr_null(sched_expired(&lane, 12000));
	ck_assert_ptr_eq(sched_expired(&lane, 13000), &items[2]);
	ck_assert_int_eq(list.n, 1);
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 13000);
	ck_assert_int_eq(list.n, 2);
	ck_assert_ptr_eq(LIST_ITEM(list_last(&list.lanes), struct sched_lane, idle_link), &lane);
	ck_assert_ptr_eq(sched_idle_coldest(&list), &other);

	/* A refused request is a use too: the lane becomes the hottest. */
	plan.queue.max_depth = 1;
	submit(&lane, &items[1], 0, 0, 0, 14000);
	ck_assert_int_eq(submit(&lane, &items[2], 0, 0, 0, 14000), SCHED_QUEUE_FULL);
	sched_cancel(&lane, &items[1]);
	ck_assert_int_eq(submit(&other, &items[3], 0, 0, 0, 15000), SCHED_OK);
	ck_assert_int_eq(submit(&other, &items[4], 0, 0, 0, 15000), SCHED_QUEUE_FULL);
	ck_assert_int_eq(list.n, 1);
	sched_cancel(&other, &items[3]);
	ck_assert_ptr_eq(LIST_ITEM(list_last(&list.lanes), struct sched_lane, idle_link), &other);
	sched_lane_release(&other);
	ck_assert_int_eq(list.n, 1);
	ck_assert_ptr_eq(sched_idle_coldest(&list), &lane);
	ck_assert_ptr_eq(LIST_ITEM(list_last(&list.lanes), struct sched_lane, idle_link), &lane);
	sched_lane_release(&lane);
	ck_assert_int_eq(list.n, 0);
	ck_assert_ptr_null(sched_idle_coldest(&list));
}
END_TEST

static enum sched_submit_result submit_rq(struct sched_item *it, int priority, uint64_t flow,
                                          double tokens, int64_t now, struct sched_item **evicted)
{
	struct sched_request rq = {.cost_output = tokens, .flow = flow, .priority = priority};
	return sched_submit(&lane, it, &rq, now, evicted);
}

START_TEST(priority_and_fair_share_order_the_queue)
{
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	struct sched_item *ev;
	for (int i = 0; i < 6; i++) /* flow 1: a backlog */
		ck_assert_int_eq(submit_rq(&items[i], 0, 1, 0, 1000, &ev), SCHED_OK);
	ck_assert_int_eq(submit_rq(&items[6], 0, 2, 0, 1000, &ev), SCHED_OK);  /* flow 2 */
	ck_assert_int_eq(submit_rq(&items[7], 10, 1, 0, 1000, &ev), SCHED_OK); /* urgent */
	ck_assert_int_eq(submit_rq(&items[8], -1, 3, 0, 1000, &ev), SCHED_OK); /* background */
	int want[] = {7, 0, 6, 1, 2, 3, 4, 5, 8};
	for (int k = 0; k < 9; k++) {
		struct sched_item *it = sched_next(&lane, 1000 + k);
		ck_assert_int_eq(idx(it), want[k]);
		sched_complete(&lane, it, SCHED_SUCCESS, 1000 + k);
	}
	ck_assert(sched_lane_idle(&lane));
	ck_assert_int_eq(sched_lane_heap_bytes(&lane), 0); /* the queue's tables are gone */
}
END_TEST

START_TEST(a_due_retry_goes_first_in_its_own_priority)
{
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	struct sched_item *ev;
	submit_rq(&items[0], -5, 1, 0, 1000, &ev);
	struct sched_item *it = sched_next(&lane, 1000);
	sched_complete(&lane, it, SCHED_TRANSIENT, 1010);
	sched_retry(&lane, it, 1100);
	submit_rq(&items[1], 0, 1, 0, 1020, &ev);
	submit_rq(&items[2], -5, 2, 0, 1020, &ev);
	ck_assert_int_eq(idx(sched_next(&lane, 1200)), 1); /* priority 0 before the retry */
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 1210);
	ck_assert_int_eq(idx(sched_next(&lane, 1220)), 0); /* the retry before its peers */
}
END_TEST

START_TEST(a_full_queue_evicts_the_newest_of_the_lowest_priority)
{
	fixed_concurrency(1);
	plan.queue.max_depth = 3;
	init_lane(AGENTS_OFF);
	struct sched_item *ev;
	ck_assert_int_eq(submit_rq(&items[0], 0, 1, 0, 1000, &ev), SCHED_OK);
	ck_assert_int_eq(submit_rq(&items[1], -2, 1, 0, 1001, &ev), SCHED_OK);
	ck_assert_int_eq(submit_rq(&items[2], -2, 2, 0, 1002, &ev), SCHED_OK);
	/* Not above the lowest waiting: the newcomer is the one refused. */
	ck_assert_int_eq(submit_rq(&items[3], -2, 3, 0, 1003, &ev), SCHED_QUEUE_FULL);
	ck_assert_ptr_null(ev);
	ck_assert_int_eq(submit_rq(&items[3], -50, 3, 0, 1003, &ev), SCHED_QUEUE_FULL);
	/* Above it: the newest of priority -2 makes room. */
	ck_assert_int_eq(submit_rq(&items[3], 0, 3, 0, 1004, &ev), SCHED_OK);
	ck_assert_ptr_eq(ev, &items[2]);
	ck_assert_int_eq(items[2].state, SCHED_NONE);
	ck_assert_int_eq(submit_rq(&items[4], 7, 3, 0, 1005, &ev), SCHED_OK);
	ck_assert_ptr_eq(ev, &items[1]);
	ck_assert_int_eq(submit_rq(&items[5], 1, 3, 0, 1006, &ev), SCHED_OK);
	ck_assert_ptr_eq(ev, &items[3]); /* priority 0: the newest of them */
	ck_assert_int_eq(sched_queue_depth(&lane), 3);
	ck_assert_int_eq(lane.stats.rejected_queue_full, 5);
	int want[] = {4, 5, 0};
	for (int k = 0; k < 3; k++) {
		struct sched_item *it = sched_next(&lane, 2000 + k);
		ck_assert_int_eq(idx(it), want[k]);
		sched_complete(&lane, it, SCHED_SUCCESS, 2000 + k);
	}
}
END_TEST

START_TEST(the_oldest_expires_first_whatever_its_priority)
{
	fixed_concurrency(1);
	plan.queue.max_wait_s = 1;
	init_lane(AGENTS_OFF);
	struct sched_item *ev;
	submit_rq(&items[0], 0, 1, 0, 1000, &ev);
	ck_assert_ptr_eq(sched_next(&lane, 1000), &items[0]); /* keeps the slot */
	submit_rq(&items[1], -3, 1, 0, 1100, &ev);
	submit_rq(&items[2], 9, 1, 0, 1200, &ev);
	submit_rq(&items[3], -3, 2, 0, 1300, &ev);
	ck_assert_int_eq(wake_ms(&lane, 1500), 2100);
	ck_assert_ptr_null(sched_expired(&lane, 2099));
	ck_assert_ptr_eq(sched_expired(&lane, 2250), &items[1]);
	ck_assert_ptr_eq(sched_expired(&lane, 2250), &items[2]);
	ck_assert_ptr_null(sched_expired(&lane, 2250));
	ck_assert_int_eq(wake_ms(&lane, 2250), 2300);
}
END_TEST

START_TEST(the_eta_is_per_priority_and_fair_share)
{
	plan.max_requests_per_second = 10; /* 100 ms a request */
	fixed_concurrency(100);
	init_lane(AGENTS_OFF);
	struct sched_item *ev;
	for (int i = 0; i < 10; i++)
		submit_rq(&items[i], 0, 1, 0, 1000, &ev);
	submit_rq(&items[10], 5, 2, 0, 1000, &ev);
	struct sched_request batch = {.flow = 1}, chat = {.flow = 3},
	                     urgent = {.flow = 3, .priority = 6};
	ck_assert_int_eq(sched_queue_eta_ms(&lane, &batch, 1000), 1100); /* 11 ahead */
	ck_assert_int_eq(sched_queue_eta_ms(&lane, &chat, 1000), 200);   /* 1 + one turn */
	ck_assert_int_eq(sched_queue_eta_ms(&lane, &urgent, 1000), 0);
	ck_assert_int_eq(sched_queue_eta_ms(&lane, NULL, 1000), 1100);
	ck_assert_int_eq(sched_priority_eta_ms(&lane, 0, 1000), 200);
	ck_assert_int_eq(sched_priority_eta_ms(&lane, 5, 1000), 100); /* one turn of flow 2 */
}
END_TEST

START_TEST(tokens_weigh_the_share_on_a_token_lane)
{
	fixed_concurrency(1);
	init_lane(AGENTS_OFF);
	struct sched_item *ev;
	for (int i = 0; i < 4; i++)
		submit_rq(&items[i], 0, 1, 4000, 1000, &ev); /* large */
	for (int i = 4; i < 16; i++)
		submit_rq(&items[i], 0, 2, 1000, 1000, &ev); /* small */
	int large = 0;
	for (int k = 0; k < 10; k++) {
		struct sched_item *it = sched_next(&lane, 1000 + k);
		large += idx(it) < 4;
		sched_complete(&lane, it, SCHED_SUCCESS, 1000 + k);
	}
	ck_assert_int_eq(large, 2); /* 2 × 4000 tokens against 8 × 1000 */
}
END_TEST

/* A reference for the dispatch order: every request scanned on each call,
 * with its own bookkeeping of the fair-share tags (start-time fair queuing,
 * cost 1). Random operations on both must agree. */
#define REF_N 40
#define REF_FLOWS 4
#define REF_DEPTH 14
static const int ref_prios[3] = {-1, 0, 2};
struct ref_item {
	int state; /* an enum sched_state */
	bool retried, counted;
	uint64_t order, agent;
	int flow, prio; /* prio: an index into ref_prios */
	double tag;
	int64_t ready_ms, arrived_ms;
};
static struct ref_item ref[REF_N];
static uint64_t ref_seq;
static double ref_vtime[3], ref_finish[REF_FLOWS][3];
static int ref_level_n[3], ref_flow_n[REF_FLOWS][3];

static bool ref_busy(uint64_t agent)
{
	for (int i = 0; agent != 0 && i < REF_N; i++)
		if (ref[i].state == SCHED_IN_FLIGHT && ref[i].counted && ref[i].agent == agent)
			return true;
	return false;
}

static bool ref_before(const struct ref_item *a, const struct ref_item *b)
{
	if (a->prio != b->prio)
		return a->prio > b->prio;
	if (a->retried != b->retried)
		return a->retried;
	if (!a->retried && a->tag != b->tag)
		return a->tag < b->tag;
	return a->order < b->order;
}

static int ref_eligible(void)
{
	bool skip = lane.agents_mode == AGENTS_SERIALIZE;
	int best = -1;
	for (int i = 0; i < REF_N; i++)
		if (ref[i].state == SCHED_QUEUED && !(skip && ref_busy(ref[i].agent)) &&
		    (best < 0 || ref_before(&ref[i], &ref[best])))
			best = i;
	return best;
}

/* The new request waiting longest; ties: the higher priority, then arrival. */
static int ref_oldest(void)
{
	int best = -1;
	for (int i = 0; i < REF_N; i++) {
		const struct ref_item *r = &ref[i];
		if (r->state != SCHED_QUEUED || r->retried)
			continue;
		if (best < 0 || r->arrived_ms < ref[best].arrived_ms ||
		    (r->arrived_ms == ref[best].arrived_ms &&
		     (r->prio > ref[best].prio ||
		      (r->prio == ref[best].prio && r->order < ref[best].order))))
			best = i;
	}
	return best;
}

static int ref_fresh_count(void)
{
	int n = 0;
	for (int i = 0; i < REF_N; i++)
		n += ref[i].state == SCHED_QUEUED && !ref[i].retried;
	return n;
}

/* The newest new request of the lowest priority waiting. */
static int ref_newest_lowest(void)
{
	int best = -1;
	for (int i = 0; i < REF_N; i++) {
		const struct ref_item *r = &ref[i];
		if (r->state != SCHED_QUEUED || r->retried)
			continue;
		if (best < 0 || r->prio < ref[best].prio ||
		    (r->prio == ref[best].prio && r->order > ref[best].order))
			best = i;
	}
	return best;
}

static void ref_enter(int i, int flow, int prio, uint64_t agent, int64_t now)
{
	if (ref_level_n[prio]++ == 0)
		ref_vtime[prio] = 0;
	if (ref_flow_n[flow][prio]++ == 0)
		ref_finish[flow][prio] = ref_vtime[prio];
	double tag =
	    ref_finish[flow][prio] > ref_vtime[prio] ? ref_finish[flow][prio] : ref_vtime[prio];
	ref_finish[flow][prio] = tag + 1;
	ref[i] = (struct ref_item){.state = SCHED_QUEUED,
	                           .order = ++ref_seq,
	                           .agent = lane.agents_mode == AGENTS_OFF ? 0 : agent,
	                           .flow = flow,
	                           .prio = prio,
	                           .tag = tag,
	                           .arrived_ms = now};
}

/* A queued request leaves its state (dispatched: its tag is the new V). */
static void ref_leave(int i, bool dispatched)
{
	struct ref_item *r = &ref[i];
	if (r->state == SCHED_QUEUED && !r->retried) {
		if (dispatched && r->tag > ref_vtime[r->prio])
			ref_vtime[r->prio] = r->tag;
		ref_level_n[r->prio]--;
		ref_flow_n[r->flow][r->prio]--;
	}
}

static int ref_count(int state)
{
	int n = 0;
	for (int i = 0; i < REF_N; i++)
		n += ref[i].state == state;
	return n;
}

static int ref_next(int64_t now, unsigned limit)
{
	for (;;) { /* due retries in (ready_ms, order) */
		int d = -1;
		for (int i = 0; i < REF_N; i++)
			if (ref[i].state == SCHED_RETRY_WAIT && ref[i].ready_ms <= now &&
			    (d < 0 || ref[i].ready_ms < ref[d].ready_ms ||
			     (ref[i].ready_ms == ref[d].ready_ms && ref[i].order < ref[d].order)))
				d = i;
		if (d < 0)
			break;
		ref[d].state = SCHED_QUEUED;
		ref[d].retried = true;
		ref[d].order = ++ref_seq;
	}
	if ((unsigned)ref_count(SCHED_IN_FLIGHT) >= limit)
		return -1;
	int e = ref_eligible();
	if (e >= 0) {
		ref_leave(e, true);
		ref[e].state = SCHED_IN_FLIGHT;
		ref[e].counted = ref[e].agent != 0 && lane.agents_mode != AGENTS_OFF;
	}
	return e;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int pick(uint64_t *s, int state)
{
	int n = ref_count(state);
	if (n == 0)
		return -1;
	int k = (int)(rnd(s) % (uint64_t)n);
	for (int i = 0; i < REF_N; i++)
		if (ref[i].state == state && k-- == 0)
			return i;
	return -1;
}

/* One new request, on both sides: the answer, and what it evicted. */
static void ref_submit(struct sched_item *its, int i, uint64_t *s, int64_t now)
{
	uint64_t agent = rnd(s) % 4;
	int flow = (int)(rnd(s) % REF_FLOWS), prio = (int)(rnd(s) % 3);
	enum sched_submit_result want = SCHED_OK;
	int want_evicted = -1;
	if (lane.agents_mode == AGENTS_REJECT && ref_busy(agent)) {
		want = SCHED_AGENT_BUSY;
	} else if (ref_fresh_count() >= REF_DEPTH) {
		int low = ref_newest_lowest();
		if (ref[low].prio < prio)
			want_evicted = low;
		else
			want = SCHED_QUEUE_FULL;
	}
	struct sched_request rq = {
	    .agent = agent, .flow = (uint64_t)flow, .priority = ref_prios[prio]};
	struct sched_item *ev;
	ck_assert_int_eq(sched_submit(&lane, &its[i], &rq, now, &ev), want);
	ck_assert_int_eq(ev == NULL ? -1 : (int)(ev - its), want_evicted);
	if (want_evicted >= 0) {
		ref_leave(want_evicted, false);
		ref[want_evicted].state = SCHED_NONE;
	}
	if (want == SCHED_OK)
		ref_enter(i, flow, prio, agent, now);
}

START_TEST(dispatch_order_matches_a_full_scan)
{
	static struct sched_item its[REF_N];
	static const enum agents_mode modes[3] = {AGENTS_SERIALIZE, AGENTS_OFF, AGENTS_REJECT};
	const unsigned limit = 4;
	const int64_t max_wait = 3000;
	plan.queue.max_wait_s = 3;
	plan.queue.max_depth = REF_DEPTH;
	fixed_concurrency(limit);
	uint64_t s = 0x2545f4914f6cdd1dULL + (uint64_t)_i;
	init_lane(AGENTS_SERIALIZE);
	memset(ref, 0, sizeof(ref));
	memset(ref_level_n, 0, sizeof(ref_level_n));
	memset(ref_flow_n, 0, sizeof(ref_flow_n));
	ref_seq = 0;
	int64_t now = 1000;
	for (int step = 0; step < 20000; step++) {
		int r = (int)(rnd(&s) % 100);
		if (r < 30) {
			int i = pick(&s, SCHED_NONE);
			if (i >= 0)
				ref_submit(its, i, &s, now);
		} else if (r < 55) {
			struct sched_item *got = sched_next(&lane, now);
			int want = ref_next(now, limit);
			ck_assert_int_eq(got == NULL ? -1 : (int)(got - its), want);
		} else if (r < 70) {
			int i = pick(&s, SCHED_IN_FLIGHT);
			if (i < 0)
				continue;
			bool again = rnd(&s) % 2;
			sched_complete(&lane, &its[i], again ? SCHED_TRANSIENT : SCHED_SUCCESS,
			               now);
			ref[i].state = SCHED_NONE;
			if (again) {
				int64_t at = now + (int64_t)(rnd(&s) % 4) * 500;
				sched_retry(&lane, &its[i], at);
				ref[i].state = SCHED_RETRY_WAIT;
				ref[i].ready_ms = at;
				ref[i].order = ++ref_seq;
			}
		} else if (r < 78) {
			int i = pick(&s, rnd(&s) % 2 ? SCHED_QUEUED : SCHED_RETRY_WAIT);
			if (i < 0)
				continue;
			sched_cancel(&lane, &its[i]);
			ref_leave(i, false);
			ref[i].state = SCHED_NONE;
		} else if (r < 88) {
			now += (int64_t)(rnd(&s) % 700);
		} else if (r < 93) {
			for (;;) {
				int h = ref_oldest();
				int want = h >= 0 && ref[h].arrived_ms + max_wait <= now ? h : -1;
				struct sched_item *got = sched_expired(&lane, now);
				ck_assert_int_eq(got == NULL ? -1 : (int)(got - its), want);
				if (want < 0)
					break;
				ref_leave(want, false);
				ref[want].state = SCHED_NONE;
			}
		} else if (r < 95) {
			lane.agents_mode = modes[rnd(&s) % 3];
		} else {
			int64_t want = SCHED_NEVER;
			for (int i = 0; i < REF_N; i++)
				if (ref[i].state == SCHED_RETRY_WAIT && ref[i].ready_ms < want)
					want = ref[i].ready_ms;
			int h = ref_oldest();
			if (h >= 0 && ref[h].arrived_ms + max_wait < want)
				want = ref[h].arrived_ms + max_wait;
			if ((unsigned)ref_count(SCHED_IN_FLIGHT) < limit && ref_eligible() >= 0 &&
			    now < want)
				want = now;
			ck_assert_int_eq(wake_ms(&lane, now), want);
		}
		ck_assert_int_eq(lane.in_flight, ref_count(SCHED_IN_FLIGHT));
		ck_assert_int_eq(lane.waiting.n, ref_count(SCHED_RETRY_WAIT));
		ck_assert_int_eq(sched_queue_depth(&lane), ref_fresh_count());
		ck_assert(sched_lane_idle(&lane) == (ref_count(SCHED_NONE) == REF_N));
	}
	for (int i = 0; i < REF_N; i++) {
		sched_cancel(&lane, &its[i]);
		sched_complete(&lane, &its[i], SCHED_ABORTED, now);
	}
	ck_assert(sched_lane_idle(&lane));
	ck_assert_int_eq(sched_lane_heap_bytes(&lane) > 0, lane.agents != NULL);
}
END_TEST

/* ---- the shared store (store.kind: redis): permits ---- */

START_TEST(shared_lanes_dispatch_only_with_a_permit)
{
	fixed_concurrency(8);
	init_lane(AGENTS_OFF);
	sched_set_gates_mode(&lane, SCHED_GATES_SHARED, 1, 1000);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(submit(&lane, &items[i], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_ptr_null(sched_next(&lane, 1000));
	struct sched_costs head;
	/* No rate gate here: one decision per request waiting, pipelined. */
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1000, &head), 3);
	sched_permits_asked(&lane, 3);
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1000, &head), 0);
	ck_assert(!sched_lane_idle(&lane));
	/* Waiting for the answers: the lane's timer is not what wakes it
	 * (only the queue's max wait is left). */
	ck_assert_int_eq(wake_ms(&lane, 1000), 1000 + (int64_t)plan.queue.max_wait_s * 1000);
	sched_permit_answer(&lane, SCHED_PERMIT_GO, 0);
	ck_assert_int_eq(idx(sched_next(&lane, 1001)), 0);
	ck_assert_ptr_null(sched_next(&lane, 1001));
	/* "Not before 1100": nobody asks again before then. */
	sched_permit_answer(&lane, SCHED_PERMIT_WAIT, 1100);
	sched_permit_answer(&lane, SCHED_PERMIT_FAILED, 0);
	ck_assert_uint_eq(lane.asking, 0);
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1050, &head), 0);
	ck_assert_int_eq(wake_ms(&lane, 1050), 1100);
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1100, &head), 2);
}
END_TEST

START_TEST(shared_lanes_ask_as_many_as_the_local_gates_allow)
{
	fixed_concurrency(8);
	plan.max_requests_per_second = 10;
	plan.burst = 3;
	init_lane(AGENTS_OFF);
	sched_set_gates_mode(&lane, SCHED_GATES_SHARED, 1, 1000);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(submit(&lane, &items[i], 0, 0, 0, 1000), SCHED_OK);
	struct sched_costs head;
	/* The local gates count this replica's own dispatches at the full
	 * limit: never stricter than the shared ones, so they bound the ask. */
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1000, &head), 3);
	sched_permits_asked(&lane, 3);
	for (int i = 0; i < 3; i++)
		sched_permit_answer(&lane, SCHED_PERMIT_GO, 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1000, &head), 0);
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1100, &head), 1);
}
END_TEST

START_TEST(unused_permits_are_given_back)
{
	fixed_concurrency(8);
	init_lane(AGENTS_OFF);
	sched_set_gates_mode(&lane, SCHED_GATES_SHARED, 1, 1000);
	ck_assert_int_eq(submit(&lane, &items[0], 0, 0, 0, 1000), SCHED_OK);
	struct sched_costs head;
	ck_assert_uint_eq(sched_permits_wanted(&lane, 1000, &head), 1);
	sched_permits_asked(&lane, 1);
	sched_cancel(&lane, &items[0]); /* the client left */
	sched_permit_answer(&lane, SCHED_PERMIT_GO, 0);
	ck_assert_uint_eq(sched_permits_unused(&lane), 1);
	ck_assert_uint_eq(sched_permits_unused(&lane), 0);
	ck_assert(sched_lane_idle(&lane));
}
END_TEST

START_TEST(fallback_paces_at_the_replicas_share)
{
	fixed_concurrency(8);
	plan.max_requests_per_second = 10;
	init_lane(AGENTS_OFF);
	sched_set_gates_mode(&lane, SCHED_GATES_FALLBACK, 1.0 / 4, 1000);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(submit(&lane, &items[i], 0, 0, 0, 1000), SCHED_OK);
	ck_assert_int_eq(idx(sched_next(&lane, 1000)), 0);
	ck_assert_ptr_null(sched_next(&lane, 1399));
	ck_assert_int_eq(wake_ms(&lane, 1001), 1400); /* 10 / 4 per second */
	ck_assert_int_eq(idx(sched_next(&lane, 1400)), 1);
	/* Back to the full rate when the store returns (local gates, SHARED). */
	sched_set_gates_mode(&lane, SCHED_GATES_LOCAL, 1, 1400);
	ck_assert_int_eq(wake_ms(&lane, 1401), 1500);
}
END_TEST

/* What /status and /metrics show of a lane is what the lane says: after
 * dispatches, a capacity signal, a retry, a hold, a learned budget and a day's
 * spending, every field of the view against the lane's own fields and
 * functions, and the numbers this history must give. */
START_TEST(the_view_says_what_the_lane_says)
{
	plan.max_requests_per_day = 100;
	init_lane(AGENTS_OFF);
	memcpy(lane.key_id, "k-1", 4);
	sched_day_reset(&lane, 90000, false);
	struct sched_item *ev;
	for (int i = 0; i < 4; i++)
		submit_rq(&items[i], 0, 1, 0, 1000, &ev);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(idx(sched_next(&lane, 1000)), i);
	submit_rq(&items[4], 0, 1, 0, 1050, &ev);
	submit_rq(&items[5], 5, 2, 0, 1050, &ev);
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	h.budget[RLH_REQUESTS] = (struct rlh_budget){.has_limit = true,
	                                             .has_remaining = true,
	                                             .has_reset = true,
	                                             .limit = 100,
	                                             .remaining = 10,
	                                             .reset_ms = 60000};
	sched_observe(&lane, &items[0], &h, false, 1100);
	sched_complete(&lane, &items[0], SCHED_CAPACITY, 1100);
	sched_retry(&lane, &items[0], 3000);
	sched_complete(&lane, &items[1], SCHED_SUCCESS, 1150);
	sched_hold(&lane, 5000);

	struct sched_lane_view v;
	sched_lane_view(&lane, 1200, &v);
	ck_assert_str_eq(v.provider, "openai");
	ck_assert_str_eq(v.key_id, "k-1");
	ck_assert_str_eq(v.plan, "default");
	ck_assert(v.max_requests_per_second == plan.max_requests_per_second);
	ck_assert(v.max_requests_per_minute == plan.max_requests_per_minute);
	ck_assert(v.max_requests_per_hour == plan.max_requests_per_hour);
	ck_assert(v.min_ms_per_request == plan.min_ms_per_request);
	ck_assert(v.max_tokens_per_minute == plan.max_tokens_per_minute);
	ck_assert_uint_eq(v.burst, plan.burst);
	ck_assert_uint_eq(v.max_concurrent, 64);
	ck_assert(v.max_requests_per_day == 100);

	ck_assert_uint_eq(v.queue_depth, 2);
	ck_assert_uint_eq(v.queue_depth, sched_queue_depth(&lane));
	ck_assert_uint_eq(v.retry_waiting, 1);
	ck_assert_uint_eq(v.retry_waiting, lane.waiting.n);
	ck_assert_uint_eq(v.in_flight, 2);
	ck_assert_uint_eq(v.in_flight, lane.in_flight);
	ck_assert_uint_eq(v.concurrency_limit, 2); /* 4 in flight at the signal x 0.5 */
	ck_assert_uint_eq(v.concurrency_limit, sched_concurrency_limit(&lane));
	ck_assert_int_eq(v.dispatch_delay_ms, aimd_delay_ms(&lane.delay));
	ck_assert_int_eq(v.hold_ms, 3800);
	ck_assert_int_eq(v.queue_eta_ms, sched_queue_eta_ms(&lane, NULL, 1200));
	ck_assert_int_eq(v.idle_ms, 1200 - lane.last_active_ms);
	ck_assert_str_eq(v.state, "held");
	ck_assert_str_eq(v.state, sched_lane_state(&lane, 1200));
	ck_assert_int_eq(v.gates_mode, SCHED_GATES_LOCAL);

	ck_assert_uint_eq(v.stats.dispatched, 4);
	ck_assert_uint_eq(v.stats.succeeded, 1);
	ck_assert_uint_eq(v.stats.capacity_signals, 1);
	ck_assert_mem_eq(&v.stats, &lane.stats, sizeof(v.stats));
	ck_assert_mem_eq(&v.stats, sched_lane_stats(&lane), sizeof(v.stats));
	ck_assert_int_eq(sched_lane_last_active_ms(&lane), lane.last_active_ms);

	for (int b = 0; b < RLH_N_BUDGETS; b++)
		ck_assert(v.has_learned[b] == (b == RLH_REQUESTS));
	struct learned_view lv;
	learned_view(sched_learned(&lane, RLH_REQUESTS), 1200, &lv);
	ck_assert_uint_eq(v.learned[RLH_REQUESTS].observations, 1);
	ck_assert(v.learned[RLH_REQUESTS].limit == 100);
	ck_assert_mem_eq(&v.learned[RLH_REQUESTS], &lv, sizeof(lv));

	ck_assert(v.day_limited);
	ck_assert(v.day_requests == lane.day.requests);
	ck_assert(v.day_requests == 4);
	ck_assert(v.day_tokens == lane.day.tokens);
	ck_assert_int_eq(v.day_resets_in_ms, 88800);

	/* priority 5 first, then 0; one request and one agent each */
	ck_assert_uint_eq(v.n_levels, 2);
	struct sched_level_view l0, l1;
	sched_lane_level(&lane, 0, 1200, &l0);
	sched_lane_level(&lane, 1, 1200, &l1);
	ck_assert_int_eq(l0.priority, 5);
	ck_assert_uint_eq(l0.queued, 1);
	ck_assert_uint_eq(l0.agents, 1);
	ck_assert_int_eq(l0.eta_ms, sched_priority_eta_ms(&lane, 5, 1200));
	ck_assert_int_eq(l1.priority, 0);
	ck_assert_uint_eq(l1.queued, 1);
	ck_assert_uint_eq(l1.agents, 1);
	ck_assert_int_eq(l1.eta_ms, sched_priority_eta_ms(&lane, 0, 1200));

	/* The accessors read the same lane. */
	ck_assert_ptr_eq(sched_lane_provider(&lane), prov);
	ck_assert_ptr_eq(sched_lane_plan(&lane), &plan);
	ck_assert_str_eq(sched_lane_key_id(&lane), "k-1");
	ck_assert_ptr_eq(sched_lane_gates(&lane), &lane.gates);
	ck_assert_int_eq(sched_lane_gates_mode(&lane), SCHED_GATES_LOCAL);
	ck_assert_uint_eq(sched_lane_permits(&lane), 0);

	/* Empty the lane for teardown. */
	sched_complete(&lane, &items[2], SCHED_SUCCESS, 1300);
	sched_complete(&lane, &items[3], SCHED_SUCCESS, 1300);
	while (sched_drain(&lane) != NULL)
		;
	ck_assert(sched_lane_idle(&lane));
}
END_TEST

static Suite *sched_suite(void)
{
	Suite *s = suite_create("sched");
	TCase *tc = tcase_create("sched");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, fifo_order);
	tcase_add_test(tc, oldest_wait);
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
	tcase_add_test(tc, fresh_lane_is_open_up_to_max_concurrent);
	tcase_add_test(tc, idle_lane_opens_again);
	tcase_add_test(tc, capacity_headers_hold_until_decided);
	tcase_add_test(tc, a_pending_hold_is_capped);
	tcase_add_test(tc, a_refused_probe_holds_again);
	tcase_add_test(tc, a_success_sent_before_the_hold_does_not_end_it);
	tcase_add_test(tc, a_learned_budget_at_zero_ends_with_a_probe);
	tcase_add_test(tc, quota_drains_refuses_and_probes);
	tcase_add_test(tc, a_daily_budget_is_spent_then_refused_until_the_reset);
	tcase_add_test(tc, a_daily_token_budget_counts_the_estimate_then_the_usage);
	tcase_add_test(tc, a_refusal_that_says_when_cuts_the_learned_rate_by_a_margin_only);
	tcase_add_test(tc, empty_lane_never_wakes);
	tcase_add_test(tc, saturation_is_recorded);
	tcase_add_test(tc, a_burst_of_capacity_errors_is_one_signal);
	tcase_add_test(tc, a_strict_gate_learns_its_margin_from_refusals_at_its_spacing);
	tcase_add_test(tc, a_refusal_the_margin_answers_cuts_nothing_else);
	tcase_add_test(tc, a_shared_lanes_widening_settles_before_the_next);
	tcase_add_test(tc, an_overload_is_counted_not_cut);
	tcase_add_test(tc, a_told_limit_is_learned_once_and_never_over_headers);
	tcase_add_test(tc, retries_leave_in_ready_order);
	tcase_add_test(tc, serialize_parked_requests_keep_their_place);
	tcase_add_test(tc, serialize_off_after_reload_frees_parked_requests);
	tcase_add_test(tc, parked_requests_expire_from_the_head);
	tcase_add_test(tc, expiry_takes_the_fifo_in_order);
	tcase_add_test(tc, reject_counts_every_request_of_an_agent);
	tcase_add_test(tc, many_agents_are_all_serialized);
	tcase_add_test(tc, learned_budgets_allocated_on_first_report);
	tcase_add_test(tc, idle_list_follows_the_lane);
	tcase_add_test(tc, a_fresh_lane_inherits_what_was_learned);
	tcase_add_test(tc, a_hold_while_the_probe_is_out_needs_another_probe);
	tcase_add_test(tc, the_quota_and_the_day_coincide);
	tcase_add_test(tc, a_forbidden_transition_stops_the_process);
	tcase_add_test(tc, priority_and_fair_share_order_the_queue);
	tcase_add_test(tc, a_due_retry_goes_first_in_its_own_priority);
	tcase_add_test(tc, a_full_queue_evicts_the_newest_of_the_lowest_priority);
	tcase_add_test(tc, the_oldest_expires_first_whatever_its_priority);
	tcase_add_test(tc, the_eta_is_per_priority_and_fair_share);
	tcase_add_test(tc, tokens_weigh_the_share_on_a_token_lane);
	tcase_add_test(tc, the_view_says_what_the_lane_says);
	tcase_add_test(tc, shared_lanes_dispatch_only_with_a_permit);
	tcase_add_test(tc, shared_lanes_ask_as_many_as_the_local_gates_allow);
	tcase_add_test(tc, unused_permits_are_given_back);
	tcase_add_test(tc, fallback_paces_at_the_replicas_share);
	tcase_add_test(tc, auto_a_silent_lane_starts_slowly);
	tcase_add_test(tc, auto_a_lane_that_hears_headers_is_aimd);
	tcase_add_test(tc, auto_a_refusal_hands_the_lane_to_aimd);
	tcase_add_test(tc, gradient_mode_the_lower_limit_and_one_cut);
	tcase_add_test(tc, timed_answers_feed_the_gradient);
	tcase_add_test(tc, an_idle_gradient_lane_starts_slowly_again);
	tcase_add_loop_test(tc, dispatch_order_matches_a_full_scan, 0, 8);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("sched", sched_suite)
