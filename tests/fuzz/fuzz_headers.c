/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: rate-limit header dialects, and the server's hint they make
 * with an error body's. The input is "name: value" lines; every dialect
 * parses the same set; the whole input is also read as the error body
 * (fuzz_error_body fuzzes that parse alone). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/error_body.h"
#include "provider/ratelimit_headers.h"
#include "sched/retry.h"

#define MAX_HEADERS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	struct rlh_header h[MAX_HEADERS];
	size_t n = 0;
	for (char *line = text, *next; line != NULL && n < MAX_HEADERS; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		char *colon = strchr(line, ':');
		if (colon == NULL)
			continue;
		*colon = '\0';
		char *value = colon + 1;
		while (*value == ' ')
			value++;
		h[n++] = (struct rlh_header){line, value, strlen(value)};
	}
	struct error_body eb;
	error_body_parse((const char *)data, size, &eb);
	const enum dialect dialects[] = {DIALECT_OPENAI, DIALECT_ANTHROPIC, DIALECT_AZURE,
	                                 DIALECT_IETF, DIALECT_NONE};
	for (size_t d = 0; d < sizeof(dialects) / sizeof(dialects[0]); d++) {
		struct rlh_result r;
		rlh_parse(dialects[d], h, n, 1767225600000LL, &r);
		int64_t ms;
		rlh_exhausted_reset(&r, &ms);
		if (rlh_server_hint(&r, &eb.hints, &ms) && ms < 0)
			abort(); /* a hint is a wait: never negative */
		const char *why;
		retry_classify(429, RETRY_TRANSPORT_NONE, &r, &eb.facts, &why, NULL);
		retry_classify(503, RETRY_TRANSPORT_NONE, &r, &eb.facts, &why, NULL);
	}
	free(text);
	return 0;
}
