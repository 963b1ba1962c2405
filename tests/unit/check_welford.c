/* check_welford.c: `s2.welford()`, Welford's single-pass variance, and `s.online()`, the
 * online max and sum of exponentials (scheduler/welford.c, passes/loop_nest.c,
 * docs/reductions.md "Welford's single pass" and "Online max and sum").
 *
 * Structure: layernorm reads x in one loop for both statistics (three without welford: the
 * sum, the squared deviations, the output), the update is one predicated group, one
 * block_welford and no other block reduction, s2 stored from the M2 without loops, the CUDA
 * helper call, NVRTC for sm_80 and sm_90. Values through the simulator: rows of 1e4 plus small
 * noise (large mean, small variance) against a double reference computed here, for every
 * combination layout (warp shuffles, warps through shared memory, a group of 48 threads,
 * several rows per block, serial only) and rows shorter than a warp (threads with count 0).
 * The schedule errors, with their exact text.
 *
 * online(): softmax reads x twice instead of three times and logsumexp once instead of
 * twice, one block_online and no other block reduction, the CUDA call and NVRTC; the
 * simulator against the reference for every combination layout at sizes no split divides, 0
 * and 1; infinities (no NaN from exp(-inf - -inf)) and NaN against values computed here; a
 * mutated kernel that forgets to rescale the sum when the max grows is caught by the same
 * comparison; the errors; the automatic scheduler's use of it in the N <= 65536 bucket only.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"
#include "tests/unit/testutil.h"

static bool reads(IrExpr *e, Tensor *t)
{
	if (!e)
		return false;
	if ((e->kind == EX_LOAD || e->kind == EX_ACCESS) && e->tensor == t)
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (reads(e->args[i], t))
			return true;
	return false;
}

static bool slot_reads(IrExpr **slot, void *t)
{
	return reads(*slot, t);
}

static bool stmt_reads(Stmt *s, void *t)
{
	return ir_stmt_exprs(s, slot_reads, t) || (s->kind == KS_VSTORE && s->copy.src == t);
}

static bool stmts_read(Stmt *s, Tensor *t)
{
	return ir_stmts_any(s, stmt_reads, t);
}

/* Loops that read t, not counting loops nested in such a loop: passes over t. */
static int passes_over(Stmt *s, Tensor *t)
{
	int n = 0;
	bool after_pass = false; /* a loop right after a pass is its last step (tail_split) */
	for (; s; s = s->next) {
		if (s->kind == KS_FOR && stmts_read(s->loop.body, t)) {
			n += !after_pass;
			after_pass = true;
			continue;
		}
		after_pass = false;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += passes_over(*lists[i], t);
	}
	return n;
}

static int count_block_reduces(Stmt *s, ReduceOp red)
{
	int n = 0;
	for (; s; s = s->next) {
		n += s->kind == KS_BLOCK_REDUCE && s->block_red.red == red;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += count_block_reduces(*lists[i], red);
	}
	return n;
}

static int count_str(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* ---- layernorm ------------------------------------------------------------------------------ */

#define LAYERNORM_FUSION                                                                      \
	"fusion ln(x: f32[M, N], gamma: f32[N], beta: f32[N], eps: f32) -> (y: f32[M, N]) {\n" \
	"  s1[i]   = sum(j: x[i, j]);\n"                                                       \
	"  mean[i] = s1[i] / N;\n"                                                             \
	"  d[i, j] = x[i, j] - mean[i];\n"                                                     \
	"  s2[i]   = sum(j: d[i, j] * d[i, j]);\n"                                             \
	"  rstd[i] = rsqrt(s2[i] / N + eps);\n"                                                \
	"  y[i, j] = d[i, j] * rstd[i] * gamma[j] + beta[j];\n"                                \
	"}\n"
#define LAYERNORM_SCHEDULE                 \
	"schedule ln {\n"                  \
	"  y.split(j, 4) -> (jo, jv);\n"   \
	"  y.split(jo, 128) -> (jr, tx);\n" \
	"  y.bind(i, blockIdx.x);\n"       \
	"  y.bind(tx, threadIdx.x);\n"     \
	"  y.vectorize(jv);\n"             \
	"  s1.compute_at(y, i);\n"         \
	"  s1.split(j, 128) -> (jr, tx);\n" \
	"  s1.bind(tx, threadIdx.x);\n"    \
	"  s2.compute_at(y, i);\n"         \
	"  s2.split(j, 128) -> (jr, tx);\n" \
	"  s2.bind(tx, threadIdx.x);\n"

static const char layernorm_src[] = LAYERNORM_FUSION LAYERNORM_SCHEDULE "}\n";
static const char layernorm_welford_src[] = LAYERNORM_FUSION LAYERNORM_SCHEDULE
	"  s2.welford();\n"
	"}\n";

START_TEST(test_layernorm_one_pass)
{
	TestCompile *two = tc_lowered(layernorm_src), *one = tc_lowered(layernorm_welford_src);
	Tensor *x2 = two->prog->fusions[0]->inputs[0], *x1 = one->prog->fusions[0]->inputs[0];
	Kernel *k = one->kernels[0];
	/* the two-pass schedule reads the row three times, Welford twice (statistics, output) */
	ck_assert_int_eq(passes_over(two->kernels[0]->body, x2), 3);
	ck_assert_int_eq(passes_over(k->body, x1), 2);
	ck_assert_int_eq(count_block_reduces(k->body, RED_WELFORD), 1);
	ck_assert_int_eq(count_block_reduces(k->body, RED_SUM), 0);
	ck_assert_int_eq(count_block_reduces(two->kernels[0]->body, RED_SUM), 2);

	char *fir = tc_fusion_ir(one, 0);
	ck_assert_contains(fir, "tensor s2: f32[M] intermediate local compute_at(y, 0) welford(s1)\n");
	free(fir);
	char *ir = tc_kernel_ir(one, 0);
	/* the update: shifted sums (no division), only the read, its weight and the shift under
	 * the bounds predicate; the thread's mean and M2 after the loop; s2 has no loop of its
	 * own */
	ck_assert_contains(ir,
		"  s1_n = 0.0;\n"
		"  s1_k = 0.0;\n"
		"  s1_mean = 0.0;\n"
		"  s1_m2 = 0.0;\n"
		"  for jr in [0, ceildiv(N, 128)) {\n"
		"    s1_v = s1_k;\n"
		"    s1_w = 0.0;\n"
		"    if (blockIdx.x < M && jr * 128 + threadIdx.x < N) {\n"
		"      s1_v = x[blockIdx.x * N + jr * 128 + threadIdx.x];\n"
		"      s1_w = 1.0;\n"
		"      s1_k = s1_n == 0.0 ? s1_v : s1_k;\n"
		"    }\n"
		"    s1_n = s1_n + s1_w;\n"
		"    s1_e = s1_v - s1_k;\n"
		"    s1_mean = s1_mean + s1_e;\n"
		"    s1_m2 = s1_m2 + s1_e * s1_e;\n"
		"  }\n"
		"  s1_r = s1_mean / max(s1_n, 1.0);\n"
		"  s1_m2 = max(s1_m2 - s1_mean * s1_r, 0.0);\n"
		"  s1_mean = s1_k + s1_r;\n"
		"  s1_n, s1_mean, s1_m2 = block_welford(s1_n, s1_mean, s1_m2 over threadIdx.x);\n"
		"  s1[0] = s1_mean * s1_n;\n"
		"  alloc local f32 s2[1];\n"
		"  // s2 computed at y.i\n"
		"  s2[0] = s1_m2;\n"
		"  for jr_1 in [0, ceildiv(N, 512)) {\n");
	ck_assert_int_eq(count_str(ir, "s2_acc"), 0);
	free(ir);

	char *cu = tc_cuda(one);
	ck_assert_contains(cu, "__device__ __forceinline__ void __fus_welford_combine(T &n, T &m, "
			       "T &m2, T nb, T mb, T m2b)");
	ck_assert_contains(cu, "  __fus_welford_warps<128, float>(s1_n, s1_mean, s1_m2);\n"
			       "  s1[0] = s1_mean * s1_n;\n");
	free(cu);
	/* files without welford do not get the helpers */
	cu = tc_cuda(two);
	ck_assert_not_contains(cu, "__fus_welford");
	free(cu);
	tc_assert_nvrtc(one);
	tc_free(one);
	tc_free(two);
}
END_TEST

/* ---- values: large mean, small variance ------------------------------------------------------- */

/* The population variance of each row. v reads the mean too (times 0, exact) so that s1 can
 * be computed at v's row loop, where s2 is. */
#define MV_FUSION                                                  \
	"fusion mv(x: f32[M, N]) -> (v: f32[M]) {\n"               \
	"  s1[i] = sum(j: x[i, j]);\n"                             \
	"  mean[i] = s1[i] / N;\n"                                 \
	"  d[i, j] = x[i, j] - mean[i];\n"                         \
	"  s2[i] = sum(j: d[i, j] * d[i, j]);\n"                   \
	"  v[i] = s2[i] / N + 0.0 * mean[i];\n"                    \
	"}\n"

static const char *const mv_schedules[] = {
	/* 128 threads per row: warp shuffles, then 4 warps through shared memory (BR_WARPS) */
	"  v.bind(i, blockIdx.x);\n"
	"  s1.compute_at(v, i); s1.split(j, 128) -> (jr, tx); s1.bind(tx, threadIdx.x);\n"
	"  s2.compute_at(v, i); s2.split(j, 128) -> (jr, tx); s2.bind(tx, threadIdx.x);\n",
	/* one warp per row: shuffles only (BR_WARP) */
	"  v.bind(i, blockIdx.x);\n"
	"  s1.compute_at(v, i); s1.split(j, 32) -> (jr, tx); s1.bind(tx, threadIdx.x);\n"
	"  s2.compute_at(v, i); s2.split(j, 32) -> (jr, tx); s2.bind(tx, threadIdx.x);\n",
	/* 48 threads: every triple through shared memory (BR_SMEM) */
	"  v.bind(i, blockIdx.x);\n"
	"  s1.compute_at(v, i); s1.split(j, 48) -> (jr, tx); s1.bind(tx, threadIdx.x);\n"
	"  s2.compute_at(v, i); s2.split(j, 48) -> (jr, tx); s2.bind(tx, threadIdx.x);\n",
	/* 8 rows per block on threadIdx.y, 16 threads per row */
	"  v.split(i, 8) -> (bx, ty); v.bind(bx, blockIdx.x); v.bind(ty, threadIdx.y);\n"
	"  s1.compute_at(v, ty); s1.split(j, 16) -> (jr, tx); s1.bind(tx, threadIdx.x);\n"
	"  s2.compute_at(v, ty); s2.split(j, 16) -> (jr, tx); s2.bind(tx, threadIdx.x);\n",
	/* one thread per row: the serial update only, no block combination */
	"  v.split(i, 64) -> (bx, tx); v.bind(bx, blockIdx.x); v.bind(tx, threadIdx.x);\n"
	"  s1.compute_at(v, tx);\n"
	"  s2.compute_at(v, tx);\n",
};

static const BlockReduceKind mv_kinds[] = {BR_WARPS, BR_WARP, BR_SMEM, BR_WARP};

static char *mv_src(int sched)
{
	Buf b = {0};
	buf_printf(&b, "%sschedule mv {\n%s  s2.welford();\n}\n", MV_FUSION, mv_schedules[sched]);
	return b.s;
}

static Stmt *find_welford(Stmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == KS_BLOCK_REDUCE && s->block_red.red == RED_WELFORD)
			return s;
		Stmt **lists[3], *f = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !f; i++)
			f = find_welford(*lists[i]);
		if (f)
			return f;
	}
	return NULL;
}

/* Row i: 1e4 plus noise in [-0.5, 0.5] (a deterministic hash), in f32. */
static float big_mean_value(int64_t i, int64_t j)
{
	uint32_t h = (uint32_t)(i * 7919 + j) * 2654435761u;
	return 10000.0f + (float)((h >> 8) % 100001) / 100000.0f - 0.5f;
}

static void check_rows(TestCompile *tc, int64_t M, int64_t N)
{
	float *x = malloc(sizeof(float) * (size_t)(M * N)), *v = malloc(sizeof(float) * (size_t)M);
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++)
			x[i * N + j] = big_mean_value(i, j);
	int64_t sizes[2] = {M, N};
	void *in[1] = {x}, *out[1] = {v};
	SimOptions o = {.seed = 1};
	SimResult r;
	ck_assert_msg(sim_run(tc->kernels[0], sizes, NULL, in, out, &o, &r), "%s",
		      r.error ? r.error : "");
	ck_assert_int_eq(r.nreports, 0);
	sim_result_free(&r);
	for (int64_t i = 0; i < M; i++) {
		double m = 0, q = 0;
		for (int64_t j = 0; j < N; j++)
			m += x[i * N + j];
		m /= (double)N;
		for (int64_t j = 0; j < N; j++)
			q += (x[i * N + j] - m) * (x[i * N + j] - m);
		q /= (double)N;
		/* f32 inputs near 1e4 are spaced 1e-3 apart and the f32 mean is within 5e-4 of the
		 * true one, so each deviation (up to 0.5) is off by about 5e-4: the variance (about
		 * 1/12) keeps 3 digits. The textbook single pass in f32, E[x^2] - E[x]^2, cancels
		 * 1e8 against 1e8 and misses by far more (checked below, so the bound means
		 * something). */
		ck_assert_msg(fabs(v[i] - q) <= 5e-4, "N = %lld row %lld: variance %.9g, want %.9g",
			      (long long)N, (long long)i, v[i], q);
		if (N >= 67) {
			float s = 0, ss = 0;
			for (int64_t j = 0; j < N; j++) {
				s += x[i * N + j];
				ss += x[i * N + j] * x[i * N + j];
			}
			float naive = ss / (float)N - (s / (float)N) * (s / (float)N);
			ck_assert_msg(fabs(naive - q) > 1e-2, "naive %.9g, want %.9g", naive, q);
		}
	}
	free(x);
	free(v);
}

START_TEST(test_large_mean_small_variance)
{
	int sched = _i;
	char *src = mv_src(sched);
	TestCompile *tc = tc_lowered(src);
	Stmt *w = find_welford(tc->kernels[0]->body);
	if (sched < 4) {
		BlockReduceShape sh;
		ck_assert_ptr_nonnull(w);
		ck_assert(kir_block_reduce_shape(tc->kernels[0], w->block_red.pars, &sh));
		ck_assert_int_eq(sh.kind, mv_kinds[sched]);
	} else {
		ck_assert_ptr_null(w);
	}
	/* a long row, a row not a multiple of the threads, rows shorter than a warp */
	check_rows(tc, 3, 1000);
	check_rows(tc, 9, 67);
	check_rows(tc, 2, 5);
	check_rows(tc, 2, 1);
	if (sched < 4)
		tc_assert_nvrtc(tc);
	tc_free(tc);
	free(src);
}
END_TEST

/* The single pass in f32 with the textbook formula E[x^2] - E[x]^2 would lose every digit
 * here; the two-pass schedule and Welford agree with the double reference. */
START_TEST(test_same_as_two_pass)
{
	char *src = mv_src(0);
	TestCompile *one = tc_lowered(src);
	Buf b = {0};
	buf_printf(&b, "%sschedule mv {\n%s}\n", MV_FUSION, mv_schedules[0]);
	TestCompile *two = tc_lowered(b.s);
	int64_t M = 4, N = 777, sizes[2] = {M, N};
	float *x = malloc(sizeof(float) * (size_t)(M * N)), v1[4], v2[4];
	for (int64_t i = 0; i < M * N; i++)
		x[i] = big_mean_value(i / N, i % N);
	void *in[1] = {x}, *o1[1] = {v1}, *o2[1] = {v2};
	SimOptions o = {.seed = 1};
	SimResult r;
	ck_assert(sim_run(one->kernels[0], sizes, NULL, in, o1, &o, &r));
	sim_result_free(&r);
	ck_assert(sim_run(two->kernels[0], sizes, NULL, in, o2, &o, &r));
	sim_result_free(&r);
	for (int i = 0; i < M; i++) {
		ck_assert_msg(fabsf(v1[i] - v2[i]) <= 2e-3f * v2[i], "row %d: %g vs %g", i, v1[i], v2[i]);
	}
	free(x);
	free(b.s);
	free(src);
	tc_free(one);
	tc_free(two);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------------ */

#define WELFORD_FORM "s1 = sum(j: X); s2 = sum(j: (X - s1 / N) * (X - s1 / N)) with N the reduced extent"

START_TEST(test_errors)
{
	/* not a sum of squared deviations */
	tf_expect_errors("fusion f(x: f32[M, N]) -> (y: f32[M]) {\n"
			 "  s1[i] = sum(j: x[i, j]);\n"
			 "  s2[i] = sum(j: x[i, j] * x[i, j]);\n"
			 "  y[i] = s2[i] / N - s1[i] * s1[i] / (N * N);\n"
			 "}\n"
			 "schedule f {\n"
			 "  s2.welford();\n"
			 "}\n",
			 "t.fus:7:3: error: welford() needs the squared value in 's2' to be X - s1 / N, "
			 "where s1 is a sum read at the same row and N its reduced extent: " WELFORD_FORM "\n");
	/* a deviation of another value than the sum's */
	tf_expect_errors("fusion f(x: f32[M, N]) -> (y: f32[M]) {\n"
			 "  s1[i] = sum(j: x[i, j]);\n"
			 "  s2[i] = sum(j: (2.0 * x[i, j] - s1[i] / N) * (2.0 * x[i, j] - s1[i] / N));\n"
			 "  y[i] = s2[i];\n"
			 "}\n"
			 "schedule f {\n"
			 "  s2.welford();\n"
			 "}\n",
			 "t.fus:7:3: error: welford() needs the value from which the mean is subtracted in "
			 "'s2' to be the body of 's1' (the same expression X)\n");
	/* a grid reduction */
	tf_expect_errors(LAYERNORM_FUSION
			 "schedule ln {\n"
			 "  y.bind(i, blockIdx.x);\n"
			 "  s1.compute_at(y, i);\n"
			 "  s1.split(j, 128) -> (jr, tx);\n"
			 "  s1.bind(jr, blockIdx.y);\n"
			 "  s2.compute_at(y, i);\n"
			 "  s2.split(j, 128) -> (jr, tx);\n"
			 "  s2.welford();\n"
			 "}\n",
			 "t.fus:16:3: error: welford() does not support grid reductions: reduction axis "
			 "'jr' of 's1' is bound to blockIdx.y; bind it to threadIdx.* or leave it serial\n");
	/* rfactor */
	tf_expect_errors(LAYERNORM_FUSION
			 "schedule ln {\n"
			 "  s2.split(j, 128) -> (jr, tx);\n"
			 "  s2.rfactor(jr) -> r;\n"
			 "  s2.welford();\n"
			 "}\n",
			 "t.fus:12:3: error: welford() does not support rfactor: 's2' was split into 'r'\n");
	/* not computed at the same loop (s1 at y's row by default, s2 inside y's column loop) */
	tf_expect_errors(LAYERNORM_FUSION
			 "schedule ln {\n"
			 "  y.split(j, 128) -> (jr, tx);\n"
			 "  y.bind(i, blockIdx.x);\n"
			 "  y.bind(tx, threadIdx.x);\n"
			 "  s2.compute_at(y, jr);\n"
			 "  s2.welford();\n"
			 "}\n",
			 "t.fus:14:3: error: welford() needs 's1' and 's2' to be intermediates computed at "
			 "the same loop of the same tensor (compute_at)\n");
	/* different splits */
	tf_expect_errors(LAYERNORM_FUSION
			 "schedule ln {\n"
			 "  y.bind(i, blockIdx.x);\n"
			 "  s1.compute_at(y, i);\n"
			 "  s1.split(j, 128) -> (jr, tx);\n"
			 "  s1.bind(tx, threadIdx.x);\n"
			 "  s2.compute_at(y, i);\n"
			 "  s2.welford();\n"
			 "}\n",
			 "t.fus:15:3: error: welford() needs 's1' and 's2' to have the same loops (the same "
			 "splits, in the same order, and bindings of their reduction axes): 's1' has "
			 "[i = y.i, jr: ceildiv(N, 128), tx: 128 threadIdx.x], 's2' has [i = y.i, j: N]\n");
	/* twice */
	tf_expect_errors(LAYERNORM_FUSION
			 "schedule ln {\n"
			 "  s2.welford();\n"
			 "  s2.welford();\n"
			 "}\n",
			 "t.fus:11:3: error: welford() is already applied to 's2'\n");
}
END_TEST

/* ---- the count: any product of the reduced extents ------------------------------------------ */

/* Layernorm over the last two indices of x: f32[M, A, B] with the mean written s1[i] MEAN. */
static char *count_src(const char *a, const char *b, const char *mean)
{
	Buf t = {0};
	buf_printf(&t,
		   "fusion ln(x: f32[M, %s, %s]) -> (y: f32[M, %s, %s]) {\n"
		   "  s1[i] = sum(p, q: x[i, p, q]);\n"
		   "  mn[i] = s1[i]%s;\n"
		   "  s2[i] = sum(p, q: (x[i, p, q] - mn[i]) * (x[i, p, q] - mn[i]));\n"
		   "  y[i, p, q] = (x[i, p, q] - mn[i]) * rsqrt(s2[i]%s + 0.00001);\n"
		   "}\n"
		   "schedule ln {\n"
		   "  y.bind(i, blockIdx.x);\n"
		   "  s1.compute_at(y, i);  s1.merge(p, q) -> c;  s1.split(c, 64) -> (jr, tx);\n"
		   "  s1.bind(tx, threadIdx.x);\n"
		   "  s2.compute_at(y, i);  s2.merge(p, q) -> c;  s2.split(c, 64) -> (jr, tx);\n"
		   "  s2.bind(tx, threadIdx.x);\n"
		   "  s2.welford();\n"
		   "}\n",
		   a, b, a, b, mean, mean);
	char *r = strdup(t.s);
	buf_free(&t);
	return r;
}

/* welford() takes a mean divided by any product of the reduced extents (symbols in any
 * order, repeated, constants, several divisions in turn, casts) and refuses any other
 * divisor; the accepted ones compute the same values as the two passes in the simulator. */
START_TEST(test_welford_counts)
{
	static const struct {
		const char *a, *b, *mean, *dims;
		bool ok;
	} cases[] = {
		{"H", "W", " / (H * W)", "M=3,H=5,W=7", true},
		{"H", "W", " / (W * H)", "M=3,H=5,W=7", true},
		{"H", "W", " / H / W", "M=3,H=5,W=7", true},
		{"H", "W", " * (1.0 / f32(H * W))", "M=3,H=5,W=7", true},
		{"N", "N", " / (N * N)", "M=3,N=9", true},
		{"4", "N", " / (N * 4)", "M=2,N=67", true},
		{"4", "N", " / (2 * N * 2)", "M=2,N=67", true},
		{"64", "64", " / 4096", "M=2", true},
		{"64", "64", " / 4096.0", "M=2", true},
		{"64", "64", " / (64 * 64)", "M=2", true},
		{"H", "W", " / H", NULL, false},
		{"H", "W", " / (H * H)", NULL, false},
		{"H", "W", " / (H * W * 2)", NULL, false},
		{"H", "W", " / (H * W - 1)", NULL, false},
		{"N", "N", " / N", NULL, false},
		{"4", "N", " / N", NULL, false},
		{"64", "64", " / 4095", NULL, false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *src = count_src(cases[i].a, cases[i].b, cases[i].mean);
		if (!cases[i].ok) {
			tf_expect_errors(src, "t.fus:13:3: error: welford() needs the mean to divide 's1' "
					      "by the number of elements it sums (the product of its "
					      "reduced extents)\n");
			free(src);
			continue;
		}
		TestCompile *tc = tc_lowered(src);
		char *fir = tc_fusion_ir(tc, 0);
		ck_assert_contains(fir, "welford(s1)\n");
		Kernel *k = tc->kernels[0];
		ck_assert_int_eq(count_block_reduces(k->body, RED_WELFORD), 1);
		ck_assert_int_eq(count_block_reduces(k->body, RED_SUM), 0);
		ck_assert_int_eq(passes_over(k->body, k->fusion->inputs[0]), 2);
		expect_sim(k, cases[i].dims);
		free(fir);
		free(src);
		tc_free(tc);
	}
}
END_TEST

/* The automatic schedule of a layernorm over (H, W) (bench/users/layernorm_hw.fus: the mean
 * divides by H * W) takes welford() where the collapsed row is not persistent (H * W <=
 * 65536): x read twice, not three times; the simulator agrees on both sides of the bounds. */
START_TEST(test_auto_welford_product)
{
	TestCompile *tc = tc_compile("fusion ln(x: f32[B, C, H, W]) -> (y: f32[B, C, H, W]) {\n"
				     "  mean[b, c] = sum(i, j: x[b, c, i, j]) / (H * W);\n"
				     "  d[b, c, i, j] = x[b, c, i, j] - mean[b, c];\n"
				     "  rstd[b, c] = rsqrt(sum(i, j: d[b, c, i, j] * d[b, c, i, j]) / (H * W) + 0.00001);\n"
				     "  y[b, c, i, j] = d[b, c, i, j] * rstd[b, c];\n"
				     "}\n",
				     true);
	ck_assert_ptr_nonnull(tc->kernels);
	Kernel *big = tc_variant(tc, "ln_kernel_H_W65536"), *reg = tc_variant(tc, "ln_kernel_H_W16384");
	Tensor *x = big->fusion->inputs[0];
	ck_assert_int_eq(count_block_reduces(big->body, RED_WELFORD), 1);
	ck_assert_int_eq(count_block_reduces(big->body, RED_SUM), 0);
	ck_assert_int_eq(passes_over(big->body, x), 2);
	ck_assert_int_eq(count_block_reduces(reg->body, RED_WELFORD), 0); /* persistent */
	static const char *const dims[][2] = {
		{"B=1,C=2,H=129,W=128", "ln_kernel_H_W65536"},
		{"B=1,C=2,H=128,W=129", "ln_kernel_H_W65536_scalar"},
		{"B=1,C=2,H=160,W=100", "ln_kernel_H_W16384"},
		{"B=2,C=1,H=256,W=256", "ln_kernel_H_W65536"},
		{"B=1,C=1,H=1,W=16385", "ln_kernel_H_W65536_scalar"},
		{"B=1,C=2,H=7,W=63", "ln_kernel_H_W1024_scalar"},
	};
	for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
		ck_assert_str_eq(expect_sim_picked(tc->kernels[0], dims[i][0])->name, dims[i][1]);
	tc_free(tc);
}
END_TEST

/* ---- online(): softmax and logsumexp ------------------------------------------------------ */

#define SOFTMAX_FUSION                                      \
	"fusion sm(x: f32[M, N]) -> (y: f32[M, N]) {\n"     \
	"  m[i]    = max(j: x[i, j]);\n"                    \
	"  e[i, j] = exp(x[i, j] - m[i]);\n"                \
	"  s[i]    = sum(j: e[i, j]);\n"                    \
	"  y[i, j] = e[i, j] / s[i];\n"                     \
	"}\n"
#define LSE_FUSION                                                  \
	"fusion lse(x: f32[M, N]) -> (l: f32[M]) {\n"               \
	"  m[i] = max(j: x[i, j]);\n"                               \
	"  l[i] = m[i] + log(sum(j: exp(x[i, j] - m[i])));\n"       \
	"}\n"

/* Schedules of softmax (anchor y) for each combination layout; %s is the sum's name. */
static const char *const online_schedules[] = {
	/* 128 threads: warp shuffles, then 4 warps through shared memory (BR_WARPS) */
	"  Y.bind(i, blockIdx.x);\n"
	"  m.compute_at(Y, i); m.split(j, 128) -> (jr, tx); m.bind(tx, threadIdx.x);\n"
	"  S.compute_at(Y, i); S.split(j, 128) -> (jr, tx); S.bind(tx, threadIdx.x);\n",
	/* one warp: shuffles only (BR_WARP) */
	"  Y.bind(i, blockIdx.x);\n"
	"  m.compute_at(Y, i); m.split(j, 32) -> (jr, tx); m.bind(tx, threadIdx.x);\n"
	"  S.compute_at(Y, i); S.split(j, 32) -> (jr, tx); S.bind(tx, threadIdx.x);\n",
	/* 48 threads: every pair through shared memory (BR_SMEM) */
	"  Y.bind(i, blockIdx.x);\n"
	"  m.compute_at(Y, i); m.split(j, 48) -> (jr, tx); m.bind(tx, threadIdx.x);\n"
	"  S.compute_at(Y, i); S.split(j, 48) -> (jr, tx); S.bind(tx, threadIdx.x);\n",
	/* one thread per row: the serial update only */
	"  Y.split(i, 64) -> (bx, tx); Y.bind(bx, blockIdx.x); Y.bind(tx, threadIdx.x);\n"
	"  m.compute_at(Y, tx);\n"
	"  S.compute_at(Y, tx);\n",
};

static const BlockReduceKind online_kinds[] = {BR_WARPS, BR_WARP, BR_SMEM, BR_WARP};

/* fusion + schedule `sched` with Y the anchor and S the sum, online() or not. */
static char *online_src(const char *fusion, const char *anchor, const char *sum, int sched,
			bool online)
{
	Buf b = {0};
	buf_printf(&b, "%sschedule %s {\n", fusion, strncmp(fusion, "fusion sm", 9) ? "lse" : "sm");
	for (const char *p = online_schedules[sched]; *p; p++) {
		if (*p == 'Y')
			buf_puts(&b, anchor);
		else if (*p == 'S')
			buf_puts(&b, sum);
		else
			buf_printf(&b, "%c", *p);
	}
	if (online)
		buf_printf(&b, "  %s.online();\n", sum);
	buf_puts(&b, "}\n");
	return b.s;
}

START_TEST(test_softmax_online_passes)
{
	char *src1 = online_src(SOFTMAX_FUSION, "y", "s", 0, true);
	char *src3 = online_src(SOFTMAX_FUSION, "y", "s", 0, false);
	char *lse1 = online_src(LSE_FUSION, "l", "l_sum0", 0, true);
	char *lse2 = online_src(LSE_FUSION, "l", "l_sum0", 0, false);
	TestCompile *one = tc_lowered(src1), *three = tc_lowered(src3);
	TestCompile *l1 = tc_lowered(lse1), *l2 = tc_lowered(lse2);
	Kernel *k = one->kernels[0];
	/* softmax: x read by the statistics and the output; logsumexp: once */
	ck_assert_int_eq(passes_over(three->kernels[0]->body, three->prog->fusions[0]->inputs[0]), 3);
	ck_assert_int_eq(passes_over(k->body, one->prog->fusions[0]->inputs[0]), 2);
	ck_assert_int_eq(passes_over(l2->kernels[0]->body, l2->prog->fusions[0]->inputs[0]), 2);
	ck_assert_int_eq(passes_over(l1->kernels[0]->body, l1->prog->fusions[0]->inputs[0]), 1);
	ck_assert_int_eq(count_block_reduces(k->body, RED_ONLINE), 1);
	ck_assert_int_eq(count_block_reduces(k->body, RED_MAX), 0);
	ck_assert_int_eq(count_block_reduces(k->body, RED_SUM), 0);
	ck_assert_int_eq(count_block_reduces(l1->kernels[0]->body, RED_ONLINE), 1);

	char *fir = tc_fusion_ir(one, 0);
	ck_assert_contains(fir, "tensor s: f32[M] intermediate local compute_at(y, 0) online(m)\n");
	free(fir);
	char *ir = tc_kernel_ir(one, 0);
	ck_assert_contains(ir,
		"  m_acc = -inf;\n"
		"  m_sum = 0.0;\n"
		"  for jr in [0, ceildiv(N, 128)) {\n"
		"    m_w = -inf;\n"
		"    m_c = 0.0;\n"
		"    if (blockIdx.x < M && jr * 128 + threadIdx.x < N) {\n"
		"      m_v = x[blockIdx.x * N + jr * 128 + threadIdx.x];\n"
		"      m_w = m_v;\n"
		"      m_c = 1.0;\n"
		"    }\n"
		"    m_take = m_w > m_acc || m_w != m_w;\n"
		"    m_lo = m_take ? m_acc : m_w;\n"
		"    m_acc = m_take ? m_w : m_acc;\n"
		"    m_q = exp(m_lo - m_acc);\n"
		"    m_e = m_lo == m_acc ? 1.0 : m_q;\n"
		"    m_sum = m_take ? m_sum * m_e + m_c : m_sum + m_c * m_e;\n"
		"  }\n"
		"  m_acc, m_sum = block_online(m_acc, m_sum over threadIdx.x);\n");
	ck_assert_contains(ir, "  // s computed at y.i\n  s[0] = m_sum;\n");
	ck_assert_int_eq(count_str(ir, "s_acc"), 0);
	free(ir);
	char *cu = tc_cuda(one);
	ck_assert_contains(cu, "struct __fus_red_online {");
	ck_assert_contains(cu, "  __fus_online_set(m_acc, m_sum, __fus_reduce_warps<__fus_red_online, "
			       "128, __fus_online<float>>(__fus_online<float>{m_acc, m_sum}));\n");
	free(cu);
	cu = tc_cuda(three);
	ck_assert_not_contains(cu, "__fus_online");
	free(cu);
	tc_assert_nvrtc(one);
	tc_assert_nvrtc(l1);
	tc_free(one);
	tc_free(three);
	tc_free(l1);
	tc_free(l2);
	free(src1);
	free(src3);
	free(lse1);
	free(lse2);
}
END_TEST

static Stmt *find_block_red(Stmt *s, ReduceOp red)
{
	for (; s; s = s->next) {
		if (s->kind == KS_BLOCK_REDUCE && s->block_red.red == red)
			return s;
		Stmt **lists[3], *f = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !f; i++)
			f = find_block_red(*lists[i], red);
		if (f)
			return f;
	}
	return NULL;
}

/* Every layout against the reference: rows no split divides, shorter than a warp, one
 * element, empty rows (the identity: logsumexp of nothing is -inf) and no rows. */
START_TEST(test_online_layouts)
{
	static const char *const dims[] = {"M=3,N=1000", "M=9,N=67", "M=2,N=5",
					   "M=2,N=1",    "M=2,N=0",  "M=0,N=5"};
	for (int f = 0; f < 2; f++) {
		char *src = f ? online_src(LSE_FUSION, "l", "l_sum0", _i, true)
			      : online_src(SOFTMAX_FUSION, "y", "s", _i, true);
		TestCompile *tc = tc_lowered(src);
		Stmt *b = find_block_red(tc->kernels[0]->body, RED_ONLINE);
		if (_i < 3) {
			BlockReduceShape sh;
			ck_assert_ptr_nonnull(b);
			ck_assert(kir_block_reduce_shape(tc->kernels[0], b->block_red.pars, &sh));
			ck_assert_int_eq(sh.kind, online_kinds[_i]);
			tc_assert_nvrtc(tc);
		} else {
			ck_assert_ptr_null(b);
		}
		for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
			expect_sim(tc->kernels[0], dims[d]);
		tc_free(tc);
		free(src);
	}
}
END_TEST

/* logsumexp of rows that grow at every element (a rescale per step), start with -inf, are
 * all -inf (-inf, not the NaN of exp(-inf - -inf)), or hold a NaN. */
START_TEST(test_online_infinities)
{
	char *src = online_src(LSE_FUSION, "l", "l_sum0", _i, true);
	TestCompile *tc = tc_lowered(src);
	enum { M = 4, N = 300 };
	float *x = malloc(sizeof(float) * M * N), l[M];
	for (int j = 0; j < N; j++) {
		x[0 * N + j] = 0.05f * (float)j;
		x[1 * N + j] = j < N / 2 ? -INFINITY : (float)((j * 37) % 11) * 0.25f;
		x[2 * N + j] = -INFINITY;
		x[3 * N + j] = j == 100 ? NAN : 1.0f;
	}
	int64_t sizes[2] = {M, N};
	void *in[1] = {x}, *out[1] = {l};
	SimOptions o = {.seed = 1};
	SimResult r;
	ck_assert_msg(sim_run(tc->kernels[0], sizes, NULL, in, out, &o, &r), "%s",
		      r.error ? r.error : "");
	ck_assert_int_eq(r.nreports, 0);
	sim_result_free(&r);
	for (int i = 0; i < 2; i++) {
		double m = -INFINITY, q = 0;
		for (int j = 0; j < N; j++)
			m = x[i * N + j] > m ? x[i * N + j] : m;
		for (int j = 0; j < N; j++)
			q += exp((double)x[i * N + j] - m);
		double want = m + log(q);
		ck_assert_msg(fabs(l[i] - want) <= 1e-5 * fabs(want), "row %d: %.9g, want %.9g", i,
			      l[i], want);
	}
	ck_assert_msg(isinf(l[2]) && l[2] < 0, "an all -inf row: %g", l[2]);
	ck_assert_msg(isnan(l[3]), "a row with a NaN: %g", l[3]);
	free(x);
	tc_free(tc);
	free(src);
}
END_TEST

/* The comparison that `fusc check` makes catches an online update that forgets to rescale
 * the sum when the max grows (sum = sum + c instead of sum * exp(old - new) + c). */
static bool unscale(Stmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == KS_LET && strcmp(s->let.var->name, "m_sum") == 0 &&
		    s->let.value->kind == EX_SELECT) {
			IrExpr *grown = s->let.value->args[1];   /* sum * e + c */
			ck_assert_int_eq(grown->args[0]->op, OP_MUL);
			grown->args[0] = grown->args[0]->args[0]; /* sum + c */
			return true;
		}
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			if (unscale(*lists[i]))
				return true;
	}
	return false;
}

START_TEST(test_online_mutation_caught)
{
	char *src = online_src(SOFTMAX_FUSION, "y", "s", 0, true);
	TestCompile *tc = tc_lowered(src);
	ck_assert(sim_agrees(tc->kernels[0], "M=3,N=1000"));
	ck_assert(unscale(tc->kernels[0]->body));
	ck_assert(!sim_agrees(tc->kernels[0], "M=3,N=1000"));
	tc_free(tc);
	free(src);
}
END_TEST

#define ONLINE_FORM "m = max(j: X); s = sum(j: exp(X - m))"

START_TEST(test_online_errors)
{
	/* no exp */
	tf_expect_errors("fusion f(x: f32[M, N]) -> (y: f32[M]) {\n"
			 "  m[i] = max(j: x[i, j]);\n"
			 "  s[i] = sum(j: x[i, j] - m[i]);\n"
			 "  y[i] = s[i];\n"
			 "}\n"
			 "schedule f {\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:7:3: error: online() needs the body of 's' to be exp(X - m), with m the "
			 "max of X over the same row: " ONLINE_FORM "\n");
	/* a min, not a max */
	tf_expect_errors("fusion f(x: f32[M, N]) -> (y: f32[M]) {\n"
			 "  m[i] = min(j: x[i, j]);\n"
			 "  s[i] = sum(j: exp(x[i, j] - m[i]));\n"
			 "  y[i] = s[i];\n"
			 "}\n"
			 "schedule f {\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:7:3: error: online() needs the exponent in 's' to be X - m, where m is a "
			 "max read at the same row: " ONLINE_FORM "\n");
	/* the max of another value */
	tf_expect_errors("fusion f(x: f32[M, N]) -> (y: f32[M]) {\n"
			 "  m[i] = max(j: x[i, j]);\n"
			 "  s[i] = sum(j: exp(2.0 * x[i, j] - m[i]));\n"
			 "  y[i] = s[i];\n"
			 "}\n"
			 "schedule f {\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:7:3: error: online() needs the value from which the max is subtracted in "
			 "'s' to be the body of 'm' (the same expression X)\n");
	/* a max rounded to f16 when stored */
	tf_expect_errors("fusion f(x: f16[M, N]) -> (m: f16[M], y: f32[M]) {\n"
			 "  m[i] = max(j: x[i, j]);\n"
			 "  y[i] = log(sum(j: exp(x[i, j] - m[i])));\n"
			 "}\n"
			 "schedule f {\n"
			 "  y_sum0.online();\n"
			 "}\n",
			 "t.fus:6:3: error: online() needs 'm' to be a max of the dtype of 'y_sum0' "
			 "(f32), kept unrounded, over as many indices\n");
	/* one max, two sums */
	tf_expect_errors("fusion f(x: f32[M, N]) -> (y: f32[M]) {\n"
			 "  m[i] = max(j: x[i, j]);\n"
			 "  s[i] = sum(j: exp(x[i, j] - m[i]));\n"
			 "  t[i] = sum(j: exp(x[i, j] - m[i]));\n"
			 "  y[i] = s[i] * t[i];\n"
			 "}\n"
			 "schedule f {\n"
			 "  s.online();\n"
			 "  t.online();\n"
			 "}\n",
			 "t.fus:9:3: error: online() is already applied to 'm' with 's'\n");
	/* twice */
	tf_expect_errors(SOFTMAX_FUSION
			 "schedule sm {\n"
			 "  s.online();\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:9:3: error: online() is already applied to 's'\n");
	/* rfactor */
	tf_expect_errors(SOFTMAX_FUSION
			 "schedule sm {\n"
			 "  s.split(j, 128) -> (jr, tx);\n"
			 "  s.rfactor(jr) -> r;\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:10:3: error: online() does not support rfactor: 's' was split into 'r'\n");
	/* different loops */
	tf_expect_errors(SOFTMAX_FUSION
			 "schedule sm {\n"
			 "  y.bind(i, blockIdx.x);\n"
			 "  m.compute_at(y, i);\n"
			 "  m.split(j, 128) -> (jr, tx);\n"
			 "  m.bind(tx, threadIdx.x);\n"
			 "  s.compute_at(y, i);\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:13:3: error: online() needs 'm' and 's' to have the same loops (the same "
			 "splits, in the same order, and bindings of their reduction axes): 'm' has "
			 "[i = y.i, jr: ceildiv(N, 128), tx: 128 threadIdx.x], 's' has [i = y.i, j: N]\n");
	/* a grid reduction */
	tf_expect_errors(SOFTMAX_FUSION
			 "schedule sm {\n"
			 "  y.bind(i, blockIdx.x);\n"
			 "  m.compute_at(y, i);\n"
			 "  m.split(j, 128) -> (jr, tx);\n"
			 "  m.bind(jr, blockIdx.y);\n"
			 "  s.compute_at(y, i);\n"
			 "  s.split(j, 128) -> (jr, tx);\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:14:3: error: online() does not support grid reductions: reduction axis "
			 "'jr' of 'm' is bound to blockIdx.y; bind it to threadIdx.* or leave it serial\n");
	/* not at the same loop */
	tf_expect_errors(SOFTMAX_FUSION
			 "schedule sm {\n"
			 "  y.split(j, 128) -> (jr, tx);\n"
			 "  y.bind(i, blockIdx.x);\n"
			 "  y.bind(tx, threadIdx.x);\n"
			 "  s.compute_at(y, jr);\n"
			 "  s.online();\n"
			 "}\n",
			 "t.fus:12:3: error: online() needs 'm' and 's' to be intermediates computed at "
			 "the same loop of the same tensor (compute_at)\n");
}
END_TEST

/* The automatic scheduler: online() where the row is read from memory by each pass (the N <=
 * 65536 bucket), not where it is kept in registers (N <= 16384), except logsumexp, whose row
 * only the pair reads: one online pass from 4096 on (auto_schedule.c, row_read_once); for
 * layernorm welford() there instead: the row is read twice (statistics, output), not three
 * times. */
START_TEST(test_auto_online)
{
	static const char *const srcs[] = {SOFTMAX_FUSION, LSE_FUSION, LAYERNORM_FUSION};
	static const char *const names[] = {"sm", "lse", "ln"};
	for (int f = 0; f < 3; f++) {
		TestCompile *tc = tc_compile(srcs[f], true);
		ck_assert_ptr_nonnull(tc->kernels);
		char *big = tc_variant_ir(tc, arena_printf(tc->arena, "%s_kernel_N65536", names[f]));
		char *reg = tc_variant_ir(tc, arena_printf(tc->arena, "%s_kernel_N16384", names[f]));
		ck_assert_int_eq(count_str(big, "block_online"), f < 2);
		ck_assert_int_eq(count_str(reg, "block_online"), f == 1);
		ck_assert_int_eq(count_str(big, "block_welford"), f == 2);
		ck_assert_int_eq(count_str(reg, "block_welford"), 0);
		Kernel *k = tc_variant(tc, arena_printf(tc->arena, "%s_kernel_N65536", names[f]));
		ck_assert_int_eq(passes_over(k->body, k->fusion->inputs[0]), f == 0 ? 2 : f);
		free(big);
		free(reg);
		tc_free(tc);
	}
}
END_TEST

Suite *welford_suite(void)
{
	Suite *s = suite_create("welford");
	TCase *tc = tcase_create("welford");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_layernorm_one_pass);
	tcase_add_loop_test(tc, test_large_mean_small_variance, 0,
			    (int)(sizeof mv_schedules / sizeof mv_schedules[0]));
	tcase_add_test(tc, test_same_as_two_pass);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_welford_counts);
	tcase_add_test(tc, test_auto_welford_product);
	suite_add_tcase(s, tc);
	TCase *on = tcase_create("online");
	tcase_set_timeout(on, 60);
	tcase_add_test(on, test_softmax_online_passes);
	tcase_add_loop_test(on, test_online_layouts, 0,
			    (int)(sizeof online_schedules / sizeof online_schedules[0]));
	tcase_add_loop_test(on, test_online_infinities, 0,
			    (int)(sizeof online_schedules / sizeof online_schedules[0]));
	tcase_add_test(on, test_online_mutation_caught);
	tcase_add_test(on, test_online_errors);
	tcase_add_test(on, test_auto_online);
	suite_add_tcase(s, on);
	return s;
}
