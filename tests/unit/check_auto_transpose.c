/* check_auto_transpose.c: the automatic scheduler's transpose/permute class
 * (scheduler/auto_transpose.c, docs/auto_schedule.md "Transposes and permutes"): which
 * outputs the classifier puts in it, the exact schedule of the 2-D transpose, the lowered
 * tile (padded rows, one barrier), and the simulator at sizes no tile divides, 0 and 1
 * (tests/golden/sim/auto_transpose.fus runs more programs through tests/check_examples.sh). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "scheduler/auto_plan.h"
#include "tests/unit/testutil.h"

/* The classification of output `out` of the first fusion of src, on the fusion as sema
 * builds it (before any schedule). */
static bool classify(const char *src, int out, AutoTranspose *c)
{
	TestCompile *tc = tc_compile(src, false);
	ck_assert_msg(tc->prog != NULL, "%s", tc->diags);
	Fusion *f = tc->prog->fusions[0];
	Fusion *g = sema_fusion(tc->arena, tc->diag, f->ast);
	ck_assert_ptr_nonnull(g);
	bool in = auto_transpose_classify(g, g->outputs[out], c);
	/* the tensors are the arena's: keep names only (none when not in the class) */
	if (!in)
		c->nins = 0;
	for (int i = 0; i < c->nins; i++)
		c->ins[i] = (Tensor *)strdup(c->ins[i]->name);
	tc_free(tc);
	return in;
}

static void free_names(AutoTranspose *c)
{
	for (int i = 0; i < c->nins; i++)
		free(c->ins[i]);
}

#define IN_NAME(c, i) ((const char *)(c).ins[i])

START_TEST(test_classify)
{
	AutoTranspose c;
	/* the 2-D transpose: x's inner dimension follows y's index 0 */
	ck_assert(classify("fusion t(x: f32[M, N]) -> (y: f32[N, M]) { y[j, i] = x[i, j]; }", 0, &c));
	ck_assert_int_eq(c.a, 0);
	ck_assert_int_eq(c.nins, 1);
	ck_assert_str_eq(IN_NAME(c, 0), "x");
	ck_assert_int_eq(c.tile_a, 32); /* a row of the tile: 32 f32, one 128-byte line */
	ck_assert_int_eq(c.tile_b, 64);
	free_names(&c);
	/* permute (2, 0, 1): y[k, i, j] = x[i, j, k] */
	ck_assert(classify("fusion p(x: f32[A, B, C]) -> (y: f32[C, A, B]) { y[k, i, j] = x[i, j, k]; }",
			   0, &c));
	ck_assert_int_eq(c.a, 0);
	free_names(&c);
	/* (0, 2, 1): the batch index stays outside the tile */
	ck_assert(classify("fusion p(x: f32[A, B, C]) -> (y: f32[A, C, B]) { y[b, j, i] = x[b, i, j]; }",
			   0, &c));
	ck_assert_int_eq(c.a, 1);
	free_names(&c);
	/* an epilogue: b[j] is a broadcast along y's inner index, read directly */
	ck_assert(classify("fusion e(x: f32[M, N], b: f32[N]) -> (y: f32[N, M]) { y[j, i] = x[i, j] * 2.0 + b[j]; }",
			   0, &c));
	ck_assert_int_eq(c.nins, 1);
	ck_assert_str_eq(IN_NAME(c, 0), "x");
	free_names(&c);
	/* a prologue through an inlined intermediate, 16-bit */
	ck_assert(classify("fusion h(x: f16[M, N]) -> (y: f16[N, M]) { t[i, j] = x[i, j] * 2.0; y[j, i] = t[i, j]; }",
			   0, &c));
	ck_assert_int_eq(c.tile_a, 64); /* 64 f16: one 128-byte line */
	ck_assert_int_eq(c.tile_b, 64);
	free_names(&c);
	/* bf16 read, f32 written: the read side sets the tile; an f32 and a bf16 input: 32 */
	ck_assert(classify("fusion w(x: bf16[M, N]) -> (y: f32[N, M]) { y[j, i] = f32(x[i, j]); }", 0, &c));
	ck_assert_int_eq(c.tile_a, 64);
	free_names(&c);
	ck_assert(classify("fusion m(x: bf16[M, N], z: f32[M, N]) -> (y: f32[N, M]) { y[j, i] = f32(x[i, j]) + z[i, j]; }",
			   0, &c));
	ck_assert_int_eq(c.nins, 2);
	ck_assert_int_eq(c.tile_a, 32);
	free_names(&c);
	/* a constant extent of a smaller than the 16-bit tile (but not the f32 one): not the class */
	ck_assert(!classify("fusion s(x: bf16[M, 48]) -> (y: bf16[48, M]) { y[j, i] = x[i, j]; }", 0, &c));
	ck_assert(classify("fusion s(x: f32[M, 48]) -> (y: f32[48, M]) { y[j, i] = x[i, j]; }", 0, &c));
	free_names(&c);

	/* not transposes: identity, broadcast along the inner index, a pure row broadcast */
	ck_assert(!classify("fusion s(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j]; }", 0, &c));
	ck_assert(!classify("fusion s(x: f32[M, N], c: f32[M]) -> (y: f32[M, N]) { y[i, j] = x[i, j] + c[i]; }",
			    0, &c));
	ck_assert(!classify("fusion s(c: f32[M]) -> (y: f32[M, N]) { y[i, j] = c[i]; }", 0, &c));
	/* x read in two orders: one cache cannot serve both */
	ck_assert(!classify("fusion s(x: f32[N, N]) -> (y: f32[N, N]) { y[j, i] = x[i, j] + x[j, i]; }",
			    0, &c));
	/* a constant subscript */
	ck_assert(!classify("fusion s(x: f32[M, N]) -> (y: f32[N, M]) { y[j, i] = x[i, 0] * x[i, j]; }",
			    0, &c));
	/* x also read by another output's nest */
	ck_assert(!classify("fusion s(x: f32[M, N]) -> (y: f32[N, M], z: f32[M, N]) { y[j, i] = x[i, j]; z[i, j] = x[i, j]; }",
			    0, &c));
	/* x's inner extent a constant below the tile */
	ck_assert(!classify("fusion s(x: f32[M, 8]) -> (y: f32[8, M]) { y[j, i] = x[i, j]; }", 0, &c));
	ck_assert(!classify("fusion s(x: f32[48, N]) -> (y: f32[N, 48]) { y[j, i] = x[i, j]; }", 0, &c));
	/* x lacks y's batch index (a broadcast): the merged block index cannot be replayed on it */
	ck_assert(!classify("fusion s(x: f32[M, N], z: f32[B, N, M]) -> (y: f32[B, N, M]) { y[b, j, i] = x[i, j] + z[b, j, i]; }",
			    0, &c));
	/* a reduction output */
	ck_assert(!classify("fusion s(x: f32[M, N]) -> (y: f32[N]) { y[j] = sum(i: x[i, j]); }", 0, &c));
}
END_TEST

static const char transpose_src[] =
	"fusion transpose(x: f32[M, N]) -> (y: f32[N, M]) {\n"
	"  y[j, i] = x[i, j];\n"
	"}\n";

/* The exact schedule: 32 x 64 tiles on blockIdx.x, x staged in rows of 33, a warp reading
 * and writing 32 consecutive elements of a row, 8 per thread. */
START_TEST(test_transpose_schedule)
{
	TestCompile *tc = tc_lowered(transpose_src);
	char *ir = tc_fusion_ir(tc, 0);
	ck_assert_contains(ir,
		"  tensor x_smem: f32[M, N] intermediate shared compute_at(y, 0) cache_after(x) pad(1)\n"
		"    def x_smem[i, j] = x[i, j]\n"
		"    domain:\n"
		"      bx: ceildiv(N, 32) * ceildiv(M, 64) = y.bx (merge of jo and io)\n"
		"      br: 8 (split of it by 8, outer)\n"
		"      ty: 8 threadIdx.y (split of it by 8, inner)\n"
		"      jt: 32 threadIdx.x (split of j by 32, inner)\n"
		"  tensor y: f32[N, M] output global\n"
		"    def y[j, i] = x_smem[i, j]\n"
		"    domain:\n"
		"      bx: ceildiv(N, 32) * ceildiv(M, 64) blockIdx.x (merge of jo and io)\n"
		"      ar: 4 (split of jt by 8, outer)\n"
		"      bh: 2 (split of it by 32, outer)\n"
		"      ty: 8 threadIdx.y (split of jt by 8, inner)\n"
		"      bl: 32 threadIdx.x (split of it by 32, inner)\n");
	free(ir);
	char *k = tc_kernel_ir(tc, 0);
	ck_assert_contains(k, "block(32, 8) smem(8448)");
	ck_assert_contains(k, "alloc shared f32 x_smem[2112];");
	/* the tile's rows are 33 apart on both sides */
	ck_assert_contains(k, "x_smem[br * 264 + threadIdx.y * 33 + threadIdx.x] = x[");
	ck_assert_contains(k, "= x_smem[bh * 1056 + threadIdx.x * 33 + ar * 8 + threadIdx.y];");
	/* one barrier between the copy and the reads (the padded rows are each one thread's) */
	const char *s = strstr(k, "__syncthreads()");
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_null(strstr(s + 1, "__syncthreads()"));
	free(k);
	tc_free(tc);
}
END_TEST

/* 16-bit: 64 x 64 tiles (a row of x is one 128-byte line, read as two 32-element halves),
 * rows of 2 x 33 elements: 33 words, so the column reads still fall in 32 banks. */
START_TEST(test_transpose_bf16_tile)
{
	TestCompile *tc = tc_lowered("fusion transpose(x: bf16[M, N]) -> (y: bf16[N, M]) {\n"
				     "  y[j, i] = x[i, j];\n}\n");
	char *ir = tc_fusion_ir(tc, 0);
	ck_assert_contains(ir, "      ah: 2 (split of jt by 32, outer)\n"
			       "      al: 32 threadIdx.x (split of jt by 32, inner)\n");
	ck_assert_contains(ir, "      ar: 8 (split of jt by 8, outer)\n");
	free(ir);
	char *k = tc_kernel_ir(tc, 0);
	ck_assert_contains(k, "block(32, 8)");
	ck_assert_contains(k, "alloc shared bf16 x_smem[4224];");
	ck_assert_contains(k, "x_smem[br * 528 + threadIdx.y * 66 + ah * 33 + threadIdx.x] = x[");
	ck_assert_contains(k, "= x_smem[bh * 2112 + threadIdx.x * 66 + ");
	free(k);
	tc_free(tc);
}
END_TEST

/* The kernels against the reference, at sizes no tile divides, 0, 1 and non-square. */
/* A transpose beside a reduction output: the tile schedule is the whole of the transposed
 * output's schedule (it was also given the general one, which refused the tuned level). */
START_TEST(test_transpose_beside_reduction)
{
	TestCompile *tc = tc_lowered(
		"fusion t(x: f32[M, N], z: f32[M, N]) -> (y: f32[N, M], s: f32[M]) {\n"
		"  y[j, i] = x[i, j] * 2.0;\n  s[i] = sum(j: z[i, j]);\n}\n");
	Fusion *f = tc->prog->fusions[0];
	ck_assert_ptr_null(f->auto_fallback);
	ck_assert_ptr_nonnull(fusion_find_tensor(f, "x_smem"));
	tc_free(tc);
}
END_TEST

START_TEST(test_transpose_sim)
{
	static const char src[] =
		"fusion transpose(x: f32[M, N]) -> (y: f32[N, M]) {\n"
		"  y[j, i] = x[i, j];\n"
		"}\n"
		"fusion permute3(x: bf16[A, M, N]) -> (y: bf16[N, A, M]) {\n"
		"  y[k, i, j] = x[i, j, k];\n"
		"}\n"
		"fusion epilogue(x: f32[M, N], b: f32[N]) -> (y: f32[N, M]) {\n"
		"  y[j, i] = x[i, j] * 2.0 + b[j];\n"
		"}\n";
	const char *dims[] = {"A=2,M=67,N=45", "A=1,M=0,N=5", "A=1,M=5,N=0", "A=1,M=1,N=1",
			      "A=3,M=1,N=100", "A=2,M=100,N=1", "A=1,M=68,N=33", "A=1,M=64,N=130"};
	TestCompile *tc = expect_auto(src, dims, 8);
	for (int i = 0; i < 3; i++) {
		char *ir = tc_fusion_ir(tc, i);
		ck_assert_contains(ir, "pad(1)");
		free(ir);
	}
	tc_free(tc);
}
END_TEST

Suite *auto_transpose_suite(void)
{
	Suite *s = suite_create("auto_transpose");
	TCase *tc = tcase_create("auto_transpose");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_classify);
	tcase_add_test(tc, test_transpose_bf16_tile);
	tcase_add_test(tc, test_transpose_schedule);
	tcase_add_test(tc, test_transpose_sim);
	tcase_add_test(tc, test_transpose_beside_reduction);
	suite_add_tcase(s, tc);
	return s;
}
