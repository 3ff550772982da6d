/* SPDX-License-Identifier: Apache-2.0 */
/* Micro-benchmark: ns per byte of reading an answer's usage (make microbench),
 * as the meter reads it: a kept reader, fed as the bytes arrive.
 *
 *   - a 2 KiB chat completion answer (JSON, one piece);
 *   - the same answer streamed: 20 chunks and the include_usage chunk (SSE);
 *   - a Responses API stream's last event, response.completed, of 200 KiB and
 *     of 2 MiB on one data: line (SSE, 16 KiB pieces), and the 200 KiB
 *     document as a non-stream answer.
 * Each figure is the best of 15 runs (the machine is shared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "provider/usage_read.h"
#include "provider/usage_sse.h"

#define RUNS 15

static char *alloc_or_die(size_t n)
{
	char *b = malloc(n);
	if (b == NULL)
		exit(1);
	return b;
}

/* Appends text to b (n bytes so far) until it is at least `upto` bytes. */
static size_t fill(char *b, size_t n, const char *text, size_t upto)
{
	size_t k = strlen(text);
	while (n < upto) {
		memcpy(b + n, text, k);
		n += k;
	}
	return n;
}

static const char text[] = "A token bucket refills at a steady rate; each request takes "
                           "tokens and waits when it is empty: \\\"quoted\\\", caf\xc3\xa9, "
                           "{braces} and [brackets].\\n";

/* A chat completion answer of about 2 KiB. */
static char *chat_answer(size_t *len)
{
	static const char head[] =
	    "{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion\","
	    "\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":"
	    "0,\"message\":{\"role\":\"assistant\",\"content\":\"";
	static const char tail[] =
	    "\",\"refusal\":null,\"annotations\":[]},\"logprobs\":null,\"finish_reason\":\"stop\"}]"
	    ","
	    "\"usage\":{\"prompt_tokens\":256,\"completion_tokens\":32,\"total_tokens\":288,"
	    "\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},"
	    "\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,"
	    "\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}},"
	    "\"service_tier\":\"default\",\"system_fingerprint\":\"fp_06737a9306\"}";
	char *b = alloc_or_die(4096);
	size_t n = sizeof head - 1;
	memcpy(b, head, n);
	n = fill(b, n, text, 2048 - (sizeof tail - 1) - (sizeof text - 1));
	memcpy(b + n, tail, sizeof tail - 1);
	*len = n + sizeof tail - 1;
	return b;
}

/* The same answer streamed. */
static char *chat_stream(size_t *len)
{
	static const char chunk[] =
	    "data: {\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":"
	    "\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\","
	    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" a token bucket refills\"},"
	    "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n";
	static const char last[] =
	    "data: {\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":"
	    "\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\","
	    "\"choices\":[],\"usage\":{\"prompt_tokens\":256,\"completion_tokens\":32,"
	    "\"total_tokens\":288}}\n\ndata: [DONE]\n\n";
	char *b = alloc_or_die(20 * sizeof chunk + sizeof last);
	size_t n = 0;
	for (int i = 0; i < 20; i++, n += sizeof chunk - 1)
		memcpy(b + n, chunk, sizeof chunk - 1);
	memcpy(b + n, last, sizeof last - 1);
	*len = n + sizeof last - 1;
	return b;
}

#define COMPLETED_HEAD "event: response.completed\ndata: "

/* A response.completed event of about `size` bytes. */
static char *completed(size_t size, size_t *len)
{
	static const char head[] =
	    COMPLETED_HEAD "{\"type\":\"response.completed\",\"sequence_number\":99,\"response\":"
	                   "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\","
	                   "\"instructions\":\"";
	static const char tail[] =
	    "\",\"tools\":[{\"type\":\"function\",\"name\":\"shell\",\"parameters\":{\"type\":"
	    "\"object\"}}],\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_"
	    "text\","
	    "\"text\":\"done\"}]}],\"usage\":{\"input_tokens\":52000,\"input_tokens_details\":{"
	    "\"cached_tokens\":48000},\"output_tokens\":310,\"output_tokens_details\":{"
	    "\"reasoning_tokens\":128},\"total_tokens\":52310}}}\n\n";
	char *b = alloc_or_die(size + sizeof text + sizeof tail);
	size_t n = sizeof head - 1;
	memcpy(b, head, n);
	n = fill(b, n, text, size - (sizeof tail - 1));
	memcpy(b + n, tail, sizeof tail - 1);
	*len = n + sizeof tail - 1;
	return b;
}

static double now_ns(void)
{
	return (double)clock_mono_ns();
}

static int64_t sink;

/* ns per byte of the best of RUNS runs of `reps` readings of a JSON document. */
static double json_ns_per_byte(struct usage_read *r, const char *doc, size_t len, int reps)
{
	double best = 1e300;
	for (int run = 0; run < RUNS; run++) {
		double t0 = now_ns();
		for (int i = 0; i < reps; i++) {
			struct tokens_usage u = {0};
			usage_read_start(r);
			usage_read_feed(r, doc, len);
			usage_read_end(r, &u, NULL);
			sink += u.total;
		}
		double t = (now_ns() - t0) / reps / (double)len;
		best = t < best ? t : best;
	}
	return best;
}

/* The same for a stream fed in pieces of `piece` bytes. */
static double sse_ns_per_byte(struct usage_sse *s, const char *stream, size_t len, size_t piece,
                              int reps, struct tokens_usage *u)
{
	double best = 1e300;
	for (int run = 0; run < RUNS; run++) {
		double t0 = now_ns();
		for (int i = 0; i < reps; i++) {
			usage_sse_start(s);
			for (size_t at = 0; at < len; at += piece)
				usage_sse_feed(s, stream + at, len - at < piece ? len - at : piece);
			usage_sse_finish(s);
			sink += s->usage.total;
		}
		double t = (now_ns() - t0) / reps / (double)len;
		best = t < best ? t : best;
	}
	*u = s->usage;
	return best;
}

int main(void)
{
	size_t la, ls, l200, l2m;
	char *answer = chat_answer(&la), *stream = chat_stream(&ls);
	char *c200 = completed(200 * 1024, &l200), *c2m = completed(2 * 1024 * 1024, &l2m);
	struct usage_read r;
	struct usage_sse s;
	struct tokens_usage u;
	usage_read_init(&r);
	usage_sse_init(&s);

	printf("usage, %zu-byte chat answer (JSON): %.3f ns/byte\n", la,
	       json_ns_per_byte(&r, answer, la, 20000));
	printf("usage, %zu-byte chat stream (SSE, 21 events): %.3f ns/byte", ls,
	       sse_ns_per_byte(&s, stream, ls, ls, 5000, &u));
	printf(" (total %lld)\n", (long long)u.total);
	printf("usage, %zu-byte response.completed (SSE, 16 KiB pieces): %.3f ns/byte", l200,
	       sse_ns_per_byte(&s, c200, l200, 16384, 50, &u));
	printf(" (total %lld)\n", (long long)u.total);
	printf("usage, %zu-byte response.completed (SSE, 16 KiB pieces): %.3f ns/byte", l2m,
	       sse_ns_per_byte(&s, c2m, l2m, 16384, 5, &u));
	printf(" (total %lld)\n", (long long)u.total);
	size_t skip = sizeof COMPLETED_HEAD - 1;
	printf("usage, %zu-byte Responses answer (JSON): %.3f ns/byte\n", l200 - skip - 2,
	       json_ns_per_byte(&r, c200 + skip, l200 - skip - 2, 50));

	usage_read_free(&r);
	usage_sse_free(&s);
	free(answer);
	free(stream);
	free(c200);
	free(c2m);
	return sink == 42 ? 2 : 0;
}
