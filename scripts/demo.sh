#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make demo: pacerd without an API key or a network. The mock upstream plays
# OpenAI limited to 60 requests per minute per key (a bucket of 60 refilling
# one a second, OpenAI's x-ratelimit-* headers); pacerd runs in front of it with
# no plan at all; a burst of 100 concurrent requests goes through while
# `pacerd top` shows the lane; it ends by itself with a summary.
#
# Environment (the integration test runs a faster variant): DEMO_REQUESTS
# (100), DEMO_RPM (60), DEMO_BURST (0: a bucket of DEMO_RPM), BUILD (build),
# PACERD_BIN and MOCK_BIN (the binaries, default under BUILD).
set -eu

BUILD=${BUILD:-build}
N=${DEMO_REQUESTS:-100}
RPM=${DEMO_RPM:-60}
BURST=${DEMO_BURST:-0}
PACERD=${PACERD_BIN:-$BUILD/pacerd}
MOCK=${MOCK_BIN:-$BUILD/pacerd-mock}
KEY=sk-demo-0000000000000000

dir=$(mktemp -d /tmp/pacerd-demo.XXXXXX)
mock_pid=""
pacerd_pid=""
top_pid=""
cleanup() {
	for p in $top_pid $pacerd_pid $mock_pid; do
		kill "$p" 2>/dev/null || true
	done
	for p in $top_pid $pacerd_pid $mock_pid; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The upstream: OpenAI-style, RPM per key.
"$MOCK" --no-record --config "{\"style\":\"openai\",\"rpm\":$RPM,\"burst\":$BURST}" >"$dir/mock.out" &
mock_pid=$!
for _ in $(seq 50); do
	[ -s "$dir/mock.out" ] && break
	sleep 0.1
done
mock_port=$(sed 's/.*"http":\([0-9]*\).*/\1/' "$dir/mock.out")

# pacerd with no plan: it learns the limit from the headers.
port=$(free_port)
admin=$(free_port)
cat >"$dir/pacerd.yaml" <<EOF
listen: 127.0.0.1:$port
admin: {listen: 127.0.0.1:$admin}
log: {level: warn, file: $dir/pacerd.log}
providers:
  openai: {upstream: "http://127.0.0.1:$mock_port"}
EOF
"$PACERD" -c "$dir/pacerd.yaml" &
pacerd_pid=$!
for _ in $(seq 50); do
	curl -fs "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done

echo "demo: mock OpenAI at 127.0.0.1:$mock_port, $RPM requests/min per key; pacerd at 127.0.0.1:$port, no plan"
echo "demo: $N concurrent chat completions through pacerd ..."

# The burst: N requests at once, each on its own connection.
i=0
: >"$dir/requests"
while [ "$i" -lt "$N" ]; do
	cat >>"$dir/requests" <<EOF
next
url = "http://127.0.0.1:$port/v1/chat/completions"
header = "Authorization: Bearer $KEY"
header = "Content-Type: application/json"
data = "{\"model\":\"gpt-mock\",\"messages\":[{\"role\":\"user\",\"content\":\"demo $i\"}],\"max_tokens\":16}"
output = "/dev/null"
write-out = "%{http_code}\n"
EOF
	i=$((i + 1))
done
start=$(date +%s.%N)
curl -s --parallel --parallel-immediate --parallel-max "$N" --max-time 600 \
	-K "$dir/requests" >"$dir/codes" 2>/dev/null &
load_pid=$!

# Watch it: the live view on a terminal, else one line a second.
# (An asynchronous command's stdin is /dev/null: give top the terminal's.)
if [ -t 1 ] && [ -r /dev/tty ]; then
	"$PACERD" top --admin "127.0.0.1:$admin" --interval 1 </dev/tty &
else
	"$PACERD" top --admin "127.0.0.1:$admin" --interval 1 &
fi
top_pid=$!
wait "$load_pid" || true
end=$(date +%s.%N)
sleep 1
kill "$top_pid" 2>/dev/null || true
wait "$top_pid" 2>/dev/null || true
top_pid=""

ok=$(grep -c '^200$' "$dir/codes" || true)
errors=$((N - ok))
stats=$(curl -s "http://127.0.0.1:$mock_port/_mock/stats")
upstream_429=$(printf '%s' "$stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["responses"].get("429", 0))')
python3 - "$start" "$end" "$N" "$RPM" "$BURST" "$ok" "$errors" "$upstream_429" <<'EOF'
import sys
start, end, n, rpm, burst, ok, errors, u429 = sys.argv[1:]
wall = float(end) - float(start)
n, rpm, burst = int(n), float(rpm), int(burst)
capacity = burst if burst > 0 else int(rpm)
floor = max(0.0, (n - capacity) * 60.0 / rpm)  # the bucket's first `capacity` go at once
print(f"demo: {ok} succeeded, {errors} errors, {u429} upstream 429s absorbed by pacerd; "
      f"wall {wall:.1f} s against a floor of {floor:.1f} s at {rpm:g} RPM "
      f"({capacity} at once, then one every {60.0 / rpm:g} s)")
EOF
[ "$errors" -eq 0 ]
