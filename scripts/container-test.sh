#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make container-test (and make test, when podman is installed): the image, for real.
#
#   scripts/container-test.sh          BUILD (build), MOCK_BIN ($BUILD/pacerd-mock)
#
# Makes the base image when podman lacks it (scripts/container-base.sh), builds
# the Dockerfile as pacerd:test, starts the mock upstream on 127.0.0.1, runs the
# image in front of it and checks, through real requests:
#   * /readyz answers 200 (the time from `podman run` to that is printed);
#   * 20 concurrent chat completions and one stream through pacerd: 200, one
#     attempt each, the stream complete, and the mock counted exactly those;
#   * the image's HEALTHCHECK passes (`podman healthcheck run`);
#   * pacerd is PID 1 and runs as a non-root user, on a read-only root file
#     system with no capabilities (what the Kubernetes example asks for);
#   * SIGTERM with a request in flight: /readyz turns 503, the request still
#     ends 200, and the container exits 0 within drain_timeout_s.
# Prints the image size, the build time and the start time. Exit status 0 when
# every check passed; the line "container: N passed, M failed" is the summary.
#
# Networking: --network host. pacerd keeps its loopback listeners as in a pod,
# where the sidecar shares the application's network namespace, and reaches the
# mock on the host's 127.0.0.1; nothing is published beyond loopback. (With a
# bridge network and a published port, pacerd would have to listen on 0.0.0.0
# inside, and the mock beyond the host's loopback to be reachable from it.) The
# ports are free ones picked here, so the test can run beside a pacerd on 8080.
#
# Bounded: every podman and curl call has a time limit; everything started here
# (the mock, the container) is stopped and removed on exit, by PID and by name.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BUILD=${BUILD:-build}
MOCK_BIN=${MOCK_BIN:-$BUILD/pacerd-mock}
IMAGE=${CONTAINER_IMAGE:-pacerd:test}
DRAIN_S=10           # drain_timeout_s in the mounted configuration
REQUESTS=20
name=pacerd-ctest-$$

say() { echo "container: $*"; }
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "  ok   $*"; }
bad() { failed=$((failed + 1)); echo "  FAIL $*"; }
# verdict STATUS WHAT: after a test, `[[ … ]]; verdict $? "what was checked"`.
verdict() { if (($1 == 0)); then ok "$2"; else bad "$2"; fi; }
summary() { echo "container: $passed passed, $failed failed"; }
die() { bad "$*"; [[ -n ${cid:-} ]] && { echo "  --- pacerd's last log lines ---"; podman logs --tail 20 "$name" 2>&1 | sed 's/^/  | /'; }; summary; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

command -v podman >/dev/null || { say "podman is missing"; exit 1; }
[[ -x $MOCK_BIN ]] || { say "$MOCK_BIN is missing (make $MOCK_BIN)"; exit 1; }

# What this machine's podman needs: runc (when installed) and explicit limits
# within the hard ones (the default rlimits of the runtime are refused here).
rt=(); command -v runc >/dev/null && rt=(--runtime runc)
hn=$(ulimit -Hn); [[ $hn == unlimited || $hn -gt 20000 ]] && hn=20000
hu=$(ulimit -Hu); [[ $hu == unlimited || $hu -gt 32768 ]] && hu=32768
limits=(--ulimit "nofile=$hn:$hn" --ulimit "nproc=$hu:$hu")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pacerd-ctest.XXXXXX")
mock_pid='' cid='' bg_pids=()
cleanup() {
	local p
	for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
	[[ -n $cid ]] && timeout 30 podman rm -f -t 0 "$name" >/dev/null 2>&1
	if [[ -n $mock_pid ]]; then kill -TERM "$mock_pid" 2>/dev/null; wait "$mock_pid" 2>/dev/null; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# A TCP port no socket uses, in any state, below the kernel's ephemeral range
# (32768 and up by default): a port in that range may be the local end of an
# outgoing connection made after the check (pacerd then failed to bind its
# admin port once in a make test). A race with another process is still
# reported by pacerd failing to bind, below. 32000-32767: make test runs this
# beside the integration suite, whose ports are 20000-31999.
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((32000 + RANDOM % 768))
		[[ -z $(ss -Htan "sport = :$p" 2>/dev/null) ]] && { echo "$p"; return 0; }
	done
	return 1
}

# ---- the images
nice -n 19 timeout 1200 ./scripts/container-base.sh || die "could not make the base image (scripts/container-base.sh)"
old_id=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null)
t0=$(now_ms)
if ! nice -n 19 timeout 1200 podman build "${rt[@]}" "${limits[@]}" --format docker --pull=never \
	-t "$IMAGE" . >"$tmp/build.log" 2>&1; then
	tail -n 30 "$tmp/build.log" | sed 's/^/  | /'
	die "podman build failed"
fi
build_ms=$(($(now_ms) - t0))
new_id=$(podman image inspect --format '{{.Id}}' "$IMAGE")
# The image this build replaced, now untagged (not another's: only an ID we read).
[[ -n $old_id && $old_id != "$new_id" ]] && podman rmi "$old_id" >/dev/null 2>&1
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
ok "image $IMAGE built in $((build_ms / 1000)).$((build_ms % 1000 / 100)) s ($(grep -c -- '--> Using cache' "$tmp/build.log") steps from cache)"
hc=$(podman image inspect --format '{{.Config.Healthcheck}}' "$IMAGE")
[[ -n $hc && $hc != "<nil>" ]]; verdict $? "the image has a HEALTHCHECK: $hc"

# ---- the mock upstream
"$MOCK_BIN" --host 127.0.0.1 --port 0 >"$tmp/mock.out" 2>"$tmp/mock.err" &
mock_pid=$!
for _ in $(seq 100); do [[ -s $tmp/mock.out ]] && break; sleep 0.05; done
mport=$(sed -n 's/^{"http":\([0-9]*\),.*/\1/p' "$tmp/mock.out")
[[ -n $mport ]] || die "the mock did not start: $(cat "$tmp/mock.err")"
mock() { curl -sS --max-time 5 "http://127.0.0.1:$mport/_mock/$1"; }
mock_stat() { mock stats | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2; }

# ---- pacerd in the container
{ port=$(free_port) && aport=$(free_port); } || die "no free port found"
[[ $port != "$aport" ]] || die "picked the same port twice"
# Mounted as /etc/pacerd/pacerd.yaml, as a ConfigMap would be; the addresses come
# from PACERD_* variables, which override the file.
printf '# container-test\ndrain_timeout_s: %d\nlog: {level: info}\n' "$DRAIN_S" >"$tmp/pacerd.yaml"
chmod 644 "$tmp/pacerd.yaml"
# --health-interval disable: no systemd here to run the timer; the test runs the
# HEALTHCHECK itself with `podman healthcheck run`.
t_run=$(now_ms)
cid=$(timeout 60 podman run -d --name "$name" "${rt[@]}" "${limits[@]}" --network host \
	--read-only --cap-drop all --security-opt no-new-privileges --health-interval disable \
	-v "$tmp/pacerd.yaml:/etc/pacerd/pacerd.yaml:ro" \
	-e PACERD_LISTEN="127.0.0.1:$port" -e PACERD_ADMIN_LISTEN="127.0.0.1:$aport" \
	-e PACERD_UPSTREAM="http://127.0.0.1:$mport" \
	"$IMAGE" 2>"$tmp/run.err") || { cat "$tmp/run.err"; cid=x; die "podman run failed"; }
readyz() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$aport/readyz"; }
code='' n=0
while ((n < 2000)); do          # 20 s at most
	code=$(readyz)
	[[ $code == 200 ]] && break
	if ((n % 50 == 49)) && [[ $(podman inspect --format '{{.State.Running}}' "$name" 2>/dev/null) != true ]]; then
		die "the container exited before /readyz answered"
	fi
	sleep 0.01; n=$((n + 1))
done
t_ready=$(now_ms)
[[ $code == 200 ]] || die "/readyz did not answer 200 within 20 s (last: $code)"
start_ms=$((t_ready - t_run))
# podman's share: the process starts at StartedAt; the rest is pacerd's (an upper
# bound: the first /readyz goes only once `podman run -d` has returned).
started_ns=$(podman inspect --format '{{.State.StartedAt.UnixNano}}' "$name" 2>/dev/null)
own_ms=$(((t_ready * 1000000 - ${started_ns:-0}) / 1000000))
((own_ms >= 0 && own_ms < start_ms)) || own_ms='?'
ok "/readyz 200 $start_ms ms after podman run (pacerd's own start: at most $own_ms ms of it)"

# ---- real requests
curls=()
for i in $(seq "$REQUESTS"); do
	curl -sS -o "$tmp/r$i.body" -D "$tmp/r$i.head" -w '%{http_code}' --max-time 15 \
		-H 'authorization: Bearer sk-container-test' -H 'content-type: application/json' \
		-d "{\"model\":\"gpt-mock\",\"messages\":[{\"role\":\"user\",\"content\":\"hello $i\"}]}" \
		"http://127.0.0.1:$port/v1/chat/completions" >"$tmp/r$i.code" 2>"$tmp/r$i.err" &
	curls+=($!)
done
wait "${curls[@]}"        # not a bare wait: the mock is a child too
good=0
for i in $(seq "$REQUESTS"); do
	[[ $(cat "$tmp/r$i.code") == 200 ]] && grep -q '"chat.completion"' "$tmp/r$i.body" &&
		grep -qi '^x-pacer-attempts: 1' "$tmp/r$i.head" && good=$((good + 1))
done
((good == REQUESTS)); verdict $? "$good/$REQUESTS concurrent chat completions: 200, a chat.completion, x-pacer-attempts: 1"
curl -sS -N -o "$tmp/stream.body" --max-time 15 -H 'authorization: Bearer sk-container-test' \
	-H 'content-type: application/json' \
	-d '{"model":"gpt-mock","stream":true,"messages":[{"role":"user","content":"stream"}]}' \
	"http://127.0.0.1:$port/v1/chat/completions" 2>"$tmp/stream.err"
events=$(grep -c '^data: ' "$tmp/stream.body")
[[ $events -ge 6 && $(grep '^data: ' "$tmp/stream.body" | tail -n 1) == "data: [DONE]" ]]
verdict $? "a streamed completion: $events events, the last data: [DONE]"
upstream=$(mock_stat requests)
[[ ${upstream:-0} -eq $((REQUESTS + 1)) ]]; verdict $? "the mock counted $((REQUESTS + 1)) requests (got ${upstream:-none})"

# ---- HEALTHCHECK, user, privileges
hc_out=$(timeout 30 podman healthcheck run "$name" 2>&1); verdict $? "podman healthcheck run: exit 0 (${hc_out:-no output})"
uids=$(timeout 30 podman exec "$name" sed -n 's/^Uid:[[:space:]]*//p' /proc/1/status | tr -s '[:space:]' ' ' | sed 's/ $//')
comm=$(timeout 30 podman exec "$name" cat /proc/1/comm)
# Uid: real, effective, saved, file system: none of them 0.
[[ $comm == pacerd && $uids =~ ^[0-9]+\ [0-9]+\ [0-9]+\ [0-9]+$ && ! " $uids" =~ \ 0(\ |$) ]]
verdict $? "PID 1 is pacerd (${comm:-?}), its uids ${uids:-?}: not root"
capeff=$(timeout 30 podman exec "$name" sed -n 's/^CapEff:[[:space:]]*//p' /proc/1/status)
[[ $capeff == 0000000000000000 && $(podman inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$name") == true ]]
verdict $? "no capabilities (CapEff ${capeff:-?}), read-only root file system"

# ---- SIGTERM with a request in flight
curl -sS -o "$tmp/slow.body" -w '%{http_code}' --max-time 30 -H 'authorization: Bearer sk-container-test' \
	-H 'content-type: application/json' -H 'x-mock-delay-ms: 1500' \
	-d '{"model":"gpt-mock","messages":[{"role":"user","content":"slow"}]}' \
	"http://127.0.0.1:$port/v1/chat/completions" >"$tmp/slow.code" 2>"$tmp/slow.err" &
slow_pid=$!
bg_pids+=("$slow_pid")
for _ in $(seq 200); do [[ $(mock_stat in_flight) == 1 ]] && break; sleep 0.01; done
[[ $(mock_stat in_flight) == 1 ]] || bad "the slow request did not reach the mock"
t_term=$(now_ms)
timeout 30 podman kill --signal TERM "$name" >/dev/null || die "podman kill --signal TERM failed"
draining=''
for _ in $(seq 100); do code=$(readyz); [[ $code == 503 ]] && { draining=1; break; }; sleep 0.01; done
[[ -n $draining ]]; verdict $? "/readyz answers 503 while draining"
rc=$(timeout $((DRAIN_S + 20)) podman wait "$name" 2>/dev/null)
t_exit=$(now_ms)
stop_ms=$((t_exit - t_term))
wait "$slow_pid"
slow=$(cat "$tmp/slow.code"); [[ $slow == 200 ]]; verdict $? "the request in flight at SIGTERM ended 200 (got ${slow:-none})"
[[ ${rc:-x} == 0 ]] && ((stop_ms < DRAIN_S * 1000))
verdict $? "exit status 0 (got ${rc:-none}) $stop_ms ms after SIGTERM (drain_timeout_s: $DRAIN_S)"
if ((failed)); then
	echo "  --- pacerd's last log lines ---"
	podman logs --tail 20 "$name" 2>&1 | sed 's/^/  | /'
fi

awk -v s="$size" -v b="$build_ms" -v r="$start_ms" -v o="$own_ms" 'BEGIN {
	printf "container: image %.1f MB (%d bytes), build %.1f s, podman run to /readyz 200: %d ms (pacerd: <= %s ms)\n", s / 1e6, s, b / 1000, r, o }'
summary
((failed == 0))
