/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: token estimates of request bodies. The estimate must agree with
 * the jansson tree walk it replaced (tests/unit/tokens_ref.h): any
 * difference aborts. (The usage of answers: fuzz_usage_read.c.) */
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
	/* jansson drops a NUL byte after a number or literal; the scanner
	 * refuses it (test_tokens.c): no comparison there. */
	if (memchr(data, '\0', size) == NULL) {
		ref_tokens_estimate((const char *)data, size, 1024, &ref);
		if (!ref_estimate_agrees((const char *)data, size, &cost, &ref) ||
		    !ref_prefix_agrees((const char *)data, size, &cost))
			abort();
	}
	return 0;
}
