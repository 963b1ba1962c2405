/* hoist.c: the last pass: a division (or remainder) by a value that is not a constant, of an
 * expression made of thread and block indices and sizes only, is the same in every loop and
 * branch of a thread. Each such expression is computed once, into a kernel-scope local
 * assigned at the top of the kernel (`quot = blockIdx.x / ceil(M / 64)`), and its uses read
 * the local.
 *
 * Why: a merged block index (the transpose's tiles, a middle-axis sum's batch and column
 * blocks) is divided back by a size in every load, store and predicate. nvcc does not hoist
 * a division that sits after a `&&` (it is not speculated: the divisor is not known to be
 * non-zero), so the transpose computed its block decomposition 16 times per thread
 * (docs/auto_schedule.md, "The merged block index"). At the top every thread runs it once,
 * whatever its predicates say; the value is used only where the original was.
 *
 * At the top every thread computes it, also where its nest has no elements and would not
 * have (another output's nest of the same kernel gives the grid its size: a divisor
 * ceil(N / 2048) is 0 when N is): each divisor d becomes max(d, 1), which changes nothing
 * where the value is used (d > 0 there, or the nest's own bound fails). The backend prints
 * each local's value as before (a quotient of a block index in 32 bits).
 */
#include "passes/passes.h"

enum { MAX_HOISTED = 64 };

typedef struct Hoist {
	Kernel *k;
	IrExpr *orig[MAX_HOISTED];  /* the hoisted expressions, as found */
	IrExpr *value[MAX_HOISTED]; /* the locals' values (divisors at least 1) */
	Var *var[MAX_HOISTED];
	int n;
} Hoist;

/* Made of integer constants, sizes and parallel indices only; *par: one of the latter. */
static bool invariant(IrExpr *e, bool *par)
{
	switch (e->kind) {
	case EX_PAR:
		*par = true;
		break;
	case EX_INT:
	case EX_SIZE:
	case EX_OP:
	case EX_CAST:
	case EX_SELECT:
		break;
	default:
		return false;
	}
	if (dtype_is_float(e->dtype))
		return false;
	for (int i = 0; i < e->nargs; i++)
		if (!invariant(e->args[i], par))
			return false;
	return true;
}

/* A division, remainder or ceiling division by a value that is not a constant. */
static bool divides(IrExpr *e)
{
	int64_t c;
	return e->kind == EX_OP && (e->op == OP_DIV || e->op == OP_MOD || e->op == OP_CEILDIV) &&
	       !dtype_is_float(e->dtype) && !ir_is_const(e->args[1], &c);
}

/* e's divisors that are not constants, d -> max(d, 1) (an ir_rewrite function). */
static IrExpr *at_least_one(Arena *a, IrExpr *e, void *ctx)
{
	(void)ctx;
	if (!divides(e))
		return e;
	IrExpr *d = e->args[1];
	return ir_op(a, e->op, e->dtype, e->args[0], ir_op(a, OP_MAX, d->dtype, d, ir_int(a, 1)));
}

static Var *local_for(Hoist *h, IrExpr *e)
{
	for (int i = 0; i < h->n; i++)
		if (ir_equal(h->orig[i], e))
			return h->var[i];
	if (h->n == MAX_HOISTED)
		return NULL;
	Arena *a = h->k->arena;
	Var *v = kir_new_var(h->k, e->op == OP_MOD ? "rem" : "quot", e->dtype);
	vec_push(a, &h->k->locals, v);
	h->orig[h->n] = e;
	h->value[h->n] = ir_rewrite(a, e, at_least_one, NULL);
	h->var[h->n++] = v;
	return v;
}

/* e with its outermost hoistable divisions replaced by their locals (copy on write: e's
 * nodes may be shared). */
static IrExpr *hoist(Hoist *h, IrExpr *e)
{
	bool par = false;
	if (divides(e) && invariant(e, &par) && par) {
		Var *v = local_for(h, e);
		if (v)
			return ir_var(h->k->arena, v);
	}
	IrExpr **args = NULL;
	for (int i = 0; i < e->nargs; i++) {
		IrExpr *n = hoist(h, e->args[i]);
		if (n == e->args[i])
			continue;
		if (!args) {
			args = arena_alloc(h->k->arena, sizeof(IrExpr *) * (size_t)e->nargs);
			for (int j = 0; j < e->nargs; j++)
				args[j] = e->args[j];
		}
		args[i] = n;
	}
	if (!args)
		return e;
	IrExpr *c = NEW(h->k->arena, IrExpr);
	*c = *e;
	c->args = args;
	return c;
}

static bool hoist_slot(IrExpr **slot, void *ctx)
{
	*slot = hoist(ctx, *slot);
	return false;
}

static void hoist_list(Hoist *h, Stmt *s)
{
	for (; s; s = s->next) {
		ir_stmt_exprs(s, hoist_slot, h);
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		for (int i = 0; i < n; i++)
			hoist_list(h, *lists[i]);
	}
}

bool pass_hoist(Kernel *k, Diag *d)
{
	(void)d;
	Hoist h = {.k = k};
	hoist_list(&h, k->body);
	/* the lets, in the order their values were first met, before everything else */
	Stmt *head = k->body;
	for (int i = h.n - 1; i >= 0; i--) {
		Stmt *let = NEW(k->arena, Stmt);
		let->kind = KS_LET;
		let->let.var = h.var[i];
		let->let.value = h.value[i];
		let->next = head;
		head = let;
	}
	k->body = head;
	return true;
}
