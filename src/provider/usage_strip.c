/* usage_strip — see usage_strip.h. */
#include "provider/usage_strip.h"

#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

static const char usage_null[] = ",\"usage\":null";

static const char include_usage[] = ",\"stream_options\":{\"include_usage\":true}";

int usage_inject_request(const char *body, size_t len, char **out, size_t *out_len)
{
	/* Most bodies do not stream: they are not parsed at all (a 1 KiB parse
	 * per request cost a paced lane a third of its throughput). */
	if (body == NULL || memmem(body, len, "\"stream\"", 8) == NULL)
		return 0;
	json_t *root = json_loadb(body, len, 0, NULL);
	int rc = 0;
	if (root == NULL || !json_is_object(root) || !json_is_true(json_object_get(root, "stream")))
		goto done;
	json_t *so = json_object_get(root, "stream_options");
	if (so == NULL) {
		/* As the client wrote it, one member more before the last brace. */
		size_t end = len;
		while (end > 0 && body[end - 1] != '}')
			end--;
		size_t add = sizeof(include_usage) - 1;
		char *b = end > 0 ? malloc(len + add + 1) : NULL;
		if (b == NULL) {
			rc = end > 0 ? -1 : 0;
			goto done;
		}
		memcpy(b, body, end - 1);
		memcpy(b + end - 1, include_usage, add);
		memcpy(b + end - 1 + add, body + end - 1, len - (end - 1));
		b[len + add] = '\0';
		*out = b;
		*out_len = len + add;
		rc = 1;
	} else if (json_is_object(so) && !json_is_true(json_object_get(so, "include_usage"))) {
		if (json_object_set_new(so, "include_usage", json_true()) != 0) {
			rc = -1;
			goto done;
		}
		char *b = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (b == NULL) {
			rc = -1;
			goto done;
		}
		*out = b;
		*out_len = strlen(b);
		rc = 1;
	}
done:
	json_decref(root);
	return rc;
}

void usage_strip_init(struct usage_strip *s)
{
	memset(s, 0, sizeof(*s));
}

void usage_strip_free(struct usage_strip *s)
{
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = 0;
}

/* Whether [p, end) contains the literal lit. */
static bool contains(const char *p, const char *end, const char *lit)
{
	return memmem(p, (size_t)(end - p), lit, strlen(lit)) != NULL;
}

/* The data: payload of a line (without "data:" and one optional space), or
 * NULL when the line is not a data line. */
static const char *data_payload(const char *line, const char *end)
{
	if ((size_t)(end - line) < 5 || memcmp(line, "data:", 5) != 0)
		return NULL;
	line += 5;
	if (line < end && *line == ' ')
		line++;
	return line;
}

/* The end of a line's content: before its CR LF, LF or CR. */
static const char *content_end(const char *line, const char *eol)
{
	while (eol > line && (eol[-1] == '\n' || eol[-1] == '\r'))
		eol--;
	return eol;
}

/* The injected usage chunk: "choices":[] and a "usage" object. */
static bool is_usage_chunk(const char *event, const char *end)
{
	for (const char *line = event; line < end;) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		eol = eol != NULL ? eol + 1 : end;
		const char *p = data_payload(line, eol);
		if (p != NULL) {
			const char *ce = content_end(p, eol);
			return contains(p, ce, "\"choices\":[]") && contains(p, ce, "\"usage\":{");
		}
		line = eol;
	}
	return false;
}

/* Emits one whole event, each data line without a trailing ,"usage":null. */
static void emit_event(const char *event, const char *end, usage_strip_emit emit, void *ctx)
{
	const char *from = event;
	for (const char *line = event; line < end;) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		eol = eol != NULL ? eol + 1 : end;
		const char *p = data_payload(line, eol);
		const char *ce = p != NULL ? content_end(p, eol) : NULL;
		size_t n = sizeof(usage_null) - 1;
		if (ce != NULL && ce - p > (ptrdiff_t)n && ce[-1] == '}' &&
		    memcmp(ce - 1 - n, usage_null, n) == 0) {
			emit(ctx, from, (size_t)(ce - 1 - n - from));
			from = ce - 1; /* the closing brace and the line's end */
		}
		line = eol;
	}
	if (end > from)
		emit(ctx, from, (size_t)(end - from));
}

/* The end of the first whole event in [p, end) (after its blank line), or NULL. */
static const char *event_end(const char *p, const char *end)
{
	bool line_start = true;
	for (; p < end; p++) {
		if (*p == '\n') {
			if (line_start)
				return p + 1;
			line_start = true;
		} else if (*p == '\r') {
			if (p + 1 < end && p[1] == '\n')
				p++;
			if (line_start)
				return p + 1;
			line_start = true;
		} else {
			line_start = false;
		}
	}
	return NULL;
}

/* Emits the whole events at the start of [p, end); returns where the rest begins. */
static const char *run(struct usage_strip *s, const char *p, const char *end, usage_strip_emit emit,
                       void *ctx)
{
	const char *e;
	while ((e = event_end(p, end)) != NULL) {
		if (is_usage_chunk(p, e))
			s->dropped = true;
		else
			emit_event(p, e, emit, ctx);
		p = e;
	}
	return p;
}

void usage_strip_feed(struct usage_strip *s, const char *data, size_t n, usage_strip_emit emit,
                      void *ctx)
{
	if (s->passthrough) {
		if (n > 0)
			emit(ctx, data, n);
		return;
	}
	if (s->len == 0) {
		/* The common case: whole events in one read, nothing held. */
		const char *rest = run(s, data, data + n, emit, ctx);
		n = (size_t)(data + n - rest);
		data = rest;
		if (n == 0)
			return;
	}
	if (s->len + n > USAGE_STRIP_EVENT_MAX || !grow_bytes(&s->buf, &s->cap, s->len + n, 4096)) {
		/* An event this large is no chunk of a chat stream: stop
		 * filtering rather than hold it. */
		s->passthrough = true;
		if (s->len > 0)
			emit(ctx, s->buf, s->len);
		s->len = 0;
		emit(ctx, data, n);
		return;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
	const char *rest = run(s, s->buf, s->buf + s->len, emit, ctx);
	s->len = (size_t)(s->buf + s->len - rest);
	memmove(s->buf, rest, s->len);
}

void usage_strip_finish(struct usage_strip *s, usage_strip_emit emit, void *ctx)
{
	if (s->len > 0 && !s->passthrough && !is_usage_chunk(s->buf, s->buf + s->len))
		emit_event(s->buf, s->buf + s->len, emit, ctx);
	s->len = 0;
}

bool usage_api_is_chat_completions(const char *path, size_t len)
{
	static const char tail[] = "/chat/completions";
	const size_t n = sizeof(tail) - 1;
	if (path == NULL)
		return false;
	const char *q = memchr(path, '?', len);
	if (q != NULL)
		len = (size_t)(q - path);
	while (len > 0 && path[len - 1] == '/')
		len--;
	return len >= n && memcmp(path + len - n, tail, n) == 0;
}
