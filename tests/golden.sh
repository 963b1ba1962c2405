#!/bin/sh
# Golden-file tests (cproc-style siblings). For every .fus under the listed folders:
#   tests/golden/err/x.fus   must fail with exit 1; stderr must equal x.err
#                            (never a crash, an internal error or an exit code above 2,
#                            and no output file left behind)
#   examples/**/x.fus,       must compile; the CUDA must equal tests/golden/cuda/x.cu, the IR dump
#   tests/golden/ok/x.fus    tests/golden/ir/x.ir; compiling twice gives the same bytes; the CUDA
#                            compiles with NVRTC for sm_80 and sm_90 and, with its launchers,
#                            with nvcc; the header x.h (tests/golden/cuda/x.h) is plain C99.
# UPDATE=1 rewrites the expected files. Prints "N passed, N failed" and exits 1 on any failure.
FUSC=${FUSC:-build/fusc}
export FUSC_VERIFY=1  # the IR verifier runs between passes
FUSC=$(cd "$(dirname "$FUSC")" && pwd)/$(basename "$FUSC")
CUDA=${CUDA:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA/bin/nvcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect FILE ACTUAL: compares (or rewrites with UPDATE=1)
expect() {
	if [ "${UPDATE:-0}" = 1 ]; then
		cp "$2" "$1"
		return 0
	fi
	if [ ! -f "$1" ]; then
		echo "missing expected file $1 (run with UPDATE=1)"
		return 1
	fi
	if ! cmp -s "$1" "$2"; then
		diff -u "$1" "$2" | head -n 40
		return 1
	fi
}

# ---- bad inputs ----
for f in tests/golden/err/*.fus; do
	[ -f "$f" ] || continue
	name=$(basename "$f" .fus)
	dir=$(dirname "$f")
	out="$tmp/$name.out"
	(cd "$dir" && "$FUSC" "$name.fus" -o "$tmp/$name.cu" >/dev/null 2>"$out")
	rc=$?
	if [ $rc -ne 1 ]; then
		bad "$f: exit code $rc, expected 1"; sed 's/^/    /' "$out" | head -n 5; continue
	fi
	if [ -e "$tmp/$name.cu" ] || [ -e "$tmp/$name.h" ]; then
		bad "$f: output file left behind after a failure"; continue
	fi
	if grep -q 'internal error' "$out" || ! grep -q "^$name.fus:[0-9]*:[0-9]*: error: " "$out"; then
		bad "$f: no file:line:col error, or an internal error"; sed 's/^/    /' "$out" | head -n 5; continue
	fi
	if expect "$dir/$name.err" "$out"; then ok; else bad "$f: diagnostics differ from $name.err"; fi
done

# ---- programs that compile ----
mkdir -p tests/golden/cuda tests/golden/ir
for f in examples/*.fus examples/*/*.fus tests/golden/ok/*.fus; do
	[ -f "$f" ] || continue
	name=$(basename "$f" .fus)
	dir=$(dirname "$f")
	if ! (cd "$dir" && "$FUSC" "$name.fus" -o "$tmp/$name.cu" 2>"$tmp/$name.log"); then
		bad "$f: does not compile"; sed 's/^/    /' "$tmp/$name.log" | head -n 10; continue
	fi
	ok
	if expect "tests/golden/cuda/$name.cu" "$tmp/$name.cu"; then ok; else bad "$f: CUDA differs from tests/golden/cuda/$name.cu"; fi
	if expect "tests/golden/cuda/$name.h" "$tmp/$name.h"; then ok; else bad "$f: header differs from tests/golden/cuda/$name.h"; fi
	# The whole .cu (kernels and launchers) builds with nvcc, and the header is C99.
	if $NVCC -std=c++17 -arch=sm_80 -c "$tmp/$name.cu" -o "$tmp/$name.o" 2>"$tmp/$name.nvcc" &&
	   printf '#include "%s.h"\nint main(void){return 0;}\n' "$name" >"$tmp/$name.main.c" &&
	   cc -std=c99 -Wall -Wextra -Werror -pedantic -I"$tmp" -isystem "$CUDA/include" -c "$tmp/$name.main.c" -o "$tmp/$name.main.o" 2>>"$tmp/$name.nvcc"
	then ok; else bad "$f: nvcc or the C99 header failed"; sed 's/^/    /' "$tmp/$name.nvcc" | head -n 10; fi
	(cd "$dir" && "$FUSC" "$name.fus" --emit=ir -o "$tmp/$name.ir" 2>/dev/null)
	if expect "tests/golden/ir/$name.ir" "$tmp/$name.ir"; then ok; else bad "$f: IR differs from tests/golden/ir/$name.ir"; fi
	(cd "$dir" && "$FUSC" "$name.fus" -o "$tmp/$name.2.cu" 2>/dev/null)
	if cmp -s "$tmp/$name.cu" "$tmp/$name.2.cu" && cmp -s "$tmp/$name.h" "$tmp/$name.2.h"; then ok
	else bad "$f: output is not deterministic"; fi
	for arch in sm_80 sm_90; do
		if (cd "$dir" && "$FUSC" "$name.fus" --emit=cubin --arch=$arch -o "$tmp/$name.$arch.cubin" 2>"$tmp/$name.nvrtc") &&
		   [ -s "$tmp/$name.$arch.cubin" ]; then ok
		else bad "$f: NVRTC compilation for $arch failed"; sed 's/^/    /' "$tmp/$name.nvrtc" | head -n 10; fi
	done
done

echo "golden: $pass passed, $fail failed"
[ $fail -eq 0 ]
