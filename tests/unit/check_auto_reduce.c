/* check_auto_reduce.c: the automatic scheduler on fusions with reductions
 * (scheduler/auto_schedule.c, docs/auto_schedule.md) and the reduction and GEMM examples.
 * The schedules are compared as exact fusion IR text (from the first tensor line on); the
 * lowered kernels are checked for what the schedule implies (a block reduction, the shape of
 * the launch, the GEMM's slot-reuse barrier). The simulator runs on the examples in
 * tests/check_examples.sh. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "interp/sim.h"
#include "tests/unit/testutil.h"

/* The fusion IR of `text` from its first tensor line (the signature line is the printer's). */
static char *auto_ir(const char *text)
{
	TestCompile *tc = tc_compile(text, true);
	ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
	char *ir = tc_fusion_ir(tc, 0);
	char *from = strstr(ir, "  tensor ");
	ck_assert_ptr_nonnull(from);
	char *r = strdup(from);
	free(ir);
	tc_free(tc);
	return r;
}

/* auto_ir of the size variant for rows up to 65536 (longer rows are split over blocks:
 * scheduler/segment.c), which holds the schedule for a symbolic row length. */
static char *auto_ir_rows(const char *text)
{
	TestCompile *tc = tc_compile(text, true);
	ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
	Fusion *f = tc->prog->fusions[0], *g = NULL;
	for (int i = 0; i < f->variants.len; i++)
		if (VEC_AT(f->variants, Fusion, i)->sizes[f->nsizes - 1]->bound == 65536)
			g = VEC_AT(f->variants, Fusion, i);
	ck_assert_ptr_nonnull(g);
	Buf b = {0};
	ir_print_fusion(g, &b);
	char *from = strstr(b.s, "  tensor ");
	ck_assert_ptr_nonnull(from);
	char *r = strdup(from);
	buf_free(&b);
	tc_free(tc);
	return r;
}

static char *auto_kernel(const char *text)
{
	TestCompile *tc = tc_compile(text, true);
	ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
	char *k = tc_kernel_ir(tc, 0);
	tc_free(tc);
	return k;
}

static const char row_sum_src[] =
	"fusion row_sum(x: f32[M, N]) -> (s: f32[M]) {\n"
	"  s[i] = sum(j: x[i, j]);\n"
	"}\n";

/* Symbolic row: one block per row, 128 threads, 16-byte loads through a one-vector register
 * copy (a reduction axis cannot be vectorized), then the block reduction. */
START_TEST(test_auto_row_sum)
{
	char *ir = auto_ir_rows(row_sum_src);
	ck_assert_str_eq(ir,
		"  tensor x: f32[M, N] input global\n"
		"  tensor x_reg: f32[M, N] intermediate local compute_at(s, 3) cache_after(x)\n"
		"    def x_reg[i, j] = x[i, j]\n"
		"    domain:\n"
		"      i: M = s.i (root 0)\n"
		"      jq: ceildiv(N, 16384) = s.jq (split of jr by 8, outer)\n"
		"      ju: 8 = s.ju (split of jr by 8, inner)\n"
		"      tx: 512 = s.tx (split of jo by 512, inner)\n"
		"      jv: 4 vectorize (split of j by 4, inner)\n"
		"  tensor s: f32[M] output global\n"
		"    def s[i] = sum(j: x_reg[i, j])\n"
		"    domain:\n"
		"      i: M blockIdx.x (root 0)\n"
		"      jq: ceildiv(N, 16384) reduction (split of jr by 8, outer)\n"
		"      ju: 8 reduction unroll (split of jr by 8, inner)\n"
		"      tx: 512 reduction threadIdx.x (split of jo by 512, inner)\n"
		"      jv: 4 reduction unroll (split of j by 4, inner)\n");
	free(ir);
	/* the fusion's own kernel is for rows longer than 65536: each row over 16 blocks */
	char *k = auto_kernel(row_sum_src);
	ck_assert_contains(k, "kernel row_sum_kernel grid(M, 16) block(256) {");
	ck_assert_contains(k, "s_acc = block_reduce_sum(s_acc over threadIdx.x);");
	ck_assert_contains(k, "grid_reduce_sum(s_acc over blockIdx.y, element blockIdx.x, part "
			      "blockIdx.y of 16");
	ck_assert_contains(k, "x_reg[0 : 4] = x[");
	free(k);
}
END_TEST

static const char softmax_src[] =
	"fusion softmax(x: f32[M, 1024]) -> (y: f32[M, 1024]) {\n"
	"  m[i]    = max(j: x[i, j]);\n"
	"  e[i, j] = exp(x[i, j] - m[i]);\n"
	"  s[i]    = sum(j: e[i, j]);\n"
	"  y[i, j] = e[i, j] / s[i];\n"
	"}\n";

/* A constant row of 1024 f32 is persistent: x is read once into 16 registers per thread
 * (64 threads, two rows per block of 128 on threadIdx.y), the max and e = exp(x - m) read
 * them; e is kept in 16 more registers (it calls exp and both the sum and the output read
 * it), so exp runs once per element. */
START_TEST(test_auto_softmax_persistent)
{
	char *ir = auto_ir(softmax_src);
	ck_assert_str_eq(ir,
		"  tensor x: f32[M, 1024] input global\n"
		"  tensor x_reg: f32[M, 1024] intermediate local compute_at(e, 1) cache_after(x)\n"
		"    def x_reg[i, j] = x[i, j]\n"
		"    domain:\n"
		"      bx: ceildiv(M, 2) = e.bx (split of i by 2, outer)\n"
		"      ty: 2 = e.ty (split of i by 2, inner)\n"
		"      jr: 4 unroll (split of jo by 64, outer)\n"
		"      tx: 64 threadIdx.x (split of jo by 64, inner)\n"
		"      jv: 4 vectorize (split of j by 4, inner)\n"
		"  tensor m: f32[M] intermediate local compute_at(e, 1)\n"
		"    def m[i] = max(j: x_reg[i, j])\n"
		"    domain:\n"
		"      bx: ceildiv(M, 2) = e.bx (split of i by 2, outer)\n"
		"      ty: 2 = e.ty (split of i by 2, inner)\n"
		"      jr: 4 reduction unroll (split of jo by 64, outer)\n"
		"      tx: 64 reduction threadIdx.x (split of jo by 64, inner)\n"
		"      jv: 4 reduction unroll (split of j by 4, inner)\n"
		"  tensor e: f32[M, 1024] intermediate local compute_at(y, 1)\n"
		"    def e[i, j] = exp(x_reg[i, j] - m[i])\n"
		"    domain:\n"
		"      bx: ceildiv(M, 2) = y.bx (split of i by 2, outer)\n"
		"      ty: 2 = y.ty (split of i by 2, inner)\n"
		"      jr: 4 unroll (split of jo by 64, outer)\n"
		"      tx: 64 threadIdx.x (split of jo by 64, inner)\n"
		"      jv: 4 unroll (split of j by 4, inner)\n"
		"  tensor s: f32[M] intermediate local compute_at(y, 1)\n"
		"    def s[i] = sum(j: e[i, j])\n"
		"    domain:\n"
		"      bx: ceildiv(M, 2) = y.bx (split of i by 2, outer)\n"
		"      ty: 2 = y.ty (split of i by 2, inner)\n"
		"      jr: 4 reduction unroll (split of jo by 64, outer)\n"
		"      tx: 64 reduction threadIdx.x (split of jo by 64, inner)\n"
		"      jv: 4 reduction unroll (split of j by 4, inner)\n"
		"  tensor y: f32[M, 1024] output global\n"
		"    def y[i, j] = e[i, j] / s[i]\n"
		"    domain:\n"
		"      bx: ceildiv(M, 2) blockIdx.x (split of i by 2, outer)\n"
		"      ty: 2 threadIdx.y (split of i by 2, inner)\n"
		"      jr: 4 unroll (split of jo by 64, outer)\n"
		"      tx: 64 threadIdx.x (split of jo by 64, inner)\n"
		"      jv: 4 vectorize (split of j by 4, inner)\n");
	free(ir);
	char *k = auto_kernel(softmax_src);
	ck_assert_contains(k, "alloc local f32 x_reg[16];");
	ck_assert_contains(k, "alloc local f32 e[16];");
	ck_assert_contains(k, "m_acc = block_reduce_max(m_acc over threadIdx.x);");
	ck_assert_contains(k, "s_acc = block_reduce_sum(s_acc over threadIdx.x);");
	free(k);
}
END_TEST

/* Rows longer than 128 x 16 elements keep 32 per thread: 4096 f32 get 128 threads, 8192 get
 * 256; with three cached inputs (3 x 32 > 64 registers) 16 per thread (256 threads). */
static void expect_persistent(const char *src, const char *threads, const char *regs)
{
	char *k = auto_kernel(src);
	ck_assert_contains(k, threads);
	ck_assert_contains(k, regs);
	free(k);
}

START_TEST(test_auto_long_rows)
{
	expect_persistent("fusion softmax(x: f32[M, 4096]) -> (y: f32[M, 4096]) {\n"
			  "  m[i] = max(j: x[i, j]);\n"
			  "  y[i, j] = exp(x[i, j] - m[i]);\n"
			  "}\n",
			  "grid(M) block(128) {", "alloc local f32 x_reg[32];");
	expect_persistent("fusion n(x: f32[M, 8192]) -> (y: f32[M, 8192]) {\n"
			  "  s[i] = sum(j: x[i, j]);\n"
			  "  y[i, j] = x[i, j] / s[i];\n"
			  "}\n",
			  "grid(M) block(256) {", "alloc local f32 x_reg[32];");
	expect_persistent("fusion n(a: f32[M, 4096], b: f32[M, 4096], c: f32[M, 4096]) -> "
			  "(y: f32[M, 4096]) {\n"
			  "  s[i] = sum(j: a[i, j] * b[i, j] * c[i, j]);\n"
			  "  y[i, j] = a[i, j] * b[i, j] * c[i, j] / s[i];\n"
			  "}\n",
			  "grid(M) block(256) {", "alloc local f32 a_reg[16];");
	/* an intermediate without a float function is recomputed, not kept (layernorm's d) */
	char *k = auto_kernel("fusion ln(x: f32[M, 4096]) -> (y: f32[M, 4096]) {\n"
			      "  s1[i] = sum(j: x[i, j]);\n"
			      "  d[i, j] = x[i, j] - s1[i] / 4096.0;\n"
			      "  v[i] = sum(j: d[i, j] * d[i, j]);\n"
			      "  y[i, j] = d[i, j] * rsqrt(v[i] / 4096.0 + 0.00001);\n"
			      "}\n");
	ck_assert_contains(k, "alloc local f32 x_reg[32];");
	ck_assert_msg(strstr(k, "alloc local f32 d[") == NULL, "d kept in registers:\n%s", k);
	free(k);
}
END_TEST

/* Rows up to 65536 (the last bucket) are not persistent: 512 threads per row, the reductions
 * read x with coalesced scalar loads 8 at a time (the max and the sum in one pass: online()),
 * the output is written in vectors. */
START_TEST(test_auto_softmax_symbolic)
{
	char *ir = auto_ir_rows(
		"fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  m[i]    = max(j: x[i, j]);\n"
		"  e[i, j] = exp(x[i, j] - m[i]);\n"
		"  s[i]    = sum(j: e[i, j]);\n"
		"  y[i, j] = e[i, j] / s[i];\n"
		"}\n");
	ck_assert_str_eq(ir,
		"  tensor x: f32[M, N] input global\n"
		"  tensor m: f32[M] intermediate local compute_at(y, 0)\n"
		"    def m[i] = max(j: x[i, j])\n"
		"    domain:\n"
		"      i: M = y.i (root 0)\n"
		"      jq: ceildiv(N, 4096) reduction (split of jr by 8, outer)\n"
		"      ju: 8 reduction unroll (split of jr by 8, inner)\n"
		"      tx: 512 reduction threadIdx.x (split of j by 512, inner)\n"
		"  tensor e: f32[M, N] intermediate local inline\n"
		"    def e[i, j] = exp(x[i, j] - m[i])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N (root 1)\n"
		"  tensor s: f32[M] intermediate local compute_at(y, 0) online(m)\n"
		"    def s[i] = sum(j: e[i, j])\n"
		"    domain:\n"
		"      i: M = y.i (root 0)\n"
		"      jq: ceildiv(N, 4096) reduction (split of jr by 8, outer)\n"
		"      ju: 8 reduction unroll (split of jr by 8, inner)\n"
		"      tx: 512 reduction threadIdx.x (split of j by 512, inner)\n"
		"  tensor y: f32[M, N] output global\n"
		"    def y[i, j] = e[i, j] / s[i]\n"
		"    domain:\n"
		"      i: M blockIdx.x (root 0)\n"
		"      jq: ceildiv(N, 16384) (split of jr by 8, outer)\n"
		"      ju: 8 unroll (split of jr by 8, inner)\n"
		"      tx: 512 threadIdx.x (split of jo by 512, inner)\n"
		"      jv: 4 vectorize (split of j by 4, inner)\n");
	free(ir);
}
END_TEST

/* Rows of 20 f32 (5 vectors): 4 threads per row (about 4 vectors each: several loads in
 * flight), 32 rows per block on threadIdx.y. */
START_TEST(test_auto_short_rows)
{
	static const char src[] =
		"fusion short_rows(x: f32[M, 20]) -> (s: f32[M]) {\n"
		"  s[i] = sum(j: x[i, j]);\n"
		"}\n";
	char *ir = auto_ir(src);
	ck_assert_contains(ir,
		"  tensor s: f32[M] output global\n"
		"    def s[i] = sum(j: x_reg[i, j])\n"
		"    domain:\n"
		"      bx: ceildiv(M, 32) blockIdx.x (split of i by 32, outer)\n"
		"      ty: 32 threadIdx.y (split of i by 32, inner)\n"
		"      jr: 2 reduction unroll (split of jo by 4, outer)\n"
		"      tx: 4 reduction threadIdx.x (split of jo by 4, inner)\n"
		"      jv: 4 reduction unroll (split of j by 4, inner)\n");
	free(ir);
	char *k = auto_kernel(src);
	ck_assert_contains(k, "kernel short_rows_kernel grid(ceildiv(M, 32)) block(4, 32) {");
	free(k);
}
END_TEST

static void check_simulated(const char *src, const char *dims);

/* Does every load of memory tensor `x` in kernel text k go into its register cache x_reg
 * (the row is read from global memory once)? Some such load must exist. */
static bool loads_only_into_cache(const char *k)
{
	int n = 0;
	for (const char *at = strstr(k, " x["); at; at = strstr(at + 1, " x[")) {
		const char *line = at;
		while (line > k && line[-1] != '\n')
			line--;
		while (*line == ' ')
			line++;
		if (strncmp(line, "x_reg[", 6) != 0)
			return false;
		n++;
	}
	return n > 0;
}

static const char lse_src[] =
	"fusion lse(x: f32[M, N]) -> (l: f32[M]) {\n"
	"  m[i] = max(j: x[i, j]);\n"
	"  l[i] = m[i] + log(sum(j: exp(x[i, j] - m[i])));\n"
	"}\n";

/* logsumexp: the lifted sum and the max both read x, the output reads neither x nor a row of
 * anything. Up to 4096, x is cached in registers at the row (computed at the max, which the
 * sum follows), so the row is read once, in 16-byte vectors. Longer rows (the 16384 and 65536
 * buckets) are not persistent: the max and the sum are one online pass (the pair is x's only
 * reader), 128 threads, 16-byte loads through a one-vector copy, 8 loop steps unrolled. */
START_TEST(test_auto_logsumexp_reads_once)
{
	TestCompile *tc = tc_compile(lse_src, true);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	int nvariants = 0;
	for (Kernel *v = tc->kernels[0]; v; v = v->fallback) {
		if (strstr(v->name, "_N") == NULL || strstr(v->name, "scalar"))
			continue;
		Buf b = {0};
		kir_print(v, &b);
		ck_assert_msg(loads_only_into_cache(b.s), "%s reads x twice:\n%s", v->name, b.s);
		ck_assert_contains(b.s, "// x_reg computed at m.");
		bool online = strstr(v->name, "_N16384") || strstr(v->name, "_N65536");
		if (online) {
			ck_assert_contains(b.s, "block(128) {");
			ck_assert_contains(b.s, "alloc local f32 x_reg[4];");
			ck_assert_contains(b.s, "for ju in [0, 8) unroll {");
			ck_assert_contains(b.s, "m_acc, m_sum = block_online(m_acc, m_sum over threadIdx.x);");
		} else {
			ck_assert_contains(b.s, "x_reg[jr * 4 : 4] = x[");
			ck_assert_not_contains(b.s, "block_online");
		}
		buf_free(&b);
		nvariants += online ? 10 : 1;
	}
	ck_assert_int_eq(nvariants, 4 + 2 * 10);
	tc_free(tc);
	char *k = auto_kernel("fusion lse(x: f32[M, 4096]) -> (l: f32[M]) {\n"
			      "  m[i] = max(j: x[i, j]);\n"
			      "  l[i] = m[i] + log(sum(j: exp(x[i, j] - m[i])));\n"
			      "}\n");
	ck_assert_contains(k, "kernel lse_kernel grid(M) block(128) {");
	ck_assert_contains(k, "alloc local f32 x_reg[32];");
	ck_assert_msg(loads_only_into_cache(k), "x read twice:\n%s", k);
	free(k);
	check_simulated(lse_src, "M=5,N=1000");
	check_simulated(lse_src, "M=3,N=4097");
	check_simulated(lse_src, "M=2,N=4100");
	check_simulated(lse_src, "M=2,N=16388");
	check_simulated(lse_src, "M=2,N=1");
	check_simulated(lse_src, "M=0,N=7");
}
END_TEST

/* The 65536 bucket: a row of f32 that no register budget holds is read by the statistics
 * (softmax's max and sum in one pass, online()) and by the output in turn, 512 threads, 8
 * loop steps unrolled at a time (8 loads in flight per thread: the loop was not unrolled
 * before, one 4-byte load per thread in flight). */
START_TEST(test_auto_long_bucket_unrolled)
{
	TestCompile *tc = tc_compile("fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
				     "  m[i]    = max(j: x[i, j]);\n"
				     "  e[i, j] = exp(x[i, j] - m[i]);\n"
				     "  s[i]    = sum(j: e[i, j]);\n"
				     "  y[i, j] = e[i, j] / s[i];\n"
				     "}\n", true);
	char *k = tc_variant_ir(tc, "softmax_kernel_N65536");
	ck_assert_contains(k, "kernel softmax_kernel_N65536 grid(M) block(512) {");
	ck_assert_contains(k, "require N <= 65536;\n");
	/* the full steps of 8, then the last (passes/tail_split.c) */
	ck_assert_contains(k, "for jq in [0, N / 4096) {\n    for ju in [0, 8) unroll {");
	ck_assert_contains(k, "for jq_2 in [0, ceildiv(N, 4096) - N / 4096) {\n    for ju in [0, 8) unroll {");
	ck_assert_contains(k, "for ju_1 in [0, 8) unroll {");
	ck_assert_contains(k, "y[blockIdx.x * N + jq_1 * 16384 + ju_1 * 2048 + threadIdx.x * 4 : 4] =");
	/* the max and the sum in one pass (online()): no loop of s's own */
	ck_assert_contains(k, "m_acc, m_sum = block_online(m_acc, m_sum over threadIdx.x);\n");
	ck_assert_not_contains(k, "ju_2");
	ck_assert_not_contains(k, "x_reg");
	free(k);
	tc_free(tc);
	check_simulated(lse_src, "M=2,N=20001");
	check_simulated(row_sum_src, "M=3,N=65536");
}
END_TEST

/* A column sum (the outer class: 4 rows unrolled, 16-byte loads): the rows of the full steps
 * of the row loop are all in bounds, so their loads have no row guard (nor a scalar tail: the
 * column guard is the vector's at every lane), and the last step keeps the guard
 * (passes/tail_split.c); the simulator checks sizes with 0, 1 and several full steps, with and
 * without a last one. A whole-tensor sum likewise. */
static const char col_sum_src[] =
	"fusion col_sum(x: f32[M, N]) -> (s: f32[N]) {\n"
	"  s[j] = sum(i: x[i, j]);\n"
	"}\n";
static const char total_src[] =
	"fusion total(x: f32[N]) -> (s: f32) {\n"
	"  s = sum(i: x[i]);\n"
	"}\n";

START_TEST(test_tail_split_rows)
{
	TestCompile *tc = tc_compile(col_sum_src, true);
	char *k = tc_kernel_ir(tc, 0);
	const char *full = strstr(k, "  for rr in [0, M / 64) {\n    for u in [0, 4) unroll {\n"
				     "      if (blockIdx.x * 64 + threadIdx.x % 16 * 4 < N) {\n");
	ck_assert_msg(full != NULL, "no full row steps:\n%s", k);
	const char *last = strstr(full, "  for rr_1 in [0, ceildiv(M, 64) - M / 64) {\n");
	ck_assert_msg(last != NULL, "no last row step:\n%s", k);
	char *body = strndup(full, (size_t)(last - full));
	ck_assert_not_contains(body, "< M");
	ck_assert_not_contains(body, "else");
	free(body);
	ck_assert_contains(last, "M / 64 * 64 + rr_1 * 64 + u * 16 + threadIdx.x / 16 < M");
	free(k);
	tc_free(tc);
	check_simulated(col_sum_src, "M=0,N=8");
	check_simulated(col_sum_src, "M=1,N=4");
	check_simulated(col_sum_src, "M=64,N=68");
	check_simulated(col_sum_src, "M=1001,N=132");
	check_simulated(col_sum_src, "M=8449,N=8");
	check_simulated(col_sum_src, "M=301,N=67");
	check_simulated(total_src, "N=0");
	check_simulated(total_src, "N=1");
	check_simulated(total_src, "N=100003");
}
END_TEST

/* Per-row values the output reads through inlined intermediates (layernorm's mean and rstd,
 * rmsnorm's r) are kept in registers, computed once per row: no division by N or rsqrt per
 * element of the output or of the variance's sum. */
START_TEST(test_auto_row_values_once)
{
	static const char src[] =
		"fusion ln(x: f32[M, N], g: f32[N], b: f32[N]) -> (y: f32[M, N]) {\n"
		"  mean[i] = sum(j: x[i, j]) / N;\n"
		"  d[i, j] = x[i, j] - mean[i];\n"
		"  rstd[i] = rsqrt(sum(j: d[i, j] * d[i, j]) / N + 0.00001);\n"
		"  y[i, j] = d[i, j] * rstd[i] * g[j] + b[j];\n"
		"}\n";
	TestCompile *tc = tc_compile(src, true);
	char *k = tc_variant_ir(tc, "ln_kernel_N4096");
	ck_assert_contains(k, "// mean computed at y.i\n  mean[0] = mean_sum0[0] / N;\n");
	ck_assert_contains(k, "// rstd computed at y.i\n  rstd[0] = rsqrt(rstd_sum0[0] / N + 1e-05);\n");
	ck_assert_contains(k, "// mean_sum0 computed at mean.i");
	ck_assert_contains(k, "// rstd_sum0 computed at rstd.i");
	ck_assert_contains(k, "(x_reg[jr_2 * 4 + jv_2] - mean[0]) * (x_reg[jr_2 * 4 + jv_2] - mean[0])");
	/* the only divisions by N are the two per-row values' */
	int ndiv = 0;
	for (const char *at = strstr(k, " / N"); at; at = strstr(at + 1, " / N"))
		ndiv++;
	ck_assert_int_eq(ndiv, 2);
	free(k);
	tc_free(tc);
	check_simulated(src, "M=3,N=1000");
	check_simulated(src, "M=2,N=4097");
	check_simulated(src, "M=4,N=1");
}
END_TEST

/* 2-byte rows reduced into f32: the vector is 16 bytes of the row (8 bf16), whatever the
 * width of the one value per row that is written; a row sum's thread loads its whole part of
 * the row (4 vectors) into registers before it adds. */
START_TEST(test_auto_row_sum_bf16_vectors)
{
	char *k = auto_kernel("fusion rs(x: bf16[M, 4096]) -> (s: f32[M]) {\n"
			      "  s[i] = sum(j: x[i, j]);\n"
			      "}\n");
	ck_assert_contains(k, "alloc local bf16 x_reg[32];");
	ck_assert_contains(k, "x_reg[jr * 8 : 8] = x[blockIdx.x * 4096 + jr * 1024 + threadIdx.x * 8 : 8];");
	free(k);
	k = auto_kernel("fusion lse(x: f16[M, 4096]) -> (l: f32[M]) {\n"
			"  m[i] = max(j: x[i, j]);\n"
			"  l[i] = m[i] + log(sum(j: exp(x[i, j] - m[i])));\n"
			"}\n");
	ck_assert_contains(k, "x_reg[jr * 8 : 8] = x[");
	free(k);
}
END_TEST

/* A constant column count: 4 columns per thread (16-byte loads) on 16 x 16 threads, 64
 * columns per block (16 blocks on blockIdx.x), and enough blocks on blockIdx.y to fill the
 * GPU (1056 blocks in all: 66 of them). The rows go to a register accumulator of 4 partials
 * per thread, the block's partials to shared memory, and s takes one column per thread: one
 * grid step per thread (a thread's 4 columns in a row of grid steps each waited for its
 * atomic and its fold). */
START_TEST(test_auto_col_sum_grid)
{
	static const char src[] = "fusion c(x: f32[M, 1000]) -> (s: f32[1000]) {\n"
				  "  s[j] = sum(i: x[i, j]);\n"
				  "}\n";
	char *k = auto_kernel(src);
	ck_assert_contains(k, "kernel c_kernel grid(16, 66) block(256) smem(4096) {");
	ck_assert_contains(k, "alloc shared f32 s_part[1024];");
	ck_assert_contains(k, "alloc local f32 s_part_acc[4];");
	ck_assert_contains(k, "x_vec[0 : 4] = x[");
	ck_assert_contains(k, "s_acc = s_acc + s_part[ty * 64 + threadIdx.x];");
	ck_assert_contains(k, "grid_reduce_sum(s_acc over blockIdx.y, element blockIdx.x * 64 + threadIdx.x, part blockIdx.y of 66");
	ck_assert_not_contains(k, "block_reduce");
	free(k);
	/* few rows: no blocks on blockIdx.y (16 rows per thread at least) */
	k = auto_kernel("fusion c(x: f32[200, 1000]) -> (s: f32[1000]) {\n"
			"  s[j] = sum(i: x[i, j]);\n"
			"}\n");
	ck_assert_contains(k, "kernel c_kernel grid(16) block(256) smem(4096) {");
	ck_assert_not_contains(k, "grid_reduce");
	free(k);
	/* an odd column count: one column per thread, 32 x 8 threads, a block reduction */
	k = auto_kernel("fusion c(x: f32[M, 1001]) -> (s: f32[1001]) {\n"
			"  s[j] = sum(i: x[i, j]);\n"
			"}\n");
	ck_assert_contains(k, "kernel c_kernel grid(32, 33) block(32, 8) {");
	ck_assert_contains(k, "s_acc = block_reduce_sum(s_acc over threadIdx.y);");
	free(k);
	check_simulated("fusion c(x: f32[3001, 40]) -> (s: f32[40]) {\n"
			"  s[j] = sum(i: x[i, j]);\n"
			"}\n", "");
}
END_TEST

/* Symbolic sizes: size variants by the column count (the blocks over the columns decide
 * how many blocks the rows take: at most 1056 in all, one wave of 8 per SM), the fusion's
 * own kernel for more columns than the last bucket, which fill the GPU without a grid
 * split. */
START_TEST(test_auto_col_sum)
{
	static const char src[] = "fusion col_sum(x: f32[M, N]) -> (s: f32[N]) {\n"
				  "  s[j] = sum(i: x[i, j]);\n"
				  "}\n";
	static const char *const variants[][2] = {
		{"col_sum_kernel_N1024", "kernel col_sum_kernel_N1024 grid(ceildiv(N, 64), 66) block(256)"},
		{"col_sum_kernel_N4096", "kernel col_sum_kernel_N4096 grid(ceildiv(N, 64), 16) block(256)"},
		{"col_sum_kernel_N16384", "kernel col_sum_kernel_N16384 grid(ceildiv(N, 64), 4) block(256)"},
		{"col_sum_kernel_N32768", "kernel col_sum_kernel_N32768 grid(ceildiv(N, 64), 2) block(256)"},
	};
	TestCompile *tc = tc_compile(src, true);
	for (int i = 0; i < 4; i++) {
		char *k = tc_variant_ir(tc, variants[i][0]);
		ck_assert_contains(k, variants[i][1]);
		ck_assert_contains(k, "grid_reduce_sum(s_acc over blockIdx.y");
		free(k);
	}
	tc_free(tc);
	char *k = auto_kernel(src);
	ck_assert_contains(k, "kernel col_sum_kernel grid(ceildiv(N, 64)) block(256) smem(4096) {");
	ck_assert_contains(k, "require N % 4 == 0;");
	ck_assert_not_contains(k, "grid_reduce");
	free(k);
	/* f16 columns into f32: 8 columns per thread, a 16-byte load of x per row into 8 f32
	 * partials (32 bytes of registers); 1-byte data into i32 keeps 4 (8 partials would
	 * be 32 bytes for a load of 8) */
	k = auto_kernel("fusion c(x: f16[M, N]) -> (s: f32[N]) {\n"
			"  s[j] = sum(i: f32(x[i, j]));\n"
			"}\n");
	ck_assert_contains(k, "kernel c_kernel grid(ceildiv(N, 128)) block(256) smem(8192) {");
	ck_assert_contains(k, "alloc local f32 s_part_acc[8];");
	ck_assert_contains(k, "x_vec[0 : 8] = x[");
	ck_assert_contains(k, "require N % 8 == 0;");
	free(k);
	k = auto_kernel("fusion c(x: bool[M, N]) -> (s: i32[N]) {\n"
			"  s[j] = sum(i: i32(x[i, j]));\n"
			"}\n");
	ck_assert_contains(k, "x_vec[0 : 4] = x[");
	free(k);
	check_simulated(src, "M=0,N=3");
	check_simulated(src, "M=1,N=1");
	check_simulated(src, "M=300,N=12");
	check_simulated(src, "M=37,N=69");
}
END_TEST

/* A middle-axis reduction: 4 columns per thread in a register accumulator (the rows loop
 * outside its columns: one 16-byte load per row), 16 x 16 threads, the block's partials
 * through shared memory to one column per thread (64 of them), the batch index and the
 * column blocks merged on blockIdx.x. The batch is unknown, so the size variants go by the
 * reduced extent: up to 512 rows no blocks on blockIdx.y (the batch gives the blocks; on the
 * H200, 64x512x1024 ran at 3793 GB/s), then rows over blockIdx.y so that a thread adds 32
 * rows at most (8x4096x512 ran at 531 GB/s on the 64 blocks of its batch). The vector
 * precondition is H % 4 (the row stride), not T % 4; H = 35 runs the scalar fallback. */
START_TEST(test_auto_middle_sum)
{
	static const char src[] = "fusion ms(x: f32[B, T, H]) -> (s: f32[B, H]) {\n"
				  "  s[b, h] = max(t: x[b, t, h]);\n"
				  "}\n";
	TestCompile *tc = tc_compile(src, true);
	char *k = tc_variant_ir(tc, "ms_kernel_T512");
	ck_assert_contains(k, "kernel ms_kernel_T512 grid(B * ceildiv(H, 64)) block(256) smem(4096) {");
	ck_assert_contains(k, "require H % 4 == 0;");
	ck_assert_not_contains(k, "require T %");
	ck_assert_contains(k, "alloc local f32 s_part_acc[4];");
	ck_assert_contains(k, "x_vec[0 : 4] = x[");
	ck_assert_not_contains(k, "grid_reduce");
	free(k);
	k = tc_variant_ir(tc, "ms_kernel_T2048");
	ck_assert_contains(k, "kernel ms_kernel_T2048 grid(B * ceildiv(H, 64), 4) block(256)");
	ck_assert_contains(k, "grid_reduce_max(s_acc over blockIdx.y");
	free(k);
	tc_free(tc);
	k = auto_kernel(src);
	ck_assert_contains(k, "kernel ms_kernel grid(B * ceildiv(H, 64), 64) block(256) smem(4096) {");
	free(k);
	check_simulated(src, "B=3,T=137,H=35");
	check_simulated(src, "B=2,T=137,H=36");
	check_simulated(src, "B=1,T=1,H=1");
	check_simulated(src, "B=2,T=1000,H=68");
	/* a constant batch and columns: blocks on blockIdx.y to fill the GPU, up to 1056 */
	k = auto_kernel("fusion ms(x: f32[2, T, 64]) -> (s: f32[2, 64]) {\n"
			"  s[b, h] = sum(t: x[b, t, h]);\n"
			"}\n");
	ck_assert_contains(k, "kernel ms_kernel grid(2, 528) block(256) smem(4096) {");
	ck_assert_contains(k, "grid_reduce_sum(s_acc over blockIdx.y");
	free(k);
}
END_TEST

/* When every input of an outer or middle-axis reduction is read once (x[every root of s], no
 * other reader), they load with an L2 evict-first policy (x.evict_first()); beside a read per
 * row (v[k] of a vector-matrix product: every column block reads it; the product ran slower
 * with A evict-first) or a read with a constant subscript none does, nor a whole-tensor
 * sum's input. */
START_TEST(test_auto_outer_evict_first)
{
	char *ir = auto_ir("fusion ms(x: f32[B, T, H]) -> (s: f32[B, H]) {\n"
			   "  s[b, h] = sum(t: x[b, t, h]);\n"
			   "}\n");
	ck_assert_contains(ir, "  tensor x: f32[B, T, H] input global evict_first\n");
	free(ir);
	ir = auto_ir("fusion vm(v: f32[K], A: f32[K, N]) -> (y: f32[N]) {\n"
		     "  y[j] = sum(k: v[k] * A[k, j]);\n"
		     "}\n");
	ck_assert_contains(ir, "  tensor A: f32[K, N] input global\n");
	ck_assert_contains(ir, "  tensor v: f32[K] input global\n");
	free(ir);
	ir = auto_ir("fusion total(x: f32[N]) -> (s: f32) {\n"
		     "  s = sum(i: x[i]);\n"
		     "}\n");
	ck_assert_contains(ir, "  tensor x: f32[N] input global\n");
	free(ir);
	ir = auto_ir("fusion c(x: f32[M, N], y: f32[M, N]) -> (s: f32[N]) {\n"
		     "  s[j] = sum(i: x[i, j] * y[i, 0]);\n"
		     "}\n");
	ck_assert_contains(ir, "  tensor x: f32[M, N] input global\n");
	ck_assert_contains(ir, "  tensor y: f32[M, N] input global\n");
	free(ir);
	ir = auto_ir("fusion c(x: f32[M, N], y: f32[M, N]) -> (s: f32[N]) {\n"
		     "  s[j] = sum(i: x[i, j] * y[i, j]);\n"
		     "}\n");
	ck_assert_contains(ir, "  tensor x: f32[M, N] input global evict_first\n");
	ck_assert_contains(ir, "  tensor y: f32[M, N] input global evict_first\n");
	free(ir);
}
END_TEST

/* A column sum that the output reads: an outer reduction, which a grid reduction computes
 * well and nothing may read in the kernel that reduces it, so the fusion is split into two
 * segments (scheduler/segment.c): the column sums into a workspace of N, then y. */
START_TEST(test_auto_general_colnorm)
{
	static const char src[] =
		"fusion colnorm(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  c[j] = sum(i: x[i, j]);\n"
		"  y[i, j] = x[i, j] / c[j];\n"
		"}\n";
	TestCompile *tc = tc_lowered(src);
	char *ir = tc_fusion_ir(tc, 0);
	ck_assert_contains(ir, "  segments (run in order): colnorm_seg0 colnorm_seg1\n"
			       "  workspace: c: f32[N]\n");
	ck_assert_contains(ir, "fusion colnorm_seg0(x: f32[M, N]) -> (c: f32[N])\n");
	ck_assert_contains(ir, "fusion colnorm_seg1(x: f32[M, N], c: f32[N]) -> (y: f32[M, N])\n");
	free(ir);
	char *k = tc_kernel_ir(tc, 0);
	ck_assert_contains(k, "plan colnorm_segments {\n  run colnorm_seg0\n  run colnorm_seg1\n}\n");
	/* the column sums' schedule (test_auto_col_sum: its size variants split the rows over
	 * blockIdx.y, a grid reduction) */
	ck_assert_contains(k, "c_acc = c_acc + c_part[ty * 64 + threadIdx.x];");
	free(k);
	tc_free(tc);
}
END_TEST

/* A full reduction (scheduler/auto_outer.c): one flat index, 16-byte vectors, 1024 threads,
 * 132 blocks (one per H200 SM) in a grid-stride loop; each thread adds a step's 4 vectors
 * into one register partial per lane (rfactor over the thread's steps: independent
 * accumulators, the loads of a step all issued before their adds), then a block reduction
 * and a grid reduction over blockIdx.x (a fold of 132 partials). */
START_TEST(test_auto_total)
{
	char *k = auto_kernel(
		"fusion total(x: f32[M, N]) -> (s: f32) {\n"
		"  s = sum(i, j: x[i, j]);\n"
		"}\n");
	ck_assert_contains(k, "kernel total_kernel grid(132) block(1024) {");
	ck_assert_contains(k, "alloc local f32 s_part[4];");
	ck_assert_contains(k, "block_reduce_sum(");
	ck_assert_contains(k, "grid_reduce_sum(s_acc over blockIdx.x, element 0, part blockIdx.x of 132");
	/* the full steps have no bound check (the merged index's row, r / N < M, included) */
	const char *full = strstr(k, "for rr in [0, M * N / 2162688) {");
	ck_assert_ptr_nonnull(full);
	const char *tail = strstr(full, "for rr_1 in");
	ck_assert_ptr_nonnull(tail);
	*(char *)tail = '\0';
	ck_assert_not_contains(full, " / N");
	ck_assert_not_contains(full, "if (");
	free(k);
	k = auto_kernel("fusion total(x: f32[N]) -> (s: f32) {\n"
			"  s = sum(i: x[i]);\n"
			"}\n");
	ck_assert_contains(k, "alloc local f32 s_part[4];");
	ck_assert_contains(k, "    for u in [0, 4) unroll {\n");
	ck_assert_contains(k, "      x_vec[0 : 4] = x[rr * 2162688 + u * 540672 + blockIdx.x * 4096 + threadIdx.x * 4 : 4];\n");
	ck_assert_not_contains(k, "x_reg");
	free(k);
	/* 2-byte data: the same grid, 8 f32 partials per thread (a 16-byte load of 8 f16) */
	k = auto_kernel("fusion total(x: f16[N]) -> (s: f32) {\n"
			"  s = sum(i: f32(x[i]));\n"
			"}\n");
	ck_assert_contains(k, "alloc local f32 s_part[8];");
	ck_assert_contains(k, "x_vec[0 : 8] = x[rr * 4325376 + u * 1081344 + blockIdx.x * 8192 + threadIdx.x * 8 : 8];");
	ck_assert_contains(k, "s_part[rv_1_1] = s_part[rv_1_1] + f32(x_vec[rv_1_1]);");
	ck_assert_contains(k, "kernel total_kernel grid(132) block(1024) {");
	free(k);
	/* 1-byte data into i32: 8 partials (32 bytes of registers), 8-byte loads */
	k = auto_kernel("fusion total(x: bool[N]) -> (s: i32) {\n"
			"  s = sum(i: i32(x[i]));\n"
			"}\n");
	ck_assert_contains(k, "alloc local i32 s_part[8];");
	ck_assert_contains(k, "x_vec[0 : 8] = x[");
	free(k);
	/* a small constant tensor: fewer blocks and threads */
	k = auto_kernel("fusion total(x: f32[1000]) -> (s: f32) {\n"
			"  s = sum(i: x[i]);\n"
			"}\n");
	ck_assert_contains(k, "kernel total_kernel block(256) {");
	free(k);
	/* 5 blocks of 1024 threads (and a grid reduction), a partial last vector */
	check_simulated("fusion total(x: f32[300003]) -> (s: f32) {\n"
			"  s = sum(i: x[i]);\n"
			"}\n", "");
	/* a full step and a partial one, a row length no vector divides */
	check_simulated("fusion total(x: f32[M, N]) -> (s: f32) {\n"
			"  s = sum(i, j: x[i, j]);\n"
			"}\n", "M=1543,N=1403");
}
END_TEST

/* ---- several outputs, several readers of one input ----------------------------------- */

/* `fusc check` in miniature: the automatic schedule of `src` (one fusion of f32 tensors)
 * lowers, and the simulated kernel with sizes `dims` ("M=37,N=260", every size of the fusion)
 * writes every output element, reports nothing, and matches the reference interpreter. */
static void check_simulated(const char *src, const char *dims)
{
	TestCompile *tc = tc_compile(src, true);
	ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
	ck_assert_str_eq(tc->diags, "");
	Kernel *k = tc->kernels[0];
	Fusion *f = k->fusion;
	int64_t sizes[16] = {0};
	ck_assert_int_le(f->nsizes, 16);
	for (int i = 0; i < f->nsizes; i++) {
		const char *at = strstr(dims, f->sizes[i]->name);
		ck_assert_msg(at && at[strlen(f->sizes[i]->name)] == '=', "no size %s", f->sizes[i]->name);
		sizes[f->sizes[i]->index] = strtoll(at + strlen(f->sizes[i]->name) + 1, NULL, 10);
	}
	k = kernel_pick(k, sizes, NULL); /* the variant the launcher runs at these sizes */
	ck_assert_ptr_nonnull(k);
	void *ins[8], *refs[8], *outs[8];
	int64_t nout[8];
	ck_assert_int_le(f->ninputs, 8);
	ck_assert_int_le(f->noutputs, 8);
	for (int i = 0; i < f->ninputs + f->noutputs; i++) {
		bool in = i < f->ninputs;
		Tensor *t = in ? f->inputs[i] : f->outputs[i - f->ninputs];
		int64_t d[16], n;
		char *err = NULL;
		ck_assert_int_eq(t->dtype, DT_F32);
		ck_assert_msg(tensor_dims(t, sizes, d, &err), "%s", err);
		n = shape_numel(d, t->ndim);
		float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
		for (int64_t e = 0; e < n; e++) /* varied signs and magnitudes, per tensor */
			x[e] = in ? (float)((e * 37 + i * 11) % 101 - 50) / 8.0f : NAN;
		if (in) {
			ins[i] = x;
		} else {
			int o = i - f->ninputs;
			outs[o] = x;
			refs[o] = malloc(sizeof(float) * (size_t)(n ? n : 1));
			nout[o] = n;
		}
	}
	char *err = NULL;
	ck_assert_msg(interp_run(f, sizes, NULL, ins, refs, &err), "%s", err);
	SimResult r;
	SimOptions so = {.seed = 1};
	ck_assert(sim_run(k, sizes, NULL, ins, outs, &so, &r));
	ck_assert_msg(r.nreports == 0, "%d simulator reports", r.nreports);
	for (int o = 0; o < f->noutputs; o++) {
		float *got = outs[o], *want = refs[o];
		for (int64_t e = 0; e < nout[o]; e++) {
			ck_assert_msg(r.written[o][e], "%s[%lld] not written", f->outputs[o]->name,
				      (long long)e);
			ck_assert_msg(fabsf(got[e] - want[e]) <= 1e-5f + 1e-5f * fabsf(want[e]),
				      "%s[%lld] = %g, reference %g", f->outputs[o]->name,
				      (long long)e, got[e], want[e]);
		}
		free(outs[o]);
		free(refs[o]);
	}
	for (int i = 0; i < f->ninputs; i++)
		free(ins[i]);
	sim_result_free(&r);
	tc_free(tc);
}

static const char sum_max_min_src[] =
	"fusion r(x: f32[M, N]) -> (s: f32[M], m: f32[M], n: f32[M]) {\n"
	"  s[i] = sum(j: x[i, j]);\n"
	"  m[i] = max(j: x[i, j]);\n"
	"  n[i] = min(j: x[i, j]);\n"
	"}\n";

/* Three reductions of one input: x.cache_after would reroute all three readers to one cache,
 * so no per-reduction register copy (each used to get its own, and the second cache_after
 * found x read by the first cache only). Each reduction reads x with coalesced scalar loads.
 * The three outputs are one row group: s and m are computed in n's nest at its row
 * (row_companions), so the block reads its row of x three times back to back (from L1/L2)
 * rather than three nests each reading all of x. */
START_TEST(test_auto_three_reductions_one_input)
{
	char *ir = auto_ir(sum_max_min_src);
	ck_assert_str_eq(ir,
		"  tensor x: f32[M, N] input global\n"
		"  tensor s: f32[M] output global compute_at(n, 0)\n"
		"    def s[i] = sum(j: x[i, j])\n"
		"    domain:\n"
		"      i: M = n.i (root 0)\n"
		"      jr: ceildiv(N, 128) reduction (split of j by 128, outer)\n"
		"      tx: 128 reduction threadIdx.x (split of j by 128, inner)\n"
		"  tensor m: f32[M] output global compute_at(n, 0)\n"
		"    def m[i] = max(j: x[i, j])\n"
		"    domain:\n"
		"      i: M = n.i (root 0)\n"
		"      jr: ceildiv(N, 128) reduction (split of j by 128, outer)\n"
		"      tx: 128 reduction threadIdx.x (split of j by 128, inner)\n"
		"  tensor n: f32[M] output global\n"
		"    def n[i] = min(j: x[i, j])\n"
		"    domain:\n"
		"      i: M blockIdx.x (root 0)\n"
		"      jr: ceildiv(N, 128) reduction (split of j by 128, outer)\n"
		"      tx: 128 reduction threadIdx.x (split of j by 128, inner)\n");
	free(ir);
	char *k = auto_kernel(sum_max_min_src);
	ck_assert_contains(k, "s_acc = block_reduce_sum(s_acc over threadIdx.x);");
	ck_assert_contains(k, "m_acc = block_reduce_max(m_acc over threadIdx.x);");
	ck_assert_contains(k, "n_acc = block_reduce_min(n_acc over threadIdx.x);");
	free(k);
	check_simulated(sum_max_min_src, "M=37,N=260");
	check_simulated(sum_max_min_src, "M=3,N=3");
	check_simulated(sum_max_min_src, "M=2,N=1024");
}
END_TEST

/* The same with a constant row: the outputs are one row group (row_companions), so the row
 * is persistent: x is cached in registers once and all three reductions read the cache. */
START_TEST(test_auto_two_reductions_one_input_const)
{
	static const char src[] =
		"fusion rc(x: f32[M, 1024]) -> (s: f32[M], m: f32[M]) {\n"
		"  s[i] = sum(j: x[i, j]);\n"
		"  m[i] = max(j: x[i, j]);\n"
		"}\n";
	char *ir = auto_ir(src);
	ck_assert_contains(ir, "intermediate local compute_at(m, 1) cache_after(x)");
	ck_assert_contains(ir, "tensor s: f32[M] output global compute_at(m, 1)");
	free(ir);
	check_simulated(src, "M=5");
}
END_TEST

/* Several outputs of one row group (docs/auto_schedule.md, "Several outputs of one row
 * group"): h = x + r, a pointwise output that reads no reduction, is stored from y's nest with
 * y's vectors, and a constant row is persistent: x and r are cached once, every output reads
 * the registers. */
START_TEST(test_auto_row_companions)
{
	static const char src[] =
		"fusion an(x: f32[M, 1000], r: f32[M, 1000], w: f32[1000]) -> (h: f32[M, 1000], y: f32[M, 1000]) {\n"
		"  hs[i, j] = x[i, j] + r[i, j];\n"
		"  h[i, j] = hs[i, j];\n"
		"  y[i, j] = hs[i, j] * rsqrt(sum(k: hs[i, k] * hs[i, k]) / 1000.0) * w[j];\n"
		"}\n";
	char *ir = auto_ir(src);
	ck_assert_contains(ir, "tensor h: f32[M, 1000] output global compute_at(y, 1)");
	ck_assert_contains(ir, "tensor x_reg: f32[M, 1000] intermediate local compute_at(y, 1) cache_after(x)");
	ck_assert_contains(ir, "tensor r_reg: f32[M, 1000] intermediate local compute_at(y, 1) cache_after(r)");
	free(ir);
	check_simulated(src, "M=5");
	/* a row sum over another length beside it: not a companion, each output its own nest */
	static const char other[] =
		"fusion an(x: f32[M, 1000], z: f32[M, 300]) -> (s: f32[M], t: f32[M]) {\n"
		"  s[i] = sum(j: x[i, j]);\n"
		"  t[i] = sum(k: z[i, k]);\n"
		"}\n";
	ir = auto_ir(other);
	ck_assert_ptr_null(strstr(ir, "output global compute_at"));
	free(ir);
	check_simulated(other, "M=5");
}
END_TEST

static int count_in(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* One copy of each reduction per row (auto_share_copies): the outputs of a row group run in
 * the anchor's nest, and the companions read the anchor's reductions instead of computing
 * their own (layernorm with its mean and rstd computed the row mean three times and the
 * variance twice; the N <= 65536 variant read x five times); softmax's outputs m and s store
 * the copies y reads. In any output order, with the vectors kept; the simulator on both
 * sides of the bounds. */
#define LS_BODY                                                                              \
	"  mean[i] = sum(j: x[i, j]) / N;\n"                                                  \
	"  rstd[i] = rsqrt(sum(j: (x[i, j] - mean[i]) * (x[i, j] - mean[i])) / N + 0.5);\n"   \
	"  y[i, j] = (x[i, j] - mean[i]) * rstd[i] * g[j];\n"                                 \
	"}\n"
#define MV_BODY                                                                 \
	"  mean[i] = sum(j: x[i, j]) / N;\n"                                     \
	"  var[i] = sum(j: (x[i, j] - mean[i]) * (x[i, j] - mean[i])) / N;\n"    \
	"}\n"

START_TEST(test_auto_companions_share)
{
	static const struct {
		const char *src, *pers, *big;
		int reds, big_reds, big_pairs;
	} cases[] = {
		{"fusion ls(x: f32[M, N], g: f32[N]) -> (y: f32[M, N], mean: f32[M], rstd: f32[M]) {\n"
		 LS_BODY, "ls_kernel_N4096", "ls_kernel_N65536", 2, 0, 1},
		{"fusion ls(x: f32[M, N], g: f32[N]) -> (mean: f32[M], rstd: f32[M], y: f32[M, N]) {\n"
		 LS_BODY, "ls_kernel_N4096", "ls_kernel_N65536", 2, 0, 1},
		{"fusion mv(x: f32[M, N]) -> (mean: f32[M], var: f32[M]) {\n"
		 MV_BODY, "mv_kernel_N4096", "mv_kernel_N65536", 2, 2, 0},
		{"fusion mv(x: f32[M, N]) -> (var: f32[M], mean: f32[M]) {\n"
		 MV_BODY, "mv_kernel_N4096", "mv_kernel_N65536", 2, 2, 0},
		{"fusion ss(x: f32[M, N]) -> (y: f32[M, N], m: f32[M], s: f32[M]) {\n"
		 "  m[i] = max(j: x[i, j]);\n"
		 "  s[i] = sum(j: exp(x[i, j] - m[i]));\n"
		 "  y[i, j] = exp(x[i, j] - m[i]) / s[i];\n"
		 "}\n", "ss_kernel_N4096", "ss_kernel_N65536", 2, 0, 1},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		TestCompile *tc = tc_compile(cases[c].src, true);
		ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
		char *pers = tc_variant_ir(tc, cases[c].pers), *big = tc_variant_ir(tc, cases[c].big);
		/* persistent: one block reduction per statistic, over the registers; N <= 65536:
		 * layernorm's Welford pair and softmax's online pair are one combination */
		ck_assert_int_eq(count_in(pers, "= block_reduce_"), cases[c].reds);
		ck_assert_int_eq(count_in(big, "= block_reduce_"), cases[c].big_reds);
		ck_assert_int_eq(count_in(big, "= block_welford(") + count_in(big, "= block_online("),
				 cases[c].big_pairs);
		ck_assert(loads_only_into_cache(pers));
		/* 16-byte loads of x into the registers */
		ck_assert_contains(pers, "x_reg[jr * 4 : 4] = x[");
		/* two statistics, two reduction tensors in every variant (no copies) */
		Fusion *f = tc->prog->fusions[0];
		ck_assert_int_ge(f->variants.len, 6);
		for (int k = 0; k < f->variants.len; k++) {
			Fusion *g = VEC_AT(f->variants, Fusion, k);
			int nred = 0;
			for (int t = 0; t < g->ntensors; t++)
				nred += tensor_is_reduction(g->tensors[t]);
			ck_assert_int_eq(nred, 2);
		}
		free(pers);
		free(big);
		tc_free(tc);
		/* (N = 0: a mean of no elements is NaN, which this comparison refuses; fusc check
		 * runs it, tests/check_examples.sh) */
		static const char *const dims[] = {"M=0,N=5", "M=2,N=1", "M=3,N=7", "M=2,N=63",
						   "M=3,N=65", "M=2,N=1000", "M=2,N=4096", "M=2,N=4097",
						   "M=2,N=16385", "M=2,N=65536"};
		for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
			check_simulated(cases[c].src, dims[d]);
	}
}
END_TEST

/* Two row reductions of different inputs: each input has one reader, so each keeps its
 * one-vector register copy. */
START_TEST(test_auto_two_reductions_two_inputs)
{
	static const char src[] =
		"fusion r2(x: f32[M, N], y: f32[M, N]) -> (s: f32[M], t: f32[M]) {\n"
		"  s[i] = sum(j: x[i, j]);\n"
		"  t[i] = max(j: y[i, j]);\n"
		"}\n";
	char *ir = auto_ir(src);
	ck_assert_contains(ir,
		"  tensor x_reg: f32[M, N] intermediate local compute_at(s, 2) cache_after(x)\n");
	ck_assert_contains(ir,
		"  tensor y_reg: f32[M, N] intermediate local compute_at(t, 2) cache_after(y)\n");
	free(ir);
	check_simulated(src, "M=37,N=260");
	check_simulated(src, "M=1,N=4");
}
END_TEST

/* A reduction and a pointwise output of the same input: no cache (it would reroute the
 * pointwise output's read too); the pointwise output gets the general schedule. */
START_TEST(test_auto_reduction_and_pointwise)
{
	static const char src[] =
		"fusion rp(x: f32[M, N]) -> (s: f32[M], y: f32[M, N]) {\n"
		"  s[i] = sum(j: x[i, j]);\n"
		"  y[i, j] = x[i, j] * 2.0;\n"
		"}\n";
	char *ir = auto_ir(src);
	ck_assert_ptr_null(strstr(ir, "cache_after"));
	ck_assert_contains(ir,
		"  tensor s: f32[M] output global\n"
		"    def s[i] = sum(j: x[i, j])\n"
		"    domain:\n"
		"      i: M blockIdx.x (root 0)\n"
		"      jr: ceildiv(N, 128) reduction (split of j by 128, outer)\n"
		"      tx: 128 reduction threadIdx.x (split of j by 128, inner)\n");
	free(ir);
	check_simulated(src, "M=37,N=260");
	check_simulated(src, "M=3,N=3");
}
END_TEST

/* A 3-D input reduced on its last axis by two outputs: rows (b, t) merged on blockIdx.x. */
START_TEST(test_auto_3d_two_reductions)
{
	static const char src[] =
		"fusion r3(x: f32[B, T, N]) -> (s: f32[B, T], m: f32[B, T]) {\n"
		"  s[b, t] = sum(j: x[b, t, j]);\n"
		"  m[b, t] = max(j: x[b, t, j]);\n"
		"}\n";
	char *ir = auto_ir(src);
	ck_assert_ptr_null(strstr(ir, "cache_after"));
	ck_assert_contains(ir,
		"  tensor m: f32[B, T] output global\n"
		"    def m[b, t] = max(j: x[b, t, j])\n"
		"    domain:\n"
		"      row: B * T blockIdx.x (merge of b and t)\n");
	free(ir);
	check_simulated(src, "B=3,T=5,N=260");
	check_simulated(src, "B=2,T=1,N=7");
}
END_TEST

/* One 3-D reduction (a single reader: the register copy stays). */
START_TEST(test_auto_3d_one_reduction)
{
	static const char src[] =
		"fusion r3c(x: f32[B, T, 64]) -> (s: f32[B, T]) {\n"
		"  s[b, t] = sum(j: x[b, t, j]);\n"
		"}\n";
	char *ir = auto_ir(src);
	ck_assert_contains(ir, "cache_after(x)");
	free(ir);
	check_simulated(src, "B=3,T=5");
}
END_TEST

/* ---- the slot-reuse (WAR) barrier of a circular buffer ------------------------------- */

static bool expr_reads(IrExpr *e, Tensor *t)
{
	if (!e)
		return false;
	if ((e->kind == EX_LOAD || e->kind == EX_ACCESS) && e->tensor == t)
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (expr_reads(e->args[i], t))
			return true;
	return false;
}

static bool slot_reads(IrExpr **slot, void *t)
{
	return expr_reads(*slot, t);
}

static bool one_reads(Stmt *s, void *t)
{
	return ir_stmt_exprs(s, slot_reads, t) || (s->kind == KS_VSTORE && s->copy.src == t);
}

/* Does statement s (or anything nested in it) read t? */
static bool stmt_reads(Stmt *s, Tensor *t)
{
	return ir_stmts_any(s, one_reads, t);
}

static Stmt *find_loop(Stmt *s, const char *axis)
{
	for (; s; s = s->next) {
		if (s->kind == KS_FOR && s->loop.var->axis && strcmp(s->loop.var->axis->name, axis) == 0)
			return s;
		Stmt **lists[3], *in = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !in; i++)
			in = find_loop(*lists[i], axis);
		if (in)
			return in;
	}
	return NULL;
}

/* In the body of the loop over `axis`, a __syncthreads (KS_SYNC, at the body's top level, so
 * every thread reaches it) comes after the last statement that reads tensor `name`: the next
 * iteration's prefetch cannot overwrite a slot that another thread is still reading. */
static void check_war_barrier(Kernel *k, const char *name, const char *axis)
{
	Tensor *t = fusion_find_tensor(k->fusion, name);
	ck_assert_ptr_nonnull(t);
	Stmt *loop = find_loop(k->body, axis);
	ck_assert_msg(loop != NULL, "no loop over %s", axis);
	int pos = 0, last_read = -1, last_sync = -1;
	for (Stmt *s = loop->loop.body; s; s = s->next, pos++) {
		Stmt *next = s->next;
		s->next = NULL; /* stmt_reads walks a list: look at this statement alone */
		if (stmt_reads(s, t))
			last_read = pos;
		s->next = next;
		if (s->kind == KS_SYNC)
			last_sync = pos;
	}
	ck_assert_msg(last_read >= 0, "the %s loop does not read %s", axis, name);
	ck_assert_msg(last_sync > last_read, "no __syncthreads after the last read of %s in the %s loop",
		      name, axis);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return buf;
}

/* The checker itself, on a circular buffer that has the barrier today (other threads read
 * each slot: cross-thread WAR). */
START_TEST(test_war_barrier_db1)
{
	TestCompile *tc = tc_compile(read_text("examples/cp_async/cp_async_db1_stages2.fus"), true);
	ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
	check_war_barrier(tc->kernels[0], "As", "i");
	tc_free(tc);
}
END_TEST

/* The blocked GEMM (examples/gemm/smem_gemm.fus): the ko loop fills the shared tiles of the
 * next k-step (double buffered) while the threads read the current one, so a barrier must
 * follow the last read of As and of Bs in each k-step before a slot is written again. */
START_TEST(test_gemm_smem_war)
{
	TestCompile *tc = tc_compile(read_text("examples/gemm/smem_gemm.fus"), true);
	ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
	check_war_barrier(tc->kernels[0], "As", "ko");
	check_war_barrier(tc->kernels[0], "Bs", "ko");
	tc_free(tc);
}
END_TEST

/* A register cache whose k loop is outside its own rows (Cl: [io | k, j, iu]) accumulates in
 * its buffer: set to the identity before k, updated in place, stored after. max and min keep
 * NaN, and -inf/+inf are ordinary values. Rows: 0 all -inf, 1 a NaN in the middle, 2 +inf
 * last, 3..5 ordinary (max j + 10 i at j = 6, min at j = 0). */
START_TEST(test_in_place_max_min_nan)
{
	static const char *src =
		"fusion mm(x: f32[6, 7]) -> (m: f32[6, 3], n: f32[6, 3]) {\n"
		"  m[i, j] = max(k: x[i, k] + j);\n"
		"  n[i, j] = min(k: x[i, k] - j);\n"
		"}\n"
		"schedule mm {\n"
		"  ml = m.cache_before(local);\n"
		"  m.split(i, 4) -> (io, iu);\n"
		"  m.reorder(io, j, iu);\n"
		"  m.bind(io, blockIdx.x);\n"
		"  m.bind(j, threadIdx.x);\n"
		"  ml.compute_at(m, io);\n"
		"  ml.reorder(k, j, iu);\n"
		"  ml.bind(j, threadIdx.x);\n"
		"  nl = n.cache_before(local);\n"
		"  n.split(i, 4) -> (io, iu);\n"
		"  n.reorder(io, j, iu);\n"
		"  n.bind(io, blockIdx.x);\n"
		"  n.bind(j, threadIdx.x);\n"
		"  nl.compute_at(n, io);\n"
		"  nl.reorder(k, j, iu);\n"
		"  nl.bind(j, threadIdx.x);\n"
		"}\n";
	TestCompile *tc = tc_compile(src, true);
	ck_assert_msg(tc->kernels != NULL, "did not lower:\n%s", tc->diags);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "      ml[iu] = -inf;\n");
	ck_assert_contains(ir, "      nl[iu_3] = inf;\n");
	float x[6 * 7], m[6 * 3], n[6 * 3];
	for (int i = 0; i < 6; i++)
		for (int k = 0; k < 7; k++)
			x[i * 7 + k] = i == 0 ? -INFINITY : i == 2 && k == 6 ? INFINITY : (float)(k + 10 * i);
	x[1 * 7 + 3] = NAN;
	void *in[1] = {x}, *out[2] = {m, n};
	SimOptions o = {.seed = 1};
	SimResult r;
	ck_assert(sim_run(tc->kernels[0], NULL, NULL, in, out, &o, &r));
	ck_assert_int_eq(r.nreports, 0);
	for (int j = 0; j < 3; j++) {
		ck_assert(isinf(m[j]) && m[j] < 0);
		ck_assert(isinf(n[j]) && n[j] < 0);
		ck_assert(isnan(m[3 + j]) && isnan(n[3 + j]));
		ck_assert(isinf(m[6 + j]) && m[6 + j] > 0);
		ck_assert_float_eq(n[6 + j], (float)(20 - j));
		for (int i = 3; i < 6; i++) {
			ck_assert_float_eq(m[i * 3 + j], (float)(6 + 10 * i + j));
			ck_assert_float_eq(n[i * 3 + j], (float)(10 * i - j));
		}
	}
	sim_result_free(&r);
	free(ir);
	tc_free(tc);
}
END_TEST

Suite *auto_reduce_suite(void)
{
	Suite *s = suite_create("auto_reduce");
	TCase *tc = tcase_create("auto");
	tcase_set_timeout(tc, 60); /* the simulations of test_tail_split_rows take seconds */
	tcase_add_test(tc, test_auto_row_sum);
	tcase_add_test(tc, test_auto_softmax_persistent);
	tcase_add_test(tc, test_auto_long_rows);
	tcase_add_test(tc, test_auto_softmax_symbolic);
	tcase_add_test(tc, test_auto_logsumexp_reads_once);
	tcase_add_test(tc, test_auto_row_sum_bf16_vectors);
	tcase_add_test(tc, test_auto_long_bucket_unrolled);
	tcase_add_test(tc, test_tail_split_rows);
	tcase_add_test(tc, test_auto_row_values_once);
	tcase_add_test(tc, test_auto_short_rows);
	tcase_add_test(tc, test_auto_col_sum);
	tcase_add_test(tc, test_auto_col_sum_grid);
	tcase_add_test(tc, test_auto_general_colnorm);
	tcase_add_test(tc, test_auto_total);
	tcase_add_test(tc, test_auto_middle_sum);
	tcase_add_test(tc, test_auto_outer_evict_first);
	tcase_add_test(tc, test_auto_three_reductions_one_input);
	tcase_add_test(tc, test_auto_two_reductions_one_input_const);
	tcase_add_test(tc, test_auto_row_companions);
	tcase_add_test(tc, test_auto_companions_share);
	tcase_add_test(tc, test_auto_two_reductions_two_inputs);
	tcase_add_test(tc, test_auto_reduction_and_pointwise);
	tcase_add_test(tc, test_auto_3d_two_reductions);
	tcase_add_test(tc, test_auto_3d_one_reduction);
	suite_add_tcase(s, tc);
	TCase *tg = tcase_create("gemm");
	tcase_add_test(tg, test_war_barrier_db1);
	tcase_add_test(tg, test_gemm_smem_war);
	tcase_add_test(tg, test_in_place_max_min_nan);
	suite_add_tcase(s, tg);
	return s;
}
