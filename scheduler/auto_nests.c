/* auto_nests.c: the automatic scheduler's first step, its own copy of every reduction for
 * every loop nest that reads it (docs/auto_schedule.md, "One loop nest per output").
 *
 * A fusion is one kernel in which each output is one loop nest, and a reduction is computed
 * inside a nest that reads it (compute_at). A reduction that two nests read (`t` read by the
 * outputs `s` and `y`), or a reduction output that another statement reads, would be stored
 * by one nest and read by another, which needs a grid-wide barrier. So each nest gets its
 * own copy and recomputes the reduction, the way it recomputes a pointwise output that it
 * reads. A read of an output becomes a read of a copy of the output's definition (an inlined
 * intermediate, or a reduction intermediate), so that no statement reads an output.
 *
 * Who shares a copy (a "context" is one stored reader: a nest's output or a reduction):
 *   AUTO_COPY_NEST    the reductions that a nest's output reads (through inlined tensors)
 *                     are shared by the whole nest: the schedules compute them at the
 *                     output's loops, where every reader inside the nest sees them. A
 *                     reduction that only other reductions read gets a copy per reader.
 *   AUTO_COPY_READER  every stored reader has its own copies (the plain schedules compute
 *                     each reduction inside its one reader).
 * The first context to reach a tensor uses the original; later ones make copies named
 * `t_READER` (`t_READER2`, ... on a clash). Inlined tensors are copied only when their
 * definition leads to something copied. Copies come right after their original in
 * f->tensors (so every tensor still comes after what it reads); the readers lists are
 * rebuilt.
 *
 * The walk is a worklist of (tensor, context) definitions to rewrite, so a long chain of
 * statements costs no recursion; the number of copies is capped (AUTO_MAX_COPIES): a chain of
 * diamonds read per reader doubles them at every level.
 *
 * auto_share_copies undoes the copies between the nests of one row group's outputs, once the
 * scheduler knows that they all run in the anchor's nest (row_companions): a companion's copy
 * whose definition equals a tensor the anchor reads is replaced by it, and a reduction output
 * equal to such a tensor stores it (docs/auto_schedule.md, "Several outputs of one row group").
 */
#include <string.h>

#include "scheduler/scheduler.h"

enum { AUTO_MAX_COPIES = 4096 };

/* ---- a set of names -------------------------------------------------------------------- */

static uint64_t name_hash(const char *n)
{
	return hash_fnv1a(0, n, strlen(n));
}

static void names_put(NameSet *s, const char *n)
{
	uint64_t m = (uint64_t)s->cap - 1;
	for (uint64_t h = name_hash(n) & m;; h = (h + 1) & m) {
		if (!s->slots[h]) {
			s->slots[h] = n;
			s->len++;
			return;
		}
		if (strcmp(s->slots[h], n) == 0)
			return;
	}
}

bool names_has(NameSet *s, const char *n)
{
	if (!s->cap)
		return false;
	uint64_t m = (uint64_t)s->cap - 1;
	for (uint64_t h = name_hash(n) & m; s->slots[h]; h = (h + 1) & m)
		if (strcmp(s->slots[h], n) == 0)
			return true;
	return false;
}

void names_add(NameSet *s, const char *n)
{
	if (2 * (s->len + 1) > s->cap) {
		const char **old = s->slots;
		int cap = s->cap;
		s->cap = cap ? 2 * cap : 64;
		s->slots = arena_alloc(s->a, sizeof(char *) * (size_t)s->cap);
		s->len = 0;
		for (int i = 0; i < cap; i++)
			if (old[i])
				names_put(s, old[i]);
	}
	names_put(s, n);
}

const char *names_fresh(NameSet *s, const char *base)
{
	const char *n = base;
	for (int k = 2; names_has(s, n); k++)
		n = arena_printf(s->a, "%s%d", base, k);
	names_add(s, n);
	return n;
}

void names_of_fusion(NameSet *s, Fusion *f)
{
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		names_add(s, t->name);
		for (int k = 0; k < t->nroot; k++)
			names_add(s, t->root[k]->name);
	}
	for (int i = 0; i < f->noutputs; i++)
		names_add(s, f->outputs[i]->name);
	for (int i = 0; i < f->nparams; i++)
		names_add(s, f->params[i]->name);
	for (int i = 0; i < f->nsizes; i++)
		names_add(s, f->sizes[i]->name);
}

/* ---- the copies ------------------------------------------------------------------------ */

/* How a tensor is read: NULL for distinct indices (x[i, j]), else per dimension the
 * constant c as -1 - c, or the position of the index's first occurrence (x[i, 0] is {0, -1},
 * x[i, i] is {0, 0}). Such a read of a reduction gets a copy over the distinct indices only,
 * with the constants in its definition, so that the copy can be computed inside its reader's
 * loops (a whole dimension of it would need a buffer). */
typedef const int64_t *Pattern;

typedef struct Entry {
	int ctx, orig;        /* key: context, original tensor's index, pattern, root map */
	Pattern pat, rmap;
	Tensor *t;            /* the tensor that context reads */
	struct Entry *next;
} Entry;

typedef struct Job {
	Tensor *t;            /* whose definition to rewrite */
	IrExpr *def;          /* the original definition */
	Tensor *orig;         /* t's original (t itself, or what t copies) */
	IrExpr **sub;         /* a copy: what orig's root k becomes (an axis of t, a constant) */
	int ctx;              /* the context of its reads */
	Tensor *reader;       /* the stored reader of that context (names its copies) */
	const int64_t *map;   /* per root of t: the nest output's root it stands for, or -1 */
} Job;

typedef struct Queue {
	Job *v;
	int n, cap, head;
} Queue;

typedef struct Nests {
	Arena *a;
	Fusion *f;
	AutoCopies mode;
	NameSet names;
	int n;                /* original tensors */
	IrExpr **def;         /* original definitions */
	bool *needs;          /* the definition leads to a reduction or an output */
	int *owner;           /* context that uses the original (0: none yet) */
	Entry **buckets;
	int nbuckets;
	Vec *copies;          /* per original: its copies, in creation order */
	int ncopies;
	int next_ctx;
	int nest;             /* context of the nest being walked */
	Tensor *root;         /* its output */
	Queue root_jobs;      /* the nest output's context: done first */
	Queue jobs;           /* the others */
	bool too_many;
} Nests;

static Entry **bucket(Nests *z, int ctx, int orig)
{
	uint64_t h = ((uint64_t)(unsigned)ctx * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(unsigned)orig;
	return &z->buckets[(h ^ (h >> 29)) % (uint64_t)z->nbuckets];
}

static bool same_pattern(Pattern p, Pattern q, int n)
{
	if (!p || !q)
		return p == q;
	return memcmp(p, q, sizeof(int64_t) * (size_t)n) == 0;
}

static Tensor *lookup(Nests *z, int ctx, Tensor *x, Pattern pat, Pattern rmap)
{
	for (Entry *e = *bucket(z, ctx, x->index); e; e = e->next)
		if (e->ctx == ctx && e->orig == x->index && same_pattern(e->pat, pat, x->ndim) &&
		    same_pattern(e->rmap, rmap, x->ndim))
			return e->t;
	return NULL;
}

static void remember(Nests *z, int ctx, Tensor *x, Pattern pat, Pattern rmap, Tensor *t)
{
	Entry **b = bucket(z, ctx, x->index), *e = NEW(z->a, Entry);
	*e = (Entry){ctx, x->index, pat, rmap, t, *b};
	*b = e;
}

/* The read x[args] by job j in terms of the nest output's roots (NULL when a subscript is
 * not one of them: a constant, a reduction index of a stored reader). */
static Pattern root_map_of(Nests *z, Job *j, IrExpr *e)
{
	int64_t *m = arena_alloc(z->a, sizeof(int64_t) * (size_t)(e->nargs ? e->nargs : 1));
	for (int k = 0; k < e->nargs; k++) {
		IrExpr *g = e->args[k];
		if (g->kind != EX_AXIS || g->axis->root_index < 0 || !j->map)
			return NULL;
		m[k] = j->map[g->axis->root_index];
		if (m[k] < 0)
			return NULL;
	}
	return m;
}

/* The pattern of the read x[args], or NULL. */
static Pattern pattern_of(Nests *z, IrExpr *e)
{
	int64_t *p = arena_alloc(z->a, sizeof(int64_t) * (size_t)(e->nargs ? e->nargs : 1));
	bool plain = true;
	for (int k = 0; k < e->nargs; k++) {
		IrExpr *g = e->args[k];
		p[k] = k;
		if (g->kind != EX_AXIS) {
			p[k] = -1 - g->ival; /* sema: an index or an integer constant */
			plain = false;
			continue;
		}
		for (int m = 0; m < k; m++) {
			if (e->args[m]->kind == EX_AXIS && e->args[m]->axis == g->axis) {
				p[k] = m;
				plain = false;
				break;
			}
		}
	}
	return plain ? NULL : p;
}

/* The distinct tensors that e accesses, in order of first access. */
static void collect_reads(Arena *a, IrExpr *e, Vec *out)
{
	if (!e)
		return;
	if (e->kind == EX_ACCESS) {
		int i = 0;
		while (i < out->len && out->items[i] != e->tensor)
			i++;
		if (i == out->len)
			vec_push(a, out, e->tensor);
	}
	for (int i = 0; i < e->nargs; i++)
		collect_reads(a, e->args[i], out);
}

static void push_job(Nests *z, Tensor *t, Tensor *orig, IrExpr **sub, int ctx,
		     Tensor *reader, const int64_t *map)
{
	Queue *q = ctx == z->nest ? &z->root_jobs : &z->jobs;
	if (q->n == q->cap) {
		q->cap = q->cap ? 2 * q->cap : 64;
		Job *n = arena_alloc(z->a, sizeof(Job) * (size_t)q->cap);
		if (q->n)
			memcpy(n, q->v, sizeof(Job) * (size_t)q->n);
		q->v = n;
	}
	q->v[q->n++] = (Job){t, z->def[orig->index], orig, sub, ctx, reader, map};
}

/* A copy of x for the reader `reader`, read with pattern pat: an intermediate (a reduction
 * stays one, anything else is inlined) over its own root axes, one per distinct index of
 * the read and the reduction axes; *sub says what each root of x becomes in its definition
 * (filled in by its job). */
static Tensor *copy_of(Nests *z, Tensor *x, Tensor *reader, Pattern pat, IrExpr ***sub)
{
	Tensor *c = NEW(z->a, Tensor);
	*c = *x;
	c->name = names_fresh(&z->names, arena_printf(z->a, "%s_%s", x->name, reader->name));
	c->kind = x->kind == TK_SCALAR ? TK_SCALAR : TK_INTERMEDIATE;
	c->param_index = 0;
	c->sched = tensor_sched_new(MEM_LOCAL); /* a new nest: none of x's directives */
	c->sched.inlined = !tensor_is_reduction(x);
	c->copy_of = x->copy_of ? x->copy_of : x;
	c->readers = (Vec){0};
	c->history = (Vec){0};
	size_t n = (size_t)(x->nroot ? x->nroot : 1);
	c->root = arena_alloc(z->a, sizeof(Axis *) * n);
	c->domain = arena_alloc(z->a, sizeof(Axis *) * n);
	c->shape = arena_alloc(z->a, sizeof(IrExpr *) * n);
	*sub = arena_alloc(z->a, sizeof(IrExpr *) * n);
	c->ndim = c->nroot = 0;
	for (int k = 0; k < x->nroot; k++) {
		bool kept = k < x->ndim;
		if (kept && pat && pat[k] != k) {
			(*sub)[k] = pat[k] < 0 ? ir_int(z->a, -1 - pat[k]) : (*sub)[pat[k]];
			continue;
		}
		Axis *ax = NEW(z->a, Axis);
		*ax = *x->root[k];
		ax->owner = c;
		ax->root_index = c->nroot;
		if (kept)
			c->shape[c->ndim++] = x->shape[k];
		c->root[c->nroot++] = ax;
		(*sub)[k] = ir_axis(z->a, ax);
	}
	memcpy(c->domain, c->root, sizeof(Axis *) * (size_t)c->nroot);
	c->ndomain = c->nroot;
	vec_push(z->a, &z->copies[x->index], c);
	c->index = z->n + z->ncopies++; /* until the end: past the originals */
	return c;
}

/* The tensor that job j reads for x in the read e = x[args]. In AUTO_COPY_NEST, a read in
 * terms of the nest output's own indices is shared by every stored reader of the nest that
 * reads x with the same indices, provided the output's context reads it so (its jobs come
 * first): it is computed in the output's loops over those indices, where each of them sees
 * the element it reads. Any other read is its stored reader's own. */
static Tensor *resolve(Nests *z, Tensor *x, IrExpr *e, Job *j)
{
	if (x->index < 0 || x->index >= z->n || !x->def)
		return x; /* an input (or a tensor without definition) */
	bool red = tensor_is_reduction(x);
	if (!red && !z->needs[x->index] && x->kind != TK_OUTPUT)
		return x; /* an inlined tensor over inputs only: the same everywhere */
	Pattern pat = pattern_of(z, e), rmap = NULL;
	if (!red && !z->needs[x->index])
		pat = NULL; /* a copy of an output over inputs only: recomputed as it is read */
	int key = j->ctx;
	Tensor *reader = j->reader;
	if (z->mode == AUTO_COPY_NEST && (rmap = root_map_of(z, j, e))) {
		Tensor *t = lookup(z, z->nest, x, pat, rmap);
		if (t || j->ctx == z->nest) {
			if (t)
				return t;
			key = z->nest;
			reader = z->root;
		} else {
			rmap = NULL;
		}
	}
	Tensor *t = lookup(z, key, x, pat, rmap);
	if (t)
		return t;
	IrExpr **sub = NULL;
	if (!z->owner[x->index] && x->kind != TK_OUTPUT && !pat) {
		z->owner[x->index] = key;
		t = x;
	} else if (z->ncopies >= AUTO_MAX_COPIES) {
		z->too_many = true;
		return x;
	} else {
		t = copy_of(z, x, reader, pat, &sub);
	}
	remember(z, key, x, pat, rmap, t);
	/* what t's roots stand for: the subscripts of the read (a copy's roots are the read's
	 * distinct indices); reduction roots stand for nothing of the output */
	int64_t *map = arena_alloc(z->a, sizeof(int64_t) * (size_t)(t->nroot ? t->nroot : 1));
	for (int k = 0, n = 0; k < x->nroot; k++) {
		if (k < x->ndim && pat && pat[k] != k)
			continue;
		IrExpr *g = k < x->ndim ? e->args[k] : NULL;
		map[n++] = g && g->kind == EX_AXIS && g->axis->root_index >= 0 && j->map
				   ? j->map[g->axis->root_index] : -1;
	}
	/* its reads: a reduction is a stored reader of its own (a new context); an inlined
	 * tensor reads in the context of whoever reads it */
	if (red)
		push_job(z, t, x, sub, ++z->next_ctx, t, map);
	else
		push_job(z, t, x, sub, key, reader, map);
	return t;
}

typedef struct Rewrite {
	Nests *z;
	Job *job;
} Rewrite;

static IrExpr *rewrite_fn(Arena *a, IrExpr *e, void *ctx)
{
	Rewrite *w = ctx;
	Job *j = w->job;
	if (e->kind == EX_AXIS && e->axis->owner == j->orig && j->sub)
		return ir_copy(a, j->sub[e->axis->root_index]);
	/* ir_rewrite passes a node whose operands did not change as it is, and that node is
	 * also in the original definition, which later jobs rewrite again (a 0-d read `t[]` of
	 * a reduction, copied per reader): change copies only */
	if (e->kind == EX_REDUCE && j->sub) {
		Axis **red = arena_alloc(a, sizeof(Axis *) * (size_t)e->nred);
		for (int i = 0; i < e->nred; i++)
			red[i] = e->red_axes[i]->owner == j->orig
					 ? j->sub[e->red_axes[i]->root_index]->axis : e->red_axes[i];
		e = ir_copy(a, e);
		e->red_axes = red;
	}
	if (e->kind != EX_ACCESS)
		return e;
	Tensor *x = e->tensor, *t = resolve(w->z, x, e, j);
	if (t == x)
		return e;
	e = ir_copy(a, e);
	e->tensor = t;
	if (t != x && t->ndim != e->nargs) {
		Pattern pat = pattern_of(w->z, e);
		/* a copy over the distinct indices of the read */
		int n = 0;
		for (int k = 0; k < e->nargs; k++)
			if (pat[k] == k)
				e->args[n++] = e->args[k];
		e->nargs = n;
	}
	return e;
}

static void run_job(Nests *z, Job j)
{
	Rewrite w = {z, &j};
	IrExpr *def = ir_rewrite(z->a, j.def, rewrite_fn, &w);
	/* a copy of an output holds the output's stored value: rounded to its dtype */
	if (j.orig->kind == TK_OUTPUT && j.t != j.orig && !tensor_is_reduction(j.orig) &&
	    def->dtype != j.orig->dtype)
		def = ir_cast(z->a, j.orig->dtype, def);
	j.t->def = def;
}

/* Is a (in the copy c's definition) b (in its original x's), with c's roots standing for
 * x's and the tensors from index `from` on already found equal (same[]) for others? */
static bool same_def(IrExpr *a, IrExpr *b, Tensor *c, Tensor *x, Tensor **same, int from)
{
	if (!a || !b)
		return a == b;
	if (a->kind != b->kind || a->dtype != b->dtype || a->nargs != b->nargs || a->red != b->red ||
	    a->nred != b->nred)
		return false;
	switch (a->kind) {
	case EX_INT: if (a->ival != b->ival) return false; break;
	case EX_FLOAT: if (a->fval != b->fval) return false; break;
	case EX_OP: if (a->op != b->op) return false; break;
	case EX_PARAM: if (a->param != b->param) return false; break;
	case EX_SIZE: if (a->size != b->size) return false; break;
	case EX_PAR: if (a->par != b->par) return false; break;
	default: break;
	}
	if (a->kind == EX_AXIS && !(a->axis->owner == c && b->axis->owner == x
				    ? a->axis->root_index == b->axis->root_index
				    : a->axis == b->axis))
		return false;
	if (a->kind == EX_ACCESS) {
		Tensor *t = a->tensor;
		if (t->index >= from && same[t->index])
			t = same[t->index];
		if (t != b->tensor)
			return false;
	}
	for (int i = 0; i < a->nargs; i++)
		if (!same_def(a->args[i], b->args[i], c, x, same, from))
			return false;
	return true;
}

static void replace_reads(IrExpr *e, Tensor **same, int from)
{
	if (!e)
		return;
	if (e->kind == EX_ACCESS && e->tensor->index >= from && same[e->tensor->index])
		e->tensor = same[e->tensor->index];
	for (int i = 0; i < e->nargs; i++)
		replace_reads(e->args[i], same, from);
}

/* Keeps the inputs and the statements some output depends on (dead code is never lowered,
 * and would only constrain where the live tensors it reads are computed), and rebuilds the
 * readers lists. */
static void drop_dead(Arena *a, Fusion *f)
{
	bool *live = arena_alloc(a, sizeof(bool) * (size_t)(f->ntensors + 1));
	Vec *reads = arena_alloc(a, sizeof(Vec) * (size_t)(f->ntensors + 1));
	for (int i = f->ntensors - 1; i >= 0; i--) {
		Tensor *t = f->tensors[i];
		t->readers = (Vec){0};
		live[i] |= t->kind == TK_OUTPUT || t->kind == TK_INPUT;
		if (!live[i])
			continue;
		collect_reads(a, t->def, &reads[i]);
		for (int k = 0; k < reads[i].len; k++) {
			Tensor *x = VEC_AT(reads[i], Tensor, k);
			if (x->index >= 0 && x->index < i)
				live[x->index] = true;
		}
	}
	int n = 0;
	for (int i = 0; i < f->ntensors; i++) {
		for (int k = 0; k < reads[i].len; k++)
			vec_push(a, &VEC_AT(reads[i], Tensor, k)->readers, f->tensors[i]);
		if (live[i])
			f->tensors[n++] = f->tensors[i];
	}
	f->ntensors = n;
	for (int i = 0; i < n; i++)
		f->tensors[i]->index = i;
}

bool auto_split_nests(Arena *a, Fusion *f, AutoCopies mode)
{
	Nests z = {.a = a, .f = f, .mode = mode, .n = f->ntensors, .names = {.a = a}};
	int n = z.n;
	bool any = false;
	for (int i = 0; i < f->ntensors; i++)
		any |= tensor_is_reduction(f->tensors[i]);
	for (int i = 0; i < f->noutputs; i++)
		any |= f->outputs[i]->readers.len > 0;
	if (!any)
		return true; /* pointwise, no output read: every nest reads inputs only */
	names_of_fusion(&z.names, f);
	z.def = arena_alloc(a, sizeof(IrExpr *) * (size_t)n);
	z.needs = arena_alloc(a, sizeof(bool) * (size_t)n);
	z.owner = arena_alloc(a, sizeof(int) * (size_t)n);
	z.copies = arena_alloc(a, sizeof(Vec) * (size_t)n);
	z.nbuckets = 4 * n + 64;
	z.buckets = arena_alloc(a, sizeof(Entry *) * (size_t)z.nbuckets);
	for (int i = 0; i < n; i++) {
		Tensor *t = f->tensors[i];
		if (t->index != i)
			die("auto_split_nests: tensor %s out of order", t->name);
		z.def[i] = t->def;
		Vec reads = {0};
		collect_reads(a, t->def, &reads);
		for (int k = 0; k < reads.len; k++) {
			Tensor *x = VEC_AT(reads, Tensor, k);
			z.needs[i] |= tensor_is_reduction(x) || x->kind == TK_OUTPUT ||
				      (x->index >= 0 && x->index < i && z.needs[x->index]);
		}
	}
	/* Each output is the root of its nest, in declaration order. */
	for (int i = 0; i < f->noutputs; i++) {
		Tensor *o = f->outputs[i];
		if (!o->def)
			continue;
		z.nest = ++z.next_ctx;
		z.root = o;
		z.owner[o->index] = z.nest;
		remember(&z, z.nest, o, NULL, NULL, o);
		int64_t *map = arena_alloc(a, sizeof(int64_t) * (size_t)(o->nroot ? o->nroot : 1));
		for (int k = 0; k < o->nroot; k++)
			map[k] = k < o->ndim ? k : -1;
		push_job(&z, o, o, NULL, z.nest, o, map);
		/* the output's context first, then the stored readers it made */
		while (z.root_jobs.head < z.root_jobs.n || z.jobs.head < z.jobs.n) {
			Queue *q = z.root_jobs.head < z.root_jobs.n ? &z.root_jobs : &z.jobs;
			run_job(&z, q->v[q->head++]);
		}
		z.root_jobs = z.jobs = (Queue){0};
	}
	/* A copy of an inlined tensor that came out the same as its original is the original
	 * (softmax's e = exp(x - m), read by the sum and by the output, both with the one m). */
	Tensor **same = arena_alloc(a, sizeof(Tensor *) * (size_t)(n + z.ncopies + 1));
	for (int i = 0; i < n; i++) {
		Tensor *x = f->tensors[i];
		for (int k = 0; k < z.copies[i].len; k++) {
			Tensor *c = VEC_AT(z.copies[i], Tensor, k);
			if (!tensor_is_reduction(c) && c->nroot == x->nroot && c->kind == x->kind &&
			    same_def(c->def, x->def, c, x, same, n))
				same[c->index] = x;
		}
	}
	/* Copies right after their originals. */
	Tensor **order = arena_alloc(a, sizeof(Tensor *) * (size_t)(n + z.ncopies));
	int m = 0;
	for (int i = 0; i < n; i++) {
		order[m++] = f->tensors[i];
		for (int k = 0; k < z.copies[i].len; k++)
			if (!same[VEC_AT(z.copies[i], Tensor, k)->index])
				order[m++] = VEC_AT(z.copies[i], Tensor, k);
	}
	for (int i = 0; i < m; i++)
		replace_reads(order[i]->def, same, n);
	f->tensors = order;
	f->ntensors = m;
	for (int i = 0; i < m; i++)
		order[i]->index = i;
	drop_dead(a, f);
	return !z.too_many;
}

/* ---- one nest for a row group's outputs ------------------------------------------------ */

/* Marks in `in` the tensors that e reads. */
static void mark_reads(IrExpr *e, bool *in, int n)
{
	if (!e)
		return;
	if (e->kind == EX_ACCESS && e->tensor->index >= 0 && e->tensor->index < n)
		in[e->tensor->index] = true;
	for (int i = 0; i < e->nargs; i++)
		mark_reads(e->args[i], in, n);
}

/* Could c stand for u: copies of one original (c may be that original output), both
 * reductions or both inlined, over the same extents, with definitions equal up to the
 * tensors already shared (same[])? */
static bool same_copy(Tensor *c, Tensor *u, Tensor **same)
{
	Tensor *oc = c->copy_of ? c->copy_of : c, *ou = u->copy_of ? u->copy_of : u;
	if (oc != ou || c == u || u->kind == TK_OUTPUT ||
	    (c->kind != u->kind && !(c->kind == TK_OUTPUT && tensor_is_reduction(c))) ||
	    c->dtype != u->dtype || c->ndim != u->ndim || c->nroot != u->nroot ||
	    tensor_is_reduction(c) != tensor_is_reduction(u) || c->sched.inlined != u->sched.inlined)
		return false;
	for (int k = 0; k < c->nroot; k++)
		if (!ir_equal(c->root[k]->extent, u->root[k]->extent) ||
		    c->root[k]->reduction != u->root[k]->reduction)
			return false;
	return same_def(c->def, u->def, c, u, same, 0);
}

bool auto_share_copies(Arena *a, Fusion *f, Tensor *anchor)
{
	int n = f->ntensors;
	bool *in = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
	Tensor **same = arena_alloc(a, sizeof(Tensor *) * (size_t)(n + 1));
	/* what the anchor reads, through every tensor it reads (each after what it reads) */
	in[anchor->index] = true;
	for (int i = n - 1; i >= 0; i--)
		if (in[i])
			mark_reads(f->tensors[i]->def, in, n);
	/* the anchor's tensors by their original */
	Vec *of = arena_alloc(a, sizeof(Vec) * (size_t)(n + 1));
	for (int k = 0; k < n; k++) {
		Tensor *u = f->tensors[k], *o = u->copy_of ? u->copy_of : u;
		if (in[k] && o->index >= 0 && o->index < n)
			vec_push(a, &of[o->index], u);
	}
	bool any = false;
	Tensor **value = arena_alloc(a, sizeof(Tensor *) * (size_t)(n + 1));
	/* definition order: what a copy reads is shared (or not) before the copy is compared */
	for (int i = 0; i < n; i++) {
		Tensor *c = f->tensors[i], *o = c->copy_of ? c->copy_of : c;
		if (in[i] || !c->def || c->kind == TK_INPUT || o->index < 0 || o->index >= n ||
		    (c->kind == TK_OUTPUT && !tensor_is_reduction(c)))
			continue;
		Tensor *u = NULL;
		for (int k = 0; k < of[o->index].len && !u; k++)
			if (same_copy(c, VEC_AT(of[o->index], Tensor, k), same))
				u = VEC_AT(of[o->index], Tensor, k);
		/* nothing reads an output (auto_split_nests): a reduction output that the anchor
		 * computes a copy of stores that copy instead (s[i] = s_y[i]) */
		if (c->kind == TK_OUTPUT)
			value[i] = u;
		else
			same[i] = u;
		any |= u != NULL;
	}
	if (!any)
		return false;
	for (int i = 0; i < n; i++)
		replace_reads(f->tensors[i]->def, same, 0);
	for (int i = 0; i < n; i++) {
		Tensor *o = f->tensors[i];
		if (!value[i])
			continue;
		IrExpr **idx = arena_alloc(a, sizeof(IrExpr *) * (size_t)(o->ndim ? o->ndim : 1));
		for (int k = 0; k < o->ndim; k++)
			idx[k] = ir_axis(a, o->root[k]);
		o->def = ir_access(a, value[i], idx, o->ndim);
		o->nroot = o->ndomain = o->ndim; /* its reduction axes go with the reduction */
	}
	/* such an output comes right after the copy it stores (tensors computed at one loop run
	 * in this order; nothing reads an output, so it may move later) */
	Tensor **order = arena_alloc(a, sizeof(Tensor *) * (size_t)(n + 1));
	Vec *after = arena_alloc(a, sizeof(Vec) * (size_t)(n + 1));
	for (int k = 0; k < n; k++)
		if (value[k])
			vec_push(a, &after[value[k]->index], f->tensors[k]);
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (value[i])
			continue;
		order[m++] = f->tensors[i];
		for (int k = 0; k < after[i].len; k++)
			order[m++] = VEC_AT(after[i], Tensor, k);
	}
	for (int i = 0; i < m; i++) {
		f->tensors[i] = order[i];
		order[i]->index = i;
	}
	drop_dead(a, f);
	return true;
}
