/* SPDX-License-Identifier: Apache-2.0 */
/* Micro-benchmark: what deciding on a held error answer costs (make
 * microbench): one error_body_parse (the facts and the hints of one jansson
 * parse), the class from the facts, the server's hint from the hints. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "provider/error_body.h"
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
	return (double)clock_mono_ns();
}

static void run(const char *name, const char *body)
{
	const int n = 100000;
	size_t len = strlen(body);
	int64_t sink = 0, ms = 0;
	const char *why;
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		struct error_body eb;
		error_body_parse(body, len, &eb);
		sink += retry_classify(429, RETRY_TRANSPORT_NONE, NULL, &eb.facts, &why, NULL);
		sink += rlh_server_hint(NULL, &eb.hints, &ms) ? ms : 0;
	}
	double t1 = now_ns();
	printf("%s (%zu bytes): parsed once %.0f ns (%lld)\n", name, len, (t1 - t0) / n,
	       (long long)(sink % 7));
}

int main(void)
{
	run("OpenAI 429", openai_429);
	run("Gemini 429", gemini_429);
	return 0;
}
