#!/bin/sh
# Golden-file tests (cproc-style siblings). For every .fus under the listed folders:
#   tests/golden/err/x.fus   must fail with exit 1; stderr must equal x.err
#                            (never a crash, an internal error or an exit code above 2,
#                            and no output file left behind)
#   examples/**/x.fus,       must compile; the CUDA must equal tests/golden/cuda/x.cu, which
#   tests/golden/ok/x.fus    holds only the banners of the preamble's sections (they must be those
#                            of backend/preamble.cuh: tests/preamble.sh), the IR dump
#                            tests/golden/ir/x.ir; compiling twice gives the same bytes; the CUDA
#                            compiles with NVRTC for sm_80 and sm_90 and, with its launchers,
#                            with nvcc; the header x.h (tests/golden/cuda/x.h) is plain C99.
# UPDATE=1 rewrites the expected files. Prints "N passed, N failed" and exits 1 on any failure.
FUSC=${FUSC:-build/fusc}
export FUSC_VERIFY=1  # the IR verifier runs between passes
FUSC=$(cd "$(dirname "$FUSC")" && pwd)/$(basename "$FUSC")
CUDA=${CUDA:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA/bin/nvcc}
top=$(pwd)
. "$top/tests/preamble.sh"
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
	strip_preamble "$tmp/$name.cu" >"$tmp/$name.short.cu"
	if expect "tests/golden/cuda/$name.cu" "$tmp/$name.short.cu"; then ok; else bad "$f: CUDA differs from tests/golden/cuda/$name.cu"; fi
	if expand_preamble "tests/golden/cuda/$name.cu" | cmp -s - "$tmp/$name.cu"; then ok
	else bad "$f: the .cu's preamble is not the sections of backend/preamble.cuh its golden names"; fi
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

# Every section of the preamble is in some golden (so each is compiled by nvcc and NVRTC above).
grep '^// ---- ' backend/preamble.cuh | while IFS= read -r banner; do
	grep -qxF -- "$banner" tests/golden/cuda/*.cu || echo "$banner"
done >"$tmp/unused"
if [ -s "$tmp/unused" ]; then bad "no golden uses these sections of backend/preamble.cuh:"; cat "$tmp/unused"
else ok; fi

# ---- the command line (SPEC §5) ----
# cli NAME EXPECTED_RC COMMAND...: runs in $tmp/cli, checks the exit status.
mkdir -p "$tmp/cli"
cli() {
	name=$1 want=$2; shift 2
	(cd "$tmp/cli" && "$@" >"$tmp/cli.out" 2>"$tmp/cli.err")
	got=$?
	if [ $got -eq "$want" ]; then ok; else bad "cli $name: exit $got, expected $want"; sed 's/^/    /' "$tmp/cli.err" | head -n 5; fi
}
sax="$top/examples/saxpy.fus"
cli default-outputs 0 "$FUSC" "$sax"
[ -s "$tmp/cli/saxpy.cu" ] && [ -s "$tmp/cli/saxpy.h" ] && ok || bad "cli: fusc FILE did not write STEM.cu and STEM.h"
cli stdin-to-stdout 0 sh -c "\"$FUSC\" - < \"$sax\""
grep -q '__global__' "$tmp/cli.out" && ok || bad "cli: stdin input did not write CUDA to stdout"
cli dash-o 0 "$FUSC" "$sax" -o sub.cu
[ -s "$tmp/cli/sub.cu" ] && [ -s "$tmp/cli/sub.h" ] && ok || bad "cli: -o PATH did not put the header beside the .cu"
for e in cuda header ir ast ptx; do
	cli "emit-$e" 0 "$FUSC" "$sax" --emit=$e
	[ -s "$tmp/cli.out" ] && ok || bad "cli: --emit=$e wrote nothing"
done
cli dump-after-all 0 "$FUSC" "$sax" --dump-after=all -o "$tmp/cli/out.cu"
[ "$(grep -c '^// ---- after ' "$tmp/cli.err")" -eq "$("$FUSC" --print-passes | wc -l)" ] && ok || bad "cli: --dump-after=all does not dump after every pass"
cli time-passes 0 "$FUSC" "$sax" --time-passes -o "$tmp/cli/out.cu"
grep -q 'total: text to output' "$tmp/cli.err" && ok || bad "cli: --time-passes printed no total"
cli arch-too-old 1 "$FUSC" "$top/examples/cp_async/cp_async_simple.fus" --arch=sm_75 -o "$tmp/cli/old.cu"
grep -q 'error: cp.async needs sm_80, but the target is sm_75' "$tmp/cli.err" && [ ! -e "$tmp/cli/old.cu" ] && ok || bad "cli: --arch=sm_75 with cp_async is not an error at the directive"
cli no-arch-check 0 "$FUSC" "$top/examples/cp_async/cp_async_simple.fus" --arch=sm_75 --no-arch-check -o "$tmp/cli/old.cu"
grep -q 'warning: cp.async needs sm_80' "$tmp/cli.err" && [ -s "$tmp/cli/old.cu" ] && ok || bad "cli: --no-arch-check did not warn and emit"
cli unknown-pass 2 "$FUSC" "$sax" --dump-after=nosuchpass
cli unknown-option 2 "$FUSC" --frobnicate "$sax"
cli bad-arch 2 "$FUSC" "$sax" --arch=volta
# An architecture NVRTC does not list is a usage error naming the ones it does (issue 11 item 8).
cli unsupported-arch 2 "$FUSC" "$sax" --arch=sm_81 -o "$tmp/cli/arch.cu"
grep -q 'unsupported architecture sm_81: NVRTC supports .*sm_80, .*sm_90' "$tmp/cli.err" && [ ! -e "$tmp/cli/arch.cu" ] && ok ||
	bad "cli: --arch=sm_81 is not refused with the list of NVRTC's architectures"
cli unsupported-arch-ptx 2 "$FUSC" "$sax" --arch=sm_81 --emit=ptx
cli bad-emit 2 "$FUSC" "$sax" --emit=asm
cli missing-file 2 "$FUSC" nosuch.fus
cli no-input 2 "$FUSC"
cli help 0 "$FUSC" --help
cli version 0 "$FUSC" --version
printf 'fusion f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[j];\n}\n' > "$tmp/cli/bad.fus"
rm -f "$tmp/cli/bad.cu" "$tmp/cli/bad.h"
cli diagnostics 1 "$FUSC" bad.fus
[ ! -e "$tmp/cli/bad.cu" ] && [ ! -e "$tmp/cli/bad.h" ] && ok || bad "cli: a failed compilation left an output file"

# Outputs (tools/output.c, issue 11 item 15): an output that is the input is refused (exit 2) under
# any spelling and the input is left as it was; an empty file is an error and writes nothing.
cp "$sax" "$tmp/cli/in.fus"
cli output-is-input 2 "$FUSC" in.fus -o in.fus
cli output-is-input-dotted 2 "$FUSC" in.fus --emit=ir -o ./in.fus
cp "$sax" "$tmp/cli/k.h"
cli header-is-input 2 "$FUSC" k.h -o k.cu
cp "$sax" "$tmp/cli/same.cu"
cli default-output-is-input 2 "$FUSC" same.cu
grep -q "the output 'same.cu' is the input file 'same.cu'" "$tmp/cli.err" && cmp -s "$sax" "$tmp/cli/in.fus" &&
	cmp -s "$sax" "$tmp/cli/k.h" && cmp -s "$sax" "$tmp/cli/same.cu" && [ ! -e "$tmp/cli/k.cu" ] && ok ||
	bad "cli: an output that is the input was not refused, or the input changed"
: > "$tmp/cli/empty.fus"
cli empty-file 1 "$FUSC" empty.fus
grep -q "empty.fus:1:1: error: no fusion in this file" "$tmp/cli.err" && [ ! -e "$tmp/cli/empty.cu" ] &&
	[ ! -e "$tmp/cli/empty.h" ] && ok || bad "cli: an empty file did not fail, or wrote outputs"
cli empty-stdin 1 sh -c "\"$FUSC\" - < /dev/null"
[ ! -s "$tmp/cli.out" ] && ok || bad "cli: an empty standard input wrote output"
cli dev-null 0 "$FUSC" "$sax" -o /dev/null
[ -c /dev/null ] && ok || bad "cli: -o /dev/null replaced /dev/null"
ls "$tmp/cli" | grep -q '\.tmp' && bad "cli: a temporary output was left behind" || ok

echo "golden: $pass passed, $fail failed"
[ $fail -eq 0 ]
