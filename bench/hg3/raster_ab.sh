# Block order of the tensor-core GEMM (issue 14): the automatic schedule in the hardware's
# row-major block order against C.raster(bi, bj, G) (docs/tensor_cores.md, "Block order").
# UNMEASURED so far. Three parts, each one device call of under 10 minutes, from the root:
#
#   OUT=DIR sh bench/hg3/raster_ab.sh trials     bench.py --suite rtry: the schedule pasted as
#       a block (bench/hg3/rtry_nn.fus, rtry_nt.fus) against G = 4, 8, 16 (rtry_*_gG.fus) at
#       4096^3 and 8192^3 (NT: 4096^3 and 8192x4096x4096), do_bench, L2 flushed, cuBLAS beside
#   OUT=DIR sh bench/hg3/raster_ab.sh auto       bench.py --suite gemm --only '(auto': every
#       automatic GEMM row (4095x4097x4093 and the NT padded plan included) with build/fusc,
#       then with build/r8/fusc (auto_matmul.c's FUSC_MMA_RASTER=8), one after the other
#   OUT=DIR sh bench/hg3/raster_ab.sh sustained  bench/hg3/harness.cu: auto_hgemm from each
#       compiler, 20 and 600 launches back to back (the 600: do_bench's kind of load) at
#       4096^3, 8192^3 and 4095x4097x4093, each checked against a naive kernel first
#
# build/r8/fusc is built on the CPU machine (the GPU machine has no flex/bison), then carried
# with build/fusc:
#   make -j2 BUILD=build/r8 CC='cc -DFUSC_MMA_RASTER=8' build/r8/fusc
set -u
OUT=${OUT:?OUT=DIR}
R8=${R8:-build/r8/fusc}
mkdir -p "$OUT"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
case ${1:-} in
trials)
	timeout 560 python3 bench/bench.py --suite rtry --no-compile --deadline 480 \
		--out "$OUT/rtry" --build build/bench-rtry
	;;
auto)
	[ -x "$R8" ] || { echo "raster_ab: $R8 is missing (build it on the CPU machine and carry it)"; exit 2; }
	timeout 270 python3 bench/bench.py --suite gemm --only "(auto" --no-compile --deadline 220 \
		--out "$OUT/auto0" --build build/bench-a0
	FUSC=$R8 timeout 270 python3 bench/bench.py --suite gemm --only "(auto" --no-compile \
		--deadline 220 --out "$OUT/auto8" --build build/bench-a8
	grep -h '^ROW' "$OUT/auto0/bench.log" "$OUT/auto8/bench.log" 2>/dev/null
	;;
sustained)
	[ -x "$R8" ] || { echo "raster_ab: $R8 is missing (build it on the CPU machine and carry it)"; exit 2; }
	W=$OUT/w; mkdir -p "$W"
	build/fusc examples/gemm/auto_hgemm.fus --arch=sm_90 --emit=cuda -o "$W/base.cu" || echo "emit base failed"
	"$R8" examples/gemm/auto_hgemm.fus --arch=sm_90 --emit=cuda -o "$W/r8.cu" || echo "emit r8 failed"
	grep -c raster_lin "$W/base.cu" "$W/r8.cu"
	for v in base r8; do
		timeout 200 nvcc -O3 -arch=sm_90 -DKFILE="\"$W/$v.cu\"" -DLAUNCH=auto_hgemm \
			-o "$W/h_$v" bench/hg3/harness.cu > "$W/c_$v.log" 2>&1 &
	done
	wait; tail -3 "$W"/c_*.log
	for v in base r8; do
		timeout 20 "$W/h_$v" 300 264 72 x; timeout 20 "$W/h_$v" 4095 4097 4093 x
	done
	for s in "4096" "8192" "4095 4097 4093"; do
		for it in 20 600; do
			for v in base r8 base r8; do
				sleep 1; HG_IT=$it timeout 60 "$W/h_$v" $s
			done
		done
	done
	rm -rf "$W"
	;;
*)
	echo "usage: OUT=DIR sh bench/hg3/raster_ab.sh trials|auto|sustained"; exit 2
	;;
esac
