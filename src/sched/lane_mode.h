/* SPDX-License-Identifier: Apache-2.0 */
/* lane_mode — what a lane is doing, as two small state machines, and the only
 * transitions allowed in them (lane_mode.c draws them). Pure: sched.c keeps
 * one struct lane_state per lane and changes it only through lane_state_next,
 * stopping the process on a transition the diagram does not allow, as the
 * exchange does with its own states (xstate.h). Tested alone
 * (tests/unit/sched/test_lane_mode.c).
 *
 * Two machines, because what they track can coincide: a lane whose quota is
 * out may also have spent its day, and either may happen while a hold's probe
 * is out. The mode says what may leave and when (the hold cycle); the
 * admission says what the lane turns away at once. What /status shows is one
 * word from both (lane_state_name). */
#ifndef PACERD_LANE_MODE_H
#define PACERD_LANE_MODE_H

#include <stdbool.h>

/* What may leave, and when. */
enum lane_mode {
	LANE_LEARNING,    /* no answer yet: a few requests go, then the lane waits for the
	                   * first answer's headers (learned_blind_ready_at) */
	LANE_OPEN,        /* its gates and limits decide */
	LANE_PROBING,     /* a hold came: once it ends, the next request to leave is the
	                   * probe, alone */
	LANE_PROBE_OUT,   /* the probe is in flight: nothing else leaves; a success ends
	                   * the hold */
	LANE_PROBE_STALE, /* the probe is in flight, and another hold came after it left:
	                   * whatever it answers, another probe follows */
	LANE_N_MODES
};

/* What the lane admits: what it refuses at once. */
enum lane_admission {
	LANE_ADMIT_ALL,     /* everything: it refuses nothing */
	LANE_QUOTA,         /* the account's quota is out: all but one request per
	                     * quota_probe_s (SCHED_QUOTA) */
	LANE_DAY_OUT,       /* the plan's daily budget is spent: everything until the reset
	                     * (SCHED_DAY_OUT), and what waits is drained */
	LANE_QUOTA_DAY_OUT, /* both */
	LANE_N_ADMISSIONS
};

struct lane_state {
	enum lane_mode mode;
	enum lane_admission admission;
};

/* What changes a lane's state. The first five move the mode, the rest the
 * admission. */
enum lane_event {
	LANE_EV_ANSWERED,     /* an answer's headers came back, or the lane took what
	                       * another learned (sched_lane_inherit) */
	LANE_EV_HOLD,         /* a retry-after, or a learned budget at 0 until its reset */
	LANE_EV_PROBE_SENT,   /* the request that left while PROBING: the probe */
	LANE_EV_PROBE_OK,     /* the probe's answer was a success */
	LANE_EV_PROBE_FAILED, /* the probe ended otherwise: an error, a refusal, the client */
	LANE_EV_QUOTA_OUT,    /* a final answer said the account cannot be served */
	LANE_EV_QUOTA_BACK,   /* a success sent after it, or another replica's */
	LANE_EV_DAY_SPENT,    /* the next request does not fit in the day's budget */
	LANE_EV_DAY_NEW,      /* the day started over, or a new plan came */
	LANE_N_EVENTS
};

/* A fresh lane: learning, admitting everything. */
#define LANE_STATE_FRESH ((struct lane_state){LANE_LEARNING, LANE_ADMIT_ALL})

/* The one place that decides: the state event e leads to from *s. False, and
 * *s unchanged, when the diagram does not allow e in *s. */
bool lane_state_next(struct lane_state *s, enum lane_event e);

/* The lane's state in one word, for /status: the admission ("quota_exhausted",
 * also with the day out; "daily_budget_exhausted"), else "held" while a hold's
 * time runs (held: a retry-after, or a capacity answer being decided), else
 * the mode's: "probing" while a probe is due or out, "open" or, once adaptive
 * concurrency has reacted to a signal, "adaptive". */
const char *lane_state_name(struct lane_state s, bool held, bool adaptive);

/* Names for messages. */
const char *lane_mode_name(enum lane_mode m);
const char *lane_admission_name(enum lane_admission r);
const char *lane_event_name(enum lane_event e);

static inline bool lane_quota_out(struct lane_state s)
{
	return s.admission == LANE_QUOTA || s.admission == LANE_QUOTA_DAY_OUT;
}

static inline bool lane_day_out(struct lane_state s)
{
	return s.admission == LANE_DAY_OUT || s.admission == LANE_QUOTA_DAY_OUT;
}

/* A probe is in flight: nothing else of the lane leaves. */
static inline bool lane_probe_out(struct lane_state s)
{
	return s.mode == LANE_PROBE_OUT || s.mode == LANE_PROBE_STALE;
}

#endif
