/* SPDX-License-Identifier: Apache-2.0 */
/* state_file — the file what the lanes learned is kept in across restarts,
 * STATE_DIR/lanes.state (issue 30): its format, encoded and decoded in memory.
 * Pure: no I/O, no clock (proxy/persist.c reads and writes the file).
 *
 * Text, so that an operator can read it and a test can search it:
 *
 *     pacerd-state 1 sha256=<64 lower-case hex digits>\n
 *     {"written_ms":…,"lanes":N,"budgets":B,"scopes":S}\n
 *     {"lane":{"provider":"openai","scope":"3f9a1c0b7d2e0000","scope_name":…,
 *              "budgets":{"requests":{"rho":…,…}},…}}\n          N lines
 *     {"scope":{"key":"…","identity":"…","last_ms":…}}\n          S lines
 *
 * The first line names the format and its version, and carries the SHA-256
 * of everything after it: a file that does not start so is not pacerd's, one
 * of another version is not read, and one cut short or changed anywhere
 * (a disk that lost the end of it, a hand that edited it) fails the check,
 * whatever byte it is. Then one JSON object a line (jansson): the meta line,
 * each lane (struct sched_lane_saved, its budgets by name: every field of
 * struct learned but its parameters, which the lane's plan gives), each
 * learned scope (struct scope_saved). 64-bit ids are hex strings (a JSON
 * number holds 53 bits); numbers that are not finite are the strings "inf",
 * "-inf", "nan"; instants are wall-clock ms since the Unix epoch. Nothing in
 * it is a key: a lane is named by its scope, the first 64 bits of its key's
 * SHA-256 (registry_key_scope), and a scope entry by hashes. */
#ifndef PACERD_STATE_FILE_H
#define PACERD_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/learned.h"
#include "sched/sched.h"
#include "sched/scope.h"

#define STATE_FILE_NAME "lanes.state"
#define STATE_FILE_MAGIC "pacerd-state"
#define STATE_FILE_VERSION 1
/* A larger file is not read: 100,000 lanes (limits.max_lanes' default) with
 * every budget take about 250 MiB. */
#define STATE_FILE_MAX_BYTES ((size_t)512 << 20)
#define STATE_FILE_DIGEST 32 /* SHA-256 */

/* Everything one file holds. The budgets of lane i follow those of lanes
 * before it: sched_saved_budgets(&lanes[i]) of them. */
struct state_snapshot {
	int64_t written_ms; /* wall clock */
	struct sched_lane_saved *lanes;
	size_t n_lanes, cap_lanes;
	struct learned *budgets;
	size_t n_budgets, cap_budgets;
	struct scope_saved *scopes;
	size_t n_scopes, cap_scopes;
};

/* Empties s, keeping its memory for the next snapshot. */
void state_snapshot_clear(struct state_snapshot *s);
void state_snapshot_free(struct state_snapshot *s);
/* Room for `lanes` more lanes (with every budget each) and `scopes` more
 * scopes: false when memory ran out. */
bool state_snapshot_reserve(struct state_snapshot *s, size_t lanes, size_t scopes);

/* The whole file for s into a malloc'd *out of *len bytes (and a NUL beyond). records_digest
 * (may be NULL): the SHA-256 of the lanes and scopes alone, the same for the
 * same state whenever it is written (written_ms left out), so that the
 * writer can tell that nothing changed. 0, or -1 when memory ran out. */
int state_file_encode(const struct state_snapshot *s, char **out, size_t *len,
                      unsigned char records_digest[STATE_FILE_DIGEST]);

/* Why a file was not read. */
enum state_file_error {
	STATE_FILE_OK,
	STATE_FILE_E_FOREIGN, /* not a pacerd state file */
	STATE_FILE_E_VERSION, /* another version of the format */
	STATE_FILE_E_CORRUPT, /* cut short, changed, or malformed */
	STATE_FILE_E_MEMORY,  /* out of memory */
};

/* Reads buf[0, len) into *out (cleared first). STATE_FILE_OK, or why not,
 * with a line for the log in err (never the file's bytes beyond a few
 * printable ones of its first line); *out is then empty. */
enum state_file_error state_file_decode(const char *buf, size_t len, struct state_snapshot *out,
                                        char *err, size_t errlen);

/* "foreign", "version", "corrupt", "out_of_memory" (the log's reason). */
const char *state_file_error_name(enum state_file_error e);

#endif
