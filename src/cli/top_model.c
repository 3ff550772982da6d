/* SPDX-License-Identifier: Apache-2.0 */
/* top_model — the numbers and lines of `pacerd top` (see top_model.h). */
#include "cli/top_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Polls kept for the 429s of the last minute: a poll a second at most
 * (--interval 0.1 keeps 600): beyond the cap the oldest goes first. */
#define WINDOW_MS 60000
#define MAX_SAMPLES 1024

/* The counters of one lane at one poll: enough to compute a rate later
 * without keeping the whole document. */
struct lane_count {
	char id[3 * TOP_NAME_MAX]; /* "provider\nkey\nmodel": unique, sorted for bsearch */
	long long dispatched;
	long long capacity_signals;
};

struct sample {
	int64_t t_ms;
	size_t n;
	struct lane_count *lanes; /* sorted by id */
};

struct top_model {
	struct sample samples[MAX_SAMPLES]; /* a ring, oldest at head */
	size_t head, n_samples;
	struct top_header header;
	struct top_row *rows;
	size_t n_rows;
	enum top_sort sort;
	char error[768];
};

struct top_model *top_model_new(void)
{
	return calloc(1, sizeof(struct top_model));
}

static void sample_clear(struct sample *s)
{
	free(s->lanes);
	memset(s, 0, sizeof(*s));
}

void top_model_free(struct top_model *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < MAX_SAMPLES; i++)
		sample_clear(&m->samples[i]);
	free(m->rows);
	free(m);
}

static struct sample *sample_at(struct top_model *m, size_t i)
{
	return &m->samples[(m->head + i) % MAX_SAMPLES];
}

static void drop_oldest(struct top_model *m)
{
	sample_clear(sample_at(m, 0));
	m->head = (m->head + 1) % MAX_SAMPLES;
	m->n_samples--;
}

/* ---- reading /status ---- */

static long long int_at(const json_t *obj, const char *name)
{
	json_t *v = json_object_get(obj, name);
	if (json_is_integer(v))
		return (long long)json_integer_value(v);
	if (json_is_real(v))
		return (long long)json_real_value(v);
	return 0;
}

static double num_at(const json_t *obj, const char *name)
{
	json_t *v = json_object_get(obj, name);
	return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void str_at(const json_t *obj, const char *name, char *out, size_t len)
{
	const char *s = json_string_value(json_object_get(obj, name));
	snprintf(out, len, "%s", s != NULL ? s : "?");
}

static void lane_id(const struct top_row *r, char *out, size_t len)
{
	snprintf(out, len, "%s\n%s\n%s", r->provider, r->key, r->model);
}

static int count_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lane_count *)a)->id, ((const struct lane_count *)b)->id);
}

/* The lane's counters in s, or NULL when the lane was not there. */
static const struct lane_count *sample_find(const struct sample *s, const char *id)
{
	struct lane_count key = {0};
	snprintf(key.id, sizeof(key.id), "%s", id);
	return bsearch(&key, s->lanes, s->n, sizeof(*s->lanes), count_cmp);
}

/* now - then of a counter, counting from 0 when there is no earlier value or
 * the counter went back (a restarted pacerd). */
static long long counter_delta(long long now, const long long *then)
{
	if (then == NULL || *then > now)
		return now;
	return now - *then;
}

/* The configured requests-per-second gate (the per-minute one as per second
 * when only it is set), else the learned pace: the headers', or on a silent
 * lane the rate probe's once refusals settled it. */
static void row_rate(struct top_row *r, const json_t *lane)
{
	const json_t *gates = json_object_get(lane, "gates");
	double rps = num_at(gates, "max_requests_per_second");
	double rpm = num_at(gates, "max_requests_per_minute");
	const json_t *learned = json_object_get(json_object_get(lane, "learned"), "requests");
	const json_t *probe = json_object_get(lane, "rate_probe");
	r->rate_learned = false;
	if (rps > 0)
		r->rate_per_s = rps;
	else if (rpm > 0)
		r->rate_per_s = rpm / 60.0;
	else if (json_is_object(learned) && num_at(learned, "pace_per_min") > 0) {
		r->rate_per_s = num_at(learned, "pace_per_min") / 60.0;
		r->rate_learned = true;
	} else if (json_is_object(probe) && num_at(probe, "rate_rps") > 0) {
		r->rate_per_s = num_at(probe, "rate_rps");
		r->rate_learned = true;
	} else
		r->rate_per_s = 0;
	r->has_learned = json_is_object(learned);
	if (r->has_learned) {
		r->learned_remaining = num_at(learned, "remaining");
		r->learned_reset_ms = int_at(learned, "reset_in_ms");
	}
}

static void row_from_lane(struct top_row *r, const json_t *lane)
{
	memset(r, 0, sizeof(*r));
	str_at(lane, "provider", r->provider, sizeof(r->provider));
	str_at(lane, "key", r->key, sizeof(r->key));
	const char *model = json_string_value(json_object_get(lane, "model"));
	snprintf(r->model, sizeof(r->model), "%s", model != NULL ? model : "-");
	str_at(lane, "plan", r->plan, sizeof(r->plan));
	str_at(lane, "state", r->state, sizeof(r->state));
	r->restored = json_is_true(json_object_get(lane, "restored"));
	r->slow_start = json_is_true(json_object_get(lane, "slow_start"));
	r->restored_age_ms = int_at(lane, "restored_age_ms");
	r->queue_depth = int_at(lane, "queue_depth");
	r->queue_eta_ms = int_at(lane, "queue_eta_ms");
	r->in_flight = int_at(lane, "in_flight");
	r->concurrency_limit = int_at(lane, "concurrency_limit");
	const json_t *conc = json_object_get(lane, "concurrency");
	const char *mode = json_string_value(json_object_get(conc, "mode"));
	r->gradient = mode != NULL && strcmp(mode, "gradient") == 0;
	if (r->gradient) {
		str_at(conc, "why", r->limit_by, sizeof(r->limit_by));
		r->token_ms = num_at(conc, "token_ms");
		r->base_token_ms = num_at(conc, "token_ms_baseline");
		r->first_ms = num_at(conc, "first_token_ms");
		r->base_first_ms = num_at(conc, "first_token_ms_baseline");
	} else {
		snprintf(r->limit_by, sizeof(r->limit_by), "%s", mode != NULL ? mode : "-");
	}
	const json_t *counters = json_object_get(lane, "counters");
	r->dispatched = int_at(counters, "dispatched");
	r->capacity_signals = int_at(counters, "capacity_signals");
	row_rate(r, lane);
}

/* Rates of every row against the previous poll (prev, elapsed_s) and the
 * oldest poll of the last minute (minute). Either may be NULL. */
static void rows_rates(struct top_model *m, const struct sample *prev, double elapsed_s,
                       const struct sample *minute)
{
	double total = 0;
	for (size_t i = 0; i < m->n_rows; i++) {
		struct top_row *r = &m->rows[i];
		char id[3 * TOP_NAME_MAX];
		lane_id(r, id, sizeof(id));
		if (prev != NULL && elapsed_s > 0) {
			const struct lane_count *p = sample_find(prev, id);
			long long d = counter_delta(r->dispatched, p ? &p->dispatched : NULL);
			r->dispatched_per_s = (double)d / elapsed_s;
			total += r->dispatched_per_s;
		}
		if (minute != NULL) {
			const struct lane_count *p = sample_find(minute, id);
			r->signals_last_min =
			    counter_delta(r->capacity_signals, p ? &p->capacity_signals : NULL);
		}
	}
	m->header.req_per_s = total;
	m->header.have_rate = prev != NULL && elapsed_s > 0;
}

static int sample_from_rows(struct sample *s, const struct top_model *m, int64_t now_ms)
{
	s->t_ms = now_ms;
	s->n = m->n_rows;
	s->lanes = calloc(m->n_rows ? m->n_rows : 1, sizeof(*s->lanes));
	if (s->lanes == NULL)
		return -1;
	for (size_t i = 0; i < m->n_rows; i++) {
		lane_id(&m->rows[i], s->lanes[i].id, sizeof(s->lanes[i].id));
		s->lanes[i].dispatched = m->rows[i].dispatched;
		s->lanes[i].capacity_signals = m->rows[i].capacity_signals;
	}
	qsort(s->lanes, s->n, sizeof(*s->lanes), count_cmp);
	return 0;
}

static void header_from_status(struct top_header *h, const json_t *status, const json_t *lanes)
{
	memset(h, 0, sizeof(*h));
	h->uptime_s = int_at(status, "uptime_s");
	h->in_flight = int_at(status, "in_flight");
	h->lanes = (long long)json_array_size(lanes);
	const json_t *resp = json_object_get(status, "responses");
	h->responses_2xx = int_at(resp, "2xx");
	h->responses_4xx = int_at(resp, "4xx");
	h->responses_5xx = int_at(resp, "5xx");
	const json_t *ws = json_object_get(status, "websockets");
	h->ws_open = int_at(ws, "open");
	h->ws_turns_waiting = int_at(ws, "turns_waiting");
	h->websockets = h->ws_open > 0 || int_at(ws, "opened") > 0;
	const json_t *store = json_object_get(status, "store");
	const char *kind = json_string_value(json_object_get(store, "kind"));
	if (kind != NULL && strcmp(kind, "redis") == 0) {
		bool up = json_is_true(json_object_get(store, "connected"));
		bool fallback = json_is_true(json_object_get(store, "fallback"));
		snprintf(h->store, sizeof(h->store), "store redis %s",
		         up         ? "up"
		         : fallback ? "DOWN (local gates)"
		                    : "DOWN (refusing)");
	}
	size_t i;
	const json_t *lane;
	json_array_foreach(lanes, i, lane)
	{
		h->absorbed_429 += int_at(json_object_get(lane, "counters"), "capacity_signals");
	}
}

/* The oldest poll no older than a minute before now_ms; else the newest
 * (after a long outage: the best baseline there is); NULL before any. */
static const struct sample *minute_baseline(struct top_model *m, int64_t now_ms)
{
	for (size_t i = 0; i < m->n_samples; i++)
		if (sample_at(m, i)->t_ms >= now_ms - WINDOW_MS)
			return sample_at(m, i);
	return m->n_samples > 0 ? sample_at(m, m->n_samples - 1) : NULL;
}

/* Keeps the polls of the last minute, and the newest whatever its age. */
static void prune_samples(struct top_model *m, int64_t now_ms)
{
	while (m->n_samples > 1 && sample_at(m, 0)->t_ms < now_ms - WINDOW_MS)
		drop_oldest(m);
}

int top_model_update(struct top_model *m, const json_t *status, int64_t now_ms, char *err,
                     size_t errlen)
{
	const json_t *lanes = json_object_get(status, "lanes");
	if (!json_is_object(status) || !json_is_array(lanes)) {
		snprintf(err, errlen, "not a /status document (no lanes array)");
		return -1;
	}
	size_t n = json_array_size(lanes);
	struct top_row *rows = calloc(n ? n : 1, sizeof(*rows));
	if (rows == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		row_from_lane(&rows[i], json_array_get(lanes, i));
	free(m->rows);
	m->rows = rows;
	m->n_rows = n;
	header_from_status(&m->header, status, lanes);

	const struct sample *prev = m->n_samples > 0 ? sample_at(m, m->n_samples - 1) : NULL;
	double elapsed_s = prev != NULL ? (double)(now_ms - prev->t_ms) / 1000.0 : 0;
	rows_rates(m, prev, elapsed_s, minute_baseline(m, now_ms));

	if (m->n_samples == MAX_SAMPLES)
		drop_oldest(m);
	if (sample_from_rows(sample_at(m, m->n_samples), m, now_ms) == 0)
		m->n_samples++;
	prune_samples(m, now_ms);
	m->error[0] = '\0';
	top_model_sort(m, m->sort);
	return 0;
}

void top_model_set_error(struct top_model *m, const char *message)
{
	snprintf(m->error, sizeof(m->error), "%s", message);
}

const char *top_model_error(const struct top_model *m)
{
	return m->error;
}

/* ---- sorting ---- */

static int by_key(const struct top_row *a, const struct top_row *b)
{
	int c = strcmp(a->key, b->key);
	return c != 0 ? c : strcmp(a->provider, b->provider);
}

static int by_provider(const struct top_row *a, const struct top_row *b)
{
	int c = strcmp(a->provider, b->provider);
	return c != 0 ? c : strcmp(a->key, b->key);
}

static int by_activity(const struct top_row *a, const struct top_row *b)
{
	if (a->dispatched_per_s != b->dispatched_per_s)
		return a->dispatched_per_s > b->dispatched_per_s ? -1 : 1;
	if (a->in_flight != b->in_flight)
		return a->in_flight > b->in_flight ? -1 : 1;
	return by_provider(a, b);
}

static int by_queue(const struct top_row *a, const struct top_row *b)
{
	if (a->queue_depth != b->queue_depth)
		return a->queue_depth > b->queue_depth ? -1 : 1;
	return by_activity(a, b);
}

typedef int (*row_cmp)(const struct top_row *, const struct top_row *);

static const struct {
	const char *name;
	row_cmp cmp;
} sorts[TOP_N_SORTS] = {
    [TOP_SORT_ACTIVITY] = {"activity", by_activity},
    [TOP_SORT_QUEUE] = {"queue", by_queue},
    [TOP_SORT_KEY] = {"key", by_key},
    [TOP_SORT_PROVIDER] = {"provider", by_provider},
};

/* qsort has no context argument in C11: the comparison of the sort being
 * done. top is single-threaded. */
static row_cmp current_cmp;

static int qsort_rows(const void *a, const void *b)
{
	return current_cmp(a, b);
}

void top_model_sort(struct top_model *m, enum top_sort by)
{
	if ((unsigned)by >= TOP_N_SORTS)
		by = TOP_SORT_ACTIVITY;
	m->sort = by;
	current_cmp = sorts[by].cmp;
	if (m->n_rows > 1)
		qsort(m->rows, m->n_rows, sizeof(*m->rows), qsort_rows);
}

enum top_sort top_model_sort_key(const struct top_model *m)
{
	return m->sort;
}

const char *top_sort_name(enum top_sort by)
{
	return (unsigned)by < TOP_N_SORTS ? sorts[by].name : "?";
}

const struct top_header *top_model_header(const struct top_model *m)
{
	return &m->header;
}

size_t top_model_n_rows(const struct top_model *m)
{
	return m->n_rows;
}

const struct top_row *top_model_row(const struct top_model *m, size_t i)
{
	return i < m->n_rows ? &m->rows[i] : NULL;
}

bool top_model_has_data(const struct top_model *m)
{
	return m->n_samples > 0;
}

/* ---- text ---- */

void top_fit(char *s, size_t width)
{
	if (width >= TOP_LINE_MAX)
		width = TOP_LINE_MAX - 1;
	size_t len = strlen(s);
	if (len <= width)
		return;
	/* Back off continuation bytes (10xxxxxx) to the start of the sequence. */
	while (width > 0 && ((unsigned char)s[width] & 0xC0) == 0x80)
		width--;
	s[width] = '\0';
}

/* "1h02m", "3m05s", "42s": uptime and resets at a glance. */
static void duration(char *out, size_t len, long long ms)
{
	long long s = ms / 1000;
	if (ms < 0)
		snprintf(out, len, "-");
	else if (s >= 3600)
		snprintf(out, len, "%lldh%02lldm", s / 3600, s / 60 % 60);
	else if (s >= 60)
		snprintf(out, len, "%lldm%02llds", s / 60, s % 60);
	else if (ms < 10000 && ms % 1000 != 0)
		snprintf(out, len, "%.1fs", (double)ms / 1000.0);
	else
		snprintf(out, len, "%llds", s);
}

static void rate(char *out, size_t len, const struct top_header *h)
{
	if (h->have_rate)
		snprintf(out, len, "%.1f", h->req_per_s);
	else
		snprintf(out, len, "-");
}

void top_format_header(const struct top_model *m, int line, const char *admin, char *buf,
                       size_t width)
{
	const struct top_header *h = &m->header;
	char up[32], rps[32];
	duration(up, sizeof(up), h->uptime_s * 1000);
	rate(rps, sizeof(rps), h);
	if (line == 0)
		snprintf(buf, TOP_LINE_MAX,
		         "pacerd %s  up %s  in flight %lld  req/s %s  lanes %lld  %s%ssort: %s",
		         admin, up, h->in_flight, rps, h->lanes, h->store, h->store[0] ? "  " : "",
		         top_sort_name(m->sort));
	else if (h->websockets)
		snprintf(buf, TOP_LINE_MAX,
		         "responses 2xx %lld  4xx %lld  5xx %lld  429s absorbed %lld  "
		         "websockets %lld (turns waiting %lld)  (q quit, s sort, arrows scroll)",
		         h->responses_2xx, h->responses_4xx, h->responses_5xx, h->absorbed_429,
		         h->ws_open, h->ws_turns_waiting);
	else
		snprintf(buf, TOP_LINE_MAX,
		         "responses 2xx %lld  4xx %lld  5xx %lld  429s absorbed %lld  "
		         "(q quit, s sort, arrows scroll)",
		         h->responses_2xx, h->responses_4xx, h->responses_5xx, h->absorbed_429);
	top_fit(buf, width);
}

/* One layout for the titles and the rows. The latency controller's columns
 * come last: the limit's reason, then per output token and to the first
 * token, now/queue-free in ms ("-" where refusals alone set the limit). */
#define ROW_FORMAT                                                                                 \
	"%-10.10s %-12.12s %-16.16s %-10.10s %6s %7s %9s %15s %9s %7s %5s %-22.22s %-12.12s %13s " \
	"%13s"

void top_format_columns(char *buf, size_t width)
{
	snprintf(buf, TOP_LINE_MAX, ROW_FORMAT, "PROVIDER", "KEY", "MODEL", "PLAN", "QUEUE", "ETA",
	         "INFLIGHT", "REQ/S (LIMIT)", "REMAINING", "RESET", "429/M", "STATE", "LIMIT BY",
	         "TOKEN ms", "1ST TOKEN ms");
	top_fit(buf, width);
}

/* "17.2/16.4": now / queue-free, ms; "-" without the latency controller. */
static void now_base(char *out, size_t len, bool gradient, double now, double base)
{
	if (!gradient)
		snprintf(out, len, "-");
	else if (now >= 100 || base >= 100)
		snprintf(out, len, "%.0f/%.0f", now, base);
	else
		snprintf(out, len, "%.1f/%.1f", now, base);
}

void top_format_row(const struct top_row *r, char *buf, size_t width)
{
	char queue[24], eta[24], infl[48], reqs[64], remaining[32], reset[24], signals[24];
	char token[48], first[48];
	now_base(token, sizeof(token), r->gradient, r->token_ms, r->base_token_ms);
	now_base(first, sizeof(first), r->gradient, r->first_ms, r->base_first_ms);
	char state[TOP_STATE_MAX + 48], age[24];
	snprintf(queue, sizeof(queue), "%lld", r->queue_depth);
	if (r->queue_depth > 0)
		duration(eta, sizeof(eta), r->queue_eta_ms);
	else
		snprintf(eta, sizeof(eta), "-");
	snprintf(infl, sizeof(infl), "%lld/%lld", r->in_flight, r->concurrency_limit);
	/* "~" marks a learned pace rather than a configured gate. */
	if (r->rate_per_s > 0)
		snprintf(reqs, sizeof(reqs), "%.1f/%s%.1f", r->dispatched_per_s,
		         r->rate_learned ? "~" : "", r->rate_per_s);
	else
		snprintf(reqs, sizeof(reqs), "%.1f", r->dispatched_per_s);
	if (r->has_learned) {
		snprintf(remaining, sizeof(remaining), "%.0f", r->learned_remaining);
		duration(reset, sizeof(reset), r->learned_reset_ms);
	} else {
		snprintf(remaining, sizeof(remaining), "-");
		snprintf(reset, sizeof(reset), "-");
	}
	snprintf(signals, sizeof(signals), "%lld", r->signals_last_min);
	/* What the lane took up at start, until its first answer. */
	if (r->restored) {
		duration(age, sizeof(age), r->restored_age_ms);
		snprintf(state, sizeof(state), "%s, restored %s", r->state, age);
	} else if (r->slow_start) {
		snprintf(state, sizeof(state), "%s, slow start", r->state);
	} else {
		snprintf(state, sizeof(state), "%s", r->state);
	}
	snprintf(buf, TOP_LINE_MAX, ROW_FORMAT, r->provider, r->key, r->model, r->plan, queue, eta,
	         infl, reqs, remaining, reset, signals, state, r->limit_by, token, first);
	top_fit(buf, width);
}

void top_format_summary(const struct top_model *m, time_t wall, char *buf, size_t width)
{
	struct tm tm;
	char when[16] = "";
	if (localtime_r(&wall, &tm) != NULL)
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
	if (m->error[0] != '\0') {
		snprintf(buf, TOP_LINE_MAX, "%s error: %s", when, m->error);
		top_fit(buf, width);
		return;
	}
	const struct top_header *h = &m->header;
	char rps[32];
	rate(rps, sizeof(rps), h);
	int n = snprintf(buf, TOP_LINE_MAX, "%s in_flight %lld req/s %s lanes %lld", when,
	                 h->in_flight, rps, h->lanes);
	/* The busiest lane whatever the sort: the one with most dispatched. */
	const struct top_row *busiest = NULL;
	for (size_t i = 0; i < m->n_rows; i++)
		if (busiest == NULL || by_activity(&m->rows[i], busiest) < 0)
			busiest = &m->rows[i];
	if (busiest != NULL && n > 0 && n < TOP_LINE_MAX)
		snprintf(buf + n, TOP_LINE_MAX - (size_t)n,
		         " busiest %s/%s %.1f/s queue %lld in_flight %lld %s%s", busiest->provider,
		         busiest->key, busiest->dispatched_per_s, busiest->queue_depth,
		         busiest->in_flight, busiest->state,
		         busiest->restored ? " (restored)" : "");
	top_fit(buf, width);
}
