/* sync.c: __syncthreads() insertion for real cross-thread hazards on shared memory (docs/lowering.md).
 *
 * Accesses. Every write (KS_STORE, KS_VSTORE, KS_CP_ASYNC) and read (EX_LOAD, a vector copy's
 * source) of a shared buffer is an access: buffer, element offset (after indexing), vector
 * width, whether it is a cp.async write, and the guards of the `if`s around it
 * (`threadIdx.x < 12`, `threadIdx.y == 0`, `jo + 1 < 8` narrow the ranges).
 *
 * Same thread. Two accesses to one buffer touch an element from the same thread when their
 * offsets, as sums of (coefficient x atom), are mixed-radix numbers in which every thread
 * index that can be non-zero is a digit of the same weight w in both: each term of lower
 * weight adds at most w - 1 in total (atom ranges from ir_range, vector lanes, the constant),
 * and every term of higher weight in both is a multiple of one M >= w x R (R: that thread
 * index's range; M is the gcd of those weights, so a padded row `ty * 33 + tx` has the digit
 * tx with M = 33). Then equal offsets have equal thread digits: `tid = (off mod M) / w`.
 * Anything else (a thread
 * index inside a division, missing from one side, a range that is not known) counts as
 * another thread: a barrier too many is slow, one too few is wrong.
 *
 * Hazards. Two accesses conflict when at least one writes, they may touch the same bytes (one
 * buffer, or two buffers that share bytes after shared-memory reuse) and not from the same
 * thread; a plain store and a cp.async to the same buffer always conflict. The pass walks each
 * statement list keeping the accesses made since the last barrier; a statement whose accesses
 * conflict with them gets a barrier right before it (after the cp_wait pass's wait, so the
 * wait comes first). Barriers go only where every thread of the block arrives: loops and
 * `if`s whose condition does not depend on the thread are entered, an `if` on the thread index
 * is one statement. A cp.async write is ordered by a barrier only once a wait has retired it.
 *
 * Loops. The first time the walk meets a loop it places the barriers the loop needs by itself:
 * its body is walked from nothing pending, then again from what is left at the end of the body
 * (hazards from one iteration to the next; not for a loop of at most one iteration). What the
 * loop exposes to the accesses before it (those it makes before a barrier every thread
 * reaches), whether it always reaches a barrier, what it leaves pending and everything it
 * accesses are then kept for that loop statement (Sy.loops). The loop then needs a barrier
 * before it only when an access before it conflicts with an exposed one: a loop that starts
 * with its own barrier needs none before it, and a loop that needs one gets it once, outside,
 * not in every iteration. Only a cp.async write not yet retired makes the walk go into the loop
 * again (a barrier cannot order it before its wait). Every loop's body is so walked a bounded
 * number of times apart from those visits: the pass is linear in the kernel's size.
 *
 * Ranges come from ir_range under each access's guards (the IrRange kept with the access):
 * inside `if (jo + 1 < 8)`, `jo` is at most 6, so `threadIdx.x * 8 + jo + 1` has the thread
 * index as a digit of weight 8.
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
	IrRange rg;           /* the kernel's range facts with the guards around it */
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

/* What the walk keeps of a loop statement once it has placed the loop's own barriers. */
typedef struct LoopInfo {
	Set exposed;   /* accesses made before a barrier every thread reaches */
	Set left;      /* pending after the loop when nothing was pending before it */
	Set all;       /* every access in the loop */
	bool barrier;  /* every thread reaches a barrier in the loop (at least one iteration) */
} LoopInfo;

typedef struct Sy {
	Kernel *k;
	Arena *a;
	Tensor *only;         /* collect accesses to this tensor only (NULL: every shared one) */
	Region *regions;
	int nregions;
	Map loops;            /* Stmt * (KS_FOR) -> LoopInfo * */
	IrRange rg;           /* the range facts at the statement being walked (its guards) */
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
	if (!t || t->sched.mem != MEM_SHARED || (y->only && t != y->only))
		return;
	Access *x = NEW(y->a, Access);
	x->t = t;
	x->write = write;
	x->async = write && s->kind == KS_CP_ASYNC;
	x->off = off;
	x->vec = vec > 0 ? vec : 1;
	x->rg = y->rg;
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

static void collect(Sy *y, Set *out, Stmt *s);

static void collect_list(Sy *y, Set *out, Stmt *s)
{
	for (; s; s = s->next)
		collect(y, out, s);
}

static void collect(Sy *y, Set *out, Stmt *s)
{
	IrRange saved;
	LoopInfo *info;

	switch (s->kind) {
	case KS_FOR:
		if ((info = map_lookup(&y->loops, s)))
			set_union(y->a, out, &info->all);
		else
			collect_list(y, out, s->loop.body);
		break;
	case KS_IF:
		expr_reads(y, out, s, s->branch.cond);
		saved = y->rg;
		ir_range_guard(&y->rg, s->branch.cond);
		collect_list(y, out, s->branch.then);
		y->rg = saved;
		collect_list(y, out, s->branch.els);
		break;
	case KS_STORE:
		expr_reads(y, out, s, s->store.value);
		add_access(y, out, s, s->store.tensor, true, s->store.offset, 1);
		break;
	case KS_VSTORE:
		add_access(y, out, s, s->copy.src, false, s->copy.src_offset, s->copy.vec);
		add_access(y, out, s, s->copy.tensor, true, s->copy.offset, s->copy.vec);
		break;
	case KS_CP_ASYNC:
		expr_reads(y, out, s, s->copy.cond);
		add_access(y, out, s, s->copy.tensor, true, s->copy.offset, s->copy.vec);
		break;
	case KS_LET:
		expr_reads(y, out, s, s->let.value);
		break;
	case KS_MMA_LOAD: /* the operand loads of every lane (an ldmatrix row: 8 elements) */
		if (s->mma.ldm)
			add_access(y, out, s, s->mma.idx[0]->tensor, false, s->mma.idx[0]->args[0], 8);
		else
			for (int i = 0; i < s->mma.nidx; i++)
				expr_reads(y, out, s, s->mma.idx[i]);
		break;
	case KS_MMA: { /* the operand loads of every lane (an ldmatrix row: 8 elements); the
			* accumulator is in registers */
		int na, nb, fa = mma_slot(s, 'a', &na), fb = mma_slot(s, 'b', &nb);
		for (int i = 0; i < s->mma.nidx; i++) {
			IrExpr *e = s->mma.idx[i];
			bool row = (i == fa && (s->mma.ldm & MMA_LDM_A)) ||
				   (i == fb && (s->mma.ldm & MMA_LDM_B));
			if (row)
				add_access(y, out, s, e->tensor, false, e->args[0], 8);
			else
				expr_reads(y, out, s, e);
		}
		break;
	}
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

/* The largest value of thread index p under an access's range facts rg (its guards, else the
 * launch); -1 if not known. */
static int64_t thread_hi(const IrRange *rg, ParType p)
{
	IrExpr par = {.kind = EX_PAR, .dtype = DT_I64, .par = p};
	int64_t lo, hi;

	return ir_range(rg, &par, &lo, &hi) ? hi : -1;
}

static int64_t coef_of(Lin *L, ParType p)
{
	for (int i = 0; i < L->n; i++)
		if (L->t[i].atom->kind == EX_PAR && L->t[i].atom->par == p)
			return L->t[i].coef;
	return 0;
}

static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* The gcd of the weights above w in L (other than thread index p's), combined with g (0:
 * none yet). */
static int64_t higher_gcd(Lin *L, ParType p, int64_t w, int64_t g)
{
	for (int i = 0; i < L->n; i++) {
		IrExpr *a = L->t[i].atom;
		if (!(a->kind == EX_PAR && a->par == p) && L->t[i].coef > w)
			g = gcd64(L->t[i].coef, g);
	}
	return g;
}

/* Whether thread index p is the digit of weight w in x's offset L, below the modulus wr (a
 * multiple of every higher weight, at least w x the range of p; under x's guards). */
static bool is_digit(Access *x, Lin *L, ParType p, int64_t w, int64_t wr)
{
	int64_t lower = x->vec - 1, lo, hi;

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
			hi = thread_hi(&x->rg, a->par);
			if (hi < 0)
				return false;
		} else if (has_thread_par(a) || !ir_range(&x->rg, a, &lo, &hi) || lo < 0) {
			return false;
		}
		lower += c * hi;
	}
	return lower < w;
}

/* Whether every element that both x and y touch is touched by one thread in both. */
static bool same_thread(Access *x, Access *y)
{
	Lin lx = {.ok = true}, ly = {.ok = true};
	bool same = true;

	lin(x->off, 1, &lx);
	lin(y->off, 1, &ly);
	if (!lx.ok || !ly.ok)
		return false;
	for (ParType p = PT_TIDX; same && p <= PT_TIDZ; p++) {
		int64_t hx = thread_hi(&x->rg, p);
		int64_t hy = thread_hi(&y->rg, p);
		if (hx == 0 && hy == 0)
			continue; /* one value: not a thread digit */
		int64_t w = coef_of(&lx, p);
		if (w <= 0 || w != coef_of(&ly, p) || hx < 0 || hy < 0) {
			same = false;
			break;
		}
		int64_t R = (hx > hy ? hx : hy) + 1;
		int64_t M = higher_gcd(&ly, p, w, higher_gcd(&lx, p, w, 0));
		if (M == 0)
			M = w * R; /* no higher weight */
		if (M < w * R) {
			same = false;
			break;
		}
		same = is_digit(x, &lx, p, w, M);
		same = same && is_digit(y, &ly, p, w, M);
	}
	return same;
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
	if (a->t->sched.stages >= 2)
		return false;
	if (a->write && b->write && a->async != b->async)
		return true;
	return !same_thread(a, b);
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
static bool survives_barrier(Access *x)
{
	return x->async && !x->waited;
}

static void after_barrier(Set *s)
{
	int n = 0;
	for (int i = 0; i < s->n; i++)
		if (survives_barrier(s->v[i]))
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

/* A conflict a barrier right here would resolve (the pending access is not a cp.async write
 * still in flight). */
static bool conflicts_orderable(Sy *y, Set *pending, Set *now)
{
	for (int i = 0; i < pending->n; i++)
		if (!survives_barrier(pending->v[i]))
			for (int j = 0; j < now->n; j++)
				if (conflict(y, pending->v[i], now->v[j]))
					return true;
	return false;
}

static bool has_async(Set *s)
{
	for (int i = 0; i < s->n; i++)
		if (survives_barrier(s->v[i]))
			return true;
	return false;
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

/* Puts a barrier before *link. */
static void barrier_before(Sy *y, Stmt **link, Set *pending)
{
	Stmt *s = *link;
	Stmt *b = new_sync(y->k, s->span);
	b->next = s;
	*link = b;
	after_barrier(pending);
}

/* Puts a barrier before *link when its statement conflicts with the pending accesses. */
static void check_before(Sy *y, Stmt **link, Set *pending, Set *now)
{
	if (conflicts(y, pending, now))
		barrier_before(y, link, pending);
}

static bool extent_at_least(Sy *y, Stmt *loop, int64_t n)
{
	int64_t lo, hi;
	return ir_range(&y->rg, loop->loop.var->extent, &lo, &hi) ? lo >= n : n <= 0;
}

static bool extent_at_most(Sy *y, Stmt *loop, int64_t n)
{
	int64_t lo, hi;
	return ir_range(&y->rg, loop->loop.var->extent, &lo, &hi) && hi <= n;
}

static LoopInfo *loop_info(Sy *y, Stmt *loop);

/* The accesses of list s that may come before a barrier every thread reaches into *out;
 * whether such a barrier is always reached. */
static bool exposed(Sy *y, Stmt *s, Set *out)
{
	IrRange saved;

	for (; s; s = s->next) {
		switch (s->kind) {
		case KS_SYNC:
			return true;
		case KS_FOR: {
			LoopInfo *info = loop_info(y, s);
			set_union(y->a, out, &info->exposed);
			if (info->barrier)
				return true;
			break;
		}
		case KS_IF:
			if (uniform(s->branch.cond)) {
				int64_t v = 0;
				bool known = ir_is_const(s->branch.cond, &v);
				Set dead = {0};
				expr_reads(y, out, s, s->branch.cond);
				saved = y->rg;
				ir_range_guard(&y->rg, s->branch.cond);
				bool a = exposed(y, s->branch.then, known && !v ? &dead : out);
				y->rg = saved;
				bool b = exposed(y, s->branch.els, known && v ? &dead : out);
				if ((a || (known && !v)) && (b || (known && v)))
					return true;
				break;
			}
			collect(y, out, s);
			break;
		default:
			collect(y, out, s);
			break;
		}
	}
	return false;
}

static void walk(Sy *y, Stmt **link, Set *pending);

/* The loop's own barriers (within an iteration and from one iteration to the next), placed the
 * first time the walk meets it, and what it exposes, leaves and accesses. */
static LoopInfo *loop_info(Sy *y, Stmt *loop)
{
	LoopInfo *info = map_lookup(&y->loops, loop);
	if (info)
		return info;
	info = NEW(y->a, LoopInfo);
	walk(y, &loop->loop.body, &info->left);
	if (!extent_at_most(y, loop, 1))
		walk(y, &loop->loop.body, &info->left);
	info->barrier = exposed(y, loop->loop.body, &info->exposed) && extent_at_least(y, loop, 1);
	collect_list(y, &info->all, loop->loop.body);
	map_insert(y->a, &y->loops, loop, info);
	return info;
}

/* A loop after the accesses pending before it: a barrier before the loop when one of them
 * conflicts with what the loop exposes; then the accesses pending after it. */
static void walk_loop(Sy *y, Stmt **link, Set *pending)
{
	Stmt *loop = *link;
	LoopInfo *info = loop_info(y, loop);

	if (conflicts_orderable(y, pending, &info->exposed))
		barrier_before(y, link, pending);
	if (has_async(pending)) {
		/* a cp.async write retired by a wait inside the loop is ordered after that wait */
		Set in = set_copy(y->a, pending);
		walk(y, &loop->loop.body, &in);
		if (info->barrier)
			*pending = in;
		else
			set_union(y->a, pending, &in);
		return;
	}
	Set left = set_copy(y->a, info->barrier ? &info->left : &info->all);
	if (info->barrier)
		*pending = left;
	else
		set_union(y->a, pending, &left);
}

static void walk(Sy *y, Stmt **link, Set *pending)
{
	IrRange saved;

	for (Stmt *s; (s = *link); link = &(*link)->next) {
		Set now = {0};
		switch (s->kind) {
		case KS_SYNC:
			after_barrier(pending);
			continue;
		case KS_CP_WAIT:
			after_wait(pending, s->wait.n);
			continue;
		case KS_FOR:
			walk_loop(y, link, pending);
			break;
		case KS_IF:
			if (!uniform(s->branch.cond)) {
				/* a thread-dependent branch is one statement */
				collect(y, &now, s);
				check_before(y, link, pending, &now);
				set_union(y->a, pending, &now);
				break;
			} else {
				Set c = {0};
				int64_t v;
				bool known = ir_is_const(s->branch.cond, &v);
				expr_reads(y, &c, s, s->branch.cond);
				check_before(y, link, pending, &c);
				set_union(y->a, pending, &c);
				/* a branch that never runs (the prologue's `if (0 < 32)`) adds no path */
				Set els = set_copy(y->a, pending);
				saved = y->rg;
				ir_range_guard(&y->rg, s->branch.cond);
				walk(y, &s->branch.then, known && !v ? &els : pending);
				y->rg = saved;
				walk(y, &s->branch.els, known && v ? pending : &els);
				if (!known)
					set_union(y->a, pending, &els);
				else if (!v)
					*pending = els;
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
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			find_regions(y, *lists[i]);
		int64_t n;
		if (s->kind != KS_ALLOC || s->alloc.mem != MEM_SHARED ||
		    !ir_is_const(s->alloc.size, &n))
			continue;
		Region *r = arena_alloc(y->a, sizeof *r * (size_t)(y->nregions + 1));
		if (y->nregions)
			memcpy(r, y->regions, sizeof *r * (size_t)y->nregions);
		int64_t at = s->alloc.smem_offset;
		r[y->nregions++] = (Region){s->alloc.tensor, at,
					    at + n * dtype_size(s->alloc.tensor->dtype)};
		y->regions = r;
	}
}

static void sy_init(Sy *y, Kernel *k)
{
	memset(y, 0, sizeof *y);
	y->k = k;
	y->a = k->arena;
	y->rg = ir_range_in(k);
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
			if ((w.v[i]->write || r.v[j]->write) && !same_thread(w.v[i], r.v[j]))
				return true;
	return false;
}

static bool shared_alloc(Stmt *s, void *ctx)
{
	return s->kind == KS_ALLOC && (s->alloc.mem == MEM_SHARED ||
				       s->alloc.tensor->sched.mem == MEM_SHARED);
}

bool pass_sync(Kernel *k, Diag *d)
{
	Sy y;
	Set pending = {0};

	/* every shared buffer has its KS_ALLOC (the allocation pass): without one there is no
	 * shared access, so no hazard, and no walk (it reads every expression) */
	if (!ir_stmts_any(k->body, shared_alloc, NULL))
		return true;
	sy_init(&y, k);
	find_regions(&y, k->body);
	walk(&y, &k->body, &pending);
	return true;
}
