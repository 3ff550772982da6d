/* SPDX-License-Identifier: Apache-2.0 */
/* rewrites — see rewrites.h. */
#include "proxy/rewrites.h"

#include <stdio.h>
#include <string.h>

void rewrites_init(struct rewrites *r)
{
	memset(r, 0, sizeof(*r));
}

const struct rewrite_stop *rewrites_stopped(const struct rewrites *r, const char *provider)
{
	for (size_t i = 0; i < r->n; i++)
		if (strncmp(r->stopped[i].provider, provider, sizeof(r->stopped[i].provider)) == 0)
			return &r->stopped[i];
	return NULL;
}

bool rewrites_allowed(const struct rewrites *r, const char *provider)
{
	/* A full table (more providers refused a rewrite than any
	 * configuration has) stops every rewrite: never break a request. */
	return r->n < REWRITES_MAX && rewrites_stopped(r, provider) == NULL;
}

bool rewrites_stop(struct rewrites *r, const char *provider, int status, int resent_status,
                   const char *what, long long wall_ms)
{
	if (rewrites_stopped(r, provider) != NULL || r->n == REWRITES_MAX)
		return false;
	struct rewrite_stop *s = &r->stopped[r->n++];
	snprintf(s->provider, sizeof(s->provider), "%s", provider);
	snprintf(s->what, sizeof(s->what), "%s", what != NULL ? what : "");
	s->status = status;
	s->resent_status = resent_status;
	s->at_ms = wall_ms;
	return true;
}
