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
	for (; s; s = s->next)
		n += (s->kind == kind) + count_kind(s->body, kind) + count_kind(s->then, kind) +
		     count_kind(s->els, kind);
	return n;
}

static bool is_write(Stmt *s)
{
	return s->kind == KS_STORE || s->kind == KS_VSTORE || s->kind == KS_CP_ASYNC;
}

/* Writes in s: to the tensor named `name` (*mine) and to any other tensor (*other). */
static void writes(Stmt *s, const char *name, int *mine, int *other)
{
	for (; s; s = s->next) {
		if (is_write(s))
			*(strcmp(s->tensor->name, name) == 0 ? mine : other) += 1;
		writes(s->body, name, mine, other);
		writes(s->then, name, mine, other);
		writes(s->els, name, mine, other);
	}
}

/* Barriers inside the copy loops of `name`: loops whose bodies write `name` and nothing else. */
static int syncs_in_copy_loops(Stmt *s, const char *name)
{
	int n = 0;
	for (; s; s = s->next) {
		int mine = 0, other = 0;
		if (s->kind == KS_FOR) {
			writes(s->body, name, &mine, &other);
			if (mine && !other)
				n += count_kind(s->body, KS_SYNC);
		}
		n += syncs_in_copy_loops(s->body, name) + syncs_in_copy_loops(s->then, name) +
		     syncs_in_copy_loops(s->els, name);
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
		Stmt *w;
		if (is_write(s) && strcmp(s->tensor->name, name) == 0)
			return s;
		if ((w = first_write(s->body, name)) || (w = first_write(s->then, name)) ||
		    (w = first_write(s->els, name)))
			return w;
	}
	return NULL;
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
	ck_assert_int_eq(w->vec, 4);
	ck_assert(!has_mod(first_write(k->body, "ac")->offset));
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
		ck_assert_msg(!has_mod(first_write(k->body, "ac")->offset), "case %d", i);
		ck_assert_msg(syncs_in_copy_loops(k->body, "ac") == 0, "case %d", i);
		ck_assert_msg(count_kind(k->body, KS_SYNC) >= 1, "case %d: no barrier", i);
		tc_free(tc);
	}
}
END_TEST

Suite *sync_suite(void)
{
	Suite *s = suite_create("sync");
	TCase *tc = tcase_create("barriers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, fewer_copy_threads_repro);
	tcase_add_test(tc, fewer_copy_threads_class);
	suite_add_tcase(s, tc);
	return s;
}
