/* SPDX-License-Identifier: Apache-2.0 */
/* meter — an answer's token usage, read as it is relayed. See meter.h. */
#include "proxy/meter.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void meter_init(struct meter *m)
{
	memset(m, 0, sizeof(*m));
	usage_sse_init(&m->scan);
	usage_read_init(&m->json);
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
	usage_sse_start(&m->scan);
	usage_strip_free(&m->filter);
	usage_strip_init(&m->filter);
	usage_read_start(&m->json);
	m->sse = m->on && content_type != NULL &&
	         strncasecmp(content_type, "text/event-stream", 17) == 0;
	/* Lines are kept whole only for the filter, when it runs (it decides on
	 * whole events); the usage reader reads a long line in pieces. */
	sse_framer_init(&m->framer, m->strip ? USAGE_STRIP_EVENT_MAX : USAGE_SSE_LINE_KEEP);
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
	usage_sse_line(&to->m->scan, l);
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
		usage_read_feed(&m->json, data, n);
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
	if (m->sse)
		*usage = m->scan.usage;
	else
		usage_read_end(&m->json, usage, NULL);
	return usage->present;
}

void meter_reset(struct meter *m)
{
	sse_framer_free(&m->framer);
	usage_strip_free(&m->filter);
	free(m->body);
	m->body = NULL;
	m->on = m->strip = m->sse = false;
	usage_sse_start(&m->scan);
	usage_read_start(&m->json);
}

void meter_free(struct meter *m)
{
	sse_framer_free(&m->framer);
	usage_sse_free(&m->scan);
	usage_strip_free(&m->filter);
	usage_read_free(&m->json);
	free(m->body);
	memset(m, 0, sizeof(*m));
}
