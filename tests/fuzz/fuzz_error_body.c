/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: the upstream error-body parse (error_body) and the retry verdict
 * that reads it. What one parse says must hold whatever the bytes: a delay, a
 * limit and a window are never negative, a budget is one of the kinds or
 * none, and the same bytes give the same answer twice (the parse reads only
 * what it is given). A verdict on a held answer reads the body the same way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider/error_body.h"
#include "sched/retry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_str(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy without a NUL after it: the parse must stop at size. */
	char *body = malloc(size ? size : 1);
	if (body == NULL)
		return 0;
	memcpy(body, data, size);

	struct error_body a, b;
	error_body_parse(body, size, &a);
	error_body_parse(body, size, &b);
	const struct error_hints *h = &a.hints;
	if ((h->has_delay && h->delay_ms < 0) || (!h->has_delay && h->delay_ms != 0) ||
	    (h->has_limit && h->limit < 0) || (!h->has_limit && h->limit != 0) ||
	    h->budget > RLH_N_BUDGETS ||
	    !(h->window_s == 0 || h->window_s == 1 || h->window_s == 60 || h->window_s == 3600 ||
	      h->window_s == 86400))
		abort();
	if (!same_str(a.facts.money, b.facts.money) ||
	    !same_str(a.facts.capacity, b.facts.capacity) ||
	    a.facts.too_large != b.facts.too_large || a.facts.daily_cap != b.facts.daily_cap ||
	    !same_str(a.facts.in_flight, b.facts.in_flight) ||
	    !same_str(a.facts.overload, b.facts.overload) ||
	    !same_str(a.facts.tier, b.facts.tier) ||
	    memcmp(&a.hints, &b.hints, sizeof a.hints) != 0)
		abort();

	/* The verdict on the same body held back, for a few statuses. */
	static const int statuses[] = {400, 402, 429, 498, 500, 503, 529};
	struct plan_conf plan;
	memset(&plan, 0, sizeof plan);
	plan.retry.max_attempts = 3;
	plan.retry.initial_delay_ms = 1000;
	plan.retry.max_delay_ms = 60000;
	plan.retry.deadline_s = 300;
	for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
		struct retry_input in = {.status = statuses[i],
		                         .body = body,
		                         .body_len = size,
		                         .held = true,
		                         .attempt = 1,
		                         .now_ms = 1000,
		                         .deadline_ms = 1000 + 300000,
		                         .plan = &plan,
		                         .rnd = 0.5};
		struct retry_verdict v = retry_verdict(&in);
		const char *why = NULL;
		enum retry_class c =
		    retry_classify(statuses[i], RETRY_TRANSPORT_NONE, NULL, &a.facts, &why, NULL);
		if (v.cls != c || !same_str(v.reason, why) || v.delay_ms < 0 || v.hold_ms < 0 ||
		    (v.action == RETRY_ACTION_RETRY && v.delay_ms >= 300000))
			abort();
		/* the taxonomy: whose shortage only for a capacity class; a tier's
		 * holds nothing; a budget told only by the account's refusal */
		if ((v.outcome == RETRY_LANE_OVERLOAD || v.outcome == RETRY_LANE_TIER) &&
		    v.cls != RETRY_CAPACITY)
			abort();
		if (v.outcome == RETRY_LANE_TIER && v.hold_ms != 0)
			abort();
		if (v.told.limit != 0 && (v.outcome != RETRY_LANE_CAPACITY || v.told.limit < 0 ||
		                          v.told.window_ms <= 0 || v.told.window_ms >= 86400000 ||
		                          v.told.budget >= RLH_N_BUDGETS))
			abort();
	}
	free(body);
	return 0;
}
