/* SPDX-License-Identifier: Apache-2.0 */
/* wsframe — one end of a WebSocket (RFC 6455 §5) over evbuffers, framed by
 * wslay's event API (docs/decisions.md: why wslay). It owns no socket: the
 * caller hands it the bytes that arrived (wsf_recv) and takes the bytes to
 * send (wsf_send), so the same code runs over a plain socket, TLS, a test's
 * buffers and the fuzzer's.
 *
 * What wslay checks and answers with a close frame (then reads no more): a
 * frame that is not masked from a client or masked from a server, reserved
 * bits or opcodes, a control frame fragmented or over 125 bytes, a text
 * message that is not UTF-8 (1007), a continuation without a start, and a
 * message over max_msg bytes (1009). A ping is answered with a pong here;
 * pings and pongs are not handed to the owner. Messages are whole when
 * handed over (buffered up to max_msg).
 *
 * Backpressure: wsf_hold(f, true) stops wsf_recv from taking more bytes
 * from the caller's evbuffer; messages inside what wslay has already taken
 * (at most its 4 KiB read buffer) still arrive. */
#ifndef PACERD_WSFRAME_H
#define PACERD_WSFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;
struct wsf;

enum wsf_role {
	WSF_SERVER, /* pacerd's end of a client's socket: frames read must be masked */
	WSF_CLIENT, /* pacerd's end of an upstream socket: frames sent are masked */
};

/* The close codes pacerd sends (RFC 6455 §7.4.1). */
enum wsf_code {
	WSF_NORMAL = 1000,
	WSF_GOING_AWAY = 1001,
	WSF_PROTOCOL_ERROR = 1002,
	WSF_NO_STATUS = 1005,
	WSF_ABNORMAL = 1006,
	WSF_INVALID_DATA = 1007,
	WSF_POLICY = 1008,
	WSF_TOO_BIG = 1009,
	WSF_INTERNAL = 1011,
	WSF_TRY_AGAIN = 1013,
};

struct wsf_events {
	/* A whole text (text true) or binary message. */
	void (*message)(void *ctx, bool text, const uint8_t *data, size_t len);
	/* The peer's close frame (code 1005 when it named none); a close has
	 * been queued in answer. */
	void (*closed)(void *ctx, uint16_t code, const uint8_t *reason, size_t len);
};

/* NULL when out of memory. max_msg: the largest message accepted. */
struct wsf *wsf_new(enum wsf_role role, size_t max_msg, const struct wsf_events *ev, void *ctx);
void wsf_free(struct wsf *f);
/* Reads frames from in (the bytes read are removed from it). -1 when the
 * socket must be closed now (wslay failed: out of memory); a protocol error
 * is 0, with a close frame queued (wsf_close_sent). */
int wsf_recv(struct wsf *f, struct evbuffer *in);
/* Moves the frames queued to out (all of them). -1: as wsf_recv. */
int wsf_send(struct wsf *f, struct evbuffer *out);
/* Queues one message (copied). -1 when no more may be sent (a close was
 * queued) or out of memory. */
int wsf_queue(struct wsf *f, bool text, const void *data, size_t len);
/* Queues a close frame with code and reason (at most 123 bytes kept),
 * written after the messages queued before it; nothing more is read, and
 * nothing more may be queued. */
int wsf_close(struct wsf *f, uint16_t code, const char *reason);
/* While held, wsf_recv reads no further frame. */
void wsf_hold(struct wsf *f, bool hold);
/* Whether frames are still read (no close received or sent for an error). */
bool wsf_reading(const struct wsf *f);
/* Whether the peer's bytes broke the protocol (wslay answered with a close
 * of its own: 1002, 1007, 1009). */
bool wsf_failed(const struct wsf *f);
/* Whether a close frame has been queued or sent, and its code (0: none;
 * the code of a close wslay queued for a protocol error is known once
 * wsf_send has sent it). */
bool wsf_close_sent(const struct wsf *f);
uint16_t wsf_close_code(const struct wsf *f);
/* Whether the close handshake is over: ours sent and theirs received, or
 * ours sent after an error (nothing more will be read). */
bool wsf_finished(const struct wsf *f);
/* Bytes of messages queued and not yet moved by wsf_send. */
size_t wsf_queued_bytes(const struct wsf *f);

#endif
