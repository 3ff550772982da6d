/* registry — lane table. See registry.h.
 *
 * Chained hash table keyed by provider name, scope and model group; it doubles when the
 * load passes 1. Eviction never scans it: sched keeps every idle lane on the
 * registry's idle list, least recently active first, so a new key at the cap
 * takes the place of the coldest idle lane, and the periodic sweep stops at the
 * first lane that has not been idle long enough (nginx limit_req's LRU). */
#include "sched/registry.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/intern.h"
#include "core/keyid.h"
#include "sched/sched_lane-t.h"
#include "sched/scope.h"

/* A provider's name, shared by its lanes: after a reload lane.provider may
 * point into an older configuration, so the lane's identity is kept here. */
struct reg_name {
	struct reg_name *next;
	size_t lanes;
	char name[];
};

struct entry {
	struct sched_lane lane;
	struct reg_name *provider;
	uint64_t hash;
	struct entry *next;
};

struct registry {
	struct entry **buckets;
	size_t n_buckets;
	size_t count;
	struct sched_idle_list idle;
	struct reg_name *names; /* a handful: one per provider with lanes */
	struct intern *models;  /* the lanes' model groups */
};

static struct entry *entry_of(struct sched_lane *lane)
{
	return (struct entry *)(void *)((char *)lane - offsetof(struct entry, lane));
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

/* An interned model is one pointer per name: its address is its identity. */
static uint64_t lane_hash(const char *provider, uint64_t scope, const char *model)
{
	uint64_t h = fnv1a(14695981039346656037ULL, provider);
	h = (h ^ scope) * 1099511628211ULL;
	h = (h ^ (uint64_t)(uintptr_t)model) * 1099511628211ULL;
	return h ^ (h >> 29);
}

static struct reg_name *name_find(const struct registry *reg, const char *name)
{
	for (struct reg_name *n = reg->names; n != NULL; n = n->next)
		if (strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

static struct reg_name *name_get(struct registry *reg, const char *name)
{
	struct reg_name *n = name_find(reg, name);
	if (n != NULL)
		return n;
	size_t len = strlen(name);
	n = malloc(sizeof(*n) + len + 1);
	if (n == NULL)
		return NULL;
	memcpy(n->name, name, len + 1);
	n->lanes = 0;
	n->next = reg->names;
	reg->names = n;
	return n;
}

static void name_put(struct registry *reg, struct reg_name *n)
{
	if (--n->lanes > 0)
		return;
	struct reg_name **pp = &reg->names;
	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	free(n);
}

struct registry *registry_new(uint64_t seed)
{
	struct registry *reg = calloc(1, sizeof(*reg));
	if (reg == NULL)
		return NULL;
	reg->models = intern_new(seed);
	if (reg->models == NULL) {
		free(reg);
		return NULL;
	}
	sched_idle_list_init(&reg->idle);
	reg->n_buckets = 64;
	reg->buckets = calloc(reg->n_buckets, sizeof(*reg->buckets));
	if (reg->buckets == NULL) {
		intern_free(reg->models);
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

static void entry_free(struct registry *reg, struct entry *e,
                       void (*on_free)(struct sched_lane *lane, void *arg), void *arg)
{
	if (on_free)
		on_free(&e->lane, arg);
	intern_put(reg->models, e->lane.model);
	sched_lane_release(&e->lane);
	name_put(reg, e->provider);
	free(e);
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
			entry_free(reg, e, on_free, arg);
			e = next;
		}
	}
	free(reg->buckets);
	intern_free(reg->models);
	free(reg);
}

struct intern *registry_intern(struct registry *reg)
{
	return reg->models;
}

size_t registry_count(const struct registry *reg)
{
	return reg->count;
}

size_t registry_idle_count(const struct registry *reg)
{
	return reg->idle.n;
}

size_t registry_heap_bytes(const struct registry *reg)
{
	size_t n = sizeof(*reg) + reg->n_buckets * sizeof(*reg->buckets) +
	           reg->count * sizeof(struct entry);
	for (const struct reg_name *p = reg->names; p != NULL; p = p->next)
		n += sizeof(*p) + strlen(p->name) + 1;
	n += intern_bytes(reg->models);
	for (size_t i = 0; i < reg->n_buckets; i++)
		for (const struct entry *e = reg->buckets[i]; e != NULL; e = e->next)
			n += sched_lane_heap_bytes(&e->lane);
	return n;
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

/* Removes an idle lane: out of its chain (short: the load stays under 1),
 * then on_evict, then its memory. */
static void evict(struct registry *reg, struct sched_lane *lane,
                  void (*on_evict)(struct sched_lane *lane, void *arg), void *arg)
{
	struct entry *e = entry_of(lane);
	struct entry **pp = &reg->buckets[e->hash & (reg->n_buckets - 1)];
	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	reg->count--;
	entry_free(reg, e, on_evict, arg);
}

size_t registry_evict_idle(struct registry *reg, int64_t now_ms, int64_t idle_ms,
                           void (*on_evict)(struct sched_lane *lane, void *arg), void *arg)
{
	size_t evicted = 0;
	struct sched_lane *cold;
	/* Coldest first; the first lane not idle long enough ends the sweep,
	 * as every lane after it was active later. */
	while ((cold = sched_idle_coldest(&reg->idle)) != NULL &&
	       now_ms - cold->last_active_ms >= idle_ms) {
		evict(reg, cold, on_evict, arg);
		evicted++;
	}
	return evicted;
}

/* A key's own scope is the first 64 bits of its hash: the rest is compared
 * too, so that two keys never share a lane by a prefix alone. */
static bool same_key(const struct sched_lane *lane, const struct registry_lane_id *id)
{
	if (scope_kind_of(lane->scope) != SCOPE_KEY)
		return true;
	const char *kh = id->key_hash != NULL ? id->key_hash : "";
	return strcmp(lane->key_hash, kh) == 0;
}

struct sched_lane *registry_lane(struct registry *reg, const struct config *cfg,
                                 const struct provider_conf *prov,
                                 const struct registry_lane_id *id, int64_t now_ms,
                                 void (*on_evict)(struct sched_lane *, void *), void *arg)
{
	uint64_t h = lane_hash(prov->name, id->scope, id->model);
	const struct reg_name *pn = name_find(reg, prov->name);
	if (pn != NULL)
		for (struct entry *e = reg->buckets[h & (reg->n_buckets - 1)]; e != NULL;
		     e = e->next)
			if (e->hash == h && e->provider == pn && e->lane.scope == id->scope &&
			    e->lane.model == id->model && same_key(&e->lane, id))
				return &e->lane;

	if (reg->count >= cfg->limits.max_lanes) {
		/* Make room: the least recently active lane with nothing to do. */
		struct sched_lane *cold = sched_idle_coldest(&reg->idle);
		if (cold == NULL)
			return NULL;
		evict(reg, cold, on_evict, arg);
	}
	struct entry *e = calloc(1, sizeof(*e));
	struct reg_name *name = e != NULL ? name_get(reg, prov->name) : NULL;
	if (name == NULL) {
		free(e);
		return NULL;
	}
	name->lanes++;
	e->provider = name;
	e->hash = h;
	const char *kh = id->key_hash != NULL ? id->key_hash : "";
	const struct plan_conf *plan = config_plan_for(cfg, prov, kh, id->model);
	sched_lane_init(&e->lane, prov, plan, cfg->agents.mode, now_ms);
	e->lane.scope = id->scope;
	e->lane.model = id->model != NULL ? intern_ref(id->model) : NULL;
	memcpy(e->lane.key_hash, kh, strnlen(kh, sizeof(e->lane.key_hash) - 1));
	const char *sn = id->scope_name != NULL ? id->scope_name : "anonymous";
	memcpy(e->lane.key_id, sn, strnlen(sn, sizeof(e->lane.key_id) - 1));
	sched_lane_track_idle(&e->lane, &reg->idle);
	e->next = reg->buckets[h & (reg->n_buckets - 1)];
	reg->buckets[h & (reg->n_buckets - 1)] = e;
	reg->count++;
	if (reg->count > reg->n_buckets)
		grow(reg);
	return &e->lane;
}

uint64_t registry_key_scope(const char *key_hash)
{
	uint64_t v = 0;
	for (size_t i = 0; key_hash != NULL && i < 16 && key_hash[i] != '\0'; i++) {
		char c = key_hash[i];
		v = v << 4 | (uint64_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return scope_id(SCOPE_KEY, v);
}

struct sched_lane *registry_key_lane(struct registry *reg, const struct config *cfg,
                                     const struct provider_conf *prov, const char *key_hash,
                                     int64_t now_ms, void (*on_evict)(struct sched_lane *, void *),
                                     void *arg)
{
	char name[KEYID_NAME_SIZE];
	keyid_name(key_hash != NULL && key_hash[0] ? key_hash : NULL, name);
	struct registry_lane_id id = {
	    .scope = registry_key_scope(key_hash),
	    .scope_name = name,
	    .key_hash = key_hash,
	};
	return registry_lane(reg, cfg, prov, &id, now_ms, on_evict, arg);
}
