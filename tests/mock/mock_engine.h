/* SPDX-License-Identifier: Apache-2.0 */
/* mock_engine.h — pacerd-mock's engine mode: a self-hosted LLM server that batches
 * continuously, as vLLM does (tests/mock/README.md, "Engine mode"; issue 29).
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
 * has every block (mock_engine.c refuses one that does not fit, and a smaller cache
 * than a live sequence needs).
 *
 * The scheduler below is a state machine with no clock and no I/O: eng_plan decides
 * a step and says how long it takes, eng_end applies it. mock_engine.c runs it on a
 * libevent timer and speaks HTTP. */
#ifndef PACERD_MOCK_ENGINE_H
#define PACERD_MOCK_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/http.h>

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
};
TAILQ_HEAD(eng_list, eng_seq);

struct eng {
	struct eng_params p;
	struct eng_list waiting, running; /* waiting: FIFO; running: in admission order */
	long n_waiting, n_running, blocks_used;
	bool planned; /* a step is planned and not yet ended */
	/* totals since eng_init */
	uint64_t steps, preemptions, prefill_tokens, output_tokens;
};

void eng_init(struct eng *e, const struct eng_params *p);
/* The time of one step with these tokens (pure). */
double eng_step_ms(const struct eng_params *p, long prefill_tokens, long decoding);
/* Blocks that hold n tokens. */
long eng_blocks(long tokens);
/* A new sequence at the back of the queue. */
void eng_arrive(struct eng *e, struct eng_seq *s);
/* Takes a sequence out wherever it is (its client left), its blocks freed. */
void eng_remove(struct eng *e, struct eng_seq *s);
/* Decides the next step: preemptions, admissions, each sequence's step_tokens.
 * Returns the step's time in ms, or 0 when there is nothing to compute. */
double eng_plan(struct eng *e);
/* Ends the planned step: for each sequence that emitted a token, in running order,
 * calls token(s, done, arg); a done sequence is already out of the engine, its
 * blocks freed, and the callback may free it. */
void eng_end(struct eng *e, void (*token)(struct eng_seq *s, bool done, void *arg), void *arg);

/* ---- mock_engine.c: the hooks of the rest of the mock ---- */
struct mock_req;
struct mock_engine_req;
struct mock_conn;
/* --engine JSON / POST /_mock/engine: turns the mode on (unless "enabled": false) and
 * sets the fields given; 0, or -1 with err. */
int mock_engine_configure(const char *json, size_t len, char *err, size_t errlen);
bool mock_engine_enabled(void);
/* Output tokens of a chat completion in engine mode: x-mock-output-tokens, else drawn
 * from the configured range; cut to max_tokens (> 0), *truncated then. */
long mock_engine_output_tokens(struct evhttp_request *req, long max_tokens, bool *truncated);
/* Takes the request (prompt and output tokens, the stream's template tmpl or the
 * whole non-stream body): false when it cannot, and the caller answers at once. */
bool mock_engine_submit(struct evhttp_request *req, long prompt, long output,
                        const struct mock_req *tmpl, struct evbuffer *body);
void mock_engine_conn_closed(struct mock_engine_req *er);
/* Answers /_mock/engine and /_mock/engine/requests; false for another path. */
bool mock_engine_admin(struct evhttp_request *req, const char *path);
void mock_engine_reset(void);
void mock_engine_free(void);

#endif
