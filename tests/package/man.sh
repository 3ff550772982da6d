#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The manual pages (make test; make man builds them):
#   * every page in man/ renders with `man --warnings` and not one warning;
#   * pacerd.yaml(5) documents exactly the keys the parser accepts: for each
#     line of `pacerd --config-keys` (path, type, bounds, default, straight
#     from config.c's option tables) the page has the heading
#         *path* (type, bounds, default D)
#     word for word, and it has no heading for a key the parser lacks;
#   * every PACERD_* variable the sources read is in pacerd(8) or pacerd-top(1).
#
#   tests/package/man.sh        BUILD (build): $BUILD/pacerd and $BUILD/man/
# The last line is "man: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "  ok   $*"; }
bad() { failed=$((failed + 1)); echo "  FAIL $*"; }
summary() { echo "man: $passed passed, $failed failed"; }

# ---- rendering
for src in man/*.scd; do
	page=$BUILD/man/$(basename "$src" .scd)
	if [[ ! -s $page ]]; then bad "$page is missing (make BUILD=$BUILD man)"; continue; fi
	# man writes groff's warnings to stderr; the page itself is not looked at.
	warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	if [[ -z $warn ]]; then ok "$(basename "$page") renders without warnings"
	else bad "$(basename "$page"): $warn"; fi
done

# ---- pacerd.yaml(5) against the option tables
page_src=man/pacerd.yaml.5.scd
keys=$("$BUILD/pacerd" --config-keys) || { bad "$BUILD/pacerd --config-keys failed"; summary; exit 1; }
# The heading each key must have: "one of a|b" for an enum, the bounds and the
# default when there are any.
want=$(awk -F'\t' '{
	d = ($2 == "enum") ? "one of " $3 : $2
	if ($2 != "enum" && $3 != "-") d = d ", " $3
	if ($4 != "-") d = d ", default " $4
	printf "*%s* (%s)\n", $1, d }' <<<"$keys")
# scdoc escapes (\*) are not part of what the reader sees.
have=$(grep -E '^\*[^* ]+\* \(' "$page_src" | sed 's/\\//g')
missing=$(comm -23 <(sort <<<"$want") <(sort <<<"$have"))
stale=$(comm -13 <(sort <<<"$want") <(sort <<<"$have"))
n=$(wc -l <<<"$want")
if [[ -z $missing ]]; then ok "pacerd.yaml(5) has the heading of each of the $n keys of pacerd --config-keys"
else bad "pacerd.yaml(5) lacks (or has another type, bounds or default for):"; sed 's/^/         /' <<<"$missing"; fi
if [[ -z $stale ]]; then ok "pacerd.yaml(5) documents no key the parser lacks"
else bad "pacerd.yaml(5) documents what pacerd --config-keys does not print:"; sed 's/^/         /' <<<"$stale"; fi

# ---- environment variables
vars=$(grep -rhoE '"PACERD_[A-Z_]+"' src/ | tr -d '"' | sort -u)
undoc=$(for v in $vars; do grep -q "$v" man/pacerd.8.scd man/pacerd-top.1.scd || echo "$v"; done)
if [[ -z $undoc ]]; then ok "every PACERD_* variable of src/ ($(wc -w <<<"$vars")) is in pacerd(8) or pacerd-top(1)"
else bad "not in pacerd(8) or pacerd-top(1): $(tr '\n' ' ' <<<"$undoc")"; fi

summary
((failed == 0))
