/* meter — an answer's token usage, read as it is relayed. See meter.h. */
#include "proxy/meter.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/grow.h"

/* A JSON buffer kept for the next request (most answers fit); a larger one
 * is freed, so that a pooled exchange does not pin a large answer's memory. */
#define JSON_KEEP (16 * 1024)

void meter_init(struct meter *m)
{
	memset(m, 0, sizeof(*m));
}

void meter_request(struct meter *m, bool ask_stream_usage, const char *path, size_t path_len,
                   const struct tokens_cost *cost, const char **body, size_t *len)
{
	m->on = true;
	if (!ask_stream_usage || !usage_api_is_chat_completions(path, path_len))
		return;
	char *own;
	size_t own_len;
	if (usage_inject_request(*body, *len, cost, &own, &own_len) != 1)
		return;
	free(m->body);
	m->body = own;
	*body = own;
	*len = own_len;
	m->strip = true;
}

bool meter_rewrote(const struct meter *m)
{
	return m->body != NULL;
}

void meter_unrewrite(struct meter *m)
{
	free(m->body);
	m->body = NULL;
	m->strip = false;
}

void meter_answer(struct meter *m, const char *content_type)
{
	sse_framer_free(&m->framer);
	tokens_sse_free(&m->scan);
	tokens_sse_init(&m->scan);
	usage_strip_free(&m->filter);
	usage_strip_init(&m->filter);
	m->json_len = 0;
	m->json_over = false;
	m->sse = m->on && content_type != NULL &&
	         strncasecmp(content_type, "text/event-stream", 17) == 0;
	/* The cap of the reader that keeps the longest lines: the filter's when
	 * it runs (the usage reader skips what is longer than its own). */
	sse_framer_init(&m->framer, m->strip ? USAGE_STRIP_EVENT_MAX : TOKENS_SSE_LINE_MAX);
}

static void keep_json(struct meter *m, const char *data, size_t n)
{
	if (m->json_over)
		return;
	if (m->json_len + n > METER_JSON_CAP ||
	    !grow_bytes(&m->json, &m->json_cap, m->json_len + n, 4096)) {
		m->json_over = true; /* a document with a hole in it is not read */
		return;
	}
	memcpy(m->json + m->json_len, data, n);
	m->json_len += n;
}

/* Where the framer's lines go: the usage reader, and the filter with the
 * client's callback when it runs. */
struct meter_lines {
	struct meter *m;
	meter_emit emit;
	void *ctx;
};

static void meter_line(void *arg, const struct sse_line *l)
{
	struct meter_lines *to = arg;
	tokens_sse_line(&to->m->scan, l);
	if (to->m->strip)
		usage_strip_line(&to->m->filter, l, to->emit, to->ctx);
}

void meter_feed(struct meter *m, const char *data, size_t n, meter_emit emit, void *ctx)
{
	if (m->sse) { /* sse implies on */
		struct meter_lines to = {m, emit, ctx};
		sse_framer_feed(&m->framer, data, n, meter_line, &to);
		if (m->strip)
			return; /* the filter emitted what the client gets */
	} else if (m->on) {
		keep_json(m, data, n);
	}
	emit(ctx, data, n);
}

static void drop(void *ctx, const char *data, size_t n)
{
	(void)ctx;
	(void)data;
	(void)n;
}

bool meter_finish(struct meter *m, meter_emit emit, void *ctx, struct tokens_usage *usage)
{
	if (m->sse) { /* the last line (a CR ended it), to both readers */
		struct meter_lines to = {m, emit != NULL ? emit : drop, ctx};
		sse_framer_finish(&m->framer, meter_line, &to);
		if (m->strip)
			usage_strip_end(&m->filter, to.emit, ctx);
	}
	memset(usage, 0, sizeof(*usage));
	if (!m->on)
		return false;
	if (m->sse) {
		*usage = m->scan.usage;
	} else if (m->json_len > 0 && !m->json_over)
		tokens_usage_json(m->json, m->json_len, usage);
	return usage->present;
}

void meter_reset(struct meter *m)
{
	char *json = m->json;
	size_t json_cap = m->json_cap;
	sse_framer_free(&m->framer);
	tokens_sse_free(&m->scan);
	usage_strip_free(&m->filter);
	free(m->body);
	if (json_cap > JSON_KEEP) {
		free(json);
		json = NULL;
		json_cap = 0;
	}
	memset(m, 0, sizeof(*m));
	m->json = json;
	m->json_cap = json_cap;
}

void meter_free(struct meter *m)
{
	sse_framer_free(&m->framer);
	tokens_sse_free(&m->scan);
	usage_strip_free(&m->filter);
	free(m->body);
	free(m->json);
	memset(m, 0, sizeof(*m));
}
