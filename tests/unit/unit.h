/* SPDX-License-Identifier: Apache-2.0 */
/* Shared main() for the check unit-test binaries: one binary per module,
 * each prints "unit NAME: N passed, N failed" and exits non-zero on failure. */
#ifndef PACERD_UNIT_H
#define PACERD_UNIT_H
#include <check.h>
#include <stdio.h>

#include "provider/profile.h"

#define UNIT_MAIN(name, suite_fn)                                                                  \
	int main(void)                                                                             \
	{                                                                                          \
		profile_install(); /* the built-in providers, as main() does */                    \
		SRunner *sr = srunner_create(suite_fn());                                          \
		srunner_set_fork_status(sr, CK_NOFORK);                                            \
		srunner_run_all(sr, CK_NORMAL);                                                    \
		int run = srunner_ntests_run(sr);                                                  \
		int failed = srunner_ntests_failed(sr);                                            \
		srunner_free(sr);                                                                  \
		printf("unit %s: %d passed, %d failed\n", name, run - failed, failed);             \
		return failed ? 1 : 0;                                                             \
	}
#endif
