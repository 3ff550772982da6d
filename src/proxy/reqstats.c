/* SPDX-License-Identifier: Apache-2.0 */
/* reqstats — per-provider figures of finished requests (reqstats.h). */
#include "proxy/reqstats.h"

#include <stdlib.h>
#include <string.h>

#include "core/config.h"

/* Queueing may last minutes (queue.max_wait_s, retry waits); an upstream
 * answers its head within a minute or gives up (timeouts.first_byte_s);
 * a long stream lasts minutes. */
static const double queue_bounds[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,   5,    10,    30,   60,  120,  300};
static const double first_byte_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                           1,     2.5,  5,     10,   30,  60};
static const double duration_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                         2.5,   5,    10,    30,   60,  120,  300, 600};
static const double attempts_bounds[] = {1, 2, 3, 5, 10};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

struct reqstats *reqstats_new(void)
{
	return calloc(1, sizeof(struct reqstats));
}

void reqstats_free(struct reqstats *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n_rows; i++)
		free(m->rows[i].name);
	free(m);
}

static struct reqstats_row *row_named(struct reqstats *m, const char *name)
{
	for (size_t i = 0; i < m->n_rows; i++)
		if (strcmp(m->rows[i].name, name) == 0)
			return &m->rows[i];
	return NULL;
}

void reqstats_bind(struct reqstats *m, const struct config *cfg)
{
	/* The previous configuration's pointers are forgotten: its memory may be
	 * reused by a later one for another provider. */
	for (size_t i = 0; i < m->n_rows; i++)
		m->rows[i].prov = NULL;
	for (size_t p = 0; p < cfg->n_providers; p++) {
		const struct provider_conf *prov = &cfg->providers[p];
		struct reqstats_row *r = row_named(m, prov->name);
		if (r == NULL) {
			/* Full: the provider goes unmeasured rather than unbounded. */
			if (m->n_rows == REQSTATS_MAX_PROVIDERS)
				continue;
			char *name = strdup(prov->name);
			if (name == NULL)
				continue;
			r = &m->rows[m->n_rows++];
			r->name = name;
			stats_hist_init(&r->queue_wait, queue_bounds, N_OF(queue_bounds));
			stats_hist_init(&r->first_byte, first_byte_bounds, N_OF(first_byte_bounds));
			stats_hist_init(&r->duration, duration_bounds, N_OF(duration_bounds));
			stats_hist_init(&r->attempts, attempts_bounds, N_OF(attempts_bounds));
		}
		r->prov = prov;
	}
}

void reqstats_observe(struct reqstats *m, const struct provider_conf *prov,
                      const struct reqstats_request *rq)
{
	if (prov == NULL)
		return;
	struct reqstats_row *r = NULL;
	for (size_t i = 0; i < m->n_rows && r == NULL; i++)
		if (m->rows[i].prov == prov)
			r = &m->rows[i];
	if (r == NULL) /* accepted under an older configuration */
		r = row_named(m, prov->name);
	if (r == NULL)
		return;
	if (rq->queue_ms >= 0)
		stats_hist_observe(&r->queue_wait, (double)rq->queue_ms / 1000.0);
	if (rq->first_byte_ms >= 0)
		stats_hist_observe(&r->first_byte, (double)rq->first_byte_ms / 1000.0);
	stats_hist_observe(&r->duration, (double)rq->duration_ms / 1000.0);
	stats_hist_observe(&r->attempts, (double)rq->attempts);
	if (rq->tokens_estimated > 0)
		r->tokens_estimated += rq->tokens_estimated;
	if (rq->tokens_reported > 0)
		r->tokens_reported += (uint64_t)rq->tokens_reported;
}
