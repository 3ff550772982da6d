/* SPDX-License-Identifier: Apache-2.0 */
/* upstream — libcurl multi_socket on libevent. See upstream.h.
 *
 * The glue follows libcurl's hiperfifo pattern with the traps of DESIGN §11
 * avoided: one persistent event per socket, changed only when libcurl asks for
 * a different mask; the timer callback only arms a libevent timer (0 = next
 * loop turn), it never calls back into libcurl; CURLMSG_DONE is drained after
 * every curl_multi_socket_action; nothing calls curl_multi_* from inside a
 * libcurl callback (aborts requested there are deferred).
 *
 * Sockets: libcurl tells CURL_POLL_REMOVE for a keep-alive connection's socket
 * at the end of every transfer and asks for it again on the next one: an
 * epoll_ctl DEL and an ADD per request. A connection socket that libcurl puts
 * back in its pool is instead left registered ("parked"): when the next
 * transfer asks for the same mask nothing changes at all. That is safe only
 * because we hear of its close before it happens (CURLOPT_CLOSESOCKETFUNCTION:
 * libcurl closes the sockets of its connections through it, lib/cf-socket.c
 * socket_close) and drop the registration first; a parked socket that becomes
 * readable (the server closed it, or sent something) is dropped from the loop
 * at once, and libcurl's own liveness check sorts it out on reuse. */
#include "proxy/upstream.h"

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/grow.h"
#include "core/list.h"
#include "core/log.h"
#include "core/pool.h"
#include "http/headers.h"

#define UP_HEADER_BYTES_MAX (64 * 1024)
#define UP_HEADERS_MAX 256

/* What we know of one socket libcurl asked us to watch, found by its fd
 * (up->socks). Pooled: no allocation per connection once warm. */
struct sock_ev {
	struct event ev; /* assigned again only when the mask changes */
	struct upstream *up;
	curl_socket_t fd;
	int what;    /* CURL_POLL_IN / OUT / INOUT registered; 0: none */
	bool parked; /* libcurl removed it, but it is a pooled connection's */
	/* cppcheck-suppress unusedStructMember ; the pool links through it (offsetof) */
	struct list link; /* up->sock_pool while unused */
};

struct hdr_off {
	unsigned name, name_len, value, value_len;
};

struct up_xfer {
	struct upstream *up;
	CURL *easy;
	struct event *timer;  /* first-byte and idle timeouts */
	struct event *resume; /* deferred curl_easy_pause(CONT) */
	const struct up_handler *h;
	void *ctx;
	const struct provider_conf *prov;
	long long last_ms;
	long long wait_from_ms; /* the first byte is awaited from here: start, or the body's end */
	int status;
	char reason[64];
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's own words on a failure */
	char *hbuf;                   /* header bytes of the current response */
	size_t hlen, hcap;
	struct hdr_off *hoff; /* grown as needed, up to UP_HEADERS_MAX */
	size_t hoff_cap;
	size_t nh;
	bool headers_done, paused, aborted, too_large;
	/* A streamed body (up_request.body_streamed): sending paused for want
	 * of its bytes, its end reached; the resumes asked for (on_resume). */
	bool body_streamed, send_paused, body_done;
	bool resume_recv, resume_send;
	bool active;      /* added to the multi handle */
	bool doomed;      /* aborted with libcurl on the stack: on up->doomed */
	struct list link; /* up->active while active, else up->xfer_pool */
	struct list doomed_link;
};

struct upstream {
	struct event_base *base;
	CURLM *multi;
	CURLSH *share;
	struct event *timer;
	struct event *reap;    /* removes transfers aborted inside libcurl callbacks */
	struct pool xfer_pool; /* transfers that ended, with their easy handles */
	struct list active;
	struct list doomed; /* aborted while libcurl was on the stack */
	int in_curl;        /* > 0 while a libcurl call that may run callbacks is on the stack */
	struct sock_ev **socks; /* by fd; NULL where we watch nothing */
	size_t n_socks;
	struct pool sock_pool; /* not trimmed: small, one per socket open at the peak */
	/* "Soon" timeouts run in the same loop turn; this many in a row at
	 * most before one waits for the next turn, so that a libcurl asking
	 * for 0 again and again cannot starve the loop. */
	unsigned soon_streak;
};

#define SOON_STREAK_MAX 16

static void check_multi_info(struct upstream *up);
static void xfer_release(struct up_xfer *x);

const char *upstream_error_name(enum up_error e)
{
	switch (e) {
	case UP_OK:
		return "ok";
	case UP_CONNECT:
		return "connect";
	case UP_RESOLVE:
		return "resolve";
	case UP_TLS:
		return "tls";
	case UP_TLS_VERIFY:
		return "tls_verify";
	case UP_RESET:
		return "reset";
	case UP_TIMEOUT:
		return "timeout";
	case UP_TOO_LARGE:
		return "headers_too_large";
	case UP_INTERNAL:
		break;
	}
	return "internal";
}

/* ---- sockets ---- */

static struct sock_ev *sock_find(struct upstream *up, curl_socket_t fd)
{
	return fd >= 0 && (size_t)fd < up->n_socks ? up->socks[fd] : NULL;
}

static struct sock_ev *sock_get(struct upstream *up, curl_socket_t fd)
{
	if (fd < 0)
		return NULL;
	if ((size_t)fd >= up->n_socks) {
		size_t n = up->n_socks ? up->n_socks : 256;
		while (n <= (size_t)fd)
			n *= 2;
		struct sock_ev **t = realloc(up->socks, n * sizeof(*t));
		if (t == NULL)
			return NULL;
		memset(t + up->n_socks, 0, (n - up->n_socks) * sizeof(*t));
		up->socks = t;
		up->n_socks = n;
	}
	struct sock_ev *s = pool_get(&up->sock_pool);
	if (s == NULL && (s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->up = up;
	s->fd = fd;
	s->what = 0;
	s->parked = false;
	up->socks[fd] = s;
	return s;
}

/* Stops watching and returns the struct to the pool. */
static void sock_put(struct sock_ev *s)
{
	struct upstream *up = s->up;
	if (s->what != 0)
		event_del(&s->ev);
	up->socks[s->fd] = NULL;
	if (!pool_put(&up->sock_pool, s))
		free(s);
}

static void socket_action(struct upstream *up, curl_socket_t fd, int flags)
{
	int running = 0;
	up->in_curl++;
	curl_multi_socket_action(up->multi, fd, flags, &running);
	up->in_curl--;
	check_multi_info(up);
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
	struct sock_ev *s = arg;
	s->up->soon_streak = 0;
	if (s->parked) {
		/* An idle pooled connection woke up: EOF or stray bytes. Level
		 * triggered, it would wake us every turn; libcurl checks it
		 * before any reuse anyway. */
		sock_put(s);
		return;
	}
	int flags =
	    ((what & EV_READ) ? CURL_CSELECT_IN : 0) | ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
	socket_action(s->up, fd, flags);
}

/* Whether a socket libcurl no longer watches may stay registered: it must be
 * the connection socket of a transfer that got a response (a resolver's
 * socketpair or a connect attempt's socket never gets that far, and their
 * closes may bypass close_socket_cb), waiting for input only. */
static bool parkable(CURL *easy, const struct sock_ev *s)
{
	struct up_xfer *x = NULL;
	if (s->what != CURL_POLL_IN)
		return false;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
	return x != NULL && x->status != 0;
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct upstream *up = userp;
	struct sock_ev *s = sock_find(up, fd);
	(void)socketp; /* found by fd: a parked socket has no entry at libcurl */

	if (what == CURL_POLL_REMOVE) {
		/* May arrive after the fd was closed and even reused: only our
		 * own registration is touched, never the fd. */
		if (s != NULL && !s->parked) {
			if (parkable(easy, s))
				s->parked = true;
			else
				sock_put(s);
		}
		return 0;
	}
	if (s == NULL && (s = sock_get(up, fd)) == NULL)
		return -1;
	s->parked = false;
	if (s->what == what)
		return 0; /* unchanged, or a parked socket reused: nothing to do */
	if (s->what != 0)
		event_del(&s->ev);
	short kind = (short)(((what & CURL_POLL_IN) ? EV_READ : 0) |
	                     ((what & CURL_POLL_OUT) ? EV_WRITE : 0) | EV_PERSIST);
	event_assign(&s->ev, up->base, fd, kind, on_socket_event, s);
	s->what = what;
	if (event_add(&s->ev, NULL) != 0) {
		s->what = 0;
		return -1;
	}
	return 0;
}

/* libcurl opens its connections' sockets here. A number it hands out may be
 * that of a socket libcurl closed without a word: a losing connect attempt
 * (lib/cf-socket.c closes those with sclose, past close_socket_cb) that we
 * were watching, its entry at libcurl still alive. The kernel dropped that
 * registration with the socket; arm it again for the new one, which libcurl
 * may go on watching under the same entry without asking us. */
static curl_socket_t open_socket_cb(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
	(void)purpose;
	curl_socket_t fd = socket(a->family, a->socktype, a->protocol);
	struct sock_ev *s = fd == CURL_SOCKET_BAD ? NULL : sock_find(clientp, fd);
	if (s != NULL && s->parked) {
		sock_put(s);
	} else if (s != NULL && s->what != 0) {
		event_del(&s->ev); /* a DEL and an ADD: epoll_ctl MOD, then ADD on ENOENT */
		event_add(&s->ev, NULL);
	}
	return fd;
}

/* libcurl closes its connections' sockets here: the registration goes first,
 * so that the fd number, reused at once by the next socket(), never meets a
 * stale event. */
static int close_socket_cb(void *clientp, curl_socket_t fd)
{
	struct sock_ev *s = sock_find(clientp, fd);
	if (s != NULL)
		sock_put(s);
	return close(fd);
}

static void on_multi_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	socket_action(arg, CURL_SOCKET_TIMEOUT, 0);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct upstream *up = userp;
	(void)multi;
	if (timeout_ms < 0) {
		evtimer_del(up->timer);
		return 0;
	}
	if (timeout_ms == 0 && ++up->soon_streak <= SOON_STREAK_MAX) {
		/* "As soon as possible": later in this same loop turn, once the
		 * caller has returned (never a call back into libcurl from
		 * here), without a round trip through epoll_wait. */
		evtimer_del(up->timer);
		event_active(up->timer, EV_TIMEOUT, 1);
		return 0;
	}
	up->soon_streak = 0;
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	evtimer_add(up->timer, &tv);
	return 0;
}

static enum up_error map_curl_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_OK:
		return UP_OK;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return UP_RESOLVE; /* apart from connect: a log and a 502 that say DNS */
	case CURLE_COULDNT_CONNECT:
		return UP_CONNECT;
	case CURLE_OPERATION_TIMEDOUT:
		return UP_TIMEOUT;
	case CURLE_PEER_FAILED_VERIFICATION: /* untrusted chain, wrong name */
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
		return UP_TLS_VERIFY; /* the same on every attempt: not retried */
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
		return UP_TLS;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_SEND_FAIL_REWIND: /* died, and the upload cannot be resent */
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return UP_RESET;
	default:
		return UP_INTERNAL;
	}
}

static void finish(struct up_xfer *x, enum up_error err, const char *detail)
{
	const struct up_handler *h = x->h;
	void *ctx = x->ctx;
	bool notify = !x->aborted;
	xfer_release(x);
	if (notify)
		h->on_done(ctx, err, detail);
}

static void check_multi_info(struct upstream *up)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(up->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct up_xfer *x = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		CURLcode rc = msg->data.result;
		enum up_error err = map_curl_error(rc);
		if (x->too_large)
			err = UP_TOO_LARGE;
		else if (rc == CURLE_WRITE_ERROR && !x->aborted)
			err = UP_INTERNAL; /* a handler refused the response */
		finish(x, err, x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
	}
}

static void reap_doomed(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *up = arg;
	(void)fd;
	(void)what;
	struct list *first;
	while ((first = list_first(&up->doomed)) != NULL)
		xfer_release(LIST_ITEM(first, struct up_xfer, doomed_link)); /* unlinks it */
}

/* ---- timeouts kept by us: first byte and idle (libcurl has only connect and
 * overall/low-speed limits, and a paused stream must not count as idle). ---- */

static void arm_timer(struct up_xfer *x, long long ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(x->timer, &tv);
}

static void on_xfer_timer(evutil_socket_t fd, short what, void *arg)
{
	struct up_xfer *x = arg;
	(void)fd;
	(void)what;
	if (!x->active)
		return;
	if (x->aborted) {
		xfer_release(x);
		return;
	}
	long long now = clock_now_ms();
	bool sending = x->body_streamed && !x->body_done && !x->headers_done;
	long long left;
	if (x->headers_done || sending) {
		long long idle = (long long)x->prov->timeouts.idle_s * 1000;
		/* A paused transfer waits for the client, not for the upstream:
		 * to read the answer, or to send more of its body. */
		bool waiting = x->headers_done ? x->paused : x->send_paused;
		left = waiting ? idle : x->last_ms + idle - now;
		if (waiting)
			x->last_ms = now;
	} else {
		left = x->wait_from_ms + (long long)x->prov->timeouts.first_byte_s * 1000 - now;
	}
	if (left > 0) {
		arm_timer(x, left);
		return;
	}
	/* The detail names the setting that fired (logged as upstream_detail). */
	finish(x, UP_TIMEOUT,
	       x->headers_done ? "no upstream bytes within timeouts.idle_s"
	       : sending       ? "the upstream took no bytes of the upload within timeouts.idle_s"
	                       : "no response headers within timeouts.first_byte_s");
}

/* ---- libcurl callbacks ---- */

static bool parse_status_line(struct up_xfer *x, const char *line, size_t len)
{
	/* "HTTP/1.1 200 OK\r\n" or "HTTP/2 200 \r\n" */
	const char *sp = memchr(line, ' ', len);
	if (sp == NULL || len - (size_t)(sp - line) < 4)
		return false;
	const char *p = sp + 1;
	int status = 0;
	for (int i = 0; i < 3; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		status = status * 10 + (p[i] - '0');
	}
	x->status = status;
	const char *r = p + 3;
	const char *end = line + len;
	while (r < end && *r == ' ')
		r++;
	size_t rlen = (size_t)(end - r);
	while (rlen > 0 && (r[rlen - 1] == '\r' || r[rlen - 1] == '\n' || r[rlen - 1] == ' '))
		rlen--;
	if (rlen >= sizeof(x->reason))
		rlen = sizeof(x->reason) - 1;
	memcpy(x->reason, r, rlen);
	x->reason[rlen] = '\0';
	return true;
}

static bool store_header(struct up_xfer *x, const char *line, size_t len)
{
	const char *name, *value;
	size_t nlen, vlen;
	if (!hdr_split_line(line, len, &name, &nlen, &value, &vlen))
		return true;                     /* continuation lines and junk are dropped */
	size_t need = x->hlen + nlen + vlen + 2; /* both NUL-terminated */
	if (x->nh == UP_HEADERS_MAX || need > UP_HEADER_BYTES_MAX)
		return false;
	if (!grow_bytes(&x->hbuf, &x->hcap, need, 1024))
		return false;
	if (x->nh == x->hoff_cap) {
		size_t cap = x->hoff_cap ? x->hoff_cap * 2 : 32;
		struct hdr_off *no = realloc(x->hoff, cap * sizeof(*no));
		if (no == NULL)
			return false;
		x->hoff = no;
		x->hoff_cap = cap;
	}
	struct hdr_off *o = &x->hoff[x->nh++];
	o->name = (unsigned)x->hlen;
	o->name_len = (unsigned)nlen;
	memcpy(x->hbuf + x->hlen, name, nlen);
	x->hbuf[x->hlen + nlen] = '\0';
	x->hlen += nlen + 1;
	o->value = (unsigned)x->hlen;
	o->value_len = (unsigned)vlen;
	memcpy(x->hbuf + x->hlen, value, vlen);
	x->hbuf[x->hlen + vlen] = '\0';
	x->hlen += vlen + 1;
	return true;
}

static bool headers_complete(struct up_xfer *x)
{
	struct up_header hs[UP_HEADERS_MAX];
	for (size_t i = 0; i < x->nh; i++) {
		hs[i].name = x->hbuf + x->hoff[i].name;
		hs[i].name_len = x->hoff[i].name_len;
		hs[i].value = x->hbuf + x->hoff[i].value;
		hs[i].value_len = x->hoff[i].value_len;
	}
	x->headers_done = true;
	x->last_ms = clock_now_ms();
	evtimer_del(x->timer);
	arm_timer(x, (long long)x->prov->timeouts.idle_s * 1000);
	return x->h->on_headers(x->ctx, x->status, x->reason, hs, x->nh);
}

static size_t header_cb(char *data, size_t size, size_t n, void *arg)
{
	struct up_xfer *x = arg;
	size_t len = size * n;
	if (x->aborted)
		return 0;
	if (x->headers_done)
		return len; /* trailers after a chunked body: not relayed */
	if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
		/* A new response head: forget an interim 1xx one. */
		x->nh = 0;
		x->hlen = 0;
		return parse_status_line(x, data, len) ? len : 0;
	}
	if (len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
		if (x->status >= 100 && x->status < 200)
			return len; /* interim response: wait for the final one */
		return headers_complete(x) ? len : 0;
	}
	if (!store_header(x, data, len)) {
		x->too_large = true;
		return 0;
	}
	return len;
}

/* libcurl has its connection (made or reused) and writes the request next:
 * the instant the request leaves, as near as pacerd can see it. */
static int prereq_cb(void *arg, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
	struct up_xfer *x = arg;
	(void)primary_ip;
	(void)local_ip;
	(void)primary_port;
	(void)local_port;
	if (!x->aborted && x->h->on_sent != NULL)
		x->h->on_sent(x->ctx);
	return x->aborted ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
}

static size_t write_cb(char *data, size_t size, size_t n, void *arg)
{
	struct up_xfer *x = arg;
	size_t len = size * n;
	if (x->aborted)
		return 0;
	x->last_ms = clock_now_ms();
	if (!x->h->on_body(x->ctx, data, len)) {
		x->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	return len;
}

/* A streamed body's bytes (up_request.body_streamed), from the handler. */
static size_t read_cb(char *buf, size_t size, size_t n, void *arg)
{
	struct up_xfer *x = arg;
	size_t got = 0;
	if (x->aborted)
		return CURL_READFUNC_ABORT;
	switch (x->h->on_read(x->ctx, buf, size * n, &got)) {
	case UP_READ_DATA:
		x->last_ms = clock_now_ms();
		return got;
	case UP_READ_WAIT:
		x->send_paused = true;
		return CURL_READFUNC_PAUSE;
	case UP_READ_END:
		if (!x->body_done && !x->headers_done) {
			/* The whole request is out: the answer is awaited from now. */
			x->wait_from_ms = clock_now_ms();
			arm_timer(x, (long long)x->prov->timeouts.first_byte_s * 1000);
		}
		x->body_done = true;
		return 0;
	case UP_READ_ABORT:
		break;
	}
	return CURL_READFUNC_ABORT;
}

/* libcurl resends the request on a fresh connection (a reused one died
 * before any answer) and must read its body from the start. */
static int seek_cb(void *arg, curl_off_t offset, int origin)
{
	struct up_xfer *x = arg;
	if (x->aborted || offset != 0 || origin != SEEK_SET || x->h->on_rewind == NULL ||
	    !x->h->on_rewind(x->ctx))
		return CURL_SEEKFUNC_CANTSEEK;
	x->body_done = false;
	return CURL_SEEKFUNC_OK;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct up_xfer *x = arg;
	(void)fd;
	(void)what;
	bool recv = x->resume_recv && x->paused, send = x->resume_send && x->send_paused;
	x->resume_recv = x->resume_send = false;
	if (!x->active || x->aborted || (!recv && !send))
		return;
	if (recv)
		x->paused = false;
	if (send)
		x->send_paused = false;
	x->last_ms = clock_now_ms();
	x->up->in_curl++;
	/* May deliver the held bytes to write_cb right here, which may pause
	 * again; the direction still waiting stays paused. */
	curl_easy_pause(x->easy,
	                (x->paused ? CURLPAUSE_RECV : 0) | (x->send_paused ? CURLPAUSE_SEND : 0));
	x->up->in_curl--;
	/* Kick the transfer: libcurl armed its timer; run it now. */
	socket_action(x->up, CURL_SOCKET_TIMEOUT, 0);
}

/* ---- pool and lifecycle ---- */

static struct up_xfer *xfer_get(struct upstream *up)
{
	struct up_xfer *x = pool_get(&up->xfer_pool);
	if (x != NULL) {
		curl_easy_reset(x->easy);
		return x;
	}
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return NULL;
	x->up = up;
	x->easy = curl_easy_init();
	x->timer = evtimer_new(up->base, on_xfer_timer, x);
	x->resume = event_new(up->base, -1, 0, on_resume, x);
	if (x->easy == NULL || x->timer == NULL || x->resume == NULL) {
		if (x->easy)
			curl_easy_cleanup(x->easy);
		if (x->timer)
			event_free(x->timer);
		if (x->resume)
			event_free(x->resume);
		free(x);
		return NULL;
	}
	return x;
}

static void xfer_destroy(void *obj)
{
	struct up_xfer *x = obj;
	curl_easy_cleanup(x->easy);
	event_free(x->timer);
	event_free(x->resume);
	free(x->hbuf);
	free(x->hoff);
	free(x);
}

/* Removes a transfer from the multi handle and returns it to the pool. Never
 * called with libcurl on the stack. */
static void xfer_release(struct up_xfer *x)
{
	struct upstream *up = x->up;
	if (x->doomed) {
		list_remove(&x->doomed_link);
		x->doomed = false;
	}
	if (x->active) {
		curl_multi_remove_handle(up->multi, x->easy);
		x->active = false;
		list_remove(&x->link);
	}
	evtimer_del(x->timer);
	event_del(x->resume);
	x->h = NULL;
	x->ctx = NULL;
	if (!pool_put(&up->xfer_pool, x))
		xfer_destroy(x);
}

void upstream_abort(struct up_xfer *x)
{
	if (x == NULL || x->aborted)
		return;
	x->aborted = true;
	x->ctx = NULL;
	struct upstream *up = x->up;
	if (up->in_curl == 0) {
		xfer_release(x);
		return;
	}
	/* libcurl is on the stack (this came from one of our callbacks): the
	 * callbacks now refuse data, and the handle is removed next loop turn. */
	x->doomed = true;
	list_insert_head(&up->doomed, &x->doomed_link);
	event_active(up->reap, 0, 0);
}

void upstream_resume(struct up_xfer *x)
{
	if (x != NULL && x->paused && !x->aborted) {
		x->resume_recv = true;
		event_active(x->resume, 0, 0);
	}
}

void upstream_resume_send(struct up_xfer *x)
{
	if (x != NULL && x->send_paused && !x->aborted) {
		x->resume_send = true;
		event_active(x->resume, 0, 0);
	}
}

static void set_method(struct up_xfer *x, const struct up_request *r)
{
	CURL *e = x->easy;
	const char *m = r->method;
	if (r->body_streamed) {
		/* Read as it arrives: with Content-Length when the client gave
		 * one, else chunked (-1); CUSTOMREQUEST keeps PUT or PATCH. */
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, x);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_size);
		if (strcmp(m, "POST") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
		return;
	}
	if (strcmp(m, "GET") == 0 && r->body_len == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
		return;
	}
	if (strcmp(m, "HEAD") == 0) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		return;
	}
	bool body_method =
	    strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0;
	if (r->body_len > 0 || body_method) {
		/* POSTFIELDS sends the body as is, with Content-Length, and is
		 * reusable for a retry; CUSTOMREQUEST keeps the client's method. */
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body_len ? r->body : "");
	}
	if (strcmp(m, "POST") != 0 && strcmp(m, "GET") != 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
	else if (strcmp(m, "GET") == 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "GET");
}

struct up_xfer *upstream_start(struct upstream *up, const struct up_request *r,
                               const struct up_handler *h, void *ctx)
{
	struct up_xfer *x = xfer_get(up);
	if (x == NULL)
		return NULL;
	x->h = h;
	x->ctx = ctx;
	x->prov = r->provider;
	x->status = 0;
	x->reason[0] = '\0';
	x->nh = 0;
	x->hlen = 0;
	x->headers_done = x->paused = x->aborted = x->too_large = false;
	x->body_streamed = r->body_streamed;
	x->send_paused = x->body_done = x->resume_recv = x->resume_send = false;
	x->last_ms = x->wait_from_ms = clock_now_ms();

	CURL *e = x->easy;
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	x->errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_SHARE, up->share);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket_cb);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, up);
	curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_socket_cb);
	curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, up);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, prereq_cb);
	curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	/* Bytes in, bytes out: no decompression, no path normalisation. */
	curl_easy_setopt(e, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)r->provider->timeouts.connect_s);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
	                 r->provider->http2 ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, r->provider->tls.verify ? 1L : 0L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, r->provider->tls.verify ? 2L : 0L);
	if (r->provider->tls.ca_file != NULL && r->provider->tls.ca_file[0] != '\0')
		curl_easy_setopt(e, CURLOPT_CAINFO, r->provider->tls.ca_file);
	set_method(x, r);

	/* Sending a streamed body, the upstream must keep taking it (idle_s);
	 * then, or at once, the answer must begin (first_byte_s). */
	arm_timer(x, (long long)(r->body_streamed ? r->provider->timeouts.idle_s
	                                          : r->provider->timeouts.first_byte_s) *
	                 1000);
	if (curl_multi_add_handle(up->multi, e) != CURLM_OK) {
		evtimer_del(x->timer);
		x->h = NULL;
		if (!pool_put(&up->xfer_pool, x))
			xfer_destroy(x);
		return NULL;
	}
	x->active = true;
	list_insert_head(&up->active, &x->link);
	return x;
}

size_t upstream_trim(struct upstream *up, bool all)
{
	return pool_trim(&up->xfer_pool, all, xfer_destroy);
}

struct upstream *upstream_new(struct event_base *base, char *err, size_t errlen)
{
	struct upstream *up = calloc(1, sizeof(*up));
	if (up == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pool_init(&up->xfer_pool, offsetof(struct up_xfer, link), 0);
	list_init(&up->active);
	list_init(&up->doomed);
	pool_init(&up->sock_pool, offsetof(struct sock_ev, link), 0);
	up->base = base;
	up->multi = curl_multi_init();
	up->share = curl_share_init();
	up->timer = evtimer_new(base, on_multi_timer, up);
	up->reap = event_new(base, -1, 0, reap_doomed, up);
	if (up->multi == NULL || up->share == NULL || up->timer == NULL || up->reap == NULL) {
		snprintf(err, errlen, "cannot initialise libcurl multi handle");
		upstream_free(up);
		return NULL;
	}
	/* TLS sessions and DNS answers are reused across transfers. */
	curl_share_setopt(up->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(up->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_multi_setopt(up->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(up->multi, CURLMOPT_SOCKETDATA, up);
	curl_multi_setopt(up->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(up->multi, CURLMOPT_TIMERDATA, up);
	/* A large keep-alive pool: idle upstream connections are cheap, new TLS
	 * handshakes are not. */
	curl_multi_setopt(up->multi, CURLMOPT_MAXCONNECTS, 1024L);
	return up;
}

void upstream_free(struct upstream *up)
{
	if (up == NULL)
		return;
	struct list *first;
	while ((first = list_first(&up->active)) != NULL) {
		struct up_xfer *x = LIST_ITEM(first, struct up_xfer, link);
		x->aborted = true;
		xfer_release(x);
	}
	pool_trim(&up->xfer_pool, true, xfer_destroy);
	if (up->multi)
		curl_multi_cleanup(up->multi); /* closes the pool through close_socket_cb */
	for (size_t fd = 0; fd < up->n_socks; fd++)
		if (up->socks[fd] != NULL)
			sock_put(up->socks[fd]);
	pool_trim(&up->sock_pool, true, free);
	free(up->socks);
	if (up->share)
		curl_share_cleanup(up->share);
	if (up->timer)
		event_free(up->timer);
	if (up->reap)
		event_free(up->reap);
	free(up);
}
