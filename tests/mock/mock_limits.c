/* SPDX-License-Identifier: Apache-2.0 */
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
#include <openssl/evp.h>

#define MAX_PHASES 64
#define MAX_OVERLOAD 16
#define KEY_BUCKETS 4096
#define MAX_KEYS 100000 /* random keys must not exhaust memory; beyond: anonymous lane */
#define MAX_GROUPS 256
#define MAX_PROJECTS 1024
#define CACHE_BUCKETS 65536
#define MAX_CACHE 200000
#define CNT_SLOTS 4096 /* (scope, model) counters; beyond: under "other" */

/* The limits of one budget. The top-level ones (per key, or per project) keep their
 * historical itpm/otpm buckets of one second's worth; a model group's hold a minute's. */
struct limits {
	double rpm, burst, tpm, itpm, otpm;
	double token_burst; /* capacity of the tpm bucket in tokens (0: tpm, a minute's worth) */
	double rpd;         /* requests per day (of day_ms), counted from the day's start */
	bool minute;        /* itpm/otpm buckets hold a full minute's worth */
	bool otpm_produced; /* otpm counts the tokens produced, not max_tokens (Anthropic) */
};

/* The state of one budget: bucket levels and the last advertised window. */
struct budget {
	double rq_level, tk_level;  /* bucket contents */
	double in_level, out_level; /* input and output token buckets (itpm, otpm) */
	uint64_t last_ms;
	bool fresh;              /* buckets not initialised since the last (re)config */
	uint64_t window_end_us;  /* end of the window the last 429 advertised (mock_now_us) */
	uint64_t window_open_us; /* when the open window (extended or not) was first advertised */
	uint64_t day;            /* the day (since the config or reset) day_used counts in */
	double day_used;         /* requests passed that day (rpd) */
};

struct mock_key {
	struct mock_key *next;
	unsigned char sha[32];
	char hex[13];
	struct budget b;       /* the top-level budget when the key is its own scope */
	struct budget *groups; /* per model group, when the key is its own scope (lazy) */
	long in_flight;
	uint64_t requests, rate_limited;
};

/* Models sharing one budget (model_limits entry). "*": every model no entry names;
 * "": requests without a model. */
struct group {
	struct limits l;
	char **models;
	size_t nmodels;
};

/* A scope that owns budgets instead of the key: keys of one project share them. */
struct project {
	char *id, *org, *ws;
	unsigned char (*keys)[32];
	size_t nkeys;
	struct budget top;
	struct budget *groups;
};

struct phase {
	double rps;
	long ms;
};

/* How the rate-limit headers of the OpenAI dialect are written (README "style"). */
enum hdr_form {
	HDR_OPENAI,         /* limit, remaining, reset as a Go duration */
	HDR_WHOLE_SECONDS,  /* Azure: the same, reset in whole seconds rounded up */
	HDR_REMAINING_ONLY, /* Azure's usual answer: remaining, no limit, no reset */
};

static struct cfg {
	bool anthropic;
	bool gemini;              /* style gemini: no headers, google.rpc error details */
	int payment;              /* payment_402: 0 none, 1 in_flight, 2 credits */
	enum hdr_form form;       /* styles azure and remaining: how the openai headers go */
	struct limits top;        /* rpm, tpm, burst, itpm, otpm of the top level */
	bool lockout;             /* inside an advertised window every request is refused again */
	uint64_t window_grace_us; /* window_grace_ms, which may be fractional */
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
	struct group *groups;
	int ngroups;
	struct project *projects;
	int nprojects;
	long cache_ttl_ms;
	bool strict_fields; /* chat completions refuse unknown body members with 422 */
	uint64_t day_ms;    /* the length of a day of rpd (a short one lets a test see it end) */
	double jitter_ms;   /* arrival_jitter_ms: the buckets' clock moves each arrival ± this */
	bool terse;         /* terse_429: rate-limit 429s name no budget, no limit */
} cfg = {.day_ms = 86400000,
         .retry_after = true,
         .headers = true,
         .overload = {429},
         .noverload = 1,
         .error_status = 503,
         .seed = 1,
         .cache_ttl_ms = 300000};

static struct mock_key *table[KEY_BUCKETS];
static size_t nkeys;
static struct mock_key anon = {.hex = "anonymous", .b = {.fresh = true}};

/* Global capacity schedule state. */
static double cap_level;
static uint64_t cap_last_ms, cap_origin_ms;
static uint64_t day_origin_ms; /* days of rpd start at the config or the last reset */
static unsigned overload_turn;
static uint64_t rng, jitter_rng, bucket_last_ms;

/* xorshift64*: reproducible failures from a fixed seed, no libc state involved. */
static double rand01_of(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return (double)((*state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static double rand01(void)
{
	return rand01_of(&rng);
}

/* The buckets' clock: with arrival_jitter_ms, each arrival moved by a uniform
 * draw in ±jitter (a path whose delay varies from one request to the next),
 * never before the last instant it gave (a bucket's clock does not go back). */
static uint64_t bucket_clock_ms(uint64_t now_us)
{
	if (!(cfg.jitter_ms > 0))
		return now_us / 1000;
	double t = (double)now_us / 1000.0 + (2 * rand01_of(&jitter_rng) - 1) * cfg.jitter_ms;
	uint64_t ms = t > 0 ? (uint64_t)t : 0;
	if (ms < bucket_last_ms)
		ms = bucket_last_ms;
	return bucket_last_ms = ms;
}

static void cache_clear(void);

static void budget_restart(struct budget *b)
{
	b->fresh = true;
	b->window_end_us = 0;
}

/* Bumped whenever budgets are restarted or freed: a 429 still waiting for its
 * latency_ms then opens no window (its budget may be gone). */
static uint64_t window_gen = 1;

/* Every bucket full again, no window open, the prompt cache empty. A key's per-group
 * budgets are dropped: the number of groups may have changed. */
static void restart_state(void)
{
	window_gen++;
	for (size_t i = 0; i < KEY_BUCKETS; i++)
		for (struct mock_key *k = table[i]; k != NULL; k = k->next) {
			budget_restart(&k->b);
			free(k->groups);
			k->groups = NULL;
		}
	budget_restart(&anon.b);
	free(anon.groups);
	anon.groups = NULL;
	for (int p = 0; p < cfg.nprojects; p++) {
		budget_restart(&cfg.projects[p].top);
		for (int g = 0; g < cfg.ngroups; g++)
			budget_restart(&cfg.projects[p].groups[g]);
	}
	cache_clear();
	cap_origin_ms = cap_last_ms = day_origin_ms = mock_now_ms();
	cap_level = -1; /* full at the first request */
	overload_turn = 0;
	rng = cfg.seed ? cfg.seed : 1;
	jitter_rng = rng ^ 0x9e3779b97f4a7c15ull;
}

bool mock_limits_strict_fields(void)
{
	return cfg.strict_fields;
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

static void free_groups(struct group *g, int n)
{
	for (int i = 0; i < n && g != NULL; i++) {
		for (size_t j = 0; j < g[i].nmodels; j++)
			free(g[i].models[j]);
		free(g[i].models);
	}
	free(g);
}

static void free_projects(struct project *p, int n)
{
	for (int i = 0; i < n && p != NULL; i++) {
		free(p[i].id);
		free(p[i].org);
		free(p[i].ws);
		free(p[i].keys);
		free(p[i].groups);
	}
	free(p);
}

/* Only the names given may appear in o. */
static int only_fields(json_t *o, const char *const *known, size_t n, const char *what, char *err,
                       size_t errlen)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		size_t i;
		for (i = 0; i < n; i++)
			if (strcmp(k, known[i]) == 0)
				break;
		if (i == n) {
			snprintf(err, errlen, "unknown field \"%s\"%s", k, what);
			return -1;
		}
	}
	return 0;
}

/* "model_limits": [{"models": [...], "rpm", "burst", "tpm", "itpm", "otpm"}, ...] */
static int parse_groups(json_t *v, struct group **out, int *nout, char *err, size_t errlen)
{
	static const char *const known[] = {"models", "rpm",         "burst",       "tpm", "itpm",
	                                    "otpm",   "otpm_counts", "token_burst", "rpd"};
	if (!json_is_array(v) || json_array_size(v) > MAX_GROUPS) {
		snprintf(err, errlen, "\"model_limits\" must be an array of at most %d entries",
		         MAX_GROUPS);
		return -1;
	}
	size_t n = json_array_size(v), i;
	struct group *g = calloc(n ? n : 1, sizeof(*g));
	json_t *e;
	if (g == NULL)
		goto oom;
	json_array_foreach(v, i, e)
	{
		if (!json_is_object(e)) {
			snprintf(err, errlen, "\"model_limits\" entries must be objects");
			goto fail;
		}
		if (only_fields(e, known, sizeof(known) / sizeof(known[0]), " in model_limits", err,
		                errlen))
			goto fail;
		json_t *ms = json_object_get(e, "models"), *m;
		size_t j;
		if (!json_is_array(ms) || json_array_size(ms) == 0) {
			snprintf(
			    err, errlen,
			    "\"model_limits\" entries need \"models\": a non-empty array of names");
			goto fail;
		}
		g[i].models = calloc(json_array_size(ms), sizeof(char *));
		if (g[i].models == NULL)
			goto oom;
		json_array_foreach(ms, j, m)
		{
			if (!json_is_string(m) || json_string_length(m) >= 64) {
				snprintf(err, errlen,
				         "\"models\" entries must be strings of at most 63 bytes");
				goto fail;
			}
			for (int a = 0; a < (int)i; a++)
				for (size_t b = 0; b < g[a].nmodels; b++)
					if (strcmp(g[a].models[b], json_string_value(m)) == 0) {
						snprintf(err, errlen,
						         "model \"%.63s\" is in two model_limits "
						         "entries",
						         json_string_value(m));
						goto fail;
					}
			g[i].models[j] = strdup(json_string_value(m));
			if (g[i].models[j] == NULL)
				goto oom;
			g[i].nmodels = j + 1;
		}
		g[i].l.minute = true;
		if (get_num(e, "rpm", 0, 1e9, &g[i].l.rpm, err, errlen) ||
		    get_num(e, "burst", 0, 1e9, &g[i].l.burst, err, errlen) ||
		    get_num(e, "tpm", 0, 1e12, &g[i].l.tpm, err, errlen) ||
		    get_num(e, "itpm", 0, 1e12, &g[i].l.itpm, err, errlen) ||
		    get_num(e, "otpm", 0, 1e12, &g[i].l.otpm, err, errlen) ||
		    get_num(e, "token_burst", 0, 1e12, &g[i].l.token_burst, err, errlen) ||
		    get_num(e, "rpd", 0, 1e9, &g[i].l.rpd, err, errlen))
			goto fail;
		json_t *oc = json_object_get(e, "otpm_counts");
		if (oc != NULL &&
		    (!json_is_string(oc) || (strcmp(json_string_value(oc), "produced") != 0 &&
		                             strcmp(json_string_value(oc), "max_tokens") != 0))) {
			snprintf(err, errlen,
			         "\"otpm_counts\" must be \"max_tokens\" or \"produced\"");
			goto fail;
		}
		g[i].l.otpm_produced = oc != NULL && strcmp(json_string_value(oc), "produced") == 0;
	}
	*out = g;
	*nout = (int)n;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	free_groups(g, (int)n);
	return -1;
}

static int opt_string(json_t *o, const char *k, const char *dflt, char **out, char *err,
                      size_t errlen)
{
	json_t *v = json_object_get(o, k);
	if (v == NULL && dflt == NULL)
		return 0;
	if (v != NULL &&
	    (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= 128 ||
	     strspn(json_string_value(v),
	            "abcdefghijklmnopqrstuvwxyz"
	            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") != json_string_length(v))) {
		snprintf(err, errlen,
		         "\"%s\" of a project must be 1..127 characters of [A-Za-z0-9._:-]", k);
		return -1;
	}
	*out = strdup(v != NULL ? json_string_value(v) : dflt);
	if (*out == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* "projects": [{"id", "organization", "workspace", "keys": [...]}, ...] */
static int parse_projects(json_t *v, int ngroups, struct project **out, int *nout, char *err,
                          size_t errlen)
{
	static const char *const known[] = {"id", "organization", "workspace", "keys"};
	if (!json_is_array(v) || json_array_size(v) > MAX_PROJECTS) {
		snprintf(err, errlen, "\"projects\" must be an array of at most %d entries",
		         MAX_PROJECTS);
		return -1;
	}
	size_t n = json_array_size(v), i;
	struct project *p = calloc(n ? n : 1, sizeof(*p));
	json_t *e;
	if (p == NULL)
		goto oom;
	json_array_foreach(v, i, e)
	{
		if (!json_is_object(e)) {
			snprintf(err, errlen, "\"projects\" entries must be objects");
			goto fail;
		}
		if (only_fields(e, known, sizeof(known) / sizeof(known[0]), " in projects", err,
		                errlen))
			goto fail;
		if (json_object_get(e, "id") == NULL) {
			snprintf(err, errlen, "\"projects\" entries need an \"id\"");
			goto fail;
		}
		if (opt_string(e, "id", NULL, &p[i].id, err, errlen) ||
		    opt_string(e, "organization", "org-mock", &p[i].org, err, errlen) ||
		    opt_string(e, "workspace", NULL, &p[i].ws, err, errlen))
			goto fail;
		for (size_t a = 0; a < i; a++)
			if (strcmp(p[a].id, p[i].id) == 0) {
				snprintf(err, errlen, "project \"%s\" is given twice", p[i].id);
				goto fail;
			}
		json_t *ks = json_object_get(e, "keys"), *k;
		size_t j;
		if (!json_is_array(ks)) {
			snprintf(err, errlen, "\"keys\" of a project must be an array of API keys");
			goto fail;
		}
		p[i].keys = calloc(json_array_size(ks) ? json_array_size(ks) : 1, 32);
		p[i].groups = calloc(ngroups ? (size_t)ngroups : 1, sizeof(struct budget));
		if (p[i].keys == NULL || p[i].groups == NULL)
			goto oom;
		json_array_foreach(ks, j, k)
		{
			if (!json_is_string(k) || json_string_length(k) == 0) {
				snprintf(err, errlen,
				         "\"keys\" of a project must be non-empty strings");
				goto fail;
			}
			unsigned int len = 0;
			EVP_Digest(json_string_value(k), json_string_length(k), p[i].keys[j], &len,
			           EVP_sha256(), NULL);
		}
		p[i].nkeys = json_array_size(ks);
	}
	*out = p;
	*nout = (int)n;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	free_projects(p, (int)n);
	return -1;
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
	static const char *known[] = {"style",         "rpm",
	                              "tpm",           "burst",
	                              "itpm",          "otpm",
	                              "lockout",       "window_grace_ms",
	                              "concurrency",   "latency_ms",
	                              "retry_after",   "retry_after_s",
	                              "headers",       "quota_exhausted",
	                              "capacity",      "overload_status",
	                              "error_rate",    "error_status",
	                              "seed",          "model_limits",
	                              "projects",      "cache_ttl_ms",
	                              "strict_fields", "payment_402",
	                              "token_burst",   "rpd",
	                              "day_ms",        "arrival_jitter_ms",
	                              "terse_429"};
	json_t *v;
	struct cfg c = {.day_ms = 86400000,
	                .retry_after = true,
	                .headers = true,
	                .overload = {429},
	                .noverload = 1,
	                .error_status = 503,
	                .seed = 1,
	                .cache_ttl_ms = 300000};
	if (only_fields(o, known, sizeof(known) / sizeof(known[0]), "", err, errlen))
		goto fail;
	double d;
	v = json_object_get(o, "style");
	if (v != NULL) {
		const char *st = json_is_string(v) ? json_string_value(v) : "";
		if (strcmp(st, "anthropic") == 0)
			c.anthropic = true;
		else if (strcmp(st, "gemini") == 0)
			c.gemini = true, c.headers = false;
		else if (strcmp(st, "azure") == 0)
			c.form = HDR_WHOLE_SECONDS;
		else if (strcmp(st, "remaining") == 0)
			c.form = HDR_REMAINING_ONLY;
		else if (strcmp(st, "openai") != 0) {
			snprintf(err, errlen,
			         "\"style\" must be \"openai\", \"anthropic\", \"gemini\", "
			         "\"azure\" or \"remaining\"");
			goto fail;
		}
	}
	v = json_object_get(o, "payment_402");
	if (v != NULL) {
		const char *pv = json_string_value(v);
		c.payment = pv == NULL                     ? -1
		            : strcmp(pv, "in_flight") == 0 ? 1
		            : strcmp(pv, "credits") == 0   ? 2
		                                           : -1;
		if (c.payment < 0) {
			snprintf(err, errlen,
			         "\"payment_402\" must be \"in_flight\" or \"credits\"");
			goto fail;
		}
	}
	if (get_num(o, "rpm", 0, 1e9, &c.top.rpm, err, errlen) ||
	    get_num(o, "tpm", 0, 1e12, &c.top.tpm, err, errlen) ||
	    get_num(o, "burst", 0, 1e9, &c.top.burst, err, errlen) ||
	    get_num(o, "itpm", 0, 1e12, &c.top.itpm, err, errlen) ||
	    get_num(o, "otpm", 0, 1e12, &c.top.otpm, err, errlen) ||
	    get_num(o, "token_burst", 0, 1e12, &c.top.token_burst, err, errlen) ||
	    get_num(o, "rpd", 0, 1e9, &c.top.rpd, err, errlen) ||
	    get_bool(o, "lockout", &c.lockout, err, errlen) ||
	    get_num(o, "retry_after_s", 0, 1e7, &c.retry_after_s, err, errlen) ||
	    get_num(o, "error_rate", 0, 1, &c.error_rate, err, errlen) ||
	    get_num(o, "arrival_jitter_ms", 0, 1000, &c.jitter_ms, err, errlen) ||
	    get_bool(o, "retry_after", &c.retry_after, err, errlen) ||
	    get_bool(o, "headers", &c.headers, err, errlen) ||
	    get_bool(o, "quota_exhausted", &c.quota, err, errlen) ||
	    get_bool(o, "strict_fields", &c.strict_fields, err, errlen) ||
	    get_bool(o, "terse_429", &c.terse, err, errlen))
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
	c.window_grace_us = (uint64_t)(d * 1000.0);
	d = 1;
	if (get_num(o, "seed", 0, 9e15, &d, err, errlen))
		goto fail;
	c.seed = (uint64_t)d;
	d = 300000;
	if (get_num(o, "cache_ttl_ms", 1, 86400000, &d, err, errlen))
		goto fail;
	c.cache_ttl_ms = (long)d;
	d = 86400000;
	if (get_num(o, "day_ms", 1, 86400000, &d, err, errlen))
		goto fail;
	c.day_ms = (uint64_t)d;
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
	v = json_object_get(o, "model_limits");
	if (v != NULL && parse_groups(v, &c.groups, &c.ngroups, err, errlen))
		goto fail;
	v = json_object_get(o, "projects");
	if (v != NULL && parse_projects(v, c.ngroups, &c.projects, &c.nprojects, err, errlen)) {
		free_groups(c.groups, c.ngroups);
		goto fail;
	}
	json_decref(o);
	free_groups(cfg.groups, cfg.ngroups);
	free_projects(cfg.projects, cfg.nprojects);
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
	k->b.fresh = true;
	k->next = table[h];
	table[h] = k;
	nkeys++;
	return k;
}

/* The request bucket holds `burst` requests, a minute's worth by default. */
static double rq_capacity(const struct limits *l)
{
	return l->burst > 0 ? l->burst : l->rpm;
}

static double tk_capacity(const struct limits *l)
{
	return l->token_burst > 0 ? l->token_burst : l->tpm;
}

/* The day of rpd that now (mock_now_ms) falls in. */
static uint64_t day_of(uint64_t now)
{
	return now > day_origin_ms ? (now - day_origin_ms) / cfg.day_ms : 0;
}

static double in_capacity(const struct limits *l)
{
	return l->minute ? l->itpm : l->itpm / 60;
}

static double out_capacity(const struct limits *l)
{
	return l->minute ? l->otpm : l->otpm / 60;
}

/* Continuous refill: capacity C (rq_capacity, tpm, …), rate limit / 60000 per ms. */
static void refill(const struct limits *l, struct budget *k, uint64_t now)
{
	if (k->fresh) {
		k->rq_level = rq_capacity(l);
		k->tk_level = tk_capacity(l);
		k->in_level = in_capacity(l);
		k->out_level = out_capacity(l);
		k->last_ms = now;
		k->fresh = false;
		k->day = day_of(now);
		k->day_used = 0;
		return;
	}
	double dt = (double)(now - k->last_ms);
	k->last_ms = now;
	k->rq_level = fmin(rq_capacity(l), k->rq_level + dt * l->rpm / 60000.0);
	k->tk_level = fmin(tk_capacity(l), k->tk_level + dt * l->tpm / 60000.0);
	k->in_level = fmin(in_capacity(l), k->in_level + dt * l->itpm / 60000.0);
	k->out_level = fmin(out_capacity(l), k->out_level + dt * l->otpm / 60000.0);
}

/* The per-group budgets of a key that is its own scope; NULL when out of memory. */
static struct budget *key_groups(struct mock_key *k)
{
	if (k->groups == NULL && cfg.ngroups > 0) {
		k->groups = calloc((size_t)cfg.ngroups, sizeof(struct budget));
		if (k->groups != NULL)
			for (int g = 0; g < cfg.ngroups; g++)
				k->groups[g].fresh = true;
	}
	return k->groups;
}

void mock_limits_release(struct mock_key *key)
{
	if (key != NULL && key->in_flight > 0)
		key->in_flight--;
}

/* ---------- (scope, model) counters ---------- */

struct cnt {
	char scope[64], model[64];
	bool used;
	uint64_t requests, passed, rate_limited, cache_reads, cache_creations;
	uint64_t tokens; /* what the passed requests charged the token budgets */
};
static struct cnt *cnts; /* CNT_SLOTS, allocated at the first request */
static size_t ncnts;
static struct cnt cnt_other = {.model = "other", .used = true};
static uint64_t cache_reads_total, cache_creations_total;
static uint64_t tokens_total; /* what passed requests charged the token budgets */

/* Open addressing on FNV-1a of scope NUL model; full (3/4): the "other" entry. */
static struct cnt *cnt_get(const char *scope, const char *model)
{
	if (cnts == NULL) {
		cnts = calloc(CNT_SLOTS, sizeof(*cnts));
		if (cnts == NULL)
			return &cnt_other;
	}
	uint32_t h = 2166136261u;
	for (const char *p = scope; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *p = model; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	for (size_t i = 0; i < CNT_SLOTS; i++) {
		struct cnt *c = &cnts[(h + i) % CNT_SLOTS];
		if (!c->used) {
			if (ncnts >= CNT_SLOTS * 3 / 4)
				return &cnt_other;
			c->used = true;
			snprintf(c->scope, sizeof(c->scope), "%s", scope);
			snprintf(c->model, sizeof(c->model), "%s", model);
			ncnts++;
			return c;
		}
		if (strcmp(c->model, model) == 0 && strcmp(c->scope, scope) == 0)
			return c;
	}
	return &cnt_other;
}

/* ---------- the prompt cache (Anthropic's cache_control) ---------- */

struct centry {
	struct centry *next;
	unsigned char key[32];
	uint64_t expires_ms;
};
static struct centry **ctable; /* CACHE_BUCKETS, allocated at the first cacheable request */
static size_t ncentries;

static void cache_clear(void)
{
	if (ctable == NULL)
		return;
	for (size_t i = 0; i < CACHE_BUCKETS; i++) {
		struct centry *e = ctable[i];
		while (e != NULL) {
			struct centry *n = e->next;
			free(e);
			e = n;
		}
		ctable[i] = NULL;
	}
	ncentries = 0;
}

static void cache_sweep(uint64_t now)
{
	for (size_t i = 0; i < CACHE_BUCKETS; i++)
		for (struct centry **pp = &ctable[i]; *pp != NULL;) {
			struct centry *e = *pp;
			if (e->expires_ms <= now) {
				*pp = e->next;
				free(e);
				ncentries--;
			} else {
				pp = &e->next;
			}
		}
}

/* The live entry of key, or NULL. */
static struct centry *cache_find(const unsigned char key[32], uint64_t now)
{
	if (ctable == NULL)
		return NULL;
	unsigned h = ((unsigned)key[0] | (unsigned)key[1] << 8) % CACHE_BUCKETS;
	for (struct centry *e = ctable[h]; e != NULL; e = e->next)
		if (memcmp(e->key, key, 32) == 0)
			return e->expires_ms > now ? e : NULL;
	return NULL;
}

/* Writes or refreshes key's entry: it lives cache_ttl_ms from now. */
static void cache_put(const unsigned char key[32], uint64_t now)
{
	if (ctable == NULL) {
		ctable = calloc(CACHE_BUCKETS, sizeof(*ctable));
		if (ctable == NULL)
			return;
	}
	unsigned h = ((unsigned)key[0] | (unsigned)key[1] << 8) % CACHE_BUCKETS;
	for (struct centry *e = ctable[h]; e != NULL; e = e->next)
		if (memcmp(e->key, key, 32) == 0) {
			e->expires_ms = now + (uint64_t)cfg.cache_ttl_ms;
			return;
		}
	if (ncentries >= MAX_CACHE)
		cache_sweep(now);
	if (ncentries >= MAX_CACHE)
		cache_clear();
	struct centry *e = malloc(sizeof(*e));
	if (e == NULL)
		return;
	memcpy(e->key, key, 32);
	e->expires_ms = now + (uint64_t)cfg.cache_ttl_ms;
	e->next = ctable[h];
	ctable[h] = e;
	ncentries++;
}

/* Keys stay allocated (a deferred request may hold one for its concurrency slot);
 * their counters and buckets start over. */
void mock_limits_reset(void)
{
	for (size_t i = 0; i < KEY_BUCKETS; i++)
		for (struct mock_key *k = table[i]; k != NULL; k = k->next)
			k->requests = k->rate_limited = 0;
	anon.requests = anon.rate_limited = 0;
	if (cnts != NULL)
		memset(cnts, 0, CNT_SLOTS * sizeof(*cnts));
	ncnts = 0;
	cnt_other.requests = cnt_other.passed = cnt_other.rate_limited = 0;
	cnt_other.cache_reads = cnt_other.cache_creations = cnt_other.tokens = 0;
	tokens_total = 0;
	cache_reads_total = cache_creations_total = 0;
	restart_state();
}

void mock_limits_free(void)
{
	for (size_t i = 0; i < KEY_BUCKETS; i++) {
		struct mock_key *k = table[i];
		while (k != NULL) {
			struct mock_key *n = k->next;
			free(k->groups);
			free(k);
			k = n;
		}
		table[i] = NULL;
	}
	nkeys = 0;
	free(anon.groups);
	anon.groups = NULL;
	cache_clear();
	free(ctable);
	ctable = NULL;
	free(cnts);
	cnts = NULL;
	free_groups(cfg.groups, cfg.ngroups);
	free_projects(cfg.projects, cfg.nprojects);
	cfg.groups = NULL;
	cfg.projects = NULL;
	cfg.ngroups = cfg.nprojects = 0;
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

/* Adds c's numbers to the entry name of obj (created with zeros first). */
static json_t *cnt_add(json_t *obj, const char *name, const struct cnt *c)
{
	json_t *e = json_object_get(obj, name);
	if (e == NULL) {
		e = json_object();
		if (e == NULL || json_object_set_new(obj, name, e) != 0)
			return NULL; /* a name that is not UTF-8 */
	}
	static const char *const f[] = {"requests",    "passed",          "rate_limited",
	                                "cache_reads", "cache_creations", "tokens"};
	const uint64_t v[] = {c->requests,    c->passed,          c->rate_limited,
	                      c->cache_reads, c->cache_creations, c->tokens};
	for (int i = 0; i < 6; i++)
		json_object_set_new(
		    e, f[i],
		    json_integer(json_integer_value(json_object_get(e, f[i])) + (json_int_t)v[i]));
	return e;
}

static void cnt_json(json_t *models, json_t *scopes, const struct cnt *c)
{
	if (c->requests == 0)
		return;
	if (c->model[0] != '\0')
		cnt_add(models, c->model, c);
	if (c->scope[0] != '\0') {
		json_t *s = cnt_add(scopes, c->scope, c);
		if (s != NULL && c->model[0] != '\0') {
			json_t *sm = json_object_get(s, "models");
			if (sm == NULL) {
				sm = json_object();
				json_object_set_new(s, "models", sm);
			}
			cnt_add(sm, c->model, c);
		}
	}
}

void mock_limits_stats_more(json_t *root)
{
	json_t *models = json_object(), *scopes = json_object();
	for (size_t i = 0; cnts != NULL && i < CNT_SLOTS; i++)
		if (cnts[i].used)
			cnt_json(models, scopes, &cnts[i]);
	cnt_json(models, scopes, &cnt_other);
	json_object_set_new(root, "models", models);
	json_object_set_new(root, "scopes", scopes);
	json_object_set_new(root, "cache_reads", json_integer((json_int_t)cache_reads_total));
	json_object_set_new(root, "cache_creations",
	                    json_integer((json_int_t)cache_creations_total));
	json_object_set_new(root, "tokens", json_integer((json_int_t)tokens_total));
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
	else if (cfg.form == HDR_WHOLE_SECONDS)
		snprintf(v, sizeof(v), "%llu", (unsigned long long)((ms + 999) / 1000));
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

/* One budget's three headers: "requests"/"tokens"/"input-tokens"/"output-tokens". */
static void budget_headers(struct evkeyvalq *h, const char *what, double limit, double level,
                           double capacity)
{
	char n[64];
	double rem = floor(level);
	bool only_remaining = !cfg.anthropic && cfg.form == HDR_REMAINING_ONLY;
	if (cfg.anthropic)
		snprintf(n, sizeof(n), "anthropic-ratelimit-%s-limit", what);
	else
		snprintf(n, sizeof(n), "x-ratelimit-limit-%s", what);
	if (!only_remaining)
		add_num(h, n, limit);
	if (cfg.anthropic)
		snprintf(n, sizeof(n), "anthropic-ratelimit-%s-remaining", what);
	else
		snprintf(n, sizeof(n), "x-ratelimit-remaining-%s", what);
	add_num(h, n, rem < 0 ? 0 : rem);
	if (only_remaining)
		return;
	if (cfg.anthropic)
		snprintf(n, sizeof(n), "anthropic-ratelimit-%s-reset", what);
	else
		snprintf(n, sizeof(n), "x-ratelimit-reset-%s", what);
	add_reset(h, n, (uint64_t)ceil((capacity - level) * 60000.0 / limit));
}

/* The headers describe the model group's budget where it has one, else the top level's.
 * Input and output tokens only for a model group, Anthropic style. */
static void ratelimit_headers(struct evkeyvalq *h, const struct budget *top, const struct group *g,
                              const struct budget *gb)
{
	if (g != NULL && g->l.rpm > 0)
		budget_headers(h, "requests", g->l.rpm, gb->rq_level, rq_capacity(&g->l));
	else if (cfg.top.rpm > 0)
		budget_headers(h, "requests", cfg.top.rpm, top->rq_level, rq_capacity(&cfg.top));
	if (g != NULL && g->l.tpm > 0)
		budget_headers(h, "tokens", g->l.tpm, gb->tk_level, tk_capacity(&g->l));
	else if (cfg.top.tpm > 0)
		budget_headers(h, "tokens", cfg.top.tpm, top->tk_level, tk_capacity(&cfg.top));
	if (g != NULL && cfg.anthropic && g->l.itpm > 0)
		budget_headers(h, "input-tokens", g->l.itpm, gb->in_level, in_capacity(&g->l));
	if (g != NULL && cfg.anthropic && g->l.otpm > 0)
		budget_headers(h, "output-tokens", g->l.otpm, gb->out_level, out_capacity(&g->l));
}

static void retry_headers(struct evkeyvalq *h, uint64_t wait_ms)
{
	char v[32];
	if (!cfg.retry_after || cfg.gemini) /* Gemini: RetryInfo in the body only */
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

/* A JSON text into a fresh buffer. */
static struct evbuffer *json_buffer(json_t *j)
{
	struct evbuffer *b = evbuffer_new();
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	evbuffer_add(b, s != NULL ? s : "{}", s != NULL ? strlen(s) : 2);
	free(s);
	json_decref(j);
	return b;
}

/* Gemini's 429 (PROVIDERS.md §5, §11): RESOURCE_EXHAUSTED with a QuotaFailure
 * naming the budget (quotaId), its limit (quotaValue, a string as protobuf's
 * JSON writes int64) and the model, and RetryInfo.retryDelay (seconds with
 * decimals) the wait. */
static struct evbuffer *gemini_body(const char *quota_id, double limit, const char *model,
                                    uint64_t wait_ms)
{
	char value[32], delay[32];
	snprintf(value, sizeof(value), "%.0f", limit);
	snprintf(delay, sizeof(delay), "%.3fs", (double)wait_ms / 1000.0);
	return json_buffer(json_pack(
	    "{s:{s:i,s:s,s:s,s:[{s:s,s:[{s:s,s:s,s:{s:s},s:s}]},{s:s,s:s}]}}", "error", "code", 429,
	    "message",
	    "You exceeded your current quota, please check your plan and billing details.",
	    "status", "RESOURCE_EXHAUSTED", "details", "@type",
	    "type.googleapis.com/google.rpc.QuotaFailure", "violations", "quotaMetric",
	    "generativelanguage.googleapis.com/generate_content_requests", "quotaId", quota_id,
	    "quotaDimensions", "model", model, "quotaValue", value, "@type",
	    "type.googleapis.com/google.rpc.RetryInfo", "retryDelay", delay));
}

/* OpenRouter's two 402s (PROVIDERS.md §11): the transient one names its reason. */
static struct evbuffer *openrouter_402(bool in_flight)
{
	if (in_flight)
		return json_buffer(json_pack(
		    "{s:{s:i,s:s,s:{s:s,s:s}}}", "error", "code", 402, "message",
		    "Your in-flight requests would exceed your credit balance. Please retry "
		    "shortly.",
		    "metadata", "reason", "in_flight_budget_exhausted", "limit_source",
		    "openrouter_in_flight_budget"));
	return json_buffer(json_pack("{s:{s:i,s:s}}", "error", "code", 402, "message",
	                             "Insufficient credits. Add more using "
	                             "https://openrouter.ai/settings/credits"));
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

/* ---------- scopes, model groups, budgets ---------- */

/* Where the budgets of a request live: its project, or its key. */
struct scope {
	const char *name; /* project id or key hex: stats, cache, openai-project */
	const char *org, *ws;
	struct budget *top, *groups; /* groups: NULL without model_limits (or memory) */
	bool project;
};

/* The model group of a model: its entry, else "*" (for a named model), else none. */
static int find_group(const char *model)
{
	int star = -1;
	for (int g = 0; g < cfg.ngroups; g++)
		for (size_t i = 0; i < cfg.groups[g].nmodels; i++) {
			const char *m = cfg.groups[g].models[i];
			if (strcmp(m, model) == 0)
				return g;
			if (m[0] == '*' && m[1] == '\0')
				star = g;
		}
	return model[0] != '\0' ? star : -1;
}

static bool project_has(const struct project *p, const unsigned char *sha)
{
	if (sha == NULL)
		return false;
	for (size_t i = 0; i < p->nkeys; i++)
		if (memcmp(p->keys[i], sha, 32) == 0)
			return true;
	return false;
}

/* The scope of a request: the first project that lists its key (and matches the
 * OpenAI-Project / OpenAI-Organization it names), else the key itself. Returns 401
 * when it names a project or organization its key may not bill. */
static int resolve_scope(const struct mock_limit_in *in, struct mock_key *k, struct scope *sc,
                         const char **code, const char **msg)
{
	sc->name = k->hex;
	sc->org = "org-mock";
	sc->ws = NULL;
	sc->top = &k->b;
	sc->groups = cfg.ngroups > 0 ? key_groups(k) : NULL;
	sc->project = false;
	if (cfg.nprojects == 0)
		return 0;
	const char *wp = in->want_project, *wo = in->want_org;
	struct project *pick = NULL;
	for (int i = 0; i < cfg.nprojects && pick == NULL; i++) {
		struct project *p = &cfg.projects[i];
		if ((wp == NULL || strcmp(p->id, wp) == 0) &&
		    (wo == NULL || strcmp(p->org, wo) == 0) && project_has(p, in->key_sha))
			pick = p;
	}
	if (pick == NULL && (wp != NULL || wo != NULL)) {
		*code = wp != NULL ? "mismatched_project" : "mismatched_organization";
		*msg = wp != NULL
		           ? "OpenAI-Project header should match project for API key"
		           : "OpenAI-Organization header should match organization for API key";
		return 401;
	}
	if (pick != NULL) {
		sc->name = pick->id;
		sc->org = pick->org;
		sc->ws = pick->ws;
		sc->top = &pick->top;
		sc->groups = cfg.ngroups > 0 ? pick->groups : NULL;
		sc->project = true;
	}
	return 0;
}

/* What a request charges: tokens (tpm), input tokens (itpm), output tokens (otpm).
 * Cache reads are not in any of them. */
struct costs {
	long total, input, output;
	long produced; /* output tokens the answer will produce (otpm_counts: produced) */
};

/* The output tokens an otpm bucket counts. */
static long out_cost(const struct limits *l, const struct costs *c)
{
	return l->otpm_produced ? c->produced : c->output;
}

/* How messages name things: the model of the budget, the organization. */
struct names {
	const char *model, *org, *org_a; /* org_a: "(mock)" of the Anthropic messages */
};

static void refuse(struct mock_limit_out *out, const char *type, const char *msg, const char *rid)
{
	/* terse_429: what Azure and most OpenAI-compatible gateways say, which
	 * teaches a client nothing but that it was refused. */
	if (cfg.terse)
		msg = "Rate limit exceeded.";
	out->status = 429;
	out->body = mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : type,
	                            "rate_limit_exceeded", msg, NULL, rid);
}

/* A request the budget can never admit: 429 without retry-after. */
static bool too_large(const struct limits *l, const struct costs *c, const struct names *nm,
                      const char *rid, struct mock_limit_out *out)
{
	char msg[512];
	const char *what = NULL;
	double limit = 0;
	long req = 0;
	if (l->tpm > 0 && (double)c->total > tk_capacity(l)) {
		snprintf(msg, sizeof(msg),
		         "Request too large for %s in organization %s on tokens per min (TPM): "
		         "Limit %.0f, Requested %ld. The input or output tokens must be reduced in "
		         "order to run successfully.",
		         nm->model, nm->org, l->tpm, c->total);
		refuse(out, "tokens", msg, rid);
		return true;
	}
	if (l->minute && l->itpm > 0 && (double)c->input > l->itpm) {
		what = "input", limit = l->itpm, req = c->input;
	} else if (l->minute && l->otpm > 0 && (double)out_cost(l, c) > l->otpm) {
		what = "output", limit = l->otpm, req = out_cost(l, c);
	} else {
		return false;
	}
	snprintf(msg, sizeof(msg),
	         "Request too large for %s in organization %s: %ld %s tokens, the limit is %.0f "
	         "%s tokens per minute. The input or output tokens must be reduced in order to "
	         "run successfully.",
	         nm->model, nm->org, req, what, limit, what);
	refuse(out, "tokens", msg, rid);
	return true;
}

/* The request and token buckets of one budget: false when they admit the request;
 * else a 429 in out and the time until it could pass in *wait. */
static bool buckets_refuse(const struct limits *l, const struct budget *b, const struct costs *c,
                           const struct names *nm, const char *rid, struct mock_limit_out *out,
                           uint64_t *wait)
{
	char msg[512], dur[32];
	if (l->rpm > 0 && b->rq_level < 1) {
		*wait = (uint64_t)ceil((1 - b->rq_level) * 60000.0 / l->rpm);
		mock_go_duration(*wait, dur, sizeof(dur));
		if (cfg.gemini) {
			out->status = 429;
			out->body = gemini_body("GenerateRequestsPerMinutePerProjectPerModel",
			                        l->rpm, nm->model, *wait);
			return true;
		}
		if (cfg.anthropic)
			snprintf(msg, sizeof(msg),
			         "This request would exceed the rate limit for your organization "
			         "(%s) of %.0f requests per minute. Please try again later.",
			         nm->org_a, l->rpm);
		else
			snprintf(
			    msg, sizeof(msg),
			    "Rate limit reached for requests in organization %s on requests "
			    "per min (RPM): Limit %.0f, Used %.0f, Requested 1. Please try again "
			    "in %s. Visit https://platform.openai.com/account/rate-limits to "
			    "learn more.",
			    nm->org, l->rpm, l->rpm - floor(b->rq_level), dur);
		refuse(out, "requests", msg, rid);
		return true;
	}
	if (l->tpm > 0 && b->tk_level < (double)c->total) {
		*wait = (uint64_t)ceil(((double)c->total - b->tk_level) * 60000.0 / l->tpm);
		mock_go_duration(*wait, dur, sizeof(dur));
		if (cfg.gemini) {
			out->status = 429;
			out->body = gemini_body("GenerateContentInputTokensPerModelPerMinute",
			                        l->tpm, nm->model, *wait);
			return true;
		}
		if (cfg.anthropic)
			snprintf(msg, sizeof(msg),
			         "This request would exceed the rate limit for your organization "
			         "(%s) of %.0f tokens per minute. Please try again later.",
			         nm->org_a, l->tpm);
		else
			snprintf(
			    msg, sizeof(msg),
			    "Rate limit reached for %s in organization %s on tokens per min "
			    "(TPM): Limit %.0f, Used %.0f, Requested %ld. Please try again in %s. "
			    "Visit https://platform.openai.com/account/rate-limits to learn more.",
			    nm->model, nm->org, l->tpm, tk_capacity(l) - floor(b->tk_level),
			    c->total, dur);
		refuse(out, "tokens", msg, rid);
		return true;
	}
	bool input = l->itpm > 0 && b->in_level < (double)c->input;
	if (input || (l->otpm > 0 && b->out_level < (double)out_cost(l, c))) {
		double per_min = input ? l->itpm : l->otpm;
		double lack =
		    input ? (double)c->input - b->in_level : (double)out_cost(l, c) - b->out_level;
		*wait = (uint64_t)ceil(lack * 60000.0 / per_min);
		snprintf(msg, sizeof(msg),
		         "This request would exceed the rate limit for your organization (%s) of "
		         "%.0f %s tokens per minute. Please try again later.",
		         nm->org_a, per_min, input ? "input" : "output");
		refuse(out, "tokens", msg, rid);
		return true;
	}
	return false;
}

/* The requests of one day (rpd): false when the day has room; else a 429 in out and
 * the time until the next day in *wait. Gemini names the quota
 * GenerateRequestsPerDayPerProjectPerModel (PROVIDERS.md §5: a PerDay quotaId). */
static bool day_refuse(const struct limits *l, struct budget *b, const struct names *nm,
                       const char *rid, struct mock_limit_out *out, uint64_t now, uint64_t *wait)
{
	if (l->rpd <= 0)
		return false;
	uint64_t day = day_of(now);
	if (b->day != day) {
		b->day = day;
		b->day_used = 0;
	}
	if (b->day_used < l->rpd)
		return false;
	*wait = day_origin_ms + (day + 1) * cfg.day_ms - now;
	out->status = 429;
	if (cfg.gemini) {
		out->body = gemini_body("GenerateRequestsPerDayPerProjectPerModel", l->rpd,
		                        nm->model, *wait);
		return true;
	}
	char msg[512], dur[32];
	mock_go_duration(*wait, dur, sizeof(dur));
	if (cfg.anthropic)
		snprintf(msg, sizeof(msg),
		         "This request would exceed the rate limit for your organization (%s) of "
		         "%.0f requests per day. Please try again later.",
		         nm->org_a, l->rpd);
	else
		snprintf(msg, sizeof(msg),
		         "Rate limit reached for %s in organization %s on requests per day (RPD): "
		         "Limit %.0f, Used %.0f, Requested 1. Please try again in %s. Visit "
		         "https://platform.openai.com/account/rate-limits to learn more.",
		         nm->model, nm->org, l->rpd, b->day_used, dur);
	refuse(out, "requests", msg, rid);
	return true;
}

static void charge(const struct limits *l, struct budget *b, const struct costs *c)
{
	if (l->rpm > 0)
		b->rq_level -= 1;
	if (l->tpm > 0)
		b->tk_level -= (double)c->total;
	if (l->rpd > 0)
		b->day_used += 1;
	if (l->itpm > 0)
		b->in_level -= (double)c->input;
	if (l->otpm > 0)
		b->out_level -= (double)out_cost(l, c);
}

/* Windows are kept to the microsecond: a client that waits out retry-after-ms
 * from the 429's arrival must never be counted inside, one that is early by a
 * fraction of a millisecond must be. */
static bool in_window(const struct budget *b, uint64_t now_us)
{
	return b != NULL && b->window_end_us != 0 && now_us >= b->window_open_us &&
	       now_us < b->window_end_us;
}

/* A request already on its way when the 429 left can not be recalled:
 * window_grace_ms after a window opened, arrivals are not counted. */
static bool violates(const struct budget *b, uint64_t now_us)
{
	return in_window(b, now_us) && now_us >= b->window_open_us + cfg.window_grace_us;
}

/* A 429 advertising adv_us leaves now: its window opens (a new one, with its
 * grace, when none is open) or the open one lasts at least that long. */
static void window_open(struct budget *b, uint64_t now_us, uint64_t adv_us)
{
	if (now_us >= b->window_end_us)
		b->window_open_us = now_us;
	if (now_us + adv_us > b->window_end_us)
		b->window_end_us = now_us + adv_us;
}

void mock_limits_window_sent(const struct mock_window *w)
{
	if (w->budget != NULL && w->gen == window_gen)
		window_open(w->budget, mock_now_us(), w->adv_us);
}

/* The key of a prefix in the prompt cache: prefix, model and scope. */
static void cache_key(const struct mock_limit_in *in, const char *scope, unsigned char out[32])
{
	unsigned char buf[32 + 64 + 1 + 64];
	size_t ml = strnlen(in->model, 63), sl = strnlen(scope, 63), n = 0;
	memcpy(buf, in->prefix_sha, 32);
	n = 32;
	memcpy(buf + n, in->model, ml);
	n += ml;
	buf[n++] = '\0';
	memcpy(buf + n, scope, sl);
	n += sl;
	unsigned int len = 0;
	EVP_Digest(buf, n, out, &len, EVP_sha256(), NULL);
}

/* Decides the fate of one LLM request at arrival; charges the buckets when it passes. */
void mock_limits_check(const struct mock_limit_in *in, struct evkeyvalq *h, const char *rid,
                       struct mock_limit_out *out)
{
	uint64_t now_us = mock_now_us(), now = now_us / 1000;
	struct mock_key *k = key_get(in->key_sha);
	char msg[512];
	uint64_t wait = 0;
	struct budget *wb = NULL; /* the budget whose window a 429 advertises */
	const char *model = in->model != NULL ? in->model : "";

	out->key = NULL;
	out->status = 0;
	out->body = NULL;
	out->cache_read = out->cache_creation = 0;
	out->window = (struct mock_window){0};
	k->requests++;

	struct scope sc;
	const char *ecode = NULL, *emsg = NULL;
	int deny = resolve_scope(in, k, &sc, &ecode, &emsg);
	int gi = cfg.ngroups > 0 ? find_group(model) : -1;
	const struct group *g = gi >= 0 && sc.groups != NULL ? &cfg.groups[gi] : NULL;
	struct budget *gb = g != NULL ? &sc.groups[gi] : NULL;
	struct cnt *cn = cnt_get(cfg.nprojects > 0 ? sc.name : "", model);
	cn->requests++;

	/* The prompt cache: a live prefix is read, not charged. */
	unsigned char ckey[32];
	struct centry *hit = NULL;
	if (in->cacheable) {
		cache_key(in, sc.name, ckey);
		hit = cache_find(ckey, now);
	}
	long cread = hit != NULL ? in->prefix_tokens : 0;
	struct costs c = {in->cost_tokens - cread, in->input_tokens - cread, in->output_tokens,
	                  in->produced_tokens};
	struct names top_nm = {"gpt-mock", sc.org, sc.project ? sc.org : "mock"};
	struct names g_nm = {model, sc.org, sc.project ? sc.org : "mock"};

	bool top_win = in_window(sc.top, now_us), g_win = in_window(gb, now_us);
	if (violates(sc.top, now_us) || violates(gb, now_us))
		mock_stats.window_violations++;
	uint64_t bucket_now = bucket_clock_ms(now_us);
	refill(&cfg.top, sc.top, bucket_now);
	if (gb != NULL)
		refill(&g->l, gb, bucket_now);

	if (deny != 0) {
		out->status = deny;
		out->body = mock_error_body(false, "invalid_request_error", ecode, emsg, NULL, rid);
	} else if (cfg.payment == 2) {
		out->status = 402;
		out->body = openrouter_402(false);
	} else if (cfg.payment == 1 && cfg.concurrency > 0 && k->in_flight >= cfg.concurrency) {
		/* OpenRouter's in-flight budget: what is in flight passes first */
		out->status = 402;
		out->body = openrouter_402(true);
		snprintf(msg, sizeof(msg), "%g", cfg.retry_after_s > 0 ? cfg.retry_after_s : 2.0);
		evhttp_add_header(h, "retry-after", msg);
	} else if (cfg.quota) {
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
	} else if (cfg.lockout && (top_win || g_win)) {
		/* A provider that punishes: refused again, and the window starts over. */
		wb = top_win ? sc.top : gb;
		wait = cfg.retry_after_s > 0 ? (uint64_t)(cfg.retry_after_s * 1000.0)
		                             : (wb->window_end_us - now_us + 999) / 1000;
		out->status = 429;
		out->body =
		    mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : "requests",
		                    "rate_limit_exceeded",
		                    "Rate limit reached: requests inside the retry-after "
		                    "window are refused.",
		                    NULL, rid);
	} else if (cfg.concurrency > 0 && k->in_flight >= cfg.concurrency) {
		out->status = 429;
		snprintf(msg, sizeof(msg),
		         "Too many concurrent requests: limit %ld. Please try again in 1s.",
		         cfg.concurrency);
		out->body =
		    mock_error_body(cfg.anthropic, cfg.anthropic ? "rate_limit_error" : "requests",
		                    "rate_limit_exceeded", msg, NULL, rid);
		retry_headers(h, 1000);
	} else if (too_large(&cfg.top, &c, &top_nm, rid, out) ||
	           (g != NULL && too_large(&g->l, &c, &g_nm, rid, out))) {
		/* out is set: no retry-after, it can never pass */
	} else if (day_refuse(&cfg.top, sc.top, &top_nm, rid, out, now, &wait)) {
		wb = sc.top;
	} else if (g != NULL && day_refuse(&g->l, gb, &g_nm, rid, out, now, &wait)) {
		wb = gb;
	} else if (buckets_refuse(&cfg.top, sc.top, &c, &top_nm, rid, out, &wait)) {
		wb = sc.top;
	} else if (g != NULL && buckets_refuse(&g->l, gb, &c, &g_nm, rid, out, &wait)) {
		wb = gb;
	} else {
		charge(&cfg.top, sc.top, &c);
		if (gb != NULL)
			charge(&g->l, gb, &c);
	}

	if (out->status != 0) {
		if (out->status == 429) {
			mock_stats.rate_limited++;
			k->rate_limited++;
			cn->rate_limited++;
		}
		if (wb != NULL) {
			retry_headers(h, wait);
			uint64_t adv = cfg.retry_after && cfg.retry_after_s > 0
			                   ? (uint64_t)(cfg.retry_after_s * 1000.0)
			                   : wait;
			/* The window opens when the 429 leaves: a client can not
			 * know of it before. Now, or when the answer held for
			 * latency_ms goes (mock_limits_window_sent). */
			if (cfg.latency_ms == 0)
				window_open(wb, now_us, adv * 1000);
			else
				out->window = (struct mock_window){wb, adv * 1000, window_gen};
		}
	} else if (capacity_exceeded(now)) {
		out->status = cfg.overload[overload_turn++ % (unsigned)cfg.noverload];
		out->body = status_body(out->status, rid);
		if (out->status == 429) {
			mock_stats.rate_limited++;
			k->rate_limited++;
			cn->rate_limited++;
			retry_headers(h, 1000);
		}
	} else if (cfg.error_rate > 0 && rand01() < cfg.error_rate) {
		out->status = cfg.error_status;
		out->body = status_body(out->status, rid);
	}
	if (cfg.headers && deny == 0)
		ratelimit_headers(h, sc.top, g, gb);
	if (cfg.nprojects > 0 && deny == 0) {
		if (in->messages) {
			evhttp_add_header(h, "anthropic-organization-id", sc.org);
			if (sc.ws != NULL)
				evhttp_add_header(h, "anthropic-workspace-id", sc.ws);
		} else {
			evhttp_add_header(h, "openai-organization", sc.org);
			evhttp_add_header(h, "openai-project", sc.name);
		}
	}
	if (out->status == 0) {
		k->in_flight++;
		out->key = k;
		cn->passed++;
		cn->tokens += (uint64_t)(c.total > 0 ? c.total : 0);
		tokens_total += (uint64_t)(c.total > 0 ? c.total : 0);
		if (in->cacheable) {
			if (hit != NULL) {
				hit->expires_ms = now + (uint64_t)cfg.cache_ttl_ms;
				out->cache_read = in->prefix_tokens;
				cn->cache_reads++;
				cache_reads_total++;
			} else {
				cache_put(ckey, now);
				out->cache_creation = in->prefix_tokens;
				cn->cache_creations++;
				cache_creations_total++;
			}
		}
	}
}
