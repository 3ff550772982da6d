/* SPDX-License-Identifier: Apache-2.0 */
/* delay_bound — a high quantile of recent delays; see delay_bound.h. */
#include "store/delay_bound.h"

#include <math.h>

void delay_bound_add(struct delay_bound *b, double ms, int64_t now_ms)
{
	if (!isfinite(ms) || ms < 0)
		return;
	b->ms[b->next] = ms;
	b->at_ms[b->next] = now_ms;
	b->next = (b->next + 1) % DELAY_BOUND_N;
	if (b->n < DELAY_BOUND_N)
		b->n++;
}

double delay_bound_ms(const struct delay_bound *b, int64_t now_ms, double empty_ms)
{
	double first = -1, second = -1;
	unsigned young = 0;
	for (unsigned i = 0; i < b->n; i++) {
		if (now_ms - b->at_ms[i] > DELAY_BOUND_AGE_MS)
			continue;
		young++;
		double v = b->ms[i];
		if (v > first) {
			second = first;
			first = v;
		} else if (v > second) {
			second = v;
		}
	}
	if (young == 0)
		return empty_ms;
	return young < DELAY_BOUND_FORGIVE ? first : second;
}
