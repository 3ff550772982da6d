/* tokens — see tokens.h. */
#include "tokens.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MAX_N 128
/* A requested maximum above this is a typo or an attack, not a plan. */
#define MAX_OUTPUT INT64_C(100000000)
/* Nesting followed inside content parts (tool results hold parts). */
#define MAX_DEPTH 8
/* A token id in an "input" or "prompt" array is one token: 4 characters. */
#define CHARS_PER_TOKEN 4

/* ---------- estimate ---------- */

static int64_t utf8_chars(const char *s, size_t len)
{
	int64_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

static int64_t string_chars(json_t *v)
{
	return json_is_string(v) ? utf8_chars(json_string_value(v), json_string_length(v)) : 0;
}

/* Text of a content value: a string, an array of parts or strings, or one part
 * ({"text"}, {"content": ...} of a tool result, {"parts": [...]} of Gemini). */
static int64_t content_chars(json_t *v, int depth)
{
	if (depth > MAX_DEPTH)
		return 0;
	if (json_is_string(v))
		return string_chars(v);
	if (json_is_integer(v)) /* a token id */
		return CHARS_PER_TOKEN;
	int64_t n = 0;
	if (json_is_array(v)) {
		size_t i;
		json_t *el;
		json_array_foreach(v, i, el) n += content_chars(el, depth + 1);
	} else if (json_is_object(v)) {
		n += string_chars(json_object_get(v, "text"));
		n += content_chars(json_object_get(v, "content"), depth + 1);
		n += content_chars(json_object_get(v, "parts"), depth + 1);
	}
	return n;
}

/* The arguments of an assistant's earlier tool calls are prompt text too: in
 * agent loops they are often the bulk of it. */
static int64_t tool_call_chars(json_t *calls)
{
	int64_t n = 0;
	size_t i;
	json_t *c;
	json_array_foreach(calls, i, c) n +=
	    string_chars(json_object_get(json_object_get(c, "function"), "arguments"));
	return n;
}

static int64_t prompt_chars(json_t *root)
{
	static const char *const fields[] = {"input",
	                                     "prompt",
	                                     "system",
	                                     "contents",
	                                     "instructions",
	                                     "systemInstruction",
	                                     "system_instruction"};
	int64_t n = 0;
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(root, "messages"), i, m)
	{
		n += content_chars(json_object_get(m, "content"), 1);
		n += tool_call_chars(json_object_get(m, "tool_calls"));
	}
	for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
		n += content_chars(json_object_get(root, fields[f]), 0);
	return n;
}

/* A positive integer member, clamped; 0 when absent or not positive. */
static int64_t positive(json_t *obj, const char *key, int64_t cap)
{
	json_t *v = json_object_get(obj, key);
	json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
	if (x <= 0)
		return 0;
	return x > cap ? cap : (int64_t)x;
}

static bool is_embedding(json_t *root)
{
	const char *model = json_string_value(json_object_get(root, "model"));
	return model != NULL && strstr(model, "embed") != NULL;
}

static int64_t output_tokens(json_t *root, unsigned default_output)
{
	static const char *const fields[] = {"max_tokens", "max_completion_tokens",
	                                     "max_output_tokens"};
	json_t *gen = json_object_get(root, "generationConfig");
	int64_t out = positive(gen, "maxOutputTokens", MAX_OUTPUT);

	if (is_embedding(root))
		return 0;
	for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
		int64_t v = positive(root, fields[f], MAX_OUTPUT);
		if (v > out)
			out = v;
	}
	if (out == 0)
		out = default_output;
	int64_t n = positive(root, "n", MAX_N);
	int64_t cand = positive(gen, "candidateCount", MAX_N);
	if (cand > n)
		n = cand;
	return n > 1 ? out * n : out;
}

/* Whether the first non-blank byte opens an object: a multipart upload or
 * other binary body is then dismissed without running the parser over it. */
static bool looks_like_object(const char *s, size_t len)
{
	size_t i = 0;
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
		i++;
	return i < len && s[i] == '{';
}

int64_t tokens_estimate(const char *body, size_t len, unsigned default_output_tokens,
                        struct tokens_cost *detail)
{
	struct tokens_cost c = {0};

	if (body != NULL && len > 0) {
		json_t *root = looks_like_object(body, len) ? json_loadb(body, len, 0, NULL) : NULL;
		c.json = json_is_object(root);
		if (c.json) {
			c.prompt = (prompt_chars(root) + 3) / 4;
			c.output = output_tokens(root, default_output_tokens);
		} else {
			c.output = default_output_tokens;
		}
		json_decref(root);
	}
	c.total = c.prompt + c.output;
	if (detail != NULL)
		*detail = c;
	return c.total;
}

/* ---------- usage ---------- */

static bool get_count(json_t *obj, const char *key, int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (int64_t)json_integer_value(v);
	return true;
}

/* Merges one usage object into *u: the fields it carries replace the earlier
 * ones (Anthropic's message_delta carries only the cumulative output). */
static bool merge_usage(json_t *usage, struct tokens_usage *u, bool gemini)
{
	int64_t in = 0, out = 0, total = 0, extra = 0;
	bool has_in, has_out, has_total;

	if (!json_is_object(usage))
		return false;
	if (gemini) {
		has_in = get_count(usage, "promptTokenCount", &in);
		has_out = get_count(usage, "candidatesTokenCount", &out);
		if (get_count(usage, "thoughtsTokenCount", &extra)) {
			out += extra;
			has_out = true;
		}
		has_total = get_count(usage, "totalTokenCount", &total);
	} else {
		has_in =
		    get_count(usage, "prompt_tokens", &in) || get_count(usage, "input_tokens", &in);
		if (has_in && get_count(usage, "cache_creation_input_tokens", &extra))
			in += extra;
		has_out = get_count(usage, "completion_tokens", &out) ||
		          get_count(usage, "output_tokens", &out);
		has_total = get_count(usage, "total_tokens", &total);
	}
	if (!has_in && !has_out && !has_total)
		return false;
	if (has_in) {
		u->has_input = true;
		u->input = in;
	}
	if (has_out) {
		u->has_output = true;
		u->output = out;
	}
	u->total = has_total ? total : u->input + u->output;
	u->present = true;
	return true;
}

/* Where each API keeps its usage object. */
static bool usage_from_object(json_t *root, struct tokens_usage *u)
{
	json_t *msg = json_object_get(root, "message");   /* Anthropic message_start */
	json_t *resp = json_object_get(root, "response"); /* Responses API events */
	json_t *groq = json_object_get(root, "x_groq");   /* Groq stream */
	bool found = merge_usage(json_object_get(root, "usage"), u, false);
	found |= merge_usage(json_object_get(root, "usageMetadata"), u, true);
	found |= merge_usage(json_object_get(msg, "usage"), u, false);
	found |= merge_usage(json_object_get(resp, "usage"), u, false);
	found |= merge_usage(json_object_get(groq, "usage"), u, false);
	return found;
}

bool tokens_usage_json(const char *body, size_t len, struct tokens_usage *out)
{
	memset(out, 0, sizeof *out);
	if (body == NULL || len == 0)
		return false;
	json_t *root = json_loadb(body, len, 0, NULL);
	if (json_is_object(root))
		usage_from_object(root, out);
	json_decref(root);
	return out->present;
}

/* ---------- SSE ---------- */

void tokens_sse_init(struct tokens_sse *s)
{
	memset(s, 0, sizeof *s);
}

void tokens_sse_free(struct tokens_sse *s)
{
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = 0;
}

/* Whether s holds the member name "usage..." (usage, usageMetadata) whose
 * value is not null. A quoted word inside a string value is escaped (\"usage\")
 * and does not look like a member name. */
static bool mentions_usage(const char *s, size_t len)
{
	static const char key[] = "\"usage";
	const char *p = s, *end = s + len;
	while ((p = memmem(p, (size_t)(end - p), key, sizeof key - 1)) != NULL) {
		const char *q = p + sizeof key - 1;
		while (q < end && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')))
			q++;
		if (q < end && *q == '"') {
			for (q++; q < end && (*q == ' ' || *q == ':' || *q == '\t'); q++)
				;
			if ((size_t)(end - q) < 4 || memcmp(q, "null", 4) != 0)
				return true;
		}
		p += sizeof key - 1;
	}
	return false;
}

static bool worth_parsing(const char *v, size_t n)
{
	return memmem(v, n, "\"error\"", 7) != NULL || mentions_usage(v, n);
}

static void sse_data(struct tokens_sse *s, const char *v, size_t n)
{
	if (!worth_parsing(v, n))
		return;
	json_t *root = json_loadb(v, n, 0, NULL);
	if (json_is_object(root)) {
		if (json_object_get(root, "error") != NULL)
			s->error = true;
		usage_from_object(root, &s->usage);
	}
	json_decref(root);
}

static bool field_is(const char *line, size_t name_len, const char *name)
{
	return name_len == strlen(name) && memcmp(line, name, name_len) == 0;
}

/* One complete line (without its terminator). Blank lines end events, ':'
 * starts a comment (": OPENROUTER PROCESSING", ": keep-alive"). */
static void sse_line(struct tokens_sse *s, const char *line, size_t len)
{
	if (len == 0 || line[0] == ':')
		return;
	const char *colon = memchr(line, ':', len);
	size_t name_len = colon ? (size_t)(colon - line) : len;
	const char *v = colon ? colon + 1 : line + len;
	size_t vn = (size_t)(line + len - v);
	if (vn > 0 && v[0] == ' ') {
		v++;
		vn--;
	}
	if (field_is(line, name_len, "event")) {
		if (vn == 5 && memcmp(v, "error", 5) == 0)
			s->error = true;
	} else if (field_is(line, name_len, "data")) {
		sse_data(s, v, vn);
	}
}

/* Keeps the start of a line that continues in the next chunk. Over the cap
 * (or out of memory) the line is dropped: skipping until its end. */
static void sse_keep(struct tokens_sse *s, const char *p, size_t n)
{
	if (s->skipping)
		return;
	if (n > TOKENS_SSE_LINE_MAX - s->len) {
		s->skipping = true;
		s->len = 0;
		return;
	}
	if (s->len + n > s->cap) {
		size_t cap = s->cap ? s->cap : 256;
		while (cap < s->len + n)
			cap *= 2;
		if (cap > TOKENS_SSE_LINE_MAX)
			cap = TOKENS_SSE_LINE_MAX;
		char *nb = realloc(s->buf, cap);
		if (nb == NULL) {
			s->skipping = true;
			s->len = 0;
			return;
		}
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

/* A line ends at p[0..n): completes any kept start, then processes it. */
static void sse_end_line(struct tokens_sse *s, const char *p, size_t n)
{
	if (s->len == 0 && !s->skipping) {
		if (n <= TOKENS_SSE_LINE_MAX)
			sse_line(s, p, n); /* the common case: no copy */
		return;
	}
	sse_keep(s, p, n);
	if (!s->skipping)
		sse_line(s, s->buf, s->len);
	s->skipping = false;
	s->len = 0;
}

void tokens_sse_feed(struct tokens_sse *s, const char *data, size_t n)
{
	size_t i = 0;

	if (n == 0)
		return;
	if (s->after_cr && data[0] == '\n')
		i = 1; /* the LF of a CRLF split between chunks */
	s->after_cr = false;
	while (i < n) {
		const char *start = data + i;
		const char *lf = memchr(start, '\n', n - i);
		size_t span = lf ? (size_t)(lf - start) : n - i;
		const char *cr = memchr(start, '\r', span);
		const char *end = cr ? cr : lf;
		if (end == NULL) {
			sse_keep(s, start, n - i);
			return;
		}
		sse_end_line(s, start, (size_t)(end - start));
		i = (size_t)(end - data) + 1;
		if (*end == '\r') {
			if (i < n && data[i] == '\n')
				i++;
			else if (i == n)
				s->after_cr = true;
		}
	}
}
