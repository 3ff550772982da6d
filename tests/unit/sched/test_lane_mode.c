/* SPDX-License-Identifier: Apache-2.0 */
/* A lane's two state machines (sched/lane_mode.c): every transition, pair by
 * pair, written out once more so that a change to the diagrams must be a
 * change here too; the refused ones leave the state as it was; the one word
 * /status shows for every state. */
#include "sched/lane_mode.h"
#include "unit.h"

/* Every (mode, event) the mode's diagram allows, and where it leads. */
static const struct {
	enum lane_mode from;
	enum lane_event e;
	enum lane_mode to;
} mode_moves[] = {
    {LANE_LEARNING, LANE_EV_ANSWERED, LANE_OPEN},
    {LANE_LEARNING, LANE_EV_HOLD, LANE_PROBING},
    {LANE_OPEN, LANE_EV_ANSWERED, LANE_OPEN},
    {LANE_OPEN, LANE_EV_HOLD, LANE_PROBING},
    {LANE_PROBING, LANE_EV_ANSWERED, LANE_PROBING},
    {LANE_PROBING, LANE_EV_HOLD, LANE_PROBING},
    {LANE_PROBING, LANE_EV_PROBE_SENT, LANE_PROBE_OUT},
    {LANE_PROBE_OUT, LANE_EV_ANSWERED, LANE_PROBE_OUT},
    {LANE_PROBE_OUT, LANE_EV_HOLD, LANE_PROBE_STALE},
    {LANE_PROBE_OUT, LANE_EV_PROBE_OK, LANE_OPEN},
    {LANE_PROBE_OUT, LANE_EV_PROBE_FAILED, LANE_PROBING},
    {LANE_PROBE_STALE, LANE_EV_ANSWERED, LANE_PROBE_STALE},
    {LANE_PROBE_STALE, LANE_EV_HOLD, LANE_PROBE_STALE},
    {LANE_PROBE_STALE, LANE_EV_PROBE_OK, LANE_PROBING},
    {LANE_PROBE_STALE, LANE_EV_PROBE_FAILED, LANE_PROBING},
};

/* Every (admission, event) the admission's diagram allows. */
static const struct {
	enum lane_admission from;
	enum lane_event e;
	enum lane_admission to;
} admission_moves[] = {
    {LANE_ADMIT_ALL, LANE_EV_QUOTA_OUT, LANE_QUOTA},
    {LANE_ADMIT_ALL, LANE_EV_DAY_SPENT, LANE_DAY_OUT},
    {LANE_QUOTA, LANE_EV_QUOTA_OUT, LANE_QUOTA},
    {LANE_QUOTA, LANE_EV_QUOTA_BACK, LANE_ADMIT_ALL},
    {LANE_QUOTA, LANE_EV_DAY_SPENT, LANE_QUOTA_DAY_OUT},
    {LANE_DAY_OUT, LANE_EV_QUOTA_OUT, LANE_QUOTA_DAY_OUT},
    {LANE_DAY_OUT, LANE_EV_DAY_SPENT, LANE_DAY_OUT},
    {LANE_DAY_OUT, LANE_EV_DAY_NEW, LANE_ADMIT_ALL},
    {LANE_QUOTA_DAY_OUT, LANE_EV_QUOTA_OUT, LANE_QUOTA_DAY_OUT},
    {LANE_QUOTA_DAY_OUT, LANE_EV_QUOTA_BACK, LANE_DAY_OUT},
    {LANE_QUOTA_DAY_OUT, LANE_EV_DAY_SPENT, LANE_QUOTA_DAY_OUT},
    {LANE_QUOTA_DAY_OUT, LANE_EV_DAY_NEW, LANE_QUOTA},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static bool is_mode_event(enum lane_event e)
{
	return e <= LANE_EV_PROBE_FAILED;
}

/* Where the tables above say (m, a) goes on e: false when they allow it not. */
static bool expected(enum lane_mode m, enum lane_admission a, enum lane_event e,
                     struct lane_state *out)
{
	*out = (struct lane_state){m, a};
	if (is_mode_event(e)) {
		for (size_t i = 0; i < N_OF(mode_moves); i++)
			if (mode_moves[i].from == m && mode_moves[i].e == e) {
				out->mode = mode_moves[i].to;
				return true;
			}
		return false;
	}
	for (size_t i = 0; i < N_OF(admission_moves); i++)
		if (admission_moves[i].from == a && admission_moves[i].e == e) {
			out->admission = admission_moves[i].to;
			return true;
		}
	return false;
}

START_TEST(every_transition)
{
	/* Every state of both machines together, every event: a mode's event
	 * never moves the admission, nor the other way round. */
	int allowed = 0;
	for (int m = 0; m < LANE_N_MODES; m++)
		for (int a = 0; a < LANE_N_ADMISSIONS; a++)
			for (int e = 0; e < LANE_N_EVENTS; e++) {
				struct lane_state s = {m, a}, want;
				bool ok = expected(m, a, e, &want);
				ck_assert_msg(lane_state_next(&s, e) == ok,
				              "%s/%s on %s: expected %s", lane_mode_name(m),
				              lane_admission_name(a), lane_event_name(e),
				              ok ? "allowed" : "refused");
				ck_assert_msg(s.mode == want.mode && s.admission == want.admission,
				              "%s/%s on %s: went to %s/%s", lane_mode_name(m),
				              lane_admission_name(a), lane_event_name(e),
				              lane_mode_name(s.mode),
				              lane_admission_name(s.admission));
				allowed += ok;
			}
	/* Each allowed move of one machine, in every state of the other. */
	ck_assert_int_eq(allowed, (int)(N_OF(mode_moves) * LANE_N_ADMISSIONS +
	                                N_OF(admission_moves) * LANE_N_MODES));
}
END_TEST

START_TEST(forbidden_transitions_are_caught)
{
	/* What would be bugs in sched.c: a probe sent where none is due, a
	 * probe's answer with no probe out, a quota or a day that ends where it
	 * was not out; and values outside the enums. */
	const struct {
		struct lane_state s;
		enum lane_event e;
	} bad[] = {
	    {{LANE_OPEN, LANE_ADMIT_ALL}, LANE_EV_PROBE_SENT},
	    {{LANE_PROBE_OUT, LANE_ADMIT_ALL}, LANE_EV_PROBE_SENT},
	    {{LANE_LEARNING, LANE_ADMIT_ALL}, LANE_EV_PROBE_OK},
	    {{LANE_PROBING, LANE_QUOTA}, LANE_EV_PROBE_OK},
	    {{LANE_OPEN, LANE_DAY_OUT}, LANE_EV_PROBE_FAILED},
	    {{LANE_OPEN, LANE_ADMIT_ALL}, LANE_EV_QUOTA_BACK},
	    {{LANE_OPEN, LANE_DAY_OUT}, LANE_EV_QUOTA_BACK},
	    {{LANE_OPEN, LANE_ADMIT_ALL}, LANE_EV_DAY_NEW},
	    {{LANE_OPEN, LANE_QUOTA}, LANE_EV_DAY_NEW},
	    {{LANE_N_MODES, LANE_ADMIT_ALL}, LANE_EV_ANSWERED},
	    {{LANE_OPEN, LANE_N_ADMISSIONS}, LANE_EV_QUOTA_OUT},
	    {{LANE_OPEN, LANE_ADMIT_ALL}, LANE_N_EVENTS},
	};
	for (size_t i = 0; i < N_OF(bad); i++) {
		struct lane_state s = bad[i].s;
		ck_assert_msg(!lane_state_next(&s, bad[i].e), "case %zu allowed", i);
		ck_assert(s.mode == bad[i].s.mode && s.admission == bad[i].s.admission);
	}
}
END_TEST

static bool walk(struct lane_state *s, const enum lane_event *path, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!lane_state_next(s, path[i]))
			return false;
	return true;
}

START_TEST(lives)
{
	/* A fresh lane learns, is held, probes twice (the first probe
	 * refused), opens. */
	struct lane_state s = LANE_STATE_FRESH;
	const enum lane_event held[] = {LANE_EV_ANSWERED,   LANE_EV_HOLD,
	                                LANE_EV_PROBE_SENT, LANE_EV_PROBE_FAILED,
	                                LANE_EV_PROBE_SENT, LANE_EV_PROBE_OK};
	ck_assert(walk(&s, held, N_OF(held)));
	ck_assert(s.mode == LANE_OPEN && s.admission == LANE_ADMIT_ALL);
	/* A hold while the probe is out: the probe's success does not end it. */
	const enum lane_event overtaken[] = {LANE_EV_HOLD, LANE_EV_PROBE_SENT, LANE_EV_HOLD,
	                                     LANE_EV_PROBE_OK};
	ck_assert(walk(&s, overtaken, N_OF(overtaken)));
	ck_assert_int_eq(s.mode, LANE_PROBING);
	/* The quota goes out, the day is spent meanwhile, a new day comes, the
	 * quota comes back; the hold cycle is where it was. */
	const enum lane_event refusals[] = {LANE_EV_QUOTA_OUT, LANE_EV_DAY_SPENT, LANE_EV_DAY_NEW,
	                                    LANE_EV_QUOTA_BACK};
	ck_assert(walk(&s, refusals, N_OF(refusals)));
	ck_assert(s.mode == LANE_PROBING && s.admission == LANE_ADMIT_ALL);
	/* ... and the probe the quota's refusals did not forget. */
	const enum lane_event probe[] = {LANE_EV_PROBE_SENT, LANE_EV_PROBE_OK};
	ck_assert(walk(&s, probe, N_OF(probe)));
	ck_assert_int_eq(s.mode, LANE_OPEN);
}
END_TEST

START_TEST(names_shown)
{
	/* /status's "state", as before the enums: the quota first, then the
	 * day, then a hold's time, then a probe, then what AIMD says. */
	const struct {
		struct lane_state s;
		bool held, adaptive;
		const char *name;
	} cases[] = {
	    {{LANE_LEARNING, LANE_ADMIT_ALL}, false, false, "open"},
	    {{LANE_LEARNING, LANE_ADMIT_ALL}, false, true, "adaptive"},
	    {{LANE_OPEN, LANE_ADMIT_ALL}, false, false, "open"},
	    {{LANE_OPEN, LANE_ADMIT_ALL}, false, true, "adaptive"},
	    {{LANE_OPEN, LANE_ADMIT_ALL}, true, false, "held"},
	    {{LANE_PROBING, LANE_ADMIT_ALL}, false, true, "probing"},
	    {{LANE_PROBING, LANE_ADMIT_ALL}, true, true, "held"},
	    {{LANE_PROBE_OUT, LANE_ADMIT_ALL}, false, false, "probing"},
	    {{LANE_PROBE_STALE, LANE_ADMIT_ALL}, false, false, "probing"},
	    {{LANE_PROBE_STALE, LANE_ADMIT_ALL}, true, false, "held"},
	    {{LANE_OPEN, LANE_DAY_OUT}, true, false, "daily_budget_exhausted"},
	    {{LANE_PROBING, LANE_DAY_OUT}, false, true, "daily_budget_exhausted"},
	    {{LANE_OPEN, LANE_QUOTA}, true, false, "quota_exhausted"},
	    {{LANE_PROBE_OUT, LANE_QUOTA}, false, false, "quota_exhausted"},
	    {{LANE_OPEN, LANE_QUOTA_DAY_OUT}, false, false, "quota_exhausted"},
	};
	for (size_t i = 0; i < N_OF(cases); i++)
		ck_assert_str_eq(lane_state_name(cases[i].s, cases[i].held, cases[i].adaptive),
		                 cases[i].name);
	ck_assert(lane_quota_out((struct lane_state){LANE_OPEN, LANE_QUOTA_DAY_OUT}));
	ck_assert(lane_day_out((struct lane_state){LANE_OPEN, LANE_QUOTA_DAY_OUT}));
	ck_assert(!lane_day_out((struct lane_state){LANE_OPEN, LANE_QUOTA}));
	ck_assert(!lane_quota_out((struct lane_state){LANE_OPEN, LANE_DAY_OUT}));
	ck_assert(lane_probe_out((struct lane_state){LANE_PROBE_STALE, LANE_ADMIT_ALL}));
	ck_assert(!lane_probe_out((struct lane_state){LANE_PROBING, LANE_ADMIT_ALL}));
	ck_assert_str_eq(lane_mode_name(LANE_N_MODES), "?");
}
END_TEST

static Suite *lane_mode_suite(void)
{
	Suite *s = suite_create("lane_mode");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, every_transition);
	tcase_add_test(tc, forbidden_transitions_are_caught);
	tcase_add_test(tc, lives);
	tcase_add_test(tc, names_shown);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("lane_mode", lane_mode_suite)
