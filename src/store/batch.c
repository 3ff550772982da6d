/* SPDX-License-Identifier: Apache-2.0 */
/* batch — permits per decision on a busy lane; see batch.h. */
#include "store/batch.h"

#include <math.h>

/* Round trips' worth of requests a batch covers: enough that a lane at a
 * steady rate has its next batch asked before the last one is used. */
#define BATCH_RTTS 4.0

unsigned batch_size(unsigned room, unsigned max_k, double interval_ms, double min_burst,
                    double rtt_ms)
{
	if (room <= 1 || max_k <= 1 || !isfinite(interval_ms) || interval_ms <= 0 ||
	    !(min_burst >= 4) || !isfinite(rtt_ms) || rtt_ms <= 0)
		return 1;
	double k = ceil(BATCH_RTTS * rtt_ms / interval_ms);
	/* Half the burst at most: a batch waits until its k permits fit at
	 * once, and a gate whose tolerance a waiting batch fills whole slips
	 * behind its schedule while other replicas' asks interleave (three
	 * replicas at 1000 req/s, burst 20, batches of up to 20: 93.7 % of the
	 * rate; up to 10: 101 %). */
	if (k > floor(min_burst / 2))
		k = floor(min_burst / 2);
	if (k > (double)room)
		k = (double)room;
	if (k > (double)max_k)
		k = (double)max_k;
	return k >= 1 ? (unsigned)k : 1;
}
