/* main.c: embedding fusc's generated CUDA in a plain C program, ahead of time.
 *
 * The Makefile runs `fusc saxpy.fus`, which writes saxpy.cu (kernel + extern "C" launcher) and
 * saxpy.h (a C99 prototype), compiles saxpy.cu with nvcc and links it here with -lcudart. This
 * program
 *   1. shows the launcher refusing bad arguments without launching (this needs no GPU: the
 *      checks happen before any CUDA call), with the reason from saxpy_last_error();
 *   2. runs z = a*x + y on the GPU for sizes no block divides and checks every element on the
 *      CPU.
 * Prints PASS or FAIL; exit 0 PASS, 1 FAIL, 77 no CUDA device (the automake "skipped" code).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "saxpy.h"

#define EXIT_SKIP 77

/* The launcher checks its preconditions (sizes, pointer alignment of vectorized accesses)
 * and returns cudaErrorInvalidValue with a reason instead of launching. */
static int check_refusals(void)
{
	float *p = (float *)(uintptr_t)256; /* never dereferenced: the launcher refuses first */
	int bad = 0;

	cudaError_t e = saxpy(2.0f, p, p, p, -1, 0);
	printf("saxpy(N = -1): %s: %s\n", e == cudaErrorInvalidValue ? "refused" : "ACCEPTED",
	       saxpy_last_error());
	bad += e != cudaErrorInvalidValue;
	e = saxpy(2.0f, p + 1, p, p, 1000, 0);
	printf("saxpy(x misaligned): %s: %s\n", e == cudaErrorInvalidValue ? "refused" : "ACCEPTED",
	       saxpy_last_error());
	bad += e != cudaErrorInvalidValue;
	return bad;
}

/* One run of n elements; returns the number of wrong elements (or -1 on a CUDA error). */
static long run(int64_t n)
{
	size_t bytes = (size_t)n * sizeof(float);
	float *x = malloc(bytes + 1), *y = malloc(bytes + 1), *z = malloc(bytes + 1);
	float *dx = NULL, *dy = NULL, *dz = NULL;
	const float a = 1.5f;
	long wrong = -1;

	for (int64_t i = 0; i < n; i++) {
		x[i] = (float)(i % 1000) * 0.25f - 100.0f;
		y[i] = (float)(i % 7) - 3.0f;
	}
	if (cudaMalloc((void **)&dx, bytes + 1) != cudaSuccess ||
	    cudaMalloc((void **)&dy, bytes + 1) != cudaSuccess ||
	    cudaMalloc((void **)&dz, bytes + 1) != cudaSuccess ||
	    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
	    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
	    cudaMemset(dz, 0xff, bytes) != cudaSuccess) { /* NaN: an unwritten element shows */
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(cudaGetLastError()));
		goto out;
	}
	cudaError_t e = saxpy(a, dx, dy, dz, n, 0);
	if (e != cudaSuccess) {
		fprintf(stderr, "saxpy failed: %s\n", saxpy_last_error());
		goto out;
	}
	if ((e = cudaMemcpy(z, dz, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) {
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
		goto out;
	}
	wrong = 0;
	for (int64_t i = 0; i < n; i++) {
		float want = a * x[i] + y[i];
		if (!(fabsf(z[i] - want) <= 1e-5f + 1e-5f * fabsf(want))) {
			if (wrong++ == 0)
				fprintf(stderr, "N = %lld: z[%lld] = %g, expected %g\n", (long long)n,
					(long long)i, z[i], want);
		}
	}
	printf("N = %lld: %ld wrong\n", (long long)n, wrong);
out:
	cudaFree(dx);
	cudaFree(dy);
	cudaFree(dz);
	free(x);
	free(y);
	free(z);
	return wrong;
}

int main(void)
{
	static const int64_t sizes[] = {1, 7, 1024, 1000003, 1 << 24};
	int count = 0, bad = check_refusals();

	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		printf("skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return bad ? EXIT_FAILURE : EXIT_SKIP;
	}
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		if (run(sizes[i]) != 0)
			bad++;
	printf("%s\n", bad ? "FAIL" : "PASS");
	return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
