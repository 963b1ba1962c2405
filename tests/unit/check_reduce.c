/* check_reduce.c: reductions (docs/reductions.md): block reductions (KS_BLOCK_REDUCE),
 * rfactor, default placement of reductions at their reader, softmax / layernorm / RMSnorm.
 *
 * Each case checks the exact kernel IR lines that matter (the block reduction with its operator
 * and thread types, the store by thread 0, no barrier where none is needed), the CUDA helper
 * chosen, NVRTC compilation for sm_80 and sm_90, and the simulator's results against values
 * computed here (exact for sums of small integers, NaN/inf for max/min), at row lengths shorter
 * than a warp and not divisible by the block.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"
#include "tests/unit/testutil.h"

static int count_str(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* Runs kernel i of tc with the sizes, scalars, inputs and outputs given; asserts no report. */
/* Simulates kernel i as its launcher runs it: the first variant of its chain whose
 * preconditions hold (an automatic column sum's vector kernel needs N % 4 == 0). */
static void sim_ok(TestCompile *tc, int i, const int64_t *sizes, const double *scalars,
		   void **in, void **out)
{
	SimOptions o = {.seed = 1};
	SimResult r;
	Kernel *k = kernel_pick(tc->kernels[i], sizes, NULL);
	ck_assert_msg(k != NULL, "the launcher refuses the sizes");
	ck_assert_msg(sim_run(k, sizes, scalars, in, out, &o, &r), "%s",
		      r.error ? r.error : "");
	tc_assert_no_reports(tc, &r);
}

static float small_int(int64_t i, int64_t j)
{
	return (float)((i * 7 + j * 3) % 5 - 2);
}

/* ---- row sum over a block ---------------------------------------------------------------- */

static const char row_sum_src[] =
	"fusion row_sum(x: f32[M, N]) -> (s: f32[M]) {\n"
	"  s[i] = sum(j: x[i, j]);\n"
	"}\n"
	"schedule row_sum {\n"
	"  s.bind(i, blockIdx.x);\n"
	"  s.split(j, 128) -> (jo, jt);\n"
	"  s.bind(jt, threadIdx.x);\n"
	"}\n";

/* s[i] over rows of small integers: exact whatever the order. */
static void check_row_sums(TestCompile *tc, int64_t m, int64_t n)
{
	float *x = malloc(sizeof(float) * (size_t)(m * n)), *s = malloc(sizeof(float) * (size_t)m);
	int64_t sizes[2] = {m, n};
	void *in[1] = {x}, *out[1] = {s};
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++)
			x[i * n + j] = small_int(i, j);
	sim_ok(tc, 0, sizes, NULL, in, out);
	for (int64_t i = 0; i < m; i++) {
		float want = 0;
		for (int64_t j = 0; j < n; j++)
			want += x[i * n + j];
		ck_assert_msg(s[i] == want, "N=%lld s[%lld] = %g, want %g", (long long)n,
			      (long long)i, s[i], want);
	}
	free(x);
	free(s);
}

/* A total beside per-row outputs in one kernel: with M = 0 the rows launch no block, but the
 * total (not bound to blockIdx.x) still needs one to store its identity: the grid is max(M, 1). */
START_TEST(test_total_beside_empty_rows)
{
	TestCompile *tc = tc_lowered("fusion rt(x: f32[M, N]) -> (v: f32[M], tot: f32) {\n"
				     "  v[i] = sum(j: x[i, j]);\n"
				     "  tot = sum(i, j: x[i, j]);\n"
				     "}\n"
				     "schedule rt {\n"
				     "  v.bind(i, blockIdx.x);\n"
				     "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "grid(max(M, 1))");
	free(ir);
	int64_t sizes[2] = {0, 5};
	float x[1] = {0}, v[1] = {7}, tot[1] = {7};
	void *in[1] = {x}, *out[2] = {v, tot};
	sim_ok(tc, 0, sizes, NULL, in, out);
	ck_assert_float_eq(tot[0], 0.0f);
	ck_assert_float_eq(v[0], 7.0f); /* no row: v untouched */
	tc_free(tc);
}
END_TEST

START_TEST(test_row_sum_block)
{
	TestCompile *tc = tc_lowered(row_sum_src);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "kernel row_sum_kernel grid(M) block(128) {\n");
	ck_assert_contains(ir, "  s_acc = block_reduce_sum(s_acc over threadIdx.x);\n"
			       "  if (blockIdx.x < M && threadIdx.x == 0) {\n"
			       "    s[blockIdx.x] = s_acc;\n");
	ck_assert_not_contains(ir, "__syncthreads");
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "s_acc = __fus_reduce_warps<__fus_red_sum, 128, float>(s_acc);");
	tc_assert_nvrtc(tc);
	int64_t ns[] = {1, 5, 67, 128, 300};
	for (int i = 0; i < 5; i++)
		check_row_sums(tc, 3, ns[i]);
	free(ir);
	free(cu);
	tc_free(tc);
}
END_TEST

/* 48 threads: neither a power of 2 nor a multiple of 32: the shared-memory helper. */
START_TEST(test_row_sum_smem_helper)
{
	char *src = strdup(row_sum_src);
	memcpy(strstr(src, "128"), "048", 3);
	TestCompile *tc = tc_lowered(src);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "s_acc = __fus_reduce_smem<__fus_red_sum, 48, 1, 48, float>(s_acc);");
	tc_assert_nvrtc(tc);
	int64_t ns[] = {1, 47, 49, 100};
	for (int i = 0; i < 4; i++)
		check_row_sums(tc, 2, ns[i]);
	free(cu);
	free(src);
	tc_free(tc);
}
END_TEST

/* ---- row max: NaN and infinities --------------------------------------------------------- */

START_TEST(test_row_max_nan)
{
	TestCompile *tc = tc_lowered("fusion row_max(x: f32[M, N]) -> (m: f32[M]) {\n"
				  "  m[i] = max(j: x[i, j]);\n"
				  "}\n"
				  "schedule row_max {\n"
				  "  m.bind(i, blockIdx.x);\n"
				  "  m.split(j, 32) -> (jo, jt);\n"
				  "  m.bind(jt, threadIdx.x);\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  m_acc = block_reduce_max(m_acc over threadIdx.x);\n");
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "m_acc = __fus_reduce_warp<__fus_red_max, 32, 32, float>(m_acc);");
	tc_assert_nvrtc(tc);
	int64_t ns[] = {5, 32, 67};
	for (int c = 0; c < 3; c++) {
		int64_t n = ns[c], sizes[2] = {4, n};
		float *x = malloc(sizeof(float) * (size_t)(4 * n)), m[4];
		void *in[1] = {x}, *out[1] = {m};
		for (int64_t j = 0; j < n; j++) {
			x[j] = -INFINITY;                        /* row 0: all -inf */
			x[n + j] = (float)j;                     /* row 1: a NaN in the middle */
			x[2 * n + j] = j == n - 1 ? INFINITY : 1; /* row 2: +inf last */
			x[3 * n + j] = (float)(-j);              /* row 3: max at j = 0 */
		}
		x[n + n / 2] = NAN;
		sim_ok(tc, 0, sizes, NULL, in, out);
		ck_assert(isinf(m[0]) && m[0] < 0);
		ck_assert_msg(isnan(m[1]), "N=%lld: NaN lost: %g", (long long)n, m[1]);
		ck_assert(isinf(m[2]) && m[2] > 0);
		ck_assert_float_eq(m[3], 0.0f);
		free(x);
	}
	free(ir);
	free(cu);
	tc_free(tc);
}
END_TEST

/* 16 threads a row and 8 rows a block (threadIdx.y): shuffles within half-warps. */
START_TEST(test_row_min_half_warp)
{
	TestCompile *tc = tc_lowered("fusion row_min(x: f32[M, N]) -> (m: f32[M]) {\n"
				  "  m[i] = min(j: x[i, j]);\n"
				  "}\n"
				  "schedule row_min {\n"
				  "  m.split(i, 8) -> (io, ii);\n"
				  "  m.bind(io, blockIdx.x);\n"
				  "  m.bind(ii, threadIdx.y);\n"
				  "  m.split(j, 16) -> (jo, jt);\n"
				  "  m.bind(jt, threadIdx.x);\n"
				  "}\n");
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "m_acc = __fus_reduce_warp<__fus_red_min, 16, 128, float>(m_acc);");
	tc_assert_nvrtc(tc);
	int64_t mrows = 11, n = 21, sizes[2] = {mrows, n};
	float x[11 * 21], m[11];
	void *in[1] = {x}, *out[1] = {m};
	for (int64_t i = 0; i < mrows; i++)
		for (int64_t j = 0; j < n; j++)
			x[i * n + j] = (float)((j * 5 + i) % n) - (float)i;
	x[3 * n + 7] = NAN;
	sim_ok(tc, 0, sizes, NULL, in, out);
	for (int64_t i = 0; i < mrows; i++) {
		if (i == 3)
			ck_assert(isnan(m[i]));
		else
			ck_assert_float_eq(m[i], (float)-i);
	}
	free(cu);
	tc_free(tc);
}
END_TEST

/* ---- column sums: serial, and over threadIdx.y ------------------------------------------ */

static void check_col_sums(TestCompile *tc, int64_t mrows, int64_t n)
{
	float *x = malloc(sizeof(float) * (size_t)(mrows * n)), *s = malloc(sizeof(float) * (size_t)n);
	int64_t sizes[2] = {mrows, n};
	void *in[1] = {x}, *out[1] = {s};
	for (int64_t i = 0; i < mrows * n; i++)
		x[i] = small_int(i / n, i % n);
	sim_ok(tc, 0, sizes, NULL, in, out);
	for (int64_t j = 0; j < n; j++) {
		float want = 0;
		for (int64_t i = 0; i < mrows; i++)
			want += x[i * n + j];
		ck_assert_msg(s[j] == want, "s[%lld] = %g, want %g", (long long)j, s[j], want);
	}
	free(x);
	free(s);
}

START_TEST(test_col_sum_serial)
{
	TestCompile *tc = tc_lowered("fusion col_sum(x: f32[M, N]) -> (s: f32[N]) {\n"
				  "  s[j] = sum(i: x[i, j]);\n"
				  "}\n"
				  "schedule col_sum {\n"
				  "  s.split(j, 64) -> (jo, jt);\n"
				  "  s.bind(jo, blockIdx.x);\n"
				  "  s.bind(jt, threadIdx.x);\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_not_contains(ir, "block_reduce");
	ck_assert_contains(ir, "  for i in [0, M) {\n");
	tc_assert_nvrtc(tc);
	check_col_sums(tc, 1, 5);
	check_col_sums(tc, 67, 67);
	check_col_sums(tc, 3, 130);
	free(ir);
	tc_free(tc);
}
END_TEST

START_TEST(test_col_sum_threads_y)
{
	TestCompile *tc = tc_lowered("fusion col_sum(x: f32[M, N]) -> (s: f32[N]) {\n"
				  "  s[j] = sum(i: x[i, j]);\n"
				  "}\n"
				  "schedule col_sum {\n"
				  "  s.split(j, 32) -> (jo, jt);\n"
				  "  s.bind(jo, blockIdx.x);\n"
				  "  s.bind(jt, threadIdx.x);\n"
				  "  s.split(i, 8) -> (io, it);\n"
				  "  s.bind(it, threadIdx.y);\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  s_acc = block_reduce_sum(s_acc over threadIdx.y);\n"
			       "  if (blockIdx.x * 32 + threadIdx.x < N && threadIdx.y == 0) {\n");
	char *cu = tc_cuda(tc);
	/* groups strided by 32 (one per column): the shared-memory helper */
	ck_assert_contains(cu, "__fus_reduce_smem<__fus_red_sum, 8, 32, 256, float>(s_acc);");
	tc_assert_nvrtc(tc);
	check_col_sums(tc, 1, 1);
	check_col_sums(tc, 67, 40);
	check_col_sums(tc, 9, 33);
	free(ir);
	free(cu);
	tc_free(tc);
}
END_TEST

/* ---- two reduction axes ------------------------------------------------------------------ */

START_TEST(test_two_reduction_axes)
{
	TestCompile *tc = tc_lowered("fusion sum2(x: f32[B, M, N]) -> (s: f32[B]) {\n"
				  "  s[b] = sum(i, j: x[b, i, j]);\n"
				  "}\n"
				  "schedule sum2 {\n"
				  "  s.bind(b, blockIdx.x);\n"
				  "  s.split(i, 4) -> (io, it);\n"
				  "  s.split(j, 32) -> (jo, jt);\n"
				  "  s.reorder(b, io, jo, it, jt);\n"
				  "  s.bind(it, threadIdx.y);\n"
				  "  s.bind(jt, threadIdx.x);\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  s_acc = block_reduce_sum(s_acc over threadIdx.x, threadIdx.y);\n"
			       "  if (blockIdx.x < B && (threadIdx.x == 0 && threadIdx.y == 0)) {\n");
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "__fus_reduce_warps<__fus_red_sum, 128, float>(s_acc);");
	tc_assert_nvrtc(tc);
	int64_t dims[][3] = {{2, 3, 5}, {3, 9, 70}};
	for (int c = 0; c < 2; c++) {
		int64_t b = dims[c][0], m = dims[c][1], n = dims[c][2], nel = b * m * n;
		float *x = malloc(sizeof(float) * (size_t)nel), s[3];
		void *in[1] = {x}, *out[1] = {s};
		for (int64_t e = 0; e < nel; e++)
			x[e] = small_int(e, e / 7);
		sim_ok(tc, 0, dims[c], NULL, in, out);
		for (int64_t q = 0; q < b; q++) {
			float want = 0;
			for (int64_t e = 0; e < m * n; e++)
				want += x[q * m * n + e];
			ck_assert_float_eq(s[q], want);
		}
		free(x);
	}
	free(ir);
	free(cu);
	tc_free(tc);
}
END_TEST

/* ---- rfactor ----------------------------------------------------------------------------- */

START_TEST(test_rfactor_serial_then_block)
{
	TestCompile *tc = tc_lowered("fusion row_sum(x: f32[M, N]) -> (s: f32[M]) {\n"
				  "  s[i] = sum(j: x[i, j]);\n"
				  "}\n"
				  "schedule row_sum {\n"
				  "  s.bind(i, blockIdx.x);\n"
				  "  s.split(j, 64) -> (jo, jt);\n"
				  "  s.bind(jt, threadIdx.x);\n"
				  "  s.rfactor(jo) -> r;\n"
				  "}\n");
	char *fir = tc_fusion_ir(tc, 0);
	ck_assert_contains(fir, "  tensor r: f32[M, 64] intermediate local compute_at(s, 1)\n"
				"    def r[i, jt] = sum(jo: jo * 64 + jt < N ? x[i, jo * 64 + jt] : 0.0)\n");
	ck_assert_contains(fir, "    def s[i] = sum(jt: r[i, jt])\n");
	char *ir = tc_kernel_ir(tc, 0);
	/* r: each thread's serial partial; s: the block reduction of the partials */
	ck_assert_contains(ir, "  r_acc = 0.0;\n  for jo in [0, ceildiv(N, 64)) {\n");
	ck_assert_contains(ir, "  s_acc = block_reduce_sum(s_acc over threadIdx.x);\n");
	ck_assert_int_eq(count_str(ir, "block_reduce"), 1);
	tc_assert_nvrtc(tc);
	int64_t ns[] = {1, 63, 65, 300};
	for (int i = 0; i < 4; i++)
		check_row_sums(tc, 3, ns[i]);
	free(fir);
	free(ir);
	tc_free(tc);
}
END_TEST

START_TEST(test_rfactor_block_then_serial)
{
	TestCompile *tc = tc_lowered("fusion row_max(x: f32[M, N]) -> (m: f32[M]) {\n"
				  "  m[i] = max(j: x[i, j]);\n"
				  "}\n"
				  "schedule row_max {\n"
				  "  m.bind(i, blockIdx.x);\n"
				  "  m.split(j, 32) -> (jo, jt);\n"
				  "  m.bind(jt, threadIdx.x);\n"
				  "  m.rfactor(jt) -> r;\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	/* a block max per chunk of 32 inside the serial loop over chunks */
	ck_assert_contains(ir, "  for jo in [0, ceildiv(N, 32)) {\n    alloc local f32 r[1];\n");
	ck_assert_contains(ir, "    r_acc = block_reduce_max(r_acc over threadIdx.x);\n");
	ck_assert_contains(ir, "  if (blockIdx.x < M && threadIdx.x == 0) {\n    m[blockIdx.x] = m_acc;\n");
	tc_assert_nvrtc(tc);
	int64_t n = 70, sizes[2] = {2, n};
	float x[140], m[2];
	void *in[1] = {x}, *out[1] = {m};
	for (int j = 0; j < n; j++) {
		x[j] = (float)(j % 13);
		x[n + j] = (float)j;
	}
	x[n + 69] = NAN;
	sim_ok(tc, 0, sizes, NULL, in, out);
	ck_assert_float_eq(m[0], 12.0f);
	ck_assert(isnan(m[1]));
	free(ir);
	tc_free(tc);
}
END_TEST

/* ---- normalizations ---------------------------------------------------------------------- */

static const char softmax_src[] =
	"fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
	"  m[i]    = max(j: x[i, j]);\n"
	"  e[i, j] = exp(x[i, j] - m[i]);\n"
	"  s[i]    = sum(j: e[i, j]);\n"
	"  y[i, j] = e[i, j] / s[i];\n"
	"}\n";

static void check_softmax(TestCompile *tc, int64_t mrows, int64_t n)
{
	float *x = malloc(sizeof(float) * (size_t)(mrows * n)), *y = malloc(sizeof(float) * (size_t)(mrows * n));
	int64_t sizes[2] = {mrows, n};
	void *in[1] = {x}, *out[1] = {y};
	for (int64_t e = 0; e < mrows * n; e++)
		x[e] = (float)((e * 37) % 23) / 4.0f - 3.0f;
	sim_ok(tc, 0, sizes, NULL, in, out);
	for (int64_t i = 0; i < mrows; i++) {
		double mx = -INFINITY, s = 0;
		for (int64_t j = 0; j < n; j++)
			mx = fmax(mx, x[i * n + j]);
		for (int64_t j = 0; j < n; j++)
			s += exp(x[i * n + j] - mx);
		for (int64_t j = 0; j < n; j++) {
			double want = exp(x[i * n + j] - mx) / s;
			ck_assert_msg(fabs(y[i * n + j] - want) <= 1e-5 * want + 1e-7,
				      "N=%lld y[%lld, %lld] = %g, want %g", (long long)n, (long long)i,
				      (long long)j, y[i * n + j], want);
		}
	}
	free(x);
	free(y);
}

START_TEST(test_softmax_block)
{
	Buf b = {0};
	buf_printf(&b, "%sschedule softmax {\n"
		       "  y.bind(i, blockIdx.x);\n  y.split(j, 128) -> (jo, jt);\n  y.bind(jt, threadIdx.x);\n"
		       "  m.split(j, 128) -> (jo, jt);\n  m.bind(jt, threadIdx.x);\n"
		       "  s.split(j, 128) -> (jo, jt);\n  s.bind(jt, threadIdx.x);\n}\n",
		   softmax_src);
	TestCompile *tc = tc_lowered(b.s);
	char *fir = tc_fusion_ir(tc, 0);
	/* placed at y's row loop by default */
	ck_assert_contains(fir, "  tensor m: f32[M] intermediate local compute_at(y, 0)\n");
	ck_assert_contains(fir, "  tensor s: f32[M] intermediate local compute_at(y, 0)\n");
	char *ir = tc_kernel_ir(tc, 0);
	/* m and s are registers: every thread stores its (defined) result, no predicate */
	ck_assert_contains(ir, "  m_acc = block_reduce_max(m_acc over threadIdx.x);\n"
			       "  m[0] = m_acc;\n");
	ck_assert_contains(ir, "  s_acc = block_reduce_sum(s_acc over threadIdx.x);\n"
			       "  s[0] = s_acc;\n");
	/* every thread of the row reads the results from its registers: no barrier, no smem */
	ck_assert_contains(ir, "= exp(x[blockIdx.x * N + jo_2 * 128 + threadIdx.x] - m[0]) / s[0];");
	ck_assert_not_contains(ir, "__syncthreads");
	ck_assert_not_contains(ir, "shared");
	tc_assert_nvrtc(tc);
	int64_t ns[] = {1, 5, 67, 128, 300};
	for (int i = 0; i < 5; i++)
		check_softmax(tc, 3, ns[i]);
	free(fir);
	free(ir);
	buf_free(&b);
	tc_free(tc);
}
END_TEST

/* The row in registers: x is read once; m, s and y read each thread's own elements. */
START_TEST(test_softmax_persistent)
{
	TestCompile *tc = tc_lowered("fusion softmax(x: f32[M, 100]) -> (y: f32[M, 100]) {\n"
				  "  m[i]    = max(j: x[i, j]);\n"
				  "  e[i, j] = exp(x[i, j] - m[i]);\n"
				  "  s[i]    = sum(j: e[i, j]);\n"
				  "  y[i, j] = e[i, j] / s[i];\n"
				  "}\n"
				  "schedule softmax {\n"
				  "  xl = x.cache_after(local);\n"
				  "  xl.compute_at(y, i);\n"
				  "  xl.split(j, 32) -> (jo, jt);\n"
				  "  xl.bind(jt, threadIdx.x);\n"
				  "  y.bind(i, blockIdx.x);\n"
				  "  y.split(j, 32) -> (jo, jt);\n"
				  "  y.bind(jt, threadIdx.x);\n"
				  "  m.split(j, 32) -> (jo, jt);\n"
				  "  m.bind(jt, threadIdx.x);\n"
				  "  s.split(j, 32) -> (jo, jt);\n"
				  "  s.bind(jt, threadIdx.x);\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  alloc local f32 xl[4];\n");
	ck_assert_int_eq(count_str(ir, "x["), 1);
	ck_assert_contains(ir, "      m_v = xl[jo_1];\n");
	ck_assert_not_contains(ir, "__syncthreads");
	ck_assert_not_contains(ir, "shared");
	tc_assert_nvrtc(tc);
	check_softmax(tc, 3, 100);
	free(ir);
	tc_free(tc);
}
END_TEST

START_TEST(test_layernorm_block)
{
	TestCompile *tc = tc_lowered(
		"fusion ln(x: f32[M, N], g: f32[N], b: f32[N], eps: f32) -> (y: f32[M, N]) {\n"
		"  s1[i]   = sum(j: x[i, j]);\n"
		"  mean[i] = s1[i] / N;\n"
		"  d[i, j] = x[i, j] - mean[i];\n"
		"  s2[i]   = sum(j: d[i, j] * d[i, j]);\n"
		"  rstd[i] = rsqrt(s2[i] / N + eps);\n"
		"  y[i, j] = d[i, j] * rstd[i] * g[j] + b[j];\n"
		"}\n"
		"schedule ln {\n"
		"  y.bind(i, blockIdx.x);\n  y.split(j, 64) -> (jo, jt);\n  y.bind(jt, threadIdx.x);\n"
		"  s1.split(j, 64) -> (jo, jt);\n  s1.bind(jt, threadIdx.x);\n"
		"  s2.split(j, 64) -> (jo, jt);\n  s2.bind(jt, threadIdx.x);\n"
		"}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  s1_acc = block_reduce_sum(s1_acc over threadIdx.x);\n");
	ck_assert_contains(ir, "  s2_acc = block_reduce_sum(s2_acc over threadIdx.x);\n");
	ck_assert_not_contains(ir, "__syncthreads");
	tc_assert_nvrtc(tc);
	int64_t ns[] = {1, 5, 67, 130};
	for (int c = 0; c < 4; c++) {
		int64_t mrows = 2, n = ns[c], sizes[2] = {mrows, n};
		float *x = malloc(sizeof(float) * (size_t)(mrows * n)), *y = malloc(sizeof(float) * (size_t)(mrows * n));
		float *g = malloc(sizeof(float) * (size_t)n), *bb = malloc(sizeof(float) * (size_t)n);
		double eps = 1e-5;
		void *in[3] = {x, g, bb}, *out[1] = {y};
		for (int64_t e = 0; e < mrows * n; e++)
			x[e] = (float)((e * 13) % 17) / 8.0f;
		for (int64_t j = 0; j < n; j++) {
			g[j] = 1.0f + (float)(j % 3) / 4.0f;
			bb[j] = (float)(j % 5) / 8.0f;
		}
		sim_ok(tc, 0, sizes, &eps, in, out);
		for (int64_t i = 0; i < mrows; i++) {
			double mu = 0, var = 0;
			for (int64_t j = 0; j < n; j++)
				mu += x[i * n + j];
			mu /= (double)n;
			for (int64_t j = 0; j < n; j++)
				var += (x[i * n + j] - mu) * (x[i * n + j] - mu);
			double rstd = 1.0 / sqrt(var / (double)n + eps);
			for (int64_t j = 0; j < n; j++) {
				double want = (x[i * n + j] - mu) * rstd * g[j] + bb[j];
				ck_assert_msg(fabs(y[i * n + j] - want) <= 1e-4 * (1 + fabs(want)),
					      "N=%lld y[%lld, %lld] = %g, want %g", (long long)n,
					      (long long)i, (long long)j, y[i * n + j], want);
			}
		}
		free(x);
		free(y);
		free(g);
		free(bb);
	}
	free(ir);
	tc_free(tc);
}
END_TEST

/* RMSnorm with the row kept in registers, four rows a block. */
START_TEST(test_rmsnorm_persistent)
{
	TestCompile *tc = tc_lowered("fusion rms(x: f32[M, 90], w: f32[90], eps: f32) -> (y: f32[M, 90]) {\n"
				  "  ss[i]   = sum(j: x[i, j] * x[i, j]);\n"
				  "  r[i]    = rsqrt(ss[i] / 90.0 + eps);\n"
				  "  y[i, j] = x[i, j] * r[i] * w[j];\n"
				  "}\n"
				  "schedule rms {\n"
				  "  xl = x.cache_after(local);\n"
				  "  y.split(i, 4) -> (io, ii);\n"
				  "  y.bind(io, blockIdx.x);\n"
				  "  y.bind(ii, threadIdx.y);\n"
				  "  xl.compute_at(y, ii);\n"
				  "  xl.split(j, 32) -> (jo, jt);\n"
				  "  xl.bind(jt, threadIdx.x);\n"
				  "  y.split(j, 32) -> (jo, jt);\n"
				  "  y.bind(jt, threadIdx.x);\n"
				  "  ss.split(j, 32) -> (jo, jt);\n"
				  "  ss.bind(jt, threadIdx.x);\n"
				  "}\n");
	char *fir = tc_fusion_ir(tc, 0);
	ck_assert_contains(fir, "  tensor ss: f32[M] intermediate local compute_at(y, 1)\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  ss_acc = block_reduce_sum(ss_acc over threadIdx.x);\n");
	ck_assert_int_eq(count_str(ir, "x["), 1);
	ck_assert_not_contains(ir, "__syncthreads");
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "__fus_reduce_warp<__fus_red_sum, 32, 128, float>(ss_acc);");
	tc_assert_nvrtc(tc);
	int64_t mrows = 7, n = 90, sizes[1] = {mrows};
	float x[7 * 90], w[90], y[7 * 90];
	double eps = 1e-6;
	void *in[2] = {x, w}, *out[1] = {y};
	for (int64_t e = 0; e < mrows * n; e++)
		x[e] = (float)((e * 11) % 19) / 4.0f - 2.0f;
	for (int64_t j = 0; j < n; j++)
		w[j] = 0.5f + (float)(j % 7) / 7.0f;
	sim_ok(tc, 0, sizes, &eps, in, out);
	for (int64_t i = 0; i < mrows; i++) {
		double ss = 0;
		for (int64_t j = 0; j < n; j++)
			ss += (double)x[i * n + j] * x[i * n + j];
		double r = 1.0 / sqrt(ss / 90.0 + eps);
		for (int64_t j = 0; j < n; j++) {
			double want = x[i * n + j] * r * w[j];
			ck_assert_msg(fabs(y[i * n + j] - want) <= 1e-5 * (1 + fabs(want)),
				      "y[%lld, %lld] = %g, want %g", (long long)i, (long long)j,
				      y[i * n + j], want);
		}
	}
	free(fir);
	free(ir);
	free(cu);
	tc_free(tc);
}
END_TEST

/* ---- semantics and errors ----------------------------------------------------------------- */

START_TEST(test_block_reduce_shape)
{
	Arena *a = arena_new();
	Kernel k = {.arena = a};
	BlockReduceShape sh;
	unsigned x = 1u << PT_TIDX, y = 1u << PT_TIDY, z = 1u << PT_TIDZ;
	k.launch[PT_TIDX] = ir_int(a, 32);
	k.launch[PT_TIDY] = ir_int(a, 4);
	ck_assert(kir_block_reduce_shape(&k, y, &sh));
	ck_assert(sh.kind == BR_SMEM && sh.count == 4 && sh.stride == 32 && sh.nthreads == 128);
	ck_assert(kir_block_reduce_shape(&k, x | y, &sh));
	ck_assert(sh.kind == BR_WARPS && sh.count == 128 && sh.stride == 1);
	k.launch[PT_TIDX] = ir_int(a, 8);
	ck_assert(kir_block_reduce_shape(&k, x, &sh));
	ck_assert(sh.kind == BR_WARP && sh.count == 8 && sh.nthreads == 32);
	k.launch[PT_TIDZ] = ir_int(a, 2);
	ck_assert(!kir_block_reduce_shape(&k, x | z, &sh)); /* y lies between */
	k.launch[PT_TIDY] = NULL;                           /* y not launched: consecutive */
	ck_assert(kir_block_reduce_shape(&k, x | z, &sh));
	ck_assert(sh.kind == BR_WARP && sh.count == 16);
	arena_free(a);
}
END_TEST

/* A block reduction that some threads skip is a barrier not reached by every thread. */
START_TEST(test_block_reduce_under_branch)
{
	TestCompile *tc = tc_lowered(row_sum_src);
	Kernel *k = tc->kernels[0];
	Stmt *prev = NULL, *s = k->body;
	while (s && s->kind != KS_BLOCK_REDUCE) {
		prev = s;
		s = s->next;
	}
	ck_assert_ptr_nonnull(s);
	IrExpr *c = ir_op(k->arena, OP_LT, DT_BOOL, ir_par(k->arena, PT_TIDX), ir_int(k->arena, 16));
	Stmt *g = kir_if(k, c, s, NULL);
	g->next = s->next;
	s->next = NULL;
	prev->next = g;
	int64_t sizes[2] = {1, 40};
	float x[40] = {0}, out1[1];
	void *in[1] = {x}, *out[1] = {out1};
	SimOptions o = {.seed = 1};
	SimResult r;
	ck_assert(sim_run(k, sizes, NULL, in, out, &o, &r));
	int n = 0;
	for (int i = 0; i < r.nreports; i++)
		n += r.reports[i].kind == SF_BARRIER;
	ck_assert_int_ge(n, 1);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* A grid reduction is legal for an output nothing reads (tests/unit/check_grid_reduce.c);
 * one that another statement reads would need a grid-wide barrier: rejected at the bind. */
START_TEST(test_grid_reduction_rejected)
{
	tf_expect_errors("fusion f(x: f32[M, N]) -> (s: f32[M], y: f32[M]) {\n"
			 "  s[i] = sum(j: x[i, j]);\n"
			 "  y[i] = s[i] + 1.0;\n"
			 "}\n"
			 "schedule f {\n"
			 "  s.split(j, 128) -> (jo, jt);\n"
			 "  s.bind(jo, blockIdx.x);\n"
			 "}\n",
			 "t.fus:7:3: error: grid-reduced tensor 's' is read by 'y' in the same kernel; "
			 "that needs a grid-wide barrier, which fusc does not generate: compute 's' in a "
			 "fusion of its own and read it in a second one, or bind 'jo' to threadIdx.* (a "
			 "block reduction) or leave it serial\n");
}
END_TEST

START_TEST(test_rfactor_errors)
{
	tf_expect_errors("fusion f(x: f32[M, N]) -> (s: f32[M]) {\n"
			 "  s[i] = sum(j: x[i, j]);\n"
			 "}\n"
			 "schedule f {\n"
			 "  s.rfactor(i) -> r;\n"
			 "  s.rfactor(j) -> r;\n"
			 "}\n",
			 "t.fus:5:13: error: cannot rfactor 'i': it is not a reduction axis of 's'\n"
			 "t.fus:6:3: error: rfactor must leave 's' at least one reduction axis; it lists "
			 "all 1\n");
}
END_TEST

/* ---- the accumulation dtype (issue 11 item 19) ------------------------------------------- */

/* Every schedule of s[j] = sum(i: x[i, j]) with f32 data 1, then 4095 times 2^-26: in f32
 * every small term vanishes against 1 (the sum stays 1), in f64 they add up to
 * 1 + 4095 * 2^-26. The reference and the simulated kernel both accumulate in the dtype of
 * dtype_accum and agree exactly (the terms and their partial sums are exact in f64). */
static void check_accum(const char *src, DType out_dtype)
{
	enum { M = 4096, N = 3 };
	TestCompile *tc = tc_lowered(src);
	float *x = malloc(sizeof(float) * M * N);
	double ref[N], sim[N];
	float ref32[N], sim32[N];
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++)
			x[i * N + j] = i == 0 ? 1.0f : ldexpf(1.0f, -26);
	int64_t sizes[2] = {M, N};
	void *in[1] = {x};
	void *rout[1] = {out_dtype == DT_F64 ? (void *)ref : (void *)ref32};
	void *sout[1] = {out_dtype == DT_F64 ? (void *)sim : (void *)sim32};
	char *err = NULL;
	ck_assert_msg(interp_run(tc->prog->fusions[0], sizes, NULL, in, rout, &err), "%s", err);
	sim_ok(tc, 0, sizes, NULL, in, sout);
	double want = 1.0 + 4095 * ldexp(1.0, -26);
	for (int j = 0; j < N; j++) {
		double r = out_dtype == DT_F64 ? ref[j] : ref32[j];
		double k = out_dtype == DT_F64 ? sim[j] : sim32[j];
		if (out_dtype != DT_F64)
			want = (float)want;
		ck_assert_msg(r == want && k == want, "s[%d]: reference %.17g, kernel %.17g, want %.17g",
			      j, r, k, want);
	}
	free(x);
	tc_free(tc);
}

START_TEST(test_accum_f64_output_of_f32)
{
	/* f64 result of f32 data: f64 (the kernel did, the reference summed into f32) */
	const char *fus = "fusion cs(x: f32[M, N]) -> (s: f64[N]) {\n"
			  "  s[j] = sum(i: x[i, j]);\n"
			  "}\n";
	check_accum(fus, DT_F64); /* the automatic schedule */
	char src[1024];
	snprintf(src, sizeof src, "%sschedule cs {\n  s.bind(j, blockIdx.x);\n}\n", fus);
	check_accum(src, DT_F64); /* serial */
	snprintf(src, sizeof src, "%sschedule cs {\n  s.bind(j, blockIdx.x);\n"
		 "  s.split(i, 96) -> (io, it);\n  s.bind(it, threadIdx.x);\n}\n", fus);
	check_accum(src, DT_F64); /* a block reduction through shared memory */
	snprintf(src, sizeof src, "%sschedule cs {\n  s.bind(j, blockIdx.x);\n"
		 "  s.split(i, 64) -> (io, it);\n  s.rfactor(io) -> r;\n  s.bind(it, threadIdx.x);\n}\n",
		 fus);
	check_accum(src, DT_F64); /* rfactor: its partials too */
	TestCompile *tc = tc_lowered(fus);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "local f64 s_acc;");
	free(ir);
	tc_free(tc);
}
END_TEST

START_TEST(test_accum_f32_output_of_f64)
{
	/* f64 operands into an f32 result: f64 as well, rounded once at the store */
	check_accum("fusion cs(x: f32[M, N]) -> (s: f32[N]) {\n"
		    "  s[j] = sum(i: f64(x[i, j]));\n"
		    "}\n"
		    "schedule cs {\n  s.bind(j, blockIdx.x);\n"
		    "  s.split(i, 128) -> (io, it);\n  s.bind(it, threadIdx.x);\n}\n",
		    DT_F32);
}
END_TEST

START_TEST(test_accum_rule)
{
	ck_assert_int_eq(dtype_accum(RED_SUM, DT_F64, DT_F32), DT_F64);
	ck_assert_int_eq(dtype_accum(RED_SUM, DT_F32, DT_F64), DT_F64);
	ck_assert_int_eq(dtype_accum(RED_SUM, DT_F16, DT_F16), DT_F32);
	ck_assert_int_eq(dtype_accum(RED_MAX, DT_BF16, DT_F16), DT_F32);
	ck_assert_int_eq(dtype_accum(RED_SUM, DT_I64, DT_I32), DT_I64);
	ck_assert_int_eq(dtype_accum(RED_SUM, DT_I32, DT_I32), DT_I32);
	ck_assert_int_eq(dtype_accum(RED_SUM, DT_I32, DT_BOOL), DT_I64);
	ck_assert_int_eq(dtype_accum(RED_MAX, DT_BOOL, DT_BOOL), DT_BOOL);
	ck_assert_int_eq(dtype_accum(RED_SUM, DT_F32, DT_I32), DT_F32);
	/* i64 result of i32 data: 2^33 does not wrap (the reference wrapped it in i32) */
	TestCompile *tc = tc_lowered("fusion is(x: i32[M]) -> (s: i64[1]) {\n"
				     "  s[k] = sum(i: x[i]);\n"
				     "}\n"
				     "schedule is {\n  s.split(i, 32) -> (io, it);\n"
				     "  s.bind(it, threadIdx.x);\n}\n");
	int32_t x[8];
	int64_t ref = 0, sim = 0, m = 8;
	for (int i = 0; i < 8; i++)
		x[i] = 1 << 30;
	void *in[1] = {x}, *rout[1] = {&ref}, *sout[1] = {&sim};
	char *err = NULL;
	ck_assert_msg(interp_run(tc->prog->fusions[0], &m, NULL, in, rout, &err), "%s", err);
	sim_ok(tc, 0, &m, NULL, in, sout);
	ck_assert_int_eq(ref, (int64_t)1 << 33);
	ck_assert_int_eq(sim, (int64_t)1 << 33);
	tc_free(tc);
}
END_TEST

/* rfactor after non-divisible splits (issue 11). A listed axis split again on the partial
 * (`n2: 4` by 3) reaches 4, the next chunk's element in `o2 * 12 + n2 * 3 + n1`: the partial's
 * accumulation needs `p * 3 + q < 4` besides the root bound. */
START_TEST(test_rfactor_listed_axis_split)
{
	TestCompile *tc = tc_lowered("fusion row_sum(x: f32[M, N]) -> (s: f32[M]) {\n"
				     "  s[i] = sum(j: x[i, j]);\n"
				     "}\n"
				     "schedule row_sum {\n"
				     "  s.split(j, 3) -> (o1, n1); s.split(o1, 4) -> (o2, n2);\n"
				     "  s.rfactor(n2) -> r; s.bind(i, blockIdx.x); r.split(n2, 3) -> (p, q);\n"
				     "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "if (blockIdx.x < M && o2 * 12 + p * 9 + q * 3 + n1 < N && p * 3 + q < 4) {\n"
			       "            r_acc = r_acc + (");
	int64_t ns[] = {1, 5, 7, 14, 67};
	for (int i = 0; i < 5; i++)
		check_row_sums(tc, 2, ns[i]);
	free(ir);
	tc_free(tc);
}
END_TEST

/* A split that a merge undoes: the partial reads x[i, m] with m < 6 under its in-range select
 * (j < 5). The reference's size check does not take that for contradicting dims. */
START_TEST(test_rfactor_merged_split_sizes)
{
	TestCompile *tc = tc_lowered("fusion um(x: f32[M, 5, 2]) -> (s: f32[M]) { s[i] = min(j, k: x[i, j, k]); }\n"
				     "schedule um { s.split(j, 2) -> (o, n); s.merge(o, n) -> m;\n"
				     "  s.rfactor(m) -> r; s.bind(i, blockIdx.x); }\n");
	char *fir = tc_fusion_ir(tc, 0);
	ck_assert_contains(fir, "def r[i, k] = min(m: m < 5 ? x[i, m, k] : inf)\n");
	int64_t sizes[1] = {3};
	char *err = NULL;
	ck_assert_msg(fusion_check_sizes(tc->prog->fusions[0], sizes, &err), "%s", err);
	float x[30], sv[3];
	void *in[1] = {x}, *out[1] = {sv};
	for (int e = 0; e < 30; e++)
		x[e] = small_int(e / 10, e % 10);
	sim_ok(tc, 0, sizes, NULL, in, out);
	for (int i = 0; i < 3; i++) {
		float want = INFINITY;
		for (int e = 0; e < 10; e++)
			want = fminf(want, x[i * 10 + e]);
		ck_assert_float_eq(sv[i], want);
	}
	free(fir);
	tc_free(tc);
}
END_TEST

/* ---- identity lanes: thread extents that differ inside one kernel (issue 11) ---------------- */

/* blockDim.x is 13 (y's extent); s binds 7 lanes with no serial reduction loop. The lanes 7..12
 * must give the identity to the block reduction: the accumulator's `s_acc = 0.0` stays outside
 * the accumulation's predicate (it was grouped into it, leaving garbage in those lanes). */
START_TEST(test_identity_lanes_no_serial_loop)
{
	TestCompile *tc = tc_lowered("fusion nl(x: f32[M, 7], z: f32[M, 13]) -> (s: f32[M], y: f32[M, 13]) {\n"
				     "  s[i] = sum(j: x[i, j]);\n"
				     "  y[i, k] = z[i, k] * 2.0;\n"
				     "}\n"
				     "schedule nl { s.bind(i, blockIdx.x); s.bind(j, threadIdx.x);\n"
				     "  y.bind(i, blockIdx.x); y.bind(k, threadIdx.x); }\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  s_acc = 0.0;\n"
			       "  if (threadIdx.x < 7 && blockIdx.x < M) {\n"
			       "    s_acc = s_acc + x[blockIdx.x * 7 + threadIdx.x];\n"
			       "  }\n"
			       "  s_acc = block_reduce_sum(s_acc over threadIdx.x);\n");
	int64_t m = 3, sizes[1] = {m};
	float x[3 * 7], z[3 * 13], sv[3], y[3 * 13];
	void *in[2] = {x, z}, *out[2] = {sv, y};
	for (int i = 0; i < 3 * 7; i++)
		x[i] = small_int(i / 7, i % 7);
	for (int i = 0; i < 3 * 13; i++)
		z[i] = (float)i;
	sim_ok(tc, 0, sizes, NULL, in, out);
	for (int64_t i = 0; i < m; i++) {
		float want = 0;
		for (int j = 0; j < 7; j++)
			want += x[i * 7 + j];
		ck_assert_msg(sv[i] == want, "s[%lld] = %g, want %g", (long long)i, sv[i], want);
	}
	for (int i = 0; i < 3 * 13; i++)
		ck_assert_float_eq(y[i], 2.0f * (float)i);
	free(ir);
	tc_free(tc);
}
END_TEST

/* m's block reduction runs on 5 lanes, y reads m[0] on 13: every thread holds the result after
 * the reduction, so the register store has no `threadIdx.x < 5` (the lanes 5..12 read a
 * register nobody wrote). */
START_TEST(test_identity_lanes_register_result)
{
	TestCompile *tc = tc_lowered("fusion wr(x: f32[M, N]) -> (y: f32[M, N]) {\n"
				     "  m[i] = max(j: x[i, j]);\n"
				     "  y[i, j] = x[i, j] - m[i];\n"
				     "}\n"
				     "schedule wr { y.bind(i, blockIdx.x); y.split(j, 13) -> (jo, jt);\n"
				     "  y.bind(jt, threadIdx.x); m.split(j, 5) -> (jo, jt); m.bind(jt, threadIdx.x); }\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "    if (threadIdx.x < 5 && blockIdx.x < M && jo * 5 + threadIdx.x < N) {\n");
	ck_assert_contains(ir, "  m_acc = block_reduce_max(m_acc over threadIdx.x);\n"
			       "  m[0] = m_acc;\n");
	int64_t ns[] = {1, 4, 13, 31};
	for (int c = 0; c < 4; c++) {
		int64_t m = 2, n = ns[c], sizes[2] = {m, n};
		float *x = malloc(sizeof(float) * (size_t)(m * n)), *y = malloc(sizeof(float) * (size_t)(m * n));
		void *in[1] = {x}, *out[1] = {y};
		for (int64_t e = 0; e < m * n; e++)
			x[e] = small_int(e / n, e % n);
		sim_ok(tc, 0, sizes, NULL, in, out);
		for (int64_t i = 0; i < m; i++) {
			float mx = -INFINITY;
			for (int64_t j = 0; j < n; j++)
				mx = fmaxf(mx, x[i * n + j]);
			for (int64_t j = 0; j < n; j++)
				ck_assert_msg(y[i * n + j] == x[i * n + j] - mx, "N=%lld y[%lld, %lld] = %g, want %g",
					      (long long)n, (long long)i, (long long)j, y[i * n + j], x[i * n + j] - mx);
		}
		free(x);
		free(y);
	}
	free(ir);
	tc_free(tc);
}
END_TEST

Suite *reduce_suite(void)
{
	Suite *s = suite_create("reduce");
	TCase *tc = tcase_create("block");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_row_sum_block);
	tcase_add_test(tc, test_row_sum_smem_helper);
	tcase_add_test(tc, test_row_max_nan);
	tcase_add_test(tc, test_row_min_half_warp);
	tcase_add_test(tc, test_col_sum_serial);
	tcase_add_test(tc, test_total_beside_empty_rows);
	tcase_add_test(tc, test_col_sum_threads_y);
	tcase_add_test(tc, test_two_reduction_axes);
	tcase_add_test(tc, test_rfactor_serial_then_block);
	tcase_add_test(tc, test_rfactor_block_then_serial);
	tcase_add_test(tc, test_block_reduce_shape);
	tcase_add_test(tc, test_block_reduce_under_branch);
	tcase_add_test(tc, test_grid_reduction_rejected);
	tcase_add_test(tc, test_rfactor_errors);
	tcase_add_test(tc, test_accum_f64_output_of_f32);
	tcase_add_test(tc, test_accum_f32_output_of_f64);
	tcase_add_test(tc, test_accum_rule);
	tcase_add_test(tc, test_rfactor_listed_axis_split);
	tcase_add_test(tc, test_rfactor_merged_split_sizes);
	tcase_add_test(tc, test_identity_lanes_no_serial_loop);
	tcase_add_test(tc, test_identity_lanes_register_result);
	suite_add_tcase(s, tc);
	TCase *n = tcase_create("normalizations");
	tcase_set_timeout(n, 60);
	tcase_add_test(n, test_softmax_block);
	tcase_add_test(n, test_softmax_persistent);
	tcase_add_test(n, test_layernorm_block);
	tcase_add_test(n, test_rmsnorm_persistent);
	suite_add_tcase(s, n);
	return s;
}
