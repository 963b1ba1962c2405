/* check_mma.c: tensor cores (issue 14, docs/tensor_cores.md).
 *
 * The compiler's fragment table (ir/mma.c) is a bijection onto each matrix; the lowering of
 * tests/golden/ok/mma_one_warp.fus is simulated with its results compared to the reference
 * interpreter; then one thing of the lowered KS_MMA is changed at a time (two elements of the
 * A fragment swapped, the B fragment taken from another lane, two accumulator registers
 * swapped, the barrier before the mma removed, the mma run by half a warp; with ldmatrix, the
 * row addresses of other lanes, a misaligned row) and the simulator must report it: a
 * mismatch, a race, a warp that never completes the instruction, a misaligned access; the
 * fragment registers (loaded once per warp tile, B two tiles per ldmatrix.x4.trans) and the
 * padded rows of hgemm_ldmatrix.fus are mutated the same way, and so is its mainloop with
 * the fragment loads one k step ahead (mma_pipeline: the barrier moved, the wait dropped,
 * the next iteration's loads from the wrong slot); transposed operands (A[k, i] by
 * ldmatrix.x4.trans, B[j, k] by ldmatrix.x2/x4 without) match, and the other transposition
 * on any operand is a mismatch. A target
 * below sm_80 is an error at the mma directive. The tests run from the repository root.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"
#include "passes/passes.h"
#include "tests/unit/testutil.h"

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "cannot open %s (run from the repository root)", path);
	Buf b = {0};
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		buf_printf(&b, "%.*s", (int)n, chunk);
	fclose(f);
	return b.s;
}

static TestCompile *compile_path(const char *path)
{
	char *src = read_file(path);
	TestCompile *tc = tc_compile(src, true);
	free(src);
	ck_assert_msg(tc->kernels, "%s does not compile:\n%s", path, tc->diags);
	return tc;
}

static TestCompile *compile_one_warp(void)
{
	return compile_path("tests/golden/ok/mma_one_warp.fus");
}

static TestCompile *compile_ldmatrix(void)
{
	return compile_path("tests/golden/ok/mma_one_warp_ldmatrix.fus");
}

/* Runs kernel 0 at M = 33, K = 40, N = 17 (sizes in first-appearance order M, K, N) on seeded
 * random inputs; returns how many output elements differ from the reference interpreter by
 * more than 1e-4 (relative to the largest reference magnitude). */
static int64_t simulate_at(TestCompile *tc, SimResult *r, const int64_t sizes[3])
{
	Kernel *k = tc->kernels[0];
	Fusion *f = k->fusion;
	int64_t bad = 0;
	HostTensor in[2], out, ref;
	void *inp[2], *outp[1], *refp[1];
	SimOptions o = {.seed = 1};
	char *err = NULL;

	ck_assert(f->nsizes == 3 && f->ninputs == 2 && f->noutputs == 1);
	for (int i = 0; i < 2; i++) {
		ck_assert(host_tensor_init(&in[i], f->inputs[i], sizes, &err));
		host_tensor_fill_random(&in[i], (uint64_t)i + 1);
		inp[i] = in[i].data;
	}
	ck_assert(host_tensor_init(&out, f->outputs[0], sizes, &err));
	ck_assert(host_tensor_init(&ref, f->outputs[0], sizes, &err));
	outp[0] = out.data;
	refp[0] = ref.data;
	ck_assert(interp_run(f, sizes, NULL, inp, refp, &err));
	ck_assert_msg(sim_run(k, sizes, NULL, inp, outp, &o, r), "%s", r->error);
	double scale = 0;
	for (int64_t e = 0; e < host_tensor_numel(&ref); e++)
		scale = fmax(scale, fabs(host_tensor_get(&ref, e)));
	for (int64_t e = 0; e < host_tensor_numel(&ref); e++)
		bad += !(fabs(host_tensor_get(&out, e) - host_tensor_get(&ref, e)) <= 1e-4 * scale);
	host_tensor_free(&out);
	host_tensor_free(&ref);
	for (int i = 0; i < 2; i++)
		host_tensor_free(&in[i]);
	return bad;
}

static int64_t simulate(TestCompile *tc, SimResult *r)
{
	const int64_t sizes[3] = {33, 40, 17};
	return simulate_at(tc, r, sizes);
}

static Stmt **find_link(Stmt **link, StmtKind kind)
{
	for (Stmt *s = *link; s; link = &s->next, s = s->next) {
		if (s->kind == kind)
			return link;
		Stmt **lists[3], **r = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !r; i++)
			r = *lists[i] ? find_link(lists[i], kind) : NULL;
		if (r)
			return r;
	}
	return NULL;
}

/* The (link to the head of the) statement list that holds the mma. */
static Stmt **list_of_mma(Stmt **head)
{
	for (Stmt *s = *head; s; s = s->next) {
		if (s->kind == KS_MMA)
			return head;
		Stmt **lists[3], **r = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !r; i++)
			r = *lists[i] ? list_of_mma(lists[i]) : NULL;
		if (r)
			return r;
	}
	return NULL;
}

static Stmt *the_mma(TestCompile *tc)
{
	Stmt **l = find_link(&tc->kernels[0]->body, KS_MMA);
	ck_assert_msg(l, "no mma in the lowered kernel");
	return *l;
}

/* The fragment load of operand op ('a' or 'b'); *loops: the loops around it. */
static Stmt *frag_load_in(Stmt *s, char op, int depth, int *loops)
{
	for (; s; s = s->next) {
		if (s->kind == KS_MMA_LOAD && s->mma.op == op) {
			*loops = depth;
			return s;
		}
		Stmt **lists[3], *r = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !r; i++)
			r = frag_load_in(*lists[i], op, depth + (s->kind == KS_FOR), loops);
		if (r)
			return r;
	}
	return NULL;
}

static Stmt *frag_load(TestCompile *tc, char op)
{
	int loops;
	Stmt *s = frag_load_in(tc->kernels[0]->body, op, 0, &loops);
	ck_assert_msg(s, "no fragment load of %c in the lowered kernel", op);
	return s;
}

static int count_kind(SimResult *r, SimFault kind)
{
	int n = 0;
	for (int i = 0; i < r->nreports; i++)
		n += r->reports[i].kind == kind;
	return n;
}

START_TEST(test_fragment_tables_are_bijections)
{
	const MmaInstr *in = mma_instr(MMA_M16N8K16);
	struct { char op; int rows, cols, n; } ops[] = {
		{'a', in->m, in->k, in->na}, {'b', in->k, in->n, in->nb}, {'c', in->m, in->n, in->nc}};
	for (int o = 0; o < 3; o++) {
		int seen[16][16] = {{0}};
		for (int lane = 0; lane < 32; lane++) {
			for (int r = 0; r < ops[o].n; r++) {
				int row, col;
				mma_frag_at(in, ops[o].op, lane, r, &row, &col);
				ck_assert(row >= 0 && row < ops[o].rows && col >= 0 && col < ops[o].cols);
				seen[row][col]++;
			}
		}
		for (int i = 0; i < ops[o].rows; i++)
			for (int j = 0; j < ops[o].cols; j++)
				ck_assert_msg(seen[i][j] == 1, "%c(%d, %d) held %d times", ops[o].op, i, j,
					      seen[i][j]);
	}
	ck_assert_ptr_eq(mma_instr_by_name("m16n8k16"), in);
	ck_assert_ptr_null(mma_instr_by_name("m16n8k8"));
	ck_assert_str_eq(mma_ptx(in, DT_BF16), "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
}
END_TEST

START_TEST(test_unmutated_matches_reference)
{
	TestCompile *tc = compile_one_warp();
	SimResult r;
	ck_assert_int_eq(simulate(tc, &r), 0);
	tc_assert_no_reports(tc, &r);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
	free(cu);
	tc_free(tc);
}
END_TEST

/* Two elements of the A fragment in the wrong registers: the hardware multiplies them in
 * each other's places. */
START_TEST(test_swapped_a_elements_mismatch)
{
	TestCompile *tc = compile_one_warp();
	Stmt *m = the_mma(tc);
	int a = m->mma.instr->nc;
	IrExpr *t = m->mma.idx[a];
	m->mma.idx[a] = m->mma.idx[a + 1];
	m->mma.idx[a + 1] = t;
	SimResult r;
	ck_assert_int_gt(simulate(tc, &r), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

static IrExpr *next_group(Arena *a, IrExpr *e, void *ctx)
{
	(void)ctx;
	if (e->kind != EX_PAR || e->par != PT_TIDX)
		return e;
	return ix_mod(a, NULL, ix_add(a, e, ir_int(a, 4)), ir_int(a, 32));
}

/* Every lane loads the B fragment of lane + 4 (the next column of B): the columns of the
 * product rotate. */
START_TEST(test_b_from_other_lane_mismatch)
{
	TestCompile *tc = compile_one_warp();
	Stmt *m = frag_load(tc, 'b');
	Arena *a = tc->kernels[0]->arena;
	for (int i = 0; i < m->mma.nidx; i++)
		m->mma.idx[i] = ir_rewrite(a, m->mma.idx[i], next_group, NULL);
	SimResult r;
	ck_assert_int_gt(simulate(tc, &r), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* Accumulator registers c0 and c2 (rows g and g + 8) exchanged. */
START_TEST(test_swapped_accumulators_mismatch)
{
	TestCompile *tc = compile_one_warp();
	Stmt *m = the_mma(tc);
	IrExpr *t = m->mma.idx[0];
	m->mma.idx[0] = m->mma.idx[2];
	m->mma.idx[2] = t;
	SimResult r;
	ck_assert_int_gt(simulate(tc, &r), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* The barrier between the tiles' copies and the mma: its reads by other lanes race. */
START_TEST(test_sync_removed_is_race)
{
	TestCompile *tc = compile_one_warp();
	/* the last __syncthreads before the mma, in the list that holds it */
	Stmt **list = list_of_mma(&tc->kernels[0]->body);
	ck_assert(list);
	Stmt **sync = NULL;
	for (Stmt **l = list; *l && (*l)->kind != KS_MMA; l = &(*l)->next)
		if ((*l)->kind == KS_SYNC)
			sync = l;
	ck_assert_msg(sync, "no barrier before the mma");
	*sync = (*sync)->next;
	SimResult r;
	simulate(tc, &r);
	ck_assert_int_gt(count_kind(&r, SF_RACE), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* The mma under `if (threadIdx.x < 16)`: half the warp never arrives. */
START_TEST(test_half_warp_is_reported)
{
	TestCompile *tc = compile_one_warp();
	Stmt **l = find_link(&tc->kernels[0]->body, KS_MMA);
	Kernel *k = tc->kernels[0];
	Stmt *m = *l, *next = m->next;
	m->next = NULL;
	Stmt *g = kir_if(k, ix_lt(k->arena, ir_par(k->arena, PT_TIDX), ir_int(k->arena, 16)), m, NULL);
	g->next = next;
	*l = g;
	SimResult r;
	simulate(tc, &r);
	ck_assert_int_gt(count_kind(&r, SF_BARRIER), 0);
	int i = 0;
	while (r.reports[i].kind != SF_BARRIER)
		i++;
	ck_assert_contains(r.reports[i].detail, "16 of the 32 lanes of warp 0");
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* Both operands' fragments by ldmatrix (.trans as in ldt: MMA_LDM_A, MMA_LDM_B bits), the
 * result the reference's, the CUDA with the instructions named (x4 of A, then x2 of B). */
static void expect_ldmatrix(TestCompile *tc, unsigned ldt, const char *ins_a, const char *ins_b)
{
	Stmt *la = frag_load(tc, 'a'), *lb = frag_load(tc, 'b');
	ck_assert_uint_eq(la->mma.ldm, MMA_LDM_A);
	ck_assert_uint_eq(lb->mma.ldm, MMA_LDM_B);
	ck_assert_uint_eq(la->mma.ldt, ldt & MMA_LDM_A);
	ck_assert_uint_eq(lb->mma.ldt, ldt & MMA_LDM_B);
	ck_assert_int_eq(la->mma.nidx, 1);
	SimResult r;
	ck_assert_int_eq(simulate(tc, &r), 0);
	tc_assert_no_reports(tc, &r);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, ins_a);
	ck_assert_contains(cu, ins_b);
	free(cu);
}

START_TEST(test_ldmatrix_matches_reference)
{
	TestCompile *tc = compile_ldmatrix();
	Stmt *m = the_mma(tc);
	ck_assert_uint_eq(m->mma.ldm, 0); /* the mma reads fragment registers */
	ck_assert_int_eq(m->mma.nidx, 16);
	expect_ldmatrix(tc, MMA_LDM_B, "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
			"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16");
	tc_free(tc);
}
END_TEST

static IrExpr *next_lane(Arena *a, IrExpr *e, void *ctx)
{
	(void)ctx;
	if (e->kind != EX_PAR || e->par != PT_TIDX)
		return e;
	return ix_mod(a, NULL, ix_add(a, e, ir_int(a, 1)), ir_int(a, 32));
}

/* Every lane gives the row address of the next lane: the A tile's rows rotate. */
START_TEST(test_ldmatrix_rows_of_other_lanes_mismatch)
{
	TestCompile *tc = compile_ldmatrix();
	Stmt *m = frag_load(tc, 'a');
	m->mma.idx[0] = ir_rewrite(tc->kernels[0]->arena, m->mma.idx[0], next_lane, NULL);
	SimResult r;
	ck_assert_int_gt(simulate(tc, &r), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* A row address one element past the row: not 16-byte aligned. */
START_TEST(test_ldmatrix_misaligned_row_is_reported)
{
	TestCompile *tc = compile_ldmatrix();
	Stmt *m = frag_load(tc, 'b');
	Arena *a = tc->kernels[0]->arena;
	IrExpr *e = m->mma.idx[0];
	m->mma.idx[0] = ir_load(a, e->tensor, ix_add(a, e->args[0], ir_int(a, 1)));
	m->mma.idx[0]->dtype = e->dtype;
	SimResult r;
	simulate(tc, &r);
	ck_assert_int_gt(count_kind(&r, SF_MISALIGNED), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* Transposed operands (tests/golden/ok/mma_one_warp_ldmatrix_trans.fus: A[k, i] and
 * B[j, k]): A by ldmatrix.x4.trans, B by ldmatrix.x2 without .trans (the plain layouts the
 * other way round: test_ldmatrix_matches_reference), the result the reference's. */
START_TEST(test_ldmatrix_transposed_operands_match_reference)
{
	TestCompile *tc = compile_path("tests/golden/ok/mma_one_warp_ldmatrix_trans.fus");
	expect_ldmatrix(tc, MMA_LDM_A, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
			"ldmatrix.sync.aligned.m8n8.x2.shared.b16");
	tc_free(tc);
}
END_TEST

/* The wrong transposition on one operand's ldmatrix (.trans dropped or added; the row
 * addresses unchanged): every 8 x 8 matrix arrives transposed, and the simulator's result
 * differs from the reference, for each operand of the transposed program, of the plain one,
 * and of the NT example's paired B tiles (ldmatrix.x4 of two n tiles). */
START_TEST(test_ldmatrix_wrong_transposition_mismatch)
{
	const char *paths[] = {"tests/golden/ok/mma_one_warp_ldmatrix_trans.fus",
			       "tests/golden/ok/mma_one_warp_ldmatrix.fus",
			       "examples/gemm/hgemm_nt_ldmatrix.fus"};
	for (int p = 0; p < 3; p++) {
		for (int op = 0; op < 2; op++) {
			TestCompile *tc = compile_path(paths[p]);
			Stmt *ld = frag_load(tc, op ? 'b' : 'a');
			if (p == 2 && op)
				ck_assert_int_eq(ld->mma.tiles, 2);
			ld->mma.ldt ^= ld->mma.ldm;
			SimResult r;
			ck_assert_msg(simulate(tc, &r) > 0, "%s: %c with the other transposition matches",
				      paths[p], op ? 'B' : 'A');
			sim_result_free(&r);
			tc_free(tc);
		}
	}
}
END_TEST

/* Lane-by-lane loads of a transposed A (tests/golden/sim/mma_transposed_a.fus): the result
 * matches; two A elements swapped do not. */
START_TEST(test_transposed_lane_loads)
{
	for (int mutate = 0; mutate < 2; mutate++) {
		TestCompile *tc = compile_path("tests/golden/sim/mma_transposed_a.fus");
		Stmt *ld = frag_load(tc, 'a');
		ck_assert_uint_eq(ld->mma.ldm, 0);
		if (mutate) {
			IrExpr *t = ld->mma.idx[0];
			ld->mma.idx[0] = ld->mma.idx[2];
			ld->mma.idx[2] = t;
		}
		SimResult r;
		int64_t bad = simulate(tc, &r);
		if (mutate)
			ck_assert_int_gt(bad, 0);
		else
			ck_assert_int_eq(bad, 0);
		sim_result_free(&r);
		tc_free(tc);
	}
}
END_TEST

/* mma_bf16_tails.fus: a warp tile of 2 x 2 instructions (mo, no unrolled) loads each A
 * fragment once per mo and each B fragment once per no, before the tile's loops; the results
 * match; an mma that reads the A registers of the other mo is a mismatch. */
START_TEST(test_fragments_loaded_once_per_warp_tile)
{
	TestCompile *tc = compile_path("tests/golden/sim/mma_bf16_tails.fus");
	int la, lb;
	Stmt *fa = frag_load_in(tc->kernels[0]->body, 'a', 0, &la);
	Stmt *fb = frag_load_in(tc->kernels[0]->body, 'b', 0, &lb);
	Stmt **mm_list = list_of_mma(&tc->kernels[0]->body);
	int lm;
	ck_assert(fa && fb && mm_list);
	ck_assert_ptr_null(frag_load_in(*mm_list, 'a', 0, &lm)); /* not beside the mma */
	ck_assert_int_eq(la, lb);
	ck_assert_int_eq(fa->mma.tensor->sched.mma_frag, true);
	int64_t na, nb;
	ck_assert(ir_is_const(fa->mma.tensor->shape[0], &na) && ir_is_const(fb->mma.tensor->shape[0], &nb));
	ck_assert_int_eq(na, 16); /* 2 (mo) x 8 */
	ck_assert_int_eq(nb, 8);  /* 2 (no) x 4 */
	SimResult r;
	ck_assert_int_eq(simulate(tc, &r), 0);
	tc_assert_no_reports(tc, &r);
	sim_result_free(&r);
	Stmt *m = the_mma(tc);
	Arena *a = tc->kernels[0]->arena;
	for (int i = m->mma.instr->nc; i < m->mma.instr->nc + m->mma.instr->na; i++) {
		IrExpr *e = m->mma.idx[i];
		m->mma.idx[i] = ir_load(a, e->tensor, ix_mod(a, NULL, ix_add(a, e->args[0], ir_int(a, 8)), ir_int(a, 16)));
		m->mma.idx[i]->dtype = e->dtype;
	}
	ck_assert_int_gt(simulate(tc, &r), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

static IrExpr *lane_low16(Arena *a, IrExpr *e, void *ctx)
{
	(void)ctx;
	if (e->kind != EX_PAR || e->par != PT_TIDX)
		return e;
	return ix_mod(a, NULL, e, ir_int(a, 16));
}

/* hgemm_ldmatrix.fus loads B two n tiles at a time (ldmatrix.x4.trans, lanes 16 .. 31 the
 * rows of the second); matches at M = 33, K = 40, N = 24; lanes 16 .. 31 giving the rows of
 * the first tile again is a mismatch. */
START_TEST(test_ldmatrix_x4_trans_pairs_tiles)
{
	TestCompile *tc = compile_path("examples/gemm/hgemm_ldmatrix.fus");
	const int64_t sizes[3] = {33, 40, 24};
	Stmt *b = frag_load(tc, 'b');
	ck_assert_int_eq(b->mma.tiles, 2);
	SimResult r;
	ck_assert_int_eq(simulate_at(tc, &r, sizes), 0);
	tc_assert_no_reports(tc, &r);
	sim_result_free(&r);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16");
	free(cu);
	b->mma.idx[0] = ir_rewrite(tc->kernels[0]->arena, b->mma.idx[0], lane_low16, NULL);
	ck_assert_int_gt(simulate_at(tc, &r, sizes), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* hgemm_ldmatrix.fus pads As's rows of 64 halves to 72 (pad(8, 64)): the cp.async copies
 * write the padded layout; an ldmatrix that reads the unpadded one (row address o becomes
 * o - o / 72 * 8) is a mismatch. */
START_TEST(test_pad_dropped_by_the_reader_mismatch)
{
	TestCompile *tc = compile_path("examples/gemm/hgemm_ldmatrix.fus");
	const int64_t sizes[3] = {33, 40, 24};
	Stmt *a = frag_load(tc, 'a');
	ck_assert_int_eq(a->mma.idx[0]->tensor->sched.pad_every, 64);
	SimResult r;
	ck_assert_int_eq(simulate_at(tc, &r, sizes), 0);
	sim_result_free(&r);
	Arena *ar = tc->kernels[0]->arena;
	IrExpr *e = a->mma.idx[0], *o = e->args[0];
	IrExpr *unpadded = ix_sub(ar, o, ix_mul(ar, ix_div(ar, NULL, o, ir_int(ar, 72)), ir_int(ar, 8)));
	a->mma.idx[0] = ir_load(ar, e->tensor, unpadded);
	a->mma.idx[0]->dtype = e->dtype;
	ck_assert_int_gt(simulate_at(tc, &r, sizes), 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* ---- swizzle(S): the address function and hgemm_swizzle.fus ---------------------------- */

/* index_swizzle on every offset of a buffer of r rows of w elements of es bytes: a
 * permutation that keeps each 16-byte chunk whole and in place within it; with rows of S
 * bytes, the hardware's formula (TMA's SWIZZLE_<S>B, CUTLASS Swizzle<log2(S/16), 4, 3>) on
 * byte addresses; and, in every panel, the 8 rows of one chunk column that an ldmatrix matrix
 * reads fall in 8 different 16-byte bank groups. */
START_TEST(test_swizzle_address_function)
{
	Arena *a = arena_new();
	static const int64_t es_list[] = {2, 4}, s_list[] = {32, 64, 128};
	for (int ie = 0; ie < 2; ie++)
		for (int is = 0; is < 3; is++)
			for (int panels = 1; panels <= 2; panels++) {
				int64_t es = es_list[ie], S = s_list[is], w = panels * S / es, r = 16;
				int64_t n = r * w, c = 16 / es, *phys = malloc(sizeof(int64_t) * (size_t)n);
				char *seen = calloc((size_t)n, 1);
				for (int64_t o = 0; o < n; o++) {
					int64_t v;
					ck_assert(ir_is_const(index_swizzle(a, NULL, ir_int(a, o), es, S, w, r), &v));
					ck_assert_msg(v >= 0 && v < n && !seen[v], "es %lld S %lld w %lld: %lld -> %lld",
						      (long long)es, (long long)S, (long long)w, (long long)o, (long long)v);
					seen[v] = 1;
					phys[o] = v;
					ck_assert_int_eq(v % c, o % c);
					ck_assert_int_eq(v - o % c, phys[o - o % c]);
					if (panels == 1) {
						int64_t b = o * es, hw = b ^ (((b >> 7) & (S / 16 - 1)) << 4);
						ck_assert_int_eq(v * es, hw);
					}
				}
				/* row `row` of panel p, chunk cc: logical offset row * w + p * S / es + cc * c */
				for (int64_t p = 0; p < panels; p++)
					for (int64_t row0 = 0; row0 < r; row0 += 8)
						for (int64_t cc = 0; cc < S / 16; cc++) {
							unsigned groups = 0;
							for (int64_t row = row0; row < row0 + 8; row++) {
								int64_t o = row * w + p * S / es + cc * c;
								groups |= 1u << (phys[o] * es % 128 / 16);
							}
							ck_assert_int_eq(__builtin_popcount(groups), 8);
						}
				free(phys);
				free(seen);
			}
	arena_free(a);
}
END_TEST

/* XOR nodes replaced by their first operand: the chunk left where the unswizzled layout has it */
static IrExpr *drop_xor(Arena *a, IrExpr *e, void *ctx)
{
	(void)a;
	(void)ctx;
	return e->kind == EX_OP && e->op == OP_XOR ? e->args[0] : e;
}

static bool drop_xor_slot(IrExpr **slot, void *ctx)
{
	*slot = ir_rewrite(ctx, *slot, drop_xor, NULL);
	return false; /* on to the next slot */
}

/* Every cp.async into tensor `name` in list s writes the unswizzled layout. */
static int unswizzle_writes(Arena *a, Stmt *s, const char *name)
{
	int n = 0;
	for (; s; s = s->next) {
		if (s->kind == KS_CP_ASYNC && !strcmp(s->copy.tensor->name, name)) {
			ir_stmt_exprs(s, drop_xor_slot, a);
			n++;
		}
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += unswizzle_writes(a, *lists[i], name);
	}
	return n;
}

/* hgemm_swizzle.fus swizzles both operand tiles (swizzle(128B, 64) and (128B, 128)): it
 * matches the reference at sizes no tile divides, and the writers (cp.async) and the readers
 * (ldmatrix, .trans for B) share the layout: an ldmatrix that reads the unswizzled one, or
 * copies that write it, give wrong results. */
START_TEST(test_swizzle_dropped_on_one_side_mismatch)
{
	static const int64_t sizes[][3] = {{33, 40, 24}, {70, 48, 136}};
	SimResult r;
	for (int i = 0; i < 2; i++) {
		TestCompile *tc = compile_path("examples/gemm/hgemm_swizzle.fus");
		ck_assert_int_eq(simulate_at(tc, &r, sizes[i]), 0);
		tc_assert_no_reports(tc, &r);
		sim_result_free(&r);
		tc_free(tc);
	}
	for (int op = 0; op < 2; op++) { /* the reader of A, then of B */
		TestCompile *tc = compile_path("examples/gemm/hgemm_swizzle.fus");
		Stmt *l = frag_load(tc, op ? 'b' : 'a');
		ck_assert_int_eq(l->mma.idx[0]->tensor->sched.swizzle, 128);
		IrExpr *e = l->mma.idx[0];
		l->mma.idx[0] = ir_rewrite(tc->kernels[0]->arena, e, drop_xor, NULL);
		ck_assert_ptr_ne(l->mma.idx[0], e);
		ck_assert_int_gt(simulate_at(tc, &r, sizes[0]), 0);
		sim_result_free(&r);
		tc_free(tc);
	}
	for (int op = 0; op < 2; op++) { /* the writers of A, then of B */
		TestCompile *tc = compile_path("examples/gemm/hgemm_swizzle.fus");
		Kernel *k = tc->kernels[0];
		ck_assert_int_gt(unswizzle_writes(k->arena, k->body, op ? "B_smem" : "A_smem"), 0);
		ck_assert_int_gt(simulate_at(tc, &r, sizes[0]), 0);
		sim_result_free(&r);
		tc_free(tc);
	}
}
END_TEST

/* The bank model (docs/check.md, "Bank conflicts"): rows of 128 bytes at one chunk column are
 * 8 wavefronts, rows of 144 bytes (pad(8, 64)) 1, one address for all 8 rows 1 (a broadcast);
 * hgemm_swizzle.fus's and hgemm_ldmatrix.fus's ldmatrix phases are all 1, and the swizzled
 * GEMM with every XOR dropped (writers and readers: still the right result) takes 8. */
START_TEST(test_ldmatrix_bank_wavefronts)
{
	int64_t o[8];
	for (int i = 0; i < 8; i++)
		o[i] = 64 * i;
	ck_assert_int_eq(sim_ldm_wavefronts(o, 2), 8);
	for (int i = 0; i < 8; i++)
		o[i] = 72 * i;
	ck_assert_int_eq(sim_ldm_wavefronts(o, 2), 1);
	for (int i = 0; i < 8; i++)
		o[i] = 64 * i + 8 * (i ^ 3);
	ck_assert_int_eq(sim_ldm_wavefronts(o, 2), 1);
	for (int i = 0; i < 8; i++)
		o[i] = 128 + (i % 2) * 64; /* two rows 128 bytes apart: one bank group, 2 */
	ck_assert_int_eq(sim_ldm_wavefronts(o, 2), 2);
	for (int i = 0; i < 8; i++)
		o[i] = 40;
	ck_assert_int_eq(sim_ldm_wavefronts(o, 2), 1);

	static const char *const files[] = {"examples/gemm/hgemm_swizzle.fus",
					    "examples/gemm/hgemm_ldmatrix.fus"};
	const int64_t sizes[3] = {33, 40, 24};
	SimResult r;
	for (int f = 0; f < 3; f++) {
		TestCompile *tc = compile_path(files[f % 2]);
		if (f == 2) { /* hgemm_swizzle, unswizzled everywhere */
			Kernel *k = tc->kernels[0];
			ir_stmts_rewrite(k->arena, k->body, drop_xor, NULL);
		}
		ck_assert_int_eq(simulate_at(tc, &r, sizes), 0);
		ck_assert_int_gt(r.ldm_phases, 0);
		ck_assert_int_eq(r.ldm_worst, f == 2 ? 8 : 1);
		ck_assert_int_eq(r.ldm_wavefronts, (f == 2 ? 8 : 1) * r.ldm_phases);
		tc_assert_no_reports(tc, &r); /* frees r */
		tc_free(tc);
	}
}
END_TEST

/* ---- mma_pipeline: fragments one k step ahead (hgemm_ldmatrix.fus, 2 steps per ko) ---- */

static bool is_kind(Stmt *s, void *kind)
{
	return s->kind == *(StmtKind *)kind;
}

/* The link to the first statement of list whose subtree holds a statement of kind. */
static Stmt **link_holding(Stmt **link, StmtKind kind)
{
	for (; *link; link = &(*link)->next) {
		Stmt *next = (*link)->next;
		(*link)->next = NULL;
		bool has = ir_stmts_any(*link, is_kind, &kind);
		(*link)->next = next;
		if (has)
			return link;
	}
	return NULL;
}

/* The mainloop over ko: the loop whose body holds the mma and a barrier at its top level. */
static Stmt *mainloop(Stmt *list)
{
	for (Stmt *s = list; s; s = s->next) {
		if (s->kind == KS_FOR && find_link(&s->loop.body, KS_MMA) &&
		    link_holding(&s->loop.body, KS_SYNC) && (*link_holding(&s->loop.body, KS_SYNC))->kind == KS_SYNC)
			return s;
		Stmt **lists[3], *r = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !r; i++)
			r = mainloop(*lists[i]);
		if (r)
			return r;
	}
	return NULL;
}

/* The parts of hgemm_ldmatrix's pipelined mainloop: its body is [prefetch, commit, loads of
 * step 1 (*ld1), mma of step 0 (*mm0), loads of step 2, ..., mma of the last step but one,
 * wait (*wait), barrier, if (ko + 1 < E) loads of step 0 (next), mma of the last step]. */
typedef struct Pipe {
	TestCompile *tc;
	Stmt *L, **ld1, **mm0, **wait, *sync, *next;
} Pipe;

static Pipe pipe_compile(void)
{
	Pipe p = {.tc = compile_path("examples/gemm/hgemm_ldmatrix.fus")};
	p.L = mainloop(p.tc->kernels[0]->body);
	ck_assert_msg(p.L, "no mainloop");
	p.ld1 = link_holding(&p.L->loop.body, KS_MMA_LOAD);
	p.mm0 = link_holding(&p.L->loop.body, KS_MMA);
	p.wait = link_holding(&p.L->loop.body, KS_CP_WAIT);
	ck_assert(p.ld1 && p.mm0 && p.wait);
	ck_assert_int_eq((*p.wait)->kind, KS_CP_WAIT);
	p.sync = (*p.wait)->next;
	ck_assert_int_eq(p.sync->kind, KS_SYNC);
	p.next = p.sync->next;
	ck_assert_int_eq(p.next->kind, KS_IF);
	return p;
}

static IrExpr *ko_minus_1(Arena *a, IrExpr *e, void *ko)
{
	return e->kind == EX_VAR && e->var == ko ? ix_sub(a, e, ir_int(a, 1)) : e;
}

/* The loads of step 1 come before the mma of step 0, the wait and the barrier before the
 * guarded loads of the next iteration's step 0, which come before the mma of step 1; the
 * results match at K = 200 (4 iterations of 3 stages) and 40 (fewer than the stages) with no
 * report. Each on a fresh compile: the barrier after the next iteration's loads is a race; the
 * wait dropped, a read of a cp.async destination before its wait; the next iteration's loads
 * from this iteration's slot (ko instead of ko + 1), a mismatch. */
START_TEST(test_pipelined_fragments)
{
	const int64_t sizes[2][3] = {{33, 200, 24}, {33, 40, 24}};
	Pipe p = pipe_compile();
	ck_assert_ptr_ne(*p.ld1, *p.mm0);
	ck_assert_int_eq((*p.ld1)->kind, KS_FOR); /* loads of step 1: the loop over mo */
	int mmas = 0, loads = 0; /* 4 k steps: 3 of each before the wait */
	for (Stmt *s = *p.ld1; s != *p.wait; s = s->next) {
		Stmt *save = s->next;
		s->next = NULL;
		mmas += find_link(&s, KS_MMA) != NULL;
		loads += find_link(&s, KS_MMA_LOAD) != NULL;
		s->next = save;
	}
	ck_assert_int_eq(mmas, 3);
	ck_assert_int_eq(loads, 6); /* A and B */
	ck_assert(ir_mentions(p.next->branch.cond, p.L->loop.var));
	ck_assert(find_link(&p.next->branch.then, KS_MMA_LOAD) && !find_link(&p.next->branch.then, KS_MMA));
	ck_assert(find_link(&p.next->next, KS_MMA));
	SimResult r;
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(simulate_at(p.tc, &r, sizes[i]), 0);
		tc_assert_no_reports(p.tc, &r);
	}
	tc_free(p.tc);

	p = pipe_compile(); /* wait, loads, barrier */
	Stmt *last = p.next->next;
	(*p.wait)->next = p.next;
	p.next->next = p.sync;
	p.sync->next = last;
	simulate_at(p.tc, &r, sizes[0]);
	ck_assert_int_gt(count_kind(&r, SF_RACE), 0);
	sim_result_free(&r);
	tc_free(p.tc);

	p = pipe_compile(); /* no wait */
	*p.wait = p.sync;
	simulate_at(p.tc, &r, sizes[0]);
	ck_assert_int_gt(count_kind(&r, SF_ASYNC_READ), 0);
	sim_result_free(&r);
	tc_free(p.tc);

	p = pipe_compile(); /* this iteration's slot */
	ir_stmts_rewrite(p.tc->kernels[0]->arena, p.next->branch.then, ko_minus_1, p.L->loop.var);
	ck_assert_int_gt(simulate_at(p.tc, &r, sizes[0]), 0);
	sim_result_free(&r);
	tc_free(p.tc);
}
END_TEST

START_TEST(test_arch_below_sm80_is_an_error)
{
	char *src = read_file("tests/golden/ok/mma_one_warp.fus");
	LowerOptions o = {.arch = 75, .verify = true};
	TestCompile *tc = tc_compile_opts(src, &o);
	free(src);
	ck_assert_ptr_null(tc->kernels);
	ck_assert_contains(tc->diags, "error: mma.sync needs sm_80, but the target is sm_75");
	ck_assert_contains(tc->diags, "Cl.mma(m16n8k16);");
	tc_free(tc);
}
END_TEST

Suite *mma_suite(void)
{
	Suite *s = suite_create("mma");
	TCase *c = tcase_create("core");
	tcase_set_timeout(c, 60);
	tcase_add_test(c, test_fragment_tables_are_bijections);
	tcase_add_test(c, test_unmutated_matches_reference);
	tcase_add_test(c, test_swapped_a_elements_mismatch);
	tcase_add_test(c, test_b_from_other_lane_mismatch);
	tcase_add_test(c, test_swapped_accumulators_mismatch);
	tcase_add_test(c, test_sync_removed_is_race);
	tcase_add_test(c, test_half_warp_is_reported);
	tcase_add_test(c, test_ldmatrix_matches_reference);
	tcase_add_test(c, test_ldmatrix_rows_of_other_lanes_mismatch);
	tcase_add_test(c, test_ldmatrix_misaligned_row_is_reported);
	tcase_add_test(c, test_fragments_loaded_once_per_warp_tile);
	tcase_add_test(c, test_ldmatrix_x4_trans_pairs_tiles);
	tcase_add_test(c, test_ldmatrix_transposed_operands_match_reference);
	tcase_add_test(c, test_ldmatrix_wrong_transposition_mismatch);
	tcase_add_test(c, test_transposed_lane_loads);
	tcase_add_test(c, test_pad_dropped_by_the_reader_mismatch);
	tcase_add_test(c, test_swizzle_address_function);
	tcase_add_test(c, test_swizzle_dropped_on_one_side_mismatch);
	tcase_add_test(c, test_ldmatrix_bank_wavefronts);
	tcase_add_test(c, test_pipelined_fragments);
	tcase_add_test(c, test_arch_below_sm80_is_an_error);
	suite_add_tcase(s, c);
	return s;
}
