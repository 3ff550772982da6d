/* SPDX-License-Identifier: Apache-2.0 */
/* persist — what the lanes learned, kept across restarts (issue 30 item 1):
 * read back at start from STATE_DIR/lanes.state, written every
 * PERSIST_INTERVAL_S when something changed, and once more at shutdown. The
 * format is sched/state_file.h's; what a lane saves and takes back up is its
 * owner's (sched_lane_export, sched_saved_age, sched_lane_import).
 *
 * At start (persist_open, before the loop serves anything: blocking I/O is
 * fine there) the file is read, checked, decoded and aged by the time that
 * passed since it was written. The learned scopes go into the lanes' scope
 * table at once; the lanes wait in a table of their own, by identity
 * (provider, scope, model group), until a request makes a lane of that
 * identity, which takes its saved state up before its first dispatch
 * (lanes_set_restore). One log line says what came of it: state_restored,
 * state_ignored (a file that is not pacerd's, of another version, cut short or
 * corrupt: pacerd starts clean), or state_none (no state directory: nothing is
 * kept).
 *
 * Writing never blocks the loop on I/O. The loop takes a snapshot: a copy of
 * plain values (sched_lane_export for each lane, the saved lanes no request
 * has taken up yet, the scope table) into buffers kept from one snapshot to
 * the next, PERSIST_SLICE lanes a loop turn (registry_walk_slice), so that
 * no turn waits for ten thousand lanes; PERSIST_MAX_LANES at most, the most
 * recently active (with more lanes, a first walk notes their last activity
 * and the cutoff is its PERSIST_MAX_LANES-th latest). A thread of its own encodes it, compares the
 * records' SHA-256 with the last it wrote (the same: nothing is written), and
 * writes the file atomically (core/atomic_file.h). One write at a time: a
 * tick that finds the last one still running waits for the next. At shutdown
 * the thread is joined and the last snapshot written from the main thread. */
#ifndef PACERD_PERSIST_H
#define PACERD_PERSIST_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERSIST_INTERVAL_S 30
/* Lanes exported per loop turn while a snapshot is taken: well under a
 * millisecond of a turn with lanes as full as they get (bench_persist). */
#define PERSIST_SLICE 500
/* Lanes saved at most: the most recently active. Bounds what a snapshot
 * holds (about 1 KiB a lane, twice that with every budget), the writer's
 * work (about 0.1 ms a full lane) and the start's (0.15 ms), whatever
 * limits.max_lanes allows (a flood of one-off keys). */
#define PERSIST_MAX_LANES 10000
/* Lanes whose last activity is noted per loop turn when there are more. */
#define PERSIST_SLICE_NOTE 10000

struct lanes;
struct persist;

/* Starts keeping the lanes' state in dir (made, 0700, when missing): reads
 * what is there into ls, arms the periodic write. dir NULL or "": nothing is
 * kept (the state_none line). idle_ms: limits.idle_ttl_s, beyond which a
 * saved lane is not restored. NULL when out of memory (logged). */
struct persist *persist_open(struct event_base *base, struct lanes *ls, const char *dir,
                             const char *from, int64_t idle_ms);

/* Writes the state now, from the calling thread, once the periodic write (if
 * one runs) is over: at shutdown, after the drain. Logs what it wrote. */
void persist_save_now(struct persist *p);

/* What the last snapshot cost the loop: the microseconds it took in all, in
 * its longest loop turn, and how many lanes it held. */
void persist_last_snapshot(const struct persist *p, int64_t *us, int64_t *max_us, size_t *lanes);

/* Stops the timer, joins the thread (its write finishes), frees. */
void persist_free(struct persist *p);

#endif
