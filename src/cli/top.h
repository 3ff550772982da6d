/* SPDX-License-Identifier: Apache-2.0 */
/* top — `pacerd top`, a live view of a running pacerd's admin /status: the
 * command line, the polls (libcurl easy: a short-lived CLI, not the daemon's
 * loop) and the terminal (termios raw mode, ANSI escapes, the alternate
 * screen). The numbers and lines come from top_model. */
#ifndef PACERD_TOP_H
#define PACERD_TOP_H

/* argv[0] is "top", the rest its flags (pacerd top --help lists them). On a
 * terminal: the full screen until q, SIGINT or SIGTERM; otherwise one summary
 * line per poll on stdout. Returns the exit status: 0, 1 the admin refused
 * the token (401/403) or the last poll failed, 2 bad usage. The terminal is
 * restored on every path out. */
int top_main(int argc, char **argv);

#endif
