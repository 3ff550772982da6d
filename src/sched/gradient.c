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
/* First tokens of requests sent under a probe that tell whether it found a
 * queue, at least. */
#define PROBE_FIRSTS_MIN 8
/* A per-token time under this (ms) is no per-token time: the answer came in
 * one piece, or faster than the clock tells. */
#define TOKEN_MS_MIN 0.05

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
}

void gradient_init(struct gradient *g, const struct gradient_params *params, int64_t now_ms)
{
	memset(g, 0, sizeof(*g));
	set_params(g, params);
	g->limit = g->p.initial;
	slow_start_begin(&g->ss, now_ms, 0);
	g->step = 1;
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

/* The probe out is taken back: a queue showed under it. */
static bool probe_back(struct gradient *g, int64_t now_ms)
{
	bool move = g->probe_from < g->limit;
	if (move)
		g->limit = g->probe_from;
	g->probe_from = 0;
	g->hold = GRADIENT_HOLD_ROUNDS;
	g->step = 1;
	round_begin(g, now_ms);
	if (move)
		moved(g, now_ms, GRADIENT_WHY_QUEUE);
	return move;
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
			return probe_back(g, now_ms);
	}
	return ss_back(g, now_ms, f->dispatched_ms, waited, f->in_flight);
}

/* The round is complete: its queue decides (gradient.h). */
static bool round_end(struct gradient *g, int64_t now_ms)
{
	double in_flight = g->round_in_flight / g->round_n;
	double q = g->round_total_ms > 0 ? in_flight * g->round_wait_ms / g->round_total_ms : 0;
	bool saturated = g->round_saturated > 0;
	g->queue = q;
	g->probe_from = 0; /* this round was the probe's verdict */
	round_begin(g, now_ms);
	if (q > GRADIENT_CUT_ABOVE) {
		/* What the server ran: the limit comes down to it, by at least
		 * one and at most by half (one noisy round cannot collapse it). */
		double ran = floor(in_flight - q);
		double to = clampd(ran, fmax(g->p.min, ceil(g->limit / 2)), g->limit - 1);
		slow_start_end(&g->ss);
		g->hold = GRADIENT_HOLD_ROUNDS;
		g->step = 1;
		if (to < g->limit && to >= g->p.min) {
			g->limit = to;
			moved(g, now_ms, GRADIENT_WHY_QUEUE);
			return true;
		}
		return false;
	}
	if (q >= GRADIENT_GROW_BELOW) {
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
	g->probe_from = g->limit;
	g->probe_ms = now_ms;
	g->probe_firsts = g->probe_waited = 0;
	g->limit = fmin(g->limit + g->step, g->p.max);
	double most = fmax(1, floor(g->limit / 4));
	g->step = (unsigned)fmin(g->step * 2.0, most);
	moved(g, now_ms, GRADIENT_WHY_GROW);
	return true;
}

bool gradient_on_sample(struct gradient *g, int64_t now_ms, const struct gradient_sample *s)
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
	double over = r - (1 + g->p.tolerance) * g->ratio_floor[b];
	track_low(&g->ratio_floor[b], &g->ratio_n[b], r, g->ratio_n[b] > 0 && over > 0);
	over = r - (1 + g->p.tolerance) * g->ratio_floor[b];
	double wait_ms = (over > 0 ? over * token_ms : 0) + stall_ms;
	/* A request sent under a probe and preempted: the server could not
	 * hold what the probe added. Taken back (only the probe: a cut on
	 * stalls would feed itself, as the engine preempts the newest, which
	 * are what was sent after the cut). */
	if (stall_ms > 0 && g->probe_from > 0 && s->dispatched_ms >= g->probe_ms)
		return probe_back(g, now_ms);

	bool first = g->base_token_n == 0;
	track_low(&g->base_token_ms, &g->base_token_n, token_ms, false);
	g->token_ms = ewma(g->token_ms, token_ms, first);
	g->last_bucket = b;

	/* Only what was sent since the round began says what this limit does. */
	if (s->dispatched_ms < g->round_ms)
		return false;
	g->round_n++;
	g->round_saturated += s->saturated;
	g->round_wait_ms += wait_ms;
	g->round_total_ms += s->first_ms + s->stream_ms;
	g->round_in_flight += (double)s->in_flight;
	unsigned need = (unsigned)fmax(GRADIENT_ROUND_MIN, ceil(g->limit / 2));
	return g->round_n >= need && round_end(g, now_ms);
}

bool gradient_cut(struct gradient *g, int64_t now_ms, unsigned to)
{
	slow_start_end(&g->ss);
	g->probe_from = 0;
	g->hold = GRADIENT_HOLD_ROUNDS;
	g->step = 1;
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
	    [GRADIENT_WHY_REFUSAL] = "refusal",     [GRADIENT_WHY_IDLE] = "idle",
	    [GRADIENT_WHY_RECONFIGURED] = "reload",
	};
	return (unsigned)why < GRADIENT_N_WHY ? names[why] : "?";
}
