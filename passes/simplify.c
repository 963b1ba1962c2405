/* simplify.c: the last pass: simplifies every expression (ir_simplify), drops a conjunct of a
 * condition that another conjunct of it implies, replaces `if (true)` by its branch and
 * `if (false)` by its else branch, and removes loops whose body is empty or whose extent is
 * 0, and `if`s with nothing in either branch.
 *
 * Implied conjuncts: each bound the predicate pass writes is right on its own, but together
 * they repeat themselves: `blockIdx.x * 128 + threadIdx.x < N && blockIdx.x < ceildiv(N, 128)`
 * (the second is a tensor's bound on a block index the kernel launches for another tensor),
 * or a chain of splits' outer bounds beside the root's. A conjunct `x < ceildiv(R, F)` is
 * `x * F < R` (for integers x < ceil(R / F) exactly when x * F < R) and `x < R` is `x * 1 < R`;
 * `p * Fp < R` implies `q * Fq < R` when Fp * p - Fq * q >= 0 for every value of its terms
 * (a linear form whose atoms' ranges, ir_range, give the lower end). A conjunct goes only when
 * one still kept implies it, so the rest implies everything dropped. Conditions whose
 * conjuncts load memory or divide by a non-constant are left alone: `&&` stops at the first
 * false conjunct, which may be what keeps a later one from reading out of bounds.
 */
#include "passes/passes.h"

/* ---- conjuncts implied by another of the same condition ---- */

enum { LIN_TERMS = 16, AND_TERMS = 16 };

/* An integer expression as c0 + sum of coef[i] * atom[i] (atoms compared with ir_equal). */
typedef struct Lin {
	IrExpr *atom[LIN_TERMS];
	int64_t coef[LIN_TERMS];
	int n;
	int64_t c0;
} Lin;

/* Adds m * e to l; false when e is not linear enough or a coefficient overflows. */
static bool lin_add(Lin *l, IrExpr *e, int64_t m)
{
	int64_t v;
	if (ir_is_const(e, &v))
		return !__builtin_mul_overflow(v, m, &v) && !__builtin_add_overflow(l->c0, v, &l->c0);
	if (e->kind == EX_OP && e->op == OP_ADD)
		return lin_add(l, e->args[0], m) && lin_add(l, e->args[1], m);
	if (e->kind == EX_OP && e->op == OP_SUB)
		return m != INT64_MIN && lin_add(l, e->args[0], m) && lin_add(l, e->args[1], -m);
	for (int s = 0; e->kind == EX_OP && e->op == OP_MUL && s < 2; s++)
		if (ir_is_const(e->args[s], &v))
			return !__builtin_mul_overflow(v, m, &v) && lin_add(l, e->args[1 - s], v);
	for (int i = 0; i < l->n; i++)
		if (ir_equal(l->atom[i], e))
			return !__builtin_add_overflow(l->coef[i], m, &l->coef[i]);
	if (l->n == LIN_TERMS)
		return false;
	l->atom[l->n] = e;
	l->coef[l->n++] = m;
	return true;
}

/* The smallest value l can take, when its atoms' ranges give one. */
static bool lin_min(const IrRange *rg, const Lin *l, int64_t *out)
{
	int64_t sum = l->c0, lo, hi, t;
	for (int i = 0; i < l->n; i++) {
		int64_t c = l->coef[i];
		if (c == 0)
			continue;
		if (ir_range(rg, l->atom[i], &lo, &hi))
			;
		else if (c > 0 && ir_nonneg(rg, l->atom[i]))
			lo = 0;
		else
			return false;
		if (__builtin_mul_overflow(c, c > 0 ? lo : hi, &t) || __builtin_add_overflow(sum, t, &sum))
			return false;
	}
	*out = sum;
	return true;
}

/* c as `*x * *f < *r` with *f > 0: `x < r` on integers, or `x < ceildiv(r, f)`. */
static bool as_bound(IrExpr *c, IrExpr **x, int64_t *f, IrExpr **r)
{
	if (c->kind != EX_OP || c->op != OP_LT || dtype_is_float(c->args[0]->dtype) ||
	    dtype_is_float(c->args[1]->dtype) || c->args[0]->dtype == DT_BOOL ||
	    c->args[1]->dtype == DT_BOOL)
		return false;
	*x = c->args[0];
	*r = c->args[1];
	*f = 1;
	IrExpr *d = *r;
	if (d->kind == EX_OP && d->op == OP_CEILDIV && ir_is_const(d->args[1], f) && *f > 0)
		*r = d->args[0];
	else
		*f = 1;
	return true;
}

/* Does conjunct p imply conjunct q? */
static bool implies(const IrRange *rg, IrExpr *p, IrExpr *q)
{
	IrExpr *xp, *rp, *xq, *rq;
	int64_t fp, fq, lo;
	Lin d = {0};
	return as_bound(p, &xp, &fp, &rp) && as_bound(q, &xq, &fq, &rq) && ir_equal(rp, rq) &&
	       fq != INT64_MIN && lin_add(&d, xp, fp) && lin_add(&d, xq, -fq) &&
	       lin_min(rg, &d, &lo) && lo >= 0;
}

/* A load, or a division whose divisor is not a positive constant (it may be 0). */
static bool unsafe(IrExpr *e, void *ctx)
{
	int64_t v;
	return e->kind == EX_LOAD || e->kind == EX_ACCESS ||
	       (e->kind == EX_OP && (e->op == OP_DIV || e->op == OP_MOD || e->op == OP_CEILDIV) &&
		!(ir_is_const(e->args[1], &v) && v > 0));
}

static bool conjuncts(IrExpr *e, IrExpr **out, int *n)
{
	if (e->kind == EX_OP && e->op == OP_AND)
		return conjuncts(e->args[0], out, n) && conjuncts(e->args[1], out, n);
	if (*n == AND_TERMS || ir_expr_any(e, unsafe, NULL))
		return false;
	out[(*n)++] = e;
	return true;
}

/* e without the conjuncts another kept one implies (ir_rewrite callback; ctx: the IrRange). */
static IrExpr *drop_implied(Arena *a, IrExpr *e, void *ctx)
{
	IrExpr *c[AND_TERMS];
	bool gone[AND_TERMS] = {0};
	int n = 0, dropped = 0;
	if (e->kind != EX_OP || e->op != OP_AND || !conjuncts(e, c, &n))
		return e;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n && !gone[i]; j++)
			if (j != i && !gone[j] && implies(ctx, c[j], c[i])) {
				gone[i] = true;
				dropped++;
			}
	if (!dropped)
		return e;
	IrExpr *r = NULL;
	for (int i = 0; i < n; i++)
		if (!gone[i])
			r = ix_and(a, r, c[i]);
	return r;
}

static IrExpr *simp(Kernel *k, IrExpr *e)
{
	IrRange rg = ir_range_in(k);
	return e ? ir_rewrite(k->arena, ir_simplify(k->arena, &rg, e), drop_implied, &rg) : NULL;
}

static bool const_bool(IrExpr *e, bool *v)
{
	int64_t c;
	if (!ir_is_const(e, &c))
		return false;
	*v = c != 0;
	return true;
}

/* Simplifies a list; returns the new head. */
static Stmt *simplify_list(Kernel *k, Stmt *s)
{
	Stmt head = {0}, *prev = &head;
	while (s) {
		Stmt *next = s->next;
		Stmt *repl = s; /* what replaces s: a list, possibly empty */
		bool b;
		int64_t n;
		switch (s->kind) {
		case KS_FOR:
			s->loop.var->extent = simp(k, s->loop.var->extent);
			s->loop.body = simplify_list(k, s->loop.body);
			if (!s->loop.body || (ir_is_const(s->loop.var->extent, &n) && n <= 0))
				repl = NULL;
			break;
		case KS_IF:
			s->branch.cond = simp(k, s->branch.cond);
			s->branch.then = simplify_list(k, s->branch.then);
			s->branch.els = simplify_list(k, s->branch.els);
			if (const_bool(s->branch.cond, &b))
				repl = b ? s->branch.then : s->branch.els;
			else if (!s->branch.then && !s->branch.els)
				repl = NULL;
			break;
		case KS_ALLOC:
			s->alloc.size = simp(k, s->alloc.size);
			break;
		case KS_STORE:
			s->store.offset = simp(k, s->store.offset);
			for (int i = 0; i < s->store.nidx; i++)
				s->store.idx[i] = simp(k, s->store.idx[i]);
			s->store.value = simp(k, s->store.value);
			break;
		case KS_VSTORE:
			s->copy.offset = simp(k, s->copy.offset);
			s->copy.src_offset = simp(k, s->copy.src_offset);
			break;
		case KS_LET:
			s->let.value = simp(k, s->let.value);
			break;
		case KS_CP_ASYNC:
			s->copy.offset = simp(k, s->copy.offset);
			s->copy.src_offset = simp(k, s->copy.src_offset);
			s->copy.cond = simp(k, s->copy.cond);
			s->copy.size = simp(k, s->copy.size);
			if (const_bool(s->copy.cond, &b) && b)
				s->copy.cond = NULL;
			if (s->copy.size && ir_is_const(s->copy.size, &n) && n >= s->copy.vec)
				s->copy.size = NULL;
			break;
		case KS_GRID_REDUCE:
			/* the body is the store of element `offset`: keep them one expression */
			s->grid_red.body = simplify_list(k, s->grid_red.body);
			s->grid_red.offset = s->grid_red.body ? s->grid_red.body->store.offset
							      : simp(k, s->grid_red.offset);
			s->grid_red.part = simp(k, s->grid_red.part);
			s->grid_red.nparts = simp(k, s->grid_red.nparts);
			break;
		case KS_MMA_LOAD:
			s->mma.offset = simp(k, s->mma.offset);
			/* fall through */
		case KS_MMA:
			for (int i = 0; i < s->mma.nidx; i++)
				s->mma.idx[i] = simp(k, s->mma.idx[i]);
			break;
		case KS_CP_COMMIT:
		case KS_CP_WAIT:
		case KS_COMMENT:
		case KS_NEST:
		case KS_SYNC:
		case KS_BLOCK_REDUCE:
			break;
		}
		if (repl != s) {
			/* splice the replacement list in place of s */
			prev->next = repl;
			while (prev->next)
				prev = prev->next;
		} else {
			prev->next = s;
			prev = s;
		}
		s = next;
	}
	prev->next = NULL;
	return head.next;
}

bool pass_simplify(Kernel *k, Diag *d)
{
	for (int p = 0; p < PT_COUNT; p++)
		k->launch[p] = simp(k, k->launch[p]);
	k->body = simplify_list(k, k->body);
	return true;
}
