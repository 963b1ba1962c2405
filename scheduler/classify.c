/* classify.c: the class of each output of a fusion, which picks its automatic schedule
 * (docs/auto_schedule.md, "Classes"), and the walk over the reads of an output's definition
 * that the class files share.
 *
 * auto_classify names one output's class; schedule_tuned (auto_schedule.c) switches on it:
 *
 *   matmul      a matrix product (batched, transposed operands, a pointwise epilogue) as
 *               the fusion's one output (auto_matmul.c: tensor cores or FMA tiles)
 *   pointwise   no reduction, every read in the output's own index order and shape
 *   broadcast   no reduction, some read not (a broadcast, a constant subscript, a transpose
 *               that cannot be staged)
 *   transpose   no reduction, an input read with the innermost index on another dimension
 *               (auto_transpose.c: shared-memory tiles)
 *   rows        a row group: inner reductions and the normalizations that read them (a
 *               column may be several adjacent indices: collapse.c)
 *   outer       a reduction over the outermost index (or adjacent outermost indices that
 *               collapse) into the one kept index (auto_outer.c)
 *   middle      the same with more kept indices (a middle-axis reduction)
 *   whole       a 0-d reduction over every index (auto_outer.c)
 *   general     anything else: a correct, untuned schedule (auto_schedule.c)
 *
 * The class only names the schedule; each class file still refuses what it cannot do, and
 * whatever is not placed falls to the general schedule (and the fallback chain after it). */
#include "scheduler/auto_plan.h"

enum { MAX_DEPTH = 64 };

static const char *const class_names[AC_COUNT] = {
	"matmul", "pointwise", "broadcast", "transpose", "rows", "outer", "middle", "whole", "general",
};

const char *auto_class_name(AutoClass c)
{
	return class_names[c];
}

bool auto_recomputed(Tensor *x)
{
	return x->def && !tensor_is_reduction(x) &&
	       (x->sched.inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
}

static bool walk(IrExpr *e, const int *map, AutoReadFn fn, void *ctx, int depth)
{
	if (!e)
		return true;
	if (e->kind == EX_REDUCE || depth > MAX_DEPTH)
		return false;
	if (e->kind != EX_ACCESS) {
		for (int i = 0; i < e->nargs; i++)
			if (!walk(e->args[i], map, fn, ctx, depth))
				return false;
		return true;
	}
	if (e->nargs > AUTO_MAX_RANK)
		return false;
	Tensor *x = e->tensor;
	int pos[AUTO_MAX_RANK];
	for (int k = 0; k < e->nargs; k++) {
		IrExpr *s = e->args[k];
		pos[k] = s->kind == EX_AXIS && s->axis->root_index >= 0 ? map[s->axis->root_index] : -1;
	}
	if (auto_recomputed(x))
		return walk(x->def, pos, fn, ctx, depth + 1);
	return fn(ctx, x, pos);
}

bool auto_walk_reads(IrExpr *e, const int *map, AutoReadFn fn, void *ctx)
{
	return walk(e, map, fn, ctx, 0);
}

unsigned auto_reads_reductions(IrExpr *e, int depth)
{
	if (!e || depth > MAX_DEPTH)
		return 0;
	unsigned bits = 0;
	if (e->kind == EX_ACCESS) {
		Tensor *t = e->tensor;
		if (tensor_is_reduction(t))
			return 1u | (t->ndim == 0 ? 2u : 4u);
		if (t->def && (t->sched.inlined || t->kind == TK_SCALAR))
			bits |= auto_reads_reductions(t->def, depth + 1);
	}
	for (int i = 0; i < e->nargs; i++)
		bits |= auto_reads_reductions(e->args[i], depth);
	return bits;
}

/* A read of x whose subscript k is out's root pos[k] (-1: other). */
static bool note_read(void *ctx, Tensor *x, const int *pos)
{
	AutoAccess *acc = ctx;
	Tensor *o = acc->out;
	if (dtype_size(x->dtype) > acc->max_size)
		acc->max_size = dtype_size(x->dtype);
	/* No subscript follows the output's indices (`m[0]`: a 0-d value a segment passes on as
	 * a 1-element tensor, docs/auto_schedule.md "Segmentation"): one element for every
	 * element of the output, as a 0-d read. */
	bool fixed = true;
	for (int k = 0; k < x->ndim; k++)
		fixed = fixed && pos[k] < 0;
	if (fixed)
		return true;
	if (x->ndim != o->ndim && x->ndim != 0) /* a 0-d read is the same for every element */
		acc->identity = false;
	for (int k = 0; k < x->ndim; k++) {
		if (pos[k] != k || k >= o->ndim || !dims_equal(x->shape[k], o->shape[k]))
			acc->identity = false;
		if (pos[k] == o->ndim - 1 && k != x->ndim - 1)
			acc->vec_ok = false;
	}
	return true;
}

AutoAccess auto_access(Tensor *o)
{
	AutoAccess acc = {o, true, true, dtype_size(o->dtype)};
	int map[AUTO_MAX_RANK];
	for (int k = 0; k < o->ndim && k < AUTO_MAX_RANK; k++)
		map[k] = k;
	if (o->ndim > AUTO_MAX_RANK || !auto_walk_reads(o->def, map, note_read, &acc))
		acc.identity = acc.vec_ok = false;
	return acc;
}

AutoClass auto_classify(Fusion *f, Tensor *o, bool row_group)
{
	if (!o->def)
		return AC_GENERAL;
	AutoMatmul m;
	if (auto_matmul_classify(f, o, &m))
		return AC_MATMUL;
	if (row_group)
		return AC_ROWS;
	AutoClass c = auto_outer_class(f, o);
	if (c != AC_GENERAL || tensor_is_reduction(o) || auto_reads_reductions(o->def, 0))
		return c;
	AutoTranspose t;
	if (auto_transpose_classify(f, o, &t))
		return AC_TRANSPOSE;
	return auto_access(o).identity ? AC_POINTWISE : AC_BROADCAST;
}
