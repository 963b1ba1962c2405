/* refuse.c: the generated launchers of refuse.fus check their arguments the way libfusrt's
 * launch path does, and refuse bad ones before touching CUDA (issue 11 item 16).
 *
 * tests/embed.sh compiles refuse.fus with fusc and nvcc and links this C99 program with the
 * CUDA runtime's launch entry points wrapped (-Wl,--wrap=...): every call of one is counted
 * and fails, so no GPU is needed and a launcher that reaches CUDA shows. Each refusal must
 * return cudaErrorInvalidValue with its reason in NAME_last_error() and make no CUDA call; one
 * valid call shows that the wrapping works (it does reach CUDA).
 * Prints one line per case; exit 0 when every case holds, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refuse.h"

static int cuda_calls;

/* The wrapped entry points: what `<<<...>>>` starts with, and what launchers call after it
 * or for shared memory and workspaces. Counted, and failed without calling CUDA. */
unsigned __wrap___cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem,
					    struct CUstream_st *stream)
{
	(void)grid, (void)block, (void)smem, (void)stream;
	cuda_calls++;
	return 1; /* nonzero: the kernel stub is not called */
}

cudaError_t __wrap_cudaGetLastError(void)
{
	cuda_calls++;
	return cudaErrorNotSupported;
}

cudaError_t __wrap_cudaGetDevice(int *dev)
{
	(void)dev;
	cuda_calls++;
	return cudaErrorNotSupported;
}

cudaError_t __wrap_cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
	(void)p, (void)n, (void)s;
	cuda_calls++;
	return cudaErrorNotSupported;
}

static int failures;

/* One call's outcome: refused with cudaErrorInvalidValue, a reason containing `why`, and no
 * CUDA call since `before`. */
static void refused(const char *what, cudaError_t e, const char *text, const char *why,
		    int before)
{
	bool ok = e == cudaErrorInvalidValue && strstr(text, why) && cuda_calls == before;
	printf("%s %s: %s (%d CUDA calls)\n", ok ? "ok" : "FAIL", what, text, cuda_calls - before);
	if (!ok)
		printf("  expected cudaErrorInvalidValue (got %d) and '%s'\n", (int)e, why);
	failures += !ok;
}

#define REFUSED(call, fusion, why)                                                        \
	do {                                                                              \
		int before_ = cuda_calls;                                                 \
		cudaError_t e_ = call;                                                    \
		refused(#call, e_, fusion##_last_error(), why, before_);                  \
	} while (0)

int main(void)
{
	const int64_t big = (int64_t)1 << 32;
	float *p = (float *)(uintptr_t)4096; /* aligned, never dereferenced */

	/* M * N = 2^64 wrapped to 0 and the launcher returned success having done nothing */
	REFUSED(m2(NULL, NULL, big, big, 0), m2,
		"m2: sizes too large: the size of x in bytes does not fit in 64 bits");
	REFUSED(m2(p, p, big, big, 0), m2,
		"m2: sizes too large: the size of x in bytes does not fit in 64 bits");
	REFUSED(m2(NULL, NULL, 1000, 1000, 0), m2, "m2: x is a null pointer (4000000 bytes)");
	REFUSED(m2(p, NULL, 5, 7, 0), m2, "m2: y is a null pointer (140 bytes)");
	REFUSED(m2(p, p, -1, 7, 0), m2, "m2: size M = -1 is negative");
	/* 2^62 bytes fit, but a grid of 2^52 blocks does not */
	REFUSED(m2(p, p, (int64_t)1 << 30, (int64_t)1 << 30, 0), m2,
		"m2: grid dimension x = 4503599627370496 exceeds the CUDA limit 2147483647");
	/* N + 1023 overflowed before */
	REFUSED(saxpy(2.0f, NULL, NULL, NULL, INT64_MAX, 0), saxpy,
		"saxpy: sizes too large: the size of x in bytes does not fit in 64 bits");
	/* a null pointer is 16-byte aligned: refused as null first */
	REFUSED(saxpy(2.0f, p, NULL, p, 4096, 0), saxpy, "saxpy: y is a null pointer");
	REFUSED(saxpy(2.0f, p, p, p, (int64_t)1 << 60, 0), saxpy,
		"saxpy: grid dimension x = 1125899906842624 exceeds the CUDA limit");
	REFUSED(fixed(NULL, p, 0), fixed, "fixed: x is a null pointer");
	REFUSED(fixed(p, NULL, 0), fixed, "fixed: total is a null pointer");

	/* empty tensors may be null: nothing to do, success, no CUDA call */
	int before = cuda_calls;
	cudaError_t e = m2(NULL, NULL, 0, big * 1024, 0);
	bool ok = e == cudaSuccess && cuda_calls == before;
	printf("%s m2(NULL, NULL, 0, 2^42): empty, success without CUDA\n", ok ? "ok" : "FAIL");
	failures += !ok;

	/* a valid call reaches CUDA (the wrapped launch fails): the counting works */
	before = cuda_calls;
	e = saxpy(2.0f, p, p, p, 4096, 0);
	ok = e != cudaSuccess && cuda_calls > before && strstr(saxpy_last_error(), "launch failed");
	printf("%s saxpy(valid): reaches CUDA: %s (%d CUDA calls)\n", ok ? "ok" : "FAIL",
	       saxpy_last_error(), cuda_calls - before);
	failures += !ok;

	printf("%s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
