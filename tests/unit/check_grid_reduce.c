/* check_grid_reduce.c: grid reductions (a reduction axis bound to blockIdx.*,
 * passes/grid_reduce.c, docs/reductions.md "Grid reductions").
 *
 * Structure: one grid step per grid-reduced output, after the block reduction, the output's
 * store only inside it; the CUDA helper call, the kernel's workspace parameters and the
 * launcher's stream-ordered workspace (cudaMallocAsync, cudaMemsetAsync, cudaFreeAsync); NVRTC
 * for sm_80 and sm_90. Values through the simulator: exact sums of small integers, max with
 * NaN and -inf, a 0-d total over two block types, several outputs per thread; the same bits
 * whichever order the blocks run in; out-of-bounds detection on the workspace; and the
 * schedule errors.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"
#include "tests/unit/testutil.h"

/* Both found, a before b (ck_assert_after: a after b). */
#define ck_assert_before(a, b) ck_assert((a) && (b) && (a) < (b))
#define ck_assert_after(a, b) ck_assert((a) && (b) && (a) > (b))

static int count_str(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* Runs kernel i; returns the reports (the caller frees r). */
static void sim_in(TestCompile *tc, int i, const int64_t *sizes, void **in, void **out,
		   SimResult *r, bool reverse_blocks)
{
	SimOptions o = {.seed = 1, .reverse_blocks = reverse_blocks};
	ck_assert_msg(sim_run(tc->kernels[i], sizes, NULL, in, out, &o, r), "%s",
		      r->error ? r->error : "");
}

static void sim(TestCompile *tc, int i, const int64_t *sizes, void **in, void **out, SimResult *r)
{
	sim_in(tc, i, sizes, in, out, r, false);
}

static void sim_ok(TestCompile *tc, int i, const int64_t *sizes, void **in, void **out)
{
	SimResult r;
	sim(tc, i, sizes, in, out, &r);
	tc_assert_no_reports(tc, &r);
}

static float small_int(int64_t i, int64_t j)
{
	return (float)((i * 7 + j * 3) % 5 - 2);
}

/* Statements of kind `kind` in the list (recursively), and of those, stores to `t`. */
static int count_kind(Stmt *s, StmtKind kind)
{
	int n = 0;
	for (; s; s = s->next) {
		n += s->kind == kind;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += count_kind(*lists[i], kind);
	}
	return n;
}

static Stmt *find_kind(Stmt *s, StmtKind kind)
{
	for (; s; s = s->next) {
		Stmt *f = s->kind == kind ? s : NULL, **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !f; i++)
			f = find_kind(*lists[i], kind);
		if (f)
			return f;
	}
	return NULL;
}

/* Stores to t outside any grid step. */
static int stores_outside(Stmt *s, Tensor *t)
{
	int n = 0;
	for (; s; s = s->next) {
		if (s->kind == KS_GRID_REDUCE)
			continue;
		n += s->kind == KS_STORE && s->store.tensor == t;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += stores_outside(*lists[i], t);
	}
	return n;
}

/* ---- a column sum with the rows across blockIdx.y --------------------------------------- */

static const char col_sum_src[] =
	"fusion colsum(x: f32[M, N]) -> (s: f32[N]) {\n"
	"  s[j] = sum(i: x[i, j]);\n"
	"}\n"
	"schedule colsum {\n"
	"  s.split(j, 32) -> (bx, tx);\n"
	"  s.split(i, 64) -> (by, ir);\n"
	"  s.bind(bx, blockIdx.x);\n"
	"  s.bind(tx, threadIdx.x);\n"
	"  s.bind(by, blockIdx.y);\n"
	"}\n";

START_TEST(test_col_sum_structure)
{
	TestCompile *tc = tc_lowered(col_sum_src);
	Kernel *k = tc->kernels[0];
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "kernel colsum_kernel grid(ceildiv(N, 32), max(ceildiv(M, 64), 1)) block(32)");
	ck_assert_contains(ir,
		"  if (blockIdx.x * 32 + threadIdx.x < N) {\n"
		"    grid_reduce_sum(s_acc over blockIdx.y, element blockIdx.x * 32 + threadIdx.x, "
		"part blockIdx.y of max(ceildiv(M, 64), 1), fus_ws_s, fus_sem_s) {\n"
		"      s[blockIdx.x * 32 + threadIdx.x] = s_acc;\n"
		"    }\n"
		"  }\n");
	ck_assert_int_eq(count_str(ir, "grid_reduce_"), 1);
	ck_assert_int_eq(count_str(ir, "block_reduce"), 0);
	ck_assert_int_eq(count_kind(k->body, KS_GRID_REDUCE), 1);
	Stmt *g = find_kind(k->body, KS_GRID_REDUCE);
	ck_assert(g->grid_red.body && !g->grid_red.body->next && g->grid_red.body->kind == KS_STORE);
	ck_assert_int_eq(stores_outside(k->body, g->grid_red.tensor), 0);
	ck_assert_int_eq(g->grid_red.pars, 1u << PT_BIDY);
	ck_assert_int_eq(k->grid_ws.len, 2);
	ck_assert_str_eq(VEC_AT(k->grid_ws, Tensor, 0)->name, "fus_ws_s");
	ck_assert_int_eq(VEC_AT(k->grid_ws, Tensor, 0)->dtype, DT_F32);
	ck_assert_str_eq(VEC_AT(k->grid_ws, Tensor, 1)->name, "fus_sem_s");
	free(ir);

	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "__device__ __forceinline__ bool __fus_grid_reduce(T &acc, T *ws, "
			       "unsigned *sem, long long o, long long r, long long R)");
	ck_assert_contains(cu, "long long M, long long N, float *fus_ws_s, unsigned *fus_sem_s)\n");
	ck_assert_contains(cu, "if (__fus_grid_reduce<__fus_red_sum>(s_acc, fus_ws_s, fus_sem_s, "
			       "((long long)blockIdx.x) * 32 + ((long long)threadIdx.x), "
			       "((long long)blockIdx.y), __fus_max((M + 63) / 64, (long long)1))) {\n"
			       "      s[((long long)blockIdx.x) * 32 + ((long long)threadIdx.x)] = s_acc;\n"
			       "    }\n");
	/* the launcher: workspace of N * ceildiv(M, 64) floats and N counters, in stream order */
	ck_assert_contains(cu, "const long long fus_ws_bytes_0 = fus_mul(fus_mul((long long)N, "
			       "fus_max(fus_cdiv((long long)M, 64, &fus_ovf), 1), &fus_ovf), 4, &fus_ovf);\n"
			       "  if (fus_ovf)\n    return fus_fail(colsum_error_text, \"colsum: sizes "
			       "too large: the size of the grid-reduction workspace does not fit in "
			       "64 bits\");\n");
	ck_assert_contains(cu, "const long long fus_ws_bytes_1 = fus_mul((long long)N, 4, "
			       "&fus_ovf);\n");
	ck_assert_contains(cu, "const size_t fus_ws_bytes[2] = {(size_t)fus_ws_bytes_0, "
			       "(size_t)fus_ws_bytes_1};");
	ck_assert_contains(cu, "cudaMallocAsync(&fus_ws[i]");
	ck_assert_contains(cu, "cudaMemsetAsync(fus_ws[i], 0, fus_ws_bytes[i], stream);");
	ck_assert_contains(cu, "cudaFreeAsync(fus_ws[i], stream);");
	ck_assert_contains(cu, "(float *)fus_ws[0], (unsigned *)fus_ws[1]);");
	ck_assert_contains(cu, "colsum: cannot allocate the grid-reduction workspace: %s");
	/* allocation before the launch, the free after it */
	ck_assert_before(strstr(cu, "cudaMallocAsync"), strstr(cu, "colsum_kernel<<<"));
	ck_assert_after(strstr(cu, "cudaFreeAsync(fus_ws[i], stream);\n    if"),
			 strstr(cu, "colsum_kernel<<<"));
	free(cu);
	tc_assert_nvrtc(tc);

	/* M = 150 rows: 3 parts (64, 64, 22); N = 40 columns: 2 column blocks */
	int64_t sizes[2] = {150, 40};
	float *x = malloc(sizeof(float) * 150 * 40), out1[40];
	for (int i = 0; i < 150; i++)
		for (int j = 0; j < 40; j++)
			x[i * 40 + j] = small_int(i, j);
	void *in[1] = {x}, *out[1] = {out1};
	sim_ok(tc, 0, sizes, in, out);
	for (int j = 0; j < 40; j++) {
		float want = 0;
		for (int i = 0; i < 150; i++)
			want += small_int(i, j);
		ck_assert_float_eq(out1[j], want);
	}
	/* M smaller than one part: a single block along y */
	sizes[0] = 3;
	sim_ok(tc, 0, sizes, in, out);
	for (int j = 0; j < 40; j++)
		ck_assert_float_eq(out1[j], small_int(0, j) + small_int(1, j) + small_int(2, j));
	free(x);
	tc_free(tc);
}
END_TEST

/* ---- a row split across blocks: block reduction, then the grid step -------------------- */

static const char row_sum_src[] =
	"fusion rowsum(x: f32[M, N]) -> (s: f32[M]) {\n"
	"  s[i] = sum(j: x[i, j]);\n"
	"}\n"
	"schedule rowsum {\n"
	"  s.split(j, 1024) -> (jb, jr);\n"
	"  s.split(jr, 128) -> (js, tx);\n"
	"  s.bind(i, blockIdx.x);\n"
	"  s.bind(jb, blockIdx.y);\n"
	"  s.bind(tx, threadIdx.x);\n"
	"}\n";

START_TEST(test_row_sum_block_then_grid)
{
	TestCompile *tc = tc_lowered(row_sum_src);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir,
		"  s_acc = block_reduce_sum(s_acc over threadIdx.x);\n"
		"  if (blockIdx.x < M && threadIdx.x == 0) {\n"
		"    grid_reduce_sum(s_acc over blockIdx.y, element blockIdx.x, part blockIdx.y of "
		"max(ceildiv(N, 1024), 1), fus_ws_s, fus_sem_s) {\n"
		"      s[blockIdx.x] = s_acc;\n"
		"    }\n"
		"  }\n");
	ck_assert_int_eq(count_str(ir, "grid_reduce_sum"), 1);
	ck_assert_int_eq(count_str(ir, "s[blockIdx.x] = "), 1);
	ck_assert_before(strstr(ir, "block_reduce_sum"), strstr(ir, "grid_reduce_sum"));
	free(ir);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "s_acc = __fus_reduce_warps<__fus_red_sum, 128, float>(s_acc);");
	ck_assert_before(strstr(cu, "__fus_reduce_warps<"), strstr(cu, "if (__fus_grid_reduce<"));
	free(cu);
	tc_assert_nvrtc(tc);

	/* N = 2500: 3 blocks along y (1024, 1024, 452) */
	int64_t M = 3, N = 2500, sizes[2] = {M, N};
	float *x = malloc(sizeof(float) * (size_t)(M * N)), out1[3];
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++)
			x[i * N + j] = small_int(i, j);
	void *in[1] = {x}, *out[1] = {out1};
	sim_ok(tc, 0, sizes, in, out);
	for (int64_t i = 0; i < M; i++) {
		float want = 0;
		for (int64_t j = 0; j < N; j++)
			want += small_int(i, j);
		ck_assert_float_eq(out1[i], want);
	}
	free(x);
	tc_free(tc);
}
END_TEST

/* An empty reduction (N = 0) still stores the identity: the grid keeps one block along the
 * reduced type (an empty grid would launch nothing and leave s unwritten). */
START_TEST(test_empty_grid_reduction)
{
	TestCompile *tc = tc_lowered(row_sum_src);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "grid(M, max(ceildiv(N, 1024), 1))");
	free(ir);
	int64_t sizes[2] = {3, 0};
	float x[1] = {0}, out1[3] = {7, 7, 7};
	void *in[1] = {x}, *out[1] = {out1};
	sim_ok(tc, 0, sizes, in, out);
	for (int i = 0; i < 3; i++)
		ck_assert_float_eq(out1[i], 0.0f);
	tc_free(tc);
}
END_TEST

/* The bits of the result do not depend on the order in which the blocks finish: the last one
 * folds the partials in part order. Inputs whose sums round differently in another order. */
START_TEST(test_deterministic_block_order)
{
	TestCompile *tc = tc_lowered(row_sum_src);
	int64_t M = 2, N = 5000, sizes[2] = {M, N};
	float *x = malloc(sizeof(float) * (size_t)(M * N)), a[2], b[2];
	uint64_t seed = 12345;
	for (int64_t i = 0; i < M * N; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2e3 - 1e3) * 1.0001f;
	}
	void *in[1] = {x}, *out[1] = {a};
	sim_ok(tc, 0, sizes, in, out);
	out[0] = b;
	SimResult r;
	sim_in(tc, 0, sizes, in, out, &r, true);
	tc_assert_no_reports(tc, &r);
	ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
	/* and the parts were really combined: close to the sum in double */
	for (int64_t i = 0; i < M; i++) {
		double want = 0;
		for (int64_t j = 0; j < N; j++)
			want += x[i * N + j];
		ck_assert_double_eq_tol(a[i], want, 1e-2);
	}
	free(x);
	tc_free(tc);
}
END_TEST

/* ---- max with NaN and -inf -------------------------------------------------------------- */

START_TEST(test_col_max_nan)
{
	TestCompile *tc = tc_lowered("fusion colmax(x: f32[M, 4]) -> (s: f32[4]) {\n"
				  "  s[j] = max(i: x[i, j]);\n"
				  "}\n"
				  "schedule colmax {\n"
				  "  s.split(i, 4) -> (by, ir);\n"
				  "  s.bind(j, threadIdx.x);\n"
				  "  s.bind(by, blockIdx.y);\n"
				  "}\n");
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "if (__fus_grid_reduce<__fus_red_max>(s_acc, fus_ws_s, fus_sem_s, ");
	free(cu);
	int64_t sizes[1] = {10};
	float x[40], out1[4];
	for (int i = 0; i < 40; i++)
		x[i] = small_int(i / 4, i % 4);
	x[9 * 4 + 0] = NAN;       /* column 0: NaN in the last part */
	x[0 * 4 + 1] = NAN;       /* column 1: NaN in the first part */
	for (int i = 0; i < 10; i++)
		x[i * 4 + 2] = -INFINITY; /* column 2: all -inf */
	x[5 * 4 + 3] = 100;       /* column 3: the max in the middle part */
	void *in[1] = {x}, *out[1] = {out1};
	sim_ok(tc, 0, sizes, in, out);
	ck_assert(isnan(out1[0]));
	ck_assert(isnan(out1[1]));
	ck_assert(isinf(out1[2]) && out1[2] < 0);
	ck_assert_float_eq(out1[3], 100);
	tc_free(tc);
}
END_TEST

/* ---- a 0-d total over blockIdx.x and blockIdx.y ----------------------------------------- */

START_TEST(test_total_two_block_types)
{
	TestCompile *tc = tc_lowered("fusion total(x: f32[M, N]) -> (s: f32) {\n"
				  "  s = sum(i, j: x[i, j]);\n"
				  "}\n"
				  "schedule total {\n"
				  "  s.split(j, 32) -> (jb, tx);\n"
				  "  s.split(i, 4) -> (ib, ir);\n"
				  "  s.bind(jb, blockIdx.x);\n"
				  "  s.bind(tx, threadIdx.x);\n"
				  "  s.bind(ib, blockIdx.y);\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  s_acc = block_reduce_sum(s_acc over threadIdx.x);\n"
			       "  if (threadIdx.x == 0) {\n"
			       "    grid_reduce_sum(s_acc over blockIdx.x, blockIdx.y, element 0, part "
			       "blockIdx.x + max(ceildiv(N, 32), 1) * blockIdx.y of max(ceildiv(M, 4), 1) * "
			       "max(ceildiv(N, 32), 1), fus_ws_s, fus_sem_s) {\n"
			       "      s[0] = s_acc;\n");
	free(ir);
	tc_assert_nvrtc(tc);
	int64_t M = 9, N = 70, sizes[2] = {M, N};
	float x[9 * 70], out1[1];
	float want = 0;
	for (int i = 0; i < M * N; i++) {
		x[i] = small_int(i / N, i % N);
		want += x[i];
	}
	void *in[1] = {x}, *out[1] = {out1};
	sim_ok(tc, 0, sizes, in, out);
	ck_assert_float_eq(out1[0], want);
	tc_free(tc);
}
END_TEST

/* ---- several outputs per thread, beside a tensor not bound to blockIdx.y ------------------ */

START_TEST(test_serial_outputs_and_redundant_tensor)
{
	TestCompile *tc = tc_lowered("fusion multi(x: f32[M, N]) -> (s: f32[N], c: f32[N]) {\n"
				  "  s[j] = sum(i: x[i, j]);\n"
				  "  c[j] = x[0, j] * 2.0;\n"
				  "}\n"
				  "schedule multi {\n"
				  "  s.split(j, 16) -> (jo, tx);\n"
				  "  s.split(i, 8) -> (by, ir);\n"
				  "  s.bind(tx, threadIdx.x);\n"
				  "  s.bind(by, blockIdx.y);\n"
				  "  c.split(j, 16) -> (jo, tx);\n"
				  "  c.bind(tx, threadIdx.x);\n"
				  "}\n");
	char *ir = tc_kernel_ir(tc, 0);
	/* one grid step per column, inside the serial loop over columns */
	ck_assert_contains(ir, "  for jo in [0, ceildiv(N, 16)) {\n    s_acc = 0.0;\n");
	ck_assert_contains(ir, "      grid_reduce_sum(s_acc over blockIdx.y, element jo * 16 + "
			       "threadIdx.x, part blockIdx.y of max(ceildiv(M, 8), 1), fus_ws_s, fus_sem_s) {\n");
	/* c is not bound to blockIdx.y: only blockIdx.y == 0 writes it */
	ck_assert_contains(ir, "  // nest of c\n  if (blockIdx.y == 0) {\n");
	free(ir);
	int64_t M = 20, N = 37, sizes[2] = {M, N};
	float x[20 * 37], s[37], c[37];
	for (int i = 0; i < M * N; i++)
		x[i] = small_int(i / N, i % N);
	void *in[1] = {x}, *out[2] = {s, c};
	sim_ok(tc, 0, sizes, in, out);
	for (int j = 0; j < N; j++) {
		float want = 0;
		for (int i = 0; i < M; i++)
			want += x[i * N + j];
		ck_assert_float_eq(s[j], want);
		ck_assert_float_eq(c[j], 2 * x[j]);
	}
	tc_free(tc);
}
END_TEST

/* The workspace is a simulated global buffer: an index past it is reported. */
START_TEST(test_workspace_out_of_bounds)
{
	TestCompile *tc = tc_lowered(col_sum_src);
	Kernel *k = tc->kernels[0];
	Stmt *g = find_kind(k->body, KS_GRID_REDUCE);
	g->grid_red.part = ix_add(k->arena, g->grid_red.part, ir_int(k->arena, 1)); /* parts 1 .. R: one too far */
	int64_t sizes[2] = {100, 32};
	float x[100 * 32] = {0}, out1[32];
	void *in[1] = {x}, *out[1] = {out1};
	SimResult r;
	sim(tc, 0, sizes, in, out, &r);
	int oob = 0;
	for (int i = 0; i < r.nreports; i++)
		if (r.reports[i].kind == SF_OOB && strcmp(r.reports[i].buffer, "fus_ws_s") == 0)
			oob++;
	ck_assert_int_ge(oob, 1);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* ---- schedule errors ---------------------------------------------------------------------- */

START_TEST(test_read_by_another_tensor)
{
	tf_expect_errors("fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
			 "  s[i] = sum(j: x[i, j]);\n"
			 "  y[i, j] = x[i, j] / s[i];\n"
			 "}\n"
			 "schedule f {\n"
			 "  y.bind(i, blockIdx.x);\n"
			 "  s.split(j, 128) -> (jo, jt);\n"
			 "  s.bind(jt, threadIdx.x);\n"
			 "  s.bind(jo, blockIdx.y);\n"
			 "}\n",
			 "t.fus:9:3: error: grid-reduced tensor 's' is read by 'y' in the same kernel; "
			 "that needs a grid-wide barrier, which fusc does not generate: compute 's' in a "
			 "fusion of its own and read it in a second one, or bind 'jo' to threadIdx.* (a "
			 "block reduction) or leave it serial\n");
	/* rfactor moves the bound axis into r, which s reads */
	tf_expect_errors("fusion f(x: f32[M, N]) -> (s: f32[M]) {\n"
			 "  s[i] = sum(j: x[i, j]);\n"
			 "}\n"
			 "schedule f {\n"
			 "  s.split(j, 64) -> (jo, jt);\n"
			 "  s.bind(jo, blockIdx.y);\n"
			 "  s.rfactor(jo) -> r;\n"
			 "}\n",
			 "t.fus:6:3: error: grid-reduced tensor 'r' is read by 's' in the same kernel; "
			 "that needs a grid-wide barrier, which fusc does not generate: compute 'r' in a "
			 "fusion of its own and read it in a second one, or bind 'jo' to threadIdx.* (a "
			 "block reduction) or leave it serial\n");
}
END_TEST

Suite *grid_reduce_suite(void)
{
	Suite *s = suite_create("grid_reduce");
	TCase *tc = tcase_create("grid");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_col_sum_structure);
	tcase_add_test(tc, test_row_sum_block_then_grid);
	tcase_add_test(tc, test_empty_grid_reduction);
	tcase_add_test(tc, test_deterministic_block_order);
	tcase_add_test(tc, test_col_max_nan);
	tcase_add_test(tc, test_total_two_block_types);
	tcase_add_test(tc, test_serial_outputs_and_redundant_tensor);
	tcase_add_test(tc, test_workspace_out_of_bounds);
	tcase_add_test(tc, test_read_by_another_tensor);
	suite_add_tcase(s, tc);
	return s;
}
