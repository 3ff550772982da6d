/* SPDX-License-Identifier: Apache-2.0 */
/* state_dir — the one directory where pacerd keeps what it keeps across
 * restarts: the CA it makes for CONNECT tunnels (ca.pem, ca.key) and what its
 * lanes learned (lanes.state). Read at start only.
 *
 * Which directory, the first that applies:
 *  1. state_dir in the configuration (an absolute path);
 *  2. $STATE_DIRECTORY, what systemd's StateDirectory=pacerd sets (its first
 *     entry when it names several, joined with ':');
 *  3. /var/lib/pacerd, when it is a directory this process may write (a
 *     package or an operator made it);
 *  4. none: nothing learned is kept. A pacerd started by hand for a test or a
 *     benchmark then never picks up what another run learned.
 * The CA alone has a per-user fallback with none (state_dir_user): it must be
 * the same at every start for the clients that trust it, and a CONNECT client
 * started by hand reads it from ~/.local/state/pacerd (docs/https-proxy.md). */
#ifndef PACERD_STATE_DIR_H
#define PACERD_STATE_DIR_H

#include <stddef.h>

#define STATE_DIR_VAR_LIB "/var/lib/pacerd"

enum state_dir_from {
	STATE_DIR_NONE,       /* none: nothing is kept */
	STATE_DIR_CONFIGURED, /* state_dir */
	STATE_DIR_SYSTEMD,    /* $STATE_DIRECTORY */
	STATE_DIR_VAR_LIB_OK, /* var_lib, writable */
};

/* The state directory into out (len bytes; "" for none) and where it came
 * from. configured: the configuration's state_dir ("" or NULL: unset). env:
 * like environ. var_lib: the directory of rule 3 (STATE_DIR_VAR_LIB; tests
 * pass their own), NULL to skip it. A name that does not fit in out is none. */
enum state_dir_from state_dir_resolve(const char *configured, char *const *env, const char *var_lib,
                                      char *out, size_t len);

/* "state_dir", "STATE_DIRECTORY", "/var/lib/pacerd" or "none", for the log. */
const char *state_dir_from_name(enum state_dir_from from);

/* The CA's directory when there is no state directory: $XDG_STATE_HOME/pacerd,
 * else $HOME/.local/state/pacerd (absolute values only). -1 when neither can
 * be named. */
int state_dir_user(char *const *env, char *out, size_t len);

#endif
