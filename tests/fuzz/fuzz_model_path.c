/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: the model a request path names (model_from_path: Gemini's
 * models/NAME:METHOD, Azure's openai/deployments/NAME). A name found lies
 * inside the path, before its query, is 1 to TOKENS_MODEL_MAX printable
 * bytes without space, '"' or '\\'; model_of_request without a body gives
 * the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy without a NUL after it: the parse must stop at size. */
	char *path = malloc(size ? size : 1);
	if (path == NULL)
		return 0;
	memcpy(path, data, size);

	const char *name;
	size_t len;
	bool found = model_from_path(path, size, &name, &len);
	if (!found) {
		if (name != NULL || len != 0)
			abort();
	} else {
		if (name < path || len == 0 || len > TOKENS_MODEL_MAX ||
		    (size_t)(name - path) + len > size)
			abort();
		const char *q = memchr(path, '?', size), *f = memchr(path, '#', size);
		if ((q != NULL && name + len > q) || (f != NULL && name + len > f))
			abort();
		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)name[i];
			if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
				abort();
		}
	}

	char buf[TOKENS_MODEL_MAX];
	const char *n2;
	size_t l2;
	enum model_source src = model_of_request(path, size, NULL, buf, &n2, &l2);
	if ((src == MODEL_PATH) != found || (found && (n2 != name || l2 != len)) ||
	    (!found && (src != MODEL_NONE || n2 != NULL || l2 != 0)))
		abort();
	free(path);
	return 0;
}
