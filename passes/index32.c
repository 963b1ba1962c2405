/* index32.c: the 32-bit index variant of a lowered kernel (docs/auto_schedule.md, "Size
 * variants").
 *
 * The lowering computes every index in i64 (ir/expr.c: the ix_* constructors), so that no size
 * wraps; on the GPU that is two instructions (or more: 64-bit multiplies) for each address
 * step. When every element count the kernel indexes fits in 31 bits, the same kernel with its
 * index arithmetic in i32 computes the same offsets: index32_variant makes that copy of a
 * finished kernel (no pass runs again) with one precondition, PC_INDEX32, and lower_fusion
 * puts it in front of the kernel in the launch chain (`FUSION_kernel_i32`, then
 * `FUSION_kernel`), so that larger sizes take the 64-bit kernel, never a wrapped index.
 *
 * What is retyped: loop variables, the scalar locals whose every value is index arithmetic
 * (hoisted quotients), and in the index slots (offsets, loop extents, conditions, sizes of
 * copies, mma operand offsets) every subexpression of sizes, parallel indices, literals and
 * such variables. Values (a store's, an accumulation's) keep their dtype: an index variable
 * read as a value is widened back to i64 there (EX_CAST, printed explicitly by the backend),
 * so `out[i] = i * j` still multiplies in 64 bits; only a comparison of affine index arithmetic
 * in a value (the bounds test of a masked load) is 32-bit there.
 *
 * The precondition bounds the element counts of the domains the loops and the parallel
 * indices run over (each tensor's shape, each merged axis), with a margin below 2^31 for the padding of
 * non-divisible splits (PC_INDEX32_LIMIT): an index the kernel compares against a bound is at
 * most such a count plus that padding; an offset it uses is below a tensor's element count,
 * and an offset it computes but does not use (a predicated-off lane's) is never compared.
 */
#include <string.h>

#include "passes/passes.h"

/* 2^31 - 1 less the padding a split chain may add to a counted extent (tiles of up to 2^24
 * elements along one axis). */
#define PC_INDEX32_LIMIT (INT32_MAX - (1 << 24))

typedef struct Ix {
	Kernel *k;    /* the new kernel */
	Map vars;     /* Var * (of the 64-bit kernel) -> its i32 copy */
	Map index;    /* Var * -> itself: a loop variable, or a let variable whose values are
		       * index arithmetic (so far); &not_index: one that holds values */
} Ix;

static int not_index;

static bool is_index_var(Ix *x, Var *v)
{
	return map_lookup(&x->index, v) == v;
}

static void drop_var(Ix *x, Var *v)
{
	map_insert(x->k->arena, &x->index, v, &not_index);
}

/* e is i64 index arithmetic of sizes, parallel indices, literals and index variables: it
 * computes the same in i32 when its values fit. */
static bool is_index(Ix *x, IrExpr *e)
{
	switch (e->kind) {
	case EX_INT:
		return e->dtype == DT_I64 && e->ival >= INT32_MIN && e->ival <= INT32_MAX;
	case EX_SIZE:
	case EX_PAR:
		return true;
	case EX_VAR:
		return e->var->dtype == DT_I64 && is_index_var(x, e->var);
	case EX_SELECT:
		return e->dtype == DT_I64 && is_index(x, e->args[1]) && is_index(x, e->args[2]);
	case EX_OP:
		if (e->dtype != DT_I64 || (op_kind(e->op) != 'a' && e->op != OP_MIN && e->op != OP_MAX))
			return false;
		for (int i = 0; i < e->nargs; i++)
			if (!is_index(x, e->args[i]))
				return false;
		return true;
	default:
		return false;
	}
}

/* No product of two variable terms in index arithmetic e, a select's operands aside. */
static bool no_product(IrExpr *e)
{
	if (e->kind == EX_OP && e->op == OP_MUL && !ir_is_const(e->args[0], NULL) &&
	    !ir_is_const(e->args[1], NULL))
		return false;
	for (int i = 0; i < e->nargs; i++)
		if (e->kind != EX_SELECT && !no_product(e->args[i]))
			return false;
	return true;
}

/* e is index arithmetic without a product of two variable terms (a bounds test's `rr * 4224 +
 * threadIdx.x / 16`): its value stays within the counts when its terms do. (is_index of e
 * covers every operand below it but a select's: one walk each, not is_index at every
 * level.) */
static bool is_affine(Ix *x, IrExpr *e)
{
	return is_index(x, e) && no_product(e);
}

static IrExpr *retyped(Arena *a, IrExpr *e, DType t)
{
	IrExpr *c = NEW(a, IrExpr);
	*c = *e;
	c->dtype = t;
	return c;
}

/* e with its index variables read as their i32 copies. index: e is an index slot, whose
 * index arithmetic becomes i32 (else a value: the variables are widened back to i64, and the
 * offsets of its loads are index slots). Copy on write. */
static IrExpr *rw(Ix *x, IrExpr *e, bool index)
{
	Arena *a = x->k->arena;
	if (!e)
		return NULL;
	if (e->kind == EX_VAR) {
		Var *v = map_lookup(&x->vars, e->var);
		if (!v)
			return e;
		IrExpr *n = ir_var(a, v);
		n->span = e->span;
		return index ? n : ir_cast(a, e->dtype, n);
	}
	IrExpr **args = e->args;
	/* in a value, a bounds test of affine index arithmetic (a masked load's) is 32-bit too */
	bool test = e->kind == EX_OP && op_kind(e->op) == 'c' && is_affine(x, e->args[0]) &&
		    is_affine(x, e->args[1]);
	for (int i = 0; i < e->nargs; i++) {
		bool sub = e->kind == EX_LOAD || test ? true : index;
		IrExpr *n = rw(x, e->args[i], sub);
		if (n == e->args[i])
			continue;
		if (args == e->args) {
			args = arena_alloc(a, sizeof(IrExpr *) * (size_t)e->nargs);
			for (int j = 0; j < e->nargs; j++)
				args[j] = e->args[j];
		}
		args[i] = n;
	}
	if (args != e->args) {
		IrExpr *c = NEW(a, IrExpr);
		*c = *e;
		c->args = args;
		e = c;
	}
	if (!index || e->dtype != DT_I64)
		return e;
	switch (e->kind) {
	case EX_INT:
		return is_index(x, e) ? retyped(a, e, DT_I32) : e;
	case EX_SIZE:
	case EX_PAR:
		return retyped(a, e, DT_I32);
	case EX_SELECT:
		return e->args[1]->dtype == DT_I32 && e->args[2]->dtype == DT_I32
			       ? retyped(a, e, DT_I32) : e;
	case EX_OP:
		if (op_kind(e->op) != 'a' && e->op != OP_MIN && e->op != OP_MAX)
			return e;
		for (int i = 0; i < e->nargs; i++)
			if (e->args[i]->dtype != DT_I32)
				return e;
		return retyped(a, e, DT_I32);
	default:
		return e;
	}
}

/* ---- which let variables are index arithmetic --------------------------------------- */

typedef struct Lets {
	Ix *x;
	bool changed;
} Lets;

/* Variables that hold values (accumulators, reductions): never index variables. */
static bool drop_value_vars(Stmt *s, void *ctx)
{
	Ix *x = ctx;
	Var *vs[4] = {0};
	if (s->kind == KS_LET && (s->let.tensor || ir_mentions(s->let.value, s->let.var)))
		vs[0] = s->let.var;
	if (s->kind == KS_BLOCK_REDUCE) {
		vs[0] = s->block_red.var, vs[1] = s->block_red.wmean;
		vs[2] = s->block_red.wm2, vs[3] = s->block_red.osum;
	}
	if (s->kind == KS_GRID_REDUCE)
		vs[0] = s->grid_red.var;
	for (int i = 0; i < 4; i++)
		if (vs[i])
			drop_var(x, vs[i]);
	return false;
}

static bool candidate_lets(Stmt *s, void *ctx)
{
	Ix *x = ctx;
	if (s->kind == KS_LET && s->let.var->dtype == DT_I64 && !map_lookup(&x->index, s->let.var))
		map_insert(x->k->arena, &x->index, s->let.var, s->let.var);
	return false;
}

/* A let whose value is not index arithmetic takes its variable out (and so, at the next
 * round, the lets that read it). */
static bool narrow_lets(Stmt *s, void *ctx)
{
	Lets *l = ctx;
	if (s->kind == KS_LET && is_index_var(l->x, s->let.var) && !is_index(l->x, s->let.value)) {
		drop_var(l->x, s->let.var);
		l->changed = true;
	}
	return false;
}

static bool loop_vars(Stmt *s, void *ctx)
{
	Ix *x = ctx;
	if (s->kind == KS_FOR && s->loop.var->dtype == DT_I64)
		map_insert(x->k->arena, &x->index, s->loop.var, s->loop.var);
	return false;
}

/* The i32 copies of the index variables (the extents of loops retyped: loops come before the
 * lets that read them, and an extent reads sizes only or outer loop variables). */
static void copy_vars(Ix *x, Kernel *src)
{
	for (int i = 0; i < src->vars.len; i++) {
		Var *v = VEC_AT(src->vars, Var, i);
		if (!is_index_var(x, v))
			continue;
		Var *c = NEW(x->k->arena, Var);
		*c = *v;
		c->dtype = DT_I32;
		map_insert(x->k->arena, &x->vars, v, c);
	}
	for (int i = 0; i < src->vars.len; i++) {
		Var *c = map_lookup(&x->vars, VEC_AT(src->vars, Var, i));
		if (c && c->extent)
			c->extent = rw(x, c->extent, true);
	}
}

/* ---- the statements ----------------------------------------------------------------- */

typedef struct Slot {
	Ix *x;
	Stmt *s;
} Slot;

/* The value slots: a store's value, a value let's, a reduction's operand. */
static bool is_value_slot(Ix *x, Stmt *s, IrExpr **slot)
{
	return (s->kind == KS_STORE && slot == &s->store.value) ||
	       (s->kind == KS_LET && slot == &s->let.value && !map_lookup(&x->vars, s->let.var)) ||
	       (s->kind == KS_BLOCK_REDUCE && slot == &s->block_red.value) ||
	       (s->kind == KS_GRID_REDUCE && slot == &s->grid_red.value);
}

static bool rw_slot(IrExpr **slot, void *ctx)
{
	Slot *c = ctx;
	*slot = rw(c->x, *slot, !is_value_slot(c->x, c->s, slot));
	return false;
}

static Var *var_of(Ix *x, Var *v)
{
	Var *c = v ? map_lookup(&x->vars, v) : NULL;
	return c ? c : v;
}

static Stmt *rw_list(Ix *x, Stmt *s)
{
	Stmt *head = NULL, **tail = &head;
	for (; s; s = s->next) {
		Stmt *c = ir_stmt_clone(x->k->arena, s);
		Slot sl = {x, c};
		ir_stmt_exprs(c, rw_slot, &sl);
		Stmt **lists[3];
		for (int i = 0, n = ir_stmt_lists(c, lists); i < n; i++)
			*lists[i] = rw_list(x, *lists[i]);
		if (c->kind == KS_FOR)
			c->loop.var = var_of(x, c->loop.var);
		if (c->kind == KS_LET)
			c->let.var = var_of(x, c->let.var);
		if (c->kind == KS_MMA || c->kind == KS_MMA_LOAD)
			c->mma.step = var_of(x, c->mma.step);
		*tail = c;
		tail = &c->next;
	}
	return head;
}

/* ---- the precondition ----------------------------------------------------------------- */

/* Adds the product of n extents to the counts (a constant one: false when it is too large,
 * nothing when it fits). */
static bool add_count(Arena *a, Vec *counts, IrExpr **ext, int n)
{
	IrExpr *p = NULL;
	int64_t c = 1, v;
	bool constant = true;
	for (int i = 0; i < n; i++) {
		if (!ext[i])
			continue;
		constant = constant && ir_is_const(ext[i], &v) && v >= 0 &&
			   !__builtin_mul_overflow(c, v, &c);
		p = p ? ir_op(a, OP_MUL, DT_I64, p, ext[i]) : ext[i];
	}
	if (constant)
		return c <= PC_INDEX32_LIMIT;
	for (int i = 0; i < counts->len; i++)
		if (ir_equal(VEC_AT(*counts, IrExpr, i), p))
			return true;
	vec_push(a, counts, p);
	return true;
}

/* The counts of k's index domains: every tensor's shape, every merged axis of a schedule (the
 * extent of a loop or parallel index over several root axes) and every grid-reduction
 * workspace. False when a constant one is too large (then there is no 32-bit variant). A
 * reduction's extent is a dimension of a tensor it reads; a reduction tensor's whole root
 * domain is not counted (M * N * K for a matrix product: no index runs over it). The grid's
 * threads are not counted either: a parallel index is a position along a tensor's (split or
 * merged) root axes, within a count plus the padding of the splits (blockIdx.x * 128 +
 * threadIdx.x < M * N + 127), and a grid of many small blocks (short rows: M * 128 threads for
 * M rows) indexes no further than its tensors. */
static bool index_counts(Kernel *k, Vec *counts)
{
	Arena *a = k->arena;
	Fusion *f = k->fusion;
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		if (t->kind == TK_SCALAR)
			continue;
		if (!add_count(a, counts, t->shape, t->ndim))
			return false;
		for (int h = 0; h < t->history.len; h++) {
			Axis *ax = VEC_AT(t->history, Axis, h);
			if (ax->kind == AX_MERGE && !add_count(a, counts, &ax->extent, 1))
				return false;
		}
	}
	for (int i = 0; i < k->grid_ws.len; i++)
		if (!add_count(a, counts, &VEC_AT(k->grid_ws, Tensor, i)->shape[0], 1))
			return false;
	return true;
}

/* `X_kernel_i32`, `X_kernel_i32_scalar`: the suffix before the scalar kernel's. */
static const char *i32_name(Arena *a, const char *name)
{
	size_t n = strlen(name), s = strlen("_scalar");
	if (n > s && strcmp(name + n - s, "_scalar") == 0)
		return arena_printf(a, "%.*s_i32_scalar", (int)(n - s), name);
	return arena_printf(a, "%s_i32", name);
}

Precond *kernel_index32(Kernel *k)
{
	for (int i = 0; i < k->preconds.len; i++)
		if (VEC_AT(k->preconds, Precond, i)->kind == PC_INDEX32)
			return VEC_AT(k->preconds, Precond, i);
	return NULL;
}

static Kernel *make_variant(Kernel *k);

/* k's 32-bit copy: with the precondition and the name `..._i32`, or when every count is a
 * constant that fits, with k's name and preconditions (k's replacement). Made once per
 * kernel: a later header of k (a copy of its struct, renamed) gets a fresh header of the
 * same variant, named after it. */
Kernel *index32_variant(Kernel *k)
{
	if (!k->index32_made) {
		k->index32 = make_variant(k);
		k->index32_made = true;
		k->fusion->index32_rewrites += k->index32 != NULL;
	}
	Kernel *v = k->index32;
	if (!v)
		return NULL;
	Kernel *n = NEW(k->arena, Kernel);
	*n = *v;
	n->name = kernel_index32(v) ? i32_name(k->arena, k->name) : k->name;
	n->options = k->options;
	n->fallback = NULL;
	return n;
}

static Kernel *make_variant(Kernel *k)
{
	Arena *a = k->arena;
	Vec counts = {0};
	if (k->segments.len || !k->body || !index_counts(k, &counts))
		return NULL;
	Kernel *n = NEW(a, Kernel);
	*n = *k;
	if (counts.len)
		n->name = i32_name(a, k->name);
	n->fallback = NULL;
	Ix x = {.k = n};
	ir_stmts_any(k->body, loop_vars, &x);
	ir_stmts_any(k->body, candidate_lets, &x);
	ir_stmts_any(k->body, drop_value_vars, &x);
	for (Lets l = {&x, true}; l.changed;) {
		l.changed = false;
		ir_stmts_any(k->body, narrow_lets, &l);
	}
	copy_vars(&x, k);
	n->body = rw_list(&x, k->body);
	n->vars = (Vec){0};
	for (int i = 0; i < k->vars.len; i++)
		vec_push(a, &n->vars, var_of(&x, VEC_AT(k->vars, Var, i)));
	n->locals = (Vec){0};
	for (int i = 0; i < k->locals.len; i++)
		vec_push(a, &n->locals, var_of(&x, VEC_AT(k->locals, Var, i)));
	/* its own preconditions: the kernel's (shared, never changed), then the index bound */
	n->preconds = (Vec){0};
	for (int i = 0; i < k->preconds.len; i++)
		vec_push(a, &n->preconds, k->preconds.items[i]);
	if (!counts.len) /* constant counts that fit: k itself, in 32 bits */
		return n;
	Precond *p = NEW(a, Precond);
	p->kind = PC_INDEX32;
	p->value = PC_INDEX32_LIMIT;
	p->span = k->fusion->span;
	p->counts = (IrExpr **)counts.items;
	p->ncounts = counts.len;
	vec_push(a, &n->preconds, p);
	return n;
}
