/* SPDX-License-Identifier: Apache-2.0 */
/* held — an upstream answer kept back whole. See held.h. */
#include "proxy/held.h"

#include <string.h>

#include "sched/retry.h"

bool held_ready(struct held *h)
{
	return h->buf != NULL || (h->buf = evbuffer_new()) != NULL;
}

bool held_start(struct held *h, const struct up_header *uh, size_t n, const char *reason)
{
	if (!held_ready(h))
		return false;
	held_clear(h);
	size_t len = reason != NULL ? strnlen(reason, sizeof(h->reason) - 1) : 0;
	memcpy(h->reason, reason != NULL ? reason : "", len);
	h->reason[len] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (evbuffer_add(h->buf, uh[i].name, uh[i].name_len + 1) != 0 ||
		    evbuffer_add(h->buf, uh[i].value, uh[i].value_len + 1) != 0)
			return false;
	}
	h->n = n;
	h->head_len = evbuffer_get_length(h->buf);
	return true;
}

bool held_add(struct held *h, const char *data, size_t len)
{
	if (evbuffer_get_length(h->buf) - h->head_len + len > RETRY_BODY_CAP)
		return false;
	evbuffer_add(h->buf, data, len);
	return true;
}

size_t held_head(struct held *h, struct up_header *out, size_t max)
{
	if (h->buf == NULL || h->n == 0)
		return 0;
	const char *q = (const char *)evbuffer_pullup(h->buf, -1);
	size_t k = 0;
	for (; k < h->n && k < max; k++) {
		out[k].name = q;
		out[k].name_len = strlen(q);
		q += out[k].name_len + 1;
		out[k].value = q;
		out[k].value_len = strlen(q);
		q += out[k].value_len + 1;
	}
	return k;
}

const char *held_body(struct held *h, size_t *len)
{
	size_t total = h->buf != NULL ? evbuffer_get_length(h->buf) : 0;
	*len = total - h->head_len;
	if (*len == 0)
		return NULL;
	return (const char *)evbuffer_pullup(h->buf, -1) + h->head_len;
}

void held_clear(struct held *h)
{
	if (h->buf != NULL)
		evbuffer_drain(h->buf, evbuffer_get_length(h->buf));
	h->n = h->head_len = 0;
	h->reason[0] = '\0';
}

void held_free(struct held *h)
{
	if (h->buf != NULL)
		evbuffer_free(h->buf);
	memset(h, 0, sizeof(*h));
}
