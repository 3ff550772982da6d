/* SPDX-License-Identifier: Apache-2.0 */
/* Micro-benchmark: ns per call of the token estimate done per request, on a
 * 1 KiB chat request and a 20 KiB Responses API agent turn (instructions,
 * tool schemas, reasoning items, function calls and their outputs) (make
 * microbench; the usage read from answers: bench_usage.c).
 *
 *   build/bench_tokens [FILE]   FILE: a request body to estimate instead of both */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "provider/tokens.h"

/* A 1 KiB chat request like an agent sends: system and user messages. */
static char *default_request(size_t *len)
{
	static const char head[] =
	    "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"system\",\"content\":\"You are a "
	    "helpful assistant. Answer briefly and precisely.\"},{\"role\":\"user\",\"content\":"
	    "\"Please summarise the following passage about rate limiting in HTTP proxies: ";
	static const char tail[] = "\"}],\"max_tokens\":64,\"temperature\":0.7,\"stream\":false}";
	static const char text[] = "A token bucket refills at a steady rate and each request "
	                           "takes tokens; when the bucket is empty, requests wait. ";
	char *b = malloc(1024 + 1);
	if (b == NULL)
		exit(1);
	size_t n = 0;
	memcpy(b, head, sizeof head - 1);
	n = sizeof head - 1;
	while (n < 1024 - (sizeof tail - 1)) {
		size_t k = sizeof text - 1;
		if (k > 1024 - (sizeof tail - 1) - n)
			k = 1024 - (sizeof tail - 1) - n;
		memcpy(b + n, text, k);
		n += k;
	}
	memcpy(b + n, tail, sizeof tail - 1);
	n += sizeof tail - 1;
	b[n] = '\0';
	*len = n;
	return b;
}

/* Appends s to b (cap bytes), as far as it fits. */
static size_t put(char *b, size_t n, size_t cap, const char *s)
{
	size_t k = strlen(s);
	if (k > cap - n)
		k = cap - n;
	memcpy(b + n, s, k);
	return n + k;
}

/* A Codex-style Responses API turn of about 20 KiB: 3 KiB of instructions,
 * eight tool schemas, and six rounds of a reasoning item (summary and 600
 * characters of encrypted_content), a function call and its 1 KiB output. */
static char *responses_request(size_t *len)
{
	const size_t cap = 32 * 1024;
	char *b = malloc(cap);
	char piece[1400];
	if (b == NULL)
		exit(1);
	size_t n = put(b, 0, cap, "{\"model\":\"gpt-5-codex\",\"instructions\":\"");
	for (int i = 0; i < 40; i++)
		n = put(b, n, cap,
		        "You are a coding agent running in a sandbox. Follow the repository "
		        "conventions. ");
	n = put(b, n, cap, "\",\"tools\":[");
	for (int i = 0; i < 8; i++) {
		snprintf(
		    piece, sizeof piece,
		    "%s{\"type\":\"function\",\"name\":\"tool_%d\",\"description\":\"Runs a "
		    "command in the workspace and returns its output for inspection\","
		    "\"parameters\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":"
		    "\"array\",\"items\":{\"type\":\"string\"},\"description\":\"argv\"},"
		    "\"workdir\":{\"type\":\"string\"},\"timeout_ms\":{\"type\":\"integer\","
		    "\"minimum\":0}},\"required\":[\"command\"],\"additionalProperties\":false},"
		    "\"strict\":true}",
		    i ? "," : "", i);
		n = put(b, n, cap, piece);
	}
	n = put(b, n, cap,
	        "],\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{"
	        "\"type\":\"input_text\",\"text\":\"Fix the failing test in "
	        "src/sched/cost.c and explain what was wrong.\"}]}");
	for (int i = 0; i < 6; i++) {
		char sealed[601];
		for (int k = 0; k < 600; k++)
			sealed[k] = "gAZx9+/Q"[(k * 7 + i) % 8];
		sealed[600] = '\0';
		snprintf(
		    piece, sizeof piece,
		    ",{\"type\":\"reasoning\",\"id\":\"rs_%d\",\"summary\":[{\"type\":"
		    "\"summary_text\",\"text\":\"Looking at the scheduler cost model to find "
		    "the failing assertion.\"}],\"encrypted_content\":\"%s\"}"
		    ",{\"type\":\"function_call\",\"id\":\"fc_%d\",\"call_id\":\"call_%d\","
		    "\"name\":\"tool_0\",\"arguments\":\"{\\\"command\\\":[\\\"sed\\\","
		    "\\\"-n\\\",\\\"1,80p\\\",\\\"src/sched/cost.c\\\"]}\"}"
		    ",{\"type\":\"function_call_output\",\"call_id\":\"call_%d\",\"output\":\"",
		    i, sealed, i, i, i);
		n = put(b, n, cap, piece);
		for (int k = 0; k < 20; k++)
			n = put(b, n, cap,
			        "/* cost: what a request is charged */\\n#include <stdlib.h>\\n");
		n = put(b, n, cap, "\"}");
	}
	n = put(b, n, cap,
	        "],\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,\"reasoning\":{"
	        "\"effort\":\"medium\",\"summary\":\"auto\"},\"store\":false,\"stream\":"
	        "true,\"include\":[\"reasoning.encrypted_content\"]}");
	b[n] = '\0';
	*len = n;
	return b;
}

static double now_ns(void)
{
	return (double)clock_mono_ns();
}

int main(int argc, char **argv)
{
	size_t len = 0, rlen = 0;
	char *req = NULL, *resp = NULL;
	if (argc > 1) {
		FILE *f = fopen(argv[1], "rb");
		if (f == NULL)
			return 1;
		req = malloc(1 << 20);
		len = fread(req, 1, 1 << 20, f);
		fclose(f);
	} else {
		req = default_request(&len);
		resp = responses_request(&rlen);
	}
	const int n = 200000;
	struct tokens_cost c, rc = {0};
	int64_t sink = 0;
	double t0 = now_ns();
	for (int i = 0; i < n; i++)
		sink += tokens_estimate(req, len, 1024, &c);
	double t1 = now_ns();
	printf("tokens_estimate, %zu-byte request: %.0f ns/call (prompt %lld, output %lld)\n", len,
	       (t1 - t0) / n, (long long)c.prompt, (long long)c.output);
	if (resp != NULL) {
		for (int i = 0; i < n / 20; i++)
			sink += tokens_estimate(resp, rlen, 1024, &rc);
		double t2 = now_ns();
		printf("tokens_estimate, %zu-byte Responses turn: %.0f ns/call (prompt %lld, tools "
		       "%lld, output %lld)\n",
		       rlen, (t2 - t1) / (n / 20), (long long)rc.prompt, (long long)rc.tools_tokens,
		       (long long)rc.output);
	}
	free(req);
	free(resp);
	return sink == 42 ? 2 : 0;
}
