/* exp_lowp.cu: the error bound of fusc's approximate exp (tests/gpu.sh, part "exp_lowp").
 * An exp that only f16/bf16 results see is emitted as exp2f(x * 1.44269504f) (ex2.approx.f32;
 * frontend/lowp_exp.c, backend/cuda_expr.c). This program computes it on the GPU for every
 * 64th f32 bit pattern with |x| < 104 (and the special values), and checks each result
 * against exp in double: relative error at most 2^-22 + |x| * 2^-23 (the bound
 * docs/language.md states), plus two subnormal steps (2^-148) where exp(x) is subnormal
 * (there ex2.approx.f32 scales its operand: relative errors up to 2^-18.5 were measured);
 * inf and NaN where exp gives them. Exit 0 PASS, 1 FAIL, 77 no CUDA device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the text backend/cuda_expr.c emits for OP_EXP_LOWP */
__global__ void exp_lowp(const float *x, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = exp2f(x[i] * 1.44269504f);
}

int main(void)
{
	int dev = 0;
	if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
		fprintf(stderr, "exp_lowp: no CUDA device\n");
		return 77;
	}
	/* every 64th bit pattern of [-104, 104] (both signs), then special values */
	static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.7f, 88.8f, 89.0f, -87.3f,
					-100.0f, -103.9f, -104.5f, -200.0f, 200.0f, INFINITY,
					-INFINITY, NAN};
	unsigned top;
	float lim = 104.0f;
	memcpy(&top, &lim, sizeof top);
	long long n = 2LL * (top / 64 + 1) + (long long)(sizeof special / sizeof *special);
	float *hx = (float *)malloc(sizeof(float) * (size_t)n), *hy = (float *)malloc(sizeof(float) * (size_t)n);
	long long k = 0;
	for (unsigned u = 0; u <= top; u += 64) {
		float f;
		memcpy(&f, &u, sizeof f);
		hx[k++] = f;
		hx[k++] = -f;
	}
	for (size_t i = 0; i < sizeof special / sizeof *special; i++)
		hx[k++] = special[i];
	n = k;
	float *dx, *dy;
	if (cudaMalloc(&dx, sizeof(float) * (size_t)n) != cudaSuccess ||
	    cudaMalloc(&dy, sizeof(float) * (size_t)n) != cudaSuccess) {
		fprintf(stderr, "exp_lowp: cudaMalloc failed\n");
		return 1;
	}
	cudaMemcpy(dx, hx, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
	exp_lowp<<<(unsigned)((n + 255) / 256), 256>>>(dx, dy, n);
	if (cudaMemcpy(hy, dy, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fprintf(stderr, "exp_lowp: kernel failed\n");
		return 1;
	}
	long long bad = 0;
	double worst = 0, worst_x = 0, worst_ratio = 0;
	for (long long i = 0; i < n; i++) {
		double x = hx[i], want = exp(x), got = hy[i];
		bool ok;
		if (isnan(x))
			ok = isnan(got);
		else if (want > 3.4028234663852886e38) /* overflows f32 */
			ok = isinf(got) || got > 3.0e38;
		else if (want < 1.1754943508222875e-38) /* subnormal or 0 in f32: the same bound,
							 * plus 2 subnormal steps of rounding */
			ok = fabs(got - want) <= (ldexp(1, -22) + fabs(x) * ldexp(1, -23)) * want +
						     2 * 1.401298464324817e-45;
		else {
			double rel = fabs(got - want) / want, bound = ldexp(1, -22) + fabs(x) * ldexp(1, -23);
			ok = rel <= bound;
			if (rel > worst) {
				worst = rel;
				worst_x = x;
			}
			if (rel / bound > worst_ratio)
				worst_ratio = rel / bound;
		}
		if (!ok && bad++ < 5)
			fprintf(stderr, "exp_lowp: x = %.9g: got %.9g, exp %.9g\n", x, got, want);
	}
	printf("exp_lowp: %lld values, max rel err %.3g (2^%.1f) at x = %.6g, at most %.2f of the bound, %lld outside: %s\n",
	       n, worst, log2(worst), worst_x, worst_ratio, bad, bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}
