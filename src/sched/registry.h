/* SPDX-License-Identifier: Apache-2.0 */
/* registry — the table of lanes, one per (provider, limit scope, model group)
 * (DESIGN §2): created on first use, evicted when idle for limits.idle_ttl_s, capped at
 * limits.max_lanes so that random keys cannot exhaust memory (DESIGN §2).
 * Lookup, creation and each eviction cost O(1), whatever the number of lanes. */
#ifndef PACERD_REGISTRY_H
#define PACERD_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

struct config;        /* core/config.h */
struct provider_conf; /* core/config.h */
struct plan_conf;     /* core/config.h */
struct sched_lane;    /* sched/sched.h */

struct intern;
struct registry;

/* Who a lane belongs to. */
struct registry_lane_id {
	uint64_t scope;         /* scope.h's scope_id(): a key, a configured scope, an identity */
	const char *scope_name; /* its name in logs, /status, /metrics and the store (< 24 bytes
	                         * kept): "3f9a1c0b7d2e", "scope:NAME", "id:…" */
	const char *model;      /* the model group, interned in registry_intern(); NULL: none */
	const char *key_hash;   /* the key of the request that makes the lane (its own plan);
	                         * NULL or "": none */
};

/* seed: for the table of model names (names come from requests). */
struct registry *registry_new(uint64_t seed);
/* Calls on_free for every lane, then frees the table. */
void registry_free(struct registry *reg, void (*on_free)(struct sched_lane *lane, void *arg),
                   void *arg);

/* The lane of (prov, id->scope, id->model), created when new with the plan
 * config_plan_for(cfg, prov, id->key_hash, id->model) gives. At
 * cfg->limits.max_lanes a new lane takes the place of the least recently
 * active idle lane (on_evict is called for it first); NULL when no lane is
 * idle (or out of memory). The lane keeps a reference to id->model. */
struct sched_lane *registry_lane(struct registry *reg, const struct config *cfg,
                                 const struct provider_conf *prov,
                                 const struct registry_lane_id *id, int64_t now_ms,
                                 void (*on_evict)(struct sched_lane *, void *), void *arg);
/* The lane of a key alone and no model: (prov, the key's scope, none); key_hash
 * NULL or "": the provider's anonymous lane. */
struct sched_lane *registry_key_lane(struct registry *reg, const struct config *cfg,
                                     const struct provider_conf *prov, const char *key_hash,
                                     int64_t now_ms, void (*on_evict)(struct sched_lane *, void *),
                                     void *arg);
/* The scope of a key alone (scope.h's SCOPE_KEY): its hash's first 64 bits
 * ("" or NULL: the anonymous lane's). */
uint64_t registry_key_scope(const char *key_hash);
/* The table model groups are interned in, for registry_lane_id.model. */
struct intern *registry_intern(struct registry *reg);

/* Evicts lanes idle for at least idle_ms; returns how many. Looks only at
 * those lanes and one more (now_ms is expected not to go backwards). */
size_t registry_evict_idle(struct registry *reg, int64_t now_ms, int64_t idle_ms,
                           void (*on_evict)(struct sched_lane *lane, void *arg), void *arg);

size_t registry_count(const struct registry *reg);
/* Lanes holding no request (those eviction may take). */
size_t registry_idle_count(const struct registry *reg);
/* Bytes the table holds on the heap: itself, its slots, every lane with
 * what the lane allocated (malloc's own overhead aside). Walks the table. */
size_t registry_heap_bytes(const struct registry *reg);
void registry_foreach(struct registry *reg, void (*fn)(struct sched_lane *lane, void *arg),
                      void *arg);

/* A walk over the lanes a slice at a time, spread over several loop turns
 * (the state file's snapshot, proxy/persist.c: no turn is held up by all the
 * lanes at once). Lanes may come and go between slices: one made meanwhile
 * may be missed, one that a deletion shifted behind the walk too (rare: it
 * takes a lane of the same run of slots), and one that the shift carried
 * around the table's end may come twice; the walk never stops short. The
 * table growing in between starts it over (REGISTRY_WALK_AGAIN: what the
 * slices gave so far is void). */
struct registry_walk {
	size_t slot, cap;
};
enum registry_walk_state { REGISTRY_WALK_MORE, REGISTRY_WALK_DONE, REGISTRY_WALK_AGAIN };
void registry_walk_start(const struct registry *reg, struct registry_walk *w);
/* Calls fn for up to max lanes more. */
enum registry_walk_state registry_walk_slice(struct registry *reg, struct registry_walk *w,
                                             size_t max,
                                             void (*fn)(struct sched_lane *lane, void *arg),
                                             void *arg);

#endif
