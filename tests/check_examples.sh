#!/bin/sh
# Runs `fusc check` (the kernel simulator, docs/check.md) on every examples/*.fus, examples/cp_async/*.fus,
# examples/reduce/*.fus, examples/gemm/*.fus, tests/golden/ok/*.fus and tests/golden/sim/*.fus at
# several sizes: smaller than one block (1, 5), not a multiple of any block or vector (67, 1025)
# and a few blocks (300). Every size symbol takes the size (rounded up to a multiple a launcher
# precondition requires). A file may add options with a line `// check-args: --max-blocks 4`
# (large constant shapes: simulate a sample of the blocks). The 1-D buffering family
# (examples/cp_async/buf_*) also runs at nvFuser's sizes 100, 199, 200, 1000 and 1001.
# Prints "N passed, N failed" and exits 1 on any failure (a report, a mismatch, an error).
FUSC=${FUSC:-build/fusc}
SIZES=${SIZES:-"1 5 67 300 1025"}
pass=0
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for f in examples/*.fus examples/cp_async/*.fus examples/reduce/*.fus examples/gemm/*.fus \
	 tests/golden/ok/*.fus tests/golden/sim/*.fus; do
	[ -f "$f" ] || continue
	args=$(sed -n 's|^// check-args: ||p' "$f" | head -n 1)
	sizes=$SIZES
	# nvFuser's 1-D buffering family ran at n = 1000, 199, 200, 100, 1001: so do their translations.
	case $f in examples/cp_async/buf_*) sizes="$sizes 100 199 200 1000 1001" ;; esac
	for s in $sizes; do
		# shellcheck disable=SC2086
		if "$FUSC" check "$f" --size "$s" $args >"$out" 2>&1; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
			echo "FAIL: $FUSC check $f --size $s $args"
			sed 's/^/  | /' "$out" | head -40
		fi
	done
done
# An auto-scheduled fusion whose size breaks a vector precondition runs its scalar fallback.
# Grid reductions: many blocks along the reduced type, and a sample of whole segments.
# Welford's layernorm: rows shorter than a warp, not a multiple of the 128 threads.
for args in "examples/gelu_auto.fus --dims N=1002" "tests/golden/ok/rowmax_bf16.fus --dims M=3,N=1002" \
	    "examples/reduce/col_sum_grid.fus --dims M=5000,N=40" \
	    "examples/reduce/row_sum_grid.fus --dims M=5,N=40000 --max-blocks 8" \
	    "examples/reduce/layernorm_welford.fus --dims M=3,N=20" \
	    "examples/reduce/layernorm_welford.fus --dims M=7,N=1000" \
	    "examples/reduce/layernorm_welford.fus --dims M=2,N=4100 --seed 7"; do
	# shellcheck disable=SC2086
	if "$FUSC" check $args >"$out" 2>&1; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL: $FUSC check $args"
		sed 's/^/  | /' "$out" | head -40
	fi
done
echo "check_examples: $pass passed, $fail failed"
[ "$fail" = 0 ]
