/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: the YAML configuration loader. A valid file must load and free
 * cleanly; an invalid one must give exactly one line of error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "provider/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	if (path[0] == '\0') {
		profile_install(); /* the built-in providers, as main() does */
		snprintf(path, sizeof(path), "/tmp/pacerd-fuzz-config-%d.yaml", (int)getpid());
	}
	FILE *f = fopen(path, "wb");
	if (f == NULL)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);

	char err[1024];
	err[0] = '\0';
	struct config *cfg = config_load(path, NULL, err, sizeof(err));
	if (cfg != NULL)
		config_free(cfg);
	else if (err[0] == '\0' || strchr(err, '\n') != NULL)
		abort(); /* every failure says why, on one line */
	return 0;
}
