/* SPDX-License-Identifier: Apache-2.0 */
/* config — YAML -> struct config (DESIGN §10).
 *
 * The schema is a set of tables (struct opt): key, type, bounds, default and, for
 * strings, a checker that validates and normalises. One generic walker applies a
 * table to a YAML mapping, so every key gets the same type checks, the same
 * "unknown key" error and the same file:line:column reporting; the few sections
 * that are maps of named objects (providers, plans) or lists (keys) have their own
 * small parsers that reuse the walker for each entry.
 *
 * Every value the file or the environment sets is recorded as an "origin" (field
 * address -> YAML mark or variable name), so the checks that involve several fields
 * (min <= max_concurrent, duplicate prefixes, plan references) can still point
 * at the line the user wrote. */
#include "core/config.h"
#include "core/daily.h"
#include "core/key_index.h"
#include "core/model_memo.h"
#include "core/priority.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_FILE_BYTES (16u << 20) /* a config larger than this is a mistake */
#define MAX_NAME_LEN 64
#define PATH_LEN 160 /* dotted key path used in messages */
#define MSG_LEN 256  /* one value error, without its location */
#define DEFAULTS_SOURCE "(built-in defaults)"

/* Enum fields are written through an int: make sure that is their size. */
_Static_assert(sizeof(enum log_level) == sizeof(int), "enum size");
_Static_assert(sizeof(enum key_source) == sizeof(int), "enum size");
_Static_assert(sizeof(enum dialect) == sizeof(int), "enum size");
_Static_assert(sizeof(enum jitter_mode) == sizeof(int), "enum size");
_Static_assert(sizeof(enum agents_mode) == sizeof(int), "enum size");
_Static_assert(sizeof(enum fair_share) == sizeof(int), "enum size");
_Static_assert(sizeof(enum cached_input) == sizeof(int), "enum size");

struct ctx;

enum opt_type {
	OPT_UINT,    /* unsigned, bounds lo..hi */
	OPT_U64,     /* uint64_t, bounds lo..UINT64_MAX */
	OPT_NUM,     /* double, bounds lo..hi (open ends with OPT_LO_OPEN/OPT_HI_OPEN) */
	OPT_BOOL,    /* true | false */
	OPT_STR,     /* char *, validated and normalised by ->check */
	OPT_ENUM,    /* int-sized enum, value = index in ->names */
	OPT_STRLIST, /* char ** at off, size_t count at off2, each element through ->check */
	OPT_SECTION, /* nested mapping, ->sub applies to the same base struct */
	OPT_CUSTOM,  /* ->parse handles the value node itself */
	OPT_RULES,   /* {pattern: value} mapping: struct model_rule * at off, size_t count
	              * at off2, each value through ->check */
};

#define OPT_LO_OPEN 1u
#define OPT_HI_OPEN 2u

/* Validates `in`; on success stores a malloc'd normalised copy in *out. */
typedef int (*str_check_fn)(const char *in, char **out, char *msg, size_t msglen);
typedef int (*custom_fn)(struct ctx *c, yaml_node_t *key, yaml_node_t *value);

struct opt {
	const char *key;
	enum opt_type type;
	size_t off;
	double lo, hi;
	unsigned flags;
	double dnum;      /* default of numbers, booleans (0/1) and enums (index) */
	const char *dstr; /* default of strings; NULL leaves the field NULL */
	const char *const *names;
	str_check_fn check;
	const struct opt *sub;
	size_t off2;
	custom_fn parse;
};

/* An origin: who set a field last. */
struct origin {
	const void *field;
	const char *env; /* variable name, or NULL: from the file at mark */
	yaml_mark_t mark;
};

struct ctx {
	const char *file; /* name used in messages */
	char *err;
	size_t errlen;
	yaml_document_t *doc;
	struct config *cfg;
	struct origin *origins;
	size_t n_origins, cap_origins;
	bool have_providers; /* a providers: section was given */
	yaml_mark_t providers_mark;
	yaml_mark_t *provider_marks; /* the name key of each provider, for messages */
	yaml_mark_t *key_marks;      /* each entry of keys: */
};

/* ---------------------------------------------------------------- messages */

static void set_err(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	if (!c->err || c->errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
}

/* Copies a user-supplied text for a message: one line, bounded, printable. */
static const char *shown(const char *s, char *buf, size_t len)
{
	size_t i = 0, max = len - 4;
	for (; i < max && s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];
		buf[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	if (s[i]) {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = '\0';
	return buf;
}

/* "FILE:LINE:COLUMN: prefix: message" (prefix may be empty). */
static int fail_mark(struct ctx *c, yaml_mark_t m, const char *prefix, const char *msg)
{
	set_err(c, "%s:%zu:%zu: %s%s%s", c->file, m.line + 1, m.column + 1, prefix,
	        *prefix ? ": " : "", msg);
	return -1;
}

static const struct origin *origin_of(const struct ctx *c, const void *field)
{
	for (size_t i = c->n_origins; i-- > 0;)
		if (c->origins[i].field == field)
			return &c->origins[i];
	return NULL;
}

static bool is_set(const struct ctx *c, const void *field)
{
	return origin_of(c, field) != NULL;
}

/* Reports a problem found after parsing, at whatever set `field`: the variable,
 * the file position, or `fallback` when the value is a built-in default. */
static int fail_field(struct ctx *c, const void *field, const yaml_mark_t *fallback,
                      const char *prefix, const char *msg)
{
	const struct origin *o = origin_of(c, field);
	if (o && o->env) {
		set_err(c, "%s: %s%s%s", o->env, prefix, *prefix ? ": " : "", msg);
		return -1;
	}
	if (o)
		return fail_mark(c, o->mark, prefix, msg);
	if (fallback)
		return fail_mark(c, *fallback, prefix, msg);
	set_err(c, "%s: %s%s%s", c->file, prefix, *prefix ? ": " : "", msg);
	return -1;
}

static int add_origin(struct ctx *c, const void *field, const char *env, yaml_mark_t mark)
{
	if (c->n_origins == c->cap_origins) {
		size_t cap = c->cap_origins ? 2 * c->cap_origins : 64;
		struct origin *o = realloc(c->origins, cap * sizeof(*o));
		if (!o) {
			set_err(c, "%s: out of memory", c->file);
			return -1;
		}
		c->origins = o;
		c->cap_origins = cap;
	}
	c->origins[c->n_origins++] = (struct origin){field, env, mark};
	return 0;
}

static void join_path(char *out, size_t len, const char *path, const char *key)
{
	int n = *path ? snprintf(out, len, "%s.%s", path, key) : snprintf(out, len, "%s", key);
	if (n < 0 || (size_t)n >= len)
		out[len - 1] = '\0'; /* a truncated path still names the place */
}

/* ------------------------------------------------------ names and helpers */

static const char *const log_level_names[] = {"debug", "info", "warn", "error", NULL};
/* The words of key_header are the headers' own names (provider/profile.c
 * knows them as headers; its unit test checks that the two agree). */
/* lint: provider-strings ok: the YAML words of key_header */
static const char *const key_source_names[] = {"authorization",  "x-api-key", "api-key",
                                               "x-goog-api-key", "query:key", NULL};
static const char *const dialect_names[] = {"openai", "anthropic", "azure", "ietf", "none", NULL};
static const char *const jitter_names[] = {"additive", "full", NULL};
static const char *const stream_usage_names[] = {"inject", "off", NULL};
static const char *const concurrency_mode_names[] = {"auto", "aimd", "gradient", NULL};
static const char *const agents_mode_names[] = {"off", "serialize", "reject", NULL};
static const char *const fair_share_names[] = {"agent_or_address", "agent", "address", "off", NULL};
static const char *const store_kind_names[] = {"local", "redis", NULL};
static const char *const store_on_error_names[] = {"local", "fail", NULL};
static const char *const cached_input_names[] = {"free", "charged", NULL};

const char *config_cached_input_name(enum cached_input c)
{
	return (unsigned)c < 2 ? cached_input_names[c] : "?";
}

const char *config_key_source_name(enum key_source k)
{
	return (unsigned)k < 5 ? key_source_names[k] : "?";
}

const char *config_dialect_name(enum dialect d)
{
	return (unsigned)d < 5 ? dialect_names[d] : "?";
}

static char *dup_lower(const char *s)
{
	char *d = strdup(s);
	for (char *p = d; p && *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return d;
}

static void *field_at(void *base, size_t off)
{
	return (char *)base + off;
}

static void free_strlist(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* ------------------------------------------------------------ host:port */

static bool valid_port(const char *s, unsigned *port)
{
	unsigned long v = 0;
	size_t n = strlen(s);
	if (n == 0 || n > 5 || strspn(s, "0123456789") != n)
		return false;
	v = strtoul(s, NULL, 10);
	if (v < 1 || v > 65535)
		return false;
	if (port)
		*port = (unsigned)v;
	return true;
}

static bool valid_hostname(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_')
			return false;
	return true;
}

static bool valid_ipv6(const char *s, size_t n)
{
	char buf[INET6_ADDRSTRLEN];
	struct in6_addr a;
	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return inet_pton(AF_INET6, buf, &a) == 1;
}

static int copy_host(const char *s, size_t n, char *host, size_t hostlen)
{
	if (!host)
		return 0;
	if (n >= hostlen)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	return 0;
}

int config_split_hostport(const char *s, char *host, size_t hostlen, unsigned *port)
{
	const char *colon;
	if (!s)
		return -1;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':' || !valid_ipv6(s + 1, (size_t)(end - s - 1)))
			return -1;
		if (!valid_port(end + 2, port))
			return -1;
		return copy_host(s + 1, (size_t)(end - s - 1), host, hostlen);
	}
	colon = strrchr(s, ':');
	/* A second ':' means a bare IPv6 address: ambiguous without brackets. */
	if (!colon || memchr(s, ':', (size_t)(colon - s)) ||
	    !valid_hostname(s, (size_t)(colon - s)) || !valid_port(colon + 1, port))
		return -1;
	return copy_host(s, (size_t)(colon - s), host, hostlen);
}

bool config_host_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	char buf[INET6_ADDRSTRLEN];
	size_t n;
	if (!host)
		return false;
	if (strcasecmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	n = strlen(host);
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') { /* tolerate "[::1]" */
		if (n - 2 >= sizeof(buf))
			return false;
		memcpy(buf, host + 1, n - 2);
		buf[n - 2] = '\0';
		host = buf;
	}
	if (inet_pton(AF_INET6, host, &a6) != 1)
		return false;
	if (IN6_IS_ADDR_LOOPBACK(&a6))
		return true;
	return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

/* --------------------------------------------------------- string checks */

static int check_any(const char *in, char **out, char *msg, size_t len)
{
	(void)msg;
	(void)len;
	*out = strdup(in);
	return 0;
}

/* state_dir: "" (the default) or an absolute path: a relative one would
 * depend on the directory pacerd happens to start in (systemd's is /). */
static int check_state_dir(const char *in, char **out, char *msg, size_t len)
{
	if (*in != '\0' && *in != '/') {
		snprintf(msg, len, "expected an absolute path, or \"\" for the default");
		return -1;
	}
	*out = strdup(in);
	return 0;
}

static int check_nonempty(const char *in, char **out, char *msg, size_t len)
{
	if (!*in) {
		snprintf(msg, len, "expected a non-empty string");
		return -1;
	}
	*out = strdup(in);
	return 0;
}

static int check_hhmm(const char *in, char **out, char *msg, size_t len)
{
	if (daily_parse_hhmm(in) < 0) {
		snprintf(msg, len, "expected a time of day as HH:MM (00:00 to 23:59), got '%.40s'",
		         in);
		return -1;
	}
	*out = strdup(in);
	return 0;
}

static int check_zone(const char *in, char **out, char *msg, size_t len)
{
	if (!daily_zone_known(in)) {
		snprintf(
		    msg, len,
		    "unknown time zone '%.60s' (an IANA name such as America/Los_Angeles, or UTC)",
		    in);
		return -1;
	}
	*out = strdup(in);
	return 0;
}

static int check_listen(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	if (config_split_hostport(in, NULL, 0, NULL) != 0) {
		snprintf(msg, len,
		         "expected host:port, [v6]:port or :port (port 1-65535), got '%s'",
		         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = strdup(in);
	return 0;
}

/* store.redis.address: host:port (a name, resolved without blocking the loop
 * at every connect), IP:port, [v6]:port, or unix:/absolute/path. */
static int check_store_address(const char *in, char **out, char *msg, size_t len)
{
	char b[80], host[256];
	unsigned port;
	if (strncmp(in, "unix:", 5) == 0) {
		if (in[5] != '/' || strlen(in + 5) >= 100) {
			snprintf(msg, len,
			         "expected unix:/absolute/path (under 100 bytes), got '%s'",
			         shown(in, b, sizeof(b)));
			return -1;
		}
	} else if (config_split_hostport(in, host, sizeof(host), &port) != 0 || port == 0 ||
	           host[0] == '\0') {
		snprintf(msg, len,
		         "expected host:port (redis.example.com:6379, 127.0.0.1:6379, "
		         "[::1]:6379) or unix:/path, got '%s'",
		         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = strdup(in);
	return 0;
}

/* store.redis.username, tls.server_name: printable, no space ("" = none). */
static int check_token(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	size_t n = strlen(in);
	bool ok = n <= 255;
	for (size_t i = 0; ok && i < n; i++)
		ok = in[i] > 0x20 && in[i] < 0x7f;
	if (!ok) {
		snprintf(msg, len,
		         "expected up to 255 printable characters without spaces, got '%s'",
		         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = strdup(in);
	return 0;
}

/* store.redis.key_prefix: printable, no space (it starts every key pacerd writes). */
static int check_key_prefix(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	size_t n = strlen(in);
	bool ok = n <= 64;
	for (size_t i = 0; ok && i < n; i++)
		ok = in[i] > 0x20 && in[i] < 0x7f;
	if (!ok) {
		snprintf(msg, len,
		         "expected up to 64 printable characters without spaces, got '%s'",
		         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = strdup(in);
	return 0;
}

/* admin.listen: like listen, or "" to disable the admin listener. */
static int check_listen_or_empty(const char *in, char **out, char *msg, size_t len)
{
	if (!*in) {
		*out = strdup(in);
		return 0;
	}
	return check_listen(in, out, msg, len);
}

static int check_name(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	size_t n = strlen(in);
	if (n == 0 || n > MAX_NAME_LEN || !valid_hostname(in, n)) {
		snprintf(msg, len,
		         "expected a name of 1 to %d letters, digits, '.', '-' or '_', got '%s'",
		         MAX_NAME_LEN, shown(in, b, sizeof(b)));
		return -1;
	}
	*out = strdup(in);
	return 0;
}

/* A byte a model name, a pattern or a group may hold: printable ASCII but
 * space, '"' and '\\' (tokens.h takes the same names from requests). */
static bool model_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/* A model_groups value: a group name, named like a model. */
static int check_group(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	size_t n = strlen(in);
	bool ok = n > 0 && n <= CONFIG_MODEL_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = model_byte((unsigned char)in[i]);
	if (!ok) {
		snprintf(msg, len,
		         "expected a group name of 1 to %d printable characters (no space, '\"' "
		         "or '\\\\'), got '%s'",
		         CONFIG_MODEL_MAX, shown(in, b, sizeof(b)));
		return -1;
	}
	*out = strdup(in);
	return 0;
}

int config_model_pattern(const char *pat, struct model_rule *rule, char *msg, size_t len)
{
	char b[80];
	size_t n = strlen(pat);
	unsigned literal = 0, prefix = 0;
	bool wild = false;
	if (n == 0 || n > CONFIG_MODEL_MAX) {
		snprintf(msg, len, "expected a model pattern of 1 to %d characters, got '%s'",
		         CONFIG_MODEL_MAX, shown(pat, b, sizeof(b)));
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)pat[i];
		if (!model_byte(c)) {
			snprintf(msg, len,
			         "model pattern '%s': character %zu cannot be in a model name "
			         "(printable ASCII but space, '\"' and '\\\\')",
			         shown(pat, b, sizeof(b)), i + 1);
			return -1;
		}
		if (c == '[') {
			/* fnmatch: [!...] or [^...] negate; a ']' first is a member */
			size_t j = i + 1;
			if (j < n && (pat[j] == '!' || pat[j] == '^'))
				j++;
			if (j < n && pat[j] == ']')
				j++;
			while (j < n && pat[j] != ']')
				j++;
			if (j >= n) {
				snprintf(msg, len,
				         "model pattern '%s': '[' at character %zu is not closed",
				         shown(pat, b, sizeof(b)), i + 1);
				return -1;
			}
			i = j;
			wild = true;
		} else if (c == '*' || c == '?') {
			wild = true;
		} else {
			literal++;
			if (!wild)
				prefix++;
		}
	}
	rule->literal = literal;
	rule->prefix = prefix;
	rule->exact = !wild;
	return 0;
}

const struct model_rule *config_model_rule(const struct model_rule *rules, size_t n,
                                           const char *model)
{
	const struct model_rule *best = NULL;
	if (model == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct model_rule *r = &rules[i];
		if (r->exact) {
			if (strcmp(r->pattern, model) == 0)
				return r;
			continue;
		}
		if (best != NULL && (best->exact || r->literal <= best->literal))
			continue;
		/* the literal start first: most rows fail there, without fnmatch */
		if (strncmp(r->pattern, model, r->prefix) != 0 ||
		    fnmatch(r->pattern, model, 0) != 0)
			continue;
		best = r;
	}
	return best;
}

/* Characters allowed in paths: printable ASCII but space, '?' and '#'. */
static bool valid_path_chars(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || *s == '?' ||
		    *s == '#')
			return false;
	return true;
}

/* Copies `s` without its trailing '/' characters. */
static char *dup_strip_slashes(const char *s, size_t keep_min)
{
	size_t n = strlen(s);
	while (n > keep_min && s[n - 1] == '/')
		n--;
	return strndup(s, n);
}

static int check_prefix(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	if (in[0] != '/' || !valid_path_chars(in)) {
		snprintf(msg, len, "expected a path starting with '/', got '%s'",
		         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = dup_strip_slashes(in, 1); /* "/" and "//" both become "/" */
	return 0;
}

static bool valid_authority(const char *s, size_t n)
{
	const char *end = s + n, *colon;
	char port[8];
	if (n > 0 && s[0] == '[') {
		const char *rb = memchr(s, ']', n);
		if (!rb || !valid_ipv6(s + 1, (size_t)(rb - s - 1)))
			return false;
		colon = rb + 1 < end ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return false;
	} else {
		colon = memchr(s, ':', n);
		size_t hn = colon ? (size_t)(colon - s) : n;
		if (hn == 0 || !valid_hostname(s, hn))
			return false;
	}
	if (!colon)
		return true;
	if ((size_t)(end - colon - 1) >= sizeof(port))
		return false;
	memcpy(port, colon + 1, (size_t)(end - colon - 1));
	port[end - colon - 1] = '\0';
	return valid_port(port, NULL);
}

static int check_upstream(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	size_t skip = 0, auth;
	if (strncasecmp(in, "http://", 7) == 0)
		skip = 7;
	else if (strncasecmp(in, "https://", 8) == 0)
		skip = 8;
	auth = skip ? strcspn(in + skip, "/") : 0;
	if (!skip || !valid_path_chars(in) || !valid_authority(in + skip, auth)) {
		if (skip && strpbrk(in, "?#"))
			snprintf(msg, len,
			         "an upstream must not have a query or fragment, got '%s'",
			         shown(in, b, sizeof(b)));
		else
			snprintf(msg, len,
			         "expected an http:// or https:// URL with a host, got '%s'",
			         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = dup_strip_slashes(in, skip + auth);
	for (size_t i = 0; *out && i < skip; i++) /* scheme in lower case */
		(*out)[i] = (char)tolower((unsigned char)(*out)[i]);
	return 0;
}

static int check_host(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	if (!*in || strlen(in) > 253 || !valid_authority(in, strlen(in))) {
		snprintf(msg, len, "expected a host name, got '%s'", shown(in, b, sizeof(b)));
		return -1;
	}
	*out = dup_lower(in);
	return 0;
}

static int check_hex(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	size_t n = strlen(in);
	if (n < 12 || n > 64 || strspn(in, "0123456789abcdefABCDEF") != n) {
		snprintf(msg, len, "expected 12 to 64 hex digits, got '%s'",
		         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = dup_lower(in);
	return 0;
}

/* An HTTP field name (RFC 9110 token), kept in lower case. */
static int check_header(const char *in, char **out, char *msg, size_t len)
{
	char b[80];
	size_t n = strlen(in);
	if (n == 0 || strspn(in, "!#$%&'*+-.^_`|~0123456789"
	                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != n) {
		snprintf(msg, len, "expected an HTTP header name, got '%s'",
		         shown(in, b, sizeof(b)));
		return -1;
	}
	*out = dup_lower(in);
	return 0;
}

/* ----------------------------------------------------------- the schema */

/* Table rows: T is the struct the field belongs to. */
#define U(k, T, f, lo_, hi_, def)                                                                  \
	{                                                                                          \
		.key = k, .type = OPT_UINT, .off = offsetof(T, f), .lo = lo_, .hi = hi_,           \
		.dnum = def                                                                        \
	}
#define N(k, T, f, lo_, hi_, fl, def)                                                              \
	{                                                                                          \
		.key = k, .type = OPT_NUM, .off = offsetof(T, f), .lo = lo_, .hi = hi_,            \
		.flags = fl, .dnum = def                                                           \
	}
#define B(k, T, f, def)                                                                            \
	{                                                                                          \
		.key = k, .type = OPT_BOOL, .off = offsetof(T, f), .dnum = def                     \
	}
#define S(k, T, f, chk, def)                                                                       \
	{                                                                                          \
		.key = k, .type = OPT_STR, .off = offsetof(T, f), .check = chk, .dstr = def        \
	}
#define E(k, T, f, nm, def)                                                                        \
	{                                                                                          \
		.key = k, .type = OPT_ENUM, .off = offsetof(T, f), .names = nm, .dnum = def        \
	}
#define SEC(k, table)                                                                              \
	{                                                                                          \
		.key = k, .type = OPT_SECTION, .sub = table                                        \
	}
#define END                                                                                        \
	{                                                                                          \
		.key = NULL                                                                        \
	}
#define NOMAX ((double)UINT_MAX)
#define INF HUGE_VAL

static const struct opt concurrency_opts[] = {
    B("adaptive", struct plan_conf, concurrency.adaptive, 1),
    U("min", struct plan_conf, concurrency.min, 1, NOMAX, 1),
    N("decrease_factor", struct plan_conf, concurrency.decrease_factor, 0, 1,
      OPT_LO_OPEN | OPT_HI_OPEN, 0.5),
    U("reopen_after_s", struct plan_conf, concurrency.reopen_after_s, 0, NOMAX, 0),
    E("mode", struct plan_conf, concurrency.mode, concurrency_mode_names, CONCURRENCY_AUTO),
    U("slow_start", struct plan_conf, concurrency.slow_start, 1, NOMAX, 20),
    N("tolerance", struct plan_conf, concurrency.tolerance, 0, 100, 0, 1.0),
    END,
};

static const struct opt dispatch_delay_opts[] = {
    B("adaptive", struct plan_conf, dispatch_delay.adaptive, 1),
    U("min_ms", struct plan_conf, dispatch_delay.min_ms, 0, NOMAX, 0),
    U("max_ms", struct plan_conf, dispatch_delay.max_ms, 0, NOMAX, 5000),
    N("backoff_multiplier", struct plan_conf, dispatch_delay.backoff_multiplier, 1, INF, 0, 1.5),
    N("recovery_rps", struct plan_conf, dispatch_delay.recovery_rps, 0, INF, 0, 3),
    END,
};

static const struct opt queue_opts[] = {
    U("max_depth", struct plan_conf, queue.max_depth, 1, NOMAX, 10000),
    U("max_wait_s", struct plan_conf, queue.max_wait_s, 1, NOMAX, 600),
    END,
};

static const struct opt retry_opts[] = {
    U("max_attempts", struct plan_conf, retry.max_attempts, 1, NOMAX, 3),
    U("initial_delay_ms", struct plan_conf, retry.initial_delay_ms, 0, NOMAX, 1000),
    U("max_delay_ms", struct plan_conf, retry.max_delay_ms, 0, NOMAX, 60000),
    E("jitter", struct plan_conf, retry.jitter, jitter_names, JITTER_ADDITIVE),
    U("deadline_s", struct plan_conf, retry.deadline_s, 1, NOMAX, 300),
    END,
};

static const struct opt plan_opts[] = {
    N("max_requests_per_second", struct plan_conf, max_requests_per_second, 0, INF, 0, 0),
    N("max_requests_per_minute", struct plan_conf, max_requests_per_minute, 0, INF, 0, 0),
    N("max_requests_per_hour", struct plan_conf, max_requests_per_hour, 0, INF, 0, 0),
    N("min_ms_per_request", struct plan_conf, min_ms_per_request, 0, INF, 0, 0),
    U("burst", struct plan_conf, burst, 1, NOMAX, 1),
    N("max_tokens_per_minute", struct plan_conf, max_tokens_per_minute, 0, INF, 0, 0),
    N("token_burst", struct plan_conf, token_burst, 0, INF, 0, 0),
    N("max_input_tokens_per_minute", struct plan_conf, max_input_tokens_per_minute, 0, INF, 0, 0),
    N("max_output_tokens_per_minute", struct plan_conf, max_output_tokens_per_minute, 0, INF, 0, 0),
    N("max_requests_per_day", struct plan_conf, max_requests_per_day, 0, INF, 0, 0),
    N("max_tokens_per_day", struct plan_conf, max_tokens_per_day, 0, INF, 0, 0),
    S("day_resets_at", struct plan_conf, day_resets_at, check_hhmm, "00:00"),
    S("day_time_zone", struct plan_conf, day_time_zone, check_zone, "UTC"),
    U("default_output_tokens", struct plan_conf, default_output_tokens, 0, NOMAX, 1024),
    U("max_concurrent", struct plan_conf, max_concurrent, 1, NOMAX, 64),
    U("max_concurrent_global", struct plan_conf, max_concurrent_global, 0, NOMAX, 0),
    SEC("concurrency", concurrency_opts),
    SEC("dispatch_delay", dispatch_delay_opts),
    N("proactive_threshold", struct plan_conf, proactive_threshold, 0, 1, 0, 0.10),
    U("quota_probe_s", struct plan_conf, quota_probe_s, 1, NOMAX, 10),
    E("stream_usage", struct plan_conf, stream_usage, stream_usage_names, STREAM_USAGE_INJECT),
    SEC("queue", queue_opts),
    SEC("retry", retry_opts),
    END,
};

static const struct opt tls_opts[] = {
    B("verify", struct provider_conf, tls.verify, 1),
    S("ca_file", struct provider_conf, tls.ca_file, check_any, ""),
    END,
};

static const struct opt timeouts_opts[] = {
    U("connect_s", struct provider_conf, timeouts.connect_s, 1, NOMAX, 10),
    U("first_byte_s", struct provider_conf, timeouts.first_byte_s, 1, NOMAX, 300),
    U("idle_s", struct provider_conf, timeouts.idle_s, 1, NOMAX, 300),
    END,
};

/* upstream, prefix, key_header, dialect and hosts have no table default: they come
 * from the built-in provider (or the rules for a new name), see provider_init(). */
static const struct opt provider_opts[] = {
    S("upstream", struct provider_conf, upstream, check_upstream, NULL),
    S("prefix", struct provider_conf, prefix, check_prefix, NULL),
    E("key_header", struct provider_conf, key_source, key_source_names, KEY_AUTHORIZATION),
    E("dialect", struct provider_conf, dialect, dialect_names, DIALECT_OPENAI),
    {.key = "hosts",
     .type = OPT_STRLIST,
     .off = offsetof(struct provider_conf, hosts),
     .off2 = offsetof(struct provider_conf, n_hosts),
     .check = check_host},
    S("plan", struct provider_conf, plan, check_name, "default"),
    SEC("tls", tls_opts),
    SEC("timeouts", timeouts_opts),
    B("http2", struct provider_conf, http2, 0),
    {.key = "model_groups",
     .type = OPT_RULES,
     .off = offsetof(struct provider_conf, model_groups),
     .off2 = offsetof(struct provider_conf, n_model_groups),
     .check = check_group},
    {.key = "model_plans",
     .type = OPT_RULES,
     .off = offsetof(struct provider_conf, model_plans),
     .off2 = offsetof(struct provider_conf, n_model_plans),
     .check = check_name},
    E("cached_input", struct provider_conf, cached_input, cached_input_names, CACHED_INPUT_CHARGED),
    END,
};

/* provider and key_sha256 are required (checked after parsing). Without plan
 * an entry pins its key to "default", as it always has, unless it gives a
 * scope: then the key has no plan of its own (parse_keys). */
static const struct opt key_opts[] = {
    S("provider", struct key_conf, provider, check_name, NULL),
    S("key_sha256", struct key_conf, key_sha256, check_hex, NULL),
    S("plan", struct key_conf, plan, check_name, NULL),
    S("scope", struct key_conf, scope, check_name, NULL),
    END,
};

static const struct opt admin_opts[] = {
    S("listen", struct config, admin.listen, check_listen_or_empty, "127.0.0.1:9090"),
    S("token", struct config, admin.token, check_any, ""),
    U("top_lanes", struct config, admin.top_lanes, 0, 100000, 100),
    END,
};

static const struct opt log_opts[] = {
    E("level", struct config, log.level, log_level_names, LOG_INFO),
    S("file", struct config, log.file, check_nonempty, "-"),
    END,
};

static const struct opt limits_opts[] = {
    {.key = "max_body_bytes",
     .type = OPT_U64,
     .off = offsetof(struct config, limits.max_body_bytes),
     .lo = 1,
     .dnum = 33554432},
    /* An upload is streamed (profile_endpoint_streams), so its size costs no
     * memory; the cap only bounds what one client can pour through a lane's
     * slot. 2 GiB: the largest single request body a built-in provider takes
     * (a Gemini file, 2 GB; OpenAI files 512 MB, parts 64 MB; Anthropic
     * files 500 MB, batches 256 MB). 0: no limit. */
    {.key = "max_upload_bytes",
     .type = OPT_U64,
     .off = offsetof(struct config, limits.max_upload_bytes),
     .lo = 0,
     .dnum = 2147483648},
    U("max_header_bytes", struct config, limits.max_header_bytes, 1, NOMAX, 65536),
    U("max_connections", struct config, limits.max_connections, 1, NOMAX, 4096),
    U("client_timeout_s", struct config, limits.client_timeout_s, 1, NOMAX, 900),
    U("max_lanes", struct config, limits.max_lanes, 1, NOMAX, 100000),
    U("idle_ttl_s", struct config, limits.idle_ttl_s, 1, NOMAX, 900),
    END,
};

static int parse_agent_priorities(struct ctx *c, yaml_node_t *key, yaml_node_t *value);

static const struct opt agents_opts[] = {
    S("header", struct config, agents.header, check_header, "x-agent-id"),
    E("mode", struct config, agents.mode, agents_mode_names, AGENTS_OFF),
    E("fair_share", struct config, agents.fair_share, fair_share_names, FAIR_AGENT_OR_ADDRESS),
    {.key = "priorities", .type = OPT_CUSTOM, .parse = parse_agent_priorities},
    END,
};

static const struct opt store_tls_opts[] = {
    B("enabled", struct config, store.redis.tls.enabled, 0),
    S("ca_file", struct config, store.redis.tls.ca_file, check_any, ""),
    S("server_name", struct config, store.redis.tls.server_name, check_token, ""),
    S("cert_file", struct config, store.redis.tls.cert_file, check_any, ""),
    S("key_file", struct config, store.redis.tls.key_file, check_any, ""),
    END,
};

static const struct opt store_redis_opts[] = {
    S("address", struct config, store.redis.address, check_store_address, "127.0.0.1:6379"),
    S("key_prefix", struct config, store.redis.key_prefix, check_key_prefix, "pacerd:"),
    U("timeout_ms", struct config, store.redis.timeout_ms, 1, 60000, 50),
    E("on_error", struct config, store.redis.on_error, store_on_error_names, STORE_ON_ERROR_LOCAL),
    U("replicas", struct config, store.redis.replicas, 1, 10000, 1),
    U("lease_ms", struct config, store.redis.lease_ms, 100, 3600000, 10000),
    S("username", struct config, store.redis.username, check_token, ""),
    S("password_file", struct config, store.redis.password_file, check_any, ""),
    S("resolv_conf", struct config, store.redis.resolv_conf, check_nonempty, "/etc/resolv.conf"),
    SEC("tls", store_tls_opts),
    END,
};

static const struct opt store_opts[] = {
    E("kind", struct config, store.kind, store_kind_names, STORE_LOCAL),
    SEC("redis", store_redis_opts),
    END,
};

/* forward.tunnel: host (port 443), host:port, or "*" (any host on 443;
 * validated against listen). */
static int check_tunnel_host(const char *in, char **out, char *msg, size_t len)
{
	if (strcmp(in, "*") == 0) {
		*out = strdup(in);
		return 0;
	}
	return check_host(in, out, msg, len);
}

static const struct opt forward_opts[] = {
    B("intercept", struct config, forward.intercept, 1),
    S("ca_cert", struct config, forward.ca_cert, check_any, ""),
    S("ca_key", struct config, forward.ca_key, check_any, ""),
    S("state_dir", struct config, forward.state_dir, check_state_dir, ""),
    {.key = "tunnel",
     .type = OPT_STRLIST,
     .off = offsetof(struct config, forward.tunnel),
     .off2 = offsetof(struct config, forward.n_tunnel),
     .check = check_tunnel_host},
    END,
};

static int parse_providers(struct ctx *c, yaml_node_t *key, yaml_node_t *value);
static int parse_plans(struct ctx *c, yaml_node_t *key, yaml_node_t *value);
static int parse_keys(struct ctx *c, yaml_node_t *key, yaml_node_t *value);

static const struct opt root_opts[] = {
    S("listen", struct config, listen, check_listen, "127.0.0.1:8080"),
    SEC("admin", admin_opts),
    SEC("log", log_opts),
    SEC("limits", limits_opts),
    U("drain_timeout_s", struct config, drain_timeout_s, 0, NOMAX, 30),
    S("state_dir", struct config, state_dir, check_state_dir, ""),
    S("default_provider", struct config, default_provider, check_name, "openai"),
    {.key = "providers", .type = OPT_CUSTOM, .parse = parse_providers},
    {.key = "plans", .type = OPT_CUSTOM, .parse = parse_plans},
    {.key = "keys", .type = OPT_CUSTOM, .parse = parse_keys},
    SEC("agents", agents_opts),
    SEC("store", store_opts),
    SEC("forward", forward_opts),
    END,
};

/* The built-in providers (config_set_builtins: provider/profile.c's rows), in
 * the order they are activated without a providers: section. */
static const struct config_builtin *const *builtins;
static size_t n_builtins;

void config_set_builtins(const struct config_builtin *const *rows, size_t n)
{
	builtins = rows;
	n_builtins = n;
}

/* Environment overrides: each names the table entry whose checks it reuses. */
enum env_target { ENV_ROOT, ENV_PROVIDER, ENV_PLAN };
static const struct env_opt {
	const char *name;
	enum env_target target;
	const char *key; /* dotted path in the target's table */
} env_opts[] = {
    {"PACERD_LISTEN", ENV_ROOT, "listen"},
    {"PACERD_ADMIN_LISTEN", ENV_ROOT, "admin.listen"},
    {"PACERD_LOG_LEVEL", ENV_ROOT, "log.level"},
    {"PACERD_UPSTREAM", ENV_PROVIDER, "upstream"},
    {"PACERD_RPS", ENV_PLAN, "max_requests_per_second"},
    {"PACERD_RPM", ENV_PLAN, "max_requests_per_minute"},
    {"PACERD_RPH", ENV_PLAN, "max_requests_per_hour"},
    {"PACERD_MIN_MS", ENV_PLAN, "min_ms_per_request"},
    {"PACERD_TPM", ENV_PLAN, "max_tokens_per_minute"},
    {"PACERD_MAX_CONCURRENT", ENV_PLAN, "max_concurrent"},
    {"PACERD_QUEUE_MAX_DEPTH", ENV_PLAN, "queue.max_depth"},
    {"PACERD_RETRY_MAX_ATTEMPTS", ENV_PLAN, "retry.max_attempts"},
    {"PACERD_RETRY_INITIAL_DELAY_MS", ENV_PLAN, "retry.initial_delay_ms"},
    {"PACERD_RETRY_MAX_DELAY_MS", ENV_PLAN, "retry.max_delay_ms"},
};

/* ------------------------------------------------- defaults and freeing */

static void free_rules(struct model_rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(r[i].pattern);
		free(r[i].value);
	}
	free(r);
}

static void opts_free(const struct opt *t, void *base)
{
	for (; t->key; t++) {
		if (t->type == OPT_RULES) {
			struct model_rule **p = field_at(base, t->off);
			size_t *n = field_at(base, t->off2);
			free_rules(*p, *n);
			*p = NULL;
			*n = 0;
		}
		if (t->type == OPT_STR) {
			char **p = field_at(base, t->off);
			free(*p);
			*p = NULL;
		} else if (t->type == OPT_STRLIST) {
			char ***p = field_at(base, t->off);
			size_t *n = field_at(base, t->off2);
			free_strlist(*p, *n);
			*p = NULL;
			*n = 0;
		} else if (t->type == OPT_SECTION) {
			opts_free(t->sub, base);
		}
	}
}

static int opts_defaults(const struct opt *t, void *base)
{
	for (; t->key; t++) {
		void *f = field_at(base, t->off);
		switch (t->type) {
		case OPT_UINT:
			*(unsigned *)f = (unsigned)t->dnum;
			break;
		case OPT_U64:
			*(uint64_t *)f = (uint64_t)t->dnum;
			break;
		case OPT_NUM:
			*(double *)f = t->dnum;
			break;
		case OPT_BOOL:
			*(bool *)f = t->dnum != 0;
			break;
		case OPT_ENUM:
			*(int *)f = (int)t->dnum;
			break;
		case OPT_STR:
			if (t->dstr && !(*(char **)f = strdup(t->dstr)))
				return -1;
			break;
		case OPT_SECTION:
			if (opts_defaults(t->sub, base) != 0)
				return -1;
			break;
		case OPT_STRLIST:
		case OPT_CUSTOM:
		case OPT_RULES:
			break;
		}
	}
	return 0;
}

static void plan_free(struct plan_conf *p)
{
	free(p->name);
	opts_free(plan_opts, p);
}

static void provider_free(struct provider_conf *p)
{
	free(p->name);
	model_memo_free(p->memo);
	opts_free(provider_opts, p);
}

struct config_ref *config_ref_new(struct config *cfg)
{
	struct config_ref *r = calloc(1, sizeof(*r));
	if (r == NULL) {
		config_free(cfg);
		return NULL;
	}
	r->cfg = cfg;
	r->refs = 1;
	return r;
}

struct config_ref *config_ref_get(struct config_ref *r)
{
	r->refs++;
	return r;
}

void config_ref_put(struct config_ref *r)
{
	if (r == NULL || --r->refs > 0)
		return;
	config_free(r->cfg);
	free(r);
}

void config_free(struct config *cfg)
{
	if (!cfg)
		return;
	free(cfg->source);
	free(cfg->deprecated);
	if (cfg->store.redis.password != NULL) {
		explicit_bzero(cfg->store.redis.password, strlen(cfg->store.redis.password));
		free(cfg->store.redis.password);
	}
	opts_free(root_opts, cfg);
	for (size_t i = 0; i < cfg->n_providers; i++)
		provider_free(&cfg->providers[i]);
	free(cfg->providers);
	for (size_t i = 0; i < cfg->n_plans; i++)
		plan_free(&cfg->plans[i]);
	free(cfg->plans);
	for (size_t i = 0; i < cfg->n_keys; i++)
		opts_free(key_opts, &cfg->keys[i]);
	free(cfg->keys);
	key_index_free(cfg->key_index);
	for (size_t i = 0; i < cfg->n_zones; i++)
		daily_zone_free(cfg->zones[i]);
	free(cfg->zones);
	for (size_t i = 0; i < cfg->agents.n_priorities; i++)
		free(cfg->agents.priorities[i].id);
	free(cfg->agents.priorities);
	free(cfg);
}

const struct provider_conf *config_provider(const struct config *cfg, const char *name)
{
	for (size_t i = 0; cfg && name && i < cfg->n_providers; i++)
		if (strcmp(cfg->providers[i].name, name) == 0)
			return &cfg->providers[i];
	return NULL;
}

const struct plan_conf *config_plan(const struct config *cfg, const char *name)
{
	for (size_t i = 0; cfg && name && i < cfg->n_plans; i++)
		if (strcmp(cfg->plans[i].name, name) == 0)
			return &cfg->plans[i];
	return NULL;
}

const struct key_conf *config_key_for(const struct config *cfg, const struct provider_conf *prov,
                                      const char *key_hash)
{
	return key_index_find(cfg->key_index, prov->name, key_hash);
}

const struct plan_conf *config_plan_for(const struct config *cfg, const struct provider_conf *prov,
                                        const char *key_hash, const char *model)
{
	const struct key_conf *k = config_key_for(cfg, prov, key_hash);
	const struct model_rule *r = NULL;
	if (k != NULL && k->own_plan)
		return config_plan(cfg, k->plan);
	if (model != NULL) {
		/* The row, not the plan, is remembered: it belongs to prov's
		 * configuration, which cfg may not be (a request accepted before a
		 * reload makes its lane under the new one). */
		struct model_answer *a = model_memo_get(prov->memo, model);
		if (a != NULL && a->plan_known) {
			r = a->plan_rule;
		} else {
			r = config_model_rule(prov->model_plans, prov->n_model_plans, model);
			if (a != NULL) {
				a->plan_rule = r;
				a->plan_known = true;
			}
		}
	}
	return config_plan(cfg, r != NULL ? r->value : prov->plan);
}

const char *config_scope_for(const struct config *cfg, const struct provider_conf *prov,
                             const char *key_hash)
{
	const struct key_conf *k = config_key_for(cfg, prov, key_hash);
	return k != NULL ? k->scope : NULL;
}

static struct plan_conf *find_plan(struct config *cfg, const char *name)
{
	return (struct plan_conf *)config_plan(cfg, name);
}

static struct provider_conf *find_provider(struct config *cfg, const char *name)
{
	return (struct provider_conf *)config_provider(cfg, name);
}

static const struct config_builtin *find_builtin(const char *name)
{
	for (size_t i = 0; i < n_builtins; i++)
		if (strcmp(builtins[i]->name, name) == 0)
			return builtins[i];
	return NULL;
}

/* A provider starts from the table defaults, then its built-in values, or for a
 * name pacerd does not know: prefix "/<name>", no hosts, no upstream. */
static int provider_init(struct provider_conf *p, const char *name)
{
	const struct config_builtin *b = find_builtin(name);
	if (opts_defaults(provider_opts, p) != 0 || !(p->name = strdup(name)))
		return -1;
	if (!b) {
		size_t n = strlen(name) + 2;
		if (!(p->prefix = malloc(n)))
			return -1;
		snprintf(p->prefix, n, "/%s", name);
		return 0;
	}
	p->builtin = b;
	p->key_source = b->key_source;
	p->dialect = b->dialect;
	p->cached_input = b->cached_input;
	if (!(p->prefix = strdup(b->prefix)) ||
	    (b->upstream && !(p->upstream = strdup(b->upstream))))
		return -1;
	if (b->host) {
		if (!(p->hosts = calloc(1, sizeof(char *))) || !(p->hosts[0] = strdup(b->host)))
			return -1;
		p->n_hosts = 1;
	}
	return 0;
}

static int plan_init(struct plan_conf *p, const char *name)
{
	if (opts_defaults(plan_opts, p) != 0 || !(p->name = strdup(name)))
		return -1;
	return 0;
}

/* ------------------------------------------------------ scalar converters */

/* Why a number was rejected, phrased from its bounds: "a non-negative integer",
 * "an integer >= 1", "a number in (0, 1)". */
static void describe_number(const struct opt *o, bool integer, char *out, size_t len)
{
	const char *what = integer ? "integer" : "number";
	bool has_hi = integer ? (o->type == OPT_UINT && o->hi < NOMAX) : isfinite(o->hi);
	if (has_hi)
		snprintf(out, len, "%s %s in %c%g, %g%c", integer ? "an" : "a", what,
		         (o->flags & OPT_LO_OPEN) ? '(' : '[', o->lo, o->hi,
		         (o->flags & OPT_HI_OPEN) ? ')' : ']');
	else if (o->lo == 0 && !(o->flags & OPT_LO_OPEN))
		snprintf(out, len, "a non-negative %s", what);
	else
		snprintf(out, len, "%s %s %s %g", integer ? "an" : "a", what,
		         (o->flags & OPT_LO_OPEN) ? ">" : ">=", o->lo);
}

static bool in_bounds(const struct opt *o, double v)
{
	bool hi_ok = (o->flags & OPT_HI_OPEN) ? v < o->hi : v <= o->hi;
	bool lo_ok = (o->flags & OPT_LO_OPEN) ? v > o->lo : v >= o->lo;
	return lo_ok && (o->type == OPT_U64 || hi_ok);
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;
	size_t n = strlen(s);
	if (n == 0 || strspn(s, "0123456789") != n)
		return false; /* no sign, no spaces, no fractions, no hex */
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

static bool parse_double(const char *s, double *v)
{
	char *end;
	size_t n = strlen(s);
	/* Decimal notation only: strtod alone would take "inf", "nan" and hex. */
	if (n == 0 || strspn(s, "0123456789.eE+-") != n)
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return errno == 0 && *end == '\0' && isfinite(*v);
}

static int find_name(const char *const *names, const char *s)
{
	for (int i = 0; names[i]; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

static void list_names(const char *const *names, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; names[i] && used < len; i++) {
		int n = snprintf(out + used, len - used, "%s%s", i ? ", " : "", names[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/* Converts `text` for a scalar option and stores it in base. `quoted`: the YAML
 * scalar was quoted, which makes it a string, not a number or a boolean. On error
 * writes the reason (without location) to msg. */
static int set_scalar(const struct opt *o, void *base, const char *text, bool quoted, char *msg,
                      size_t len)
{
	void *f = field_at(base, o->off);
	char what[192], b[80], names[128];
	uint64_t u;
	double d;
	int idx;
	switch (o->type) {
	case OPT_UINT:
	case OPT_U64:
		describe_number(o, true, what, sizeof(what));
		if (quoted || !parse_u64(text, &u) || (o->type == OPT_UINT && u > UINT_MAX) ||
		    !in_bounds(o, (double)u))
			break;
		if (o->type == OPT_UINT)
			*(unsigned *)f = (unsigned)u;
		else
			*(uint64_t *)f = u;
		return 0;
	case OPT_NUM:
		describe_number(o, false, what, sizeof(what));
		if (quoted || !parse_double(text, &d) || !in_bounds(o, d))
			break;
		*(double *)f = d == 0 ? 0 : d; /* "-0" is 0 */
		return 0;
	case OPT_BOOL:
		snprintf(what, sizeof(what), "true or false");
		if (quoted || (strcmp(text, "true") != 0 && strcmp(text, "false") != 0))
			break;
		*(bool *)f = text[0] == 't';
		return 0;
	case OPT_ENUM:
		/* Accepted quoted or not: YAML 1.1 reads a plain `off` as a boolean, we
		 * never resolve tags, so `mode: off` is simply the name "off". */
		/* cppcheck-suppress unreadVariable ; read by the message after the switch */
		quoted = false; /* not part of the message either */
		list_names(o->names, names, sizeof(names));
		snprintf(what, sizeof(what), "one of %s", names);
		if ((idx = find_name(o->names, text)) < 0)
			break;
		*(int *)f = idx;
		return 0;
	case OPT_STR: {
		char *v = NULL;
		if (o->check(text, &v, msg, len) != 0)
			return -1;
		if (!v) {
			snprintf(msg, len, "out of memory");
			return -1;
		}
		free(*(char **)f);
		*(char **)f = v;
		return 0;
	}
	default:
		snprintf(msg, len, "internal error: not a scalar option");
		return -1;
	}
	snprintf(msg, len, "expected %s, got %s'%s'", what, quoted ? "the quoted string " : "",
	         shown(text, b, sizeof(b)));
	return -1;
}

/* ---------------------------------------------------------- YAML walking */

static const char *node_kind(const yaml_node_t *n)
{
	return n->type == YAML_MAPPING_NODE    ? "a mapping"
	       : n->type == YAML_SEQUENCE_NODE ? "a list"
	                                       : "a scalar";
}

static const char *scalar(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* A plain empty, "~" or "null" scalar: `admin:` with nothing under it. */
static bool is_null(const yaml_node_t *n)
{
	const char *s;
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	s = scalar(n);
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

static bool is_quoted(const yaml_node_t *n)
{
	return n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
}

static int check_scalar_node(struct ctx *c, yaml_node_t *n, const char *path)
{
	char msg[MSG_LEN];
	if (n->type != YAML_SCALAR_NODE) {
		snprintf(msg, sizeof(msg), "expected a scalar, got %s", node_kind(n));
		return fail_mark(c, n->start_mark, path, msg);
	}
	/* "\0" in a double-quoted scalar would silently cut the value short. */
	if (strlen(scalar(n)) != n->data.scalar.length)
		return fail_mark(c, n->start_mark, path, "NUL character in value");
	return 0;
}

static int check_mapping_node(struct ctx *c, yaml_node_t *n, const char *path)
{
	char msg[MSG_LEN];
	if (n->type == YAML_MAPPING_NODE || is_null(n))
		return 0;
	snprintf(msg, sizeof(msg), "expected a mapping, got %s", node_kind(n));
	return fail_mark(c, n->start_mark, path, msg);
}

static const char *where(const char *path, char *buf, size_t len)
{
	if (!*path)
		return "at the top level";
	snprintf(buf, len, "in '%s'", path);
	return buf;
}

/* The key node of pair i must be a scalar that no earlier pair of the mapping uses. */
static int check_pair_key(struct ctx *c, yaml_node_t *map, yaml_node_pair_t *pair, const char *path)
{
	yaml_node_t *k = yaml_document_get_node(c->doc, pair->key);
	char msg[MSG_LEN], b[80], w[PATH_LEN + 8];
	if (k->type != YAML_SCALAR_NODE) {
		snprintf(msg, sizeof(msg), "expected a scalar key %s, got %s",
		         where(path, w, sizeof(w)), node_kind(k));
		return fail_mark(c, k->start_mark, "", msg);
	}
	if (check_scalar_node(c, k, path) != 0)
		return -1;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < pair; p++) {
		yaml_node_t *pk = yaml_document_get_node(c->doc, p->key);
		if (pk->type == YAML_SCALAR_NODE && strcmp(scalar(pk), scalar(k)) == 0) {
			snprintf(msg, sizeof(msg), "duplicate key '%s' %s",
			         shown(scalar(k), b, sizeof(b)), where(path, w, sizeof(w)));
			return fail_mark(c, k->start_mark, "", msg);
		}
	}
	return 0;
}

static size_t map_size(const yaml_node_t *n)
{
	return n->type == YAML_MAPPING_NODE
	           ? (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start)
	           : 0;
}

static const struct opt *find_opt(const struct opt *t, const char *key)
{
	for (; t->key; t++)
		if (strcmp(t->key, key) == 0)
			return t;
	return NULL;
}

static int walk_map(struct ctx *c, yaml_node_t *map, const struct opt *t, void *base,
                    const char *path);

static int apply_strlist(struct ctx *c, const struct opt *o, void *base, yaml_node_t *v,
                         const char *path)
{
	char ***list = field_at(base, o->off);
	size_t *count = field_at(base, o->off2), n = 0, i = 0;
	char **out, msg[MSG_LEN], item[MSG_LEN];
	if (is_null(v))
		v = NULL; /* `hosts:` with nothing: an empty list */
	else if (v->type != YAML_SEQUENCE_NODE) {
		snprintf(msg, sizeof(msg), "expected a list, got %s", node_kind(v));
		return fail_mark(c, v->start_mark, path, msg);
	}
	if (v)
		n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	if (!(out = calloc(n ? n : 1, sizeof(char *))))
		return fail_mark(c, v ? v->start_mark : (yaml_mark_t){0}, path, "out of memory");
	for (; i < n; i++) {
		yaml_node_t *e = yaml_document_get_node(c->doc, v->data.sequence.items.start[i]);
		if (check_scalar_node(c, e, path) != 0)
			break;
		if (o->check(scalar(e), &out[i], item, sizeof(item)) != 0) {
			fail_mark(c, e->start_mark, path, item);
			break;
		}
		if (!out[i]) {
			fail_mark(c, e->start_mark, path, "out of memory");
			break;
		}
	}
	if (i < n) {
		free_strlist(out, i);
		return -1;
	}
	free_strlist(*list, *count);
	*list = out;
	*count = n;
	return 0;
}

/* A {pattern: value} mapping (model_groups, model_plans): each pattern checked
 * by config_model_pattern(), each value by o->check; a plan's existence is
 * checked after parsing, at the value's position (its origin). */
static int apply_rules(struct ctx *c, const struct opt *o, void *base, yaml_node_t *v,
                       const char *path)
{
	struct model_rule **list = field_at(base, o->off);
	size_t *count = field_at(base, o->off2), n = map_size(v);
	char msg[MSG_LEN], sub[PATH_LEN];
	if (check_mapping_node(c, v, path) != 0)
		return -1;
	free_rules(*list, *count);
	*list = NULL;
	*count = 0;
	if (n == 0)
		return 0;
	if (!(*list = calloc(n, sizeof(**list))))
		return fail_mark(c, v->start_mark, path, "out of memory");
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
		struct model_rule *r = &(*list)[*count];
		if (check_pair_key(c, v, p, path) != 0)
			return -1;
		if (config_model_pattern(scalar(k), r, msg, sizeof(msg)) != 0)
			return fail_mark(c, k->start_mark, path, msg);
		join_path(sub, sizeof(sub), path, scalar(k));
		if (check_scalar_node(c, val, sub) != 0)
			return -1;
		if (o->check(is_null(val) ? "" : scalar(val), &r->value, msg, sizeof(msg)) != 0)
			return fail_mark(c, val->start_mark, sub, msg);
		if (!r->value || !(r->pattern = strdup(scalar(k)))) {
			free(r->value);
			r->value = NULL;
			return fail_mark(c, k->start_mark, path, "out of memory");
		}
		(*count)++;
		if (add_origin(c, &r->value, NULL, val->start_mark) != 0)
			return -1;
	}
	return 0;
}

/* Applies one value node to the option that its key named. */
static int apply_opt(struct ctx *c, const struct opt *o, void *base, yaml_node_t *k, yaml_node_t *v,
                     const char *path)
{
	char msg[MSG_LEN];
	switch (o->type) {
	case OPT_SECTION:
		if (check_mapping_node(c, v, path) != 0)
			return -1;
		return v->type == YAML_MAPPING_NODE ? walk_map(c, v, o->sub, base, path) : 0;
	case OPT_CUSTOM:
		return o->parse(c, k, v);
	case OPT_STRLIST:
		if (apply_strlist(c, o, base, v, path) != 0)
			return -1;
		break;
	case OPT_RULES:
		if (apply_rules(c, o, base, v, path) != 0)
			return -1;
		break;
	default:
		if (check_scalar_node(c, v, path) != 0)
			return -1;
		/* `token:`, `token: ~`: an empty string, not the text "~". */
		if (set_scalar(o, base, o->type == OPT_STR && is_null(v) ? "" : scalar(v),
		               is_quoted(v), msg, sizeof(msg)) != 0)
			return fail_mark(c, v->start_mark, path, msg);
		break;
	}
	return add_origin(c, field_at(base, o->off), NULL, v->start_mark);
}

/* Keys an earlier version knew: the error says what replaced them. */
static const struct {
	const char *path, *key, *why;
} removed_keys[] = {
    {".concurrency", "initial",
     "was removed: a lane is open up to max_concurrent until its first capacity signal"},
    {".dispatch_delay", "recovery_step_ms",
     "was replaced by recovery_rps: the rate gained per second of successes"},
};

static const char *removed_why(const char *path, const char *key)
{
	size_t pl = strlen(path);
	for (size_t i = 0; i < sizeof(removed_keys) / sizeof(removed_keys[0]); i++) {
		size_t sl = strlen(removed_keys[i].path);
		if (strcmp(key, removed_keys[i].key) == 0 && pl >= sl &&
		    strcmp(path + pl - sl, removed_keys[i].path) == 0)
			return removed_keys[i].why;
	}
	return NULL;
}

/* Applies table t to every pair of a mapping; an unknown key is an error. */
static int walk_map(struct ctx *c, yaml_node_t *map, const struct opt *t, void *base,
                    const char *path)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
		char sub[PATH_LEN], msg[MSG_LEN], b[80], w[PATH_LEN + 8];
		const struct opt *o;
		if (check_pair_key(c, map, p, path) != 0)
			return -1;
		if (!(o = find_opt(t, scalar(k)))) {
			const char *why = removed_why(path, scalar(k));
			if (why != NULL)
				snprintf(msg, sizeof(msg), "'%s' %s %s",
				         shown(scalar(k), b, sizeof(b)), where(path, w, sizeof(w)),
				         why);
			else
				snprintf(msg, sizeof(msg), "unknown key '%s' %s",
				         shown(scalar(k), b, sizeof(b)), where(path, w, sizeof(w)));
			return fail_mark(c, k->start_mark, "", msg);
		}
		join_path(sub, sizeof(sub), path, o->key);
		if (apply_opt(c, o, base, k, v, sub) != 0)
			return -1;
	}
	return 0;
}

/* The name of a named entry (a provider, a plan): a key checked like a name. */
static int entry_name(struct ctx *c, yaml_node_t *map, yaml_node_pair_t *p, const char *section,
                      const char **name)
{
	yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
	char msg[MSG_LEN], *tmp = NULL;
	if (check_pair_key(c, map, p, section) != 0)
		return -1;
	if (check_name(scalar(k), &tmp, msg, sizeof(msg)) != 0)
		return fail_mark(c, k->start_mark, section, msg);
	free(tmp);
	*name = scalar(k);
	return 0;
}

/* providers: { NAME: {...}, ... }. Exactly the listed providers become active. */
static int parse_providers(struct ctx *c, yaml_node_t *key, yaml_node_t *value)
{
	struct config *cfg = c->cfg;
	size_t n = map_size(value);
	if (check_mapping_node(c, value, "providers") != 0)
		return -1;
	c->have_providers = true;
	c->providers_mark = key->start_mark;
	if (!(cfg->providers = calloc(n ? n : 1, sizeof(*cfg->providers))) ||
	    !(c->provider_marks = calloc(n ? n : 1, sizeof(yaml_mark_t))))
		return fail_mark(c, key->start_mark, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		yaml_node_pair_t *p = &value->data.mapping.pairs.start[i];
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
		struct provider_conf *pc = &cfg->providers[i];
		const char *name;
		char path[PATH_LEN];
		if (entry_name(c, value, p, "providers", &name) != 0)
			return -1;
		cfg->n_providers++; /* counted first so that config_free sees it */
		if (provider_init(pc, name) != 0)
			return fail_mark(c, k->start_mark, "", "out of memory");
		c->provider_marks[i] = k->start_mark;
		join_path(path, sizeof(path), "providers", name);
		if (check_mapping_node(c, v, path) != 0)
			return -1;
		if (v->type == YAML_MAPPING_NODE && walk_map(c, v, provider_opts, pc, path) != 0)
			return -1;
	}
	return 0;
}

/* plans: { NAME: {...}, ... }. "default" is always plans[0]. */
static int parse_plans(struct ctx *c, yaml_node_t *key, yaml_node_t *value)
{
	struct config *cfg = c->cfg;
	size_t n = map_size(value);
	struct plan_conf *all;
	if (check_mapping_node(c, value, "plans") != 0)
		return -1;
	/* plans[0] ("default") is in place already: grow once to the final size so
	 * that no field moves after its origin has been recorded. */
	if (!(all = realloc(cfg->plans, (n + 1) * sizeof(*all))))
		return fail_mark(c, key->start_mark, "", "out of memory");
	memset(all + 1, 0, n * sizeof(*all));
	cfg->plans = all;
	for (size_t i = 0; i < n; i++) {
		yaml_node_pair_t *p = &value->data.mapping.pairs.start[i];
		yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
		struct plan_conf *pl;
		const char *name;
		char path[PATH_LEN];
		if (entry_name(c, value, p, "plans", &name) != 0)
			return -1;
		if (strcmp(name, "default") == 0) {
			pl = &cfg->plans[0];
		} else {
			pl = &cfg->plans[cfg->n_plans++];
			if (plan_init(pl, name) != 0)
				return fail_mark(c, key->start_mark, "", "out of memory");
		}
		join_path(path, sizeof(path), "plans", name);
		if (check_mapping_node(c, v, path) != 0)
			return -1;
		if (v->type == YAML_MAPPING_NODE && walk_map(c, v, plan_opts, pl, path) != 0)
			return -1;
	}
	return 0;
}

/* keys: [ {provider, key_sha256, plan}, ... ] */
static int parse_keys(struct ctx *c, yaml_node_t *key, yaml_node_t *value)
{
	struct config *cfg = c->cfg;
	size_t n = 0;
	char msg[MSG_LEN];
	if (is_null(value))
		return 0;
	if (value->type != YAML_SEQUENCE_NODE) {
		snprintf(msg, sizeof(msg), "expected a list, got %s", node_kind(value));
		return fail_mark(c, value->start_mark, "keys", msg);
	}
	n = (size_t)(value->data.sequence.items.top - value->data.sequence.items.start);
	if (!(cfg->keys = calloc(n ? n : 1, sizeof(*cfg->keys))) ||
	    !(c->key_marks = calloc(n ? n : 1, sizeof(yaml_mark_t))))
		return fail_mark(c, key->start_mark, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *e =
		    yaml_document_get_node(c->doc, value->data.sequence.items.start[i]);
		struct key_conf *kc = &cfg->keys[i];
		char path[PATH_LEN];
		snprintf(path, sizeof(path), "keys[%zu]", i);
		cfg->n_keys++;
		c->key_marks[i] = e->start_mark;
		if (opts_defaults(key_opts, kc) != 0)
			return fail_mark(c, e->start_mark, "", "out of memory");
		if (e->type != YAML_MAPPING_NODE) {
			snprintf(msg, sizeof(msg), "expected a mapping, got %s", node_kind(e));
			return fail_mark(c, e->start_mark, path, msg);
		}
		if (walk_map(c, e, key_opts, kc, path) != 0)
			return -1;
		if (!kc->provider || !kc->key_sha256)
			return fail_mark(c, e->start_mark, path,
			                 kc->provider ? "'key_sha256' is required"
			                              : "'provider' is required");
		/* no plan: "default" as always, unless the entry only gives a scope
		 * (check_keys puts the provider's plan in then) */
		kc->own_plan = kc->plan != NULL || kc->scope == NULL;
		if (!kc->plan && !kc->scope && !(kc->plan = strdup("default")))
			return fail_mark(c, e->start_mark, path, "out of memory");
	}
	return 0;
}

static int cmp_agent_priority(const void *a, const void *b)
{
	return strcmp(((const struct agent_priority *)a)->id,
	              ((const struct agent_priority *)b)->id);
}

/* agents.priorities: {AGENT_ID: N}, N from -100 to 100. */
static int parse_agent_priorities(struct ctx *c, yaml_node_t *key, yaml_node_t *value)
{
	const char *path = "agents.priorities";
	struct config *cfg = c->cfg;
	char msg[MSG_LEN], b[80];
	if (check_mapping_node(c, value, path) != 0)
		return -1;
	size_t n = map_size(value);
	if (n == 0)
		return 0;
	if (!(cfg->agents.priorities = calloc(n, sizeof(*cfg->agents.priorities))))
		return fail_mark(c, key->start_mark, "", "out of memory");
	for (yaml_node_pair_t *p = value->data.mapping.pairs.start;
	     p < value->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
		if (check_pair_key(c, value, p, path) != 0)
			return -1;
		char vpath[PATH_LEN];
		join_path(vpath, sizeof(vpath), path, scalar(k));
		if (check_scalar_node(c, v, vpath) != 0)
			return -1;
		struct agent_priority *ap = &cfg->agents.priorities[cfg->agents.n_priorities];
		if (!priority_parse(scalar(v), &ap->priority)) {
			snprintf(msg, sizeof(msg), "expected an integer from -100 to 100, got '%s'",
			         shown(scalar(v), b, sizeof(b)));
			return fail_mark(c, v->start_mark, vpath, msg);
		}
		if (!(ap->id = strdup(scalar(k))))
			return fail_mark(c, k->start_mark, "", "out of memory");
		cfg->agents.n_priorities++;
	}
	qsort(cfg->agents.priorities, cfg->agents.n_priorities, sizeof(*cfg->agents.priorities),
	      cmp_agent_priority);
	return 0;
}

bool config_agent_priority(const struct config *cfg, const char *id, int *priority)
{
	if (cfg->agents.n_priorities == 0)
		return false;
	struct agent_priority k = {.id = (char *)id};
	const struct agent_priority *f = bsearch(
	    &k, cfg->agents.priorities, cfg->agents.n_priorities, sizeof(k), cmp_agent_priority);
	if (f == NULL)
		return false;
	*priority = f->priority;
	return true;
}

/* --------------------------------------------------------- file loading */

/* Reads the whole file (the parser wants it in memory anyway, and reader errors
 * come back as byte offsets). The buffer grows as needed up to MAX_FILE_BYTES. */
static char *read_file(struct ctx *c, const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;
	if (!f) {
		set_err(c, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (n == cap) {
			char *nb;
			cap = cap ? 2 * cap : 16384;
			if (cap > MAX_FILE_BYTES + 1)
				cap = MAX_FILE_BYTES + 1;
			if (n == cap || !(nb = realloc(buf, cap))) {
				if (n == cap)
					set_err(c, "%s: larger than %u bytes", path,
					        MAX_FILE_BYTES);
				else
					set_err(c, "%s: out of memory", path);
				break;
			}
			buf = nb;
		}
		n += fread(buf + n, 1, cap - n, f);
		if (ferror(f)) {
			set_err(c, "%s: cannot read: %s", path, strerror(errno));
			break;
		}
		if (feof(f)) {
			fclose(f);
			*len = n;
			return buf;
		}
	}
	fclose(f);
	free(buf);
	return NULL;
}

/* libyaml's reader errors carry a byte offset, not a mark: count lines ourselves. */
static yaml_mark_t mark_of_offset(const char *buf, size_t len, size_t off)
{
	yaml_mark_t m = {0, 0, 0};
	for (size_t i = 0; i < off && i < len; i++) {
		if (buf[i] == '\n') {
			m.line++;
			m.column = 0;
		} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
			m.column++; /* count characters, not UTF-8 continuation bytes */
		}
	}
	return m;
}

static int yaml_failure(struct ctx *c, yaml_parser_t *p, const char *buf, size_t len)
{
	yaml_mark_t m = p->problem_mark;
	if (p->error == YAML_READER_ERROR)
		m = mark_of_offset(buf, len, p->problem_offset);
	else if (p->error == YAML_MEMORY_ERROR)
		return fail_mark(c, m, "", "out of memory");
	return fail_mark(c, m, "", p->problem ? p->problem : "YAML error");
}

/* Parses the file's single document into cfg. */
static int load_yaml(struct ctx *c, const char *buf, size_t len)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	yaml_node_t *root;
	int rc = 0;
	if (!yaml_parser_initialize(&parser)) {
		set_err(c, "%s: out of memory", c->file);
		return -1;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = yaml_failure(c, &parser, buf, len);
		yaml_parser_delete(&parser);
		return rc;
	}
	c->doc = &doc;
	root = yaml_document_get_root_node(&doc);
	if (root && !is_null(root)) {
		if (root->type != YAML_MAPPING_NODE)
			rc = fail_mark(c, root->start_mark, "",
			               "expected a mapping of settings at the top level");
		else
			rc = walk_map(c, root, root_opts, c->cfg, "");
	}
	/* A second document would be silently ignored: refuse it. */
	if (rc == 0 && root) {
		if (!yaml_parser_load(&parser, &extra)) {
			rc = yaml_failure(c, &parser, buf, len);
		} else {
			yaml_node_t *r2 = yaml_document_get_root_node(&extra);
			if (r2)
				rc = fail_mark(c, r2->start_mark, "",
				               "only one YAML document is allowed");
			yaml_document_delete(&extra);
		}
	}
	c->doc = NULL;
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

/* ------------------------------------------------------------ validation */

static void list_provider_names(const struct config *cfg, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < cfg->n_providers && used < len; i++) {
		int n =
		    snprintf(out + used, len - used, "%s%s", i ? ", " : "", cfg->providers[i].name);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/* Without a providers: section every built-in that has an upstream is active. */
static int activate_builtins(struct ctx *c)
{
	struct config *cfg = c->cfg;
	if (!(cfg->providers = calloc(n_builtins ? n_builtins : 1, sizeof(*cfg->providers))))
		return -1;
	for (size_t i = 0; i < n_builtins; i++) {
		if (!builtins[i]->upstream)
			continue;
		if (provider_init(&cfg->providers[cfg->n_providers++], builtins[i]->name) != 0)
			return -1;
	}
	return 0;
}

/* default_provider: as written when written (it must be active); otherwise openai
 * when active, else the provider at prefix "/", else the first one listed. */
static int resolve_default_provider(struct ctx *c)
{
	struct config *cfg = c->cfg;
	char msg[MSG_LEN], names[160];
	const char *pick = NULL;
	if (cfg->n_providers == 0)
		return fail_mark(c, c->providers_mark, "providers",
		                 "at least one provider is required");
	if (is_set(c, &cfg->default_provider)) {
		if (find_provider(cfg, cfg->default_provider))
			return 0;
		list_provider_names(cfg, names, sizeof(names));
		snprintf(msg, sizeof(msg), "'%s' is not an active provider (active: %s)",
		         cfg->default_provider, names);
		return fail_field(c, &cfg->default_provider, NULL, "default_provider", msg);
	}
	if (find_provider(cfg, "openai"))
		return 0;
	for (size_t i = 0; i < cfg->n_providers && !pick; i++)
		if (strcmp(cfg->providers[i].prefix, "/") == 0)
			pick = cfg->providers[i].name;
	if (!pick)
		pick = cfg->providers[0].name;
	free(cfg->default_provider);
	if (!(cfg->default_provider = strdup(pick)))
		return fail_mark(c, c->providers_mark, "", "out of memory");
	return 0;
}

static const yaml_mark_t *provider_mark(const struct ctx *c, size_t i)
{
	return c->provider_marks ? &c->provider_marks[i] : NULL;
}

static int check_plan_ref(struct ctx *c, char *const *plan, const yaml_mark_t *fallback,
                          const char *path)
{
	char msg[MSG_LEN];
	if (find_plan(c->cfg, *plan))
		return 0;
	snprintf(msg, sizeof(msg), "unknown plan '%s'", *plan);
	return fail_field(c, plan, fallback, path, msg);
}

static int check_provider_plans(struct ctx *c)
{
	for (size_t i = 0; i < c->cfg->n_providers; i++) {
		struct provider_conf *p = &c->cfg->providers[i];
		char path[PATH_LEN];
		join_path(path, sizeof(path), "providers", p->name);
		if (check_plan_ref(c, &p->plan, provider_mark(c, i), path) != 0)
			return -1;
		for (size_t j = 0; j < p->n_model_plans; j++) {
			char sub[PATH_LEN];
			join_path(sub, sizeof(sub), path, "model_plans");
			if (check_plan_ref(c, &p->model_plans[j].value, provider_mark(c, i), sub) !=
			    0)
				return -1;
		}
	}
	return 0;
}

static int check_providers(struct ctx *c)
{
	struct config *cfg = c->cfg;
	char msg[MSG_LEN], path[PATH_LEN];
	for (size_t i = 0; i < cfg->n_providers; i++) {
		struct provider_conf *p = &cfg->providers[i];
		join_path(path, sizeof(path), "providers", p->name);
		if (!p->upstream)
			return fail_field(
			    c, &p->name, provider_mark(c, i), path,
			    find_builtin(p->name)
			        ? "'upstream' is required (this provider has no built-in upstream)"
			        : "'upstream' is required for a provider without built-in "
			          "defaults");
		for (size_t j = 0; j < i; j++) {
			const struct provider_conf *q = &cfg->providers[j];
			if (strcmp(p->prefix, q->prefix) == 0) {
				snprintf(msg, sizeof(msg),
				         "prefix '%s' is already used by provider '%s'", p->prefix,
				         q->name);
				return fail_field(c, &p->prefix, provider_mark(c, i), path, msg);
			}
			for (size_t h = 0; h < p->n_hosts; h++)
				for (size_t g = 0; g < q->n_hosts; g++)
					if (strcmp(p->hosts[h], q->hosts[g]) == 0) {
						snprintf(
						    msg, sizeof(msg),
						    "host '%s' is already used by provider '%s'",
						    p->hosts[h], q->name);
						return fail_field(c, &p->hosts, provider_mark(c, i),
						                  path, msg);
					}
		}
	}
	return 0;
}

/* The relations between a plan's fields, and the defaults that depend on
 * other sections (reopen_after_s follows limits.idle_ttl_s). */
static int check_plan(struct ctx *c, struct plan_conf *p)
{
	/* Every field blamed below was set by the file or a variable (the defaults are
	 * consistent), so no fallback position is needed. */
	const yaml_mark_t *fallback = NULL;
	char msg[MSG_LEN], path[PATH_LEN];
	join_path(path, sizeof(path), "plans", p->name);
	if (p->concurrency.min > p->max_concurrent) {
		snprintf(msg, sizeof(msg), "concurrency.min (%u) is above max_concurrent (%u)",
		         p->concurrency.min, p->max_concurrent);
		return fail_field(c,
		                  is_set(c, &p->concurrency.min) ? (void *)&p->concurrency.min
		                                                 : (void *)&p->max_concurrent,
		                  fallback, path, msg);
	}
	p->day_reset_minute = daily_parse_hhmm(p->day_resets_at);
	if (p->concurrency.reopen_after_s == 0)
		p->concurrency.reopen_after_s =
		    c->cfg->limits.idle_ttl_s > 1 ? c->cfg->limits.idle_ttl_s / 2 : 1;
	if (p->dispatch_delay.max_ms < p->dispatch_delay.min_ms) {
		snprintf(msg, sizeof(msg),
		         "dispatch_delay.max_ms (%u) is below dispatch_delay.min_ms (%u)",
		         p->dispatch_delay.max_ms, p->dispatch_delay.min_ms);
		return fail_field(c,
		                  is_set(c, &p->dispatch_delay.max_ms)
		                      ? (void *)&p->dispatch_delay.max_ms
		                      : (void *)&p->dispatch_delay.min_ms,
		                  fallback, path, msg);
	}
	return 0;
}

static int check_admin(struct ctx *c)
{
	struct config *cfg = c->cfg;
	char host[256];
	if (!*cfg->admin.listen || *cfg->admin.token)
		return 0;
	if (config_split_hostport(cfg->admin.listen, host, sizeof(host), NULL) == 0 &&
	    config_host_is_loopback(host))
		return 0;
	return fail_field(c, &cfg->admin.listen, NULL, "admin.listen",
	                  "admin.token is required when admin.listen is not a loopback address");
}

/* The CA is a pair; a tunnel to any host is an open proxy beyond loopback. */
static int check_forward(struct ctx *c)
{
	struct config *cfg = c->cfg;
	if ((*cfg->forward.ca_cert != '\0') != (*cfg->forward.ca_key != '\0'))
		return fail_field(c,
		                  *cfg->forward.ca_cert ? (const void *)&cfg->forward.ca_cert
		                                        : (const void *)&cfg->forward.ca_key,
		                  NULL, "forward",
		                  "ca_cert and ca_key are given together, or neither (a CA made at "
		                  "first start)");
	for (size_t i = 0; i < cfg->forward.n_tunnel; i++) {
		if (strcmp(cfg->forward.tunnel[i], "*") != 0)
			continue;
		char host[256];
		if (config_split_hostport(cfg->listen, host, sizeof(host), NULL) == 0 &&
		    config_host_is_loopback(host))
			return 0;
		return fail_field(c, &cfg->forward.tunnel, NULL, "forward.tunnel",
		                  "\"*\" (tunnel to any host) only when listen is a loopback "
		                  "address; list the hosts instead: pacerd is never an open proxy");
	}
	return 0;
}

/* forward.state_dir is state_dir's old name (0.2.0): still read, for one
 * release, as state_dir, with a note for the log; both set is an error. */
static int check_state_dir_alias(struct ctx *c)
{
	struct config *cfg = c->cfg;
	if (*cfg->forward.state_dir == '\0')
		return 0;
	if (*cfg->state_dir != '\0')
		return fail_field(
		    c, &cfg->forward.state_dir, NULL, "forward.state_dir",
		    "the old name of state_dir, which is set too: keep state_dir alone");
	char *dir = strdup(cfg->forward.state_dir);
	char *note = malloc(MSG_LEN + PATH_MAX);
	if (dir == NULL || note == NULL) {
		free(dir);
		free(note);
		set_err(c, "%s: out of memory", c->file);
		return -1;
	}
	const struct origin *o = origin_of(c, &cfg->forward.state_dir);
	if (o != NULL && o->env == NULL)
		snprintf(note, MSG_LEN + PATH_MAX, "%s:%zu:%zu: ", c->file, o->mark.line + 1,
		         o->mark.column + 1);
	else
		note[0] = '\0';
	size_t n = strlen(note);
	snprintf(note + n, MSG_LEN + PATH_MAX - n,
	         "forward.state_dir is deprecated and will be removed after 0.3: "
	         "write state_dir (top level) instead");
	free(cfg->state_dir);
	cfg->state_dir = dir;
	free(cfg->deprecated);
	cfg->deprecated = note;
	return 0;
}

static int cmp_key_index(const void *a, const void *b, void *arg)
{
	const struct key_conf *keys = arg;
	const struct key_conf *x = &keys[*(const size_t *)a], *y = &keys[*(const size_t *)b];
	int r = strcmp(x->provider, y->provider);
	if (r == 0)
		r = strcmp(x->key_sha256, y->key_sha256);
	if (r == 0) /* stable: the later entry is reported as the duplicate */
		r = (*(const size_t *)a > *(const size_t *)b) -
		    (*(const size_t *)a < *(const size_t *)b);
	return r;
}

static int check_keys(struct ctx *c)
{
	struct config *cfg = c->cfg;
	char msg[MSG_LEN], path[PATH_LEN];
	size_t *idx;
	int rc = 0;
	for (size_t i = 0; i < cfg->n_keys; i++) {
		struct key_conf *k = &cfg->keys[i];
		snprintf(path, sizeof(path), "keys[%zu]", i);
		if (!find_provider(cfg, k->provider)) {
			snprintf(msg, sizeof(msg), "'%s' is not an active provider", k->provider);
			return fail_field(c, &k->provider, &c->key_marks[i], path, msg);
		}
		if (k->own_plan && check_plan_ref(c, &k->plan, &c->key_marks[i], path) != 0)
			return -1;
		/* registry_plan_for() reads k->plan: without a plan of its own the key
		 * gets the provider's, as it would without the entry */
		if (!k->own_plan && !k->plan &&
		    !(k->plan = strdup(find_provider(cfg, k->provider)->plan))) {
			set_err(c, "%s: out of memory", c->file);
			return -1;
		}
	}
	if (cfg->n_keys < 2)
		return 0;
	if (!(idx = malloc(cfg->n_keys * sizeof(*idx)))) {
		set_err(c, "%s: out of memory", c->file);
		return -1;
	}
	for (size_t i = 0; i < cfg->n_keys; i++)
		idx[i] = i;
	qsort_r(idx, cfg->n_keys, sizeof(*idx), cmp_key_index, cfg->keys);
	for (size_t i = 1; i < cfg->n_keys && rc == 0; i++) {
		const struct key_conf *a = &cfg->keys[idx[i - 1]], *b = &cfg->keys[idx[i]];
		if (strcmp(a->provider, b->provider) || strcmp(a->key_sha256, b->key_sha256))
			continue;
		snprintf(path, sizeof(path), "keys[%zu]", idx[i]);
		snprintf(msg, sizeof(msg), "same provider and key_sha256 as keys[%zu]", idx[i - 1]);
		rc = fail_field(c, &cfg->keys[idx[i]].key_sha256, &c->key_marks[idx[i]], path, msg);
	}
	free(idx);
	return rc;
}

/* ----------------------------------------------------------- environment */

/* Finds "a.b.c" in a table, through its sections. */
static const struct opt *find_opt_path(const struct opt *t, const char *path)
{
	const char *dot = strchr(path, '.');
	char head[64];
	const struct opt *o;
	if (!dot)
		return find_opt(t, path);
	if ((size_t)(dot - path) >= sizeof(head))
		return NULL;
	memcpy(head, path, (size_t)(dot - path));
	head[dot - path] = '\0';
	o = find_opt(t, head);
	return o && o->type == OPT_SECTION ? find_opt_path(o->sub, dot + 1) : NULL;
}

/* The value of NAME in env: the first "NAME=..." entry, as getenv() would. */
static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

/* PACERD_STORE: redis://HOST:PORT, rediss://HOST:PORT (TLS), unix:/path or
 * local (containers: one variable turns the shared store on without a file of
 * its own). */
static int apply_env_store(struct ctx *c, const char *val)
{
	struct config *cfg = c->cfg;
	char msg[MSG_LEN], *addr = NULL;
	if (strcmp(val, "local") == 0) {
		cfg->store.kind = STORE_LOCAL;
		return 0;
	}
	bool tls = strncmp(val, "rediss://", 9) == 0;
	const char *a = tls ? val + 9 : strncmp(val, "redis://", 8) == 0 ? val + 8 : val;
	if ((a == val && strncmp(val, "unix:", 5) != 0) ||
	    check_store_address(a, &addr, msg, sizeof(msg)) != 0) {
		set_err(c,
		        "PACERD_STORE: expected redis://HOST:PORT, rediss://HOST:PORT, unix:/path "
		        "or local, got '%s'",
		        val);
		return -1;
	}
	if (tls)
		cfg->store.redis.tls.enabled = true;
	if (!addr)
		return -1;
	free(cfg->store.redis.address);
	cfg->store.redis.address = addr;
	cfg->store.kind = STORE_REDIS;
	return 0;
}

static int apply_env(struct ctx *c, char *const *env)
{
	struct config *cfg = c->cfg;
	const char *store = env_get(env, "PACERD_STORE");
	if (store && apply_env_store(c, store) != 0)
		return -1;
	struct provider_conf *prov = find_provider(cfg, cfg->default_provider);
	struct plan_conf *plan = find_plan(cfg, prov->plan);
	for (size_t i = 0; i < sizeof(env_opts) / sizeof(env_opts[0]); i++) {
		const struct env_opt *e = &env_opts[i];
		const struct opt *o;
		const char *val = env_get(env, e->name);
		void *base = e->target == ENV_ROOT       ? (void *)cfg
		             : e->target == ENV_PROVIDER ? (void *)prov
		                                         : (void *)plan;
		char msg[MSG_LEN];
		if (!val)
			continue;
		o = find_opt_path(e->target == ENV_ROOT       ? root_opts
		                  : e->target == ENV_PROVIDER ? provider_opts
		                                              : plan_opts,
		                  e->key);
		if (!o || set_scalar(o, base, val, false, msg, sizeof(msg)) != 0) {
			set_err(c, "%s: %s", e->name, o ? msg : "internal error: no such option");
			return -1;
		}
		if (add_origin(c, field_at(base, o->off), e->name, (yaml_mark_t){0, 0, 0}) != 0)
			return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- load */

static struct config *config_new(struct ctx *c, const char *path)
{
	struct config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return NULL;
	c->cfg = cfg;
	if (!(cfg->source = strdup(path ? path : DEFAULTS_SOURCE)) ||
	    opts_defaults(root_opts, cfg) != 0 || !(cfg->plans = calloc(1, sizeof(*cfg->plans))))
		return NULL;
	cfg->n_plans = 1;
	if (plan_init(&cfg->plans[0], "default") != 0)
		return NULL;
	return cfg;
}

/* The store's password: the first line of store.redis.password_file, else
 * PACERD_STORE_PASSWORD, else none (never a YAML value: a file that is
 * shown, copied or checked in must not carry it). Read only for kind: redis. */
static int load_store_password(struct ctx *c, char *const *env)
{
	struct config *cfg = c->cfg;
	if (cfg->store.kind != STORE_REDIS)
		return 0;
	const char *file = cfg->store.redis.password_file;
	char msg[MSG_LEN];
	char *pw = NULL;
	if (file[0] != '\0') {
		/* A regular file only, opened without blocking: a FIFO or a device
		 * named here must not hang a start or, worse, a reload on the event
		 * loop. Read with read(2): no stdio buffer keeps a copy. */
		char line[1024];
		int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			snprintf(msg, sizeof(msg), "cannot open '%.120s': %s", file,
			         fd < 0 ? strerror(errno) : "not a regular file");
			if (fd >= 0)
				close(fd);
			return fail_field(c, &cfg->store.redis.password_file, NULL,
			                  "store.redis.password_file", msg);
		}
		ssize_t got = read(fd, line, sizeof(line) - 1);
		close(fd);
		size_t n = got > 0 ? (size_t)got : 0;
		line[n] = '\0';
		n = strcspn(line, "\r\n");
		line[n] = '\0';
		if (n == 0) {
			explicit_bzero(line, sizeof(line));
			snprintf(msg, sizeof(msg), "'%.120s' holds no password on its first line",
			         file);
			return fail_field(c, &cfg->store.redis.password_file, NULL,
			                  "store.redis.password_file", msg);
		}
		pw = strdup(line);
		explicit_bzero(line, sizeof(line));
		cfg->store.redis.password_from = "password_file";
	} else {
		const char *v = env_get(env, "PACERD_STORE_PASSWORD");
		if (v == NULL || v[0] == '\0')
			return 0;
		pw = strdup(v);
		cfg->store.redis.password_from = "PACERD_STORE_PASSWORD";
	}
	if (pw == NULL) {
		set_err(c, "%s: out of memory", c->file);
		return -1;
	}
	cfg->store.redis.password = pw;
	return 0;
}

/* TLS to Redis: a client certificate needs its key, and the other way round. */
static int check_store_tls(struct ctx *c)
{
	struct config *cfg = c->cfg;
	const char *cert = cfg->store.redis.tls.cert_file, *key = cfg->store.redis.tls.key_file;
	if ((cert[0] == '\0') == (key[0] == '\0'))
		return 0;
	return fail_field(c,
	                  cert[0] != '\0' ? (const void *)&cfg->store.redis.tls.cert_file
	                                  : (const void *)&cfg->store.redis.tls.key_file,
	                  NULL, "store.redis.tls",
	                  "cert_file and key_file go together (a client certificate and its key)");
}

/* Each plan's day_time_zone, resolved once per distinct name (daily.h): the
 * tz database is read here, at load, and never on the request path. A name
 * check_zone() accepted always resolves; -1 only when out of memory. */
static int resolve_zones(struct ctx *c)
{
	struct config *cfg = c->cfg;
	int64_t now_s = (int64_t)time(NULL);
	if (!(cfg->zones = calloc(cfg->n_plans, sizeof(*cfg->zones))))
		return -1;
	for (size_t i = 0; i < cfg->n_plans; i++) {
		struct plan_conf *p = &cfg->plans[i];
		for (size_t j = 0; j < i && p->day_zone == NULL; j++)
			if (strcmp(cfg->plans[j].day_time_zone, p->day_time_zone) == 0)
				p->day_zone = cfg->plans[j].day_zone;
		if (p->day_zone != NULL)
			continue;
		struct daily_zone *z = daily_zone_resolve(p->day_time_zone, now_s);
		if (z == NULL)
			return -1;
		cfg->zones[cfg->n_zones++] = z;
		p->day_zone = z;
	}
	return 0;
}

static int validate(struct ctx *c, char *const *env)
{
	struct config *cfg = c->cfg;
	if (!c->have_providers && activate_builtins(c) != 0) {
		set_err(c, "%s: out of memory", c->file);
		return -1;
	}
	if (resolve_default_provider(c) != 0 || check_provider_plans(c) != 0)
		return -1;
	if (apply_env(c, env) != 0 || check_providers(c) != 0 || check_admin(c) != 0 ||
	    check_forward(c) != 0 || check_state_dir_alias(c) != 0 || check_store_tls(c) != 0 ||
	    load_store_password(c, env) != 0)
		return -1;
	for (size_t i = 0; i < cfg->n_plans; i++)
		if (check_plan(c, &cfg->plans[i]) != 0)
			return -1;
	if (check_keys(c) != 0)
		return -1;
	if (resolve_zones(c) != 0 || !(cfg->key_index = key_index_build(cfg->keys, cfg->n_keys))) {
		set_err(c, "%s: out of memory", c->file);
		return -1;
	}
	for (size_t i = 0; i < cfg->n_providers; i++)
		if (!(cfg->providers[i].memo = model_memo_new())) {
			set_err(c, "%s: out of memory", c->file);
			return -1;
		}
	return 0;
}

struct config *config_load(const char *path, char *const *env, char *err, size_t errlen)
{
	struct ctx c = {.file = path ? path : DEFAULTS_SOURCE, .err = err, .errlen = errlen};
	struct config *cfg;
	int rc = -1;
	if (err && errlen)
		err[0] = '\0';
	if (!(cfg = config_new(&c, path))) {
		set_err(&c, "%s: out of memory", c.file);
		config_free(c.cfg);
		return NULL;
	}
	if (path) {
		size_t len = 0;
		char *buf = read_file(&c, path, &len);
		if (buf) {
			rc = load_yaml(&c, buf, len);
			free(buf);
		}
	} else {
		rc = 0;
	}
	if (rc == 0)
		rc = validate(&c, env);
	free(c.origins);
	free(c.provider_marks);
	free(c.key_marks);
	if (rc != 0) {
		config_free(cfg);
		return NULL;
	}
	return cfg;
}

/* ------------------------------------------------------- the key reference */

/* One bound of a number, as the man page writes it. */
static void print_bound(FILE *out, double v)
{
	if (isinf(v))
		fputs("inf", out);
	else
		fprintf(out, "%.15g", v);
}

/* The type, bounds and default of one row; see config_keys_print(). */
static void print_row(FILE *out, const char *path, const struct opt *o)
{
	fprintf(out, "%s\t", path);
	switch (o->type) {
	case OPT_UINT:
	case OPT_U64:
		fputs("integer\t", out);
		print_bound(out, o->lo);
		fputs("..", out);
		if (o->type == OPT_U64)
			fputs("18446744073709551615", out);
		else
			print_bound(out, o->hi);
		fprintf(out, "\t%.15g\n", o->dnum);
		return;
	case OPT_NUM:
		fputs("number\t", out);
		fputc((o->flags & OPT_LO_OPEN) ? '(' : '[', out);
		print_bound(out, o->lo);
		fputs(", ", out);
		print_bound(out, o->hi);
		fputc((o->flags & OPT_HI_OPEN) || isinf(o->hi) ? ')' : ']', out);
		fprintf(out, "\t%.15g\n", o->dnum);
		return;
	case OPT_BOOL:
		fprintf(out, "boolean\t-\t%s\n", o->dnum != 0 ? "true" : "false");
		return;
	case OPT_STR:
		fputs("string\t-\t", out);
		if (o->dstr == NULL)
			fputs("-\n", out);
		else
			fprintf(out, "\"%s\"\n", o->dstr);
		return;
	case OPT_ENUM:
		fputs("enum\t", out);
		for (const char *const *n = o->names; *n != NULL; n++)
			fprintf(out, "%s%s", n == o->names ? "" : "|", *n);
		fprintf(out, "\t%s\n", o->names[(int)o->dnum]);
		return;
	case OPT_STRLIST:
		fputs("list of strings\t-\t-\n", out);
		return;
	case OPT_RULES:
		fputs("map of model patterns\t-\t-\n", out);
		return;
	case OPT_SECTION: /* print_table() walks into it */
	case OPT_CUSTOM:
		/* A section with a parser of its own that print_table() does not know
		 * yet: still a line, so that the man page check asks for its heading. */
		fputs("custom\t-\t-\n", out);
		return;
	}
}

static void print_table(FILE *out, const char *prefix, const struct opt *t)
{
	char path[PATH_LEN];
	for (const struct opt *o = t; o->key != NULL; o++) {
		join_path(path, sizeof(path), prefix, o->key);
		if (o->type == OPT_SECTION)
			print_table(out, path, o->sub);
		else if (o->parse == parse_providers)
			print_table(out, "providers.<name>", provider_opts);
		else if (o->parse == parse_plans)
			print_table(out, "plans.<name>", plan_opts);
		else if (o->parse == parse_keys)
			print_table(out, "keys[]", key_opts);
		else if (o->parse == parse_agent_priorities)
			fprintf(out, "%s\tmap of agent ids\t%d..%d\t-\n", path, PRIORITY_MIN,
			        PRIORITY_MAX);
		else
			print_row(out, path, o);
	}
}

void config_keys_print(FILE *out)
{
	print_table(out, "", root_opts);
}
