/* welford.c: the single-pass pairs of reductions: `s2.welford();`, Welford's single-pass
 * variance (docs/reductions.md, "Welford's single pass"), and `s.online();`, the online max
 * and sum of exponentials of softmax and logsumexp ("Online max and sum").
 *
 * Legal when s2 is the sum of squared deviations from the mean of another sum over the same
 * reduction indices:
 *
 *   s1[i] = sum(j: X);   mean[i] = s1[i] / C;   s2[i] = sum(j: D * D),  D = X - mean[i]
 *
 * looking through pointwise intermediates (inlined or not: the pattern is about values), with
 * C the number of elements s1 sums: a product of size symbols and constants equal to the
 * product of the reduced extents (`N`, `H * W` over a collapsed (H, W), `4096` over 64 x 64;
 * `s1 * (1 / C)`, `s1 / H / W` and `pow(D, 2)` are accepted too) and X the same expression
 * in both sums.
 * The directive records the pair (s2->welford_sum = s1, s1->welford_var = s2); the loop-nest
 * pass then computes (count, mean, M2) in s1's loops and s2 gets no loops of its own.
 *
 * online() is legal when s is the sum of exponentials of the distances to the row's max:
 *
 *   m[i] = max(j: X);   s[i] = sum(j: exp(X - m[i]))
 *
 * (pointwise intermediates looked through the same way, m a float max of s's dtype that is
 * not rounded when stored). It records s->online_max = m, m->online_sum = s; the loop-nest
 * pass computes (max, sum) in m's loops, rescaling the sum when the max grows.
 *
 * sched_check_welford runs on the final schedule: both tensors of each pair must be computed
 * at the same loop with the same loops of their own, no grid reduction, no rfactor.
 */
#include <math.h>

#include "scheduler/scheduler.h"

#define WELFORD_FORM \
	"s1 = sum(j: X); s2 = sum(j: (X - s1 / N) * (X - s1 / N)) with N the reduced extent"

/* ---- values: pointwise intermediates looked through ----------------------------------- */

static bool is_pointwise_def(Tensor *u)
{
	return u->kind != TK_INPUT && u->def && u->def->kind != EX_REDUCE;
}

/* e with the root axes of the tensor it defines replaced by map[root_index]. */
static IrExpr *subst(Arena *a, IrExpr *e, IrExpr **map, int n)
{
	if (e->kind == EX_AXIS && e->axis->root_index >= 0 && e->axis->root_index < n)
		return map[e->axis->root_index];
	IrExpr *c = NEW(a, IrExpr);
	*c = *e;
	if (e->nargs) {
		c->args = arena_alloc(a, sizeof(IrExpr *) * (size_t)e->nargs);
		for (int i = 0; i < e->nargs; i++)
			c->args[i] = subst(a, e->args[i], map, n);
	}
	return c;
}

/* e with every read of a pointwise defined tensor replaced by its definition. */
static IrExpr *expand(Arena *a, IrExpr *e)
{
	IrExpr *c = NEW(a, IrExpr);
	*c = *e;
	if (e->nargs) {
		c->args = arena_alloc(a, sizeof(IrExpr *) * (size_t)e->nargs);
		for (int i = 0; i < e->nargs; i++)
			c->args[i] = expand(a, e->args[i]);
	}
	if (c->kind == EX_ACCESS && is_pointwise_def(c->tensor))
		return expand(a, subst(a, c->tensor->def, c->args, c->nargs));
	return c;
}

/* Structural equality where root axes are equal by position (x's axis k of s1 is the same
 * index as axis k of s2: both are [rows..., reduction indices...]). */
static bool same(IrExpr *x, IrExpr *y)
{
	if (x->kind != y->kind || x->dtype != y->dtype || x->nargs != y->nargs)
		return false;
	switch (x->kind) {
	case EX_INT: if (x->ival != y->ival) return false; break;
	case EX_FLOAT: if (x->fval != y->fval) return false; break;
	case EX_PARAM: if (x->param != y->param) return false; break;
	case EX_SIZE: if (x->size != y->size) return false; break;
	case EX_AXIS:
		if (x->axis->root_index != y->axis->root_index ||
		    x->axis->reduction != y->axis->reduction)
			return false;
		break;
	case EX_ACCESS: if (x->tensor != y->tensor) return false; break;
	case EX_OP: if (x->op != y->op) return false; break;
	case EX_CAST: case EX_SELECT: break;
	default: return false;
	}
	for (int i = 0; i < x->nargs; i++)
		if (!same(x->args[i], y->args[i]))
			return false;
	return true;
}

static IrExpr *uncast(IrExpr *e)
{
	while (e->kind == EX_CAST)
		e = e->args[0];
	return e;
}

/* The value of a constant (integer or integral float) expression. */
static bool const_value(IrExpr *e, int64_t *v)
{
	e = uncast(e);
	if (e->kind == EX_FLOAT && e->fval == floor(e->fval) && fabs(e->fval) < 9e15) {
		*v = (int64_t)e->fval;
		return true;
	}
	return ir_is_const(e, v);
}

/* A count: size symbols (with repeats) and constants multiplied, in any order. */
typedef struct Count {
	int64_t unit;               /* the constants' product */
	struct SizeSym *sym[16];    /* the symbols */
	int nsym;
	bool other;                 /* a factor that is neither (N - 1, a parameter) */
} Count;

/* Adds the factors of e (a product of size symbols and positive integral constants, through
 * casts) to c; anything else sets c->other. */
static void count_factors(IrExpr *e, Count *c)
{
	int64_t v;
	e = uncast(e);
	if (e->kind == EX_OP && e->op == OP_MUL) {
		count_factors(e->args[0], c);
		count_factors(e->args[1], c);
	} else if (const_value(e, &v)) {
		c->other |= v <= 0 || __builtin_mul_overflow(c->unit, v, &c->unit);
	} else if (e->kind == EX_SIZE && c->nsym < countof(c->sym)) {
		c->sym[c->nsym++] = e->size;
	} else {
		c->other = true;
	}
}

/* c is the number of elements s1 sums: the product of its reduced extents, as the same
 * symbols (each as often) and the same constant product (`H * W`, `W * H`, `4 * N` for
 * extents 4 and N, `4096` for 64 and 64). */
static bool is_count(Tensor *s1, const Count *c)
{
	Count want = {.unit = 1};
	for (int k = s1->ndim; k < s1->nroot; k++)
		count_factors(s1->root[k]->extent, &want);
	if (want.other || c->other || want.unit != c->unit || want.nsym != c->nsym)
		return false;
	bool used[countof(c->sym)] = {0};
	for (int i = 0; i < want.nsym; i++) {
		int k = 0;
		while (k < c->nsym && (used[k] || c->sym[k] != want.sym[i]))
			k++;
		if (k == c->nsym)
			return false;
		used[k] = true;
	}
	return true;
}

/* m is s1[rows of s2] read at s2's own rows, in order. */
static bool reads_row(Tensor *s2, IrExpr *m, Tensor **s1)
{
	m = uncast(m);
	if (m->kind != EX_ACCESS || !tensor_is_reduction(m->tensor) || m->nargs != s2->ndim)
		return false;
	for (int k = 0; k < m->nargs; k++) {
		IrExpr *g = m->args[k];
		if (g->kind != EX_AXIS || g->axis->reduction || g->axis->root_index != k)
			return false;
	}
	*s1 = m->tensor;
	return true;
}

/* m = s1[..] divided by a count: `s1 / C`, `s1 * (1 / C)` (either order), or several such
 * divisions in turn (`s1 / H / W`); sets *s1 and adds the divisors' factors to *c. */
static bool is_mean(Tensor *s2, IrExpr *m, Tensor **s1, Count *c)
{
	m = uncast(m);
	if (reads_row(s2, m, s1))
		return true;
	if (m->kind != EX_OP)
		return false;
	if (m->op == OP_DIV) {
		count_factors(m->args[1], c);
		return is_mean(s2, m->args[0], s1, c);
	}
	if (m->op != OP_MUL)
		return false;
	for (int k = 0; k < 2; k++) {
		IrExpr *r = uncast(m->args[1 - k]);
		int64_t one;
		Count saved = *c;
		if (r->kind != EX_OP || r->op != OP_DIV || !const_value(r->args[0], &one) || one != 1)
			continue;
		count_factors(r->args[1], c);
		if (is_mean(s2, m->args[k], s1, c))
			return true;
		*c = saved;
	}
	return false;
}

/* The D of D * D or pow(D, 2), or NULL. */
static IrExpr *squared(IrExpr *b)
{
	int64_t two;
	b = uncast(b);
	if (b->kind != EX_OP)
		return NULL;
	if (b->op == OP_MUL && same(b->args[0], b->args[1]))
		return b->args[0];
	if (b->op == OP_POW && const_value(b->args[1], &two) && two == 2)
		return b->args[0];
	return NULL;
}

/* t's body reads the partial sums made by `t.rfactor(...) -> r` (r has t's statement). */
static Tensor *rfactored(Tensor *t)
{
	IrExpr *b = t->def && t->def->kind == EX_REDUCE ? uncast(t->def->args[0]) : NULL;
	if (b && b->kind == EX_ACCESS && tensor_is_reduction(b->tensor) &&
	    b->tensor->def_span.file == t->def_span.file && b->tensor->def_span.lo == t->def_span.lo &&
	    b->tensor->def_span.hi == t->def_span.hi)
		return b->tensor;
	return NULL;
}

static bool is_float_sum(Tensor *t)
{
	return t->def && t->def->kind == EX_REDUCE && t->def->red == RED_SUM &&
	       dtype_is_float(t->dtype);
}

/* Finds s1 for s2 = sum(j: (X - s1 / C)^2); else NULL and *why says what is missing (the
 * message of the directive's error). */
static Tensor *match(Arena *a, Tensor *s2, const char **why)
{
	const char *n2 = s2->name;
	if (!is_float_sum(s2)) {
		*why = arena_printf(a, "welford() needs '%s' to be a floating-point sum of squared deviations: " WELFORD_FORM,
				    n2);
		return NULL;
	}
	Tensor *r = rfactored(s2);
	if (r) {
		*why = arena_printf(a, "welford() does not support rfactor: '%s' was split into '%s'", n2,
				    r->name);
		return NULL;
	}
	IrExpr *d = squared(expand(a, s2->def->args[0]));
	if (!d) {
		*why = arena_printf(a, "welford() needs the body of '%s' to be a square D * D (or pow(D, 2)) of the deviation D = X - s1 / N: " WELFORD_FORM,
				    n2);
		return NULL;
	}
	d = uncast(d);
	Tensor *s1 = NULL;
	Count c = {.unit = 1};
	if (d->kind != EX_OP || d->op != OP_SUB || !is_mean(s2, d->args[1], &s1, &c)) {
		*why = arena_printf(a, "welford() needs the squared value in '%s' to be X - s1 / N, where s1 is a sum read at the same row and N its reduced extent: " WELFORD_FORM,
				    n2);
		return NULL;
	}
	if ((r = rfactored(s1))) {
		*why = arena_printf(a, "welford() does not support rfactor: '%s' was split into '%s'",
				    s1->name, r->name);
		return NULL;
	}
	if (!is_float_sum(s1) || s1->dtype != s2->dtype || s1->nroot != s2->nroot) {
		*why = arena_printf(a, "welford() needs '%s' to be a sum of the same dtype over as many indices as '%s'",
				    s1->name, n2);
		return NULL;
	}
	for (int k = s1->ndim; k < s1->nroot; k++) {
		if (!ir_equal(s1->root[k]->extent, s2->root[k]->extent)) {
			*why = arena_printf(a, "welford() needs '%s' and '%s' to reduce over the same extents",
				   s1->name, n2);
			return NULL;
		}
	}
	if (!is_count(s1, &c)) {
		*why = arena_printf(a, "welford() needs the mean to divide '%s' by the number of elements it sums (the product of its reduced extents)",
				    s1->name);
		return NULL;
	}
	if (!same(expand(a, s1->def->args[0]), d->args[0])) {
		*why = arena_printf(a, "welford() needs the value from which the mean is subtracted in '%s' to be the body of '%s' (the same expression X)",
				    n2, s1->name);
		return NULL;
	}
	if (s1->sched.welford_var) {
		*why = arena_printf(a, "welford() is already applied to '%s' with '%s'", s1->name,
				    s1->sched.welford_var->name);
		return NULL;
	}
	return s1;
}

Tensor *sched_welford_sum(Arena *a, Tensor *s2)
{
	const char *why;
	return s2->sched.welford_sum ? NULL : match(a, s2, &why);
}

bool sched_welford(Sched *s, Tensor *t, AstDirective *dir)
{
	if (t->sched.welford_sum) {
		diag_error(s->d, dir->span, "welford() is already applied to '%s'", t->name);
		return false;
	}
	const char *why = NULL;
	Tensor *s1 = match(s->a, t, &why);
	if (!s1) {
		diag_error(s->d, dir->span, "%s", why);
		return false;
	}
	t->sched.welford_sum = s1;
	t->sched.welford_span = dir->span;
	s1->sched.welford_var = t;
	s1->sched.welford_span = dir->span;
	return true;
}

/* ---- online(): m = max(j: X); s = sum(j: exp(X - m)) ---------------------------------- */

#define ONLINE_FORM "m = max(j: X); s = sum(j: exp(X - m))"

static bool is_float_max(Tensor *t)
{
	return t->def && t->def->kind == EX_REDUCE && t->def->red == RED_MAX &&
	       dtype_is_float(t->dtype);
}

/* Finds m for s = sum(j: exp(X - m[rows])), m = max(j: X); else NULL and *why says what is
 * missing (the message of the directive's error). */
static Tensor *online_match(Arena *a, Tensor *s, const char **why)
{
	const char *n = s->name;
	Tensor *m = NULL, *r;
	if (!is_float_sum(s)) {
		*why = arena_printf(a, "online() needs '%s' to be a floating-point sum of exponentials: " ONLINE_FORM, n);
		return NULL;
	}
	if ((r = rfactored(s))) {
		*why = arena_printf(a, "online() does not support rfactor: '%s' was split into '%s'", n, r->name);
		return NULL;
	}
	IrExpr *e = uncast(expand(a, s->def->args[0]));
	IrExpr *d = e->kind == EX_OP && (e->op == OP_EXP || e->op == OP_EXP_LOWP) ? uncast(e->args[0]) : NULL;
	if (!d) {
		*why = arena_printf(a, "online() needs the body of '%s' to be exp(X - m), with m the max of X over the same row: " ONLINE_FORM, n);
		return NULL;
	}
	if (d->kind != EX_OP || d->op != OP_SUB || !reads_row(s, d->args[1], &m) || !is_float_max(m)) {
		*why = arena_printf(a, "online() needs the exponent in '%s' to be X - m, where m is a max read at the same row: " ONLINE_FORM, n);
		return NULL;
	}
	if ((r = rfactored(m))) {
		*why = arena_printf(a, "online() does not support rfactor: '%s' was split into '%s'", m->name, r->name);
		return NULL;
	}
	if (m->dtype != s->dtype || m->dtype != m->def->dtype || m->nroot != s->nroot) {
		*why = arena_printf(a, "online() needs '%s' to be a max of the dtype of '%s' (%s), kept unrounded, over as many indices",
				    m->name, n, dtype_name(s->dtype));
		return NULL;
	}
	for (int k = m->ndim; k < m->nroot; k++) {
		if (!ir_equal(m->root[k]->extent, s->root[k]->extent)) {
			*why = arena_printf(a, "online() needs '%s' and '%s' to reduce over the same extents", m->name, n);
			return NULL;
		}
	}
	if (!same(expand(a, m->def->args[0]), d->args[0])) {
		*why = arena_printf(a, "online() needs the value from which the max is subtracted in '%s' to be the body of '%s' (the same expression X)", n, m->name);
		return NULL;
	}
	if (m->sched.online_sum) {
		*why = arena_printf(a, "online() is already applied to '%s' with '%s'", m->name, m->sched.online_sum->name);
		return NULL;
	}
	return m;
}

Tensor *sched_online_max(Arena *a, Tensor *s)
{
	const char *why;
	return s->sched.online_max ? NULL : online_match(a, s, &why);
}

bool sched_online(Sched *s, Tensor *t, AstDirective *dir)
{
	const char *why = NULL;
	if (t->sched.online_max) {
		diag_error(s->d, dir->span, "online() is already applied to '%s'", t->name);
		return false;
	}
	Tensor *m = online_match(s->a, t, &why);
	if (!m) {
		diag_error(s->d, dir->span, "%s", why);
		return false;
	}
	t->sched.online_max = m;
	t->sched.online_span = dir->span;
	m->sched.online_sum = t;
	m->sched.online_span = dir->span;
	return true;
}

/* ---- the final schedule ------------------------------------------------------------------ */

static Axis *grid_axis(Tensor *t)
{
	for (int i = 0; i < t->ndomain; i++)
		if (!t->domain[i]->ca_alias && t->domain[i]->reduction &&
		    par_is_block(t->domain[i]->par))
			return t->domain[i];
	return NULL;
}

/* "[i = y.i, jr: ceildiv(N, 128), tx: 128 threadIdx.x]": a tensor's loops with their
 * extents and bindings, for messages. */
static const char *loops_text(Arena *a, Tensor *t)
{
	Buf b = {0};
	buf_puts(&b, "[");
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		buf_printf(&b, "%s%s", i ? ", " : "", ax->name);
		if (ax->ca_alias) {
			buf_printf(&b, " = %s.%s", ax->ca_alias->owner->name, ax->ca_alias->name);
			continue;
		}
		buf_puts(&b, ": ");
		ir_print_expr(ax->extent, &b);
		if (ax->par != PT_SERIAL)
			buf_printf(&b, " %s", par_name(ax->par));
	}
	buf_puts(&b, "]");
	char *s = arena_strdup(a, b.s);
	buf_free(&b);
	return s;
}

/* The axes after the compute-at position must be reduction axes or bound ones (no serial
 * loop of the tensor's own outside its reduction), and match between s1 and s2. */
static bool check_loops(Sched *s, Tensor *s1, Tensor *s2, Span at, const char *verb)
{
	for (int k = 0; k < 2; k++) {
		Tensor *t = k ? s2 : s1;
		for (int i = 0; i < t->ndomain; i++) {
			Axis *ax = t->domain[i];
			if (!ax->ca_alias && !ax->reduction && ax->par == PT_SERIAL) {
				diag_error(s->d, at, "%s needs '%s' to have no serial loop of its own outside its reduction, but '%s' is one",
					   verb, t->name, ax->name);
				return false;
			}
		}
	}
	bool ok = s1->ndomain == s2->ndomain;
	for (int i = 0; ok && i < s1->ndomain; i++) {
		Axis *x = s1->domain[i], *y = s2->domain[i];
		ok = x->ca_alias == y->ca_alias && x->reduction == y->reduction && x->par == y->par &&
		     ir_equal(x->extent, y->extent);
	}
	if (!ok)
		diag_error(s->d, at, "%s needs '%s' and '%s' to have the same loops (the same splits, in the same order, and bindings of their reduction axes): '%s' has %s, '%s' has %s",
			   verb, s1->name, s2->name, s1->name, loops_text(s->a, s1), s2->name,
			   loops_text(s->a, s2));
	return ok;
}

/* The pair (s1, s2) of `verb` (welford(): s1 the sum, s2 the squares; online(): s1 the max,
 * s2 the sum), at its directive. */
static bool check_pair(Sched *s, Tensor *s1, Tensor *s2, Span at, const char *verb)
{
	Tensor *r;
	for (int k = 0; k < 2; k++) {
		Tensor *t = k ? s2 : s1;
		if ((r = rfactored(t))) {
			diag_error(s->d, at, "%s does not support rfactor: '%s' was split into '%s'",
				   verb, t->name, r->name);
			return false;
		}
		Axis *g = grid_axis(t);
		if (g) {
			diag_error(s->d, at, "%s does not support grid reductions: reduction axis '%s' of '%s' is bound to %s; bind it to threadIdx.* or leave it serial",
				   verb, g->name, t->name, par_name(g->par));
			return false;
		}
	}
	if (s1->kind != TK_INTERMEDIATE || s2->kind != TK_INTERMEDIATE || !s1->sched.ca_tensor ||
	    s1->sched.ca_tensor != s2->sched.ca_tensor || s1->sched.ca_pos != s2->sched.ca_pos) {
		diag_error(s->d, at, "%s needs '%s' and '%s' to be intermediates computed at the same loop of the same tensor (compute_at)",
			   verb, s1->name, s2->name);
		return false;
	}
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *u = s->f->tensors[i];
		if (u->sched.ca_tensor == s2) {
			diag_error(s->d, at, "%s removes the loops of '%s', but '%s' is computed at one of them",
				   verb, s2->name, u->name);
			return false;
		}
	}
	return check_loops(s, s1, s2, at, verb);
}

bool sched_check_welford(Sched *s)
{
	bool ok = true;
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *t = s->f->tensors[i];
		if (t->sched.welford_sum)
			ok &= check_pair(s, t->sched.welford_sum, t, t->sched.welford_span, "welford()");
		if (t->sched.online_max)
			ok &= check_pair(s, t->sched.online_max, t, t->sched.online_span, "online()");
	}
	return ok;
}
