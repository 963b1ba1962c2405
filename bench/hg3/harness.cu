// Times one generated f16 GEMM launcher (KFILE, LAUNCH: A f16[M,K], B f16[K,N] -> C f32[M,N])
// at M=N=K=S and checks it against a naive kernel. Lab harness (hgemm3), not part of the build.
// HG_IT=N in the environment: N launches back to back per timing (default 20; 600 is the
// sustained, do_bench-like load of about 200 ms).
#include KFILE
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>
__global__ void ref_kernel(const __half *A, const __half *B, float *C, int M, int K, int N)
{
  int i = blockIdx.y * 16 + threadIdx.y, j = blockIdx.x * 16 + threadIdx.x;
  if (i >= M || j >= N) return;
  float s = 0.0f;
  for (int k = 0; k < K; ++k) s += __half2float(A[(long long)i * K + k]) * __half2float(B[(long long)k * N + j]);
  C[(long long)i * N + j] = s;
}
int main(int argc, char **argv)
{
  int M = argc > 1 ? atoi(argv[1]) : 4096, N = argc > 2 ? atoi(argv[2]) : M, K = argc > 3 ? atoi(argv[3]) : M;
  std::vector<__half> hA((size_t)M * K), hB((size_t)K * N);
  srand(1);
  for (auto &x : hA) x = __float2half((rand() % 2001 - 1000) / 1000.0f);
  for (auto &x : hB) x = __float2half((rand() % 2001 - 1000) / 1000.0f);
  __half *A, *B; float *C, *R;
  cudaMalloc(&A, hA.size() * 2); cudaMalloc(&B, hB.size() * 2);
  cudaMalloc(&C, (size_t)M * N * 4); cudaMalloc(&R, (size_t)M * N * 4);
  cudaMemcpy(A, hA.data(), hA.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB.data(), hB.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(C, 0, (size_t)M * N * 4);
  cudaError_t e = LAUNCH((const uint16_t *)A, (const uint16_t *)B, C, M, K, N, 0);
  if (e != cudaSuccess) { printf("launch: %s\n", cudaGetErrorString(e)); return 1; }
  ref_kernel<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, R, M, K, N);
  std::vector<float> hC((size_t)M * N), hR((size_t)M * N);
  cudaMemcpy(hC.data(), C, hC.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hR.data(), R, hR.size() * 4, cudaMemcpyDeviceToHost);
  double maxerr = 0;
  for (size_t t = 0; t < hC.size(); ++t) maxerr = fmax(maxerr, fabs(hC[t] - hR[t]));
  if (argc > 4) { printf("%s %dx%dx%d: maxerr %.3g\n", KFILE, M, N, K, maxerr); return 0; } /* no timing */
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int w = 0; w < 3; ++w) LAUNCH((const uint16_t *)A, (const uint16_t *)B, C, M, K, N, 0);
  const int it = getenv("HG_IT") ? atoi(getenv("HG_IT")) : 20; /* 600: sustained, ~200 ms */
  float best = 1e30f;
  for (int r = 0; r < 3; ++r) {
    cudaEventRecord(a);
    for (int w = 0; w < it; ++w) LAUNCH((const uint16_t *)A, (const uint16_t *)B, C, M, K, N, 0);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); ms /= it; if (ms < best) best = ms;
  }
  e = cudaGetLastError();
  printf("%s %dx%dx%d: %.4f ms %.1f TFLOP/s maxerr %.3g %s\n", KFILE, M, N, K, best,
         2.0 * M * N * K / best / 1e9, maxerr, e == cudaSuccess ? "" : cudaGetErrorString(e));
  return 0;
}
