/* check_auto_matmul.c: the automatic schedule of matrix products (scheduler/auto_matmul.c,
 * docs/auto_schedule.md "Matrix products"): which outputs the classifier takes and how
 * (operands, transposes, batch, epilogue, tensor cores or FMA), that the tensor-core schedule
 * puts the product on mma.sync with ldmatrix and the epilogue in the same kernel, that the
 * chain ends with a kernel without preconditions, and the kernels against the reference in
 * the simulator at sizes no tile divides, 0 and 1 (examples/gemm/auto_*.fus run more sizes
 * through tests/check_examples.sh). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "scheduler/auto_plan.h"
#include "tests/unit/testutil.h"

/* What the classifier says about the one output of src, on the fusion as sema builds it. */
typedef struct Class {
	bool in, mma, a_trans, b_trans, epilogue;
	int nbatch;
	int64_t bm, bn, bk, stages;
	int warps_y, warps_x;
	char a[16], b[16];
} Class;

static Class classify(const char *src)
{
	TestCompile *tc = tc_compile(src, false);
	ck_assert_msg(tc->prog != NULL, "%s", tc->diags);
	Fusion *g = sema_fusion(tc->arena, tc->diag, tc->prog->fusions[0]->ast);
	ck_assert_ptr_nonnull(g);
	AutoMatmul c;
	Class r = {.in = auto_matmul_classify(g, g->outputs[0], &c)};
	if (r.in) {
		r.mma = c.mma;
		r.a_trans = c.a_trans;
		r.b_trans = c.b_trans;
		r.epilogue = c.acc != c.out;
		r.nbatch = c.nbatch;
		r.bm = c.bm;
		r.bn = c.bn;
		r.bk = c.bk;
		r.stages = c.stages;
		r.warps_y = c.warps_y;
		r.warps_x = c.warps_x;
		snprintf(r.a, sizeof r.a, "%s", c.a->name);
		snprintf(r.b, sizeof r.b, "%s", c.b->name);
	}
	tc_free(tc);
	return r;
}

#define MM(ta, tb, tc, body) \
	"fusion m(A: " ta ", B: " tb ") -> (C: " tc ") { " body " }"

/* GEMM + bias + gelu with an f16 output (examples/gemm/auto_hgemm_bias_gelu.fus) */
static const char epilogue_src[] =
	"fusion e(A: f16[M, K], B: f16[K, N], bias: f16[N]) -> (C: f16[M, N]) {\n"
	"  t[i, j] = sum(k: f32(A[i, k]) * f32(B[k, j])) + f32(bias[j]);\n"
	"  C[i, j] = f16(0.5 * t[i, j] * (1.0 + erf(0.7 * t[i, j])));\n}\n";

START_TEST(test_classify)
{
	Class c = classify(MM("f16[M, K]", "f16[K, N]", "f32[M, N]",
			      "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.in && c.mma && !c.a_trans && !c.b_trans && !c.epilogue && c.nbatch == 0);
	/* symbolic sizes: 256 x 128 x 64 tiles of 4 x 2 warps, 3 stages */
	ck_assert(c.bm == 256 && c.bn == 128 && c.bk == 64 && c.stages == 3);
	ck_assert(c.warps_y == 4 && c.warps_x == 2);
	/* constant sizes: the same when they make a wave of such tiles (16 x 16 at 4096), else
	 * 128 x 128 x 32 tiles of 2 x 2 warps (1024 x 1024: 32 wide tiles on 132 SMs) */
	c = classify(MM("f16[4096, 4096]", "f16[4096, 4096]", "f32[4096, 4096]",
			"C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.mma && c.bm == 256 && c.bn == 128 && c.bk == 64 && c.warps_y == 4);
	c = classify(MM("f16[1024, 1024]", "f16[1024, 1024]", "f32[1024, 1024]",
			"C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.mma && c.bm == 128 && c.bn == 128 && c.bk == 32 && c.warps_x == 2);
	/* constant extents: tiles no larger than them (a split may not be), 32 at the least; a
	 * short M (64 rows or fewer) takes 32 columns and k steps of 64 (32 for a K below 64),
	 * 4 stages */
	c = classify(MM("f16[100, 72]", "f16[72, 40]", "f32[100, 40]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.in && c.mma && c.bm == 64 && c.bn == 32 && c.bk == 64 && c.stages == 4);
	c = classify(MM("f16[64, 40]", "f16[40, 64]", "f32[64, 64]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.in && c.mma && c.bm == 64 && c.bn == 32 && c.bk == 32);
	c = classify(MM("f16[128, 64]", "f16[64, 64]", "f32[128, 64]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.in && c.mma && c.bm == 128 && c.bn == 64 && c.bk == 32 && c.stages == 3);
	ck_assert(!classify(MM("f16[20, 72]", "f16[72, 40]", "f32[20, 40]",
			       "C[i, j] = sum(k: A[i, k] * B[k, j]);")).in);
	ck_assert(!classify(MM("f16[64, 16]", "f16[16, 64]", "f32[64, 64]",
			       "C[i, j] = sum(k: A[i, k] * B[k, j]);")).in);
	c = classify(MM("f32[300, 72]", "f32[72, 600]", "f32[300, 600]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.in && !c.mma && c.bm == 128 && c.bn == 128);
	ck_assert(!classify(MM("f32[100, 72]", "f32[72, 600]", "f32[100, 600]",
			       "C[i, j] = sum(k: A[i, k] * B[k, j]);")).in);
	ck_assert_str_eq(c.a, "A");
	ck_assert_str_eq(c.b, "B");
	/* bf16, the operands in the other order, casts around them */
	c = classify(MM("bf16[K, N]", "bf16[M, K]", "f32[M, N]",
			"C[i, j] = sum(k: f32(B[i, k]) * f32(A[k, j]));"));
	ck_assert(c.in && c.mma);
	ck_assert_str_eq(c.a, "B");
	/* f32 operands: the FMA schedule */
	c = classify(MM("f32[M, K]", "f32[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.in && !c.mma);
	/* an f16 accumulator (C f16 without a cast): no f32 accumulation, FMA */
	c = classify(MM("f16[M, K]", "f16[K, N]", "f16[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert(c.in && !c.mma);
	/* transposed operands: in the class, on tensor cores (ldmatrix with or without .trans) */
	c = classify(MM("f16[K, M]", "f16[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[k, i] * B[k, j]);"));
	ck_assert(c.in && c.mma && c.a_trans && !c.b_trans);
	c = classify(MM("f16[M, K]", "f16[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"));
	ck_assert(c.in && c.mma && !c.a_trans && c.b_trans);
	c = classify(MM("f32[M, K]", "f32[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"));
	ck_assert(c.in && !c.mma && !c.a_trans && c.b_trans);
	/* batched, one or two batch indices */
	c = classify(MM("f16[Z, M, K]", "f16[Z, K, N]", "f32[Z, M, N]",
			"C[b, i, j] = sum(k: A[b, i, k] * B[b, k, j]);"));
	ck_assert(c.in && c.mma && c.nbatch == 1);
	c = classify(MM("f32[Y, Z, K, M]", "f32[Y, Z, K, N]", "f32[Y, Z, M, N]",
			"C[a, b, i, j] = sum(k: A[a, b, k, i] * B[a, b, k, j]);"));
	ck_assert(c.in && !c.mma && c.nbatch == 2 && c.a_trans);
	/* an epilogue: bias, gelu and a cast to f16 around the lifted sum */
	c = classify(epilogue_src);
	ck_assert(c.in && c.mma && c.epilogue);
	c = classify(MM("f16[M, K]", "f16[K, N]", "f16[M, N]",
			"C[i, j] = f16(sum(k: f32(A[i, k]) * f32(B[k, j])));"));
	ck_assert(c.in && c.mma && c.epilogue);

	/* not matrix products */
	ck_assert(!classify(MM("f32[M, K]", "f32[M, K]", "f32[M]", "C[i] = sum(k: A[i, k] * B[i, k]);")).in);
	ck_assert(!classify(MM("f32[M, N]", "f32[M, N]", "f32[M, N]", "C[i, j] = A[i, j] * B[i, j];")).in);
	ck_assert(!classify(MM("f32[M, K]", "f32[K, N]", "f32[M, N]", "C[i, j] = max(k: A[i, k] * B[k, j]);")).in);
	ck_assert(!classify(MM("f32[M, K]", "f32[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] + B[k, j]);")).in);
	/* a broadcast batch: A has no batch index */
	ck_assert(!classify(MM("f32[M, K]", "f32[Z, K, N]", "f32[Z, M, N]",
			       "C[b, i, j] = sum(k: A[i, k] * B[b, k, j]);")).in);
	/* x x: one input as both operands (one cache cannot be both tiles) */
	ck_assert(!classify("fusion s(x: f32[N, N]) -> (C: f32[N, N]) { C[i, j] = sum(k: x[i, k] * x[k, j]); }").in);
	/* an operand the epilogue reads too (its cache would replace that read) */
	ck_assert(!classify("fusion r(A: f32[M, N], B: f32[N, N]) -> (C: f32[M, N]) {\n"
			    "  t[i, j] = sum(k: A[i, k] * B[k, j]);\n  C[i, j] = t[i, j] + A[i, j];\n}\n").in);
	/* the product read transposed by the epilogue, or two products */
	ck_assert(!classify("fusion r(A: f32[N, N], B: f32[N, N]) -> (C: f32[N, N]) {\n"
			    "  t[i, j] = sum(k: A[i, k] * B[k, j]);\n  C[i, j] = t[j, i];\n}\n").in);
	ck_assert(!classify("fusion r(A: f32[N, N], B: f32[N, N], D: f32[N, N]) -> (C: f32[N, N]) {\n"
			    "  C[i, j] = sum(k: A[i, k] * B[k, j]) + sum(k: D[i, k] * D[k, j]);\n}\n").in);
	/* two outputs share one launch: not the class */
	ck_assert(!classify("fusion r(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N], D: f32[M, K]) {\n"
			    "  C[i, j] = sum(k: A[i, k] * B[k, j]);\n  D[i, k] = A[i, k] * 2.0;\n}\n").in);
}
END_TEST

/* The generated schedule of tc's fusion i as text. */
static char *schedule_text(TestCompile *tc, int i)
{
	Buf b = {0};
	ast_print_schedule(tc->prog->fusions[i]->ast_schedule, &b);
	return b.s;
}

/* src lowered (tc), scheduled at the tuned level; its schedule as text. */
static char *tuned(const char *src, TestCompile **tc)
{
	*tc = tc_lowered(src);
	ck_assert_ptr_null((*tc)->prog->fusions[0]->auto_fallback);
	return schedule_text(*tc, 0);
}

/* The tensor-core schedule: mma with ldmatrix on the accumulator, fragments stored by C,
 * 3-stage cp.async tiles; the lowered kernel has the warp-wide mma, the scalar kernel no
 * cp.async and no precondition. */
START_TEST(test_mma_schedule)
{
	TestCompile *tc;
	char *s = tuned(MM("f16[M, K]", "f16[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
			&tc);
	ck_assert_contains(s, "C_acc = C.cache_before(local);");
	ck_assert_contains(s, "C_acc.mma(m16n8k16, ldmatrix);");
	ck_assert_contains(s, "C.fragment(m16, n8);");
	ck_assert_contains(s, "A_smem.stages(3);");
	ck_assert_contains(s, "C.bind(bi, blockIdx.y);");
	free(s);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
	ck_assert_contains(cu, "ldmatrix.sync.aligned.m8n8.x4.shared.b16");
	ck_assert_contains(cu, "cp.async.cg.shared.global");
	/* the vector kernel needs K and N multiples of 8: a vector is whole or empty, its size
	 * 16 or 0 bytes (no min(K - k, 8)); B's row (ko * 64 + ...) times N distributed
	 * (passes/hoist.c) */
	ck_assert_contains(cu, " ? 16u : 0u)");
	ck_assert_not_contains(cu, "__fus_min(K -");
	ck_assert_not_contains(cu, "__fus_min(N -");
	ck_assert_contains(cu, "&B[ko * 64 * N + ");
	free(cu);
	Kernel *k = tc->kernels[0];
	ck_assert_int_gt(k->preconds.len, 0);
	ck_assert_ptr_nonnull(k->fallback);
	tc_free(tc);
	/* K and N constant multiples of 8: no padded plan; the scalar kernel (unaligned
	 * pointers) has no cp.async and no precondition */
	tc = tc_lowered(MM("f16[M, 64]", "f16[64, 128]", "f32[M, 128]",
			   "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	k = tc->kernels[0];
	ck_assert_ptr_null(tc->prog->fusions[0]->pad_plan);
	Kernel *last = kernel_last_variant(k);
	ck_assert_str_eq(last->name, "m_kernel_scalar");
	ck_assert_int_eq(last->preconds.len, 0);
	Buf b = {0};
	kir_print(last, &b);
	ck_assert_not_contains(b.s, "cp.async");
	ck_assert_contains(b.s, "mma.m16n8k16 C_acc[");
	buf_free(&b);
	tc_free(tc);
}
END_TEST

/* Transposed operands on tensor cores: the shared tile copied along the operand's own
 * contiguous dimension (padded rows of that dimension's tile), its fragments by ldmatrix with
 * .trans for A[k, i] and without for B[j, k], the launcher's vector preconditions on the
 * contiguous dimensions (A[k, i]: M; B[j, k]: K), then the padded plan (test_padded_plan). */
START_TEST(test_mma_transposed_schedule)
{
	TestCompile *tc;
	char *s = tuned(MM("f16[M, K]", "f16[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"),
			&tc);
	ck_assert_contains(s, "C_acc.mma(m16n8k16, ldmatrix);");
	ck_assert_contains(s, "B_smem.split(kr, 8) -> (kc, v);");
	ck_assert_contains(s, "B_smem.merge(ji, kc) -> e;");
	ck_assert_contains(s, "B_smem.pad(8, 64);");
	free(s);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "ldmatrix.sync.aligned.m8n8.x4.shared.b16");
	ck_assert_not_contains(cu, ".trans");
	ck_assert_contains(cu, "m_kernel when A and B are 16-byte aligned, C is 8-byte aligned, K is a multiple of 8 and N is a multiple of 2");
	free(cu);
	ck_assert_ptr_nonnull(tc->prog->fusions[0]->pad_plan);
	ck_assert_str_eq(kernel_last_variant(tc->kernels[0])->name, "m_segments");
	tc_free(tc);
	s = tuned(MM("f16[K, M]", "f16[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[k, i] * B[k, j]);"), &tc);
	ck_assert_contains(s, "A_smem.split(ii, 8) -> (kc, v);");
	ck_assert_contains(s, "A_smem.merge(kr, kc) -> e;");
	ck_assert_contains(s, "A_smem.pad(8, 256);");
	free(s);
	cu = tc_cuda(tc);
	ck_assert_contains(cu, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16");
	ck_assert_contains(cu, "M is a multiple of 8, N is a multiple of 8");
	ck_assert_not_contains(cu, "K is a multiple of 8");
	free(cu);
	tc_free(tc);
}
END_TEST

/* The names of chain k's kernels, space-separated (a plan: NAME[its segments' kernels]). */
static void chain_names(Kernel *k, Buf *b)
{
	for (; k; k = k->fallback) {
		bool first = !b->len || b->s[b->len - 1] == '[' || b->s[b->len - 1] == ';';
		buf_printf(b, "%s%s", first ? "" : " ", k->name);
		if (!k->segments.len)
			continue;
		buf_puts(b, "[");
		for (int i = 0; i < k->segments.len; i++) {
			if (i)
				buf_puts(b, ";");
			chain_names(VEC_AT(k->segments, Kernel, i), b);
		}
		buf_puts(b, "]");
	}
}

/* The kernel kernel_pick gives chain k at dims, and in a plan each segment's: "NAME" or
 * "NAME[seg0 kernel, seg1 kernel, ...]". */
static char *picked(Kernel *k, const char *dims)
{
	int64_t sizes[16] = {0};
	parse_dims(k->fusion, dims, sizes);
	Kernel *run = kernel_pick(k, sizes, NULL);
	ck_assert_ptr_nonnull(run);
	Buf b = {0};
	buf_puts(&b, run->name);
	for (int i = 0; i < run->segments.len; i++) {
		Segment *sg = VEC_AT(run->fusion->segments, Segment, i);
		int64_t gs[16];
		segment_sizes(sg, sizes, gs);
		Kernel *v = kernel_pick(VEC_AT(run->segments, Kernel, i), gs, NULL);
		buf_printf(&b, "%s%s", i ? ", " : "[", v ? v->name : "(none)");
	}
	buf_puts(&b, run->segments.len ? "]" : "");
	return b.s;
}

#define ASSERT_PICKS(k, dims, want) do { \
		char *got_ = picked((k), (dims)); \
		ck_assert_msg(strcmp(got_, (want)) == 0, "at %s: %s, expected %s", (dims), got_, (want)); \
		free(got_); \
	} while (0)

/* m's chain k: its tensor-core kernels then the padded plan (the copies, the product's
 * variants), with no scalar kernel: every vector precondition of the plan's kernels (each has
 * one) is on a workspace buffer or a rounded size, which the plan guarantees; the plan itself
 * has none. Returns the plan. */
static Kernel *assert_plan_chain(Kernel *k)
{
	Buf b = {0};
	chain_names(k, &b);
	ck_assert_str_eq(b.s, "m_kernel_M32 m_kernel_M64 m_kernel m_segments[m_seg0_kernel;"
			      "m_seg1_kernel;m_seg2_kernel_M32 m_seg2_kernel_M64 m_seg2_kernel]");
	buf_free(&b);
	Kernel *plan = kernel_last_variant(k);
	ck_assert_int_eq(plan->preconds.len, 0);
	ck_assert_int_gt(plan->segments.len, 0);
	for (int i = 0; i < plan->segments.len; i++)
		for (Kernel *v = VEC_AT(plan->segments, Kernel, i); v; v = v->fallback) {
			int vector = 0;
			for (int j = 0; j < v->preconds.len; j++) {
				Precond *c = VEC_AT(v->preconds, Precond, j);
				if (c->kind != PC_ALIGNED && c->kind != PC_MULTIPLE)
					continue;
				vector++;
				ck_assert_msg(segment_guarantees(v->fusion, c), "%s", v->name);
			}
			ck_assert_msg(vector > 0, "%s has no vector precondition", v->name);
		}
	return plan;
}

/* The size of segment sg named `name` at the segmented fusion's sizes */
static int64_t seg_size(Segment *sg, const int64_t *sizes, const char *name)
{
	int64_t gs[16];
	segment_sizes(sg, sizes, gs);
	for (int i = 0; i < sg->fusion->nsizes; i++)
		if (strcmp(sg->fusion->sizes[i]->name, name) == 0)
			return gs[i];
	ck_abort_msg("segment %s has no size %s", sg->fusion->name, name);
	return -1;
}

/* Which kernel m's chain k (every operand's rows of K, M or N, symbolic) runs at sizes the
 * 16-byte copies take (the kernels) and refuse (the plan: each segment's kernel, and the
 * whole plan simulated against the reference, at empty extents too). */
static void assert_plan_picks(Kernel *k)
{
	ASSERT_PICKS(k, "M=64,N=64,K=64", "m_kernel_M64");
	ASSERT_PICKS(k, "M=200,N=64,K=64", "m_kernel");
	ASSERT_PICKS(k, "M=37,N=41,K=43", "m_segments[m_seg0_kernel, m_seg1_kernel, m_seg2_kernel_M64]");
	ASSERT_PICKS(k, "M=130,N=263,K=71", "m_segments[m_seg0_kernel, m_seg1_kernel, m_seg2_kernel]");
	ASSERT_PICKS(k, "M=20,N=63,K=43", "m_segments[m_seg0_kernel, m_seg1_kernel, m_seg2_kernel_M32]");
	ASSERT_PICKS(k, "M=200,N=41,K=64", "m_segments[m_seg0_kernel, m_seg1_kernel, m_seg2_kernel]");
	const char *dims[] = {"M=37,N=41,K=43", "M=130,N=263,K=71", "M=1,N=1,K=1", "M=0,N=5,K=3",
			      "M=5,N=3,K=0", "M=3,N=0,K=9", "M=9,N=16,K=17", "M=40,N=41,K=64"};
	for (int s = 0; s < (int)(sizeof dims / sizeof *dims); s++)
		ck_assert_str_eq(expect_sim_picked(k, dims[s])->name, "m_segments");
}

/* Rows that are not a multiple of 8 elements (docs/tensor_cores.md): after the tensor-core
 * kernels, a plan that copies A and B into zero-padded rows and runs the tensor-core kernel
 * on them; which kernel runs follows from the preconditions (K, N multiples of 8 and the
 * pointers' alignment: the kernels; anything else: the plan). Each simulated against the
 * reference. */
START_TEST(test_padded_plan)
{
	TestCompile *tc = tc_lowered(MM("f16[M, K]", "f16[K, N]", "f32[M, N]",
					"C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	Kernel *k = tc->kernels[0];
	Kernel *plan = assert_plan_chain(k);
	/* the fusion's own kernels are no segment's: nothing is guaranteed */
	for (int j = 0; j < k->preconds.len; j++)
		ck_assert(!segment_guarantees(k->fusion, VEC_AT(k->preconds, Precond, j)));
	Fusion *p = plan->fusion;
	ck_assert_int_eq(p->seg_buffers.len, 2);
	/* the workspace: rows rounded up to 8 */
	Buf ws = {0};
	ir_print_fusion(p, &ws);
	ck_assert_contains(ws.s, "workspace: A_pad: f16[M, ceildiv(K, 8) * 8], B_pad: f16[ceildiv(K, 8) * 8, ceildiv(N, 8) * 8]");
	buf_free(&ws);
	/* K_pad, N_pad: K, N rounded up */
	Segment *mm = VEC_AT(p->segments, Segment, 2);
	int64_t sizes[3] = {5, 43, 41}, gs[8];
	segment_sizes(mm, sizes, gs);
	ck_assert_int_eq(mm->fusion->nsizes, 4);
	ck_assert_int_eq(gs[0], 5);
	ck_assert_int_eq(gs[1], 48);
	ck_assert_int_eq(gs[2], 48);
	ck_assert_int_eq(gs[3], 41);
	/* the product's C store is per element (N may be odd): no vector precondition on N;
	 * libfusrt's size check takes each segment kernel's fusion (the variants' too) at the
	 * plan's sizes, whose reads of B_pad cover N of its N_pad columns */
	for (Kernel *v = VEC_AT(plan->segments, Kernel, 2); v; v = v->fallback) {
		char *err = NULL;
		ck_assert_msg(fusion_check_sizes(v->fusion, gs, &err), "%s: %s", v->name, err);
		for (int i = 0; i < v->preconds.len; i++) {
			Precond *c = VEC_AT(v->preconds, Precond, i);
			ck_assert(!(c->kind == PC_MULTIPLE && strcmp(c->size->name, "N") == 0));
			ck_assert(!(c->kind == PC_ALIGNED && strcmp(c->tensor->name, "C") == 0));
		}
	}
	assert_plan_picks(k);
	tc_free(tc);
	/* K a constant multiple of 8: only B is copied (its N), A read as it is */
	tc = tc_lowered(MM("f16[M, 64]", "f16[64, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	k = tc->kernels[0];
	p = tc->prog->fusions[0]->pad_plan;
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->segments.len, 2);
	ck_assert_int_eq(p->seg_buffers.len, 1);
	ck_assert_str_eq(VEC_AT(p->seg_buffers, Tensor, 0)->name, "B_pad");
	/* the product reads the caller's A: its 16-byte alignment is not guaranteed, so the
	 * product keeps its scalar kernels (the copy of B, reading B per element, needs none) */
	Buf b = {0};
	chain_names(kernel_last_variant(k), &b);
	ck_assert_str_eq(b.s, "m_segments[m_seg0_kernel;m_seg1_kernel_M32 m_seg1_kernel_M32_scalar "
			      "m_seg1_kernel_M64 m_seg1_kernel_M64_scalar m_seg1_kernel "
			      "m_seg1_kernel_scalar]");
	buf_free(&b);
	ASSERT_PICKS(k, "M=100,N=40,K=64", "m_kernel");
	ASSERT_PICKS(k, "M=100,N=33,K=64", "m_segments[m_seg0_kernel, m_seg1_kernel]");
	expect_sim_picked(k, "M=70,N=33,K=64");
	tc_free(tc);
	/* a constant K that is not a multiple of 8: rounded in the copy's declaration */
	tc = tc_lowered(MM("f16[M, 45]", "f16[45, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"));
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=33,N=40,K=45")->name, "m_segments");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=70,N=3,K=45")->name, "m_segments");
	tc_free(tc);
	/* no plan: the rows of both operands constant multiples of 8 (K and N; K of X W^T; M and
	 * N of A^T B, whose symbolic K is no row length), f32 operands */
	const char *none[] = {
		MM("f16[M, 64]", "f16[64, 128]", "f32[M, 128]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
		MM("f16[M, 64]", "f16[N, 64]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"),
		MM("f16[K, 64]", "f16[K, 128]", "f32[64, 128]", "C[i, j] = sum(k: A[k, i] * B[k, j]);"),
		MM("f32[M, K]", "f32[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
		MM("f32[M, K]", "f32[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"),
	};
	for (int i = 0; i < (int)(sizeof none / sizeof *none); i++) {
		tc = tc_lowered(none[i]);
		ck_assert_ptr_null(tc->prog->fusions[0]->pad_plan);
		ck_assert_int_eq(kernel_last_variant(tc->kernels[0])->segments.len, 0);
		tc_free(tc);
	}
	/* batched, and the epilogue program (bias read by j < N, the padded columns never) */
	tc = tc_lowered(MM("bf16[Z, M, K]", "bf16[Z, K, N]", "f32[Z, M, N]",
			   "C[b, i, j] = sum(k: A[b, i, k] * B[b, k, j]);"));
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "Z=3,M=37,N=41,K=43")->name, "m_segments");
	tc_free(tc);
	tc = tc_lowered(epilogue_src);
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=70,N=33,K=45")->name, "e_segments");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=130,N=263,K=71")->name, "e_segments");
	tc_free(tc);
}
END_TEST

/* GEMM + bias + gelu with an f16 output: the lifted sum is the mma accumulator, C applies
 * the epilogue to the fragments in the same kernel. */
/* The padded plan of transposed operands (docs/tensor_cores.md, "Rows that are not a
 * multiple of 8"): each operand's rows padded along its contiguous dimension (X W^T: K of
 * both; A^T B: M of A, N of B, K kept; A^T W^T: M and K of A, K of B: K in both operands, as
 * their k ranges agree), the product on the copies with no scalar kernel, and which kernel
 * runs at which sizes, simulated against the reference. */
START_TEST(test_padded_plan_transposed)
{
	static const struct {
		const char *src, *workspace, *m_pad, *k_pad, *n_pad;
	} cases[] = {
		{MM("f16[M, K]", "f16[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"),
		 "workspace: A_pad: f16[M, ceildiv(K, 8) * 8], B_pad: f16[N, ceildiv(K, 8) * 8]",
		 NULL, "K_pad", NULL},
		{MM("f16[K, M]", "f16[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[k, i] * B[k, j]);"),
		 "workspace: A_pad: f16[K, ceildiv(M, 8) * 8], B_pad: f16[K, ceildiv(N, 8) * 8]",
		 "M_pad", NULL, "N_pad"},
		{MM("f16[K, M]", "f16[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[k, i] * B[j, k]);"),
		 "workspace: A_pad: f16[ceildiv(K, 8) * 8, ceildiv(M, 8) * 8], B_pad: f16[N, ceildiv(K, 8) * 8]",
		 "M_pad", "K_pad", NULL},
	};
	for (int c = 0; c < (int)(sizeof cases / sizeof *cases); c++) {
		TestCompile *tc = tc_lowered(cases[c].src);
		Kernel *k = tc->kernels[0];
		Kernel *plan = assert_plan_chain(k);
		Buf ws = {0};
		ir_print_fusion(plan->fusion, &ws);
		ck_assert_contains(ws.s, cases[c].workspace);
		buf_free(&ws);
		/* the product's sizes: each rounded one is its size rounded up, the others kept */
		Segment *mm = VEC_AT(plan->fusion->segments, Segment, 2);
		int64_t sizes[8];
		parse_dims(k->fusion, "M=41,N=43,K=45", sizes);
		ck_assert_int_eq(seg_size(mm, sizes, "M"), 41);
		ck_assert_int_eq(seg_size(mm, sizes, "N"), 43);
		const char *pads[3] = {cases[c].m_pad, cases[c].k_pad, cases[c].n_pad};
		for (int q = 0; q < 3; q++)
			if (pads[q])
				ck_assert_int_eq(seg_size(mm, sizes, pads[q]), 48);
		if (!cases[c].k_pad)
			ck_assert_int_eq(seg_size(mm, sizes, "K"), 45);
		assert_plan_picks(k);
		tc_free(tc);
	}
	/* A^T B with M a constant multiple of 8: only B is copied, A read as it is (so the
	 * product keeps scalar kernels: A's alignment is not guaranteed) */
	TestCompile *tc = tc_lowered(MM("f16[K, 64]", "f16[K, N]", "f32[64, N]",
					"C[i, j] = sum(k: A[k, i] * B[k, j]);"));
	Fusion *p = tc->prog->fusions[0]->pad_plan;
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->seg_buffers.len, 1);
	ck_assert_str_eq(VEC_AT(p->seg_buffers, Tensor, 0)->name, "B_pad");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "K=45,N=33")->name, "m_segments");
	ck_assert_str_eq(kernel_last_variant(VEC_AT(kernel_last_variant(tc->kernels[0])->segments,
						    Kernel, 1))->name, "m_seg1_kernel_scalar");
	tc_free(tc);
	/* a constant K that is not a multiple of 8 (X W^T): no tuned kernel, the plan is the
	 * schedule */
	tc = tc_lowered(MM("f16[M, 45]", "f16[N, 45]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"));
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=70,N=33")->name, "m_segments");
	tc_free(tc);
	/* batched, bf16, both transposed; PyTorch's Linear with a bias and an f16 output */
	tc = tc_lowered(MM("bf16[Z, K, M]", "bf16[Z, N, K]", "f32[Z, M, N]",
			   "C[b, i, j] = sum(k: A[b, k, i] * B[b, j, k]);"));
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "Z=3,M=37,N=41,K=43")->name, "m_segments");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "Z=2,M=40,N=24,K=32")->name, "m_kernel_M64");
	tc_free(tc);
	tc = tc_lowered("fusion e(X: f16[M, K], W: f16[N, K], bias: f16[N]) -> (C: f16[M, N]) {\n"
			"  C[i, j] = f16(sum(k: f32(X[i, k]) * f32(W[j, k])) + f32(bias[j]));\n}\n");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=70,N=33,K=45")->name, "e_segments");
	ck_assert_str_eq(expect_sim_picked(tc->kernels[0], "M=130,N=264,K=72")->name, "e_kernel");
	tc_free(tc);
}
END_TEST

START_TEST(test_epilogue_schedule)
{
	TestCompile *tc;
	char *s = tuned(epilogue_src, &tc);
	ck_assert_contains(s, "t_sum0.mma(m16n8k16, ldmatrix);");
	ck_assert_contains(s, "t_sum0.compute_at(C, bj);");
	ck_assert_contains(s, "C.fragment(m16, n8);");
	ck_assert_not_contains(s, "cache_before");
	free(s);
	char *ir = tc_kernel_ir(tc, 0);
	/* one kernel: the accumulator in registers, erf applied before the store of C */
	ck_assert_contains(ir, "alloc local f32 t_sum0[");
	ck_assert_contains(ir, "erf(");
	ck_assert_not_contains(ir, "alloc global");
	free(ir);
	tc_free(tc);
}
END_TEST

/* The FMA schedule of gemm_f32.fus for f32 operands, and for transposed f16 operands. */
START_TEST(test_fma_schedule)
{
	TestCompile *tc;
	char *s = tuned(MM("f32[M, K]", "f32[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
			&tc);
	ck_assert_not_contains(s, "mma");
	/* A row-major f32 A: its register fragment read along k (sgemm_tuned.fus) */
	ck_assert_contains(s, "C_acc.split(ki, 4) -> (kq, kv);");
	ck_assert_contains(s, "A_smem_reg.compute_at(C_acc, kq);");
	ck_assert_contains(s, "A_smem_reg.vectorize(kv);");
	ck_assert_not_contains(s, "A_smem_reg.double_buffer();");
	ck_assert_contains(s, "B_smem_reg.double_buffer();");
	ck_assert_contains(s, "A_smem.stages(4);");
	ck_assert_contains(s, "C.vectorize(jv);");
	free(s);
	ck_assert_int_eq(kernel_last_variant(tc->kernels[0])->preconds.len, 0);
	tc_free(tc);
	s = tuned(MM("f32[K, M]", "f32[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[k, i] * B[j, k]);"), &tc);
	ck_assert_not_contains(s, "mma");
	ck_assert_contains(s, "B_smem_reg.unroll(jv);");
	/* A[k, i]: its fragment one k at a time, double-buffered */
	ck_assert_contains(s, "A_smem_reg.double_buffer();");
	free(s);
	tc_free(tc);
	/* f64: 4 columns would be a 32-byte vector; unrolled, still the tuned level */
	s = tuned(MM("f64[M, K]", "f64[K, N]", "f64[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"), &tc);
	ck_assert_contains(s, "C.unroll(jv);");
	free(s);
	expect_sim_picked(tc->kernels[0], "M=40,N=24,K=32");
	tc_free(tc);
}
END_TEST

/* Every program at sizes no tile divides, 0 and 1, and multiples of the vectors: the kernel
 * the launcher picks and the chain's last (scalar) kernel, against the reference. */
START_TEST(test_matmul_sim)
{
	static const char *srcs[] = {
		MM("f16[M, K]", "f16[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
		MM("bf16[Z, M, K]", "bf16[Z, K, N]", "f32[Z, M, N]",
		   "C[b, i, j] = sum(k: A[b, i, k] * B[b, k, j]);"),
		epilogue_src,
		/* a scale and a residual around the product, bf16 output */
		"fusion r(A: bf16[M, K], B: bf16[K, N], R: bf16[M, N]) -> (C: bf16[M, N]) {\n"
		"  C[i, j] = bf16(0.125 * sum(k: f32(A[i, k]) * f32(B[k, j])) + f32(R[i, j]));\n}\n",
		MM("f32[M, K]", "f32[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
		MM("f32[Z, K, M]", "f32[Z, N, K]", "f32[Z, M, N]",
		   "C[b, i, j] = sum(k: B[b, j, k] * A[b, k, i]);"),
		MM("f16[M, K]", "f16[N, K]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[j, k]);"),
		MM("f16[K, M]", "f16[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[k, i] * B[k, j]);"),
		MM("bf16[Z, K, M]", "bf16[Z, N, K]", "f32[Z, M, N]",
		   "C[b, i, j] = sum(k: A[b, k, i] * B[b, j, k]);"),
	};
	/* constant extents no tile divides (64 x 32 tiles), and tiles as large as the extents
	 * (one block: the lowering's proofs fold its block index, which can only be 0) */
	static const char *consts[] = {
		MM("f16[100, 72]", "f16[72, 40]", "f32[100, 40]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
		MM("f16[128, 64]", "f16[64, 256]", "f32[128, 256]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
	};
	for (int i = 0; i < 2; i++) {
		TestCompile *ct = tc_lowered(consts[i]);
		ck_assert_ptr_null(ct->prog->fusions[0]->auto_fallback);
		expect_sim_picked(ct->kernels[0], "");
		expect_sim(kernel_last_variant(ct->kernels[0]), "");
		tc_free(ct);
	}
	const char *dims[] = {"Z=2,M=70,N=33,K=45", "Z=1,M=40,N=24,K=32", "Z=1,M=1,N=1,K=1",
			      "Z=1,M=0,N=5,K=3", "Z=1,M=8,N=3,K=0", "Z=0,M=8,N=8,K=8"};
	for (int i = 0; i < (int)(sizeof srcs / sizeof *srcs); i++) {
		TestCompile *tc = tc_lowered(srcs[i]);
		ck_assert_ptr_null(tc->prog->fusions[0]->auto_fallback);
		Kernel *k = tc->kernels[0];
		for (int s = 0; s < (int)(sizeof dims / sizeof *dims); s++) {
			Kernel *run = expect_sim_picked(k, dims[s]);
			/* multiples of 8 run a vector kernel, the others a scalar one (tensor
			 * cores: the padded plan, for transposed operands, the last three, too) */
			bool vector = s == 1 || s == 5, mma = i < 4 || i > 5;
			const char *other = mma ? "_segments" : "_scalar";
			ck_assert_msg((strstr(run->name, other) == NULL) == vector, "%s at %s ran %s",
				      srcs[i], dims[s], run->name);
			expect_sim(kernel_last_variant(k), dims[s]);
		}
		tc_free(tc);
	}
}
END_TEST

/* A symbolic M gets size variants with 32- and 64-row tiles: the chain M32, M64, the kernel,
 * then the padded plan; each runs where its bound and vectors allow and matches the
 * reference on both sides of each bound. */
START_TEST(test_short_m_variants)
{
	TestCompile *tc;
	char *s = tuned(MM("f16[M, K]", "f16[K, N]", "f32[M, N]", "C[i, j] = sum(k: A[i, k] * B[k, j]);"),
			&tc);
	free(s);
	Fusion *f = tc->prog->fusions[0];
	ck_assert_int_eq(f->variants.len, 2);
	const char *names[] = {"m_kernel_M32", "m_kernel_M64", "m_kernel", "m_segments"};
	int n = 0;
	for (Kernel *k = tc->kernels[0]; k; k = k->fallback, n++) {
		ck_assert_int_lt(n, 4);
		ck_assert_str_eq(k->name, names[n]);
	}
	ck_assert_int_eq(n, 4);
	const char *dims[] = {"M=1,N=40,K=32", "M=32,N=40,K=45", "M=33,N=40,K=32", "M=64,N=40,K=45",
			      "M=65,N=40,K=32", "M=65,N=40,K=45"};
	const char *runs[] = {"m_kernel_M32", "m_segments", "m_kernel_M64", "m_segments",
			      "m_kernel", "m_segments"};
	for (int i = 0; i < 6; i++)
		ck_assert_str_eq(expect_sim_picked(tc->kernels[0], dims[i])->name, runs[i]);
	tc_free(tc);
}
END_TEST

/* For a target older than sm_80: the FMA schedule with plain vector copies (no mma, no
 * cp.async), whatever the dtypes, lowered for sm_75 and right in the simulator. */
START_TEST(test_before_sm80)
{
	LowerOptions o = {.arch = 75, .verify = true};
	TestCompile *tc = tc_compile_opts(MM("f16[M, K]", "f16[K, N]", "f32[M, N]",
					     "C[i, j] = sum(k: A[i, k] * B[k, j]);"), &o);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_ptr_null(tc->prog->fusions[0]->auto_fallback);
	char *s = schedule_text(tc, 0);
	ck_assert_not_contains(s, "mma");
	ck_assert_not_contains(s, "cp_async");
	ck_assert_contains(s, "A_smem.stages(4);");
	free(s);
	ck_assert_int_lt(tc->kernels[0]->min_arch, 80);
	expect_sim_picked(tc->kernels[0], "M=40,N=24,K=32");
	expect_sim_picked(tc->kernels[0], "M=70,N=33,K=45");
	tc_free(tc);
}
END_TEST

Suite *auto_matmul_suite(void)
{
	Suite *s = suite_create("auto_matmul");
	TCase *tc = tcase_create("auto_matmul");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_classify);
	tcase_add_test(tc, test_mma_schedule);
	tcase_add_test(tc, test_mma_transposed_schedule);
	tcase_add_test(tc, test_epilogue_schedule);
	tcase_add_test(tc, test_fma_schedule);
	tcase_add_test(tc, test_matmul_sim);
	tcase_add_test(tc, test_before_sm80);
	tcase_add_test(tc, test_short_m_variants);
	tcase_add_test(tc, test_padded_plan);
	tcase_add_test(tc, test_padded_plan_transposed);
	suite_add_tcase(s, tc);
	return s;
}
