/* auto_transpose.c: the automatic schedule of a transpose or permute (docs/auto_schedule.md,
 * "Transposes and permutes").
 *
 * The class: a pointwise output o that reads an input x whose innermost dimension is
 * subscripted by an index `a` of o other than o's innermost one `b`, and whose subscripts
 * also hold `b` and every other index of o (so x is not a broadcast): `y[j, i] = x[i, j]`, the 3-D permute
 * `y[k, i, j] = x[i, j, k]`. Reading x in o's loop order reads it with a stride, 4 bytes of
 * each 32-byte sector.
 *
 * The schedule stages x through shared memory in tiles of TA elements along a (x's inner
 * dimension: one 128-byte line, 32 f32, 64 for 16-bit and smaller) by TB = 64 along b (o's
 * inner dimension); docs/auto_schedule.md has the directives:
 *
 *   o.split(a, TA) -> (ao, at);  o.split(b, TB) -> (bo, bt);  the tiles merged on blockIdx.x
 *   xs = x.cache_after(shared);  xs.compute_at(o, bx);  xs.reorder(bt, at);
 *   xs.split(bt, 8) -> (br, ty);  [xs.split(at, 32) -> (ah, al)];  al on threadIdx.x
 *   xs.pad(1);                     rows of 33 (or 2 x 33) elements: column reads in 32 banks
 *   o.split(at, 8) -> (ar, ty);  o.split(bt, 32) -> (bh, bl);  ty, bl on threadIdx.y, .x
 *
 * A warp reads 32 consecutive elements of a row of x and writes 32 of a row of o. Scalar
 * accesses (measured: float4 writes gathered from 4 rows were slower for f32). Sizes no
 * tile divides are predicated; 0 gives an empty grid.
 */
#include <string.h>

#include "scheduler/auto_plan.h"

enum {
	TILE_LANES = 32,    /* threadIdx.x: a warp over consecutive elements of a row */
	LINE_BYTES = 128,   /* a warp's read of a tile row of x: one whole line */
	TILE_B = 64,        /* tile elements along o's inner dimension: 8 rows per thread */
	TILE_ROWS = 8,      /* threadIdx.y */
};

/* One walk of an output's definition: the transposed reads and what else it reads. */
typedef struct Walk {
	Tensor *out;
	AutoTranspose *c;
	Tensor *bad[AUTO_TRANSPOSE_MAX]; /* read in two ways: not cached */
	int nbad;
} Walk;

static int find(Tensor **v, int n, Tensor *x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return i;
	return -1;
}

static void mark_bad(Walk *w, Tensor *x)
{
	if (find(w->bad, w->nbad, x) < 0 && w->nbad < AUTO_TRANSPOSE_MAX)
		w->bad[w->nbad++] = x;
}

/* A read of tensor x whose subscript k is out's root pos[k] (-1: anything else); a read of a
 * reduction stops the walk (not this class). */
static bool note(void *ctx, Tensor *x, const int *pos)
{
	Walk *w = ctx;
	AutoTranspose *c = w->c;
	if (tensor_is_reduction(x))
		return false;
	int n = w->out->ndim, last = x->ndim ? pos[x->ndim - 1] : -1;
	bool has_b = false, plain = x->kind == TK_INPUT;
	unsigned seen = 0;
	for (int k = 0; k < x->ndim; k++) {
		has_b |= pos[k] == n - 1;
		if (pos[k] < 0 || (seen >> pos[k] & 1))
			plain = false; /* a constant, another index, or one index twice */
		else
			seen |= 1u << pos[k];
	}
	/* every index of o (compute_at cannot replay the merged block index on a tensor that
	 * lacks one of its axes: a broadcast input is read directly) */
	bool transposed = plain && has_b && x->ndim == n && last >= 0 && last != n - 1;
	int i = find(c->ins, c->nins, x);
	if (i < 0 && !transposed) {
		if (x->kind == TK_INPUT && x->ndim > 0)
			mark_bad(w, x); /* if it is also read transposed, it cannot be cached */
		return true;
	}
	if (i >= 0) {
		/* a second read must be the same order (cache_after wants one order) */
		for (int k = 0; k < x->ndim; k++)
			if (pos[k] != c->subs[i][k])
				mark_bad(w, x);
		return true;
	}
	if (c->a < 0)
		c->a = last;
	if (last != c->a || c->nins == AUTO_TRANSPOSE_MAX) {
		mark_bad(w, x); /* another inner axis: read directly */
		return true;
	}
	c->ins[c->nins] = x;
	memcpy(c->subs[c->nins], pos, sizeof(int) * (size_t)x->ndim);
	c->nins++;
	return true;
}

/* Whether a stored tensor other than o reads x (looking through inlined tensors). */
static bool read_elsewhere(Tensor *x, Tensor *o, int depth)
{
	if (depth > 64)
		return true;
	for (int i = 0; i < x->readers.len; i++) {
		Tensor *t = VEC_AT(x->readers, Tensor, i);
		bool stored = t->kind == TK_OUTPUT || tensor_is_reduction(t) || !t->sched.inlined;
		if (stored ? t != o : read_elsewhere(t, o, depth + 1))
			return true;
	}
	return false;
}

bool auto_transpose_classify(Fusion *f, Tensor *o, AutoTranspose *c)
{
	*c = (AutoTranspose){.a = -1};
	(void)f;
	if (!o->def || o->ndim < 2 || o->ndim > AUTO_MAX_RANK || tensor_is_reduction(o))
		return false;
	Walk w = {.out = o, .c = c};
	int map[AUTO_MAX_RANK];
	for (int k = 0; k < o->ndim; k++)
		map[k] = k;
	if (!auto_walk_reads(o->def, map, note, &w))
		return false; /* it reduces */
	int n = 0;
	for (int i = 0; i < c->nins; i++) {
		Tensor *x = c->ins[i];
		if (find(w.bad, w.nbad, x) >= 0 || read_elsewhere(x, o, 0))
			continue;
		c->ins[n] = x;
		memcpy(c->subs[n], c->subs[i], sizeof c->subs[i]);
		n++;
	}
	c->nins = n;
	/* 8 elements each way per thread (16 bytes or more; 32 x 64 f32 tiles ran at 3985 GB/s
	 * on the H200 against 3727 for 32 x 32, bench/RESULTS.md) */
	c->tile_b = TILE_B;
	/* a tile row of x is one 128-byte line: 32 f32, 64 bf16/f16 (32 of 16-bit elements, the
	 * first version, read half a line per row: 0.66 of a copy) */
	int size = 1;
	for (int i = 0; i < n; i++)
		size = dtype_size(c->ins[i]->dtype) > size ? dtype_size(c->ins[i]->dtype) : size;
	c->tile_a = LINE_BYTES / size < TILE_LANES ? TILE_LANES : LINE_BYTES / size;
	if (c->tile_a > TILE_B)
		c->tile_a = TILE_B;
	/* tiles larger than a constant extent would be refused by split (and gain nothing) */
	int64_t e;
	if (n == 0 || (ir_is_const(o->shape[c->a], &e) && e < c->tile_a) ||
	    (ir_is_const(o->shape[o->ndim - 1], &e) && e < c->tile_b))
		return false;
	return true;
}

bool auto_transpose(Plan *p, Tensor *o)
{
	AutoTranspose c;
	if (!auto_transpose_classify(p->f, o, &c))
		return false;
	const char *t = o->name;
	int n = o->ndim, a = c.a, b = n - 1;
	p->at = o->span;
	const char *ra = o->root[a]->name, *rb = o->root[b]->name;
	const char *ao = fresh_axis(p, t, arena_printf(p->a, "%so", ra));
	const char *at = fresh_axis(p, t, arena_printf(p->a, "%st", ra));
	const char *bo = fresh_axis(p, t, arena_printf(p->a, "%so", rb));
	const char *bt = fresh_axis(p, t, arena_printf(p->a, "%st", rb));
	d_split(p, t, ra, c.tile_a, ao, at);
	d_split(p, t, rb, c.tile_b, bo, bt);
	/* the tile loops innermost, the others (tiles, batch) in o's order, merged onto blockIdx.x */
	const char *order[AUTO_MAX_RANK + 2];
	for (int k = 0; k < n; k++)
		order[k] = k == a ? ao : k == b ? bo : o->root[k]->name;
	order[n] = at;
	order[n + 1] = bt;
	d_reorder(p, t, order, n + 2);
	const char *bx = order[n - 1];
	for (int k = n - 2; k >= 0; k--) {
		const char *m = fresh_axis(p, t, k ? "bm" : "bx");
		d_merge(p, t, order[k], bx, m);
		bx = m;
	}
	d_bind(p, t, bx, "blockIdx.x");
	if (!p->ok)
		return true;

	/* the tiles of x: rows along b, TA consecutive elements of x's inner dimension each */
	for (int i = 0; i < c.nins; i++) {
		const char *xs = d_cache_after(p, c.ins[i], "shared");
		d_compute_at(p, xs, t, bx, &bx, 1);
		const char *tiles[] = {bt, at};
		d_reorder(p, xs, tiles, 2);
		const char *br = fresh_axis(p, xs, "br"), *ty = fresh_axis(p, xs, "ty");
		d_split(p, xs, bt, TILE_ROWS, br, ty);
		d_bind(p, xs, ty, "threadIdx.y");
		const char *al = at;
		if (c.tile_a > TILE_LANES) {
			/* 16-bit: two 32-element halves of a row (ah unrolled); pad(1) after each
			 * half makes a row 2 * 33 elements, 33 words: the column reads below still
			 * fall in 32 banks */
			const char *ah = fresh_axis(p, xs, "ah");
			al = fresh_axis(p, xs, "al");
			d_split(p, xs, at, TILE_LANES, ah, al);
		}
		d_bind(p, xs, al, "threadIdx.x");
		d_verb1(p, xs, "pad", "1");
	}

	/* o: rows along a, TILE_ROWS at a time, a warp over 32 consecutive elements of a row */
	const char *ar = fresh_axis(p, t, "ar"), *ty = fresh_axis(p, t, "ty");
	d_split(p, t, at, TILE_ROWS, ar, ty);
	const char *bl = bt, *bh = NULL;
	if (c.tile_b > TILE_LANES) {
		bh = fresh_axis(p, t, "bh");
		bl = fresh_axis(p, t, "bl");
		d_split(p, t, bt, TILE_LANES, bh, bl);
		const char *inner[] = {ar, bh, ty, bl}; /* bx is shared with the caches: not listed */
		d_reorder(p, t, inner, 4);
	}
	d_bind(p, t, ty, "threadIdx.y");
	d_bind(p, t, bl, "threadIdx.x");
	return true;
}
