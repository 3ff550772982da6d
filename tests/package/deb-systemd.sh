#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs inside a tests/package/Containerfile container whose PID 1 is systemd
# (tests/package/deb.sh starts it with podman --systemd=always): the package
# that deb-inside.sh built (/out) installed where systemd runs is started by its
# postinst, sandbox and all, answers, reloads, and is stopped by dpkg -r.
# Prints "ok ..." or "FAIL ..." per check.
set -uo pipefail
ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; }
check() { if (($1 == 0)); then ok "$2"; else bad "$2"; fi; }
# The admin listener's answer to GET PATH, or "" (bash's /dev/tcp: no curl here).
admin() {
	local line
	exec 3<>/dev/tcp/127.0.0.1/9090 || return 1
	printf 'GET %s HTTP/1.0\r\n\r\n' "$1" >&3
	read -r line <&3
	exec 3<&-
	echo "${line%$'\r'}"
}
journal() { journalctl -u pacerd --no-pager -o cat 2>/dev/null; }

for _ in $(seq 100); do
	s=$(systemctl is-system-running 2>/dev/null)
	[[ $s == running || $s == degraded ]] && break
	sleep 0.1
done
export DEBIAN_FRONTEND=noninteractive
if apt-get install -y -q /out/pacerd_*_*.deb >/tmp/apt.log 2>&1; then ok "under systemd: apt install ./pacerd_*.deb"
else bad "under systemd: apt install ./pacerd_*.deb"; tail -n 20 /tmp/apt.log; exit 1; fi
[[ $(systemctl is-enabled pacerd 2>&1) == enabled ]]; check $? "the unit is enabled"
for _ in $(seq 50); do [[ $(systemctl is-active pacerd) == active ]] && break; sleep 0.1; done
state=$(systemctl is-active pacerd)
[[ $state == active ]]; check $? "the postinst started it: systemctl is-active pacerd: $state"
[[ $state == active ]] || { systemctl status pacerd --no-pager -l | tail -n 15; journal | tail -n 15; }
code=$(admin /readyz)
[[ $code == "HTTP/1.1 200 OK" ]]; check $? "it answers: GET /readyz: ${code:-nothing}"
user=$(ps -o user= -C pacerd | head -1)
[[ -n $user && $user != root ]]; check $? "it runs as a dynamic user, not root (${user:-?})"
systemctl reload pacerd
for _ in $(seq 50); do journal | grep -q '"event":"config_reloaded"' && break; sleep 0.1; done
journal | grep -q '"event":"config_reloaded"'; check $? "systemctl reload pacerd: config_reloaded in the journal"
if dpkg -r pacerd >/tmp/remove.log 2>&1; then ok "under systemd: dpkg -r pacerd"
else bad "under systemd: dpkg -r pacerd"; cat /tmp/remove.log; fi
[[ $(systemctl is-active pacerd) != active ]]; check $? "dpkg -r stopped it"
