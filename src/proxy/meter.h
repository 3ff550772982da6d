/* SPDX-License-Identifier: Apache-2.0 */
/* meter — what an answer says it cost: the token usage read from its body as
 * it is relayed, for the lanes to correct the token gate by (DESIGN §5). The
 * body is never kept: an event stream's lines and a JSON answer's bytes are
 * read as they pass (provider/usage_sse.h, provider/usage_read.h), however
 * long.
 *
 * Contract, in the order the exchange calls it:
 *   meter_request  once, when the request enters its lane: metering on or off;
 *                  with stream_usage: inject, a chat completion streamed
 *                  without include_usage is asked for it (the body sent
 *                  upstream becomes the meter's own copy).
 *   meter_answer   at each attempt's answer head: what the body is (an event
 *                  stream, or a JSON document).
 *   meter_feed     each piece of the answer's body, in order, of any size:
 *                  read, and handed to emit for the client, unchanged, or
 *                  without the usage pacerd asked for (usage_strip).
 *   meter_finish   the body ended complete: what the filter held back goes to
 *                  emit, and the usage is given.
 * meter_rewrote says whether the body sent upstream is the meter's copy;
 * meter_unrewrite goes back to the client's own bytes (an upstream refused
 * the rewrite, or rewrites stopped for the provider meanwhile: rewrites.h):
 * the usage is still read when the answer sends it unasked.
 * Off (meter_request not called, or on false), feed only hands the bytes on.
 * Pure: no I/O; the client's bytes go to the callback. Kept in the exchange
 * across uses: meter_reset keeps the usage readers' small buffers (at most
 * USAGE_READ_VALUE_MAX each) for the next request. */
#ifndef PACERD_METER_H
#define PACERD_METER_H

#include <stdbool.h>
#include <stddef.h>

#include "provider/sse.h"
#include "provider/tokens.h"
#include "provider/usage_read.h"
#include "provider/usage_sse.h"
#include "provider/usage_strip.h"

typedef void (*meter_emit)(void *ctx, const char *data, size_t len);

struct meter {
	bool on;    /* the answers' usage is read */
	bool strip; /* pacerd asked the stream for its usage: the client gets it without */
	bool sse;   /* this answer is an event stream */
	/* An event stream is framed once (provider/sse.h), here; each line goes
	 * to the usage reader and, when strip, to the filter. */
	struct sse_framer framer;
	struct usage_sse scan;
	struct usage_strip filter;
	struct usage_read json; /* a JSON answer's usage, read as it passes */
	char *body;             /* the request body with include_usage added, or NULL */
};

/* A meter that is off. */
void meter_init(struct meter *m);
/* Turns metering on for a request to path (len bytes, the query allowed)
 * with *body (*len bytes), which tokens_estimate() read into *cost (the one
 * scan of the body). ask_stream_usage (a token-paced lane with stream_usage:
 * inject): a chat completion that asks for a stream without
 * stream_options.include_usage gets it (usage_inject_request applies the
 * scan's cost->ask_usage), *body and *len then point to the meter's copy
 * (valid until meter_reset), and its streamed answers reach the client
 * without what that added. A body that is not JSON, or no memory for the
 * copy, goes as it is. */
void meter_request(struct meter *m, bool ask_stream_usage, const char *path, size_t path_len,
                   const struct tokens_cost *cost, const char **body, size_t *len);
/* Whether meter_request rewrote the body (the meter's copy goes upstream). */
bool meter_rewrote(const struct meter *m);
/* Drops the rewrite: the caller sends the client's own bytes from now on;
 * answers reach the client as they come (nothing is stripped), and their
 * usage is read when present. */
void meter_unrewrite(struct meter *m);
/* An attempt's answer begins (what an earlier attempt read is forgotten);
 * content_type: its Content-Type value, or NULL. */
void meter_answer(struct meter *m, const char *content_type);
/* n bytes of the answer's body: read, and handed to emit(ctx, …), in one or
 * more pieces (none while the filter holds a partial event back). */
void meter_feed(struct meter *m, const char *data, size_t n, meter_emit emit, void *ctx);
/* The answer's body ended complete: emits what the filter held back (emit
 * NULL: dropped, the client is gone), sets *usage (always initialised) and
 * returns usage->present: false when off, or when the answer reported none. */
bool meter_finish(struct meter *m, meter_emit emit, void *ctx, struct tokens_usage *usage);
/* Off again, for the next request; the readers' buffers are kept. */
void meter_reset(struct meter *m);
void meter_free(struct meter *m);

#endif
