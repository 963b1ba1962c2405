/* simplify.c: the last pass: simplifies every expression (ir_simplify), replaces `if (true)`
 * by its branch and `if (false)` by its else branch, and removes loops whose body is empty
 * or whose extent is 0, and `if`s with nothing in either branch.
 */
#include "passes/passes.h"

static IrExpr *simp(Kernel *k, IrExpr *e)
{
	IrRange rg = ir_range_in(k);
	return e ? ir_simplify(k->arena, &rg, e) : NULL;
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
