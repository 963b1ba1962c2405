/* schedule.c: applies a fusion's schedule block to its IR (docs/schedule.md), directive by directive, in
 * the order written. Each directive is checked completely before it changes anything, so a
 * rejected directive leaves the fusion as it was and the next ones are still checked: one run
 * reports every independent mistake. Vectorization is checked after the last directive (a
 * vectorized axis only has to be innermost in the final loop order).
 *
 * compute_at(t, u, a) replays on t the transforms of u that produce u's axes 0..pos(a)
 * (docs/design.md): t's root axes are first matched with u's root axes through the subscripts
 * with which u reads t (and take u's names), then each split/merge in u's history that is an
 * ancestor of a shared axis is applied to t's matching axes. t's new domain is u's first pos+1
 * axes (t's replayed axis, or a bare alias where t has none: a broadcast) followed by t's
 * remaining leaves.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "scheduler/scheduler.h"

/* X(enum suffix, name, argument kinds, usage): kinds 'n' name, 'i' integer, 'p' parallel type,
 * '*' one or more names, '?' the arguments after it are optional; NULL kinds: not supported
 * yet. */
#define SCHED_VERBS(X)                                                                     \
	X(SPLIT, "split", "ni", "split(axis, factor) -> (outer, inner)")                   \
	X(MERGE, "merge", "nn", "merge(outer, inner) -> name")                             \
	X(REORDER, "reorder", "*", "reorder(axis, axis, ...)")                             \
	X(BIND, "bind", "np", "bind(axis, blockIdx.x)")                                    \
	X(UNROLL, "unroll", "n", "unroll(axis)")                                           \
	X(VECTORIZE, "vectorize", "n", "vectorize(axis)")                                  \
	X(INLINE, "inline", "", "inline()")                                                \
	X(COMPUTE_AT, "compute_at", "nn", "compute_at(tensor, axis)")                      \
	X(MEMORY, "memory", "n", "memory(global|shared|local)")                            \
	X(CACHE_AFTER, "cache_after", "n", "NAME = tensor.cache_after(shared|local)")      \
	X(CACHE_BEFORE, "cache_before", "n", "NAME = tensor.cache_before(shared|local)")   \
	X(CP_ASYNC, "cp_async", "?n", "cp_async() or cp_async(cg)")                        \
	X(DOUBLE_BUFFER, "double_buffer", "", "double_buffer()")                           \
	X(STAGES, "stages", "i?i", "stages(n) or stages(n, prefetch)")                     \
	X(PAD, "pad", "i?i", "pad(n) or pad(n, every)")                                   \
	X(SWIZZLE, "swizzle", "n?i", "swizzle(128B), swizzle(64B) or swizzle(32B)[, row]")   \
	X(RFACTOR, "rfactor", "*", "rfactor(axis, ...) -> name")                          \
	X(WELFORD, "welford", "", "welford()")                                             \
	X(ONLINE, "online", "", "online()")                                                \
	X(MMA, "mma", "n?n", "mma(m16n8k16) or mma(m16n8k16, ldmatrix)")                                                \
	X(FRAGMENT, "fragment", "nn", "fragment(m, n)")                                   \
	X(INDEX64, "index64", "", "index64()")                                             \
	X(EVICT_FIRST, "evict_first", "", "evict_first()")                                 \
	X(RASTER, "raster", "nni", "raster(rows, cols, group)")

typedef enum Verb {
#define X(e, n, k, u) V_##e,
	SCHED_VERBS(X)
#undef X
	V_COUNT
} Verb;

static const struct {
	const char *name, *kinds, *usage;
} verbs[] = {
#define X(e, n, k, u) {n, k, u},
	SCHED_VERBS(X)
#undef X
};

#define MAX_THREADS 1024
#define MAX_GRID_YZ 65535

/* ---- helpers -------------------------------------------------------------------------- */

static const char *closest_verb(const char *s)
{
	const char *best = NULL;
	int bestd = 3;
	for (int i = 0; i < V_COUNT; i++) {
		int dd = edit_distance(s, verbs[i].name);
		if (dd < bestd) {
			bestd = dd;
			best = verbs[i].name;
		}
	}
	return best;
}

/* "[i, jo, ji]": a tensor's loop order, for notes. */
static const char *domain_text(Arena *a, Tensor *t)
{
	Buf b = {0};
	buf_puts(&b, "[");
	for (int i = 0; i < t->ndomain; i++)
		buf_printf(&b, "%s%s", i ? ", " : "", t->domain[i]->name);
	buf_puts(&b, "]");
	char *s = arena_strdup(a, b.s);
	buf_free(&b);
	return s;
}

Axis *sched_new_axis(Arena *a, Tensor *t, AxisKind kind, const char *name, IrExpr *extent,
		      Span at)
{
	Axis *ax = NEW(a, Axis);
	ax->kind = kind;
	ax->name = name;
	ax->span = at;
	ax->owner = t;
	ax->extent = extent;
	ax->par = PT_SERIAL;
	return ax;
}

/* Replaces domain[pos .. pos+nold) with the axes in `with`. */
static void domain_replace(Arena *a, Tensor *t, int pos, int nold, Axis **with, int nnew)
{
	int n = t->ndomain - nold + nnew;
	Axis **d = arena_alloc(a, sizeof(Axis *) * (n ? n : 1));
	memcpy(d, t->domain, sizeof(Axis *) * pos);
	if (nnew)
		memcpy(d + pos, with, sizeof(Axis *) * nnew);
	memcpy(d + pos + nnew, t->domain + pos + nold, sizeof(Axis *) * (t->ndomain - pos - nold));
	t->domain = d;
	t->ndomain = n;
}

/* A domain name already taken (other than by `except`): the new name would be ambiguous. */
static Axis *name_taken(Tensor *t, const char *name, Axis *except)
{
	for (int i = 0; i < t->ndomain; i++)
		if (t->domain[i] != except && strcmp(t->domain[i]->name, name) == 0)
			return t->domain[i];
	return NULL;
}

/* A bound, unrolled or vectorized axis keeps its attribute only while it is a leaf. */
static bool transformable(Diag *d, Axis *ax, const char *verb, Span at)
{
	const char *why = ax->par != PT_SERIAL ? par_name(ax->par) : ax->vectorize ? "vectorized"
			: ax->unroll ? "unrolled" : NULL;
	if (!why)
		return true;
	if (ax->par != PT_SERIAL)
		diag_error(d, at, "cannot %s '%s': it is already bound to %s", verb, ax->name, why);
	else
		diag_error(d, at, "cannot %s '%s': it is already %s", verb, ax->name, why);
	return false;
}

/* ---- the directives as operations on the IR ------------------------------------------ */

bool sched_split(Arena *a, Diag *d, Tensor *t, Axis *ax, int64_t factor, const char *outer,
		 const char *inner, Span at)
{
	int pos = tensor_axis_pos(t, ax);
	if (pos < 0)
		die("split of an axis outside the domain");
	if (factor <= 0) {
		diag_error(d, at, "split factor must be a positive integer, not %lld", (long long)factor);
		return false;
	}
	if (strcmp(outer, inner) == 0 || name_taken(t, outer, ax) || name_taken(t, inner, ax)) {
		const char *n = strcmp(outer, inner) == 0 || name_taken(t, outer, ax) ? outer : inner;
		diag_error(d, at, "axis name '%s' is already used in '%s' %s", n, t->name,
			   domain_text(a, t));
		return false;
	}
	if (!transformable(d, ax, "split", at))
		return false;
	IrExpr *f = ir_int(a, factor);
	Axis *o = sched_new_axis(a, t, AX_SPLIT_OUTER, outer, ix_ceildiv(a, NULL, ax->extent, f), at);
	Axis *in = sched_new_axis(a, t, AX_SPLIT_INNER, inner, f, at);
	o->from[0] = in->from[0] = ax;
	o->factor = in->factor = factor;
	o->reduction = in->reduction = ax->reduction;
	ax->to[0] = o;
	ax->to[1] = in;
	Axis *with[2] = {o, in};
	domain_replace(a, t, pos, 1, with, 2);
	vec_push(a, &t->history, o);
	vec_push(a, &t->history, in);
	return true;
}

bool sched_merge(Arena *a, Diag *d, Tensor *t, Axis *outer, Axis *inner, const char *name,
		 Span at)
{
	int po = tensor_axis_pos(t, outer), pi = tensor_axis_pos(t, inner);
	if (po < 0 || pi < 0)
		die("merge of an axis outside the domain");
	if (outer == inner || pi != po + 1) {
		diag_error(d, at, "cannot merge '%s' and '%s': they are not adjacent in '%s' %s%s",
			   outer->name, inner->name, t->name, domain_text(a, t),
			   pi + 1 == po ? " (the outer axis comes first)" : "");
		return false;
	}
	if (outer->reduction != inner->reduction) {
		diag_error(d, at, "cannot merge reduction axis '%s' with non-reduction axis '%s'",
			   outer->reduction ? outer->name : inner->name,
			   outer->reduction ? inner->name : outer->name);
		return false;
	}
	if (!transformable(d, outer, "merge", at) || !transformable(d, inner, "merge", at))
		return false;
	Axis *old = name_taken(t, name, NULL);
	if (old && old != outer && old != inner) {
		diag_error(d, at, "axis name '%s' is already used in '%s' %s", name, t->name,
			   domain_text(a, t));
		return false;
	}
	Axis *m = sched_new_axis(a, t, AX_MERGE, name, ix_mul(a, outer->extent, inner->extent), at);
	m->from[0] = outer;
	m->from[1] = inner;
	m->reduction = outer->reduction;
	outer->to[0] = inner->to[0] = m;
	domain_replace(a, t, po, 2, &m, 1);
	vec_push(a, &t->history, m);
	return true;
}

static int64_t thread_product(Tensor *t, Axis *extra)
{
	int64_t p = 1, v;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if ((par_is_thread(ax->par) || ax == extra) && ir_is_const(ax->extent, &v))
			p *= v;
	}
	return p;
}

/* The loop an axis runs as: after compute_at, a shared axis is its target's loop (through
 * every level of compute_at), whose binding is the loop's. */
static Axis *loop_of(Axis *ax)
{
	while (ax->ca_alias)
		ax = ax->ca_alias;
	return ax;
}

/* Does the tensor's value depend on its loop x? Not on a bare alias: a loop of the tensor it
 * is computed at over an index it does not have (build_ca_domain). */
static bool indexed(Axis *x)
{
	return !(x->ca_alias && x->kind == AX_ROOT && x->root_index < 0);
}

/* Does q's loop nest (its shared loops, then its own) contain loop l, as a loop q indexes? */
static bool nest_has(Tensor *q, Axis *l)
{
	for (int i = 0; i < q->ndomain; i++)
		if (loop_of(q->domain[i]) == l && indexed(q->domain[i]))
			return true;
	return false;
}

/* A parallel type binds at most one loop of a loop nest: two loops bound to threadIdx.x both
 * run as threadIdx.x, so only their diagonal runs. (A loop the tensor does not index may
 * share a type with one of its own: every thread computes the same, as in a tile copy
 * spread over threadIdx.x inside the reader's threadIdx.x loop over another index.) The
 * loop other than ax, indexed in some nest through ax (the loops around its tensor, or those
 * of a tensor computed inside ax), bound to p. */
static Axis *par_taken(Fusion *f, Axis *ax, ParType p)
{
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *q = f->tensors[i];
		if (!nest_has(q, ax))
			continue;
		for (int j = 0; j < q->ndomain; j++) {
			Axis *l = loop_of(q->domain[j]);
			if (l != ax && l->par == p && indexed(q->domain[j]))
				return l;
		}
	}
	return NULL;
}

/* A shared axis of a tensor computed inside loop l, bound on its own to another type than
 * l (the loop's binding is the one that runs: the two must agree). */
static Axis *shared_disagrees(Fusion *f, Axis *l, ParType p)
{
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *q = f->tensors[i];
		for (int j = 0; j < q->ndomain; j++) {
			Axis *x = q->domain[j];
			if (x->ca_alias && loop_of(x) == l && x->par != PT_SERIAL && x->par != p)
				return x;
		}
	}
	return NULL;
}

bool sched_bind(Fusion *f, Diag *d, Tensor *t, Axis *ax, ParType p, Span at)
{
	int64_t v = 0;
	bool is_const = ir_is_const(ax->extent, &v);
	if (ax->par != PT_SERIAL) {
		diag_error(d, at, "axis '%s' is already bound to %s", ax->name, par_name(ax->par));
		diag_note(d, ax->par_span, "bound here");
		return false;
	}
	for (int i = 0; i < t->ndomain; i++) {
		if (t->domain[i]->par == p) {
			diag_error(d, at, "%s is already bound in '%s' (to axis '%s')", par_name(p),
				   t->name, t->domain[i]->name);
			diag_note(d, t->domain[i]->par_span, "bound here");
			return false;
		}
	}
	Axis *l = par_taken(f, ax, p);
	if (l && nest_has(t, l)) {
		diag_error(d, at, "%s is already bound in the loops around '%s': it is computed inside loop '%s' of '%s', bound to %s",
			   par_name(p), t->name, l->name, l->owner->name, par_name(p));
		diag_note(d, l->par_span, "bound here");
		diag_note(d, (Span){0}, "a parallel type binds one loop of a loop nest; bind '%s.%s' to another one",
			  t->name, ax->name);
		return false;
	}
	if (l) {
		diag_error(d, at, "cannot bind '%s.%s' to %s: '%s' is computed inside it and binds its loop '%s' to %s",
			   t->name, ax->name, par_name(p), l->owner->name, l->name, par_name(p));
		diag_note(d, l->par_span, "bound here");
		diag_note(d, (Span){0}, "a parallel type binds one loop of a loop nest; bind '%s.%s' to another one",
			  t->name, ax->name);
		return false;
	}
	Axis *x = shared_disagrees(f, ax, p);
	if (x) {
		diag_error(d, at, "cannot bind '%s.%s' to %s: '%s', computed inside it, binds the same loop ('%s') to %s",
			   t->name, ax->name, par_name(p), x->owner->name, x->name, par_name(x->par));
		diag_note(d, x->par_span, "bound here");
		return false;
	}
	if (ax->vectorize) {
		diag_error(d, at, "cannot bind '%s': it is vectorized", ax->name);
		return false;
	}
	if (par_is_thread(p) && !is_const) {
		diag_error(d, at, "%s needs an axis of constant extent; '%s' has a symbolic extent (split it by a constant first)",
			   par_name(p), ax->name);
		return false;
	}
	if (par_is_thread(p) && thread_product(t, ax) > MAX_THREADS) {
		diag_error(d, at, "a block of %lld threads exceeds the limit of %d",
			   (long long)thread_product(t, ax), MAX_THREADS);
		return false;
	}
	if ((p == PT_BIDY || p == PT_BIDZ) && is_const && v > MAX_GRID_YZ) {
		diag_error(d, at, "%s extent %lld exceeds the limit of %d", par_name(p), (long long)v,
			   MAX_GRID_YZ);
		return false;
	}
	ax->par = p;
	ax->par_span = at;
	return true;
}

/* ---- directive checking --------------------------------------------------------------- */


/* Another tensor computed at t that shares axis ax (so ax cannot be transformed any more). */
static Tensor *shared_with(Fusion *f, Axis *ax)
{
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *p = f->tensors[i];
		for (int j = 0; j < p->ndomain; j++)
			if (p->domain[j]->ca_alias == ax)
				return p;
	}
	return NULL;
}

/* ---- consequences of a failed directive ------------------------------------------------- */

static const char *poison_key(Sched *s, const char *tensor, const char *axis)
{
	return axis ? arena_printf(s->a, "%s.%s", tensor, axis) : tensor;
}

/* Past this many names every unknown name counts as poisoned: the lookups stay cheap on a
 * schedule of thousands of failed directives, whose errors are past DIAG_MAX_ERRORS anyway. */
#define MAX_POISONED 256

static void poison(Sched *s, const char *tensor, const char *axis)
{
	if (s->poisoned.len < MAX_POISONED)
		vec_push(s->a, &s->poisoned, (void *)poison_key(s, tensor, axis));
	else
		s->poison_all = true;
}

/* Would a directive that failed have made this tensor (axis NULL) or axis of tensor? */
static bool poisoned(Sched *s, const char *tensor, const char *axis)
{
	if (s->poison_all)
		return true;
	const char *key = poison_key(s, tensor, axis);
	const char *any = axis ? poison_key(s, tensor, "*") : NULL;
	for (int i = 0; i < s->poisoned.len; i++) {
		const char *p = VEC_AT(s->poisoned, const char, i);
		if (strcmp(p, key) == 0 || (any && strcmp(p, any) == 0))
			return true;
	}
	return false;
}

/* Records what dir, which failed, would have named: its result tensor, the axes after `->`
 * (or their default names), and for a failed compute_at or rfactor every axis of its tensor
 * (the domain it would have had is unknown). */
static void poison_results(Sched *s, AstDirective *dir)
{
	const char *t = dir->tensor.name, *verb = dir->verb.name;
	bool rfactor = strcmp(verb, "rfactor") == 0;
	if (dir->result.name)
		poison(s, dir->result.name, NULL);
	for (int i = 0; i < dir->nouts; i++)
		poison(s, rfactor ? dir->outs[i].name : t, rfactor ? NULL : dir->outs[i].name);
	bool a0 = dir->nargs >= 1 && dir->args[0].kind == AA_NAME;
	bool a1 = dir->nargs >= 2 && dir->args[1].kind == AA_NAME;
	if (strcmp(verb, "split") == 0 && a0 && !dir->nouts) {
		poison(s, t, arena_printf(s->a, "%so", dir->args[0].name));
		poison(s, t, arena_printf(s->a, "%si", dir->args[0].name));
	}
	if (strcmp(verb, "merge") == 0 && a0 && a1 && !dir->nouts)
		poison(s, t, arena_printf(s->a, "%s%s", dir->args[0].name, dir->args[1].name));
	if (strcmp(verb, "compute_at") == 0 || rfactor)
		poison(s, t, "*");
}

/* An axis of the tensor's current domain named by argument `arg`, or NULL after an error
 * (reported, unless a failed directive would have made the axis). */
Axis *sched_arg_axis(Sched *s, Tensor *t, AstArg *arg)
{
	Axis *ax = tensor_find_axis(t, arg->name);
	if (ax)
		return ax;
	if (poisoned(s, t->name, arg->name))
		return NULL;
	diag_error(s->d, arg->span, "'%s' has no axis '%s'", t->name, arg->name);
	diag_note(s->d, t->def_span, "the axes of '%s' are %s", t->name, domain_text(s->a, t));
	return NULL;
}

/* Axes that belong to another tensor's loops after compute_at cannot be changed here; axes that
 * a compute_at copied cannot be transformed any more. */
bool sched_axis_changeable(Sched *s, Tensor *t, Axis *ax, Span at, bool transform)
{
	if (ax->ca_alias) {
		diag_error(s->d, at, "axis '%s' of '%s' is a loop of '%s' (compute_at); schedule it on '%s'",
			   ax->name, t->name, ax->ca_alias->owner->name, ax->ca_alias->owner->name);
		return false;
	}
	Tensor *p = transform ? shared_with(s->f, ax) : NULL;
	if (p) {
		diag_error(s->d, at, "axis '%s' of '%s' is shared with '%s' by compute_at; transform it before the compute_at",
			   ax->name, t->name, p->name);
		diag_note(s->d, p->sched.ca_span, "compute_at here");
		return false;
	}
	return true;
}

/* Argument count and kinds against the verb's signature. */
static bool check_args(Sched *s, AstDirective *dir, Verb v)
{
	const char *k = verbs[v].kinds;
	bool ok = true;
	if (strcmp(k, "*") == 0) {
		if (dir->nargs < 1) {
			diag_error(s->d, dir->span, "'%s' needs at least one axis: %s", verbs[v].name,
				   verbs[v].usage);
			return false;
		}
		for (int i = 0; i < dir->nargs; i++) {
			if (dir->args[i].kind != AA_NAME) {
				diag_error(s->d, dir->args[i].span, "expected an axis name");
				ok = false;
			}
		}
		return ok;
	}
	const char *opt = strchr(k, '?');
	int min = opt ? (int)(opt - k) : (int)strlen(k);
	int n = (int)strlen(k) - (opt != NULL);
	if (dir->nargs < min || dir->nargs > n) {
		if (min == n)
			diag_error(s->d, dir->span, "'%s' takes %d argument%s, not %d: %s", verbs[v].name,
				   n, n == 1 ? "" : "s", dir->nargs, verbs[v].usage);
		else
			diag_error(s->d, dir->span, "'%s' takes %d or %d arguments, not %d: %s",
				   verbs[v].name, min, n, dir->nargs, verbs[v].usage);
		return false;
	}
	for (int i = 0, ki = 0; i < dir->nargs; i++, ki++) {
		AstArg *g = &dir->args[i];
		if (k[ki] == '?')
			ki++;
		if (k[ki] == 'n' && g->kind != AA_NAME) {
			diag_error(s->d, g->span, "expected a name: %s", verbs[v].usage);
			ok = false;
		} else if (k[ki] == 'i' && g->kind != AA_INT) {
			diag_error(s->d, g->span, "expected an integer: %s", verbs[v].usage);
			ok = false;
		} else if (k[ki] == 'p' && g->kind != AA_DOTTED) {
			diag_error(s->d, g->span,
				   "expected a parallel type (blockIdx.x/y/z or threadIdx.x/y/z)");
			ok = false;
		}
	}
	return ok;
}

/* `NAME = t.verb(...)` and `-> (names)` are only for verbs that create something. */
static bool check_results(Sched *s, AstDirective *dir, Verb v)
{
	bool creates = v == V_CACHE_AFTER || v == V_CACHE_BEFORE;
	if (dir->result.name && !creates) {
		diag_error(s->d, dir->result.span, "'%s' does not create a tensor; remove '%s ='",
			   verbs[v].name, dir->result.name);
		return false;
	}
	if (!dir->result.name && creates) {
		diag_error(s->d, dir->span, "'%s' creates a tensor: name it, as in 'NAME = %s.%s(...)'",
			   verbs[v].name, dir->tensor.name, verbs[v].name);
		return false;
	}
	int allowed = v == V_SPLIT ? 2 : v == V_MERGE || v == V_RFACTOR ? 1 : 0;
	if (v == V_RFACTOR && dir->nouts == 0) {
		diag_error(s->d, dir->span, "'rfactor' creates a tensor: name it, as in '%s.rfactor(...) -> NAME'",
			   dir->tensor.name);
		return false;
	}
	if (dir->nouts == 0 || dir->nouts == allowed)
		return true;
	Span at = span_join(dir->outs[0].span, dir->outs[dir->nouts - 1].span);
	if (allowed == 0)
		diag_error(s->d, at, "'%s' does not name new axes; remove '->'", verbs[v].name);
	else
		diag_error(s->d, at, "'%s' makes %d ax%s, but %d name%s given: %s", verbs[v].name,
			   allowed, allowed == 1 ? "is" : "es", dir->nouts, dir->nouts == 1 ? " is" : "s are",
			   verbs[v].usage);
	return false;
}

static bool do_split(Sched *s, Tensor *t, AstDirective *dir)
{
	Axis *ax = sched_arg_axis(s, t, &dir->args[0]);
	if (!ax || !sched_axis_changeable(s, t, ax, dir->args[0].span, true))
		return false;
	int64_t f = dir->args[1].value;
	if (f <= 0) {
		diag_error(s->d, dir->args[1].span, "split factor must be a positive integer, not %lld",
			   (long long)f);
		return false;
	}
	/* a mistake in a written schedule; a generated one may cover a short row by a whole
	 * group of threads (predicated) */
	int64_t n;
	if (!s->generated && ir_is_const(ax->extent, &n) && f > n) {
		diag_error(s->d, dir->args[1].span, "split factor %lld is larger than the extent %lld "
			   "of '%s'", (long long)f, (long long)n, ax->name);
		return false;
	}
	const char *o = dir->nouts ? dir->outs[0].name : arena_printf(s->a, "%so", ax->name);
	const char *in = dir->nouts ? dir->outs[1].name : arena_printf(s->a, "%si", ax->name);
	Span names = dir->nouts ? span_join(dir->outs[0].span, dir->outs[1].span) : dir->span;
	for (int i = 0; i < 2; i++) {
		const char *n = i ? in : o;
		Axis *old = name_taken(t, n, ax);
		if (old || (i == 1 && strcmp(o, in) == 0)) {
			diag_error(s->d, dir->nouts ? dir->outs[i].span : names,
				   "axis name '%s' is already used in '%s' %s", n, t->name,
				   domain_text(s->a, t));
			return false;
		}
	}
	return sched_split(s->a, s->d, t, ax, f, o, in, dir->verb.span);
}

static bool do_merge(Sched *s, Tensor *t, AstDirective *dir)
{
	Axis *o = sched_arg_axis(s, t, &dir->args[0]);
	Axis *in = sched_arg_axis(s, t, &dir->args[1]);
	if (!o || !in)
		return false;
	if (!sched_axis_changeable(s, t, o, dir->args[0].span, true) ||
	    !sched_axis_changeable(s, t, in, dir->args[1].span, true))
		return false;
	const char *name = dir->nouts ? dir->outs[0].name : arena_printf(s->a, "%s%s", o->name, in->name);
	Axis *old = name_taken(t, name, NULL);
	if (old && old != o && old != in) {
		diag_error(s->d, dir->nouts ? dir->outs[0].span : dir->span,
			   "axis name '%s' is already used in '%s' %s", name, t->name,
			   domain_text(s->a, t));
		return false;
	}
	return sched_merge(s->a, s->d, t, o, in, name, dir->verb.span);
}

/* The listed axes take the listed relative order, in the positions they occupied. */
static bool do_reorder(Sched *s, Tensor *t, AstDirective *dir)
{
	int n = dir->nargs;
	Axis **axes = arena_alloc(s->a, sizeof(Axis *) * n);
	bool ok = true;
	for (int i = 0; i < n; i++) {
		axes[i] = sched_arg_axis(s, t, &dir->args[i]);
		if (!axes[i]) {
			ok = false;
			continue;
		}
		for (int j = 0; j < i; j++) {
			if (axes[j] == axes[i]) {
				diag_error(s->d, dir->args[i].span, "axis '%s' is listed twice",
					   axes[i]->name);
				ok = false;
			}
		}
		if (ok && !sched_axis_changeable(s, t, axes[i], dir->args[i].span, true))
			ok = false;
	}
	if (!ok)
		return false;
	bool *slot = arena_alloc(s->a, sizeof(bool) * (t->ndomain ? t->ndomain : 1));
	for (int i = 0; i < n; i++)
		slot[tensor_axis_pos(t, axes[i])] = true;
	Axis **d = arena_alloc(s->a, sizeof(Axis *) * t->ndomain);
	for (int i = 0, k = 0; i < t->ndomain; i++)
		d[i] = slot[i] ? axes[k++] : t->domain[i];
	t->domain = d;
	return true;
}

static bool do_bind(Sched *s, Tensor *t, AstDirective *dir)
{
	Axis *ax = sched_arg_axis(s, t, &dir->args[0]);
	ParType p;
	if (!par_from_name(dir->args[1].name, &p) || p == PT_SERIAL) {
		diag_error(s->d, dir->args[1].span,
			   "unknown parallel type '%s' (expected blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y or threadIdx.z)",
			   dir->args[1].name);
		return false;
	}
	if (!ax || !sched_axis_changeable(s, t, ax, dir->args[0].span, false))
		return false;
	return sched_bind(s->f, s->d, t, ax, p, dir->span);
}

static bool do_unroll_vectorize(Sched *s, Tensor *t, AstDirective *dir, bool vec)
{
	Axis *ax = sched_arg_axis(s, t, &dir->args[0]);
	if (!ax || !sched_axis_changeable(s, t, ax, dir->args[0].span, false))
		return false;
	const char *what = vec ? "vectorize" : "unroll";
	int64_t v, lo;
	/* an unrolled loop may have a symbolic extent with a constant bound (a size variant,
	 * SizeSym.bound): it runs to the bound under a guard (passes/loop_nest.c) */
	bool bounded = !vec && ir_range(NULL, ax->extent, &lo, &v);
	if (!ir_is_const(ax->extent, &v) && !bounded) {
		Buf b = {0};
		ir_print_expr(ax->extent, &b);
		diag_error(s->d, dir->args[0].span,
			   "cannot %s '%s': its extent %s is not a constant (split it by a constant first)",
			   what, ax->name, b.s ? b.s : "?");
		buf_free(&b);
		return false;
	}
	if (ax->par != PT_SERIAL) {
		diag_error(s->d, dir->args[0].span, "cannot %s '%s': it is bound to %s", what, ax->name,
			   par_name(ax->par));
		return false;
	}
	if (vec) {
		if (ax->reduction) {
			diag_error(s->d, dir->args[0].span, "cannot vectorize reduction axis '%s'",
				   ax->name);
			return false;
		}
		ax->vectorize = true;
		ax->vectorize_span = dir->span;
	} else {
		ax->unroll = true;
		ax->unroll_span = dir->span;
	}
	return true;
}

/* `t.index64()`: the fusion keeps 64-bit index arithmetic (Fusion.index64); any tensor of
 * the fusion may carry it, as it applies to all its kernels. */
static bool do_index64(Sched *s, AstDirective *dir)
{
	(void)dir;
	s->f->index64 = true;
	return true;
}

/* `x.evict_first()`: the loads of input x carry an L2 evict-first policy (TensorSched). */
static bool do_evict_first(Sched *s, Tensor *t, AstDirective *dir)
{
	if (t->kind != TK_INPUT) {
		diag_error(s->d, dir->tensor.span,
			   "cannot evict_first '%s': it is not an input (the hint is for the loads of an input read once)",
			   t->name);
		return false;
	}
	if (t->sched.evict_first) {
		diag_error(s->d, dir->span, "'%s' is already evict_first", t->name);
		diag_note(s->d, t->sched.evict_first_span, "first evict_first here");
		return false;
	}
	t->sched.evict_first = true;
	t->sched.evict_first_span = dir->span;
	return true;
}

static bool do_inline(Sched *s, Tensor *t, AstDirective *dir)
{
	if (t->kind == TK_OUTPUT) {
		diag_error(s->d, dir->span, "cannot inline output '%s': it must be written to memory",
			   t->name);
		return false;
	}
	if (tensor_is_reduction(t)) {
		diag_error(s->d, dir->span, "cannot inline reduction '%s'", t->name);
		return false;
	}
	if (t->sched.cache_of) {
		diag_error(s->d, dir->span, "cannot inline cache '%s': a cache is always stored",
			   t->name);
		diag_note(s->d, t->sched.cache_span, "'%s' is made here", t->name);
		return false;
	}
	t->sched.inlined = true;
	t->sched.inline_span = dir->span;
	t->sched.ca_tensor = NULL;
	return true;
}

/* A memory argument: global, shared or local. */
bool sched_parse_mem(Sched *s, AstArg *g, MemType *m)
{
	if (strcmp(g->name, "global") == 0)
		*m = MEM_GLOBAL;
	else if (strcmp(g->name, "shared") == 0)
		*m = MEM_SHARED;
	else if (strcmp(g->name, "local") == 0)
		*m = MEM_LOCAL;
	else {
		diag_error(s->d, g->span, "unknown memory '%s' (expected global, shared or local)",
			   g->name);
		return false;
	}
	return true;
}

static bool do_memory(Sched *s, Tensor *t, AstDirective *dir)
{
	AstArg *g = &dir->args[0];
	MemType m;
	if (!sched_parse_mem(s, g, &m))
		return false;
	if ((t->kind == TK_INPUT || t->kind == TK_OUTPUT) && m != MEM_GLOBAL) {
		diag_error(s->d, g->span, "%s '%s' must stay in global memory",
			   t->kind == TK_INPUT ? "input" : "output", t->name);
		return false;
	}
	if (t->kind == TK_INPUT || t->kind == TK_OUTPUT)
		return true;
	if (m == MEM_GLOBAL) {
		diag_error(s->d, g->span, "memory(global) for an intermediate is not supported yet");
		return false;
	}
	t->sched.mem = m;
	t->sched.mem_span = dir->span;
	return true;
}

/* ---- compute_at ----------------------------------------------------------------------- */

/* How u reads t, looking through inlined tensors (`y[i, j] = e[i, j] / s[i]` with e inlined
 * reads what e reads): for each dim of t, the u root axis that subscripts it (NULL for a
 * constant). Every read must agree, else t cannot follow one loop nest of u. */

static void collect_reads(ReadMap *m, IrExpr *e, Axis **map)
{
	if (!e)
		return;
	if (e->kind != EX_ACCESS) {
		for (int i = 0; i < e->nargs; i++)
			collect_reads(m, e->args[i], map);
		return;
	}
	Tensor *x = e->tensor;
	Axis **sub = arena_alloc(m->a, sizeof(Axis *) * (e->nargs ? e->nargs : 1));
	for (int k = 0; k < e->nargs; k++) {
		IrExpr *g = e->args[k];
		sub[k] = g->kind == EX_AXIS && g->axis->root_index >= 0 ? map[g->axis->root_index] : NULL;
	}
	if (x == m->t) {
		if (!m->found) {
			m->first = sub;
			m->found = true;
		}
		for (int k = 0; k < e->nargs; k++)
			m->differ |= sub[k] != m->first[k];
		return;
	}
	if (x->def && x->sched.inlined && x->kind != TK_OUTPUT && !tensor_is_reduction(x))
		collect_reads(m, x->def, sub);
}

/* An output t that output u does not read, computed in u's nest (a row group's other
 * outputs, docs/schedule.md): t's index k is u's index k, for t's indices, which must have
 * u's first extents. found false when they do not. */
static ReadMap output_map(Arena *a, Tensor *t, Tensor *u)
{
	ReadMap m = {a, t, u->root, false, false};
	if (t == u || t->kind != TK_OUTPUT || u->kind != TK_OUTPUT || t->ndim > u->nroot)
		return m;
	m.found = true;
	for (int k = 0; k < t->ndim; k++)
		m.found &= ir_equal(t->shape[k], u->root[k]->extent);
	return m;
}

/* How u reads t, or for an output that u does not read, output_map. */
ReadMap sched_read_map(Arena *a, Tensor *t, Tensor *u)
{
	ReadMap m = {a, t, NULL, false, false};
	collect_reads(&m, u->def, u->root);
	return m.found ? m : output_map(a, t, u);
}

/* Working state of a replay: map[i] is t's axis standing for u's axis umap[i]. */

void sched_replay_put(Arena *a, Replay *r, Axis *u, Axis *t)
{
	if (r->n == r->cap) {
		int cap = r->cap ? r->cap * 2 : 16;
		Axis **nu = arena_alloc(a, sizeof(Axis *) * cap), **nt = arena_alloc(a, sizeof(Axis *) * cap);
		if (r->n) {
			memcpy(nu, r->uaxes, sizeof(Axis *) * r->n);
			memcpy(nt, r->taxes, sizeof(Axis *) * r->n);
		}
		r->uaxes = nu;
		r->taxes = nt;
		r->cap = cap;
	}
	r->uaxes[r->n] = u;
	r->taxes[r->n++] = t;
}

Axis *sched_replay_get(Replay *r, Axis *u)
{
	for (int i = 0; i < r->n; i++)
		if (r->uaxes[i] == u)
			return r->taxes[i];
	return NULL;
}


/* Is x one of u.domain[0..pos] or an ancestor of one? */
static bool feeds(Axis *x, Axis *leaf)
{
	if (!leaf)
		return false;
	if (x == leaf)
		return true;
	return feeds(x, leaf->from[0]) || feeds(x, leaf->from[1]);
}

bool sched_is_ancestor_of_shared(Axis *x, Tensor *u, int pos)
{
	for (int i = 0; i <= pos; i++)
		if (feeds(x, u->domain[i]))
			return true;
	return false;
}

/* Step 1: t's root axes take the names of the u root axes they are read through. */
static bool map_roots(Sched *s, Tensor *t, Tensor *u, Replay *r, Span at)
{
	ReadMap m = sched_read_map(s->a, t, u);
	if (m.differ) {
		diag_error(s->d, at, "cannot compute '%s' at '%s': '%s' reads '%s' with different subscripts",
			   t->name, u->name, u->name, t->name);
		return false;
	}
	for (int k = 0; k < t->ndim; k++) {
		Axis *ux = m.first[k];
		if (!ux)
			continue;
		if (sched_replay_get(r, ux)) {
			diag_error(s->d, at, "cannot compute '%s' at '%s': '%s' reads '%s' with the index '%s' twice",
				   t->name, u->name, u->name, t->name, ux->name);
			return false;
		}
		sched_replay_put(s->a, r, ux, t->root[k]);
	}
	/* Rename (and make room): u's names for mapped axes, t's own names must not collide. */
	for (int k = 0; k < t->nroot; k++) {
		Axis *tx = t->root[k];
		for (int i = 0; i < r->n; i++)
			if (r->taxes[i] == tx)
				tx->name = r->uaxes[i]->name;
	}
	return true;
}

/* Step 2: replay u's transforms that produce the shared axes. */
static bool replay_history(Sched *s, Tensor *t, Tensor *u, int pos, Replay *r, Span at)
{
	for (int h = 0; h < u->history.len; h++) {
		Axis *ux = VEC_AT(u->history, Axis, h);
		if (ux->kind == AX_SPLIT_INNER)
			continue; /* handled with its outer half */
		bool needed = sched_is_ancestor_of_shared(ux, u, pos) ||
			       (ux->kind == AX_SPLIT_OUTER && sched_is_ancestor_of_shared(ux->from[0]->to[1], u, pos));
		if (!needed)
			continue;
		if (ux->kind == AX_SPLIT_OUTER) {
			Axis *src = sched_replay_get(r, ux->from[0]);
			if (!src)
				continue; /* t does not have this axis: u's loop is a bare alias */
			Axis *uin = ux->from[0]->to[1];
			if (!sched_split(s->a, s->d, t, src, ux->factor, ux->name, uin->name, at))
				return false;
			sched_replay_put(s->a, r, ux, src->to[0]);
			sched_replay_put(s->a, r, uin, src->to[1]);
		} else if (ux->kind == AX_MERGE) {
			Axis *x = sched_replay_get(r, ux->from[0]), *y = sched_replay_get(r, ux->from[1]);
			if (!x && !y)
				continue;
			if (!x || !y) {
				diag_error(s->d, at,
					   "cannot compute '%s' at '%s': '%s' merges '%s' and '%s', but '%s' has no axis for '%s'",
					   t->name, u->name, u->name, ux->from[0]->name, ux->from[1]->name,
					   t->name, (x ? ux->from[1] : ux->from[0])->name);
				return false;
			}
			/* Bring y right after x so the merge is adjacent, as in u. */
			int px = tensor_axis_pos(t, x), py = tensor_axis_pos(t, y);
			if (py != px + 1) {
				domain_replace(s->a, t, py, 1, NULL, 0);
				px = tensor_axis_pos(t, x);
				domain_replace(s->a, t, px + 1, 0, &y, 1);
			}
			if (!sched_merge(s->a, s->d, t, x, y, ux->name, at))
				return false;
			sched_replay_put(s->a, r, ux, x->to[0]);
		}
	}
	return true;
}

/* Step 3: the new domain: u's shared axes, then t's remaining leaves (renamed on clash). */
static void build_ca_domain(Sched *s, Tensor *t, Tensor *u, int pos, Replay *r, Span at)
{
	int n = pos + 1;
	Axis **d = arena_alloc(s->a, sizeof(Axis *) * (n + t->ndomain));
	for (int i = 0; i < n; i++) {
		Axis *ua = u->domain[i];
		Axis *tx = sched_replay_get(r, ua);
		if (!tx || tensor_axis_pos(t, tx) < 0) {
			tx = sched_new_axis(s->a, t, AX_ROOT, ua->name, ua->extent, at);
			tx->root_index = -1; /* a bare alias: t has no such axis (broadcast) */
			tx->reduction = ua->reduction;
		}
		tx->ca_alias = ua;
		d[i] = tx;
	}
	for (int j = 0; j < t->ndomain; j++) {
		Axis *tx = t->domain[j];
		if (tx->ca_alias)
			continue;
		/* A remaining axis whose name a shared axis took gets a numeric suffix. */
		const char *base = tx->name;
		for (int k = 2; ; k++) {
			bool clash = false;
			for (int i = 0; i < n; i++)
				clash |= strcmp(d[i]->name, tx->name) == 0;
			if (!clash)
				break;
			tx->name = arena_printf(s->a, "%s%d", base, k);
		}
		d[n++] = tx;
	}
	t->domain = d;
	t->ndomain = n;
}

/* A tensor computed at t, if any. */
Tensor *sched_computed_at(Fusion *f, Tensor *t)
{
	for (int i = 0; i < f->ntensors; i++)
		if (f->tensors[i]->sched.ca_tensor == t)
			return f->tensors[i];
	return NULL;
}

/* After t is computed at another tensor: the bindings of every nest through t's loops (t's
 * own, and those of the tensors already computed at t) still bind each parallel type once,
 * and an axis of t bound before the compute_at agrees with the loop it now runs as when that
 * loop is bound (if it is not, it may be bound later: check_shared_bindings). */
static bool nest_bindings_ok(Sched *s, Tensor *t, Span at)
{
	const char *where = t->sched.ca_pos >= 0
		? arena_printf(s->a, "'%s.%s'", t->sched.ca_tensor->name, t->sched.ca_tensor->domain[t->sched.ca_pos]->name)
		: arena_printf(s->a, "'%s'", t->sched.ca_tensor->name);
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *q = s->f->tensors[i];
		Tensor *v = q;
		while (v && v != t)
			v = v->sched.ca_tensor;
		if (!v)
			continue;
		for (int j = 0; j < q->ndomain; j++) {
			Axis *x = q->domain[j], *l = loop_of(x);
			if (x->ca_alias && x->par != PT_SERIAL && l->par != PT_SERIAL && x->par != l->par) {
				diag_error(s->d, at, "cannot compute '%s' at %s: '%s.%s', bound to %s, would run as loop '%s' of '%s', bound to %s",
					   t->name, where, q->name, x->name, par_name(x->par), l->name,
					   l->owner->name, par_name(l->par));
				diag_note(s->d, x->par_span, "bound here");
				diag_note(s->d, (Span){0}, "a shared loop has the binding of '%s': bind '%s.%s' there, or leave '%s.%s' unbound",
					  l->owner->name, l->owner->name, l->name, q->name, x->name);
				return false;
			}
			for (int k = 0; k < j; k++) {
				Axis *o = loop_of(q->domain[k]);
				if (o == l || l->par == PT_SERIAL || o->par != l->par ||
				    !indexed(q->domain[k]) || !indexed(x))
					continue;
				diag_error(s->d, at, "cannot compute '%s' at %s: the loop nest of '%s' would bind %s twice, loop '%s' of '%s' and loop '%s' of '%s'",
					   t->name, where, q->name, par_name(l->par), o->name, o->owner->name,
					   l->name, l->owner->name);
				diag_note(s->d, o->par_span, "bound here");
				diag_note(s->d, l->par_span, "and here");
				diag_note(s->d, (Span){0}, "a parallel type binds one loop of a loop nest");
				return false;
			}
		}
	}
	return true;
}

/* Computes t inside u's loop domain[pos] (the checks on the directive are done). */
bool sched_compute_at_pos(Sched *s, Tensor *t, Tensor *u, int pos, Span at)
{
	Replay r = {0};
	if (!map_roots(s, t, u, &r, at) || !replay_history(s, t, u, pos, &r, at))
		return false;
	build_ca_domain(s, t, u, pos, &r, at);
	t->sched.ca_tensor = u;
	t->sched.ca_pos = pos;
	t->sched.ca_span = at;
	t->sched.inlined = false;
	return nest_bindings_ok(s, t, at);
}

static bool do_compute_at(Sched *s, Tensor *t, AstDirective *dir)
{
	Tensor *u = fusion_find_tensor(s->f, dir->args[0].name);
	if (!u && poisoned(s, dir->args[0].name, NULL))
		return false;
	if (!u) {
		diag_error(s->d, dir->args[0].span, "unknown tensor '%s'", dir->args[0].name);
		return false;
	}
	Axis *ua = u->def ? sched_arg_axis(s, u, &dir->args[1]) : NULL;
	if (t->kind != TK_INTERMEDIATE && t->kind != TK_OUTPUT) {
		diag_error(s->d, dir->verb.span, "only intermediates and outputs can be computed at another tensor; '%s' is a scalar temporary",
			   t->name);
		return false;
	}
	if (!u->def || !sched_read_map(s->a, t, u).found) {
		if (t->kind == TK_OUTPUT)
			diag_error(s->d, dir->args[0].span, "'%s' does not feed '%s', which is not an output whose first indices have the extents of '%s''s",
				   t->name, u->name, t->name);
		else
			diag_error(s->d, dir->args[0].span, "'%s' does not feed '%s' ('%s' does not read '%s')",
				   t->name, u->name, u->name, t->name);
		return false;
	}
	if (!ua)
		return false;
	if (t->history.len || t->sched.ca_tensor) {
		diag_error(s->d, dir->span, "compute_at must come before the other loop transforms of '%s'",
			   t->name);
		return false;
	}
	Tensor *in = sched_computed_at(s->f, t);
	if (in) {
		/* The replay would transform axes that `in` already shares. */
		diag_error(s->d, dir->span, "compute_at of '%s' must come before '%s' is computed at it",
			   t->name, in->name);
		diag_note(s->d, in->sched.ca_span, "'%s' is computed at '%s' here", in->name, t->name);
		return false;
	}
	int pos = tensor_axis_pos(u, ua);
	for (int i = 0; i <= pos; i++) {
		if (u->domain[i]->vectorize) {
			diag_error(s->d, dir->args[1].span,
				   "cannot compute '%s' inside vectorized axis '%s' of '%s'", t->name,
				   u->domain[i]->name, u->name);
			return false;
		}
	}
	return sched_compute_at_pos(s, t, u, pos, dir->span);
}

/* `t.raster(rows, cols, G)`: the launch takes t's block tiles in groups of G values of rows
 * for each value of cols (Fusion.raster_*; the kernel's order: passes/raster.c). */
static bool do_raster(Sched *s, Tensor *t, AstDirective *dir)
{
	Axis *ax[2];
	for (int q = 0; q < 2; q++) {
		AstArg *g = &dir->args[q];
		ax[q] = sched_arg_axis(s, t, g);
		if (!ax[q] || !sched_axis_changeable(s, t, ax[q], g->span, false))
			return false;
		if (!par_is_block(ax[q]->par) || ax[q]->reduction) {
			diag_error(s->d, g->span, "cannot raster '%s': %s", ax[q]->name,
				   ax[q]->reduction ? "it is a reduction axis (raster orders the output tiles)"
				   : "it is not bound to blockIdx.* (bind it before the raster)");
			return false;
		}
	}
	if (ax[0] == ax[1]) {
		diag_error(s->d, dir->args[1].span, "axis '%s' is listed twice", ax[1]->name);
		return false;
	}
	int64_t g = dir->args[2].value;
	if (g < 1) {
		diag_error(s->d, dir->args[2].span, "the group of a raster must be a positive integer, not %lld",
			   (long long)g);
		return false;
	}
	if (s->f->raster_rows) {
		diag_error(s->d, dir->span, "the block order of '%s' is set already", s->f->name);
		diag_note(s->d, s->f->raster_span, "raster here");
		return false;
	}
	s->f->raster_rows = ax[0];
	s->f->raster_cols = ax[1];
	s->f->raster_group = g;
	s->f->raster_span = dir->span;
	return true;
}

/* ---- driver --------------------------------------------------------------------------- */

static bool find_verb(const char *name, Verb *out)
{
	for (int i = 0; i < V_COUNT; i++) {
		if (strcmp(verbs[i].name, name) == 0) {
			*out = (Verb)i;
			return true;
		}
	}
	return false;
}

static bool apply_directive(Sched *s, AstDirective *dir)
{
	Tensor *t = fusion_find_tensor(s->f, dir->tensor.name);
	if (!t && poisoned(s, dir->tensor.name, NULL))
		return false;
	if (!t) {
		diag_error(s->d, dir->tensor.span, "unknown tensor '%s' in fusion '%s'", dir->tensor.name,
			   s->f->name);
		return false;
	}
	Verb v;
	if (!find_verb(dir->verb.name, &v)) {
		const char *c = closest_verb(dir->verb.name);
		if (c)
			diag_error(s->d, dir->verb.span, "unknown directive '%s'; did you mean '%s'?",
				   dir->verb.name, c);
		else
			diag_error(s->d, dir->verb.span, "unknown directive '%s'", dir->verb.name);
		return false;
	}
	if (!verbs[v].kinds) {
		diag_error(s->d, dir->verb.span, "'%s' is not supported yet", verbs[v].name);
		return false;
	}
	if (!check_args(s, dir, v) || !check_results(s, dir, v))
		return false;
	if (t->kind == TK_INPUT && v != V_MEMORY && v != V_CACHE_AFTER && v != V_CACHE_BEFORE &&
	    v != V_EVICT_FIRST) {
		diag_error(s->d, dir->tensor.span, "'%s' is an input: it has no loop domain to %s",
			   t->name, v == V_INLINE ? "inline" : "schedule");
		return false;
	}
	switch (v) {
	case V_SPLIT: return do_split(s, t, dir);
	case V_MERGE: return do_merge(s, t, dir);
	case V_REORDER: return do_reorder(s, t, dir);
	case V_BIND: return do_bind(s, t, dir);
	case V_UNROLL: return do_unroll_vectorize(s, t, dir, false);
	case V_VECTORIZE: return do_unroll_vectorize(s, t, dir, true);
	case V_INLINE: return do_inline(s, t, dir);
	case V_COMPUTE_AT: return do_compute_at(s, t, dir);
	case V_MEMORY: return do_memory(s, t, dir);
	case V_CACHE_AFTER: return sched_cache_after(s, t, dir);
	case V_CACHE_BEFORE: return sched_cache_before(s, t, dir);
	case V_CP_ASYNC: return sched_cp_async(s, t, dir);
	case V_DOUBLE_BUFFER: return sched_stages(s, t, dir, true);
	case V_STAGES: return sched_stages(s, t, dir, false);
	case V_PAD: return sched_pad(s, t, dir);
	case V_SWIZZLE: return sched_swizzle(s, t, dir);
	case V_RFACTOR: return sched_rfactor(s, t, dir);
	case V_WELFORD: return sched_welford(s, t, dir);
	case V_ONLINE: return sched_online(s, t, dir);
	case V_MMA: return sched_mma(s, t, dir);
	case V_FRAGMENT: return sched_fragment(s, t, dir);
	case V_INDEX64: return do_index64(s, dir);
	case V_EVICT_FIRST: return do_evict_first(s, t, dir);
	case V_RASTER: return do_raster(s, t, dir);
	default: unreachable();
	}
}

/* Root index range [lo, hi] that axis x covers completely in row-major order, if any. */
static bool whole_range(Axis *x, int *lo, int *hi)
{
	int l0, h0, l1, h1;
	switch (x->kind) {
	case AX_ROOT:
		if (x->reduction || x->root_index < 0)
			return false;
		*lo = *hi = x->root_index;
		return true;
	case AX_MERGE:
		if (x->from[0]->kind == AX_SPLIT_OUTER && x->from[1]->kind == AX_SPLIT_INNER &&
		    x->from[0]->from[0] == x->from[1]->from[0])
			return whole_range(x->from[0]->from[0], lo, hi);
		if (!whole_range(x->from[0], &l0, &h0) || !whole_range(x->from[1], &l1, &h1) ||
		    h0 + 1 != l1)
			return false;
		*lo = l0;
		*hi = h1;
		return true;
	default:
		return false;
	}
}

/* Consecutive values of x are consecutive elements of t: x is the innermost root axis (or a
 * row-major merge ending with it), or an inner split of such an axis. A register accumulator
 * (a local reduction computed at its reader, accumulating in place over its own
 * non-reduction axes, docs/reductions.md) is stored in a buffer over those axes, in domain
 * order: its innermost non-reduction axis is contiguous there, whichever root it comes from
 * (the vectorize pass checks every access it rewrites). */
static bool axis_contiguous(Tensor *t, Axis *x)
{
	int lo, hi;
	if (t->kind == TK_INTERMEDIATE && t->sched.mem == MEM_LOCAL && t->sched.ca_tensor &&
	    tensor_is_reduction(t) && !x->reduction && x == t->domain[t->ndomain - 1])
		return true;
	if (x->kind == AX_SPLIT_INNER)
		return axis_contiguous(t, x->from[0]);
	return whole_range(x, &lo, &hi) && hi == t->ndim - 1;
}

static bool check_vectorized(Sched *s, Tensor *t)
{
	bool ok = true;
	for (int i = 0; i < t->ndomain; i++) {
		Axis *ax = t->domain[i];
		if (!ax->vectorize)
			continue;
		int64_t n = 0;
		ir_is_const(ax->extent, &n);
		int64_t bytes = n * dtype_size(t->dtype);
		if (i != t->ndomain - 1) {
			diag_error(s->d, ax->vectorize_span,
				   "vectorized axis '%s' must be the innermost axis of '%s' %s", ax->name,
				   t->name, domain_text(s->a, t));
			ok = false;
		} else if (!axis_contiguous(t, ax)) {
			diag_error(s->d, ax->vectorize_span,
				   "vectorized axis '%s' is not contiguous in memory: it must come from the innermost dimension of '%s' through inner splits",
				   ax->name, t->name);
			ok = false;
		} else if (ax->par != PT_SERIAL) {
			diag_error(s->d, ax->vectorize_span, "vectorized axis '%s' is bound to %s",
				   ax->name, par_name(ax->par));
			ok = false;
		} else if (n > 1 && bytes != 2 && bytes != 4 && bytes != 8 && bytes != 16 &&
			   !(t->sched.mem == MEM_LOCAL && bytes == 32)) {
			/* (a vector of one element is the plain access: any dtype; a register array
			 * of 32 bytes is written lane by lane: 8 f32 partials of a 16-byte f16 load) */
			diag_error(s->d, ax->vectorize_span,
				   "a vector of %lld x %s is %lld byte%s; it must be 2, 4, 8 or 16 bytes",
				   (long long)n, dtype_name(t->dtype), (long long)bytes, bytes == 1 ? "" : "s");
			ok = false;
		}
	}
	return ok;
}

/* All tensors share one launch: each thread dimension is the largest extent bound to it, so the
 * block is the product of those maxima (docs/schedule.md), even when no single tensor exceeds 1024. */
static bool check_block_size(Sched *s)
{
	Axis *widest[PT_COUNT] = {0};
	int64_t ext[PT_COUNT] = {0}, v;
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *t = s->f->tensors[i];
		for (int j = 0; j < t->ndomain; j++) {
			Axis *ax = t->domain[j];
			if (par_is_thread(ax->par) && ir_is_const(ax->extent, &v) && v > ext[ax->par]) {
				ext[ax->par] = v;
				widest[ax->par] = ax;
			}
		}
	}
	int64_t total = 1;
	Axis *last = NULL;
	for (int p = PT_TIDX; p <= PT_TIDZ; p++) {
		if (widest[p]) {
			total *= ext[p];
			last = widest[p];
		}
	}
	if (total <= MAX_THREADS)
		return true;
	diag_error(s->d, last->par_span,
		   "the kernel of fusion '%s' needs a block of %lld threads (the largest extent bound to each threadIdx dimension, over all tensors); the limit is %d",
		   s->f->name, (long long)total, MAX_THREADS);
	return false;
}

/* A reduction axis bound to blockIdx.* makes a grid reduction (passes/grid_reduce.c): only
 * the last block to arrive has the result, so nothing in the same kernel may read it (that
 * would need a grid-wide barrier). Only outputs that no statement reads qualify. Checked on
 * the final schedule (rfactor and caches may have moved the binding to another tensor). */
static bool check_grid_reductions(Sched *s)
{
	bool ok = true;
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *t = s->f->tensors[i];
		Axis *ax = NULL;
		for (int j = 0; j < t->ndomain && !ax; j++)
			if (!t->domain[j]->ca_alias && t->domain[j]->reduction &&
			    par_is_block(t->domain[j]->par))
				ax = t->domain[j];
		if (!ax)
			continue;
		if (s->f->raster_rows) {
			/* (the simulator samples a grid reduction's blocks by the hardware's index) */
			diag_error(s->d, s->f->raster_span, "a raster is not supported in a kernel with a grid reduction ('%s' reduces '%s' over %s)",
				   t->name, ax->name, par_name(ax->par));
			ok = false;
		} else if (t->readers.len > 0) {
			Tensor *r = VEC_AT(t->readers, Tensor, 0);
			diag_error(s->d, ax->par_span,
				   "grid-reduced tensor '%s' is read by '%s' in the same kernel; that needs a grid-wide barrier, which fusc does not generate: compute '%s' in a fusion of its own and read it in a second one, or bind '%s' to threadIdx.* (a block reduction) or leave it serial",
				   t->name, r->name, t->name, ax->name);
			ok = false;
		} else if (t->kind != TK_OUTPUT || t->sched.ca_tensor) {
			diag_error(s->d, ax->par_span,
				   "grid-reduced tensor '%s' must be a fusion output computed in its own loop nest (reduction axis '%s' is bound to %s)",
				   t->name, ax->name, par_name(ax->par));
			ok = false;
		}
	}
	return ok;
}

/* An axis bound before its tensor was computed at another one runs as that tensor's loop,
 * with the loop's binding: one the schedule left unbound would drop the axis's binding. */
static bool check_shared_bindings(Sched *s)
{
	bool ok = true;
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *t = s->f->tensors[i];
		for (int j = 0; j < t->ndomain; j++) {
			Axis *x = t->domain[j], *l = loop_of(x);
			if (!x->ca_alias || x->par == PT_SERIAL || l->par == x->par)
				continue;
			diag_error(s->d, x->par_span, "'%s.%s' is bound to %s, but it runs as loop '%s' of '%s' (compute_at), which is %s",
				   t->name, x->name, par_name(x->par), l->name, l->owner->name,
				   l->par == PT_SERIAL ? "not bound" : par_name(l->par));
			diag_note(s->d, t->sched.ca_span, "'%s' is computed at '%s' here", t->name, t->sched.ca_tensor->name);
			diag_note(s->d, (Span){0}, "a shared loop has the binding of '%s': bind '%s.%s' to %s, or leave '%s.%s' unbound",
				  l->owner->name, l->owner->name, l->name, par_name(x->par), t->name, x->name);
			ok = false;
		}
	}
	return ok;
}

bool sched_directive(Sched *s, AstDirective *dir)
{
	if (apply_directive(s, dir))
		return true;
	poison_results(s, dir);
	return false;
}

bool sched_finish(Sched *s, bool ok)
{
	Fusion *f = s->f;
	/* Placing caches replays transforms: only on a schedule whose directives all held. */
	if (ok)
		ok = sched_finish_caches(s);
	for (int i = 0; i < f->ntensors; i++)
		ok &= check_vectorized(s, f->tensors[i]);
	if (ok)
		ok = check_shared_bindings(s);
	if (ok)
		ok = sched_check_caches(s);
	if (ok)
		ok = check_block_size(s);
	/* welford first: its message for a grid-bound sum says what welford() supports */
	if (ok)
		ok = sched_check_welford(s);
	if (ok)
		ok = check_grid_reductions(s);
	if (ok)
		ok = sched_check_mma(s);
	return ok;
}

bool schedule_apply(Arena *a, Diag *d, Fusion *f)
{
	return schedule_apply_for(a, d, f, 80);
}

bool schedule_apply_for(Arena *a, Diag *d, Fusion *f, int arch)
{
	AstSchedule *sc = f->ast_schedule;
	AutoOptions o = {.arch = arch};
	if (!sc || sc->is_auto)
		return auto_schedule_with(a, d, f, &o);
	Sched s = {.a = a, .d = d, .f = f, .generated = sc->generated};
	bool ok = true;
	for (int i = 0; i < sc->ndirs; i++)
		ok &= sched_directive(&s, sc->dirs[i]);
	return sched_finish(&s, ok);
}
