/* preamble.cuh: the device preamble of every generated .cu (fusc embeds this file at build
 * time: backend/cuda_kernel.c). Generated files stay self-contained: they carry the text, never
 * an #include of it.
 *
 * Everything from the first `// ---- ` banner on goes out verbatim, section by section; this
 * comment does not. Sections, in this order, each after a blank line:
 *   fusc device preamble   always: f16/bf16 storage types and conversions, __fus_vec, math
 *   block reductions       files with KS_BLOCK_REDUCE or a grid reduction. Every thread of
 *                          the block calls them; the combination order is the one of
 *                          kir_block_reduce_shape, which the simulator follows too
 *   grid reductions        files with KS_GRID_REDUCE (after the block reductions' operators).
 *                          Called by the one thread of each block that would store element o;
 *                          the partials are folded in order r = 0, 1, ..., R-1 whichever block
 *                          arrives last, so the result has the same bits on every run (the
 *                          simulator folds the same way). Volatile reads go to L2, where the
 *                          other blocks' fenced stores are
 *   Welford block ...      files with a Welford KS_BLOCK_REDUCE (after the block reductions:
 *                          they use __fus_tid). The triples (n, mean, M2) combine with Chan et
 *                          al.'s formula, the lower-numbered thread's triple first, so both
 *                          sides of a butterfly step get the same bits
 * No #include, no other headers: NVRTC compiles it as it is (docs/reductions.md has the
 * algorithms). The goldens (tests/golden/cuda/) keep only the banner lines of the sections a
 * file uses; tests/golden.sh puts this text back and compares the whole .cu.
 */
// ---- fusc device preamble: no headers, so NVRTC compiles it as is ----

// f16 and bf16 are stored as their bits; arithmetic happens in f32.
struct __align__(2) __fus_half { unsigned short bits; };
struct __align__(2) __fus_bfloat { unsigned short bits; };

// N elements moved by one 2/4/8/16-byte access.
template <typename T, int N> struct __align__(sizeof(T) * N) __fus_vec { T v[N]; };

// A load of an input marked evict_first (`x.evict_first()`, docs/schedule.md), 1 to 16
// bytes: from sm_80 on, ld.global.nc past L1, the line entering L2 with the evict-first
// policy, so that a tensor read once is replaced before the lines other kernels left there
// (their dirty lines need not be written back while it streams; docs/auto_schedule.md, "The
// L2 state before the call"); a plain load before sm_80. .nc: inputs are const __restrict__.
template <int B> struct __fus_ld_ef_bits;
template <> struct __fus_ld_ef_bits<16> {
  unsigned r[4];
  __device__ __forceinline__ void ld(const void *p, unsigned long long pol)
  {
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "l"(p), "l"(pol));
  }
};
template <> struct __fus_ld_ef_bits<8> {
  unsigned r[2];
  __device__ __forceinline__ void ld(const void *p, unsigned long long pol)
  {
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
        : "=r"(r[0]), "=r"(r[1]) : "l"(p), "l"(pol));
  }
};
template <> struct __fus_ld_ef_bits<4> {
  unsigned r[1];
  __device__ __forceinline__ void ld(const void *p, unsigned long long pol)
  {
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(r[0]) : "l"(p), "l"(pol));
  }
};
template <> struct __fus_ld_ef_bits<2> {
  unsigned short r[1];
  __device__ __forceinline__ void ld(const void *p, unsigned long long pol)
  {
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(r[0]) : "l"(p), "l"(pol));
  }
};
template <> struct __fus_ld_ef_bits<1> {
  unsigned char r[1];
  __device__ __forceinline__ void ld(const void *p, unsigned long long pol)
  {
    unsigned short h;
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.u8 %0, [%1], %2;" : "=h"(h) : "l"(p), "l"(pol));
    r[0] = (unsigned char)h;
  }
};

template <typename T>
__device__ __forceinline__ T __fus_ld_ef(const T *p)
{
#if __CUDA_ARCH__ >= 800
  unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  union {
    __fus_ld_ef_bits<sizeof(T)> b;
    T v;
  } u;
  u.b.ld(p, pol);
  return u.v;
#else
  return *p;
#endif
}

__device__ __forceinline__ float __fus_half2float(__fus_half h)
{
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}

__device__ __forceinline__ __fus_half __fus_float2half(float f)
{
  __fus_half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}

__device__ __forceinline__ float __fus_bfloat2float(__fus_bfloat b)
{
  return __uint_as_float((unsigned int)b.bits << 16);
}

// Round to nearest even: one cvt on sm_80 and later, integer arithmetic before (the same
// value; NaN stays NaN).
__device__ __forceinline__ __fus_bfloat __fus_float2bfloat(float f)
{
  __fus_bfloat b;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));
#else
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    b.bits = (unsigned short)(u >> 16 | 0x40u);
  else
    b.bits = (unsigned short)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
#endif
  return b;
}

// f32 a / b within 2 ulp of the rounded quotient over the whole range (docs/language.md,
// "Float accuracy"): (a * s) * rcp(b * s), with s a power of 2 that brings |b| into
// [2^-126, 2^126] (so the reciprocal is a normal number) and a * s exact where the quotient
// is representable. Everything but the two products depends on b alone, so a division of
// many values by one (a row's sum) costs one reciprocal and two multiplies per element.
__device__ __forceinline__ float __fus_fdiv(float a, float b)
{
  float m = fabsf(b);
  float s = m > __int_as_float(0x7e800000) ? 0.25f       // 2^126
            : m < __int_as_float(0x00800000) ? 16777216.0f // 2^-126, 2^24
            : 1.0f;
  return a * s * __frcp_rn(b * s);
}

__device__ __forceinline__ float __fus_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double __fus_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

// max/min propagate NaN (like PyTorch): a + b is NaN when either is.
__device__ __forceinline__ float __fus_max(float a, float b) { return a != a || b != b ? a + b : fmaxf(a, b); }
__device__ __forceinline__ float __fus_min(float a, float b) { return a != a || b != b ? a + b : fminf(a, b); }
__device__ __forceinline__ double __fus_max(double a, double b) { return a != a || b != b ? a + b : fmax(a, b); }
__device__ __forceinline__ double __fus_min(double a, double b) { return a != a || b != b ? a + b : fmin(a, b); }
// integer max/min (int64_t is long on LP64 and long long elsewhere: both have an
// exact match)
__host__ __device__ __forceinline__ int __fus_max(int a, int b) { return a > b ? a : b; }
__host__ __device__ __forceinline__ int __fus_min(int a, int b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ long __fus_max(long a, long b) { return a > b ? a : b; }
__host__ __device__ __forceinline__ long __fus_min(long a, long b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ long long __fus_max(long long a, long long b) { return a > b ? a : b; }
__host__ __device__ __forceinline__ long long __fus_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ bool __fus_max(bool a, bool b) { return a || b; }
__device__ __forceinline__ bool __fus_min(bool a, bool b) { return a && b; }
__device__ __forceinline__ int __fus_abs(int a) { return a < 0 ? -a : a; }
__device__ __forceinline__ long long __fus_abs(long long a) { return a < 0 ? -a : a; }

// ---- block reductions: every thread of the block calls them ----
struct __fus_red_sum { template <typename T> __device__ static T f(T a, T b) { return a + b; } };
struct __fus_red_max { template <typename T> __device__ static T f(T a, T b) { return __fus_max(a, b); } };
struct __fus_red_min { template <typename T> __device__ static T f(T a, T b) { return __fus_min(a, b); } };

__device__ __forceinline__ unsigned __fus_tid(void)
{
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

// The threads of thread tid's warp in a block of NT: a constant when the block is whole
// warps or less than one (a mask computed from tid made ptxas add a divergent fallback).
template <int NT>
__device__ __forceinline__ unsigned __fus_warp_mask(unsigned tid)
{
  unsigned left = NT - (tid & ~31u);
  if (NT % 32 == 0)
    return 0xffffffffu;
  if (NT < 32)
    return (1u << NT % 32) - 1u;
  return left >= 32u ? 0xffffffffu : (1u << left) - 1u;
}

// Groups of COUNT (a power of 2 <= 32) consecutive threads of NT: butterfly shuffles.
template <typename Op, int COUNT, int NT, typename T>
__device__ __forceinline__ T __fus_reduce_warp(T v)
{
  unsigned mask = __fus_warp_mask<NT>(__fus_tid());
#pragma unroll
  for (int o = COUNT / 2; o > 0; o /= 2)
    v = Op::f(v, __shfl_xor_sync(mask, v, o));
  return v;
}

// Groups of COUNT (a multiple of 32) consecutive threads: shuffles in each warp, then
// the group's warp results in order through shared memory.
template <typename Op, int COUNT, typename T>
__device__ __forceinline__ T __fus_reduce_warps(T v)
{
  __shared__ T ws[32];
  unsigned tid = __fus_tid();
#pragma unroll
  for (int o = 16; o > 0; o /= 2)
    v = Op::f(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((tid & 31u) == 0)
    ws[tid >> 5] = v;
  __syncthreads();
  unsigned first = tid / COUNT * (COUNT / 32);
  T r = ws[first];
#pragma unroll
  for (int w = 1; w < COUNT / 32; w++)
    r = Op::f(r, ws[first + w]);
  __syncthreads();
  return r;
}

// Any other group (base + i * STRIDE, i < COUNT): in order through shared memory.
template <typename Op, int COUNT, int STRIDE, int NT, typename T>
__device__ __forceinline__ T __fus_reduce_smem(T v)
{
  __shared__ T ws[NT];
  unsigned tid = __fus_tid();
  ws[tid] = v;
  __syncthreads();
  unsigned base = tid / (COUNT * STRIDE) * (COUNT * STRIDE) + tid % STRIDE;
  T r = ws[base];
  for (int i = 1; i < COUNT; i++)
    r = Op::f(r, ws[base + i * STRIDE]);
  __syncthreads();
  return r;
}

// ---- grid reductions: the thread of each block that would store element o calls it ----
// Leaves acc in ws[o * R + r] (r: this block among the R), counts the arrival in sem[o];
// the last block to arrive folds the R partials in order r = 0, 1, ... into acc, resets
// sem[o] and returns true: it alone stores the result. The partials are read 128 bytes at a
// time (32 floats, 16 doubles) into registers before they are folded (still in order), so
// that many reads from L2 are in flight rather than one: a total over 528 blocks is one
// thread's fold of 528 f32 partials, 17 rounds of L2 latency instead of 528.
template <typename Op, typename T>
__device__ __forceinline__ bool __fus_grid_reduce(T &acc, T *ws, unsigned *sem, long long o, long long r, long long R)
{
  ws[o * R + r] = acc;
  __threadfence();
  if (atomicAdd(&sem[o], 1u) != (unsigned)(R - 1))
    return false;
  __threadfence();
  const volatile T *p = ws + o * R;
  T v = p[0];
  const int Q = 128 / (int)sizeof(T);
  for (long long i = 1; i < R; i += Q) {
    T q[Q];
#pragma unroll
    for (int k = 0; k < Q; k++)
      if (i + k < R)
        q[k] = p[i + k];
#pragma unroll
    for (int k = 0; k < Q; k++)
      if (i + k < R)
        v = Op::f(v, q[k]);
  }
  acc = v;
  sem[o] = 0u;
  return true;
}

// ---- Welford block combinations: every thread of the block calls them ----
// (n, m, m2) = (n, m, m2) + (nb, mb, m2b); an empty side (count 0) gives the other.
template <typename T>
__device__ __forceinline__ void __fus_welford_combine(T &n, T &m, T &m2, T nb, T mb, T m2b)
{
  if (nb == (T)0)
    return;
  if (n == (T)0) {
    n = nb; m = mb; m2 = m2b;
    return;
  }
  T nn = n + nb;
  T d = mb - m;
  T f = nb / nn;
  m = m + d * f;
  m2 = m2 + m2b + d * d * n * f;
  n = nn;
}

// Butterfly over groups of COUNT (a power of 2 <= 32) consecutive lanes of `mask`.
template <int COUNT, typename T>
__device__ __forceinline__ void __fus_welford_shfl(unsigned mask, unsigned tid, T &n, T &m, T &m2)
{
#pragma unroll
  for (int o = COUNT / 2; o > 0; o /= 2) {
    T nb = __shfl_xor_sync(mask, n, o);
    T mb = __shfl_xor_sync(mask, m, o);
    T m2b = __shfl_xor_sync(mask, m2, o);
    if (tid & (unsigned)o) { // the partner is the lower thread: its triple goes first
      T t = n; n = nb; nb = t;
      t = m; m = mb; mb = t;
      t = m2; m2 = m2b; m2b = t;
    }
    __fus_welford_combine(n, m, m2, nb, mb, m2b);
  }
}

// Groups of COUNT (a power of 2 <= 32) consecutive threads of NT: shuffles only.
template <int COUNT, int NT, typename T>
__device__ __forceinline__ void __fus_welford_warp(T &n, T &m, T &m2)
{
  unsigned tid = __fus_tid();
  unsigned mask = __fus_warp_mask<NT>(tid);
  __fus_welford_shfl<COUNT>(mask, tid, n, m, m2);
}

// Groups of COUNT (a multiple of 32) consecutive threads: a butterfly in each warp, then
// the group's warp results in order through shared memory.
template <int COUNT, typename T>
__device__ __forceinline__ void __fus_welford_warps(T &n, T &m, T &m2)
{
  __shared__ T wn[32], wm[32], wm2[32];
  unsigned tid = __fus_tid();
  __fus_welford_shfl<32>(0xffffffffu, tid, n, m, m2);
  if ((tid & 31u) == 0) {
    wn[tid >> 5] = n; wm[tid >> 5] = m; wm2[tid >> 5] = m2;
  }
  __syncthreads();
  unsigned first = tid / COUNT * (COUNT / 32);
  n = wn[first]; m = wm[first]; m2 = wm2[first];
#pragma unroll
  for (int w = 1; w < COUNT / 32; w++)
    __fus_welford_combine(n, m, m2, wn[first + w], wm[first + w], wm2[first + w]);
  __syncthreads();
}

// Any other group (base + i * STRIDE, i < COUNT): in order through shared memory.
template <int COUNT, int STRIDE, int NT, typename T>
__device__ __forceinline__ void __fus_welford_smem(T &n, T &m, T &m2)
{
  __shared__ T wn[NT], wm[NT], wm2[NT];
  unsigned tid = __fus_tid();
  wn[tid] = n; wm[tid] = m; wm2[tid] = m2;
  __syncthreads();
  unsigned base = tid / (COUNT * STRIDE) * (COUNT * STRIDE) + tid % STRIDE;
  n = wn[base]; m = wm[base]; m2 = wm2[base];
  for (int i = 1; i < COUNT; i++)
    __fus_welford_combine(n, m, m2, wn[base + i * STRIDE], wm[base + i * STRIDE],
                          wm2[base + i * STRIDE]);
  __syncthreads();
}

// ---- online max and sum: pairs through the block reductions' helpers ----
// (m, s): the max of a part of a row and the sum of exp(x - m) over it. The side with the
// larger max (b when b.m > a.m or b.m is NaN) keeps its sum, the other's is scaled by
// exp(lo - hi), 1 when the maxes are equal (no exp(-inf - -inf)): symmetric, so both sides
// of a butterfly step get the same bits.
template <typename T> struct __fus_online { T m, s; };
__device__ __forceinline__ float __fus_online_exp(float x) { return expf(x); }
__device__ __forceinline__ double __fus_online_exp(double x) { return exp(x); }
struct __fus_red_online {
  template <typename T>
  __device__ static __fus_online<T> f(__fus_online<T> a, __fus_online<T> b)
  {
    bool take = b.m > a.m || b.m != b.m;
    T hi = take ? b.m : a.m, lo = take ? a.m : b.m;
    T big = take ? b.s : a.s, small = take ? a.s : b.s;
    T e = lo == hi ? (T)1 : __fus_online_exp(lo - hi);
    return __fus_online<T>{hi, big + small * e};
  }
};
template <typename T>
__device__ __forceinline__ __fus_online<T> __shfl_xor_sync(unsigned mask, __fus_online<T> v, int o)
{
  return __fus_online<T>{__shfl_xor_sync(mask, v.m, o), __shfl_xor_sync(mask, v.s, o)};
}
template <typename T>
__device__ __forceinline__ void __fus_online_set(T &m, T &s, __fus_online<T> r)
{
  m = r.m;
  s = r.s;
}
