/* private_local.c: a register (local) tensor is private to a thread, and a shared tensor to a
 * block (docs/lowering.md): every element a thread reads from registers must be one that thread
 * wrote, and every element a block reads from shared memory one that block wrote.
 *
 * Runs right after loop_nest, on logical subscripts. A materialized tensor t spreads its
 * elements over threads (and blocks) only through its own axes bound to a parallel type
 * (aliases of its consumer's loops carry the same value for writer and reader; serial axes and
 * unbound parallel types are computed by every thread; reduction axes are combined before
 * anyone reads). The types that matter are every type for a local tensor and the block types
 * for a shared one (its threads share it; its blocks each have their own copy, which they
 * fill for themselves). For each such axis ax bound to P, the element a reader accesses must
 * be on the reader's own P index: the position along ax computed forward from the read's
 * subscripts (index_forward) must simplify to `P` itself. That is exactly which index of P
 * wrote the element, through every split and merge, non-divisible ones and their parts
 * included: t's store at P index p writes only elements whose position along ax is p (the
 * others are past a split's extent, and predicated off). So the reader's position is compared
 * with P, never with the expression of t's own store: where the store at p writes nothing
 * (every element past an inner extent, as for a part of extent 1 split by 32), that
 * expression says nothing about who wrote the element, even when both simplify alike (to 0).
 * The simplifier knows P < the reader's own bound extent (its predicate). Anything else,
 * including what the simplifier cannot prove, is an error at the directive that put t in
 * registers or in shared memory, e.g. `x.cache_after(local)` with `xl.jt` bound to threadIdx.x
 * (32 threads) read by `y`'s 64 threads, or `x.cache_after(shared)` with `xs.jo` bound to
 * blockIdx.y read by `y` in a serial loop over `jo` (block (i, 0) would read what block (i, 1)
 * wrote).
 */
#include "passes/passes.h"

typedef struct Priv {
	Kernel *k;
	Diag *d;
	Vec bad; /* tensors already reported */
	bool ok;
} Priv;

static bool is_private(Tensor *t)
{
	return t->kind == TK_INTERMEDIATE && t->sched.ca_tensor &&
	       (t->sched.mem == MEM_LOCAL || t->sched.mem == MEM_SHARED);
}

/* Whether t's elements spread over P are private to each index of P: registers to a thread
 * (and so to a block), shared memory to a block. */
static bool private_over(Tensor *t, ParType p)
{
	return t->sched.mem == MEM_LOCAL || par_is_block(p);
}

static Span reg_span(Tensor *t)
{
	if (t->sched.cache_span.file)
		return t->sched.cache_span;
	if (t->sched.mem_span.file)
		return t->sched.mem_span;
	return t->sched.ca_span.file ? t->sched.ca_span : t->span;
}

/* The tensor statement s computes an element of (a store's or copy's, an accumulation's), or
 * NULL. */
static Tensor *reader_tensor(Stmt *s)
{
	return s->kind == KS_LET ? s->let.tensor : ir_stmt_write(s, NULL);
}

static void report(Priv *p, Tensor *t, Axis *ax, Stmt *reader)
{
	for (int i = 0; i < p->bad.len; i++)
		if (p->bad.items[i] == t)
			return;
	vec_push(p->k->arena, &p->bad, t);
	p->ok = false;
	Tensor *who = reader ? reader_tensor(reader) : NULL;
	bool blocks = par_is_block(ax->par);
	diag_error(p->d, reg_span(t),
		   "'%s' is %s, but %s reads elements of it that other %s wrote ('%s.%s' is bound "
		   "to %s)", t->name,
		   t->sched.mem == MEM_LOCAL ? "a register (local) tensor" : "in shared memory",
		   who ? arena_printf(p->k->arena, "'%s'", who->name) : "its reader",
		   blocks ? "blocks" : "threads", t->name, ax->name, par_name(ax->par));
	diag_note(p->d, ax->par_span, "'%s' is spread over %s here", t->name, par_name(ax->par));
	if (blocks)
		diag_note(p->d, (Span){0},
			  "each block has its own registers and shared memory: bind the reader's loop "
			  "over these elements to %s the same way, or leave '%s.%s' unbound so that "
			  "every block computes what it reads", par_name(ax->par), t->name, ax->name);
	else
		diag_note(p->d, (Span){0},
			  "registers are private to each thread: use cache_after(shared) or "
			  "memory(shared) to share '%s' between threads, or bind its reader's loops "
			  "the same way", t->name);
}

/* The extent a tensor binds to P (through aliases), or P's launch extent when it binds none
 * (then every index of P runs its statements). */
static IrExpr *bound_extent(Kernel *k, Tensor *u, ParType par)
{
	for (int i = 0; u && i < u->ndomain; i++) {
		Axis *ax = u->domain[i];
		while (ax->ca_alias)
			ax = ax->ca_alias;
		if (ax->par == par)
			return ax->extent;
	}
	return k->launch[par];
}

/* A parallel index that can only be 0 (a launch extent of 1: one block along a tile as large
 * as a constant extent) is 0. */
static IrExpr *only_zero(Arena *a, IrExpr *e, void *ctx)
{
	const IrRange *rg = ctx;
	int64_t lo, hi;
	if (e->kind == EX_PAR && ir_range(rg, e, &lo, &hi) && lo == 0 && hi == 0)
		return ir_int(a, 0);
	return e;
}

/* The position along ax of the element at subs, simplified knowing that P < extent (the
 * predicate pass guards the statement so: par_conds): ranges come from a copy of the kernel
 * whose launch extent of P is that one. A split as large as its extent leaves its outer
 * index (which is 0) in the position: `blockIdx.y * 2 + threadIdx.z` for a 128-row tile of
 * 128 rows, which is threadIdx.z. */
static IrExpr *position(Priv *p, Axis *ax, IrExpr **subs, int n, IrExpr *extent)
{
	Arena *a = p->k->arena;
	Kernel under = *p->k;
	under.launch[ax->par] = extent;
	IrRange rg = ir_range_in(&under);
	IrExpr *e = ir_simplify(a, &rg, index_forward(a, &rg, ax, subs, n));
	return ir_simplify(a, &rg, ir_rewrite(a, e, only_zero, &rg));
}

/* Every P index of the reader that reads the element at `e` wrote it: its position along each
 * of t's own P-bound axes is the reader's P index (where that is past ax's extent, the element
 * is past t's shape, so the read is predicated off). */
static void check_access(Priv *p, IrExpr *e, Stmt *reader)
{
	Tensor *t = e->tensor;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if (ax->ca_alias || ax->reduction || ax->par == PT_SERIAL ||
		    !private_over(t, ax->par))
			continue;
		IrExpr *er = bound_extent(p->k, reader_tensor(reader), ax->par);
		if (ir_equal(position(p, ax, e->args, e->nargs, er), ir_par(p->k->arena, ax->par)))
			continue;
		report(p, t, ax, reader);
		return;
	}
}

static void check_expr(Priv *p, IrExpr *e, Stmt *reader)
{
	if (!e)
		return;
	for (int i = 0; i < e->nargs; i++)
		check_expr(p, e->args[i], reader);
	if (e->kind == EX_ACCESS && is_private(e->tensor))
		check_access(p, e, reader);
}

static void check_list(Priv *p, Stmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == KS_STORE)
			check_expr(p, s->store.value, s);
		else if (s->kind == KS_LET)
			check_expr(p, s->let.value, s);
		else if (s->kind == KS_BLOCK_REDUCE)
			check_expr(p, s->block_red.value, s);
		else if (s->kind == KS_IF)
			check_expr(p, s->branch.cond, s);
		else if (s->kind == KS_VSTORE || s->kind == KS_CP_ASYNC)
			check_expr(p, s->copy.cond, s);
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			check_list(p, *lists[i]);
	}
}

bool pass_private_local(Kernel *k, Diag *d)
{
	Priv p = {.k = k, .d = d, .ok = true};
	check_list(&p, k->body);
	return p.ok;
}
