/* SPDX-License-Identifier: Apache-2.0 */
/* The request state machine's transitions (proxy/xstate.c): the whole table,
 * pair by pair, and the paths a request takes. */
#include "proxy/xstate.h"
#include "unit.h"

/* Every pair (from, to), and whether it is allowed: the contract written out
 * once more, so that a change to the table must be a change here too. */
static const struct {
	enum xstate from, to;
} allowed[] = {
    {XS_NEW, XS_QUEUED},           {XS_NEW, XS_DONE},
    {XS_QUEUED, XS_UPSTREAM},      {XS_QUEUED, XS_STREAMING},
    {XS_QUEUED, XS_DONE},          {XS_UPSTREAM, XS_HELD},
    {XS_UPSTREAM, XS_STREAMING},   {XS_UPSTREAM, XS_RETRY_WAIT},
    {XS_UPSTREAM, XS_DONE},        {XS_HELD, XS_STREAMING},
    {XS_HELD, XS_RETRY_WAIT},      {XS_HELD, XS_DONE},
    {XS_STREAMING, XS_DONE},       {XS_RETRY_WAIT, XS_UPSTREAM},
    {XS_RETRY_WAIT, XS_STREAMING}, {XS_RETRY_WAIT, XS_DONE},
};

static bool in_table(enum xstate from, enum xstate to)
{
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (allowed[i].from == from && allowed[i].to == to)
			return true;
	return false;
}

START_TEST(every_pair)
{
	for (int f = 0; f < XS_N; f++)
		for (int t = 0; t < XS_N; t++)
			ck_assert_msg(xstate_allowed(f, t) == in_table(f, t),
			              "%s -> %s: expected %s", xstate_name(f), xstate_name(t),
			              in_table(f, t) ? "allowed" : "refused");
}
END_TEST

START_TEST(done_is_terminal_and_reachable)
{
	for (int t = 0; t < XS_N; t++)
		ck_assert(!xstate_allowed(XS_DONE, t));
	for (int f = 0; f < XS_DONE; f++)
		ck_assert_msg(xstate_allowed(f, XS_DONE), "%s cannot end", xstate_name(f));
	/* No state returns to itself: a repeated event is a bug. */
	for (int s = 0; s < XS_N; s++)
		ck_assert(!xstate_allowed(s, s));
}
END_TEST

static bool walk(const enum xstate *path, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (!xstate_allowed(path[i - 1], path[i]))
			return false;
	return true;
}

START_TEST(paths)
{
	/* A plain request; a 429 retried then streamed; a transport error
	 * retried; the held answer given at the deadline; a quota refusal
	 * replayed from the queue. */
	const enum xstate plain[] = {XS_NEW, XS_QUEUED, XS_UPSTREAM, XS_STREAMING, XS_DONE};
	const enum xstate retried[] = {XS_NEW,        XS_QUEUED,   XS_UPSTREAM,  XS_HELD,
	                               XS_RETRY_WAIT, XS_UPSTREAM, XS_STREAMING, XS_DONE};
	const enum xstate transport[] = {XS_NEW,        XS_QUEUED,   XS_UPSTREAM,
	                                 XS_RETRY_WAIT, XS_UPSTREAM, XS_DONE};
	const enum xstate deadline[] = {XS_NEW,        XS_QUEUED,    XS_UPSTREAM, XS_HELD,
	                                XS_RETRY_WAIT, XS_STREAMING, XS_DONE};
	const enum xstate quota[] = {XS_NEW, XS_QUEUED, XS_STREAMING, XS_DONE};
	ck_assert(walk(plain, 5));
	ck_assert(walk(retried, 8));
	ck_assert(walk(transport, 6));
	ck_assert(walk(deadline, 7));
	ck_assert(walk(quota, 4));
	/* What must never happen: streaming twice, holding after streaming,
	 * dispatching from the head of the line without a lane. */
	const enum xstate bad1[] = {XS_NEW, XS_QUEUED, XS_UPSTREAM, XS_STREAMING, XS_RETRY_WAIT};
	const enum xstate bad2[] = {XS_NEW, XS_UPSTREAM};
	const enum xstate bad3[] = {XS_QUEUED, XS_HELD};
	ck_assert(!walk(bad1, 5));
	ck_assert(!walk(bad2, 2));
	ck_assert(!walk(bad3, 2));
}
END_TEST

START_TEST(out_of_range)
{
	ck_assert(!xstate_allowed(XS_N, XS_DONE));
	ck_assert(!xstate_allowed(XS_NEW, XS_N));
	ck_assert_str_eq(xstate_name(XS_N), "?");
	ck_assert_str_eq(xstate_name(XS_RETRY_WAIT), "retry_wait");
}
END_TEST

static Suite *xstate_suite(void)
{
	Suite *s = suite_create("xstate");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, every_pair);
	tcase_add_test(tc, done_is_terminal_and_reachable);
	tcase_add_test(tc, paths);
	tcase_add_test(tc, out_of_range);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("xstate", xstate_suite)
