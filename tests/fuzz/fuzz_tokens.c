/* libFuzzer: token estimates of request bodies, usage from JSON answers, and
 * the incremental SSE scanner fed the same bytes in chunks of every size the
 * first input byte picks. */
#include <stdint.h>
#include <stdlib.h>

#include "tokens.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tokens_cost cost;
	tokens_estimate((const char *)data, size, 1024, &cost);
	struct tokens_usage u;
	tokens_usage_json((const char *)data, size, &u);

	size_t step = size > 0 ? (size_t)data[0] % 17 + 1 : 1;
	struct tokens_sse s;
	tokens_sse_init(&s);
	for (size_t off = 0; off < size; off += step)
		tokens_sse_feed(&s, (const char *)data + off,
		                size - off < step ? size - off : step);
	tokens_sse_free(&s);
	return 0;
}
