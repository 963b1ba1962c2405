/* cp_wait.c: a cp.async wait before every read of a cp.async destination (SPEC §4.2).
 *
 * Completion of cp.async is per thread, so a thread must wait even to read what it copied
 * itself: this pass does not look at thread bindings at all, and runs before (and apart from)
 * sync insertion, which then puts its barrier after the wait. It walks each statement list
 * with the set of cp.async tensors written since the last wait; a statement that reads one of
 * them (anywhere inside it) gets `cp.async.wait_group 0` right before it (every group is
 * committed: cp_async commits after each load nest). A loop is walked twice so a read at the
 * top of the body sees the copies issued at the bottom of the previous iteration.
 *
 * Circular-buffered tensors are skipped: the circular_buffer pass places their waits with the
 * group counts that keep the pipeline full (a wait_group 0 here would drain it).
 */
#include <string.h>

#include "passes/passes.h"

typedef struct Pending {
	Tensor *t[64];
	int n;
} Pending;

static void add(Pending *p, Tensor *t)
{
	for (int i = 0; i < p->n; i++)
		if (p->t[i] == t)
			return;
	if (p->n < countof(p->t))
		p->t[p->n++] = t;
}

static bool has(Pending *p, Tensor *t)
{
	for (int i = 0; i < p->n; i++)
		if (p->t[i] == t)
			return true;
	return false;
}

static bool expr_reads(IrExpr *e, Pending *p)
{
	if (!e)
		return false;
	if (e->kind == EX_LOAD && has(p, e->tensor))
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (expr_reads(e->args[i], p))
			return true;
	return false;
}

static bool reads(Stmt *s, Pending *p)
{
	for (; s; s = s->next) {
		if (expr_reads(s->cond, p) || expr_reads(s->value, p) || expr_reads(s->offset, p) ||
		    expr_reads(s->src_offset, p) || expr_reads(s->size, p))
			return true;
		if (s->kind == KS_VSTORE && has(p, s->src))
			return true;
		if (reads(s->body, p) || reads(s->then, p) || reads(s->els, p))
			return true;
	}
	return false;
}

static bool reads_one(Stmt *s, Pending *p)
{
	Stmt *next = s->next;
	s->next = NULL;
	bool r = reads(s, p);
	s->next = next;
	return r;
}

static void wait_before(Kernel *k, Stmt **link, Pending *p)
{
	Stmt *w = NEW(k->arena, Stmt);
	w->kind = KS_CP_WAIT;
	w->wait_n = 0;
	w->span = (*link)->span;
	w->next = *link;
	*link = w;
	p->n = 0;
}

static void merge(Pending *into, Pending *from)
{
	for (int i = 0; i < from->n; i++)
		add(into, from->t[i]);
}

static void walk(Kernel *k, Stmt **link, Pending *p)
{
	for (Stmt *s; (s = *link); link = &(*link)->next) {
		if (s->kind == KS_CP_WAIT) {
			if (s->wait_n <= 0)
				p->n = 0;
			continue;
		}
		if (s->kind == KS_CP_ASYNC) {
			if (s->tensor->stages < 2)
				add(p, s->tensor);
			continue;
		}
		if (reads_one(s, p))
			wait_before(k, link, p);
		if (s->kind == KS_FOR) {
			Pending in = *p;
			walk(k, &s->body, &in);
			walk(k, &s->body, &in);
			merge(p, &in);
		} else if (s->kind == KS_IF) {
			Pending a = *p, b = *p;
			walk(k, &s->then, &a);
			walk(k, &s->els, &b);
			*p = a;
			merge(p, &b);
		}
		while (*link != s)
			link = &(*link)->next;
	}
}

bool pass_cp_wait(Kernel *k, Diag *d)
{
	Pending p = {.n = 0};
	walk(k, &k->body, &p);
	return true;
}
