// The mma.sync ceiling of this GPU (hgemm5, issue 14): a register-only loop of
// mma.sync.m16n8k16 (f32 += f16 x f16, or bf16 with -DBF16) on every SM, no memory traffic in
// the loop, timed in 20-launch bursts and in a sustained run of about 200 ms (do_bench-like),
// with the SM clock each run ran at (clock64 cycles over globaltimer ns, measured in the
// kernel by block 0's thread 0; nvidia-smi in the background gives the board's view).
// Lab harness, not part of the build:
//   nvcc -O3 -arch=sm_90 [-DBF16] [-DPER_SM=1] -o mma_peak bench/hg3/mma_peak.cu && ./mma_peak [ITERS]
// Each warp keeps ACC independent 16x8 accumulators (4 f32 registers each) so that ACC mma
// are in flight between dependent ones; the A and B fragments are loop-invariant registers
// (the tensor core does not care about the values; the result is stored so nothing is dead).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>

#ifndef ACC
#define ACC 16
#endif
#ifndef PER_SM
#define PER_SM 2 /* blocks of 8 warps per SM: 2 = 4 warps per scheduler; 1 = the GEMM's 2 */
#endif
#ifdef BF16
#define MMA_TYPE "bf16.bf16"
#else
#define MMA_TYPE "f16.f16"
#endif

__global__ void __launch_bounds__(256) mma_loop(float *out, long long *clk, int iters, uint32_t seed)
{
  uint32_t a0 = seed ^ threadIdx.x, a1 = a0 * 3u, a2 = a0 * 5u, a3 = a0 * 7u;
  uint32_t b0 = a0 * 11u, b1 = a0 * 13u;
  float d[ACC][4];
#pragma unroll
  for (int t = 0; t < ACC; ++t) d[t][0] = d[t][1] = d[t][2] = d[t][3] = 0.0f;
  long long c0 = clock64();
  unsigned long long g0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int t = 0; t < ACC; ++t)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPE ".f32 "
                   "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(d[t][0]), "+f"(d[t][1]), "+f"(d[t][2]), "+f"(d[t][3])
                   : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  long long c1 = clock64();
  unsigned long long g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  float s = 0.0f;
#pragma unroll
  for (int t = 0; t < ACC; ++t) s += d[t][0] + d[t][1] + d[t][2] + d[t][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (blockIdx.x == 0 && threadIdx.x == 0) { clk[0] = c1 - c0; clk[1] = (long long)(g1 - g0); }
}

int main(int argc, char **argv)
{
  int iters = argc > 1 ? atoi(argv[1]) : 4096;
  int dev = 0, sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int threads = 256, per_sm = PER_SM;
  int blocks = sms * per_sm;
  float *out; long long *clk;
  cudaMalloc(&out, (size_t)blocks * threads * 4);
  cudaMalloc(&clk, 16);
  double flop = 2.0 * 16 * 8 * 16 * ACC * (double)iters * (blocks * threads / 32);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  mma_loop<<<blocks, threads>>>(out, clk, iters, 1); /* warm-up */
  cudaDeviceSynchronize();
  /* one launch's time, to size the sustained run at about 200 ms */
  cudaEventRecord(a);
  mma_loop<<<blocks, threads>>>(out, clk, iters, 2);
  cudaEventRecord(b); cudaEventSynchronize(b);
  float one; cudaEventElapsedTime(&one, a, b);
  int sustained = (int)(200.0f / one) + 1;
  const int runs[] = {20, sustained, 20};
  for (int r = 0; r < 3; ++r) {
    int n = runs[r];
    cudaEventRecord(a);
    for (int w = 0; w < n; ++w) mma_loop<<<blocks, threads>>>(out, clk, iters, 3 + w);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    long long h[2]; cudaMemcpy(h, clk, 16, cudaMemcpyDeviceToHost);
    printf("mma.sync m16n8k16 %s ACC=%d %d SMs x %d warps: %4d launches %.1f ms: %.1f TFLOP/s, "
           "last launch's SM clock %.0f MHz\n", MMA_TYPE, ACC, sms, per_sm * threads / 32, n, ms,
           flop * n / ms / 1e9, h[1] ? 1e3 * (double)h[0] / (double)h[1] : 0.0);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) { printf("error: %s\n", cudaGetErrorString(e)); return 1; }
  return 0;
}
