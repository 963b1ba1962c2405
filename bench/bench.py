#!/usr/bin/env python3
"""bench.py: fusc's kernels against PyTorch eager, torch.compile and hand-written Triton
kernels, every contender timed the same way, on the same inputs, in one run on one GPU.

fusc is called through its generated launcher: `fusc FILE -o X.cu` writes the kernels and the
C launcher, `nvcc -shared` builds them into a library, ctypes calls the launcher with the
tensors' data_ptr() and the current stream. Every contender is timed by one timer,
triton.testing.do_bench (CUDA events, the L2 cache flushed before every call, no host sync
between calls), median. Before timing, each contender's output is checked against the same
PyTorch function run on float64 copies of the inputs (the fusc output is poisoned with NaN
first); a wrong or failed result is reported as FAIL and never timed.

Bandwidth counts each input read once and each output written once (GEMMs: TFLOP/s, 2 M N K
over the time). "fusc/best" is the best peer's time over fusc's (> 1: fusc is faster);
"fusc/copy" is fusc's GB/s over a torch clone of 1 GiB (the copy row). One machine-readable
`ROW ...` line per row, a Markdown table per suite (for bench/RESULTS.md) and the geometric
mean of fusc/best.

    python3 bench/bench.py --suite auto              # make bench SUITE=auto
    python3 bench/bench.py --suite pointwise,reduce  # default: pointwise,reduce,gemm
    python3 bench/bench.py --dry-run --suite all     # no GPU: fusc --emit=cuda, the launcher
                                                     # signatures and every case's arguments
"""
import argparse
import ctypes
import math
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as C  # noqa: E402

FUSC = os.environ.get("FUSC", "build/fusc")
NVCC = os.environ.get("NVCC", "nvcc")
ARCH = os.environ.get("BENCH_ARCH", "sm_90")

ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i32": 4, "i64": 8, "bool": 1}
# Norm-relative tolerance of an output, by its dtype (a case may set its own).
TOLERANCE = {"f16": 1e-2, "bf16": 1e-2, "f32": 1e-4, "f64": 1e-10}
DTYPE_NAMES = {"torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32",
               "torch.float64": "f64"}
PEERS = ("eager", "compile", "triton")


# ---- the fusion's signature and the launcher's prototype (no GPU, no PyTorch) -----------
class Tensor:
    """A parameter or output: name, dtype, dims (None for a scalar parameter or 0-d output)."""

    def __init__(self, name, dtype, dims):
        self.name, self.dtype, self.dims = name, dtype, dims

    def shape(self, sizes):
        return tuple(int(d) if d.isdigit() else sizes[d] for d in (self.dims or []))

    def nbytes(self, sizes):
        return math.prod(self.shape(sizes)) * ELEM_BYTES[self.dtype]


def strip_comments(text):
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


def split_top(text):
    """Splits on commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def parse_tensor(decl):
    m = re.fullmatch(r"(\w+)\s*:\s*(\w+)\s*(?:\[(.*)\])?", decl.strip(), flags=re.S)
    if not m or m.group(2) not in ELEM_BYTES:
        raise ValueError(f"cannot parse the declaration '{decl}'")
    dims = None if m.group(3) is None else [d.strip() for d in m.group(3).split(",")]
    return Tensor(m.group(1), m.group(2), dims)


def parse_fusions(text):
    """{name: (params, outputs)} of every fusion in a .fus text."""
    out = {}
    for m in re.finditer(r"\bfusion\s+(\w+)\s*\((.*?)\)\s*->\s*\((.*?)\)\s*\{",
                         strip_comments(text), flags=re.S):
        out[m.group(1)] = ([parse_tensor(p) for p in split_top(m.group(2))],
                           [parse_tensor(p) for p in split_top(m.group(3))])
    return out


def size_symbols(params, outputs):
    """The size symbols in order of first appearance (the launcher's order)."""
    syms = []
    for t in params + outputs:
        for d in t.dims or []:
            if not d.isdigit() and d not in syms:
                syms.append(d)
    return syms


CTYPES = {"float": ctypes.c_float, "double": ctypes.c_double, "int64_t": ctypes.c_int64,
          "int32_t": ctypes.c_int32, "bool": ctypes.c_bool, "uint16_t": ctypes.c_uint16,
          "cudaStream_t": ctypes.c_void_p}


def parse_prototype(header, name):
    """The launcher `cudaError_t NAME(...)` of a generated header: [(C type, arg name)]."""
    m = re.search(r"^cudaError_t\s+" + re.escape(name) + r"\s*\((.*?)\);", header,
                  flags=re.M | re.S)
    if not m:
        raise ValueError(f"no launcher 'cudaError_t {name}(...)' in the header")
    args = []
    for a in m.group(1).split(","):
        a = " ".join(a.split())
        am = re.fullmatch(r"(.*?[\s*])(\w+)", a)
        if not am:
            raise ValueError(f"cannot parse the launcher argument '{a}'")
        args.append((am.group(1).replace(" *", "*").strip(), am.group(2)))
    return args


def bind_launcher(proto, params, outputs):
    """How each launcher argument is filled: [(kind, name, ctype)], kind being 'tensor'
    (a data pointer), 'scalar' (a parameter's value), 'size' or 'stream'. Raises when the
    prototype and the signature disagree."""
    tensors = {t.name: t for t in params + outputs if t.dims is not None or t in outputs}
    scalars = {t.name: t for t in params if t.dims is None}
    syms = size_symbols(params, outputs)
    binding = []
    for ctype, name in proto:
        if ctype.endswith("*"):
            if name not in tensors:
                raise ValueError(f"launcher argument {ctype} {name} is no tensor of the fusion")
            binding.append(("tensor", name, ctypes.c_void_p))
        elif ctype == "cudaStream_t":
            binding.append(("stream", name, ctypes.c_void_p))
        elif name in scalars:
            if ctype not in CTYPES:
                raise ValueError(f"launcher argument {ctype} {name}: unknown C type")
            binding.append(("scalar", name, CTYPES[ctype]))
        elif name in syms and ctype == "int64_t":
            binding.append(("size", name, ctypes.c_int64))
        else:
            raise ValueError(f"launcher argument {ctype} {name} is neither a parameter nor a size")
    got = [n for _, n, _ in binding]
    want = [t.name for t in params + outputs] + syms
    if sorted(got[:-1]) != sorted(want) or binding[-1][0] != "stream":
        raise ValueError(f"launcher arguments {got} do not match the fusion's {want} + stream")
    return binding


# ---- arithmetic of the table ------------------------------------------------------------
def rate(amount, ms):
    """GB/s for bytes (or TFLOP/s for floating-point operations / 1e3) over milliseconds."""
    return amount / ms / 1e6 if ms and ms > 0 else None


def best_peer(peer_ms):
    """(name, ms) of the fastest peer that has a time, or (None, None)."""
    timed = [(ms, name) for name, ms in peer_ms.items() if isinstance(ms, float)]
    if not timed:
        return None, None
    ms, name = min(timed)
    return name, ms


def ratio(fusc_ms, best_ms):
    """fusc / best peer: > 1 when fusc is faster."""
    if not isinstance(fusc_ms, float) or not isinstance(best_ms, float) or fusc_ms <= 0:
        return None
    return best_ms / fusc_ms


def geomean(values):
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def slug(text):
    return re.sub(r"[^A-Za-z0-9.^x+-]+", "_", text).strip("_")


def fmt(v, digits=0):
    return "" if v is None else f"{v:.{digits}f}"


class Row:
    """One measured case: the fusc time (a float, or a string: FAIL ..., skipped), each
    peer's time (float, 'FAIL', 'n/a', 'skipped'), the bytes or flops, the copy rate."""

    def __init__(self, case, amount, fusc_ms, peer_ms, copy_gbs, note=""):
        self.case, self.amount, self.fusc_ms, self.peer_ms = case, amount, fusc_ms, peer_ms
        self.copy_gbs, self.note = copy_gbs, note

    @property
    def unit(self):
        return "TFLOP/s" if self.case.flops else "GB/s"

    def rate(self, ms):
        if not isinstance(ms, float):
            return None
        r = rate(self.amount, ms)
        return r / 1e3 if self.case.flops else r

    def best(self):
        return best_peer(self.peer_ms)

    def ratio(self):
        return ratio(self.fusc_ms, self.best()[1])

    def copy_fraction(self):
        f = self.rate(self.fusc_ms)
        return f / self.copy_gbs if f and self.copy_gbs and not self.case.flops else None

    def line(self):
        """The machine-readable line."""
        name, best_ms = self.best()
        u = "tflops" if self.case.flops else "gbs"
        status = "ok" if isinstance(self.fusc_ms, float) else slug(str(self.fusc_ms).split(":")[0])
        f = [f"ROW suite={self.case.suite}", f"name={slug(self.case.label)}",
             f"fusc_ms={fmt(self.fusc_ms if isinstance(self.fusc_ms, float) else None, 4) or '-'}",
             f"fusc_{u}={fmt(self.rate(self.fusc_ms), 1) or '-'}"]
        for p in PEERS:
            ms = self.peer_ms.get(p)
            f.append(f"{p}_{u}={fmt(self.rate(ms), 1) or (ms if isinstance(ms, str) else '-')}")
        f += [f"best={name or '-'}", f"best_{u}={fmt(self.rate(best_ms), 1) or '-'}",
              f"ratio={fmt(self.ratio(), 3) or '-'}",
              f"copy_frac={fmt(self.copy_fraction(), 3) or '-'}", f"status={status}"]
        return " ".join(f)


def cell(row, ms):
    if isinstance(ms, float):
        return fmt(row.rate(ms), 1 if row.case.flops else 0)
    return ms or ""


def markdown(rows):
    """One Markdown table (rows of one suite and one unit)."""
    u = rows[0].unit
    head = ["case", "fusc ms", f"fusc {u}", f"eager {u}", f"torch.compile {u}", f"Triton {u}",
            "best peer", "fusc/best"] + ([] if rows[0].case.flops else ["fusc/copy"])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        name, _ = r.best()
        fms = fmt(r.fusc_ms, 3) if isinstance(r.fusc_ms, float) else str(r.fusc_ms).split(":")[0]
        c = [r.case.label, fms, cell(r, r.fusc_ms) if isinstance(r.fusc_ms, float) else ""]
        c += [cell(r, r.peer_ms.get(p)) for p in PEERS]
        c += [name or "", fmt(r.ratio(), 2)]
        if not r.case.flops:
            c.append(fmt(r.copy_fraction(), 2))
        out.append("| " + " | ".join(c) + " |")
    return "\n".join(out)


def summary(rows):
    rs = [r.ratio() for r in rows]
    timed = [x for x in rs if x is not None]
    g = geomean(timed)
    fails = [r.case.label for r in rows if not isinstance(r.fusc_ms, float)]
    s = f"geometric mean of fusc/best over {len(timed)} rows: {fmt(g, 3) or '-'}"
    if fails:
        s += f"; fusc not timed ({len(fails)}): " + ", ".join(fails)
    return s


# ---- building the launchers ---------------------------------------------------------------
class Program:
    """A .fus file compiled by fusc: its fusions' signatures, the generated .cu and .h, the
    launcher prototypes and, once built, the shared library."""

    def __init__(self, path, outdir):
        self.path = path
        self.stem = slug(os.path.splitext(path)[0])
        self.cu = os.path.join(outdir, self.stem + ".cu")
        self.header = os.path.join(outdir, self.stem + ".h")
        self.so = os.path.join(outdir, "lib" + self.stem + ".so")
        with open(path) as f:
            text = f.read()
        self.fusions = parse_fusions(text)
        # a trial may ask for fusc options: `// bench-fusc-args: --arch=sm_90` (the 4-stage
        # GEMM tiles need more shared memory than sm_80's 163 KiB)
        m = re.search(r"^// bench-fusc-args: (.*)$", text, re.M)
        self.fusc_args = m.group(1).split() if m else []
        self.error = None
        self.lib = None

    def generate(self):
        """fusc FILE -o X.cu (and X.h); returns False (with self.error) on failure."""
        p = subprocess.run([FUSC, self.path, *self.fusc_args, "-o", self.cu], capture_output=True,
                           text=True)
        if p.returncode != 0:
            self.error = f"fusc {self.path} failed (exit {p.returncode}): {p.stderr.strip()}"
            return False
        with open(self.header) as f:
            self.header_text = f.read()
        with open(self.cu) as f:
            cu = f.read()
        for name in self.fusions:
            if not re.search(r'extern "C" cudaError_t ' + re.escape(name) + r"\(", cu):
                self.error = f"{self.cu}: no launcher symbol {name}"
                return False
        return True

    def build(self):
        """nvcc -shared: the library ctypes loads."""
        cmd = [NVCC, "-O3", "-std=c++17", f"-arch={ARCH}", "-shared", "-Xcompiler", "-fPIC",
               "-I" + os.path.dirname(self.cu), "-o", self.so, self.cu]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            self.error = f"{' '.join(cmd)} failed: {p.stderr.strip()[-2000:]}"
            return False
        return True

    def launcher(self, fusion):
        """(the launcher's ctypes function, its binding)."""
        params, outputs = self.fusions[fusion]
        binding = bind_launcher(parse_prototype(self.header_text, fusion), params, outputs)
        if self.lib is None:
            return None, binding
        fn = getattr(self.lib, fusion)
        fn.argtypes = [ct for _, _, ct in binding]
        fn.restype = ctypes.c_int
        err = getattr(self.lib, fusion + "_last_error")
        err.restype = ctypes.c_char_p
        return (fn, err), binding


def case_fusion(case, prog):
    if case.fusion:
        return case.fusion
    if len(prog.fusions) != 1:
        raise ValueError(f"{case.fus} holds {len(prog.fusions)} fusions: name one")
    return next(iter(prog.fusions))


def validate(case, prog):
    """The case's sizes and scalars against the signature: (fusion, params, outputs, bytes)."""
    fusion = case_fusion(case, prog)
    params, outputs = prog.fusions[fusion]
    syms = size_symbols(params, outputs)
    missing = [s for s in syms if s not in case.dims]
    extra = [s for s in case.dims if s not in syms]
    if missing or extra:
        raise ValueError(f"{case}: sizes missing {missing}, unknown {extra}")
    scal = [t.name for t in params if t.dims is None]
    if sorted(scal) != sorted(case.scalars):
        raise ValueError(f"{case}: scalars {sorted(case.scalars)}, the fusion has {scal}")
    nbytes = sum(t.nbytes(case.dims) for t in params if t.dims is not None)
    nbytes += sum(t.nbytes(case.dims) for t in outputs)
    return fusion, params, outputs, nbytes


def prepare(cases, outdir, build, jobs):
    """Generates (and with build, compiles) every program the cases use, in parallel."""
    os.makedirs(outdir, exist_ok=True)
    progs = {}
    for c in cases:
        if c.fus not in progs:
            progs[c.fus] = Program(c.fus, outdir)

    def one(p):
        ok = p.generate() and (not build or p.build())
        if ok and build:
            try:
                p.lib = ctypes.CDLL(os.path.abspath(p.so))
            except OSError as e:
                p.error = f"loading {p.so}: {e}"
        return p

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        list(ex.map(one, progs.values()))
    return progs


def dry_run(cases, outdir, log):
    """No GPU: generates every program and checks each case's launcher binding and sizes."""
    progs = prepare(cases, outdir, build=False, jobs=2)
    bad = 0
    for c in cases:
        p = progs[c.fus]
        try:
            if p.error:
                raise ValueError(p.error)
            fusion, _, _, nbytes = validate(c, p)
            _, binding = p.launcher(fusion)
            log(f"ok   {c.suite:9} {c.label:45} {fusion}({', '.join(n for _, n, _ in binding)})"
                f" {nbytes / 1e6:.0f} MB")
        except ValueError as e:
            bad += 1
            log(f"FAIL {c.suite:9} {c.label}: {e}")
    log(f"dry run: {len(cases) - bad} cases ok, {bad} failed")
    return bad == 0


# ---- timing (GPU) ------------------------------------------------------------------------
class Timer:
    def __init__(self):
        import torch
        import triton.testing
        self.torch, self.do_bench = torch, triton.testing.do_bench

    def ms(self, fn):
        return float(self.do_bench(fn, warmup=25, rep=100, return_mode="median"))

def torch_dtype(name):
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
            "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
            "bool": torch.bool}[name]


def make_input(t, sizes, gen):
    import torch
    shape = t.shape(sizes)
    if t.dtype in ("i32", "i64"):
        return torch.randint(-100, 100, shape, device="cuda", generator=gen,
                             dtype=torch_dtype(t.dtype))
    if t.dtype == "bool":
        return torch.rand(shape, device="cuda", generator=gen) < 0.5
    x = torch.rand(shape, device="cuda", generator=gen, dtype=torch.float32) * 2 - 1
    return x.to(torch_dtype(t.dtype))


def as_tuple(out):
    return out if isinstance(out, (tuple, list)) else (out,)


def check(outs, refs, out_decls, tol):
    """None when every output matches its float64 reference, else the reason."""
    import torch
    outs = as_tuple(outs)
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, expected {len(refs)}"
    for o, r, t in zip(outs, refs, out_decls):
        if tuple(o.shape) != tuple(r.shape):
            return f"{t.name}: shape {tuple(o.shape)}, expected {tuple(r.shape)}"
        # A peer may return a narrower dtype than the fusion's output (torch.logsumexp of f16).
        limit = max(tol or TOLERANCE[t.dtype], TOLERANCE[DTYPE_NAMES.get(str(o.dtype), "f32")])
        o = o.double()
        if not torch.isfinite(o).all():
            return f"{t.name}: not finite (NaN: unwritten?)"
        err = ((o - r).norm() / r.norm().clamp_min(1e-30)).item()
        if not err <= limit:
            return f"{t.name}: relative error {err:.3g} > {limit:g}"
    return None


class Bench:
    def __init__(self, args, log, start):
        import torch
        C.bind_torch()
        torch.backends.cuda.matmul.allow_tf32 = False
        import torch._dynamo
        for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 4096)
        self.torch, self.args, self.log = torch, args, log
        self.timer = Timer()
        self.peers = {}
        self.start = start
        self.copy_gbs = None

    def elapsed(self):
        return time.monotonic() - self.start

    def copy_row(self):
        torch = self.torch
        x = torch.empty(1 << 28, device="cuda", dtype=torch.float32).uniform_()
        ms = self.timer.ms(lambda: x.clone())
        self.copy_gbs = rate(2 * x.numel() * 4, ms)
        line = f"ROW suite=copy name=clone_f32_2^28 ms={ms:.4f} gbs={self.copy_gbs:.1f}"
        self.log(line)
        return ms

    def peer(self, name, fn, inputs, refs, outputs, tol):
        """A peer's median time, or 'FAIL'."""
        try:
            err = check(fn(**inputs), refs, outputs, tol)
        except Exception as e:  # a peer that does not run is reported, not fatal
            self.log(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return "FAIL"
        if err:
            self.log(f"  {name}: wrong result: {err}")
            return "FAIL"
        return self.timer.ms(lambda: fn(**inputs))

    def run_case(self, case, prog):
        torch = self.torch
        fusion, params, outputs, nbytes = validate(case, prog)
        amount = case.flops or nbytes
        gen = torch.Generator(device="cuda")
        gen.manual_seed(self.args.seed)
        inputs = {t.name: (case.scalars[t.name] if t.dims is None else
                           make_input(t, case.dims, gen)) for t in params}
        ref64 = {k: (v.double() if hasattr(v, "double") and v.is_floating_point() else v)
                 for k, v in inputs.items()}
        refs = [r.double() for r in as_tuple(case.ref(**ref64))]
        del ref64
        tol = case.tol

        # fusc through its launcher: poisoned outputs, checked, then timed.
        fusc_ms = f"FAIL: {prog.error}" if prog.error else None
        if fusc_ms is None:
            (fn, err), binding = prog.launcher(fusion)
            outs = {t.name: torch.full(t.shape(case.dims), float("nan"), device="cuda",
                                       dtype=torch_dtype(t.dtype)) for t in outputs}
            tensors = {**inputs, **outs}
            stream = torch.cuda.current_stream().cuda_stream
            cargs = []
            for kind, name, _ in binding:
                if kind == "tensor":
                    cargs.append(tensors[name].data_ptr())
                elif kind == "scalar":
                    cargs.append(case.scalars[name])
                elif kind == "size":
                    cargs.append(case.dims[name])
                else:
                    cargs.append(stream)
            rc = fn(*cargs)
            torch.cuda.synchronize()
            if rc != 0:
                fusc_ms = f"FAIL: launcher returned {rc}: {err().decode(errors='replace')}"
            else:
                bad = check(tuple(outs[t.name] for t in outputs), refs, outputs, tol)
                if bad:
                    fusc_ms = f"FAIL: {bad}"
                else:
                    fusc_ms = self.timer.ms(lambda: fn(*cargs))
            del outs, tensors
        if isinstance(fusc_ms, str):
            self.log(f"  fusc: {fusc_ms}")

        # The peers, shared by cases computing the same function on the same shapes.
        key = (case.ref.__name__, tuple(sorted(case.scalars.items())),
               tuple((k, tuple(v.shape), str(v.dtype)) for k, v in inputs.items()
                     if hasattr(v, "shape")))
        if key not in self.peers:
            pm = {"eager": self.peer("eager", case.ref, inputs, refs, outputs, tol)}
            if self.args.no_compile:
                pm["compile"] = "skipped"
            elif self.elapsed() > self.args.compile_deadline:
                pm["compile"] = "skipped"
                self.log(f"  torch.compile skipped: past --compile-deadline "
                         f"{self.args.compile_deadline:.0f} s")
            else:
                t0 = time.monotonic()
                compiled = torch.compile(case.ref, dynamic=False)
                pm["compile"] = self.peer("torch.compile", compiled, inputs, refs, outputs, tol)
                self.log(f"  torch.compile: {time.monotonic() - t0:.1f} s (compile and time)")
            pm["triton"] = (self.peer("triton", case.triton, inputs, refs, outputs, tol)
                            if case.triton else "n/a")
            self.peers[key] = pm
        del inputs, refs
        torch.cuda.empty_cache()
        return Row(case, amount, fusc_ms, dict(self.peers[key]), self.copy_gbs)


class Stopped(BaseException):
    """SIGTERM (not an Exception: a peer's `except Exception` must not swallow it)."""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=",".join(C.DEFAULT_SUITES),
                    help="comma-separated: " + ", ".join(C.SUITES) + "; all: every suite")
    ap.add_argument("--only", default="",
                    help="only cases whose label contains this (several: separated by '|')")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: generate every program, check launchers and cases")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--compile-deadline", type=float, default=float("inf"),
                    help="seconds after which torch.compile is skipped (new peers)")
    ap.add_argument("--deadline", type=float, default=float("inf"),
                    help="seconds after which the remaining cases are not run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.environ.get("BENCH_BUILD", "build/bench"),
                    help="where the generated .cu, .h and libraries go")
    ap.add_argument("--out", default="", help="also write the log and the tables here")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)

    names = list(C.SUITES) if args.suite == "all" else [s for s in args.suite.split(",") if s]
    for n in names:
        if n not in C.SUITES:
            ap.error(f"unknown suite '{n}' (known: {', '.join(C.SUITES)}, all)")
    only = args.only.split("|")
    cases = [c for n in names for c in C.SUITES[n]() if any(o in c.label for o in only)]

    logf = None
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        logf = open(os.path.join(args.out, "bench.log"), "a")

    def log(s):
        print(s, flush=True)
        if logf:
            logf.write(s + "\n")
            logf.flush()

    if args.dry_run:
        return 0 if dry_run(cases, args.build, log) else 1

    t0 = time.monotonic()
    progs = prepare(cases, args.build, build=True, jobs=args.jobs)
    log(f"# built {len(progs)} programs in {time.monotonic() - t0:.1f} s "
        f"({sum(1 for p in progs.values() if p.error)} failed)")
    b = Bench(args, log, t0)
    b.copy_row()
    rows, not_run = [], []

    # A `timeout` (SIGTERM) stops the cases, not the tables of the rows measured so far.
    def stop(signum, frame):
        raise Stopped()
    signal.signal(signal.SIGTERM, stop)
    try:
        for c in cases:
            if b.elapsed() > args.deadline:
                not_run.append(c.label)
                continue
            log(f"# {c.suite}: {c.label} ({c.fus} {c.dims})")
            try:
                r = b.run_case(c, progs[c.fus])
            except Exception as e:  # e.g. a kernel fault: reported as FAIL, not fatal
                log(traceback.format_exc().rstrip())
                r = Row(c, c.flops or 0, f"FAIL: {type(e).__name__}", {}, b.copy_gbs)
            rows.append(r)
            log(r.line())
    except Stopped:
        done = {r.case.label for r in rows}
        not_run += [c.label for c in cases if c.label not in done and c.label not in not_run]
        log("# stopped by SIGTERM")
    import torch
    tables = [f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"triton {sys.modules['triton'].__version__}, copy (torch clone of 1 GiB): "
              f"{b.copy_gbs:.0f} GB/s; {time.monotonic() - t0:.0f} s"]
    for n in names:
        rs = [r for r in rows if r.case.suite == n]
        for unit in ("GB/s", "TFLOP/s"):
            ru = [r for r in rs if r.unit == unit]
            if ru:
                tables += ["", f"### {n} ({unit})", "", markdown(ru), "", summary(ru)]
    if len(names) > 1:
        tables += ["", "all suites: " + summary(rows)]
    if not_run:
        tables += ["", f"not run (past --deadline {args.deadline:.0f} s, or stopped): " +
                   ", ".join(not_run)]
    text = "\n".join(tables)
    log("")
    log(text)
    if args.out:
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(text + "\n")
    failed = [r for r in rows if not isinstance(r.fusc_ms, float)]
    return 1 if failed or not_run else 0


if __name__ == "__main__":
    sys.exit(main())
