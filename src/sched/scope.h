/* SPDX-License-Identifier: Apache-2.0 */
/* scope — which limit scope a key's requests belong to (DESIGN §2, PROVIDERS.md
 * §10, issue 18 item 1). Pure: no I/O, no clock; instants are int64 ms passed in
 * by the caller. A lane is (provider, scope, model group): one table per provider.
 *
 * The model. Providers keep budgets per organization or project, not per key.
 * Until something says otherwise, a key is its own scope. What widens it, the
 * first that applies winning:
 *  1. the request's own identity (OpenAI-Project / OpenAI-Organization request
 *     headers): a key that bills two projects has two budgets, so this names the
 *     scope of that request alone and is never learned from;
 *  2. a configured scope (keys: entries with `scope: NAME`): the operator's word,
 *     from the start, over anything inferred (a wrong one is fixed in the config).
 *     The caller applies it (proxy/lanes.c reads the configuration, so a reload
 *     needs no table update): this table never holds one;
 *  3. the identity the answers to the key carry (OpenAI openai-organization +
 *     openai-project, Anthropic anthropic-organization-id + anthropic-workspace-id):
 *     from the first such answer on, the key's requests belong to that identity's
 *     scope. Keys whose answers carry the same identity share it: the scope id is
 *     the identity itself, so no merging is needed and there is nothing to undo
 *     when a key moves (its newest answer decides: a key moved to another
 *     project follows it).
 * Identities are opaque uint64 hashes made by the caller. So that a request that
 * names its project and an answer that names the same project land in one scope,
 * hash the narrowest name the provider gives, with the provider in front:
 * "openai:project:proj_…" when a project is named, else "openai:org:org-…";
 * "anthropic:workspace:…" when present, else "anthropic:org:…".
 *
 * Scope ids are uint64: the hash with its low 2 bits replaced by the kind
 * (SCOPE_KEY, SCOPE_NAMED, SCOPE_IDENTITY), so the three never collide. The top
 * 48 bits are the hash's: for a key id read from the first 16 hex digits of the
 * key's SHA-256, a key's own scope shows as the key's own 12-hex-digit name.
 * Identities are handled like key hashes: logs and /status show scope_format's
 * "id:3fa2b1c0d9e8", never the raw organization or project (a configured scope
 * is shown by its name instead, which the caller has).
 *
 * Memory. Only keys with a learned identity have an entry: a key that is its own
 * scope costs nothing (a flood of random keys whose answers carry no identity
 * adds none). Entries live in a slab (32 bytes each) indexed by an htable
 * (core/htable.h) of 32-bit slab positions, at most half full: the slab
 * doubles from 8 at first use, the index as it needs, so 40 to 80 bytes per
 * key (52 at 100,000 keys: tests/bench/bench_cost.c); O(1) expected per call
 * (18 ns for scope_of at 100,000 keys).
 * Entries are bounded by max_learned, least recently used first out, and
 * dropped after idle_ttl_ms without a request or answer (checked at the LRU's
 * tail on each call: O(1)). */
#ifndef PACERD_SCOPE_H
#define PACERD_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/htable.h"

enum scope_kind {
	SCOPE_KEY = 0,      /* the key alone */
	SCOPE_NAMED = 1,    /* a configured scope: the hash of its name */
	SCOPE_IDENTITY = 2, /* an organization / project / workspace */
};

struct scope_entry; /* scope.c */

struct scope_table {
	struct scope_entry *slab; /* entries at positions [0, n): kept dense */
	struct htable index;      /* of uint32_t: slab position + 1 */
	size_t n, slab_cap;
	uint32_t lru_head, lru_tail; /* the entries, newest first, slab position + 1 */
	size_t n_learned, max_learned;
	int64_t idle_ttl_ms; /* <= 0: learned entries never expire */
};

/* The scope id of `hash` as a scope of that kind. */
uint64_t scope_id(enum scope_kind kind, uint64_t hash);
enum scope_kind scope_kind_of(uint64_t scope_id);

/* "key:3fa2b1c0d9e8", "scope:…" or "id:…": the kind and the top 48 bits in hex.
 * Returns what snprintf returns. */
int scope_format(uint64_t scope_id, char *buf, size_t len);

/* An empty table: at most max_learned learned entries (0 is taken as 1), each
 * dropped after idle_ttl_ms without use (<= 0: never). Allocates nothing. */
void scope_init(struct scope_table *t, size_t max_learned, int64_t idle_ttl_ms);
void scope_free(struct scope_table *t);

/* The scope of a request made with key_id at now_ms; request_identity: the hash
 * of the identity its own headers name, 0: none. Marks the key used. Never
 * allocates. */
uint64_t scope_of(struct scope_table *t, uint64_t key_id, uint64_t request_identity,
                  int64_t now_ms);
/* The same without marking the key used (/status). */
uint64_t scope_peek(const struct scope_table *t, uint64_t key_id, uint64_t request_identity);

/* Learns from an answer to a request made with key_id: answer_identity is the
 * hash of the identity the answer carries (0: none, nothing learned). An answer to
 * a request that named its own identity (request_identity != 0) is ignored: it
 * says which budget that request billed, not the key's. Returns 1 when the key's
 * scope (scope_peek without a request identity) changed: worth a log line, and
 * the key's next requests go to another lane; 0 when it did not; -1 when memory
 * ran out (nothing learned: the key keeps its scope). */
int scope_learn(struct scope_table *t, uint64_t key_id, uint64_t request_identity,
                uint64_t answer_identity, int64_t now_ms);

/* Across a restart: one learned entry (a key and the identity its answers
 * named, last used at last_ms). Both are hashes already: neither a key nor
 * an organization's name. */
struct scope_saved {
	uint64_t key, identity;
	int64_t last_ms;
};
/* The learned entries, least recently used first, into out (at most max);
 * returns how many. Put back with scope_learn(t, key, 0, identity, last_ms) in
 * that order, so that the LRU comes out as it was. */
size_t scope_save(const struct scope_table *t, struct scope_saved *out, size_t max);

/* Entries held, and the heap bytes they take. */
size_t scope_count(const struct scope_table *t);
size_t scope_heap_bytes(const struct scope_table *t);

#endif
