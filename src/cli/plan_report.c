/* SPDX-License-Identifier: Apache-2.0 */
/* plan_report — the table, the warning and the JSON of `pacerd plan`. */
#include "cli/plan_report.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cli/plan.h"

/* ---- numbers, rates, durations, instants ---- */

static void trim_zeros(char *s)
{
	if (strchr(s, '.') == NULL || strchr(s, 'e') != NULL)
		return;
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == '0')
		s[--n] = '\0';
	if (n > 0 && s[n - 1] == '.')
		s[--n] = '\0';
}

/* About three significant digits, no trailing zeros: 60, 16.7, 1.5, 0.0167. */
static char *fmt_sig(double x, char *buf, size_t len)
{
	if (x >= 100)
		snprintf(buf, len, "%.0f", x);
	else if (x >= 10)
		snprintf(buf, len, "%.1f", x);
	else if (x >= 1)
		snprintf(buf, len, "%.2f", x);
	else
		snprintf(buf, len, "%.3g", x);
	trim_zeros(buf);
	return buf;
}

/* A limit as a flag would take it: exact, no separators (60, 0.5, 16.67). */
static char *fmt_limit(double x, char *buf, size_t len)
{
	if (x == floor(x) && x < 1e15)
		snprintf(buf, len, "%.0f", x);
	else
		snprintf(buf, len, "%.6g", x);
	return buf;
}

/* A whole count with thousands separators: 180,000. */
static char *fmt_count(double n, char *buf, size_t len)
{
	char digits[64];
	snprintf(digits, sizeof(digits), "%.0f", n);
	size_t nd = strlen(digits), o = 0;
	for (size_t i = 0; i < nd && o + 2 < len; i++) {
		if (i > 0 && (nd - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

char *plan_report_duration(double ms, char *buf, size_t len)
{
	char n[32];
	if (!(ms < 1e15)) { /* also NaN */
		snprintf(buf, len, "over 30,000 years");
	} else if (ms < 999.5) {
		snprintf(buf, len, "%s ms", fmt_sig(ms, n, sizeof(n)));
	} else if (ms < 9995) {
		snprintf(buf, len, "%s s", fmt_sig(ms / 1000, n, sizeof(n)));
	} else {
		long long s = llround(ms / 1000);
		long long min = (s + 30) / 60;
		if (s < 60)
			snprintf(buf, len, "%lld s", s);
		else if (s < 3600 && s % 60 != 0)
			snprintf(buf, len, "%lld min %02lld s", s / 60, s % 60);
		else if (s < 3600)
			snprintf(buf, len, "%lld min", s / 60);
		else if (min % 60 != 0)
			snprintf(buf, len, "%lld h %02lld min", min / 60, min % 60);
		else
			snprintf(buf, len, "%lld h", min / 60);
	}
	return buf;
}

enum rate_unit { PER_S, PER_MIN, PER_H };

/* The unit a constraint speaks in; by size for the others. */
static enum rate_unit natural_unit(enum plan_limit l, double rps)
{
	if (l == PLAN_RPS)
		return PER_S;
	if (l == PLAN_RPM)
		return PER_MIN;
	if (l == PLAN_RPH)
		return PER_H;
	if (rps >= 1)
		return PER_S;
	return rps * 60 >= 1 ? PER_MIN : PER_H;
}

static char *fmt_rate(double rps, enum rate_unit u, char *buf, size_t len)
{
	static const double per[] = {1, 60, 3600};
	static const char *const name[] = {"req/s", "req/min", "req/h"};
	char n[32];
	snprintf(buf, len, "%s %s", fmt_sig(rps * per[u], n, sizeof(n)), name[u]);
	return buf;
}

/* "60 req/min (1 req/s)": the natural unit, then its neighbour. */
static char *fmt_throughput(double rps, enum plan_limit binding, char *buf, size_t len)
{
	enum rate_unit u = natural_unit(binding, rps);
	enum rate_unit other = u == PER_MIN ? PER_S : PER_MIN;
	char a[48], b[48];
	snprintf(buf, len, "%s (%s)", fmt_rate(rps, u, a, sizeof(a)),
	         fmt_rate(rps, other, b, sizeof(b)));
	return buf;
}

/* "2025-06-01 14:23:20 CEST", or ISO 8601 with the offset for JSON. */
static char *fmt_local(int64_t ms, bool iso, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (localtime_r(&t, &tm) == NULL) {
		snprintf(buf, len, "-");
		return buf;
	}
	if (!iso) {
		strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm);
		return buf;
	}
	char zone[16];
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm); /* +0200 -> +02:00 */
	snprintf(buf + n, len - n, "%.3s:%.2s", zone, zone + 3);
	return buf;
}

/* What a --time-budget would say: whole seconds, or whole minutes. */
static char *fmt_budget_arg(int64_t ms, enum plan_unit u, char *buf, size_t len)
{
	if (u == PLAN_UNIT_S)
		snprintf(buf, len, "%llds", (long long)(ms / 1000));
	else
		snprintf(buf, len, "%lldm", (long long)(ms / 60000));
	return buf;
}

/* "rpm 60", "tpm 200000, 900 tokens each", "concurrency 3, 1.5 s each". */
static char *fmt_constraint(const struct plan_input *in, enum plan_limit l, double value, char *buf,
                            size_t len)
{
	char v[32], each[48];
	fmt_limit(value, v, sizeof(v));
	if (l == PLAN_TPM && in->avg_tokens > 0)
		snprintf(buf, len, "tpm %s, %s tokens each", v,
		         fmt_limit(in->avg_tokens, each, sizeof(each)));
	else if (l == PLAN_CONCURRENCY && in->latency_ms > 0)
		snprintf(buf, len, "concurrency %s, %s each", v,
		         plan_report_duration(in->latency_ms, each, sizeof(each)));
	else
		snprintf(buf, len, "%s %s", plan_limit_name(l), v);
	return buf;
}

bool plan_report_utf8_locale(const char *lc_all, const char *lc_ctype, const char *lang)
{
	const char *const order[] = {lc_all, lc_ctype, lang};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (order[i] != NULL && order[i][0] != '\0')
			return strcasestr(order[i], "utf-8") != NULL ||
			       strcasestr(order[i], "utf8") != NULL;
	return false;
}

/* ---- the table ---- */

#define MAX_ROWS 32

struct row {
	bool rule; /* a separator line, not a row */
	char label[128];
	char value[256];
};

struct table {
	struct row rows[MAX_ROWS];
	size_t n;
};

__attribute__((format(printf, 3, 4))) static void add_row(struct table *t, const char *label,
                                                          const char *fmt, ...)
{
	if (t->n == MAX_ROWS)
		return;
	struct row *r = &t->rows[t->n++];
	r->rule = false;
	snprintf(r->label, sizeof(r->label), "%s", label);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->value, sizeof(r->value), fmt, ap);
	va_end(ap);
}

static void add_rule(struct table *t)
{
	if (t->n < MAX_ROWS)
		t->rows[t->n++] = (struct row){.rule = true};
}

static void add_heading(struct table *t, const struct plan_input *in, const struct plan_source *src)
{
	char n[48];
	add_row(t, "pacerd plan", "%s requests", fmt_count((double)in->requests, n, sizeof(n)));
	if (src == NULL)
		return;
	if (src->model_pattern != NULL && !src->key_override)
		add_row(t, "plan", "%s (model_plans '%s' for model %s, provider %s)", src->plan,
		        src->model_pattern, src->model, src->provider);
	else if (src->model != NULL && !src->key_override)
		add_row(t, "plan", "%s (provider %s; no model_plans row for model %s)", src->plan,
		        src->provider, src->model);
	else if (src->key == NULL)
		add_row(t, "plan", "%s (provider %s)", src->plan, src->provider);
	else if (src->key_override)
		add_row(t, "plan", "%s (keys: entry for %s, key %s)", src->plan, src->provider,
		        src->key);
	else
		add_row(t, "plan", "%s (provider %s; no keys: entry for key %s)", src->plan,
		        src->provider, src->key);
}

/* One row per constraint with what it allows; those given that cannot be
 * counted say why. */
static void add_constraints(struct table *t, const struct plan_input *in,
                            const struct plan_result *r)
{
	char label[128], rate[48];
	size_t before = t->n;
	for (size_t i = 0; i < r->n_constraints; i++) {
		const struct plan_constraint *c = &r->constraints[i];
		double rps = 1000.0 / c->interval_ms;
		fmt_constraint(in, c->limit, c->value, label, sizeof(label));
		add_row(t, label, "%s%s",
		        fmt_rate(rps, natural_unit(c->limit, rps), rate, sizeof(rate)),
		        c->limit == r->binding ? "  <- binds" : "");
	}
	if (r->tpm_ignored)
		add_row(t, fmt_constraint(in, PLAN_TPM, in->tpm, label, sizeof(label)),
		        "not counted: no --avg-tokens");
	if (in->concurrency > 0 && in->latency_ms <= 0)
		add_row(t,
		        fmt_constraint(in, PLAN_CONCURRENCY, in->concurrency, label, sizeof(label)),
		        "no limit without --latency-ms");
	if (t->n == before)
		add_row(t, "constraints", "none");
}

static const struct plan_constraint *binding_constraint(const struct plan_result *r)
{
	for (size_t i = 0; i < r->n_constraints; i++)
		if (r->constraints[i].limit == r->binding)
			return &r->constraints[i];
	return NULL; /* unbounded */
}

static void add_pace(struct table *t, const struct plan_input *in, const struct plan_result *r)
{
	char a[128], b[48];
	unsigned long long workers = r->workers;
	if (r->unbounded) {
		add_row(t, "binding constraint", "none: the run is not limited");
		add_row(t, "throughput", "unbounded");
		add_row(t, "effective concurrency", "%llu in flight at most",
		        (unsigned long long)r->effective_concurrency);
		add_row(t, "workers", "%llu, all at once", workers);
		add_row(t, "stagger", "none");
		return;
	}
	const struct plan_constraint *c = binding_constraint(r);
	add_row(t, "binding constraint", "%s",
	        fmt_constraint(in, c->limit, c->value, a, sizeof(a)));
	add_row(t, "throughput", "%s", fmt_throughput(r->throughput_rps, r->binding, a, sizeof(a)));
	add_row(t, "effective concurrency", "%llu in flight at most",
	        (unsigned long long)r->effective_concurrency);
	add_row(t, "workers", "%llu, %s every %s", workers,
	        workers == 1 ? "sending" : "each sending",
	        plan_report_duration(r->worker_interval_ms, b, sizeof(b)));
	if (workers == 1)
		add_row(t, "stagger", "none: one worker");
	else
		add_row(t, "stagger", "%s between workers",
		        plan_report_duration(r->stagger_ms, b, sizeof(b)));
}

static void add_outcome(struct table *t, const struct plan_input *in, const struct plan_result *r)
{
	char a[64], b[48];
	add_row(t, "estimated duration", "%s",
	        r->unbounded ? "not limited" : plan_report_duration(r->duration_ms, a, sizeof(a)));
	add_row(t, "start", "%s", fmt_local(r->start_ms, false, a, sizeof(a)));
	if (r->unbounded)
		add_row(t, "completion", "not limited");
	else if (r->end_known)
		add_row(t, "completion", "%s", fmt_local(r->end_ms, false, a, sizeof(a)));
	else
		add_row(t, "completion", "past the year 9999");
	if (r->has_tokens)
		add_row(t, "estimated tokens", "%s", fmt_count(r->tokens, a, sizeof(a)));
	else
		add_row(t, "estimated tokens", "unknown: no --avg-tokens");
	if (r->has_budget)
		add_row(t, "time budget", "%s: %s",
		        plan_report_duration((double)in->budget_ms, b, sizeof(b)),
		        r->fits ? "fits" : "does not fit");
	else
		add_row(t, "time budget", "none");
}

struct box {
	const char *h, *v;
	const char *corner[3][3]; /* [top, middle, bottom][left, middle, right] */
};

static const struct box unicode_box = {
    "\u2500",
    "\u2502",
    {{"\u250c", "\u252c", "\u2510"},
     {"\u251c", "\u253c", "\u2524"},
     {"\u2514", "\u2534", "\u2518"}},
};
static const struct box ascii_box = {"-", "|", {{"+", "+", "+"}, {"+", "+", "+"}, {"+", "+", "+"}}};

/* Columns on screen: every UTF-8 sequence counts one (names from a
 * configuration file may hold any). */
static size_t display_width(const char *s)
{
	size_t w = 0;
	for (; *s != '\0'; s++)
		w += ((unsigned char)*s & 0xC0) != 0x80;
	return w;
}

/* Each non-ASCII character becomes '?'. */
static void to_ascii(char *s)
{
	char *o = s;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x80)
			*o++ = (char)c;
		else if ((c & 0xC0) != 0x80)
			*o++ = '?';
	}
	*o = '\0';
}

static void repeat(FILE *out, const char *s, size_t n)
{
	while (n-- > 0)
		fputs(s, out);
}

static void hline(FILE *out, const struct box *b, int pos, size_t w1, size_t w2)
{
	fputs(b->corner[pos][0], out);
	repeat(out, b->h, w1 + 2);
	fputs(b->corner[pos][1], out);
	repeat(out, b->h, w2 + 2);
	fputs(b->corner[pos][2], out);
	fputc('\n', out);
}

static void render(FILE *out, struct table *t, bool ascii)
{
	const struct box *b = ascii ? &ascii_box : &unicode_box;
	size_t w1 = 0, w2 = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct row *r = &t->rows[i];
		if (ascii) {
			to_ascii(r->label);
			to_ascii(r->value);
		}
		if (!r->rule && display_width(r->label) > w1)
			w1 = display_width(r->label);
		if (!r->rule && display_width(r->value) > w2)
			w2 = display_width(r->value);
	}
	hline(out, b, 0, w1, w2);
	for (size_t i = 0; i < t->n; i++) {
		const struct row *r = &t->rows[i];
		if (r->rule) {
			hline(out, b, 1, w1, w2);
			continue;
		}
		fprintf(out, "%s %s%*s %s %s%*s %s\n", b->v, r->label,
		        (int)(w1 - display_width(r->label)), "", b->v, r->value,
		        (int)(w2 - display_width(r->value)), "", b->v);
	}
	hline(out, b, 2, w1, w2);
}

/* "rpm 100 and tpm 90000" or, as flags, "--rpm 100 --tpm 90000". */
static void fmt_changes(const struct plan_result *r, bool as_flags, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < r->n_changes && o < len; i++) {
		char v[32];
		const char *sep = i == 0 ? "" : as_flags ? " " : " and ";
		int n = snprintf(buf + o, len - o, "%s%s%s %s", sep, as_flags ? "--" : "",
		                 plan_limit_name(r->changes[i].limit),
		                 fmt_limit(r->changes[i].value, v, sizeof(v)));
		if (n < 0)
			break;
		o += (size_t)n;
	}
}

static void print_warning(FILE *out, const struct plan_input *in, const struct plan_result *r)
{
	char n[48], dur[48], budget[48], arg[32], changes[256], flags[256];
	plan_report_duration((double)in->budget_ms, budget, sizeof(budget));
	fprintf(out, "\nwarning: %s requests take %s; the time budget is %s.\noptions:\n",
	        fmt_count((double)in->requests, n, sizeof(n)),
	        plan_report_duration(r->duration_ms, dur, sizeof(dur)), budget);
	if (r->fitting_requests > 0)
		fprintf(out, "  - fewer requests: %s fit in %s (--requests %llu)\n",
		        fmt_count((double)r->fitting_requests, n, sizeof(n)), budget,
		        (unsigned long long)r->fitting_requests);
	else
		fprintf(out, "  - fewer requests: not one fits in %s\n", budget);
	fprintf(out, "  - a longer budget: %s (--time-budget %s)\n",
	        plan_report_duration((double)r->needed_budget_ms, dur, sizeof(dur)),
	        fmt_budget_arg(r->needed_budget_ms, in->budget_unit, arg, sizeof(arg)));
	fmt_changes(r, false, changes, sizeof(changes));
	fmt_changes(r, true, flags, sizeof(flags));
	fprintf(out, "  - a higher limit: %s (%s)\n", changes, flags);
}

/* Whether the run's pace comes from no configured rate: then the lanes find
 * their own concurrency, which is worth explaining. */
static bool no_rate_limit(const struct plan_result *r)
{
	for (size_t i = 0; i < r->n_constraints; i++)
		if (r->constraints[i].limit != PLAN_CONCURRENCY)
			return false;
	return true;
}

/* How the configuration's lanes set their concurrency, in a paragraph; ""
 * when it has nothing to add (no configuration, a rate limit, a fixed
 * limit). */
static void concurrency_note(const struct plan_source *src, const struct plan_result *r, char *buf,
                             size_t len)
{
	buf[0] = '\0';
	if (src == NULL || !src->concurrency.known || !no_rate_limit(r))
		return;
	const struct plan_concurrency *c = &src->concurrency;
	if (!c->adaptive) {
		snprintf(
		    buf, len,
		    "concurrency: fixed at max_concurrent %u (concurrency.adaptive: false); no "
		    "rate limit is configured.",
		    c->max);
		return;
	}
	const char *latency =
	    strcmp(c->mode, "aimd") == 0 ? ""
	    : strcmp(c->mode, "gradient") == 0
	        ? "Every lane also follows the latency of its answers "
	          "(concurrency.mode: gradient): "
	        : "Against a provider that says nothing of its limits (no rate-limit "
	          "headers, no refusal: a self-hosted engine such as vLLM, SGLang, TGI, "
	          "llama.cpp or Ollama) the limit follows the latency of the answers "
	          "instead (concurrency.mode: auto): ";
	int n = snprintf(buf, len,
	                 "concurrency: no rate limit is configured, so the lanes find their "
	                 "own, between %u and max_concurrent %u. A refusal (429, 503, 529) "
	                 "halves the limit (AIMD); until the first one it is open up to %u. ",
	                 c->min, c->max, c->max);
	if (latency[0] == '\0' || n < 0 || (size_t)n >= len)
		return;
	snprintf(buf + n, len - (size_t)n,
	         "%sit starts at %u in flight and doubles per round trip while first tokens "
	         "come without waiting, then holds where requests stop waiting inside the "
	         "server (a first token more than %.2g times its queue-free time, in units "
	         "of the answer's own time per token, is a wait; a uniformly slower server is "
	         "not a fuller one). Plan such a run with --concurrency set to the knee "
	         "/status shows and --latency-ms measured at that load.",
	         latency, c->slow_start < c->max ? c->slow_start : c->max, 1 + c->tolerance);
}

/* Writes s wrapped at 78 columns. */
static void print_wrapped(FILE *out, const char *s)
{
	size_t col = 0;
	while (*s != '\0') {
		size_t w = strcspn(s, " ");
		if (col > 0 && col + 1 + w > 78) {
			fputc('\n', out);
			col = 0;
		} else if (col > 0) {
			fputc(' ', out);
			col++;
		}
		fwrite(s, 1, w, out);
		col += w;
		s += w;
		s += strspn(s, " ");
	}
	fputc('\n', out);
}

void plan_report_text(FILE *out, const struct plan_input *in, const struct plan_result *r,
                      const struct plan_source *src, bool ascii)
{
	struct table t;
	t.n = 0;
	add_heading(&t, in, src);
	add_rule(&t);
	add_constraints(&t, in, r);
	add_rule(&t);
	add_pace(&t, in, r);
	add_rule(&t);
	add_outcome(&t, in, r);
	render(out, &t, ascii);
	if (!r->fits)
		print_warning(out, in, r);
	char note[1024];
	concurrency_note(src, r, note, sizeof(note));
	if (note[0] != '\0') {
		fputc('\n', out);
		print_wrapped(out, note);
	}
}

/* ---- JSON ---- */

/* Whole numbers as JSON integers (1000, not 1000.0); not finite: null. */
static json_t *json_num(double x)
{
	if (!isfinite(x))
		return json_null();
	if (x == floor(x) && fabs(x) < 9007199254740992.0)
		return json_integer((json_int_t)x);
	return json_real(x);
}

static json_t *json_str_or_null(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

/* json_object_set_new refuses (-1, value released) a NULL object or value:
 * every allocation failure ends up in the sum of these. */
static int put(json_t *o, const char *key, json_t *value)
{
	return json_object_set_new(o, key, value) == 0 ? 0 : -1;
}

static json_t *json_source(const struct plan_source *src)
{
	json_t *o = json_object();
	int rc = put(o, "config", json_str_or_null(src->config));
	rc |= put(o, "provider", json_str_or_null(src->provider));
	rc |= put(o, "plan", json_str_or_null(src->plan));
	rc |= put(o, "key_sha256", json_str_or_null(src->key));
	rc |= put(o, "key_override", json_boolean(src->key_override));
	rc |= put(o, "model", json_str_or_null(src->model));
	rc |= put(o, "model_pattern", json_str_or_null(src->model_pattern));
	if (src->concurrency.known)
		rc |= put(o, "concurrency",
		          json_pack("{s:s,s:b,s:i,s:i,s:i,s:f}", "mode", src->concurrency.mode,
		                    "adaptive", src->concurrency.adaptive, "min",
		                    (int)src->concurrency.min, "max", (int)src->concurrency.max,
		                    "slow_start", (int)src->concurrency.slow_start, "tolerance",
		                    src->concurrency.tolerance));
	if (rc != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *json_constraints(const struct plan_result *r)
{
	json_t *a = json_array();
	for (size_t i = 0; i < r->n_constraints && a != NULL; i++) {
		const struct plan_constraint *c = &r->constraints[i];
		json_t *o = json_object();
		int rc = put(o, "name", json_string(plan_limit_name(c->limit)));
		rc |= put(o, "value", json_num(c->value));
		rc |= put(o, "interval_ms", json_num(c->interval_ms));
		rc |= put(o, "throughput_rps", json_num(1000.0 / c->interval_ms));
		rc |= put(o, "binding", json_boolean(c->limit == r->binding));
		if (rc != 0 || json_array_append_new(a, o) != 0) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/* Constraints given that cannot be counted: tpm without avg-tokens,
 * concurrency without latency. */
static json_t *json_not_counted(const struct plan_input *in, const struct plan_result *r)
{
	json_t *a = json_array();
	int rc = 0;
	if (r->tpm_ignored)
		rc |= json_array_append_new(a, json_string("tpm"));
	if (in->concurrency > 0 && in->latency_ms <= 0)
		rc |= json_array_append_new(a, json_string("concurrency"));
	if (rc != 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *json_options(const struct plan_input *in, const struct plan_result *r)
{
	if (r->fits)
		return json_null();
	char arg[32];
	json_t *o = json_object();
	json_t *limits = json_array();
	int rc = put(o, "requests", json_integer((json_int_t)r->fitting_requests));
	rc |= put(o, "time_budget_ms", json_integer(r->needed_budget_ms));
	rc |= put(
	    o, "time_budget",
	    json_string(fmt_budget_arg(r->needed_budget_ms, in->budget_unit, arg, sizeof(arg))));
	for (size_t i = 0; i < r->n_changes && limits != NULL; i++) {
		json_t *c = json_object();
		int crc = put(c, "name", json_string(plan_limit_name(r->changes[i].limit)));
		crc |= put(c, "value", json_num(r->changes[i].value));
		if (crc != 0 || json_array_append_new(limits, c) != 0)
			rc = -1;
	}
	rc |= put(o, "limits", limits);
	if (rc != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int put_pace(json_t *o, const struct plan_result *r)
{
	int rc = put(o, "binding",
	             r->unbounded ? json_null() : json_string(plan_limit_name(r->binding)));
	rc |= put(o, "unbounded", json_boolean(r->unbounded));
	rc |= put(o, "throughput_rps", json_num(r->throughput_rps));
	/* From the interval, not the rate: 60000 / 60 is 1000, 16.67 x 60 is not. */
	rc |=
	    put(o, "throughput_rpm", json_num(r->unbounded ? INFINITY : 60000.0 / r->interval_ms));
	rc |= put(o, "interval_ms", json_num(r->interval_ms));
	rc |= put(o, "effective_concurrency", json_integer((json_int_t)r->effective_concurrency));
	rc |= put(o, "workers", json_integer((json_int_t)r->workers));
	rc |= put(o, "worker_interval_ms", json_num(r->worker_interval_ms));
	rc |= put(o, "stagger_ms", json_num(r->stagger_ms));
	return rc;
}

static int put_outcome(json_t *o, const struct plan_input *in, const struct plan_result *r)
{
	char a[64];
	bool has_end = !r->unbounded && r->end_known;
	int rc = put(o, "duration_ms", r->unbounded ? json_null() : json_num(r->duration_ms));
	rc |= put(o, "duration",
	          r->unbounded ? json_null()
	                       : json_string(plan_report_duration(r->duration_ms, a, sizeof(a))));
	rc |= put(o, "start", json_string(fmt_local(r->start_ms, true, a, sizeof(a))));
	rc |= put(o, "completion",
	          has_end ? json_string(fmt_local(r->end_ms, true, a, sizeof(a))) : json_null());
	rc |= put(o, "estimated_tokens", r->has_tokens ? json_num(r->tokens) : json_null());
	rc |= put(o, "time_budget_ms", r->has_budget ? json_integer(in->budget_ms) : json_null());
	rc |= put(o, "fits", json_boolean(r->fits));
	rc |= put(o, "options", json_options(in, r));
	return rc;
}

int plan_report_json(FILE *out, const struct plan_input *in, const struct plan_result *r,
                     const struct plan_source *src)
{
	json_t *o = json_object();
	int rc = put(o, "requests", json_integer((json_int_t)in->requests));
	if (src != NULL)
		rc |= put(o, "source", json_source(src));
	rc |= put(o, "constraints", json_constraints(r));
	rc |= put(o, "not_counted", json_not_counted(in, r));
	rc |= put_pace(o, r);
	rc |= put_outcome(o, in, r);
	char note[1024];
	concurrency_note(src, r, note, sizeof(note));
	if (note[0] != '\0')
		rc |= put(o, "concurrency_note", json_string(note));
	if (rc == 0)
		rc = json_dumpf(o, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (rc != 0 || fputc('\n', out) == EOF)
		return -1;
	return 0;
}
