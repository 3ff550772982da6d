/* SPDX-License-Identifier: Apache-2.0 */
/* sse — the one framer of text/event-stream bytes, shared by the usage meter
 * (usage_sse.h) and the filter that gives a client the stream it
 * asked for (usage_strip.h).
 *
 * Lines as the WHATWG HTML standard's event-stream parsing cuts them (§9.2.6):
 * CRLF, LF and a CR not followed by LF each end a line, and one byte order
 * mark at the very start is ignored. The bytes come in chunks of any size, cut
 * anywhere, a CRLF included: a CR that ends a chunk ends its line, but which
 * bytes the line came as is known only from the next chunk (or the end of
 * the stream), so that line is given then. Every byte fed is given back once,
 * in order, as part of some line's raw bytes: a filter that passes the stream
 * on passes it exactly.
 *
 * Memory: a line that straddles chunks is kept (grown as it comes, up to the
 * cap); a line whose text is longer than the cap is not kept but given as
 * pieces of its raw bytes as they arrive (cut), the last piece with the
 * line's end. Lines inside one chunk are given where they lie: no copy.
 * Pure: no I/O. */
#ifndef PACERD_SSE_H
#define PACERD_SSE_H

#include <stdbool.h>
#include <stddef.h>

struct sse_line {
	const char *text; /* the line without its end (nor the stream's byte order mark) */
	size_t len;
	const char *raw; /* the bytes it came as, its end included; text lies inside */
	size_t raw_len;
	bool cut;   /* a piece of a line over the cap: raw only, len 0 */
	bool ended; /* false for the last line of a stream that stopped in it */
};

/* Called for each line (or piece); the pointers are good during the call. */
typedef void (*sse_line_fn)(void *ctx, const struct sse_line *line);

struct sse_framer {
	/* private */
	char *buf;       /* the start of a line that straddles chunks */
	size_t len, cap; /* bytes in buf (its text, and a CR when cr), allocated */
	size_t max;      /* the cap on a line's text */
	bool cr;         /* buf holds a whole line ended by CR: an LF may follow */
	bool cut;        /* in a line over the cap: its bytes go as pieces */
	bool cut_cr;     /* that line ended with a CR that ended a chunk: not given yet */
	bool started;    /* past the first line (its byte order mark) */
};

/* A framer that keeps lines of up to max bytes of text. */
void sse_framer_init(struct sse_framer *f, size_t max);
/* Feeds n bytes (any n, 0 included); fn is called for every line they end. */
void sse_framer_feed(struct sse_framer *f, const char *data, size_t n, sse_line_fn fn, void *ctx);
/* The stream ended: the line it was in, if any, is given (ended false unless
 * a CR ended it), and the framer starts over. */
void sse_framer_finish(struct sse_framer *f, sse_line_fn fn, void *ctx);
/* Frees what it holds; init again to reuse. */
void sse_framer_free(struct sse_framer *f);

/* What a line says (§9.2.6): a blank line ends an event; a line starting
 * with ':' is a comment; any other is a field, its name up to the first ':'
 * (the whole line when there is none) and its value after it, one leading
 * space dropped. */
enum sse_kind { SSE_BLANK, SSE_COMMENT, SSE_FIELD };

struct sse_field {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

enum sse_kind sse_field_of(const char *text, size_t len, struct sse_field *out);
/* Whether the field's name is `name` (exact, as the standard compares). */
bool sse_field_is(const struct sse_field *f, const char *name);

#endif
