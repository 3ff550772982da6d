#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make test: every unit test, then the integration suite's first phase (its
# files ITEST_JOBS at a time, 6); beside both, at a lower priority (nice), the
# lint checks (when LINT names the script: each check is one test), a short
# deterministic pass of every fuzzer, the container test when podman is
# installed (one line says so when it is not) and the package stage
# (tests/package/run.sh: man pages, make install, alert rules and dashboard,
# the Debian package with podman), whose output follows the integration's.
# Then the timing-sensitive tests with nothing else beside them (the light ones
# ITEST_ALONE_JOBS at a time, 6: tests/integration/run.mjs). Each stage's time
# is printed; the last line is the total, with the count of timing tests that
# passed only on their rerun.
set -o pipefail
BUILD=${BUILD:-build}
unit_out=$(mktemp); fuzz_out=$(mktemp); int_out=$(mktemp); int2_out=$(mktemp); ctr_out=$(mktemp)
lint_out=$(mktemp); pkg_out=$(mktemp); side_rc=$(mktemp); check_rc=$(mktemp)
trap 'rm -f "$unit_out" "$fuzz_out" "$int_out" "$int2_out" "$ctr_out" "$lint_out" "$pkg_out" "$side_rc" "$check_rc"' EXIT
t_start=$SECONDS
# Beside the unit tests and the integration files that do not measure timing:
# the checks that need only the CPU (lint, fuzz), and the container test and the
# package stage, two chains of one step after the other, niced: the tests, which
# mostly wait on timers, keep their turn on the cores when they wake. Their
# output follows the integration's.
export BUILD PACERD_BIN=$BUILD/pacerd MOCK_BIN=$BUILD/pacerd-mock
(
	t0=$SECONDS
	lint=0 fuzz=0
	if [ -n "${LINT:-}" ]; then
		nice -n 10 "$LINT" >"$lint_out" 2>&1; lint=$?
		echo "  (lint: $((SECONDS - t0)) s)" >>"$lint_out"
	fi
	t0=$SECONDS
	if [ -n "${FUZZ_BINS:-}" ]; then
		# shellcheck disable=SC2086
		nice -n 10 ./tests/run-fuzz.sh smoke $FUZZ_BINS >"$fuzz_out" 2>&1; fuzz=$?
		echo "  (fuzz: $((SECONDS - t0)) s)" >>"$fuzz_out"
	fi
	echo "$lint $fuzz" >"$check_rc"
) &
check_pid=$!
(
	t0=$SECONDS
	ctr=0
	if command -v podman >/dev/null 2>&1; then
		nice -n 10 ./scripts/container-test.sh >"$ctr_out" 2>&1; ctr=$?
	else
		echo "container: not run (podman is missing)" >"$ctr_out"
	fi
	echo "  (container: $((SECONDS - t0)) s)" >>"$ctr_out"
	t0=$SECONDS
	nice -n 10 ./tests/package/run.sh >"$pkg_out" 2>&1; pkg=$?
	echo "  (package: $((SECONDS - t0)) s)" >>"$pkg_out"
	echo "$ctr $pkg" >"$side_rc"
) &
side_pid=$!
./tests/run-unit.sh "$@" | tee "$unit_out"; unit_rc=$?
echo "(unit: $((SECONDS - t_start)) s)"
t0=$SECONDS
node tests/integration/run.mjs --jobs "${ITEST_JOBS:-6}" --phase together | tee "$int_out"; int_rc=$?
echo "(integration, together: $((SECONDS - t0)) s)"
t0=$SECONDS
wait "$check_pid" "$side_pid"
[ $((SECONDS - t0)) -gt 0 ] && echo "(waited $((SECONDS - t0)) s for the checks beside it)"
read -r lint_rc fuzz_rc <"$check_rc" || { lint_rc=1; fuzz_rc=1; }
read -r ctr_rc pkg_rc <"$side_rc" || { ctr_rc=1; pkg_rc=1; }
cat "$lint_out" "$fuzz_out" "$ctr_out" "$pkg_out"
# What the image builds wrote is flushed now, not while a test measures
# milliseconds.
sync
first=$(grep -cE '^(not )?ok [0-9]+ ' "$int_out")
t0=$SECONDS
ITEST_NUMBER_FROM=$first node tests/integration/run.mjs --jobs "${ITEST_ALONE_JOBS:-6}" --phase alone | tee "$int2_out"; int2_rc=$?
echo "(integration, alone: $((SECONDS - t0)) s; make test's tests: $((SECONDS - t_start)) s)"
sum() { grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed' "$1" | tail -1 | sed -E "s/.*: ([0-9]+) passed, ([0-9]+) failed.*/\\$2/"; }
up=$(sum "$unit_out" 1); uf=$(sum "$unit_out" 2); ip=$(sum "$int_out" 1); if_=$(sum "$int_out" 2)
ip2=$(sum "$int2_out" 1); if2=$(sum "$int2_out" 2)
fp=$(sum "$fuzz_out" 1); ff=$(sum "$fuzz_out" 2)
lp=$(sum "$lint_out" 1); lf=$(sum "$lint_out" 2)
cp=$(sum "$ctr_out" 1); cf=$(sum "$ctr_out" 2)
pp=$(sum "$pkg_out" 1); pf=$(sum "$pkg_out" 2)
[ -z "$up" ] && { up=0; uf=1; }
[ -z "$ip" ] && { ip=0; if_=1; }
[ -z "$ip2" ] && { ip2=0; if2=1; }
ip=$((ip + ip2)); if_=$((if_ + if2))
# Timing tests that passed only when run again (run.mjs gives each one a second
# run): counted in passed, and named on the last line so that CI shows them.
reruns() { grep -E '^integration: [0-9]+ passed, [0-9]+ failed, [0-9]+ passed on a rerun' "$1" | tail -1 | sed -E 's/.*failed, ([0-9]+) passed on a rerun.*/\1/'; }
ir=$(reruns "$int_out"); ir2=$(reruns "$int2_out")
ir=$((${ir:-0} + ${ir2:-0}))
[ -z "$fp" ] && { fp=0; ff=$((fuzz_rc != 0)); }
[ -z "$lp" ] && { lp=0; lf=$((lint_rc != 0)); }
# No summary line from a container test that ran is one failure, never zero.
[ -z "$cp" ] && { cp=0; cf=$((ctr_rc != 0)); }
[ -z "$pp" ] && { pp=0; pf=1; }
echo "$((lp + up + fp + ip + pp + cp)) passed, $((lf + uf + ff + if_ + pf + cf)) failed, $ir passed on a rerun"
[ "$lint_rc" -eq 0 ] && [ "$unit_rc" -eq 0 ] && [ "$fuzz_rc" -eq 0 ] && [ "$int_rc" -eq 0 ] &&
	[ "$int2_rc" -eq 0 ] && [ "$ctr_rc" -eq 0 ] && [ "$pkg_rc" -eq 0 ] &&
	[ $((lf + uf + ff + if_ + pf + cf)) -eq 0 ]
