/* SPDX-License-Identifier: Apache-2.0 */
/* state_dir and atomic_file: which state directory (configured, systemd's
 * $STATE_DIRECTORY, a writable /var/lib/pacerd, none) and the CA's per-user
 * fallback; whole files written atomically (replaced, never half written,
 * the temporary file gone after a failure), read back whole and bounded.
 * Files in a temporary directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/state_dir.h"
#include "unit.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/pacerd-unit-state-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(resolve_in_order)
{
	char out[256], varlib[128];
	snprintf(varlib, sizeof(varlib), "%s/varlib", dir);
	char *systemd[] = {"HOME=/home/u", "STATE_DIRECTORY=/var/lib/pacerd:/var/lib/other", NULL};
	char *plain[] = {"HOME=/home/u", NULL};
	/* configured first, whatever the rest says */
	ck_assert_int_eq(state_dir_resolve("/srv/pacerd", systemd, varlib, out, sizeof(out)),
	                 STATE_DIR_CONFIGURED);
	ck_assert_str_eq(out, "/srv/pacerd");
	/* systemd's, its first entry */
	ck_assert_int_eq(state_dir_resolve("", systemd, varlib, out, sizeof(out)),
	                 STATE_DIR_SYSTEMD);
	ck_assert_str_eq(out, "/var/lib/pacerd");
	/* /var/lib/pacerd only when it is there */
	ck_assert_int_eq(state_dir_resolve(NULL, plain, varlib, out, sizeof(out)), STATE_DIR_NONE);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(mkdir(varlib, 0700), 0);
	ck_assert_int_eq(state_dir_resolve(NULL, plain, varlib, out, sizeof(out)),
	                 STATE_DIR_VAR_LIB_OK);
	ck_assert_str_eq(out, varlib);
	ck_assert_str_eq(state_dir_from_name(STATE_DIR_VAR_LIB_OK), "/var/lib/pacerd");
	ck_assert_str_eq(state_dir_from_name(STATE_DIR_NONE), "none");
	/* and writable (root writes anywhere: only checked for others) */
	if (geteuid() != 0) {
		ck_assert_int_eq(chmod(varlib, 0500), 0);
		ck_assert_int_eq(state_dir_resolve(NULL, plain, varlib, out, sizeof(out)),
		                 STATE_DIR_NONE);
	}
	/* a name too long for out is none */
	char small[8];
	ck_assert_int_eq(state_dir_resolve("/a/long/path", NULL, NULL, small, sizeof(small)),
	                 STATE_DIR_NONE);
	ck_assert_str_eq(small, "");
}
END_TEST

START_TEST(user_fallback_for_the_ca)
{
	char out[256];
	char *xdg[] = {"HOME=/home/u", "XDG_STATE_HOME=/x/state", NULL};
	ck_assert_int_eq(state_dir_user(xdg, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/x/state/pacerd");
	char *home[] = {"HOME=/home/u", "XDG_STATE_HOME=relative", NULL};
	ck_assert_int_eq(state_dir_user(home, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/home/u/.local/state/pacerd");
	char *none[] = {"PATH=/bin", NULL};
	ck_assert_int_eq(state_dir_user(none, out, sizeof(out)), -1);
}
END_TEST

static char *slurp(const char *path, size_t *len)
{
	char *buf = NULL, err[256];
	ck_assert_int_eq(atomic_file_read(path, 1 << 20, &buf, len, err, sizeof(err)), 0);
	return buf;
}

START_TEST(write_replaces_whole)
{
	char err[256], path[128];
	snprintf(path, sizeof(path), "%s/f.state", dir);
	size_t len;
	char *buf = NULL;
	ck_assert_int_eq(atomic_file_read(path, 100, &buf, &len, err, sizeof(err)), 1);
	ck_assert_int_eq(atomic_file_write(dir, "f.state", "first", 5, 0600, err, sizeof(err)), 0);
	buf = slurp(path, &len);
	ck_assert_uint_eq(len, 5);
	ck_assert_str_eq(buf, "first");
	free(buf);
	ck_assert_int_eq(atomic_file_write(dir, "f.state", "second!", 7, 0600, err, sizeof(err)),
	                 0);
	buf = slurp(path, &len);
	ck_assert_str_eq(buf, "second!");
	free(buf);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	/* no temporary file left beside it */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
	ck_assert_int_eq(system(cmd), 0);
	/* bounded */
	ck_assert_int_eq(atomic_file_read(path, 6, &buf, &len, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "larger"));
}
END_TEST

START_TEST(write_fails_cleanly)
{
	char err[256], sub[128];
	snprintf(sub, sizeof(sub), "%s/missing", dir);
	ck_assert_int_eq(atomic_file_write(sub, "f", "x", 1, 0600, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "missing"));
	/* made with its parents, then written */
	char deep[160];
	snprintf(deep, sizeof(deep), "%s/a/b/c", dir);
	ck_assert_int_eq(atomic_file_mkdir(deep, err, sizeof(err)), 0);
	ck_assert_int_eq(atomic_file_mkdir(deep, err, sizeof(err)), 0);
	ck_assert_int_eq(atomic_file_write(deep, "f", "x", 1, 0600, err, sizeof(err)), 0);
	if (geteuid() != 0) {
		/* a directory that may not be written: the old file stays */
		ck_assert_int_eq(chmod(deep, 0500), 0);
		ck_assert_int_eq(atomic_file_write(deep, "f", "yy", 2, 0600, err, sizeof(err)), -1);
		char path[200];
		size_t len;
		snprintf(path, sizeof(path), "%s/f", deep);
		char *buf = slurp(path, &len);
		ck_assert_str_eq(buf, "x");
		free(buf);
	}
}
END_TEST

static Suite *state_dir_suite(void)
{
	Suite *s = suite_create("state_dir");
	TCase *tc = tcase_create("state_dir");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, resolve_in_order);
	tcase_add_test(tc, user_fallback_for_the_ca);
	tcase_add_test(tc, write_replaces_whole);
	tcase_add_test(tc, write_fails_cleanly);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("state_dir", state_dir_suite)
