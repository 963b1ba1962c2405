/* reference.c: the reference interpreter (interp.h): a fusion's algorithm on the CPU.
 *
 * Every defined tensor is materialized in a buffer of Vals (a double for floating dtypes, an
 * int64 for integers and bool) holding values already rounded to the tensor's dtype. Tensors
 * are computed on demand (a tensor first computes the tensors its definition reads), so the
 * order of Fusion.tensors does not matter and schedule-made copies (cache_after, ...) are just
 * more tensors. The schedule (domains, bindings, memory) is ignored.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"

typedef InterpVal Val;

static void set_err(char **err, char *msg)
{
	if (err)
		*err = msg;
	else
		free(msg);
}

/* ---- value conversions ---------------------------------------------------------------- */

static double as_f(Val v, DType t) { return dtype_is_float(t) ? v.f : (double)v.i; }
static int64_t as_i(Val v, DType t)
{
	return dtype_is_float(t) ? dtype_float_to_int(v.f, DT_I64) : v.i;
}
static bool truthy(Val v, DType t) { return dtype_is_float(t) ? v.f != 0 : v.i != 0; }

int64_t interp_wrap_int(int64_t x, DType t)
{
	if (t == DT_I32)
		return (int32_t)(uint32_t)(uint64_t)x;
	if (t == DT_BOOL)
		return x != 0;
	return x;
}

static Val conv(Val v, DType from, DType to)
{
	Val r;

	if (to == DT_BOOL) {
		r.i = truthy(v, from);
	} else if (dtype_is_float(to)) {
		r.f = dtype_round(to, as_f(v, from));
	} else if (dtype_is_float(from)) {
		r.i = dtype_float_to_int(v.f, to);
	} else {
		r.i = interp_wrap_int(v.i, to);
	}
	return r;
}

static Val vf(double f) { Val v; v.f = f; return v; }
static Val vi(int64_t i) { Val v; v.i = i; return v; }

InterpVal interp_load(const void *data, DType t, int64_t i)
{
	const char *p = (const char *)data + i * dtype_size(t);
	uint16_t h;
	float f;
	double d;
	int32_t i32;
	int64_t i64;

	switch (t) {
	case DT_F16: memcpy(&h, p, 2); return vf(dtype_f16_value(h));
	case DT_BF16: memcpy(&h, p, 2); return vf(dtype_bf16_value(h));
	case DT_F32: memcpy(&f, p, 4); return vf(f);
	case DT_F64: memcpy(&d, p, 8); return vf(d);
	case DT_I32: memcpy(&i32, p, 4); return vi(i32);
	case DT_I64: memcpy(&i64, p, 8); return vi(i64);
	case DT_BOOL: return vi(*(const unsigned char *)p != 0);
	default: unreachable();
	}
}

void interp_store(void *data, DType t, int64_t i, InterpVal v)
{
	char *p = (char *)data + i * dtype_size(t);
	uint16_t h;
	float f;
	int32_t i32;

	switch (t) {
	case DT_F16: h = dtype_f16_bits(v.f); memcpy(p, &h, 2); break;
	case DT_BF16: h = dtype_bf16_bits(v.f); memcpy(p, &h, 2); break;
	case DT_F32: f = (float)v.f; memcpy(p, &f, 4); break;
	case DT_F64: memcpy(p, &v.f, 8); break;
	case DT_I32: i32 = (int32_t)v.i; memcpy(p, &i32, 4); break;
	case DT_I64: memcpy(p, &v.i, 8); break;
	case DT_BOOL: *(unsigned char *)p = v.i != 0; break;
	default: unreachable();
	}
}

/* ---- evaluation ----------------------------------------------------------------------- */

enum { ST_TODO, ST_BUSY, ST_DONE };

typedef struct Ctx {
	Fusion *f;
	const int64_t *sizes;
	Val *params;      /* by position in f->params */
	Val **bufs;       /* by Tensor.index */
	int64_t (*dims)[IR_MAX_DIMS];
	int *state;
	int64_t *idx;     /* current values of the root axes of the tensor being computed */
	char *err;
	Tensor *cur;      /* the tensor being computed */
} Ctx;

static Val eval(Ctx *c, IrExpr *e);

static int param_pos(Fusion *f, struct Param *p)
{
	for (int i = 0; i < f->nparams; i++)
		if (f->params[i] == p)
			return i;
	unreachable();
}

/* + - * / % neg ceildiv on operands already in t's representation (doubles for floats,
 * int64 for integers): floats round to t; integers wrap (unsigned arithmetic) and division by
 * zero gives 0 without dividing (the GPU's result is undefined there: eval_op refuses it,
 * the simulator reports it). Shared with the simulator. */
InterpVal interp_arith(IrOp op, DType t, InterpVal a, InterpVal b)
{
	if (dtype_is_float(t)) {
		double x = a.f, y = b.f, r;
		switch (op) {
		case OP_ADD: r = x + y; break;
		case OP_SUB: r = x - y; break;
		case OP_MUL: r = x * y; break;
		case OP_DIV: r = x / y; break;
		case OP_MOD: r = fmod(x, y); break;
		case OP_NEG: r = -x; break;
		case OP_CEILDIV: r = ceil(x / y); break;
		default: unreachable();
		}
		return vf(dtype_round(t, r));
	}
	/* Integers wrap (unsigned arithmetic); division by zero gives 0. */
	uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
	int64_t sx = (int64_t)x, sy = (int64_t)y, r;
	switch (op) {
	case OP_ADD: r = (int64_t)(x + y); break;
	case OP_SUB: r = (int64_t)(x - y); break;
	case OP_MUL: r = (int64_t)(x * y); break;
	case OP_NEG: r = (int64_t)(0 - x); break;
	case OP_XOR: r = (int64_t)(x ^ y); break;
	case OP_DIV:
	case OP_MOD:
	case OP_CEILDIV:
		if (sy == 0)
			r = 0;
		else if (sy == -1)
			r = op == OP_MOD ? 0 : (int64_t)(0 - x);
		else if (op == OP_DIV)
			r = sx / sy;
		else if (op == OP_MOD)
			r = sx % sy;
		else
			r = sx / sy + ((sx % sy != 0) && ((sx < 0) == (sy < 0)));
		break;
	default: unreachable();
	}
	return vi(interp_wrap_int(r, t));
}

bool interp_div_by_zero(IrOp op, DType t, InterpVal b)
{
	return (op == OP_DIV || op == OP_MOD || op == OP_CEILDIV) && !dtype_is_float(t) &&
	       b.i == 0;
}

static Val eval_arith(IrOp op, DType t, Val a, DType ta, Val b, DType tb)
{
	bool unary = op_arity(op) == 1;
	if (dtype_is_float(t))
		return interp_arith(op, t, vf(as_f(a, ta)), vf(unary ? 0 : as_f(b, tb)));
	return interp_arith(op, t, vi(as_i(a, ta)), vi(unary ? 0 : as_i(b, tb)));
}

static Val eval_compare(IrOp op, Val a, DType ta, Val b, DType tb)
{
	DType ct = dtype_compute(dtype_promote(ta, tb));
	int r;

	if (dtype_is_float(ct)) {
		double x = as_f(a, ta), y = as_f(b, tb);
		switch (op) {
		case OP_LT: r = x < y; break;
		case OP_LE: r = x <= y; break;
		case OP_GT: r = x > y; break;
		case OP_GE: r = x >= y; break;
		case OP_EQ: r = x == y; break;
		case OP_NE: r = x != y; break;
		default: unreachable();
		}
	} else {
		int64_t x = as_i(a, ta), y = as_i(b, tb);
		switch (op) {
		case OP_LT: r = x < y; break;
		case OP_LE: r = x <= y; break;
		case OP_GT: r = x > y; break;
		case OP_GE: r = x >= y; break;
		case OP_EQ: r = x == y; break;
		case OP_NE: r = x != y; break;
		default: unreachable();
		}
	}
	return vi(r);
}

double interp_exp_lowp(double x)
{
	return exp2((double)((float)x * 1.44269504f));
}

double interp_fmath(IrOp op, double x, double y)
{
	switch (op) {
	case OP_EXP: return exp(x);
	case OP_EXP_LOWP: return exp(x);
	case OP_LOG: return log(x);
	case OP_SQRT: return sqrt(x);
	case OP_RSQRT: return 1.0 / sqrt(x);
	case OP_TANH: return tanh(x);
	case OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
	case OP_ERF: return erf(x);
	case OP_SIN: return sin(x);
	case OP_COS: return cos(x);
	case OP_FLOOR: return floor(x);
	case OP_CEIL: return ceil(x);
	case OP_POW: return pow(x, y);
	default: unreachable();
	}
}

/* max/min/abs: NaN propagates (unlike C's fmax). */
static Val eval_minmax(IrOp op, DType t, Val a, DType ta, Val b, DType tb)
{
	if (dtype_is_float(t)) {
		double x = as_f(a, ta), y = op == OP_ABS ? 0 : as_f(b, tb), r;
		if (op == OP_ABS)
			r = fabs(x);
		else if (isnan(x) || isnan(y))
			r = NAN;
		else if (op == OP_MAX)
			r = x > y ? x : y;
		else
			r = x < y ? x : y;
		return vf(dtype_round(t, r));
	}
	int64_t x = as_i(a, ta), y = op == OP_ABS ? 0 : as_i(b, tb), r;
	if (op == OP_ABS)
		r = x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
	else if (op == OP_MAX)
		r = x > y ? x : y;
	else
		r = x < y ? x : y;
	return vi(interp_wrap_int(r, t));
}

static Val eval_op(Ctx *c, IrExpr *e)
{
	IrExpr *l = e->args[0], *r = op_arity(e->op) == 2 ? e->args[1] : NULL;
	char kind = op_kind(e->op);
	Val a, b = vi(0);

	if (kind == 'l') { /* short-circuit, like C */
		bool x = truthy(eval(c, l), l->dtype);
		if (e->op == OP_NOT)
			return vi(!x);
		if (e->op == OP_AND)
			return vi(x && truthy(eval(c, r), r->dtype));
		return vi(x || truthy(eval(c, r), r->dtype));
	}
	a = eval(c, l);
	if (r)
		b = eval(c, r);
	DType tb = r ? r->dtype : l->dtype;
	switch (kind) {
	case 'a':
		if (r && !dtype_is_float(e->dtype) && interp_div_by_zero(e->op, e->dtype, vi(as_i(b, tb))) &&
		    !c->err)
			c->err = xprintf("integer division by zero in the definition of %s "
					 "(undefined on the GPU)", c->cur ? c->cur->name : "?");
		return eval_arith(e->op, e->dtype, a, l->dtype, b, tb);
	case 'c':
		return eval_compare(e->op, a, l->dtype, b, tb);
	case 'm':
		return eval_minmax(e->op, e->dtype, a, l->dtype, b, tb);
	case 'f': {
		double y = r ? as_f(b, tb) : 0;
		double v = interp_fmath(e->op, as_f(a, l->dtype), y);
		DType ft = dtype_is_float(e->dtype) ? e->dtype : DT_F32;
		return conv(vf(dtype_round(ft, v)), ft, e->dtype);
	}
	default:
		unreachable();
	}
}

static bool ensure_tensor(Ctx *c, Tensor *t);

static Val eval_access(Ctx *c, IrExpr *e)
{
	Tensor *t = e->tensor;
	int64_t off = 0;

	if (c->err || !ensure_tensor(c, t))
		return vi(0);
	for (int d = 0; d < t->ndim && d < e->nargs; d++) {
		int64_t s = as_i(eval(c, e->args[d]), e->args[d]->dtype);
		if (s < 0 || s >= c->dims[t->index][d]) {
			if (!c->err)
				c->err = xprintf("index %lld out of range [0, %lld) in dimension %d of %s",
						 (long long)s, (long long)c->dims[t->index][d], d, t->name);
			return vi(0);
		}
		off = off * c->dims[t->index][d] + s;
	}
	return conv(c->bufs[t->index][off], t->dtype, e->dtype);
}

typedef struct RedAcc {
	ReduceOp red;
	bool is_float;
	double f;
	int64_t i;
} RedAcc;

/* An accumulator of dtype `at` (the EX_REDUCE's: dtype_accum). Floats add in double, at least
 * as precise as any accumulator, and round to `at` at the end (eval_reduce); integer sums wrap
 * in 64 bits, which the final conversion to an i32 accumulator wraps the same way. */
static void red_init(RedAcc *r, ReduceOp red, DType at)
{
	r->red = red;
	r->is_float = dtype_is_float(at);
	r->f = red == RED_SUM ? 0 : red == RED_MAX ? -INFINITY : INFINITY;
	int64_t lo = at == DT_I32 ? INT32_MIN : at == DT_BOOL ? 0 : INT64_MIN;
	int64_t hi = at == DT_I32 ? INT32_MAX : at == DT_BOOL ? 1 : INT64_MAX;
	r->i = red == RED_SUM ? 0 : red == RED_MAX ? lo : hi;
}

static void red_add(RedAcc *r, Val v)
{
	if (r->is_float) {
		if (r->red == RED_SUM)
			r->f += v.f;
		else if (isnan(v.f) || isnan(r->f))
			r->f = NAN;
		else if (r->red == RED_MAX ? v.f > r->f : v.f < r->f)
			r->f = v.f;
	} else if (r->red == RED_SUM) {
		r->i = (int64_t)((uint64_t)r->i + (uint64_t)v.i);
	} else if (r->red == RED_MAX ? v.i > r->i : v.i < r->i) {
		r->i = v.i;
	}
}

/* Loops over reduction axes k..n of e, accumulating the body. */
static void reduce_loop(Ctx *c, IrExpr *e, int k, RedAcc *acc)
{
	if (c->err)
		return;
	if (k == e->nred) {
		/* each operand converts to the accumulator's dtype first, as in the kernel */
		red_add(acc, conv(eval(c, e->args[0]), e->args[0]->dtype, e->dtype));
		return;
	}
	Axis *ax = e->red_axes[k];
	int64_t n;
	if (!ir_eval_i64(ax->extent, c->sizes, &n)) {
		c->err = xprintf("cannot evaluate the extent of reduction index %s", ax->name);
		return;
	}
	for (int64_t j = 0; j < n && !c->err; j++) {
		c->idx[ax->root_index] = j;
		reduce_loop(c, e, k + 1, acc);
	}
}

static Val eval_reduce(Ctx *c, IrExpr *e)
{
	RedAcc acc;

	red_init(&acc, e->red, e->dtype);
	reduce_loop(c, e, 0, &acc);
	if (acc.is_float)
		return conv(vf(acc.f), DT_F64, e->dtype);
	return conv(vi(acc.i), DT_I64, e->dtype);
}

static Val eval(Ctx *c, IrExpr *e)
{
	switch (e->kind) {
	case EX_INT:
		return conv(vi(e->ival), DT_I64, e->dtype);
	case EX_FLOAT:
		return conv(vf(e->fval), DT_F64, e->dtype);
	case EX_PARAM:
		return conv(c->params[param_pos(c->f, e->param)], e->param->dtype, e->dtype);
	case EX_SIZE:
		return conv(vi(c->sizes[e->size->index]), DT_I64, e->dtype);
	case EX_AXIS:
		return conv(vi(c->idx[e->axis->root_index]), DT_I64, e->dtype);
	case EX_ACCESS:
		return eval_access(c, e);
	case EX_OP:
		return eval_op(c, e);
	case EX_SELECT: {
		IrExpr *p = truthy(eval(c, e->args[0]), e->args[0]->dtype) ? e->args[1] : e->args[2];
		return conv(eval(c, p), p->dtype, e->dtype);
	}
	case EX_CAST:
		return conv(eval(c, e->args[0]), e->args[0]->dtype, e->dtype);
	case EX_REDUCE:
		return eval_reduce(c, e);
	default:
		if (!c->err)
			c->err = xprintf("the interpreter cannot evaluate this expression (kind %d)",
					 (int)e->kind);
		return vi(0);
	}
}

/* Computes tensor t (once), after the tensors its definition reads. */
static bool compute_tensor(Ctx *c, Tensor *t)
{
	int ndim = t->ndim;
	int64_t *dims = c->dims[t->index];
	int64_t n = shape_numel(dims, ndim);
	Val *buf = calloc(n > 0 ? (size_t)n : 1, sizeof(Val));
	int64_t *saved = c->idx;
	int64_t idx[64] = {0};

	if (!buf) {
		c->err = xprintf("out of memory for tensor %s (%lld elements)", t->name, (long long)n);
		return false;
	}
	c->bufs[t->index] = buf;
	if (t->nroot > 64) {
		c->err = xprintf("tensor %s has too many axes", t->name);
		return false;
	}
	Tensor *saved_cur = c->cur;
	c->idx = idx;
	c->cur = t;
	for (int64_t k = 0; k < n && !c->err; k++) {
		buf[k] = conv(eval(c, t->def), t->def->dtype, t->dtype);
		for (int d = ndim - 1; d >= 0; d--) { /* next row-major index */
			if (++idx[d] < dims[d])
				break;
			idx[d] = 0;
		}
	}
	c->idx = saved;
	c->cur = saved_cur;
	return !c->err;
}

static bool ensure_tensor(Ctx *c, Tensor *t)
{
	int *st = &c->state[t->index];

	if (*st == ST_DONE)
		return true;
	if (*st == ST_BUSY) {
		if (!c->err)
			c->err = xprintf("tensor %s depends on itself", t->name);
		return false;
	}
	if (!t->def) {
		if (!c->err)
			c->err = xprintf("tensor %s has no definition and no data", t->name);
		return false;
	}
	*st = ST_BUSY;
	bool ok = compute_tensor(c, t);
	*st = ST_DONE;
	return ok;
}

static void ctx_free(Ctx *c)
{
	for (int i = 0; c->bufs && i < c->f->ntensors; i++)
		free(c->bufs[i]);
	free(c->bufs);
	free(c->dims);
	free(c->state);
	free(c->params);
}

static bool load_inputs(Ctx *c, void **inputs)
{
	Fusion *f = c->f;

	for (int i = 0; i < f->ninputs; i++) {
		Tensor *t = f->inputs[i];
		int64_t n = shape_numel(c->dims[t->index], t->ndim);
		Val *buf = calloc(n > 0 ? (size_t)n : 1, sizeof(Val));
		if (!buf) {
			c->err = xprintf("out of memory for input %s", t->name);
			return false;
		}
		c->bufs[t->index] = buf;
		c->state[t->index] = ST_DONE;
		if (n > 0 && !inputs[i]) {
			c->err = xprintf("no data for input %s", t->name);
			return false;
		}
		for (int64_t k = 0; k < n; k++)
			buf[k] = interp_load(inputs[i], t->dtype, k);
	}
	return true;
}

bool interp_run(Fusion *f, const int64_t *sizes, const double *scalars, void **inputs,
		void **outputs, char **err)
{
	Ctx c = {.f = f, .sizes = sizes};

	if (!fusion_check_sizes(f, sizes, err))
		return false;
	c.params = calloc(f->nparams + 1, sizeof(Val));
	c.bufs = calloc(f->ntensors + 1, sizeof(Val *));
	c.dims = calloc(f->ntensors + 1, sizeof(*c.dims));
	c.state = calloc(f->ntensors + 1, sizeof(int));
	if (!c.params || !c.bufs || !c.dims || !c.state) {
		ctx_free(&c);
		set_err(err, xprintf("out of memory"));
		return false;
	}
	for (int i = 0; i < f->nparams; i++)
		c.params[i] = conv(vf(scalars[i]), DT_F64, f->params[i]->dtype);
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		if (t->index != i)
			die("tensor %s has index %d at position %d", t->name, t->index, i);
		if (!tensor_dims(t, sizes, c.dims[i], err)) {
			ctx_free(&c);
			return false;
		}
	}
	if (load_inputs(&c, inputs)) {
		for (int i = 0; i < f->noutputs && !c.err; i++) {
			Tensor *t = f->outputs[i];
			if (!ensure_tensor(&c, t))
				break;
			int64_t n = shape_numel(c.dims[t->index], t->ndim);
			for (int64_t k = 0; k < n; k++)
				interp_store(outputs[i], t->dtype, k, c.bufs[t->index][k]);
		}
	}
	bool ok = !c.err;
	if (!ok)
		set_err(err, c.err);
	ctx_free(&c);
	return ok;
}

/* ---- tolerances ----------------------------------------------------------------------- */

static double terms_expr(IrExpr *e, const int64_t *sizes, int depth);

static double terms_tensor(Tensor *t, const int64_t *sizes, int depth)
{
	if (!t->def || depth > 32)
		return 1;
	return terms_expr(t->def, sizes, depth + 1);
}

static double terms_expr(IrExpr *e, const int64_t *sizes, int depth)
{
	double m = 1;

	if (!e)
		return 1;
	for (int i = 0; i < e->nargs; i++) {
		double t = terms_expr(e->args[i], sizes, depth);
		if (t > m)
			m = t;
	}
	if (e->kind == EX_ACCESS) {
		double t = terms_tensor(e->tensor, sizes, depth);
		if (t > m)
			m = t;
	}
	if (e->kind == EX_REDUCE && e->red == RED_SUM) { /* max/min add no rounding error */
		for (int k = 0; k < e->nred; k++) {
			int64_t n;
			if (ir_eval_i64(e->red_axes[k]->extent, sizes, &n) && n > 1)
				m *= (double)n;
		}
	}
	return m;
}

double interp_reduction_terms(Tensor *t, const int64_t *sizes)
{
	return terms_tensor(t, sizes, 0);
}

/* ---- cost ----------------------------------------------------------------------------- */

/* Terms evaluated for one element of e: 1, times the extents of each reduction on the way
 * down (a reduction's body once per term). */
static double evals_expr(IrExpr *e, const int64_t *sizes)
{
	double n = 1;

	if (!e)
		return 1;
	for (int i = 0; i < e->nargs; i++) {
		double a = evals_expr(e->args[i], sizes);
		if (a > n)
			n = a;
	}
	if (e->kind == EX_REDUCE) {
		for (int k = 0; k < e->nred; k++) {
			int64_t m;
			if (ir_eval_i64(e->red_axes[k]->extent, sizes, &m) && m > 1)
				n *= (double)m;
		}
	}
	return n;
}

static int64_t saturate(double x)
{
	return x >= 9.2e18 ? INT64_MAX : (int64_t)x;
}

bool interp_cost(Fusion *f, const int64_t *sizes, InterpCost *out, char **err)
{
	double elements = 0, evals = 0;
	int64_t dims[IR_MAX_DIMS];

	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		if (!tensor_dims(t, sizes, dims, err))
			return false;
		double n = 1;
		for (int d = 0; d < t->ndim; d++)
			n *= (double)dims[d];
		elements += n;
		evals += n * (t->def ? evals_expr(t->def, sizes) : 1);
	}
	out->elements = saturate(elements);
	out->evals = saturate(evals);
	return true;
}

/* ---- host tensors --------------------------------------------------------------------- */

bool host_tensor_init(HostTensor *h, Tensor *t, const int64_t *sizes, char **err)
{
	memset(h, 0, sizeof *h);
	h->dtype = t->dtype;
	h->ndim = t->ndim;
	if (!tensor_dims(t, sizes, h->dims, err))
		return false;
	int64_t n = shape_numel(h->dims, h->ndim);
	size_t bytes;
	if (n < 0 || __builtin_mul_overflow((size_t)n, (size_t)dtype_size(t->dtype), &bytes)) {
		set_err(err, xprintf("tensor %s is too large", t->name));
		return false;
	}
	h->data = calloc(bytes ? bytes : 1, 1);
	if (!h->data) {
		set_err(err, xprintf("out of memory for tensor %s (%zu bytes)", t->name, bytes));
		return false;
	}
	return true;
}

void host_tensor_free(HostTensor *h)
{
	free(h->data);
	h->data = NULL;
}

int64_t host_tensor_numel(const HostTensor *h) { return shape_numel(h->dims, h->ndim); }

size_t host_tensor_bytes(const HostTensor *h)
{
	return (size_t)host_tensor_numel(h) * (size_t)dtype_size(h->dtype);
}

/* splitmix64: small, fast and good enough for test data. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void host_tensor_fill_random(HostTensor *h, uint64_t seed)
{
	uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
	int64_t n = host_tensor_numel(h);

	for (int64_t i = 0; i < n; i++) {
		uint64_t r = splitmix64(&s);
		Val v;
		if (dtype_is_float(h->dtype)) {
			v.f = dtype_round(h->dtype, (double)(r >> 11) * 0x1p-52 - 1.0);
		} else if (h->dtype == DT_BOOL) {
			v.i = (int64_t)(r >> 63);
		} else {
			int64_t k = (int64_t)(r % 16); /* -8..-1, 1..8 */
			v.i = k < 8 ? k - 8 : k - 7;
		}
		interp_store(h->data, h->dtype, i, v);
	}
	if (n > 0 && h->dtype == DT_BOOL) /* never all zeros */
		interp_store(h->data, h->dtype, 0, vi(1));
}

double host_tensor_get(const HostTensor *h, int64_t i)
{
	Val v = interp_load(h->data, h->dtype, i);

	return as_f(v, h->dtype);
}
