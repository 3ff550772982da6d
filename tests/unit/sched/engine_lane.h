/* SPDX-License-Identifier: Apache-2.0 */
/* engine_lane — closed-loop streaming clients that go through one lane, whose limit
 * is a struct gradient (or a fixed cap), to pacerd-mock's engine: its scheduler
 * (tests/mock/mock_engine_sched.h, a vLLM-like server in steps with a paged KV cache
 * and preemption), run in simulated time. For test_gradient.c: issue 29's set-up
 * with no network and no clock, deterministic (its own xorshift).
 *
 * What the lane sees of an answer is what pacerd's stopwatch would: the engine's
 * instants of the first and last token and the longest gap between two, from the
 * request's arrival (no network between them), each reading × (1 ± measure_noise).
 * Every step takes the model's time × (1 ± noise). Another tenant's requests go
 * straight to the engine, closed loop as well. */
#ifndef PACERD_ENGINE_LANE_H
#define PACERD_ENGINE_LANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mock/mock_engine_sched.h"
#include "sched/gradient.h"

#define LANE_MAX 400
#define LANE_FIRSTS 200000

struct lane_req {
	struct eng_seq seq;
	bool tenant;    /* another tenant's: straight to the engine */
	bool saturated; /* the lane was at its limit when it left */
};

/* The engine and its load: prompts of `prompt` tokens, outputs uniform in
 * [output_min, output_max]. */
struct lane_engine {
	struct eng_params p;
	long prompt, output_min, output_max;
	double noise;         /* each step: × (1 ± noise) */
	double measure_noise; /* what the lane reads: × (1 ± measure_noise) */
};

struct lane_sim {
	struct lane_engine cfg;
	struct eng e;
	struct gradient *g; /* NULL: the fixed cap */
	unsigned cap;
	unsigned n;
	struct lane_req r[LANE_MAX];
	unsigned q[LANE_MAX], q_head, q_len; /* clients waiting at the lane (a ring) */
	unsigned in_flight;
	double t_ms;
	uint64_t rng;
	/* since lane_stats_reset */
	double t0_ms, waiting_area0, limit_area;
	uint64_t done, preempted, samples, tokens0;
	unsigned limit_lo, limit_hi;
	unsigned n_firsts;
	double firsts[LANE_FIRSTS];
};

static uint64_t lane_us(double ms)
{
	return (uint64_t)(ms * 1000.0 + 0.5);
}

static double lane_unit(struct lane_sim *s) /* uniform in [0, 1) */
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return (double)(s->rng >> 11) / 9007199254740992.0;
}

static double lane_jitter(struct lane_sim *s, double amount)
{
	return 1 + amount * (2 * lane_unit(s) - 1);
}

static unsigned lane_limit(const struct lane_sim *s)
{
	return s->g != NULL ? gradient_limit(s->g) : s->cap;
}

static void lane_stats_reset(struct lane_sim *s)
{
	eng_advance(&s->e, lane_us(s->t_ms));
	s->t0_ms = s->t_ms;
	s->waiting_area0 = s->e.waiting_area_ms;
	s->limit_area = 0;
	s->done = s->preempted = s->samples = 0;
	s->tokens0 = s->e.output_tokens;
	s->limit_lo = UINT32_MAX;
	s->limit_hi = 0;
	s->n_firsts = 0;
}

/* A new request of client i: its output drawn, waiting at the lane (or, another
 * tenant's, in the engine at once). */
static void lane_request(struct lane_sim *s, unsigned i)
{
	struct lane_req *r = &s->r[i];
	bool tenant = r->tenant;
	memset(r, 0, sizeof(*r));
	r->tenant = tenant;
	r->seq.prompt = s->cfg.prompt;
	long span = s->cfg.output_max - s->cfg.output_min + 1;
	r->seq.target = s->cfg.output_min + (long)(lane_unit(s) * (double)span);
	if (tenant)
		eng_arrive(&s->e, &r->seq, lane_us(s->t_ms));
	else
		s->q[(s->q_head + s->q_len++) % LANE_MAX] = i;
}

/* `clients` closed-loop clients at the lane; none of another tenant yet. */
static void lane_init(struct lane_sim *s, const struct lane_engine *cfg, struct gradient *g,
                      unsigned cap, unsigned clients, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	s->g = g;
	s->cap = cap;
	s->rng = seed | 1;
	s->t_ms = 1000;
	eng_init(&s->e, &cfg->p, lane_us(s->t_ms));
	for (unsigned i = 0; i < clients && i < LANE_MAX; i++)
		lane_request(s, s->n++);
	lane_stats_reset(s);
}

/* k more closed-loop clients of another tenant, straight to the engine. */
static void lane_add_tenants(struct lane_sim *s, unsigned k)
{
	for (unsigned j = 0; j < k && s->n < LANE_MAX; j++) {
		unsigned i = s->n++;
		s->r[i].tenant = true;
		lane_request(s, i);
	}
}

static struct lane_req *lane_req_of(struct eng_seq *q)
{
	return (struct lane_req *)((char *)q - offsetof(struct lane_req, seq));
}

static double lane_ms(uint64_t us)
{
	return (double)us / 1000.0;
}

/* A token of one of the engine's sequences (eng_end's callback). */
static void lane_on_token(struct eng_seq *q, bool done, void *arg)
{
	struct lane_sim *s = arg;
	struct lane_req *r = lane_req_of(q);
	if (r->tenant) {
		if (done)
			lane_request(s, (unsigned)(r - s->r));
		return;
	}
	double mn = s->cfg.measure_noise;
	double first_ms = lane_ms(q->first_us - q->arrival_us);
	if (q->generated == 1) {
		if (s->n_firsts < LANE_FIRSTS)
			s->firsts[s->n_firsts++] = first_ms;
		struct gradient_first f = {
		    .dispatched_ms = (int64_t)lane_ms(q->arrival_us),
		    .first_ms = first_ms * lane_jitter(s, mn),
		    .prompt_tokens = (double)q->prompt,
		    .in_flight = s->in_flight,
		};
		if (s->g != NULL)
			gradient_on_first(s->g, (int64_t)s->t_ms, &f);
	}
	if (!done)
		return;
	s->in_flight--;
	s->done++;
	s->preempted += q->preemptions > 0;
	if (s->g != NULL) {
		struct gradient_sample smp = {
		    .dispatched_ms = (int64_t)lane_ms(q->arrival_us),
		    .first_ms = first_ms * lane_jitter(s, mn),
		    .stream_ms = lane_ms(q->last_us - q->first_us) * lane_jitter(s, mn),
		    .max_gap_ms = lane_ms(q->max_gap_us),
		    .events = (unsigned)(q->generated - 1),
		    .prompt_tokens = (double)q->prompt,
		    .in_flight = s->in_flight + 1,
		    .saturated = r->saturated,
		};
		gradient_on_sample(s->g, (int64_t)s->t_ms, &smp);
		s->samples++;
	}
	lane_request(s, (unsigned)(r - s->r));
}

/* The lane lets requests go up to its limit; the engine runs one step. */
static void lane_step(struct lane_sim *s)
{
	unsigned limit = lane_limit(s);
	uint64_t now = lane_us(s->t_ms);
	while (s->in_flight < limit && s->q_len > 0) {
		unsigned i = s->q[s->q_head];
		s->q_head = (s->q_head + 1) % LANE_MAX;
		s->q_len--;
		s->in_flight++;
		if (s->g != NULL)
			gradient_on_dispatch(s->g, (int64_t)s->t_ms, s->in_flight);
		s->r[i].saturated = s->in_flight >= limit;
		eng_arrive(&s->e, &s->r[i].seq, now);
	}
	double ms = eng_plan(&s->e, now);
	if (ms <= 0)
		ms = 1; /* nothing to compute (no client): time passes */
	else
		ms *= lane_jitter(s, s->cfg.noise);
	s->limit_area += (double)limit * ms;
	if (limit < s->limit_lo)
		s->limit_lo = limit;
	if (limit > s->limit_hi)
		s->limit_hi = limit;
	s->t_ms += ms;
	if (s->e.planned)
		eng_end(&s->e, lane_us(s->t_ms), lane_on_token, s);
}

static void lane_run(struct lane_sim *s, double seconds)
{
	double until = s->t_ms + seconds * 1000;
	while (s->t_ms < until)
		lane_step(s);
}

/* What happened since lane_stats_reset. */
static double lane_elapsed_ms(const struct lane_sim *s)
{
	return s->t_ms - s->t0_ms;
}

static double lane_tokens_per_s(const struct lane_sim *s) /* the engine's, every tenant's */
{
	return lane_elapsed_ms(s) > 0
	           ? (double)(s->e.output_tokens - s->tokens0) * 1000 / lane_elapsed_ms(s)
	           : 0;
}

static double lane_mean_waiting(struct lane_sim *s)
{
	eng_advance(&s->e, lane_us(s->t_ms));
	return lane_elapsed_ms(s) > 0
	           ? (s->e.waiting_area_ms - s->waiting_area0) / lane_elapsed_ms(s)
	           : 0;
}

static double lane_mean_limit(const struct lane_sim *s)
{
	return lane_elapsed_ms(s) > 0 ? s->limit_area / lane_elapsed_ms(s) : 0;
}

static double lane_preempted_share(const struct lane_sim *s)
{
	return s->done > 0 ? (double)s->preempted / (double)s->done : 0;
}

static int lane_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The q-quantile of the lane's first-token times since the reset (sorts them). */
static double lane_first_quantile(struct lane_sim *s, double q)
{
	if (s->n_firsts == 0)
		return 0;
	qsort(s->firsts, s->n_firsts, sizeof(s->firsts[0]), lane_cmp_double);
	return s->firsts[(unsigned)(q * (s->n_firsts - 1))];
}

#endif
