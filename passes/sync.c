/* sync.c: __syncthreads() insertion for real cross-thread hazards on shared memory (SPEC §4.3).
 *
 * Accesses. Every write (KS_STORE, KS_VSTORE, KS_CP_ASYNC) and read (EX_LOAD, a vector copy's
 * source) of a shared buffer is an access: buffer, element offset (after indexing), vector
 * width, whether it is a cp.async write, and the ranges of the thread indices under the `if`s
 * around it (`threadIdx.x < 12`, `threadIdx.y == 0` narrow them).
 *
 * Same thread. Two accesses to one buffer touch an element from the same thread when their
 * offsets, as sums of (coefficient x atom), are mixed-radix numbers in which every thread
 * index that can be non-zero is a digit of the same weight w in both: each term of lower
 * weight adds at most w - 1 in total (atom ranges from ir_range, vector lanes, the constant),
 * and every term of higher weight is a multiple of w x R (R: that thread index's range). Then
 * equal offsets have equal thread digits: `tid = (off mod wR) / w`. Anything else (a thread
 * index inside a division, missing from one side, a range that is not known) counts as
 * another thread: a barrier too many is slow, one too few is wrong.
 *
 * Hazards. Two accesses conflict when at least one writes, they may touch the same bytes (one
 * buffer, or two buffers that share bytes after shared-memory reuse) and not from the same
 * thread; a plain store and a cp.async to the same buffer always conflict. The pass walks each
 * statement list keeping the accesses made since the last barrier; a statement whose accesses
 * conflict with them gets a barrier right before it (after the cp_wait pass's wait, so the
 * wait comes first). A loop is walked twice: the second walk starts with the accesses left at
 * the end of the body, which finds hazards between iterations (a WAR on the next iteration).
 * Barriers go only where every thread of the block arrives: loops and `if`s whose condition
 * does not depend on the thread are entered, an `if` on the thread index is one statement. A
 * cp.async write is ordered by a barrier only once a wait has retired it.
 *
 * Circular-buffered tensors are left to the circular_buffer pass (it owns their barriers and
 * knows the slots); only their sharing of bytes with other buffers is checked here.
 */
#include <string.h>

#include "passes/passes.h"

typedef struct Access {
	Tensor *t;
	bool write, async, waited;
	IrExpr *off;
	int vec;
	int64_t hi[PT_COUNT]; /* thread index upper bounds under the guards; -1: unknown */
	Stmt *stmt;
} Access;

typedef struct Set {
	Access **v;
	int n, cap;
} Set;

typedef struct Region {
	Tensor *t;
	int64_t lo, hi;
} Region;

typedef struct Sy {
	Kernel *k;
	Arena *a;
	int64_t hi[PT_COUNT]; /* the guards of the statement being collected */
	Tensor *only;         /* collect accesses to this tensor only (NULL: every shared one) */
	Region *regions;
	int nregions;
} Sy;

static void set_add(Arena *a, Set *s, Access *x)
{
	for (int i = 0; i < s->n; i++) {
		Access *y = s->v[i];
		if (y->stmt == x->stmt && y->t == x->t && y->write == x->write && y->off == x->off) {
			y->waited = y->waited && x->waited;
			return;
		}
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		Access **v = arena_alloc(a, sizeof *v * (size_t)s->cap);
		if (s->n)
			memcpy(v, s->v, sizeof *v * (size_t)s->n);
		s->v = v;
	}
	s->v[s->n++] = x;
}

static Set set_copy(Arena *a, Set *s)
{
	Set c = {0};
	for (int i = 0; i < s->n; i++) {
		Access *x = NEW(a, Access);
		*x = *s->v[i];
		set_add(a, &c, x);
	}
	return c;
}

static void set_union(Arena *a, Set *into, Set *from)
{
	for (int i = 0; i < from->n; i++)
		set_add(a, into, from->v[i]);
}

/* ---- collecting accesses ---------------------------------------------------------------- */

static void add_access(Sy *y, Set *out, Stmt *s, Tensor *t, bool write, IrExpr *off, int vec)
{
	if (!t || t->mem != MEM_SHARED || (y->only && t != y->only))
		return;
	Access *x = NEW(y->a, Access);
	x->t = t;
	x->write = write;
	x->async = write && s->kind == KS_CP_ASYNC;
	x->off = off;
	x->vec = vec > 0 ? vec : 1;
	memcpy(x->hi, y->hi, sizeof x->hi);
	x->stmt = s;
	set_add(y->a, out, x);
}

static void expr_reads(Sy *y, Set *out, Stmt *s, IrExpr *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->nargs; i++)
		expr_reads(y, out, s, e->args[i]);
	if (e->kind == EX_LOAD)
		add_access(y, out, s, e->tensor, false, e->args[0], 1);
}

/* Narrows y->hi by the thread-index conjuncts of cond (`tid < c`, `tid == 0`). */
static void narrow(Sy *y, IrExpr *c)
{
	int64_t v;

	if (!c || c->kind != EX_OP)
		return;
	if (c->op == OP_AND) {
		narrow(y, c->args[0]);
		narrow(y, c->args[1]);
		return;
	}
	IrExpr *l = c->args[0], *r = c->nargs > 1 ? c->args[1] : NULL;
	if (!r || l->kind != EX_PAR || !par_is_thread(l->par) || !ir_is_const(r, &v))
		return;
	int64_t hi = c->op == OP_LT ? v - 1 : c->op == OP_LE ? v : c->op == OP_EQ ? v : -2;
	if (hi >= 0 && (y->hi[l->par] < 0 || hi < y->hi[l->par]))
		y->hi[l->par] = hi;
}

static void collect(Sy *y, Set *out, Stmt *s);

static void collect_list(Sy *y, Set *out, Stmt *s)
{
	for (; s; s = s->next)
		collect(y, out, s);
}

static void collect(Sy *y, Set *out, Stmt *s)
{
	int64_t saved[PT_COUNT];

	switch (s->kind) {
	case KS_FOR:
		collect_list(y, out, s->body);
		break;
	case KS_IF:
		expr_reads(y, out, s, s->cond);
		memcpy(saved, y->hi, sizeof saved);
		narrow(y, s->cond);
		collect_list(y, out, s->then);
		memcpy(y->hi, saved, sizeof saved);
		collect_list(y, out, s->els);
		break;
	case KS_STORE:
		expr_reads(y, out, s, s->value);
		add_access(y, out, s, s->tensor, true, s->offset, 1);
		break;
	case KS_VSTORE:
		add_access(y, out, s, s->src, false, s->src_offset, s->vec);
		add_access(y, out, s, s->tensor, true, s->offset, s->vec);
		break;
	case KS_CP_ASYNC:
		expr_reads(y, out, s, s->cond);
		add_access(y, out, s, s->tensor, true, s->offset, s->vec);
		break;
	case KS_LET:
		expr_reads(y, out, s, s->value);
		break;
	default:
		break;
	}
}

/* ---- same thread ------------------------------------------------------------------------ */

typedef struct Term {
	IrExpr *atom;
	int64_t coef;
} Term;

typedef struct Lin {
	Term t[32];
	int n;
	int64_t c;
	bool ok;
} Lin;

static void lin_add(Lin *L, IrExpr *atom, int64_t coef)
{
	for (int i = 0; i < L->n; i++) {
		if (ir_equal(L->t[i].atom, atom)) {
			L->t[i].coef += coef;
			return;
		}
	}
	if (L->n == countof(L->t)) {
		L->ok = false;
		return;
	}
	L->t[L->n++] = (Term){atom, coef};
}

/* e * m as a sum of terms. */
static void lin(IrExpr *e, int64_t m, Lin *L)
{
	int64_t v;

	if (ir_is_const(e, &v)) {
		L->c += m * v;
		return;
	}
	if (e->kind == EX_OP && !dtype_is_float(e->dtype)) {
		switch (e->op) {
		case OP_ADD:
		case OP_SUB:
			lin(e->args[0], m, L);
			lin(e->args[1], e->op == OP_SUB ? -m : m, L);
			return;
		case OP_NEG:
			lin(e->args[0], -m, L);
			return;
		case OP_MUL:
			if (ir_is_const(e->args[0], &v)) {
				lin(e->args[1], m * v, L);
				return;
			}
			if (ir_is_const(e->args[1], &v)) {
				lin(e->args[0], m * v, L);
				return;
			}
			break;
		default:
			break;
		}
	}
	lin_add(L, e, m);
}

static bool has_thread_par(IrExpr *e)
{
	if (e->kind == EX_PAR && par_is_thread(e->par))
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (has_thread_par(e->args[i]))
			return true;
	return false;
}

/* The largest value of thread index p for access x (its guards, else the launch); -1 if not
 * known. */
static int64_t thread_hi(Kernel *k, Access *x, ParType p)
{
	int64_t lo, hi = -1, c;
	IrExpr *e = k->launch[p];

	if (!e)
		hi = 0;
	else if (ir_is_const(e, &c))
		hi = c - 1;
	else if (ir_range(e, &lo, &hi))
		hi = hi - 1;
	else
		hi = -1;
	if (x->hi[p] >= 0 && (hi < 0 || x->hi[p] < hi))
		hi = x->hi[p];
	return hi;
}

static int64_t coef_of(Lin *L, ParType p)
{
	for (int i = 0; i < L->n; i++)
		if (L->t[i].atom->kind == EX_PAR && L->t[i].atom->par == p)
			return L->t[i].coef;
	return 0;
}

/* Whether thread index p is the digit of weight w (range R) in x's offset L. */
static bool is_digit(Kernel *k, Access *x, Lin *L, ParType p, int64_t w, int64_t R)
{
	int64_t lower = x->vec - 1, lo, hi, wr = w * R;

	if (L->c < 0)
		return false;
	lower += L->c % wr;
	for (int i = 0; i < L->n; i++) {
		IrExpr *a = L->t[i].atom;
		int64_t c = L->t[i].coef;
		if (a->kind == EX_PAR && a->par == p)
			continue;
		if (c == 0)
			continue;
		if (c < 0 || c == w)
			return false;
		if (c > w) {
			if (c % wr)
				return false;
			continue;
		}
		if (a->kind == EX_PAR && par_is_thread(a->par)) {
			hi = thread_hi(k, x, a->par);
			if (hi < 0)
				return false;
		} else if (has_thread_par(a) || !ir_range(a, &lo, &hi) || lo < 0) {
			return false;
		}
		lower += c * hi;
	}
	return lower < w;
}

/* Whether every element that both x and y touch is touched by one thread in both. */
static bool same_thread(Kernel *k, Access *x, Access *y)
{
	Lin lx = {.ok = true}, ly = {.ok = true};

	lin(x->off, 1, &lx);
	lin(y->off, 1, &ly);
	if (!lx.ok || !ly.ok)
		return false;
	for (ParType p = PT_TIDX; p <= PT_TIDZ; p++) {
		int64_t hx = thread_hi(k, x, p), hy = thread_hi(k, y, p);
		if (hx == 0 && hy == 0)
			continue; /* one value: not a thread digit */
		int64_t w = coef_of(&lx, p);
		if (w <= 0 || w != coef_of(&ly, p) || hx < 0 || hy < 0)
			return false;
		int64_t R = (hx > hy ? hx : hy) + 1;
		if (!is_digit(k, x, &lx, p, w, R) || !is_digit(k, y, &ly, p, w, R))
			return false;
	}
	return true;
}

/* ---- conflicts -------------------------------------------------------------------------- */

static Region *region_of(Sy *y, Tensor *t)
{
	for (int i = 0; i < y->nregions; i++)
		if (y->regions[i].t == t)
			return &y->regions[i];
	return NULL;
}

static bool conflict(Sy *y, Access *a, Access *b)
{
	if (!a->write && !b->write)
		return false;
	if (a->t != b->t) {
		Region *ra = region_of(y, a->t), *rb = region_of(y, b->t);
		return !ra || !rb || (ra->lo < rb->hi && rb->lo < ra->hi);
	}
	if (a->t->stages >= 2)
		return false;
	if (a->write && b->write && a->async != b->async)
		return true;
	return !same_thread(y->k, a, b);
}

static bool conflicts(Sy *y, Set *pending, Set *now)
{
	for (int i = 0; i < pending->n; i++)
		for (int j = 0; j < now->n; j++)
			if (conflict(y, pending->v[i], now->v[j]))
				return true;
	return false;
}

/* ---- placing barriers ------------------------------------------------------------------- */

/* A barrier orders everything before it, except cp.async writes no wait has retired. */
static void after_barrier(Set *s)
{
	int n = 0;
	for (int i = 0; i < s->n; i++)
		if (s->v[i]->async && !s->v[i]->waited)
			s->v[n++] = s->v[i];
	s->n = n;
}

static void after_wait(Set *s, int wait_n)
{
	if (wait_n > 0)
		return; /* only circular buffering waits for older groups; it owns those tensors */
	for (int i = 0; i < s->n; i++)
		s->v[i]->waited = true;
}

/* A condition every thread of the block evaluates alike. */
static bool uniform(IrExpr *e)
{
	if (!e)
		return true;
	if ((e->kind == EX_PAR && par_is_thread(e->par)) || e->kind == EX_LOAD ||
	    (e->kind == EX_VAR && !e->var->extent))
		return false;
	for (int i = 0; i < e->nargs; i++)
		if (!uniform(e->args[i]))
			return false;
	return true;
}

static Stmt *new_sync(Kernel *k, Span at)
{
	Stmt *s = NEW(k->arena, Stmt);
	s->kind = KS_SYNC;
	s->span = at;
	return s;
}

static bool has_sync(Stmt *s)
{
	for (; s; s = s->next)
		if (s->kind == KS_SYNC)
			return true;
	return false;
}

static void walk(Sy *y, Stmt **link, Set *pending);

/* Puts a barrier before *link when its statement conflicts with the pending accesses. */
static void check_before(Sy *y, Stmt **link, Set *pending, Set *now)
{
	Stmt *s = *link;
	if (!conflicts(y, pending, now))
		return;
	Stmt *b = new_sync(y->k, s->span);
	b->next = s;
	*link = b;
	after_barrier(pending);
}

static void walk_loop(Sy *y, Stmt *s, Set *pending)
{
	int64_t lo, hi;
	Set in = set_copy(y->a, pending);

	walk(y, &s->body, &in);  /* barriers within an iteration */
	walk(y, &s->body, &in);  /* hazards from the end of one iteration to the next */
	if (has_sync(s->body) && ir_range(s->var->extent, &lo, &hi) && lo >= 1) {
		*pending = in;
		return;
	}
	set_union(y->a, pending, &in);
}

static void walk(Sy *y, Stmt **link, Set *pending)
{
	for (Stmt *s; (s = *link); link = &(*link)->next) {
		Set now = {0};
		switch (s->kind) {
		case KS_SYNC:
			after_barrier(pending);
			continue;
		case KS_CP_WAIT:
			after_wait(pending, s->wait_n);
			continue;
		case KS_FOR:
			collect(y, &now, s);
			check_before(y, link, pending, &now);
			walk_loop(y, s, pending);
			break;
		case KS_IF:
			if (!uniform(s->cond)) {
				/* a thread-dependent branch is one statement */
				collect(y, &now, s);
				check_before(y, link, pending, &now);
				set_union(y->a, pending, &now);
				break;
			} else {
				Set c = {0};
				expr_reads(y, &c, s, s->cond);
				check_before(y, link, pending, &c);
				set_union(y->a, pending, &c);
				Set els = set_copy(y->a, pending);
				walk(y, &s->then, pending);
				walk(y, &s->els, &els);
				set_union(y->a, pending, &els);
				break;
			}
		default:
			collect(y, &now, s);
			check_before(y, link, pending, &now);
			set_union(y->a, pending, &now);
			break;
		}
		while (*link != s)
			link = &(*link)->next; /* past an inserted barrier */
	}
}

static void find_regions(Sy *y, Stmt *s)
{
	for (; s; s = s->next) {
		find_regions(y, s->body);
		find_regions(y, s->then);
		find_regions(y, s->els);
		int64_t n;
		if (s->kind != KS_ALLOC || s->mem != MEM_SHARED || !ir_is_const(s->size, &n))
			continue;
		Region *r = arena_alloc(y->a, sizeof *r * (size_t)(y->nregions + 1));
		if (y->nregions)
			memcpy(r, y->regions, sizeof *r * (size_t)y->nregions);
		r[y->nregions++] = (Region){s->tensor, s->smem_offset,
					    s->smem_offset + n * dtype_size(s->tensor->dtype)};
		y->regions = r;
	}
}

static void sy_init(Sy *y, Kernel *k)
{
	memset(y, 0, sizeof *y);
	y->k = k;
	y->a = k->arena;
	for (int p = 0; p < PT_COUNT; p++)
		y->hi[p] = -1;
}

bool sync_cross_thread(Kernel *k, Tensor *t, Stmt *writers, Stmt *readers)
{
	Sy y;
	Set w = {0}, r = {0};

	sy_init(&y, k);
	y.only = t;
	collect_list(&y, &w, writers);
	collect_list(&y, &r, readers);
	for (int i = 0; i < w.n; i++)
		for (int j = 0; j < r.n; j++)
			if ((w.v[i]->write || r.v[j]->write) && !same_thread(k, w.v[i], r.v[j]))
				return true;
	return false;
}

bool pass_sync(Kernel *k, Diag *d)
{
	Sy y;
	Set pending = {0};

	sy_init(&y, k);
	find_regions(&y, k->body);
	walk(&y, &k->body, &pending);
	return true;
}
