/* registry — the table of lanes, one per (provider, API key hash): created on
 * first use, evicted when idle for limits.idle_ttl_s, capped at
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

struct registry;

struct registry *registry_new(void);
/* Calls on_free for every lane, then frees the table. */
void registry_free(struct registry *reg, void (*on_free)(struct sched_lane *lane, void *arg),
                   void *arg);

/* The lane of (prov, key_hash), created when new (key_hash NULL or "" = the
 * provider's anonymous lane). The plan comes from cfg->keys (a matching
 * key_sha256 prefix) or else the provider's plan. At cfg->limits.max_lanes a
 * new lane takes the place of the least recently active idle lane (on_evict
 * is called for it first); NULL when no lane is idle. */
struct sched_lane *registry_lane(struct registry *reg, const struct config *cfg,
                                 const struct provider_conf *prov, const char *key_hash,
                                 int64_t now_ms, void (*on_evict)(struct sched_lane *, void *),
                                 void *arg);

/* Evicts lanes idle for at least idle_ms; returns how many. Looks only at
 * those lanes and one more (now_ms is expected not to go backwards). */
size_t registry_evict_idle(struct registry *reg, int64_t now_ms, int64_t idle_ms,
                           void (*on_evict)(struct sched_lane *lane, void *arg), void *arg);

size_t registry_count(const struct registry *reg);
/* Lanes holding no request (those eviction may take). */
size_t registry_idle_count(const struct registry *reg);
/* Bytes the table holds on the heap: itself, its buckets, every lane with
 * what the lane allocated (malloc's own overhead aside). Walks the table. */
size_t registry_heap_bytes(const struct registry *reg);
void registry_foreach(struct registry *reg, void (*fn)(struct sched_lane *lane, void *arg),
                      void *arg);

/* The plan for a key of a provider: the first cfg->keys entry whose provider
 * matches and whose key_sha256 is a prefix of key_hash, else the provider's. */
const struct plan_conf *registry_plan_for(const struct config *cfg,
                                          const struct provider_conf *prov, const char *key_hash);

#endif
