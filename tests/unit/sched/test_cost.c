/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for cost: input charged by the learned cache share, output by the
 * lane's percentile. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sched/cost.h"
#include "sched/gcra.h"
#include "unit.h"

#define PROMPT_A 0x1111222233334444ULL
#define PROMPT_B 0x5555666677778888ULL
#define TTL COST_CACHE_TTL_MS

static struct cost_request req(int64_t est, uint64_t prompt, uint64_t agent, int64_t max_output)
{
	struct cost_request r = {
	    .input_estimate = est, .prompt_key = prompt, .agent = agent, .max_output = max_output};
	return r;
}

static struct cost_usage usage(int64_t charged, int64_t creation, int64_t read, int64_t output)
{
	struct cost_usage u = {charged, creation, read, output, false};
	return u;
}

static struct cost_charge charge(const struct cost_lane *c, const struct cost_request *r,
                                 int64_t now)
{
	struct cost_charge ch;
	cost_charge(c, r, true, COST_OUTPUT_RESERVED, 1024, now, &ch);
	return ch;
}

/* The Anthropic shape: one answer that read 9,500 of a 10,000-token prompt from
 * the cache and was charged 500. */
static void learn_warm(struct cost_lane *c, uint64_t prompt, int64_t sent)
{
	struct cost_request r = req(10000, prompt, 0, 200);
	struct cost_usage u = usage(500, 0, 9500, 150);
	ck_assert_int_eq(cost_observe(c, &r, &u, sent), 0);
}

START_TEST(first_prompt_full)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(10000, PROMPT_A, 0, 200);
	struct cost_charge ch = charge(&c, &r, 0);
	ck_assert(ch.input == 10000);
	ck_assert(!ch.input_scaled);
	ck_assert(ch.output == 200);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 0);
	cost_lane_free(&c);
}
END_TEST

START_TEST(warm_prompt_scaled)
{
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, PROMPT_A, 1000);
	struct cost_request r = req(10000, PROMPT_A, 0, 200);
	struct cost_charge ch = charge(&c, &r, 2000);
	ck_assert(ch.input_scaled);
	ck_assert_double_eq_tol(ch.input, 500, 1e-3);
	/* scaled by the share, not a fixed amount: a longer question costs more */
	r.input_estimate = 12000;
	ch = charge(&c, &r, 2000);
	ck_assert_double_eq_tol(ch.input, 600, 1e-3);
	ck_assert_double_eq_tol(cost_input_share(&c, &r, 2000), 0.05, 1e-6);
	cost_lane_free(&c);
}
END_TEST

START_TEST(other_prompt_full)
{
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, PROMPT_A, 1000);
	struct cost_request r = req(10000, PROMPT_B, 0, 200);
	struct cost_charge ch = charge(&c, &r, 2000);
	ck_assert(ch.input == 10000);
	ck_assert(!ch.input_scaled);
	r = req(10000, 0, 0, 200); /* no prompt, no agent */
	ck_assert(charge(&c, &r, 2000).input == 10000);
	cost_lane_free(&c);
}
END_TEST

START_TEST(expired_cache_full)
{
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, PROMPT_A, 1000);
	struct cost_request r = req(10000, PROMPT_A, 0, 200);
	ck_assert(charge(&c, &r, 1000 + TTL).input_scaled);
	struct cost_charge ch = charge(&c, &r, 1000 + TTL + 1);
	ck_assert(!ch.input_scaled);
	ck_assert(ch.input == 10000);
	/* each answer refreshes the entry, from when its request went out */
	learn_warm(&c, PROMPT_A, 200000);
	ck_assert(charge(&c, &r, 200000 + TTL).input_scaled);
	/* an older answer coming back late does not move it back */
	learn_warm(&c, PROMPT_A, 100000);
	ck_assert(charge(&c, &r, 200000 + TTL).input_scaled);
	cost_lane_free(&c);
}
END_TEST

/* A prompt whose marks name a "ttl" ("1h") stays warm that long: the entry
 * keeps when its cache lapses, from the newest answered request's marks. */
START_TEST(cache_ttl_of_the_prompt)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request hour = req(10000, PROMPT_A, 0, 200);
	hour.cache_ttl_ms = 3600000;
	struct cost_usage u = usage(500, 0, 9500, 150);
	ck_assert_int_eq(cost_observe(&c, &hour, &u, 1000), 0);
	/* ten minutes on: past the default's five, within the hour */
	struct cost_charge ch = charge(&c, &hour, 1000 + 600000);
	ck_assert(ch.input_scaled);
	ck_assert_double_eq_tol(ch.input, 500, 1e-3);
	/* the lifetime is the prompt's cache's, whatever the charged request names */
	struct cost_request plain = req(10000, PROMPT_A, 0, 200);
	ck_assert(charge(&c, &plain, 1000 + 3600000).input_scaled);
	ck_assert(!charge(&c, &plain, 1000 + 3600000 + 1).input_scaled);
	/* a 5-minute answer after it does not shorten the hour the cache still has */
	ck_assert_int_eq(cost_observe(&c, &plain, &u, 2000), 0);
	ck_assert(charge(&c, &plain, 1000 + 3600000).input_scaled);
	/* beside it, a prompt of the default lifetime lapses after 5 minutes */
	learn_warm(&c, PROMPT_B, 1000);
	plain.prompt_key = PROMPT_B;
	ck_assert(charge(&c, &plain, 1000 + TTL).input_scaled);
	ck_assert(!charge(&c, &plain, 1000 + TTL + 1).input_scaled);
	cost_lane_free(&c);
}
END_TEST

START_TEST(cache_reads_counted_full)
{
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, PROMPT_A, 1000);
	struct cost_request r = req(10000, PROMPT_A, 0, 200);
	struct cost_charge ch;
	cost_charge(&c, &r, false, COST_OUTPUT_RESERVED, 1024, 2000, &ch);
	ck_assert(ch.input == 10000);
	ck_assert(!ch.input_scaled);
	cost_lane_free(&c);
}
END_TEST

START_TEST(agent_fallback)
{
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, 0, 1000); /* neither prompt nor agent: nothing kept */
	ck_assert_ptr_null(c.prompts);
	struct cost_request r = req(10000, 0, 77, 200);
	struct cost_usage u = usage(2000, 0, 8000, 100);
	cost_observe(&c, &r, &u, 1000);
	ck_assert_double_eq_tol(charge(&c, &r, 2000).input, 2000, 1e-3);
	struct cost_request other = req(10000, 0, 78, 200);
	ck_assert(charge(&c, &other, 2000).input == 10000);
	/* an agent hash equal to a prompt hash is still another entry */
	struct cost_request as_prompt = req(10000, 77, 0, 200);
	ck_assert(charge(&c, &as_prompt, 2000).input == 10000);
	cost_lane_free(&c);
}
END_TEST

START_TEST(no_table_without_cache)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(1000, PROMPT_A, 0, -1);
	struct cost_usage u = usage(1000, 0, 0, 100);
	cost_observe(&c, &r, &u, 0);
	ck_assert_ptr_null(c.prompts);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 280);
	ck_assert(!charge(&c, &r, 10).input_scaled);
	cost_lane_free(&c);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 0);
}
END_TEST

START_TEST(lru_bound)
{
	struct cost_lane c;
	cost_lane_init(&c);
	for (uint64_t k = 1; k <= COST_PROMPTS; k++)
		learn_warm(&c, k, (int64_t)k * 10);
	size_t bytes = cost_lane_heap_bytes(&c);
	ck_assert_uint_eq(bytes, 384 + 280);
	for (uint64_t k = 1; k <= COST_PROMPTS; k++) {
		struct cost_request r = req(10000, k, 0, 200);
		ck_assert(charge(&c, &r, 1000).input_scaled);
	}
	/* prompt 1 is refreshed: prompt 2 is now the least recently answered */
	learn_warm(&c, 1, 500);
	learn_warm(&c, 100, 600);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), bytes);
	struct cost_request r = req(10000, 2, 0, 200);
	ck_assert(!charge(&c, &r, 1000).input_scaled);
	r.prompt_key = 1;
	ck_assert(charge(&c, &r, 1000).input_scaled);
	r.prompt_key = 100;
	ck_assert(charge(&c, &r, 1000).input_scaled);
	/* many more: still 16 entries, the newest kept */
	for (uint64_t k = 1000; k < 1100; k++)
		learn_warm(&c, k, (int64_t)k);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), bytes);
	unsigned kept = 0;
	for (uint64_t k = 1000; k < 1100; k++) {
		r.prompt_key = k;
		kept += charge(&c, &r, 2000).input_scaled;
	}
	ck_assert_uint_eq(kept, COST_PROMPTS);
	r.prompt_key = 1099;
	ck_assert(charge(&c, &r, 2000).input_scaled);
	cost_lane_free(&c);
}
END_TEST

START_TEST(share_floor_and_clamp)
{
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, PROMPT_A, 0); /* share 0.05 */
	struct cost_request r = req(10000, PROMPT_A, 0, 200);
	r.prefix_tokens = 8000; /* 2,000 tokens after the prefix: never cache reads */
	ck_assert_double_eq_tol(charge(&c, &r, 10).input, 2000, 1e-3);
	r.prefix_tokens = 9900;
	ck_assert_double_eq_tol(charge(&c, &r, 10).input, 500, 1e-3);
	r.prefix_tokens = 20000; /* nonsense: ignored */
	ck_assert_double_eq_tol(charge(&c, &r, 10).input, 500, 1e-3);
	/* a share learned below 2 % is charged 2 % */
	struct cost_usage u = usage(10, 0, 9990, 10);
	struct cost_request w = req(10000, PROMPT_B, 0, 200);
	for (int i = 0; i < 20; i++)
		cost_observe(&c, &w, &u, 0);
	ck_assert_double_eq_tol(charge(&c, &w, 10).input, 10000 * COST_SHARE_MIN, 1e-3);
	/* and never above 1: usage above the estimate */
	u = usage(30000, 0, 100, 10);
	for (int i = 0; i < 20; i++)
		cost_observe(&c, &w, &u, 0);
	ck_assert(charge(&c, &w, 10).input == 10000);
	ck_assert(!charge(&c, &w, 10).input_scaled);
	cost_lane_free(&c);
}
END_TEST

/* The share follows a change within a few answers, and a cold answer (a cache
 * write, no read) restarts it from what a warm call will cost. */
START_TEST(share_follows_change)
{
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, PROMPT_A, 0);
	struct cost_request r = req(10000, PROMPT_A, 0, 200);
	struct cost_usage u = usage(3000, 0, 7000, 10); /* the questions grew */
	for (int i = 0; i < 8; i++)
		cost_observe(&c, &r, &u, 0);
	ck_assert_double_eq_tol(cost_input_share(&c, &r, 0), 0.3, 0.01);
	/* the cache expired: the answer wrote 9,000 of 10,000 again */
	u = usage(10000, 9000, 0, 10);
	cost_observe(&c, &r, &u, 0);
	ck_assert_double_eq_tol(cost_input_share(&c, &r, 0), 0.1, 1e-6);
	/* sizes weigh: a 1,000-token call at share 1 hardly moves a 10,000-token one */
	struct cost_request small = req(1000, PROMPT_A, 0, 200);
	u = usage(1000, 0, 0, 10);
	cost_observe(&c, &small, &u, 0);
	ck_assert_double_eq_tol(cost_input_share(&c, &r, 0),
	                        (0.75 * 1000 + 1000) / (0.75 * 10000 + 1000), 1e-6);
	cost_lane_free(&c);
}
END_TEST

/* Issue 18's scenario: a 10,000-token system prompt marked for caching, a
 * 100-token question, 30,000 input tokens per minute in a bucket that holds a
 * minute's worth; 10 agents × 8 calls. */
START_TEST(anthropic_cached_prompt_scenario)
{
	const double itpm = 30000;
	const int64_t latency = 2000;
	struct gcra gate, gate_full;
	gcra_init(&gate, 60000.0 / itpm, itpm);
	gcra_init(&gate_full, 60000.0 / itpm, itpm);
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(10100, PROMPT_A, 1, 500);
	r.prefix_tokens = 10000;

	/* warm-up: charged in full, its answer wrote the cache */
	struct cost_charge ch = charge(&c, &r, 0);
	ck_assert(ch.input == 10100);
	gcra_charge(&gate, 0, ch.input);
	gcra_charge(&gate_full, 0, 10100);
	struct cost_usage u = usage(10100, 10000, 0, 300);
	cost_observe(&c, &r, &u, 0);
	gcra_adjust(&gate, latency, 10100 - ch.input);

	/* 79 more calls from 10 agents, right after */
	int64_t now = latency, last = 0, last_full = 0, t_full = latency;
	double charged = 0, provider = 10100;
	for (int i = 1; i < 80; i++) {
		r.agent = 1 + (uint64_t)(i % 10);
		ch = charge(&c, &r, now);
		ck_assert(ch.input_scaled);
		/* ≈ 100 + small: the 2 % floor of 10,100 */
		ck_assert(ch.input >= 100 && ch.input <= 100 + 0.02 * 10100 + 1e-9);
		int64_t at = gcra_ready_at(&gate, now, ch.input);
		gcra_charge(&gate, at, ch.input);
		charged += ch.input;
		last = at;
		/* the provider counts 100 (the question) per call */
		u = usage(100, 0, 10000, 300);
		provider += 100;
		cost_observe(&c, &r, &u, at);
		gcra_adjust(&gate, at + latency, 100 - ch.input);
		/* what charging in full would do */
		t_full = gcra_ready_at(&gate_full, t_full, 10100);
		gcra_charge(&gate_full, t_full, 10100);
		last_full = t_full;
	}
	/* the provider counted 18,000 of its 30,000: all 80 fit in its bucket at once */
	ck_assert(provider <= itpm);
	ck_assert(10100 + charged <= itpm);
	ck_assert_int_eq(last, latency); /* none waited */
	ck_assert_int_gt(last_full, 1000 * 1000);
	cost_lane_free(&c);
}
END_TEST

START_TEST(output_default_before_answers)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(100, 0, 0, -1);
	struct cost_charge ch = charge(&c, &r, 0);
	ck_assert(ch.output == 1024);
	ck_assert(!ch.output_learned);
	ck_assert_int_eq(cost_output_percentile(&c), -1);
	/* usage without output: still nothing */
	struct cost_usage u = usage(100, 0, 0, -1);
	cost_observe(&c, &r, &u, 0);
	ck_assert(charge(&c, &r, 0).output == 1024);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 0);
	cost_lane_free(&c);
}
END_TEST

START_TEST(output_max_tokens_wins)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(100, 0, 0, -1);
	struct cost_usage u = usage(100, 0, 0, 700);
	cost_observe(&c, &r, &u, 0);
	r.max_output = 4096;
	struct cost_charge ch = charge(&c, &r, 0);
	ck_assert(ch.output == 4096);
	ck_assert(!ch.output_learned);
	r.max_output = 0; /* an explicit 0 (embeddings) */
	ck_assert(charge(&c, &r, 0).output == 0);
	r.max_output = -1;
	ch = charge(&c, &r, 0);
	ck_assert(ch.output == 700);
	ck_assert(ch.output_learned);
	cost_lane_free(&c);
}
END_TEST

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

/* 200 outputs uniform in [100, 2100]: the p90 is 1,900. */
START_TEST(output_converges_to_p90)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(100, 0, 0, -1);
	uint32_t seed = 12345;
	for (int i = 0; i < 200; i++) {
		struct cost_usage u = usage(100, 0, 0, 100 + lcg(&seed) % 2001);
		cost_observe(&c, &r, &u, i);
	}
	struct cost_charge ch = charge(&c, &r, 0);
	ck_assert(ch.output_learned);
	ck_assert_double_eq_tol(ch.output, 1900, 190);
	/* the distribution moves: the ring follows within its 64 answers */
	for (int i = 0; i < COST_OUTPUTS; i++) {
		struct cost_usage u = usage(100, 0, 0, 10 + lcg(&seed) % 101);
		cost_observe(&c, &r, &u, i);
	}
	ck_assert_double_eq_tol(charge(&c, &r, 0).output, 100, 10);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 280);
	cost_lane_free(&c);
}
END_TEST

START_TEST(output_exact_ranks)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(100, 0, 0, -1);
	/* 1..10: nearest rank of 90 % is the 9th */
	for (int v = 10; v >= 1; v--) {
		struct cost_usage u = usage(100, 0, 0, v);
		cost_observe(&c, &r, &u, 0);
	}
	ck_assert_int_eq(cost_output_percentile(&c), 9);
	cost_lane_free(&c);
	cost_lane_init(&c);
	struct cost_usage one = usage(100, 0, 0, 42);
	cost_observe(&c, &r, &one, 0);
	ck_assert_int_eq(cost_output_percentile(&c), 42);
	cost_lane_free(&c);
}
END_TEST

/* An answer cut at its max_tokens says "at least": it never pulls the
 * percentile down, and counts when it is long. */
START_TEST(output_capped_answers)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(100, 0, 0, -1);
	for (int i = 0; i < 20; i++) {
		struct cost_usage u = usage(100, 0, 0, 1000);
		cost_observe(&c, &r, &u, 0);
	}
	struct cost_request capped = req(100, 0, 0, 50);
	struct cost_usage u = usage(100, 0, 0, 50);
	u.output_capped = true;
	for (int i = 0; i < 200; i++)
		cost_observe(&c, &capped, &u, 0);
	ck_assert_int_eq(cost_output_percentile(&c), 1000);
	u.output = 5000;
	for (int i = 0; i < 10; i++)
		cost_observe(&c, &capped, &u, 0);
	ck_assert_int_eq(cost_output_percentile(&c), 5000);
	cost_lane_free(&c);
}
END_TEST

START_TEST(lane_is_small)
{
	ck_assert_uint_le(sizeof(struct cost_lane), 24);
	struct cost_lane c;
	cost_lane_init(&c);
	learn_warm(&c, PROMPT_A, 0);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 384 + 280);
	ck_assert_uint_lt(sizeof(c) + cost_lane_heap_bytes(&c), 700);
	cost_lane_free(&c);
	ck_assert_ptr_null(c.prompts);
	ck_assert_ptr_null(c.outputs);
	ck_assert_ptr_null(c.chains);
}
END_TEST

/* ---- the history the provider holds ---- */

/* A Responses API agent as a provider charges it: each turn sends the
 * instructions and tools again (6000 tokens, estimated 5400) and its new
 * items (items_true, estimated at 90 %), names the previous response from
 * the second turn on, and is charged the instructions, the history the
 * provider holds, and the new items. The history then grows by the turn's
 * items and output, less the reasoning the provider drops (reasoning of
 * each output). Returns the largest error of a chained turn's input charge
 * from turn `from` on, as a share of the truth. */
static double chain_worst(struct cost_lane *c, uint64_t agent, int turns, double reasoning_share,
                          int from)
{
	const double fixed_true = 6000, fixed_est = 5400;
	double held_true = 0, worst = 0;
	for (int k = 1; k <= turns; k++) {
		double items_true = 500 + 300 * k, items_est = 0.9 * items_true;
		double output = 200 + 50 * k;
		double charged_true = fixed_true + held_true + items_true;
		struct cost_request r = req((int64_t)(fixed_est + items_est), 0, agent, -1);
		r.items = (int64_t)items_est;
		r.stored = true;
		r.chained = k > 1;
		struct cost_charge ch;
		cost_charge(c, &r, false, COST_OUTPUT_RESERVED, 1024, k * 1000, &ch);
		if (k == 1) {
			ck_assert(ch.held == 0); /* a first turn: as without the fields */
			ck_assert_double_eq(ch.input, (double)r.input_estimate);
		} else {
			ck_assert_double_eq_tol(ch.input, (double)r.input_estimate + ch.held, 1e-6);
			double err = fabs(ch.input - charged_true) / charged_true;
			if (k >= from && err > worst)
				worst = err;
		}
		struct cost_usage u = usage((int64_t)charged_true, -1, -1, (int64_t)output);
		ck_assert_int_eq(cost_observe(c, &r, &u, k * 1000), 0);
		held_true += items_true + output * (1 - reasoning_share);
	}
	return worst;
}

START_TEST(held_history_chain)
{
	struct cost_lane c;
	cost_lane_init(&c);
	/* a chain of 10 turns, its history growing from 0 to ~12,000 tokens: every
	 * chained turn's charge within 10 % of the truth, from the second on */
	double worst = chain_worst(&c, 0x77, 10, 0.4, 2);
	ck_assert_msg(worst <= 0.10, "worst error %.3f", worst);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 280 + COST_CHAINS * 32);
	/* charged its estimate alone, that history is far off: a chained turn of
	 * another agent, of a chain never answered */
	struct cost_request other = req(6000, 0, 0x78, -1);
	other.chained = true;
	struct cost_charge ch;
	cost_charge(&c, &other, false, COST_OUTPUT_RESERVED, 1024, 20000, &ch);
	ck_assert(ch.held == 0 && ch.input == 6000);
	/* a request of the agent that does not name the history: as without */
	struct cost_request plain = req(6000, 0, 0x77, -1);
	plain.stored = true;
	cost_charge(&c, &plain, false, COST_OUTPUT_RESERVED, 1024, 20000, &ch);
	ck_assert(ch.held == 0 && ch.input == 6000);
	cost_lane_free(&c);
}
END_TEST

/* A provider that drops most of each output from the history (reasoning
 * items): the growth share g learns it; from the fourth turn on within 5 %. */
START_TEST(held_history_learns_growth)
{
	struct cost_lane c;
	cost_lane_init(&c);
	double first = chain_worst(&c, 0x77, 3, 0.9, 2);
	cost_lane_free(&c);
	cost_lane_init(&c);
	double later = chain_worst(&c, 0x77, 12, 0.9, 4);
	ck_assert_msg(later <= 0.05, "from turn 4: worst %.3f (turns 2-3: %.3f)", later, first);
	ck_assert_msg(first > later, "turns 2-3 %.3f, later %.3f", first, later);
	cost_lane_free(&c);
}
END_TEST

/* Two conversations of one agent, interleaved: each is charged its own
 * history (the conversation's id keys the chain). An answer to an older turn
 * coming back after a newer one teaches nothing. */
START_TEST(held_history_per_conversation)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request a = req(1000, 0, 0x77, -1), b = req(1000, 0, 0x77, -1);
	a.conversation = 0xaaaa;
	b.conversation = 0xbbbb;
	a.chained = b.chained = true;
	a.items = b.items = 100;
	struct cost_usage ua = usage(50000, -1, -1, 1000), ub = usage(3000, -1, -1, 500);
	ck_assert_int_eq(cost_observe(&c, &a, &ua, 1000), 0);
	ck_assert_int_eq(cost_observe(&c, &b, &ub, 1100), 0);
	struct cost_charge ch;
	/* a: held 49000 + grow (100 + 1000) = 50100 */
	cost_charge(&c, &a, false, COST_OUTPUT_RESERVED, 1024, 2000, &ch);
	ck_assert_double_eq_tol(ch.held, 50100, 1e-3);
	ck_assert_double_eq_tol(ch.input, 51100, 1e-3);
	/* b: held 2000 + (100 + 500) */
	cost_charge(&c, &b, false, COST_OUTPUT_RESERVED, 1024, 2000, &ch);
	ck_assert_double_eq_tol(ch.held, 2600, 1e-3);
	/* a's turn sent at 900 answered after the one sent at 1000: not learned */
	struct cost_usage late = usage(10, -1, -1, 0);
	ck_assert_int_eq(cost_observe(&c, &a, &late, 900), 0);
	cost_charge(&c, &a, false, COST_OUTPUT_RESERVED, 1024, 2000, &ch);
	ck_assert_double_eq_tol(ch.held, 50100, 1e-3);
	/* a request neither chained nor stored, or without usage, teaches nothing */
	struct cost_request chat = req(1000, 0, 0x99, -1);
	ck_assert_int_eq(cost_observe(&c, &chat, &ua, 3000), 0);
	chat.chained = true;
	cost_charge(&c, &chat, false, COST_OUTPUT_RESERVED, 1024, 4000, &ch);
	ck_assert(ch.held == 0);
	cost_lane_free(&c);
}
END_TEST

/* At most COST_CHAINS chains; the least recently sent is replaced. */
START_TEST(held_history_bounded)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_usage u = usage(5000, -1, -1, 100);
	for (uint64_t a = 1; a <= 3 * COST_CHAINS; a++) {
		struct cost_request r = req(1000, 0, a, -1);
		r.stored = true;
		ck_assert_int_eq(cost_observe(&c, &r, &u, (int64_t)a * 10), 0);
	}
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 280 + COST_CHAINS * 32);
	unsigned kept = 0;
	for (uint64_t a = 1; a <= 3 * COST_CHAINS; a++) {
		struct cost_request r = req(1000, 0, a, -1);
		r.chained = true;
		struct cost_charge ch;
		cost_charge(&c, &r, false, COST_OUTPUT_RESERVED, 1024, 10000, &ch);
		kept += ch.held > 0;
		if (a > 2 * COST_CHAINS) /* the newest: held 4000 + grow 100 */
			ck_assert_double_eq_tol(ch.held, 4100, 1e-3);
	}
	ck_assert_uint_eq(kept, COST_CHAINS);
	cost_lane_free(&c);
}
END_TEST

/* ---- output as the provider counts it ---- */

static struct cost_charge charge_rule(const struct cost_lane *c, const struct cost_request *r,
                                      enum cost_output_rule rule)
{
	struct cost_charge ch;
	cost_charge(c, r, false, rule, 1024, 0, &ch);
	return ch;
}

/* The charge rule, as a table: (rule, max_output, the lane's percentile) → output. */
START_TEST(output_rule_table)
{
	static const struct {
		enum cost_output_rule rule;
		int64_t max_output;
		int64_t pct; /* -1: no answer yet */
		double output;
		bool learned;
	} rows[] = {
	    /* reserving (OpenAI's TPM): max_tokens, whatever the lane has seen */
	    {COST_OUTPUT_RESERVED, 32000, -1, 32000, false},
	    {COST_OUTPUT_RESERVED, 32000, 200, 32000, false},
	    {COST_OUTPUT_RESERVED, -1, 200, 200, true},
	    {COST_OUTPUT_RESERVED, -1, -1, 1024, false},
	    /* produced (Anthropic's OTPM): what the answer will likely produce */
	    {COST_OUTPUT_PRODUCED, 32000, 200, 200, true},
	    {COST_OUTPUT_PRODUCED, 32000, -1, 1024, false}, /* before any answer: the default */
	    {COST_OUTPUT_PRODUCED, 100, 200, 100, false},   /* never above max_tokens */
	    {COST_OUTPUT_PRODUCED, 500, -1, 500, false},    /* ... nor the default */
	    {COST_OUTPUT_PRODUCED, 0, 200, 0, false},       /* an explicit 0 (embeddings) */
	    {COST_OUTPUT_PRODUCED, -1, 200, 200, true},
	    {COST_OUTPUT_PRODUCED, -1, -1, 1024, false},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct cost_lane c;
		cost_lane_init(&c);
		struct cost_request r = req(100, 0, 0, -1);
		if (rows[i].pct >= 0) {
			struct cost_usage u = usage(100, 0, 0, rows[i].pct);
			ck_assert_int_eq(cost_observe(&c, &r, &u, 0), 0);
		}
		r.max_output = rows[i].max_output;
		struct cost_charge ch = charge_rule(&c, &r, rows[i].rule);
		ck_assert_msg(ch.output == rows[i].output, "row %zu: output %g, expected %g", i,
		              ch.output, rows[i].output);
		ck_assert_msg(ch.output_learned == rows[i].learned, "row %zu: learned", i);
		cost_lane_free(&c);
	}
}
END_TEST

/* What one count of an output budget says, as a table. */
START_TEST(output_evidence_table)
{
	enum { NONE = 0, RES = COST_OUTPUT_RESERVED + 1, PROD = COST_OUTPUT_PRODUCED + 1 };
	static const struct {
		const char *what;
		int64_t max_output;
		double limit, remaining;
		bool alone;
		double prev_remaining; /* the budget before the request (< 0: no previous count) */
		int64_t pct;
		int want;
	} rows[] = {
	    {"no max_tokens", -1, 8000, 7800, true, 8000, 200, NONE},
	    {"no remaining", 32000, 8000, -1, true, 8000, 200, NONE},
	    /* Claude Code at Anthropic: 32,000 could never have been taken from 8,000 */
	    {"max_tokens above what a reservation leaves", 32000, 8000, 7800, false, -1, 200, PROD},
	    {"... even with little left", 32000, 8000, 0, false, -1, 200, PROD},
	    {"4,000 of 120,000 and 118,000 left", 4000, 120000, 118000, false, -1, -1, PROD},
	    /* OpenAI's TPM: 4,000 reserved, the count shows it */
	    {"a reservation's count, not alone", 4000, 120000, 115990, false, -1, -1, NONE},
	    {"a reservation's drop, alone", 4000, 120000, 100000, true, 104000, -1, RES},
	    {"a produced drop, alone", 20000, 120000, 90000, true, 88200, 200, PROD},
	    {"a drop between the two", 20000, 120000, 80000, true, 93000, 200, NONE},
	    /* max_tokens about the percentile: both rules charge the same */
	    {"max_tokens near the percentile", 1000, 120000, 119800, true, 100000, 200, NONE},
	    {"a count older than the previous", 4000, 120000, 100000, true, 102000, -2, NONE},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct cost_output_count now = {rows[i].max_output, rows[i].limit,
		                                rows[i].remaining, 10000, rows[i].alone};
		struct cost_output_count prev = {0, rows[i].limit, rows[i].prev_remaining, 9000,
		                                 false};
		int64_t pct = rows[i].pct;
		if (pct == -2) { /* out of order */
			prev.at_ms = 11000;
			pct = -1;
		}
		/* the previous count, a second before: the budget less a second of refill */
		if (prev.remaining >= 0)
			prev.remaining -= rows[i].limit / 60;
		int got =
		    cost_output_evidence(&now, rows[i].prev_remaining >= 0 ? &prev : NULL, pct);
		ck_assert_msg(got == rows[i].want, "%s: %d, expected %d", rows[i].what, got,
		              rows[i].want);
	}
}
END_TEST

/* The rule a lane charges by: the profile's until a count tells, then the
 * count's; the newest evidence wins. */
START_TEST(output_rule_learned_from_counts)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(100, 0, 0, 32000);
	ck_assert_int_eq(cost_output_rule(&c, COST_OUTPUT_PRODUCED), COST_OUTPUT_PRODUCED);
	ck_assert_int_eq(cost_output_rule(&c, COST_OUTPUT_RESERVED), COST_OUTPUT_RESERVED);
	ck_assert(charge_rule(&c, &r, COST_OUTPUT_RESERVED).output == 32000);
	/* an Anthropic count: 32,000 could not have been reserved from 8,000 */
	struct cost_output_count n = {32000, 8000, 7800, 1000, false};
	ck_assert_int_eq(cost_output_headers(&c, &n), 0);
	ck_assert_int_eq(cost_output_rule(&c, COST_OUTPUT_RESERVED), COST_OUTPUT_PRODUCED);
	ck_assert(charge_rule(&c, &r, COST_OUTPUT_RESERVED).output == 1024);
	struct cost_usage u = usage(100, 0, 0, 200);
	cost_observe(&c, &r, &u, 0);
	ck_assert(charge_rule(&c, &r, COST_OUTPUT_RESERVED).output == 200);
	/* a provider that reserves, one request at a time: 60,000 a minute, 5,000 a call */
	cost_lane_free(&c);
	cost_lane_init(&c);
	r.max_output = 5000;
	struct cost_output_count a = {5000, 60000, 55000, 1000, false};
	ck_assert_int_eq(cost_output_headers(&c, &a), 0);
	ck_assert_int_eq(cost_output_rule(&c, COST_OUTPUT_PRODUCED), COST_OUTPUT_PRODUCED);
	struct cost_output_count b = {5000, 60000, 50100, 1100, true}; /* +100 of refill, -5,000 */
	ck_assert_int_eq(cost_output_headers(&c, &b), 0);
	ck_assert_int_eq(cost_output_rule(&c, COST_OUTPUT_PRODUCED), COST_OUTPUT_RESERVED);
	ck_assert(charge_rule(&c, &r, COST_OUTPUT_PRODUCED).output == 5000);
	/* a count that says nothing keeps what was learned */
	struct cost_output_count d = {5000, 60000, 40000, 1200, false};
	ck_assert_int_eq(cost_output_headers(&c, &d), 0);
	ck_assert_int_eq(cost_output_rule(&c, COST_OUTPUT_PRODUCED), COST_OUTPUT_RESERVED);
	ck_assert_uint_eq(cost_lane_heap_bytes(&c), 280);
	cost_lane_free(&c);
}
END_TEST

/* Told 7,000 OTPM (a minute's bucket, as pacerd gives Anthropic's token
 * gates) and 48 calls of max_tokens 32,000 producing 200: charged what is
 * produced, 35 leave at once and the rest at the refill; charged max_tokens,
 * none fits the bucket. */
START_TEST(output_claude_code_scenario)
{
	struct cost_lane c;
	cost_lane_init(&c);
	struct cost_request r = req(30, 0, 0, 32000);
	struct cost_usage u = usage(30, 0, 0, 200);
	cost_observe(&c, &r, &u, 0);
	struct cost_output_count n = {32000, 7000, 6800, 0, false};
	cost_output_headers(&c, &n);
	struct gcra g;
	gcra_init(&g, 60000.0 / 7000.0, 7000);
	int64_t t = 0, at_once = 0;
	for (int i = 0; i < 48; i++) {
		double out = charge_rule(&c, &r, COST_OUTPUT_PRODUCED).output;
		ck_assert(out == 200);
		int64_t at = gcra_ready_at(&g, t, out);
		if (at == 0)
			at_once++;
		gcra_charge(&g, at, out);
		t = at;
	}
	ck_assert_int_eq(at_once, 35);
	ck_assert_int_le(t, 23000); /* (48 × 200 − 7,000) / 7,000 a minute */
	cost_lane_free(&c);
}
END_TEST

/* Across a restart: the outputs oldest first (the ring wrapped or not), the
 * same percentile once taken back up, the rule with them. */
START_TEST(outputs_save_and_resume)
{
	struct cost_lane c, d;
	cost_lane_init(&c);
	cost_lane_init(&d);
	uint32_t v[COST_OUTPUTS];
	uint8_t rule = 9;
	ck_assert_uint_eq(cost_outputs_save(&c, v, &rule), 0);
	ck_assert_uint_eq(rule, 0);
	for (int i = 0; i < COST_OUTPUTS + 10; i++) {
		struct cost_request r = req(100, 0, 0, -1);
		struct cost_usage u = usage(100, -1, -1, 1000 + i);
		ck_assert_int_eq(cost_observe(&c, &r, &u, 0), 0);
	}
	/* a count no reservation of 32,000 could leave: produced */
	struct cost_output_count cnt = {
	    .max_output = 32000, .limit = 8000, .remaining = 8000, .at_ms = 1000, .alone = true};
	ck_assert_int_eq(cost_output_headers(&c, &cnt), 0);
	ck_assert_int_eq(cost_output_rule(&c, COST_OUTPUT_RESERVED), COST_OUTPUT_PRODUCED);
	size_t n = cost_outputs_save(&c, v, &rule);
	ck_assert_uint_eq(n, COST_OUTPUTS);
	ck_assert_uint_eq(v[0], 1010); /* the oldest still kept */
	ck_assert_uint_eq(v[COST_OUTPUTS - 1], 1000 + COST_OUTPUTS + 9);
	ck_assert_uint_eq(rule, COST_OUTPUT_PRODUCED + 1);
	ck_assert_int_eq(cost_outputs_resume(&d, v, n, rule), 0);
	ck_assert_int_eq(cost_output_percentile(&d), cost_output_percentile(&c));
	ck_assert_int_eq(cost_output_rule(&d, COST_OUTPUT_RESERVED), COST_OUTPUT_PRODUCED);
	uint32_t w[COST_OUTPUTS];
	ck_assert_uint_eq(cost_outputs_save(&d, w, &rule), n);
	ck_assert(memcmp(v, w, sizeof(v)) == 0);
	cost_lane_free(&c);
	cost_lane_free(&d);
}
END_TEST

static Suite *cost_suite(void)
{
	Suite *s = suite_create("cost");
	TCase *in = tcase_create("input");
	tcase_add_test(in, first_prompt_full);
	tcase_add_test(in, warm_prompt_scaled);
	tcase_add_test(in, other_prompt_full);
	tcase_add_test(in, expired_cache_full);
	tcase_add_test(in, cache_ttl_of_the_prompt);
	tcase_add_test(in, cache_reads_counted_full);
	tcase_add_test(in, agent_fallback);
	tcase_add_test(in, no_table_without_cache);
	tcase_add_test(in, lru_bound);
	tcase_add_test(in, share_floor_and_clamp);
	tcase_add_test(in, share_follows_change);
	tcase_add_test(in, anthropic_cached_prompt_scenario);
	tcase_add_test(in, held_history_chain);
	tcase_add_test(in, held_history_learns_growth);
	tcase_add_test(in, held_history_per_conversation);
	tcase_add_test(in, held_history_bounded);
	suite_add_tcase(s, in);
	TCase *out = tcase_create("output");
	tcase_add_test(out, output_default_before_answers);
	tcase_add_test(out, output_max_tokens_wins);
	tcase_add_test(out, output_converges_to_p90);
	tcase_add_test(out, output_exact_ranks);
	tcase_add_test(out, output_capped_answers);
	tcase_add_test(out, lane_is_small);
	tcase_add_test(out, output_rule_table);
	tcase_add_test(out, output_evidence_table);
	tcase_add_test(out, output_rule_learned_from_counts);
	tcase_add_test(out, output_claude_code_scenario);
	tcase_add_test(out, outputs_save_and_resume);
	suite_add_tcase(s, out);
	return s;
}

UNIT_MAIN("cost", cost_suite)
