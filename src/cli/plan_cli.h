/* SPDX-License-Identifier: Apache-2.0 */
/* plan_cli — `pacerd plan`, the pre-flight report (DESIGN §7): its command
 * line, the plan taken from a configuration file, and the exit status. */
#ifndef PACERD_PLAN_CLI_H
#define PACERD_PLAN_CLI_H

/* argv[0] is "plan", the rest its flags (pacerd plan --help lists them).
 * Prints the report on stdout, errors on stderr. Returns the exit status:
 * 0 the run fits its time budget (or none was given), 3 it does not, 2 bad
 * usage (the message names the flag), 1 an invalid configuration file or a
 * failed write. */
int plan_main(int argc, char **argv);

#endif
