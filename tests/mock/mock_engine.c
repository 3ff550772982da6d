/* SPDX-License-Identifier: Apache-2.0 */
/* mock_engine.c — the engine mode's HTTP side (mock_engine_sched.h states the model):
 * its configuration, the requests it holds, the step timer that drives the scheduler
 * (mock_engine_sched.c) on the mock's clock, and /_mock/engine (tests/mock/README.md,
 * "Engine mode"). */
#include "mock_engine.h"
#include "mock.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

#define MAX_TENANTS 16
#define MAX_RECORDS 200000
#define SNAP_MS 100
#define MAX_WINDOW_MS 600000L
#define N_SNAPS (MAX_WINDOW_MS / SNAP_MS + 2)
/* A step timer this late (the mock not scheduled) starts the next step from now
 * instead of keeping the schedule: the lost time is not made up in a burst. */
#define REANCHOR_US 20000u

struct engine_cfg {
	bool enabled;
	double base_ms, prefill_ms, decode_ms, scale;
	long kv_tokens, max_batch_tokens, max_seqs;
	long output_min, output_max, seed, window_ms;
};

/* Defaults: BLIS's A100 fit of vLLM (ADAPTIVE.md); a cache of 2,088 blocks, which
 * holds 29 requests of 1,024 prompt tokens and 128 output tokens (the mean of the
 * default output range); vLLM's 2,048-token step budget and 256 sequences. */
static const struct engine_cfg defaults = {
    .enabled = true,
    .base_ms = 16.44,
    .prefill_ms = 0.0478,
    .decode_ms = 0.0182,
    .scale = 1.0,
    .kv_tokens = 33408,
    .max_batch_tokens = 2048,
    .max_seqs = 256,
    .output_min = 1,
    .output_max = 256,
    .seed = 1,
    .window_ms = 10000,
};

enum field_kind { F_BOOL, F_DOUBLE, F_LONG };
struct field {
	const char *name;
	enum field_kind kind;
	size_t off;
	double lo, hi;
};
static const struct field fields[] = {
    {"enabled", F_BOOL, offsetof(struct engine_cfg, enabled), 0, 1},
    {"step_base_ms", F_DOUBLE, offsetof(struct engine_cfg, base_ms), 0, 10000},
    {"prefill_ms_per_token", F_DOUBLE, offsetof(struct engine_cfg, prefill_ms), 0, 100},
    {"decode_ms_per_seq", F_DOUBLE, offsetof(struct engine_cfg, decode_ms), 0, 100},
    {"step_scale", F_DOUBLE, offsetof(struct engine_cfg, scale), 0.01, 1000},
    {"kv_tokens", F_LONG, offsetof(struct engine_cfg, kv_tokens), ENG_BLOCK, 100000000},
    {"max_batch_tokens", F_LONG, offsetof(struct engine_cfg, max_batch_tokens), 1, 1000000},
    {"max_seqs", F_LONG, offsetof(struct engine_cfg, max_seqs), 1, 100000},
    {"output_tokens_min", F_LONG, offsetof(struct engine_cfg, output_min), 1, 1000000},
    {"output_tokens_max", F_LONG, offsetof(struct engine_cfg, output_max), 1, 1000000},
    {"seed", F_LONG, offsetof(struct engine_cfg, seed), 0, 2147483647},
    {"window_ms", F_LONG, offsetof(struct engine_cfg, window_ms), SNAP_MS, MAX_WINDOW_MS},
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

/* One request in the engine. */
struct mock_engine_req {
	struct eng_seq seq; /* the scheduler's view */
	TAILQ_ENTRY(mock_engine_req) live;
	struct mock_req fmt; /* the answer's shape: stream, model, usage, truncation */
	struct evhttp_request *req;
	struct mock_conn *conn;
	struct event *watch;   /* non-stream: the client leaving while nothing is written */
	struct evbuffer *body; /* non-stream: the whole answer, sent at the last token */
	int tenant;
};
TAILQ_HEAD(live_list, mock_engine_req);

enum rec_state { R_FINISHED, R_ABORTED, R_REJECTED };
struct record {
	uint64_t arrival_us, first_us, end_us; /* first_us 0: no token */
	long prompt, output, target, preemptions;
	int tenant;
	enum rec_state state;
};

struct tenant {
	char name[32];
	uint64_t requests, finished, aborted, rejected, output_tokens, preemptions, preempted;
};

/* Cumulative figures every SNAP_MS, for the window averages. */
struct snap {
	uint64_t t_us;
	double waiting_area, running_area; /* requests × ms */
	uint64_t output_tokens, finished, preemptions;
};

static struct engine_cfg cfg;
static bool configured;
static struct eng eng;
static struct live_list live = TAILQ_HEAD_INITIALIZER(live);
static size_t n_live;
static struct event *step_timer, *snap_timer;
static uint64_t step_end_us; /* when the planned step ends, on its schedule */
static uint64_t rng;

/* Counters since the last reset (the scheduler's own totals never reset: their
 * values at the reset are kept). */
static struct {
	uint64_t since_us;
	double busy_ms, lag_max_ms, lag_sum_ms;
	uint64_t lags, reanchors;
	uint64_t eng_output0, eng_preempt0, eng_steps0, eng_prefill0;
	double waiting_area0, running_area0;
	uint64_t finished;
} st;
static struct tenant tenants[MAX_TENANTS];
static int n_tenants = 1; /* tenants[0] is "": requests that name none */
static struct record *records;
static size_t n_records, records_cap;
static struct snap snaps[N_SNAPS];
static size_t snap_head, snap_len;

static struct mock_engine_req *req_of(struct eng_seq *s)
{
	return (struct mock_engine_req *)((char *)s - offsetof(struct mock_engine_req, seq));
}

static double ms_of(uint64_t us)
{
	return (double)us / 1000.0;
}

/* ---------- configuration ---------- */

static void seed_rng(long seed)
{
	rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
}

/* xorshift64*: the output lengths, the same every run of a seed */
static uint64_t next_rand(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

static void apply_params(void)
{
	struct eng_params p = {
	    .base_ms = cfg.base_ms,
	    .prefill_ms = cfg.prefill_ms,
	    .decode_ms = cfg.decode_ms,
	    .scale = cfg.scale,
	    .kv_blocks = cfg.kv_tokens / ENG_BLOCK,
	    .max_batch_tokens = cfg.max_batch_tokens,
	    .max_seqs = cfg.max_seqs,
	};
	eng.p = p;
}

/* The largest sequence in the engine (prompt + output), in blocks. */
static long largest_live_blocks(void)
{
	long m = 0;
	for (const struct mock_engine_req *er = TAILQ_FIRST(&live); er != NULL;
	     er = TAILQ_NEXT(er, live)) {
		long b = eng_blocks(er->seq.prompt + er->seq.target);
		if (b > m)
			m = b;
	}
	return m;
}

static int set_field(struct engine_cfg *c, const struct field *f, json_t *v, char *err,
                     size_t errlen)
{
	char *at = (char *)c + f->off;
	if (f->kind == F_BOOL) {
		if (!json_is_boolean(v))
			goto type;
		bool b = json_is_true(v);
		memcpy(at, &b, sizeof(b));
		return 0;
	}
	if (!json_is_number(v) || (f->kind == F_LONG && !json_is_integer(v)))
		goto type;
	double d = json_number_value(v);
	if (d < f->lo || d > f->hi) {
		snprintf(err, errlen, "engine: %s must be in [%g, %g]", f->name, f->lo, f->hi);
		return -1;
	}
	long n = (long)json_integer_value(v);
	if (f->kind == F_DOUBLE)
		memcpy(at, &d, sizeof(d));
	else
		memcpy(at, &n, sizeof(n));
	return 0;
type:
	snprintf(err, errlen, "engine: %s must be %s", f->name,
	         f->kind == F_BOOL     ? "true or false"
	         : f->kind == F_DOUBLE ? "a number"
	                               : "an integer");
	return -1;
}

static void on_snap(evutil_socket_t fd, short what, void *arg);
static void on_step(evutil_socket_t fd, short what, void *arg);

int mock_engine_configure(const char *json, size_t len, char *err, size_t errlen)
{
	json_t *j = json_loadb(json, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		snprintf(err, errlen, "engine: the configuration must be a JSON object");
		return -1;
	}
	struct engine_cfg c = configured ? cfg : defaults;
	const char *k;
	json_t *v;
	int rc = 0;
	json_object_foreach(j, k, v)
	{
		size_t i = 0;
		while (i < N_FIELDS && strcmp(k, fields[i].name) != 0)
			i++;
		if (i == N_FIELDS) {
			snprintf(err, errlen, "engine: unknown field %s", k);
			rc = -1;
		} else {
			rc = set_field(&c, &fields[i], v, err, errlen);
		}
		if (rc != 0)
			break;
	}
	bool reseed = json_object_get(j, "seed") != NULL || !configured;
	json_decref(j);
	if (rc != 0)
		return -1;
	if (c.output_min > c.output_max) {
		snprintf(err, errlen, "engine: output_tokens_min > output_tokens_max");
		return -1;
	}
	if (c.max_seqs > c.max_batch_tokens) {
		/* each running sequence needs a token of the step's budget, or it starves */
		snprintf(err, errlen, "engine: max_seqs > max_batch_tokens");
		return -1;
	}
	if (c.kv_tokens / ENG_BLOCK < largest_live_blocks()) {
		snprintf(err, errlen, "engine: kv_tokens smaller than a request in the engine");
		return -1;
	}
	if (!configured) {
		struct eng_params p = {0};
		eng_init(&eng, &p, mock_now_us());
		step_timer = evtimer_new(mock_base, on_step, NULL);
		snap_timer = event_new(mock_base, -1, EV_PERSIST, on_snap, NULL);
		struct timeval tv = {0, SNAP_MS * 1000};
		if (step_timer == NULL || snap_timer == NULL || event_add(snap_timer, &tv) != 0) {
			snprintf(err, errlen, "engine: out of memory");
			return -1;
		}
		st.since_us = mock_now_us();
	}
	cfg = c;
	configured = true;
	if (reseed)
		seed_rng(cfg.seed);
	apply_params();
	return 0;
}

bool mock_engine_enabled(void)
{
	return configured && cfg.enabled;
}

long mock_engine_output_tokens(struct evhttp_request *req, long max_tokens, bool *truncated)
{
	const char *h =
	    evhttp_find_header(evhttp_request_get_input_headers(req), "x-mock-output-tokens");
	long n;
	if (h == NULL || mock_parse_long(h, 1, 1000000, &n) != 0) {
		uint64_t span = (uint64_t)(cfg.output_max - cfg.output_min) + 1;
		n = cfg.output_min + (long)(next_rand() % span);
	}
	*truncated = max_tokens > 0 && max_tokens < n;
	return *truncated ? max_tokens : n;
}

/* ---------- counters ---------- */

/* The time integrals of the queue and the batch since the reset, up to now. */
static double waiting_area(uint64_t now)
{
	eng_advance(&eng, now);
	return eng.waiting_area_ms - st.waiting_area0;
}

static double running_area(uint64_t now)
{
	eng_advance(&eng, now);
	return eng.running_area_ms - st.running_area0;
}

static void on_snap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	uint64_t now = mock_now_us();
	struct snap s = {now,
	                 waiting_area(now),
	                 running_area(now),
	                 eng.output_tokens - st.eng_output0,
	                 st.finished,
	                 eng.preemptions - st.eng_preempt0};
	snaps[(snap_head + snap_len) % N_SNAPS] = s;
	if (snap_len < N_SNAPS)
		snap_len++;
	else
		snap_head = (snap_head + 1) % N_SNAPS;
}

static int tenant_of(struct evhttp_request *req)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "x-mock-tenant");
	if (h == NULL || *h == '\0')
		return 0;
	for (int i = 1; i < n_tenants; i++)
		if (strcmp(tenants[i].name, h) == 0)
			return i;
	if (n_tenants == MAX_TENANTS || strlen(h) >= sizeof(tenants[0].name))
		return 0;
	snprintf(tenants[n_tenants].name, sizeof(tenants[0].name), "%s", h);
	return n_tenants++;
}

static void record(const struct mock_engine_req *er, enum rec_state state, uint64_t now)
{
	struct tenant *t = &tenants[er->tenant];
	if (state == R_FINISHED) {
		t->finished++;
		st.finished++;
		if (er->seq.preemptions > 0)
			t->preempted++;
	} else if (state == R_ABORTED) {
		t->aborted++;
	} else {
		t->rejected++;
	}
	if (n_records == records_cap) {
		if (records_cap == MAX_RECORDS)
			return;
		size_t n = records_cap ? records_cap * 2 : 1024;
		struct record *r =
		    realloc(records, (n > MAX_RECORDS ? MAX_RECORDS : n) * sizeof(*r));
		if (r == NULL)
			return;
		records = r;
		records_cap = n > MAX_RECORDS ? MAX_RECORDS : n;
	}
	records[n_records++] = (struct record){
	    .arrival_us = er->seq.arrival_us,
	    .first_us = er->seq.first_us,
	    .end_us = now,
	    .prompt = er->seq.prompt,
	    .output = er->seq.generated,
	    .target = er->seq.target,
	    .preemptions = er->seq.preemptions,
	    .tenant = er->tenant,
	    .state = state,
	};
}

/* ---------- requests ---------- */

static void free_req(struct mock_engine_req *er)
{
	TAILQ_REMOVE(&live, er, live);
	n_live--;
	if (er->watch != NULL)
		event_free(er->watch);
	if (er->body != NULL)
		evbuffer_free(er->body);
	if (er->conn != NULL)
		er->conn->engine = NULL;
	mock_limits_release(er->fmt.key);
	if (mock_stats.in_flight > 0)
		mock_stats.in_flight--;
	free(er);
}

/* Plans the next step, from t0 (the end of the previous one on its schedule, or
 * now), and arms the timer for its end; nothing to do: the engine idles. */
static void start_step(uint64_t t0, uint64_t now)
{
	double ms = eng_plan(&eng, now);
	if (ms <= 0)
		return;
	st.busy_ms += ms;
	step_end_us = t0 + (uint64_t)(ms * 1000.0 + 0.5);
	uint64_t wait = step_end_us > now ? step_end_us - now : 0;
	struct timeval tv = {(time_t)(wait / 1000000u), (suseconds_t)(wait % 1000000u)};
	evtimer_add(step_timer, &tv);
}

static void on_token(struct eng_seq *s, bool done, void *arg)
{
	struct mock_engine_req *er = req_of(s);
	uint64_t now = *(const uint64_t *)arg;
	bool first = s->generated == 1;
	tenants[er->tenant].output_tokens++;
	struct evhttp_request *req = er->req;
	if (er->fmt.streaming) {
		struct evbuffer *b = evbuffer_new();
		if (first)
			mock_stream_head(b, &er->fmt);
		mock_stream_content(b, &er->fmt);
		if (done)
			mock_stream_tail(b, &er->fmt);
		evhttp_send_reply_chunk(req, b);
		evbuffer_free(b);
	}
	if (!done)
		return;
	record(er, R_FINISHED, now);
	tenants[er->tenant].preemptions += (uint64_t)er->seq.preemptions;
	/* evhttp may free the connection inside the last send: nothing of ours may point
	 * at the request then */
	if (er->fmt.streaming) {
		mock_stats.streams_completed++;
		free_req(er);
		evhttp_send_reply_end(req);
		return;
	}
	struct evbuffer *body = er->body;
	er->body = NULL;
	free_req(er);
	evhttp_send_reply(req, 200, NULL, body);
	mock_count_response(200);
	evbuffer_free(body);
}

static void on_step(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	uint64_t now = mock_now_us();
	double lag = now > step_end_us ? ms_of(now - step_end_us) : 0;
	st.lag_sum_ms += lag;
	st.lags++;
	if (lag > st.lag_max_ms)
		st.lag_max_ms = lag;
	eng_end(&eng, now, on_token, &now);
	uint64_t t0 = step_end_us;
	if (now - step_end_us > REANCHOR_US && now > step_end_us) {
		t0 = now;
		st.reanchors++;
	}
	start_step(t0, now);
}

/* The client left before the answer's status line (non-stream). */
static void on_watch(evutil_socket_t fd, short what, void *arg)
{
	struct mock_engine_req *er = arg;
	(void)fd;
	(void)what;
	evhttp_connection_free(er->conn->evcon); /* runs mock_engine_conn_closed */
}

static void reject(struct evhttp_request *req, const struct mock_req *tmpl, int tenant)
{
	struct evbuffer *b = mock_error_body(
	    false, "invalid_request_error", NULL,
	    "This model's maximum context length is smaller than the prompt and its output.", NULL,
	    "");
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	evhttp_remove_header(oh, "Content-Type");
	evhttp_add_header(oh, "Content-Type", "application/json");
	evhttp_send_reply(req, 400, NULL, b);
	evbuffer_free(b);
	mock_count_response(400);
	mock_limits_release(tmpl->key);
	if (mock_stats.in_flight > 0)
		mock_stats.in_flight--;
	tenants[tenant].requests++;
	tenants[tenant].rejected++;
}

bool mock_engine_submit(struct evhttp_request *req, long prompt, long output,
                        const struct mock_req *tmpl, struct evbuffer *body)
{
	struct mock_conn *conn = mock_conn_of(req);
	if (conn == NULL || conn->cur != NULL || conn->engine != NULL)
		return false;
	int tenant = tenant_of(req);
	long target = output > 0 ? output : 1;
	if (prompt < 1)
		prompt = 1; /* a sequence with nothing to compute would never start */
	if (eng_blocks(prompt + target) > eng.p.kv_blocks) {
		evbuffer_drain(body, evbuffer_get_length(body));
		reject(req, tmpl, tenant);
		return true;
	}
	struct mock_engine_req *er = calloc(1, sizeof(*er));
	if (er == NULL)
		return false;
	uint64_t now = mock_now_us();
	er->seq.prompt = prompt;
	er->seq.target = target;
	er->fmt = *tmpl;
	er->req = req;
	er->conn = conn;
	er->tenant = tenant;
	if (tmpl->streaming) {
		/* the status line at once, as a Starlette server sends it */
		evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control",
		                  "no-cache");
		evhttp_send_reply_start(req, 200, NULL);
		mock_count_response(200);
		er->fmt.started = true;
	} else {
		er->body = evbuffer_new();
		er->watch = event_new(mock_base, conn->fd, EV_CLOSED | EV_PERSIST, on_watch, er);
		if (er->body == NULL || er->watch == NULL) {
			if (er->body != NULL)
				evbuffer_free(er->body);
			if (er->watch != NULL)
				event_free(er->watch);
			free(er);
			return false;
		}
		evbuffer_add_buffer(er->body, body);
		event_add(er->watch, NULL);
	}
	conn->engine = er;
	TAILQ_INSERT_TAIL(&live, er, live);
	n_live++;
	tenants[tenant].requests++;
	eng_arrive(&eng, &er->seq, now);
	if (!eng.planned)
		start_step(now, now);
	return true;
}

void mock_engine_conn_closed(struct mock_engine_req *er)
{
	struct evhttp_request *req = er->req;
	uint64_t now = mock_now_us();
	eng_remove(&eng, &er->seq, now);
	record(er, R_ABORTED, now);
	tenants[er->tenant].preemptions += (uint64_t)er->seq.preemptions;
	if (er->fmt.streaming)
		mock_stats.streams_aborted++;
	/* evhttp detaches a request the client abandoned and leaves it to us; a request
	 * still attached is freed with the connection */
	bool detached = evhttp_request_get_connection(req) == NULL;
	er->conn = NULL;
	free_req(er);
	if (detached)
		evhttp_send_reply_end(req);
}

/* ---------- /_mock/engine ---------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v. */
static double pct(const double *v, size_t n, double p)
{
	size_t r = (size_t)(p / 100.0 * (double)n + 0.999999);
	return v[r == 0 ? 0 : (r > n ? n : r) - 1];
}

static json_t *ttft_json(void)
{
	size_t n = 0;
	double *v = malloc((n_records + n_live + 1) * sizeof(*v));
	if (v == NULL)
		return json_null();
	for (size_t i = 0; i < n_records; i++)
		if (records[i].first_us != 0 && records[i].arrival_us >= st.since_us)
			v[n++] = ms_of(records[i].first_us - records[i].arrival_us);
	for (const struct mock_engine_req *er = TAILQ_FIRST(&live); er != NULL;
	     er = TAILQ_NEXT(er, live))
		if (er->seq.first_us != 0 && er->seq.arrival_us >= st.since_us)
			v[n++] = ms_of(er->seq.first_us - er->seq.arrival_us);
	json_t *j;
	if (n == 0) {
		j = json_pack("{s:i}", "n", 0);
	} else {
		qsort(v, n, sizeof(*v), cmp_double);
		double sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += v[i];
		j = json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:f}", "n", (json_int_t)n, "min", v[0],
		              "p50", pct(v, n, 50), "p90", pct(v, n, 90), "p99", pct(v, n, 99),
		              "max", v[n - 1], "mean", sum / (double)n);
	}
	free(v);
	return j;
}

/* Averages over the last window_ms (or since the reset, when younger). */
static json_t *window_json(uint64_t now)
{
	uint64_t from =
	    now > (uint64_t)cfg.window_ms * 1000u ? now - (uint64_t)cfg.window_ms * 1000u : 0;
	struct snap base = {st.since_us, 0, 0, 0, 0, 0};
	for (size_t i = 0; i < snap_len; i++) {
		const struct snap *s = &snaps[(snap_head + i) % N_SNAPS];
		if (s->t_us > from)
			break;
		if (s->t_us >= st.since_us)
			base = *s;
	}
	double span = base.t_us < now ? ms_of(now - base.t_us) : 0;
	if (span <= 0)
		return json_pack("{s:f}", "ms", 0.0);
	return json_pack(
	    "{s:f,s:f,s:f,s:f,s:f,s:I}", "ms", span, "waiting_avg",
	    (waiting_area(now) - base.waiting_area) / span, "running_avg",
	    (running_area(now) - base.running_area) / span, "output_tokens_per_s",
	    (double)(eng.output_tokens - st.eng_output0 - base.output_tokens) * 1000.0 / span,
	    "requests_per_s", (double)(st.finished - base.finished) * 1000.0 / span, "preemptions",
	    (json_int_t)(eng.preemptions - st.eng_preempt0 - base.preemptions));
}

static json_t *config_json(void)
{
	json_t *c = json_object();
	for (size_t i = 0; i < N_FIELDS; i++) {
		const char *at = (const char *)&cfg + fields[i].off;
		json_t *v;
		if (fields[i].kind == F_BOOL) {
			bool b;
			memcpy(&b, at, sizeof(b));
			v = json_boolean(b);
		} else if (fields[i].kind == F_DOUBLE) {
			double d;
			memcpy(&d, at, sizeof(d));
			v = json_real(d);
		} else {
			long n;
			memcpy(&n, at, sizeof(n));
			v = json_integer(n);
		}
		json_object_set_new(c, fields[i].name, v);
	}
	return c;
}

static json_t *stats_json(void)
{
	uint64_t now = mock_now_us();
	json_t *ts = json_object();
	uint64_t requests = 0, finished = 0, aborted = 0, rejected = 0, preempted = 0;
	for (int i = 0; i < n_tenants; i++) {
		const struct tenant *t = &tenants[i];
		requests += t->requests;
		finished += t->finished;
		aborted += t->aborted;
		rejected += t->rejected;
		preempted += t->preempted;
		json_object_set_new(
		    ts, t->name,
		    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "requests", (json_int_t)t->requests,
		              "finished", (json_int_t)t->finished, "aborted",
		              (json_int_t)t->aborted, "rejected", (json_int_t)t->rejected,
		              "output_tokens", (json_int_t)t->output_tokens, "preemptions",
		              (json_int_t)t->preemptions, "preempted_requests",
		              (json_int_t)t->preempted));
	}
	json_t *j = json_pack(
	    "{s:b,s:o,s:f,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f}",
	    "enabled", cfg.enabled, "config", config_json(), "t_ms", ms_of(now), "since_ms",
	    ms_of(st.since_us), "waiting", (json_int_t)eng.n_waiting, "running",
	    (json_int_t)eng.n_running, "kv_blocks", (json_int_t)eng.p.kv_blocks, "kv_blocks_used",
	    (json_int_t)eng.blocks_used, "requests", (json_int_t)requests, "finished",
	    (json_int_t)finished, "aborted", (json_int_t)aborted, "rejected", (json_int_t)rejected,
	    "preemptions", (json_int_t)(eng.preemptions - st.eng_preempt0), "preempted_requests",
	    (json_int_t)preempted, "output_tokens",
	    (json_int_t)(eng.output_tokens - st.eng_output0), "prefill_tokens",
	    (json_int_t)(eng.prefill_tokens - st.eng_prefill0), "steps",
	    (json_int_t)(eng.steps - st.eng_steps0), "busy_ms", st.busy_ms, "waiting_area_ms",
	    waiting_area(now), "running_area_ms", running_area(now));
	json_object_set_new(j, "step_lag_ms",
	                    json_pack("{s:f,s:f,s:I}", "max", st.lag_max_ms, "mean",
	                              st.lags ? st.lag_sum_ms / (double)st.lags : 0.0, "reanchors",
	                              (json_int_t)st.reanchors));
	json_object_set_new(j, "window", window_json(now));
	json_object_set_new(j, "ttft_ms", ttft_json());
	json_object_set_new(j, "tenants", ts);
	return j;
}

static json_t *ms_or_null(uint64_t us)
{
	return us != 0 ? json_real(ms_of(us)) : json_null();
}

static json_t *rec_json(const char *tenant, uint64_t arrival, uint64_t first, uint64_t end,
                        long prompt, long output, long target, long preemptions, const char *state)
{
	return json_pack("{s:s,s:s,s:f,s:o,s:o,s:I,s:I,s:I,s:I}", "tenant", tenant, "state", state,
	                 "arrival_ms", ms_of(arrival), "first_token_ms", ms_or_null(first),
	                 "end_ms", ms_or_null(end), "prompt_tokens", (json_int_t)prompt,
	                 "output_tokens", (json_int_t)output, "target_tokens", (json_int_t)target,
	                 "preemptions", (json_int_t)preemptions);
}

static json_t *requests_json(void)
{
	static const char *const names[] = {"finished", "aborted", "rejected"};
	json_t *a = json_array();
	for (size_t i = 0; i < n_records; i++) {
		const struct record *r = &records[i];
		json_array_append_new(a, rec_json(tenants[r->tenant].name, r->arrival_us,
		                                  r->first_us, r->end_us, r->prompt, r->output,
		                                  r->target, r->preemptions, names[r->state]));
	}
	for (const struct mock_engine_req *er = TAILQ_FIRST(&live); er != NULL;
	     er = TAILQ_NEXT(er, live)) {
		json_array_append_new(
		    a, rec_json(tenants[er->tenant].name, er->seq.arrival_us, er->seq.first_us, 0,
		                er->seq.prompt, er->seq.generated, er->seq.target,
		                er->seq.preemptions, er->seq.running ? "running" : "waiting"));
	}
	return a;
}

static void send_json(struct evhttp_request *req, int status, json_t *j)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
	json_decref(j);
	struct evbuffer *b = evbuffer_new();
	if (s != NULL)
		evbuffer_add(b, s, strlen(s));
	free(s);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	                  "application/json");
	evhttp_send_reply(req, status, NULL, b);
	evbuffer_free(b);
}

bool mock_engine_admin(struct evhttp_request *req, const char *path)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	if (strcmp(path, "/_mock/engine/requests") == 0 && m == EVHTTP_REQ_GET) {
		send_json(req, 200, configured ? requests_json() : json_array());
		return true;
	}
	if (strcmp(path, "/_mock/engine") != 0)
		return false;
	if (m == EVHTTP_REQ_GET) {
		send_json(req, 200, configured ? stats_json() : json_pack("{s:b}", "enabled", 0));
		return true;
	}
	struct evbuffer *b = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(b);
	const char *p = (const char *)evbuffer_pullup(b, -1);
	char err[256];
	if (mock_engine_configure(p ? p : "", len, err, sizeof(err)) != 0) {
		send_json(req, 400, json_pack("{s:b,s:s}", "ok", 0, "error", err));
		return true;
	}
	/* a larger cache or a faster step may let waiting requests in at once */
	if (!eng.planned && eng.n_waiting > 0)
		start_step(mock_now_us(), mock_now_us());
	send_json(req, 200, json_pack("{s:b}", "ok", 1));
	return true;
}

void mock_engine_reset(void)
{
	if (!configured)
		return;
	uint64_t now = mock_now_us();
	memset(&st, 0, sizeof(st));
	st.since_us = now;
	eng_advance(&eng, now);
	st.waiting_area0 = eng.waiting_area_ms;
	st.running_area0 = eng.running_area_ms;
	st.eng_output0 = eng.output_tokens;
	st.eng_preempt0 = eng.preemptions;
	st.eng_steps0 = eng.steps;
	st.eng_prefill0 = eng.prefill_tokens;
	for (int i = 0; i < n_tenants; i++) {
		char name[sizeof(tenants[0].name)];
		memcpy(name, tenants[i].name, sizeof(name));
		memset(&tenants[i], 0, sizeof(tenants[i]));
		memcpy(tenants[i].name, name, sizeof(name));
	}
	n_records = 0;
	snap_head = snap_len = 0;
	seed_rng(cfg.seed);
}

void mock_engine_free(void)
{
	if (step_timer != NULL)
		event_free(step_timer);
	if (snap_timer != NULL)
		event_free(snap_timer);
	step_timer = snap_timer = NULL;
	free(records);
	records = NULL;
	n_records = records_cap = 0;
}
