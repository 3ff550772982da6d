/* SPDX-License-Identifier: Apache-2.0 */
/* atomic_file — whole files, written atomically. See atomic_file.h. */
#include "core/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int atomic_file_write(const char *dir, const char *name, const void *data, size_t len, mode_t mode,
                      char *err, size_t errlen)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	/* A name of its own (mkostemp): processes sharing the directory (sidecars
	 * on one volume, all pid 1) never write into each other's. */
	int m = snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path) || m < 0 || (size_t)m >= sizeof(tmp)) {
		snprintf(err, errlen, "%s/%s: path too long", dir, name);
		return -1;
	}
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd == -1) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	const char *what = "write";
	int rc = fchmod(fd, mode);
	if (rc == 0)
		rc = write_all(fd, data, len);
	if (rc == 0 && (what = "fsync", fsync(fd) != 0))
		rc = -1;
	int saved = errno;
	if (close(fd) != 0 && rc == 0) {
		what = "close";
		saved = errno;
		rc = -1;
	}
	if (rc == 0 && rename(tmp, path) != 0) {
		what = "rename";
		saved = errno;
		rc = -1;
	}
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s: %s", tmp, what, strerror(saved ? saved : EIO));
		unlink(tmp);
		return -1;
	}
	/* The rename is in the directory: flushed with it. */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd == -1 || fsync(dfd) != 0) {
		snprintf(err, errlen, "%s: fsync: %s", dir, strerror(errno));
		if (dfd != -1)
			close(dfd);
		return -1;
	}
	close(dfd);
	return 0;
}

int atomic_file_read(const char *path, size_t max, char **out, size_t *len, char *err,
                     size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1) {
		if (errno == ENOENT)
			return 1;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		snprintf(err, errlen, "%s: %s", path,
		         !S_ISREG(st.st_mode) ? "not a regular file" : "larger than pacerd reads");
		close(fd);
		return -1;
	}
	size_t cap = (size_t)st.st_size, got = 0;
	char *buf = malloc(cap + 1);
	while (buf != NULL) {
		ssize_t n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == cap)
			break;
	}
	close(fd);
	if (buf == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

int atomic_file_mkdir(const char *dir, char *err, size_t errlen)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p)) {
		snprintf(err, errlen, "%s: path too long", dir);
		return -1;
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "%s: %s", p, strerror(errno));
			return -1;
		}
		*s = '/';
	}
	if (mkdir(p, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		return -1;
	}
	return 0;
}
