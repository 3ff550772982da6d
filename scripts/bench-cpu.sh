#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# CPU time pacerd spends per proxied request, the hot path as agents use it: a
# 1 KiB chat POST, a token budget on (so the body is estimated and the answer's
# usage read), the access log at info level to a file. wrk keeps 64 keep-alive
# connections busy; pacerd runs on CPU 0, wrk and the mock on CPU 1.
#
#   scripts/bench-cpu.sh [BIN] [duration_s] [strace]
#
# Prints requests/s and CPU us per request (utime+stime of pacerd over the run);
# with "strace", the system calls per request instead (strace -c slows pacerd
# down, so its CPU figure is then meaningless). Everything is on 127.0.0.1 and
# stops by itself; only processes started here are stopped, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${1:-$BUILD/pacerd}
DUR=${2:-8}
MODE=${3:-}
command -v wrk >/dev/null || { echo "bench-cpu: wrk is missing (scripts/install-deps.sh)"; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

python3 - "$tmp" <<'PY'
import json, sys
text = "Please summarise the following passage about rate limiting in HTTP proxies: " + (
    "A token bucket refills at a steady rate and each request takes tokens; "
    "when the bucket is empty, requests wait. " * 7)
body = {"model": "gpt-4o-mini", "messages": [
    {"role": "system", "content": "You are a helpful assistant. Answer briefly and precisely."},
    {"role": "user", "content": text}], "max_tokens": 64, "temperature": 0.7, "stream": False}
s = json.dumps(body, separators=(",", ":"))
s = s.replace(text, text[: len(text) - (len(s) - 1024)]) if len(s) > 1024 else s
open(sys.argv[1] + "/body.json", "w").write(s)
open(sys.argv[1] + "/post.lua", "w").write(
    'local f = io.open("%s/body.json", "rb")\nwrk.body = f:read("*a")\nf:close()\n'
    'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
    'wrk.headers["Authorization"] = "Bearer sk-bench-0123456789"\n' % sys.argv[1])
PY

taskset -c 1 "$BUILD/pacerd-mock" --port 0 --no-record >"$tmp/mock.out" 2>"$tmp/mock.err" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/mock.out" ] && break; sleep 0.1; done
mock_port=$(sed -E 's/.*"http":([0-9]+).*/\1/' "$tmp/mock.out")
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
cat >"$tmp/pacerd.yaml" <<YAML
listen: 127.0.0.1:$port
admin: { listen: "" }
log: { level: info, file: "$tmp/pacerd.log" }
providers:
  openai: { upstream: "http://127.0.0.1:$mock_port" }
plans:
  default:
    max_tokens_per_minute: 1000000000000
    max_concurrent: 64
    concurrency: { adaptive: false, initial: 64 }
    dispatch_delay: { adaptive: false }
YAML
taskset -c 0 "$BIN" -c "$tmp/pacerd.yaml" 2>"$tmp/pacerd.err" &
pp=$!
pids+=($pp)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/v1/models" && break; sleep 0.1; done
url="http://127.0.0.1:$port/v1/chat/completions"
taskset -c 1 wrk -t1 -c64 -d2s -s "$tmp/post.lua" "$url" >/dev/null # warm the pools

if [ "$MODE" = strace ]; then
	strace -c -p "$pp" -o "$tmp/strace.txt" &
	sp=$!
	sleep 0.5
fi
t0=$(awk '{print $14 + $15}' "/proc/$pp/stat")
taskset -c 1 wrk -t1 -c64 -d"${DUR}s" -s "$tmp/post.lua" "$url" >"$tmp/wrk.txt"
t1=$(awk '{print $14 + $15}' "/proc/$pp/stat")
reqs=$(awk '/requests in/ {print $1}' "$tmp/wrk.txt")
rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk.txt")
if [ "$MODE" = strace ]; then
	kill -INT "$sp"
	wait "$sp" 2>/dev/null || true
	echo "bench-cpu: $BIN, $reqs requests under strace; system calls per request:"
	awk -v r="$reqs" '$NF == "total" {printf "  %-12s %6.2f\n", "total", $4 / r; next}
		NR > 2 && $4 ~ /^[0-9]+$/ && $4 / r >= 0.01 {printf "  %-12s %6.2f\n", $NF, $4 / r}' "$tmp/strace.txt"
	exit 0
fi
echo "bench-cpu: $BIN: $rps req/s, $(awk -v a="$t0" -v b="$t1" -v r="$reqs" -v t="$(getconf CLK_TCK)" \
	'BEGIN {printf "%.1f", (b - a) / t * 1e6 / r}') us CPU per request ($reqs requests)"
