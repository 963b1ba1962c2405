/* check_raster.c: `t.raster(rows, cols, G)` (docs/schedule.md; passes/raster.c).
 *
 * The block order is checked against its definition, written out here on its own: block lin
 * of the launch (x fastest) runs tile (first + (lin % (G nbj)) % g, (lin % (G nbj)) / g), with
 * first the group's first row and g its rows (the last group shorter). The kernel's lets are
 * evaluated for every hardware block of several grids (the two lets' values, as the backend
 * and the simulator compute them); the mapping must be that one, hence a permutation. The
 * simulator then runs every block against the reference, and a wrong remap (two blocks on one
 * tile) planted in the lowered kernel must be caught.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

static const char tiles_src[] =
	"fusion tiles(x: f32[M, N]) -> (y: f32[M, N]) {\n"
	"  y[i, j] = x[i, j] * 2.0 + 1.0;\n"
	"}\n"
	"schedule tiles {\n"
	"  y.split(i, 4) -> (bi, ii);\n"
	"  y.split(j, 4) -> (bj, ji);\n"
	"  y.reorder(bi, bj, ii, ji);\n"
	"  y.bind(bi, %s);\n"
	"  y.bind(bj, %s);\n"
	"  y.bind(ii, threadIdx.y);\n"
	"  y.bind(ji, threadIdx.x);\n"
	"  y.raster(bi, bj, %d);\n"
	"}\n";

static TestCompile *tiles(const char *rows_par, const char *cols_par, int g)
{
	char src[sizeof tiles_src + 64];
	snprintf(src, sizeof src, tiles_src, rows_par, cols_par, g);
	return tc_lowered(src);
}

/* The let of variable `name` at the top of k (before the first statement that is no let). */
static Stmt *top_let(Kernel *k, const char *name)
{
	for (Stmt *s = k->body; s && s->kind == KS_LET; s = s->next)
		if (strcmp(s->let.var->name, name) == 0)
			return s;
	ck_abort_msg("no let of %s at the top of %s", name, k->name);
	return NULL;
}

typedef struct Eval {
	int64_t bid[3];   /* the hardware's block index */
	Var *var[8];      /* the lets evaluated so far */
	int64_t val[8];
	int n;
} Eval;

static IrExpr *known(Arena *a, IrExpr *e, void *ctx)
{
	Eval *ev = ctx;
	if (e->kind == EX_PAR && par_is_block(e->par))
		return ir_int(a, ev->bid[e->par - PT_BIDX]);
	for (int i = 0; e->kind == EX_VAR && i < ev->n; i++)
		if (e->var == ev->var[i])
			return ir_int(a, ev->val[i]);
	return e;
}

/* The values the top lets of k give rows' and cols' locals in hardware block bid. */
static void tile_of(Kernel *k, const int64_t *sizes, const int64_t bid[3], int64_t *bi,
		    int64_t *bj)
{
	Eval ev = {{bid[0], bid[1], bid[2]}, {0}, {0}, 0};
	for (Stmt *s = k->body; s && s->kind == KS_LET; s = s->next) {
		ck_assert_int_lt(ev.n, 8);
		IrExpr *v = ir_rewrite(k->arena, s->let.value, known, &ev);
		ck_assert_msg(ir_eval_i64(v, sizes, &ev.val[ev.n]), "let %s does not evaluate",
			      s->let.var->name);
		ev.var[ev.n++] = s->let.var;
	}
	*bi = *bj = -1;
	for (int i = 0; i < ev.n; i++) {
		if (ev.var[i] == top_let(k, "bi")->let.var)
			*bi = ev.val[i];
		if (ev.var[i] == top_let(k, "bj")->let.var)
			*bj = ev.val[i];
	}
}

/* For every block of the grid of M x N (4 x 4 tiles): the tile is the definition's, and no
 * two blocks share one. rows_dim, cols_dim: the grid dimensions (0 x, 1 y, 2 z) of the two. */
static void check_order(Kernel *k, int64_t M, int64_t N, int64_t G, int rows_dim, int cols_dim)
{
	int64_t sizes[2] = {M, N}, nbi = (M + 3) / 4, nbj = (N + 3) / 4;
	int64_t ext[3] = {1, 1, 1};
	ext[rows_dim] = nbi;
	ext[cols_dim] = nbj;
	bool *seen = calloc((size_t)(nbi * nbj + 1), 1);
	int fast = rows_dim < cols_dim ? rows_dim : cols_dim, slow = rows_dim + cols_dim - fast;
	for (int64_t s = 0; s < ext[slow]; s++) {
		for (int64_t f = 0; f < ext[fast]; f++) {
			int64_t bid[3] = {0, 0, 0}, bi, bj;
			bid[fast] = f;
			bid[slow] = s;
			tile_of(k, sizes, bid, &bi, &bj);
			/* the definition */
			int64_t lin = s * ext[fast] + f, span = G * nbj, first = lin / span * G;
			int64_t g = nbi - first < G ? nbi - first : G;
			ck_assert_int_eq(bi, first + lin % span % g);
			ck_assert_int_eq(bj, lin % span / g);
			ck_assert(bi >= 0 && bi < nbi && bj >= 0 && bj < nbj);
			ck_assert_msg(!seen[bi * nbj + bj], "two blocks run tile (%lld, %lld)",
				      (long long)bi, (long long)bj);
			seen[bi * nbj + bj] = true;
		}
	}
	free(seen);
}

START_TEST(test_order_is_grouped_and_a_permutation)
{
	static const int64_t shapes[][2] = {{27, 19}, {28, 20}, {4, 40}, {40, 4}, {1, 1},
					    {100, 9}, {13, 77}};
	static const int groups[] = {1, 3, 4, 8, 100};
	for (int gi = 0; gi < (int)countof(groups); gi++) {
		TestCompile *tc = tiles("blockIdx.y", "blockIdx.x", groups[gi]);
		for (int i = 0; i < (int)countof(shapes); i++)
			check_order(tc->kernels[0], shapes[i][0], shapes[i][1], groups[gi], 1, 0);
		tc_free(tc);
	}
	/* rows on x (the hardware's faster dimension), cols on z */
	TestCompile *tc = tiles("blockIdx.x", "blockIdx.z", 3);
	check_order(tc->kernels[0], 27, 19, 3, 0, 2);
	check_order(tc->kernels[0], 5, 30, 3, 0, 2);
	tc_free(tc);
}
END_TEST

/* The reads of the block types read the locals; the lets read the hardware's indices. */
START_TEST(test_reads_take_the_locals)
{
	TestCompile *tc = tiles("blockIdx.y", "blockIdx.x", 8);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "raster_lin = ((long long)blockIdx.y) * ((N + 3) / 4) + ((long long)blockIdx.x);");
	ck_assert_contains(cu, "y[(bi * 4 + ((long long)threadIdx.y)) * N + bj * 4 + ((long long)threadIdx.x)]");
	/* blockIdx appears in the one let only */
	const char *body = strstr(cu, "raster_lin = ");
	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_null(strstr(strchr(body, '\n'), "blockIdx"));
	free(cu);
	tc_assert_nvrtc(tc);
	tc_free(tc);
}
END_TEST

START_TEST(test_simulator_runs_every_tile)
{
	TestCompile *tc = tiles("blockIdx.y", "blockIdx.x", 3);
	const char *dims[] = {"M=27,N=19", "M=27,N=3", "M=3,N=27", "M=0,N=5", "M=1,N=1", "M=64,N=64"};
	for (int i = 0; i < (int)countof(dims); i++)
		expect_sim(tc->kernels[0], dims[i]);
	tc_free(tc);
}
END_TEST

/* Two blocks on one tile (bi = first: every row of a group runs the group's first row) is a
 * race on y and leaves tiles unwritten; the last group taken as long as the others (r % G
 * instead of r % g: rows past the grid, predicated off) leaves tiles unwritten. */
START_TEST(test_wrong_remap_is_caught)
{
	for (int m = 0; m < 2; m++) {
		TestCompile *tc = tiles("blockIdx.y", "blockIdx.x", 3);
		Kernel *k = tc->kernels[0];
		ck_assert(sim_agrees(k, "M=27,N=19"));
		Stmt *bi = top_let(k, "bi");
		IrExpr *first = ir_var(k->arena, top_let(k, "raster_first")->let.var);
		if (m == 0) {
			bi->let.value = first;
		} else {
			IrExpr *r = ir_var(k->arena, top_let(k, "raster_r")->let.var);
			bi->let.value = ir_op(k->arena, OP_ADD, DT_I64, first,
					      ir_op(k->arena, OP_MOD, DT_I64, r, ir_int(k->arena, 3)));
		}
		int n = 0;
		SimFault kind = SF_COUNT;
		ck_assert_msg(!sim_agrees_reporting(k, "M=27,N=19", &n, &kind), "mutation %d not caught", m);
		ck_assert_int_eq(n, m == 0 ? 1 : 0);
		if (m == 0)
			ck_assert_int_eq(kind, SF_GLOBAL_RACE);
		tc_free(tc);
	}
}
END_TEST

START_TEST(test_errors_at_the_directive)
{
	TestFrontend r = tf_compile(
		"fusion f(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j]; }\n"
		"schedule f {\n"
		"  y.split(i, 4) -> (bi, ii); y.split(j, 4) -> (bj, ji);\n"
		"  y.reorder(bi, bj, ii, ji);\n"
		"  y.raster(bi, bj, 8);\n"
		"  y.bind(bi, blockIdx.y); y.bind(bj, blockIdx.x); y.bind(ii, threadIdx.y);\n"
		"  y.raster(bi, ii, 8);\n"
		"  y.raster(bj, bj, 2);\n"
		"  y.raster(bi, bj, 0);\n"
		"  y.raster(bi, bj, N);\n"
		"}\n", true);
	ck_assert_contains(r.errors, "t.fus:5:12: error: cannot raster 'bi': it is not bound to blockIdx.*");
	ck_assert_contains(r.errors, "t.fus:7:16: error: cannot raster 'ii': it is not bound to blockIdx.*");
	ck_assert_contains(r.errors, "t.fus:8:16: error: axis 'bj' is listed twice");
	ck_assert_contains(r.errors, "t.fus:9:20: error: the group of a raster must be a positive integer, not 0");
	ck_assert_contains(r.errors, "t.fus:10:20: error: expected an integer");
	tf_free(&r);
}
END_TEST

Suite *raster_suite(void)
{
	Suite *s = suite_create("raster");
	TCase *c = tcase_create("raster");
	tcase_set_timeout(c, 60);
	tcase_add_test(c, test_order_is_grouped_and_a_permutation);
	tcase_add_test(c, test_reads_take_the_locals);
	tcase_add_test(c, test_simulator_runs_every_tile);
	tcase_add_test(c, test_wrong_remap_is_caught);
	tcase_add_test(c, test_errors_at_the_directive);
	suite_add_tcase(s, c);
	return s;
}
