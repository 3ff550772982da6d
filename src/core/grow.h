/* SPDX-License-Identifier: Apache-2.0 */
/* grow — room in a byte buffer that doubles as it grows: request heads and
 * bodies, a connection's pending output, header arenas, partial SSE lines.
 * One growth rule for all of them, so a change to it (a cap, a different
 * factor) is made once. */
#ifndef PACERD_GROW_H
#define PACERD_GROW_H

#include <stdbool.h>
#include <stddef.h>

/* Makes *buf hold at least `need` bytes: nothing when *cap already does, else
 * *cap (or `first` when it is 0) doubled until it does, and realloc. False when
 * out of memory; *buf and *cap are then unchanged. */
bool grow_bytes(char **buf, size_t *cap, size_t need, size_t first);

/* As grow_bytes(), but the room never goes past `most` (a limit known ahead,
 * such as a body's declared length): the doubling stops there. `need` above
 * `most` still gets `need`. */
bool grow_bytes_upto(char **buf, size_t *cap, size_t need, size_t first, size_t most);

#endif
