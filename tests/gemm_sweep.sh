#!/bin/sh
# Matrix products at many small sizes, and compute-sanitizer over every GEMM example (issue 14).
# Two parts (PARTS):
#   sweep      every fusion of FILES (default examples/gemm/auto_*.fus: symbolic sizes, any
#              size runs) at every size in VALUES of each size symbol once, the others held at
#              a base that no tile or vector divides; then each symbol over VALUES again at a
#              second base whose M, K and N break the 16-byte copies (tensor cores: the padded
#              plan, which copies the operands' rows padded to 8 elements, whatever their
#              order: K of both in auto_hgemm_nt.fus, M of A and N of B in auto_hgemm_tn.fus,
#              so the sweep of each symbol crosses the rounding of the copies' rows; FMA: the
#              scalar kernel). Base 1 is M=67,N=136,K=72,Z=2 (the vector kernel for
#              A[i, k] B[k, j]: K and N multiples of 8, no tile of 32/64/128 rows or columns,
#              no k step of 32 divides them; M=67 sends A^T B to the padded plan), base 2
#              M=67,N=133,K=75,Z=3. Every run compares with the reference interpreter (double
#              precision for the sums; tolerances scaled by sqrt(K) and the dtype's, tools/cli.c).
#              MODE=run: `fusc run` on the GPU (make check-gpu; VALUES 1..70 by default);
#              MODE=check: `fusc check`, the CPU simulator (make check-sim; VALUES the sizes
#              around the tile edges).
#   sanitizer  (MODE=run only) compute-sanitizer memcheck, racecheck and synccheck over
#              `fusc run` of every fusion of SAN_FILES (default examples/gemm/*.fus) at four
#              sizes: the scalar kernel and the M <= 32 variant (5 x 9 x 7), the M <= 64
#              variant with the vector kernel (40 x 72 x 136), partial 128-tiles (130 x 72 x 136),
#              the scalar kernel past the variants (67 x 75 x 133); sizes a launcher requires to
#              be multiples are rounded up (tests/gpu_lib.sh).
# Commands run JOBS at a time (each `fusc run` is one process; the binary cache is filled
# first by one run per file). Prints each failure as it happens and a line per 200 runs (so a
# run cut off by a timeout still says how far it got), then "gemm_sweep: N passed, N failed";
# exits 1 on a failure and 77 when MODE=run finds no CUDA device.
FUSC=${FUSC:-build/fusc}
MODE=${MODE:-run}
JOBS=${JOBS:-8}
FILES=${FILES:-examples/gemm/auto_*.fus}
SAN_FILES=${SAN_FILES:-examples/gemm/*.fus}
CUDA=${CUDA:-/usr/local/cuda}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo "$CUDA/bin/compute-sanitizer")}
case $MODE in
run) VALUES=${VALUES:-$(seq 1 70)}; PARTS=${PARTS:-"sweep sanitizer"} ;;
check) VALUES=${VALUES:-"1 2 7 8 9 15 16 17 31 32 33 63 64 65 70"}; PARTS=${PARTS:-sweep} ;;
*) echo "gemm_sweep: MODE is run or check, not '$MODE'"; exit 2 ;;
esac
BASE1=M=67,N=136,K=72,Z=2
BASE2=M=67,N=133,K=75,Z=3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export FUSRT_CACHE_DIR="$tmp/cache" FUSC
. tests/gpu_lib.sh

[ "$MODE" = run ] && require_device gemm_sweep "$tmp"

# with SET SYM VALUE: SET (SYM=V,...) with SYM's value replaced
with() {
	echo "$1" | sed -E "s/(^|,)$2=[0-9]+/\\1$2=$3/"
}

# args SYMS REQ SET: the --dims of SET (SYM=V,...) for the symbols SYMS, in their order,
# rounded up to the multiples REQ (tests/gpu_lib.sh)
args() {
	vals=$(for s in $1; do echo "$3" | tr ',' '\n' | sed -n "s/^$s=//p"; done | paste -sd, -)
	dims "$1" "$2" "$vals"
}

# The command list: one line per run, "FILE FUSION --dims ..." (sanitizer lines start with the tool).
: >"$tmp/sweep"
: >"$tmp/san"
for part in $PARTS; do
	case $part in
	sweep)
		for f in $FILES; do
			fusions "$f" | while read -r name rest; do
				syms=${rest%%;*} req=${rest#*;}
				req=${req%;*}
				for s in $syms; do
					for v in $VALUES; do
						echo "$f $name $(args "$syms" "$req" "$(with $BASE1 "$s" "$v")")"
					done
				done
				for s in $syms; do
					for v in $VALUES; do
						echo "$f $name $(args "$syms" "$req" "$(with $BASE2 "$s" "$v")")"
					done
				done
			done
		done | awk '!seen[$0]++' >"$tmp/sweep"
		;;
	sanitizer)
		[ "$MODE" = run ] || { echo "gemm_sweep: the sanitizer part needs MODE=run"; exit 2; }
		if ! [ -x "$SANITIZER" ]; then
			echo "FAIL: compute-sanitizer not found ($SANITIZER)"
			echo "gemm_sweep: 0 passed, 1 failed"
			exit 1
		fi
		for f in $SAN_FILES; do
			fusions "$f" | while read -r name rest; do
				syms=${rest%%;*} req=${rest#*;}
				req=${req%;*}
				for set in M=5,N=7,K=9,Z=2 M=40,N=136,K=72,Z=2 M=130,N=136,K=72,Z=1 \
					   M=67,N=133,K=75,Z=2; do
					for tool in memcheck racecheck synccheck; do
						echo "$tool $f $name $(args "$syms" "$req" "$set")"
					done
				done
			done
		done | awk '!seen[$0]++' >"$tmp/san"
		;;
	*) echo "gemm_sweep: unknown part '$part'"; exit 2 ;;
	esac
done

# one LINE: runs one command line of the list, its output in $tmp/log/N; prints PASS or FAIL
mkdir -p "$tmp/log"
cat >"$tmp/one.sh" <<'EOF'
n=$1; shift
log=$LOGDIR/$n
case $1 in
memcheck|racecheck|synccheck)
	tool=$1 f=$2 name=$3; shift 3
	set -- "$SANITIZER" --tool "$tool" --error-exitcode 3 "$FUSC" run "$f" --fusion "$name" "$@" ;;
*)
	f=$1 name=$2; shift 2
	set -- "$FUSC" "$MODE" "$f" --fusion "$name" "$@" ;;
esac
echo "\$ $*" >"$log"
if "$@" >>"$log" 2>&1; then echo "PASS $n"; else echo "FAIL $n"; fi
EOF
export LOGDIR="$tmp/log" SANITIZER MODE
cat "$tmp/sweep" "$tmp/san" >"$tmp/all"
# the first run of each file alone (it fills the binary cache), then the others JOBS at a time
awk '!seen[$1 $2]++ { print NR, $0 }' "$tmp/all" >"$tmp/first"
while read -r line; do
	# shellcheck disable=SC2086
	sh "$tmp/one.sh" $line
done <"$tmp/first" >"$tmp/results"
awk 'FNR == NR { w[$1]; next } !(FNR in w) { print FNR, $0 }' "$tmp/first" "$tmp/all" |
	xargs -r -P "$JOBS" -L 1 sh "$tmp/one.sh" | tee -a "$tmp/results" |
	awk -v total="$(wc -l <"$tmp/all")" '/^FAIL/ { print "gemm_sweep: " $0; fflush() }
		NR % 200 == 0 { print "gemm_sweep: " NR " of " total " runs finished"; fflush() }'
pass=$(grep -c '^PASS' "$tmp/results")
fail=$(grep -c '^FAIL' "$tmp/results")
total=$(wc -l <"$tmp/all")
for n in $(grep '^FAIL' "$tmp/results" | awk '{ print $2 }' | sort -n | head -n 20); do
	echo "FAIL: $(head -n 1 "$tmp/log/$n")"
	tail -n 8 "$tmp/log/$n" | sed 's/^/  | /'
done
if [ "$total" -eq 0 ]; then
	echo "FAIL: no command to run (no fusion found in: $FILES $SAN_FILES)"
	fail=1
elif [ $((pass + fail)) -ne "$total" ]; then
	echo "gemm_sweep: $total commands, only $((pass + fail)) finished"
	fail=$((fail + total - pass - fail))
fi
echo "gemm_sweep ($MODE): $pass passed, $fail failed ($(wc -l <"$tmp/sweep") sweep runs, $(wc -l <"$tmp/san") sanitizer runs)"
[ "$fail" -eq 0 ]
