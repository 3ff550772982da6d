/* SPDX-License-Identifier: Apache-2.0 */
/* httpd: the connection layer's contract with its owner, over a socketpair:
 * exact response bytes (chunked framing, content-length kept, HTTP/1.0),
 * pipelined requests one at a time and in order, backpressure (hreq_write
 * false at the cap, drained once the client reads), gone when the client
 * leaves mid-answer, the layer's own answers. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/httpd.h"
#include "unit.h"

static struct event_base *base;
static struct httpd *h;
static int client = -1;

/* What the owner saw and does. */
static struct hreq *last;
static int n_requests, n_gone, n_drained, n_body;
static char targets[8][64];
static enum { ANSWER_NONE, ANSWER_ECHO, ANSWER_STREAM } mode;

static void on_gone(void *ctx)
{
	(void)ctx;
	n_gone++;
	last = NULL;
}

static void on_drained(void *ctx)
{
	(void)ctx;
	n_drained++;
}

static void on_body(void *ctx)
{
	(void)ctx;
	n_body++;
}

static const struct hreq_events events = {.drained = on_drained, .gone = on_gone, .body = on_body};

/* Bodies of targets under /up are streamed (an upload, in pacerd). */
static bool streams(const struct hreq *r, void *arg)
{
	(void)arg;
	return strncmp(hreq_target(r), "/up", 3) == 0;
}

static void on_request(struct hreq *r, void *arg)
{
	(void)arg;
	if (n_requests < 8)
		snprintf(targets[n_requests], sizeof(targets[0]), "%s", hreq_target(r));
	n_requests++;
	hreq_set_events(r, &events, NULL);
	last = r;
	if (mode == ANSWER_ECHO) {
		size_t len;
		const char *body = hreq_body(r, &len);
		struct hhdr hd = {"x-target", 8, hreq_target(r), hreq_target_len(r)};
		hreq_respond(r, 200, &hd, 1, body, len);
		last = NULL;
	} else if (mode == ANSWER_STREAM) {
		hreq_start(r, 200, NULL, NULL, 0);
		hreq_write(r, "hello", 5);
		hreq_write(r, "", 0);
		hreq_write(r, "world!", 6);
		hreq_end(r, true);
		last = NULL;
	}
}

static void setup(void)
{
	char err[256];
	signal(SIGPIPE, SIG_IGN);
	log_open("/dev/null", LOG_ERROR, err, sizeof(err));
	base = event_base_new();
	struct httpd_conf hc = {.max_header_bytes = 1024,
	                        .max_body_bytes = 100,
	                        .max_upload_bytes = 1 << 20,
	                        .max_connections = 16,
	                        .client_timeout_s = 30};
	h = httpd_new(base, NULL, &hc, on_request, NULL, err, sizeof(err));
	ck_assert_ptr_nonnull(h);
	httpd_set_streaming(h, streams, NULL);
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(httpd_adopt(h, sv[0]), 0);
	client = sv[1];
	last = NULL;
	n_requests = n_gone = n_drained = n_body = 0;
	mode = ANSWER_ECHO;
}

static void teardown(void)
{
	if (client >= 0)
		close(client);
	client = -1;
	httpd_free(h);
	event_base_free(base);
}

static void spin(void)
{
	for (int i = 0; i < 5; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

static void send_str(const char *s)
{
	ck_assert_int_eq(write(client, s, strlen(s)), (ssize_t)strlen(s));
	spin();
}

/* Everything the client can read now, NUL-terminated (static buffer). */
static const char *recv_all(size_t *len)
{
	static char buf[1 << 20];
	size_t n = 0;
	spin();
	for (;;) {
		ssize_t r = read(client, buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	if (len != NULL)
		*len = n;
	return buf;
}

static bool client_sees_eof(void)
{
	char c;
	spin();
	return read(client, &c, 1) == 0;
}

START_TEST(chunked_framing_exact_bytes)
{
	mode = ANSWER_STREAM;
	send_str("GET /s HTTP/1.1\r\nHost: x\r\n\r\n");
	ck_assert_str_eq(recv_all(NULL), "HTTP/1.1 200 OK\r\n"
	                                 "transfer-encoding: chunked\r\n\r\n"
	                                 "5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n");
	ck_assert(!client_sees_eof()); /* keep-alive */
}
END_TEST

START_TEST(http10_stream_ends_with_the_connection)
{
	mode = ANSWER_STREAM;
	send_str("GET /s HTTP/1.0\r\n\r\n");
	ck_assert_str_eq(recv_all(NULL), "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhelloworld!");
	ck_assert(client_sees_eof());
}
END_TEST

START_TEST(content_length_kept_and_keep_alive)
{
	send_str("POST /e HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
	ck_assert_str_eq(recv_all(NULL), "HTTP/1.1 200 OK\r\nx-target: /e\r\n"
	                                 "content-length: 3\r\n\r\nabc");
	send_str("GET /f HTTP/1.1\r\n\r\n");
	ck_assert_str_eq(recv_all(NULL), "HTTP/1.1 200 OK\r\nx-target: /f\r\n"
	                                 "content-length: 0\r\n\r\n");
	ck_assert_int_eq(n_requests, 2);
}
END_TEST

START_TEST(pipelined_one_at_a_time_in_order)
{
	mode = ANSWER_NONE;
	send_str("GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n");
	ck_assert_int_eq(n_requests, 1); /* the others wait for the first answer */
	ck_assert_str_eq(targets[0], "/1");
	struct hreq *r = last;
	mode = ANSWER_ECHO;
	hreq_respond(r, 200, NULL, 0, "one", 3);
	size_t len;
	const char *out = recv_all(&len);
	ck_assert_int_eq(n_requests, 3);
	ck_assert_str_eq(targets[1], "/2");
	ck_assert_str_eq(targets[2], "/3");
	const char *a = strstr(out, "one"), *b = strstr(out, "x-target: /2"),
	           *c = strstr(out, "x-target: /3");
	ck_assert(a != NULL && b != NULL && c != NULL && a < b && b < c);
}
END_TEST

START_TEST(backpressure_and_drained)
{
	mode = ANSWER_NONE;
	send_str("GET /big HTTP/1.1\r\n\r\n");
	struct hreq *r = last;
	ck_assert_ptr_nonnull(r);
	hreq_start(r, 200, NULL, NULL, 0);
	static char chunk[16384];
	memset(chunk, 'x', sizeof(chunk));
	/* The socket takes some; the rest waits in the output. Nobody reads. */
	int writes = 0;
	while (hreq_write(r, chunk, sizeof(chunk))) {
		spin();
		ck_assert_int_lt(++writes, 1000);
	}
	ck_assert_int_eq(n_drained, 0);
	size_t total = 0, len;
	for (int i = 0; i < 200 && n_drained == 0; i++) {
		recv_all(&len);
		total += len;
	}
	ck_assert_int_eq(n_drained, 1);
	ck_assert_uint_gt(total, HREQ_OUT_CAP / 2);
	hreq_end(r, true);
}
END_TEST

START_TEST(gone_when_the_client_leaves_mid_answer)
{
	mode = ANSWER_NONE;
	send_str("GET /slow HTTP/1.1\r\n\r\n");
	ck_assert_ptr_nonnull(last);
	hreq_start(last, 200, NULL, NULL, 0);
	hreq_write(last, "partial", 7);
	close(client);
	client = -1;
	spin();
	ck_assert_int_eq(n_gone, 1);
	ck_assert_ptr_null(last);
	struct httpd_stats st;
	spin();
	httpd_get_stats(h, &st);
	ck_assert_uint_eq(st.connections, 0);
	ck_assert_uint_eq(st.active, 0);
}
END_TEST

START_TEST(gone_while_waiting_for_the_owner)
{
	mode = ANSWER_NONE;
	send_str("POST /q HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
	ck_assert_int_eq(n_requests, 1);
	shutdown(client, SHUT_WR); /* the client gives up */
	spin();
	ck_assert_int_eq(n_gone, 1);
}
END_TEST

/* The owner asks before the loop has polled: a client still there is not
 * gone (nothing happens), one that closed is, at once, as its read event
 * would have found (gone, 499 in pacerd's log, the connection closed). */
START_TEST(client_left_seen_before_the_loop_polls)
{
	mode = ANSWER_NONE;
	send_str("GET /q HTTP/1.1\r\n\r\n");
	ck_assert_ptr_nonnull(last);
	struct hreq *r = last;
	ck_assert(!hreq_client_left(r));
	ck_assert_int_eq(n_gone, 0);
	shutdown(client, SHUT_WR); /* no loop turn after this */
	ck_assert(hreq_client_left(r));
	ck_assert_int_eq(n_gone, 1);
	ck_assert_ptr_null(last);
	spin();
	ck_assert_int_eq(n_gone, 1); /* told once */
	struct httpd_stats st;
	httpd_get_stats(h, &st);
	ck_assert_uint_eq(st.connections, 0);
	ck_assert_uint_eq(st.active, 0);
}
END_TEST

/* Bytes the client sent after its request (a pipelined one) are not a
 * departure; an answer already begun is no obstacle to asking. */
START_TEST(client_left_not_for_pipelined_bytes)
{
	mode = ANSWER_NONE;
	send_str("GET /a HTTP/1.1\r\n\r\n");
	struct hreq *r = last;
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(write(client, "GET /b HTTP/1.1\r\n\r\n", 20), 20);
	ck_assert(!hreq_client_left(r));
	spin(); /* the loop reads them: held for after this answer */
	hreq_start(r, 200, NULL, NULL, 0);
	ck_assert(!hreq_client_left(r));
	ck_assert_int_eq(n_gone, 0);
	hreq_end(r, true);
	spin();
	ck_assert_int_eq(n_requests, 2);
}
END_TEST

START_TEST(truncated_end_closes)
{
	mode = ANSWER_NONE;
	send_str("GET /t HTTP/1.1\r\n\r\n");
	hreq_start(last, 200, NULL, NULL, 0);
	hreq_write(last, "abc", 3);
	hreq_end(last, false);
	const char *out = recv_all(NULL);
	ck_assert_ptr_nonnull(strstr(out, "3\r\nabc\r\n"));
	ck_assert_ptr_null(strstr(out, "0\r\n\r\n")); /* no final chunk */
	ck_assert(client_sees_eof());
}
END_TEST

START_TEST(body_over_limit_413_before_the_body)
{
	send_str("POST /b HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
	const char *out = recv_all(NULL);
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 413 Payload Too Large\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "\"code\":\"body_too_large\""));
	ck_assert_ptr_nonnull(strstr(out, "connection: close\r\n"));
	ck_assert_int_eq(n_requests, 0);
}
END_TEST

START_TEST(continue_then_body)
{
	send_str("POST /c HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
	ck_assert_str_eq(recv_all(NULL), "HTTP/1.1 100 Continue\r\n\r\n");
	ck_assert_int_eq(n_requests, 0);
	send_str("ok");
	ck_assert_ptr_nonnull(strstr(recv_all(NULL), "\r\n\r\nok"));
	ck_assert_int_eq(n_requests, 1);
}
END_TEST

START_TEST(split_everywhere_parses_the_same)
{
	const char *req = "POST /split?x=1 HTTP/1.1\r\nHost: example\r\nX-Long: "
	                  "abcdefghijklmnop\r\nTransfer-Encoding: chunked\r\n\r\n"
	                  "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
	for (size_t i = 0; req[i]; i++) {
		ck_assert_int_eq(write(client, req + i, 1), 1);
		spin();
	}
	ck_assert_int_eq(n_requests, 1);
	ck_assert_str_eq(targets[0], "/split?x=1");
	ck_assert_ptr_nonnull(strstr(recv_all(NULL), "x-target: /split?x=1\r\n"
	                                             "content-length: 5\r\n\r\nabcde"));
}
END_TEST

START_TEST(headers_readable_nul_terminated)
{
	mode = ANSWER_NONE;
	send_str("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Two: b c\r\n\r\n");
	ck_assert_ptr_nonnull(last);
	ck_assert_uint_eq(hreq_n_headers(last), 3);
	ck_assert_str_eq(hreq_header(last, "host"), "a");
	ck_assert_str_eq(hreq_header(last, "x-empty"), "");
	ck_assert_str_eq(hreq_header(last, "X-TWO"), "b c");
	ck_assert_ptr_null(hreq_header(last, "x-none"));
	ck_assert_str_eq(hreq_method(last), "GET");
	ck_assert_int_eq(strncmp(hreq_id(last), "pcr_", 4), 0);
	hreq_respond(last, 204, NULL, 0, NULL, 0);
}
END_TEST

START_TEST(error_after_start_cuts)
{
	mode = ANSWER_NONE;
	send_str("GET /late HTTP/1.1\r\n\r\n");
	hreq_start(last, 200, NULL, NULL, 0);
	hreq_write(last, "abc", 3);
	hreq_error(last, 502, "upstream_unreachable", "too late", NULL, 0);
	const char *out = recv_all(NULL);
	ck_assert_ptr_null(strstr(out, "upstream_unreachable")); /* no second head */
	ck_assert_ptr_null(strstr(out, "0\r\n\r\n"));            /* not a complete message */
	ck_assert(client_sees_eof());
}
END_TEST

START_TEST(head_answer_has_no_body)
{
	mode = ANSWER_NONE;
	send_str("HEAD /h HTTP/1.1\r\n\r\n");
	hreq_respond(last, 200, NULL, 0, "hidden", 6);
	ck_assert_str_eq(recv_all(NULL), "HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n");
	send_str("GET /next HTTP/1.1\r\n\r\n"); /* the connection stays usable */
	ck_assert_int_eq(n_requests, 2);
}
END_TEST

/* A client that stops reading an answer for client_timeout_s is gone; one
 * that reads slowly is not (covered by backpressure_and_drained). */
START_TEST(stuck_write_times_out)
{
	struct httpd_conf hc = {.max_header_bytes = 1024,
	                        .max_body_bytes = 100,
	                        .max_connections = 16,
	                        .client_timeout_s = 1};
	httpd_set_conf(h, &hc);
	mode = ANSWER_NONE;
	send_str("GET /stuck HTTP/1.1\r\n\r\n");
	hreq_start(last, 200, NULL, NULL, 0);
	static char chunk[65536];
	memset(chunk, 'y', sizeof(chunk));
	while (hreq_write(last, chunk, sizeof(chunk)))
		spin();
	spin();
	ck_assert_int_eq(n_gone, 0);
	clock_turn_end();
	long long t0 = clock_now_ms();
	while (n_gone == 0 && clock_now_ms() - t0 < 5000) {
		event_base_loop(base, EVLOOP_ONCE);
		clock_turn_end();
	}
	ck_assert_int_eq(n_gone, 1);
	ck_assert_int_ge(clock_now_ms() - t0, 500); /* not before the timeout, give or take */
}
END_TEST

/* Opens a connection to h; returns the client's end. */
static int adopt_one(void)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(httpd_adopt(h, sv[0]), 0);
	return sv[1];
}

START_TEST(pool_trim_frees_what_went_unused)
{
	int fds[3];
	for (int i = 0; i < 3; i++)
		fds[i] = adopt_one();
	close(client);
	client = -1;
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	spin();
	/* Four connections closed, pooled. The pool was empty when they were
	 * made: nothing went unused yet. */
	ck_assert_uint_eq(httpd_trim(h, false), 0);
	/* One comes back in use and closes again: three stayed in the pool the
	 * whole interval, and go. */
	int c = adopt_one();
	close(c);
	spin();
	ck_assert_uint_eq(httpd_trim(h, false), 3);
	/* The fourth was not needed since either. */
	ck_assert_uint_eq(httpd_trim(h, false), 1);
	ck_assert_uint_eq(httpd_trim(h, false), 0);
	/* An empty pool: the next connection is a new one, and serves. */
	client = adopt_one();
	send_str("POST /after HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
	ck_assert_int_eq(n_requests, 1);
	ck_assert_ptr_nonnull(strstr(recv_all(NULL), "HTTP/1.1 200"));
	/* all: whatever is pooled goes at once. */
	c = adopt_one();
	close(c);
	spin();
	ck_assert_uint_eq(httpd_trim(h, true), 1);
	ck_assert_uint_eq(httpd_trim(h, true), 0);
}
END_TEST

/* ---- streamed bodies (uploads) ---- */

/* Everything the owner can read of last's body now, appended to buf at *n. */
static enum hreq_body read_body(char *buf, size_t cap, size_t *n)
{
	enum hreq_body st;
	size_t got;
	do {
		st = hreq_body_read(last, buf + *n, cap - *n, &got);
		*n += got;
	} while (st == HREQ_BODY_MORE && got > 0 && *n < cap);
	return st;
}

/* Writes len bytes of c, spinning the loop while the socket is full; gives
 * up after tries turns without progress. Returns how many went. */
static size_t push(char c, size_t len, int tries)
{
	static char chunk[65536];
	memset(chunk, c, sizeof(chunk));
	size_t sent = 0;
	for (int idle = 0; sent < len && idle < tries;) {
		size_t n = len - sent < sizeof(chunk) ? len - sent : sizeof(chunk);
		ssize_t w = write(client, chunk, n);
		if (w > 0) {
			sent += (size_t)w;
			idle = 0;
		} else {
			idle++;
		}
		spin();
	}
	return sent;
}

START_TEST(streamed_body_arrives_in_pieces_then_keep_alive)
{
	mode = ANSWER_NONE;
	char body[400];
	size_t n = 0;
	/* 300 bytes: over max_body_bytes (100), under max_upload_bytes. */
	send_str("POST /up HTTP/1.1\r\nContent-Length: 300\r\n\r\n");
	ck_assert_int_eq(n_requests, 1); /* the head alone: the owner has it */
	ck_assert(hreq_streamed(last));
	ck_assert_int_eq(hreq_body_size(last), 300);
	size_t whole;
	ck_assert_ptr_null(hreq_body(last, &whole));
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_MORE);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(push('a', 100, 5), 100);
	ck_assert_int_ge(n_body, 1);
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_MORE);
	ck_assert_uint_eq(n, 100);
	int told = n_body;
	ck_assert_uint_eq(push('b', 200, 5), 200);
	ck_assert_int_gt(n_body, told);
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_END);
	ck_assert_uint_eq(n, 300);
	ck_assert(body[0] == 'a' && body[99] == 'a' && body[100] == 'b' && body[299] == 'b');
	hreq_respond(last, 201, NULL, 0, "ok", 2);
	const char *out = recv_all(NULL);
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 201 Created\r\n"));
	ck_assert_ptr_null(strstr(out, "connection: close"));
	mode = ANSWER_ECHO; /* the connection goes on */
	send_str("GET /next HTTP/1.1\r\n\r\n");
	ck_assert_int_eq(n_requests, 2);
	ck_assert_ptr_nonnull(strstr(recv_all(NULL), "x-target: /next"));
}
END_TEST

START_TEST(streamed_chunked_is_held_whole_and_rewinds)
{
	mode = ANSWER_NONE;
	send_str("POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
	ck_assert_int_eq(n_requests, 1);
	ck_assert_int_eq(hreq_body_size(last), -1);
	send_str("4\r\ndefg\r\n0\r\n\r\nGET /after HTTP/1.1\r\n\r\n");
	char body[16];
	size_t n = 0;
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_END);
	ck_assert_uint_eq(n, 7);
	ck_assert_int_eq(memcmp(body, "abcdefg", 7), 0);
	/* Small: held whole, read again from its first byte. */
	ck_assert(hreq_body_rewindable(last));
	ck_assert(hreq_body_rewind(last));
	n = 0;
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_END);
	ck_assert_uint_eq(n, 7);
	ck_assert_int_eq(memcmp(body, "abcdefg", 7), 0);
	ck_assert_int_eq(n_requests, 1); /* the pipelined one waits */
	mode = ANSWER_ECHO;
	hreq_respond(last, 200, NULL, 0, NULL, 0);
	spin();
	ck_assert_int_eq(n_requests, 2);
	ck_assert_str_eq(targets[1], "/after");
}
END_TEST

/* Past HREQ_BODY_CAP unread bytes the connection is not read: the memory an
 * upload pins is bounded whatever the client sends; reading resumes as the
 * owner takes bytes. A body that large is not held after it was read. */
START_TEST(streamed_backpressure_and_no_rewind_once_read)
{
	mode = ANSWER_NONE;
	size_t total = 4 * HREQ_BODY_CAP;
	char head[96];
	snprintf(head, sizeof(head), "POST /up HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", total);
	send_str(head);
	size_t sent = push('z', total, 20);
	ck_assert_uint_lt(sent, total); /* the client is held back */
	static char body[4 * HREQ_BODY_CAP];
	size_t n = 0;
	ck_assert_int_eq(read_body(body, HREQ_BODY_CAP * 2, &n), HREQ_BODY_MORE);
	ck_assert_uint_ge(n, HREQ_BODY_CAP);
	ck_assert_uint_le(n, HREQ_BODY_CAP + 65536);
	ck_assert(!hreq_body_rewindable(last)); /* read, and too large to hold */
	ck_assert(!hreq_body_rewind(last));
	/* The rest flows as the owner reads. */
	for (int i = 0; i < 200 && n < total; i++) {
		sent += push('z', total - sent, 2);
		spin();
		read_body(body, sizeof(body), &n);
	}
	ck_assert_uint_eq(n, total);
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_END);
	hreq_respond(last, 200, NULL, 0, NULL, 0);
}
END_TEST

START_TEST(streamed_large_body_rewinds_until_read)
{
	mode = ANSWER_NONE;
	char head[96];
	snprintf(head, sizeof(head), "POST /up HTTP/1.1\r\nContent-Length: %d\r\n\r\n",
	         2 * HREQ_BODY_CAP);
	send_str(head);
	push('q', HREQ_BODY_CAP + 1000, 20);
	/* Declared larger than the cap, but nothing read yet: still whole. */
	ck_assert(hreq_body_rewindable(last));
	char b[100];
	size_t n = 0;
	hreq_body_read(last, b, sizeof(b), &n);
	ck_assert_uint_eq(n, sizeof(b));
	ck_assert(!hreq_body_rewindable(last));
	hreq_respond(last, 503, NULL, 0, NULL, 0);
}
END_TEST

/* A streamed body's 100 Continue goes when the owner first wants the body:
 * a request refused before that is never sent. */
START_TEST(streamed_continue_when_the_owner_reads)
{
	mode = ANSWER_NONE;
	send_str("POST /up HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
	ck_assert_int_eq(n_requests, 1);
	ck_assert_str_eq(recv_all(NULL), "");
	char body[8];
	size_t n = 0;
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_MORE);
	ck_assert_str_eq(recv_all(NULL), "HTTP/1.1 100 Continue\r\n\r\n");
	send_str("hello");
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_END);
	ck_assert_uint_eq(n, 5);
	hreq_respond(last, 200, NULL, 0, NULL, 0);
	/* Refused before it is wanted: no 100, and the connection closes. */
	send_str("POST /up HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
	recv_all(NULL);
	ck_assert_int_eq(n_requests, 2);
	hreq_error(last, 503, "queue_full", "full", NULL, 0);
	const char *out = recv_all(NULL);
	ck_assert_ptr_null(strstr(out, "100 Continue"));
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 503 "));
	ck_assert_ptr_nonnull(strstr(out, "connection: close\r\n"));
}
END_TEST

/* What goes wrong once the owner has the request is the owner's to answer. */
START_TEST(streamed_bad_chunk_fails_to_the_owner)
{
	mode = ANSWER_NONE;
	send_str("POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
	ck_assert_int_eq(n_requests, 1);
	int told = n_body;
	send_str("zz\r\n");
	ck_assert_int_gt(n_body, told);
	char body[8];
	size_t n = 0;
	ck_assert_int_eq(read_body(body, sizeof(body), &n), HREQ_BODY_FAILED);
	int status;
	const char *code, *msg;
	ck_assert(hreq_body_failure(last, &status, &code, &msg));
	ck_assert_int_eq(status, 400);
	ck_assert_str_eq(code, "bad_request");
	ck_assert(!hreq_body_rewindable(last));
	hreq_error(last, status, code, msg, NULL, 0);
	const char *out = recv_all(NULL);
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 400 "));
	ck_assert_ptr_nonnull(strstr(out, "connection: close\r\n"));
	shutdown(client, SHUT_WR);
	ck_assert(client_sees_eof());
}
END_TEST

START_TEST(streamed_over_max_upload_bytes)
{
	/* Announced: the layer answers before the owner sees it. */
	send_str("POST /up HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n");
	const char *out = recv_all(NULL);
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 413 "));
	ck_assert_ptr_nonnull(strstr(out, "max_upload_bytes"));
	ck_assert_int_eq(n_requests, 0);
	/* Chunked: the owner is told as it grows past. */
	close(client);
	client = adopt_one();
	mode = ANSWER_NONE;
	send_str("POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
	ck_assert_int_eq(n_requests, 1);
	static char body[0x10000];
	int status = 0;
	const char *code = NULL, *msg = NULL;
	for (int i = 0; i < 20 && !hreq_body_failure(last, &status, &code, &msg); i++) {
		send_str("10000\r\n");
		push('c', 0x10000, 20);
		send_str("\r\n");
		for (size_t n = sizeof(body); n == sizeof(body);) {
			n = 0;
			read_body(body, sizeof(body), &n);
		}
	}
	ck_assert(hreq_body_failure(last, &status, &code, &msg));
	ck_assert_int_eq(status, 413);
	ck_assert_ptr_nonnull(strstr(msg, "max_upload_bytes"));
	hreq_error(last, status, code, msg, NULL, 0);
}
END_TEST

/* An answer that ends before the body: connection: close, and the rest of
 * the body is read and dropped while it keeps coming, then the connection
 * closes, so the client that writes before it reads still gets the answer. */
START_TEST(streamed_early_answer_lingers_then_closes)
{
	mode = ANSWER_NONE;
	send_str("POST /up HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
	ck_assert_uint_eq(push('e', 1000, 5), 1000);
	hreq_respond(last, 401, NULL, 0, "no", 2);
	last = NULL;
	ck_assert_uint_eq(push('e', 999000, 50), 999000); /* all of it is taken */
	const char *out = recv_all(NULL);
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 401 Unauthorized\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "connection: close\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "\r\n\r\nno"));
	shutdown(client, SHUT_WR);
	ck_assert(client_sees_eof());
	ck_assert_int_eq(n_requests, 1);
}
END_TEST

/* A client that stops sending its upload for client_timeout_s: the owner
 * is told (408), and answers. */
START_TEST(streamed_stalled_upload_times_out)
{
	struct httpd_conf hc = {.max_header_bytes = 1024,
	                        .max_body_bytes = 100,
	                        .max_upload_bytes = 1 << 20,
	                        .max_connections = 16,
	                        .client_timeout_s = 1};
	httpd_set_conf(h, &hc);
	mode = ANSWER_NONE;
	send_str("POST /up HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
	ck_assert_int_eq(n_requests, 1);
	clock_turn_end();
	long long t0 = clock_now_ms();
	int status = 0;
	const char *code, *msg;
	while (!hreq_body_failure(last, &status, &code, &msg) && clock_now_ms() - t0 < 5000) {
		event_base_loop(base, EVLOOP_ONCE);
		clock_turn_end();
	}
	ck_assert_int_eq(status, 408);
	ck_assert_str_eq(code, "request_timeout");
	ck_assert_int_ge(clock_now_ms() - t0, 500);
	ck_assert_int_eq(n_gone, 0); /* the owner answers */
	hreq_error(last, status, code, msg, NULL, 0);
	ck_assert_ptr_nonnull(strstr(recv_all(NULL), "HTTP/1.1 408 "));
}
END_TEST

/* The hand-over (an upgrade, a blind tunnel): the connection as a
 * bufferevent with the bytes that came behind the head in its input, no
 * longer the layer's; not possible once the answer started. */
START_TEST(take_over_as_a_bufferevent)
{
	mode = ANSWER_NONE;
	send_str("GET /a HTTP/1.1\r\n\r\n");
	ck_assert_ptr_nonnull(last);
	hreq_start(last, 200, NULL, NULL, 0);
	bool gone = true;
	ck_assert_ptr_null(hreq_take_over(last, &gone));
	ck_assert(!gone);
	hreq_end(last, true);
	recv_all(NULL);
	send_str("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\nframes-after-the-head");
	ck_assert_int_eq(n_requests, 2);
	struct bufferevent *bev = hreq_take_over(last, &gone);
	ck_assert_ptr_nonnull(bev);
	ck_assert(!gone);
	ck_assert_ptr_null(bufferevent_get_underlying(bev)); /* in clear: the socket's own */
	struct evbuffer *in = bufferevent_get_input(bev);
	ck_assert_uint_eq(evbuffer_get_length(in), 21);
	ck_assert_int_eq(memcmp(evbuffer_pullup(in, -1), "frames-after-the-head", 21), 0);
	struct httpd_stats st;
	httpd_get_stats(h, &st);
	ck_assert_uint_eq(st.connections, 0);
	bufferevent_write(bev, "101 and on", 10);
	bufferevent_enable(bev, EV_WRITE);
	size_t len;
	const char *out = recv_all(&len);
	ck_assert_uint_eq(len, 10);
	ck_assert_int_eq(memcmp(out, "101 and on", 10), 0);
	ck_assert_int_eq(n_gone, 0);
	bufferevent_free(bev);
	ck_assert(client_sees_eof());
}
END_TEST

static Suite *httpd_suite(void)
{
	Suite *s = suite_create("httpd");
	TCase *t = tcase_create("conn");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, chunked_framing_exact_bytes);
	tcase_add_test(t, http10_stream_ends_with_the_connection);
	tcase_add_test(t, content_length_kept_and_keep_alive);
	tcase_add_test(t, pipelined_one_at_a_time_in_order);
	tcase_add_test(t, backpressure_and_drained);
	tcase_add_test(t, gone_when_the_client_leaves_mid_answer);
	tcase_add_test(t, gone_while_waiting_for_the_owner);
	tcase_add_test(t, client_left_seen_before_the_loop_polls);
	tcase_add_test(t, client_left_not_for_pipelined_bytes);
	tcase_add_test(t, truncated_end_closes);
	tcase_add_test(t, body_over_limit_413_before_the_body);
	tcase_add_test(t, continue_then_body);
	tcase_add_test(t, split_everywhere_parses_the_same);
	tcase_add_test(t, headers_readable_nul_terminated);
	tcase_add_test(t, error_after_start_cuts);
	tcase_add_test(t, head_answer_has_no_body);
	tcase_add_test(t, stuck_write_times_out);
	tcase_add_test(t, pool_trim_frees_what_went_unused);
	tcase_add_test(t, streamed_body_arrives_in_pieces_then_keep_alive);
	tcase_add_test(t, streamed_chunked_is_held_whole_and_rewinds);
	tcase_add_test(t, streamed_backpressure_and_no_rewind_once_read);
	tcase_add_test(t, streamed_large_body_rewinds_until_read);
	tcase_add_test(t, streamed_continue_when_the_owner_reads);
	tcase_add_test(t, streamed_bad_chunk_fails_to_the_owner);
	tcase_add_test(t, streamed_over_max_upload_bytes);
	tcase_add_test(t, streamed_early_answer_lingers_then_closes);
	tcase_add_test(t, streamed_stalled_upload_times_out);
	tcase_add_test(t, take_over_as_a_bufferevent);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("httpd", httpd_suite)
