/* mma_pipeline.c: the fragment loads of an mma's next k step overlap the mma of this one
 * (docs/tensor_cores.md, "Fragments across k steps").
 *
 * After circular_buffer, cp_wait and sync, a circular-buffered mainloop with fragments in
 * registers (passes/mma.c loaded them for every k step `ks` before the loop over the steps)
 * is, with KS steps per iteration of the buffer loop `ko` and E its extent:
 *
 *   for ko in [0, E) {
 *     X                                  the prefetch of stage ko + p into its slot, commit
 *     alloc frag; LD(ks = 0 .. KS-1)     fragment loads from slot ko % n
 *     for ks unroll { MMA(ks) }
 *     T                                  wait_group p - 1; __syncthreads(): stage ko + 1 is in
 *   }                                    place, slot ko % n may be overwritten
 *
 * so each iteration starts with loads whose latency no mma hides, behind a barrier. The pass
 * moves every load one k step earlier (the software pipelining of CUTLASS's multistage
 * mainloop):
 *
 *   alloc frag; if (0 < E) LD(0)[ko = 0]        after the prologue's wait and barrier
 *   for ko in [0, E) {
 *     X
 *     LD(1); MMA(0); LD(2); MMA(1); ...
 *     T; if (ko + 1 < E) LD(0)[ko = ko + 1]; MMA(KS - 1)
 *   }
 *
 * The fragment arrays hold every step (ks in their index), so a load never overwrites the
 * registers of an mma that follows it; registers live at once are those of two steps.
 * Legal because: the loads of steps 1 .. KS-1 still read slot ko % n before T's barrier;
 * the load of the next iteration's step 0 comes after T, which completed stage ko + 1, and
 * before X of iteration ko + 1, which writes slot (ko + 1 + p) % n, another slot when p >= 1;
 * a thread still there is separated from X of iteration ko + 2 by T of iteration ko + 1.
 * The guards keep loads of stages past the extent (slots never written) out.
 *
 * Done only when the loop has exactly this form: X without waits and barriers, the
 * fragment allocations and loads right before the step loop, only waits and barriers after
 * it, KS >= 2, and every fragment's source circular-buffered with prefetch >= 1 over this
 * loop (its offsets name ko). Otherwise the loop stays as it is.
 */
#include "passes/passes.h"

typedef struct Pp {
	Kernel *k;
	Arena *a;
	Var *v;        /* substituted ... */
	IrExpr *with;  /* ... by this */
} Pp;

static bool subst_slot(IrExpr **slot, void *ctx)
{
	Pp *pp = ctx;
	*slot = ir_subst(pp->a, *slot, pp->v, pp->with);
	return false; /* every slot */
}

/* A deep copy of list with v replaced by `with`. */
static Stmt *copy_subst(Pp *pp, Stmt *list, Var *v, IrExpr *with)
{
	Stmt *head = NULL;
	for (; list; list = list->next) {
		Stmt *c = ir_stmt_clone(pp->a, list);
		pp->v = v;
		pp->with = with;
		ir_stmt_exprs(c, subst_slot, pp);
		Stmt **lists[3];
		int n = ir_stmt_lists(c, lists);
		for (int j = 0; j < n; j++)
			*lists[j] = copy_subst(pp, *lists[j], v, with);
		head = kir_append(head, c);
	}
	return head;
}

static bool is_mma(Stmt *s, void *ctx)
{
	(void)ctx;
	return s->kind == KS_MMA;
}

static bool mma_off_step(Stmt *s, void *step)
{
	return s->kind == KS_MMA && s->mma.step != step;
}

static bool is_wait_or_sync(Stmt *s)
{
	return s->kind == KS_CP_WAIT || s->kind == KS_SYNC;
}

static bool waits_or_syncs(Stmt *s, void *ctx)
{
	(void)ctx;
	return is_wait_or_sync(s);
}

/* s or a statement nested in it is a wait or a barrier */
static bool has_wait_or_sync(Stmt *s)
{
	Stmt **lists[3];
	int n = ir_stmt_lists(s, lists);
	bool any = is_wait_or_sync(s);
	for (int i = 0; i < n; i++)
		any |= ir_stmts_any(*lists[i], waits_or_syncs, NULL);
	return any;
}

/* The fragment load inside a load nest (its only statement at every level), or NULL. */
static Stmt *nest_load(Stmt *s)
{
	while (s && s->kind == KS_FOR)
		s = kir_only_stmt(s->loop.body);
	return s && s->kind == KS_MMA_LOAD ? s : NULL;
}

/* A loop over k steps whose load is buffered over `ko`: its source tensor circular-buffered
 * with a prefetch of at least 1, its offsets naming ko (the slot). */
static bool pipelined_load(Stmt *nest, Var *ko)
{
	Stmt *ld = nest_load(nest);
	if (!ld || nest->kind != KS_FOR || ld->mma.step != nest->loop.var || !ld->mma.nidx)
		return false;
	Tensor *src = ld->mma.idx[0]->tensor;
	bool names_ko = false;
	for (int i = 0; i < ld->mma.nidx; i++)
		names_ko |= ir_mentions(ld->mma.idx[i], ko);
	return names_ko && src->sched.stages >= 2 && src->sched.prefetch >= 1;
}

/* Pipelines loop *link when it has the form above. */
static void pipeline_loop(Pp *pp, Stmt **link)
{
	Arena *a = pp->a;
	Stmt *L = *link;
	Var *ko = L->loop.var;
	/* M, the step loop: the body's loop holding the KS_MMA; G, the run of fragment allocs
	 * and load nests right before it; X before G; T after M */
	Stmt *M = NULL, *g0 = NULL, *x_last = NULL;
	for (Stmt *s = L->loop.body; s && !M; s = s->next) {
		if (s->kind == KS_FOR && ir_stmts_any(s->loop.body, is_mma, NULL)) {
			M = s;
			break;
		}
		bool frag = (s->kind == KS_ALLOC && s->alloc.tensor->sched.mma_frag) ||
			    (s->kind == KS_FOR && nest_load(s));
		if (!frag) {
			g0 = NULL;
			x_last = s;
		} else if (!g0) {
			g0 = s;
		}
	}
	int64_t ks;
	if (!M || !g0 || !M->loop.unroll || !ir_is_const(M->loop.var->extent, &ks) || ks < 2 ||
	    ir_stmts_any(M->loop.body, mma_off_step, M->loop.var))
		return;
	for (Stmt *s = M->next; s; s = s->next)
		if (!is_wait_or_sync(s))
			return;
	for (Stmt *s = L->loop.body; s != g0; s = s->next)
		if (has_wait_or_sync(s))
			return;
	Stmt *allocs = NULL, *nests = NULL;
	int nnest = 0;
	for (Stmt *s = g0; s != M; s = s->next) {
		if (s->kind == KS_FOR && !pipelined_load(s, ko))
			return;
		nnest += s->kind == KS_FOR;
	}
	if (nnest < 2)
		return; /* A and B */
	/* X stays; G's allocs go before the loop; the loads and the mma are split by step */
	if (x_last)
		x_last->next = NULL;
	Stmt *body = x_last ? L->loop.body : NULL, *tail = M->next;
	for (Stmt *s = g0, *next; s != M; s = next) {
		next = s->next;
		s->next = NULL;
		if (s->kind == KS_ALLOC)
			allocs = kir_append(allocs, s);
		else
			nests = kir_append(nests, s);
	}
	M->next = NULL;
	IrExpr *E = ko->extent;
	Stmt *step0 = NULL;
	for (Stmt *n = nests; n; n = n->next)
		step0 = kir_append(step0, copy_subst(pp, n->loop.body, n->loop.var, ir_int(a, 0)));
	for (int64_t s = 0; s < ks; s++) {
		Stmt *ld = NULL;
		if (s + 1 < ks) {
			for (Stmt *n = nests; n; n = n->next)
				ld = kir_append(ld, copy_subst(pp, n->loop.body, n->loop.var, ir_int(a, s + 1)));
		} else {
			IrExpr *next = ix_add(a, ir_var(a, ko), ir_int(a, 1));
			body = kir_append(body, tail);
			ld = kir_if(pp->k, ix_lt(a, next, E), copy_subst(pp, step0, ko, next), NULL);
			ld->span = L->span;
		}
		body = kir_append(body, ld);
		body = kir_append(body, copy_subst(pp, M->loop.body, M->loop.var, ir_int(a, s)));
	}
	L->loop.body = body;
	Stmt *pro = kir_if(pp->k, ix_lt(a, ir_int(a, 0), E), copy_subst(pp, step0, ko, ir_int(a, 0)), NULL);
	pro->span = L->span;
	*link = kir_append(allocs, kir_append(pro, L));
}

static void walk(Pp *pp, Stmt **p)
{
	for (; *p; p = &(*p)->next) {
		Stmt **lists[3];
		int n = ir_stmt_lists(*p, lists);
		for (int i = 0; i < n; i++)
			walk(pp, lists[i]);
		if ((*p)->kind == KS_FOR && !(*p)->loop.unroll) {
			Stmt *L = *p;
			pipeline_loop(pp, p);
			while (*p != L)
				p = &(*p)->next;
		}
	}
}

bool pass_mma_pipeline(Kernel *k, Diag *d)
{
	(void)d;
	Pp pp = {k, k->arena, NULL, NULL};
	walk(&pp, &k->body);
	return true;
}
