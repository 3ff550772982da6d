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
	if (!obs_valid(o) || (l->n_obs > 0 && o->mark < l->obs_mark))
		return -1;
	enum learned_shape shape0 = l->shape;
	double limit0 = l->limit, cap0 = threshold_capacity(l), rho0 = l->rho;
	double rem = o->limit > 0 ? fmin(o->remaining, o->limit) : o->remaining;
	int64_t a_now = now_ms + (int64_t)ceil(o->reset_ms);

	if (o->limit > 0 && o->limit != l->limit) {
		reset_fit(l); /* a new limit: what was fitted to the old one is void */
		l->limit = o->limit;
	}
	if (fmod(rem, 1000) != 0)
		l->thousands = false;
	if (l->n_obs > 0)
		classify(l, now_ms, rem, a_now);
	fit_add(l, o->reset_ms, rem);

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
	 * reached, pacing starts from now, without a debt from the free part. */
	if (l->n_obs > 0 && above_threshold(l, now_ms, c > 1 ? c : 1)) {
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

void learned_on_capacity_signal(struct learned *l, int64_t now_ms, double penalty)
{
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
	                "reset_in=%lldms",
	                learned_shape_name(v.shape), v.capacity, v.rate_per_min, v.pace_per_min,
	                v.remaining, (long long)v.reset_in_ms);
}
