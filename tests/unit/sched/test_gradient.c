/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for gradient: a lane's concurrency limit from latency, as a pure
 * function of (samples, time). The first half feeds it samples by hand; the
 * second runs it against engine_sim.h, a vLLM-like engine in steps, with 128
 * closed-loop clients (issue 29's set-up), and compares it with the best fixed
 * cap a sweep finds in the same engine. */
#include <math.h>
#include <string.h>

#include "core/config.h"
#include "engine_sim.h"
#include "sched/gradient.h"
#include "unit.h"

static const struct gradient_params PARAMS = {.min = 1, .max = 64, .initial = 20, .tolerance = 1};

static struct gradient fresh(void)
{
	struct gradient g;
	gradient_init(&g, &PARAMS, 0);
	return g;
}

static bool first(struct gradient *g, int64_t now, int64_t sent, double ms, size_t in_flight)
{
	struct gradient_first f = {
	    .dispatched_ms = sent, .first_ms = ms, .prompt_tokens = 1000, .in_flight = in_flight};
	return gradient_on_first(g, now, &f);
}

/* A streamed answer of 100 tokens 20 ms apart, sent at `sent`, whose first
 * token came after first_ms; scale: every time × scale (a slower server). */
static struct gradient_sample answer(int64_t sent, double first_ms, double scale, size_t in_flight)
{
	struct gradient_sample s = {
	    .dispatched_ms = sent,
	    .first_ms = first_ms * scale,
	    .stream_ms = 99 * 20 * scale,
	    .max_gap_ms = 25 * scale,
	    .events = 99,
	    .prompt_tokens = 1000,
	    .in_flight = in_flight,
	    .saturated = true,
	};
	return s;
}

/* Feeds n answers like s, one ms apart from now; returns the instant after. */
static int64_t feed(struct gradient *g, int64_t now, struct gradient_sample s, unsigned n)
{
	for (unsigned i = 0; i < n; i++, now++) {
		s.dispatched_ms = s.dispatched_ms > now ? now : s.dispatched_ms;
		gradient_on_sample(g, now, &s);
	}
	return now;
}

/* A controller out of slow start at `limit` (a refusal's cut), baselines
 * taught by queue-free answers (first token 60 ms, 20 ms a token). */
static struct gradient settled(unsigned limit)
{
	struct gradient g = fresh();
	for (unsigned i = 0; i < 64; i++)
		first(&g, 1000 + i, 0, 60, limit);
	feed(&g, 1000, answer(0, 60, 1, limit), 20);
	gradient_cut(&g, 2000, limit);
	ck_assert_uint_eq(gradient_limit(&g), limit);
	ck_assert(!g.ss.on);
	return g;
}

START_TEST(init_starts_slow_and_corrects_arguments)
{
	struct gradient g = fresh();
	ck_assert_uint_eq(gradient_limit(&g), 20);
	ck_assert(g.ss.on);
	ck_assert_str_eq(gradient_why_name(g.why), "start");
	struct gradient_params bad = {.min = 0, .max = 0, .initial = 500, .tolerance = NAN};
	gradient_init(&g, &bad, 0);
	ck_assert_uint_eq(g.p.min, 1);
	ck_assert_uint_eq(g.p.max, 1);
	ck_assert_uint_eq(gradient_limit(&g), 1);
	ck_assert(g.p.tolerance == 1.0);
	struct gradient_params small = {.min = 2, .max = 8, .initial = 20, .tolerance = 1};
	gradient_init(&g, &small, 0);
	ck_assert_uint_eq(gradient_limit(&g), 8);
}
END_TEST

START_TEST(plan_params)
{
	struct plan_conf p;
	memset(&p, 0, sizeof(p));
	p.max_concurrent = 40;
	p.concurrency.min = 3;
	p.concurrency.slow_start = 10;
	p.concurrency.tolerance = 0.25;
	struct gradient_params gp;
	gradient_params_of(&p, &gp);
	ck_assert_uint_eq(gp.min, 3);
	ck_assert_uint_eq(gp.max, 40);
	ck_assert_uint_eq(gp.initial, 10);
	ck_assert(gp.tolerance == 0.25);
}
END_TEST

/* n requests sent at now (what is in flight: as the first tokens say). */
static void sent(struct gradient *g, int64_t now, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		gradient_on_dispatch(g, now, 0);
}

START_TEST(slow_start_doubles_per_round_trip)
{
	struct gradient g = fresh();
	/* 20 sent (long streams: they stay in flight); once half of them have
	 * their first token back, not waiting: twice what is in flight */
	sent(&g, 10, 20);
	for (int i = 0; i < 9; i++)
		ck_assert(!first(&g, 100 + i, 10, 70, 20));
	ck_assert_uint_eq(gradient_limit(&g), 20);
	ck_assert(first(&g, 110, 10, 70, 20));
	ck_assert_uint_eq(gradient_limit(&g), 40);
	ck_assert_str_eq(gradient_why_name(g.why), "slow_start");
	/* the rest of that round counts for nothing more */
	for (int i = 0; i < 10; i++)
		ck_assert(!first(&g, 111 + i, 10, 70, 20));
	/* the next round: 20 more sent, half back -> 64 (max) */
	sent(&g, 120, 20);
	for (int i = 0; i < 10; i++)
		first(&g, 200 + i, 120, 72, 40);
	ck_assert_uint_eq(gradient_limit(&g), 64);
	ck_assert(g.ss.on);
}
END_TEST

START_TEST(slow_start_needs_demand)
{
	/* three in flight never need more than 20 (twice three is less) */
	struct gradient g = fresh();
	for (int r = 0; r < 5; r++) {
		sent(&g, 100 * r, 3);
		for (int i = 0; i < 3; i++)
			first(&g, 100 * r + 50 + i, 100 * r, 70, 3);
	}
	ck_assert_uint_eq(gradient_limit(&g), 20);
	ck_assert(g.ss.on);
	/* 15 in flight: 30 */
	sent(&g, 1000, 15);
	for (int i = 0; i < 8; i++)
		first(&g, 1050 + i, 1000, 70, 15);
	ck_assert_uint_eq(gradient_limit(&g), 30);
}
END_TEST

START_TEST(slow_start_stops_when_first_tokens_wait)
{
	struct gradient g = fresh();
	sent(&g, 10, 20);
	for (int i = 0; i < 10; i++)
		first(&g, 100 + i, 10, 70, 20);
	ck_assert_uint_eq(gradient_limit(&g), 40);
	/* the next round: 3 of 10 back waited (over twice the queue-free 70 ms,
	 * tolerance 1, + 25 ms): more than a fifth, slow start ends there */
	sent(&g, 120, 20);
	for (int i = 0; i < 7; i++)
		first(&g, 200 + i, 120, 80, 40);
	for (int i = 0; i < 3; i++)
		first(&g, 210 + i, 120, 300, 40);
	ck_assert_uint_eq(gradient_limit(&g), 40);
	ck_assert(!g.ss.on);
	/* one in five is noise: it doubles */
	g = fresh();
	sent(&g, 10, 20);
	for (int i = 0; i < 10; i++)
		first(&g, 100 + i, 10, 70, 20);
	sent(&g, 120, 20);
	for (int i = 0; i < 8; i++)
		first(&g, 200 + i, 120, 80, 40);
	for (int i = 0; i < 2; i++)
		first(&g, 210 + i, 120, 300, 40);
	ck_assert_uint_eq(gradient_limit(&g), 64);
}
END_TEST

START_TEST(non_stream_answers_are_round_trips)
{
	struct gradient g = fresh();
	sent(&g, 0, 20);
	struct gradient_sample s = {.dispatched_ms = 0, .first_ms = -1, .in_flight = 20};
	for (int i = 0; i < 9; i++)
		ck_assert(!gradient_on_sample(&g, 10 + i, &s));
	ck_assert(gradient_on_sample(&g, 19, &s));
	ck_assert_uint_eq(gradient_limit(&g), 40);
	/* out of slow start they say nothing */
	gradient_cut(&g, 100, 10);
	for (int i = 0; i < 50; i++)
		ck_assert(!gradient_on_sample(&g, 200 + i, &s));
	ck_assert_uint_eq(gradient_limit(&g), 10);
}
END_TEST

START_TEST(the_first_burst_queues_for_itself)
{
	/* 20 at once into an engine that prefills two a step: the burst's
	 * first tokens come back one step apart, most of them "waited"; the
	 * first round is not judged (it doubles: 40), and no round counts its
	 * answers: the queue was the burst's, not a limit's */
	struct gradient g = fresh();
	sent(&g, 0, 20);
	for (int i = 0; i < 20; i++)
		first(&g, 100 * (i / 2 + 1), 0, 100 * (i / 2 + 1), 20);
	ck_assert_uint_eq(gradient_limit(&g), 40);
	ck_assert(g.ss.on);
	int64_t now = 3000;
	for (int i = 0; i < 20; i++) {
		struct gradient_sample a = answer(0, 100 * (i / 2 + 1), 1, 20);
		gradient_on_sample(&g, now++, &a);
	}
	ck_assert_uint_eq(gradient_limit(&g), 40);
	/* the next round is judged: as many waited, slow start ends there */
	sent(&g, 2000, 20);
	for (int i = 0; i < 20; i++)
		first(&g, 4000 + i, 2000, 100 * (i / 2 + 1), 40);
	ck_assert(!g.ss.on);
	ck_assert_uint_eq(gradient_limit(&g), 40);
	/* and what is sent from then on counts in rounds */
	feed(&g, now + 3000, answer(now, 900, 1, 40), 20);
	ck_assert_uint_lt(gradient_limit(&g), 40);
}
END_TEST

START_TEST(queue_cuts_to_what_the_server_ran)
{
	struct gradient g = settled(30);
	/* 30 in flight, each request waited 600 ms of its 2.5 s: Q = 30 × 0.6 /
	 * 2.64 = 6.8 beyond the tolerance's part -> the server ran ~24 */
	feed(&g, 3000, answer(2500, 660, 1, 30), 15);
	unsigned l = gradient_limit(&g);
	ck_assert_msg(l >= 22 && l <= 25, "limit %u", l);
	ck_assert_str_eq(gradient_why_name(g.why), "server_queue");
	ck_assert(g.queue > 4 && g.queue < 8);
}
END_TEST

START_TEST(uniformly_slower_is_not_fuller)
{
	struct gradient g = settled(30);
	/* every step 2×, then 3× slower: first token and tokens alike; the
	 * rounds are clean (it even probes higher) */
	int64_t now = 3000;
	for (int r = 0; r < 10; r++) {
		now = feed(&g, now, answer(now, 60, r < 5 ? 2 : 3, 30), 15) + 10;
		ck_assert_uint_ge(gradient_limit(&g), 30);
		ck_assert(g.queue < GRADIENT_GROW_BELOW);
	}
	/* what grows alone is the wait: that is a queue */
	unsigned was = gradient_limit(&g);
	feed(&g, now, answer(now, 400, 3, was), 40);
	ck_assert_uint_lt(gradient_limit(&g), was);
	ck_assert_str_eq(gradient_why_name(g.why), "server_queue");
}
END_TEST

START_TEST(a_stall_is_a_wait)
{
	struct gradient g = settled(30);
	/* a gap of 3 s in a stream of 20 ms tokens: preempted and recomputed */
	struct gradient_sample s = answer(2500, 60, 1, 30);
	s.stream_ms += 3000;
	s.max_gap_ms = 3000;
	feed(&g, 3000, s, 15);
	ck_assert_uint_lt(gradient_limit(&g), 30);
	/* the same gap's worth spread over the stream is a slower server */
	g = settled(30);
	s.max_gap_ms = 60;
	feed(&g, 3000, s, 15);
	ck_assert_uint_eq(gradient_limit(&g), 30);
}
END_TEST

START_TEST(answers_sent_before_the_round_do_not_count)
{
	struct gradient g = settled(30);
	/* queued answers to requests sent before the cut (at 2000) */
	feed(&g, 3000, answer(1500, 2000, 1, 30), 100);
	ck_assert_uint_eq(gradient_limit(&g), 30);
}
END_TEST

START_TEST(a_round_cuts_at_most_by_half)
{
	struct gradient g = settled(40);
	feed(&g, 3000, answer(2500, 20000, 1, 40), 20);
	ck_assert_uint_eq(gradient_limit(&g), 20);
}
END_TEST

START_TEST(clean_rounds_grow_after_the_hold)
{
	struct gradient g = settled(30);
	int64_t now = 3000;
	/* GRADIENT_HOLD_ROUNDS clean rounds hold, then +1, +2 */
	for (int r = 0; r < GRADIENT_HOLD_ROUNDS; r++) {
		now = feed(&g, now, answer(now, 60, 1, 30), 15) + 10;
		ck_assert_uint_eq(gradient_limit(&g), 30);
	}
	now = feed(&g, now, answer(now, 60, 1, 30), 15) + 10;
	ck_assert_uint_eq(gradient_limit(&g), 31);
	ck_assert_str_eq(gradient_why_name(g.why), "no_queue");
	now = feed(&g, now, answer(now, 60, 1, 31), 16) + 10;
	ck_assert_uint_eq(gradient_limit(&g), 33);
	/* a lane below its limit learns nothing from clean rounds */
	struct gradient_sample idle = answer(now, 60, 1, 5);
	idle.saturated = false;
	feed(&g, now, idle, 40);
	ck_assert_uint_eq(gradient_limit(&g), 33);
}
END_TEST

START_TEST(the_tolerance_band_holds)
{
	struct gradient g = settled(30);
	int64_t now = 3000;
	/* a small wait in every request (first token 160 ms, 60 queue-free,
	 * twice that tolerated: 40 ms of 2.1 s): Q in [GROW_BELOW, CUT_ABOVE],
	 * neither up nor down (the baseline rises as slowly as it does under a
	 * queue, GRADIENT_HOLD_ROUNDS rounds at a time at most) */
	for (int r = 0; r < 6; r++) {
		now = feed(&g, now, answer(now, 160, 1, 30), 15) + 10;
		ck_assert_uint_eq(gradient_limit(&g), 30);
		if (r < 3)
			ck_assert_msg(g.queue >= GRADIENT_GROW_BELOW &&
			                  g.queue <= GRADIENT_CUT_ABOVE,
			              "round %d: Q %.2f", r, g.queue);
	}
}
END_TEST

START_TEST(a_probe_that_meets_a_queue_is_taken_back)
{
	struct gradient g = settled(30);
	int64_t now = 3000;
	for (int r = 0; r <= GRADIENT_HOLD_ROUNDS; r++)
		now = feed(&g, now, answer(now, 60, 1, 30), 15) + 10;
	ck_assert_uint_eq(gradient_limit(&g), 31);
	/* first tokens of requests sent before the probe say nothing of it */
	for (int i = 0; i < 5; i++)
		first(&g, now + i, now - 100, 900, 31);
	ck_assert_uint_eq(gradient_limit(&g), 31);
	/* of requests sent under it: a few that waited among many is noise
	 * (prefills that meet in one step) */
	for (int i = 0; i < 12; i++)
		first(&g, now + 10 + i, now + 1, 60, 31);
	for (int i = 0; i < 3; i++)
		first(&g, now + 30 + i, now + 1, 900, 31);
	ck_assert_uint_eq(gradient_limit(&g), 31);
	/* over a third of half the limit's worth (16): back to 30, and hold */
	g = settled(30);
	now = 3000;
	for (int r = 0; r <= GRADIENT_HOLD_ROUNDS; r++)
		now = feed(&g, now, answer(now, 60, 1, 30), 15) + 10;
	for (int i = 0; i < 10; i++)
		first(&g, now + 10 + i, now + 1, 60, 31);
	for (int i = 0; i < 5; i++)
		ck_assert(!first(&g, now + 30 + i, now + 1, 900, 31));
	ck_assert(first(&g, now + 40, now + 1, 900, 31)); /* 6 of 16 */
	ck_assert_uint_eq(gradient_limit(&g), 30);
	ck_assert_str_eq(gradient_why_name(g.why), "server_queue");
	ck_assert_uint_eq(g.hold, GRADIENT_HOLD_ROUNDS);
}
END_TEST

START_TEST(a_stall_under_a_probe_takes_it_back)
{
	struct gradient g = settled(30);
	int64_t now = 3000;
	for (int r = 0; r <= GRADIENT_HOLD_ROUNDS; r++)
		now = feed(&g, now, answer(now, 60, 1, 30), 15) + 10;
	ck_assert_uint_eq(gradient_limit(&g), 31);
	/* a request sent under the probe was preempted: a 2 s gap among 20 ms
	 * tokens; the engine could not hold what the probe added */
	struct gradient_sample s = answer(now + 1, 60, 1, 31);
	s.stream_ms += 2000;
	s.max_gap_ms = 2000;
	ck_assert(gradient_on_sample(&g, now + 3000, &s));
	ck_assert_uint_eq(gradient_limit(&g), 30);
	ck_assert_uint_eq(g.hold, GRADIENT_HOLD_ROUNDS);
}
END_TEST

START_TEST(a_lucky_sample_does_not_set_the_baseline)
{
	struct gradient g = settled(30);
	int64_t now = 3000;
	/* one first token 10× faster than the rest */
	struct gradient_sample lucky = answer(now, 6, 1, 30);
	gradient_on_sample(&g, now++, &lucky);
	for (int r = 0; r < 10; r++)
		now = feed(&g, now, answer(now, 60, 1, 30), 15) + 10;
	ck_assert_uint_ge(gradient_limit(&g), 30);
}
END_TEST

START_TEST(refusal_cuts_and_ends_slow_start)
{
	struct gradient g = fresh();
	ck_assert(gradient_cut(&g, 10, 12));
	ck_assert_uint_eq(gradient_limit(&g), 12);
	ck_assert(!g.ss.on);
	ck_assert_str_eq(gradient_why_name(g.why), "refusal");
	ck_assert(!gradient_cut(&g, 20, 50)); /* never raises */
	ck_assert_uint_eq(gradient_limit(&g), 12);
	ck_assert(gradient_cut(&g, 30, 0)); /* bounded by min */
	ck_assert_uint_eq(gradient_limit(&g), 1);
}
END_TEST

START_TEST(idle_starts_slowly_again)
{
	struct gradient g = settled(40);
	gradient_restart(&g, 5000);
	ck_assert_uint_eq(gradient_limit(&g), 20);
	ck_assert(g.ss.on);
	ck_assert_str_eq(gradient_why_name(g.why), "idle");
	/* below the initial limit it stays (the restart window is the lower) */
	g = settled(8);
	gradient_restart(&g, 5000);
	ck_assert_uint_eq(gradient_limit(&g), 8);
	sent(&g, 5500, 8);
	for (int i = 0; i < 4; i++)
		first(&g, 6000 + i, 5500, 60, 8);
	ck_assert_uint_eq(gradient_limit(&g), 16);
}
END_TEST

START_TEST(reconfigure_clamps)
{
	struct gradient g = settled(40);
	struct gradient_params p = PARAMS;
	p.max = 16;
	gradient_reconfigure(&g, &p, 5000);
	ck_assert_uint_eq(gradient_limit(&g), 16);
	ck_assert_str_eq(gradient_why_name(g.why), "reload");
	p.max = 64;
	gradient_reconfigure(&g, &p, 6000);
	ck_assert_uint_eq(gradient_limit(&g), 16);
}
END_TEST

START_TEST(view_shows_what_it_read)
{
	struct gradient g = settled(30);
	struct gradient_view v;
	gradient_view(&g, 2500, &v);
	ck_assert_uint_eq(v.limit, 30);
	ck_assert(!v.slow_start);
	/* the baselines are quantiles tracked a sample at a time: within a
	 * step of what a constant input is */
	ck_assert_double_eq_tol(v.token_ms, 20, 0.01);
	ck_assert_double_eq_tol(v.base_token_ms, 20, 1);
	ck_assert_double_eq_tol(v.first_ms, 60, 0.01);
	ck_assert_double_eq_tol(v.base_first_ms, 60, 3);
	ck_assert_str_eq(v.why, "refusal");
	ck_assert_int_eq(v.moved_ago_ms, 500);
	ck_assert_str_eq(gradient_why_name(GRADIENT_N_WHY), "?");
}
END_TEST

/* ---- against the engine ---- */

static struct sim S;

/* ADAPTIVE.md's fit to vLLM (Llama-3.1-8B, A100), a KV cache of 29
 * requests of 1,024 prompt tokens, outputs of 64 to 192 tokens. */
static struct sim_engine vllm(void)
{
	struct sim_engine e = {.kv_blocks = 29 * 64,
	                       .a_ms = 16.44,
	                       .b_ms = 0.0478,
	                       .c_ms = 0.0182,
	                       .slow = 1,
	                       .noise = 0.05,
	                       .prompt = 1024,
	                       .output = 128,
	                       .chunk = 2048};
	return e;
}

struct best {
	unsigned cap;
	double throughput;
};

/* The best fixed cap for the engine (and k other tenants), by a sweep: the
 * most throughput among the caps that keep the engine's queue under one
 * request (past the knee a fixed cap gains a little throughput by queueing
 * inside the engine, and with another tenant there, by taking its share). */
static struct sim F; /* the sweep's, beside S */

static struct best sweep(const struct sim_engine *e, unsigned tenants)
{
	struct best b = {0, 0};
	for (unsigned cap = 4; cap <= 40; cap++) {
		sim_init(&F, e, NULL, cap, 128, 11);
		sim_add_tenants(&F, tenants);
		sim_run(&F, 20);
		sim_stats_reset(&F);
		sim_run(&F, 120);
		if (sim_mean_waiting(&F) <= 1 && sim_throughput(&F) > b.throughput) {
			b.cap = cap;
			b.throughput = sim_throughput(&F);
		}
	}
	return b;
}

/* The first-token time of one request alone. */
static double unloaded_first_ms(const struct sim_engine *e)
{
	return (e->a_ms + e->b_ms * e->prompt + e->c_ms) * e->slow;
}

static struct gradient G;

static void start(const struct sim_engine *e, uint64_t seed)
{
	gradient_init(&G, &PARAMS, 0);
	sim_init(&S, e, &G, 0, 128, seed);
}

START_TEST(engine_steady_knee_found_and_held)
{
	struct sim_engine e = vllm();
	struct best b = sweep(&e, 0);
	for (uint64_t seed = 1; seed <= 3; seed++) {
		start(&e, seed);
		sim_run(&S, 60);
		sim_stats_reset(&S);
		sim_run(&S, 300);
		double first = unloaded_first_ms(&e);
		double p50 = sim_first_quantile(&S, 0.5), p99 = sim_first_quantile(&S, 0.99);
		double pre = (double)S.preempted / (double)S.done;
		ck_assert_msg(sim_throughput(&S) >= 0.9 * b.throughput,
		              "seed %u: %.2f req/s, best fixed cap %u: %.2f", (unsigned)seed,
		              sim_throughput(&S), b.cap, b.throughput);
		ck_assert_msg(p50 <= 2 * first && p99 <= 5 * first,
		              "seed %u: first token p50 %.0f p99 %.0f ms, unloaded %.0f",
		              (unsigned)seed, p50, p99, first);
		ck_assert_msg(sim_mean_waiting(&S) <= 1, "waiting %.2f", sim_mean_waiting(&S));
		ck_assert_msg(pre <= 0.005, "preempted %.2f %%", 100 * pre);
		/* held: within 15 % of the knee, never past it by more than 3 */
		ck_assert_msg(S.limit_lo >= 0.85 * b.cap && S.limit_hi <= b.cap + 3,
		              "limit in [%u, %u], knee %u", S.limit_lo, S.limit_hi, b.cap);
	}
}
END_TEST

START_TEST(engine_uniformly_slower_keeps_the_limit)
{
	struct sim_engine e = vllm();
	start(&e, 5);
	sim_run(&S, 120);
	unsigned knee = gradient_limit(&G);
	S.e.slow = 2; /* every step twice as long */
	sim_stats_reset(&S);
	sim_run(&S, 600);
	ck_assert_msg(S.limit_lo >= 0.75 * knee, "limit fell to %u from %u", S.limit_lo, knee);
	e.slow = 2;
	struct best b = sweep(&e, 0);
	sim_stats_reset(&S);
	sim_run(&S, 300);
	ck_assert_msg(sim_throughput(&S) >= 0.9 * b.throughput, "%.2f req/s, best %.2f",
	              sim_throughput(&S), b.throughput);
}
END_TEST

START_TEST(engine_kv_halving_lowers_the_limit_soon)
{
	struct sim_engine e = vllm();
	start(&e, 7);
	sim_run(&S, 120);
	ck_assert_uint_ge(gradient_limit(&G), 22);
	S.e.kv_blocks /= 2;
	while (sim_free(&S) < 0)
		sim_preempt_newest(&S);
	e.kv_blocks /= 2;
	struct best b = sweep(&e, 0);
	/* within 150 answers (about 20 s here), at most 2 past the new knee */
	sim_stats_reset(&S);
	while (S.samples < 150)
		sim_step(&S);
	ck_assert_msg(gradient_limit(&G) <= b.cap + 2, "limit %u after %u answers, new knee %u",
	              gradient_limit(&G), (unsigned)S.samples, b.cap);
	/* and from 30 s on: no queue to speak of, the new best's throughput */
	sim_run(&S, 30 - (S.t - S.t0) / 1000);
	sim_stats_reset(&S);
	sim_run(&S, 120);
	ck_assert_msg(sim_mean_waiting(&S) <= 1, "waiting %.2f", sim_mean_waiting(&S));
	ck_assert_msg(sim_throughput(&S) >= 0.9 * b.throughput, "%.2f req/s, best %.2f (cap %u)",
	              sim_throughput(&S), b.throughput, b.cap);
}
END_TEST

START_TEST(engine_noise_does_not_make_it_oscillate)
{
	struct sim_engine e = vllm();
	e.noise = 0.2;         /* every step ± 20 % */
	e.measure_noise = 0.2; /* and every reading ± 20 % on top */
	for (uint64_t seed = 1; seed <= 3; seed++) {
		start(&e, seed);
		sim_run(&S, 120);
		sim_stats_reset(&S);
		sim_run(&S, 300);
		double mean = sim_mean_limit(&S);
		ck_assert_msg(S.limit_lo >= 0.9 * mean - 1e-9 && S.limit_hi <= 1.1 * mean + 1e-9,
		              "seed %u: limit in [%u, %u], mean %.1f", (unsigned)seed, S.limit_lo,
		              S.limit_hi, mean);
	}
}
END_TEST

START_TEST(engine_another_tenant)
{
	struct sim_engine e = vllm();
	struct best b = sweep(&e, 10);
	start(&e, 9);
	sim_run(&S, 120);
	sim_add_tenants(&S, 10); /* ten streams of another tenant, straight in */
	sim_run(&S, 30);
	sim_stats_reset(&S);
	sim_run(&S, 120);
	ck_assert_msg(sim_mean_waiting(&S) <= 1, "waiting %.2f", sim_mean_waiting(&S));
	ck_assert_msg(sim_throughput(&S) >= 0.9 * b.throughput, "%.2f req/s, best %.2f (cap %u)",
	              sim_throughput(&S), b.throughput, b.cap);
}
END_TEST

static Suite *gradient_suite(void)
{
	Suite *s = suite_create("gradient");
	TCase *c = tcase_create("samples");
	tcase_add_test(c, init_starts_slow_and_corrects_arguments);
	tcase_add_test(c, plan_params);
	tcase_add_test(c, slow_start_doubles_per_round_trip);
	tcase_add_test(c, slow_start_needs_demand);
	tcase_add_test(c, slow_start_stops_when_first_tokens_wait);
	tcase_add_test(c, non_stream_answers_are_round_trips);
	tcase_add_test(c, the_first_burst_queues_for_itself);
	tcase_add_test(c, queue_cuts_to_what_the_server_ran);
	tcase_add_test(c, uniformly_slower_is_not_fuller);
	tcase_add_test(c, a_stall_is_a_wait);
	tcase_add_test(c, answers_sent_before_the_round_do_not_count);
	tcase_add_test(c, a_round_cuts_at_most_by_half);
	tcase_add_test(c, clean_rounds_grow_after_the_hold);
	tcase_add_test(c, the_tolerance_band_holds);
	tcase_add_test(c, a_probe_that_meets_a_queue_is_taken_back);
	tcase_add_test(c, a_stall_under_a_probe_takes_it_back);
	tcase_add_test(c, a_lucky_sample_does_not_set_the_baseline);
	tcase_add_test(c, refusal_cuts_and_ends_slow_start);
	tcase_add_test(c, idle_starts_slowly_again);
	tcase_add_test(c, reconfigure_clamps);
	tcase_add_test(c, view_shows_what_it_read);
	suite_add_tcase(s, c);
	TCase *e = tcase_create("engine");
	tcase_set_timeout(e, 60);
	tcase_add_test(e, engine_steady_knee_found_and_held);
	tcase_add_test(e, engine_uniformly_slower_keeps_the_limit);
	tcase_add_test(e, engine_kv_halving_lowers_the_limit_soon);
	tcase_add_test(e, engine_noise_does_not_make_it_oscillate);
	tcase_add_test(e, engine_another_tenant);
	suite_add_tcase(s, e);
	return s;
}

UNIT_MAIN("gradient", gradient_suite)
