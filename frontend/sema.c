/* sema.c: checks the AST of a .fus file and builds the fusion IR (docs/language.md, docs/design.md).
 *
 * Per fusion, in one pass over the signature and the statements in order:
 *   - names: parameters, outputs, size symbols and defined tensors share one namespace; dtype
 *     and built-in names are reserved; every duplicate is reported with a note at the first;
 *   - statements: each defines one tensor once, reads only inputs and tensors defined earlier;
 *   - reductions inside expressions: each reduction that is not the whole right-hand side is
 *     lifted into an intermediate of its own, STMT_REDk (k counts the statement's lifted
 *     reductions, innermost first), over the enclosing indices its body reads, defined just
 *     before the statement, which reads it instead (docs/language.md);
 *   - indices: the left-hand indices, then the reduction indices of a top-level reduction, are
 *     the root axes of the defined tensor; the range of each index is inferred from the
 *     dimensions it subscripts (and, for outputs, the declared dimensions); two different ranges
 *     for one index are an error naming both places;
 *   - dtypes: an operator's result is dtype_compute(promote(operands)); comparisons give bool;
 *     literals adapt to the other operand (so `x[i] * 2.0` stays f16 in, f32 compute).
 * Errors are collected; a subexpression that failed yields NULL and its parents stay silent, so
 * each mistake is reported once. The Program returned after errors must not be lowered.
 */
#include <string.h>

#include "frontend/frontend.h"

/* A fusion-level name: scalar parameter, tensor (input, output, defined) or size symbol. */
typedef enum SymKind { SYM_PARAM, SYM_TENSOR, SYM_SIZE } SymKind;

typedef struct Sym {
	const char *name;
	SymKind kind;
	Span span;
	Param *param;
	Tensor *tensor;
	SizeSym *size;
	bool attempted; /* an output some statement tried to define (no "never defined" then) */
} Sym;

/* An index variable in scope within one statement. */
typedef struct Index {
	const char *name;
	Span span;          /* where it is bound (left side or reduction) */
	Axis *axis;         /* the root axis of the tensor being defined */
	IrExpr *range;      /* NULL until inferred */
	Span range_span;    /* the text that fixed the range */
	const char *range_what; /* "dimension 0 of 'x'" */
	bool lhs;
	bool weak;          /* the range is a lenient subscript's (AstExpr.lenient): replaceable */
} Index;

/* A reduction inside an expression, lifted into its own tensor (docs/language.md, "Reductions
 * inside expressions"): `t` is defined as `red(...)` over `free` (the enclosing indices its body
 * reads, in scope order) and its reduction indices. The root axes for `free` are `axes`; their
 * extents are those of the enclosing indices, known when the statement is finished. */
typedef struct Lift {
	Tensor *t;
	Index **free;
	Axis **axes;
	int nfree;
	IrExpr *def;
	Vec reads;      /* Tensor* read by the reduction's body */
} Lift;

typedef struct Sema {
	Arena *a;
	Diag *d;
	AstFusion *ast;
	Fusion *f;
	Map syms;      /* name -> Sym* (strings) */
	Vec params;    /* Param* */
	Vec inputs, outputs, tensors, sizes, sig;
	/* the statement being checked */
	AstStmt *stmt;
	int stmt_index;
	Tensor *cur;
	Vec scope;     /* Index*, innermost last */
	Vec reads;     /* Tensor* read by the current definition */
	bool quiet;    /* do not report unranged indices (the statement already had an error) */
	Vec lifted;    /* Lift*: the statement's reductions inside expressions, innermost first */
	int nlifted;   /* reductions lifted so far in the statement (the ordinal of the next) */
	Vec expired;   /* Index*: reduction indices of the statement whose reduction has closed */
} Sema;

/* ---- names ---------------------------------------------------------------------------- */

static bool is_builtin_name(const char *s)
{
	IrOp op;
	return op_builtin(s, 1, &op) || op_builtin(s, 2, &op) || strcmp(s, "where") == 0 ||
	       strcmp(s, "sum") == 0;
}

/* The built-in function or cast nearest to an unknown call's name, or NULL: at most 2 edits
 * (as directives' closest_verb in schedule.c) and fewer than half the name's length, so a
 * short unrelated name (foo) suggests nothing. */
static const char *closest_builtin(const char *name)
{
	const char *best = NULL;
	int bestd = 3;

	for (int i = 0; i < OP_COUNT + DT_COUNT + 1; i++) {
		const char *c = i < OP_COUNT ? op_name((IrOp)i)
			      : i < OP_COUNT + DT_COUNT ? dtype_name((DType)(i - OP_COUNT))
			      : "where";
		if (i < OP_COUNT && op_kind((IrOp)i) != 'f' && op_kind((IrOp)i) != 'm')
			continue;
		int dd = edit_distance(name, c);
		if (dd < bestd && 2 * dd < (int)strlen(name)) {
			bestd = dd;
			best = c;
		}
	}
	return best;
}

/* Dtype and built-in names cannot name anything (a parameter `exp` would make `exp(x)`
 * ambiguous). Reports and returns false for a reserved name. */
static bool check_not_reserved(Sema *s, const char *name, Span at)
{
	DType dt;
	if (dtype_from_name(name, &dt)) {
		diag_error(s->d, at, "'%s' is a dtype name and cannot be used as a name", name);
		return false;
	}
	if (is_builtin_name(name)) {
		diag_error(s->d, at, "'%s' is a built-in function and cannot be used as a name", name);
		return false;
	}
	return true;
}

static Sym *find_sym(Sema *s, const char *name)
{
	return map_lookup(&s->syms, name);
}

static const char *sym_what(Sym *y)
{
	switch (y->kind) {
	case SYM_PARAM: return "parameter";
	case SYM_SIZE: return "size symbol";
	case SYM_TENSOR:
		switch (y->tensor->kind) {
		case TK_INPUT: return "parameter";
		case TK_OUTPUT: return "output";
		case TK_INTERMEDIATE: return "tensor";
		case TK_SCALAR: return "scalar";
		}
	}
	unreachable();
}

/* Adds a fusion-level name; reports a clash with an existing one (note at the first). */
static Sym *add_sym(Sema *s, const char *name, SymKind kind, Span at)
{
	if (!check_not_reserved(s, name, at))
		return NULL;
	Sym *old = find_sym(s, name);
	if (old) {
		diag_error(s->d, at, "'%s' is already declared as a %s", name, sym_what(old));
		diag_note(s->d, old->span, "'%s' first declared here", name);
		return NULL;
	}
	Sym *y = NEW(s->a, Sym);
	y->name = name;
	y->kind = kind;
	y->span = at;
	map_insert(s->a, &s->syms, name, y);
	return y;
}

/* ---- signature ------------------------------------------------------------------------ */

static bool resolve_dtype(Sema *s, AstName n, DType *out)
{
	if (dtype_from_name(n.name, out))
		return true;
	diag_error(s->d, n.span, "unknown dtype '%s' (expected f16, bf16, f32, f64, i32, i64 or bool)",
		   n.name);
	*out = DT_F32;
	return false;
}

static SizeSym *size_sym(Sema *s, const char *name, Span at)
{
	Sym *y = find_sym(s, name);
	if (y && y->kind == SYM_SIZE)
		return y->size;
	if (y) {
		diag_error(s->d, at, "size symbol '%s' has the name of a %s", name, sym_what(y));
		diag_note(s->d, y->span, "'%s' declared here", name);
		return NULL;
	}
	y = add_sym(s, name, SYM_SIZE, at);
	if (!y)
		return NULL;
	SizeSym *z = NEW(s->a, SizeSym);
	z->name = name;
	z->index = s->sizes.len;
	z->span = at;
	y->size = z;
	vec_push(s->a, &s->sizes, z);
	return z;
}

static IrExpr *dim_expr(Sema *s, AstDim *dim)
{
	IrExpr *e;
	if (dim->sym) {
		SizeSym *z = size_sym(s, dim->sym, dim->span);
		e = z ? ir_size(s->a, z) : ir_int(s->a, 1);
	} else {
		if (dim->value <= 0)
			diag_error(s->d, dim->span, "a dimension must be positive, not %lld",
				   (long long)dim->value);
		e = ir_int(s->a, dim->value);
	}
	e->span = dim->span;
	return e;
}

/* The constant dimensions of a tensor may hold at most FUS_MAX_CONST_ELEMS elements, far
 * beyond any GPU's memory: every offset, extent, buffer size and rounded-up extent computed
 * later from them (times a dtype size, plus a split factor) is then free of overflow
 * (docs/design.md, "Limits"). Size symbols are checked at launch. Reports at `at`. */
static bool check_numel(Sema *s, Tensor *t, Span at)
{
	int64_t n = 1, v;
	for (int i = 0; i < t->ndim; i++) {
		if (!ir_is_const(t->shape[i], &v) || v <= 0)
			continue;
		if (__builtin_mul_overflow(n, v, &n) || n > FUS_MAX_CONST_ELEMS) {
			diag_error(s->d, at, "'%s' is too large: its constant dimensions hold more than 2^48 elements",
				   t->name);
			return false;
		}
	}
	return true;
}

static void push_sig(Sema *s, char kind, Param *p, Tensor *t)
{
	struct SigEntry *e = NEW(s->a, struct SigEntry);
	e->kind = kind;
	e->param = p;
	e->tensor = t;
	vec_push(s->a, &s->sig, e);
}

static Tensor *new_tensor(Sema *s, const char *name, TensorKind kind, DType dt, Span at)
{
	return tensor_new(s->a, name, kind, dt,
			  kind == TK_INPUT || kind == TK_OUTPUT ? MEM_GLOBAL : MEM_LOCAL, at);
}

static void declare_param(Sema *s, AstParam *ap, bool is_output)
{
	DType dt;
	resolve_dtype(s, ap->dtype, &dt);
	/* Symbols of the dims first: `x: f32[x]` reports the clash at the declaration name. */
	IrExpr **shape = arena_alloc(s->a, sizeof(IrExpr *) * (ap->ndims ? ap->ndims : 1));
	for (int i = 0; i < ap->ndims; i++)
		shape[i] = dim_expr(s, &ap->dims[i]);
	Sym *y = add_sym(s, ap->name.name, ap->ndims || is_output ? SYM_TENSOR : SYM_PARAM,
			 ap->name.span);
	if (!ap->ndims && !is_output) {
		Param *p = NEW(s->a, Param);
		p->name = ap->name.name;
		p->dtype = dt;
		p->index = s->sig.len;
		p->span = ap->name.span;
		if (y)
			y->param = p;
		vec_push(s->a, &s->params, p);
		push_sig(s, 'p', p, NULL);
		return;
	}
	Tensor *t = new_tensor(s, ap->name.name, is_output ? TK_OUTPUT : TK_INPUT, dt,
			       ap->name.span);
	t->ndim = ap->ndims;
	t->shape = shape;
	check_numel(s, t, ap->span);
	t->param_index = s->sig.len;
	if (y)
		y->tensor = t;
	if (is_output) {
		vec_push(s->a, &s->outputs, t);
	} else {
		t->index = s->tensors.len;
		vec_push(s->a, &s->inputs, t);
		vec_push(s->a, &s->tensors, t);
	}
	push_sig(s, is_output ? 'o' : 't', NULL, t);
}

/* ---- index scope ---------------------------------------------------------------------- */

static Index *find_index(Sema *s, const char *name)
{
	for (int i = s->scope.len - 1; i >= 0; i--) {
		Index *x = VEC_AT(s->scope, Index, i);
		if (strcmp(x->name, name) == 0)
			return x;
	}
	return NULL;
}

static void dim_text(IrExpr *e, char *buf, size_t n)
{
	if (e->kind == EX_SIZE)
		snprintf(buf, n, "%s", e->size->name);
	else
		snprintf(buf, n, "%lld", (long long)e->ival);
}

/* Shapes are EX_INT or EX_SIZE, so equality is by value or by symbol. */
static bool dim_equal(IrExpr *x, IrExpr *y)
{
	if (x->kind != y->kind)
		return false;
	return x->kind == EX_SIZE ? x->size == y->size : x->ival == y->ival;
}

/* Index x subscripts a dimension of extent `range`: infer or check its range. */
static void use_range(Sema *s, Index *x, IrExpr *range, Span at, const char *what)
{
	if (!x->range || (x->weak && !dim_equal(x->range, range))) {
		x->weak = false;
		x->range = range;
		x->range_span = at;
		x->range_what = what;
		return;
	}
	if (dim_equal(x->range, range))
		return;
	char now[64], first[64];
	dim_text(range, now, sizeof now);
	dim_text(x->range, first, sizeof first);
	diag_error(s->d, at, "conflicting ranges for index '%s': %s here (%s), but %s elsewhere",
		   x->name, now, what, first);
	diag_note(s->d, x->range_span, "index '%s' has range %s here (%s)", x->name, first,
		  x->range_what);
}

/* Binds a new index (left-hand or reduction) and its root axis. */
static Index *bind_index(Sema *s, AstName n, bool lhs, bool reduction)
{
	check_not_reserved(s, n.name, n.span);
	Sym *y = find_sym(s, n.name);
	if (y) {
		diag_error(s->d, n.span, "index '%s' has the name of a %s", n.name, sym_what(y));
		diag_note(s->d, y->span, "'%s' declared here", n.name);
	}
	Index *old = find_index(s, n.name);
	if (old && reduction && old->lhs) {
		diag_error(s->d, n.span, "reduction index '%s' also appears on the left-hand side",
			   n.name);
		diag_note(s->d, old->span, "'%s' is a left-hand index here", n.name);
	} else if (old) {
		diag_error(s->d, n.span, "index '%s' is repeated", n.name);
		diag_note(s->d, old->span, "'%s' first bound here", n.name);
	}
	Index *x = NEW(s->a, Index);
	x->name = n.name;
	x->span = n.span;
	x->lhs = lhs;
	Axis *ax = NEW(s->a, Axis);
	ax->kind = AX_ROOT;
	ax->name = n.name;
	ax->span = n.span;
	ax->owner = s->cur;
	ax->reduction = reduction;
	ax->par = PT_SERIAL;
	x->axis = ax;
	vec_push(s->a, &s->scope, x);
	return x;
}

/* Fixes the extent of an index's axis once its statement (or reduction) is checked. */
static bool finish_index(Sema *s, Index *x)
{
	if (!x->range) {
		if (!s->quiet)
			diag_error(s->d, x->span,
				   "cannot infer the range of index '%s': it subscripts no tensor",
				   x->name);
		x->axis->extent = ir_int(s->a, 1);
		return false;
	}
	x->axis->extent = x->range;
	return true;
}

/* ---- expressions ---------------------------------------------------------------------- */

static IrExpr *check_expr(Sema *s, AstExpr *e);

static bool is_literal(IrExpr *e)
{
	return e && (e->kind == EX_FLOAT || (e->kind == EX_INT && e->dtype != DT_BOOL));
}

/* A literal takes the dtype of the other operand of its operator (docs/language.md: "float literals
 * adapt"); an integer literal next to a float becomes a float literal. */
static IrExpr *adapt(Sema *s, IrExpr *lit, IrExpr *other)
{
	if (!is_literal(lit) || !other || is_literal(other))
		return lit;
	DType o = other->dtype;
	if (lit->kind == EX_FLOAT) {
		if (dtype_is_float(o))
			lit->dtype = o;
		return lit;
	}
	if (dtype_is_float(o)) {
		IrExpr *f = ir_float(s->a, o, (double)lit->ival);
		f->span = lit->span;
		return f;
	}
	if (o == DT_I32 && (lit->ival < INT32_MIN || lit->ival > INT32_MAX)) {
		/* it would compute in i32 in the reference, in i64 on the GPU */
		diag_error(s->d, lit->span,
			   "integer literal %lld does not fit in i32, the dtype of the other operand",
			   (long long)lit->ival);
		return NULL;
	}
	if (o == DT_I32 || o == DT_I64)
		lit->dtype = o;
	return lit;
}

/* ---- integer constants ------------------------------------------------------------------ */

/* x op y in i64, false when it overflows or divides by zero (C's truncating / and %). */
static bool int_fold(IrOp op, int64_t x, int64_t y, int64_t *out)
{
	switch (op) {
	case OP_ADD: return !__builtin_add_overflow(x, y, out);
	case OP_SUB: return !__builtin_sub_overflow(x, y, out);
	case OP_MUL: return !__builtin_mul_overflow(x, y, out);
	case OP_NEG: return !__builtin_sub_overflow((int64_t)0, x, out);
	case OP_DIV:
	case OP_MOD:
		if (y == 0 || (x == INT64_MIN && y == -1))
			return false;
		*out = op == OP_DIV ? x / y : x % y;
		return true;
	default:
		return false;
	}
}

/* The value of an integer constant expression: literals combined by + - * / % and unary -.
 * False when e is not one. (One that overflows is never built: check_binary reports it.) */
static bool int_const(IrExpr *e, int64_t *v)
{
	if (!e || e->dtype == DT_BOOL || dtype_is_float(e->dtype))
		return false;
	if (e->kind == EX_INT) {
		*v = e->ival;
		return true;
	}
	int64_t x, y = 0;
	if (e->kind != EX_OP || op_kind(e->op) != 'a' || !int_const(e->args[0], &x))
		return false;
	if (op_arity(e->op) == 2 && !int_const(e->args[1], &y))
		return false;
	return int_fold(e->op, x, y, v);
}

/* Integer arithmetic the GPU cannot do defined: a constant zero divisor, or constant operands
 * whose result does not fit in i64 (reported at the operation, never folded to a wrapped
 * value). Returns false after reporting. */
static bool check_int_op(Sema *s, Span at, IrOp op, IrExpr *l, IrExpr *r)
{
	int64_t x, y = 0, v;
	bool ry = r && int_const(r, &y);
	if ((op == OP_DIV || op == OP_MOD) && ry && y == 0) {
		diag_error(s->d, at, "integer %s by zero", op == OP_DIV ? "division" : "remainder");
		return false;
	}
	if ((r && !ry) || !int_const(l, &x) || int_fold(op, x, y, &v))
		return true;
	diag_error(s->d, at, "integer overflow: this constant expression does not fit in i64");
	return false;
}

static IrExpr *mk_op(Sema *s, IrOp op, DType t, IrExpr *l, IrExpr *r, Span at)
{
	IrExpr *e = ir_op(s->a, op, t, l, r);
	e->span = at;
	return e;
}

static IrExpr *check_binary(Sema *s, AstExpr *e, IrOp op, IrExpr *l, IrExpr *r)
{
	if (!l || !r)
		return NULL;
	l = adapt(s, l, r);
	r = adapt(s, r, l);
	if (!l || !r)
		return NULL;
	char k = op_kind(op);
	if (k == 'l') {
		if (l->dtype != DT_BOOL || r->dtype != DT_BOOL) {
			diag_error(s->d, e->span, "operands of '%s' must be bool, not %s and %s",
				   op_name(op), dtype_name(l->dtype), dtype_name(r->dtype));
			return NULL;
		}
		return mk_op(s, op, DT_BOOL, l, r, e->span);
	}
	DType t = dtype_compute(dtype_promote(l->dtype, r->dtype));
	if (k == 'c')
		return mk_op(s, op, DT_BOOL, l, r, e->span);
	if (t == DT_BOOL) {
		diag_error(s->d, e->span, "'%s' needs numeric operands, not bool", op_name(op));
		return NULL;
	}
	if (k == 'f' && !dtype_is_float(t))
		t = DT_F32;
	if (k == 'a' && !dtype_is_float(t) && !check_int_op(s, e->span, op, l, r))
		return NULL;
	return mk_op(s, op, t, l, r, e->span);
}

static IrExpr *check_unary(Sema *s, AstExpr *e, IrOp op, IrExpr *x)
{
	if (!x)
		return NULL;
	if (op == OP_NOT) {
		if (x->dtype != DT_BOOL) {
			diag_error(s->d, e->span, "operand of '!' must be bool, not %s",
				   dtype_name(x->dtype));
			return NULL;
		}
		return mk_op(s, op, DT_BOOL, x, NULL, e->span);
	}
	if (x->dtype == DT_BOOL) {
		diag_error(s->d, e->span, "'%s' needs a numeric operand, not bool",
			   op == OP_NEG ? "-" : op_name(op));
		return NULL;
	}
	if (op == OP_NEG && !dtype_is_float(x->dtype) && !check_int_op(s, e->span, op, x, NULL))
		return NULL;
	if (op == OP_NEG && is_literal(x)) { /* fold, so `-1.0` still adapts */
		IrExpr *lit = x->kind == EX_INT ? ir_int(s->a, -x->ival) : ir_float(s->a, x->dtype, -x->fval);
		lit->dtype = x->dtype;
		lit->span = e->span;
		return lit;
	}
	DType t = dtype_compute(x->dtype);
	if (op_kind(op) == 'f' && !dtype_is_float(t))
		t = DT_F32;
	return mk_op(s, op, t, x, NULL, e->span);
}

static IrExpr *check_select(Sema *s, Span at, IrExpr *c, IrExpr *x, IrExpr *y, Span cspan)
{
	if (!c || !x || !y)
		return NULL;
	if (c->dtype != DT_BOOL) {
		diag_error(s->d, cspan, "condition must be bool, not %s", dtype_name(c->dtype));
		return NULL;
	}
	x = adapt(s, x, y);
	y = adapt(s, y, x);
	if (!x || !y)
		return NULL;
	IrExpr *r = ir_select(s->a, c, x, y);
	r->dtype = dtype_compute(dtype_promote(x->dtype, y->dtype));
	r->span = at;
	return r;
}

/* The tensor `name` as read at `at`: must be an input or defined by an earlier statement. */
static Tensor *readable_tensor(Sema *s, const char *name, Span at, bool indexed)
{
	Sym *y = find_sym(s, name);
	if (y && y->kind == SYM_TENSOR && y->tensor && (y->tensor->kind == TK_INPUT || y->tensor->def ||
							 y->tensor->root)) {
		return y->tensor;
	}
	if (y && y->kind != SYM_TENSOR) {
		diag_error(s->d, at, "'%s' is a %s, not a tensor%s", name, sym_what(y),
			   indexed ? "; it cannot be indexed" : "");
		return NULL;
	}
	/* Defined by this or a later statement? */
	for (int i = s->stmt_index; i < s->ast->nstmts; i++) {
		AstStmt *st = s->ast->stmts[i];
		if (strcmp(st->lhs.name, name) != 0)
			continue;
		if (i == s->stmt_index)
			diag_error(s->d, at, "'%s' is read by its own definition", name);
		else
			diag_error(s->d, at, "'%s' is read before it is defined", name);
		diag_note(s->d, st->lhs.span, "'%s' is defined here", name);
		return NULL;
	}
	if (y) { /* an output that no statement defines: reported at the end */
		diag_error(s->d, at, "output '%s' is read but never defined", name);
		return NULL;
	}
	diag_error(s->d, at, "unknown %s '%s'", indexed ? "tensor" : "name", name);
	return NULL;
}

static void add_read(Sema *s, Tensor *t)
{
	for (int i = 0; i < s->reads.len; i++)
		if (VEC_AT(s->reads, Tensor, i) == t)
			return;
	vec_push(s->a, &s->reads, t);
}

/* After "unknown index/name": a note when `name` is the index of a reduction of the statement
 * that has already closed (it is bound only inside that reduction). */
static void note_expired(Sema *s, const char *name)
{
	for (int i = s->expired.len - 1; i >= 0; i--) {
		Index *x = VEC_AT(s->expired, Index, i);
		if (strcmp(x->name, name) == 0) {
			diag_note(s->d, x->span, "'%s' is bound by this reduction and is not visible outside it",
				  name);
			return;
		}
	}
}

static IrExpr *check_access(Sema *s, AstExpr *e)
{
	Tensor *t = readable_tensor(s, e->name, e->name_span, true);
	if (!t)
		return NULL;
	if (e->nargs != t->ndim) {
		diag_error(s->d, e->span, "'%s' has %d dimension%s but is accessed with %d subscript%s",
			   t->name, t->ndim, t->ndim == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "" : "s");
		return NULL;
	}
	IrExpr **idx = arena_alloc(s->a, sizeof(IrExpr *) * (e->nargs ? e->nargs : 1));
	bool ok = true;
	for (int k = 0; k < e->nargs; k++) {
		AstExpr *sub = e->args[k];
		IrExpr *dim = t->shape[k];
		if (sub->kind == AE_INT) {
			bool oob = sub->ival < 0 || (dim->kind == EX_INT && sub->ival >= dim->ival);
			if (oob) {
				char ext[64];
				dim_text(dim, ext, sizeof ext);
				diag_error(s->d, sub->span,
					   "subscript %lld is out of bounds for dimension %d of '%s' (extent %s)",
					   (long long)sub->ival, k, t->name, ext);
				ok = false;
			}
			idx[k] = ir_int(s->a, sub->ival);
			idx[k]->span = sub->span;
			continue;
		}
		if (sub->kind != AE_NAME) {
			diag_error(s->d, sub->span,
				   "a subscript must be an index or an integer constant");
			ok = false;
			continue;
		}
		Index *x = find_index(s, sub->name);
		if (!x) {
			Sym *y = find_sym(s, sub->name);
			if (y)
				diag_error(s->d, sub->span,
					   "'%s' is a %s, not an index; a subscript must be an index or an integer constant",
					   sub->name, sym_what(y));
			else {
				diag_error(s->d, sub->span,
					   "unknown index '%s': it is neither on the left-hand side nor bound by an enclosing reduction",
					   sub->name);
				note_expired(s, sub->name);
			}
			ok = false;
			continue;
		}
		bool lenient = k < 32 && (e->lenient >> k & 1);
		if (!lenient || !x->range) {
			use_range(s, x, dim, sub->span,
				  arena_printf(s->a, "dimension %d of '%s'", k, t->name));
			x->weak = lenient;
		}
		idx[k] = ir_axis(s->a, x->axis);
		idx[k]->span = sub->span;
	}
	if (!ok)
		return NULL;
	add_read(s, t);
	IrExpr *r = ir_access(s->a, t, idx, e->nargs);
	r->span = e->span;
	return r;
}

static IrExpr *check_name(Sema *s, AstExpr *e)
{
	Index *x = find_index(s, e->name);
	if (x) {
		IrExpr *r = ir_axis(s->a, x->axis);
		r->span = e->span;
		return r;
	}
	Sym *y = find_sym(s, e->name);
	if (y && y->kind == SYM_PARAM) {
		if (!y->param)
			return NULL;
		IrExpr *r = NEW(s->a, IrExpr);
		r->kind = EX_PARAM;
		r->param = y->param;
		r->dtype = y->param->dtype;
		r->span = e->span;
		return r;
	}
	if (y && y->kind == SYM_SIZE) {
		if (!y->size)
			return NULL;
		IrExpr *r = ir_size(s->a, y->size);
		r->span = e->span;
		return r;
	}
	if (y && y->tensor && y->tensor->ndim > 0) {
		diag_error(s->d, e->span, "'%s' is a tensor with %d dimension%s; index it as %s[...]",
			   e->name, y->tensor->ndim, y->tensor->ndim == 1 ? "" : "s", e->name);
		return NULL;
	}
	/* A 0-d tensor or scalar temporary: an access without subscripts. */
	Tensor *t = readable_tensor(s, e->name, e->span, false);
	if (!t) {
		if (!y)
			note_expired(s, e->name);
		return NULL;
	}
	add_read(s, t);
	IrExpr *r = ir_access(s->a, t, NULL, 0);
	r->span = e->span;
	return r;
}

static IrExpr *check_cast(Sema *s, AstExpr *e, DType dt)
{
	if (dt == DT_BOOL) {
		diag_error(s->d, e->name_span, "there is no cast to bool; compare with 0 instead");
		return NULL;
	}
	if (e->nargs != 1) {
		diag_error(s->d, e->span, "the cast %s() takes 1 argument, not %d", dtype_name(dt),
			   e->nargs);
		return NULL;
	}
	IrExpr *x = check_expr(s, e->args[0]);
	if (!x)
		return NULL;
	IrExpr *r = ir_cast(s->a, dt, x);
	r->span = e->span;
	return r;
}

static IrExpr *check_call(Sema *s, AstExpr *e)
{
	DType dt;
	if (dtype_from_name(e->name, &dt))
		return check_cast(s, e, dt);
	IrExpr *args[3] = {NULL, NULL, NULL};
	int want;
	IrOp op = OP_ADD;
	if (strcmp(e->name, "where") == 0)
		want = 3;
	else if (op_builtin(e->name, 1, &op))
		want = 1;
	else if (op_builtin(e->name, 2, &op))
		want = 2;
	else if (strcmp(e->name, "sum") == 0) {
		diag_error(s->d, e->span, "'sum' is a reduction: write sum(j: EXPR)");
		return NULL;
	} else {
		const char *c = closest_builtin(e->name);
		if (c)
			diag_error(s->d, e->name_span, "unknown function '%s'; did you mean '%s'?",
				   e->name, c);
		else
			diag_error(s->d, e->name_span, "unknown function '%s'", e->name);
		return NULL;
	}
	if (e->nargs != want) {
		diag_error(s->d, e->span, "'%s' takes %d argument%s, not %d%s", e->name, want,
			   want == 1 ? "" : "s", e->nargs,
			   (op == OP_MAX || op == OP_MIN) && want == 2 ? " (a reduction is written max(j: EXPR))" : "");
		return NULL;
	}
	bool ok = true;
	for (int i = 0; i < want; i++)
		ok &= (args[i] = check_expr(s, e->args[i])) != NULL;
	if (!ok)
		return NULL;
	if (want == 3)
		return check_select(s, e->span, args[0], args[1], args[2], e->args[0]->span);
	if (want == 2)
		return check_binary(s, e, op, args[0], args[1]);
	return check_unary(s, e, op, args[0]);
}

static bool reduce_op(const char *name, ReduceOp *out)
{
	if (strcmp(name, "sum") == 0)
		*out = RED_SUM;
	else if (strcmp(name, "max") == 0)
		*out = RED_MAX;
	else if (strcmp(name, "min") == 0)
		*out = RED_MIN;
	else
		return false;
	return true;
}

/* The accumulation dtype (dtype_accum, the one rule): with the output's declared dtype; an
 * intermediate takes the dtype of its reduction, so only the operand's counts. */
static DType reduce_dtype(Sema *s, ReduceOp red, DType body)
{
	Tensor *t = s->cur;
	return dtype_accum(red, t && t->kind == TK_OUTPUT ? t->dtype : body, body);
}

/* Does e read the axis ax? */
static bool uses_axis(IrExpr *e, Axis *ax)
{
	if (!e)
		return false;
	if (e->kind == EX_AXIS && e->axis == ax)
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (uses_axis(e->args[i], ax))
			return true;
	return false;
}

/* Points every EX_AXIS of e that reads `from` at `to` (the body is this reduction's own tree). */
static void retarget_axis(IrExpr *e, Axis *from, Axis *to)
{
	if (e->kind == EX_AXIS && e->axis == from)
		e->axis = to;
	for (int i = 0; i < e->nargs; i++)
		retarget_axis(e->args[i], from, to);
}

/* The lifted tensor's name must be new in the fusion: not a parameter, size symbol, output,
 * tensor (defined before or after this statement) or index in scope. Reports at the reduction. */
static bool check_lift_name(Sema *s, const char *name, Span at)
{
	Span other;
	const char *what = NULL;
	Sym *y = find_sym(s, name);
	Index *x = find_index(s, name);
	if (y) {
		what = sym_what(y);
		other = y->span;
	} else if (x) {
		what = "index";
		other = x->span;
	} else {
		for (int i = 0; i < s->ast->nstmts && !what; i++) {
			if (strcmp(s->ast->stmts[i]->lhs.name, name) == 0) {
				what = "tensor";
				other = s->ast->stmts[i]->lhs.span;
			}
		}
	}
	if (!what)
		return true;
	diag_error(s->d, at,
		   "this reduction is lifted into a tensor named '%s', but %s %s already has that name",
		   name, strchr("aeiou", what[0]) ? "an" : "a", what);
	diag_note(s->d, other, "'%s' declared here; rename it, or define the reduction as its own tensor",
		  name);
	return false;
}

/* Lifts the checked reduction r (over the indices of tensor t, its body's reads in `reads`) out
 * of the statement: t is defined as r over the enclosing indices r reads (in scope order: the
 * left-hand side's, then those of enclosing reductions) and its own reduction indices; the
 * statement reads t[those indices] instead. t is finished with the statement (finish_lifts). */
static IrExpr *lift_reduce(Sema *s, Tensor *t, IrExpr *r, Vec *reads, Span at)
{
	t->name = arena_printf(s->a, "%s_%s%d", s->stmt->lhs.name, red_name(r->red), s->nlifted++);
	if (!check_lift_name(s, t->name, at))
		return NULL;
	Lift *l = NEW(s->a, Lift);
	l->t = t;
	l->def = r;
	l->reads = *reads;
	int n = s->scope.len;
	l->free = arena_alloc(s->a, sizeof(Index *) * (n ? n : 1));
	l->axes = arena_alloc(s->a, sizeof(Axis *) * (n ? n : 1));
	IrExpr **idx = arena_alloc(s->a, sizeof(IrExpr *) * (n ? n : 1));
	for (int i = 0; i < n; i++) {
		Index *x = VEC_AT(s->scope, Index, i);
		if (!uses_axis(r, x->axis))
			continue;
		Axis *ax = NEW(s->a, Axis);
		*ax = (Axis){.kind = AX_ROOT, .name = x->name, .span = x->span, .owner = t,
			     .par = PT_SERIAL};
		retarget_axis(r, x->axis, ax);
		idx[l->nfree] = ir_axis(s->a, x->axis);
		idx[l->nfree]->span = at;
		l->free[l->nfree] = x;
		l->axes[l->nfree++] = ax;
	}
	t->dtype = r->dtype;
	t->span = at;
	t->lifted_from = s->cur;
	Sym *y = add_sym(s, t->name, SYM_TENSOR, at);
	y->tensor = t;
	y->attempted = true;
	vec_push(s->a, &s->lifted, l);
	add_read(s, t);
	IrExpr *e = ir_access(s->a, t, idx, l->nfree);
	e->span = at;
	return e;
}

/* A reduction; `top` when it is the whole right-hand side (its indices then become root axes
 * of the defined tensor, appended to `raxes`); otherwise it is lifted into its own tensor
 * (lift_reduce), whose root axes its reduction indices are, and its body's reads are that
 * tensor's. */
static IrExpr *check_reduce(Sema *s, AstExpr *e, bool top, Vec *raxes)
{
	ReduceOp red;
	if (!reduce_op(e->name, &red)) {
		diag_error(s->d, e->name_span, "unknown reduction '%s' (expected sum, max or min)",
			   e->name);
		return NULL;
	}
	Tensor *outer = s->cur;
	Vec outer_reads = s->reads;
	if (!top) {
		s->cur = new_tensor(s, e->name, TK_INTERMEDIATE, DT_F32, e->span);
		s->reads = (Vec){0};
	}
	Tensor *owner = s->cur;
	int base = s->scope.len;
	Axis **axes = arena_alloc(s->a, sizeof(Axis *) * (e->nidx ? e->nidx : 1));
	for (int i = 0; i < e->nidx; i++)
		axes[i] = bind_index(s, e->idx[i], false, true)->axis;
	int errors = diag_error_count(s->d);
	IrExpr *body = check_expr(s, e->args[0]);
	s->quiet = diag_error_count(s->d) > errors;
	bool ok = true;
	for (int i = base; i < s->scope.len; i++) {
		ok &= finish_index(s, VEC_AT(s->scope, Index, i));
		vec_push(s->a, &s->expired, VEC_AT(s->scope, Index, i));
	}
	s->quiet = false;
	s->scope.len = base;
	if (top && raxes)
		for (int i = 0; i < e->nidx; i++)
			vec_push(s->a, raxes, axes[i]);
	IrExpr *r = NULL;
	if (body && ok) {
		r = NEW(s->a, IrExpr);
		r->kind = EX_REDUCE;
		r->red = red;
		r->red_axes = axes;
		r->nred = e->nidx;
		r->args = arena_alloc(s->a, sizeof(IrExpr *));
		r->args[0] = body;
		r->nargs = 1;
		r->dtype = reduce_dtype(s, red, body->dtype);
		r->span = e->span;
	}
	if (top)
		return r;
	Vec reads = s->reads;
	s->cur = outer;
	s->reads = outer_reads;
	return r ? lift_reduce(s, owner, r, &reads, e->span) : NULL;
}

static IrExpr *check_expr(Sema *s, AstExpr *e)
{
	IrExpr *r;
	switch (e->kind) {
	case AE_INT:
		r = ir_int(s->a, e->ival);
		r->dtype = DT_I64;
		r->span = e->span;
		return r;
	case AE_FLOAT:
		r = ir_float(s->a, DT_F32, e->fval);
		r->span = e->span;
		return r;
	case AE_NAME:
		return check_name(s, e);
	case AE_ACCESS:
		return check_access(s, e);
	case AE_UNARY: {
		IrExpr *x = check_expr(s, e->args[0]);
		return check_unary(s, e, e->op == '!' ? OP_NOT : OP_NEG, x);
	}
	case AE_BINARY: {
		IrExpr *l = check_expr(s, e->args[0]);
		IrExpr *rr = check_expr(s, e->args[1]);
		return check_binary(s, e, (IrOp)e->op, l, rr);
	}
	case AE_TERNARY: {
		IrExpr *c = check_expr(s, e->args[0]);
		IrExpr *x = check_expr(s, e->args[1]);
		IrExpr *y = check_expr(s, e->args[2]);
		return check_select(s, e->span, c, x, y, e->args[0]->span);
	}
	case AE_CALL:
		return check_call(s, e);
	case AE_REDUCE:
		return check_reduce(s, e, false, NULL);
	}
	unreachable();
}

/* ---- statements ----------------------------------------------------------------------- */

/* The tensor a statement defines: a declared output, or a new intermediate / scalar. Returns
 * NULL after an error (the statement is still checked, into a throwaway tensor). */
static Tensor *stmt_target(Sema *s, AstStmt *st)
{
	const char *name = st->lhs.name;
	if (!check_not_reserved(s, name, st->lhs.span))
		return NULL;
	Sym *y = find_sym(s, name);
	if (!y) {
		TensorKind k = st->is_scalar && st->rhs->kind != AE_REDUCE ? TK_SCALAR : TK_INTERMEDIATE;
		Tensor *t = new_tensor(s, name, k, DT_F32, st->span);
		add_sym(s, name, SYM_TENSOR, st->lhs.span)->tensor = t;
		return t;
	}
	if (y->kind == SYM_SIZE || y->kind == SYM_PARAM || (y->tensor && y->tensor->kind == TK_INPUT)) {
		diag_error(s->d, st->lhs.span, "cannot assign to %s '%s'",
			   y->tensor ? "input" : sym_what(y), name);
		diag_note(s->d, y->span, "'%s' declared here", name);
		return NULL;
	}
	Tensor *t = y->tensor;
	if (t && t->kind == TK_OUTPUT && !t->root && y->attempted)
		return NULL; /* its first definition was already reported as wrong */
	y->attempted = true;
	if (!t || t->kind != TK_OUTPUT || t->root) {
		diag_error(s->d, st->lhs.span, "'%s' is defined twice (single assignment)", name);
		diag_note(s->d, t && t->root ? t->def_span : y->span, "'%s' %s here", name,
			  t && t->root ? "first defined" : "declared");
		return NULL;
	}
	int n = st->is_scalar ? 0 : st->nidx;
	if (n != t->ndim) {
		diag_error(s->d, st->lhs.span, "output '%s' has %d dimension%s but is defined with %d index%s",
			   name, t->ndim, t->ndim == 1 ? "" : "s", n, n == 1 ? "" : "es");
		diag_note(s->d, y->span, "'%s' declared here", name);
		return NULL;
	}
	return t;
}

/* Defines t over its root axes (left-hand ones, then reduction ones) as def, read from `reads`;
 * intermediates take their shape from the left-hand axes (their extents are fixed by now) and
 * their dtype from def. `at` is where a size error is reported. */
static void define_tensor(Sema *s, Tensor *t, Axis **lhs, int nlhs, Vec *raxes, IrExpr *def,
			  Span def_span, Span at, Vec *reads)
{
	t->nroot = nlhs + raxes->len;
	t->root = arena_alloc(s->a, sizeof(Axis *) * (t->nroot ? t->nroot : 1));
	for (int i = 0; i < nlhs; i++) {
		t->root[i] = lhs[i];
		t->root[i]->root_index = i;
	}
	for (int i = 0; i < raxes->len; i++) {
		t->root[nlhs + i] = VEC_AT(*raxes, Axis, i);
		t->root[nlhs + i]->root_index = nlhs + i;
	}
	t->domain = arena_alloc(s->a, sizeof(Axis *) * (t->nroot ? t->nroot : 1));
	memcpy(t->domain, t->root, sizeof(Axis *) * t->nroot);
	t->ndomain = t->nroot;
	if (t->kind != TK_OUTPUT) {
		t->ndim = nlhs;
		t->shape = arena_alloc(s->a, sizeof(IrExpr *) * (nlhs ? nlhs : 1));
		for (int i = 0; i < nlhs; i++)
			t->shape[i] = t->root[i]->extent;
		t->dtype = def ? def->dtype : DT_F32;
		if (!check_numel(s, t, at))
			def = NULL;
	}
	t->def = def;
	t->def_span = def_span;
	bool red = def && def->kind == EX_REDUCE;
	t->sched.inlined = (t->kind == TK_INTERMEDIATE && !red) || t->kind == TK_SCALAR;
	t->index = s->tensors.len;
	vec_push(s->a, &s->tensors, t);
	for (int i = 0; i < reads->len; i++)
		vec_push(s->a, &VEC_AT(*reads, Tensor, i)->readers, t);
}

/* Defines the statement's lifted reductions, innermost first, before the statement's tensor
 * (which reads them): their left-hand axes take the extents of the enclosing indices. */
static void finish_lifts(Sema *s)
{
	for (int i = 0; i < s->lifted.len; i++) {
		Lift *l = VEC_AT(s->lifted, Lift, i);
		for (int k = 0; k < l->nfree; k++)
			l->axes[k]->extent = l->free[k]->axis->extent;
		Vec raxes = {0};
		for (int k = 0; k < l->def->nred; k++)
			vec_push(s->a, &raxes, l->def->red_axes[k]);
		define_tensor(s, l->t, l->axes, l->nfree, &raxes, l->def, l->def->span,
			      l->def->span, &l->reads);
	}
}

static void finish_tensor(Sema *s, Tensor *t, Index **lhs, int nlhs, Vec *raxes, IrExpr *def)
{
	Axis **axes = arena_alloc(s->a, sizeof(Axis *) * (nlhs ? nlhs : 1));
	for (int i = 0; i < nlhs; i++)
		axes[i] = lhs[i]->axis;
	define_tensor(s, t, axes, nlhs, raxes, def, s->stmt->span, s->stmt->lhs.span, &s->reads);
}

static void check_stmt(Sema *s, AstStmt *st, int index)
{
	s->stmt = st;
	s->stmt_index = index;
	s->scope.len = 0;
	s->reads = (Vec){0};
	s->lifted = (Vec){0};
	s->nlifted = 0;
	s->expired = (Vec){0};
	int errors = diag_error_count(s->d);
	Tensor *t = stmt_target(s, st);
	s->cur = t ? t : new_tensor(s, st->lhs.name, TK_INTERMEDIATE, DT_F32, st->span);
	int n = st->is_scalar ? 0 : st->nidx;
	Index **lhs = arena_alloc(s->a, sizeof(Index *) * (n ? n : 1));
	for (int i = 0; i < n; i++) {
		lhs[i] = bind_index(s, st->idx[i], true, false);
		if (t && t->kind == TK_OUTPUT)
			use_range(s, lhs[i], t->shape[i], t->shape[i]->span,
				  arena_printf(s->a, "declared dimension %d of '%s'", i, t->name));
	}
	Vec raxes = {0};
	IrExpr *def = st->rhs->kind == AE_REDUCE ? check_reduce(s, st->rhs, true, &raxes)
						 : check_expr(s, st->rhs);
	/* After an error in the statement, an index without a range is a consequence of it. */
	s->quiet = !t || diag_error_count(s->d) > errors;
	bool ok = true;
	for (int i = 0; i < n; i++)
		ok &= finish_index(s, lhs[i]);
	s->quiet = false;
	finish_lifts(s); /* defined even when t is not: they are tensors of their own */
	if (!t)
		return;
	if (!def || !ok) {
		/* Keep the name defined (so later reads do not cascade) but mark it unusable. */
		def = NULL;
	}
	finish_tensor(s, t, lhs, n, &raxes, def);
}

/* ---- fusions -------------------------------------------------------------------------- */

static void freeze(Vec *v, void *items, int *n)
{
	*(void ***)items = v->items;
	*n = v->len;
}

static Fusion *check_fusion(Arena *a, Diag *d, AstFusion *af)
{
	Sema s = {.a = a, .d = d, .ast = af, .syms = {.strings = true}};
	Fusion *f = NEW(a, Fusion);
	s.f = f;
	f->ast = af;
	f->name = af->name.name;
	f->span = af->name.span;
	for (int i = 0; i < af->nparams; i++)
		declare_param(&s, af->params[i], false);
	for (int i = 0; i < af->nouts; i++)
		declare_param(&s, af->outs[i], true);
	for (int i = 0; i < af->nstmts; i++)
		check_stmt(&s, af->stmts[i], i);
	for (int i = 0; i < s.outputs.len; i++) {
		Tensor *t = VEC_AT(s.outputs, Tensor, i);
		if (!t->root) {
			Sym *y = find_sym(&s, t->name);
			if (y && y->tensor == t && !y->attempted)
				diag_error(d, t->span, "output '%s' is never defined", t->name);
			t->index = s.tensors.len;
			vec_push(a, &s.tensors, t);
		}
	}
	freeze(&s.params, &f->params, &f->nparams);
	freeze(&s.inputs, &f->inputs, &f->ninputs);
	freeze(&s.outputs, &f->outputs, &f->noutputs);
	freeze(&s.tensors, &f->tensors, &f->ntensors);
	freeze(&s.sizes, &f->sizes, &f->nsizes);
	f->nsig = s.sig.len;
	f->sig = arena_alloc(a, sizeof(struct SigEntry) * (s.sig.len ? s.sig.len : 1));
	for (int i = 0; i < s.sig.len; i++)
		f->sig[i] = *VEC_AT(s.sig, struct SigEntry, i);
	return f;
}

Fusion *sema_fusion(Arena *a, Diag *d, AstFusion *af)
{
	int errors = diag_error_count(d);
	Fusion *f = check_fusion(a, d, af);
	f->failed = diag_error_count(d) > errors;
	if (!f->failed)
		sema_lowp_exp(a, f);
	return f;
}

static void attach_schedules(Diag *d, Program *p, AstFile *file)
{
	for (int i = 0; i < file->nschedules; i++) {
		AstSchedule *sc = file->schedules[i];
		Fusion *f = NULL;
		for (int j = 0; j < p->nfusions && !f; j++)
			if (strcmp(p->fusions[j]->name, sc->fusion.name) == 0)
				f = p->fusions[j];
		if (!f) {
			diag_error(d, sc->fusion.span, "schedule for unknown fusion '%s'", sc->fusion.name);
			continue;
		}
		if (f->ast_schedule) {
			diag_error(d, sc->fusion.span, "fusion '%s' has two schedule blocks",
				   sc->fusion.name);
			diag_note(d, f->ast_schedule->fusion.span, "first schedule block here");
			f->failed = true;
			continue;
		}
		f->ast_schedule = sc;
		for (int j = 0; j < file->nfusions; j++)
			if (strcmp(file->fusions[j]->name.name, f->name) == 0 && !file->fusions[j]->schedule)
				file->fusions[j]->schedule = sc;
	}
}

Program *sema_program(Arena *a, Diag *d, AstFile *file)
{
	Program *p = NEW(a, Program);
	p->fusions = arena_alloc(a, sizeof(Fusion *) * (file->nfusions ? file->nfusions : 1));
	for (int i = 0; i < file->nfusions; i++) {
		AstFusion *af = file->fusions[i];
		int errors = diag_error_count(d);
		const char *clash = sema_c_name_clash(af->name.name);
		if (clash) {
			diag_error(d, af->name.span, "a fusion cannot be named '%s': it is %s",
				   af->name.name, clash);
			diag_note(d, af->name.span, "its launcher would be the global C function "
				  "'cudaError_t %s(...)'; rename the fusion (docs/cli.md lists the "
				  "names a fusion cannot have)", af->name.name);
		}
		for (int j = 0; j < i; j++) {
			if (strcmp(file->fusions[j]->name.name, af->name.name) == 0) {
				diag_error(d, af->name.span, "fusion '%s' is defined twice", af->name.name);
				diag_note(d, file->fusions[j]->name.span, "first defined here");
				break;
			}
		}
		Fusion *f = sema_fusion(a, d, af);
		f->failed |= diag_error_count(d) > errors;
		p->fusions[p->nfusions++] = f;
	}
	attach_schedules(d, p, file);
	return p;
}
