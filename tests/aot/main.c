/* main.c: a plain C program (cc, no nvcc, no CUDA runtime library) that calls two
 * ahead-of-time objects written by `fusc --emit=obj` (tests/embed.sh builds it):
 * saxpy.o from examples/saxpy.fus (sm_80 and sm_90 cubins, compute_90 PTX) and scale_h.o
 * from scale_h.fus with --prefix=aot_ (an f16 scalar passed as its bits).
 *
 * Without a GPU: the launchers refuse bad arguments with libfusrt's reasons (before the
 * driver is needed), a good launch returns cudaErrorInsufficientDriver or
 * cudaErrorNoDevice, and the program prints "skipped: no CUDA device" and exits 77.
 * With one: saxpy and scale_h at several sizes, checked on the CPU; exit 0 or 1.
 */
#include <fusrt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saxpy.h"
#include "scale_h.h"

static int failures;

static void expect(int cond, const char *what)
{
	if (!cond) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

static int run_saxpy(int64_t n)
{
	size_t bytes = (size_t)n * sizeof(float);
	float *x = malloc(bytes), *y = malloc(bytes), *z = malloc(bytes);
	fusrt_devptr dx, dy, dz;
	int bad = 0;

	for (int64_t i = 0; i < n; i++) {
		x[i] = (float)(i % 97) * 0.5f;
		y[i] = (float)(i % 13) - 6.0f;
	}
	if (fusrt_malloc(&dx, bytes) || fusrt_malloc(&dy, bytes) || fusrt_malloc(&dz, bytes) ||
	    fusrt_copy_to_device(dx, x, bytes) || fusrt_copy_to_device(dy, y, bytes)) {
		printf("FAIL: device memory: %s\n", fusrt_last_error());
		exit(1);
	}
	cudaError_t e = saxpy(2.0f, (const float *)(uintptr_t)dx, (const float *)(uintptr_t)dy,
			      (float *)(uintptr_t)dz, n, NULL);
	if (e != cudaSuccess || fusrt_synchronize() || fusrt_copy_to_host(z, dz, bytes)) {
		printf("FAIL: saxpy N = %lld: %d %s %s\n", (long long)n, (int)e, saxpy_last_error(),
		       fusrt_last_error());
		bad = 1;
	}
	for (int64_t i = 0; i < n && !bad; i++)
		if (z[i] != 2.0f * x[i] + y[i]) {
			printf("FAIL: saxpy N = %lld: z[%lld] = %g, want %g\n", (long long)n,
			       (long long)i, z[i], 2.0f * x[i] + y[i]);
			bad = 1;
		}
	printf("saxpy N = %lld: %s\n", (long long)n, bad ? "FAIL" : "ok");
	fusrt_free(dx);
	fusrt_free(dy);
	fusrt_free(dz);
	free(x);
	free(y);
	free(z);
	return bad;
}

/* y = 2 * x in f16: x in [1, 2) gives y in [2, 4), the same mantissa one exponent up. */
static int run_scale_h(int64_t n)
{
	size_t bytes = (size_t)n * 2;
	uint16_t *x = malloc(bytes), *y = malloc(bytes);
	fusrt_devptr dx, dy;
	int bad = 0;

	for (int64_t i = 0; i < n; i++)
		x[i] = (uint16_t)(0x3c00 + i % 1024);
	if (fusrt_malloc(&dx, bytes) || fusrt_malloc(&dy, bytes) ||
	    fusrt_copy_to_device(dx, x, bytes)) {
		printf("FAIL: device memory: %s\n", fusrt_last_error());
		exit(1);
	}
	cudaError_t e = aot_scale_h(0x4000 /* 2.0 */, (const uint16_t *)(uintptr_t)dx,
				    (uint16_t *)(uintptr_t)dy, n, NULL);
	if (e != cudaSuccess || fusrt_synchronize() || fusrt_copy_to_host(y, dy, bytes)) {
		printf("FAIL: scale_h N = %lld: %s\n", (long long)n, aot_scale_h_last_error());
		bad = 1;
	}
	for (int64_t i = 0; i < n && !bad; i++)
		if (y[i] != x[i] + 0x400) {
			printf("FAIL: scale_h: y[%lld] = 0x%04x, want 0x%04x\n", (long long)i, y[i],
			       x[i] + 0x400);
			bad = 1;
		}
	printf("scale_h N = %lld: %s\n", (long long)n, bad ? "FAIL" : "ok");
	fusrt_free(dx);
	fusrt_free(dy);
	free(x);
	free(y);
	return bad;
}

int main(void)
{
	const float *fx = (const float *)0x10000, *fy = (const float *)0x20000;
	float *fz = (float *)0x30000;

	/* refusals: checked by libfusrt before the driver is needed */
	expect(saxpy(1.0f, fx, fy, fz, -1, NULL) == cudaErrorInvalidValue, "N = -1 refused");
	printf("saxpy(N = -1): refused: %s\n", saxpy_last_error());
	expect(strstr(saxpy_last_error(), "N") != NULL, "the reason names N");
	expect(saxpy(1.0f, fx + 1, fy, fz, 64, NULL) == cudaErrorInvalidValue,
	       "a misaligned x refused");
	printf("saxpy(x + 1): refused: %s\n", saxpy_last_error());
	expect(strstr(saxpy_last_error(), "aligned") != NULL, "the reason says aligned");

	fusrt_status s = fusrt_init();
	if (s == FUSRT_ERR_NO_DRIVER || s == FUSRT_ERR_NO_DEVICE) {
		cudaError_t e = saxpy(1.0f, fx, fy, fz, 64, NULL);
		expect(e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice,
		       "without a GPU a launch returns cudaErrorInsufficientDriver or NoDevice");
		printf("saxpy without a GPU: %d: %s\n", (int)e, saxpy_last_error());
		if (failures)
			return 1;
		printf("skipped: no CUDA device (%s: %s)\n", fusrt_status_name(s), fusrt_last_error());
		return 77;
	}
	if (s != FUSRT_OK) {
		printf("FAIL: fusrt_init: %s\n", fusrt_last_error());
		return 1;
	}
	const int64_t sizes[] = {1, 7, 4096, 1000003};
	for (int i = 0; i < 4; i++) {
		failures += run_saxpy(sizes[i]);
		failures += run_scale_h(sizes[i]);
	}
	expect(saxpy(1.0f, fx, fy, fz, 0, NULL) == cudaSuccess, "N = 0 launches nothing");
	printf("%s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
