/* Micro-benchmark: what deciding on a held error answer costs (make
 * microbench): the two calls that each parsed the body (retry_classify parsed
 * it twice itself, rlh_body_hint once more) against one retry_body_parse. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sched/retry.h"

static const char openai_429[] =
    "{\"error\":{\"message\":\"Rate limit reached for gpt-4o in organization org-x on tokens "
    "per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms. Visit "
    "https://platform.openai.com/account/rate-limits to learn more.\",\"type\":\"tokens\","
    "\"param\":null,\"code\":\"rate_limit_exceeded\"}}";

static const char gemini_429[] =
    "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota. Please retry in "
    "25.4s.\",\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/"
    "google.rpc.QuotaFailure\",\"violations\":[{\"quotaMetric\":\"generativelanguage."
    "googleapis.com/generate_content_free_tier_requests\",\"quotaId\":\"GenerateRequestsPer"
    "MinutePerProjectPerModel-FreeTier\"}]},{\"@type\":\"type.googleapis.com/google.rpc."
    "RetryInfo\",\"retryDelay\":\"47s\"}]}}";

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void run(const char *name, const char *body)
{
	const int n = 100000;
	size_t len = strlen(body);
	int64_t sink = 0, ms = 0;
	const char *why;
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		struct rlh_body_hint bh;
		sink += retry_classify(429, RETRY_TRANSPORT_NONE, NULL, body, len, &why);
		rlh_body_hint(body, len, &bh);
		sink += rlh_server_hint(NULL, &bh, &ms) ? ms : 0;
	}
	double t1 = now_ns();
	for (int i = 0; i < n; i++) {
		struct retry_body rb;
		retry_body_parse(body, len, &rb);
		sink += retry_classify_body(429, RETRY_TRANSPORT_NONE, NULL, &rb, &why);
		sink += retry_server_hint(NULL, &rb, &ms) ? ms : 0;
	}
	double t2 = now_ns();
	printf("%s (%zu bytes): classify + hint %.0f ns, parsed once %.0f ns (%lld)\n", name, len,
	       (t1 - t0) / n, (t2 - t1) / n, (long long)(sink % 7));
}

int main(void)
{
	run("OpenAI 429", openai_429);
	run("Gemini 429", gemini_429);
	return 0;
}
