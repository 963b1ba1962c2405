/* check_index32.c: the 32-bit index variants (passes/index32.c): every kernel of the chain
 * gets a copy with 32-bit index arithmetic in front of it, taken while every element count fits
 * (PC_INDEX32), never past it. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "passes/passes.h"
#include "tests/unit/testutil.h"

/* Automatic 2-D: vector preconditions, so the chain is i32, 64-bit, i32 scalar, scalar. */
static const char bias_src[] =
	"fusion bias_gelu(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
	"  h[i, j] = x[i, j] + b[j];\n"
	"  y[i, j] = 0.5 * h[i, j] * (1.0 + erf(h[i, j] * 0.7071067811865476));\n"
	"}\n";

static const char *picked(Kernel *k, int64_t m, int64_t n)
{
	int64_t sizes[2] = {m, n};
	Kernel *v = kernel_pick(k, sizes, NULL);
	return v ? v->name : "(none)";
}

START_TEST(test_chain_and_pick)
{
	TestCompile *tc = tc_compile_i32(bias_src);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	static const char *const chain[] = {"bias_gelu_kernel_i32", "bias_gelu_kernel",
					    "bias_gelu_kernel_i32_scalar", "bias_gelu_kernel_scalar"};
	int n = 0;
	for (Kernel *v = k; v; v = v->fallback, n++) {
		ck_assert_int_lt(n, countof(chain));
		ck_assert_str_eq(v->name, chain[n]);
		/* the 64-bit kernels keep their own preconditions: no index bound */
		ck_assert((kernel_index32(v) != NULL) == (strstr(v->name, "_i32") != NULL));
	}
	ck_assert_int_eq(n, countof(chain));
	/* small sizes: 32-bit; N odd fails the vector preconditions: the scalar ones */
	ck_assert_str_eq(picked(k, 1000, 1000), "bias_gelu_kernel_i32");
	ck_assert_str_eq(picked(k, 1000, 1001), "bias_gelu_kernel_i32_scalar");
	/* 2^31 elements exactly, and just over: 64-bit (no allocation: preconditions only) */
	ck_assert_str_eq(picked(k, 65536, 32768), "bias_gelu_kernel");
	ck_assert_str_eq(picked(k, (1LL << 29) + 1, 4), "bias_gelu_kernel");
	ck_assert_str_eq(picked(k, 2147483649LL, 3), "bias_gelu_kernel_scalar");
	ck_assert_str_eq(picked(k, 2147483649LL, 1), "bias_gelu_kernel_scalar");
	/* a product past 64 bits does not wrap into a small count */
	ck_assert_str_eq(picked(k, 1LL << 40, 1LL << 40), "bias_gelu_kernel");
	ck_assert_str_eq(picked(k, (1LL << 32) + 1, (1LL << 32)), "bias_gelu_kernel");
	/* the bound itself: at most value elements (short rows: M * 128 threads, more than the
	 * bound, index no further than the tensors) */
	Precond *p = kernel_index32(k);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_lt(p->value, INT32_MAX);
	ck_assert_int_gt(p->value, INT32_MAX / 2);
	int64_t at[2] = {p->value / 4, 4}, over[2] = {p->value / 4 + 1, 4};
	ck_assert(precond_holds(k->fusion, p, at, NULL));
	ck_assert(!precond_holds(k->fusion, p, over, NULL));
	tc_free(tc);
}
END_TEST

/* One wording for the header, --verbose, libfusrt and the launcher's comment and test. */
START_TEST(test_wording)
{
	TestCompile *tc = tc_compile_i32(bias_src);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Precond *p = kernel_index32(tc->kernels[0]);
	Arena *a = arena_new();
	Buf b = {0};
	precond_condition(p, &b);
	ck_assert_str_eq(b.s, "every tensor and loop nest has at most 2130706431 elements");
	PrecondText t = precond_failure(a, p);
	ck_assert(!t.sized);
	ck_assert_str_eq(t.pre, "a tensor or loop nest has more than 2130706431 elements "
				"(32-bit indices)");
	/* the launcher tests the same counts, saturated (fus_mul31), before the 64-bit kernel */
	Buf cu = {0};
	cuda_emit(tc->kernels, 1, "t.fus", &cu);
	ck_assert_contains(cu.s, "// bias_gelu_kernel_i32 when ");
	ck_assert_contains(cu.s, "every tensor and loop nest has at most 2130706431 elements\n");
	ck_assert_contains(cu.s, "fus_mul31(");
	ck_assert_contains(cu.s, "static long long fus_mul31(long long a, long long b)");
	buf_free(&b);
	buf_free(&cu);
	arena_free(a);
	tc_free(tc);
}
END_TEST

/* The body of kernel `name` in cu (up to the next kernel). */
static char *kernel_text(const char *cu, const char *name)
{
	char head[256];
	snprintf(head, sizeof head, " %s(", name);
	const char *s = strstr(cu, head);
	ck_assert_msg(s != NULL, "no kernel %s", name);
	const char *e = strstr(s + 1, "extern \"C\"");
	size_t n = e ? (size_t)(e - s) : strlen(s);
	char *t = malloc(n + 1);
	memcpy(t, s, n);
	t[n] = 0;
	return t;
}

/* In the 32-bit kernel the indices are int and the sizes read as (int); the 64-bit kernel is
 * unchanged. A value computed from indices stays 64-bit: widened explicitly. */
START_TEST(test_types)
{
	static const char src[] =
		"fusion rowsum(x: f32[M, N]) -> (s: f32[M]) {\n"
		"  s[i] = sum(j: x[i, j]);\n"
		"}\n"
		"schedule rowsum {\n"
		"  s.split(i, 4) -> (io, ii);\n"
		"  s.bind(io, blockIdx.x);\n"
		"  s.bind(ii, threadIdx.x);\n"
		"}\n";
	TestCompile *tc = tc_compile_i32(src);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_str_eq(tc->kernels[0]->name, "rowsum_kernel_i32");
	Buf cu = {0};
	cuda_emit(tc->kernels, 1, "t.fus", &cu);
	char *k32 = kernel_text(cu.s, "rowsum_kernel_i32"), *k64 = kernel_text(cu.s, "rowsum_kernel");
	ck_assert_contains(k32, "for (int j = 0; j < (int)N; ++j)");
	ck_assert_contains(k32, "((int)blockIdx.x) * 4 + ((int)threadIdx.x) < (int)M");
	ck_assert_contains(k64, "for (long long j = 0; j < N; ++j)");
	/* only the parameters are long long in the 32-bit kernel */
	ck_assert_ptr_null(strstr(strchr(k32, '{'), "long long"));
	free(k32);
	free(k64);
	buf_free(&cu);
	tc_free(tc);
}
END_TEST

/* Constant shapes that fit: the kernel itself is 32-bit, no variant, no precondition. */
START_TEST(test_constant_shapes)
{
	static const char src[] =
		"fusion c(x: f32[64, 256]) -> (y: f32[64, 256]) {\n"
		"  y[i, j] = x[i, j] * 2.0;\n"
		"}\n"
		"schedule c {\n"
		"  y.bind(j, threadIdx.x);\n"
		"}\n";
	TestCompile *tc = tc_compile_i32(src);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	ck_assert_str_eq(k->name, "c_kernel");
	ck_assert_ptr_null(k->fallback);
	ck_assert_int_eq(k->preconds.len, 0);
	Buf cu = {0};
	cuda_emit(tc->kernels, 1, "t.fus", &cu);
	ck_assert_contains(cu.s, "for (int i = 0; i < 64; ++i)");
	buf_free(&cu);
	tc_free(tc);
}
END_TEST

/* Lowering the fusion again (the scheduler's trial kernels are reused: Fusion.lowered) gives
 * the same chain; the reused 64-bit kernels never take the variant's precondition. */
START_TEST(test_reuse_keeps_preconditions)
{
	TestCompile *tc = tc_compile_i32(bias_src);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Fusion *f = tc->prog->fusions[0];
	LowerOptions o = {.arch = 80};
	for (int round = 0; round < 2; round++) {
		Kernel *k = lower_fusion(tc->arena, tc->diag, f, &o);
		ck_assert_ptr_nonnull(k);
		ck_assert_str_eq(k->name, "bias_gelu_kernel_i32");
		ck_assert_str_eq(k->fallback->name, "bias_gelu_kernel");
		ck_assert_ptr_null(kernel_index32(k->fallback));
		ck_assert_str_eq(k->fallback->fallback->name, "bias_gelu_kernel_i32_scalar");
		ck_assert_ptr_nonnull(kernel_index32(k->fallback->fallback));
	}
	for (Kernel *c = f->lowered; c; c = c->fallback)
		ck_assert_ptr_null(kernel_index32(c));
	o.no_index32 = true;
	Kernel *k = lower_fusion(tc->arena, tc->diag, f, &o);
	ck_assert_str_eq(k->name, "bias_gelu_kernel");
	tc_free(tc);
}
END_TEST

/* The simulator runs the 32-bit kernel the launch contract picks, with its 32-bit
 * arithmetic (the simulator wraps i32), and gets the reference's values. */
START_TEST(test_simulates)
{
	TestCompile *tc = tc_compile_i32(bias_src);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	int64_t sizes[2] = {37, 1000};
	Kernel *k = kernel_pick(tc->kernels[0], sizes, NULL);
	ck_assert_str_eq(k->name, "bias_gelu_kernel_i32");
	int nreports = -1;
	ck_assert_int_eq(tc_simulate_bias_gelu(k, 37, 1000, &nreports), 0);
	ck_assert_int_eq(nreports, 0);
	tc_free(tc);
}
END_TEST

/* Size variants and segments: each kernel gets its variant, named after it. */
START_TEST(test_variants_and_segments)
{
	static const char src[] =
		"fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  m[i]    = max(j: x[i, j]);\n"
		"  e[i, j] = exp(x[i, j] - m[i]);\n"
		"  s[i]    = sum(j: e[i, j]);\n"
		"  y[i, j] = e[i, j] / s[i];\n"
		"}\n";
	TestCompile *tc = tc_compile_i32(src);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	ck_assert_str_eq(k->name, "softmax_kernel_N128_i32");
	ck_assert_str_eq(k->fallback->name, "softmax_kernel_N128");
	ck_assert_str_eq(k->fallback->fallback->name, "softmax_kernel_N128_i32_scalar");
	Kernel *plan = kernel_last_variant(k);
	ck_assert_int_gt(plan->segments.len, 0);
	for (int i = 0; i < plan->segments.len; i++) {
		Kernel *s = VEC_AT(plan->segments, Kernel, i);
		ck_assert_ptr_nonnull(strstr(s->name, "_i32"));
		ck_assert_ptr_nonnull(kernel_index32(s));
	}
	ck_assert_str_eq(picked(k, 4, 100), "softmax_kernel_N128_i32");
	ck_assert_str_eq(picked(k, 1LL << 26, 100), "softmax_kernel_N128");
	tc_free(tc);
}
END_TEST

/* A matrix product's counts are its tensors', not its loop nest's M * N * K: 4096^3 (and
 * the padded plan's product at odd sizes) runs 32-bit, a 65536 x 32768 output does not. */
START_TEST(test_matmul_counts)
{
	TestCompile *tc = tc_compile_i32("fusion mm(A: f16[M, K], B: f16[K, N]) -> (C: f32[M, N]) {\n"
					 "  C[i, j] = sum(k: A[i, k] * B[k, j]);\n"
					 "}\n");
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	int64_t big[3] = {4096, 4096, 4096}, odd[3] = {4096, 4095, 4095};
	int64_t over[3] = {65536, 16, 32768};
	ck_assert_str_eq(kernel_pick(k, big, NULL)->name, "mm_kernel_i32");
	Kernel *plan = kernel_pick(k, odd, NULL);
	ck_assert_str_eq(plan->name, "mm_segments");
	Kernel *product = VEC_AT(plan->segments, Kernel, plan->segments.len - 1);
	ck_assert_ptr_nonnull(strstr(product->name, "_i32"));
	ck_assert_str_eq(kernel_pick(k, over, NULL)->name, "mm_kernel");
	tc_free(tc);
}
END_TEST

/* `index64()` (written, or the automatic FMA GEMM's): no 32-bit copies, the chain is the
 * 64-bit kernel and its scalar kernel */
static int chain_i32(TestCompile *tc, int *len)
{
	int n = 0, i32 = 0;
	for (Kernel *v = tc->kernels[0]; v; v = v->fallback, n++)
		i32 += strstr(v->name, "_i32") != NULL;
	*len = n;
	return i32;
}

START_TEST(test_index64)
{
	static const char fma[] = "fusion mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {\n"
				  "  C[i, j] = sum(k: A[i, k] * B[k, j]);\n"
				  "}\n";
	int len;
	TestCompile *tc = tc_compile_i32(fma);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_int_eq(chain_i32(tc, &len), 0);
	ck_assert_int_eq(len, 2);
	tc_free(tc);
	/* a written schedule: with the directive no copy, without it one per kernel */
	static const char *const src[2] = {
		"fusion bias(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
		"  y[i, j] = x[i, j] + b[j];\n"
		"}\n"
		"schedule bias { y.merge(i, j) -> r; y.split(r, 128) -> (ro, ri);\n"
		"  y.bind(ro, blockIdx.x); y.bind(ri, threadIdx.x); y.index64(); }\n",
		"fusion bias(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
		"  y[i, j] = x[i, j] + b[j];\n"
		"}\n"
		"schedule bias { y.merge(i, j) -> r; y.split(r, 128) -> (ro, ri);\n"
		"  y.bind(ro, blockIdx.x); y.bind(ri, threadIdx.x); }\n"};
	for (int w = 0; w < 2; w++) {
		tc = tc_compile_i32(src[w]);
		ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
		ck_assert_int_eq(chain_i32(tc, &len), w == 0 ? 0 : 1);
		tc_free(tc);
	}
}
END_TEST

Suite *index32_suite(void)
{
	Suite *s = suite_create("index32");
	TCase *tc = tcase_create("index32");

	tcase_add_test(tc, test_chain_and_pick);
	tcase_add_test(tc, test_wording);
	tcase_add_test(tc, test_types);
	tcase_add_test(tc, test_constant_shapes);
	tcase_add_test(tc, test_reuse_keeps_preconditions);
	tcase_add_test(tc, test_simulates);
	tcase_add_test(tc, test_variants_and_segments);
	tcase_add_test(tc, test_matmul_counts);
	tcase_add_test(tc, test_index64);
	suite_add_tcase(s, tc);
	return s;
}
