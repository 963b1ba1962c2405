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

# ---- the IR after each pass (tests/golden/after/LIST: PASS SOURCE -> after/PASS.ir) ----
grep -v '^#' tests/golden/after/LIST | awk '{print $1}' >"$tmp/after.listed"
"$FUSC" --print-passes | awk '{print $1}' >"$tmp/after.passes"
if cmp -s "$tmp/after.listed" "$tmp/after.passes"; then ok
else bad "tests/golden/after/LIST does not name every pass of --print-passes, in order"; fi
grep -v '^#' tests/golden/after/LIST | while read -r p src; do
	(cd "$(dirname "$src")" && "$FUSC" "$(basename "$src")" --dump-after="$p" \
		-o "$tmp/after.cu" 2>"$tmp/after.$p.ir" >/dev/null) || echo "$p: $src does not compile"
	expect "tests/golden/after/$p.ir" "$tmp/after.$p.ir" || echo "$p: IR after $p differs"
done >"$tmp/after.fail"
if [ -s "$tmp/after.fail" ]; then bad "per-pass IR goldens:"; cat "$tmp/after.fail"; else ok; fi
# The pipeline list of docs/design.md ("## Lowering") is the list of --print-passes.
sed -n '/^## Lowering/,/^## /p' docs/design.md | sed -n 's/^[0-9][0-9]*\. `\([a-z_]*\)`.*/\1/p' >"$tmp/after.doc"
if cmp -s "$tmp/after.doc" "$tmp/after.passes"; then ok
else bad "docs/design.md's pipeline list differs from fusc --print-passes:"; diff "$tmp/after.doc" "$tmp/after.passes"; fi

# ---- the command line (docs/cli.md) ----
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

# GNU options (getopt_long, issue 15): --opt=X and --opt X, -oFILE and -o FILE, operands
# anywhere, "--" ends the options; the same in fusc run and fusc check.
cli emit-space 0 "$FUSC" "$sax" --emit cuda -o sp.cu
grep -q '__global__' "$tmp/cli/sp.cu" && [ ! -e "$tmp/cli/sp.h" ] && ok || bad "cli: --emit cuda (separate value) did not write only the CUDA"
cli o-attached 0 "$FUSC" -oatt.cu "$sax"
[ -s "$tmp/cli/att.cu" ] && [ -s "$tmp/cli/att.h" ] && ok || bad "cli: -oFILE did not write FILE and its header"
cli output-long 0 "$FUSC" "$sax" --output long.cu --arch sm_90
[ -s "$tmp/cli/long.cu" ] && [ -s "$tmp/cli/long.h" ] && ok || bad "cli: --output PATH did not write PATH"
cp "$sax" "$tmp/cli/-dash.fus"
cli double-dash 0 "$FUSC" --emit=ir -o dash.ir -- -dash.fus
grep -q 'saxpy' "$tmp/cli/dash.ir" && ok || bad "cli: '--' did not end the options"
cli double-dash-check 0 "$FUSC" check --dims N=100 -- -dash.fus
cli check-forms 0 "$FUSC" check "$sax" --dims N=100 --seed 3 --max-blocks 2
cp "$tmp/cli.out" "$tmp/cli/check1.out"
cli check-forms-eq 0 "$FUSC" check --dims=N=100 --seed=3 "$sax" --max-blocks=2
cmp -s "$tmp/cli.out" "$tmp/cli/check1.out" && ok || bad "cli: fusc check --opt X and --opt=X differ"
cli missing-value 2 "$FUSC" "$sax" --emit
grep -q "^fusc: option '--emit' needs a value" "$tmp/cli.err" && ok || bad "cli: --emit without a value: wrong message"
cli o-missing 2 "$FUSC" "$sax" -o
grep -q "^fusc: option '-o' needs a value" "$tmp/cli.err" && ok || bad "cli: -o without a value: wrong message"
cli flag-with-value 2 "$FUSC" "$sax" --no-arch-check=yes
grep -q "^fusc: option '--no-arch-check' takes no value" "$tmp/cli.err" && ok || bad "cli: a flag given a value: wrong message"
cli unknown-short 2 "$FUSC" -x "$sax"
grep -q "^fusc: unknown option '-x'" "$tmp/cli.err" && ok || bad "cli: unknown short option: wrong message"
cli check-unknown 2 "$FUSC" check --frobnicate "$sax"
grep -q "^fusc check: unknown option '--frobnicate'" "$tmp/cli.err" && ok || bad "cli: fusc check: unknown option: wrong message"
cli run-missing-value 2 "$FUSC" run "$sax" --seed
grep -q "^fusc run: option '--seed' needs a value" "$tmp/cli.err" && ok || bad "cli: fusc run --seed without a value: wrong message"
# --prefix (issue 15 item 1): every launcher, kernel and the include guard carry it; a prefix
# that does not start a C identifier, or one C reserves, is a usage error.
cli prefix 0 "$FUSC" "$sax" --prefix=lib1_ -o pre.cu
grep -q '^cudaError_t lib1_saxpy(' "$tmp/cli/pre.h" && grep -q '^#ifndef FUSC_LIB1_SAXPY_H' "$tmp/cli/pre.h" &&
	grep -q '__global__ .*lib1_saxpy_kernel(' "$tmp/cli/pre.cu" && ! grep -q '[ *]saxpy[_(]' "$tmp/cli/pre.h" &&
	ok || bad "cli: --prefix=lib1_ did not prefix the launcher, the kernel and the guard"
for p in 1x __x _X a-b ''; do
	cli "prefix-bad-$p" 2 "$FUSC" "$sax" --prefix="$p"
	grep -q "^fusc: bad --prefix" "$tmp/cli.err" && ok || bad "cli: --prefix='$p' was not refused"
done
cli run-help 0 "$FUSC" run --help
grep -q 'usage: fusc run' "$tmp/cli.out" && ok || bad "cli: fusc run --help printed no usage"
# sm_90a: the arch-specific target, accepted where NVRTC lists sm_90, passed to NVRTC as is.
cli arch-90a 0 "$FUSC" "$sax" --emit=ptx --arch=sm_90a
grep -q '^.target sm_90a' "$tmp/cli.out" && ok || bad "cli: --arch=sm_90a did not give sm_90a PTX"
cli arch-80a 2 "$FUSC" "$sax" --arch=sm_80a
# -o x.h: the .cu and its header would be the same file (issue 15: only x.h, holding the .cu).
cli output-is-header 2 "$FUSC" "$sax" -o x.h
grep -q "the output 'x.h' is the header written beside it" "$tmp/cli.err" && [ ! -e "$tmp/cli/x.h" ] && ok ||
	bad "cli: -o x.h was not refused, or wrote x.h"
cli emit-header-to-h 0 "$FUSC" "$sax" --emit=header -o only.h
grep -q 'cudaError_t saxpy' "$tmp/cli/only.h" && ok || bad "cli: --emit=header -o only.h did not write the header"

# NVRTC is loaded on first use (issue 15): --emit=cuda neither loads nor needs it;
# FUSRT_LIBNVRTC names the library (here a missing one).
cli no-nvrtc-loaded 0 env LD_DEBUG=files "$FUSC" "$sax" --emit=cuda -o lazy.cu
grep -q 'libnvrtc' "$tmp/cli.err" && bad "cli: fusc --emit=cuda loaded libnvrtc" || ok
cli no-nvrtc-cuda 0 env FUSRT_LIBNVRTC=/nonexistent/libnvrtc.so "$FUSC" "$sax" --arch=sm_90 -o nonv.cu
"$FUSC" "$sax" --arch=sm_90 -o "$tmp/cli/withnv.cu" && cmp -s "$tmp/cli/nonv.cu" "$tmp/cli/withnv.cu" && ok ||
	bad "cli: without NVRTC the CUDA differs"
cli no-nvrtc-ptx 2 env FUSRT_LIBNVRTC=/nonexistent/libnvrtc.so "$FUSC" "$sax" --emit=ptx
grep -q "^fusc: --emit=ptx needs NVRTC: cannot load NVRTC: /nonexistent/libnvrtc.so" "$tmp/cli.err" && ok ||
	bad "cli: --emit=ptx without NVRTC: wrong message"
cli no-nvrtc-version 0 env FUSRT_LIBNVRTC=/nonexistent/libnvrtc.so "$FUSC" --version
grep -q '^NVRTC: not available' "$tmp/cli.out" && ok || bad "cli: --version without NVRTC"
cli version-nvrtc 0 "$FUSC" --version
grep -q "^fusc [0-9]" "$tmp/cli.out" && grep -q '^NVRTC [0-9][0-9]*\.[0-9]' "$tmp/cli.out" && ok ||
	bad "cli: --version does not print fusc's and NVRTC's versions"

# --color (support/diag.c): only the severity word and the caret line change; off when not
# asked for on a non-terminal; NO_COLOR turns auto off on a terminal.
cli color-never 1 "$FUSC" bad.fus --color=never
cp "$tmp/cli.err" "$tmp/cli/plain.err"
cli color-always 1 env NO_COLOR=1 "$FUSC" bad.fus --color always
esc=$(printf '\033')
grep -q "error: " "$tmp/cli/plain.err" && ! grep -q "$esc" "$tmp/cli/plain.err" &&
	grep -q "${esc}\[1;31merror${esc}\[0m: " "$tmp/cli.err" &&
	sed "s/${esc}\[[0-9;]*m//g" "$tmp/cli.err" | cmp -s - "$tmp/cli/plain.err" && ok ||
	bad "cli: --color=always did not colour only the severity and caret, or --color=never did"
cli color-bad 2 "$FUSC" bad.fus --color=sometimes
if command -v script >/dev/null; then
	(cd "$tmp/cli" && TERM=xterm script -qec "\"$FUSC\" bad.fus" /dev/null > tty.out 2>&1)
	(cd "$tmp/cli" && NO_COLOR=1 TERM=xterm script -qec "\"$FUSC\" bad.fus" /dev/null > tty-nc.out 2>&1)
	grep -q "$esc\[1;31merror" "$tmp/cli/tty.out" && ! grep -q "$esc\[1;31merror" "$tmp/cli/tty-nc.out" && ok ||
		bad "cli: --color=auto on a terminal: no colour, or colour despite NO_COLOR"
fi

# --help lists every option, subcommand, the exit status and the environment; the man page
# docs/fusc.1 has exactly the options --help has (both ways).
opts() { grep -oE '(^|[][ ,("|])--?[a-z][a-z-]*' | sed 's/^[^-]*//' | sort -u; }
"$FUSC" --help | opts > "$tmp/cli/help.opts"
sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' docs/fusc.1 | opts > "$tmp/cli/man.opts"
if [ "$(wc -l < "$tmp/cli/help.opts")" -ge 20 ] && cmp -s "$tmp/cli/help.opts" "$tmp/cli/man.opts"; then ok
else bad "cli: the options of fusc --help and docs/fusc.1 differ (< help, > man)"; diff "$tmp/cli/help.opts" "$tmp/cli/man.opts" | grep '^[<>]'; fi
"$FUSC" --help > "$tmp/cli/help.txt"
# Every option the parsers take (getopt_long tables of tools/*.c) is in --help.
for o in $(cd "$top" && { grep -hoE '^[[:space:]]*\{"[a-z-]+", (no|required)_argument' tools/fusc.c | sed 's/.*{"\([a-z-]*\)".*/--\1/'
	grep -hoE '"--[a-z-]+"' tools/cli.c tools/run.c tools/check.c | tr -d '"'; } | sort -u); do
	grep -qx -- "$o" "$tmp/cli/help.opts" && ok || bad "cli: option $o is not in fusc --help"
done
for w in 'fusc run' 'fusc check' 'Exit status' 'FUSRT_CACHE_DIR' 'FUSRT_NO_CACHE' 'FUSRT_LIBNVRTC' 'FUSRT_LIBCUDA' 'FUSC_VERIFY' 'NO_COLOR'; do
	grep -qi "$w" "$tmp/cli/help.txt" && grep -qi "$w" docs/fusc.1 && ok || bad "cli: '$w' missing from fusc --help or docs/fusc.1"
done
# Every getenv of the sources is documented in --help.
for v in $(cd "$top" && grep -rhoE 'getenv\("[A-Z_]+"\)' --include=*.c support frontend ir passes backend interp runtime tools | sed 's/getenv("\(.*\)")/\1/' | sort -u); do
	case $v in HOME|XDG_CACHE_HOME) grep -q "\$$v" "$tmp/cli/help.txt" ;; *) grep -q "^  $v " "$tmp/cli/help.txt" ;; esac && ok ||
		bad "cli: environment variable $v is not in fusc --help"
done
if command -v groff >/dev/null; then
	groff -man -ww -z docs/fusc.1 2>"$tmp/cli/groff.err" && [ ! -s "$tmp/cli/groff.err" ] && ok ||
		{ bad "cli: docs/fusc.1 has roff warnings"; head -n 5 "$tmp/cli/groff.err"; }
fi

echo "golden: $pass passed, $fail failed"
[ $fail -eq 0 ]
