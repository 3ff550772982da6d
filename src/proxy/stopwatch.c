/* SPDX-License-Identifier: Apache-2.0 */
/* stopwatch — when an answer's tokens came. See stopwatch.h. */
#include "proxy/stopwatch.h"

#include <string.h>

static const char DATA[] = "data:";
#define DATA_LEN (sizeof(DATA) - 1)

void stopwatch_start(struct stopwatch *w, bool on, bool sse, int64_t start_ms)
{
	memset(w, 0, sizeof(*w));
	w->on = on;
	w->sse = on && sse;
	w->line_start = true;
	w->start_ms = start_ms;
}

/* Data lines that begin in data[0..n), the one a previous piece left
 * half-matched included. */
static unsigned count_data_lines(struct stopwatch *w, const char *data, size_t n)
{
	unsigned found = 0;
	size_t i = 0;
	while (i < n) {
		if (w->line_start || w->match > 0) {
			w->line_start = false;
			while (i < n && w->match < DATA_LEN && data[i] == DATA[w->match]) {
				w->match++;
				i++;
			}
			if (w->match == DATA_LEN) {
				found++;
				w->match = 0;
			} else if (i == n) {
				/* The piece ended inside the prefix: go on with the next
				 * one (match 0 here means the line began at the end). */
				if (w->match == 0)
					w->line_start = true;
				break;
			} else {
				w->match = 0; /* another kind of line */
			}
		}
		const char *nl = memchr(data + i, '\n', n - i);
		if (nl == NULL)
			break;
		i = (size_t)(nl - data) + 1;
		w->line_start = true;
	}
	return found;
}

bool stopwatch_feed(struct stopwatch *w, const char *data, size_t n, int64_t now_ms)
{
	if (!w->sse || n == 0)
		return false;
	unsigned k = count_data_lines(w, data, n);
	if (k == 0)
		return false;
	bool first = w->events == 0;
	if (first) {
		w->first_ms = now_ms;
		w->first_events = k;
	} else if (now_ms - w->last_ms > w->max_gap_ms) {
		w->max_gap_ms = now_ms - w->last_ms;
	}
	w->last_ms = now_ms;
	w->events += k;
	return first;
}

double stopwatch_first_ms(const struct stopwatch *w)
{
	return w->events > 0 ? (double)(w->first_ms - w->start_ms) : -1;
}

void stopwatch_times(const struct stopwatch *w, struct stopwatch_times *out)
{
	memset(out, 0, sizeof(*out));
	out->first_ms = stopwatch_first_ms(w);
	if (w->events == 0)
		return;
	out->stream_ms = (double)(w->last_ms - w->first_ms);
	out->max_gap_ms = (double)w->max_gap_ms;
	out->events = w->events - w->first_events;
}
