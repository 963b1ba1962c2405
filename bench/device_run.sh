#!/bin/sh
# The benchmarks in one device call of at most 10 minutes: `sh bench/device_run.sh $OUT`.
# Needs the carried build/ (build/fusc: there is no flex/bison on the GPU machine, so this
# rebuilds nothing of fusc), nvcc, python3 with PyTorch and Triton. Runs bench/auto first (the
# issue 13 table), then the reduce, pointwise and gemm suites, in one process (torch.compile's
# start-up is paid once). torch.compile is skipped for new shapes after COMPILE_DEADLINE
# seconds and no case starts after DEADLINE seconds, so the tables are printed inside the call;
# a `timeout` still ends it with the rows measured so far.
# Writes $OUT/bench.log (every ROW line and every failure), $OUT/table.md (the Markdown tables
# for bench/RESULTS.md) and $OUT/gpu.txt.
set -u
OUT=${1:?usage: sh bench/device_run.sh OUTDIR}
FUSC=${FUSC:-build/fusc}
SUITES=${SUITES:-auto,reduce,pointwise,gemm}
COMPILE_DEADLINE=${COMPILE_DEADLINE:-400}
DEADLINE=${DEADLINE:-480}
mkdir -p "$OUT"
if [ ! -x "$FUSC" ]; then
	echo "device_run: $FUSC is missing: carry build/ (make all here first)" | tee "$OUT/bench.log"
	exit 2
fi
if [ -z "${NVCC:-}" ]; then
	NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
fi
export FUSC NVCC PYTHONUNBUFFERED=1
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
	"$NVCC" --version | tail -n 1
	"$FUSC" --version
} >"$OUT/gpu.txt" 2>&1
timeout 570 python3 bench/bench.py --suite "$SUITES" --compile-deadline "$COMPILE_DEADLINE" \
	--deadline "$DEADLINE" --out "$OUT" --build build/bench
rc=$?
echo "device_run: bench.py exit $rc (0: every fusc row checked and timed)"
exit $rc
