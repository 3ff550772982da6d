/* SPDX-License-Identifier: Apache-2.0 */
/* notify — systemd's service notification protocol (sd_notify(3)), spoken
 * directly: one datagram per state change on the AF_UNIX socket named by
 * $NOTIFY_SOCKET. Without that variable every call does nothing, so pacerd
 * runs the same outside systemd. */
#ifndef PACERD_NOTIFY_H
#define PACERD_NOTIFY_H

#include <stdint.h>

/* Reads $NOTIFY_SOCKET ("/path" or "@abstract"); 0 when set up or absent,
 * -1 when the variable is malformed (then notifications stay off). */
int notify_init(void);
void notify_close(void);

/* Sends one message such as "READY=1" or "STATUS=draining". */
void notify_send(const char *msg);
void notify_ready(void);
/* RELOADING=1 with MONOTONIC_USEC, as systemd ≥ 253 wants; READY=1 after. */
void notify_reloading(void);
void notify_stopping(void);

/* The watchdog interval in µs from $WATCHDOG_USEC (when $WATCHDOG_PID is
 * unset or this process), else 0. Send "WATCHDOG=1" at half of it. */
uint64_t notify_watchdog_usec(void);

#endif
