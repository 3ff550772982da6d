/* SPDX-License-Identifier: Apache-2.0 */
/* ws_event: the messages of the Responses API's WebSocket mode and of
 * Realtime, as pacing reads them. */
#include <stdlib.h>
#include <string.h>

#include "provider/ws_event.h"
#include "unit.h"

static void read_str(const char *m, bool client, struct ws_event *e)
{
	ws_event_read(m, strlen(m), client, e);
}

START_TEST(top_level_type_only)
{
	char t[WS_EVENT_TYPE_MAX];
	const char *m = "{\"response\":{\"type\":\"inner\"},\"type\":\"response.completed\"}";
	ck_assert(ws_event_type(m, strlen(m), t, sizeof(t)));
	ck_assert_str_eq(t, "response.completed");
	m = "{\"a\":\"type\",\"b\":[\"type\",\"x\"],\"type\" : \"error\"}";
	ck_assert(ws_event_type(m, strlen(m), t, sizeof(t)));
	ck_assert_str_eq(t, "error");
	m = "{\"a\":\"\\\"type\\\"\",\"type\":\"x\"}";
	ck_assert(ws_event_type(m, strlen(m), t, sizeof(t)));
	ck_assert_str_eq(t, "x");
	const char *no[] = {"{\"type\":1}",          "{\"type\":{\"a\":1}}",    "[\"type\",\"x\"]",
	                    "{\"typ\":\"x\"}",       "{\"type\":\"x",           "",
	                    "{\"type\":\"a\\\"b\"}", "{\"t\":{\"type\":\"x\"}}"};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		ck_assert_msg(!ws_event_type(no[i], strlen(no[i]), t, sizeof(t)), "%s", no[i]);
	ck_assert(!ws_event_type("{\"type\":\"abcdef\"}", 17, t, 4)); /* does not fit */
}
END_TEST

START_TEST(client_turns_and_sessions)
{
	struct ws_event e;
	read_str("{\"type\":\"response.create\",\"model\":\"gpt-5\",\"input\":\"hi\"}", true, &e);
	ck_assert_int_eq(e.kind, WSE_TURN);
	read_str("{\"type\":\"session.update\",\"session\":{\"model\":\"gpt-realtime\"}}", true,
	         &e);
	ck_assert_int_eq(e.kind, WSE_SESSION);
	ck_assert_str_eq(e.model, "gpt-realtime");
	read_str("{\"type\":\"input_audio_buffer.append\",\"audio\":\"AAAA\"}", true, &e);
	ck_assert_int_eq(e.kind, WSE_OTHER);
	/* a server's type from the client is nothing */
	read_str("{\"type\":\"response.completed\"}", true, &e);
	ck_assert_int_eq(e.kind, WSE_OTHER);
	read_str("not json", true, &e);
	ck_assert_int_eq(e.kind, WSE_OTHER);
}
END_TEST

START_TEST(turn_ends_with_usage)
{
	struct ws_event e;
	read_str(
	    "{\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":\"r\","
	    "\"status\":\"completed\",\"usage\":{\"input_tokens\":120,\"output_tokens\":30,"
	    "\"total_tokens\":150}}}",
	    false, &e);
	ck_assert_int_eq(e.kind, WSE_TURN_END);
	ck_assert(e.completed);
	ck_assert(e.usage.present);
	ck_assert_int_eq(e.usage.input, 120);
	ck_assert_int_eq(e.usage.output, 30);
	/* Realtime's response.done: completed or not by response.status */
	read_str("{\"type\":\"response.done\",\"response\":{\"status\":\"completed\",\"output\":[],"
	         "\"usage\":{\"total_tokens\":50,\"input_tokens\":40,\"output_tokens\":10}}}",
	         false, &e);
	ck_assert_int_eq(e.kind, WSE_TURN_END);
	ck_assert(e.completed);
	ck_assert_int_eq(e.usage.total, 50);
	read_str("{\"type\":\"response.done\",\"response\":{\"status\":\"failed\",\"output\":[{"
	         "\"status\":\"completed\"}]}}",
	         false, &e);
	ck_assert_int_eq(e.kind, WSE_TURN_END);
	ck_assert(!e.completed);
	ck_assert(!e.usage.present);
	read_str("{\"type\":\"response.failed\",\"response\":{}}", false, &e);
	ck_assert_int_eq(e.kind, WSE_TURN_END);
	ck_assert(!e.completed);
}
END_TEST

START_TEST(long_completed_keeps_its_usage)
{
	size_t pad = 300 * 1024;
	const char *head = "{\"type\":\"response.completed\",\"response\":{\"instructions\":\"";
	const char *tail = "\",\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}}";
	size_t len = strlen(head) + pad + strlen(tail);
	char *m = malloc(len);
	memcpy(m, head, strlen(head));
	memset(m + strlen(head), 'x', pad);
	memcpy(m + strlen(head) + pad, tail, strlen(tail));
	struct ws_event e;
	ws_event_read(m, len, false, &e);
	ck_assert_int_eq(e.kind, WSE_TURN_END);
	ck_assert(e.completed);
	ck_assert_int_eq(e.usage.input, 7);
	ck_assert_int_eq(e.usage.output, 3);
	free(m);
}
END_TEST

START_TEST(rate_limits_updated)
{
	struct ws_event e;
	read_str("{\"type\":\"rate_limits.updated\",\"event_id\":\"e1\",\"rate_limits\":["
	         "{\"name\":\"requests\",\"limit\":1000,\"remaining\":999,\"reset_seconds\":0.06},"
	         "{\"name\":\"tokens\",\"limit\":50000,\"remaining\":49000,\"reset_seconds\":1.2},"
	         "{\"name\":\"other\",\"limit\":1}]}",
	         false, &e);
	ck_assert_int_eq(e.kind, WSE_RATE_LIMITS);
	const struct rlh_budget *r = &e.limits.budget[RLH_REQUESTS];
	ck_assert(r->has_limit && r->has_remaining && r->has_reset);
	ck_assert_int_eq(r->limit, 1000);
	ck_assert_int_eq(r->remaining, 999);
	ck_assert_int_eq(r->reset_ms, 60);
	const struct rlh_budget *t = &e.limits.budget[RLH_TOKENS];
	ck_assert_int_eq(t->remaining, 49000);
	ck_assert_int_eq(t->reset_ms, 1200);
	ck_assert(!e.limits.budget[RLH_INPUT_TOKENS].has_limit);
}
END_TEST

START_TEST(errors_told_apart)
{
	struct ws_event e;
	read_str("{\"type\":\"error\",\"error\":{\"type\":\"requests\",\"code\":"
	         "\"rate_limit_exceeded\",\"message\":\"Rate limit reached for requests. Please "
	         "try again in 1.5s.\"}}",
	         false, &e);
	ck_assert_int_eq(e.kind, WSE_REFUSED);
	ck_assert_str_eq(e.code, "rate_limit_exceeded");
	ck_assert(e.has_hint);
	ck_assert_int_eq(e.hint_ms, 1500);
	read_str("{\"type\":\"error\",\"status\":429,\"error\":{\"message\":\"slow down\"}}", false,
	         &e);
	ck_assert_int_eq(e.kind, WSE_REFUSED);
	ck_assert(!e.has_hint);
	read_str("{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"code\":"
	         "\"invalid_value\",\"message\":\"bad\"}}",
	         false, &e);
	ck_assert_int_eq(e.kind, WSE_ERROR);
	ck_assert_str_eq(e.code, "invalid_value");
	read_str("{\"type\":\"response.output_text.delta\",\"delta\":\"tok \"}", false, &e);
	ck_assert_int_eq(e.kind, WSE_OTHER);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ws_event");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, top_level_type_only);
	tcase_add_test(tc, client_turns_and_sessions);
	tcase_add_test(tc, turn_ends_with_usage);
	tcase_add_test(tc, long_completed_keeps_its_usage);
	tcase_add_test(tc, rate_limits_updated);
	tcase_add_test(tc, errors_told_apart);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("ws_event", suite)
