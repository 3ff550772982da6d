/* SPDX-License-Identifier: Apache-2.0 */
/* page_events: the status page's event stream over socketpairs and the real
 * httpd: the head, retry and a snapshot at once, then one per interval; at
 * most PAGE_EVENTS_MAX_CLIENTS at once (503 beyond); a client that leaves
 * frees its slot and, the last one, the timer; a reader that stops reading is
 * cut after PAGE_EVENTS_MAX_BEHIND ticks instead of buffered without end. */
#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/page_events.h"
#include "core/clock.h"
#include "core/log.h"
#include "http/httpd.h"
#include "unit.h"

#define INTERVAL_MS 20

static struct event_base *base;
static struct httpd *h;
static struct page_events *pe;
static int snapshots;
static size_t snapshot_bytes = 16;

/* {"n":N} padded with spaces to snapshot_bytes. */
static char *snapshot(void *arg, size_t *len)
{
	(void)arg;
	size_t n = snapshot_bytes < 16 ? 16 : snapshot_bytes;
	char *s = malloc(n + 1);
	memset(s, ' ', n);
	int k = snprintf(s, n + 1, "{\"n\":%d}", ++snapshots);
	s[k] = ' ';
	s[n] = '\0';
	*len = n;
	return s;
}

static void on_request(struct hreq *r, void *arg)
{
	(void)arg;
	page_events_serve(pe, r);
}

static void setup(void)
{
	char err[256];
	signal(SIGPIPE, SIG_IGN);
	log_open("/dev/null", LOG_ERROR, err, sizeof(err));
	base = event_base_new();
	struct httpd_conf hc = {.max_header_bytes = 1024,
	                        .max_body_bytes = 100,
	                        .max_connections = 64,
	                        .client_timeout_s = 30};
	h = httpd_new(base, NULL, &hc, on_request, NULL, err, sizeof(err));
	ck_assert_ptr_nonnull(h);
	pe = page_events_new(base, INTERVAL_MS, snapshot, NULL);
	ck_assert_ptr_nonnull(pe);
	snapshots = 0;
	snapshot_bytes = 16;
}

static void teardown(void)
{
	httpd_free(h);
	page_events_free(pe);
	event_base_free(base);
}

/* The loop for ms of real time. */
static void run_for(int ms)
{
	clock_turn_end();
	long long end = clock_now_ms() + ms;
	while (clock_now_ms() < end) {
		struct timeval tv = {0, 2000};
		event_base_loopexit(base, &tv);
		event_base_loop(base, 0);
		clock_turn_end();
	}
}

/* A client: the socket pacerd's side of which the httpd serves. */
static int connect_client(void)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(httpd_adopt(h, sv[0]), 0);
	const char req[] = "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
	ck_assert_int_eq(write(sv[1], req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	return sv[1];
}

/* What the client can read now, NUL-terminated (static buffer). */
static const char *recv_all(int fd)
{
	static char buf[1 << 16];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	return buf;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

START_TEST(stream_head_then_a_snapshot_per_tick)
{
	ck_assert(!page_events_ticking(pe));
	int c = connect_client();
	run_for(5);
	const char *got = recv_all(c);
	ck_assert_msg(strncmp(got, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", got);
	ck_assert_ptr_nonnull(strstr(got, "content-type: text/event-stream; charset=utf-8\r\n"));
	ck_assert_ptr_nonnull(strstr(got, "cache-control: no-store\r\n"));
	ck_assert_ptr_nonnull(strstr(got, "transfer-encoding: chunked\r\n"));
	/* retry:, then the first snapshot before any tick. */
	const char *retry = strstr(got, "retry: 5000\n\n");
	const char *first = strstr(got, "data: {\"n\":1}         \n\n");
	ck_assert(retry != NULL && first != NULL && retry < first);
	ck_assert(page_events_ticking(pe));
	struct page_events_stats st;
	page_events_stats(pe, &st);
	ck_assert_uint_eq(st.clients, 1);
	ck_assert_uint_eq(st.served, 1);

	run_for(INTERVAL_MS * 5);
	got = recv_all(c);
	size_t n = count_of(got, "data: {\"n\":");
	ck_assert_msg(n >= 3 && n <= 6, "%zu snapshots in 5 intervals", n);
	close(c);
}
END_TEST

START_TEST(at_most_max_clients_and_leaving_frees)
{
	int c[PAGE_EVENTS_MAX_CLIENTS + 1];
	for (int i = 0; i < PAGE_EVENTS_MAX_CLIENTS; i++)
		c[i] = connect_client();
	run_for(5);
	for (int i = 0; i < PAGE_EVENTS_MAX_CLIENTS; i++)
		ck_assert_ptr_nonnull(strstr(recv_all(c[i]), "HTTP/1.1 200 OK"));
	c[PAGE_EVENTS_MAX_CLIENTS] = connect_client();
	run_for(5);
	const char *over = recv_all(c[PAGE_EVENTS_MAX_CLIENTS]);
	ck_assert_msg(strncmp(over, "HTTP/1.1 503 ", 13) == 0, "%s", over);
	ck_assert_ptr_nonnull(strstr(over, "retry-after: 30\r\n"));
	ck_assert_ptr_nonnull(strstr(over, "\"code\":\"too_many_clients\""));
	struct page_events_stats st;
	page_events_stats(pe, &st);
	ck_assert_uint_eq(st.clients, PAGE_EVENTS_MAX_CLIENTS);
	ck_assert_uint_eq(st.refused, 1);

	/* One leaves: its slot is free again; one snapshot a tick for all. */
	close(c[0]);
	run_for(INTERVAL_MS * 2);
	page_events_stats(pe, &st);
	ck_assert_uint_eq(st.clients, PAGE_EVENTS_MAX_CLIENTS - 1);
	int again = connect_client();
	run_for(5);
	ck_assert_ptr_nonnull(strstr(recv_all(again), "HTTP/1.1 200 OK"));
	int before = snapshots;
	run_for(INTERVAL_MS * 4);
	ck_assert_int_le(snapshots - before, 6); /* per tick, not per client */

	/* All leave: no client, no timer, no more snapshots. */
	close(again);
	for (int i = 1; i <= PAGE_EVENTS_MAX_CLIENTS; i++)
		close(c[i]);
	run_for(INTERVAL_MS * 2);
	page_events_stats(pe, &st);
	ck_assert_uint_eq(st.clients, 0);
	ck_assert(!page_events_ticking(pe));
	before = snapshots;
	run_for(INTERVAL_MS * 3);
	ck_assert_int_eq(snapshots, before);
}
END_TEST

/* A reader that stops: its output grows to the httpd's cap, then it gets
 * nothing more, and after PAGE_EVENTS_MAX_BEHIND ticks it is cut while a
 * reading client beside it goes on. */
START_TEST(slow_reader_cut)
{
	snapshot_bytes = 64 * 1024;
	int slow = connect_client();
	int fast = connect_client();
	struct page_events_stats st;
	long long t0 = clock_now_ms();
	for (;;) {
		run_for(INTERVAL_MS);
		recv_all(fast);
		page_events_stats(pe, &st);
		if (st.dropped_slow > 0 || clock_now_ms() - t0 > 10000)
			break;
	}
	ck_assert_uint_eq(st.dropped_slow, 1);
	ck_assert_uint_eq(st.clients, 1);
	/* What the slow one was sent is bounded: the cap, what the kernel holds,
	 * and one snapshot; not one snapshot per tick. */
	int sent = snapshots;
	long long ticks = (clock_now_ms() - t0) / INTERVAL_MS;
	ck_assert_int_ge(ticks, PAGE_EVENTS_MAX_BEHIND);
	int queued_for_slow = 0;
	size_t got = 0;
	char buf[1 << 16];
	for (;;) {
		ssize_t r = read(slow, buf, sizeof(buf));
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	queued_for_slow = (int)(got / snapshot_bytes);
	ck_assert_msg(got < (size_t)HREQ_OUT_CAP + 2 * 1024 * 1024,
	              "the slow reader got %zu bytes of %d snapshots", got, sent);
	ck_assert_int_lt(queued_for_slow, sent);
	/* The fast one still gets its snapshots. */
	int before = snapshots;
	run_for(INTERVAL_MS * 3);
	ck_assert_int_gt(snapshots, before);
	ck_assert_ptr_nonnull(strstr(recv_all(fast), "data: {\"n\":"));
	close(slow);
	close(fast);
}
END_TEST

static Suite *page_events_suite(void)
{
	Suite *s = suite_create("page_events");
	TCase *t = tcase_create("stream");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, stream_head_then_a_snapshot_per_tick);
	tcase_add_test(t, at_most_max_clients_and_leaving_frees);
	tcase_add_test(t, slow_reader_cut);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("page_events", page_events_suite)
