/* check_auto_classify.c: the classifier of the automatic scheduler (scheduler/classify.c,
 * docs/auto_schedule.md "Classes"): the class each bench/auto program and each example
 * (with its schedule blocks taken out, as a user without one would write it) gets, classes
 * of single outputs and of mixed fusions, the `--emit=schedule` comment, and a fusion of no
 * tuned class scheduled correctly (the simulator at sizes no split divides, 0 and 1). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "scheduler/auto_plan.h"
#include "tests/unit/testutil.h"

/* The text of path with every schedule block (a line starting with `schedule` to the next
 * line that is `}`) taken out (malloc'd). */
static char *read_unscheduled(const char *path)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s (run from the repository root)", path);
	Buf b = {0};
	char line[4096];
	bool skip = false;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "schedule", 8) == 0 && !strchr(line, ';'))
			skip = true; /* `schedule NAME {` (not `schedule NAME auto;`) */
		if (!skip)
			buf_puts(&b, line);
		if (skip && line[0] == '}')
			skip = false;
	}
	fclose(f);
	return b.s ? b.s : strdup("");
}

/* The classes of every fusion of src, "; "-separated in file order (malloc'd). */
static char *classes_of(const char *src)
{
	TestCompile *tc = tc_compile(src, false);
	ck_assert_msg(tc->prog != NULL && tc->diags[0] == 0, "did not compile:\n%s", tc->diags);
	Buf b = {0};
	for (int i = 0; i < tc->prog->nfusions; i++) {
		Fusion *f = tc->prog->fusions[i];
		ck_assert_msg(f->auto_scheduled && !f->auto_fallback, "%s: not the tuned schedule",
			      f->name);
		buf_printf(&b, "%s%s", i ? "; " : "", f->auto_class ? f->auto_class : "(none)");
	}
	tc_free(tc);
	return b.s;
}

static void expect_file(const char *path, const char *want)
{
	char *src = read_unscheduled(path);
	char *got = classes_of(src);
	ck_assert_msg(strcmp(got, want) == 0, "%s: class '%s', expected '%s'", path, got, want);
	free(got);
	free(src);
}

static void expect_src(const char *src, const char *want)
{
	char *got = classes_of(src);
	ck_assert_msg(strcmp(got, want) == 0, "class '%s', expected '%s' for\n%s", got, want, src);
	free(got);
}

static const struct {
	const char *path, *cls;
} programs[] = {
	{"bench/auto/bcast3.fus", "broadcast"},
	{"bench/auto/col_sum.fus", "outer"},
	{"bench/auto/layernorm_4096.fus", "rows"},
	{"bench/auto/layernorm_bf16.fus", "rows"},
	{"bench/auto/layernorm_f32.fus", "rows"},
	{"bench/auto/logsumexp_4096.fus", "rows"},
	{"bench/auto/logsumexp_f16.fus", "rows"},
	{"bench/auto/logsumexp_f32.fus", "rows"},
	{"bench/auto/mid_sum.fus", "middle"},
	{"bench/auto/permute3.fus", "transpose"},
	{"bench/auto/rmsnorm_4096.fus", "rows"},
	{"bench/auto/rmsnorm_bf16.fus", "rows"},
	{"bench/auto/rmsnorm_f32.fus", "rows"},
	{"bench/auto/row_sum_bf16.fus", "rows"},
	{"bench/auto/row_sum_f32.fus", "rows"},
	{"bench/auto/saxpy.fus", "pointwise"},
	{"bench/auto/saxpy_bf16.fus", "pointwise"},
	{"bench/auto/softmax_4096.fus", "rows"},
	{"bench/auto/softmax_f16.fus", "rows"},
	{"bench/auto/softmax_f32.fus", "rows"},
	{"bench/auto/total_f16.fus", "whole"},
	{"bench/auto/transpose.fus", "transpose"},
	/* bench/users: a broadcast read per row (v[k], w[i], w[b, t]) in outer and middle
	 * reductions; outputs of different classes split into segments (segment.c), and two
	 * outputs of one row group kept in one kernel */
	{"bench/users/col_wsum.fus", "outer"},
	{"bench/users/mean_var.fus", "rows"},
	{"bench/users/mid_wsum.fus", "middle"},
	{"bench/users/mixed_out.fus", "segments: broadcast; whole"},
	{"bench/users/rowcol.fus", "segments: rows; outer"},
	{"bench/users/vecmat.fus", "outer"},
	/* the examples as written without their schedule blocks */
	{"examples/bias_gelu.fus", "broadcast"},
	{"examples/gelu_auto.fus", "pointwise"},
	{"examples/half_scale.fus", "pointwise"},
	{"examples/saxpy.fus", "pointwise"},
	{"examples/transpose.fus", "transpose"},
	{"examples/cp_async/buf_gmem_local.fus", "pointwise"},
	{"examples/cp_async/buf_gmem_smem.fus", "pointwise"},
	{"examples/cp_async/buf_nested.fus", "pointwise"},
	{"examples/cp_async/buf_smem_local.fus", "pointwise"},
	{"examples/cp_async/buf_two_tensors.fus", "pointwise"},
	{"examples/cp_async/buf_vec_local.fus", "pointwise"},
	{"examples/cp_async/cp_async_cg.fus", "pointwise"},
	{"examples/cp_async/cp_async_db1_stages2.fus", "pointwise"},
	{"examples/cp_async/cp_async_db1_stages5.fus", "pointwise"},
	{"examples/cp_async/cp_async_db1_stages9.fus", "pointwise"},
	{"examples/cp_async/cp_async_db2.fus", "pointwise"},
	{"examples/cp_async/cp_async_f16.fus", "pointwise"},
	{"examples/cp_async/cp_async_simple.fus", "pointwise"},
	{"examples/cp_async/cp_async_smem_guard.fus", "pointwise"},
	{"examples/cp_async/db_no_sync.fus", "pointwise"},
	/* matrix products: batched, with an epilogue, f16 or f32 (auto_matmul.c) */
	{"examples/gemm/auto_bgemm.fus", "matmul"},
	{"examples/gemm/auto_hgemm.fus", "matmul"},
	{"examples/gemm/auto_hgemm_bias_gelu.fus", "matmul"},
	{"examples/gemm/auto_sgemm.fus", "matmul"},
	{"examples/gemm/gemm_f32.fus", "matmul"},
	{"examples/gemm/hgemm_ldmatrix.fus", "matmul"},
	{"examples/gemm/hgemm_mma.fus", "matmul"},
	/* (smem_gemm.fus is left out: its constant K = 45 refuses 16-byte copies, so it takes
	 * the scalar level of the matmul schedule, not the tuned one this table asserts) */
	{"examples/reduce/col_sum.fus", "outer"},
	{"examples/reduce/col_sum_grid.fus", "outer"},
	{"examples/reduce/layernorm.fus", "rows"},
	{"examples/reduce/layernorm_welford.fus", "rows"},
	{"examples/reduce/layernorm_welford_1024.fus", "rows"},
	/* y[i, h, j] reads reductions over j alone: its rows are not the reductions' rows */
	{"examples/reduce/persistent_norm.fus", "general"},
	{"examples/reduce/rmsnorm.fus", "rows"},
	{"examples/reduce/row_sum.fus", "rows"},
	{"examples/reduce/row_sum_grid.fus", "rows"},
	{"examples/reduce/softmax.fus", "rows"},
};

START_TEST(test_programs)
{
	for (int i = 0; i < countof(programs); i++)
		expect_file(programs[i].path, programs[i].cls);
}
END_TEST

/* One output of each class, and fusions whose outputs have different classes. */
START_TEST(test_classes)
{
	expect_src("fusion f(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j] * 2.0; }",
		   "pointwise");
	expect_src("fusion f(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) { y[i, j] = x[i, j] + b[j]; }",
		   "broadcast");
	/* a constant subscript is not the output's own index order */
	expect_src("fusion f(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j] - x[0, j]; }",
		   "broadcast");
	/* a read with no subscript that follows the output (`m[0]`, a segment's 0-d value as a
	 * 1-element tensor; `w[0, 1]`) is one element, as a 0-d read: the axes merge */
	expect_src("fusion f(x: f32[M, N], m: f32[1]) -> (y: f32[M, N]) { y[i, j] = x[i, j] - m[0]; }",
		   "pointwise");
	expect_src("fusion f(x: f32[M, N], w: f32[2, 3]) -> (y: f32[M, N]) {\n"
		   "  y[i, j] = x[i, j] * w[0, 1] + w[1, 2]; }",
		   "pointwise");
	/* ... but not one fixed subscript beside the output's index */
	expect_src("fusion f(x: f32[M, N], w: f32[2, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j] * w[1, j]; }",
		   "broadcast");
	expect_src("fusion f(x: f32[B, M, N]) -> (y: f32[B, N, M]) { y[b, j, i] = x[b, i, j]; }",
		   "transpose");
	expect_src("fusion f(x: f32[M, N]) -> (s: f32[M]) { s[i] = max(j: x[i, j]); }", "rows");
	expect_src("fusion f(x: f32[M, N]) -> (s: f32[N]) { s[j] = min(i: x[i, j]); }", "outer");
	expect_src("fusion f(x: f32[B, T, H]) -> (s: f32[B, H]) { s[b, h] = sum(t: x[b, t, h]); }",
		   "middle");
	expect_src("fusion f(x: f32[M, N]) -> (s: f32) { s = sum(i, j: x[i, j]); }", "whole");
	/* a reduction over two adjacent indices with one kept: a row of i * N + j (collapsed
	 * axes, check_auto_collapse.c); over two indices apart: not a row, outer or whole one,
	 * but its row partials over j and their column sum over i (segment.c, split_reductions) */
	expect_src("fusion f(x: f32[B, M, N]) -> (s: f32[B]) { s[b] = sum(i, j: x[b, i, j]); }",
		   "rows");
	expect_src("fusion f(x: f32[M, B, N]) -> (s: f32[B]) { s[b] = sum(i, j: x[i, b, j]); }",
		   "segments: rows; outer");
	/* a column normalization reads a column sum per element: two segments (segment.c) */
	expect_src("fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		   "  c[j] = sum(i: x[i, j]);\n"
		   "  y[i, j] = x[i, j] / c[j];\n"
		   "}",
		   "segments: outer; broadcast");
	/* three outputs of one row group: the pointwise outputs over the row sum's rows and
	 * column are computed in its nest (row_companions), all of class rows */
	expect_src("fusion f(x: f32[M, N]) -> (y: f32[M, N], z: f32[M, N], s: f32[M]) {\n"
		   "  s[i] = sum(j: x[i, j]);\n"
		   "  y[i, j] = x[i, j] + 1.0;\n"
		   "  z[i, j] = x[i, j] * 2.0;\n"
		   "}",
		   "rows");
	/* the outer class needs a fusion of one output: beside another output, the column sum
	 * is a segment of its own (segment.c), the other output another */
	expect_src("fusion f(x: f32[M, N]) -> (s: f32[N], y: f32[M, N]) {\n"
		   "  s[j] = sum(i: x[i, j]);\n"
		   "  y[i, j] = x[i, j] * 2.0;\n"
		   "}",
		   "segments: outer; pointwise");
	/* two outer reductions: one segment each (the outer schedule takes one output) */
	expect_src("fusion f(x: f32[M, N]) -> (s: f32[N], m: f32[N]) {\n"
		   "  s[j] = sum(i: x[i, j]);\n"
		   "  m[j] = max(i: x[i, j]);\n"
		   "}",
		   "segments: outer; outer");
	/* a whole-tensor sum beside a row group: two segments; two row reductions of one row
	 * group: one kernel */
	expect_src("fusion f(x: f32[M, N]) -> (r: f32[M], t: f32) {\n"
		   "  r[i] = max(j: x[i, j]);\n"
		   "  t = sum(i, j: x[i, j]);\n"
		   "}",
		   "segments: rows; whole");
	expect_src("fusion f(x: f32[M, N]) -> (r: f32[M], q: f32[M]) {\n"
		   "  r[i] = max(j: x[i, j]);\n"
		   "  q[i] = sum(j: x[i, j]);\n"
		   "}",
		   "rows");
	/* a matrix product beside another output: its own segment, where it is a matmul */
	expect_src("fusion f(A: f32[M, K], B: f32[K, N], x: f32[M, N])\n"
		   "    -> (C: f32[M, N], y: f32[M, N]) {\n"
		   "  C[i, j] = sum(k: A[i, k] * B[k, j]);\n"
		   "  y[i, j] = x[i, j] * 2.0;\n"
		   "}",
		   "segments: matmul; pointwise");
	/* outer and middle reductions with a read that lacks the column index (one value per
	 * row, loaded once per row step), directly or through an inlined intermediate */
	expect_src("fusion f(v: f32[K], A: f32[K, N]) -> (y: f32[N]) {\n"
		   "  y[j] = sum(k: v[k] * A[k, j]);\n"
		   "}",
		   "outer");
	expect_src("fusion f(v: f32[K], A: f32[K, N]) -> (y: f32[N]) {\n"
		   "  e[k] = exp(v[k]);\n"
		   "  y[j] = max(k: A[k, j] - e[k]);\n"
		   "}",
		   "outer");
	expect_src("fusion f(w: f32[B], x: f32[B, T, H]) -> (s: f32[B, H]) {\n"
		   "  s[b, h] = sum(t: w[b] * x[b, t, h]);\n"
		   "}",
		   "middle");
	expect_src("fusion f(w: f32[B, T], x: f32[B, T, H]) -> (s: f32[B, H]) {\n"
		   "  s[b, h] = sum(t: w[b, t] * x[b, t, h]);\n"
		   "}",
		   "middle");
	/* a constant subscript leaves the column out too */
	expect_src("fusion f(w: f32[B, T], x: f32[B, T, H]) -> (s: f32[B, H]) {\n"
		   "  s[b, h] = sum(t: w[b, t] * x[b, t, h] + w[b, 0]);\n"
		   "}",
		   "middle");
	/* not outer: the column index on another dimension than the last (a transposed read) */
	expect_src("fusion f(B: f32[N, K], A: f32[K, N]) -> (y: f32[N]) {\n"
		   "  y[j] = sum(k: B[j, k] * A[k, j]);\n"
		   "}",
		   "general");
}
END_TEST

/* The class as auto_classify names it, on the fusion as sema builds it. */
START_TEST(test_classify_entry)
{
	TestCompile *tc = tc_compile("fusion f(x: f32[M, N]) -> (y: f32[N, M]) { y[j, i] = x[i, j]; }\n"
				     "fusion g(x: f32[M, N]) -> (s: f32) { s = sum(i, j: x[i, j]); }\n",
				     false);
	ck_assert_ptr_nonnull(tc->prog);
	Fusion *f = sema_fusion(tc->arena, tc->diag, tc->prog->fusions[0]->ast);
	Fusion *g = sema_fusion(tc->arena, tc->diag, tc->prog->fusions[1]->ast);
	ck_assert_int_eq(auto_classify(f, f->outputs[0], false), AC_TRANSPOSE);
	ck_assert_int_eq(auto_classify(g, g->outputs[0], false), AC_WHOLE);
	/* the row verdict is auto_schedule.c's: a row group is rows whatever else it is */
	ck_assert_int_eq(auto_classify(g, g->outputs[0], true), AC_ROWS);
	for (int c = 0; c < AC_COUNT; c++)
		ck_assert_ptr_nonnull(auto_class_name((AutoClass)c));
	ck_assert_str_eq(auto_class_name(AC_MIDDLE), "middle");
	tc_free(tc);
	/* a column sum beside another output: general in its fusion, outer alone (segment.c
	 * splits it off) */
	tc = tc_compile("fusion h(x: f32[M, N]) -> (r: f32[M], c: f32[N]) {\n"
			"  r[i] = sum(j: x[i, j]);\n"
			"  c[j] = sum(i: x[i, j]);\n"
			"}\n", false);
	ck_assert_ptr_nonnull(tc->prog);
	Fusion *h = sema_fusion(tc->arena, tc->diag, tc->prog->fusions[0]->ast);
	ck_assert_int_eq(auto_outer_class(h, h->outputs[1]), AC_GENERAL);
	ck_assert_int_eq(auto_outer_class_alone(h, h->outputs[1]), AC_OUTER);
	ck_assert_int_eq(auto_outer_class_alone(h, h->outputs[0]), AC_GENERAL);
	tc_free(tc);
}
END_TEST

/* A fusion of no tuned class still gets a correct schedule: the general one, simulated at
 * sizes no split divides, 0 and 1. */
START_TEST(test_general_correct)
{
	static const char *src =
		"fusion n(x: f32[M, H, N], g: f32[H, N]) -> (y: f32[M, H, N]) {\n"
		"  a[i] = sum(j: x[i, 0, j]);\n"
		"  y[i, h, j] = (x[i, h, j] - a[i] / N) * g[h, j];\n"
		"}\n";
	const char *dims[] = {"M=67,H=3,N=45", "M=0,H=2,N=5", "M=1,H=1,N=1", "M=3,H=2,N=0"};
	TestCompile *tc = expect_auto(src, dims, 4);
	ck_assert_str_eq(tc->prog->fusions[0]->auto_class, "general");
	tc_free(tc);
}
END_TEST

Suite *auto_classify_suite(void)
{
	Suite *s = suite_create("auto_classify");
	TCase *t = tcase_create("classes");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_programs);
	tcase_add_test(t, test_classes);
	tcase_add_test(t, test_classify_entry);
	tcase_add_test(t, test_general_correct);
	suite_add_tcase(s, t);
	return s;
}
