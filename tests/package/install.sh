#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make install with PREFIX and DESTDIR (make test): the binary, the four man
# pages and the unit land under DESTDIR/PREFIX, the unit runs PREFIX/bin/pacerd,
# the configuration goes to DESTDIR/etc/pacerd, and a second install keeps an
# edited configuration.
#
#   tests/package/install.sh    BUILD (build)
# The last line is "install: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
passed=0 failed=0
check() { if (($1 == 0)); then passed=$((passed + 1)); echo "  ok   $2"; else failed=$((failed + 1)); echo "  FAIL $2"; fi; }
dest=$(mktemp -d "${TMPDIR:-/tmp}/pacerd-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT
prefix=/opt/pacerd-test

make -s BUILD="$BUILD" install PREFIX="$prefix" DESTDIR="$dest" >"$dest.log" 2>&1
check $? "make install PREFIX=$prefix DESTDIR=…"
[[ -x $dest$prefix/bin/pacerd ]]; check $? "the binary is at DESTDIR$prefix/bin/pacerd"
n=$(ls "$dest$prefix"/share/man/man{1,5,8}/pacerd* 2>/dev/null | wc -l)
((n == 4)); check $? "4 man pages under DESTDIR$prefix/share/man (found $n)"
unit=$dest/etc/systemd/system/pacerd.service
grep -q "^ExecStart=$prefix/bin/pacerd " "$unit" && ! grep -v "^#" "$unit" | grep -q /usr/local/
check $? "the unit runs $prefix/bin/pacerd and names no /usr/local path outside its comments"
cmp -s conf/pacerd.yaml "$dest/etc/pacerd/pacerd.yaml"; check $? "the documented configuration is at DESTDIR/etc/pacerd/pacerd.yaml"
echo '# edited' >>"$dest/etc/pacerd/pacerd.yaml"
make -s BUILD="$BUILD" install PREFIX="$prefix" DESTDIR="$dest" >>"$dest.log" 2>&1
grep -q '^# edited' "$dest/etc/pacerd/pacerd.yaml"; check $? "a second make install keeps the edited configuration"
rm -f "$dest.log"
echo "install: $passed passed, $failed failed"
((failed == 0))
