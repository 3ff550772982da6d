/* SPDX-License-Identifier: Apache-2.0 */
/* gradient — a lane's concurrency limit from latency; see gradient.h for the
 * model and why it reads what it reads. */
#include "sched/gradient.h"

#include <math.h>
#include <string.h>

#include "core/config.h"

/* The low quantile the baselines track, and how fast: a sample under the
 * estimate lowers it by RATE × (1 − Q), one over it raises it by RATE × Q,
 * which balance where a fraction Q of the samples is under it. */
#define FLOOR_Q 0.2
#define FLOOR_RATE 0.05
/* How many times slower a sample that waited raises a baseline. */
#define FLOOR_WAITED 10
/* The least a baseline is taken to be (ms, or a ratio). */
#define FLOOR_LEAST 1e-3
/* A bucket's first samples set its baseline to their minimum. */
#define FLOOR_WARMUP 8
/* Weight of a new answer in the EWMAs /status shows. */
#define SHOWN_ALPHA 0.1
/* round_ms while slow start's first round is out: the burst a fresh or idle
 * lane lets go at once queues for its own prefills (a queue no limit below
 * it would have avoided), so no round counts its answers. */
#define FIRST_BURST INT64_MAX
/* A probe is judged on PROBE_ROUNDS rounds and PROBE_SAMPLE answers at
 * least; first tokens of requests sent under it tell whether it found a
 * queue, PROBE_FIRSTS_MIN of them at least. */
#define PROBE_ROUNDS 2
#define PROBE_SAMPLE 16
#define PROBE_FIRSTS_MIN 8
/* A ceiling this close (or closer) above the limit: probes one at a time,
 * GRADIENT_HOLD_ROUNDS apart. */
#define NEAR_CEILING 2
/* What a probe that failed multiplies the next one's wait by. */
#define BACKOFF_GROWTH 4
/* A per-token time under this (ms) is no per-token time: the answer came in
 * one piece, or faster than the clock tells. */
#define TOKEN_MS_MIN 0.05
/* After a move down, the requests out then have drained at the latest after
 * DRAIN_REQUESTS requests' time (the last round's mean; before any round,
 * DRAIN_UNKNOWN_MS). */
#define DRAIN_REQUESTS 3
#define DRAIN_UNKNOWN_MS 10000.0
/* A queue inside the server (requests) that cuts in one round; a shorter
 * one (over GRADIENT_CUT_ABOVE) must still show in the next. */
#define QUEUE_AT_ONCE 4.0
/* The one-too-many test (late_count): a limit is judged on LATE_SAMPLE
 * answers, a probe on PROBE_SAMPLE; too many when more than LATE_SHARE
 * (LATE_SHARE_PROBE) of them came late. */
#define LATE_SAMPLE 32
#define LATE_SHARE 0.56
#define LATE_SHARE_PROBE 0.62
/* Answers that teach the ratio baselines again after a change of the
 * server (a queue of QUEUE_AT_ONCE or more). */
#define RELEARN_ANSWERS 32
/* A round moves a ratio baseline down by this share of itself at most:
 * answers that straddle a change of the server's speed (a first token at
 * the old speed, the rest at the new) read as a lower ratio for a round or
 * so. */
#define FLOOR_ROUND_DROP 0.1

static double clampd(double v, double lo, double hi)
{
	return v < lo ? lo : (v > hi ? hi : v);
}

static void set_params(struct gradient *g, const struct gradient_params *in)
{
	g->p.min = in->min >= 1 ? in->min : 1;
	g->p.max = in->max >= g->p.min ? in->max : g->p.min;
	g->p.initial = (unsigned)clampd(in->initial, g->p.min, g->p.max);
	g->p.tolerance = isfinite(in->tolerance) && in->tolerance >= 0 ? in->tolerance : 1.0;
}

static void moved(struct gradient *g, int64_t now_ms, enum gradient_why why)
{
	g->why = why;
	g->moved_ms = now_ms;
}

/* A new round: answers to requests sent from now on. */
static void round_begin(struct gradient *g, int64_t now_ms)
{
	g->round_ms = now_ms;
	g->round_n = g->round_saturated = 0;
	g->round_wait_ms = g->round_total_ms = g->round_in_flight = 0;
	memcpy(g->ratio_floor_round, g->ratio_floor, sizeof(g->ratio_floor_round));
}

/* Nothing known of where the server stops holding, nothing draining. */
static void forget_ceiling(struct gradient *g)
{
	g->ceiling = 0;
	g->backoff = GRADIENT_BACKOFF_MIN;
	g->old_left = 0;
	g->drained_ms = INT64_MIN;
}

void gradient_init(struct gradient *g, const struct gradient_params *params, int64_t now_ms)
{
	memset(g, 0, sizeof(*g));
	set_params(g, params);
	g->limit = g->p.initial;
	slow_start_begin(&g->ss, now_ms, 0);
	g->step = 1;
	forget_ceiling(g);
	g->last_bucket = -1;
	moved(g, now_ms, GRADIENT_WHY_START);
	round_begin(g, now_ms);
	g->round_ms = FIRST_BURST;
}

void gradient_params_of(const struct plan_conf *plan, struct gradient_params *out)
{
	out->min = plan->concurrency.min;
	out->max = plan->max_concurrent;
	out->initial = plan->concurrency.slow_start;
	out->tolerance = plan->concurrency.tolerance;
}

void gradient_reconfigure(struct gradient *g, const struct gradient_params *params, int64_t now_ms)
{
	double was = g->limit;
	set_params(g, params);
	g->limit = clampd(g->limit, g->p.min, g->p.max);
	if (g->limit != was)
		moved(g, now_ms, GRADIENT_WHY_RECONFIGURED);
}

unsigned gradient_limit(const struct gradient *g)
{
	return (unsigned)clampd(floor(g->limit + 1e-9), g->p.min, g->p.max);
}

/* Prompt sizes: < 256 tokens, then one bucket per power of two, the last
 * open-ended. */
static int bucket_of(double prompt_tokens)
{
	double p = isfinite(prompt_tokens) && prompt_tokens > 0 ? prompt_tokens : 0;
	int b = 0;
	for (double edge = 256; p >= edge && b < GRADIENT_BUCKETS - 1; edge *= 2)
		b++;
	return b;
}

/* One sample x into a low-quantile estimate (see FLOOR_Q); waited: x is
 * far above it (a queue), and raises it FLOOR_WAITED times slower, so that
 * a queue that lasts does not become the baseline (Envoy's minRTT drifting
 * up under load, issue 11579), while a real change of the baseline still
 * comes through. */
static void track_low(float *est, uint16_t *n, double x, bool waited)
{
	if (*n < FLOOR_WARMUP) {
		if (*n == 0 || x < *est)
			*est = (float)x;
		(*n)++;
		return;
	}
	double up = FLOOR_RATE * FLOOR_Q / (waited ? FLOOR_WAITED : 1);
	/* From a floor of 0 (a clock that read 0 ms) a ratio could not rise. */
	double e = *est > FLOOR_LEAST ? *est : FLOOR_LEAST;
	*est = (float)(x < e ? e * (1 - FLOOR_RATE * (1 - FLOOR_Q)) : e * (1 + up));
}

static double ewma(double avg, double x, bool first)
{
	return first ? x : (1 - SHOWN_ALPHA) * avg + SHOWN_ALPHA * x;
}

void gradient_on_dispatch(struct gradient *g, int64_t now_ms, size_t in_flight)
{
	(void)now_ms;
	slow_start_sent(&g->ss, in_flight);
}

/* In slow start, the first token (or the whole answer) of a request sent at
 * sent_ms came back, waited or not, with in_flight requests in flight: a
 * round trip of slow_start.h, whose verdict moves the limit. */
static bool ss_back(struct gradient *g, int64_t now_ms, int64_t sent_ms, bool waited,
                    size_t in_flight)
{
	/* The first round is a burst that waits for its own prefills: not
	 * judged (TCP's initial window is not either). */
	bool first = g->round_ms == FIRST_BURST;
	unsigned next = 0;
	enum slow_start_step step =
	    slow_start_back(&g->ss, now_ms, sent_ms, waited && !first, in_flight, &next);
	if (step == SLOW_START_WAIT)
		return false;
	if (first)
		round_begin(g, now_ms);
	double to = fmin((double)next, g->p.max);
	if (step == SLOW_START_END || to <= g->limit)
		return false;
	g->limit = floor(to);
	moved(g, now_ms, GRADIENT_WHY_SLOW_START);
	return true;
}

/* The limit leaves `from` downward at now_ms, with in_flight requests out:
 * `from` is the ceiling, and the requests sent before now drain (gradient.h).
 * A request's time is the last round's; before any round, DRAIN_UNKNOWN_MS. */
static void moved_down(struct gradient *g, int64_t now_ms, double from, size_t in_flight)
{
	g->ceiling = from;
	g->cut_ms = now_ms;
	g->old_left = (unsigned)(in_flight < UINT32_MAX ? in_flight : UINT32_MAX);
	g->drain_by_ms = now_ms + (int64_t)(DRAIN_REQUESTS *
	                                    (g->request_ms > 0 ? g->request_ms : DRAIN_UNKNOWN_MS));
	g->drained_ms = INT64_MAX;
}

/* The one-too-many test starts over (a move: what follows is another
 * limit's). */
static void late_reset(struct gradient *g, int64_t now_ms)
{
	g->late_from_ms = now_ms;
	g->late_n = g->late_of_n = 0;
	g->late_alarm = false;
}

/* One answer sent at the limit (after a drain) into the one-too-many test:
 * late, its first token more than (1 + tolerance / 2) × queue-free. Returns
 * whether the answers so far (LATE_SAMPLE of them, PROBE_SAMPLE under a
 * probe) say that the server holds one request too many. A KV cache one
 * short preempts, recomputes and admits nothing in that step: two first
 * tokens in three come that late, where at the knee a quarter to nearly
 * half do (prefills that meet in a step). */
static bool late_count(struct gradient *g, bool late)
{
	g->late_n++;
	g->late_of_n += late;
	bool probe = g->probe_from > 0;
	if (g->late_n < (probe ? PROBE_SAMPLE : LATE_SAMPLE))
		return false;
	bool too_many = g->late_of_n > (probe ? LATE_SHARE_PROBE : LATE_SHARE) * g->late_n;
	if (!probe)
		g->late_n = g->late_of_n = 0; /* a verdict: the next one on answers to come */
	return too_many;
}

/* The server could not hold the limit: down to `to` (a probe taken back,
 * or one less after the one-too-many test). The next probe of the level
 * left by one waits `backoff` clean rounds, and the one after that
 * BACKOFF_GROWTH times as many, up to GRADIENT_BACKOFF_MAX: a knee probed
 * every few rounds costs the preemptions and the waits of every probe. */
static bool failed_at(struct gradient *g, int64_t now_ms, double to, size_t in_flight, bool probe,
                      enum gradient_why why)
{
	double from = g->limit;
	to = clampd(to, g->p.min, from);
	slow_start_end(&g->ss);
	g->probe_from = 0;
	g->step = 1;
	if (probe && from - to <= 1) {
		g->hold = g->backoff;
		g->backoff = (unsigned)fmin(BACKOFF_GROWTH * g->backoff, GRADIENT_BACKOFF_MAX);
	} else {
		/* A probe of several at once says nothing of the first of them;
		 * a level that held until now (the one-too-many test can be
		 * wrong) is tried again sooner. */
		g->hold = probe ? GRADIENT_HOLD_ROUNDS
		                : (unsigned)fmax(GRADIENT_HOLD_ROUNDS, g->backoff / BACKOFF_GROWTH);
	}
	late_reset(g, now_ms);
	g->queued_rounds = 0;
	moved_down(g, now_ms, from, in_flight);
	round_begin(g, now_ms);
	if (to >= from)
		return false;
	g->limit = to;
	moved(g, now_ms, why);
	return true;
}

/* The probe out is taken back: a queue (or a preemption) showed under it. */
static bool probe_back(struct gradient *g, int64_t now_ms, size_t in_flight, enum gradient_why why)
{
	return failed_at(g, now_ms, g->probe_from, in_flight, true, why);
}

bool gradient_on_first(struct gradient *g, int64_t now_ms, const struct gradient_first *f)
{
	double first_ms = f->first_ms;
	if (!isfinite(first_ms) || first_ms < 0)
		return false;
	int b = bucket_of(f->prompt_tokens);
	/* Judged against the baseline before this sample joins it: a first
	 * sample is its own baseline, and passes. */
	bool waited = g->first_n[b] > 0 &&
	              first_ms > (1 + g->p.tolerance) * g->first_floor_ms[b] + GRADIENT_SLACK_MS;
	track_low(&g->first_floor_ms[b], &g->first_n[b], first_ms, waited);
	g->first_ms = ewma(g->first_ms, first_ms, g->first_ms == 0);
	g->last_bucket = b;
	if (g->probe_from > 0 && f->dispatched_ms >= g->probe_ms) {
		/* A third of enough first tokens (half the limit's worth, 8 at
		 * least: prefills that meet in one step make a few wait at any
		 * load), or a quarter of the limit's worth already. */
		g->probe_firsts++;
		g->probe_waited += waited;
		unsigned enough = (unsigned)fmax(PROBE_FIRSTS_MIN, ceil(g->limit / 2));
		if ((g->probe_firsts >= enough && 3 * g->probe_waited > g->probe_firsts) ||
		    g->probe_waited >= (unsigned)fmax(PROBE_FIRSTS_MIN / 2, ceil(g->limit / 4)))
			return probe_back(g, now_ms, f->in_flight, GRADIENT_WHY_QUEUE);
	}
	return ss_back(g, now_ms, f->dispatched_ms, waited, f->in_flight);
}

/* The round is complete, with in_flight requests still out: its queue, the
 * one-too-many test and a probe's verdict decide (gradient.h). */
static bool round_end(struct gradient *g, int64_t now_ms, size_t in_flight_now)
{
	double in_flight = g->round_in_flight / g->round_n;
	double q = g->round_total_ms > 0 ? in_flight * g->round_wait_ms / g->round_total_ms : 0;
	bool saturated = g->round_saturated > 0;
	bool probed = g->probe_from > 0;
	g->queue = q;
	g->request_ms = g->round_total_ms / g->round_n;
	round_begin(g, now_ms);
	/* A queue long enough to be a change of the server counts at once; a
	 * shorter one when the next round still shows one (over
	 * GRADIENT_GROW_BELOW): a moment in which the machine that runs pacerd
	 * (or the server) was not scheduled delays every first token due
	 * then, as a queue would, but not the next round's. */
	bool queued = (q > GRADIENT_CUT_ABOVE && q >= QUEUE_AT_ONCE) ||
	              (q >= GRADIENT_GROW_BELOW && g->queued_rounds > 0);
	g->queued_rounds = q > GRADIENT_CUT_ABOVE                             ? g->queued_rounds + 1
	                   : q >= GRADIENT_GROW_BELOW && g->queued_rounds > 0 ? g->queued_rounds
	                                                                      : 0;
	if (queued) {
		/* What the server ran: the limit comes down to it, by at least
		 * one and at most by half (one noisy round cannot collapse it),
		 * by two thirds for a queue that no moment of noise makes. */
		double ran = round(in_flight - q);
		double most = q >= 2 * QUEUE_AT_ONCE ? g->limit / 3 : g->limit / 2;
		double to = clampd(ran, fmax(g->p.min, ceil(most)), g->limit - 1);
		/* What it ran is an estimate (the waits of the requests it
		 * preempted count too): the next probe comes soon. */
		g->hold = GRADIENT_HOLD_ROUNDS;
		/* A server that changed this much batches differently: its
		 * queue-free ratio of first token to token moves with the
		 * batch (fewer prefills share a smaller batch's steps), and is
		 * learned again, as from any answer, before the one-too-many
		 * test reads it. */
		if (q >= QUEUE_AT_ONCE)
			g->relearn = RELEARN_ANSWERS;
		g->queued_rounds = 1; /* the next round's queue, if any, is this one's rest */
		slow_start_end(&g->ss);
		g->probe_from = 0;
		g->step = 1;
		late_reset(g, now_ms);
		if (to < g->limit && to >= g->p.min) {
			moved_down(g, now_ms, g->limit, in_flight_now);
			g->limit = to;
			moved(g, now_ms, GRADIENT_WHY_QUEUE);
			return true;
		}
		return false;
	}
	if (probed) {
		/* A probe must leave the server as it found it, for
		 * PROBE_ROUNDS rounds and PROBE_SAMPLE answers at least: a
		 * cache that the probe overfills takes a while to, as its
		 * requests' outputs grow (too many late first tokens take it
		 * back at once: on_sample). */
		if (g->probe_left > 0)
			g->probe_left--;
		if (q >= GRADIENT_GROW_BELOW)
			return failed_at(g, now_ms, g->probe_from, in_flight_now, true,
			                 GRADIENT_WHY_QUEUE);
		if (g->probe_left > 0 || g->late_n < PROBE_SAMPLE)
			return false;
		g->probe_from = 0;
		late_reset(g, now_ms);
		/* A probe of the ceiling that held: the knee moved up (or what
		 * failed there was chance). Below a ceiling, the next probe
		 * waits a while: the knee is near, and a probe past it costs. */
		if (g->ceiling > 0 && g->limit >= g->ceiling)
			g->ceiling = 0;
		else if (g->ceiling > 0 && g->ceiling - g->limit <= NEAR_CEILING)
			g->hold = GRADIENT_HOLD_ROUNDS;
	} else if (g->late_alarm) {
		return failed_at(g, now_ms, g->limit - 1, in_flight_now, false, GRADIENT_WHY_QUEUE);
	} else if (q >= GRADIENT_GROW_BELOW) {
		/* The tolerance band: the knee is here. */
		slow_start_end(&g->ss);
		g->step = 1;
		return false;
	}
	if (!saturated || g->limit >= g->p.max)
		return false;
	if (g->hold > 0) {
		g->hold--;
		return false;
	}
	double next = fmin(g->limit + g->step, g->p.max);
	if (g->ceiling > g->limit)
		next = fmin(next, g->ceiling); /* the level that failed, no further */
	g->probe_from = g->limit;
	g->probe_ms = now_ms;
	g->probe_left = PROBE_ROUNDS;
	g->probe_firsts = g->probe_waited = 0;
	late_reset(g, now_ms);
	g->limit = next;
	/* Faster while nothing above is known to fail (or it is far); one at
	 * a time near a level that did. */
	double most = fmax(1, floor(g->limit / 4));
	if (g->ceiling > 0)
		most = fmin(most, fmax(1, floor((g->ceiling - g->limit) / 2)));
	g->step = (unsigned)fmin(g->step * 2.0, most);
	moved(g, now_ms, GRADIENT_WHY_GROW);
	return true;
}

/* An answer of a request sent at dispatched_ms ended: one fewer of those
 * that were out at the last move down. Once fewer of them are out than the
 * limit (or at drain_by_ms), what is sent goes at the new limit: its waits
 * count again. */
static void drain_count(struct gradient *g, int64_t now_ms, int64_t dispatched_ms)
{
	if (g->drained_ms != INT64_MAX)
		return;
	if (dispatched_ms < g->cut_ms && g->old_left > 0)
		g->old_left--;
	if (g->old_left < gradient_limit(g) || now_ms >= g->drain_by_ms)
		g->drained_ms = now_ms;
}

/* An answer; still_out: the requests out after it. */
static bool on_sample(struct gradient *g, int64_t now_ms, const struct gradient_sample *s,
                      size_t still_out)
{
	if (!isfinite(s->first_ms) || s->first_ms < 0) {
		/* Not a stream: a round trip, nothing more (gradient.h). */
		return ss_back(g, now_ms, s->dispatched_ms, false, s->in_flight);
	}
	if (s->events < 2 || !isfinite(s->stream_ms) || s->stream_ms <= 0)
		return false; /* too short to tell a per-token time */
	/* The per-token time, and a stall: the longest gap, when it is far
	 * longer than the others (a preemption: the engine recomputed). */
	double token_ms = s->stream_ms / s->events;
	double stall_ms = 0;
	if (s->events >= 3 && isfinite(s->max_gap_ms) && s->max_gap_ms > 0 &&
	    s->max_gap_ms < s->stream_ms) {
		double rest = (s->stream_ms - s->max_gap_ms) / (s->events - 1);
		if (rest >= TOKEN_MS_MIN && s->max_gap_ms > GRADIENT_STALL_FACTOR * rest) {
			stall_ms = s->max_gap_ms - rest;
			token_ms = rest;
		}
	}
	if (token_ms < TOKEN_MS_MIN)
		return false;
	int b = bucket_of(s->prompt_tokens);
	double r = s->first_ms / token_ms;
	/* Judged against the baseline before this sample joins it. A first
	 * token late by half the tolerance raises it slowly: a server that
	 * holds one request too many delays most first tokens a little, and
	 * a baseline that rose into them would hide it. */
	bool relearning = g->relearn > 0;
	if (relearning)
		g->relearn--;
	bool late =
	    !relearning && g->ratio_n[b] > 0 && r > (1 + g->p.tolerance / 2) * g->ratio_floor[b];
	track_low(&g->ratio_floor[b], &g->ratio_n[b], r, late);
	if (g->ratio_n[b] >= FLOOR_WARMUP)
		g->ratio_floor[b] = (float)fmax(g->ratio_floor[b],
		                                (1 - FLOOR_ROUND_DROP) * g->ratio_floor_round[b]);
	double over = r - (1 + g->p.tolerance) * g->ratio_floor[b];
	/* The stall is no part of the wait: a moment in which this machine or
	 * the server was not scheduled stalls every stream at once, and would
	 * read as a queue (the one-too-many test reads stalls, below). */
	double wait_ms = over > 0 ? over * token_ms : 0;
	/* A request sent under a probe and preempted: the server could not
	 * hold what the probe added. Taken back (only the probe: a cut on
	 * stalls would feed itself, as the engine preempts the newest, which
	 * are what was sent after the cut). */
	if (stall_ms > 0 && g->probe_from > 0 && s->dispatched_ms >= g->probe_ms)
		return probe_back(g, now_ms, still_out, GRADIENT_WHY_PREEMPTED);

	bool first = g->base_token_n == 0;
	track_low(&g->base_token_ms, &g->base_token_n, token_ms, false);
	g->token_ms = ewma(g->token_ms, token_ms, first);
	g->last_bucket = b;

	/* The one-too-many test reads every answer sent at this limit (a
	 * stream that stalled was preempted): under a probe it takes it back
	 * at once; else the round decides (a queue long enough to cut by more
	 * comes first). */
	if (!relearning && s->dispatched_ms >= g->late_from_ms &&
	    s->dispatched_ms >= g->drained_ms && late_count(g, late || stall_ms > 0)) {
		if (g->probe_from > 0)
			return probe_back(g, now_ms, still_out, GRADIENT_WHY_QUEUE);
		g->late_alarm = true;
	}
	/* Only what was sent since the round began says what this limit does. */
	if (s->dispatched_ms < g->round_ms)
		return false;
	g->round_n++;
	g->round_saturated += s->saturated;
	g->round_wait_ms += wait_ms;
	g->round_total_ms += s->first_ms + s->stream_ms;
	g->round_in_flight += (double)s->in_flight;
	unsigned need = (unsigned)fmax(GRADIENT_ROUND_MIN, ceil(g->limit / 2));
	return g->round_n >= need && round_end(g, now_ms, still_out);
}

bool gradient_on_sample(struct gradient *g, int64_t now_ms, const struct gradient_sample *s)
{
	drain_count(g, now_ms, s->dispatched_ms);
	return on_sample(g, now_ms, s, s->in_flight > 0 ? s->in_flight - 1 : 0);
}

bool gradient_cut(struct gradient *g, int64_t now_ms, unsigned to)
{
	slow_start_end(&g->ss);
	g->probe_from = 0;
	g->hold = GRADIENT_HOLD_ROUNDS;
	g->step = 1;
	g->queued_rounds = 0;
	late_reset(g, now_ms);
	double next = clampd(to, g->p.min, g->p.max);
	if (next >= g->limit)
		return false;
	g->limit = next;
	moved(g, now_ms, GRADIENT_WHY_REFUSAL);
	round_begin(g, now_ms);
	return true;
}

void gradient_restart(struct gradient *g, int64_t now_ms)
{
	g->limit = fmin(g->limit, g->p.initial);
	slow_start_begin(&g->ss, now_ms, 0);
	g->hold = 0;
	g->probe_from = 0;
	g->step = 1;
	g->queued_rounds = 0;
	g->relearn = 0;
	forget_ceiling(g);
	late_reset(g, now_ms);
	moved(g, now_ms, GRADIENT_WHY_IDLE);
	round_begin(g, now_ms);
	g->round_ms = FIRST_BURST;
}

void gradient_view(const struct gradient *g, int64_t now_ms, struct gradient_view *v)
{
	memset(v, 0, sizeof(*v));
	v->limit = gradient_limit(g);
	v->slow_start = g->ss.on;
	v->token_ms = g->token_ms;
	v->base_token_ms = g->base_token_n > 0 ? g->base_token_ms : 0;
	v->first_ms = g->first_ms;
	if (g->last_bucket >= 0 && g->first_n[g->last_bucket] > 0)
		v->base_first_ms = g->first_floor_ms[g->last_bucket];
	v->queue = g->queue;
	v->why = gradient_why_name(g->why);
	v->moved_ago_ms = now_ms - g->moved_ms;
}

const char *gradient_why_name(enum gradient_why why)
{
	static const char *const names[GRADIENT_N_WHY] = {
	    [GRADIENT_WHY_START] = "start",         [GRADIENT_WHY_SLOW_START] = "slow_start",
	    [GRADIENT_WHY_GROW] = "no_queue",       [GRADIENT_WHY_QUEUE] = "server_queue",
	    [GRADIENT_WHY_PREEMPTED] = "preempted", [GRADIENT_WHY_REFUSAL] = "refusal",
	    [GRADIENT_WHY_IDLE] = "idle",           [GRADIENT_WHY_RECONFIGURED] = "reload",
	};
	return (unsigned)why < GRADIENT_N_WHY ? names[why] : "?";
}
