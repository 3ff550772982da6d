/* SPDX-License-Identifier: Apache-2.0 */
/* state_file — the lanes' state file, encoded and decoded. See state_file.h.
 *
 * The records are tables of fields (name, offset, type), one for a lane and
 * one for a learned budget, walked the same way to write and to read, as
 * config.c's option tables are: a field cannot be written and forgotten on
 * the way back. */
#include "sched/state_file.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the snapshot ---- */

void state_snapshot_clear(struct state_snapshot *s)
{
	s->written_ms = 0;
	s->n_lanes = s->n_budgets = s->n_scopes = 0;
}

void state_snapshot_free(struct state_snapshot *s)
{
	free(s->lanes);
	free(s->budgets);
	free(s->scopes);
	memset(s, 0, sizeof(*s));
}

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return true;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * size);
	if (q == NULL)
		return false;
	*p = q;
	*cap = c;
	return true;
}

bool state_snapshot_reserve(struct state_snapshot *s, size_t lanes, size_t scopes)
{
	return grow((void **)&s->lanes, &s->cap_lanes, s->n_lanes + lanes, sizeof(*s->lanes)) &&
	       grow((void **)&s->budgets, &s->cap_budgets, s->n_budgets + lanes * RLH_N_BUDGETS,
	            sizeof(*s->budgets)) &&
	       grow((void **)&s->scopes, &s->cap_scopes, s->n_scopes + scopes, sizeof(*s->scopes));
}

/* ---- fields ---- */

enum ftype {
	F_DBL,   /* double; not finite: "inf", "-inf", "nan" */
	F_I64,   /* int64_t */
	F_UINT,  /* unsigned */
	F_U8,    /* uint8_t */
	F_BOOL,  /* bool */
	F_SHAPE, /* enum learned_shape */
	F_HEX64, /* uint64_t as 16 hex digits */
	F_STR,   /* char[size], NUL-terminated */
};

struct field {
	const char *name;
	size_t off;
	enum ftype type;
	size_t size; /* F_STR: the array's */
};

#define LF(f, t)                                                                                   \
	{                                                                                          \
#f, offsetof(struct learned, f), t, 0                                              \
	}
/* Every field of struct learned but its parameters (the lane's plan and
 * dialect give them); learned.h asks for a new field to be added here. */
static const struct field learned_fields[] = {
    LF(shape, F_SHAPE),
    LF(n_obs, F_UINT),
    LF(obs_mark, F_DBL),
    LF(obs_at_ms, F_I64),
    LF(reset_at_ms, F_I64),
    LF(obs_remaining, F_DBL),
    LF(limit, F_DBL),
    LF(max_remaining, F_DBL),
    LF(thousands, F_BOOL),
    LF(s_w, F_DBL),
    LF(s_r, F_DBL),
    LF(s_R, F_DBL),
    LF(s_RR, F_DBL),
    LF(s_rR, F_DBL),
    LF(s_dr, F_DBL),
    LF(s_r2, F_DBL),
    LF(rho, F_DBL),
    LF(short_window, F_BOOL),
    LF(capacity, F_DBL),
    LF(correction, F_DBL),
    LF(cum_cost, F_DBL),
    LF(last_pass_ms, F_I64),
    LF(passed, F_BOOL),
    {"pace_t_ms", offsetof(struct learned, pace.t_ms), F_DBL, 0},
    {"pace_burst", offsetof(struct learned, pace.burst), F_DBL, 0},
    {"pace_tat", offsetof(struct learned, pace.tat), F_DBL, 0},
    LF(counted, F_BOOL),
    LF(refunded, F_DBL),
    LF(obs_net, F_DBL),
    LF(obs_sent_ms, F_DBL),
    LF(obs_level, F_DBL),
    LF(sh_level, F_DBL),
    LF(sh_at_ms, F_DBL),
    LF(sh_valid, F_BOOL),
    LF(sh_shift, F_DBL),
    LF(probe_up_ms, F_DBL),
    LF(unreported, F_UINT),
    LF(run_sent_ms, F_DBL),
    LF(run_y, F_DBL),
    LF(run_q, F_DBL),
    LF(run_nu, F_DBL),
    LF(run_open, F_BOOL),
    LF(run_summed, F_BOOL),
    LF(lo, F_DBL),
    LF(hi, F_DBL),
    LF(probe_lo, F_DBL),
    LF(bounds_at_ms, F_I64),
    LF(s_dy, F_DBL),
    LF(s_dt, F_DBL),
    LF(prior, F_DBL),
    LF(probe_ms, F_DBL),
    {NULL, 0, F_DBL, 0},
};
#undef LF

#define SF(f, t)                                                                                   \
	{                                                                                          \
#f, offsetof(struct sched_lane_saved, f), t, 0                                     \
	}
#define SS(f)                                                                                      \
	{                                                                                          \
#f, offsetof(struct sched_lane_saved, f), F_STR,                                   \
		    sizeof(((struct sched_lane_saved *)0)->f)                                      \
	}
static const struct field lane_fields[] = {
    SS(provider),
    SF(scope, F_HEX64),
    SS(scope_name),
    SS(model),
    SF(last_active_ms, F_I64),
    SF(answered, F_BOOL),
    SF(probing, F_BOOL),
    SF(hold_until_ms, F_I64),
    {"concurrency_open", offsetof(struct sched_lane_saved, aimd.open), F_BOOL, 0},
    {"concurrency_limit", offsetof(struct sched_lane_saved, aimd.limit), F_DBL, 0},
    {"rtt_ms", offsetof(struct sched_lane_saved, aimd.rtt_ms), F_DBL, 0},
    {"dispatch_delay_ms", offsetof(struct sched_lane_saved, aimd.delay_ms), F_DBL, 0},
    SF(strict_margin, F_DBL),
    SF(quota_out, F_BOOL),
    SF(quota_probe_at_ms, F_I64),
    SF(day_requests, F_DBL),
    SF(day_tokens, F_DBL),
    SF(day_resets_at_ms, F_I64),
    SF(output_rule, F_U8),
    {NULL, 0, F_DBL, 0},
};
#undef SF
#undef SS

static const char *const budget_names[RLH_N_BUDGETS] = {"requests", "tokens", "input_tokens",
                                                        "output_tokens", "project_tokens"};
_Static_assert(RLH_N_BUDGETS == 5, "one name per budget");

static json_t *dbl_json(double v)
{
	if (isnan(v))
		return json_string("nan");
	if (isinf(v))
		return json_string(v > 0 ? "inf" : "-inf");
	return json_real(v);
}

static json_t *field_json(const struct field *f, const void *base)
{
	const char *p = (const char *)base + f->off;
	char hex[17];
	switch (f->type) {
	case F_DBL:
		return dbl_json(*(const double *)(const void *)p);
	case F_I64:
		return json_integer((json_int_t) * (const int64_t *)(const void *)p);
	case F_UINT:
		return json_integer((json_int_t) * (const unsigned *)(const void *)p);
	case F_U8:
		return json_integer((json_int_t) * (const uint8_t *)(const void *)p);
	case F_BOOL:
		return json_boolean(*(const bool *)(const void *)p);
	case F_SHAPE:
		return json_string(
		    learned_shape_name(*(const enum learned_shape *)(const void *)p));
	case F_HEX64:
		snprintf(hex, sizeof(hex), "%016" PRIx64, *(const uint64_t *)(const void *)p);
		return json_string(hex);
	case F_STR:
		return json_stringn(p, strnlen(p, f->size));
	}
	return NULL;
}

/* Sets every field of the table on o; false when memory ran out. */
static bool fields_put(json_t *o, const struct field *t, const void *base)
{
	for (; t->name != NULL; t++)
		if (json_object_set_new_nocheck(o, t->name, field_json(t, base)) != 0)
			return false;
	return true;
}

static bool hex64_parse(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	for (; s[i] != '\0'; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0 || i >= 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return i == 16;
}

static bool dbl_parse(const json_t *j, double *out)
{
	if (json_is_number(j)) {
		*out = json_number_value(j);
		return true;
	}
	const char *s = json_string_value(j);
	if (s == NULL)
		return false;
	if (strcmp(s, "nan") == 0)
		*out = NAN;
	else if (strcmp(s, "inf") == 0)
		*out = INFINITY;
	else if (strcmp(s, "-inf") == 0)
		*out = -INFINITY;
	else
		return false;
	return true;
}

/* Reads one field from o into base; false, with the field's name in what,
 * when it is missing or of another type or range. */
static bool field_get(const json_t *o, const struct field *f, void *base)
{
	const json_t *j = json_object_get(o, f->name);
	char *p = (char *)base + f->off;
	json_int_t i;
	const char *s;
	if (j == NULL)
		return false;
	switch (f->type) {
	case F_DBL:
		return dbl_parse(j, (double *)(void *)p);
	case F_I64:
		if (!json_is_integer(j))
			return false;
		*(int64_t *)(void *)p = (int64_t)json_integer_value(j);
		return true;
	case F_UINT:
		i = json_integer_value(j);
		if (!json_is_integer(j) || i < 0 || (uint64_t)i > UINT32_MAX)
			return false;
		*(unsigned *)(void *)p = (unsigned)i;
		return true;
	case F_U8:
		i = json_integer_value(j);
		if (!json_is_integer(j) || i < 0 || i > UINT8_MAX)
			return false;
		*(uint8_t *)(void *)p = (uint8_t)i;
		return true;
	case F_BOOL:
		if (!json_is_boolean(j))
			return false;
		*(bool *)(void *)p = json_is_true(j);
		return true;
	case F_SHAPE:
		s = json_string_value(j);
		for (int k = LEARNED_UNKNOWN; s != NULL && k <= LEARNED_WINDOW; k++)
			if (strcmp(s, learned_shape_name((enum learned_shape)k)) == 0) {
				*(enum learned_shape *)(void *)p = (enum learned_shape)k;
				return true;
			}
		return false;
	case F_HEX64:
		s = json_string_value(j);
		return s != NULL && hex64_parse(s, (uint64_t *)(void *)p);
	case F_STR:
		s = json_string_value(j);
		if (s == NULL || json_string_length(j) >= f->size ||
		    strlen(s) != json_string_length(j))
			return false;
		memcpy(p, s, json_string_length(j) + 1);
		return true;
	}
	return false;
}

/* Reads every field of the table; the name of the first that fails in *bad. */
static bool fields_get(const json_t *o, const struct field *t, void *base, const char **bad)
{
	for (; t->name != NULL; t++)
		if (!field_get(o, t, base)) {
			*bad = t->name;
			return false;
		}
	return true;
}

/* ---- encoding ---- */

struct out {
	char *buf;
	size_t len, cap;
	EVP_MD_CTX *file, *records; /* the file's checksum; the records' own */
	bool failed;
};

static void put(struct out *o, const char *p, size_t n, bool record)
{
	if (o->failed)
		return;
	if (!grow((void **)&o->buf, &o->cap, o->len + n + 1, 1)) {
		o->failed = true;
		return;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	o->buf[o->len] = '\0';
	if (EVP_DigestUpdate(o->file, p, n) != 1 ||
	    (record && EVP_DigestUpdate(o->records, p, n) != 1))
		o->failed = true;
}

/* One line: {"kind":value}\n. Takes value over. */
static void put_record(struct out *o, const char *kind, json_t *value, bool record)
{
	json_t *line = json_object();
	if (line == NULL)
		json_decref(value);
	/* json_object_set_new takes value over, also when it fails */
	if (line == NULL || value == NULL || json_object_set_new_nocheck(line, kind, value) != 0) {
		json_decref(line);
		o->failed = true;
		return;
	}
	char *text = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(17));
	json_decref(line);
	if (text == NULL) {
		o->failed = true;
		return;
	}
	put(o, text, strlen(text), record);
	put(o, "\n", 1, record);
	free(text);
}

static json_t *lane_json(const struct sched_lane_saved *l, const struct learned *budgets)
{
	json_t *o = json_object(), *outputs = json_array(), *bs = json_object();
	bool ok = o != NULL && outputs != NULL && bs != NULL && fields_put(o, lane_fields, l);
	for (unsigned i = 0; ok && i < l->n_outputs && i < COST_OUTPUTS; i++)
		ok = json_array_append_new(outputs, json_integer((json_int_t)l->outputs[i])) == 0;
	unsigned k = 0;
	for (int b = 0; ok && b < RLH_N_BUDGETS; b++) {
		if (!(l->budgets & (1u << b)))
			continue;
		json_t *j = json_object();
		ok = j != NULL && fields_put(j, learned_fields, &budgets[k++]) &&
		     json_object_set_new_nocheck(bs, budget_names[b], j) == 0;
		if (!ok)
			json_decref(j);
	}
	ok = ok && json_object_set_nocheck(o, "outputs", outputs) == 0 &&
	     json_object_set_nocheck(o, "budgets", bs) == 0;
	json_decref(outputs);
	json_decref(bs);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *scope_json(const struct scope_saved *s)
{
	char key[17], id[17];
	snprintf(key, sizeof(key), "%016" PRIx64, s->key);
	snprintf(id, sizeof(id), "%016" PRIx64, s->identity);
	return json_pack("{s:s,s:s,s:I}", "key", key, "identity", id, "last_ms",
	                 (json_int_t)s->last_ms);
}

static void hex(const unsigned char *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

int state_file_encode(const struct state_snapshot *s, char **out, size_t *len,
                      unsigned char records_digest[STATE_FILE_DIGEST])
{
	char head[128];
	/* The header's length is fixed by its format: its digest is filled
	 * in at the end, in the bytes kept for it. */
	int hn = snprintf(head, sizeof(head), "%s %d sha256=%064d\n", STATE_FILE_MAGIC,
	                  STATE_FILE_VERSION, 0);
	struct out o = {.file = EVP_MD_CTX_new(), .records = EVP_MD_CTX_new()};
	o.failed = o.file == NULL || o.records == NULL ||
	           EVP_DigestInit_ex(o.file, EVP_sha256(), NULL) != 1 ||
	           EVP_DigestInit_ex(o.records, EVP_sha256(), NULL) != 1;
	if (!o.failed && grow((void **)&o.buf, &o.cap, (size_t)hn + 1, 1)) {
		memcpy(o.buf, head, (size_t)hn + 1);
		o.len = (size_t)hn;
	} else {
		o.failed = true;
	}
	json_t *meta = json_pack("{s:I,s:I,s:I,s:I}", "written_ms", (json_int_t)s->written_ms,
	                         "lanes", (json_int_t)s->n_lanes, "budgets",
	                         (json_int_t)s->n_budgets, "scopes", (json_int_t)s->n_scopes);
	char *text = meta != NULL ? json_dumps(meta, JSON_COMPACT) : NULL;
	json_decref(meta);
	if (text == NULL)
		o.failed = true;
	else
		put(&o, text, strlen(text), false);
	put(&o, "\n", 1, false);
	free(text);
	size_t k = 0;
	for (size_t i = 0; i < s->n_lanes && !o.failed; i++) {
		put_record(&o, "lane", lane_json(&s->lanes[i], &s->budgets[k]), true);
		k += sched_saved_budgets(&s->lanes[i]);
	}
	for (size_t i = 0; i < s->n_scopes && !o.failed; i++)
		put_record(&o, "scope", scope_json(&s->scopes[i]), true);
	unsigned char d[EVP_MAX_MD_SIZE], r[EVP_MAX_MD_SIZE];
	unsigned dn = 0, rn = 0;
	if (!o.failed && EVP_DigestFinal_ex(o.file, d, &dn) == 1 &&
	    EVP_DigestFinal_ex(o.records, r, &rn) == 1 && dn == STATE_FILE_DIGEST) {
		char h[2 * STATE_FILE_DIGEST + 1];
		hex(d, dn, h);
		memcpy(o.buf + hn - 1 - 2 * STATE_FILE_DIGEST, h, 2 * STATE_FILE_DIGEST);
		if (records_digest != NULL)
			memcpy(records_digest, r, STATE_FILE_DIGEST);
	} else {
		o.failed = true;
	}
	EVP_MD_CTX_free(o.file);
	EVP_MD_CTX_free(o.records);
	if (o.failed) {
		free(o.buf);
		return -1;
	}
	*out = o.buf;
	*len = o.len;
	return 0;
}

/* ---- decoding ---- */

const char *state_file_error_name(enum state_file_error e)
{
	switch (e) {
	case STATE_FILE_OK:
		return "ok";
	case STATE_FILE_E_FOREIGN:
		return "foreign";
	case STATE_FILE_E_VERSION:
		return "version";
	case STATE_FILE_E_CORRUPT:
		return "corrupt";
	case STATE_FILE_E_MEMORY:
		break;
	}
	return "out_of_memory";
}

static enum state_file_error fail(struct state_snapshot *s, enum state_file_error e, char *err,
                                  size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static enum state_file_error fail(struct state_snapshot *s, enum state_file_error e, char *err,
                                  size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err != NULL && errlen > 0)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	state_snapshot_clear(s);
	return e;
}

/* The header: its version and digest. */
static enum state_file_error read_header(const char *buf, size_t len, size_t *body,
                                         char digest[2 * STATE_FILE_DIGEST + 1], char *err,
                                         size_t errlen, struct state_snapshot *s)
{
	size_t magic = strlen(STATE_FILE_MAGIC);
	const char *nl = memchr(buf, '\n', len < 128 ? len : 128);
	size_t n = nl != NULL ? (size_t)(nl - buf) : len;
	if (n < magic + 1 || memcmp(buf, STATE_FILE_MAGIC " ", magic + 1) != 0) {
		/* A start of the magic and nothing more: a file cut short. */
		if (nl == NULL &&
		    memcmp(buf, STATE_FILE_MAGIC " ", n < magic + 1 ? n : magic + 1) == 0)
			return fail(s, STATE_FILE_E_CORRUPT, err, errlen,
			            "cut short in its first line (%zu bytes)", len);
		return fail(s, STATE_FILE_E_FOREIGN, err, errlen,
		            "not a pacerd state file (it does not start with \"%s \")",
		            STATE_FILE_MAGIC);
	}
	if (nl == NULL)
		return fail(s, STATE_FILE_E_CORRUPT, err, errlen,
		            "cut short in its first line (%zu bytes)", len);
	char line[128];
	memcpy(line, buf, n);
	line[n] = '\0';
	const char *v = line + magic + 1;
	char *end;
	long version = strtol(v, &end, 10);
	if (end == v || (*end != ' ' && *end != '\0'))
		return fail(s, STATE_FILE_E_CORRUPT, err, errlen, "no version in its first line");
	if (version != STATE_FILE_VERSION)
		return fail(s, STATE_FILE_E_VERSION, err, errlen,
		            "format version %ld (this pacerd reads version %d)", version,
		            STATE_FILE_VERSION);
	static const char key[] = " sha256=";
	if (strncmp(end, key, sizeof(key) - 1) != 0 ||
	    strlen(end + sizeof(key) - 1) != 2 * STATE_FILE_DIGEST)
		return fail(s, STATE_FILE_E_CORRUPT, err, errlen, "no checksum in its first line");
	memcpy(digest, end + sizeof(key) - 1, 2 * STATE_FILE_DIGEST + 1);
	*body = n + 1;
	return STATE_FILE_OK;
}

static bool lane_parse(const json_t *o, struct sched_lane_saved *l, struct learned *budgets,
                       const char **bad)
{
	memset(l, 0, sizeof(*l));
	if (!fields_get(o, lane_fields, l, bad))
		return false;
	if (l->provider[0] == '\0') {
		*bad = "provider";
		return false;
	}
	const json_t *outputs = json_object_get(o, "outputs");
	*bad = "outputs";
	if (!json_is_array(outputs) || json_array_size(outputs) > COST_OUTPUTS)
		return false;
	for (size_t i = 0; i < json_array_size(outputs); i++) {
		json_int_t v = json_integer_value(json_array_get(outputs, i));
		if (!json_is_integer(json_array_get(outputs, i)) || v < 0 || v > UINT32_MAX)
			return false;
		l->outputs[i] = (uint32_t)v;
	}
	l->n_outputs = (uint8_t)json_array_size(outputs);
	const json_t *bs = json_object_get(o, "budgets");
	*bad = "budgets";
	if (!json_is_object(bs))
		return false;
	unsigned k = 0;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const json_t *j = json_object_get(bs, budget_names[b]);
		if (j == NULL)
			continue;
		struct learned *lb = &budgets[k++];
		learned_init(lb, NULL);
		if (!json_is_object(j) || !fields_get(j, learned_fields, lb, bad))
			return false;
		l->budgets |= (uint8_t)(1u << b);
	}
	*bad = "budgets";
	return json_object_size(bs) == k;
}

static bool scope_parse(const json_t *o, struct scope_saved *s)
{
	const char *key = json_string_value(json_object_get(o, "key"));
	const char *id = json_string_value(json_object_get(o, "identity"));
	const json_t *last = json_object_get(o, "last_ms");
	if (key == NULL || id == NULL || !json_is_integer(last) || !hex64_parse(key, &s->key) ||
	    !hex64_parse(id, &s->identity) || s->identity == 0)
		return false;
	s->last_ms = (int64_t)json_integer_value(last);
	return true;
}

/* One line of the body as a JSON object, or NULL. */
static json_t *line_json(const char *p, size_t n)
{
	json_error_t je;
	json_t *j = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
	if (j != NULL && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

static bool size_of(const json_t *meta, const char *name, size_t *out)
{
	const json_t *j = json_object_get(meta, name);
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return false;
	*out = (size_t)json_integer_value(j);
	return true;
}

enum state_file_error state_file_decode(const char *buf, size_t len, struct state_snapshot *s,
                                        char *err, size_t errlen)
{
	state_snapshot_clear(s);
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (len == 0)
		return fail(s, STATE_FILE_E_CORRUPT, err, errlen, "empty");
	size_t at = 0;
	char want[2 * STATE_FILE_DIGEST + 1];
	enum state_file_error e = read_header(buf, len, &at, want, err, errlen, s);
	if (e != STATE_FILE_OK)
		return e;
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn = 0;
	char got[2 * EVP_MAX_MD_SIZE + 1];
	if (EVP_Digest(buf + at, len - at, d, &dn, EVP_sha256(), NULL) != 1)
		return fail(s, STATE_FILE_E_MEMORY, err, errlen, "cannot compute its checksum");
	hex(d, dn, got);
	if (strcmp(got, want) != 0)
		return fail(s, STATE_FILE_E_CORRUPT, err, errlen,
		            "its checksum does not match: cut short or changed (%zu bytes)", len);

	/* The checksum holds: what follows was written whole by a pacerd of this
	 * version. It is still read with every check (a writer's bug, or a
	 * hand that rewrote the checksum, must not feed a lane nonsense). */
	size_t line = 1, want_lanes = 0, want_budgets = 0, want_scopes = 0;
	bool have_meta = false;
	const char *bad = "";
	while (at < len) {
		const char *p = buf + at;
		const char *nl = memchr(p, '\n', len - at);
		if (nl == NULL)
			return fail(s, STATE_FILE_E_CORRUPT, err, errlen, "line %zu: no end",
			            line + 1);
		size_t n = (size_t)(nl - p);
		at += n + 1;
		line++;
		json_t *j = line_json(p, n);
		if (j == NULL)
			return fail(s, STATE_FILE_E_CORRUPT, err, errlen,
			            "line %zu: not a JSON object", line);
		bool ok;
		const json_t *v;
		if (!have_meta) {
			const json_t *w = json_object_get(j, "written_ms");
			/* Every record takes a line: counts beyond the bytes are
			 * not allocated for. */
			ok = json_is_integer(w) && size_of(j, "lanes", &want_lanes) &&
			     size_of(j, "budgets", &want_budgets) &&
			     size_of(j, "scopes", &want_scopes) &&
			     want_lanes + want_scopes <= len - at &&
			     want_budgets <= RLH_N_BUDGETS * want_lanes &&
			     state_snapshot_reserve(s, want_lanes, want_scopes);
			if (ok)
				s->written_ms = (int64_t)json_integer_value(w);
			have_meta = true;
			bad = "the counts";
		} else if ((v = json_object_get(j, "lane")) != NULL) {
			ok = s->n_lanes < want_lanes && json_is_object(v) &&
			     lane_parse(v, &s->lanes[s->n_lanes], &s->budgets[s->n_budgets], &bad);
			if (ok)
				s->n_budgets += sched_saved_budgets(&s->lanes[s->n_lanes++]);
		} else if ((v = json_object_get(j, "scope")) != NULL) {
			bad = "scope";
			ok = s->n_scopes < want_scopes && json_is_object(v) &&
			     scope_parse(v, &s->scopes[s->n_scopes++]);
		} else {
			bad = "a record of no known kind";
			ok = false;
		}
		json_decref(j);
		if (!ok)
			return fail(s, STATE_FILE_E_CORRUPT, err, errlen, "line %zu: %s", line,
			            bad);
	}
	if (!have_meta || s->n_lanes != want_lanes || s->n_budgets != want_budgets ||
	    s->n_scopes != want_scopes)
		return fail(s, STATE_FILE_E_CORRUPT, err, errlen,
		            "%zu lanes, %zu budgets and %zu scopes where it says %zu, %zu and %zu",
		            s->n_lanes, s->n_budgets, s->n_scopes, want_lanes, want_budgets,
		            want_scopes);
	return STATE_FILE_OK;
}
