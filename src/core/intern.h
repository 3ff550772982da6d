/* SPDX-License-Identifier: Apache-2.0 */
/* intern — a table of shared, reference-counted strings.
 *
 * Lane keys name models, groups and scopes; 100,000 lanes that name a few
 * models hold one copy of each name. intern_get() returns the table's copy of
 * a byte string (adding a reference; equal bytes give the same pointer, so
 * interned names compare with ==), intern_put() lets one reference go and frees
 * the copy with the last. Lookups are O(1) expected: an htable (core/htable.h)
 * of pointers to the strings, hashed with intern_hash seeded by the caller
 * (names come from requests: a fixed seed would let a client send names that
 * all fall in one run), grown as it fills.
 *
 * Pure: no I/O. Not thread-safe (pacerd has one loop). */
#ifndef PACERD_INTERN_H
#define PACERD_INTERN_H

#include <stddef.h>
#include <stdint.h>

/* Longest string the table takes (a model name is capped far below). */
#define INTERN_MAX_LEN 4096u

struct intern;

/* A new, empty table; NULL when out of memory. */
struct intern *intern_new(uint64_t seed);
/* Frees the table and every string in it, referenced or not. */
void intern_free(struct intern *t);

/* The shared copy of s[0..n) (NUL-terminated, n bytes before the NUL; s may
 * hold NUL bytes), with one more reference. NULL when out of memory or
 * n > INTERN_MAX_LEN. */
const char *intern_get(struct intern *t, const char *s, size_t n);
/* One more reference to a string intern_get() returned. */
const char *intern_ref(const char *s);
/* Lets one reference to `s` go (a pointer intern_get() returned; NULL does
 * nothing); the last one frees it. */
void intern_put(struct intern *t, const char *s);
/* The length of an interned string (O(1)). */
size_t intern_len(const char *s);

/* Strings held, and the bytes they and the table take (for memory accounting:
 * entries with their headers, plus the bucket array). */
size_t intern_count(const struct intern *t);
size_t intern_bytes(const struct intern *t);

/* A fast 64-bit hash of n bytes (8 to 48 at a time; not cryptographic, but
 * keyed by `seed`). Also the prompt-prefix key of tokens.c. */
uint64_t intern_hash(const void *p, size_t n, uint64_t seed);

#endif
