/* walk.c: the one place that lists a statement's children (its expression fields and its
 * nested statement lists), and the small expression queries every pass needs: substitution
 * of a variable, "does this expression mention that variable / read that tensor".
 *
 * Adding an expression field or a nested list to a statement kind touches ir_stmt_exprs or
 * ir_stmt_lists only; the passes, the simulator and the printers reach the children through
 * them (or through the walkers below, which are built on them).
 */
#include "ir/ir.h"

/* The subscript array of s (KS_STORE before indexing, KS_MMA, KS_MMA_LOAD) and its length,
 * or NULL. */
static IrExpr ***stmt_idx(Stmt *s, int **n)
{
	if (s->kind == KS_STORE) {
		*n = &s->store.nidx;
		return &s->store.idx;
	}
	if (s->kind == KS_MMA || s->kind == KS_MMA_LOAD) {
		*n = &s->mma.nidx;
		return &s->mma.idx;
	}
	return NULL;
}

bool ir_stmt_exprs(Stmt *s, IrSlotFn fn, void *ctx)
{
	IrExpr **all[4] = {0};
	switch (s->kind) {
	case KS_IF:
		all[0] = &s->branch.cond;
		break;
	case KS_ALLOC:
		all[0] = &s->alloc.size;
		break;
	case KS_STORE:
		all[0] = &s->store.offset;
		all[1] = &s->store.value;
		all[2] = &s->store.split_cond;
		break;
	case KS_VSTORE:
	case KS_CP_ASYNC:
		all[0] = &s->copy.cond;
		all[1] = &s->copy.size;
		all[2] = &s->copy.offset;
		all[3] = &s->copy.src_offset;
		break;
	case KS_LET:
		all[0] = &s->let.value;
		all[1] = &s->let.split_cond;
		break;
	case KS_BLOCK_REDUCE:
		all[0] = &s->block_red.value;
		break;
	case KS_MMA_LOAD:
		all[0] = &s->mma.offset;
		break;
	case KS_GRID_REDUCE:
		all[0] = &s->grid_red.offset;
		all[1] = &s->grid_red.value;
		all[2] = &s->grid_red.part;
		all[3] = &s->grid_red.nparts;
		break;
	default:
		break;
	}
	for (int i = 0; i < countof(all); i++)
		if (all[i] && *all[i] && fn(all[i], ctx))
			return true;
	int *n;
	IrExpr ***idx = stmt_idx(s, &n);
	for (int i = 0; idx && i < *n; i++)
		if ((*idx)[i] && fn(&(*idx)[i], ctx))
			return true;
	return false;
}

int ir_stmt_lists(Stmt *s, Stmt **out[3])
{
	int n = 0;
	if (s->kind == KS_FOR)
		out[n++] = &s->loop.body;
	if (s->kind == KS_GRID_REDUCE)
		out[n++] = &s->grid_red.body;
	if (s->kind == KS_IF) {
		out[n++] = &s->branch.then;
		out[n++] = &s->branch.els;
	}
	return n;
}

bool ir_expr_any(IrExpr *e, IrExprPred fn, void *ctx)
{
	if (!e)
		return false;
	if (fn(e, ctx))
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (ir_expr_any(e->args[i], fn, ctx))
			return true;
	return false;
}

bool ir_stmts_any(Stmt *list, IrStmtPred fn, void *ctx)
{
	for (Stmt *s = list; s; s = s->next) {
		if (fn(s, ctx))
			return true;
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		for (int i = 0; i < n; i++)
			if (ir_stmts_any(*lists[i], fn, ctx))
				return true;
	}
	return false;
}

typedef struct AnyExpr { IrExprPred fn; void *ctx; } AnyExpr;

static bool slot_any(IrExpr **slot, void *ctx)
{
	AnyExpr *ae = ctx;
	return ir_expr_any(*slot, ae->fn, ae->ctx);
}

static bool stmt_any_expr(Stmt *s, void *ctx)
{
	return ir_stmt_exprs(s, slot_any, ctx);
}

bool ir_stmts_any_expr(Stmt *list, IrExprPred fn, void *ctx)
{
	AnyExpr ae = {fn, ctx};
	return ir_stmts_any(list, stmt_any_expr, &ae);
}

typedef struct Rw { Arena *a; IrRewrite fn; void *ctx; } Rw;

static bool slot_rewrite(IrExpr **slot, void *ctx)
{
	Rw *rw = ctx;
	*slot = ir_rewrite(rw->a, *slot, rw->fn, rw->ctx);
	return false;
}

void ir_stmt_rewrite(Arena *a, Stmt *s, IrRewrite fn, void *ctx)
{
	Rw rw = {a, fn, ctx};
	ir_stmt_exprs(s, slot_rewrite, &rw);
}

void ir_stmts_rewrite(Arena *a, Stmt *list, IrRewrite fn, void *ctx)
{
	for (Stmt *s = list; s; s = s->next) {
		ir_stmt_rewrite(a, s, fn, ctx);
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		for (int i = 0; i < n; i++)
			ir_stmts_rewrite(a, *lists[i], fn, ctx);
	}
}

Tensor *ir_stmt_write(Stmt *s, IrExpr ***offset)
{
	IrExpr **off = NULL;
	Tensor *t = NULL;
	if (s->kind == KS_STORE) {
		t = s->store.tensor;
		off = &s->store.offset;
	} else if (s->kind == KS_VSTORE || s->kind == KS_CP_ASYNC) {
		t = s->copy.tensor;
		off = &s->copy.offset;
	}
	if (offset)
		*offset = off;
	return t;
}

Stmt *ir_stmt_clone(Arena *a, Stmt *s)
{
	Stmt *c = NEW(a, Stmt);
	*c = *s;
	c->next = NULL;
	int *n;
	IrExpr ***idx = stmt_idx(c, &n);
	if (idx && *n) {
		IrExpr **copy = arena_alloc(a, sizeof(IrExpr *) * (size_t)*n);
		for (int i = 0; i < *n; i++)
			copy[i] = (*idx)[i];
		*idx = copy;
	}
	return c;
}

/* ---- expression queries ------------------------------------------------------------------ */

static bool is_var(IrExpr *e, void *v)
{
	return e->kind == EX_VAR && e->var == v;
}

bool ir_mentions(IrExpr *e, Var *v)
{
	return ir_expr_any(e, is_var, v);
}

static bool loads(IrExpr *e, void *t)
{
	return e->kind == EX_LOAD && e->tensor == t;
}

bool ir_reads(IrExpr *e, Tensor *t)
{
	return ir_expr_any(e, loads, t);
}

typedef struct Subst { Var *v; IrExpr *with; } Subst;

static IrExpr *subst_fn(Arena *a, IrExpr *e, void *ctx)
{
	Subst *s = ctx;
	return e->kind == EX_VAR && e->var == s->v ? ir_copy(a, s->with) : e;
}

IrExpr *ir_subst(Arena *a, IrExpr *e, Var *v, IrExpr *with)
{
	Subst s = {v, with};
	return e ? ir_rewrite(a, e, subst_fn, &s) : NULL;
}
