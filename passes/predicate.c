/* predicate.c: bounds predicates. No lane ever reads or writes out of bounds.
 *
 * Each store (KS_STORE) and each accumulation (KS_LET whose value reads memory) is wrapped in
 * `if (c1 && c2 ...)` where the conditions are
 *   - for every access in the statement (the store target and every EX_ACCESS read):
 *     `subscript_d < shape_d` per dimension: a non-divisible split makes the root index
 *     reconstructed from the leaves exceed the extent;
 *   - for a store, `par < extent` for each axis of the stored tensor bound to a parallel type
 *     whose extent may be smaller than the kernel's launch extent (another tensor launched it
 *     wider): the extra threads must not write. The same for a reduction's accumulation
 *     (a KS_LET whose `tensor` is set): the extra threads of a block reduction must add
 *     nothing to their partials, which keep the identity (an unconditional accumulator
 *     initialisation is never drawn into the accumulation's `if`); a reduction's result,
 *     stored after the block reduction, is held by every thread of the reduced types, so
 *     its store has no condition on them.
 * A condition that ir_range proves true is dropped (e.g. a split of 33 by 11), duplicates are
 * merged, and a statement with no condition left is not wrapped. A copy into a cp.async
 * tensor is the exception (guard_cp_async): its bounds select a zero instead. Index values
 * are never negative (loop variables, parallel indices and sizes are not), so only upper
 * bounds matter.
 *
 * Predicate elimination: a store into a register (local) tensor that reads only "total"
 * tensors keeps no bounds condition except those on reduction loops (see elim_conds). A
 * tensor is total when every element of its buffer is defined: a cp.async cache (its
 * out-of-bounds lanes are zero-filled) or a register tensor whose stores all read total
 * tensors (a fixpoint: find_total). An out-of-bounds lane then computes a defined value into
 * its own register, inside its buffer (buffers are sized by their loops, which cover the
 * lanes past a non-divisible split), and no in-bounds value reads it. The register GEMM's
 * FMAs (`Cl = Cl + Al * Bl`) and its shared->register copies lose their row and column
 * conditions this way.
 */
#include "passes/passes.h"

typedef struct Conds {
	IrExpr **c;
	int n, cap;
	Arena *a;
	const IrRange *rg; /* the kernel's range facts */
	bool selects;      /* a read in a select guarded by its bound needs no other guard */
} Conds;

static void add_cond(Conds *cs, IrExpr *c)
{
	c = ir_simplify(cs->a, cs->rg, c);
	int64_t v;
	if (ir_is_const(c, &v) && v)
		return;
	for (int i = 0; i < cs->n; i++)
		if (ir_equal(cs->c[i], c))
			return;
	if (cs->n == cs->cap) {
		int cap = cs->cap ? 2 * cs->cap : 8;
		IrExpr **c2 = arena_alloc(cs->a, sizeof(IrExpr *) * (size_t)cap);
		for (int i = 0; i < cs->n; i++)
			c2[i] = cs->c[i];
		cs->c = c2;
		cs->cap = cap;
	}
	cs->c[cs->n++] = c;
}

/* Are subscripts (s, s2) of dimensions d, d + 1 a merged index's row and column, (q / D, q % D)
 * with D the extent of dimension d + 1? */
static bool merged_pair(IrExpr *s, IrExpr *s2, IrExpr *D)
{
	return s->kind == EX_OP && s->op == OP_DIV && s2->kind == EX_OP && s2->op == OP_MOD &&
	       ir_equal(s->args[0], s2->args[0]) && ir_equal(s->args[1], D) &&
	       ir_equal(s2->args[1], D);
}

/* The divisor D of subscript s of dimension d when s is the row q / D of an index merged over
 * dimensions d .. the last (three or more, innermost pair first: D is the product of the
 * extents after d, as the merges build it; `h` of `bias[h, t, k]` in the broadcast schedule's
 * collapsed run); else NULL. */
static IrExpr *merged_row(Arena *a, Tensor *t, IrExpr *s, int d, int n)
{
	int last = n < t->ndim ? n : t->ndim;
	if (s->kind != EX_OP || s->op != OP_DIV || last - d < 3)
		return NULL;
	IrExpr *D = t->shape[last - 1];
	for (int j = last - 2; j > d; j--)
		D = ix_mul(a, t->shape[j], D);
	return ir_equal(s->args[1], D) ? D : NULL;
}

/* A merged index q over dimensions d, d + 1 (collapsed axes, docs/auto_schedule.md) is in
 * bounds where q < extent_d * extent_d+1: one comparison instead of a division per lane
 * (q / D < E holds exactly where q < E * D for q >= 0, D >= 1; with D = 0 neither holds), and
 * E * D is a product of the tensor's extents, in range wherever its offsets are. */
static void bounds(Conds *cs, Tensor *t, IrExpr **subs, int n)
{
	for (int d = 0; d < n && d < t->ndim; d++) {
		if (d + 1 < n && d + 1 < t->ndim && merged_pair(subs[d], subs[d + 1], t->shape[d + 1])) {
			add_cond(cs, ix_lt(cs->a, subs[d]->args[0],
					   ix_mul(cs->a, t->shape[d], t->shape[d + 1])));
			d++;
			continue;
		}
		IrExpr *D = merged_row(cs->a, t, subs[d], d, n);
		add_cond(cs, D ? ix_lt(cs->a, subs[d]->args[0], ix_mul(cs->a, t->shape[d], D))
			       : ix_lt(cs->a, subs[d], t->shape[d]));
	}
}

/* Does the conjunction c (simplified) hold condition x? */
static bool conjunct(Conds *cs, IrExpr *c, IrExpr *x)
{
	if (c->kind == EX_OP && c->op == OP_AND)
		return conjunct(cs, c->args[0], x) || conjunct(cs, c->args[1], x);
	return ir_equal(ir_simplify(cs->a, cs->rg, c), x);
}

static void access_conds(Conds *cs, IrExpr *e)
{
	if (!e)
		return;
	if (e->kind == EX_SELECT && cs->selects) {
		/* `k < K ? A[i, k] : 0` in the padded copies of scheduler/segment.c (the only
		 * fusions whose reads may leave their tensor, Fusion.padded_operands): the read is
		 * guarded by its own bound, which then does not guard the statement (vectorize.c
		 * keeps such reads per lane) */
		Conds then = {.a = cs->a, .rg = cs->rg, .selects = true};
		access_conds(cs, e->args[0]);
		access_conds(&then, e->args[1]);
		access_conds(cs, e->args[2]);
		for (int i = 0; i < then.n; i++)
			if (!conjunct(cs, e->args[0], then.c[i]))
				add_cond(cs, then.c[i]);
		return;
	}
	for (int i = 0; i < e->nargs; i++)
		access_conds(cs, e->args[i]);
	if (e->kind == EX_ACCESS)
		bounds(cs, e->tensor, e->args, e->nargs);
}

static Axis *resolve(Axis *ax)
{
	while (ax->ca_alias)
		ax = ax->ca_alias;
	return ax;
}

/* par < extent where the launch may be wider than this tensor's bound axis. `result`: the
 * statement stores a reduction's result, after the block reduction that gave every thread of
 * the reduced types the same value (loop_nest.c); threads beyond the extent of t's own
 * reduction axes bound to threads hold it too (they contributed the identity), so those axes
 * need no condition: a register copy is then defined in every thread that reads it (a wider
 * reader of `m[0]`), and a store to memory is left to index 0 (redundant_write.c). */
static bool bare_alias(Axis *ax)
{
	return ax->ca_alias && ax->kind == AX_ROOT && ax->root_index < 0;
}

/* Is p bound by a loop of t's nest deeper than domain[i] (its own axis, or a loop of the
 * consumer it is computed at)? */
static bool binds_deeper(Tensor *t, int i, ParType p)
{
	for (int j = i + 1; j < t->ndomain; j++)
		if (resolve(t->domain[j])->par == p)
			return true;
	return false;
}

/* A consumer's loop over an index t lacks (a bare alias) may share its type with a deeper
 * loop (scheduler/schedule.c, par_taken): t's own axis, or the axis of a tensor t is computed
 * inside. The deepest one spreads t's elements over that type, its extent is the one that
 * counts, not the outer loop's. */
static void par_conds(Conds *cs, Kernel *k, Tensor *t, bool result)
{
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = resolve(t->domain[i]);
		/* the result of a reduction is stored by the blocks of its (at least one) part */
		IrExpr *ext = result ? axis_launch_extent(cs->a, ax) : ax->extent;
		if (ax->par == PT_SERIAL || ir_equal(ext, k->launch[ax->par]))
			continue;
		if (bare_alias(t->domain[i]) && binds_deeper(t, i, ax->par))
			continue;
		if (result && ax == t->domain[i] && ax->reduction && par_is_thread(ax->par))
			continue;
		add_cond(cs, ix_lt(cs->a, ir_par(cs->a, ax->par), ext));
	}
}

/* The conjuncts of a statement's split conditions (loop_nest.c, split_cond) */
static void split_conds(Conds *cs, IrExpr *c)
{
	if (!c)
		return;
	if (c->kind == EX_OP && c->op == OP_AND) {
		split_conds(cs, c->args[0]);
		split_conds(cs, c->args[1]);
		return;
	}
	add_cond(cs, c);
}

/* Does another condition of cs say q < E * D (either order), which implies c = `q / D < E`
 * (D >= 1; with D = 0 neither holds)? A merged index's row bound beside its merged bound
 * (a reduction root's, or a read that is not the pair of the store's). */
static bool implied_row_bound(Conds *cs, IrExpr *c)
{
	if (c->kind != EX_OP || c->op != OP_LT || c->args[0]->kind != EX_OP ||
	    c->args[0]->op != OP_DIV)
		return false;
	IrExpr *q = c->args[0]->args[0], *D = c->args[0]->args[1], *E = c->args[1];
	IrExpr *ed = ir_simplify(cs->a, cs->rg, ix_mul(cs->a, E, D));
	IrExpr *de = ir_simplify(cs->a, cs->rg, ix_mul(cs->a, D, E));
	for (int i = 0; i < cs->n; i++) {
		IrExpr *o = cs->c[i];
		if (o != c && o->kind == EX_OP && o->op == OP_LT && ir_equal(o->args[0], q) &&
		    (ir_equal(o->args[1], ed) || ir_equal(o->args[1], de)))
			return true;
	}
	return false;
}

static IrExpr *conjunction(Conds *cs)
{
	IrExpr *c = NULL;
	for (int i = 0; i < cs->n; i++)
		if (!implied_row_bound(cs, cs->c[i]))
			c = ix_and(cs->a, c, cs->c[i]);
	return c;
}

/* ---- predicate elimination ---- */

typedef struct Elim {
	Vec stores;   /* every KS_STORE of the kernel */
	Vec total;    /* the register tensors found total */
	Vec zero;     /* the register tensors found zero-padded (see find_zero) */
	Arena *a;
	const IrRange *rg; /* the kernel's range facts */
} Elim;

static bool in_vec(Vec *v, void *p)
{
	for (int i = 0; i < v->len; i++)
		if (v->items[i] == p)
			return true;
	return false;
}

static void collect_stores(Elim *e, Stmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == KS_STORE)
			vec_push(e->a, &e->stores, s);
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			collect_stores(e, *lists[i]);
	}
}

static bool is_total(Elim *e, Tensor *t)
{
	return t->sched.cp_async || t->sched.zero_fill || in_vec(&e->total, t);
}

static bool reads_total(Elim *e, IrExpr *x)
{
	if (!x)
		return true;
	if (x->kind == EX_ACCESS && !is_total(e, x->tensor))
		return false;
	for (int i = 0; i < x->nargs; i++)
		if (!reads_total(e, x->args[i]))
			return false;
	return true;
}

/* Every register tensor written by plain stores starts total; one with a store that reads
 * a tensor that is not total drops out, until nothing changes. */
static void find_total(Elim *e, Kernel *k)
{
	collect_stores(e, k->body);
	for (int i = 0; i < e->stores.len; i++) {
		Tensor *t = VEC_AT(e->stores, Stmt, i)->store.tensor;
		if (t->sched.mem == MEM_LOCAL && !in_vec(&e->total, t))
			vec_push(e->a, &e->total, t);
	}
	for (bool changed = true; changed;) {
		changed = false;
		for (int i = 0; i < e->stores.len; i++) {
			Stmt *s = VEC_AT(e->stores, Stmt, i);
			if (in_vec(&e->total, s->store.tensor) && !reads_total(e, s->store.value)) {
				for (int j = 0; j < e->total.len; j++) /* remove: the last takes its place */
					if (e->total.items[j] == s->store.tensor)
						e->total.items[j] = e->total.items[--e->total.len];
				changed = true;
			}
		}
	}
}

/* Zero-padded: a total tensor whose buffer holds 0 at every element past the tensor's shape.
 * A cp.async cache or an mma operand copy zero-fills those lanes; a register tensor is
 * zero-padded when each of its stores copies a zero-padded tensor (casts allowed: a cast of 0
 * is 0) with no split condition, since such a copy keeps no condition on reduction loops
 * either (elim_conds): its padded lanes copy the source's zeros. A fixpoint like find_total. */
static bool is_zero(Elim *e, Tensor *t)
{
	return t->sched.cp_async || t->sched.zero_fill || in_vec(&e->zero, t);
}

static IrExpr *strip_casts(IrExpr *x)
{
	while (x && x->kind == EX_CAST)
		x = x->args[0];
	return x;
}

/* s copies a zero-padded tensor (a cast of one element of it), with no split condition
 * left once those the kernel's ranges prove are dropped */
static bool zero_copy(Elim *e, Stmt *s)
{
	IrExpr *v = strip_casts(s->store.value);
	if (!v || v->kind != EX_ACCESS || !is_zero(e, v->tensor))
		return false;
	Conds sc = {.a = e->a, .rg = e->rg};
	split_conds(&sc, s->store.split_cond);
	return sc.n == 0;
}

static void find_zero(Elim *e)
{
	for (int i = 0; i < e->total.len; i++)
		vec_push(e->a, &e->zero, e->total.items[i]);
	for (bool changed = true; changed;) {
		changed = false;
		for (int i = 0; i < e->stores.len; i++) {
			Stmt *s = VEC_AT(e->stores, Stmt, i);
			if (in_vec(&e->zero, s->store.tensor) && !zero_copy(e, s)) {
				for (int j = 0; j < e->zero.len; j++)
					if (e->zero.items[j] == s->store.tensor)
						e->zero.items[j] = e->zero.items[--e->zero.len];
				changed = true;
			}
		}
	}
}

/* A product of zero-padded reads (casts allowed): 0 wherever one of its subscripts is past
 * its tensor's shape, since every factor is then read from padding (0 * 0; a single padded
 * factor would not do: 0 * inf is NaN). */
static bool zero_product(Elim *e, IrExpr *x)
{
	x = strip_casts(x);
	if (x->kind == EX_OP && x->op == OP_MUL)
		return zero_product(e, x->args[0]) && zero_product(e, x->args[1]);
	return x->kind == EX_ACCESS && is_zero(e, x->tensor);
}

/* s accumulates a product of zero-padded reads into a sum, `t[idx] = t[idx] + p`: the read
 * of t, or NULL when s is not of that form. A padded reduction lane then adds +0, which
 * changes no sum that started from the identity +0 (x + 0 = x for every x but -0, and a sum
 * of round-to-nearest additions that starts at +0 is never -0). */
static IrExpr *zero_term_sum(Elim *e, Stmt *s)
{
	IrExpr *v = s->store.value;
	if (v->kind != EX_OP || v->op != OP_ADD || !dtype_is_float(v->dtype))
		return NULL;
	for (int q = 0; q < 2; q++) {
		IrExpr *acc = v->args[q];
		if (acc->kind != EX_ACCESS || acc->tensor != s->store.tensor ||
		    acc->nargs != s->store.nidx || !zero_product(e, v->args[1 - q]))
			continue;
		bool same = true;
		for (int d = 0; d < acc->nargs && same; d++)
			same = ir_equal(acc->args[d], s->store.idx[d]);
		if (same)
			return acc;
	}
	return NULL;
}

/* The split conditions of a sum of a product of zero-padded reads but those that are bounds
 * of the product's reads: a reduction root's `k < K` (loop_nest.c) holds the padded lanes
 * out, and they add 0. The conditions `inner < F` stay (a lane past a non-divisible split
 * would add an element of the next outer iteration again). */
static void split_conds_but_padding(Conds *cs, Elim *e, Stmt *s)
{
	Conds sc = {.a = e->a, .rg = e->rg}, pad = {.a = e->a, .rg = e->rg};
	IrExpr *v = s->store.value, *acc = zero_term_sum(e, s);
	split_conds(&sc, s->store.split_cond);
	access_conds(&pad, v->args[v->args[0] == acc ? 1 : 0]);
	for (int i = 0; i < sc.n; i++) {
		bool padding = false;
		for (int j = 0; j < pad.n && !padding; j++)
			padding = ir_equal(sc.c[i], pad.c[j]);
		if (!padding)
			add_cond(cs, sc.c[i]);
	}
}

/* c reads a loop over a reduction axis, or a parallel index that t binds to a reduction
 * axis: a reduction's padding would be added into in-bounds results (sum(k: exp(a[k]))
 * reads exp(0) = 1 past the end), so such a condition stays. */
static bool on_reduction(IrExpr *c, Tensor *t)
{
	if (c->kind == EX_VAR && c->var->axis && resolve(c->var->axis)->reduction)
		return true;
	if (c->kind == EX_PAR)
		for (int i = 0; i < t->ndomain; i++) {
			Axis *ax = resolve(t->domain[i]);
			if (ax->reduction && ax->par == c->par)
				return true;
		}
	for (int i = 0; i < c->nargs; i++)
		if (on_reduction(c->args[i], t))
			return true;
	return false;
}

/* The root index values the buffer of a tensor holds along the root (or derived) axis ax,
 * padding included, when its loops there are its own and constant: a loop of extent E holds
 * E, a split of ax by f holds f times what its outer part holds (a root index v is at outer
 * position v / f); 0 when not known (a merge, a loop shared with the consumer, a symbolic
 * extent). */
static int64_t held(Axis *ax)
{
	int64_t n;
	if (ax->ca_alias)
		return 0;
	if (!ax->to[0])
		return ir_is_const(ax->extent, &n) ? n : 0;
	if (ax->to[0]->kind != AX_SPLIT_OUTER)
		return 0;
	int64_t o = held(ax->to[0]);
	return o > 0 && o <= INT64_MAX / ax->to[0]->factor ? o * ax->to[0]->factor : 0;
}

/* A read past its tensor's shape may still be inside the tensor's buffer, sized by its loops
 * (a split pads). It is surely outside when the buffer's loops over that dimension are the
 * tensor's own and hold fewer root index values than the read may reach (an unsplit source
 * of 8 read at lane 8 of a split by 3; a source split by 3 over 3 read by 4 lanes). */
static bool read_past_buffer(const IrRange *rg, Tensor *t, int d, IrExpr *sub)
{
	int64_t lo, hi, n = d < t->nroot ? held(t->root[d]) : 0;
	return n > 0 && (!ir_range(rg, sub, &lo, &hi) || hi >= n);
}

/* Bounds conditions of the reads in e that an eliminated store keeps: those whose index may
 * leave the read tensor's buffer (a register cache split by 3 over 8 elements reads lane 8 of
 * a source whose 8 elements are its whole buffer: issue 11, fuzzer class A-2). */
static void outside_buffer_conds(Conds *cs, IrExpr *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->nargs; i++)
		outside_buffer_conds(cs, e->args[i]);
	if (e->kind != EX_ACCESS)
		return;
	for (int d = 0; d < e->nargs && d < e->tensor->ndim; d++)
		if (read_past_buffer(cs->rg, e->tensor, d, e->args[d]))
			add_cond(cs, ix_lt(cs->a, e->args[d], e->tensor->shape[d]));
}

/* The conditions of an eliminated store: its parallel conditions, the bounds conditions on
 * reduction loops, and those of reads that may leave their tensor's buffer. */
static void elim_conds(Conds *cs, Kernel *k, Elim *e, Stmt *s)
{
	Conds all = {.a = k->arena, .rg = cs->rg, .selects = k->fusion->padded_operands};
	/* A copy of a zero-padded tensor keeps none (its padded lanes copy zeros); a sum of a
	 * product of zero-padded reads keeps those of its target and of its own read only (its
	 * padded lanes add 0). */
	if (!zero_copy(e, s)) {
		IrExpr *acc = zero_term_sum(e, s);
		bounds(&all, s->store.tensor, s->store.idx, s->store.nidx);
		access_conds(&all, acc ? acc : s->store.value);
	}
	for (int i = 0; i < all.n; i++)
		if (on_reduction(all.c[i], s->store.tensor))
			add_cond(cs, all.c[i]);
	outside_buffer_conds(cs, s->store.value);
	par_conds(cs, k, s->store.tensor, true);
}

/* A copy into a cp.async tensor: the bounds conditions do not guard the copy, they select
 * its value (`c[o] = inb ? A[g] : 0`, which the cp_async pass turns into the src-size
 * operand: the lane is zero-filled and global memory is not read). The same for a plain
 * copy into an mma operand (Tensor.sched.zero_fill): it stores the zeros itself. Only the parallel
 * conditions, which keep threads beyond the tensor's extent off shared addresses outside
 * its buffer, stay a real branch. */
static Stmt *guard_cp_async(Kernel *k, Stmt *s)
{
	IrRange rg = ir_range_in(k);
	Conds in = {.a = k->arena, .rg = &rg, .selects = k->fusion->padded_operands};
	Conds par = {.a = k->arena, .rg = &rg};
	bounds(&in, s->store.tensor, s->store.idx, s->store.nidx);
	access_conds(&in, s->store.value);
	par_conds(&par, k, s->store.tensor, true);
	split_conds(&par, s->store.split_cond);
	IrExpr *c = conjunction(&in);
	if (c) {
		DType dt = s->store.value->dtype;
		IrExpr *zero = dtype_is_float(dt) ? ir_float(k->arena, dt, 0.0) : ir_int(k->arena, 0);
		zero->dtype = dt;
		s->store.value = ir_select(k->arena, c, s->store.value, zero);
	}
	IrExpr *p = conjunction(&par);
	if (!p)
		return s;
	Stmt *next = s->next;
	s->next = NULL;
	Stmt *g = kir_if(k, p, s, NULL);
	g->span = s->span;
	g->next = next;
	return g;
}

/* Wraps s in its predicate. A local assigned under a condition is only read under it: the
 * assignments right after s that read s's variable go into the same `if` (a max reduction's
 * `m_v = x[...]; m_acc = m_v > m_acc ... ;`), and so do those marked with the same tensor
 * (the five statements of a Welford update, loop_nest.c). */
static Stmt *guard(Kernel *k, Elim *e, Stmt *s)
{
	IrRange rg = ir_range_in(k);
	Conds cs = {.a = k->arena, .rg = &rg, .selects = k->fusion->padded_operands};
	Stmt *last = s;
	bool store = s->kind == KS_STORE; /* else a KS_LET */
	if (s->kind == KS_STORE && (s->store.tensor->sched.cp_async || s->store.tensor->sched.zero_fill))
		return guard_cp_async(k, s);
	if (s->kind == KS_STORE && is_total(e, s->store.tensor)) {
		elim_conds(&cs, k, e, s);
	} else {
		if (s->kind == KS_STORE) {
			bounds(&cs, s->store.tensor, s->store.idx, s->store.nidx);
			par_conds(&cs, k, s->store.tensor, true);
		}
		/* a reduction's accumulation: threads beyond its bound extents add nothing (their
		 * partial stays the identity for the block reduction) */
		if (!store && s->let.tensor)
			par_conds(&cs, k, s->let.tensor, false);
		access_conds(&cs, store ? s->store.value : s->let.value);
	}
	if (store && is_total(e, s->store.tensor) && zero_term_sum(e, s))
		split_conds_but_padding(&cs, e, s);
	else
		split_conds(&cs, store ? s->store.split_cond : s->let.split_cond);
	/* An unconditional assignment (an accumulator's identity) opens no group: the guarded
	 * accumulation after it reads its variable, but the identity must hold in every thread
	 * (the lanes beyond the extent give it to the block reduction). */
	if (!store && cs.n) {
		while (last->next && last->next->kind == KS_LET &&
		       (ir_mentions(last->next->let.value, s->let.var) ||
			(s->let.tensor && last->next->let.tensor == s->let.tensor))) {
			last = last->next;
			access_conds(&cs, last->let.value);
		}
	}
	IrExpr *c = conjunction(&cs);
	/* No condition: s stays in place and the list goes on at s->next (returning `last`
	 * here dropped s, the `m_v = x[...]` of a max reduction, from the list). */
	if (!c)
		return s;
	Stmt *next = last->next;
	last->next = NULL;
	Stmt *g = kir_if(k, c, s, NULL);
	g->span = s->span;
	g->next = next;
	return g;
}

static Stmt *predicate_list(Kernel *k, Elim *e, Stmt *s)
{
	Stmt head = {0}, *prev = &head;
	for (; s; s = s->next) {
		switch (s->kind) {
		case KS_FOR:
			s->loop.body = predicate_list(k, e, s->loop.body);
			break;
		case KS_IF:
			s->branch.then = predicate_list(k, e, s->branch.then);
			s->branch.els = predicate_list(k, e, s->branch.els);
			break;
		case KS_STORE:
		case KS_LET:
			s = guard(k, e, s);
			break;
		default:
			break;
		}
		prev->next = s;
		prev = s;
	}
	return head.next;
}

bool pass_predicate(Kernel *k, Diag *d)
{
	IrRange rg = ir_range_in(k);
	Elim e = {.a = k->arena, .rg = &rg};
	find_total(&e, k);
	find_zero(&e);
	k->body = predicate_list(k, &e, k->body);
	return true;
}
