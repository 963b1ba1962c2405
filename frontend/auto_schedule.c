/* auto_schedule.c: the schedule used when a fusion has no schedule block (or `auto`).
 * docs/auto_schedule.md explains the choice; in short, for each pointwise output:
 *
 *   1. merge the axes into one when every access is the identity (same shape, no transpose or
 *      broadcast), else keep the last axis as the vector axis and merge the outer ones;
 *   2. vec = 16 bytes / the widest dtype among the output and the tensors it reads, halved until
 *      it divides the vector axis' extent (a size symbol is assumed to, and the vectorize pass
 *      records that precondition for the launcher);
 *   3. split(x, vec) -> (x, v); split(x, 128) -> (x, tx); split(x, 4) -> (bx, u): the domain
 *      [bx, u, tx, v] with bx on blockIdx.x, tx on threadIdx.x, u unrolled and v vectorized, so
 *      consecutive threads access consecutive 16-byte vectors (coalesced) and each thread keeps
 *      four of them in flight (a short constant axis gets fewer threads and less unrolling);
 *   4. the merged outer axis of a non-mergeable output goes on blockIdx.y when its extent is a
 *      constant <= 65535, else it is folded into bx.
 *
 * Pointwise intermediates stay inlined (their reads count as reads of what they read).
 *
 * A fusion with reductions gets its schedule as generated directives, applied by
 * schedule_apply like a schedule block: row groups (an output and the row reductions it reads)
 * get one block per row (or several short rows per block), threads over the row in vectors,
 * block reductions computed at the row, and the row kept in registers when it is constant and
 * fits (persistent); other reduction outputs get threads over their kept axes and serial
 * reduction loops; other pointwise outputs a general per-thread schedule.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

enum { AUTO_THREADS = 128, AUTO_UNROLL = 4, AUTO_VECTOR_BYTES = 16, AUTO_GRID_YZ = 65535 };

/* What the accesses reachable from an output's definition allow. */
typedef struct Access {
	Tensor *out;
	bool identity;  /* every memory read is out's own index order and shape */
	bool vec_ok;    /* the last index only ever subscripts the last dimension */
	int max_size;   /* widest dtype read or written, in bytes */
} Access;

static bool dims_equal(IrExpr *x, IrExpr *y)
{
	if (x->kind != y->kind)
		return false;
	return x->kind == EX_SIZE ? x->size == y->size : x->kind == EX_INT && x->ival == y->ival;
}

/* Records a read of memory tensor x whose subscript k is out's root `pos[k]` (-1: other). */
static void note_read(Access *acc, Tensor *x, const int *pos)
{
	Tensor *o = acc->out;
	if (dtype_size(x->dtype) > acc->max_size)
		acc->max_size = dtype_size(x->dtype);
	if (x->ndim != o->ndim && x->ndim != 0) /* a 0-d read is the same for every element */
		acc->identity = false;
	for (int k = 0; k < x->ndim; k++) {
		if (pos[k] != k || k >= o->ndim || !dims_equal(x->shape[k], o->shape[k]))
			acc->identity = false;
		if (pos[k] == o->ndim - 1 && k != x->ndim - 1)
			acc->vec_ok = false;
	}
}

/* Walks e, an expression over the root axes of a tensor whose root k is out's root map[k]. */
static void walk(Access *acc, IrExpr *e, const int *map)
{
	if (!e)
		return;
	if (e->kind == EX_REDUCE) { /* a reduction inside: not a pointwise output */
		acc->identity = acc->vec_ok = false;
		return;
	}
	if (e->kind != EX_ACCESS) {
		for (int i = 0; i < e->nargs; i++)
			walk(acc, e->args[i], map);
		return;
	}
	Tensor *x = e->tensor;
	int pos[16];
	if (e->nargs > 16) {
		acc->identity = acc->vec_ok = false;
		return;
	}
	for (int k = 0; k < e->nargs; k++) {
		IrExpr *s = e->args[k];
		pos[k] = s->kind == EX_AXIS && s->axis->root_index >= 0 ? map[s->axis->root_index] : -1;
	}
	/* Inlined tensors and read outputs are recomputed: look through their definitions. */
	bool recomputed = x->def && !tensor_is_reduction(x) &&
			  (x->inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
	if (recomputed)
		walk(acc, x->def, pos);
	else
		note_read(acc, x, pos);
}

static Access analyze(Tensor *o)
{
	Access acc = {o, true, true, dtype_size(o->dtype)};
	int map[16];
	for (int k = 0; k < o->ndim && k < 16; k++)
		map[k] = k;
	if (o->ndim > 16)
		acc.identity = acc.vec_ok = false;
	walk(&acc, o->def, map);
	return acc;
}

/* A name not used in t's domain: base, base2, base3, ... */
static const char *fresh(Arena *a, Tensor *t, const char *base)
{
	const char *n = base;
	for (int k = 2; tensor_find_axis(t, n); k++)
		n = arena_printf(a, "%s%d", base, k);
	return n;
}

/* Merges domain[from .. to] into one axis; returns it. */
static Axis *merge_range(Arena *a, Diag *d, Tensor *t, int from, int to)
{
	while (to > from) {
		Axis *x = t->domain[from], *y = t->domain[from + 1];
		const char *n = fresh(a, t, arena_printf(a, "%s%s", x->name, y->name));
		if (!sched_merge(a, d, t, x, y, n, t->span))
			die("auto_schedule: merge failed");
		to--;
	}
	return t->domain[from];
}

/* The largest power-of-two vector width <= want that the vector axis' extent allows. */
static int vector_width(Tensor *o, Axis *inner, bool merged, int want)
{
	int64_t n;
	IrExpr *last = o->shape[o->ndim - 1];
	for (int v = want; v > 1; v /= 2) {
		if (ir_is_const(inner->extent, &n)) {
			if (n % v == 0)
				return v;
		} else if (last->kind == EX_SIZE || (merged && last->kind == EX_INT && last->ival % v == 0)) {
			return v;
		}
	}
	return 1;
}

static void split(Arena *a, Diag *d, Tensor *t, Axis *x, int64_t f, const char *outer,
		  const char *inner)
{
	if (!sched_split(a, d, t, x, f, fresh(a, t, outer), fresh(a, t, inner), t->span))
		die("auto_schedule: split failed");
}

static bool schedule_output(Arena *a, Diag *d, Fusion *f, Tensor *o)
{
	if (!o->def || o->ndim == 0 || tensor_is_reduction(o))
		return true;
	Access acc = analyze(o);
	bool merged = acc.identity || o->ndim == 1;
	Axis *outer = NULL, *x;
	if (merged) {
		x = merge_range(a, d, o, 0, o->ndim - 1);
	} else {
		outer = merge_range(a, d, o, 0, o->ndim - 2);
		x = o->domain[1];
	}
	int vec = acc.vec_ok ? vector_width(o, x, merged, AUTO_VECTOR_BYTES / acc.max_size) : 1;
	Axis *v = NULL;
	const char *base = x->name;
	if (vec > 1) {
		split(a, d, o, x, vec, arena_printf(a, "%so", base), "v");
		v = x->to[1];
		x = x->to[0];
	}
	/* A short constant axis gets fewer threads (a warp at least) and less unrolling, so
	 * small tensors do not launch mostly idle threads. */
	int64_t threads = AUTO_THREADS, unroll = AUTO_UNROLL, n;
	if (ir_is_const(x->extent, &n)) {
		while (threads > 32 && threads / 2 >= n)
			threads /= 2;
		while (unroll > 1 && threads * (unroll / 2) >= n)
			unroll /= 2;
	}
	split(a, d, o, x, threads, arena_printf(a, "%sb", base), "tx");
	Axis *tx = x->to[1];
	x = x->to[0];
	Axis *bx = x, *u = NULL;
	if (unroll > 1) {
		split(a, d, o, x, unroll, "bx", "u");
		bx = x->to[0];
		u = x->to[1];
	} else {
		bx->name = fresh(a, o, "bx");
	}
	if (outer && !(ir_is_const(outer->extent, &n) && n <= AUTO_GRID_YZ)) {
		const char *name = fresh(a, o, arena_printf(a, "%s%s", outer->name, bx->name));
		if (!sched_merge(a, d, o, outer, bx, name, o->span))
			die("auto_schedule: merge failed");
		bx = outer->to[0];
		outer = NULL;
	}
	if (!sched_bind(f, d, o, bx, PT_BIDX, o->span) || !sched_bind(f, d, o, tx, PT_TIDX, o->span))
		die("auto_schedule: bind failed");
	if (outer && !sched_bind(f, d, o, outer, PT_BIDY, o->span))
		die("auto_schedule: bind failed");
	if (u) {
		u->unroll = true;
		u->unroll_span = o->span;
	}
	if (v) {
		v->vectorize = true;
		v->vectorize_span = o->span;
	}
	return true;
}

/* ---- fusions with reductions --------------------------------------------------------- */

/* A reduction schedule is written as directives (AstDirective, the same as a schedule block)
 * and applied by schedule_apply, so it goes through every check and end-of-schedule step a
 * user's schedule does (default placement, vectorization, caches). */
enum {
	ROW_THREADS = 128,        /* threads over a row of symbolic length */
	ROW_MAX_THREADS = 512,    /* threads over a long row of constant length */
	ROW_VECTORS = 8,          /* vectors per thread a long constant row aims for */
	PERSIST_BYTES = 32768,    /* a cached row of one input: at most 8192 f32 */
	PERSIST_ELEMS = 16,       /* elements per thread and cached input */
	PERSIST_LONG_ELEMS = 32,  /* the same for rows that would need more than ROW_THREADS */
	PERSIST_MAX_ELEMS = 64,   /* registers per thread for all cached inputs together */
	BLOCK_ROWS_THREADS = 128, /* block size when several short rows share a block */
	COL_THREADS = 128,        /* threads over the kept columns of an outer reduction */
	ALL_THREADS = 512,        /* threads of the one block of a full (0-d) reduction */
	GRID_KEPT_BLOCKS = 264,   /* fewer blocks over the kept axes (2 per H100/H200 SM): */
	GRID_ROWS = 256,          /*   the reduction is split over blocks in chunks of this */
	MAX_GROUP = 64,
};

typedef struct Plan {
	Arena *a;
	Fusion *f;
	Span at;      /* every generated directive points at the fusion */
	Vec dirs;     /* AstDirective* */
	Vec names;    /* names in use: indices, tensors, parameters, sizes, caches */
	Vec axes;     /* generated axis names, as "tensor.axis" */
} Plan;

static bool name_used(Plan *p, const char *n)
{
	for (int i = 0; i < p->names.len; i++)
		if (strcmp(VEC_AT(p->names, char, i), n) == 0)
			return true;
	return false;
}

static void use_name(Plan *p, const char *n)
{
	if (!name_used(p, n))
		vec_push(p->a, &p->names, (void *)n);
}

/* base, base2, base3, ...: the first that nothing in the fusion uses. */
static const char *fresh_name(Plan *p, const char *base)
{
	const char *n = base;
	for (int k = 2; name_used(p, n); k++)
		n = arena_printf(p->a, "%s%d", base, k);
	use_name(p, n);
	return n;
}

static bool axis_used(Plan *p, const char *t, const char *n)
{
	const char *key = arena_printf(p->a, "%s.%s", t, n);
	for (int i = 0; i < p->axes.len; i++)
		if (strcmp(VEC_AT(p->axes, char, i), key) == 0)
			return true;
	return name_used(p, n);
}

static void use_axis(Plan *p, const char *t, const char *n)
{
	vec_push(p->a, &p->axes, arena_printf(p->a, "%s.%s", t, n));
}

/* A new axis name for tensor t: base, base2, ... unused by t and by every index name. */
static const char *fresh_axis(Plan *p, const char *t, const char *base)
{
	const char *n = base;
	for (int k = 2; axis_used(p, t, n); k++)
		n = arena_printf(p->a, "%s%d", base, k);
	use_axis(p, t, n);
	return n;
}

static void plan_init(Plan *p, Arena *a, Fusion *f)
{
	*p = (Plan){.a = a, .f = f, .at = f->span};
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		use_name(p, t->name);
		for (int k = 0; k < t->nroot; k++)
			use_name(p, t->root[k]->name);
	}
	for (int i = 0; i < f->nparams; i++)
		use_name(p, f->params[i]->name);
	for (int i = 0; i < f->nsizes; i++)
		use_name(p, f->sizes[i]->name);
}

static AstName plan_name(Plan *p, const char *n)
{
	return (AstName){n, p->at};
}

/* `[result =] t.verb(args) [-> (outs)];` An argument is an integer, a dotted name
 * (threadIdx.x) or a name. */
static void emit(Plan *p, const char *result, const char *t, const char *verb, int nargs,
		 const char **args, int nouts, const char **outs)
{
	Vec va = {0}, vo = {0};
	for (int i = 0; i < nargs; i++) {
		const char *g = args[i], *dot = strchr(g, '.');
		AstArg *arg;
		if (g[0] >= '0' && g[0] <= '9')
			arg = ast_arg_int(p->a, p->at, strtoll(g, NULL, 10));
		else if (dot)
			arg = ast_arg_dotted(p->a, p->at, arena_strndup(p->a, g, (size_t)(dot - g)), dot + 1);
		else
			arg = ast_arg_name(p->a, p->at, g);
		vec_push(p->a, &va, arg);
	}
	for (int i = 0; i < nouts; i++)
		vec_push(p->a, &vo, ast_name_ptr(p->a, p->at, outs[i]));
	AstName res = plan_name(p, result);
	AstDirective *d = ast_directive(p->a, p->at, result ? &res : NULL, plan_name(p, t),
					plan_name(p, verb), &va, &vo);
	vec_push(p->a, &p->dirs, d);
}

static void d_split(Plan *p, const char *t, const char *ax, int64_t f, const char *o,
		    const char *i)
{
	const char *args[] = {ax, arena_printf(p->a, "%lld", (long long)f)}, *outs[] = {o, i};
	emit(p, NULL, t, "split", 2, args, 2, outs);
}

static void d_merge(Plan *p, const char *t, const char *x, const char *y, const char *m)
{
	const char *args[] = {x, y};
	emit(p, NULL, t, "merge", 2, args, 1, &m);
}

static void d_verb1(Plan *p, const char *t, const char *verb, const char *arg)
{
	emit(p, NULL, t, verb, 1, &arg, 0, NULL);
}

static void d_bind(Plan *p, const char *t, const char *ax, const char *par)
{
	const char *args[] = {ax, par};
	emit(p, NULL, t, "bind", 2, args, 0, NULL);
}

/* t.compute_at(u, ax); t's domain starts with u's axes `shared` (up to ax) then. */
static void d_compute_at(Plan *p, const char *t, const char *u, const char *ax,
			 const char **shared, int nshared)
{
	const char *args[] = {u, ax};
	for (int i = 0; i < nshared; i++)
		use_axis(p, t, shared[i]);
	emit(p, NULL, t, "compute_at", 2, args, 0, NULL);
}

static const char *d_cache_after(Plan *p, Tensor *x, const char *mem)
{
	const char *c = fresh_name(p, arena_printf(p->a, "%s_%s", x->name,
						   strcmp(mem, "local") == 0 ? "reg" : "smem"));
	emit(p, c, x->name, "cache_after", 1, &mem, 0, NULL);
	return c;
}

/* Smallest power of two >= n (n >= 1). */
static int64_t pow2_ceil(int64_t n)
{
	int64_t v = 1;
	while (v < n)
		v *= 2;
	return v;
}

/* ---- the row analysis ---------------------------------------------------------------- */

/* Roles of the indices of an expression walked from a row tensor: a row position (>= 0),
 * the column (the reduced index of a row reduction, the last index of a row-shaped output),
 * or anything else. */
enum { ROLE_COL = -1, ROLE_OTHER = -2 };

/* A row group: one output (a pointwise [rows..., N] tensor or a row reduction [rows...]) and
 * the row reductions it reads, all over the same rows and the same row length N. */
typedef struct Row {
	Fusion *f;
	Tensor *anchor;         /* the output whose row loop everything is computed at */
	int k;                  /* number of row indices */
	IrExpr **rows;          /* their extents */
	IrExpr *n;              /* row length */
	bool ok;                /* the whole group has the row shape */
	int max_size;           /* widest dtype read or written, in bytes */
	Tensor *reds[MAX_GROUP];  /* row reductions read (definition order after sorting) */
	int nreds;
	Tensor *ins[MAX_GROUP];   /* inputs read as full rows x[rows..., col] */
	uint64_t readers[MAX_GROUP]; /* per input: bit s set when stored tensor s reads it */
	int nins;
	Tensor *mids[MAX_GROUP];  /* inlined intermediates read as full rows mid[rows..., col] */
	uint64_t mid_readers[MAX_GROUP]; /* per mid: the stored tensors that read it */
	int nmids;
	int cur;                /* stored tensor being walked: 0 anchor, 1 + i reds[i] */
} Row;

static void row_walk(Row *r, IrExpr *e, const int *role);

static int row_add_red(Row *r, Tensor *t)
{
	for (int i = 0; i < r->nreds; i++)
		if (r->reds[i] == t)
			return i;
	if (r->nreds == MAX_GROUP - 1) {
		r->ok = false;
		return -1;
	}
	r->reds[r->nreds] = t;
	return r->nreds++;
}

/* A row reduction t[rows...] = red(col: ...) of the group: checked and walked once. */
static void row_reduction(Row *r, Tensor *t)
{
	int before = r->nreds;
	int i = row_add_red(r, t);
	if (i < 0 || i < before)
		return;
	if (t->ndim != r->k || t->nroot != r->k + 1 || !dims_equal(t->root[r->k]->extent, r->n)) {
		r->ok = false;
		return;
	}
	int role[17];
	for (int p = 0; p < r->k; p++) {
		if (!dims_equal(t->shape[p], r->rows[p]))
			r->ok = false;
		role[p] = p;
	}
	role[r->k] = ROLE_COL;
	int saved = r->cur;
	r->cur = 1 + i;
	row_walk(r, t->def->args[0], role);
	r->cur = saved;
}

/* A read of memory tensor x with subscript roles sub: rows in order, the column only last. */
static void row_read(Row *r, Tensor *x, const int *sub)
{
	int next = 0;
	bool full = x->ndim == r->k + 1;
	if (dtype_size(x->dtype) > r->max_size)
		r->max_size = dtype_size(x->dtype);
	for (int m = 0; m < x->ndim; m++) {
		int s = sub[m];
		if (s == ROLE_OTHER || (s == ROLE_COL && m != x->ndim - 1))
			r->ok = false;
		else if (s == ROLE_COL && !dims_equal(x->shape[m], r->n))
			r->ok = false;
		else if (s >= 0 && (s < next || !dims_equal(x->shape[m], r->rows[s])))
			r->ok = false;
		if (s >= 0)
			next = s + 1;
		full &= m < r->k ? s == m : s == ROLE_COL;
	}
	if (!full || !r->ok)
		return;
	int i = 0;
	while (i < r->nins && r->ins[i] != x)
		i++;
	if (i == MAX_GROUP) {
		r->ok = false;
		return;
	}
	if (i == r->nins)
		r->ins[r->nins++] = x;
	r->readers[i] |= 1ull << r->cur;
}

/* An inlined intermediate read as a full row: a candidate to keep in registers. */
static void row_mid(Row *r, Tensor *x, const int *sub)
{
	bool full = x->ndim == r->k + 1;
	for (int m = 0; m < x->ndim && full; m++)
		full = m < r->k ? sub[m] == m : sub[m] == ROLE_COL;
	if (!full)
		return;
	int i = 0;
	while (i < r->nmids && r->mids[i] != x)
		i++;
	if (i == MAX_GROUP)
		return;
	if (i == r->nmids)
		r->mids[r->nmids++] = x;
	r->mid_readers[i] |= 1ull << r->cur;
}

static void row_walk(Row *r, IrExpr *e, const int *role)
{
	if (!e || !r->ok)
		return;
	if (e->kind == EX_REDUCE) {
		r->ok = false;
		return;
	}
	if (e->kind != EX_ACCESS) {
		for (int i = 0; i < e->nargs; i++)
			row_walk(r, e->args[i], role);
		return;
	}
	Tensor *x = e->tensor;
	int sub[17];
	if (e->nargs > 16) {
		r->ok = false;
		return;
	}
	for (int m = 0; m < e->nargs; m++) {
		IrExpr *g = e->args[m];
		sub[m] = g->kind == EX_AXIS && g->axis->root_index >= 0 ? role[g->axis->root_index]
									 : ROLE_OTHER;
	}
	if (tensor_is_reduction(x)) {
		/* read as x[rows...] and itself a row reduction */
		for (int m = 0; m < x->ndim; m++)
			r->ok &= sub[m] == m;
		if (x->ndim != r->k || x->kind == TK_OUTPUT)
			r->ok = false;
		if (r->ok)
			row_reduction(r, x);
		return;
	}
	bool recomputed = x->def && (x->inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
	if (recomputed && x->kind == TK_INTERMEDIATE)
		row_mid(r, x, sub);
	if (recomputed)
		row_walk(r, x->def, sub);
	else
		row_read(r, x, sub);
}

static int row_red_cmp(const void *x, const void *y)
{
	return (*(Tensor *const *)x)->index - (*(Tensor *const *)y)->index;
}

/* Reader bits after sorting reds[]: (1 + old index) -> (1 + new index); bit 0 stays. */
static uint64_t remap_readers(Row *r, Tensor **old, uint64_t bits)
{
	uint64_t nb = bits & 1;
	for (int j = 0; j < r->nreds; j++)
		if (bits >> (1 + j) & 1)
			for (int m = 0; m < r->nreds; m++)
				if (r->reds[m] == old[j])
					nb |= 1ull << (1 + m);
	return nb;
}

/* The row group of output o, or ok == false when o is not row-shaped. */
static Row row_analyze(Arena *a, Tensor *o)
{
	Row r = {.anchor = o, .ok = true, .max_size = dtype_size(o->dtype)};
	bool red = tensor_is_reduction(o);
	r.k = red ? o->ndim : o->ndim - 1;
	if (r.k < 1 || r.k > 15 || (red && o->nroot != o->ndim + 1)) {
		r.ok = false;
		return r;
	}
	r.rows = o->shape;
	r.n = red ? o->root[r.k]->extent : o->shape[r.k];
	int role[17];
	for (int p = 0; p < r.k; p++)
		role[p] = p;
	role[r.k] = ROLE_COL;
	if (red) {
		r.cur = 0;
		row_walk(&r, o->def->args[0], role);
	} else {
		row_walk(&r, o->def, role);
	}
	/* A pointwise output is only a row group when it reads a row reduction. */
	if (!red && r.nreds == 0)
		r.ok = false;
	/* reds[] in definition order; the reader bits follow (1 + old index) -> (1 + new). */
	Tensor *old[MAX_GROUP];
	memcpy(old, r.reds, sizeof(Tensor *) * (size_t)r.nreds);
	qsort(r.reds, (size_t)r.nreds, sizeof(Tensor *), row_red_cmp);
	for (int i = 0; i < r.nins; i++)
		r.readers[i] = remap_readers(&r, old, r.readers[i]);
	for (int i = 0; i < r.nmids; i++)
		r.mid_readers[i] = remap_readers(&r, old, r.mid_readers[i]);
	(void)a;
	return r;
}

/* Does e read memory tensor x, looking through recomputed tensors (inlined intermediates,
 * scalar temporaries, pointwise outputs read by another tensor) other than `opaque`? */
static bool reads_through_but(IrExpr *e, Tensor *x, Tensor *opaque, int depth)
{
	if (!e || depth > 64)
		return false;
	if (e->kind == EX_ACCESS) {
		Tensor *t = e->tensor;
		if (t == x)
			return true;
		bool recomputed = t->def && !tensor_is_reduction(t) &&
				  (t->inlined || t->kind == TK_OUTPUT || t->kind == TK_SCALAR);
		if (recomputed && t != opaque && reads_through_but(t->def, x, opaque, depth + 1))
			return true;
	}
	for (int i = 0; i < e->nargs; i++)
		if (reads_through_but(e->args[i], x, opaque, depth))
			return true;
	return false;
}

static bool reads_through(IrExpr *e, Tensor *x, int depth)
{
	return reads_through_but(e, x, NULL, depth);
}

/* The number of stored tensors of f (outputs, reductions, non-inlined intermediates) whose
 * definition reads x. x.cache_after reroutes every one of them to the cache (docs/caching.md),
 * so a cache planned for some readers only is valid when these are all its readers. */
static int stored_readers(Fusion *f, Tensor *x)
{
	int n = 0;
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		bool stored = t->def && t->kind != TK_SCALAR &&
			      (t->kind == TK_OUTPUT || tensor_is_reduction(t) || !t->inlined);
		if (stored && reads_through(t->def, x, 0))
			n++;
	}
	return n;
}

static int popcount64(uint64_t v)
{
	int n = 0;
	for (; v; v &= v - 1)
		n++;
	return n;
}

/* ---- the row schedule ---------------------------------------------------------------- */

/* How a row group is spread: one block per row (or R rows per block on threadIdx.y for short
 * rows), T threads over the row, vec elements per vector; persistent: the inputs read by
 * several stored tensors are kept in registers (cached at the row), which needs a constant
 * row length. */
typedef struct RowShape {
	int64_t vec, threads, rows_per_block;
	bool persistent;
	bool cache[MAX_GROUP];   /* persistent: which inputs are kept in registers */
	Tensor *mid;             /* persistent: an intermediate kept in registers, or NULL */
} RowShape;

static int row_vec(Row *r)
{
	int64_t n;
	int vec = AUTO_VECTOR_BYTES / r->max_size;
	if (vec < 1)
		vec = 1;
	if (ir_is_const(r->n, &n))
		while (vec > 1 && n % vec)
			vec /= 2;
	return vec;
}

/* Does e call a float function (exp, tanh, erf, ...)? */
static bool has_float_fn(IrExpr *e)
{
	if (!e)
		return false;
	if (e->kind == EX_OP && op_kind(e->op) == 'f')
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (has_float_fn(e->args[i]))
			return true;
	return false;
}

/* The intermediate a persistent row keeps in registers instead of recomputing it: the first
 * one that the anchor and another stored tensor of the group read and that calls a float
 * function (softmax's e = exp(x - m), read by the sum and the output). */
static Tensor *row_kept_mid(Row *r)
{
	for (int i = 0; i < r->nmids; i++)
		if ((r->mid_readers[i] & 1) && popcount64(r->mid_readers[i]) >= 2 &&
		    has_float_fn(r->mids[i]->def))
			return r->mids[i];
	return NULL;
}

static RowShape row_shape(Row *r, bool may_persist)
{
	RowShape s = {.vec = row_vec(r), .threads = ROW_THREADS, .rows_per_block = 1};
	int64_t n;
	if (!ir_is_const(r->n, &n))
		return s;
	int64_t vectors = (n + s.vec - 1) / s.vec;
	/* persistent when every input read by two or more stored tensors fits */
	int64_t elems = 0;
	int ncached = 0;
	for (int i = 0; i < r->nins && may_persist; i++) {
		if (popcount64(r->readers[i]) < 2 || !(r->readers[i] & 1) ||
		    stored_readers(r->f, r->ins[i]) != popcount64(r->readers[i]))
			continue;
		ncached++;
		if (n * dtype_size(r->ins[i]->dtype) > PERSIST_BYTES)
			ncached = -1000;
		s.cache[i] = true;
	}
	if (ncached > 0) {
		/* 16 elements per thread, or 32 for long rows (fewer, fuller threads: measured
		 * faster for softmax and layernorm over 4096 f32, bench/RESULTS.md) */
		int64_t per = PERSIST_ELEMS;
		if ((n + per - 1) / per > ROW_THREADS && ncached * PERSIST_LONG_ELEMS <= PERSIST_MAX_ELEMS)
			per = PERSIST_LONG_ELEMS;
		s.threads = pow2_ceil((n + per - 1) / per);
		if (s.threads < 32)
			s.threads = 32;
		if (s.threads > 1024)
			s.threads = 1024;
		int64_t row_elems = ((vectors + s.threads - 1) / s.threads) * s.vec;
		elems = ncached * row_elems;
		s.persistent = elems <= PERSIST_MAX_ELEMS;
		if (s.persistent && elems + row_elems <= PERSIST_MAX_ELEMS)
			s.mid = row_kept_mid(r);
	}
	if (!s.persistent) {
		memset(s.cache, 0, sizeof s.cache);
		/* about ROW_VECTORS vectors per thread, but at least ROW_THREADS threads (each
		 * block gets little of the SM's thread slots otherwise) */
		s.threads = pow2_ceil((vectors + ROW_VECTORS - 1) / ROW_VECTORS);
		if (s.threads > ROW_MAX_THREADS)
			s.threads = ROW_MAX_THREADS;
		if (s.threads < ROW_THREADS)
			s.threads = ROW_THREADS;
	}
	/* No more threads than vectors; rows shorter than 32 vectors share a block (R rows on
	 * threadIdx.y). */
	if (s.threads > pow2_ceil(vectors))
		s.threads = pow2_ceil(vectors);
	if (vectors < 32)
		s.rows_per_block = BLOCK_ROWS_THREADS / s.threads;
	return s;
}

/* Names of the loops of the row split [.., jr, tx, jv] of one tensor. */
typedef struct RowAxes {
	const char *jr, *tx, *jv;
} RowAxes;

/* split(col, vec) -> (jo, jv); split(jo, T) -> (jr, tx); bind tx (when T > 1). vec == 1:
 * no jv. */
static RowAxes row_split(Plan *p, const char *t, const char *col, int64_t vec, int64_t threads)
{
	RowAxes x = {0};
	const char *jo = col;
	if (vec > 1) {
		jo = fresh_axis(p, t, "jo");
		x.jv = fresh_axis(p, t, "jv");
		d_split(p, t, col, vec, jo, x.jv);
	}
	x.jr = fresh_axis(p, t, "jr");
	x.tx = fresh_axis(p, t, "tx");
	d_split(p, t, jo, threads, x.jr, x.tx);
	d_bind(p, t, x.tx, "threadIdx.x");
	return x;
}

/* The name a root axis of t gets after compute_at: the reader's name for a mapped axis, its
 * own otherwise, with 2, 3, ... when a shared axis took that name. */
static const char *own_name(const char *name, const char **shared, int nshared, Arena *a)
{
	const char *n = name;
	for (int k = 2;; k++) {
		bool clash = false;
		for (int i = 0; i < nshared; i++)
			clash |= strcmp(shared[i], n) == 0;
		if (!clash)
			return n;
		n = arena_printf(a, "%s%d", name, k);
	}
}

/* Is the stored tensor `me` (a reader bit) the only reader of input i in the whole fusion? */
static bool sole_reader(Row *r, int i, uint64_t me)
{
	return r->readers[i] == me && stored_readers(r->f, r->ins[i]) == 1;
}

/* A stored reduction t of the group (reader bit `bit`): its row split, and in the
 * non-persistent case a one-vector register copy of each input that only t reads, so those
 * reads are 16-byte loads (a reduction axis itself cannot be vectorized). */
static void schedule_row_reduction(Plan *p, Row *r, RowShape *s, Tensor *t, int bit,
				   const char *col)
{
	uint64_t me = 1ull << bit;
	bool excl = false;
	for (int i = 0; i < r->nins; i++)
		excl |= sole_reader(r, i, me);
	excl &= !s->persistent && s->vec > 1;
	RowAxes x = row_split(p, t->name, col, s->persistent || excl ? s->vec : 1, s->threads);
	/* a constant row: the loop over a thread's vectors unrolled, so its loads are issued
	 * together (and persistent registers are indexed by constants) */
	if (ir_is_const(r->n, &(int64_t){0}) && (s->persistent || excl))
		d_verb1(p, t->name, "unroll", x.jr);
	if (x.jv)
		d_verb1(p, t->name, "unroll", x.jv);
	if (!excl)
		return;
	for (int i = 0; i < r->nins; i++) {
		if (!sole_reader(r, i, me))
			continue;
		const char *c = d_cache_after(p, r->ins[i], "local");
		const char *sh[] = {x.jr, x.tx};
		d_compute_at(p, c, t->name, x.tx, sh, 2);
		d_verb1(p, c, "vectorize", x.jv);
	}
}

/* The tensor that t (a reduction or a cached input) is computed at: the anchor, unless only
 * the kept intermediate reads it (compute_at wants a direct reader). */
static const char *row_reader(Row *r, RowShape *s, Tensor *t)
{
	Tensor *o = r->anchor;
	IrExpr *def = tensor_is_reduction(o) ? o->def->args[0] : o->def;
	if (s->mid && !reads_through_but(def, t, s->mid, 0) && reads_through(s->mid->def, t, 0))
		return s->mid->name;
	return o->name;
}

static void schedule_row(Plan *p, Row *r, bool may_persist)
{
	Tensor *o = r->anchor;
	RowShape s = row_shape(r, may_persist);
	bool red = tensor_is_reduction(o);
	/* the anchor: rows merged into one axis, on blockIdx.x (or split over blockIdx.x and
	 * threadIdx.y when several short rows share a block) */
	const char *row = o->root[0]->name;
	for (int q = 1; q < r->k; q++) {
		const char *m = fresh_axis(p, o->name, "row");
		d_merge(p, o->name, row, o->root[q]->name, m);
		row = m;
	}
	const char *shared[2] = {row, NULL};
	int nshared = 1;
	const char *at = row;
	if (s.rows_per_block > 1) {
		const char *bx = fresh_axis(p, o->name, "bx"), *ty = fresh_axis(p, o->name, "ty");
		d_split(p, o->name, row, s.rows_per_block, bx, ty);
		d_bind(p, o->name, bx, "blockIdx.x");
		d_bind(p, o->name, ty, "threadIdx.y");
		shared[0] = bx;
		shared[1] = at = ty;
		nshared = 2;
	} else {
		d_bind(p, o->name, row, "blockIdx.x");
	}
	/* Register caches of the persistent inputs (their readers then read the cache). */
	const char *cache[MAX_GROUP] = {0};
	for (int i = 0; i < r->nins; i++)
		if (s.cache[i])
			cache[i] = d_cache_after(p, r->ins[i], "local");
	const char *col = o->root[r->k]->name;
	if (red) {
		schedule_row_reduction(p, r, &s, o, 0, col);
	} else {
		/* a pointwise anchor writes whole vectors */
		RowAxes x = row_split(p, o->name, col, s.vec, s.threads);
		if (x.jv)
			d_verb1(p, o->name, "vectorize", x.jv);
		if (s.persistent)
			d_verb1(p, o->name, "unroll", x.jr);
	}
	/* The kept intermediate: in registers at the row, split like the anchor. */
	if (s.mid) {
		d_verb1(p, s.mid->name, "memory", "local");
		d_compute_at(p, s.mid->name, o->name, at, shared, nshared);
		const char *c = own_name(s.mid->root[r->k]->name, shared, nshared, p->a);
		RowAxes x = row_split(p, s.mid->name, c, s.vec, s.threads);
		d_verb1(p, s.mid->name, "unroll", x.jr);
		if (x.jv)
			d_verb1(p, s.mid->name, "unroll", x.jv);
	}
	/* The reductions at the row, in definition order. */
	for (int i = 0; i < r->nreds; i++) {
		Tensor *t = r->reds[i];
		if (t == o)
			continue;
		d_compute_at(p, t->name, row_reader(r, &s, t), at, shared, nshared);
		const char *c = own_name(t->root[r->k]->name, shared, nshared, p->a);
		schedule_row_reduction(p, r, &s, t, 1 + i, c);
	}
	/* Persistent inputs: the row in registers, split like their readers. */
	for (int i = 0; i < r->nins; i++) {
		if (!cache[i])
			continue;
		d_compute_at(p, cache[i], row_reader(r, &s, r->ins[i]), at, shared, nshared);
		const char *c = own_name(col, shared, nshared, p->a);
		RowAxes x = row_split(p, cache[i], c, s.vec, s.threads);
		if (x.jv)
			d_verb1(p, cache[i], "vectorize", x.jv);
		d_verb1(p, cache[i], "unroll", x.jr);
	}
}

/* ---- other shapes ---------------------------------------------------------------------- */

/* Does a tensor of f other than t read t? */
static bool read_by_other(Fusion *f, Tensor *t)
{
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *u = f->tensors[i];
		if (u != t && u->def && reads_through(u->def, t, 0))
			return true;
	}
	return false;
}

/* A reduction output that is not a row reduction (a column reduction s[j] = sum(i: x[i, j]),
 * or anything else): the kept axes merged and spread over blocks of threads, each thread
 * reducing serially (consecutive threads take consecutive kept indices, which for a column
 * reduction are consecutive addresses: coalesced). A full (0-d) reduction is one block
 * reduction over all its elements. */
static void schedule_kept(Plan *p, Tensor *o)
{
	const char *t = o->name;
	if (o->ndim == 0) {
		const char *x = o->root[0]->name;
		for (int q = 1; q < o->nroot; q++) {
			const char *m = fresh_axis(p, t, "r");
			d_merge(p, t, x, o->root[q]->name, m);
			x = m;
		}
		const char *ro = fresh_axis(p, t, "ro"), *tx = fresh_axis(p, t, "tx");
		d_split(p, t, x, ALL_THREADS, ro, tx);
		d_bind(p, t, tx, "threadIdx.x");
		return;
	}
	const char *x = o->root[0]->name;
	for (int q = 1; q < o->ndim; q++) {
		const char *m = fresh_axis(p, t, "col");
		d_merge(p, t, x, o->root[q]->name, m);
		x = m;
	}
	int64_t threads = COL_THREADS, n;
	IrExpr *ext = o->shape[0];
	for (int q = 1; q < o->ndim; q++)
		ext = ix_mul(p->a, ext, o->shape[q]);
	if (ir_is_const(ext, &n))
		while (threads > 32 && threads / 2 >= n)
			threads /= 2;
	const char *bx = fresh_axis(p, t, "bx"), *tx = fresh_axis(p, t, "tx");
	d_split(p, t, x, threads, bx, tx);
	d_bind(p, t, tx, "threadIdx.x");
	/* Few blocks over the kept axes: the reduction is also split over blocks (a grid
	 * reduction, docs/reductions.md), chunks of GRID_ROWS on blockIdx.x, the kept blocks on
	 * blockIdx.y. Only for an output no other tensor reads (the grid step's scope). */
	int64_t blocks;
	if (o->nroot == o->ndim + 1 && !read_by_other(p->f, o) && ir_is_const(ext, &n) &&
	    (blocks = (n + threads - 1) / threads) < GRID_KEPT_BLOCKS) {
		int64_t r;
		if (ir_is_const(o->root[o->ndim]->extent, &r) && r <= GRID_ROWS) {
			d_bind(p, t, bx, "blockIdx.x");
			return;
		}
		const char *rc = fresh_axis(p, t, "rc"), *rr = fresh_axis(p, t, "rr");
		d_split(p, t, o->root[o->ndim]->name, GRID_ROWS, rc, rr);
		d_bind(p, t, bx, "blockIdx.y");
		d_bind(p, t, rc, "blockIdx.x");
		return;
	}
	d_bind(p, t, bx, "blockIdx.x");
}

/* The roots of the output (bits) that subscript a reduction e reads, looking through
 * recomputed tensors; map[k]: the output root of e's tensor's root k (-1: none). */
static unsigned reduction_roots(IrExpr *e, const int *map)
{
	if (!e)
		return 0;
	unsigned bits = 0;
	if (e->kind != EX_ACCESS) {
		for (int i = 0; i < e->nargs; i++)
			bits |= reduction_roots(e->args[i], map);
		return bits;
	}
	Tensor *x = e->tensor;
	int sub[16];
	for (int k = 0; k < e->nargs && k < 16; k++) {
		IrExpr *g = e->args[k];
		sub[k] = g->kind == EX_AXIS && g->axis->root_index >= 0 ? map[g->axis->root_index] : -1;
		if (tensor_is_reduction(x) && sub[k] >= 0)
			bits |= 1u << sub[k];
	}
	bool recomputed = x->def && !tensor_is_reduction(x) &&
			  (x->inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
	if (recomputed && e->nargs <= 16)
		bits |= reduction_roots(x->def, sub);
	return bits;
}

/* A pointwise output of a fusion that is not a row group: the axes that subscript the
 * reductions it reads go first (a reduction is computed inside loops over its own axes only),
 * threads over the last of them (or the last axis), the rest serial; the reductions keep the
 * default placement: computed per thread, serially. For a column normalization
 * y[i, j] = x[i, j] / c[j] that is one thread per column, coalesced. Correct, not fast. */
static void schedule_general(Plan *p, Tensor *o)
{
	const char *t = o->name;
	int map[16];
	if (o->ndim > 16)
		return;
	for (int k = 0; k < o->ndim; k++)
		map[k] = k;
	unsigned bits = reduction_roots(o->def, map);
	int par = o->ndim - 1;
	for (int k = 0; k < o->ndim; k++)
		if (bits >> k & 1)
			par = k;
	int64_t threads = COL_THREADS, n;
	if (ir_is_const(o->shape[par], &n))
		while (threads > 32 && threads / 2 >= n)
			threads /= 2;
	const char *bx = fresh_axis(p, t, "bx"), *tx = fresh_axis(p, t, "tx");
	d_split(p, t, o->root[par]->name, threads, bx, tx);
	const char *order[17];
	int no = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < o->ndim; k++) {
			bool first = (bits >> k & 1) || (bits == 0 && k == par);
			if (first != (pass == 0))
				continue;
			if (k == par) {
				order[no++] = bx;
				order[no++] = tx;
			} else {
				order[no++] = o->root[k]->name;
			}
		}
	}
	if (o->ndim > 1)
		emit(p, NULL, t, "reorder", no, order, 0, NULL);
	d_bind(p, t, bx, "blockIdx.x");
	d_bind(p, t, tx, "threadIdx.x");
}

static bool has_reduction(Fusion *f)
{
	for (int i = 0; i < f->ntensors; i++)
		if (tensor_is_reduction(f->tensors[i]))
			return true;
	return false;
}

/* Fusions with reductions (docs/auto_schedule.md): each output is a row group (one block per
 * row, block reductions at the row, persistent when it fits), a reduction over other axes
 * (threads over the kept axes), or a general pointwise output. Row groups share nothing: a
 * reduction read by two outputs would be computed in two loop nests. */
static bool schedule_reductions(Arena *a, Diag *d, Fusion *f)
{
	Plan p;
	plan_init(&p, a, f);
	Row rows[MAX_GROUP];
	int nout = f->noutputs < MAX_GROUP ? f->noutputs : MAX_GROUP;
	for (int i = 0; i < nout; i++) {
		Tensor *o = f->outputs[i];
		rows[i] = o->def && o->ndim + (tensor_is_reduction(o) ? 1 : 0) >= 2
				  ? row_analyze(a, o) : (Row){.ok = false};
		rows[i].f = f;
		for (int j = 0; j < i && rows[i].ok; j++)
			for (int x = 0; x < rows[i].nreds; x++)
				for (int y = 0; y < rows[j].nreds; y++)
					if (rows[i].reds[x] == rows[j].reds[y])
						rows[i].ok = false;
	}
	for (int i = 0; i < nout; i++) {
		Tensor *o = f->outputs[i];
		if (!o->def)
			continue;
		if (rows[i].ok)
			schedule_row(&p, &rows[i], f->noutputs == 1);
		else if (tensor_is_reduction(o))
			schedule_kept(&p, o);
		else if (o->ndim > 0)
			schedule_general(&p, o);
	}
	f->ast_schedule = ast_schedule(a, f->span, (AstName){f->name, f->span}, false, &p.dirs);
	f->ast_schedule->generated = true;
	return schedule_apply(a, d, f);
}

bool auto_schedule(Arena *a, Diag *d, Fusion *f)
{
	f->auto_scheduled = true;
	if (has_reduction(f))
		return schedule_reductions(a, d, f);
	bool ok = true;
	for (int i = 0; i < f->noutputs; i++)
		ok &= schedule_output(a, d, f, f->outputs[i]);
	return ok;
}
