/* SPDX-License-Identifier: Apache-2.0 */
/* json_mutations — the mutations of a JSON text that the scanners are compared
 * with their jansson references on (test_tokens, test_tokens_items,
 * test_usage_read): every prefix, and every byte replaced by each of a set of
 * bytes that change the meaning of JSON text (structure, escapes, digits,
 * control bytes, invalid and lead UTF-8 bytes, NUL). */
#ifndef PACERD_TEST_JSON_MUTATIONS_H
#define PACERD_TEST_JSON_MUTATIONS_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* fn(text, len) for each mutation of body (a NUL-terminated string). */
static void json_mutations(const char *body, void (*fn)(const char *text, size_t len))
{
	static const char swaps[] = "\"\\{}[]:, 0-9eE.u\x01\x7f";
	static const unsigned char high[] = {0x80, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xF4, 0xF5, 0xFF};
	size_t n = strlen(body);
	char *b = malloc(n + 1);
	ck_assert_ptr_nonnull(b);
	for (size_t cut = 0; cut <= n; cut++)
		fn(body, cut);
	for (size_t i = 0; i < n; i++) {
		memcpy(b, body, n);
		for (size_t k = 0; k < sizeof swaps - 1 + sizeof high; k++) {
			b[i] = k < sizeof swaps - 1 ? swaps[k] : (char)high[k - (sizeof swaps - 1)];
			fn(b, n);
		}
		b[i] = '\0';
		fn(b, n);
	}
	free(b);
}

#endif
