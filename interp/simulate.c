/* simulate.c: the kernel simulator (interp.h, model in sim.h, docs/check.md).
 *
 * It executes the kernel IR after all passes, the same IR the CUDA backend prints: every block
 * (or a seeded sample), every thread of a block. Expressions are evaluated straight from the
 * IrExpr trees with a per-thread variable environment indexed by Var.id, with the backend's
 * semantics: an operator computes in dtype_compute of its dtype, loads convert from the
 * buffer's dtype, stores round to it.
 *
 * Statements run on an explicit per-thread stack of frames (a continuation), so a thread can
 * stop at a __syncthreads() and resume later. A kernel without barriers runs each thread to
 * completion, one after another, with one reused thread context; a kernel with barriers runs
 * every thread of the block until it reaches a barrier or ends, then releases the barrier.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"

static void fail(Sim *S, const char *fmt, ...) PRINTF(2, 3);
static void fail(Sim *S, const char *fmt, ...)
{
	Buf b = {0};
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	SimReport *r = sim_report_new(S, SF_ERROR, S->stmt, NULL);
	if (r)
		r->detail = b.s;
	else
		buf_free(&b);
}


/* Stops the simulation: the work is above SimOptions' budget (the first reason is kept). */
static void over_budget(Sim *S, const char *fmt, ...) PRINTF(2, 3);
static void over_budget(Sim *S, const char *fmt, ...)
{
	Buf b = {0};
	va_list ap;

	if (S->res->error)
		return;
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	S->res->error = b.s;
	S->res->over_budget = true;
}

/* One step of the budget: a thread started, a statement executed, a loop iteration. */
static void step(Sim *S)
{
	if (++S->res->steps > S->max_steps && S->max_steps)
		over_budget(S, "more than %lld steps (the step budget)", (long long)S->max_steps);
}

/* An allocation of n elements more than the global buffers, checked against the budget. */
static bool elements_fit(Sim *S, int64_t n, const char *what, const char *name)
{
	if (!S->max_elements || (n <= S->max_elements && S->elements <= S->max_elements - n))
		return true;
	over_budget(S, "%s %s of %lld elements on top of %lld in global buffers is more than the "
		    "element budget of %lld", what, name, (long long)n, (long long)S->elements,
		    (long long)S->max_elements);
	return false;
}

/* ---- values --------------------------------------------------------------------------- */

static SVal vf(double f) { SVal v; v.f = f; return v; }
static SVal vi(int64_t i) { SVal v; v.i = i; return v; }

static double rnd(DType t, double x)
{
	if (t == DT_F32)
		return (double)(float)x;
	if (t == DT_F64)
		return x;
	return dtype_round(t, x);
}

static SVal cv(SVal v, DType from, DType to)
{
	bool ff = dtype_is_float(from);

	if (from == to)
		return v;
	if (to == DT_BOOL)
		return vi(ff ? v.f != 0 : v.i != 0);
	if (dtype_is_float(to))
		return vf(rnd(to, ff ? v.f : (double)v.i));
	if (ff)
		return vi(dtype_float_to_int(v.f, to));
	return vi(interp_wrap_int(v.i, to));
}

static double asf(SVal v, DType t) { return dtype_is_float(t) ? v.f : (double)v.i; }
static int64_t asi(SVal v, DType t)
{
	return dtype_is_float(t) ? dtype_float_to_int(v.f, DT_I64) : v.i;
}
static bool truthy(SVal v, DType t) { return dtype_is_float(t) ? v.f != 0 : v.i != 0; }

static bool compare(IrOp op, DType ct, SVal a, SVal b)
{
	if (dtype_is_float(ct)) {
		double x = a.f, y = b.f;
		switch (op) {
		case OP_LT: return x < y;
		case OP_LE: return x <= y;
		case OP_GT: return x > y;
		case OP_GE: return x >= y;
		case OP_EQ: return x == y;
		case OP_NE: return x != y;
		default: unreachable();
		}
	}
	int64_t x = a.i, y = b.i;
	switch (op) {
	case OP_LT: return x < y;
	case OP_LE: return x <= y;
	case OP_GT: return x > y;
	case OP_GE: return x >= y;
	case OP_EQ: return x == y;
	case OP_NE: return x != y;
	default: unreachable();
	}
}

/* max/min/abs in ct; max/min propagate NaN like the preamble's __fus_max. */
static SVal minmax(IrOp op, DType ct, SVal a, SVal b)
{
	if (dtype_is_float(ct)) {
		double x = a.f, y = b.f, r;
		if (op == OP_ABS)
			r = fabs(x);
		else if (isnan(x) || isnan(y))
			r = NAN;
		else if (op == OP_MAX)
			r = x > y ? x : y;
		else
			r = x < y ? x : y;
		return vf(rnd(ct, r));
	}
	int64_t x = a.i, y = b.i, r;
	if (op == OP_ABS)
		r = x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
	else if (op == OP_MAX)
		r = x > y ? x : y;
	else
		r = x < y ? x : y;
	return vi(interp_wrap_int(r, ct));
}

/* ---- buffers -------------------------------------------------------------------------- */

static unsigned slot_hash(void *p, int cap) { return (unsigned)(((uintptr_t)p >> 4) * 2654435761u) & (unsigned)(cap - 1); }

static int map_find(Sim *S, void *key)
{
	unsigned h = slot_hash(key, S->mapcap);

	while (S->map[h].key) {
		if (S->map[h].key == key)
			return S->map[h].val;
		h = (h + 1) & (unsigned)(S->mapcap - 1);
	}
	return -1;
}

static void map_put(Sim *S, void *key, int val)
{
	if (2 * (S->nbufs + 1) > S->mapcap) {
		struct SimSlot *old = S->map;
		int oldcap = S->mapcap;
		S->mapcap = oldcap ? 2 * oldcap : 64;
		S->map = calloc((size_t)S->mapcap, sizeof *S->map);
		for (int i = 0; i < oldcap; i++)
			if (old[i].key)
				map_put(S, old[i].key, old[i].val);
		free(old);
	}
	unsigned h = slot_hash(key, S->mapcap);
	while (S->map[h].key)
		h = (h + 1) & (unsigned)(S->mapcap - 1);
	S->map[h].key = key;
	S->map[h].val = val;
}

static SimBuf *add_buf(Sim *S, Tensor *t, MemType mem)
{
	SimBuf *b = calloc(1, sizeof *b);

	b->t = t;
	b->mem = mem;
	b->dt = t->dtype;
	if (mem == MEM_LOCAL) {
		b->ln = calloc((size_t)S->nctx, sizeof *b->ln);
		b->lv = calloc((size_t)S->nctx, sizeof *b->lv);
		b->linit = calloc((size_t)S->nctx, sizeof *b->linit);
	}
	S->bufs = realloc(S->bufs, sizeof *S->bufs * (size_t)(S->nbufs + 1));
	map_put(S, t, S->nbufs);
	S->bufs[S->nbufs++] = b;
	return b;
}

SimBuf *sim_buf(Sim *S, Tensor *t)
{
	int i = S->mapcap ? map_find(S, t) : -1;

	return i < 0 ? NULL : S->bufs[i];
}

static void free_buf(Sim *S, SimBuf *b)
{
	free(b->v);
	free(b->init);
	free(b->sh);
	free(b->gl);
	for (int c = 0; b->lv && c < S->nctx; c++) {
		free(b->lv[c]);
		free(b->linit[c]);
	}
	free(b->ln);
	free(b->lv);
	free(b->linit);
	free(b);
}

/* The elements of b that thread T sees. */
typedef struct View {
	SVal *v;
	uint8_t *init;
	int64_t n;
} View;

static View view(Sim *S, SimThread *T, SimBuf *b)
{
	if (b->mem == MEM_LOCAL)
		return (View){b->lv[T->ctx], b->linit[T->ctx], b->ln[T->ctx]};
	if (b->mem == MEM_SHARED && b->gen != S->gen)
		return (View){NULL, NULL, 0}; /* not allocated in this block yet */
	return (View){b->v, b->init, b->n};
}

/* (Re)allocates a shared buffer for the current block or a local one for T's context. */
static void alloc_buf(Sim *S, SimThread *T, SimBuf *b, int64_t n)
{
	if (n < 0)
		n = 0;
	if (b->mem == MEM_LOCAL) {
		int c = T->ctx;
		int64_t all; /* one copy per thread context */
		if (__builtin_mul_overflow(n, (int64_t)S->nctx, &all))
			all = INT64_MAX;
		if (!elements_fit(S, all, "local array", b->t->name))
			return;
		if (n > b->ln[c] || !b->lv[c]) {
			free(b->lv[c]);
			free(b->linit[c]);
			b->lv[c] = calloc((size_t)(n ? n : 1), sizeof(SVal));
			b->linit[c] = malloc((size_t)(n ? n : 1));
		}
		b->ln[c] = n;
		memset(b->linit[c], 0, (size_t)(n ? n : 1));
		return;
	}
	if (b->gen == S->gen && b->n == n)
		return; /* another thread of this block declared it already */
	if (b->gen == S->gen && b->n != n)
		fail(S, "shared buffer %s allocated with %lld and %lld elements in one block",
		     b->t->name, (long long)b->n, (long long)n);
	if (!elements_fit(S, n, "shared buffer", b->t->name))
		return;
	if (n > b->n || !b->v) {
		free(b->v);
		free(b->init);
		free(b->sh);
		b->v = calloc((size_t)(n ? n : 1), sizeof(SVal));
		b->init = malloc((size_t)(n ? n : 1));
		b->sh = calloc((size_t)(n ? n : 1), sizeof(SimShared));
	}
	b->n = n;
	b->gen = S->gen;
	memset(b->init, 0, (size_t)(n ? n : 1));
	memset(b->sh, 0, sizeof(SimShared) * (size_t)(n ? n : 1));
}

/* ---- detectors on one element --------------------------------------------------------- */

static void set_other(SimReport *r, Stmt *s, bool write, Sim *S, int64_t block, int32_t tid)
{
	if (!r)
		return;
	r->other = s;
	r->other_span = s ? s->span : (Span){0, 0, 0};
	r->other_write = write;
	r->has_other_thread = tid >= 0;
	int64_t b = block;
	r->other_block[0] = b % S->grid[0];
	r->other_block[1] = b / S->grid[0] % S->grid[1];
	r->other_block[2] = b / S->grid[0] / S->grid[1];
	r->other_thread[0] = tid % S->block[0];
	r->other_thread[1] = tid / S->block[0] % S->block[1];
	r->other_thread[2] = tid / S->block[0] / S->block[1];
}

static void race(Sim *S, SimBuf *b, int64_t off, bool write, Stmt *other, bool other_write,
		 int64_t block, int32_t tid)
{
	SimFault kind = b->mem == MEM_SHARED ? SF_RACE : SF_GLOBAL_RACE;
	SimReport *r = sim_report_new(S, kind, S->stmt, b->t->name);

	if (!r)
		return;
	r->mem = b->mem;
	r->dtype = b->dt;
	r->write = write;
	r->offset = off;
	r->size = b->n;
	const char *what = write ? (other_write ? "write-after-write" : "write-after-read")
				 : "read-after-write";
	r->detail = xstrdup(what);
	set_other(r, other, other_write, S, block, tid);
}

static void shared_read(Sim *S, SimThread *T, SimBuf *b, int64_t off)
{
	SimShared *m = &b->sh[off];

	if (m->pending) {
		SimReport *r = sim_report_new(S, SF_ASYNC_READ, S->stmt, b->t->name);
		if (r) {
			r->mem = b->mem, r->dtype = b->dt, r->offset = off, r->size = b->n;
			set_other(r, NULL, true, S, S->blin, m->pending - 1);
		}
	}
	if (m->w_epoch == S->epoch && m->w_tid != T->lin)
		race(S, b, off, false, m->w_stmt, true, S->blin, m->w_tid);
	if (m->r_epoch != S->epoch) {
		m->r_epoch = S->epoch;
		m->r_tid = T->lin;
		m->r_tid2 = -1;
		m->r_stmt = S->stmt;
	} else if (m->r_tid != T->lin) {
		m->r_tid2 = T->lin;
	}
}

static void shared_write(Sim *S, SimThread *T, SimBuf *b, int64_t off)
{
	SimShared *m = &b->sh[off];

	if (m->w_epoch == S->epoch && m->w_tid != T->lin)
		race(S, b, off, true, m->w_stmt, true, S->blin, m->w_tid);
	else if (m->r_epoch == S->epoch && (m->r_tid != T->lin || m->r_tid2 >= 0))
		race(S, b, off, true, m->r_stmt, false, S->blin,
		     m->r_tid != T->lin ? m->r_tid : m->r_tid2);
	m->w_epoch = S->epoch;
	m->w_tid = T->lin;
	m->w_stmt = S->stmt;
}

/* Global memory has no barrier across blocks: another block's write always conflicts. */
static bool global_conflict(Sim *S, SimThread *T, SimGlobal *g)
{
	return g->epoch && (g->block != S->blin || (g->epoch == S->epoch && g->tid != T->lin));
}

static void global_access(Sim *S, SimThread *T, SimBuf *b, int64_t off, bool write)
{
	SimGlobal *g = &b->gl[off];

	if (global_conflict(S, T, g))
		race(S, b, off, write, NULL, true, g->block, g->tid);
	if (write) {
		g->epoch = S->epoch;
		g->tid = T->lin;
		g->block = S->blin;
	}
}

/* Bounds and initialization; true when the access may proceed. */
static bool check_access(Sim *S, SimThread *T, SimBuf *b, View w, int64_t off, bool write)
{
	if (off < 0 || off >= w.n) {
		sim_report(S, SF_OOB, b, off, w.n, write);
		return false;
	}
	if (!write && !w.init[off])
		sim_report(S, SF_UNINIT, b, off, w.n, false);
	if (b->sh)
		(write ? shared_write : shared_read)(S, T, b, off);
	else if (b->gl)
		global_access(S, T, b, off, write);
	return true;
}

static SVal read_elem(Sim *S, SimThread *T, SimBuf *b, int64_t off)
{
	View w = view(S, T, b);

	if (!check_access(S, T, b, w, off, false))
		return vi(0);
	return w.v[off];
}

static void write_elem(Sim *S, SimThread *T, SimBuf *b, int64_t off, SVal v)
{
	View w = view(S, T, b);

	if (!check_access(S, T, b, w, off, true))
		return;
	w.v[off] = v;
	w.init[off] = 1;
}

/* ---- expressions ---------------------------------------------------------------------- */

static SVal eval(Sim *S, SimThread *T, IrExpr *e);

static SimBuf *buf_of(Sim *S, Tensor *t)
{
	SimBuf *b = sim_buf(S, t);

	if (!b)
		fail(S, "buffer %s is used but never allocated", t->name);
	return b;
}

static SVal eval_load(Sim *S, SimThread *T, IrExpr *e)
{
	SimBuf *b = buf_of(S, e->tensor);
	int64_t off = asi(eval(S, T, e->args[0]), e->args[0]->dtype);

	if (!b)
		return cv(vi(0), DT_I64, e->dtype);
	return cv(read_elem(S, T, b, off), b->dt, e->dtype);
}

static SVal eval_op(Sim *S, SimThread *T, IrExpr *e)
{
	IrExpr *l = e->args[0], *r = op_arity(e->op) == 2 ? e->args[1] : NULL;
	char kind = op_kind(e->op);

	if (kind == 'l') { /* short-circuit, like C */
		bool x = truthy(eval(S, T, l), l->dtype);
		if (e->op == OP_NOT)
			return cv(vi(!x), DT_BOOL, e->dtype);
		bool y = e->op == OP_AND ? x && truthy(eval(S, T, r), r->dtype)
					 : x || truthy(eval(S, T, r), r->dtype);
		return cv(vi(y), DT_BOOL, e->dtype);
	}
	SVal a = eval(S, T, l), b = vi(0);
	if (r)
		b = eval(S, T, r);
	DType ct;
	switch (kind) {
	case 'a':
	case 'm':
		ct = dtype_compute(e->dtype);
		a = cv(a, l->dtype, ct);
		if (r)
			b = cv(b, r->dtype, ct);
		if (kind == 'a' && r && interp_div_by_zero(e->op, ct, b))
			sim_report_new(S, SF_DIV_ZERO, S->stmt, NULL);
		return cv(kind == 'a' ? interp_arith(e->op, ct, a, b) : minmax(e->op, ct, a, b), ct,
			  e->dtype);
	case 'c':
		ct = dtype_compute(dtype_promote(l->dtype, r->dtype));
		return cv(vi(compare(e->op, ct, cv(a, l->dtype, ct), cv(b, r->dtype, ct))), DT_BOOL,
			  e->dtype);
	case 'f': {
		ct = dtype_compute(e->dtype) == DT_F64 ? DT_F64 : DT_F32;
		double x = asf(cv(a, l->dtype, ct), ct), y = r ? asf(cv(b, r->dtype, ct), ct) : 0;
		double v = e->op == OP_EXP_LOWP && ct == DT_F32 ? interp_exp_lowp(x)
								: interp_fmath(e->op, x, y);
		return cv(vf(rnd(ct, v)), ct, e->dtype);
	}
	default:
		unreachable();
	}
}

static SVal eval_var(Sim *S, SimThread *T, IrExpr *e)
{
	Var *v = e->var;

	if (v->id < 0 || v->id >= S->k->nvars) {
		fail(S, "variable %s has no slot", v->name);
		return vi(0);
	}
	if (!T->var_init[v->id]) {
		SimReport *r = sim_report_new(S, SF_UNINIT, S->stmt, v->name);
		if (r)
			r->mem = MEM_LOCAL, r->dtype = v->dtype, r->offset = -1, r->size = 1;
	}
	return cv(T->vars[v->id], v->dtype, e->dtype);
}

static SVal eval(Sim *S, SimThread *T, IrExpr *e)
{
	switch (e->kind) {
	case EX_INT:
		return cv(vi(e->ival), DT_I64, e->dtype);
	case EX_FLOAT:
		return cv(vf(e->fval), DT_F64, e->dtype);
	case EX_PARAM:
		for (int i = 0; i < S->f->nparams; i++)
			if (S->f->params[i] == e->param)
				return cv(S->params[i], e->param->dtype, e->dtype);
		fail(S, "unknown parameter %s", e->param->name);
		return vi(0);
	case EX_SIZE:
		return cv(vi(S->sizes[e->size->index]), DT_I64, e->dtype);
	case EX_VAR:
		return eval_var(S, T, e);
	case EX_PAR:
		if (par_is_block(e->par))
			return cv(vi(S->bid[e->par - PT_BIDX]), DT_I64, e->dtype);
		if (par_is_thread(e->par))
			return cv(vi(T->tid[e->par - PT_TIDX]), DT_I64, e->dtype);
		return cv(vi(0), DT_I64, e->dtype);
	case EX_LOAD:
		return eval_load(S, T, e);
	case EX_OP:
		return eval_op(S, T, e);
	case EX_SELECT: {
		IrExpr *p = truthy(eval(S, T, e->args[0]), e->args[0]->dtype) ? e->args[1]
									      : e->args[2];
		return cv(eval(S, T, p), p->dtype, e->dtype);
	}
	case EX_CAST:
		return cv(eval(S, T, e->args[0]), e->args[0]->dtype, e->dtype);
	case EX_AXIS:
	case EX_ACCESS:
	case EX_REDUCE:
		break;
	}
	fail(S, "expression kind %d cannot appear in a lowered kernel", (int)e->kind);
	return vi(0);
}

static int64_t eval_i64(Sim *S, SimThread *T, IrExpr *e)
{
	return asi(eval(S, T, e), e->dtype);
}

/* ---- cp.async --------------------------------------------------------------------------- */

/* Elements past nread are zero-filled without a global read, so only the first nread source
 * elements are bounds-checked. */
void sim_async_copy_part(Sim *S, SimThread *T, Stmt *s, SimBuf *dst, int64_t dst_off,
			 SimBuf *src, int64_t src_off, int n, int nread)
{
	View d = view(S, T, dst), sv = view(S, T, src);

	for (int i = 0; i < n; i++) {
		if (!check_access(S, T, dst, d, dst_off + i, true))
			return;
		if (i < nread && !check_access(S, T, src, sv, src_off + i, false))
			return;
	}
	for (int i = 0; i < n; i++)
		if (dst->sh)
			dst->sh[dst_off + i].pending = T->lin + 1;
	if (T->ncopies == T->capcopies) {
		T->capcopies = T->capcopies ? 2 * T->capcopies : 8;
		T->copies = realloc(T->copies, sizeof *T->copies * (size_t)T->capcopies);
	}
	T->copies[T->ncopies++] =
		(SimCopy){dst, src, dst_off, src_off, n, nread == 0, 0, s, nread};
}

void sim_async_copy(Sim *S, SimThread *T, Stmt *s, SimBuf *dst, int64_t dst_off, SimBuf *src,
		    int64_t src_off, int n, bool zero_fill)
{
	sim_async_copy_part(S, T, s, dst, dst_off, src, src_off, n, zero_fill ? 0 : n);
}

void sim_async_commit(Sim *S, SimThread *T)
{
	T->groups++;
	for (int i = 0; i < T->ncopies; i++)
		if (!T->copies[i].group)
			T->copies[i].group = T->groups;
}

/* The copy lands: values, initialized bits, and a write by its thread in this epoch. */
static void land(Sim *S, SimThread *T, SimCopy *c)
{
	View d = view(S, T, c->dst), sv = view(S, T, c->src);
	Stmt *saved = S->stmt;

	S->stmt = c->stmt;
	for (int i = 0; i < c->n; i++) {
		int64_t o = c->dst_off + i;
		if (o < 0 || o >= d.n)
			continue; /* reported at issue */
		SVal v = vi(0);
		if (i < c->nread && c->src_off + i >= 0 && c->src_off + i < sv.n)
			v = sv.v[c->src_off + i];
		else if (dtype_is_float(c->dst->dt))
			v = vf(0);
		d.v[o] = v;
		d.init[o] = 1;
		if (c->dst->sh) {
			c->dst->sh[o].pending = 0;
			c->dst->sh[o].w_epoch = S->epoch;
			c->dst->sh[o].w_tid = T->lin;
			c->dst->sh[o].w_stmt = c->stmt;
		}
	}
	S->stmt = saved;
}

void sim_async_wait(Sim *S, SimThread *T, int keep)
{
	int limit = keep < 0 ? T->groups + 1 : T->groups - keep, n = 0;

	for (int i = 0; i < T->ncopies; i++) {
		SimCopy *c = &T->copies[i];
		if ((c->group && c->group <= limit) || keep < 0)
			land(S, T, c);
		else
			T->copies[n++] = *c;
	}
	T->ncopies = n;
}

/* At the end of a thread: copies still in flight are a fault; their data never lands. */
static void async_at_exit(Sim *S, SimThread *T)
{
	for (int i = 0; i < T->ncopies; i++) {
		SimCopy *c = &T->copies[i];
		Stmt *saved = S->stmt;
		S->stmt = c->stmt;
		SimReport *r = sim_report_new(S, SF_ASYNC_PENDING, c->stmt, c->dst->t->name);
		S->stmt = saved;
		if (r) {
			r->mem = c->dst->mem, r->dtype = c->dst->dt, r->offset = c->dst_off;
			r->size = c->dst->n;
			r->write = true; /* the copy's write of its destination */
			r->detail = xstrdup(c->group ? "committed but never waited for"
						     : "never committed");
		}
		for (int j = 0; c->dst->sh && j < c->n; j++)
			if (c->dst_off + j >= 0 && c->dst_off + j < c->dst->n)
				c->dst->sh[c->dst_off + j].pending = 0;
	}
	T->ncopies = 0;
}

/* ---- statements ----------------------------------------------------------------------- */

static void push(Sim *S, SimThread *T, Stmt *list, Stmt *loop, int64_t extent)
{
	if (T->depth == SIM_MAX_DEPTH) {
		fail(S, "statements nested deeper than %d", SIM_MAX_DEPTH);
		return;
	}
	T->stack[T->depth++] = (SimFrame){list, loop, extent};
}

static void exec_store(Sim *S, SimThread *T, Stmt *s)
{
	if (!s->store.offset) {
		fail(S, "store to %s before the indexing pass", s->store.tensor->name);
		return;
	}
	SimBuf *b = buf_of(S, s->store.tensor);
	SVal v = eval(S, T, s->store.value);
	int64_t off = eval_i64(S, T, s->store.offset);
	if (b)
		write_elem(S, T, b, off, cv(v, s->store.value->dtype, b->dt));
}

/* One vector access on each side: both must be aligned to the vector size (the buffers are:
 * the launcher checks global pointers, shared and local arrays are declared aligned). */
static void exec_vstore(Sim *S, SimThread *T, Stmt *s)
{
	SimBuf *d = buf_of(S, s->copy.tensor), *src = buf_of(S, s->copy.src);
	int64_t doff = eval_i64(S, T, s->copy.offset), soff = eval_i64(S, T, s->copy.src_offset);
	SVal tmp[16];

	if (!d || !src)
		return;
	if (s->copy.vec <= 0 || s->copy.vec > 16) {
		fail(S, "vector access of %d elements", s->copy.vec);
		return;
	}
	if (doff % s->copy.vec || soff % s->copy.vec) {
		SimBuf *b = doff % s->copy.vec ? d : src;
		int64_t off = doff % s->copy.vec ? doff : soff;
		sim_report(S, SF_MISALIGNED, b, off, view(S, T, b).n, b == d);
	}
	for (int i = 0; i < s->copy.vec; i++)
		tmp[i] = cv(read_elem(S, T, src, soff + i), src->dt, d->dt);
	for (int i = 0; i < s->copy.vec; i++)
		write_elem(S, T, d, doff + i, tmp[i]);
}

/* cp.async: lanes whose predicate is false are zero-filled without reading global memory; with
 * Stmt.size only the first `size` elements (clamped to 0..vec) are read, the rest are zeros. */
static void exec_cp_async(Sim *S, SimThread *T, Stmt *s)
{
	SimBuf *d = buf_of(S, s->copy.tensor), *src = buf_of(S, s->copy.src);
	bool zero = s->copy.cond && !truthy(eval(S, T, s->copy.cond), s->copy.cond->dtype);
	int64_t doff = eval_i64(S, T, s->copy.offset), soff = eval_i64(S, T, s->copy.src_offset);
	int64_t nread = zero ? 0 : s->copy.vec;

	if (!zero && s->copy.size) {
		nread = eval_i64(S, T, s->copy.size);
		nread = nread < 0 ? 0 : nread > s->copy.vec ? s->copy.vec : nread;
	}

	if (!d || !src)
		return;
	if (s->copy.vec <= 0 || s->copy.vec > 16) {
		fail(S, "cp.async of %d elements", s->copy.vec);
		return;
	}
	if (doff % s->copy.vec || (!zero && soff % s->copy.vec)) {
		SimBuf *b = doff % s->copy.vec ? d : src;
		int64_t off = doff % s->copy.vec ? doff : soff;
		sim_report(S, SF_MISALIGNED, b, off, view(S, T, b).n, b == d);
	}
	sim_async_copy_part(S, T, s, d, doff, src, soff, s->copy.vec, (int)nread);
}

static void exec_alloc(Sim *S, SimThread *T, Stmt *s)
{
	SimBuf *b = sim_buf(S, s->alloc.tensor);

	if (!b)
		b = add_buf(S, s->alloc.tensor, s->alloc.mem);
	if (s->alloc.mem == MEM_GLOBAL) {
		fail(S, "global buffer %s allocated inside the kernel", s->alloc.tensor->name);
		return;
	}
	alloc_buf(S, T, b, eval_i64(S, T, s->alloc.size));
}

/* KS_MMA_LOAD by per-lane loads: the lane's fragment registers from its own reads. */
static void exec_frag_load(Sim *S, SimThread *T, Stmt *s)
{
	SimBuf *f = buf_of(S, s->mma.tensor);
	int64_t o = eval_i64(S, T, s->mma.offset);
	for (int r = 0; f && r < s->mma.nidx; r++)
		write_elem(S, T, f, o + r, eval(S, T, s->mma.idx[r]));
}

/* var = value (a KS_LET, or a KS_BLOCK_REDUCE's own partial) */
static void assign(Sim *S, SimThread *T, Var *var, IrExpr *value)
{
	SVal v = eval(S, T, value);

	T->vars[var->id] = cv(v, value->dtype, var->dtype);
	T->var_init[var->id] = 1;
}

static void exec_for(Sim *S, SimThread *T, Stmt *s)
{
	int64_t n = eval_i64(S, T, s->loop.var->extent);

	if (n <= 0 || !s->loop.body)
		return;
	if (S->max_steps && n > S->max_steps - S->res->steps) {
		over_budget(S, "loop %s of %lld iterations is more than the step budget of %lld "
			    "(%lld steps taken)", s->loop.var->name, (long long)n,
			    (long long)S->max_steps, (long long)S->res->steps);
		return;
	}
	T->vars[s->loop.var->id] = vi(0);
	T->var_init[s->loop.var->id] = 1;
	push(S, T, s->loop.body, s, n);
}

static SVal red_combine(ReduceOp r, DType t, SVal a, SVal b);

/* KS_GRID_REDUCE: blocks run one after another, so the atomic increment is a plain
 * read-add-write and the fences are no-ops. The partial goes to ws[o * R + r]; the block that
 * brings sem[o] to R folds ws[o * R + 0 .. R-1] in order (as __fus_grid_reduce does), resets
 * sem[o] and returns true: it runs the store. The workspace is checked like any global buffer
 * (bounds, reads of partials never written) but not for races: the protocol orders it. */
static bool exec_grid_reduce(Sim *S, SimThread *T, Stmt *s)
{
	SimBuf *ws = buf_of(S, s->grid_red.ws), *sem = buf_of(S, s->grid_red.sem);
	int64_t o = eval_i64(S, T, s->grid_red.offset), r = eval_i64(S, T, s->grid_red.part);
	int64_t R = eval_i64(S, T, s->grid_red.nparts), id = s->grid_red.var->id;
	DType t = s->grid_red.var->dtype;

	if (!ws || !sem)
		return false;
	write_elem(S, T, ws, o * R + r, cv(T->vars[id], t, ws->dt));
	SVal old = read_elem(S, T, sem, o);
	write_elem(S, T, sem, o, vi(old.i + 1));
	if (old.i != R - 1)
		return false;
	SVal v = cv(read_elem(S, T, ws, o * R), ws->dt, t);
	for (int64_t i = 1; i < R; i++) {
		SVal part = cv(read_elem(S, T, ws, o * R + i), ws->dt, t);
		v = red_combine(s->grid_red.red, t, v, part);
	}
	T->vars[id] = v;
	T->var_init[id] = 1;
	write_elem(S, T, sem, o, vi(0));
	return true;
}

/* Runs T until it ends or reaches a barrier. */
static void run_thread(Sim *S, SimThread *T)
{
	S->cur = T;
	T->state = TS_RUN;
	while (T->depth > 0 && !S->res->error) {
		SimFrame *f = &T->stack[T->depth - 1];
		Stmt *s = f->s;
		if (!s) {
			if (f->loop && ++T->vars[f->loop->loop.var->id].i < f->extent) {
				f->s = f->loop->loop.body;
				step(S);
				continue;
			}
			T->depth--;
			continue;
		}
		f->s = s->next;
		S->stmt = s;
		step(S);
		switch (s->kind) {
		case KS_FOR: exec_for(S, T, s); break;
		case KS_IF:
			if (truthy(eval(S, T, s->branch.cond), s->branch.cond->dtype))
				push(S, T, s->branch.then, NULL, 0);
			else if (s->branch.els)
				push(S, T, s->branch.els, NULL, 0);
			break;
		case KS_ALLOC: exec_alloc(S, T, s); break;
		case KS_STORE: exec_store(S, T, s); break;
		case KS_VSTORE: exec_vstore(S, T, s); break;
		case KS_LET: assign(S, T, s->let.var, s->let.value); break;
		case KS_CP_ASYNC: exec_cp_async(S, T, s); break;
		case KS_CP_COMMIT: sim_async_commit(S, T); break;
		case KS_CP_WAIT: sim_async_wait(S, T, s->wait.n); break;
		case KS_SYNC:
			T->state = TS_BARRIER;
			T->at = s;
			return;
		case KS_BLOCK_REDUCE:
			/* the partial waits in var; block_reduce() combines at the release */
			assign(S, T, s->block_red.var, s->block_red.value);
			T->state = TS_BARRIER;
			T->at = s;
			return;
		case KS_MMA_LOAD:
			if (!s->mma.ldm) { /* the lane's own loads into its registers */
				exec_frag_load(S, T, s);
				break;
			}
			T->state = TS_WARP; /* ldmatrix is a warp collective, like the mma */
			T->at = s;
			return;
		case KS_MMA:
			/* a warp collective: warp_mma() runs it when the whole warp is here */
			T->state = TS_WARP;
			T->at = s;
			return;
		case KS_GRID_REDUCE:
			if (exec_grid_reduce(S, T, s))
				push(S, T, s->grid_red.body, NULL, 0);
			break;
		case KS_COMMENT:
		case KS_NEST:
			break;
		default:
			fail(S, "statement kind %d is not simulated", (int)s->kind);
			break;
		}
	}
	T->state = TS_DONE;
	S->stmt = NULL;
	async_at_exit(S, T);
}

/* ---- blocks --------------------------------------------------------------------------- */

static bool is_barrier(Stmt *s, void *ctx)
{
	(void)ctx;
	return s->kind == KS_SYNC || s->kind == KS_BLOCK_REDUCE || s->kind == KS_MMA ||
	       (s->kind == KS_MMA_LOAD && s->mma.ldm);
}

static bool has_sync(Stmt *s)
{
	return ir_stmts_any(s, is_barrier, NULL);
}

static void thread_start(Sim *S, SimThread *T, int64_t lin)
{
	T->lin = (int32_t)lin;
	T->tid[0] = lin % S->block[0];
	T->tid[1] = lin / S->block[0] % S->block[1];
	T->tid[2] = lin / S->block[0] / S->block[1];
	memset(T->var_init, 0, (size_t)(S->k->nvars ? S->k->nvars : 1));
	T->depth = 0;
	T->ncopies = 0;
	T->groups = 0;
	T->at = NULL;
	T->state = TS_RUN;
	push(S, T, S->k->body, NULL, 0);
	step(S);
}

static void thread_init(Sim *S, SimThread *T, int ctx)
{
	int nv = S->k->nvars ? S->k->nvars : 1;

	memset(T, 0, sizeof *T);
	T->ctx = ctx;
	T->vars = calloc((size_t)nv, sizeof(SVal));
	T->var_init = calloc((size_t)nv, 1);
}

static void thread_free(SimThread *T)
{
	free(T->vars);
	free(T->var_init);
	free(T->copies);
}

static void barrier_fault(Sim *S, SimThread *ts, Stmt *at, SimThread *odd, int64_t arrived)
{
	Stmt *saved = S->stmt;
	SimThread *cur = S->cur;

	S->stmt = at;
	for (int64_t i = 0; i < S->nthreads; i++) /* the report names a thread that waits */
		if (ts[i].state == TS_BARRIER && ts[i].at == at) {
			S->cur = &ts[i];
			break;
		}
	SimReport *r = sim_report_new(S, SF_BARRIER, at, NULL);
	if (r) {
		Buf b = {0};
		set_other(r, odd->state == TS_BARRIER ? odd->at : NULL, false, S, S->blin, odd->lin);
		buf_printf(&b, "%lld of %lld threads arrived; thread (%lld, %lld, %lld) %s",
			   (long long)arrived, (long long)S->nthreads, (long long)odd->tid[0],
			   (long long)odd->tid[1], (long long)odd->tid[2],
			   odd->state == TS_DONE ? "has exited" : "waits at another barrier");
		r->detail = b.s;
	}
	S->stmt = saved;
	S->cur = cur;
}

/* ---- block reductions ----------------------------------------------------------------- */

static SVal red_combine(ReduceOp r, DType t, SVal a, SVal b)
{
	if (r == RED_MAX || r == RED_MIN)
		return minmax(r == RED_MAX ? OP_MAX : OP_MIN, t, a, b);
	return interp_arith(OP_ADD, t, a, b);
}

/* A Welford triple (count, mean, M2) in the accumulation dtype; a plain reduction's value is
 * its .n alone. */
typedef struct Wf {
	SVal n, m, m2;
} Wf;

/* a + b, Chan et al., in __fus_welford_combine's order of operations: an empty side gives
 * the other; otherwise nn = na + nb, d = mb - ma, f = nb / nn, m = ma + d * f,
 * m2 = (m2a + m2b) + d * d * na * f. */
static Wf wf_combine(DType t, Wf a, Wf b)
{
	if (b.n.f == 0)
		return a;
	if (a.n.f == 0)
		return b;
	SVal nn = interp_arith(OP_ADD, t, a.n, b.n), d = interp_arith(OP_SUB, t, b.m, a.m);
	SVal f = interp_arith(OP_DIV, t, b.n, nn);
	SVal dd = interp_arith(OP_MUL, t, interp_arith(OP_MUL, t, d, d), a.n);
	Wf r;
	r.m = interp_arith(OP_ADD, t, a.m, interp_arith(OP_MUL, t, d, f));
	r.m2 = interp_arith(OP_ADD, t, interp_arith(OP_ADD, t, a.m2, b.m2),
			    interp_arith(OP_MUL, t, dd, f));
	r.n = nn;
	return r;
}

static SVal *wf_at(Wf *w, int q)
{
	return q == 0 ? &w->n : q == 1 ? &w->m : &w->m2;
}

/* Online (max, sum) pairs in .n and .m, in __fus_red_online's order of operations: the side
 * with the larger max (b when b.max > a.max or is NaN) keeps its sum, the other's is scaled by
 * e = exp(lo - hi) (1 when they are equal: no exp(-inf - -inf)); sum = big + small * e. */
static Wf online_combine(DType t, Wf a, Wf b)
{
	bool take = isnan(b.n.f) || b.n.f > a.n.f;
	SVal hi = take ? b.n : a.n, lo = take ? a.n : b.n;
	SVal big = take ? b.m : a.m, small = take ? a.m : b.m, e = vf(1.0);
	if (lo.f != hi.f)
		e = vf(rnd(t, interp_fmath(OP_EXP, interp_arith(OP_SUB, t, lo, hi).f, 0)));
	return (Wf){.n = hi, .m = interp_arith(OP_ADD, t, big, interp_arith(OP_MUL, t, small, e))};
}

/* a op b for the block reduction s: Welford's or the online combine, or red_combine on the
 * values. */
static Wf block_combine(Stmt *s, DType t, Wf a, Wf b)
{
	if (s->block_red.red == RED_WELFORD)
		return wf_combine(t, a, b);
	if (s->block_red.red == RED_ONLINE)
		return online_combine(t, a, b);
	return (Wf){.n = red_combine(s->block_red.red, t, a.n, b.n)};
}

/* KS_BLOCK_REDUCE at its release: every thread's var (and, for RED_WELFORD, its mean and M2;
 * for RED_ONLINE, its sum) gets its group's result, combined in the order of
 * kir_block_reduce_shape (the CUDA helpers' order, so the bits agree). In a butterfly step a
 * plain reduction combines its own value first (v = op(v, shfl_xor(v))); Welford's the
 * lower-numbered thread's triple first (as __fus_welford_warp), so every thread of a group
 * gets the same bits (the online combination is symmetric). */
static void block_reduce(Sim *S, SimThread *ts, Stmt *s)
{
	BlockReduceShape sh;
	bool welford = s->block_red.red == RED_WELFORD, online = s->block_red.red == RED_ONLINE;
	int nv = welford ? 3 : online ? 2 : 1;
	int64_t n = S->nthreads, ids[3] = {s->block_red.var->id,
					   welford ? s->block_red.wmean->id
						   : online ? s->block_red.osum->id : 0,
					   welford ? s->block_red.wm2->id : 0};
	DType t = s->block_red.var->dtype;

	if (!kir_block_reduce_shape(S->k, s->block_red.pars, &sh) || sh.nthreads != n) {
		fail(S, "block reduction whose groups do not match the block");
		return;
	}
	Wf *v = calloc((size_t)n, sizeof(Wf)), *w = calloc((size_t)n, sizeof(Wf));
	for (int64_t i = 0; i < n; i++)
		for (int q = 0; q < nv; q++)
			*wf_at(&v[i], q) = ts[i].vars[ids[q]];
	if (sh.kind != BR_SMEM) {
		/* butterfly: v = op(v, v[lane ^ o]) in every lane at once */
		for (int64_t o = (sh.kind == BR_WARP ? sh.count : 32) / 2; o > 0; o /= 2) {
			for (int64_t i = 0; i < n; i++) {
				int64_t j = i ^ o;
				bool swap = welford && j < i;
				w[i] = j >= n ? v[i]
					      : block_combine(s, t, v[swap ? j : i], v[swap ? i : j]);
			}
			memcpy(v, w, sizeof(Wf) * (size_t)n);
		}
	}
	for (int64_t i = 0; i < n; i++) {
		int64_t span = sh.count * sh.stride, base = i / span * span + i % sh.stride;
		if (sh.kind == BR_WARP) {
			w[i] = v[i];
		} else if (sh.kind == BR_WARPS) {
			/* the group's warps in order: lane 0 of each holds its warp's result */
			int64_t first = i / sh.count * sh.count;
			w[i] = v[first];
			for (int64_t q = 1; q < sh.count / 32; q++)
				w[i] = block_combine(s, t, w[i], v[first + 32 * q]);
		} else {
			w[i] = v[base];
			for (int64_t q = 1; q < sh.count; q++)
				w[i] = block_combine(s, t, w[i], v[base + q * sh.stride]);
		}
	}
	for (int64_t i = 0; i < n; i++) {
		for (int q = 0; q < nv; q++) {
			ts[i].vars[ids[q]] = *wf_at(&w[i], q);
			ts[i].var_init[ids[q]] = 1;
		}
	}
	free(v);
	free(w);
}

/* ---- warp collectives: mma -------------------------------------------------------------- */

/* The hardware's fragment layouts of mma.m16n8k16 (f16/bf16 operands, f32 accumulators), from
 * the PTX ISA's formulas with groupID = lane >> 2 and threadID_in_group = lane % 4. Written
 * here on their own, not taken from the compiler's table (ir/mma.c): a lowering that puts an
 * element in the wrong lane or register computes a wrong product here, which `fusc check`
 * reports as a mismatch. */
static void hw_frag(char op, int lane, int i, int *row, int *col)
{
	int gid = lane >> 2, tig = lane % 4;
	if (op == 'a') {
		*row = i < 2 || (i >= 4 && i < 6) ? gid : gid + 8;
		*col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
	} else if (op == 'b') {
		*row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
		*col = gid;
	} else {
		*row = i < 2 ? gid : gid + 8;
		*col = tig * 2 + (i & 1);
	}
}

/* The shared-memory wavefronts of one ldmatrix phase: 8 rows of 16 bytes at element offsets
 * o[0..8) of a buffer of es-byte elements. The 32 banks of 4 bytes make 8 groups of 16 bytes;
 * rows at one address are one access (a broadcast), distinct rows in one group are served one
 * after the other. Offsets from the buffer's start: a base that is a multiple of 16 bytes
 * moves every row by the same number of groups, which changes no count. */
int sim_ldm_wavefronts(const int64_t o[8], int es)
{
	int worst = 0;
	for (int i = 0; i < 8; i++) {
		int n = 0;
		for (int j = 0; j < 8; j++) {
			bool first = true; /* the first row at its 16-byte address */
			for (int p = 0; p < j; p++)
				first &= o[p] * es / 16 != o[j] * es / 16;
			n += first && (o[j] * es / 16 - o[i] * es / 16) % 8 == 0;
		}
		worst = n > worst ? n : worst;
	}
	return worst;
}

/* ldmatrix (.m8n8.b16, x4 or x2[.trans]) of one warp from the row addresses in load e of each
 * lane: lanes 0 .. 8 * nmat - 1 give the rows (lane 8i + j row j of matrix i), each reads its
 * 8 elements (checked as its own reads; the address 16-byte aligned). Register i (2 elements,
 * half h) of lane L is then row L / 4 of matrix i, elements 2 * (L % 4) + h; with .trans,
 * row 2 * (L % 4) + h, element L / 4. out[L][2 * i + h]. */
static void warp_ldmatrix(Sim *S, SimThread *w, IrExpr *e, int nmat, bool trans, double out[32][8])
{
	double rows[32][8] = {{0}};
	int64_t offs[32];
	SimBuf *b = buf_of(S, e->tensor);

	if (!b)
		return;
	for (int lane = 0; lane < 8 * nmat; lane++) {
		SimThread *T = &w[lane];
		S->cur = T;
		int64_t o = offs[lane] = eval_i64(S, T, e->args[0]);
		if (o % 8)
			sim_report(S, SF_MISALIGNED, b, o, view(S, T, b).n, false);
		for (int j = 0; j < 8; j++)
			rows[lane][j] = asf(read_elem(S, T, b, o + j), b->dt);
	}
	for (int i = 0; i < nmat; i++) {
		int n = sim_ldm_wavefronts(offs + 8 * i, dtype_size(b->dt));
		S->res->ldm_phases++;
		S->res->ldm_wavefronts += n;
		if (n > S->res->ldm_worst)
			S->res->ldm_worst = n;
	}
	for (int lane = 0; lane < 32; lane++)
		for (int i = 0; i < nmat; i++)
			for (int h = 0; h < 2; h++)
				out[lane][2 * i + h] = trans ? rows[8 * i + 2 * (lane % 4) + h][lane / 4]
							     : rows[8 * i + lane / 4][2 * (lane % 4) + h];
}

/* KS_MMA by the 32 lanes of one warp (w[lane]): each lane reads its accumulator elements and
 * loads its operand elements (the bounds, initialization and race checks of its own reads),
 * or the warp runs ldmatrix on the lanes' row addresses; the matrices are assembled as the
 * hardware reads the registers; D = A B + C is computed with exact products, summed in
 * double and rounded to f32, and each lane gets its elements of D. */
static void warp_mma(Sim *S, SimThread *w, Stmt *s)
{
	const MmaInstr *in = s->mma.instr;
	double A[16][16] = {{0}}, B[16][16] = {{0}}, C[16][16] = {{0}}, reg[2][32][8];
	int64_t coff[32][4];
	SimBuf *acc = buf_of(S, s->mma.tensor);
	int na, nb, fa = mma_slot(s, 'a', &na), fb = mma_slot(s, 'b', &nb);

	if (!acc)
		return;
	if (in->shape != MMA_M16N8K16 || in->nc > 4) {
		fail(S, "mma.%s is not simulated", in->name);
		return;
	}
	if (s->mma.ldm) {
		fail(S, "mma with ldmatrix operands (passes/mma.c moves them into fragment loads)");
		return;
	}
	/* the operands' registers of every lane (fragment registers a KS_MMA_LOAD filled) */
	for (int op = 0; op < 2; op++) {
		int first = op ? fb : fa, n = op ? in->nb : in->na;
		for (int lane = 0; lane < 32; lane++) {
			S->cur = &w[lane];
			for (int r = 0; r < n; r++)
				reg[op][lane][r] = asf(eval(S, &w[lane], s->mma.idx[first + r]),
						       s->mma.idx[first + r]->dtype);
		}
	}
	for (int lane = 0; lane < 32; lane++) {
		SimThread *T = &w[lane];
		int row, col;
		S->cur = T;
		for (int r = 0; r < in->nc; r++) {
			hw_frag('c', lane, r, &row, &col);
			coff[lane][r] = eval_i64(S, T, s->mma.idx[r]);
			C[row][col] = read_elem(S, T, acc, coff[lane][r]).f;
		}
		for (int r = 0; r < in->na; r++) {
			hw_frag('a', lane, r, &row, &col);
			A[row][col] = reg[0][lane][r];
		}
		for (int r = 0; r < in->nb; r++) {
			hw_frag('b', lane, r, &row, &col);
			B[row][col] = reg[1][lane][r];
		}
	}
	for (int lane = 0; lane < 32; lane++) {
		S->cur = &w[lane];
		for (int r = 0; r < in->nc; r++) {
			int row, col;
			hw_frag('c', lane, r, &row, &col);
			double d = C[row][col];
			for (int k = 0; k < in->k; k++)
				d += A[row][k] * B[k][col];
			write_elem(S, &w[lane], acc, coff[lane][r], vf((double)(float)d));
		}
	}
}

/* KS_MMA_LOAD by ldmatrix: the warp's rows (warp_ldmatrix), each lane's registers written
 * to its fragment array. */
static void warp_frag_load(Sim *S, SimThread *w, Stmt *s)
{
	double reg[32][8];
	int n = s->mma.tiles * (s->mma.op == 'a' ? s->mma.instr->na : s->mma.instr->nb);
	SimBuf *f = buf_of(S, s->mma.tensor);

	if (!f)
		return;
	warp_ldmatrix(S, w, s->mma.idx[0], n / 2, s->mma.ldt != 0, reg);
	for (int lane = 0; lane < 32; lane++) {
		S->cur = &w[lane];
		int64_t o = eval_i64(S, &w[lane], s->mma.offset);
		for (int r = 0; r < n; r++)
			write_elem(S, &w[lane], f, o + r, vf(reg[lane][r]));
	}
}

/* Releases the warps whose 32 lanes all wait at the same KS_MMA; true when one ran. */
static bool release_warps(Sim *S, SimThread *ts)
{
	bool ran = false;
	for (int64_t w = 0; w + 32 <= S->nthreads; w += 32) {
		Stmt *at = ts[w].state == TS_WARP ? ts[w].at : NULL;
		int64_t n = 0;
		for (int64_t i = w; at && i < w + 32; i++)
			n += ts[i].state == TS_WARP && ts[i].at == at;
		if (!at || n != 32)
			continue;
		S->stmt = at;
		if (at->kind == KS_MMA_LOAD)
			warp_frag_load(S, &ts[w], at);
		else
			warp_mma(S, &ts[w], at);
		S->stmt = NULL;
		for (int64_t i = w; i < w + 32; i++)
			ts[i].state = TS_RUN;
		ran = true;
	}
	return ran;
}

/* Lanes at a KS_MMA whose warp can never complete it (lanes ended, wait at a barrier or at
 * another mma, or the block is no whole number of warps): reported, then released without
 * running it, so the simulation goes on. */
static void warp_fault(Sim *S, SimThread *ts)
{
	for (int64_t i = 0; i < S->nthreads; i++) {
		if (ts[i].state != TS_WARP)
			continue;
		int64_t w = i / 32 * 32, n = 0;
		for (int64_t j = w; j < w + 32 && j < S->nthreads; j++)
			n += ts[j].state == TS_WARP && ts[j].at == ts[i].at;
		Stmt *saved = S->stmt;
		SimThread *cur = S->cur;
		S->stmt = ts[i].at;
		S->cur = &ts[i];
		SimReport *r = sim_report_new(S, SF_BARRIER, ts[i].at, NULL);
		if (r)
			r->detail = xprintf("%lld of the 32 lanes of warp %lld arrived at the warp-wide mma (.sync.aligned needs all of them at the same instruction)",
					    (long long)n, (long long)(i / 32));
		S->stmt = saved;
		S->cur = cur;
		for (int64_t j = w; j < w + 32 && j < S->nthreads; j++)
			if (ts[j].state == TS_WARP && ts[j].at == ts[i].at)
				ts[j].state = TS_RUN;
	}
}

/* Threads run until every one waits at a barrier or has ended; then the barrier releases. A
 * barrier that not every thread reaches (some ended, or wait elsewhere) is reported and then
 * released anyway, so the simulation goes on. Warp collectives (KS_MMA) release per warp as
 * soon as its 32 lanes are there. */
static void run_block_barriers(Sim *S, SimThread *ts)
{
	for (int64_t i = 0; i < S->nthreads; i++)
		thread_start(S, &ts[i], i);
	for (;;) {
		for (int64_t i = 0; i < S->nthreads && !S->res->error; i++)
			if (ts[i].state == TS_RUN)
				run_thread(S, &ts[i]);
		if (S->res->error)
			return;
		if (release_warps(S, ts))
			continue;
		bool stuck = false;
		for (int64_t i = 0; i < S->nthreads; i++)
			stuck |= ts[i].state == TS_WARP;
		if (stuck) {
			warp_fault(S, ts);
			continue;
		}
		SimThread *first = NULL, *odd = NULL;
		int64_t arrived = 0;
		for (int64_t i = 0; i < S->nthreads; i++) {
			if (ts[i].state == TS_BARRIER && !first)
				first = &ts[i];
			if (ts[i].state == TS_BARRIER && ts[i].at == first->at)
				arrived++;
			else if (!odd)
				odd = &ts[i];
		}
		if (!first)
			return; /* every thread ended */
		if (odd)
			barrier_fault(S, ts, first->at, odd, arrived);
		if (first->at->kind == KS_BLOCK_REDUCE)
			block_reduce(S, ts, first->at);
		S->epoch++;
		for (int64_t i = 0; i < S->nthreads; i++)
			if (ts[i].state == TS_BARRIER)
				ts[i].state = TS_RUN;
	}
}

static void run_block(Sim *S, SimThread *ts, int64_t blin)
{
	S->blin = blin;
	S->bid[0] = blin % S->grid[0];
	S->bid[1] = blin / S->grid[0] % S->grid[1];
	S->bid[2] = blin / S->grid[0] / S->grid[1];
	S->block_epoch = ++S->epoch;
	S->gen++;
	if (S->has_sync) {
		run_block_barriers(S, ts);
		return;
	}
	for (int64_t i = 0; i < S->nthreads && !S->res->error; i++) {
		thread_start(S, &ts[0], i);
		run_thread(S, &ts[0]);
	}
}

/* ---- setup ---------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The blocks to run, in increasing order: all of them, or max distinct ones including the
 * first and the last. */
static int64_t *pick_blocks(int64_t total, int64_t max, uint64_t seed, int64_t *n)
{
	if (max <= 0 || total <= max) {
		int64_t *all = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
		for (int64_t i = 0; i < total; i++)
			all[i] = i;
		*n = total;
		return all;
	}
	if (max < 2)
		max = 2;
	int64_t *pick = malloc(sizeof(int64_t) * (size_t)max);
	uint64_t s = seed * 0x2545f4914f6cdd1dull + 7;
	int64_t k = 0;
	pick[k++] = 0;
	pick[k++] = total - 1;
	while (k < max) {
		int64_t b = (int64_t)(splitmix(&s) % (uint64_t)total);
		bool dup = false;
		for (int64_t j = 0; j < k && !dup; j++)
			dup = pick[j] == b;
		if (!dup)
			pick[k++] = b;
	}
	qsort(pick, (size_t)k, sizeof *pick, cmp_i64);
	*n = k;
	return pick;
}


/* The block types a grid reduction of k reduces over, as a mask. */
static bool add_grid_reduced(Stmt *s, void *ctx)
{
	if (s->kind == KS_GRID_REDUCE)
		*(unsigned *)ctx |= s->grid_red.pars;
	return false;
}

static unsigned grid_reduced(Stmt *s)
{
	unsigned m = 0;
	ir_stmts_any(s, add_grid_reduced, &m);
	return m;
}

/* The blocks to run. With grid reductions a sample takes whole segments (every block that
 * differs only in the reduced block types), so that each sampled element gets all its
 * partials and the last of them stores it. */
static int64_t *pick_segments(Sim *S, int64_t max, uint64_t seed, int64_t *n)
{
	unsigned m = grid_reduced(S->k->body);
	int64_t seg = 1, total = S->grid[0] * S->grid[1] * S->grid[2];
	for (int d = 0; d < 3; d++)
		if (m & (1u << (PT_BIDX + d)))
			seg *= S->grid[d];
	if (!m || seg <= 1 || max <= 0 || total <= max)
		return pick_blocks(total, max, seed, n);
	int64_t nseg, *segs = pick_blocks(total / seg, max / seg > 1 ? max / seg : 1, seed, &nseg);
	int64_t *out = malloc(sizeof(int64_t) * (size_t)(nseg * seg));
	int64_t k = 0;
	for (int64_t i = 0; i < nseg; i++) {
		/* segment i: its coordinates along the unreduced types, x fastest */
		int64_t rest = segs[i], c[3];
		for (int d = 0; d < 3; d++) {
			bool red = m & (1u << (PT_BIDX + d));
			c[d] = red ? 0 : rest % S->grid[d];
			rest = red ? rest : rest / S->grid[d];
		}
		for (int64_t j = 0; j < seg; j++) {
			int64_t q = j, b[3];
			for (int d = 0; d < 3; d++) {
				bool red = m & (1u << (PT_BIDX + d));
				b[d] = red ? q % S->grid[d] : c[d];
				q = red ? q / S->grid[d] : q;
			}
			out[k++] = b[0] + S->grid[0] * (b[1] + S->grid[1] * b[2]);
		}
	}
	free(segs);
	qsort(out, (size_t)k, sizeof *out, cmp_i64);
	*n = k;
	return out;
}

static bool launch_dims(Sim *S)
{
	for (int i = 0; i < 3; i++) {
		IrExpr *g = S->k->launch[PT_BIDX + i], *b = S->k->launch[PT_TIDX + i];
		S->grid[i] = S->block[i] = 1;
		if ((g && !ir_eval_i64(g, S->sizes, &S->grid[i])) ||
		    (b && !ir_eval_i64(b, S->sizes, &S->block[i]))) {
			S->res->error = xprintf("cannot evaluate the launch dimensions of %s", S->k->name);
			return false;
		}
		if (S->grid[i] < 0 || S->block[i] < 0) {
			S->res->error = xprintf("negative launch dimension in %s", S->k->name);
			return false;
		}
	}
	int64_t blocks;
	if (__builtin_mul_overflow(S->grid[0], S->grid[1], &blocks) ||
	    __builtin_mul_overflow(blocks, S->grid[2], &blocks)) {
		S->res->error = xprintf("%s: a grid of more than 2^63 blocks", S->k->name);
		return false;
	}
	S->nthreads = S->block[0] * S->block[1] * S->block[2];
	if (S->nthreads > 1024) {
		S->res->error = xprintf("%s: a block of %lld threads (CUDA allows 1024)", S->k->name,
				        (long long)S->nthreads);
		return false;
	}
	return true;
}

/* A global buffer for an input (its data, initialized) or an output (uninitialized). */
static bool global_buf(Sim *S, Tensor *t, void *data, bool input)
{
	int64_t dims[IR_MAX_DIMS];
	char *err = NULL;

	if (!tensor_dims(t, S->sizes, dims, &err)) {
		S->res->error = err;
		return false;
	}
	int64_t n = shape_numel(dims, t->ndim);
	if (n < 0) {
		S->res->error = xprintf("tensor %s is too large", t->name);
		return false;
	}
	if (!elements_fit(S, n, "global buffer", t->name))
		return false;
	S->elements += n;
	SimBuf *b = add_buf(S, t, MEM_GLOBAL);
	b->is_input = input;
	b->n = n;
	b->v = calloc((size_t)(n ? n : 1), sizeof(SVal));
	b->init = calloc((size_t)(n ? n : 1), 1);
	if (!input)
		b->gl = calloc((size_t)(n ? n : 1), sizeof(SimGlobal));
	if (!b->v || !b->init || (!input && !b->gl)) {
		S->res->error = xprintf("out of memory for tensor %s", t->name);
		return false;
	}
	if (input) {
		for (int64_t i = 0; i < n; i++)
			b->v[i] = interp_load(data, t->dtype, i);
		memset(b->init, 1, (size_t)n);
	}
	return true;
}

int64_t sim_global_elements(Kernel *k, const int64_t *sizes)
{
	Fusion *f = k->fusion;
	int64_t total = 0, dims[IR_MAX_DIMS];

	for (int i = 0; i < f->ninputs + f->noutputs + k->grid_ws.len; i++) {
		Tensor *t = i < f->ninputs ? f->inputs[i]
			  : i < f->ninputs + f->noutputs ? f->outputs[i - f->ninputs]
			  : VEC_AT(k->grid_ws, Tensor, i - f->ninputs - f->noutputs);
		char *err = NULL;
		if (!tensor_dims(t, sizes, dims, &err)) {
			free(err);
			return -1;
		}
		int64_t n = shape_numel(dims, t->ndim);
		if (n < 0 || __builtin_add_overflow(total, n, &total))
			return -1;
	}
	return total;
}

static bool setup(Sim *S, const double *scalars, void **inputs)
{
	Fusion *f = S->f;

	/* a size variant runs only within its bounds (its buffers are sized by them) */
	for (int i = 0; i < S->k->preconds.len; i++) {
		Precond *p = VEC_AT(S->k->preconds, Precond, i);
		if (p->kind == PC_AT_MOST && S->sizes && !precond_holds(f, p, S->sizes, NULL)) {
			Buf b = {0};
			buf_printf(&b, "kernel %s runs only for ", S->k->name);
			precond_condition(p, &b);
			if (p->size)
				buf_printf(&b, ", not %s = %lld", p->size->name,
					   (long long)S->sizes[p->size->index]);
			S->res->error = b.s; /* a setup failure (SimResult.error) */
			return false;
		}
	}
	if (!launch_dims(S))
		return false;
	int64_t all = sim_global_elements(S->k, S->sizes);
	if (S->max_elements && (all < 0 || all > S->max_elements)) {
		over_budget(S, "the global buffers hold %s%lld elements, more than the element "
			    "budget of %lld", all < 0 ? "more than " : "",
			    (long long)(all < 0 ? INT64_MAX : all), (long long)S->max_elements);
		return false;
	}
	S->params = calloc((size_t)f->nparams + 1, sizeof(SVal));
	for (int i = 0; i < f->nparams; i++)
		S->params[i] = cv(vf(scalars[i]), DT_F64, f->params[i]->dtype);
	for (int i = 0; i < f->ninputs; i++)
		if (!global_buf(S, f->inputs[i], inputs[i], true))
			return false;
	for (int i = 0; i < f->noutputs; i++)
		if (!global_buf(S, f->outputs[i], NULL, false))
			return false;
	/* grid reductions: ws (never initialized) and sem (zeroed, as the launcher does); both
	 * without race tracking */
	for (int i = 0; i < S->k->grid_ws.len; i++) {
		Tensor *t = VEC_AT(S->k->grid_ws, Tensor, i);
		if (!global_buf(S, t, NULL, false))
			return false;
		SimBuf *b = sim_buf(S, t);
		free(b->gl);
		b->gl = NULL;
		if (i % 2)
			memset(b->init, 1, (size_t)(b->n ? b->n : 1));
	}
	return true;
}

static void finish(Sim *S, void **outputs)
{
	Fusion *f = S->f;
	SimResult *r = S->res;

	r->noutputs = f->noutputs;
	r->written = calloc((size_t)f->noutputs + 1, sizeof *r->written);
	for (int i = 0; i < f->noutputs; i++) {
		SimBuf *b = sim_buf(S, f->outputs[i]);
		r->written[i] = malloc((size_t)(b->n ? b->n : 1));
		memcpy(r->written[i], b->init, (size_t)(b->n ? b->n : 1));
		for (int64_t j = 0; j < b->n; j++)
			if (b->init[j])
				interp_store(outputs[i], b->dt, j, b->v[j]);
	}
}

bool sim_run(Kernel *k, const int64_t *sizes, const double *scalars, void **inputs,
	     void **outputs, const SimOptions *o, SimResult *r)
{
	Sim S;
	SimThread *ts = NULL;
	int64_t *blocks = NULL, nb = 0;

	if (k->segments.len)
		return sim_run_plan(k, sizes, scalars, inputs, outputs, o, r);
	memset(r, 0, sizeof *r);
	memset(&S, 0, sizeof S);
	S.k = k;
	S.f = k->fusion;
	S.sizes = sizes;
	S.res = r;
	S.nctx = 1;
	S.max_elements = o ? o->max_elements : 0;
	S.max_steps = o ? o->max_steps : 0;
	bool ok = setup(&S, scalars, inputs);
	if (ok) {
		/* every thread of every block to run takes a step at least */
		int64_t total = S.grid[0] * S.grid[1] * S.grid[2], max = o ? o->max_blocks : 0;
		int64_t run = max > 0 && max < total ? max : total, work;
		if (S.max_steps && (__builtin_mul_overflow(run, S.nthreads, &work) ||
				    work > S.max_steps)) {
			over_budget(&S, "%lld blocks of %lld threads are more than the step budget "
				    "of %lld", (long long)run, (long long)S.nthreads,
				    (long long)S.max_steps);
			ok = false;
		}
	}
	if (ok) {
		S.has_sync = has_sync(k->body);
		int64_t nts = S.has_sync ? S.nthreads : 1;
		if (S.has_sync) {
			/* local buffers made before this point have one context only: none yet */
			S.nctx = (int)(nts ? nts : 1);
		}
		ts = calloc((size_t)(nts ? nts : 1), sizeof *ts);
		for (int64_t i = 0; i < nts; i++)
			thread_init(&S, &ts[i], (int)i);
		r->blocks_total = S.grid[0] * S.grid[1] * S.grid[2];
		r->threads_per_block = S.nthreads;
		blocks = pick_segments(&S, o ? o->max_blocks : 0, o ? o->seed : 0, &nb);
		bool reverse = o && o->reverse_blocks;
		for (int64_t i = 0; i < nb && !r->error; i++)
			run_block(&S, ts, blocks[reverse ? nb - 1 - i : i]);
		r->blocks_run = nb;
		finish(&S, outputs);
		for (int64_t i = 0; i < nts; i++)
			thread_free(&ts[i]);
		ok = !r->error;
	}
	free(ts);
	free(blocks);
	for (int i = 0; i < S.nbufs; i++)
		free_buf(&S, S.bufs[i]);
	free(S.bufs);
	free(S.map);
	free(S.params);
	return ok;
}

void sim_result_free(SimResult *r)
{
	for (int i = 0; i < r->nreports; i++)
		free(r->reports[i].detail);
	free(r->reports);
	for (int i = 0; r->written && i < r->noutputs; i++)
		free(r->written[i]);
	free(r->written);
	free(r->error);
	memset(r, 0, sizeof *r);
}
