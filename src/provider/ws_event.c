/* SPDX-License-Identifier: Apache-2.0 */
/* ws_event — what a WebSocket message says for pacing. See ws_event.h. */
#include "provider/ws_event.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "provider/error_body.h"
#include "provider/usage_read.h"

/* The error codes (and types) of a refusal for a rate limit inside a socket:
 * OpenAI's (Responses WebSocket mode, Realtime) and Anthropic's. Other
 * capacity codes are error_body's facts. */
static const char *const rate_codes[] = {"rate_limit_exceeded", "rate_limit_error", "rate_limited",
                                         "too_many_requests"};

bool ws_event_type(const char *msg, size_t len, char *type, size_t cap)
{
	size_t i = 0;
	while (i < len && (msg[i] == ' ' || msg[i] == '\t' || msg[i] == '\r' || msg[i] == '\n'))
		i++;
	if (i >= len || msg[i] != '{')
		return false;
	unsigned depth = 0;
	bool expect_key = false; /* at depth 1, the next string is a member name */
	bool want_value = false; /* the member just read is "type": its value follows */
	for (; i < len; i++) {
		char c = msg[i];
		if (c == '"') {
			size_t start = ++i;
			bool plain = true;
			while (i < len && msg[i] != '"') {
				if (msg[i] == '\\') {
					plain = false;
					i++;
				}
				i++;
			}
			if (i >= len)
				return false;
			size_t n = i - start;
			if (depth == 1 && want_value) {
				if (!plain || n >= cap)
					return false;
				memcpy(type, msg + start, n);
				type[n] = '\0';
				return true;
			}
			if (depth == 1 && expect_key) {
				want_value = plain && n == 4 && memcmp(msg + start, "type", 4) == 0;
				expect_key = false;
			}
			continue;
		}
		switch (c) {
		case '{':
		case '[':
			if (depth == 1 && want_value)
				return false; /* "type" is not a string */
			depth++;
			if (depth == 1)
				expect_key = true;
			break;
		case '}':
		case ']':
			if (depth == 0)
				return false;
			depth--;
			if (depth == 0)
				return false; /* the object ended without one */
			break;
		case ',':
			if (depth == 1) {
				if (want_value)
					return false;
				expect_key = true;
			}
			break;
		case ':':
		case ' ':
		case '\t':
		case '\r':
		case '\n':
			break;
		default:
			if (depth == 1 && want_value)
				return false; /* a number, true, null */
			break;
		}
	}
	return false;
}

static bool type_is(const struct ws_event *e, const char *t)
{
	return strcmp(e->type, t) == 0;
}

static void copy_string(char *dst, size_t cap, const char *src)
{
	size_t n = src != NULL ? strlen(src) : 0;
	if (n >= cap)
		n = cap - 1;
	if (n > 0)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

/* rate_limits.updated: [{"name":"requests"|"tokens", "limit", "remaining",
 * "reset_seconds"}, ...] (OpenAI Realtime). */
static void read_rate_limits(json_t *root, struct rlh_result *r)
{
	json_t *arr = json_object_get(root, "rate_limits");
	size_t i;
	json_t *it;
	json_array_foreach(arr, i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		if (name == NULL)
			continue;
		struct rlh_budget *b;
		if (strcmp(name, "requests") == 0)
			b = &r->budget[RLH_REQUESTS];
		else if (strcmp(name, "tokens") == 0)
			b = &r->budget[RLH_TOKENS];
		else
			continue;
		json_t *v = json_object_get(it, "limit");
		if (json_is_integer(v) && json_integer_value(v) >= 0) {
			b->has_limit = true;
			b->limit = json_integer_value(v);
		}
		v = json_object_get(it, "remaining");
		if (json_is_integer(v) && json_integer_value(v) >= 0) {
			b->has_remaining = true;
			b->remaining = json_integer_value(v);
		}
		v = json_object_get(it, "reset_seconds");
		if (json_is_number(v)) {
			double s = json_number_value(v);
			if (s >= 0 && s < 1e9) {
				b->has_reset = true;
				b->reset_ms = (int64_t)ceil(s * 1000.0);
			}
		}
	}
}

/* An error event: {"type":"error","error":{"type","code","message"}} (also a
 * top-level "status": 429, as the Responses API's WebSocket mode sends it). */
static void read_error(json_t *root, const char *msg, size_t len, struct ws_event *e)
{
	json_t *err = json_object_get(root, "error");
	const char *code = json_string_value(json_object_get(err, "code"));
	const char *type = json_string_value(json_object_get(err, "type"));
	copy_string(e->code, sizeof(e->code), code != NULL ? code : type);
	bool rate = json_integer_value(json_object_get(root, "status")) == 429;
	for (size_t i = 0; i < sizeof(rate_codes) / sizeof(rate_codes[0]); i++)
		rate = rate || (code != NULL && strcmp(code, rate_codes[i]) == 0) ||
		       (type != NULL && strcmp(type, rate_codes[i]) == 0);
	struct error_body eb;
	error_body_parse(msg, len, &eb);
	if (eb.facts.capacity != NULL && eb.facts.overload == NULL && eb.facts.tier == NULL)
		rate = true;
	e->kind = rate ? WSE_REFUSED : WSE_ERROR;
	if (rate && eb.hints.has_delay) {
		e->has_hint = true;
		e->hint_ms = eb.hints.delay_ms;
	}
}

void ws_event_read(const char *msg, size_t len, bool from_client, struct ws_event *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = WSE_OTHER;
	if (!ws_event_type(msg, len, out->type, sizeof(out->type)))
		return;
	if (from_client) {
		if (type_is(out, "response.create")) {
			out->kind = WSE_TURN;
		} else if (type_is(out, "session.update")) {
			out->kind = WSE_SESSION;
			json_t *root =
			    len <= WS_EVENT_PARSE_CAP ? json_loadb(msg, len, 0, NULL) : NULL;
			copy_string(out->model, sizeof(out->model),
			            json_string_value(json_object_get(
			                json_object_get(root, "session"), "model")));
			json_decref(root);
		}
		return;
	}
	if (type_is(out, "response.completed") || type_is(out, "response.done") ||
	    type_is(out, "response.failed") || type_is(out, "response.incomplete")) {
		out->kind = WSE_TURN_END;
		usage_read_json(msg, len, &out->usage);
		out->completed = type_is(out, "response.completed");
		if (type_is(out, "response.done")) {
			/* Realtime: the status is in response.status (a long one is
			 * not parsed: it ended, and its usage says what it cost). */
			json_t *root =
			    len <= WS_EVENT_PARSE_CAP ? json_loadb(msg, len, 0, NULL) : NULL;
			const char *st = json_string_value(
			    json_object_get(json_object_get(root, "response"), "status"));
			out->completed =
			    root == NULL || (st != NULL && strcmp(st, "completed") == 0);
			json_decref(root);
		}
		return;
	}
	if (!type_is(out, "rate_limits.updated") && !type_is(out, "error"))
		return;
	if (len > WS_EVENT_PARSE_CAP)
		return;
	json_t *root = json_loadb(msg, len, 0, NULL);
	if (!json_is_object(root)) {
		json_decref(root);
		return;
	}
	if (type_is(out, "rate_limits.updated")) {
		out->kind = WSE_RATE_LIMITS;
		read_rate_limits(root, &out->limits);
	} else {
		read_error(root, msg, len, out);
	}
	json_decref(root);
}
