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

void meter_answer(struct meter *m, const char *content_type)
{
	tokens_sse_free(&m->scan);
	tokens_sse_init(&m->scan);
	usage_strip_free(&m->filter);
	usage_strip_init(&m->filter);
	m->json_len = 0;
	m->json_over = false;
	m->sse = m->on && content_type != NULL &&
	         strncasecmp(content_type, "text/event-stream", 17) == 0;
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

void meter_feed(struct meter *m, const char *data, size_t n, meter_emit emit, void *ctx)
{
	if (m->on && m->sse)
		tokens_sse_feed(&m->scan, data, n);
	else if (m->on)
		keep_json(m, data, n);
	if (m->strip && m->sse)
		usage_strip_feed(&m->filter, data, n, emit, ctx);
	else
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
	if (m->strip && m->sse)
		usage_strip_finish(&m->filter, emit != NULL ? emit : drop, ctx);
	memset(usage, 0, sizeof(*usage));
	if (!m->on)
		return false;
	if (m->sse) {
		tokens_sse_finish(&m->scan); /* a last line a CR ended */
		*usage = m->scan.usage;
	} else if (m->json_len > 0 && !m->json_over)
		tokens_usage_json(m->json, m->json_len, usage);
	return usage->present;
}

void meter_reset(struct meter *m)
{
	char *json = m->json;
	size_t json_cap = m->json_cap;
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
	tokens_sse_free(&m->scan);
	usage_strip_free(&m->filter);
	free(m->body);
	free(m->json);
	memset(m, 0, sizeof(*m));
}
