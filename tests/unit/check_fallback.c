/* check_fallback.c: the scalar fallback of auto-scheduled fusions (Kernel.fallback). The
 * automatic schedule vectorizes by 16 bytes, which needs aligned pointers and row strides that
 * are multiples of the vector width; when they fail, the launcher runs a scalar kernel instead
 * of refusing (the user did not ask for vectors). A user's vectorize() still refuses. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "runtime/runtime.h"
#include "tests/unit/testutil.h"

/* bias_gelu without a schedule block: 2-D, so the row stride N must be a multiple of 4. */
static const char auto_src[] =
	"fusion bias_gelu(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
	"  h[i, j] = x[i, j] + b[j];\n"
	"  y[i, j] = 0.5 * h[i, j] * (1.0 + erf(h[i, j] * 0.7071067811865476));\n"
	"}\n";

static const char user_src[] =
	"fusion bias_gelu(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
	"  h[i, j] = x[i, j] + b[j];\n"
	"  y[i, j] = 0.5 * h[i, j] * (1.0 + erf(h[i, j] * 0.7071067811865476));\n"
	"}\n"
	"schedule bias_gelu {\n"
	"  y.split(j, 4) -> (jo, jv);\n"
	"  y.split(jo, 128) -> (jb, jt);\n"
	"  y.bind(i, blockIdx.y);\n"
	"  y.bind(jb, blockIdx.x);\n"
	"  y.bind(jt, threadIdx.x);\n"
	"  y.vectorize(jv);\n"
	"}\n";

static bool has_multiple(Kernel *k, const char *size, int64_t value)
{
	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		if (p->kind == PC_MULTIPLE && strcmp(p->size->name, size) == 0 && p->value == value)
			return true;
	}
	return false;
}

START_TEST(test_auto_has_fallback)
{
	TestCompile *tc = tc_compile(auto_src, true);

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	ck_assert(k->fusion->auto_scheduled);
	ck_assert(has_multiple(k, "N", 4));
	ck_assert_ptr_nonnull(k->fallback);
	ck_assert_str_eq(k->name, "bias_gelu_kernel");
	ck_assert_str_eq(k->fallback->name, "bias_gelu_kernel_scalar");
	ck_assert_int_eq(k->fallback->preconds.len, 0);
	ck_assert_ptr_null(k->fallback->fallback);
	ck_assert_ptr_eq(k->fallback->fusion, k->fusion);
	/* the fallback has no vector copies */
	Buf b = {0};
	kir_print(k->fallback, &b);
	ck_assert_not_contains(b.s, "vec");
	buf_free(&b);
	tc_free(tc);
}
END_TEST

START_TEST(test_user_vectorize_refuses)
{
	TestCompile *tc = tc_compile(user_src, true);

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert(has_multiple(tc->kernels[0], "N", 4));
	ck_assert_ptr_null(tc->kernels[0]->fallback);
	char *cu = tc_cuda(tc);
	ck_assert_not_contains(cu, "_scalar");
	ck_assert_contains(cu, "    return fus_fail(bias_gelu_error_text, \"bias_gelu: N = %lld is "
			   "not a multiple of 4 (vectorized access, t.fus:");
	free(cu);
	fusrt_arg args[3] = {fusrt_ptr(0x1000), fusrt_ptr(0x2000), fusrt_ptr(0x3000)};
	int64_t sizes[2] = {3, 1002}, dims[6];
	ck_assert_int_eq(rt_launch_check(tc->kernels[0], args, 3, sizes, 2, dims),
			 FUSRT_ERR_PRECONDITION);
	tc_free(tc);
}
END_TEST

START_TEST(test_launcher_dispatch)
{
	TestCompile *tc = tc_compile(auto_src, true);

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "// Kernels: bias_gelu_kernel bias_gelu_kernel_scalar.");
	ck_assert_contains(cu, "extern \"C\" __global__ void __launch_bounds__(128) "
			   "bias_gelu_kernel(const float *__restrict__ x");
	ck_assert_contains(cu, "extern \"C\" __global__ void __launch_bounds__(128) "
			   "bias_gelu_kernel_scalar(const float *__restrict__ x");
	ck_assert_contains(cu,
		"  // bias_gelu_kernel when x, b and y are 16-byte aligned and N is a multiple of 4\n"
		"  if ((uintptr_t)x % 16 == 0 && (uintptr_t)b % 16 == 0 && (uintptr_t)y % 16 == 0 "
		"&& N % 4 == 0) {\n");
	ck_assert_contains(cu, "    bias_gelu_kernel<<<dim3(");
	ck_assert_contains(cu, "    return fus_err;\n  }\n");
	ck_assert_contains(cu, "  bias_gelu_kernel_scalar<<<dim3(");
	ck_assert_not_contains(cu, "is not a multiple of");
	ck_assert_not_contains(cu, "-byte aligned (");
	/* the device part with both kernels compiles for sm_80 */
	Buf dev = {0};
	cuda_emit_device(tc->kernels, 1, &dev);
	char *ptx = NULL, *log = NULL;
	size_t len = 0;
	ck_assert_msg(nvrtc_compile(dev.s, "t.cu", 80, false, &ptx, &len, &log), "%s", log);
	ck_assert_contains(ptx, ".entry bias_gelu_kernel(");
	ck_assert_contains(ptx, ".entry bias_gelu_kernel_scalar(");
	free(ptx);
	free(log);
	buf_free(&dev);
	Buf h = {0};
	header_emit(tc->kernels, 1, "t.fus", "t", &h);
	ck_assert_contains(h.s, " * Variants (the launcher runs the first whose conditions hold): "
			   "bias_gelu_kernel when x, b and\n * y are 16-byte aligned and N is a multiple "
			   "of 4; bias_gelu_kernel_scalar otherwise.\n");
	buf_free(&h);
	free(cu);
	tc_free(tc);
}
END_TEST

/* The runtime picks the kernel as the launcher does. */
START_TEST(test_runtime_pick)
{
	TestCompile *tc = tc_compile(auto_src, true);
	fusrt_arg args[3] = {fusrt_ptr(0x1000), fusrt_ptr(0x2000), fusrt_ptr(0x3000)};
	int64_t sizes[2] = {3, 1024}, dims[6]; /* M, N */

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	ck_assert_ptr_eq(rt_pick_kernel(k, args, sizes), k);
	ck_assert_int_eq(rt_launch_check(k, args, 3, sizes, 2, dims), FUSRT_OK);
	sizes[1] = 1002;
	ck_assert_ptr_eq(rt_pick_kernel(k, args, sizes), k->fallback);
	ck_assert_int_eq(rt_launch_check(k, args, 3, sizes, 2, dims), FUSRT_OK);
	sizes[1] = 1024;
	args[1] = fusrt_ptr(0x2004);
	ck_assert_ptr_eq(rt_pick_kernel(k, args, sizes), k->fallback);
	ck_assert_int_eq(rt_launch_check(k, args, 3, sizes, 2, dims), FUSRT_OK);
	tc_free(tc);
}
END_TEST

/* Simulates k at M=3, N=1002; returns the number of wrong or unwritten elements of y. */
static int64_t simulate_bad(Kernel *k, int *nreports)
{
	int64_t sizes[2] = {3, 1002}, M = 3, N = 1002;
	float *x = malloc(sizeof(float) * M * N), *b = malloc(sizeof(float) * N);
	float *y = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N);
	for (int64_t e = 0; e < M * N; e++)
		x[e] = (float)((e * 37) % 101 - 50) / 8.0f;
	for (int64_t e = 0; e < N; e++)
		b[e] = (float)((e * 13) % 17 - 8) / 4.0f;
	void *ins[2] = {x, b}, *outs[1] = {y}, *refs[1] = {ref};
	char *err = NULL;
	ck_assert_msg(interp_run(k->fusion, sizes, NULL, ins, refs, &err), "%s", err);
	for (int64_t e = 0; e < M * N; e++)
		y[e] = NAN;
	SimResult r;
	SimOptions so = {.seed = 1};
	ck_assert(sim_run(k, sizes, NULL, ins, outs, &so, &r));
	int64_t bad = 0;
	for (int64_t e = 0; e < M * N; e++)
		bad += !r.written[0][e] || !(fabsf(y[e] - ref[e]) <= 1e-5f + 1e-5f * fabsf(ref[e]));
	*nreports = r.nreports;
	sim_result_free(&r);
	free(x);
	free(b);
	free(y);
	free(ref);
	return bad;
}

START_TEST(test_fallback_simulates)
{
	TestCompile *tc = tc_compile(auto_src, true);
	int nreports = -1;

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_int_eq(simulate_bad(tc->kernels[0]->fallback, &nreports), 0);
	ck_assert_int_eq(nreports, 0);
	tc_free(tc);
}
END_TEST

Suite *fallback_suite(void)
{
	Suite *s = suite_create("fallback");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_auto_has_fallback);
	tcase_add_test(tc, test_user_vectorize_refuses);
	tcase_add_test(tc, test_launcher_dispatch);
	tcase_add_test(tc, test_runtime_pick);
	tcase_add_test(tc, test_fallback_simulates);
	suite_add_tcase(s, tc);
	return s;
}
