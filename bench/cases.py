"""The benchmark suites of bench.py: which .fus file at which sizes, and the PyTorch function
(and, where there is one, the hand-written Triton kernel) it is compared with.

A Case names a .fus file, the fusion in it, the sizes of its size symbols and the values of
its scalar parameters. The shapes and dtypes of the inputs and outputs come from the fusion's
signature, so a case cannot disagree with its file. `ref` is the PyTorch function: it takes
the inputs by parameter name and returns the outputs (one tensor, or a tuple in the order of
the outputs). It is the eager peer, the torch.compile peer, and, run on float64 copies of the
inputs, the reference that every output is checked against. `torch` and `F` are bound by
bind_torch() when the harness times (a dry run needs no PyTorch).
"""
import os

torch = None
F = None
triton_peers = None


def bind_torch():
    global torch, F, triton_peers
    import torch as _torch
    import torch.nn.functional as _F
    torch, F = _torch, _F
    import triton_peers as _tp
    triton_peers = _tp


class Case:
    def __init__(self, suite, label, fus, dims, ref, fusion=None, scalars=None, triton=None,
                 flops=None, tol=None):
        self.suite, self.label, self.fus, self.dims = suite, label, fus, dims
        self.ref, self.fusion, self.scalars = ref, fusion, scalars or {}
        self.triton, self.flops, self.tol = triton, flops, tol

    def __repr__(self):
        return f"Case({self.suite}: {self.label})"


# ---- the PyTorch functions (module-level, so torch.compile sees plain functions) ---------
def saxpy(a, x, y):
    return a * x + y


def bcast3(x, r, c):
    return x * r[:, None, :] + c[None, :, None]


def softmax(x):
    return torch.softmax(x, dim=-1)


def layernorm(x, gamma, beta, eps):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def rmsnorm(x, w, eps):
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)


def logsumexp(x):
    return torch.logsumexp(x, dim=-1)


def row_sum(x):
    return x.sum(dim=-1, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)


def col_sum(x):
    return x.sum(dim=0)


def col_sum_f32(x):
    return x.sum(dim=0, dtype=torch.float32)


def mid_sum(x):
    return x.sum(dim=1)


def total(x):
    return x.sum(dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)


def transpose(x):
    return x.t().contiguous()


def permute3(x):
    return x.permute(2, 0, 1).contiguous()


def gelu(x):
    return F.gelu(x, approximate="tanh")


def bias_gelu(x, b):
    return F.gelu(x + b)


def half_scale(alpha, x, y):
    return torch.tanh(alpha * x) + y * y


def mm(A, B):
    return torch.mm(A, B)


def bmm(A, B):
    return torch.bmm(A, B)


def mm_nt(X, W):
    # PyTorch's Linear without bias: W is [out, in]
    return X @ W.t()


def mm_tn(A, B):
    return A.t() @ B


def mm_bias_gelu(A, B, bias):
    # cuBLAS GEMM (f16 output), then PyTorch's bias add and erf gelu: two more kernels
    return F.gelu(torch.mm(A, B) + bias)


# ---- the Triton peers (bench/triton_peers.py) ---------------------------------------------
def triton_softmax(x):
    return triton_peers.softmax(x)


def triton_layernorm(x, gamma, beta, eps):
    return triton_peers.layernorm(x, gamma, beta, eps)


def triton_row_sum(x):
    return triton_peers.row_sum(x)


def triton_rmsnorm(x, w, eps):
    return triton_peers.rmsnorm(x, w, eps)


def triton_logsumexp(x):
    return triton_peers.logsumexp(x)


# ---- bench/auto: programs as users write them (size symbols, no schedule) ----------------
# Row tensors of E f32 elements (256 MB) or 2E f16/bf16 elements (256 MB).
E = 1 << 26
ROW_LENGTHS = (128, 1000, 4096, 16384, 65536, 1 << 20)


def _rows(n, elem_bytes=4):
    return (E * 4 // elem_bytes) // n


def auto_cases():
    a = "bench/auto/"
    cs = [
        Case("auto", "saxpy f32 2^26", a + "saxpy.fus", {"N": E}, saxpy, scalars={"a": 1.75}),
        Case("auto", "saxpy bf16 2^27", a + "saxpy_bf16.fus", {"N": 2 * E}, saxpy,
             scalars={"a": 1.75}),
        Case("auto", "3-D broadcast f32 64x1024x1024", a + "bcast3.fus",
             {"B": 64, "M": 1024, "N": 1024}, bcast3),
    ]
    for n in ROW_LENGTHS:
        m = _rows(n)
        d = {"M": m, "N": n}
        sz = f"{m}x{n}"
        cs += [
            Case("auto", f"softmax f32 {sz}", a + "softmax_f32.fus", d, softmax,
                 triton=triton_softmax),
            Case("auto", f"layernorm f32 {sz}", a + "layernorm_f32.fus", d, layernorm,
                 scalars={"eps": 1e-5}, triton=triton_layernorm),
            Case("auto", f"rmsnorm f32 {sz}", a + "rmsnorm_f32.fus", d, rmsnorm,
                 scalars={"eps": 1e-5}, triton=triton_rmsnorm),
            Case("auto", f"logsumexp f32 {sz}", a + "logsumexp_f32.fus", d, logsumexp,
                 triton=triton_logsumexp),
            Case("auto", f"row sum f32 {sz}", a + "row_sum_f32.fus", d, row_sum,
                 triton=triton_row_sum),
        ]
        if n == 4096:
            # The same programs with the row length a constant: symbolic must cost nothing.
            cs += [
                Case("auto", f"softmax f32 {sz} (N constant)", a + "softmax_4096.fus",
                     {"M": m}, softmax, triton=triton_softmax),
                Case("auto", f"layernorm f32 {sz} (N constant)", a + "layernorm_4096.fus",
                     {"M": m}, layernorm, scalars={"eps": 1e-5}, triton=triton_layernorm),
                Case("auto", f"rmsnorm f32 {sz} (N constant)", a + "rmsnorm_4096.fus",
                     {"M": m}, rmsnorm, scalars={"eps": 1e-5}, triton=triton_rmsnorm),
                Case("auto", f"logsumexp f32 {sz} (N constant)", a + "logsumexp_4096.fus",
                     {"M": m}, logsumexp, triton=triton_logsumexp),
            ]
    for n in (4096, 65536):
        m = _rows(n, 2)
        cs.append(Case("auto", f"softmax f16 {m}x{n}", a + "softmax_f16.fus", {"M": m, "N": n},
                       softmax, triton=triton_softmax))
    for n in (1000, 4096):
        m = _rows(n, 2)
        cs.append(Case("auto", f"layernorm bf16 {m}x{n}", a + "layernorm_bf16.fus",
                       {"M": m, "N": n}, layernorm, scalars={"eps": 1e-5},
                       triton=triton_layernorm))
    m = _rows(4096, 2)
    cs += [
        Case("auto", f"rmsnorm bf16 {m}x4096", a + "rmsnorm_bf16.fus", {"M": m, "N": 4096},
             rmsnorm, scalars={"eps": 1e-5}, triton=triton_rmsnorm),
        Case("auto", f"logsumexp f16 {m}x4096", a + "logsumexp_f16.fus", {"M": m, "N": 4096},
             logsumexp, triton=triton_logsumexp),
    ]
    for n in (4096, 16384):
        m = _rows(n, 2)
        cs.append(Case("auto", f"row sum bf16 {m}x{n}", a + "row_sum_bf16.fus",
                       {"M": m, "N": n}, row_sum, triton=triton_row_sum))
    cs += [
        Case("auto", "column sum f32 16384x4096", a + "col_sum.fus", {"M": 16384, "N": 4096},
             col_sum),
        Case("auto", "column sum f32 65536x1024", a + "col_sum.fus", {"M": 65536, "N": 1024},
             col_sum),
        Case("auto", "middle-axis sum f32 64x512x1024", a + "mid_sum.fus",
             {"B": 64, "T": 512, "H": 1024}, mid_sum),
        # f32 accumulation of 2^28 values against a float64 sum: allow 1e-3.
        Case("auto", "whole sum f16 2^28 -> f32", a + "total_f16.fus", {"N": 1 << 28}, total,
             tol=1e-3),
        Case("auto", "whole sum f32 2^27", a + "total_f32.fus", {"N": 1 << 27}, total, tol=1e-3),
        Case("auto", "whole sum f16 16384x16384 -> f32", a + "total_2d_f16.fus",
             {"M": 16384, "N": 16384}, total, tol=1e-3),
        Case("auto", "transpose f32 16384x16384", a + "transpose.fus",
             {"M": 16384, "N": 16384}, transpose),
        Case("auto", "permute (2,0,1) f32 256x512x512", a + "permute3.fus",
             {"A": 256, "B": 512, "C": 512}, permute3),
    ]
    return cs


# ---- bench/users: programs outside bench/auto, written the same way (size symbols, no
# schedule), to see the automatic scheduler on shapes it was not tuned on ------------------
def add_rmsnorm(x, r, w, eps):
    h = x.float() + r.float()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    return h.to(x.dtype), y.to(x.dtype)


def bias_relu(x, bias):
    return torch.relu(x + bias)


def btranspose(x):
    return x.transpose(1, 2).contiguous()


def col_max(x):
    return x.amax(dim=0)


def col_mean_f32(x):
    return x.float().mean(dim=0)


def col_norm(x):
    return x.pow(2).sum(dim=0).sqrt()


def dot(a, b):
    return (a * b).sum()


def first_sum3(x):
    return x.sum(dim=0)


def layernorm_hw(x, eps):
    return F.layer_norm(x, x.shape[-2:], eps=eps)


def sum_last2(x):
    return x.sum(dim=(1, 2))


def sum_lead2(x):
    return x.sum(dim=(0, 1))


def mean_var(x):
    return x.mean(dim=-1), x.var(dim=-1, unbiased=False)


def layernorm_stats(x, gamma, beta, eps):
    y, mean, rstd = torch.ops.aten.native_layer_norm(x, x.shape[-1:], gamma, beta, eps)
    return y, mean.squeeze(-1), rstd.squeeze(-1)


def softmax_stats(x):
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    s = e.sum(dim=-1, keepdim=True)
    return e / s, m.squeeze(-1), s.squeeze(-1)


def row_max(x):
    return x.amax(dim=-1)


def vecmat(v, A):
    return v @ A


def col_wsum(w, x):
    return w @ x.to(w.dtype)


def mid_wsum(w, x):
    return torch.bmm(w[:, None, :], x)[:, 0, :]


def rowcol(x):
    return x.sum(dim=-1), x.sum(dim=0)


def mixed_out(x, w):
    y = x * w
    return y, y.sum()


def silu_f32(x):
    return F.silu(x.float()).to(x.dtype)


def softmax_scale(x, scale):
    return torch.softmax(x.float() * scale, dim=-1).to(x.dtype)


def users_cases():
    u = "bench/users/"
    mn = {"M": 16384, "N": 4096}
    return [
        Case("users", "add+rmsnorm f16 16384x4096 (2 outputs)", u + "add_rmsnorm_f16.fus",
             {"M": 16384, "N": 4096}, add_rmsnorm, scalars={"eps": 1e-5}, tol=2e-2),
        Case("users", "bias+relu f32 16384x8192", u + "bias_relu.fus", {"M": 16384, "N": 8192},
             bias_relu),
        Case("users", "batched transpose f32 64x1024x1024", u + "btranspose.fus",
             {"B": 64, "M": 1024, "N": 1024}, btranspose),
        Case("users", "column max f32 16384x4096", u + "col_max.fus", mn, col_max),
        Case("users", "column mean bf16 32768x4096 -> f32", u + "col_mean_bf16.fus",
             {"M": 32768, "N": 4096}, col_mean_f32),
        Case("users", "column norm f32 16384x4096", u + "col_norm.fus", mn, col_norm),
        Case("users", "column sum f16 32768x4096 -> f32", u + "col_sum_f16.fus",
             {"M": 32768, "N": 4096}, col_sum_f32),
        Case("users", "dot f32 2^26", u + "dot.fus", {"N": 1 << 26}, dot, tol=1e-3),
        Case("users", "first-axis sum f32 64x512x1024", u + "first_sum3.fus",
             {"B": 64, "T": 512, "H": 1024}, first_sum3),
        Case("users", "layernorm f32 16x1024x4096 (3-D)", u + "layernorm3.fus",
             {"B": 16, "T": 1024, "C": 4096}, layernorm, scalars={"eps": 1e-5}),
        Case("users", "layernorm over (H, W) f32 32x64x64x64", u + "layernorm_hw.fus",
             {"B": 32, "C": 64, "H": 64, "W": 64}, layernorm_hw, scalars={"eps": 1e-5}),
        Case("users", "mean+var f32 16384x4096 (2 outputs)", u + "mean_var.fus", mn, mean_var),
        Case("users", "layernorm with mean and rstd f32 16384x4096 (3 outputs)",
             u + "layernorm_stats.fus", mn, layernorm_stats, scalars={"eps": 1e-5}),
        Case("users", "softmax with max and sum f32 16384x4096 (3 outputs)",
             u + "softmax_stats.fus", mn, softmax_stats),
        # the N <= 65536 and H * W <= 65536 variants: rows read from memory by each pass, so
        # Welford's and the online pair, and one copy of each reduction for all outputs,
        # save whole passes (docs/auto_schedule.md, "Several outputs of one row group")
        Case("users", "layernorm over (H, W) f32 32x32x128x256 (Welford)", u + "layernorm_hw.fus",
             {"B": 32, "C": 32, "H": 128, "W": 256}, layernorm_hw, scalars={"eps": 1e-5}),
        Case("users", "mean+var f32 1024x65536 (2 outputs)", u + "mean_var.fus",
             {"M": 1024, "N": 65536}, mean_var),
        Case("users", "layernorm with mean and rstd f32 1024x65536 (3 outputs)",
             u + "layernorm_stats.fus", {"M": 1024, "N": 65536}, layernorm_stats,
             scalars={"eps": 1e-5}),
        Case("users", "softmax with max and sum f32 1024x65536 (3 outputs)",
             u + "softmax_stats.fus", {"M": 1024, "N": 65536}, softmax_stats),
        Case("users", "row max f32 16384x4096", u + "row_max.fus", mn, row_max),
        Case("users", "row sum 3-D f32 64x256x4096", u + "row_sum3.fus",
             {"B": 64, "T": 256, "C": 4096}, row_sum),
        Case("users", "sum over the last two axes f32 64x512x1024", u + "sum_last2.fus",
             {"B": 64, "M": 512, "N": 1024}, sum_last2),
        Case("users", "sum over the last two axes f32 4096x64x64", u + "sum_last2.fus",
             {"B": 4096, "M": 64, "N": 64}, sum_last2),
        Case("users", "sum over the two leading axes f32 64x512x1024", u + "col_sum_lead2.fus",
             {"B": 64, "T": 512, "H": 1024}, sum_lead2),
        Case("users", "silu bf16 16384x8192", u + "silu_bf16.fus", {"M": 16384, "N": 8192},
             silu_f32, tol=2e-2),
        Case("users", "scaled softmax bf16 32768x4096", u + "softmax_scale_bf16.fus",
             {"M": 32768, "N": 4096}, softmax_scale, scalars={"scale": 0.125}, tol=2e-2),
        Case("users", "transpose bf16 16384x16384", u + "transpose_bf16.fus",
             {"M": 16384, "N": 16384}, transpose),
        # a read per row beside the column reads (outer, middle), and outputs of different
        # classes split into segments (scheduler/segment.c)
        Case("users", "vector-matrix f32 16384x4096", u + "vecmat.fus", {"K": 16384, "N": 4096},
             vecmat, tol=1e-3),
        Case("users", "weighted column sum bf16 32768x4096 -> f32", u + "col_wsum.fus",
             {"M": 32768, "N": 4096}, col_wsum, tol=1e-3),
        Case("users", "weighted middle-axis sum f32 64x512x1024", u + "mid_wsum.fus",
             {"B": 64, "T": 512, "H": 1024}, mid_wsum, tol=1e-3),
        Case("users", "row and column sums f32 16384x4096 (2 outputs)", u + "rowcol.fus", mn,
             rowcol, tol=1e-3),
        Case("users", "scaled x and its total f32 16384x4096 (2 outputs)", u + "mixed_out.fus",
             mn, mixed_out, tol=1e-3),
    ]


# ---- the pointwise, reduce and gemm suites (bench/pointwise, bench/reduce, examples/) -----
N28 = 1 << 28


def pointwise_cases():
    p = "bench/pointwise/"
    return [
        Case("pointwise", "saxpy f32 2^28 (manual)", "examples/saxpy.fus", {"N": N28}, saxpy,
             scalars={"a": 1.75}),
        Case("pointwise", "saxpy f32 2^28 (auto)", p + "saxpy_auto.fus", {"N": N28}, saxpy,
             scalars={"a": 1.75}),
        Case("pointwise", "gelu f32 2^28 (auto)", "examples/gelu_auto.fus", {"N": N28}, gelu),
        Case("pointwise", "bias+gelu 16384x8192 (manual)", "examples/bias_gelu.fus",
             {"M": 16384, "N": 8192}, bias_gelu),
        Case("pointwise", "bias+gelu 16384x8192 (auto)", p + "bias_gelu_auto.fus",
             {"M": 16384, "N": 8192}, bias_gelu),
        Case("pointwise", "f16 tanh+sq 2^28 (manual)", "examples/half_scale.fus", {"N": N28},
             half_scale, scalars={"alpha": 1.5}, tol=2e-2),
        Case("pointwise", "f16 tanh+sq 2^28 (auto)", p + "half_scale_auto.fus", {"N": N28},
             half_scale, scalars={"alpha": 1.5}, tol=2e-2),
    ]


def reduce_cases():
    r = "bench/reduce/"
    e = "examples/reduce/"
    cs = []
    for m, n in ((16384, 4096), (65536, 1024)):
        sz = f"{m}x{n}"
        d = {"M": m, "N": n}
        cs += [
            Case("reduce", f"row sum {sz} (manual)", e + "row_sum.fus", d, row_sum,
                 triton=triton_row_sum),
            Case("reduce", f"row sum {sz} (auto)", f"{r}row_sum_auto_{n}.fus", {"M": m},
                 row_sum, triton=triton_row_sum),
            Case("reduce", f"softmax {sz} (manual)", e + "softmax.fus", d, softmax,
                 triton=triton_softmax),
            Case("reduce", f"softmax {sz} (auto)", f"{r}softmax_auto_{n}.fus", {"M": m},
                 softmax, triton=triton_softmax),
            Case("reduce", f"layernorm {sz} (manual)", e + "layernorm.fus", d, layernorm,
                 scalars={"eps": 1e-5}, triton=triton_layernorm),
            Case("reduce", f"layernorm {sz} (auto)", f"{r}layernorm_auto_{n}.fus", {"M": m},
                 layernorm, scalars={"eps": 1e-5}, triton=triton_layernorm),
            Case("reduce", f"layernorm {sz} (manual, welford)", e + "layernorm_welford.fus", d,
                 layernorm, scalars={"eps": 1e-5}, triton=triton_layernorm),
        ]
    cs.append(Case("reduce", "layernorm 65536x1024 (persistent, welford)",
                   e + "layernorm_welford_1024.fus", {"M": 65536}, layernorm,
                   scalars={"eps": 1e-5}, triton=triton_layernorm))
    return cs


def gemm_cases():
    # torch.mm is cuBLAS SGEMM in full f32 (bench.py turns TF32 off).
    return [
        Case("gemm", "gemm f32 4096^3 (manual)", "examples/gemm/gemm_f32.fus",
             {"M": 4096, "N": 4096, "K": 4096}, mm, flops=2 * 4096 ** 3, tol=1e-4),
        # f16 operands, f32 accumulators and output, mma.sync (issue 14 stage a0); the peers
        # are cuBLAS's f16 GEMM (f16 output)
        Case("gemm", "hgemm f16 4096^3 mma.sync (manual)", "examples/gemm/hgemm_mma.fus",
             {"M": 4096, "N": 4096, "K": 4096}, mm, flops=2 * 4096 ** 3, tol=1e-2),
        Case("gemm", "hgemm f16 4096^3 mma.sync ldmatrix (manual)",
             "examples/gemm/hgemm_ldmatrix.fus", {"M": 4096, "N": 4096, "K": 4096}, mm,
             flops=2 * 4096 ** 3, tol=1e-2),
    ] + [Case("gemm", "hgemm f16 %s mma.sync ldmatrix (manual)" % n,
              "examples/gemm/hgemm_ldmatrix.fus", d, mm, flops=2 * d["M"] * d["N"] * d["K"],
              tol=1e-2) for n, d in (("2048^3", {"M": 2048, "N": 2048, "K": 2048}),
                                     ("8192^3", {"M": 8192, "N": 8192, "K": 8192}))] + [
        Case("gemm", "hgemm bf16 4096^3 mma.sync ldmatrix (manual)",
             "examples/gemm/hgemm_bf16.fus", {"M": 4096, "N": 4096, "K": 4096}, mm,
             flops=2 * 4096 ** 3, tol=2e-2),
    ] + auto_gemm_cases()


def auto_gemm_cases():
    """The automatic schedules of matrix products (scheduler/auto_matmul.c): the programs of
    examples/gemm/auto_*.fus have no schedule block and symbolic sizes. 4095 x 4097 x 4093
    breaks the 16-byte copies' K % 8 and N % 8: the launcher runs the padded plan (A and
    B copied into rows padded to 8, then the tensor-core kernel)."""
    g = "examples/gemm/"
    n3 = {"M": 4096, "N": 4096, "K": 4096}
    odd = {"M": 4095, "N": 4097, "K": 4093}
    return [
        Case("gemm", "hgemm f16 4096^3 (auto)", g + "auto_hgemm.fus", n3, mm,
             flops=2 * 4096 ** 3, tol=1e-2),
        Case("gemm", "hgemm+bias+gelu f16 4096^3 (auto)", g + "auto_hgemm_bias_gelu.fus", n3,
             mm_bias_gelu, flops=2 * 4096 ** 3, tol=2e-2),
        Case("gemm", "sgemm f32 4096^3 (auto)", g + "auto_sgemm.fus", n3, mm,
             flops=2 * 4096 ** 3, tol=1e-4),
        Case("gemm", "bgemm bf16 8x2048^3 (auto)", g + "auto_bgemm.fus",
             {"Z": 8, "M": 2048, "N": 2048, "K": 2048}, bmm, flops=2 * 8 * 2048 ** 3, tol=2e-2),
        Case("gemm", "hgemm f16 64x4096x4096 (auto, M <= 64 variant)", g + "auto_hgemm.fus",
             {"M": 64, "N": 4096, "K": 4096}, mm, flops=2 * 64 * 4096 ** 2, tol=1e-2),
        Case("gemm", "hgemm f16 4095x4097x4093 (auto, padded plan)", g + "auto_hgemm.fus",
             odd, mm, flops=2 * 4095 * 4097 * 4093, tol=1e-2),
        # transposed operands on tensor cores (ldmatrix without .trans for W[j, k], with it
        # for A[k, i]); at unaligned sizes the padded plan copies each operand's contiguous
        # dimension rounded to 8 (docs/tensor_cores.md)
        Case("gemm", "hgemm f16 4096^3 X W^T (auto, NT)", g + "auto_hgemm_nt.fus", n3, mm_nt,
             flops=2 * 4096 ** 3, tol=1e-2),
        Case("gemm", "hgemm f16 8192x4096x4096 X W^T (auto, NT: a Linear layer)",
             g + "auto_hgemm_nt.fus", {"M": 8192, "N": 4096, "K": 4096}, mm_nt,
             flops=2 * 8192 * 4096 ** 2, tol=1e-2),
        Case("gemm", "hgemm f16 4096^3 X W^T mma.sync ldmatrix (manual, NT)",
             g + "hgemm_nt_ldmatrix.fus", n3, mm_nt, flops=2 * 4096 ** 3, tol=1e-2),
        Case("gemm", "hgemm f16 4096^3 A^T B (auto, TN)", g + "auto_hgemm_tn.fus", n3, mm_tn,
             flops=2 * 4096 ** 3, tol=1e-2),
        Case("gemm", "hgemm f16 4095x4097x4093 X W^T (auto, NT padded plan)",
             g + "auto_hgemm_nt.fus", odd, mm_nt, flops=2 * 4095 * 4097 * 4093, tol=1e-2),
    ]


# Manual tile schedules for the transpose scheduler's choices (issue 13, branch tpose).
def tpose_cases():
    t, a = "bench/tpose/", "bench/auto/"
    d = {"M": 16384, "N": 16384}
    return [Case("tpose", "transpose try " + n, t + "try_" + n + ".fus", d, transpose)
            for n in ("a", "a8")] + [
        Case("tpose", "transpose try auto", a + "transpose.fus", d, transpose),
        Case("tpose", "transpose try f16 auto", t + "f16_auto.fus", {"M": 16384, "N": 32768},
             transpose),
        Case("tpose", "transpose try permute3 auto", a + "permute3.fus",
             {"A": 256, "B": 512, "C": 512}, permute3),
        Case("tpose", "transpose try bcast3 auto", a + "bcast3.fus",
             {"B": 64, "M": 1024, "N": 1024}, bcast3)]


def outer_cases():
    """The outer, middle-axis and whole-tensor reductions of bench/auto alone (the cases of
    scheduler/auto_outer.c), for a short device run while tuning it."""
    a, o = "bench/auto/", "bench/outer/"
    cs = [Case("outer", c.label, c.fus, c.dims, c.ref, c.fusion, c.scalars, c.triton, c.flops,
               c.tol)
          for c in auto_cases() if c.label.startswith(("column sum", "middle-axis", "whole"))]
    # the shapes a user would write besides the bench/auto ones: the class, not the example
    return cs + [
        Case("outer", "column sum f32 4096x16384", a + "col_sum.fus", {"M": 4096, "N": 16384},
             col_sum),
        Case("outer", "column sum f32 1024x65536", a + "col_sum.fus", {"M": 1024, "N": 65536},
             col_sum),
        Case("outer", "column sum bf16 16384x8192 -> f32", o + "col_sum_bf16.fus",
             {"M": 16384, "N": 8192}, col_sum_f32),
        Case("outer", "middle-axis sum f32 8x4096x512", a + "mid_sum.fus",
             {"B": 8, "T": 4096, "H": 512}, mid_sum),
        Case("outer", "whole sum f32 2^26", o + "total_f32.fus", {"N": 1 << 26}, total, tol=1e-3),
    ]


def otry_cases():
    """Manual variants of the outer, middle-axis and whole-tensor schedules (bench/otry/col_*,
    mid_*, tot_*), for tuning scheduler/auto_outer.c, and of the row schedules (row_*)."""
    o = "bench/otry/"
    cs = []
    for f in sorted(os.listdir(o)):
        n = f[:-4]
        if f.startswith("col_"):
            cs += [Case("otry", f"otry {n} {d['M']}x{d['N']}", o + f, d, col_sum)
                   for d in ({"M": 16384, "N": 4096}, {"M": 65536, "N": 1024})]
        elif f.startswith("mid_"):
            cs.append(Case("otry", f"otry {n}", o + f, {"B": 64, "T": 512, "H": 1024}, mid_sum))
        elif f.startswith("tot_") and "_2d" in f:
            cs.append(Case("otry", f"otry {n}", o + f, {"M": 16384, "N": 16384}, total, tol=1e-3))
        elif f.startswith("tot_"):
            cs.append(Case("otry", f"otry {n}", o + f, {"N": 1 << 28}, total, tol=1e-3))
        elif f.startswith("row_") and f.endswith(".fus"):  # row_{ln,rms,rs}_*: f32[M, 4096]
            ref, eps = {"ln": (layernorm, {"eps": 1e-5}), "rms": (rmsnorm, {"eps": 1e-5}),
                        "rs": (row_sum, {})}[n.split("_")[1]]
            cs.append(Case("otry", f"otry {n} 16384x4096", o + f, {"M": 16384}, ref, scalars=eps))
    return cs


def rtry_cases():
    """Block order of the tensor-core GEMM (issue 14; bench/hg3/raster_ab.sh): the automatic
    schedule pasted as a block (bench/hg3/rtry_nn.fus, rtry_nt.fus: the hardware's row-major
    order) against the same with C.raster(bi, bj, G) (rtry_*_gG.fus), in one run."""
    h = "bench/hg3/"
    n3 = {"M": 4096, "N": 4096, "K": 4096}
    n8 = {"M": 8192, "N": 8192, "K": 8192}
    lin = {"M": 8192, "N": 4096, "K": 4096}
    cs = []
    for g in ("", "_g4", "_g8", "_g16"):
        for n, d in (("4096^3", n3), ("8192^3", n8)):
            cs.append(Case("rtry", f"rtry nn{g or ' base'} {n}", h + f"rtry_nn{g}.fus", d, mm,
                           flops=2 * d["M"] * d["N"] * d["K"], tol=1e-2))
    for g in ("", "_g8", "_g16"):
        for n, d in (("4096^3", n3), ("8192x4096x4096", lin)):
            cs.append(Case("rtry", f"rtry nt{g or ' base'} {n}", h + f"rtry_nt{g}.fus", d, mm_nt,
                           flops=2 * d["M"] * d["N"] * d["K"], tol=1e-2))
    return cs


def swz_cases():
    """The pad/swizzle A/B of the f16 GEMM's operand tiles (issue 14 item 2; docs/tensor_cores.md,
    "Swizzled operand tiles"): the automatic schedule pasted as a block with its padding
    (bench/hg3/auto_pad3.fus, the baseline), with swizzle(128B) instead (auto_swz3.fus, the
    same as examples/gemm/hgemm_swizzle.fus), and with 4 stages padded (auto_s4.fus) and
    swizzled (auto_swz4.fus), each at 4096^3 and 8192^3, and the automatic kernel itself."""
    h = "bench/hg3/"
    cs = []
    for n in (4096, 8192):
        d = {"M": n, "N": n, "K": n}
        cs.append(Case("swz", f"swz auto_hgemm {n}^3 (auto)", "examples/gemm/auto_hgemm.fus",
                       d, mm, flops=2 * n ** 3, tol=1e-2))
        cs += [Case("swz", f"swz {f} {n}^3", h + f + ".fus", d, mm, flops=2 * n ** 3, tol=1e-2)
               for f in ("auto_pad3", "auto_swz3", "auto_s4", "auto_swz4")]
    return cs


SUITES = {"auto": auto_cases, "users": users_cases, "tpose": tpose_cases, "outer": outer_cases,
          "otry": otry_cases, "rtry": rtry_cases, "pointwise": pointwise_cases,
          "reduce": reduce_cases, "gemm": gemm_cases, "swz": swz_cases}
# `make bench` (SUITE unset) runs these; auto is its own run (`make bench SUITE=auto`).
DEFAULT_SUITES = ("pointwise", "reduce", "gemm")


# ---- bench/unseen: programs of classes and dtypes that neither bench/auto nor bench/users
# tried, written as a new user would (size symbols, no schedule), to see what the automatic
# scheduler does with a program it has not seen (docs/auto_schedule.md, "Programs not yet
# fast", says which rows are expected to be slow and why) ------------------------------------
def swiglu_halves(x):
    return F.silu(x[:, 0]) * x[:, 1]


def swiglu(g, u):
    return F.silu(g) * u


def add_bias_layernorm(x, r, bias, gamma, beta, eps):
    h = x.float() + r.float() + bias.float()
    return F.layer_norm(h, (h.shape[-1],), gamma.float(), beta.float(), eps).to(x.dtype)


def softmax_mid(x):
    return torch.softmax(x, dim=1)


def log_softmax(x):
    return F.log_softmax(x, dim=-1)


def cross_entropy_rows(x, t):
    # t outside [0, N) picks no logit (the fusion's `where(j == t[i], ...)` matches nothing)
    n = x.shape[-1]
    ok = (t >= 0) & (t < n)
    picked = x.gather(1, t.clamp(0, n - 1).long()[:, None])[:, 0]
    return torch.logsumexp(x, dim=-1) - torch.where(ok, picked, torch.zeros_like(picked))


def mean_axis1(x):
    return x.mean(dim=1)


def row_min(x):
    return x.amin(dim=-1)


def col_min(x):
    return x.amin(dim=0)


def row_var(x):
    return x.var(dim=-1, unbiased=False)


def l2_normalize(x, eps):
    return F.normalize(x, dim=-1, eps=eps)


def row_norm(x):
    return torch.linalg.vector_norm(x, dim=-1)


def row_sumsq(x):
    return x.pow(2).sum(dim=-1)


def col_mean(x):
    return x.mean(dim=0)


def outer_batched(u, v):
    return u[:, :, None] * v[:, None, :]


def attn_bias4(s, bias, scale):
    return s * scale + bias


def heads_permute(x):
    return x.permute(0, 2, 1, 3).contiguous()


def batched_matvec(A, x):
    return torch.bmm(A, x[:, :, None])[:, :, 0]


def bias_relu_nchw(x, b):
    return torch.relu(x + b.view(1, -1, *([1] * (x.dim() - 2))))


def clamp_where(x, lo, hi):
    return torch.nan_to_num(x.clamp(lo, hi), nan=0.0)


def scale_shift(x, scale, shift):
    return x * scale + shift


def absmax(x):
    return x.abs().amax().float()


def mse_loss(a, b):
    return F.mse_loss(a, b)


def causal_softmax(x, scale):
    t = x.shape[-1]
    mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
    return torch.softmax((x * scale).masked_fill(~mask, float("-inf")), dim=-1)


def image_normalize(x, mean, std):
    return (x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)


def count_above(x, thresh):
    return (x.abs() > thresh).sum(dim=-1) / x.shape[-1]


def softmax_backward(y, dy):
    return y * (dy - (y * dy).sum(dim=-1, keepdim=True))


def bias_grad(dy, xhat):
    return dy.sum(dim=0, dtype=torch.float32), (dy * xhat).sum(dim=0, dtype=torch.float32)


def batchnorm_mean(x):
    return x.mean(dim=(0, 2))


def rope_pairs(x, c, s):
    x0, x1 = x[..., 0], x[..., 1]
    c, s = c[:, None, :], s[:, None, :]
    return torch.stack((x0 * c - x1 * s, x1 * c + x0 * s), dim=-1)


def masked_mean_pool(x, m):
    mf = m.to(x.dtype)
    return (x * mf[:, :, None]).sum(dim=1) / mf.sum(dim=1, keepdim=True).clamp_min(1.0)


def gemv_bias(v, W, b):
    return v @ W + b


def unseen_cases():
    u = "bench/unseen/"
    mn = {"M": 16384, "N": 4096}   # f32: 256 MB
    mn2 = {"M": 32768, "N": 4096}  # f16/bf16: 256 MB
    vocab = {"M": 2048, "N": 32000}  # LM-head logits, f32: 262 MB
    eps = {"eps": 1e-5}
    return [
        # pointwise and broadcast
        Case("unseen", "swiglu halves f16 16384x2x4096", u + "swiglu_halves_f16.fus", mn,
             swiglu_halves, tol=2e-2),
        Case("unseen", "swiglu bf16 16384x8192", u + "swiglu_bf16.fus", {"M": 16384, "N": 8192},
             swiglu, tol=2e-2),
        Case("unseen", "gelu tanh bf16 16384x8192", u + "gelu_tanh_bf16.fus",
             {"M": 16384, "N": 8192}, gelu, tol=2e-2),
        Case("unseen", "clamp+where f32 16384x8192", u + "clamp_where.fus",
             {"M": 16384, "N": 8192}, clamp_where, scalars={"lo": -0.5, "hi": 0.5}),
        Case("unseen", "scale+shift f16 32768x4096", u + "scale_shift_f16.fus", mn2, scale_shift,
             tol=2e-2),
        Case("unseen", "batched outer product f32 64x1024x1024", u + "outer_batched.fus",
             {"B": 64, "M": 1024, "N": 1024}, outer_batched),
        Case("unseen", "attention bias 4-D f16 8x16x1024x1024", u + "attn_bias4.fus",
             {"B": 8, "H": 16, "T": 1024, "S": 1024}, attn_bias4, scalars={"scale": 0.125},
             tol=2e-2),
        # a symbolic last axis of 128: (h, t, k) collapse into the vector axis, [B, H * T * S]
        # (docs/auto_schedule.md, "Pointwise outputs"; before session 13, a block per row)
        Case("unseen", "attention bias 4-D f16 256x16x128x128", u + "attn_bias4.fus",
             {"B": 256, "H": 16, "T": 128, "S": 128}, attn_bias4, scalars={"scale": 0.125},
             tol=2e-2),
        Case("unseen", "bias+relu NCHW f32 32x256x56x56", u + "bias_nchw.fus",
             {"N": 32, "C": 256, "H": 56, "W": 56}, bias_relu_nchw),
        Case("unseen", "bias+relu NCHW as [N, C, H*W] f32 32x256x3136", u + "bias_ncl.fus",
             {"N": 32, "C": 256, "L": 3136}, bias_relu_nchw),
        Case("unseen", "image normalize f32 64x3x512x512", u + "image_normalize.fus",
             {"B": 64, "H": 512, "W": 512}, image_normalize),
        Case("unseen", "rope on pairs f32 8192x32x64x2", u + "rope_pairs.fus",
             {"T": 8192, "H": 32, "D": 64}, rope_pairs),
        # permutes of attention heads, (0, 2, 1, 3): D symbolic against D a constant
        Case("unseen", "heads permute bf16 16x2048x32x64", u + "heads_permute_bf16.fus",
             {"B": 16, "T": 2048, "H": 32, "D": 64}, heads_permute),
        Case("unseen", "heads permute bf16 16x2048x32x64 (D constant)",
             u + "heads_permute_d64.fus", {"B": 16, "T": 2048, "H": 32}, heads_permute),
        Case("unseen", "heads permute bf16 8x2048x32x128", u + "heads_permute_bf16.fus",
             {"B": 8, "T": 2048, "H": 32, "D": 128}, heads_permute),
        # row groups
        Case("unseen", "add+bias+layernorm bf16 16384x4096", u + "add_bias_layernorm_bf16.fus",
             mn, add_bias_layernorm, scalars=eps, tol=2e-2),
        Case("unseen", "add+bias+layernorm bf16 65536x768", u + "add_bias_layernorm_bf16.fus",
             {"M": 65536, "N": 768}, add_bias_layernorm, scalars=eps, tol=2e-2),
        Case("unseen", "layernorm f32 65536x768 (768 constant)", u + "layernorm_768.fus",
             {"M": 65536}, layernorm, scalars=eps),
        Case("unseen", "rmsnorm f16 32768x4096", u + "rmsnorm_f16.fus", mn2, rmsnorm,
             scalars=eps, tol=2e-2),
        Case("unseen", "log-softmax f32 16384x4096", u + "log_softmax.fus", mn, log_softmax),
        Case("unseen", "log-softmax f32 2048x32000", u + "log_softmax.fus", vocab, log_softmax),
        Case("unseen", "cross-entropy rows f32 2048x32000", u + "cross_entropy.fus", vocab,
             cross_entropy_rows, tol=1e-4),
        Case("unseen", "causal softmax f16 8x12x1024x1024", u + "causal_softmax_f16.fus",
             {"B": 8, "T": 1024}, causal_softmax, scalars={"scale": 0.125}, tol=2e-2),
        Case("unseen", "softmax backward f32 16384x4096", u + "softmax_backward.fus", mn,
             softmax_backward, tol=1e-3),
        Case("unseen", "row min bf16 32768x4096", u + "row_min_bf16.fus", mn2, row_min),
        Case("unseen", "row variance two-pass f32 16384x4096", u + "var_two_pass.fus", mn,
             row_var, tol=1e-3),
        Case("unseen", "row variance one-pass f32 16384x4096", u + "var_one_pass.fus", mn,
             row_var, tol=1e-3),
        Case("unseen", "row L2 normalize f32 16384x4096", u + "l2_normalize.fus", mn,
             l2_normalize, scalars={"eps": 1e-12}),
        Case("unseen", "row L2 norm f32 16384x4096", u + "row_norm.fus", mn, row_norm),
        Case("unseen", "row sum of squares f16 32768x4096 -> f16", u + "row_sumsq_f16.fus", mn2,
             row_sumsq, tol=2e-2),
        Case("unseen", "row density above threshold f32 16384x4096 (an i64 count)",
             u + "count_above.fus", mn, count_above, scalars={"thresh": 0.5}),
        Case("unseen", "batched matrix-vector f32 64x1024x1024", u + "batched_matvec.fus",
             {"B": 64, "M": 1024, "K": 1024}, batched_matvec, tol=1e-3),
        # outer, middle-axis and whole-tensor reductions, and what reads them
        Case("unseen", "column min f16 32768x4096", u + "col_min_f16.fus", mn2, col_min),
        Case("unseen", "column mean f16 32768x4096 -> f16", u + "col_mean_f16.fus", mn2,
             col_mean, tol=2e-2),
        Case("unseen", "mean over axis 1 f32 64x512x1024", u + "mean_axis1.fus",
             {"B": 64, "T": 512, "H": 1024}, mean_axis1),
        Case("unseen", "softmax over the middle axis f32 64x512x1024", u + "softmax_mid.fus",
             {"B": 64, "T": 512, "H": 1024}, softmax_mid),
        Case("unseen", "bias and weight grads bf16 32768x4096 (2 outputs)",
             u + "bias_grad_bf16.fus", mn2, bias_grad, tol=2e-2),
        Case("unseen", "batch-norm channel mean f32 32x256x3136", u + "batchnorm_stats.fus",
             {"N": 32, "C": 256, "L": 3136}, batchnorm_mean, tol=1e-3),
        Case("unseen", "masked mean pooling f32 64x512x1024", u + "masked_mean_pool.fus",
             {"B": 64, "T": 512, "H": 1024}, masked_mean_pool, tol=1e-3),
        Case("unseen", "vector-matrix + bias f32 16384x4096", u + "gemv_bias.fus",
             {"K": 16384, "N": 4096}, gemv_bias, tol=1e-3),
        Case("unseen", "mse loss f32 16384x4096 -> 0-d", u + "mse_loss.fus", mn, mse_loss,
             tol=1e-3),
        Case("unseen", "absmax bf16 2^27 -> f32", u + "absmax_bf16.fus", {"N": 1 << 27}, absmax),
        Case("unseen", "whole sum f32 2^26", u + "sum_1d.fus", {"N": 1 << 26}, total, tol=1e-3),
        # small sizes: launch and fixed costs (the grid reduction's workspace), not bandwidth
        Case("unseen", "whole sum f32 1000 (small)", u + "sum_1d.fus", {"N": 1000}, total,
             tol=1e-3),
        Case("unseen", "absmax bf16 4096 (small)", u + "absmax_bf16.fus", {"N": 4096}, absmax),
        Case("unseen", "row variance two-pass f32 64x1000 (small)", u + "var_two_pass.fus",
             {"M": 64, "N": 1000}, row_var, tol=1e-3),
    ]


SUITES["unseen"] = unseen_cases
