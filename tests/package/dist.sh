#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make dist (make test's package stage): twice gives the same bytes (the same
# SHA-256, and the .sha256 file agrees), the tarball holds the committed tree
# with a VERSION file and no .git, and pacerd built from it (make all in the
# unpacked tree) says the version a git build of that commit says.
#
#   tests/package/dist.sh    BUILD (build)
# The last line is "dist: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
passed=0 failed=0
check() { if (($1 == 0)); then passed=$((passed + 1)); echo "  ok   $2"; else failed=$((failed + 1)); echo "  FAIL $2"; fi; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pacerd-dist.XXXXXX")
trap 'rm -rf "$work"' EXIT
want=$(./scripts/version.sh --clean)
tarball=$BUILD/dist/pacerd-$want.tar.gz

make -s BUILD="$BUILD" dist >"$work/log" 2>&1
check $? "make dist"
a=$(sha256sum <"$tarball" | cut -d' ' -f1)
sleep 1 # a timestamp that leaked in would differ now
make -s BUILD="$BUILD" dist >>"$work/log" 2>&1
b=$(sha256sum <"$tarball" | cut -d' ' -f1)
[[ -n $a && $a == "$b" ]]; check $? "make dist twice: the same SHA-256 ($a, $b)"
(cd "$BUILD/dist" && sha256sum -c --quiet "pacerd-$want.tar.gz.sha256") >>"$work/log" 2>&1
check $? "pacerd-$want.tar.gz.sha256 verifies"
tar -xzf "$tarball" -C "$work"
src=$work/pacerd-$want
[[ -f $src/Makefile && ! -e $src/.git && $(cat "$src/VERSION" 2>/dev/null) == "$want" ]]
check $? "the tarball unpacks to pacerd-$want/ with the Makefile and VERSION ($want), without .git"
n_git=$(git ls-tree -r HEAD --name-only | wc -l)
n_tar=$(cd "$src" && find . -type f ! -name VERSION | wc -l)
((n_git > 0 && n_git == n_tar)); check $? "it holds the commit's $n_git files (found $n_tar besides VERSION)"
# SAN=0 BUILD=build: a user's plain `make all`, also under `make test SAN=1`, whose
# SAN=1 would reach this make through MAKEFLAGS and build into build-san/.
make -s -C "$src" -j2 SAN=0 BUILD=build all >"$work/build.log" 2>&1
check $? "make all in the unpacked tarball"
got=$("$src/build/pacerd" --version 2>&1)
[[ $got == "pacerd $want" ]]; check $? "its pacerd --version says the git build's version: '$got' (want 'pacerd $want')"
echo "dist: $passed passed, $failed failed"
((failed == 0))
