/* allocation.c: buffers for materialized intermediates.
 *
 * A tensor computed at another one (compute_at) gets a KS_ALLOC right where its nest starts
 * inside the shared loop (the KS_NEST marker that loop_nest leaves). The
 * buffer holds one compute-at iteration's worth: the product of the extents of its buffer
 * axes (index_buffer_axes; the innermost one padded by pad(n)), which must be constants, or
 * have constant upper bounds (a size variant's SizeSym.bound; the buffer has room for the
 * bound): registers and static shared memory have a size fixed at compile time; a
 * circular-buffered tensor has `stages` of them (its marker was
 * moved before the buffer loop). Inputs and outputs are the launcher's pointers: no buffer.
 */
#include "passes/passes.h"

/* The directive that put t where it is: cache_*(local), memory(local), else its compute_at. */
static Span mem_directive(Tensor *t)
{
	if (t->sched.cache_span.file)
		return t->sched.cache_span;
	if (t->sched.mem_span.file)
		return t->sched.mem_span;
	return t->sched.ca_span.file ? t->sched.ca_span : t->span;
}

/* A local buffer is an array in every thread (registers, spilled to local memory beyond a
 * few dozen): more than PASS_MAX_LOCAL_ELEMS elements is refused at the directive
 * (docs/design.md, "Limits"; the largest in the examples has 64). */
static bool check_local_size(Diag *d, Tensor *t, int64_t total)
{
	if (t->sched.mem != MEM_LOCAL || total <= PASS_MAX_LOCAL_ELEMS)
		return true;
	diag_error(d, mem_directive(t),
		   "the local (per-thread register) array of %s would have %lld elements; the limit is %d: compute %s at an inner loop, or use shared memory",
		   t->name, (long long)total, PASS_MAX_LOCAL_ELEMS, t->name);
	return false;
}

static bool buffer_size(Kernel *k, Diag *d, Tensor *t, IrExpr **size)
{
	Axis **axes;
	int n = index_buffer_axes(k->arena, t, &axes);
	IrRange rg = ir_range_in(k);
	int64_t total = 1;
	for (int i = 0; i < n; i++) {
		int64_t e, lo;
		bool sized = index_buffer_extent(t, axes, n, i, &e);
		if (!sized && ir_range(&rg, axes[i]->extent, &lo, &e) && e >= 0) {
			/* a symbolic extent with a constant bound (a size variant): sized by the bound */
			sized = true;
			if (i == n - 1 && !t->sched.pad_every)
				e += t->sched.pad;
		}
		if (!sized) {
			Buf b = {0};
			ir_print_expr(axes[i]->extent, &b);
			diag_error(d, t->sched.ca_span.file ? t->sched.ca_span : t->span,
				   "the %s buffer of %s needs constant extents, but axis %s has "
				   "extent %s; split it by a constant and compute %s inside the outer "
				   "part", mem_name(t->sched.mem), t->name, axes[i]->name, b.s, t->name);
			buf_free(&b);
			return false;
		}
		if (__builtin_mul_overflow(total, e, &total))
			total = INT64_MAX; /* refused below */
	}
	if (!index_padded_size(d, t, &total))
		return false;
	/* one slot per stage (circular_buffer.c) */
	if (t->sched.stages >= 2 && __builtin_mul_overflow(total, (int64_t)t->sched.stages, &total))
		total = INT64_MAX;
	if (!check_local_size(d, t, total))
		return false;
	if (total > INT64_MAX / 16) {
		diag_error(d, mem_directive(t), "the %s buffer of %s would have %lld elements: too large",
			   mem_name(t->sched.mem), t->name, (long long)total);
		return false;
	}
	*size = ir_int(k->arena, total);
	return true;
}

static bool alloc_list(Kernel *k, Diag *d, Stmt **list)
{
	for (Stmt **p = list; *p; p = &(*p)->next) {
		Stmt *s = *p;
		if (s->kind == KS_FOR && !alloc_list(k, d, &s->loop.body))
			return false;
		if (s->kind == KS_IF &&
		    (!alloc_list(k, d, &s->branch.then) || !alloc_list(k, d, &s->branch.els)))
			return false;
		if (s->kind != KS_NEST || s->note.tensor->kind != TK_INTERMEDIATE)
			continue;
		Tensor *t = s->note.tensor;
		if (t->sched.mem == MEM_GLOBAL) {
			diag_error(d, t->sched.mem_span.file ? t->sched.mem_span : t->span,
				   "intermediate %s in global memory is not supported yet; use "
				   "local or shared", t->name);
			return false;
		}
		IrExpr *size;
		if (!buffer_size(k, d, t, &size))
			return false;
		Stmt *a = kir_alloc(k, t, t->sched.mem, size);
		a->span = t->sched.ca_span;
		a->next = s;
		*p = a;
		p = &a->next; /* continue after the marker */
	}
	return true;
}

bool pass_allocation(Kernel *k, Diag *d)
{
	return alloc_list(k, d, &k->body);
}
