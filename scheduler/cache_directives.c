/* cache_directives.c: the cache directives (cache_after, cache_before, cp_async, stages) and, at the
 * end of a schedule, the default placement of caches and reductions and the checks that need
 * the final schedule (docs/caching.md, docs/reductions.md). Called from schedule.c.
 */
#include <string.h>

#include "scheduler/scheduler.h"

/* ---- caches: cache_after, cache_before, cp_async, stages (docs/caching.md) ------------ */

/* `NAME =` of a cache directive must name nothing else in the fusion. */
bool sched_check_new_name(Sched *s, AstName n)
{
	const char *what = NULL;
	Span where = {0};
	Tensor *old = fusion_find_tensor(s->f, n.name);
	if (old) {
		what = "tensor";
		where = old->span;
	}
	for (int i = 0; !what && i < s->f->nparams; i++) {
		if (strcmp(s->f->params[i]->name, n.name) == 0) {
			what = "scalar parameter";
			where = s->f->params[i]->span;
		}
	}
	for (int i = 0; !what && i < s->f->nsizes; i++) {
		if (strcmp(s->f->sizes[i]->name, n.name) == 0) {
			what = "size symbol";
			where = s->f->sizes[i]->span;
		}
	}
	if (!what)
		return true;
	diag_error(s->d, n.span, "'%s' is already a %s of fusion '%s'", n.name, what, s->f->name);
	diag_note(s->d, where, "'%s' declared here", n.name);
	return false;
}

/* The memory of a cache: shared or local. */
static bool cache_mem(Sched *s, AstArg *g, MemType *m)
{
	if (!sched_parse_mem(s, g, m))
		return false;
	if (*m == MEM_GLOBAL) {
		diag_error(s->d, g->span, "a cache lives in shared or local memory, not global");
		return false;
	}
	return true;
}

/* Inserts c into the fusion's tensors at position `at` (definition order) and renumbers. */
void sched_insert_tensor(Arena *a, Fusion *f, Tensor *c, int at)
{
	Tensor **v = arena_alloc(a, sizeof(Tensor *) * (f->ntensors + 1));
	memcpy(v, f->tensors, sizeof(Tensor *) * at);
	v[at] = c;
	memcpy(v + at + 1, f->tensors + at, sizeof(Tensor *) * (f->ntensors - at));
	f->tensors = v;
	f->ntensors++;
	for (int i = 0; i < f->ntensors; i++)
		v[i]->index = i;
}

/* A new cache tensor named by the directive's result, of t's type, living in m. */
static Tensor *new_cache(Sched *s, Tensor *t, AstDirective *dir, MemType m)
{
	Tensor *c = tensor_new(s->a, dir->result.name, TK_INTERMEDIATE, t->dtype, m, dir->result.span);
	c->ndim = t->ndim;
	c->shape = t->shape;
	c->sched.mem_span = dir->span;
	c->sched.cache_of = t;
	c->sched.cache_span = dir->span;
	return c;
}

static void collect_accesses(Arena *a, IrExpr *e, Tensor *t, Vec *out)
{
	if (!e)
		return;
	if (e->kind == EX_ACCESS && e->tensor == t)
		vec_push(a, out, e);
	for (int i = 0; i < e->nargs; i++)
		collect_accesses(a, e->args[i], t, out);
}

/* Two subscripts are the same root axis position of their readers (readers are different
 * statements: z[i, j] reading x[i, j] and w[p, q] reading x[p, q] agree) or both constants:
 * constants are not index orders. The cache's axis there is its own loop over the whole
 * dimension (no reader's loop maps to it), so x[i, 0] and x[i, 2] both read their element of
 * it wherever the cache is computed. */
static bool same_subscript(IrExpr *x, IrExpr *y)
{
	if (x->kind != y->kind)
		return false;
	if (x->kind == EX_AXIS)
		return x->axis->root_index == y->axis->root_index;
	return x->kind == EX_INT;
}

/* Same axis position of two different indices? (for the "index twice" check) */
static bool same_index(IrExpr *x, IrExpr *y)
{
	return x->kind == EX_AXIS && y->kind == EX_AXIS &&
	       x->axis->root_index == y->axis->root_index;
}

static const char *expr_text(Arena *a, IrExpr *e)
{
	Buf b = {0};
	ir_print_expr(e, &b);
	char *r = arena_strdup(a, b.s ? b.s : "");
	buf_free(&b);
	return r;
}

/* Every read of t uses one list of subscripts (the cache's axes are named after it). Returns
 * the first access, or NULL after an error. */
static IrExpr *common_access(Sched *s, Tensor *t, Vec *acc, Span at)
{
	IrExpr *first = VEC_AT(*acc, IrExpr, 0);
	for (int i = 1; i < acc->len; i++) {
		IrExpr *e = VEC_AT(*acc, IrExpr, i);
		bool same = true;
		int mixed = -1;
		for (int k = 0; k < t->ndim; k++) {
			same &= same_subscript(first->args[k], e->args[k]);
			if ((first->args[k]->kind == EX_INT) != (e->args[k]->kind == EX_INT))
				mixed = k;
		}
		if (same)
			continue;
		if (mixed >= 0)
			diag_error(s->d, at, "cannot cache '%s': dimension %d is read both at a constant and at an index, %s and %s",
				   t->name, mixed + 1, expr_text(s->a, first), expr_text(s->a, e));
		else
			diag_error(s->d, at, "cannot cache '%s': its readers access it with different index orders, %s and %s",
				   t->name, expr_text(s->a, first), expr_text(s->a, e));
		diag_note(s->d, first->span, "read as %s here", expr_text(s->a, first));
		diag_note(s->d, e->span, "read as %s here", expr_text(s->a, e));
		return NULL;
	}
	for (int k = 0; k < t->ndim; k++) {
		for (int j = 0; j < k; j++) {
			IrExpr *x = first->args[j], *y = first->args[k];
			if (same_index(x, y)) {
				diag_error(s->d, at, "cannot cache '%s': it is read as %s, with the index '%s' twice",
					   t->name, expr_text(s->a, first), x->axis->name);
				diag_note(s->d, first->span, "read here");
				return NULL;
			}
		}
	}
	return first;
}

/* c = t.cache_after(M): c[...] = t[...] and every reader of t reads c instead. c's axes take
 * the names of the indices with which t is read (d0, d1, ... for constant subscripts). */
bool sched_cache_after(Sched *s, Tensor *t, AstDirective *dir)
{
	MemType m;
	if (t->kind == TK_SCALAR) {
		diag_error(s->d, dir->tensor.span, "cannot cache scalar temporary '%s'", t->name);
		return false;
	}
	if (!cache_mem(s, &dir->args[0], &m) || !sched_check_new_name(s, dir->result))
		return false;
	Vec acc = {0};
	int first_reader = s->f->ntensors;
	for (int i = 0; i < t->readers.len; i++) {
		Tensor *r = VEC_AT(t->readers, Tensor, i);
		collect_accesses(s->a, r->def, t, &acc);
		if (r->index < first_reader)
			first_reader = r->index;
	}
	if (acc.len == 0) {
		diag_error(s->d, dir->tensor.span, "cannot cache '%s': no statement reads it", t->name);
		return false;
	}
	IrExpr *sub = common_access(s, t, &acc, dir->span);
	if (!sub)
		return false;
	Tensor *c = new_cache(s, t, dir, m);
	c->nroot = c->ndomain = t->ndim;
	c->root = arena_alloc(s->a, sizeof(Axis *) * (t->ndim ? t->ndim : 1));
	c->domain = arena_alloc(s->a, sizeof(Axis *) * (t->ndim ? t->ndim : 1));
	IrExpr **idx = arena_alloc(s->a, sizeof(IrExpr *) * (t->ndim ? t->ndim : 1));
	for (int k = 0; k < t->ndim; k++) {
		IrExpr *g = sub->args[k];
		const char *name = g->kind == EX_AXIS ? g->axis->name : arena_printf(s->a, "d%d", k);
		Axis *ax = sched_new_axis(s->a, c, AX_ROOT, name, t->shape[k], dir->span);
		ax->root_index = k;
		c->root[k] = c->domain[k] = ax;
		idx[k] = ir_axis(s->a, ax);
	}
	c->def = ir_access(s->a, t, idx, t->ndim);
	c->def_span = dir->span;
	for (int i = 0; i < acc.len; i++)
		VEC_AT(acc, IrExpr, i)->tensor = c;
	c->readers = t->readers;
	t->readers = (Vec){0};
	vec_push(s->a, &t->readers, c);
	sched_insert_tensor(s->a, s->f, c, first_reader);
	return true;
}

/* c = t.cache_before(M): t's definition (root axes, reduction and all) moves to c, and t
 * becomes the copy t[...] = c[...] over fresh root axes. */
bool sched_cache_before(Sched *s, Tensor *t, AstDirective *dir)
{
	MemType m;
	if (t->kind == TK_INPUT || t->kind == TK_SCALAR) {
		diag_error(s->d, dir->tensor.span, t->kind == TK_INPUT
			   ? "cannot cache_before input '%s': it has no definition (use cache_after to cache its reads)"
			   : "cannot cache scalar temporary '%s'", t->name);
		return false;
	}
	if (!cache_mem(s, &dir->args[0], &m) || !sched_check_new_name(s, dir->result))
		return false;
	bool touched = t->history.len || t->sched.ca_tensor;
	for (int i = 0; i < t->ndomain; i++)
		touched |= t->domain[i]->par != PT_SERIAL || t->domain[i]->unroll ||
			   t->domain[i]->vectorize;
	for (int i = 0; i < s->f->ntensors && !touched; i++)
		touched |= s->f->tensors[i]->sched.ca_tensor == t;
	if (touched) {
		diag_error(s->d, dir->span, "cache_before must come before the other directives on '%s' (and before compute_at into it)",
			   t->name);
		return false;
	}
	Tensor *c = new_cache(s, t, dir, m);
	c->sched.cache_before = true;
	c->root = t->root;
	c->nroot = t->nroot;
	c->domain = t->domain;
	c->ndomain = t->ndomain;
	for (int k = 0; k < c->nroot; k++)
		c->root[k]->owner = c;
	c->def = t->def;
	c->def_span = t->def_span;
	t->nroot = t->ndomain = t->ndim;
	t->root = arena_alloc(s->a, sizeof(Axis *) * (t->ndim ? t->ndim : 1));
	t->domain = arena_alloc(s->a, sizeof(Axis *) * (t->ndim ? t->ndim : 1));
	IrExpr **idx = arena_alloc(s->a, sizeof(IrExpr *) * (t->ndim ? t->ndim : 1));
	for (int k = 0; k < t->ndim; k++) {
		Axis *old = c->root[k];
		Axis *ax = sched_new_axis(s->a, t, AX_ROOT, old->name, old->extent, old->span);
		ax->root_index = k;
		t->root[k] = t->domain[k] = ax;
		idx[k] = ir_axis(s->a, ax);
	}
	t->def = ir_access(s->a, c, idx, t->ndim);
	if (t->kind == TK_INTERMEDIATE)
		t->sched.inlined = true; /* now a pointwise copy: the default for pointwise intermediates */
	/* What t read, c reads now. */
	for (int i = 0; i < s->f->ntensors; i++) {
		Vec *rd = &s->f->tensors[i]->readers;
		for (int j = 0; j < rd->len; j++)
			if (VEC_AT(*rd, Tensor, j) == t)
				rd->items[j] = c;
	}
	vec_push(s->a, &c->readers, t);
	sched_insert_tensor(s->a, s->f, c, t->index);
	return true;
}

/* A cache made by cache_after: c[...] = t[...]. */
static bool is_copy(Tensor *c)
{
	return c->sched.cache_of && !c->sched.cache_before;
}

bool sched_cp_async(Sched *s, Tensor *c, AstDirective *dir)
{
	bool cg = false;
	if (dir->nargs == 1) {
		if (strcmp(dir->args[0].name, "cg") != 0) {
			diag_error(s->d, dir->args[0].span,
				   "unknown cp_async mode '%s' (expected cg, or no argument for .ca)",
				   dir->args[0].name);
			return false;
		}
		cg = true;
	}
	if (!is_copy(c)) {
		diag_error(s->d, dir->span, "cannot cp_async '%s': it is not a copy made by cache_after (cp.async copies global memory into shared memory)",
			   c->name);
		return false;
	}
	Tensor *src = c->sched.cache_of;
	if (src->kind != TK_INPUT) {
		diag_error(s->d, dir->span, "cannot cp_async '%s': it copies %s '%s', which is not in global memory (cp.async reads an input)",
			   c->name, src->kind == TK_OUTPUT ? "output" : "intermediate", src->name);
		return false;
	}
	if (c->sched.mem != MEM_SHARED) {
		diag_error(s->d, dir->span, "cannot cp_async '%s': it is in %s memory; cp.async writes shared memory",
			   c->name, mem_name(c->sched.mem));
		diag_note(s->d, c->sched.mem_span, "'%s' is placed in %s memory here", c->name, mem_name(c->sched.mem));
		return false;
	}
	if (c->sched.cp_async) {
		diag_error(s->d, dir->span, "'%s' is already cp_async", c->name);
		diag_note(s->d, c->sched.cp_async_span, "first cp_async here");
		return false;
	}
	c->sched.cp_async = true;
	c->sched.cp_async_cg = cg;
	c->sched.cp_async_span = dir->span;
	return true;
}

/* c.stages(n[, p]) and c.double_buffer() (= stages(2)). */
bool sched_stages(Sched *s, Tensor *c, AstDirective *dir, bool double_buffer)
{
	int64_t n = double_buffer ? 2 : dir->args[0].value;
	int64_t p = dir->nargs == 2 ? dir->args[1].value : n - 1;
	if (!is_copy(c)) {
		diag_error(s->d, dir->span, "cannot buffer '%s': it is not a copy made by cache_after",
			   c->name);
		return false;
	}
	if (n < 2 || n > 64) {
		diag_error(s->d, dir->args[0].span, "a circular buffer needs 2 to 64 stages, not %lld",
			   (long long)n);
		return false;
	}
	if (p < 0 || p >= n) {
		diag_error(s->d, dir->args[1].span,
			   "the prefetch distance must be at least 0 and less than the %lld stages, not %lld",
			   (long long)n, (long long)p);
		return false;
	}
	if (c->sched.stages) {
		diag_error(s->d, dir->span, "'%s' is already buffered", c->name);
		diag_note(s->d, c->sched.stages_span, "first buffered here");
		return false;
	}
	c->sched.stages = (int)n;
	c->sched.prefetch = (int)p;
	c->sched.stages_span = dir->span;
	return true;
}

/* c.pad(n): c's shared buffer gets n unused elements after each run of its innermost buffer
 * axis (a 32 x 32 tile read by columns is laid out 32 x 33: no bank conflicts); pad(n, e):
 * after every e elements of the layout (rows of e elements, whatever the axes). */
/* c can take a shared layout directive (pad, swizzle): a shared intermediate, laid out once
 * (pad and swizzle are two layouts of one buffer). An error at dir otherwise. */
static bool shared_layout_ok(Sched *s, Tensor *c, AstDirective *dir, const char *verb)
{
	if (c->kind != TK_INTERMEDIATE || c->sched.mem != MEM_SHARED) {
		diag_error(s->d, dir->span, "cannot %s '%s': it is %s; %s lays out a buffer in shared memory (cache_after(shared) or memory(shared))",
			   verb, c->name, c->kind == TK_INTERMEDIATE ? arena_printf(s->a, "in %s memory", mem_name(c->sched.mem))
							       : arena_printf(s->a, "an %s", c->kind == TK_INPUT ? "input" : "output"), verb);
		return false;
	}
	if (c->sched.pad || c->sched.swizzle) {
		bool pad = c->sched.pad, again = !strcmp(verb, pad ? "pad" : "swizzle");
		const char *done = pad ? "padded" : "swizzled";
		if (again)
			diag_error(s->d, dir->span, "'%s' is already %s", c->name, done);
		else
			diag_error(s->d, dir->span, "cannot %s '%s': it is %s, and a buffer is either padded or swizzled",
				   verb, c->name, done);
		diag_note(s->d, pad ? c->sched.pad_span : c->sched.swizzle_span, "first %s here", done);
		return false;
	}
	return true;
}

/* The optional row length of pad(n, e) and swizzle(S, e) (0 when absent); an error (message
 * `bad`, with the value) when it is below 1. */
static bool row_arg(Sched *s, AstDirective *dir, const char *bad, int64_t *out)
{
	*out = dir->nargs == 2 ? dir->args[1].value : 0;
	if (dir->nargs == 2 && *out < 1) {
		diag_error(s->d, dir->args[1].span, bad, (long long)*out);
		return false;
	}
	return true;
}

bool sched_pad(Sched *s, Tensor *c, AstDirective *dir)
{
	int64_t n = dir->args[0].value;
	if (n < 1 || n > PAD_MAX) {
		diag_error(s->d, dir->args[0].span, "a pad is 1 to %d elements, not %lld", PAD_MAX,
			   (long long)n);
		return false;
	}
	if (!shared_layout_ok(s, c, dir, "pad"))
		return false;
	int64_t every;
	if (!row_arg(s, dir, "a pad after every %lld elements: the run must be at least 1", &every))
		return false;
	c->sched.pad = (int)n;
	c->sched.pad_every = every;
	c->sched.pad_span = dir->span;
	return true;
}

/* c.swizzle(S), S = 32B, 64B or 128B: c's shared buffer keeps its size and the 16-byte chunks
 * of each S-byte row are XORed with the row (passes/indexing.c, index_swizzle); swizzle(S, e):
 * rows of e elements of the layout, whatever the axes (as pad(n, e)). */
bool sched_swizzle(Sched *s, Tensor *c, AstDirective *dir)
{
	const char *w = dir->args[0].name;
	int S = !strcmp(w, "32B") ? 32 : !strcmp(w, "64B") ? 64 : !strcmp(w, "128B") ? 128 : 0;
	if (!S) {
		diag_error(s->d, dir->args[0].span, "a swizzle is 32B, 64B or 128B, not '%s'", w);
		return false;
	}
	int64_t row;
	if (!row_arg(s, dir, "swizzled rows of %lld elements: a row must be at least 1", &row))
		return false;
	if (!shared_layout_ok(s, c, dir, "swizzle"))
		return false;
	c->sched.swizzle = S;
	c->sched.swizzle_row = row;
	c->sched.swizzle_span = dir->span;
	return true;
}

/* ---- caches at the end of the schedule ------------------------------------------------ */

/* The parallel type of a loop: a shared (compute_at) axis carries its owner's binding. */
static ParType loop_par(Axis *ax)
{
	while (ax->ca_alias)
		ax = ax->ca_alias;
	return ax->par;
}

/* Would compute_at(c, u, pos) replay? Every merge of u that produces a shared axis must
 * merge two axes that c has, or two it lacks. */
static bool replayable(Sched *s, Tensor *c, Tensor *u, int pos)
{
	ReadMap m = sched_read_map(s->a, c, u);
	if (!m.found || m.differ)
		return false;
	Replay r = {0};
	for (int k = 0; k < c->ndim; k++) {
		if (!m.first[k])
			continue;
		if (sched_replay_get(&r, m.first[k]))
			return false;
		sched_replay_put(s->a, &r, m.first[k], m.first[k]);
	}
	for (int h = 0; h < u->history.len; h++) {
		Axis *ux = VEC_AT(u->history, Axis, h);
		if (ux->kind == AX_SPLIT_INNER)
			continue;
		bool needed = sched_is_ancestor_of_shared(ux, u, pos) ||
			       (ux->kind == AX_SPLIT_OUTER && sched_is_ancestor_of_shared(ux->from[0]->to[1], u, pos));
		if (!needed)
			continue;
		if (ux->kind == AX_SPLIT_OUTER && sched_replay_get(&r, ux->from[0])) {
			sched_replay_put(s->a, &r, ux, ux);
			sched_replay_put(s->a, &r, ux->from[0]->to[1], ux->from[0]->to[1]);
		} else if (ux->kind == AX_MERGE) {
			bool x = sched_replay_get(&r, ux->from[0]) != NULL, y = sched_replay_get(&r, ux->from[1]) != NULL;
			if (x != y)
				return false;
			if (x)
				sched_replay_put(s->a, &r, ux, ux);
		}
	}
	return true;
}

/* The tensors that materialize a read of c (looking through inlined readers). */
static int cache_consumers(Sched *s, Tensor *c, Tensor **out, int max)
{
	int n = 0;
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *u = s->f->tensors[i];
		if (u == c || !u->def || u->kind == TK_SCALAR || (u->sched.inlined && u->kind != TK_OUTPUT))
			continue;
		if (sched_read_map(s->a, c, u).found && n < max)
			out[n++] = u;
	}
	return n;
}

/* Is every root axis that x derives from one of u's roots in set[0..n)? */
static bool derived_from(Axis *x, Axis **set, int n)
{
	if (x->kind != AX_ROOT)
		return derived_from(x->from[0], set, n) &&
		       (x->kind != AX_MERGE || derived_from(x->from[1], set, n));
	for (int i = 0; i < n; i++)
		if (set[i] == x)
			return true;
	return false;
}

/* The axes of home that index r (at most 16; the loops r may share without needing the
 * other elements of its inputs). */
static int index_axes(Sched *s, Tensor *r, Tensor *home, Axis **set)
{
	ReadMap m = sched_read_map(s->a, r, home);
	int n = 0;
	for (int k = 0; k < r->ndim && n < 16; k++)
		if (m.first && m.first[k])
			set[n++] = m.first[k];
	return n;
}

/* Default placement (docs/schedule.md, docs/caching.md): a cache without compute_at is computed at its
 * one consumer u, at the deepest position pos such that u.domain[0..pos] holds no vectorized
 * axis, no threadIdx-bound axis when the cache is shared (the block fills it together; a
 * local cache is per thread, so thread axes are fine), and the replay is legal. A consumer
 * without loops (a 0-d tensor) gets pos = -1: the cache is computed at the top of its nest. */
static bool place_cache(Sched *s, Tensor *c)
{
	Tensor *u[2];
	int n = cache_consumers(s, c, u, 2);
	/* A consumer without loops shares none with c: c keeps its own, transformed or not. */
	if (n == 1 && u[0]->ndomain == 0 && !sched_computed_at(s->f, c))
		return sched_compute_at_pos(s, c, u[0], -1, c->sched.cache_span);
	if (c->history.len) {
		diag_error(s->d, c->sched.cache_span, "cache '%s' has loop transforms but no compute_at; give it a compute_at before the transforms",
			   c->name);
		return false;
	}
	Tensor *in = sched_computed_at(s->f, c);
	if (in) {
		diag_error(s->d, c->sched.cache_span, "cache '%s' has '%s' computed at it but no compute_at of its own; give it a compute_at before that",
			   c->name, in->name);
		diag_note(s->d, in->sched.ca_span, "'%s' is computed at '%s' here", in->name, c->name);
		return false;
	}
	if (n == 0)
		return true; /* nothing reads it in a loop nest */
	if (n > 1) {
		diag_error(s->d, c->sched.cache_span, "cannot place cache '%s': it is read by both '%s' and '%s'; give it a compute_at",
			   c->name, u[0]->name, u[1]->name);
		return false;
	}
	/* A cache that computes a reduction (cache_before of one) needs all of its inputs: it
	 * shares only loops over the axes that index it, as a reduction placed by default. */
	Axis *set[16];
	int nset = tensor_is_reduction(c) ? index_axes(s, c, u[0], set) : -1;
	int pos = -1;
	for (int i = 0; i < u[0]->ndomain; i++) {
		Axis *ax = u[0]->domain[i];
		bool thread = par_is_thread(loop_par(ax)) && c->sched.mem == MEM_SHARED;
		if (thread || ax->vectorize || !replayable(s, c, u[0], i) ||
		    (nset >= 0 && !derived_from(ax, set, nset)))
			break;
		pos = i;
	}
	if (pos < 0 && nset >= 0 && c->ndim == 0)
		return sched_compute_at_pos(s, c, u[0], -1, c->sched.cache_span);
	if (pos < 0) {
		Axis *ax = u[0]->domain[0];
		diag_error(s->d, c->sched.cache_span, "cannot place cache '%s' by default: the outermost loop '%s' of '%s' is %s; give '%s' a compute_at",
			   c->name, ax->name, u[0]->name,
			   ax->vectorize ? "vectorized" : par_is_thread(loop_par(ax))
			   ? arena_printf(s->a, "bound to %s", par_name(loop_par(ax)))
			   : "not replayable on it", c->name);
		return false;
	}
	return sched_compute_at_pos(s, c, u[0], pos, c->sched.cache_span);
}

/* cp.async moves 4, 8 or 16 bytes per access (.cg: 16): the vectorized axis times the dtype. */
static bool check_cp_async(Sched *s, Tensor *c)
{
	if (c->sched.mem != MEM_SHARED) {
		diag_error(s->d, c->sched.cp_async_span, "cannot cp_async '%s': it is in %s memory; cp.async writes shared memory",
			   c->name, mem_name(c->sched.mem));
		diag_note(s->d, c->sched.mem_span, "'%s' is placed in %s memory here", c->name, mem_name(c->sched.mem));
		return false;
	}
	Axis *vec = NULL;
	int64_t n = 1;
	for (int i = 0; i < c->ndomain; i++)
		if (c->domain[i]->vectorize)
			vec = c->domain[i];
	if (vec)
		ir_is_const(vec->extent, &n);
	int64_t bytes = n * dtype_size(c->dtype);
	const char *how = vec ? arena_printf(s->a, "vectorized axis '%s': %lld x %s", vec->name,
					   (long long)n, dtype_name(c->dtype))
			      : arena_printf(s->a, "no vectorized axis: 1 x %s", dtype_name(c->dtype));
	if (c->sched.cp_async_cg && bytes != 16) {
		diag_error(s->d, c->sched.cp_async_span, "cp_async(cg) copies 16 bytes per access; '%s' copies %lld (%s)",
			   c->name, (long long)bytes, how);
		return false;
	}
	if (bytes != 4 && bytes != 8 && bytes != 16) {
		diag_error(s->d, c->sched.cp_async_span, "cp_async copies 4, 8 or 16 bytes per access; '%s' copies %lld (%s)",
			   c->name, (long long)bytes, how);
		return false;
	}
	return true;
}

/* A buffer loop of constant extent E < n runs only E stages: more slots are never used. The
 * stages are clamped to E (the prefetch to E - 1), with a warning; E <= 1 leaves nothing to
 * overlap, so c is not buffered at all (a plain copy). */
static void clamp_stages(Sched *s, Tensor *c, Axis *loop)
{
	int64_t E;
	Axis *named = loop;

	if (!ir_is_const(loop->extent, &E) || E >= c->sched.stages)
		return;
	while (named->ca_alias)
		named = named->ca_alias;
	if (E <= 1)
		diag_warning(s->d, c->sched.stages_span, "'%s' is not buffered: its buffer loop '%s' has %lld iteration%s, so there is nothing to overlap",
			     c->name, named->name, (long long)E, E == 1 ? "" : "s");
	else
		diag_warning(s->d, c->sched.stages_span, "'%s' gets %lld stages, not %d: its buffer loop '%s' has %lld iterations",
			     c->name, (long long)E, c->sched.stages, named->name, (long long)E);
	diag_note(s->d, named->span, "'%s' is made here", named->name);
	c->sched.stages = E <= 1 ? 0 : (int)E;
	c->sched.prefetch = E <= 1 ? 0 : c->sched.prefetch < E - 1 ? c->sched.prefetch : (int)E - 1;
}

/* The buffer loop: the innermost loop of c's compute-at position that is serial and that c
 * depends on (not a bare alias of a broadcast). */
static bool check_stages(Sched *s, Tensor *c)
{
	if (!c->sched.ca_tensor) {
		diag_error(s->d, c->sched.stages_span, "cannot buffer '%s': it has no compute-at position, so no loop to buffer over",
			   c->name);
		return false;
	}
	for (int i = c->sched.ca_pos; i >= 0; i--) {
		Axis *ax = c->domain[i];
		bool bare = ax->kind == AX_ROOT && ax->root_index < 0;
		if (loop_par(ax) == PT_SERIAL && !bare) {
			clamp_stages(s, c, ax);
			return true;
		}
	}
	Tensor *u = c->sched.ca_tensor;
	if (c->sched.ca_pos < 0)
		diag_error(s->d, c->sched.stages_span, "cannot buffer '%s': '%s' has no loops to buffer over",
			   c->name, u->name);
	else
		diag_error(s->d, c->sched.stages_span, "cannot buffer '%s': no serial loop outside its compute-at position (the loops of '%s' up to '%s' are parallel or broadcast)",
			   c->name, u->name, u->domain[c->sched.ca_pos]->name);
	diag_note(s->d, c->sched.ca_span, "'%s' is computed at '%s' here", c->name, u->name);
	return false;
}

/* The tensor at whose loops a tensor read by u[0..n) is placed: the consumer that every other
 * consumer is computed at (through a chain of compute_at); *limit: the most inlined position
 * any consumer allows. NULL: none is. */
Tensor *sched_reduction_home(Tensor **u, int n, int *limit)
{
	for (int h = 0; h < n; h++) {
		int lim = INT32_MAX;
		bool all = true;
		for (int j = 0; j < n && all; j++) {
			Tensor *c = u[j];
			if (c == u[h])
				continue;
			while (c && c->sched.ca_tensor != u[h])
				c = c->sched.ca_tensor;
			all = c != NULL;
			if (c && c->sched.ca_pos < lim)
				lim = c->sched.ca_pos;
		}
		if (all) {
			*limit = lim;
			return u[h];
		}
	}
	return NULL;
}

/* Default placement of a reduction read by another statement (docs/schedule.md, docs/reductions.md):
 * computed at its reader, at the deepest position pos (-1: the top of the reader's nest, for
 * a 0-d reduction) whose loops u.domain[0..pos] all come from u's axes that index r (softmax's m and s at y's row loop: one reduction per row, not
 * one per element), hold no vectorized axis, no thread type that r reduces over, and no loop
 * deeper than where another reader of r is computed at u. */
static bool place_reduction(Sched *s, Tensor *r)
{
	Tensor *in = sched_computed_at(s->f, r);
	if (in) {
		diag_error(s->d, r->def_span, "reduction '%s' has '%s' computed at it but no compute_at of its own; give it a compute_at before that",
			   r->name, in->name);
		diag_note(s->d, in->sched.ca_span, "'%s' is computed at '%s' here", in->name, r->name);
		return false;
	}
	Tensor *u[8];
	int n = cache_consumers(s, r, u, 8), limit;
	if (n == 0)
		return true;
	Tensor *home = sched_reduction_home(u, n, &limit);
	if (!home) {
		diag_error(s->d, r->def_span, "cannot place reduction '%s': it is read by both '%s' and '%s', and neither is computed at the other; give it a compute_at",
			   r->name, u[0]->name, u[1]->name);
		return false;
	}
	ReadMap m = sched_read_map(s->a, r, home);
	Axis *set[16];
	int nset = index_axes(s, r, home, set);
	unsigned reduced = 0;
	for (int i = 0; i < r->ndomain; i++)
		if (r->domain[i]->reduction && par_is_thread(r->domain[i]->par))
			reduced |= 1u << r->domain[i]->par;
	int pos = -1;
	for (int i = 0; i < home->ndomain && i <= limit; i++) {
		Axis *ax = home->domain[i];
		ParType p = loop_par(ax);
		if (ax->vectorize || !derived_from(ax, set, nset) ||
		    (par_is_thread(p) && (reduced & (1u << p))) || !replayable(s, r, home, i))
			break;
		pos = i;
	}
	/* a 0-d reduction is one value: computed once at the top of the nest */
	if (pos < 0 && home->ndomain > 0 && r->ndim > 0) {
		diag_error(s->d, r->def_span, "cannot place reduction '%s' by default: the outermost loop '%s' of its reader '%s' does not run over the axes of '%s' alone; give '%s' a compute_at",
			   r->name, home->domain[0]->name, home->name, r->name, r->name);
		return false;
	}
	/* The replay transforms r's axes that the shared loops come from: they must be intact. */
	for (int k = 0; k < r->ndim; k++) {
		if (m.first[k] && sched_is_ancestor_of_shared(m.first[k], home, pos) &&
		    tensor_axis_pos(r, r->root[k]) < 0) {
			diag_error(s->d, r->def_span, "cannot place reduction '%s' by default: its axis '%s' was transformed, but the loops of '%s' it is computed in come from it; give '%s' a compute_at before its transforms",
				   r->name, r->root[k]->name, home->name, r->name);
			return false;
		}
	}
	return sched_compute_at_pos(s, r, home, pos, r->def_span);
}

/* Places the caches and reductions left without compute_at, then checks what depends on the
 * final schedule: cp.async vector sizes and buffer loops. */
bool sched_finish_caches(Sched *s)
{
	bool ok = true;
	/* Consumers first: a cache of a cache is computed at its reader once that is placed; a
	 * reduction read by another reduction is placed after it. */
	for (int i = s->f->ntensors - 1; i >= 0; i--) {
		Tensor *c = s->f->tensors[i];
		if (c->sched.cache_of && !c->sched.ca_tensor)
			ok &= place_cache(s, c);
		else if (c->kind == TK_INTERMEDIATE && tensor_is_reduction(c) && !c->sched.ca_tensor)
			ok &= place_reduction(s, c);
	}
	return ok;
}

bool sched_place_defaults(Arena *a, Diag *d, Fusion *f)
{
	Sched s = {.a = a, .d = d, .f = f};
	return sched_finish_caches(&s);
}

/* ---- scope: every reader of a computed-at tensor runs inside its loop --------------- */

/* Does e read p as loop_nest translates it (through tensors recomputed in their readers:
 * inlined intermediates and outputs read by another statement)? */
static bool reads_recomputed(IrExpr *e, Tensor *p)
{
	if (!e)
		return false;
	if (e->kind == EX_ACCESS) {
		Tensor *x = e->tensor;
		if (x == p)
			return true;
		bool recomputed = x->def && x->kind != TK_INPUT && !tensor_is_reduction(x) &&
				  !(x->kind == TK_INTERMEDIATE && x->sched.ca_tensor);
		if (recomputed && reads_recomputed(x->def, p))
			return true;
	}
	for (int i = 0; i < e->nargs; i++)
		if (reads_recomputed(e->args[i], p))
			return true;
	return false;
}

/* p is computed at the start of loop `at` of o (-1: the top of o's nest). Its reader u's
 * statements run there, after p, when u is o, or when u's placement reaches o at a deeper
 * loop (or the same loop, later in definition order, as loop_nest nests producers). *meet is
 * the loop of o where u's placement reaches it (-2: another nest). */
static bool runs_inside(Tensor *u, Tensor *p, Tensor *o, int at, int *meet)
{
	*meet = -2;
	for (Tensor *v = u; v != o; ) {
		if (!v->sched.ca_tensor)
			return false;
		Tensor *o2;
		int at2;
		tensor_placement(v, &o2, &at2);
		if (o2 == o) {
			*meet = at2;
			return at2 > at || (at2 == at && p->index < v->index);
		}
		v = o2;
	}
	return true;
}

/* The root axis of the loop that t's root axis x runs as: followed through compute_at while
 * it is a shared loop, by the subscripts each tensor of the chain is read with (NULL: read at
 * a constant). An axis a tensor runs itself (its own loop, or a reduction's loop below
 * where it is computed at) stands for itself. */
static Axis *top_root(Arena *a, Tensor *t, Axis *x)
{
	while (x && t->sched.ca_tensor && t->sched.ca_pos >= 0 && sched_is_ancestor_of_shared(x, t, t->sched.ca_pos)) {
		if (x->root_index >= t->ndim)
			return x;
		ReadMap m = sched_read_map(a, t, t->sched.ca_tensor);
		if (!m.found || x->root_index < 0)
			return NULL;
		x = m.first[x->root_index];
		t = t->sched.ca_tensor;
	}
	return x;
}

/* Does e read p (as reads_recomputed) at an element other than the current iteration's?
 * map: the top root axis each root axis of e's tensor stands for; want[k]: the top root
 * axis dim k of p is fixed to by its shared loops (NULL: a dim p's buffer spans). */
static bool reads_other(IrExpr *e, Tensor *p, Axis **map, Axis **want, Arena *a)
{
	if (!e)
		return false;
	if (e->kind == EX_ACCESS) {
		Tensor *x = e->tensor;
		Axis **sub = arena_alloc(a, sizeof(Axis *) * (size_t)(e->nargs ? e->nargs : 1));
		for (int k = 0; k < e->nargs; k++) {
			IrExpr *g = e->args[k];
			sub[k] = g->kind == EX_AXIS && g->axis->root_index >= 0 ? map[g->axis->root_index]
										   : NULL;
		}
		if (x == p) {
			for (int k = 0; k < e->nargs; k++)
				if (want[k] && sub[k] != want[k])
					return true;
			return false;
		}
		bool recomputed = x->def && x->kind != TK_INPUT && !tensor_is_reduction(x) &&
				  !(x->kind == TK_INTERMEDIATE && x->sched.ca_tensor);
		return recomputed && reads_other(x->def, p, sub, want, a);
	}
	for (int i = 0; i < e->nargs; i++)
		if (reads_other(e->args[i], p, map, want, a))
			return true;
	return false;
}

/* Does reader u, running inside p's loop, read elements of p that p's buffer does not hold:
 * a dim that p's shared loops fix, subscripted by u with anything but the same loop (u's own
 * reduction axis, a constant, another index)? */
static bool reads_outside_buffer(Sched *s, Tensor *u, Tensor *p)
{
	Axis **want = arena_alloc(s->a, sizeof(Axis *) * (size_t)(p->ndim ? p->ndim : 1));
	bool any = false;
	for (int k = 0; k < p->ndim; k++) {
		want[k] = NULL;
		if (p->sched.ca_pos >= 0 && sched_is_ancestor_of_shared(p->root[k], p, p->sched.ca_pos))
			want[k] = top_root(s->a, p, p->root[k]);
		any |= want[k] != NULL;
	}
	if (!any)
		return false;
	Axis **map = arena_alloc(s->a, sizeof(Axis *) * (size_t)(u->nroot ? u->nroot : 1));
	for (int r = 0; r < u->nroot; r++)
		map[r] = top_root(s->a, u, u->root[r]);
	return reads_other(u->def, p, map, want, s->a);
}

/* A materialized tensor exists only inside the loop it is computed at: a reader placed
 * outside it (softmax's m at y.i reading x's cache computed at y.j) would read a buffer
 * that is not there yet. An error at the compute_at (or the default placement), with a note
 * at the reader's. A reader inside it may read only the elements of the current iteration
 * of the loops it shares (a reduction over one of them reads the others). */
static bool check_scope(Sched *s, Tensor *p)
{
	if (p->kind != TK_INTERMEDIATE || !p->sched.ca_tensor)
		return true;
	Tensor *o;
	int at, meet;
	tensor_placement(p, &o, &at);
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *u = s->f->tensors[i];
		if (u == p || !u->def || u->kind == TK_SCALAR ||
		    (u->kind == TK_INTERMEDIATE && !u->sched.ca_tensor && !tensor_is_reduction(u)) ||
		    !reads_recomputed(u->def, p))
			continue;
		/* the sum of an online pair reads nothing: its max's nest reads the elements for
		 * both (passes/loop_nest.c, online_nest) */
		if (u->sched.online_max)
			continue;
		if (runs_inside(u, p, o, at, &meet)) {
			if (at < 0 || !reads_outside_buffer(s, u, p))
				continue;
			diag_error(s->d, p->sched.ca_span,
				   "'%s' is computed inside loop '%s' of '%s', where it holds the elements of one iteration, but '%s' reads it at other elements there",
				   p->name, o->domain[at]->name, o->name, u->name);
			if (u->sched.ca_tensor && u->sched.ca_pos >= 0)
				diag_note(s->d, u->sched.ca_span, "'%s' is computed at '%s.%s' here", u->name,
					  u->sched.ca_tensor->name, u->sched.ca_tensor->domain[u->sched.ca_pos]->name);
			diag_note(s->d, (Span){0},
				  "compute '%s' at an outer loop, where it holds every element '%s' reads",
				  p->name, u->name);
			return false;
		}
		const char *where = at < 0 ? arena_printf(s->a, "at the top of the loop nest of '%s'", o->name)
				    : arena_printf(s->a, "inside loop '%s' of '%s'", o->domain[at]->name, o->name);
		diag_error(s->d, p->sched.ca_span, "'%s' is computed %s, but '%s' reads it outside that %s",
			   p->name, where, u->name, at < 0 ? "nest" : "loop");
		if (u->sched.ca_tensor && u->sched.ca_pos >= 0)
			diag_note(s->d, u->sched.ca_span, "'%s' is computed at '%s.%s' here", u->name,
				  u->sched.ca_tensor->name, u->sched.ca_tensor->domain[u->sched.ca_pos]->name);
		else if (u->sched.ca_tensor)
			diag_note(s->d, u->sched.ca_span, "'%s' is computed at the top of '%s' here", u->name,
				  u->sched.ca_tensor->name);
		if (meet >= 0 && meet < at)
			diag_note(s->d, (Span){0},
				  "a computed-at tensor exists only inside its loop: compute '%s' at '%s.%s' or outside it",
				  p->name, o->name, o->domain[meet]->name);
		else if (meet == -2)
			diag_note(s->d, (Span){0},
				  "a computed-at tensor exists only inside its loop: '%s' runs in another loop nest",
				  u->name);
		else
			diag_note(s->d, (Span){0},
				  "a computed-at tensor exists only inside its loop: '%s' runs before it there",
				  u->name);
		return false;
	}
	return true;
}

bool sched_check_caches(Sched *s)
{
	bool ok = true;
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *c = s->f->tensors[i];
		if (c->sched.cp_async)
			ok &= check_cp_async(s, c);
		if (c->sched.stages)
			ok &= check_stages(s, c);
		if ((c->sched.pad || c->sched.swizzle) && c->sched.mem != MEM_SHARED) { /* a later memory(...) moved it */
			const char *verb = c->sched.pad ? "pad" : "swizzle";
			diag_error(s->d, c->sched.pad ? c->sched.pad_span : c->sched.swizzle_span,
				   "cannot %s '%s': it is in %s memory; %s lays out a buffer in shared memory",
				   verb, c->name, mem_name(c->sched.mem), verb);
			diag_note(s->d, c->sched.mem_span, "'%s' is placed in %s memory here", c->name, mem_name(c->sched.mem));
			ok = false;
		}
		ok &= check_scope(s, c);
	}
	return ok;
}

