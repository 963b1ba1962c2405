/* loop_nest.c: the first pass: kernel IR loop nests from the scheduled fusion IR.
 *
 * One nest per top-level tensor (an output not computed at another tensor), in definition
 * order. Inside it:
 *   - each leaf axis of the domain is a KS_FOR (serial; unroll/vectorize flags from the axis)
 *     or, when bound, no loop at all: its value is EX_PAR;
 *   - tensors computed at it (compute_at) are nested at the start of the body of the shared
 *     loop, in definition order; their axes with `ca_alias` take the consumer's loop value;
 *   - a KS_NEST marker (tensor set) says where the nest of that tensor starts: "nest of
 *     z" for a top-level tensor (at kernel level), "t computed at z.i" for a producer (the
 *     allocation pass puts the buffer there);
 *   - the root index values come from the leaves by inverting the transforms (split:
 *     outer*F + inner; merge: m / E_inner and m % E_inner);
 *   - the value stored is the definition with its root axes replaced by those values; reads of
 *     inlined tensors (and of outputs and scalar temporaries) are replaced by their definition
 *     with the subscripts mapped, so a pointwise fusion never reads back what it wrote;
 *   - a reduction accumulates into a kernel-scope local (KS_LET) over its serial innermost
 *     reduction loops; when reduction axes are bound to threadIdx.*, a KS_BLOCK_REDUCE then
 *     combines the threads' partials (every thread gets the result); then the accumulator is
 *     stored (docs/reductions.md);
 *   - a register cache with serial non-reduction loops inside its serial reduction loops (a
 *     GEMM's Cl: [.. | ko, ty, tx, ki, iu, ju]) accumulates in its own buffer: identity stores
 *     before the outermost serial reduction loop (init_in_place), t[..] = t[..] op body inside
 *     (accumulate_in_place); its reader stores the elements after the loops.
 * Launch dims: per parallel type, the largest extent bound to it by any materialized tensor.
 */
#include <math.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Binding {
	Axis *axis;
	IrExpr *value;
} Binding;

typedef struct Nest {
	Kernel *k;
	Arena *a;
	Diag *d;
	Fusion *f;
	Tensor *top;        /* the top-level tensor whose nest is being built */
	Binding *env;       /* axis values of the enclosing loops (a stack) */
	int nenv, cap;
	Map producers;      /* Tensor * -> Vec * of the tensors placed in its loops (placement) */
	unsigned gen;       /* changes whenever env does */
	Map values;         /* Axis * -> Value *: axis_value's results for env generation gen */
	Vec wsums, wm2s;    /* single-pass pairs (welford.c): the first tensors built so far (the
			     * sum of welford(), the max of online()) and the locals the second
			     * one stores (the M2, the sum) */
	bool ok;
} Nest;

static Span stmt_span(Tensor *t)
{
	return t->def_span.file ? t->def_span : t->span;
}

PRINTF(3, 4) static void error_once(Nest *n, Span at, const char *fmt, ...)
{
	if (!n->ok)
		return;
	n->ok = false;
	Buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	diag_error(n->d, at, "%s", b.s);
	buf_free(&b);
}

/* A derived axis value computed for one state of the env (Nest.values): a chain of 200
 * splits would otherwise rebuild each inner value once per axis above it (cubic). */
typedef struct Value {
	IrExpr *v;
	unsigned gen;
} Value;

static void pop_to(Nest *n, int nenv)
{
	n->nenv = nenv;
	n->gen++;
}

static void push(Nest *n, Axis *ax, IrExpr *v)
{
	n->gen++;
	if (n->nenv == n->cap) {
		/* the arena cannot grow a block: copy into a bigger one */
		int cap = n->cap ? 2 * n->cap : 32;
		Binding *env = arena_alloc(n->a, sizeof(Binding) * (size_t)cap);
		if (n->nenv)
			memcpy(env, n->env, sizeof(Binding) * (size_t)n->nenv);
		n->env = env;
		n->cap = cap;
	}
	n->env[n->nenv++] = (Binding){ax, v};
}

/* The value of any axis of a materialized tensor at the current point of the nest. */
static IrExpr *axis_value(Nest *n, Axis *ax)
{
	if (ax->ca_alias)
		return axis_value(n, ax->ca_alias);
	for (int i = n->nenv - 1; i >= 0; i--)
		if (n->env[i].axis == ax)
			return n->env[i].value;
	Value *memo = map_lookup(&n->values, ax);
	if (memo && memo->gen == n->gen)
		return memo->v;
	Axis *c = ax->to[0];
	IrExpr *v;
	if (!c)
		die("loop_nest: axis %s of %s has no value", ax->name, ax->owner->name);
	if (c->kind == AX_SPLIT_OUTER) {
		Axis *in = ax->to[1];
		v = ix_add(n->a, ix_mul(n->a, axis_value(n, c), ir_int(n->a, in->factor)),
			   axis_value(n, in));
	} else {
		/* merge: the merged value m = outer * E_inner + inner (no range facts of the
		 * kernel: this pass is what sets its launch dims) */
		IrExpr *m = axis_value(n, c);
		IrExpr *e_inner = c->from[1]->extent;
		v = ax == c->from[0] ? ix_div(n->a, NULL, m, e_inner) : ix_mod(n->a, NULL, m, e_inner);
	}
	if (!memo) {
		memo = NEW(n->a, Value);
		map_insert(n->a, &n->values, ax, memo);
	}
	memo->v = v;
	memo->gen = n->gen;
	return v;
}

/* Non-divisible split predication. A split inner axis ax (extent F) that is split or merged
 * further takes values up to (its children's extents product) - 1 >= F when the later split
 * does not divide F: `split(j, 7) -> (jo, ji); split(ji, 3) -> (jio, jii)` gives ji = jio*3 +
 * jii up to 8, and ji = 7 is the element (jo + 1, 0), computed twice (a race, or padding added
 * into a sum). The root bound (`jo*7 + ji < N`) does not see it, so every such axis gets
 * `ax < F` on the statements of its tensor (Stmt.split_cond; the predicate pass drops those
 * ir_range proves, so divisible splits of constants get none). Outer axes and merges need
 * none: a merge's inner is `m % E`, and an outer or merged value past its extent makes its
 * parent's value (root, or a split inner checked here) past its own. `reductions` false: the
 * statement is outside the reduction loops (the store after them), where reduction axes have
 * no value and only the other conditions apply. */
static IrExpr *split_cond(Nest *n, Tensor *t, bool reductions)
{
	IrExpr *c = NULL;
	/* A reduction root that is split or merged further is bounded by nothing else when it
	 * is no bare subscript: an rfactor partial's listed roots are parts of the reduction's
	 * index (`r.split(n2, 3)` of `n2: 2` gives n2 = 2, the next chunk's element, in
	 * `o2 * 6 + n2 * 3 + n1`). A user's reduction index is a bare subscript: its access
	 * bound is the same condition, merged with it. */
	for (int i = 0; reductions && i < t->nroot; i++) {
		Axis *ax = t->root[i];
		if (ax->reduction && ax->to[0])
			c = ix_and(n->a, c, ix_lt(n->a, axis_value(n, ax), ax->extent));
	}
	for (int i = 0; i < t->history.len; i++) {
		Axis *ax = VEC_AT(t->history, Axis, i);
		if (ax->kind != AX_SPLIT_INNER || !ax->to[0] || (ax->reduction && !reductions))
			continue;
		c = ix_and(n->a, c, ix_lt(n->a, axis_value(n, ax), ax->extent));
	}
	return c;
}

static Stmt *with_split_cond(Nest *n, Stmt *s, Tensor *t, bool reductions)
{
	IrExpr *c = split_cond(n, t, reductions);
	if (s->kind == KS_LET)
		s->let.split_cond = c;
	else
		s->store.split_cond = c;
	return s;
}

static IrExpr **root_values(Nest *n, Tensor *t, int count)
{
	IrExpr **v = arena_alloc(n->a, sizeof(IrExpr *) * (size_t)(count ? count : 1));
	for (int i = 0; i < count; i++)
		v[i] = axis_value(n, t->root[i]);
	return v;
}

/* ---- definitions: root axes -> values, inlining ------------------------------------- */

static Tensor *top_of(Tensor *t)
{
	while (t->sched.ca_tensor)
		t = t->sched.ca_tensor;
	return t;
}

/* Materialized tensors are stored and read back; every other defined tensor is recomputed
 * in its readers. Outputs read by another statement are recomputed too (never read back). */
static bool is_materialized_read(Tensor *t)
{
	return t->kind == TK_INTERMEDIATE && t->sched.ca_tensor;
}

static IrExpr *translate(Nest *n, IrExpr *e, IrExpr **map, int nmap);

static IrExpr *translate_access(Nest *n, IrExpr *e, IrExpr **subs)
{
	Tensor *y = e->tensor;
	if (y->kind == TK_INPUT)
		return ir_access(n->a, y, subs, e->nargs);
	if (is_materialized_read(y)) {
		if (top_of(y) != n->top)
			error_once(n, stmt_span(y),
				   "%s is computed at %s but also read outside its loop nest; "
				   "this is not supported yet",
				   y->name, y->sched.ca_tensor->name);
		return ir_access(n->a, y, subs, e->nargs);
	}
	if (tensor_is_reduction(y)) {
		error_once(n, stmt_span(y),
			   "reductions read by another statement without compute_at are not "
			   "supported yet (%s)", y->name);
		return ir_access(n->a, y, subs, e->nargs);
	}
	/* recompute: the reader's subscripts become y's root axes; the value is rounded to y's
	 * dtype as a store of it would be (the reference's semantics), then converted to the
	 * access's dtype */
	IrExpr *v = translate(n, y->def, subs, e->nargs);
	if (v->dtype != y->dtype)
		v = ir_cast(n->a, y->dtype, v);
	if (v->dtype != e->dtype)
		v = ir_cast(n->a, e->dtype, v);
	return v;
}

static IrExpr *translate(Nest *n, IrExpr *e, IrExpr **map, int nmap)
{
	if (!e)
		return NULL;
	switch (e->kind) {
	case EX_AXIS:
		if (e->axis->root_index >= nmap)
			die("loop_nest: axis %s out of the map", e->axis->name);
		return map[e->axis->root_index];
	case EX_REDUCE:
		error_once(n, e->span, "a reduction nested in an expression is not supported yet");
		return ir_int(n->a, 0);
	default:
		break;
	}
	IrExpr *c = NEW(n->a, IrExpr);
	*c = *e;
	if (e->nargs) {
		c->args = arena_alloc(n->a, sizeof(IrExpr *) * (size_t)e->nargs);
		for (int i = 0; i < e->nargs; i++)
			c->args[i] = translate(n, e->args[i], map, nmap);
	}
	if (e->kind == EX_ACCESS)
		return translate_access(n, c, c->args);
	return c;
}

/* ---- reductions ----------------------------------------------------------------------- */

/* The accumulator of reduction t: the one rule (dtype_accum) over t's dtype and its operand's
 * (the EX_REDUCE's, which sema typed the same way). */
static DType acc_dtype(Tensor *t)
{
	return dtype_accum(t->def->red, t->dtype, t->def->args[0]->dtype);
}

static IrExpr *typed_int(Arena *a, DType t, int64_t v)
{
	IrExpr *e = ir_int(a, v);
	e->dtype = t;
	return e;
}

static IrExpr *reduce_init(Arena *a, ReduceOp r, DType t)
{
	bool fl = dtype_is_float(t);
	switch (r) {
	case RED_MAX:
		if (fl)
			return ir_float(a, t, -INFINITY);
		return typed_int(a, t, t == DT_I32 ? INT32_MIN : t == DT_BOOL ? 0 : INT64_MIN);
	case RED_MIN:
		if (fl)
			return ir_float(a, t, INFINITY);
		return typed_int(a, t, t == DT_I32 ? INT32_MAX : t == DT_BOOL ? 1 : INT64_MAX);
	default:
		return fl ? ir_float(a, t, 0.0) : typed_int(a, t, 0);
	}
}

static Stmt *let(Kernel *k, Var *v, IrExpr *value)
{
	Stmt *s = NEW(k->arena, Stmt);
	s->kind = KS_LET;
	s->let.var = v;
	s->let.value = value;
	return s;
}

static Var *new_local(Kernel *k, const char *name, DType t)
{
	Var *v = kir_new_var(k, name, t);
	vec_push(k->arena, &k->locals, v);
	return v;
}

/* acc = acc op body. max/min keep NaN like PyTorch: a NaN element makes the result NaN. */
static Stmt *accumulate(Nest *n, Tensor *t, Var *acc, IrExpr *body)
{
	Arena *a = n->a;
	DType dt = acc->dtype;
	IrExpr *x = ir_var(a, acc);
	ReduceOp r = t->def->red;
	if (r == RED_SUM || r == RED_NONE)
		return let(n->k, acc, ir_op(a, OP_ADD, dt, x, body));
	IrOp op = r == RED_MAX ? OP_MAX : OP_MIN;
	if (!dtype_is_float(dt))
		return let(n->k, acc, ir_op(a, op, dt, x, body));
	Var *tmp = new_local(n->k, arena_printf(a, "%s_v", t->name), dt);
	IrExpr *v = ir_var(a, tmp);
	IrExpr *better = ir_op(a, r == RED_MAX ? OP_GT : OP_LT, DT_BOOL, v, x);
	IrExpr *nan = ir_op(a, OP_NE, DT_BOOL, v, v);
	IrExpr *take = ir_op(a, OP_OR, DT_BOOL, better, nan);
	Stmt *s = let(n->k, tmp, body);
	s->next = let(n->k, acc, ir_select(a, take, v, x));
	return s;
}

/* Where a reduction's accumulator starts: the first position p such that every axis from p on
 * is the tensor's own (not a loop of its consumer) and a reduction axis or a parallel one (no
 * loop). Returns ndomain for a non-reduction. A serial reduction loop before p (a serial
 * non-reduction loop inside it) is only supported for a register cache, which then
 * accumulates in place from its outermost serial reduction loop on (*in_place). */
static int reduction_start(Nest *n, Tensor *t, bool *in_place)
{
	if (!tensor_is_reduction(t))
		return t->ndomain;
	int start = t->ndomain;
	while (start > 0) {
		Axis *ax = t->domain[start - 1];
		if (ax->ca_alias || (!ax->reduction && ax->par == PT_SERIAL))
			break;
		start--;
	}
	for (int i = 0; i < start; i++) {
		Axis *ax = t->domain[i];
		if (!ax->reduction || ax->ca_alias || ax->par != PT_SERIAL)
			continue;
		if (t->kind == TK_INTERMEDIATE && t->sched.ca_tensor && t->sched.mem == MEM_LOCAL) {
			*in_place = true;
			return i;
		}
		error_once(n, stmt_span(t),
			   "reductions with reduction axes that are not innermost are not supported "
			   "yet (%s.%s) unless the tensor is a register cache (cache_before(local))",
			   t->name, ax->name);
	}
	return start;
}

/* The thread types bound to t's own reduction axes (a block reduction), as a mask. A thread
 * type used by one of t's shared loops as well would mix rows: an error. */
static unsigned reduced_threads(Nest *n, Tensor *t, Span *at)
{
	unsigned mask = 0;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if (ax->ca_alias || !ax->reduction || !par_is_thread(ax->par))
			continue;
		if (!mask)
			*at = ax->par_span;
		mask |= 1u << ax->par;
	}
	for (int i = 0; i < t->ndomain && mask; i++) {
		Axis *ax = t->domain[i], *r = ax;
		while (r->ca_alias)
			r = r->ca_alias;
		if (ax->ca_alias && par_is_thread(r->par) && (mask & (1u << r->par)))
			error_once(n, *at,
				   "'%s' reduces over %s, but its loop '%s' (a loop of '%s') is bound to "
				   "%s too", t->name, par_name(r->par), ax->name, r->owner->name,
				   par_name(r->par));
	}
	return mask;
}

/* ---- nests ---------------------------------------------------------------------------- */

typedef struct Frame {
	Tensor *t;
	int rstart;  /* where the accumulator starts (ndomain for a non-reduction) */
	Var *acc;    /* reduction accumulator */
	bool in_place; /* accumulates in its own register buffer (accumulate_in_place) */
	Var *wmean, *wm2; /* welford (t->welford_var): acc is the count; the mean and M2 (in
			   * the loops: the sums of the deviations from wshift and of their squares) */
	Var *wshift;
	Var *osum;        /* online (t->online_sum): acc is the max; the sum of exp(x - max) */
	unsigned threads; /* thread types of the reduction axes: a block reduction */
	Span threads_span; /* the bind directive of the first of them */
} Frame;

static Stmt *build(Nest *n, Frame *fr, int pos);
static Stmt *build_tensor(Nest *n, Tensor *t);
static Stmt *innermost(Nest *n, Frame *fr);
static Stmt *open_axis(Nest *n, Frame *fr, int pos);

/* Nest.producers: for each tensor, the tensors placed in its loops, in definition order (one
 * pass over the fusion, not one per loop of every nest). */
static void find_producers(Nest *n)
{
	for (int i = 0; i < n->f->ntensors; i++) {
		Tensor *p = n->f->tensors[i], *o;
		int at;
		if (!p->sched.ca_tensor || (p->kind != TK_INTERMEDIATE && p->kind != TK_OUTPUT))
			continue;
		tensor_placement(p, &o, &at);
		Vec *v = map_lookup(&n->producers, o);
		if (!v) {
			v = NEW(n->a, Vec);
			map_insert(n->a, &n->producers, o, v);
		}
		vec_push(n->a, v, p);
	}
}

/* Producers nested at the start of the body of t's loop `pos`, in definition order. */
static Stmt *producers_at(Nest *n, Tensor *t, int pos)
{
	Stmt *list = NULL;
	Vec *v = map_lookup(&n->producers, t);
	for (int i = 0; v && i < v->len; i++) {
		Tensor *p = VEC_AT(*v, Tensor, i), *o;
		int at;
		tensor_placement(p, &o, &at);
		if (at != pos)
			continue;
		Stmt *mark = kir_nest_mark(n->k, p, p->sched.ca_span, p->sched.ca_pos < 0
					   ? arena_printf(n->a, "%s computed at the top of %s", p->name,
							  p->sched.ca_tensor->name)
					   : arena_printf(n->a, "%s computed at %s.%s", p->name,
							  p->sched.ca_tensor->name,
							  p->sched.ca_tensor->domain[p->sched.ca_pos]->name));
		list = kir_append(list, mark);
		list = kir_append(list, build_tensor(n, p));
	}
	return list;
}

/* A store of t outside its reduction loops (a reduction's result, an in-place identity). */
static Stmt *store(Nest *n, Tensor *t, IrExpr *value)
{
	IrExpr **subs = root_values(n, t, t->ndim);
	return with_split_cond(n, kir_store(n->k, t, subs, t->ndim, value), t, false);
}

/* t[i..] = t[i..] op body, one store (so the predicate pass guards the read, the body and
 * the write together). NaN-propagating max/min as in accumulate(), with the body repeated. */
static Stmt *accumulate_in_place(Nest *n, Tensor *t, IrExpr **map)
{
	Arena *a = n->a;
	DType dt = acc_dtype(t);
	IrExpr *x = ir_access(a, t, map, t->ndim);
	IrExpr *body = translate(n, t->def->args[0], map, t->nroot);
	ReduceOp r = t->def->red;
	IrExpr *v;
	if (r == RED_SUM || r == RED_NONE) {
		v = ir_op(a, OP_ADD, dt, x, body);
	} else if (!dtype_is_float(dt)) {
		v = ir_op(a, r == RED_MAX ? OP_MAX : OP_MIN, dt, x, body);
	} else {
		IrExpr *b2 = translate(n, t->def->args[0], map, t->nroot);
		IrExpr *b3 = translate(n, t->def->args[0], map, t->nroot);
		IrExpr *better = ir_op(a, r == RED_MAX ? OP_GT : OP_LT, DT_BOOL, body, x);
		IrExpr *take = ir_op(a, OP_OR, DT_BOOL, better, ir_op(a, OP_NE, DT_BOOL, b2, b2));
		v = ir_select(a, take, b3, ir_access(a, t, map, t->ndim));
	}
	return with_split_cond(n, kir_store(n->k, t, map, t->ndim, v), t, true);
}

/* The loop of serial axis ax over body. An unrolled (or vectorized) axis whose extent is
 * not a constant but has a constant upper bound (a size variant's SizeSym.bound) runs to
 * that bound with its body under `if (v < extent)`: a constant trip count, so the loop is
 * unrolled and the register arrays it indexes stay in registers (docs/auto_schedule.md,
 * "Size variants"). */
static Stmt *bounded_for(Nest *n, Var *v, Axis *ax, Stmt *body)
{
	int64_t lo, hi;
	v->extent = ax->extent;
	if ((ax->unroll || ax->vectorize) && !ir_is_const(ax->extent, NULL) &&
	    ir_range(NULL, ax->extent, &lo, &hi) && hi >= 0 && hi <= PASS_MAX_LOCAL_ELEMS) {
		v->extent = ir_int(n->a, hi);
		body = kir_if(n->k, ix_lt(n->a, ir_var(n->a, v), ax->extent), body, NULL);
	}
	return kir_for(n->k, v, body);
}

/* The in-place accumulator's initialisation: t[i..] = identity for every element of the
 * buffer, in loops re-created over t's own serial non-reduction axes from pos on (bound
 * axes have their values already; reduction axes do not index the buffer). */
static Stmt *init_in_place(Nest *n, Tensor *t, int pos)
{
	if (pos == t->ndomain)
		return store(n, t, reduce_init(n->a, t->def->red, acc_dtype(t)));
	Axis *ax = t->domain[pos];
	if (ax->ca_alias || ax->reduction || ax->par != PT_SERIAL)
		return init_in_place(n, t, pos + 1);
	Var *v = kir_new_var(n->k, ax->name, DT_I64);
	v->axis = ax;
	push(n, ax, ir_var(n->a, v));
	Stmt *body = init_in_place(n, t, pos + 1);
	pop_to(n, n->nenv - 1);
	return bounded_for(n, v, ax, body);
}

/* ---- Welford's single pass (s2.welford(), scheduler/welford.c) ---------------------------- */

static Stmt *tensor_let(Nest *n, Tensor *t, Var *v, IrExpr *value)
{
	Stmt *s = let(n->k, v, value);
	s->let.tensor = t; /* one group for the predicate pass: all or nothing per element */
	return s;
}

/* The update of s1's per-thread statistics with one element x: the count n, the shift k
 * (the thread's first element), and the sums s and q of the deviations e = x - k and of their
 * squares (the shifted-data algorithm: no division per element; welford_finish turns them
 * into the thread's mean and M2 for the block combination). Only the read is predicated (as
 * online_update's): a lane out of bounds reads k itself and has the weight w = 0, so the
 * update is straight-line code with no branch and the unrolled loop's loads are issued
 * together (Welford's own update, `mean += d / n` with the bounds `if` around it, ran
 * layernorm over 65536 f32 in one pass no faster than in two; nvcc's correctly rounded
 * division and NaN-propagating max are branches):
 *   v = k; w = 0;  if (in bounds) { v = x; w = 1; }   (v, w: one predicate group)
 *   k = n == 0 ? v : k;  n = n + w;  e = v - k;  s = s + e;  q = q + e * e
 * Numerically this is as safe as the shift is close to the thread's mean: a row of 1e4 plus
 * noise shifts by about 1e4 and keeps the noise's digits (check_welford.c); a first element
 * far from the rest (by many standard deviations) loses digits of that thread's M2. */
static Stmt *welford_update(Nest *n, Frame *fr, IrExpr *x)
{
	Arena *a = n->a;
	Tensor *t = fr->t;
	DType dt = fr->acc->dtype;
	Var *v = new_local(n->k, arena_printf(a, "%s_v", t->name), dt);
	Var *w = new_local(n->k, arena_printf(a, "%s_w", t->name), dt);
	Var *e = new_local(n->k, arena_printf(a, "%s_e", t->name), dt);
	IrExpr *cnt = ir_var(a, fr->acc), *k = ir_var(a, fr->wshift), *ev = ir_var(a, e);
	Stmt *s = let(n->k, v, k);
	kir_append(s, let(n->k, w, ir_float(a, dt, 0.0)));
	kir_append(s, with_split_cond(n, tensor_let(n, t, v, x), t, true));
	kir_append(s, tensor_let(n, t, w, ir_float(a, dt, 1.0)));
	IrExpr *first = ir_op(a, OP_EQ, DT_BOOL, cnt, ir_float(a, dt, 0.0));
	kir_append(s, let(n->k, fr->wshift, ir_select(a, first, ir_var(a, v), k)));
	kir_append(s, let(n->k, fr->acc, ir_op(a, OP_ADD, dt, cnt, ir_var(a, w))));
	kir_append(s, let(n->k, e, ir_op(a, OP_SUB, dt, ir_var(a, v), ir_var(a, fr->wshift))));
	kir_append(s, let(n->k, fr->wmean, ir_op(a, OP_ADD, dt, ir_var(a, fr->wmean), ev)));
	kir_append(s, let(n->k, fr->wm2,
			  ir_op(a, OP_ADD, dt, ir_var(a, fr->wm2), ir_op(a, OP_MUL, dt, ev, ev))));
	return s;
}

/* After the loops: the thread's mean k + s / n and M2 q - s * s / n (at least 0: rounding
 * can leave a tiny negative), the triple Chan's combination expects (n = 0: mean 0, M2 0). */
static Stmt *welford_finish(Nest *n, Frame *fr)
{
	Arena *a = n->a;
	DType dt = fr->acc->dtype;
	Var *r = new_local(n->k, arena_printf(a, "%s_r", fr->t->name), dt);
	IrExpr *sum = ir_var(a, fr->wmean), *zero = ir_float(a, dt, 0.0);
	IrExpr *cnt = ir_op(a, OP_MAX, dt, ir_var(a, fr->acc), ir_float(a, dt, 1.0));
	Stmt *s = let(n->k, r, ir_op(a, OP_DIV, dt, sum, cnt));
	IrExpr *dev = ir_op(a, OP_SUB, dt, ir_var(a, fr->wm2), ir_op(a, OP_MUL, dt, sum, ir_var(a, r)));
	kir_append(s, let(n->k, fr->wm2, ir_op(a, OP_MAX, dt, dev, zero)));
	kir_append(s, let(n->k, fr->wmean, ir_op(a, OP_ADD, dt, ir_var(a, fr->wshift), ir_var(a, r))));
	return s;
}

/* The rest of the first tensor's nest of a pair (welford(), online()) after `list`, its
 * accumulators' identities: the loops, the block combination `br` (at the directive) when
 * reduction axes are bound to threads, the store of `value`; `second` is the local the pair's
 * second tensor stores (pair_store). */
static Stmt *pair_nest(Nest *n, Frame *fr, int pos, Stmt *list, Stmt *br, Span at,
		       IrExpr *value, Var *second)
{
	Tensor *t = fr->t;
	list = kir_append(list, pos == t->ndomain ? innermost(n, fr) : open_axis(n, fr, pos));
	if (fr->wshift)
		list = kir_append(list, welford_finish(n, fr));
	if (fr->threads) {
		br->span = at;
		list = kir_append(list, br);
	}
	list = kir_append(list, store(n, t, value));
	vec_push(n->a, &n->wsums, t);
	vec_push(n->a, &n->wm2s, second);
	fr->acc = fr->wmean = fr->wm2 = fr->osum = fr->wshift = NULL;
	return list;
}

/* s1's accumulation as (count, mean, M2): zeros, the loops with the shifted sums
 * (welford_update), the thread's mean and M2 from them (welford_finish), the block
 * combination when reduction axes are bound to threads, then s1 = mean * count (the sum its
 * readers expect); s2's store, in its own place, reads the M2 (pair_store). */
static Stmt *welford_nest(Nest *n, Frame *fr, int pos)
{
	Arena *a = n->a;
	Tensor *t = fr->t;
	DType dt = acc_dtype(t);
	fr->acc = new_local(n->k, arena_printf(a, "%s_n", t->name), dt);
	fr->wmean = new_local(n->k, arena_printf(a, "%s_mean", t->name), dt);
	fr->wm2 = new_local(n->k, arena_printf(a, "%s_m2", t->name), dt);
	fr->wshift = new_local(n->k, arena_printf(a, "%s_k", t->name), dt);
	Stmt *list = let(n->k, fr->acc, ir_float(a, dt, 0.0));
	kir_append(list, let(n->k, fr->wshift, ir_float(a, dt, 0.0)));
	kir_append(list, let(n->k, fr->wmean, ir_float(a, dt, 0.0)));
	kir_append(list, let(n->k, fr->wm2, ir_float(a, dt, 0.0)));
	Stmt *br = kir_block_welford(n->k, fr->acc, fr->wmean, fr->wm2, fr->threads);
	IrExpr *sum = ir_op(a, OP_MUL, dt, ir_var(a, fr->wmean), ir_var(a, fr->acc));
	return pair_nest(n, fr, pos, list, br, t->sched.welford_span, sum, fr->wm2);
}

/* The second tensor of a pair stores what its first one's pass left (built before it: the
 * first is computed at the same loop, earlier): welford()'s s2 the M2, online()'s s the sum. */
static Stmt *pair_store(Nest *n, Tensor *t, Tensor *first)
{
	for (int i = 0; i < n->wsums.len; i++)
		if (n->wsums.items[i] == first)
			return store(n, t, ir_var(n->a, VEC_AT(n->wm2s, Var, i)));
	die("loop_nest: %s before its pair's first tensor %s", t->name, first->name);
}

/* ---- online max and sum (s.online(), scheduler/welford.c) ------------------------------- */

/* The online update of m's (max, sum) with one element x. Only the read is predicated: a lane
 * out of bounds combines the identity (-inf, 0) instead, so the update is straight-line code
 * and the compiler issues the unrolled loop's loads together (with the update inside each
 * element's `if`, nvcc branched around every element and each load waited for the one
 * before: logsumexp at 1872 GB/s reading the row once, slower than two passes):
 *   w = -inf; c = 0;  if (in bounds) { v = x; w = v; c = 1; }   (v, w, c: one predicate group)
 *   take = w > max || w != w;  lo = take ? max : w;  max = take ? w : max;
 *   q = exp(lo - max);  e = lo == max ? 1 : q;  sum = take ? sum * e + c : sum + c * e
 * The smaller of the old max and w is rescaled to the larger: one exp per element. lo == max
 * gives e = 1 instead of exp(-inf - -inf) (a -inf element before any finite one counts 1
 * until a finite max rescales it to 0); a NaN takes over the max and makes the sum NaN, as
 * in the two passes. */
static Stmt *online_update(Nest *n, Frame *fr, IrExpr *x)
{
	Arena *a = n->a;
	Tensor *t = fr->t;
	DType dt = fr->acc->dtype;
	Var *v = new_local(n->k, arena_printf(a, "%s_v", t->name), dt);
	Var *w = new_local(n->k, arena_printf(a, "%s_w", t->name), dt);
	Var *c = new_local(n->k, arena_printf(a, "%s_c", t->name), dt);
	Var *take = new_local(n->k, arena_printf(a, "%s_take", t->name), DT_BOOL);
	Var *lo = new_local(n->k, arena_printf(a, "%s_lo", t->name), dt);
	Var *q = new_local(n->k, arena_printf(a, "%s_q", t->name), dt);
	Var *e = new_local(n->k, arena_printf(a, "%s_e", t->name), dt);
	IrExpr *wv = ir_var(a, w), *cv = ir_var(a, c), *max = ir_var(a, fr->acc);
	IrExpr *sum = ir_var(a, fr->osum), *tk = ir_var(a, take), *one = ir_float(a, dt, 1.0);
	Stmt *s = let(n->k, w, ir_float(a, dt, -INFINITY));
	kir_append(s, let(n->k, c, ir_float(a, dt, 0.0)));
	kir_append(s, with_split_cond(n, tensor_let(n, t, v, x), t, true));
	kir_append(s, tensor_let(n, t, w, ir_var(a, v)));
	kir_append(s, tensor_let(n, t, c, one));
	IrExpr *gt = ir_op(a, OP_GT, DT_BOOL, wv, max), *nan = ir_op(a, OP_NE, DT_BOOL, wv, wv);
	kir_append(s, let(n->k, take, ir_op(a, OP_OR, DT_BOOL, gt, nan)));
	kir_append(s, let(n->k, lo, ir_select(a, tk, max, wv)));
	kir_append(s, let(n->k, fr->acc, ir_select(a, tk, wv, max)));
	kir_append(s, let(n->k, q, ir_op(a, OP_EXP, dt, ir_op(a, OP_SUB, dt, ir_var(a, lo), max), NULL)));
	IrExpr *same = ir_op(a, OP_EQ, DT_BOOL, ir_var(a, lo), max);
	kir_append(s, let(n->k, e, ir_select(a, same, one, ir_var(a, q))));
	IrExpr *ev = ir_var(a, e);
	IrExpr *grown = ir_op(a, OP_ADD, dt, ir_op(a, OP_MUL, dt, sum, ev), cv);
	IrExpr *kept = ir_op(a, OP_ADD, dt, sum, ir_op(a, OP_MUL, dt, cv, ev));
	kir_append(s, let(n->k, fr->osum, ir_select(a, tk, grown, kept)));
	return s;
}

/* m's accumulation as (max, sum): (-inf, 0), the loops with the online update, the block
 * combination when reduction axes are bound to threads, then m = max; s's store, in its own
 * place, reads the sum (pair_store). */
static Stmt *online_nest(Nest *n, Frame *fr, int pos)
{
	Arena *a = n->a;
	Tensor *t = fr->t;
	DType dt = acc_dtype(t);
	fr->acc = new_local(n->k, arena_printf(a, "%s_acc", t->name), dt);
	fr->osum = new_local(n->k, arena_printf(a, "%s_sum", t->name), dt);
	Stmt *list = let(n->k, fr->acc, reduce_init(a, RED_MAX, dt));
	kir_append(list, let(n->k, fr->osum, ir_float(a, dt, 0.0)));
	Stmt *br = kir_block_online(n->k, fr->acc, fr->osum, fr->threads);
	return pair_nest(n, fr, pos, list, br, t->sched.online_span, ir_var(a, fr->acc), fr->osum);
}

static Stmt *innermost(Nest *n, Frame *fr)
{
	Tensor *t = fr->t;
	IrExpr **map = root_values(n, t, t->nroot);
	if (fr->in_place)
		return accumulate_in_place(n, t, map);
	/* the first statement of a group carries its split conditions (guard() takes the group) */
	if (fr->wmean) /* as online's: its read carries the split conditions */
		return welford_update(n, fr, translate(n, t->def->args[0], map, t->nroot));
	if (fr->osum) /* its read carries the split conditions */
		return online_update(n, fr, translate(n, t->def->args[0], map, t->nroot));
	if (fr->acc) {
		Stmt *s = accumulate(n, t, fr->acc, translate(n, t->def->args[0], map, t->nroot));
		/* the predicate pass keeps threads beyond t's bound extents out of the sum */
		s->let.tensor = t;
		return with_split_cond(n, s, t, true);
	}
	return with_split_cond(n, kir_store(n->k, t, map, t->ndim, translate(n, t->def, map, t->nroot)),
			       t, true);
}

/* The loop (or parallel index) of domain axis `pos` around the rest of the nest. */
static Stmt *open_axis(Nest *n, Frame *fr, int pos)
{
	Axis *ax = fr->t->domain[pos];
	if (ax->ca_alias)
		return build(n, fr, pos + 1); /* the consumer's loop, already open */
	if (ax->par != PT_SERIAL) {
		push(n, ax, ir_par(n->a, ax->par));
		Stmt *s = build(n, fr, pos + 1);
		pop_to(n, n->nenv - 1);
		return s;
	}
	Var *v = kir_new_var(n->k, ax->name, DT_I64);
	v->axis = ax;
	push(n, ax, ir_var(n->a, v));
	Stmt *body = build(n, fr, pos + 1);
	pop_to(n, n->nenv - 1);
	return bounded_for(n, v, ax, body);
}

static Stmt *build(Nest *n, Frame *fr, int pos)
{
	Tensor *t = fr->t;
	Stmt *list = NULL;
	if (!n->ok)
		return NULL;
	/* pos - 1 == -1: the producers computed at the top of t's nest (t has no loops to share) */
	if (pos == 0 || !t->domain[pos - 1]->ca_alias)
		list = producers_at(n, t, pos - 1);
	if (pos == fr->rstart && fr->in_place) {
		list = kir_append(list, init_in_place(n, t, pos));
		return kir_append(list, open_axis(n, fr, pos));
	}
	if (pos == fr->rstart && t->sched.welford_sum)
		return kir_append(list, pair_store(n, t, t->sched.welford_sum));
	if (pos == fr->rstart && t->sched.welford_var)
		return kir_append(list, welford_nest(n, fr, pos));
	if (pos == fr->rstart && t->sched.online_max)
		return kir_append(list, pair_store(n, t, t->sched.online_max));
	if (pos == fr->rstart && t->sched.online_sum)
		return kir_append(list, online_nest(n, fr, pos));
	if (pos == fr->rstart && tensor_is_reduction(t)) {
		Var *acc = new_local(n->k, arena_printf(n->a, "%s_acc", t->name), acc_dtype(t));
		list = kir_append(list, let(n->k, acc, reduce_init(n->a, t->def->red, acc->dtype)));
		fr->acc = acc;
		list = kir_append(list, pos == t->ndomain ? innermost(n, fr) : open_axis(n, fr, pos));
		if (fr->threads) {
			/* each thread has its partial over the serial reduction loops */
			Stmt *br = kir_block_reduce(n->k, acc, t->def->red, fr->threads);
			br->span = fr->threads_span;
			list = kir_append(list, br);
		}
		list = kir_append(list, store(n, t, ir_var(n->a, acc)));
		fr->acc = NULL;
		return list;
	}
	if (pos == t->ndomain)
		return kir_append(list, innermost(n, fr));
	return kir_append(list, open_axis(n, fr, pos));
}

static Stmt *build_tensor(Nest *n, Tensor *t)
{
	Frame fr = {.t = t};
	fr.rstart = reduction_start(n, t, &fr.in_place);
	if (tensor_is_reduction(t))
		fr.threads = reduced_threads(n, t, &fr.threads_span);
	if (fr.in_place && fr.threads)
		error_once(n, fr.threads_span,
			   "a block reduction into a register buffer whose reduction loops are not "
			   "innermost is not supported yet (%s)", t->name);
	if (!n->ok)
		return NULL;
	/* Parallel axes are no loops: their values hold in the whole nest (a parallel axis may
	 * come after the accumulator's start, and the store after the loops needs it). */
	int saved = n->nenv;
	for (int i = 0; i < t->ndomain; i++)
		if (!t->domain[i]->ca_alias && t->domain[i]->par != PT_SERIAL)
			push(n, t->domain[i], ir_par(n->a, t->domain[i]->par));
	Stmt *s = build(n, &fr, 0);
	pop_to(n, saved);
	return s;
}

/* Every block reduction must find its thread groups in the launch (kir_block_reduce_shape). */
static void check_block_reduces(Nest *n, Stmt *s)
{
	for (; s; s = s->next) {
		BlockReduceShape sh;
		if (s->kind == KS_BLOCK_REDUCE &&
		    !kir_block_reduce_shape(n->k, s->block_red.pars, &sh))
			error_once(n, s->span,
				   "a block reduction over thread types that are not consecutive among "
				   "the launched ones (x, y, z) is not supported yet");
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			check_block_reduces(n, *lists[i]);
	}
}

/* ---- launch dims ---------------------------------------------------------------------- */

static void add_launch(Kernel *k, ParType p, IrExpr *extent)
{
	IrExpr *cur = k->launch[p];
	int64_t x, y;
	if (!cur || ir_equal(cur, extent))
		k->launch[p] = cur ? cur : extent;
	else if (ir_is_const(cur, &x) && ir_is_const(extent, &y))
		k->launch[p] = ir_int(k->arena, x > y ? x : y);
	else
		k->launch[p] = ir_op(k->arena, OP_MAX, DT_I64, cur, extent);
}

static bool is_nest_tensor(Tensor *t)
{
	return t->kind == TK_OUTPUT || (t->kind == TK_INTERMEDIATE && t->sched.ca_tensor);
}

/* The launch extent of each parallel type: the largest extent bound to it. A type that some
 * nest does not bind (through its own axes or its consumer's loops) launches at least 1, so
 * that nest runs when the others are empty (a 0-d total beside rows, M = 0). */
static void launch_dims(Kernel *k)
{
	Fusion *f = k->fusion;
	unsigned bound_by_all = ~0u, bound_by_any = 0;
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		if (!is_nest_tensor(t))
			continue;
		unsigned mask = 0;
		for (int j = 0; j < t->ndomain; j++) {
			Axis *ax = t->domain[j], *r = ax;
			while (r->ca_alias)
				r = r->ca_alias;
			if (r->par != PT_SERIAL)
				mask |= 1u << r->par;
			if (!ax->ca_alias && ax->par != PT_SERIAL)
				add_launch(k, ax->par, axis_launch_extent(k->arena, ax));
		}
		bound_by_all &= mask;
		bound_by_any |= mask;
	}
	for (ParType p = 0; p < PT_COUNT; p++)
		if ((bound_by_any & ~bound_by_all) & (1u << p))
			add_launch(k, p, ir_int(k->arena, 1));
}

bool pass_loop_nest(Kernel *k, Diag *d)
{
	Nest n = {.k = k, .a = k->arena, .d = d, .f = k->fusion, .ok = true};
	Fusion *f = k->fusion;
	Stmt *last = NULL; /* the end of k->body: appending stays linear in the outputs */
	find_producers(&n);
	for (int i = 0; i < f->ntensors && n.ok; i++) {
		Tensor *t = f->tensors[i];
		if (t->kind != TK_OUTPUT || t->sched.ca_tensor)
			continue;
		n.top = t;
		/* the marker tells later passes where each top-level nest starts */
		Stmt *mark = kir_nest_mark(k, t, stmt_span(t), arena_printf(k->arena, "nest of %s", t->name));
		mark->next = build_tensor(&n, t);
		if (last)
			last->next = mark;
		else
			k->body = mark;
		for (last = mark; last->next; last = last->next)
			;
	}
	if (!n.ok)
		return false;
	launch_dims(k);
	check_block_reduces(&n, k->body);
	return n.ok;
}
