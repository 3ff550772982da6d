/* registry — lane table. See registry.h.
 *
 * Chained hash table keyed by provider name and key hash; it doubles when the
 * load passes 1. Eviction walks the table: it runs from a periodic timer and
 * when a new lane would pass the cap, both rare. */
#include "registry.h"

#include <stdlib.h>
#include <string.h>

#include "route.h"

struct entry {
	struct sched_lane lane;
	/* The lane's identity, kept here: after a reload lane.provider may
	 * point into an older configuration. */
	char provider_name[65];
	uint64_t hash;
	struct entry *next;
};

struct registry {
	struct entry **buckets;
	size_t n_buckets;
	size_t count;
};

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

static uint64_t lane_hash(const char *provider, const char *key_hash)
{
	uint64_t h = fnv1a(14695981039346656037ULL, provider);
	h = fnv1a(h ^ 0xff, key_hash);
	return h;
}

struct registry *registry_new(void)
{
	struct registry *reg = calloc(1, sizeof(*reg));
	if (reg == NULL)
		return NULL;
	reg->n_buckets = 64;
	reg->buckets = calloc(reg->n_buckets, sizeof(*reg->buckets));
	if (reg->buckets == NULL) {
		free(reg);
		return NULL;
	}
	return reg;
}

void registry_foreach(struct registry *reg, void (*fn)(struct sched_lane *lane, void *arg),
                      void *arg)
{
	for (size_t i = 0; i < reg->n_buckets; i++) {
		struct entry *e = reg->buckets[i];
		while (e != NULL) {
			struct entry *next = e->next; /* fn may not free, but be safe */
			fn(&e->lane, arg);
			e = next;
		}
	}
}

void registry_free(struct registry *reg, void (*on_free)(struct sched_lane *lane, void *arg),
                   void *arg)
{
	if (reg == NULL)
		return;
	for (size_t i = 0; i < reg->n_buckets; i++) {
		struct entry *e = reg->buckets[i];
		while (e != NULL) {
			struct entry *next = e->next;
			if (on_free)
				on_free(&e->lane, arg);
			free(e);
			e = next;
		}
	}
	free(reg->buckets);
	free(reg);
}

size_t registry_count(const struct registry *reg)
{
	return reg->count;
}

const struct plan_conf *registry_plan_for(const struct config *cfg,
                                          const struct provider_conf *prov, const char *key_hash)
{
	if (key_hash != NULL && key_hash[0] != '\0') {
		for (size_t i = 0; i < cfg->n_keys; i++) {
			const struct key_conf *k = &cfg->keys[i];
			if (strcmp(k->provider, prov->name) == 0 &&
			    strncmp(k->key_sha256, key_hash, strlen(k->key_sha256)) == 0)
				return config_plan(cfg, k->plan);
		}
	}
	return config_plan(cfg, prov->plan);
}

static void grow(struct registry *reg)
{
	size_t n = reg->n_buckets * 2;
	struct entry **b = calloc(n, sizeof(*b));
	if (b == NULL)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < reg->n_buckets; i++) {
		struct entry *e = reg->buckets[i];
		while (e != NULL) {
			struct entry *next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	free(reg->buckets);
	reg->buckets = b;
	reg->n_buckets = n;
}

size_t registry_evict_idle(struct registry *reg, int64_t now_ms, int64_t idle_ms,
                           void (*on_evict)(struct sched_lane *lane, void *arg), void *arg)
{
	size_t evicted = 0;
	for (size_t i = 0; i < reg->n_buckets; i++) {
		struct entry **pp = &reg->buckets[i];
		while (*pp != NULL) {
			struct entry *e = *pp;
			if (sched_lane_idle(&e->lane) &&
			    now_ms - e->lane.last_active_ms >= idle_ms) {
				*pp = e->next;
				if (on_evict)
					on_evict(&e->lane, arg);
				free(e);
				reg->count--;
				evicted++;
			} else {
				pp = &e->next;
			}
		}
	}
	return evicted;
}

struct sched_lane *registry_lane(struct registry *reg, const struct config *cfg,
                                 const struct provider_conf *prov, const char *key_hash,
                                 int64_t now_ms, void (*on_evict)(struct sched_lane *, void *),
                                 void *arg)
{
	const char *kh = key_hash != NULL ? key_hash : "";
	uint64_t h = lane_hash(prov->name, kh);
	for (struct entry *e = reg->buckets[h & (reg->n_buckets - 1)]; e != NULL; e = e->next)
		if (e->hash == h && strcmp(e->lane.key_hash, kh) == 0 &&
		    strcmp(e->provider_name, prov->name) == 0)
			return &e->lane;

	if (reg->count >= cfg->limits.max_lanes) {
		/* Make room from lanes with nothing to do, the least recently
		 * used first would be better; any idle one is enough here. */
		if (registry_evict_idle(reg, now_ms, 0, on_evict, arg) == 0)
			return NULL;
	}
	struct entry *e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	e->hash = h;
	const struct plan_conf *plan = registry_plan_for(cfg, prov, kh);
	sched_lane_init(&e->lane, prov, plan, cfg->agents.mode, now_ms);
	memcpy(e->lane.key_hash, kh, strnlen(kh, sizeof(e->lane.key_hash) - 1));
	memcpy(e->provider_name, prov->name, strnlen(prov->name, sizeof(e->provider_name) - 1));
	route_key_id(kh[0] ? kh : NULL, e->lane.key_id);
	e->next = reg->buckets[h & (reg->n_buckets - 1)];
	reg->buckets[h & (reg->n_buckets - 1)] = e;
	reg->count++;
	if (reg->count > reg->n_buckets)
		grow(reg);
	return &e->lane;
}
