/* check_segment.c: segmentation (scheduler/segment.c, docs/auto_schedule.md "Segmentation"):
 * which fusions are split and where, the segments' signatures and where their arguments come
 * from, the plan in the launch contract (kernel_pick, libfusrt, the launcher text), and the
 * simulator running plans against the reference interpreter, including sizes the launcher
 * never gives a plan (empty rows, one element). tests/check_examples.sh runs the examples. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "runtime/runtime.h"
#include "tests/unit/testutil.h"

/* The segments' fusion names and outputs, as "name(out, ...) name(...)". */
static char *plan_text(Fusion *f)
{
	Buf b = {0};
	buf_puts(&b, "");
	for (int i = 0; i < f->segments.len; i++) {
		Fusion *g = VEC_AT(f->segments, Segment, i)->fusion;
		buf_printf(&b, "%s%s(", i ? " " : "", g->name);
		for (int k = 0; k < g->noutputs; k++)
			buf_printf(&b, "%s%s", k ? ", " : "", g->outputs[k]->name);
		buf_puts(&b, ")");
	}
	return b.s;
}

static void expect_plan(const char *src, const char *want, int nbuffers)
{
	TestCompile *tc = tc_lowered(src);
	Fusion *f = tc->prog->fusions[0];
	char *got = plan_text(f);
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(f->seg_buffers.len, nbuffers);
	free(got);
	tc_free(tc);
}

/* The boundaries: reductions another tensor reads that a grid reduction computes well. */
START_TEST(test_segment_decision)
{
	/* a whole-tensor max read by every element */
	expect_plan("fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		    "  m = max(i, j: x[i, j]);\n"
		    "  y[i, j] = x[i, j] - m;\n"
		    "}\n", "f_seg0(m) f_seg1(y)", 1);
	/* a column mean */
	expect_plan("fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		    "  s[j] = sum(i: x[i, j]);\n"
		    "  y[i, j] = x[i, j] - s[j] / M;\n"
		    "}\n", "f_seg0(s) f_seg1(y)", 1);
	/* two levels: the variance reads the mean; the output reads both */
	expect_plan("fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		    "  s1[j] = sum(i: x[i, j]);\n"
		    "  d[i, j] = x[i, j] - s1[j] / M;\n"
		    "  s2[j] = sum(i: d[i, j] * d[i, j]);\n"
		    "  y[i, j] = d[i, j] * rsqrt(s2[j] / M + 1e-5);\n"
		    "}\n", "f_seg0(s1) f_seg1(s2) f_seg2(y)", 2);
	/* a boundary that is an output: no workspace, the reader reads the output */
	expect_plan("fusion f(x: f32[M, N]) -> (s: f32[N], y: f32[M, N]) {\n"
		    "  s[j] = sum(i: x[i, j]);\n"
		    "  y[i, j] = x[i, j] * s[j];\n"
		    "}\n", "f_seg0(s) f_seg1(y)", 0);
	/* a 0-d reduction lifted out of an expression: a statement of its own (y_max0) */
	expect_plan("fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		    "  y[i, j] = x[i, j] - max(a, b: x[a, b]);\n"
		    "}\n", "f_seg0(y_max0) f_seg1(y)", 1);
	/* not split: rows of a constant length (one block per row), pointwise, a reduction
	 * nothing reads */
	expect_plan("fusion f(x: f32[M, 1024]) -> (y: f32[M, 1024]) {\n"
		    "  m[i] = max(j: x[i, j]);\n"
		    "  y[i, j] = x[i, j] - m[i];\n"
		    "}\n", "", 0);
	expect_plan("fusion f(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0; }\n", "", 0);
	expect_plan("fusion f(x: f32[M, N]) -> (s: f32[N]) { s[j] = sum(i: x[i, j]); }\n", "", 0);
}
END_TEST

/* Outputs of different classes (docs/auto_schedule.md, "Segmentation"): an output that the
 * outer, middle-axis or whole-tensor schedule takes alone, beside other outputs (where it
 * would get the general schedule), is a segment of its own; outputs of one row group stay in
 * one kernel. The plans are simulated against the reference at empty extents, one element
 * and sizes no split divides, vector and scalar kernels. */
START_TEST(test_segment_split_outputs)
{
	static const char rowcol[] = "fusion f(x: f32[M, N]) -> (r: f32[M], c: f32[N]) {\n"
				     "  r[i] = sum(j: x[i, j]);\n"
				     "  c[j] = sum(i: x[i, j]);\n"
				     "}\n";
	static const char mixed[] = "fusion f(x: f32[M, N], w: f32[N]) -> (y: f32[M, N], t: f32) {\n"
				    "  y[i, j] = x[i, j] * w[j];\n"
				    "  t = sum(i, j: x[i, j] * w[j]);\n"
				    "}\n";
	/* a boundary (s, read by y) and a split output (c) on the first level */
	static const char both[] = "fusion f(x: f32[M, N]) -> (y: f32[M, N], c: f32[N]) {\n"
				   "  s[j] = sum(i: x[i, j]);\n"
				   "  y[i, j] = x[i, j] - s[j] / M;\n"
				   "  c[j] = max(i: x[i, j]);\n"
				   "}\n";
	expect_plan(rowcol, "f_seg0(r) f_seg1(c)", 0);
	/* f's own plan (rows past 65536); up to 65536 a variant plan takes row partials
	 * (test_segment_row_partials) */
	expect_plan(mixed, "f_seg0(y) f_seg1(t)", 0);
	expect_plan(both, "f_seg0(s) f_seg1(c) f_seg2(y)", 1);
	/* the outputs beside the split one keep one segment per shape */
	expect_plan("fusion f(x: f32[M, N]) -> (y: f32[M, N], t: f32, z: f32[M, N]) {\n"
		    "  y[i, j] = x[i, j] * 2.0;\n"
		    "  t = sum(i, j: x[i, j]);\n"
		    "  z[i, j] = x[i, j] + 1.0;\n"
		    "}\n", "f_seg0(y, z) f_seg1(t)", 0);
	/* not split: one row group of two outputs (rows of a constant length: a symbolic one
	 * is segmented above 65536, "Long rows"), one output */
	expect_plan("fusion f(x: f32[M, 1024]) -> (mean: f32[M], var: f32[M]) {\n"
		    "  mean[i] = sum(j: x[i, j]) / 1024.0;\n"
		    "  var[i] = sum(j: (x[i, j] - mean[i]) * (x[i, j] - mean[i])) / 1024.0;\n"
		    "}\n", "", 0);
	expect_plan("fusion f(v: f32[K], A: f32[K, N]) -> (y: f32[N]) {\n"
		    "  y[j] = sum(k: v[k] * A[k, j]);\n"
		    "}\n", "", 0);
	const char *dims[] = {"M=0,N=0", "M=0,N=5", "M=3,N=0", "M=1,N=1", "M=67,N=45",
			      "M=130,N=1024", "M=33,N=1030"};
	tc_free(expect_auto(rowcol, dims, countof(dims)));
	tc_free(expect_auto(mixed, dims, countof(dims)));
	tc_free(expect_auto(both, dims, countof(dims)));
}
END_TEST

/* Each segment's class (Fusion.auto_class), as "outer pointwise". */
static char *classes_text(Fusion *f)
{
	Buf b = {0};
	buf_puts(&b, "");
	for (int i = 0; i < f->segments.len; i++)
		buf_printf(&b, "%s%s", i ? " " : "", VEC_AT(f->segments, Segment, i)->fusion->auto_class);
	return b.s;
}

/* src's plan is want (plan_text), its segments' classes classes, and every kernel agrees with
 * the reference in the simulator at empty extents, one element and sizes no split divides. */
static void expect_classes(const char *src, const char *want, const char *classes,
			   const char **dims, int ndims)
{
	TestCompile *tc = expect_auto(src, dims, ndims);
	Fusion *f = tc->prog->fusions[0];
	char *got = plan_text(f), *cls = classes_text(f);
	ck_assert_str_eq(got, want);
	ck_assert_str_eq(cls, classes);
	free(got);
	free(cls);
	tc_free(tc);
}

/* Reductions read by another tensor that a segment of their own schedules well
 * (docs/auto_schedule.md, "Segmentation"): an outer or middle-axis sum with a read per row
 * (v[k], m[b, t]: no column index), and a row sum read over a row of another length. Before,
 * each fusion was one kernel of the general schedule (a thread per column, the rows serial). */
START_TEST(test_segment_broadcast_reads)
{
	const char *d2[] = {"K=0,N=0", "K=0,N=5", "K=3,N=0", "K=1,N=1", "K=7,N=63", "K=65,N=1000",
			    "K=1000,N=65"};
	const char *d3[] = {"B=0,T=0,H=0", "B=2,T=0,H=5", "B=1,T=1,H=1", "B=3,T=7,H=63",
			    "B=2,T=65,H=1000", "B=7,T=1000,H=65"};
	/* vector-matrix + bias: the column sum (outer, v[k] loaded once per row) then the add */
	expect_classes("fusion f(v: f32[K], W: f32[K, N], b: f32[N]) -> (y: f32[N]) {\n"
		       "  y[j] = sum(k: v[k] * W[k, j]) + b[j];\n"
		       "}\n", "f_seg0(y_sum0) f_seg1(y)", "outer pointwise", d2, countof(d2));
	/* masked mean pooling: the masked middle-axis sum, the count per row (rows of T read
	 * over rows of H), the quotient; the count keeps its lifted name y_sum1 in a segment
	 * that reads y_sum0 */
	expect_classes("fusion f(x: f32[B, T, H], m: bool[B, T]) -> (y: f32[B, H]) {\n"
		       "  y[b, h] = sum(t: where(m[b, t], x[b, t, h], 0.0)) /\n"
		       "            max(f32(sum(t: m[b, t])), 1.0);\n"
		       "}\n", "f_seg0(y_sum0) f_seg1(y_sum1) f_seg2(y)", "middle rows broadcast",
		       d3, countof(d3));
	/* a row sum read over a row of another length */
	expect_classes("fusion f(x: f32[B, H], w: f32[B, T]) -> (y: f32[B, H]) {\n"
		       "  y[i, j] = x[i, j] * sum(k: w[i, k]);\n"
		       "}\n", "f_seg0(y_sum0) f_seg1(y)", "rows broadcast", d3, countof(d3));
	/* batch-norm statistics in two statements: rows of L, then a column sum over [N, C] */
	const char *dn[] = {"N=0,C=0,L=0", "N=2,C=3,L=0", "N=1,C=1,L=1", "N=3,C=7,L=63",
			    "N=2,C=65,L=1000", "N=7,C=1000,L=65"};
	expect_classes("fusion f(x: f32[N, C, L]) -> (mean: f32[C]) {\n"
		       "  p[n, c] = sum(l: x[n, c, l]);\n"
		       "  mean[c] = sum(n: p[n, c]) / (N * L);\n"
		       "}\n", "f_seg0(p) f_seg1(mean_sum0) f_seg2(mean)", "rows outer pointwise",
		       dn, countof(dn));
	/* not split: a matrix product with an epilogue (the matmul class), a row group whose
	 * reader has the same row */
	expect_plan("fusion f(A: f32[M, K], B: f32[K, N], c: f32[N]) -> (C: f32[M, N]) {\n"
		    "  C[i, j] = sum(k: A[i, k] * B[k, j]) + c[j];\n"
		    "}\n", "", 0);
	expect_plan("fusion f(x: f32[M, 1024], w: f32[M, 1024]) -> (y: f32[M, 1024]) {\n"
		    "  y[i, j] = x[i, j] * sum(k: w[i, k]);\n"
		    "}\n", "", 0);
}
END_TEST

/* batch-norm statistics in one statement, mean[c] = sum(n, l: x[n, c, l]) / (N * L), at
 * N x C x L in the simulator (the kernel the launcher picks) against the mean computed here
 * in double from the original statement (the reference interpreter runs the rewritten one). */
static void expect_channel_mean(const char *src, int64_t n, int64_t c, int64_t l)
{
	TestCompile *tc = tc_lowered(src);
	Fusion *f = tc->prog->fusions[0];
	int64_t sizes[3] = {n, c, l};
	HostTensor in = {0}, out = {0};
	char *err = NULL;
	ck_assert(host_tensor_init(&in, fusion_find_tensor(f, "x"), sizes, &err));
	ck_assert(host_tensor_init(&out, f->outputs[0], sizes, &err));
	float *x = in.data;
	for (int64_t i = 0; i < n * c * l; i++)
		x[i] = (float)((i * 7919) % 1000) / 250.0f - 2.0f;
	memset(out.data, 0xff, host_tensor_bytes(&out));
	void *ins[1] = {in.data}, *outs[1] = {out.data};
	SimOptions o = {0};
	SimResult r;
	Kernel *k = kernel_pick(tc->kernels[0], sizes, NULL);
	ck_assert(k != NULL);
	ck_assert_msg(sim_run(k, sizes, NULL, ins, outs, &o, &r), "%s", r.error);
	ck_assert_int_eq(r.nreports, 0);
	for (int64_t j = 0; j < c; j++) {
		double want = 0;
		for (int64_t i = 0; i < n; i++)
			for (int64_t q = 0; q < l; q++)
				want += x[(i * c + j) * l + q];
		want = n * l > 0 ? want / (double)(n * l) : NAN; /* 0 / 0 */
		float got = ((float *)out.data)[j];
		ck_assert_msg(r.written[0][j], "mean[%lld] not written", (long long)j);
		ck_assert_msg(isnan(want) ? isnan(got) : fabs(got - want) <= 1e-4 + 1e-4 * fabs(want),
			      "%lldx%lldx%lld: mean[%lld] = %g, want %g", (long long)n, (long long)c,
			      (long long)l, (long long)j, got, want);
	}
	sim_result_free(&r);
	host_tensor_free(&in);
	host_tensor_free(&out);
	tc_free(tc);
}

/* A reduction over indices that do not collapse (n and l of x[n, c, l]) is written as its row
 * partials over the trailing run and their reduction over the rest (segment.c,
 * split_reductions), the plan of the same two statements written by hand: rows, then outer.
 * sum, max and min; what is around the reduction stays in its statement. */
START_TEST(test_segment_split_reduction)
{
	static const char bn[] = "fusion f(x: f32[N, C, L]) -> (mean: f32[C]) {\n"
				 "  mean[c] = sum(n, l: x[n, c, l]) / (N * L);\n"
				 "}\n";
	const char *dn[] = {"N=0,C=0,L=0", "N=2,C=3,L=0", "N=1,C=1,L=1", "N=3,C=7,L=63",
			    "N=2,C=65,L=1000", "N=7,C=1000,L=65"};
	expect_classes(bn, "f_seg0(mean_sum0_rows) f_seg1(mean_sum0) f_seg2(mean)",
		       "rows outer pointwise", dn, countof(dn));
	static const int64_t shapes[][3] = {{2, 3, 0}, {1, 1, 1}, {3, 7, 63}, {2, 65, 1000}, {7, 1000, 5}};
	for (int i = 0; i < (int)countof(shapes); i++)
		expect_channel_mean(bn, shapes[i][0], shapes[i][1], shapes[i][2]);
	/* f16 NCHW: h and w collapse into the partials' row, b is left to the column sum */
	const char *d4[] = {"B=0,C=0,H=0,W=0", "B=1,C=1,H=1,W=1", "B=3,C=7,H=5,W=13",
			    "B=2,C=65,H=3,W=63"};
	expect_classes("fusion f(x: f16[B, C, H, W]) -> (s: f32[C]) {\n"
		       "  s[c] = sum(b, h, w: x[b, c, h, w]);\n"
		       "}\n", "f_seg0(s_rows) f_seg1(s)", "rows outer", d4, countof(d4));
	/* max, read by a broadcast: the partials, the column max, the output */
	expect_classes("fusion f(x: f32[N, C, L]) -> (y: f32[N, C, L]) {\n"
		       "  y[n, c, l] = x[n, c, l] - max(a, k: x[a, c, k]);\n"
		       "}\n", "f_seg0(y_max0_rows) f_seg1(y_max0) f_seg2(y)", "rows outer broadcast",
		       dn, countof(dn));
	/* not split: indices that collapse (the rows class), a middle-axis sum (one index) */
	expect_plan("fusion f(x: f32[N, C, L]) -> (s: f32[N]) {\n"
		    "  s[n] = sum(c, l: x[n, c, l]);\n"
		    "}\n", "", 0);
	expect_plan("fusion f(x: f32[N, C, L]) -> (s: f32[N, L]) {\n"
		    "  s[n, l] = sum(c: x[n, c, l]);\n"
		    "}\n", "", 0);
}
END_TEST

/* The variant plan of f (its only variant) as plan_text, with its workspace count. */
static void expect_variant_plan(TestCompile *tc, const char *want, int nbuffers)
{
	Fusion *f = tc->prog->fusions[0];
	ck_assert_int_eq(f->variants.len, 1);
	Fusion *g = VEC_AT(f->variants, Fusion, 0);
	char *got = plan_text(g);
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(g->seg_buffers.len, nbuffers);
	free(got);
}

/* A total beside row outputs (docs/auto_schedule.md, "A total beside row outputs"): the
 * total's rows are summed in the row outputs' kernel (one row group: x read once) into a
 * workspace of row partials, and a second segment sums those. A symbolic row length gets it
 * as the variant plan N <= 65536 before the fusion's own; a constant one as its plan; not
 * when the other outputs and the partials are not one row group. Simulated against the
 * reference on both sides of 65536, at empty extents, one element and odd sizes. */
START_TEST(test_segment_row_partials)
{
	static const char mixed[] = "fusion f(x: f32[M, N], w: f32[N]) -> (y: f32[M, N], t: f32) {\n"
				    "  y[i, j] = x[i, j] * w[j];\n"
				    "  t = sum(i, j: x[i, j] * w[j]);\n"
				    "}\n";
	TestCompile *tc = tc_lowered(mixed);
	expect_variant_plan(tc, "f_seg0_N65536(y, t_rows) f_seg1_N65536(t)", 1);
	Fusion *g = VEC_AT(tc->prog->fusions[0]->variants, Fusion, 0);
	ck_assert_str_eq(VEC_AT(g->segments, Segment, 0)->fusion->auto_class, "rows");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=7,N=4096")->name, "f_segments_N65536");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=2,N=65536")->name, "f_segments_N65536");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=1,N=65537")->name, "f_segments");
	/* renamed (fusc --prefix, libfusrt): the bounded plan's segments keep their bound */
	fusion_rename(tc->arena, tc->prog->fusions[0], "q");
	expect_variant_plan(tc, "q_seg0_N65536(y, t_rows) q_seg1_N65536(t)", 1);
	ck_assert_str_eq(VEC_AT(tc->prog->fusions[0]->segments, Segment, 1)->fusion->name, "q_seg1");
	tc_free(tc);
	const char *dims[] = {"M=0,N=0", "M=0,N=5", "M=3,N=0", "M=1,N=1", "M=7,N=63", "M=65,N=1000",
			      "M=63,N=65", "M=2,N=65536", "M=1,N=65537"};
	tc_free(expect_auto(mixed, dims, countof(dims)));
	/* a constant row: the plan itself; a max of f16 over three indices */
	static const char cmax[] = "fusion f(x: f16[B, M, 1000]) -> (y: f16[B, M, 1000], t: f32) {\n"
				   "  y[b, i, j] = x[b, i, j] * 2.0;\n"
				   "  t = max(b, i, j: f32(x[b, i, j]));\n"
				   "}\n";
	expect_plan(cmax, "f_seg0(y, t_rows) f_seg1(t)", 1);
	const char *dims3[] = {"B=0,M=0", "B=1,M=1", "B=3,M=7", "B=2,M=65"};
	tc = expect_auto(cmax, dims3, countof(dims3));
	ck_assert_int_eq(tc->prog->fusions[0]->variants.len, 0);
	tc_free(tc);
	/* not taken: a row longer than 65536 (one block a row), a transposed output beside the
	 * total (not a row group with its partials) */
	expect_plan("fusion f(x: f32[M, 70000]) -> (y: f32[M, 70000], t: f32) {\n"
		    "  y[i, j] = x[i, j] + 1.0;\n"
		    "  t = sum(i, j: x[i, j]);\n"
		    "}\n", "f_seg0(y) f_seg1(t)", 0);
	tc = tc_lowered("fusion f(x: f32[M, N]) -> (y: f32[N, M], t: f32) {\n"
			"  y[j, i] = x[i, j];\n"
			"  t = sum(i, j: x[i, j]);\n"
			"}\n");
	ck_assert_int_eq(tc->prog->fusions[0]->variants.len, 0);
	tc_free(tc);
}
END_TEST

/* A symbolic row length: rows up to 65536 keep one kernel (size variants); longer ones run
 * as segments, one per row reduction that others read, each row split over blocks. */
START_TEST(test_segment_long_rows)
{
	TestCompile *tc = tc_lowered("fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
				     "  m[i] = max(j: x[i, j]);\n"
				     "  e[i, j] = exp(x[i, j] - m[i]);\n"
				     "  s[i] = sum(j: e[i, j]);\n"
				     "  y[i, j] = e[i, j] / s[i];\n"
				     "}\n");
	Fusion *f = tc->prog->fusions[0];
	char *got = plan_text(f);
	ck_assert_str_eq(got, "softmax_seg0(m) softmax_seg1(s) softmax_seg2(y)");
	free(got);
	ck_assert_int_eq(f->sizes[1]->above, 65536);
	Kernel *k = tc->kernels[0], *last = kernel_last_variant(k);
	ck_assert_str_eq(last->name, "softmax_segments");
	ck_assert_int_eq(last->preconds.len, 0);
	ck_assert_int_eq(last->segments.len, 3);
	/* the row reductions: rows over 16 blocks on blockIdx.y, a grid reduction */
	char *ir = NULL;
	Buf b = {0};
	kir_print(kernel_own(VEC_AT(last->segments, Kernel, 1)), &b);
	ir = b.s;
	ck_assert_contains(ir, "kernel softmax_seg1_kernel grid(M, 16) block(256) {");
	ck_assert_contains(ir, "grid_reduce_sum(s_acc over blockIdx.y, element blockIdx.x");
	free(ir);
	int64_t sizes[2] = {3, 65536};
	ck_assert_str_eq(kernel_pick(k, sizes, NULL)->name, "softmax_kernel_N65536");
	sizes[1] = 65537;
	ck_assert_ptr_eq(kernel_pick(k, sizes, NULL), last);
	/* libfusrt picks the plan too, and each segment's kernel from its own arguments */
	fusrt_arg args[2] = {fusrt_ptr(0x1000), fusrt_ptr(0x2000)}, sa[4];
	int64_t dims[6], ss[2];
	ck_assert_ptr_eq(rt_pick_kernel(k, args, sizes), last);
	ck_assert_int_eq(rt_launch_check(k, args, 2, sizes, 2, dims), FUSRT_OK);
	Segment *s2 = VEC_AT(f->segments, Segment, 2);
	ck_assert_int_eq(s2->fusion->nsig, 4); /* x, m, s, y */
	rt_segment_args(s2, args, sizes, NULL, sa, ss);
	ck_assert_int_eq(sa[0].ptr, 0x1000);
	ck_assert_int_eq(sa[3].ptr, 0x2000);
	ck_assert_int_eq(s2->args[1].from, 'w');
	ck_assert_int_eq(s2->args[2].from, 'w');
	ck_assert_int_eq(ss[1], 65537);
	ck_assert_str_eq(rt_pick_kernel(VEC_AT(last->segments, Kernel, 2), sa, ss)->name,
			 "softmax_seg2_kernel_scalar");
	tc_free(tc);
}
END_TEST

/* Where a segment's arguments come from: the fusion's signature or the workspace. */
START_TEST(test_segment_args)
{
	TestCompile *tc = tc_lowered("fusion f(a: f32, x: f32[M, N]) -> (y: f32[M, N]) {\n"
				     "  m = max(i, j: x[i, j] * a);\n"
				     "  y[i, j] = x[i, j] - m;\n"
				     "}\n");
	Fusion *f = tc->prog->fusions[0];
	Segment *s0 = VEC_AT(f->segments, Segment, 0), *s1 = VEC_AT(f->segments, Segment, 1);
	Buf b = {0};
	ir_print_signature(s0->fusion, &b);
	buf_puts(&b, "; ");
	ir_print_signature(s1->fusion, &b);
	ck_assert_str_eq(b.s, "fusion f_seg0(a: f32, x: f32[M, N]) -> (m: f32); "
			      "fusion f_seg1(a: f32, x: f32[M, N], m: f32[1]) -> (y: f32[M, N])");
	buf_free(&b);
	const SegArg want0[] = {{'s', 0}, {'s', 1}, {'w', 0}};
	const SegArg want1[] = {{'s', 0}, {'s', 1}, {'w', 0}, {'s', 2}};
	for (int i = 0; i < 3; i++)
		ck_assert(s0->args[i].from == want0[i].from && s0->args[i].index == want0[i].index);
	for (int i = 0; i < 4; i++)
		ck_assert(s1->args[i].from == want1[i].from && s1->args[i].index == want1[i].index);
	ck_assert_int_eq(s1->sizes[0], 0);
	ck_assert_int_eq(s1->sizes[1], 1);
	/* the launcher: the workspace, the segments in order, the workspace freed */
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "static cudaError_t f_seg0(float a, const float *x, float *m, "
			       "int64_t M, int64_t N, cudaStream_t stream)");
	ck_assert_contains(cu, "    fus_err = cudaMallocAsync(&fus_seg[i], fus_seg_bytes[i] ? "
			       "fus_seg_bytes[i] : 1, stream);\n");
	ck_assert_contains(cu, "  if (fus_err == cudaSuccess && (fus_err = f_seg0(a, x, (float *)"
			       "fus_seg[0], M, N, stream)) != cudaSuccess)\n"
			       "    fus_fail(f_error_text, \"%s\", f_seg0_last_error());\n"
			       "  if (fus_err == cudaSuccess && (fus_err = f_seg1(a, x, (float *)"
			       "fus_seg[0], y, M, N, stream)) != cudaSuccess)\n");
	ck_assert_contains(cu, "cudaFreeAsync(fus_seg[i], stream)");
	free(cu);
	tc_assert_nvrtc(tc);
	tc_free(tc);
}
END_TEST

/* The plan (or the long-row kernel of a row sum) in the simulator against the reference: run
 * directly (the launcher would pick a
 * size variant for these row lengths), at empty rows, one element and sizes no split
 * divides. */
static void simulate_plan(const char *src, int64_t m, int64_t n)
{
	TestCompile *tc = tc_lowered(src);
	Fusion *f = tc->prog->fusions[0];
	Kernel *plan = kernel_last_variant(tc->kernels[0]); /* a plan, or a row_sum's own */
	ck_assert_int_eq(f->sizes[1]->above, 65536);
	int64_t sizes[2] = {m, n};
	HostTensor in = {0}, out = {0}, ref = {0};
	char *err = NULL;
	ck_assert(host_tensor_init(&in, f->inputs[0], sizes, &err));
	ck_assert(host_tensor_init(&out, f->outputs[0], sizes, &err));
	ck_assert(host_tensor_init(&ref, f->outputs[0], sizes, &err));
	float *x = in.data;
	for (int64_t i = 0; i < m * n; i++)
		x[i] = (float)((i * 7919) % 1000) / 250.0f - 2.0f;
	memset(out.data, 0xff, host_tensor_bytes(&out));
	void *ins[1] = {in.data}, *outs[1] = {out.data}, *refs[1] = {ref.data};
	SimOptions o = {0};
	SimResult r;
	ck_assert_msg(sim_run(plan, sizes, NULL, ins, outs, &o, &r), "%s", r.error);
	ck_assert_int_eq(r.nreports, 0);
	ck_assert(interp_run(f, sizes, NULL, ins, refs, &err));
	int64_t numel = host_tensor_bytes(&out) / 4;
	for (int64_t i = 0; i < numel; i++) {
		float g = ((float *)out.data)[i], w = ((float *)ref.data)[i];
		ck_assert_msg(r.written[0][i], "element %lld not written", (long long)i);
		ck_assert_msg(g == w || fabsf(g - w) <= 1e-5f + 1e-4f * fabsf(w), "element %lld: %g, want %g",
			      (long long)i, g, w);
	}
	sim_result_free(&r);
	host_tensor_free(&in);
	host_tensor_free(&out);
	host_tensor_free(&ref);
	tc_free(tc);
}

START_TEST(test_segment_simulate)
{
	static const char softmax[] = "fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
				      "  m[i] = max(j: x[i, j]);\n"
				      "  e[i, j] = exp(x[i, j] - m[i]);\n"
				      "  s[i] = sum(j: e[i, j]);\n"
				      "  y[i, j] = e[i, j] / s[i];\n"
				      "}\n";
	static const char lse[] = "fusion lse(x: f32[M, N]) -> (l: f32[M]) {\n"
				  "  m[i] = max(j: x[i, j]);\n"
				  "  l[i] = m[i] + log(sum(j: exp(x[i, j] - m[i])));\n"
				  "}\n";
	static const char row_sum[] = "fusion rs(x: f32[M, N]) -> (s: f32[M]) {\n"
				      "  s[i] = sum(j: x[i, j]);\n"
				      "}\n";
	static const int64_t shapes[][2] = {{2, 0}, {0, 5}, {1, 1}, {3, 5}, {2, 4099}, {1, 20483}};
	for (int i = 0; i < (int)countof(shapes); i++) {
		simulate_plan(softmax, shapes[i][0], shapes[i][1]);
		simulate_plan(lse, shapes[i][0], shapes[i][1]);
		simulate_plan(row_sum, shapes[i][0], shapes[i][1]);
	}
}
END_TEST

Suite *segment_suite(void)
{
	Suite *s = suite_create("segment");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_segment_decision);
	tcase_add_test(tc, test_segment_split_outputs);
	tcase_add_test(tc, test_segment_broadcast_reads);
	tcase_add_test(tc, test_segment_split_reduction);
	tcase_add_test(tc, test_segment_row_partials);
	tcase_add_test(tc, test_segment_long_rows);
	tcase_add_test(tc, test_segment_args);
	tcase_add_test(tc, test_segment_simulate);
	suite_add_tcase(s, tc);
	return s;
}
