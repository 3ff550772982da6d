/* SPDX-License-Identifier: Apache-2.0 */
/* atomic_file — a whole file written so that a reader finds the old one or
 * the new one, never a part of either: written to a temporary file in the
 * same directory, flushed to the disk (fsync), renamed over the old one, and
 * the directory flushed too, so that the rename itself survives a power cut.
 * Blocking I/O: at start, at shutdown, or from a thread of its own
 * (proxy/persist.c), never on the event loop. */
#ifndef PACERD_ATOMIC_FILE_H
#define PACERD_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* dir/name := data[0, len), mode `mode` (whatever the umask). The directory
 * must exist. 0, or -1 with err set (nothing replaced; the temporary file
 * removed). */
int atomic_file_write(const char *dir, const char *name, const void *data, size_t len, mode_t mode,
                      char *err, size_t errlen);

/* Reads path whole into a malloc'd *out of *len bytes (NUL-terminated
 * beyond them). 0; 1 when there is no such file; -1 with err set (larger
 * than max bytes too). */
int atomic_file_read(const char *path, size_t max, char **out, size_t *len, char *err,
                     size_t errlen);

/* Makes dir and the parents it lacks (mode 0700: what pacerd keeps is its
 * own). 0 when it exists afterwards, -1 with err set. */
int atomic_file_mkdir(const char *dir, char *err, size_t errlen);

#endif
