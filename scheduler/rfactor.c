/* rfactor.c: `r = t.rfactor(a, ...)`: r reduces the listed axes, t reduces r over the rest
 * (docs/schedule.md, docs/reductions.md). Called from schedule.c.
 */
#include <math.h>
#include <string.h>

#include "scheduler/scheduler.h"

/* ---- rfactor ------------------------------------------------------------------------- */

/* t.rfactor(a, ...) -> r splits t's reduction in two (docs/schedule.md): r reduces the listed axes and
 * keeps t's other reduction axes (the "rest") as its own iteration axes; t then reduces r over
 * the rest. r's root axes are t's left-hand axes, then one per rest axis, then one per listed
 * axis (reduction); its definition is t's body with t's reduction indices rebuilt from those
 * leaves (split: outer * F + inner; merge: m / E and m % E). A non-divisible split gives
 * indices past the extent: the body is then `in range ? body : identity`. t's domain keeps its
 * non-reduction axes (and their transforms); each rest axis becomes a new root of t, with its
 * binding; the listed axes leave t. r holds partials in the accumulation dtype. */

typedef struct Rfactor {
	Axis **leaf;    /* t's reduction leaves (domain order) */
	IrExpr **val;   /* their EX_AXIS in r */
	int n;
	IrExpr *cond;   /* in-range condition of the rebuilt indices, or NULL */
} Rfactor;

static IrExpr *rf_value(Sched *s, Rfactor *rf, Axis *ax)
{
	for (int i = 0; i < rf->n; i++)
		if (rf->leaf[i] == ax)
			return rf->val[i];
	Axis *c = ax->to[0];
	if (c->kind == AX_SPLIT_OUTER) {
		Axis *in = ax->to[1];
		IrExpr *v = ix_add(s->a, ix_mul(s->a, rf_value(s, rf, c), ir_int(s->a, in->factor)),
				   rf_value(s, rf, in));
		int64_t e;
		if (!ir_is_const(ax->extent, &e) || e % in->factor)
			rf->cond = ix_and(s->a, rf->cond, ix_lt(s->a, v, ax->extent));
		return v;
	}
	IrExpr *m = rf_value(s, rf, c);
	IrExpr *e_inner = c->from[1]->extent;
	return ax == c->from[0] ? ix_div(s->a, NULL, m, e_inner) : ix_mod(s->a, NULL, m, e_inner);
}

typedef struct RfMap {
	Tensor *t;
	IrExpr **map; /* by t's root index */
} RfMap;

static IrExpr *rf_subst(Arena *a, IrExpr *e, void *ctx)
{
	RfMap *m = ctx;
	int k = e->kind == EX_AXIS ? e->axis->root_index : -1;
	if (k >= 0 && k < m->t->nroot && m->t->root[k] == e->axis)
		return m->map[k];
	return e;
}

static Axis *rf_root(Sched *s, Tensor *owner, Axis *like, int index, bool red, Span at)
{
	Axis *ax = sched_new_axis(s->a, owner, AX_ROOT, like->name, like->extent, at);
	ax->root_index = index;
	ax->reduction = red;
	return ax;
}

static IrExpr *reduce_identity(Arena *a, ReduceOp r, DType t)
{
	IrExpr *e;
	if (dtype_is_float(t))
		return ir_float(a, t, r == RED_MAX ? -INFINITY : r == RED_MIN ? INFINITY : 0.0);
	int64_t lo = t == DT_I32 ? INT32_MIN : t == DT_BOOL ? 0 : INT64_MIN;
	int64_t hi = t == DT_I32 ? INT32_MAX : t == DT_BOOL ? 1 : INT64_MAX;
	e = ir_int(a, r == RED_MAX ? lo : r == RED_MIN ? hi : 0);
	e->dtype = t;
	return e;
}

/* The checks: listed axes are distinct reduction axes of t's own domain, at least one
 * reduction axis stays with t, and t is in no compute_at relation yet. */
static bool rfactor_ok(Sched *s, Tensor *t, AstDirective *dir, Axis **listed)
{
	if (!tensor_is_reduction(t) || t->sched.cache_of) {
		diag_error(s->d, dir->tensor.span, "cannot rfactor '%s': it is not a reduction", t->name);
		return false;
	}
	if (t->sched.ca_tensor || sched_computed_at(s->f, t)) {
		diag_error(s->d, dir->span, "rfactor of '%s' must come before compute_at of it or into it",
			   t->name);
		return false;
	}
	int nred = 0;
	for (int i = 0; i < t->ndomain; i++)
		nred += t->domain[i]->reduction;
	for (int i = 0; i < dir->nargs; i++) {
		Axis *ax = sched_arg_axis(s, t, &dir->args[i]);
		if (!ax)
			return false;
		if (!ax->reduction) {
			diag_error(s->d, dir->args[i].span, "cannot rfactor '%s': it is not a reduction axis of '%s'",
				   ax->name, t->name);
			return false;
		}
		for (int j = 0; j < i; j++) {
			if (listed[j] == ax) {
				diag_error(s->d, dir->args[i].span, "axis '%s' is listed twice", ax->name);
				return false;
			}
		}
		listed[i] = ax;
	}
	if (dir->nargs >= nred) {
		diag_error(s->d, dir->span, "rfactor must leave '%s' at least one reduction axis; it lists all %d",
			   t->name, nred);
		return false;
	}
	/* a merge of a reduction axis with a non-reduction one cannot be split apart */
	for (int i = 0; i < t->history.len; i++) {
		Axis *h = VEC_AT(t->history, Axis, i);
		if (h->kind == AX_MERGE && h->from[0]->reduction != h->from[1]->reduction) {
			diag_error(s->d, dir->span, "cannot rfactor '%s': its axis '%s' merges a reduction axis with another axis",
				   t->name, h->name);
			return false;
		}
	}
	return true;
}

static bool is_listed(Axis **listed, int n, Axis *ax)
{
	for (int i = 0; i < n; i++)
		if (listed[i] == ax)
			return true;
	return false;
}

bool sched_rfactor(Sched *s, Tensor *t, AstDirective *dir)
{
	Axis **listed = arena_alloc(s->a, sizeof(Axis *) * (size_t)dir->nargs);
	if (!rfactor_ok(s, t, dir, listed) || !sched_check_new_name(s, dir->outs[0]))
		return false;
	int nl = dir->nargs, nrest = 0, ndim = t->ndim;
	for (int i = 0; i < t->ndomain; i++)
		nrest += t->domain[i]->reduction && !is_listed(listed, nl, t->domain[i]);
	Tensor *r = tensor_new(s->a, dir->outs[0].name, TK_INTERMEDIATE,
			       dtype_accum(t->def->red, t->dtype, t->def->args[0]->dtype), MEM_LOCAL,
			       dir->outs[0].span);
	r->ndim = ndim + nrest;
	r->nroot = ndim + nrest + nl;
	r->root = arena_alloc(s->a, sizeof(Axis *) * (size_t)r->nroot);
	r->shape = arena_alloc(s->a, sizeof(IrExpr *) * (size_t)r->ndim);
	r->def_span = t->def_span;
	r->sched.rfactor_of = t;
	for (int k = 0; k < ndim; k++)
		r->root[k] = rf_root(s, r, t->root[k], k, false, dir->span);
	/* r's axes for t's reduction leaves: the rest (iteration axes), then the listed ones */
	Rfactor rf = {arena_alloc(s->a, sizeof(Axis *) * (size_t)(nrest + nl)),
		      arena_alloc(s->a, sizeof(IrExpr *) * (size_t)(nrest + nl)), 0, NULL};
	Axis **t_new = arena_alloc(s->a, sizeof(Axis *) * (size_t)(ndim + nrest));
	int ir = ndim, il = ndim + nrest;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if (!ax->reduction)
			continue;
		bool l = is_listed(listed, nl, ax);
		int idx = l ? il++ : ir++;
		r->root[idx] = rf_root(s, r, ax, idx, l, dir->span);
		if (l) {
			/* a listed axis keeps its binding in r (a block reduction in r) */
			r->root[idx]->par = ax->par;
			r->root[idx]->par_span = ax->par_span;
		}
		rf.leaf[rf.n] = ax;
		rf.val[rf.n++] = ir_axis(s->a, r->root[idx]);
		if (!l) {
			/* the rest axis becomes a root of t, keeping its binding */
			Axis *nt = rf_root(s, t, ax, idx, true, ax->span);
			nt->par = ax->par;
			nt->par_span = ax->par_span;
			nt->unroll = ax->unroll;
			nt->unroll_span = ax->unroll_span;
			t_new[idx] = nt;
		}
	}
	for (int k = 0; k < r->ndim; k++)
		r->shape[k] = r->root[k]->extent;
	/* r's definition: t's body over r's axes */
	RfMap m = {t, arena_alloc(s->a, sizeof(IrExpr *) * (size_t)t->nroot)};
	for (int k = 0; k < t->nroot; k++)
		m.map[k] = k < ndim ? ir_axis(s->a, r->root[k]) : rf_value(s, &rf, t->root[k]);
	IrExpr *body = ir_rewrite(s->a, t->def->args[0], rf_subst, &m);
	if (rf.cond)
		body = ir_select(s->a, rf.cond, body, reduce_identity(s->a, t->def->red, body->dtype));
	IrExpr *rd = NEW(s->a, IrExpr);
	*rd = *t->def;
	rd->args = arena_alloc(s->a, sizeof(IrExpr *));
	rd->args[0] = body;
	rd->nargs = 1;
	rd->nred = nl;
	rd->red_axes = r->root + ndim + nrest;
	rd->dtype = r->dtype;
	r->def = rd;
	r->domain = arena_alloc(s->a, sizeof(Axis *) * (size_t)r->nroot);
	memcpy(r->domain, r->root, sizeof(Axis *) * (size_t)r->nroot);
	r->ndomain = r->nroot;
	/* t reduces r over the rest axes */
	for (int k = 0; k < ndim; k++)
		t_new[k] = t->root[k];
	IrExpr **subs = arena_alloc(s->a, sizeof(IrExpr *) * (size_t)r->ndim);
	for (int k = 0; k < r->ndim; k++)
		subs[k] = ir_axis(s->a, t_new[k]);
	IrExpr *td = NEW(s->a, IrExpr);
	*td = *t->def;
	td->args = arena_alloc(s->a, sizeof(IrExpr *));
	td->args[0] = ir_access(s->a, r, subs, r->ndim);
	td->nargs = 1;
	td->nred = nrest;
	td->red_axes = t_new + ndim;
	/* t's domain: its non-reduction axes as they are, the rest axes as new roots */
	Axis **dom = arena_alloc(s->a, sizeof(Axis *) * (size_t)t->ndomain);
	int nd = 0;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if (!ax->reduction)
			dom[nd++] = ax;
		else if (!is_listed(listed, nl, ax))
			for (int j = 0; j < rf.n; j++)
				if (rf.leaf[j] == ax)
					dom[nd++] = t_new[rf.val[j]->axis->root_index];
	}
	Vec hist = {0};
	for (int i = 0; i < t->history.len; i++)
		if (!VEC_AT(t->history, Axis, i)->reduction)
			vec_push(s->a, &hist, VEC_AT(t->history, Axis, i));
	/* the tensors t read are read by r now */
	for (int i = 0; i < s->f->ntensors; i++) {
		Vec *rd_of = &s->f->tensors[i]->readers;
		for (int j = 0; j < rd_of->len; j++)
			if (VEC_AT(*rd_of, Tensor, j) == t)
				rd_of->items[j] = r;
	}
	vec_push(s->a, &r->readers, t);
	t->def = td;
	t->root = t_new;
	t->nroot = ndim + nrest;
	t->domain = dom;
	t->ndomain = nd;
	t->history = hist;
	sched_insert_tensor(s->a, s->f, r, t->index);
	return true;
}

