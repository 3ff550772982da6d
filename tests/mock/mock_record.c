/* SPDX-License-Identifier: Apache-2.0 */
/* mock_record.c — counters and request records for /_mock/stats and /_mock/requests. */
#include "mock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

struct mock_stats mock_stats;
bool mock_record_enabled = true;
size_t mock_record_cap = 100000;

/* Ring of the newest mock_record_cap records, each kept as its compact JSON text
 * (a few hundred bytes; a json_t tree costs several times that). */
static char **ring;
static size_t ring_head, ring_len;

const char *mock_method_name(enum evhttp_cmd_type c)
{
	switch (c) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	}
	return "UNKNOWN";
}

void mock_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	static const char hex[] = "0123456789abcdef";
	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

/* SHA-256 of an evbuffer without pulling it into one block. */
static void evbuffer_sha256_hex(struct evbuffer *b, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	static const char hex[] = "0123456789abcdef";
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	int n = evbuffer_peek(b, -1, NULL, NULL, 0);
	if (n > 0) {
		struct evbuffer_iovec *v = calloc((size_t)n, sizeof(*v));
		if (v != NULL) {
			n = evbuffer_peek(b, -1, NULL, v, n);
			for (int i = 0; i < n; i++)
				EVP_DigestUpdate(ctx, v[i].iov_base, v[i].iov_len);
			free(v);
		}
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

void mock_record_add(struct evhttp_request *req, uint64_t t_ms)
{
	if (!mock_record_enabled)
		return;
	if (ring == NULL) {
		ring = calloc(mock_record_cap, sizeof(*ring));
		if (ring == NULL)
			return;
	}
	json_t *hdrs = json_array();
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	for (struct evkeyval *kv = in->tqh_first; kv != NULL; kv = kv->next.tqe_next)
		json_array_append_new(hdrs, json_pack("[ss]", kv->key, kv->value));
	struct evbuffer *body = evhttp_request_get_input_buffer(req);
	char sha[65];
	evbuffer_sha256_hex(body, sha);
	const char *uri = evhttp_request_get_uri(req);
	/* The absolute CLOCK_MONOTONIC time too: the clock of Node's process.hrtime(), so a
	 * test can compare an arrival with its own events without a calibration. */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	json_int_t mono_us = (json_int_t)ts.tv_sec * 1000000 + (json_int_t)(ts.tv_nsec / 1000);
	json_t *rec =
	    json_pack("{s:s, s:s, s:o, s:I, s:s, s:I, s:I}", "method",
	              mock_method_name(evhttp_request_get_command(req)), "uri", uri ? uri : "",
	              "headers", hdrs, "body_len", (json_int_t)evbuffer_get_length(body),
	              "body_sha256", sha, "t_ms", (json_int_t)t_ms, "t_mono_us", mono_us);
	char *text = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
	json_decref(rec);
	if (text == NULL)
		return; /* a URI or header that is not UTF-8: jansson refuses it; not recorded */
	size_t slot = (ring_head + ring_len) % mock_record_cap;
	if (ring_len == mock_record_cap) {
		free(ring[ring_head]);
		slot = ring_head;
		ring_head = (ring_head + 1) % mock_record_cap;
	} else {
		ring_len++;
	}
	ring[slot] = text;
}

/* The records as one JSON array text in b, oldest first. */
void mock_record_requests(struct evbuffer *b)
{
	evbuffer_add(b, "[", 1);
	for (size_t i = 0; i < ring_len; i++) {
		const char *t = ring[(ring_head + i) % mock_record_cap];
		if (i > 0)
			evbuffer_add(b, ",", 1);
		evbuffer_add(b, t, strlen(t));
	}
	evbuffer_add(b, "]", 1);
}

void mock_count_response(int status)
{
	if (status >= 0 && status < 600)
		mock_stats.responses[status]++;
}

json_t *mock_record_stats_json(void)
{
	const struct mock_stats *s = &mock_stats;
	json_t *resp = json_object();
	for (int i = 0; i < 600; i++) {
		if (s->responses[i] == 0)
			continue;
		char k[16];
		snprintf(k, sizeof(k), "%d", i);
		json_object_set_new(resp, k, json_integer((json_int_t)s->responses[i]));
	}
	json_t *keys = json_object();
	mock_limits_stats_json(keys);
	json_t *root = json_pack(
	    "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:o}", "requests", (json_int_t)s->requests,
	    "in_flight", (json_int_t)s->in_flight, "in_flight_max", (json_int_t)s->in_flight_max,
	    "connections_opened", (json_int_t)s->connections_opened, "connections_closed",
	    (json_int_t)s->connections_closed, "streams_completed",
	    (json_int_t)s->streams_completed, "streams_aborted", (json_int_t)s->streams_aborted,
	    "responses", resp, "rate_limited", (json_int_t)s->rate_limited, "window_violations",
	    (json_int_t)s->window_violations, "keys", keys);
	if (root != NULL)
		mock_limits_stats_more(root);
	return root;
}

void mock_record_reset(void)
{
	for (size_t i = 0; i < ring_len; i++)
		free(ring[(ring_head + i) % mock_record_cap]);
	ring_head = ring_len = 0;
	/* in_flight describes live state: a reset between tests must not make it wrap
	 * when those requests finish. */
	uint64_t in_flight = mock_stats.in_flight, seq = mock_stats.request_seq;
	memset(&mock_stats, 0, sizeof(mock_stats));
	mock_stats.in_flight = in_flight;
	mock_stats.in_flight_max = in_flight;
	mock_stats.request_seq = seq;
}

void mock_record_free(void)
{
	mock_record_reset();
	free(ring);
	ring = NULL;
}
