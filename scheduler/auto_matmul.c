/* auto_matmul.c: the automatic schedule of a matrix product (docs/auto_schedule.md,
 * "Matrix products").
 *
 * The class (auto_matmul_classify): the fusion's one output o is a contraction
 *
 *     C[b..., i, j] = sum(k: A[b..., i, k] * B[b..., k, j])        (casts around either side)
 *
 * or a pointwise epilogue of one: o reads a reduction R (sema lifts `gelu(sum(k: ...) +
 * bias[j])` into R[i, j] = sum(k: ...)) with o's own indices, and R is such a contraction.
 * A may be A[b..., k, i] and B may be B[b..., j, k] (transposed operands); the batch indices
 * b... come first in the same order in all three. The schedule is one of two, both written
 * as ordinary directives:
 *
 *   - tensor cores (examples/gemm/hgemm_ldmatrix.fus): when A and B are both f16 or both
 *     bf16 and the accumulator is f32 (a transposed operand's tile is copied along its own
 *     contiguous dimension, and the lowering picks ldmatrix with or without .trans by proof:
 *     examples/gemm/auto_hgemm_nt.fus, auto_hgemm_tn.fus). Block tiles of BM x BN, k in
 *     steps of BK: 256 x 128 x 64 of 4 x 2 warps (for symbolic sizes and constant ones that
 *     make a wave of them), else 128 x 128 x 32 (smaller for a small constant M or N) of
 *     2 x 2 warps (threadIdx.z, threadIdx.y): As, Bs are shared tiles filled by 16-byte
 *     cp.async in a 3-stage circular buffer, the accumulator (R, or C's register cache) is
 *     computed by mma.m16n8k16 with ldmatrix, and C stores its fragments (the epilogue
 *     applied per element by the lane that holds it), two adjacent columns per store;
 *   - FMA units (examples/gemm/gemm_f32.fus) otherwise: 128 x 128 block tiles, 16 x 16
 *     threads of 8 x 8 outputs, k in steps of 16, As, Bs shared (cp.async, 4 stages), their
 *     register copies Al, Bl double-buffered; for a row-major f32 A (the SGEMM,
 *     examples/gemm/sgemm_tuned.fus) Al holds 8 rows x 4 k, loaded as 16-byte vectors every
 *     4 k; a transposed operand is copied along its own contiguous dimension.
 * The batch indices are merged onto blockIdx.z. For a target older than sm_80 (Plan.arch):
 * the FMA schedule, with plain vector copies instead of cp.async. The 16-byte copies need K
 * and N (a transposed operand: M or K) to be multiples of the vector: launcher
 * preconditions. Variants: the tensor-core kernels (M variants, then the kernel) are
 * followed by the padded plan (scheduler/segment.c, segment_pad_matmul: A and B copied into
 * rows of their contiguous dimension padded to 8 elements, transposed or not, then this
 * schedule on the copies, C stored per element: Fusion.padded_operands); the FMA kernel by
 * its scalar kernel (plain copies, no vectors: any size). At the scalar level (the tuned
 * schedule refused) the same tiles without vectors, cp.async or register copies. */
#include <string.h>

#include "scheduler/auto_plan.h"

enum {
	MAX_BATCH = 8,
	MMA_BK = 32,   /* k per step of the tensor-core schedule */
	MMA_STAGES = 3,
	/* large M and N: 256 x 128 x 64 tiles of 4 x 2 warps of 64 x 64 (bench/hg3/ldm_256x128.fus:
	 * 400 TFLOP/s on the H200 against 376 for hgemm_ldmatrix.fus's 128 x 256 x 64) */
	WIDE_BM = 256,
	WIDE_BN = 128,
	WIDE_BK = 64,
	WIDE_WAVE = 132, /* at least this many such tiles (one wave on an H200's 132 SMs) */
	/* a short M (at most 64 rows: a size variant or a constant): narrower, deeper tiles */
	SHORT_BN = 32,
	SHORT_BK = 64,
	SHORT_STAGES = 4,
	FMA_TILE = 128, /* block tile of the FMA schedule, each way */
	FMA_BK = 16,
	FMA_THREADS = 16, /* threads each way */
	FMA_STAGES = 4,
	FMA_AK = 4, /* k per vector of A's register fragment (a row-major f32 A) */
};

/* The block order of the tensor-core schedule: C.raster(bi, bj, FUSC_MMA_RASTER) when it is
 * above 0 (groups of that many row tiles, docs/tensor_cores.md "Block order"), the hardware's
 * order at 0. Unmeasured: 0 until the A/B on the H200 (bench/hg3/raster_ab.sh) picks a group;
 * that script builds a second fusc with `make BUILD=build/r8 CC='cc -DFUSC_MMA_RASTER=8'`. */
#ifndef FUSC_MMA_RASTER
#define FUSC_MMA_RASTER 0
#endif

/* The bounds of the size variants of a symbolic M (tensor cores) */
static const int64_t short_m[] = {32, 64};

static IrExpr *strip_casts(IrExpr *e)
{
	while (e && e->kind == EX_CAST)
		e = e->args[0];
	return e;
}

/* Is access e subscripted (b..., x, y) with b... r's first nb roots and x, y its roots rx, ry? */
static bool subs(IrExpr *e, Tensor *r, int nb, int rx, int ry)
{
	if (e->kind != EX_ACCESS || e->nargs != nb + 2)
		return false;
	for (int q = 0; q < nb + 2; q++) {
		int want = q < nb ? q : q == nb ? rx : ry;
		IrExpr *g = e->args[q];
		if (g->kind != EX_AXIS || g->axis != r->root[want])
			return false;
	}
	return true;
}

static bool half(DType t)
{
	return t == DT_F16 || t == DT_BF16;
}

/* Is r a contraction r[b..., i, j] = sum(k: A * B) of two inputs? Fills c's operands. */
static bool contraction(Tensor *r, AutoMatmul *c)
{
	IrExpr *def = r->def;
	if (!def || def->kind != EX_REDUCE || def->red != RED_SUM || r->ndim < 2 ||
	    r->ndim - 2 > MAX_BATCH || r->nroot != r->ndim + 1)
		return false;
	IrExpr *body = strip_casts(def->args[0]);
	if (body->kind != EX_OP || body->op != OP_MUL)
		return false;
	IrExpr *x = strip_casts(body->args[0]), *y = strip_casts(body->args[1]);
	int nb = r->ndim - 2, i = nb, j = nb + 1, k = nb + 2;
	if (x->kind != EX_ACCESS || y->kind != EX_ACCESS)
		return false;
	/* A is the operand that holds i */
	if (subs(y, r, nb, i, k) || subs(y, r, nb, k, i)) {
		IrExpr *z = x;
		x = y;
		y = z;
	}
	c->a_trans = subs(x, r, nb, k, i);
	c->b_trans = subs(y, r, nb, j, k);
	if (!(c->a_trans || subs(x, r, nb, i, k)) || !(c->b_trans || subs(y, r, nb, k, j)))
		return false;
	c->a = x->tensor;
	c->b = y->tensor;
	c->nbatch = nb;
	/* each operand gets a shared cache, which every reader of it then reads: the
	 * contraction must be the only one (and A B of one input, x x, would need two caches) */
	return c->a->kind == TK_INPUT && c->b->kind == TK_INPUT && c->a != c->b &&
	       c->a->readers.len == 1 && c->b->readers.len == 1;
}

/* Is access e of x subscripted by o's root indices, in order, with x of o's rank? */
static bool own_indices(IrExpr *e, Tensor *x, Tensor *o)
{
	bool same = x->ndim == o->ndim && e->nargs == o->ndim;
	for (int q = 0; same && q < e->nargs; q++)
		same = e->args[q]->kind == EX_AXIS && e->args[q]->axis == o->root[q];
	return same;
}

/* The one reduction o's definition reads (through inlined tensors), read as r[o's indices];
 * NULL when there is none, more than one, or another read of it (*bad). */
static Tensor *epilogue_of(Tensor *o, IrExpr *e, Tensor *found, bool *bad, int depth)
{
	if (!e || *bad || depth > 64)
		return found;
	if (e->kind == EX_REDUCE) {
		*bad = true;
		return found;
	}
	if (e->kind == EX_ACCESS) {
		Tensor *x = e->tensor;
		if (tensor_is_reduction(x)) {
			if (!own_indices(e, x, o) || (found && found != x))
				*bad = true;
			return x;
		}
		if (x->def && x->sched.inlined && x->kind == TK_INTERMEDIATE) {
			/* read any other way, an inlined tensor (a broadcast bias computed inline)
			 * must read no reduction */
			bool other = false;
			Tensor *r = epilogue_of(x, x->def, NULL, own_indices(e, x, o) ? bad : &other,
						depth + 1);
			if (other || (r && !own_indices(e, x, o)) || (r && found && r != found))
				*bad = true;
			return r ? r : found;
		}
	}
	for (int q = 0; q < e->nargs; q++)
		found = epilogue_of(o, e->args[q], found, bad, depth);
	return found;
}

/* A tile along a dimension of extent e: `most`, halved down to `least` until it is no
 * larger than a constant e (a split may not be larger than a constant extent; 0: e is a
 * constant below `least`), or while the half still covers the bound of a size variant. */
static int64_t tile_for(IrExpr *e, int64_t most, int64_t least)
{
	int64_t n, t = most;
	if (ir_is_const(e, &n)) {
		while (t > n && t > least)
			t /= 2;
		return t > n ? 0 : t;
	}
	if (e->kind == EX_SIZE && e->size->bound > 0)
		while (t / 2 >= e->size->bound && t / 2 >= least)
			t /= 2;
	return t;
}

/* Whether a product takes the 256 x 128 x 64 tile of 8 warps (the fastest shape measured on
 * the H200, docs/tensor_cores.md): M, N and K fit it, and constant sizes make at least a wave
 * of such tiles (fewer, larger tiles would leave SMs idle); symbolic sizes are taken to be
 * large. */
static bool wide_tiles(AutoMatmul *c, IrExpr *m, IrExpr *n, IrExpr *k)
{
	if (tile_for(m, WIDE_BM, 32) != WIDE_BM || tile_for(n, WIDE_BN, 32) != WIDE_BN ||
	    tile_for(k, WIDE_BK, 32) != WIDE_BK)
		return false;
	int64_t tiles = 1, e;
	IrExpr **sh = c->acc->shape;
	for (int q = 0; q < c->nbatch + 2; q++) {
		int64_t tile = q == c->nbatch ? WIDE_BM : q == c->nbatch + 1 ? WIDE_BN : 1;
		if (!ir_is_const(sh[q], &e))
			return true;
		tiles *= (e + tile - 1) / tile;
	}
	return tiles >= WIDE_WAVE;
}

bool auto_matmul_classify(Fusion *f, Tensor *o, AutoMatmul *c)
{
	*c = (AutoMatmul){.out = o};
	if (f->noutputs != 1 || f->outputs[0] != o || !o->def || o->ndim < 2)
		return false;
	Tensor *r = o;
	if (!tensor_is_reduction(o)) {
		bool bad = false;
		r = epilogue_of(o, o->def, NULL, &bad, 0);
		if (bad || !r || r->kind != TK_INTERMEDIATE || r->readers.len != 1)
			return false;
	}
	if (!contraction(r, c))
		return false;
	c->acc = r;
	int nb = c->nbatch;
	IrExpr *m = r->shape[nb], *n = r->shape[nb + 1], *k = r->root[nb + 2]->extent;
	c->bm = tile_for(m, 128, 32);
	c->bn = tile_for(n, 128, 32); /* B's 32 x BN tile: at least one vector per thread */
	c->mma = half(c->a->dtype) && c->a->dtype == c->b->dtype && r->dtype == DT_F32 &&
		 c->bm && c->bn && tile_for(k, MMA_BK, MMA_BK);
	c->bk = MMA_BK;
	c->stages = MMA_STAGES;
	c->warps_y = c->warps_x = 2;
	if (c->mma && wide_tiles(c, m, n, k)) {
		c->bm = WIDE_BM;
		c->bn = WIDE_BN;
		c->bk = WIDE_BK;
		c->warps_y = 4;
	}
	if (c->mma && c->bm <= 64) {
		/* 64 x 128 tiles of a 64 x 4096 product are 32 blocks on 132 SMs: narrower
		 * tiles make more blocks, and longer, deeper k steps keep each one's loads in
		 * flight */
		c->bn = tile_for(n, SHORT_BN, 32);
		c->bk = tile_for(k, SHORT_BK, MMA_BK);
		c->stages = SHORT_STAGES;
	}
	if (!c->mma) {
		c->bm = c->bn = FMA_TILE;
		if (!tile_for(m, FMA_TILE, FMA_TILE) || !tile_for(n, FMA_TILE, FMA_TILE) ||
		    !tile_for(k, FMA_BK, FMA_BK))
			return false;
	}
	return true;
}

/* ---- the schedules -------------------------------------------------------------------- */

/* The names of C's (and the accumulator's) tile axes. */
typedef struct Tiles {
	const char *t, *acc;      /* the output, the accumulator */
	const char *bz, *bi, *bj; /* block loops (bz: the merged batch, or NULL) */
	const char *ii, *ji;      /* the tile rows, columns (the accumulator's after compute_at) */
	const char *k;            /* the reduced index */
	int64_t bm, bn;
} Tiles;

/* C.split(i, bm) -> (bi, ii); C.split(j, bn) -> (bj, ji); the batch merged into bz. */
static Tiles block_tiles(Plan *p, AutoMatmul *c, int64_t bm, int64_t bn)
{
	Tensor *o = c->out;
	Tiles x = {.t = o->name, .bm = bm, .bn = bn};
	int nb = c->nbatch;
	x.bi = fresh_axis(p, x.t, "bi");
	x.ii = fresh_axis(p, x.t, "ii");
	x.bj = fresh_axis(p, x.t, "bj");
	x.ji = fresh_axis(p, x.t, "ji");
	d_split(p, x.t, o->root[nb]->name, bm, x.bi, x.ii);
	d_split(p, x.t, o->root[nb + 1]->name, bn, x.bj, x.ji);
	if (nb > 0) {
		x.bz = o->root[0]->name;
		for (int q = 1; q < nb; q++) {
			const char *m = fresh_axis(p, x.t, "bz");
			d_merge(p, x.t, x.bz, o->root[q]->name, m);
			x.bz = m;
		}
	}
	return x;
}

/* C's block loops bound: bz on blockIdx.z, bi on blockIdx.y, bj on blockIdx.x. */
static void bind_blocks(Plan *p, Tiles *x)
{
	if (x->bz)
		d_bind(p, x->t, x->bz, "blockIdx.z");
	d_bind(p, x->t, x->bi, "blockIdx.y");
	d_bind(p, x->t, x->bj, "blockIdx.x");
}

/* The accumulator: the output's register cache, or the lifted reduction (already local);
 * *k: its reduced index. */
static const char *accumulator(Plan *p, AutoMatmul *c, const char **k)
{
	Tensor *r = c->acc;
	if (c->acc == c->out) {
		const char *n = names_fresh(&p->names, arena_printf(p->a, "%s_acc", c->out->name));
		const char *mem = "local";
		d_directive(p, n, c->out->name, "cache_before", 1, &mem, 0, NULL);
		r = fusion_find_tensor(p->f, n);
	}
	*k = r && r->nroot == c->nbatch + 3 ? r->root[c->nbatch + 2]->name : "?";
	return r ? r->name : "?";
}

static void d_compute_at_tiles(Plan *p, const char *t, Tiles *x)
{
	const char *sh[3] = {x->bi, x->bj, x->bz};
	d_compute_at(p, t, x->t, x->bj, sh, x->bz ? 3 : 2);
}

/* A shared copy of a rows x cols tile (named row, col in the cache; col contiguous) by the
 * block's threads, in vectors of vec elements. c: the tensor-core schedule's warps, the
 * threads (tx, ty, tz) = (32, warps_x, warps_y) and vector e (row-major) going to thread
 * e % (32 warps); NULL: (16, 16), the FMA_BK rows of a k tile each going to one threadIdx.y
 * (krows), or vector e to thread e % 256. The rest unrolled. */
static void copy_tile(Plan *p, const char *s, const char *row, const char *col, int64_t vec,
		      AutoMatmul *c, bool krows, bool tuned)
{
	bool warps = c != NULL;
	const char *cc = fresh_axis(p, s, "kc"), *v = fresh_axis(p, s, "v");
	const char *u = fresh_axis(p, s, "u"), *tx = fresh_axis(p, s, "tx");
	const char *ty = row;
	d_split(p, s, col, vec, cc, v);
	if (krows) {
		d_split(p, s, cc, FMA_THREADS, u, tx);
	} else {
		const char *e = fresh_axis(p, s, "e"), *tl = fresh_axis(p, s, "tl");
		ty = fresh_axis(p, s, "ty");
		d_merge(p, s, row, cc, e);
		d_split(p, s, e, warps ? 32 * c->warps_x * c->warps_y : FMA_THREADS * FMA_THREADS,
			u, tl);
		if (warps) {
			const char *tw = fresh_axis(p, s, "tw"), *tz = fresh_axis(p, s, "tz");
			d_split(p, s, tl, 32, tw, tx);
			d_split(p, s, tw, c->warps_x, tz, ty);
			d_bind(p, s, tz, "threadIdx.z");
		} else {
			d_split(p, s, tl, FMA_THREADS, ty, tx);
		}
	}
	d_bind(p, s, ty, "threadIdx.y");
	d_bind(p, s, tx, "threadIdx.x");
	d_verb1(p, s, "unroll", u);
	if (tuned) {
		d_verb1(p, s, "vectorize", v);
		if (p->arch >= 80) /* else a plain vector copy, still circular-buffered */
			d_verb1(p, s, "cp_async", "cg");
	} else {
		d_verb1(p, s, "unroll", v);
	}
}

/* t.reorder(the axes of `axes` that are not NULL); at most 16 */
static void reorder_present(Plan *p, const char *t, const char **axes, int n)
{
	const char *order[16];
	int m = 0;
	for (int q = 0; q < n && m < 16; q++)
		if (axes[q])
			order[m++] = axes[q];
	d_reorder(p, t, order, m);
}

/* d_verb1 when the axis exists */
static void verb_present(Plan *p, const char *t, const char *verb, const char *ax)
{
	if (ax)
		d_verb1(p, t, verb, ax);
}

/* t's (C's or the accumulator's) block tile split into warps_y x warps_x warp tiles of
 * instruction tiles: w = {wy, mw, wx, nw, mo, m16, no, n8}, the rows ii -> (wy, mw) -> (wy,
 * mo, m16) and the columns ji -> (wx, nw) -> (wx, no, n8). A warp tile of 16 rows is the
 * instruction tile itself: mo is NULL and m16 is mw (a loop of one iteration there trips the
 * private_local check of the fragments). */
static void warp_tiles(Plan *p, const char *t, Tiles *x, AutoMatmul *c, const char **w)
{
	d_split(p, t, x->ii, x->bm / c->warps_y, w[0], w[1]);
	d_split(p, t, x->ji, x->bn / c->warps_x, w[2], w[3]);
	if (w[4])
		d_split(p, t, w[1], 16, w[4], w[5]);
	d_split(p, t, w[3], 8, w[6], w[7]);
}

static void schedule_mma(Plan *p, AutoMatmul *c)
{
	bool tuned = p->level == AUTO_TUNED;
	const char *k;
	const char *acc = accumulator(p, c, &k);
	const char *as = d_cache_after(p, c->a, "shared"), *bs = d_cache_after(p, c->b, "shared");
	/* a symbolic M: size variants with 32- and 64-row tiles for M <= 32 and M <= 64 (fewer
	 * instructions on zero-filled rows) */
	IrExpr *m = c->out->shape[c->nbatch];
	if (tuned && m->kind == EX_SIZE && m->size->bound == 0 && !p->bucket.sym)
		p->bucket = (Buckets){.sym = m->size, .bounds = short_m, .n = countof(short_m)};
	Tiles x = block_tiles(p, c, c->bm, c->bn);
	const char *t = x.t;
	const char *wy = fresh_axis(p, t, "wy"), *mw = fresh_axis(p, t, "mw");
	const char *wx = fresh_axis(p, t, "wx"), *nw = fresh_axis(p, t, "nw");
	const char *mo = c->bm / c->warps_y > 16 ? fresh_axis(p, t, "mo") : NULL;
	const char *m16 = mo ? fresh_axis(p, t, "m16") : mw;
	const char *no = fresh_axis(p, t, "no"), *n8 = fresh_axis(p, t, "n8");
	const char *w[] = {wy, mw, wx, nw, mo, m16, no, n8};
	/* C: [bz, bi, bj, wy, wx, mo, no, m16, n8] */
	warp_tiles(p, t, &x, c, w);
	const char *order[] = {x.bz, x.bi, x.bj, wy, wx, mo, no, m16, n8};
	reorder_present(p, t, order, 9);
	bind_blocks(p, &x);
	d_bind(p, t, wy, "threadIdx.z");
	d_bind(p, t, wx, "threadIdx.y");
	if (tuned && FUSC_MMA_RASTER > 0) {
		const char *ras[] = {x.bi, x.bj, arena_printf(p->a, "%d", FUSC_MMA_RASTER)};
		d_directive(p, NULL, t, "raster", 3, ras, 0, NULL);
	}
	const char *frag[] = {m16, n8};
	d_directive(p, NULL, t, "fragment", 2, frag, 0, NULL);
	/* each lane's two adjacent columns: one store (not when the rows of C may be odd: the
	 * product of padded operands, which runs for any N) */
	if (tuned && !p->f->padded_operands)
		d_verb1(p, t, "vectorize", arena_printf(p->a, "%s_c", n8));
	verb_present(p, t, "unroll", mo);
	d_verb1(p, t, "unroll", no);

	/* the accumulator: [blocks | ko, wy, wx, ks, mo, no, m16, n8, k16] */
	d_compute_at_tiles(p, acc, &x);
	const char *ko = fresh_axis(p, acc, "ko"), *kr = fresh_axis(p, acc, "kr");
	const char *ks = fresh_axis(p, acc, "ks"), *k16 = fresh_axis(p, acc, "k16");
	warp_tiles(p, acc, &x, c, w);
	d_split(p, acc, k, c->bk, ko, kr);
	d_split(p, acc, kr, 16, ks, k16);
	const char *aorder[] = {ko, wy, wx, ks, mo, no, m16, n8, k16};
	reorder_present(p, acc, aorder, 9);
	d_bind(p, acc, wy, "threadIdx.z");
	d_bind(p, acc, wx, "threadIdx.y");
	const char *mma[] = {"m16n8k16", "ldmatrix"};
	d_directive(p, NULL, acc, "mma", 2, mma, 0, NULL);
	d_verb1(p, acc, "unroll", ks);
	verb_present(p, acc, "unroll", mo);
	d_verb1(p, acc, "unroll", no);

	/* the operand tiles, BM x BK and BK x BN (a transposed one BK x BM or BN x BK: copied
	 * along its own contiguous dimension), at the k step */
	const char *sh[] = {ko};
	const char *rows[2][2] = {{x.ii, kr}, {kr, x.ji}}, *caches[2] = {as, bs};
	bool trans[2] = {c->a_trans, c->b_trans};
	int64_t tile[2][2] = {{c->bm, c->bk}, {c->bk, c->bn}};
	for (int q = 0; q < 2; q++) {
		int in = trans[q] ? 0 : 1; /* the contiguous dimension */
		d_compute_at(p, caches[q], acc, ko, sh, 1);
		copy_tile(p, caches[q], rows[q][1 - in], rows[q][in], 8, c, false, tuned);
		if (!tuned)
			continue;
		d_verb1(p, caches[q], "stages", arena_printf(p->a, "%lld", (long long)c->stages));
		/* rows padded by 16 bytes: ldmatrix's 8 row addresses fall in 8 bank groups */
		const char *pad[] = {"8", arena_printf(p->a, "%lld", (long long)tile[q][in])};
		d_directive(p, NULL, caches[q], "pad", 2, pad, 0, NULL);
	}
}

/* The FMA schedule of examples/gemm/gemm_f32.fus (see the file comment). */
static void schedule_fma(Plan *p, AutoMatmul *c)
{
	bool tuned = p->level == AUTO_TUNED;
	const char *k;
	const char *acc = accumulator(p, c, &k);
	const char *as = d_cache_after(p, c->a, "shared"), *bs = d_cache_after(p, c->b, "shared");
	/* register copies of As's column and Bs's row for one k, double-buffered */
	const char *al = NULL, *bl = NULL;
	if (tuned) {
		al = d_cache_after(p, fusion_find_tensor(p->f, as), "local");
		bl = d_cache_after(p, fusion_find_tensor(p->f, bs), "local");
	}
	Tiles x = block_tiles(p, c, FMA_TILE, FMA_TILE);
	const char *t = x.t;
	/* C: [bz, bi, bj, iu, ju, ty, tx, jv]: rows ty + 16 iu, columns 64 ju + 4 tx + jv */
	const char *iu = fresh_axis(p, t, "iu"), *ty = fresh_axis(p, t, "ty");
	const char *ju = fresh_axis(p, t, "ju"), *jr = fresh_axis(p, t, "jr");
	const char *tx = fresh_axis(p, t, "tx"), *jv = fresh_axis(p, t, "jv");
	d_split(p, t, x.ii, FMA_THREADS, iu, ty);
	d_split(p, t, x.ji, FMA_TILE / 2, ju, jr);
	d_split(p, t, jr, 4, tx, jv);
	const char *order[] = {x.bz, x.bi, x.bj, iu, ju, ty, tx, jv};
	reorder_present(p, t, order, 8);
	bind_blocks(p, &x);
	d_bind(p, t, ty, "threadIdx.y");
	d_bind(p, t, tx, "threadIdx.x");
	d_verb1(p, t, "unroll", iu); /* the accumulator is indexed by constants: registers */
	d_verb1(p, t, "unroll", ju);
	/* 4 columns per vector: 16 bytes of f32 (f64 would be 32: unrolled instead) */
	bool vec4 = tuned && dtype_size(c->out->dtype) <= 4;
	d_verb1(p, t, vec4 ? "vectorize" : "unroll", jv);

	/* the accumulator: [blocks | ko, ty, tx, ki, iu, ju, jv], or with A's fragment read along
	 * k (examples/gemm/sgemm_tuned.fus: a row-major f32 A) [blocks | ko, ty, tx, kq, kv, iu,
	 * ju, jv], ki = 4 kq + kv */
	bool ak = tuned && !c->a_trans && dtype_size(c->a->dtype) == 4;
	d_compute_at_tiles(p, acc, &x);
	const char *ko = fresh_axis(p, acc, "ko"), *ki = fresh_axis(p, acc, "ki");
	const char *kq = ak ? fresh_axis(p, acc, "kq") : NULL, *kv = ki;
	d_split(p, acc, x.ii, FMA_THREADS, iu, ty);
	d_split(p, acc, x.ji, FMA_TILE / 2, ju, jr);
	d_split(p, acc, jr, 4, tx, jv);
	d_split(p, acc, k, FMA_BK, ko, ki);
	if (ak) {
		kv = fresh_axis(p, acc, "kv");
		d_split(p, acc, ki, FMA_AK, kq, kv);
	}
	const char *aorder[] = {ko, ty, tx, kq, kv, iu, ju, jv};
	reorder_present(p, acc, aorder, 8);
	d_bind(p, acc, ty, "threadIdx.y");
	d_bind(p, acc, tx, "threadIdx.x");
	const char *unrolled[] = {iu, ju, jv, kv, kq};
	for (int q = 0; q < 5; q++)
		verb_present(p, acc, "unroll", unrolled[q]);
	const char *at = acc;
	const char *sh[] = {ko};
	if (tuned) {
		const char *shk[] = {ko, ty, tx, kq ? kq : ki, kv};
		if (ak) {
			/* A's 8 rows x FMA_AK k as 8 16-byte vectors at each kq */
			d_compute_at(p, al, acc, kq, shk, 4);
			d_verb1(p, al, "unroll", iu);
			d_verb1(p, al, "vectorize", kv);
		} else {
			d_compute_at(p, al, acc, ki, shk, 4);
			d_verb1(p, al, "unroll", iu);
			d_directive(p, NULL, al, "double_buffer", 0, NULL, 0, NULL);
		}
		d_compute_at(p, bl, acc, kv, shk, ak ? 5 : 4);
		d_verb1(p, bl, "unroll", ju);
		/* B[j, k]: the register copy of Bs keeps B's layout, jv is not contiguous in it */
		bool bvec = !c->b_trans && dtype_size(c->b->dtype) <= 4;
		d_verb1(p, bl, bvec ? "vectorize" : "unroll", jv);
		d_directive(p, NULL, bl, "double_buffer", 0, NULL, 0, NULL);
	}
	/* the operand tiles, 128 x 16 and 16 x 128 (a transposed one: its contiguous
	 * dimension innermost), at the k step */
	const char *rows[2][2] = {{x.ii, ki}, {ki, x.ji}};
	const char *caches[2] = {as, bs}, *readers[2] = {al, bl};
	Tensor *ops[2] = {c->a, c->b};
	bool trans[2] = {c->a_trans, c->b_trans};
	for (int q = 0; q < 2; q++) {
		const char *s = caches[q];
		d_compute_at(p, s, tuned ? readers[q] : at, ko, sh, 1);
		const char *r = rows[q][trans[q] ? 1 : 0], *col = rows[q][trans[q] ? 0 : 1];
		copy_tile(p, s, r, col, 16 / dtype_size(ops[q]->dtype), NULL, r == ki, tuned);
		if (tuned)
			d_verb1(p, s, "stages", arena_printf(p->a, "%d", FMA_STAGES));
	}
	/* 64-bit indices: the kernel's 32-bit copy is the slower one (SGEMM 4096^3 on the H200:
	 * 40.3 against 42.3 TFLOP/s, 147 against 181 registers; bench/RESULTS.md, session 9) */
	if (tuned)
		d_directive(p, NULL, t, "index64", 0, NULL, 0, NULL);
}

bool auto_matmul(Plan *p, Tensor *o)
{
	AutoMatmul c;
	if (!auto_matmul_classify(p->f, o, &c))
		return false;
	p->at = o->span;
	if (c.mma && p->arch >= 80)
		schedule_mma(p, &c);
	else
		schedule_fma(p, &c);
	return true;
}
