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

START_TEST(test_fallback_simulates)
{
	TestCompile *tc = tc_compile(auto_src, true);
	int nreports = -1;

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_int_eq(tc_simulate_bias_gelu(tc->kernels[0]->fallback, 3, 1002, &nreports), 0);
	ck_assert_int_eq(nreports, 0);
	tc_free(tc);
}
END_TEST


/* ---- size variants (issue 13 item 2) ------------------------------------------------------ */

static const char softmax_src[] =
	"fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
	"  m[i]    = max(j: x[i, j]);\n"
	"  e[i, j] = exp(x[i, j] - m[i]);\n"
	"  s[i]    = sum(j: e[i, j]);\n"
	"  y[i, j] = e[i, j] / s[i];\n"
	"}\n";

/* The name of the variant kernel_pick chooses at (M, N), pointers aligned or not. */
static const char *picked(Kernel *k, int64_t n, bool aligned)
{
	int64_t sizes[2] = {3, n};
	uint64_t ptrs[2] = {0x1000, aligned ? 0x2000 : 0x2004};
	Kernel *v = kernel_pick(k, sizes, ptrs);
	return v ? v->name : "(none)";
}

/* A symbolic row length: one kernel per row-length bucket (and its scalar kernel), then the
 * fusion's own; the launcher takes the first whose conditions hold, on both sides of every
 * boundary. */
START_TEST(test_size_variants_pick)
{
	TestCompile *tc = tc_compile(softmax_src, true);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	static const char *const chain[] = {
		"softmax_kernel_N128", "softmax_kernel_N128_scalar",
		"softmax_kernel_N256", "softmax_kernel_N256_scalar", "softmax_kernel_N1024",
		"softmax_kernel_N1024_scalar", "softmax_kernel_N4096", "softmax_kernel_N4096_scalar",
		"softmax_kernel_N16384", "softmax_kernel_N16384_scalar", "softmax_kernel_N65536",
		"softmax_kernel_N65536_scalar", "softmax_segments",
	};
	int n = 0;
	for (Kernel *v = k; v; v = v->fallback, n++) {
		ck_assert_int_lt(n, countof(chain));
		ck_assert_str_eq(v->name, chain[n]);
		/* a variant's bound is its first precondition; the scalar kernels keep only it */
		bool bounded = strstr(v->name, "_N") != NULL;
		if (bounded) {
			Precond *p = VEC_AT(v->preconds, Precond, 0);
			ck_assert_int_eq(p->kind, PC_AT_MOST);
			ck_assert_str_eq(p->size->name, "N");
		}
		if (strstr(v->name, "scalar"))
			ck_assert_int_eq(v->preconds.len, bounded ? 1 : 0);
	}
	ck_assert_int_eq(n, countof(chain));
	ck_assert_ptr_eq(kernel_own(k)->fusion, tc->prog->fusions[0]);
	ck_assert_str_eq(kernel_own(k)->name, "softmax_segments");
	ck_assert_str_eq(picked(k, 0, true), "softmax_kernel_N128");
	ck_assert_str_eq(picked(k, 1, true), "softmax_kernel_N128_scalar");
	ck_assert_str_eq(picked(k, 128, true), "softmax_kernel_N128");
	ck_assert_str_eq(picked(k, 129, true), "softmax_kernel_N256_scalar");
	ck_assert_str_eq(picked(k, 132, true), "softmax_kernel_N256");
	ck_assert_str_eq(picked(k, 256, true), "softmax_kernel_N256");
	ck_assert_str_eq(picked(k, 256, false), "softmax_kernel_N256_scalar");
	ck_assert_str_eq(picked(k, 257, true), "softmax_kernel_N1024_scalar");
	ck_assert_str_eq(picked(k, 260, true), "softmax_kernel_N1024");
	ck_assert_str_eq(picked(k, 4096, true), "softmax_kernel_N4096");
	ck_assert_str_eq(picked(k, 4100, true), "softmax_kernel_N16384");
	ck_assert_str_eq(picked(k, 16384, true), "softmax_kernel_N16384");
	ck_assert_str_eq(picked(k, 16385, true), "softmax_kernel_N65536_scalar");
	ck_assert_str_eq(picked(k, 16388, true), "softmax_kernel_N65536");
	ck_assert_str_eq(picked(k, 16388, false), "softmax_kernel_N65536_scalar");
	ck_assert_str_eq(picked(k, 65536, true), "softmax_kernel_N65536");
	/* longer rows: the segmented plan (scheduler/segment.c) */
	ck_assert_str_eq(picked(k, 65537, true), "softmax_segments");
	ck_assert_str_eq(picked(k, 65540, false), "softmax_segments");
	/* libfusrt picks the same */
	fusrt_arg args[2] = {fusrt_ptr(0x1000), fusrt_ptr(0x2000)};
	int64_t sizes[2] = {3, 4100};
	ck_assert_str_eq(rt_pick_kernel(k, args, sizes)->name, "softmax_kernel_N16384");
	/* the launcher tests the same conditions in the same order */
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "  // softmax_kernel_N256 when N <= 256, x and y are 16-byte aligned "
			   "and N is a multiple of 4\n  if (N <= 256 && (uintptr_t)x % 16 == 0 && "
			   "(uintptr_t)y % 16 == 0 && N % 4 == 0) {\n");
	ck_assert_contains(cu, "  // softmax_kernel_N256_scalar when N <= 256\n  if (N <= 256) {\n");
	ck_assert_contains(cu, "  softmax_kernel_N65536_scalar<<<");
	ck_assert_contains(cu, "(fus_err = softmax_seg0(x, (float *)fus_seg[0], M, N, stream))");
	free(cu);
	tc_free(tc);
}
END_TEST

/* Bounds in range analysis: N <= 4096 bounds ceil(N / 4); no bound, no upper end. */
START_TEST(test_size_bound_range)
{
	Arena *a = arena_new();
	SizeSym n = {.name = "N"};
	IrExpr *e = ix_ceildiv(a, NULL, ir_size(a, &n), ir_int(a, 4));
	int64_t lo, hi;
	ck_assert(!ir_range(NULL, e, &lo, &hi));
	n.bound = 4096;
	ck_assert(ir_range(NULL, e, &lo, &hi));
	ck_assert_int_eq(lo, 0);
	ck_assert_int_eq(hi, 1024);
	arena_free(a);
}
END_TEST

/* A bounded variant keeps its row in a register array sized by the bound, indexed by
 * unrolled loops that run to the bound under a guard; the simulator refuses to run it past
 * its bound. */
START_TEST(test_size_variant_registers)
{
	TestCompile *tc = tc_compile(softmax_src, true);
	char *text = tc_variant_ir(tc, "softmax_kernel_N4096");
	ck_assert_contains(text, "require N <= 4096;\n");
	ck_assert_contains(text, "alloc local f32 x_reg[32]");
	ck_assert_contains(text, "for jr in [0, 8) unroll {");
	ck_assert_contains(text, "if (jr < ceildiv(N, 512)) {");
	free(text);
	Kernel *v = tc->kernels[0];
	while (strcmp(v->name, "softmax_kernel_N4096") != 0)
		v = v->fallback;
	int64_t sizes[2] = {1, 5000};
	float x[5000], y[5000];
	void *ins[1] = {x}, *outs[1] = {y};
	for (int i = 0; i < 5000; i++)
		x[i] = (float)i;
	SimResult r;
	SimOptions so = {.seed = 1};
	ck_assert(!sim_run(v, sizes, NULL, ins, outs, &so, &r));
	ck_assert_contains(r.error, "kernel softmax_kernel_N4096 runs only for N <= 4096, not N = 5000");
	sim_result_free(&r);
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
	tcase_add_test(tc, test_size_variants_pick);
	tcase_add_test(tc, test_size_bound_range);
	tcase_add_test(tc, test_size_variant_registers);
	suite_add_tcase(s, tc);
	return s;
}
