/* SPDX-License-Identifier: Apache-2.0 */
/* usage_strip — gives the client back exactly the OpenAI stream it asked for
 * when pacerd added stream_options.include_usage to meter it (issue 8.3).
 *
 * With include_usage, OpenAI-style providers end the stream with one extra
 * chunk whose "choices" is empty and which carries "usage", and add
 * "usage":null to every other chunk. This filter, fed the event stream as it
 * arrives, drops that last chunk and removes the trailing ,"usage":null of
 * the others, and passes every other byte through untouched. It reads the
 * stream's lines through provider/sse.h (the framer the usage meter reads it
 * with) and decides an event's fate at its first data line, so it holds at
 * most a partial line and the lines of an event before its first data line
 * (USAGE_STRIP_EVENT_MAX each; beyond that it gives up and passes the rest
 * through as it is). Pure: no I/O; what the client gets goes to the emit
 * callback. */
#ifndef PACERD_USAGE_STRIP_H
#define PACERD_USAGE_STRIP_H

#include <stdbool.h>
#include <stddef.h>

#include "provider/sse.h"
#include "provider/tokens.h"

#define USAGE_STRIP_EVENT_MAX (1024 * 1024)

/* The request side: the body of a request that asks for a stream without
 * stream_options.include_usage true, with it asked for: the edit
 * tokens_estimate() found (cost: its detail of this body, tokens.h's
 * ask_usage), every other byte as the client sent it. Returns 1 and a
 * malloc'd body in *out (*out_len bytes, then a NUL); 0 when nothing is to
 * be done (not a JSON object, no "stream": true, include_usage already true,
 * stream_options not an object); -1 when out of memory. The body is read
 * once, by tokens_estimate(): nothing here parses it again. */
int usage_inject_request(const char *body, size_t len, const struct tokens_cost *cost, char **out,
                         size_t *out_len);
/* What usage_inject_request adds, for log lines and /status. */
#define USAGE_INJECTED "stream_options.include_usage"

/* Whether a request to `path` (len bytes, a query string allowed) speaks the
 * OpenAI chat-completions API, whose streams say what they cost only when
 * asked (stream_options.include_usage): its path ends in /chat/completions.
 * That is OpenAI's, Azure's deployments', and every OpenAI-compatible
 * provider's (Groq, Mistral, Together, vLLM, Gemini's compatibility layer),
 * whatever rate-limit headers they send: the API a request speaks and the
 * headers a provider answers with are two different things. */
bool usage_api_is_chat_completions(const char *path, size_t len);

typedef void (*usage_strip_emit)(void *ctx, const char *data, size_t len);

struct usage_strip {
	bool passthrough; /* a line or event over the cap, or out of memory: filter no more */
	bool dropped;     /* the usage chunk was dropped (for tests and logs) */
	/* private */
	struct sse_framer framer;
	enum {
		USAGE_STRIP_OPEN,
		USAGE_STRIP_KEEP,
		USAGE_STRIP_DROP
	} event;    /* the current
	             * event: no data line yet, passed on, dropped */
	char *held; /* the event's lines before its first data line */
	size_t held_len, held_cap;
	usage_strip_emit emit; /* the feed's */
	void *ctx;
};

void usage_strip_init(struct usage_strip *s);

/* Feeds n bytes of the event stream; emits what the client gets. */
void usage_strip_feed(struct usage_strip *s, const char *data, size_t n, usage_strip_emit emit,
                      void *ctx);

/* The stream ended: emits what is held (an event without its blank line). */
void usage_strip_finish(struct usage_strip *s, usage_strip_emit emit, void *ctx);

/* The same two for a caller that frames the stream once for several readers
 * (proxy/meter.c), with a framer of its own whose cap is
 * USAGE_STRIP_EVENT_MAX: each line it gives, then, once the framer has
 * given the stream's last line, the end. s's own framer is not used. */
void usage_strip_line(struct usage_strip *s, const struct sse_line *l, usage_strip_emit emit,
                      void *ctx);
void usage_strip_end(struct usage_strip *s, usage_strip_emit emit, void *ctx);

void usage_strip_free(struct usage_strip *s);

#endif
