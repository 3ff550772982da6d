/* SPDX-License-Identifier: Apache-2.0 */
/* intake — the request's header fields, read once. See intake.h. */
#include "proxy/intake.h"

#include <string.h>
#include <strings.h>

#include "provider/profile.h"

static const char *const fixed[IF_FIXED] = {
    [IF_HOST] = "host",
    [IF_CONNECTION] = "connection",
    [IF_ACCEPT] = "accept",
    [IF_CONTENT_TYPE] = "content-type",
    [IF_X_PACER_PRIORITY] = "x-pacer-priority",
    [IF_X_PACER_TIMEOUT_MS] = "x-pacer-timeout-ms",
    [IF_X_STAINLESS_TIMEOUT] = "x-stainless-timeout",
    [IF_REQUEST_TIMEOUT_MS] = "request-timeout-ms",
};

/* The known names, chained by length: a field's length leaves one or two
 * candidates (most fields a client sends, user-agent and the SDKs'
 * x-stainless-*, leave none), whose first letter is compared before the
 * rest. Made once, from fixed[] and the profiles (which never change while
 * pacerd runs). */
static struct {
	bool made;
	size_t n;
	const char *name[INTAKE_FIELDS_MAX];
	signed char first[INTAKE_NAME_MAX + 1]; /* the first slot of each length; -1 */
	signed char next[INTAKE_FIELDS_MAX];    /* the next slot of the same length; -1 */
} known;

static int find(const char *name, size_t len)
{
	if (len > INTAKE_NAME_MAX || len == 0)
		return -1;
	char c = (char)(name[0] | 0x20);
	for (int i = known.first[len]; i >= 0; i = known.next[i])
		if (known.name[i][0] == c && strncasecmp(name, known.name[i], len) == 0)
			return i;
	return -1;
}

static void add_known(const char *name)
{
	size_t len = name != NULL ? strlen(name) : 0;
	if (len == 0 || len > INTAKE_NAME_MAX || known.n == INTAKE_FIELDS_MAX ||
	    find(name, len) >= 0)
		return;
	int i = (int)known.n++;
	known.name[i] = name;
	/* appended to its length's chain: a slot's number never changes */
	known.next[i] = -1;
	if (known.first[len] < 0) {
		known.first[len] = (signed char)i;
	} else {
		int j = known.first[len];
		while (known.next[j] >= 0)
			j = known.next[j];
		known.next[j] = (signed char)i;
	}
}

static void add_identity(const struct provider_profile *pp)
{
	for (size_t i = 0; i < pp->n_request_identity; i++)
		add_known(pp->request_identity[i].header);
}

static void make_known(void)
{
	memset(known.first, -1, sizeof(known.first));
	for (size_t i = 0; i < IF_FIXED; i++)
		add_known(fixed[i]);
	for (int s = KEY_AUTHORIZATION; s <= KEY_QUERY_KEY; s++)
		add_known(profile_key_header((enum key_source)s));
	size_t n;
	const struct provider_profile *rows = profile_builtins(&n);
	for (size_t i = 0; i < n; i++)
		add_identity(&rows[i]);
	add_identity(profile_of(NULL));
	known.made = true;
}

int intake_field_of(const char *name, size_t len)
{
	if (!known.made)
		make_known();
	return find(name, len);
}

size_t intake_fields(void)
{
	if (!known.made)
		make_known();
	return known.n;
}

const char *intake_field_name(size_t i)
{
	return i < intake_fields() ? known.name[i] : "";
}

void intake_headers_init(struct intake_headers *ih, const char *agent_header)
{
	if (!known.made)
		make_known();
	memset(ih, 0, sizeof(*ih));
	ih->agent_header = agent_header;
	ih->agent_header_len = agent_header != NULL ? strlen(agent_header) : 0;
}

void intake_headers_add(struct intake_headers *ih, const char *name, size_t name_len,
                        const char *value, size_t value_len)
{
	ih->n++;
	ih->bytes += name_len + value_len;
	int f = find(name, name_len);
	if (f >= 0) {
		if (ih->value[f] == NULL)
			ih->value[f] = value;
		if (f == IF_HOST)
			ih->hosts++;
	}
	/* Compared apart: agents.header may be any name, one of the list too. */
	if (ih->agent == NULL && name_len == ih->agent_header_len && name_len > 0 &&
	    strncasecmp(name, ih->agent_header, name_len) == 0)
		ih->agent = value;
}

void intake_headers_read(struct intake_headers *ih, const struct hreq *r, const char *agent_header)
{
	intake_headers_init(ih, agent_header);
	ih->req = r;
	size_t n = hreq_n_headers(r);
	for (size_t i = 0; i < n; i++) {
		struct hhdr h;
		hreq_header_at(r, i, &h);
		intake_headers_add(ih, h.name, h.name_len, h.value, h.value_len);
	}
}

const char *intake_header(const struct intake_headers *ih, const char *name)
{
	size_t len = strlen(name);
	int f = intake_field_of(name, len);
	if (f >= 0)
		return ih->value[f];
	if (ih->agent_header != NULL && len == ih->agent_header_len &&
	    strncasecmp(name, ih->agent_header, len) == 0)
		return ih->agent;
	return ih->req != NULL ? hreq_header(ih->req, name) : NULL;
}
