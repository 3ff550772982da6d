#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make lint: the checks that read the code without building it. Each problem is
# printed as file:line: what; the last line is "lint: P passed, F failed" (one
# count per check), and the exit status is 0 only when every check passed.
#
#   scripts/lint.sh                 every check
#   scripts/lint.sh banned imports  only those (format, banned, cppcheck, imports,
#                                   provider-strings, licence)
#
# format    clang-format --dry-run -Werror with the root .clang-format over every
#           .c/.h of src/ and tests/{unit,mock,bench,fuzz}; `make format` fixes it.
# banned    no sprintf, vsprintf, strcpy, strcat, atoi, atol, gets, strncpy, strtok
#           outside comments and string literals (STYLE.md, practice 12). Use
#           snprintf, memcpy with a known length, strtol/strtoll with an end
#           pointer and errno, strtok_r or a hand-written split.
# cppcheck  cppcheck (warning, style, performance, portability) with
#           scripts/cppcheck-suppressions.txt; a false positive is suppressed
#           where it is, with /* cppcheck-suppress <id> ; <reason> */ on the line before.
# imports   the layers of DESIGN §8: a folder of src/ includes only itself and
#           the folders below (table IMPORTS); src/main.c includes anything.
#           Every include of a pacerd header names its folder ("core/log.h").
#           A type header (<x>-t.h: sched/sched_lane-t.h) is its folder's
#           alone: the others go through <x>.h's functions and accessors.
# provider-strings
#           what one provider says stays in src/provider/ (DESIGN §8; issue 27):
#           a string literal elsewhere in src/ naming a provider's header or
#           error code (table PROVIDER_STRINGS, case-insensitive substrings)
#           fails with file:line. A literal that must stay (the YAML words of
#           key_header) has /* lint: provider-strings ok: <why> */ on the line
#           before its declaration. Comments are not read.
#
# The layers (who may include whom; the folder itself always):
#
#   core      -
#   http      core
#   provider  core
#   sched     core provider
#   store     core provider         (beside sched, not above it: the lanes, in
#                                   proxy, hand each what the other said)
#   proxy     core http sched provider store
#   admin     core http proxy sched store provider
#   cli       core sched provider   (pacerd top reads /status over HTTP, not admin's headers)
#   src/main.c  anything
set -o pipefail
cd "$(dirname "$0")/.." || exit 2

declare -A IMPORTS=(
	[core]=""
	[http]="core"
	[provider]="core"
	[sched]="core provider"
	[store]="core provider"
	[proxy]="core http sched provider store"
	[admin]="core http proxy sched store provider"
	[cli]="core sched provider"
)

BANNED="sprintf vsprintf strcpy strcat atoi atol gets strncpy strtok"

# What only src/provider/ may name in a string literal. Headers a provider
# sends or reads (its rate-limit families, its key headers, its identity
# headers) and the codes of its error bodies. Left out on purpose, because
# they are HTTP's or pacerd's own and every layer may speak them:
# retry-after (RFC 9110, sent by pacerd's own refusals), retry-after-ms and
# x-should-retry (what pacerd's answers tell every SDK, PROVIDERS.md §8; the
# parse of them on upstream answers is ratelimit_headers.c's), authorization,
# x-request-id, the IETF ratelimit fields, provider names ("openai": the
# configuration's words and paths), and usage words such as input_tokens
# (pacerd's own budget names in /status and /metrics).
PROVIDER_STRINGS=(
	# rate-limit header families
	x-ratelimit- x-rate-limit- x-tokenlimit- anthropic- x-ms-retry-after-ms
	# key and identity headers
	api-key x-goog- openai-organization openai-project
	# error codes and error-body fields
	insufficient_quota credit_balance_exhausted spend_limit usage_limit_exceeded
	rate_limit_exceeded rate_limit_error overloaded_error server_is_overloaded slow_down
	resource_exhausted retryinfo retrydelay quotafailure quotaid
	# request rewrites a provider may refuse
	stream_options include_usage
)

JOBS=${LINT_JOBS:-2}

# licence   every source file (C, scripts, tests, man pages, the page, the
#           Makefile, the unit) names its licence in its first three lines:
#           "SPDX-License-Identifier: Apache-2.0" (issue 32; LICENSE).
sources() {
	find . \( -path ./.git -o -path './build*' -o -name node_modules -o -path ./tests/fuzz/corpus \
		-o -path ./tests/integration/.tmp -o -path ./debian/.debhelper -o -path ./debian/pacerd \) -prune -o \
		-type f \( -name '*.c' -o -name '*.h' -o -name '*.mjs' -o -name '*.sh' -o -name '*.py' \
		-o -name '*.lua' -o -name '*.html' -o -name '*.scd' -o -name Makefile -o -name Dockerfile \
		-o -name Containerfile -o -name '*.service' -o -path ./.ci/run -o -path ./debian/rules \) \
		-print | LC_ALL=C sort
}

files() {
	find src tests/unit tests/mock tests/bench tests/fuzz -path tests/fuzz/corpus -prune -o \
		-type f \( -name '*.c' -o -name '*.h' \) -print | LC_ALL=C sort
}

need() {
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "lint: $1 is missing (make deps installs it)"
		return 1
	fi
}

check_format() {
	need clang-format || return 1
	local out bad
	# One line per file that differs: where the first difference is, and how many.
	out=$(files | xargs -P "$JOBS" -n 8 clang-format --dry-run 2>&1 |
		awk -F: '/: (warning|error): code should be clang-formatted/ {
				if (!($1 in n)) { first[$1] = $2; order[++k] = $1 }
				n[$1]++
			}
			END { for (i = 1; i <= k; i++)
				printf "%s:%s: not clang-format clean (%d places; make format)\n",
				       order[i], first[order[i]], n[order[i]] }' | LC_ALL=C sort)
	[ -z "$out" ] && return 0
	echo "$out"
	bad=$(echo "$out" | wc -l)
	echo "format: $bad of $(files | wc -l) files differ from .clang-format"
	return 1
}

# Prints each file with its comments and string and character literals blanked,
# as "file:line:text", so that the names inside them are not read as code.
strip_code() {
	awk '
	FNR == 1 { st = 0 }
	{
		line = $0; out = ""; n = length(line)
		for (i = 1; i <= n; i++) {
			c = substr(line, i, 1); c2 = substr(line, i, 2)
			if (st == 1) {                     # /* comment */
				if (c2 == "*/") { st = 0; i++; out = out " " }
			} else if (st == 2 || st == 3) {   # "string" or '\''c'\''
				if (c == "\\") i++
				else if ((st == 2 && c == "\"") || (st == 3 && c == "'\''")) {
					st = 0; out = out c
				}
			} else if (c2 == "/*") { st = 1; i++
			} else if (c2 == "//") { break
			} else if (c == "\"") { st = 2; out = out c
			} else if (c == "'\''") { st = 3; out = out c
			} else out = out c
		}
		# A literal ends with its line unless the line is continued.
		if ((st == 2 || st == 3) && substr(line, n, 1) != "\\") st = 0
		print FILENAME ":" FNR ":" out
	}' "$@"
}

check_banned() {
	local re out
	re="(^|[^A-Za-z0-9_])($(echo "$BANNED" | tr ' ' '|'))([^A-Za-z0-9_]|$)"
	# shellcheck disable=SC2046
	out=$(strip_code $(files) | awk -F: -v re="$re" '{
			text = $0; sub(/^[^:]*:[^:]*:/, "", text)
			while (match(text, re)) {
				name = substr(text, RSTART, RLENGTH)
				sub(/^[^A-Za-z_]/, "", name); sub(/[^A-Za-z0-9_]$/, "", name)
				printf "%s:%s: %s is banned (STYLE.md 12; see scripts/lint.sh)\n", $1, $2, name
				text = substr(text, RSTART + RLENGTH - 1)
			}
		}')
	[ -z "$out" ] && return 0
	echo "$out"
	return 1
}

check_cppcheck() {
	need cppcheck || return 1
	# shellcheck disable=SC2046
	cppcheck -q -j "$JOBS" --std=c11 -D_GNU_SOURCE -Isrc -Itests/unit --library=posix \
		--enable=warning,style,performance,portability --inline-suppr \
		--suppressions-list=scripts/cppcheck-suppressions.txt --error-exitcode=1 \
		--template='{file}:{line}: {severity}: {message} [{id}]' $(files) 2>&1
}

check_imports() {
	local f dir hdr target rc=0
	while IFS=: read -r f line hdr; do
		hdr=${hdr#*\"}; hdr=${hdr%%\"*}
		dir=${f#src/}; dir=${dir%%/*}
		[ "$f" = src/main.c ] && continue
		case $hdr in
		*/*) target=${hdr%%/*} ;;
		*)
			[ -e "src/$dir/$hdr" ] || continue # a system or library header in quotes
			echo "$f:$line: \"$hdr\": name the folder (\"$dir/$hdr\")"
			rc=1
			continue
			;;
		esac
		[ -d "src/$target" ] || continue
		[ "$target" = "$dir" ] && continue
		case $hdr in
		*-t.h)
			echo "$f:$line: \"$hdr\": a type private to src/$target/ : go through its functions and accessors"
			rc=1
			continue
			;;
		esac
		case " ${IMPORTS[$dir]-} " in *" $target "*) continue ;; esac
		echo "$f:$line: $dir includes \"$hdr\": $dir may include only ${IMPORTS[$dir]:-itself} (DESIGN §8; scripts/lint.sh)"
		rc=1
	done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' src/*/*.[ch] src/*.c)
	return $rc
}

# Prints "file:line:text" for every string literal of the files given (the
# literal's contents, several on one line joined by spaces), skipping
# comments, and the declaration (up to its ";") after a comment that says
# "lint: provider-strings ok".
literals() {
	awk '
	FNR == 1 { st = 0; ok = 0 }
	{
		line = $0; out = ""; n = length(line); lit = ""
		for (i = 1; i <= n; i++) {
			c = substr(line, i, 1); c2 = substr(line, i, 2)
			if (st == 1) {                     # /* comment */
				if (c2 == "*/") { st = 0; i++ }
			} else if (st == 2) {              # "string"
				if (c == "\\") { lit = lit substr(line, i, 2); i++ }
				else if (c == "\"") { st = 0; out = out " " lit; lit = "" }
				else lit = lit c
			} else if (st == 3) {              # '\''c'\''
				if (c == "\\") i++
				else if (c == "'\''") st = 0
			} else if (c2 == "/*") { st = 1; i++
			} else if (c2 == "//") { break
			} else if (c == "\"") { st = 2
			} else if (c == "'\''") { st = 3
			}
		}
		if (st == 2) out = out " " lit
		if ((st == 2 || st == 3) && substr(line, n, 1) != "\\") st = 0
		if (out != "" && !ok)
			print FILENAME ":" FNR ":" out
		if (ok && index(line, ";") > 0)
			ok = 0
		if (line ~ /lint: provider-strings ok/)
			ok = 1
	}' "$@"
}

check_provider-strings() {
	local out re
	re=$(printf '%s|' "${PROVIDER_STRINGS[@]}")
	re=${re%|}
	# shellcheck disable=SC2046
	out=$(literals $(find src -path src/provider -prune -o -type f \( -name '*.c' -o -name '*.h' \) \
		-print | LC_ALL=C sort) | awk -F: -v re="$re" '{
			orig = $0; sub(/^[^:]*:[^:]*:/, "", orig)
			if (match(tolower(orig), re))
				printf "%s:%s: \"%s\" is provider knowledge: keep it in src/provider/ (scripts/lint.sh PROVIDER_STRINGS)\n",
				       $1, $2, substr(orig, RSTART, RLENGTH)
		}')
	[ -z "$out" ] && return 0
	echo "$out"
	return 1
}

check_licence() {
	local out
	out=$(sources | while read -r f; do
		head -n 3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' ||
			echo "${f#./}:1: no SPDX-License-Identifier: Apache-2.0 line in its first three lines (see LICENSE)"
	done)
	[ -z "$out" ] && return 0
	echo "$out"
	return 1
}

checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(format banned cppcheck imports provider-strings licence)
passed=0
failed=0
for c in "${checks[@]}"; do
	case $c in
	format | banned | cppcheck | imports | provider-strings | licence) ;;
	*) echo "lint: unknown check $c (format, banned, cppcheck, imports, provider-strings, licence)" >&2; exit 2 ;;
	esac
	if "check_$c"; then
		echo "lint $c: ok"
		passed=$((passed + 1))
	else
		echo "lint $c: FAILED"
		failed=$((failed + 1))
	fi
done
echo "lint: $passed passed, $failed failed"
[ $failed -eq 0 ]
