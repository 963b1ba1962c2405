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
	tcase_add_test(tc, test_segment_row_partials);
	tcase_add_test(tc, test_segment_long_rows);
	tcase_add_test(tc, test_segment_args);
	tcase_add_test(tc, test_segment_simulate);
	suite_add_tcase(s, tc);
	return s;
}
