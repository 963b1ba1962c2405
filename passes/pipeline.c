/* pipeline.c: the pass manager. The pipeline is the list below; adding a pass is adding a line.
 *
 * lower_fusion makes an empty kernel, runs the passes in order and stops at the first one that
 * reports an error. With LowerOptions.verify, ir_verify checks the kernel IR after every pass;
 * `--dump-after=NAME|all` prints the kernel IR after the named pass(es), `--time-passes` one
 * line per pass with its time in microseconds. An auto-scheduled fusion whose kernel needs
 * launch preconditions (vector accesses) also gets Kernel.fallback, lowered without vectors.
 * A fusion with size variants (Fusion.variants) is lowered as the chain of its variants'
 * kernels (each with its scalar kernel), then its own: the launch contract (ir/ir.h, Kernel.
 * fallback). Only the fusion's own kernel is dumped by --dump-after. A segmented fusion
 * (Fusion.segments) is lowered as a plan: a kernel without a body whose segments are the
 * chains of its segments' fusions, each lowered here like any fusion (every segment kernel
 * of the fusion's own plan is dumped).
 */
#include <string.h>

#include "passes/passes.h"

const Pass pass_list[] = {
	{"loop_nest", pass_loop_nest, "loop nests from the scheduled domains; inlining"},
	{"private_local", pass_private_local, "register tensors are read only by their writers"},
	{"predicate", pass_predicate, "bounds predicates for non-divisible splits and pars"},
	{"redundant_write", pass_redundant_write, "only index 0 of an unused par writes memory"},
	{"indexing", pass_indexing, "logical subscripts -> flattened offsets"},
	{"mma", pass_mma, "an mma accumulator's tile nest -> one warp-wide mma instruction"},
	{"grid_reduce", pass_grid_reduce, "grid step of reductions over blockIdx: workspace"},
	{"cp_async", pass_cp_async, "copies into cp_async tensors -> cp.async + commit"},
	{"circular_buffer", pass_circular_buffer, "stages: prologue, slots, commits, waits, barriers"},
	{"tail_split", pass_tail_split, "ceil(n / c) row steps: the full ones unguarded, then the last"},
	{"vectorize", pass_vectorize, "vector loads/stores with a scalar tail"},
	{"allocation", pass_allocation, "buffers for materialized intermediates"},
	{"shared_memory", pass_shared_memory, "shared offsets, reuse, static/dynamic, limits"},
	{"cp_wait", pass_cp_wait, "cp.async waits before reads of cp.async destinations"},
	{"sync", pass_sync, "__syncthreads for cross-thread shared-memory hazards"},
	{"mma_pipeline", pass_mma_pipeline, "fragment loads one k step ahead of the mma"},
	{"arch", pass_arch, "minimum architecture from the features used"},
	{"simplify", pass_simplify, "constant folding and dead branch removal"},
	{"hoist", pass_hoist, "divisions of thread and block indices by sizes: once, at the top"},
	{"raster", pass_raster, "block indices of a raster(rows, cols, G): grouped tile order"},
};
const int pass_count = countof(pass_list);


static const LowerOptions default_options = {.arch = 80};

void passes_print(FILE *out)
{
	for (int i = 0; i < pass_count; i++)
		fprintf(out, "%-16s %s\n", pass_list[i].name, pass_list[i].what);
}

bool pass_exists(const char *name)
{
	if (strcmp(name, "all") == 0)
		return true;
	for (int i = 0; i < pass_count; i++)
		if (strcmp(pass_list[i].name, name) == 0)
			return true;
	return false;
}

static void dump(Kernel *k, const char *pass, FILE *out)
{
	Buf b = {0};
	buf_printf(&b, "// ---- after %s ----\n", pass);
	kir_print(k, &b);
	fputs(b.s, out);
	buf_free(&b);
}

static Kernel *lower_once(Arena *a, Diag *d, Fusion *f, const LowerOptions *o, Kernel **snap);
static Kernel *run_passes(Diag *d, Kernel *k, int from, Kernel **snap);

/* The passes before this one never read LowerOptions.no_vectorize: a kernel and its scalar
 * kernel are the same up to there, so the scalar kernel goes on from a copy of the kernel
 * (lower_once's snapshot) instead of running them again. */
#define SCALAR_FROM "cp_async"

static int scalar_from(void)
{
	for (int i = 0; i < pass_count; i++)
		if (strcmp(pass_list[i].name, SCALAR_FROM) == 0)
			return i;
	die("no pass %s", SCALAR_FROM);
}

/* The fusion lowered again without vector accesses: the kernel an auto-scheduled fusion's
 * launcher runs when a vectorization precondition fails (the user did not ask for vectors);
 * from snap (the kernel before SCALAR_FROM) when there is one. */
static Kernel *lower_fallback(Arena *a, Diag *d, Fusion *f, const LowerOptions *o, Kernel *snap)
{
	LowerOptions *so = NEW(a, LowerOptions);
	*so = *o;
	so->no_vectorize = true;
	so->dump_after = NULL;
	so->time_passes = false;
	Kernel *k;
	if (snap) {
		snap->options = so;
		f->lowerings++;
		f->resumed++;
		k = run_passes(d, snap, scalar_from(), NULL);
	} else {
		k = lower_once(a, d, f, so, NULL);
	}
	if (k)
		k->name = arena_printf(a, "%s_scalar", k->name);
	return k;
}

/* Preconditions other than a size variant's bounds (which the scalar kernel keeps) that may
 * fail: not those a padded plan guarantees its segments (segment_guarantees), whose scalar
 * kernels would never run. */
static bool has_vector_preconds(Kernel *k)
{
	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		if (p->kind != PC_AT_MOST && p->kind != PC_INDEX32 &&
		    !segment_guarantees(k->fusion, p))
			return true;
	}
	return false;
}

static bool same_options(const LowerOptions *x, const LowerOptions *y)
{
	return x->arch == y->arch && x->no_arch_check == y->no_arch_check &&
	       x->verify == y->verify && x->no_vectorize == y->no_vectorize;
}

/* f's kernels as an earlier lowering with the same options made them (Fusion.lowered; the
 * automatic scheduler's trial), or NULL: fresh Kernel headers over the same bodies, so the
 * chain lower_fusion links is this one's, named after f's current name (a prefix renames a
 * fusion after scheduling). A dump or the pass times run the passes again. */
static Kernel *reuse(Arena *a, Fusion *f, const LowerOptions *o)
{
	if (!f->lowered || o->dump_after || o->time_passes || !same_options(&f->lowered_with, o))
		return NULL;
	Kernel *head = NULL, **tail = &head;
	for (Kernel *c = f->lowered; c && c->fusion == f; c = c->fallback) {
		Kernel *k = NEW(a, Kernel);
		*k = *c;
		k->options = o;
		k->name = head ? arena_printf(a, "%s_scalar", head->name) : kir_name(a, f);
		k->fallback = NULL;
		*tail = k;
		tail = &k->fallback;
	}
	return head;
}

/* f's kernel, followed by its scalar kernel when it has vector preconditions (and no padded
 * plan, which lower_fusion puts there instead). */
static Kernel *lower_with_fallback(Arena *a, Diag *d, Fusion *f, const LowerOptions *o)
{
	Kernel *k = reuse(a, f, o);
	if (k)
		return k;
	DiagMark m = diag_mark(d);
	Kernel *snap = NULL;
	bool scalar = f->auto_scheduled && !o->no_vectorize && !f->pad_plan;
	k = lower_once(a, d, f, o, scalar ? &snap : NULL);
	if (k && scalar && has_vector_preconds(k) && !(k->fallback = lower_fallback(a, d, f, o, snap)))
		return NULL;
	if (k && diag_mark(d).nentries == m.nentries) {
		f->lowered = k;
		f->lowered_with = *o;
	}
	return k;
}

static void add_bounds(Kernel *k);

/* Chain k with the 32-bit index variant of each kernel in front of it (passes/index32.c):
 * `X_kernel_i32, X_kernel, X_kernel_i32_scalar, X_kernel_scalar`, over fresh headers of k's
 * kernels (Fusion.lowered keeps its own chain for reuse); a kernel whose counts are all
 * constants that fit is replaced by its 32-bit copy. */
static Kernel *with_index32(Arena *a, Kernel *k, const LowerOptions *o)
{
	if (!k || o->no_index32 || k->fusion->index64)
		return k;
	Kernel *head = NULL, **tail = &head;
	for (; k; k = k->fallback) {
		Kernel *v = index32_variant(k), *c = NEW(a, Kernel);
		*c = *k;
		if (v) {
			*tail = v;
			tail = &v->fallback;
			if (!kernel_index32(v)) /* constant sizes: v replaces k */
				continue;
		}
		*tail = c;
		tail = &c->fallback;
	}
	*tail = NULL;
	return head;
}

/* A segmented fusion's plan: each segment's fusion lowered as any fusion is (its variants,
 * its scalar kernels), in order; the plan has the fusion's variant bounds only. */
static Kernel *lower_plan(Arena *a, Diag *d, Fusion *f, const LowerOptions *o)
{
	Kernel *k = kir_new(a, f);
	k->name = arena_printf(a, "%s_segments%s", f->name, kir_bound_suffix(a, f));
	k->options = o;
	for (int i = 0; i < f->segments.len; i++) {
		Kernel *s = lower_fusion(a, d, VEC_AT(f->segments, Segment, i)->fusion, o);
		if (!s)
			return NULL;
		vec_push(a, &k->segments, s);
	}
	add_bounds(k);
	return k;
}

Kernel *lower_fusion(Arena *a, Diag *d, Fusion *f, const LowerOptions *o)
{
	if (!o)
		o = &default_options;
	/* the variants' options (no dumps, no timings), in the arena: their kernels keep a
	 * pointer to them (Kernel.options) */
	LowerOptions *vo = NEW(a, LowerOptions);
	*vo = *o;
	vo->dump_after = NULL;
	vo->time_passes = false;
	Kernel *head = NULL, **tail = &head;
	for (int i = 0; i <= f->variants.len; i++) {
		Fusion *g = i < f->variants.len ? VEC_AT(f->variants, Fusion, i) : f;
		Kernel *k = g->segments.len ? lower_plan(a, d, g, g == f ? o : vo)
					    : with_index32(a, lower_with_fallback(a, d, g, g == f ? o : vo), o);
		if (!k)
			return NULL;
		*tail = k;
		while (*tail)
			tail = &(*tail)->fallback;
	}
	/* a padded plan runs where the kernels' preconditions fail, instead of their scalar
	 * kernels (a size variant has f's plan too, for that: the owner's chain ends with it) */
	bool variant = false;
	for (int i = 0; i < f->nsizes; i++)
		variant |= f->sizes[i]->bound > 0;
	variant |= fusion_size_prod(f, false) != NULL;
	if (f->pad_plan && !variant && !(*tail = lower_plan(a, d, f->pad_plan, vo)))
		return NULL;
	return head;
}

/* A size variant's bounds, as the first preconditions of each of its kernels. */
static void add_bounds(Kernel *k)
{
	Fusion *f = k->fusion;
	Vec v = {0};
	for (int i = 0; i < f->nsizes; i++) {
		if (f->sizes[i]->bound <= 0)
			continue;
		Precond *p = NEW(k->arena, Precond);
		p->kind = PC_AT_MOST;
		p->size = f->sizes[i];
		p->value = f->sizes[i]->bound;
		p->span = f->span;
		vec_push(k->arena, &v, p);
	}
	SizeProd *sp = fusion_size_prod(f, false);
	if (sp) {
		Precond *p = NEW(k->arena, Precond);
		p->kind = PC_AT_MOST;
		p->value = sp->bound;
		p->span = f->span;
		p->counts = NEW(k->arena, IrExpr *);
		p->counts[0] = size_prod_expr(k->arena, f, sp);
		p->ncounts = 1;
		vec_push(k->arena, &v, p);
	}
	if (!v.len)
		return;
	for (int i = 0; i < k->preconds.len; i++)
		vec_push(k->arena, &v, k->preconds.items[i]);
	k->preconds = v;
}

static bool vector_loop(Stmt *s, void *ctx)
{
	return s->kind == KS_FOR && s->loop.vectorize;
}

/* The passes from `from` on over k; with snap, *snap is a copy of k before SCALAR_FROM when k
 * has a vectorized loop (a scalar kernel may follow). */
static Kernel *run_passes(Diag *d, Kernel *k, int from, Kernel **snap)
{
	const LowerOptions *o = k->options;
	FILE *out = o->dump_out ? o->dump_out : stdout;
	FILE *tout = o->dump_out ? o->dump_out : stderr;
	Fusion *f = k->fusion;
	bool ok = true;
	int resume = snap ? scalar_from() : -1;
	for (int i = from; i < pass_count && ok; i++) {
		const Pass *p = &pass_list[i];
		if (i == resume && ir_stmts_any(k->body, vector_loop, NULL))
			*snap = kir_copy(k->arena, k);
		double t0 = now_seconds();
		int errors = diag_error_count(d);
		ok = p->run(k, d) && diag_error_count(d) == errors;
		if (o->time_passes)
			fprintf(tout, "%s: pass %-16s %8.0f us\n", f->name, p->name,
				(now_seconds() - t0) * 1e6);
		if (!ok)
			break;
		if (o->verify && !ir_verify(k, d, p->name)) {
			ok = false;
			break;
		}
		if (o->dump_after && (strcmp(o->dump_after, "all") == 0 ||
				      strcmp(o->dump_after, p->name) == 0))
			dump(k, p->name, out);
	}
	if (ok)
		add_bounds(k);
	return ok ? k : NULL;
}

static Kernel *lower_once(Arena *a, Diag *d, Fusion *f, const LowerOptions *o, Kernel **snap)
{
	Kernel *k = kir_new(a, f);
	k->options = o;
	f->lowerings++;
	return run_passes(d, k, 0, snap);
}
