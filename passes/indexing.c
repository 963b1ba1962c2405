/* indexing.c: logical subscripts -> flattened element offsets.
 *
 * Inputs and outputs are row-major contiguous over their shape: offset = sum over d of
 * subs[d] * (shape[d+1] * ... * shape[n-1]). A materialized intermediate lives in a buffer
 * that holds only what one iteration of its compute-at loop needs: it is row-major over its
 * buffer axes (index_buffer_axes: its own serial axes; for shared memory also the axes bound
 * to threadIdx.*, its own and those of the consumer's loops it is computed inside, since the
 * block's threads share the buffer), and the position along each buffer axis is computed
 * forward from the logical subscripts (split: r / F and r % F; merge: o * E_inner + i). The
 * subscripts are functions of the loop variables, so the folding helpers reduce those
 * positions back to the producer's loop variables (`(io * 4 + ii) % 4` -> `ii`). They know the
 * guards around the statement (the IrRange index_list carries, ir_range_guard): a cache copied
 * by 32 of 128 threads is guarded by `threadIdx.x < 32`, so `(threadIdx.x * 4 + v) % 128` is
 * `threadIdx.x * 4 + v`.
 * A padded shared buffer (`pad(n)`) has rows of its innermost axis' extent + n elements;
 * with pad(n, e), offset o of the unpadded layout becomes o + o / e * n.
 *
 * After this pass no EX_ACCESS remains (EX_LOAD instead) and every store has an offset.
 */
#include "passes/passes.h"

/* The binding of a loop: a shared (compute_at) axis carries its owner's. */
static ParType loop_par(Axis *ax)
{
	while (ax->ca_alias)
		ax = ax->ca_alias;
	return ax->par;
}

int index_buffer_axes(Arena *a, Tensor *t, Axis ***out)
{
	Axis **v = arena_alloc(a, sizeof(Axis *) * (size_t)(t->ndomain ? t->ndomain : 1));
	int n = 0;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if (ax->reduction)
			continue;
		/* The threads of a block run a shared loop bound to threadIdx.* at once: each
		 * needs its own part of a shared buffer computed inside it (unless t does not
		 * depend on that loop: a bare alias, root_index < 0, of a broadcast). */
		if (ax->ca_alias) {
			if (t->sched.mem == MEM_SHARED && par_is_thread(loop_par(ax)) &&
			    !(ax->kind == AX_ROOT && ax->root_index < 0))
				v[n++] = ax;
			continue;
		}
		if (ax->par == PT_SERIAL || (t->sched.mem == MEM_SHARED && par_is_thread(ax->par)))
			v[n++] = ax;
	}
	*out = v;
	return n;
}

bool index_buffer_extent(Tensor *t, Axis **axes, int n, int i, int64_t *e)
{
	if (!ir_is_const(axes[i]->extent, e))
		return false;
	if (i == n - 1 && !t->sched.pad_every)
		*e += t->sched.pad;
	return true;
}

bool index_padded_size(Diag *d, Tensor *t, int64_t *size)
{
	if (!t->sched.pad_every)
		return true;
	if (*size % t->sched.pad_every) {
		diag_error(d, t->sched.pad_span, "cannot pad '%s' after every %lld elements: its buffer has %lld, not a multiple",
			   t->name, (long long)t->sched.pad_every, (long long)*size);
		return false;
	}
	*size = *size / t->sched.pad_every * (t->sched.pad_every + t->sched.pad);
	return true;
}

/* Position along axis ax of the element with root values subs. */
IrExpr *index_forward(Arena *a, const IrRange *rg, Axis *ax, IrExpr **subs, int n)
{
	switch (ax->kind) {
	case AX_ROOT:
		if (ax->root_index >= n)
			die("indexing: root %s of %s has no subscript", ax->name, ax->owner->name);
		return subs[ax->root_index];
	case AX_SPLIT_OUTER:
		return ix_div(a, rg, index_forward(a, rg, ax->from[0], subs, n), ir_int(a, ax->factor));
	case AX_SPLIT_INNER:
		return ix_mod(a, rg, index_forward(a, rg, ax->from[0], subs, n), ir_int(a, ax->factor));
	case AX_MERGE:
		return ix_add(a, ix_mul(a, index_forward(a, rg, ax->from[0], subs, n), ax->from[1]->extent),
			      index_forward(a, rg, ax->from[1], subs, n));
	}
	unreachable();
}

IrExpr *index_offset(Arena *a, const IrRange *rg, Tensor *t, IrExpr **subs, int n)
{
	IrExpr *off = ir_int(a, 0);
	if (t->kind == TK_INTERMEDIATE) {
		Axis **axes;
		int na = index_buffer_axes(a, t, &axes);
		for (int i = 0; i < na; i++) {
			int64_t e;
			/* pad(n): each run of the innermost axis is n longer (constant: allocation.c) */
			IrExpr *ext = t->sched.pad && index_buffer_extent(t, axes, na, i, &e) ? ir_int(a, e)
											  : axes[i]->extent;
			off = ix_add(a, ix_mul(a, off, ext), index_forward(a, rg, axes[i], subs, n));
		}
		/* pad(n, e): n more elements after every e */
		if (t->sched.pad_every)
			off = ix_add(a, off, ix_mul(a, ix_div_rows(a, rg, off, t->sched.pad_every),
						    ir_int(a, t->sched.pad)));
		return off;
	}
	for (int d = 0; d < n; d++) {
		IrExpr *term = subs[d];
		for (int e = d + 1; e < n; e++)
			term = ix_mul(a, term, t->shape[e]);
		off = ix_add(a, off, term);
	}
	return off;
}

static IrExpr *lower_access(Arena *a, IrExpr *e, void *ctx)
{
	const IrRange *rg = ctx;
	if (e->kind != EX_ACCESS)
		return e;
	return ir_load(a, e->tensor, index_offset(a, rg, e->tensor, e->args, e->nargs));
}

static IrExpr *lower(Kernel *k, const IrRange *rg, IrExpr *e)
{
	return e ? ir_rewrite(k->arena, e, lower_access, (void *)rg) : NULL;
}

/* rg: the kernel's range facts with those of the guards around s */
static void index_list(Kernel *k, const IrRange *rg, Stmt *s)
{
	for (; s; s = s->next) {
		switch (s->kind) {
		case KS_FOR:
			index_list(k, rg, s->loop.body);
			break;
		case KS_IF: {
			s->branch.cond = lower(k, rg, s->branch.cond);
			IrRange in = *rg;
			ir_range_guard(&in, s->branch.cond);
			index_list(k, &in, s->branch.then);
			index_list(k, rg, s->branch.els);
			break;
		}
		case KS_STORE:
			if (!s->store.offset)
				s->store.offset = index_offset(k->arena, rg, s->store.tensor,
							       s->store.idx, s->store.nidx);
			s->store.idx = NULL;
			s->store.nidx = 0;
			s->store.value = lower(k, rg, s->store.value);
			break;
		case KS_LET:
			s->let.value = lower(k, rg, s->let.value);
			break;
		default:
			break;
		}
	}
}

bool pass_indexing(Kernel *k, Diag *d)
{
	IrRange rg = ir_range_in(k);
	index_list(k, &rg, k->body);
	return true;
}
