/* check_ir.c: expression constructors and printer, folding helpers, the simplifier and
 * ir_range, kernel IR names and printer, and the verifier. Everything is built by hand here,
 * so these tests do not depend on the front end. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static Arena *A;

static void setup(void)
{
	A = arena_new();
}

static void teardown(void)
{
	arena_free(A);
}

/* Prints e into a static buffer (valid until the next call). */
static const char *str(IrExpr *e)
{
	static char s[1024];
	Buf b = {0};
	ir_print_expr(e, &b);
	snprintf(s, sizeof s, "%s", b.s);
	buf_free(&b);
	return s;
}

static Var *loopvar(const char *name, int64_t extent)
{
	Var *v = NEW(A, Var);
	v->name = name;
	v->dtype = DT_I64;
	v->extent = ir_int(A, extent);
	return v;
}

static Tensor *tensor(const char *name, int ndim)
{
	Tensor *t = NEW(A, Tensor);
	t->name = name;
	t->dtype = DT_F32;
	t->ndim = ndim;
	t->kind = TK_OUTPUT;
	return t;
}

static Param *param(const char *name)
{
	Param *p = NEW(A, Param);
	p->name = name;
	p->dtype = DT_F32;
	return p;
}

static IrExpr *pexpr(Param *p)
{
	IrExpr *e = ir_float(A, DT_F32, 0);
	e->kind = EX_PARAM;
	e->param = p;
	return e;
}

static IrExpr *f32op(IrOp op, IrExpr *l, IrExpr *r)
{
	return ir_op(A, op, DT_F32, l, r);
}

/* ---- printer -------------------------------------------------------------------------- */

START_TEST(print_saxpy)
{
	Var *i = loopvar("i", 8);
	Tensor *x = tensor("x", 1), *y = tensor("y", 1);
	IrExpr *ix = ir_var(A, i);
	IrExpr *e = f32op(OP_ADD, f32op(OP_MUL, pexpr(param("a")), ir_access(A, x, &ix, 1)),
			  ir_access(A, y, &ix, 1));
	ck_assert_str_eq(str(e), "a * x[i] + y[i]");
	ck_assert_str_eq(str(ir_load(A, x, ir_int(A, 3))), "x[3]");
}
END_TEST

START_TEST(print_parentheses)
{
	IrExpr *a = pexpr(param("a")), *b = pexpr(param("b")), *c = pexpr(param("c"));
	ck_assert_str_eq(str(f32op(OP_MUL, f32op(OP_ADD, a, b), c)), "(a + b) * c");
	ck_assert_str_eq(str(f32op(OP_SUB, f32op(OP_SUB, a, b), c)), "a - b - c");
	ck_assert_str_eq(str(f32op(OP_SUB, a, f32op(OP_SUB, b, c))), "a - (b - c)");
	ck_assert_str_eq(str(f32op(OP_DIV, a, f32op(OP_MUL, b, c))), "a / (b * c)");
	ck_assert_str_eq(str(f32op(OP_NEG, f32op(OP_ADD, a, b), NULL)), "-(a + b)");
	ck_assert_str_eq(str(f32op(OP_MUL, f32op(OP_NEG, a, NULL), b)), "-a * b");
	ck_assert_str_eq(str(f32op(OP_MAX, a, f32op(OP_ADD, b, c))), "max(a, b + c)");
	ck_assert_str_eq(str(f32op(OP_EXP, f32op(OP_SUB, a, b), NULL)), "exp(a - b)");
	IrExpr *lt = ir_op(A, OP_LT, DT_BOOL, a, b);
	ck_assert_str_eq(str(ir_select(A, lt, a, f32op(OP_ADD, b, c))), "a < b ? a : b + c");
	ck_assert_str_eq(str(ir_op(A, OP_AND, DT_BOOL, lt, ir_op(A, OP_OR, DT_BOOL, lt, lt))),
			 "a < b && (a < b || a < b)");
	ck_assert_str_eq(str(ir_cast(A, DT_F32, ir_int(A, 3))), "f32(3)");
	ck_assert_str_eq(str(ir_par(A, PT_TIDX)), "threadIdx.x");
	ck_assert_str_eq(str(ir_bool(A, true)), "true");
	ck_assert_str_eq(str(ir_op(A, OP_SUB, DT_I64, ir_int(A, 1), ir_int(A, -2))), "1 - -2");
	ck_assert_str_eq(str(ir_op(A, OP_NEG, DT_I64, ir_int(A, -2), NULL)), "-(-2)");
}
END_TEST

START_TEST(print_floats)
{
	ck_assert_str_eq(str(ir_float(A, DT_F32, 2.0)), "2.0");
	ck_assert_str_eq(str(ir_float(A, DT_F32, 0.1f)), "0.1");
	ck_assert_str_eq(str(ir_float(A, DT_F64, 0.1)), "0.1");
	ck_assert_str_eq(str(ir_float(A, DT_F32, 1e20)), "1e+20");
	ck_assert_str_eq(str(ir_float(A, DT_F32, -INFINITY)), "-inf");
}
END_TEST

START_TEST(print_reduce)
{
	Tensor *x = tensor("x", 2);
	Axis *i = NEW(A, Axis), *j = NEW(A, Axis);
	i->name = "i";
	j->name = "j";
	IrExpr *sub[2] = {ir_axis(A, i), ir_axis(A, j)};
	IrExpr *r = NEW(A, IrExpr);
	r->kind = EX_REDUCE;
	r->dtype = DT_F32;
	r->red = RED_SUM;
	r->nred = 1;
	r->red_axes = &j;
	r->nargs = 1;
	r->args = arena_alloc(A, sizeof(IrExpr *));
	r->args[0] = ir_access(A, x, sub, 2);
	ck_assert_str_eq(str(r), "sum(j: x[i, j])");
}
END_TEST

/* ---- folding helpers and simplifier --------------------------------------------------- */

START_TEST(fold_identities)
{
	IrExpr *i = ir_var(A, loopvar("i", 8));
	ck_assert_ptr_eq(ix_add(A, i, ir_int(A, 0)), i);
	ck_assert_ptr_eq(ix_mul(A, ir_int(A, 1), i), i);
	ck_assert_str_eq(str(ix_mul(A, i, ir_int(A, 0))), "0");
	ck_assert_str_eq(str(ix_mul(A, ir_int(A, 4), i)), "i * 4");
	ck_assert_str_eq(str(ix_add(A, ir_int(A, 3), ir_int(A, 4))), "7");
	ck_assert_str_eq(str(ix_ceildiv(A, NULL, ir_int(A, 10), ir_int(A, 4))), "3");
	ck_assert_str_eq(str(ix_ceildiv(A, NULL, ir_int(A, 8), ir_int(A, 4))), "2");
	ck_assert_str_eq(str(ix_sub(A, i, i)), "0");
	ck_assert_ptr_eq(ix_and(A, NULL, i), i);
}
END_TEST

/* Folding never wraps (issue 11 item 13): a constant operation that overflows i64, or
 * INT64_MIN / -1, stays an operation; ceildiv of values near 2^63 folds exactly. (Built with
 * SAN=1, any signed overflow here would also be a UBSan report.) */
START_TEST(fold_never_overflows)
{
	IrExpr *max = ir_int(A, INT64_MAX), *min = ir_int(A, INT64_MIN);
	IrExpr *i = ir_var(A, loopvar("i", 8));
	int64_t v;
	ck_assert(!ir_is_const(ix_add(A, max, ir_int(A, 1)), NULL));
	ck_assert(!ir_is_const(ix_sub(A, min, ir_int(A, 1)), NULL));
	ck_assert(!ir_is_const(ix_mul(A, max, ir_int(A, 2)), NULL));
	ck_assert(!ir_is_const(ix_mul(A, ir_int(A, 2), max), NULL)); /* no endless swap */
	ck_assert(!ir_is_const(ix_div(A, NULL, min, ir_int(A, -1)), NULL));
	ck_assert(!ir_is_const(ix_mod(A, NULL, min, ir_int(A, -1)), NULL));
	ck_assert_str_eq(str(ix_mul(A, ix_mul(A, i, max), ir_int(A, 2))),
			 "i * 9223372036854775807 * 2");
	ck_assert_str_eq(str(ix_add(A, ix_add(A, i, max), ir_int(A, 1))),
			 "i + 9223372036854775807 + 1");
	ck_assert(ir_is_const(ix_ceildiv(A, NULL, max, ir_int(A, 2)), &v));
	ck_assert_int_eq(v, INT64_MAX / 2 + 1);
	ck_assert(ir_is_const(ix_ceildiv(A, NULL, max, max), &v));
	ck_assert_int_eq(v, 1);
	IrExpr *cd = ix_ceildiv(A, NULL, ir_op(A, OP_CEILDIV, DT_I64, i, ir_int(A, INT64_MAX / 2)),
				ir_int(A, 4));
	ck_assert_str_eq(str(cd), "ceildiv(ceildiv(i, 4611686018427387903), 4)");
	ck_assert(!ir_is_const(ir_simplify(A, NULL, ir_op(A, OP_NEG, DT_I64, min, NULL)), NULL));
}
END_TEST

START_TEST(fold_split_identities)
{
	IrExpr *a = ir_var(A, loopvar("a", 100));
	IrExpr *b = ir_var(A, loopvar("b", 4));
	IrExpr *b5 = ir_var(A, loopvar("c", 5));
	IrExpr *f = ir_int(A, 4);
	IrExpr *e = ix_add(A, ix_mul(A, a, f), b);
	ck_assert_str_eq(str(e), "a * 4 + b");
	ck_assert_ptr_eq(ix_div(A, NULL, e, f), a);
	ck_assert_ptr_eq(ix_mod(A, NULL, e, f), b);
	/* a remainder that can reach F stays divided (all terms are non-negative) */
	IrExpr *e5 = ix_add(A, ix_mul(A, a, f), b5);
	ck_assert_str_eq(str(ix_div(A, NULL, e5, f)), "a + c / 4");
	ck_assert_str_eq(str(ix_mod(A, NULL, e5, f)), "c % 4");
	/* and a merge read back at the end of a sum folds: a * 4 + c / 4 * 4 + c % 4 */
	IrExpr *back = ix_add(A, ix_add(A, ix_mul(A, a, f), ix_mul(A, ix_div(A, NULL, b5, f), f)),
			      ix_mod(A, NULL, b5, f));
	ck_assert_str_eq(str(back), "a * 4 + c");
	/* nested splits: (p * 1024 + q * 4 + b) % 4 -> b, / 4 -> p * 256 + q */
	IrExpr *p = ir_par(A, PT_BIDX), *q = ir_par(A, PT_TIDX);
	IrExpr *n = ix_add(A, ix_add(A, ix_mul(A, p, ir_int(A, 1024)), ix_mul(A, q, f)), b);
	ck_assert_str_eq(str(n), "blockIdx.x * 1024 + threadIdx.x * 4 + b");
	ck_assert_str_eq(str(ix_mod(A, NULL, n, f)), "b");
	ck_assert_str_eq(str(ix_div(A, NULL, n, f)), "blockIdx.x * 256 + threadIdx.x");
	/* distribution keeps sums flat */
	ck_assert_str_eq(str(ix_mul(A, ix_add(A, p, q), ir_int(A, 10))),
			 "blockIdx.x * 10 + threadIdx.x * 10");
	/* x % 4 is x when x < 4 */
	ck_assert_ptr_eq(ix_mod(A, NULL, b, f), b);
	ck_assert_str_eq(str(ix_div(A, NULL, b, f)), "0");
	/* a sum whose left part, itself a sum, has no multiple of F (issue 11: the left part's
	 * quotient was left unset, a crash on nested splits of a merge) */
	IrExpr *lm = ix_add(A, ix_add(A, b, b5), ix_mul(A, a, f));
	ck_assert_str_eq(str(lm), "b + c + a * 4");
	ck_assert_str_eq(str(ix_div(A, NULL, lm, f)), "a + (b + c) / 4");
	ck_assert_str_eq(str(ix_mod(A, NULL, lm, f)), "(b + c) % 4");
}
END_TEST

START_TEST(simplify_exprs)
{
	SizeSym n = {.name = "N"};
	IrExpr *i = ir_var(A, loopvar("i", 8));
	IrExpr *N = ir_size(A, &n);
	IrExpr *e = ir_op(A, OP_ADD, DT_I64, ir_op(A, OP_MUL, DT_I64, i, ir_int(A, 1)),
			  ir_int(A, 0));
	ck_assert_str_eq(str(e), "i * 1 + 0");
	ck_assert_str_eq(str(ir_simplify(A, NULL, e)), "i");
	/* comparisons decided by ranges */
	ck_assert_str_eq(str(ir_simplify(A, NULL, ir_op(A, OP_LT, DT_BOOL, i, ir_int(A, 8)))), "true");
	ck_assert_str_eq(str(ir_simplify(A, NULL, ir_op(A, OP_LT, DT_BOOL, i, ir_int(A, 7)))), "i < 7");
	ck_assert_str_eq(str(ir_simplify(A, NULL, ir_op(A, OP_GE, DT_BOOL, i, ir_int(A, 8)))), "false");
	ck_assert_str_eq(str(ir_simplify(A, NULL, ir_op(A, OP_LT, DT_BOOL, i, N))), "i < N");
	/* a loop variable is below its own symbolic extent */
	Var *j = loopvar("j", 0);
	j->extent = N;
	ck_assert_str_eq(str(ir_simplify(A, NULL, ix_lt(A, ir_var(A, j), N))), "true");
	/* logic */
	IrExpr *c = ir_op(A, OP_LT, DT_BOOL, i, N);
	ck_assert_str_eq(str(ir_simplify(A, NULL, ir_op(A, OP_AND, DT_BOOL, ir_bool(A, true), c))),
			 "i < N");
	ck_assert_str_eq(str(ir_simplify(A, NULL, ir_op(A, OP_AND, DT_BOOL, c, ir_bool(A, false)))),
			 "false");
	ck_assert_str_eq(str(ir_simplify(A, NULL, ir_select(A, ir_bool(A, true), i, N))), "i");
	/* float folding, but never identities that NaN or -0.0 break */
	IrExpr *x = pexpr(param("x"));
	ck_assert_str_eq(str(ir_simplify(A, NULL, f32op(OP_MUL, x, ir_float(A, DT_F32, 0)))), "x * 0.0");
	ck_assert_str_eq(str(ir_simplify(A, NULL, f32op(OP_ADD, ir_float(A, DT_F32, 1.5),
						  ir_float(A, DT_F32, 2)))), "3.5");
	/* ceildiv of ceildiv */
	ck_assert_str_eq(str(ix_ceildiv(A, NULL, ix_ceildiv(A, NULL, N, ir_int(A, 4)), ir_int(A, 64))),
			 "ceildiv(N, 256)");
}
END_TEST

START_TEST(ranges)
{
	int64_t lo, hi;
	IrExpr *i = ir_var(A, loopvar("i", 8));
	IrExpr *j = ir_var(A, loopvar("j", 4));
	ck_assert(ir_range(NULL, ix_add(A, ix_mul(A, i, ir_int(A, 4)), j), &lo, &hi));
	ck_assert_int_eq(lo, 0);
	ck_assert_int_eq(hi, 31);
	ck_assert(ir_range(NULL, ir_par(A, PT_TIDX), &lo, &hi));
	ck_assert_int_eq(hi, 1023);
	ck_assert(!ir_range(NULL, ir_par(A, PT_BIDX), &lo, &hi));
	ck_assert(ir_nonneg(NULL, ir_par(A, PT_BIDX)));
	ck_assert(ir_range(NULL, ir_op(A, OP_MOD, DT_I64, ir_par(A, PT_BIDX), ir_int(A, 6)), &lo, &hi));
	ck_assert_int_eq(hi, 5);
	ck_assert(ir_range(NULL, ir_op(A, OP_DIV, DT_I64, i, ir_int(A, 3)), &lo, &hi));
	ck_assert_int_eq(hi, 2);
	ck_assert(ir_range(NULL, ir_op(A, OP_SUB, DT_I64, i, j), &lo, &hi));
	ck_assert_int_eq(lo, -3);
	ck_assert_int_eq(hi, 7);
	/* with a kernel: the launch dims bound the parallel indices */
	Fusion f = {.name = "f"};
	Kernel *k = kir_new(A, &f);
	k->launch[PT_TIDX] = ir_int(A, 128);
	k->launch[PT_BIDX] = ir_int(A, 3);
	IrRange rk = ir_range_in(k);
	ck_assert(ir_range(&rk, ix_add(A, ix_mul(A, ir_par(A, PT_BIDX), ir_int(A, 128)),
				       ir_par(A, PT_TIDX)), &lo, &hi));
	ck_assert_int_eq(hi, 383);
	ck_assert(ir_range(&rk, ir_par(A, PT_TIDY), &lo, &hi)); /* not launched: extent 1 */
	ck_assert_int_eq(hi, 0);
}
END_TEST

START_TEST(equal_copy_rewrite)
{
	IrExpr *i = ir_var(A, loopvar("i", 8));
	IrExpr *e = ir_op(A, OP_ADD, DT_I64, ir_op(A, OP_MUL, DT_I64, i, ir_int(A, 2)), ir_int(A, 1));
	IrExpr *c = ir_copy(A, e);
	ck_assert_ptr_ne(c, e);
	ck_assert(ir_equal(c, e));
	ck_assert(!ir_equal(c, c->args[0]));
	ck_assert(!ir_equal(ir_int(A, 1), ir_bool(A, true))); /* dtypes differ */
	ck_assert(ir_equal(ir_float(A, DT_F32, NAN), ir_float(A, DT_F32, NAN)));
}
END_TEST

/* ---- kernel IR ------------------------------------------------------------------------ */

START_TEST(kir_names_and_print)
{
	Tensor *z = tensor("z", 1);
	z->sched.mem = MEM_GLOBAL;
	Tensor *ts[] = {z};
	Fusion f = {.name = "f", .tensors = ts, .ntensors = 1};
	Kernel *k = kir_new(A, &f);
	ck_assert_str_eq(k->name, "f_kernel");
	Var *i = kir_new_var(k, "i", DT_I64);
	Var *i1 = kir_new_var(k, "i", DT_I64);
	Var *zz = kir_new_var(k, "z", DT_I64); /* clashes with the tensor */
	Var *fl = kir_new_var(k, "float", DT_I64); /* a C keyword */
	ck_assert_str_eq(i->name, "i");
	ck_assert_str_eq(i1->name, "i_1");
	ck_assert_str_eq(zz->name, "z_1");
	ck_assert_str_eq(fl->name, "float_1");
	i->extent = ir_int(A, 4);
	i1->extent = ir_int(A, 2);
	k->launch[PT_TIDX] = ir_int(A, 32);
	IrExpr *off = ix_add(A, ix_mul(A, ir_var(A, i), ir_int(A, 2)), ir_var(A, i1));
	Stmt *st = kir_store(k, z, &off, 1, ir_float(A, DT_F32, 1));
	Stmt *inner = kir_for(k, i1, kir_if(k, ix_lt(A, off, ir_int(A, 7)), st, NULL));
	inner->loop.unroll = true;
	k->body = kir_append(kir_comment(k, "hello"), kir_for(k, i, inner));
	Buf b = {0};
	kir_print(k, &b);
	ck_assert_str_eq(b.s,
			 "kernel f_kernel block(32) {\n"
			 "  // hello\n"
			 "  for i in [0, 4) {\n"
			 "    for i_1 in [0, 2) unroll {\n"
			 "      if (i * 2 + i_1 < 7) {\n"
			 "        z[i * 2 + i_1] = 1.0;\n"
			 "      }\n"
			 "    }\n"
			 "  }\n"
			 "}\n");
	buf_free(&b);

	/* the verifier: a variable outside its loop is an internal error naming the pass */
	Diag *d = diag_new();
	ck_assert(ir_verify(k, d, "test"));
	k->body = kir_append(k->body, kir_store(k, z, &off, 1, ir_float(A, DT_F32, 2)));
	ck_assert(!ir_verify(k, d, "test"));
	char *msg = diag_render(d);
	ck_assert_msg(strstr(msg, "internal: after pass test: variable used outside its loop: i"),
		      "%s", msg);
	free(msg);
	diag_free(d);
}
END_TEST

START_TEST(verify_indexing)
{
	Tensor *z = tensor("z", 1);
	Fusion f = {.name = "f"};
	Kernel *k = kir_new(A, &f);
	IrExpr *zero = ir_int(A, 0);
	k->body = kir_store(k, z, &zero, 1, ir_float(A, DT_F32, 1));
	Diag *d = diag_new();
	ck_assert(ir_verify(k, d, "loop_nest"));
	ck_assert(!ir_verify(k, d, "indexing")); /* no offset after indexing */
	ck_assert_int_eq(diag_error_count(d), 1);
	diag_free(d);
}
END_TEST

/* ir/walk.c: every expression field of every statement kind is reached through
 * ir_stmt_exprs (circular_buffer once skipped a cp.async's size, cp_wait did not), and the
 * nested lists of loops, ifs and grid reductions through ir_stmt_lists. */
static bool mentions_i(IrExpr *e, void *v)
{
	return e->kind == EX_VAR && e->var == v;
}

static IrExpr *subst_i(Arena *a, IrExpr *e, void *j)
{
	return e->kind == EX_VAR && e->var->name[0] == 'i' ? ir_var(a, j) : e;
}

static bool is_sync(Stmt *s, void *ctx)
{
	(void)ctx;
	return s->kind == KS_SYNC;
}

START_TEST(walk_children)
{
	Var *i = loopvar("i", 8), *j = loopvar("j", 4);
	Tensor *t = tensor("t", 1), *u = tensor("u", 1);
	IrExpr *vi = ir_var(A, i);
	/* one statement an expression field of each kind, each with i only in that field */
	static const StmtKind kinds[] = {KS_IF, KS_ALLOC, KS_STORE, KS_STORE, KS_STORE, KS_STORE,
					 KS_VSTORE, KS_VSTORE, KS_CP_ASYNC, KS_CP_ASYNC, KS_LET,
					 KS_LET, KS_BLOCK_REDUCE, KS_GRID_REDUCE, KS_GRID_REDUCE,
					 KS_GRID_REDUCE, KS_GRID_REDUCE, KS_MMA};
	enum { NS = countof(kinds) };
	Stmt *s[NS];
	for (int n = 0; n < NS; n++) {
		s[n] = NEW(A, Stmt);
		s[n]->kind = kinds[n];
	}
	IrExpr **one = NEW(A, IrExpr *), **other = NEW(A, IrExpr *);
	one[0] = vi;
	other[0] = vi;
	s[0]->branch.cond = ix_lt(A, vi, ir_int(A, 3));
	s[1]->alloc.size = vi;
	s[2]->store.offset = vi;
	s[3]->store.value = ir_load(A, u, vi);
	s[4]->store.split_cond = ix_lt(A, vi, ir_int(A, 3));
	s[5]->store.idx = one;
	s[5]->store.nidx = 1;
	s[6]->copy.offset = vi;
	s[7]->copy.src_offset = vi;
	s[8]->copy.cond = ix_lt(A, vi, ir_int(A, 3));
	s[9]->copy.size = vi;
	s[10]->let.value = vi;
	s[11]->let.split_cond = ix_lt(A, vi, ir_int(A, 3));
	s[12]->block_red.value = vi;
	s[13]->grid_red.offset = vi;
	s[14]->grid_red.value = vi;
	s[15]->grid_red.part = vi;
	s[16]->grid_red.nparts = vi;
	s[17]->mma.idx = other;
	s[17]->mma.nidx = 1;
	for (int n = 0; n < NS; n++) {
		ck_assert_msg(ir_stmts_any_expr(s[n], mentions_i, i), "field %d not visited", n);
		ck_assert(!ir_stmts_any_expr(s[n], mentions_i, j));
		/* a clone rewritten with i -> j mentions j there, the original still i */
		Stmt *c = ir_stmt_clone(A, s[n]);
		ir_stmts_rewrite(A, c, subst_i, j);
		ck_assert(ir_stmts_any_expr(c, mentions_i, j) && !ir_stmts_any_expr(c, mentions_i, i));
		ck_assert(ir_stmts_any_expr(s[n], mentions_i, i));
	}
	ck_assert(ir_reads(s[3]->store.value, u) && !ir_reads(s[3]->store.value, t));
	/* substitution and mentions */
	IrExpr *e = ix_add(A, ix_mul(A, vi, ir_int(A, 4)), ir_var(A, j));
	ck_assert(ir_mentions(e, i) && ir_mentions(e, j));
	IrExpr *f = ir_subst(A, e, i, ir_int(A, 2));
	ck_assert(!ir_mentions(f, i) && ir_mentions(e, i));
	ck_assert_str_eq(str(ir_simplify(A, NULL, f)), "j + 8");
	ck_assert(ir_subst(A, NULL, i, vi) == NULL);
	/* nested lists: a sync inside a grid reduction inside an if's else inside a loop */
	Stmt *sync = NEW(A, Stmt);
	sync->kind = KS_SYNC;
	Stmt *gr = NEW(A, Stmt);
	gr->kind = KS_GRID_REDUCE;
	gr->grid_red.body = sync;
	Fusion fu = {.name = "f"};
	Kernel *k = kir_new(A, &fu);
	Stmt *loop = kir_for(k, i, kir_if(k, ir_bool(A, true), NULL, gr));
	ck_assert(ir_stmts_any(loop, is_sync, NULL));
	gr->grid_red.body = NULL;
	ck_assert(!ir_stmts_any(loop, is_sync, NULL));
}
END_TEST

Suite *ir_suite(void)
{
	Suite *s = suite_create("ir");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, print_saxpy);
	tcase_add_test(tc, print_parentheses);
	tcase_add_test(tc, print_floats);
	tcase_add_test(tc, print_reduce);
	tcase_add_test(tc, fold_identities);
	tcase_add_test(tc, fold_never_overflows);
	tcase_add_test(tc, fold_split_identities);
	tcase_add_test(tc, simplify_exprs);
	tcase_add_test(tc, ranges);
	tcase_add_test(tc, equal_copy_rewrite);
	tcase_add_test(tc, kir_names_and_print);
	tcase_add_test(tc, verify_indexing);
	tcase_add_test(tc, walk_children);
	suite_add_tcase(s, tc);
	return s;
}
