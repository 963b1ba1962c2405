/* check_auto_collapse.c: collapsed axes (scheduler/collapse.c and the row analysis of
 * scheduler/auto_schedule.c; docs/auto_schedule.md, "Collapsed axes"): adjacent indices that
 * every read uses only together, in order, over dimensions of their extents are scheduled as
 * one axis (a merge directive first). The class each fusion gets, which merges its schedule
 * writes, what is not collapsed, the vector and 32-bit index preconditions of a merged
 * column, and the simulator against the reference at sizes no split divides, 0 and 1. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "scheduler/auto_plan.h"
#include "tests/unit/testutil.h"

/* The schedule blocks of f (as `--emit=schedule` prints them): its own or its segments',
 * then each size variant's, separated by a line "--". */
static void put_schedules(Fusion *f, Buf *b)
{
	for (int i = 0; i < f->segments.len; i++)
		put_schedules(VEC_AT(f->segments, Segment, i)->fusion, b);
	if (!f->segments.len)
		ast_print_schedule(f->ast_schedule, b);
	buf_puts(b, "--\n");
	for (int v = 0; v < f->variants.len; v++)
		put_schedules(VEC_AT(f->variants, Fusion, v), b);
}

/* The class and the schedule blocks (put_schedules) of src's one fusion, tuned (not a
 * fallback level): each of has[] in one of them. */
static void expect_schedule(const char *src, const char *cls, const char **has, int nhas)
{
	TestCompile *tc = tc_compile(src, false);
	ck_assert_msg(tc->prog != NULL && tc->diags[0] == 0, "did not compile:\n%s", tc->diags);
	Fusion *f = tc->prog->fusions[0];
	ck_assert_msg(f->auto_scheduled && !f->auto_fallback, "%s: not the tuned schedule", f->name);
	ck_assert_msg(f->auto_class && strcmp(f->auto_class, cls) == 0, "class '%s', expected '%s' for\n%s",
		      f->auto_class ? f->auto_class : "(none)", cls, src);
	Buf b = {0};
	put_schedules(f, &b);
	for (int i = 0; i < nhas; i++)
		ck_assert_msg(strstr(b.s, has[i]) != NULL, "no '%s' in\n%s", has[i], b.s);
	buf_free(&b);
	tc_free(tc);
}

static const char sum_last2[] = "fusion s2(x: f32[B, M, N]) -> (s: f32[B]) {\n"
				"  s[b] = sum(i, j: x[b, i, j]);\n"
				"}\n";

static const char col_lead2[] = "fusion c2(x: f32[B, T, H]) -> (s: f32[H]) {\n"
				"  s[h] = sum(b, t: x[b, t, h]);\n"
				"}\n";

static const char norm_hw[] =
	"fusion ln(x: f32[B, C, H, W]) -> (y: f32[B, C, H, W]) {\n"
	"  mean[b, c] = sum(i, j: x[b, c, i, j]) / (H * W);\n"
	"  d[b, c, i, j] = x[b, c, i, j] - mean[b, c];\n"
	"  rstd[b, c] = rsqrt(sum(i, j: d[b, c, i, j] * d[b, c, i, j]) / (H * W) + 0.00001);\n"
	"  y[b, c, i, j] = d[b, c, i, j] * rstd[b, c];\n"
	"}\n";

/* The merges each class writes, first, and the class's directives on the merged axis. */
START_TEST(test_collapse_merges)
{
	/* a row sum over two axes: the rows class, the column i * N + j */
	const char *rows[] = {"  s.merge(i, j) -> col;\n", "  s.split(col, 4) -> (jo, jv);\n",
			      "  s.bind(b, blockIdx.x);\n", "  x_reg.vectorize(jv);\n"};
	expect_schedule(sum_last2, "rows", rows, countof(rows));
	/* three reduced axes: merged in order */
	const char *three[] = {"  s.merge(i, j) -> col;\n", "  s.merge(col, k) -> col2;\n",
			       "  s.split(col2, 4) -> (jo, jv);\n"};
	expect_schedule("fusion s3(x: f32[B, L, M, N]) -> (s: f32[B]) {\n"
			"  s[b] = max(i, j, k: x[b, i, j, k]);\n"
			"}\n",
			"rows", three, countof(three));
	/* a column sum over the two leading axes: the outer class, the reduced index b * T + t */
	const char *outer[] = {"  s.merge(b, t) -> r;\n", "  s.split(r, 16) -> (ro, ty);\n",
			       "  s_part_acc.vectorize(jv);\n"};
	expect_schedule(col_lead2, "outer", outer, countof(outer));
	/* a middle-axis sum over two adjacent axes */
	const char *mid[] = {"  s.merge(t, u) -> r;\n", "  s.merge(b, hx) -> bx;\n"};
	expect_schedule("fusion m2(x: f32[B, T, U, H]) -> (s: f32[B, H]) {\n"
			"  s[b, h] = sum(t, u: x[b, t, u, h]);\n"
			"}\n",
			"middle", mid, countof(mid));
	/* layer normalization over (H, W): the output and both sums merge their column */
	const char *norm[] = {"  y.merge(i, j) -> col;\n", "  y.merge(b, c) -> row;\n",
			      "  y.vectorize(jv);\n", "  mean_sum0.merge(i, j) -> col;\n",
			      "  rstd_sum0.merge(i, j) -> col;\n", "  mean.compute_at(y, row);\n"};
	expect_schedule(norm_hw, "rows", norm, countof(norm));
	/* one column index: no merge of the column (the rows' merge only) */
	const char *one[] = {"  s.merge(b, t) -> row;\n"};
	expect_schedule("fusion r3(x: f32[B, T, C]) -> (s: f32[B, T]) {\n"
			"  s[b, t] = sum(c: x[b, t, c]);\n"
			"}\n",
			"rows", one, countof(one));
}
END_TEST

/* Indices read apart, out of order or over other extents are not collapsed: the general
 * schedule (correct, not tuned), as before; or, when the last reduced index is the last
 * subscript of every read, the reduction is split into its row partials over that index and
 * their reduction over the other (segment.c, split_reductions): two segments. */
START_TEST(test_collapse_refused)
{
	const char *none[] = {"  s.split(b, "};
	/* out of order: x[b, j, i] */
	expect_schedule("fusion f(x: f32[B, N, M]) -> (s: f32[B]) {\n"
			"  s[b] = sum(i, j: x[b, j, i]);\n"
			"}\n",
			"general", none, 1);
	/* j alone in a read: w[j]; rows of N (s_rows[b, i]), then rows of M */
	const char *w_rows[] = {"s_rows.merge(b, i) -> row;", "s.bind(b, blockIdx.x);"};
	expect_schedule("fusion f(x: f32[B, M, N], w: f32[N]) -> (s: f32[B]) {\n"
			"  s[b] = sum(i, j: x[b, i, j] * w[j]);\n"
			"}\n",
			"segments: rows; rows", w_rows, countof(w_rows));
	/* not adjacent: x[b, i, b2, j]-like, the kept index between the reduced ones; rows of
	 * N (s_rows[i, b]), then a column sum over [M, B] (rfactor: the outer schedule) */
	const char *apart[] = {"s_rows.merge(i, b) -> row;", "s.rfactor(rr, u) -> s_part;"};
	expect_schedule("fusion f(x: f32[M, B, N]) -> (s: f32[B]) {\n"
			"  s[b] = sum(i, j: x[i, b, j]);\n"
			"}\n",
			"segments: rows; outer", apart, countof(apart));
	/* the column of an outer sum read transposed by a second input */
	const char *gen[] = {"  s.split(h, "};
	expect_schedule("fusion f(x: f32[B, T, H], y: f32[T, B, H]) -> (s: f32[H]) {\n"
			"  s[h] = sum(b, t: x[b, t, h] + y[t, b, h]);\n"
			"}\n",
			"general", gen, 1);
}
END_TEST

/* auto_collapsible on the definitions as sema builds them. */
START_TEST(test_collapsible_entry)
{
	TestCompile *tc = tc_compile("fusion f(x: f32[B, M, N], w: f32[M, N]) -> (s: f32[B]) {\n"
				     "  s[b] = sum(i, j: x[b, i, j] * w[i, j]);\n"
				     "}\n"
				     "fusion g(x: f32[B, N, N]) -> (s: f32[B]) {\n"
				     "  s[b] = sum(i, j: x[b, i, j] + x[b, j, i]);\n"
				     "}\n"
				     "fusion h(x: f32[B, M, N], y: f32[B, M, 4]) -> (s: f32[B]) {\n"
				     "  s[b] = sum(i, j: x[b, i, j] + y[b, i, 0]);\n"
				     "}\n",
				     false);
	ck_assert_ptr_nonnull(tc->prog);
	Fusion *f = sema_fusion(tc->arena, tc->diag, tc->prog->fusions[0]->ast);
	Fusion *g = sema_fusion(tc->arena, tc->diag, tc->prog->fusions[1]->ast);
	Fusion *h = sema_fusion(tc->arena, tc->diag, tc->prog->fusions[2]->ast);
	ck_assert(auto_collapsible(f->outputs[0], 1, 3));
	ck_assert(auto_collapsible(f->outputs[0], 1, 2)); /* one index: trivially */
	ck_assert(!auto_collapsible(f->outputs[0], 0, 2)); /* b with i: w[i, j] has i without b */
	ck_assert(!auto_collapsible(g->outputs[0], 1, 3)); /* x[b, j, i] reads them reversed */
	ck_assert(!auto_collapsible(h->outputs[0], 1, 3)); /* y[b, i, 0]: i without j */
	tc_free(tc);
}
END_TEST

/* A merged column vectorizes along its innermost extent: the tuned kernel requires N % 4 (not
 * M * N % 4), its scalar kernel nothing; the 32-bit copy is guarded by the element counts;
 * a size variant by the product M * N first. */
START_TEST(test_collapse_preconditions)
{
	TestCompile *tc = tc_compile_i32(sum_last2);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	Buf ir = {0};
	kir_print(k, &ir);
	ck_assert_contains(ir.s, "kernel s2_kernel_M_N128_i32 grid(ceildiv(B, 16)) block(8, 16) {\n"
				 "  require M * N <= 128;\n"
				 "  require aligned(x, 16);\n"
				 "  require N % 4 == 0;\n"
				 "  require index32(2130706431);\n");
	buf_free(&ir);
	/* the long-row kernel (the fusion's own) */
	char *own = tc_kernel_ir(tc, 0);
	ck_assert_contains(own, "kernel s2_kernel_i32 grid(B, 16) block(256) {\n"
				"  require aligned(x, 16);\n"
				"  require N % 4 == 0;\n"
				"  require index32(2130706431);\n");
	free(own);
	int64_t even[3] = {4, 33, 128}, odd[3] = {4, 128, 33}, big[3] = {1, 65536, 32768};
	ck_assert_str_eq(kernel_pick(k, even, NULL)->name, "s2_kernel_M_N16384_i32");
	ck_assert_str_eq(kernel_pick(k, odd, NULL)->name, "s2_kernel_M_N16384_i32_scalar");
	ck_assert_str_eq(kernel_pick(k, big, NULL)->name, "s2_kernel");
	tc_free(tc);
}
END_TEST

/* The size variants of a collapsed column: bounds on the product M * N (the row length), the
 * launcher's pick on both sides of each bound, past 31 bits (the 64-bit kernel of the same
 * variant), a product past 64 bits, zeros; rows longer than 65536 split over 16 blocks on
 * blockIdx.y (auto_long_row.c), the collapsed merge first. */
START_TEST(test_collapse_variants)
{
	TestCompile *tc = tc_compile_i32(sum_last2);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Fusion *f = tc->prog->fusions[0];
	static const int64_t bounds[] = {128, 256, 1024, 4096, 16384, 65536};
	ck_assert_int_eq(f->variants.len, countof(bounds));
	for (int v = 0; v < f->variants.len; v++) {
		Fusion *g = VEC_AT(f->variants, Fusion, v);
		SizeProd *p = fusion_size_prod(g, false);
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(p->bound, bounds[v]);
		ck_assert_int_eq(p->of, 6); /* M and N */
		ck_assert_int_eq(g->sizes[0]->bound, 0);
		ck_assert_int_eq(g->sizes[1]->bound + g->sizes[2]->bound, 0);
	}
	/* the bounded product's range (ir_range), not one symbol's; the failure's wording */
	Fusion *g = VEC_AT(f->variants, Fusion, 3);
	Arena *a = tc->arena;
	IrExpr *m = ir_size(a, g->sizes[1]), *n = ir_size(a, g->sizes[2]);
	int64_t lo, hi;
	ck_assert(ir_range(NULL, ix_mul(a, m, n), &lo, &hi) && lo == 0 && hi == 4096);
	ck_assert(ir_range(NULL, ix_mul(a, ir_int(a, 4), ix_mul(a, n, m)), &lo, &hi) && hi == 16384);
	ck_assert(!ir_range(NULL, m, &lo, &hi));
	ck_assert(!ir_range(NULL, ix_mul(a, m, m), &lo, &hi));
	ck_assert(!ir_range(NULL, ix_mul(a, ix_mul(a, m, n), ir_size(a, g->sizes[0])), &lo, &hi));
	Precond *pc = VEC_AT(tc->kernels[0]->preconds, Precond, 0);
	ck_assert(pc->kind == PC_AT_MOST && !pc->size);
	ck_assert_str_eq(precond_failure(a, pc).pre, "M * N is more than 128 (size variant)");
	/* the fusion's own schedule: long rows (above 65536) */
	SizeProd *own = fusion_size_prod(f, true);
	ck_assert(own && own->above == 65536 && own->bound == 0);
	Buf b = {0};
	ast_print_schedule(f->ast_schedule, &b);
	ck_assert_contains(b.s, "schedule s2 {\n  s.merge(i, j) -> col;\n  s.split(col, 4) -> (jo, jv);\n");
	ck_assert_contains(b.s, "  s.split(jq, 16) -> (jb, by);\n");
	ck_assert_contains(b.s, "  s.bind(by, blockIdx.y);\n");
	buf_free(&b);
	Kernel *k = tc->kernels[0];
	static const struct {
		int64_t b, m, n;
		const char *kernel;
	} picks[] = {
		{3, 4, 32, "s2_kernel_M_N128_i32"},
		{3, 1, 128, "s2_kernel_M_N128_i32"},
		{3, 33, 4, "s2_kernel_M_N256_i32"},    /* 132 */
		{3, 3, 43, "s2_kernel_M_N256_i32_scalar"},
		{3, 64, 64, "s2_kernel_M_N4096_i32"},
		{3, 1, 4100, "s2_kernel_M_N16384_i32"},
		{3, 256, 256, "s2_kernel_M_N65536_i32"},
		{3, 16385, 4, "s2_kernel_i32"},        /* 65540: long rows */
		{64, 512, 1024, "s2_kernel_i32"},
		{3, 1, 65537, "s2_kernel_i32_scalar"},
		{0, 4, 4, "s2_kernel_M_N128_i32"},
		{3, 0, 1000000, "s2_kernel_M_N128_i32"}, /* M * N = 0 */
		{3, 1000000, 0, "s2_kernel_M_N128_i32"},
		{1, 1, 1, "s2_kernel_M_N128_i32_scalar"},
		{40000, 256, 256, "s2_kernel_M_N65536"}, /* B * M * N past 31 bits */
		{1, 65536, 32768, "s2_kernel"},          /* M * N past 31 bits */
		{1, (int64_t)1 << 40, (int64_t)1 << 40, "s2_kernel"}, /* past 64 bits */
	};
	for (int i = 0; i < countof(picks); i++) {
		int64_t sz[3] = {picks[i].b, picks[i].m, picks[i].n};
		Kernel *p = kernel_pick(k, sz, NULL);
		ck_assert_msg(p && strcmp(p->name, picks[i].kernel) == 0, "B=%lld M=%lld N=%lld: %s, expected %s",
			      (long long)sz[0], (long long)sz[1], (long long)sz[2],
			      p ? p->name : "(none)", picks[i].kernel);
	}
	tc_free(tc);
	/* layer normalization over (H, W): long rows are three segments, each sum over 16
	 * blocks a row */
	tc = tc_compile_i32(norm_hw);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	f = tc->prog->fusions[0];
	ck_assert_int_eq(f->variants.len, countof(bounds));
	ck_assert_int_eq(f->segments.len, 3);
	for (int i = 0; i < 2; i++) {
		Fusion *g = VEC_AT(f->segments, Segment, i)->fusion;
		Buf s = {0};
		ast_print_schedule(g->ast_schedule, &s);
		ck_assert_contains(s.s, ".bind(by, blockIdx.y);\n");
		buf_free(&s);
	}
	int64_t big[4] = {2, 3, 300, 300}, small[4] = {2, 3, 64, 64};
	ck_assert_str_eq(kernel_pick(tc->kernels[0], big, NULL)->name, "ln_segments");
	ck_assert_str_eq(kernel_pick(tc->kernels[0], small, NULL)->name, "ln_kernel_H_W4096_i32");
	tc_free(tc);
}
END_TEST

/* The launch line of src's first kernel ("grid(...) block(...)...", after the name). */
static char *launch_of(const char *src)
{
	TestCompile *tc = tc_compile(src, true);
	ck_assert_msg(tc->kernels != NULL, "did not compile:\n%s\n%s", src, tc->diags);
	char *ir = tc_kernel_ir(tc, 0);
	char *at = strstr(ir, " grid(");
	ck_assert_ptr_nonnull(at);
	char *r = strndup(at, strcspn(at, "\n"));
	free(ir);
	tc_free(tc);
	return r;
}

/* With constant extents a collapsed fusion is planned as the 2-D one of the product extent:
 * the same grid, block and shared memory (a row of 64 x 64 as one of 4096, persistent in
 * registers; 64 x 512 reduced rows as 32768; 8 x 16 as 128 in a middle-axis sum). */
START_TEST(test_collapse_as_product)
{
	static const char *pairs[][2] = {
		{"fusion f(x: f32[300, 64, 64]) -> (s: f32[300]) { s[b] = sum(i, j: x[b, i, j]); }",
		 "fusion f(x: f32[300, 4096]) -> (s: f32[300]) { s[b] = sum(j: x[b, j]); }"},
		{"fusion f(x: f32[64, 512, 1024]) -> (s: f32[1024]) { s[h] = sum(b, t: x[b, t, h]); }",
		 "fusion f(x: f32[32768, 1024]) -> (s: f32[1024]) { s[h] = sum(r: x[r, h]); }"},
		{"fusion f(x: f32[B, 8, 16, 32]) -> (s: f32[B, 32]) {\n"
		 "  s[b, h] = sum(t, u: x[b, t, u, h]);\n}\n",
		 "fusion f(x: f32[B, 128, 32]) -> (s: f32[B, 32]) { s[b, h] = sum(t: x[b, t, h]); }"},
	};
	for (int i = 0; i < countof(pairs); i++) {
		char *a = launch_of(pairs[i][0]), *b = launch_of(pairs[i][1]);
		ck_assert_msg(strcmp(a, b) == 0, "collapsed '%s', 2-D '%s'", a, b);
		free(a);
		free(b);
	}
	char *ir = launch_of(pairs[0][0]);
	ck_assert_str_eq(ir, " grid(300) block(128) {"); /* persistent: 32 elements a thread */
	free(ir);
}
END_TEST

/* src's kernel that the launcher picks at each of dims, and the last of its chain (the scalar
 * kernel, no precondition), against the reference in the simulator. A vectorized kernel is
 * not run where its preconditions fail: a row of M * N elements then starts unaligned. */
static TestCompile *expect_chain(const char *src, const char **dims, int n)
{
	TestCompile *tc = tc_compile(src, true);
	ck_assert_msg(tc->kernels != NULL, "did not compile:\n%s\n%s", src, tc->diags);
	Kernel *last = tc->kernels[0];
	while (last->fallback)
		last = last->fallback;
	for (int i = 0; i < n; i++)
		if (expect_sim_picked(tc->kernels[0], dims[i]) != last)
			expect_sim(last, dims[i]);
	return tc;
}

/* Sizes no split or vector divides, empty extents and ones. */
START_TEST(test_collapse_simulated)
{
	const char *d3[] = {"B=3,M=5,N=7", "B=2,M=33,N=132", "B=3,M=4,N=7", "B=0,M=3,N=4", "B=1,M=1,N=1",
			    "B=2,M=0,N=5", "B=2,M=3,N=0"};
	tc_free(expect_chain(sum_last2, d3, countof(d3)));
	const char *dc[] = {"B=3,T=5,H=7", "B=3,T=37,H=132", "B=0,T=3,H=4", "B=1,T=1,H=1",
			    "B=2,T=0,H=5", "B=3,T=5,H=0"};
	tc_free(expect_chain(col_lead2, dc, countof(dc)));
	const char *d4[] = {"B=2,C=3,H=5,W=7", "B=1,C=2,H=17,W=36", "B=0,C=2,H=3,W=4",
			    "B=1,C=1,H=1,W=1", "B=2,C=1,H=0,W=3"};
	tc_free(expect_chain(norm_hw, d4, countof(d4)));
	/* constant extents: the row of 6 x 20 f32 is persistent in registers */
	const char *dk[] = {"B=5", "B=0", "B=1"};
	TestCompile *tc = expect_chain("fusion k(x: f32[B, 6, 20]) -> (y: f32[B, 6, 20]) {\n"
				      "  m[b] = max(i, j: x[b, i, j]);\n"
				      "  y[b, i, j] = exp(x[b, i, j] - m[b]);\n"
				      "}\n",
				      dk, countof(dk));
	ck_assert_str_eq(tc->prog->fusions[0]->auto_class, "rows");
	char *ir = tc_fusion_ir(tc, 0);
	ck_assert_contains(ir, "x_reg");
	free(ir);
	tc_free(tc);
}
END_TEST

/* src's first kernel IR (the 64-bit kernel, as --emit=ir prints it) with each from[i]
 * replaced by to[i]. */
static char *kernel_ir_as(const char *src, const char **from, const char **to, int n)
{
	TestCompile *tc = tc_compile(src, true);
	ck_assert_msg(tc->kernels != NULL, "did not compile:\n%s\n%s", src, tc->diags);
	Buf b = {0};
	buf_puts(&b, tc_kernel_ir(tc, 0));
	for (int i = 0; i < n; i++) {
		Buf r = {0};
		buf_puts(&r, "");
		size_t len = strlen(from[i]);
		for (const char *at = b.s, *hit; at; at = hit ? hit + len : NULL) {
			hit = strstr(at, from[i]);
			buf_printf(&r, "%.*s%s", (int)(hit ? hit - at : (ptrdiff_t)strlen(at)), at,
				   hit ? to[i] : "");
		}
		buf_free(&b);
		b = r;
	}
	tc_free(tc);
	return b.s;
}

static const char bias_nchw[] =
	"fusion f(x: f32[N, C, H, W], b: f32[C]) -> (y: f32[N, C, H, W]) {\n"
	"  y[n, c, h, w] = max(x[n, c, h, w] + b[c], 0.0);\n"
	"}\n";

static const char attn_bias[] =
	"fusion f(s: f16[B, H, T, S], bias: f16[H, T, S]) -> (y: f16[B, H, T, S]) {\n"
	"  y[b, h, t, k] = s[b, h, t, k] * 2.0 + bias[h, t, k];\n"
	"}\n";

/* A broadcast output's trailing indices that every read uses together (or not at all) are its
 * vector axis, merged (auto_schedule.c, schedule_output; docs/auto_schedule.md, "Pointwise
 * outputs"): the kernel is the one of the same program written over the product extent, with
 * the innermost extent's vector precondition and no per-lane tail; indices a read uses alone,
 * apart or permuted stay apart. */
START_TEST(test_collapse_broadcast)
{
	const char *nchw[] = {"  y.merge(h, w) -> hw;\n", "  y.merge(n, c) -> nc;\n",
			      "  y.split(hw, 4) -> (hwo, v);\n", "  y.merge(nc, bx) -> ncbx;\n"};
	expect_schedule(bias_nchw, "broadcast", nchw, countof(nchw));
	const char *three[] = {"  y.merge(t, k) -> tk;\n", "  y.merge(h, tk) -> htk;\n",
			       "  y.split(htk, 8) -> (htko, v);\n", "  y.merge(b, bx) -> bbx;\n"};
	expect_schedule(attn_bias, "broadcast", three, countof(three));
	/* (h, w) read by the bias too: collapsed; (c, h, w) not (b[h, w] has no c) */
	const char *hw[] = {"  y.merge(h, w) -> hw;\n", "  y.merge(n, c) -> nc;\n"};
	expect_schedule("fusion f(x: f32[N, C, H, W], b: f32[H, W]) -> (y: f32[N, C, H, W]) {\n"
			"  y[n, c, h, w] = x[n, c, h, w] * b[h, w];\n"
			"}\n",
			"broadcast", hw, countof(hw));
	/* not collapsed: w alone in b[w]; a permute (x[b, t, h, d]: t and d not adjacent) */
	const char *alone[] = {"  y.merge(c, h) -> ch;\n", "  y.split(w, 4) -> (wo, v);\n"};
	expect_schedule("fusion f(x: f32[N, C, H, W], b: f32[W]) -> (y: f32[N, C, H, W]) {\n"
			"  y[n, c, h, w] = x[n, c, h, w] + b[w];\n"
			"}\n",
			"broadcast", alone, countof(alone));
	const char *perm[] = {"  y.merge(h, t) -> ht;\n", "  y.split(d, 8) -> (do, v);\n"};
	expect_schedule("fusion f(x: bf16[B, T, H, D]) -> (y: bf16[B, H, T, D]) {\n"
			"  y[b, h, t, d] = x[b, t, h, d];\n"
			"}\n",
			"broadcast", perm, countof(perm));
	/* the kernels, against the same programs written over [N, C, L] and [B, L] */
	const char *from[] = {"H * W", "W % 4"}, *to[] = {"L", "L % 4"};
	char *a = kernel_ir_as(bias_nchw, from, to, 2);
	char *b = kernel_ir_as("fusion f(x: f32[N, C, L], b: f32[C]) -> (y: f32[N, C, L]) {\n"
			       "  y[n, c, l] = max(x[n, c, l] + b[c], 0.0);\n"
			       "}\n",
			       NULL, NULL, 0);
	ck_assert_str_eq(a, b);
	ck_assert_contains(a, "kernel f_kernel grid(N * C * ceildiv(L, 2048)) block(128) {\n");
	ck_assert_contains(a, "  require L % 4 == 0;\n");
	free(a);
	free(b);
	const char *from3[] = {"H * (T * S)", "H * T * S", "S % 8"}, *to3[] = {"L", "L", "L % 8"};
	a = kernel_ir_as(attn_bias, from3, to3, 3);
	b = kernel_ir_as("fusion f(s: f16[B, L], bias: f16[L]) -> (y: f16[B, L]) {\n"
			 "  y[b, l] = s[b, l] * 2.0 + bias[l];\n"
			 "}\n",
			 NULL, NULL, 0);
	ck_assert_str_eq(a, b);
	free(a);
	free(b);
}
END_TEST

/* The collapsed broadcasts in the simulator: vectors and the scalar kernel (W, or S, not a
 * multiple of the vector, though H * W may be), several blocks a row with a tail, zeros. */
START_TEST(test_collapse_broadcast_simulated)
{
	const char *d4[] = {"N=2,C=3,H=33,W=100", "N=2,C=3,H=4,W=7", "N=2,C=3,H=5,W=7",
			    "N=1,C=1,H=1,W=1",    "N=0,C=3,H=3,W=4", "N=2,C=3,H=0,W=4",
			    "N=2,C=3,H=3,W=0"};
	tc_free(expect_chain(bias_nchw, d4, countof(d4)));
	const char *d3[] = {"B=2,H=5,T=9,S=128", "B=2,H=3,T=4,S=12", "B=3,H=1,T=1,S=8",
			    "B=2,H=3,T=0,S=8"};
	tc_free(expect_chain(attn_bias, d3, countof(d3)));
}
END_TEST

Suite *auto_collapse_suite(void)
{
	Suite *s = suite_create("auto_collapse");
	TCase *t = tcase_create("collapse");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_collapse_merges);
	tcase_add_test(t, test_collapse_refused);
	tcase_add_test(t, test_collapsible_entry);
	tcase_add_test(t, test_collapse_preconditions);
	tcase_add_test(t, test_collapse_variants);
	tcase_add_test(t, test_collapse_as_product);
	tcase_add_test(t, test_collapse_simulated);
	tcase_add_test(t, test_collapse_broadcast);
	tcase_add_test(t, test_collapse_broadcast_simulated);
	suite_add_tcase(s, t);
	return s;
}
