/* SPDX-License-Identifier: Apache-2.0 */
/* plan — the arithmetic of `pacerd plan`, the pre-flight report (DESIGN §7).
 * Pure: no I/O, no clock; the start instant is an argument.
 *
 * The model. Each rate constraint is a shortest interval between two requests
 * of the run: rps -> 1000/rps ms, rpm -> 60000/rpm, rph -> 3600000/rph,
 * min-ms -> itself, tpm with an average of A tokens a request -> 60000*A/tpm.
 * C requests in flight at most, each taking L ms, allow one every L/C ms. The
 * run goes at the longest of these intervals, i.e. the lowest throughput: that
 * constraint binds (on a tie, the first in enum plan_limit's order).
 *
 * Duration = requests x interval = requests / throughput: the time the pacing
 * takes. The last request leaves at (requests - 1) x interval and ends L ms
 * later, so the true end differs by L minus one interval; for a run worth
 * planning that is noise, and it keeps "200 requests at 60 RPM: 3 min 20 s".
 *
 * Workers. At most ceil(L / interval) requests are in flight at once (at least
 * 1, at most C): the effective concurrency. A client running W workers
 * staggers them one interval apart and has each send every W x interval. W is
 * C when the client said it runs C workers (--concurrency), else the
 * effective concurrency (a configured max_concurrent is only a ceiling).
 *
 * With no constraint that yields a throughput (nothing given, or C without L)
 * the run is unbounded: no interval, no duration, every request at once. */
#ifndef PACERD_PLAN_H
#define PACERD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The constraints, in the order used to break ties and to list them. */
enum plan_limit {
	PLAN_RPS,
	PLAN_RPM,
	PLAN_RPH,
	PLAN_MIN_MS,
	PLAN_TPM,
	PLAN_CONCURRENCY,
	PLAN_N_LIMITS,
	PLAN_LIMIT_NONE = PLAN_N_LIMITS, /* nothing binds: unbounded */
};

/* The unit a time budget was written in; the "longer budget" option is
 * rounded up to it (hours round to minutes: a whole hour is too coarse). */
enum plan_unit { PLAN_UNIT_S, PLAN_UNIT_M, PLAN_UNIT_H };

/* Bounds of every number of a plan_input other than 0 (not given): they keep
 * each interval, duration and token count finite. */
#define PLAN_MIN_VALUE 1e-6
#define PLAN_MAX_VALUE 1e12

/* Every number 0 = not given. */
struct plan_input {
	uint64_t requests; /* >= 1 */
	double rps, rpm, rph;
	double min_ms;
	double tpm;
	double avg_tokens;           /* tokens per request (prompt + answer) */
	unsigned concurrency;        /* requests in flight at most */
	bool concurrency_is_workers; /* the client runs exactly that many workers */
	double latency_ms;           /* one request, from send to the end of its answer */
	int64_t budget_ms;           /* the time the run may take */
	enum plan_unit budget_unit;
};

struct plan_constraint {
	enum plan_limit limit;
	double value;       /* as given: 60 for rpm 60, C for concurrency */
	double interval_ms; /* > 0: the shortest interval it allows */
};

/* One way to fit the budget by changing one limit: `value` in the limit's own
 * unit, rounded so that it is enough (up; min-ms: down). */
struct plan_change {
	enum plan_limit limit;
	double value;
};

struct plan_result {
	struct plan_constraint constraints[PLAN_N_LIMITS]; /* those given, in enum order */
	size_t n_constraints;
	enum plan_limit binding; /* PLAN_LIMIT_NONE when unbounded */
	bool unbounded;
	bool tpm_ignored;      /* tpm given without avg_tokens: it cannot be counted */
	double interval_ms;    /* between two requests of the run; 0 when unbounded */
	double throughput_rps; /* 1000 / interval_ms; INFINITY when unbounded */
	uint64_t effective_concurrency;
	uint64_t workers;
	double worker_interval_ms; /* each worker sends this often */
	double stagger_ms;         /* between two workers' first requests */
	double duration_ms;        /* 0 when unbounded */
	int64_t start_ms;
	int64_t end_ms;  /* start + duration, Unix ms */
	bool end_known;  /* false when the end lies past what a clock can show */
	bool has_tokens; /* avg_tokens given */
	double tokens;   /* requests x avg_tokens */
	bool has_budget;
	bool fits; /* no budget, or duration <= budget */
	/* When it does not fit: the ways to make it fit. */
	uint64_t fitting_requests; /* as many as the budget holds (may be 0) */
	int64_t needed_budget_ms;  /* the duration rounded up to the budget's unit */
	struct plan_change changes[PLAN_N_LIMITS]; /* every limit too tight; binding first */
	size_t n_changes;
};

/* Computes the plan of `in` for a run starting at start_ms (Unix ms). 0 on
 * success; -1 with a message in err when `in` is not a run (no requests, a
 * negative or non-finite number). */
int plan_compute(const struct plan_input *in, int64_t start_ms, struct plan_result *out, char *err,
                 size_t errlen);

/* Parses a time budget: a positive number with an optional unit, "90s",
 * "10m", "2h", or bare "45" (seconds); decimals allowed ("1.5h"); at least
 * 1 ms, at most PLAN_MAX_VALUE seconds. 0 on success (ms rounded to the
 * millisecond, unit as written), -1 otherwise. */
int plan_parse_duration(const char *s, int64_t *ms, enum plan_unit *unit);

/* "rps", "rpm", "rph", "min-ms", "tpm", "concurrency" (the flags' names), or
 * "none". */
const char *plan_limit_name(enum plan_limit l);

#endif
