/* grid_reduce.c: grid reductions (a reduction axis bound to blockIdx.*), after indexing.
 *
 * Each block computes a partial of every output element it covers: the serial loops, then
 * the block reduction over the thread types bound to reduction axes (loop_nest.c). The store
 * `t[o] = t_acc` of such a tensor, already guarded by its bounds and redundant-write
 * predicates (so one thread of the block per element o reaches it, in every block along the
 * reduced block types: redundant_write.c counts those types as bound), becomes
 *
 *     grid_reduce_OP(t_acc over blockIdx.y, element o, part r of R, ws, sem) { t[o] = t_acc; }
 *
 * r is the block's linear index over the reduced block types (x fastest) with the extents of
 * t's own axes, R their product. Blocks beyond those extents (a launch made wider by another
 * tensor) fail the store's predicate and take no part. The workspace is two global buffers
 * per grid-reduced tensor, made here as tensors outside the fusion (Kernel.grid_ws): ws with
 * numel(t) * R accumulators, sem with numel(t) counters (the launcher zeroes them).
 *
 * The schedule (scheduler/schedule.c, check_grid_reductions) admits grid reductions only for
 * outputs that nothing reads, so no statement of the kernel ever needs the finished value.
 */
#include "passes/passes.h"

/* The reduced block types of t's own axes, as a mask; ext[p] their extents. */
static unsigned grid_pars(Arena *a, Tensor *t, IrExpr *ext[PT_COUNT])
{
	unsigned mask = 0;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if (ax->ca_alias || !ax->reduction || !par_is_block(ax->par))
			continue;
		mask |= 1u << ax->par;
		ext[ax->par] = axis_launch_extent(a, ax);
	}
	return mask;
}

/* A global buffer of the workspace: a 1-d tensor outside the fusion. */
static Tensor *ws_tensor(Kernel *k, const char *name, DType dt, IrExpr *numel)
{
	Tensor *w = tensor_buffer(k->arena, name, dt, MEM_GLOBAL, numel, k->fusion->span);
	vec_push(k->arena, &k->grid_ws, w);
	return w;
}

static Stmt *grid_step(Kernel *k, Stmt *st)
{
	Arena *a = k->arena;
	Tensor *t = st->store.tensor;
	IrExpr *ext[PT_COUNT] = {0};
	unsigned mask = grid_pars(a, t, ext);
	if (st->store.value->kind != EX_VAR)
		die("grid_reduce: the store of %s is not of its accumulator", t->name);
	Stmt *g = NEW(a, Stmt);
	g->kind = KS_GRID_REDUCE;
	g->span = st->span;
	for (int i = 0; i < t->ndomain; i++)
		if (!t->domain[i]->ca_alias && (mask & (1u << t->domain[i]->par)))
			g->span = t->domain[i]->par_span; /* the (last) bind directive */
	g->grid_red.var = st->store.value->var;
	g->grid_red.value = st->store.value;
	g->grid_red.red = t->def->red;
	g->grid_red.pars = mask;
	g->grid_red.tensor = t;
	g->grid_red.offset = st->store.offset;
	/* part = bid.x + E.x * (bid.y + E.y * bid.z) over the reduced types, x fastest */
	IrExpr *part = NULL, *n = NULL;
	for (int p = PT_BIDZ; p >= PT_BIDX; p--) {
		if (!(mask & (1u << p)))
			continue;
		IrExpr *b = ir_par(a, (ParType)p);
		part = part ? ix_add(a, b, ix_mul(a, ext[p], part)) : b;
		n = n ? ix_mul(a, n, ext[p]) : ext[p];
	}
	g->grid_red.part = part;
	g->grid_red.nparts = n;
	IrExpr *numel = ir_int(a, 1);
	for (int d = 0; d < t->ndim; d++)
		numel = ix_mul(a, numel, t->shape[d]);
	g->grid_red.ws = ws_tensor(k, arena_printf(a, "fus_ws_%s", t->name), g->grid_red.var->dtype,
			  ix_mul(a, numel, n));
	g->grid_red.sem = ws_tensor(k, arena_printf(a, "fus_sem_%s", t->name), DT_I32, numel);
	g->grid_red.body = st;
	g->next = st->next;
	st->next = NULL;
	return g;
}

static bool is_grid_reduced(Kernel *k, Tensor *t)
{
	IrExpr *ext[PT_COUNT];
	return t && tensor_is_reduction(t) && grid_pars(k->arena, t, ext);
}

static Stmt *grid_list(Kernel *k, Stmt *s)
{
	Stmt head = {0}, *prev = &head;
	for (; s; s = s->next) {
		if (s->kind == KS_FOR) {
			s->loop.body = grid_list(k, s->loop.body);
		} else if (s->kind == KS_IF) {
			s->branch.then = grid_list(k, s->branch.then);
			s->branch.els = grid_list(k, s->branch.els);
		} else if (s->kind == KS_STORE && s->store.mem == MEM_GLOBAL &&
			   is_grid_reduced(k, s->store.tensor)) {
			s = grid_step(k, s);
		}
		prev->next = s;
		prev = s;
	}
	return head.next;
}

bool pass_grid_reduce(Kernel *k, Diag *d)
{
	k->body = grid_list(k, k->body);
	return true;
}
