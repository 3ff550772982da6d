/* SPDX-License-Identifier: Apache-2.0 */
/* page: the status page's document and its view without JavaScript:
 * escaping of every value (model and agent names come from clients), the
 * lanes table from a /status snapshot, the document around the view, and the
 * Content-Security-Policy that names the digest of the document's own script. */
#include <check.h>
#include <event2/buffer.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "admin/page.h"
#include "unit.h"

/* The evbuffer's text, NUL-terminated; the caller frees it. */
static char *text_of(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	evbuffer_copyout(b, s, n);
	s[n] = '\0';
	return s;
}

static char *escaped(const char *s, size_t len)
{
	struct evbuffer *b = evbuffer_new();
	page_escape(b, s, len);
	char *t = text_of(b);
	evbuffer_free(b);
	return t;
}

static char *view_of(const char *status_json)
{
	json_error_t e;
	json_t *st = json_loads(status_json, 0, &e);
	ck_assert_msg(st != NULL, "%s", e.text);
	struct evbuffer *b = evbuffer_new();
	page_view(b, st);
	char *t = text_of(b);
	evbuffer_free(b);
	json_decref(st);
	return t;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

START_TEST(escape_the_five)
{
	char *t = escaped("a<b>c&d\"e'f", 11);
	ck_assert_str_eq(t, "a&lt;b&gt;c&amp;d&quot;e&#39;f");
	free(t);
	t = escaped("", 0);
	ck_assert_str_eq(t, "");
	free(t);
	/* UTF-8 and everything else as it is; the length is the caller's. */
	t = escaped("h\xc3\xa9 <x", 3);
	ck_assert_str_eq(t, "h\xc3\xa9");
	free(t);
	t = escaped("&amp;", 5);
	ck_assert_str_eq(t, "&amp;amp;");
	free(t);
}
END_TEST

/* Every byte value but NUL: no markup character survives, and every &
 * starts one of the five references. */
START_TEST(escape_every_byte)
{
	char in[255 * 3];
	for (int i = 1; i < 256; i++) {
		in[3 * (i - 1)] = 'a';
		in[3 * (i - 1) + 1] = (char)i;
		in[3 * (i - 1) + 2] = 'b';
	}
	char *t = escaped(in, sizeof(in));
	ck_assert_uint_eq(strlen(t), sizeof(in) + 4 + 3 + 3 + 5 + 4);
	ck_assert_ptr_null(strchr(t, '<'));
	ck_assert_ptr_null(strchr(t, '>'));
	ck_assert_ptr_null(strchr(t, '"'));
	ck_assert_ptr_null(strchr(t, '\''));
	for (const char *p = strchr(t, '&'); p != NULL; p = strchr(p + 1, '&'))
		ck_assert_msg(strncmp(p, "&amp;", 5) == 0 || strncmp(p, "&lt;", 4) == 0 ||
		                  strncmp(p, "&gt;", 4) == 0 || strncmp(p, "&quot;", 6) == 0 ||
		                  strncmp(p, "&#39;", 5) == 0,
		              "a bare & at %s", p);
	free(t);
}
END_TEST

static const char status_one_lane[] =
    "{\"version\":\"1.2.3\",\"uptime_s\":75,\"listen\":\"127.0.0.1:8080\",\"config\":\"c.yaml\","
    "\"draining\":false,\"in_flight\":3,\"lanes_count\":1,"
    "\"responses\":{\"1xx\":0,\"2xx\":9,\"3xx\":0,\"4xx\":1,\"5xx\":0},"
    "\"lanes\":[{\"provider\":\"openai\",\"key\":\"3f9a1c0b7d2e\",\"plan\":\"paced\","
    "\"queue_depth\":4,\"retry_waiting\":1,\"in_flight\":3,\"concurrency_limit\":8,"
    "\"model\":\"<img/src/onerror=alert(1)>&'x\",\"scope_kind\":\"key\",\"state\":\"open\","
    "\"oldest_wait_ms\":1500,"
    "\"gates\":{\"max_requests_per_second\":0,\"max_requests_per_minute\":120,"
    "\"max_requests_per_hour\":0,\"min_ms_per_request\":0},"
    "\"learned\":{\"requests\":{\"limit\":60,\"capacity\":60,\"remaining\":45,"
    "\"pace_per_min\":55,\"reset_in_ms\":12000}},"
    "\"counters\":{\"dispatched\":345,\"rejected_queue_full\":2,\"queue_timeouts\":1,"
    "\"rejected_agent_busy\":0,\"quota_refused\":0,\"day_refused\":0,\"capacity_signals\":0}}],"
    "\"store\":{\"kind\":\"local\"},"
    "\"connections\":{\"open\":4,\"accepted\":10,\"admin_open\":1},"
    "\"tunnels\":{\"ca\":false,\"open\":0},"
    "\"websockets\":{\"open\":2,\"opening\":1,\"opened\":5,\"turns\":17,"
    "\"turns_in_flight\":1,\"turns_waiting\":3,\"turns_resent\":0,\"sockets\":[]},"
    "\"providers\":{\"openai\":{\"rewrites\":\"on\"}},"
    "\"last_errors\":[{\"ts\":\"2026-01-01T00:00:00.000Z\",\"level\":\"info\","
    "\"event\":\"request\",\"agent\":\"<script>alert(\\\"a\\\")</script>\",\"status\":500}]}";

START_TEST(view_of_a_lane)
{
	char *v = view_of(status_one_lane);
	/* One row, eleven cells, each value in its place. */
	ck_assert_uint_eq(count_of(v, "<tr class=\"lane\""), 1);
	ck_assert_uint_eq(count_of(v, "<td class="), 11 + 4);
	ck_assert_ptr_nonnull(strstr(v, "<tr class=\"lane\" data-key=\"3f9a1c0b7d2e\">"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"key\">key 3f9a1c0b7d2e</td>"));
	ck_assert_ptr_nonnull(
	    strstr(v, "<td class=\"model\">&lt;img/src/onerror=alert(1)&gt;&amp;&#39;x</td>"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"state state-open\">open</td>"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"num inflight\">3/8</td>"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"num queue\">4 +1 retrying</td>"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"num wait\">1.5 s</td>"));
	/* The configured rate wins over the learned pace. */
	ck_assert_ptr_nonnull(
	    strstr(v, "<span class=\"ratetext\">limit 2/s \xc2\xb7 345 sent</span>"));
	ck_assert_ptr_nonnull(
	    strstr(v, "<td class=\"refused\">queue full 2, queue timeout 1</td>"));
	ck_assert_ptr_nonnull(
	    strstr(v, "<td class=\"learned\">requests 45/60, resets in 12.0 s</td>"));
	/* The WebSockets beside the connections and tunnels, in the script's
	 * names and order. */
	ck_assert_ptr_nonnull(strstr(v, "<h2>Connections, tunnels and WebSockets</h2>"));
	ck_assert_ptr_nonnull(
	    strstr(v, "<dl id=\"websockets\"><dt>websockets open</dt><dd>2</dd><dt>opening</dt>"
	              "<dd>1</dd><dt>turns</dt><dd>17</dd><dt>turns in flight</dt><dd>1</dd>"
	              "<dt>turns waiting</dt><dd>3</dd><dt>turns resent</dt><dd>0</dd></dl>"));
	/* The process, the store, connections, the last errors, escaped. */
	ck_assert_ptr_nonnull(strstr(v, "<dt>uptime</dt><dd>1m15s</dd>"));
	ck_assert_ptr_nonnull(strstr(v, "<dt>admin_open</dt><dd>1</dd>"));
	ck_assert_ptr_nonnull(strstr(v, "<dt>openai</dt><dd>rewrites on</dd>"));
	ck_assert_ptr_nonnull(
	    strstr(v, "agent=&lt;script&gt;alert(&quot;a&quot;)&lt;/script&gt; status=500</td>"));
	ck_assert_ptr_null(strstr(v, "<img"));
	ck_assert_ptr_null(strstr(v, "<script"));
	free(v);
}
END_TEST

START_TEST(view_learned_pace_and_nothing)
{
	char *v =
	    view_of("{\"lanes\":[{\"provider\":\"p\",\"key\":\"k\",\"model\":null,\"state\":"
	            "\"learning\",\"gates\":{},\"learned\":{\"requests\":{\"pace_per_min\":30,"
	            "\"remaining\":1,\"limit\":0,\"capacity\":2.5}},\"counters\":{}}],"
	            "\"last_errors\":[]}");
	ck_assert_ptr_nonnull(strstr(v, "<tr class=\"lane quiet\" data-key=\"k\">"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"model\">\xe2\x80\x93</td>"));
	ck_assert_ptr_nonnull(strstr(v, "learned pace ~0.50/s \xc2\xb7 0 sent"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"learned\">requests 1/2.50</td>"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"refused\">\xe2\x80\x93</td>"));
	ck_assert_ptr_nonnull(strstr(v, "<td class=\"none\" colspan=\"4\">none</td>"));
	free(v);
	/* No lanes, no members at all: the tables, empty. */
	v = view_of("{}");
	ck_assert_ptr_nonnull(strstr(v, "<h2>Lanes (0)</h2>"));
	ck_assert_ptr_nonnull(strstr(v, "no lanes yet"));
	free(v);
}
END_TEST

START_TEST(document_around_the_view)
{
	json_t *st = json_loads(status_one_lane, 0, NULL);
	struct evbuffer *b = evbuffer_new();
	ck_assert_int_eq(page_write(b, st), 0);
	char *d = text_of(b);
	ck_assert_int_eq(strncmp(d, "<!doctype html>\n", 16), 0);
	ck_assert_ptr_null(strstr(d, "<!--pacerd:view-->"));
	const char *main = strstr(d, "<main id=\"view\">\n");
	const char *lanes = strstr(d, "<table id=\"lanes\">");
	const char *end = strstr(d, "</main>");
	ck_assert(main != NULL && lanes != NULL && end != NULL && main < lanes && lanes < end);
	ck_assert_uint_eq(count_of(d, "<script>"), 1);
	ck_assert_ptr_nonnull(strstr(d, "</html>\n"));
	free(d);
	evbuffer_free(b);
	json_decref(st);
}
END_TEST

/* The policy allows exactly the document's script and style, by digest. */
START_TEST(csp_names_the_script)
{
	struct evbuffer *b = evbuffer_new();
	ck_assert_int_eq(page_write(b, NULL), 0);
	char *d = text_of(b);
	const char *s = strstr(d, "<script>") + 8;
	const char *e = strstr(s, "</script>");
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	ck_assert_int_eq(EVP_Digest(s, (size_t)(e - s), md, &n, EVP_sha256(), NULL), 1);
	unsigned char b64[64];
	EVP_EncodeBlock(b64, md, (int)n);
	char want[128];
	snprintf(want, sizeof(want), "script-src 'sha256-%s';", (const char *)b64);
	const char *csp = page_csp();
	ck_assert_msg(strstr(csp, want) != NULL, "%s lacks %s", csp, want);
	ck_assert_int_eq(strncmp(csp, "default-src 'none'; ", 20), 0);
	ck_assert_ptr_nonnull(strstr(csp, "style-src 'sha256-"));
	ck_assert_ptr_nonnull(strstr(csp, "connect-src 'self';"));
	ck_assert_ptr_null(strstr(csp, "unsafe"));
	ck_assert_ptr_eq(page_csp(), csp); /* computed once */
	free(d);
	evbuffer_free(b);
}
END_TEST

static Suite *page_suite(void)
{
	Suite *s = suite_create("page");
	TCase *t = tcase_create("escape");
	tcase_add_test(t, escape_the_five);
	tcase_add_test(t, escape_every_byte);
	suite_add_tcase(s, t);
	t = tcase_create("document");
	tcase_add_test(t, view_of_a_lane);
	tcase_add_test(t, view_learned_pace_and_nothing);
	tcase_add_test(t, document_around_the_view);
	tcase_add_test(t, csp_names_the_script);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("page", page_suite)
