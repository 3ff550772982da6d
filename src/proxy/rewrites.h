/* SPDX-License-Identifier: Apache-2.0 */
/* rewrites — whether pacerd may still rewrite a provider's requests
 * (PROVIDERS.md §11, issue 28 item 3): pacerd adds
 * stream_options.include_usage to a streamed chat completion to meter it, where
 * the provider's profile accepts that (provider/profile.h, add_stream_usage).
 * An upstream that refuses the rewritten body (400 or 422) while it takes
 * the client's own bytes (the exchange resends them once) proves that the
 * rewrite broke a request that works direct: from then on, for the life of
 * the process, that provider's requests go as the client sent them.
 *
 * One small table, per provider name, read by the exchange on every request
 * it would rewrite and by /status. Pure: the time is passed in. */
#ifndef PACERD_REWRITES_H
#define PACERD_REWRITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Providers whose rewrites stopped, at most (a configuration has fewer). */
#define REWRITES_MAX 64

struct rewrite_stop {
	char provider[64];
	int status;        /* what the rewritten body got: 400 or 422 */
	int resent_status; /* what the client's own bytes got */
	char what[48];     /* the rewrite that was refused: "stream_options.include_usage" */
	long long at_ms;   /* wall clock, ms since the epoch */
};

struct rewrites {
	struct rewrite_stop stopped[REWRITES_MAX];
	size_t n;
};

void rewrites_init(struct rewrites *r);
/* May pacerd still rewrite provider's requests? */
bool rewrites_allowed(const struct rewrites *r, const char *provider);
/* provider refused a rewritten body with status while it took the client's
 * own bytes (resent_status): no more rewrites for it. True the first time
 * (the caller logs it once); false when it was stopped already, or the table
 * is full (then rewrites_allowed stays false for every provider not listed:
 * see the .c). */
bool rewrites_stop(struct rewrites *r, const char *provider, int status, int resent_status,
                   const char *what, long long wall_ms);
/* The stop of provider, or NULL. */
const struct rewrite_stop *rewrites_stopped(const struct rewrites *r, const char *provider);

#endif
