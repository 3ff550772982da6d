/* SPDX-License-Identifier: Apache-2.0 */
/* floor — the ceiling of pacerd's stack, for make bench's "floor" row: a
 * forwarder built from the same libraries and nothing else (libevent's evhttp
 * in, one libcurl multi handle on the same loop out, no routing, no keys, no
 * pacing, no logging). What it reaches is what the libraries allow on this
 * machine; the distance from it to pacerd is pacerd's own, the distance from
 * it to nginx the stack's.
 *
 *   bench-floor PORT UPSTREAM        (UPSTREAM: http://127.0.0.1:PORT)
 *
 * Every request is forwarded as a POST of its body to UPSTREAM + its URI with
 * its content-type; the answer's status and body go back. Easy handles are
 * reused (a free list), sockets keep one event each, changed only when libcurl
 * asks for another mask. */
#include <curl/curl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct xfer {
	struct xfer *next_free;
	struct evhttp_request *req;
	CURL *easy;
	struct evbuffer *out;
	char *body;
	char url[512];
};

/* A socket libcurl watches: its event, re-armed only when the mask changes. */
struct sock {
	struct event *ev;
	int what;
};

static struct event_base *base;
static CURLM *multi;
static struct event *timer;
static struct curl_slist *headers;
static struct xfer *free_list;
static char upstream[256];

static void check_done(void)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct xfer *x;
		long code = 502;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		if (m->data.result == CURLE_OK)
			curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
		curl_multi_remove_handle(multi, x->easy);
		struct evkeyvalq *h = evhttp_request_get_output_headers(x->req);
		evhttp_add_header(h, "content-type", "application/json");
		evhttp_send_reply(x->req, (int)code, "", x->out);
		free(x->body);
		x->body = NULL;
		x->req = NULL;
		x->next_free = free_list;
		free_list = x;
	}
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
	(void)arg;
	int running;
	int flags = ((what & EV_READ) != 0 ? CURL_CSELECT_IN : 0) |
	            ((what & EV_WRITE) != 0 ? CURL_CSELECT_OUT : 0);
	curl_multi_socket_action(multi, fd, flags, &running);
	check_done();
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	int running;
	curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done();
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	(void)easy;
	(void)userp;
	struct sock *k = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (k != NULL) {
			event_free(k->ev);
			free(k);
			curl_multi_assign(multi, s, NULL);
		}
		return 0;
	}
	short ev = (short)(((what & CURL_POLL_IN) != 0 ? EV_READ : 0) |
	                   ((what & CURL_POLL_OUT) != 0 ? EV_WRITE : 0) | EV_PERSIST);
	if (k == NULL) {
		k = calloc(1, sizeof(*k));
		if (k == NULL)
			return -1;
		curl_multi_assign(multi, s, k);
	} else if (k->what == what) {
		return 0;
	} else {
		event_free(k->ev);
	}
	k->what = what;
	k->ev = event_new(base, s, ev, on_socket_event, NULL);
	event_add(k->ev, NULL);
	return 0;
}

static int timer_cb(CURLM *m, long ms, void *userp)
{
	(void)m;
	(void)userp;
	if (ms < 0) {
		evtimer_del(timer);
		return 0;
	}
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(timer, &tv);
	return 0;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	evbuffer_add(x->out, p, size * n);
	return size * n;
}

static void on_request(struct evhttp_request *req, void *arg)
{
	(void)arg;
	struct xfer *x = free_list;
	if (x != NULL) {
		free_list = x->next_free;
		curl_easy_reset(x->easy);
	} else {
		x = calloc(1, sizeof(*x));
		if (x == NULL || (x->easy = curl_easy_init()) == NULL ||
		    (x->out = evbuffer_new()) == NULL) {
			evhttp_send_error(req, 500, NULL);
			return;
		}
	}
	evbuffer_drain(x->out, evbuffer_get_length(x->out));
	x->req = req;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	x->body = malloc(len + 1);
	evbuffer_remove(in, x->body, len);
	snprintf(x->url, sizeof(x->url), "%s%s", upstream, evhttp_request_get_uri(req));
	curl_easy_setopt(x->easy, CURLOPT_URL, x->url);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
	curl_multi_add_handle(multi, x->easy);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: bench-floor PORT UPSTREAM\n");
		return 2;
	}
	snprintf(upstream, sizeof(upstream), "%s", argv[2]);
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	base = event_base_new();
	multi = curl_multi_init();
	timer = evtimer_new(base, on_timer, NULL);
	headers = curl_slist_append(NULL, "content-type: application/json");
	headers = curl_slist_append(headers, "Expect:");
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 1024L);
	char *end;
	long port = strtol(argv[1], &end, 10);
	struct evhttp *http = evhttp_new(base);
	if (*end != '\0' || port < 1 || port > 65535 || http == NULL ||
	    evhttp_bind_socket(http, "127.0.0.1", (ev_uint16_t)port) != 0) {
		fprintf(stderr, "bench-floor: cannot listen on 127.0.0.1:%s\n", argv[1]);
		return 1;
	}
	evhttp_set_allowed_methods(http, EVHTTP_REQ_POST | EVHTTP_REQ_GET);
	evhttp_set_gencb(http, on_request, NULL);
	event_base_dispatch(base);
	return 0;
}
