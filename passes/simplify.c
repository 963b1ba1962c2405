/* simplify.c: the last pass: simplifies every expression (ir_simplify), replaces `if (true)`
 * by its branch and `if (false)` by its else branch, and removes loops whose body is empty
 * or whose extent is 0, and `if`s with nothing in either branch.
 */
#include "passes/passes.h"

static IrExpr *simp(Kernel *k, IrExpr *e)
{
	return e ? ir_simplify(k->arena, e) : NULL;
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
			s->var->extent = simp(k, s->var->extent);
			s->body = simplify_list(k, s->body);
			if (!s->body || (ir_is_const(s->var->extent, &n) && n <= 0))
				repl = NULL;
			break;
		case KS_IF:
			s->cond = simp(k, s->cond);
			s->then = simplify_list(k, s->then);
			s->els = simplify_list(k, s->els);
			if (const_bool(s->cond, &b))
				repl = b ? s->then : s->els;
			else if (!s->then && !s->els)
				repl = NULL;
			break;
		case KS_ALLOC:
			s->size = simp(k, s->size);
			break;
		case KS_STORE:
			s->offset = simp(k, s->offset);
			for (int i = 0; i < s->nidx; i++)
				s->idx[i] = simp(k, s->idx[i]);
			s->value = simp(k, s->value);
			break;
		case KS_VSTORE:
			s->offset = simp(k, s->offset);
			s->src_offset = simp(k, s->src_offset);
			break;
		case KS_LET:
			s->value = simp(k, s->value);
			break;
		case KS_CP_ASYNC:
			s->offset = simp(k, s->offset);
			s->src_offset = simp(k, s->src_offset);
			s->cond = simp(k, s->cond);
			s->size = simp(k, s->size);
			if (const_bool(s->cond, &b) && b)
				s->cond = NULL;
			if (s->size && ir_is_const(s->size, &n) && n >= s->vec)
				s->size = NULL;
			break;
		case KS_GRID_REDUCE:
			/* the body is the store of element `offset`: keep them one expression */
			s->body = simplify_list(k, s->body);
			s->offset = s->body ? s->body->offset : simp(k, s->offset);
			s->part = simp(k, s->part);
			s->nparts = simp(k, s->nparts);
			break;
		case KS_MMA_LOAD:
			s->offset = simp(k, s->offset);
			/* fall through */
		case KS_MMA:
			for (int i = 0; i < s->nidx; i++)
				s->idx[i] = simp(k, s->idx[i]);
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
