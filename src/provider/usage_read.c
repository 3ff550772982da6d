/* SPDX-License-Identifier: Apache-2.0 */
/* usage_read — see usage_read.h. */
#include "provider/usage_read.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/grow.h"

enum { DOC_BEFORE, DOC_IN, DOC_AFTER, DOC_BAD };

/* The member names looked for; NAME_OTHER is every other one. */
enum { NAME_OTHER, NAME_USAGE, NAME_METADATA, NAME_MESSAGE, NAME_RESPONSE, NAME_GROQ, NAME_ERROR };

/* A usage value's first allocation: most are a few hundred bytes. */
#define VALUE_FIRST 256

void usage_read_init(struct usage_read *r)
{
	memset(r, 0, sizeof(*r));
}

void usage_read_start(struct usage_read *r)
{
	memset(&r->at, 0, sizeof(r->at)); /* found[] is read only where at.found says */
}

void usage_read_free(struct usage_read *r)
{
	free(r->value);
	memset(r, 0, sizeof(*r));
}

/* ---- the member name at depth 1 or 2 ---- */

static void name_char(struct usage_read *r, unsigned char c)
{
	/* The names looked for are short ASCII without controls: anything else
	 * (a long name, a control, a non-ASCII escape) is none of them. */
	if (c < 0x20 || c >= 0x80 || r->at.name_len >= sizeof(r->at.name_buf))
		r->at.name_miss = true;
	else
		r->at.name_buf[r->at.name_len++] = (char)c;
}

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Which name s is: by its length first (a member name is compared on
 * every object at depths 1 and 2: most have other lengths). */
static uint8_t name_of(const char *s, size_t n)
{
	switch (n) {
	case 5:
		return memcmp(s, "usage", 5) == 0   ? NAME_USAGE
		       : memcmp(s, "error", 5) == 0 ? NAME_ERROR
		                                    : NAME_OTHER;
	case 6:
		return memcmp(s, "x_groq", 6) == 0 ? NAME_GROQ : NAME_OTHER;
	case 7:
		return memcmp(s, "message", 7) == 0 ? NAME_MESSAGE : NAME_OTHER;
	case 8:
		return memcmp(s, "response", 8) == 0 ? NAME_RESPONSE : NAME_OTHER;
	case 13:
		return memcmp(s, "usageMetadata", 13) == 0 ? NAME_METADATA : NAME_OTHER;
	default:
		return NAME_OTHER;
	}
}

/* The bytes of a member name from p, decoded as they come (escapes may be
 * cut by the pieces too): returns where the name's string ended, or end. */
static const char *name_bytes(struct usage_read *r, const char *p, const char *end)
{
	for (; p < end; p++) {
		unsigned char c = (unsigned char)*p;
		if (r->at.hex_left > 0) {
			int d = hex_value(c);
			if (d >= 0) {
				r->at.hex = (uint16_t)(r->at.hex * 16 + d);
				if (--r->at.hex_left == 0)
					name_char(r, r->at.hex < 0x80 ? (unsigned char)r->at.hex
					                              : 0x80);
				continue;
			}
			r->at.hex_left = 0; /* not JSON: read the byte as it is */
			r->at.name_miss = true;
		}
		if (r->at.escape) {
			r->at.escape = false;
			if (c == 'u') {
				r->at.hex_left = 4;
				r->at.hex = 0;
			} else {
				/* \" \\ \/ stand for themselves; \b \f \n \r \t are
				 * controls, in no name looked for */
				name_char(r, c == '"' || c == '\\' || c == '/' ? c : 0);
			}
			continue;
		}
		if (c == '\\') {
			r->at.escape = true;
		} else if (c == '"') {
			r->at.in_string = r->at.in_name = false;
			r->at.name =
			    r->at.name_miss ? NAME_OTHER : name_of(r->at.name_buf, r->at.name_len);
			return p + 1;
		} else {
			name_char(r, c);
		}
	}
	return p;
}

/* ---- the usage value being kept ---- */

static void keep(struct usage_read *r, const char *p, size_t n)
{
	if (r->at.value_over || n == 0)
		return;
	if (n > USAGE_READ_VALUE_MAX - r->at.value_len ||
	    !grow_bytes_upto(&r->value, &r->value_cap, r->at.value_len + n, VALUE_FIRST,
	                     USAGE_READ_VALUE_MAX)) {
		r->at.value_over = true; /* too long for a usage object (or no memory) */
		return;
	}
	memcpy(r->value + r->at.value_len, p, n);
	r->at.value_len += n;
}

static void capture_begin(struct usage_read *r, enum usage_read_place at)
{
	r->at.capture = (uint8_t)(at + 1);
	r->at.capture_depth = r->at.depth;
	r->at.value_len = 0;
	r->at.value_over = false;
}

/* The value kept ended: its last bytes are [from, to). */
static void capture_end(struct usage_read *r, const char *from, const char *to)
{
	unsigned at = r->at.capture - 1u;
	keep(r, from, (size_t)(to - from));
	r->at.capture = 0;
	if (r->at.value_over) { /* the last value is none we read */
		r->at.found &= (uint8_t) ~(1u << at);
	} else if (r->at.value_len == 4 && memcmp(r->value, "null", 4) == 0) {
		/* OpenAI's "usage":null on every chunk but the last: the
		 * scanner would say the same, only slower */
		memset(&r->found[at], 0, sizeof(r->found[at]));
		r->at.found |= (uint8_t)(1u << at);
	} else if (tokens_usage_object(r->value, r->at.value_len, &r->found[at]))
		r->at.found |= (uint8_t)(1u << at);
	else
		r->at.value_bad = true;
}

/* A ':' at depth 1 or 2: the value of the member just named begins.
 * Returns true when it is a usage value, kept from here. */
static bool member_value(struct usage_read *r)
{
	uint8_t name = r->at.name;
	r->at.name = NAME_OTHER;
	if (r->at.depth == 1) {
		r->at.member = name;
		switch (name) {
		case NAME_USAGE:
			capture_begin(r, USAGE_AT_USAGE);
			return true;
		case NAME_METADATA:
			capture_begin(r, USAGE_AT_METADATA);
			return true;
		case NAME_MESSAGE:
		case NAME_RESPONSE:
		case NAME_GROQ:
			/* a new value replaces the last one, its usage too */
			r->at.found &=
			    (uint8_t) ~(1u << (USAGE_AT_MESSAGE + (name - NAME_MESSAGE)));
			break;
		case NAME_ERROR:
			r->at.error = true;
			break;
		default:
			break;
		}
	} else if (name == NAME_USAGE && r->at.d2_object && r->at.member >= NAME_MESSAGE &&
	           r->at.member <= NAME_GROQ) {
		capture_begin(
		    r, (enum usage_read_place)(USAGE_AT_MESSAGE + (r->at.member - NAME_MESSAGE)));
		return true;
	}
	return false;
}

/* ---- the document ---- */

/* The first '"' or '\\' at or after p, or end: the end of a string's plain
 * run, sixteen bytes at a time where SSE2 is (every x86-64), else eight (the
 * classic "has a zero byte" test on the word xor each of the two bytes). */
static inline const char *string_stop(const char *p, const char *end)
{
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
	while (end - p >= 16) {
		__m128i w = _mm_loadu_si128((const __m128i *)(const void *)p);
		unsigned m = (unsigned)_mm_movemask_epi8(
		    _mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, backslash)));
		if (m != 0)
			return p + __builtin_ctz(m);
		p += 16;
	}
#else
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	while (end - p >= 8) {
		uint64_t w, q, b;
		memcpy(&w, p, 8);
		q = w ^ (ones * '"');
		b = w ^ (ones * '\\');
		if ((((q - ones) & ~q) | ((b - ones) & ~b)) & high)
			break;
		p += 8;
	}
#endif
	while (p < end && *p != '"' && *p != '\\')
		p++;
	return p;
}

/* The bytes that say something outside strings. */
static const bool structural[256] = {['"'] = true, ['{'] = true, ['}'] = true, ['['] = true,
                                     [']'] = true, [','] = true, [':'] = true};

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/* The rest of a string value from p: returns the byte after its closing
 * quote, or end (still in it, maybe in an escape). */
static inline const char *string_rest(struct usage_read *r, const char *p, const char *end)
{
	if (r->at.escape) {
		if (p == end)
			return end;
		r->at.escape = false;
		p++;
	}
	for (;;) {
		p = string_stop(p, end);
		if (p == end) {
			r->at.in_string = true;
			return end;
		}
		if (*p == '"') {
			r->at.in_string = false;
			return p + 1;
		}
		if (end - p < 2) { /* a backslash that ends the piece */
			r->at.in_string = r->at.escape = true;
			return end;
		}
		p += 2;
	}
}

/* A string at depth 1 or 2 where a member name stands, from p (after its
 * quote): returns the byte after it, or end. */
static const char *name_start(struct usage_read *r, const char *p, const char *end)
{
	const char *q = string_stop(p, end);
	r->at.expect_name = false;
	if (q < end && *q == '"') { /* all here, without escapes: the usual */
		r->at.name = name_of(p, (size_t)(q - p));
		return q + 1;
	}
	r->at.in_string = r->at.in_name = true;
	r->at.name_len = r->at.hex_left = 0;
	r->at.name_miss = false;
	return name_bytes(r, p, end);
}

/* Reads the document's bytes from p; returns where it ended (depth back to
 * 0), or end. Between strings only the structural bytes are looked at. */
static const char *in_document(struct usage_read *r, const char *p, const char *end)
{
	const char *from = p; /* where the kept value's bytes in this piece begin */
	if (r->at.in_string)  /* from the last piece */
		p = r->at.in_name ? name_bytes(r, p, end) : string_rest(r, p, end);
	while (p < end) {
		unsigned char c = (unsigned char)*p++;
		if (!structural[c]) /* blanks, numbers, literals */
			continue;
		switch (c) {
		case '"':
			p = r->at.expect_name ? name_start(r, p, end) : string_rest(r, p, end);
			break;
		case '{':
		case '[':
			if (++r->at.depth > USAGE_READ_DEPTH_MAX) {
				r->at.doc = DOC_BAD;
				return end;
			}
			r->at.expect_name = r->at.depth == 2 && c == '{';
			if (r->at.depth == 2)
				r->at.d2_object = c == '{';
			break;
		case '}':
		case ']':
			if (r->at.capture != 0 && r->at.depth == r->at.capture_depth)
				capture_end(r, from, p - 1);
			if (--r->at.depth == 0) {
				r->at.doc = DOC_AFTER;
				return p;
			}
			r->at.expect_name = false;
			break;
		case ',':
			if (r->at.capture != 0 && r->at.depth == r->at.capture_depth)
				capture_end(r, from, p - 1);
			if (r->at.depth <= 2)
				r->at.expect_name = r->at.depth == 1 || r->at.d2_object;
			break;
		default: /* ':' */
			if (r->at.depth <= 2 && member_value(r))
				from = p;
			break;
		}
	}
	if (r->at.capture != 0)
		keep(r, from, (size_t)(end - from));
	return end;
}

void usage_read_feed(struct usage_read *r, const char *data, size_t n)
{
	if (n == 0 || r->at.doc == DOC_BAD)
		return;
	const char *p = data, *end = data + n;
	if (r->at.doc == DOC_BEFORE) {
		p = skip_blanks(p, end);
		if (p == end)
			return;
		if (*p != '{') {
			r->at.doc = DOC_BAD; /* not an object */
			return;
		}
		r->at.doc = DOC_IN;
		r->at.depth = 1;
		r->at.expect_name = true;
		p++;
	}
	if (r->at.doc == DOC_IN)
		p = in_document(r, p, end);
	if (r->at.doc == DOC_AFTER && skip_blanks(p, end) != end)
		r->at.doc = DOC_BAD;
}

bool usage_read_end(struct usage_read *r, struct tokens_usage *u, bool *error)
{
	if (r->at.doc != DOC_AFTER || r->at.value_bad)
		return false;
	if (r->at.error && error != NULL)
		*error = true;
	for (unsigned at = 0; at < USAGE_AT_N; at++)
		if (r->at.found & (1u << at))
			tokens_usage_merge(&r->found[at], at == USAGE_AT_METADATA, u);
	return true;
}

bool usage_read_json(const char *body, size_t len, struct tokens_usage *out)
{
	struct usage_read r;
	memset(out, 0, sizeof(*out));
	usage_read_init(&r);
	usage_read_feed(&r, body, len);
	usage_read_end(&r, out, NULL);
	usage_read_free(&r);
	return out->present;
}
