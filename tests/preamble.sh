# preamble.sh: sourced by tests/golden.sh. The device preamble (backend/preamble.cuh, from its
# first `// ---- ` banner on) goes into every generated .cu, section by section; the goldens
# (tests/golden/cuda/*.cu) keep only the banner lines of the sections a file uses.
#
#   strip_preamble CU        the .cu with each preamble section cut down to its banner line
#   expand_preamble GOLDEN   the golden with the sections put back (what fusc writes)
#   restrip_goldens          rewrites every golden .cu that still holds the whole preamble in
#                            the short form, after checking that expanding it again gives the
#                            file back byte for byte (so nothing but the preamble changes); run
#                            it after merging goldens made before the preamble moved:
#                            sh -c '. tests/preamble.sh && restrip_goldens'
# Both act only between the first banner and the first kernel (`extern "C" __global__`).
# Needs $top (the repository root); golden.sh sets it, restrip_goldens defaults to `pwd`.

strip_preamble() {
	awk '{ line[NR] = $0 }
	     !b && /^\/\/ ---- / { b = NR }
	     !e && /^extern "C" __global__/ { e = NR }
	     END {
		for (i = 1; i <= NR; i++)
			if (!b || !e || i < b || i >= e - 1 || line[i] ~ /^\/\/ ---- /)
				print line[i]
	     }' "$1"
}

# Sections: a banner line and the lines up to the next banner; all but the last end with the
# blank line that separates them, which goes out only between two sections.
expand_preamble() {
	awk -v pre="${top:-.}/backend/preamble.cuh" '
	BEGIN {
		n = 0
		while ((getline l < pre) > 0) {
			if (l ~ /^\/\/ ---- /) {
				if (n)
					sub(/\n$/, "", text[name[n]])
				name[++n] = l
				text[l] = l
			} else if (n) {
				text[name[n]] = text[name[n]] "\n" l
			}
		}
		if (!n) {
			print "expand_preamble: no section in " pre > "/dev/stderr"
			exit 2
		}
	}
	!done && /^extern "C" __global__/ { done = 1 }
	!done && ($0 in text) { if (sections++) print ""; print text[$0]; next }
	{ print }' "$1"
}

restrip_goldens() {
	top=${top:-$(pwd)}
	for f in "$top"/tests/golden/cuda/*.cu; do
		strip_preamble "$f" > "$f.short"
		if cmp -s "$f" "$f.short"; then
			rm -f "$f.short"  # already short
		elif expand_preamble "$f.short" | cmp -s - "$f"; then
			mv "$f.short" "$f"
			echo "restripped $f"
		else
			rm -f "$f.short"
			echo "$f: its preamble is not sections of backend/preamble.cuh; left as it is"
			return 1
		fi
	done
}
