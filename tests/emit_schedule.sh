#!/bin/sh
# `fusc --emit=schedule` round trip (docs/cli.md): for every example, bench/auto, bench/users and
# bench/unseen program with no schedule block, the printed schedule (its comment naming the class of the tuned
# schedule) pasted under the program compiles to the same
# kernels as the automatic schedule (the scalar fallback and the size variants, which only an
# automatic schedule gets, aside). A program whose schedule names copies the scheduler made must say so,
# and so must one that the automatic scheduler split into segments (several kernels: a schedule
# block schedules one; docs/auto_schedule.md, "Segmentation"), whose segments it prints as
# commented fusions with their schedules: uncommented, in a file of their own, they compile to
# the segments' kernels.
set -u
FUSC=${FUSC:-build/fusc}
T=${TMPDIR:-/tmp}/fusc-emit-schedule.$$
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
pass=0 fail=0 copies=0 segmented=0
# the fusions' own kernels of a .cu (NAME_kernel), less the scalar fallbacks and size
# variants (NAME_kernel_scalar, NAME_kernel_N4096), which only automatic schedules get
kernels() {
	awk '/^extern "C" __global__/ { on = ($0 ~ /_kernel\(/) } on { print } /^}/ { on = 0 }' "$1"
}
# each kernel of the input on one line (its lines joined by \001), sorted
one_per_line() {
	awk '/^extern "C" __global__/ && k != "" { print k; k = "" } { k = k $0 "\001" } END { if (k != "") print k }' |
		LC_ALL=C sort
}
# the segments' fusions and schedules of a segmented fusion's comment, uncommented
segments() {
	awk '/: the automatic scheduler split it into [0-9]* segments/ { on = 1; next }
	     on && /^\/\/   / { sub(/^\/\/   /, ""); print; seen = 1; next }
	     on && seen { on = 0; seen = 0 }' "$1"
}
# compiles F SRC OUT WHAT: `fusc SRC --emit=cuda -o OUT`, or a failure of F
compiles() {
	"$FUSC" "$2" --emit=cuda -o "$3" 2> "$T/err" && return 0
	echo "FAIL $1: compiling $4 failed:"; head -5 "$T/err"; return 1
}
# same_kernels F WHAT: $T/a.k and $T/p.k hold the same kernels (none: a failure of F)
same_kernels() {
	[ -s "$T/a.k" ] && cmp -s "$T/a.k" "$T/p.k" && return 0
	echo "FAIL $1: other kernels from $2:"; diff "$T/a.k" "$T/p.k" | head -10; return 1
}
for f in examples/*.fus examples/*/*.fus bench/auto/*.fus bench/users/*.fus bench/unseen/*.fus \
	 tests/golden/ok/*.fus tests/golden/sim/*.fus; do
	grep -q '^schedule' "$f" && continue
	"$FUSC" "$f" --emit=cuda -o "$T/auto.cu" 2>/dev/null || continue # an error example
	b=$(basename "$f" .fus)
	if ! "$FUSC" "$f" --emit=schedule -o "$T/$b.sched"; then
		echo "FAIL $f: --emit=schedule failed"; fail=$((fail + 1)); continue
	fi
	# every segment and size variant says where its schedule came from (tools/fusc.c, put_origin)
	o='(class: (segments: )?[a-z]+([,;] [a-z]+)*|the automatic scheduler.s [a-z]+ schedule: the tuned one did not compile)'
	nseg=$(grep -c '^//   fusion [A-Za-z0-9_]*_seg[0-9]*(' "$T/$b.sched")
	if [ "$(grep -Ec "^//   // [A-Za-z0-9_]*_seg[0-9]+ \\($o\\)\$" "$T/$b.sched")" != "$nseg" ] ||
	   grep '^// size variant for' "$T/$b.sched" | grep -Evq " \\($o; run instead"; then
		echo "FAIL $f: a segment or size variant without its class:"
		grep -E '^//   // |^// size variant' "$T/$b.sched" | head -3
		fail=$((fail + 1)); continue
	fi
	if grep -q '^// .*: the automatic scheduler split it into [0-9]* segments' "$T/$b.sched" &&
	   grep -q '^//   schedule .*_seg0 {' "$T/$b.sched" && ! grep -q '^schedule ' "$T/$b.sched"; then
		# each segment, uncommented as a fusion of its own, compiles to its segment's kernel
		segments "$T/$b.sched" > "$T/$b.segs.fus"
		if ! compiles "$f" "$T/$b.segs.fus" "$T/segs.cu" "the printed segments"; then fail=$((fail + 1)); continue; fi
		# (a bounded plan's segments too, NAME_segK_N65536: the .cu has them in the chain's
		# order, the printed text after the fusion's own; each kernel one line, sorted)
		kernels "$T/auto.cu" | awk '/^extern "C" __global__/ { on = ($0 ~ /_seg[0-9]+(_[A-Za-z]+[0-9]+)?_kernel\(/) } on' |
			one_per_line > "$T/a.k"
		kernels "$T/segs.cu" | one_per_line > "$T/p.k"
		if ! same_kernels "$f" "the printed segments"; then fail=$((fail + 1)); continue; fi
		segmented=$((segmented + 1)); continue
	fi
	if ! grep -q '^schedule ' "$T/$b.sched"; then
		echo "FAIL $f: no schedule block printed"; fail=$((fail + 1)); continue
	fi
	# the tuned schedule names its class (scheduler/classify.c)
	if grep "the automatic scheduler's schedule" "$T/$b.sched" |
		grep -Evq '\(class: (segments: )?(matmul|pointwise|broadcast|transpose|rows|outer|middle|whole|general)([,;] (matmul|pointwise|broadcast|transpose|rows|outer|middle|whole|general))*\)$'; then
		echo "FAIL $f: a tuned schedule without its class:"; grep "^// " "$T/$b.sched" | head -3
		fail=$((fail + 1)); continue
	fi
	if grep -q '^//   .*, a copy of ' "$T/$b.sched"; then
		copies=$((copies + 1)); continue
	fi
	cat "$f" "$T/$b.sched" > "$T/$b.fus"
	if ! compiles "$f" "$T/$b.fus" "$T/pasted.cu" "the printed schedule"; then fail=$((fail + 1)); continue; fi
	kernels "$T/auto.cu" > "$T/a.k"
	# a padded plan (its kernels NAME_segK_kernel) comes with the automatic schedule only, which
	# says so in its comment; the pasted block must give the other kernels
	if grep -q "^// .*copies the operands into rows" "$T/$b.sched"; then
		awk '/^extern "C" __global__/ { on = ($0 !~ /_seg[0-9]+_kernel\(/) } on' "$T/a.k" > "$T/a2.k"
		mv "$T/a2.k" "$T/a.k"
	fi
	kernels "$T/pasted.cu" > "$T/p.k"
	if ! same_kernels "$f" "the pasted schedule"; then fail=$((fail + 1)); continue; fi
	pass=$((pass + 1))
done
# A schedule block prints as the block the file has: the raster example and a raster trial
# (`C.raster(bi, bj, G)`, docs/schedule.md), printed and pasted in place of the file's own
# block, compile to the same kernels.
for f in examples/gemm/hgemm_raster.fus bench/hg3/rtry_nt_g8.fus; do
	b=$(basename "$f" .fus)
	if ! "$FUSC" "$f" --emit=cuda -o "$T/own.cu" || ! "$FUSC" "$f" --emit=schedule -o "$T/$b.sched" ||
	   ! grep -q '^  C\.raster(bi, bj, [0-9]*);$' "$T/$b.sched"; then
		echo "FAIL $f: no schedule with its raster printed"; fail=$((fail + 1)); continue
	fi
	{ sed '/^schedule /,$d' "$f"; cat "$T/$b.sched"; } > "$T/$b.fus"
	if ! compiles "$f" "$T/$b.fus" "$T/pasted.cu" "the printed schedule"; then fail=$((fail + 1)); continue; fi
	kernels "$T/own.cu" > "$T/a.k"
	kernels "$T/pasted.cu" > "$T/p.k"
	if ! same_kernels "$f" "the pasted schedule"; then fail=$((fail + 1)); continue; fi
	pass=$((pass + 1))
done
echo "emit_schedule: $pass round trips passed, $fail failed, $copies with scheduler copies (not pasteable), $segmented segmented (their segments round trip as fusions of their own)"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
