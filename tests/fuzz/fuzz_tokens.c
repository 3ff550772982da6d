/* libFuzzer: token estimates of request bodies, usage from JSON answers, and
 * the incremental SSE scanner fed the same bytes in chunks of every size the
 * first input byte picks. The estimate and the usage must agree with the
 * jansson tree walk they replaced (tests/unit/tokens_ref.h): any difference
 * aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/tokens.h"
#include "tokens_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tokens_cost cost, ref;
	tokens_estimate((const char *)data, size, 1024, &cost);
	struct tokens_usage u, uref;
	tokens_usage_json((const char *)data, size, &u);
	/* jansson drops a NUL byte after a number or literal; the scanner
	 * refuses it (test_tokens.c): no comparison there. */
	if (memchr(data, '\0', size) == NULL) {
		ref_tokens_estimate((const char *)data, size, 1024, &ref);
		ref_tokens_usage_json((const char *)data, size, &uref);
		if (cost.json != ref.json || cost.prompt != ref.prompt ||
		    cost.output != ref.output || cost.total != ref.total ||
		    memcmp(&u, &uref, sizeof u) != 0 ||
		    !ref_prefix_agrees((const char *)data, size, &cost))
			abort();
	}

	size_t step = size > 0 ? (size_t)data[0] % 17 + 1 : 1;
	struct tokens_sse s;
	tokens_sse_init(&s);
	for (size_t off = 0; off < size; off += step)
		tokens_sse_feed(&s, (const char *)data + off,
		                size - off < step ? size - off : step);
	tokens_sse_finish(&s);
	tokens_sse_free(&s);
	return 0;
}
