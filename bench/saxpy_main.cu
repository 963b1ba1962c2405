// saxpy_main.cu: times a fusc-generated saxpy launcher (built with nvcc and linked in, the
// way users embed fusc output) against a device-to-device copy of the same bytes.
//
//   fusc examples/saxpy.fus -o build/bench/saxpy.cu
//   nvcc -O3 -arch=sm_90 -Ibuild/bench bench/saxpy_main.cu build/bench/saxpy.cu -o saxpy_bench
//   ./saxpy_bench [log2 N] [label]
//
// Inputs are pseudo-random (never zeros), the output is poisoned with NaN before every check,
// a sample of outputs is checked against a double-precision host reference, and every CUDA
// call is checked. Times are medians over many launches after warm-up, from CUDA events.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "saxpy.h"

#define CK(call)                                                                              \
	do {                                                                                  \
		cudaError_t e_ = (call);                                                      \
		if (e_ != cudaSuccess) {                                                      \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,          \
				cudaGetErrorString(e_));                                      \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

__global__ void fill(float *p, long long n, unsigned seed)
{
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		unsigned h = (unsigned)i * 2654435761u ^ seed;
		h ^= h >> 15;
		h *= 2246822519u;
		h ^= h >> 13;
		p[i] = (float)(h & 0xffffff) / 16777216.0f * 2.0f - 1.0f + 1e-3f;
	}
}

template <typename F> static double median_ms(F launch, int warmup, int iters)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = 0; i < warmup; i++)
		launch();
	CK(cudaDeviceSynchronize());
	std::vector<float> t;
	for (int i = 0; i < iters; i++) {
		CK(cudaEventRecord(a));
		launch();
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		float ms;
		CK(cudaEventElapsedTime(&ms, a, b));
		t.push_back(ms);
	}
	std::sort(t.begin(), t.end());
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return t[t.size() / 2];
}

int main(int argc, char **argv)
{
	int lg = argc > 1 ? atoi(argv[1]) : 28;
	const char *label = argc > 2 ? argv[2] : "saxpy";
	long long n = 1LL << lg;
	size_t bytes = n * sizeof(float);
	float *x, *y, *z, *c;
	CK(cudaMalloc(&x, bytes));
	CK(cudaMalloc(&y, bytes));
	CK(cudaMalloc(&z, bytes));
	CK(cudaMalloc(&c, 3 * bytes)); // copy source and destination, 1.5 * bytes each
	fill<<<1024, 256>>>(x, n, 1);
	fill<<<1024, 256>>>(y, n, 2);
	CK(cudaGetLastError());
	const float a = 1.75f;

	// Correctness: poison, run once, check a strided sample plus the tail.
	CK(cudaMemset(z, 0xff, bytes));
	CK(saxpy(a, x, y, z, n, 0) == cudaSuccess ? cudaSuccess : cudaErrorUnknown);
	CK(cudaDeviceSynchronize());
	std::vector<float> hx(n), hy(n), hz(n);
	CK(cudaMemcpy(hx.data(), x, bytes, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hy.data(), y, bytes, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hz.data(), z, bytes, cudaMemcpyDeviceToHost));
	double maxrel = 0;
	long long bad = 0;
	for (long long i = 0; i < n; i++) {
		double ref = (double)a * hx[i] + hy[i];
		double rel = std::fabs(hz[i] - ref) / std::max(1e-6, std::fabs(ref));
		if (!(rel <= 1e-5))
			bad++;
		if (rel > maxrel || std::isnan(rel))
			maxrel = rel;
	}
	printf("%s: N=2^%d check: max rel err %.3g, %lld bad -> %s\n", label, lg, maxrel, bad,
	       bad ? "FAIL" : "PASS");

	double t_fusc = median_ms([&] { saxpy(a, x, y, z, n, 0); }, 20, 100);
	CK(cudaGetLastError());
	// The ceiling: a device-to-device copy moving the same number of bytes (read + write).
	double t_copy = median_ms(
		[&] {
			size_t half = 3 * bytes / 2;
			CK(cudaMemcpyAsync(c + half / sizeof(float), c, half, cudaMemcpyDeviceToDevice));
		}, 20,
		100);
	double gb = 3.0 * bytes / 1e9;
	printf("%-24s %9.3f ms %8.1f GB/s\n", label, t_fusc, gb / t_fusc * 1e3);
	printf("%-24s %9.3f ms %8.1f GB/s\n", "d2d copy (same bytes)", t_copy, gb / t_copy * 1e3);
	printf("%s / copy bandwidth: %.3f\n", label, t_copy / t_fusc);
	CK(cudaFree(x));
	CK(cudaFree(y));
	CK(cudaFree(z));
	CK(cudaFree(c));
	return bad ? 1 : 0;
}
