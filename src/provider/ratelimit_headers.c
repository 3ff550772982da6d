/* SPDX-License-Identifier: Apache-2.0 */
/* ratelimit_headers — see ratelimit_headers.h. */
#include "provider/ratelimit_headers.h"

#include "provider/error_body.h"

#include <curl/curl.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Delays are clamped here (about 142 years): far enough to mean "never" and
 * small enough that adding two of them never overflows int64_t. */
#define MAX_MS (INT64_C(1) << 52)

/* Priorities of the sources of one value: a provider's own header beats the
 * IETF draft-10/-07 field, which beats the older RateLimit-Limit family. */
enum { PRIO_IETF_OLD = 1, PRIO_IETF = 2, PRIO_DIALECT = 3 };

/* ---------- small text helpers (ASCII, locale-independent) ---------- */

static int lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static bool is_ows(int c)
{
	return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *len)
{
	while (*len > 0 && is_ows((unsigned char)**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && is_ows((unsigned char)(*s)[*len - 1]))
		(*len)--;
}

/* Whether s (len bytes) starts with the literal lit, ignoring case (the C
 * locale's: pacerd never calls setlocale). */
static bool ci_prefix(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len >= n && strncasecmp(s, lit, n) == 0;
}

static bool ci_equal(const char *s, size_t len, const char *lit)
{
	return len == strlen(lit) && ci_prefix(s, len, lit);
}

static int64_t clamp_ms(double ms)
{
	if (!(ms > 0))
		return 0;
	if (ms >= (double)MAX_MS)
		return MAX_MS;
	return (int64_t)ceil(ms);
}

/* ---------- numbers ---------- */

/* Longest prefix of s that is [+-] digits [. digits] (or [+-] . digits).
 * At most 18 integer digits so that the value stays exact enough. */
static size_t decimal_prefix(const char *s, size_t len, double *out)
{
	size_t i = 0, int_digits = 0, frac_digits = 0;
	double v = 0, scale = 1;
	bool neg = false;

	if (i < len && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	for (; i < len && is_digit((unsigned char)s[i]); i++, int_digits++) {
		if (int_digits == 18)
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	if (i < len && s[i] == '.' && i + 1 <= len) {
		size_t j = i + 1;
		for (; j < len && is_digit((unsigned char)s[j]); j++, frac_digits++) {
			if (frac_digits < 15) {
				scale /= 10;
				v += (s[j] - '0') * scale;
			}
		}
		/* "5." is a number when digits came before the dot, ".5" when after */
		if (int_digits > 0 || frac_digits > 0)
			i = j;
	}
	if (int_digits == 0 && frac_digits == 0)
		return 0;
	*out = neg ? -v : v;
	return i;
}

int rlh_parse_decimal(const char *s, size_t len, double *out)
{
	double v;
	trim(&s, &len);
	if (len == 0 || decimal_prefix(s, len, &v) != len)
		return -1;
	*out = v;
	return 0;
}

/* A non-negative count (limit, remaining): a decimal, floored. */
static int parse_count(const char *s, size_t len, int64_t *out)
{
	double v;
	if (rlh_parse_decimal(s, len, &v) == -1 || v < 0 || v >= (double)MAX_MS)
		return -1;
	*out = (int64_t)v;
	return 0;
}

/* ---------- Go durations ---------- */

struct go_unit {
	const char *text;
	uint64_t ns;
};

/* "ms" before "m", as PROVIDERS.md §1 asks. */
static const struct go_unit go_units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000}, /* U+00B5 MICRO SIGN */
    {"\xce\xbcs", 1000}, /* U+03BC GREEK SMALL LETTER MU */
    {"ms", 1000000},
    {"s", UINT64_C(1000000000)},
    {"m", UINT64_C(60000000000)},
    {"h", UINT64_C(3600000000000)},
};

static size_t go_unit_at(const char *s, size_t len, uint64_t *ns)
{
	for (size_t u = 0; u < sizeof go_units / sizeof go_units[0]; u++) {
		size_t n = strlen(go_units[u].text);
		if (len >= n && memcmp(s, go_units[u].text, n) == 0) {
			*ns = go_units[u].ns;
			return n;
		}
	}
	return 0;
}

/* One "number unit" segment; returns bytes consumed (0: none) and adds its
 * value to *total. Fractions follow Go: digits beyond precision are dropped. */
static size_t go_segment(const char *s, size_t len, uint64_t *total)
{
	size_t i = 0;
	uint64_t v = 0, frac = 0, unit;
	double scale = 1;
	bool digits = false, frac_overflow = false;

	for (; i < len && is_digit((unsigned char)s[i]); i++) {
		if (v > (UINT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (uint64_t)(s[i] - '0');
		digits = true;
	}
	if (i < len && s[i] == '.') {
		i++;
		for (; i < len && is_digit((unsigned char)s[i]); i++) {
			digits = true;
			if (frac_overflow || frac > (UINT64_MAX - 9) / 10) {
				frac_overflow = true;
				continue;
			}
			frac = frac * 10 + (uint64_t)(s[i] - '0');
			scale *= 10;
		}
	}
	if (!digits)
		return 0;
	size_t un = go_unit_at(s + i, len - i, &unit);
	if (un == 0)
		return 0;
	if (v > (uint64_t)INT64_MAX / unit)
		return 0;
	v *= unit;
	if (frac > 0)
		v += (uint64_t)((double)frac * ((double)unit / scale));
	if (v > (uint64_t)INT64_MAX - *total)
		return 0;
	*total += v;
	return i + un;
}

size_t rlh_go_duration_prefix(const char *s, size_t len, int64_t *ns)
{
	size_t i = 0, n;
	uint64_t total = 0;
	bool neg = false;

	if (len > 0 && (s[0] == '+' || s[0] == '-')) {
		neg = s[0] == '-';
		i = 1;
	}
	size_t start = i;
	while (i < len && (n = go_segment(s + i, len - i, &total)) > 0)
		i += n;
	if (i == start)
		return 0;
	*ns = neg ? -(int64_t)total : (int64_t)total;
	return i;
}

int rlh_parse_go_duration(const char *s, size_t len, int64_t *ns)
{
	trim(&s, &len);
	size_t body = (len > 0 && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
	if (len == body + 1 && s[body] == '0') { /* Go's special case: no unit */
		*ns = 0;
		return 0;
	}
	int64_t v;
	if (len == 0 || rlh_go_duration_prefix(s, len, &v) != len)
		return -1;
	*ns = v;
	return 0;
}

/* ---------- calendar ---------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's formula). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
	static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return m == 2 && leap ? 29 : dm[m - 1];
}

/* n digits at s as a number, or -1. */
static int digits_at(const char *s, size_t n)
{
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return (int)v;
}

struct civil {
	int y, mo, d, h, mi, s, ms;
};

static int civil_to_ms(const struct civil *c, int64_t *epoch_ms)
{
	if (c->y < 1 || c->mo < 1 || c->mo > 12 || c->d < 1 || c->d > days_in_month(c->y, c->mo) ||
	    c->h > 23 || c->mi > 59 || c->s > 60)
		return -1;
	int64_t days = days_from_civil(c->y, c->mo, c->d);
	*epoch_ms = ((days * 24 + c->h) * 60 + c->mi) * 60000 + (int64_t)c->s * 1000 + c->ms;
	return 0;
}

/* "hh:mm:ss" at s (8 bytes). */
static int parse_hms(const char *s, struct civil *c)
{
	if (s[2] != ':' || s[5] != ':')
		return -1;
	c->h = digits_at(s, 2);
	c->mi = digits_at(s + 3, 2);
	c->s = digits_at(s + 6, 2);
	return (c->h < 0 || c->mi < 0 || c->s < 0) ? -1 : 0;
}

int rlh_parse_rfc3339(const char *s, size_t len, int64_t *epoch_ms)
{
	struct civil c = {0};
	trim(&s, &len);
	if (len < 20 || s[4] != '-' || s[7] != '-')
		return -1;
	if (s[10] != 'T' && s[10] != 't' && s[10] != ' ')
		return -1;
	c.y = digits_at(s, 4);
	c.mo = digits_at(s + 5, 2);
	c.d = digits_at(s + 8, 2);
	if (c.y < 0 || c.mo < 0 || c.d < 0 || parse_hms(s + 11, &c) == -1)
		return -1;
	size_t i = 19;
	if (i < len && s[i] == '.') {
		size_t nd = 0;
		for (i++; i < len && is_digit((unsigned char)s[i]); i++, nd++)
			if (nd < 3)
				c.ms = c.ms * 10 + (s[i] - '0');
		if (nd == 0)
			return -1;
		for (; nd < 3; nd++)
			c.ms *= 10;
	}
	int64_t off_min = 0;
	if (len - i == 1 && (s[i] == 'Z' || s[i] == 'z')) {
		off_min = 0;
	} else if (len - i == 6 && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
		int oh = digits_at(s + i + 1, 2), om = digits_at(s + i + 4, 2);
		if (oh < 0 || om < 0 || oh > 23 || om > 59)
			return -1;
		off_min = (s[i] == '-' ? -1 : 1) * (oh * 60 + om);
	} else {
		return -1;
	}
	int64_t ms;
	if (civil_to_ms(&c, &ms) == -1)
		return -1;
	*epoch_ms = ms - off_min * 60000;
	return 0;
}

/* libcurl's parser, which takes the three forms (and the looser ones of
 * old servers); it wants a NUL-terminated string. */
int rlh_parse_http_date(const char *s, size_t len, int64_t *epoch_ms)
{
	char buf[64];
	trim(&s, &len);
	if (len == 0 || len >= sizeof(buf) || memchr(s, '\0', len) != NULL)
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	time_t t = curl_getdate(buf, NULL);
	if (t == -1)
		return -1;
	*epoch_ms = (int64_t)t * 1000;
	return 0;
}

/* ---------- reset and retry values ---------- */

int rlh_guess_number_ms(double v, int64_t now_ms, int64_t *rel_ms)
{
	if (!(v >= 0))
		return -1;
	if (v < 1e9)
		*rel_ms = clamp_ms(v * 1000);
	else if (v < 1e10)
		*rel_ms = clamp_ms(v * 1000 - (double)now_ms);
	else
		*rel_ms = clamp_ms(v - (double)now_ms);
	return 0;
}

static int64_t until(int64_t epoch_ms, int64_t now_ms)
{
	return epoch_ms > now_ms ? epoch_ms - now_ms : 0;
}

int rlh_parse_reset(const char *s, size_t len, int64_t now_ms, int64_t *rel_ms)
{
	int64_t ns, at;
	double v;

	trim(&s, &len);
	if (rlh_parse_decimal(s, len, &v) == 0)
		return rlh_guess_number_ms(v, now_ms, rel_ms);
	if (rlh_parse_go_duration(s, len, &ns) == 0) {
		*rel_ms = clamp_ms((double)ns / 1e6);
		return 0;
	}
	if (rlh_parse_rfc3339(s, len, &at) == 0 || rlh_parse_http_date(s, len, &at) == 0) {
		*rel_ms = until(at, now_ms);
		return 0;
	}
	return -1;
}

int rlh_parse_retry_after(const char *s, size_t len, int64_t now_ms, int64_t *rel_ms)
{
	double v;
	int64_t at;

	if (rlh_parse_decimal(s, len, &v) == 0) {
		if (v < 0)
			return -1;
		*rel_ms = clamp_ms(v * 1000);
		return 0;
	}
	if (rlh_parse_http_date(s, len, &at) == 0) {
		*rel_ms = until(at, now_ms);
		return 0;
	}
	return -1;
}

/* retry-after-ms and x-ms-retry-after-ms: decimal milliseconds, >= 0. */
static int parse_ms(const char *s, size_t len, int64_t *ms)
{
	double v;
	if (rlh_parse_decimal(s, len, &v) == -1 || v < 0)
		return -1;
	*ms = clamp_ms(v);
	return 0;
}

/* ---------- IETF structured fields ---------- */

struct cursor {
	const char *s;
	size_t len, i;
};

static void skip_ows(struct cursor *c)
{
	while (c->i < c->len && is_ows((unsigned char)c->s[c->i]))
		c->i++;
}

static bool at(struct cursor *c, char ch)
{
	return c->i < c->len && c->s[c->i] == ch;
}

/* An sf-key: lcalpha / "*" then lcalpha / DIGIT / "_" / "-" / "." / "*". */
static size_t sf_key(struct cursor *c, char *out, size_t outlen)
{
	size_t start = c->i, n = 0;
	while (c->i < c->len) {
		char ch = c->s[c->i];
		bool ok = (ch >= 'a' && ch <= 'z') || ch == '*' ||
		          (c->i > start &&
		           (is_digit((unsigned char)ch) || ch == '_' || ch == '-' || ch == '.'));
		if (!ok)
			break;
		if (n + 1 < outlen)
			out[n++] = ch;
		c->i++;
	}
	out[n] = '\0';
	return c->i - start;
}

/* An sf-string "..." with \" and \\ escapes, copied (truncated) into out. */
static int sf_string(struct cursor *c, char *out, size_t outlen)
{
	size_t n = 0;
	c->i++; /* opening quote */
	while (c->i < c->len && c->s[c->i] != '"') {
		if (c->s[c->i] == '\\') {
			if (++c->i >= c->len)
				return -1;
		}
		if (n + 1 < outlen)
			out[n++] = c->s[c->i];
		c->i++;
	}
	out[n] = '\0';
	if (!at(c, '"'))
		return -1;
	c->i++;
	return 0;
}

/* A bare item as value of a parameter: integer/decimal, string or token.
 * Numbers land in *num (has_num set); strings/tokens are copied to str. */
static int sf_value(struct cursor *c, double *num, bool *has_num, char *str, size_t strlen_)
{
	*has_num = false;
	str[0] = '\0';
	if (at(c, '"'))
		return sf_string(c, str, strlen_);
	size_t n = decimal_prefix(c->s + c->i, c->len - c->i, num);
	if (n > 0) {
		c->i += n;
		*has_num = true;
		return 0;
	}
	size_t k = 0; /* sf-token, also "?1" booleans */
	while (c->i < c->len && c->s[c->i] != ';' && c->s[c->i] != ',' &&
	       !is_ows((unsigned char)c->s[c->i])) {
		if (k + 1 < strlen_)
			str[k++] = c->s[c->i];
		c->i++;
	}
	str[k] = '\0';
	return k > 0 ? 0 : -1;
}

static int ietf_set_param(struct rlh_ietf_item *it, const char *key, double num, bool has_num,
                          const char *str)
{
	if (strcmp(key, "qu") == 0) {
		it->unit = strcmp(str, "requests") == 0 ? RLH_UNIT_REQUESTS
		           : strcmp(str, "tokens") == 0 ? RLH_UNIT_TOKENS
		                                        : RLH_UNIT_OTHER;
		return 0;
	}
	struct {
		const char *k;
		bool *has;
		int64_t *v;
	} map[] = {
	    {"q", &it->has_q, &it->q},     {"w", &it->has_w, &it->w},
	    {"r", &it->has_r, &it->r},     {"t", &it->has_t, &it->t},
	    {"limit", &it->has_q, &it->q}, {"remaining", &it->has_r, &it->r},
	    {"reset", &it->has_t, &it->t},
	};
	for (size_t m = 0; m < sizeof map / sizeof map[0]; m++) {
		if (strcmp(key, map[m].k) != 0)
			continue;
		if (!has_num || num < 0 || num >= (double)MAX_MS)
			return -1;
		*map[m].has = true;
		*map[m].v = (int64_t)num;
		return 0;
	}
	return 0; /* unknown parameters (pk, ...) are ignored */
}

/* ;key=value parameters after a list member, into it. */
static int ietf_params(struct cursor *c, struct rlh_ietf_item *it)
{
	char key[16], str[32];
	double num = 0;
	bool has_num;

	for (;;) {
		skip_ows(c);
		if (!at(c, ';'))
			return 0;
		c->i++;
		skip_ows(c);
		if (sf_key(c, key, sizeof key) == 0)
			return -1;
		if (!at(c, '=')) /* a bare key is boolean true: nothing we use */
			continue;
		c->i++;
		if (sf_value(c, &num, &has_num, str, sizeof str) == -1 ||
		    ietf_set_param(it, key, num, has_num, str) == -1)
			return -1;
	}
}

/* One member: "name";params (draft-10) or key=value (draft-07 dictionary, whose
 * members all land in the same unnamed item). */
static int ietf_member(struct cursor *c, struct rlh_ietf_item *it, bool *dict)
{
	if (at(c, '"')) {
		*dict = false;
		if (sf_string(c, it->name, sizeof it->name) == -1)
			return -1;
		return ietf_params(c, it);
	}
	char key[16], str[32];
	double num = 0;
	bool has_num;
	if (sf_key(c, key, sizeof key) == 0)
		return -1;
	*dict = true;
	if (!at(c, '='))
		return ietf_params(c, it);
	c->i++;
	if (sf_value(c, &num, &has_num, str, sizeof str) == -1 ||
	    ietf_set_param(it, key, num, has_num, str) == -1)
		return -1;
	return ietf_params(c, it);
}

size_t rlh_parse_ietf(const char *s, size_t len, struct rlh_ietf_item *items, size_t max)
{
	struct cursor c = {s, len, 0};
	struct rlh_ietf_item dict_item = {0};
	size_t n = 0;
	bool saw_dict = false;

	while (n < max) {
		struct rlh_ietf_item it = {0};
		bool dict = false;
		skip_ows(&c);
		if (c.i >= c.len)
			break;
		if (ietf_member(&c, saw_dict ? &dict_item : &it, &dict) == -1)
			break;
		if (saw_dict && !dict) /* the two forms mixed: malformed */
			break;
		if (dict && !saw_dict) {
			/* the first dictionary member parsed into `it`: keep going in it */
			dict_item = it;
			saw_dict = true;
		} else if (!dict) {
			items[n++] = it;
		}
		skip_ows(&c);
		if (!at(&c, ','))
			break;
		c.i++;
	}
	if (saw_dict && n < max && (dict_item.has_q || dict_item.has_r || dict_item.has_t))
		items[n++] = dict_item;
	return n;
}

/* ---------- header table ---------- */

enum field { F_LIMIT, F_REMAINING, F_RESET };

#define D_OAI (1u << DIALECT_OPENAI)
#define D_AZ (1u << DIALECT_AZURE)
#define D_AN (1u << DIALECT_ANTHROPIC)

struct name_map {
	const char *name; /* lower case */
	size_t len;
	unsigned dialects;
	enum rlh_budget_kind budget;
	enum field field;
	int64_t window_ms; /* the window the name states, 0: none */
};

#define N(lit) lit, sizeof(lit) - 1
#define MINUTE INT64_C(60000)
#define DAY INT64_C(86400000)

static const struct name_map names[] = {
    /* Azure: a deployment's quota is per minute (its RPM and TPM), whatever
     * shorter window enforces it (PROVIDERS.md §4, §10) */
    {N("x-ratelimit-limit-requests"), D_AZ, RLH_REQUESTS, F_LIMIT, MINUTE},
    {N("x-ratelimit-limit-tokens"), D_AZ, RLH_TOKENS, F_LIMIT, MINUTE},
    /* OpenAI, Azure, Groq (OpenAI's and Groq's windows are not in the name:
     * Groq's requests are per day) */
    {N("x-ratelimit-limit-requests"), D_OAI, RLH_REQUESTS, F_LIMIT, 0},
    {N("x-ratelimit-remaining-requests"), D_OAI | D_AZ, RLH_REQUESTS, F_REMAINING, 0},
    {N("x-ratelimit-reset-requests"), D_OAI | D_AZ, RLH_REQUESTS, F_RESET, 0},
    {N("x-ratelimit-limit-tokens"), D_OAI, RLH_TOKENS, F_LIMIT, 0},
    {N("x-ratelimit-remaining-tokens"), D_OAI | D_AZ, RLH_TOKENS, F_REMAINING, 0},
    {N("x-ratelimit-reset-tokens"), D_OAI | D_AZ, RLH_TOKENS, F_RESET, 0},
    /* Azure on 429 */
    {N("x-rate-limit-reset-tokens"), D_OAI | D_AZ, RLH_TOKENS, F_RESET, 0},
    /* OpenAI, when a project-level token limit applies */
    {N("x-ratelimit-limit-project-tokens"), D_OAI, RLH_PROJECT_TOKENS, F_LIMIT, 0},
    {N("x-ratelimit-remaining-project-tokens"), D_OAI, RLH_PROJECT_TOKENS, F_REMAINING, 0},
    {N("x-ratelimit-reset-project-tokens"), D_OAI, RLH_PROJECT_TOKENS, F_RESET, 0},
    /* Mistral (no reset) */
    {N("x-ratelimit-limit-req-minute"), D_OAI, RLH_REQUESTS, F_LIMIT, MINUTE},
    {N("x-ratelimit-remaining-req-minute"), D_OAI, RLH_REQUESTS, F_REMAINING, MINUTE},
    /* Mistral, and Cerebras (with a reset in float seconds) */
    {N("x-ratelimit-limit-tokens-minute"), D_OAI, RLH_TOKENS, F_LIMIT, MINUTE},
    {N("x-ratelimit-remaining-tokens-minute"), D_OAI, RLH_TOKENS, F_REMAINING, MINUTE},
    {N("x-ratelimit-reset-tokens-minute"), D_OAI, RLH_TOKENS, F_RESET, MINUTE},
    /* Cerebras: its only request budget is per day */
    {N("x-ratelimit-limit-requests-day"), D_OAI, RLH_REQUESTS, F_LIMIT, DAY},
    {N("x-ratelimit-remaining-requests-day"), D_OAI, RLH_REQUESTS, F_REMAINING, DAY},
    {N("x-ratelimit-reset-requests-day"), D_OAI, RLH_REQUESTS, F_RESET, DAY},
    /* Together and OpenRouter (reset: seconds vs epoch ms, told apart by size) */
    {N("x-ratelimit-limit"), D_OAI, RLH_REQUESTS, F_LIMIT, 0},
    {N("x-ratelimit-remaining"), D_OAI, RLH_REQUESTS, F_REMAINING, 0},
    {N("x-ratelimit-reset"), D_OAI, RLH_REQUESTS, F_RESET, 0},
    {N("x-tokenlimit-limit"), D_OAI, RLH_TOKENS, F_LIMIT, 0},
    {N("x-tokenlimit-remaining"), D_OAI, RLH_TOKENS, F_REMAINING, 0},
    /* Fireworks */
    {N("x-ratelimit-limit-tokens-prompt"), D_OAI, RLH_INPUT_TOKENS, F_LIMIT, 0},
    {N("x-ratelimit-remaining-tokens-prompt"), D_OAI, RLH_INPUT_TOKENS, F_REMAINING, 0},
    {N("x-ratelimit-limit-tokens-generated"), D_OAI, RLH_OUTPUT_TOKENS, F_LIMIT, 0},
    {N("x-ratelimit-remaining-tokens-generated"), D_OAI, RLH_OUTPUT_TOKENS, F_REMAINING, 0},
    /* Anthropic */
    {N("anthropic-ratelimit-requests-limit"), D_AN, RLH_REQUESTS, F_LIMIT, 0},
    {N("anthropic-ratelimit-requests-remaining"), D_AN, RLH_REQUESTS, F_REMAINING, 0},
    {N("anthropic-ratelimit-requests-reset"), D_AN, RLH_REQUESTS, F_RESET, 0},
    {N("anthropic-ratelimit-tokens-limit"), D_AN, RLH_TOKENS, F_LIMIT, 0},
    {N("anthropic-ratelimit-tokens-remaining"), D_AN, RLH_TOKENS, F_REMAINING, 0},
    {N("anthropic-ratelimit-tokens-reset"), D_AN, RLH_TOKENS, F_RESET, 0},
    {N("anthropic-ratelimit-input-tokens-limit"), D_AN, RLH_INPUT_TOKENS, F_LIMIT, 0},
    {N("anthropic-ratelimit-input-tokens-remaining"), D_AN, RLH_INPUT_TOKENS, F_REMAINING, 0},
    {N("anthropic-ratelimit-input-tokens-reset"), D_AN, RLH_INPUT_TOKENS, F_RESET, 0},
    {N("anthropic-ratelimit-output-tokens-limit"), D_AN, RLH_OUTPUT_TOKENS, F_LIMIT, 0},
    {N("anthropic-ratelimit-output-tokens-remaining"), D_AN, RLH_OUTPUT_TOKENS, F_REMAINING, 0},
    {N("anthropic-ratelimit-output-tokens-reset"), D_AN, RLH_OUTPUT_TOKENS, F_RESET, 0},
};

/* Whether a reset value is a whole number of seconds to wait (Azure's "55",
 * Together's, IETF delta-seconds): digits only, under 1e9 (a larger number
 * is an instant). Such a reset is rounded, a bound and not an instant. */
static bool whole_seconds(const char *s, size_t len)
{
	trim(&s, &len);
	if (len == 0 || len > 9)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_digit((unsigned char)s[i]))
			return false;
	return true;
}

static void set_field(struct rlh_budget *b, enum field f, int64_t v, uint8_t prio)
{
	switch (f) {
	case F_LIMIT:
		if (prio >= b->prio_limit) {
			b->has_limit = true;
			b->limit = v;
			b->prio_limit = prio;
		}
		break;
	case F_REMAINING:
		if (prio >= b->prio_remaining) {
			b->has_remaining = true;
			b->remaining = v;
			b->prio_remaining = prio;
		}
		break;
	case F_RESET:
		if (prio >= b->prio_reset) {
			b->has_reset = true;
			b->reset_ms = v;
			b->reset_coarse = false;
			b->prio_reset = prio;
		}
		break;
	}
}

/* A reset in whole seconds: set_field's, and marked coarse when it won. */
static void set_reset(struct rlh_budget *b, int64_t ms, bool coarse, uint8_t prio)
{
	if (prio < b->prio_reset)
		return;
	set_field(b, F_RESET, ms, prio);
	b->reset_coarse = coarse;
}

/* A value of a mapped header; reset values are any reset form. */
static void apply_mapped(struct rlh_result *out, const struct name_map *m, const char *v,
                         size_t vlen, int64_t now_ms, uint8_t prio)
{
	int64_t x;
	struct rlh_budget *b = &out->budget[m->budget];
	if (m->window_ms > 0)
		b->window_ms = m->window_ms;
	if (m->field == F_RESET) {
		if (rlh_parse_reset(v, vlen, now_ms, &x) == 0)
			set_reset(b, x, whole_seconds(v, vlen), prio);
	} else if (parse_count(v, vlen, &x) == 0) {
		set_field(b, m->field, x, prio);
	}
}

/* The older RateLimit-Limit/-Remaining/-Reset: the leading number only
 * (draft-03 appended policies: "100, 100;w=60"). */
static void apply_ietf_old(struct rlh_result *out, enum field f, const char *v, size_t vlen,
                           int64_t now_ms)
{
	size_t n = 0;
	while (n < vlen && v[n] != ',' && v[n] != ';')
		n++;
	int64_t x;
	double d;
	if (rlh_parse_decimal(v, n, &d) == -1)
		return;
	if (f == F_RESET) {
		if (rlh_guess_number_ms(d, now_ms, &x) == -1)
			return;
		set_reset(&out->budget[RLH_REQUESTS], x, whole_seconds(v, n), PRIO_IETF_OLD);
		return;
	} else if (d < 0 || d >= (double)MAX_MS) {
		return;
	} else {
		x = (int64_t)d;
	}
	set_field(&out->budget[RLH_REQUESTS], f, x, PRIO_IETF_OLD);
}

static const struct rlh_ietf_item *find_policy(const struct rlh_ietf_item *pol, size_t npol,
                                               const char *name)
{
	for (size_t i = 0; i < npol; i++)
		if (strcmp(pol[i].name, name) == 0)
			return &pol[i];
	return npol == 1 && name[0] == '\0' ? &pol[0] : NULL;
}

struct ietf_fields {
	const char *rl, *pol;
	size_t rl_len, pol_len;
};

/* Of the RateLimit items of one unit, the binding one is the one with the
 * fewest remaining (ties: the later reset): that is what pacing must respect.
 * Its limit is its own q (draft-07) or the q of the policy of the same name. */
static void apply_ietf_fields(struct rlh_result *out, const struct ietf_fields *f)
{
	struct rlh_ietf_item rl[RLH_IETF_MAX_ITEMS], pol[RLH_IETF_MAX_ITEMS];
	size_t nrl = f->rl ? rlh_parse_ietf(f->rl, f->rl_len, rl, RLH_IETF_MAX_ITEMS) : 0;
	size_t npol = f->pol ? rlh_parse_ietf(f->pol, f->pol_len, pol, RLH_IETF_MAX_ITEMS) : 0;
	const struct rlh_ietf_item *best[2] = {NULL, NULL};
	const struct rlh_ietf_item *best_pol[2] = {NULL, NULL};

	for (size_t i = 0; i < nrl; i++) {
		if (!rl[i].has_r)
			continue;
		const struct rlh_ietf_item *p = find_policy(pol, npol, rl[i].name);
		enum rlh_ietf_unit u = p ? p->unit : rl[i].unit;
		if (u == RLH_UNIT_OTHER)
			continue;
		const struct rlh_ietf_item *b = best[u];
		if (b == NULL || rl[i].r < b->r ||
		    (rl[i].r == b->r && rl[i].has_t && (!b->has_t || rl[i].t > b->t))) {
			best[u] = &rl[i];
			best_pol[u] = p;
		}
	}
	for (int u = 0; u < 2; u++) {
		const struct rlh_ietf_item *b = best[u];
		if (b == NULL)
			continue;
		struct rlh_budget *bud =
		    &out->budget[u == RLH_UNIT_REQUESTS ? RLH_REQUESTS : RLH_TOKENS];
		set_field(bud, F_REMAINING, b->r, PRIO_IETF);
		if (b->has_t) /* delta-seconds: whole by the grammar */
			set_reset(bud, clamp_ms((double)b->t * 1000), true, PRIO_IETF);
		if (b->has_q)
			set_field(bud, F_LIMIT, b->q, PRIO_IETF);
		else if (best_pol[u] && best_pol[u]->has_q)
			set_field(bud, F_LIMIT, best_pol[u]->q, PRIO_IETF);
		/* w: the policy's window in seconds; a provider's name that
		 * states one (-minute) says the same of its own headers */
		const struct rlh_ietf_item *w = b->has_w ? b : best_pol[u];
		if (bud->window_ms == 0 && w != NULL && w->has_w && w->w > 0 && w->w < 1000000000)
			bud->window_ms = w->w * 1000;
	}
}

/* ---------- rlh_parse ---------- */

static void hint_candidate(struct rlh_result *out, int64_t ms, int prio, int *best)
{
	if (prio > *best) {
		*best = prio;
		out->has_hint = true;
		out->hint_ms = ms;
	}
}

/* Retry hints and x-should-retry, read in every dialect. Returns whether the
 * header was one of them. */
static bool apply_retry_header(struct rlh_result *out, const struct rlh_header *h, size_t nlen,
                               int64_t now_ms, int *best)
{
	int64_t ms;
	if (ci_equal(h->name, nlen, "retry-after-ms")) {
		if (parse_ms(h->value, h->value_len, &ms) == 0)
			hint_candidate(out, ms, 3, best);
	} else if (ci_equal(h->name, nlen, "x-ms-retry-after-ms")) {
		if (parse_ms(h->value, h->value_len, &ms) == 0)
			hint_candidate(out, ms, 2, best);
	} else if (ci_equal(h->name, nlen, "retry-after")) {
		if (rlh_parse_retry_after(h->value, h->value_len, now_ms, &ms) == 0)
			hint_candidate(out, ms, 1, best);
	} else if (ci_equal(h->name, nlen, "x-should-retry")) {
		const char *v = h->value;
		size_t vl = h->value_len;
		trim(&v, &vl);
		if (ci_equal(v, vl, "true") || ci_equal(v, vl, "false")) {
			out->has_should_retry = true;
			out->should_retry = ci_equal(v, vl, "true");
		}
	} else {
		return false;
	}
	return true;
}

/* IETF fields: the structured ones are kept for after the loop (RateLimit
 * needs RateLimit-Policy, which may come later); the old ones apply now. */
static bool apply_ietf_header(struct rlh_result *out, const struct rlh_header *h, size_t nlen,
                              int64_t now_ms, struct ietf_fields *f)
{
	if (ci_equal(h->name, nlen, "ratelimit")) {
		if (f->rl == NULL) {
			f->rl = h->value;
			f->rl_len = h->value_len;
		}
	} else if (ci_equal(h->name, nlen, "ratelimit-policy")) {
		if (f->pol == NULL) {
			f->pol = h->value;
			f->pol_len = h->value_len;
		}
	} else if (ci_equal(h->name, nlen, "ratelimit-limit")) {
		apply_ietf_old(out, F_LIMIT, h->value, h->value_len, now_ms);
	} else if (ci_equal(h->name, nlen, "ratelimit-remaining")) {
		apply_ietf_old(out, F_REMAINING, h->value, h->value_len, now_ms);
	} else if (ci_equal(h->name, nlen, "ratelimit-reset")) {
		apply_ietf_old(out, F_RESET, h->value, h->value_len, now_ms);
	} else {
		return false;
	}
	return true;
}

static void apply_dialect_header(struct rlh_result *out, enum dialect d, const struct rlh_header *h,
                                 size_t nlen, int64_t now_ms)
{
	unsigned mask = 1u << d;
	for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
		if (names[m].len == nlen && (names[m].dialects & mask) &&
		    ci_prefix(h->name, nlen, names[m].name)) {
			apply_mapped(out, &names[m], h->value, h->value_len, now_ms, PRIO_DIALECT);
			return;
		}
	}
	if ((mask & D_OAI) && ci_equal(h->name, nlen, "x-ratelimit-over-limit")) {
		const char *v = h->value;
		size_t vl = h->value_len;
		trim(&v, &vl);
		out->over_limit = ci_equal(v, vl, "yes");
	}
}

/* Every name this module knows starts with x-, anthropic-, ratelimit or
 * retry-after: most headers of a response (content-type, date, server, ...)
 * are dismissed by their first byte, since this runs on every response. */
static bool maybe_interesting(const char *name, size_t nlen)
{
	if (nlen < 9)
		return false;
	switch (lower((unsigned char)name[0])) {
	case 'x':
		return name[1] == '-';
	case 'a':
		return ci_prefix(name, nlen, "anthropic-ratelimit-");
	case 'r':
		return ci_prefix(name, nlen, "ratelimit") || ci_prefix(name, nlen, "retry-after");
	default:
		return false;
	}
}

void rlh_parse(enum dialect dialect, const struct rlh_header *h, size_t n, int64_t now_ms,
               struct rlh_result *out)
{
	struct ietf_fields ietf = {0};
	int best_hint = 0;

	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < n; i++) {
		if (h[i].name == NULL || h[i].value == NULL)
			continue;
		size_t nlen = strlen(h[i].name);
		if (!maybe_interesting(h[i].name, nlen))
			continue;
		if (apply_retry_header(out, &h[i], nlen, now_ms, &best_hint) ||
		    dialect == DIALECT_NONE)
			continue;
		if (apply_ietf_header(out, &h[i], nlen, now_ms, &ietf) || dialect == DIALECT_IETF)
			continue;
		apply_dialect_header(out, dialect, &h[i], nlen, now_ms);
	}
	if (ietf.rl != NULL)
		apply_ietf_fields(out, &ietf);
}

bool rlh_exhausted_reset(const struct rlh_result *r, int64_t *ms)
{
	bool found = false;
	for (int b = 0; b < RLH_N_BUDGETS; b++) {
		const struct rlh_budget *bud = &r->budget[b];
		if (bud->has_remaining && bud->remaining == 0 && bud->has_reset &&
		    (!found || bud->reset_ms > *ms)) {
			*ms = bud->reset_ms;
			found = true;
		}
	}
	return found;
}

bool rlh_server_hint(const struct rlh_result *r, const struct error_hints *b, int64_t *ms)
{
	if (r != NULL && r->has_hint) {
		*ms = r->hint_ms;
		return true;
	}
	int64_t reset = 0;
	bool has_reset = r != NULL && rlh_exhausted_reset(r, &reset);
	bool has_body = b != NULL && b->has_delay;
	/* A reset is the time until the budget is full again: an upper bound. The
	 * body's "try again in 644ms" is when this request fits: sooner and exact.
	 * Taking the reset alone would turn a 429 on a continuously refilled budget
	 * into a multi-minute wait, or a give-up past the deadline. */
	if (has_reset && has_body)
		*ms = reset < b->delay_ms ? reset : b->delay_ms;
	else if (has_reset)
		*ms = reset;
	else if (has_body)
		*ms = b->delay_ms;
	return has_reset || has_body;
}

/* ---------- delays in prose ---------- */

/* "N <unit word>" after a phrase: seconds, minutes, hours, milliseconds. */
static int number_with_word(const char *s, size_t len, int64_t *ms)
{
	double v;
	size_t i = decimal_prefix(s, len, &v);
	if (i == 0 || v < 0)
		return -1;
	while (i < len && is_ows((unsigned char)s[i]))
		i++;
	const char *w = s + i;
	size_t wl = len - i;
	double scale;
	if (ci_prefix(w, wl, "ms") || ci_prefix(w, wl, "millisecond"))
		scale = 1;
	else if (ci_prefix(w, wl, "s")) /* s, sec, secs, second(s) */
		scale = 1000;
	else if (ci_prefix(w, wl, "min"))
		scale = 60000;
	else if (ci_prefix(w, wl, "h"))
		scale = 3600000;
	else
		return -1;
	*ms = clamp_ms(v * scale);
	return 0;
}

static int delay_after_phrase(const char *s, size_t len, int64_t *ms)
{
	int64_t ns;
	while (len > 0 && is_ows((unsigned char)*s)) {
		s++;
		len--;
	}
	if (rlh_go_duration_prefix(s, len, &ns) > 0 && ns >= 0) {
		*ms = clamp_ms((double)ns / 1e6);
		return 0;
	}
	return number_with_word(s, len, ms);
}

int rlh_text_hint(const char *s, size_t len, int64_t *ms)
{
	static const char *const phrases[] = {"try again in", "retry in", "retry after"};
	for (size_t i = 0; i < len; i++) {
		int c = lower((unsigned char)s[i]);
		if (c != 't' && c != 'r') /* most bytes: no phrase starts here */
			continue;
		for (size_t p = 0; p < sizeof phrases / sizeof phrases[0]; p++) {
			size_t pl = strlen(phrases[p]);
			if (ci_prefix(s + i, len - i, phrases[p]) &&
			    delay_after_phrase(s + i + pl, len - i - pl, ms) == 0)
				return 0;
		}
	}
	return -1;
}
