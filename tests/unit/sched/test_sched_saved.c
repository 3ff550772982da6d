/* SPDX-License-Identifier: Apache-2.0 */
/* A lane across a restart: what sched_lane_export saves, sched_saved_age
 * leaves of it after time passed (a pure function of the value and the wall
 * clock), and sched_lane_import takes back up in a fresh lane of another
 * process, whose monotonic clock is another. Clock injected. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "sched/sched.h"
#include "sched/sched_lane-t.h"
#include "sched/state_file.h"
#include "unit.h"

/* The old process's clocks: monotonic OLD, wall OLD + WALL_OLD; the new one's
 * monotonic is far behind (a reboot), its wall clock later. */
#define WALL_OLD INT64_C(1795900000000)
#define WALL_NEW_SHIFT INT64_C(1795000000000)

static struct config *cfg;
static struct plan_conf plan;
static struct provider_conf *prov;
static struct sched_lane a, b;
static struct sched_item items[32];

static void setup(void)
{
	char err[256];
	cfg = config_load(NULL, NULL, err, sizeof(err));
	ck_assert_msg(cfg != NULL, "%s", err);
	plan = *config_plan(cfg, "default");
	prov = (struct provider_conf *)config_provider(cfg, "openai");
	memset(items, 0, sizeof(items));
	sched_lane_init(&a, prov, &plan, AGENTS_OFF, 1000);
	sched_lane_init(&b, prov, &plan, AGENTS_OFF, 100);
	a.scope = b.scope = UINT64_C(0x3f9a1c0b7d2e0000);
	snprintf(a.key_id, sizeof(a.key_id), "3f9a1c0b7d2e");
	snprintf(a.key_hash, sizeof(a.key_hash), "%s",
	         "3f9a1c0b7d2e1111222233334444555566667777888899990000aaaabbbbcccc");
}

static void teardown(void)
{
	sched_lane_release(&a);
	sched_lane_release(&b);
	config_free(cfg);
}

static void submit(struct sched_lane *l, struct sched_item *it, int64_t now)
{
	struct sched_request rq = {0};
	struct sched_item *evicted;
	ck_assert_int_eq(sched_submit(l, it, &rq, now, &evicted), SCHED_OK);
}

/* Lane a, taught by answers: a requests budget (OpenAI's, to the ms), a
 * capacity signal (the concurrency limit closed, a dispatch delay), the
 * outputs of its answers. */
static void teach_a(void)
{
	struct rlh_result h;
	int64_t t = 1000;
	for (int i = 0; i < 20; i++)
		submit(&a, &items[i], t);
	for (int i = 0; i < 12; i++, t += 50) {
		struct sched_item *it = sched_next(&a, (double)t);
		ck_assert_ptr_nonnull(it);
		memset(&h, 0, sizeof(h));
		h.budget[RLH_REQUESTS] = (struct rlh_budget){.has_remaining = true,
		                                             .has_reset = true,
		                                             .has_limit = true,
		                                             .remaining = 100 - i,
		                                             .reset_ms = 1000 + 600 * i,
		                                             .limit = 100};
		sched_observe(&a, it, &h, false, t + 20);
		struct cost_request r = {.max_output = -1};
		struct cost_usage u = {.charged_input = 10,
		                       .cache_creation = -1,
		                       .cache_read = -1,
		                       .output = 100 + 10 * i};
		sched_cost_observe(&a, &r, &u, t);
		sched_complete(&a, it, i == 11 ? SCHED_CAPACITY : SCHED_SUCCESS, t + 20);
	}
	ck_assert_ptr_nonnull(sched_learned(&a, RLH_REQUESTS));
	ck_assert(!a.conc.open);
}

START_TEST(export_names_no_key)
{
	teach_a();
	struct sched_lane_saved s;
	struct learned lb[RLH_N_BUDGETS];
	unsigned n = sched_lane_export(&a, 2000, WALL_OLD + 2000, &s, lb);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(s.budgets, 1u << RLH_REQUESTS);
	ck_assert_str_eq(s.provider, "openai");
	ck_assert_str_eq(s.scope_name, "3f9a1c0b7d2e");
	ck_assert_str_eq(s.model, "");
	ck_assert_int_eq(s.last_active_ms, WALL_OLD + a.last_active_ms);
	ck_assert(s.answered);
	ck_assert_uint_eq(s.n_outputs, 12);
	ck_assert_uint_eq(s.outputs[0], 100);
	ck_assert_uint_eq(s.outputs[11], 210);
	/* the budget's instants on the wall clock */
	ck_assert_int_eq(lb[0].obs_at_ms, a.learned[RLH_REQUESTS]->obs_at_ms + WALL_OLD);
	/* nothing of the key beyond its scope's 64 bits */
	struct state_snapshot snap = {.lanes = &s, .n_lanes = 1, .budgets = lb, .n_budgets = 1};
	char *buf;
	size_t len;
	ck_assert_int_eq(state_file_encode(&snap, &buf, &len, NULL), 0);
	ck_assert_ptr_null(strstr(buf, a.key_hash));
	ck_assert_ptr_null(strstr(buf, a.key_hash + 16));
	free(buf);
}
END_TEST

/* An idle lane saved twice makes the same bytes (the writer then writes
 * nothing): the same wall-clock offset, nothing of "now" in the value. */
START_TEST(export_of_an_idle_lane_is_stable)
{
	teach_a();
	struct sched_lane_saved s1, s2;
	struct learned l1[RLH_N_BUDGETS], l2[RLH_N_BUDGETS];
	memset(l1, 0, sizeof(l1));
	memset(l2, 0, sizeof(l2));
	unsigned n1 = sched_lane_export(&a, 2000, WALL_OLD + 2000, &s1, l1);
	unsigned n2 = sched_lane_export(&a, 32000, WALL_OLD + 32000, &s2, l2);
	ck_assert_uint_eq(n1, n2);
	ck_assert(memcmp(&s1, &s2, sizeof(s1)) == 0);
	ck_assert(memcmp(l1, l2, n1 * sizeof(l1[0])) == 0);
}
END_TEST

/* Taken up in another process after 3 s: the same limits, the same pace at
 * the same wall-clock instants, shown as restored until its first answer. */
START_TEST(import_resumes_where_it_was)
{
	teach_a();
	int64_t at = 2000; /* a's clock when it is saved */
	struct sched_lane_saved s;
	struct learned lb[RLH_N_BUDGETS];
	sched_lane_export(&a, at, WALL_OLD + at, &s, lb);
	int64_t gap = 3000;
	int64_t wall = WALL_OLD + at + gap;
	ck_assert(sched_saved_age(&s, lb, wall, 900000));
	int64_t now_b = 100; /* b's clock then */
	ck_assert(sched_lane_import(&b, &s, lb, now_b, wall));
	ck_assert_uint_eq(sched_concurrency_limit(&b), sched_concurrency_limit(&a));
	ck_assert_int_eq(aimd_delay_ms(&b.delay), aimd_delay_ms(&a.delay));
	ck_assert(b.st.mode != LANE_LEARNING);
	ck_assert_int_eq(cost_output_percentile(&b.cost), cost_output_percentile(&a.cost));
	/* b at now_b + x is a at at + gap + x */
	int64_t shift = at + gap - now_b;
	const struct learned *la = sched_learned(&a, RLH_REQUESTS),
	                     *lbb = sched_learned(&b, RLH_REQUESTS);
	ck_assert_ptr_nonnull(lbb);
	for (int64_t x = 0; x < 20000; x += 250) {
		ck_assert_int_eq(learned_ready_at(lbb, now_b + x, 1) + shift,
		                 learned_ready_at(la, now_b + x + shift, 1));
		struct learned_view va, vb;
		learned_view(la, now_b + x + shift, &va);
		learned_view(lbb, now_b + x, &vb);
		ck_assert(va.rate_per_min == vb.rate_per_min && va.capacity == vb.capacity);
		ck_assert(va.remaining == vb.remaining && va.reset_in_ms == vb.reset_in_ms);
	}
	/* its marks count on: the next dispatch's mark follows the saved ones */
	ck_assert(b.charged[RLH_REQUESTS] == lbb->cum_cost);
	/* restored, with the age of what it took up, until its first answer */
	struct sched_lane_view v;
	sched_lane_view(&b, now_b + 500, &v);
	/* how old it was when taken up, to the second */
	ck_assert_int_eq(v.restored_age_ms, (gap + at - a.last_active_ms) / 1000 * 1000);
	submit(&b, &items[30], now_b + 500);
	struct sched_item *it = sched_next(&b, (double)(now_b + 500) + 20000);
	ck_assert_ptr_nonnull(it);
	struct rlh_result h;
	memset(&h, 0, sizeof(h));
	sched_observe(&b, it, &h, false, now_b + 20600);
	sched_complete(&b, it, SCHED_SUCCESS, now_b + 20600);
	sched_lane_view(&b, now_b + 20700, &v);
	ck_assert_int_eq(v.restored_age_ms, -1);
	/* a lane that is not fresh takes nothing */
	ck_assert(!sched_lane_import(&b, &s, lb, now_b, wall));
}
END_TEST

START_TEST(hold_quota_and_day_follow_the_wall_clock)
{
	teach_a();
	sched_hold(&a, 2000 + 10000);       /* a retry-after of 10 s at 2000 */
	sched_margin_adopt(&a, 0.05, 2000); /* a path that moves arrivals */
	sched_quota_exhausted(&a, 2000);
	a.day.requests = 42;
	a.day.resets_at_ms = 2000 + 60000;
	struct sched_lane_saved s;
	struct learned lb[RLH_N_BUDGETS];
	sched_lane_export(&a, 2000, WALL_OLD + 2000, &s, lb);
	ck_assert_int_eq(s.hold_until_ms, WALL_OLD + 12000);
	ck_assert(s.quota_out && s.probing);
	int64_t wall = WALL_OLD + 2000 + 4000; /* 4 s later */
	ck_assert(sched_saved_age(&s, lb, wall, 900000));
	ck_assert(sched_lane_import(&b, &s, lb, 100, wall));
	ck_assert_int_eq(b.hold_until_ms, 100 + 6000); /* what was left of it */
	ck_assert(sched_quota_out(&b));
	ck_assert_int_eq(b.day.requests, 42);
	ck_assert(s.strict_margin == 0.05);
	ck_assert(sched_lane_margin(&b) == 0.05);
	ck_assert_str_eq(sched_lane_state(&b, 200), "quota_exhausted");
	/* A success of this process ends the quota refusal. */
	ck_assert(b.quota_seq == 0);
}
END_TEST

/* ---- ageing, the pure function ---- */

static void saved_with_budget(struct sched_lane_saved *s, struct learned *l, bool rate)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->provider, sizeof(s->provider), "openai");
	s->last_active_ms = WALL_OLD;
	s->answered = true;
	s->aimd = (struct aimd_saved){.open = false, .limit = 5, .rtt_ms = 200, .delay_ms = 80};
	s->budgets = 1u << RLH_REQUESTS;
	learned_init(l, NULL);
	/* one observation at WALL_OLD: 3 left, full again 10 s later */
	struct learned_obs o = {.mark = 0, .remaining = 3, .reset_ms = 10000, .limit = 0};
	learned_observe(l, WALL_OLD, &o);
	if (rate) {
		l->shape = LEARNED_CONTINUOUS;
		l->rho = 0.01;
		l->capacity = 100;
	}
}

START_TEST(age_before_a_reset_keeps_everything)
{
	struct sched_lane_saved s, s0;
	struct learned l[RLH_N_BUDGETS], l0;
	saved_with_budget(&s, &l[0], true);
	s0 = s;
	l0 = l[0];
	ck_assert(sched_saved_age(&s, l, WALL_OLD + 9999, 900000));
	ck_assert(memcmp(&s, &s0, sizeof(s)) == 0);
	ck_assert(memcmp(&l[0], &l0, sizeof(l0)) == 0);
}
END_TEST

START_TEST(age_past_a_reset_forgets_the_count_keeps_the_rate)
{
	struct sched_lane_saved s;
	struct learned l[RLH_N_BUDGETS];
	saved_with_budget(&s, &l[0], true);
	ck_assert(sched_saved_age(&s, l, WALL_OLD + 10000, 900000));
	ck_assert_uint_eq(s.budgets, 1u << RLH_REQUESTS);
	ck_assert(l[0].rho == 0.01);
	struct learned_view v;
	learned_view(&l[0], WALL_OLD + 10000, &v);
	ck_assert(v.remaining == -1); /* no count any more: full again */
	ck_assert(v.rate_per_min == 600);
	ck_assert_int_eq(learned_ready_at(&l[0], WALL_OLD + 10000, 1), WALL_OLD + 10000);
	/* the concurrency limit and the delay stay where they were */
	ck_assert(s.aimd.limit == 5 && s.aimd.delay_ms == 80 && !s.aimd.open);
}
END_TEST

START_TEST(age_past_a_reset_drops_a_budget_without_a_rate)
{
	struct sched_lane_saved s;
	struct learned l[RLH_N_BUDGETS];
	saved_with_budget(&s, &l[0], false);
	/* and a tokens budget with a rate after it, which closes up */
	s.budgets |= 1u << RLH_TOKENS;
	struct sched_lane_saved t;
	saved_with_budget(&t, &l[1], true);
	l[1].limit = 777;
	ck_assert(sched_saved_age(&s, l, WALL_OLD + 10000, 900000));
	ck_assert_uint_eq(s.budgets, 1u << RLH_TOKENS);
	ck_assert_uint_eq(sched_saved_budgets(&s), 1);
	ck_assert(l[0].limit == 777);
}
END_TEST

START_TEST(age_ends_holds_probes_due_and_days)
{
	struct sched_lane_saved s;
	struct learned l[RLH_N_BUDGETS];
	saved_with_budget(&s, &l[0], true);
	s.hold_until_ms = WALL_OLD + 5000;
	s.probing = true;
	s.quota_out = true;
	s.quota_probe_at_ms = WALL_OLD + 1000;
	s.day_requests = 9;
	s.day_resets_at_ms = WALL_OLD + 2000;
	ck_assert(sched_saved_age(&s, l, WALL_OLD + 4000, 900000));
	ck_assert_int_eq(s.hold_until_ms, WALL_OLD + 5000);
	ck_assert_int_eq(s.quota_probe_at_ms, WALL_OLD + 4000);
	ck_assert(s.day_requests == 0 && s.day_resets_at_ms == 0);
	ck_assert(sched_saved_age(&s, l, WALL_OLD + 6000, 900000));
	ck_assert_int_eq(s.hold_until_ms, 0);
	ck_assert(s.probing); /* the probe still goes first */
}
END_TEST

START_TEST(age_past_the_idle_ttl_drops_the_lane)
{
	struct sched_lane_saved s;
	struct learned l[RLH_N_BUDGETS];
	saved_with_budget(&s, &l[0], true);
	ck_assert(sched_saved_age(&s, l, WALL_OLD + 899999, 900000));
	saved_with_budget(&s, &l[0], true);
	ck_assert(!sched_saved_age(&s, l, WALL_OLD + 900000, 900000));
}
END_TEST

/* Idle for reopen_after_s before the restart, or across it: open again, as a
 * lane idle that long in one process. */
START_TEST(import_reopens_what_went_stale)
{
	struct sched_lane_saved s;
	struct learned l[RLH_N_BUDGETS];
	saved_with_budget(&s, &l[0], true);
	int64_t reopen = (int64_t)plan.concurrency.reopen_after_s * 1000;
	ck_assert(sched_lane_import(&b, &s, l, 100, WALL_OLD + reopen - 1));
	ck_assert_uint_eq(sched_concurrency_limit(&b), 5);
	sched_lane_release(&b);
	sched_lane_init(&b, prov, &plan, AGENTS_OFF, 100);
	ck_assert(sched_lane_import(&b, &s, l, 100, WALL_OLD + reopen));
	ck_assert_uint_eq(sched_concurrency_limit(&b), plan.max_concurrent);
	ck_assert_int_eq(aimd_delay_ms(&b.delay), 80); /* the delay is the rate's */
}
END_TEST

static Suite *sched_saved_suite(void)
{
	Suite *s = suite_create("sched_saved");
	TCase *tc = tcase_create("restart");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, export_names_no_key);
	tcase_add_test(tc, export_of_an_idle_lane_is_stable);
	tcase_add_test(tc, import_resumes_where_it_was);
	tcase_add_test(tc, hold_quota_and_day_follow_the_wall_clock);
	tcase_add_test(tc, import_reopens_what_went_stale);
	suite_add_tcase(s, tc);
	TCase *age = tcase_create("age");
	tcase_add_checked_fixture(age, setup, teardown);
	tcase_add_test(age, age_before_a_reset_keeps_everything);
	tcase_add_test(age, age_past_a_reset_forgets_the_count_keeps_the_rate);
	tcase_add_test(age, age_past_a_reset_drops_a_budget_without_a_rate);
	tcase_add_test(age, age_ends_holds_probes_due_and_days);
	tcase_add_test(age, age_past_the_idle_ttl_drops_the_lane);
	suite_add_tcase(s, age);
	return s;
}

UNIT_MAIN("sched_saved", sched_saved_suite)
