/* check_interp.c: the reference interpreter gives exact results on small fusions (saxpy,
 * broadcast, transpose, f16/bf16 rounding, sum/max with NaN, integer corner cases) and its
 * f16/bf16 conversions are exact (every f16 bit pattern round-trips). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/scheduler.h"
#include "interp/interp.h"

/* The compilation of the running test (freed by the fixture's teardown). */
static Arena *arena;
static Diag *diag;

static void teardown(void)
{
	if (arena)
		arena_free(arena);
	if (diag)
		diag_free(diag);
	arena = NULL;
	diag = NULL;
}

/* Compiles `src` and returns its first fusion (the test fails on diagnostics). */
static Fusion *compile(const char *src)
{
	teardown();
	Arena *a = arena = arena_new();
	Diag *d = diag = diag_new();
	int file = diag_add_file(d, "test.fus", src, strlen(src));
	Program *p = compile_program(a, d, file);
	char *text = diag_render(d);

	ck_assert_msg(p && diag_error_count(d) == 0, "compile failed:\n%s", text);
	free(text);
	ck_assert_int_ge(p->nfusions, 1);
	return p->fusions[0];
}

static void run_ok(Fusion *f, const int64_t *sizes, const double *scalars, void **in,
		   void **out)
{
	char *err = NULL;
	bool ok = interp_run(f, sizes, scalars, in, out, &err);

	ck_assert_msg(ok, "interp_run failed: %s", err ? err : "?");
}

START_TEST(test_saxpy)
{
	Fusion *f = compile("fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
			    "  z[i] = a * x[i] + y[i];\n}\n");
	float x[4] = {1, 2, 3, 4.5f}, y[4] = {0.5f, -1, 0, 100}, z[4];
	int64_t n = 4;
	double a = 2;
	void *in[] = {x, y}, *out[] = {z};

	run_ok(f, &n, &a, in, out);
	ck_assert_float_eq(z[0], 2.5f);
	ck_assert_float_eq(z[1], 3.0f);
	ck_assert_float_eq(z[2], 6.0f);
	ck_assert_float_eq(z[3], 109.0f);
}
END_TEST

START_TEST(test_f32_rounding_per_op)
{
	/* x + y is rounded to f32 before the subtraction: 1 + 2^-24 rounds to 1 (tie, even), so
	 * z is exactly 0 (an interpreter computing in double would give 2^-24). */
	Fusion *f = compile("fusion r(x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
			    "  z[i] = (x[i] + y[i]) - x[i];\n}\n");
	float x[1] = {1.0f}, y[1] = {0x1p-24f}, z[1];
	int64_t n = 1;
	void *in[] = {x, y}, *out[] = {z};

	run_ok(f, &n, NULL, in, out);
	ck_assert_float_eq(z[0], 0.0f);
}
END_TEST

START_TEST(test_broadcast)
{
	Fusion *f = compile("fusion bc(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
			    "  y[i, j] = x[i, j] * b[j];\n}\n");
	float x[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 100, 1000}, y[6];
	int64_t sizes[2] = {2, 3};
	void *in[] = {x, b}, *out[] = {y};
	float want[6] = {10, 200, 3000, 40, 500, 6000};

	ck_assert_str_eq(f->sizes[0]->name, "M");
	run_ok(f, sizes, NULL, in, out);
	for (int i = 0; i < 6; i++)
		ck_assert_float_eq(y[i], want[i]);
}
END_TEST

START_TEST(test_transpose)
{
	Fusion *f = compile("fusion t(x: f32[M, N]) -> (y: f32[N, M]) {\n"
			    "  y[j, i] = x[i, j];\n}\n");
	float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
	int64_t sizes[2] = {2, 3}; /* M, N */
	void *in[] = {x}, *out[] = {y};
	float want[6] = {1, 4, 2, 5, 3, 6};

	run_ok(f, sizes, NULL, in, out);
	for (int i = 0; i < 6; i++)
		ck_assert_float_eq(y[i], want[i]);
}
END_TEST

START_TEST(test_matmul)
{
	Fusion *f = compile("fusion mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {\n"
			    "  C[i, j] = sum(k: A[i, k] * B[k, j]);\n}\n");
	float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {7, 8, 9, 10, 11, 12}, C[4];
	int64_t sizes[3];
	void *in[] = {A, B}, *out[] = {C};

	for (int i = 0; i < f->nsizes; i++) /* M=2, K=3, N=2 whatever the order */
		sizes[i] = strcmp(f->sizes[i]->name, "K") == 0 ? 3 : 2;
	run_ok(f, sizes, NULL, in, out);
	ck_assert_float_eq(C[0], 58);
	ck_assert_float_eq(C[1], 64);
	ck_assert_float_eq(C[2], 139);
	ck_assert_float_eq(C[3], 154);
	ck_assert_double_eq(interp_reduction_terms(f->outputs[0], sizes), 3.0);
}
END_TEST

START_TEST(test_f16_store_rounding)
{
	Fusion *f = compile("fusion h(x: f32[N]) -> (y: f16[N], z: bf16[N]) {\n"
			    "  y[i] = x[i];\n  z[i] = x[i];\n}\n");
	float x[7] = {1 + 0x1p-11f, 1 + 3 * 0x1p-11f, 65519.0f, 65520.0f, 0x1p-25f,
		      3 * 0x1p-25f, -2.0f};
	uint16_t y[7], z[7];
	uint16_t want_h[7] = {0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x0000, 0x0002, 0xc000};
	int64_t n = 7;
	void *in[] = {x}, *out[] = {y, z};

	run_ok(f, &n, NULL, in, out);
	for (int i = 0; i < 7; i++)
		ck_assert_msg(y[i] == want_h[i], "f16 %d: got 0x%04x want 0x%04x", i, y[i],
			      want_h[i]);
	/* bf16: 1 + 2^-11 and 1 + 3*2^-11 are below half an ulp (2^-8) of 1 */
	ck_assert_uint_eq(z[0], 0x3f80);
	ck_assert_uint_eq(z[1], 0x3f80);
	ck_assert_uint_eq(z[6], 0xc000);
}
END_TEST

START_TEST(test_f16_arith_in_f32)
{
	/* f16 + f16 is computed in f32 and rounded once on store: 2049 is not an f16 (ulp 2
	 * there), 2048 + 1 -> tie -> 2048 (even); 2048 + 3 = 2051 -> tie -> 2052. */
	Fusion *f = compile("fusion h(x: f16[N], y: f16[N]) -> (z: f16[N]) {\n"
			    "  z[i] = x[i] + y[i];\n}\n");
	uint16_t x[2] = {dtype_f16_bits(2048), dtype_f16_bits(2048)};
	uint16_t y[2] = {dtype_f16_bits(1), dtype_f16_bits(3)}, z[2];
	int64_t n = 2;
	void *in[] = {x, y}, *out[] = {z};

	run_ok(f, &n, NULL, in, out);
	ck_assert_double_eq(dtype_f16_value(z[0]), 2048);
	ck_assert_double_eq(dtype_f16_value(z[1]), 2052);
}
END_TEST

START_TEST(test_bf16_rounding)
{
	ck_assert_uint_eq(dtype_bf16_bits(1 + 0x1p-8), 0x3f80);     /* tie -> even */
	ck_assert_uint_eq(dtype_bf16_bits(1 + 3 * 0x1p-8), 0x3f82); /* tie -> even */
	ck_assert_uint_eq(dtype_bf16_bits(1 + 0x1p-8 + 0x1p-20), 0x3f81);
	ck_assert_uint_eq(dtype_bf16_bits(INFINITY), 0x7f80);
	ck_assert_uint_eq(dtype_bf16_bits(3.4e38), 0x7f80); /* rounds past the largest */
	ck_assert(isnan(dtype_bf16_value(dtype_bf16_bits(NAN))));
	ck_assert_double_eq(dtype_round(DT_BF16, 1 + 3 * 0x1p-8), 1 + 0x1p-6);
}
END_TEST

START_TEST(test_f16_roundtrip_exhaustive)
{
	for (uint32_t b = 0; b < 0x10000; b++) {
		double v = dtype_f16_value((uint16_t)b);
		if (isnan(v))
			continue;
		ck_assert_msg(dtype_f16_bits(v) == b, "0x%04x -> %g -> 0x%04x", b, v,
			      dtype_f16_bits(v));
		ck_assert_double_eq(dtype_round(DT_F16, v), v);
	}
	ck_assert_double_eq(dtype_f16_value(0x0001), 0x1p-24);
	ck_assert_double_eq(dtype_f16_value(0x7bff), 65504);
	ck_assert_uint_eq(dtype_f16_bits(NAN) & 0x7e00, 0x7e00);
}
END_TEST

START_TEST(test_sum_max_nan)
{
	Fusion *f = compile("fusion r(x: f32[M, N]) -> (s: f32[M], m: f32[M], n: f32[M]) {\n"
			    "  s[i] = sum(j: x[i, j]);\n  m[i] = max(j: x[i, j]);\n"
			    "  n[i] = min(j: x[i, j]);\n}\n");
	float x[9] = {1, 2, 3, NAN, -1, 3, 1e8f, 1, -1e8f}, s[3], m[3], n[3];
	int64_t sizes[2] = {3, 3};
	void *in[] = {x}, *out[] = {s, m, n};

	run_ok(f, sizes, NULL, in, out);
	ck_assert_float_eq(s[0], 6);
	ck_assert(isnan(s[1]));
	ck_assert_float_eq(s[2], 1); /* accumulated in double: f32 would give 0 */
	ck_assert_float_eq(m[0], 3);
	ck_assert(isnan(m[1])); /* NaN first, then larger values: still NaN */
	ck_assert_float_eq(m[2], 1e8f);
	ck_assert_float_eq(n[0], 1);
	ck_assert(isnan(n[1]));
	ck_assert_float_eq(n[2], -1e8f);
}
END_TEST

START_TEST(test_int_semantics)
{
	Fusion *f = compile("fusion q(x: i32[N], y: i32[N]) -> (d: i32[N], r: i32[N], s: i32[N]) {\n"
			    "  d[i] = x[i] / y[i];\n  r[i] = x[i] % y[i];\n"
			    "  s[i] = x[i] * y[i];\n}\n");
	int32_t x[4] = {7, -7, INT32_MIN, 65536}, y[4] = {2, 2, -1, 65536}, d[4], r[4], s[4];
	int64_t n = 4;
	void *in[] = {x, y}, *out[] = {d, r, s};

	run_ok(f, &n, NULL, in, out);
	ck_assert_int_eq(d[0], 3);
	ck_assert_int_eq(d[1], -3); /* truncation, like C and CUDA */
	ck_assert_int_eq(r[1], -1);
	ck_assert_int_eq(d[2], INT32_MIN); /* wraps, without a C INT_MIN / -1 */
	ck_assert_int_eq(r[2], 0);
	ck_assert_int_eq(s[3], 0);  /* 2^32 wraps to 0 in i32 */
	/* a zero divisor is undefined on the GPU: the reference refuses it (issue 11 item 17) */
	y[2] = 0;
	char *err = NULL;
	ck_assert(!interp_run(f, &n, NULL, in, out, &err));
	ck_assert_str_eq(err, "integer division by zero in the definition of d (undefined on the GPU)");
	free(err);
}
END_TEST

START_TEST(test_select_cast_and_params)
{
	Fusion *f = compile("fusion c(t: f32, x: f32[N]) -> (y: i32[N], z: f32[N]) {\n"
			    "  y[i] = i32(x[i]);\n  z[i] = x[i] > t ? x[i] : t;\n}\n");
	float x[4] = {2.7f, -2.7f, 0.5f, 3e9f}, z[4];
	int32_t y[4];
	double t = 1.0;
	int64_t n = 4;
	void *in[] = {x}, *out[] = {y, z};

	run_ok(f, &n, &t, in, out);
	ck_assert_int_eq(y[0], 2);
	ck_assert_int_eq(y[1], -2);
	ck_assert_int_eq(y[3], INT32_MAX); /* saturates like cvt.rzi */
	ck_assert_float_eq(z[0], 2.7f);
	ck_assert_float_eq(z[2], 1.0f);
}
END_TEST

START_TEST(test_intermediate_and_softmax)
{
	Fusion *f = compile("fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
			    "  m[i]    = max(j: x[i, j]);\n  e[i, j] = exp(x[i, j] - m[i]);\n"
			    "  s[i]    = sum(j: e[i, j]);\n  y[i, j] = e[i, j] / s[i];\n}\n");
	float x[4] = {0, 0, 1, 1 + logf(3)}, y[4];
	int64_t sizes[2] = {2, 2};
	void *in[] = {x}, *out[] = {y};

	run_ok(f, sizes, NULL, in, out);
	ck_assert_float_eq_tol(y[0], 0.5f, 1e-7f);
	ck_assert_float_eq_tol(y[1], 0.5f, 1e-7f);
	ck_assert_float_eq_tol(y[2], 0.25f, 1e-7f);
	ck_assert_float_eq_tol(y[3], 0.75f, 1e-7f);
	ck_assert_double_eq(interp_reduction_terms(f->outputs[0], sizes), 2.0);
}
END_TEST

START_TEST(test_sizes_checked)
{
	Fusion *f = compile("fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
			    "  z[i] = a * x[i] + y[i];\n}\n");
	int64_t n = -1;
	char *err = NULL;

	ck_assert(!fusion_check_sizes(f, &n, &err));
	ck_assert_str_eq(err, "size N is negative (-1)");
	free(err);
	n = 0; /* empty tensors are fine */
	ck_assert(fusion_check_sizes(f, &n, NULL));
	float dummy;
	void *in[] = {&dummy, &dummy}, *out[] = {&dummy};
	double a = 1;
	run_ok(f, &n, &a, in, out);
}
END_TEST

START_TEST(test_eval_i64)
{
	Arena *a = arena_new();
	IrExpr *e = ix_ceildiv(a, NULL, ir_int(a, 10), ir_int(a, 4));
	int64_t v = 0;

	ck_assert(ir_eval_i64(e, NULL, &v));
	ck_assert_int_eq(v, 3);
	ck_assert(!ir_eval_i64(ir_op(a, OP_DIV, DT_I64, ir_int(a, 1), ir_int(a, 0)), NULL, &v));
	ck_assert(!ir_eval_i64(ir_float(a, DT_F32, 1.5), NULL, &v));
	arena_free(a);
}
END_TEST

START_TEST(test_fill_random)
{
	Fusion *f = compile("fusion k(x: f32[N], y: f16[N], b: bool[N], k: i32[N]) -> (z: f32[N]) {\n"
			    "  z[i] = x[i] + f32(y[i]) + f32(k[i]) + (b[i] ? 1.0 : 0.0);\n}\n");
	int64_t n = 1000;
	HostTensor h[4], h2;
	char *err = NULL;

	for (int t = 0; t < 4; t++) {
		ck_assert_msg(host_tensor_init(&h[t], f->inputs[t], &n, &err), "%s", err);
		host_tensor_fill_random(&h[t], 42 + t);
		bool nonzero = false;
		for (int64_t i = 0; i < n; i++) {
			double v = host_tensor_get(&h[t], i);
			ck_assert(v >= -8 && v <= 8);
			if (dtype_is_float(h[t].dtype))
				ck_assert(v >= -1 && v <= 1);
			if (h[t].dtype == DT_I32)
				ck_assert(v != 0);
			nonzero |= v != 0;
		}
		ck_assert(nonzero);
	}
	ck_assert(host_tensor_init(&h2, f->inputs[0], &n, NULL));
	host_tensor_fill_random(&h2, 42);
	ck_assert_int_eq(memcmp(h2.data, h[0].data, host_tensor_bytes(&h2)), 0);
	host_tensor_fill_random(&h2, 43);
	ck_assert_int_ne(memcmp(h2.data, h[0].data, host_tensor_bytes(&h2)), 0);
	for (int t = 0; t < 4; t++)
		host_tensor_free(&h[t]);
	host_tensor_free(&h2);
}
END_TEST

Suite *interp_suite(void)
{
	Suite *s = suite_create("interp");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, NULL, teardown);

	tcase_add_test(tc, test_saxpy);
	tcase_add_test(tc, test_f32_rounding_per_op);
	tcase_add_test(tc, test_broadcast);
	tcase_add_test(tc, test_transpose);
	tcase_add_test(tc, test_matmul);
	tcase_add_test(tc, test_f16_store_rounding);
	tcase_add_test(tc, test_f16_arith_in_f32);
	tcase_add_test(tc, test_bf16_rounding);
	tcase_add_test(tc, test_f16_roundtrip_exhaustive);
	tcase_add_test(tc, test_sum_max_nan);
	tcase_add_test(tc, test_int_semantics);
	tcase_add_test(tc, test_select_cast_and_params);
	tcase_add_test(tc, test_intermediate_and_softmax);
	tcase_add_test(tc, test_sizes_checked);
	tcase_add_test(tc, test_eval_i64);
	tcase_add_test(tc, test_fill_random);
	suite_add_tcase(s, tc);
	return s;
}
