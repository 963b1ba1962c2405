/* raster.c: the last pass: the block order of `t.raster(rows, cols, G)` (docs/schedule.md,
 * Fusion.raster_*).
 *
 * Every pass before this one reads a block index (EX_PAR blockIdx.*) as the index of the tile
 * the block computes. Here the two block types of the raster get locals, assigned at the top
 * of the kernel from the hardware's indices, and every read of those types reads the locals:
 *
 *   lin   = s * ns + f              f, s: the two types, the hardware's faster one (x before y
 *                                   before z) first; ns: f's launch extent
 *   gc    = min(G, nbi)             nbi, nbj: the launch extents of rows' and cols' types
 *   first = lin / (gc * nbj) * gc   the group's first row
 *   g     = min(nbi - first, gc)    its rows: the last group is shorter when G does not divide nbi
 *   r     = lin - first * nbj       the block's place in its group
 *   rows  = first + r % g
 *   cols  = r / g
 *
 * so consecutive blocks of the launch (the hardware starts them in that order) take g row
 * tiles of one column before the next column: a wave of blocks reads g row panels of A and
 * few column panels of B instead of every column panel (CUTLASS's threadblock swizzle,
 * Triton's GROUP_M). It is a permutation of the grid: the blocks of a group have r in
 * [0, g * nbj) once each, and (r % g, r / g) runs over [0, g) x [0, nbj) once; with
 * lin < nbi * nbj, first < nbi, so g >= 1 (and gc * nbj >= 1 wherever a block runs). So every
 * tile is computed once, by one block, and every fact the earlier passes proved of a block
 * index (0 <= index < its launch extent) holds of the locals. gc keeps gc * nbj below the
 * number of blocks (32-bit index variants, passes/index32.c).
 */
#include "passes/passes.h"

static IrExpr *extent(Kernel *k, ParType p)
{
	return k->launch[p] ? k->launch[p] : ir_int(k->arena, 1);
}

typedef struct Raster {
	ParType par[2];  /* rows', cols' types */
	Var *var[2];     /* their locals */
} Raster;

/* An ir_rewrite function: a read of a raster type -> its local. */
static IrExpr *to_local(Arena *a, IrExpr *e, void *ctx)
{
	Raster *r = ctx;
	for (int q = 0; q < 2; q++) {
		if (e->kind != EX_PAR || e->par != r->par[q])
			continue;
		IrExpr *v = ir_var(a, r->var[q]);
		return e->dtype == DT_I64 ? v : ir_cast(a, e->dtype, v);
	}
	return e;
}

/* `let v = value;` in front of *tail's statement; returns the new tail. */
static Stmt **let(Kernel *k, Stmt **tail, Var *v, IrExpr *value)
{
	Stmt *s = NEW(k->arena, Stmt);
	s->kind = KS_LET;
	s->let.var = v;
	s->let.value = value;
	vec_push(k->arena, &k->locals, v);
	s->next = *tail;
	*tail = s;
	return &s->next;
}

static Var *local(Kernel *k, const char *name)
{
	return kir_new_var(k, name, DT_I64);
}

bool pass_raster(Kernel *k, Diag *d)
{
	(void)d;
	Fusion *f = k->fusion;
	if (!f->raster_rows)
		return true;
	Arena *a = k->arena;
	Raster r = {{f->raster_rows->par, f->raster_cols->par}, {0}};
	ParType fast = r.par[0] < r.par[1] ? r.par[0] : r.par[1];
	ParType slow = r.par[0] < r.par[1] ? r.par[1] : r.par[0];
	IrExpr *nbi = extent(k, r.par[0]), *nbj = extent(k, r.par[1]);
	Var *lin = local(k, "raster_lin"), *first = local(k, "raster_first");
	Var *g = local(k, "raster_g"), *rest = local(k, "raster_r");
	r.var[0] = local(k, f->raster_rows->name);
	r.var[1] = local(k, f->raster_cols->name);
	/* the reads first (the lets below read the hardware's indices) */
	ir_stmts_rewrite(a, k->body, to_local, &r);
	IrExpr *gc = ir_op(a, OP_MIN, DT_I64, ir_int(a, f->raster_group), nbi);
	IrExpr *vlin = ir_op(a, OP_ADD, DT_I64, ir_op(a, OP_MUL, DT_I64, ir_par(a, slow), extent(k, fast)),
			     ir_par(a, fast));
	IrExpr *vfirst = ir_op(a, OP_MUL, DT_I64,
			       ir_op(a, OP_DIV, DT_I64, ir_var(a, lin), ir_op(a, OP_MUL, DT_I64, gc, nbj)), gc);
	IrExpr *vg = ir_op(a, OP_MIN, DT_I64, ir_op(a, OP_SUB, DT_I64, nbi, ir_var(a, first)), gc);
	IrExpr *vrest = ir_op(a, OP_SUB, DT_I64, ir_var(a, lin),
			      ir_op(a, OP_MUL, DT_I64, ir_var(a, first), nbj));
	IrExpr *vrows = ir_op(a, OP_ADD, DT_I64, ir_var(a, first),
			      ir_op(a, OP_MOD, DT_I64, ir_var(a, rest), ir_var(a, g)));
	IrExpr *vcols = ir_op(a, OP_DIV, DT_I64, ir_var(a, rest), ir_var(a, g));
	Stmt **tail = &k->body;
	tail = let(k, tail, lin, vlin);
	tail = let(k, tail, first, vfirst);
	tail = let(k, tail, g, vg);
	tail = let(k, tail, rest, vrest);
	tail = let(k, tail, r.var[0], vrows);
	let(k, tail, r.var[1], vcols);
	return true;
}
