/* mock_limits.c — provider-like behaviour: per-key request and token buckets, a
 * concurrency cap, a global capacity schedule, seeded random failures, and the 429s
 * and rate-limit headers of the OpenAI and Anthropic dialects (PROVIDERS.md §2, §3). */
#include "mock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>

#define MAX_PHASES 64
#define MAX_OVERLOAD 16
#define KEY_BUCKETS 4096
#define MAX_KEYS 100000 /* random keys must not exhaust memory; beyond: anonymous lane */

struct mock_key {
	struct mock_key *next;
	unsigned char sha[32];
	char hex[13];
	double rq_level, tk_level; /* bucket contents */
	double in_level, out_level; /* input and output token buckets (itpm, otpm) */
	uint64_t last_ms;
	bool fresh; /* buckets not initialised since the last (re)config */
	long in_flight;
	uint64_t window_end_ms;  /* end of the window the last 429 advertised */
	uint64_t window_open_ms; /* when the open window (extended or not) was first advertised */
	uint64_t requests, rate_limited;
};

struct phase {
	double rps;
	long ms;
};

static struct cfg {
	bool anthropic;
	double rpm, tpm;
	double itpm, otpm; /* input / output tokens per minute, buckets of one second's worth */
	double burst; /* capacity of the request bucket; 0: rpm (a minute's worth) */
	bool lockout; /* inside an advertised window every request is refused again */
	long window_grace_ms;
	long concurrency, latency_ms;
	bool retry_after;
	double retry_after_s;
	bool headers, quota;
	struct phase cap[MAX_PHASES];
	int ncap;
	int overload[MAX_OVERLOAD];
	int noverload;
	double error_rate;
	int error_status;
	uint64_t seed;
} cfg = {.retry_after = true,
         .headers = true,
         .overload = {429},
         .noverload = 1,
         .error_status = 503,
         .seed = 1};

static struct mock_key *table[KEY_BUCKETS];
static size_t nkeys;
static struct mock_key anon = {.hex = "anonymous", .fresh = true};

/* Global capacity schedule state. */
static double cap_level;
static uint64_t cap_last_ms, cap_origin_ms;
static unsigned overload_turn;
static uint64_t rng;

/* xorshift64*: reproducible failures from a fixed seed, no libc state involved. */
static double rand01(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void restart_state(void)
{
	for (size_t i = 0; i < KEY_BUCKETS; i++)
		for (struct mock_key *k = table[i]; k != NULL; k = k->next) {
			k->fresh = true;
			k->window_end_ms = 0;
		}
	anon.fresh = true;
	anon.window_end_ms = 0;
	cap_origin_ms = cap_last_ms = mock_now_ms();
	cap_level = -1; /* full at the first request */
	overload_turn = 0;
	rng = cfg.seed ? cfg.seed : 1;
}

long mock_limits_latency_ms(void)
{
	return cfg.latency_ms;
}

/* ---------- configuration ---------- */

static int get_num(json_t *o, const char *k, double lo, double hi, double *out, char *err,
                   size_t errlen)
{
	json_t *v = json_object_get(o, k);
	if (v == NULL)
		return 0;
	if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
		snprintf(err, errlen, "\"%s\" must be a number in [%g, %g]", k, lo, hi);
		return -1;
	}
	*out = json_number_value(v);
	return 0;
}

static int get_bool(json_t *o, const char *k, bool *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, k);
	if (v == NULL)
		return 0;
	if (!json_is_boolean(v)) {
		snprintf(err, errlen, "\"%s\" must be true or false", k);
		return -1;
	}
	*out = json_is_true(v);
	return 0;
}

static int status_ok(json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 400 && json_integer_value(v) <= 599;
}

/* Replaces the whole behaviour: fields not given take their defaults again. */
int mock_limits_configure(const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, 0, &je);
	if (o == NULL || !json_is_object(o)) {
		snprintf(err, errlen, "not a JSON object (%s)", o ? "" : je.text);
		json_decref(o);
		return -1;
	}
	static const char *known[] = {"style",
	                              "rpm",
	                              "tpm",
	                              "burst",
	                              "itpm",
	                              "otpm",
	                              "lockout",
	                              "window_grace_ms",
	                              "concurrency",
	                              "latency_ms",
	                              "retry_after",
	                              "retry_after_s",
	                              "headers",
	                              "quota_exhausted",
	                              "capacity",
	                              "overload_status",
	                              "error_rate",
	                              "error_status",
	                              "seed"};
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		size_t i;
		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (strcmp(k, known[i]) == 0)
				break;
		if (i == sizeof(known) / sizeof(known[0])) {
			snprintf(err, errlen, "unknown field \"%s\"", k);
			goto fail;
		}
	}
	struct cfg c = {.retry_after = true,
	                .headers = true,
	                .overload = {429},
	                .noverload = 1,
	                .error_status = 503,
	                .seed = 1};
	double d;
	v = json_object_get(o, "style");
	if (v != NULL) {
		if (json_is_string(v) && strcmp(json_string_value(v), "anthropic") == 0)
			c.anthropic = true;
		else if (!json_is_string(v) || strcmp(json_string_value(v), "openai") != 0) {
			snprintf(err, errlen, "\"style\" must be \"openai\" or \"anthropic\"");
			goto fail;
		}
	}
	if (get_num(o, "rpm", 0, 1e9, &c.rpm, err, errlen) ||
	    get_num(o, "tpm", 0, 1e12, &c.tpm, err, errlen) ||
	    get_num(o, "burst", 0, 1e9, &c.burst, err, errlen) ||
	    get_num(o, "itpm", 0, 1e12, &c.itpm, err, errlen) ||
	    get_num(o, "otpm", 0, 1e12, &c.otpm, err, errlen) ||
	    get_bool(o, "lockout", &c.lockout, err, errlen) ||
	    get_num(o, "retry_after_s", 0, 1e7, &c.retry_after_s, err, errlen) ||
	    get_num(o, "error_rate", 0, 1, &c.error_rate, err, errlen) ||
	    get_bool(o, "retry_after", &c.retry_after, err, errlen) ||
	    get_bool(o, "headers", &c.headers, err, errlen) ||
	    get_bool(o, "quota_exhausted", &c.quota, err, errlen))
		goto fail;
	d = 0;
	if (get_num(o, "concurrency", 0, 1e9, &d, err, errlen))
		goto fail;
	c.concurrency = (long)d;
	d = 0;
	if (get_num(o, "latency_ms", 0, 86400000, &d, err, errlen))
		goto fail;
	c.latency_ms = (long)d;
	d = 0;
	if (get_num(o, "window_grace_ms", 0, 86400000, &d, err, errlen))
		goto fail;
	c.window_grace_ms = (long)d;
	d = 1;
	if (get_num(o, "seed", 0, 9e15, &d, err, errlen))
		goto fail;
	c.seed = (uint64_t)d;
	v = json_object_get(o, "error_status");
	if (v != NULL) {
		if (!status_ok(v)) {
			snprintf(err, errlen, "\"error_status\" must be an integer in [400, 599]");
			goto fail;
		}
		c.error_status = (int)json_integer_value(v);
	}
	v = json_object_get(o, "overload_status");
	if (v != NULL) {
		size_t i;
		json_t *e;
		if (!json_is_array(v) || json_array_size(v) == 0 ||
		    json_array_size(v) > MAX_OVERLOAD) {
			snprintf(err, errlen,
			         "\"overload_status\" must be an array of 1..%d statuses",
			         MAX_OVERLOAD);
			goto fail;
		}
		json_array_foreach(v, i, e)
		{
			if (!status_ok(e)) {
				snprintf(err, errlen,
				         "\"overload_status\" entries must be in [400, 599]");
				goto fail;
			}
			c.overload[i] = (int)json_integer_value(e);
		}
		c.noverload = (int)json_array_size(v);
	}
	v = json_object_get(o, "capacity");
	if (v != NULL) {
		size_t i;
		json_t *e;
		if (!json_is_array(v) || json_array_size(v) > MAX_PHASES) {
			snprintf(err, errlen, "\"capacity\" must be an array of at most %d phases",
			         MAX_PHASES);
			goto fail;
		}
		json_array_foreach(v, i, e)
		{
			json_t *rps = json_object_get(e, "rps"), *ms = json_object_get(e, "ms");
			if (!json_is_object(e) || !json_is_number(rps) ||
			    json_number_value(rps) < 0 || !json_is_integer(ms) ||
			    json_integer_value(ms) <= 0) {
				snprintf(err, errlen,
				         "\"capacity\" entries must be {\"rps\": >=0, \"ms\": >0}");
				goto fail;
			}
			c.cap[i].rps = json_number_value(rps);
			c.cap[i].ms = (long)json_integer_value(ms);
		}
		c.ncap = (int)json_array_size(v);
	}
	json_decref(o);
	cfg = c;
	restart_state();
	return 0;
fail:
	json_decref(o);
	return -1;
}

/* ---------- keys ---------- */

static struct mock_key *key_get(const unsigned char *sha)
{
	if (sha == NULL)
		return &anon;
	unsigned h = ((unsigned)sha[0] | (unsigned)sha[1] << 8) % KEY_BUCKETS;
	for (struct mock_key *k = table[h]; k != NULL; k = k->next)
		if (memcmp(k->sha, sha, 32) == 0)
			return k;
	if (nkeys >= MAX_KEYS)
		return &anon;
	struct mock_key *k = calloc(1, sizeof(*k));
	if (k == NULL)
		return &anon;
	memcpy(k->sha, sha, 32);
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 6; i++) {
		k->hex[2 * i] = hex[sha[i] >> 4];
		k->hex[2 * i + 1] = hex[sha[i] & 15];
	}
	k->fresh = true;
	k->next = table[h];
	table[h] = k;
	nkeys++;
	return k;
}

/* The request bucket holds `burst` requests, a minute's worth by default. */
static double rq_capacity(void)
{
	return cfg.burst > 0 ? cfg.burst : cfg.rpm;
}

/* Continuous refill: capacity C (rq_capacity, tpm), rate limit / 60000 per ms. */
static void refill(struct mock_key *k, uint64_t now)
{
	if (k->fresh) {
		k->rq_level = rq_capacity();
		k->tk_level = cfg.tpm;
		k->in_level = cfg.itpm / 60;
		k->out_level = cfg.otpm / 60;
		k->last_ms = now;
		k->fresh = false;
		return;
	}
	double dt = (double)(now - k->last_ms);
	k->last_ms = now;
	k->rq_level = fmin(rq_capacity(), k->rq_level + dt * cfg.rpm / 60000.0);
	k->tk_level = fmin(cfg.tpm, k->tk_level + dt * cfg.tpm / 60000.0);
	k->in_level = fmin(cfg.itpm / 60, k->in_level + dt * cfg.itpm / 60000.0);
	k->out_level = fmin(cfg.otpm / 60, k->out_level + dt * cfg.otpm / 60000.0);
}

void mock_limits_release(struct mock_key *key)
{
	if (key != NULL && key->in_flight > 0)
		key->in_flight--;
}

/* Keys stay allocated (a deferred request may hold one for its concurrency slot);
 * their counters and buckets start over. */
void mock_limits_reset(void)
{
	for (size_t i = 0; i < KEY_BUCKETS; i++)
		for (struct mock_key *k = table[i]; k != NULL; k = k->next)
			k->requests = k->rate_limited = 0;
	anon.requests = anon.rate_limited = 0;
	restart_state();
}

void mock_limits_free(void)
{
	for (size_t i = 0; i < KEY_BUCKETS; i++) {
		struct mock_key *k = table[i];
		while (k != NULL) {
			struct mock_key *n = k->next;
			free(k);
			k = n;
		}
		table[i] = NULL;
	}
	nkeys = 0;
}

void mock_limits_stats_json(json_t *keys)
{
	for (size_t i = 0; i < KEY_BUCKETS; i++)
		for (struct mock_key *k = table[i]; k != NULL; k = k->next)
			if (k->requests > 0)
				json_object_set_new(
				    keys, k->hex,
				    json_pack("{s:I,s:I}", "requests", (json_int_t)k->requests,
				              "rate_limited", (json_int_t)k->rate_limited));
	if (anon.requests > 0)
		json_object_set_new(keys, anon.hex,
		                    json_pack("{s:I,s:I}", "requests", (json_int_t)anon.requests,
		                              "rate_limited", (json_int_t)anon.rate_limited));
}

/* ---------- formats ---------- */

/* Go's time.Duration.String() for whole milliseconds: "0s", "644ms", "1.5s",
 * "6m0s", "1h2m3.5s". */
void mock_go_duration(uint64_t ms, char *out, size_t outlen)
{
	if (ms == 0) {
		snprintf(out, outlen, "0s");
		return;
	}
	if (ms < 1000) {
		snprintf(out, outlen, "%ums", (unsigned)ms);
		return;
	}
	uint64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, f = ms % 1000;
	char sec[16];
	if (f == 0)
		snprintf(sec, sizeof(sec), "%u", (unsigned)s);
	else if (f % 100 == 0)
		snprintf(sec, sizeof(sec), "%u.%u", (unsigned)s, (unsigned)(f / 100));
	else if (f % 10 == 0)
		snprintf(sec, sizeof(sec), "%u.%02u", (unsigned)s, (unsigned)(f / 10));
	else
		snprintf(sec, sizeof(sec), "%u.%03u", (unsigned)s, (unsigned)f);
	if (h > 0)
		snprintf(out, outlen, "%uh%um%ss", (unsigned)h, (unsigned)m, sec);
	else if (m > 0)
		snprintf(out, outlen, "%um%ss", (unsigned)m, sec);
	else
		snprintf(out, outlen, "%ss", sec);
}

/* RFC 3339 instant ms from now, rounded up to the second (Anthropic resets). */
static void rfc3339_in(uint64_t ms, char *out, size_t outlen)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	time_t t = ts.tv_sec + (time_t)((ms + (uint64_t)ts.tv_nsec / 1000000u + 999) / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void add_reset(struct evkeyvalq *h, const char *name, uint64_t ms)
{
	char v[48];
	if (cfg.anthropic)
		rfc3339_in(ms, v, sizeof(v));
	else
		mock_go_duration(ms, v, sizeof(v));
	evhttp_add_header(h, name, v);
}

static void add_num(struct evkeyvalq *h, const char *name, double x)
{
	char v[32];
	snprintf(v, sizeof(v), "%.0f", x);
	evhttp_add_header(h, name, v);
}

static void ratelimit_headers(struct evkeyvalq *h, const struct mock_key *k)
{
	const char *p = cfg.anthropic ? "anthropic-ratelimit-" : "x-ratelimit-";
	char n[64];
	if (cfg.rpm > 0) {
		double rem = floor(k->rq_level);
		snprintf(n, sizeof(n), cfg.anthropic ? "%srequests-limit" : "%slimit-requests", p);
		add_num(h, n, cfg.rpm);
		snprintf(n, sizeof(n),
		         cfg.anthropic ? "%srequests-remaining" : "%sremaining-requests", p);
		add_num(h, n, rem < 0 ? 0 : rem);
		snprintf(n, sizeof(n), cfg.anthropic ? "%srequests-reset" : "%sreset-requests", p);
		add_reset(h, n, (uint64_t)ceil((rq_capacity() - k->rq_level) * 60000.0 / cfg.rpm));
	}
	if (cfg.tpm > 0) {
		double rem = floor(k->tk_level);
		snprintf(n, sizeof(n), cfg.anthropic ? "%stokens-limit" : "%slimit-tokens", p);
		add_num(h, n, cfg.tpm);
		snprintf(n, sizeof(n), cfg.anthropic ? "%stokens-remaining" : "%sremaining-tokens",
		         p);
		add_num(h, n, rem < 0 ? 0 : rem);
		snprintf(n, sizeof(n), cfg.anthropic ? "%stokens-reset" : "%sreset-tokens", p);
		add_reset(h, n, (uint64_t)ceil((cfg.tpm - k->tk_level) * 60000.0 / cfg.tpm));
	}
}

static void retry_headers(struct evkeyvalq *h, uint64_t wait_ms)
{
	char v[32];
	if (!cfg.retry_after)
		return;
	if (cfg.retry_after_s > 0) {
		snprintf(v, sizeof(v), "%g", cfg.retry_after_s);
		evhttp_add_header(h, "retry-after", v);
		if (!cfg.anthropic) {
			snprintf(v, sizeof(v), "%.0f", cfg.retry_after_s * 1000.0);
			evhttp_add_header(h, "retry-after-ms", v);
		}
		return;
	}
	snprintf(v, sizeof(v), "%u", (unsigned)((wait_ms + 999) / 1000));
	evhttp_add_header(h, "retry-after", v);
	if (!cfg.anthropic) {
		snprintf(v, sizeof(v), "%u", (unsigned)wait_ms);
		evhttp_add_header(h, "retry-after-ms", v);
	}
}

/* Error bodies go through jansson: messages may come from request headers. */
struct evbuffer *mock_error_body(bool anthropic, const char *type, const char *code,
                                 const char *message, const char *details_code,
                                 const char *request_id)
{
	json_t *j;
	if (anthropic) {
		json_t *e = json_pack("{s:s,s:s}", "type", type, "message", message);
		if (details_code != NULL)
			json_object_set_new(e, "details",
			                    json_pack("{s:s}", "error_code", details_code));
		j = json_pack("{s:s,s:o,s:s}", "type", "error", "error", e, "request_id",
		              request_id);
	} else {
		j = json_pack("{s:{s:s,s:s,s:n,s:s?}}", "error", "message", message, "type", type,
		              "param", "code", code);
	}
	struct evbuffer *b = evbuffer_new();
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (s != NULL)
		evbuffer_add(b, s, strlen(s));
	else
		evbuffer_add(b, "{}", 2);
	free(s);
	json_decref(j);
	return b;
}

static struct evbuffer *status_body(int status, const char *rid)
{
	if (status == 429)
		return cfg.anthropic
		           ? mock_error_body(true, "rate_limit_error", NULL,
		                             "Number of requests has exceeded your rate limit.",
		                             NULL, rid)
		           : mock_error_body(false, "requests", "rate_limit_exceeded",
		                             "Rate limit reached: the server is at capacity. "
		                             "Please try again in 1s.",
		                             NULL, rid);
	if (status == 529)
		return cfg.anthropic
		           ? mock_error_body(true, "overloaded_error", NULL, "Overloaded", NULL,
		                             rid)
		           : mock_error_body(false, "server_error", "overloaded",
		                             "The engine is currently overloaded, please try "
		                             "again later.",
		                             NULL, rid);
	if (status == 503)
		return cfg.anthropic
		           ? mock_error_body(true, "api_error", NULL, "Service unavailable", NULL,
		                             rid)
		           : mock_error_body(false, "server_error", "server_is_overloaded",
		                             "The server is overloaded or not ready yet.", NULL,
		                             rid);
	return cfg.anthropic
	           ? mock_error_body(true, "api_error", NULL, "Internal server error", NULL, rid)
	           : mock_error_body(false, "server_error", NULL,
	                             "The server had an error while processing your request.", NULL,
	                             rid);
}

/* Global capacity: a bucket of max(1, rps) holding one second's worth, refilled at the
 * rate of the schedule's current phase. */
static bool capacity_exceeded(uint64_t now)
{
	if (cfg.ncap == 0)
		return false;
	uint64_t cycle = 0;
	for (int i = 0; i < cfg.ncap; i++)
		cycle += (uint64_t)cfg.cap[i].ms;
	/* cppcheck-suppress zerodiv ; ncap > 0 and every ms > 0 (checked when set) */
	uint64_t t = (now - cap_origin_ms) % cycle;
	int p = 0;
	while (t >= (uint64_t)cfg.cap[p].ms) {
		t -= (uint64_t)cfg.cap[p].ms;
		p++;
	}
	double rps = cfg.cap[p].rps, size = fmax(1.0, rps);
	if (cap_level < 0)
		cap_level = size;
	cap_level = fmin(size, cap_level + (double)(now - cap_last_ms) * rps / 1000.0);
	cap_last_ms = now;
	if (cap_level >= 1) {
		cap_level -= 1;
		return false;
	}
	return true;
}

/* Decides the fate of one LLM request at arrival; charges the buckets when it passes. */
void mock_limits_check(const struct mock_limit_in *in, struct evkeyvalq *h, const char *rid,
                       struct mock_limit_out *out)
{
	uint64_t now = mock_now_ms();
	struct mock_key *k = key_get(in->key_sha);
	char msg[512], dur[32];
	uint64_t wait = 0;
	bool windowed = false;

	out->key = NULL;
	out->status = 0;
	out->body = NULL;
	k->requests++;
	bool in_window = k->window_end_ms != 0 && now >= k->window_open_ms && now < k->window_end_ms;
	/* A request already on its way when the 429 left can not be recalled:
	 * window_grace_ms after a window opened, arrivals are not counted. */
	if (in_window && now >= k->window_open_ms + (uint64_t)cfg.window_grace_ms)
		mock_stats.window_violations++;
	refill(k, now);

	if (cfg.quota) {
		out->status = 429;
		out->body = cfg.anthropic
		                ? mock_error_body(true, "rate_limit_error", NULL,
		                                  "You have reached your specified API usage "
		                                  "limits. You will regain access on the first of "
		                                  "next month at 00:00 UTC.",
		                                  "enforced_spend_limit_reached", rid)
		                : mock_error_body(false, "insufficient_quota", "insufficient_quota",
		                                  "You exceeded your current quota, please check "
		                                  "your plan and billing details. For more "
		                                  "information on this error, read the docs: "
		                                  "https://platform.openai.com/docs/guides/"
		                                  "error-codes/api-errors.",
		                                  NULL, rid);
	} else if (cfg.lockout && in_window) {
		/* A provider that punishes: refused again, and the window starts over. */
		wait = cfg.retry_after_s > 0 ? (uint64_t)(cfg.retry_after_s * 1000.0)
		                             : k->window_end_ms - now;
		out->status = 429;
		out->body = mock_error_body(cfg.anthropic,
		                            cfg.anthropic ? "rate_limit_error" : "requests",
		                            "rate_limit_exceeded",
		                            "Rate limit reached: requests inside the retry-after "
		                            "window are refused.",
		                            NULL, rid);
		windowed = true;
	} else if (cfg.concurrency > 0 && k->in_flight >= cfg.concurrency) {
		out->status = 429;
		snprintf(msg, sizeof(msg),
		         "Too many concurrent requests: limit %ld. Please try again in 1s.",
		         cfg.concurrency);
		out->body =
		    mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : "requests",
		                    "rate_limit_exceeded", msg, NULL, rid);
		retry_headers(h, 1000);
	} else if (cfg.tpm > 0 && (double)in->cost_tokens > cfg.tpm) {
		out->status = 429;
		snprintf(
		    msg, sizeof(msg),
		    "Request too large for gpt-mock in organization org-mock on tokens per min "
		    "(TPM): Limit %.0f, Requested %ld. The input or output tokens must be "
		    "reduced in order to run successfully.",
		    cfg.tpm, in->cost_tokens);
		out->body =
		    mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : "tokens",
		                    "rate_limit_exceeded", msg, NULL, rid);
	} else if (cfg.rpm > 0 && k->rq_level < 1) {
		wait = (uint64_t)ceil((1 - k->rq_level) * 60000.0 / cfg.rpm);
		mock_go_duration(wait, dur, sizeof(dur));
		if (cfg.anthropic)
			snprintf(msg, sizeof(msg),
			         "This request would exceed the rate limit for your organization "
			         "(mock) of %.0f requests per minute. Please try again later.",
			         cfg.rpm);
		else
			snprintf(
			    msg, sizeof(msg),
			    "Rate limit reached for requests in organization org-mock on "
			    "requests per min (RPM): Limit %.0f, Used %.0f, Requested 1. Please "
			    "try again in %s. Visit https://platform.openai.com/account/"
			    "rate-limits to learn more.",
			    cfg.rpm, cfg.rpm - floor(k->rq_level), dur);
		out->status = 429;
		out->body =
		    mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : "requests",
		                    "rate_limit_exceeded", msg, NULL, rid);
		windowed = true;
	} else if (cfg.tpm > 0 && k->tk_level < (double)in->cost_tokens) {
		wait = (uint64_t)ceil(((double)in->cost_tokens - k->tk_level) * 60000.0 / cfg.tpm);
		mock_go_duration(wait, dur, sizeof(dur));
		if (cfg.anthropic)
			snprintf(msg, sizeof(msg),
			         "This request would exceed the rate limit for your organization "
			         "(mock) of %.0f tokens per minute. Please try again later.",
			         cfg.tpm);
		else
			snprintf(
			    msg, sizeof(msg),
			    "Rate limit reached for gpt-mock in organization org-mock on tokens "
			    "per min (TPM): Limit %.0f, Used %.0f, Requested %ld. Please try "
			    "again in %s. Visit https://platform.openai.com/account/rate-limits "
			    "to learn more.",
			    cfg.tpm, cfg.tpm - floor(k->tk_level), in->cost_tokens, dur);
		out->status = 429;
		out->body =
		    mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : "tokens",
		                    "rate_limit_exceeded", msg, NULL, rid);
		windowed = true;
	} else if ((cfg.itpm > 0 && k->in_level < (double)in->input_tokens) ||
	           (cfg.otpm > 0 && k->out_level < (double)in->output_tokens)) {
		bool input = cfg.itpm > 0 && k->in_level < (double)in->input_tokens;
		double per_min = input ? cfg.itpm : cfg.otpm;
		double lack = input ? (double)in->input_tokens - k->in_level
		                    : (double)in->output_tokens - k->out_level;
		wait = (uint64_t)ceil(lack * 60000.0 / per_min);
		snprintf(msg, sizeof(msg),
		         "This request would exceed the rate limit for your organization (mock) of "
		         "%.0f %s tokens per minute. Please try again later.",
		         per_min, input ? "input" : "output");
		out->status = 429;
		out->body = mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : "tokens",
		                            "rate_limit_exceeded", msg, NULL, rid);
		windowed = true;
	} else {
		if (cfg.rpm > 0)
			k->rq_level -= 1;
		if (cfg.tpm > 0)
			k->tk_level -= (double)in->cost_tokens;
		if (cfg.itpm > 0)
			k->in_level -= (double)in->input_tokens;
		if (cfg.otpm > 0)
			k->out_level -= (double)in->output_tokens;
	}

	if (out->status != 0) {
		mock_stats.rate_limited++;
		k->rate_limited++;
		if (windowed) {
			retry_headers(h, wait);
			uint64_t adv = cfg.retry_after && cfg.retry_after_s > 0
			                   ? (uint64_t)(cfg.retry_after_s * 1000.0)
			                   : wait;
			/* The window opens when the 429 leaves (after latency_ms): a
			 * client can not know of it before. */
			uint64_t sent = now + (uint64_t)cfg.latency_ms;
			if (now >= k->window_end_ms)
				k->window_open_ms = sent;
			if (sent + adv > k->window_end_ms)
				k->window_end_ms = sent + adv;
		}
	} else if (capacity_exceeded(now)) {
		out->status = cfg.overload[overload_turn++ % (unsigned)cfg.noverload];
		out->body = status_body(out->status, rid);
		if (out->status == 429) {
			mock_stats.rate_limited++;
			k->rate_limited++;
			retry_headers(h, 1000);
		}
	} else if (cfg.error_rate > 0 && rand01() < cfg.error_rate) {
		out->status = cfg.error_status;
		out->body = status_body(out->status, rid);
	}
	if (cfg.headers)
		ratelimit_headers(h, k);
	if (out->status == 0) {
		k->in_flight++;
		out->key = k;
	}
}
