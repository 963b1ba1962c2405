#!/usr/bin/env python3
"""cmtime.py (colmid, issue 13): times outer (column) and middle-axis sums through their
generated launchers, the way bench.py's timer does (a 256 MB buffer zeroed before every call,
CUDA events, median: "zero"), the same zeroing then a 256 MB read (the dirty lines written
back before the call: "clean") and back to back ("none"), checked first against a float64
reference. Programs: a column sum (x: DT[M, N]) -> s: f32[N] or a middle-axis sum (x: DT[B, T, H])
-> s: f32[B, H], by the number of dims given (the fusion and x's dtype from the file).
Usage: python3 bench/otry/cm/cmtime.py M=32768,N=4096 FILE... [-- DIMS FILE...]"""
import ctypes
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch

T0 = time.time()
OUT = "/tmp/cmtime"
os.makedirs(OUT, exist_ok=True)
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

jobs, dims = [], None
for a in sys.argv[1:]:
    if "=" in a:
        dims = {k: int(v) for k, v in (p.split("=") for p in a.split(","))}
    elif a != "--":
        jobs.append((a, dict(dims)))


def build(job):
    fus, d = job
    text = open(fus).read()
    m = re.search(r"fusion (\w+)\(x: (\w+)\[", text)
    stem = os.path.join(OUT, re.sub(r"\W+", "_", fus))
    r = subprocess.run(["build/fusc", fus, "-o", stem + ".cu"], capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run(["nvcc", "-O3", "-std=c++17", "-arch=sm_90", "-shared", "-Xcompiler",
                            "-fPIC", "-o", stem + ".so", stem + ".cu"], capture_output=True, text=True)
    return fus, d, m.group(1), m.group(2), (stem + ".so" if r.returncode == 0 else None), r.stderr[-400:]


with ThreadPoolExecutor(16) as ex:
    built = list(ex.map(build, jobs))
print(f"# built in {time.time() - T0:.1f} s", flush=True)

dev = torch.device("cuda")
cache = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device=dev)
other = torch.ones(64 * 1024 * 1024, dtype=torch.int32, device=dev)
sink = torch.empty(1, dtype=torch.int64, device=dev)


def timed(fn, mode, reps=50):
    for _ in range(5):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    for a, b in ev:
        if mode in ("zero", "clean"):
            cache.zero_()
        if mode == "clean":
            sink.copy_(other.sum())
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return t[len(t) // 2]


stream = torch.cuda.current_stream().cuda_stream
inputs = {}
MODES = ("zero", "clean", "none")
print("file | dims | GB/s " + " | ".join(MODES) + " | us zero")
for fus, d, fusion, dt, so, err in built:
    if not so:
        print(fus, "BUILD FAIL", err.replace("\n", " "))
        continue
    key = (dt,) + tuple(d.items())
    if key not in inputs:
        x = torch.randn(tuple(d.values()), device=dev).to(DT[dt])
        inputs[key] = (x, x.double().sum(dim=0 if len(d) == 2 else 1).float())
    x, ref = inputs[key]
    s = torch.full_like(ref, float("nan"))
    f = getattr(ctypes.CDLL(so), fusion)
    f.restype = ctypes.c_int
    args = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(s.data_ptr())] + \
        [ctypes.c_int64(v) for v in d.values()] + [ctypes.c_void_p(stream)]
    rc = f(*args)
    torch.cuda.synchronize()
    e = float((s.double() - ref.double()).norm() / ref.double().norm())
    if rc or not e < 1e-4:
        print(fus, "WRONG rc", rc, "err", e)
        continue
    nb = x.numel() * x.element_size() + s.numel() * 4
    ms = {m: timed(lambda: f(*args), m) for m in MODES}
    print(f"{fus} | {'x'.join(map(str, d.values()))} | " +
          " | ".join(f"{nb / ms[m] / 1e6:.0f}" for m in MODES) + f" | {ms['zero'] * 1e3:.1f}",
          flush=True)
print(f"# cmtime {time.time() - T0:.0f} s")
