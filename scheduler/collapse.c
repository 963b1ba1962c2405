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
