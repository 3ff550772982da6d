#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs each unit-test binary given as an argument; prints the sum as its last line.
# UNIT_WRAPPER (e.g. "valgrind -q --error-exitcode=99"): a command each binary runs under,
# but those named in UNIT_NATIVE (base names, space-separated), which run as they are.
passed=0; failed=0; status=0
for t in "$@"; do
	wrapper=$UNIT_WRAPPER
	case " ${UNIT_NATIVE:-} " in *" $(basename "$t") "*) wrapper="" ;; esac
	out=$($wrapper "$t" 2>&1); rc=$?
	printf '%s\n' "$out"
	line=$(printf '%s\n' "$out" | grep -E '^unit [^ ]+: [0-9]+ passed, [0-9]+ failed$' | tail -1)
	if [ -z "$line" ]; then
		echo "unit $(basename "$t"): crashed or printed no summary (exit $rc)"
		failed=$((failed + 1)); status=1; continue
	fi
	p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
	f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
	passed=$((passed + p)); failed=$((failed + f))
	[ "$rc" -ne 0 ] && status=1
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
