/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for fairq (priorities and the fair share's tags) and pheap (the
 * heap that keeps requests in that order): round robin between flows, FIFO
 * inside one, cost-weighted shares, a newcomer behind a backlog, the oldest
 * and the newest-lowest, the ahead estimate, tables freed when empty, and the
 * heap checked against sorting under random operations. */
#include <stdlib.h>
#include <string.h>

#include "sched/fairq.h"
#include "sched/pheap.h"
#include "unit.h"

/* A request: its fairq node, its heap node and its arrival number. */
struct req {
	struct fairq_node fq;
	struct pheap_node hn;
	int seq;
	int64_t arrived;
	bool queued;
};

#define REQ_OF(n) ((struct req *)(void *)((char *)(n)-offsetof(struct req, hn)))

static bool req_before(const struct pheap_node *a, const struct pheap_node *b)
{
	int c = fairq_compare(&REQ_OF(a)->fq, &REQ_OF(b)->fq);
	return c != 0 ? c < 0 : REQ_OF(a)->seq < REQ_OF(b)->seq;
}

static struct fairq q;
static struct pheap heap;
static struct req reqs[64];
static int seq;

static void setup(void)
{
	memset(&q, 0, sizeof(q));
	memset(reqs, 0, sizeof(reqs));
	pheap_init(&heap, req_before);
	seq = 0;
}

static void teardown(void)
{
	fairq_release(&q);
}

static void push(int i, int priority, uint64_t flow, double cost)
{
	ck_assert(fairq_push(&q, &reqs[i].fq, priority, flow, cost));
	reqs[i].seq = ++seq;
	reqs[i].arrived = seq;
	reqs[i].queued = true;
	pheap_insert(&heap, &reqs[i].hn);
}

/* The next request in dispatch order, out of the queue; -1 when empty. */
static int pop(void)
{
	if (heap.root == NULL)
		return -1;
	struct req *r = REQ_OF(heap.root);
	pheap_remove(&heap, heap.root);
	fairq_leave(&q, &r->fq, true);
	r->queued = false;
	return (int)(r - reqs);
}

START_TEST(flows_take_turns_and_each_is_fifo)
{
	for (int i = 0; i < 4; i++)
		push(i, 0, 1, 1); /* flow 1: 0 1 2 3 */
	for (int i = 4; i < 6; i++)
		push(i, 0, 2, 1); /* flow 2: 4 5 */
	push(6, 0, 3, 1);         /* flow 3: 6 */
	int want[] = {0, 4, 6, 1, 5, 2, 3};
	for (int k = 0; k < 7; k++)
		ck_assert_int_eq(pop(), want[k]);
	ck_assert_int_eq(pop(), -1);
	ck_assert_int_eq(q.n, 0);
	ck_assert_int_eq(fairq_heap_bytes(&q), 0); /* the tables went with the last one */
}
END_TEST

START_TEST(a_newcomer_waits_at_most_one_dispatch_behind_a_backlog)
{
	for (int i = 0; i < 40; i++)
		push(i, 0, 7, 1);
	ck_assert_int_eq(pop(), 0);
	ck_assert_int_eq(pop(), 1);
	push(40, 0, 8, 1); /* another flow's single request */
	ck_assert_int_eq(pop(), 40);
	/* Before anything of a priority went, the newcomer ties the backlog's
	 * head and goes after it: one dispatch. */
	fairq_release(&q);
	setup();
	for (int i = 0; i < 40; i++)
		push(i, 0, 7, 1);
	push(40, 0, 8, 1);
	ck_assert_int_eq(pop(), 0);
	ck_assert_int_eq(pop(), 40);
}
END_TEST

START_TEST(higher_priority_first_then_fair_inside)
{
	for (int i = 0; i < 10; i++)
		push(i, 0, 1, 1);
	push(10, -5, 2, 1);
	push(11, 10, 3, 1);
	push(12, 10, 3, 1);
	push(13, 10, 4, 1);
	ck_assert_int_eq(pop(), 11);
	ck_assert_int_eq(pop(), 13);
	ck_assert_int_eq(pop(), 12);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(pop(), i);
	ck_assert_int_eq(pop(), 10);
}
END_TEST

START_TEST(costs_weigh_the_share)
{
	/* Flow 1 asks 1000 tokens a request, flow 2 100: flow 2 gets ten
	 * requests through for each of flow 1's. */
	for (int i = 0; i < 5; i++)
		push(i, 0, 1, 1000);
	for (int i = 5; i < 60; i++)
		push(i, 0, 2, 100);
	int n1 = 0, n2 = 0;
	for (int k = 0; k < 33; k++) {
		int i = pop();
		if (i < 5)
			n1++;
		else
			n2++;
	}
	ck_assert_int_eq(n1, 3);
	ck_assert_int_eq(n2, 30);
}
END_TEST

static int64_t arrived(const struct fairq_node *n)
{
	return ((const struct req *)(const void *)n)->arrived;
}

START_TEST(oldest_and_newest_lowest)
{
	ck_assert_ptr_null(fairq_oldest(&q, arrived));
	ck_assert_ptr_null(fairq_newest_lowest(&q));
	push(0, 5, 1, 1);
	push(1, -3, 1, 1);
	push(2, 0, 1, 1);
	push(3, -3, 2, 1);
	push(4, 5, 2, 1);
	ck_assert_ptr_eq(fairq_oldest(&q, arrived), &reqs[0].fq);
	ck_assert_ptr_eq(fairq_newest_lowest(&q), &reqs[3].fq);
	pheap_remove(&heap, &reqs[3].hn);
	fairq_leave(&q, &reqs[3].fq, false);
	ck_assert_ptr_eq(fairq_newest_lowest(&q), &reqs[1].fq);
	ck_assert_int_eq(pop(), 0);
	ck_assert_ptr_eq(fairq_oldest(&q, arrived), &reqs[1].fq);
	struct fairq_level_view v;
	ck_assert_int_eq(q.n_levels, 3);
	fairq_level_at(&q, 0, &v);
	ck_assert_int_eq(v.priority, 5);
	ck_assert_int_eq(v.waiting, 1);
	fairq_level_at(&q, 2, &v);
	ck_assert_int_eq(v.priority, -3);
}
END_TEST

/* Levels live in an array that grows and shifts as priorities come and go;
 * each carries its arrival order along (the lists' ends follow the move). */
START_TEST(levels_move_with_their_requests)
{
	/* Rising priorities: each new level goes first, shifting the others,
	 * and the array grows at 2, 4 and 8. */
	for (int p = 0; p < 9; p++) {
		push(2 * p, p, 1, 1);
		push(2 * p + 1, p, 2, 1);
		ck_assert_ptr_eq(fairq_newest_lowest(&q), &reqs[1].fq);
	}
	ck_assert_int_eq(q.n_levels, 9);
	/* Priority 4 empties: the levels below it shift up. */
	for (int i = 8; i < 10; i++) {
		pheap_remove(&heap, &reqs[i].hn);
		fairq_leave(&q, &reqs[i].fq, false);
	}
	ck_assert_int_eq(q.n_levels, 8);
	ck_assert_ptr_eq(fairq_newest_lowest(&q), &reqs[1].fq);
	ck_assert_ptr_eq(fairq_oldest(&q, arrived), &reqs[0].fq);
	/* A level made in the middle again, then everything in order. */
	push(20, 4, 3, 1);
	for (int p = 8; p >= 0; p--) {
		if (p == 4) {
			ck_assert_int_eq(pop(), 20);
			continue;
		}
		ck_assert_int_eq(pop(), 2 * p);
		ck_assert_int_eq(pop(), 2 * p + 1);
	}
	ck_assert_int_eq(pop(), -1);
	ck_assert_int_eq(q.n_levels, 0);
}
END_TEST

START_TEST(ahead_counts_higher_priorities_and_one_turn_per_flow)
{
	for (int i = 0; i < 20; i++)
		push(i, 0, 1, 1);
	for (int i = 20; i < 23; i++)
		push(i, 0, 2, 1);
	push(23, 3, 9, 1);
	uint64_t f1 = 1, f2 = 2, f3 = 3;
	/* A new flow at 0: the higher one, then one turn of each of 2 flows. */
	ck_assert_int_eq(fairq_ahead(&q, 0, &f3), 1 + 2);
	ck_assert_int_eq(fairq_ahead(&q, 0, NULL), 1 + 2);
	/* Flow 2's next: its 3, and 4 of flow 1's (one per turn, itself included). */
	ck_assert_int_eq(fairq_ahead(&q, 0, &f2), 1 + 3 + 4);
	/* Flow 1's next: everything at 0. */
	ck_assert_int_eq(fairq_ahead(&q, 0, &f1), 1 + 23);
	ck_assert_int_eq(fairq_ahead(&q, 5, &f1), 0);
	ck_assert_int_eq(fairq_ahead(&q, -1, NULL), 24);
}
END_TEST

START_TEST(many_flows_grow_the_table)
{
	for (int i = 0; i < 64; i++)
		push(i, i % 3 - 1, (uint64_t)i, 1);
	ck_assert_int_eq(q.flows.n, 64);
	ck_assert_int_eq(q.n_levels, 3);
	int last_prio = 2;
	for (int k = 0; k < 64; k++) {
		int i = pop();
		ck_assert_int_le(i % 3 - 1, last_prio);
		last_prio = i % 3 - 1;
	}
	ck_assert_int_eq(fairq_heap_bytes(&q), 0);
}
END_TEST

/* pheap against a sort: random inserts and removals of any node. */
static int key[512];
static bool key_before(const struct pheap_node *a, const struct pheap_node *b)
{
	return key[REQ_OF(a) - reqs] < key[REQ_OF(b) - reqs] ||
	       (key[REQ_OF(a) - reqs] == key[REQ_OF(b) - reqs] && REQ_OF(a) < REQ_OF(b));
}

START_TEST(pheap_matches_a_scan)
{
	struct pheap h;
	pheap_init(&h, key_before);
	uint64_t s = 88172645463325252ULL + (uint64_t)_i;
	for (int step = 0; step < 20000; step++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		int i = (int)(s % 64);
		if (!reqs[i].queued) {
			key[i] = (int)((s >> 20) % 50);
			pheap_insert(&h, &reqs[i].hn);
			reqs[i].queued = true;
		} else if ((s >> 40) % 2) {
			pheap_remove(&h, &reqs[i].hn); /* any node */
			reqs[i].queued = false;
		}
		int best = -1, n = 0;
		for (int j = 0; j < 64; j++)
			if (reqs[j].queued) {
				n++;
				if (best < 0 || key[j] < key[best])
					best = j;
			}
		ck_assert_int_eq(h.n, n);
		ck_assert_int_eq(h.root == NULL ? -1 : key[REQ_OF(h.root) - reqs],
		                 best < 0 ? -1 : key[best]);
	}
	struct pheap other;
	pheap_init(&other, key_before);
	pheap_meld(&other, &h);
	ck_assert_ptr_null(h.root);
	ck_assert_int_eq(h.n, 0);
	int last = -1;
	while (other.root != NULL) {
		int i = (int)(REQ_OF(other.root) - reqs);
		ck_assert_int_ge(key[i], last);
		last = key[i];
		pheap_remove(&other, other.root);
	}
}
END_TEST

static Suite *fairq_suite(void)
{
	Suite *s = suite_create("fairq");
	TCase *t = tcase_create("fairq");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, flows_take_turns_and_each_is_fifo);
	tcase_add_test(t, a_newcomer_waits_at_most_one_dispatch_behind_a_backlog);
	tcase_add_test(t, higher_priority_first_then_fair_inside);
	tcase_add_test(t, costs_weigh_the_share);
	tcase_add_test(t, oldest_and_newest_lowest);
	tcase_add_test(t, levels_move_with_their_requests);
	tcase_add_test(t, ahead_counts_higher_priorities_and_one_turn_per_flow);
	tcase_add_test(t, many_flows_grow_the_table);
	tcase_add_loop_test(t, pheap_matches_a_scan, 0, 4);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("fairq", fairq_suite)
