/* SPDX-License-Identifier: Apache-2.0 */
/* cost — what a request is charged before dispatch: what the provider will count
 * (DESIGN §5, PROVIDERS.md §10, issue 18 item 3). Pure: no I/O, no clock; instants
 * are int64 ms passed in by the caller. One struct cost_lane per lane; the token
 * estimate itself comes from tokens.h, and the gates are still corrected from the
 * answer's usage afterwards: this module only makes the first guess right.
 *
 * Input. Where cache reads do not count (Anthropic, Groq: the caller's
 * cached_input_free), a request is charged its input estimate × the share of
 * charged input the lane has been seeing for its prompt. The prompt is named by
 * prompt_key (a hash of the request's cacheable prefix, e.g. the system prompt and
 * tools up to the first cache_control breakpoint), else by the agent id hash;
 * with neither, or where cache reads count, the request is charged in full.
 *  - The share is a ratio of decayed sums, Σ charged / Σ estimated over the
 *    prompt's answers, each older answer weighing COST_DECAY of the next (about
 *    the last 4 answers). A ratio of sums, not an average of ratios: the charge
 *    it feeds is share × estimate, and the sums weigh each answer by its size,
 *    which is the least-squares fit of charged = share × estimated; an average
 *    of ratios would let a 50-token request swing the charge of a 20,000-token one.
 *  - What an answer teaches: with cache reads (a warm call), its charged input
 *    (input_tokens + cache_creation_input_tokens, as the provider counts) is a
 *    sample of what a warm call costs. With a cache write and no read (a cold
 *    call), the whole prompt was charged, but the next call will read what this
 *    one wrote: the sample is charged − cache_creation, and it replaces the sums
 *    (the cache was cold: older samples describe a cache that is gone). With
 *    neither, the sample is the charged input (≈ the estimate: no caching).
 *  - A prompt never answered, or whose last answer's request went out more than
 *    its cache's lifetime ago, is charged in full: the provider will charge it
 *    as a cache write. The lifetime is the longest "ttl" the request's
 *    cache_control marks name (Anthropic: "1h"; tokens.h cache_ttl_ms), else
 *    COST_CACHE_TTL_MS (Anthropic's 5 minutes); each use refreshes the
 *    provider's cache, and each answer the entry, which keeps when it lapses.
 *  - The share is at least (estimate − prefix_tokens) / estimate when the caller
 *    knows the prefix (what the request adds after its cacheable prefix is never
 *    a cache read), and is clamped to [COST_SHARE_MIN, 1].
 * Memory: the prompts table (COST_PROMPTS entries of 24 bytes: 384 bytes) is
 * allocated on the first answer that reports a cache read or write for a named
 * prompt; a lane that never sees cached prompts holds none. The entry whose
 * cache lapses first is replaced: a lookup is a scan of at most COST_PROMPTS
 * entries.
 *
 * History the provider holds (issue 28 item 1; OpenAI's Responses API). A
 * request that names previous_response_id or a conversation (chained) carries
 * only its new items; the provider charges it the whole history as input. Its
 * charge is its estimate plus the history the lane foresees for its chain: the
 * conversation's id, else the agent, else the prompt key (one chain per key;
 * agents that run several conversations under one key share an entry). From
 * each answer to a chained request, or to one the provider keeps for a later
 * one to name (stored: the first turn of a chain), the entry learns
 *  - held = charged input − the estimate of what the request sent: the
 *    history the provider added (plus the estimate's own error on what every
 *    turn sends again, instructions and tools, which cancels from turn to turn);
 *  - grow = the estimate of the request's items + its output tokens: what the
 *    next turn's history adds to this one's (a chain grows by each turn's
 *    input items and output);
 * and the next chained request is charged held + g × grow, where g, the share
 * of the foretold growth that showed (a ratio of decayed sums, as the cache
 * share, over the chain's answers; 1 before any; within [0, COST_GROW_MAX]),
 * learns what the provider drops (reasoning items of earlier turns) and the
 * estimate's bias on the items. The history's size does not lapse with time
 * (the provider keeps it for days): time only orders the samples (an answer to
 * a request sent before the entry's newest is not learned from) and picks the
 * entry replaced (the least recently sent; COST_CHAINS entries of 32 bytes:
 * 256 bytes, allocated on the first answer to a chained or stored request). A
 * chained request of a chain never answered is charged its estimate alone, as
 * every request without those fields is; a chained request's answer teaches
 * no cache share (its charged input is mostly history).
 *
 * Output. max_output (max_tokens or its equivalents, times n) when the request
 * sends one and the provider reserves it (below); otherwise the 90th percentile
 * (nearest rank) of the output tokens of the lane's last COST_OUTPUTS answers,
 * kept in a ring (allocated on the first answer, or on the first count of an
 * output budget: 280 bytes) with the percentile recomputed on insert (a sort of
 * at most 64 values, once per answer) so that a charge reads one number; before any
 * answer, the configured default. An answer cut at its max_tokens only says
 * "at least this": it is recorded when it is at or above the current percentile
 * (a long answer either way) and left out when below (it says nothing of the tail).
 *
 * Output as the provider counts it (issue 28 item 2). A provider either reserves
 * max_tokens when the request arrives (OpenAI's TPM; Cerebras reserves the model's
 * maximum without max_completion_tokens) or counts output as it is produced
 * (Anthropic's OTPM: Claude Code sends max_tokens 32,000 and gets ~200). Where it
 * is produced, a request that names max_output is charged min(max_output, the
 * lane's percentile, else the default): what the answer will likely produce, and
 * the usage corrects the gate afterwards as for any other estimate. Reserving
 * providers are charged max_output, as before. The rule starts from the
 * provider's profile (rule_default) and is learned from the provider's own
 * remaining counters (cost_output_headers), the evidence of one answer:
 *  - remaining + max_output > limit + COST_RULE_SLACK: no reservation of
 *    max_output could leave that much: produced;
 *  - the drop since the previous answer's count (plus the refill of a per-minute
 *    budget since then), when this request was the only one sent in between:
 *    at least max_output − COST_RULE_SLACK: reserved; under max_output / 2:
 *    produced;
 *  - max_output within COST_RULE_SLACK of the lane's percentile says nothing
 *    (both rules charge about the same).
 * The newest evidence wins: it is a property of the provider, which changes
 * only when the provider does.
 *
 * Bytes per lane: sizeof(struct cost_lane) (32) inline; at most 384 + 280 + 256
 * on the heap (cost_lane_heap_bytes). */
#ifndef PACERD_COST_H
#define PACERD_COST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COST_CACHE_TTL_MS 300000 /* Anthropic's prompt cache lifetime, refreshed by each use */
#define COST_SHARE_MIN 0.02      /* an input charge is never below this share of the estimate */
#define COST_DECAY 0.75          /* weight of an older answer in the share's sums */
#define COST_PROMPTS 16          /* prompts remembered per lane (LRU) */
#define COST_OUTPUTS 64          /* answers whose output the percentile is taken over */
#define COST_OUTPUT_PCT 0.90     /* the output percentile charged without max_tokens */
#define COST_RULE_SLACK 1000     /* tokens of doubt in a count (Anthropic's are rounded) */
#define COST_CHAINS 8            /* chains of held history remembered per lane (LRU) */
#define COST_GROW_MAX 2.0        /* the learned growth share is at most this */

/* How the provider charges a request's max_tokens against an output budget. */
enum cost_output_rule {
	COST_OUTPUT_RESERVED, /* all of it, when the request arrives */
	COST_OUTPUT_PRODUCED, /* only what the answer produces */
};

struct cost_prompt;  /* cost.c */
struct cost_outputs; /* cost.c */
struct cost_chain;   /* cost.c */

struct cost_lane {
	struct cost_prompt *prompts;  /* NULL until a cached prompt is seen */
	struct cost_outputs *outputs; /* NULL until the first answer with usage, or the
	                               * first count of an output budget */
	struct cost_chain *chains;    /* NULL until a chained or stored request is answered */
};

/* What the caller knows of a request before dispatch. */
struct cost_request {
	int64_t input_estimate; /* prompt tokens estimated (tokens.h), >= 0 */
	int64_t prefix_tokens;  /* of which the cacheable prefix, 0: unknown */
	uint64_t prompt_key;    /* hash of the cacheable prefix, 0: none */
	uint64_t agent;         /* hash of the agent id, 0: none */
	int64_t max_output;     /* max_tokens (or equivalent) × n; -1: not sent */
	int64_t cache_ttl_ms;   /* its cache marks' lifetime (tokens.h); <= 0: COST_CACHE_TTL_MS */
	/* History the provider holds (tokens.h): the request names some
	 * (chained), the provider keeps it for a later one (stored); the
	 * conversation's key (0: none); the estimate of its input items. */
	bool chained, stored;
	uint64_t conversation;
	int64_t items;
};

/* What the answer's usage says, as the provider counts it. -1: not reported. */
struct cost_usage {
	int64_t charged_input;  /* input_tokens + cache_creation_input_tokens */
	int64_t cache_creation; /* cache_creation_input_tokens (part of charged_input) */
	int64_t cache_read;     /* cache_read_input_tokens (not charged where free) */
	int64_t output;         /* output tokens */
	bool output_capped;     /* the answer stopped at the request's max_tokens */
};

struct cost_charge {
	double input, output;
	double held;         /* of input: the history the provider holds (chained) */
	bool input_scaled;   /* the prompt's learned share was applied */
	bool output_learned; /* the output is the lane's percentile */
};

/* An empty lane: every input in full, output at the default. */
void cost_lane_init(struct cost_lane *c);
/* Frees what the lane allocated and empties it. */
void cost_lane_free(struct cost_lane *c);
/* Heap bytes the lane holds (at most 384 + 280 + 256; allocator overhead not counted). */
size_t cost_lane_heap_bytes(const struct cost_lane *c);

/* The charge of request r dispatched at now_ms. cached_input_free: the provider
 * does not count cache reads against its input limit (for r's model).
 * default_output: the plan's default_output_tokens. Never allocates. */
void cost_charge(const struct cost_lane *c, const struct cost_request *r, bool cached_input_free,
                 enum cost_output_rule rule_default, unsigned default_output, int64_t now_ms,
                 struct cost_charge *out);

/* The rule the lane charges output by: the learned one, else rule_default. */
enum cost_output_rule cost_output_rule(const struct cost_lane *c,
                                       enum cost_output_rule rule_default);

/* One answer's count of an output budget (the provider's output-tokens
 * budget, else its combined tokens budget), at the answer's start. */
struct cost_output_count {
	int64_t max_output; /* the request's max_output (cost_request), <= 0: none */
	double limit;       /* the budget's limit, <= 0: not sent */
	double remaining;   /* < 0: not sent */
	int64_t at_ms;      /* when the answer's headers came */
	bool alone;         /* nothing else was sent since the previous count was taken,
	                       and nothing else is in flight */
};

/* What the count says of the provider's rule: 1 reserved, 2 produced, 0 nothing
 * (enum cost_output_rule + 1). prev: the previous count (NULL or remaining < 0:
 * none); pct: the lane's output percentile (-1: none). Pure. */
int cost_output_evidence(const struct cost_output_count *now, const struct cost_output_count *prev,
                         int64_t pct);

/* Learns the rule from the count (cost_output_evidence against the lane's
 * previous count, which this one replaces). 0, or -1 when memory ran out. */
int cost_output_headers(struct cost_lane *c, const struct cost_output_count *n);

/* Learns from the usage of the answer to request r, which went upstream at sent_ms
 * (the provider's cache was refreshed then, not when the answer came back).
 * Returns 0, or -1 when memory ran out (nothing learned; charges stay as they were). */
int cost_observe(struct cost_lane *c, const struct cost_request *r, const struct cost_usage *u,
                 int64_t sent_ms);

/* For /status: the learned share of r's prompt at now_ms (1: charged in full) and
 * the lane's output percentile (-1: no answer yet). */
double cost_input_share(const struct cost_lane *c, const struct cost_request *r, int64_t now_ms);
int64_t cost_output_percentile(const struct cost_lane *c);

/* Across a restart (sched_lane_export): the output tokens of the lane's newest
 * answers, oldest first, into out (at most COST_OUTPUTS; returns how many),
 * and the output rule learned (0 none, else enum cost_output_rule + 1). */
size_t cost_outputs_save(const struct cost_lane *c, uint32_t out[COST_OUTPUTS], uint8_t *rule);
/* Takes them up: as if the lane had seen those answers (the percentile
 * follows), and the rule. 0, or -1 when memory ran out (nothing taken). */
int cost_outputs_resume(struct cost_lane *c, const uint32_t *v, size_t n, uint8_t rule);

#endif
