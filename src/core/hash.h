/* SPDX-License-Identifier: Apache-2.0 */
/* hash — the hash functions pacerd's tables share.
 *
 * hash_u64 spreads an integer (an id, a pointer, a hash of something else)
 * over 64 bits, so that any run of its low bits can pick a slot of an
 * htable (core/htable.h): the keys of the scheduler's tables (lanes, scopes,
 * flows, agents) are such integers. hash_fnv1a is the one FNV-1a: small,
 * stable ids made of short strings (the flow of an agent or a client
 * address). Strings that come from requests and need a seed go through
 * intern_hash (core/intern.h). */
#ifndef PACERD_HASH_H
#define PACERD_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_INIT UINT64_C(14695981039346656037)
#define HASH_FNV1A_PRIME UINT64_C(1099511628211)

/* FNV-1a: h (HASH_FNV1A_INIT to start) extended by n bytes at p. */
static inline uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * HASH_FNV1A_PRIME;
	return h;
}

/* x spread over 64 bits (a Fibonacci multiply, its high bits folded into the
 * low ones: a product's low bits depend on the factors' low bits alone). */
static inline uint64_t hash_u64(uint64_t x)
{
	uint64_t h = x * UINT64_C(0x9e3779b97f4a7c15);
	return h ^ (h >> 29);
}

/* Two integers as one: for keys of several fields. */
static inline uint64_t hash_u64_pair(uint64_t a, uint64_t b)
{
	return hash_u64(hash_u64(a) ^ b);
}

#endif
