/* SPDX-License-Identifier: Apache-2.0 */
/* engine_sim — a vLLM-like engine in steps, with closed-loop clients that go
 * through one lane whose limit is a struct gradient (or a fixed cap), for
 * test_gradient.c. Deterministic (its own xorshift); no clock, no sockets.
 *
 * The engine (ADAPTIVE.md's step model): each step gives every running
 * request that finished its prefill one token; prefill is chunked to `chunk`
 * tokens a step; step = (a + b × prefill tokens + c × decoding requests) ×
 * slow × (1 ± noise). The KV cache is `kv_blocks` blocks of 16 tokens: a
 * request is admitted (FIFO) when its prompt's blocks are free (beyond a 1 %
 * watermark), takes a block each 16 tokens it generates, and when none is
 * free the newest running request is preempted: its blocks go, it waits at
 * the head of the queue and recomputes (prefill of prompt + what it
 * generated) when admitted again. Another tenant's requests go straight to
 * the engine. */
#ifndef PACERD_ENGINE_SIM_H
#define PACERD_ENGINE_SIM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/gradient.h"

#define SIM_MAX 400
#define SIM_FIRSTS 200000

enum sim_where { SIM_PROXY, SIM_WAITING, SIM_RUNNING };

struct sim_req {
	enum sim_where where;
	bool tenant;
	double dispatched, first, last, max_gap;
	unsigned generated, prefill_left, blocks, output;
	bool saturated, had_first, emit;
	uint64_t admitted;
};

struct sim_engine {
	unsigned kv_blocks;
	double a_ms, b_ms, c_ms;
	double slow;
	double noise;                   /* each step: × (1 ± noise) */
	double measure_noise;           /* what the lane reads: × (1 ± measure_noise) */
	unsigned prompt, output, chunk; /* outputs vary uniformly in output × [0.5, 1.5] */
};

struct sim {
	struct sim_engine e;
	struct gradient *g; /* NULL: the fixed cap */
	unsigned cap;
	unsigned n;
	struct sim_req r[SIM_MAX];
	unsigned pq[SIM_MAX], pq_head, pq_len; /* the lane's queue (a ring) */
	unsigned wq[SIM_MAX], wq_len;          /* the engine's waiting queue */
	unsigned run[SIM_MAX], n_run;          /* running, in admission order */
	unsigned used_blocks; /* of kv_blocks (more, for a moment, after the cache shrank) */
	unsigned in_flight;
	double t;
	uint64_t rng, seq;
	/* since sim_stats_reset */
	double t0, waiting_area, limit_area;
	uint64_t done, preempted, samples;
	unsigned limit_lo, limit_hi;
	unsigned n_firsts;
	double firsts[SIM_FIRSTS];
};

static double sim_unit(struct sim *s) /* uniform in [0, 1) */
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return (double)(s->rng >> 11) / 9007199254740992.0;
}

static double sim_jitter(struct sim *s, double amount)
{
	return 1 + amount * (2 * sim_unit(s) - 1);
}

static unsigned sim_limit(const struct sim *s)
{
	return s->g != NULL ? gradient_limit(s->g) : s->cap;
}

static void sim_stats_reset(struct sim *s)
{
	s->t0 = s->t;
	s->waiting_area = s->limit_area = 0;
	s->done = s->preempted = s->samples = 0;
	s->limit_lo = UINT32_MAX;
	s->limit_hi = 0;
	s->n_firsts = 0;
}

static void sim_to_proxy(struct sim *s, unsigned i)
{
	struct sim_req *r = &s->r[i];
	memset(r, 0, sizeof(*r));
	r->where = SIM_PROXY;
	s->pq[(s->pq_head + s->pq_len++) % SIM_MAX] = i;
}

static void sim_to_engine(struct sim *s, unsigned i, int64_t now)
{
	struct sim_req *r = &s->r[i];
	bool tenant = r->tenant;
	memset(r, 0, sizeof(*r));
	r->tenant = tenant;
	r->where = SIM_WAITING;
	r->dispatched = (double)now;
	r->output = (unsigned)(s->e.output * (0.5 + sim_unit(s)));
	if (r->output < 2)
		r->output = 2;
	s->wq[s->wq_len++] = i;
}

/* clients requests through the lane, none from other tenants yet */
static void sim_init(struct sim *s, const struct sim_engine *e, struct gradient *g, unsigned cap,
                     unsigned clients, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->e = *e;
	s->g = g;
	s->cap = cap;
	s->rng = seed | 1;
	for (unsigned i = 0; i < clients && i < SIM_MAX; i++)
		sim_to_proxy(s, s->n++);
	sim_stats_reset(s);
}

/* k more requests of another tenant, straight to the engine, closed loop. */
static void sim_add_tenants(struct sim *s, unsigned k)
{
	for (unsigned j = 0; j < k && s->n < SIM_MAX; j++) {
		unsigned i = s->n++;
		s->r[i].tenant = true;
		sim_to_engine(s, i, (int64_t)s->t);
	}
}

static long sim_free(const struct sim *s)
{
	return (long)s->e.kv_blocks - (long)s->used_blocks;
}

static unsigned sim_blocks_for(unsigned tokens)
{
	return (tokens + 15) / 16;
}

static void sim_remove_running(struct sim *s, unsigned k)
{
	memmove(&s->run[k], &s->run[k + 1], (s->n_run - k - 1) * sizeof(s->run[0]));
	s->n_run--;
}

/* The newest running request goes back to the head of the waiting queue. */
static void sim_preempt_newest(struct sim *s)
{
	unsigned k = s->n_run - 1;
	for (unsigned j = 0; j < s->n_run; j++)
		if (s->r[s->run[j]].admitted > s->r[s->run[k]].admitted)
			k = j;
	unsigned i = s->run[k];
	struct sim_req *r = &s->r[i];
	s->used_blocks -= r->blocks;
	r->blocks = 0;
	r->where = SIM_WAITING;
	r->emit = false;
	sim_remove_running(s, k);
	memmove(&s->wq[1], &s->wq[0], s->wq_len * sizeof(s->wq[0]));
	s->wq[0] = i;
	s->wq_len++;
	if (!r->tenant)
		s->preempted++;
}

static void sim_complete(struct sim *s, unsigned k)
{
	unsigned i = s->run[k];
	struct sim_req *r = &s->r[i];
	s->used_blocks -= r->blocks;
	sim_remove_running(s, k);
	if (r->tenant) {
		sim_to_engine(s, i, (int64_t)s->t);
		return;
	}
	s->in_flight--;
	s->done++;
	if (s->g != NULL) {
		double mn = s->e.measure_noise;
		struct gradient_sample smp = {
		    .dispatched_ms = (int64_t)r->dispatched,
		    .first_ms = (r->first - r->dispatched) * sim_jitter(s, mn),
		    .stream_ms = (r->last - r->first) * sim_jitter(s, mn),
		    .max_gap_ms = r->max_gap,
		    .events = r->generated - 1,
		    .prompt_tokens = s->e.prompt,
		    .in_flight = s->in_flight + 1,
		    .saturated = r->saturated,
		};
		gradient_on_sample(s->g, (int64_t)s->t, &smp);
		s->samples++;
	}
	sim_to_proxy(s, i);
}

static void sim_step(struct sim *s)
{
	/* the lane lets requests go */
	unsigned limit = sim_limit(s);
	while (s->in_flight < limit && s->pq_len > 0) {
		unsigned i = s->pq[s->pq_head];
		s->pq_head = (s->pq_head + 1) % SIM_MAX;
		s->pq_len--;
		s->in_flight++;
		if (s->g != NULL)
			gradient_on_dispatch(s->g, (int64_t)s->t, s->in_flight);
		sim_to_engine(s, i, (int64_t)s->t);
		s->r[i].saturated = s->in_flight >= limit;
	}
	/* admission, FIFO, above a 1 % watermark */
	unsigned watermark = s->e.kv_blocks / 100;
	while (s->wq_len > 0) {
		unsigned i = s->wq[0];
		struct sim_req *r = &s->r[i];
		unsigned need = sim_blocks_for(s->e.prompt + r->generated);
		if ((long)(need + watermark) > sim_free(s))
			break;
		memmove(&s->wq[0], &s->wq[1], (s->wq_len - 1) * sizeof(s->wq[0]));
		s->wq_len--;
		s->used_blocks += need;
		r->blocks = need;
		r->prefill_left = s->e.prompt + r->generated;
		r->where = SIM_RUNNING;
		r->admitted = ++s->seq;
		s->run[s->n_run++] = i;
	}
	/* the decoders' next blocks, preempting the newest while short */
	for (;;) {
		unsigned need = 0;
		for (unsigned j = 0; j < s->n_run; j++) {
			const struct sim_req *r = &s->r[s->run[j]];
			if (r->prefill_left == 0 && s->e.prompt + r->generated + 1 > r->blocks * 16)
				need++;
		}
		if ((long)need <= sim_free(s) || s->n_run == 0)
			break;
		sim_preempt_newest(s);
	}
	unsigned budget = s->e.chunk, prefill = 0, decoding = 0;
	for (unsigned j = 0; j < s->n_run; j++) {
		struct sim_req *r = &s->r[s->run[j]];
		if (r->prefill_left > 0) {
			unsigned take = r->prefill_left < budget ? r->prefill_left : budget;
			r->prefill_left -= take;
			budget -= take;
			prefill += take;
			r->emit = r->prefill_left == 0;
		} else {
			if (s->e.prompt + r->generated + 1 > r->blocks * 16) {
				r->blocks++;
				s->used_blocks++;
			}
			decoding++;
			r->emit = true;
		}
	}
	double step = (s->e.a_ms + s->e.b_ms * prefill + s->e.c_ms * decoding) * s->e.slow *
	              sim_jitter(s, s->e.noise);
	s->waiting_area += (double)s->wq_len * step;
	s->limit_area += (double)limit * step;
	if (limit < s->limit_lo)
		s->limit_lo = limit;
	if (limit > s->limit_hi)
		s->limit_hi = limit;
	s->t += step;
	for (unsigned j = 0; j < s->n_run;) {
		struct sim_req *r = &s->r[s->run[j]];
		if (!r->emit) {
			j++;
			continue;
		}
		r->generated++;
		if (!r->had_first) {
			r->had_first = true;
			r->first = s->t;
			if (!r->tenant) {
				double first_ms =
				    (s->t - r->dispatched) * sim_jitter(s, s->e.measure_noise);
				if (s->n_firsts < SIM_FIRSTS)
					s->firsts[s->n_firsts++] = s->t - r->dispatched;
				struct gradient_first f = {
				    .dispatched_ms = (int64_t)r->dispatched,
				    .first_ms = first_ms,
				    .prompt_tokens = s->e.prompt,
				    .in_flight = s->in_flight,
				};
				if (s->g != NULL)
					gradient_on_first(s->g, (int64_t)s->t, &f);
			}
		} else if (s->t - r->last > r->max_gap) {
			r->max_gap = s->t - r->last;
		}
		r->last = s->t;
		if (r->generated >= r->output)
			sim_complete(s, j);
		else
			j++;
	}
}

static void sim_run(struct sim *s, double seconds)
{
	double until = s->t + seconds * 1000;
	while (s->t < until)
		sim_step(s);
}

/* What happened since sim_stats_reset. */
static double sim_throughput(const struct sim *s) /* completions per second */
{
	return s->t > s->t0 ? (double)s->done * 1000 / (s->t - s->t0) : 0;
}

static double sim_mean_waiting(const struct sim *s)
{
	return s->t > s->t0 ? s->waiting_area / (s->t - s->t0) : 0;
}

static double sim_mean_limit(const struct sim *s)
{
	return s->t > s->t0 ? s->limit_area / (s->t - s->t0) : 0;
}

static int sim_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The q-quantile of first-token times since the reset (sorts them). */
static double sim_first_quantile(struct sim *s, double q)
{
	if (s->n_firsts == 0)
		return 0;
	qsort(s->firsts, s->n_firsts, sizeof(s->firsts[0]), sim_cmp_double);
	return s->firsts[(unsigned)(q * (s->n_firsts - 1))];
}

#endif
