/* SPDX-License-Identifier: Apache-2.0 */
/* learned — pacing learned from rate-limit headers; see learned.h for the model. */
#include "sched/learned.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LEARNED_CHANGE 0.05 /* relative change of C or ρ worth a limit_learned line */

void learned_params_default(struct learned_params *p)
{
	p->margin = 0.95;
	p->proactive_threshold = 0.10;
	p->time_noise_ms = 1000;
	p->forget = 0.8;
}

static bool in_range(double v, double lo, double hi)
{
	return isfinite(v) && v >= lo && v <= hi;
}

static void sanitize_params(struct learned_params *p)
{
	struct learned_params d;
	learned_params_default(&d);
	if (!in_range(p->margin, 1e-6, 1))
		p->margin = d.margin;
	if (!in_range(p->proactive_threshold, 0, 1))
		p->proactive_threshold = d.proactive_threshold;
	if (!in_range(p->time_noise_ms, 0, 1e9))
		p->time_noise_ms = d.time_noise_ms;
	if (!in_range(p->forget, 0, 0.999))
		p->forget = d.forget;
}

void learned_init(struct learned *l, const struct learned_params *p)
{
	memset(l, 0, sizeof(*l));
	if (p)
		l->p = *p;
	else
		learned_params_default(&l->p);
	sanitize_params(&l->p);
	l->shape = LEARNED_UNKNOWN;
	l->thousands = true;
	l->correction = 1;
	l->probe_ms = LEARNED_PROBE_MS;
	gcra_init(&l->pace, 0, 1);
}

const char *learned_shape_name(enum learned_shape s)
{
	switch (s) {
	case LEARNED_CONTINUOUS:
		return "continuous";
	case LEARNED_WINDOW:
		return "window";
	case LEARNED_UNKNOWN:
		break;
	}
	return "unknown";
}

/* Rounding step of the reported remaining: Anthropic rounds to the thousand. */
static double remaining_quantum(const struct learned *l)
{
	return (l->thousands && l->n_obs >= 2 && l->max_remaining >= 1000) ? 1000 : 1;
}

/* A change of remaining larger than rounding can explain. */
static double remaining_noise(const struct learned *l)
{
	double q = remaining_quantum(l);
	return q > 1 ? q : 0.5;
}

/* Units this lane dispatched after the request that carried the newest
 * observation: in flight when it was answered, so its headers can not count them. */
static double spent_since_obs(const struct learned *l)
{
	return fmax(l->cum_cost - l->obs_mark, 0);
}

/* The capacity the proactive threshold refers to: L when sent, else the
 * inferred C, else at least the largest remaining ever reported. */
static double threshold_capacity(const struct learned *l)
{
	if (l->counted) /* a limit without its window says nothing of the bucket */
		return l->capacity;
	if (l->limit > 0 && !l->short_window)
		return l->limit;
	return fmax(l->capacity, l->max_remaining);
}

/* Decides the shape from the previous observation and this one (see learned.h). */
static void classify(struct learned *l, int64_t now_ms, double r_now, int64_t a_now)
{
	double q = l->p.time_noise_ms;
	double noise = remaining_noise(l);
	double dt = (double)(now_ms - l->obs_at_ms);
	double shift = (double)(a_now - l->reset_at_ms);
	bool before_reset = (double)now_ms < (double)l->reset_at_ms - q;
	bool rose = r_now - l->obs_remaining > noise;
	bool fell = l->obs_remaining - r_now > noise;

	if (!before_reset)
		return; /* a reset passed in between: a refill proves nothing */
	if (rose || (fell && shift > q))
		l->shape = LEARNED_CONTINUOUS;
	else if (fell && dt >= 2 * q && fabs(shift) <= q)
		l->shape = LEARNED_WINDOW;
}

static void reset_fit(struct learned *l)
{
	l->s_w = l->s_r = l->s_R = l->s_RR = l->s_rR = 0;
	l->s_dr = l->s_r2 = 0;
	l->rho = 0;
	l->capacity = 0;
}

/* Anchored least squares through (r = 0, R = L): ρ = Σ (L − R)·r / Σ r². */
static void fit_anchored(struct learned *l)
{
	l->capacity = l->limit;
	l->rho = l->s_r2 > 0 ? l->s_dr / l->s_r2 : 0;
}

/* Free least squares into *rho, *cap: the reset regressed on the remaining,
 * r = (C − R) / ρ, not the other way round. A reported remaining is the
 * budget rounded down to its quantum q (a bucket at 0.9 says 0), so the
 * budget's level, and with it the reset, varies within a quantum at one R:
 * that scatter is in r, and regressing R on r would read it as a flatter line
 * (a burst of answers at R = 0 with resets from 905 to 1000 ms made ρ 600
 * times too small). False when the remainings in memory no longer differ by
 * more than their rounding (a steady state: every answer alike): the sums say
 * nothing new. C comes out up to a quantum low for a rounded-down remaining:
 * the safe side. */
static bool free_fit(const struct learned *l, double min_var, double *rho, double *cap)
{
	double mr = l->s_r / l->s_w, mR = l->s_R / l->s_w;
	double var = l->s_RR / l->s_w - mR * mR;
	double cov = l->s_rR / l->s_w - mr * mR;
	if (var <= min_var || var <= 0)
		return false;
	*rho = -var / cov;     /* 1 / the ms a unit takes to come back */
	*cap = mR + *rho * mr; /* the line passes through the means */
	return isfinite(*rho) && *rho > 0 && isfinite(*cap) && *cap > 0;
}

/* Without L: the free fit, or the previous estimate when it says nothing. */
static void fit_free(struct learned *l)
{
	double rho, cap, q = remaining_quantum(l);
	if (free_fit(l, q * q, &rho, &cap)) {
		l->rho = rho;
		l->capacity = cap;
	}
}

/* With L: anchored, unless the budget never came near L and the free fit
 * says it holds far less (a per-minute limit enforced as a small bucket:
 * "300 RPM" that refills 5 per second and holds 5). Then L is only the
 * per-window figure, and anchoring to it would infer a refill 60 times too
 * fast from every short reset. */
static void fit_with_limit(struct learned *l)
{
	double rho, cap, q = remaining_quantum(l);
	bool fit = free_fit(l, q * q, &rho, &cap);
	/* A rough fit: remainings only a unit or two apart, as the first
	 * answers to a burst (4 left, then 3). Each reset carries up to a
	 * unit's time of rounding, so its ρ can be half the true one (or far
	 * above) and its C as low as half the true C: it decides alone only
	 * under half the share (a bucket it puts under L/4 holds under L/2),
	 * and its estimate stands in only until a fit that is not rough. */
	bool was_short = l->short_window;
	bool rough = fit || free_fit(l, q * q / 12, &rho, &cap);
	bool enough = l->n_obs + 1 >= LEARNED_SHORT_MIN_OBS; /* counting this one */
	/* Evidence decides; a steady state (no free fit) keeps the last
	 * decision and estimate: answers that all say "0 left" once the pace
	 * matches the bucket tell nothing about its size. */
	if (l->max_remaining >= LEARNED_SHORT_SHARE * l->limit)
		l->short_window = false;
	else if (fit && enough)
		l->short_window = cap < LEARNED_SHORT_SHARE * l->limit;
	else if (rough && enough && cap < LEARNED_SHORT_SHARE / 2 * l->limit)
		l->short_window = true;
	if (l->short_window) {
		if (fit || (rough && !was_short)) {
			l->rho = rho;
			l->capacity = cap;
		}
		return;
	}
	fit_anchored(l);
}

/* Adds one observation. In the anchored fit a reset under twice its noise is
 * left out: near a full bucket, "reset 1s" rounded up from 60 ms only bounds ρ
 * from below, and a lane paced below ρ sees nothing else, so counting it would
 * drag ρ down further and further. Above that an observation weighs
 * w = r / (r + noise), and displaces the memory of better ones only that much. */
static void fit_add(struct learned *l, double r, double rem)
{
	double f = l->p.forget;
	l->s_w = f * l->s_w + 1;
	l->s_r = f * l->s_r + r;
	l->s_R = f * l->s_R + rem;
	l->s_RR = f * l->s_RR + rem * rem;
	l->s_rR = f * l->s_rR + r * rem;
	if (l->limit > 0 && r > 0 && r >= 2 * l->p.time_noise_ms) {
		double w = r / (r + l->p.time_noise_ms);
		double fe = 1 - (1 - f) * w;
		l->s_dr = fe * l->s_dr + w * (l->limit - rem) * r;
		l->s_r2 = fe * l->s_r2 + w * r * r;
	}
	if (l->limit > 0)
		fit_with_limit(l);
	else
		fit_free(l);
	if (!(isfinite(l->rho) && l->rho > 0)) {
		l->rho = 0;
		l->capacity = l->limit;
	}
}

/* Rate pacing follows ρ only once the budget is known to refill continuously. */
static void update_pace(struct learned *l, int64_t now_ms)
{
	double t = 0;
	if (l->shape == LEARNED_CONTINUOUS && l->rho > 0)
		t = 1.0 / (l->p.margin * l->correction * l->rho);
	gcra_set_rate(&l->pace, now_ms, t, 1);
}

/* ---- counted budgets (learned.h) ---- */

/* Units this lane sent after the newest answer's request, refusals given back. */
static double counted_spent(const struct learned *l)
{
	return fmax(l->cum_cost - l->refunded - l->obs_net, 0);
}

/* The rate a counted budget is paced at: margin × ρ, after 429s' correction. */
static double counted_rate(const struct learned *l)
{
	return l->rho > 0 ? l->p.margin * l->correction * l->rho : 0;
}

/* The shadow bucket's level at t >= its last event: refilled at `rate` up to
 * `full`. */
static double shadow_at(const struct learned *l, double t, double rate, double full)
{
	return fmin(full, l->sh_level + rate * fmax(t - l->sh_at_ms, 0));
}

/* The level forecast at t (learned.h): the shadow; full again (but for what
 * was sent since) at a coarse reset; never below what refilled since the
 * last dispatch, after which the bucket held at least nothing. */
static double counted_level(const struct learned *l, double t, double rate, double full)
{
	double lvl = shadow_at(l, t, rate, full);
	if (l->reset_at_ms > 0 && t >= (double)l->reset_at_ms)
		lvl = fmax(lvl, full - counted_spent(l));
	if (rate > 0 && l->passed)
		lvl = fmax(lvl, fmin(full, rate * fmax(t - (double)l->last_pass_ms, 0)));
	return lvl;
}

/* Moves the shadow to the newest answer (at now_ms), whose request left at
 * o->sent_ms and found `level` after its charge (learned.h). */
static void shadow_anchor(struct learned *l, int64_t now_ms, const struct learned_obs *o,
                          double level)
{
	double rate = counted_rate(l), full = l->capacity;
	if (l->sh_valid && o->has_level_at_send && isfinite(o->level_at_send)) {
		/* The shadow had the same dispatches since: only the level it
		 * started from was off (by a refusal's cost, say). Less is
		 * taken as it comes; more, only as far as the bucket cannot
		 * have filled up meanwhile and lost it (at the highest rate it
		 * may refill, in the most the request was in flight). */
		double d = level - (o->level_at_send + l->sh_shift);
		if (d > 0) {
			double up = l->hi > 0 ? l->hi : 2 * l->rho;
			double flight = fmax((double)now_ms - o->sent_ms, 0);
			d = fmax(0, d - fmax(0, level + up * flight - full));
		}
		double to = fmin(l->sh_level + d, full);
		l->sh_shift += to - l->sh_level; /* the requests still out had it too */
		l->sh_level = to;
		return;
	}
	/* A request sent before the shadow existed: from its answer, every
	 * dispatch since taken at the last (the most a full bucket loses). */
	double at = l->passed ? fmax((double)l->last_pass_ms, o->sent_ms) : o->sent_ms;
	l->sh_level = fmin(full, level + rate * (at - o->sent_ms)) - counted_spent(l);
	l->sh_at_ms = at;
	l->sh_valid = true;
}

/* Fades the bounds with time: rates change (a limit raised or cut). */
static void fade_bounds(struct learned *l, int64_t now_ms)
{
	double dt = (double)(now_ms - l->bounds_at_ms);
	l->bounds_at_ms = now_ms;
	if (!(dt > 0))
		return;
	double d = exp(-dt / LEARNED_COUNT_MEMORY_MS);
	l->lo *= d;
	l->probe_lo *= d;
	l->hi = l->hi > 0 && d > 1e-3 ? l->hi / d : 0; /* long idle: no upper bound left */
	l->s_dy *= d;
	l->s_dt *= d;
}

/* New evidence wins over what it contradicts (a rate that changed, or noise
 * the allowances did not cover). */
static void add_lo(struct learned *l, double lo)
{
	if (!(lo > 0) || !isfinite(lo))
		return;
	if (l->hi > 0 && lo > l->hi)
		l->hi = 0;
	l->lo = fmax(l->lo, lo);
}

static void add_hi(struct learned *l, double hi)
{
	if (!(hi > 0) || !isfinite(hi))
		return;
	if (hi < l->lo)
		l->lo = 0;
	if (hi < l->probe_lo)
		l->probe_lo = 0; /* the probe went past the refill: the counts say so */
	l->hi = l->hi > 0 ? fmin(l->hi, hi) : hi;
}

/* ρ from the bounds and the sums (learned.h). */
static double counted_rho(const struct learned *l)
{
	/* the sums say something once they span a few units and some time */
	double q = remaining_quantum(l);
	double ratio = l->s_dt >= LEARNED_SPAN_MIN_MS && l->s_dy >= 2 * q ? l->s_dy / l->s_dt : 0;
	double lo = fmax(l->lo, l->probe_lo), hi = l->hi, est;
	if (lo > 0 && hi > 0 && hi <= LEARNED_BOUNDS_SPREAD * lo)
		return sqrt(lo * hi); /* the least relative error either way */
	/* Loose bounds: what the provider states (limit / window), else
	 * what the counts showed, within the bounds. */
	est = l->prior > 0 ? l->prior : ratio;
	if (lo > 0)
		est = fmax(est, lo);
	if (hi > 0)
		est = fmin(est, hi);
	return est > 0 && isfinite(est) ? est : 0;
}

/* A run of unclipped answers starts at this one: Y known to within q (0
 * when the request found the bucket full, alone on the wire), nu its order
 * allowance. */
static void run_start(struct learned *l, double sent_ms, double y, double q, double nu)
{
	l->run_open = true;
	l->run_summed = false;
	l->run_sent_ms = sent_ms;
	l->run_y = y;
	l->run_q = q;
	l->run_nu = nu;
}

/* Takes an answer of a counted budget that is the newest (learned.h):
 * bounds from its pairs, the sums, C and ρ. rem is its remaining. */
static void counted_observe(struct learned *l, int64_t now_ms, const struct learned_obs *o,
                            double rem)
{
	double q = remaining_quantum(l);
	double cost = o->cost > 0 && isfinite(o->cost) ? o->cost : 0;
	double net = o->mark - l->refunded;
	double y = rem + net;
	double level = o->refused ? rem : rem + cost; /* before its own charge */
	bool alone = o->alone_ms >= LEARNED_ORDER_GAP_MS;
	double nu = alone ? 0 : fmax(cost, q);
	double cap0 = l->capacity;
	bool first = l->n_obs == 0 || !l->counted;
	double base = rem; /* the level it leaves, at least */

	fade_bounds(l, now_ms);
	if (first || cost <= 0) {
		/* the first answer, or one whose cost is unknown (a token budget
		 * before estimates): it anchors only */
		run_start(l, o->sent_ms, y, q, nu);
	} else {
		double ds = o->sent_ms - l->obs_sent_ms;
		double dm = net - l->obs_net;
		double dy = y - (l->obs_remaining + l->obs_net);
		bool clear = rem + dm + q <= cap0; /* not full at any time since */
		if (clear && ds > 0) {
			/* Along a run the roundings cancel but for its ends: a
			 * run from an exact start ends a rounded count, on
			 * average half a unit above what it says. */
			if (!l->run_summed && l->run_q == 0)
				dy += q / 2;
			l->run_summed = true;
			l->s_dy += dy;
			l->s_dt += ds;
		}
		/* the consecutive pair: a lower bound (its rounding: q each side) */
		if (ds >= LEARNED_SPAN_MIN_MS)
			add_lo(l, (dy - q - 2 * nu) / ds);
		double span = o->sent_ms - l->run_sent_ms;
		if (l->run_open && span >= LEARNED_SPAN_MIN_MS) {
			double dY = y - l->run_y, allow = l->run_nu + nu;
			add_lo(l, (dY - l->run_q - allow) / span);
			if (clear)
				add_hi(l, (dY + q + allow) / span);
		}
		bool found_full = !o->refused && level >= cap0;
		if (!clear || span > LEARNED_RUN_MAX_MS)
			run_start(l, o->sent_ms, y, found_full && alone ? 0 : q, nu);
		/* Held back by the forecast, yet it found the bucket full, by
		 * more than a count's rounding: the pace is below the refill,
		 * and a full bucket says no more than that. Probe upwards, once
		 * a round trip (as TCP does). */
		double sent_level = o->level_at_send + l->sh_shift; /* as corrected since */
		bool paced = o->has_level_at_send &&
		             sent_level <= l->p.proactive_threshold * cap0 + q &&
		             cap0 - (sent_level + cost) > 2 * q;
		if (found_full && paced && l->rho > 0 && o->sent_ms > l->probe_up_ms) {
			l->probe_lo = fmax(l->probe_lo, l->rho * LEARNED_PROBE_UP);
			if (l->hi > 0 && l->probe_lo > l->hi)
				l->hi = 0;
			l->probe_up_ms = l->passed ? (double)l->last_pass_ms : o->sent_ms;
		}
		/* Below the top all along: the previous level, the refill at
		 * the lower bound, less what was sent, is a floor under this
		 * one (within its rounding: it cannot reach R + q). */
		if (clear && alone && ds > 0)
			base = fmax(rem, fmin(rem + 0.999 * q,
			                      l->obs_level + l->p.margin * l->lo * ds - dm));
		/* a probe that showed no refill: wait longer before the next */
		if (l->rho == 0 && ds >= l->probe_ms && dy < q)
			l->probe_ms = fmin(2 * l->probe_ms, LEARNED_PROBE_MAX_MS);
	}
	l->capacity = fmax(l->capacity, level);
	if (!o->no_reset) {
		/* full again by the reset: at least C − R − q units came back by then */
		double by = (double)now_ms + o->reset_ms - o->sent_ms;
		if (by >= LEARNED_SPAN_MIN_MS)
			add_lo(l, (l->capacity - rem - q) / by);
		l->reset_at_ms = now_ms + (int64_t)ceil(o->reset_ms);
	} else {
		l->reset_at_ms = 0;
	}
	if (o->limit > 0 && o->window_ms > 0)
		l->prior = o->limit / o->window_ms;
	l->rho = counted_rho(l);
	if (l->rho > 0)
		l->probe_ms = LEARNED_PROBE_MS;
	l->shape = l->rho > 0 ? LEARNED_CONTINUOUS : LEARNED_UNKNOWN;
	l->obs_net = net;
	l->obs_sent_ms = o->sent_ms;
	l->obs_level = base;
	shadow_anchor(l, now_ms, o, base);
}

/* Until when a counted budget keeps `cost` units back at now_ms (learned.h);
 * with_reserve: also the proactive threshold's units. */
static int64_t counted_ready_at(const struct learned *l, int64_t now_ms, double cost,
                                bool with_reserve)
{
	double rate = counted_rate(l);
	double full = fmax(l->capacity, cost);
	/* The reserve keeps clients from seeing 0 once the pace is known; until
	 * then the last units are what teaches it. */
	double reserve = with_reserve && rate > 0 ? l->p.proactive_threshold * l->capacity : 0;
	double need = fmin(cost + reserve, full);
	if (counted_level(l, (double)now_ms, rate, full) >= need - 1e-9)
		return now_ms;
	double spent = counted_spent(l);
	double t = INFINITY;
	if (rate > 0)
		t = l->sh_at_ms + (need - l->sh_level) / rate;
	if (l->reset_at_ms > 0 && need + spent <= full)
		t = fmin(t, (double)l->reset_at_ms);
	if (rate > 0 && l->passed)
		t = fmin(t, (double)l->last_pass_ms + need / rate);
	/* Nothing says when units come back: a probe, one at a time (answers
	 * still due say more; a second at most, in case they carry nothing). */
	if (!isfinite(t))
		t = fmax(l->obs_sent_ms, l->passed ? (double)l->last_pass_ms : 0) +
		    (spent > 0 ? fmax(l->probe_ms, LEARNED_BLIND_WAIT_MS) : l->probe_ms);
	int64_t at = (int64_t)fmin(ceil(t - 1e-6), 4.6e18);
	return at > now_ms ? at : now_ms;
}

static bool changed(double before, double after)
{
	if (before == after)
		return false;
	if (before == 0 || after == 0)
		return true;
	return fabs(after - before) > LEARNED_CHANGE * fabs(before);
}

static bool obs_valid(const struct learned_obs *o)
{
	return in_range(o->remaining, 0, 1e15) && in_range(o->reset_ms, 0, 1e12) &&
	       in_range(o->limit, 0, 1e15) && isfinite(o->mark);
}

int learned_observe(struct learned *l, int64_t now_ms, const struct learned_obs *o)
{
	if (!obs_valid(o))
		return -1;
	bool counted = l->counted || o->no_reset || o->coarse_reset;
	/* A refusal was never charged: its cost comes off every Y from now on,
	 * and off the newest answer's mark if that one was sent after it. */
	if (counted && o->refused && o->cost > 0 && isfinite(o->cost)) {
		l->refunded += o->cost;
		if (l->counted && l->n_obs > 0 && o->mark <= l->obs_mark)
			l->obs_net -= o->cost;
	}
	if (l->n_obs > 0 && o->mark < l->obs_mark)
		return -1;
	enum learned_shape shape0 = l->shape;
	double limit0 = l->limit, cap0 = threshold_capacity(l), rho0 = l->rho;
	double rem = o->limit > 0 ? fmin(o->remaining, o->limit) : o->remaining;
	int64_t a_now = now_ms + (int64_t)ceil(o->no_reset ? 0 : o->reset_ms);

	if (o->limit > 0 && o->limit != l->limit) {
		if (!counted)
			reset_fit(l); /* a new limit: what was fitted to the old one is void */
		l->limit = o->limit;
	}
	if (fmod(rem, 1000) != 0)
		l->thousands = false;
	if (counted) {
		if (!l->counted)
			reset_fit(l); /* from now on the counts decide */
		counted_observe(l, now_ms, o, rem);
		l->counted = true;
		a_now = l->reset_at_ms;
	} else {
		if (l->n_obs > 0)
			classify(l, now_ms, rem, a_now);
		fit_add(l, o->reset_ms, rem);
	}

	l->unreported = 0;
	l->obs_mark = o->mark;
	l->obs_at_ms = now_ms;
	l->reset_at_ms = a_now;
	l->obs_remaining = rem;
	l->max_remaining = fmax(l->max_remaining, rem);
	l->n_obs++;
	if (rem >= l->p.proactive_threshold * threshold_capacity(l) && rem > 0)
		l->correction += (1 - l->correction) * LEARNED_RECOVERY;
	update_pace(l, now_ms);

	bool ch = l->shape != shape0 || l->limit != limit0 ||
	          changed(cap0, threshold_capacity(l)) || changed(rho0, l->rho);
	return ch ? 1 : 0;
}

static int64_t ceil_ms(double ms)
{
	return (int64_t)fmin(ceil(ms - 1e-6), 4.6e18);
}

/* Remaining units now, counting what this lane sent after the observed request. */
static double remaining_estimate(const struct learned *l)
{
	return l->obs_remaining - spent_since_obs(l);
}

/* Until when rule 1 holds `cost` units at now_ms; now_ms when it does not. A
 * reset is the instant the budget is *full* again: a budget known to refill
 * continuously at ρ has the units for one request much sooner, when the
 * refill since the observation covers what is missing. */
static int64_t hold_until(const struct learned *l, int64_t now_ms, double cost)
{
	if (now_ms >= l->reset_at_ms)
		return now_ms;
	double rem = remaining_estimate(l);
	if (rem >= cost)
		return now_ms;
	if (l->shape == LEARNED_CONTINUOUS && l->rho > 0) {
		/* At the paced rate, not ρ itself: an estimate a few % high
		 * must not send the request before its unit is there. */
		double rate = l->p.margin * l->correction * l->rho;
		int64_t t = ceil_ms((double)l->obs_at_ms + (cost - rem) / rate);
		if (t < l->reset_at_ms)
			return t > now_ms ? t : now_ms;
	}
	return l->reset_at_ms;
}

/* Holding at 0 and spreading below the threshold (rules 1 and 2 of learned.h). */
static int64_t budget_ready_at(const struct learned *l, int64_t now_ms, double cost)
{
	if (now_ms >= l->reset_at_ms)
		return now_ms;
	double rem = remaining_estimate(l);
	if (rem < cost)
		return hold_until(l, now_ms, cost);
	double cap = threshold_capacity(l);
	if (cap <= 0 || rem >= l->p.proactive_threshold * cap)
		return now_ms;
	/* A budget known to refill continuously is paced at its rate by the pace
	 * gate; spreading what is left until the reset (the time to a *full*
	 * bucket) would ignore the refill and crawl. */
	if (gcra_enabled(&l->pace))
		return now_ms;
	/* rem units over the time left, measured from the last dispatch, so the
	 * spacing stays even as units pass: the k-th lands at last + k·span/rem. */
	int64_t ref = l->passed ? l->last_pass_ms : l->obs_at_ms;
	double at = (double)ref + (double)(l->reset_at_ms - ref) * cost / rem;
	int64_t t = ceil_ms(at);
	return t > now_ms ? t : now_ms;
}

/* Whether `cost` units fit in what is left above the proactive threshold:
 * a budget the provider has granted is spent freely down to the threshold,
 * and only then paced at the learned rate (DESIGN §3.4), so that a full
 * bucket is not wasted and the client still never sees it at 0. */
static bool above_threshold(const struct learned *l, int64_t now_ms, double cost)
{
	if (now_ms >= l->reset_at_ms)
		return false;
	double cap = threshold_capacity(l);
	return cap > 0 && remaining_estimate(l) - cost >= l->p.proactive_threshold * cap;
}

int64_t learned_ready_at(const struct learned *l, int64_t now_ms, double cost)
{
	if (l->n_obs == 0)
		return now_ms;
	double c = (isfinite(cost) && cost > 1) ? cost : 1;
	if (l->counted)
		return counted_ready_at(l, now_ms, c, true);
	int64_t at = budget_ready_at(l, now_ms, c);
	if (above_threshold(l, now_ms, c))
		return at;
	int64_t paced = gcra_ready_at(&l->pace, now_ms, c);
	return paced > at ? paced : at;
}

int64_t learned_held_until(const struct learned *l, int64_t now_ms, double cost)
{
	double c = (isfinite(cost) && cost > 1) ? cost : 1;
	if (l->n_obs == 0)
		return now_ms;
	if (l->counted) /* with a rate, ready_at paces: a hold is a wait for a probe */
		return l->rho > 0 ? now_ms : counted_ready_at(l, now_ms, c, false);
	return hold_until(l, now_ms, c);
}

int64_t learned_blind_ready_at(size_t in_flight, int64_t last_dispatch_ms, int64_t now_ms)
{
	if (in_flight < LEARNED_BLIND_MAX)
		return now_ms;
	int64_t until = last_dispatch_ms + LEARNED_BLIND_WAIT_MS;
	return until > now_ms ? until : now_ms;
}

double learned_charge(struct learned *l, int64_t now_ms, double cost)
{
	double c = (isfinite(cost) && cost > 0) ? cost : 0;
	/* Spending headroom costs the pace gate nothing: once the threshold is
	 * reached, pacing starts from now, without a debt from the free part.
	 * (A counted budget is paced by its forecast, not by this gate.) */
	if (l->counted) {
		if (l->pace.tat > (double)now_ms)
			l->pace.tat = (double)now_ms;
		if (l->sh_valid) {
			double rate = counted_rate(l);
			l->sh_level = shadow_at(l, (double)now_ms, rate, fmax(l->capacity, c)) - c;
			l->sh_at_ms = (double)now_ms;
		}
	} else if (l->n_obs > 0 && above_threshold(l, now_ms, c > 1 ? c : 1)) {
		if (l->pace.tat > (double)now_ms)
			l->pace.tat = (double)now_ms;
	} else {
		gcra_charge(&l->pace, now_ms, c);
	}
	l->cum_cost += c;
	l->last_pass_ms = now_ms;
	l->passed = true;
	return l->cum_cost;
}

void learned_unreported(struct learned *l, double mark)
{
	if (!l->counted || l->n_obs == 0 || mark <= l->obs_mark)
		return;
	if (++l->unreported < LEARNED_UNREPORTED_MAX)
		return;
	struct learned_params p = l->p;
	double cum = l->cum_cost;
	int64_t last = l->last_pass_ms;
	bool passed = l->passed;
	learned_init(l, &p);
	l->cum_cost = cum;
	l->last_pass_ms = last;
	l->passed = passed;
}

double learned_shadow_level(const struct learned *l)
{
	/* net of the corrections so far: an answer's own is then what came
	 * after its request left (shadow_anchor) */
	return l->counted && l->sh_valid ? l->sh_level - l->sh_shift : NAN;
}

void learned_on_capacity_signal(struct learned *l, int64_t now_ms, double penalty)
{
	/* A counted budget learns from the refusal's own count instead (its
	 * remaining re-anchors the forecast and bounds ρ from above): another
	 * client's spending shows in the counts, and a refusal sent blind, or
	 * for another budget, says nothing of this one's rate. */
	if (l->counted)
		return;
	l->correction = fmax(l->correction * penalty, LEARNED_PENALTY_FLOOR);
	update_pace(l, now_ms);
}

bool learned_told(struct learned *l, int64_t now_ms, double limit, double window_ms)
{
	if (l->n_obs > 0 || !in_range(limit, 1e-9, 1e15) || !in_range(window_ms, 1, 1e12))
		return false;
	reset_fit(l);
	l->limit = limit;
	l->capacity = limit;
	l->rho = limit / window_ms;
	l->shape = LEARNED_CONTINUOUS;
	/* Empty now, with everything sent so far counted: what is still in flight
	 * reached the provider before this refusal was written, or meets the same
	 * empty budget (and is refused, costing it nothing). */
	l->obs_mark = l->cum_cost;
	l->obs_at_ms = now_ms;
	l->reset_at_ms = now_ms + (int64_t)ceil(window_ms);
	l->obs_remaining = 0;
	l->max_remaining = fmax(l->max_remaining, limit);
	l->thousands = false;
	l->n_obs = 1;
	update_pace(l, now_ms);
	return true;
}

void learned_shift(struct learned *l, double delta_ms)
{
	int64_t d = (int64_t)llround(delta_ms);
	l->obs_at_ms += d;
	if (!(l->counted && l->reset_at_ms == 0))
		l->reset_at_ms += d;
	l->last_pass_ms += d;
	l->bounds_at_ms += d;
	if (isfinite(l->pace.tat))
		l->pace.tat += (double)d;
	l->obs_sent_ms += (double)d;
	l->sh_at_ms += (double)d;
	l->probe_up_ms += (double)d;
	l->run_sent_ms += (double)d;
}

bool learned_age(struct learned *l, int64_t now_ms)
{
	if (l->n_obs == 0)
		return false;
	/* A counted budget's forecast refills at its rate by itself, and is
	 * full again (but for what was sent since) once a coarse reset passed:
	 * counted_level says so at any instant. */
	if (l->counted || l->reset_at_ms > now_ms)
		return true;
	if (!(l->rho > 0))
		return false; /* its count and reset were all it knew */
	/* Full again: the count, and what was sent after it, hold nothing back. */
	l->obs_remaining = threshold_capacity(l);
	l->obs_mark = l->cum_cost;
	l->obs_at_ms = l->reset_at_ms = now_ms;
	return true;
}

void learned_view(const struct learned *l, int64_t now_ms, struct learned_view *v)
{
	memset(v, 0, sizeof(*v));
	v->shape = l->shape;
	v->limit = l->limit;
	v->capacity = l->n_obs ? threshold_capacity(l) : 0;
	v->rate_per_min = l->shape == LEARNED_WINDOW ? 0 : l->rho * 60000.0;
	v->pace_per_min = gcra_enabled(&l->pace) ? 60000.0 / l->pace.t_ms : 0;
	v->remaining = -1;
	v->observations = l->n_obs;
	v->counted = l->counted;
	if (l->counted && l->n_obs) {
		double full = l->capacity;
		v->remaining = fmax(counted_level(l, (double)now_ms, counted_rate(l), full), 0);
		v->reset_in_ms = l->reset_at_ms > now_ms ? l->reset_at_ms - now_ms : 0;
		return;
	}
	if (l->n_obs && now_ms < l->reset_at_ms) {
		v->remaining = fmax(remaining_estimate(l), 0);
		v->reset_in_ms = l->reset_at_ms - now_ms;
	}
}

int learned_summary(const struct learned *l, int64_t now_ms, char *buf, size_t len)
{
	struct learned_view v;
	learned_view(l, now_ms, &v);
	return snprintf(buf, len,
	                "%s capacity=%.0f rate=%.1f/min pace=%.1f/min remaining=%.0f "
	                "reset_in=%lldms%s",
	                learned_shape_name(v.shape), v.capacity, v.rate_per_min, v.pace_per_min,
	                v.remaining, (long long)v.reset_in_ms, v.counted ? " from=counts" : "");
}
