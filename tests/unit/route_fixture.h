/* SPDX-License-Identifier: Apache-2.0 */
/* A routing table shared by the route unit tests and the route fuzzer:
 * a root provider, two prefixed ones (one with a base path), and a query-key
 * provider under a two-segment prefix. Static: include it once per binary. */
#ifndef PACERD_ROUTE_FIXTURE_H
#define PACERD_ROUTE_FIXTURE_H

#include "core/config.h"

static char *openai_hosts[] = {"api.openai.com"};
static char *anthropic_hosts[] = {"api.anthropic.com"};
static char *groq_hosts[] = {"api.groq.com"};
static struct provider_conf providers[] = {
    {.name = "openai",
     .upstream = "https://api.openai.com",
     .prefix = "/",
     .key_source = KEY_AUTHORIZATION,
     .hosts = openai_hosts,
     .n_hosts = 1},
    {.name = "anthropic",
     .upstream = "https://api.anthropic.com",
     .prefix = "/anthropic",
     .key_source = KEY_X_API_KEY,
     .hosts = anthropic_hosts,
     .n_hosts = 1},
    {.name = "groq",
     .upstream = "https://api.groq.com/openai",
     .prefix = "/groq",
     .key_source = KEY_AUTHORIZATION,
     .hosts = groq_hosts,
     .n_hosts = 1},
    {.name = "gemini",
     .upstream = "http://127.0.0.1:9",
     .prefix = "/gemini/v1",
     .key_source = KEY_QUERY_KEY},
};
static struct config cfg = {.providers = providers, .n_providers = 4};

#endif
