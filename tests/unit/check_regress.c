/* check_regress.c: regression tests for bugs found by running fusions on the GPU. Each test
 * names the bug it guards against and asserts on the lowered kernel IR, so it runs without a
 * GPU.
 *
 * rowmax_bf16: `s[i] = max(j: x[i, j])` gave -inf on the GPU. The predicate pass groups a max
 * reduction's `s_v = x[...]; s_acc = s_v > s_acc ...;` so that one `if` guards both; when the
 * group needed no condition it returned the group's last statement in place of its first and
 * dropped `s_v = x[...]`, so the accumulation read a local that was never assigned. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

/* ---- "every local is assigned before it is read" over a kernel, in program order ---- */

typedef struct Seen {
	Var *v[256];
	int n;
	const char *unassigned; /* the first local read before any assignment, or NULL */
} Seen;

static bool seen_has(Seen *s, Var *v)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == v)
			return true;
	return false;
}

static bool is_local(Kernel *k, Var *v)
{
	for (int i = 0; i < k->locals.len; i++)
		if (VEC_AT(k->locals, Var, i) == v)
			return true;
	return false;
}

static void check_reads(Kernel *k, Seen *s, IrExpr *e)
{
	if (!e)
		return;
	if (e->kind == EX_VAR && is_local(k, e->var) && !seen_has(s, e->var) && !s->unassigned)
		s->unassigned = e->var->name;
	for (int i = 0; i < e->nargs; i++)
		check_reads(k, s, e->args[i]);
}

typedef struct Reads { Kernel *k; Seen *s; } Reads;

static bool slot_reads(IrExpr **slot, void *ctx)
{
	Reads *r = ctx;
	check_reads(r->k, r->s, *slot);
	return false;
}

static void walk(Kernel *k, Seen *s, Stmt *st)
{
	for (; st; st = st->next) {
		Reads r = {k, s};
		ir_stmt_exprs(st, slot_reads, &r);
		if (st->kind == KS_LET && !seen_has(s, st->let.var) && s->n < (int)countof(s->v))
			s->v[s->n++] = st->let.var;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(st, lists); i < nl; i++)
			walk(k, s, *lists[i]);
	}
}

/* The first local of kernel i read before it is assigned, or NULL. */
static const char *first_unassigned(TestCompile *tc, int i)
{
	Seen s = {.n = 0};
	walk(tc->kernels[i], &s, tc->kernels[i]->body);
	return s.unassigned;
}

#define ASSERT_ASSIGNED_BEFORE_USE(src)                                                    \
	do {                                                                               \
		TestCompile *tc_ = tc_compile((src), true);                                \
		ck_assert_msg(tc_->kernels != NULL, "does not lower:\n%s", tc_->diags);    \
		char *ir_ = tc_kernel_ir(tc_, 0);                                          \
		const char *u_ = first_unassigned(tc_, 0);                                 \
		ck_assert_msg(u_ == NULL, "local %s is read before it is assigned in\n%s", \
			      u_, ir_);                                                    \
		free(ir_);                                                                 \
		tc_free(tc_);                                                              \
	} while (0)

static const char *rowmax_bf16 =
	"fusion rowmax_bf16(x: bf16[M, N]) -> (s: bf16[M]) {\n"
	"  s[i] = max(j: x[i, j]);\n"
	"}\n";

START_TEST(rowmax_bf16_assigns_value_before_use)
{
	ASSERT_ASSIGNED_BEFORE_USE(rowmax_bf16);
}
END_TEST

/* The bug's shape: a serial loop whose group needs no condition. The automatic schedule of
 * reductions no longer gives this loop (it splits the row over threads and guards the group),
 * so an empty schedule block (everything serial) keeps the unguarded case covered. */
static const char *rowmax_bf16_serial =
	"fusion rowmax_bf16(x: bf16[M, N]) -> (s: bf16[M]) {\n"
	"  s[i] = max(j: x[i, j]);\n"
	"}\n"
	"schedule rowmax_bf16 {\n"
	"}\n";

START_TEST(rowmax_bf16_serial_assigns_value_before_use)
{
	ASSERT_ASSIGNED_BEFORE_USE(rowmax_bf16_serial);
}
END_TEST

START_TEST(rowmax_bf16_kernel_ir)
{
	TestCompile *tc = tc_compile(rowmax_bf16_serial, true);
	ck_assert_ptr_nonnull(tc->kernels);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "    for j in [0, N) {\n"
			       "      s_v = x[i * N + j];\n"
			       "      s_acc = s_v > s_acc || s_v != s_v ? s_v : s_acc;\n"
			       "    }\n");
	free(ir);
	tc_free(tc);
}
END_TEST

/* The automatic schedule: the value (read from the one-vector register copy x_reg) and the
 * accumulation stay together inside the tail guard. */
START_TEST(rowmax_bf16_auto_kernel_ir)
{
	TestCompile *tc = tc_compile(rowmax_bf16, true);
	ck_assert_ptr_nonnull(tc->kernels);
	char *ir = tc_kernel_ir(tc, 0);
	/* (N is a multiple of 8 in the vector kernel: the lane's guard is its vector's; the
	 * fusion's own kernel is the one for rows longer than 65536, split over blocks) */
	/* (the full row steps have no row guard, the last step has it: passes/tail_split.c) */
	ck_assert_contains(ir, "        if (blockIdx.x < M) {\n"
			       "          s_v = x_reg[jv_1];\n"
			       "          s_acc = s_v > s_acc || s_v != s_v ? s_v : s_acc;\n"
			       "        }\n");
	ck_assert_contains(ir, "        if (blockIdx.x < M && N / 131072 * 131072 + jr_1 * 131072 + u * 32768 + blockIdx.y * 2048 + threadIdx.x * 8 < N) {\n"
			       "          s_v = x_reg[jv_1];\n"
			       "          s_acc = s_v > s_acc || s_v != s_v ? s_v : s_acc;\n"
			       "        }\n");
	free(ir);
	tc_free(tc);
}
END_TEST

START_TEST(rowmin_f32_assigns_value_before_use)
{
	ASSERT_ASSIGNED_BEFORE_USE("fusion rowmin(x: f32[M, N]) -> (s: f32[M]) {\n"
				   "  s[i] = min(j: x[i, j]);\n"
				   "}\n");
}
END_TEST

/* With a non-divisible split the group is guarded: value and accumulation stay together
 * inside one `if`. */
START_TEST(rowmax_split_guards_value_and_accumulation)
{
	const char *src = "fusion rowmax(x: f32[M, N]) -> (s: f32[M]) {\n"
			  "  s[i] = max(j: x[i, j]);\n"
			  "}\n"
			  "schedule rowmax {\n"
			  "  s.split(j, 32) -> (jo, ji);\n"
			  "}\n";
	ASSERT_ASSIGNED_BEFORE_USE(src);
	TestCompile *tc = tc_compile(src, true);
	ck_assert_ptr_nonnull(tc->kernels);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "s_v = x[");
	ck_assert_contains(ir, "s_acc = s_v > s_acc || s_v != s_v ? s_v : s_acc;");
	free(ir);
	tc_free(tc);
}
END_TEST

Suite *regress_suite(void)
{
	Suite *s = suite_create("regress");
	TCase *tc = tcase_create("lowering");
	tcase_add_test(tc, rowmax_bf16_assigns_value_before_use);
	tcase_add_test(tc, rowmax_bf16_serial_assigns_value_before_use);
	tcase_add_test(tc, rowmax_bf16_kernel_ir);
	tcase_add_test(tc, rowmax_bf16_auto_kernel_ir);
	tcase_add_test(tc, rowmin_f32_assigns_value_before_use);
	tcase_add_test(tc, rowmax_split_guards_value_and_accumulation);
	suite_add_tcase(s, tc);
	return s;
}
