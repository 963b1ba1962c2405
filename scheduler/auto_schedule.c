/* auto_schedule.c: the schedule used when a fusion has no schedule block (or `auto`).
 * docs/auto_schedule.md explains the choices; in short:
 *
 * First every output gets a loop nest of its own (auto_nests.c: a nest recomputes the
 * reductions and outputs it reads, in copies). Then, per output:
 *   - a pointwise output that reads no reduction: all axes merged when every access is the
 *     identity (else the last axis is the vector axis and the outer ones are merged),
 *     split(x, vec) -> (x, v); split(x, 128) -> (x, tx); split(x, 4) -> (bx, u): bx on
 *     blockIdx.x, tx on threadIdx.x, u unrolled, v vectorized (consecutive threads access
 *     consecutive 16-byte vectors, four in flight per thread); the merged outer axis of a
 *     non-mergeable output on blockIdx.y when it is a constant <= 65535;
 *   - a row group (an output and the row reductions it reads): one block per row (or
 *     several short rows per block), threads over the row in vectors, block reductions
 *     computed at the row, the row kept in registers when it is constant and fits (a
 *     column of several adjacent indices merged into one first: collapse.c);
 *   - another reduction output: threads over its kept axes, serial reduction loops (or a
 *     grid reduction when the kept axes give few blocks);
 *   - another pointwise output: threads over the axes of the reductions it reads, which are
 *     computed inside its loops.
 * The schedule is a list of ordinary directives (AstDirective), applied as they are made
 * with every check a user's schedule gets, and then lowered once to see that it compiles.
 * A schedule that is refused or does not lower is forgotten (its diagnostics rolled back,
 * the fusion rebuilt from its definition) and the next, simpler one is tried: the same
 * without vectors and register caches, then one thread per output element with every
 * reduction serial inside its one reader, then all of it on one thread. The user never sees
 * an error about a directive they did not write.
 */
#include <stdlib.h>
#include <string.h>

#include "scheduler/scheduler.h"
#include "passes/passes.h"
#include "scheduler/auto_plan.h"

enum { AUTO_THREADS = 128, AUTO_UNROLL = 4, AUTO_VECTOR_BYTES = 16, AUTO_GRID_YZ = 65535 };

bool dims_equal(IrExpr *x, IrExpr *y)
{
	if (x->kind != y->kind)
		return false;
	return x->kind == EX_SIZE ? x->size == y->size : x->kind == EX_INT && x->ival == y->ival;
}

/* ---- the plan: directives, made and applied one by one ---------------------------------- */

enum {
	ROW_THREADS = 128,        /* threads over a row of symbolic length */
	ROW_MAX_THREADS = 512,    /* threads over a long row of constant length */
	ROW_VECTORS = 8,          /* vectors per thread a long constant row aims for */
	ROW_UNROLL = 8,           /* loop steps unrolled together in a longer row */
	ONLINE_MIN_LEN = 4096,    /* a row read once by an online pair, longer than this: */
	ONLINE_THREADS = 128,     /*   not persistent, this many threads (row_read_once) */
	PERSIST_BYTES = 65536,    /* a cached row of one input: at most 16384 f32 */
	PERSIST_ELEMS = 16,       /* elements per thread and cached input */
	PERSIST_LONG_ELEMS = 32,  /* the same for rows that would need more than ROW_THREADS */
	PERSIST_MAX_ELEMS = 64,   /* registers per thread for all cached inputs together */
	BLOCK_ROWS_THREADS = 128, /* block size when several short rows share a block */
	SHORT_VECTORS = 64,       /* a row of at most this many vectors is short: ... */
	SHORT_PER_THREAD = 4,     /*   about this many vectors per thread, */
	SHORT_MIN_THREADS = 4,    /*   at least this many threads per row */
	COL_THREADS = 128,        /* threads over the kept columns of an outer reduction */
	ALL_THREADS = 512,        /* threads of the one block of a full (0-d) reduction */
	GRID_KEPT_BLOCKS = 264,   /* fewer blocks over the kept axes (2 per H100/H200 SM): */
	GRID_ROWS = 256,          /*   the reduction is split over blocks in chunks of this */
	MAX_GROUP = 64,
	MAX_CONSUMERS = 8,
};


/* The row-length buckets of the size variants (docs/auto_schedule.md, "Size variants"):
 * short rows (several per block), then rows persistent in registers as a constant row of
 * the bound's length would be; longer rows take the fusion's own (unbounded) schedule. */
static const int64_t row_buckets[] = {128, 256, 1024, 4096, 16384, 65536};

/* base, base2, base3, ...: the first that nothing in the fusion uses. */
static const char *fresh_name(Plan *p, const char *base)
{
	return names_fresh(&p->names, base);
}

static bool axis_used(Plan *p, const char *t, const char *n)
{
	return names_has(&p->axes, arena_printf(p->a, "%s.%s", t, n)) || names_has(&p->names, n);
}

static void use_axis(Plan *p, const char *t, const char *n)
{
	names_add(&p->axes, arena_printf(p->a, "%s.%s", t, n));
}

/* A new axis name for tensor t: base, base2, ... unused by t and by every index name. */
const char *fresh_axis(Plan *p, const char *t, const char *base)
{
	const char *n = base;
	for (int k = 2; axis_used(p, t, n); k++)
		n = arena_printf(p->a, "%s%d", base, k);
	use_axis(p, t, n);
	return n;
}

/* A name not in t's current domain: base, base2, base3, ... (the pointwise schedules). */
static const char *fresh(Arena *a, Tensor *t, const char *base)
{
	const char *n = base;
	for (int k = 2; tensor_find_axis(t, n); k++)
		n = arena_printf(a, "%s%d", base, k);
	return n;
}

static void plan_init(Plan *p, Arena *a, Diag *d, Fusion *f, AutoLevel level, int arch)
{
	*p = (Plan){.a = a, .f = f, .s = {.a = a, .d = d, .f = f, .generated = true}, .level = level,
		    .arch = arch, .at = f->span,
		    .names = {.a = a}, .axes = {.a = a}, .ok = true};
	names_of_fusion(&p->names, f);
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
	p->ok &= sched_directive(&p->s, d);
}

void d_directive(Plan *p, const char *result, const char *t, const char *verb, int nargs,
		 const char **args, int nouts, const char **outs)
{
	emit(p, result, t, verb, nargs, args, nouts, outs);
}

void d_split(Plan *p, const char *t, const char *ax, int64_t f, const char *o,
		    const char *i)
{
	const char *args[] = {ax, arena_printf(p->a, "%lld", (long long)f)}, *outs[] = {o, i};
	emit(p, NULL, t, "split", 2, args, 2, outs);
}

void d_merge(Plan *p, const char *t, const char *x, const char *y, const char *m)
{
	const char *args[] = {x, y};
	emit(p, NULL, t, "merge", 2, args, 1, &m);
}

void d_verb1(Plan *p, const char *t, const char *verb, const char *arg)
{
	emit(p, NULL, t, verb, 1, &arg, 0, NULL);
}

void d_reorder(Plan *p, const char *t, const char **axes, int n)
{
	emit(p, NULL, t, "reorder", n, axes, 0, NULL);
}

/* t.rfactor(axes...) -> r, with r a fresh name after base; returns r. */
const char *d_rfactor(Plan *p, const char *t, const char **axes, int n, const char *base)
{
	const char *r = fresh_name(p, base);
	emit(p, NULL, t, "rfactor", n, axes, 1, &r);
	return r;
}

void d_bind(Plan *p, const char *t, const char *ax, const char *par)
{
	const char *args[] = {ax, par};
	emit(p, NULL, t, "bind", 2, args, 0, NULL);
}

/* t.compute_at(u, ax); t's domain starts with u's axes `shared` (up to ax) then. */
void d_compute_at(Plan *p, const char *t, const char *u, const char *ax,
			 const char **shared, int nshared)
{
	const char *args[] = {u, ax};
	for (int i = 0; i < nshared; i++)
		use_axis(p, t, shared[i]);
	emit(p, NULL, t, "compute_at", 2, args, 0, NULL);
}

const char *d_cache_after(Plan *p, Tensor *x, const char *mem)
{
	const char *c = fresh_name(p, arena_printf(p->a, "%s_%s", x->name,
						   strcmp(mem, "local") == 0 ? "reg" : "smem"));
	emit(p, c, x->name, "cache_after", 1, &mem, 0, NULL);
	return c;
}

/* `c = t.cache_before(mem)`, c a fresh name after t's; returns c. */
const char *d_cache_before(Plan *p, const char *t, const char *mem)
{
	const char *c = fresh_name(p, arena_printf(p->a, "%s_acc", t));
	emit(p, c, t, "cache_before", 1, &mem, 0, NULL);
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

/* Threads over a constant extent n: the largest power of two <= want that n does not leave
 * half idle, but a warp at least. */
int64_t threads_for(IrExpr *extent, int64_t want)
{
	int64_t n, t = want;
	if (ir_is_const(extent, &n))
		while (t > 32 && t / 2 >= n)
			t /= 2;
	return t;
}

/* ---- pointwise outputs ----------------------------------------------------------------- */

/* Merges o's domain[from .. to] into one axis (innermost pair first: the flattened offsets
 * then simplify back to the merged index); returns its name. */
static const char *merge_range(Plan *p, Tensor *o, int from, int to)
{
	while (to > from) {
		Axis *x = o->domain[to - 1], *y = o->domain[to];
		d_merge(p, o->name, x->name, y->name,
			fresh(p->a, o, arena_printf(p->a, "%s%s", x->name, y->name)));
		if (!p->ok)
			return NULL;
		to--;
	}
	return o->domain[from]->name;
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

/* A pointwise output: [bx, u, tx, v] over its merged axes (see the file comment). */
static void schedule_output(Plan *p, Tensor *o)
{
	if (!o->def || o->ndim == 0 || tensor_is_reduction(o))
		return;
	const char *t = o->name;
	p->at = o->span;
	AutoAccess acc = auto_access(o);
	/* A broadcast whose last axis is a constant shorter than a block of threads is scheduled
	 * over all its axes merged, as a pointwise one: a block per row would idle most threads
	 * (and `--emit=schedule` would print a split larger than the axis). */
	int64_t last;
	bool short_last = o->ndim > 1 && ir_is_const(o->shape[o->ndim - 1], &last) &&
			  last < AUTO_THREADS;
	bool merged = acc.identity || o->ndim == 1 || short_last;
	const char *outer = NULL, *x;
	int from = o->ndim - 1; /* the vector axis: o's roots [from, ndim) */
	if (merged) {
		x = merge_range(p, o, 0, o->ndim - 1);
	} else {
		/* The trailing indices every read uses together (`h, w` of `x[n, c, h, w] + b[c]`)
		 * collapse into the vector axis ("Collapsed axes"): one contiguous run of each
		 * tensor, so a block covers H * W elements, not a row of W. */
		while (from > 1 && auto_collapsible(o, from - 1, o->ndim))
			from--;
		x = merge_range(p, o, from, o->ndim - 1);
		outer = p->ok ? merge_range(p, o, 0, from - 1) : NULL;
	}
	if (!p->ok)
		return;
	Axis *xa = tensor_find_axis(o, x);
	/* A collapsed axis takes a width its extent allows, as a merged one does (a constant
	 * product a multiple of it; else a constant last dimension a multiple of it, or a
	 * symbolic one, whose multiple is the vectorize pass's precondition): then no vector
	 * straddles two rows (`n, c`), whose `b[c]` differ. */
	bool collapsed = !merged && from < o->ndim - 1;
	int vec = acc.vec_ok && p->level == AUTO_TUNED
			  ? vector_width(o, xa, merged || collapsed, AUTO_VECTOR_BYTES / acc.max_size) : 1;
	const char *v = NULL, *base = x;
	if (vec > 1) {
		const char *xo = fresh(p->a, o, arena_printf(p->a, "%so", base));
		v = fresh(p->a, o, "v");
		d_split(p, t, x, vec, xo, v);
		x = xo;
	}
	/* A short constant axis gets fewer threads (a warp at least) and less unrolling, so
	 * small tensors do not launch mostly idle threads. */
	xa = tensor_find_axis(o, x);
	if (!p->ok || !xa)
		return;
	int64_t threads = threads_for(xa->extent, AUTO_THREADS), unroll = AUTO_UNROLL, n;
	if (ir_is_const(xa->extent, &n))
		while (unroll > 1 && threads * (unroll / 2) >= n)
			unroll /= 2;
	const char *xb = fresh(p->a, o, unroll > 1 ? arena_printf(p->a, "%sb", base) : "bx");
	const char *tx = fresh(p->a, o, "tx");
	d_split(p, t, x, threads, xb, tx);
	const char *bx = xb, *u = NULL;
	if (unroll > 1) {
		bx = fresh(p->a, o, "bx");
		u = fresh(p->a, o, "u");
		d_split(p, t, xb, unroll, bx, u);
	}
	Axis *oa = outer ? tensor_find_axis(o, outer) : NULL;
	if (oa && !(ir_is_const(oa->extent, &n) && n <= AUTO_GRID_YZ)) {
		const char *m = fresh(p->a, o, arena_printf(p->a, "%s%s", outer, bx));
		d_merge(p, t, outer, bx, m);
		bx = m;
		outer = NULL;
	}
	d_bind(p, t, bx, "blockIdx.x");
	d_bind(p, t, tx, "threadIdx.x");
	if (outer)
		d_bind(p, t, outer, "blockIdx.y");
	if (u)
		d_verb1(p, t, "unroll", u);
	if (v)
		d_verb1(p, t, "vectorize", v);
}

/* ---- the row analysis ---------------------------------------------------------------- */

/* Roles of the indices of an expression walked from a row tensor: a row position (>= 0),
 * the column's index c (ROLE_COL - c: the reduced indices of a row reduction, the last
 * indices of a row-shaped output; several when the column is collapsed, "Collapsed axes" in
 * docs/auto_schedule.md), or anything else. */
enum { ROLE_COL = -1, ROLE_OTHER = -64 };

/* The column index c of role s, or -1 when s is not a column's. */
static int col_of(int s)
{
	return s <= ROLE_COL && s > ROLE_OTHER ? ROLE_COL - s : -1;
}

/* A row group: one output (a pointwise [rows..., N] tensor or a row reduction [rows...]) and
 * the row reductions it reads, all over the same rows and the same row length N. */
typedef struct Row {
	Arena *a;
	Fusion *f;
	Tensor *anchor;         /* the output whose row loop everything is computed at */
	int k;                  /* number of row indices */
	IrExpr **rows;          /* their extents */
	int ncol;               /* indices of the column: 1, or several collapsed into one */
	IrExpr *cols[AUTO_MAX_RANK]; /* their extents */
	IrExpr *n;              /* row length: their product */
	bool ok;                /* the whole group has the row shape */
	int max_size;           /* widest dtype read or written along the row, in bytes (0: none) */
	Tensor *reds[MAX_GROUP];  /* row reductions read (definition order after sorting) */
	int nreds;
	Tensor *ins[MAX_GROUP];   /* inputs read as full rows x[rows..., col] */
	uint64_t readers[MAX_GROUP]; /* per input: bit s set when stored tensor s reads it */
	int stored[MAX_GROUP];  /* per input: its stored readers in the whole fusion, before
				 * any directive (stored_readers) */
	int nins;
	Tensor *mids[MAX_GROUP];  /* inlined intermediates read as full rows mid[rows..., col] */
	uint64_t mid_readers[MAX_GROUP]; /* per mid: the stored tensors that read it */
	int nmids;
	Tensor *vals[MAX_GROUP];  /* inlined per-row intermediates val[rows...] (layernorm's mean) */
	int nvals;
	int cur;                /* stored tensor being walked: 0 anchor, 1 + i reds[i] */
	bool shaped;            /* the walk found the row shape (ok, or a pointwise tensor of
				 * the row that reads no reduction) */
	/* The fusion's other outputs, computed in the anchor's nest at its row (a row group
	 * with several outputs: layernorm's y with its mean and rstd, add+rmsnorm's h) */
	struct Row *comps[MAX_GROUP];
	int ncomps;
	int extra[MAX_GROUP];   /* per input: the companions' stored tensors that read it */
	uint64_t skip;          /* a companion: reader bits (1 + i) of its reductions that the
				 * anchor computes (auto_share_copies), not scheduled again */
} Row;

static void row_walk(Row *r, IrExpr *e, const int *role);

/* The column: t's roots from `from` on (an anchor's last indices, a reduction's reduced
 * ones), the row length their product. */
static void row_set_cols(Row *r, Tensor *t, int from)
{
	r->ncol = t->nroot - from;
	if (r->ncol > AUTO_MAX_RANK) {
		r->ok = false;
		return;
	}
	r->n = t->root[from]->extent;
	for (int c = 0; c < r->ncol; c++) {
		r->cols[c] = t->root[from + c]->extent;
		if (c > 0)
			r->n = ix_mul(r->a, r->n, r->cols[c]);
	}
}

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
	if (!r->n && t->nroot > r->k) /* an anchor without column: the first reduction's */
		row_set_cols(r, t, r->k);
	if (t->ndim != r->k || t->nroot != r->k + r->ncol) {
		r->ok = false;
		return;
	}
	int role[AUTO_MAX_RANK + 1];
	for (int p = 0; p < r->k; p++) {
		if (!dims_equal(t->shape[p], r->rows[p]))
			r->ok = false;
		role[p] = p;
	}
	for (int c = 0; c < r->ncol; c++) {
		if (!dims_equal(t->root[r->k + c]->extent, r->cols[c]))
			r->ok = false;
		role[r->k + c] = ROLE_COL - c;
	}
	int saved = r->cur;
	r->cur = 1 + i;
	row_walk(r, t->def->args[0], role);
	r->cur = saved;
}

/* Is the read with subscript roles sub (of x's ndim) a full row x[rows..., col...]? */
static bool full_row(Row *r, int ndim, const int *sub)
{
	bool full = r->ncol > 0 && ndim == r->k + r->ncol;
	for (int m = 0; m < ndim && full; m++)
		full = m < r->k ? sub[m] == m : sub[m] == ROLE_COL - (m - r->k);
	return full;
}

/* A read of memory tensor x with subscript roles sub: rows in order, the column's indices
 * only all together, last and in order (over dimensions of their extents: one contiguous
 * run of x). */
static void row_read(Row *r, Tensor *x, const int *sub)
{
	int next = 0, ncol = 0;
	for (int m = 0; m < x->ndim; m++) {
		int s = sub[m], c = col_of(s);
		/* only reads along the row are vectors (a per-row value is one load per row) */
		if (c >= 0 && dtype_size(x->dtype) > r->max_size)
			r->max_size = dtype_size(x->dtype);
		if (c >= 0)
			ncol++;
		if (s == ROLE_OTHER || (c >= 0 && m != x->ndim - r->ncol + c))
			r->ok = false;
		else if (c >= 0 && !dims_equal(x->shape[m], r->cols[c]))
			r->ok = false;
		else if (s >= 0 && (s < next || !dims_equal(x->shape[m], r->rows[s])))
			r->ok = false;
		if (s >= 0)
			next = s + 1;
	}
	if (ncol != 0 && ncol != r->ncol)
		r->ok = false;
	bool full = full_row(r, x->ndim, sub);
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

/* An inlined intermediate read at the row only (val[rows...]): computed once per row. */
static void row_val(Row *r, Tensor *x, const int *sub)
{
	bool at_row = x->ndim == r->k;
	for (int m = 0; m < x->ndim && at_row; m++)
		at_row = sub[m] == m;
	int i = 0;
	while (i < r->nvals && r->vals[i] != x)
		i++;
	if (at_row && i == r->nvals && i < MAX_GROUP)
		r->vals[r->nvals++] = x;
}

/* An inlined intermediate read as a full row: a candidate to keep in registers. */
static void row_mid(Row *r, Tensor *x, const int *sub)
{
	if (!full_row(r, x->ndim, sub))
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
	int sub[AUTO_MAX_RANK];
	if (e->nargs > AUTO_MAX_RANK) {
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
	bool recomputed = x->def && (x->sched.inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
	if (recomputed && x->kind == TK_INTERMEDIATE) {
		row_mid(r, x, sub);
		row_val(r, x, sub);
	}
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

/* The row group of output o with k row indices, or ok == false when o is not row-shaped: a
 * row reduction (k = o->ndim; its reduced indices are the column), a pointwise output over
 * rows and a column (k < o->ndim: its last indices are the column), or a pointwise output
 * over rows only that reads row reductions (k = o->ndim: `m[i] = t[i] / N`, the anchor has
 * no column; the column is the reductions'). */
static Row row_analyze(Arena *a, Tensor *o, int k)
{
	/* a reduction or a row-only anchor writes one value per row: not a vector */
	Row r = {.a = a, .anchor = o, .ok = true, .k = k,
		 .max_size = k < o->ndim ? dtype_size(o->dtype) : 0};
	bool red = tensor_is_reduction(o);
	if (r.k < 1 || r.k > 15 || o->nroot > AUTO_MAX_RANK || (red && o->nroot == o->ndim)) {
		r.ok = false;
		return r;
	}
	r.rows = o->shape;
	if (k < o->nroot)
		row_set_cols(&r, o, k);
	int role[AUTO_MAX_RANK + 1];
	for (int p = 0; p < r.k; p++)
		role[p] = p;
	for (int c = 0; c < r.ncol; c++)
		role[r.k + c] = ROLE_COL - c;
	if (red) {
		r.cur = 0;
		row_walk(&r, o->def->args[0], role);
	} else {
		row_walk(&r, o->def, role);
	}
	r.shaped = r.ok;
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
	return r;
}

/* The row group of output o: a reduction over all its indices; a pointwise output over all
 * but its last index, else all but its last two, ... (a collapsed column), else all of them. */
static Row row_group(Arena *a, Tensor *o)
{
	bool red = tensor_is_reduction(o);
	int k = red ? o->ndim : o->ndim - 1;
	Row r = row_analyze(a, o, k);
	while (!r.ok && !red && --k >= 1)
		r = row_analyze(a, o, k);
	if (!r.ok && !red)
		r = row_analyze(a, o, o->ndim);
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
		if (auto_recomputed(t) && t != opaque && reads_through_but(t->def, x, opaque, depth + 1))
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
			      (t->kind == TK_OUTPUT || tensor_is_reduction(t) || !t->sched.inlined);
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
	int64_t unroll;          /* not persistent, a long bounded row: each loop over a thread's
				  * part of the row split by this, the inner part unrolled (0: no) */
	bool persistent;
	bool cache[MAX_GROUP];   /* persistent: which inputs are kept in registers */
	Tensor *mid;             /* persistent: an intermediate kept in registers, or NULL */
} RowShape;

/* The vector width along the row: 16 bytes, halved until it divides a constant innermost
 * extent of the column (a symbolic one: the vectorize pass's launcher precondition). */
static int row_vec(Row *r)
{
	int64_t n;
	int vec = AUTO_VECTOR_BYTES / (r->max_size > 0 ? r->max_size : 4);
	if (vec < 1)
		vec = 1;
	if (ir_is_const(r->cols[r->ncol - 1], &n))
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

/* The row length the shape is planned for: a constant N, or the bound of a size variant
 * (SizeSym.bound: the launcher runs that variant only for N <= bound; a collapsed column's
 * SizeProd.bound, for M * N <= bound). False: unknown. */
static bool row_len(Row *r, int64_t *n)
{
	int64_t lo;
	return ir_is_const(r->n, n) || ir_range(NULL, r->n, &lo, n);
}

/* The size variants a row group asks for: its row length unit * (size symbols, none of
 * them bounded yet: ir_size_product), bucketed by row_buckets (one symbol's bound, or the
 * product's: "Collapsed axes" in docs/auto_schedule.md). */
static void row_bucket(Plan *p, Row *r)
{
	int64_t unit = 1, n;
	uint64_t of = 0;
	SizeSym *sym = NULL;
	if (p->level != AUTO_TUNED || p->bucket.sym || row_len(r, &n) ||
	    !ir_size_product(r->n, &unit, &of, &sym) || !sym || unit < 1)
		return;
	for (int i = 0; i < p->f->nsizes && i < 64; i++)
		if ((of >> i & 1) && (p->f->sizes[i]->bound > 0 || p->f->sizes[i]->prod))
			return;
	p->bucket = (Buckets){sym, row_buckets, countof(row_buckets), of, unit};
}

/* No more threads than vectors; a short row gets a few vectors per thread (a warp or less
 * per row, several loads in flight per thread; its block holds several rows). */
static int64_t short_threads(int64_t vectors, int64_t threads)
{
	if (threads > pow2_ceil(vectors))
		threads = pow2_ceil(vectors);
	if (vectors <= SHORT_VECTORS) {
		threads = pow2_ceil((vectors + SHORT_PER_THREAD - 1) / SHORT_PER_THREAD);
		if (threads < SHORT_MIN_THREADS)
			threads = SHORT_MIN_THREADS;
	}
	return threads;
}

/* may_vector false: no vectors (then nothing is persistent either). read_once: an online
 * pair is the only reader of every input (row_read_once): a row longer than ONLINE_MIN_LEN
 * then is not persistent (the pair reads it once anyway) and gets ONLINE_THREADS threads. */
static RowShape row_shape(Row *r, bool may_persist, bool may_vector, bool read_once)
{
	RowShape s = {.vec = may_vector ? row_vec(r) : 1, .threads = ROW_THREADS,
		      .rows_per_block = 1};
	may_persist &= may_vector;
	int64_t n;
	if (!row_len(r, &n))
		return s;
	int64_t vectors = (n + s.vec - 1) / s.vec;
	read_once &= n > ONLINE_MIN_LEN;
	may_persist &= !read_once;
	/* persistent when every input read by two or more stored tensors fits */
	int ncached = 0;
	for (int i = 0; i < r->nins && may_persist; i++) {
		/* a row reduction output's sole input too: its loads all issued before the sum
		 * (one vector at a time, each add waited for its load) */
		int nread = popcount64(r->readers[i]) + r->extra[i];
		bool sole = tensor_is_reduction(r->anchor) && nread == 1 && r->stored[i] == 1;
		if (!sole && (nread < 2 || r->stored[i] != nread))
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
	}
	s.threads = short_threads(vectors, s.threads);
	if (ncached > 0) {
		int64_t row_elems = ((vectors + s.threads - 1) / s.threads) * s.vec;
		int64_t elems = ncached * row_elems;
		s.persistent = elems <= PERSIST_MAX_ELEMS;
		if (s.persistent && elems + row_elems <= PERSIST_MAX_ELEMS && !r->ncomps)
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
		if (read_once)
			s.threads = ONLINE_THREADS;
		s.threads = short_threads(vectors, s.threads);
		/* more vectors per thread than that: unrolled by ROW_UNROLL at a time */
		if ((vectors + s.threads - 1) / s.threads > ROW_VECTORS)
			s.unroll = ROW_UNROLL;
	}
	/* rows that take fewer threads than a block share one (R rows on threadIdx.y) */
	if (s.threads < BLOCK_ROWS_THREADS)
		s.rows_per_block = BLOCK_ROWS_THREADS / s.threads;
	return s;
}

/* Names of the loops of the row split [.., jr, tx, jv] of one tensor. */
typedef struct RowAxes {
	const char *jr, *ju, *tx, *jv;
} RowAxes;

/* split(col, vec) -> (jo, jv); split(jo, T) -> (jr, tx); bind tx (when T > 1); with unroll,
 * split(jr, unroll) -> (jq, ju) and ju unrolled (then x.jr is jq). vec == 1: no jv. */
static RowAxes row_split(Plan *p, const char *t, const char *col, int64_t vec, int64_t threads,
			 int64_t unroll)
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
	if (unroll > 1) {
		const char *jq = fresh_axis(p, t, "jq");
		x.ju = fresh_axis(p, t, "ju");
		d_split(p, t, x.jr, unroll, jq, x.ju);
		d_verb1(p, t, "unroll", x.ju);
		x.jr = jq;
	}
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

/* t's column as one axis: its column roots (named as after compute_at with `shared`) merged
 * in order when the row has several ("Collapsed axes" in docs/auto_schedule.md). */
static const char *row_col(Plan *p, Row *r, Tensor *t, const char **shared, int nshared)
{
	const char *c = own_name(t->root[r->k]->name, shared, nshared, p->a);
	for (int q = 1; q < r->ncol; q++) {
		const char *m = fresh_axis(p, t->name, "col");
		d_merge(p, t->name, c, own_name(t->root[r->k + q]->name, shared, nshared, p->a), m);
		c = m;
	}
	return c;
}

/* Are the stored tensors `me` (reader bits: one tensor, or an online pair) the only readers
 * of input i in the whole fusion? */
static bool sole_reader(Row *r, int i, uint64_t me)
{
	return r->readers[i] == me && r->stored[i] == popcount64(me);
}

static Tensor *row_reader(Row *r, RowShape *s, Tensor *t);
static Tensor *online_max_of(Plan *p, Row *r, RowShape *s, Tensor *t);

/* Is every input of the row read by one online max and sum pair alone (logsumexp's m and
 * l_sum0 read x, nothing else does)? Not persistent, the pair reads the row once in one
 * pass; persistent, it reads it once too, then makes a second pass over the registers.
 * H200, logsumexp f32 (docs/auto_schedule.md, "A row read once"), GB/s, persistent
 * two passes against one online pass with 64 / 128 / 256 / 512 threads: 4096x16384 3396
 * against 3367 / 3503 / 3410 / 2534; 1024x65536 (512 threads, not persistent) 3326 against
 * 2054 / 3538 / 3446 / 3327. */
static bool row_read_once(Plan *p, Row *r)
{
	RowShape flat = {0};
	for (int i = 0; i < r->nreds; i++) {
		Tensor *m = online_max_of(p, r, &flat, r->reds[i]);
		for (int j = 0; m && j < r->nreds; j++) {
			if (r->reds[j] != m)
				continue;
			uint64_t pair = 1ull << (1 + i) | 1ull << (1 + j);
			bool all = r->nins > 0;
			for (int k = 0; k < r->nins; k++)
				all &= sole_reader(r, k, pair);
			if (all)
				return true;
		}
	}
	return false;
}

/* The max that the row reduction t becomes an online pair with (row_online), or NULL: a
 * max and a sum of exp(X - max) computed at the same reader of a row that is not persistent. */
static Tensor *online_max_of(Plan *p, Row *r, RowShape *s, Tensor *t)
{
	if (s->persistent)
		return NULL;
	Tensor *m = sched_online_max(p->a, t);
	if (m && m->kind == TK_INTERMEDIATE && t->kind == TK_INTERMEDIATE &&
	    row_reader(r, s, m) == row_reader(r, s, t))
		return m;
	return NULL;
}

/* The online pair's reader bits when t is one of its two tensors (0 otherwise); *is_max: t is
 * the pair's max, whose nest reads the row for both (loop_nest.c, online_nest). */
static uint64_t online_bits(Plan *p, Row *r, RowShape *s, Tensor *t, bool *is_max)
{
	for (int i = 0; i < r->nreds; i++) {
		Tensor *m = online_max_of(p, r, s, r->reds[i]);
		for (int j = 0; m && j < r->nreds; j++) {
			if (r->reds[j] != m || (t != m && t != r->reds[i]))
				continue;
			*is_max = t == m;
			return 1ull << (1 + i) | 1ull << (1 + j);
		}
	}
	return 0;
}

/* A stored reduction t of the group (reader bit `bit`): its row split, and in the
 * non-persistent case a one-vector register copy of each input that only t reads, so those
 * reads are 16-byte loads (a reduction axis itself cannot be vectorized). */
static void schedule_row_reduction(Plan *p, Row *r, RowShape *s, Tensor *t, int bit,
				   const char *col)
{
	uint64_t me = 1ull << bit;
	/* an online pair reads its inputs once, in the max's nest: the max caches one vector of
	 * each input only the pair reads, and the sum gets the same loops (welford.c checks) */
	bool is_max = false;
	uint64_t pair = online_bits(p, r, s, t, &is_max);
	if (pair)
		me = pair;
	bool excl = false;
	for (int i = 0; i < r->nins; i++)
		excl |= sole_reader(r, i, me);
	excl &= !s->persistent && s->vec > 1;
	RowAxes x = row_split(p, t->name, col, s->persistent || excl ? s->vec : 1, s->threads,
			      s->unroll);
	/* a constant row: the loop over a thread's vectors unrolled, so its loads are issued
	 * together (and persistent registers are indexed by constants) */
	if (row_len(r, &(int64_t){0}) && (s->persistent || excl) && !x.ju)
		d_verb1(p, t->name, "unroll", x.jr);
	if (x.jv)
		d_verb1(p, t->name, "unroll", x.jv);
	if (!excl || (pair && !is_max))
		return;
	for (int i = 0; i < r->nins; i++) {
		if (!sole_reader(r, i, me))
			continue;
		const char *c = d_cache_after(p, r->ins[i], "local");
		const char *sh[] = {x.jr, x.tx, x.tx};
		if (x.ju)
			sh[1] = x.ju;
		d_compute_at(p, c, t->name, x.tx, sh, x.ju ? 3 : 2);
		d_verb1(p, c, "vectorize", x.jv);
	}
}

/* The tensor that t (a reduction or a cached input) is computed at: the anchor, unless only
 * the kept intermediate reads it (compute_at wants a direct reader). */
static Tensor *row_reader(Row *r, RowShape *s, Tensor *t)
{
	Tensor *o = r->anchor;
	IrExpr *def = tensor_is_reduction(o) ? o->def->args[0] : o->def;
	if (s->mid && !reads_through_but(def, t, s->mid, 0) && reads_through(s->mid->def, t, 0))
		return s->mid;
	if (reads_through(def, t, 0))
		return o;
	for (int i = 0; i < r->nvals; i++)
		if (!r->vals[i]->sched.inlined && reads_through(r->vals[i]->def, t, 0))
			return r->vals[i];
	/* only reductions of the group read it (auto_nests.c gave it one reader then) */
	for (int i = 0; i < r->nreds; i++)
		if (r->reds[i] != t && reads_through(r->reds[i]->def->args[0], t, 0))
			return r->reds[i];
	return o;
}

/* A row that is not persistent is read from memory by each of its passes: a max and a sum
 * of exp(X - max) computed at the same reader (softmax, logsumexp) become one pass
 * (`s.online()`, docs/reductions.md, "Online max and sum"). */
static void row_online(Plan *p, Row *r, RowShape *s)
{
	for (int i = 0; i < r->nreds; i++)
		if (online_max_of(p, r, s, r->reds[i]))
			d_directive(p, NULL, r->reds[i]->name, "online", 0, NULL, 0, NULL);
}

/* A row that is not persistent and a sum of squared deviations from the mean of another sum
 * of the group (layernorm's s1 and s2: `s2.welford()`, docs/reductions.md, "Welford's single
 * pass"): both computed at the anchor's row with the same split, before the per-row values
 * that read them are (compute_at looks through them while they are inlined), so one pass
 * over the row computes both and the row is read twice, not three times. Marks the pair in
 * `paired` (1 the sum, 2 the squares; the reductions' loop below skips them). */
static void row_welford(Plan *p, Row *r, RowShape *s, IrExpr *odef, const char *at,
			const char **shared, int nshared, char *paired)
{
	Tensor *o = r->anchor;
	for (int i = 0; i < r->nreds; i++) {
		Tensor *t = r->reds[i], *s1 = sched_welford_sum(p->a, t);
		int k = 0;
		while (s1 && k < r->nreds && r->reds[k] != s1)
			k++;
		if (!s1 || k == r->nreds || paired[i] || paired[k] || t->kind != TK_INTERMEDIATE ||
		    s1->kind != TK_INTERMEDIATE || !reads_through(odef, t, 0) ||
		    !reads_through(odef, s1, 0))
			continue;
		int pair[2] = {k, i};
		for (int q = 0; q < 2; q++) {
			Tensor *u = r->reds[pair[q]];
			d_compute_at(p, u->name, o->name, at, shared, nshared);
			schedule_row_reduction(p, r, s, u, 1 + pair[q],
					       row_col(p, r, u, shared, nshared));
			paired[pair[q]] = 1 + q;
		}
		d_directive(p, NULL, t->name, "welford", 0, NULL, 0, NULL);
	}
}

/* Does the per-row value v read the squares of a Welford pair? It stays inlined then: the
 * final schedule's checks map the pair's loops through the values the anchor reads it by
 * only while those are inlined (rstd = rsqrt(s2 / N + eps) is recomputed per element; the
 * mean, which s2's definition reads, stays in a register). */
static bool reads_paired(Row *r, Tensor *v, const char *paired)
{
	for (int i = 0; i < r->nreds; i++)
		if (paired[i] == 2 && reads_through(v->def, r->reds[i], 0))
			return true;
	return false;
}

/* The reductions of group r at the row: those the anchor or the kept intermediate reads in
 * definition order, then those only another reduction reads, each after its reader (whose
 * compute_at must come first). `paired`: a Welford pair, computed already. */
static void row_reductions(Plan *p, Row *r, RowShape *s, const char *at, const char **shared,
			   int nshared, const char *paired)
{
	Tensor *o = r->anchor;
	for (int pass = 0; pass < 2; pass++) {
		for (int q = 0; q < r->nreds; q++) {
			int i = pass ? r->nreds - 1 - q : q;
			Tensor *t = r->reds[i], *u = row_reader(r, s, t);
			if (t == o || (paired && paired[i]) || (r->skip >> (1 + i) & 1) ||
			    (u != o && u != s->mid) != (pass == 1))
				continue;
			d_compute_at(p, t->name, u->name, at, shared, nshared);
			schedule_row_reduction(p, r, s, t, 1 + i, row_col(p, r, t, shared, nshared));
		}
	}
}

/* Another output c of the fusion in the row group of r (Row.comps): computed in the anchor's
 * nest at its row, so the row is read once for all outputs. A column of its own is split
 * like the anchor's (whole vectors); a row reduction output like the group's reductions; a
 * value per row is stored once per row (by one thread); its reductions are computed at it. */
static void schedule_companion(Plan *p, Row *r, Row *c, RowShape *s, const char *at,
			       const char **shared, int nshared)
{
	Tensor *o = c->anchor;
	d_compute_at(p, o->name, r->anchor->name, at, shared, nshared);
	if (tensor_is_reduction(o)) {
		schedule_row_reduction(p, c, s, o, 0, row_col(p, c, o, shared, nshared));
	} else if (c->k < o->nroot) {
		RowAxes x = row_split(p, o->name, row_col(p, c, o, shared, nshared), s->vec,
				      s->threads, s->unroll);
		if (x.jv)
			d_verb1(p, o->name, "vectorize", x.jv);
		if (s->persistent && !x.ju)
			d_verb1(p, o->name, "unroll", x.jr);
	}
	row_reductions(p, c, s, at, shared, nshared, NULL);
}

static void schedule_row(Plan *p, Row *r, bool may_persist)
{
	Tensor *o = r->anchor;
	RowShape s = row_shape(r, may_persist, p->level == AUTO_TUNED,
			       p->level == AUTO_TUNED && row_read_once(p, r));
	row_bucket(p, r);
	bool red = tensor_is_reduction(o);
	const char *col = r->k < o->nroot ? row_col(p, r, o, NULL, 0) : NULL;
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
	if (red) {
		schedule_row_reduction(p, r, &s, o, 0, col);
	} else if (col) {
		/* a pointwise anchor writes whole vectors */
		RowAxes x = row_split(p, o->name, col, s.vec, s.threads, s.unroll);
		if (x.jv)
			d_verb1(p, o->name, "vectorize", x.jv);
		if (s.persistent && !x.ju)
			d_verb1(p, o->name, "unroll", x.jr);
	}
	IrExpr *odef = red ? o->def->args[0] : o->def;
	char paired[MAX_GROUP] = {0};
	if (!s.persistent && p->level == AUTO_TUNED && col)
		row_welford(p, r, &s, odef, at, shared, nshared, paired);
	/* Per-row values that the output reads (layernorm's mean = s1 / N, rstd = rsqrt(s2 / N +
	 * eps)): in registers, computed once per row rather than in every element (a division
	 * by a symbolic N and a rsqrt per element, which nvcc does not hoist out of the guarded
	 * vectors). */
	for (int i = 0; i < r->nvals && p->level == AUTO_TUNED && col; i++) {
		Tensor *v = r->vals[i];
		if (!reads_through(odef, v, 0) || reads_paired(r, v, paired))
			continue;
		d_verb1(p, v->name, "memory", "local");
		d_compute_at(p, v->name, o->name, at, shared, nshared);
	}
	/* The kept intermediate: in registers at the row, split like the anchor. */
	if (s.mid) {
		d_verb1(p, s.mid->name, "memory", "local");
		d_compute_at(p, s.mid->name, o->name, at, shared, nshared);
		RowAxes x = row_split(p, s.mid->name, row_col(p, r, s.mid, shared, nshared), s.vec,
				      s.threads, 0);
		d_verb1(p, s.mid->name, "unroll", x.jr);
		if (x.jv)
			d_verb1(p, s.mid->name, "unroll", x.jv);
	}
	row_reductions(p, r, &s, at, shared, nshared, paired);
	for (int i = 0; i < r->ncomps; i++)
		schedule_companion(p, r, r->comps[i], &s, at, shared, nshared);
	if (!s.persistent)
		row_online(p, r, &s);
	/* Persistent inputs: the row in registers, split like their readers. */
	for (int i = 0; i < r->nins; i++) {
		if (!cache[i])
			continue;
		Tensor *c = fusion_find_tensor(p->f, cache[i]);
		if (!c)
			return;
		d_compute_at(p, cache[i], row_reader(r, &s, c)->name, at, shared, nshared);
		RowAxes x = row_split(p, cache[i], row_col(p, r, c, shared, nshared), s.vec, s.threads,
				      s.unroll);
		if (x.jv)
			d_verb1(p, cache[i], "vectorize", x.jv);
		if (!x.ju)
			d_verb1(p, cache[i], "unroll", x.jr);
	}
}

/* ---- other shapes ---------------------------------------------------------------------- */

/* Does a tensor of f other than t read t? */
bool read_by_other(Fusion *f, Tensor *t)
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
/* A 0-d reduction: one block reduction over all its elements (computed at the top of its
 * reader's nest, or its own nest). */
static void schedule_zero_d(Plan *p, Tensor *o)
{
	const char *t = o->name;
	const char *x = o->root[0]->name;
	for (int q = 1; q < o->nroot; q++) {
		const char *m = fresh_axis(p, t, "r");
		d_merge(p, t, x, o->root[q]->name, m);
		x = m;
	}
	const char *ro = fresh_axis(p, t, "ro"), *tx = fresh_axis(p, t, "tx");
	d_split(p, t, x, ALL_THREADS, ro, tx);
	d_bind(p, t, tx, "threadIdx.x");
}

static void schedule_kept(Plan *p, Tensor *o)
{
	const char *t = o->name;
	if (o->ndim == 0) {
		schedule_zero_d(p, o);
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
 * recomputed tensors; map[k] (k < nmap): the output root of e's tensor's root k (-1: none;
 * a root past nmap, e's own reduction axis, has none). */
static unsigned reduction_roots(IrExpr *e, const int *map, int nmap)
{
	if (!e)
		return 0;
	unsigned bits = 0;
	if (e->kind != EX_ACCESS) {
		for (int i = 0; i < e->nargs; i++)
			bits |= reduction_roots(e->args[i], map, nmap);
		return bits;
	}
	Tensor *x = e->tensor;
	int sub[16];
	for (int k = 0; k < e->nargs && k < 16; k++) {
		IrExpr *g = e->args[k];
		int r = g->kind == EX_AXIS ? g->axis->root_index : -1;
		sub[k] = r >= 0 && r < nmap ? map[r] : -1;
		if (tensor_is_reduction(x) && sub[k] >= 0)
			bits |= 1u << sub[k];
	}
	bool recomputed = x->def && !tensor_is_reduction(x) &&
			  (x->sched.inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
	if (recomputed && e->nargs <= 16)
		bits |= reduction_roots(x->def, sub, e->nargs);
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
	unsigned bits = reduction_roots(o->def, map, o->ndim);
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

/* A pointwise output that reads 0-d reductions only: one block of ALL_THREADS threads over
 * all its elements, so each 0-d reduction is computed once (by the block, at the top of the
 * nest), not once per block. */
static void schedule_one_block(Plan *p, Tensor *o)
{
	const char *t = o->name, *x = o->root[0]->name;
	for (int q = 1; q < o->ndim; q++) {
		const char *m = fresh_axis(p, t, "col");
		d_merge(p, t, x, o->root[q]->name, m);
		x = m;
	}
	const char *ro = fresh_axis(p, t, "ro"), *tx = fresh_axis(p, t, "tx");
	d_split(p, t, x, threads_for(tensor_find_axis(o, x) ? tensor_find_axis(o, x)->extent
							   : o->shape[0], ALL_THREADS), ro, tx);
	d_bind(p, t, tx, "threadIdx.x");
}

/* A reduction output, or a pointwise output that reads reductions, of no tuned class: a
 * reduction over its kept axes (schedule_kept), one block for readers of 0-d reductions only,
 * else the general schedule. */
static void schedule_other(Plan *p, Tensor *o)
{
	if (!o->def)
		return;
	if (tensor_is_reduction(o)) {
		if (!(auto_reads_reductions(o->def->args[0], 0) & 4))
			schedule_kept(p, o);
		else if (o->ndim > 0)
			/* its axes stay unmerged, for the reductions it reads to be computed in */
			schedule_general(p, o);
		return; /* 0-d, reading reductions: one thread */
	}
	unsigned reds = auto_reads_reductions(o->def, 0);
	if (o->ndim > 0 && reds == 3)
		schedule_one_block(p, o);
	else if (o->ndim > 0)
		schedule_general(p, o);
}

/* A fusion of several outputs that all belong to one row group: the anchor (the last output
 * with a column that is a row group, else the last row group without one), and every other
 * output over the anchor's rows whose reads have the row shape (Row.shaped: a row-shaped
 * intermediate such as add+rmsnorm's h = x + r, or a value per row such as a mean; its own
 * reductions, copies auto_nests.c made for its nest, over the same row length). Marks them
 * in comp[], links their rows into the anchor's (Row.comps, Row.extra) and returns the
 * anchor's index; -1 (nothing marked) when some output does not fit. */
static int row_companions(Arena *a, Fusion *f, Row *rows, int nout, bool *comp)
{
	if (f->noutputs < 2 || nout != f->noutputs)
		return -1;
	int an = -1;
	for (int i = 0; i < nout; i++)
		if (rows[i].ok && (an < 0 || rows[i].k < rows[i].anchor->ndim ||
				   rows[an].k == rows[an].anchor->ndim))
			an = i;
	if (an < 0)
		return -1;
	Row *r = &rows[an];
	Row *cr[MAX_GROUP];
	for (int i = 0; i < nout; i++) {
		if (i == an)
			continue;
		Tensor *o = f->outputs[i];
		if (!o->def || o->ndim < r->k)
			return -1;
		cr[i] = NEW(a, Row);
		*cr[i] = row_analyze(a, o, r->k);
		Row *c = cr[i];
		c->f = f;
		/* no column, or the anchor's (each extent: a collapsed column's merged index is
		 * then the same element in both) */
		bool fits = c->shaped && (c->ncol == 0 || c->ncol == r->ncol);
		for (int q = 0; q < c->ncol && fits; q++)
			fits = dims_equal(c->cols[q], r->cols[q]);
		for (int q = 0; q < r->k && fits; q++)
			fits = dims_equal(c->rows[q], r->rows[q]);
		if (!fits)
			return -1;
	}
	for (int i = 0; i < nout; i++) {
		if (i == an)
			continue;
		Row *c = cr[i];
		comp[i] = true;
		r->comps[r->ncomps++] = c;
		if (c->max_size > r->max_size)
			r->max_size = c->max_size;
		/* the anchor's reductions that the companion reads (one copy, auto_share_copies):
		 * computed by the anchor, not counted again as readers of its inputs */
		for (int x = 0; x < c->nreds; x++)
			for (int y = 0; y < r->nreds; y++)
				if (c->reds[x] == r->reds[y])
					c->skip |= 1ull << (1 + x);
		for (int k = 0; k < c->nins; k++) {
			c->stored[k] = stored_readers(f, c->ins[k]);
			for (int q = 0; q < r->nins; q++)
				if (r->ins[q] == c->ins[k])
					r->extra[q] += popcount64(c->readers[k] & ~c->skip);
		}
	}
	return an;
}

/* The tuned schedules (docs/auto_schedule.md): per output in declaration order, the schedule
 * of its class (classify.c). Fusion.auto_class names the classes. */
/* The row group of each of the first nout outputs (rows[i].ok false when it has none); with
 * `apart`, an output whose group shares a reduction with an earlier one's has none (each
 * nest computes its own). */
static void row_groups(Plan *p, Row *rows, int nout, bool apart)
{
	Fusion *f = p->f;
	for (int i = 0; i < nout; i++) {
		Tensor *o = f->outputs[i];
		rows[i] = o->def ? row_group(p->a, o) : (Row){.ok = false};
		rows[i].f = f;
		for (int k = 0; k < rows[i].nins; k++)
			rows[i].stored[k] = stored_readers(f, rows[i].ins[k]);
		for (int j = 0; j < i && rows[i].ok && apart; j++)
			for (int x = 0; x < rows[i].nreds; x++)
				for (int y = 0; y < rows[j].nreds; y++)
					if (rows[i].reds[x] == rows[j].reds[y])
						rows[i].ok = false;
	}
}

static void schedule_tuned(Plan *p)
{
	Fusion *f = p->f;
	Row rows[MAX_GROUP];
	int nout = f->noutputs < MAX_GROUP ? f->noutputs : MAX_GROUP;
	row_groups(p, rows, nout, true);
	bool comp[MAX_GROUP] = {0};
	int anchor = row_companions(p->a, f, rows, nout, comp);
	/* One nest for the group: the companions read the anchor's copies of the reductions
	 * (and per-row values) they share with it, so each is computed once per row. */
	if (anchor >= 0 && auto_share_copies(p->a, f, f->outputs[anchor])) {
		row_groups(p, rows, nout, false);
		memset(comp, 0, sizeof comp);
		if (row_companions(p->a, f, rows, nout, comp) != anchor) {
			p->ok = false; /* the next level schedules it */
			return;
		}
	}
	unsigned seen = 0;
	f->auto_class = NULL;
	for (int i = 0; i < f->noutputs; i++) {
		Tensor *o = f->outputs[i];
		p->at = f->span;
		AutoClass c = i < nout && comp[i] ? AC_ROWS : auto_classify(f, o, i < nout && rows[i].ok);
		if (!(seen >> c & 1))
			f->auto_class = f->auto_class ? arena_printf(p->a, "%s, %s", f->auto_class,
								     auto_class_name(c))
						      : auto_class_name(c);
		seen |= 1u << c;
		if (i < nout && comp[i])
			continue; /* in the anchor's nest (schedule_companion) */
		if (auto_long_row(p, o))
			continue; /* rows split over blocks (auto_long_row.c) */
		switch (c) {
		case AC_MATMUL:
			auto_matmul(p, o);
			break;
		case AC_POINTWISE:
		case AC_BROADCAST:
			schedule_output(p, o);
			break;
		case AC_TRANSPOSE:
			auto_transpose(p, o);
			break;
		case AC_ROWS:
			schedule_row(p, &rows[i], f->noutputs == 1 || i == anchor);
			break;
		case AC_OUTER:
		case AC_MIDDLE:
		case AC_WHOLE:
			auto_outer(p, o);
			break;
		case AC_GENERAL:
		case AC_COUNT:
			schedule_other(p, o);
			break;
		}
	}
	p->at = f->span;
	/* 0-d reductions inside a nest: block reductions at the top of their reader */
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		if (t->kind == TK_INTERMEDIATE && tensor_is_reduction(t) && t->ndim == 0 &&
		    !t->sched.ca_tensor && t->history.len == 0)
			schedule_zero_d(p, t);
	}
}

/* The plain schedules: one thread per output element (the first index on blockIdx.x, the
 * last split over threadIdx.x; a single index split over both) with every other loop
 * serial, or (threads false) everything on one thread. */
static void schedule_plain(Plan *p, Tensor *o, bool threads)
{
	int k = o->ndim;
	if (!o->def || k == 0 || !threads)
		return;
	const char *t = o->name, *last = o->root[k - 1]->name;
	const char *xo = fresh_axis(p, t, k == 1 ? "bx" : arena_printf(p->a, "%so", last));
	const char *tx = fresh_axis(p, t, "tx");
	d_split(p, t, last, threads_for(o->shape[k - 1], COL_THREADS), xo, tx);
	d_bind(p, t, k == 1 ? xo : o->root[0]->name, "blockIdx.x");
	d_bind(p, t, tx, "threadIdx.x");
}

/* ---- placing the reductions ------------------------------------------------------------ */

/* The stored tensors (outputs, reductions, caches, tensors in memory) that read r, looking
 * through inlined ones; -1 when more than `max`. */
static int consumers(Plan *p, Tensor *r, Tensor **u, int max)
{
	Vec todo = {0};
	int n = 0;
	vec_push(p->a, &todo, r);
	for (int k = 0; k < todo.len; k++) {
		Tensor *x = VEC_AT(todo, Tensor, k);
		for (int i = 0; i < x->readers.len; i++) {
			Tensor *t = VEC_AT(x->readers, Tensor, i);
			bool stored = t->kind == TK_OUTPUT || tensor_is_reduction(t) || !t->sched.inlined;
			Vec *into = stored ? NULL : &todo;
			int j = 0;
			if (stored) {
				while (j < n && u[j] != t)
					j++;
				if (j == n && n == max)
					return -1;
				if (j == n)
					u[n++] = t;
				continue;
			}
			while (j < into->len && into->items[j] != t)
				j++;
			if (j == into->len)
				vec_push(p->a, into, t);
		}
	}
	return n;
}

/* Is x made (all: only; else: at least partly) from the root axes in set[0 .. n)? */
static bool made_of(Axis *x, Axis **set, int n, bool all)
{
	if (x->kind == AX_SPLIT_OUTER || x->kind == AX_SPLIT_INNER)
		return made_of(x->from[0], set, n, all);
	if (x->kind == AX_MERGE) {
		bool a = made_of(x->from[0], set, n, all), b = made_of(x->from[1], set, n, all);
		return all ? a && b : a || b;
	}
	for (int i = 0; i < n; i++)
		if (set[i] == x)
			return true;
	return false;
}

static ParType loop_par_of(Axis *x)
{
	while (x->ca_alias)
		x = x->ca_alias;
	return x->par;
}

/* Computes reduction r inside the loops of its reader `home` (the stored reader every other
 * one is computed at) at the deepest of: the last loop of the leading loops that all run
 * over r's own axes (one computation per element of r: the default placement), and the last
 * loop that runs over any of them (inside loops r does not depend on, it is recomputed per
 * iteration, which is always possible: `y[i, j] = x[i, j] / (r[i] + c[j])`), or the first
 * loop when none does. A 0-d reduction goes to the top of the nest (once per thread), and so
 * does one whose other consumer is computed there. */
static void place_reduction(Plan *p, Tensor *r)
{
	Tensor *u[MAX_CONSUMERS];
	int n = consumers(p, r, u, MAX_CONSUMERS), limit = 0;
	Tensor *home = sched_reduction_home(u, n, &limit);
	if (!home || r->ndim > 16)
		return; /* the default placement decides (and reports) */
	if (r->ndim == 0 || limit < 0 || home->ndomain == 0) {
		/* one value, or a consumer computed at the top: at the top of the nest */
		p->ok &= sched_compute_at_pos(&p->s, r, home, -1, p->at);
		return;
	}
	ReadMap m = sched_read_map(p->a, r, home);
	if (!m.found || m.differ)
		return;
	Axis *set[16];
	int nset = 0;
	for (int k = 0; k < r->ndim; k++)
		if (m.first[k])
			set[nset++] = m.first[k];
	unsigned reduced = 0;
	for (int i = 0; i < r->ndomain; i++)
		if (r->domain[i]->reduction && par_is_thread(r->domain[i]->par))
			reduced |= 1u << r->domain[i]->par;
	int all = -1, any = -1;
	for (int i = 0; i < home->ndomain && i <= limit; i++) {
		Axis *ax = home->domain[i];
		ParType pt = loop_par_of(ax);
		if (ax->vectorize || (par_is_thread(pt) && (reduced & (1u << pt))))
			break;
		if (made_of(ax, set, nset, true) && all == i - 1)
			all = i;
		if (made_of(ax, set, nset, false))
			any = i;
	}
	int pos = all > any ? all : any;
	if (pos < 0)
		pos = 0; /* no loop runs over r's axes: recomputed in the outermost */
	const char *args[] = {home->name, home->domain[pos]->name};
	emit(p, NULL, r->name, "compute_at", 2, args, 0, NULL);
}

/* Every reduction intermediate not yet placed, readers first (a reduction computed at
 * another one needs that one placed). */
static void place_reductions(Plan *p)
{
	for (int i = p->f->ntensors - 1; i >= 0; i--) {
		Tensor *t = p->f->tensors[i];
		if (t->kind == TK_INTERMEDIATE && tensor_is_reduction(t) && !t->sched.ca_tensor)
			place_reduction(p, t);
	}
}

/* ---- the fallback chain ---------------------------------------------------------------- */

static const char *const level_names[AUTO_LEVELS] = {"tuned", "scalar", "plain", "serial"};

const char *auto_level_name(AutoLevel level)
{
	return level_names[level];
}

/* Schedules f (as sema built it) at one level; false after errors. *bucket (when not NULL):
 * the size variants the plan asks for (Plan.bucket). */
static bool schedule_level(Arena *a, Diag *d, Fusion *f, AutoLevel level, int arch,
			   Buckets *bucket)
{
	if (!auto_split_nests(a, f, level >= AUTO_PLAIN ? AUTO_COPY_READER : AUTO_COPY_NEST)) {
		diag_error(d, f->span, "fusion '%s' would need more copies of its reductions than the automatic scheduler makes; write a schedule block",
			   f->name);
		return false;
	}
	Plan p;
	plan_init(&p, a, d, f, level, arch);
	if (level <= AUTO_SCALAR)
		schedule_tuned(&p);
	else
		for (int i = 0; i < f->noutputs; i++)
			schedule_plain(&p, f->outputs[i], level == AUTO_PLAIN);
	p.at = f->span;
	if (p.ok)
		place_reductions(&p);
	f->ast_schedule = ast_schedule(a, f->span, (AstName){f->name, f->span}, false, &p.dirs);
	f->ast_schedule->generated = true;
	if (bucket)
		*bucket = p.bucket;
	return sched_finish(&p.s, p.ok);
}

/* Lowers f as a launcher will, for the target sm (the generated schedules use nothing newer
 * than sm_80; an older target refuses what needs sm_80, cp.async and mma, and the next level
 * is tried) and keeps no diagnostic: the real lowering reports its warnings again. */
static bool lowers(Arena *a, Diag *d, Fusion *f, int arch)
{
	DiagMark m = diag_mark(d);
	LowerOptions o = {.arch = arch};
	bool ok = lower_fusion(a, d, f, &o) && diag_error_count(d) == m.errors;
	diag_rollback(d, m);
	return ok;
}

/* Bounds g's symbol of b, or its product of symbols (collapse_bound), by `bound` (0: not). */
static void set_bound(Arena *a, Fusion *g, const Buckets *b, int64_t bound)
{
	if (b->of)
		collapse_bound(a, g, b->of, bound, 0);
	else
		g->sizes[b->sym->index]->bound = bound;
}

/* The bound of size variant g of bucket b. */
static int64_t bound_of(Fusion *g, const Buckets *b)
{
	if (!b->of || !(b->of & (b->of - 1)))
		return g->sizes[b->sym->index]->bound;
	SizeProd *p = fusion_size_prod(g, false);
	return p ? p->bound : 0;
}

/* f (as sema builds it from its AST) scheduled at the tuned level with the symbol (or the
 * product) of b bounded, when it is accepted and lowers; NULL otherwise (no diagnostic). With
 * `planned` false the schedule is the unbounded one (the bound only narrows the lowering's
 * ranges). */
static Fusion *bounded_copy(Arena *a, Diag *d, Fusion *f, AstSchedule *block, const Buckets *b,
			    int64_t bound, bool planned, int arch)
{
	DiagMark m = diag_mark(d);
	Fusion *g = sema_fusion(a, d, f->ast);
	diag_rollback(d, m);
	if (!g)
		return NULL;
	g->ast_schedule = block;
	g->auto_scheduled = true;
	g->padded_operands = f->padded_operands;
	g->pad_plan = f->pad_plan;
	g->segment_of = f->segment_of;
	set_bound(a, g, b, planned ? bound : 0);
	bool ok = schedule_level(a, d, g, AUTO_TUNED, arch, NULL) && diag_error_count(d) == m.errors;
	set_bound(a, g, b, bound);
	ok = ok && lowers(a, d, g, arch);
	diag_rollback(d, m);
	return ok ? g : NULL;
}

/* The size variants of f, scheduled at the tuned level: one copy of f per bound of b with
 * its size symbol (or product: bound / unit) bounded, tried by the launcher in order before
 * f's own kernels. A bucket whose schedule is refused or does not lower is left out (no
 * diagnostic). */
static void add_variants(Arena *a, Diag *d, Fusion *f, AstSchedule *block, const Buckets *b,
			 int arch)
{
	int64_t unit = b->unit > 1 ? b->unit : 1, prev = 0;
	for (int i = 0; i < b->n; i++) {
		int64_t v = b->bounds[i] / unit;
		if (v < 1 || v == prev)
			continue;
		prev = v;
		Fusion *g = bounded_copy(a, d, f, block, b, v, true, arch);
		if (g)
			vec_push(a, &f->variants, g);
	}
}

/* Rows longer than this are split over blocks (docs/auto_schedule.md, "Segmentation"). */
static const int64_t long_rows = 65536;

/* Long rows: f's own schedule becomes the size variant for rows up to long_rows (scheduled
 * as it was, unbounded), and f is
 * scheduled again for longer ones (SizeSym.above): split into segments when row reductions
 * that others read are grid reductions, or a row reduction output split over blocks
 * (auto_long_row.c). Nothing changes when neither applies or a schedule fails. */
static void add_long_rows(Arena *a, Diag *d, Fusion *f, AstSchedule *block, const Buckets *b,
			  int arch)
{
	int64_t above = long_rows / (b->unit > 1 ? b->unit : 1);
	if (above < 1)
		return;
	DiagMark m = diag_mark(d);
	Fusion *g = sema_fusion(a, d, f->ast);
	diag_rollback(d, m);
	if (!g || g->failed)
		return;
	g->ast_schedule = block;
	g->auto_scheduled = true;
	if (b->of)
		collapse_bound(a, g, b->of, 0, above);
	else
		g->sizes[b->sym->index]->above = above;
	bool ok = segment_fusion(a, d, g, arch);
	if (!ok && g->noutputs == 1 && segment_long_row(g->outputs[0]))
		ok = schedule_level(a, d, g, AUTO_TUNED, arch, NULL) && diag_error_count(d) == m.errors;
	ok = ok && lowers(a, d, g, arch);
	diag_rollback(d, m);
	if (!ok)
		return;
	/* rows up to long_rows: the last bucket when it lowered, else f's own schedule bounded */
	Fusion *last = f->variants.len ? VEC_AT(f->variants, Fusion, f->variants.len - 1) : NULL;
	if (!last || bound_of(last, b) < above) {
		Fusion *own = bounded_copy(a, d, f, block, b, above, false, arch);
		if (!own)
			return;
		vec_push(a, &f->variants, own);
	}
	Vec variants = f->variants;
	const char *cls = f->auto_class; /* long rows are rows */
	*f = *g;
	f->variants = variants;
	f->auto_class = cls;
	for (int i = 0; i < f->segments.len; i++)
		VEC_AT(f->segments, Segment, i)->fusion->segment_of = f;
}

bool auto_schedule_with(Arena *a, Diag *d, Fusion *f, const AutoOptions *o)
{
	AstSchedule *block = f->ast_schedule; /* NULL, or `schedule NAME auto;` */
	DiagMark m = diag_mark(d);
	int arch = o && o->arch ? o->arch : 80;
	if (segment_fusion(a, d, f, arch))
		return true;
	/* f16/bf16 rows that may not be multiples of 8: the tensor-core kernel on padded copies
	 * where the tuned kernels' preconditions fail (set first: the kernels need no scalar
	 * kernels then) */
	segment_pad_matmul(a, d, f, arch);
	for (int level = 0; level < AUTO_LEVELS; level++) {
		if (level > 0 && f->pad_plan) {
			/* no tuned tensor-core kernel (a constant K or N that is not a multiple of
			 * 8): the padded plan is the fusion's schedule */
			diag_rollback(d, m);
			Fusion *p = f->pad_plan;
			*f = *p;
			f->ast_schedule = block;
			for (int i = 0; i < f->segments.len; i++)
				VEC_AT(f->segments, Segment, i)->fusion->segment_of = f;
			return true;
		}
		if (level > 0) {
			/* forget the refused schedule: its diagnostics and the fusion it changed */
			diag_rollback(d, m);
			if (!f->ast)
				break;
			Fusion *g = sema_fusion(a, d, f->ast);
			diag_rollback(d, m); /* it was checked before: nothing new to say */
			g->ast_schedule = block;
			g->padded_operands = f->padded_operands;
			g->segment_of = f->segment_of;
			g->pad_plan = f->pad_plan;
			*f = *g;
		}
		f->auto_scheduled = true;
		f->auto_fallback = level ? level_names[level] : NULL;
		Buckets bucket = {0};
		bool ok = schedule_level(a, d, f, (AutoLevel)level, arch, &bucket) &&
			  diag_error_count(d) == m.errors && lowers(a, d, f, arch);
		if (ok && o && (o->refuse >> level & 1)) {
			diag_error(d, f->span, "the %s schedule of '%s' is refused (AutoOptions.refuse)",
				   level_names[level], f->name);
			ok = false;
		}
		if (ok && bucket.sym && f->ast)
			add_variants(a, d, f, block, &bucket, arch);
		if (ok && bucket.bounds == row_buckets && f->ast && !f->segment_of)
			add_long_rows(a, d, f, block, &bucket, arch);
		if (ok)
			return true;
	}
	diag_note(d, f->span, "fusion '%s' has no schedule block and none of the automatic scheduler's schedules compiled (a bug in fusc): please report it, and write a schedule block",
		  f->name);
	return false;
}

bool auto_schedule(Arena *a, Diag *d, Fusion *f)
{
	return auto_schedule_with(a, d, f, NULL);
}
