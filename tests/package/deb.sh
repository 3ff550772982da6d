#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Debian package, for real (make test runs it when podman is installed):
# in a fresh Debian 12 container (tests/package/Containerfile, made once on
# debian:12-slim and then taken from podman's cache) tests/package/deb-inside.sh
# builds it with `make deb`, installs it with `apt install ./pacerd_*.deb` and
# checks it (--check-config, conffile, man -w, the unit, dpkg -r keeping the
# edited conffile); a second container of the same image, with systemd as PID 1,
# installs that same package where systemd runs (tests/package/deb-systemd.sh:
# started by its postinst, answering, reloading, stopped by dpkg -r); then
# lintian, here, reports no error and no warning on that build (lintian is not
# in the image: it is large and the host has it).
#
#   tests/package/deb.sh        BUILD (build): where the package files are kept,
#                               $BUILD/deb-test/
# The last line is "deb: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
IMAGE=${DEB_TEST_IMAGE:-pacerd-debtest:latest}
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "  ok   $*"; }
bad() { failed=$((failed + 1)); echo "  FAIL $*"; }
summary() { echo "deb: $passed passed, $failed failed"; }
die() { bad "$*"; summary; exit 1; }

command -v podman >/dev/null || die "podman is missing"
# What this machine's podman needs (as scripts/container-test.sh).
rt=(); command -v runc >/dev/null && rt=(--runtime runc)
hn=$(ulimit -Hn); [[ $hn == unlimited || $hn -gt 20000 ]] && hn=20000
hu=$(ulimit -Hu); [[ $hu == unlimited || $hu -gt 32768 ]] && hu=32768
limits=(--ulimit "nofile=$hn:$hn" --ulimit "nproc=$hu:$hu")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pacerd-debtest.XXXXXX")
name=pacerd-debtest-$$
cleanup() {
	timeout 30 podman rm -f -t 0 "$name" "$name-systemd" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# The image is kept between runs, so a build dependency added to debian/control
# and not here fails only on a machine that kept the old image (CI's did, with
# libwslay-dev): every package Build-Depends names must be in the Containerfile.
missing=""
for dep in $(sed -n '/^Build-Depends:/,/^[A-Z]/p' debian/control | sed 's/^Build-Depends://; /^[A-Z]/d' |
	tr ',' '\n' | sed 's/(.*)//; s/[[:space:]]//g' | grep -v '^$'); do
	[[ $dep == debhelper-compat ]] && dep=debhelper
	grep -qw -- "$dep" tests/package/Containerfile || missing+=" $dep"
done
[[ -z $missing ]] && ok "tests/package/Containerfile installs every Build-Depends of debian/control" ||
	bad "tests/package/Containerfile lacks Build-Depends:$missing"

t0=$SECONDS
nice -n 19 timeout 1200 ./scripts/container-base.sh || die "could not make the base image (scripts/container-base.sh)"
old_id=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null)
if ! nice -n 19 timeout 1200 podman build "${rt[@]}" "${limits[@]}" --pull=never -t "$IMAGE" \
	-f tests/package/Containerfile tests/package >"$tmp/image.log" 2>&1; then
	tail -n 20 "$tmp/image.log" | sed 's/^/  | /'
	die "podman build of $IMAGE failed"
fi
new_id=$(podman image inspect --format '{{.Id}}' "$IMAGE")
[[ -n $old_id && $old_id != "$new_id" ]] && podman rmi "$old_id" >/dev/null 2>&1
ok "image $IMAGE ready in $((SECONDS - t0)) s"

# The tree as `make deb` copies it: no build trees, .git or node_modules.
mkdir -p "$tmp/src" "$tmp/out"
tar --exclude='./build*' --exclude=./.git --exclude=node_modules --exclude=./tests/integration/.tmp \
	-cf - . | tar -xf - -C "$tmp/src"
# Without .git the version comes from a VERSION file (scripts/version.sh), as in
# a tarball from make dist: the checkout's own.
./scripts/version.sh >"$tmp/src/VERSION"
t0=$SECONDS
# No network: everything the build and the install need is in the image.
timeout 900 podman run --name "$name" "${rt[@]}" "${limits[@]}" --network none \
	-v "$tmp/src:/src:ro" -v "$tmp/out:/out" "$IMAGE" \
	bash /src/tests/package/deb-inside.sh >"$tmp/inside.log" 2>&1
rc=$?
# The lines "ok …" and "FAIL …" a script in a container printed, as checks here.
relay() {
	local line
	while IFS= read -r line; do
		case $line in
		ok\ *) ok "${line#ok }" ;;
		FAIL\ *) bad "${line#FAIL }" ;;
		*) echo "  | $line" ;;
		esac
	done <"$1"
}
relay "$tmp/inside.log"
((rc == 0)) || bad "the container exited with status $rc"
echo "  (in the container: $((SECONDS - t0)) s)"

# Where systemd runs: the same image with systemd as PID 1, the package above.
if ls "$tmp"/out/pacerd_*_*.deb >/dev/null 2>&1; then
	t0=$SECONDS
	if timeout 60 podman run -d --name "$name-systemd" "${rt[@]}" "${limits[@]}" --network none \
		--systemd=always -v "$tmp/out:/out:ro" -v "$tmp/src/tests/package:/t:ro" "$IMAGE" \
		/lib/systemd/systemd >/dev/null 2>"$tmp/systemd.err"; then
		timeout 120 podman exec "$name-systemd" bash /t/deb-systemd.sh >"$tmp/systemd.log" 2>&1
		relay "$tmp/systemd.log"
		echo "  (under systemd: $((SECONDS - t0)) s)"
	else
		bad "could not start a container with systemd as PID 1: $(head -c 300 "$tmp/systemd.err")"
	fi
fi

# lintian on the package built above.
changes=$(ls "$tmp"/out/*.changes 2>/dev/null | head -1)
if [[ -z $changes ]]; then
	bad "no package came out of the container"
elif ! command -v lintian >/dev/null; then
	bad "lintian is missing (scripts/install-deps.sh)"
else
	lint=$(lintian "$changes" 2>&1 | grep -E '^[EW]: ')
	if [[ -z $lint ]]; then ok "lintian: no error, no warning"
	else bad "lintian:"; sed 's/^/         /' <<<"$lint"; fi
fi
mkdir -p "$BUILD/deb-test" && cp "$tmp"/out/* "$BUILD/deb-test/" 2>/dev/null
summary
((failed == 0))
