#!/bin/sh
# Does a compile-time change leave the generated code alone? Compiles every .fus of the tree
# with two fusc binaries (`--emit=cuda -o -`, exit status appended) and compares the outputs
# byte for byte; exits non-zero on any difference. Opt-in, like bench/compile_time.sh.
# Usage: sh bench/same_cuda.sh OLD_FUSC NEW_FUSC [DIR]
#   e.g. git stash; make -j2 all; cp build/fusc /tmp/fusc.old; git stash pop; make -j2 all
#        sh bench/same_cuda.sh /tmp/fusc.old build/fusc
set -u
[ $# -ge 2 ] || { echo "usage: sh bench/same_cuda.sh OLD_FUSC NEW_FUSC [DIR]" >&2; exit 2; }
old=$1 new=$2 dir=${3:-$(mktemp -d)}
emit_all() {
	mkdir -p "$2"
	find . -name '*.fus' -not -path './build/*' | sort | while read -r f; do
		out=$2/$(echo "$f" | sed 's|^\./||; s|/|__|g').cu
		"$1" --emit=cuda -o - "$f" > "$out" 2>/dev/null
		echo "exit $?" >> "$out"
	done
}
emit_all "$old" "$dir/old"
emit_all "$new" "$dir/new"
n=$(ls "$dir/old" | wc -l)
ok=$(grep -l '^exit 0$' "$dir/old"/* | wc -l)
if diff -r "$dir/old" "$dir/new" > "$dir/diff"; then
	echo "same_cuda: $n programs ($ok compile), identical output"
else
	echo "same_cuda: outputs differ ($dir/diff):" >&2
	diff -rq "$dir/old" "$dir/new" >&2
	exit 1
fi
