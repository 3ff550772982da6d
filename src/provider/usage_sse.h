/* SPDX-License-Identifier: Apache-2.0 */
/* usage_sse — the token usage a text/event-stream reports, read as the
 * stream arrives (DESIGN §5), in chunks of any size framed into lines by
 * provider/sse.h (events and lines may straddle chunks; CR, LF and CRLF all
 * end lines).
 *
 * Each data: line is one JSON document read alone (every provider sends
 * one-line JSON) by provider/usage_read.h, however long: a line over the
 * framer's cap comes as pieces and is read as they come, never kept. A line
 * the stream stopped in is not read.
 *
 * Results, readable at any time (after usage_sse_finish for the last line,
 * when a CR ended the stream):
 *   usage: the usage seen, merged line after line (tokens_usage_merge: what a
 *          later line carries replaces): OpenAI's include_usage chunk
 *          ("choices": [] + usage; the "usage": null of other chunks reads
 *          as none), Anthropic message_start (input) and message_delta
 *          (cumulative output), Gemini usageMetadata, the Responses API's
 *          response.usage (response.completed), Groq's x_groq.usage.
 *   error: the stream carried an error: an "event: error" line or a data:
 *          JSON object with a top-level "error" member (errors after HTTP
 *          200). */
#ifndef PACERD_USAGE_SSE_H
#define PACERD_USAGE_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider/sse.h"
#include "provider/tokens.h"
#include "provider/usage_read.h"

/* The longest line usage_sse_feed's framer keeps whole when it straddles
 * chunks: an "event:" line is far shorter, and a longer data: line is read
 * in pieces as well as whole. */
#define USAGE_SSE_LINE_KEEP 1024

struct usage_sse {
	struct tokens_usage usage;
	bool error;
	/* private */
	struct sse_framer framer; /* usage_sse_feed's own */
	struct usage_read doc;    /* the data: line being read */
	uint8_t cut;              /* where the line that comes in pieces is */
	uint8_t matched;          /* bytes of its start matched so far */
	bool started;             /* past the stream's first line (its byte order mark) */
};

/* A reader before its first stream; allocates nothing. */
void usage_sse_init(struct usage_sse *s);
/* A new stream: results cleared, buffers kept. */
void usage_sse_start(struct usage_sse *s);
/* Feeds n bytes (any n, 0 included), framed by s's own framer. */
void usage_sse_feed(struct usage_sse *s, const char *data, size_t n);
/* One line (or piece of a line over the cap) a framer of the caller's gave
 * (sse.h): for a caller that frames the stream once for several readers
 * (proxy/meter.c), whatever its framer's cap. */
void usage_sse_line(struct usage_sse *s, const struct sse_line *l);
/* The stream ended: reads the line a CR ended it with (the framer waits for
 * the byte after a CR); a line without its end is not read. */
void usage_sse_finish(struct usage_sse *s);
/* Frees what s holds; results stay readable. */
void usage_sse_free(struct usage_sse *s);

#endif
