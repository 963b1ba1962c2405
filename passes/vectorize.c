/* vectorize.c: a vectorized loop becomes vector accesses with a scalar tail.
 *
 * Runs after indexing and predication. A KS_FOR with `vectorize` (constant extent V, the lane
 * variable v) whose body is one store, possibly under ifs,
 *
 *     for v in [0, V) vectorize { if (pred(v)) dst[base + v] = value(v); }
 *
 * becomes
 *
 *     if (pred(0) && pred(V-1)) {            // the whole vector is in bounds
 *       T x_vec[V];  x_vec[0 : V] = x[bx : V];    one vector load per unit-stride read
 *       D dst_vec[V];
 *       for l in [0, V) unroll { dst_vec[l] = value(l) with x[bx + l] -> x_vec[l]; }
 *       dst[base : V] = dst_vec[0 : V];           one vector store
 *     } else {
 *       for v in [0, V) unroll { if (pred(v)) dst[base + v] = value(v); }   the tail
 *     }
 *
 * A plain copy `dst[base + v] = x[bx + v]` of one dtype is a single vector copy. A register
 * array wider than one vector access (32 bytes: the 8 f32 partials of a 16-byte f16 load,
 * scheduler/auto_outer.c's whole-tensor sum) is written lane by lane, in place; its reads of
 * other tensors are still vector loads. Reads whose offset does not depend on v stay scalar;
 * reads with another stride are read per lane. A predicate conjunct `e(v) < n` with e
 * increasing in v needs only lane V-1; any other conjunct that depends on v is checked at
 * lanes 0 and V-1.
 *
 * A vector access needs its first element at a multiple of V: every term of the base offset
 * must be a multiple of V. Constants are checked here; a size symbol that multiplies a loop or
 * parallel index (a row stride) becomes a launch-time precondition (PC_MULTIPLE), and so does
 * the alignment of each vectorized global pointer (PC_ALIGNED, V * element size bytes). Local
 * and shared buffers are aligned by the backend.
 */
#include <string.h>

#include "passes/passes.h"

typedef struct Vz {
	Kernel *k;
	Diag *d;
	Arena *a;
	Var *v;        /* the lane variable */
	int64_t V;
	Span span;     /* the vectorize directive */
	const char *where;
	const char *reason; /* of the preconditions (NULL: "vectorized access") */
	Stmt *pre;     /* vector loads and allocations of the vector path, in order */
	/* reads turned into vector loads: tensor, base offset, local copy */
	struct VLoad { Tensor *t; IrExpr *base; Tensor *local; } *loads;
	int nloads, cap;
} Vz;

/* The constant c with e = c * v + (terms without v); false if e is not of that form. */
static bool stride_of(IrExpr *e, Var *v, int64_t *c)
{
	int64_t l, r, k;

	if (!ir_mentions(e, v)) {
		*c = 0;
		return true;
	}
	if (e->kind == EX_VAR) {
		*c = 1;
		return true;
	}
	if (e->kind != EX_OP || dtype_is_float(e->dtype))
		return false;
	switch (e->op) {
	case OP_ADD:
	case OP_SUB:
		if (!stride_of(e->args[0], v, &l) || !stride_of(e->args[1], v, &r))
			return false;
		*c = e->op == OP_ADD ? l + r : l - r;
		return true;
	case OP_NEG:
		if (!stride_of(e->args[0], v, &l))
			return false;
		*c = -l;
		return true;
	case OP_MUL:
		for (int i = 0; i < 2; i++) {
			if (ir_is_const(e->args[i], &k) && stride_of(e->args[1 - i], v, &r)) {
				*c = k * r;
				return true;
			}
		}
		return false;
	default:
		return false;
	}
}

/* Whether e is a multiple of V for every value of its variables; size symbols it needs to be
 * multiples of V for that are pushed on `needs` (SizeSym*). */
static bool multiple_of(Arena *a, IrExpr *e, int64_t V, Vec *needs)
{
	int64_t c;

	if (ir_is_const(e, &c))
		return c % V == 0;
	switch (e->kind) {
	case EX_SIZE:
		vec_push(a, needs, e->size);
		return true;
	case EX_OP:
		break;
	default:
		return false;
	}
	switch (e->op) {
	case OP_ADD:
	case OP_SUB:
		return multiple_of(a, e->args[0], V, needs) && multiple_of(a, e->args[1], V, needs);
	case OP_NEG:
		return multiple_of(a, e->args[0], V, needs);
	case OP_MUL: {
		/* prefer the factor that needs nothing (a constant), then one that needs fewer
		 * sizes, then the right one: a row-major offset b * T * H is (b * T) * H, and the
		 * innermost extent H is what the row term t * H needs too (T % V would refuse
		 * sizes that H % V == 0 already makes aligned) */
		Vec n0 = {0}, n1 = {0};
		bool m0 = multiple_of(a, e->args[0], V, &n0);
		bool m1 = multiple_of(a, e->args[1], V, &n1);
		Vec *pick = m1 && (!m0 || n1.len <= n0.len) ? &n1 : m0 ? &n0 : NULL;
		if (!pick)
			return false;
		for (int i = 0; i < pick->len; i++)
			vec_push(a, needs, pick->items[i]);
		return true;
	}
	default:
		return false;
	}
}

/* ---- preconditions -------------------------------------------------------------------- */

static void add_precond(Vz *z, PrecondKind kind, Tensor *t, SizeSym *s)
{
	int64_t value = kind == PC_ALIGNED ? z->V * dtype_size(t->dtype) : z->V;
	Vec *pv = &z->k->preconds;

	for (int i = 0; i < pv->len; i++) {
		Precond *p = VEC_AT(*pv, Precond, i);
		if (p->kind == kind && p->tensor == t && p->size == s && p->value == value)
			return;
	}
	Precond *p = NEW(z->a, Precond);
	p->kind = kind;
	p->tensor = t;
	p->size = s;
	p->value = value;
	p->span = z->span;
	p->where = z->where;
	p->reason = z->reason ? z->reason : "vectorized access";
	vec_push(z->a, pv, p);
}

/* Records what a vector access to t at `base` needs at launch time. */
static void require(Vz *z, Tensor *t, Vec *needs)
{
	if (t->sched.mem == MEM_GLOBAL)
		add_precond(z, PC_ALIGNED, t, NULL);
	for (int i = 0; i < needs->len; i++)
		add_precond(z, PC_MULTIPLE, NULL, needs->items[i]);
}

/* Whether an access to t at offset `off` can be one vector access; sets *base. */
static bool vector_access(Vz *z, Tensor *t, IrExpr *off, IrExpr **base, Vec *needs)
{
	int64_t c, bytes = z->V * dtype_size(t->dtype);

	if (bytes != 2 && bytes != 4 && bytes != 8 && bytes != 16)
		return false;
	if (!stride_of(off, z->v, &c) || c != 1)
		return false;
	IrRange rg = ir_range_in(z->k);
	*base = ir_simplify(z->a, &rg, ir_subst(z->a, off, z->v, ir_int(z->a, 0)));
	return multiple_of(z->a, *base, z->V, needs);
}

/* A register array whose vector would be wider than one access (docs/schedule.md,
 * "vectorize"): written lane by lane. */
static bool wide_register(Vz *z, Tensor *t)
{
	return t->sched.mem == MEM_LOCAL && z->V * dtype_size(t->dtype) > 16;
}

/* ---- the vector path ------------------------------------------------------------------ */

static Tensor *local_array(Vz *z, const char *base, DType dt)
{
	const char *name = kir_new_var(z->k, arena_printf(z->a, "%s_vec", base), dt)->name;
	Tensor *t = tensor_buffer(z->a, name, dt, MEM_LOCAL, ir_int(z->a, z->V), z->span);
	z->pre = kir_append(z->pre, kir_alloc(z->k, t, MEM_LOCAL, ir_int(z->a, z->V)));
	return t;
}

static Stmt *vstore(Vz *z, Tensor *dst, IrExpr *off, Tensor *src, IrExpr *src_off)
{
	Stmt *s = NEW(z->a, Stmt);
	s->kind = KS_VSTORE;
	s->span = z->span;
	s->copy.tensor = dst;
	s->copy.mem = dst->sched.mem;
	s->copy.offset = off;
	s->copy.src = src;
	s->copy.src_offset = src_off;
	s->copy.vec = (int)z->V;
	return s;
}

/* A read turned into a lane of a vector load (one load per tensor and base). */
static IrExpr *load_fn(Arena *a, IrExpr *e, void *ctx)
{
	Vz *z = ctx;
	IrExpr *base;
	Vec needs = {0};

	if (e->kind != EX_LOAD || !vector_access(z, e->tensor, e->args[0], &base, &needs))
		return e;
	for (int i = 0; i < z->nloads; i++)
		if (z->loads[i].t == e->tensor && ir_equal(z->loads[i].base, base))
			return ir_load(a, z->loads[i].local, ir_var(a, z->v));
	if (z->nloads == z->cap) {
		z->cap = z->cap ? 2 * z->cap : 4;
		struct VLoad *n = arena_alloc(a, sizeof *n * (size_t)z->cap);
		if (z->nloads)
			memcpy(n, z->loads, sizeof *n * (size_t)z->nloads);
		z->loads = n;
	}
	Tensor *local = local_array(z, e->tensor->name, e->tensor->dtype);
	z->loads[z->nloads++] = (struct VLoad){e->tensor, base, local};
	z->pre = kir_append(z->pre, vstore(z, local, ir_int(a, 0), e->tensor, base));
	require(z, e->tensor, &needs);
	return ir_load(a, local, ir_var(a, z->v));
}

/* e with its reads vector loads (load_fn), but in a padded copy (Fusion.padded_operands)
 * those in the arms of a select: the select's condition is their bound (predicate.c), so
 * they are read per lane, after it. */
static IrExpr *map_loads(Vz *z, IrExpr *e)
{
	if (e->kind == EX_LOAD)
		return load_fn(z->a, e, z);
	if (!e->nargs)
		return e;
	bool lazy = e->kind == EX_SELECT && z->k->fusion->padded_operands;
	IrExpr *c = NEW(z->a, IrExpr);
	*c = *e;
	c->args = arena_alloc(z->a, sizeof(IrExpr *) * (size_t)e->nargs);
	for (int i = 0; i < e->nargs; i++)
		c->args[i] = lazy && i ? e->args[i] : map_loads(z, e->args[i]);
	return c;
}

/* The in-bounds path for `dst[base + v] = value`. */
static Stmt *vector_path(Vz *z, Stmt *store, IrExpr *base)
{
	Arena *a = z->a;
	IrExpr *val = store->store.value;
	Tensor *dst = store->store.tensor;
	IrExpr *sbase;
	Vec needs = {0};

	/* a plain copy of one dtype: one vector copy */
	if (val->kind == EX_LOAD && val->tensor->dtype == dst->dtype &&
	    vector_access(z, val->tensor, val->args[0], &sbase, &needs)) {
		require(z, val->tensor, &needs);
		return vstore(z, dst, base, val->tensor, sbase);
	}
	val = map_loads(z, val);
	Var *lane = kir_new_var(z->k, z->v->name, z->v->dtype);
	lane->extent = ir_int(a, z->V);
	Tensor *out = local_array(z, dst->name, dst->dtype);
	Stmt *st = NEW(a, Stmt);
	st->kind = KS_STORE;
	st->span = store->span;
	st->store.tensor = out;
	st->store.mem = MEM_LOCAL;
	st->store.offset = ir_var(a, lane);
	IrRange rg = ir_range_in(z->k);
	st->store.value = ir_simplify(a, &rg, ir_subst(a, val, z->v, ir_var(a, lane)));
	Stmt *loop = kir_for(z->k, lane, st);
	loop->loop.unroll = true;
	loop->span = z->span;
	Stmt *body = kir_append(z->pre, loop);
	return kir_append(body, vstore(z, dst, base, out, ir_int(a, 0)));
}

/* The in-bounds path for a register array wider than a vector (8 f32 partials of a
 * 16-byte f16 load): its lanes are written one by one, the reads of other tensors are
 * vector loads. */
static Stmt *lane_path(Vz *z, Stmt *store)
{
	Arena *a = z->a;
	IrExpr *val = map_loads(z, store->store.value);
	Var *lane = kir_new_var(z->k, z->v->name, z->v->dtype);
	lane->extent = ir_int(a, z->V);
	IrRange rg = ir_range_in(z->k);
	Stmt *st = NEW(a, Stmt);
	*st = *store;
	st->next = NULL;
	st->store.offset = ir_simplify(a, &rg, ir_subst(a, store->store.offset, z->v, ir_var(a, lane)));
	st->store.value = ir_simplify(a, &rg, ir_subst(a, val, z->v, ir_var(a, lane)));
	Stmt *loop = kir_for(z->k, lane, st);
	loop->loop.unroll = true;
	loop->span = z->span;
	return kir_append(z->pre, loop);
}

/* ---- the guard ------------------------------------------------------------------------ */

/* cond at the lanes that bound it (see the file comment); NULL when always true. */
static IrExpr *vector_guard(Vz *z, IrExpr *cond)
{
	Arena *a = z->a;
	IrExpr *first = ir_int(a, 0), *last = ir_int(a, z->V - 1);
	IrRange rg = ir_range_in(z->k);
	int64_t c;

	if (!cond)
		return NULL;
	if (cond->kind == EX_OP && cond->op == OP_AND)
		return ix_and(a, vector_guard(z, cond->args[0]), vector_guard(z, cond->args[1]));
	if (!ir_mentions(cond, z->v))
		return cond;
	if (cond->kind == EX_OP && (cond->op == OP_LT || cond->op == OP_LE) &&
	    stride_of(cond->args[0], z->v, &c) && c >= 0 && !ir_mentions(cond->args[1], z->v))
		return ir_simplify(a, &rg, ir_subst(a, cond, z->v, last));
	return ix_and(a, ir_simplify(a, &rg, ir_subst(a, cond, z->v, first)),
		      ir_simplify(a, &rg, ir_subst(a, cond, z->v, last)));
}

/* Whether cond at every lane is the guard (simplified with the launch facts: a column
 * `base + v < N` with base and N multiples of V is `base < N` at every lane): then the lanes
 * fail together, and the tail would do nothing. */
static bool lanes_agree(Vz *z, IrExpr *cond, IrExpr *guard)
{
	IrRange rg = ir_range_in(z->k);

	for (int64_t l = 0; l < z->V; l++)
		if (!ir_equal(ir_simplify(z->a, &rg, ir_subst(z->a, cond, z->v, ir_int(z->a, l))),
			      guard))
			return false;
	return true;
}

static const char *span_where(Diag *d, Arena *a, Span sp)
{
	int line, col;

	if (sp.file == 0)
		return NULL;
	diag_line_col(d, sp.file, sp.lo, &line, &col);
	const char *name = diag_file_name(d, sp.file);
	const char *slash = name ? strrchr(name, '/') : NULL;
	return arena_printf(a, "%s:%d:%d", slash ? slash + 1 : name ? name : "?", line, col);
}

/* The replacement for one vectorized loop, or NULL after an error. */
static Stmt *vectorize_loop(Kernel *k, Diag *d, Stmt *loop)
{
	Arena *a = k->arena;
	Axis *ax = loop->loop.var->axis;
	const char *name = ax ? ax->name : loop->loop.var->name;
	Vz z = {.k = k, .d = d, .a = a, .v = loop->loop.var};

	z.span = ax && ax->vectorize_span.file ? ax->vectorize_span : loop->span;
	z.where = span_where(d, a, z.span);
	if (!ir_is_const(loop->loop.var->extent, &z.V) || z.V < 1) {
		diag_error(d, z.span, "cannot vectorize '%s': its extent is not a constant", name);
		return NULL;
	}
	if (z.V == 1) { /* a vector of one element is the plain access */
		loop->loop.vectorize = false;
		loop->loop.unroll = true;
		loop->next = NULL;
		return loop;
	}
	/* the body: one store under zero or more ifs without else */
	IrExpr *cond = NULL;
	Stmt *s = kir_only_stmt(loop->loop.body);
	while (s && s->kind == KS_IF && !s->branch.els) {
		cond = ix_and(a, cond, s->branch.cond);
		s = kir_only_stmt(s->branch.then);
	}
	if (!s || s->kind != KS_STORE || !s->store.offset) {
		diag_error(d, z.span, "cannot vectorize '%s': its loop body is not a single store",
			   name);
		return NULL;
	}
	IrExpr *base;
	Vec needs = {0};
	int64_t c;
	Stmt *vec;
	if (wide_register(&z, s->store.tensor) && stride_of(s->store.offset, z.v, &c) && c == 1) {
		vec = lane_path(&z, s);
	} else if (!vector_access(&z, s->store.tensor, s->store.offset, &base, &needs)) {
		diag_error(d, z.span,
			   "cannot vectorize '%s': %s is not written as %lld contiguous elements "
			   "starting at a multiple of %lld", /* V >= 2 here */
			   name, s->store.tensor->name, (long long)z.V, (long long)z.V);
		return NULL;
	} else {
		require(&z, s->store.tensor, &needs);
		vec = vector_path(&z, s, base);
	}
	IrExpr *guard = vector_guard(&z, cond);
	if (!guard)
		return vec;
	if (lanes_agree(&z, cond, guard)) /* the lanes fail together: no tail */
		return kir_if(k, guard, vec, NULL);
	/* the tail: the original loop, lane by lane */
	loop->loop.vectorize = false;
	loop->loop.unroll = true;
	loop->next = NULL;
	Stmt *ifs = kir_if(k, guard, vec, loop);
	ifs->span = z.span;
	return ifs;
}

/* Rewrites every vectorized loop in the list at *link. */
static bool walk(Kernel *k, Diag *d, Stmt **link)
{
	bool ok = true;

	for (Stmt *s; (s = *link); link = &(*link)->next) {
		if (s->kind == KS_FOR && s->loop.vectorize && k->options->no_vectorize) {
			s->loop.vectorize = false; /* the per-lane form the tail uses */
			s->loop.unroll = true;
		}
		if (s->kind == KS_FOR && s->loop.vectorize) {
			Stmt *next = s->next;
			Stmt *r = vectorize_loop(k, d, s);
			if (!r) {
				ok = false;
				continue;
			}
			*link = r;
			while ((*link)->next)
				link = &(*link)->next;
			(*link)->next = next;
			continue;
		}
		if (s->kind == KS_FOR)
			ok &= walk(k, d, &s->loop.body);
		else if (s->kind == KS_IF)
			ok = walk(k, d, &s->branch.then) & walk(k, d, &s->branch.els) & ok;
	}
	return ok;
}

bool vectorize_stride(IrExpr *e, Var *v, int64_t *c)
{
	return stride_of(e, v, c);
}

bool vectorize_multiple(Arena *a, IrExpr *e, int64_t V)
{
	Vec needs = {0};
	return multiple_of(a, e, V, &needs) && needs.len == 0;
}

bool vectorize_access(Kernel *k, Diag *d, Var *v, int64_t V, Span span, const char *reason,
		      Tensor *t, IrExpr *off, IrExpr **base)
{
	Vz z = {.k = k, .d = d, .a = k->arena, .v = v, .V = V, .span = span, .reason = reason};
	Vec needs = {0};

	z.where = span_where(d, k->arena, span);
	if (!vector_access(&z, t, off, base, &needs))
		return false;
	require(&z, t, &needs);
	return true;
}

/* Launcher checks read best in signature order: pointers, then sizes. */
static int precond_rank(Precond *p)
{
	return p->kind == PC_ALIGNED ? p->tensor->param_index : 1000000 + p->size->index;
}

static void sort_preconds(Vec *v)
{
	for (int i = 1; i < v->len; i++) {
		void *x = v->items[i];
		int j = i;
		for (; j > 0 && precond_rank(v->items[j - 1]) > precond_rank(x); j--)
			v->items[j] = v->items[j - 1];
		v->items[j] = x;
	}
}

bool pass_vectorize(Kernel *k, Diag *d)
{
	bool ok = walk(k, d, &k->body);
	sort_preconds(&k->preconds);
	return ok;
}
