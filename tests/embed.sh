#!/bin/sh
# Builds and runs the embedding examples (docs/embedding.md) from a clean state against this
# tree, and the launcher refusal test (tests/launcher):
#   examples/embed/nvcc  fusc -> .cu/.h, nvcc -> object, linked into a C program (-lcudart)
#   examples/embed/jit   a C program linked with libfusrt through `pkg-config fusrt`, after
#                        `make install PREFIX=<tmp>` of this tree (shared and static builds)
# Building must always work (CI has no GPU). A program that exits 77 reports "skipped: no CUDA
# device"; any other nonzero exit is a failure. Prints "N passed, N failed" (and the skips) and
# exits 1 on any failure.
# Environment: FUSC (default build/fusc), CUDA, MAKE.
FUSC=${FUSC:-build/fusc}
FUSC=$(cd "$(dirname "$FUSC")" && pwd)/$(basename "$FUSC")
CUDA=${CUDA:-/usr/local/cuda}
MAKE=${MAKE:-make}
# The embedding programs are ordinary, uninstrumented programs: build and install the plain
# library for them even under `make check SAN=1` (a sanitized libfusrt cannot link into them).
unset MAKEFLAGS MFLAGS
export SAN=
top=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
skip=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# step NAME COMMAND...: a build step; its output is shown only when it fails.
step() {
	name=$1; shift
	if "$@" >"$tmp/log" 2>&1; then ok; return 0; fi
	bad "$name"; sed 's/^/    /' "$tmp/log" | tail -n 20
	return 1
}

# runs NAME PROGRAM: 0 passes, 77 is a skip, anything else fails.
runs() {
	name=$1; shift
	"$@" >"$tmp/run" 2>&1
	rc=$?
	case $rc in
	0) ok; echo "ok: $name" ;;
	77) skip=$((skip + 1)); echo "skipped: no CUDA device: $name ($(grep -m1 '^skipped' "$tmp/run"))" ;;
	*) bad "$name: exit $rc"; sed 's/^/    /' "$tmp/run" | tail -n 20 ;;
	esac
}

# ---- ahead of time: fusc + nvcc ----
nv="$tmp/nvcc"
if step "embed/nvcc: build" $MAKE -C examples/embed/nvcc OUT="$nv" FUSC="$FUSC" CUDA="$CUDA"; then
	# the launcher's refusals run before the device probe, so they are checked here too
	runs "embed/nvcc: saxpy_demo" "$nv/saxpy_demo"
	grep -q '^saxpy(N = -1): refused: saxpy: size N = -1 is negative$' "$tmp/run" && ok ||
		bad "embed/nvcc: the launcher did not refuse N = -1 with its reason"
fi

# ---- the launchers' argument checks (issue 11 item 16) ----
# tests/launcher/refuse.c calls the launchers of refuse.fus with sizes whose products pass 64
# bits, null pointers and grids past CUDA's limits; the CUDA entry points a launch goes through
# are wrapped (counted and failed), so it needs no GPU and shows any launcher that reaches CUDA.
ln="$tmp/launcher"
mkdir -p "$ln"
wrap=-Wl,--wrap=__cudaPushCallConfiguration,--wrap=cudaGetLastError,--wrap=cudaGetDevice,--wrap=cudaMallocAsync
if step "launcher: fusc" "$FUSC" tests/launcher/refuse.fus -o "$ln/refuse.cu" &&
   step "launcher: nvcc" "$CUDA/bin/nvcc" -std=c++17 -arch=sm_80 -c "$ln/refuse.cu" -o "$ln/refuse.o" &&
   step "launcher: cc (C99 against the header)" cc -std=c99 -Wall -Wextra -Werror -pedantic \
	-I"$ln" -isystem "$CUDA/include" -c tests/launcher/refuse.c -o "$ln/main.o" &&
   step "launcher: link" cc -o "$ln/refuse" "$ln/main.o" "$ln/refuse.o" "$wrap" \
	-L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64" -lcudart -lstdc++ -lm; then
	runs "launcher: refusals before any CUDA call" "$ln/refuse"
fi

# ---- --prefix: two files that both define softmax in one program (issue 15 item 1) ----
px="$tmp/prefix-names"
mkdir -p "$px"
if step "prefix: fusc rows" "$FUSC" tests/prefix/rows.fus --prefix=rows_ -o "$px/rows.cu" &&
   step "prefix: fusc cols" "$FUSC" tests/prefix/cols.fus --prefix cols_ -o "$px/cols.cu" &&
   step "prefix: nvcc rows" "$CUDA/bin/nvcc" -std=c++17 -arch=sm_80 -c "$px/rows.cu" -o "$px/rows.o" &&
   step "prefix: nvcc cols" "$CUDA/bin/nvcc" -std=c++17 -arch=sm_80 -c "$px/cols.cu" -o "$px/cols.o" &&
   step "prefix: cc (both headers)" cc -std=c99 -Wall -Wextra -Werror -pedantic \
	-I"$px" -isystem "$CUDA/include" -c tests/prefix/main.c -o "$px/main.o" &&
   step "prefix: link" cc -o "$px/prog" "$px/main.o" "$px/rows.o" "$px/cols.o" \
	-L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64" -lcudart -lstdc++ -lm; then
	runs "prefix: rows_softmax and cols_softmax in one program" "$px/prog"
fi

# ---- ahead-of-time objects: fusc --emit=obj, a plain C program, cc and -lfusrt (issue 15) ----
# tests/aot/main.c checks the launchers' refusals without a GPU (libfusrt checks before it
# needs the driver), then runs both fusions where there is one.
ao="$tmp/aot"
mkdir -p "$ao"
libdir=$(cd "$(dirname "$FUSC")" && pwd)
# libfusrt.a built by `make check SAN=1` is instrumented: a program linking it statically
# needs the sanitizer runtimes, and a program linking the shared one needs them first
san_link=
nm -u "$libdir/libfusrt.a" 2>/dev/null | grep -q __asan_init && san_link=-fsanitize=address,undefined
# (the generated C compiles without a warning: CC with -Werror)
if step "aot: fusc saxpy --emit=obj --arch=sm_80,sm_90" env CC="cc -Wall -Wextra -Werror" \
	"$FUSC" examples/saxpy.fus --emit=obj --arch=sm_90,sm_80 -o "$ao/saxpy.o" &&
   step "aot: fusc scale_h --emit obj --prefix=aot_" env CC="cc -Wall -Wextra -Werror" \
	"$FUSC" tests/aot/scale_h.fus --emit obj --prefix=aot_ -o "$ao/scale_h.o" &&
   step "aot: cc (C99 against both headers)" cc -std=c99 -Wall -Wextra -Werror -pedantic \
	-I"$ao" -Iinclude -isystem "$CUDA/include" -c tests/aot/main.c -o "$ao/main.o" &&
   step "aot: link with libfusrt.so" cc $san_link -o "$ao/prog" "$ao/main.o" "$ao/saxpy.o" "$ao/scale_h.o" \
	-L"$libdir" -lfusrt -Wl,-rpath,"$libdir" &&
   step "aot: link with libfusrt.a" cc $san_link -o "$ao/prog_static" "$ao/main.o" "$ao/saxpy.o" \
	"$ao/scale_h.o" "$libdir/libfusrt.a" -ldl -lm -lpthread; then
	# the objects define their launchers and nothing else, and need libfusrt, not CUDA's libraries
	nm -g --defined-only "$ao/saxpy.o" "$ao/scale_h.o" | awk 'NF == 3 {print $3}' | sort > "$ao/defined"
	printf '%s\n' aot_scale_h aot_scale_h_last_error saxpy saxpy_last_error > "$ao/want"
	cmp -s "$ao/defined" "$ao/want" && ok ||
		{ bad "aot: the objects define other symbols than their launchers"; diff "$ao/want" "$ao/defined"; }
	nm -u "$ao/saxpy.o" | grep -q ' fusrt_aot_launch$' && ! nm -u "$ao/saxpy.o" | grep -qi ' _*cu' && ok ||
		bad "aot: saxpy.o should call fusrt_aot_launch and nothing of CUDA's"
	for p in prog prog_static; do
		runs "aot: $p" "$ao/$p"
		grep -q '^saxpy(N = -1): refused: fusion saxpy: size N is negative (-1)$' "$tmp/run" &&
		grep -q '^saxpy(x + 1): refused: fusion saxpy: x is not 16-byte aligned (vectorized access, saxpy.fus:[0-9]*:[0-9]*)$' "$tmp/run" && ok ||
			bad "aot: $p: the launcher did not refuse N = -1 and a misaligned x with their reasons"
	done
fi
# -o x.a: the object in an archive, which links the same way
if step "aot: fusc saxpy --emit=obj -o libsaxpy.a" "$FUSC" examples/saxpy.fus --emit=obj \
	-o "$ao/libsaxpy.a" && step "aot: link saxpy from an archive" cc -o "$ao/prog_a" \
	"$ao/main.o" "$ao/scale_h.o" -L"$ao" -lsaxpy -L"$libdir" -lfusrt -Wl,-rpath,"$libdir"; then
	ar t "$ao/libsaxpy.a" | grep -qx 'object.o' && ok || bad "aot: libsaxpy.a does not hold the object"
fi
# fusc checks the options of --emit=obj
"$FUSC" examples/saxpy.fus --emit=cuda --arch=sm_80,sm_90 -o "$ao/x.cu" 2>"$ao/err"
[ $? -eq 2 ] && grep -q 'a list of --arch is for --emit=obj' "$ao/err" && ok ||
	bad "aot: --arch=sm_80,sm_90 with --emit=cuda was not refused"
"$FUSC" examples/saxpy.fus --emit=obj -o - 2>"$ao/err"
[ $? -eq 2 ] && grep -q 'not standard output' "$ao/err" && ok || bad "aot: --emit=obj -o - was not refused"
"$FUSC" examples/saxpy.fus --emit=obj -o "$ao/x.h" 2>"$ao/err"
[ $? -eq 2 ] && grep -q "name the .o (-o $ao/x.o)" "$ao/err" && [ ! -e "$ao/x.h" ] && ok ||
	bad "aot: --emit=obj -o x.h (the object and its header one file) was not refused"

# ---- JIT: make install, then pkg-config fusrt ----
prefix="$tmp/prefix"
# The GPU machine has no flex/bison/check: there the prebuilt build/ is installed as it is.
noregen=
if ! command -v bison >/dev/null || ! command -v flex >/dev/null; then
	noregen="-o deps -o build/fus.tab.c -o build/fus.tab.h -o build/fus.lex.c -o build/fus.lex.h"
fi

# ---- GNU install directories, DESTDIR and uninstall (issue 15 item 2) ----
dest="$tmp/destdir"
if step "make install DESTDIR prefix=/usr" $MAKE --no-print-directory $noregen install \
	DESTDIR="$dest" prefix=/usr mandir=/usr/share/man; then
	ver=$(sed -n 's/^#define FUSRT_VERSION_[A-Z]* \([0-9]*\)$/\1/p' include/fusrt.h | paste -sd.)
	(cd "$dest" && find . ! -type d | sort) > "$tmp/installed"
	printf '%s\n' ./usr/bin/fusc ./usr/include/fusrt.h ./usr/lib/libfusrt.a ./usr/lib/libfusrt.so \
		./usr/lib/libfusrt.so.0 ./usr/lib/libfusrt.so.$ver ./usr/lib/pkgconfig/fusrt.pc \
		./usr/lib/cmake/Fusc/FuscConfig.cmake ./usr/lib/cmake/Fusc/FuscConfigVersion.cmake \
		./usr/share/man/man1/fusc.1 | sort > "$tmp/expected"
	cmp -s "$tmp/installed" "$tmp/expected" && ok ||
		{ bad "install: DESTDIR=... prefix=/usr installed other files"; diff "$tmp/expected" "$tmp/installed"; }
	grep -qx 'libdir=/usr/lib' "$dest/usr/lib/pkgconfig/fusrt.pc" && ok ||
		bad "install: fusrt.pc does not name libdir=/usr/lib (the DESTDIR leaked into it?)"
	# The CMake package: find_package(Fusc) and fusc_add_library in examples/cmake, built
	# against the staged tree (CMake's CUDA language; no GPU needed to build).
	if ! command -v cmake >/dev/null; then
		bad "cmake: not installed (make check installs it)"
	elif step "examples/cmake: configure" cmake -S examples/cmake -B "$tmp/cmake" \
		-DCMAKE_PREFIX_PATH="$dest/usr" -DCMAKE_CUDA_COMPILER="$CUDA/bin/nvcc" &&
	     step "examples/cmake: build" cmake --build "$tmp/cmake"; then
		"$tmp/cmake/demo" > "$tmp/run" 2>&1
		grep -q '^ex_saxpy: ex_saxpy: x is a null pointer' "$tmp/run" && ok ||
			{ bad "examples/cmake: demo did not reach its prefixed launcher"; cat "$tmp/run"; }
	fi
	if step "make uninstall" $MAKE --no-print-directory $noregen uninstall DESTDIR="$dest" prefix=/usr; then
		left=$(cd "$dest" && find . ! -type d)
		[ -z "$left" ] && ok || bad "uninstall left: $left"
	fi
fi
if step "make install PREFIX=$prefix" $MAKE --no-print-directory $noregen install PREFIX="$prefix"; then
	for link in shared static; do
		out="$tmp/jit-$link"
		# PKG_CONFIG_PATH empty: the build must find fusrt through PREFIX alone
		if step "embed/jit ($link): build" env PKG_CONFIG_PATH= $MAKE -C examples/embed/jit \
			PREFIX="$prefix" OUT="$out" LINK=$link CUDA="$CUDA"; then
			runs "embed/jit ($link): jit_demo" "$out/jit_demo"
			grep -q '^compiling broken.fus: FUSRT_ERR_COMPILE$' "$tmp/run" && ok ||
				bad "embed/jit ($link): a compile error was not reported as FUSRT_ERR_COMPILE"
		fi
	done
	# Without a driver libfusrt says so and the program skips (FUSRT_LIBCUDA simulates it).
	if [ -x "$tmp/jit-shared/jit_demo" ]; then
		FUSRT_LIBCUDA=/nonexistent/libcuda.so.1 "$tmp/jit-shared/jit_demo" >"$tmp/run" 2>&1
		rc=$?
		if [ $rc -eq 77 ] && grep -q '^skipped: FUSRT_ERR_NO_DRIVER: no CUDA driver' "$tmp/run"; then ok
		else bad "embed/jit: without a driver: exit $rc, expected 77 and the libfusrt error"
			sed 's/^/    /' "$tmp/run" | tail -n 5; fi
	fi
fi
# the examples' own folders stay clean (everything went to $tmp)
[ ! -e examples/embed/nvcc/build ] && [ ! -e examples/embed/jit/build ] && ok ||
	echo "note: examples/embed/*/build exists from a manual build (ignored by git)"

[ $skip -gt 0 ] && skipped=", $skip skipped (no CUDA device)" || skipped=
echo "embed: $pass passed, $fail failed$skipped"
[ $fail -eq 0 ]
