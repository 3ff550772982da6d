/* SPDX-License-Identifier: Apache-2.0 */
/* gradient — a lane's concurrency limit from latency alone, for providers
 * that never refuse: self-hosted engines (vLLM, SGLang, TGI, llama.cpp,
 * Ollama) that queue instead (issue 29; docs/pacing.md, "Engines that queue").
 * Pure: no I/O, no clock; instants are int64 ms passed in by the caller.
 *
 * What it reads. Past its batch and KV-cache capacity an engine admits no
 * more: requests wait inside it before their prefill, and their first token
 * comes late. Whole-request time is useless (it grows with output length),
 * and so is any absolute latency (a bigger model or a hot GPU makes every
 * step slower with the knee where it was). The controller reads, per
 * streamed answer, the time to its first token in units of its own
 * per-token time: r = first-token ms / per-token ms. Under any load below the
 * knee r stays near its queue-free value (prefill plus a step or two); a
 * uniformly slower server scales both alike and leaves r alone; a request
 * that waited for admission has r grown by its wait / per-token time.
 *
 *   - The queue-free r, the baseline, is kept per prompt size (buckets of
 *     powers of two: a longer prompt takes longer to prefill, in steps too)
 *     as a low quantile (the 20th percentile, tracked one sample at a time)
 *     of what the lane's answers showed: not the minimum, which one lucky
 *     sample would set for good (Netflix's Vegas, issue 37), and not re-probed
 *     by pinning the limit low (Envoy's 503s while pinned): r is a ratio, so
 *     what makes an absolute baseline stale (a slower or faster server) does
 *     not move it, and the controller's own cuts drain the queue, which gives
 *     it queue-free samples again. An answer whose first token came late
 *     (over (1 + tolerance / 2) × the baseline) raises it by 0.1 % (one on
 *     time, by 1 %): a queue that lasts, or a server one request over its
 *     knee, must not become the baseline (Envoy's minRTT drifting up under
 *     load, its issue 11579). It comes down by 4 % an answer, by a tenth a
 *     round at most (answers that straddle a change of speed read low). A
 *     change of the server that a long queue shows (a cache that shrank,
 *     another tenant) changes how it batches, and r with it: the next
 *     answers teach the baseline again as from scratch.
 *   - A request's wait inside the server is what its r shows beyond
 *     (1 + tolerance) × the baseline, in per-token times. Little's law turns
 *     the waits into the lane's queue inside the server:
 *     Q = (mean in flight) × Σ wait / Σ request time, over a round: the
 *     answers to requests sent after the round began, at least
 *     GRADIENT_ROUND_MIN and half the limit. A Q over GRADIENT_CUT_ABOVE
 *     cuts the limit to what the server ran, in flight − Q (by at least one,
 *     at most by half; by two thirds for a queue of eight), at once when it
 *     is four requests or more, else when the next round still shows one (a
 *     moment in which this machine or the server was not scheduled delays
 *     every first token due then, not the next round's). A Q under
 *     GRADIENT_GROW_BELOW with the lane at its limit lets it grow (a probe,
 *     below); in between, the limit stays (the tolerance band).
 *   - A server one request over its knee shows no queue to speak of: its
 *     KV cache one block short preempts the newest request, recomputes it
 *     and admits nothing in that step, over and over, and the typical first
 *     token comes half as long again late. The one-too-many test reads every
 *     answer sent at the limit (after the requests sent before the last move
 *     down have mostly left: those still run, and the server preempts the
 *     newest): late (as above) or stalled (a gap of its stream over
 *     GRADIENT_STALL_FACTOR per-token times: preempted and recomputed). Of
 *     32 answers, more than 56 % late cut the limit by one (at the knee a
 *     quarter to nearly half come that late: prefills that meet in a step).
 *   - A probe: with the lane at its limit, no queue and no hold left, the
 *     limit grows by 1, then 2, 4 … while nothing above is known to fail,
 *     one at a time below a level that did (the ceiling). A probe stands
 *     after two rounds and 16 answers at least in which no queue showed
 *     (Q < GRADIENT_GROW_BELOW) and at most 62 % came late; it is taken back
 *     at once when a third of the first tokens of requests sent under it (of
 *     half the limit's worth, 8 at least), or a quarter of the limit's
 *     worth, waited (judged as in slow start, below), when one of those
 *     stalled, or when more than 62 % of 16 answers came late. A level that
 *     failed (a probe taken back, the one-too-many test) is the ceiling, and
 *     the next probe of it waits `backoff` rounds: GRADIENT_BACKOFF_MIN at
 *     first, four times as many after each probe that failed, up to
 *     GRADIENT_BACKOFF_MAX (a probe past the knee costs preemptions; a knee
 *     probed every few rounds costs them every few rounds). After a cut by a
 *     queue the next probe comes after GRADIENT_HOLD_ROUNDS (what the server
 *     ran is an estimate); after the one-too-many test's cut, a quarter of
 *     the backoff (the test can be wrong); after a probe of several at once
 *     that failed, GRADIENT_HOLD_ROUNDS (it says nothing of the first).
 *
 * Slow start (slow_start.h, which AIMD's open limit on a silent lane shares).
 * A fresh lane, or one idle for a while (gradient_restart), starts at
 * `initial` (20, as Netflix's limiters start) and doubles per round trip:
 * once half the requests sent since the last doubling have their first token
 * back, and at most a fifth of those waited (a first token later than
 * (1 + tolerance) × the prompt size's queue-free first-token time +
 * GRADIENT_SLACK_MS), the limit becomes twice the most in flight since the
 * last doubling (a lane that never fills its limit learns nothing by raising
 * it); more of them waited, or a round of answers showed a queue: slow start
 * ends. A first token is the round trip, not the answer's end: a stream
 * keeps its slot long after the server admitted it. Slow start's first
 * round is not judged, and its answers count in no round: a fresh lane's
 * burst queues for its own
 * prefills, a queue no lower limit would have avoided. An answer that is
 * not a stream tells no first token from its end: it counts as one round
 * trip back (it did not wait) and never enters a round.
 *
 * Refusals are AIMD's (aimd.h): the lane's limit is the lower of the two,
 * and a refusal's cut also cuts this one (gradient_cut). */
#ifndef PACERD_GRADIENT_H
#define PACERD_GRADIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/slow_start.h"

struct plan_conf; /* core/config.h */

#define GRADIENT_BUCKETS 8        /* prompt sizes: < 256 tokens, < 512, … , >= 16384 */
#define GRADIENT_ROUND_MIN 4      /* answers a round needs, at least */
#define GRADIENT_CUT_ABOVE 1.0    /* requests waiting inside the server: over it, cut */
#define GRADIENT_GROW_BELOW 0.5   /* under it (at the limit), room to grow */
#define GRADIENT_HOLD_ROUNDS 4    /* rounds after a queue cut before the next probe */
#define GRADIENT_BACKOFF_MIN 32   /* rounds before probing a ceiling again: at first */
#define GRADIENT_BACKOFF_MAX 256  /* … and at most */
#define GRADIENT_SLACK_MS 25.0    /* slow start: first-token jitter that is no wait */
#define GRADIENT_STALL_FACTOR 8.0 /* a gap this many per-token times long: a stall */

/* Why the limit last moved (/status "why"). */
enum gradient_why {
	GRADIENT_WHY_START,      /* a fresh lane: slow start from `initial` */
	GRADIENT_WHY_SLOW_START, /* first tokens came without waiting: doubling */
	GRADIENT_WHY_GROW,       /* a round with no queue in the server, at the limit */
	GRADIENT_WHY_QUEUE,      /* requests waited inside the server */
	GRADIENT_WHY_PREEMPTED,  /* the server preempted requests (stalled streams) */
	GRADIENT_WHY_REFUSAL,    /* a refusal (AIMD's cut) */
	GRADIENT_WHY_IDLE,       /* idle for a while: slow start again */
	GRADIENT_WHY_RECONFIGURED,
	GRADIENT_N_WHY
};

struct gradient_params {
	unsigned min, max; /* 1 <= min <= max */
	unsigned initial;  /* slow start's first limit, in [min, max] */
	double tolerance;  /* a first token up to (1 + tolerance) × queue-free is no wait */
};

/* A streamed answer's first data event. */
struct gradient_first {
	int64_t dispatched_ms; /* when the lane let it go */
	double first_ms;       /* dispatch to the first data event */
	double prompt_tokens;  /* the prompt's estimate */
	size_t in_flight;      /* the lane's requests in flight now */
};

/* One answer, as the exchange timed it, with what the lane knew of it. */
struct gradient_sample {
	int64_t dispatched_ms; /* when the lane let it go */
	double first_ms;       /* dispatch to the first data event; < 0: not a stream */
	double stream_ms;      /* the first data event to the last */
	double max_gap_ms;     /* the longest gap between two chunks after the first */
	unsigned events;       /* data events after the first chunk's */
	double prompt_tokens;  /* the prompt's estimate */
	size_t in_flight;      /* the lane's requests in flight as it ended, itself included */
	bool saturated;        /* the lane was at its limit when it was sent */
};

struct gradient {
	struct gradient_params p;
	double limit;         /* a whole number in [min, max] */
	struct slow_start ss; /* slow start's rounds (slow_start.h) */
	unsigned hold;        /* clean rounds still to wait before growing */
	unsigned step;        /* the next growth */
	/* The lowest limit the server showed it could not hold (0: none
	 * known), and the clean rounds the next probe of it waits. */
	double ceiling;
	unsigned backoff;
	unsigned relearn; /* answers still to teach the ratio baselines as from scratch */
	/* After a move down at cut_ms, old_left of the requests sent before it
	 * still run: the one-too-many test reads what is sent from drained_ms
	 * (once fewer of them run than the limit, or at drain_by_ms). */
	int64_t cut_ms, drain_by_ms, drained_ms;
	unsigned old_left;
	/* A growth is a probe of the knee until its verdict: the limit before
	 * it (0: none out), since when, the rounds still to judge it on, and
	 * how many first tokens of requests sent under it came back and
	 * waited. */
	double probe_from;
	int64_t probe_ms;
	unsigned probe_left;
	unsigned probe_firsts, probe_waited;
	/* Per prompt-size bucket: the queue-free ratio of first-token time to
	 * per-token time (and its value as the round began), and the queue-free
	 * first-token time (slow start), with how many samples each has seen
	 * (the first few: their minimum). */
	float ratio_floor[GRADIENT_BUCKETS], first_floor_ms[GRADIENT_BUCKETS];
	float ratio_floor_round[GRADIENT_BUCKETS];
	uint16_t ratio_n[GRADIENT_BUCKETS], first_n[GRADIENT_BUCKETS];
	/* The round: answers to requests sent since round_ms; rounds in a row
	 * that showed a queue. */
	int64_t round_ms;
	unsigned round_n, round_saturated;
	double round_wait_ms, round_total_ms, round_in_flight;
	unsigned queued_rounds;
	/* The one-too-many test: answers to requests sent since late_from_ms
	 * (the last move) it counted, of those late, and whether it said so
	 * (the round's end cuts). */
	int64_t late_from_ms;
	unsigned late_n, late_of_n;
	bool late_alarm;
	/* What /status shows. */
	double token_ms, first_ms; /* EWMAs of what answers showed */
	double
	    request_ms; /* a request's time, dispatch to its last token (the last round's mean) */
	float base_token_ms; /* the per-token time's low quantile */
	uint16_t base_token_n;
	int last_bucket; /* the prompt size of the last answer */
	double queue;    /* the last round's Q */
	enum gradient_why why;
	int64_t moved_ms;
};

/* Sets up a fresh lane's controller at now_ms: slow start from
 * params->initial (arguments are corrected into range: min >= 1, max >= min,
 * initial in [min, max], tolerance >= 0). */
void gradient_init(struct gradient *g, const struct gradient_params *params, int64_t now_ms);

/* The parameters a plan gives (concurrency.min, .slow_start, .tolerance,
 * max_concurrent). */
void gradient_params_of(const struct plan_conf *plan, struct gradient_params *out);

/* New bounds (reload); the limit kept where it still fits. */
void gradient_reconfigure(struct gradient *g, const struct gradient_params *params, int64_t now_ms);

/* A request of the lane was sent, in_flight with it (slow start counts
 * its round's). */
void gradient_on_dispatch(struct gradient *g, int64_t now_ms, size_t in_flight);

/* A streamed answer's first data event came: in slow start it counts
 * toward the round's doubling; while a probe is out, first tokens of
 * requests sent under it that waited take it back (gradient.h). Returns
 * true when the limit moved. */
bool gradient_on_first(struct gradient *g, int64_t now_ms, const struct gradient_first *f);

/* An answer ended complete (a success). Returns true when the limit moved. */
bool gradient_on_sample(struct gradient *g, int64_t now_ms, const struct gradient_sample *s);

/* A refusal cut the lane's AIMD limit to `to`: this limit goes no higher,
 * and slow start ends. Returns true when the limit moved. */
bool gradient_cut(struct gradient *g, int64_t now_ms, unsigned to);

/* The lane was idle long enough for what it taught to be stale: slow start
 * again, from the lower of `initial` and the limit (RFC 5681's restart
 * window). */
void gradient_restart(struct gradient *g, int64_t now_ms);

/* The limit now, an integer in [min, max]. */
unsigned gradient_limit(const struct gradient *g);

/* What /status and /metrics show. Times in ms; 0 where nothing was seen. */
struct gradient_view {
	unsigned limit;
	bool slow_start;
	double token_ms, base_token_ms; /* per output token: now (EWMA), queue-free */
	double first_ms, base_first_ms; /* to the first token: now (EWMA), queue-free
	                                 * (for the last answer's prompt size) */
	double queue;                   /* requests waiting inside the server (last round) */
	const char *why;                /* gradient_why_name */
	int64_t moved_ago_ms;
};
void gradient_view(const struct gradient *g, int64_t now_ms, struct gradient_view *v);

const char *gradient_why_name(enum gradient_why why);

#endif
