#!/usr/bin/env python3
"""Experiment schedules for issue 14 (helper gemm2): hgemm tiles written out as .fus files.
gen.py OUTDIR writes one file per variant; the names say BM x BN x BK, stages, copy mode."""
import sys

def hgemm(name, bm, bn, bk, stages, copy="vec", cdt="f32"):
    wm, wn = bm // 2, bn // 2
    mo = wm > 16
    m16 = "m16" if mo else "mw"
    L = []
    a = L.append
    a("fusion %s(A: f16[M, K], B: f16[K, N]) -> (C: %s[M, N]) {" % (name, cdt))
    a("  C[i, j] = sum(k: A[i, k] * B[k, j]);")
    a("}")
    a("schedule %s {" % name)
    a("  C_acc = C.cache_before(local);")
    a("  A_smem = A.cache_after(shared);")
    a("  B_smem = B.cache_after(shared);")
    for t in ("C", "C_acc"):
        if t == "C":
            a("  C.split(i, %d) -> (bi, ii);" % bm)
            a("  C.split(j, %d) -> (bj, ji);" % bn)
        else:
            a("  C_acc.compute_at(C, bj);")
        a("  %s.split(ii, %d) -> (wy, mw);" % (t, wm))
        a("  %s.split(ji, %d) -> (wx, nw);" % (t, wn))
        if mo:
            a("  %s.split(mw, 16) -> (mo, m16);" % t)
        a("  %s.split(nw, 8) -> (no, n8);" % t)
        if t == "C_acc":
            a("  C_acc.split(k, %d) -> (ko, kr);" % bk)
            a("  C_acc.split(kr, 16) -> (ks, k16);")
            a("  C_acc.reorder(ko, wy, wx, ks, %sno, %s, n8, k16);" % ("mo, " if mo else "", m16))
        else:
            a("  C.reorder(bi, bj, wy, wx, %sno, %s, n8);" % ("mo, " if mo else "", m16))
            a("  C.bind(bi, blockIdx.y);")
            a("  C.bind(bj, blockIdx.x);")
        a("  %s.bind(wy, threadIdx.z);" % t)
        a("  %s.bind(wx, threadIdx.y);" % t)
        if t == "C":
            a("  C.fragment(%s, n8);" % m16)
            a("  C.vectorize(n8_c);")
        else:
            a("  C_acc.mma(m16n8k16, ldmatrix);")
            a("  C_acc.unroll(ks);")
        if mo:
            a("  %s.unroll(mo);" % t)
        a("  %s.unroll(no);" % t)
    for s, row, col in (("A_smem", "ii", "kr"), ("B_smem", "kr", "ji")):
        a("  %s.compute_at(C_acc, ko);" % s)
        if copy == "vec":
            a("  %s.split(%s, 8) -> (kc, v);" % (s, col))
            a("  %s.merge(%s, kc) -> e;" % (s, row))
        else:
            a("  %s.merge(%s, %s) -> e;" % (s, row, col))
        a("  %s.split(e, 128) -> (u, tl);" % s)
        a("  %s.split(tl, 32) -> (tw, tx);" % s)
        a("  %s.split(tw, 2) -> (tz, ty);" % s)
        a("  %s.bind(tz, threadIdx.z);" % s)
        a("  %s.bind(ty, threadIdx.y);" % s)
        a("  %s.bind(tx, threadIdx.x);" % s)
        a("  %s.unroll(u);" % s)
        if copy == "vec":
            a("  %s.vectorize(v);" % s)
            a("  %s.cp_async(cg);" % s)
        a("  %s.stages(%d);" % (s, stages))
    a("  A_smem.pad(8, %d);" % bk)
    a("  B_smem.pad(8, %d);" % bn)
    a("}")
    return "\n".join(L) + "\n"

VARIANTS = [
    # M <= 64: more blocks, deeper pipelines
    ("h64x128x32s3", 64, 128, 32, 3, "vec"),
    ("h64x64x32s4", 64, 64, 32, 4, "vec"),
    ("h64x64x64s4", 64, 64, 64, 4, "vec"),
    ("h64x32x32s6", 64, 32, 32, 6, "vec"),
    ("h64x32x64s4", 64, 32, 64, 4, "vec"),
    ("h64x32x128s4", 64, 32, 128, 4, "vec"),
    # unaligned sizes: plain copies, lanes along contiguous elements
    ("h128x128x32s3_plain", 128, 128, 32, 3, "plain"),
    ("h128x128x32s2_plain", 128, 128, 32, 2, "plain"),
    ("h128x128x32s3_vecplain", 128, 128, 32, 3, "vecplain"),
]

if __name__ == "__main__":
    out = sys.argv[1]
    for n, bm, bn, bk, st, cp in VARIANTS:
        c = "vec" if cp == "vec" else cp
        text = hgemm(n, bm, bn, bk, st, "vec" if cp == "vec" else "plain")
        if cp == "vecplain":  # the scalar kernel's mapping: 8 consecutive elements per thread
            text = hgemm(n, bm, bn, bk, st, "vec").replace("  A_smem.vectorize(v);\n  A_smem.cp_async(cg);\n", "  A_smem.unroll(v);\n").replace("  B_smem.vectorize(v);\n  B_smem.cp_async(cg);\n", "  B_smem.unroll(v);\n")
        open("%s/%s.fus" % (out, n), "w").write(text)
