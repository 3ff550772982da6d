/* SPDX-License-Identifier: Apache-2.0 */
/* plan_report — how `pacerd plan` shows a plan: a boxed table with the
 * budget warning and its options, or one JSON object. Writes to a FILE *
 * and reads no clock (the instants are in the plan_result); local time comes
 * from the process's TZ. */
#ifndef PACERD_PLAN_REPORT_H
#define PACERD_PLAN_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct plan_input;  /* cli/plan.h */
struct plan_result; /* cli/plan.h */

/* A configured plan's concurrency block, for the note on what sets the limit
 * when no rate limit is configured (known: false leaves it out). */
struct plan_concurrency {
	bool known;
	bool adaptive;
	const char *mode; /* "auto", "aimd", "gradient" */
	unsigned min, max, slow_start;
	double tolerance;
};

/* Where the constraints came from when a configuration file gave them; NULL
 * for flags only. */
struct plan_source {
	const char *config;        /* the file, as loaded */
	const char *provider;      /* the provider's name */
	const char *plan;          /* the name of the plan it got */
	const char *key;           /* the --key-sha256 asked for, or NULL */
	bool key_override;         /* a keys: entry gave the plan */
	const char *model;         /* the --model asked for, or NULL */
	const char *model_pattern; /* the model_plans row that gave the plan, or NULL */
	struct plan_concurrency concurrency;
};

/* The table, then what it cannot say in a row: the budget warning with its
 * options (fewer requests, a longer budget, higher limits) when the run does
 * not fit; and, when a configuration's plan limits no rate, how its lanes
 * find their concurrency (the latency controller, AIMD). `ascii`: +-|
 * instead of box drawing, and every byte < 0x80. */
void plan_report_text(FILE *out, const struct plan_input *in, const struct plan_result *r,
                      const struct plan_source *src, bool ascii);

/* The same as one JSON object (indented) and a newline. 0, or -1 when out of
 * memory or the write failed. */
int plan_report_json(FILE *out, const struct plan_input *in, const struct plan_result *r,
                     const struct plan_source *src);

/* "3 min 20 s", "1 h 05 min", "45 s", "1.5 s", "850 ms" into buf; returns buf.
 * Under 10 s three significant digits; then whole seconds, then (from an
 * hour) whole minutes; a zero last part is left out ("17 min"). */
char *plan_report_duration(double ms, char *buf, size_t len);

/* Whether the terminal takes UTF-8: the locale in force, i.e. the first
 * non-empty of LC_ALL, LC_CTYPE and LANG (POSIX's order), names UTF-8. */
bool plan_report_utf8_locale(const char *lc_all, const char *lc_ctype, const char *lang);

#endif
