/* SPDX-License-Identifier: Apache-2.0 */
/* cost — what a request is charged; see cost.h for the model. */
#include "sched/cost.h"

#include <stdlib.h>
#include <string.h>

/* One prompt of a lane. key 0: a free slot. */
struct cost_prompt {
	uint64_t key;
	int64_t expires_ms; /* when the provider's cache of it lapses: the newest
	                     * answered request's sending + its cache's lifetime */
	float s_charged;    /* decayed Σ charged input of its answers */
	float s_est;        /* decayed Σ input estimate of the same answers */
};

struct cost_outputs {
	uint32_t v[COST_OUTPUTS]; /* ring of the newest answers' output tokens */
	uint8_t head;             /* next slot written */
	uint8_t n;                /* slots filled, <= COST_OUTPUTS */
	uint8_t rule;             /* learned: 0 nothing yet, else enum cost_output_rule + 1 */
	uint32_t pct;             /* the cached percentile of v */
	float last_limit, last_remaining; /* the newest output budget count (remaining < 0: none) */
	int64_t last_ms;
};
_Static_assert(COST_OUTPUTS <= 255, "head and n are bytes");

/* One chain of requests whose history the provider holds (cost.h). key 0: a
 * free slot. */
struct cost_chain {
	uint64_t key;
	int64_t last_ms; /* when the request of its newest answer went upstream */
	float held;      /* that answer's charged input − its request's estimate */
	float grow;      /* that request's items + its answer's output */
	float s_grown;   /* decayed Σ of the growth seen (held − the previous held) */
	float s_grow;    /* decayed Σ of the growth foretold (the previous grow) */
};

/* Agent hashes and prompt hashes live in one table: keep them apart. */
#define COST_AGENT_SALT 0x6a09e667f3bcc909ULL
/* Chains are keyed by conversation, agent or prompt: the same. */
#define COST_CONV_SALT 0xbb67ae8584caa73bULL
#define COST_CHAIN_PROMPT_SALT 0x3c6ef372fe94f82bULL

void cost_lane_init(struct cost_lane *c)
{
	memset(c, 0, sizeof(*c));
}

void cost_lane_free(struct cost_lane *c)
{
	free(c->prompts);
	free(c->outputs);
	free(c->chains);
	cost_lane_init(c);
}

size_t cost_lane_heap_bytes(const struct cost_lane *c)
{
	return (c->prompts ? COST_PROMPTS * sizeof(struct cost_prompt) : 0) +
	       (c->outputs ? sizeof(struct cost_outputs) : 0) +
	       (c->chains ? COST_CHAINS * sizeof(struct cost_chain) : 0);
}

/* The table key of a request: its prompt, else its agent, else 0 (none). */
static uint64_t prompt_key(const struct cost_request *r)
{
	if (r->prompt_key != 0)
		return r->prompt_key;
	if (r->agent == 0)
		return 0;
	uint64_t k = r->agent ^ COST_AGENT_SALT;
	return k != 0 ? k : 1;
}

static struct cost_prompt *prompt_find(const struct cost_lane *c, uint64_t key)
{
	if (c->prompts == NULL || key == 0)
		return NULL;
	for (size_t i = 0; i < COST_PROMPTS; i++)
		if (c->prompts[i].key == key)
			return &c->prompts[i];
	return NULL;
}

/* The entry of key, made when missing in a free slot or in place of the
 * prompt whose cache lapses first. */
static struct cost_prompt *prompt_get(struct cost_lane *c, uint64_t key, bool *made)
{
	*made = false;
	struct cost_prompt *victim = &c->prompts[0];
	for (size_t i = 0; i < COST_PROMPTS; i++) {
		struct cost_prompt *p = &c->prompts[i];
		if (p->key == key)
			return p;
		if (victim->key != 0 && (p->key == 0 || p->expires_ms < victim->expires_ms))
			victim = p;
	}
	memset(victim, 0, sizeof(*victim));
	victim->key = key;
	*made = true;
	return victim;
}

static int64_t ttl_or_default(int64_t ttl_ms)
{
	return ttl_ms > 0 ? ttl_ms : COST_CACHE_TTL_MS;
}

/* The share of r's estimate to charge at now_ms; 1 when nothing warm is known. */
static double input_share(const struct cost_lane *c, const struct cost_request *r, int64_t now_ms)
{
	const struct cost_prompt *p = prompt_find(c, prompt_key(r));
	if (p == NULL || p->s_est <= 0 || now_ms > p->expires_ms)
		return 1;
	double share = (double)p->s_charged / p->s_est;
	double floor = COST_SHARE_MIN;
	if (r->prefix_tokens > 0 && r->input_estimate > 0 && r->prefix_tokens < r->input_estimate) {
		double added = (double)(r->input_estimate - r->prefix_tokens) / r->input_estimate;
		if (added > floor)
			floor = added;
	}
	if (!(share >= floor)) /* NaN too */
		share = floor;
	return share < 1 ? share : 1;
}

double cost_input_share(const struct cost_lane *c, const struct cost_request *r, int64_t now_ms)
{
	return input_share(c, r, now_ms);
}

/* ---- the history the provider holds ---- */

/* The chain of r: its conversation, else its agent, else its prompt; 0: none. */
static uint64_t chain_key(const struct cost_request *r)
{
	uint64_t k;
	if (r->conversation != 0)
		k = r->conversation ^ COST_CONV_SALT;
	else if (r->agent != 0)
		k = r->agent ^ COST_AGENT_SALT;
	else if (r->prompt_key != 0)
		k = r->prompt_key ^ COST_CHAIN_PROMPT_SALT;
	else
		return 0;
	return k != 0 ? k : 1;
}

static struct cost_chain *chain_find(const struct cost_lane *c, uint64_t key)
{
	if (c->chains == NULL || key == 0)
		return NULL;
	for (size_t i = 0; i < COST_CHAINS; i++)
		if (c->chains[i].key == key)
			return &c->chains[i];
	return NULL;
}

/* The entry of key, made when missing in a free slot or in place of the least
 * recently sent chain. */
static struct cost_chain *chain_get(struct cost_lane *c, uint64_t key, bool *made)
{
	*made = false;
	struct cost_chain *victim = &c->chains[0];
	for (size_t i = 0; i < COST_CHAINS; i++) {
		struct cost_chain *h = &c->chains[i];
		if (h->key == key)
			return h;
		if (victim->key != 0 && (h->key == 0 || h->last_ms < victim->last_ms))
			victim = h;
	}
	memset(victim, 0, sizeof(*victim));
	victim->key = key;
	*made = true;
	return victim;
}

/* The history a chained request r will be charged (cost.h); 0 when it is not
 * chained or its chain was never answered. */
static double held_history(const struct cost_lane *c, const struct cost_request *r)
{
	if (!r->chained)
		return 0;
	const struct cost_chain *h = chain_find(c, chain_key(r));
	if (h == NULL)
		return 0;
	double g = h->s_grow > 0 ? (double)h->s_grown / h->s_grow : 1;
	if (!(g >= 0)) /* NaN too */
		g = 0;
	if (g > COST_GROW_MAX)
		g = COST_GROW_MAX;
	double held = h->held + g * h->grow;
	return held > 0 ? held : 0;
}

static int observe_history(struct cost_lane *c, const struct cost_request *r,
                           const struct cost_usage *u, int64_t sent_ms)
{
	if ((!r->chained && !r->stored) || u->charged_input < 0)
		return 0;
	uint64_t key = chain_key(r);
	if (key == 0)
		return 0;
	if (c->chains == NULL) {
		c->chains = calloc(COST_CHAINS, sizeof(*c->chains));
		if (c->chains == NULL)
			return -1;
	}
	bool made;
	struct cost_chain *h = chain_get(c, key, &made);
	if (!made && sent_ms < h->last_ms)
		return 0; /* an older turn answered late: the newer one is the base */
	double sent = r->input_estimate > 0 ? (double)r->input_estimate : 0;
	double held = (double)u->charged_input - sent;
	if (!made && r->chained) {
		h->s_grown = (float)(h->s_grown * COST_DECAY + (held - h->held));
		h->s_grow = (float)(h->s_grow * COST_DECAY + h->grow);
	}
	h->held = (float)held;
	h->grow = (float)((r->items > 0 ? r->items : 0) + (u->output > 0 ? u->output : 0));
	h->last_ms = sent_ms;
	return 0;
}

int64_t cost_output_percentile(const struct cost_lane *c)
{
	return c->outputs != NULL && c->outputs->n > 0 ? (int64_t)c->outputs->pct : -1;
}

enum cost_output_rule cost_output_rule(const struct cost_lane *c,
                                       enum cost_output_rule rule_default)
{
	return c->outputs != NULL && c->outputs->rule != 0
	           ? (enum cost_output_rule)(c->outputs->rule - 1)
	           : rule_default;
}

void cost_charge(const struct cost_lane *c, const struct cost_request *r, bool cached_input_free,
                 enum cost_output_rule rule_default, unsigned default_output, int64_t now_ms,
                 struct cost_charge *out)
{
	double input = r->input_estimate > 0 ? (double)r->input_estimate : 0;
	double share = cached_input_free ? input_share(c, r, now_ms) : 1;
	out->held = held_history(c, r);
	out->input = input * share + out->held;
	out->input_scaled = share < 1;
	out->output_learned = false;
	double likely = default_output;
	if (cost_output_percentile(c) >= 0) {
		likely = c->outputs->pct;
		out->output_learned = true;
	}
	if (r->max_output >= 0 && (cost_output_rule(c, rule_default) == COST_OUTPUT_RESERVED ||
	                           (double)r->max_output <= likely)) {
		out->output = (double)r->max_output;
		out->output_learned = false;
	} else {
		out->output = likely;
	}
}

/* ---- the output rule ---- */

int cost_output_evidence(const struct cost_output_count *now, const struct cost_output_count *prev,
                         int64_t pct)
{
	double m = (double)now->max_output;
	if (now->max_output <= 0 || now->remaining < 0)
		return 0;
	/* Both rules would charge about the same: nothing to tell. */
	if (m <= (double)(pct > 0 ? pct : 0) + COST_RULE_SLACK)
		return 0;
	if (now->limit > 0 && now->remaining + m > now->limit + COST_RULE_SLACK)
		return COST_OUTPUT_PRODUCED + 1;
	if (!now->alone || prev == NULL || prev->remaining < 0 || prev->at_ms > now->at_ms)
		return 0;
	/* The budget before this request: the previous count and a per-minute
	 * refill since (the limit is per minute in every header family that sends
	 * one), at most the limit. */
	double before = prev->remaining;
	double limit = now->limit > 0 ? now->limit : prev->limit;
	if (limit > 0) {
		before += limit * (double)(now->at_ms - prev->at_ms) / 60000.0;
		if (before > limit)
			before = limit;
	}
	double drop = before - now->remaining;
	if (drop >= m - COST_RULE_SLACK)
		return COST_OUTPUT_RESERVED + 1;
	if (drop + COST_RULE_SLACK < m / 2)
		return COST_OUTPUT_PRODUCED + 1;
	return 0;
}

int cost_output_headers(struct cost_lane *c, const struct cost_output_count *n)
{
	if (n->remaining < 0)
		return 0;
	struct cost_output_count prev = {.remaining = -1};
	if (c->outputs != NULL) {
		prev.limit = c->outputs->last_limit;
		prev.remaining = c->outputs->last_remaining;
		prev.at_ms = c->outputs->last_ms;
	}
	int ev = cost_output_evidence(n, &prev, cost_output_percentile(c));
	if (c->outputs == NULL) {
		c->outputs = calloc(1, sizeof(*c->outputs));
		if (c->outputs == NULL)
			return -1;
	}
	if (ev != 0)
		c->outputs->rule = (uint8_t)ev;
	c->outputs->last_limit = (float)n->limit;
	c->outputs->last_remaining = (float)n->remaining;
	c->outputs->last_ms = n->at_ms;
	return 0;
}

/* ---- the output percentile ---- */

/* Sorts a[0..n-1] (n <= COST_OUTPUTS: an insertion sort is a microsecond, once
 * per answer). */
static void sort_small(uint32_t *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		uint32_t v = a[i];
		size_t j = i;
		for (; j > 0 && a[j - 1] > v; j--)
			a[j] = a[j - 1];
		a[j] = v;
	}
}

static void outputs_record(struct cost_lane *c, uint32_t v)
{
	struct cost_outputs *o = c->outputs;
	o->v[o->head] = v;
	o->head = (uint8_t)((o->head + 1) % COST_OUTPUTS);
	if (o->n < COST_OUTPUTS)
		o->n++;
	uint32_t tmp[COST_OUTPUTS];
	memcpy(tmp, o->v, o->n * sizeof(tmp[0]));
	/* nearest rank: the ceil(p × n)-th smallest */
	size_t rank = (size_t)(COST_OUTPUT_PCT * o->n + 0.999999);
	if (rank < 1)
		rank = 1;
	sort_small(tmp, o->n);
	o->pct = tmp[rank - 1];
}

static int observe_output(struct cost_lane *c, const struct cost_usage *u)
{
	if (u->output < 0)
		return 0;
	uint32_t v = u->output > UINT32_MAX ? UINT32_MAX : (uint32_t)u->output;
	if (c->outputs == NULL) {
		c->outputs = calloc(1, sizeof(*c->outputs));
		if (c->outputs == NULL)
			return -1;
	} else if (u->output_capped && v < c->outputs->pct) {
		return 0; /* "at least v": nothing about the tail */
	}
	outputs_record(c, v);
	return 0;
}

/* ---- the input share ---- */

static int observe_input(struct cost_lane *c, const struct cost_request *r,
                         const struct cost_usage *u, int64_t sent_ms)
{
	uint64_t key = prompt_key(r);
	if (key == 0 || r->chained || r->input_estimate <= 0 || u->charged_input < 0)
		return 0;
	int64_t read = u->cache_read > 0 ? u->cache_read : 0;
	int64_t wrote = u->cache_creation > 0 ? u->cache_creation : 0;
	if (wrote > u->charged_input)
		wrote = u->charged_input;
	if (c->prompts == NULL) {
		if (read == 0 && wrote == 0)
			return 0; /* no cached prompt seen yet: nothing to keep */
		c->prompts = calloc(COST_PROMPTS, sizeof(*c->prompts));
		if (c->prompts == NULL)
			return -1;
	}
	bool made;
	struct cost_prompt *p = prompt_get(c, key, &made);
	float est = (float)r->input_estimate;
	if (read == 0 && wrote > 0) {
		/* a cold call: the next one reads what this one wrote */
		p->s_charged = (float)(u->charged_input - wrote);
		p->s_est = est;
	} else {
		p->s_charged = (float)(p->s_charged * COST_DECAY + u->charged_input);
		p->s_est = (float)(p->s_est * COST_DECAY + est);
	}
	int64_t expires = sent_ms + ttl_or_default(r->cache_ttl_ms);
	if (made || p->expires_ms < expires) /* answers may come back out of order */
		p->expires_ms = expires;
	return 0;
}

int cost_observe(struct cost_lane *c, const struct cost_request *r, const struct cost_usage *u,
                 int64_t sent_ms)
{
	int rc_in = observe_input(c, r, u, sent_ms);
	int rc_out = observe_output(c, u);
	int rc_held = observe_history(c, r, u, sent_ms);
	return rc_in == 0 && rc_out == 0 && rc_held == 0 ? 0 : -1;
}

/* ---- across a restart ---- */

size_t cost_outputs_save(const struct cost_lane *c, uint32_t out[COST_OUTPUTS], uint8_t *rule)
{
	const struct cost_outputs *o = c->outputs;
	*rule = 0;
	if (o == NULL)
		return 0;
	*rule = o->rule <= COST_OUTPUT_PRODUCED + 1 ? o->rule : 0;
	/* the oldest is at head once the ring is full, else at 0 */
	size_t first = o->n < COST_OUTPUTS ? 0 : o->head;
	for (size_t i = 0; i < o->n; i++)
		out[i] = o->v[(first + i) % COST_OUTPUTS];
	return o->n;
}

int cost_outputs_resume(struct cost_lane *c, const uint32_t *v, size_t n, uint8_t rule)
{
	if (n == 0 && rule == 0)
		return 0;
	if (c->outputs == NULL) {
		if ((c->outputs = calloc(1, sizeof(*c->outputs))) == NULL)
			return -1;
		c->outputs->last_remaining = -1; /* no count to compare the next one with */
	}
	if (rule <= COST_OUTPUT_PRODUCED + 1)
		c->outputs->rule = rule;
	for (size_t i = n > COST_OUTPUTS ? n - COST_OUTPUTS : 0; i < n; i++)
		outputs_record(c, v[i]);
	return 0;
}
