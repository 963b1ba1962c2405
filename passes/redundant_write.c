/* redundant_write.c: a store to global or shared memory by a tensor that is not bound to a
 * parallel dimension the kernel launches (with an extent that may exceed 1) would be done by
 * every thread of that dimension; only index 0 writes (SPEC §3). Shared memory is per block,
 * so only thread dimensions count for it. A 0-d output is written by the thread whose
 * parallel indices are all 0.
 *
 * The condition `par == 0` is joined to the store's bounds predicate when the store is alone
 * in an `if`, else the store gets its own `if`.
 */
#include "passes/passes.h"

static bool bound_to(Tensor *t, ParType p)
{
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		while (ax->ca_alias)
			ax = ax->ca_alias;
		if (ax->par == p)
			return true;
	}
	return false;
}

static bool launched(Kernel *k, ParType p)
{
	int64_t lo, hi;
	IrExpr *e = k->launch[p];
	return e && !(ir_range(e, &lo, &hi) && hi <= 1);
}

/* The `par == 0` conditions a store needs, or NULL. */
static IrExpr *write_cond(Kernel *k, Stmt *s)
{
	Tensor *t = s->tensor;
	if (s->mem != MEM_GLOBAL && s->mem != MEM_SHARED)
		return NULL;
	IrExpr *c = NULL;
	for (int p = PT_BIDX; p < PT_COUNT; p++) {
		if (s->mem == MEM_SHARED && !par_is_thread((ParType)p))
			continue;
		if (!launched(k, (ParType)p) || bound_to(t, (ParType)p))
			continue;
		c = ix_and(k->arena, c, ir_op(k->arena, OP_EQ, DT_BOOL, ir_par(k->arena, (ParType)p),
					      ir_int(k->arena, 0)));
	}
	return c;
}

static bool is_store(Stmt *s)
{
	return s && (s->kind == KS_STORE || s->kind == KS_VSTORE);
}

static Stmt *rw_list(Kernel *k, Stmt *s)
{
	Stmt head = {0}, *prev = &head;
	for (; s; s = s->next) {
		IrExpr *c;
		if (s->kind == KS_FOR) {
			s->body = rw_list(k, s->body);
		} else if (s->kind == KS_IF && !s->els && is_store(s->then) && !s->then->next) {
			/* a predicated store: join the conditions */
			if ((c = write_cond(k, s->then)))
				s->cond = ix_and(k->arena, s->cond, c);
		} else if (s->kind == KS_IF) {
			s->then = rw_list(k, s->then);
			s->els = rw_list(k, s->els);
		} else if (is_store(s) && (c = write_cond(k, s))) {
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

bool pass_redundant_write(Kernel *k, Diag *d)
{
	k->body = rw_list(k, k->body);
	return true;
}
