#!/bin/sh
# Runs `fusc check` (the kernel simulator, docs/check.md) on every examples/*.fus, examples/cp_async/*.fus,
# tests/golden/ok/*.fus and tests/golden/sim/*.fus at several sizes: smaller than one block
# (1, 5), not a multiple of any block or vector (67, 1025) and a few blocks (300). Every size
# symbol takes the size (rounded up to a multiple a launcher precondition requires).
# Prints "N passed, N failed" and exits 1 on any failure (a report, a mismatch, an error).
FUSC=${FUSC:-build/fusc}
SIZES=${SIZES:-"1 5 67 300 1025"}
pass=0
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for f in examples/*.fus examples/cp_async/*.fus tests/golden/ok/*.fus tests/golden/sim/*.fus; do
	[ -f "$f" ] || continue
	for s in $SIZES; do
		if "$FUSC" check "$f" --size "$s" >"$out" 2>&1; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
			echo "FAIL: $FUSC check $f --size $s"
			sed 's/^/  | /' "$out" | head -40
		fi
	done
done
echo "check_examples: $pass passed, $fail failed"
[ "$fail" = 0 ]
