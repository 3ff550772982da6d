/* SPDX-License-Identifier: Apache-2.0 */
/* identity — the budget a request or an answer names. See identity.h. */
#include "proxy/identity.h"

#include <string.h>
#include <strings.h>

#include "provider/profile.h"
#include "proxy/lanes.h"

uint64_t identity_of_request(const struct provider_conf *prov, const struct intake_headers *ih)
{
	const struct provider_profile *pp = profile_of(prov);
	for (size_t i = 0; i < pp->n_request_identity; i++) {
		const char *v = intake_header(ih, pp->request_identity[i].header);
		if (v != NULL && v[0])
			return lanes_identity(prov, pp->request_identity[i].kind, v, strlen(v));
	}
	return 0;
}

uint64_t identity_of_answer(const struct provider_conf *prov, const struct up_header *h, size_t n)
{
	const struct provider_profile *pp = profile_of(prov);
	for (size_t k = 0; k < pp->n_answer_identity; k++)
		for (size_t i = 0; i < n; i++)
			if (strcasecmp(h[i].name, pp->answer_identity[k].header) == 0) {
				if (h[i].value[0] == '\0')
					break; /* the first field of that name counts */
				return lanes_identity(prov, pp->answer_identity[k].kind, h[i].value,
				                      strlen(h[i].value));
			}
	return 0;
}
