/* SPDX-License-Identifier: Apache-2.0 */
/* headers — which header fields cross the proxy (RFC 9110 §7.6.1). Pure.
 *
 * Hop-by-hop fields (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
 * Transfer-Encoding, Upgrade, Proxy-Authenticate, Proxy-Authorization) and every
 * field named in the message's own Connection header belong to one connection
 * and are never forwarded. */
#ifndef PACERD_HEADERS_H
#define PACERD_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

bool hdr_is_hop_by_hop(const char *name);

/* Whether `name` appears as a token of a Connection header value
 * ("close, X-Foo"); connection may be NULL. Case-insensitive. */
bool hdr_in_connection(const char *connection, const char *name);

/* Request fields sent upstream: not hop-by-hop, not listed in Connection, not
 * the ones libcurl writes itself for the upstream connection (Host,
 * Content-Length, Expect), and not pacerd's own (x-pacer-*: priority, timeout). */
bool hdr_forward_request(const char *name, const char *connection);

/* Response fields relayed to the client: not hop-by-hop, not listed in
 * Connection. Content-Length is kept (the body is relayed byte for byte). */
bool hdr_forward_response(const char *name, const char *connection);

/* The client's own time limit, in ms: x-pacer-timeout-ms (whole ms, pacerd's
 * own: it wins) or else the earlier of Request-Timeout-Ms (ms, a decimal
 * number: the header openai-python#3277 discusses) and X-Stainless-Timeout
 * (seconds, a decimal number: the official OpenAI and Anthropic SDKs send
 * their timeout on every request); any may be NULL. -1 when none is there or
 * parses as a positive number (up to a year). */
long long hdr_client_timeout_ms(const char *pacer_timeout_ms, const char *request_timeout_ms,
                                const char *stainless_timeout);

/* Splits one header line as libcurl delivers it ("Name: value\r\n") into name
 * and value, trimming optional white space. False for a line that is not a
 * field (status line, blank line, obs-fold continuation). */
bool hdr_split_line(const char *line, size_t len, const char **name, size_t *name_len,
                    const char **value, size_t *value_len);

#endif
