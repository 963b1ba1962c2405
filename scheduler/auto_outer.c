/* auto_outer.c: the automatic schedules of reduction outputs that are not row reductions
 * (docs/auto_schedule.md, "Outer, middle-axis and whole-tensor reductions"):
 *
 *   - an outer reduction: every read has the output's last index as its last subscript, so
 *     consecutive output elements are consecutive addresses and the reduced index walks rows
 *     (a column sum s[j] = sum(i: x[i, j]), a middle-axis sum s[b, h] = sum(t: x[b, t, h])).
 *     tx threads take consecutive columns (a warp reads 128 contiguous bytes of a row), ty
 *     threads and gy blocks on blockIdx.y take interleaved rows (a grid-stride loop), each
 *     thread adds its strip serially, 32 bytes of rows per step loaded into a register copy
 *     before they are added (8 f32 loads in flight), then a block reduction over threadIdx.y
 *     and a grid reduction over blockIdx.y (none for a batched symbolic middle-axis sum: the
 *     batch gives the blocks). The other kept indices and the column blocks are merged onto
 *     blockIdx.x.
 *   - a whole-tensor reduction (a 0-d output): the reduced indices merged into one flat index,
 *     split into vectors (16 bytes, through a register copy of a step's 4 vectors when every
 *     read is the identity over the reduced indices), 256 threads, at most 1056 blocks (8 per
 *     H200 SM) in a grid-stride loop, a block reduction and a grid reduction over blockIdx.x.
 *
 * Only for a fusion with one output (the outputs share one launch: another output's nest
 * would be run by every block of the split). Both are grid reductions, which need the
 * output to be read by nothing in the fusion
 * (docs/reductions.md, "Grid reductions"); auto_nests.c leaves no output read. Block counts
 * come from the sizes when they are constants, else from the defaults below.
 */
#include <string.h>

#include "scheduler/auto_plan.h"

enum {
	OUTER_WARP_BYTES = 128, /* a warp reads this many contiguous bytes of a row: tx = 128 / size */
	OUTER_VEC_LANES = 16,   /* threads over column vectors (a warp reads 256 bytes of 2 rows) */
	OUTER_VECTOR_BYTES = 16, /* a vector of columns per thread (f32: 4) */
	OUTER_THREADS = 256,    /* tx * ty */
	OUTER_UNROLL = 4,       /* rows a thread loads before it adds */
	OUTER_MIN_ROWS = 16,    /* rows per thread at least, when the grid split is chosen */
	OUTER_BLOCKS = 1056,    /* blocks to aim for: 8 of 256 threads per SM, 132 SMs (H200) */
	OUTER_GRID_Y = 64,      /* blockIdx.y split when the kept extent is symbolic, */
	OUTER_GRID_Y_BATCH = 1, /*   and when more kept indices multiply the blocks on x */
	WHOLE_THREADS = 256,
	WHOLE_BLOCKS = 1056,    /* 8 blocks of 256 per SM (H200); also the length of the final fold */
	WHOLE_UNROLL = 4,
	WHOLE_VECTOR_BYTES = 16,
};

/* What the reads of a reduction output's body allow. */
typedef struct Outer {
	Tensor *out;
	bool contiguous; /* every read of rank >= 1 has out's last kept index as its last subscript */
	bool identity;   /* every read is x[reduced indices in order], x's shape their extents */
	int max_size;    /* widest dtype read, in bytes */
	Tensor *ins[16]; /* the tensors read (identity: to cache) */
	int nins;
	bool rows[16];   /* ins[i] is read only as x[out's roots...], the reduced one among them */
	int pos[16][16]; /* the roots of ins[i]'s first read */
} Outer;

/* Is the read x[pos...] (subscript k is out's root pos[k]) one that a register copy
 * computed in out's row loop can take: distinct roots of out with x's shape as their
 * extents, the reduced root among them? */
static bool row_read(Tensor *o, Tensor *x, const int *pos)
{
	bool reduced = false;
	for (int k = 0; k < x->ndim; k++) {
		if (pos[k] < 0 || !dims_equal(x->shape[k], o->root[pos[k]]->extent))
			return false;
		for (int q = 0; q < k; q++)
			if (pos[q] == pos[k])
				return false;
		reduced |= pos[k] >= o->ndim;
	}
	return reduced;
}

/* A read of tensor x whose subscript k is out's root pos[k] (-1: anything else); a read of a
 * reduction stops the walk (not these classes). */
static bool outer_read(void *ctx, Tensor *x, const int *pos)
{
	Outer *a = ctx;
	Tensor *o = a->out;
	int nred = o->nroot - o->ndim;
	if (tensor_is_reduction(x))
		return false;
	if (x->ndim == 0)
		return true;
	if (dtype_size(x->dtype) > a->max_size)
		a->max_size = dtype_size(x->dtype);
	if (o->ndim == 0 || pos[x->ndim - 1] != o->ndim - 1)
		a->contiguous = false;
	if (x->ndim != nred)
		a->identity = false;
	for (int k = 0; k < x->ndim && a->identity; k++)
		a->identity = pos[k] == o->ndim + k && dims_equal(x->shape[k], o->root[o->ndim + k]->extent);
	int i = 0;
	while (i < a->nins && a->ins[i] != x)
		i++;
	if (i == 16) {
		a->identity = false;
	} else if (i == a->nins) {
		a->rows[i] = row_read(o, x, pos);
		memcpy(a->pos[i], pos, sizeof(int) * (size_t)x->ndim);
		a->ins[a->nins++] = x;
	} else if (a->rows[i]) { /* read again: the same subscripts, or no copy */
		a->rows[i] = memcmp(a->pos[i], pos, sizeof(int) * (size_t)x->ndim) == 0;
	}
	return true;
}

/* Does e read x, looking through recomputed tensors? */
static bool reads(IrExpr *e, Tensor *x, int depth)
{
	if (!e || depth > 64)
		return false;
	if (e->kind == EX_ACCESS && (e->tensor == x || (auto_recomputed(e->tensor) &&
							  reads(e->tensor->def, x, depth + 1))))
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (reads(e->args[i], x, depth))
			return true;
	return false;
}

/* Is o the only stored tensor that reads x? (x.cache_after reroutes every reader.) */
static bool only_reader(Fusion *f, Tensor *x, Tensor *o)
{
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		if (t != o && t->def && !auto_recomputed(t) && t->kind != TK_SCALAR && reads(t->def, x, 0))
			return false;
	}
	return true;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* The product of the extents of o's roots [from, to), or -1 when one is symbolic. */
static int64_t const_extent(Tensor *o, int from, int to)
{
	int64_t n = 1, e;
	for (int k = from; k < to; k++) {
		if (!ir_is_const(o->root[k]->extent, &e))
			return -1;
		n *= e;
	}
	return n;
}

/* Splits *axis of t by f when f > 1: *axis becomes the outer part (named after outer), the
 * inner part's name is returned (NULL: no split). */
static const char *split_off(Plan *p, const char *t, const char **axis, int64_t f,
			     const char *outer, const char *inner)
{
	if (f <= 1)
		return NULL;
	const char *o = fresh_axis(p, t, outer), *in = fresh_axis(p, t, inner);
	d_split(p, t, *axis, f, o, in);
	*axis = o;
	return in;
}

/* The launch shape of an outer reduction: vec columns per thread, tx x ty threads, gy blocks
 * on blockIdx.y, unroll rows per step. */
typedef struct OuterShape {
	int64_t vec, tx, ty, gy, unroll;
} OuterShape;

static OuterShape outer_shape(Tensor *o, int64_t vec, int64_t size)
{
	int k = o->ndim;
	int64_t r = const_extent(o, k, k + 1), last, kept = const_extent(o, 0, k - 1);
	bool clast = ir_is_const(o->root[k - 1]->extent, &last);
	OuterShape sh = {.vec = vec, .unroll = OUTER_UNROLL};
	/* a warp over consecutive columns: 32 vectors, or 128 bytes of scalars */
	sh.tx = vec > 1 ? OUTER_VEC_LANES : OUTER_WARP_BYTES / size;
	if (sh.tx < 1)
		sh.tx = 1;
	if (clast)
		while (sh.tx > 32 && sh.tx / 2 >= ceil_div(last, vec))
			sh.tx /= 2;
	sh.ty = OUTER_THREADS / sh.tx;
	if (r >= 0)
		while (sh.ty > 1 && sh.ty / 2 >= r)
			sh.ty /= 2;
	/* blocks over the kept indices, when known; then rows over blockIdx.y */
	sh.gy = k > 1 ? OUTER_GRID_Y_BATCH : OUTER_GRID_Y;
	if (kept >= 0 && clast)
		sh.gy = ceil_div(OUTER_BLOCKS, kept * ceil_div(last, sh.tx * vec));
	if (r >= 0 && sh.gy > ceil_div(r, sh.ty * OUTER_MIN_ROWS))
		sh.gy = ceil_div(r, sh.ty * OUTER_MIN_ROWS);
	if (sh.gy < 1)
		sh.gy = 1;
	if (sh.gy > 65535)
		sh.gy = 65535;
	if (r >= 0)
		while (sh.unroll > 1 && sh.unroll / 2 >= ceil_div(r, sh.ty * sh.gy))
			sh.unroll /= 2;
	return sh;
}

/* The outer schedule's bindings: bx, tn on blockIdx.x, threadIdx.x; by, ty (when made) on
 * blockIdx.y, threadIdx.y. */
static void bind_grid(Plan *p, const char *t, const char *bx, const char *tn, const char *by,
		      const char *ty)
{
	d_bind(p, t, bx, "blockIdx.x");
	d_bind(p, t, tn, "threadIdx.x");
	if (by)
		d_bind(p, t, by, "blockIdx.y");
	if (ty)
		d_bind(p, t, ty, "threadIdx.y");
}

/* s[kept...] = red(r: ...) with the last kept index contiguous in every read. */
static void schedule_outer(Plan *p, Outer *a)
{
	Tensor *o = a->out;
	const char *t = o->name;
	int k = o->ndim;
	int64_t last, acc = dtype_size(o->def->dtype), vec = 1;
	bool clast = ir_is_const(o->root[k - 1]->extent, &last);
	/* A middle-axis reduction takes vec columns per thread (a register accumulator, below):
	 * on the H200, 64x512x1024 ran at 2518 GB/s so against 1337 with one column per thread
	 * (a warp then reads 128 bytes of each row). A column sum keeps one column per thread
	 * (3010 GB/s at 16384x4096 against 3062, and 3203 at 65536x1024 against 1822). */
	if (p->level == AUTO_TUNED && k > 1) {
		vec = OUTER_VECTOR_BYTES / (a->max_size > acc ? a->max_size : acc);
		while (vec > 1 && clast && last % vec != 0)
			vec /= 2;
	}
	OuterShape sh = outer_shape(o, vec, a->max_size);
	if (vec > 1 && sh.ty == 1 && sh.gy == 1) /* nothing left for s to reduce after rfactor */
		sh = outer_shape(o, vec = 1, a->max_size);

	const char *col = o->root[k - 1]->name, *jv = NULL;
	if (vec > 1)
		jv = split_off(p, t, &col, vec, "jo", "jv");
	const char *hx = fresh_axis(p, t, "hx"), *tn = fresh_axis(p, t, "tx");
	d_split(p, t, col, sh.tx, hx, tn);
	const char *bx = hx;
	if (k > 1) {
		const char *x = o->root[0]->name;
		for (int q = 1; q < k - 1; q++) {
			const char *m = fresh_axis(p, t, "kept");
			d_merge(p, t, x, o->root[q]->name, m);
			x = m;
		}
		bx = fresh_axis(p, t, "bx");
		d_merge(p, t, x, hx, bx);
	}
	const char *row = o->root[k]->name, *tyn = NULL, *by = NULL, *u = NULL;
	tyn = split_off(p, t, &row, sh.ty, "ro", "ty");
	by = split_off(p, t, &row, sh.gy, "rq", "by");
	u = split_off(p, t, &row, sh.unroll, "rr", "u");
	if (!jv) {
		bind_grid(p, t, bx, tn, by, tyn);
		if (u)
			d_verb1(p, t, "unroll", u);
		return;
	}
	/* vec columns per thread: the serial rows go to a register accumulator of vec partials
	 * (rfactor), whose row loops run outside its columns (docs/reductions.md, "Reduction
	 * loops outside the tensor's own axes"), so that each row is one vector load; s then
	 * reduces the partials over threadIdx.y (and blockIdx.y), one column after another. */
	const char *serial[2] = {row, u}, *order[5], *at = tyn ? tyn : tn;
	const char *rf = d_rfactor(p, t, serial, u ? 2 : 1, arena_printf(p->a, "%s_part", t));
	int n = 0;
	order[n++] = bx;
	if (by)
		order[n++] = by;
	order[n++] = tn;
	if (tyn)
		order[n++] = tyn;
	order[n++] = jv;
	d_reorder(p, t, order, n);
	bind_grid(p, t, bx, tn, by, tyn);
	d_verb1(p, t, "unroll", jv);
	d_compute_at(p, rf, t, at, order, n - 1);
	const char *inner[3] = {row, u ? u : jv, jv};
	d_reorder(p, rf, inner, u ? 3 : 2);
	if (u)
		d_verb1(p, rf, "unroll", u);
	d_verb1(p, rf, "vectorize", jv);
}

/* s = red(i, j, ...: ...): one flat index over vectors, threads and blocks. */
static void schedule_whole(Plan *p, Outer *a)
{
	Tensor *o = a->out;
	const char *t = o->name, *x = o->root[0]->name;
	for (int q = 1; q < o->nroot; q++) {
		const char *m = fresh_axis(p, t, "r");
		d_merge(p, t, x, o->root[q]->name, m);
		x = m;
	}
	bool cache = a->identity && p->level == AUTO_TUNED;
	for (int i = 0; i < a->nins && cache; i++)
		cache = only_reader(p->f, a->ins[i], o);
	int64_t vec = cache ? WHOLE_VECTOR_BYTES / a->max_size : 1, n = const_extent(o, 0, o->nroot);
	if (vec < 2)
		cache = false, vec = 1;
	const char *rv = NULL;
	if (vec > 1) {
		const char *ro = fresh_axis(p, t, "ro");
		rv = fresh_axis(p, t, "rv");
		d_split(p, t, x, vec, ro, rv);
		x = ro;
	}
	int64_t threads = WHOLE_THREADS;
	if (n >= 0)
		while (threads > 32 && threads / 2 >= ceil_div(n, vec))
			threads /= 2;
	int64_t blocks = WHOLE_BLOCKS, unroll = WHOLE_UNROLL;
	if (n >= 0) {
		int64_t per = ceil_div(n, vec * threads); /* vectors per thread on one block */
		if (blocks > ceil_div(per, 4 * unroll))
			blocks = ceil_div(per, 4 * unroll);
		if (blocks < 1)
			blocks = 1;
		while (unroll > 1 && unroll / 2 >= ceil_div(per, blocks))
			unroll /= 2;
	}
	const char *rq = fresh_axis(p, t, "rq"), *tx = fresh_axis(p, t, "tx"), *bx = NULL, *u = NULL;
	d_split(p, t, x, threads, rq, tx);
	x = rq;
	bx = split_off(p, t, &x, blocks, "rb", "bx");
	u = split_off(p, t, &x, unroll, "rr", "u");
	if (bx)
		d_bind(p, t, bx, "blockIdx.x");
	d_bind(p, t, tx, "threadIdx.x");
	if (u)
		d_verb1(p, t, "unroll", u);
	if (!rv)
		return;
	d_verb1(p, t, "unroll", rv);
	/* one vector of each input per step, in registers: a reduction axis is not vectorized */
	const char *shared[8];
	int ns = 0;
	for (int i = 0; i < o->ndomain && ns < 8; i++) {
		shared[ns++] = o->domain[i]->name;
		if (strcmp(o->domain[i]->name, tx) == 0)
			break;
	}
	for (int i = 0; i < a->nins; i++) {
		const char *c = d_cache_after(p, a->ins[i], "local");
		d_compute_at(p, c, t, tx, shared, ns);
		d_verb1(p, c, "vectorize", rv);
	}
}

/* The reads of o's body, when o is an outer, middle-axis or whole-tensor reduction (its
 * class, else AC_GENERAL). */
static AutoClass outer_analyze(Fusion *f, Tensor *o, Outer *a)
{
	/* One output only: the outputs of a fusion share one launch, and another output's nest
	 * would run (and recompute what it reads) in every block of the grid split. */
	if (f->noutputs != 1 || !tensor_is_reduction(o) || o->kind != TK_OUTPUT || !o->def ||
	    o->nroot > AUTO_MAX_RANK || read_by_other(f, o))
		return AC_GENERAL;
	*a = (Outer){.out = o, .contiguous = true, .identity = true};
	int map[AUTO_MAX_RANK];
	for (int k = 0; k < o->nroot; k++)
		map[k] = k;
	if (!auto_walk_reads(o->def->args[0], map, outer_read, a))
		return AC_GENERAL;
	if (a->max_size == 0) /* reads nothing of rank >= 1 */
		a->max_size = dtype_size(o->dtype);
	if (o->ndim == 0)
		return AC_WHOLE;
	if (o->nroot != o->ndim + 1 || !a->contiguous)
		return AC_GENERAL;
	return o->ndim == 1 ? AC_OUTER : AC_MIDDLE;
}

AutoClass auto_outer_class(Fusion *f, Tensor *o)
{
	Outer a;
	return outer_analyze(f, o, &a);
}

bool auto_outer(Plan *p, Tensor *o)
{
	Outer a;
	switch (outer_analyze(p->f, o, &a)) {
	case AC_WHOLE:
		schedule_whole(p, &a);
		return true;
	case AC_OUTER:
	case AC_MIDDLE:
		schedule_outer(p, &a);
		return true;
	default:
		return false;
	}
}
