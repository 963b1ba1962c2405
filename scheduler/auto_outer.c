/* auto_outer.c: the automatic schedules of reduction outputs that are not row reductions
 * (docs/auto_schedule.md, "Outer, middle-axis and whole-tensor reductions"):
 *
 *   - an outer reduction: every read has the output's last index as its last subscript, so
 *     consecutive output elements are consecutive addresses and the reduced index walks rows
 *     (a column sum s[j] = sum(i: x[i, j]), a middle-axis sum s[b, h] = sum(t: x[b, t, h])).
 *     16 threads of 4 columns (16-byte loads; 8 columns of f16 or bf16 into f32) by 16 rows
 *     per block, an input read once loaded evict-first (x.evict_first()), gy blocks on blockIdx.y
 *     take interleaved rows (a grid-stride loop), each thread sums its rows into 4 register
 *     partials (rfactor, cache_before), the block's partials go to shared memory, and s takes
 *     one column per thread: its 16 partials, then one grid step over blockIdx.y. The other
 *     kept indices and the column blocks are merged onto blockIdx.x. gy fills the GPU when the
 *     blocks on x are known; symbolic sizes get size variants by the column count (a column
 *     sum) or the reduced extent (a middle-axis sum). A column count no vector divides keeps
 *     one column per thread (32 x 8 threads, a block reduction over threadIdx.y).
 *   - a whole-tensor reduction (a 0-d output): the reduced indices merged into one flat index,
 *     split into 16-byte vectors when every read is the identity over the reduced indices,
 *     1024 threads, at most 132 blocks (one per H200 SM) in a grid-stride loop of 4 vectors
 *     a step; each thread adds its vectors into one register partial per lane (rfactor over
 *     its steps: independent adds, a step's 4 loads all in flight), then the thread's
 *     partials, a block reduction and a grid reduction over blockIdx.x.
 *
 * Only for a fusion with one output (the outputs share one launch: another output's nest
 * would be run by every block of the split). Both are grid reductions, which need the
 * output to be read by nothing in the fusion
 * (docs/reductions.md, "Grid reductions"); auto_nests.c leaves no output read. Block counts
 * come from the sizes when they are constants (or a size variant's bounds), else from the
 * defaults below.
 */
#include <string.h>

#include "scheduler/auto_plan.h"

enum {
	OUTER_WARP_BYTES = 128, /* a warp reads this many contiguous bytes of a row: tx = 128 / size */
	OUTER_VEC_LANES = 16,   /* threads over column vectors (a warp reads 256 bytes of 2 rows) */
	OUTER_VECTOR_BYTES = 16, /* a vector of columns per thread (f32: 4, f16 into f32: 8) */
	OUTER_PARTIAL_BYTES = 32, /* a thread's register partials of its vector, at most */
	OUTER_THREADS = 256,    /* tx * ty */
	OUTER_UNROLL = 4,       /* rows a thread loads before it adds */
	OUTER_MIN_ROWS = 16,    /* rows per thread at least, when the grid split is chosen */
	OUTER_BLOCKS = 1056,    /* blocks to aim for: 8 of 256 threads per SM, 132 SMs (H200) */
	OUTER_GRID_Y = 64,      /* blockIdx.y split when the kept extent is symbolic (untuned), */
	OUTER_GRID_Y_BATCH = 1, /*   and when more kept indices multiply the blocks on x */
	OUTER_MID_ROWS = 32,    /* rows per thread of a batched middle-axis sum of unknown batch */
	WHOLE_THREADS = 1024,
	WHOLE_BLOCKS = 132,     /* one block of 1024 per SM (H200); also the length of the final fold */
	WHOLE_UNROLL = 4,       /* vectors a step */
	WHOLE_VECTOR_BYTES = 16,
};

/* What the reads of a reduction output's body allow. */
typedef struct Outer {
	Tensor *out;
	bool contiguous; /* every read of rank >= 1 has out's last kept index as its last subscript,
			  * or is a broadcast (broadcast_read: no column index at all) */
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

/* Is the read x[pos...] of an outer or middle-axis reduction o one value per row step,
 * the same for every column (v[k] in y[j] = sum(k: v[k] * A[k, j]), w[b, t] in a middle-axis
 * sum over t)? No subscript is o's last kept index (the column; the others are roots of o or
 * constants): each thread loads it once per row and uses it for all the columns of its
 * vector. */
static bool broadcast_read(Tensor *o, Tensor *x, const int *pos)
{
	if (o->ndim == 0)
		return false;
	for (int k = 0; k < x->ndim; k++)
		if (pos[k] == o->ndim - 1)
			return false;
	return true;
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
	bool bcast = broadcast_read(o, x, pos);
	if (!bcast && dtype_size(x->dtype) > a->max_size)
		a->max_size = dtype_size(x->dtype);
	if (!bcast && (o->ndim == 0 || pos[x->ndim - 1] != o->ndim - 1))
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

/* Is input x read once, by o alone, as x[every root of o] (ins[i], rows[i])? In a segment,
 * no other stored tensor of the segmented fusion may read it either (a later segment that
 * reads x again, `y[i, j] = x[i, j] - c[j] / M`, may find its lines in L2). */
static bool read_once(Fusion *f, Outer *a, int i)
{
	Tensor *x = a->ins[i], *o = a->out;
	if (!a->rows[i] || x->kind != TK_INPUT || x->ndim != o->nroot || !only_reader(f, x, o))
		return false;
	if (!f->segment_of)
		return true;
	Fusion *g = f->segment_of; /* its tensors' schedule states are not this segment's */
	Tensor *px = fusion_find_tensor(g, x->name), *po = fusion_find_tensor(g, o->name);
	if (!px || !po)
		return false;
	for (int k = 0; k < g->ntensors; k++)
		if (g->tensors[k] != po && g->tensors[k]->def && reads(g->tensors[k]->def, px, 0))
			return false;
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

/* The size variants of an outer reduction with symbolic sizes (docs/auto_schedule.md, "Size
 * variants"): buckets of the column count of a column sum (the blocks over the columns
 * decide how many the rows may take), or of the reduced extent of a middle-axis sum (whose
 * batch is unknown: the rows per thread decide). */
static const int64_t col_buckets[] = {1024, 4096, 16384, 32768};
static const int64_t mid_buckets[] = {512, 2048, 8192, 32768};

/* The extent e when it is a constant, or at most its size symbol's bound (a size
 * variant's); -1 when unknown. */
static int64_t extent_at_most(IrExpr *e)
{
	int64_t v;
	if (ir_is_const(e, &v))
		return v;
	return e->kind == EX_SIZE && e->size->bound > 0 ? e->size->bound : -1;
}

/* The product of extent_at_most over o's roots [from, to) (collapsed indices), or -1. */
static int64_t extents_at_most(Tensor *o, int from, int to)
{
	int64_t n = 1;
	for (int k = from; k < to && n >= 0; k++) {
		int64_t e = extent_at_most(o->root[k]->extent);
		n = e < 0 ? -1 : n * e;
	}
	return n;
}

static OuterShape outer_shape(Plan *p, Tensor *o, int64_t vec, int64_t size)
{
	int k = o->ndim;
	int64_t r = extents_at_most(o, k, o->nroot), last = extent_at_most(o->root[k - 1]->extent);
	int64_t kept = const_extent(o, 0, k - 1);
	bool clast = last >= 0;
	OuterShape sh = {.vec = vec, .unroll = OUTER_UNROLL};
	/* a warp over consecutive columns: 16 vectors (256 bytes of 2 rows), or 128 bytes of
	 * scalars; fewer for a narrow constant row */
	sh.tx = vec > 1 ? OUTER_VEC_LANES : OUTER_WARP_BYTES / size;
	if (sh.tx < 1)
		sh.tx = 1;
	if (clast)
		while (sh.tx > (vec > 1 ? 1 : 32) && sh.tx / 2 * vec >= last)
			sh.tx /= 2;
	sh.ty = OUTER_THREADS / sh.tx;
	if (r >= 0)
		while (sh.ty > 1 && sh.ty / 2 >= r)
			sh.ty /= 2;
	/* no split larger than a constant reduced extent (15 rows: 15 threads, not 16 with one
	 * idle): a written schedule may not (docs/design.md), and --emit=schedule prints this */
	if (r >= 1 && sh.ty > r)
		sh.ty = r;
	/* blocks over the kept indices, when known (at most a bucket's bound), the rows over
	 * blockIdx.y to fill the GPU: on the H200 a column sum ran at 3818 GB/s with 1024
	 * blocks (16384x4096 on 64 x 16) against 3366 with 4096 (64 x 64), and 65536x1024 at
	 * 3698 on 16 x 64 against 1899 on 16 x 16 */
	bool tuned = p->level == AUTO_TUNED;
	if (kept >= 0 && clast) /* one wave: 17 x 64 = 1088 blocks ran 16384x4096 at 2811 GB/s */
		sh.gy = OUTER_BLOCKS * OUTER_THREADS / (sh.tx * sh.ty) /
			(kept * ceil_div(last, sh.tx * vec));
	else if (k > 1 && r >= 0 && tuned) /* an unknown batch: rows per thread */
		sh.gy = ceil_div(r, sh.ty * OUTER_MID_ROWS);
	else if (k > 1) /* tuned: more rows than the largest bucket */
		sh.gy = tuned ? OUTER_GRID_Y : OUTER_GRID_Y_BATCH;
	else /* more columns than the largest bucket: they fill the GPU */
		sh.gy = tuned ? 1 : OUTER_GRID_Y;
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

/* vec columns per thread (docs/auto_schedule.md, "Outer, middle-axis and whole-tensor
 * reductions"): the serial rows rr, u go to the partial part = rfactor(rr, u), which a
 * register accumulator acc (its cache_before) sums with one vector load per row, its row
 * loops outside its vec columns (docs/reductions.md, "Reduction loops outside the tensor's
 * own axes"); the ty x tx threads of a block store their partials into part, a shared
 * array of ty rows of tx * vec columns; then s takes one column per thread (tx * vec =
 * tx * ty threads), adds its ty partials and makes its one grid step (a thread's vec
 * columns in a row of grid steps would each wait for an atomic and a fold: on the H200,
 * 86 us against 64 for the partials alone at 16384x4096). */
static void schedule_outer_vec(Plan *p, Tensor *o, OuterShape sh, const char *bx,
			       const char *c, const char *row)
{
	const char *t = o->name;
	const char *ty = split_off(p, t, &row, sh.ty, "ro", "ty");
	const char *by = split_off(p, t, &row, sh.gy, "rq", "by");
	const char *u = split_off(p, t, &row, sh.unroll, "rr", "u");
	const char *serial[2] = {row, u}, *order[4];
	const char *part = d_rfactor(p, t, serial, u ? 2 : 1, arena_printf(p->a, "%s_part", t));
	const char *acc = d_cache_before(p, part, "local");
	int n = 0;
	order[n++] = bx;
	if (by)
		order[n++] = by;
	order[n++] = c;
	order[n++] = ty;
	d_reorder(p, t, order, n);
	bind_grid(p, t, bx, c, by, NULL);
	d_compute_at(p, part, t, order[n - 3], order, n);
	d_verb1(p, part, "memory", "shared");
	const char *tn = fresh_axis(p, part, "tn"), *jv = fresh_axis(p, part, "jv");
	const char *th = fresh_axis(p, part, "th");
	d_split(p, part, c, sh.vec, tn, jv);
	const char *inner[3] = {ty, tn, jv};
	d_reorder(p, part, inner, 3);
	d_merge(p, part, ty, tn, th);
	d_bind(p, part, th, "threadIdx.x");
	const char *at[3] = {bx, by ? by : th, th};
	d_compute_at(p, acc, part, th, at, by ? 3 : 2);
	const char *loops[3] = {row, u ? u : jv, jv};
	d_reorder(p, acc, loops, u ? 3 : 2);
	if (u)
		d_verb1(p, acc, "unroll", u);
	d_verb1(p, acc, "vectorize", jv);
}

/* s[kept...] = red(r...: ...) with the last kept index contiguous in every read; several
 * reduced indices are collapsed into one first (auto_collapsible). */
static void schedule_outer(Plan *p, Outer *a)
{
	Tensor *o = a->out;
	const char *t = o->name;
	int k = o->ndim;
	const char *row = auto_merge_roots(p, o, k, o->nroot, "r");
	int64_t last = 0, acc = dtype_size(o->def->dtype), vec = 1, r = const_extent(o, k, o->nroot);
	bool clast = ir_is_const(o->root[k - 1]->extent, &last);
	/* vec columns per thread, 16-byte loads, when the schedule is tuned: 16 bytes of the
	 * widest dtype read when its partials fit in 32 bytes of registers (f16 or bf16 into f32:
	 * 8 columns), else 16 bytes of the accumulator (a constant reduced extent shorter than a
	 * vector keeps one column per thread: at 1, s would have no rows left to reduce after
	 * rfactor) */
	if (p->level == AUTO_TUNED) {
		vec = OUTER_VECTOR_BYTES / a->max_size;
		if (vec * acc > OUTER_PARTIAL_BYTES)
			vec = OUTER_VECTOR_BYTES / (a->max_size > acc ? a->max_size : acc);
		while (vec > 1 && clast && last % vec != 0)
			vec /= 2;
		if (r >= 0 && r < vec)
			vec = 1;
	}
	/* inputs read once (x[every root of s], no other reader) load with an L2 evict-first
	 * policy when every input is: on the H200 under bench.py's flush, 64x512x1024 ran at 3283
	 * GB/s against 3068, 16384x4096 at 3469 against 3441; the vector-matrix product (v[k]
	 * read by every column block beside A) fell to 3138 from 3417, and a whole-tensor sum
	 * did not gain (3977 against 4191) */
	bool once = p->level == AUTO_TUNED;
	for (int i = 0; i < a->nins && once; i++)
		once = read_once(p->f, a, i);
	for (int i = 0; i < a->nins && once; i++)
		d_directive(p, NULL, a->ins[i]->name, "evict_first", 0, NULL, 0, NULL);
	IrExpr *sz = o->root[k == 1 ? 0 : k]->extent; /* the size the blocks on y depend on */
	if (p->level == AUTO_TUNED && !p->bucket.sym && sz->kind == EX_SIZE && sz->size->bound == 0 &&
	    (k == 1 || (const_extent(o, 0, k - 1) < 0 && o->nroot == k + 1)))
		p->bucket = k == 1 ? (Buckets){.sym = sz->size, .bounds = col_buckets,
					       .n = countof(col_buckets)}
				   : (Buckets){.sym = sz->size, .bounds = mid_buckets,
					       .n = countof(mid_buckets)};
	OuterShape sh = outer_shape(p, o, vec, a->max_size);
	const char *hx = fresh_axis(p, t, "hx"), *tn = fresh_axis(p, t, "tx");
	d_split(p, t, o->root[k - 1]->name, sh.tx * vec, hx, tn);
	const char *bx = hx;
	if (k > 1) {
		const char *x = auto_merge_roots(p, o, 0, k - 1, "kept");
		bx = fresh_axis(p, t, "bx");
		d_merge(p, t, x, hx, bx);
	}
	if (vec > 1) {
		schedule_outer_vec(p, o, sh, bx, tn, row);
		return;
	}
	const char *tyn = split_off(p, t, &row, sh.ty, "ro", "ty");
	const char *by = split_off(p, t, &row, sh.gy, "rq", "by");
	const char *u = split_off(p, t, &row, sh.unroll, "rr", "u");
	bind_grid(p, t, bx, tn, by, tyn);
	if (u)
		d_verb1(p, t, "unroll", u);
}

/* s = red(i, j, ...: ...): one flat index over vectors, threads and blocks. */
static void schedule_whole(Plan *p, Outer *a)
{
	Tensor *o = a->out;
	const char *t = o->name, *x = auto_merge_roots(p, o, 0, o->nroot, "r");
	bool vecs = a->identity && p->level == AUTO_TUNED;
	for (int i = 0; i < a->nins && vecs; i++)
		vecs = only_reader(p->f, a->ins[i], o);
	int64_t vec = vecs ? WHOLE_VECTOR_BYTES / a->max_size : 1, n = const_extent(o, 0, o->nroot);
	/* the partials of a vector in at most 32 bytes of registers (8 f32 for f16 data; bool
	 * into i32: 8-byte loads) */
	int64_t acc = dtype_size(dtype_accum(o->def->red, o->dtype, o->def->args[0]->dtype));
	while (vec * acc > 2 * WHOLE_VECTOR_BYTES)
		vec /= 2;
	if (vec < 2)
		vec = 1;
	const char *rv = NULL;
	if (vec > 1) {
		const char *ro = fresh_axis(p, t, "ro");
		rv = fresh_axis(p, t, "rv");
		d_split(p, t, x, vec, ro, rv);
		x = ro;
	}
	int64_t threads = WHOLE_THREADS, blocks = WHOLE_BLOCKS, unroll = WHOLE_UNROLL;
	if (n >= 0) {
		while (threads > 32 && threads / 2 >= ceil_div(n, vec))
			threads /= 2;
		int64_t per = ceil_div(n, vec * threads); /* vectors per thread on one block */
		if (blocks > ceil_div(per, 4 * unroll))
			blocks = ceil_div(per, 4 * unroll);
		if (blocks < 1)
			blocks = 1;
		while (unroll > 1 && unroll / 2 >= ceil_div(per, blocks))
			unroll /= 2;
	}
	const char *rq = fresh_axis(p, t, "rq"), *tx = fresh_axis(p, t, "tx");
	d_split(p, t, x, threads, rq, tx);
	x = rq;
	const char *bx = split_off(p, t, &x, blocks, "rb", "bx");
	const char *u = split_off(p, t, &x, unroll, "rr", "u");
	if (!rv) {
		/* scalar loads: one accumulator per thread, a step's unroll loads inside its loop */
		const char *order[4];
		int no = 0;
		order[no++] = x;
		if (bx)
			order[no++] = bx;
		order[no++] = tx;
		order[no++] = u;
		if (u)
			d_reorder(p, t, order, no);
		if (bx)
			d_bind(p, t, bx, "blockIdx.x");
		d_bind(p, t, tx, "threadIdx.x");
		if (u)
			d_verb1(p, t, "unroll", u);
		return;
	}
	/* vectors: each thread's steps [rr, u, rv] into register partials, one per lane (rfactor
	 * over rr and u), a step's unroll vectors loaded before they are added */
	const char *serial[2] = {x, u}, *order[3], *loops[3];
	int no = 0, nl = 0;
	const char *part = d_rfactor(p, t, serial, u ? 2 : 1, arena_printf(p->a, "%s_part", t));
	if (bx)
		order[no++] = bx;
	order[no++] = tx;
	order[no++] = rv;
	d_reorder(p, t, order, no);
	if (bx)
		d_bind(p, t, bx, "blockIdx.x");
	d_bind(p, t, tx, "threadIdx.x");
	d_verb1(p, t, "unroll", rv);
	d_compute_at(p, part, t, tx, order, no - 1);
	loops[nl++] = x;
	if (u)
		loops[nl++] = u;
	loops[nl++] = rv;
	d_reorder(p, part, loops, nl);
	if (u)
		d_verb1(p, part, "unroll", u);
	d_verb1(p, part, "vectorize", rv);
}

/* The reads of o's body, when o is an outer, middle-axis or whole-tensor reduction (its
 * class, else AC_GENERAL). */
static AutoClass outer_analyze(Fusion *f, Tensor *o, Outer *a, bool alone)
{
	/* One output only: the outputs of a fusion share one launch, and another output's nest
	 * would run (and recompute what it reads) in every block of the grid split (alone: the
	 * class o would have as the one output of a segment of its own, segment.c, where nothing
	 * reads it: it may be an intermediate or read here). */
	if (!alone && (f->noutputs != 1 || o->kind != TK_OUTPUT || read_by_other(f, o)))
		return AC_GENERAL;
	if (!tensor_is_reduction(o) || !o->def || o->nroot > AUTO_MAX_RANK)
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
	if (!a->contiguous || !auto_collapsible(o, o->ndim, o->nroot))
		return AC_GENERAL;
	return o->ndim == 1 ? AC_OUTER : AC_MIDDLE;
}

AutoClass auto_outer_class(Fusion *f, Tensor *o)
{
	Outer a;
	return outer_analyze(f, o, &a, false);
}

AutoClass auto_outer_class_alone(Fusion *f, Tensor *o)
{
	Outer a;
	return outer_analyze(f, o, &a, true);
}

bool auto_outer(Plan *p, Tensor *o)
{
	Outer a;
	switch (outer_analyze(p->f, o, &a, false)) {
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
