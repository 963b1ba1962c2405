"""Hand-written Triton kernels, the third peer of bench.py for softmax, layernorm, rmsnorm,
logsumexp and row sums.

Each takes and returns torch tensors like the eager function it stands for (a new output per
call). A row that fits (at most FIT elements after rounding up to a power of two) is held in
registers and read once: BLOCK_M rows per program, so short rows still give each program a
tile of about 2048 elements. A longer row gets one program that loops over it in chunks of
LOOP elements: softmax keeps an online maximum and sum (two reads of the row), layernorm sums
x and x*x (two reads), rmsnorm x*x (two reads), logsumexp and row sum read it once.
Arithmetic is in f32; outputs take the input's dtype (row sums and logsumexp are f32, as in
bench/auto).
"""
import torch
import triton
import triton.language as tl

FIT = 16384
LOOP = 4096


def _shape(n):
    """BLOCK_M, BLOCK_N and num_warps for rows of n elements that fit."""
    bn = triton.next_power_of_2(n)
    bm = max(1, 2048 // bn)
    tile = bm * bn
    return bm, bn, 4 if tile <= 2048 else 8 if tile <= 8192 else 16


@triton.jit
def _softmax_fit(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    s = tl.sum(e, axis=1)
    tl.store(y_ptr + offs, (e / s[:, None]).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_loop(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    m = tl.full([BLOCK_N], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    # N >= BLOCK_N here, so the first chunk gives every lane a finite maximum.
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


def softmax(x):
    m, n = x.shape
    y = torch.empty_like(x)
    if triton.next_power_of_2(n) <= FIT:
        bm, bn, warps = _shape(n)
        _softmax_fit[(triton.cdiv(m, bm),)](x, y, m, n, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps)
    else:
        _softmax_loop[(m,)](x, y, n, BLOCK_N=LOOP, num_warps=8)
    return y


@triton.jit
def _layernorm_fit(x_ptr, g_ptr, b_ptr, y_ptr, M, N, eps, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / N
    d = tl.where(mask, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / N + eps)
    g = tl.load(g_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    y = d * rstd[:, None] * g[None, :] + b[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layernorm_loop(x_ptr, g_ptr, b_ptr, y_ptr, N, eps, BLOCK_N: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    s1 = tl.zeros([BLOCK_N], tl.float32)
    s2 = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0).to(tl.float32)
        s1 += x
        s2 += x * x
    mean = tl.sum(s1, axis=0) / N
    rstd = 1.0 / tl.sqrt(tl.maximum(tl.sum(s2, axis=0) / N - mean * mean, 0.0) + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * g + b
        tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm(x, gamma, beta, eps):
    m, n = x.shape
    y = torch.empty_like(x)
    if triton.next_power_of_2(n) <= FIT:
        bm, bn, warps = _shape(n)
        _layernorm_fit[(triton.cdiv(m, bm),)](x, gamma, beta, y, m, n, eps, BLOCK_M=bm,
                                              BLOCK_N=bn, num_warps=warps)
    else:
        _layernorm_loop[(m,)](x, gamma, beta, y, n, eps, BLOCK_N=LOOP, num_warps=8)
    return y


@triton.jit
def _row_sum(x_ptr, s_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    base = rows[:, None].to(tl.int64) * N
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        acc += tl.load(x_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(s_ptr + rows, tl.sum(acc, axis=1), mask=rows < M)


def row_sum(x):
    m, n = x.shape
    s = torch.empty(m, device=x.device, dtype=torch.float32)
    if triton.next_power_of_2(n) <= FIT:
        bm, bn, warps = _shape(n)
    else:
        bm, bn, warps = 1, LOOP, 8
    _row_sum[(triton.cdiv(m, bm),)](x, s, m, n, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps)
    return s


@triton.jit
def _rmsnorm_fit(x_ptr, w_ptr, y_ptr, M, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * r[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_loop(x_ptr, w_ptr, y_ptr, N, eps, BLOCK_N: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    s2 = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0).to(tl.float32)
        s2 += x * x
    r = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / N + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + cols, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x, w, eps):
    m, n = x.shape
    y = torch.empty_like(x)
    if triton.next_power_of_2(n) <= FIT:
        bm, bn, warps = _shape(n)
        _rmsnorm_fit[(triton.cdiv(m, bm),)](x, w, y, m, n, eps, BLOCK_M=bm, BLOCK_N=bn,
                                            num_warps=warps)
    else:
        _rmsnorm_loop[(m,)](x, w, y, n, eps, BLOCK_N=LOOP, num_warps=8)
    return y


@triton.jit
def _logsumexp(x_ptr, l_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # An online maximum and sum per lane over chunks of the row, then combined across lanes.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    base = rows[:, None].to(tl.int64) * N
    m = tl.full([BLOCK_M, BLOCK_N], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + base + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # a lane that has seen only -inf keeps m = -inf and s = 0 (no NaN from -inf - -inf)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    row_max = tl.max(m, axis=1)
    row_safe = tl.where(row_max == -float("inf"), 0.0, row_max)
    total = tl.sum(s * tl.exp(m - row_safe[:, None]), axis=1)
    tl.store(l_ptr + rows, row_max + tl.log(total), mask=rows < M)


def logsumexp(x):
    m, n = x.shape
    out = torch.empty(m, device=x.device, dtype=torch.float32)
    if triton.next_power_of_2(n) <= FIT:
        bm, bn, warps = _shape(n)
    else:
        bm, bn, warps = 1, LOOP, 8
    _logsumexp[(triton.cdiv(m, bm),)](x, out, m, n, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps)
    return out
