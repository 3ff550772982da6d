/* SPDX-License-Identifier: Apache-2.0 */
/* key_index — the keys: entries of a configuration, indexed at load by
 * provider and the first 12 hex digits of their key_sha256 (the shortest
 * prefix an entry may give), so that a keyed request finds its entry with a
 * binary search instead of a scan of every entry (issue 27.6).
 *
 * Built by config_load() and owned by the configuration; immutable after.
 * Pure: no I/O. */
#ifndef PACERD_KEY_INDEX_H
#define PACERD_KEY_INDEX_H

#include <stddef.h>

#include "core/config.h"

struct key_index;

/* An index of keys[0..n) (their provider and lower-case key_sha256 strings,
 * which must outlive it). NULL when out of memory. */
struct key_index *key_index_build(const struct key_conf *keys, size_t n);
void key_index_free(struct key_index *ix);

/* The entry of `provider` whose key_sha256 prefixes key_hash (a key's
 * lower-case SHA-256 in hex); the first in the file when several do. NULL when
 * none does, or key_hash is NULL or shorter than 12 digits. The same answer
 * as a scan of the entries in file order, in O(log n). */
const struct key_conf *key_index_find(const struct key_index *ix, const char *provider,
                                      const char *key_hash);

#endif
