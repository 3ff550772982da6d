/* SPDX-License-Identifier: Apache-2.0 */
/* wsframe: frames read and written through wslay over evbuffers; the close
 * codes hostile input gets (RFC 6455 §7.4.1). */
#include <event2/buffer.h>
#include <string.h>

#include "http/wsframe.h"
#include "unit.h"

struct got {
	int messages;
	bool text;
	char last[256];
	size_t last_len;
	uint16_t closed;
	bool hold_after_one;
	struct wsf *f;
};

static void on_message(void *ctx, bool text, const uint8_t *data, size_t len)
{
	struct got *g = ctx;
	g->messages++;
	g->text = text;
	g->last_len = len < sizeof(g->last) ? len : sizeof(g->last);
	memcpy(g->last, data, g->last_len);
	if (g->hold_after_one)
		wsf_hold(g->f, true);
}

static void on_closed(void *ctx, uint16_t code, const uint8_t *reason, size_t len)
{
	struct got *g = ctx;
	(void)reason;
	(void)len;
	g->closed = code;
}

static const struct wsf_events events = {.message = on_message, .closed = on_closed};

/* A client's frame: FIN, opcode, masked with a fixed key. */
static void client_frame(struct evbuffer *b, uint8_t opcode, const char *payload, size_t len,
                         bool masked)
{
	static const uint8_t key[4] = {0x37, 0xfa, 0x21, 0x3d};
	uint8_t head[8];
	size_t n = 0;
	head[n++] = (uint8_t)(0x80 | opcode);
	head[n++] = (uint8_t)((masked ? 0x80 : 0) | len); /* len < 126 here */
	evbuffer_add(b, head, n);
	if (masked)
		evbuffer_add(b, key, 4);
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)payload[i] ^ (masked ? key[i % 4] : 0);
		evbuffer_add(b, &c, 1);
	}
}

/* The close code of the close frame at the start of out (server frames are
 * not masked), or 0. */
static unsigned close_code_in(struct evbuffer *out)
{
	size_t n = evbuffer_get_length(out);
	uint8_t *p = evbuffer_pullup(out, -1);
	for (size_t i = 0; i + 4 <= n;) {
		unsigned len = p[i + 1] & 0x7f;
		if ((p[i] & 0x0f) == 0x8 && len >= 2)
			return (unsigned)(p[i + 2] << 8 | p[i + 3]);
		i += 2 + len;
	}
	return 0;
}

START_TEST(masked_text_is_a_message)
{
	struct got g = {0};
	struct wsf *f = wsf_new(WSF_SERVER, 1024, &events, &g);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	client_frame(in, 0x1, "hello", 5, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 1);
	ck_assert(g.text);
	ck_assert_int_eq(g.last_len, 5);
	ck_assert(memcmp(g.last, "hello", 5) == 0);
	ck_assert_int_eq(evbuffer_get_length(in), 0);
	ck_assert(wsf_reading(f));
	/* Split anywhere: the same message once the last byte arrives. */
	struct evbuffer *whole = evbuffer_new();
	client_frame(whole, 0x2, "\x01\x02\x03", 3, true);
	size_t len = evbuffer_get_length(whole);
	for (size_t i = 0; i < len; i++) {
		evbuffer_remove_buffer(whole, in, 1);
		ck_assert_int_eq(wsf_recv(f, in), 0);
		ck_assert_int_eq(g.messages, i + 1 < len ? 1 : 2);
	}
	ck_assert(!g.text);
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_int_eq(evbuffer_get_length(out), 0);
	evbuffer_free(whole);
	evbuffer_free(in);
	evbuffer_free(out);
	wsf_free(f);
}
END_TEST

START_TEST(unmasked_client_frame_is_1002)
{
	struct got g = {0};
	struct wsf *f = wsf_new(WSF_SERVER, 1024, &events, &g);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	client_frame(in, 0x1, "hello", 5, false);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 0);
	ck_assert(!wsf_reading(f));
	ck_assert(wsf_close_sent(f) || !wsf_reading(f));
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_int_eq(wsf_close_code(f), 1002);
	ck_assert(wsf_failed(f));
	ck_assert_uint_eq(close_code_in(out), 1002);
	ck_assert(wsf_finished(f));
	evbuffer_free(in);
	evbuffer_free(out);
	wsf_free(f);
}
END_TEST

START_TEST(oversized_message_is_1009)
{
	struct got g = {0};
	struct wsf *f = wsf_new(WSF_SERVER, 10, &events, &g);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	client_frame(in, 0x1, "0123456789", 10, true); /* at the cap: accepted */
	client_frame(in, 0x1, "0123456789a", 11, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 1);
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_int_eq(wsf_close_code(f), 1009);
	ck_assert_uint_eq(close_code_in(out), 1009);
	evbuffer_free(in);
	evbuffer_free(out);
	wsf_free(f);
}
END_TEST

START_TEST(bad_utf8_and_bad_opcode)
{
	struct got g = {0};
	struct wsf *f = wsf_new(WSF_SERVER, 1024, &events, &g);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	client_frame(in, 0x1, "\xc3\x28", 2, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 0);
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_int_eq(wsf_close_code(f), 1007);
	wsf_free(f);
	g = (struct got){0};
	f = wsf_new(WSF_SERVER, 1024, &events, &g);
	evbuffer_drain(in, evbuffer_get_length(in));
	client_frame(in, 0x3, "x", 1, true); /* a reserved opcode */
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_int_eq(wsf_close_code(f), 1002);
	wsf_free(f);
	/* a continuation with nothing to continue */
	g = (struct got){0};
	f = wsf_new(WSF_SERVER, 1024, &events, &g);
	evbuffer_drain(in, evbuffer_get_length(in));
	client_frame(in, 0x0, "x", 1, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_int_eq(wsf_close_code(f), 1002);
	evbuffer_free(in);
	evbuffer_free(out);
	wsf_free(f);
}
END_TEST

START_TEST(close_is_echoed_and_ping_answered)
{
	struct got g = {0};
	struct wsf *f = wsf_new(WSF_SERVER, 1024, &events, &g);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	client_frame(in, 0x9, "p", 1, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(wsf_send(f, out), 0);
	uint8_t *p = evbuffer_pullup(out, -1);
	ck_assert_int_eq(evbuffer_get_length(out), 3);
	ck_assert_int_eq(p[0], 0x8a); /* pong */
	ck_assert_int_eq(p[2], 'p');
	evbuffer_drain(out, 3);
	client_frame(in, 0x8, "\x03\xe8", 2, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_uint_eq(g.closed, 1000);
	ck_assert(!wsf_failed(f));
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_uint_eq(close_code_in(out), 1000);
	ck_assert(wsf_finished(f));
	ck_assert_int_eq(g.messages, 0);
	evbuffer_free(in);
	evbuffer_free(out);
	wsf_free(f);
}
END_TEST

START_TEST(client_role_masks_and_reads_server_frames)
{
	struct got gs = {0}, gc = {0};
	struct wsf *srv = wsf_new(WSF_SERVER, 1024, &events, &gs);
	struct wsf *cli = wsf_new(WSF_CLIENT, 1024, &events, &gc);
	struct evbuffer *c2s = evbuffer_new(), *s2c = evbuffer_new();
	ck_assert_int_eq(wsf_queue(cli, true, "{\"type\":\"x\"}", 12), 0);
	ck_assert_int_eq(wsf_send(cli, c2s), 0);
	uint8_t *p = evbuffer_pullup(c2s, 2);
	ck_assert(p[1] & 0x80); /* masked */
	ck_assert_int_eq(wsf_recv(srv, c2s), 0);
	ck_assert_int_eq(gs.messages, 1);
	ck_assert(memcmp(gs.last, "{\"type\":\"x\"}", 12) == 0);
	ck_assert_int_eq(wsf_queue(srv, true, "ok", 2), 0);
	ck_assert_uint_eq(wsf_queued_bytes(srv), 2);
	ck_assert_int_eq(wsf_send(srv, s2c), 0);
	ck_assert_uint_eq(wsf_queued_bytes(srv), 0);
	ck_assert_int_eq(wsf_recv(cli, s2c), 0);
	ck_assert_int_eq(gc.messages, 1);
	/* a masked frame from a server is a protocol error for a client */
	client_frame(s2c, 0x1, "m", 1, true);
	ck_assert_int_eq(wsf_recv(cli, s2c), 0);
	ck_assert_int_eq(wsf_send(cli, c2s), 0);
	ck_assert_int_eq(wsf_close_code(cli), 1002);
	evbuffer_free(c2s);
	evbuffer_free(s2c);
	wsf_free(srv);
	wsf_free(cli);
}
END_TEST

START_TEST(hold_stops_after_the_message)
{
	struct got g = {.hold_after_one = true};
	struct wsf *f = wsf_new(WSF_SERVER, 1024, &events, &g);
	g.f = f;
	struct evbuffer *in = evbuffer_new();
	client_frame(in, 0x1, "one", 3, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 1);
	/* held: what arrives now stays in the caller's buffer */
	client_frame(in, 0x1, "two", 3, true);
	size_t second = evbuffer_get_length(in);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 1);
	ck_assert_uint_eq(evbuffer_get_length(in), second);
	wsf_hold(f, false);
	g.hold_after_one = false;
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 2);
	ck_assert(memcmp(g.last, "two", 3) == 0);
	evbuffer_free(in);
	wsf_free(f);
}
END_TEST

START_TEST(own_close_goes_after_queued_messages)
{
	struct got g = {0};
	struct wsf *srv = wsf_new(WSF_SERVER, 1024, &events, NULL);
	struct wsf *cli = wsf_new(WSF_CLIENT, 1024, &events, &g);
	struct evbuffer *out = evbuffer_new();
	ck_assert_int_eq(wsf_queue(srv, true, "last words", 10), 0);
	ck_assert_int_eq(wsf_close(srv, 1000, "bye"), 0);
	ck_assert_int_eq(wsf_send(srv, out), 0);
	ck_assert_int_eq(wsf_recv(cli, out), 0);
	ck_assert_int_eq(g.messages, 1);
	ck_assert(memcmp(g.last, "last words", 10) == 0);
	ck_assert_uint_eq(g.closed, 1000);
	evbuffer_free(out);
	wsf_free(srv);
	wsf_free(cli);
}
END_TEST

START_TEST(own_close_stops_reading)
{
	struct got g = {0};
	struct wsf *f = wsf_new(WSF_SERVER, 1024, &events, &g);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	ck_assert_int_eq(wsf_close(f, 1001, "going away"), 0);
	ck_assert(wsf_close_sent(f));
	ck_assert_uint_eq(wsf_close_code(f), 1001);
	ck_assert_int_eq(wsf_queue(f, true, "late", 4), -1);
	client_frame(in, 0x1, "hi", 2, true);
	ck_assert_int_eq(wsf_recv(f, in), 0);
	ck_assert_int_eq(g.messages, 0);
	ck_assert_int_eq(wsf_send(f, out), 0);
	ck_assert_uint_eq(close_code_in(out), 1001);
	evbuffer_free(in);
	evbuffer_free(out);
	wsf_free(f);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("wsframe");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, masked_text_is_a_message);
	tcase_add_test(tc, unmasked_client_frame_is_1002);
	tcase_add_test(tc, oversized_message_is_1009);
	tcase_add_test(tc, bad_utf8_and_bad_opcode);
	tcase_add_test(tc, close_is_echoed_and_ping_answered);
	tcase_add_test(tc, client_role_masks_and_reads_server_frames);
	tcase_add_test(tc, hold_stops_after_the_message);
	tcase_add_test(tc, own_close_stops_reading);
	tcase_add_test(tc, own_close_goes_after_queued_messages);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("wsframe", suite)
