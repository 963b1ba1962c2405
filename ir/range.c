/* range.c: value ranges of integer expressions and the expression simplifier.
 *
 * A range is an interval whose ends may each be unknown. Facts used:
 *   loop variables   [0, extent - 1] (Var.extent; the upper end is unknown when symbolic)
 *   parallel indices [0, launch - 1] when the IrRange names a kernel (ir_range_in) and its
 *                    launch extent is known; otherwise threadIdx.* in [0, 1023] (the CUDA limit) and
 *                    blockIdx.* in [0, unknown)
 *   guards           inside `if (threadIdx.x < 32 && x * 3 + v < 128)`, threadIdx.x is at
 *                    most 31 and x * 3 + v at most 127 (ir_range_guard: any expression a
 *                    conjunct compares with a constant)
 *   size symbols     [0, unknown) (launchers reject negative sizes); [0, bound] in a size
 *                    variant (SizeSym.bound: its launcher checks it, PC_AT_MOST); a
 *                    product of size symbols bounded together (SizeProd: a collapsed
 *                    column's M * N) [0, bound] times its constant factors
 * Interval arithmetic covers + - * / % ceildiv min max select casts; any overflow makes the end
 * unknown. The simplifier folds constants, applies the ix_* identities to i64 arithmetic and
 * decides comparisons whose operands' ranges do not overlap. It never changes a value: float
 * identities that NaN, infinities or -0.0 would break (x*0, x+0.0) are left alone.
 *
 * The facts are an IrRange every caller passes (NULL: no kernel, no guards); nothing here keeps
 * state between calls, so what an expression folds to depends on its arguments alone.
 */
#include <math.h>

#include "ir/ir.h"

typedef struct Range {
	bool has_lo, has_hi;
	int64_t lo, hi;
} Range;

IrRange ir_range_in(const Kernel *k)
{
	IrRange rg; /* the facts past n are never read: not zeroed (a pass asks for thousands) */
	rg.kernel = k;
	rg.n = 0;
	return rg;
}

static void guard_add(IrRange *g, IrExpr *e, int64_t hi)
{
	if (g->n < IR_GUARD_FACTS && !ir_is_const(e, NULL)) {
		g->fact[g->n].e = e;
		g->fact[g->n].hi = hi;
		g->n++;
	}
}

/* e as c0 + sum of coef[i] * atom[i] with every coefficient positive; false if it is not
 * (or has more than 8 terms). */
static bool guard_terms(IrExpr *e, int64_t m, IrExpr **atom, int64_t *coef, int *n, int64_t *c0)
{
	int64_t v;

	if (ir_is_const(e, &v))
		return !__builtin_mul_overflow(v, m, &v) && !__builtin_add_overflow(*c0, v, c0);
	if (e->kind == EX_OP && e->dtype == DT_I64 && e->op == OP_ADD)
		return guard_terms(e->args[0], m, atom, coef, n, c0) &&
		       guard_terms(e->args[1], m, atom, coef, n, c0);
	if (e->kind == EX_OP && e->dtype == DT_I64 && e->op == OP_MUL &&
	    ir_is_const(e->args[1], &v) && v > 0)
		return !__builtin_mul_overflow(v, m, &v) && guard_terms(e->args[0], v, atom, coef, n, c0);
	if (*n == 8)
		return false;
	atom[*n] = e;
	coef[(*n)++] = m;
	return true;
}

/* Adds the facts of cond's conjuncts `e < c`, `e <= c`, `e == c` (e an integer expression,
 * c a constant) to g: about e, and when e is c0 + sum of c_i * x_i with positive c_i and
 * non-negative x_i, about each x_i (x_i <= (c - c0) / c_i: `jo + 1 < 8` gives jo <= 6). Facts
 * beyond the first IR_GUARD_FACTS are dropped (fewer facts, wider ranges: still true). */
void ir_range_guard(IrRange *g, IrExpr *c)
{
	IrExpr *atom[8];
	int64_t coef[8], c0 = 0;
	int n = 0;

	int64_t v;

	if (!c || c->kind != EX_OP)
		return;
	if (c->op == OP_AND) {
		ir_range_guard(g, c->args[0]);
		ir_range_guard(g, c->args[1]);
		return;
	}
	if ((c->op != OP_LT && c->op != OP_LE && c->op != OP_EQ) || !ir_is_const(c->args[1], &v) ||
	    dtype_is_float(c->args[0]->dtype) || (c->op == OP_LT && v == INT64_MIN))
		return;
	int64_t hi = c->op == OP_LT ? v - 1 : v;
	guard_add(g, c->args[0], hi);
	if (!guard_terms(c->args[0], 1, atom, coef, &n, &c0) || (n == 1 && c0 == 0 && coef[0] == 1) ||
	    __builtin_sub_overflow(hi, c0, &hi) || hi < 0)
		return;
	for (int i = 0; i < n; i++)
		if (!ir_nonneg(g, atom[i]))
			return;
	for (int i = 0; i < n; i++)
		guard_add(g, atom[i], hi / coef[i]);
}

static Range unknown(void) { return (Range){0}; }
static Range exact(int64_t v) { return (Range){true, true, v, v}; }
static Range from(int64_t lo) { return (Range){true, false, lo, 0}; }
static Range between(int64_t lo, int64_t hi) { return (Range){true, true, lo, hi}; }

static Range range_of(const IrRange *rg, IrExpr *e);

/* [0, extent - 1] */
static Range index_range(const IrRange *rg, IrExpr *extent)
{
	Range r = extent ? range_of(rg, extent) : unknown();
	if (r.has_hi && r.hi >= 1)
		return between(0, r.hi - 1);
	return from(0);
}

static Range par_range(const IrRange *rg, ParType p)
{
	Range r = par_is_thread(p) ? between(0, 1023) : from(0);
	if (rg && rg->kernel) {
		IrExpr *l = rg->kernel->launch[p];
		r = l ? index_range(rg, l) : exact(0);
	}
	return r;
}

static Range add_range(Range a, Range b)
{
	Range r = unknown();
	r.has_lo = a.has_lo && b.has_lo && !__builtin_add_overflow(a.lo, b.lo, &r.lo);
	r.has_hi = a.has_hi && b.has_hi && !__builtin_add_overflow(a.hi, b.hi, &r.hi);
	return r;
}

static Range neg_range(Range a)
{
	Range r = unknown();
	r.has_lo = a.has_hi && a.hi != INT64_MIN;
	r.lo = r.has_lo ? -a.hi : 0;
	r.has_hi = a.has_lo && a.lo != INT64_MIN;
	r.hi = r.has_hi ? -a.lo : 0;
	return r;
}

static Range mul_range(Range a, Range b)
{
	if (a.has_lo && a.has_hi && b.has_lo && b.has_hi) {
		int64_t p[4];
		if (__builtin_mul_overflow(a.lo, b.lo, &p[0]) ||
		    __builtin_mul_overflow(a.lo, b.hi, &p[1]) ||
		    __builtin_mul_overflow(a.hi, b.lo, &p[2]) ||
		    __builtin_mul_overflow(a.hi, b.hi, &p[3]))
			return unknown();
		Range r = between(p[0], p[0]);
		for (int i = 1; i < 4; i++) {
			r.lo = p[i] < r.lo ? p[i] : r.lo;
			r.hi = p[i] > r.hi ? p[i] : r.hi;
		}
		return r;
	}
	/* both non-negative with an unknown upper end */
	if (a.has_lo && b.has_lo && a.lo >= 0 && b.lo >= 0) {
		int64_t lo;
		if (__builtin_mul_overflow(a.lo, b.lo, &lo))
			return unknown();
		return from(lo);
	}
	return unknown();
}

/* Truncating division by a constant c > 0 is monotone. */
static Range div_range(Range a, int64_t c)
{
	Range r = a;
	r.lo = a.lo / c;
	r.hi = a.hi / c;
	return r;
}

static Range ceildiv_range(Range a, int64_t c)
{
	if (!a.has_lo || a.lo < 0)
		return unknown();
	Range r = a;
	r.lo = a.lo / c + (a.lo % c != 0);
	r.hi = a.has_hi ? a.hi / c + (a.hi % c != 0) : 0;
	return r;
}

/* x % d with d >= 0: a d of 0 is the inner extent of a merge of an empty axis, where no
 * loop or launch runs (as in decide_lt), so d is taken to be positive wherever x % d runs. */
static Range mod_range(Range a, Range b)
{
	if (!b.has_lo || b.lo < 0)
		return unknown();
	if (a.has_lo && a.lo >= 0) {
		if (a.has_hi && b.has_lo && a.hi < b.lo)
			return a; /* x % c == x */
		if (b.has_hi)
			return between(0, a.has_hi && a.hi < b.hi - 1 ? a.hi : b.hi - 1);
		return a.has_hi ? between(0, a.hi) : from(0);
	}
	if (b.has_hi)
		return between(-(b.hi - 1), b.hi - 1);
	return unknown();
}

/* x ^ y of x, y >= 0: below the next power of two of the larger bound */
static Range xor_range(Range a, Range b)
{
	if (!a.has_lo || a.lo < 0 || !b.has_lo || b.lo < 0)
		return unknown();
	if (!a.has_hi || !b.has_hi)
		return from(0);
	int64_t m = a.hi > b.hi ? a.hi : b.hi, p = 1;
	while (p <= m && p < INT64_MAX / 2)
		p *= 2;
	return between(0, p - 1);
}

static Range minmax_range(Range a, Range b, bool is_max)
{
	Range r = unknown();
	if (is_max) {
		r.has_lo = a.has_lo || b.has_lo;
		r.lo = a.has_lo && b.has_lo ? (a.lo > b.lo ? a.lo : b.lo) : a.has_lo ? a.lo : b.lo;
		r.has_hi = a.has_hi && b.has_hi;
		r.hi = a.hi > b.hi ? a.hi : b.hi;
	} else {
		r.has_hi = a.has_hi || b.has_hi;
		r.hi = a.has_hi && b.has_hi ? (a.hi < b.hi ? a.hi : b.hi) : a.has_hi ? a.hi : b.hi;
		r.has_lo = a.has_lo && b.has_lo;
		r.lo = a.lo < b.lo ? a.lo : b.lo;
	}
	return r;
}

static Range union_range(Range a, Range b)
{
	Range r = unknown();
	r.has_lo = a.has_lo && b.has_lo;
	r.lo = a.lo < b.lo ? a.lo : b.lo;
	r.has_hi = a.has_hi && b.has_hi;
	r.hi = a.hi > b.hi ? a.hi : b.hi;
	return r;
}

bool ir_size_product(IrExpr *e, int64_t *c, uint64_t *of, SizeSym **any)
{
	int64_t v;
	if (e->kind == EX_CAST && !dtype_is_float(e->dtype) && !dtype_is_float(e->args[0]->dtype))
		return ir_size_product(e->args[0], c, of, any);
	if (e->kind == EX_OP && e->op == OP_MUL && !dtype_is_float(e->dtype))
		return ir_size_product(e->args[0], c, of, any) &&
		       ir_size_product(e->args[1], c, of, any);
	if (ir_is_const(e, &v))
		return v >= 0 && !__builtin_mul_overflow(*c, v, c);
	if (e->kind != EX_SIZE || e->size->index >= 64 || (*of >> e->size->index & 1))
		return false;
	*of |= 1ull << e->size->index;
	*any = e->size;
	return true;
}

/* e is c times the whole product of a bounded SizeProd: [0, c * bound]. */
static bool prod_range(IrExpr *e, Range *r)
{
	int64_t c = 1, hi;
	uint64_t of = 0;
	SizeSym *z = NULL;
	if (!ir_size_product(e, &c, &of, &z) || !z || !z->prod || z->prod->bound <= 0 ||
	    of != z->prod->of || __builtin_mul_overflow(c, z->prod->bound, &hi))
		return false;
	*r = between(0, hi);
	return true;
}

static Range op_range(const IrRange *rg, IrExpr *e)
{
	Range pr;
	if (e->op == OP_MUL && prod_range(e, &pr))
		return pr;
	if (op_kind(e->op) == 'c' || op_kind(e->op) == 'l')
		return between(0, 1);
	if (dtype_is_float(e->dtype))
		return unknown();
	Range a = range_of(rg, e->args[0]);
	Range b = e->nargs > 1 ? range_of(rg, e->args[1]) : unknown();
	int64_t c;
	bool cpos = e->nargs > 1 && ir_is_const(e->args[1], &c) && c > 0;
	switch (e->op) {
	case OP_ADD: return add_range(a, b);
	case OP_SUB: return add_range(a, neg_range(b));
	case OP_NEG: return neg_range(a);
	case OP_MUL: return mul_range(a, b);
	case OP_DIV:
		if (cpos)
			return div_range(a, c);
		/* x / d of x >= 0 by a size d >= 0: d > 0 where it runs (mod_range) */
		if (a.has_lo && a.lo >= 0 && b.has_lo && b.lo >= 0)
			return a.has_hi ? between(0, a.hi) : from(0);
		return unknown();
	case OP_CEILDIV: return cpos ? ceildiv_range(a, c) : unknown();
	case OP_MOD: return mod_range(a, b);
	case OP_XOR: return xor_range(a, b);
	case OP_MAX: return minmax_range(a, b, true);
	case OP_MIN: return minmax_range(a, b, false);
	case OP_ABS:
		if (a.has_lo && a.lo >= 0)
			return a;
		return from(0);
	default: return unknown();
	}
}

/* r narrowed by the guards' facts about e */
static Range guarded(const IrRange *rg, IrExpr *e, Range r)
{
	for (int i = 0; i < rg->n; i++) {
		int64_t hi = rg->fact[i].hi;
		if ((!r.has_hi || hi < r.hi) && ir_equal(rg->fact[i].e, e)) {
			r.has_hi = true;
			r.hi = hi;
		}
	}
	return r;
}

static Range range_of_node(const IrRange *rg, IrExpr *e);

static Range range_of(const IrRange *rg, IrExpr *e)
{
	/* the leaves first, without a call: a literal (no guard is about one: guard_add) and a
	 * loop variable of constant extent (index_range) */
	if (e->kind == EX_INT)
		return exact(e->ival);
	Range r;
	IrExpr *x = e->kind == EX_VAR ? e->var->extent : NULL;
	if (x && x->kind == EX_INT)
		r = x->ival >= 1 ? between(0, x->ival - 1) : from(0);
	else
		r = range_of_node(rg, e);
	return rg && rg->n ? guarded(rg, e, r) : r;
}

static Range range_of_node(const IrRange *rg, IrExpr *e)
{
	switch (e->kind) {
	case EX_INT: return exact(e->ival);
	case EX_VAR: return e->var->extent ? index_range(rg, e->var->extent) : unknown();
	case EX_AXIS: return index_range(rg, e->axis->extent);
	case EX_PAR: return par_range(rg, e->par);
	case EX_SIZE:
		if (e->size->bound > 0)
			return (Range){true, true, 0, e->size->bound};
		return from(0);
	case EX_OP: return op_range(rg, e);
	case EX_SELECT: return union_range(range_of(rg, e->args[1]), range_of(rg, e->args[2]));
	case EX_CAST:
		if (dtype_is_float(e->dtype) || dtype_is_float(e->args[0]->dtype))
			return unknown();
		return range_of(rg, e->args[0]);
	default: return unknown();
	}
}

bool ir_range(const IrRange *rg, IrExpr *e, int64_t *lo, int64_t *hi)
{
	Range r = range_of(rg, e);
	if (!r.has_lo || !r.has_hi)
		return false;
	*lo = r.lo;
	*hi = r.hi;
	return true;
}

bool ir_nonneg(const IrRange *rg, IrExpr *e)
{
	Range r = range_of(rg, e);
	return r.has_lo && r.lo >= 0;
}

/* ---- simplifier ----------------------------------------------------------------------- */

/* l < r (strict) or l <= r decided by ranges: 1 true, 0 false, -1 unknown. */
static int decide_lt(const IrRange *rg, IrExpr *l, IrExpr *r, bool strict)
{
	/* a loop variable is below its own extent */
	if (strict && l->kind == EX_VAR && l->var->extent && ir_equal(l->var->extent, r))
		return 1;
	if (ir_equal(l, r))
		return strict ? 0 : 1;
	/* x % d < d for x >= 0: d > 0 wherever x % d runs, since d is the inner extent of a
	 * merge and a zero extent makes the enclosing loop or launch empty */
	if (strict && l->kind == EX_OP && l->op == OP_MOD && ir_equal(l->args[1], r) &&
	    ir_nonneg(rg, l->args[0]))
		return 1;
	Range a = range_of(rg, l), b = range_of(rg, r);
	if (a.has_hi && b.has_lo && (strict ? a.hi < b.lo : a.hi <= b.lo))
		return 1;
	if (a.has_lo && b.has_hi && (strict ? a.lo >= b.hi : a.lo > b.hi))
		return 0;
	return -1;
}

static int decide_cmp(const IrRange *rg, IrExpr *e)
{
	IrExpr *l = e->args[0], *r = e->args[1];
	if (dtype_is_float(l->dtype) || dtype_is_float(r->dtype))
		return -1;
	int d;
	switch (e->op) {
	case OP_LT: return decide_lt(rg, l, r, true);
	case OP_LE: return decide_lt(rg, l, r, false);
	case OP_GT: return decide_lt(rg, r, l, true);
	case OP_GE: return decide_lt(rg, r, l, false);
	case OP_EQ:
	case OP_NE:
		if (ir_equal(l, r))
			d = 1;
		else if (decide_lt(rg, l, r, true) == 1 || decide_lt(rg, r, l, true) == 1)
			d = 0;
		else
			return -1;
		return e->op == OP_EQ ? d : !d;
	default: return -1;
	}
}

static bool is_bool_const(IrExpr *e, bool *v)
{
	int64_t c;
	if (e->dtype != DT_BOOL || !ir_is_const(e, &c))
		return false;
	*v = c != 0;
	return true;
}

static IrExpr *simplify_logic(Arena *a, IrExpr *e)
{
	bool x = false, y = false;
	bool lc = is_bool_const(e->args[0], &x);
	if (e->op == OP_NOT)
		return lc ? ir_bool(a, !x) : e;
	bool rc = is_bool_const(e->args[1], &y);
	if (e->op == OP_AND) {
		if ((lc && !x) || (rc && !y))
			return ir_bool(a, false);
		if (lc)
			return e->args[1];
		if (rc)
			return e->args[0];
	} else {
		if ((lc && x) || (rc && y))
			return ir_bool(a, true);
		if (lc)
			return e->args[1];
		if (rc)
			return e->args[0];
	}
	return e;
}

static IrExpr *fold_float(Arena *a, IrExpr *e)
{
	IrExpr *l = e->args[0], *r = e->nargs > 1 ? e->args[1] : NULL;
	if (l->kind != EX_FLOAT || (r && r->kind != EX_FLOAT))
		return e;
	double x = l->fval, y = r ? r->fval : 0, v;
	switch (e->op) {
	case OP_ADD: v = x + y; break;
	case OP_SUB: v = x - y; break;
	case OP_MUL: v = x * y; break;
	case OP_DIV: v = x / y; break;
	case OP_NEG: v = -x; break;
	default: return e;
	}
	if (e->dtype == DT_F32)
		v = (float)v;
	else if (e->dtype != DT_F64)
		return e;
	return ir_float(a, e->dtype, v);
}

static IrExpr *fold_int(Arena *a, IrExpr *e)
{
	int64_t x, y = 0;
	if (!ir_is_const(e->args[0], &x) || (e->nargs > 1 && !ir_is_const(e->args[1], &y)))
		return e;
	if (x == INT64_MIN && (e->op == OP_NEG || e->op == OP_ABS))
		return e; /* -INT64_MIN overflows: left to run time, never folded to a wrapped value */
	switch (e->op) {
	case OP_NEG: return ir_int(a, -x);
	case OP_MAX: return ir_int(a, x > y ? x : y);
	case OP_MIN: return ir_int(a, x < y ? x : y);
	case OP_ABS: return ir_int(a, x < 0 ? -x : x);
	default: return e;
	}
}

/* i64 index arithmetic goes through the folding helpers */
static IrExpr *simplify_index(Arena *a, const IrRange *rg, IrExpr *e)
{
	IrExpr *l = e->args[0], *r = e->nargs > 1 ? e->args[1] : NULL;
	switch (e->op) {
	case OP_ADD:
	case OP_SUB:
	case OP_MUL:
	case OP_DIV:
	case OP_MOD:
	case OP_CEILDIV:
	case OP_XOR:
		return ix_rebuild(a, rg, e);
	case OP_MAX:
	case OP_MIN: {
		/* decided by ranges: max(a, b) == b when a <= b */
		int d = decide_lt(rg, l, r, false);
		if (d >= 0)
			return (d == 1) == (e->op == OP_MAX) ? r : l;
		return fold_int(a, e);
	}
	default: return fold_int(a, e);
	}
}

int64_t ir_size_multiple(const IrRange *rg, struct SizeSym *z)
{
	const Kernel *k = rg ? rg->kernel : NULL;
	int64_t m = 1;
	for (int i = 0; k && i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		if (p->kind == PC_MULTIPLE && p->size == z && p->value > m && p->value % m == 0)
			m = p->value;
	}
	return m;
}

bool ir_addends(IrExpr *e, DType t, IrExpr **v, int *n)
{
	if (e->kind == EX_OP && e->dtype == t && e->op == OP_ADD)
		return ir_addends(e->args[0], t, v, n) && ir_addends(e->args[1], t, v, n);
	if (*n == 16)
		return false;
	v[(*n)++] = e;
	return true;
}

/* A multiple of d provably: a constant, or a product with a constant factor, that d divides. */
static bool multiple_of(IrExpr *e, int64_t d)
{
	int64_t c;
	if (ir_is_const(e, &c))
		return c % d == 0;
	return e->kind == EX_OP && e->op == OP_MUL && e->dtype == DT_I64 &&
	       ((ir_is_const(e->args[1], &c) && c % d == 0) ||
		(ir_is_const(e->args[0], &c) && c % d == 0));
}

/* A d that the size N (a size symbol, or a product of them and constants) is a multiple of
 * by the launcher's preconditions: a product is a multiple of each factor's (H * W of W's,
 * a collapsed row's length). */
static int64_t size_multiple(const IrRange *rg, IrExpr *e)
{
	int64_t c;
	if (e->kind == EX_SIZE)
		return ir_size_multiple(rg, e->size);
	if (e->kind == EX_OP && e->op == OP_MUL && e->dtype == DT_I64) {
		int64_t m0 = size_multiple(rg, e->args[0]), m1 = size_multiple(rg, e->args[1]);
		return m0 > m1 ? m0 : m1;
	}
	return ir_is_const(e, &c) && c > 0 && e->dtype == DT_I64 ? c : 1;
}

/* `a + r < N` with N a multiple of d (the launcher's precondition), a a multiple of d and
 * 0 <= r < d is `a < N`: the lanes of a vector of d elements are in bounds together. The
 * per-lane predicates of a bounded row (jr * 512 + tx * 4 + jv < N) become one per vector. */
static IrExpr *drop_lanes(Arena *a, const IrRange *rg, IrExpr *e)
{
	IrExpr *l = e->args[0], *r = e->args[1], *v[16], *part = NULL, *rest = NULL;
	int n = 0;
	int64_t d;
	if (e->op != OP_LT || (r->kind != EX_SIZE && r->kind != EX_OP) || l->dtype != DT_I64 ||
	    (d = size_multiple(rg, r)) <= 1 || !ir_addends(l, DT_I64, v, &n))
		return e;
	for (int i = 0; i < n; i++) {
		IrExpr **to = multiple_of(v[i], d) ? &part : &rest;
		*to = *to ? ir_op(a, OP_ADD, DT_I64, *to, v[i]) : v[i];
	}
	Range rr = rest ? range_of(rg, rest) : exact(0);
	if (!part || !rest || !rr.has_lo || !rr.has_hi || rr.lo < 0 || rr.hi >= d)
		return e;
	return ir_op(a, OP_LT, DT_BOOL, part, r);
}

static IrExpr *simplify_node(Arena *a, IrExpr *e, void *ctx)
{
	const IrRange *rg = ctx;
	switch (e->kind) {
	case EX_OP: {
		char k = op_kind(e->op);
		if (k == 'c') {
			int d = decide_cmp(rg, e);
			return d < 0 ? drop_lanes(a, rg, e) : ir_bool(a, d);
		}
		if (k == 'l')
			return simplify_logic(a, e);
		if (dtype_is_float(e->dtype))
			return fold_float(a, e);
		if (e->dtype == DT_I64)
			return simplify_index(a, rg, e);
		return fold_int(a, e);
	}
	case EX_SELECT: {
		bool c;
		if (is_bool_const(e->args[0], &c))
			return c ? e->args[1] : e->args[2];
		return e;
	}
	case EX_CAST: {
		int64_t v;
		if (ir_is_const(e->args[0], &v) && (e->dtype == DT_I64 || e->dtype == DT_I32) &&
		    e->args[0]->dtype != DT_BOOL) {
			IrExpr *c = ir_int(a, e->dtype == DT_I32 ? (int32_t)v : v);
			c->dtype = e->dtype;
			return c;
		}
		if (e->args[0]->dtype == e->dtype)
			return e->args[0];
		return e;
	}
	default:
		return e;
	}
}

IrExpr *ir_simplify(Arena *a, const IrRange *rg, IrExpr *e)
{
	return ir_rewrite(a, e, simplify_node, (void *)rg);
}
