/* shape.c: sizes at run time: integer expressions evaluated with the size values of a launch,
 * a tensor's dims, and the consistency checks of a fusion's sizes. The reference interpreter,
 * the simulator, the launchers' host code and libfusrt share them.
 */
#include <stdlib.h>

#include "ir/ir.h"

static void set_err(char **err, char *msg)
{
	if (err)
		*err = msg;
	else
		free(msg);
}

static bool add_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
static bool mul_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }

bool ir_eval_i64(IrExpr *e, const int64_t *sizes, int64_t *out)
{
	int64_t a = 0, b = 0;

	if (!e)
		return false;
	switch (e->kind) {
	case EX_INT:
		*out = e->ival;
		return true;
	case EX_SIZE:
		if (!sizes)
			return false;
		*out = sizes[e->size->index];
		return true;
	case EX_CAST:
		return !dtype_is_float(e->dtype) && ir_eval_i64(e->args[0], sizes, out);
	case EX_SELECT:
		if (!ir_eval_i64(e->args[0], sizes, &a))
			return false;
		return ir_eval_i64(e->args[a ? 1 : 2], sizes, out);
	case EX_OP:
		break;
	default:
		return false;
	}
	if (!ir_eval_i64(e->args[0], sizes, &a))
		return false;
	if (op_arity(e->op) == 2 && !ir_eval_i64(e->args[1], sizes, &b))
		return false;
	switch (e->op) {
	case OP_ADD: return !add_ovf(a, b, out);
	case OP_SUB: return !__builtin_sub_overflow(a, b, out);
	case OP_MUL: return !mul_ovf(a, b, out);
	case OP_DIV:
	case OP_MOD: /* no C division by zero, nor INT64_MIN / -1 */
		if (b == 0 || (a == INT64_MIN && b == -1))
			return false;
		*out = e->op == OP_DIV ? a / b : a % b;
		return true;
	case OP_CEILDIV:
		if (b <= 0)
			return false;
		*out = a / b + (a % b > 0);
		return true;
	case OP_XOR: *out = a ^ b; return true;
	case OP_NEG: return !__builtin_sub_overflow((int64_t)0, a, out);
	case OP_MAX: *out = a > b ? a : b; return true;
	case OP_MIN: *out = a < b ? a : b; return true;
	case OP_LT: *out = a < b; return true;
	case OP_LE: *out = a <= b; return true;
	case OP_GT: *out = a > b; return true;
	case OP_GE: *out = a >= b; return true;
	case OP_EQ: *out = a == b; return true;
	case OP_NE: *out = a != b; return true;
	case OP_AND: *out = a && b; return true;
	case OP_OR: *out = a || b; return true;
	case OP_NOT: *out = !a; return true;
	default: return false;
	}
}

int64_t shape_numel(const int64_t *dims, int ndim)
{
	int64_t n = 1;

	for (int d = 0; d < ndim; d++)
		if (dims[d] < 0 || mul_ovf(n, dims[d], &n))
			return -1;
	return n;
}

bool tensor_dims(Tensor *t, const int64_t *sizes, int64_t *dims, char **err)
{
	if (t->ndim > IR_MAX_DIMS) {
		set_err(err, xprintf("tensor %s has %d dimensions (at most %d supported)", t->name,
				     t->ndim, IR_MAX_DIMS));
		return false;
	}
	for (int d = 0; d < t->ndim; d++) {
		if (!ir_eval_i64(t->shape[d], sizes, &dims[d])) {
			set_err(err, xprintf("cannot evaluate dimension %d of tensor %s", d, t->name));
			return false;
		}
		if (dims[d] < 0) {
			set_err(err, xprintf("dimension %d of tensor %s is negative (%lld)", d, t->name,
					     (long long)dims[d]));
			return false;
		}
	}
	return true;
}

/* The extent of root axis `ax` of t, given t's dims. */
static bool axis_extent(Tensor *t, Axis *ax, const int64_t *dims, const int64_t *sizes,
			int64_t *out)
{
	if (ax->root_index < t->ndim) {
		*out = dims[ax->root_index];
		return true;
	}
	return ir_eval_i64(ax->extent, sizes, out) && *out >= 0;
}

typedef struct CheckCtx {
	Tensor *t;
	const int64_t *dims;
	const int64_t *sizes;
	char *err;
} CheckCtx;

static void check_expr(CheckCtx *c, IrExpr *e)
{
	if (!e || c->err)
		return;
	for (int i = 0; i < e->nargs; i++)
		check_expr(c, e->args[i]);
	if (e->kind != EX_ACCESS)
		return;
	Tensor *x = e->tensor;
	int64_t xd[IR_MAX_DIMS], ext;
	char *why = NULL;
	if (!tensor_dims(x, c->sizes, xd, &why)) {
		c->err = why;
		return;
	}
	for (int d = 0; d < e->nargs && d < x->ndim; d++) {
		IrExpr *s = e->args[d];
		/* An rfactor partial's indices are rebuilt from the leaves of t's splits and merges:
		 * past a non-divisible split they exceed the dimension (`split(j, 2); merge` reads
		 * x[i, m] with m < 6 for j < 5), under the in-range select of its body. Its
		 * reduction's own reads were consistent; only constant indices are checked. */
		if (s->kind == EX_AXIS && !c->t->sched.rfactor_of) {
			if (!axis_extent(c->t, s->axis, c->dims, c->sizes, &ext)) {
				c->err = xprintf("cannot evaluate the extent of index %s of %s",
						 s->axis->name, c->t->name);
				return;
			}
			if (ext != xd[d]) {
				c->err = xprintf("%s reads %s with index %s of extent %lld along its "
						 "dimension %d of extent %lld", c->t->name, x->name,
						 s->axis->name, (long long)ext, d, (long long)xd[d]);
				return;
			}
		} else if (s->kind == EX_INT && (s->ival < 0 || s->ival >= xd[d])) {
			c->err = xprintf("%s reads %s at constant index %lld along its dimension %d of "
					 "extent %lld", c->t->name, x->name, (long long)s->ival, d,
					 (long long)xd[d]);
			return;
		}
	}
}

bool fusion_check_sizes(Fusion *f, const int64_t *sizes, char **err)
{
	for (int i = 0; i < f->nsizes; i++) {
		if (sizes[i] < 0) {
			set_err(err, xprintf("size %s is negative (%lld)", f->sizes[i]->name,
					     (long long)sizes[i]));
			return false;
		}
	}
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		int64_t dims[IR_MAX_DIMS];
		if (!tensor_dims(t, sizes, dims, err))
			return false;
		/* a segment's sizes come from its plan, never from a user: its padded operands'
		 * reads cover part of a dimension (scheduler/segment.c) */
		if (!t->def || f->segment_of)
			continue;
		CheckCtx c = {t, dims, sizes, NULL};
		check_expr(&c, t->def);
		if (c.err) {
			set_err(err, c.err);
			return false;
		}
	}
	return true;
}
