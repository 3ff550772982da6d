/* SPDX-License-Identifier: Apache-2.0 */
/* mock_engine_sched.h — the engine mode's scheduler: a self-hosted LLM server that
 * batches continuously, as vLLM does (tests/mock/README.md, "Engine mode"; issue 29).
 * Pure: no clock and no I/O; every instant is passed in (µs on the caller's clock).
 * pacerd-mock runs it on a libevent timer (mock_engine.c); test_gradient runs it in
 * simulated time against the latency controller (tests/unit/sched/engine_lane.h).
 *
 * The model (ADAPTIVE.md: BLIS's fit of vLLM 0.8.4, Llama-3.1-8B on an A100):
 *   - the engine runs in steps; a step computes tokens for every running sequence:
 *     a prefill chunk for one that is new or recomputing, one token for one that
 *     decodes; at most max_batch_tokens tokens in a step (chunked prefill);
 *   - step time = (base_ms + prefill_ms × prefill tokens + decode_ms × decoding
 *     sequences) × scale;
 *   - a step that completes a sequence's prefill, or decodes it, emits one output
 *     token for it; a sequence ends when it has its target number of tokens;
 *   - the KV cache holds kv_blocks blocks of ENG_BLOCK tokens; a sequence holds the
 *     blocks of the tokens computed for it;
 *   - each step first gives the running sequences (oldest admitted first) the blocks
 *     their tokens need; when none is free, the newest running sequence is preempted
 *     (recompute: its blocks freed, back to the front of the queue, all its tokens
 *     computed again when it is readmitted); then, in a step that preempted nothing,
 *     admits waiting sequences in order while their first chunk's blocks, the step's
 *     token budget and max_seqs allow (vLLM V1's scheduler).
 * A sequence whose prompt and output fit the cache always runs in the end: alone, it
 * has every block (the caller refuses one that does not fit, and a smaller cache
 * than a live sequence needs).
 *
 * The caller decides a step with eng_plan (which says how long it takes) and ends it
 * with eng_end at the instant it ends: on time, or late (a timer the machine did not
 * run on time, noise the caller adds). The engine keeps what the figures need: each
 * sequence's arrival, first token, last token and longest gap between two tokens, and
 * the time integrals of the queue and the batch. */
#ifndef PACERD_MOCK_ENGINE_SCHED_H
#define PACERD_MOCK_ENGINE_SCHED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#define ENG_BLOCK 16L /* tokens per KV block */

struct eng_params {
	double base_ms;        /* a: the fixed cost of a step */
	double prefill_ms;     /* b: per prefill token */
	double decode_ms;      /* c: per decoding sequence */
	double scale;          /* every step's time is multiplied by it */
	long kv_blocks;        /* capacity of the KV cache */
	long max_batch_tokens; /* tokens computed in one step */
	long max_seqs;         /* sequences running at once */
};

struct eng_seq {
	TAILQ_ENTRY(eng_seq) link;
	long prompt;      /* prompt tokens */
	long target;      /* output tokens it ends with (>= 1) */
	long generated;   /* output tokens emitted */
	long computed;    /* tokens whose KV is in the cache */
	long blocks;      /* KV blocks held */
	long step_tokens; /* tokens computed for it in the planned step (0: none) */
	long preemptions;
	bool running; /* in the running list (else waiting) */
	/* instants (µs): arrival, the first and the last token (0: none yet), and the
	 * longest time between two of its tokens */
	uint64_t arrival_us, first_us, last_us, max_gap_us;
};
TAILQ_HEAD(eng_list, eng_seq);

struct eng {
	struct eng_params p;
	struct eng_list waiting, running; /* waiting: FIFO; running: in admission order */
	long n_waiting, n_running, blocks_used;
	bool planned; /* a step is planned and not yet ended */
	/* totals since eng_init */
	uint64_t steps, preemptions, prefill_tokens, output_tokens;
	/* ∫ n_waiting dt and ∫ n_running dt (requests × ms) up to t_us */
	double waiting_area_ms, running_area_ms;
	uint64_t t_us;
};

/* An empty engine at now_us. */
void eng_init(struct eng *e, const struct eng_params *p, uint64_t now_us);
/* The time of one step with these tokens. */
double eng_step_ms(const struct eng_params *p, long prefill_tokens, long decoding);
/* Blocks that hold n tokens. */
long eng_blocks(long tokens);
/* Brings the queue's and the batch's integrals up to now_us (every call below does;
 * a reader of the integrals calls it first). */
void eng_advance(struct eng *e, uint64_t now_us);
/* A new sequence (prompt and target set, the rest zero) at the back of the queue. */
void eng_arrive(struct eng *e, struct eng_seq *s, uint64_t now_us);
/* Takes a sequence out wherever it is (its client left), its blocks freed. */
void eng_remove(struct eng *e, struct eng_seq *s, uint64_t now_us);
/* Decides the next step at now_us: preemptions, admissions, each sequence's
 * step_tokens. Returns the step's time in ms, or 0 when there is nothing to compute. */
double eng_plan(struct eng *e, uint64_t now_us);
/* Ends the planned step at now_us: for each sequence that emitted a token, in running
 * order, calls token(s, done, arg) with its instants updated; a done sequence is
 * already out of the engine, its blocks freed, and the callback may free it. */
void eng_end(struct eng *e, uint64_t now_us, void (*token)(struct eng_seq *s, bool done, void *arg),
             void *arg);

#endif
