/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for usage_read: the usage of one JSON document read as its
 * bytes arrive, cut anywhere, without holding the document; and what a
 * provider's limits count of it (tokens_usage_counted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_mutations.h"
#include "provider/usage_read.h"
#include "unit.h"
#include "usage_ref.h"

static struct tokens_usage usage(const char *body)
{
	struct tokens_usage u;
	usage_read_json(body, strlen(body), &u);
	return u;
}

/* The usage of body fed in pieces of the given sizes (cycled), with a
 * reader that read another document before (its buffer kept). */
static bool read_in_pieces(struct usage_read *r, const char *body, size_t n, const size_t *sizes,
                           size_t n_sizes, struct tokens_usage *u, bool *error)
{
	memset(u, 0, sizeof(*u));
	*error = false;
	usage_read_start(r);
	size_t at = 0;
	for (size_t k = 0; at < n; k++) {
		size_t step = sizes[k % n_sizes];
		if (step > n - at)
			step = n - at;
		usage_read_feed(r, body + at, step);
		at += step;
	}
	return usage_read_end(r, u, error);
}

/* What one piece gives, and that every way of cutting body gives the same:
 * once at every byte, twice (every pair of cuts, for short bodies), one
 * byte at a time, and pieces of pseudo-random sizes. */
static void check_cuts(const char *body, size_t n)
{
	struct usage_read r;
	struct tokens_usage whole, u;
	bool whole_err, err;
	usage_read_init(&r);
	size_t all = n;
	bool whole_ok = read_in_pieces(&r, body, n, &all, 1, &whole, &whole_err);
	for (size_t cut = 0; cut <= n; cut++) {
		size_t two[] = {cut, n - cut};
		usage_read_start(&r);
		bool ok = read_in_pieces(&r, body, n, two, 2, &u, &err);
		ck_assert_msg(ok == whole_ok && err == whole_err && ref_usage_same(&u, &whole),
		              "cut at %zu of [%.*s]", cut, (int)n, body);
	}
	for (size_t a = 1; n <= 200 && a < n; a++) {
		for (size_t b = a; b < n; b++) {
			size_t three[] = {a, b - a, n - b};
			bool ok = read_in_pieces(&r, body, n, three, 3, &u, &err);
			ck_assert_msg(ok == whole_ok && ref_usage_same(&u, &whole),
			              "cuts at %zu, %zu of [%.*s]", a, b, (int)n, body);
		}
	}
	size_t one = 1;
	ck_assert(read_in_pieces(&r, body, n, &one, 1, &u, &err) == whole_ok);
	ck_assert(ref_usage_same(&u, &whole) && err == whole_err);
	unsigned seed = 12345;
	for (int round = 0; round < 50; round++) {
		size_t sizes[16];
		for (size_t i = 0; i < 16; i++) {
			seed = seed * 1103515245u + 12345u;
			sizes[i] = 1 + (seed >> 16) % 37;
		}
		ck_assert(read_in_pieces(&r, body, n, sizes, 16, &u, &err) == whole_ok);
		ck_assert(ref_usage_same(&u, &whole) && err == whole_err);
	}
	usage_read_free(&r);
}

static const char *const documents[] = {
    /* OpenAI chat, with the cached and reasoning details */
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"Hi \\\"there\\\" caf\xc3\xa9 \\u00e9\"}}],"
    "\"usage\":{\"prompt_tokens\":1300,\"completion_tokens\":70,\"total_tokens\":1370,"
    "\"prompt_tokens_details\":{\"cached_tokens\":1024,\"audio_tokens\":0},"
    "\"completion_tokens_details\":{\"reasoning_tokens\":64}}}",
    /* the Responses API's last event */
    "{\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":\"resp_1\","
    "\"instructions\":\"Use \\\"usage\\\":{\\\"input_tokens\\\":1} never\",\"tools\":[{\"name\":"
    "\"shell\",\"parameters\":{\"usage\":{\"input_tokens\":5}}}],\"output\":[{\"type\":"
    "\"message\",\"content\":[{\"text\":\"{}[]:,\\\\\"}]}],\"usage\":{\"input_tokens\":"
    "5200,\"input_tokens_details\":{\"cached_tokens\":4800},\"output_tokens\":310,"
    "\"output_tokens_details\":{\"reasoning_tokens\":128},\"total_tokens\":5510}}}",
    /* Anthropic: message_start, message_delta */
    "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":25,"
    "\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":4000,\"output_tokens\":"
    "1}}}",
    "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{"
    "\"output_tokens\":15}}",
    /* Gemini, Groq, an error */
    "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],\"usageMetadata\":{"
    "\"promptTokenCount\":10,\"candidatesTokenCount\":20,\"thoughtsTokenCount\":5,"
    "\"totalTokenCount\":35}}",
    "{\"id\":\"x\",\"choices\":[],\"x_groq\":{\"id\":\"req_1\",\"usage\":{\"prompt_tokens\":7,"
    "\"completion_tokens\":3,\"total_tokens\":10}}}",
    "{\"id\":\"g1\",\"error\":{\"code\":502,\"message\":\"Provider returned error\"}}",
    /* names with escapes, blanks everywhere, repeated members */
    " \r\n{ \"u\\u0073age\" : { \"prompt_tokens\" : 3 , \"completion_tokens\":4 } , "
    "\"\\u0065rror\":null,\"r\\u0065sponse\":{\"x\":[1,{\"a\":\"}\"}],\"us\\u0061ge\":{"
    "\"output_tokens\":9}}}\t\n",
    "{\"usage\":{\"prompt_tokens\":1},\"usage\":{\"total_tokens\":-1,\"output_tokens\":2}}",
    "{\"response\":{\"usage\":{\"input_tokens\":8}},\"response\":{\"id\":1}}",
    /* nothing: not an object, truncated, trailing bytes, a bad usage value */
    "[{\"usage\":{\"prompt_tokens\":1}}]",
    "{\"usage\":{\"prompt_tokens\":1}}}",
    "{\"usage\":{\"prompt_tokens\":1}} x",
    "{\"usage\":{\"prompt_tokens\":1,}}",
};

START_TEST(the_same_usage_however_cut)
{
	for (size_t i = 0; i < sizeof documents / sizeof documents[0]; i++)
		check_cuts(documents[i], strlen(documents[i]));
}
END_TEST

START_TEST(what_each_api_reports)
{
	struct tokens_usage u = usage(documents[0]);
	/* OpenAI counts its cached tokens in prompt_tokens: input is the rest */
	ck_assert(u.present && u.has_input && u.has_output && u.has_cache);
	ck_assert_int_eq(u.input, 1300 - 1024);
	ck_assert_int_eq(u.cache_read, 1024);
	ck_assert_int_eq(u.cache_creation, 0);
	ck_assert_int_eq(u.output, 70); /* the reasoning is inside it: not added */
	ck_assert_int_eq(u.reasoning, 64);
	ck_assert_int_eq(u.total, 1370 - 1024);

	u = usage(
	    documents[1]); /* response.usage; the usage in a tool schema and in strings is not */
	ck_assert_int_eq(u.input, 400);
	ck_assert_int_eq(u.cache_read, 4800);
	ck_assert_int_eq(u.output, 310);
	ck_assert_int_eq(u.reasoning, 128);
	ck_assert_int_eq(u.total, 710);

	u = usage(documents[2]); /* Anthropic: creation counts, reads are apart */
	ck_assert_int_eq(u.input, 125);
	ck_assert_int_eq(u.cache_creation, 100);
	ck_assert_int_eq(u.cache_read, 4000);
	ck_assert_int_eq(u.output, 1);
	ck_assert_int_eq(u.total, 126);

	u = usage(documents[4]); /* Gemini: thoughts added to the candidates */
	ck_assert_int_eq(u.input, 10);
	ck_assert_int_eq(u.output, 25);
	ck_assert_int_eq(u.reasoning, 5);
	ck_assert_int_eq(u.total, 35);
	ck_assert(!u.has_cache);

	u = usage(documents[5]);
	ck_assert_int_eq(u.total, 10);
	u = usage(documents[7]); /* escaped names; response.usage merged after usage */
	ck_assert_int_eq(u.input, 3);
	ck_assert_int_eq(u.output, 9);
	ck_assert_int_eq(u.total, 12);
	u = usage(documents[8]); /* the last usage counts: its total is no count */
	ck_assert(u.present && !u.has_input);
	ck_assert_int_eq(u.output, 2);
	ck_assert(!usage(documents[9]).present); /* the last "response" has none */
	for (size_t i = 10; i < sizeof documents / sizeof documents[0]; i++)
		ck_assert_msg(!usage(documents[i]).present, "%s", documents[i]);

	u = usage("{\"object\":\"list\",\"data\":[],\"usage\":{\"prompt_tokens\":8,"
	          "\"total_tokens\":8}}");
	ck_assert(u.present && u.has_input && !u.has_output);
	ck_assert_int_eq(u.total, 8);
	ck_assert(!usage("{\"usage\":null}").present);
	ck_assert(!usage("{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":\"7\"}}").present);
	ck_assert(!usage("not json").present);
	ck_assert(!usage("").present);
	/* both conventions: Anthropic's reads win, the input is not cut */
	u = usage("{\"usage\":{\"prompt_tokens\":100,\"cache_read_input_tokens\":30,"
	          "\"prompt_tokens_details\":{\"cached_tokens\":80}}}");
	ck_assert_int_eq(u.input, 100);
	ck_assert_int_eq(u.cache_read, 30);
	/* more cached than input: none left, never below 0 */
	u = usage("{\"usage\":{\"prompt_tokens\":10,\"total_tokens\":12,"
	          "\"prompt_tokens_details\":{\"cached_tokens\":80}}}");
	ck_assert_int_eq(u.input, 0);
	ck_assert_int_eq(u.total, 0);
	/* the last details object counts whole */
	u = usage("{\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":4},"
	          "\"input_tokens_details\":{}}}");
	ck_assert(!u.has_cache);
	ck_assert_int_eq(u.input, 10);
}
END_TEST

/* An error member is said only by a complete document. */
START_TEST(errors_and_incomplete_documents)
{
	struct usage_read r;
	struct tokens_usage u = {0};
	bool err = false;
	usage_read_init(&r);
	usage_read_start(&r);
	const char *doc = documents[6];
	usage_read_feed(&r, doc, strlen(doc) - 1);
	ck_assert(!usage_read_end(&r, &u, &err));
	ck_assert(!err);
	usage_read_start(&r);
	usage_read_feed(&r, doc, strlen(doc));
	ck_assert(usage_read_end(&r, &u, &err));
	ck_assert(err && !u.present);
	/* every proper prefix of a document is no document */
	for (size_t i = 0; i < 10; i++) { /* the complete ones */
		const char *d = documents[i];
		size_t n = strlen(d);
		while (n > 0 && (d[n - 1] == ' ' || d[n - 1] == '\t' || d[n - 1] == '\n'))
			n--;
		for (size_t k = 0; k < n; k++) {
			struct tokens_usage v = {0};
			err = false;
			usage_read_start(&r);
			usage_read_feed(&r, d, k);
			ck_assert_msg(!usage_read_end(&r, &v, &err) && !v.present && !err,
			              "%zu of %s", k, d);
		}
	}
	usage_read_free(&r);
}
END_TEST

/* Usage objects nested deeper, in other members, or in strings are not the
 * answer's. */
START_TEST(only_where_apis_keep_it)
{
	static const char *const none[] = {
	    "{\"choices\":[{\"usage\":{\"prompt_tokens\":5}}]}",
	    "{\"error\":{\"usage\":{\"prompt_tokens\":77}}}",
	    "{\"message\":{\"content\":{\"usage\":{\"input_tokens\":5}}}}",
	    "{\"response\":[{\"usage\":{\"input_tokens\":5}}]}",
	    "{\"data\":{\"response\":{\"usage\":{\"input_tokens\":5}}}}",
	    "{\"text\":\"\\\"usage\\\":{\\\"prompt_tokens\\\":5}\"}",
	    "{\"usag\":{\"prompt_tokens\":5},\"usagee\":{\"prompt_tokens\":5}}",
	    "{\"x\":\"\\\\\",\"y\":\"\\\"usage\\\":{\\\"prompt_tokens\\\":5}\"}",
	    "{\"message\":{\"usageMetadata\":{\"promptTokenCount\":5}}}",
	    "{\"x_groq\":{\"x_groq\":{\"usage\":{\"prompt_tokens\":5}}}}",
	};
	for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
		ck_assert_msg(!usage(none[i]).present, "%s", none[i]);
		check_cuts(none[i], strlen(none[i]));
	}
}
END_TEST

/* A usage value longer than USAGE_READ_VALUE_MAX is none read (and, the
 * last one counting, hides an earlier one); one just under is read. */
START_TEST(a_usage_value_over_the_cap_is_none)
{
	char *doc = malloc(USAGE_READ_VALUE_MAX + 256);
	ck_assert_ptr_nonnull(doc);
	for (int over = 0; over < 2; over++) {
		int k =
		    snprintf(doc, 256, "{\"usage\":{\"prompt_tokens\":4},\"usage\":{\"pad\":\"");
		size_t value = (size_t)k - strlen("{\"usage\":{\"prompt_tokens\":4},\"usage\":");
		size_t tail = strlen("\",\"prompt_tokens\":6}");
		size_t pad = USAGE_READ_VALUE_MAX - value - tail + (size_t)over;
		memset(doc + k, 'p', pad);
		snprintf(doc + k + pad, 256, "\",\"prompt_tokens\":6}}");
		struct tokens_usage u = usage(doc);
		if (over) {
			ck_assert(!u.present);
		} else {
			ck_assert(u.present);
			ck_assert_int_eq(u.input, 6);
		}
		/* in pieces too */
		struct usage_read r;
		struct tokens_usage v;
		bool err;
		size_t sizes[] = {100, 7};
		usage_read_init(&r);
		ck_assert(read_in_pieces(&r, doc, strlen(doc), sizes, 2, &v, &err));
		ck_assert(ref_usage_same(&u, &v));
		usage_read_free(&r);
	}
	free(doc);
}
END_TEST

/* A Responses API response.completed of 200 KiB and 2 MiB (the
 * instructions, tools and output repeated before the usage) is read in
 * pieces of any size; the reader's memory does not grow with it. */
static char *completed(size_t size, size_t *len)
{
	static const char head[] =
	    "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"instructions\":\"";
	static const char text[] = "Run the tests; \\\"usage\\\":{\\\"input_tokens\\\":1} is text, "
	                           "caf\xc3\xa9 {[,:]} \\\\ \\n";
	static const char tail[] =
	    "\",\"tools\":[{\"type\":\"function\",\"parameters\":{\"usage\":{\"input_tokens\":2}}}]"
	    ","
	    "\"output\":[{\"type\":\"message\",\"content\":[{\"text\":\"done\"}]}],\"usage\":{"
	    "\"input_tokens\":52000,\"input_tokens_details\":{\"cached_tokens\":48000},"
	    "\"output_tokens\":310,\"output_tokens_details\":{\"reasoning_tokens\":128},"
	    "\"total_tokens\":52310}}}";
	char *b = malloc(size + sizeof text + sizeof tail);
	ck_assert_ptr_nonnull(b);
	size_t n = sizeof head - 1;
	memcpy(b, head, n);
	while (n < size - (sizeof tail - 1)) {
		memcpy(b + n, text, sizeof text - 1);
		n += sizeof text - 1;
	}
	memcpy(b + n, tail, sizeof tail - 1);
	*len = n + sizeof tail - 1;
	return b;
}

START_TEST(a_long_response_completed_is_read)
{
	static const size_t sizes[] = {200 * 1024, 2 * 1024 * 1024};
	for (size_t i = 0; i < 2; i++) {
		size_t n;
		char *doc = completed(sizes[i], &n);
		ck_assert_uint_ge(n, sizes[i]);
		struct usage_read r;
		usage_read_init(&r);
		static const size_t pieces[][3] = {
		    {16384, 16384, 16384}, {1, 4093, 65536}, {7, 3, 1}};
		for (size_t k = 0; k < 3; k++) {
			struct tokens_usage u;
			bool err;
			ck_assert(read_in_pieces(&r, doc, n, pieces[k], 3, &u, &err));
			ck_assert(u.present && !err);
			ck_assert_int_eq(u.input, 4000);
			ck_assert_int_eq(u.cache_read, 48000);
			ck_assert_int_eq(u.output, 310);
			ck_assert_int_eq(u.total, 4310);
			ck_assert_uint_le(r.value_cap, 512); /* the usage value, not the document */
		}
		usage_read_free(&r);
		free(doc);
	}
}
END_TEST

START_TEST(deep_documents)
{
	/* as deep as jansson reads: structure only; deeper: nothing */
	char doc[2 * USAGE_READ_DEPTH_MAX + 128];
	for (int extra = 0; extra < 2; extra++) {
		size_t k = 0;
		int levels = USAGE_READ_DEPTH_MAX - 1 + extra;
		k += (size_t)snprintf(doc, sizeof doc, "{\"usage\":{\"prompt_tokens\":2},\"a\":");
		for (int i = 0; i < levels; i++)
			doc[k++] = '[';
		for (int i = 0; i < levels; i++)
			doc[k++] = ']';
		doc[k++] = '}';
		struct tokens_usage u;
		usage_read_json(doc, k, &u);
		ck_assert(u.present == !extra);
	}
}
END_TEST

/* For every document jansson accepts, the usage its tree gives
 * (tests/unit/usage_ref.h); mutations of each byte and every prefix. */
static int disagreements;

static void compare_one(const char *b, size_t n)
{
	struct tokens_usage a, ref, s_ref;
	bool valid, err = false, s_err = false;
	usage_read_json(b, n, &a);
	/* jansson drops a NUL byte after a number or a literal (test_tokens.c) */
	ref_tokens_usage_json(b, n, &ref, &valid);
	if (!valid || memchr(b, '\0', n) != NULL)
		return;
	bool same = ref_usage_same(&a, &ref);
	/* a data: line: the error member too */
	struct usage_read r;
	struct tokens_usage s = {0};
	memset(&s_ref, 0, sizeof s_ref);
	usage_read_init(&r);
	usage_read_start(&r);
	usage_read_feed(&r, b, n);
	usage_read_end(&r, &s, &err);
	usage_read_free(&r);
	ref_sse_data(b, n, &s_ref, &s_err);
	same = same && err == s_err && ref_usage_same(&s, &s_ref);
	if (!same && disagreements++ < 5)
		fprintf(stderr,
		        "disagree on [%.*s]: usage %d,%lld,%lld,%lld,%lld / %d,%lld,%lld,%lld,%lld "
		        "error %d/%d\n",
		        (int)(n > 300 ? 300 : n), b, a.present, (long long)a.input,
		        (long long)a.output, (long long)a.total, (long long)a.cache_read,
		        ref.present, (long long)ref.input, (long long)ref.output,
		        (long long)ref.total, (long long)ref.cache_read, err, s_err);
}

/* Every mutation of body (json_mutations.h), compared. */
static void compare_mutations(const char *body)
{
	json_mutations(body, compare_one);
}

START_TEST(agrees_with_jansson)
{
	for (size_t i = 0; i < sizeof documents / sizeof documents[0]; i++)
		compare_mutations(documents[i]);
	compare_mutations(
	    "{\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":1,"
	    "\"thoughtsTokenCount\":2},\"response\":{\"usage\":{\"output_tokens\":9}},"
	    "\"x_groq\":{\"usage\":{\"prompt_tokens\":1}},\"error\":{\"code\":1}}");
	compare_mutations(
	    "{\"usage\":{\"prompt_tokens\":9,\"cache_creation_input_tokens\":2,"
	    "\"input_tokens_details\":{\"cached_tokens\":3},\"output_tokens_details\":"
	    "{\"reasoning_tokens\":1},\"completion_tokens\":4}}");
	ck_assert_int_eq(disagreements, 0);
}
END_TEST

/* What a provider's limits count: reads where they are not free. */
START_TEST(counted_as_the_provider_counts)
{
	struct tokens_usage openai = usage(documents[0]);
	struct tokens_usage c = tokens_usage_counted(&openai, false);
	ck_assert_int_eq(c.input, 1300); /* OpenAI: caching does not affect rate limits */
	ck_assert_int_eq(c.total, 1370);
	c = tokens_usage_counted(&openai, true); /* Groq: cache hits are free */
	ck_assert_int_eq(c.input, 276);
	ck_assert_int_eq(c.total, 346);
	struct tokens_usage anthropic = usage(documents[2]);
	c = tokens_usage_counted(&anthropic, true);
	ck_assert_int_eq(c.input, 125);
	ck_assert_int_eq(c.total, 126);
	c = tokens_usage_counted(&anthropic, false); /* a model that counts its reads */
	ck_assert_int_eq(c.input, 4125);
	ck_assert_int_eq(c.total, 4126);
	ck_assert_int_eq(c.cache_read, 4000);
	struct tokens_usage plain = usage(documents[5]);
	c = tokens_usage_counted(&plain, false);
	ck_assert(ref_usage_same(&c, &plain));
}
END_TEST

START_TEST(empty_feeds_and_reuse)
{
	struct usage_read r;
	struct tokens_usage u = {0};
	usage_read_init(&r);
	usage_read_feed(&r, NULL, 0);
	ck_assert(!usage_read_end(&r, &u, NULL));
	usage_read_start(&r);
	usage_read_feed(&r, documents[0], 10);
	usage_read_feed(&r, "", 0);
	usage_read_feed(&r, documents[0] + 10, strlen(documents[0]) - 10);
	ck_assert(usage_read_end(&r, &u, NULL));
	ck_assert_int_eq(u.output, 70);
	char *kept = r.value;
	ck_assert_ptr_nonnull(kept);
	/* a new document forgets the last one's usage, keeps the buffer */
	usage_read_start(&r);
	ck_assert_ptr_eq(r.value, kept);
	memset(&u, 0, sizeof u);
	usage_read_feed(&r, "{}", 2);
	ck_assert(usage_read_end(&r, &u, NULL) && !u.present);
	usage_read_free(&r);
	usage_read_free(&r); /* idempotent */
}
END_TEST

static Suite *usage_read_suite(void)
{
	Suite *s = suite_create("usage_read");
	TCase *tc = tcase_create("usage_read");
	tcase_add_test(tc, the_same_usage_however_cut);
	tcase_add_test(tc, what_each_api_reports);
	tcase_add_test(tc, errors_and_incomplete_documents);
	tcase_add_test(tc, only_where_apis_keep_it);
	tcase_add_test(tc, a_usage_value_over_the_cap_is_none);
	tcase_add_test(tc, a_long_response_completed_is_read);
	tcase_add_test(tc, deep_documents);
	tcase_add_test(tc, agrees_with_jansson);
	tcase_add_test(tc, counted_as_the_provider_counts);
	tcase_add_test(tc, empty_feeds_and_reuse);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("usage_read", usage_read_suite)
