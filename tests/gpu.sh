#!/bin/sh
# GPU tests, for `make check-gpu` on a machine with a CUDA device, nvcc and compute-sanitizer.
# Uses the prebuilt build/fusc and build/check_unit (the GPU machine has no flex, bison or
# Check). Three parts:
#   run        `fusc run` (GPU vs the reference interpreter) of every fusion of examples/*.fus,
#              examples/*/*.fus (not examples/embed), tests/golden/ok/*.fus and bench/auto/*.fus
#              (the automatic schedules) at several sizes: smaller than one block (1, 7, 3x5),
#              sizes no split divides (4097, 1000003, 4097x1023), rows just past the powers
#              of two where schedules change (255, 1025, 16385, 65537) and large ones (2^24,
#              4096x4096); a fusion with constant
#              dimensions only runs at them. A size a launcher requires to be a multiple of K
#              (the header's "Requires: N a multiple of K") is rounded up to one.
#   unit       build/check_unit with the "gpu" tagged tests (it must find the device).
#   fallback   tests/gpu/fallback.cu: an auto-scheduled launcher built with nvcc runs its scalar
#              kernel when N is not a multiple of 4 or a pointer is misaligned (checked on the CPU).
#   exp_lowp   tests/gpu/exp_lowp.cu: the approximate exp of f16/bf16 results (exp2f(x * log2 e))
#              within 2^-22 + |x| * 2^-23 of exp for every 64th f32 in [-104, 104].
#   aot        tests/aot/main.c, a C program built with cc against two `fusc --emit=obj`
#              objects and libfusrt (no nvcc), runs saxpy and an f16 fusion on the GPU.
#   python     tests/python/test_torch.py: python/fusc (ctypes over build/libfusrt.so) with
#              PyTorch tensors against PyTorch's own results (it must find torch and the GPU).
#   sanitizer  compute-sanitizer over `fusc run` of each fusion at one small size no block
#              divides: memcheck for every fusion, racecheck and synccheck for the files whose
#              generated code uses shared memory (automatic schedules included; the JIT-loaded
#              modules are instrumented when they load). tests/gemm_sweep.sh runs the GEMM
#              examples at more sizes.
# Prints "N passed, N failed"; exits 1 on any failure and 77 when there is no CUDA device.
# Environment: FUSC, CHECK_UNIT, SANITIZER (compute-sanitizer), PARTS ("run unit fallback sanitizer"), NVCC, FILES, SHARD,
# LOG (a folder: every command's output is kept there).
FUSC=${FUSC:-build/fusc}
CHECK_UNIT=${CHECK_UNIT:-build/check_unit}
CUDA=${CUDA:-/usr/local/cuda}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo "$CUDA/bin/compute-sanitizer")}
PARTS=${PARTS:-"run unit fallback exp_lowp aot python sanitizer"}
NVCC=${NVCC:-$CUDA/bin/nvcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LOG=${LOG:-$tmp/log}
mkdir -p "$LOG"
# one binary cache for the whole script: every size of a file reuses its first compilation
export FUSRT_CACHE_DIR="$tmp/cache"
pass=0
fail=0
n=0

# t NAME COMMAND...: one test; the output goes to $LOG, and its tail is shown on failure.
# (sh has no locals: its variables start with t_ so the callers' loops keep theirs)
t() {
	t_name=$1; shift
	n=$((n + 1))
	t_log="$LOG/$n.log"
	echo "\$ $*" >"$t_log"
	"$@" >>"$t_log" 2>&1
	t_rc=$?
	if [ $t_rc -eq 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL ($t_rc): $t_name"
		tail -n 15 "$t_log" | sed 's/^/  | /'
	fi
	return $t_rc
}

. tests/gpu_lib.sh

# The size sets, by number of size symbols ("fixed": the tensors have constant dimensions
# too, so the large sizes are smaller: M x 128 must stay a sane amount of memory).
sizes_for() {
	case $1,$2 in
	0,*) echo "-" ;;
	1,fixed) echo "1 7 4097 131071" ;;
	1,*) echo "1 7 4097 1000003 16777216" ;;
	2,fixed) echo "1,1 3,5 4097,1023" ;;
	2,*) echo "1,1 3,5 4097,1023 1023,4097 4096,4096 129,255 17,1025 9,16385 3,65537" ;;
	*) echo "1,1,1 3,5,7 67,129,33 256,256,256" ;;
	esac
}
small_for() {
	case $1 in
	0) echo "-" ;;
	1) echo "1003" ;;
	2) echo "37,67" ;;
	*) echo "5,7,9" ;;
	esac
}

# FILES (globs) replaces the file list; SHARD=i/n keeps every n-th file from the i-th
# (0-based): n copies of this script can share the GPU (compute-sanitizer runs are slow and
# mostly CPU).
files() {
	for f in ${FILES:-examples/*.fus examples/*/*.fus tests/golden/ok/*.fus bench/auto/*.fus}; do
		case $f in examples/embed/*) continue ;; esac
		[ -f "$f" ] && echo "$f"
	done | awk -v shard="${SHARD:-0/1}" 'BEGIN { split(shard, s, "/") } (NR - 1) % s[2] == s[1]'
}

require_device gpu "$tmp"

for part in $PARTS; do
	case $part in
	run)
		for f in $(files); do
			fusions "$f" >"$tmp/fusions"
			[ -s "$tmp/fusions" ] || { t "$f: fusc --emit=header" false; continue; }
			while read -r name rest; do
				syms=${rest%%;*} req=${rest#*;} fixed=${rest##*;}
				req=${req%;*}
				set -- $syms
				for s in $(sizes_for $# "$fixed"); do
					d=$([ "$s" = - ] || dims "$syms" "$req" "$s")
					t "fusc run $f --fusion $name $d" "$FUSC" run "$f" --fusion "$name" $d
				done
			done <"$tmp/fusions"
		done
		;;
	unit)
		# it must pass, and it must not have excluded the gpu tests
		t "check_unit (with the gpu tests)" sh -c 'out=$("$0" 2>&1); rc=$?; printf "%s\n" "$out"
			[ $rc -eq 0 ] && ! printf "%s\n" "$out" | grep -q "skipped: no CUDA device"' "$CHECK_UNIT"
		;;
	fallback)
		t "fusc bench/pointwise/bias_gelu_auto.fus" "$FUSC" bench/pointwise/bias_gelu_auto.fus \
			-o "$tmp/bias_gelu.cu" &&
		t "nvcc tests/gpu/fallback.cu" "$NVCC" -O2 -arch=native -I"$tmp" -o "$tmp/fallback" \
			tests/gpu/fallback.cu "$tmp/bias_gelu.cu" &&
		t "fallback: scalar kernel for odd N and misaligned x" "$tmp/fallback"
		;;
	exp_lowp)
		t "nvcc tests/gpu/exp_lowp.cu" "$NVCC" -O2 -arch=native -o "$tmp/exp_lowp" \
			tests/gpu/exp_lowp.cu &&
		t "exp_lowp: 2^-22 + |x| * 2^-23" "$tmp/exp_lowp"
		;;
	aot)
		lib=$(cd "$(dirname "$FUSC")" && pwd)
		t "fusc examples/saxpy.fus --emit=obj --arch=sm_80,sm_90" "$FUSC" examples/saxpy.fus \
			--emit=obj --arch=sm_80,sm_90 -o "$tmp/saxpy.o" &&
		t "fusc tests/aot/scale_h.fus --emit=obj --prefix=aot_" "$FUSC" tests/aot/scale_h.fus \
			--emit=obj --prefix=aot_ -o "$tmp/scale_h.o" &&
		t "cc tests/aot/main.c saxpy.o scale_h.o -lfusrt" cc -std=c99 -I"$tmp" -Iinclude \
			-isystem "$CUDA/include" -o "$tmp/aot" tests/aot/main.c "$tmp/saxpy.o" \
			"$tmp/scale_h.o" -L"$lib" -lfusrt -Wl,-rpath,"$lib" &&
		t "aot: saxpy and scale_h through the objects (exit 0, not 77)" "$tmp/aot"
		;;
	python)
		t "python3 tests/python/test_torch.py (exit 0, not 77)" env \
			FUSC_LIBFUSRT="$(cd "$(dirname "$FUSC")" && pwd)/libfusrt.so" \
			python3 tests/python/test_torch.py
		;;
	sanitizer)
		if ! [ -x "$SANITIZER" ]; then
			t "compute-sanitizer not found ($SANITIZER)" false
			continue
		fi
		for f in $(files); do
			tools=memcheck
			# by the generated code: an automatic schedule uses shared memory too
			"$FUSC" "$f" --emit=cuda -o - 2>/dev/null | grep -q '__shared__' &&
				tools="memcheck racecheck synccheck"
			fusions "$f" >"$tmp/fusions"
			while read -r name rest; do
				syms=${rest%%;*} req=${rest#*;}
				req=${req%;*}
				set -- $syms
				s=$(small_for $#)
				d=$([ "$s" = - ] || dims "$syms" "$req" "$s")
				for tool in $tools; do
					t "compute-sanitizer --tool $tool fusc run $f --fusion $name $d" \
						"$SANITIZER" --tool "$tool" --error-exitcode 3 \
						"$FUSC" run "$f" --fusion "$name" $d
				done
			done <"$tmp/fusions"
		done
		;;
	*) echo "gpu.sh: unknown part '$part'"; exit 2 ;;
	esac
done

echo "gpu: $pass passed, $fail failed"
[ $fail -eq 0 ]
