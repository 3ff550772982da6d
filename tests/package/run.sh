#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make test's package stage: the man pages (man.sh), make install (install.sh),
# the alert rules and the dashboard (prometheus.sh), and, when podman is
# installed, the Debian package built, installed and removed in a fresh
# Debian 12 container, then lintian (deb.sh); one line says so when podman is
# missing. The last line is "package: N passed, M failed", the sum.
#
#   tests/package/run.sh        BUILD (build): $BUILD/pacerd and $BUILD/man/
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
p=0 f=0 rc=0
stage() {
	local t0=$SECONDS r
	"$@" | tee "$out"
	r=${PIPESTATUS[0]}
	local line
	line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
	if [[ -n $line ]]; then
		p=$((p + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")))
		f=$((f + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
	fi
	# No summary from a stage that failed is one failure, never zero.
	if ((r != 0)); then rc=1; [[ -z $line ]] && f=$((f + 1)); fi
	echo "  ($1: $((SECONDS - t0)) s)"
}
stage tests/package/man.sh
stage tests/package/install.sh
stage tests/package/dist.sh
stage tests/package/prometheus.sh
if command -v podman >/dev/null 2>&1; then
	stage tests/package/deb.sh
else
	echo "package: the Debian package test not run (podman is missing)"
fi
echo "package: $p passed, $f failed"
exit "$rc"
