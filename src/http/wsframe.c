/* SPDX-License-Identifier: Apache-2.0 */
/* wsframe — one end of a WebSocket over evbuffers. See wsframe.h. */
#include "http/wsframe.h"

#include <errno.h>
#include <event2/buffer.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>

struct wsf {
	wslay_event_context_ptr ctx;
	const struct wsf_events *ev;
	void *owner;
	struct evbuffer *in, *out; /* set for the length of wsf_recv / wsf_send */
	bool hold;
	bool failed;      /* the peer's bytes broke the protocol (wslay queued a close) */
	uint16_t code;    /* the close code queued; 0: none */
	bool got_close;   /* the peer's close frame arrived */
	bool close_frame; /* it was a close frame, not an error (wslay queued its echo) */
	/* Our close waits until the messages queued before it are written:
	 * wslay sends control frames ahead of data. */
	bool close_pending;
	uint16_t close_code;
	char close_reason[124];
	size_t close_reason_len;
};

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	struct wsf *f = user;
	(void)flags;
	size_t have = f->in != NULL ? evbuffer_get_length(f->in) : 0;
	if (f->hold || have == 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	int got = evbuffer_remove(f->in, buf, len < have ? len : have);
	if (got <= 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	return got;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
	struct wsf *f = user;
	(void)flags;
	if (f->out == NULL) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (evbuffer_add(f->out, data, len) != 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return (ssize_t)len;
}

/* The masking key of a client's frame (RFC 6455 §5.3: unpredictable). */
static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	(void)user;
	if (RAND_bytes(buf, (int)len) != 1) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return 0;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                   void *user)
{
	struct wsf *f = user;
	(void)ctx;
	switch (a->opcode) {
	case WSLAY_TEXT_FRAME:
	case WSLAY_BINARY_FRAME:
		if (f->ev->message != NULL)
			f->ev->message(f->owner, a->opcode == WSLAY_TEXT_FRAME, a->msg,
			               a->msg_length);
		break;
	case WSLAY_CONNECTION_CLOSE:
		f->got_close = true;
		f->close_frame = true;
		if (f->code == 0)
			f->code = a->status_code ? a->status_code : WSF_NO_STATUS;
		if (f->ev->closed != NULL) {
			size_t rl = a->msg_length >= 2 ? a->msg_length - 2 : 0;
			f->ev->closed(f->owner, a->status_code ? a->status_code : WSF_NO_STATUS,
			              rl ? a->msg + 2 : NULL, rl);
		}
		break;
	default: /* ping (answered by wslay) and pong */
		break;
	}
}

struct wsf *wsf_new(enum wsf_role role, size_t max_msg, const struct wsf_events *ev, void *ctx)
{
	static const struct wslay_event_callbacks cbs = {
	    .recv_callback = recv_cb,
	    .send_callback = send_cb,
	    .genmask_callback = genmask_cb,
	    .on_msg_recv_callback = on_msg,
	};
	struct wsf *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return NULL;
	f->ev = ev;
	f->owner = ctx;
	int rv = role == WSF_SERVER ? wslay_event_context_server_init(&f->ctx, &cbs, f)
	                            : wslay_event_context_client_init(&f->ctx, &cbs, f);
	if (rv != 0) {
		free(f);
		return NULL;
	}
	wslay_event_config_set_max_recv_msg_length(f->ctx, max_msg);
	return f;
}

void wsf_free(struct wsf *f)
{
	if (f == NULL)
		return;
	wslay_event_context_free(f->ctx);
	free(f);
}

int wsf_recv(struct wsf *f, struct evbuffer *in)
{
	if (!wslay_event_get_read_enabled(f->ctx))
		return 0;
	f->in = in;
	int rv = wslay_event_recv(f->ctx);
	f->in = NULL;
	/* wslay closed reading with a close frame of its own: a protocol
	 * error, a bad UTF-8 text or a message too big (its code is known
	 * once the frame is sent: wsf_send). */
	if (!wslay_event_get_read_enabled(f->ctx) && !f->close_frame && f->code == 0)
		f->failed = true;
	return rv == 0 ? 0 : -1;
}

int wsf_send(struct wsf *f, struct evbuffer *out)
{
	f->out = out;
	int rv = wslay_event_send(f->ctx);
	if (rv == 0 && f->close_pending && wslay_event_get_queued_msg_count(f->ctx) == 0) {
		f->close_pending = false;
		int q = wslay_event_queue_close(
		    f->ctx, f->close_code, (const uint8_t *)f->close_reason, f->close_reason_len);
		if (q == 0)
			rv = wslay_event_send(f->ctx);
	}
	f->out = NULL;
	if (f->failed && f->code == 0 && wslay_event_get_close_sent(f->ctx))
		f->code = wslay_event_get_status_code_sent(f->ctx);
	return rv == 0 ? 0 : -1;
}

int wsf_queue(struct wsf *f, bool text, const void *data, size_t len)
{
	if (f->close_pending)
		return -1;
	struct wslay_event_msg m = {
	    .opcode = text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
	    .msg = data,
	    .msg_length = len,
	};
	return wslay_event_queue_msg(f->ctx, &m) == 0 ? 0 : -1;
}

int wsf_close(struct wsf *f, uint16_t code, const char *reason)
{
	size_t rl = reason != NULL ? strlen(reason) : 0;
	if (rl > 123)
		rl = 123;
	if (f->code == 0)
		f->code = code;
	/* Nothing more is read: what the peer sends after our close is
	 * dropped (RFC 6455 §5.5.1 lets the closer discard it). */
	wslay_event_shutdown_read(f->ctx);
	if (f->close_pending || wslay_event_get_close_sent(f->ctx))
		return 0;
	f->close_pending = true;
	f->close_code = code;
	memcpy(f->close_reason, reason != NULL ? reason : "", rl);
	f->close_reason_len = rl;
	return 0;
}

void wsf_hold(struct wsf *f, bool hold)
{
	f->hold = hold;
}

bool wsf_reading(const struct wsf *f)
{
	return wslay_event_get_read_enabled(f->ctx) != 0;
}

bool wsf_failed(const struct wsf *f)
{
	return f->failed;
}

bool wsf_close_sent(const struct wsf *f)
{
	return wslay_event_get_close_sent(f->ctx) != 0 || f->close_pending || f->code != 0;
}

uint16_t wsf_close_code(const struct wsf *f)
{
	return f->code;
}

bool wsf_finished(const struct wsf *f)
{
	return wslay_event_get_close_sent(f->ctx) && !wslay_event_want_write(f->ctx) &&
	       (f->got_close || !wslay_event_get_read_enabled(f->ctx));
}

size_t wsf_queued_bytes(const struct wsf *f)
{
	return wslay_event_get_queued_msg_length(f->ctx);
}
