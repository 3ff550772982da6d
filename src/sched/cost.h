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
 *    cache_ttl_ms ago (COST_CACHE_TTL_MS: Anthropic's 5 minutes; each use
 *    refreshes the provider's cache, and each answer the entry), is charged in
 *    full: the provider will charge it as a cache write.
 *  - The share is at least (estimate − prefix_tokens) / estimate when the caller
 *    knows the prefix (what the request adds after its cacheable prefix is never
 *    a cache read), and is clamped to [COST_SHARE_MIN, 1].
 * Memory: the prompts table (COST_PROMPTS entries of 24 bytes: 384 bytes) is
 * allocated on the first answer that reports a cache read or write for a named
 * prompt; a lane that never sees cached prompts holds none. LRU replacement:
 * a lookup is a scan of at most COST_PROMPTS entries.
 *
 * Output. max_output (max_tokens or its equivalents, times n) when the request
 * sends one; otherwise the 90th percentile (nearest rank) of the output tokens of
 * the lane's last COST_OUTPUTS answers, kept in a ring (allocated on the first
 * answer: 260 bytes) with the percentile recomputed on insert (a sort of at most
 * 64 values, once per answer) so that a charge reads one number; before any
 * answer, the configured default. An answer cut at its max_tokens only says
 * "at least this": it is recorded when it is at or above the current percentile
 * (a long answer either way) and left out when below (it says nothing of the tail).
 *
 * Bytes per lane: sizeof(struct cost_lane) (24) inline; at most 384 + 260 on the
 * heap (cost_lane_heap_bytes). */
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

struct cost_prompt;  /* cost.c */
struct cost_outputs; /* cost.c */

struct cost_lane {
	struct cost_prompt *prompts;  /* NULL until a cached prompt is seen */
	struct cost_outputs *outputs; /* NULL until the first answer with usage */
	uint32_t output_pct;          /* the cached percentile of the outputs */
};

/* What the caller knows of a request before dispatch. */
struct cost_request {
	int64_t input_estimate; /* prompt tokens estimated (tokens.h), >= 0 */
	int64_t prefix_tokens;  /* of which the cacheable prefix, 0: unknown */
	uint64_t prompt_key;    /* hash of the cacheable prefix, 0: none */
	uint64_t agent;         /* hash of the agent id, 0: none */
	int64_t max_output;     /* max_tokens (or equivalent) × n; -1: not sent */
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
	bool input_scaled;   /* the prompt's learned share was applied */
	bool output_learned; /* the output is the lane's percentile */
};

/* An empty lane: every input in full, output at the default. */
void cost_lane_init(struct cost_lane *c);
/* Frees what the lane allocated and empties it. */
void cost_lane_free(struct cost_lane *c);
/* Heap bytes the lane holds (0, 260, 384 or 644; allocator overhead not counted). */
size_t cost_lane_heap_bytes(const struct cost_lane *c);

/* The charge of request r dispatched at now_ms. cached_input_free: the provider
 * does not count cache reads against its input limit. default_output: the plan's
 * default_output_tokens. cache_ttl_ms <= 0: COST_CACHE_TTL_MS. Never allocates. */
void cost_charge(const struct cost_lane *c, const struct cost_request *r, bool cached_input_free,
                 unsigned default_output, int64_t cache_ttl_ms, int64_t now_ms,
                 struct cost_charge *out);

/* Learns from the usage of the answer to request r, which went upstream at sent_ms
 * (the provider's cache was refreshed then, not when the answer came back).
 * Returns 0, or -1 when memory ran out (nothing learned; charges stay as they were). */
int cost_observe(struct cost_lane *c, const struct cost_request *r, const struct cost_usage *u,
                 int64_t sent_ms);

/* For /status: the learned share of r's prompt at now_ms (1: charged in full) and
 * the lane's output percentile (-1: no answer yet). */
double cost_input_share(const struct cost_lane *c, const struct cost_request *r,
                        int64_t cache_ttl_ms, int64_t now_ms);
int64_t cost_output_percentile(const struct cost_lane *c);

#endif
