/* SPDX-License-Identifier: Apache-2.0 */
/* persist — the lanes' state across restarts. See persist.h. */
#include "proxy/persist.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/hash.h"
#include "core/htable.h"
#include "core/intern.h"
#include "core/log.h"
#include "proxy/lanes.h"
#include "sched/registry.h"
#include "sched/sched.h"
#include "sched/scope.h"
#include "sched/state_file.h"

#define ERR_LEN 512
/* The wall clock may be stepped (NTP, an operator): the difference between it
 * and the monotonic clock is taken again when it moved by more than this. A
 * fixed difference otherwise, so that the same state makes the same bytes. */
#define WALL_STEP_MS 1000

/* The write in flight: the thread's alone from its start to its join. */
struct job {
	pthread_t thread;
	bool running;     /* started, not joined */
	atomic_bool done; /* the thread has finished (the loop may join it) */
	struct state_snapshot snap;
	const char *dir; /* persist's */
	/* what the thread found */
	int rc; /* 0 written, 1 unchanged, -1 failed */
	char err[ERR_LEN];
	size_t bytes;
	int64_t encode_us, write_us;
	/* the records' digest last written (or read at start): read and
	 * written by whoever runs the write, one at a time */
	unsigned char last[STATE_FILE_DIGEST];
	bool have_last;
};

struct persist {
	struct event_base *base;
	struct lanes *ls;
	char *dir;
	int64_t idle_ms;
	int64_t to_wall; /* wall - monotonic, ms */
	struct event *tick;
	struct event *slice; /* the snapshot's next slice of lanes */
	struct job job;
	/* the snapshot being taken, a slice of lanes a turn */
	bool walking;
	bool noting; /* first the lanes' last activity, for the cutoff */
	struct registry_walk walk;
	int64_t cutoff;
	int64_t *active; /* the lanes' last_active_ms (more than PERSIST_MAX_LANES) */
	size_t n_active, cap_active;
	/* Saved lanes no request has made again yet, by identity: indices + 1
	 * into restored.lanes (their budgets start at first[i]). */
	struct state_snapshot restored;
	size_t *first;
	bool *taken;
	struct htable pending; /* of uint32_t: restored lane index + 1 */
	size_t n_pending;
	/* what the last snapshot cost the loop: in all, and in its longest turn */
	int64_t snapshot_us, slice_max_us;
	size_t snapshot_lanes;
	char last_err[ERR_LEN]; /* the last write failure logged (not repeated) */
};

/* ---- the saved lanes waiting for their lane ---- */

static uint64_t identity_hash(const char *provider, uint64_t scope, const char *model)
{
	uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, provider, strlen(provider) + 1);
	h = hash_fnv1a(h, model, strlen(model));
	return hash_u64_pair(h, scope);
}

struct identity {
	const char *provider, *model;
	uint64_t scope;
};

static const struct sched_lane_saved *pending_lane(const struct persist *p, const void *slot)
{
	return &p->restored.lanes[*(const uint32_t *)slot - 1];
}

static bool slot_used(const void *slot)
{
	return *(const uint32_t *)slot != 0;
}

static uint64_t slot_hash(const void *slot, const void *ctx)
{
	const struct sched_lane_saved *l = pending_lane(ctx, slot);
	return identity_hash(l->provider, l->scope, l->model);
}

static bool slot_match(const void *slot, const void *key, const void *ctx)
{
	const struct sched_lane_saved *l = pending_lane(ctx, slot);
	const struct identity *id = key;
	return l->scope == id->scope && strcmp(l->provider, id->provider) == 0 &&
	       strcmp(l->model, id->model) == 0;
}

static const struct htable_type pending_type = {
    .size = sizeof(uint32_t),
    .used = slot_used,
    .hash = slot_hash,
    .match = slot_match,
};

/* What was read at start, once no saved lane waits any more. */
static void forget_restored(struct persist *p)
{
	state_snapshot_free(&p->restored);
	htable_free(&p->pending);
	free(p->first);
	free(p->taken);
	p->first = NULL;
	p->taken = NULL;
	p->n_pending = 0;
}

/* A lane was made: what was saved of its identity, if anything, goes into it. */
static void restore_lane(void *arg, struct sched_lane *lane, int64_t now_ms)
{
	struct persist *p = arg;
	if (p->n_pending == 0)
		return;
	const char *model = sched_lane_model(lane);
	struct identity id = {sched_lane_provider(lane)->name, model != NULL ? model : "",
	                      sched_lane_scope(lane)};
	uint64_t h = identity_hash(id.provider, id.scope, id.model);
	uint32_t *slot = htable_find(&p->pending, &pending_type, h, &id, p);
	if (slot == NULL)
		return;
	size_t i = *slot - 1;
	htable_delete(&p->pending, &pending_type, slot, p);
	p->n_pending--;
	p->taken[i] = true;
	(void)sched_lane_import(lane, &p->restored.lanes[i], &p->restored.budgets[p->first[i]],
	                        now_ms, now_ms + p->to_wall);
	if (p->n_pending == 0)
		forget_restored(p); /* every saved lane taken up */
}

/* ---- start: the file read back ---- */

static void log_ignored(const char *path, const char *reason, const char *msg)
{
	struct log_line l;
	if (log_begin(&l, LOG_WARN, "state_ignored")) {
		log_str(&l, "file", path);
		log_str(&l, "reason", reason);
		log_str(&l, "message", msg);
		log_str(&l, "effect",
		        "the lanes start from nothing learned; the file is replaced "
		        "at the next write");
		log_end(&l);
	}
}

/* Ages what was read and indexes the lanes by identity; the scopes go into
 * the lanes' table at once. */
static void take_up(struct persist *p, const char *path, int64_t now_ms, int64_t wall_ms)
{
	struct state_snapshot *s = &p->restored;
	size_t n = s->n_lanes, dropped = 0, budgets_in = 0, budgets_out = 0;
	p->first = calloc(n ? n : 1, sizeof(*p->first));
	p->taken = calloc(n ? n : 1, sizeof(*p->taken));
	if (p->first == NULL || p->taken == NULL) {
		log_ignored(path, "out_of_memory", "cannot index the saved lanes");
		state_snapshot_clear(s);
		return;
	}
	/* Age each lane, its budgets closing up in the shared array. */
	for (size_t i = 0; i < n; i++) {
		unsigned k = sched_saved_budgets(&s->lanes[i]);
		struct learned *b = &s->budgets[budgets_in];
		budgets_in += k;
		if (!sched_saved_age(&s->lanes[i], b, wall_ms, p->idle_ms)) {
			p->taken[i] = true; /* nothing to restore: as good as taken */
			dropped++;
			continue;
		}
		k = sched_saved_budgets(&s->lanes[i]);
		if (b != &s->budgets[budgets_out])
			memmove(&s->budgets[budgets_out], b, k * sizeof(*b));
		p->first[i] = budgets_out;
		budgets_out += k;
		if (!htable_reserve(&p->pending, &pending_type, p)) {
			p->taken[i] = true;
			dropped++;
			continue;
		}
		struct identity id = {s->lanes[i].provider, s->lanes[i].model, s->lanes[i].scope};
		uint64_t h = identity_hash(id.provider, id.scope, id.model);
		if (htable_find(&p->pending, &pending_type, h, &id, p) != NULL) {
			p->taken[i] = true; /* the same identity twice: the first wins */
			dropped++;
			continue;
		}
		*(uint32_t *)htable_insert(&p->pending, &pending_type, h) = (uint32_t)(i + 1);
		p->n_pending++;
	}
	s->n_budgets = budgets_out;
	size_t n_lanes = p->n_pending;
	/* Scopes, least recently used first, so that the LRU comes out as it was;
	 * a day unused, they are gone (lanes.c's SCOPE_IDLE_MS). */
	struct scope_table *t = lanes_scopes(p->ls);
	size_t scopes = 0;
	for (size_t i = 0; i < s->n_scopes; i++) {
		const struct scope_saved *e = &s->scopes[i];
		if (wall_ms - e->last_ms > t->idle_ttl_ms && t->idle_ttl_ms > 0)
			continue;
		if (scope_learn(t, e->key, 0, e->identity, e->last_ms - wall_ms + now_ms) >= 0)
			scopes++;
	}
	struct log_line l;
	if (log_begin(&l, LOG_INFO, "state_restored")) {
		log_str(&l, "file", path);
		log_int(&l, "age_ms", (long long)(wall_ms - s->written_ms));
		log_int(&l, "lanes", (long long)n_lanes);
		log_int(&l, "lanes_dropped", (long long)dropped);
		log_int(&l, "budgets", (long long)budgets_out);
		log_int(&l, "scopes", (long long)scopes);
		log_end(&l);
	}
	if (p->n_pending == 0)
		forget_restored(p);
}

static void read_back(struct persist *p, int64_t now_ms, int64_t wall_ms)
{
	char path[4096], err[ERR_LEN];
	snprintf(path, sizeof(path), "%s/%s", p->dir, STATE_FILE_NAME);
	char *buf = NULL;
	size_t len = 0;
	int rc = atomic_file_read(path, STATE_FILE_MAX_BYTES, &buf, &len, err, sizeof(err));
	if (rc == 1) {
		struct log_line l;
		if (log_begin(&l, LOG_INFO, "state_restored")) {
			log_str(&l, "file", path);
			log_str(&l, "message",
			        "no state file yet: the lanes start from nothing learned");
			log_int(&l, "lanes", 0);
			log_end(&l);
		}
		return;
	}
	if (rc != 0) {
		log_ignored(path, "unreadable", err);
		return;
	}
	enum state_file_error e = state_file_decode(buf, len, &p->restored, err, sizeof(err));
	free(buf);
	if (e != STATE_FILE_OK) {
		log_ignored(path, state_file_error_name(e), err);
		return;
	}
	take_up(p, path, now_ms, wall_ms);
}

/* ---- writing ---- */

/* The wall clock's lead over the monotonic one, kept fixed unless stepped. */
static int64_t to_wall(struct persist *p, int64_t now_ms)
{
	int64_t d = (int64_t)clock_wall_ms() - now_ms;
	if (llabs(d - p->to_wall) > WALL_STEP_MS)
		p->to_wall = d;
	return p->to_wall;
}

struct collect {
	struct state_snapshot *s;
	int64_t now_ms, wall_ms;
	int64_t cutoff; /* lanes last active before this are left out */
	bool failed;
};

static void export_lane(struct sched_lane *lane, void *arg)
{
	struct collect *c = arg;
	struct state_snapshot *s = c->s;
	if (s->n_lanes >= PERSIST_MAX_LANES || sched_lane_last_active_ms(lane) < c->cutoff)
		return;
	if (c->failed || !state_snapshot_reserve(s, 1, 0)) {
		c->failed = true;
		return;
	}
	s->n_budgets += sched_lane_export(lane, c->now_ms, c->wall_ms, &s->lanes[s->n_lanes++],
	                                  &s->budgets[s->n_budgets]);
}

/* ---- which lanes, when there are more than PERSIST_MAX_LANES ---- */

static void note_active(struct sched_lane *lane, void *arg)
{
	struct persist *p = arg;
	if (p->n_active < p->cap_active)
		p->active[p->n_active++] = sched_lane_last_active_ms(lane);
}

/* The k-th largest of a[0, n) (counting from 0; k < n), moving a's
 * elements (Hoare's select: O(n) on average). */
static int64_t kth_largest(int64_t *a, size_t n, size_t k)
{
	long lo = 0, hi = (long)n - 1, want = (long)k;
	while (lo < hi) {
		int64_t pivot = a[lo + (hi - lo) / 2];
		long i = lo, j = hi;
		while (i <= j) { /* larger ones first */
			while (a[i] > pivot)
				i++;
			while (a[j] < pivot)
				j--;
			if (i <= j) {
				int64_t t = a[i];
				a[i++] = a[j];
				a[j--] = t;
			}
		}
		if (want <= j)
			hi = j;
		else if (want >= i)
			lo = i;
		else
			break; /* between: equal to the pivot */
	}
	return a[want];
}

/* The last_active_ms from which on lanes are saved: all of them (INT64_MIN)
 * up to PERSIST_MAX_LANES, else the most recently active that many. */
static int64_t cutoff_of(struct persist *p)
{
	if (p->n_active <= PERSIST_MAX_LANES)
		return INT64_MIN;
	return kth_largest(p->active, p->n_active, PERSIST_MAX_LANES - 1);
}

/* Room to note every lane's last activity; false when out of memory. */
static bool active_reserve(struct persist *p)
{
	size_t n = registry_count(lanes_registry(p->ls)) + 64;
	p->n_active = 0;
	if (n <= p->cap_active)
		return true;
	int64_t *a = realloc(p->active, n * sizeof(*a));
	if (a == NULL)
		return false;
	p->active = a;
	p->cap_active = n;
	return true;
}

/* The saved lanes not taken up yet (unless idle too long by now) and the
 * scopes, after the lanes: contiguous copies. */
static bool snapshot_rest(struct persist *p, struct state_snapshot *s)
{
	const struct state_snapshot *r = &p->restored;
	for (size_t i = 0; i < r->n_lanes && p->n_pending > 0 && s->n_lanes < PERSIST_MAX_LANES;
	     i++) {
		if (p->taken[i] || s->written_ms - r->lanes[i].last_active_ms >= p->idle_ms)
			continue;
		unsigned k = sched_saved_budgets(&r->lanes[i]);
		if (!state_snapshot_reserve(s, 1, 0))
			return false;
		s->lanes[s->n_lanes++] = r->lanes[i];
		memcpy(&s->budgets[s->n_budgets], &r->budgets[p->first[i]],
		       k * sizeof(*r->budgets));
		s->n_budgets += k;
	}
	struct scope_table *t = lanes_scopes(p->ls);
	if (!state_snapshot_reserve(s, 0, scope_count(t)))
		return false;
	s->n_scopes = scope_save(t, s->scopes, scope_count(t));
	return true;
}

/* Everything worth keeping now, into s, at once: at shutdown. */
static bool snapshot(struct persist *p, struct state_snapshot *s)
{
	int64_t now = clock_now_ms();
	struct collect c = {s, now, now + to_wall(p, now), INT64_MIN, false};
	state_snapshot_clear(s);
	s->written_ms = c.wall_ms;
	struct registry *reg = lanes_registry(p->ls);
	if (registry_count(reg) > PERSIST_MAX_LANES) {
		if (!active_reserve(p))
			return false;
		registry_foreach(reg, note_active, p);
		c.cutoff = cutoff_of(p);
	}
	registry_foreach(reg, export_lane, &c);
	return !c.failed && snapshot_rest(p, s);
}

/* Encodes and writes j->snap unless it is what was written last. Blocking:
 * the thread's, or the main thread's at shutdown. */
static void write_job(struct job *j)
{
	long long t0 = clock_mono_ns();
	char *buf = NULL;
	size_t len = 0;
	unsigned char digest[STATE_FILE_DIGEST];
	j->err[0] = '\0';
	j->bytes = 0;
	j->write_us = 0;
	if (state_file_encode(&j->snap, &buf, &len, digest) != 0) {
		j->rc = -1;
		snprintf(j->err, sizeof(j->err), "out of memory encoding the state");
		return;
	}
	long long t1 = clock_mono_ns();
	j->encode_us = (t1 - t0) / 1000;
	j->bytes = len;
	if (j->have_last && memcmp(digest, j->last, sizeof(digest)) == 0) {
		j->rc = 1; /* nothing changed since the last write */
	} else if (atomic_file_write(j->dir, STATE_FILE_NAME, buf, len, 0600, j->err,
	                             sizeof(j->err)) == 0) {
		memcpy(j->last, digest, sizeof(digest));
		j->have_last = true;
		j->rc = 0;
	} else {
		j->rc = -1;
	}
	j->write_us = (clock_mono_ns() - t1) / 1000;
	free(buf);
}

static void *writer(void *arg)
{
	struct job *j = arg;
	write_job(j);
	atomic_store_explicit(&j->done, true, memory_order_release);
	return NULL;
}

/* What a write came to, in the log: a failure once (until it changes or a
 * write succeeds), a write at debug. */
static void report(struct persist *p, const char *why)
{
	struct job *j = &p->job;
	if (j->rc < 0) {
		if (strcmp(j->err, p->last_err) == 0)
			return;
		snprintf(p->last_err, sizeof(p->last_err), "%s", j->err);
		struct log_line l;
		if (log_begin(&l, LOG_WARN, "state_write_failed")) {
			log_str(&l, "dir", p->dir);
			log_str(&l, "error", j->err);
			log_str(&l, "effect", "the last state written stays; tried again later");
			log_end(&l);
		}
		return;
	}
	p->last_err[0] = '\0';
	enum log_level lv = strcmp(why, "shutdown") == 0 ? LOG_INFO : LOG_DEBUG;
	struct log_line l;
	if (log_begin(&l, lv, "state_saved")) {
		log_str(&l, "why", why);
		log_bool(&l, "written", j->rc == 0);
		log_int(&l, "lanes", (long long)j->snap.n_lanes);
		log_int(&l, "scopes", (long long)j->snap.n_scopes);
		log_int(&l, "bytes", (long long)j->bytes);
		log_int(&l, "snapshot_us", (long long)p->snapshot_us);
		log_int(&l, "snapshot_turn_max_us", (long long)p->slice_max_us);
		log_int(&l, "encode_us", (long long)j->encode_us);
		log_int(&l, "write_us", (long long)j->write_us);
		log_end(&l);
	}
}

/* Joins the write in flight; wait: even when it is not done yet. True when
 * no write is in flight afterwards. */
static bool join(struct persist *p, bool wait)
{
	struct job *j = &p->job;
	if (!j->running)
		return true;
	if (!wait && !atomic_load_explicit(&j->done, memory_order_acquire))
		return false;
	pthread_join(j->thread, NULL);
	j->running = false;
	report(p, "periodic");
	return true;
}

static void start_writer(struct persist *p)
{
	struct job *j = &p->job;
	atomic_store_explicit(&j->done, false, memory_order_relaxed);
	if (pthread_create(&j->thread, NULL, writer, j) != 0) {
		/* No thread: this tick's write is skipped, not done on the loop. */
		log_msg(LOG_WARN, "state_write_failed", "cannot start the writer thread");
		return;
	}
	j->running = true;
}

/* One slice of the periodic snapshot: PERSIST_SLICE lanes, then the next
 * turn; once the lanes are done, the rest and the writer. */
static void slice_again(struct persist *p)
{
	struct timeval next = {0, 0};
	evtimer_add(p->slice, &next);
}

/* One slice of the periodic snapshot, then the next turn: with more lanes
 * than PERSIST_MAX_LANES, first their last activity (PERSIST_SLICE_NOTE a
 * turn: one field each) for the cutoff; then the lanes themselves
 * (PERSIST_SLICE a turn); then the rest and the writer. */
static void on_slice(evutil_socket_t fd, short what, void *arg)
{
	struct persist *p = arg;
	(void)fd;
	(void)what;
	struct state_snapshot *s = &p->job.snap;
	struct registry *reg = lanes_registry(p->ls);
	long long t0 = clock_mono_ns();
	int64_t now = clock_now_ms();
	struct collect c = {s, now, now + p->to_wall, p->cutoff, false};
	enum registry_walk_state st;
	bool ok = true;
	if (p->noting) {
		st = registry_walk_slice(reg, &p->walk, PERSIST_SLICE_NOTE, note_active, p);
		if (st == REGISTRY_WALK_AGAIN) { /* the table grew: from the start */
			ok = active_reserve(p);
			st = REGISTRY_WALK_MORE;
		} else if (st == REGISTRY_WALK_DONE) {
			p->cutoff = cutoff_of(p);
			p->noting = false;
			registry_walk_start(reg, &p->walk);
			st = REGISTRY_WALK_MORE;
		}
	} else {
		st = registry_walk_slice(reg, &p->walk, PERSIST_SLICE, export_lane, &c);
		if (st == REGISTRY_WALK_AGAIN) {
			s->n_lanes = s->n_budgets = 0;
			st = REGISTRY_WALK_MORE;
		}
		ok = !c.failed && (st == REGISTRY_WALK_MORE || snapshot_rest(p, s));
	}
	int64_t us = (clock_mono_ns() - t0) / 1000;
	p->snapshot_us += us;
	if (us > p->slice_max_us)
		p->slice_max_us = us;
	if (!ok) {
		p->walking = false;
		log_msg(LOG_WARN, "state_write_failed", "out of memory taking the lanes' snapshot");
		return;
	}
	if (st == REGISTRY_WALK_MORE) {
		slice_again(p);
		return;
	}
	p->walking = false;
	p->snapshot_lanes = s->n_lanes;
	start_writer(p);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct persist *p = arg;
	(void)fd;
	(void)what;
	if (p->walking || !join(p, false))
		return; /* the last one is still being taken or written: the next tick */
	struct state_snapshot *s = &p->job.snap;
	struct registry *reg = lanes_registry(p->ls);
	int64_t now = clock_now_ms();
	state_snapshot_clear(s);
	s->written_ms = now + to_wall(p, now);
	p->snapshot_us = p->slice_max_us = 0;
	p->cutoff = INT64_MIN;
	p->noting = registry_count(reg) > PERSIST_MAX_LANES;
	size_t lanes = registry_count(reg) + p->n_pending + 64;
	/* Room for all at once: no slice copies the arrays as they grow. */
	if ((p->noting && !active_reserve(p)) ||
	    !state_snapshot_reserve(s, lanes < PERSIST_MAX_LANES ? lanes : PERSIST_MAX_LANES,
	                            scope_count(lanes_scopes(p->ls)))) {
		log_msg(LOG_WARN, "state_write_failed", "out of memory taking the lanes' snapshot");
		return;
	}
	registry_walk_start(reg, &p->walk);
	p->walking = true;
	on_slice(-1, 0, p);
}

void persist_save_now(struct persist *p)
{
	if (p == NULL || p->dir == NULL)
		return;
	if (p->slice != NULL)
		evtimer_del(p->slice);
	p->walking = false;
	join(p, true);
	long long t0 = clock_mono_ns();
	bool ok = snapshot(p, &p->job.snap);
	p->snapshot_us = p->slice_max_us = (clock_mono_ns() - t0) / 1000;
	p->snapshot_lanes = p->job.snap.n_lanes;
	if (!ok) {
		log_msg(LOG_WARN, "state_write_failed", "out of memory taking the lanes' snapshot");
		return;
	}
	write_job(&p->job);
	report(p, "shutdown");
}

void persist_last_snapshot(const struct persist *p, int64_t *us, int64_t *max_us, size_t *lanes)
{
	*us = p != NULL ? p->snapshot_us : 0;
	*max_us = p != NULL ? p->slice_max_us : 0;
	*lanes = p != NULL ? p->snapshot_lanes : 0;
}

struct persist *persist_open(struct event_base *base, struct lanes *ls, const char *dir,
                             const char *from, int64_t idle_ms)
{
	struct persist *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		log_msg(LOG_ERROR, "state_none", "out of memory: what the lanes learn is not kept");
		return NULL;
	}
	p->base = base;
	p->ls = ls;
	p->idle_ms = idle_ms;
	int64_t now = clock_now_ms();
	p->to_wall = (int64_t)clock_wall_ms() - now;
	struct log_line l;
	if (dir == NULL || dir[0] == '\0') {
		if (log_begin(&l, LOG_INFO, "state_none")) {
			log_str(
			    &l, "message",
			    "no state directory (state_dir, $STATE_DIRECTORY, or a writable "
			    "/var/lib/pacerd): what the lanes learn is not kept across restarts");
			log_end(&l);
		}
		return p;
	}
	char err[ERR_LEN];
	p->dir = strdup(dir);
	p->tick = event_new(base, -1, EV_PERSIST, on_tick, p);
	p->slice = evtimer_new(base, on_slice, p);
	if (p->dir == NULL || p->tick == NULL || p->slice == NULL) {
		log_msg(LOG_ERROR, "state_none", "out of memory: what the lanes learn is not kept");
		persist_free(p);
		return NULL;
	}
	p->job.dir = p->dir;
	if (atomic_file_mkdir(dir, err, sizeof(err)) != 0) {
		/* Written later if it appears; reading it now is moot. */
		if (log_begin(&l, LOG_WARN, "state_dir_unusable")) {
			log_str(&l, "dir", dir);
			log_str(&l, "error", err);
			log_end(&l);
		}
	} else {
		if (log_begin(&l, LOG_DEBUG, "state_dir")) {
			log_str(&l, "dir", dir);
			log_str(&l, "from", from != NULL ? from : "");
			log_end(&l);
		}
		read_back(p, now, now + p->to_wall);
	}
	lanes_set_restore(ls, restore_lane, p);
	struct timeval tv = {PERSIST_INTERVAL_S, 0};
	event_add(p->tick, &tv);
	return p;
}

void persist_free(struct persist *p)
{
	if (p == NULL)
		return;
	if (p->tick != NULL)
		event_free(p->tick);
	if (p->slice != NULL)
		event_free(p->slice);
	if (p->job.running) {
		pthread_join(p->job.thread, NULL);
		p->job.running = false;
	}
	if (p->ls != NULL)
		lanes_set_restore(p->ls, NULL, NULL);
	state_snapshot_free(&p->job.snap);
	state_snapshot_free(&p->restored);
	free(p->active);
	htable_free(&p->pending);
	free(p->first);
	free(p->taken);
	free(p->dir);
	free(p);
}
