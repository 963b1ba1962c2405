/* fusion.c: the IR tables (generated from the X-macros of ir.h), lookups on the fusion IR and
 * its text printer (`fusc --emit=ir`, golden .ir files).
 *
 * The printer is deterministic: it walks the fusion in declaration/definition order and prints
 * only names, dtypes and expressions, never pointers, so the same input gives the same text. */
#include <string.h>

#include "ir/ir.h"

/* ---- dtypes --------------------------------------------------------------------------- */

static const struct {
	const char *name, *ctype;
	int size;
	bool is_float;
} dtype_table[] = {
#define X(e, n, c, s, f) {n, c, s, f},
	DTYPES(X)
#undef X
};

static void check_dtype(DType t)
{
	if ((unsigned)t >= DT_COUNT)
		die("bad dtype %d", (int)t);
}

const char *dtype_name(DType t) { check_dtype(t); return dtype_table[t].name; }
const char *dtype_ctype(DType t) { check_dtype(t); return dtype_table[t].ctype; }
int dtype_size(DType t) { check_dtype(t); return dtype_table[t].size; }

bool dtype_from_name(const char *s, DType *out)
{
	for (int i = 0; i < DT_COUNT; i++) {
		if (strcmp(dtype_table[i].name, s) == 0) {
			*out = (DType)i;
			return true;
		}
	}
	return false;
}

DType dtype_compute(DType t)
{
	return t == DT_F16 || t == DT_BF16 ? DT_F32 : t;
}

DType dtype_accum(ReduceOp red, DType out, DType body)
{
	DType b = red == RED_SUM && body == DT_BOOL ? DT_I64 : body;
	return dtype_compute(dtype_promote(b, out));
}

/* Promotion rank: f64 > f32 > bf16/f16 > i64 > i32 > bool. */
static int dtype_rank(DType t)
{
	switch (t) {
	case DT_BOOL: return 0;
	case DT_I32: return 1;
	case DT_I64: return 2;
	case DT_F16: case DT_BF16: return 3;
	case DT_F32: return 4;
	case DT_F64: return 5;
	default: die("bad dtype %d", (int)t);
	}
}

DType dtype_promote(DType a, DType b)
{
	if (a == b)
		return a;
	if ((a == DT_F16 && b == DT_BF16) || (a == DT_BF16 && b == DT_F16))
		return DT_F32;
	return dtype_rank(a) >= dtype_rank(b) ? a : b;
}

/* ---- operators ------------------------------------------------------------------------ */

static const struct {
	const char *name;
	int arity;
	char kind;
} op_table[] = {
#define X(e, n, a, k) {n, a, k},
	IR_OPS(X)
#undef X
};

static void check_op(IrOp op)
{
	if ((unsigned)op >= OP_COUNT)
		die("bad op %d", (int)op);
}

const char *op_name(IrOp op) { check_op(op); return op_table[op].name; }
int op_arity(IrOp op) { check_op(op); return op_table[op].arity; }

/* The user-visible built-ins are exactly the float functions ('f') and min/max-like ('m')
 * ops; ceildiv is index arithmetic only, and where() and casts are handled by sema. */
bool op_builtin(const char *name, int nargs, IrOp *out)
{
	for (int i = 0; i < OP_COUNT; i++) {
		if (op_table[i].kind != 'f' && op_table[i].kind != 'm')
			continue;
		/* the first letter first: sema asks for every name it declares */
		if (op_table[i].name[0] == name[0] && strcmp(op_table[i].name, name) == 0 &&
		    op_table[i].arity == nargs) {
			*out = (IrOp)i;
			return true;
		}
	}
	return false;
}

/* ---- parallel types and memory -------------------------------------------------------- */

static const char *par_names[] = {
#define X(e, n) n,
	PAR_TYPES(X)
#undef X
};

const char *par_name(ParType p)
{
	if ((unsigned)p >= PT_COUNT)
		die("bad parallel type %d", (int)p);
	return par_names[p];
}

bool par_from_name(const char *s, ParType *out)
{
	for (int i = 0; i < PT_COUNT; i++) {
		if (strcmp(par_names[i], s) == 0) {
			*out = (ParType)i;
			return true;
		}
	}
	return false;
}

const char *mem_name(MemType m)
{
	switch (m) {
	case MEM_GLOBAL: return "global";
	case MEM_SHARED: return "shared";
	case MEM_LOCAL: return "local";
	}
	die("bad memory type %d", (int)m);
}

/* ---- lookups -------------------------------------------------------------------------- */

Tensor *fusion_find_tensor(Fusion *f, const char *name)
{
	for (int i = 0; i < f->ntensors; i++)
		if (strcmp(f->tensors[i]->name, name) == 0)
			return f->tensors[i];
	return NULL;
}

Axis *tensor_find_axis(Tensor *t, const char *name)
{
	for (int i = 0; i < t->ndomain; i++)
		if (strcmp(t->domain[i]->name, name) == 0)
			return t->domain[i];
	return NULL;
}

int tensor_axis_pos(Tensor *t, Axis *ax)
{
	for (int i = 0; i < t->ndomain; i++)
		if (t->domain[i] == ax)
			return i;
	return -1;
}

bool tensor_is_reduction(Tensor *t)
{
	return t->def && t->def->kind == EX_REDUCE;
}

IrExpr *axis_launch_extent(Arena *a, Axis *ax)
{
	int64_t c;
	if (!ax->reduction)
		return ax->extent;
	if (ir_is_const(ax->extent, &c))
		return c >= 1 ? ax->extent : ir_int(a, 1);
	return ir_op(a, OP_MAX, DT_I64, ax->extent, ir_int(a, 1));
}

/* ---- printer -------------------------------------------------------------------------- */

static const char *tensor_kind_name(TensorKind k)
{
	switch (k) {
	case TK_INPUT: return "input";
	case TK_OUTPUT: return "output";
	case TK_INTERMEDIATE: return "intermediate";
	case TK_SCALAR: return "scalar";
	}
	die("bad tensor kind %d", (int)k);
}

/* `f32[N, 4]`, or `f32` for 0-d */
static void print_type(Buf *out, DType dt, IrExpr **shape, int ndim)
{
	buf_puts(out, dtype_name(dt));
	if (ndim == 0)
		return;
	buf_puts(out, "[");
	for (int i = 0; i < ndim; i++) {
		if (i)
			buf_puts(out, ", ");
		ir_print_expr(shape[i], out);
	}
	buf_puts(out, "]");
}

void ir_print_signature(Fusion *f, Buf *out)
{
	buf_printf(out, "fusion %s(", f->name);
	bool first = true;
	for (int i = 0; i < f->nsig; i++) {
		struct SigEntry *e = &f->sig[i];
		if (e->kind == 'o')
			continue;
		buf_puts(out, first ? "" : ", ");
		first = false;
		if (e->kind == 'p') {
			buf_printf(out, "%s: %s", e->param->name, dtype_name(e->param->dtype));
		} else {
			buf_printf(out, "%s: ", e->tensor->name);
			print_type(out, e->tensor->dtype, e->tensor->shape, e->tensor->ndim);
		}
	}
	buf_puts(out, ") -> (");
	for (int i = 0; i < f->noutputs; i++) {
		Tensor *t = f->outputs[i];
		buf_printf(out, "%s%s: ", i ? ", " : "", t->name);
		print_type(out, t->dtype, t->shape, t->ndim);
	}
	buf_puts(out, ")");
}

static void print_signature(Fusion *f, Buf *out)
{
	ir_print_signature(f, out);
	buf_puts(out, "\n");
	if (f->nsizes) {
		buf_puts(out, "  sizes:");
		for (int i = 0; i < f->nsizes; i++)
			buf_printf(out, " %s", f->sizes[i]->name);
		buf_puts(out, "\n");
	}
	if (f->auto_fallback)
		buf_printf(out, "  schedule: auto, %s (fallback)\n", f->auto_fallback);
	else
		buf_printf(out, "  schedule: %s\n", f->auto_scheduled ? "auto" : "user");
	if (f->raster_rows)
		buf_printf(out, "  block order: raster(%s.%s, %s.%s, %lld)\n", f->raster_rows->owner->name,
			   f->raster_rows->name, f->raster_cols->owner->name, f->raster_cols->name,
			   (long long)f->raster_group);
}

/* `def z[i, j] = EXPR` */
static void print_def(Tensor *t, Buf *out)
{
	buf_printf(out, "    def %s", t->name);
	if (t->ndim > 0) {
		buf_puts(out, "[");
		for (int i = 0; i < t->ndim; i++)
			buf_printf(out, "%s%s", i ? ", " : "", t->root[i]->name);
		buf_puts(out, "]");
	}
	buf_puts(out, " = ");
	ir_print_expr(t->def, out);
	buf_puts(out, "\n");
}

/* One leaf axis: `name: extent [reduction] [binding] [unroll] [vectorize] (derivation)` */
static void print_axis(Axis *ax, Buf *out)
{
	buf_printf(out, "      %s: ", ax->name);
	ir_print_expr(ax->extent, out);
	if (ax->reduction)
		buf_puts(out, " reduction");
	if (ax->par != PT_SERIAL)
		buf_printf(out, " %s", par_name(ax->par));
	if (ax->unroll)
		buf_puts(out, " unroll");
	if (ax->vectorize)
		buf_puts(out, " vectorize");
	if (ax->ca_alias)
		buf_printf(out, " = %s.%s", ax->ca_alias->owner ? ax->ca_alias->owner->name : "?",
			   ax->ca_alias->name);
	switch (ax->kind) {
	case AX_ROOT:
		if (ax->root_index < 0)
			buf_puts(out, " (alias)"); /* compute_at: a loop of the consumer only */
		else
			buf_printf(out, " (root %d)", ax->root_index);
		break;
	case AX_SPLIT_OUTER:
		buf_printf(out, " (split of %s by %lld, outer)", ax->from[0]->name,
			   (long long)ax->factor);
		break;
	case AX_SPLIT_INNER:
		buf_printf(out, " (split of %s by %lld, inner)", ax->from[0]->name,
			   (long long)ax->factor);
		break;
	case AX_MERGE:
		buf_printf(out, " (merge of %s and %s)", ax->from[0]->name, ax->from[1]->name);
		break;
	}
	buf_puts(out, "\n");
}

static void print_tensor(Tensor *t, Buf *out)
{
	buf_printf(out, "  tensor %s: ", t->name);
	print_type(out, t->dtype, t->shape, t->ndim);
	buf_printf(out, " %s %s", tensor_kind_name(t->kind), mem_name(t->sched.mem));
	if (t->lifted_from)
		buf_printf(out, " lifted(%s)", t->lifted_from->name);
	if (t->sched.inlined)
		buf_puts(out, " inline");
	if (t->sched.ca_tensor)
		buf_printf(out, " compute_at(%s, %d)", t->sched.ca_tensor->name, t->sched.ca_pos);
	if (t->sched.cache_of)
		buf_printf(out, " %s(%s)", t->sched.cache_before ? "cache_before" : "cache_after",
			   t->sched.cache_of->name);
	if (t->sched.evict_first)
		buf_puts(out, " evict_first");
	if (t->sched.cp_async)
		buf_puts(out, t->sched.cp_async_cg ? " cp_async(cg)" : " cp_async");
	if (t->sched.stages)
		buf_printf(out, " stages(%d, %d)", t->sched.stages, t->sched.prefetch);
	if (t->sched.pad && t->sched.pad_every)
		buf_printf(out, " pad(%d, %lld)", t->sched.pad, (long long)t->sched.pad_every);
	else if (t->sched.pad)
		buf_printf(out, " pad(%d)", t->sched.pad);
	if (t->sched.swizzle && t->sched.swizzle_row)
		buf_printf(out, " swizzle(%dB, %lld)", t->sched.swizzle, (long long)t->sched.swizzle_row);
	else if (t->sched.swizzle)
		buf_printf(out, " swizzle(%dB)", t->sched.swizzle);
	if (t->sched.welford_sum)
		buf_printf(out, " welford(%s)", t->sched.welford_sum->name);
	if (t->sched.online_max)
		buf_printf(out, " online(%s)", t->sched.online_max->name);
	if (t->sched.mma)
		buf_printf(out, " mma(%s: %s, %s)", t->sched.mma->instr->name, t->sched.mma->a->name,
			   t->sched.mma->b->name);
	if (t->sched.fragment_span.file)
		buf_puts(out, " fragment");
	if (t->sched.zero_fill)
		buf_puts(out, " zero_fill");
	buf_puts(out, "\n");
	if (!t->def)
		return;
	print_def(t, out);
	buf_puts(out, "    domain:\n");
	for (int i = 0; i < t->ndomain; i++)
		print_axis(t->domain[i], out);
}

/* A segmented fusion: its segments, in launch order, and the workspace between them. */
static void print_segments(Fusion *f, Buf *out)
{
	buf_puts(out, "  segments (run in order):");
	for (int i = 0; i < f->segments.len; i++)
		buf_printf(out, " %s", VEC_AT(f->segments, Segment, i)->fusion->name);
	buf_puts(out, "\n");
	if (!f->seg_buffers.len)
		return;
	buf_puts(out, "  workspace:");
	for (int i = 0; i < f->seg_buffers.len; i++) {
		Tensor *t = VEC_AT(f->seg_buffers, Tensor, i);
		buf_printf(out, "%s %s: %s[", i ? "," : "", t->name, dtype_name(t->dtype));
		for (int k = 0; k < t->ndim; k++) {
			buf_puts(out, k ? ", " : "");
			ir_print_expr(t->shape[k], out);
		}
		buf_puts(out, t->ndim ? "]" : "1]");
	}
	buf_puts(out, "\n");
}

void ir_print_fusion(Fusion *f, Buf *out)
{
	print_signature(f, out);
	if (f->segments.len)
		print_segments(f, out);
	for (int i = 0; i < f->ntensors; i++)
		print_tensor(f->tensors[i], out);
	for (int i = 0; i < f->segments.len; i++) {
		buf_puts(out, "\n");
		ir_print_fusion(VEC_AT(f->segments, Segment, i)->fusion, out);
	}
	/* a size variant that is a plan of its own (a total's row partials, scheduler/segment.c):
	 * its rewritten statements and segments (a kernel variant is the same fusion) */
	for (int v = 0; v < f->variants.len; v++) {
		Fusion *g = VEC_AT(f->variants, Fusion, v);
		if (!g->segments.len)
			continue;
		buf_puts(out, "\nsize variant, a plan of its own, when");
		for (int k = 0; k < g->nsizes; k++)
			if (g->sizes[k]->bound > 0)
				buf_printf(out, " %s <= %lld", g->sizes[k]->name, (long long)g->sizes[k]->bound);
		buf_puts(out, ":\n");
		ir_print_fusion(g, out);
	}
}

void tensor_placement(Tensor *t, Tensor **owner, int *pos)
{
	Tensor *o = t->sched.ca_tensor;
	int p = t->sched.ca_pos;
	while (p >= 0 && p < o->ndomain && o->domain[p]->ca_alias) {
		Axis *al = o->domain[p]->ca_alias;
		o = al->owner;
		p = tensor_axis_pos(o, al);
	}
	*owner = o;
	*pos = p;
}

TensorSched tensor_sched_new(MemType mem)
{
	TensorSched s = {.mem = mem};
	return s;
}

Tensor *tensor_new(Arena *a, const char *name, TensorKind kind, DType dt, MemType mem, Span at)
{
	Tensor *t = NEW(a, Tensor);
	t->name = name;
	t->kind = kind;
	t->dtype = dt;
	t->sched = tensor_sched_new(mem);
	t->span = at;
	return t;
}

Tensor *tensor_buffer(Arena *a, const char *name, DType dt, MemType mem, IrExpr *n, Span at)
{
	Tensor *t = tensor_new(a, name, TK_INTERMEDIATE, dt, mem, at);
	t->index = -1;
	t->param_index = -1;
	t->ndim = 1;
	t->shape = arena_alloc(a, sizeof(IrExpr *));
	t->shape[0] = n;
	return t;
}

const char *fusion_segment_name(Arena *a, Fusion *f, const char *name, int i)
{
	return arena_printf(a, "%s_seg%d%s", name, i, kir_bound_suffix(a, f));
}

void fusion_rename(Arena *a, Fusion *f, const char *name)
{
	f->name = name;
	for (int i = 0; i < f->segments.len; i++)
		fusion_rename(a, VEC_AT(f->segments, Segment, i)->fusion,
			      fusion_segment_name(a, f, name, i)); /* with its own variants */
	for (int v = 0; v < f->variants.len; v++) /* its size variants are the same fusion */
		fusion_rename(a, VEC_AT(f->variants, Fusion, v), name);
	if (f->pad_plan) /* so is its padded plan */
		fusion_rename(a, f->pad_plan, name);
}
