#!/bin/sh
# Compile time of `fusc --emit=cuda` (process start included): for each program, the median of
# RUNS runs in milliseconds, and the kernels it emits. Opt-in (`make bench-compile`), never part
# of `make check`: a time depends on the machine and its load. What make check asserts instead
# is a count (tests/unit/check_scale.c: the passes run once per emitted kernel).
# Usage: sh bench/compile_time.sh [FUSC [FILES...]]; RUNS (default 21).
set -u
FUSC=${1:-${FUSC:-build/fusc}}
[ $# -gt 0 ] && shift
RUNS=${RUNS:-21}
[ $# -gt 0 ] || set -- bench/auto/*.fus examples/gemm/*.fus
printf '%-40s %9s %8s\n' program ms kernels
for f in "$@"; do
	kernels=$("$FUSC" --emit=cuda -o - "$f" 2>/dev/null | grep -c '__global__') ||
		{ echo "bench-compile: $FUSC failed on $f" >&2; exit 1; }
	i=0
	while [ $i -lt "$RUNS" ]; do
		s=$(date +%s%N)
		"$FUSC" --emit=cuda -o /dev/null "$f" 2>/dev/null
		e=$(date +%s%N)
		echo $((e - s))
		i=$((i + 1))
	done | sort -n | awk -v f="$f" -v k="$kernels" '{ t[NR] = $1 }
		END { printf "%-40s %9.2f %8d\n", f, t[int((NR + 1) / 2)] / 1e6, k }'
done
