/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for pool: last put is first got, the cap, the low-water mark
 * after a burst, trim frees exactly what the period did not use (and all of
 * it with all), and a new period after each trim. */
#include <stdlib.h>

#include "core/pool.h"
#include "unit.h"

struct obj {
	int id;
	struct list link;
};

static struct pool pool;
static int destroyed;

static void setup(void)
{
	pool_init(&pool, offsetof(struct obj, link), 0);
	destroyed = 0;
}

static void teardown(void)
{
	pool_trim(&pool, true, free);
}

static void obj_destroy(void *o)
{
	destroyed++;
	free(o);
}

static struct obj *obj_new(int id)
{
	struct obj *o = calloc(1, sizeof(*o));
	ck_assert_ptr_nonnull(o);
	o->id = id;
	return o;
}

/* What an owner does: a pooled object, else a new one. */
static struct obj *take(int id)
{
	struct obj *o = pool_get(&pool);
	return o != NULL ? o : obj_new(id);
}

static void give(struct obj *o)
{
	if (!pool_put(&pool, o))
		obj_destroy(o);
}

START_TEST(empty_pool_gives_nothing)
{
	ck_assert_ptr_null(pool_get(&pool));
	ck_assert_int_eq(pool.n, 0);
	ck_assert_int_eq(pool_trim(&pool, false, obj_destroy), 0);
	ck_assert_int_eq(pool_trim(&pool, true, obj_destroy), 0);
}
END_TEST

START_TEST(last_put_is_first_got)
{
	struct obj *a = obj_new(1), *b = obj_new(2);
	give(a);
	give(b);
	ck_assert_int_eq(pool.n, 2);
	ck_assert_ptr_eq(pool_get(&pool), b);
	ck_assert_ptr_eq(pool_get(&pool), a);
	ck_assert_ptr_null(pool_get(&pool));
	/* Got back as they were put: the link is self-linked, the rest intact. */
	ck_assert_int_eq(a->id, 1);
	ck_assert_ptr_eq(a->link.next, &a->link);
	free(a);
	free(b);
}
END_TEST

START_TEST(cap_refuses_and_the_caller_frees)
{
	pool_init(&pool, offsetof(struct obj, link), 2);
	struct obj *o[3];
	for (int i = 0; i < 3; i++)
		o[i] = obj_new(i);
	ck_assert(pool_put(&pool, o[0]));
	ck_assert(pool_put(&pool, o[1]));
	ck_assert(!pool_put(&pool, o[2]));
	ck_assert_int_eq(pool.n, 2);
	free(o[2]);
	/* Room again after a get. */
	struct obj *g = pool_get(&pool);
	ck_assert(pool_put(&pool, g));
	ck_assert_int_eq(pool.n, 2);
}
END_TEST

/* A burst that empties the pool leaves nothing to free; a later period with
 * at most 9 of 12 in use at once frees those 3 and no more. */
START_TEST(trim_frees_what_the_burst_did_not_use)
{
	struct obj *o[12];
	for (int i = 0; i < 10; i++)
		give(obj_new(i));
	/* A period starts at the count a trim leaves. */
	ck_assert_int_eq(pool_trim(&pool, false, obj_destroy), 0);
	ck_assert_int_eq(pool.low, 10);
	for (int i = 0; i < 12; i++)
		o[i] = take(100 + i);
	ck_assert_int_eq(pool.n, 0);
	ck_assert_int_eq(pool.low, 0);
	for (int i = 0; i < 12; i++)
		give(o[i]);
	for (int i = 0; i < 7; i++)
		o[i] = take(0);
	ck_assert_int_eq(pool.n, 5);
	for (int i = 0; i < 7; i++)
		give(o[i]);
	ck_assert_int_eq(pool.n, 12);
	/* The fewest since the last trim: 0, during the first burst. */
	ck_assert_int_eq(pool.low, 0);
	ck_assert_int_eq(pool_trim(&pool, false, obj_destroy), 0);
	ck_assert_int_eq(pool.low, 12);
	/* A quieter period: at most 9 in use at once, so 3 unused. */
	for (int i = 0; i < 9; i++)
		o[i] = take(0);
	for (int i = 0; i < 9; i++)
		give(o[i]);
	for (int i = 0; i < 4; i++)
		o[i] = take(0);
	for (int i = 0; i < 4; i++)
		give(o[i]);
	ck_assert_int_eq(pool.low, 3);
	ck_assert_int_eq(pool_trim(&pool, false, obj_destroy), 3);
	ck_assert_int_eq(destroyed, 3);
	ck_assert_int_eq(pool.n, 9);
	/* Nothing taken since: the next trim frees all 9. */
	ck_assert_int_eq(pool.low, 9);
	ck_assert_int_eq(pool_trim(&pool, false, obj_destroy), 9);
	ck_assert_int_eq(destroyed, 12);
	ck_assert_int_eq(pool.n, 0);
	ck_assert_ptr_null(pool_get(&pool));
}
END_TEST

START_TEST(trim_all_frees_every_one)
{
	for (int i = 0; i < 6; i++)
		give(obj_new(i));
	struct obj *busy = take(0); /* in use: not the pool's to free */
	ck_assert_int_eq(pool.n, 5);
	ck_assert_int_eq(pool_trim(&pool, true, obj_destroy), 5);
	ck_assert_int_eq(destroyed, 5);
	ck_assert_int_eq(pool.n, 0);
	ck_assert_int_eq(pool.low, 0);
	ck_assert_ptr_null(pool_get(&pool));
	give(busy);
	ck_assert_int_eq(pool.n, 1);
}
END_TEST

/* Puts alone never raise the mark: objects that only came back were not
 * needed, whatever their number. */
START_TEST(puts_do_not_raise_the_low_mark)
{
	for (int i = 0; i < 4; i++)
		give(obj_new(i));
	ck_assert_int_eq(pool.low, 0);
	ck_assert_int_eq(pool_trim(&pool, false, obj_destroy), 0);
	ck_assert_int_eq(pool.low, 4);
	for (int i = 0; i < 4; i++)
		give(obj_new(10 + i));
	ck_assert_int_eq(pool.low, 4);
	ck_assert_int_eq(pool_trim(&pool, false, obj_destroy), 4);
	ck_assert_int_eq(pool.n, 4);
	/* Most recently put first: the newer four went. */
	struct obj *o = pool_get(&pool);
	ck_assert_int_lt(o->id, 4);
	free(o);
}
END_TEST

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *t = tcase_create("pool");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, empty_pool_gives_nothing);
	tcase_add_test(t, last_put_is_first_got);
	tcase_add_test(t, cap_refuses_and_the_caller_frees);
	tcase_add_test(t, trim_frees_what_the_burst_did_not_use);
	tcase_add_test(t, trim_all_frees_every_one);
	tcase_add_test(t, puts_do_not_raise_the_low_mark);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("pool", pool_suite)
