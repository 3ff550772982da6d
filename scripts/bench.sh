#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make bench: pacerd against nginx (Debian's), in one run, on this machine.
#
#   scripts/bench.sh [OUT.json]          (make bench; default OUT: $BUILD/bench.json)
#
# The proxy under test runs pinned to one core (BENCH_PROXY_CPU, 0), the load
# generator (wrk, a 1 KiB POST /v1/chat/completions) and the upstreams pinned to
# another (BENCH_LOAD_CPU, 1). Upstream for throughput: a second nginx answering a
# fixed 613-byte chat.completion, on a plain and on an HTTPS port (throwaway CA made
# here with openssl); for SSE and idle streams: build/pacerd-mock. Measured:
#
#   throughput   req/s and proxy CPU µs per request (utime+stime from /proc/PID/stat
#                over the run / requests) at each of BENCH_CONNS connections, plain
#                and HTTPS upstream: nginx, pacerd (no plan) and pacerd with a plan
#                far above the load; with a plain upstream also that plan decided in
#                a shared store (redis-server on the load core: pacerd+store, burst 1,
#                one script per dispatch; pacerd+batch, burst 1000, a batch of
#                permits per script on a busy lane), with Redis commands per request,
#                and the floor: tests/bench/floor.c, libevent in and libcurl multi out
#                with nothing between (the stack's ceiling); interleaved,
#                BENCH_REPS repetitions, medians
#   tunnel       req/s and pacerd CPU µs per request through a CONNECT tunnel pacerd
#                terminates (HTTPS_PROXY clients) beside base-URL requests to the same
#                pacerd, both from scripts/bench/tunnel_load.py (wrk cannot CONNECT)
#   memory       RSS of pacerd (no plan, plain upstream) and of nginx's worker: idle
#                (before the throughput runs), under load (the highest of VmRSS read
#                every 0.2 s during their plain runs) and after load (BENCH_RECOVER_S,
#                5, after the last throughput run)
#   frontier     the highest req/s at which the p99 added to the direct path stays
#                under 1, 5 and 10 ms: wrk with random pauses (frontier.lua) at rising
#                rates, BENCH_FRONTIER_CONNS (128) connections, BENCH_FRONTIER_REPS (3)
#                rounds of BENCH_FRONTIER_S (1) seconds per step, direct, pacerd and
#                nginx in turn (frontier.py)
#   latency      p50/p99 at 1 connection: direct, via pacerd (also with the plan in
#                the shared store: what a Redis round trip adds per dispatch), via nginx
#   syscalls     strace -c on the proxy while wrk runs BENCH_STRACE_S seconds
#   SSE          50 events 20 ms apart must arrive as 50 separate reads
#   first byte   time to the first byte and to the first token of a stream from
#                pacerd-mock, p50/p99, at 1 and 20 streams at a time, and the gaps between
#                its chunks (20 at a time: 5 chunks 20 ms apart): direct, via pacerd (no
#                plan, a warm lane) and via nginx, rounds alternating (first_byte.py);
#                added = path - direct
#   idle         streams held: BENCH_IDLE (20000) open, silent streams asked for, as
#                many as the limit of open files lets a proxy hold (2 descriptors a
#                stream: the client's and the upstream's), held BENCH_HOLD_S (5) more
#                seconds; RSS per stream
#   lanes        $BUILD/bench-lanes, when built
#
# Prints one table (ratios pacerd/nginx, then the figures LLM-gateway benchmarks
# compare: added latency, the frontier, first token and chunks, streams held, memory)
# and writes the same as JSON. Every run has a fixed length (BENCH_DURATION seconds,
# 5, after BENCH_WARMUP, 1; the frontier's steps are a fixed list): about 10 minutes
# in all with the defaults. Everything listens on 127.0.0.1; every process started
# here is stopped by its PID on exit. A path of the shared store (pacerd+store,
# pacerd+batch) that fails its first request is left out and named in the table, and
# the script then exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
here=scripts/bench

BUILD=${BUILD:-build}
OUT=${1:-${BENCH_JSON:-$BUILD/bench.json}}
DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-1}
REPS=${BENCH_REPS:-3}
read -ra CONNS <<<"${BENCH_CONNS:-64 256}"
STRACE_S=${BENCH_STRACE_S:-3}
IDLE=${BENCH_IDLE:-20000}
HOLD_S=${BENCH_HOLD_S:-5}
RECOVER_S=${BENCH_RECOVER_S:-5}
FRONTIER_CONNS=${BENCH_FRONTIER_CONNS:-128}
FRONTIER_S=${BENCH_FRONTIER_S:-1}
FRONTIER_REPS=${BENCH_FRONTIER_REPS:-3}
FRONTIER_RATES=${BENCH_FRONTIER_RATES:-}
PROXY_CPU=${BENCH_PROXY_CPU:-0}
LOAD_CPU=${BENCH_LOAD_CPU:-1}
SSE_CHUNKS=50
SSE_MS=20
FB_ROUNDS=${BENCH_FB_ROUNDS:-5}
PATH=$PATH:/usr/sbin:/sbin # Debian's nginx

fail() { echo "bench: $*" >&2; exit 1; }

# --- what it needs --------------------------------------------------------------
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1 (Debian package $2)"); }
need wrk wrk
need redis-server redis-server
need redis-cli redis-tools
need nginx nginx-light
need strace strace
need openssl openssl
need taskset util-linux
need python3 python3
need curl curl
need curl-config libcurl4-openssl-dev
((${#missing[@]} == 0)) || fail "missing: ${missing[*]}; scripts/install-deps.sh bench installs them (make bench does)"
for f in "$BUILD/pacerd" "$BUILD/pacerd-mock" "$BUILD/bench-floor"; do
	[ -x "$f" ] || fail "$f is not built (make bench builds it)"
done
[ "$(nproc)" -ge 2 ] || fail "needs 2 cores (proxy on one, load on the other); nproc says $(nproc)"
for cpu in "$PROXY_CPU" "$LOAD_CPU"; do
	taskset -c "$cpu" true 2>/dev/null || fail "cannot pin to CPU $cpu (set BENCH_PROXY_CPU / BENCH_LOAD_CPU)"
done
# Open files: as many as the hard limit allows, for every process started here. A
# proxy holds 2 descriptors per stream (the client's and the upstream's) beside its
# own few (pacerd: 12), the client and the mock 1: a proxy under NOFILE holds at
# most (NOFILE - its own) / 2 streams, so IDLE is cut to (NOFILE - 40) / 2.
NOFILE=$(ulimit -Hn)
[ "$NOFILE" = unlimited ] && NOFILE=1048576
ulimit -n "$NOFILE" 2>/dev/null || NOFILE=$(ulimit -n)
IDLE_ASKED=$IDLE
((IDLE <= (NOFILE - 40) / 2)) || IDLE=$(((NOFILE - 40) / 2))
((IDLE >= 100)) || fail "ulimit -n is $NOFILE: too few open files for 100 idle streams"
PY=$(python3 -c 'import sys; print(sys.executable)') # past any shim: started often
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg) # the machine may be shared: in the table
CLK_TCK=$(getconf CLK_TCK)

# --- processes: each one started here, stopped by PID ----------------------------
tmp=$(mktemp -d /tmp/pacerd-bench.XXXXXX)
chmod 711 "$tmp" # nginx workers may run as nobody
mkdir "$tmp/up" "$tmp/proxy" "$tmp/streams"
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.3
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CPU COMMAND...: in the background, pinned; its PID is $!.
start() {
	local name=$1 cpu=$2
	shift 2
	taskset -c "$cpu" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pids+=("$!")
}

# wait_port NAME PID PORT: until PORT accepts (10 s), or the process died.
wait_port() {
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$2" 2>/dev/null || { cat "$tmp/$1.err" >&2; fail "$1 exited at start"; }
		if (exec 3<>"/dev/tcp/127.0.0.1/$3") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	cat "$tmp/$1.err" >&2
	fail "$1 is not listening on $3 after 10 s"
}

# cputicks PID: utime + stime, in clock ticks (fields 14 and 15 of /proc/PID/stat).
cputicks() {
	local s f
	s=$(<"/proc/$1/stat")
	s=${s##*) }
	read -ra f <<<"$s"
	echo $((f[11] + f[12]))
}

# nginx_worker MASTER: the PID of the master's (single) worker process.
nginx_worker() {
	local f s f_
	for f in /proc/[0-9]*/stat; do
		s=$(cat "$f" 2>/dev/null) || continue
		s=${s##*) }
		read -ra f_ <<<"$s"
		if [ "${f_[1]}" = "$1" ]; then
			f=${f#/proc/}
			echo "${f%/stat}"
			return 0
		fi
	done
	return 1
}

read -r UP_STATUS UP_PLAIN UP_TLS NG_PLAIN NG_TLS NG_MOCK PC_PLAIN PC_PLAIN_PLAN PC_TLS PC_TLS_PLAN PC_MOCK PC_PLAIN_WIDE PC_TLS_WIDE \
	PC_PLAIN_STORE REDIS PC_PLAIN_BATCH FLOOR PC_TUNNEL PC_FIRST_BYTE \
	< <("$PY" -c '
import socket
ss = [socket.socket() for _ in range(19)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

# --- a throwaway CA and a certificate for 127.0.0.1 / localhost ---------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj "/CN=pacerd bench CA" -addext basicConstraints=critical,CA:TRUE \
	-addext keyUsage=critical,keyCertSign,cRLSign \
	-keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>"$tmp/openssl.err"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
	-keyout "$tmp/server.key" -out "$tmp/server.csr" 2>>"$tmp/openssl.err"
printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
	"keyUsage=digitalSignature" "extendedKeyUsage=serverAuth" >"$tmp/server.ext"
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
	-days 2 -extfile "$tmp/server.ext" -out "$tmp/server.pem" 2>>"$tmp/openssl.err"

# --- upstreams, on the load core -------------------------------------------------
# A chat.completion of 613 bytes, as OpenAI answers a short completion.
ANSWER='{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. Th","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":256,"completion_tokens":64,"total_tokens":320,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"system_fingerprint":"fp_bench"}'

# nginx_common DIR [CONNECTIONS]: the main-context lines the nginx instances share.
# CONNECTIONS (16384): worker_connections; nginx closes its newest idle connections
# once fewer than 1/16 of them are free (ngx_drain_connections), so the streams'
# instance gets 9/8 of its open files: then the open files bound it, as they do pacerd.
nginx_common() {
	cat <<EOF
worker_processes 1;
daemon off;
pid $1/nginx.pid;
worker_rlimit_nofile $NOFILE;
events { worker_connections ${2:-16384}; }
EOF
}
nginx_temp_paths() {
	local t
	for t in client_body proxy fastcgi uwsgi scgi; do echo "    ${t}_temp_path $1/$t;"; done
}

{
	nginx_common "$tmp/up"
	cat <<EOF
http {
    access_log off;
$(nginx_temp_paths "$tmp/up")
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    server {
        listen 127.0.0.1:$UP_PLAIN backlog=4096;
        listen 127.0.0.1:$UP_TLS ssl backlog=4096;
        ssl_certificate $tmp/server.pem;
        ssl_certificate_key $tmp/server.key;
        ssl_session_cache shared:up:4m;
        location = /v1/chat/completions {
            default_type application/json;
            return 200 '$ANSWER';
        }
        location / { return 404; }
    }
    server { listen 127.0.0.1:$UP_STATUS; location / { stub_status; } }
}
EOF
} >"$tmp/up/nginx.conf"
start nginx-up "$LOAD_CPU" nginx -p "$tmp/up/" -c "$tmp/up/nginx.conf" -e "$tmp/up/error.log"
up_pid=$!
start mock "$LOAD_CPU" "$BUILD/pacerd-mock" --port 0 --no-record
mock_pid=$!
for _ in $(seq 100); do [ -s "$tmp/mock.out" ] && break; sleep 0.1; done
MOCK=$(sed -nE 's/.*"http":([0-9]+).*/\1/p' "$tmp/mock.out")
[ -n "$MOCK" ] || fail "pacerd-mock did not start: $(cat "$tmp/mock.err")"
wait_port mock "$mock_pid" "$MOCK"
wait_port nginx-up "$up_pid" "$UP_PLAIN"
wait_port nginx-up "$up_pid" "$UP_TLS"

# --- the proxies, on the proxy core ----------------------------------------------
# Two nginx instances, like the pacerd ones: one for the throughput runs, a fresh
# one for the streams (so that its RSS is not the high-water mark of the runs).
nginx_proxy_common() {
	cat <<EOF
    access_log off;
$(nginx_temp_paths "$1")
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_read_timeout 300s;
EOF
}
{
	nginx_common "$tmp/proxy"
	cat <<EOF
http {
$(nginx_proxy_common "$tmp/proxy")
    upstream plain { server 127.0.0.1:$UP_PLAIN; keepalive 1024; keepalive_requests 1000000; keepalive_timeout 300s; }
    upstream tls   { server 127.0.0.1:$UP_TLS; keepalive 1024; keepalive_requests 1000000; keepalive_timeout 300s; }
    server { listen 127.0.0.1:$NG_PLAIN backlog=4096; location / { proxy_pass http://plain; } }
    server {
        listen 127.0.0.1:$NG_TLS backlog=4096;
        location / {
            proxy_pass https://tls;
            proxy_ssl_session_reuse on;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $tmp/ca.pem;
            proxy_ssl_name localhost;
        }
    }
}
EOF
} >"$tmp/proxy/nginx.conf"
{
	nginx_common "$tmp/streams" $((NOFILE + NOFILE / 8))
	cat <<EOF
http {
$(nginx_proxy_common "$tmp/streams")
    upstream mock { server 127.0.0.1:$MOCK; keepalive 1024; keepalive_requests 1000000; keepalive_timeout 300s; }
    server { listen 127.0.0.1:$NG_MOCK backlog=4096; location / { proxy_pass http://mock; } }
}
EOF
} >"$tmp/streams/nginx.conf"
start nginx "$PROXY_CPU" nginx -p "$tmp/proxy/" -c "$tmp/proxy/nginx.conf" -e "$tmp/proxy/error.log"
ng_master=$!
wait_port nginx "$ng_master" "$NG_PLAIN"
ng_pid=$(nginx_worker "$ng_master") || fail "no nginx worker process under $ng_master"
start nginx-streams "$PROXY_CPU" nginx -p "$tmp/streams/" -c "$tmp/streams/nginx.conf" -e "$tmp/streams/error.log"
ng_streams_master=$!
wait_port nginx-streams "$ng_streams_master" "$NG_MOCK"
ng_streams_pid=$(nginx_worker "$ng_streams_master") || fail "no nginx worker process under $ng_streams_master"

# pacerd_conf PORT UPSTREAM PLAN: PLAN is "" (the default plan: max_concurrent 64
# toward the upstream), "far" (rate and token limits far above the load, the
# default concurrency: what having a plan costs), "wide" (no plan limit, as many
# upstream connections as clients: nginx's shape) or "streams" (every stream
# dispatched at once: the idle test).
pacerd_conf() {
	local tls="" plan=""
	case $2 in https:*) tls=", tls: { ca_file: \"$tmp/ca.pem\" }" ;; esac
	case $3 in
	far) plan="plans: { default: { max_requests_per_second: 1000000, max_requests_per_minute: 60000000, max_tokens_per_minute: 1000000000 } }" ;;
	wide) plan="plans: { default: { max_concurrent: 100000 } }" ;;
	store) plan="plans: { default: { max_requests_per_second: 1000000, max_requests_per_minute: 60000000, max_tokens_per_minute: 1000000000 } }
store: { kind: redis, redis: { address: \"127.0.0.1:$REDIS\" } }" ;;
	batch) plan="plans: { default: { max_requests_per_second: 1000000, max_requests_per_minute: 60000000, max_tokens_per_minute: 1000000000, burst: 1000 } }
store: { kind: redis, redis: { address: \"127.0.0.1:$REDIS\" } }" ;;
	streams) plan="plans: { default: { max_concurrent: 100000, concurrency: { adaptive: false }, queue: { max_depth: 100000 } } }
limits: { max_connections: $NOFILE }" ;;
	esac
	cat <<EOF
listen: 127.0.0.1:$1
admin: { listen: "" }
log: { level: warn }
forward: { state_dir: "$tmp/state" }
providers:
  openai: { upstream: "$2"$tls }
$plan
EOF
}
declare -A pc_pid pc_port
# pacerd_start NAME PORT UPSTREAM PLAN
pacerd_start() {
	pacerd_conf "$2" "$3" "$4" >"$tmp/$1.yaml"
	start "$1" "$PROXY_CPU" "$BUILD/pacerd" -c "$tmp/$1.yaml"
	pc_pid[$1]=$!
	pc_port[$1]=$2
	wait_port "$1" "$!" "$2"
}
pacerd_start pacerd-plain "$PC_PLAIN" "http://127.0.0.1:$UP_PLAIN" ""
pacerd_start pacerd-plain-far "$PC_PLAIN_PLAN" "http://127.0.0.1:$UP_PLAIN" far
pacerd_start pacerd-https "$PC_TLS" "https://127.0.0.1:$UP_TLS" ""
pacerd_start pacerd-https-far "$PC_TLS_PLAN" "https://127.0.0.1:$UP_TLS" far
pacerd_start pacerd-plain-wide "$PC_PLAIN_WIDE" "http://127.0.0.1:$UP_PLAIN" wide
# The shared store: Debian's redis-server on the load core, no persistence.
mkdir "$tmp/redis"
start redis "$LOAD_CPU" redis-server --port "$REDIS" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp/redis"
wait_port redis "$!" "$REDIS"
pacerd_start pacerd-plain-store "$PC_PLAIN_STORE" "http://127.0.0.1:$UP_PLAIN" store
pacerd_start pacerd-plain-batch "$PC_PLAIN_BATCH" "http://127.0.0.1:$UP_PLAIN" batch
# The floor: the same libraries with nothing between them.
start floor "$PROXY_CPU" "$BUILD/bench-floor" "$FLOOR" "http://127.0.0.1:$UP_PLAIN"
floor_pid=$!
wait_port floor "$floor_pid" "$FLOOR"
pacerd_start pacerd-https-wide "$PC_TLS_WIDE" "https://127.0.0.1:$UP_TLS" wide
pacerd_start pacerd-mock "$PC_MOCK" "http://127.0.0.1:$MOCK" streams
# What a user gets: no plan, in front of the SSE mock (the first-byte row).
pacerd_start pacerd-first-byte "$PC_FIRST_BYTE" "http://127.0.0.1:$MOCK" ""
# HTTPS_PROXY clients: CONNECT api.openai.com:443, terminated with pacerd's CA (made in
# $tmp/state by the first pacerd), the requests inside sent to the plain upstream.
pacerd_start pacerd-tunnel "$PC_TUNNEL" "http://127.0.0.1:$UP_PLAIN" ""

results=$tmp/results.jsonl
: >"$results"
# section NAME: the time each part of the run took (the table's last line); the
# first, start, from the script's start (processes, certificates, checks).
section_name=start section_t0=0
section() {
	printf '{"kind":"section","name":"%s","s":%d}\n' "$section_name" $((SECONDS - section_t0)) >>"$results"
	section_name=$1 section_t0=$SECONDS
}

# Every path answers the chat completion before anything is measured. A path that
# does not stops the bench, but for an optional one (the shared store's), which is
# left out (broken[NAME]) and named in the table; the bench then ends with status 1.
declare -A broken=()
check() {
	local code why
	: >"$tmp/check.out" # curl writes nothing when nothing came
	code=$(curl -sS -o "$tmp/check.out" -w '%{http_code}' --max-time 10 -H 'content-type: application/json' \
		-H 'authorization: Bearer sk-bench-check' --data '{"model":"m","messages":[]}' \
		"http://127.0.0.1:$2/v1/chat/completions" 2>/dev/null) || true
	if [ "$code" != 200 ] || [ "$(wc -c <"$tmp/check.out")" != 613 ]; then
		why="answered $code in 10 s: $(head -c 200 "$tmp/check.out")"
		[ "${3:-}" = optional ] || fail "$1 (port $2) $why"
		echo "bench: $1 (port $2) $why; left out" >&2
		broken[$1]=$why
		printf '{"kind":"broken","path":"%s","why":%s}\n' "$1" \
			"$("$PY" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$why")" >>"$results"
	fi
}
check direct "$UP_PLAIN"
check nginx "$NG_PLAIN"
check "nginx (https upstream)" "$NG_TLS"
check floor "$FLOOR"
for n in pacerd-plain pacerd-plain-far pacerd-plain-wide pacerd-https pacerd-https-far pacerd-https-wide; do
	check "$n" "${pc_port[$n]}"
done
check pacerd-plain-store "$PC_PLAIN_STORE" optional
check pacerd-plain-batch "$PC_PLAIN_BATCH" optional

# --- measurements ----------------------------------------------------------------
# status_kib PID FIELD: a size from /proc/PID/status (VmRSS, VmHWM), in KiB.
status_kib() {
	local k v _
	while read -r k v _; do
		[ "$k" = "$2:" ] && { echo "$v"; return 0; }
	done <"/proc/$1/status"
	echo 0
}
# rss_watch PID: VmRSS every 0.2 s, for at most BENCH_DURATION + 5 s (run in the
# background during a measured run and stopped after it).
rss_watch() {
	local i
	for ((i = 0; i < 5 * (DURATION + 5); i++)); do
		status_kib "$1" VmRSS
		sleep 0.2
	done
}
# rss_record PROXY PHASE KIB: one memory figure.
rss_record() {
	printf '{"kind":"rss","proxy":"%s","phase":"%s","kib":%d}\n' "$1" "$2" "$3" >>"$results"
}
rss_record pacerd idle "$(status_kib "${pc_pid[pacerd-plain]}" VmRSS)"
rss_record nginx idle "$(status_kib "$ng_pid" VmRSS)"

# wrk_json CONNS SECONDS PORT [--latency]: runs wrk on the load core; prints its JSON line.
wrk_json() {
	taskset -c "$LOAD_CPU" wrk -t1 -c"$1" -d"$2s" --timeout 10s ${4:+"$4"} -s "$here/chat.lua" \
		"http://127.0.0.1:$3/v1/chat/completions" >"$tmp/wrk.out" 2>&1 || true
	sed -n 's/^WRKJSON //p' "$tmp/wrk.out"
}
rps_of() { "$PY" -c 'import json,sys; j=json.loads(sys.argv[1]); print(round(j["requests"]*1e6/j["duration_us"]))' "$1" 2>/dev/null || echo "?"; }

section throughput
echo "bench: ${DURATION}s runs (+${WARMUP}s warm-up), $REPS repetitions, proxy on CPU $PROXY_CPU, wrk and upstreams on CPU $LOAD_CPU" >&2
runs=$((REPS * ${#CONNS[@]} * 11))
# redis_commands: the commands pacerd has sent the shared store's Redis so far (its
# scripts: EVALSHA, and EVAL after a NOSCRIPT; total_commands_processed would count
# the commands the scripts run inside as well).
redis_commands() {
	redis-cli -p "$REDIS" INFO commandstats |
		awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ { n += $3 } END { print n + 0 }'
}
k=0
for ((rep = 1; rep <= REPS; rep++)); do
	for upstream in plain https; do
		for c in "${CONNS[@]}"; do
			for proxy in pacerd nginx pacerd+plan pacerd+wide pacerd+store pacerd+batch floor; do
				case $proxy/$upstream in
				pacerd+store/https | pacerd+batch/https | floor/https) continue ;;
				pacerd+store/plain) name=pacerd-plain-store ;;
				pacerd+batch/plain) name=pacerd-plain-batch ;;
				floor/plain) name="" port=$FLOOR pid=$floor_pid ;;
				pacerd/*) name=pacerd-$upstream ;;
				pacerd+plan/*) name=pacerd-$upstream-far ;;
				pacerd+wide/*) name=pacerd-$upstream-wide ;;
				nginx/plain) name="" port=$NG_PLAIN pid=$ng_pid ;;
				nginx/https) name="" port=$NG_TLS pid=$ng_pid ;;
				esac
				if [ -n "$name" ]; then
					[ -z "${broken[$name]:-}" ] || continue
					port=${pc_port[$name]} pid=${pc_pid[$name]}
				fi
				wrk_json "$c" "$WARMUP" "$port" >/dev/null
				watch=""
				case $proxy/$upstream in pacerd/plain | nginx/plain)
					rss_watch "$pid" >"$tmp/rss.watch" &
					watch=$!
					;;
				esac
				r0=$(redis_commands)
				t0=$(cputicks "$pid")
				json=$(wrk_json "$c" "$DURATION" "$port")
				t1=$(cputicks "$pid")
				r1=$(redis_commands)
				if [ -n "$watch" ]; then
					kill "$watch" 2>/dev/null || true
					wait "$watch" 2>/dev/null || true
					rss_record "$proxy" load "$(sort -n "$tmp/rss.watch" | tail -1)"
				fi
				rc=-1
				case $proxy in pacerd+store | pacerd+batch) rc=$((r1 - r0)) ;; esac
				printf '{"kind":"throughput","proxy":"%s","upstream":"%s","conns":%d,"rep":%d,"cpu_ticks":%d,"redis_commands":%d,"wrk":%s}\n' \
					"$proxy" "$upstream" "$c" "$rep" $((t1 - t0)) "$rc" "${json:-null}" >>"$results"
				k=$((k + 1))
				printf '  [%d/%d] %-6s %3d conns %-12s %s req/s\n' "$k" "$runs" "$upstream" "$c" "$proxy" "$(rps_of "${json:-null}")" >&2
			done
		done
	done
done

# Memory after load: the proxies left alone for RECOVER_S seconds.
sleep "$RECOVER_S"
rss_record pacerd after "$(status_kib "${pc_pid[pacerd-plain]}" VmRSS)"
rss_record nginx after "$(status_kib "$ng_pid" VmRSS)"
rss_record pacerd peak "$(status_kib "${pc_pid[pacerd-plain]}" VmHWM)"
rss_record nginx peak "$(status_kib "$ng_pid" VmHWM)"

# The frontier: direct, pacerd (no plan) and nginx in turn at each rate, from the
# load core (wrk's pauses: frontier.lua).
section frontier
echo "bench: the frontier (added p99 under 1, 5, 10 ms; $FRONTIER_CONNS connections, $FRONTIER_REPS x ${FRONTIER_S} s a step)" >&2
json=$(timeout 1200 taskset -c "$LOAD_CPU" "$PY" "$here/frontier.py" --path "direct=$UP_PLAIN" \
	--path "pacerd=$PC_PLAIN" --path "nginx=$NG_PLAIN" --conns "$FRONTIER_CONNS" --seconds "$FRONTIER_S" \
	--reps "$FRONTIER_REPS" ${FRONTIER_RATES:+--rates "$FRONTIER_RATES"} 2>>"$tmp/frontier.err") || json=""
printf '{"kind":"frontier","result":%s}\n' "${json:-null}" >>"$results"

# Through a tunnel and by base URL, to one pacerd, with the same client (wrk cannot
# CONNECT): tunnel_load.py on the load core, 64 keep-alive connections. The client
# is the slower side here, so what compares is pacerd's CPU per request.
section tunnel
echo "bench: through a CONNECT tunnel vs. base URL (64 connections, tunnel_load.py)" >&2
for ((rep = 1; rep <= REPS; rep++)); do
	for mode in base tunnel; do
		pid=${pc_pid[pacerd-tunnel]}
		taskset -c "$LOAD_CPU" "$PY" "$here/tunnel_load.py" --port "$PC_TUNNEL" --mode "$mode" \
			--ca "$tmp/state/ca.pem" --conns 64 --seconds "$WARMUP" >/dev/null 2>&1 || true
		t0=$(cputicks "$pid")
		json=$(taskset -c "$LOAD_CPU" "$PY" "$here/tunnel_load.py" --port "$PC_TUNNEL" --mode "$mode" \
			--ca "$tmp/state/ca.pem" --conns 64 --seconds "$DURATION" 2>>"$tmp/tunnel_load.err") || json=""
		t1=$(cputicks "$pid")
		printf '{"kind":"tunnel","mode":"%s","rep":%d,"cpu_ticks":%d,"result":%s}\n' \
			"$mode" "$rep" $((t1 - t0)) "${json:-null}" >>"$results"
		printf '  [%d/%d] %-6s %s\n' "$rep" "$REPS" "$mode" "${json:-failed}" >&2
	done
done

section latency
echo "bench: latency at 1 connection" >&2
for ((rep = 1; rep <= REPS; rep++)); do
	for path in direct pacerd nginx pacerd+store; do
		case $path in
		direct) port=$UP_PLAIN ;; pacerd) port=$PC_PLAIN ;; nginx) port=$NG_PLAIN ;;
		pacerd+store)
			[ -z "${broken[pacerd-plain-store]:-}" ] || continue
			port=$PC_PLAIN_STORE
			;;
		esac
		wrk_json 1 "$WARMUP" "$port" >/dev/null
		json=$(wrk_json 1 "$DURATION" "$port" --latency)
		printf '{"kind":"latency","path":"%s","rep":%d,"wrk":%s}\n' "$path" "$rep" "${json:-null}" >>"$results"
	done
done

# upstream_requests: requests the upstream nginx has answered (its stub_status),
# this one included.
upstream_requests() { curl -s --max-time 5 "http://127.0.0.1:$UP_STATUS/" | awk 'NR == 3 { print $3 }'; }

# The proxy is traced while wrk runs and until its last requests are answered; the
# requests it proxied meanwhile are counted by the upstream, exactly.
section syscalls
echo "bench: system calls (strace -c, ${STRACE_S}s of 64 connections)" >&2
for proxy in pacerd nginx; do
	if [ "$proxy" = pacerd ]; then pid=${pc_pid[pacerd-plain]} port=$PC_PLAIN; else pid=$ng_pid port=$NG_PLAIN; fi
	wrk_json 64 "$WARMUP" "$port" >/dev/null
	strace -c -f -p "$pid" -o "$tmp/strace-$proxy.txt" 2>"$tmp/strace-$proxy.err" &
	spid=$!
	pids+=("$spid")
	for _ in $(seq 50); do grep -q attached "$tmp/strace-$proxy.err" 2>/dev/null && break; sleep 0.1; done
	r0=$(upstream_requests)
	json=$(wrk_json 64 "$STRACE_S" "$port")
	sleep 0.5
	kill -INT "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	r1=$(upstream_requests)
	printf '{"kind":"strace","proxy":"%s","file":"%s","requests":%d,"wrk":%s}\n' \
		"$proxy" "$tmp/strace-$proxy.txt" $((r1 - r0 - 1)) "${json:-null}" >>"$results"
done

section sse
echo "bench: SSE ($SSE_CHUNKS events, $SSE_MS ms apart)" >&2
for path in direct pacerd nginx; do
	case $path in
	direct) port=$MOCK ;; pacerd) port=$PC_MOCK ;; nginx) port=$NG_MOCK ;;
	esac
	json=$(timeout 30 "$PY" "$here/sse_client.py" --port "$port" --chunks "$SSE_CHUNKS" --ms "$SSE_MS") || json=""
	printf '{"kind":"sse","path":"%s","result":%s}\n' "$path" "${json:-null}" >>"$results"
done

# mock_idle: until the mock holds no request open (10 s).
mock_idle() {
	for _ in $(seq 100); do
		curl -s --max-time 2 "http://127.0.0.1:$MOCK/_mock/stats" | grep -q '"in_flight":0,' && return 0
		sleep 0.1
	done
}
section idle
echo "bench: $IDLE idle streams ($IDLE_ASKED asked; open files: $NOFILE a process), held ${HOLD_S}s" >&2
for proxy in pacerd nginx; do
	if [ "$proxy" = pacerd ]; then pid=${pc_pid[pacerd-mock]} port=$PC_MOCK; else pid=$ng_streams_pid port=$NG_MOCK; fi
	mock_idle || true
	json=$(timeout 300 "$PY" "$here/idle_streams.py" --port "$port" --pid "$pid" --mock-port "$MOCK" --n "$IDLE" \
		--timeout 120 --hold "$HOLD_S") || json=""
	printf '{"kind":"idle","proxy":"%s","result":%s}\n' "$proxy" "${json:-null}" >>"$results"
done
mock_idle || true

# After the idle streams (nginx-streams' RSS is measured fresh there). Each path is
# warmed up first (pacerd's lane then knows its provider sends no rate-limit headers,
# and holds its upstream connections); 1 at a time with short streams, 20 at a time
# with streams of 5 chunks 20 ms apart, so that the 20 overlap.
section first_byte
echo "bench: time to first byte and token of streams (1 and 20 at a time, $FB_ROUNDS rounds)" >&2
for c in 1 20; do
	chunk_ms=20
	[ "$c" = 1 ] && chunk_ms=0
	json=$(timeout 300 taskset -c "$LOAD_CPU" "$PY" "$here/first_byte.py" --path "direct=$MOCK" \
		--path "pacerd=$PC_FIRST_BYTE" --path "nginx=$NG_MOCK" --concurrency "$c" --streams 40 \
		--rounds "$FB_ROUNDS" --chunk-ms "$chunk_ms" 2>>"$tmp/first_byte.err") || json=""
	printf '{"kind":"first_byte","concurrency":%d,"result":%s}\n' "$c" "${json:-null}" >>"$results"
done

lanes=""
if [ -x "$BUILD/bench-lanes" ]; then
	section lanes
	echo "bench: lane microbenchmark" >&2
	lanes=$tmp/lanes.json
	timeout 300 taskset -c "$PROXY_CPU" "$BUILD/bench-lanes" >"$lanes" 2>"$tmp/lanes.err" ||
		echo "bench: $BUILD/bench-lanes failed: $(tail -3 "$tmp/lanes.err")" >&2
fi

section ""

# --- the machine, the versions, the report ----------------------------------------
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mkdir -p "$(dirname "$OUT")"
cp "$results" "${OUT%.json}.records.jsonl" # report.py can render them again
"$PY" "$here/report.py" --results "$results" --out "$OUT" ${lanes:+--lanes "$lanes"} \
	--meta nproc "$(nproc)" cpu "${cpu_model:-unknown}" kernel "$(uname -r)" \
	pacerd "$("$BUILD/pacerd" --version 2>&1)" nginx "$(nginx -v 2>&1 | sed 's/^nginx version: //')" \
	wrk "$(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2 || true)" libcurl "$(curl-config --version)" \
	openssl "$(openssl version | cut -d' ' -f1-2)" duration_s "$DURATION" warmup_s "$WARMUP" reps "$REPS" \
	strace_s "$STRACE_S" idle "$IDLE" idle_asked "$IDLE_ASKED" nofile "$NOFILE" hold_s "$HOLD_S" \
	recover_s "$RECOVER_S" load_start "$LOAD_START" load_end "$(cut -d' ' -f1-3 /proc/loadavg)" proxy_cpu "$PROXY_CPU" load_cpu "$LOAD_CPU" \
	clk_tck "$CLK_TCK" sse_chunks "$SSE_CHUNKS" sse_ms "$SSE_MS" fb_rounds "$FB_ROUNDS" elapsed_s "$SECONDS" \
	date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
((${#broken[@]} == 0)) || fail "left out, having failed their first request: ${!broken[*]}"
