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
 *
 * Before that, a product of a sum by a size whose addends partly vary (loop variables) is
 * distributed (`distribute`): the invariant part of a row offset stays out of the loops
 * (docs/tensor_cores.md, "The mainloop's instructions").
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

/* Whether e reads a loop variable or a temporary (changes within the kernel). */
static bool varies(IrExpr *e)
{
	if (e->kind == EX_VAR)
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (varies(e->args[i]))
			return true;
	return false;
}

/* (a + b + ...) * s, s a size (made of sizes and thread indices, not a constant) and some of
 * the addends varying: each varying addend times s, plus the sum of the others times s (an
 * ir_rewrite function). A row (ko * 64 + 128 + u * 8 + threadIdx.y) of a k tile times the row
 * stride N becomes ko * 64 * N + u * 8 * N + (128 + threadIdx.y) * N: the part that does not
 * depend on ko is the same in every iteration (nvcc keeps it out of the loop) and the rest is
 * a product by a constant of ko * N; as one product, nvcc multiplied every copy's row by N in
 * 64 bits in every iteration (6 to 8 instructions each). */
static IrExpr *distribute(Arena *a, IrExpr *e, void *ctx)
{
	(void)ctx;
	int64_t c;
	bool par = false;
	if (e->kind != EX_OP || e->op != OP_MUL || dtype_is_float(e->dtype))
		return e;
	int q = e->args[0]->kind == EX_OP && e->args[0]->op == OP_ADD ? 0 : 1;
	IrExpr *sum = e->args[q], *st = e->args[1 - q], *v[16], *out = NULL, *fixed = NULL;
	int n = 0;
	if (ir_is_const(st, &c) || !invariant(st, &par) || !ir_addends(sum, e->dtype, v, &n) ||
	    n < 2)
		return e;
	for (int i = 0; i < n; i++) {
		if (!varies(v[i])) {
			fixed = fixed ? ir_op(a, OP_ADD, e->dtype, fixed, v[i]) : v[i];
			continue;
		}
		IrExpr *t = ir_op(a, OP_MUL, e->dtype, v[i], st);
		out = out ? ir_op(a, OP_ADD, e->dtype, out, t) : t;
	}
	if (!out)
		return e;
	return fixed ? ir_op(a, OP_ADD, e->dtype, out, ir_op(a, OP_MUL, e->dtype, fixed, st)) : out;
}

static bool hoist_slot(IrExpr **slot, void *ctx)
{
	Hoist *h = ctx;
	*slot = hoist(h, ir_rewrite(h->k->arena, *slot, distribute, NULL));
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
