/* SPDX-License-Identifier: Apache-2.0 */
/* plan_cli — the command line of `pacerd plan` (see plan_cli.h): flags from
 * one table (which also writes --help), the plan a lane would get from a
 * configuration, flags overriding it, then plan_compute and plan_report. */
#include "cli/plan_cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/plan.h"
#include "cli/plan_report.h"
#include "core/config.h"
#include "provider/model.h"

#include <jansson.h>

extern char **environ;

#define EXIT_FITS 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define EXIT_DOES_NOT_FIT 3

#define MAX_WORKERS 1000000

struct cli {
	struct plan_input flags; /* 0 = not given */
	const char *config_path;
	const char *provider;
	const char *key;
	const char *model;
	bool json, ascii, help;
};

enum arg_kind {
	ARG_COUNT,    /* uint64_t, 1 .. PLAN_MAX_VALUE */
	ARG_NUMBER,   /* double, PLAN_MIN_VALUE .. PLAN_MAX_VALUE */
	ARG_WORKERS,  /* unsigned, 1 .. MAX_WORKERS */
	ARG_DURATION, /* the budget: flags.budget_ms and flags.budget_unit */
	ARG_STRING,   /* const char *, not empty */
	ARG_FLAG,     /* bool, no value */
};

struct option_row {
	const char *name;
	const char *alias;   /* or NULL */
	const char *metavar; /* NULL for ARG_FLAG */
	enum arg_kind kind;
	size_t offset; /* of the destination in struct cli */
	const char *help;
};

#define AT(member) offsetof(struct cli, member)

static const struct option_row options[] = {
    {"--requests", NULL, "N", ARG_COUNT, AT(flags.requests), "requests in the run (required)"},
    {"--rps", NULL, "N", ARG_NUMBER, AT(flags.rps), "requests per second, at most"},
    {"--rpm", NULL, "N", ARG_NUMBER, AT(flags.rpm), "requests per minute, at most"},
    {"--rph", NULL, "N", ARG_NUMBER, AT(flags.rph), "requests per hour, at most"},
    {"--min-ms", NULL, "MS", ARG_NUMBER, AT(flags.min_ms),
     "milliseconds between two requests, at least"},
    {"--tpm", NULL, "N", ARG_NUMBER, AT(flags.tpm),
     "tokens per minute, at most (needs --avg-tokens)"},
    {"--avg-tokens", NULL, "N", ARG_NUMBER, AT(flags.avg_tokens),
     "tokens per request on average, prompt and answer"},
    {"--concurrency", NULL, "N", ARG_WORKERS, AT(flags.concurrency),
     "requests in flight at most: the client's workers"},
    {"--latency-ms", NULL, "MS", ARG_NUMBER, AT(flags.latency_ms),
     "one request's time, from sending it to the end of\n"
     "its answer (without it concurrency limits nothing)"},
    {"--time-budget", NULL, "DURATION", ARG_DURATION, AT(flags.budget_ms),
     "the time the run may take: 90s, 10m, 2h, or seconds"},
    {"--config", "-c", "FILE", ARG_STRING, AT(config_path),
     "the limits of the plan a lane gets in this\n"
     "configuration (PACERD_* variables applied, as at\n"
     "start); the flags above override them"},
    {"--provider", NULL, "NAME", ARG_STRING, AT(provider),
     "with -c: the provider (default: the default_provider)"},
    {"--key-sha256", NULL, "HEX", ARG_STRING, AT(key),
     "with -c: an API key's SHA-256, or its first 12+\n"
     "hex digits: the plan of the keys: entry it matches"},
    {"--model", NULL, "NAME", ARG_STRING, AT(model),
     "with -c: a model: the plan it gets (model_plans)\n"
     "and its group; without --requests, only those"},
    {"--json", NULL, NULL, ARG_FLAG, AT(json), "print one JSON object instead of the table"},
    {"--ascii", NULL, NULL, ARG_FLAG, AT(ascii),
     "draw the table with + - | (the default when the\n"
     "first of LC_ALL, LC_CTYPE, LANG set is not UTF-8)"},
    {"--help", "-h", NULL, ARG_FLAG, AT(help), "print this help and exit"},
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static void usage(FILE *out)
{
	fputs("usage: pacerd plan --requests N [LIMITS] [--time-budget DURATION] [--json]\n"
	      "       pacerd plan --requests N -c FILE [--provider NAME] [--key-sha256 HEX] ...\n"
	      "       pacerd plan -c FILE [--provider NAME] [--key-sha256 HEX] --model NAME\n"
	      "\n"
	      "The execution plan of a run of N requests under rate limits: effective\n"
	      "concurrency, delay per worker and stagger between workers, throughput,\n"
	      "duration (N / throughput) and completion time, tokens, and the binding\n"
	      "constraint. A run that does not fit --time-budget gets a warning with the\n"
	      "requests that fit, the budget needed and the limits needed.\n"
	      "\n",
	      out);
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_row *o = &options[i];
		char flag[64];
		snprintf(flag, sizeof(flag), "%s%s%s%s%s", o->alias ? o->alias : "",
		         o->alias ? ", " : "", o->name, o->metavar ? " " : "",
		         o->metavar ? o->metavar : "");
		fprintf(out, "  %-24s ", flag);
		for (const char *h = o->help; *h != '\0'; h++) {
			fputc(*h, out);
			if (*h == '\n')
				fprintf(out, "  %-24s ", "");
		}
		fputc('\n', out);
	}
	fputs("\nExit status: 0 the run fits the time budget (or none was given), 3 it does\n"
	      "not, 2 bad usage, 1 an invalid configuration file.\n",
	      out);
}

/* Only plain decimal numbers: strtod would take "  +1", "inf", "0x10". */
static bool plain_number(const char *s)
{
	if (!isdigit((unsigned char)s[0]) && s[0] != '.')
		return false;
	return strpbrk(s, "xX") == NULL;
}

static int parse_count(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno != 0 || v < 1 ||
	    (double)v > PLAN_MAX_VALUE)
		return -1;
	*out = v;
	return 0;
}

static int parse_number(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!plain_number(s) || *end != '\0' || errno != 0 || !isfinite(v) || v < PLAN_MIN_VALUE ||
	    v > PLAN_MAX_VALUE)
		return -1;
	*out = v;
	return 0;
}

static int parse_workers(const char *s, unsigned *out)
{
	uint64_t v;
	if (parse_count(s, &v) != 0 || v > MAX_WORKERS)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* What a flag's value must look like, for the error message. */
static const char *expected(enum arg_kind kind)
{
	switch (kind) {
	case ARG_COUNT:
		return "a whole number from 1 to 1000000000000";
	case ARG_NUMBER:
		return "a positive number (at most 1e12)";
	case ARG_WORKERS:
		return "a whole number from 1 to 1000000";
	case ARG_DURATION:
		return "a duration such as 90s, 10m, 2h or 45 (seconds)";
	default:
		return "a value";
	}
}

static int parse_value(const struct option_row *o, const char *v, struct cli *cli)
{
	void *dst = (char *)cli + o->offset;
	switch (o->kind) {
	case ARG_COUNT:
		return parse_count(v, dst);
	case ARG_NUMBER:
		return parse_number(v, dst);
	case ARG_WORKERS:
		return parse_workers(v, dst);
	case ARG_DURATION:
		return plan_parse_duration(v, dst, &cli->flags.budget_unit);
	case ARG_STRING:
		*(const char **)dst = v;
		return v[0] != '\0' ? 0 : -1;
	case ARG_FLAG:
		*(bool *)dst = true;
		return 0;
	}
	return -1;
}

static const struct option_row *find_option(const char *name, size_t len)
{
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_row *o = &options[i];
		if ((strlen(o->name) == len && strncmp(o->name, name, len) == 0) ||
		    (o->alias && strlen(o->alias) == len && strncmp(o->alias, name, len) == 0))
			return o;
	}
	return NULL;
}

/* Fills cli from argv[1..] ("--flag VALUE" or "--flag=VALUE"). 0, or -1 with
 * a message naming the flag. */
static int parse_args(int argc, char **argv, struct cli *cli, char *err, size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		const struct option_row *o = find_option(a, len);
		if (o == NULL) {
			snprintf(err, errlen,
			         a[0] == '-' ? "unknown flag '%s'" : "unexpected argument '%s'", a);
			return -1;
		}
		if (o->metavar == NULL && eq != NULL) {
			snprintf(err, errlen, "%s takes no value", o->name);
			return -1;
		}
		const char *value = eq ? eq + 1 : NULL;
		if (o->metavar != NULL && value == NULL) {
			if (i + 1 == argc) {
				snprintf(err, errlen, "%s needs a value: %s", o->name,
				         expected(o->kind));
				return -1;
			}
			value = argv[++i];
		}
		if (parse_value(o, value, cli) != 0) {
			snprintf(err, errlen, "%s: expected %s, got '%s'", o->name,
			         expected(o->kind), value);
			return -1;
		}
	}
	return 0;
}

/* A hash or a prefix of one: 12 to 64 hex digits, lower-cased into out[65]. */
static int normalize_key(const char *key, char *out)
{
	size_t n = strlen(key);
	if (n < 12 || n > 64)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)key[i]))
			return -1;
		out[i] = (char)tolower((unsigned char)key[i]);
	}
	out[n] = '\0';
	return 0;
}

/* The combinations a flag alone cannot reject. */
static int check_args(const struct cli *cli, char *keybuf, char *err, size_t errlen)
{
	if (cli->config_path == NULL &&
	    (cli->provider != NULL || cli->key != NULL || cli->model != NULL)) {
		snprintf(err, errlen, "%s needs -c FILE",
		         cli->provider ? "--provider"
		         : cli->key    ? "--key-sha256"
		                       : "--model");
		return -1;
	}
	if (cli->flags.requests == 0 && cli->model == NULL) {
		snprintf(err, errlen, "--requests is required");
		return -1;
	}
	if (cli->model != NULL &&
	    (strlen(cli->model) == 0 || strlen(cli->model) > CONFIG_MODEL_MAX)) {
		snprintf(err, errlen, "--model: expected 1 to %d characters", CONFIG_MODEL_MAX);
		return -1;
	}
	if (cli->key != NULL && normalize_key(cli->key, keybuf) != 0) {
		snprintf(err, errlen, "--key-sha256: expected 12 to 64 hex digits, got '%s'",
		         cli->key);
		return -1;
	}
	if (cli->flags.tpm > 0 && cli->flags.avg_tokens <= 0) {
		snprintf(err, errlen,
		         "--tpm needs --avg-tokens (tokens per request) to be counted");
		return -1;
	}
	return 0;
}

/* The limits of a configured plan; max_concurrent is a ceiling on requests in
 * flight, not the client's workers. */
static void input_from_plan(const struct plan_conf *p, struct plan_input *in)
{
	in->rps = p->max_requests_per_second;
	in->rpm = p->max_requests_per_minute;
	in->rph = p->max_requests_per_hour;
	in->min_ms = p->min_ms_per_request;
	in->tpm = p->max_tokens_per_minute;
	in->concurrency = p->max_concurrent;
	in->concurrency_is_workers = false;
}

/* Every flag given replaces what the configuration said. */
static void overlay_flags(const struct plan_input *flags, struct plan_input *in)
{
	in->requests = flags->requests;
	double *const dst[] = {&in->rps, &in->rpm,        &in->rph,       &in->min_ms,
	                       &in->tpm, &in->avg_tokens, &in->latency_ms};
	const double src[] = {flags->rps, flags->rpm,        flags->rph,       flags->min_ms,
	                      flags->tpm, flags->avg_tokens, flags->latency_ms};
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
		if (src[i] > 0)
			*dst[i] = src[i];
	if (flags->concurrency > 0) {
		in->concurrency = flags->concurrency;
		in->concurrency_is_workers = true;
	}
	in->budget_ms = flags->budget_ms;
	in->budget_unit = flags->budget_unit;
}

static void list_providers(const struct config *cfg, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < cfg->n_providers && o < len; i++) {
		int n = snprintf(buf + o, len - o, "%s%s", i ? ", " : "", cfg->providers[i].name);
		if (n < 0)
			break;
		o += (size_t)n;
	}
}

/* Loads the configuration and takes the plan of (provider, key) into *in and
 * *src (whose strings point into the returned config). NULL with a message
 * and *status set (1: the file; 2: an unknown provider) on failure. */
static struct config *plan_from_config(const struct cli *cli, const char *key,
                                       struct plan_input *in, struct plan_source *src, int *status,
                                       char *err, size_t errlen)
{
	struct config *cfg = config_load(cli->config_path, environ, err, errlen);
	if (cfg == NULL) {
		*status = EXIT_ERROR;
		return NULL;
	}
	const char *name = cli->provider ? cli->provider : cfg->default_provider;
	const struct provider_conf *prov = config_provider(cfg, name);
	if (prov == NULL) {
		char names[512];
		list_providers(cfg, names, sizeof(names));
		snprintf(err, errlen, "--provider: no provider '%s' in %s (there: %s)", name,
		         cfg->source, names);
		config_free(cfg);
		*status = EXIT_USAGE;
		return NULL;
	}
	/* the plan a lane for this key and model gets (config_plan_for's order) */
	const struct key_conf *k = config_key_for(cfg, prov, key);
	const struct model_rule *row =
	    cli->model != NULL
	        ? config_model_rule(prov->model_plans, prov->n_model_plans, cli->model)
	        : NULL;
	const struct plan_conf *plan = config_plan_for(cfg, prov, key, cli->model);
	input_from_plan(plan, in);
	*src = (struct plan_source){
	    .config = cfg->source,
	    .provider = prov->name,
	    .plan = plan->name,
	    .key = key,
	    .key_override = k != NULL && k->own_plan,
	    .model = cli->model,
	    .model_pattern = row != NULL ? row->pattern : NULL,
	};
	static const char *const modes[] = {[CONCURRENCY_AUTO] = "auto",
	                                    [CONCURRENCY_AIMD] = "aimd",
	                                    [CONCURRENCY_GRADIENT] = "gradient"};
	src->concurrency.known = true;
	src->concurrency.adaptive = plan->concurrency.adaptive;
	src->concurrency.mode = modes[plan->concurrency.mode];
	src->concurrency.min = plan->concurrency.min;
	src->concurrency.max = plan->max_concurrent;
	src->concurrency.slow_start = plan->concurrency.slow_start;
	src->concurrency.tolerance = plan->concurrency.tolerance;
	return cfg;
}

static int64_t wall_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int report(const struct cli *cli, const struct plan_input *in, const struct plan_source *src)
{
	char err[256];
	struct plan_result r;
	if (plan_compute(in, wall_clock_ms(), &r, err, sizeof(err)) != 0) {
		fprintf(stderr, "pacerd plan: %s\n", err);
		return EXIT_USAGE;
	}
	int rc = 0;
	if (cli->json) {
		rc = plan_report_json(stdout, in, &r, src);
	} else {
		bool utf8 =
		    plan_report_utf8_locale(getenv("LC_ALL"), getenv("LC_CTYPE"), getenv("LANG"));
		plan_report_text(stdout, in, &r, src, cli->ascii || !utf8);
	}
	/* A report cut short (a full disk, a closed pipe) must not pass for one. */
	if (rc != 0 || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "pacerd plan: cannot write the report\n");
		return EXIT_ERROR;
	}
	return r.fits ? EXIT_FITS : EXIT_DOES_NOT_FIT;
}

/* --model without --requests: which plan and which group, nothing computed. */
static int report_model(const struct cli *cli, const struct config *cfg,
                        const struct plan_source *src)
{
	const struct provider_conf *prov = config_provider(cfg, src->provider);
	const struct model_rule *g =
	    config_model_rule(prov->model_groups, prov->n_model_groups, cli->model);
	const char *how = "model_groups";
	if (g == NULL) {
		size_t n;
		const struct model_rule *rows = model_builtin_groups(prov, &n);
		g = config_model_rule(rows, n, cli->model);
		how = "built in";
	}
	const char *group = model_group(prov, cli->model);
	if (cli->json) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s?, s:b}", "provider",
		                      src->provider, "model", cli->model, "group",
		                      group ? group : cli->model, "group_pattern",
		                      g ? g->pattern : NULL, "plan", src->plan, "plan_pattern",
		                      src->model_pattern, "key_override", src->key_override);
		int rc = o != NULL ? json_dumpf(o, stdout, JSON_INDENT(2)) : -1;
		json_decref(o);
		if (rc != 0 || fputc('\n', stdout) == EOF)
			return EXIT_ERROR;
	} else {
		printf("provider  %s\nmodel     %s\n", src->provider, cli->model);
		if (g != NULL)
			printf("group     %s (%s: '%s')\n", group, how, g->pattern);
		else
			printf("group     %s (its own: no model_groups row)\n", cli->model);
		if (src->key_override)
			printf("plan      %s (keys: entry for key %s)\n", src->plan, src->key);
		else if (src->model_pattern != NULL)
			printf("plan      %s (model_plans: '%s')\n", src->plan, src->model_pattern);
		else
			printf("plan      %s (provider %s)\n", src->plan, src->provider);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "pacerd plan: cannot write the report\n");
		return EXIT_ERROR;
	}
	return EXIT_FITS;
}

int plan_main(int argc, char **argv)
{
	struct cli cli;
	memset(&cli, 0, sizeof(cli));
	char err[1024] = "", key[65];
	int parsed = parse_args(argc, argv, &cli, err, sizeof(err));
	if (parsed == 0 && cli.help) {
		usage(stdout);
		return EXIT_FITS;
	}
	if (parsed != 0 || check_args(&cli, key, err, sizeof(err)) != 0) {
		fprintf(stderr, "pacerd plan: %s (pacerd plan --help lists the flags)\n", err);
		return EXIT_USAGE;
	}
	struct plan_input in;
	memset(&in, 0, sizeof(in));
	struct plan_source src;
	struct config *cfg = NULL;
	if (cli.config_path != NULL) {
		int status;
		cfg = plan_from_config(&cli, cli.key ? key : NULL, &in, &src, &status, err,
		                       sizeof(err));
		if (cfg == NULL) {
			fprintf(stderr, "pacerd plan: %s\n", err);
			return status;
		}
	}
	if (cli.flags.requests == 0) { /* --model alone (check_args) */
		int rc = report_model(&cli, cfg, &src);
		config_free(cfg);
		return rc;
	}
	overlay_flags(&cli.flags, &in);
	int rc = report(&cli, &in, cfg ? &src : NULL);
	config_free(cfg);
	return rc;
}
