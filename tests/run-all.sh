#!/bin/bash
# make test: the lint checks (when LINT names the script: each check is one
# test), every unit test, a short deterministic pass of every fuzzer, the
# integration suite, the package stage (tests/package/run.sh: man pages, make
# install, alert rules and dashboard, and with podman the Debian package), then
# the container test when podman is installed (one line says so when it is
# not); the last line is the total.
set -o pipefail
BUILD=${BUILD:-build}
unit_out=$(mktemp); fuzz_out=$(mktemp); int_out=$(mktemp); ctr_out=$(mktemp); lint_out=$(mktemp)
pkg_out=$(mktemp)
trap 'rm -f "$unit_out" "$fuzz_out" "$int_out" "$ctr_out" "$lint_out" "$pkg_out"' EXIT
lint_rc=0
if [ -n "${LINT:-}" ]; then
	"$LINT" | tee "$lint_out"; lint_rc=$?
fi
./tests/run-unit.sh "$@" | tee "$unit_out"; unit_rc=$?
fuzz_rc=0
if [ -n "${FUZZ_BINS:-}" ]; then
	# shellcheck disable=SC2086
	./tests/run-fuzz.sh smoke $FUZZ_BINS | tee "$fuzz_out"; fuzz_rc=$?
fi
PACERD_BIN=$BUILD/pacerd MOCK_BIN=$BUILD/pacerd-mock node tests/integration/run.mjs | tee "$int_out"; int_rc=$?
BUILD=$BUILD ./tests/package/run.sh | tee "$pkg_out"; pkg_rc=$?
ctr_rc=0
if command -v podman >/dev/null 2>&1; then
	MOCK_BIN=$BUILD/pacerd-mock ./scripts/container-test.sh | tee "$ctr_out"; ctr_rc=$?
else
	echo "container: not run (podman is missing)"
fi
sum() { grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed' "$1" | tail -1 | sed -E "s/.*: ([0-9]+) passed, ([0-9]+) failed.*/\\$2/"; }
up=$(sum "$unit_out" 1); uf=$(sum "$unit_out" 2); ip=$(sum "$int_out" 1); if_=$(sum "$int_out" 2)
fp=$(sum "$fuzz_out" 1); ff=$(sum "$fuzz_out" 2)
lp=$(sum "$lint_out" 1); lf=$(sum "$lint_out" 2)
cp=$(sum "$ctr_out" 1); cf=$(sum "$ctr_out" 2)
pp=$(sum "$pkg_out" 1); pf=$(sum "$pkg_out" 2)
[ -z "$up" ] && { up=0; uf=1; }
[ -z "$ip" ] && { ip=0; if_=1; }
[ -z "$fp" ] && { fp=0; ff=0; }
[ -z "$lp" ] && { lp=0; lf=$((lint_rc != 0)); }
# No summary line from a container test that ran is one failure, never zero.
[ -z "$cp" ] && { cp=0; cf=$((ctr_rc != 0)); }
[ -z "$pp" ] && { pp=0; pf=1; }
echo "$((lp + up + fp + ip + pp + cp)) passed, $((lf + uf + ff + if_ + pf + cf)) failed"
[ "$lint_rc" -eq 0 ] && [ "$unit_rc" -eq 0 ] && [ "$fuzz_rc" -eq 0 ] && [ "$int_rc" -eq 0 ] &&
	[ "$pkg_rc" -eq 0 ] && [ "$ctr_rc" -eq 0 ] && [ $((lf + uf + ff + if_ + pf + cf)) -eq 0 ]
