/* SPDX-License-Identifier: Apache-2.0 */
/* identity — the budget a request or an answer names beyond its key
 * (PROVIDERS.md §10): a key may bill several OpenAI projects or
 * organizations, or Anthropic workspaces, each with a budget of its own. Which
 * header names which kind is the provider's profile's (request_identity,
 * answer_identity, narrowest first); the value is hashed by lanes_identity,
 * the same in every replica. Reads headers; no I/O, no state. */
#ifndef PACERD_IDENTITY_H
#define PACERD_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "proxy/intake.h"
#include "proxy/upstream.h"

/* The identity a request names for itself (the narrowest its headers give),
 * or 0: none. */
uint64_t identity_of_request(const struct provider_conf *prov, const struct intake_headers *ih);
/* The identity an answer says it billed (its n header fields; the narrowest
 * one), or 0: none. */
uint64_t identity_of_answer(const struct provider_conf *prov, const struct up_header *h, size_t n);

#endif
