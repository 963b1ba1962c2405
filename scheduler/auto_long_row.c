/* auto_long_row.c: the automatic schedule of a row reduction over rows too long for one
 * block (docs/auto_schedule.md, "Segmentation"): the reduction output of a fusion whose row
 * length is a size symbol marked long (SizeSym.above, set for the copy of a fusion that the
 * launcher runs after the size variant for shorter rows), or a collapsed column's product
 * marked long (SizeProd.above: `s[b] = sum(i, j: x[b, i, j])`, merged into one column
 * first, "Collapsed axes"). One block per row would leave most
 * of the GPU idle when rows are few (64 rows of 2^20: 64 blocks); instead each row is spread
 * over LONG_ROW_BLOCKS blocks on blockIdx.y in a grid-stride loop and finished by a grid
 * reduction:
 *
 *   s.merge(rows...) -> row;          // blockIdx.x
 *   s.split(j, vec) -> (jo, jv);      // 16-byte vectors
 *   s.split(jo, 256) -> (jq, tx);     // 256 threads over consecutive vectors
 *   s.split(jq, 16) -> (jb, by);      // 16 blocks per row, interleaved
 *   s.split(jb, 4) -> (jr, u);        // 4 vectors in flight per thread
 *   x_reg = x.cache_after(local);  x_reg.compute_at(s, tx);  x_reg.vectorize(jv);
 *
 * The inputs read as x[rows..., j] by the reduction alone are loaded one vector per step
 * through a register copy (a reduction axis is not vectorized), as the whole-tensor schedule
 * does (auto_outer.c); the others element by element.
 */
#include <string.h>

#include "scheduler/auto_plan.h"

enum {
	LONG_ROW_THREADS = 256,
	LONG_ROW_BLOCKS = 16,  /* blocks per row: 64 rows x 16 = 1024 blocks, 8 per H200 SM */
	LONG_ROW_UNROLL = 4,
	LONG_ROW_VECTOR_BYTES = 16,
};

/* Are all of e's reads of x (through recomputed tensors, map: the reader's roots as o's
 * roots) x[o's roots in order]? */
static bool identity_reads(IrExpr *e, Tensor *x, const int *map, int depth)
{
	if (!e)
		return true;
	if (depth > 64)
		return false;
	for (int i = 0; i < e->nargs && e->kind != EX_ACCESS; i++)
		if (!identity_reads(e->args[i], x, map, depth))
			return false;
	if (e->kind != EX_ACCESS || e->nargs > 16)
		return e->kind != EX_ACCESS || e->tensor != x;
	int pos[16];
	for (int k = 0; k < e->nargs; k++) {
		IrExpr *s = e->args[k];
		pos[k] = s->kind == EX_AXIS && s->axis->root_index >= 0 ? map[s->axis->root_index] : -1;
	}
	if (e->tensor == x) {
		for (int k = 0; k < e->nargs; k++)
			if (pos[k] != k)
				return false;
		return true;
	}
	Tensor *t = e->tensor;
	return !auto_recomputed(t) || identity_reads(t->def, x, pos, depth + 1);
}

/* Does e read x (through recomputed tensors)? */
static bool reads(IrExpr *e, Tensor *x, int depth)
{
	if (!e || depth > 64)
		return e != NULL;
	for (int i = 0; i < e->nargs; i++)
		if (reads(e->args[i], x, depth))
			return true;
	if (e->kind != EX_ACCESS)
		return false;
	Tensor *t = e->tensor;
	return t == x || (t->def && !tensor_is_reduction(t) &&
			  (t->sched.inlined || t->kind == TK_OUTPUT || t->kind == TK_SCALAR) &&
			  reads(t->def, x, depth + 1));
}

bool auto_long_row(Plan *p, Tensor *o)
{
	Fusion *f = p->f;
	if (f->noutputs != 1 || o->kind != TK_OUTPUT || !segment_long_row(o) || o->nroot > 16 ||
	    read_by_other(f, o))
		return false;
	/* a collapsed column (several reduced roots) is one axis first */
	const char *t = o->name, *row = o->root[0]->name;
	const char *j = auto_merge_roots(p, o, o->ndim, o->nroot, "col");
	for (int q = 1; q < o->ndim; q++) {
		const char *m = fresh_axis(p, t, "row");
		d_merge(p, t, row, o->root[q]->name, m);
		row = m;
	}
	/* the inputs to load in vectors: read as x[rows..., j] only, by o only */
	Tensor *ins[16];
	int nins = 0, size = 0, map[16];
	for (int k = 0; k < o->nroot; k++)
		map[k] = k;
	for (int i = 0; i < f->ninputs; i++) {
		Tensor *x = f->inputs[i];
		if (!reads(o->def, x, 0))
			continue;
		size = dtype_size(x->dtype) > size ? dtype_size(x->dtype) : size;
		if (x->ndim == o->nroot && nins < 16 && identity_reads(o->def->args[0], x, map, 0))
			ins[nins++] = x;
	}
	for (int i = 0; i < nins; i++) /* another stored tensor reading x would read the copy */
		for (int k = 0; k < f->ntensors; k++) {
			Tensor *u = f->tensors[k];
			if (u != o && u->def && !u->sched.inlined && u->kind != TK_SCALAR && reads(u->def, ins[i], 0))
				nins = 0;
		}
	int64_t vec = p->level == AUTO_TUNED && nins && size ? LONG_ROW_VECTOR_BYTES / size : 1;
	const char *jv = NULL, *x = j;
	if (vec > 1) {
		const char *jo = fresh_axis(p, t, "jo");
		jv = fresh_axis(p, t, "jv");
		d_split(p, t, x, vec, jo, jv);
		x = jo;
	}
	const char *jq = fresh_axis(p, t, "jq"), *tx = fresh_axis(p, t, "tx");
	d_split(p, t, x, LONG_ROW_THREADS, jq, tx);
	const char *jb = fresh_axis(p, t, "jb"), *by = fresh_axis(p, t, "by");
	d_split(p, t, jq, LONG_ROW_BLOCKS, jb, by);
	const char *jr = fresh_axis(p, t, "jr"), *u = fresh_axis(p, t, "u");
	d_split(p, t, jb, LONG_ROW_UNROLL, jr, u);
	d_bind(p, t, row, "blockIdx.x");
	d_bind(p, t, by, "blockIdx.y");
	d_bind(p, t, tx, "threadIdx.x");
	d_verb1(p, t, "unroll", u);
	if (!jv)
		return true;
	d_verb1(p, t, "unroll", jv);
	const char *shared[] = {row, jr, u, by, tx}; /* the domain's order */
	for (int i = 0; i < nins; i++) {
		const char *c = d_cache_after(p, ins[i], "local");
		d_compute_at(p, c, t, tx, shared, 5);
		d_verb1(p, c, "vectorize", jv);
	}
	return true;
}
