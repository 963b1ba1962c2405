/* check_sync.c: where the lowering puts barriers and how it indexes shared copies (issue 11
 * items 2 and 5; docs/lowering.md, "Barriers").
 *
 * Each case compiles a schedule through the real pipeline (verifier on) and asserts a property
 * of the final kernel IR: how many __syncthreads() there are and where (never inside a copy
 * loop whose elements each have one writer), that a copy made by fewer threads than the block
 * has is indexed without a wrap (no `%` in its shared offset) and is one vector or cp.async,
 * and the slots a circular buffer gets. The results themselves are checked by the simulator
 * on the golden files (tests/golden/ok/fewer_copy_threads.fus, tests/golden/ok/barriers.fus).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

/* ---- walking the kernel IR -------------------------------------------------------------- */

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


/* Writes in s: to the tensor named `name` (*mine) and to any other tensor (*other). */
static void writes(Stmt *s, const char *name, int *mine, int *other)
{
	for (; s; s = s->next) {
		Tensor *t = ir_stmt_write(s, NULL);
		if (t)
			*(strcmp(t->name, name) == 0 ? mine : other) += 1;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			writes(*lists[i], name, mine, other);
	}
}

/* Barriers inside the copy loops of `name`: loops whose bodies write `name` and nothing else. */
static int syncs_in_copy_loops(Stmt *s, const char *name)
{
	int n = 0;
	for (; s; s = s->next) {
		int mine = 0, other = 0;
		if (s->kind == KS_FOR) {
			writes(s->loop.body, name, &mine, &other);
			if (mine && !other)
				n += count_kind(s->loop.body, KS_SYNC);
		}
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += syncs_in_copy_loops(*lists[i], name);
	}
	return n;
}

static bool has_mod(IrExpr *e)
{
	if (!e)
		return false;
	if (e->kind == EX_OP && e->op == OP_MOD)
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (has_mod(e->args[i]))
			return true;
	return false;
}

/* The first write to `name` in s, or NULL. */
static Stmt *first_write(Stmt *s, const char *name)
{
	for (; s; s = s->next) {
		Tensor *t = ir_stmt_write(s, NULL);
		if (t && strcmp(t->name, name) == 0)
			return s;
		Stmt **lists[3], *w = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !w; i++)
			w = first_write(*lists[i], name);
		if (w)
			return w;
	}
	return NULL;
}

/* The element offset of a write (first_write). */
static IrExpr *write_offset(Stmt *w)
{
	IrExpr **off;
	ir_stmt_write(w, &off);
	return *off;
}

/* ---- item 2: fewer copying threads than readers ----------------------------------------- */

#define SCALE_FUSION(name) \
	"fusion " name "(a: f32[M, N], s: f32[M]) -> (out: f32[M, N]) { out[i, j] = a[i, j] * s[i]; }\n"
#define SCALE_OUT "  out.split(j, 128) -> (jo, ji); out.bind(i, blockIdx.x); out.bind(ji, threadIdx.x);\n"

/* The repro: 32 of the 128 threads copy 4 floats each, 16-byte cp.async, 3 slots. */
static const char repro[] =
	SCALE_FUSION("sc")
	"schedule sc {\n" SCALE_OUT
	"  ac = a.cache_after(shared); ac.cp_async(); ac.compute_at(out, jo);\n"
	"  ac.split(ji, 4) -> (ct, cv); ac.bind(ct, threadIdx.x); ac.vectorize(cv); ac.stages(3);\n"
	"}\n";

START_TEST(fewer_copy_threads_repro)
{
	TestCompile *tc = tc_lowered(repro);
	Kernel *k = tc->kernels[0];
	Stmt *w = first_write(k->body, "ac");
	/* one 16-byte cp.async at threadIdx.x * 4 (+ the slot), not `% 128` */
	ck_assert_int_eq(w->kind, KS_CP_ASYNC);
	ck_assert_int_eq(w->copy.vec, 4);
	ck_assert(!has_mod(write_offset(first_write(k->body, "ac"))));
	ck_assert_int_eq(syncs_in_copy_loops(k->body, "ac"), 0);
	/* the prologue's barrier and the loop's: the readers read what other threads copied */
	ck_assert_int_eq(count_kind(k->body, KS_SYNC), 2);
	char *ir = tc_kernel_ir(tc, 0);
	/* idle lanes stay off shared memory: the copy is a real branch on the copying threads */
	ck_assert_contains(ir, "if (threadIdx.x < 32");
	free(ir);
	tc_assert_nvrtc(tc);
	tc_free(tc);
}
END_TEST

START_TEST(fewer_copy_threads_class)
{
	static const char *const srcs[] = {
		/* one-element cp.async, not buffered */
		SCALE_FUSION("f") "schedule f {\n" SCALE_OUT
		"  ac = a.cache_after(shared); ac.cp_async(); ac.compute_at(out, jo);\n"
		"  ac.split(ji, 4) -> (ct, cv); ac.bind(ct, threadIdx.x);\n}\n",
		/* plain copy, vectorized, double buffered */
		SCALE_FUSION("f") "schedule f {\n" SCALE_OUT
		"  ac = a.cache_after(shared); ac.compute_at(out, jo);\n"
		"  ac.split(ji, 4) -> (ct, cv); ac.bind(ct, threadIdx.x); ac.vectorize(cv);\n"
		"  ac.double_buffer();\n}\n",
		/* 43 threads of 3 elements: 129 lanes for 128 elements */
		SCALE_FUSION("f") "schedule f {\n" SCALE_OUT
		"  ac = a.cache_after(shared); ac.compute_at(out, jo);\n"
		"  ac.split(ji, 3) -> (ct, cv); ac.bind(ct, threadIdx.x);\n}\n",
		/* 2-D block, copied by threadIdx.y == 0 */
		"fusion f(a: f32[M, N]) -> (out: f32[M, N]) { out[i, j] = a[i, j] + 1.0; }\n"
		"schedule f {\n"
		"  out.split(i, 8) -> (io, ii); out.split(j, 32) -> (jo, ji); out.reorder(io, jo, ii, ji);\n"
		"  out.bind(io, blockIdx.x); out.bind(ii, threadIdx.y); out.bind(ji, threadIdx.x);\n"
		"  ac = a.cache_after(shared); ac.cp_async(); ac.compute_at(out, jo);\n"
		"  ac.merge(ii, ji) -> m; ac.split(m, 8) -> (mt, mv); ac.bind(mt, threadIdx.x);\n}\n",
	};
	for (int i = 0; i < countof(srcs); i++) {
		TestCompile *tc = tc_lowered(srcs[i]);
		Kernel *k = tc->kernels[0];
		ck_assert_msg(!has_mod(write_offset(first_write(k->body, "ac"))), "case %d", i);
		ck_assert_msg(syncs_in_copy_loops(k->body, "ac") == 0, "case %d", i);
		ck_assert_msg(count_kind(k->body, KS_SYNC) >= 1, "case %d: no barrier", i);
		tc_free(tc);
	}
}
END_TEST

/* ---- item 5: barriers only for real cross-thread hazards -------------------------------- */

/* The statement before the loop over `var` in s (NULL when it is the first of its list), and
 * whether such a loop was found. */
static bool stmt_before_loop(Stmt *s, const char *var, Stmt **before)
{
	for (Stmt *prev = NULL; s; prev = s, s = s->next) {
		if (s->kind == KS_FOR && strcmp(s->loop.var->name, var) == 0) {
			*before = prev;
			return true;
		}
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			if (stmt_before_loop(*lists[i], var, before))
				return true;
	}
	return false;
}

static Stmt *alloc_of(Stmt *s, const char *name)
{
	for (; s; s = s->next) {
		if (s->kind == KS_ALLOC && strcmp(s->alloc.tensor->name, name) == 0)
			return s;
		Stmt **lists[3], *a = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !a; i++)
			a = alloc_of(*lists[i], name);
		if (a)
			return a;
	}
	return NULL;
}

/* A GEMM whose shared tiles are filled once per k-step and read into double-buffered registers:
 * the registers' prologue (under the buffering's `if (0 < 32)`) reads the tiles after the RAW
 * barrier; the k loop after it only reads shared memory, so it needs no barrier before it. */
static const char prologue[] =
	"fusion mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) { C[i, j] = sum(k: A[i, k] * B[k, j]); }\n"
	"schedule mm {\n"
	"  Cl = C.cache_before(local); As = A.cache_after(shared); Bs = B.cache_after(shared);\n"
	"  Al = As.cache_after(local); Bl = Bs.cache_after(local);\n"
	"  C.split(i, 32) -> (bi, ii); C.split(j, 32) -> (bj, ji); C.split(ii, 8) -> (iu, ty);\n"
	"  C.split(ji, 8) -> (ju, tx); C.reorder(bi, bj, iu, ju, ty, tx);\n"
	"  C.bind(bi, blockIdx.y); C.bind(bj, blockIdx.x); C.bind(ty, threadIdx.y); C.bind(tx, threadIdx.x);\n"
	"  Cl.compute_at(C, bj); Cl.split(ii, 8) -> (iu, ty); Cl.split(ji, 8) -> (ju, tx);\n"
	"  Cl.split(k, 32) -> (ko, ki); Cl.reorder(ko, ty, tx, ki, iu, ju);\n"
	"  Cl.bind(ty, threadIdx.y); Cl.bind(tx, threadIdx.x);\n"
	"  Al.compute_at(Cl, ki); Al.double_buffer(); Bl.compute_at(Cl, ki); Bl.double_buffer();\n"
	"  As.compute_at(Al, ko); As.split(ii, 8) -> (iio, ty); As.split(ki, 8) -> (kio, tx);\n"
	"  As.reorder(iio, kio, ty, tx); As.bind(ty, threadIdx.y); As.bind(tx, threadIdx.x);\n"
	"  Bs.compute_at(Bl, ko); Bs.split(ki, 8) -> (kio, ty); Bs.split(ji, 8) -> (jio, tx);\n"
	"  Bs.reorder(kio, jio, ty, tx); Bs.bind(ty, threadIdx.y); Bs.bind(tx, threadIdx.x);\n"
	"}\n";

START_TEST(no_barrier_after_register_prologue)
{
	TestCompile *tc = tc_lowered(prologue);
	Stmt *k = tc->kernels[0]->body, *before = NULL;
	/* WAR before the tiles are refilled, RAW before the prologue reads them: no more */
	ck_assert_int_eq(count_kind(k, KS_SYNC), 2);
	ck_assert(stmt_before_loop(k, "ki", &before));
	ck_assert(!before || before->kind != KS_SYNC);
	ck_assert_int_eq(syncs_in_copy_loops(k, "As") + syncs_in_copy_loops(k, "Bs"), 0);
	tc_free(tc);
}
END_TEST

/* Each thread reads back what it wrote: xs[tx * 8 + jt] is written for jt in [0, 8) and read
 * at tx * 8 + jo (+ 1 under `if (jo + 1 < 8)`, so at most tx * 8 + 7): no barrier at all. */
START_TEST(same_thread_under_a_guard)
{
	TestCompile *tc = tc_lowered(
		"fusion b(x: f32[M, 256]) -> (out: f32[M, 256]) { out[i, j] = x[i, j] + 1.0; }\n"
		"schedule b {\n"
		"  xs = x.cache_after(shared); xl = xs.cache_after(local);\n"
		"  out.split(j, 32) -> (jo, tx); out.bind(i, blockIdx.x); out.bind(tx, threadIdx.x);\n"
		"  xl.compute_at(out, tx); xl.double_buffer();\n"
		"  xs.compute_at(xl, i); xs.split(j, 32) -> (jt, ju); xs.reorder(ju, jt);\n"
		"  xs.bind(ju, threadIdx.x);\n"
		"}\n");
	ck_assert_int_eq(count_kind(tc->kernels[0]->body, KS_SYNC), 0);
	tc_free(tc);
}
END_TEST

/* t (shared) is written by thread 0 and read by the 3 threads in every iteration of jio: a WAR
 * barrier at the top of jio's body and a RAW one after the copy. The jio loop starts with its
 * own barrier, so the jo loop around it needs none before it. */
START_TEST(loop_starting_with_a_barrier)
{
	TestCompile *tc = tc_lowered(
		"fusion ca2(x: f32[M, N]) -> (s: f32[M]) { t[i, j] = exp(x[i, j]); s[i] = sum(j: t[i, j]); }\n"
		"schedule ca2 {\n"
		"  s.split(j, 7) -> (jo, ji); s.split(ji, 3) -> (jio, jii); s.bind(i, blockIdx.x);\n"
		"  s.bind(jii, threadIdx.x); t.compute_at(s, jio); t.memory(shared);\n"
		"}\n");
	Stmt *k = tc->kernels[0]->body, *before = NULL;
	ck_assert_int_eq(count_kind(k, KS_SYNC), 2);
	ck_assert(stmt_before_loop(k, "jio", &before));
	ck_assert(!before || before->kind != KS_SYNC);
	tc_free(tc);
}
END_TEST

/* Shared tiles computed inside C's k-step loop, which is inside C's loops bound to threadIdx.y
 * and threadIdx.x: each row of As belongs to one threadIdx.y (and each column of Bs to one
 * threadIdx.x), so the buffers have a part per thread index (16 x 16 floats, not 16: every
 * threadIdx.y wrote its row into the same 16 floats, a race), and each element has one writer:
 * no barrier in either copy loop, only the WAR and RAW barriers around them. */
static const char thread_tiles[] =
	"fusion mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) { C[i, j] = sum(k: A[i, k] * B[k, j]); }\n"
	"schedule mm {\n"
	"  C.split(i, 16) -> (bi, ti); C.split(j, 16) -> (bj, tj); C.split(k, 16) -> (ko, ki);\n"
	"  C.reorder(bi, bj, ti, tj, ko, ki);\n"
	"  C.bind(bi, blockIdx.y); C.bind(bj, blockIdx.x); C.bind(ti, threadIdx.y); C.bind(tj, threadIdx.x);\n"
	"  As = A.cache_after(shared); As.compute_at(C, ko); As.split(ki, 4) -> (kt, kv); As.bind(kt, threadIdx.x);\n"
	"  Bs = B.cache_after(shared); Bs.compute_at(C, ko); Bs.split(ki, 4) -> (kt, kv); Bs.bind(kt, threadIdx.y);\n"
	"}\n";

START_TEST(copy_loops_with_one_writer_per_element)
{
	int64_t n;
	TestCompile *tc = tc_lowered(thread_tiles);
	Stmt *k = tc->kernels[0]->body;
	ck_assert(ir_is_const(alloc_of(k, "As")->alloc.size, &n));
	ck_assert_int_eq(n, 16 * 16);
	ck_assert(ir_is_const(alloc_of(k, "Bs")->alloc.size, &n));
	ck_assert_int_eq(n, 16 * 16);
	ck_assert_int_eq(syncs_in_copy_loops(k, "As") + syncs_in_copy_loops(k, "Bs"), 0);
	ck_assert_int_eq(count_kind(k, KS_SYNC), 2);
	tc_free(tc);
}
END_TEST

#define CLAMP_SRC(rows)                                                                   \
	"fusion s9(A: f32[" rows ", 48], B: f32[" rows ", 48]) -> (out: f32[" rows ", 48]) {\n" \
	"  out[i, j] = A[i, j] + B[i, j];\n"                                              \
	"}\n"                                                                             \
	"schedule s9 {\n"                                                                 \
	"  As = A.cache_after(shared); As.compute_at(out, i);\n"                          \
	"  As.split(j, 4) -> (jt, jv); As.bind(jt, threadIdx.x); As.vectorize(jv);\n"     \
	"  As.cp_async(); As.stages(9);\n"                                                \
	"  out.split(j, 12) -> (jo, jt); out.bind(jt, threadIdx.x);\n"                    \
	"}\n"

/* stages(9) over a loop of constant extent E < 9: only E stages can be in flight. */
START_TEST(stages_clamped_to_the_loop)
{
	int64_t n;
	/* E = 1: nothing to overlap, not buffered: one slot of 48 floats, a wait for group 0 and
	 * the RAW barrier only (a loop of one iteration has no WAR with a next iteration) */
	TestCompile *tc = tc_lowered(CLAMP_SRC("1"));
	Stmt *k = tc->kernels[0]->body;
	ck_assert(ir_is_const(alloc_of(k, "As")->alloc.size, &n));
	ck_assert_int_eq(n, 48);
	ck_assert_int_eq(count_kind(k, KS_SYNC), 1);
	ck_assert_contains(tc->diags, "t.fus:7:18: warning: 'As' is not buffered: its buffer loop 'i' has 1 iteration, so there is nothing to overlap\n");
	tc_free(tc);
	/* E = 3: 3 slots */
	tc = tc_lowered(CLAMP_SRC("3"));
	ck_assert(ir_is_const(alloc_of(tc->kernels[0]->body, "As")->alloc.size, &n));
	ck_assert_int_eq(n, 3 * 48);
	ck_assert_contains(tc->diags, "t.fus:7:18: warning: 'As' gets 3 stages, not 9: its buffer loop 'i' has 3 iterations\n");
	tc_free(tc);
	/* E = 33: all 9 */
	tc = tc_lowered(CLAMP_SRC("33"));
	ck_assert(ir_is_const(alloc_of(tc->kernels[0]->body, "As")->alloc.size, &n));
	ck_assert_int_eq(n, 9 * 48);
	ck_assert_str_eq(tc->diags, "");
	tc_free(tc);
}
END_TEST

Suite *sync_suite(void)
{
	Suite *s = suite_create("sync");
	TCase *tc = tcase_create("barriers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, fewer_copy_threads_repro);
	tcase_add_test(tc, fewer_copy_threads_class);
	tcase_add_test(tc, no_barrier_after_register_prologue);
	tcase_add_test(tc, same_thread_under_a_guard);
	tcase_add_test(tc, loop_starting_with_a_barrier);
	tcase_add_test(tc, stages_clamped_to_the_loop);
	tcase_add_test(tc, copy_loops_with_one_writer_per_element);
	suite_add_tcase(s, tc);
	return s;
}
