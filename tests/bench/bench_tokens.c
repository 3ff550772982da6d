/* Micro-benchmark: ns per call of the token estimate done per request, on a
 * 1 KiB chat request (make microbench; the usage read from answers:
 * bench_usage.c).
 *
 *   build/bench_tokens [FILE]   FILE: a request body to estimate instead */
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

static double now_ns(void)
{
	return (double)clock_mono_ns();
}

int main(int argc, char **argv)
{
	size_t len = 0;
	char *req = NULL;
	if (argc > 1) {
		FILE *f = fopen(argv[1], "rb");
		if (f == NULL)
			return 1;
		req = malloc(1 << 20);
		len = fread(req, 1, 1 << 20, f);
		fclose(f);
	} else {
		req = default_request(&len);
	}
	const int n = 200000;
	struct tokens_cost c;
	int64_t sink = 0;
	double t0 = now_ns();
	for (int i = 0; i < n; i++)
		sink += tokens_estimate(req, len, 1024, &c);
	double t1 = now_ns();
	printf("tokens_estimate, %zu-byte request: %.0f ns/call (prompt %lld, output %lld)\n", len,
	       (t1 - t0) / n, (long long)c.prompt, (long long)c.output);
	free(req);
	return sink == 42 ? 2 : 0;
}
