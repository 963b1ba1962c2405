/* redundant_write.c: a store to global or shared memory by a tensor that is not bound to a
 * parallel dimension the kernel launches (with an extent that may exceed 1) would be done by
 * every thread of that dimension; only index 0 writes (docs/schedule.md). Shared memory is per block,
 * so only thread dimensions count for it. A 0-d output is written by the thread whose
 * parallel indices are all 0.
 *
 * The condition `par == 0` is joined to the store's bounds predicate when the store is alone
 * in an `if`, else the store gets its own `if`.
 */
#include "passes/passes.h"

/* Bound through a non-reduction axis: after a block reduction every thread of the reduced
 * types holds the same result, so only index 0 of them stores it. A reduction axis bound to a
 * block type counts as bound: each block holds a partial, and the grid step (grid_reduce.c)
 * lets the last block to arrive store the element, whatever its index. Whether an axis is a
 * reduction is t's own: a tensor computed inside its consumer's reduction loop bound to P (a
 * cache of the reduction's operand) has an element per index of P. A loop of the consumer
 * over an index t does not have (a bare alias: root_index -1) does not count: t's elements are
 * the same in each of its iterations, so every thread of P would store the same element. */
static bool bound_to(Tensor *t, ParType p)
{
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		bool red = ax->reduction;
		if (ax->ca_alias && ax->kind == AX_ROOT && ax->root_index < 0)
			continue;
		while (ax->ca_alias)
			ax = ax->ca_alias;
		if (ax->par == p && (!red || par_is_block(p)))
			return true;
	}
	return false;
}

static bool launched(Kernel *k, ParType p)
{
	int64_t lo, hi;
	IrExpr *e = k->launch[p];
	IrRange rg = ir_range_in(k);
	return e && !(ir_range(&rg, e, &lo, &hi) && hi <= 1);
}

/* `p == 0 && ...` for the parallel types in mask, or NULL */
static IrExpr *zero_cond(Kernel *k, unsigned mask)
{
	IrExpr *c = NULL;
	for (int p = PT_BIDX; p < PT_COUNT; p++)
		if (mask & (1u << p))
			c = ix_and(k->arena, c, ir_op(k->arena, OP_EQ, DT_BOOL,
						      ir_par(k->arena, (ParType)p),
						      ir_int(k->arena, 0)));
	return c;
}

/* The launched parallel types that t is not bound to (for memory m: shared memory is per
 * block, so only thread types count for it). */
static unsigned unbound_mask(Kernel *k, Tensor *t, MemType m)
{
	unsigned mask = 0;
	for (int p = PT_BIDX; p < PT_COUNT; p++) {
		if (m == MEM_SHARED && !par_is_thread((ParType)p))
			continue;
		if (launched(k, (ParType)p) && !bound_to(t, (ParType)p))
			mask |= 1u << p;
	}
	return mask;
}

/* The `par == 0` conditions a store needs beyond those already `covered`, or NULL. */
static bool is_store(Stmt *s)
{
	return s && (s->kind == KS_STORE || s->kind == KS_VSTORE);
}

/* The memory a store (is_store) writes. */
static MemType store_mem(Stmt *s)
{
	return s->kind == KS_STORE ? s->store.mem : s->copy.mem;
}

static IrExpr *write_cond(Kernel *k, Stmt *s, unsigned covered)
{
	MemType m = store_mem(s);
	if (m != MEM_GLOBAL && m != MEM_SHARED)
		return NULL;
	return zero_cond(k, unbound_mask(k, ir_stmt_write(s, NULL), m) & ~covered);
}

static Stmt *rw_list(Kernel *k, Stmt *s, unsigned covered)
{
	Stmt head = {0}, *prev = &head;
	for (; s; s = s->next) {
		IrExpr *c;
		if (s->kind == KS_FOR) {
			s->loop.body = rw_list(k, s->loop.body, covered);
		} else if (s->kind == KS_IF && !s->branch.els && is_store(s->branch.then) &&
			   !s->branch.then->next) {
			/* a predicated store: join the conditions */
			if ((c = write_cond(k, s->branch.then, covered)))
				s->branch.cond = ix_and(k->arena, s->branch.cond, c);
		} else if (s->kind == KS_IF) {
			s->branch.then = rw_list(k, s->branch.then, covered);
			s->branch.els = rw_list(k, s->branch.els, covered);
		} else if (is_store(s) && (c = write_cond(k, s, covered))) {
			Stmt *g = kir_if(k, c, s, NULL);
			g->span = s->span;
			g->next = s->next;
			s->next = NULL;
			s = g;
		}
		prev->next = s;
		prev = s;
	}
	return head.next;
}

/* Shared stores (barriers may follow) or block reductions (barriers inside): every thread of
 * the block must run the nest. */
static bool shared_store(Stmt *s, void *ctx)
{
	(void)ctx;
	return (is_store(s) && store_mem(s) == MEM_SHARED) || s->kind == KS_BLOCK_REDUCE;
}

static bool has_shared_store(Stmt *s)
{
	return ir_stmts_any(s, shared_store, NULL);
}

static bool is_top_marker(Stmt *s)
{
	return s && s->kind == KS_NEST && !s->note.tensor->sched.ca_tensor;
}

/* A top-level nest whose tensor is not bound to a launched parallel type is run by index 0
 * of that type alone, not only stored by it: a 0-d reduction beside a parallel output would
 * otherwise be computed by every thread. Nests that use shared memory stay whole (all threads
 * take part in their barriers); their stores are guarded one by one. */
static Stmt *rw_top(Kernel *k, Stmt *s)
{
	Stmt head = {0}, *prev = &head;
	while (s) {
		if (!is_top_marker(s)) {
			Stmt *next = s->next;
			s->next = NULL;
			prev->next = rw_list(k, s, 0);
			while (prev->next)
				prev = prev->next;
			s = next;
			continue;
		}
		Stmt *mark = s, *last = s;
		while (last->next && !is_top_marker(last->next))
			last = last->next;
		Stmt *next = last->next;
		last->next = NULL;
		Stmt *group = mark->next;
		unsigned mask = unbound_mask(k, mark->note.tensor, MEM_GLOBAL);
		prev->next = mark;
		prev = mark;
		if (mask && group && !has_shared_store(group)) {
			Stmt *g = kir_if(k, zero_cond(k, mask), rw_list(k, group, mask), NULL);
			g->span = mark->span;
			mark->next = g;
			prev = g;
		} else {
			mark->next = rw_list(k, group, 0);
			while (prev->next)
				prev = prev->next;
		}
		s = next;
	}
	prev->next = NULL;
	return head.next;
}

bool pass_redundant_write(Kernel *k, Diag *d)
{
	k->body = rw_top(k, k->body);
	return true;
}
