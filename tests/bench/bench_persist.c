/* SPDX-License-Identifier: Apache-2.0 */
/* bench_persist — what keeping the lanes' state costs (issue 30 item 1), with
 * N lanes (default 10,000; argv[1] another), each as full as a lane gets: two
 * budgets learned from answers (requests, tokens), a closed concurrency
 * limit, a dispatch delay, 64 outputs for its percentile.
 *
 * The loop's share is the snapshot: what proxy/persist.c does on the event
 * loop (sched_lane_export of every lane into buffers kept from one snapshot
 * to the next), timed whole as at shutdown, cold (the first, buffers
 * allocated) and warm (the ones after), and as the periodic one takes it,
 * PERSIST_SLICE lanes a loop turn (turn_max_us: the longest turn; the best
 * of 9 runs). The rest runs on the writer thread or at start and is
 * timed for the record: encoding (state_file_encode), the atomic write with
 * its fsyncs (core/atomic_file.h, in $TMPDIR or /tmp), and at start the
 * read, decode and ageing.
 *
 *   make build/bench_persist && ./build/bench_persist [N]
 *
 * Prints one JSON object: {"lanes":N,"snapshot_cold_us":…,"snapshot_us":…,
 * "sliced_us":…,"slice":500,"turn_max_us":…,"encode_ms":…,"bytes":…,
 * "write_ms":…,"read_decode_ms":…,"age_ms":…}. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/config.h"
#include "provider/profile.h"
#include "proxy/persist.h"
#include "sched/registry.h"
#include "sched/sched.h"
#include "sched/state_file.h"

static double ms_since(long long t0)
{
	return (double)(clock_mono_ns() - t0) / 1e6;
}

/* A lane's life so far: 64 answers with both budgets' headers, their
 * usage, and one capacity refusal at the end. */
static void teach(struct sched_lane *lane, struct sched_item *items, int64_t t0)
{
	int64_t t = t0;
	for (int i = 0; i < 64; i++, t += 20) {
		struct sched_item *it = &items[i % 4];
		memset(it, 0, sizeof(*it));
		struct sched_request rq = {.cost_prompt = 40, .cost_output = 16};
		struct sched_item *evicted;
		if (sched_submit(lane, it, &rq, t, &evicted) != SCHED_OK)
			abort();
		if (sched_next(lane, (double)t) != it)
			abort();
		struct rlh_result h;
		memset(&h, 0, sizeof(h));
		h.budget[RLH_REQUESTS] = (struct rlh_budget){.has_remaining = true,
		                                             .has_reset = true,
		                                             .has_limit = true,
		                                             .remaining = 500 - i,
		                                             .reset_ms = 120 * i + 100,
		                                             .limit = 500};
		h.budget[RLH_TOKENS] = (struct rlh_budget){.has_remaining = true,
		                                           .has_reset = true,
		                                           .has_limit = true,
		                                           .remaining = 30000 - 56 * i,
		                                           .reset_ms = 112 * i + 100,
		                                           .limit = 30000};
		sched_observe(lane, it, &h, false, t + 10);
		struct cost_request r = {.input_estimate = 40, .max_output = -1};
		struct cost_usage u = {.charged_input = 40,
		                       .cache_creation = -1,
		                       .cache_read = -1,
		                       .output = 10 + i % 50};
		sched_cost_observe(lane, &r, &u, t);
		sched_complete(lane, it, i == 63 ? SCHED_CAPACITY : SCHED_SUCCESS, t + 10);
	}
}

struct collect {
	struct state_snapshot *s;
	int64_t now, wall;
};

static void export_lane(struct sched_lane *lane, void *arg)
{
	struct collect *c = arg;
	if (!state_snapshot_reserve(c->s, 1, 0))
		abort();
	c->s->n_budgets += sched_lane_export(lane, c->now, c->wall, &c->s->lanes[c->s->n_lanes++],
	                                     &c->s->budgets[c->s->n_budgets]);
}

/* What persist.c's tick does on the loop, PERSIST_SLICE lanes a turn: the
 * longest turn's µs into *max_us; returns the µs in all. */
static double sliced(struct registry *reg, struct state_snapshot *s, int64_t now, double *max_us)
{
	struct registry_walk w;
	struct collect c = {s, now, now + 1795000000000};
	state_snapshot_clear(s);
	registry_walk_start(reg, &w);
	double all = 0;
	*max_us = 0;
	enum registry_walk_state st;
	do {
		long long t0 = clock_mono_ns();
		st = registry_walk_slice(reg, &w, PERSIST_SLICE, export_lane, &c);
		double us = (double)(clock_mono_ns() - t0) / 1e3;
		all += us;
		if (us > *max_us)
			*max_us = us;
	} while (st == REGISTRY_WALK_MORE);
	return all;
}

/* The whole snapshot at once (at shutdown); returns its µs. */
static double snapshot(struct registry *reg, struct state_snapshot *s, int64_t now)
{
	long long t0 = clock_mono_ns();
	state_snapshot_clear(s);
	struct collect c = {s, now, now + 1795000000000};
	registry_foreach(reg, export_lane, &c);
	return (double)(clock_mono_ns() - t0) / 1e3;
}

int main(int argc, char **argv)
{
	profile_install();
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 10000;
	if (n < 1)
		n = 10000;
	char err[512];
	struct config *cfg = config_load(NULL, NULL, err, sizeof(err));
	if (cfg == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	cfg->limits.max_lanes = (unsigned)n + 1;
	const struct provider_conf *prov = config_provider(cfg, "openai");
	struct registry *reg = registry_new(1);
	struct sched_item items[4];
	for (int i = 0; i < n; i++) {
		char key[65];
		snprintf(key, sizeof(key), "%016x%048d", (unsigned)i * 2654435761u, i);
		struct sched_lane *lane = registry_key_lane(reg, cfg, prov, key, 1000, NULL, NULL);
		if (lane == NULL)
			abort();
		teach(lane, items, 1000);
	}
	struct state_snapshot s = {0};
	double cold = snapshot(reg, &s, 5000), warm = 1e30, turn_max = 1e30, sliced_all = 0;
	for (int r = 0; r < 9; r++) {
		double us = snapshot(reg, &s, 5000 + r), mx;
		if (us < warm)
			warm = us;
		us = sliced(reg, &s, 5000 + r, &mx);
		if (mx < turn_max) {
			turn_max = mx;
			sliced_all = us;
		}
	}
	long long t0 = clock_mono_ns();
	char *buf;
	size_t len;
	if (state_file_encode(&s, &buf, &len, NULL) != 0)
		abort();
	double encode_ms = ms_since(t0);
	const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/pacerd-bench-persist-%ld", tmp, (long)getpid());
	if (atomic_file_mkdir(dir, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	t0 = clock_mono_ns();
	if (atomic_file_write(dir, STATE_FILE_NAME, buf, len, 0600, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	double write_ms = ms_since(t0);
	free(buf);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, STATE_FILE_NAME);
	t0 = clock_mono_ns();
	size_t rlen;
	if (atomic_file_read(path, STATE_FILE_MAX_BYTES, &buf, &rlen, err, sizeof(err)) != 0)
		abort();
	struct state_snapshot back = {0};
	if (state_file_decode(buf, rlen, &back, err, sizeof(err)) != STATE_FILE_OK) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	double read_ms = ms_since(t0);
	t0 = clock_mono_ns();
	size_t k = 0, kept = 0;
	for (size_t i = 0; i < back.n_lanes; i++) {
		unsigned nb = sched_saved_budgets(&back.lanes[i]);
		kept += sched_saved_age(&back.lanes[i], &back.budgets[k], 1795000010000, 900000);
		k += nb;
	}
	double age_ms = ms_since(t0);
	free(buf);
	unlink(path);
	rmdir(dir);
	printf("{\"lanes\":%d,\"budgets\":%zu,\"snapshot_cold_us\":%.0f,\"snapshot_us\":%.0f,"
	       "\"sliced_us\":%.0f,\"slice\":%d,\"turn_max_us\":%.0f,"
	       "\"snapshot_bytes\":%zu,\"encode_ms\":%.1f,\"bytes\":%zu,\"write_ms\":%.1f,"
	       "\"read_decode_ms\":%.1f,\"age_ms\":%.2f,\"kept\":%zu}\n",
	       n, s.n_budgets, cold, warm, sliced_all, PERSIST_SLICE, turn_max,
	       s.n_lanes * sizeof(*s.lanes) + s.n_budgets * sizeof(*s.budgets), encode_ms, len,
	       write_ms, read_ms, age_ms, kept);
	state_snapshot_free(&s);
	state_snapshot_free(&back);
	registry_free(reg, NULL, NULL);
	config_free(cfg);
	return 0;
}
