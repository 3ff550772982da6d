#!/bin/bash
# Throughput through pacerd against the same mock upstream measured directly,
# in the same run, as a ratio: wrk, keep-alive, 64 connections.
#
#   scripts/bench.sh [duration_s] [connections]     (make bench)
#
# Everything runs on 127.0.0.1 and stops by itself; only processes started here
# are stopped, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DURATION=${1:-10}
CONNS=${2:-64}
PATH_=${BENCH_PATH:-/v1/models}
command -v wrk >/dev/null || { echo "bench: wrk is missing (scripts/install-deps.sh)"; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

"$BUILD/pacerd-mock" --port 0 --no-record >"$tmp/mock.out" 2>"$tmp/mock.err" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/mock.out" ] && break; sleep 0.1; done
mock_port=$(sed -E 's/.*"http":([0-9]+).*/\1/' "$tmp/mock.out")

pacer_port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
cat >"$tmp/pacerd.yaml" <<YAML
listen: 127.0.0.1:$pacer_port
admin: { listen: "" }
log: { level: warn }
providers:
  openai: { upstream: "http://127.0.0.1:$mock_port" }
YAML
"$BUILD/pacerd" -c "$tmp/pacerd.yaml" 2>"$tmp/pacerd.err" &
pids+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$pacer_port$PATH_" && break; sleep 0.1; done

run_wrk() { wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$1" | tee -a "$tmp/wrk.txt" | awk '/Requests\/sec/ {print $2}'; }
echo "bench: wrk -t1 -c$CONNS -d${DURATION}s, path $PATH_ (mock on :$mock_port, pacerd on :$pacer_port)"
direct=$(run_wrk "http://127.0.0.1:$mock_port$PATH_")
proxied=$(run_wrk "http://127.0.0.1:$pacer_port$PATH_")
grep -E 'Latency|Non-2xx|Socket errors' "$tmp/wrk.txt" || true
ratio=$(awk -v a="$proxied" -v b="$direct" 'BEGIN { printf "%.3f", a / b }')
echo "direct to mock:  $direct req/s"
echo "through pacerd:  $proxied req/s"
echo "ratio pacerd/direct: $ratio"
