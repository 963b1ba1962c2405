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
 * with pad(n, e), offset o of the unpadded layout becomes o + o / e * n. A swizzled one
 * (`swizzle(S)`) keeps its size and permutes the 16-byte chunks of each row (index_swizzle).
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

/* swizzle(S): rows of W elements, W the innermost buffer axis' extent or swizzle(S, W)'s,
 * R = the slot's size / W rows. False, with an error at the swizzle, when the layout cannot
 * be swizzled: extents not constant, W * size not a multiple of S, W not dividing the slot. */
static bool swizzle_rows(Diag *d, Arena *a, Tensor *t, int64_t *w, int64_t *r)
{
	Axis **axes;
	int n = index_buffer_axes(a, t, &axes);
	int64_t size = 1, e = 1, es = dtype_size(t->dtype), S = t->sched.swizzle;
	for (int i = 0; i < n; i++) {
		if (!ir_is_const(axes[i]->extent, &e)) {
			if (d)
				diag_error(d, t->sched.swizzle_span, "cannot swizzle '%s': its buffer axis %s has no constant extent",
					   t->name, axes[i]->name);
			return false;
		}
		size *= e;
	}
	*w = t->sched.swizzle_row ? t->sched.swizzle_row : e; /* e: the innermost extent */
	if (*w * es % S) {
		if (d)
			diag_error(d, t->sched.swizzle_span, "cannot swizzle '%s' by %dB: its rows of %lld elements are %lld bytes, not a multiple of %d%s",
				   t->name, (int)S, (long long)*w, (long long)(*w * es), (int)S,
				   t->sched.swizzle_row ? "" : arena_printf(a, " (the innermost buffer axis; swizzle(%dB, e) takes rows of e elements)", (int)S));
		return false;
	}
	if (size % *w) {
		if (d)
			diag_error(d, t->sched.swizzle_span, "cannot swizzle '%s' in rows of %lld elements: its buffer has %lld, not a multiple",
				   t->name, (long long)*w, (long long)size);
		return false;
	}
	*r = size / *w;
	return true;
}

bool index_swizzle_check(Diag *d, Arena *a, Tensor *t)
{
	int64_t w, r;
	return !t->sched.swizzle || swizzle_rows(d, a, t, &w, &r);
}

/* The S-byte swizzle of TENSOR_CORES.md (CUTLASS Swizzle<log2(S / 16), 4, 3>, TMA's
 * SWIZZLE_{32,64,128}B), in elements of es bytes (es divides 16): rows of w elements (w * es a
 * multiple of S) are cut into S-byte panels laid one after the other (panel p of all r rows,
 * then panel p + 1: lin = p * r * S + row * S + byte; one panel, lin = off, when w * es is S),
 * then phys = lin ^ (((lin >> 7) & (S / 16 - 1)) << 4) in bytes: the 16-byte chunk index is
 * XORed with the 128-byte line's index mod S / 16. Whole chunks move, so an aligned vector of up
 * to 16 bytes stays contiguous and a row of ldmatrix (16 bytes) stays one row; 8 rows of one
 * chunk column fall in 8 different bank groups. A permutation of [0, r * w). */
IrExpr *index_swizzle(Arena *a, const IrRange *rg, IrExpr *off, int64_t es, int64_t S, int64_t w,
		      int64_t r)
{
	/* in chunks of c elements: w and S / es are multiples of c */
	int64_t c = 16 / es, wc = w / c, sc = S / 16;
	IrExpr *k = ix_div_rows(a, rg, off, c), *lin = k;
	if (wc != sc) {
		IrExpr *row = ix_div_rows(a, rg, k, wc), *col = ix_mod(a, rg, k, ir_int(a, wc));
		lin = ix_add(a, ix_mul(a, ix_div_rows(a, rg, col, sc), ir_int(a, r * sc)),
			     ix_add(a, ix_mul(a, row, ir_int(a, sc)), ix_mod(a, rg, col, ir_int(a, sc))));
	}
	/* 8 chunks a 128-byte line; the XOR on the chunk within its line only, so that what is
	 * above it stays a sum (a warp tile's row, an unrolled loop's step: immediate offsets) */
	IrExpr *line = ix_div_rows(a, rg, lin, 8), *eight = ir_int(a, 8);
	IrExpr *chunk = ix_xor(a, ix_mod(a, rg, lin, eight), ix_mod(a, rg, line, ir_int(a, sc)));
	IrExpr *phys = ix_add(a, ix_mul(a, line, eight), chunk), *in = ix_mod(a, rg, off, ir_int(a, c));
	/* off % c, or off - k * c when that does not fold (a vector of 8 bytes at 2 * j + v: its
	 * lanes stay a sum, vectorize.c) */
	if (in->kind == EX_OP && in->op == OP_MOD)
		in = ix_sub(a, off, ix_mul(a, k, ir_int(a, c)));
	return ix_add(a, ix_mul(a, phys, ir_int(a, c)), in);
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
		int64_t w, r;
		if (t->sched.swizzle && swizzle_rows(NULL, a, t, &w, &r))
			off = index_swizzle(a, rg, off, dtype_size(t->dtype), t->sched.swizzle, w, r);
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
	bool ok = true;
	for (int i = 0; i < k->fusion->ntensors; i++)
		ok &= index_swizzle_check(d, k->arena, k->fusion->tensors[i]);
	if (!ok)
		return false;
	IrRange rg = ir_range_in(k);
	index_list(k, &rg, k->body);
	return true;
}
