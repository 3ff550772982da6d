/* SPDX-License-Identifier: Apache-2.0 */
/* xstate — the allowed transitions of a request's life (xstate.h). */
#include "proxy/xstate.h"

#define XS_BIT(s) (1u << (s))

/* NEW ──> QUEUED ──> UPSTREAM ──> STREAMING ──> DONE
 *          │  ^         │  │         ^
 *          │  │         │  └─> HELD ─┤
 *          │  │         v        │   │
 *          │  └─── RETRY_WAIT <──┘   │
 *          └─────────────┴───────────┘  (a replayed quota answer, or the held
 *                                         answer at a retry's deadline)
 * and every state but DONE may end (DONE): an answer of pacerd's own, or the
 * client leaving. */
static const unsigned next[XS_N] = {
    [XS_NEW] = XS_BIT(XS_QUEUED) | XS_BIT(XS_DONE),
    [XS_QUEUED] = XS_BIT(XS_UPSTREAM) | XS_BIT(XS_STREAMING) | XS_BIT(XS_DONE),
    [XS_UPSTREAM] =
        XS_BIT(XS_HELD) | XS_BIT(XS_STREAMING) | XS_BIT(XS_RETRY_WAIT) | XS_BIT(XS_DONE),
    [XS_HELD] = XS_BIT(XS_STREAMING) | XS_BIT(XS_RETRY_WAIT) | XS_BIT(XS_DONE),
    [XS_STREAMING] = XS_BIT(XS_DONE),
    [XS_RETRY_WAIT] = XS_BIT(XS_UPSTREAM) | XS_BIT(XS_STREAMING) | XS_BIT(XS_DONE),
    [XS_DONE] = 0,
};

bool xstate_allowed(enum xstate from, enum xstate to)
{
	if ((unsigned)from >= XS_N || (unsigned)to >= XS_N)
		return false;
	return (next[from] & XS_BIT(to)) != 0;
}

const char *xstate_name(enum xstate s)
{
	static const char *const names[XS_N] = {"new",       "queued",     "upstream", "held",
	                                        "streaming", "retry_wait", "done"};
	return (unsigned)s < XS_N ? names[s] : "?";
}
