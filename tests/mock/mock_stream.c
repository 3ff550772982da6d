/* SPDX-License-Identifier: Apache-2.0 */
/* mock_stream.c — SSE streams: OpenAI chat chunks, the Anthropic messages events
 * and the Responses API's events (PROVIDERS.md §3, §9, §11; mock_responses.c). One content chunk
 * per step; the next step is armed only when the previous bytes have left (mock_req_written), so a
 * slow reader slows the stream instead of growing our buffers. */
#include "mock.h"

#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#define PUT(b, lit) evbuffer_add((b), (lit), sizeof(lit) - 1)

static void chat_prefix(struct evbuffer *b, const struct mock_req *mr)
{
	PUT(b, "data: {\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\","
	       "\"created\":1700000000,\"model\":\"");
	evbuffer_add(b, mr->model, strlen(mr->model));
	PUT(b, "\",\"choices\":[");
}

/* Closes a chunk: with include_usage every chunk but the last carries "usage":null. */
static void chat_suffix(struct evbuffer *b, const struct mock_req *mr)
{
	if (mr->include_usage)
		PUT(b, "],\"usage\":null}\n\n");
	else
		PUT(b, "]}\n\n");
}

static void content_event(struct evbuffer *b, const struct mock_req *mr)
{
	if (mr->kind == MOCK_K_RESPONSES) {
		mock_responses_delta(b, mr->resp);
	} else if (mr->kind == MOCK_K_CHAT) {
		chat_prefix(b, mr);
		PUT(b, "{\"index\":0,\"delta\":{\"content\":\"");
		mock_put_chunk_text(b, mr->chunk_bytes);
		PUT(b, "\"},\"logprobs\":null,\"finish_reason\":null}");
		chat_suffix(b, mr);
	} else {
		PUT(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
		       "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"");
		mock_put_chunk_text(b, mr->chunk_bytes);
		PUT(b, "\"}}\n\n");
	}
}

static void head_events(struct evbuffer *b, const struct mock_req *mr)
{
	if (mr->kind == MOCK_K_RESPONSES) {
		mock_responses_head(b, mr->resp);
		return;
	}
	if (mr->kind == MOCK_K_CHAT) {
		chat_prefix(b, mr);
		PUT(b, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
		       "\"logprobs\":null,\"finish_reason\":null}");
		chat_suffix(b, mr);
		return;
	}
	PUT(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
	       "\"msg_mock\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"");
	evbuffer_add(b, mr->model, strlen(mr->model));
	PUT(b, "\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":"
	       "{\"input_tokens\":");
	mock_put_long(b, mr->prompt_tokens);
	if (mr->cache_usage) {
		PUT(b, ",\"cache_creation_input_tokens\":");
		mock_put_long(b, mr->cache_creation);
		PUT(b, ",\"cache_read_input_tokens\":");
		mock_put_long(b, mr->cache_read);
	}
	PUT(b, ",\"output_tokens\":1}}}\n\n"
	       "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
	       "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
}

/* x-mock-usage-pad: the event that carries the final usage grows a "pad"
 * member before it, as the Responses API's response.completed repeats the
 * instructions, tools and output before its usage (PROVIDERS.md §11). */
static void usage_pad(struct evbuffer *b, const struct mock_req *mr)
{
	if (mr->usage_pad <= 0)
		return;
	PUT(b, ",\"pad\":\"");
	mock_put_chunk_text(b, mr->usage_pad);
	PUT(b, "\"");
}

static void tail_events(struct evbuffer *b, const struct mock_req *mr)
{
	if (mr->kind == MOCK_K_RESPONSES) {
		mock_responses_tail(b, mr->resp);
		return;
	}
	if (mr->kind == MOCK_K_CHAT) {
		chat_prefix(b, mr);
		PUT(b, "{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"");
		if (mr->truncated)
			PUT(b, "length");
		else
			PUT(b, "stop");
		PUT(b, "\"}");
		chat_suffix(b, mr);
		if (mr->include_usage) {
			chat_prefix(b, mr);
			PUT(b, "]");
			usage_pad(b, mr);
			PUT(b, ",\"usage\":{\"prompt_tokens\":");
			mock_put_long(b, mr->prompt_tokens);
			PUT(b, ",\"completion_tokens\":");
			mock_put_long(b, mr->completion_tokens);
			PUT(b, ",\"total_tokens\":");
			mock_put_long(b, mr->prompt_tokens + mr->completion_tokens);
			PUT(b, "}}\n\n");
		}
		PUT(b, "data: [DONE]\n\n");
		return;
	}
	PUT(b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	       "event: message_delta\ndata: "
	       "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"");
	if (mr->truncated)
		PUT(b, "max_tokens");
	else
		PUT(b, "end_turn");
	PUT(b, "\",\"stop_sequence\":null}");
	usage_pad(b, mr);
	PUT(b, ",\"usage\":{\"output_tokens\":");
	mock_put_long(b, mr->completion_tokens);
	PUT(b, "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

/* Status line, headers, the opening events and the first content chunk. */
void mock_stream_start(struct mock_req *mr)
{
	struct evhttp_request *req = mr->req;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-cache");
	evhttp_send_reply_start(req, mr->status, mock_reason(mr->status));
	mock_count_response(mr->status);
	mr->started = true;
	struct evbuffer *b = evbuffer_new();
	head_events(b, mr);
	if (mr->sent < mr->chunks) {
		content_event(b, mr);
		mr->sent++;
	}
	evhttp_send_reply_chunk_with_cb(req, b, mock_req_written, mr);
	evbuffer_free(b);
}

/* The next content chunk, or the closing events and the end of the response. */
void mock_stream_next(struct mock_req *mr)
{
	struct evhttp_request *req = mr->req;
	struct evbuffer *b = evbuffer_new();
	if (mr->sent < mr->chunks) {
		content_event(b, mr);
		mr->sent++;
		evhttp_send_reply_chunk_with_cb(req, b, mock_req_written, mr);
		evbuffer_free(b);
		return;
	}
	tail_events(b, mr);
	evhttp_send_reply_chunk(req, b);
	evbuffer_free(b);
	mock_stats.streams_completed++;
	mock_req_done(mr);
	evhttp_send_reply_end(req);
}

void mock_stream_head(struct evbuffer *b, const struct mock_req *mr)
{
	head_events(b, mr);
}

void mock_stream_content(struct evbuffer *b, const struct mock_req *mr)
{
	content_event(b, mr);
}

void mock_stream_tail(struct evbuffer *b, const struct mock_req *mr)
{
	tail_events(b, mr);
}
