/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for list: order after inserts at either end, removal of the
 * current node while iterating, a second removal harmless, empty after
 * removing all, and a head that moved (list_moved). */
#include <string.h>

#include "core/list.h"
#include "unit.h"

struct item {
	int v;
	struct list link;
};

static struct list head;
static struct item items[8];

static void setup(void)
{
	list_init(&head);
	for (int i = 0; i < 8; i++) {
		items[i].v = i;
		list_init(&items[i].link);
	}
}

/* The values from first to last into out; returns how many. Walks back from
 * the last too, so that a broken prev link fails as well as a broken next. */
static int values(const struct list *h, int *out)
{
	int n = 0, back = 0;
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, h) {
		out[n++] = LIST_ITEM(node, struct item, link)->v;
	}
	for (const struct list *l = h->prev; l != h; l = l->prev)
		ck_assert_int_eq(LIST_ITEM(l, struct item, link)->v, out[n - 1 - back++]);
	ck_assert_int_eq(back, n);
	return n;
}

START_TEST(empty_after_init)
{
	ck_assert(list_empty(&head));
	ck_assert_ptr_null(list_first(&head));
	ck_assert_ptr_null(list_last(&head));
	int out[8];
	ck_assert_int_eq(values(&head, out), 0);
}
END_TEST

START_TEST(inserts_keep_their_order)
{
	list_insert_tail(&head, &items[1].link);
	list_insert_tail(&head, &items[2].link);
	list_insert_head(&head, &items[0].link);
	list_insert_after(&items[2].link, &items[3].link);
	list_insert_after(&items[0].link, &items[4].link);
	int out[8];
	ck_assert_int_eq(values(&head, out), 5);
	int want[] = {0, 4, 1, 2, 3};
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(out[i], want[i]);
	ck_assert(!list_empty(&head));
	ck_assert_ptr_eq(list_first(&head), &items[0].link);
	ck_assert_ptr_eq(list_last(&head), &items[3].link);
}
END_TEST

START_TEST(remove_the_current_node_while_iterating)
{
	for (int i = 0; i < 6; i++)
		list_insert_tail(&head, &items[i].link);
	/* Odd values leave, and the walk still sees every node once. */
	int seen = 0;
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &head) {
		struct item *it = LIST_ITEM(node, struct item, link);
		ck_assert_int_eq(it->v, seen++);
		if (it->v % 2 == 1)
			list_remove(node);
	}
	ck_assert_int_eq(seen, 6);
	int out[8];
	ck_assert_int_eq(values(&head, out), 3);
	ck_assert_int_eq(out[0], 0);
	ck_assert_int_eq(out[1], 2);
	ck_assert_int_eq(out[2], 4);
}
END_TEST

START_TEST(removing_all_leaves_it_empty)
{
	for (int i = 0; i < 4; i++)
		list_insert_tail(&head, &items[i].link);
	struct list *node, *tmp;
	LIST_FOR_EACH_SAFE(node, tmp, &head) {
		list_remove(node);
	}
	ck_assert(list_empty(&head));
	ck_assert_ptr_eq(head.next, &head);
	ck_assert_ptr_eq(head.prev, &head);
	/* The list can be used again. */
	list_insert_tail(&head, &items[2].link);
	ck_assert_ptr_eq(list_first(&head), &items[2].link);
	ck_assert_ptr_eq(list_last(&head), &items[2].link);
}
END_TEST

START_TEST(a_second_remove_is_harmless)
{
	for (int i = 0; i < 3; i++)
		list_insert_tail(&head, &items[i].link);
	list_remove(&items[1].link);
	ck_assert_ptr_eq(items[1].link.next, &items[1].link);
	list_remove(&items[1].link);
	int out[8];
	ck_assert_int_eq(values(&head, out), 2);
	ck_assert_int_eq(out[0], 0);
	ck_assert_int_eq(out[1], 2);
	/* A removed node goes onto another list at once. */
	struct list other;
	list_init(&other);
	list_insert_head(&other, &items[1].link);
	ck_assert_ptr_eq(list_first(&other), &items[1].link);
	ck_assert_int_eq(values(&head, out), 2);
}
END_TEST

START_TEST(a_moved_head_keeps_its_nodes)
{
	struct list heads[2];
	list_init(&heads[0]);
	for (int i = 0; i < 3; i++)
		list_insert_tail(&heads[0], &items[i].link);
	memmove(&heads[1], &heads[0], sizeof(heads[0]));
	memset(&heads[0], 0xa5, sizeof(heads[0])); /* the old place is gone */
	list_moved(&heads[1]);
	int out[8];
	ck_assert_int_eq(values(&heads[1], out), 3);
	ck_assert_int_eq(out[0], 0);
	ck_assert_int_eq(out[2], 2);
	list_remove(&items[0].link);
	list_remove(&items[2].link);
	list_insert_head(&heads[1], &items[5].link);
	ck_assert_int_eq(values(&heads[1], out), 2);
	ck_assert_int_eq(out[0], 5);
	ck_assert_int_eq(out[1], 1);
}
END_TEST

static Suite *list_suite(void)
{
	Suite *s = suite_create("list");
	TCase *t = tcase_create("list");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, empty_after_init);
	tcase_add_test(t, inserts_keep_their_order);
	tcase_add_test(t, remove_the_current_node_while_iterating);
	tcase_add_test(t, removing_all_leaves_it_empty);
	tcase_add_test(t, a_second_remove_is_harmless);
	tcase_add_test(t, a_moved_head_keeps_its_nodes);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("list", list_suite)
