/* SPDX-License-Identifier: Apache-2.0 */
/* xstate — the states of one request's life in the exchange (exchange.c's
 * opening comment draws them) and the transitions allowed between them.
 * The exchange asserts every change against this table, in every build: a
 * transition it does not allow would leak a slot or answer a client twice.
 * Pure, and tested alone (tests/unit/proxy/test_xstate.c). */
#ifndef PACERD_XSTATE_H
#define PACERD_XSTATE_H

#include <stdbool.h>

enum xstate {
	XS_NEW,        /* exchange_start: building the upstream request, finding the lane */
	XS_QUEUED,     /* in its lane, waiting for dispatch or a refusal */
	XS_UPSTREAM,   /* a transfer runs; no answer yet */
	XS_HELD,       /* an answer that may be retried is held back until it is whole */
	XS_STREAMING,  /* the client's response has begun: the answer is final */
	XS_RETRY_WAIT, /* a retry waits in the lane without a slot */
	XS_DONE,       /* answered, or the client left */
	XS_N
};

/* Whether the exchange may go from `from` to `to`. */
bool xstate_allowed(enum xstate from, enum xstate to);
const char *xstate_name(enum xstate s);

#endif
