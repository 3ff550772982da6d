#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs inside the tests/package/Containerfile image (tests/package/deb.sh
# starts it): builds the package from the tree at /src, installs it the way an
# administrator would, and checks what it promises. Prints "ok ..." or
# "FAIL ..." per check; the package files are left in /out for lintian.
set -uo pipefail
ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; }
check() { if (($1 == 0)); then ok "$2"; else bad "$2"; fi; }

if ! cp -a /src /tmp/pacerd || ! cd /tmp/pacerd; then bad "copying the tree"; exit 1; fi
t0=$SECONDS
make deb >/tmp/build.log 2>&1
rc=$?
check $rc "make deb builds the package in a fresh Debian 12 ($((SECONDS - t0)) s)"
((rc == 0)) || { tail -n 25 /tmp/build.log; exit 1; }
cp build/deb/*.deb build/deb/*.changes build/deb/*.buildinfo /out/

export DEBIAN_FRONTEND=noninteractive
if apt-get install -y -q ./build/deb/pacerd_*_*.deb >/tmp/apt.log 2>&1; then
	ok "apt install ./pacerd_*.deb"
else
	bad "apt install ./pacerd_*.deb"; tail -n 20 /tmp/apt.log
fi
[[ -x /usr/bin/pacerd ]]; check $? "/usr/bin/pacerd is installed"
# The package's version is the program's: debian/changelog follows
# src/core/version.h.
pv=$(dpkg-query -W -f='${Version}' pacerd 2>/dev/null)
bv=$(pacerd --version 2>&1)
[[ "pacerd ${pv%-*}" == "$bv" ]]; check $? "the package's version ${pv:-?} is the program's ($bv)"
out=$(pacerd --check-config /etc/pacerd/pacerd.yaml 2>&1)
check $? "pacerd --check-config /etc/pacerd/pacerd.yaml: $out"
grep -qx /etc/pacerd/pacerd.yaml /var/lib/dpkg/info/pacerd.conffiles
check $? "/etc/pacerd/pacerd.yaml is a conffile"
pages=$(man -w pacerd pacerd.yaml pacerd-plan pacerd-top 2>&1)
[[ $(grep -c '^/usr/share/man/man[158]/pacerd' <<<"$pages") == 4 ]]
check $? "man -w finds pacerd(8), pacerd.yaml(5), pacerd-plan(1), pacerd-top(1): $(tr '\n' ' ' <<<"$pages")"
warn=$(MANWIDTH=80 man --warnings pacerd.yaml 2>&1 >/dev/null)
[[ -z $warn ]]; check $? "man --warnings pacerd.yaml: no warning ${warn:+($warn)}"
[[ -s /usr/share/doc/pacerd/examples/openai.yaml && -s /usr/share/doc/pacerd/examples/grafana-dashboard.json ]]
check $? "the examples are in /usr/share/doc/pacerd/examples/"
grep -q '^License: Apache-2.0$' /usr/share/doc/pacerd/copyright &&
	grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/$' /usr/share/doc/pacerd/copyright &&
	MANWIDTH=200 man pacerd 2>/dev/null | grep -q 'Apache License, Version 2.0'
check $? "the licence: Apache-2.0 in /usr/share/doc/pacerd/copyright (machine-readable) and in pacerd(8)"
v=$(systemd-analyze verify /lib/systemd/system/pacerd.service 2>&1)
rc=$?
[[ $rc == 0 ]] && ! grep -q pacerd.service <<<"$v"
check $? "systemd-analyze verify /lib/systemd/system/pacerd.service (its Documentation= man pages too): clean ${v:+($v)}"
grep -q '^ExecStart=/usr/bin/pacerd ' /lib/systemd/system/pacerd.service
check $? "the unit runs /usr/bin/pacerd"
# No systemd runs in the container: postinst enables the unit (the symlink);
# starting it is for machines where systemd runs (/run/systemd/system).
[[ -L /etc/systemd/system/multi-user.target.wants/pacerd.service ]]
check $? "the unit is enabled (multi-user.target.wants)"

# An administrator's edit, then removal: the edited conffile stays.
echo '# edited by the administrator' >>/etc/pacerd/pacerd.yaml
if dpkg -r pacerd >/tmp/remove.log 2>&1; then ok "dpkg -r pacerd"
else bad "dpkg -r pacerd"; cat /tmp/remove.log; fi
[[ ! -e /usr/bin/pacerd && ! -e /lib/systemd/system/pacerd.service ]]
check $? "the binary and the unit are gone"
grep -q '^# edited by the administrator' /etc/pacerd/pacerd.yaml
check $? "the edited /etc/pacerd/pacerd.yaml is left in place"
