/* SPDX-License-Identifier: Apache-2.0 */
/* mock_engine.h — pacerd-mock's engine mode: a self-hosted LLM server that batches
 * continuously, as vLLM does (tests/mock/README.md, "Engine mode"; issue 29). The
 * model and its scheduler are mock_engine_sched.h's (pure: instants are arguments);
 * mock_engine.c runs it on a libevent timer and speaks HTTP. */
#ifndef PACERD_MOCK_ENGINE_H
#define PACERD_MOCK_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/http.h>

#include "mock_engine_sched.h"

/* The hooks of the rest of the mock. */
struct mock_req;
struct mock_engine_req;
struct mock_conn;
/* --engine JSON / POST /_mock/engine: turns the mode on (unless "enabled": false) and
 * sets the fields given; 0, or -1 with err. */
int mock_engine_configure(const char *json, size_t len, char *err, size_t errlen);
bool mock_engine_enabled(void);
/* Output tokens of a chat completion in engine mode: x-mock-output-tokens, else drawn
 * from the configured range; cut to max_tokens (> 0), *truncated then. */
long mock_engine_output_tokens(struct evhttp_request *req, long max_tokens, bool *truncated);
/* Takes the request (prompt and output tokens, the stream's template tmpl or the
 * whole non-stream body): false when it cannot, and the caller answers at once. */
bool mock_engine_submit(struct evhttp_request *req, long prompt, long output,
                        const struct mock_req *tmpl, struct evbuffer *body);
void mock_engine_conn_closed(struct mock_engine_req *er);
/* Answers /_mock/engine and /_mock/engine/requests; false for another path. */
bool mock_engine_admin(struct evhttp_request *req, const char *path);
void mock_engine_reset(void);
void mock_engine_free(void);

#endif
