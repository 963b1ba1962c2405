/* segment.c: segmentation (docs/auto_schedule.md, "Segmentation"). A fusion that no single
 * kernel computes well is split into segments: ordinary fusions, each scheduled and lowered
 * like any other, that the launcher runs in order, with the values one segment stores and a
 * later one reads in a workspace it allocates (Fusion.segments, Fusion.seg_buffers).
 *
 * The boundaries are the reductions that a grid reduction computes well and that another
 * tensor of the fusion reads (a grid-reduced tensor cannot be read in the kernel that reduces
 * it: docs/reductions.md): a whole-tensor (0-d) reduction, an outer or middle-axis reduction
 * (a column mean; reads without the column index too: v[k] in sum(k: v[k] * W[k, j])), a row
 * reduction over a size symbol marked long (SizeSym.above: rows split over blocks), and a row
 * reduction that a tensor reads outside its row group (row_boundary). Each boundary is the
 * one output of its own segment, and so is an output that the outer, middle-axis or whole-tensor
 * schedule takes alone but not beside other outputs (split_output: row and column sums of
 * one x, two kernels); the fusion's other outputs go into one segment per level (the number
 * of boundaries on the longest chain of reads before them). A segment holds the statements
 * its outputs need, boundaries of earlier segments becoming its inputs.
 *
 * The segments are built as ASTs from the fusion's own (its statements, unchanged, and new
 * signatures), so sema, the automatic scheduler with its fallback levels and size variants,
 * and the lowering all run on them as on a fusion a user wrote. Two rewrites: a reduction
 * that sema lifted out of an expression (Tensor.lifted_from) and is a boundary becomes a
 * statement of its own (named as sema named it) and the expression reads it; a 0-d boundary
 * is an input `m: f32[1]` of a later segment, read as m[0] (0-d inputs are scalars).
 * Before any of this, a reduction over indices that do not collapse (sum(n, l: x[n, c, l]))
 * is written as its row partials and their reduction (split_reductions).
 */
#include <string.h>

#include "scheduler/auto_plan.h"

/* The last subscripts of e's memory reads (rank >= 1, through recomputed tensors) as a mask
 * of the roots of the tensor being defined (map: a read tensor's root k is that tensor's
 * root map[k], -1 for anything else); bit 31: a read of another reduction, a constant or
 * anything else as the last subscript. */
static unsigned last_subscripts(IrExpr *e, const int *map, int depth)
{
	if (!e)
		return 0;
	if (depth > 64 || e->kind == EX_REDUCE)
		return 1u << 31;
	unsigned m = 0;
	for (int i = 0; i < e->nargs && e->kind != EX_ACCESS; i++)
		m |= last_subscripts(e->args[i], map, depth);
	if (e->kind != EX_ACCESS)
		return m;
	Tensor *x = e->tensor;
	int pos[16];
	for (int k = 0; k < e->nargs && k < 16; k++) {
		IrExpr *s = e->args[k];
		pos[k] = s->kind == EX_AXIS && s->axis->root_index >= 0 && map[s->axis->root_index] >= 0
				 ? map[s->axis->root_index] : -1;
	}
	if (e->nargs > 16)
		return 1u << 31;
	bool recomputed = x->def && !tensor_is_reduction(x) &&
			  (x->sched.inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
	if (recomputed)
		return last_subscripts(x->def, pos, depth + 1);
	if (x->ndim == 0)
		return 0;
	int last = pos[x->ndim - 1];
	return last >= 0 && last < 31 ? 1u << last : 1u << 31;
}

unsigned segment_read_roots(Tensor *r)
{
	if (!r->def || r->def->kind != EX_REDUCE || r->nroot > 16)
		return 1u << 31;
	int map[16];
	for (int k = 0; k < r->nroot; k++)
		map[k] = k;
	return last_subscripts(r->def->args[0], map, 0);
}

bool segment_long_row(Tensor *r)
{
	if (!collapse_long_row(r))
		return false;
	unsigned m = segment_read_roots(r);
	return (m & 1u << (r->nroot - 1)) && !(m & 1u << 31);
}

/* How e reads r directly (not through recomputed tensors), as bits: 1 it does, 2 with a
 * reduced root of u (a root past u->ndim) as a subscript. */
static unsigned reads_directly(IrExpr *e, Tensor *r, Tensor *u)
{
	if (!e)
		return 0;
	unsigned m = 0;
	if (e->kind == EX_ACCESS && e->tensor == r) {
		m = 1;
		for (int k = 0; k < e->nargs; k++)
			if (e->args[k]->kind == EX_AXIS && e->args[k]->axis->root_index >= u->ndim)
				m |= 2;
	}
	for (int i = 0; i < e->nargs; i++)
		m |= reads_directly(e->args[i], r, u);
	return m;
}

/* Is r a row reduction (its reduced indices collapse, the last is the last subscript of its
 * reads) that a tensor reads outside r's row group: over a row of another length (y[b, h] =
 * ... / sum(t: m[b, t]), H against T), or a reduction over one of r's kept indices (s[c] =
 * sum(n: p[n, c]) with p[n, c] = sum(l: x[n, c, l]))? The general schedule would take one
 * thread per row (or per column), the reader's row serial; as a segment of its own r is a
 * row group, its reader a broadcast, an outer or middle-axis reduction, or rows of their own.
 * Not when r reads a reduction (its segment would recompute it, the general schedule's
 * again). */
static bool row_boundary(Fusion *f, Tensor *r)
{
	if (r->ndim == 0 || r->nroot <= r->ndim || r->nroot > AUTO_MAX_RANK ||
	    auto_reads_reductions(r->def, 0) || segment_read_roots(r) != 1u << (r->nroot - 1) ||
	    !auto_collapsible(r, r->ndim, r->nroot))
		return false;
	int nred = r->nroot - r->ndim;
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *u = f->tensors[i];
		unsigned m = u != r ? reads_directly(u->def, r, u) : 0;
		if (!m)
			continue;
		if ((m & 2) && tensor_is_reduction(u))
			return true;
		/* u's last indices are not a row of r's (a row group's reader walks the row) */
		bool same = u->nroot >= nred;
		for (int k = 0; k < nred && same; k++)
			same = dims_equal(u->root[u->nroot - nred + k]->extent, r->root[r->ndim + k]->extent);
		if (u->nroot > r->ndim && !same)
			return true;
	}
	return false;
}

/* The roots' order in the first read with every root of the reduction among its subscripts
 * (ctx: int[2 + AUTO_MAX_RANK]: its rank, 0 while there is none, then the number of roots,
 * then the read's roots). */
static bool full_read(void *ctx, Tensor *x, const int *pos)
{
	int *out = ctx;
	unsigned m = 0;
	for (int k = 0; k < x->ndim; k++)
		m |= pos[k] >= 0 ? 1u << pos[k] : 0;
	if (!out[0] && m == (1u << out[1]) - 1) {
		out[0] = x->ndim;
		memcpy(out + 2, pos, sizeof(int) * (size_t)x->ndim);
	}
	return true;
}

/* r's full_read (read[0] 0: none). */
static bool first_full_read(Tensor *r, int *read)
{
	int map[AUTO_MAX_RANK];
	read[0] = 0;
	read[1] = r->nroot;
	if (r->nroot > AUTO_MAX_RANK || !r->def || r->def->kind != EX_REDUCE)
		return false;
	for (int k = 0; k < r->nroot; k++)
		map[k] = k;
	return auto_walk_reads(r->def->args[0], map, full_read, read) && read[0];
}

/* Does r read a tensor with every root of r among its subscripts (x[b, t, h] in a middle-axis
 * sum over t, W[k, j] in y[j] = sum(k: v[k] * W[k, j]); a matrix product has none: its
 * segment would be the matmul class's alone, and its epilogue is its own)? */
static bool reads_all_roots(Tensor *r)
{
	int read[2 + AUTO_MAX_RANK];
	return first_full_read(r, read);
}

/* Is r a reduction that its own segment computes well (a grid reduction, a row group) and
 * that another tensor reads? */
static bool boundary(Fusion *f, Tensor *r)
{
	if (!tensor_is_reduction(r) || r->kind == TK_INPUT || !read_by_other(f, r))
		return false;
	if (r->ndim == 0 || segment_long_row(r))
		return true;
	if (r->nroot == r->ndim + 1 && segment_read_roots(r) == 1u << (r->ndim - 1))
		return true;
	/* what the outer class takes as a segment's one output: reads without the column index
	 * too (v[k] in y[j] = sum(k: v[k] * W[k, j]) + b[j]) */
	AutoClass c = auto_outer_class_alone(f, r);
	return ((c == AC_OUTER || c == AC_MIDDLE) && reads_all_roots(r)) || row_boundary(f, r);
}

/* Is output t of a fusion of several one that the outer, middle-axis or whole-tensor
 * schedule takes when it is the one output of its fusion? With other outputs beside it, it
 * would get the general schedule (one thread per column, or one block for a total: the
 * outputs share a launch), so it is a segment of its own (rowcol: r[i] = sum(j: x[i, j])
 * beside c[j] = sum(i: x[i, j]); a 0-d sum beside a pointwise output). Row groups are never
 * split: their outputs share the rows schedule. */
static bool split_output(Fusion *f, Tensor *t)
{
	if (f->noutputs < 2 || t->kind != TK_OUTPUT || !tensor_is_reduction(t) ||
	    read_by_other(f, t))
		return false;
	AutoClass c = auto_outer_class_alone(f, t);
	return c == AC_OUTER || c == AC_MIDDLE || c == AC_WHOLE;
}

/* ---- the plan -------------------------------------------------------------------------- */

static bool mentions_size(IrExpr *e, SizeSym *z)
{
	if (!e)
		return false;
	if (e->kind == EX_SIZE && e->size == z)
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (mentions_size(e->args[i], z))
			return true;
	return false;
}

static bool declares(Vec *params, const char *sym)
{
	for (int i = 0; i < params->len; i++) {
		AstParam *p = VEC_AT(*params, AstParam, i);
		for (int k = 0; k < p->ndims; k++)
			if (p->dims[k].sym && strcmp(p->dims[k].sym, sym) == 0)
				return true;
	}
	return false;
}

typedef struct Seg Seg;
static void row_partials(Seg *s, Diag *d, Tensor *t);

struct Seg {
	Arena *a;
	Fusion *f;
	AstFusion *af;
	int arch;           /* the target sm (AutoOptions.arch) */
	const char *tag;    /* appended to the segments' names (NULL: none) */
	bool *bnd;          /* per tensor index: a boundary */
	bool *own;          /* per tensor index: a segment of its own (a boundary, a split output) */
	int *level;         /* per tensor index */
	int *buf;           /* per tensor index: its workspace buffer, or -1 */
	/* the segment being built */
	bool *out;          /* computed by it */
	bool *need;         /* its statements (outputs included) */
	bool *in;           /* boundaries of earlier segments it reads */
	bool *lift;         /* lifted reductions it writes as statements of their own */
};

static int tensor_pos(Fusion *f, Tensor *t)
{
	for (int i = 0; i < f->ntensors; i++)
		if (f->tensors[i] == t)
			return i;
	for (int i = 0; i < f->noutputs; i++) /* an output never defined (sema failed) */
		if (f->outputs[i] == t)
			return -1;
	return -1;
}

static void mark_reads(Seg *s, IrExpr *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->nargs; i++)
		mark_reads(s, e->args[i]);
	if (e->kind != EX_ACCESS)
		return;
	int u = tensor_pos(s->f, e->tensor);
	if (u < 0)
		return;
	if (s->bnd[u] && !s->out[u])
		s->in[u] = true;
	else
		s->need[u] = true;
}

/* The largest level of a tensor read by e (a boundary counts one more). */
static int read_level(Seg *s, IrExpr *e)
{
	int l = 0;
	if (!e)
		return 0;
	for (int i = 0; i < e->nargs; i++) {
		int k = read_level(s, e->args[i]);
		l = k > l ? k : l;
	}
	if (e->kind == EX_ACCESS && e->tensor->kind != TK_INPUT) {
		int u = tensor_pos(s->f, e->tensor);
		int k = u < 0 ? 0 : s->level[u] + s->bnd[u];
		l = k > l ? k : l;
	}
	return l;
}

static AstDim *dims_of(Seg *s, Tensor *t, int *n)
{
	*n = t->ndim ? t->ndim : 1;
	AstDim *d = arena_alloc(s->a, sizeof(AstDim) * (size_t)*n);
	if (!t->ndim) {
		d[0] = *ast_dim_int(s->a, t->span, 1);
		return d;
	}
	for (int k = 0; k < t->ndim; k++) {
		IrExpr *e = t->shape[k];
		if (e->kind == EX_SIZE)
			d[k] = *ast_dim_sym(s->a, t->span, e->size->name);
		else if (e->kind == EX_INT)
			d[k] = *ast_dim_int(s->a, t->span, e->ival);
		else
			return NULL;
	}
	return d;
}

static bool same_shape(Tensor *x, Tensor *y)
{
	if (x->ndim != y->ndim)
		return false;
	for (int k = 0; k < x->ndim; k++)
		if (!ir_equal(x->shape[k], y->shape[k]))
			return false;
	return true;
}

/* A declaration of workspace tensor t: an output (0-d allowed) or an input (a 0-d one as
 * [1]). NULL when a dimension is not a size or a constant. */
static AstParam *declare(Seg *s, Tensor *t, bool output)
{
	int n;
	AstDim *d = dims_of(s, t, &n);
	if (!d)
		return NULL;
	AstParam *p = NEW(s->a, AstParam);
	p->name = (AstName){t->name, t->span};
	p->dtype = (AstName){dtype_name(t->dtype), t->span};
	p->dims = d;
	p->ndims = output && !t->ndim ? 0 : n;
	p->span = t->span;
	return p;
}

/* The AST node of lifted reduction t in its statement's right-hand side: sema numbers the
 * lifted reductions of a statement in the order it finishes them (post-order, the top
 * reduction not counted), STMT_REDk. */
static AstExpr *find_lifted(Arena *a, AstExpr *e, const char *stmt, const char *name,
			    int *count, bool top)
{
	for (int i = 0; i < e->nargs; i++) {
		AstExpr *r = find_lifted(a, e->args[i], stmt, name, count, false);
		if (r)
			return r;
	}
	if (e->kind != AE_REDUCE || top)
		return NULL;
	return strcmp(arena_printf(a, "%s_%s%d", stmt, e->name, (*count)++), name) == 0 ? e : NULL;
}

static AstStmt *stmt_of(AstFusion *af, const char *lhs)
{
	for (int i = 0; i < af->nstmts; i++)
		if (strcmp(af->stmts[i]->lhs.name, lhs) == 0)
			return af->stmts[i];
	return NULL;
}

/* Does lifted reduction t read an index of a reduction around it (not one of its
 * statement's)? Then it cannot be a statement of its own. */
static bool nested_lift(Fusion *f, Tensor *t)
{
	AstStmt *st = t->lifted_from ? stmt_of(f->ast, t->lifted_from->name) : NULL;
	for (int k = 0; st && k < t->ndim; k++) {
		bool lhs = false;
		for (int q = 0; q < st->nidx; q++)
			lhs |= strcmp(st->idx[q].name, t->root[k]->name) == 0;
		if (!lhs)
			return true;
	}
	return false;
}

/* The lifted boundary's AST reduction, or NULL. */
static AstExpr *lifted_node(Seg *s, Tensor *t)
{
	AstStmt *st = t->lifted_from ? stmt_of(s->af, t->lifted_from->name) : NULL;
	int count = 0;
	return st ? find_lifted(s->a, st->rhs, st->lhs.name, t->name, &count,
				st->rhs->kind == AE_REDUCE) : NULL;
}

/* t[its kept roots], t[0] when 0-d. */
static AstExpr *read_of(Seg *s, Tensor *t, Span at)
{
	Vec args = {0};
	for (int k = 0; k < t->ndim; k++)
		vec_push(s->a, &args, ast_name(s->a, at, t->root[k]->name));
	if (!t->ndim)
		vec_push(s->a, &args, ast_int(s->a, at, 0));
	return ast_access(s->a, at, (AstName){t->name, at}, &args);
}

static AstExpr *rewrite_args(Seg *s, AstExpr *e);

/* e with the segment's inputs read as inputs: a lifted boundary's reduction becomes a read
 * of it, a 0-d boundary's name a read of element 0; and a lifted reduction written as a
 * statement of its own (Seg.lift) a read of it too. */
static AstExpr *rewrite(Seg *s, AstExpr *e)
{
	for (int i = 0; i < s->f->ntensors; i++) {
		Tensor *t = s->f->tensors[i];
		if (!s->in[i] && !s->lift[i])
			continue;
		if (t->lifted_from && lifted_node(s, t) == e)
			return read_of(s, t, e->span);
		if (s->in[i] && !t->ndim && e->kind == AE_NAME && strcmp(e->name, t->name) == 0)
			return read_of(s, t, e->span);
	}
	return rewrite_args(s, e);
}

static AstExpr *rewrite_args(Seg *s, AstExpr *e)
{
	if (!e->nargs)
		return e;
	AstExpr *c = NEW(s->a, AstExpr);
	*c = *e;
	c->args = arena_alloc(s->a, sizeof(AstExpr *) * (size_t)e->nargs);
	for (int i = 0; i < e->nargs; i++) {
		c->args[i] = rewrite(s, e->args[i]);
		if (c->args[i]->depth >= c->depth)
			c->depth = c->args[i]->depth + 1;
	}
	return c;
}

static AstStmt *stmt_new(Seg *s, AstStmt *like, const char *lhs, Tensor *t, AstExpr *rhs)
{
	AstStmt *st = NEW(s->a, AstStmt);
	*st = *like;
	st->lhs = (AstName){lhs, like->lhs.span};
	if (t) { /* a lifted reduction: its kept roots are the statement's indices */
		st->nidx = t->ndim;
		st->is_scalar = !t->ndim;
		st->idx = arena_alloc(s->a, sizeof(AstName) * (size_t)(t->ndim ? t->ndim : 1));
		for (int k = 0; k < t->ndim; k++)
			st->idx[k] = (AstName){t->root[k]->name, like->lhs.span};
	}
	st->rhs = t ? rewrite_args(s, rhs) : rewrite(s, rhs); /* t's own reduction stays */
	return st;
}

/* The rounded sizes of a padded product's segments (segment_pad_matmul): the segment's size
 * named name[q] is the fusion's size index[q] rounded up to a multiple of 8; q is the
 * product's extent (RD_K, RD_N, RD_M), name[q] NULL when it is not rounded. */
enum { RD_K, RD_N, RD_M, RD_COUNT };
typedef struct Rounded {
	const char *name[RD_COUNT];
	int index[RD_COUNT];
} Rounded;

/* The next segment of f (appended to f->segments): the fusion of these declarations and
 * statements, its signature's entries from args (SegArg*), scheduled automatically; NULL when
 * it does not pass sema or schedule (no diagnostic is kept). Its sizes are f's of the same
 * names, or r's. */
static Segment *make_segment(Arena *a, Diag *d, Fusion *f, Vec *params, Vec *outs, Vec *stmts,
			     Vec *args, int arch, const Rounded *r, const char *tag)
{
	AstName name = {arena_printf(a, "%s%s", fusion_segment_name(a, f, f->name, f->segments.len),
				     tag ? tag : ""), f->span};
	AstFusion *af = ast_fusion(a, f->span, name, params, outs, stmts);
	DiagMark m = diag_mark(d);
	Fusion *g = sema_fusion(a, d, af);
	if (!g || g->failed || diag_error_count(d) > m.errors || g->nsig != args->len) {
		diag_rollback(d, m);
		return NULL;
	}
	g->segment_of = f;
	g->padded_operands = r != NULL;
	Segment *seg = NEW(a, Segment);
	seg->fusion = g;
	seg->args = arena_alloc(a, sizeof(SegArg) * (size_t)(args->len + 1));
	for (int i = 0; i < args->len; i++)
		seg->args[i] = *VEC_AT(*args, SegArg, i);
	seg->sizes = arena_alloc(a, sizeof(int) * (size_t)(g->nsizes + 1));
	seg->multiple = r ? arena_alloc(a, sizeof(int) * (size_t)(g->nsizes + 1)) : NULL;
	for (int i = 0; i < g->nsizes; i++) {
		seg->sizes[i] = -1;
		for (int k = 0; k < f->nsizes; k++)
			if (strcmp(f->sizes[k]->name, g->sizes[i]->name) == 0) {
				seg->sizes[i] = k;
				g->sizes[i]->above = f->sizes[k]->above;
				g->sizes[i]->bound = f->sizes[k]->bound;
			}
		for (int q = 0; r && q < RD_COUNT; q++)
			if (r->name[q] && strcmp(r->name[q], g->sizes[i]->name) == 0) {
				seg->sizes[i] = r->index[q];
				seg->multiple[i] = 8;
			}
		if (seg->sizes[i] < 0) {
			diag_rollback(d, m);
			return NULL;
		}
	}
	collapse_bound_segment(a, f, g, seg->sizes);
	/* in f's plan while it is scheduled: its lowering asks what the plan guarantees
	 * (segment_guarantees) */
	vec_push(a, &f->segments, seg);
	AutoOptions o = {.arch = arch};
	bool ok = auto_schedule_with(a, d, g, &o) && diag_error_count(d) == m.errors;
	diag_rollback(d, m);
	if (!ok)
		f->segments.len--;
	return ok ? seg : NULL;
}

/* The segment computing the tensors marked in s->out, as a scheduled fusion; NULL when it
 * cannot be built or scheduled (no diagnostic is kept). */
static Segment *build_segment(Seg *s, Diag *d)
{
	Fusion *f = s->f;
	int n = f->ntensors;
	memset(s->need, 0, sizeof(bool) * (size_t)n);
	memset(s->in, 0, sizeof(bool) * (size_t)n);
	for (int i = 0; i < n; i++)
		s->need[i] = s->out[i];
	for (int i = n - 1; i >= 0; i--)
		if (s->need[i])
			mark_reads(s, f->tensors[i]->def);
	/* A statement whose lifted boundary this segment reads would have its other lifted
	 * reductions numbered anew by sema (y_sum1 becoming y_sum0, the input's name): each is
	 * written as a statement of its own, under its name, first. */
	if (!s->lift)
		s->lift = arena_alloc(s->a, sizeof(bool) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		Tensor *t = f->tensors[i];
		s->lift[i] = false;
		if (!s->need[i] || s->out[i] || !t->lifted_from || nested_lift(f, t))
			continue;
		for (int k = 0; k < n && !s->lift[i]; k++)
			s->lift[i] = s->in[k] && f->tensors[k]->lifted_from == t->lifted_from;
	}
	Vec params = {0}, outs = {0}, stmts = {0}, args = {0}, oargs = {0};
	SegArg *sa;
	/* the fusion's parameters: every scalar, the inputs it reads */
	for (int i = 0; i < s->af->nparams; i++) {
		AstParam *p = s->af->params[i];
		Tensor *t = p->ndims ? fusion_find_tensor(f, p->name.name) : NULL;
		if (t && !s->need[tensor_pos(f, t)])
			continue;
		vec_push(s->a, &params, p);
		sa = NEW(s->a, SegArg);
		*sa = (SegArg){'s', i};
		vec_push(s->a, &args, sa);
	}
	/* boundaries of earlier segments */
	for (int i = 0; i < n; i++) {
		if (!s->in[i])
			continue;
		Tensor *t = f->tensors[i];
		AstParam *p = declare(s, t, false);
		if (!p)
			return NULL;
		vec_push(s->a, &params, p);
		sa = NEW(s->a, SegArg);
		*sa = t->kind == TK_OUTPUT ? (SegArg){'s', t->param_index} : (SegArg){'w', s->buf[i]};
		vec_push(s->a, &args, sa);
	}
	/* its outputs: the fusion's own in their order, then the workspace it stores */
	for (int k = 0; k < s->af->nouts; k++) {
		int i = tensor_pos(f, f->outputs[k]);
		if (i < 0 || !s->out[i])
			continue;
		vec_push(s->a, &outs, s->af->outs[k]);
		sa = NEW(s->a, SegArg);
		*sa = (SegArg){'s', s->af->nparams + k};
		vec_push(s->a, &oargs, sa);
	}
	for (int i = 0; i < n; i++) {
		if (!s->out[i] || f->tensors[i]->kind == TK_OUTPUT)
			continue;
		AstParam *p = declare(s, f->tensors[i], true);
		if (!p)
			return NULL;
		vec_push(s->a, &outs, p);
		sa = NEW(s->a, SegArg);
		*sa = (SegArg){'w', s->buf[i]};
		vec_push(s->a, &oargs, sa);
	}
	/* a size the statements use but no declaration has comes with an input that has it (its
	 * pointer unused): sizes are known from the signature */
	for (int z = 0; z < f->nsizes; z++) {
		bool used = false;
		for (int i = 0; i < n && !used; i++)
			used = s->need[i] && mentions_size(f->tensors[i]->def, f->sizes[z]);
		if (!used || declares(&params, f->sizes[z]->name) || declares(&outs, f->sizes[z]->name))
			continue;
		for (int i = 0; i < s->af->nparams; i++) {
			AstParam *p = s->af->params[i];
			Vec one = {0};
			vec_push(s->a, &one, p);
			if (!p->ndims || !declares(&one, f->sizes[z]->name))
				continue;
			vec_push(s->a, &params, p);
			sa = NEW(s->a, SegArg);
			*sa = (SegArg){'s', i};
			vec_push(s->a, &args, sa);
			break;
		}
	}
	for (int i = 0; i < oargs.len; i++)
		vec_push(s->a, &args, oargs.items[i]);
	/* the statements, in the fusion's order */
	for (int j = 0; j < s->af->nstmts; j++) {
		AstStmt *st = s->af->stmts[j];
		for (int i = 0; i < n; i++) {
			Tensor *t = f->tensors[i];
			if ((s->out[i] || s->lift[i]) && t->lifted_from &&
			    strcmp(t->lifted_from->name, st->lhs.name) == 0) {
				AstExpr *r = lifted_node(s, t);
				if (!r)
					return NULL;
				vec_push(s->a, &stmts, stmt_new(s, st, t->name, t, r));
			}
		}
		int i = tensor_pos(f, fusion_find_tensor(f, st->lhs.name));
		if (i >= 0 && s->need[i] && !(f->tensors[i]->lifted_from && s->out[i]))
			vec_push(s->a, &stmts, stmt_new(s, st, st->lhs.name, NULL, st->rhs));
	}
	return make_segment(s->a, d, f, &params, &outs, &stmts, &args, s->arch, NULL, s->tag);
}

static Fusion *split_reductions(Arena *a, Diag *d, Fusion *f);

/* f's segments (its plan), when it has a boundary or a split output. */
static bool segment_plan(Arena *a, Diag *d, Fusion *f, int arch)
{
	int n = f->ntensors, nown = 0, top = 0;
	Seg s = {.a = a, .f = f, .af = f->ast, .arch = arch};
	s.bnd = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
	s.own = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
	s.level = arena_alloc(a, sizeof(int) * (size_t)(n + 1));
	s.buf = arena_alloc(a, sizeof(int) * (size_t)(n + 1));
	s.out = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
	s.need = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
	s.in = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
	Vec bufs = {0};
	for (int i = 0; i < n; i++) {
		Tensor *t = f->tensors[i];
		s.buf[i] = -1;
		s.bnd[i] = boundary(f, t) && !nested_lift(f, t);
		s.level[i] = read_level(&s, t->def);
		top = s.level[i] > top ? s.level[i] : top;
		s.own[i] = s.bnd[i] || split_output(f, t);
		nown += s.own[i];
		if (s.bnd[i] && t->kind != TK_OUTPUT) {
			s.buf[i] = bufs.len;
			vec_push(a, &bufs, t);
		}
	}
	if (!nown)
		return false;
	/* per level: each boundary and split output alone; the other outputs together, those of
	 * one shape in one segment (outputs share a launch: a 0-d one beside an empty one would
	 * not be written) */
	Vec before = f->segments;
	f->segments = (Vec){0}; /* make_segment appends to it */
	bool *done = arena_alloc(a, sizeof(bool) * (size_t)(n + 1));
	for (int l = 0; l <= top; l++) {
		for (int i = 0; i < n; i++) {
			Tensor *t = f->tensors[i];
			if (done[i] || s.level[i] != l || !(s.bnd[i] || t->kind == TK_OUTPUT))
				continue;
			memset(s.out, 0, sizeof(bool) * (size_t)n);
			s.out[i] = done[i] = true;
			for (int k = i + 1; k < n && !s.own[i]; k++)
				if (!s.own[k] && !done[k] && s.level[k] == l &&
				    f->tensors[k]->kind == TK_OUTPUT && same_shape(t, f->tensors[k]))
					s.out[k] = done[k] = true;
			if (!build_segment(&s, d)) {
				f->segments = before;
				return false;
			}
		}
	}
	Vec segs = f->segments;
	f->seg_buffers = bufs;
	f->auto_scheduled = true;
	/* the class: each segment's, in order (--emit=schedule prints it) */
	f->auto_class = "segments:";
	for (int i = 0; i < segs.len; i++) {
		const char *c = VEC_AT(segs, Segment, i)->fusion->auto_class;
		f->auto_class = arena_printf(a, "%s%s %s", f->auto_class, i ? ";" : "", c ? c : "?");
	}
	/* a total beside row outputs: row partials, so that x is read once */
	for (int i = 0; i < n && nown == 1 && !bufs.len; i++)
		if (s.own[i] && !s.bnd[i]) {
			row_partials(&s, d, f->tensors[i]);
			break;
		}
	return true;
}

bool segment_fusion(Arena *a, Diag *d, Fusion *f, int arch)
{
	if (f->segment_of || !f->ast || f->failed ||
	    (f->ast_schedule && !f->ast_schedule->is_auto))
		return false;
	/* a reduction over indices that do not collapse, written as two: f's plan is the
	 * rewritten fusion's when it segments */
	Fusion *g = split_reductions(a, d, f);
	if (g) {
		Fusion keep = *f;
		*f = *g;
		if (segment_plan(a, d, f, arch))
			return true;
		*f = keep;
	}
	return segment_plan(a, d, f, arch);
}

/* ---- padded operands (docs/tensor_cores.md, "Rows that are not a multiple of 8") ------- */

static bool expr_uses(AstExpr *e, const char *n)
{
	if (e->name && strcmp(e->name, n) == 0)
		return true;
	for (int i = 0; i < e->nidx; i++)
		if (strcmp(e->idx[i].name, n) == 0)
			return true;
	for (int i = 0; i < e->nargs; i++)
		if (expr_uses(e->args[i], n))
			return true;
	return false;
}

static bool decl_uses(AstParam *p, const char *n)
{
	bool u = strcmp(p->name.name, n) == 0;
	for (int k = 0; k < p->ndims && !u; k++)
		u = p->dims[k].sym && strcmp(p->dims[k].sym, n) == 0;
	return u;
}

/* Is name n taken in af (a declaration, a size, a statement's tensor, an index)? */
static bool fusion_uses(AstFusion *af, const char *n)
{
	for (int i = 0; i < af->nparams; i++)
		if (decl_uses(af->params[i], n))
			return true;
	for (int i = 0; i < af->nouts; i++)
		if (decl_uses(af->outs[i], n))
			return true;
	for (int i = 0; i < af->nstmts; i++) {
		AstStmt *st = af->stmts[i];
		bool u = strcmp(st->lhs.name, n) == 0 || expr_uses(st->rhs, n);
		for (int k = 0; k < st->nidx && !u; k++)
			u = strcmp(st->idx[k].name, n) == 0;
		if (u)
			return true;
	}
	return false;
}

/* base, or base2, base3, ...: a name af does not use */
static const char *fresh_name(Arena *a, AstFusion *af, const char *base)
{
	const char *n = base;
	for (int i = 2; fusion_uses(af, n); i++)
		n = arena_printf(a, "%s%d", base, i);
	return n;
}

static int64_t round8(int64_t v)
{
	return v % 8 ? v + (8 - v % 8) : v;
}

/* x's declaration renamed, its dimensions in mask `pad` rounded up to a multiple of 8: a size
 * symbol becomes the padded one of r (r->name[kn[d]]: RD_K, RD_N or RD_M), a constant is
 * rounded. */
static AstParam *padded_decl(Arena *a, AstParam *x, const char *name, unsigned pad,
			     const Rounded *r, const int *kn)
{
	AstParam *p = NEW(a, AstParam);
	*p = *x;
	p->name = (AstName){name, x->span};
	p->dims = arena_alloc(a, sizeof(AstDim) * (size_t)x->ndims);
	for (int d = 0; d < x->ndims; d++) {
		p->dims[d] = x->dims[d];
		if (!(pad >> d & 1))
			continue;
		if (x->dims[d].sym)
			p->dims[d].sym = r->name[kn[d]];
		else
			p->dims[d].value = round8(x->dims[d].value);
	}
	return p;
}

/* X_pad[p0, p1, ...] = p1 < K && ... ? X[p0, p1, ...] : 0 over X_pad's dimensions: the
 * copy of x with the dimensions in `pad` zero-filled to X_pad's extents. */
static AstStmt *pad_stmt(Arena *a, AstFusion *af, AstParam *x, const char *out, unsigned pad)
{
	Span at = x->span;
	AstStmt *st = NEW(a, AstStmt);
	st->lhs = (AstName){out, at};
	st->span = at;
	st->nidx = x->ndims;
	st->idx = arena_alloc(a, sizeof(AstName) * (size_t)x->ndims);
	Vec args = {0};
	AstExpr *cond = NULL;
	for (int d = 0; d < x->ndims; d++) {
		const char *n = fresh_name(a, af, arena_printf(a, "p%d_", d));
		st->idx[d] = (AstName){n, at};
		vec_push(a, &args, ast_name(a, at, n));
		if (!(pad >> d & 1))
			continue;
		AstExpr *bound = x->dims[d].sym ? ast_name(a, at, x->dims[d].sym)
						: ast_int(a, at, x->dims[d].value);
		AstExpr *c = ast_binary(a, at, OP_LT, ast_name(a, at, n), bound);
		cond = cond ? ast_binary(a, at, OP_AND, cond, c) : c;
	}
	AstExpr *rd = ast_access(a, at, x->name, &args);
	rd->lenient = pad;
	st->rhs = ast_ternary(a, at, cond, rd, ast_int(a, at, 0));
	return st;
}

/* e with the reads of from[q] reading to[q] (NULL: unchanged), lenient in mask len[q] */
static AstExpr *rename_reads(Arena *a, AstExpr *e, const char **from, const char **to,
			     const unsigned *len)
{
	AstExpr *c = NEW(a, AstExpr);
	*c = *e;
	for (int q = 0; q < 2 && e->kind == AE_ACCESS; q++)
		if (to[q] && strcmp(e->name, from[q]) == 0) {
			c->name = to[q];
			c->lenient = len[q];
		}
	if (e->nargs) {
		c->args = arena_alloc(a, sizeof(AstExpr *) * (size_t)e->nargs);
		for (int i = 0; i < e->nargs; i++)
			c->args[i] = rename_reads(a, e->args[i], from, to, len);
	}
	return c;
}

static AstParam *param_named(AstFusion *af, const char *n, int *pos)
{
	for (int i = 0; i < af->nparams; i++)
		if (strcmp(af->params[i]->name.name, n) == 0) {
			*pos = i;
			return af->params[i];
		}
	return NULL;
}

static SegArg *seg_arg(Arena *a, char from, int index)
{
	SegArg *x = NEW(a, SegArg);
	*x = (SegArg){from, index};
	return x;
}

/* The workspace buffer of x's padded copy: x's shape with the dimensions in `pad` rounded. */
static Tensor *pad_buffer(Arena *a, Tensor *x, const char *name, unsigned pad)
{
	Tensor *t = tensor_buffer(a, name, x->dtype, MEM_GLOBAL, x->shape[0], x->span);
	t->ndim = x->ndim;
	t->shape = arena_alloc(a, sizeof(IrExpr *) * (size_t)x->ndim);
	for (int d = 0; d < x->ndim; d++)
		t->shape[d] = pad >> d & 1
			? ix_mul(a, ix_ceildiv(a, NULL, x->shape[d], ir_int(a, 8)), ir_int(a, 8))
			: x->shape[d];
	return t;
}

/* Does a dimension of this extent break the 16-byte copies as a row length (a size, which
 * may be anything, or a constant that is not a multiple of 8)? */
static bool unaligned(const AstDim *x)
{
	return x->sym || x->value % 8;
}

bool segment_pad_matmul(Arena *a, Diag *d, Fusion *f, int arch)
{
	if (f->segment_of || f->segments.len || !f->ast || f->failed || arch < 80)
		return false;
	DiagMark m = diag_mark(d);
	Fusion *p = sema_fusion(a, d, f->ast);
	diag_rollback(d, m);
	AutoMatmul c;
	if (!p || p->failed || p->noutputs != 1 || !auto_matmul_classify(p, p->outputs[0], &c) ||
	    !c.mma)
		return false;
	AstFusion *af = f->ast;
	int nb = c.nbatch, pa = -1, pb = -1;
	AstParam *xa = param_named(af, c.a->name, &pa), *xb = param_named(af, c.b->name, &pb);
	if (!xa || !xb || xa->ndims != nb + 2 || xb->ndims != nb + 2)
		return false;
	/* where each extent is in A[.., i, k] or A[.., k, i] and B[.., k, j] or B[.., j, k]
	 * (dim[q][0]: A's dimension, [1]: B's; -1: none); the last is the contiguous one */
	int dim[RD_COUNT][2] = {
		[RD_K] = {nb + !c.a_trans, nb + c.b_trans},
		[RD_N] = {-1, nb + !c.b_trans},
		[RD_M] = {nb + c.a_trans, -1},
	};
	AstDim *ka = &xa->dims[dim[RD_K][0]], *kb = &xb->dims[dim[RD_K][1]];
	bool same_k = ka->sym ? kb->sym && strcmp(ka->sym, kb->sym) == 0
			      : !kb->sym && ka->value == kb->value;
	if (!same_k)
		return false;
	/* the extents to round: those an operand's rows run along (its last dimension) that may
	 * not be multiples of 8; K in both operands then (their k ranges agree) */
	AstDim *ext[RD_COUNT] = {ka, &xb->dims[dim[RD_N][1]], &xa->dims[dim[RD_M][0]]};
	bool round[RD_COUNT];
	for (int q = 0; q < RD_COUNT; q++)
		round[q] = unaligned(ext[q]) && (dim[q][0] == nb + 1 || dim[q][1] == nb + 1);
	if (!round[RD_K] && !round[RD_N] && !round[RD_M])
		return false; /* the tensor-core kernel's rows are always aligned */
	/* the padded sizes: K_pad (K rounded up to a multiple of 8), N_pad, M_pad, one per
	 * size symbol */
	Rounded r = {{NULL, NULL, NULL}, {-1, -1, -1}};
	for (int q = 0; q < RD_COUNT; q++) {
		if (!round[q] || !ext[q]->sym)
			continue;
		SizeSym *z = NULL;
		for (int i = 0; i < p->nsizes; i++)
			if (strcmp(p->sizes[i]->name, ext[q]->sym) == 0)
				z = p->sizes[i];
		if (!z)
			return false;
		r.index[q] = z->index;
		for (int e = 0; e < q && !r.name[q]; e++)
			if (r.name[e] && r.index[e] == z->index)
				r.name[q] = r.name[e];
		if (!r.name[q])
			r.name[q] = fresh_name(a, af, arena_printf(a, "%s_pad", z->name));
	}
	/* each operand's rounded dimensions (masks[o]), which padded size each takes (kn[o]),
	 * and those the product reads leniently (len[o]: all but K, whose range is the padded
	 * one in both) */
	unsigned masks[2] = {0, 0}, len[2] = {0, 0};
	int kn[2][IR_MAX_DIMS + 2] = {{0}};
	for (int q = 0; q < RD_COUNT; q++)
		for (int o = 0; o < 2; o++) {
			int x = dim[q][o];
			if (x < 0)
				continue;
			kn[o][x] = q;
			masks[o] |= round[q] ? 1u << x : 0;
			len[o] |= round[q] && q != RD_K ? 1u << x : 0;
		}
	AstParam *xs[2] = {xa, xb};
	const char *from[2] = {xa->name.name, xb->name.name}, *to[2] = {NULL, NULL};
	AstParam *decl[2] = {NULL, NULL};
	for (int o = 0; o < 2; o++) {
		if (!masks[o])
			continue; /* its rows are aligned: read as it is */
		to[o] = fresh_name(a, af, arena_printf(a, "%s_pad", from[o]));
		decl[o] = padded_decl(a, xs[o], to[o], masks[o], &r, kn[o]);
	}
	int pos[2] = {pa, pb};
	Tensor *ops[2] = {c.a, c.b};
	Vec bufs = {0};
	int buf[2] = {-1, -1};
	for (int q = 0; q < 2; q++) {
		if (!to[q])
			continue;
		Vec params = {0}, outs = {0}, stmts = {0}, args = {0};
		vec_push(a, &params, xs[q]);
		vec_push(a, &args, seg_arg(a, 's', pos[q]));
		vec_push(a, &outs, decl[q]);
		buf[q] = bufs.len;
		vec_push(a, &args, seg_arg(a, 'w', buf[q]));
		vec_push(a, &bufs, pad_buffer(a, ops[q], to[q], masks[q]));
		vec_push(a, &stmts, pad_stmt(a, af, xs[q], to[q], masks[q]));
		if (!make_segment(a, d, p, &params, &outs, &stmts, &args, arch, &r, NULL))
			return false;
	}
	/* the product (and its epilogue) on the copies: their padded rows of M and N are never
	 * read */
	Vec params = {0}, outs = {0}, stmts = {0}, args = {0};
	for (int i = 0; i < af->nparams; i++) {
		int q = i == pa ? 0 : i == pb ? 1 : -1;
		bool w = q >= 0 && to[q];
		vec_push(a, &params, w ? decl[q] : af->params[i]);
		vec_push(a, &args, w ? seg_arg(a, 'w', buf[q]) : seg_arg(a, 's', i));
	}
	for (int k = 0; k < af->nouts; k++) {
		vec_push(a, &outs, af->outs[k]);
		vec_push(a, &args, seg_arg(a, 's', af->nparams + k));
	}
	for (int i = 0; i < af->nstmts; i++) {
		AstStmt *st = NEW(a, AstStmt);
		*st = *af->stmts[i];
		st->rhs = rename_reads(a, st->rhs, from, to, len);
		vec_push(a, &stmts, st);
	}
	if (!make_segment(a, d, p, &params, &outs, &stmts, &args, arch, &r, NULL))
		return false;
	p->seg_buffers = bufs;
	p->auto_scheduled = true;
	p->auto_class = "segments: padded copies; matmul";
	f->pad_plan = p;
	return true;
}

/* ---- a total beside row outputs: row partials (docs/auto_schedule.md, "A total beside
 * row outputs") ----------------------------------------------------------------------------
 * mixed_out: y[i, j] = x[i, j] * w[j] beside t = sum(i, j: x[i, j] * w[j]) is two segments
 * that each read x (segment_fusion). Written as
 *   t_rows[i] = sum(j: x[i, j] * w[j]);   (a row reduction: y's row group, one kernel)
 *   t = sum(i: t_rows[i]);                (a total of M values)
 * x is read once: the first segment stores y and each row's partial (row_companions), the
 * second sums the partials. Rows longer than long_rows would run one block a row with no
 * long-row copy (segments get none), so a symbolic row length makes this a size variant
 * (the plan NAME_segments_N65536) before the fusion's own plan. */
enum { ROW_PARTIAL_MAX = 65536 };

/* The row length of t = red(i.., j: ...): j's extent, a constant (*n) or a size symbol
 * (*z); false otherwise or past ROW_PARTIAL_MAX. */
static bool partial_row_len(Tensor *t, int64_t *n, SizeSym **z)
{
	IrExpr *e = t->root[t->nroot - 1]->extent;
	*z = NULL;
	if (ir_is_const(e, n))
		return *n <= ROW_PARTIAL_MAX;
	if (e->kind != EX_SIZE || e->size->bound > 0 || e->size->above > 0 || e->size->prod)
		return false;
	*z = e->size;
	return true;
}

/* af with statement st replaced by the two statements part and rest. */
static AstFusion *with_partials(Arena *a, AstFusion *af, AstStmt *st, AstStmt *part,
				AstStmt *rest)
{
	Vec params = {0}, outs = {0}, stmts = {0};
	for (int i = 0; i < af->nparams; i++)
		vec_push(a, &params, af->params[i]);
	for (int i = 0; i < af->nouts; i++)
		vec_push(a, &outs, af->outs[i]);
	for (int i = 0; i < af->nstmts; i++) {
		if (af->stmts[i] == st)
			vec_push(a, &stmts, part);
		vec_push(a, &stmts, af->stmts[i] == st ? rest : af->stmts[i]);
	}
	return ast_fusion(a, af->span, af->name, &params, &outs, &stmts);
}

/* af with total t's statement written as the row partials' two statements (NULL when it is
 * not `t = red(i.., j: body)`); *rows: the partials' name. */
static AstFusion *partial_ast(Arena *a, AstFusion *af, Tensor *t, const char **rows)
{
	AstStmt *st = stmt_of(af, t->name);
	if (!st || !st->is_scalar || st->rhs->kind != AE_REDUCE || st->rhs->nidx < 2)
		return NULL;
	AstExpr *red = st->rhs;
	Span at = red->span;
	int k = red->nidx - 1;
	*rows = fresh_name(a, af, arena_printf(a, "%s_rows", t->name));
	AstStmt *part = NEW(a, AstStmt), *tot = NEW(a, AstStmt);
	*part = *st;
	part->lhs = (AstName){*rows, st->lhs.span};
	part->is_scalar = false;
	part->nidx = k;
	part->idx = red->idx;
	Vec last = {0}, outer = {0}, sub = {0};
	vec_push(a, &last, &red->idx[k]);
	part->rhs = ast_reduce(a, at, (AstName){red->name, red->name_span}, &last, red->args[0]);
	for (int q = 0; q < k; q++) {
		vec_push(a, &outer, &red->idx[q]);
		vec_push(a, &sub, ast_name(a, at, red->idx[q].name));
	}
	*tot = *st;
	tot->rhs = ast_reduce(a, at, (AstName){red->name, red->name_span}, &outer,
			      ast_access(a, at, (AstName){*rows, at}, &sub));
	return with_partials(a, af, st, part, tot);
}

/* f's plan when total t (its one segment of its own, no boundary) takes row partials beside
 * the other outputs (s: f's segmentation): a size variant of f, or f's plan itself for a
 * constant row length; nothing changes when the other outputs and the partials are not one
 * row group (one kernel) or a segment fails. */
static void row_partials(Seg *s, Diag *d, Tensor *t)
{
	Arena *a = s->a;
	Fusion *f = s->f;
	int64_t n;
	SizeSym *z;
	const char *rows;
	AstFusion *af = NULL;
	if (f->variants.len || auto_outer_class_alone(f, t) != AC_WHOLE || !partial_row_len(t, &n, &z))
		return;
	for (int i = 0; i < f->nsizes; i++)
		if (f->sizes[i]->bound > 0 || f->sizes[i]->above > 0 || f->sizes[i]->prod)
			return;
	if (!(af = partial_ast(a, s->af, t, &rows)))
		return;
	DiagMark m = diag_mark(d);
	Fusion *g = sema_fusion(a, d, af);
	diag_rollback(d, m);
	if (!g || g->failed)
		return;
	g->ast_schedule = f->ast_schedule;
	int nt = g->ntensors;
	Tensor *gt = fusion_find_tensor(g, t->name), *gr = fusion_find_tensor(g, rows);
	int it = tensor_pos(g, gt), ir = tensor_pos(g, gr);
	if (it < 0 || ir < 0)
		return;
	/* named as the bounded plan's segments are (fusion_segment_name): the bound comes after
	 * they are scheduled, unbounded (their own size variants) */
	Seg q = {.a = a, .f = g, .af = af, .arch = s->arch};
	if (z)
		q.tag = arena_printf(a, "_%s%lld", z->name, (long long)ROW_PARTIAL_MAX);
	q.bnd = arena_alloc(a, sizeof(bool) * (size_t)(nt + 1));
	q.buf = arena_alloc(a, sizeof(int) * (size_t)(nt + 1));
	q.out = arena_alloc(a, sizeof(bool) * (size_t)(nt + 1));
	q.need = arena_alloc(a, sizeof(bool) * (size_t)(nt + 1));
	q.in = arena_alloc(a, sizeof(bool) * (size_t)(nt + 1));
	for (int i = 0; i < nt; i++)
		q.buf[i] = -1;
	q.bnd[ir] = true;
	q.buf[ir] = 0;
	/* the other outputs and the partials, then the total */
	for (int i = 0; i < nt; i++)
		q.out[i] = i == ir || (i != it && g->tensors[i]->kind == TK_OUTPUT);
	Segment *rowseg = build_segment(&q, d);
	if (!rowseg || !rowseg->fusion->auto_class || strcmp(rowseg->fusion->auto_class, "rows"))
		return;
	memset(q.out, 0, sizeof(bool) * (size_t)nt);
	q.out[it] = true;
	if (!build_segment(&q, d))
		return;
	vec_push(a, &g->seg_buffers, gr);
	g->auto_scheduled = true;
	g->auto_class = "segments: rows; whole";
	if (!z) { /* a constant row: the fusion's plan */
		*f = *g;
		for (int i = 0; i < f->segments.len; i++)
			VEC_AT(f->segments, Segment, i)->fusion->segment_of = f;
		return;
	}
	g->sizes[z->index]->bound = ROW_PARTIAL_MAX;
	vec_push(a, &f->variants, g);
}

/* ---- a reduction over indices that do not collapse (docs/auto_schedule.md, "Reductions
 * read per row, and over indices that do not collapse") ------------------------------------
 * batch-norm statistics, mean[c] = sum(n, l: x[n, c, l]) / (N * L): n and l are not adjacent
 * in x (c is between them), so no class takes the reduction (general: a thread per channel,
 * N * L serial). Written as
 *   mean_sum0_rows[n, c] = sum(l: x[n, c, l]);     (rows of L: the rows class)
 *   mean[c] = sum(n: mean_sum0_rows[n, c]) / (N * L);   (a column sum over [N, C]: outer)
 * it is the plan of the two statements a user could write: the partials are a boundary (a
 * reduction over one of their kept indices reads them, row_boundary). sum, max and min are
 * associative and commutative, so the value is the same up to the order of the adds; what is
 * around the reduction (the division) stays in its statement. */

/* Does r reduce over indices that do not collapse, the trailing run [*from, nroot) of them
 * collapsing and last in every read (so that red(run: ...) is a row reduction)? perm: r's roots
 * before *from in the order of a read that has all of r's roots (the partials' indices). */
static bool split_point(Fusion *f, Tensor *r, int *from, int *perm)
{
	if (!tensor_is_reduction(r) || r->kind == TK_INPUT || r->ndim == 0 ||
	    r->nroot - r->ndim < 2 || r->nroot > AUTO_MAX_RANK || nested_lift(f, r) ||
	    auto_reads_reductions(r->def, 0) || segment_read_roots(r) != 1u << (r->nroot - 1) ||
	    auto_collapsible(r, r->ndim, r->nroot) || auto_outer_class_alone(f, r) != AC_GENERAL)
		return false;
	int q = r->ndim + 1;
	while (q < r->nroot - 1 && !auto_collapsible(r, q, r->nroot))
		q++;
	int read[2 + AUTO_MAX_RANK];
	if (!first_full_read(r, read))
		return false;
	int n = 0;
	for (int k = 0; k < read[0]; k++)
		if (read[2 + k] < q) {
			for (int p = 0; p < n; p++)
				if (perm[p] == read[2 + k])
					return false;
			perm[n++] = read[2 + k];
		}
	*from = q;
	return n == q;
}

/* e with node from replaced by to (the nodes on the way copied). */
static AstExpr *replace_node(Arena *a, AstExpr *e, AstExpr *from, AstExpr *to)
{
	if (e == from)
		return to;
	AstExpr *c = NULL;
	for (int i = 0; i < e->nargs; i++) {
		AstExpr *r = replace_node(a, e->args[i], from, to);
		if (r == e->args[i])
			continue;
		if (!c) {
			c = NEW(a, AstExpr);
			*c = *e;
			c->args = arena_alloc(a, sizeof(AstExpr *) * (size_t)e->nargs);
			memcpy(c->args, e->args, sizeof(AstExpr *) * (size_t)e->nargs);
		}
		c->args[i] = r;
		if (r->depth >= c->depth)
			c->depth = r->depth + 1;
	}
	return c ? c : e;
}

/* f's AST with reduction r (split_point: from, perm) written as its partials over the
 * trailing run and their reduction over the rest; NULL when r's node is not found. */
static AstFusion *split_ast(Seg *s, Tensor *r, int from, const int *perm)
{
	Arena *a = s->a;
	AstFusion *af = s->af;
	AstStmt *st = stmt_of(af, r->lifted_from ? r->lifted_from->name : r->name);
	AstExpr *red = r->lifted_from ? lifted_node(s, r) : st ? st->rhs : NULL;
	int nk = from - r->ndim; /* the reduced indices left outside */
	if (!st || !red || red->kind != AE_REDUCE || red->nidx != r->nroot - r->ndim)
		return NULL;
	Span at = red->span;
	AstName op = {red->name, red->name_span};
	AstStmt *part = NEW(a, AstStmt);
	*part = *st;
	part->lhs = (AstName){fresh_name(a, af, arena_printf(a, "%s_rows", r->name)), st->lhs.span};
	part->is_scalar = false;
	part->nidx = from;
	part->idx = arena_alloc(a, sizeof(AstName) * (size_t)from);
	Vec run = {0}, outer = {0}, sub = {0};
	for (int k = 0; k < from; k++) {
		part->idx[k] = (AstName){r->root[perm[k]]->name, at};
		vec_push(a, &sub, ast_name(a, at, r->root[perm[k]]->name));
	}
	for (int k = nk; k < red->nidx; k++)
		vec_push(a, &run, &red->idx[k]);
	for (int k = 0; k < nk; k++)
		vec_push(a, &outer, &red->idx[k]);
	part->rhs = ast_reduce(a, at, op, &run, red->args[0]);
	AstStmt *top = NEW(a, AstStmt);
	*top = *st;
	top->rhs = replace_node(a, st->rhs, red,
				ast_reduce(a, at, op, &outer, ast_access(a, at, part->lhs, &sub)));
	return with_partials(a, af, st, part, top);
}

/* f with each reduction that split_point takes written as two (sema'd again), or NULL when
 * there is none. */
static Fusion *split_reductions(Arena *a, Diag *d, Fusion *f)
{
	Fusion *g = NULL;
	int left = f->ntensors; /* each rewrite takes one reduction that is not its own output */
	for (int i = 0; i < f->ntensors && left > 0; i++) {
		int from, perm[AUTO_MAX_RANK];
		Tensor *r = f->tensors[i];
		Seg s = {.a = a, .f = f, .af = f->ast};
		AstFusion *af = split_point(f, r, &from, perm) ? split_ast(&s, r, from, perm) : NULL;
		if (!af)
			continue;
		DiagMark m = diag_mark(d);
		Fusion *h = sema_fusion(a, d, af);
		bool ok = h && !h->failed && diag_error_count(d) == m.errors;
		diag_rollback(d, m);
		if (!ok)
			continue;
		h->ast_schedule = f->ast_schedule;
		g = f = h; /* the next reduction in the rewritten fusion (its tensors in order) */
		i = -1;
		left--;
	}
	return g;
}
