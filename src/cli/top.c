/* SPDX-License-Identifier: Apache-2.0 */
/* top — `pacerd top` (see top.h): flags, the /status polls and the
 * terminal. Everything that can be computed without I/O is in top_model. */
#include "cli/top.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/top_model.h"
#include "core/clock.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

/* /status is a few hundred bytes per lane: 16 MiB is tens of thousands of
 * lanes, and a hard cap against an endpoint that never stops talking. */
#define MAX_BODY (16u << 20)
#define MAX_INTERVAL_S 3600.0

struct top_opts {
	const char *admin;
	double interval_s;
	long count; /* polls before exiting; 0 = until q or a signal */
	bool help;
};

/* ---- command line ---- */

static void usage(FILE *out)
{
	fputs("usage: pacerd top [--admin ADDR] [--interval SECONDS] [--count N]\n"
	      "\n"
	      "A live view of a running pacerd's admin /status: uptime, requests in flight,\n"
	      "req/s, responses by class, 429s absorbed, then one row per lane (queue and its\n"
	      "ETA, in flight / concurrency limit, req/s against the configured rate or the\n"
	      "learned pace (~), learned remaining and reset, 429s of the last minute, state,\n"
	      "what sets the limit: aimd (refusals), or the latency controller's last reason,\n"
	      "with the time per output token and to the first token, now/queue-free in ms).\n"
	      "Keys: q quit, s cycle the sort (activity, queue, key, provider), up/down scroll.\n"
	      "When stdout is not a terminal: one summary line per poll.\n"
	      "\n"
	      "  --admin ADDR        host:port of the admin listener (default 127.0.0.1:9090);\n"
	      "                      PACERD_ADMIN_TOKEN, when set, is sent as the bearer token\n"
	      "  --interval SECONDS  time between polls (default 1)\n"
	      "  --count N           exit after N polls\n"
	      "  --help              print this help and exit\n"
	      "\n"
	      "Exit status: 0, 1 the admin refused the token or the last poll failed,\n"
	      "2 bad usage.\n",
	      out);
}

static int parse_interval(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno != 0 || !(v >= 0.1) ||
	    v > MAX_INTERVAL_S)
		return -1;
	*out = v;
	return 0;
}

static int parse_count(const char *s, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno != 0 || v < 1)
		return -1;
	*out = v;
	return 0;
}

/* 0, or -1 after naming the bad flag on stderr. */
static int parse_args(int argc, char **argv, struct top_opts *o)
{
	o->admin = "127.0.0.1:9090";
	o->interval_s = 1.0;
	o->count = 0;
	o->help = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			o->help = true;
			continue;
		}
		bool admin = strcmp(a, "--admin") == 0;
		bool interval = strcmp(a, "--interval") == 0;
		bool count = strcmp(a, "--count") == 0;
		if (!admin && !interval && !count) {
			fprintf(stderr, "pacerd top: unknown option '%s' (pacerd top --help)\n", a);
			return -1;
		}
		const char *v = i + 1 < argc ? argv[++i] : NULL;
		if (v == NULL || v[0] == '\0') {
			fprintf(stderr, "pacerd top: %s needs a value\n", a);
			return -1;
		}
		if (admin)
			o->admin = v;
		else if (interval && parse_interval(v, &o->interval_s) != 0) {
			fprintf(stderr, "pacerd top: --interval: '%s' is not 0.1 to 3600 seconds\n",
			        v);
			return -1;
		} else if (count && parse_count(v, &o->count) != 0) {
			fprintf(stderr, "pacerd top: --count: '%s' is not a count of at least 1\n",
			        v);
			return -1;
		}
	}
	return 0;
}

/* ---- polls ---- */

struct poller {
	CURL *curl;
	struct curl_slist *headers;
	char url[256];
	char *body;
	size_t len;
	bool too_big;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct poller *p = arg;
	size_t n = size * nmemb;
	if (p->len + n > MAX_BODY) {
		p->too_big = true;
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	}
	char *grown = realloc(p->body, p->len + n + 1);
	if (grown == NULL)
		return 0;
	p->body = grown;
	memcpy(p->body + p->len, data, n);
	p->len += n;
	p->body[p->len] = '\0';
	return n;
}

static int poller_init(struct poller *p, const char *admin, double interval_s)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->url, sizeof(p->url), "http://%s/status", admin);
	p->curl = curl_easy_init();
	if (p->curl == NULL)
		return -1;
	const char *token = getenv("PACERD_ADMIN_TOKEN");
	if (token != NULL && token[0] != '\0') {
		char auth[1024];
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		p->headers = curl_slist_append(NULL, auth);
		curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->headers);
	}
	/* A poll never takes longer than the time between two, nor less than 1 s:
	 * a stuck admin shows as an error row instead of a frozen screen. */
	long timeout_ms = (long)(interval_s * 1000);
	curl_easy_setopt(p->curl, CURLOPT_URL, p->url);
	curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, p);
	curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
	curl_easy_setopt(p->curl, CURLOPT_TIMEOUT_MS, timeout_ms > 1000 ? timeout_ms : 1000L);
	curl_easy_setopt(p->curl, CURLOPT_PROXY, ""); /* the admin is local: no http_proxy */
	curl_easy_setopt(p->curl, CURLOPT_PROTOCOLS_STR, "http");
	return 0;
}

static void poller_free(struct poller *p)
{
	if (p->curl != NULL)
		curl_easy_cleanup(p->curl);
	curl_slist_free_all(p->headers);
	free(p->body);
}

enum poll_result {
	POLL_OK,
	POLL_FAILED,  /* unreachable, timed out, not /status: try again next time */
	POLL_REFUSED, /* 401/403: the token is wrong, trying again will not help */
};

/* One GET /status; on POLL_OK *out is the parsed document (the caller's). */
static enum poll_result poll_status(struct poller *p, json_t **out, char *err, size_t errlen)
{
	p->len = 0;
	p->too_big = false;
	CURLcode rc = curl_easy_perform(p->curl);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s: %s", p->url,
		         p->too_big ? "the answer is over 16 MiB" : curl_easy_strerror(rc));
		return POLL_FAILED;
	}
	long status = 0;
	curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status == 401 || status == 403) {
		snprintf(err, errlen,
		         "%s: %ld: the admin listener refused the token (%s); set "
		         "PACERD_ADMIN_TOKEN to its admin.token",
		         p->url, status,
		         p->headers != NULL ? "PACERD_ADMIN_TOKEN" : "none was sent");
		return POLL_REFUSED;
	}
	if (status != 200) {
		snprintf(err, errlen, "%s: HTTP %ld", p->url, status);
		return POLL_FAILED;
	}
	json_error_t jerr;
	*out = json_loadb(p->body ? p->body : "", p->len, 0, &jerr);
	if (*out == NULL) {
		snprintf(err, errlen, "%s: not JSON: %s", p->url, jerr.text);
		return POLL_FAILED;
	}
	return POLL_OK;
}

/* Polls and feeds the model; a failure becomes the model's error line. */
static enum poll_result poll_into(struct poller *p, struct top_model *m)
{
	char err[1024] = "";
	json_t *doc = NULL;
	enum poll_result r = poll_status(p, &doc, err, sizeof(err));
	if (r == POLL_OK && top_model_update(m, doc, clock_fresh_ms(), err, sizeof(err)) != 0)
		r = POLL_FAILED;
	json_decref(doc);
	if (r != POLL_OK)
		top_model_set_error(m, err);
	return r;
}

/* ---- signals: handlers only set flags; the main path acts on them ---- */

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t resized;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

/* Without SA_RESTART: a signal interrupts poll() and nanosleep() at once. */
static void install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
}

/* ---- not a terminal: one line per poll ---- */

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL); /* EINTR: a stop signal; the loop checks the flag */
}

static int run_lines(const struct top_opts *o, struct poller *p, struct top_model *m)
{
	enum poll_result last = POLL_OK;
	for (long n = 0; !stop_requested && (o->count == 0 || n < o->count); n++) {
		if (n > 0)
			sleep_s(o->interval_s);
		if (stop_requested)
			break;
		last = poll_into(p, m);
		if (last == POLL_REFUSED) {
			fprintf(stderr, "pacerd top: %s\n", top_model_error(m));
			return EXIT_ERROR;
		}
		char line[TOP_LINE_MAX];
		top_format_summary(m, time(NULL), line, TOP_LINE_MAX - 1);
		if (printf("%s\n", line) < 0 || fflush(stdout) != 0)
			return EXIT_ERROR; /* a closed pipe: nobody reads any more */
	}
	return last == POLL_OK ? EXIT_OK : EXIT_ERROR;
}

/* ---- the terminal ---- */

struct term {
	struct termios saved;
	bool raw;
	size_t width, height;
	size_t scroll; /* the first row shown */
};

static void write_all(const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(STDOUT_FILENO, s, n);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void term_size(struct term *t)
{
	struct winsize ws;
	t->width = 80;
	t->height = 24;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
		t->width = ws.ws_col;
		t->height = ws.ws_row;
	}
}

/* Raw mode (keys one at a time, no echo, ^C a key rather than SIGINT), the
 * alternate screen, the cursor hidden. */
static int term_enter(struct term *t)
{
	if (tcgetattr(STDIN_FILENO, &t->saved) == -1)
		return -1;
	struct termios raw = t->saved;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
	raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == -1)
		return -1;
	t->raw = true;
	static const char enter[] = "\033[?1049h\033[?25l\033[H\033[2J";
	write_all(enter, sizeof(enter) - 1);
	term_size(t);
	return 0;
}

static void term_leave(struct term *t)
{
	if (!t->raw)
		return;
	static const char leave[] = "\033[?25h\033[?1049l";
	write_all(leave, sizeof(leave) - 1);
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	t->raw = false;
}

/* Appends one screen line: cut to the width, the rest of the line erased. */
static void screen_line(char *out, size_t cap, size_t *len, const char *line)
{
	int n = snprintf(out + *len, cap - *len, "%s\033[K\r\n", line);
	if (n > 0 && (size_t)n < cap - *len)
		*len += (size_t)n;
}

/* Lines of the screen above the rows: two of header, the error (or blank),
 * the column titles. */
#define HEAD_LINES 4

static void render(struct term *t, const struct top_model *m, const char *admin)
{
	size_t width = t->width < TOP_LINE_MAX ? t->width : TOP_LINE_MAX - 1;
	size_t cap = (t->height + 1) * (TOP_LINE_MAX + 16);
	char *out = malloc(cap);
	if (out == NULL)
		return;
	char line[TOP_LINE_MAX];
	size_t len = 0;
	memcpy(out, "\033[H", 3);
	len = 3;
	top_format_header(m, 0, admin, line, width);
	screen_line(out, cap, &len, line);
	top_format_header(m, 1, admin, line, width);
	screen_line(out, cap, &len, line);
	snprintf(line, sizeof(line), "%s%s", top_model_error(m)[0] ? "error: " : "",
	         top_model_error(m));
	top_fit(line, width);
	screen_line(out, cap, &len, line);
	top_format_columns(line, width);
	screen_line(out, cap, &len, line);

	size_t n_rows = top_model_n_rows(m);
	size_t room = t->height > HEAD_LINES ? t->height - HEAD_LINES : 0;
	if (t->scroll + room > n_rows)
		t->scroll = n_rows > room ? n_rows - room : 0;
	for (size_t i = 0; i < room && t->scroll + i < n_rows; i++) {
		top_format_row(top_model_row(m, t->scroll + i), line, width);
		/* The last line has no newline: it would scroll the screen. */
		if (i + 1 == room) {
			int k = snprintf(out + len, cap - len, "%s\033[K", line);
			if (k > 0 && (size_t)k < cap - len)
				len += (size_t)k;
		} else
			screen_line(out, cap, &len, line);
	}
	if (len + 4 < cap) {
		memcpy(out + len, "\033[J", 3); /* erase what a longer screen left */
		len += 3;
	}
	write_all(out, len);
	free(out);
}

enum key_action { KEY_NONE, KEY_QUIT, KEY_SORT, KEY_UP, KEY_DOWN };

/* What one read() returned: q (or ^C) anywhere in it quits (keys typed while
 * a poll was under way come in one read: an arrow before the q must not eat
 * it); else the first of s and the arrow keys as ESC [ A / ESC O A (the
 * cursor-key mode a terminal may be in). */
static enum key_action key_action(const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] == 'q' || buf[i] == 'Q' || buf[i] == 3)
			return KEY_QUIT;
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == 's' || c == 'S')
			return KEY_SORT;
		if (c == '\033' && i + 2 < n && (buf[i + 1] == '[' || buf[i + 1] == 'O')) {
			if (buf[i + 2] == 'A')
				return KEY_UP;
			if (buf[i + 2] == 'B')
				return KEY_DOWN;
			i += 2;
		}
	}
	return KEY_NONE;
}

/* true: quit. */
static bool handle_keys(struct term *t, struct top_model *m)
{
	char buf[64];
	ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
	if (n == 0)
		return true; /* the terminal went away */
	if (n < 0)
		return false;
	switch (key_action(buf, (size_t)n)) {
	case KEY_QUIT:
		return true;
	case KEY_SORT:
		top_model_sort(m, (enum top_sort)((top_model_sort_key(m) + 1) % TOP_N_SORTS));
		t->scroll = 0;
		break;
	case KEY_UP:
		if (t->scroll > 0)
			t->scroll--;
		break;
	case KEY_DOWN:
		t->scroll++; /* render clamps it */
		break;
	case KEY_NONE:
		break;
	}
	return false;
}

static int run_screen(const struct top_opts *o, struct poller *p, struct top_model *m)
{
	struct term t;
	memset(&t, 0, sizeof(t));
	if (term_enter(&t) != 0) {
		fprintf(stderr, "pacerd top: cannot set the terminal: %s\n", strerror(errno));
		return EXIT_ERROR;
	}
	int status = EXIT_OK;
	long polls = 0;
	long long next_poll = clock_fresh_ms();
	while (!stop_requested) {
		long long now = clock_fresh_ms();
		if (now >= next_poll) {
			enum poll_result r = poll_into(p, m);
			if (r == POLL_REFUSED) {
				status = EXIT_ERROR;
				break;
			}
			polls++;
			next_poll = now + (long long)(o->interval_s * 1000);
			render(&t, m, o->admin);
			if (o->count > 0 && polls >= o->count)
				break;
			continue;
		}
		if (resized) {
			resized = 0;
			term_size(&t);
			write_all("\033[2J", 4);
			render(&t, m, o->admin);
		}
		struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
		int ready = poll(&pfd, 1, (int)(next_poll - now));
		if (ready > 0 && (pfd.revents & (POLLHUP | POLLERR)) != 0)
			break;
		if (ready > 0 && handle_keys(&t, m))
			break;
		if (ready > 0)
			render(&t, m, o->admin);
	}
	term_leave(&t);
	if (status != EXIT_OK)
		fprintf(stderr, "pacerd top: %s\n", top_model_error(m));
	return status;
}

int top_main(int argc, char **argv)
{
	struct top_opts o;
	if (parse_args(argc, argv, &o) != 0)
		return EXIT_USAGE;
	if (o.help) {
		usage(stdout);
		return EXIT_OK;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "pacerd top: libcurl failed to start\n");
		return EXIT_ERROR;
	}
	struct poller p;
	memset(&p, 0, sizeof(p));
	struct top_model *m = top_model_new();
	int status = EXIT_ERROR;
	if (m == NULL || poller_init(&p, o.admin, o.interval_s) != 0)
		fprintf(stderr, "pacerd top: out of memory\n");
	else {
		install_signals();
		bool tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
		status = tty ? run_screen(&o, &p, m) : run_lines(&o, &p, m);
	}
	poller_free(&p);
	top_model_free(m);
	curl_global_cleanup();
	return status;
}
