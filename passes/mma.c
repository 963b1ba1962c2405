/* mma.c: the accumulation nest of an mma accumulator becomes one warp-collective KS_MMA
 * (docs/tensor_cores.md, "Lowering").
 *
 * scheduler/mma.c gave the accumulator the fragment layout, so until here each lane computes
 * its own elements with a plain nest, innermost in the accumulator's loops:
 *
 *   for m_h { for n_c { for k { [if (cond)] Cl[c] = Cl[c] + As[a] * Bs[b]; } } }
 *
 * in which the tile row is 8 * m_h + threadIdx.x / 4, the column 2 * (threadIdx.x % 4) + n_c
 * and k the instruction's k. The pass replaces it by KS_MMA whose operands are the same loads
 * at the elements the instruction's fragment table (ir/mma.c) gives each lane: the A offset
 * with row and k set to those of a_r, the B offset with k and column set to those of b_r, the
 * accumulator offsets with row and column set to those of c_r. threadIdx.x is first written
 * 4 * G + T (G, T fresh variables of extents 8 and 4) so the row and the column of the nest
 * are G and T as the simplifier sees them.
 *
 * Conditions: `.sync.aligned` needs every lane of the warp, so no condition may depend on the
 * lane. A bound on k (K not a multiple of the tile) is dropped: the operand caches are
 * zero-filled (Tensor.sched.zero_fill, passes/predicate.c), so padded k adds A * 0 = 0. Conditions
 * on neither stay around the instruction (the same in every lane of the warp).
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Mm {
	Kernel *k;
	Diag *d;
	Arena *a;
	Var *g, *t; /* threadIdx.x = 4 * g + t */
	const IrRange *rg; /* the kernel's range facts */
} Mm;

static bool is_tidx(IrExpr *e, void *ctx)
{
	(void)ctx;
	return e->kind == EX_PAR && e->par == PT_TIDX;
}

static bool is_var(IrExpr *e, void *ctx)
{
	return e->kind == EX_VAR && e->var == ctx;
}

static bool mentions(IrExpr *e, Var *v)
{
	return ir_expr_any(e, is_var, v);
}

static IrExpr *split_lane(Arena *a, IrExpr *e, void *ctx)
{
	Mm *m = ctx;
	if (!is_tidx(e, NULL))
		return e;
	return ix_add(a, ix_mul(a, ir_int(a, 4), ir_var(a, m->g)), ir_var(a, m->t));
}

static IrExpr *strip_casts(IrExpr *e)
{
	while (e->kind == EX_CAST)
		e = e->args[0];
	return e;
}

/* The single statement of a list (comments aside), or NULL. */
static Stmt *only(Stmt *s)
{
	Stmt *one = NULL;
	for (; s; s = s->next) {
		if (s->kind == KS_COMMENT)
			continue;
		if (one)
			return NULL;
		one = s;
	}
	return one;
}

static Stmt *loop_over(Stmt *s, Axis *ax)
{
	return s && s->kind == KS_FOR && s->loop.var->axis == ax ? s : NULL;
}

static void conjuncts(IrExpr *c, Vec *out, Arena *a)
{
	if (c->kind == EX_OP && c->op == OP_AND) {
		conjuncts(c->args[0], out, a);
		conjuncts(c->args[1], out, a);
	} else {
		vec_push(a, out, c);
	}
}

/* threadIdx.x / 4 and threadIdx.x % 4 */
static IrExpr *lane_part(Mm *m, int which)
{
	Arena *a = m->a;
	IrExpr *x = ir_par(a, PT_TIDX), *four = ir_int(a, 4);
	return which ? ix_mod(a, m->rg, x, four) : ix_div(a, m->rg, x, four);
}

/* row = rg * g + rt * t + rc (or the column) of a fragment entry, in terms of threadIdx.x */
static IrExpr *frag_coord(Mm *m, int cg, int ct, int cc)
{
	Arena *a = m->a;
	IrExpr *e = ir_int(a, cc);
	e = ix_add(a, ix_mul(a, ir_int(a, cg), lane_part(m, 0)), e);
	return ix_add(a, ix_mul(a, ir_int(a, ct), lane_part(m, 1)), e);
}

/* The nest's variables at_element sets, and their values (NULL: not set). */
typedef struct Elt {
	Var *v[5];
	IrExpr *with[5];
} Elt;

static IrExpr *set_elt(Arena *a, IrExpr *e, void *ctx)
{
	Elt *x = ctx;
	if (e->kind == EX_VAR)
		for (int i = 0; i < 5; i++)
			if (e->var == x->v[i] && x->with[i])
				return ir_copy(a, x->with[i]);
	return e;
}

static bool mentions_elt(IrExpr *e, void *ctx)
{
	Elt *x = ctx;
	if (e->kind == EX_VAR)
		for (int i = 0; i < 5; i++)
			if (e->var == x->v[i])
				return true;
	return false;
}

/* off with the nest's row (8 * mh + G), column (2 * T + nc) and k set to the given
 * expressions (in one rewrite: none of them mentions a variable set); NULL row/col: that
 * coordinate must not appear. */
static IrExpr *at_element(Mm *m, IrExpr *off, Var *mh, Var *nc, Var *k, IrExpr *row,
			  IrExpr *col, IrExpr *kk)
{
	Arena *a = m->a;
	IrExpr *eight = ir_int(a, 8), *two = ir_int(a, 2);
	Elt x = {{m->g, mh, m->t, nc, k}, {NULL}};
	if (row) {
		x.with[0] = ix_mod(a, m->rg, row, eight);
		x.with[1] = ix_div(a, m->rg, row, eight);
	}
	if (col) {
		x.with[2] = ix_div(a, m->rg, col, two);
		x.with[3] = ix_mod(a, m->rg, col, two);
	}
	x.with[4] = kk;
	IrExpr *e = ir_simplify(a, m->rg, ir_rewrite(a, off, set_elt, &x));
	return ir_expr_any(e, mentions_elt, &x) ? NULL : e;
}

/* A KS_MMA or KS_MMA_LOAD of instruction in into tensor t with n (unset) idx slots. */
static Stmt *mma_stmt(Arena *a, StmtKind kind, Span span, Tensor *t, const MmaInstr *in, int n)
{
	Stmt *s = NEW(a, Stmt);
	s->kind = kind;
	s->span = span;
	s->mma.tensor = t;
	s->mma.instr = in;
	s->mma.nidx = n;
	s->mma.idx = arena_alloc(a, sizeof(IrExpr *) * (size_t)n);
	return s;
}

static bool try_ldmatrix(Mm *m, Stmt *mm, char op, IrExpr *off, Var *mh, Var *nc, Var *kv);

/* Lowers the nest `s` (the loop over mma->mh) of accumulator t; NULL after an error. */
static Stmt *lower_nest(Mm *m, Tensor *t, Stmt *s)
{
	TensorMma *mma = t->sched.mma;
	const MmaInstr *in = mma->instr;
	Arena *a = m->a;
	Stmt *l_nc = loop_over(only(s->loop.body), mma->nc);
	Stmt *l_k = l_nc ? loop_over(only(l_nc->loop.body), mma->k) : NULL;
	Stmt *st = l_k ? only(l_k->loop.body) : NULL;
	IrExpr *cond = NULL;
	if (st && st->kind == KS_IF && !st->branch.els) {
		cond = st->branch.cond;
		st = only(st->branch.then);
	}
	IrExpr *v = st && st->kind == KS_STORE && st->store.tensor == t ? st->store.value : NULL;
	IrExpr *acc = NULL, *prod = NULL, *x = NULL, *y = NULL;
	if (v && v->kind == EX_OP && v->op == OP_ADD) {
		acc = v->args[0];
		prod = strip_casts(v->args[1]);
	}
	if (prod && prod->kind == EX_OP && prod->op == OP_MUL) {
		x = strip_casts(prod->args[0]);
		y = strip_casts(prod->args[1]);
	}
	if (x && y && x->kind == EX_LOAD && x->tensor == mma->b) {
		IrExpr *z = x;
		x = y;
		y = z;
	}
	if (!acc || acc->kind != EX_LOAD || acc->tensor != t || !ir_equal(acc->args[0], st->store.offset) ||
	    !x || !y || x->kind != EX_LOAD || y->kind != EX_LOAD || x->tensor != mma->a ||
	    y->tensor != mma->b) {
		diag_error(m->d, mma->span, "the loops inside the mma's tile are not the accumulation 'Cl[c] += A[a] * B[b]' over its %d x %d x %d tile (internal: the nest was changed)",
			   in->m, in->n, in->k);
		return NULL;
	}
	Var *mh = s->loop.var, *nc = l_nc->loop.var, *kv = l_k->loop.var;
	/* the conditions: k bounds dropped, lane-dependent ones refused, the others kept */
	IrExpr *keep = NULL;
	if (cond) {
		Vec cs = {0}, split = {0};
		conjuncts(cond, &cs, a);
		if (st->store.split_cond)
			conjuncts(st->store.split_cond, &split, a);
		for (int i = 0; i < cs.len; i++) {
			IrExpr *c = VEC_AT(cs, IrExpr, i);
			bool split_inner = false;
			for (int j = 0; j < split.len; j++)
				split_inner |= ir_equal(c, VEC_AT(split, IrExpr, j));
			/* the bound of the k root, the last (`k < K`, in split_cond as well), is dropped */
			if (c->kind == EX_OP && c->op == OP_LT && ir_equal(c->args[1], t->root[t->ndim]->extent))
				split_inner = false;
			if (mentions(c, kv) && split_inner) {
				/* `inner < F` of a split of k that F does not divide into 16s: the tile
				 * would read past the k range the operand buffers hold */
				Buf b = {0};
				ir_print_expr(c, &b);
				diag_error(m->d, mma->span, "the mma's %d values of k cross the end of a split of k (%s holds for part of them only): split k by a multiple of %d",
					   in->k, b.s, in->k);
				buf_free(&b);
				return NULL;
			}
			if (mentions(c, kv))
				continue;
			if (mentions(c, mh) || mentions(c, nc) || ir_expr_any(c, is_tidx, NULL)) {
				Buf b = {0};
				ir_print_expr(c, &b);
				diag_error(m->d, mma->span, "the accumulation of '%s' is predicated per lane (%s), but mma.sync needs every lane of the warp: the warp tiles must lie inside the block tile (splits that divide)",
					   t->name, b.s);
				buf_free(&b);
				return NULL;
			}
			keep = ix_and(a, keep, c);
		}
	}
	/* the lane as 4 * G + T in every offset */
	IrExpr *offs[3] = {st->store.offset, x->args[0], y->args[0]};
	for (int i = 0; i < 3; i++)
		offs[i] = ir_simplify(a, m->rg, ir_rewrite(a, offs[i], split_lane, m));
	int n = in->nc + in->na + in->nb;
	Stmt *mm = mma_stmt(a, KS_MMA, mma->span, t, in, n);
	for (int i = 0; i < n; i++) {
		char op = i < in->nc ? 'c' : i < in->nc + in->na ? 'a' : 'b';
		int r = op == 'c' ? i : op == 'a' ? i - in->nc : i - in->nc - in->na;
		const MmaFrag *f = op == 'a' ? &in->a[r] : op == 'b' ? &in->b[r] : &in->c[r];
		IrExpr *row = frag_coord(m, f->rg, f->rt, f->rc), *col = frag_coord(m, f->cg, f->ct, f->cc);
		IrExpr *e;
		if (op == 'c') {
			/* the lane holds the element it computes: row % 8 = lane / 4, col / 2 = lane % 4 */
			for (int lane = 0; lane < 32; lane++) {
				int rr, cc;
				mma_frag_at(in, 'c', lane, r, &rr, &cc);
				if (rr % 8 != lane / 4 || cc / 2 != lane % 4)
					die("mma %s: C fragment entry %d is not held by its lane", in->name, r);
			}
			e = at_element(m, offs[0], mh, nc, kv, row, col, NULL);
		} else if (op == 'a') {
			e = at_element(m, offs[1], mh, nc, kv, row, NULL, col);
			e = e ? ir_load(a, x->tensor, e) : NULL;
		} else {
			e = at_element(m, offs[2], mh, nc, kv, NULL, col, row);
			e = e ? ir_load(a, y->tensor, e) : NULL;
		}
		if (!e) {
			diag_error(m->d, mma->span, "cannot place the %c fragment of the mma in '%s' (its offset depends on the %s)",
				   op == 'a' ? 'A' : op == 'b' ? 'B' : 'C',
				   op == 'a' ? x->tensor->name : op == 'b' ? y->tensor->name : t->name,
				   op == 'a' ? "column" : op == 'b' ? "row" : "k");
			return NULL;
		}
		if (op != 'c')
			e->dtype = op == 'a' ? x->dtype : y->dtype;
		mm->mma.idx[i] = e;
	}
	/* ldmatrix when asked for and it provably loads the same elements (B first: its slot
	 * moves when A's shrinks) */
	for (int i = 0; mma->ldmatrix && i < 2; i++) {
		Tensor *o = i ? x->tensor : y->tensor;
		if (!try_ldmatrix(m, mm, i ? 'a' : 'b', offs[2 - i], mh, nc, kv)) {
			diag_error(m->d, mma->span, "ldmatrix cannot load the %s fragment from '%s': its rows of 8 elements must be contiguous and 16-byte aligned in the buffer (along k, or along %s with .trans), and every lane's elements those of the fragment, for every value of the loops around (of constant extent)",
				   i ? "A" : "B", o->name, i ? "the rows of A" : "the columns of B");
			return NULL;
		}
	}
	if (!keep)
		return mm;
	Stmt *g = kir_if(m->k, keep, mm, NULL);
	g->span = mma->span;
	return g;
}

static bool loops_over(Stmt *s, void *ax)
{
	return s->kind == KS_FOR && s->loop.var->axis == ax;
}

/* ---- ldmatrix: proved on every value of the free variables ---- */

/* The variables of the fragment offsets other than threadIdx.x: loop variables of constant
 * extent and threadIdx.y/z (constant launch); at most LDM_ATOMS, at most LDM_POINTS values. */
#define LDM_ATOMS 12
#define LDM_POINTS 65536
#define LDM_MEMO 64
typedef struct Ldm {
	Kernel *k;
	IrExpr *atom[LDM_ATOMS];
	int64_t ext[LDM_ATOMS], val[LDM_ATOMS];
	int n;
	bool ok;
	/* values of subexpressions that depend on the lane only (ev): at most LDM_MEMO / 2 */
	struct {
		IrExpr *e;
		int64_t v[32];
	} memo[LDM_MEMO];
	int nmemo;
} Ldm;

/* l ready for k: no atoms, an empty memo (its values are not cleared: the Ldm is about 17 KB,
 * and a slot's values are written before they are read) */
static void ldm_init(Ldm *l, Kernel *k)
{
	l->k = k;
	l->n = 0;
	l->ok = true;
	l->nmemo = 0;
	for (int i = 0; i < LDM_MEMO; i++)
		l->memo[i].e = NULL;
}

static bool atom_eq(IrExpr *a, IrExpr *b)
{
	return a->kind == b->kind && (a->kind == EX_VAR ? a->var == b->var : a->par == b->par);
}

static bool add_atom(IrExpr *e, void *ctx)
{
	Ldm *l = ctx;
	int64_t ext, lo, hi;
	IrRange rg = ir_range_in(l->k);
	if (e->kind == EX_PAR && e->par == PT_TIDX)
		return false;
	if (e->kind == EX_VAR && e->var->extent && ir_is_const(e->var->extent, &ext))
		;
	else if (e->kind == EX_PAR && par_is_thread(e->par) &&
		 (!l->k->launch[e->par] || ir_is_const(l->k->launch[e->par], &ext)))
		ext = l->k->launch[e->par] ? ext : 1;
	else if (e->kind == EX_PAR && ir_range(&rg, e, &lo, &hi) && lo == 0 && hi == 0)
		ext = 1; /* a block index that can only be 0 (one block along a tile) */
	else if (e->kind == EX_VAR || e->kind == EX_PAR || e->kind == EX_SIZE || e->kind == EX_PARAM ||
		 e->kind == EX_LOAD || e->kind == EX_FLOAT || e->kind == EX_SELECT)
		return (l->ok = false);
	else
		return false;
	for (int i = 0; i < l->n; i++)
		if (atom_eq(l->atom[i], e))
			return false;
	if (l->n == LDM_ATOMS)
		return (l->ok = false);
	l->atom[l->n] = e;
	l->ext[l->n++] = ext;
	return false;
}

/* What a value of ev depends on: the lane (else only out[0] is set: the same on every lane),
 * the variables (else it is the same at every point: a lane-dependent one is kept in
 * Ldm.memo and computed once). */
enum { EV_LANES = 1, EV_ATOMS = 2 };

static int64_t *memo_slot(Ldm *l, IrExpr *e, bool add)
{
	for (unsigned h = (unsigned)((uintptr_t)e >> 4) % LDM_MEMO, n = 0; n < LDM_MEMO;
	     h = (h + 1) % LDM_MEMO, n++) {
		if (l->memo[h].e == e)
			return l->memo[h].v;
		if (!l->memo[h].e) {
			if (!add || l->nmemo >= LDM_MEMO / 2)
				return NULL;
			l->nmemo++;
			l->memo[h].e = e;
			return l->memo[h].v;
		}
	}
	return NULL;
}

/* e's value on every lane (threadIdx.x = 0..31) at the variables' values l->val, and what it
 * depends on (EV_*); clears l->ok where e is not an integer function of them. Most of an
 * offset does not depend on the lane, and a sum's lane-independent terms are added once
 * (ev_sum), not per lane. Arithmetic wraps (uint64_t), so a sum's terms may be added in any
 * order. */
static int ev(Ldm *l, IrExpr *e, int64_t out[32]);

static int ev_sum(Ldm *l, IrExpr *e, bool neg, uint64_t *uni, uint64_t lanes[32], bool *varies)
{
	if (e->kind == EX_OP && (e->op == OP_ADD || e->op == OP_SUB))
		return ev_sum(l, e->args[0], neg, uni, lanes, varies) |
		       ev_sum(l, e->args[1], e->op == OP_SUB ? !neg : neg, uni, lanes, varies);
	int64_t v[32];
	int dep = ev(l, e, v);
	if (!(dep & EV_LANES)) {
		*uni = neg ? *uni - (uint64_t)v[0] : *uni + (uint64_t)v[0];
		return dep;
	}
	for (int i = 0; i < 32; i++) {
		uint64_t x = *varies ? lanes[i] : 0;
		lanes[i] = neg ? x - (uint64_t)v[i] : x + (uint64_t)v[i];
	}
	*varies = true;
	return dep;
}

static int ev_op(Ldm *l, IrExpr *e, int64_t out[32])
{
	int64_t y[32];
	if (e->op == OP_ADD || e->op == OP_SUB) {
		uint64_t uni = 0, lanes[32];
		bool varies = false;
		int dep = ev_sum(l, e, false, &uni, lanes, &varies);
		if (!varies) {
			out[0] = (int64_t)uni;
			return dep;
		}
		for (int i = 0; i < 32; i++)
			out[i] = (int64_t)(lanes[i] + uni);
		return dep;
	}
	int dx = ev(l, e->args[0], out), dy = ev(l, e->args[1], y), dep = dx | dy;
	int n = dep & EV_LANES ? 32 : 1;
	if (n == 32 && !(dx & EV_LANES))
		for (int i = 1; i < 32; i++)
			out[i] = out[0];
	if (n == 32 && !(dy & EV_LANES))
		for (int i = 1; i < 32; i++)
			y[i] = y[0];
	switch (e->op) {
	case OP_MUL:
		for (int i = 0; i < n; i++)
			out[i] = (int64_t)((uint64_t)out[i] * (uint64_t)y[i]);
		return dep;
	case OP_XOR: for (int i = 0; i < n; i++) out[i] ^= y[i]; return dep; /* swizzle(S) */
	case OP_MIN: for (int i = 0; i < n; i++) out[i] = out[i] < y[i] ? out[i] : y[i]; return dep;
	case OP_MAX: for (int i = 0; i < n; i++) out[i] = out[i] > y[i] ? out[i] : y[i]; return dep;
	case OP_DIV:
	case OP_MOD:
		for (int i = 0; i < n; i++) {
			if (y[i] <= 0 || out[i] < 0)
				return -1;
			out[i] = e->op == OP_DIV ? out[i] / y[i] : out[i] % y[i];
		}
		return dep;
	default:
		return -1;
	}
}

static int ev(Ldm *l, IrExpr *e, int64_t out[32])
{
	switch (e->kind) {
	case EX_INT:
		out[0] = e->ival;
		return 0;
	case EX_CAST:
		return ev(l, e->args[0], out);
	case EX_VAR:
	case EX_PAR:
		if (e->kind == EX_PAR && e->par == PT_TIDX) {
			for (int i = 0; i < 32; i++)
				out[i] = i;
			return EV_LANES;
		}
		for (int a = 0; a < l->n; a++) {
			if (!atom_eq(l->atom[a], e))
				continue;
			out[0] = l->val[a];
			return EV_ATOMS;
		}
		break;
	case EX_OP: {
		if (e->nargs != 2)
			break;
		int64_t *m = memo_slot(l, e, false);
		if (m) {
			memcpy(out, m, sizeof(int64_t) * 32);
			return EV_LANES;
		}
		int dep = ev_op(l, e, out);
		if (dep < 0)
			break;
		if (dep == EV_LANES && l->ok && (m = memo_slot(l, e, true)))
			memcpy(m, out, sizeof(int64_t) * 32);
		return dep;
	}
	default:
		break;
	}
	l->ok = false;
	out[0] = 0;
	return 0;
}

/* ev on every lane: out[0..32) set when the value is the same on all */
static void ev_lanes(Ldm *l, IrExpr *e, int64_t out[32])
{
	if (!(ev(l, e, out) & EV_LANES))
		for (int i = 1; i < 32; i++)
			out[i] = out[0];
}

/* An offset prepared for the points: the terms of its top sum that mention no variable (the
 * lane's own part, constants) added up once, the others evaluated at each point; a sum of
 * more than LDM_TERMS other terms is evaluated whole (ev_lanes). */
#define LDM_TERMS 48
typedef struct LdmSum {
	IrExpr *whole;
	int n;
	IrExpr *term[LDM_TERMS];
	bool neg[LDM_TERMS];
	uint64_t lanes[32];
} LdmSum;

static bool is_atom(IrExpr *e, void *ctx)
{
	return e->kind == EX_VAR || (e->kind == EX_PAR && e->par != PT_TIDX);
}

static void ldm_prepare_terms(Ldm *l, LdmSum *s, IrExpr *e, bool neg)
{
	while (e->kind == EX_CAST)
		e = e->args[0];
	if (e->kind == EX_OP && (e->op == OP_ADD || e->op == OP_SUB) && e->nargs == 2) {
		ldm_prepare_terms(l, s, e->args[0], neg);
		ldm_prepare_terms(l, s, e->args[1], e->op == OP_SUB ? !neg : neg);
		return;
	}
	if (ir_expr_any(e, is_atom, NULL)) {
		if (s->n == LDM_TERMS) {
			s->whole = e; /* marks the overflow; ldm_prepare takes the whole offset */
			return;
		}
		s->term[s->n] = e;
		s->neg[s->n++] = neg;
		return;
	}
	int64_t v[32];
	ev_lanes(l, e, v);
	for (int i = 0; i < 32; i++)
		s->lanes[i] = neg ? s->lanes[i] - (uint64_t)v[i] : s->lanes[i] + (uint64_t)v[i];
}

static void ldm_prepare(Ldm *l, LdmSum *s, IrExpr *e)
{
	s->whole = NULL;
	s->n = 0;
	memset(s->lanes, 0, sizeof s->lanes);
	ldm_prepare_terms(l, s, e, false);
	if (s->whole)
		s->whole = e;
}

/* ev_lanes of the prepared offset at the current point */
static void ldm_eval(Ldm *l, const LdmSum *s, int64_t out[32])
{
	if (s->whole) {
		ev_lanes(l, s->whole, out);
		return;
	}
	uint64_t uni = 0, lanes[32];
	memcpy(lanes, s->lanes, sizeof lanes);
	for (int t = 0; t < s->n; t++) {
		int64_t v[32];
		bool neg = s->neg[t];
		if (!(ev(l, s->term[t], v) & EV_LANES)) {
			uni = neg ? uni - (uint64_t)v[0] : uni + (uint64_t)v[0];
			continue;
		}
		for (int i = 0; i < 32; i++)
			lanes[i] = neg ? lanes[i] - (uint64_t)v[i] : lanes[i] + (uint64_t)v[i];
	}
	for (int i = 0; i < 32; i++)
		out[i] = (int64_t)(lanes[i] + uni);
}

/* The number of points of l's variables (0 when too many or not all constant). */
static int64_t ldm_points(Ldm *l)
{
	int64_t points = 1;
	for (int i = 0; l->ok && i < l->n; i++) {
		if (l->ext[i] <= 0 || points > LDM_POINTS / l->ext[i])
			return 0;
		points *= l->ext[i];
	}
	return l->ok ? points : 0;
}

/* The variables' values at point p. */
static void ldm_at(Ldm *l, int64_t p)
{
	for (int i = 0; i < l->n; i++) {
		l->val[i] = p % l->ext[i];
		p /= l->ext[i];
	}
}

static bool ldm_points_proved(Ldm *l, const LdmSum *sums, int n, int64_t points, bool trans);
static bool ldm_lane_free(const LdmSum *sums, int n);
static bool ldm_split_proved(Ldm *l, const LdmSum *sums, int n, int64_t points, bool trans);

/* Do the hardware's ldmatrix rows give every lane the elements of its per-lane loads (n of
 * them, n / 2 matrices)? Without .trans, register i, half h of lane L is element
 * 2 * (L % 4) + h of the row whose address lane 8i + L / 4 gives; with .trans (each 8 x 8
 * matrix transposed), element L / 4 of the row of lane 8i + 2 * (L % 4) + h (PTX ISA,
 * ldmatrix). Every row address is 8-element aligned. Checked for every lane and every value
 * of the other variables (all of constant range), or false. */
static bool ldm_proved(Kernel *k, IrExpr **loads, int n, IrExpr *row, bool trans)
{
	Ldm l;
	ldm_init(&l, k);
	ir_expr_any(row, add_atom, &l);
	for (int i = 0; i < n; i++)
		ir_expr_any(loads[i]->args[0], add_atom, &l);
	int64_t points = ldm_points(&l);
	if (!points)
		return false;
	LdmSum *sums = xmalloc(sizeof *sums * (size_t)(n + 1));
	ldm_prepare(&l, &sums[n], row);
	for (int i = 0; i < n; i++)
		ldm_prepare(&l, &sums[i], loads[i]->args[0]);
	bool proved = ldm_lane_free(sums, n + 1) ? ldm_split_proved(&l, sums, n, points, trans)
						  : ldm_points_proved(&l, sums, n, points, trans);
	free(sums);
	return proved;
}

/* Does no prepared term depend on both the lane and a variable? Then each offset is the sum
 * of a part on the lane only (LdmSum.lanes) and a part the same on every lane (its terms). */
static bool ldm_lane_free(const LdmSum *sums, int n)
{
	for (int i = 0; i < n; i++) {
		if (sums[i].whole)
			return false;
		for (int t = 0; t < sums[i].n; t++)
			if (ir_expr_any(sums[i].term[t], is_tidx, NULL))
				return false;
	}
	return true;
}

/* The sum of the terms of s not marked in skip, at the current point (the same on every
 * lane: ldm_lane_free). */
static uint64_t ldm_uniform(Ldm *l, const LdmSum *s, const bool *skip)
{
	uint64_t u = 0;
	for (int t = 0; t < s->n; t++) {
		int64_t v[32];
		if (skip[t])
			continue;
		ev(l, s->term[t], v);
		u = s->neg[t] ? u - (uint64_t)v[0] : u + (uint64_t)v[0];
	}
	return u;
}

/* ldm_points_proved where every offset is lanes[L] + u(p) (ldm_lane_free), with the same
 * answer: a load's term the same as one of the row's (ir_equal, same sign) cancels with it,
 * so load r is right at every point iff D(L) = lanes_r[L] - lanes_row[src(L)] - elt(L) is
 * one value d and the terms left, the row's minus the load's, add up to d at every point
 * (no terms left: d must be 0, whatever the point); the rows are aligned iff every
 * lanes_row[L] is v mod 8 and the row's terms add up to -v mod 8 at every point. Only the
 * terms left and the row's are evaluated at the points: a GEMM's cancel (every load's
 * terms are the row's), which makes the proof about ten times cheaper. */
static bool ldm_split_proved(Ldm *l, const LdmSum *sums, int n, int64_t points, bool trans)
{
	const LdmSum *row = &sums[n];
	/* gone[r][0][t]: the row's term t cancels with one of load r's, gone[r][1][t]: load r's
	 * term t with one of the row's (neither is evaluated: ldm_uniform skips them) */
	bool none[LDM_TERMS] = {false}, gone[8][2][LDM_TERMS], varies[8];
	uint64_t d[8];
	if (n > 8)
		return ldm_points_proved(l, sums, n, points, trans);
	for (int L = 0; L < 32; L++)
		if ((row->lanes[L] - row->lanes[0]) % 8)
			return false;
	for (int r = 0; r < n; r++) {
		const LdmSum *s = &sums[r];
		for (int L = 0, i = r / 2, h = r % 2; L < 32; L++) {
			uint64_t want = trans ? row->lanes[8 * i + 2 * (L % 4) + h] + (uint64_t)(L / 4)
					      : row->lanes[8 * i + L / 4] + (uint64_t)(2 * (L % 4) + h);
			uint64_t dl = s->lanes[L] - want;
			if (L == 0)
				d[r] = dl;
			else if (dl != d[r])
				return false;
		}
		for (int t = 0; t < row->n; t++)
			gone[r][0][t] = false;
		varies[r] = false;
		for (int t = 0; t < s->n; t++) {
			int j = 0;
			while (j < row->n && (gone[r][0][j] || row->neg[j] != s->neg[t] ||
					      !ir_equal(row->term[j], s->term[t])))
				j++;
			gone[r][1][t] = j < row->n;
			if (j < row->n)
				gone[r][0][j] = true;
			else
				varies[r] = true;
		}
		for (int t = 0; t < row->n; t++)
			varies[r] |= !gone[r][0][t];
		if (!varies[r] && d[r] != 0)
			return false;
	}
	for (int64_t p = 0; l->ok && p < points; p++) {
		ldm_at(l, p);
		if ((row->lanes[0] + ldm_uniform(l, row, none)) % 8)
			return false;
		for (int r = 0; l->ok && r < n; r++)
			if (varies[r] && ldm_uniform(l, row, gone[r][0]) -
						 ldm_uniform(l, &sums[r], gone[r][1]) != d[r])
				return false;
	}
	return l->ok;
}

static bool ldm_points_proved(Ldm *l, const LdmSum *sums, int n, int64_t points, bool trans)
{
	for (int64_t p = 0; l->ok && p < points; p++) {
		int64_t rows[32], got[32];
		ldm_at(l, p);
		ldm_eval(l, &sums[n], rows);
		for (int L = 0; L < 32; L++)
			if (rows[L] % 8)
				return false;
		for (int r = 0; l->ok && r < n; r++) {
			ldm_eval(l, &sums[r], got);
			for (int L = 0, i = r / 2, h = r % 2; L < 32; L++) {
				int64_t want = trans ? rows[8 * i + 2 * (L % 4) + h] + L / 4
						     : rows[8 * i + L / 4] + 2 * (L % 4) + h;
				if (got[L] != want)
					return false;
			}
		}
	}
	return l->ok;
}

/* threadIdx.x % 16 for threadIdx.x */
static IrExpr *lane_mod16(Arena *a, IrExpr *e, void *ctx)
{
	Mm *m = ctx;
	return is_tidx(e, NULL) ? ix_mod(a, m->rg, e, ir_int(a, 16)) : e;
}

/* x == y for every lane and every value of the other variables (as ldm_proved). */
static bool ldm_equal(Kernel *k, IrExpr *x, IrExpr *y)
{
	Ldm l;
	ldm_init(&l, k);
	ir_expr_any(x, add_atom, &l);
	ir_expr_any(y, add_atom, &l);
	int64_t points = ldm_points(&l);
	if (!points)
		return false;
	LdmSum sx, sy;
	ldm_prepare(&l, &sx, x);
	ldm_prepare(&l, &sy, y);
	for (int64_t p = 0; l.ok && p < points; p++) {
		int64_t vx[32], vy[32];
		ldm_at(&l, p);
		ldm_eval(&l, &sx, vx);
		ldm_eval(&l, &sy, vy);
		if (memcmp(vx, vy, sizeof vx) != 0)
			return false;
	}
	return l.ok;
}

/* The lane's ldmatrix row address of operand op in form `trans` (the matrices' layout in
 * the buffer): 'a' without .trans (A[i, k], k contiguous): x4 from rows (i = l % 16,
 * k = 8 * (l / 16)); 'a' with .trans (A[k, i], i contiguous): x4.trans from rows
 * (k = l % 8 + 8 * (l / 16), i = 8 * (l / 8 % 2)); 'b' with .trans (B[k, j]): x2.trans from
 * rows (k = l % 16, n = 0); 'b' without (B[j, k]): x2 from rows (n = l % 8,
 * k = 8 * (l % 16 / 8)). NULL when the offset depends on what the form leaves out. These are
 * candidates only: ldm_proved decides. */
static IrExpr *ldm_row(Mm *m, char op, bool trans, IrExpr *off, Var *mh, Var *nc, Var *kv)
{
	Arena *a = m->a;
	IrExpr *x = ir_par(a, PT_TIDX), *eight = ir_int(a, 8);
	IrExpr *l8 = ix_mod(a, m->rg, x, eight), *l16 = ix_mod(a, m->rg, x, ir_int(a, 16));
	IrExpr *half = ix_mul(a, eight, ix_div(a, m->rg, x, ir_int(a, 16))); /* 8 * (l / 16) */
	IrExpr *odd8 = ix_mul(a, eight, ix_div(a, m->rg, l16, eight));      /* 8 * (l % 16 / 8) */
	if (op == 'a')
		return trans ? at_element(m, off, mh, nc, kv, odd8, NULL, ix_add(a, l8, half))
			     : at_element(m, off, mh, nc, kv, l16, NULL, half);
	return trans ? at_element(m, off, mh, nc, kv, NULL, ir_int(a, 0), l16)
		     : at_element(m, off, mh, nc, kv, NULL, l8, odd8);
}

/* The per-lane loads of operand op replaced by the lane's row address (ldm_row) when
 * ldmatrix provably loads the same elements, in the form its tile's layout allows (A[i, k]
 * and B[j, k] plain, A[k, i] and B[k, j] with .trans: the other form's proof fails), and the
 * operand's buffer keeps rows aligned (a multiple of 8 elements, so every circular-buffer
 * slot does too). */
static bool try_ldmatrix(Mm *m, Stmt *mm, char op, IrExpr *off, Var *mh, Var *nc, Var *kv)
{
	Arena *a = m->a;
	const MmaInstr *in = mm->mma.instr;
	int first = op == 'a' ? in->nc : in->nc + in->na, n = op == 'a' ? in->na : in->nb;
	IrExpr **loads = mm->mma.idx + first, *row = NULL;
	Tensor *t = loads[0]->tensor;
	Axis **axes;
	int nax = index_buffer_axes(a, t, &axes);
	int64_t size = 1, e;
	for (int i = 0; i < nax; i++)
		size = size > 0 && ir_is_const(axes[i]->extent, &e) ? size * e : 0;
	if (size <= 0 || size % 8 || dtype_size(t->dtype) != 2)
		return false;
	/* the layout of the operand's own order first (A plain, B transposed) */
	bool trans = false;
	for (int form = 0; form < 2 && !row; form++) {
		trans = (op == 'b') != (form == 1);
		row = ldm_row(m, op, trans, off, mh, nc, kv);
		if (row && !ldm_proved(m->k, loads, n, row, trans))
			row = NULL;
	}
	if (!row)
		return false;
	IrExpr **idx = arena_alloc(a, sizeof(IrExpr *) * (size_t)(mm->mma.nidx - n + 1));
	int j = 0;
	for (int i = 0; i < mm->mma.nidx; i++) {
		if (i == first)
			idx[j++] = ir_load(a, t, row);
		if (i < first || i >= first + n)
			idx[j++] = mm->mma.idx[i];
	}
	idx[first]->dtype = loads[0]->dtype;
	mm->mma.idx = idx;
	mm->mma.nidx = j;
	unsigned bit = op == 'a' ? MMA_LDM_A : MMA_LDM_B;
	mm->mma.ldm |= bit;
	if (trans)
		mm->mma.ldt |= bit;
	return true;
}

static bool is_tidx_cond(IrExpr *c)
{
	return c && ir_expr_any(c, is_tidx, NULL);
}

/* Replaces the accumulation nests in list *p; lane_if: inside an `if` on threadIdx.x. */
static bool lower_list(Mm *m, Stmt **p, bool lane_if)
{
	for (; *p; p = &(*p)->next) {
		Stmt *s = *p;
		Tensor *t = s->kind == KS_FOR && s->loop.var->axis ? s->loop.var->axis->owner : NULL;
		/* the accumulation, not the identity stores before it (no k loop) or the reader */
		if (t && t->sched.mma && t->sched.mma->mh == s->loop.var->axis &&
		    ir_stmts_any(s->loop.body, loops_over, t->sched.mma->k)) {
			if (lane_if) {
				diag_error(m->d, t->sched.mma->span, "the mma of '%s' is inside a condition on threadIdx.x, the warp's lane: mma.sync needs every lane",
					   t->name);
				return false;
			}
			Stmt *r = lower_nest(m, t, s);
			if (!r)
				return false;
			r->next = s->next;
			*p = r;
			continue;
		}
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		bool in_lane = lane_if || (s->kind == KS_IF && is_tidx_cond(s->branch.cond));
		for (int i = 0; i < n; i++)
			if (!lower_list(m, lists[i], in_lane))
				return false;
	}
	return true;
}

/* ---- fragments in registers, loaded once per warp tile ----------------------------------
 *
 * A warp tile of mo x no instructions (unrolled loops around the KS_MMA) reads each A
 * fragment no times and each B fragment mo times. The operands move into KS_MMA_LOAD
 * statements that fill register arrays before the outermost such loop (`As_frag[ks][mo][8]`,
 * `Bs_frag[ks][no][4]`), each loaded once, under copies of only the loops it depends on; the
 * KS_MMA then reads the registers. Loops are hoisted over only when unrolled and of constant
 * extent (registers need constant indices) and while a fragment array stays within
 * FRAG_MAX elements. */
#define FRAG_MAX 128
#define CHAIN_MAX 8

/* The operand's loads of mm moved into fragment registers loaded before *at; the loops
 * L[0..n) (outer to inner) are those around mm inside *at. */
static Var *pair_tiles(Mm *m, Stmt *ld, Var *v);

static Stmt *hoist_operand(Mm *m, Stmt *mm, char op, Stmt **L, int n, Stmt **at)
{
	Arena *a = m->a;
	const MmaInstr *in = mm->mma.instr;
	int cnt, first = mma_slot(mm, op, &cnt), nel = op == 'a' ? in->na : in->nb;
	unsigned ldm = mm->mma.ldm & (op == 'a' ? MMA_LDM_A : MMA_LDM_B), ldt = mm->mma.ldt & ldm;
	IrExpr **src = mm->mma.idx + first;
	Tensor *from = src[0]->tensor;
	DType dt = src[0]->dtype;
	/* the loops the operand depends on, their fresh copies, the fragment's index */
	IrExpr *lin = ir_int(a, 0), *flin = ir_int(a, 0);
	Var *fresh[CHAIN_MAX];
	int64_t size = nel;
	int dep[CHAIN_MAX], nd = 0;
	for (int i = 0; i < n; i++) {
		bool uses = false;
		for (int r = 0; r < cnt; r++)
			uses |= mentions(src[r], L[i]->loop.var);
		if (!uses)
			continue;
		int64_t e = 0;
		ir_is_const(L[i]->loop.var->extent, &e);
		dep[nd] = i;
		fresh[nd] = kir_new_var(m->k, L[i]->loop.var->axis ? L[i]->loop.var->axis->name : L[i]->loop.var->name,
					DT_I64);
		fresh[nd]->extent = L[i]->loop.var->extent;
		lin = ix_add(a, ix_mul(a, lin, ir_int(a, e)), ir_var(a, L[i]->loop.var));
		flin = ix_add(a, ix_mul(a, flin, ir_int(a, e)), ir_var(a, fresh[nd]));
		size *= e;
		nd++;
	}
	const char *name = kir_new_var(m->k, arena_printf(a, "%s_frag", from->name), dt)->name;
	Tensor *f = tensor_buffer(a, name, dt, MEM_LOCAL, ir_int(a, size), mm->span);
	f->sched.mma_frag = true;
	/* the load, under copies of the loops it depends on */
	Stmt *ld = mma_stmt(a, KS_MMA_LOAD, mm->span, f, in, cnt);
	ld->mma.op = op;
	ld->mma.ldm = ldm;
	ld->mma.ldt = ldt;
	ld->mma.tiles = 1;
	ld->mma.offset = ir_simplify(a, m->rg, ix_mul(a, flin, ir_int(a, nel)));
	for (int r = 0; r < cnt; r++) {
		IrExpr *e = src[r];
		for (int i = 0; i < nd; i++)
			e = ir_subst(a, e, L[dep[i]]->loop.var, ir_var(a, fresh[i]));
		ld->mma.idx[r] = ir_simplify(a, m->rg, e);
	}
	Var *step = nd && dep[0] == 0 ? fresh[0] : NULL;
	if (nd && ldm == MMA_LDM_B)
		fresh[nd - 1] = pair_tiles(m, ld, fresh[nd - 1]);
	ld->mma.step = fresh[0] == step ? step : NULL; /* not when the pairing took that loop */
	Stmt *nest = ld;
	for (int i = nd - 1; i >= 0; i--) {
		nest = kir_for(m->k, fresh[i], nest);
		nest->loop.unroll = true;
		nest->span = L[dep[i]]->span;
	}
	Stmt *al = kir_alloc(m->k, f, MEM_LOCAL, ir_int(a, size));
	al->next = nest;
	nest->next = *at;
	*at = al;
	/* the mma reads the registers */
	int total = mm->mma.nidx - cnt + nel;
	IrExpr **idx = arena_alloc(a, sizeof(IrExpr *) * (size_t)total);
	IrExpr *base = ix_mul(a, lin, ir_int(a, nel));
	int j = 0;
	for (int i = 0; i < mm->mma.nidx; i++) {
		if (i == first)
			for (int r = 0; r < nel; r++) {
				idx[j] = ir_load(a, f, ir_simplify(a, m->rg, ix_add(a, base, ir_int(a, r))));
				idx[j++]->dtype = dt;
			}
		if (i < first || i >= first + cnt)
			idx[j++] = mm->mma.idx[i];
	}
	mm->mma.idx = idx;
	mm->mma.nidx = total;
	mm->mma.ldm &= ~ldm;
	mm->mma.ldt &= ~ldm;
	return ld;
}

/* B by ldmatrix.x4 (.trans as the x2 was): two n tiles (v = 2 * v2 and 2 * v2 + 1, v the
 * innermost loop the fragment load ld depends on, of even extent) per instruction, lanes
 * 16 .. 31 giving the rows of the second; its registers follow those of the first in the
 * fragment array. Done when the x2 row address depends on the lane only through lane % 16,
 * so that lanes 16 .. 31 give exactly the x2 rows of tile v + 1 (checked on every value of
 * the variables). Returns the variable the load's loop runs over: v2, or v when the pair is
 * not possible. */
static Var *pair_tiles(Mm *m, Stmt *ld, Var *v)
{
	Arena *a = m->a;
	int64_t e;
	if (!ir_is_const(v->extent, &e) || e % 2)
		return v;
	IrExpr *row = ld->mma.idx[0]->args[0];
	Var *v2 = kir_new_var(m->k, arena_printf(a, "%s_pair", v->name), DT_I64);
	v2->extent = ir_int(a, e / 2);
	IrExpr *pair = ix_add(a, ix_mul(a, ir_int(a, 2), ir_var(a, v2)),
			      ix_div(a, m->rg, ir_par(a, PT_TIDX), ir_int(a, 16)));
	IrExpr *x4 = ir_simplify(a, m->rg, ir_subst(a, row, v, pair));
	IrExpr *low = ir_simplify(a, m->rg, ir_subst(a, ir_rewrite(a, row, lane_mod16, m), v, pair));
	if (!ldm_equal(m->k, x4, low))
		return v;
	Tensor *t = ld->mma.idx[0]->tensor;
	DType dt = ld->mma.idx[0]->dtype;
	ld->mma.idx[0] = ir_load(a, t, x4);
	ld->mma.idx[0]->dtype = dt;
	ld->mma.offset = ir_simplify(a, m->rg, ir_subst(a, ld->mma.offset, v, ix_mul(a, ir_int(a, 2), ir_var(a, v2))));
	ld->mma.tiles = 2;
	return v2;
}

/* The elements a fragment of op would hold with the loops L[j..n) hoisted over. */
static int64_t frag_size(Stmt *mm, char op, Stmt **L, int n, int j)
{
	int cnt, first = mma_slot(mm, op, &cnt);
	int64_t size = op == 'a' ? mm->mma.instr->na : mm->mma.instr->nb, e;
	for (int i = j; i < n; i++) {
		bool uses = false;
		for (int r = 0; r < cnt; r++)
			uses |= mentions(mm->mma.idx[first + r], L[i]->loop.var);
		if (uses && ir_is_const(L[i]->loop.var->extent, &e))
			size *= e;
	}
	return size;
}

/* Fragments for every KS_MMA in list *p. */
static void fragments(Mm *m, Stmt **p)
{
	for (; *p; p = &(*p)->next) {
		Stmt *L[CHAIN_MAX], *s = *p, *mm;
		int n = 0;
		int64_t e;
		while (s && s->kind == KS_FOR && s->loop.unroll && ir_is_const(s->loop.var->extent, &e) &&
		       n < CHAIN_MAX) {
			L[n++] = s;
			s = only(s->loop.body);
		}
		mm = s && s->kind == KS_MMA ? s : NULL;
		if (!mm && (*p)->kind != KS_MMA) {
			Stmt **lists[3];
			int nl = ir_stmt_lists(*p, lists);
			for (int i = 0; i < nl; i++)
				fragments(m, lists[i]);
			continue;
		}
		if (!mm) {
			mm = *p;
			n = 0;
		}
		int j = 0;
		while (j < n && (frag_size(mm, 'a', L, n, j) > FRAG_MAX ||
				 frag_size(mm, 'b', L, n, j) > FRAG_MAX))
			j++;
		Stmt **at = j < n ? (j ? &L[j - 1]->loop.body : p) : n ? &L[n - 1]->loop.body : p;
		Stmt *lb = hoist_operand(m, mm, 'b', L + j, n - j, at);
		Stmt *la = hoist_operand(m, mm, 'a', L + j, n - j, at);
		/* both operands loaded for every step of the outermost loop hoisted over, which
		 * the accumulators do not depend on: the k steps mma_pipeline may overlap */
		bool acc_k = false;
		for (int i = 0; j < n && i < mm->mma.instr->nc; i++)
			acc_k |= mentions(mm->mma.idx[i], L[j]->loop.var);
		if (la->mma.step && lb->mma.step && !acc_k)
			mm->mma.step = L[j]->loop.var;
		/* past the statements inserted before the chain, if any */
		for (Stmt *orig = n ? L[0] : mm; *p != orig;)
			p = &(*p)->next;
	}
}

bool pass_mma(Kernel *k, Diag *d)
{
	Fusion *f = k->fusion;
	Tensor *t = NULL;
	for (int i = 0; i < f->ntensors && !t; i++)
		if (f->tensors[i]->sched.mma)
			t = f->tensors[i];
	if (!t)
		return true;
	int64_t x = 1;
	if (k->launch[PT_TIDX] && !ir_is_const(k->launch[PT_TIDX], &x))
		x = -1;
	if (x != 32) {
		diag_error(d, t->sched.mma->span, "threadIdx.x is the lane of the warp in an mma, so the block's x dimension must be 32; it is %lld here (the largest extent any tensor binds to threadIdx.x)",
			   (long long)x);
		return false;
	}
	IrRange rg = ir_range_in(k);
	Mm m = {k, d, k->arena, NULL, NULL, &rg};
	m.g = kir_new_var(k, "mma_g", DT_I64);
	m.g->extent = ir_int(k->arena, 8);
	m.t = kir_new_var(k, "mma_t", DT_I64);
	m.t->extent = ir_int(k->arena, 4);
	if (!lower_list(&m, &k->body, false))
		return false;
	fragments(&m, &k->body);
	return true;
}
