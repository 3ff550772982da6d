/* SPDX-License-Identifier: Apache-2.0 */
/* lane_mode — a lane's two state machines (lane_mode.h).
 *
 * The mode: what may leave, and when.
 *
 *   LEARNING ──answered──▶ OPEN ◀──────────── probe ok ─────────────┐
 *      │                    │                                        │
 *      │ hold               │ hold                                   │
 *      ▼                    ▼                                        │
 *      └─────────────▶ PROBING ──probe sent──▶ PROBE_OUT ────────────┘
 *                       ▲   ▲                   │    │
 *                       │   └── probe failed ───┘    │ hold
 *                       │                            ▼
 *                       └── probe ok, failed ── PROBE_STALE
 *
 *   and no change for: answered outside LEARNING, hold in PROBING or in
 *   PROBE_STALE. A hold is an answer's, so it ends LEARNING too. The probe
 *   is the one request that leaves while PROBING; nothing else leaves while
 *   it is out, so it is the only request sent after the hold: its success
 *   ends the hold, unless another hold came while it was out (PROBE_STALE),
 *   which its answer cannot tell over. That is what the lane used to keep
 *   the dispatch number of the last hold for.
 *
 * The admission: what the lane turns away at once. Quota and the day's budget
 * are independent: four corners of a square.
 *
 *                    quota out
 *   ADMIT_ALL ────────────────────▶ QUOTA
 *    ▲     │ ◀──── quota back ────── ▲    │
 *   day   day                       day  day
 *   new   spent                     new  spent
 *    │     ▼         quota out       │    ▼
 *   DAY_OUT ──────────────────────▶ QUOTA_DAY_OUT
 *           ◀──── quota back ──────
 *
 *   and no change for: quota out with the quota out, day spent with the day
 *   out. Quota back and day new only where the quota or the day is out.
 *
 * "held" is neither: a retry-after's end, or the bound on a capacity answer
 * being decided, is a time window over whatever mode the lane is in (a hold
 * ends by itself, with no event); /status shows it while it runs, between
 * the admission and the mode (lane_state_name). */
#include "sched/lane_mode.h"

#define NO (-1) /* not allowed */

/* next_mode[m][e]: the mode event e leads to from m (the mode's events). */
static const signed char next_mode[LANE_N_MODES][LANE_EV_PROBE_FAILED + 1] = {
    [LANE_LEARNING] = {[LANE_EV_ANSWERED] = LANE_OPEN,
                       [LANE_EV_HOLD] = LANE_PROBING,
                       [LANE_EV_PROBE_SENT] = NO,
                       [LANE_EV_PROBE_OK] = NO,
                       [LANE_EV_PROBE_FAILED] = NO},
    [LANE_OPEN] = {[LANE_EV_ANSWERED] = LANE_OPEN,
                   [LANE_EV_HOLD] = LANE_PROBING,
                   [LANE_EV_PROBE_SENT] = NO,
                   [LANE_EV_PROBE_OK] = NO,
                   [LANE_EV_PROBE_FAILED] = NO},
    [LANE_PROBING] = {[LANE_EV_ANSWERED] = LANE_PROBING,
                      [LANE_EV_HOLD] = LANE_PROBING,
                      [LANE_EV_PROBE_SENT] = LANE_PROBE_OUT,
                      [LANE_EV_PROBE_OK] = NO,
                      [LANE_EV_PROBE_FAILED] = NO},
    [LANE_PROBE_OUT] = {[LANE_EV_ANSWERED] = LANE_PROBE_OUT,
                        [LANE_EV_HOLD] = LANE_PROBE_STALE,
                        [LANE_EV_PROBE_SENT] = NO,
                        [LANE_EV_PROBE_OK] = LANE_OPEN,
                        [LANE_EV_PROBE_FAILED] = LANE_PROBING},
    [LANE_PROBE_STALE] = {[LANE_EV_ANSWERED] = LANE_PROBE_STALE,
                          [LANE_EV_HOLD] = LANE_PROBE_STALE,
                          [LANE_EV_PROBE_SENT] = NO,
                          [LANE_EV_PROBE_OK] = LANE_PROBING,
                          [LANE_EV_PROBE_FAILED] = LANE_PROBING},
};

#define ADMISSION_EV(e) ((e)-LANE_EV_QUOTA_OUT)

/* next_admission[a][e]: the admission event e leads to from a (the admission's
 * events). */
static const signed char next_admission[LANE_N_ADMISSIONS][ADMISSION_EV(LANE_N_EVENTS)] = {
    [LANE_ADMIT_ALL] = {[ADMISSION_EV(LANE_EV_QUOTA_OUT)] = LANE_QUOTA,
                        [ADMISSION_EV(LANE_EV_QUOTA_BACK)] = NO,
                        [ADMISSION_EV(LANE_EV_DAY_SPENT)] = LANE_DAY_OUT,
                        [ADMISSION_EV(LANE_EV_DAY_NEW)] = NO},
    [LANE_QUOTA] = {[ADMISSION_EV(LANE_EV_QUOTA_OUT)] = LANE_QUOTA,
                    [ADMISSION_EV(LANE_EV_QUOTA_BACK)] = LANE_ADMIT_ALL,
                    [ADMISSION_EV(LANE_EV_DAY_SPENT)] = LANE_QUOTA_DAY_OUT,
                    [ADMISSION_EV(LANE_EV_DAY_NEW)] = NO},
    [LANE_DAY_OUT] = {[ADMISSION_EV(LANE_EV_QUOTA_OUT)] = LANE_QUOTA_DAY_OUT,
                      [ADMISSION_EV(LANE_EV_QUOTA_BACK)] = NO,
                      [ADMISSION_EV(LANE_EV_DAY_SPENT)] = LANE_DAY_OUT,
                      [ADMISSION_EV(LANE_EV_DAY_NEW)] = LANE_ADMIT_ALL},
    [LANE_QUOTA_DAY_OUT] = {[ADMISSION_EV(LANE_EV_QUOTA_OUT)] = LANE_QUOTA_DAY_OUT,
                            [ADMISSION_EV(LANE_EV_QUOTA_BACK)] = LANE_DAY_OUT,
                            [ADMISSION_EV(LANE_EV_DAY_SPENT)] = LANE_QUOTA_DAY_OUT,
                            [ADMISSION_EV(LANE_EV_DAY_NEW)] = LANE_QUOTA},
};

bool lane_state_next(struct lane_state *s, enum lane_event e)
{
	if ((unsigned)s->mode >= LANE_N_MODES || (unsigned)s->admission >= LANE_N_ADMISSIONS ||
	    (unsigned)e >= LANE_N_EVENTS)
		return false;
	if (e <= LANE_EV_PROBE_FAILED) {
		int to = next_mode[s->mode][e];
		if (to == NO)
			return false;
		s->mode = (enum lane_mode)to;
	} else {
		int to = next_admission[s->admission][ADMISSION_EV(e)];
		if (to == NO)
			return false;
		s->admission = (enum lane_admission)to;
	}
	return true;
}

const char *lane_state_name(struct lane_state s, bool held, bool adaptive)
{
	if (lane_quota_out(s))
		return "quota_exhausted";
	if (s.admission == LANE_DAY_OUT)
		return "daily_budget_exhausted";
	if (held)
		return "held";
	if (s.mode == LANE_PROBING || lane_probe_out(s))
		return "probing";
	return adaptive ? "adaptive" : "open";
}

const char *lane_mode_name(enum lane_mode m)
{
	static const char *const names[LANE_N_MODES] = {"learning", "open", "probing", "probe_out",
	                                                "probe_stale"};
	return (unsigned)m < LANE_N_MODES ? names[m] : "?";
}

const char *lane_admission_name(enum lane_admission r)
{
	static const char *const names[LANE_N_ADMISSIONS] = {"admit_all", "quota", "day_out",
	                                                     "quota_day_out"};
	return (unsigned)r < LANE_N_ADMISSIONS ? names[r] : "?";
}

const char *lane_event_name(enum lane_event e)
{
	static const char *const names[LANE_N_EVENTS] = {"answered",   "hold",         "probe_sent",
	                                                 "probe_ok",   "probe_failed", "quota_out",
	                                                 "quota_back", "day_spent",    "day_new"};
	return (unsigned)e < LANE_N_EVENTS ? names[e] : "?";
}
