/* collapse.c: collapsed axes (docs/auto_schedule.md, "Collapsed axes"). Adjacent indices
 * that every read of an output's definition uses only together, as adjacent subscripts in
 * the same order over dimensions of their extents, address one contiguous run of each
 * tensor (row major: the flattened offset of such a run is the merged index), so a schedule
 * may treat them as one axis of the product extent: `s.merge(i, j) -> r` first, then the
 * class's directives on r. The row analysis of auto_schedule.c applies the same rule to a
 * row group's column (its roles); auto_outer.c asks auto_collapsible for the reduced
 * indices of an outer or middle-axis reduction, and merges them with auto_merge_roots. */
#include "scheduler/auto_plan.h"

typedef struct Run {
	int from, to; /* o's roots [from, to) */
	Tensor *o;
	bool ok;
} Run;

static bool check_read(void *ctx, Tensor *x, const int *pos)
{
	Run *r = ctx;
	int n = r->to - r->from;
	for (int k = 0; k < x->ndim && r->ok; k++) {
		if (pos[k] < r->from || pos[k] >= r->to)
			continue;
		/* the run starts here, with its first index, and holds all of them in order */
		r->ok = pos[k] == r->from && k + n <= x->ndim;
		for (int q = 0; q < n && r->ok; q++)
			r->ok = pos[k + q] == r->from + q &&
				dims_equal(x->shape[k + q], r->o->root[r->from + q]->extent);
		k += n - 1;
	}
	return r->ok;
}

bool auto_collapsible(Tensor *o, int from, int to)
{
	if (to - from <= 1)
		return to - from == 1;
	if (!o->def || o->nroot > AUTO_MAX_RANK)
		return false;
	Run r = {from, to, o, true};
	int map[AUTO_MAX_RANK];
	for (int k = 0; k < o->nroot; k++)
		map[k] = k;
	IrExpr *body = tensor_is_reduction(o) ? o->def->args[0] : o->def;
	return auto_walk_reads(body, map, check_read, &r) && r.ok;
}

const char *auto_merge_roots(Plan *p, Tensor *o, int from, int to, const char *base)
{
	const char *x = o->root[from]->name;
	for (int q = from + 1; q < to; q++) {
		const char *m = fresh_axis(p, o->name, base);
		d_merge(p, o->name, x, o->root[q]->name, m);
		x = m;
	}
	return x;
}

/* ---- the row length of a collapsed column: size variants and long rows -------------------- */

SizeSym *collapse_bound(Arena *a, Fusion *g, uint64_t of, int64_t bound, int64_t above)
{
	SizeSym *one = NULL;
	SizeProd *p = NULL; /* the product's bound, if it has one already */
	int n = 0;
	for (int i = 0; i < g->nsizes && i < 64; i++)
		if (of >> i & 1) {
			one = g->sizes[i];
			n++;
			if (one->prod && one->prod->of == of)
				p = one->prod;
		}
	if (n == 1) {
		one->bound = bound;
		one->above = above;
		return one;
	}
	if (!p)
		p = NEW(a, SizeProd);
	*p = (SizeProd){of, bound, above};
	for (int i = 0; i < g->nsizes && i < 64; i++)
		if (of >> i & 1)
			g->sizes[i]->prod = p;
	return one;
}

/* Is the product of extents ext[0..n) (constants and size symbols) marked long: its one
 * symbol (SizeSym.above), or all the symbols of one SizeProd with `above`? */
static bool marked_long(IrExpr **ext, int n)
{
	uint64_t of = 0;
	int64_t unit = 1;
	SizeSym *z = NULL;
	for (int i = 0; i < n; i++)
		if (!ir_size_product(ext[i], &unit, &of, &z))
			return false;
	if (!z)
		return false;
	if (z->prod && z->prod->above > 0 && z->prod->of == of)
		return true;
	return (of & (of - 1)) == 0 && z->above > 0;
}

bool collapse_long_row(Tensor *r)
{
	if (!tensor_is_reduction(r) || r->ndim < 1 || r->nroot <= r->ndim ||
	    r->nroot > AUTO_MAX_RANK || !auto_collapsible(r, r->ndim, r->nroot))
		return false;
	IrExpr *ext[AUTO_MAX_RANK];
	for (int q = r->ndim; q < r->nroot; q++)
		ext[q - r->ndim] = r->root[q]->extent;
	return marked_long(ext, r->nroot - r->ndim);
}

void collapse_bound_segment(Arena *a, Fusion *f, Fusion *g, const int *sizes)
{
	SizeProd *p = NULL;
	for (int k = 0; k < f->nsizes && !p; k++)
		p = f->sizes[k]->prod;
	if (!p)
		return;
	uint64_t of = 0, seen = 0;
	for (int i = 0; i < g->nsizes && i < 64; i++)
		if (sizes[i] >= 0 && sizes[i] < 64 && (p->of >> sizes[i] & 1)) {
			of |= 1ull << i;
			seen |= 1ull << sizes[i];
		}
	if (seen == p->of)
		collapse_bound(a, g, of, p->bound, p->above);
}
