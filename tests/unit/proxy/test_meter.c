/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for meter: an answer's usage read as its body is relayed in
 * pieces of any size, and the stream the client gets when pacerd asked for
 * the usage itself. */
#include <stdlib.h>
#include <string.h>

#include "proxy/meter.h"
#include "unit.h"

struct out {
	char buf[8192];
	size_t len;
	int calls;
};

static void collect(void *ctx, const char *data, size_t len)
{
	struct out *o = ctx;
	ck_assert_uint_le(o->len + len, sizeof(o->buf));
	memcpy(o->buf + o->len, data, len);
	o->len += len;
	o->calls++;
}

static void count(void *ctx, const char *data, size_t len)
{
	(void)data;
	*(size_t *)ctx += len;
}

#define CHAT "/v1/chat/completions"
#define CHUNK(c) "data: {\"id\":\"x\",\"choices\":[" c "]}\n\n"
#define CHUNK_U(c) "data: {\"id\":\"x\",\"choices\":[" c "],\"usage\":null}\n\n"
#define USAGE                                                                                      \
	"data: "                                                                                   \
	"{\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":5,"     \
	"\"total_tokens\":11}}\n\n"
#define DONE "data: [DONE]\n\n"

static const char asked[] =
    CHUNK("{\"delta\":{\"role\":\"assistant\"}}") CHUNK("{\"delta\":{\"content\":\"tok \"}}") DONE;
static const char metered[] = CHUNK_U("{\"delta\":{\"role\":\"assistant\"}}")
    CHUNK_U("{\"delta\":{\"content\":\"tok \"}}") USAGE DONE;
static const char json_answer[] =
    "{\"id\":\"x\",\"choices\":[{\"message\":{\"content\":\"hi\"}}],"
    "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9}}";
static const char stream_request[] =
    "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

/* meter_request after the one scan of the body, as the exchange calls it. */
static void request(struct meter *m, bool ask, const char *path, size_t path_len, const char **body,
                    size_t *len)
{
	struct tokens_cost c;
	tokens_estimate(*body, *len, 0, &c);
	meter_request(m, ask, path, path_len, &c, body, len);
}

/* A meter after meter_init and the request a token-paced lane sends with
 * stream_usage: inject (stream_request, to CHAT); returns the body that goes
 * upstream, *len its bytes. */
static const char *metered_request(struct meter *m, size_t *len)
{
	const char *body = stream_request;
	*len = strlen(body);
	meter_init(m);
	request(m, true, CHAT, strlen(CHAT), &body, len);
	return body;
}

/* Feeds `in` to m in pieces of `step` bytes, then finishes it. */
static bool feed_all(struct meter *m, const char *in, size_t n, size_t step, struct out *o,
                     struct tokens_usage *u)
{
	for (size_t i = 0; i < n; i += step)
		meter_feed(m, in + i, i + step <= n ? step : n - i, collect, o);
	return meter_finish(m, collect, o, u);
}

static const size_t steps[] = {1, 2, 3, 7, 64, 100000};
#define N_STEPS (sizeof(steps) / sizeof(steps[0]))

START_TEST(a_stream_pacerd_asked_the_usage_of)
{
	for (size_t i = 0; i < N_STEPS; i++) {
		struct meter m;
		size_t len;
		const char *body = metered_request(&m, &len);
		ck_assert_ptr_ne(body, stream_request); /* the meter's copy goes upstream */
		ck_assert_ptr_nonnull(strstr(body, "\"include_usage\":true"));
		ck_assert_uint_eq(len, strlen(body));
		meter_answer(&m, "text/event-stream; charset=utf-8");
		struct out o = {.len = 0};
		struct tokens_usage u;
		ck_assert(feed_all(&m, metered, strlen(metered), steps[i], &o, &u));
		/* the client gets the stream it asked for, the lane the usage */
		ck_assert_uint_eq(o.len, strlen(asked));
		ck_assert(memcmp(o.buf, asked, o.len) == 0);
		ck_assert_int_eq(u.input, 6);
		ck_assert_int_eq(u.output, 5);
		ck_assert_int_eq(u.total, 11);
		meter_free(&m);
	}
}
END_TEST

/* The same stream with its lines ended by CRLF and by a bare CR: one framer
 * reads it for both the usage reader and the filter, so a CR at the end of a
 * piece (its LF, if any, in the next) is one line end for both. */
static void replace_lf(const char *in, const char *end, char *out, size_t cap)
{
	size_t k = 0;
	for (const char *p = in; *p != '\0'; p++) {
		const char *e = *p == '\n' ? end : (char[2]){*p, '\0'};
		size_t n = strlen(e);
		ck_assert_uint_lt(k + n, cap);
		memcpy(out + k, e, n);
		k += n;
	}
	out[k] = '\0';
}

START_TEST(one_framer_for_both_readers_whatever_the_line_ends)
{
	static const char *ends[] = {"\r\n", "\r"};
	for (size_t e = 0; e < 2; e++) {
		char in[2048], want[2048];
		replace_lf(metered, ends[e], in, sizeof(in));
		replace_lf(asked, ends[e], want, sizeof(want));
		for (size_t i = 0; i < N_STEPS; i++) {
			struct meter m;
			size_t len;
			(void)metered_request(&m, &len);
			meter_answer(&m, "text/event-stream");
			struct out o = {.len = 0};
			struct tokens_usage u;
			ck_assert_msg(feed_all(&m, in, strlen(in), steps[i], &o, &u),
			              "ends %zu, step %zu: no usage", e, steps[i]);
			ck_assert_uint_eq(o.len, strlen(want));
			ck_assert(memcmp(o.buf, want, o.len) == 0);
			ck_assert_int_eq(u.input, 6);
			ck_assert_int_eq(u.output, 5);
			meter_free(&m);
		}
	}
}
END_TEST

START_TEST(a_stream_that_asked_itself_passes_untouched)
{
	/* learning the cost (not stream_usage: inject), or another API */
	const char *paths[] = {CHAT, "/v1/responses"};
	for (size_t k = 0; k < 2; k++) {
		for (size_t i = 0; i < N_STEPS; i++) {
			struct meter m;
			meter_init(&m);
			const char *body = stream_request;
			size_t len = strlen(body);
			request(&m, k == 1, paths[k], strlen(paths[k]), &body, &len);
			ck_assert_ptr_eq(body, stream_request);
			meter_answer(&m, "Text/Event-Stream");
			struct out o = {.len = 0};
			struct tokens_usage u;
			ck_assert(feed_all(&m, metered, strlen(metered), steps[i], &o, &u));
			ck_assert_uint_eq(o.len, strlen(metered));
			ck_assert(memcmp(o.buf, metered, o.len) == 0);
			ck_assert_int_eq(u.total, 11);
			meter_free(&m);
		}
	}
}
END_TEST

START_TEST(a_json_answer_in_pieces)
{
	for (size_t i = 0; i < N_STEPS; i++) {
		struct meter m;
		meter_init(&m);
		const char *body = "{}";
		size_t len = 2;
		request(&m, true, CHAT, strlen(CHAT), &body, &len);
		meter_answer(&m, "application/json");
		struct out o = {.len = 0};
		struct tokens_usage u;
		ck_assert(feed_all(&m, json_answer, strlen(json_answer), steps[i], &o, &u));
		ck_assert_uint_eq(o.len, strlen(json_answer));
		ck_assert_int_eq(u.input, 7);
		ck_assert_int_eq(u.total, 9);
		meter_free(&m);
	}
}
END_TEST

START_TEST(off_hands_the_bytes_on_and_reads_nothing)
{
	struct meter m;
	meter_init(&m);
	meter_answer(&m, "text/event-stream");
	struct out o = {.len = 0};
	struct tokens_usage u;
	ck_assert(!feed_all(&m, metered, strlen(metered), 5, &o, &u));
	ck_assert(!u.present);
	ck_assert_uint_eq(o.len, strlen(metered));
	ck_assert(memcmp(o.buf, metered, o.len) == 0);
	ck_assert_ptr_null(m.json.value);
	meter_free(&m);
}
END_TEST

START_TEST(each_attempt_is_read_afresh)
{
	struct meter m;
	size_t len;
	(void)metered_request(&m, &len);
	/* the first attempt broke off mid-body (no meter_finish) */
	meter_answer(&m, "application/json");
	struct out o = {.len = 0};
	meter_feed(&m, json_answer, 20, collect, &o);
	/* the second is an error without usage */
	meter_answer(&m, "application/json");
	struct tokens_usage u;
	const char err[] = "{\"error\":{\"message\":\"no\"}}";
	o.len = 0;
	ck_assert(!feed_all(&m, err, strlen(err), 4, &o, &u));
	ck_assert_uint_eq(o.len, strlen(err));
	/* the third streams */
	meter_answer(&m, "text/event-stream");
	o.len = 0;
	ck_assert(feed_all(&m, metered, strlen(metered), 9, &o, &u));
	ck_assert_uint_eq(o.len, strlen(asked));
	ck_assert_int_eq(u.total, 11);
	meter_free(&m);
}
END_TEST

/* A JSON answer is read as it passes, however long (a Responses API answer
 * repeats its instructions and tools): the usage after 300 KiB is read, and
 * nothing of the body is kept. */
START_TEST(a_json_answer_of_any_length_is_read)
{
	size_t pad = 300 * 1024;
	size_t n = pad + 128;
	char *big = malloc(n);
	ck_assert_ptr_nonnull(big);
	int k = snprintf(big, n, "{\"instructions\":\"");
	memset(big + k, 'a', pad);
	snprintf(big + k + pad, n - (size_t)k - pad,
	         "\",\"usage\":{\"input_tokens\":9,\"output_tokens\":2,\"total_tokens\":11}}");
	size_t len = strlen(big);
	const size_t pieces[] = {200 * 1024, 100 * 1024, len - 300 * 1024};
	struct meter m;
	meter_init(&m);
	const char *body = "{}";
	size_t blen = 2;
	request(&m, false, "/v1/responses", strlen("/v1/responses"), &body, &blen);
	meter_answer(&m, "application/json");
	size_t at = 0, relayed = 0;
	for (size_t i = 0; i < 3; i++) {
		meter_feed(&m, big + at, pieces[i], count, &relayed);
		at += pieces[i];
	}
	ck_assert_uint_eq(at, len);
	struct tokens_usage u;
	ck_assert(meter_finish(&m, count, &relayed, &u));
	ck_assert_int_eq(u.total, 11);
	ck_assert_uint_eq(relayed, len);
	ck_assert_uint_le(m.json.value_cap, USAGE_READ_VALUE_MAX);
	meter_free(&m);
	free(big);
}
END_TEST

/* A stream's last event over the filter's cap, or over the framer's own when
 * no filter runs, is read as it passes: a 2 MiB response.completed on the
 * Responses API, a 2 MiB usage chunk of a chat completion whose usage pacerd
 * asked for (the filter gives up on it and passes it on whole, as before). */
static char *long_event(const char *head, const char *tail, size_t pad, size_t *len)
{
	size_t h = strlen(head), t = strlen(tail);
	char *b = malloc(h + pad + t);
	ck_assert_ptr_nonnull(b);
	memcpy(b, head, h);
	memset(b + h, 'x', pad);
	memcpy(b + h + pad, tail, t);
	*len = h + pad + t;
	return b;
}

START_TEST(a_long_last_event_is_read)
{
	for (int chat = 0; chat < 2; chat++) {
		size_t len;
		char *ev =
		    chat ? long_event("data: {\"id\":\"x\",\"choices\":[],\"pad\":\"",
		                      "\",\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":"
		                      "5,\"total_tokens\":11}}\n\ndata: [DONE]\n\n",
		                      2 * 1024 * 1024, &len)
		         : long_event("event: response.completed\ndata: {\"type\":"
		                      "\"response.completed\",\"response\":{\"instructions\":\"",
		                      "\",\"usage\":{\"input_tokens\":6,\"output_tokens\":5,"
		                      "\"total_tokens\":11}}}\n\n",
		                      2 * 1024 * 1024, &len);
		struct meter m;
		size_t blen;
		if (chat) {
			(void)metered_request(&m, &blen);
		} else {
			meter_init(&m);
			const char *body = stream_request;
			blen = strlen(body);
			request(&m, true, "/v1/responses", strlen("/v1/responses"), &body, &blen);
		}
		meter_answer(&m, "text/event-stream");
		size_t relayed = 0;
		for (size_t at = 0; at < len; at += 16384)
			meter_feed(&m, ev + at, len - at < 16384 ? len - at : 16384, count,
			           &relayed);
		struct tokens_usage u;
		ck_assert(meter_finish(&m, count, &relayed, &u));
		ck_assert_int_eq(u.input, 6);
		ck_assert_int_eq(u.total, 11);
		ck_assert_uint_eq(relayed, len);
		meter_free(&m);
		free(ev);
	}
}
END_TEST

START_TEST(finish_without_a_client_drops_what_is_held)
{
	struct meter m;
	size_t len;
	(void)metered_request(&m, &len);
	meter_answer(&m, "text/event-stream");
	struct out o = {.len = 0};
	/* an event without its blank line is held back by the filter */
	const char part[] = "data: {\"choices\":[1]}";
	meter_feed(&m, part, strlen(part), collect, &o);
	ck_assert_uint_eq(o.len, 0);
	struct tokens_usage u;
	ck_assert(!meter_finish(&m, NULL, NULL, &u));
	ck_assert_uint_eq(o.len, 0);
	meter_free(&m);
}
END_TEST

START_TEST(reset_keeps_a_small_buffer_and_turns_off)
{
	struct meter m;
	size_t len;
	(void)metered_request(&m, &len);
	meter_answer(&m, "application/json");
	struct out o = {.len = 0};
	struct tokens_usage u;
	ck_assert(feed_all(&m, json_answer, strlen(json_answer), 8, &o, &u));
	char *kept = m.json.value; /* the usage value's, not the answer's */
	ck_assert_ptr_nonnull(kept);
	ck_assert_uint_le(m.json.value_cap, USAGE_READ_VALUE_MAX);
	meter_reset(&m);
	ck_assert(!m.on && !m.strip && m.body == NULL);
	ck_assert_ptr_eq(m.json.value, kept);
	meter_answer(&m, "application/json");
	o.len = 0;
	ck_assert(!feed_all(&m, json_answer, strlen(json_answer), 8, &o, &u));
	meter_free(&m);
}
END_TEST

/* The upstream refused the rewrite: the client's own bytes go, and a stream
 * that sends its usage unasked (Mistral, OpenRouter) reaches the client
 * whole and is still read. */
START_TEST(unrewrite_sends_the_clients_bytes_and_strips_nothing)
{
	struct meter m;
	size_t len;
	const char *body = metered_request(&m, &len);
	ck_assert(meter_rewrote(&m));
	ck_assert_ptr_ne(body, stream_request);
	ck_assert_ptr_nonnull(strstr(body, "include_usage"));
	meter_unrewrite(&m);
	ck_assert(!meter_rewrote(&m));
	meter_answer(&m, "text/event-stream");
	struct out o = {0};
	struct tokens_usage u;
	ck_assert(feed_all(&m, metered, strlen(metered), 5, &o, &u));
	ck_assert_uint_eq(o.len, strlen(metered)); /* the usage chunk not stripped */
	ck_assert_int_eq(memcmp(o.buf, metered, o.len), 0);
	ck_assert_int_eq(u.total, 11);
	/* not asked: nothing rewritten */
	meter_reset(&m);
	body = stream_request;
	len = strlen(stream_request);
	request(&m, false, CHAT, strlen(CHAT), &body, &len);
	ck_assert(!meter_rewrote(&m));
	ck_assert_ptr_eq(body, stream_request);
	meter_free(&m);
}
END_TEST

static Suite *meter_suite(void)
{
	Suite *s = suite_create("meter");
	TCase *tc = tcase_create("meter");
	tcase_add_test(tc, a_stream_pacerd_asked_the_usage_of);
	tcase_add_test(tc, one_framer_for_both_readers_whatever_the_line_ends);
	tcase_add_test(tc, a_stream_that_asked_itself_passes_untouched);
	tcase_add_test(tc, a_json_answer_in_pieces);
	tcase_add_test(tc, off_hands_the_bytes_on_and_reads_nothing);
	tcase_add_test(tc, each_attempt_is_read_afresh);
	tcase_add_test(tc, a_json_answer_of_any_length_is_read);
	tcase_add_test(tc, a_long_last_event_is_read);
	tcase_add_test(tc, finish_without_a_client_drops_what_is_held);
	tcase_add_test(tc, reset_keeps_a_small_buffer_and_turns_off);
	tcase_add_test(tc, unrewrite_sends_the_clients_bytes_and_strips_nothing);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("meter", meter_suite)
