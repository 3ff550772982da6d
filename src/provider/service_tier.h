/* service_tier — whether a request asks for a service tier of its own
 * (PROVIDERS.md §11: OpenAI flex processing, Groq's flex tier).
 *
 * Such a tier has a capacity of its own: when it is short, the provider
 * refuses only that tier's requests (OpenAI 429 resource_unavailable, Groq
 * 498 capacity_exceeded), and the standard-tier requests of the same model
 * and key pass. pacerd keeps one lane for both (the rate limits are the
 * account's, shared by the tiers) and uses this to know, from a refusal's
 * headers on, that the refusal may be the tier's, not the lane's.
 *
 * The tier is read from the JSON body's top-level "service_tier" field, as
 * the OpenAI and Groq APIs name it: "flex" is a tier of its own; "auto",
 * "default", "scale", "priority" and no field are the standard capacity.
 * Pure: no I/O. */
#ifndef PACERD_SERVICE_TIER_H
#define PACERD_SERVICE_TIER_H

#include <stdbool.h>
#include <stddef.h>

/* True when body/len is a JSON object whose top-level "service_tier" is
 * "flex". A body that is not a JSON object, or one past the scan's bound
 * (SERVICE_TIER_SCAN_MAX: the field is written near the top by every SDK,
 * and nested or escaped look-alikes are skipped), is the standard tier. */
bool service_tier_flex(const char *body, size_t len);

/* The longest body scanned for the field: a tier field further down (after
 * megabytes of messages) is not looked for, and the request counts as standard. */
#define SERVICE_TIER_SCAN_MAX (4u * 1024 * 1024)

#endif
