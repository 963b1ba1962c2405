/* mma.c: the tensor-core directives (docs/tensor_cores.md).
 *
 * `Cl.mma(m16n8k16)` puts the three innermost axes of a contraction's register accumulator
 * (`Cl = C.cache_before(local)` of `C[i, j] = sum(k: A[i, k] * B[k, j])`, either operand
 * possibly transposed, A[k, i] or B[j, k] (passes/mma.c places each lane's elements through
 * the operand's offsets, whatever their order), or a register
 * intermediate such a contraction defines, whose one reader applies an epilogue; batch
 * indices first allowed; operands read from shared caches) on one warp-wide instruction. It checks the pattern, the dtypes, the operand
 * layout and the tile, then gives the m x n tile the accumulator's fragment layout with
 * ordinary transforms:
 *
 *   split(m, 8) -> (m_h, m_g); split(n, 2) -> (n_t, n_c); [m_g, n_t, m_h, n_c, k];
 *   merge(m_g, n_t) -> lane; bind(lane, threadIdx.x)
 *
 * so lane = 4 * (row % 8) + col / 2 holds rows g, g + 8 and columns 2t, 2t + 1 (the C
 * fragment of ir/mma.c), and the lowering until passes/mma.c sees a per-thread nest that
 * computes exactly the lane's accumulator elements: `for m_h, n_c, k: Cl += As * Bs`. The
 * reader of the accumulator takes the same layout with `C.fragment(m, n)`, so each lane
 * stores the elements it holds (private_local checks that they agree).
 */
#include <string.h>

#include "scheduler/scheduler.h"

/* The root axis x comes from through splits only (NULL through a merge). */
static Axis *split_root(Axis *x)
{
	while (x && (x->kind == AX_SPLIT_INNER || x->kind == AX_SPLIT_OUTER))
		x = x->from[0];
	return x && x->kind == AX_ROOT ? x : NULL;
}

static bool const_extent(Axis *x, int64_t want)
{
	int64_t v;
	return ir_is_const(x->extent, &v) && v == want;
}

static IrExpr *strip_casts(IrExpr *e)
{
	while (e->kind == EX_CAST)
		e = e->args[0];
	return e;
}

/* Is access e subscripted by exactly the root axes (b..., r0, r1) of its reader t, with b...
 * t's first ndim - 2 roots (the batch indices of a batched product)? */
static bool subscripts(Tensor *t, IrExpr *e, Axis *r0, Axis *r1)
{
	int nb = t->ndim - 2;
	if (e->nargs != nb + 2)
		return false;
	for (int q = 0; q < nb + 2; q++) {
		Axis *want = q < nb ? t->root[q] : q == nb ? r0 : r1;
		if (e->args[q]->kind != EX_AXIS || e->args[q]->axis != want)
			return false;
	}
	return true;
}

/* Can t accumulate an mma: a register cache_before of the output, or a register
 * intermediate (a reduction lifted out of an expression, `gelu(sum(k: ...) + bias[j])`), whose
 * one reader then stores it (and applies the rest of its expression) from the fragments. */
static bool accumulator_kind(Tensor *t)
{
	return t->sched.mem == MEM_LOCAL &&
	       (t->sched.cache_before || (t->kind == TK_INTERMEDIATE && !t->sched.cache_of));
}

/* The one stored tensor that reads t, looking through inlined intermediates (NULL: none,
 * or several). */
static Tensor *stored_reader(Tensor *t, int depth)
{
	Tensor *found = NULL;
	for (int i = 0; i < t->readers.len && depth < 64; i++) {
		Tensor *u = VEC_AT(t->readers, Tensor, i);
		if (u->kind == TK_INTERMEDIATE && u->sched.inlined && !tensor_is_reduction(u))
			u = stored_reader(u, depth + 1);
		if (!u || (found && found != u))
			return NULL;
		found = u;
	}
	return found;
}

/* The tensor that stores accumulator t: the output it caches, or its one stored reader. */
static Tensor *accumulator_reader(Tensor *t)
{
	return t->sched.cache_before ? t->sched.cache_of : stored_reader(t, 0);
}

/* The fragment transform of the 16 x 8 tile (m, n) of t (the header comment): the lane axis
 * bound to threadIdx.x, then the row half and the column bit as serial axes. */
static bool fragment_axes(Sched *s, Tensor *t, Axis *m, Axis *n, Span at, TensorMma *out)
{
	int pm = tensor_axis_pos(t, m), pn = tensor_axis_pos(t, n);
	if (pn != pm + 1) {
		diag_error(s->d, at, "the tile axes '%s' and '%s' must be adjacent, rows first", m->name,
			   n->name);
		return false;
	}
	if (m->reduction || n->reduction) {
		diag_error(s->d, at, "the tile axes of a fragment are the rows and columns of '%s', not reduction axes",
			   t->name);
		return false;
	}
	if (!const_extent(m, 16) || !const_extent(n, 8)) {
		Axis *bad = const_extent(m, 16) ? n : m;
		diag_error(s->d, at, "the accumulator fragment is a 16 x 8 tile; '%s' must have extent %d (split it so)",
			   bad->name, bad == m ? 16 : 8);
		return false;
	}
	if (!sched_axis_changeable(s, t, m, at, true) || !sched_axis_changeable(s, t, n, at, true))
		return false;
	for (int i = 0; i < t->ndomain; i++) {
		if (t->domain[i]->par == PT_TIDX) {
			diag_error(s->d, at, "threadIdx.x is the lane of the warp in a fragment, but '%s' binds it already (to '%s')",
				   t->name, t->domain[i]->name);
			diag_note(s->d, t->domain[i]->par_span, "bound here");
			return false;
		}
	}
	const char *mh = arena_printf(s->a, "%s_h", m->name), *mg = arena_printf(s->a, "%s_g", m->name);
	const char *nt = arena_printf(s->a, "%s_t", n->name), *nc = arena_printf(s->a, "%s_c", n->name);
	if (!sched_split(s->a, s->d, t, m, 8, mh, mg, at) ||
	    !sched_split(s->a, s->d, t, n, 2, nt, nc, at))
		return false;
	/* [m_h, m_g, n_t, n_c] -> [m_g, n_t, m_h, n_c] */
	Axis **d = arena_alloc(s->a, sizeof(Axis *) * (size_t)t->ndomain);
	memcpy(d, t->domain, sizeof(Axis *) * (size_t)t->ndomain);
	Axis *h = d[pm], *g = d[pm + 1];
	d[pm] = g;
	d[pm + 1] = d[pm + 2];
	d[pm + 2] = h;
	t->domain = d;
	out->mh = h;
	out->nc = d[pm + 3];
	if (!sched_merge(s->a, s->d, t, d[pm], d[pm + 1], "lane", at))
		return false;
	out->lane = t->domain[pm];
	return sched_bind(s->f, s->d, t, out->lane, PT_TIDX, at);
}

bool sched_fragment(Sched *s, Tensor *t, AstDirective *dir)
{
	Axis *m = sched_arg_axis(s, t, &dir->args[0]), *n = sched_arg_axis(s, t, &dir->args[1]);
	if (!m || !n)
		return false;
	if (t->sched.fragment_span.file || t->sched.mma) {
		diag_error(s->d, dir->span, "'%s' has its fragment layout already", t->name);
		return false;
	}
	TensorMma axes = {0};
	if (!fragment_axes(s, t, m, n, dir->span, &axes))
		return false;
	t->sched.fragment_span = dir->span;
	return true;
}

bool sched_mma(Sched *s, Tensor *t, AstDirective *dir)
{
	const MmaInstr *in = mma_instr_by_name(dir->args[0].name);
	if (dir->nargs > 1 && strcmp(dir->args[1].name, "ldmatrix") != 0) {
		diag_error(s->d, dir->args[1].span, "unknown mma option '%s'; the option is ldmatrix (operands loaded by ldmatrix.x4 and ldmatrix.x2, with .trans where the tile's layout needs it)",
			   dir->args[1].name);
		return false;
	}
	if (!in) {
		diag_error(s->d, dir->args[0].span, "unknown mma instruction '%s'; fusc knows m16n8k16 (mma.sync, f16/bf16 operands, f32 accumulators)",
			   dir->args[0].name);
		return false;
	}
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *c = s->f->tensors[i];
		if (c->sched.cache_of == t && c->sched.cache_before) {
			diag_error(s->d, dir->span, "'%s' computes '%s': apply the mma to '%s' ('%s.mma(%s)')",
				   c->name, t->name, c->name, c->name, in->name);
			return false;
		}
	}
	if (t->sched.mma || t->sched.fragment_span.file) {
		diag_error(s->d, dir->span, "'%s' has its fragment layout already", t->name);
		return false;
	}
	IrExpr *def = t->def, *body = def && def->kind == EX_REDUCE ? strip_casts(def->args[0]) : NULL;
	IrExpr *x = NULL, *y = NULL;
	if (body && body->kind == EX_OP && body->op == OP_MUL) {
		x = strip_casts(body->args[0]);
		y = strip_casts(body->args[1]);
	}
	if (!body || def->red != RED_SUM || t->ndim < 2 || t->nroot != t->ndim + 1 || !x || !y ||
	    x->kind != EX_ACCESS || y->kind != EX_ACCESS) {
		diag_error(s->d, dir->verb.span, "mma needs a contraction 'C[i, j] = sum(k: A[i, k] * B[k, j])'; '%s' is not one",
			   t->name);
		diag_note(s->d, t->def_span, "'%s' is defined here", t->name);
		return false;
	}
	if (!accumulator_kind(t)) {
		diag_error(s->d, dir->span, "the mma accumulates in registers: apply it to the output's register cache ('%sl = %s.cache_before(local)') or to a register intermediate, not to '%s'",
			   t->name, t->name, t->name);
		return false;
	}
	if (t->dtype != DT_F32) {
		diag_error(s->d, dir->span, "mma.%s accumulates in f32, but '%s' is %s: make the output f32 (f16/bf16 outputs are not supported yet)",
			   in->name, t->name, dtype_name(t->dtype));
		return false;
	}
	Axis *ri = t->root[t->ndim - 2], *rj = t->root[t->ndim - 1], *rk = t->root[t->ndim];
	/* A is the operand that holds i: A[i, k] or A[k, i] (transposed), B[k, j] or B[j, k] */
	if (subscripts(t, y, ri, rk) || subscripts(t, y, rk, ri)) {
		IrExpr *z = x;
		x = y;
		y = z;
	}
	if (!(subscripts(t, x, ri, rk) || subscripts(t, x, rk, ri)) ||
	    !(subscripts(t, y, rk, rj) || subscripts(t, y, rj, rk))) {
		diag_error(s->d, dir->span, "mma needs the operands subscripted A[%s, %s] (or A[%s, %s]) and B[%s, %s] (or B[%s, %s])",
			   ri->name, rk->name, rk->name, ri->name, rk->name, rj->name, rj->name, rk->name);
		diag_note(s->d, t->def_span, "'%s' is defined here", t->name);
		return false;
	}
	Tensor *ops[2] = {x->tensor, y->tensor};
	for (int i = 0; i < 2; i++) {
		Tensor *o = ops[i];
		if (o->sched.mem == MEM_LOCAL && o->sched.cache_of) {
			diag_error(s->d, dir->span, "'%s' is a register cache of an operand: the mma loads its fragments from shared memory itself; register caches of the operands (ldmatrix fragments) are not supported yet",
				   o->name);
			return false;
		}
		if (o->sched.mem != MEM_SHARED || !o->sched.cache_of || o->sched.cache_before) {
			diag_error(s->d, dir->span, "the mma reads its operands from shared memory, but '%s' reads '%s' from %s memory: cache it first ('%ss = %s.cache_after(shared)' before the mma)",
				   t->name, o->name, mem_name(o->sched.mem), o->name, o->name);
			return false;
		}
		if (o->dtype != DT_F16 && o->dtype != DT_BF16) {
			diag_error(s->d, dir->span, "mma.%s multiplies f16 or bf16 operands, but '%s' is %s",
				   in->name, o->name, dtype_name(o->dtype));
			return false;
		}
	}
	if (ops[0]->dtype != ops[1]->dtype) {
		diag_error(s->d, dir->span, "mma.%s needs both operands of one dtype, but '%s' is %s and '%s' is %s",
			   in->name, ops[0]->name, dtype_name(ops[0]->dtype), ops[1]->name,
			   dtype_name(ops[1]->dtype));
		return false;
	}
	int nd = t->ndomain;
	Axis *m = nd >= 3 ? t->domain[nd - 3] : NULL, *n = nd >= 3 ? t->domain[nd - 2] : NULL;
	Axis *k = nd >= 3 ? t->domain[nd - 1] : NULL;
	if (!m || split_root(m) != ri || split_root(n) != rj || split_root(k) != rk ||
	    !const_extent(m, in->m) || !const_extent(n, in->n) || !const_extent(k, in->k)) {
		diag_error(s->d, dir->span, "the three innermost axes of '%s' must be the instruction's %d x %d x %d tile: rows of %s, columns of %s, then %s (made by splits)",
			   t->name, in->m, in->n, in->k, ri->name, rj->name, rk->name);
		Buf b = {0};
		for (int i = 0; i < nd; i++)
			buf_printf(&b, "%s%s", i ? ", " : "", t->domain[i]->name);
		diag_note(s->d, (Span){0}, "the axes of '%s' are [%s]", t->name, b.s);
		buf_free(&b);
		return false;
	}
	if (!sched_axis_changeable(s, t, k, dir->span, false))
		return false;
	/* every split that k is (part of) the inner side of holds whole tiles of k: otherwise its
	 * remainder would end inside an instruction, past what the operand buffers hold */
	for (Axis *x = k; x->kind != AX_ROOT; x = x->from[0]) {
		if (x != k && x->kind == AX_SPLIT_INNER && x->factor % in->k) {
			diag_error(s->d, dir->span, "the mma's %d values of k would cross the end of the split of '%s' by %lld: split k by a multiple of %d",
				   in->k, x->from[0]->name, (long long)x->factor, in->k);
			return false;
		}
	}
	if (k->par != PT_SERIAL || k->vectorize) {
		diag_error(s->d, dir->span, "the k axis '%s' of the mma must be a plain loop (it is %s)",
			   k->name, k->par != PT_SERIAL ? par_name(k->par) : "vectorized");
		return false;
	}
	TensorMma *mma = NEW(s->a, TensorMma);
	mma->instr = in;
	mma->span = dir->span;
	mma->ldmatrix = dir->nargs > 1;
	mma->a = ops[0];
	mma->b = ops[1];
	mma->k = k;
	if (!fragment_axes(s, t, m, n, dir->span, mma))
		return false;
	t->sched.mma = mma;
	ops[0]->sched.zero_fill = ops[1]->sched.zero_fill = true;
	return true;
}

/* The final schedule: the accumulator's reader stores it in the same fragment layout. */
bool sched_check_mma(Sched *s)
{
	bool ok = true;
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *t = s->f->tensors[i];
		if (!t->sched.mma)
			continue;
		Tensor *c = accumulator_reader(t);
		TensorMma *m = t->sched.mma;
		int nd = t->ndomain;
		Axis *want[4] = {m->lane, m->mh, m->nc, m->k};
		bool kept = nd >= 4;
		for (int j = 0; kept && j < 4; j++)
			kept = t->domain[nd - 4 + j] == want[j];
		if (!kept) {
			diag_error(s->d, m->span, "the axes the mma made ('%s', '%s', '%s', then '%s') must stay the innermost axes of '%s', as they are",
				   m->lane->name, m->mh->name, m->nc->name, m->k->name, t->name);
			ok = false;
		} else if (!c) {
			diag_error(s->d, m->span, "the mma accumulator '%s' must have one reader (through inlined tensors), which stores its fragments",
				   t->name);
			ok = false;
		} else if (t->sched.ca_tensor != c) {
			diag_error(s->d, m->span, "the mma accumulator '%s' must be computed at its %s '%s' ('%s.compute_at(%s, ...)')",
				   t->name, t->sched.cache_before ? "output" : "reader", c->name, t->name, c->name);
			ok = false;
		} else if (!c->sched.fragment_span.file) {
			diag_error(s->d, t->sched.mma->span, "'%s' stores the accumulator '%s' that the lanes of a warp hold: give it the same layout with '%s.fragment(m, n)' on its 16 x 8 tile axes",
				   c->name, t->name, c->name);
			ok = false;
		}
	}
	return ok;
}
