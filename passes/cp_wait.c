/* cp_wait.c: a cp.async wait before every read of a cp.async destination (docs/lowering.md).
 *
 * Completion of cp.async is per thread, so a thread must wait even to read what it copied
 * itself: this pass does not look at thread bindings at all, and runs before (and apart from)
 * sync insertion, which then puts its barrier after the wait. It walks each statement list
 * with the set of cp.async tensors written since the last wait; a statement that reads one of
 * them (anywhere inside it) gets `cp.async.wait_group 0` right before it (every group is
 * committed: cp_async commits after each load nest).
 *
 * Loops. The first time the walk meets a loop, the loop gets the waits it needs by itself: its
 * body is walked from nothing pending, then again from what is pending at the end of the body
 * (a read at the top of the body after copies at the bottom of the previous iteration; not for
 * a loop of at most one iteration). What it reads and what it leaves pending are kept for that
 * loop statement (Cw.loops); before the loop, a wait goes in when it reads a tensor pending
 * there, and after it the pending set is the one before it plus what it leaves. A loop is so
 * walked twice on its own and never again: the pass is linear in the kernel's size (the
 * enclosing loops only look at what was kept).
 *
 * Circular-buffered tensors are skipped: the circular_buffer pass places their waits with the
 * group counts that keep the pipeline full (a wait_group 0 here would drain it).
 */
#include "passes/passes.h"

/* A set of tensors (few: the cp.async destinations of one kernel). */
typedef struct Pending {
	Tensor **t;
	int n, cap;
} Pending;

typedef struct LoopInfo {
	Pending reads;  /* cp.async destinations the loop reads */
	Pending left;   /* pending after the loop when nothing was pending before it */
} LoopInfo;

typedef struct Cw {
	Kernel *k;
	Arena *a;
	Map loops;      /* Stmt * (KS_FOR) -> LoopInfo * */
} Cw;

static bool has(Pending *p, Tensor *t)
{
	for (int i = 0; i < p->n; i++)
		if (p->t[i] == t)
			return true;
	return false;
}

static void add(Arena *a, Pending *p, Tensor *t)
{
	if (has(p, t))
		return;
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 8;
		Tensor **v = arena_alloc(a, sizeof *v * (size_t)p->cap);
		for (int i = 0; i < p->n; i++)
			v[i] = p->t[i];
		p->t = v;
	}
	p->t[p->n++] = t;
}

static void merge(Arena *a, Pending *into, Pending *from)
{
	for (int i = 0; i < from->n; i++)
		add(a, into, from->t[i]);
}

static Pending copy(Arena *a, Pending *p)
{
	Pending c = {0};
	merge(a, &c, p);
	return c;
}

static bool meets(Pending *a, Pending *b)
{
	for (int i = 0; i < a->n; i++)
		if (has(b, a->t[i]))
			return true;
	return false;
}

/* A tensor whose reads need this pass's waits. */
static bool waited_here(Tensor *t)
{
	return t->sched.cp_async && t->sched.stages < 2;
}

typedef struct Reads { Cw *c; Pending *out; } Reads;

static bool expr_reads(IrExpr *e, void *ctx)
{
	Reads *r = ctx;
	if (e->kind == EX_LOAD && waited_here(e->tensor))
		add(r->c->a, r->out, e->tensor);
	return false;
}

static bool slot_reads(IrExpr **slot, void *ctx)
{
	return ir_expr_any(*slot, expr_reads, ctx);
}

static LoopInfo *loop_info(Cw *c, Stmt *loop);

/* The cp.async destinations list s reads (loops: what their walk kept). */
static void reads(Cw *c, Stmt *s, Pending *out)
{
	Reads r = {c, out};
	for (; s; s = s->next) {
		if (s->kind == KS_FOR) {
			merge(c->a, out, &loop_info(c, s)->reads);
			continue;
		}
		ir_stmt_exprs(s, slot_reads, &r);
		if (s->kind == KS_VSTORE && waited_here(s->copy.src))
			add(c->a, out, s->copy.src);
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		for (int i = 0; i < n; i++)
			reads(c, *lists[i], out);
	}
}

static void wait_before(Cw *c, Stmt **link, Pending *p)
{
	Stmt *w = NEW(c->a, Stmt);
	w->kind = KS_CP_WAIT;
	w->wait.n = 0;
	w->span = (*link)->span;
	w->next = *link;
	*link = w;
	p->n = 0;
}

static bool at_most_once(Cw *c, Stmt *loop)
{
	int64_t lo, hi;
	IrRange rg = ir_range_in(c->k);
	return ir_range(&rg, loop->loop.var->extent, &lo, &hi) && hi <= 1;
}

static void walk(Cw *c, Stmt **link, Pending *p);

/* The loop's own waits, placed the first time the walk meets it, and what it reads and leaves. */
static LoopInfo *loop_info(Cw *c, Stmt *loop)
{
	LoopInfo *info = map_lookup(&c->loops, loop);
	if (info)
		return info;
	info = NEW(c->a, LoopInfo);
	walk(c, &loop->loop.body, &info->left);
	if (!at_most_once(c, loop))
		walk(c, &loop->loop.body, &info->left);
	reads(c, loop->loop.body, &info->reads);
	map_insert(c->a, &c->loops, loop, info);
	return info;
}

static void walk(Cw *c, Stmt **link, Pending *p)
{
	for (Stmt *s; (s = *link); link = &(*link)->next) {
		if (s->kind == KS_CP_WAIT) {
			if (s->wait.n <= 0)
				p->n = 0;
			continue;
		}
		if (s->kind == KS_CP_ASYNC) {
			if (waited_here(s->copy.tensor))
				add(c->a, p, s->copy.tensor);
			continue;
		}
		if (s->kind == KS_FOR) {
			LoopInfo *info = loop_info(c, s);
			if (meets(&info->reads, p))
				wait_before(c, link, p);
			Pending left = copy(c->a, &info->left);
			merge(c->a, p, &left);
		} else {
			Pending r = {0};
			Stmt *next = s->next;
			s->next = NULL;
			reads(c, s, &r);
			s->next = next;
			if (meets(&r, p))
				wait_before(c, link, p);
			if (s->kind == KS_IF) {
				Pending a = copy(c->a, p), b = copy(c->a, p);
				walk(c, &s->branch.then, &a);
				walk(c, &s->branch.els, &b);
				*p = a;
				merge(c->a, p, &b);
			}
		}
		while (*link != s)
			link = &(*link)->next;
	}
}

static bool is_cp_async(Stmt *s, void *ctx)
{
	return s->kind == KS_CP_ASYNC;
}

bool pass_cp_wait(Kernel *k, Diag *d)
{
	Cw c = {.k = k, .a = k->arena};
	Pending p = {0};
	/* nothing is ever pending without a cp.async: no walk (it reads every expression) */
	if (ir_stmts_any(k->body, is_cp_async, NULL))
		walk(&c, &k->body, &p);
	return true;
}
