/* SPDX-License-Identifier: Apache-2.0 */
/* registry — lane table. See registry.h.
 *
 * An htable (core/htable.h) of pointers to the lanes, keyed by provider,
 * scope and model group: each is one pointer (its reg_name, the interned
 * model) or an integer, so the key hashes without reading a string, and a
 * lane's hash is worked out again from the lane when the table moves it
 * (nothing is stored for it). Eviction never scans it: sched keeps every idle
 * lane on the registry's idle list, least recently active first, so a new key
 * at the cap takes the place of the coldest idle lane, and the periodic sweep
 * stops at the first lane that has not been idle long enough (nginx
 * limit_req's LRU). */
#include "sched/registry.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/hash.h"
#include "core/htable.h"
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
};

struct registry {
	struct htable lanes; /* of struct entry * */
	struct sched_idle_list idle;
	struct reg_name *names; /* a handful: one per provider with lanes */
	struct intern *models;  /* the lanes' model groups */
};

static struct entry *entry_of(struct sched_lane *lane)
{
	return (struct entry *)(void *)((char *)lane - offsetof(struct entry, lane));
}

/* A provider's reg_name and an interned model are one pointer per name:
 * their addresses are their identities. */
static uint64_t lane_hash(const struct reg_name *provider, uint64_t scope, const char *model)
{
	uint64_t h = hash_u64_pair((uint64_t)(uintptr_t)provider, scope);
	return hash_u64_pair(h, (uint64_t)(uintptr_t)model);
}

/* What registry_lane looks a lane up by. */
struct lane_key {
	const struct reg_name *provider;
	const struct registry_lane_id *id;
};

static struct entry *slot_entry(const void *slot)
{
	return *(struct entry *const *)slot;
}

static uint64_t slot_hash(const void *slot, const void *ctx)
{
	(void)ctx;
	const struct entry *e = slot_entry(slot);
	return lane_hash(e->provider, e->lane.scope, e->lane.model);
}

static bool same_key(const struct sched_lane *lane, const struct registry_lane_id *id);

static bool slot_match(const void *slot, const void *key, const void *ctx)
{
	(void)ctx;
	const struct entry *e = slot_entry(slot);
	const struct lane_key *k = key;
	return e->provider == k->provider && e->lane.scope == k->id->scope &&
	       e->lane.model == k->id->model && same_key(&e->lane, k->id);
}

static const struct htable_type lane_table = {
    .size = sizeof(struct entry *),
    .used = htable_ptr_used,
    .hash = slot_hash,
    .match = slot_match,
};

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
	return reg;
}

void registry_foreach(struct registry *reg, void (*fn)(struct sched_lane *lane, void *arg),
                      void *arg)
{
	struct htable_iter it;
	htable_iter_init(&reg->lanes, &lane_table, &it);
	for (void *s; (s = htable_iter_next(&reg->lanes, &lane_table, &it)) != NULL;)
		fn(&slot_entry(s)->lane, arg);
}

void registry_walk_start(const struct registry *reg, struct registry_walk *w)
{
	w->slot = 0;
	w->cap = reg->lanes.cap;
}

enum registry_walk_state registry_walk_slice(struct registry *reg, struct registry_walk *w,
                                             size_t max,
                                             void (*fn)(struct sched_lane *lane, void *arg),
                                             void *arg)
{
	if (reg->lanes.cap != w->cap) {
		registry_walk_start(reg, w);
		return REGISTRY_WALK_AGAIN;
	}
	for (size_t n = 0; w->slot < w->cap && n < max; w->slot++) {
		void *s = htable_at(&reg->lanes, &lane_table, w->slot);
		if (!lane_table.used(s))
			continue;
		fn(&slot_entry(s)->lane, arg);
		n++;
	}
	return w->slot < w->cap ? REGISTRY_WALK_MORE : REGISTRY_WALK_DONE;
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
	struct htable_iter it;
	htable_iter_init(&reg->lanes, &lane_table, &it);
	for (void *s; (s = htable_iter_next(&reg->lanes, &lane_table, &it)) != NULL;)
		entry_free(reg, slot_entry(s), on_free, arg);
	htable_free(&reg->lanes);
	intern_free(reg->models);
	free(reg);
}

struct intern *registry_intern(struct registry *reg)
{
	return reg->models;
}

size_t registry_count(const struct registry *reg)
{
	return reg->lanes.n;
}

size_t registry_idle_count(const struct registry *reg)
{
	return reg->idle.n;
}

size_t registry_heap_bytes(const struct registry *reg)
{
	size_t n = sizeof(*reg) + htable_bytes(&reg->lanes, &lane_table) +
	           reg->lanes.n * sizeof(struct entry);
	for (const struct reg_name *p = reg->names; p != NULL; p = p->next)
		n += sizeof(*p) + strlen(p->name) + 1;
	n += intern_bytes(reg->models);
	struct htable_iter it;
	htable_iter_init(&reg->lanes, &lane_table, &it);
	for (void *s; (s = htable_iter_next(&reg->lanes, &lane_table, &it)) != NULL;)
		n += sched_lane_heap_bytes(&slot_entry(s)->lane);
	return n;
}

static void *slot_of(const struct registry *reg, const struct entry *e)
{
	struct registry_lane_id id = {
	    .scope = e->lane.scope, .model = e->lane.model, .key_hash = e->lane.key_hash};
	struct lane_key k = {e->provider, &id};
	return htable_find(&reg->lanes, &lane_table,
	                   lane_hash(e->provider, e->lane.scope, e->lane.model), &k, NULL);
}

/* Removes an idle lane: out of the table, then on_evict, then its memory. */
static void evict(struct registry *reg, struct sched_lane *lane,
                  void (*on_evict)(struct sched_lane *lane, void *arg), void *arg)
{
	struct entry *e = entry_of(lane);
	htable_delete(&reg->lanes, &lane_table, slot_of(reg, e), NULL);
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
	const struct reg_name *pn = name_find(reg, prov->name);
	if (pn != NULL) {
		struct lane_key k = {pn, id};
		void *s = htable_find(&reg->lanes, &lane_table, lane_hash(pn, id->scope, id->model),
		                      &k, NULL);
		if (s != NULL)
			return &slot_entry(s)->lane;
	}

	if (reg->lanes.n >= cfg->limits.max_lanes) {
		/* Make room: the least recently active lane with nothing to do. */
		struct sched_lane *cold = sched_idle_coldest(&reg->idle);
		if (cold == NULL)
			return NULL;
		evict(reg, cold, on_evict, arg);
	}
	struct entry *e = calloc(1, sizeof(*e));
	struct reg_name *name = e != NULL && htable_reserve(&reg->lanes, &lane_table, NULL)
	                            ? name_get(reg, prov->name)
	                            : NULL;
	if (name == NULL) {
		free(e);
		return NULL;
	}
	name->lanes++;
	e->provider = name;
	const char *kh = id->key_hash != NULL ? id->key_hash : "";
	const struct plan_conf *plan = config_plan_for(cfg, prov, kh, id->model);
	sched_lane_init(&e->lane, prov, plan, cfg->agents.mode, now_ms);
	e->lane.scope = id->scope;
	e->lane.model = id->model != NULL ? intern_ref(id->model) : NULL;
	memcpy(e->lane.key_hash, kh, strnlen(kh, sizeof(e->lane.key_hash) - 1));
	const char *sn = id->scope_name != NULL ? id->scope_name : "anonymous";
	memcpy(e->lane.key_id, sn, strnlen(sn, sizeof(e->lane.key_id) - 1));
	sched_lane_track_idle(&e->lane, &reg->idle);
	*(struct entry **)htable_insert(&reg->lanes, &lane_table,
	                                lane_hash(name, e->lane.scope, e->lane.model)) = e;
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
