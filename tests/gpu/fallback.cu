/* fallback.cu: the scalar fallback of an auto-scheduled launcher, built ahead of time with nvcc
 * (tests/gpu.sh, part "fallback"). bench/pointwise/bias_gelu_auto.fus is compiled by fusc to
 * bias_gelu.cu/.h; this program runs the launcher
 *   - with 16-byte aligned pointers and N a multiple of 4 (the vectorized kernel),
 *   - with N = 1002 (not a multiple of 4: the scalar kernel),
 *   - with x one float past an aligned address (misaligned: the scalar kernel),
 * poisons y before each run and checks every element against the formula on the CPU.
 * Exit 0 PASS, 1 FAIL, 77 no CUDA device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bias_gelu.h"

#define CK(call)                                                                          \
	do {                                                                              \
		cudaError_t e_ = (call);                                                  \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));       \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

/* Runs y = bias_gelu(x + xoff, b) over [m, n] and returns the number of wrong elements. */
static long run(int64_t m, int64_t n, int xoff)
{
	size_t cnt = (size_t)(m * n);
	float *x = (float *)malloc((cnt + 4) * sizeof(float)), *b = (float *)malloc(n * sizeof(float));
	float *y = (float *)malloc(cnt * sizeof(float));
	float *dx, *db, *dy;
	for (size_t i = 0; i < cnt + 4; i++)
		x[i] = (float)((i * 7919) % 2001) * 0.003f - 3.0f;
	for (int64_t j = 0; j < n; j++)
		b[j] = (float)(j % 13) * 0.1f - 0.6f;
	CK(cudaMalloc((void **)&dx, (cnt + 4) * sizeof(float)));
	CK(cudaMalloc((void **)&db, n * sizeof(float)));
	CK(cudaMalloc((void **)&dy, cnt * sizeof(float)));
	CK(cudaMemcpy(dx, x, (cnt + 4) * sizeof(float), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, b, n * sizeof(float), cudaMemcpyHostToDevice));
	CK(cudaMemset(dy, 0xff, cnt * sizeof(float))); /* NaN poison */
	cudaError_t e = bias_gelu(dx + xoff, db, dy, m, n, 0);
	if (e != cudaSuccess) {
		fprintf(stderr, "bias_gelu(M = %lld, N = %lld, x offset %d): %s\n", (long long)m,
			(long long)n, xoff, bias_gelu_last_error());
		exit(1);
	}
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(y, dy, cnt * sizeof(float), cudaMemcpyDeviceToHost));
	long wrong = 0;
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			double h = (double)x[xoff + i * n + j] + b[j];
			double want = 0.5 * h * (1.0 + erf(h * 0.7071067811865476));
			float got = y[i * n + j];
			if (!(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want)) && wrong++ == 0)
				fprintf(stderr, "y[%lld, %lld] = %g, expected %g\n", (long long)i,
					(long long)j, got, want);
		}
	printf("M = %lld, N = %lld, x offset %d floats: %ld wrong\n", (long long)m, (long long)n,
	       xoff, wrong);
	CK(cudaFree(dx));
	CK(cudaFree(db));
	CK(cudaFree(dy));
	free(x);
	free(b);
	free(y);
	return wrong;
}

int main(void)
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("skipped: no CUDA device\n");
		return 77;
	}
	long bad = run(513, 1024, 0) + run(513, 1002, 0) + run(513, 1024, 1) + run(3, 1, 1);
	printf("%s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}
