/* SPDX-License-Identifier: Apache-2.0 */
/* state_file: the lanes' state file round trips every field (budgets learned
 * from real answers, numbers that are not finite, every budget mask), the
 * records' digest ignores when it was written and follows what it holds, and
 * no damage gets through: cut at every byte, every byte changed, another
 * version, a file that is not pacerd's, a record malformed under a checksum
 * that holds. */
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/state_file.h"
#include "unit.h"

/* A budget as answers leave it: a continuous one learned from (remaining,
 * reset) pairs with a limit, or a counted one from remaining counts alone. */
static void learned_from_answers(struct learned *l, bool counted, double seed)
{
	learned_init(l, NULL);
	for (int i = 0; i < 12; i++) {
		double mark = learned_charge(l, 1000 + i * 100, 1);
		struct learned_obs o = {
		    .mark = mark,
		    .remaining = 40 - i + seed,
		    .reset_ms = counted ? 0 : 1500 + 37 * i,
		    .limit = counted ? 0 : 60,
		    .no_reset = counted,
		    .sent_ms = 1000 + i * 100,
		    .cost = 1,
		    .alone_ms = 100,
		};
		learned_observe(l, 1050 + i * 100, &o);
	}
	learned_on_capacity_signal(l, 2500, LEARNED_PENALTY);
	learned_charge(l, 2600, 1); /* one more sent since the last answer */
}

static void lane_saved(struct sched_lane_saved *s, int i, uint8_t budgets)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->provider, sizeof(s->provider), "%s", i == 0 ? "openai" : "anthropic");
	s->scope = UINT64_C(0xfedcba9876543210) + (uint64_t)i;
	snprintf(s->scope_name, sizeof(s->scope_name), "%012x", 0xabc + i);
	if (i != 1)
		snprintf(s->model, sizeof(s->model), "gpt-4o-mini-%d", i);
	s->last_active_ms = INT64_C(1795913983446) + i;
	s->answered = true;
	s->probing = i == 2;
	s->hold_until_ms = i == 2 ? INT64_C(1795913993446) : 0;
	s->aimd = (struct aimd_saved){.open = i == 1,
	                              .limit = 6.75,
	                              .rtt_ms = 183.5,
	                              .delay_ms = i == 0 ? 0 : 41.66666666666666};
	s->strict_margin = i == 1 ? 0.025 : 0;
	s->quota_out = i == 2;
	s->quota_probe_at_ms = s->quota_out ? INT64_C(1795913999999) : 0;
	s->day_requests = 17;
	s->day_tokens = 1234.5;
	s->day_resets_at_ms = INT64_C(1795950000000);
	s->budgets = budgets;
	s->output_rule = (uint8_t)(i % 3);
	s->n_outputs = (uint8_t)(i == 0 ? 0 : COST_OUTPUTS - i);
	for (unsigned k = 0; k < s->n_outputs; k++)
		s->outputs[k] = 100 * k + (unsigned)i;
}

static struct state_snapshot sample;

static void build_sample(void)
{
	memset(&sample, 0, sizeof(sample));
	ck_assert(state_snapshot_reserve(&sample, 3, 4));
	sample.written_ms = INT64_C(1795913990000);
	const uint8_t masks[3] = {0, 0x13, 0x1f};
	for (int i = 0; i < 3; i++) {
		lane_saved(&sample.lanes[sample.n_lanes++], i, masks[i]);
		for (int b = 0; b < RLH_N_BUDGETS; b++) {
			if (!(masks[i] & (1u << b)))
				continue;
			struct learned *l = &sample.budgets[sample.n_budgets++];
			learned_from_answers(l, b % 2 == 1, b);
		}
	}
	/* numbers that JSON has no literal for */
	sample.budgets[0].pace.tat = -INFINITY;
	sample.budgets[1].sh_level = NAN;
	sample.budgets[2].hi = INFINITY;
	for (int i = 0; i < 4; i++)
		sample.scopes[sample.n_scopes++] =
		    (struct scope_saved){.key = UINT64_C(0x8000000000000001) * (uint64_t)(i + 1),
		                         .identity = UINT64_C(0x0123456789abcdef) + (uint64_t)i,
		                         .last_ms = INT64_C(1795913000000) + i};
}

static char *encode(const struct state_snapshot *s, size_t *len, unsigned char d[32])
{
	char *buf = NULL;
	ck_assert_int_eq(state_file_encode(s, &buf, len, d), 0);
	return buf;
}

static void setup(void)
{
	build_sample();
}

static void teardown(void)
{
	state_snapshot_free(&sample);
}

/* Bytes equal but for the parameters, which the lane gives back. */
static void assert_same_learned(const struct learned *a, const struct learned *b)
{
	struct learned x = *a, y = *b;
	learned_params_default(&x.p);
	learned_params_default(&y.p);
	ck_assert_msg(memcmp(&x, &y, sizeof(x)) == 0, "a learned budget changed on its way back");
}

START_TEST(round_trip)
{
	size_t len;
	unsigned char d[32];
	char *buf = encode(&sample, &len, d);
	struct state_snapshot back = {0};
	char err[256];
	ck_assert_int_eq(state_file_decode(buf, len, &back, err, sizeof(err)), STATE_FILE_OK);
	ck_assert_int_eq(back.written_ms, sample.written_ms);
	ck_assert_uint_eq(back.n_lanes, 3);
	ck_assert_uint_eq(back.n_budgets, sample.n_budgets);
	ck_assert_uint_eq(back.n_scopes, 4);
	for (size_t i = 0; i < 3; i++)
		ck_assert_msg(memcmp(&back.lanes[i], &sample.lanes[i], sizeof(back.lanes[i])) == 0,
		              "lane %zu changed on its way back", i);
	for (size_t i = 0; i < back.n_budgets; i++)
		assert_same_learned(&back.budgets[i], &sample.budgets[i]);
	ck_assert(isnan(back.budgets[1].sh_level));
	ck_assert(back.budgets[0].pace.tat == -INFINITY);
	for (size_t i = 0; i < 4; i++)
		ck_assert(memcmp(&back.scopes[i], &sample.scopes[i], sizeof(back.scopes[i])) == 0);
	/* What it reads, it writes the same. */
	size_t len2;
	char *again = encode(&back, &len2, NULL);
	ck_assert_uint_eq(len2, len);
	ck_assert(memcmp(again, buf, len) == 0);
	free(again);
	free(buf);
	state_snapshot_free(&back);
}
END_TEST

START_TEST(header_and_text)
{
	size_t len;
	char *buf = encode(&sample, &len, NULL);
	ck_assert(strncmp(buf, "pacerd-state 1 sha256=", 22) == 0);
	ck_assert(buf[22 + 64] == '\n');
	ck_assert(buf[len - 1] == '\n');
	ck_assert_ptr_nonnull(strstr(buf, "\"provider\":\"anthropic\""));
	ck_assert_ptr_nonnull(strstr(buf, "\"scope\":\"fedcba9876543210\""));
	ck_assert_ptr_nonnull(strstr(buf, "\"requests\":{"));
	ck_assert_ptr_nonnull(strstr(buf, "\"sh_level\":\"nan\""));
	free(buf);
}
END_TEST

START_TEST(records_digest_ignores_when)
{
	size_t len;
	unsigned char d1[32], d2[32], d3[32];
	free(encode(&sample, &len, d1));
	sample.written_ms += 30000;
	free(encode(&sample, &len, d2));
	ck_assert(memcmp(d1, d2, 32) == 0);
	sample.lanes[1].aimd.limit += 1;
	free(encode(&sample, &len, d3));
	ck_assert(memcmp(d1, d3, 32) != 0);
}
END_TEST

START_TEST(empty_state)
{
	struct state_snapshot none = {.written_ms = 5};
	size_t len;
	char *buf = encode(&none, &len, NULL);
	struct state_snapshot back = {0};
	ck_assert_int_eq(state_file_decode(buf, len, &back, NULL, 0), STATE_FILE_OK);
	ck_assert_uint_eq(back.n_lanes + back.n_scopes, 0);
	free(buf);
	state_snapshot_free(&back);
}
END_TEST

/* Cut anywhere, the file is not read; and nothing of it is kept. */
START_TEST(truncated_at_every_byte)
{
	size_t len;
	char *buf = encode(&sample, &len, NULL);
	struct state_snapshot back = {0};
	char err[256];
	for (size_t n = 0; n < len; n++) {
		enum state_file_error e = state_file_decode(buf, n, &back, err, sizeof(err));
		ck_assert_msg(e == STATE_FILE_E_CORRUPT, "cut at %zu: %d (%s)", n, e, err);
		ck_assert_uint_eq(back.n_lanes + back.n_budgets + back.n_scopes, 0);
	}
	free(buf);
	state_snapshot_free(&back);
}
END_TEST

/* Any byte changed, in any way that changes it, is caught. */
START_TEST(every_byte_flipped)
{
	size_t len;
	char *buf = encode(&sample, &len, NULL);
	struct state_snapshot back = {0};
	char err[256];
	static const unsigned char flips[] = {0x01, 0x20, 0x80};
	for (size_t i = 0; i < len; i++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			buf[i] ^= (char)flips[f];
			enum state_file_error e =
			    state_file_decode(buf, len, &back, err, sizeof(err));
			buf[i] ^= (char)flips[f];
			ck_assert_msg(e != STATE_FILE_OK, "byte %zu ^ 0x%02x read as good", i,
			              flips[f]);
			ck_assert_uint_eq(back.n_lanes + back.n_budgets + back.n_scopes, 0);
		}
	}
	free(buf);
	state_snapshot_free(&back);
}
END_TEST

START_TEST(other_version)
{
	size_t len;
	char *buf = encode(&sample, &len, NULL);
	buf[13] = '2';
	struct state_snapshot back = {0};
	char err[256];
	ck_assert_int_eq(state_file_decode(buf, len, &back, err, sizeof(err)),
	                 STATE_FILE_E_VERSION);
	ck_assert_ptr_nonnull(strstr(err, "version 2"));
	const char v10[] = "pacerd-state 10 sha256=00\n{}\n";
	ck_assert_int_eq(state_file_decode(v10, sizeof(v10) - 1, &back, err, sizeof(err)),
	                 STATE_FILE_E_VERSION);
	free(buf);
	state_snapshot_free(&back);
}
END_TEST

START_TEST(foreign_files)
{
	static const char *const files[] = {
	    "{\"lanes\":[]}\n",
	    "hello\n",
	    "pacerd-stat",
	    "PACERD-STATE 1 sha256=x\n",
	    "\x7f"
	    "ELF\x02\x01\x01",
	    "pacerd-statefile 1\n",
	};
	struct state_snapshot back = {0};
	char err[256];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		enum state_file_error e =
		    state_file_decode(files[i], strlen(files[i]), &back, err, sizeof(err));
		/* "pacerd-stat" is the start of one cut short */
		ck_assert_int_eq(e, i == 2 ? STATE_FILE_E_CORRUPT : STATE_FILE_E_FOREIGN);
	}
	ck_assert_str_eq(state_file_error_name(STATE_FILE_E_FOREIGN), "foreign");
	state_snapshot_free(&back);
}
END_TEST

/* A body whose checksum holds, as a buggy writer or a hand would make it. */
static char *with_checksum(const char *body, size_t *len)
{
	unsigned char d[32];
	unsigned n;
	EVP_Digest(body, strlen(body), d, &n, EVP_sha256(), NULL);
	char *out = malloc(128 + strlen(body));
	int k = snprintf(out, 128, "pacerd-state 1 sha256=");
	for (unsigned i = 0; i < n; i++)
		k += snprintf(out + k, 4, "%02x", d[i]);
	out[k++] = '\n';
	memcpy(out + k, body, strlen(body) + 1);
	*len = (size_t)k + strlen(body);
	return out;
}

START_TEST(malformed_under_a_good_checksum)
{
	static const char *const bodies[] = {
	    /* no meta line */
	    "{\"lane\":{}}\n",
	    /* a lane without its fields */
	    "{\"written_ms\":1,\"lanes\":1,\"budgets\":0,\"scopes\":0}\n{\"lane\":{\"provider\":"
	    "\"x\"}}\n",
	    /* counts that do not match */
	    "{\"written_ms\":1,\"lanes\":2,\"budgets\":0,\"scopes\":0}\n",
	    /* a scope with a short key */
	    "{\"written_ms\":1,\"lanes\":0,\"budgets\":0,\"scopes\":1}\n"
	    "{\"scope\":{\"key\":\"12\",\"identity\":\"0000000000000001\",\"last_ms\":1}}\n",
	    /* a line that is not an object */
	    "{\"written_ms\":1,\"lanes\":0,\"budgets\":0,\"scopes\":0}\n[1,2]\n",
	    /* a record of no known kind */
	    "{\"written_ms\":1,\"lanes\":0,\"budgets\":0,\"scopes\":0}\n{\"lanes\":1}\n",
	    /* counts beyond what the bytes can hold */
	    "{\"written_ms\":1,\"lanes\":1000000000000,\"budgets\":0,\"scopes\":0}\n",
	    /* no end of line */
	    "{\"written_ms\":1,\"lanes\":0,\"budgets\":0,\"scopes\":0}",
	};
	struct state_snapshot back = {0};
	char err[256];
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		size_t len;
		char *f = with_checksum(bodies[i], &len);
		enum state_file_error e = state_file_decode(f, len, &back, err, sizeof(err));
		ck_assert_msg(e == STATE_FILE_E_CORRUPT, "body %zu read: %d", i, e);
		ck_assert_uint_eq(back.n_lanes + back.n_scopes, 0);
		free(f);
	}
	/* The lane's missing field is named. */
	size_t len;
	char *f = with_checksum(bodies[1], &len);
	state_file_decode(f, len, &back, err, sizeof(err));
	ck_assert_ptr_nonnull(strstr(err, "line 3"));
	free(f);
	state_snapshot_free(&back);
}
END_TEST

/* One lane line of a real lane (a learned budget and 64 outputs) holds
 * under 4 KiB, so that 10,000 lanes are tens of MiB at most. */
START_TEST(size_per_lane)
{
	size_t len;
	char *buf = encode(&sample, &len, NULL);
	ck_assert_uint_lt(len, 3 * 8192);
	free(buf);
}
END_TEST

static Suite *state_file_suite(void)
{
	Suite *s = suite_create("state_file");
	TCase *tc = tcase_create("format");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, header_and_text);
	tcase_add_test(tc, records_digest_ignores_when);
	tcase_add_test(tc, empty_state);
	tcase_add_test(tc, size_per_lane);
	suite_add_tcase(s, tc);
	TCase *bad = tcase_create("damage");
	tcase_add_checked_fixture(bad, setup, teardown);
	tcase_set_timeout(bad, 120);
	tcase_add_test(bad, truncated_at_every_byte);
	tcase_add_test(bad, every_byte_flipped);
	tcase_add_test(bad, other_version);
	tcase_add_test(bad, foreign_files);
	tcase_add_test(bad, malformed_under_a_good_checksum);
	suite_add_tcase(s, bad);
	return s;
}

UNIT_MAIN("state_file", state_file_suite)
