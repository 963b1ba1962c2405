#!/usr/bin/env python3
"""bench.py: fusc's kernels against PyTorch eager, torch.compile and a device-to-device copy,
all in one run on one GPU (`make bench` on the device).

fusc's numbers come from `fusc run FILE --dims ... --bench --no-reference` (JIT through
libfusrt), after a checked `fusc run` of the same file against the reference interpreter at a
smaller size (the CPU reference at 2^28 elements would take minutes); the peers are timed here with CUDA events
(median of many runs after warm-up) on pseudo-random inputs of the same sizes. Bandwidth counts
each input read once and each output written once, for every column. GEMMs (the gemm suite)
get their own table in TFLOP/s (2 M N K over the median time) against torch.mm with TF32 off.
--suite pointwise|reduce|gemm|all picks the cases (default all). Prints one table; with
--markdown it prints it as a Markdown table for bench/RESULTS.md.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

FUSC = os.environ.get("FUSC", "build/fusc")


def median_ms(fn, warmup=10, iters=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def rand(shape, dtype):
    return (torch.rand(shape, device="cuda", dtype=torch.float32) * 2 - 1 + 1e-3).to(dtype)


# Each case: label, .fus file, dims, a function making the peer's inputs and the peer's
# computation, and the bytes moved.
def saxpy_peer(n):
    x, y = rand(n, torch.float32), rand(n, torch.float32)
    z = torch.empty_like(x)
    return lambda: torch.add(y, x, alpha=1.75, out=z), lambda x, y: 1.75 * x + y, (x, y), 12 * n


def gelu_peer(n):
    x = rand(n, torch.float32)
    return (lambda: F.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"),
            (x,), 8 * n)


def bias_gelu_peer(m, n):
    x, b = rand((m, n), torch.float32), rand(n, torch.float32)
    return lambda: F.gelu(x + b), lambda x, b: F.gelu(x + b), (x, b), 8 * m * n + 4 * n


def half_peer(n):
    x, y = rand(n, torch.float16), rand(n, torch.float16)
    f = lambda x, y: torch.tanh(1.5 * x) + y * y
    return lambda: f(x, y), f, (x, y), 6 * n


N28 = 1 << 28
# label, peer key (cases with one key share the peers' timings), .fus file, benchmark dims,
# checked dims, peer factory.
CASES = [
    ("saxpy f32 2^28 (manual)", "saxpy", "examples/saxpy.fus", f"N={N28}", "N=4000004",
     lambda: saxpy_peer(N28)),
    ("saxpy f32 2^28 (auto)", "saxpy", "bench/pointwise/saxpy_auto.fus", f"N={N28}", "N=4000004",
     lambda: saxpy_peer(N28)),
    ("gelu f32 2^28 (auto)", "gelu", "examples/gelu_auto.fus", f"N={N28}", "N=4000004",
     lambda: gelu_peer(N28)),
    ("bias+gelu 16384x8192 (manual)", "bias_gelu", "examples/bias_gelu.fus", "M=16384,N=8192",
     "M=515,N=8192", lambda: bias_gelu_peer(16384, 8192)),
    ("bias+gelu 16384x8192 (auto)", "bias_gelu", "bench/pointwise/bias_gelu_auto.fus",
     "M=16384,N=8192", "M=515,N=8192", lambda: bias_gelu_peer(16384, 8192)),
    ("f16 tanh+sq 2^28 (manual)", "half", "examples/half_scale.fus", f"N={N28}", "N=4000008",
     lambda: half_peer(N28)),
    ("f16 tanh+sq 2^28 (auto)", "half", "bench/pointwise/half_scale_auto.fus", f"N={N28}",
     "N=4000008", lambda: half_peer(N28)),
]


def row_sum_peer(m, n):
    x = rand((m, n), torch.float32)
    f = lambda x: x.sum(dim=1)
    return lambda: f(x), f, (x,), 4 * m * n + 4 * m


def softmax_peer(m, n):
    x = rand((m, n), torch.float32)
    f = lambda x: torch.softmax(x, dim=1)
    return lambda: f(x), f, (x,), 8 * m * n


def layernorm_peer(m, n):
    x, g, b = rand((m, n), torch.float32), rand(n, torch.float32), rand(n, torch.float32)
    f = lambda x, g, b: F.layer_norm(x, (n,), g, b, 1e-5)
    return lambda: f(x, g, b), f, (x, g, b), 8 * m * n + 8 * n


# A GEMM peer returns a fifth item, its floating-point operations: its table reports TFLOP/s.
# torch.mm is cuBLAS SGEMM in full f32: TF32 is turned off.
def gemm_peer(m, n, k):
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = rand((m, k), torch.float32), rand((k, n), torch.float32)
    return lambda: torch.mm(a, b), torch.mm, (a, b), 4 * (m * k + k * n + m * n), 2 * m * n * k


# The reduction suite: f32 rows of 4096 and 1024 elements; the manual examples have a
# symbolic row, the automatic ones a constant row (so the scheduler may keep it in registers).
REDUCE_CASES = []
for _m, _n in ((16384, 4096), (65536, 1024)):
    _size = f"{_m}x{_n}"
    _dims, _check = f"M={_m},N={_n}", f"M=67,N={_n}"
    REDUCE_CASES += [
        (f"row sum {_size} (manual)", f"row_sum_{_size}", "examples/reduce/row_sum.fus", _dims,
         _check, lambda m=_m, n=_n: row_sum_peer(m, n)),
        (f"row sum {_size} (auto)", f"row_sum_{_size}", f"bench/reduce/row_sum_auto_{_n}.fus",
         f"M={_m}", "M=67", lambda m=_m, n=_n: row_sum_peer(m, n)),
        (f"softmax {_size} (manual)", f"softmax_{_size}", "examples/reduce/softmax.fus", _dims,
         _check, lambda m=_m, n=_n: softmax_peer(m, n)),
        (f"softmax {_size} (auto)", f"softmax_{_size}", f"bench/reduce/softmax_auto_{_n}.fus",
         f"M={_m}", "M=67", lambda m=_m, n=_n: softmax_peer(m, n)),
        (f"layernorm {_size} (manual)", f"layernorm_{_size}", "examples/reduce/layernorm.fus",
         _dims, _check, lambda m=_m, n=_n: layernorm_peer(m, n)),
        (f"layernorm {_size} (auto)", f"layernorm_{_size}",
         f"bench/reduce/layernorm_auto_{_n}.fus", f"M={_m}", "M=67",
         lambda m=_m, n=_n: layernorm_peer(m, n)),
        (f"layernorm {_size} (manual, welford)", f"layernorm_{_size}",
         "examples/reduce/layernorm_welford.fus", _dims, _check,
         lambda m=_m, n=_n: layernorm_peer(m, n)),
    ]
# the persistent Welford layernorm has a constant row of 1024
REDUCE_CASES.append(
    ("layernorm 65536x1024 (persistent, welford)", "layernorm_65536x1024",
     "examples/reduce/layernorm_welford_1024.fus", "M=65536", "M=67",
     lambda: layernorm_peer(65536, 1024)))

GEMM_CASES = [
    ("gemm f32 4096^3 (manual)", "gemm_4096", "examples/gemm/gemm_f32.fus",
     "M=4096,N=4096,K=4096", "M=200,N=260,K=300", lambda: gemm_peer(4096, 4096, 4096)),
]

SUITES = {"pointwise": CASES, "reduce": REDUCE_CASES, "gemm": GEMM_CASES}


def fusc(args):
    p = subprocess.run([FUSC, "run"] + args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def run_fusc(path, dims, check_dims):
    rc, out = fusc([path, "--dims", check_dims])
    if rc != 0 or "PASS" not in out:
        print(f"fusc run {path} --dims {check_dims} failed (exit {rc}):\n{out}", file=sys.stderr)
        return None, False
    rc, out = fusc([path, "--dims", dims, "--bench", "--no-reference"])
    m = re.search(r"bench: median ([0-9.]+) ms", out)
    if rc != 0 or not m:
        print(f"fusc run {path} --bench failed (exit {rc}):\n{out}", file=sys.stderr)
        return None, False
    return float(m.group(1)), True


def copy_ms(nbytes):
    half = nbytes // 2
    src = torch.empty(half, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1)
    return median_ms(lambda: dst.copy_(src))


def print_gemm(rows, markdown):
    """GEMMs in TFLOP/s: 2 M N K operations over the median time (fusc run --bench prints the
    time only)."""
    tflops = lambda flops, ms: flops / ms / 1e9 if ms else float("nan")
    head = ["gemm case", "fusc ms", "fusc TFLOP/s", "torch.mm ms", "torch.mm TFLOP/s",
            "fusc/torch.mm", "compile ms", "compile TFLOP/s"]
    lines = []
    for label, tf, flops, te, tc, _ in rows:
        f = [f"{tf:.3f}", f"{tflops(flops, tf):.1f}"] if tf else ["FAIL", ""]
        r = f"{te / tf:.2f}" if tf else ""
        lines.append([label] + f + [f"{te:.3f}", f"{tflops(flops, te):.1f}", r, f"{tc:.3f}",
                                    f"{tflops(flops, tc):.1f}"])
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for l in lines:
            print("| " + " | ".join(l) + " |")
        return
    w = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    for l in lines:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(l)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--suite", default="all", choices=["pointwise", "reduce", "gemm", "all"])
    ap.add_argument("--no-compile", action="store_true",
                    help="skip torch.compile (its compile time dominates short device leases)")
    args = ap.parse_args()
    rows = []
    gemm_rows = []
    failed = 0
    peers = {}
    cases = [c for name, cs in SUITES.items() if args.suite in (name, "all") for c in cs]
    for label, key, path, dims, check_dims, peer in cases:
        if args.only and args.only not in label:
            continue
        t_fusc, ok = run_fusc(path, dims, check_dims)
        failed += 0 if ok else 1
        if key not in peers:
            eager, fn, inputs, nbytes, *flops = peer()
            t_eager = median_ms(eager)
            compiled = None if args.no_compile else torch.compile(fn)
            t_comp = float("nan") if args.no_compile else median_ms(lambda: compiled(*inputs))
            t_copy = None if flops else copy_ms(nbytes)
            peers[key] = (flops[0] if flops else nbytes, t_eager, t_comp, t_copy)
            del inputs, eager, compiled
            torch.cuda.empty_cache()
        (gemm_rows if peers[key][3] is None else rows).append((label, t_fusc) + peers[key])
        print(f"# {label}: fusc {t_fusc} ms, peers {peers[key][1:]}", flush=True)

    gbs = lambda nbytes, ms: nbytes / ms / 1e6 if ms else float("nan")
    head = ["case", "fusc ms", "fusc GB/s", "copy GB/s", "fusc/copy", "eager ms",
            "eager/fusc", "compile ms", "compile/fusc"]
    lines = []
    for label, tf, nb, te, tc, tcp in rows:
        if tf is None:
            lines.append([label, "FAIL", "", f"{gbs(nb, tcp):.0f}", "", f"{te:.3f}", "", f"{tc:.3f}", ""])
            continue
        lines.append([label, f"{tf:.3f}", f"{gbs(nb, tf):.0f}", f"{gbs(nb, tcp):.0f}",
                      f"{tcp / tf:.3f}", f"{te:.3f}", f"{te / tf:.2f}", f"{tc:.3f}", f"{tc / tf:.2f}"])
    if not lines:
        pass
    elif args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for l in lines:
            print("| " + " | ".join(l) + " |")
    else:
        w = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
        print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
        for l in lines:
            print("  ".join(c.ljust(w[i]) for i, c in enumerate(l)))
    if gemm_rows:
        print_gemm(gemm_rows, args.markdown)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
