/* log — JSON lines. See log.h. */
#include "log.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static int log_fd = STDERR_FILENO;
static enum log_level log_min = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

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
	return 0;
}

void log_close(void)
{
	if (log_fd != STDERR_FILENO)
		close(log_fd);
	log_fd = STDERR_FILENO;
}

void log_set_level(enum log_level level)
{
	log_min = level;
}

bool log_enabled(enum log_level level)
{
	return level >= log_min;
}

long long log_wall_ms(void)
{
	return clock_wall_ms();
}

long long mono_ms(void)
{
	return clock_now_ms();
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

bool log_begin(struct log_line *l, enum log_level level, const char *event)
{
	if (!log_enabled(level))
		return false;
	l->len = 0;
	l->truncated = false;

	long long now = log_wall_ms();
	time_t secs = (time_t)(now / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	char ts[40];
	int n = snprintf(ts, sizeof(ts), "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, (int)(now % 1000));
	put(l, ts, (size_t)n);
	log_str(l, "level", level_names[level]);
	log_str(l, "event", event);
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
	int n = snprintf(num, sizeof(num), "%lld", value);
	put_key(l, key);
	put(l, num, (size_t)n);
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
	l->buf[l->len++] = '\n';
	/* One write per line; a short write to a full pipe loses the rest of the
	 * line rather than blocking the event loop for long. */
	ssize_t w;
	do {
		w = write(log_fd, l->buf, l->len);
	} while (w == -1 && errno == EINTR);
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
}

void log_hook_libevent(void)
{
	event_set_log_callback(libevent_log_cb);
	event_set_fatal_callback(libevent_fatal_cb);
}
