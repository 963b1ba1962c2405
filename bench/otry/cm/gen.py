#!/usr/bin/env python3
"""gen.py (colmid, issue 13): writes the trial schedules bench/otry/cm/*.fus of the outer
(column) and middle-axis sums, the automatic schedule's shape with its numbers changed:
vec columns per thread, lanes threads over vectors, ty rows, gy blocks on blockIdx.y, unroll
rows a step, optionally x.evict_first(). Names: {c,m}{f32,f16,bf16}_v{vec}x{lanes}y{ty}g{gy}u{unroll}[_ef].
Usage: python3 bench/otry/cm/gen.py  (rewrites the files listed in TRIALS)"""
import os

D = os.path.dirname(os.path.abspath(__file__))
CAST = {"f32": "x[{}]", "f16": "f32(x[{}])", "bf16": "f32(x[{}])"}


def program(kind, dt, vec, lanes, ty, gy, unroll, ef):
    if kind == "c":
        head = (f"fusion col_sum(x: {dt}[M, N]) -> (s: f32[N]) {{\n"
                f"  s[j] = sum(i: {CAST[dt].format('i, j')});\n}}\n")
        col, row, bx = "j", "i", "hx"
    else:
        head = (f"fusion mid_sum(x: {dt}[B, T, H]) -> (s: f32[B, H]) {{\n"
                f"  s[b, h] = sum(t: {CAST[dt].format('b, t, h')});\n}}\n")
        col, row, bx = "h", "t", "bx"
    d = []
    if ef:
        d.append("x.evict_first();")
    d.append(f"s.split({col}, {lanes * vec}) -> (hx, tx);")
    if kind == "m":
        d.append("s.merge(b, hx) -> bx;")
    d.append(f"s.split({row}, {ty}) -> (ro, ty);")
    r = "ro"
    if gy > 1:
        d.append(f"s.split(ro, {gy}) -> (rq, by);")
        r = "rq"
    d.append(f"s.split({r}, {unroll}) -> (rr, u);")
    d.append("s.rfactor(rr, u) -> s_part;")
    d.append("s_part_acc = s_part.cache_before(local);")
    at = "by" if gy > 1 else bx
    d.append(f"s.reorder({bx}, {'by, ' if gy > 1 else ''}tx, ty);")
    d.append(f"s.bind({bx}, blockIdx.x);")
    d.append("s.bind(tx, threadIdx.x);")
    if gy > 1:
        d.append("s.bind(by, blockIdx.y);")
    d += [f"s_part.compute_at(s, {at});", "s_part.memory(shared);",
          f"s_part.split(tx, {vec}) -> (tn, jv);", "s_part.reorder(ty, tn, jv);",
          "s_part.merge(ty, tn) -> th;", "s_part.bind(th, threadIdx.x);",
          "s_part_acc.compute_at(s_part, th);", "s_part_acc.reorder(rr, u, jv);",
          "s_part_acc.unroll(u);", "s_part_acc.vectorize(jv);"]
    name = "col_sum" if kind == "c" else "mid_sum"
    return head + f"schedule {name} {{\n" + "".join(f"  {x}\n" for x in d) + "}\n"


# (kind, dtype, vec, lanes, ty, gy, unroll, evict_first)
TRIALS = [
    # f16 column sum 32768x4096 (users col_sum_f16; the bf16 mean's first segment)
    ("c", "f16", 4, 16, 16, 16, 4, False),   # the automatic N <= 4096 variant
    ("c", "f16", 8, 16, 16, 33, 4, False),   # 16-byte loads: 32 x 33 blocks
    ("c", "f16", 8, 16, 16, 16, 4, False),
    ("c", "f16", 8, 16, 16, 33, 8, False),
    ("c", "f16", 8, 32, 8, 33, 4, False),    # a warp over 512 bytes of one row
    ("c", "bf16", 8, 16, 16, 33, 4, False),
    ("c", "f16", 8, 16, 16, 33, 4, True),
    # f32 middle-axis sum 64x512x1024
    ("m", "f32", 4, 16, 16, 1, 4, False),    # the automatic T <= 512 variant
    ("m", "f32", 4, 16, 16, 2, 4, False),
    ("m", "f32", 4, 16, 8, 2, 4, False),
    ("m", "f32", 8, 16, 8, 2, 4, False),
]


def label(t):
    kind, dt, vec, lanes, ty, gy, unroll, ef = t
    return f"{kind}{dt}_v{vec}x{lanes}y{ty}g{gy}u{unroll}" + ("_ef" if ef else "")


if __name__ == "__main__":
    for t in TRIALS:
        with open(os.path.join(D, label(t) + ".fus"), "w") as f:
            f.write(f"// colmid trial {label(t)} (bench/otry/cm/gen.py; issue 13)\n" + program(*t))
        print(label(t))
