/* SPDX-License-Identifier: Apache-2.0 */
/* usage_read — the token usage one JSON document reports (an answer's body,
 * an SSE data: line), read as its bytes arrive, without holding the document
 * (issue 28: a Responses API stream ends with a response.completed event
 * that repeats instructions, tools and every output item, often 100 KiB to
 * 1 MiB on one line; a non-stream answer can be as long).
 *
 * Fed the document in pieces of any size, cut anywhere (inside a string, an
 * escape, a UTF-8 sequence, a number), the reader follows only its structure:
 * the depth, whether it is in a string or an escape, and the member name at
 * depths 1 and 2 (decoded, escapes included, up to a few bytes). It finds the
 * usage objects where each API keeps them:
 *   usage            top level: OpenAI chat and completions, embeddings,
 *                    Anthropic message and message_delta, the Responses API's
 *                    non-stream answer
 *   usageMetadata    top level: Gemini
 *   message.usage    Anthropic's message_start
 *   response.usage   the Responses API's events (response.completed, …)
 *   x_groq.usage     Groq's streams
 * and notes a top-level "error" member. Only a usage value's own bytes are
 * kept (up to USAGE_READ_VALUE_MAX: a longer value is not a usage object
 * pacerd reads), and each is read, once it ends, by tokens_usage_object() —
 * the strict scanner of provider/tokens.c, not a second one. Of repeated
 * members the last counts, as in jansson's objects: a "response" without a
 * usage after one with it leaves none.
 *
 * The document must be a JSON object and end structurally complete: depth
 * back to 0, nothing but blanks after it; else it yields nothing ("not
 * JSON"), and so does a usage value that is not valid JSON. What lies
 * between the usage values is not checked beyond its structure (a document
 * jansson refuses may still give its usage; every document jansson accepts
 * gives what tests/unit/tokens_ref.h reads from its tree).
 *
 * Memory: the reader itself (under 1 KiB) and a value buffer grown on the
 * first usage value to that value's size (at most USAGE_READ_VALUE_MAX) and
 * kept across documents; nothing per byte. Pure: no I/O. */
#ifndef PACERD_USAGE_READ_H
#define PACERD_USAGE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider/tokens.h"

/* The longest usage value read: every API's is a few hundred bytes. */
#define USAGE_READ_VALUE_MAX 4096
/* Containers nested deeper make the document unreadable (jansson refuses
 * what is nested deeper than this too). */
#define USAGE_READ_DEPTH_MAX 2048

/* Where a usage object was found (usage_read.h's list, in that order). */
enum usage_read_place {
	USAGE_AT_USAGE,
	USAGE_AT_METADATA,
	USAGE_AT_MESSAGE,
	USAGE_AT_RESPONSE,
	USAGE_AT_GROQ,
	USAGE_AT_N
};

struct usage_read {
	/* private */
	struct tokens_usage_obj found[USAGE_AT_N]; /* the last value of each place in `at.found` */
	char *value;                               /* the usage value being kept */
	size_t value_cap;
	struct usage_read_at { /* where the reader is in the document */
		size_t value_len;
		uint32_t depth;         /* containers open */
		uint32_t capture_depth; /* the depth of the member whose value is kept */
		uint8_t doc;            /* before, in, after the document, or unreadable */
		uint8_t found;          /* a bit per place: found[place] holds its last value */
		uint8_t capture;        /* 0, or 1 + the place whose value is being kept */
		uint8_t member;         /* the depth-1 member whose value the reader is in */
		uint8_t name;           /* the member name read last */
		bool in_string, escape;
		bool in_name;     /* the string is a member name at depth 1 or 2 */
		bool expect_name; /* the next string at depth 1 or 2 is a member name */
		bool d2_object;   /* the container at depth 2 is an object */
		bool value_over;  /* the value kept passed USAGE_READ_VALUE_MAX */
		bool value_bad;   /* a usage value was not JSON: the document gives nothing */
		bool error;       /* a top-level "error" member */
		/* a member name that straddles pieces (or has escapes), unescaped */
		uint8_t name_len, hex_left;
		bool name_miss; /* it can be none of the names looked for */
		uint16_t hex;
		char name_buf[16];
	} at;
};

/* A reader before its first document; allocates nothing. */
void usage_read_init(struct usage_read *r);
/* A new document: what the last one said is forgotten, the buffer kept. */
void usage_read_start(struct usage_read *r);
/* The next n bytes of the document (any n, 0 included). */
void usage_read_feed(struct usage_read *r, const char *data, size_t n);
/* The document ended. When it is complete, merges its usage objects into *u
 * (tokens_usage_merge: usage, usageMetadata, message.usage, response.usage,
 * x_groq.usage, in that order), sets *error (when not NULL) if it has a
 * top-level "error" member, and returns true; else changes nothing and
 * returns false. */
bool usage_read_end(struct usage_read *r, struct tokens_usage *u, bool *error);
/* Frees the buffer; init again to reuse. */
void usage_read_free(struct usage_read *r);

/* The usage of a whole document in memory (tests, tools): *out initialised,
 * then as usage_read_end; returns out->present. */
bool usage_read_json(const char *body, size_t len, struct tokens_usage *out);

#endif
