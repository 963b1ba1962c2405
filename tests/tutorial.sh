#!/bin/sh
# Runs the commands of docs/tutorial.md: its ```sh blocks in order, in one shell, in an empty
# folder, with the folder of FUSC first on PATH. A block whose first line is "# needs a GPU"
# runs only when a CUDA device is present (nvidia-smi lists one). Prints "tutorial: N blocks
# passed, N skipped" and exits 1 at the first block that fails, showing it and its output.
FUSC=${FUSC:-build/fusc}
FUSC=$(cd "$(dirname "$FUSC")" && pwd)/$(basename "$FUSC")
doc=$(pwd)/docs/tutorial.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PATH=$(dirname "$FUSC"):$PATH
export PATH
gpu=0
nvidia-smi -L 2>/dev/null | grep -q GPU && gpu=1
# one file per block
awk -v d="$tmp" '/^```sh$/ { n++; f = sprintf("%s/block%02d.sh", d, n); inb = 1; next }
                 /^```$/ && inb { inb = 0; close(f); next }
                 inb { print > f }' "$doc"
pass=0
skip=0
mkdir "$tmp/work"
for b in "$tmp"/block*.sh; do
	if head -n 1 "$b" | grep -q '^# needs a GPU' && [ $gpu = 0 ]; then
		skip=$((skip + 1))
		continue
	fi
	if ! (cd "$tmp/work" && set -e && . "$b") > "$tmp/out" 2>&1; then
		echo "FAIL: docs/tutorial.md, block $(basename "$b" .sh):"
		sed 's/^/  | /' "$b"
		sed 's/^/  > /' "$tmp/out" | tail -n 30
		exit 1
	fi
	pass=$((pass + 1))
done
[ $pass -gt 0 ] || { echo "tutorial: no blocks found in $doc"; exit 1; }
echo "tutorial: $pass blocks passed, $skip skipped (no CUDA device)"
