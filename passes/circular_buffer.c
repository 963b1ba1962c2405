/* circular_buffer.c: circular (double) buffering of copies (docs/lowering.md).
 *
 * A tensor c with stages(n, p) is loaded into n slots over its buffer loop: the innermost loop
 * around c's "computed at" marker (the innermost serial loop outside c's compute-at
 * position), `for i in [0, E)`. Its load nest LOAD (the statements after the marker up to the
 * last one that writes c: c's loop nest, or, when c's own axes make no loop, the producers
 * computed inside c and then c's stores; they are prefetched together) is
 *
 *     for i in [0, E) { A; LOAD(i); B }          B reads c
 *
 * and becomes (slot size S elements, allocation n * S; the marker moves before the loop so the
 * buffer outlives the iterations):
 *
 *     for s in [0, p) unroll { if (s < E) LOAD(s) into slot s; commit; }         prologue
 *                                              (p = 1: the body once with s = 0, no loop)
 *     wait_group p-1; [sync]                              stage 0 is in place
 *     for i in [0, E) {
 *       A;
 *       if (i + p < E) LOAD(i + p) into slot (i + p) % n;
 *       commit;                                           right after the last load
 *       B reading slot i % n;
 *       wait_group p-1; [sync]                            stage i + 1 is in place; slot i % n
 *     }                                                   may be overwritten from now on
 *     wait_all;                                           nothing stays in flight
 *
 * Wait counts: before B of iteration i, groups 1..p+i+1 are committed and stage i+1 is group
 * i+2... so at the end of iteration i, p+i+1 groups exist and stage i+1 is group i+2: waiting
 * until at most p-1 are pending completes it (p = n-1 gives wait_group n-2). Loads past
 * the extent are predicated off while the commits stay unconditional, so the counts hold for
 * every extent, also E < n; no epilogue is needed. The slot written in iteration i,
 * (i+p) % n, was last read in iteration i+p-n <= i-1, before that iteration's final barrier.
 * With p = 0 the loop loads stage i, commits, waits for group 0 and syncs before B.
 *
 * Commits and waits are emitted only for cp.async tensors; the barriers only when threads read
 * elements other threads wrote (sync_cross_thread), so a copy whose threads read only their
 * own elements gets waits and no __syncthreads. This pass owns these waits and barriers: the
 * cp_wait and sync passes leave buffered tensors alone. Caches buffered on the same loop share
 * the prologue, the commits and the waits; they need the same stages. Loops are buffered in
 * program order of their markers, so a buffered cache computed inside another one's load nest
 * is buffered after it, in every copy of that load nest (find).
 */
#include <string.h>

#include "passes/passes.h"

typedef struct Cb {
	Kernel *k;
	Diag *d;
	Arena *a;
	Var *i;          /* the buffer loop's variable */
	IrExpr *idx;     /* what i becomes in the copy being made */
	IrExpr *slot;    /* the slot the copy writes */
	Tensor **group;
	int64_t *sizes;  /* slot sizes (elements) of the group's tensors */
	int ngroup;
} Cb;

static Span stages_span(Tensor *t)
{
	return t->sched.stages_span.file ? t->sched.stages_span : t->span;
}

/* ---- finding the buffer loop ------------------------------------------------------------ */

typedef struct Found {
	Stmt *marker;      /* the first marker of a buffered tensor not buffered yet */
	Stmt *loop;        /* the loop whose body holds it directly (NULL: none) */
	Stmt **loop_link;  /* where that loop is linked */
	bool nested;       /* that loop is inside another loop: it runs again */
} Found;

static bool in_vec(Vec *v, void *p)
{
	for (int i = 0; i < v->len; i++)
		if (v->items[i] == p)
			return true;
	return false;
}

/* The first marker, in program order, of a tensor with stages that is not in `done`. Program
 * order finds a tensor before those whose markers are inside its load nest (a buffered cache
 * computed at a loop of another buffered cache's load): the outer one is buffered first, its
 * load nest copied into the prologue and the main loop, and then every copy of the inner
 * marker is found and buffered in its own copy. */
static void find(Stmt **link, Stmt *loop, Stmt **loop_link, int depth, Vec *done, Found *f)
{
	for (Stmt *s; !f->marker && (s = *link); link = &s->next) {
		if (s->kind == KS_NEST && s->note.tensor->sched.stages >= 2 && !in_vec(done, s)) {
			*f = (Found){s, loop, loop_link, depth > 1};
			return;
		}
		if (s->kind == KS_FOR)
			find(&s->loop.body, s, link, depth + 1, done, f);
		else if (s->kind == KS_IF) {
			find(&s->branch.then, NULL, NULL, depth, done, f);
			find(&s->branch.els, NULL, NULL, depth, done, f);
		}
	}
}

static bool marks(Stmt *s, Tensor *t)
{
	return s->kind == KS_NEST && s->note.tensor == t;
}

static bool stmt_writes(Stmt *s, void *t)
{
	return ir_stmt_write(s, NULL) == t;
}

static bool writes_stmt(Stmt *s, Tensor *t)
{
	Stmt *next = s->next;
	s->next = NULL;
	bool w = ir_stmts_any(s, stmt_writes, t);
	s->next = next;
	return w;
}

/* The last statement of t's load nest, which starts right after its marker: the statement
 * that writes t, or, when t's own axes make no loop (all parallel), the producers computed
 * inside t (their markers and nests) and then t's stores, up to the last one (NULL: none). */
static Stmt *load_end(Stmt *marker, Tensor *t)
{
	Stmt *last = NULL;
	for (Stmt *s = marker->next; s; s = s->next)
		if (writes_stmt(s, t))
			last = s;
	return last;
}

/* e loads t (NULL t: any intermediate) */
static bool loads(IrExpr *e, void *t)
{
	return e->kind == EX_LOAD && (e->tensor == t || (!t && e->tensor->kind == TK_INTERMEDIATE));
}

static bool vstore_reads(Stmt *s, void *t)
{
	return s->kind == KS_VSTORE && s->copy.src == t;
}

static bool stmt_reads(Stmt *s, Tensor *t)
{
	return ir_stmts_any_expr(s, loads, t) || ir_stmts_any(s, vstore_reads, t);
}

static bool is_marker(Stmt *s, void *t)
{
	return marks(s, t);
}

static bool contains_marker(Stmt *s, Tensor *t)
{
	return ir_stmts_any(s, is_marker, t);
}

/* Intermediates the load reads must be complete before the loop: a source computed inside
 * the buffer loop would be prefetched before it exists. A source computed inside the load
 * nest itself (at t's own axes) is prefetched with it. */
static bool source_outside(Cb *cb, Tensor *t, Stmt *load, Stmt *body)
{
	Fusion *f = cb->k->fusion;
	for (int j = 0; j < f->ntensors; j++) {
		Tensor *src = f->tensors[j];
		if (src == t || src->kind != TK_INTERMEDIATE || !stmt_reads(load, src) ||
		    contains_marker(load, src))
			continue;
		for (int g = 0; g < cb->ngroup; g++) {
			if (cb->group[g] == src) {
				diag_error(cb->d, stages_span(t),
					   "%s and its source %s are buffered on the same loop; buffer "
					   "%s on an inner loop", t->name, src->name, t->name);
				return false;
			}
		}
		if (contains_marker(body, src)) {
			diag_error(cb->d, stages_span(t),
				   "cannot buffer %s: its source %s is computed inside the buffered loop",
				   t->name, src->name);
			return false;
		}
	}
	return true;
}

/* ---- copies ----------------------------------------------------------------------------- */

/* i -> cb->idx, simplified */
static bool map_slot(IrExpr **slot, void *ctx)
{
	Cb *cb = ctx;
	IrRange rg = ir_range_in(cb->k);
	*slot = ir_simplify(cb->a, &rg, ir_subst(cb->a, *slot, cb->i, cb->idx));
	return false;
}

static int group_index(Cb *cb, Tensor *t)
{
	for (int g = 0; g < cb->ngroup; g++)
		if (cb->group[g] == t)
			return g;
	return -1;
}

static IrExpr *slot_offset(Cb *cb, IrExpr *slot, int g)
{
	return ix_mul(cb->a, slot, ir_int(cb->a, cb->sizes[g]));
}

static Stmt *copy_list(Cb *cb, Stmt *s);

/* A copy of a load statement with i -> cb->idx, writing slot cb->slot. */
static Stmt *copy_stmt(Cb *cb, Stmt *s)
{
	Stmt *c = ir_stmt_clone(cb->a, s);
	ir_stmt_exprs(c, map_slot, cb);
	IrExpr **off;
	int g = group_index(cb, ir_stmt_write(c, &off));
	if (g >= 0)
		*off = ix_add(cb->a, *off, slot_offset(cb, cb->slot, g));
	Stmt **lists[3];
	int n = ir_stmt_lists(c, lists);
	for (int j = 0; j < n; j++)
		*lists[j] = copy_list(cb, *lists[j]);
	return c;
}

static Stmt *copy_list(Cb *cb, Stmt *s)
{
	Stmt *head = NULL;
	for (; s; s = s->next)
		head = kir_append(head, copy_stmt(cb, s));
	return head;
}

/* `if (idx < E) { loads of every tensor of the group into slot }` */
static Stmt *stage_loads(Cb *cb, Stmt **loads, IrExpr *idx, IrExpr *slot, IrExpr *extent)
{
	Stmt *list = NULL;
	cb->idx = idx;
	cb->slot = slot;
	for (int g = 0; g < cb->ngroup; g++)
		list = kir_append(list, copy_list(cb, loads[g]));
	Stmt *s = kir_if(cb->k, ix_lt(cb->a, idx, extent), list, NULL);
	s->span = stages_span(cb->group[0]);
	return s;
}

/* Reads of the group's tensors in the loop body read slot i % n. */
static IrExpr *slot_read_fn(Arena *a, IrExpr *e, void *ctx)
{
	Cb *cb = ctx;
	int g;
	if (e->kind != EX_LOAD || (g = group_index(cb, e->tensor)) < 0)
		return e;
	return ir_load(a, e->tensor, ix_add(a, e->args[0], slot_offset(cb, cb->slot, g)));
}

static void read_slots(Cb *cb, Stmt *s)
{
	for (; s; s = s->next) {
		ir_stmt_rewrite(cb->a, s, slot_read_fn, cb);
		if (s->kind == KS_VSTORE && group_index(cb, s->copy.src) >= 0)
			s->copy.src_offset = ix_add(cb->a, s->copy.src_offset,
					       slot_offset(cb, cb->slot, group_index(cb, s->copy.src)));
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		for (int j = 0; j < n; j++)
			read_slots(cb, *lists[j]);
	}
}

/* ---- the transformation ----------------------------------------------------------------- */

static Stmt *node(Cb *cb, StmtKind kind, int wait_n)
{
	Stmt *s = NEW(cb->a, Stmt);
	s->kind = kind;
	if (kind == KS_CP_WAIT)
		s->wait.n = wait_n;
	s->span = stages_span(cb->group[0]);
	return s;
}

/* [wait_group n] [__syncthreads()] */
static Stmt *wait_sync(Cb *cb, bool async, bool share, int n)
{
	Stmt *list = async ? node(cb, KS_CP_WAIT, n) : NULL;
	return share ? kir_append(list, node(cb, KS_SYNC, 0)) : list;
}

/* The slot size in elements: the product of the buffer axes' extents (padded: pad(n)). */
static bool slot_size(Cb *cb, Tensor *t, int64_t *out)
{
	Axis **axes;
	int n = index_buffer_axes(cb->a, t, &axes);
	*out = 1;
	for (int j = 0; j < n; j++) {
		int64_t e;
		if (!index_buffer_extent(t, axes, n, j, &e)) {
			diag_error(cb->d, stages_span(t),
				   "cannot buffer %s: its buffer axis %s has no constant extent", t->name,
				   axes[j]->name);
			return false;
		}
		*out *= e;
	}
	return index_padded_size(cb->d, t, out);
}

static bool buffer_loop(Cb *cb, Found *f)
{
	Stmt *L = f->loop;
	Tensor *t0 = cb->group[0];
	int n = t0->sched.stages, p = t0->sched.prefetch;
	bool async = false, share = false;
	Stmt **markers = arena_alloc(cb->a, sizeof(Stmt *) * (size_t)cb->ngroup);
	Stmt **loads = arena_alloc(cb->a, sizeof(Stmt *) * (size_t)cb->ngroup);

	cb->sizes = arena_alloc(cb->a, sizeof(int64_t) * (size_t)cb->ngroup);
	cb->i = L->loop.var;
	/* take the markers and loads out of the body; the first one's place gets the loads */
	Stmt head = {.next = L->loop.body}, *prev = &head, *at = NULL;
	for (Stmt *s = L->loop.body; s; s = s->next) {
		int g = s->kind == KS_NEST ? group_index(cb, s->note.tensor) : -1;
		if (g < 0) {
			prev = s;
			continue;
		}
		Tensor *t = cb->group[g];
		Stmt *last = load_end(s, t);
		if (!last) {
			diag_error(cb->d, stages_span(t), "cannot buffer %s: it has no load nest", t->name);
			return false;
		}
		markers[g] = s;
		loads[g] = s->next;
		if (!at)
			at = prev;
		prev->next = last->next;
		last->next = NULL;
		s = prev;
	}
	L->loop.body = head.next;
	for (int g = 0; g < cb->ngroup; g++) {
		Tensor *t = cb->group[g];
		if (!slot_size(cb, t, &cb->sizes[g]) ||
		    !source_outside(cb, t, loads[g], L->loop.body))
			return false;
		async |= cp_async_kept(cb->k, t);
		if (t->sched.mem == MEM_SHARED && sync_cross_thread(cb->k, t, loads[g], L->loop.body))
			share = true;
	}
	Arena *a = cb->a;
	IrExpr *E = L->loop.var->extent, *i = ir_var(a, L->loop.var);
	IrRange rg = ir_range_in(cb->k);
	/* B reads slot i % n */
	cb->slot = ix_mod(a, &rg, i, ir_int(a, n));
	read_slots(cb, L->loop.body);
	/* the main loop's loads */
	IrExpr *ip = ix_add(a, i, ir_int(a, p));
	Stmt *main = stage_loads(cb, loads, ip, ix_mod(a, &rg, ip, ir_int(a, n)), E);
	if (async)
		main = kir_append(main, node(cb, KS_CP_COMMIT, 0));
	if (p == 0)
		main = kir_append(main, wait_sync(cb, async, share, 0));
	Stmt *rest = at == &head ? L->loop.body : at->next;
	main = kir_append(main, rest);
	if (at == &head)
		L->loop.body = main;
	else
		at->next = main;
	if (p > 0)
		L->loop.body = kir_append(L->loop.body, wait_sync(cb, async, share, p - 1));
	/* before the loop: the markers (for the allocation), the prologue, the first wait */
	Stmt *before = NULL;
	for (int g = 0; g < cb->ngroup; g++) {
		markers[g]->next = NULL;
		before = kir_append(before, markers[g]);
	}
	if (p == 1) {
		/* one stage: no loop */
		before = kir_append(before, stage_loads(cb, loads, ir_int(a, 0), ir_int(a, 0), E));
		if (async)
			before = kir_append(before, node(cb, KS_CP_COMMIT, 0));
		before = kir_append(before, wait_sync(cb, async, share, 0));
	} else if (p > 1) {
		Var *s = kir_new_var(cb->k, arena_printf(a, "%s_pre", L->loop.var->name), DT_I64);
		s->extent = ir_int(a, p);
		IrExpr *sv = ir_var(a, s);
		Stmt *body = stage_loads(cb, loads, sv, sv, E);
		if (async)
			body = kir_append(body, node(cb, KS_CP_COMMIT, 0));
		Stmt *pro = kir_for(cb->k, s, body);
		pro->loop.unroll = true;
		pro->span = stages_span(t0);
		before = kir_append(before, pro);
		before = kir_append(before, wait_sync(cb, async, share, p - 1));
	}
	Stmt *after = L->next;
	*f->loop_link = kir_append(before, L);
	L->next = async ? node(cb, KS_CP_WAIT, -1) : NULL;
	/* With p = 0 the last iteration's B is followed by no barrier: when the loop runs again,
	 * its first load (slot 0) must wait until every thread is done reading slot (E-1) % n,
	 * which is slot 0 too when E % n == 1. */
	if (p == 0 && share && f->nested)
		kir_append(L, node(cb, KS_SYNC, 0));
	kir_append(L, after);
	return true;
}

/* Buffers the loop around f's marker, with every buffered tensor marked directly in its
 * body (the markers join `done`). */
static bool buffer_marker(Cb *cb, Found *f, Vec *done)
{
	Tensor *t = f->marker->note.tensor;
	Fusion *fu = cb->k->fusion;

	if (!f->loop) {
		diag_error(cb->d, stages_span(t),
			   "cannot buffer %s: no serial loop is outside its compute-at position", t->name);
		return false;
	}
	if (t->sched.stages < 2 || t->sched.prefetch < 0 || t->sched.prefetch >= t->sched.stages) {
		diag_error(cb->d, stages_span(t),
			   "stages(%d, %d) of %s: needs at least 2 stages and 0 <= prefetch < stages",
			   t->sched.stages, t->sched.prefetch, t->name);
		return false;
	}
	/* every buffered tensor marked directly in the same loop body joins the group */
	cb->group = arena_alloc(cb->a, sizeof(Tensor *) * (size_t)fu->ntensors);
	cb->ngroup = 0;
	for (int j = 0; j < fu->ntensors; j++) {
		Tensor *u = fu->tensors[j];
		Stmt *m = NULL;
		if (u->sched.stages < 2)
			continue;
		for (Stmt *s = f->loop->loop.body; s && !m; s = s->next)
			if (marks(s, u) && !in_vec(done, s))
				m = s;
		if (!m)
			continue;
		if (u->sched.stages != t->sched.stages || u->sched.prefetch != t->sched.prefetch) {
			diag_error(cb->d, stages_span(u),
				   "%s and %s are buffered on the same loop with different stages", t->name,
				   u->name);
			return false;
		}
		cb->group[cb->ngroup++] = u;
		vec_push(cb->a, done, m);
	}
	return buffer_loop(cb, f);
}

bool pass_circular_buffer(Kernel *k, Diag *d)
{
	Cb cb = {.k = k, .d = d, .a = k->arena};
	Vec done = {0};

	for (;;) {
		Found f = {0};
		find(&k->body, NULL, NULL, 0, &done, &f);
		if (!f.marker)
			return true; /* every marker buffered, or none: not materialized here */
		if (!buffer_marker(&cb, &f, &done))
			return false;
	}
}
