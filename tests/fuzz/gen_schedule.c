/* gen_schedule.c: a random schedule for a generated fusion (fuzz.h).
 *
 * The schedule is built one directive at a time. Before each choice the case so far is run
 * through the front end, and the choice looks at the scheduled fusion IR: which tensors exist
 * (caches and rfactor results included), their loop domains after every split, merge and
 * compute_at replay, the extents, the bindings. A directive the front end refuses (an error at
 * its line, or more errors than before it) is taken back; the generator never builds on a
 * refused directive. The whole case is still checked afterwards, where the end-of-schedule
 * checks and the lowering may refuse it (counted apart from failures).
 *
 * Order, as the directives require it:
 *   1. caches first: cache_before of outputs and reductions, cache_after of inputs (shared or
 *      local, and a register cache of a shared one);
 *   2. then every tensor, consumers before producers (reverse definition order: a tensor is
 *      defined after everything it reads): compute_at at a random loop of a random stored
 *      reader, memory(), rfactor, splits (nested, non-divisible, vectors), merges, reorders,
 *      bindings to blockIdx/threadIdx (reduction axes too: block and grid reductions),
 *      unroll, vectorize, cp_async, pad, stages.
 * A tensor is scheduled only where the language lets it: a cache or reduction without an
 * explicit compute_at gets the default placement and no transforms of the loops it shares.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

typedef struct GS {
	Rng *r;
	const FuzzOpts *o;
	Case *c;
	FuzzTrace trace;
	void *ctx;
	Arena *a;      /* the arena of p */
	Program *p;    /* the case so far, scheduled */
	Fusion *f;
	int nerrors;   /* errors of the case so far (end checks that a later directive may fix) */
	/* tensors given an explicit compute_at: only those (and outputs) may have others
	 * computed at them (a default placement would transform loops they share) */
	char placed[32][16];
	int nplaced;
	/* without reduce-in-wider-block (F7): the extent a block reduction bound to each
	 * threadIdx type, which no later binding of that type may exceed (0: none) */
	int64_t red_extent[PT_COUNT];
	/* the axis of the tensor being scheduled that is planned to be vectorized: kept last,
	 * serial and untransformed ("" when none) */
	char vec[16];
} GS;

/* ---- the case so far through the front end --------------------------------------------- */

/* Compiles the case; on success replaces g's program and returns true. A directive that made
 * the front end report an error at its line, or more errors than before, is refused. */
static bool compile(GS *g, bool always)
{
	Buf text = {0};
	int line = case_render(g->c, &text);
	if (g->trace)
		g->trace(text.s, g->ctx);
	Arena *a = arena_new();
	char *diags = NULL;
	int nerr = 0;
	Program *p = fuzz_frontend(a, text.s, &diags, &nerr);
	bool ok = p && p->nfusions == 1 &&
		  (always || (nerr <= g->nerrors && !fuzz_error_at_line(diags, line)));
	buf_free(&text);
	free(diags);
	if (!ok) {
		arena_free(a);
		return false;
	}
	if (g->a)
		arena_free(g->a);
	g->a = a;
	g->p = p;
	g->f = p->fusions[0];
	g->nerrors = nerr;
	return true;
}

/* Appends a directive; false (and taken back) when the front end refuses it. */
static bool dir(GS *g, const char *fmt, ...) PRINTF(2, 3);
static bool dir(GS *g, const char *fmt, ...)
{
	if (g->c->dirs.n >= g->o->max_dirs)
		return false;
	Buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	item_add(&g->c->dirs, g->c->next_unit++, "%s", b.s);
	buf_free(&b);
	if (compile(g, false))
		return true;
	item_pop(&g->c->dirs);
	g->c->next_unit--;
	return false;
}

/* Takes the last directive back (it was accepted, but leads nowhere useful). */
static void undo(GS *g)
{
	item_pop(&g->c->dirs);
	g->c->next_unit--;
	compile(g, true);
}

static const char *fresh(GS *g, const char *prefix, char *buf, size_t n)
{
	snprintf(buf, n, "%s%d", prefix, ++g->c->next_name);
	return buf;
}

static Tensor *T(GS *g, const char *name)
{
	return fusion_find_tensor(g->f, name);
}

/* ---- facts about the IR ----------------------------------------------------------------- */

static bool stored(Tensor *t)
{
	return t->kind == TK_OUTPUT || (t->kind == TK_INTERMEDIATE && !t->sched.inlined);
}

static bool is_const(Axis *ax, int64_t *v)
{
	return ir_is_const(ax->extent, v);
}

static bool placed(GS *g, const char *name)
{
	for (int i = 0; i < g->nplaced; i++)
		if (strcmp(g->placed[i], name) == 0)
			return true;
	return false;
}

/* The binding of a loop: a shared (compute_at) axis carries its target's. */
static ParType axis_par(Axis *ax)
{
	for (int n = 0; ax->ca_alias && n < 64; n++)
		ax = ax->ca_alias;
	return ax->par;
}

/* The tensors t can be computed at: stored tensors that read it (through inlined ones),
 * outputs or placed explicitly. */
static int consumers(GS *g, Tensor *t, Tensor **out, int max)
{
	int n = 0;
	for (int i = 0; i < g->f->ntensors && n < max; i++) {
		Tensor *u = g->f->tensors[i];
		if (u == t || !u->def || u->kind == TK_SCALAR || !stored(u) || u->ndomain == 0)
			continue;
		if (u->kind != TK_OUTPUT && !placed(g, u->name))
			continue;
		if (sched_read_map(g->a, t, u).found)
			out[n++] = u;
	}
	return n;
}

/* The largest extent bound to each thread type over the fusion (the launch's block). */
static void block_dims(GS *g, int64_t ext[PT_COUNT])
{
	for (int p = 0; p < PT_COUNT; p++)
		ext[p] = 1;
	for (int i = 0; i < g->f->ntensors; i++) {
		Tensor *t = g->f->tensors[i];
		for (int j = 0; j < t->ndomain; j++) {
			int64_t v;
			Axis *ax = t->domain[j];
			if (par_is_thread(ax->par) && is_const(ax, &v) && v > ext[ax->par])
				ext[ax->par] = v;
		}
	}
}

/* Whether a loop of t is bound to p: its own axes and, unless reuse is allowed (F5), the
 * loops it shares by compute_at. */
static bool par_used(GS *g, Tensor *t, ParType p)
{
	bool shared_too = !fuzz_on(g->o, FF_PAR_REUSE);
	for (int j = 0; j < t->ndomain; j++)
		if ((shared_too ? axis_par(t->domain[j]) : t->domain[j]->par) == p)
			return true;
	return false;
}

static bool is_buffered_chain(Tensor *t)
{
	for (int n = 0; t && n < 64; t = t->sched.ca_tensor, n++)
		if (t->sched.stages)
			return true;
	return false;
}

/* A buffered tensor computed (directly or through others) at t, or t inside a buffered one. */
static bool nested_stages(GS *g, Tensor *t)
{
	if (is_buffered_chain(t->sched.ca_tensor))
		return true;
	for (int i = 0; i < g->f->ntensors; i++) {
		Tensor *x = g->f->tensors[i];
		for (int n = 0; x && n < 64; x = x->sched.ca_tensor, n++)
			if (x->sched.ca_tensor == t && x->sched.stages)
				return true;
	}
	return false;
}

static bool is_vec(GS *g, Axis *ax)
{
	return g->vec[0] && strcmp(ax->name, g->vec) == 0;
}

/* Own (not shared by compute_at) axes that a transform may take. */
static int free_axes(GS *g, Tensor *t, bool red_only, bool roots_only, Axis **out)
{
	int n = 0;
	for (int j = 0; j < t->ndomain; j++) {
		Axis *ax = t->domain[j];
		if (ax->ca_alias || ax->par != PT_SERIAL || ax->vectorize || ax->unroll || is_vec(g, ax))
			continue;
		if ((red_only && !ax->reduction) || (roots_only && ax->kind != AX_ROOT))
			continue;
		out[n++] = ax;
	}
	return n;
}

/* ---- directives ------------------------------------------------------------------------- */

static const char *random_mem(GS *g)
{
	bool sh = fuzz_on(g->o, FF_CACHE_SHARED), lo = fuzz_on(g->o, FF_CACHE_LOCAL);
	if (sh && lo)
		return rng_chance(g->r, 50) ? "shared" : "local";
	return sh ? "shared" : lo ? "local" : NULL;
}

static void make_caches(GS *g)
{
	char name[16], name2[16];
	int n = g->f->ntensors;
	char **ts = calloc((size_t)n + 1, sizeof *ts); /* the names outlive each program */
	for (int i = 0; i < n; i++)
		ts[i] = xstrdup(g->f->tensors[i]->name);
	for (int i = 0; i < n; i++) {
		Tensor *t = T(g, ts[i]);
		const char *mem = random_mem(g);
		if (!t || !mem || !t->def || t->kind == TK_SCALAR)
			continue;
		if (fuzz_on(g->o, FF_CACHE_BEFORE) && (t->kind == TK_OUTPUT || tensor_is_reduction(t)) &&
		    rng_chance(g->r, 15))
			dir(g, "%s = %s.cache_before(%s);", fresh(g, "c", name, sizeof name), ts[i], mem);
	}
	for (int i = 0; i < n; i++) {
		Tensor *t = T(g, ts[i]);
		const char *mem = random_mem(g);
		if (!t || !mem || t->kind != TK_INPUT || !t->readers.len || !rng_chance(g->r, 50))
			continue;
		if (t->readers.len > 1 && !fuzz_on(g->o, FF_MULTI_READ))
			continue;
		fresh(g, strcmp(mem, "shared") == 0 ? "s" : "l", name, sizeof name);
		if (dir(g, "%s = %s.cache_after(%s);", name, ts[i], mem) &&
		    strcmp(mem, "shared") == 0 && fuzz_on(g->o, FF_CACHE_LOCAL) && rng_chance(g->r, 30))
			dir(g, "%s = %s.cache_after(local);", fresh(g, "l", name2, sizeof name2), name);
	}
	for (int i = 0; i < n; i++)
		free(ts[i]);
	free(ts);
}

/* compute_at at a random loop of a random reader; true when accepted. A shared tensor stays
 * outside the reader's threadIdx loops unless shared-in-threads is on (F4). */
static bool compute_at(GS *g, const char *name, bool shared)
{
	Tensor *us[16];
	int n = consumers(g, T(g, name), us, countof(us));
	if (n == 0)
		return false;
	Tensor *u = us[rng_below(g->r, n)];
	int max = u->ndomain;
	if (shared && !fuzz_on(g->o, FF_SHARED_IN_THREADS))
		for (int j = 0; j < u->ndomain; j++)
			if (par_is_thread(axis_par(u->domain[j])) && j < max)
				max = j;
	if (max == 0)
		return false;
	/* A stored copy (not a reduction: its loops are an accumulation) needs constant extents
	 * for its own axes, which make its buffer: a position that leaves a symbolic one is
	 * taken back, and another one tried. */
	bool buffered = !tensor_is_reduction(T(g, name));
	char uname[64], axes[32][64];
	int n_axes = max < 32 ? max : 32;
	snprintf(uname, sizeof uname, "%s", u->name);
	for (int j = 0; j < n_axes; j++)
		snprintf(axes[j], sizeof axes[0], "%s", u->domain[j]->name);
	for (int tries = 0; tries < 3; tries++) {
		if (!dir(g, "%s.compute_at(%s, %s);", name, uname, axes[rng_below(g->r, n_axes)]))
			continue;
		Tensor *t = T(g, name);
		bool symbolic = false;
		int64_t v;
		for (int j = 0; j < t->ndomain && buffered; j++)
			symbolic |= !t->domain[j]->ca_alias && !is_const(t->domain[j], &v);
		if (symbolic && tries < 2) {
			undo(g);
			continue;
		}
		if (g->nplaced < countof(g->placed))
			snprintf(g->placed[g->nplaced++], sizeof g->placed[0], "%s", name);
		return true;
	}
	return false;
}

static int64_t split_factor(GS *g, Axis *ax)
{
	static const int64_t small[] = {1, 2, 3, 4, 5, 7, 8, 16, 32};
	static const int64_t big[] = {32, 64, 128, 256};
	int64_t v;
	if (is_const(ax, &v) && v > 1 && rng_chance(g->r, 15))
		return rng_chance(g->r, 50) ? v : v + 1 + rng_below(g->r, 4); /* whole, or more */
	return rng_chance(g->r, 80) ? RNG_PICK(g->r, small) : RNG_PICK(g->r, big);
}

static bool do_split(GS *g, const char *name, bool red_only)
{
	Axis *ax[32];
	int n = free_axes(g, T(g, name), red_only, !fuzz_on(g->o, FF_NESTED_SPLIT), ax);
	if (n == 0)
		return false;
	Axis *x = ax[rng_below(g->r, n)];
	char o[16], i[16];
	return dir(g, "%s.split(%s, %lld) -> (%s, %s);", name, x->name, (long long)split_factor(g, x),
		   fresh(g, "o", o, sizeof o), fresh(g, "i", i, sizeof i));
}

static bool do_merge(GS *g, const char *name, bool red_only)
{
	Tensor *t = T(g, name);
	Axis *pairs[32][2];
	int n = 0;
	for (int j = 0; j + 1 < t->ndomain; j++) {
		Axis *x = t->domain[j], *y = t->domain[j + 1];
		bool ok = !x->ca_alias && !y->ca_alias && x->par == PT_SERIAL && y->par == PT_SERIAL &&
			  !x->vectorize && !y->vectorize && !x->unroll && !y->unroll &&
			  !is_vec(g, x) && !is_vec(g, y) &&
			  x->reduction == y->reduction && (!red_only || x->reduction);
		if (ok && n < 32) {
			pairs[n][0] = x;
			pairs[n++][1] = y;
		}
	}
	if (n == 0)
		return false;
	int k = rng_below(g->r, n);
	char m[16];
	return dir(g, "%s.merge(%s, %s) -> %s;", name, pairs[k][0]->name, pairs[k][1]->name,
		   fresh(g, "m", m, sizeof m));
}

/* A random order of the tensor's own axes; mostly with the reduction axes after the others
 * (an unbound reduction loop outside a serial non-reduction loop is allowed only for register
 * caches). */
static bool do_reorder(GS *g, const char *name)
{
	Tensor *t = T(g, name);
	Axis *ax[32];
	int n = 0;
	for (int j = 0; j < t->ndomain && n < 32; j++)
		if (!t->domain[j]->ca_alias)
			ax[n++] = t->domain[j];
	if (n < 2)
		return false;
	for (int k = n - 1; k > 0; k--) {
		int e = rng_below(g->r, k + 1);
		Axis *tmp = ax[k];
		ax[k] = ax[e];
		ax[e] = tmp;
	}
	for (int k = 0; k + 1 < n; k++) { /* the planned vector axis stays last */
		if (is_vec(g, ax[k])) {
			Axis *tmp = ax[k];
			ax[k] = ax[n - 1];
			ax[n - 1] = tmp;
		}
	}
	if (rng_chance(g->r, 75)) { /* stable partition: reductions last */
		Axis *o[32];
		int m = 0;
		for (int k = 0; k < n; k++)
			if (!ax[k]->reduction)
				o[m++] = ax[k];
		for (int k = 0; k < n; k++)
			if (ax[k]->reduction)
				o[m++] = ax[k];
		memcpy(ax, o, sizeof(Axis *) * (size_t)n);
	}
	Buf b = {0};
	for (int k = 0; k < n; k++)
		buf_printf(&b, "%s%s", k ? ", " : "", ax[k]->name);
	bool ok = dir(g, "%s.reorder(%s);", name, b.s);
	buf_free(&b);
	return ok;
}

/* Consecutive values of ax are consecutive elements of t: the innermost root axis or an
 * inner split of it (what vectorize accepts; merges left out). */
static bool contiguous(Tensor *t, Axis *ax)
{
	while (ax->kind == AX_SPLIT_INNER)
		ax = ax->from[0];
	return ax->kind == AX_ROOT && !ax->reduction && ax->root_index == t->ndim - 1;
}

/* A vector plan: the tensor's last own axis, if contiguous, is vectorized at the end; when its
 * extent is not a vector width it is split by one first. Sets g->vec. */
static void plan_vector(GS *g, const char *name)
{
	Tensor *t = T(g, name);
	g->vec[0] = 0;
	if (t->ndim == 0 || t->ndomain == 0)
		return;
	Axis *last = t->domain[t->ndomain - 1];
	if (last->ca_alias || last->par != PT_SERIAL || !contiguous(t, last))
		return;
	int64_t e, size = dtype_size(t->dtype);
	if (is_const(last, &e) && e > 1 && (e * size == 4 || e * size == 8 || e * size == 16) &&
	    rng_chance(g->r, 50)) {
		snprintf(g->vec, sizeof g->vec, "%s", last->name);
		return;
	}
	static const int widths[] = {2, 4, 8};
	int v = RNG_PICK(g->r, widths);
	if (v * size > 16)
		v = (int)(16 / size);
	while (v > 1 && is_const(last, &e) && e % v != 0)
		v /= 2; /* a vector never straddles a row */
	if (v == 1)
		return;
	char o[16], in[16];
	if (dir(g, "%s.split(%s, %d) -> (%s, %s);", name, last->name, v, fresh(g, "o", o, sizeof o),
		fresh(g, "v", in, sizeof in)))
		snprintf(g->vec, sizeof g->vec, "%s", in);
}

static void transforms(GS *g, const char *name, bool red_only)
{
	static const int counts[] = {0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5};
	int n = RNG_PICK(g->r, counts);
	for (int k = 0; k < n; k++) {
		int what = rng_below(g->r, 10);
		if (what < 5 && fuzz_on(g->o, FF_SPLIT))
			do_split(g, name, red_only);
		else if (what < 7 && fuzz_on(g->o, FF_MERGE))
			do_merge(g, name, red_only);
		else if (!red_only && fuzz_on(g->o, FF_REORDER))
			do_reorder(g, name);
	}
}

/* Reduction axes of t that are still loops (F6: binding the last one leaves none). */
static int serial_reductions(Tensor *t)
{
	int n = 0;
	for (int j = 0; j < t->ndomain; j++)
		n += t->domain[j]->reduction && !t->domain[j]->ca_alias && t->domain[j]->par == PT_SERIAL;
	return n;
}

/* Binds a few of the tensor's own axes to blockIdx and threadIdx types it does not use yet,
 * within the block limit of the whole launch. */
static void binds(GS *g, const char *name, bool red_only)
{
	Tensor *t = T(g, name);
	char names[32][64];
	int n = 0;
	for (int j = 0; j < t->ndomain && n < 32; j++)
		if (!t->domain[j]->ca_alias && t->domain[j]->par == PT_SERIAL)
			snprintf(names[n++], sizeof names[0], "%s", t->domain[j]->name);
	for (int k = 0; k < n; k++) {
		t = T(g, name);
		Axis *ax = tensor_find_axis(t, names[k]);
		if (!ax || ax->par != PT_SERIAL || ax->vectorize || is_vec(g, ax) ||
		    (red_only && !ax->reduction))
			continue;
		int64_t v = 0, ext[PT_COUNT];
		bool c = is_const(ax, &v), red = ax->reduction; /* ax dies with the next dir() */
		bool red_ok = !ax->reduction || fuzz_on(g->o, FF_FULLY_BOUND_REDUCTION) ||
			      serial_reductions(t) > 1;
		bool thread_ok = fuzz_on(g->o, FF_BIND_THREAD) && c && v <= 1024 && red_ok &&
				 (!ax->reduction || fuzz_on(g->o, FF_BLOCK_REDUCE));
		bool block_ok = fuzz_on(g->o, FF_BIND_BLOCK) && red_ok &&
				(!ax->reduction || (fuzz_on(g->o, FF_GRID_REDUCE) && t->kind == TK_OUTPUT &&
						    !t->readers.len && !t->sched.ca_tensor)) &&
				(t->kind != TK_INTERMEDIATE || t->sched.mem != MEM_SHARED ||
				 fuzz_on(g->o, FF_PRODUCER_BLOCK));
		if (t->kind == TK_INTERMEDIATE && t->sched.mem == MEM_LOCAL && !tensor_is_reduction(t)) {
			/* registers are private: a binding of a register tensor's own axis is legal
			 * only when its reader binds the same way (mostly refused) */
			block_ok = false;
			thread_ok &= fuzz_on(g->o, FF_BIND_LOCAL) && rng_chance(g->r, 25);
		}
		if (thread_ok && rng_chance(g->r, 45)) {
			block_dims(g, ext);
			for (int p = PT_TIDX; p <= PT_TIDZ; p++) {
				if (par_used(g, t, (ParType)p))
					continue;
				int64_t total = 1;
				for (int q = PT_TIDX; q <= PT_TIDZ; q++)
					total *= q == p && v > ext[q] ? v : ext[q];
				if (total > 1024 || (p != PT_TIDX && !rng_chance(g->r, 60)))
					continue;
				if (!fuzz_on(g->o, FF_REDUCE_IN_WIDER_BLOCK) &&
				    ((g->red_extent[p] && v > g->red_extent[p]) || (red && v < ext[p])))
					continue;
				if (dir(g, "%s.bind(%s, %s);", name, names[k], par_name((ParType)p)) && red)
					g->red_extent[p] = v;
				break;
			}
		} else if (block_ok && rng_chance(g->r, 35)) {
			for (int p = PT_BIDX; p <= PT_BIDZ; p++) {
				if (par_used(g, t, (ParType)p) || (p != PT_BIDX && c && v > 65535))
					continue;
				if (p == PT_BIDX || rng_chance(g->r, 60)) {
					dir(g, "%s.bind(%s, %s);", name, names[k], par_name((ParType)p));
					break;
				}
			}
		}
	}
}

static void unroll_vectorize(GS *g, const char *name)
{
	Tensor *t = T(g, name);
	if (t->ndomain == 0)
		return;
	Axis *last = t->domain[t->ndomain - 1];
	int64_t v;
	if (fuzz_on(g->o, FF_VECTORIZE) && !last->ca_alias && last->par == PT_SERIAL &&
	    !last->reduction && is_const(last, &v) &&
	    rng_chance(g->r, is_vec(g, last) ? 90 : 10))
		dir(g, "%s.vectorize(%s);", name, last->name);
	t = T(g, name);
	for (int j = 0; j < t->ndomain; j++) {
		Axis *ax = t->domain[j];
		if (fuzz_on(g->o, FF_UNROLL) && !ax->ca_alias && ax->par == PT_SERIAL && !ax->vectorize &&
		    is_const(ax, &v) && rng_chance(g->r, 12)) {
			dir(g, "%s.unroll(%s);", name, ax->name);
			t = T(g, name);
		}
	}
}

static void rfactor(GS *g, const char *name)
{
	Tensor *t = T(g, name);
	Axis *red[32];
	int n = free_axes(g, t, true, false, red);
	if (n == 0)
		return;
	if (n == 1) {
		if (!do_split(g, name, true))
			return;
		n = free_axes(g, T(g, name), true, false, red);
		if (n < 2)
			return;
	}
	Buf b = {0};
	int picked = 0;
	for (int k = 0; k < n; k++) {
		if (picked < n - 1 && (rng_chance(g->r, 50) || (k == n - 1 && picked == 0))) {
			buf_printf(&b, "%s%s", picked ? ", " : "", red[k]->name);
			picked++;
		}
	}
	if (picked == 0)
		buf_printf(&b, "%s", red[0]->name);
	char r[16];
	dir(g, "%s.rfactor(%s) -> %s;", name, b.s, fresh(g, "r", r, sizeof r));
	buf_free(&b);
}

/* A shared copy of an input: cp_async can make it asynchronous. */
static bool cp_async_candidate(GS *g, const char *name)
{
	Tensor *t = T(g, name);
	return fuzz_on(g->o, FF_CP_ASYNC) && t->sched.cache_of && !t->sched.cache_before && t->sched.mem == MEM_SHARED &&
	       t->sched.cache_of->kind == TK_INPUT;
}

static void cache_extras(GS *g, const char *name)
{
	Tensor *t = T(g, name);
	if (!t->sched.cache_of || t->sched.cache_before)
		return;
	if (cp_async_candidate(g, name) && rng_chance(g->r, 60))
		dir(g, "%s.cp_async(%s);", name, rng_chance(g->r, 15) ? "cg" : "");
	if (fuzz_on(g->o, FF_PAD) && T(g, name)->sched.mem == MEM_SHARED && rng_chance(g->r, 30))
		dir(g, "%s.pad(%d);", name, 1 + (int)rng_below(g->r, 4));
	t = T(g, name);
	if (!fuzz_on(g->o, FF_STAGES) || !rng_chance(g->r, 35))
		return;
	if (!fuzz_on(g->o, FF_NESTED_STAGES) && nested_stages(g, t))
		return;
	if (!fuzz_on(g->o, FF_STAGES_ON_CHAIN) && t->sched.cache_of->sched.cache_of)
		return;
	int n = 2 + rng_below(g->r, 4);
	int how = rng_below(g->r, 10);
	if (how < 2)
		dir(g, "%s.double_buffer();", name);
	else if (how < 5)
		dir(g, "%s.stages(%d, %d);", name, n, rng_below(g->r, n));
	else
		dir(g, "%s.stages(%d);", name, n);
}

static void schedule_tensor(GS *g, const char *name)
{
	Tensor *t = T(g, name);
	if (!t || !t->def || t->kind == TK_SCALAR || t->kind == TK_INPUT)
		return;
	/* t dies with the next dir(): only what is kept here is used after one */
	bool is_red = tensor_is_reduction(t), explicit = false, output = t->kind == TK_OUTPUT;
	if (!output) {
		bool pointwise = !t->sched.cache_of && !is_red;
		int pct = pointwise ? 20 : t->sched.cache_of ? 75 : 85;
		const char *mem = pointwise && rng_chance(g->r, 70) ? random_mem(g) : NULL;
		bool shared = mem ? strcmp(mem, "shared") == 0 : t->sched.mem == MEM_SHARED;
		if (fuzz_on(g->o, FF_COMPUTE_AT) && rng_chance(g->r, pct))
			explicit = compute_at(g, name, shared);
		if (pointwise && !explicit)
			return; /* stays inlined */
		if (mem)
			dir(g, "%s.memory(%s);", name, mem);
	}
	bool red_only = !output && !explicit;
	if (red_only && !is_red) { /* a cache placed by default: no transforms of its own */
		cache_extras(g, name);
		return;
	}
	if (output && is_red && fuzz_on(g->o, FF_RFACTOR) && rng_chance(g->r, 25))
		rfactor(g, name);
	g->vec[0] = 0;
	if (!red_only && fuzz_on(g->o, FF_VECTORIZE) && rng_chance(g->r, cp_async_candidate(g, name) ? 50 : 20))
		plan_vector(g, name);
	transforms(g, name, red_only);
	binds(g, name, red_only);
	unroll_vectorize(g, name);
	cache_extras(g, name);
	g->vec[0] = 0;
}

void gen_schedule(Rng *r, const FuzzOpts *o, Case *c, FuzzTrace trace, void *ctx)
{
	GS g;
	memset(&g, 0, sizeof g);
	g.r = r;
	g.o = o;
	g.c = c;
	g.trace = trace;
	g.ctx = ctx;
	bool pick_auto = rng_chance(r, 4); /* drawn always: --only-auto keeps the fusions */
	if ((pick_auto || o->only_auto) && fuzz_on(o, FF_AUTO)) {
		c->auto_schedule = true;
		return;
	}
	if (!compile(&g, true))
		return; /* the fusion itself is refused: the check reports it */
	make_caches(&g);
	int n = g.f->ntensors;
	char **names = calloc((size_t)n + 1, sizeof *names);
	for (int i = 0; i < n; i++)
		names[i] = xstrdup(g.f->tensors[n - 1 - i]->name);
	for (int i = 0; i < n; i++) {
		if (rng_chance(r, 85))
			schedule_tensor(&g, names[i]);
		free(names[i]);
	}
	free(names);
	if (g.a)
		arena_free(g.a);
}
