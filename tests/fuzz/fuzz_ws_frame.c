/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: the frame path of a WebSocket (http/wsframe.c over wslay, and
 * provider/ws_event.c on every message). The input is a client's bytes, cut
 * into pieces at points its first byte chooses, fed to pacerd's server end
 * (4 KiB message cap, held now and then as backpressure does); every whole
 * message is read as a client's and a provider's event and echoed back.
 * Invariants: no message is over the cap; a close code pacerd sends is one
 * RFC 6455 lets an endpoint send; and what pacerd's end writes is read by a
 * client end without a protocol error, message for message. */
#include <event2/buffer.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/wsframe.h"
#include "provider/ws_event.h"

#define CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct side {
	struct wsf *f, *peer; /* peer: where a message is echoed (NULL: not) */
	size_t messages, bytes;
	bool hold_next;
	bool closed_with_reason; /* the peer's close frame had a reason */
};

static void on_message(void *ctx, bool text, const uint8_t *msg, size_t len)
{
	struct side *s = ctx;
	if (len > CAP)
		abort();
	s->messages++;
	s->bytes += len;
	if (text) {
		struct ws_event e;
		ws_event_read((const char *)msg, len, true, &e);
		ws_event_read((const char *)msg, len, false, &e);
		if (e.kind == WSE_TURN_END && e.usage.present && e.usage.input < 0)
			abort();
	}
	if (s->peer != NULL && wsf_queue(s->peer, text, msg, len) != 0 && wsf_reading(s->peer))
		abort(); /* a message may be queued while no close was */
	if (s->hold_next)
		wsf_hold(s->f, true);
}

static void on_closed(void *ctx, uint16_t code, const uint8_t *reason, size_t len)
{
	struct side *s = ctx;
	(void)reason;
	if (code < 1000 || len > 123)
		abort();
	if (len > 0)
		s->closed_with_reason = true;
}

static const struct wsf_events events = {.message = on_message, .closed = on_closed};

static bool sendable(uint16_t code)
{
	return code == 0 || (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
	       (code >= 3000 && code <= 4999);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned cut = data[0] | 1;
	data++;
	size--;
	struct side srv = {0}, cli = {0};
	srv.f = wsf_new(WSF_SERVER, CAP, &events, &srv);
	cli.f = wsf_new(WSF_CLIENT, CAP, &events, &cli);
	srv.peer = srv.f; /* echo */
	srv.hold_next = (cut & 2) != 0;
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	if (srv.f == NULL || cli.f == NULL || in == NULL || out == NULL)
		abort();
	size_t off = 0;
	while (off < size) {
		size_t n = size - off < cut ? size - off : cut;
		evbuffer_add(in, data + off, n);
		off += n;
		if (wsf_recv(srv.f, in) != 0)
			break;
		wsf_hold(srv.f, false);
		if (wsf_send(srv.f, out) != 0)
			abort();
		/* the code of the close (1005: the peer's named none) */
		if (!sendable(wsf_close_code(srv.f)) && wsf_close_code(srv.f) != WSF_NO_STATUS)
			abort();
	}
	/* the rest that waited behind a hold */
	wsf_hold(srv.f, false);
	/* cppcheck-suppress redundantAssignment ; on_message reads it through ctx */
	srv.hold_next = false;
	wsf_recv(srv.f, in);
	wsf_send(srv.f, out);
	/* the peer's close or a protocol error stopped the reading */
	bool stopped = !wsf_reading(srv.f);
	/* pacerd's own close, then what its end wrote must read cleanly */
	wsf_close(srv.f, WSF_GOING_AWAY, "fuzz");
	wsf_send(srv.f, out);
	size_t echoed = srv.messages;
	if (wsf_recv(cli.f, out) != 0)
		abort();
	struct evbuffer *back = evbuffer_new();
	wsf_send(cli.f, back); /* learns the code of a close the client end queued */
	evbuffer_free(back);
	/* wslay 1.1.1 echoes the peer's close reason as it came, and checks its
	 * UTF-8 from the third byte of each read (docs/decisions.md): an echoed
	 * reason the client end refuses (1007) is the peer's own bytes */
	bool reason_echoed = srv.closed_with_reason && wsf_close_code(cli.f) == WSF_INVALID_DATA;
	/* a close frame without a code reads as 1005 */
	if ((wsf_failed(cli.f) && !reason_echoed) ||
	    (!sendable(wsf_close_code(cli.f)) && wsf_close_code(cli.f) != WSF_NO_STATUS))
		abort();
	/* wslay sends the close it answers with (the peer's echoed, or a
	 * protocol error's) ahead of the echoes queued in the same read: those
	 * may be lost; else every one arrives, before pacerd's own close */
	if (cli.messages > echoed ||
	    (!stopped && (cli.messages != echoed || cli.bytes != srv.bytes)))
		abort();
	/* also the type scan alone, on the raw input */
	char type[WS_EVENT_TYPE_MAX];
	if (ws_event_type((const char *)data, size, type, sizeof(type)) &&
	    strlen(type) >= sizeof(type))
		abort();
	evbuffer_free(in);
	evbuffer_free(out);
	wsf_free(srv.f);
	wsf_free(cli.f);
	return 0;
}
