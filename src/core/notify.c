/* SPDX-License-Identifier: Apache-2.0 */
/* notify — sd_notify without libsystemd. See notify.h. */
#include "core/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/clock.h"

static int notify_fd = -1;
static struct sockaddr_un notify_addr;
static socklen_t notify_len;

int notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (path == NULL || path[0] == '\0')
		return 0;
	size_t n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(notify_addr.sun_path))
		return -1;
	memset(&notify_addr, 0, sizeof(notify_addr));
	notify_addr.sun_family = AF_UNIX;
	memcpy(notify_addr.sun_path, path, n);
	if (path[0] == '@')
		notify_addr.sun_path[0] = '\0'; /* abstract namespace */
	notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	return notify_fd == -1 ? -1 : 0;
}

void notify_close(void)
{
	if (notify_fd != -1)
		close(notify_fd);
	notify_fd = -1;
}

void notify_send(const char *msg)
{
	if (notify_fd == -1)
		return;
	/* Best effort: a full or missing socket must never stall the loop. */
	ssize_t r;
	do {
		r = sendto(notify_fd, msg, strlen(msg), MSG_NOSIGNAL,
		           (const struct sockaddr *)&notify_addr, notify_len);
	} while (r == -1 && errno == EINTR);
}

void notify_ready(void)
{
	notify_send("READY=1\nSTATUS=accepting requests");
}

void notify_reloading(void)
{
	char msg[96];
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
	         (unsigned long long)(clock_mono_ns() / 1000));
	notify_send(msg);
}

void notify_stopping(void)
{
	notify_send("STOPPING=1\nSTATUS=draining requests in flight");
}

uint64_t notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	if (usec == NULL)
		return 0;
	if (pid != NULL) {
		char *end;
		long p = strtol(pid, &end, 10);
		if (*end != '\0' || p != (long)getpid())
			return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(usec, &end, 10);
	if (errno != 0 || end == usec || *end != '\0')
		return 0;
	return (uint64_t)v;
}
