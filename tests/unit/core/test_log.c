/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for log: the hand-made timestamp and numbers, escaping, the
 * buffer written once per turn in whole lines, and the recent problems kept
 * for the admin page. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "unit.h"

static char path[64];

static void open_tmp(void)
{
	snprintf(path, sizeof path, "/tmp/pacerd-test-log-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ne(fd, -1);
	close(fd);
	char err[256];
	ck_assert_int_eq(log_open(path, LOG_DEBUG, err, sizeof err), 0);
}

/* The whole file, in a static buffer. */
static char *slurp(size_t *n)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	static char buf[1 << 20];
	*n = fread(buf, 1, sizeof buf - 1, f);
	buf[*n] = '\0';
	fclose(f);
	return buf;
}

static void close_tmp(void)
{
	log_close();
	unlink(path);
}

START_TEST(lines_wait_for_the_flush)
{
	open_tmp();
	struct log_line l;
	ck_assert(log_begin(&l, LOG_INFO, "request"));
	log_int(&l, "status", 200);
	log_end(&l);
	size_t n;
	slurp(&n);
	ck_assert_uint_eq(n, 0); /* not yet: one write per turn */
	log_flush();
	char *s = slurp(&n);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(s[n - 1], '\n');
	ck_assert_ptr_nonnull(
	    strstr(s, ",\"level\":\"info\",\"event\":\"request\",\"status\":200}\n"));
	close_tmp();
}
END_TEST

START_TEST(timestamp_by_hand)
{
	open_tmp();
	clock_turn_end();
	long long now = clock_wall_ms();
	log_msg(LOG_WARN, "e", "m");
	log_flush();
	size_t n;
	char *s = slurp(&n);
	/* What snprintf + gmtime_r made before. */
	time_t secs = (time_t)(now / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	char want[96];
	snprintf(
	    want, sizeof want,
	    "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\",\"level\":\"warn\",\"event\":\"e\","
	    "\"message\":\"m\"}\n",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    (int)(now % 1000));
	ck_assert_str_eq(s, want);
	close_tmp();
}
END_TEST

START_TEST(numbers_and_escapes)
{
	open_tmp();
	struct log_line l;
	ck_assert(log_begin(&l, LOG_INFO, "ev\"1"));
	log_int(&l, "a", 0);
	log_int(&l, "b", -7);
	log_int(&l, "c", LLONG_MAX);
	log_int(&l, "d", LLONG_MIN);
	log_num(&l, "e", 1.5);
	log_bool(&l, "f", false);
	log_str(&l, "g", "q\"\\\n\x01");
	log_str(&l, "h", NULL);
	log_end(&l);
	log_flush();
	size_t n;
	char *s = slurp(&n);
	ck_assert_ptr_nonnull(strstr(s, "\"event\":\"ev\\\"1\",\"a\":0,\"b\":-7,"
	                                "\"c\":9223372036854775807,\"d\":-9223372036854775808,"
	                                "\"e\":1.500,\"f\":false,\"g\":\"q\\\"\\\\\\u000a\\u0001\","
	                                "\"h\":null}\n"));
	close_tmp();
}
END_TEST

START_TEST(filtered_levels)
{
	open_tmp();
	log_set_level(LOG_WARN);
	struct log_line l;
	ck_assert(!log_begin(&l, LOG_INFO, "x"));
	ck_assert(log_enabled(LOG_ERROR));
	log_set_level(LOG_DEBUG);
	close_tmp();
}
END_TEST

/* More than the buffer holds before a flush: written out as it fills, whole
 * lines only, none lost, in order. */
START_TEST(full_buffer_written_early)
{
	open_tmp();
	char pad[1500];
	memset(pad, 'x', sizeof pad - 1);
	pad[sizeof pad - 1] = '\0';
	for (int i = 0; i < 200; i++) {
		struct log_line l;
		ck_assert(log_begin(&l, LOG_INFO, "fill"));
		log_int(&l, "i", i);
		log_str(&l, "pad", pad);
		log_end(&l);
	}
	size_t n;
	slurp(&n);
	ck_assert_uint_gt(n, 0);          /* written before any flush */
	ck_assert_uint_lt(n, 200 * 1500); /* but not line by line */
	log_flush();
	char *s = slurp(&n);
	int lines = 0;
	for (char *p = s; (p = strchr(p, '\n')) != NULL; p++)
		lines++;
	ck_assert_int_eq(lines, 200);
	char *p = s;
	for (int i = 0; i < 200; i++) {
		char key[32];
		snprintf(key, sizeof key, "\"i\":%d,", i);
		char *q = strstr(p, key);
		ck_assert_ptr_nonnull(q);
		p = q;
	}
	close_tmp();
}
END_TEST

/* A line over LOG_LINE_MAX is cut and marked, still one valid line. */
START_TEST(truncated_line)
{
	open_tmp();
	static char big[LOG_LINE_MAX * 2];
	memset(big, 'y', sizeof big - 1);
	struct log_line l;
	ck_assert(log_begin(&l, LOG_INFO, "big"));
	log_str(&l, "v", big);
	log_int(&l, "after", 1);
	log_end(&l);
	log_flush();
	size_t n;
	char *s = slurp(&n);
	ck_assert_uint_le(n, LOG_LINE_MAX);
	ck_assert_ptr_nonnull(strstr(s, ",\"truncated\":true}\n"));
	close_tmp();
}
END_TEST

/* Warn and error lines are kept, info lines only when marked; the last
 * LOG_RECENT_MAX, newest first, each whole and without its newline. */
START_TEST(recent_problems)
{
	open_tmp();
	struct log_line l;
	for (int i = 0; i < LOG_RECENT_MAX + 5; i++) {
		ck_assert(log_begin(&l, i % 2 ? LOG_WARN : LOG_ERROR, "trouble"));
		log_int(&l, "i", i);
		log_end(&l);
		ck_assert(log_begin(&l, LOG_INFO, "fine"));
		log_end(&l);
	}
	ck_assert(log_begin(&l, LOG_INFO, "request"));
	log_int(&l, "status", 502);
	log_keep(&l);
	log_end(&l);
	struct log_recent_line r[LOG_RECENT_MAX + 1];
	ck_assert_uint_eq(log_recent(r, LOG_RECENT_MAX + 1), LOG_RECENT_MAX);
	char want[64];
	ck_assert_int_eq(r[0].text[r[0].len - 1], '}');
	ck_assert_ptr_nonnull(
	    strstr(r[0].text, "\"level\":\"info\",\"event\":\"request\",\"status\":502}"));
	for (int k = 1; k < LOG_RECENT_MAX; k++) {
		int i = LOG_RECENT_MAX + 5 - k;
		snprintf(want, sizeof(want), "\"event\":\"trouble\",\"i\":%d}", i);
		ck_assert_int_eq(strncmp(r[k].text + r[k].len - strlen(want), want, strlen(want)),
		                 0);
		ck_assert_int_eq(strncmp(r[k].text, "{\"ts\":\"", 7), 0);
	}
	ck_assert_uint_eq(log_recent(r, 2), 2);
	/* A level filtered out is never begun, so never kept. */
	log_set_level(LOG_ERROR);
	ck_assert(!log_begin(&l, LOG_WARN, "hidden"));
	log_set_level(LOG_DEBUG);
	log_recent(r, 1);
	ck_assert_ptr_nonnull(strstr(r[0].text, "\"status\":502"));
	close_tmp();
}
END_TEST

static Suite *log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *t = tcase_create("lines");
	tcase_add_test(t, lines_wait_for_the_flush);
	tcase_add_test(t, timestamp_by_hand);
	tcase_add_test(t, numbers_and_escapes);
	tcase_add_test(t, filtered_levels);
	tcase_add_test(t, full_buffer_written_early);
	tcase_add_test(t, truncated_line);
	tcase_add_test(t, recent_problems);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("log", log_suite)
