/* SPDX-License-Identifier: Apache-2.0 */
/* intake — the request's header fields pacerd reads, found in one pass over
 * the header list when the request arrives (nginx's headers_in idea), and
 * read from then on by the server's intake (routing, the key, the agent,
 * the priority) and by the exchange (the upstream request, the identity,
 * the deadline). No lookup scans the list again.
 *
 * The fields read are a list of known names: HTTP's and pacerd's own (enum
 * intake_field), then every name a provider's profile reads on a request
 * (provider/profile.h: the key headers, the request identity headers), taken
 * from the profiles when the list is first used, so that which headers a
 * provider uses is said in src/provider/ only; plus the configured
 * agents.header. A caller holding a name asks intake_header, which finds a
 * known name's slot; a name outside the list is still found (by a scan of
 * the request's fields), so that a new name costs speed, never correctness.
 *
 * The values point into the request (hreq): valid while it is. */
#ifndef PACERD_INTAKE_H
#define PACERD_INTAKE_H

#include <stdbool.h>
#include <stddef.h>

#include "http/httpd.h"

/* The known names' slots: these first, then the profiles' names. */
enum intake_field {
	IF_HOST,
	IF_CONNECTION,
	IF_ACCEPT,
	IF_CONTENT_TYPE,
	IF_X_PACER_PRIORITY,
	IF_X_PACER_TIMEOUT_MS,
	/* the time limit the official OpenAI and Anthropic SDKs send */
	IF_X_STAINLESS_TIMEOUT,
	/* a client's deadline in ms (openai-python#3277) */
	IF_REQUEST_TIMEOUT_MS,
	IF_FIXED
};

/* Known names at most, and the longest one (a longer profile name is not
 * listed: it is found by a scan). */
#define INTAKE_FIELDS_MAX 24
#define INTAKE_NAME_MAX 40

struct intake_headers {
	/* The first field of each known name (its value, NUL-terminated; ""
	 * when empty), or NULL when the request has none; by slot. */
	const char *value[INTAKE_FIELDS_MAX];
	const char *agent; /* the first agents.header field, or NULL */
	unsigned hosts;    /* how many Host fields (RFC 9112 §3.2 allows one) */
	size_t n;          /* fields */
	size_t bytes;      /* their names' and values' lengths, summed */

	/* private */
	const char *agent_header;
	size_t agent_header_len;
	const struct hreq *req; /* for a name outside the list; NULL in tests */
};

/* Reads r's header fields, in one pass. agent_header: agents.header (lower
 * case, as the configuration keeps it). */
void intake_headers_read(struct intake_headers *ih, const struct hreq *r, const char *agent_header);

/* The value of the first field named name (any case), or NULL. */
const char *intake_header(const struct intake_headers *ih, const char *name);

/* The pure steps of intake_headers_read, for tests: an empty set, then one
 * field at a time in arrival order (value NUL-terminated). */
void intake_headers_init(struct intake_headers *ih, const char *agent_header);
void intake_headers_add(struct intake_headers *ih, const char *name, size_t name_len,
                        const char *value, size_t value_len);
/* The slot of the known name name (len bytes, any case); -1: not known. */
int intake_field_of(const char *name, size_t len);
/* How many names are known, and the name of slot i (lower case). */
size_t intake_fields(void);
const char *intake_field_name(size_t i);

#endif
