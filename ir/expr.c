/* expr.c: expression constructors, index-arithmetic helpers that fold as they build, structural
 * equality, deep copy, bottom-up rewriting, and the expression printer.
 *
 * Index arithmetic is i64. The ix_* helpers fold constants and the obvious identities so that
 * the lowered code stays readable even before the simplify pass runs; they never change the
 * value of an expression for any value of its variables (ix_div, ix_mod and ix_ceildiv rely
 * on ir_range, with the range facts their caller passes, for the division identities, which
 * are only applied when the remainder is provably in [0, F)).
 *
 * The printer writes C-like infix text with the fewest parentheses that keep the precedence
 * of C; it prints only names and numbers (never pointers), so it is deterministic.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* ---- constructors --------------------------------------------------------------------- */

static IrExpr *mk(Arena *a, ExprKind k, DType t)
{
	IrExpr *e = NEW(a, IrExpr);
	e->kind = k;
	e->dtype = t;
	return e;
}

static IrExpr **args_of(Arena *a, int n)
{
	return arena_alloc(a, sizeof(IrExpr *) * (size_t)(n ? n : 1));
}

IrExpr *ir_int(Arena *a, int64_t v)
{
	IrExpr *e = mk(a, EX_INT, DT_I64);
	e->ival = v;
	return e;
}

IrExpr *ir_float(Arena *a, DType t, double v)
{
	IrExpr *e = mk(a, EX_FLOAT, t);
	e->fval = v;
	return e;
}

IrExpr *ir_bool(Arena *a, bool v)
{
	IrExpr *e = mk(a, EX_INT, DT_BOOL);
	e->ival = v;
	return e;
}

IrExpr *ir_var(Arena *a, Var *v)
{
	IrExpr *e = mk(a, EX_VAR, v->dtype);
	e->var = v;
	return e;
}

IrExpr *ir_par(Arena *a, ParType p)
{
	IrExpr *e = mk(a, EX_PAR, DT_I64);
	e->par = p;
	return e;
}

IrExpr *ir_size(Arena *a, SizeSym *s)
{
	IrExpr *e = mk(a, EX_SIZE, DT_I64);
	e->size = s;
	return e;
}

IrExpr *ir_axis(Arena *a, Axis *ax)
{
	IrExpr *e = mk(a, EX_AXIS, DT_I64);
	e->axis = ax;
	return e;
}

IrExpr *ir_op(Arena *a, IrOp op, DType t, IrExpr *l, IrExpr *r)
{
	int n = op_arity(op);
	IrExpr *e = mk(a, EX_OP, t);
	e->op = op;
	e->nargs = n;
	e->args = args_of(a, n);
	e->args[0] = l;
	if (n == 2)
		e->args[1] = r;
	return e;
}

IrExpr *ir_select(Arena *a, IrExpr *c, IrExpr *t, IrExpr *f)
{
	IrExpr *e = mk(a, EX_SELECT, dtype_promote(t->dtype, f->dtype));
	e->nargs = 3;
	e->args = args_of(a, 3);
	e->args[0] = c;
	e->args[1] = t;
	e->args[2] = f;
	return e;
}

IrExpr *ir_cast(Arena *a, DType t, IrExpr *x)
{
	IrExpr *e = mk(a, EX_CAST, t);
	e->nargs = 1;
	e->args = args_of(a, 1);
	e->args[0] = x;
	return e;
}

IrExpr *ir_access(Arena *a, Tensor *t, IrExpr **idx, int n)
{
	IrExpr *e = mk(a, EX_ACCESS, t->dtype);
	e->tensor = t;
	e->nargs = n;
	e->args = args_of(a, n);
	for (int i = 0; i < n; i++)
		e->args[i] = idx[i];
	return e;
}

IrExpr *ir_load(Arena *a, Tensor *t, IrExpr *offset)
{
	IrExpr *e = mk(a, EX_LOAD, t->dtype);
	e->tensor = t;
	e->nargs = 1;
	e->args = args_of(a, 1);
	e->args[0] = offset;
	return e;
}

/* ---- folding index helpers ------------------------------------------------------------ */

static bool is_val(IrExpr *e, int64_t v)
{
	int64_t c;
	return ir_is_const(e, &c) && c == v;
}

/* Folding never wraps: a constant operation that overflows i64 (or divides INT64_MIN by -1)
 * is left as an operation. Sema refuses such constants in the user's text and absurd
 * dimensions (docs/design.md, "Limits"), so this only keeps the compiler free of undefined
 * behaviour on whatever reaches it. Division and modulo follow C (truncation), which is what
 * the generated code computes. */
static bool cdiv(int64_t a, int64_t b, int64_t *q)
{
	if (b == 0 || (a == INT64_MIN && b == -1))
		return false;
	*q = a / b;
	return true;
}
static bool cmod(int64_t a, int64_t b, int64_t *r)
{
	if (b == 0 || (a == INT64_MIN && b == -1))
		return false;
	*r = a % b;
	return true;
}

/* The leaves of a product (i64 multiplications), left to right; -1 past max. */
static int mul_leaves(IrExpr *e, IrExpr **out, int n, int max)
{
	if (n < 0)
		return n;
	if (e->kind == EX_OP && e->op == OP_MUL && e->dtype == DT_I64)
		return mul_leaves(e->args[1], out, mul_leaves(e->args[0], out, n, max), max);
	if (n == max)
		return -1;
	out[n] = e;
	return n + 1;
}

/* Are x[0 .. n) and y[0 .. n) the same factors, in any order? */
static bool same_factors(IrExpr **x, IrExpr **y, int n)
{
	bool used[16] = {0};
	for (int i = 0; i < n; i++) {
		int j = 0;
		while (j < n && (used[j] || !ir_equal(x[i], y[j])))
			j++;
		if (j == n)
			return false;
		used[j] = true;
	}
	return true;
}

/* The x of m = (x / d) * d, however the products are grouped and ordered: ((x / (B * (C *
 * D))) * B) * C * D (a row stride of a merge of four axes) is one, and so is
 * x / (D * 15) * 15 * D; NULL if m is not of that form. */
static IrExpr *div_times_of(IrExpr *m, IrExpr *d)
{
	enum { MAX = 16 };
	IrExpr *want[MAX], *got[MAX], *right[MAX];
	int nw = mul_leaves(d, want, 0, MAX), nr = 0, ng = 0;
	IrExpr *q = m;
	while (q->kind == EX_OP && q->op == OP_MUL && q->dtype == DT_I64 && nr < MAX) {
		right[nr++] = q->args[1];
		q = q->args[0];
	}
	if (nw <= 0 || nr == 0 || q->kind != EX_OP || q->op != OP_DIV)
		return NULL;
	for (int i = nr - 1; i >= 0 && ng >= 0; i--)
		ng = mul_leaves(right[i], got, ng, MAX);
	IrExpr *div[MAX];
	if (ng != nw || mul_leaves(q->args[1], div, 0, MAX) != nw)
		return NULL;
	return same_factors(got, want, nw) && same_factors(div, want, nw) ? q->args[0] : NULL;
}

/* The i64 node op(l, r): `same` itself when it is that node already (ix_rebuild: an
 * expression simplified again is not copied, nor are the expressions above it, ir_rewrite). */
static IrExpr *op_node(Arena *a, IrOp op, IrExpr *l, IrExpr *r, IrExpr *same)
{
	if (same && same->kind == EX_OP && same->op == op && same->dtype == DT_I64 &&
	    same->nargs == 2 && same->args[0] == l && same->args[1] == r && !same->span.file)
		return same;
	return ir_op(a, op, DT_I64, l, r);
}

/* The x of m + r when that sum is a merge of axes read back in order: m = (x / d) * d and
 * r = x % d, or both scaled by one stride, m = m' * c and r = r' * c with m' + r' such a sum
 * (the flattened offset of three or more merged axes: x / C / B * B * C + x / C % B * C is
 * (x / C) * C). NULL otherwise. */
static IrExpr *merged_back(Arena *a, IrExpr *m, IrExpr *r)
{
	if (r->kind != EX_OP || m->kind != EX_OP)
		return NULL;
	if (r->op == OP_MOD) {
		IrExpr *x = div_times_of(m, r->args[1]);
		return x && ir_equal(x, r->args[0]) ? x : NULL;
	}
	if (r->op != OP_MUL || m->op != OP_MUL)
		return NULL;
	IrExpr *x = NULL;
	int64_t cm, cr;
	if (ir_equal(m->args[1], r->args[1]))
		x = merged_back(a, m->args[0], r->args[0]);
	else if (ir_is_const(m->args[1], &cm) && ir_is_const(r->args[1], &cr) && cr > 0 &&
		 cm > cr && cm % cr == 0 && r->args[0]->kind == EX_OP &&
		 (r->args[0]->op == OP_MOD || r->args[0]->op == OP_MUL))
		/* y / 3 * 15 + y % 3 * 5: (y / 3 * 3 + y % 3) * 5 (the product is built only
		 * when r's factor can be merged back at all: most sums of terms cannot) */
		x = merged_back(a, ix_mul(a, m->args[0], ir_int(a, cm / cr)), r->args[0]);
	return x ? ix_mul(a, x, r->args[1]) : NULL;
}

static IrExpr *add_as(Arena *a, IrExpr *l, IrExpr *r, IrExpr *same)
{
	int64_t x, y, v;
	if (ir_is_const(l, &x) && ir_is_const(r, &y) && !__builtin_add_overflow(x, y, &v))
		return ir_int(a, v);
	if (is_val(l, 0))
		return r;
	if (is_val(r, 0))
		return l;
	/* (e + c1) + c2 -> e + (c1 + c2): keeps constant offsets together */
	if (ir_is_const(r, &y) && l->kind == EX_OP && l->op == OP_ADD &&
	    ir_is_const(l->args[1], &x) && !__builtin_add_overflow(x, y, &v))
		return ix_add(a, l->args[0], ir_int(a, v));
	if (ir_is_const(l, &x) && !ir_is_const(r, NULL))
		return ix_add(a, r, l);
	/* (x / d) * d + x % d -> x (a merge of axes read back in order), also at the end of a
	 * longer sum: (e + (x / d) * d) + x % d -> e + x */
	IrExpr *m;
	if ((m = merged_back(a, l, r)))
		return m;
	if (l->kind == EX_OP && l->op == OP_ADD && l->dtype == DT_I64 &&
	    (m = merged_back(a, l->args[1], r)))
		return ix_add(a, l->args[0], m);
	/* left-associated sums print without parentheses: l + (b + c) -> (l + b) + c */
	if (r->kind == EX_OP && r->op == OP_ADD && r->dtype == DT_I64)
		return ix_add(a, ix_add(a, l, r->args[0]), r->args[1]);
	return op_node(a, OP_ADD, l, r, same);
}

IrExpr *ix_add(Arena *a, IrExpr *l, IrExpr *r)
{
	return add_as(a, l, r, NULL);
}

static IrExpr *sub_as(Arena *a, IrExpr *l, IrExpr *r, IrExpr *same)
{
	int64_t x, y, v;
	if (ir_is_const(l, &x) && ir_is_const(r, &y) && !__builtin_sub_overflow(x, y, &v))
		return ir_int(a, v);
	if (is_val(r, 0))
		return l;
	if (ir_equal(l, r))
		return ir_int(a, 0);
	/* (e + c1) - c2 -> e + (c1 - c2) */
	if (ir_is_const(r, &y) && l->kind == EX_OP && l->op == OP_ADD &&
	    ir_is_const(l->args[1], &x) && !__builtin_sub_overflow(x, y, &v))
		return ix_add(a, l->args[0], ir_int(a, v));
	return op_node(a, OP_SUB, l, r, same);
}

IrExpr *ix_sub(Arena *a, IrExpr *l, IrExpr *r)
{
	return sub_as(a, l, r, NULL);
}

static IrExpr *mul_as(Arena *a, IrExpr *l, IrExpr *r, IrExpr *same)
{
	int64_t x, y, v;
	if (ir_is_const(l, &x) && ir_is_const(r, &y) && !__builtin_mul_overflow(x, y, &v))
		return ir_int(a, v);
	if (is_val(l, 0) || is_val(r, 0))
		return ir_int(a, 0);
	if (is_val(l, 1))
		return r;
	if (is_val(r, 1))
		return l;
	/* constants on the right: `i * 4`, and (e * c1) * c2 -> e * (c1 * c2) */
	if (ir_is_const(l, &x) && !ir_is_const(r, NULL))
		return ix_mul(a, r, l);
	if (ir_is_const(r, &y) && l->kind == EX_OP && l->op == OP_MUL &&
	    ir_is_const(l->args[1], &x) && !__builtin_mul_overflow(x, y, &v))
		return ix_mul(a, l->args[0], ir_int(a, v));
	/* (p + q) * c -> p * c + q * c: flat sums of scaled terms, which divide cleanly */
	if (ir_is_const(r, &y) && l->kind == EX_OP && l->op == OP_ADD && l->dtype == DT_I64)
		return ix_add(a, ix_mul(a, l->args[0], r), ix_mul(a, l->args[1], r));
	return op_node(a, OP_MUL, l, r, same);
}

IrExpr *ix_mul(Arena *a, IrExpr *l, IrExpr *r)
{
	return mul_as(a, l, r, NULL);
}

/* x + y as ix_add builds it, with NULL for a 0 of split_terms (no node for it) */
static IrExpr *add0(Arena *a, IrExpr *x, IrExpr *y)
{
	int64_t v;
	if (x && y)
		return ix_add(a, x, y);
	IrExpr *z = x ? x : y;
	return z && ir_is_const(z, &v) ? ir_int(a, v) : z;
}

/* split_multiple with NULL for 0: the terms that do not divide cost no node */
static bool split_terms(Arena *a, IrExpr *e, int64_t f, IrExpr **q, IrExpr **rem)
{
	int64_t c;
	if (e->kind == EX_OP && e->op == OP_ADD && e->dtype == DT_I64) {
		IrExpr *q0, *r0, *q1, *r1;
		bool d0 = split_terms(a, e->args[0], f, &q0, &r0);
		bool d1 = split_terms(a, e->args[1], f, &q1, &r1);
		if (d0 || d1) {
			*q = add0(a, q0, q1);
			*rem = add0(a, r0, r1);
			return true;
		}
	}
	if (e->kind == EX_OP && e->op == OP_MUL && ir_is_const(e->args[1], &c) && c % f == 0) {
		*q = ix_mul(a, e->args[0], ir_int(a, c / f));
		*rem = NULL;
		return true;
	}
	if (ir_is_const(e, &c) && c % f == 0) {
		*q = ir_int(a, c / f);
		*rem = NULL;
		return true;
	}
	*q = NULL;
	*rem = e;
	return false;
}

/* Splits a sum into q*F + rem: the terms `x * c` (c a multiple of F) and constant multiples
 * of F go to q (divided by F), every other term to rem. Returns false when no term divides
 * (*q and *rem are then not to be read); a sum of which one side divides and the other,
 * itself a sum, does not, is split too (`(a + b) + c * F`). */
static bool split_multiple(Arena *a, IrExpr *e, int64_t f, IrExpr **q, IrExpr **rem)
{
	if (!split_terms(a, e, f, q, rem))
		return false;
	*q = *q ? *q : ir_int(a, 0);
	*rem = *rem ? *rem : ir_int(a, 0);
	return true;
}

/* 0 <= e < f, provably */
static bool in_range(const IrRange *rg, IrExpr *e, int64_t f)
{
	int64_t lo, hi;
	return ir_range(rg, e, &lo, &hi) && lo >= 0 && hi < f;
}

static IrExpr *div_as(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r, IrExpr *same)
{
	int64_t x, y, v;
	if (ir_is_const(l, &x) && ir_is_const(r, &y) && cdiv(x, y, &v))
		return ir_int(a, v);
	if (is_val(r, 1))
		return l;
	if (ir_is_const(r, &y) && y > 0) {
		IrExpr *q, *rem;
		if (in_range(rg, l, y))
			return ir_int(a, 0);
		/* C division truncates: the identities need q >= 0 as well; (q*F + rem) / F is
		 * q for 0 <= rem < F, q + rem / F for any rem >= 0 */
		if (split_multiple(a, l, y, &q, &rem) && ir_nonneg(rg, q)) {
			if (in_range(rg, rem, y))
				return q;
			if (ir_nonneg(rg, rem))
				return ix_add(a, q, ix_div(a, rg, rem, r));
		}
	}
	return op_node(a, OP_DIV, l, r, same);
}

IrExpr *ix_div(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r)
{
	return div_as(a, rg, l, r, NULL);
}

IrExpr *ix_div_rows(Arena *a, const IrRange *rg, IrExpr *l, int64_t f)
{
	IrExpr *q, *rem, *e = ix_div(a, rg, l, ir_int(a, f));
	int64_t c;
	if (ir_is_const(l, &c))
		return e;
	if (split_multiple(a, l, f, &q, &rem) && ir_nonneg(rg, q) && ir_nonneg(rg, rem))
		return ix_add(a, q, ix_div_rows(a, rg, rem, f));
	/* (q*c + rem) / F is q / (F / c) for c dividing F and 0 <= rem < c */
	for (c = f / 2; c > 1 && e->kind == EX_OP && e->op == OP_DIV; c--) {
		if (f % c == 0 && split_multiple(a, l, c, &q, &rem) && ir_nonneg(rg, q) &&
		    in_range(rg, rem, c))
			return ix_div(a, rg, q, ir_int(a, f / c));
	}
	return e;
}

static IrExpr *mod_as(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r, IrExpr *same)
{
	int64_t x, y, v;
	if (ir_is_const(l, &x) && ir_is_const(r, &y) && cmod(x, y, &v))
		return ir_int(a, v);
	if (is_val(r, 1))
		return ir_int(a, 0);
	if (ir_is_const(r, &y) && y > 0) {
		IrExpr *q, *rem;
		if (in_range(rg, l, y))
			return l;
		if (split_multiple(a, l, y, &q, &rem) && ir_nonneg(rg, q)) {
			if (in_range(rg, rem, y))
				return rem;
			if (ir_nonneg(rg, rem))
				return ix_mod(a, rg, rem, r);
		}
	}
	return op_node(a, OP_MOD, l, r, same);
}

IrExpr *ix_mod(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r)
{
	return mod_as(a, rg, l, r, NULL);
}

static IrExpr *ceildiv_as(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r, IrExpr *same)
{
	int64_t x, y, v;
	/* (x + y - 1) / y could overflow: x / y rounded up instead */
	if (ir_is_const(l, &x) && ir_is_const(r, &y) && y > 0)
		return ir_int(a, x / y + (x >= 0 && x % y != 0));
	if (is_val(r, 1))
		return l;
	/* ceildiv(ceildiv(x, p), q) == ceildiv(x, p * q) for x >= 0 and p, q > 0 */
	if (ir_is_const(r, &y) && y > 0 && l->kind == EX_OP && l->op == OP_CEILDIV &&
	    ir_is_const(l->args[1], &x) && x > 0 && ir_nonneg(rg, l->args[0]) &&
	    !__builtin_mul_overflow(x, y, &v))
		return ix_ceildiv(a, rg, l->args[0], ir_int(a, v));
	return op_node(a, OP_CEILDIV, l, r, same);
}

IrExpr *ix_ceildiv(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r)
{
	return ceildiv_as(a, rg, l, r, NULL);
}

static IrExpr *xor_as(Arena *a, IrExpr *l, IrExpr *r, IrExpr *same)
{
	int64_t x, y;
	if (ir_is_const(l, &x) && ir_is_const(r, &y))
		return ir_int(a, x ^ y);
	if (is_val(r, 0))
		return l;
	if (is_val(l, 0))
		return r;
	return op_node(a, OP_XOR, l, r, same);
}

IrExpr *ix_xor(Arena *a, IrExpr *l, IrExpr *r)
{
	return xor_as(a, l, r, NULL);
}

IrExpr *ix_rebuild(Arena *a, const IrRange *rg, IrExpr *e)
{
	IrExpr *l = e->args[0], *r = e->args[1];
	switch (e->op) {
	case OP_ADD: return add_as(a, l, r, e);
	case OP_SUB: return sub_as(a, l, r, e);
	case OP_MUL: return mul_as(a, l, r, e);
	case OP_DIV: return div_as(a, rg, l, r, e);
	case OP_MOD: return mod_as(a, rg, l, r, e);
	case OP_CEILDIV: return ceildiv_as(a, rg, l, r, e);
	case OP_XOR: return xor_as(a, l, r, e);
	default: die("ix_rebuild: %s", op_name(e->op));
	}
}

IrExpr *ix_lt(Arena *a, IrExpr *l, IrExpr *r)
{
	int64_t x, y;
	if (ir_is_const(l, &x) && ir_is_const(r, &y))
		return ir_bool(a, x < y);
	return ir_op(a, OP_LT, DT_BOOL, l, r);
}

IrExpr *ix_and(Arena *a, IrExpr *l, IrExpr *r)
{
	if (!l)
		return r;
	if (!r)
		return l;
	if (is_val(l, 1))
		return r;
	if (is_val(r, 1))
		return l;
	if (is_val(l, 0))
		return l;
	if (is_val(r, 0))
		return r;
	return ir_op(a, OP_AND, DT_BOOL, l, r);
}

/* ---- equality, copy, rewrite ---------------------------------------------------------- */

bool ir_equal(IrExpr *a, IrExpr *b)
{
	if (a == b)
		return true;
	if (!a || !b || a->kind != b->kind || a->dtype != b->dtype || a->nargs != b->nargs)
		return false;
	switch (a->kind) {
	case EX_INT:
		if (a->ival != b->ival)
			return false;
		break;
	case EX_FLOAT:
		/* bitwise: NaN equals NaN, 0.0 differs from -0.0 */
		if (memcmp(&a->fval, &b->fval, sizeof a->fval) != 0)
			return false;
		break;
	case EX_PARAM: if (a->param != b->param) return false; break;
	case EX_SIZE: if (a->size != b->size) return false; break;
	case EX_AXIS: if (a->axis != b->axis) return false; break;
	case EX_VAR: if (a->var != b->var) return false; break;
	case EX_PAR: if (a->par != b->par) return false; break;
	case EX_ACCESS:
	case EX_LOAD:
		if (a->tensor != b->tensor)
			return false;
		break;
	case EX_OP: if (a->op != b->op) return false; break;
	case EX_SELECT:
	case EX_CAST:
		break;
	case EX_REDUCE:
		if (a->red != b->red || a->nred != b->nred)
			return false;
		for (int i = 0; i < a->nred; i++)
			if (a->red_axes[i] != b->red_axes[i])
				return false;
		break;
	}
	for (int i = 0; i < a->nargs; i++)
		if (!ir_equal(a->args[i], b->args[i]))
			return false;
	return true;
}

static IrExpr *shallow_copy(Arena *a, IrExpr *e)
{
	IrExpr *c = NEW(a, IrExpr);
	*c = *e;
	if (e->nargs) {
		c->args = args_of(a, e->nargs);
		memcpy(c->args, e->args, sizeof(IrExpr *) * (size_t)e->nargs);
	}
	if (e->nred) {
		c->red_axes = arena_alloc(a, sizeof(Axis *) * (size_t)e->nred);
		memcpy(c->red_axes, e->red_axes, sizeof(Axis *) * (size_t)e->nred);
	}
	return c;
}

IrExpr *ir_copy(Arena *a, IrExpr *e)
{
	if (!e)
		return NULL;
	IrExpr *c = shallow_copy(a, e);
	for (int i = 0; i < c->nargs; i++)
		c->args[i] = ir_copy(a, e->args[i]);
	return c;
}

IrExpr *ir_rewrite(Arena *a, IrExpr *e, IrRewrite fn, void *ctx)
{
	if (!e)
		return NULL;
	/* copy on write: a node whose operands come back unchanged is passed to fn as it is
	 * (nodes are never changed in place), so a pass that rewrites little allocates little */
	IrExpr *c = e;
	for (int i = 0; i < e->nargs; i++) {
		IrExpr *x = ir_rewrite(a, e->args[i], fn, ctx);
		if (x == e->args[i])
			continue;
		if (c == e)
			c = shallow_copy(a, e);
		c->args[i] = x;
	}
	return fn(a, c, ctx);
}

/* ---- printer -------------------------------------------------------------------------- */

int ir_op_prec(IrOp op)
{
	switch (op) {
	case OP_ADD: case OP_SUB: return PREC_ADD;
	case OP_MUL: case OP_DIV: case OP_MOD: return PREC_MUL;
	case OP_LT: case OP_LE: case OP_GT: case OP_GE: return PREC_REL;
	case OP_EQ: case OP_NE: return PREC_EQ;
	case OP_AND: return PREC_AND;
	case OP_XOR: return PREC_XOR;
	case OP_OR: return PREC_OR;
	case OP_NEG: case OP_NOT: return PREC_UNARY;
	default: return PREC_PRIMARY; /* printed as a call: exp(x), max(a, b) */
	}
}

static int expr_prec(IrExpr *e)
{
	switch (e->kind) {
	case EX_INT: return e->ival < 0 && e->dtype != DT_BOOL ? PREC_UNARY : PREC_PRIMARY;
	case EX_FLOAT: return signbit(e->fval) && !isnan(e->fval) ? PREC_UNARY : PREC_PRIMARY;
	case EX_OP: return ir_op_prec(e->op);
	case EX_SELECT: return PREC_SELECT;
	default: return PREC_PRIMARY;
	}
}

/* Shortest text that reads back as the same double; always looks like a float literal. */
static void print_float(double v, DType t, Buf *out)
{
	if (isnan(v)) {
		buf_puts(out, "nan");
		return;
	}
	if (isinf(v)) {
		buf_puts(out, v < 0 ? "-inf" : "inf");
		return;
	}
	char s[64];
	int prec = t == DT_F64 ? 17 : 9;
	for (int p = 1; p <= prec; p++) {
		snprintf(s, sizeof s, "%.*g", p, v);
		if (t == DT_F64 ? strtod(s, NULL) == v : (float)strtod(s, NULL) == (float)v)
			break;
	}
	buf_puts(out, s);
	if (!strpbrk(s, ".e"))
		buf_puts(out, ".0");
}

static void print_prec(IrExpr *e, int min_prec, Buf *out);

static void print_list(IrExpr **args, int n, Buf *out)
{
	for (int i = 0; i < n; i++) {
		if (i)
			buf_puts(out, ", ");
		print_prec(args[i], 0, out);
	}
}

const char *red_name(ReduceOp r)
{
	switch (r) {
	case RED_SUM: return "sum";
	case RED_MAX: return "max";
	case RED_MIN: return "min";
	case RED_WELFORD: return "welford";
	case RED_ONLINE: return "online";
	case RED_NONE: break;
	}
	return "reduce";
}

static void print_op(IrExpr *e, Buf *out)
{
	int p = ir_op_prec(e->op);
	if (p == PREC_PRIMARY) {
		buf_printf(out, "%s(", op_name(e->op));
		print_list(e->args, e->nargs, out);
		buf_puts(out, ")");
	} else if (e->nargs == 1) {
		/* `-(-2)`, never `--2` */
		buf_puts(out, e->op == OP_NEG ? "-" : "!");
		print_prec(e->args[0], e->op == OP_NEG ? PREC_PRIMARY : PREC_UNARY, out);
	} else {
		/* left-associative: the right operand needs parentheses at equal precedence */
		print_prec(e->args[0], p, out);
		buf_printf(out, " %s ", op_name(e->op));
		print_prec(e->args[1], p + 1, out);
	}
}

static void print_node(IrExpr *e, Buf *out)
{
	switch (e->kind) {
	case EX_INT:
		if (e->dtype == DT_BOOL)
			buf_puts(out, e->ival ? "true" : "false");
		else
			buf_printf(out, "%lld", (long long)e->ival);
		break;
	case EX_FLOAT: print_float(e->fval, e->dtype, out); break;
	case EX_PARAM: buf_puts(out, e->param->name); break;
	case EX_SIZE: buf_puts(out, e->size->name); break;
	case EX_AXIS: buf_puts(out, e->axis->name); break;
	case EX_VAR: buf_puts(out, e->var->name); break;
	case EX_PAR: buf_puts(out, par_name(e->par)); break;
	case EX_ACCESS:
	case EX_LOAD:
		buf_printf(out, "%s[", e->tensor->name);
		print_list(e->args, e->nargs, out);
		buf_puts(out, "]");
		break;
	case EX_OP: print_op(e, out); break;
	case EX_SELECT:
		print_prec(e->args[0], PREC_SELECT + 1, out);
		buf_puts(out, " ? ");
		print_prec(e->args[1], PREC_SELECT + 1, out);
		buf_puts(out, " : ");
		print_prec(e->args[2], PREC_SELECT, out);
		break;
	case EX_CAST:
		buf_printf(out, "%s(", dtype_name(e->dtype));
		print_prec(e->args[0], 0, out);
		buf_puts(out, ")");
		break;
	case EX_REDUCE:
		buf_printf(out, "%s(", red_name(e->red));
		for (int i = 0; i < e->nred; i++)
			buf_printf(out, "%s%s", i ? ", " : "", e->red_axes[i]->name);
		buf_puts(out, ": ");
		print_prec(e->args[0], 0, out);
		buf_puts(out, ")");
		break;
	}
}

static void print_prec(IrExpr *e, int min_prec, Buf *out)
{
	if (!e) {
		buf_puts(out, "<null>");
		return;
	}
	bool paren = expr_prec(e) < min_prec;
	if (paren)
		buf_puts(out, "(");
	print_node(e, out);
	if (paren)
		buf_puts(out, ")");
}

void ir_print_expr(IrExpr *e, Buf *out)
{
	print_prec(e, 0, out);
}
