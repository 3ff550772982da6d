#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs each libFuzzer harness given: `run-fuzz.sh SECONDS BIN…` for a timed run,
# `run-fuzz.sh smoke BIN…` for a short deterministic pass (fixed seed and run
# count) over the seed corpus in tests/fuzz/corpus/NAME. A crash, leak or
# sanitizer report fails the harness. Last line: "fuzz: N passed, N failed".
mode=$1; shift
passed=0; failed=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for bin in "$@"; do
	name=$(basename "$bin"); name=${name#fuzz_}
	seeds="tests/fuzz/corpus/$name"
	mkdir -p "$scratch/$name"
	if [ "$mode" = smoke ]; then
		args=(-seed=1 -runs=20000 -max_len=4096)
	else
		args=(-max_total_time="$mode" -max_len=16384)
	fi
	if "$bin" "${args[@]}" -artifact_prefix="$scratch/" "$scratch/$name" "$seeds" >"$scratch/$name.log" 2>&1; then
		echo "fuzz $name: ok ($(grep -Eo 'Done [0-9]+ runs' "$scratch/$name.log" | tail -1))"
		passed=$((passed + 1))
	else
		echo "fuzz $name: FAILED"; tail -40 "$scratch/$name.log"
		ls "$scratch"/crash-* "$scratch"/leak-* 2>/dev/null
		failed=$((failed + 1))
	fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
