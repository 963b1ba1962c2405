/* auto_schedule.c: the schedule used when a fusion has no schedule block (or `auto`).
 * docs/auto_schedule.md explains the choice; in short, for each pointwise output:
 *
 *   1. merge the axes into one when every access is the identity (same shape, no transpose or
 *      broadcast), else keep the last axis as the vector axis and merge the outer ones;
 *   2. vec = 16 bytes / the widest dtype among the output and the tensors it reads, halved until
 *      it divides the vector axis' extent (a size symbol is assumed to, and the vectorize pass
 *      records that precondition for the launcher);
 *   3. split(x, vec) -> (x, v); split(x, 128) -> (x, tx); split(x, 4) -> (bx, u): the domain
 *      [bx, u, tx, v] with bx on blockIdx.x, tx on threadIdx.x, u unrolled and v vectorized, so
 *      consecutive threads access consecutive 16-byte vectors (coalesced) and each thread keeps
 *      four of them in flight (a short constant axis gets fewer threads and less unrolling);
 *   4. the merged outer axis of a non-mergeable output goes on blockIdx.y when its extent is a
 *      constant <= 65535, else it is folded into bx.
 *
 * Pointwise intermediates stay inlined (their reads count as reads of what they read).
 * Reductions are left alone: their lowering reports what it does not support.
 */
#include <string.h>

#include "frontend/frontend.h"

enum { AUTO_THREADS = 128, AUTO_UNROLL = 4, AUTO_VECTOR_BYTES = 16, AUTO_GRID_YZ = 65535 };

/* What the accesses reachable from an output's definition allow. */
typedef struct Access {
	Tensor *out;
	bool identity;  /* every memory read is out's own index order and shape */
	bool vec_ok;    /* the last index only ever subscripts the last dimension */
	int max_size;   /* widest dtype read or written, in bytes */
} Access;

static bool dims_equal(IrExpr *x, IrExpr *y)
{
	if (x->kind != y->kind)
		return false;
	return x->kind == EX_SIZE ? x->size == y->size : x->kind == EX_INT && x->ival == y->ival;
}

/* Records a read of memory tensor x whose subscript k is out's root `pos[k]` (-1: other). */
static void note_read(Access *acc, Tensor *x, const int *pos)
{
	Tensor *o = acc->out;
	if (dtype_size(x->dtype) > acc->max_size)
		acc->max_size = dtype_size(x->dtype);
	if (x->ndim != o->ndim && x->ndim != 0) /* a 0-d read is the same for every element */
		acc->identity = false;
	for (int k = 0; k < x->ndim; k++) {
		if (pos[k] != k || k >= o->ndim || !dims_equal(x->shape[k], o->shape[k]))
			acc->identity = false;
		if (pos[k] == o->ndim - 1 && k != x->ndim - 1)
			acc->vec_ok = false;
	}
}

/* Walks e, an expression over the root axes of a tensor whose root k is out's root map[k]. */
static void walk(Access *acc, IrExpr *e, const int *map)
{
	if (!e)
		return;
	if (e->kind == EX_REDUCE) { /* a reduction inside: not a pointwise output */
		acc->identity = acc->vec_ok = false;
		return;
	}
	if (e->kind != EX_ACCESS) {
		for (int i = 0; i < e->nargs; i++)
			walk(acc, e->args[i], map);
		return;
	}
	Tensor *x = e->tensor;
	int pos[16];
	if (e->nargs > 16) {
		acc->identity = acc->vec_ok = false;
		return;
	}
	for (int k = 0; k < e->nargs; k++) {
		IrExpr *s = e->args[k];
		pos[k] = s->kind == EX_AXIS && s->axis->root_index >= 0 ? map[s->axis->root_index] : -1;
	}
	/* Inlined tensors and read outputs are recomputed: look through their definitions. */
	bool recomputed = x->def && !tensor_is_reduction(x) &&
			  (x->inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
	if (recomputed)
		walk(acc, x->def, pos);
	else
		note_read(acc, x, pos);
}

static Access analyze(Tensor *o)
{
	Access acc = {o, true, true, dtype_size(o->dtype)};
	int map[16];
	for (int k = 0; k < o->ndim && k < 16; k++)
		map[k] = k;
	if (o->ndim > 16)
		acc.identity = acc.vec_ok = false;
	walk(&acc, o->def, map);
	return acc;
}

/* A name not used in t's domain: base, base2, base3, ... */
static const char *fresh(Arena *a, Tensor *t, const char *base)
{
	const char *n = base;
	for (int k = 2; tensor_find_axis(t, n); k++)
		n = arena_printf(a, "%s%d", base, k);
	return n;
}

/* Merges domain[from .. to] into one axis; returns it. */
static Axis *merge_range(Arena *a, Diag *d, Tensor *t, int from, int to)
{
	while (to > from) {
		Axis *x = t->domain[from], *y = t->domain[from + 1];
		const char *n = fresh(a, t, arena_printf(a, "%s%s", x->name, y->name));
		if (!sched_merge(a, d, t, x, y, n, t->span))
			die("auto_schedule: merge failed");
		to--;
	}
	return t->domain[from];
}

/* The largest power-of-two vector width <= want that the vector axis' extent allows. */
static int vector_width(Tensor *o, Axis *inner, bool merged, int want)
{
	int64_t n;
	IrExpr *last = o->shape[o->ndim - 1];
	for (int v = want; v > 1; v /= 2) {
		if (ir_is_const(inner->extent, &n)) {
			if (n % v == 0)
				return v;
		} else if (last->kind == EX_SIZE || (merged && last->kind == EX_INT && last->ival % v == 0)) {
			return v;
		}
	}
	return 1;
}

static void split(Arena *a, Diag *d, Tensor *t, Axis *x, int64_t f, const char *outer,
		  const char *inner)
{
	if (!sched_split(a, d, t, x, f, fresh(a, t, outer), fresh(a, t, inner), t->span))
		die("auto_schedule: split failed");
}

static bool schedule_output(Arena *a, Diag *d, Tensor *o)
{
	if (!o->def || o->ndim == 0 || tensor_is_reduction(o))
		return true;
	Access acc = analyze(o);
	bool merged = acc.identity || o->ndim == 1;
	Axis *outer = NULL, *x;
	if (merged) {
		x = merge_range(a, d, o, 0, o->ndim - 1);
	} else {
		outer = merge_range(a, d, o, 0, o->ndim - 2);
		x = o->domain[1];
	}
	int vec = acc.vec_ok ? vector_width(o, x, merged, AUTO_VECTOR_BYTES / acc.max_size) : 1;
	Axis *v = NULL;
	const char *base = x->name;
	if (vec > 1) {
		split(a, d, o, x, vec, arena_printf(a, "%so", base), "v");
		v = x->to[1];
		x = x->to[0];
	}
	/* A short constant axis gets fewer threads (a warp at least) and less unrolling, so
	 * small tensors do not launch mostly idle threads. */
	int64_t threads = AUTO_THREADS, unroll = AUTO_UNROLL, n;
	if (ir_is_const(x->extent, &n)) {
		while (threads > 32 && threads / 2 >= n)
			threads /= 2;
		while (unroll > 1 && threads * (unroll / 2) >= n)
			unroll /= 2;
	}
	split(a, d, o, x, threads, arena_printf(a, "%sb", base), "tx");
	Axis *tx = x->to[1];
	x = x->to[0];
	Axis *bx = x, *u = NULL;
	if (unroll > 1) {
		split(a, d, o, x, unroll, "bx", "u");
		bx = x->to[0];
		u = x->to[1];
	} else {
		bx->name = fresh(a, o, "bx");
	}
	if (outer && !(ir_is_const(outer->extent, &n) && n <= AUTO_GRID_YZ)) {
		const char *name = fresh(a, o, arena_printf(a, "%s%s", outer->name, bx->name));
		if (!sched_merge(a, d, o, outer, bx, name, o->span))
			die("auto_schedule: merge failed");
		bx = outer->to[0];
		outer = NULL;
	}
	if (!sched_bind(d, o, bx, PT_BIDX, o->span) || !sched_bind(d, o, tx, PT_TIDX, o->span))
		die("auto_schedule: bind failed");
	if (outer && !sched_bind(d, o, outer, PT_BIDY, o->span))
		die("auto_schedule: bind failed");
	if (u) {
		u->unroll = true;
		u->unroll_span = o->span;
	}
	if (v) {
		v->vectorize = true;
		v->vectorize_span = o->span;
	}
	return true;
}

bool auto_schedule(Arena *a, Diag *d, Fusion *f)
{
	f->auto_scheduled = true;
	bool ok = true;
	for (int i = 0; i < f->noutputs; i++)
		ok &= schedule_output(a, d, f->outputs[i]);
	return ok;
}
