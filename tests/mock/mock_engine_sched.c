/* SPDX-License-Identifier: Apache-2.0 */
/* mock_engine_sched.c — the engine mode's scheduler, pure: instants are arguments
 * (mock_engine_sched.h states the model; mock_engine.c and test_gradient drive it). */
#include "mock_engine_sched.h"

#include <string.h>

void eng_init(struct eng *e, const struct eng_params *p, uint64_t now_us)
{
	memset(e, 0, sizeof(*e));
	e->p = *p;
	TAILQ_INIT(&e->waiting);
	TAILQ_INIT(&e->running);
	e->t_us = now_us;
}

void eng_advance(struct eng *e, uint64_t now_us)
{
	if (now_us <= e->t_us)
		return;
	double dt = (double)(now_us - e->t_us) / 1000.0;
	e->waiting_area_ms += (double)e->n_waiting * dt;
	e->running_area_ms += (double)e->n_running * dt;
	e->t_us = now_us;
}

long eng_blocks(long tokens)
{
	return (tokens + ENG_BLOCK - 1) / ENG_BLOCK;
}

double eng_step_ms(const struct eng_params *p, long prefill_tokens, long decoding)
{
	return (p->base_ms + p->prefill_ms * (double)prefill_tokens +
	        p->decode_ms * (double)decoding) *
	       p->scale;
}

void eng_arrive(struct eng *e, struct eng_seq *s, uint64_t now_us)
{
	eng_advance(e, now_us);
	s->arrival_us = now_us;
	s->running = false;
	s->step_tokens = 0;
	TAILQ_INSERT_TAIL(&e->waiting, s, link);
	e->n_waiting++;
}

static void release(struct eng *e, struct eng_seq *s)
{
	e->blocks_used -= s->blocks;
	s->blocks = 0;
	s->computed = 0;
	s->step_tokens = 0;
}

/* Out of its list, its blocks freed (the integrals already up to date). */
static void take_out(struct eng *e, struct eng_seq *s)
{
	if (s->running) {
		TAILQ_REMOVE(&e->running, s, link);
		e->n_running--;
	} else {
		TAILQ_REMOVE(&e->waiting, s, link);
		e->n_waiting--;
	}
	s->running = false;
	release(e, s);
}

void eng_remove(struct eng *e, struct eng_seq *s, uint64_t now_us)
{
	eng_advance(e, now_us);
	take_out(e, s);
}

/* The newest running sequence goes back to the front of the queue; everything it
 * computed is computed again when it is readmitted (vLLM's recompute preemption). */
static void preempt_newest(struct eng *e)
{
	struct eng_seq *s = TAILQ_LAST(&e->running, eng_list);
	TAILQ_REMOVE(&e->running, s, link);
	e->n_running--;
	release(e, s);
	s->running = false;
	s->preemptions++;
	e->preemptions++;
	TAILQ_INSERT_HEAD(&e->waiting, s, link);
	e->n_waiting++;
}

/* Tokens not yet computed: the prompt (again, after a preemption) and the output so
 * far; 1 for a sequence that decodes. */
static long tokens_uncomputed(const struct eng_seq *s)
{
	return s->prompt + s->generated - s->computed;
}

static long min_long(long a, long b)
{
	return a < b ? a : b;
}

/* Counts n tokens of s in the step: one decode, or n prefill tokens. */
static void take(struct eng_seq *s, long n, long *prefill, long *decoding)
{
	if (s->computed >= s->prompt && n == 1)
		(*decoding)++;
	else
		*prefill += n;
	s->step_tokens = n;
}

double eng_plan(struct eng *e, uint64_t now_us)
{
	eng_advance(e, now_us);
	long budget = e->p.max_batch_tokens, prefill = 0, decoding = 0;
	bool preempted = false;
	/* a cache that shrank: the newest go until the others fit */
	while (e->blocks_used > e->p.kv_blocks && e->n_running > 0) {
		preempt_newest(e);
		preempted = true;
	}
	struct eng_seq *s = TAILQ_FIRST(&e->running);
	while (s != NULL) {
		s->step_tokens = 0;
		long n = min_long(tokens_uncomputed(s), budget);
		if (n <= 0) {
			s = TAILQ_NEXT(s, link);
			continue;
		}
		long need = eng_blocks(s->computed + n) - s->blocks;
		while (need > e->p.kv_blocks - e->blocks_used && s->running) {
			preempt_newest(e);
			preempted = true;
		}
		if (!s->running)
			break; /* it was the newest: nothing after it runs either */
		s->blocks += need;
		e->blocks_used += need;
		take(s, n, &prefill, &decoding);
		budget -= n;
		s = TAILQ_NEXT(s, link); /* what followed it may have been preempted */
	}
	/* vLLM V1 admits nothing in a step that had to preempt */
	while (!preempted && budget > 0 && e->n_running < e->p.max_seqs &&
	       (s = TAILQ_FIRST(&e->waiting)) != NULL) {
		long n = min_long(tokens_uncomputed(s), budget);
		long need = eng_blocks(s->computed + n) - s->blocks;
		if (need > e->p.kv_blocks - e->blocks_used)
			break;
		TAILQ_REMOVE(&e->waiting, s, link);
		e->n_waiting--;
		TAILQ_INSERT_TAIL(&e->running, s, link);
		e->n_running++;
		s->running = true;
		s->blocks += need;
		e->blocks_used += need;
		take(s, n, &prefill, &decoding);
		budget -= n;
	}
	e->planned = prefill + decoding > 0;
	if (!e->planned)
		return 0;
	e->steps++;
	e->prefill_tokens += (uint64_t)prefill;
	return eng_step_ms(&e->p, prefill, decoding);
}

void eng_end(struct eng *e, uint64_t now_us, void (*token)(struct eng_seq *s, bool done, void *arg),
             void *arg)
{
	eng_advance(e, now_us);
	e->planned = false;
	struct eng_seq *s = TAILQ_FIRST(&e->running), *next;
	for (; s != NULL; s = next) {
		next = TAILQ_NEXT(s, link);
		long n = s->step_tokens;
		if (n == 0)
			continue;
		s->step_tokens = 0;
		s->computed += n;
		if (s->computed < s->prompt + s->generated)
			continue; /* a chunk of a longer prefill */
		s->generated++;
		e->output_tokens++;
		if (s->generated == 1)
			s->first_us = now_us;
		else if (now_us - s->last_us > s->max_gap_us)
			s->max_gap_us = now_us - s->last_us;
		s->last_us = now_us;
		bool done = s->generated >= s->target;
		if (done)
			take_out(e, s);
		token(s, done, arg);
	}
}
