/* SPDX-License-Identifier: Apache-2.0 */
/* log — one JSON object per line (DESIGN §7), to stderr or a file.
 *
 * A line is built in a fixed buffer on the stack, then appended whole to a
 * process buffer (64 KiB) that log_flush() writes once per event-loop turn
 * (main calls it; log_close, exit() and libevent's fatal error flush too).
 * Only whole lines are written, in order, so lines never interleave; nothing
 * is allocated and no printf-family call runs per line:
 *
 *     struct log_line l;
 *     if (log_begin(&l, LOG_INFO, "request")) {
 *             log_str(&l, "request_id", id);
 *             log_int(&l, "status", 200);
 *             log_end(&l);
 *     }
 *
 * Values are JSON-escaped; a line longer than the buffer is cut and marked
 * "truncated":true, never overflowed. API keys must never be passed here: only
 * their hash prefix (keyid_name). */
#ifndef PACERD_LOG_H
#define PACERD_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"

#define LOG_LINE_MAX 2048

struct log_line {
	char buf[LOG_LINE_MAX];
	size_t len;
	bool truncated;
	bool keep; /* among the recent problems (log_recent): warn, error, log_keep */
};

/* The recent problems kept for the operator (the admin page's "last
 * errors"): the last LOG_RECENT_MAX lines written at warn or error, and the
 * lines their writer marked with log_keep (a request that ended in an error).
 * A line its level filters out is never begun, so it is not kept either. */
#define LOG_RECENT_MAX 16

struct log_recent_line {
	const char *text; /* one whole JSON object, without the newline */
	size_t len;
};

/* Opens `path` for appending ("-" = stderr). 0 on success; -1 with err set. */
int log_open(const char *path, enum log_level level, char *err, size_t errlen);
void log_set_level(enum log_level level);
bool log_enabled(enum log_level level);
/* Flushes, then goes back to stderr. */
void log_close(void);
/* Writes the buffered lines (main: once per loop turn). A full non-blocking
 * fd keeps the rest for the next call; when the buffer is full anyway, new
 * lines are dropped and counted (a "log_dropped" line tells how many). */
void log_flush(void);

/* Starts a line with ts, level and event; false when the level is filtered out
 * (then nothing else needs to be called). */
bool log_begin(struct log_line *l, enum log_level level, const char *event);
void log_str(struct log_line *l, const char *key, const char *value);
void log_strn(struct log_line *l, const char *key, const char *value, size_t n);
void log_int(struct log_line *l, const char *key, long long value);
void log_num(struct log_line *l, const char *key, double value);
void log_bool(struct log_line *l, const char *key, bool value);
void log_end(struct log_line *l);

/* Keeps the line among the recent problems when it ends (log_begin keeps
 * warn and error lines by itself). */
void log_keep(struct log_line *l);
/* The kept lines, newest first: up to max of them into out; their count.
 * Valid until the next line ends. */
size_t log_recent(struct log_recent_line *out, size_t max);

/* A plain message event: {"event":event,"message":msg}. */
void log_msg(enum log_level level, const char *event, const char *msg);

/* Routes libevent's and libcurl's own diagnostics into this log. */
void log_hook_libevent(void);

#endif
