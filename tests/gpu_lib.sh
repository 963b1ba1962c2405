# Helpers shared by tests/gpu.sh and tests/gemm_sweep.sh (sourced; FUSC set by the caller).

# fusions FILE: one line per fusion, "NAME SYM... ;SYM=K ...;[fixed]" (size symbols in launcher
# order, the multiples the launcher requires, "fixed" when a tensor also has a constant
# dimension), from the generated C header.
fusions() {
	"$FUSC" "$1" --emit=header -o - 2>/dev/null | awk '
		/^\/\*/ { req = ""; fixed = ""; text = "" }
		/^ \* fusion / && /[[,] *[0-9]+ *[],]/ { fixed = "fixed" }
		/^ \*/ { t = $0; sub(/^ \* ?/, "", t); text = text " " t }
		# the sizes the last kernel of the chain needs as multiples: after its "Requires:"
		# (one kernel) or "which requires" (the last of the Variants)
		/^ \*\// {
			s = text
			while ((i = index(s, "equires")) > 0)
				s = substr(s, i + 7)
			if (s == text)
				s = ""
			while (match(s, /[A-Za-z_][A-Za-z0-9_]* (is )?a multiple of [0-9]+/)) {
				m = substr(s, RSTART, RLENGTH); n = split(m, w, " ")
				req = req " " w[1] "=" w[n]
				s = substr(s, RSTART + RLENGTH)
			}
		}
		/^cudaError_t / {
			name = $2; sub(/\(.*/, "", name)
			syms = ""; s = $0
			while (match(s, /int64_t [A-Za-z_][A-Za-z0-9_]*/)) {
				syms = syms " " substr(s, RSTART + 8, RLENGTH - 8)
				s = substr(s, RSTART + RLENGTH)
			}
			print name syms " ;" req ";" fixed
		}'
}

# dims "SYM..." "REQ" "V1,V2,...": "--dims A=V1,B=V2" (values reused cyclically, rounded up
# to the required multiples), or nothing without size symbols.
dims() {
	echo "$1" "|" "$2" "|" "$3" | awk '{
		ns = 0; i = 1
		while ($i != "|") syms[++ns] = $(i++)
		i++
		while ($i != "|") {
			# a symbol may be required to be a multiple of several K: keep their lcm
			split($(i++), kv, "="); m = mult[kv[1]] + 0; k = kv[2] + 0
			if (m > 0) { a = m; b = k; while (b) { t = a % b; a = b; b = t }; k = m / a * k }
			mult[kv[1]] = k
		}
		nv = split($(i + 1), vals, ",")
		out = ""
		for (k = 1; k <= ns; k++) {
			v = vals[(k - 1) % nv + 1]
			m = mult[syms[k]]
			if (m > 1 && v % m) v += m - v % m
			out = out (k > 1 ? "," : "") syms[k] "=" v
		}
		if (ns) print "--dims " out
	}'
}

# require_device NAME DIR: exits 77 (skipped) when `fusc run` finds no CUDA device (DIR: scratch)
require_device() {
	printf 'fusion p(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i];\n}\n' >"$2/probe.fus"
	"$FUSC" run "$2/probe.fus" --dims N=1 >"$2/probe.out" 2>&1
	if grep -q 'no CUDA device' "$2/probe.out"; then
		cat "$2/probe.out"
		echo "$1: skipped: no CUDA device"
		exit 77
	fi
}
