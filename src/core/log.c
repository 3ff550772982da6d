/* SPDX-License-Identifier: Apache-2.0 */
/* log — JSON lines. See log.h. */
#include "core/log.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

/* Lines wait here until the end of the loop turn (log_flush): one write(2)
 * per turn instead of one per line. Only whole lines enter it, and a flush
 * that the kernel cuts short keeps the rest for the next one, so what reaches
 * the fd is always whole lines, in order. */
#define LOG_BUF_MAX (64 * 1024)

static int log_fd = STDERR_FILENO;
static enum log_level log_min = LOG_INFO;
static char log_buf[LOG_BUF_MAX];
static size_t log_buf_len;
static unsigned long long log_dropped; /* lines lost to a full buffer on a stuck fd */
static bool log_atexit_set;

/* The recent problems (log_recent): a ring of whole lines, next slot at
 * recent_next. Static and only touched when a line is kept, so a quiet
 * process holds none of its pages. */
static char recent_text[LOG_RECENT_MAX][LOG_LINE_MAX];
static size_t recent_len[LOG_RECENT_MAX];
static size_t recent_next, recent_n;

/* The line head up to the seconds, rebuilt once a second:
 * {"ts":"2025-01-31T12:34:56. */
static long long log_ts_sec = -1;
static char log_ts_head[40];
static size_t log_ts_head_len;

/* What follows the milliseconds: the rest of ts, then level and event. */
static const char *const level_fields[] = {
    "Z\",\"level\":\"debug\",\"event\":\"",
    "Z\",\"level\":\"info\",\"event\":\"",
    "Z\",\"level\":\"warn\",\"event\":\"",
    "Z\",\"level\":\"error\",\"event\":\"",
};

static void log_flush_atexit(void)
{
	log_flush();
}

int log_open(const char *path, enum log_level level, char *err, size_t errlen)
{
	int fd = STDERR_FILENO;

	if (path != NULL && strcmp(path, "-") != 0) {
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
		if (fd == -1) {
			snprintf(err, errlen, "%s: cannot open log file: %s", path,
			         strerror(errno));
			return -1;
		}
	}
	log_close();
	log_fd = fd;
	log_min = level;
	if (!log_atexit_set) {
		/* exit() from anywhere still leaves the buffered lines behind. */
		atexit(log_flush_atexit);
		log_atexit_set = true;
	}
	return 0;
}

void log_close(void)
{
	log_flush();
	if (log_fd != STDERR_FILENO)
		close(log_fd);
	log_fd = STDERR_FILENO;
}

void log_flush(void)
{
	size_t off = 0;
	while (off < log_buf_len) {
		ssize_t w = write(log_fd, log_buf + off, log_buf_len - off);
		if (w > 0) {
			off += (size_t)w;
		} else if (w == -1 && errno == EINTR) {
			continue;
		} else if (w == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* A non-blocking fd that is full: the rest waits for the
			 * next turn rather than blocking the loop. */
			break;
		} else {
			off = log_buf_len; /* a broken fd: nothing to do but drop */
		}
	}
	if (off > 0 && off < log_buf_len)
		memmove(log_buf, log_buf + off, log_buf_len - off);
	log_buf_len -= off;
	if (log_buf_len == 0 && log_dropped > 0) {
		unsigned long long n = log_dropped;
		log_dropped = 0;
		struct log_line l;
		if (log_begin(&l, LOG_WARN, "log_dropped")) {
			log_int(&l, "lines", (long long)n);
			log_end(&l);
		}
	}
}

void log_set_level(enum log_level level)
{
	log_min = level;
}

bool log_enabled(enum log_level level)
{
	return level >= log_min;
}

static void put(struct log_line *l, const char *s, size_t n)
{
	/* Keep room for the closing "}\n" and the truncation marker. */
	const size_t reserve = sizeof(",\"truncated\":true}\n");
	if (l->truncated || l->len + n + reserve > sizeof(l->buf)) {
		l->truncated = true;
		return;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

static void put_escaped(struct log_line *l, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(l, s + start, i - start);
		char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			put(l, esc, 2);
		} else {
			put(l, esc, 6);
		}
		start = i + 1;
	}
	put(l, s + start, n - start);
}

static void put_key(struct log_line *l, const char *key)
{
	put(l, ",\"", 2);
	put(l, key, strlen(key));
	put(l, "\":", 2);
}

static void put_digits(char *p, unsigned v, int n)
{
	while (n-- > 0) {
		p[n] = (char)('0' + v % 10);
		v /= 10;
	}
}

/* {"ts":"YYYY-MM-DDThh:mm:ss. for the second `sec`; gmtime_r once a second. */
static void ts_head(long long sec)
{
	time_t t = (time_t)sec;
	struct tm tm;
	gmtime_r(&t, &tm);
	static const char tmpl[] = "{\"ts\":\"0000-00-00T00:00:00.";
	char *h = log_ts_head;
	memcpy(h, tmpl, sizeof tmpl - 1);
	put_digits(h + 7, (unsigned)(tm.tm_year + 1900) % 10000, 4);
	put_digits(h + 12, (unsigned)tm.tm_mon + 1, 2);
	put_digits(h + 15, (unsigned)tm.tm_mday, 2);
	put_digits(h + 18, (unsigned)tm.tm_hour, 2);
	put_digits(h + 21, (unsigned)tm.tm_min, 2);
	put_digits(h + 24, (unsigned)tm.tm_sec, 2);
	log_ts_head_len = sizeof tmpl - 1;
	log_ts_sec = sec;
}

bool log_begin(struct log_line *l, enum log_level level, const char *event)
{
	if (!log_enabled(level))
		return false;
	l->len = 0;
	l->truncated = false;
	l->keep = level >= LOG_WARN;

	long long now = clock_wall_ms();
	long long sec = now / 1000;
	if (sec != log_ts_sec)
		ts_head(sec);
	memcpy(l->buf, log_ts_head, log_ts_head_len);
	put_digits(l->buf + log_ts_head_len, (unsigned)(now % 1000), 3);
	l->len = log_ts_head_len + 3;
	const char *f = level_fields[level];
	put(l, f, strlen(f));
	put_escaped(l, event, strlen(event));
	put(l, "\"", 1);
	return true;
}

void log_strn(struct log_line *l, const char *key, const char *value, size_t n)
{
	put_key(l, key);
	if (value == NULL) {
		put(l, "null", 4);
		return;
	}
	put(l, "\"", 1);
	put_escaped(l, value, n);
	put(l, "\"", 1);
}

void log_str(struct log_line *l, const char *key, const char *value)
{
	log_strn(l, key, value, value ? strlen(value) : 0);
}

void log_int(struct log_line *l, const char *key, long long value)
{
	char num[24];
	char *p = num + sizeof num;
	/* By hand: this runs several times for every request. The magnitude as
	 * unsigned keeps LLONG_MIN right. */
	unsigned long long u =
	    value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (value < 0)
		*--p = '-';
	put_key(l, key);
	put(l, p, (size_t)(num + sizeof num - p));
}

void log_num(struct log_line *l, const char *key, double value)
{
	char num[32];
	int n = isfinite(value) ? snprintf(num, sizeof(num), "%.3f", value)
	                        : snprintf(num, sizeof(num), "null");
	put_key(l, key);
	put(l, num, (size_t)n);
}

void log_bool(struct log_line *l, const char *key, bool value)
{
	put_key(l, key);
	put(l, value ? "true" : "false", value ? 4 : 5);
}

void log_end(struct log_line *l)
{
	if (l->truncated) {
		memcpy(l->buf + l->len, ",\"truncated\":true", 17);
		l->len += 17;
	}
	l->buf[l->len++] = '}';
	if (l->keep) {
		memcpy(recent_text[recent_next], l->buf, l->len);
		recent_len[recent_next] = l->len;
		recent_next = (recent_next + 1) % LOG_RECENT_MAX;
		if (recent_n < LOG_RECENT_MAX)
			recent_n++;
	}
	l->buf[l->len++] = '\n';
	if (log_buf_len + l->len > sizeof log_buf)
		log_flush();
	if (log_buf_len + l->len > sizeof log_buf) {
		log_dropped++; /* the fd does not take more: never block the loop */
		return;
	}
	memcpy(log_buf + log_buf_len, l->buf, l->len);
	log_buf_len += l->len;
}

void log_keep(struct log_line *l)
{
	l->keep = true;
}

size_t log_recent(struct log_recent_line *out, size_t max)
{
	size_t n = recent_n < max ? recent_n : max;
	for (size_t i = 0; i < n; i++) {
		size_t slot = (recent_next + LOG_RECENT_MAX - 1 - i) % LOG_RECENT_MAX;
		out[i] = (struct log_recent_line){recent_text[slot], recent_len[slot]};
	}
	return n;
}

void log_msg(enum log_level level, const char *event, const char *msg)
{
	struct log_line l;
	if (log_begin(&l, level, event)) {
		log_str(&l, "message", msg);
		log_end(&l);
	}
}

static void libevent_log_cb(int severity, const char *msg)
{
	enum log_level lvl = severity >= EVENT_LOG_ERR    ? LOG_ERROR
	                     : severity >= EVENT_LOG_WARN ? LOG_WARN
	                     : severity >= EVENT_LOG_MSG  ? LOG_INFO
	                                                  : LOG_DEBUG;
	log_msg(lvl, "libevent", msg);
}

static void libevent_fatal_cb(int err)
{
	/* libevent exits after this returns; leave the reason in the log first. */
	struct log_line l;
	if (log_begin(&l, LOG_ERROR, "fatal")) {
		log_str(&l, "message", "libevent fatal error, exiting");
		log_int(&l, "code", err);
		log_end(&l);
	}
	log_flush();
}

void log_hook_libevent(void)
{
	event_set_log_callback(libevent_log_cb);
	event_set_fatal_callback(libevent_fatal_cb);
}
