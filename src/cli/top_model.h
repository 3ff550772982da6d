/* SPDX-License-Identifier: Apache-2.0 */
/* top_model — the pure part of `pacerd top`: from the /status documents of
 * successive polls, the header numbers and one row per lane, sorted; and the
 * text of each screen line at a fixed width. No I/O, no clock: the time of
 * each poll is an argument.
 *
 * Rates are differences of monotonic counters between two polls divided by
 * the time between them:
 *   req/s of a lane    = (dispatched now - dispatched at the previous poll) / s
 *   429s last minute   = capacity_signals now - at the oldest poll of the
 *                        last 60 s (fewer seconds while top has run less)
 * A lane absent from the earlier poll counts from 0 (lanes are created by
 * their first request); a counter that went down (pacerd restarted) counts
 * from 0 too rather than going negative. A lane gone from the newer poll
 * (evicted) is simply no longer a row. */
#ifndef PACERD_TOP_MODEL_H
#define PACERD_TOP_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum top_sort {
	TOP_SORT_ACTIVITY, /* dispatched per second, busiest first */
	TOP_SORT_QUEUE,    /* queue depth, deepest first */
	TOP_SORT_KEY,      /* key hash prefix, A to Z */
	TOP_SORT_PROVIDER, /* provider, then key */
	TOP_N_SORTS,
};

/* /status names are short (provider names, 12-digit key prefixes, plan
 * names): longer ones are cut to these sizes. */
#define TOP_NAME_MAX 48
#define TOP_STATE_MAX 32
/* A screen line, whatever the terminal's width. */
#define TOP_LINE_MAX 1024

struct top_row {
	char provider[TOP_NAME_MAX];
	char key[TOP_NAME_MAX];
	char model[TOP_NAME_MAX]; /* the lane's model group, "-" for none */
	char plan[TOP_NAME_MAX];
	char state[TOP_STATE_MAX];
	long long queue_depth;
	long long queue_eta_ms;
	long long in_flight;
	long long concurrency_limit;
	double dispatched_per_s;
	double rate_per_s;          /* the configured gate, else the learned pace; 0 = none */
	bool rate_learned;          /* rate_per_s is the learned pace */
	bool has_learned;           /* learned.requests is present */
	double learned_remaining;   /* learned.requests.remaining */
	long long learned_reset_ms; /* learned.requests.reset_in_ms */
	long long signals_last_min;
	/* What sets the limit (/status "concurrency"): refusals alone ("aimd"),
	 * or the latency of the lane's answers too; then why it last moved and
	 * what the controller reads, ms, now and queue-free. */
	bool gradient;
	char limit_by[TOP_STATE_MAX];
	double token_ms, base_token_ms, first_ms, base_first_ms;
	long long dispatched; /* the counters as of this poll */
	long long capacity_signals;
	/* "restored": taken up from the state file at start, no answer since;
	 * restored_age_ms: how old what it took up is. */
	bool restored;
	long long restored_age_ms;
	bool slow_start; /* a silent lane's window still doubling (/status slow_start) */
};

struct top_header {
	long long uptime_s;
	long long in_flight;
	long long lanes;
	double req_per_s; /* sum over the lanes; 0 at the first poll */
	long long responses_2xx, responses_4xx, responses_5xx;
	long long absorbed_429; /* sum of the lanes' capacity_signals */
	bool have_rate;         /* two polls seen: req_per_s means something */
	char store[48];         /* the shared store's state, "" with store.kind: local */
	/* /status "websockets": shown once a socket has opened */
	bool websockets;
	long long ws_open, ws_turns_waiting;
};

struct top_model;

struct top_model *top_model_new(void);
void top_model_free(struct top_model *m);

/* One poll's /status document, received at now_ms (milliseconds on any
 * monotonic clock). Recomputes the header and the rows, sorted by the current
 * sort, and clears the error. Returns 0, or -1 with a message in err when the
 * document is not a /status object (the model keeps the previous poll). */
int top_model_update(struct top_model *m, const json_t *status, int64_t now_ms, char *err,
                     size_t errlen);

/* A failed poll (unreachable admin, refused token): the message is shown
 * until the next successful update; the last rows stay (stale). */
void top_model_set_error(struct top_model *m, const char *message);
const char *top_model_error(const struct top_model *m); /* "" when none */

void top_model_sort(struct top_model *m, enum top_sort by);
enum top_sort top_model_sort_key(const struct top_model *m);
const char *top_sort_name(enum top_sort by);

const struct top_header *top_model_header(const struct top_model *m);
size_t top_model_n_rows(const struct top_model *m);
const struct top_row *top_model_row(const struct top_model *m, size_t i);
bool top_model_has_data(const struct top_model *m); /* one poll succeeded */

/* ---- text: every function writes at most `width` characters (and at most
 * TOP_LINE_MAX - 1) into buf[TOP_LINE_MAX], NUL-terminated ---- */

/* Header line 0 (uptime, in flight, req/s, lanes, sort) or 1 (responses by
 * class, 429s absorbed, WebSockets open and their turns waiting once one
 * opened); `admin` names what is watched. */
void top_format_header(const struct top_model *m, int line, const char *admin, char *buf,
                       size_t width);
/* The column titles, aligned with top_format_row. */
void top_format_columns(char *buf, size_t width);
void top_format_row(const struct top_row *r, char *buf, size_t width);
/* The line written once per poll when stdout is not a terminal: time of day
 * (`wall`, local time), in flight, req/s, lanes, and the busiest lane; or the
 * error. No escape sequences. */
void top_format_summary(const struct top_model *m, time_t wall, char *buf, size_t width);

/* Cuts s to at most width bytes, never inside a UTF-8 sequence. */
void top_fit(char *s, size_t width);

#endif
