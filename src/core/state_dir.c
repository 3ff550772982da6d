/* SPDX-License-Identifier: Apache-2.0 */
/* state_dir — where pacerd keeps what it keeps. See state_dir.h. */
#include "core/state_dir.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

static int put(char *out, size_t len, int n)
{
	if (n < 0 || (size_t)n >= len) {
		if (len > 0)
			out[0] = '\0';
		return -1;
	}
	return 0;
}

enum state_dir_from state_dir_resolve(const char *configured, char *const *env, const char *var_lib,
                                      char *out, size_t len)
{
	const char *v;
	struct stat st;
	if (configured != NULL && configured[0] != '\0')
		return put(out, len, snprintf(out, len, "%s", configured)) == 0
		           ? STATE_DIR_CONFIGURED
		           : STATE_DIR_NONE;
	if ((v = env_get(env, "STATE_DIRECTORY")) != NULL && v[0] != '\0')
		return put(out, len, snprintf(out, len, "%.*s", (int)strcspn(v, ":"), v)) == 0
		           ? STATE_DIR_SYSTEMD
		           : STATE_DIR_NONE;
	if (var_lib != NULL && stat(var_lib, &st) == 0 && S_ISDIR(st.st_mode) &&
	    access(var_lib, W_OK | X_OK) == 0)
		return put(out, len, snprintf(out, len, "%s", var_lib)) == 0 ? STATE_DIR_VAR_LIB_OK
		                                                             : STATE_DIR_NONE;
	if (len > 0)
		out[0] = '\0';
	return STATE_DIR_NONE;
}

const char *state_dir_from_name(enum state_dir_from from)
{
	switch (from) {
	case STATE_DIR_CONFIGURED:
		return "state_dir";
	case STATE_DIR_SYSTEMD:
		return "STATE_DIRECTORY";
	case STATE_DIR_VAR_LIB_OK:
		return STATE_DIR_VAR_LIB;
	case STATE_DIR_NONE:
		break;
	}
	return "none";
}

int state_dir_user(char *const *env, char *out, size_t len)
{
	const char *v;
	if ((v = env_get(env, "XDG_STATE_HOME")) != NULL && v[0] == '/')
		return put(out, len, snprintf(out, len, "%s/pacerd", v));
	if ((v = env_get(env, "HOME")) != NULL && v[0] == '/')
		return put(out, len, snprintf(out, len, "%s/.local/state/pacerd", v));
	if (len > 0)
		out[0] = '\0';
	return -1;
}
