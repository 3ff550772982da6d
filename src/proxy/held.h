/* SPDX-License-Identifier: Apache-2.0 */
/* held — an upstream answer kept back whole instead of relayed: while the
 * retry verdict is pending (the exchange's XS_HELD), or a lane's kept quota
 * refusal replayed to another request. Its status line's reason, its header
 * fields as name\0value\0 pairs, then its body, in one evbuffer: the layout
 * lanes_quota copies and lanes_quota_answer gives back (lanes.h).
 *
 * Contract: held_start with the answer's head, then held_add for each piece
 * of its body until it is whole or held_add says it is over RETRY_BODY_CAP
 * (then the caller relays it as it is: an error body worth deciding on is
 * small); held_head and held_body read it back, any number of times, until
 * held_clear. The buffer is kept across uses (held_clear drains it). */
#ifndef PACERD_HELD_H
#define PACERD_HELD_H

#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>

#include "proxy/upstream.h"

struct held {
	struct evbuffer *buf; /* NULL until first used */
	size_t n;             /* header fields */
	size_t head_len;      /* their bytes at the start of buf */
	char reason[64];      /* the status line's reason phrase */
};

/* Makes sure buf exists (for lanes_quota_answer to fill). False when out of
 * memory. */
bool held_ready(struct held *h);
/* Starts holding an answer: its n header fields and reason (NULL: none).
 * False when out of memory. */
bool held_start(struct held *h, const struct up_header *uh, size_t n, const char *reason);
/* Adds a piece of the body; false (nothing added) when the body would pass
 * RETRY_BODY_CAP. */
bool held_add(struct held *h, const char *data, size_t len);
/* The header fields, at most max of them, into out (pointing into buf until
 * it changes); returns how many. */
size_t held_head(struct held *h, struct up_header *out, size_t max);
/* The body (pointing into buf until it changes); NULL and 0 when empty. */
const char *held_body(struct held *h, size_t *len);
/* Forgets the answer; keeps the buffer. */
void held_clear(struct held *h);
void held_free(struct held *h);

#endif
