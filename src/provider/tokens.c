/* SPDX-License-Identifier: Apache-2.0 */
/* tokens — see tokens.h.
 *
 * Request and answer bodies are read by a JSON scanner of our own that builds
 * no tree and allocates nothing: it checks the whole text exactly as jansson's
 * json_loadb (flags 0) accepts it — the same grammar, UTF-8 checked
 * everywhere, \u0000 and lone surrogates refused, integers within int64,
 * reals that do not overflow, 2048 levels of nesting — and on the way adds up
 * only the members the estimate and the usage need (of repeated members the
 * last one counts, as in jansson's objects). What jansson would refuse is "not
 * JSON" here too. tests/unit/tokens_ref.h keeps the tree-walking version this
 * must agree with; the unit test and the fuzzer compare the two. */
#include "provider/tokens.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/intern.h"

#define MAX_N 128
/* A requested maximum above this is a typo or an attack, not a plan. */
#define MAX_OUTPUT INT64_C(100000000)
/* Nesting followed inside content parts (tool results hold parts). */
#define MAX_DEPTH 8
/* A token id in an "input" or "prompt" array is one token: 4 characters. */
#define CHARS_PER_TOKEN 4
/* jansson's JSON_PARSER_MAX_DEPTH: a value (a scalar too) nested deeper fails. */
#define JS_MAX_DEPTH 2048

/* ---------- JSON scanner ---------- */

struct js {
	const char *p, *end;
	unsigned depth; /* containers open around s->p */
	bool bad;       /* not JSON: p is at end, every later step does nothing */
};

/* A string's raw bytes between the quotes. */
struct js_str {
	const char *b;
	size_t n;
	bool esc; /* has backslash escapes */
};

static void js_fail(struct js *s)
{
	s->bad = true;
	s->p = s->end;
}

static bool js_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Skips blanks; the next byte, or 0 at the end (a NUL byte is invalid
 * wherever it stands, so 0 means "nothing valid" either way). */
static char js_peek(struct js *s)
{
	const char *p = s->p;
	while (p < s->end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	s->p = p;
	return p < s->end ? *p : 0;
}

/* A value starts here: jansson counts it one level deeper than its container. */
static bool js_room(struct js *s)
{
	if (s->depth < JS_MAX_DEPTH)
		return true;
	js_fail(s);
	return false;
}

/* The length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 if it is
 * not one: jansson's utf8_check_first/utf8_check_full. */
static size_t js_utf8(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0];
	size_t n;
	unsigned long v;
	if (c >= 0xC2 && c <= 0xDF) {
		n = 2;
		v = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		v = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		v = c & 0x07;
	} else {
		return 0;
	}
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (n == 3 && v < 0x800) ||
	    (n == 4 && v < 0x10000))
		return 0;
	return n;
}

static int js_hex4(const unsigned char *p)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		int c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* The end of the run of plain ASCII at p (no quote, backslash, control
 * character or byte >= 0x80): eight bytes at a time, as most text is that. */
static const unsigned char *js_plain(const unsigned char *p, const unsigned char *end)
{
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	while (end - p >= 8) {
		uint64_t w, q, b;
		memcpy(&w, p, 8);
		q = w ^ (ones * '"');
		b = w ^ (ones * '\\');
		/* A byte's high bit: it is >= 0x80, < 0x20, '"' or '\\' (the
		 * classic haszero/hasless tests, exact for "any"). */
		if ((((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b) | w) & high)
			break;
		p += 8;
	}
	while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
		p++;
	return p;
}

/* The string at s->p (its opening quote); returns its length in characters:
 * code points once unescaped (a surrogate pair is one). str, when not NULL,
 * receives the raw span. */
static int64_t js_string(struct js *s, struct js_str *str)
{
	const unsigned char *p = (const unsigned char *)s->p + 1;
	const unsigned char *end = (const unsigned char *)s->end;
	const unsigned char *b = p;
	int64_t chars = 0;
	bool esc = false;

	for (;;) {
		const unsigned char *q = js_plain(p, end);
		chars += q - p;
		p = q;
		if (p == end || *p < 0x20)
			goto bad;
		if (*p == '"')
			break;
		if (*p == '\\') {
			esc = true;
			if (end - p < 2)
				goto bad;
			int e = p[1];
			if (e == 'u') {
				if (end - p < 6)
					goto bad;
				int v = js_hex4(p + 2);
				p += 6;
				if (v >= 0xD800 && v <= 0xDBFF) {
					if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
						goto bad;
					int lo = js_hex4(p + 2);
					if (lo < 0xDC00 || lo > 0xDFFF)
						goto bad;
					p += 6;
				} else if (v <= 0 || (v >= 0xDC00 && v <= 0xDFFF)) {
					goto bad; /* not hex, \u0000, or a lone low surrogate */
				}
			} else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' ||
			           e == 'n' || e == 'r' || e == 't') {
				p += 2;
			} else {
				goto bad;
			}
			chars++;
			continue;
		}
		size_t n = js_utf8(p, end);
		if (n == 0)
			goto bad;
		p += n;
		chars++;
	}
	if (str != NULL) {
		str->b = (const char *)b;
		str->n = (size_t)(p - b);
		str->esc = esc;
	}
	s->p = (const char *)p + 1;
	return chars;
bad:
	js_fail(s);
	return 0;
}

/* The number at s->p. True for an integer (no fraction or exponent), whose
 * value is then in *iv; jansson refuses integers outside int64 and reals that
 * overflow a double. */
static bool js_number(struct js *s, int64_t *iv)
{
	const char *p = s->p, *end = s->end, *start = p;
	bool neg = p < end && *p == '-';
	if (neg)
		p++;
	if (p == end || !js_digit(*p))
		goto bad;
	const char *d = p;
	if (*p == '0') {
		p++;
		if (p < end && js_digit(*p))
			goto bad;
	} else {
		while (p < end && js_digit(*p))
			p++;
	}
	size_t int_digits = (size_t)(p - d);
	bool real = false, exp = false;
	if (p < end && *p == '.') {
		p++;
		if (p == end || !js_digit(*p))
			goto bad;
		while (p < end && js_digit(*p))
			p++;
		real = true;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p == end || !js_digit(*p))
			goto bad;
		while (p < end && js_digit(*p))
			p++;
		real = exp = true;
	}
	s->p = p;
	if (!real) {
		/* strtoll's range: up to 2^63 - 1, down to -2^63. */
		const unsigned long long limit =
		    neg ? 9223372036854775808ULL : 9223372036854775807ULL;
		unsigned long long v = 0;
		for (const char *q = d; q < p; q++) {
			unsigned dig = (unsigned)(*q - '0');
			if (v > (limit - dig) / 10)
				goto bad;
			v = v * 10 + dig;
		}
		*iv = neg ? (v == 9223372036854775808ULL ? INT64_MIN : -(int64_t)v) : (int64_t)v;
		return true;
	}
	/* Only an exponent or some 300 digits can reach past DBL_MAX: ask strtod
	 * then (the C locale's, as pacerd never calls setlocale). */
	if (exp || int_digits > 300) {
		size_t n = (size_t)(p - start);
		char small[64];
		char *t = n < sizeof small ? small : malloc(n + 1);
		if (t == NULL)
			goto bad;
		memcpy(t, start, n);
		t[n] = '\0';
		errno = 0;
		double v = strtod(t, NULL);
		bool overflow = (v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE;
		if (t != small)
			free(t);
		if (overflow)
			goto bad;
	}
	return false;
bad:
	js_fail(s);
	return false;
}

/* The literal at s->p; its length. */
static int64_t js_literal(struct js *s)
{
	static const char *const lits[] = {"true", "false", "null"};
	const char *lit = *s->p == 't' ? lits[0] : *s->p == 'f' ? lits[1] : lits[2];
	size_t n = strlen(lit);
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0) {
		js_fail(s);
		return 0;
	}
	s->p += n; /* what follows is the grammar's business */
	return (int64_t)n;
}

/* A member name and its colon, at s->p: the name's characters, or -1. */
static inline int64_t js_key(struct js *s, struct js_str *key)
{
	if (js_peek(s) != '"') {
		js_fail(s);
		return -1;
	}
	int64_t n = js_string(s, key);
	if (js_peek(s) != ':') {
		js_fail(s);
		return -1;
	}
	s->p++;
	return n;
}

/* Characters of compact JSON text that a member adds beside its value: the
 * name's quotes and the colon (the comma before it is counted apart). */
#define JS_MEMBER_CHARS 3

/* The scalar at s->p, whose first byte is c, checked: its compact JSON
 * characters (js_json_chars). */
static inline int64_t js_scalar(struct js *s, char c)
{
	if (c == '"')
		return js_string(s, NULL) + 2;
	if (c == '-' || js_digit(c)) {
		int64_t iv;
		js_number(s, &iv);
		return CHARS_PER_TOKEN;
	}
	if (c == 't' || c == 'f' || c == 'n')
		return js_literal(s);
	js_fail(s);
	return 0;
}

/* Walks over the value at s->p, checking it all; with count, returns the
 * characters of its compact JSON text (js_json_chars), else 0. Iterative:
 * nesting costs a bit of stack per level, not a frame; a scalar none.
 * Inline into its two callers, each with count constant. */
static inline int64_t js_walk(struct js *s, const bool count)
{
	char c = js_peek(s);
	if (c != '{' && c != '[')
		return js_room(s) ? js_scalar(s, c) : 0;
	unsigned char is_obj[JS_MAX_DEPTH / 8] = {0}; /* per container opened here */
	unsigned top = 0;
	int64_t n = 0, k;
	for (;;) {
		c = js_peek(s);
		if (!js_room(s))
			return n;
		if (c == '{' || c == '[') {
			bool obj = c == '{';
			s->p++;
			s->depth++;
			if (count)
				n += 2; /* it and its closing bracket */
			if (obj)
				is_obj[top / 8] |= (unsigned char)(1u << (top % 8));
			else
				is_obj[top / 8] &= (unsigned char)~(1u << (top % 8));
			top++;
			if (js_peek(s) != (obj ? '}' : ']')) {
				if (obj) {
					if ((k = js_key(s, NULL)) < 0)
						return n;
					if (count)
						n += k + JS_MEMBER_CHARS;
				}
				continue; /* its first value */
			}
			s->p++;
			s->depth--;
			top--;
		} else {
			k = js_scalar(s, c);
			if (count)
				n += k;
		}
		if (s->bad)
			return n;
		/* After a value: close what ends here, or go on to the next value. */
		for (;;) {
			if (top == 0)
				return n;
			bool obj = is_obj[(top - 1) / 8] & (1u << ((top - 1) % 8));
			char d = js_peek(s);
			if (d == ',') {
				s->p++;
				if (count)
					n++;
				if (obj) {
					if ((k = js_key(s, NULL)) < 0)
						return n;
					if (count)
						n += k + JS_MEMBER_CHARS;
				}
				break;
			}
			if (d != (obj ? '}' : ']')) {
				js_fail(s);
				return n;
			}
			s->p++;
			s->depth--;
			top--;
		}
	}
}

/* Skips the value at s->p, checking it all. */
static void js_skip(struct js *s)
{
	js_walk(s, false);
}

/* Skips the value at s->p, checking it all, and returns the characters of
 * its compact JSON text (tokens_cost.tools_tokens): a string's characters as
 * js_string counts them and its two quotes, a member name likewise and its
 * colon, each bracket and comma once, a literal's letters, and
 * CHARS_PER_TOKEN for a number (one token; the digits as written are not
 * what a tree keeps, and the reference walks a tree). Blanks count nothing. */
static int64_t js_json_chars(struct js *s)
{
	return js_walk(s, true);
}

/* Enters the object or array at s->p when it is one ('{' or '['); else
 * skips the value and returns false. */
static bool js_enter(struct js *s, char open)
{
	if (js_peek(s) != open) {
		js_skip(s);
		return false;
	}
	if (!js_room(s))
		return false;
	s->p++;
	s->depth++;
	return true;
}

/* Moves to the next item of the object or array entered, whose closing
 * character is `close`: true when s->p is at it. False at the closing
 * character (consumed) or on an error. *first: true before the first call. */
static inline bool js_next(struct js *s, bool *first, char close)
{
	char c = js_peek(s);
	if (s->bad)
		return false;
	if (c == close) {
		s->p++;
		s->depth--;
		return false;
	}
	if (!*first) {
		if (c != ',') {
			js_fail(s);
			return false;
		}
		s->p++; /* an item must follow: {"a":1,} and [1,] fail where it is read */
	}
	*first = false;
	return true;
}

/* The next member of the object entered: reads its name into *key and the
 * colon, and leaves s->p at the value, which the caller consumes. */
static bool js_member(struct js *s, bool *first, struct js_str *key)
{
	return js_next(s, first, '}') && js_key(s, key) >= 0;
}

/* js_member that adds to *chars what the member adds to the object's compact
 * JSON text beside its value (js_json_chars): the comma before it, its name. */
static bool js_member_counted(struct js *s, bool *first, struct js_str *key, int64_t *chars)
{
	bool later = !*first;
	int64_t k;
	if (!js_next(s, first, '}') || (k = js_key(s, key)) < 0)
		return false;
	*chars += k + JS_MEMBER_CHARS + later;
	return true;
}

/* The next element of the array entered: s->p is at it. */
static bool js_element(struct js *s, bool *first)
{
	return js_next(s, first, ']');
}

/* The value at s->p as a string's character count; another type is skipped
 * and counts 0. */
static int64_t js_chars(struct js *s)
{
	if (js_peek(s) != '"') {
		js_skip(s);
		return 0;
	}
	return js_room(s) ? js_string(s, NULL) : 0;
}

/* The value at s->p as an integer: true and *v, or skipped and false. */
static bool js_int(struct js *s, int64_t *v)
{
	char c = js_peek(s);
	if (c != '-' && !js_digit(c)) {
		js_skip(s);
		return false;
	}
	return js_room(s) && js_number(s, v) && !s->bad;
}

/* Unescapes a string's raw bytes (JSON-valid) into out[0..cap); the decoded
 * length, which may exceed cap (then out holds only the start). */
static size_t js_unescape(const struct js_str *str, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)str->b, *end = p + str->n;
	size_t n = 0;
	while (p < end) {
		unsigned long cp;
		if (*p != '\\') {
			if (n < cap)
				out[n] = (char)*p;
			n++;
			p++;
			continue;
		}
		int e = p[1];
		p += 2;
		if (e != 'u') {
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
			const char *f = strchr(from, e);
			if (n < cap)
				out[n] = f != NULL ? to[f - from] : (char)e;
			n++;
			continue;
		}
		cp = (unsigned long)js_hex4(p);
		p += 4;
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			cp = 0x10000 + ((cp - 0xD800) << 10) +
			     ((unsigned long)js_hex4(p + 2) - 0xDC00);
			p += 6;
		}
		unsigned char u[4];
		size_t k;
		if (cp < 0x80) {
			u[0] = (unsigned char)cp;
			k = 1;
		} else if (cp < 0x800) {
			u[0] = (unsigned char)(0xC0 | (cp >> 6));
			u[1] = (unsigned char)(0x80 | (cp & 0x3F));
			k = 2;
		} else if (cp < 0x10000) {
			u[0] = (unsigned char)(0xE0 | (cp >> 12));
			u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
			u[2] = (unsigned char)(0x80 | (cp & 0x3F));
			k = 3;
		} else {
			u[0] = (unsigned char)(0xF0 | (cp >> 18));
			u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
			u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
			u[3] = (unsigned char)(0x80 | (cp & 0x3F));
			k = 4;
		}
		for (size_t i = 0; i < k; i++, n++)
			if (n < cap)
				out[n] = (char)u[i];
	}
	return n;
}

/* js_key_eq for a member name with escapes: unescaped first. */
static bool js_key_eq_escaped(const struct js_str *key, const char *name, size_t len)
{
	char buf[32];
	return key->n >= len && js_unescape(key, buf, sizeof buf) == len &&
	       memcmp(buf, name, len) == 0;
}

/* Whether a member name, unescaped, is `name` (len bytes, short, ASCII).
 * Inline: the common case, no escapes, is a length test and a memcmp (every
 * member of a body is compared with a few names). */
static inline bool js_key_eq(const struct js_str *key, const char *name, size_t len)
{
	if (!key->esc)
		return key->n == len && memcmp(key->b, name, len) == 0;
	return js_key_eq_escaped(key, name, len);
}

/* A member name known at compile time. */
struct js_name {
	const char *s;
	size_t n;
};
#define JS_NAME(lit)                                                                               \
	{                                                                                          \
		lit, sizeof(lit) - 1                                                               \
	}
#define js_key_is(key, lit) js_key_eq(key, lit, sizeof(lit) - 1)

/* The index of the name in names[0..n) the key is, or n. */
static size_t js_key_find(const struct js_str *key, const struct js_name *names, size_t n)
{
	size_t i;
	for (i = 0; i < n && !js_key_eq(key, names[i].s, names[i].n); i++)
		;
	return i;
}

/* A table of member names made from one list of X(ENUM, "name") rows: the
 * enum, the names in its order, and the mask of their lengths (each under 64
 * bytes), by which a name of another length is known absent in one test:
 * most members of a body are none of those a scan reads. */
#define JS_TABLE_ENUM(e, lit) e,
#define JS_TABLE_NAME(e, lit) JS_NAME(lit),
#define JS_TABLE_LEN(e, lit) | (UINT64_C(1) << (sizeof(lit) - 1))

/* js_key_find in a table whose lengths mask is `lengths`: a name without
 * escapes is compared only with the names of its length and first byte. */
static inline size_t js_key_lookup(const struct js_str *key, const struct js_name *names, size_t n,
                                   uint64_t lengths)
{
	if (key->esc)
		return js_key_find(key, names, n);
	if (key->n >= 64 || !((lengths >> key->n) & 1))
		return n;
	size_t i;
	for (i = 0; i < n; i++)
		if (names[i].n == key->n && names[i].s[0] == key->b[0] &&
		    memcmp(names[i].s, key->b, key->n) == 0)
			break;
	return i;
}

/* ---------- estimate ---------- */

/* A cache_control mark found in a value: whether there is one, and the
 * longest "ttl" a mark in it names (ms; 0: none). */
struct cache_mark {
	bool on;
	int64_t ttl_ms;
};

static void mark_merge(struct cache_mark *m, const struct cache_mark *o)
{
	m->on |= o->on;
	if (o->ttl_ms > m->ttl_ms)
		m->ttl_ms = o->ttl_ms;
}

/* The longest cache lifetime a mark may name (tokens_cost.cache_ttl_ms). */
#define TTL_MAX_MS INT64_C(86400000)

/* A "ttl" as Anthropic writes it ("5m", "1h"): 1 to 6 digits and a unit, s,
 * m or h; in ms, at most TTL_MAX_MS; 0 when it is not one. */
static int64_t ttl_ms_of(const char *p, size_t n)
{
	if (n < 2 || n > 7)
		return 0;
	int64_t v = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (!js_digit(p[i]))
			return 0;
		v = v * 10 + (p[i] - '0');
	}
	char u = p[n - 1];
	v *= u == 's' ? 1000 : u == 'm' ? 60000 : u == 'h' ? 3600000 : 0;
	return v < TTL_MAX_MS ? v : TTL_MAX_MS;
}

static int64_t ttl_of_str(const struct js_str *str)
{
	char buf[8];
	if (!str->esc)
		return ttl_ms_of(str->b, str->n);
	size_t n = js_unescape(str, buf, sizeof buf);
	return n <= sizeof buf ? ttl_ms_of(buf, n) : 0;
}

/* A "cache_control" value: a mark when it is an object, with the ttl its
 * "ttl" (the last one) names; returns its compact JSON characters (js_json_chars),
 * for tools that carry one. */
static int64_t scan_cache_control(struct js *s, struct cache_mark *cc)
{
	bool first = true;
	struct js_str k;
	int64_t n = 2;
	cc->on = false;
	cc->ttl_ms = 0;
	if (js_peek(s) != '{')
		return js_json_chars(s);
	if (!js_enter(s, '{'))
		return 0;
	cc->on = true;
	while (js_member_counted(s, &first, &k, &n)) {
		bool ttl = js_key_is(&k, "ttl");
		if (ttl)
			cc->ttl_ms = 0;
		if (!ttl || js_peek(s) != '"') {
			n += js_json_chars(s);
			continue;
		}
		struct js_str str;
		if (!js_room(s))
			break;
		n += js_string(s, &str) + 2;
		if (!s->bad)
			cc->ttl_ms = ttl_of_str(&str);
	}
	return n;
}

/* Members of a part or an item object that count (tokens.h), whatever the
 * object's "type": those whose value counts as a string (PM_SEALED: 3/4 of
 * it; PM_INPUT to PM_RESPONSE, a tool call's arguments as an object, count
 * as their compact JSON text when they are not a string, as tools do: Claude
 * Code's tool_use inputs, Gemini's functionCall args and functionResponse
 * response are often the bulk of an agent's context), then those that hold
 * content (a string, parts, or one part); and the object's own cache_control. */
#define PART_MEMBERS(X)                                                                            \
	X(PM_TEXT, "text")           /* text, input_text, output_text, summary_text parts */       \
	X(PM_NAME, "name")           /* function_call, custom_tool_call; Anthropic tool_use */     \
	X(PM_ARGUMENTS, "arguments") /* function_call */                                           \
	X(PM_INPUT, "input")         /* custom_tool_call's string; Anthropic tool_use's object */  \
	X(PM_ARGS, "args")           /* Gemini functionCall */                                     \
	X(PM_RESPONSE, "response")   /* Gemini functionResponse */                                 \
	X(PM_SEALED, "encrypted_content")   /* a reasoning item */                                 \
	X(PM_CONTENT, "content")            /* messages, reasoning text, Anthropic tool results */ \
	X(PM_FCALL, "functionCall")         /* Gemini: {name, args} */                             \
	X(PM_FRESPONSE, "functionResponse") /* Gemini: {name, response} */                         \
	X(PM_PARTS, "parts")                /* Gemini */                                           \
	X(PM_OUTPUT, "output")              /* function_call_output, custom_tool_call_output */    \
	X(PM_SUMMARY, "summary")            /* reasoning */                                        \
	X(PM_QUERIES, "queries")            /* file_search_call */                                 \
	X(PM_RESULTS, "results")            /* file_search_call: results[].text */                 \
	X(PM_CACHE_CONTROL, "cache_control")

enum part_member { PART_MEMBERS(JS_TABLE_ENUM) PM_END };
static const struct js_name part_names[] = {PART_MEMBERS(JS_TABLE_NAME)};
static const uint64_t part_lengths = 0 PART_MEMBERS(JS_TABLE_LEN);

/* Text of a content value: a string, an array of parts or strings, or one
 * part or item (part_members: {"text"}, {"content": ...} of a tool result,
 * {"parts": [...]} of Gemini, a Responses API item); an integer is a token
 * id. Deeper than MAX_DEPTH nothing counts. *mark: a part in it (counted, so
 * not deeper than MAX_DEPTH) carries a "cache_control" object, each member as
 * its last occurrence says. */
static int64_t scan_content(struct js *s, int depth, struct cache_mark *mark)
{
	char c = js_peek(s);
	mark->on = false;
	mark->ttl_ms = 0;
	if (depth > MAX_DEPTH) {
		js_skip(s);
		return 0;
	}
	if (c == '"')
		return js_chars(s);
	if (c == '-' || js_digit(c)) {
		int64_t id;
		return js_int(s, &id) ? CHARS_PER_TOKEN : 0;
	}
	int64_t n = 0;
	bool first = true;
	struct cache_mark m;
	if (c == '[') {
		js_enter(s, '[');
		while (js_element(s, &first)) {
			n += scan_content(s, depth + 1, &m);
			mark_merge(mark, &m);
		}
		return n;
	}
	if (c != '{') {
		js_skip(s);
		return 0;
	}
	/* each member as its last occurrence says: its count and its marks */
	int64_t v[PM_CACHE_CONTROL] = {0};
	struct cache_mark vm[PM_CACHE_CONTROL - PM_CONTENT] = {{0}};
	struct js_str k;
	js_enter(s, '{');
	while (js_member(s, &first, &k)) {
		size_t i = js_key_lookup(&k, part_names, PM_END, part_lengths);
		if (i >= PM_INPUT && i <= PM_RESPONSE && js_peek(s) != '"')
			v[i] = js_json_chars(s);
		else if (i < PM_CONTENT)
			v[i] = js_chars(s);
		else if (i < PM_CACHE_CONTROL)
			v[i] = scan_content(s, depth + 1, &vm[i - PM_CONTENT]);
		else if (i == PM_CACHE_CONTROL)
			scan_cache_control(s, mark);
		else
			js_skip(s);
	}
	v[PM_SEALED] = v[PM_SEALED] * 3 / 4; /* tokens.h: the text base64 carries */
	for (size_t i = 0; i < PM_CACHE_CONTROL; i++)
		n += v[i];
	for (size_t i = 0; i < PM_CACHE_CONTROL - PM_CONTENT; i++)
		mark_merge(mark, &vm[i]);
	return n;
}

/* "tools" or "functions": an array's compact JSON characters (js_json_chars;
 * tokens_cost.tools_tokens: a schema is JSON, and what a model reads of it is
 * its names, descriptions, types and the punctuation between them, so its
 * JSON text at the characters-per-token rule of the prose), 0 for another
 * type. *mark: a tool (an element) is an object whose "cache_control" (the
 * last) is an object. */
static int64_t scan_tools(struct js *s, struct cache_mark *mark)
{
	bool first = true, later = false;
	int64_t n = 2;
	mark->on = false;
	mark->ttl_ms = 0;
	if (js_peek(s) != '[') {
		js_skip(s);
		return 0;
	}
	if (!js_enter(s, '['))
		return 0;
	while (js_element(s, &first)) {
		n += later;
		later = true;
		if (js_peek(s) != '{') {
			n += js_json_chars(s);
			continue;
		}
		bool f1 = true;
		struct js_str k;
		struct cache_mark cc = {0};
		if (!js_enter(s, '{'))
			break;
		n += 2;
		while (js_member_counted(s, &f1, &k, &n)) {
			if (js_key_is(&k, "cache_control"))
				n += scan_cache_control(s, &cc);
			else
				n += js_json_chars(s);
		}
		mark_merge(mark, &cc);
	}
	return n;
}

/* messages[].tool_calls[].function.arguments: the arguments of an assistant's
 * earlier tool calls are prompt text too; in agent loops often the bulk. */
static int64_t scan_tool_calls(struct js *s)
{
	int64_t n = 0;
	bool first = true;
	if (!js_enter(s, '['))
		return 0;
	while (js_element(s, &first)) {
		int64_t args = 0;
		bool f1 = true;
		struct js_str k;
		if (!js_enter(s, '{'))
			continue;
		while (js_member(s, &f1, &k)) {
			if (!js_key_is(&k, "function")) {
				js_skip(s);
				continue;
			}
			bool f2 = true;
			args = 0;
			if (!js_enter(s, '{'))
				continue;
			while (js_member(s, &f2, &k)) {
				if (js_key_is(&k, "arguments"))
					args = js_chars(s);
				else
					js_skip(s);
			}
		}
		n += args;
	}
	return n;
}

/* Where the cacheable prefix of "system" or "messages" ends: raw spans of the
 * body (hashed only once the scan knows which one keys the prompt) and the
 * characters counted up to them. Elements are the granularity: a block of
 * "system", a whole message of "messages". */
struct prefix {
	const char *start, *end;          /* the field's value */
	int64_t chars;                    /* all of it */
	const char *first_end, *last_end; /* after the first and last marked element; NULL: none */
	int64_t first_chars, last_chars;
	int64_t ttl_ms;     /* the longest "ttl" its marks name */
	const char *m0_end; /* messages: the end of the first message */
	int64_t m0_chars;   /* its characters */
	bool m0_system;     /* its role is "system" or "developer" */
};

static void prefix_mark(struct prefix *px, const char *end, int64_t chars,
                        const struct cache_mark *m)
{
	if (m->ttl_ms > px->ttl_ms)
		px->ttl_ms = m->ttl_ms;
	if (px->first_end == NULL) {
		px->first_end = end;
		px->first_chars = chars;
	}
	px->last_end = end;
	px->last_chars = chars;
}

/* "system": counted as scan_content counts it, block by block when an array. */
static int64_t scan_system(struct js *s, struct prefix *px)
{
	bool first = true;
	struct cache_mark m;
	memset(px, 0, sizeof *px);
	js_peek(s);
	px->start = s->p;
	if (js_peek(s) != '[') {
		px->chars = scan_content(s, 0, &m);
		if (m.on)
			prefix_mark(px, s->p, px->chars, &m);
	} else {
		js_enter(s, '[');
		while (js_element(s, &first)) {
			px->chars += scan_content(s, 1, &m);
			if (m.on)
				prefix_mark(px, s->p, px->chars, &m);
		}
	}
	px->end = s->p;
	return px->chars;
}

/* A message's "role" names the system prompt ("developer" in newer OpenAI APIs). */
static bool scan_system_role(struct js *s)
{
	struct js_str str;
	if (js_peek(s) != '"') {
		js_skip(s);
		return false;
	}
	if (!js_room(s))
		return false;
	js_string(s, &str);
	return !s->bad && (js_key_is(&str, "system") || js_key_is(&str, "developer"));
}

static int64_t scan_messages(struct js *s, struct prefix *px)
{
	int64_t n = 0;
	bool first = true;
	memset(px, 0, sizeof *px);
	js_peek(s);
	px->start = s->p;
	if (!js_enter(s, '['))
		goto out;
	while (js_element(s, &first)) {
		int64_t content = 0, calls = 0;
		bool f1 = true, sys = false, m0 = px->m0_end == NULL;
		struct cache_mark mark = {0};
		struct js_str k;
		if (js_enter(s, '{')) {
			while (js_member(s, &f1, &k)) {
				if (js_key_is(&k, "content"))
					content = scan_content(s, 1, &mark);
				else if (js_key_is(&k, "tool_calls"))
					calls = scan_tool_calls(s);
				else if (m0 && js_key_is(&k, "role"))
					sys = scan_system_role(s);
				else
					js_skip(s);
			}
		}
		n += content + calls;
		if (m0) {
			px->m0_end = s->p;
			px->m0_chars = content + calls;
			px->m0_system = sys;
		}
		if (mark.on)
			prefix_mark(px, s->p, n, &mark);
	}
out:
	px->end = s->p;
	px->chars = n;
	return n;
}

/* A positive integer, clamped; 0 when absent, not an integer or not positive. */
static int64_t scan_positive(struct js *s, int64_t cap)
{
	int64_t v;
	if (!js_int(s, &v) || v <= 0)
		return 0;
	return v > cap ? cap : v;
}

/* The top-level "stream_options", the last one: whether it is there and an
 * object, where its closing brace is, whether it has members, and the raw
 * value of its "include_usage" (the last; NULL: none). */
struct stream_options {
	bool present, object, members;
	const char *close;
	const char *usage, *usage_end;
};

static void scan_stream_options(struct js *s, struct stream_options *o)
{
	bool first = true;
	struct js_str k;
	memset(o, 0, sizeof *o);
	o->present = true;
	if (!js_enter(s, '{'))
		return;
	o->object = true;
	while (js_member(s, &first, &k)) {
		o->members = true;
		if (!js_key_is(&k, "include_usage")) {
			js_skip(s);
			continue;
		}
		js_peek(s);
		o->usage = s->p;
		js_skip(s);
		o->usage_end = s->p;
	}
	o->close = s->p - 1; /* js_next stepped over it */
}

/* What the estimate reads of the top-level object; each member as its last
 * occurrence says. */
struct est_fields {
	int64_t messages;
	bool has_messages;
	int64_t text[7]; /* input, prompt, system, contents, instructions, systemInstruction,
	                    system_instruction */
	const char *text_start[7], *text_end[7]; /* start NULL: the member is absent */
	/* "tools", "functions": compact JSON characters, the arrays' spans
	 * (start NULL: absent or not an array), their marks */
	int64_t tools[2];
	const char *tools_start[2], *tools_end[2];
	struct cache_mark tools_mark[2];
	int64_t max[3]; /* max_tokens, max_completion_tokens, max_output_tokens */
	int64_t n, gen_max, gen_cand;
	bool embedding;
	struct js_str model; /* model.b == NULL: none, or not a valid name */
	struct prefix sys, msgs;
	/* For tokens_cost.ask_usage: "stream" is true; the object's closing
	 * brace; "stream_options" as read (stream_options_at). */
	bool stream;
	const char *close;
	struct stream_options opts;
	bool flex; /* "service_tier": "flex" (tokens_cost.flex_tier) */
	/* History the provider holds (tokens_cost.chained, stored) */
	bool previous;      /* "previous_response_id" names one */
	struct js_str conv; /* the conversation's id; b NULL: none */
	bool store_false;   /* "store": false */
};

enum { TF_INPUT, TF_PROMPT, TF_SYSTEM, TF_CONTENTS, TF_INSTRUCTIONS, TF_SYS_INSTR, TF_SYS_INSTR2 };

/* The top-level members the estimate reads, the most common first: the
 * text fields in TF_ order, the maxima in est_fields.max's, the tools in
 * est_fields.tools'. */
#define TOP_MEMBERS(X)                                                                             \
	X(T_MODEL, "model")                                                                        \
	X(T_MESSAGES, "messages")                                                                  \
	X(T_MAX_TOKENS, "max_tokens")                                                              \
	X(T_MAX_COMPLETION, "max_completion_tokens")                                               \
	X(T_MAX_OUTPUT, "max_output_tokens")                                                       \
	X(T_STREAM, "stream")                                                                      \
	X(T_STREAM_OPTIONS, "stream_options")                                                      \
	X(T_INPUT, "input")                                                                        \
	X(T_PROMPT, "prompt")                                                                      \
	X(T_SYSTEM, "system")                                                                      \
	X(T_CONTENTS, "contents")                                                                  \
	X(T_INSTRUCTIONS, "instructions")                                                          \
	X(T_SYS_INSTR, "systemInstruction")                                                        \
	X(T_SYS_INSTR2, "system_instruction")                                                      \
	X(T_TOOLS, "tools")                                                                        \
	X(T_FUNCTIONS, "functions")                                                                \
	X(T_N, "n")                                                                                \
	X(T_GENERATION, "generationConfig")                                                        \
	X(T_SERVICE_TIER, "service_tier")                                                          \
	X(T_PREVIOUS, "previous_response_id")                                                      \
	X(T_CONVERSATION, "conversation")                                                          \
	X(T_STORE, "store")

enum top_member { TOP_MEMBERS(JS_TABLE_ENUM) T_END };
static const struct js_name top_names[] = {TOP_MEMBERS(JS_TABLE_NAME)};
static const uint64_t top_lengths = 0 TOP_MEMBERS(JS_TABLE_LEN);
_Static_assert(T_SYS_INSTR2 - T_INPUT == TF_SYS_INSTR2, "text fields in TF_ order");

/* A byte a model name may hold: printable ASCII but space, '"' and '\\' (it
 * names lanes in logs, metrics labels and store keys). */
static bool model_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '"' && c != '\\';
}

static bool model_valid(const char *p, size_t n)
{
	if (n == 0 || n > TOKENS_MODEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!model_byte((unsigned char)p[i]))
			return false;
	return true;
}

/* "model": the name (kept when valid, see tokens.h) and whether it names an
 * embedding model (contains "embed", valid name or not). */
static void scan_model(struct js *s, struct est_fields *f)
{
	struct js_str str;
	f->embedding = false;
	f->model.b = NULL;
	if (js_peek(s) != '"') {
		js_skip(s);
		return;
	}
	if (!js_room(s))
		return;
	js_string(s, &str);
	if (s->bad)
		return;
	if (!str.esc) {
		f->embedding = memmem(str.b, str.n, "embed", 5) != NULL;
		if (model_valid(str.b, str.n))
			f->model = str;
		return;
	}
	char small[256];
	char *buf = str.n <= sizeof small ? small : malloc(str.n);
	if (buf == NULL)
		return;
	size_t n = js_unescape(&str, buf, str.n);
	f->embedding = memmem(buf, n, "embed", 5) != NULL;
	if (model_valid(buf, n))
		f->model = str;
	if (buf != small)
		free(buf);
}

/* Whether the value is the literal true (checked by the skip). */
/* Whether the value is the string lit (lit_len bytes, no escapes in lit; an
 * escaped string is compared as it is written). */
static bool scan_string_is(struct js *s, const char *lit, size_t lit_len)
{
	struct js_str str;
	if (js_peek(s) != '"') {
		js_skip(s);
		return false;
	}
	if (!js_room(s))
		return false;
	js_string(s, &str);
	return !s->bad && !str.esc && str.n == lit_len && memcmp(str.b, lit, lit_len) == 0;
}

static bool scan_true(struct js *s)
{
	bool t = js_peek(s) == 't';
	js_skip(s);
	return t && !s->bad;
}

static bool scan_false(struct js *s)
{
	bool f = js_peek(s) == 'f';
	js_skip(s);
	return f && !s->bad;
}

/* A string that is not empty: true with its raw span in *str (when not
 * NULL); another value is skipped. */
static bool scan_nonempty(struct js *s, struct js_str *str)
{
	struct js_str tmp;
	if (js_peek(s) != '"') {
		js_skip(s);
		return false;
	}
	if (!js_room(s))
		return false;
	js_string(s, str != NULL ? str : &tmp);
	return !s->bad && (str != NULL ? str : &tmp)->n > 0;
}

/* "conversation": its id, a string or an object's "id" (the last), when it
 * is a non-empty string; else conv->b NULL. */
static void scan_conversation(struct js *s, struct js_str *conv)
{
	bool first = true;
	struct js_str k;
	conv->b = NULL;
	if (js_peek(s) != '{') {
		if (!scan_nonempty(s, conv))
			conv->b = NULL;
		return;
	}
	if (!js_enter(s, '{'))
		return;
	while (js_member(s, &first, &k)) {
		if (!js_key_is(&k, "id")) {
			js_skip(s);
		} else if (!scan_nonempty(s, conv)) {
			conv->b = NULL;
		}
	}
}

static void scan_generation_config(struct js *s, struct est_fields *f)
{
	bool first = true;
	struct js_str k;
	f->gen_max = f->gen_cand = 0;
	if (!js_enter(s, '{'))
		return;
	while (js_member(s, &first, &k)) {
		if (js_key_is(&k, "maxOutputTokens"))
			f->gen_max = scan_positive(s, MAX_OUTPUT);
		else if (js_key_is(&k, "candidateCount"))
			f->gen_cand = scan_positive(s, MAX_N);
		else
			js_skip(s);
	}
}

/* The body as jansson would load it, read into *f: false when it is not a
 * JSON object. */
static bool scan_request(const char *body, size_t len, struct est_fields *f)
{
	struct js s = {body, body + len, 0, false};
	bool first = true;
	struct cache_mark m;
	struct js_str k;

	memset(f, 0, sizeof *f);
	if (js_peek(&s) != '{')
		return false;
	js_enter(&s, '{');
	while (js_member(&s, &first, &k)) {
		size_t i = js_key_lookup(&k, top_names, T_END, top_lengths);
		switch (i) {
		case T_MODEL:
			scan_model(&s, f);
			break;
		case T_MESSAGES:
			f->messages = scan_messages(&s, &f->msgs);
			f->has_messages = true;
			break;
		case T_MAX_TOKENS:
		case T_MAX_COMPLETION:
		case T_MAX_OUTPUT:
			f->max[i - T_MAX_TOKENS] = scan_positive(&s, MAX_OUTPUT);
			break;
		case T_STREAM:
			f->stream = scan_true(&s);
			break;
		case T_STREAM_OPTIONS:
			scan_stream_options(&s, &f->opts);
			break;
		case T_INPUT:
		case T_PROMPT:
		case T_SYSTEM:
		case T_CONTENTS:
		case T_INSTRUCTIONS:
		case T_SYS_INSTR:
		case T_SYS_INSTR2:
			i -= T_INPUT;
			js_peek(&s);
			f->text_start[i] = s.p;
			f->text[i] =
			    i == TF_SYSTEM ? scan_system(&s, &f->sys) : scan_content(&s, 0, &m);
			f->text_end[i] = s.p;
			break;
		case T_TOOLS:
		case T_FUNCTIONS:
			i -= T_TOOLS;
			f->tools_start[i] = js_peek(&s) == '[' ? s.p : NULL;
			f->tools[i] = scan_tools(&s, &f->tools_mark[i]);
			f->tools_end[i] = s.p;
			break;
		case T_N:
			f->n = scan_positive(&s, MAX_N);
			break;
		case T_GENERATION:
			scan_generation_config(&s, f);
			break;
		case T_SERVICE_TIER:
			f->flex = scan_string_is(&s, "flex", 4);
			break;
		case T_PREVIOUS:
			f->previous = scan_nonempty(&s, NULL);
			break;
		case T_CONVERSATION:
			scan_conversation(&s, &f->conv);
			break;
		case T_STORE:
			f->store_false = scan_false(&s);
			break;
		default:
			js_skip(&s);
		}
	}
	f->close = s.p - 1;
	js_peek(&s);
	return !s.bad && s.p == s.end;
}

/* The edit that asks a streamed request for its usage (tokens.h). */
static void ask_usage(const char *body, const struct est_fields *f, struct tokens_edit *e)
{
	const struct stream_options *o = &f->opts;
	static const char add_options[] = ",\"stream_options\":{\"include_usage\":true}";
	static const char add_member[] = ",\"include_usage\":true";
	if (!f->stream || (o->present && !o->object))
		return;
	if (!o->present) {
		*e = (struct tokens_edit){add_options, (size_t)(f->close - body), 0};
	} else if (o->usage == NULL) {
		/* the member goes last, as jansson would put it */
		*e = (struct tokens_edit){add_member + !o->members, (size_t)(o->close - body), 0};
	} else if (!(o->usage_end - o->usage == 4 && memcmp(o->usage, "true", 4) == 0)) {
		*e = (struct tokens_edit){"true", (size_t)(o->usage - body),
		                          (size_t)(o->usage_end - o->usage)};
	}
}

static int64_t output_tokens(const struct est_fields *f, unsigned default_output)
{
	if (f->embedding)
		return 0;
	int64_t out = f->gen_max;
	for (size_t i = 0; i < 3; i++)
		if (f->max[i] > out)
			out = f->max[i];
	if (out == 0)
		out = default_output;
	int64_t n = f->gen_cand > f->n ? f->gen_cand : f->n;
	return n > 1 ? out * n : out;
}

/* A fixed seed: the same prompt has the same key in every replica. */
#define PROMPT_SEED UINT64_C(0x70616365726470)

static uint64_t span_hash(const char *b, const char *e, uint64_t seed)
{
	return b != NULL && e > b ? intern_hash(b, (size_t)(e - b), seed) : seed;
}

static uint64_t nonzero(uint64_t h)
{
	return h != 0 ? h : 1;
}

/* The hash the prefix's key starts from: the tool definitions' text, which
 * comes first in the prompt every provider renders. */
static uint64_t tools_seed(const struct est_fields *f)
{
	uint64_t h = PROMPT_SEED;
	for (size_t i = 0; i < 2; i++)
		if (f->tools_start[i] != NULL)
			h = span_hash(f->tools_start[i], f->tools_end[i], h);
	return h;
}

/* The cacheable prefix (tokens.h): keys and their estimates, in the order
 * Anthropic reads a prompt: tools (one element), "system", "messages". Each
 * span is hashed once at most on the common paths (hashing is the one cost
 * here that grows with the prompt). */
static void prompt_prefix(const struct est_fields *f, struct tokens_cost *c)
{
	const struct prefix *sys = &f->sys, *msgs = &f->msgs;
	const int64_t tt = c->tools_tokens;
	const bool tmark = f->tools_mark[0].on || f->tools_mark[1].on;
	const uint64_t seed = tools_seed(f);
	c->cache_marked = tmark || sys->last_end != NULL || msgs->last_end != NULL;
	if (c->cache_marked) {
		uint64_t hs = seed; /* the tools and the whole system, when messages are marked */
		/* through the last mark */
		if (msgs->last_end != NULL) {
			hs = span_hash(sys->start, sys->end, seed);
			c->prompt_key = nonzero(span_hash(msgs->start, msgs->last_end, hs));
			c->prefix_tokens = tt + (sys->chars + msgs->last_chars + 3) / 4;
		} else if (sys->last_end != NULL) {
			c->prompt_key = nonzero(span_hash(sys->start, sys->last_end, seed));
			c->prefix_tokens = tt + (sys->last_chars + 3) / 4;
		} else {
			c->prompt_key = nonzero(seed);
			c->prefix_tokens = tt;
		}
		/* through the first */
		if (tmark) {
			c->head_key = nonzero(seed);
			c->head_tokens = tt;
		} else if (sys->first_end != NULL) {
			c->head_key = sys->first_end == sys->last_end && msgs->last_end == NULL
			                  ? c->prompt_key
			                  : nonzero(span_hash(sys->start, sys->first_end, seed));
			c->head_tokens = tt + (sys->first_chars + 3) / 4;
		} else {
			c->head_key = msgs->first_end == msgs->last_end
			                  ? c->prompt_key
			                  : nonzero(span_hash(msgs->start, msgs->first_end, hs));
			c->head_tokens = tt + (sys->chars + msgs->first_chars + 3) / 4;
		}
		return;
	}
	/* No marks: the system prompt, else a long first message (the tools
	 * before either). */
	static const int order[] = {TF_SYSTEM, TF_INSTRUCTIONS, TF_SYS_INSTR, TF_SYS_INSTR2};
	const char *b = NULL, *e = NULL;
	int64_t chars = 0;
	for (size_t i = 0; i < sizeof order / sizeof order[0] && chars == 0; i++) {
		b = f->text_start[order[i]];
		e = f->text_end[order[i]];
		chars = f->text[order[i]];
	}
	if (chars == 0 && msgs->m0_end != NULL &&
	    (msgs->m0_system || msgs->m0_chars >= TOKENS_LONG_PREFIX_CHARS)) {
		b = msgs->start;
		e = msgs->m0_end;
		chars = msgs->m0_chars;
	}
	if (chars > 0) {
		c->prompt_key = c->head_key = nonzero(span_hash(b, e, seed));
		c->prefix_tokens = c->head_tokens = tt + (chars + 3) / 4;
	}
}

/* A fixed seed for conversation ids, apart from the prompts'. */
#define CHAIN_SEED UINT64_C(0x636861696e6b6579)

/* History the provider holds (tokens.h: chained, stored, chain_key). */
static void held_history(const struct est_fields *f, struct tokens_cost *c)
{
	c->chained = f->previous || f->conv.b != NULL;
	if (f->conv.b != NULL)
		c->chain_key = nonzero(intern_hash(f->conv.b, f->conv.n, CHAIN_SEED));
	c->stored = !f->store_false && !f->has_messages && f->text_start[TF_CONTENTS] == NULL &&
	            !f->embedding &&
	            (f->text_start[TF_INPUT] != NULL || f->text_start[TF_INSTRUCTIONS] != NULL);
	c->items_tokens = (f->text[TF_INPUT] + 3) / 4;
}

int64_t tokens_estimate(const char *body, size_t len, unsigned default_output_tokens,
                        struct tokens_cost *detail)
{
	struct tokens_cost c = {0};

	if (body != NULL && len > 0) {
		struct est_fields f;
		c.json = scan_request(body, len, &f);
		if (c.json) {
			int64_t chars = f.messages;
			for (size_t i = 0; i < 7; i++)
				chars += f.text[i];
			c.tools_tokens = (f.tools[0] + f.tools[1] + 3) / 4;
			c.prompt = (chars + 3) / 4 + c.tools_tokens;
			c.output = output_tokens(&f, default_output_tokens);
			c.output_named = f.embedding || f.gen_max > 0 || f.max[0] > 0 ||
			                 f.max[1] > 0 || f.max[2] > 0;
			if (f.model.b != NULL) {
				c.model = f.model.b;
				c.model_len = f.model.n;
				c.model_escaped = f.model.esc;
			}
			prompt_prefix(&f, &c);
			struct cache_mark ttl = {false, f.sys.ttl_ms};
			mark_merge(&ttl, &f.tools_mark[0]);
			mark_merge(&ttl, &f.tools_mark[1]);
			if (f.msgs.ttl_ms > ttl.ttl_ms)
				ttl.ttl_ms = f.msgs.ttl_ms;
			c.cache_ttl_ms = ttl.ttl_ms;
			held_history(&f, &c);
			ask_usage(body, &f, &c.ask_usage);
			c.flex_tier = f.flex;
		} else {
			c.output = default_output_tokens;
		}
	}
	c.total = c.prompt + c.output;
	if (detail != NULL)
		*detail = c;
	return c.total;
}

const char *tokens_model_name(const struct tokens_cost *c, char *buf, size_t *len)
{
	if (c->model == NULL) {
		*len = 0;
		return NULL;
	}
	if (!c->model_escaped) {
		*len = c->model_len;
		return c->model;
	}
	struct js_str str = {c->model, c->model_len, true};
	*len = js_unescape(&str, buf, TOKENS_MODEL_MAX); /* <= the cap: checked by the scan */
	return buf;
}

/* ---------- usage ---------- */

enum usage_key {
	UK_PROMPT,            /* prompt_tokens */
	UK_INPUT,             /* input_tokens */
	UK_CACHE_CREATE,      /* cache_creation_input_tokens */
	UK_CACHE_READ,        /* cache_read_input_tokens */
	UK_COMPLETION,        /* completion_tokens */
	UK_OUTPUT,            /* output_tokens */
	UK_TOTAL,             /* total_tokens */
	UK_G_PROMPT,          /* promptTokenCount */
	UK_G_CANDIDATES,      /* candidatesTokenCount */
	UK_G_THOUGHTS,        /* thoughtsTokenCount */
	UK_G_TOTAL,           /* totalTokenCount */
	UK_PROMPT_CACHED,     /* prompt_tokens_details.cached_tokens */
	UK_INPUT_CACHED,      /* input_tokens_details.cached_tokens */
	UK_COMPLETION_REASON, /* completion_tokens_details.reasoning_tokens */
	UK_OUTPUT_REASON,     /* output_tokens_details.reasoning_tokens */
	UK_N
};
_Static_assert(UK_N == TOKENS_USAGE_COUNTS, "one count per usage key");
#define UK_DIRECT UK_PROMPT_CACHED /* the counts that are members of the object itself */

/* A count at s->p: an integer >= 0, else none. */
static void scan_count(struct js *s, struct tokens_usage_obj *u, size_t i)
{
	int64_t v;
	u->has[i] = js_int(s, &v) && v >= 0;
	u->v[i] = u->has[i] ? v : 0;
}

/* A details object (prompt_tokens_details, …) at s->p: its member `name` is
 * count i; the last details object counts whole. */
static void scan_usage_details(struct js *s, struct tokens_usage_obj *u, size_t i,
                               const struct js_name *name)
{
	bool first = true;
	struct js_str k;
	u->has[i] = false;
	u->v[i] = 0;
	if (!js_enter(s, '{'))
		return;
	while (js_member(s, &first, &k)) {
		if (js_key_eq(&k, name->s, name->n))
			scan_count(s, u, i);
		else
			js_skip(s);
	}
}

static void scan_usage_obj(struct js *s, struct tokens_usage_obj *u)
{
	static const struct js_name names[UK_DIRECT] = {JS_NAME("prompt_tokens"),
	                                                JS_NAME("input_tokens"),
	                                                JS_NAME("cache_creation_input_tokens"),
	                                                JS_NAME("cache_read_input_tokens"),
	                                                JS_NAME("completion_tokens"),
	                                                JS_NAME("output_tokens"),
	                                                JS_NAME("total_tokens"),
	                                                JS_NAME("promptTokenCount"),
	                                                JS_NAME("candidatesTokenCount"),
	                                                JS_NAME("thoughtsTokenCount"),
	                                                JS_NAME("totalTokenCount")};
	static const struct js_name details[UK_N - UK_DIRECT] = {
	    JS_NAME("prompt_tokens_details"), JS_NAME("input_tokens_details"),
	    JS_NAME("completion_tokens_details"), JS_NAME("output_tokens_details")};
	static const struct js_name cached = JS_NAME("cached_tokens"),
	                            reasoning = JS_NAME("reasoning_tokens");
	bool first = true;
	struct js_str k;
	memset(u, 0, sizeof *u);
	if (!js_enter(s, '{'))
		return;
	u->object = true;
	while (js_member(s, &first, &k)) {
		size_t i = js_key_find(&k, names, UK_DIRECT);
		if (i < UK_DIRECT) {
			scan_count(s, u, i);
			continue;
		}
		i = js_key_find(&k, details, UK_N - UK_DIRECT);
		if (i < UK_N - UK_DIRECT)
			scan_usage_details(s, u, UK_DIRECT + i, i < 2 ? &cached : &reasoning);
		else
			js_skip(s);
	}
}

bool tokens_usage_object(const char *text, size_t len, struct tokens_usage_obj *o)
{
	memset(o, 0, sizeof *o);
	if (len == 0)
		return false;
	struct js s = {text, text + len, 0, false};
	scan_usage_obj(&s, o);
	js_peek(&s);
	if (!s.bad && s.p == s.end)
		return true;
	memset(o, 0, sizeof *o);
	return false;
}

/* The first count of a and b that the object has: true and *v. */
static bool usage_either(const struct tokens_usage_obj *o, size_t a, size_t b, int64_t *v)
{
	*v = o->has[a] ? o->v[a] : o->v[b];
	return o->has[a] || o->has[b];
}

static int64_t less_or_zero(int64_t a, int64_t b)
{
	return a > b ? a - b : 0;
}

void tokens_usage_merge(const struct tokens_usage_obj *o, bool gemini, struct tokens_usage *u)
{
	int64_t in = 0, out = 0, total = 0, reasoning = 0;
	bool has_in, has_out, has_total, has_reasoning;

	if (!o->object)
		return;
	if (gemini) {
		has_in = o->has[UK_G_PROMPT];
		in = o->v[UK_G_PROMPT];
		has_out = o->has[UK_G_CANDIDATES];
		out = o->v[UK_G_CANDIDATES];
		has_reasoning = o->has[UK_G_THOUGHTS];
		if (has_reasoning) { /* candidatesTokenCount leaves the thoughts out */
			reasoning = o->v[UK_G_THOUGHTS];
			out += reasoning;
			has_out = true;
		}
		has_total = o->has[UK_G_TOTAL];
		total = o->v[UK_G_TOTAL];
	} else {
		int64_t cached = 0;
		has_in = usage_either(o, UK_PROMPT, UK_INPUT, &in);
		if (has_in && o->has[UK_CACHE_CREATE])
			in += o->v[UK_CACHE_CREATE];
		/* OpenAI's cached_tokens are a part of its input count;
		 * Anthropic's cache reads are not a part of its own. */
		bool cached_in_input = !o->has[UK_CACHE_READ] &&
		                       usage_either(o, UK_PROMPT_CACHED, UK_INPUT_CACHED, &cached);
		if (o->has[UK_CACHE_CREATE] || o->has[UK_CACHE_READ] || cached_in_input) {
			u->has_cache = true;
			u->cache_creation = o->has[UK_CACHE_CREATE] ? o->v[UK_CACHE_CREATE] : 0;
			u->cache_read = cached_in_input ? cached : o->v[UK_CACHE_READ];
		}
		has_out = usage_either(o, UK_COMPLETION, UK_OUTPUT, &out);
		/* inside the output count already: told, never added */
		has_reasoning = usage_either(o, UK_COMPLETION_REASON, UK_OUTPUT_REASON, &reasoning);
		has_total = o->has[UK_TOTAL];
		total = o->v[UK_TOTAL];
		if (cached_in_input) {
			in = less_or_zero(in, cached);
			total = less_or_zero(total, cached);
		}
	}
	if (!has_in && !has_out && !has_total)
		return;
	if (has_in) {
		u->has_input = true;
		u->input = in;
	}
	if (has_out) {
		u->has_output = true;
		u->output = out;
	}
	if (has_reasoning)
		u->reasoning = reasoning;
	u->total = has_total ? total : u->input + u->output;
	u->present = true;
}

struct tokens_usage tokens_usage_counted(const struct tokens_usage *u, bool cache_reads_free)
{
	struct tokens_usage c = *u;
	if (!cache_reads_free && u->has_cache && u->cache_read > 0) {
		if (c.has_input)
			c.input += u->cache_read;
		c.total += u->cache_read;
	}
	return c;
}
