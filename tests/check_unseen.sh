#!/bin/sh
# `fusc check` (the kernel simulator) on every program of bench/unseen: programs written as a
# new user would (size symbols, no schedule block) of classes and dtypes the bench/auto and
# bench/users programs do not cover (docs/auto_schedule.md, "Programs not yet fast"). Each
# runs at sizes that no split or vector divides, 0 and 1 (every size symbol that its
# `// check-args:` line does not set takes the size), at most --max-blocks 8 blocks simulated
# at the largest; then each class's boundaries at their own sizes: rows longer than 65536 (the
# long-row segments), many rows per column block, a vector width that does not divide the
# row (the scalar kernel), a huge 1-D total, a broadcast's collapsed vector axis (H * W) over
# several blocks with a tail, and with H * W but not W a multiple of the vector (the scalar
# kernel: the precondition is W's).
# Prints "check_unseen: N passed, N failed" and exits 1 on any failure.
FUSC=${FUSC:-build/fusc}
SIZES=${SIZES:-"0 1 7 63 65 1000"}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
pass=0
fail=0
runs=$(mktemp)
res=$(mktemp -d)
trap 'rm -f "$runs"; rm -rf "$res"' EXIT
. tests/run_queue.sh
for f in bench/unseen/*.fus; do
	args=$(sed -n 's|^// check-args: ||p' "$f" | head -n 1)
	for s in $SIZES; do
		# (no trailing blank: xargs -L would join the next line)
		echo "$f --size $s --max-blocks 8${args:+ $args}" >>"$runs"
	done
done
cat >>"$runs" <<'LIST'
bench/unseen/log_softmax.fus --dims M=3,N=70001 --max-blocks 2
bench/unseen/cross_entropy.fus --dims M=3,N=65540 --max-blocks 2
bench/unseen/var_one_pass.fus --dims M=2,N=70004 --max-blocks 2
bench/unseen/l2_normalize.fus --dims M=2,N=65537 --max-blocks 2
bench/unseen/rmsnorm_f16.fus --dims M=2,N=70001 --max-blocks 2
bench/unseen/add_bias_layernorm_bf16.fus --dims M=2,N=70008 --max-blocks 2
bench/unseen/count_above.fus --dims M=2,N=65541 --max-blocks 2
bench/unseen/batched_matvec.fus --dims B=2,M=3,K=65539 --max-blocks 2
bench/unseen/col_min_f16.fus --dims M=3001,N=72 --max-blocks 4
bench/unseen/col_mean_f16.fus --dims M=5000,N=136 --max-blocks 4
bench/unseen/col_mean_f16.fus --dims M=300,N=1030 --max-blocks 4
bench/unseen/bias_grad_bf16.fus --dims M=2113,N=136 --max-blocks 4
bench/unseen/mean_axis1.fus --dims B=2,T=3000,H=36 --max-blocks 4
bench/unseen/softmax_mid.fus --dims B=2,T=3000,H=36 --max-blocks 4
bench/unseen/gemv_bias.fus --dims K=3000,N=72 --max-blocks 4
bench/unseen/batchnorm_stats.fus --dims N=2,C=5,L=10007
bench/unseen/sum_1d.fus --dims N=1048579 --max-blocks 4
bench/unseen/absmax_bf16.fus --dims N=1048583 --max-blocks 4
bench/unseen/mse_loss.fus --dims M=1000,N=1001 --max-blocks 4
bench/unseen/heads_permute_bf16.fus --dims B=2,T=5,H=3,D=64
bench/unseen/heads_permute_bf16.fus --dims B=2,T=5,H=3,D=63
bench/unseen/heads_permute_d64.fus --dims B=2,T=33,H=3
bench/unseen/attn_bias4.fus --dims B=2,H=3,T=7,S=1025
bench/unseen/bias_nchw.fus --dims N=2,C=3,H=7,W=56
bench/unseen/bias_nchw.fus --dims N=2,C=3,H=33,W=100
bench/unseen/bias_nchw.fus --dims N=2,C=3,H=4,W=7
bench/unseen/bias_nchw.fus --dims N=2,C=3,H=5,W=7
bench/unseen/attn_bias4.fus --dims B=2,H=5,T=9,S=128
bench/unseen/attn_bias4.fus --dims B=2,H=3,T=4,S=12
bench/unseen/image_normalize.fus --dims B=2,H=7,W=9
bench/unseen/rope_pairs.fus --dims T=5,H=3,D=7
bench/unseen/causal_softmax_f16.fus --dims B=1,T=129 --max-blocks 64
bench/unseen/swiglu_halves_f16.fus --dims M=3,N=1029
bench/unseen/layernorm_768.fus --dims M=67
LIST
run_queue
echo "check_unseen: $pass passed, $fail failed"
[ "$fail" = 0 ]
