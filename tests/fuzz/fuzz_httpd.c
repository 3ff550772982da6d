/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: random bytes, split at random points, into pacerd's HTTP/1.1
 * connection layer (parser and state machine) over a socketpair, with an
 * owner that answers in every way the seam allows (error, a whole answer, a
 * chunked stream, a truncated stream, no answer until the client leaves).
 * Bodies of targets under /up are streamed (uploads): the owner answers
 * before reading any, or reads them as they come (rewinding the ones it may)
 * and answers at their end or with their failure.
 *
 * Input: byte 0 = the owner's behaviour seed; then pieces, each a length byte
 * (1..64) followed by that many bytes sent on the client end, with the event
 * loop run after each. The client end is read and discarded as it goes, then
 * closed; the loop runs until the connection is gone. */
#include <event2/event.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "http/httpd.h"
#include "httpd_feed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *base;
static struct httpd *httpd;
static unsigned behaviour;
static struct hreq *held;   /* a request left unanswered until the client leaves */
static struct hreq *upload; /* a streamed body being read */

static void on_drained(void *ctx);

static void on_gone(void *ctx)
{
	(void)ctx;
	if (ctx != NULL)
		upload = NULL;
	else
		held = NULL;
}

/* Reads what the upload has; answers at its end or failure. */
static void on_body(void *ctx)
{
	(void)ctx;
	struct hreq *r = upload;
	if (r == NULL)
		return;
	char buf[512];
	size_t n, total = 0;
	enum hreq_body st;
	while ((st = hreq_body_read(r, buf, sizeof(buf), &n)) == HREQ_BODY_MORE && n > 0)
		total += n;
	if (total > 0 && (behaviour & 1) && hreq_body_rewindable(r) && !hreq_body_rewind(r))
		abort(); /* rewindable says it can */
	int status;
	const char *code, *msg;
	if (st == HREQ_BODY_END) {
		upload = NULL;
		hreq_respond(r, 201, NULL, 0, "up", 2);
	} else if (st == HREQ_BODY_FAILED) {
		if (!hreq_body_failure(r, &status, &code, &msg))
			abort(); /* a failed body says why */
		upload = NULL;
		hreq_error(r, status, code, msg, NULL, 0);
	}
}

static const struct hreq_events upload_events = {
    .drained = on_drained, .gone = on_gone, .body = on_body};

static bool streams(const struct hreq *r, void *arg)
{
	(void)arg;
	return strncmp(hreq_target(r), "/up", 3) == 0;
}

static void on_drained(void *ctx)
{
	(void)ctx;
}

static const struct hreq_events events = {.drained = on_drained, .gone = on_gone};

static void on_request(struct hreq *r, void *arg)
{
	(void)arg;
	size_t blen;
	const char *body = hreq_body(r, &blen);
	struct hhdr h[2] = {{"content-type", 12, "text/plain", 10}, {"x-n", 3, "1", 1}};
	/* Read everything the owner may read. */
	for (size_t i = 0; i < hreq_n_headers(r); i++) {
		struct hhdr f;
		hreq_header_at(r, i, &f);
		if (f.name_len != strlen(f.name) || f.value_len != strlen(f.value))
			abort(); /* the layer promises NUL-terminated fields */
	}
	if (strlen(hreq_target(r)) != hreq_target_len(r))
		abort();
	(void)hreq_header(r, "host");
	(void)hreq_id(r);
	if (hreq_streamed(r)) {
		if (blen != 0 || upload != NULL)
			abort(); /* one request at a time; a streamed body is not whole */
		if (behaviour++ % 3 == 0) {
			hreq_respond(r, 401, h, 1, "early", 5); /* before reading any */
			return;
		}
		upload = r;
		hreq_set_events(r, &upload_events, r);
		on_body(r);
		return;
	}
	hreq_set_events(r, &events, NULL);
	switch (behaviour++ % 6) {
	case 0:
		hreq_error(r, 400, "bad_request", "fuzz \"quoted\"\n", h, 1);
		break;
	case 1:
		hreq_respond(r, 200, h, 2, body, blen);
		break;
	case 2:
		hreq_start(r, 200, "OK", h, 2);
		hreq_write(r, "data: x\n\n", 9);
		hreq_write(r, body ? body : "", blen);
		hreq_end(r, true);
		break;
	case 3:
		hreq_start(r, 502, NULL, h, 1);
		hreq_write(r, "partial", 7);
		hreq_end(r, false);
		break;
	case 4:
		hreq_close_after(r);
		hreq_respond(r, 204, NULL, 0, NULL, 0);
		break;
	default:
		if (held == NULL)
			held = r; /* answered when the next piece arrives, or never */
		else
			hreq_respond(r, 200, NULL, 0, "ok", 2);
		break;
	}
}

static void setup(void)
{
	httpd = feed_httpd_new(&base, on_request);
	httpd_set_streaming(httpd, streams, NULL);
}

/* A held request is answered late when the chunk's last byte is odd. */
static void answer_held(uint8_t last)
{
	if (held != NULL && (last & 1)) {
		struct hreq *r = held;
		held = NULL;
		hreq_respond(r, 200, NULL, 0, "late", 4);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (base == NULL)
		setup();
	if (size < 1)
		return 0;
	behaviour = data[0];
	held = NULL;
	upload = NULL;
	int left_open = feed_connection(base, httpd, data, size, 1, answer_held);
	if (left_open > 0 || held != NULL || upload != NULL)
		abort(); /* a connection whose client left must be closed */
	return 0;
}
