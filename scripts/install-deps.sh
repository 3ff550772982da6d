#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages pacerd needs.
#   install-deps.sh run    to build and run it (make run): a compiler, pkg-config and
#                          the -dev packages of the libraries it links; nothing else
#   install-deps.sh [test] to build and test it (make test): the above and every tool
#                          the tests use (Node.js, clang, valgrind, Prometheus, ...)
#   install-deps.sh bench  to run make bench, pacerd against nginx
# Idempotent: asks dpkg what is missing and installs only that, without prompts.
# Runs as root (CI, containers) or through sudo when available.
set -eu

PKGS="gcc make pkg-config libc6-dev git
libevent-dev libhttp-parser-dev libcurl4-openssl-dev libjansson-dev libyaml-dev libssl-dev check
libwslay-dev
curl openssl ca-certificates valgrind wrk
clang libclang-rt-14-dev python3 python3-httpx systemd
clang-format cppcheck
procps tzdata prometheus tmux chromium
libhiredis-dev redis-server
build-essential debhelper lintian scdoc man-db"
# prometheus: promtool checks /metrics, and a real Prometheus scrapes it (tests/integration).
# clang-format, cppcheck: make lint (scripts/lint.sh), which make test runs.
# build-essential, debhelper: make deb (dpkg-buildpackage; debian/control's Build-Depends);
# lintian: the package test (tests/package/deb.sh); scdoc: make man (man/*.scd -> roff);
# man-db: man --warnings renders the pages in tests/package/man.sh.
# libhiredis-dev: the shared store (store.kind: redis); redis-server: its tests start one
# (Debian's is built with TLS: the store's TLS tests use its tls-port). libevent-dev
# brings libevent_openssl (TLS to Redis) and libssl-dev OpenSSL's headers.
# libwslay-dev: WebSocket framing for the Responses API's WebSocket mode and Realtime
# (docs/decisions.md); linked by name (-lwslay), as it ships no pkg-config file.
# tmux: the terminal of the `pacerd top` integration test (tests/integration/cases/top.mjs).
# chromium: the headless browser that loads the admin status page (cases/page.mjs, through
# the DevTools protocol on a pipe: no npm package). On a fresh Debian 12 it alone is 174
# packages, about 47 s of apt and 350 MB; page.mjs skips its browser test with one line
# where it is absent.
# python3-httpx: a Python client through the HTTPS proxy (tests/integration/cases/tunnel.mjs).
# tzdata: the IANA zones of plans' day_time_zone (a minimal Debian may lack them).
# procps: /bin/kill, which systemd/pacerd.service names for ExecReload (systemd-analyze
# verify checks that it exists; a minimal Debian has no procps).
# make bench: Debian's nginx (nginx-light: in Debian 12 it installs nginx), strace,
# taskset (util-linux), wrk, openssl, curl-config, redis-cli (redis-tools: Redis
# commands per request).
# make run: what `make all` compiles and links (the Makefile's pkg-config list), and the
# CA bundle that libcurl verifies the providers' certificates with. Nothing that only
# the tests use: on a fresh Debian 12 this is about 30 s of apt, not 4 minutes.
RUN_PKGS="gcc make pkg-config libc6-dev
libevent-dev libhttp-parser-dev libcurl4-openssl-dev libjansson-dev libyaml-dev libssl-dev
libhiredis-dev libwslay-dev ca-certificates git"
# git: scripts/version.sh reads the version from `git describe` in a checkout (a
# minimal Debian has none, and the build would say "unknown"); make dist archives
# HEAD with it.
BENCH_PKGS="nginx-light strace util-linux wrk openssl curl python3 libcurl4-openssl-dev redis-server redis-tools"
GROUP=${1:-test}
case "$GROUP" in
run) PKGS=$RUN_PKGS ;;
bench) PKGS=$BENCH_PKGS ;;
test) ;;
*)
	echo "install-deps: unknown group '$GROUP' (run, test or bench)" >&2
	exit 2
	;;
esac

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
# Node.js runs the SDK integration tests; any install that provides node and npm will do
# (Debian's own packages, or a NodeSource build as on some machines).
if [ "$GROUP" = test ]; then
	if ! command -v node >/dev/null 2>&1; then missing="$missing nodejs"; fi
	if ! command -v npm >/dev/null 2>&1; then missing="$missing npm"; fi
	# make test runs the container and package tests where podman is installed;
	# they make their base image with debootstrap (scripts/container-base.sh).
	if command -v podman >/dev/null 2>&1 && ! command -v debootstrap >/dev/null 2>&1; then
		missing="$missing debootstrap"
	fi
fi

[ -z "$missing" ] && exit 0

SUDO=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
		echo "install-deps: missing packages:$missing (run as root to install them)" >&2
		exit 1
	fi
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists yet; update once before installing.
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
