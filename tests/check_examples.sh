#!/bin/sh
# Runs `fusc check` (the kernel simulator, docs/check.md) on every examples/*.fus, examples/cp_async/*.fus,
# examples/reduce/*.fus, examples/gemm/*.fus, tests/golden/ok/*.fus, tests/golden/sim/*.fus and the
# benchmarked programs (bench/auto, bench/users, bench/pointwise, bench/reduce) at
# several sizes: empty (0: every output still written, e.g. a total is the identity), smaller
# than one block (1, 5), not a multiple of any block or vector (67, 1025) and a few blocks (300).
# Every size symbol takes the size (rounded up to a multiple a launcher precondition requires);
# a file whose every size its check-args set (or that has none) runs at the first size only.
# A file may add options with a line `// check-args: --max-blocks 4` (large constant shapes:
# simulate a sample of the blocks), or name its own sizes with `// check-sizes: 1 5 67` (a
# program that reads a constant index of a size symbol's dimension has no size 0). The 1-D buffering family
# (examples/cp_async/buf_*) also runs at nvFuser's sizes 100, 199, 200, 1000 and 1001.
# The plain `fusc check` runs go to a list and run JOBS at a time (default: the number of
# processors); their failures are printed in list order.
# Prints "N passed, N failed" and exits 1 on any failure (a report, a mismatch, an error).
FUSC=${FUSC:-build/fusc}
SIZES=${SIZES:-"0 1 5 67 300 1025"}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
pass=0
fail=0
out=$(mktemp)
runs=$(mktemp)
res=$(mktemp -d)
trap 'rm -f "$out" "$runs"; rm -rf "$res"' EXIT
. tests/run_queue.sh
# queue ARGS...: one `fusc check ARGS` (no argument holds a space)
queue() { printf '%s\n' "$*" >>"$runs"; }
# sized FILE ARGS: --size can change a run of FILE with ARGS: a launcher of FILE takes a size
# (an int64_t argument of its header) that the --dims of ARGS does not set, or the header
# could not be made. Otherwise every size gives the same run, and one is enough.
sized() {
	hdr=$("$FUSC" "$1" --emit=header -o - 2>/dev/null) || return 0
	dims=,$(printf '%s\n' "$2" | sed -n 's/.*--dims[= ]\([^ ]*\).*/\1/p'),
	for y in $(printf '%s\n' "$hdr" | grep -o 'int64_t [A-Za-z_][A-Za-z0-9_]*' | cut -d' ' -f2 | sort -u); do
		case $dims in *",$y="*) ;; *) return 0 ;; esac
	done
	return 1
}

for f in examples/*.fus examples/cp_async/*.fus examples/reduce/*.fus examples/gemm/*.fus \
	 tests/golden/ok/*.fus tests/golden/sim/*.fus bench/auto/*.fus bench/pointwise/*.fus \
	 bench/reduce/*.fus bench/users/*.fus; do
	[ -f "$f" ] || continue
	args=$(sed -n 's|^// check-args: ||p' "$f" | head -n 1)
	sizes=$(sed -n 's|^// check-sizes: ||p' "$f" | head -n 1)
	sizes=${sizes:-$SIZES}
	# nvFuser's 1-D buffering family ran at n = 1000, 199, 200, 100, 1001: so do their translations.
	case $f in examples/cp_async/buf_*) sizes="$sizes 100 199 200 1000 1001" ;; esac
	sized "$f" "$args" || sizes=${sizes%% *}
	for s in $sizes; do
		# shellcheck disable=SC2086
		queue "$f" --size "$s" $args
	done
done
# An auto-scheduled fusion whose size breaks a vector precondition runs its scalar fallback.
# Grid reductions: many blocks along the reduced type, and a sample of whole segments.
# Collapsed axes (docs/auto_schedule.md): a merged column whose inner extent the vector
# divides and one it does not (the scalar kernel), many rows per thread, an empty batch.
# Welford's layernorm and the online softmax: rows shorter than a warp, not a multiple of the
# 128 threads.
# Transposes (shared-memory tiles): sizes the vector writes refuse (the fallback), 0 and 1.
# A total beside row outputs (row partials): both sides of its N <= 65536 plan, a row of 1025.
# The outer, middle-axis and whole-tensor schedules (scheduler/auto_outer.c) at empty extents
# (the identity, written by every block), one row, and several row steps per thread; 16-bit
# columns (8 a thread) at a count 8 divides and one it does not (the scalar kernel).
# Matrix products (scheduler/auto_matmul.c): the vector kernel (K and N multiples of 8; with a
# transposed operand, its contiguous dimension instead: auto_hgemm_nt K, auto_hgemm_tn M and N),
# both sides of the M <= 32 and M <= 64 variants, and empty extents; the files' own check-args
# run the padded plan. Block order (raster, every block run): groups of rows shorter at the end
# (9 row tiles in groups of 8; 7 in groups of 3), one tile column or row, an empty grid.
for args in "examples/gelu_auto.fus --dims N=1002" "tests/golden/ok/rowmax_bf16.fus --dims M=3,N=1002" \
	    "examples/reduce/col_sum_grid.fus --dims M=5000,N=40" \
	    "bench/users/sum_last2.fus --dims B=3,M=7,N=36" \
	    "bench/users/mixed_out.fus --dims M=2,N=65536" "bench/users/mixed_out.fus --dims M=1,N=65537" \
	    "tests/golden/sim/auto_row_partials.fus --dims M=3,N=1025,B=2" \
	    "bench/users/sum_last2.fus --dims B=2,M=4,N=7" \
	    "bench/users/layernorm_hw.fus --dims B=2,C=3,H=33,W=36" \
	    "bench/users/col_sum_lead2.fus --dims B=2,T=1000,H=36" \
	    "bench/users/col_sum_lead2.fus --dims B=0,T=3,H=36" \
	    "examples/reduce/row_sum_grid.fus --dims M=5,N=40000 --max-blocks 8" \
	    "examples/reduce/layernorm_welford.fus --dims M=3,N=20" \
	    "examples/reduce/layernorm_welford.fus --dims M=7,N=1000" \
	    "examples/reduce/layernorm_welford.fus --dims M=2,N=4100 --seed 7" \
	    "examples/reduce/softmax_online.fus --dims M=3,N=20" \
	    "examples/reduce/softmax_online.fus --dims M=2,N=4100 --seed 7" \
	    "tests/golden/sim/auto_transpose.fus --dims A=67,E=45,B=3,C=5" \
	    "tests/golden/sim/auto_transpose.fus --dims A=1,E=1,B=1,C=1" \
	    "tests/golden/sim/auto_transpose.fus --dims A=0,E=3,B=2,C=1" \
	    "tests/golden/sim/auto_transpose.fus --dims A=5,E=0,B=0,C=3" \
	    "bench/auto/permute3.fus --dims A=3,B=33,C=70" \
	    "tests/golden/sim/auto_col_sum.fus --dims M=0,N=5" \
	    "tests/golden/sim/auto_col_sum.fus --dims M=3,N=0" \
	    "tests/golden/sim/auto_col_sum.fus --dims M=1,N=33" \
	    "tests/golden/sim/auto_col_sum.fus --dims M=5003,N=37" \
	    "bench/users/col_sum_f16.fus --dims M=3001,N=1032" \
	    "bench/users/col_sum_f16.fus --dims M=300,N=1030" \
	    "bench/users/col_mean_bf16.fus --dims M=2113,N=136" \
	    "tests/golden/sim/auto_middle_sum.fus --dims B=2,T=0,H=5" \
	    "tests/golden/sim/auto_middle_sum.fus --dims B=2,T=3,H=0" \
	    "tests/golden/sim/auto_middle_sum.fus --dims B=0,T=3,H=5" \
	    "tests/golden/sim/auto_middle_sum.fus --dims B=3,T=1000,H=33" \
	    "tests/golden/sim/auto_total_f16.fus --dims N=0" \
	    "tests/golden/sim/auto_total_f16.fus --dims N=3" \
	    "bench/auto/total_2d_f16.fus --dims M=0,N=5" \
	    "bench/auto/total_2d_f16.fus --dims M=3,N=0" \
	    "bench/auto/total_2d_f16.fus --dims M=37,N=1001" \
	    "examples/gemm/auto_hgemm.fus --dims M=300,N=264,K=72 --max-blocks 4" \
	    "examples/gemm/auto_hgemm.fus --dims M=32,N=40,K=32" \
	    "examples/gemm/auto_hgemm.fus --dims M=33,N=40,K=45" \
	    "examples/gemm/auto_hgemm.fus --dims M=64,N=40,K=32" \
	    "examples/gemm/auto_hgemm.fus --dims M=65,N=40,K=40" \
	    "examples/gemm/auto_hgemm.fus --dims M=0,N=8,K=8" \
	    "examples/gemm/auto_hgemm.fus --dims M=3,N=8,K=0" \
	    "examples/gemm/auto_hgemm_nt.fus --dims M=300,N=264,K=72 --max-blocks 4" \
	    "examples/gemm/auto_hgemm_nt.fus --dims M=32,N=40,K=32" \
	    "examples/gemm/auto_hgemm_nt.fus --dims M=33,N=41,K=45" \
	    "examples/gemm/auto_hgemm_nt.fus --dims M=64,N=40,K=32" \
	    "examples/gemm/auto_hgemm_nt.fus --dims M=65,N=42,K=40" \
	    "examples/gemm/auto_hgemm_nt.fus --dims M=0,N=8,K=8" \
	    "examples/gemm/auto_hgemm_tn.fus --dims M=296,N=264,K=72 --max-blocks 4" \
	    "examples/gemm/auto_hgemm_tn.fus --dims M=32,N=40,K=33" \
	    "examples/gemm/auto_hgemm_tn.fus --dims M=33,N=40,K=40" \
	    "examples/gemm/auto_hgemm_tn.fus --dims M=64,N=40,K=45" \
	    "examples/gemm/auto_hgemm_tn.fus --dims M=72,N=48,K=40" \
	    "examples/gemm/auto_hgemm_tn.fus --dims M=3,N=8,K=0" \
	    "examples/gemm/auto_bgemm.fus --dims Z=2,M=130,N=136,K=40 --max-blocks 4" \
	    "examples/gemm/auto_bgemm.fus --dims Z=0,M=3,N=3,K=3" \
	    "examples/gemm/auto_hgemm_bias_gelu.fus --dims M=300,N=264,K=72 --max-blocks 4" \
	    "examples/gemm/auto_hgemm_bias_gelu.fus --dims M=1,N=1,K=1" \
	    "examples/gemm/auto_sgemm.fus --dims M=300,N=260,K=72 --max-blocks 4" \
	    "examples/gemm/auto_sgemm.fus --dims M=5,N=0,K=7" \
	    "examples/gemm/hgemm_ldmatrix.fus --dims M=1,N=8,K=8" \
	    "examples/gemm/hgemm_ldmatrix.fus --dims M=70,N=40,K=56" \
	    "examples/gemm/hgemm_ldmatrix.fus --dims M=129,N=136,K=40 --max-blocks 4" \
	    "examples/gemm/hgemm_ldmatrix.fus --dims M=0,N=8,K=8" \
	    "examples/gemm/hgemm_ldmatrix.fus --dims M=5,N=16,K=0" \
	    "examples/gemm/hgemm_swizzle.fus --dims M=1,N=8,K=8" \
	    "examples/gemm/hgemm_swizzle.fus --dims M=70,N=40,K=56" \
	    "examples/gemm/hgemm_swizzle.fus --dims M=257,N=136,K=72 --max-blocks 4" \
	    "examples/gemm/hgemm_swizzle.fus --dims M=3,N=8,K=0" \
	    "examples/gemm/hgemm_bf16.fus --dims M=67,N=24,K=40" \
	    "examples/gemm/hgemm_mma.fus --dims M=70,N=40,K=56" \
	    "examples/gemm/hgemm_raster.fus --dims M=2100,N=136,K=24" \
	    "examples/gemm/hgemm_raster.fus --dims M=300,N=264,K=72" \
	    "examples/gemm/hgemm_raster.fus --dims M=513,N=8,K=16" \
	    "examples/gemm/hgemm_raster.fus --dims M=70,N=40,K=48" \
	    "tests/golden/sim/raster_tiles.fus --dims M=27,N=19" \
	    "tests/golden/sim/raster_tiles.fus --dims M=27,N=3" \
	    "tests/golden/sim/raster_tiles.fus --dims M=3,N=27" \
	    "tests/golden/sim/raster_tiles.fus --dims M=13,N=0"; do
	queue $args
done
# Size variants (docs/auto_schedule.md, "Size variants"): every row-length bucket's kernel and
# its scalar kernel, on both sides of each boundary (0, 1, a size no vector divides, the bound,
# the bound + 1 and + 4), runs in the simulator; softmax also checks which kernel runs. Rows
# longer than 65536 run as segments (docs/auto_schedule.md, "Segmentation"), each row split
# over blocks.
for dims in M=3,N=0 M=3,N=1 M=3,N=127 M=3,N=128 M=3,N=129 M=3,N=132 M=3,N=255 M=3,N=256 \
	    M=3,N=257 M=3,N=260 M=3,N=1023 M=3,N=1024 M=3,N=1025 M=3,N=1028 M=3,N=4095 \
	    M=3,N=4096 M=3,N=4097 M=3,N=4100 M=3,N=16384 M=3,N=16385 M=3,N=16388 M=3,N=65536 \
	    M=3,N=65537 M=3,N=65540 M=0,N=65536 M=1,N=16388 M=33,N=16385; do
	for f in bench/auto/softmax_f32.fus bench/auto/layernorm_f32.fus bench/auto/rmsnorm_f32.fus \
		 bench/auto/logsumexp_f32.fus bench/auto/row_sum_f32.fus bench/auto/softmax_f16.fus \
		 bench/auto/layernorm_bf16.fus bench/auto/logsumexp_f16.fus bench/auto/row_sum_bf16.fus; do
		queue "$f" --dims "$dims" --max-blocks 2
	done
done
# Several outputs of one row group (docs/auto_schedule.md, "Several outputs of one row
# group"): one nest, each reduction computed once per row and read by every output (Welford's
# pair in layernorm_stats' N <= 65536 variant, the online pair in softmax_stats'), on both
# sides of every bucket's bound, at 0, 1 and sizes no vector divides.
for n in 0 1 7 63 65 128 129 256 257 1000 1024 1025 4096 4097 16384 16385 65536 65537; do
	for f in bench/users/layernorm_stats.fus bench/users/mean_var.fus \
		 bench/users/softmax_stats.fus bench/users/add_rmsnorm_f16.fus; do
		queue "$f" --dims "M=3,N=$n" --max-blocks 2
	done
done
# The queued runs, JOBS at a time (tests/run_queue.sh).
run_queue
# runs_kernel KERNEL ARGS...: `fusc check ARGS` passes and says it ran KERNEL (empty: any)
runs_kernel() {
	rk=$1
	shift
	if "$FUSC" check "$@" >"$out" 2>&1 && { [ -z "$rk" ] || grep -q "; $rk[;,]" "$out"; }; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL: $FUSC check $* (expected: ${rk:-a pass})"
		sed 's/^/  | /' "$out" | head -10
	fi
}
for want in 3:0:N128 3:1:N128_scalar 3:128:N128 3:129:N256_scalar 3:132:N256 3:256:N256 \
	    3:257:N1024_scalar 3:260:N1024 3:1024:N1024 3:1028:N4096 3:4096:N4096 \
	    3:4097:N16384_scalar 3:4100:N16384 3:16384:N16384 3:16385:N65536_scalar \
	    3:16388:N65536 1:65536:N65536 3:65537:segments 3:65540:segments; do
	# at these sizes the 32-bit index variant of each (passes/index32.c): _i32, _i32_scalar
	v=${want##*:} v=${v%_scalar}_i32${v#"${v%_scalar}"}
	m=${want%%:*} n=${want#*:} n=${n%%:*} k="kernel softmax_f32_kernel_$v"
	[ "${want##*:}" = segments ] && k="kernels softmax_f32_seg0_kernel_i32$([ "$n" = 65537 ] && echo _scalar)"
	runs_kernel "$k" bench/auto/softmax_f32.fus --dims "M=$m,N=$n" --max-blocks 1
done
# Collapsed columns (docs/auto_schedule.md, "Collapsed axes"): the size variants bound the
# product M * N (the row length), and longer rows are split over blocks (a row sum) or run
# as segments (normalizations). Each program at products on both sides of every bound (0, 1,
# sizes no vector divides, the bound, the bound + 1 and + 4, long rows of 65540 and 90000);
# sum_last2 also checks which kernel runs (A:B:KERNEL, M * N = A * B).
for want in 0:9:M_N128_scalar 1:1:M_N128_scalar 1:127:M_N128_scalar 4:32:M_N128 3:43:M_N256_scalar \
	    33:4:M_N256 8:32:M_N256 1:257:M_N1024_scalar 257:4:M_N4096 32:32:M_N1024 \
	    5:205:M_N4096_scalar 64:64:M_N4096 1:4097:M_N16384_scalar 41:100:M_N16384 \
	    128:128:M_N16384 4097:4:M_N65536 256:256:M_N65536 1:65537:long_scalar \
	    16385:4:long 300:300:long 7:9363:long_scalar; do
	a=${want%%:*} b=${want#*:} b=${b%%:*} v=${want##*:}
	case $v in
	long) k="kernel sum_last2_kernel_i32" ;;
	long_scalar) k="kernel sum_last2_kernel_i32_scalar" ;;
	*) k="kernel sum_last2_kernel_${v%_scalar}_i32${v#"${v%_scalar}"}" ;;
	esac
	for c in "bench/users/sum_last2.fus --dims B=3,M=$a,N=$b" \
		 "bench/users/layernorm_hw.fus --dims B=2,C=2,H=$a,W=$b" \
		 "tests/golden/sim/auto_collapse.fus --fusion smx --dims B=3,H=$a,W=$b" \
		 "tests/golden/sim/auto_collapse.fus --fusion lse --dims B=3,H=$a,W=$b" \
		 "tests/golden/sim/auto_collapse.fus --fusion hsum --dims B=3,H=$a,W=$b" \
		 "tests/golden/sim/auto_collapse.fus --fusion gn --dims B=2,G=2,C=$a,H=$b"; do
		kc=$k
		[ "${c#*sum_last2}" = "$c" ] && kc=
		# shellcheck disable=SC2086
		runs_kernel "$kc" $c --max-blocks 2
	done
done
# The budget (docs/check.md, issue 11 item 8): work above it is refused at once with exit 2 and
# a message naming it, never run for hours. A split by 2^40 of a symbolic size is a loop of 2^40
# iterations; a huge --size is too many elements; a large matmul too many reference terms.
# `timeout` turns a regression (spinning) into a failure.
budget() {
	want=$1; shift
	timeout 60 "$FUSC" check "$@" >"$out" 2>&1
	rc=$?
	if [ $rc = 2 ] && grep -q "$want" "$out" && grep -q 'the budget is --max-elements' "$out"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL: $FUSC check $* (exit $rc, expected 2 and '$want')"
		sed 's/^/  | /' "$out" | head -10
	fi
}
bdir=$(mktemp -d)
trap 'rm -f "$out" "$runs"; rm -rf "$res" "$bdir"' EXIT
printf 'fusion pw(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0; }\nschedule pw { y.split(i, 1099511627776) -> (io, ii); y.bind(io, blockIdx.x); }\n' >"$bdir/split.fus"
# (an empty schedule block: the automatic matmul schedule's caches would be terms too)
printf 'fusion mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) { C[i, j] = sum(k: A[i, k] * B[k, j]); }\nschedule mm { }\n' >"$bdir/mm.fus"
budget 'over the budget (simulator): loop .* of 1099511627776 iterations' "$bdir/split.fus" --size 5
budget 'over the budget (reference): its tensors hold 300000000000 elements' examples/saxpy.fus --size 100000000000
budget 'over the budget (reference): its tensors hold' "$bdir/mm.fus" --size 100000
budget 'over the budget (reference): it evaluates 1002000000 terms' "$bdir/mm.fus" --size 1000
echo "check_examples: $pass passed, $fail failed"
[ "$fail" = 0 ]
