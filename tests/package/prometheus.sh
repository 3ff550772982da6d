#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Prometheus alert rules and the Grafana dashboard in conf/examples/ (make
# test): promtool check rules accepts the rules, promtool test rules passes
# their unit test (tests/package/alerts.test.yaml), and the dashboard is JSON
# whose every panel query is non-empty. That each query returns data from a
# real scrape is tests/integration/cases/dashboard.mjs.
#
#   tests/package/prometheus.sh
# The last line is "prometheus: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "  ok   $*"; }
bad() { failed=$((failed + 1)); echo "  FAIL $*"; }
rules=conf/examples/prometheus-alerts.yaml

if out=$(promtool check rules "$rules" 2>&1); then ok "promtool check rules $rules: $(grep -o '[0-9]* rules found' <<<"$out")"
else bad "promtool check rules $rules:"; sed 's/^/         /' <<<"$out"; fi
if out=$(cd tests/package && promtool test rules alerts.test.yaml 2>&1); then ok "promtool test rules tests/package/alerts.test.yaml"
else bad "promtool test rules tests/package/alerts.test.yaml:"; sed 's/^/         /' <<<"$out"; fi
# Each alert of the rules has a test case that expects it to fire.
for a in $(sed -n 's/^ *- alert: *//p' "$rules"); do
	n=$(awk -v a="$a" '$0 ~ "alertname: " a "$" { f = 1; next } f && /exp_labels/ { c++; f = 0 } /alertname:/ { f = 0 } END { print c + 0 }' tests/package/alerts.test.yaml)
	if ((n > 0)); then ok "alert $a has a firing case in the unit test"; else bad "alert $a has no firing case in tests/package/alerts.test.yaml"; fi
done
out=$(python3 - conf/examples/grafana-dashboard.json <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
panels = [p for p in d["panels"] if p.get("type") != "row"]
ids = [p["id"] for p in d["panels"]]
assert len(ids) == len(set(ids)), "duplicate panel ids"
n = 0
for p in panels:
    assert p.get("targets"), f"panel {p['title']!r} has no query"
    for t in p["targets"]:
        assert t.get("expr", "").strip(), f"panel {p['title']!r}: an empty query"
        n += 1
print(f"{len(panels)} panels, {n} queries")
PY
)
if (($? == 0)); then ok "conf/examples/grafana-dashboard.json parses: $out"; else bad "grafana-dashboard.json: $out"; fi
echo "prometheus: $passed passed, $failed failed"
((failed == 0))
