/* tail_split.c: a loop over ceil(n / C) steps becomes the full steps, without their bounds
 * guards, then the last step.
 *
 * Runs after indexing and before vectorize. A serial loop (not unrolled, not vectorized)
 *
 *     for r in [0, ceil(B / C)) { ... if (r * C + rest < B) ... }
 *
 * whose body guards rows with `r * C + rest < B`, rest at most C - 1 for every value of the
 * variables it mentions (the unrolled and parallel parts of a split row index: u * 1056 +
 * blockIdx.y * 16 + threadIdx.x / 16), becomes
 *
 *     for r in [0, B / C) { ... if (true) ... }              the full steps: every row in bounds
 *     for t in [0, ceil(B / C) - B / C) { ... r -> B / C + t ... }   the last step (0 or 1)
 *
 * In the full steps r * C + rest <= (B / C - 1) * C + C - 1 < B, so the guard (a condition
 * of an if or of a select) is true and goes, and so does `(r * C + rest) / D < M` when B is
 * M * D (the row bound of a merged index i * N + j, beside its own bound < M * N). The
 * iterations run in the same order as before.
 * What it is for: without the row guard, a vectorized access under the unrolled loop is one
 * vector access without a branch (passes/vectorize.c), so the unrolled loop's loads can all
 * be issued before the values are used (several 16-byte loads in flight per thread, not one).
 *
 * A loop is split only when its body holds plain statements (loops, ifs, stores, lets and the
 * markers of register tensors): a barrier, a shared buffer or a block reduction is not
 * duplicated.
 */
#include "passes/passes.h"

typedef struct Ts {
	Kernel *k;
	Arena *a;
	Var *r;       /* the loop variable */
	IrExpr *B;    /* the bound of the guards that go */
	int64_t C;    /* r's stride in them */
	IrExpr *at;   /* r in the last step */
	Var *unrolled[16]; /* the variables of the unrolled loops of the body */
	int nunrolled;
} Ts;

/* Whether a body statement may be duplicated. */
static bool unsplittable(Stmt *s, void *ctx)
{
	(void)ctx;
	switch (s->kind) {
	case KS_FOR:
	case KS_IF:
	case KS_STORE:
	case KS_VSTORE:
	case KS_LET:
	case KS_COMMENT:
		return false;
	case KS_NEST:
		return s->note.tensor->sched.mem == MEM_SHARED;
	case KS_ALLOC:
		return s->alloc.mem != MEM_LOCAL;
	default:
		return true;
	}
}

/* Whether e is `r * C + rest < B` with rest in [?, C - 1] and B >= 0; sets *C and *B. */
static bool row_guard(Ts *ts, IrExpr *e, int64_t *C, IrExpr **B)
{
	int64_t lo, hi;

	if (e->kind != EX_OP || e->op != OP_LT || ir_mentions(e->args[1], ts->r) ||
	    !vectorize_stride(e->args[0], ts->r, C) || *C <= 0)
		return false;
	IrRange rg = ir_range_in(ts->k);
	IrExpr *rest = ir_simplify(ts->a, &rg, ir_subst(ts->a, e->args[0], ts->r, ir_int(ts->a, 0)));
	if (!ir_range(&rg, rest, &lo, &hi) || hi > *C - 1 || !ir_nonneg(&rg, e->args[1]))
		return false;
	*B = e->args[1];
	return true;
}

static bool note_unrolled(Stmt *s, void *ctx)
{
	Ts *ts = ctx;
	if (s->kind == KS_FOR && s->loop.unroll && ts->nunrolled < countof(ts->unrolled))
		ts->unrolled[ts->nunrolled++] = s->loop.var;
	return false;
}

/* Whether the guard's rows depend on an unrolled loop of the body: its steps' loads wait on
 * the guard one by one (a loop without one is left as it is: nvcc's own unrolling of a guarded
 * step gains as little as the split would). */
static bool unrolled_rows(Ts *ts, IrExpr *e)
{
	for (int i = 0; i < ts->nunrolled; i++)
		if (ir_mentions(e, ts->unrolled[i]))
			return true;
	return false;
}

/* The first row guard over an unrolled loop's rows whose (B, C) also makes the loop's extent
 * ceil(B / C). */
static bool find_guard(IrExpr *e, void *ctx)
{
	Ts *ts = ctx;
	IrExpr *E = ts->r->extent, *B;
	int64_t C, c;

	if (!row_guard(ts, e, &C, &B) || !unrolled_rows(ts, e->args[0]))
		return false;
	if (E->kind != EX_OP || E->op != OP_CEILDIV || !ir_is_const(E->args[1], &c) || c != C ||
	    !ir_equal(E->args[0], B))
		return false;
	ts->B = B;
	ts->C = C;
	return true;
}

/* Whether B2 / C2 is at least B / C rounded down when B2 is B, B / d or ceil(B / d) with
 * C2 * d <= C: then r * C2 + rest < B2 for r < B / C and rest <= C2 - 1, as (B / C) * C2
 * <= B / d. A row guard of the split's outer part (rows of 16: rr * 264 + u * 66 + by <
 * ceil(M / 16) beside rr * 4224 + ... < M) holds in the full steps too. */
static bool implied(Ts *ts, IrExpr *B2, int64_t C2)
{
	int64_t d = 1;

	if (B2->kind == EX_OP && (B2->op == OP_CEILDIV || B2->op == OP_DIV) &&
	    ir_is_const(B2->args[1], &d) && d > 0)
		B2 = B2->args[0];
	return ir_equal(B2, ts->B) && C2 <= ts->C / d;
}

/* In the full steps: the row guards that hold there are true. */
static IrExpr *drop_fn(Arena *a, IrExpr *e, void *ctx)
{
	Ts *ts = ctx;
	IrExpr *B;
	int64_t C;

	if (row_guard(ts, e, &C, &B) && implied(ts, B, C))
		return ir_bool(a, true);
	/* `q / D < M` with q >= 0 holds where `q < M * D` does (a merged index's row bound,
	 * r / N < M in a total over x[M, N], beside the merged bound r < M * N) */
	if (e->kind != EX_OP || e->op != OP_LT || e->args[0]->kind != EX_OP ||
	    e->args[0]->op != OP_DIV)
		return e;
	IrRange rg = ir_range_in(ts->k);
	IrExpr *q = e->args[0]->args[0], *D = e->args[0]->args[1];
	if (ir_nonneg(&rg, q) && ir_nonneg(&rg, D)) {
		IrExpr *g = ir_op(a, OP_LT, e->dtype, q, ir_simplify(a, &rg, ix_mul(a, e->args[1], D)));
		if (row_guard(ts, g, &C, &B) && implied(ts, B, C))
			return ir_bool(a, true);
	}
	return e;
}

static bool simplify_slot(IrExpr **slot, void *ctx)
{
	Ts *ts = ctx;
	IrRange rg = ir_range_in(ts->k);
	*slot = ir_simplify(ts->a, &rg, ir_rewrite(ts->a, *slot, drop_fn, ts));
	return false;
}

/* In the last step: r -> B / C + t. */
static IrExpr *last_fn(Arena *a, IrExpr *e, void *ctx)
{
	Ts *ts = ctx;
	(void)a;
	return e->kind == EX_VAR && e->var == ts->r ? ts->at : e;
}

/* A copy of the list: new statements (sharing the expressions, which are copied on write). */
static Stmt *copy_list(Arena *a, Stmt *s)
{
	Stmt *head = NULL;
	for (; s; s = s->next) {
		Stmt *c = ir_stmt_clone(a, s);
		Stmt **lists[3];
		int n = ir_stmt_lists(c, lists);
		for (int j = 0; j < n; j++)
			*lists[j] = copy_list(a, *lists[j]);
		head = kir_append(head, c);
	}
	return head;
}

/* The list with the row guards dropped: `if (true)` becomes its then-list. */
static Stmt *drop_guards(Ts *ts, Stmt *s)
{
	Stmt *head = NULL;
	for (Stmt *next; s; s = next) {
		next = s->next;
		s->next = NULL;
		ir_stmt_exprs(s, simplify_slot, ts);
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		for (int j = 0; j < n; j++)
			*lists[j] = drop_guards(ts, *lists[j]);
		int64_t c;
		if (s->kind == KS_IF && ir_is_const(s->branch.cond, &c))
			head = kir_append(head, c ? s->branch.then : s->branch.els);
		else
			head = kir_append(head, s);
	}
	return head;
}

/* The full steps and the last one for loop s, or NULL when it is left as it is. */
static Stmt *split_loop(Kernel *k, Stmt *s)
{
	Ts ts = {.k = k, .a = k->arena, .r = s->loop.var};

	if (s->loop.unroll || s->loop.vectorize || !ts.r->extent ||
	    ir_stmts_any(s->loop.body, unsplittable, NULL))
		return NULL;
	ir_stmts_any(s->loop.body, note_unrolled, &ts);
	if (!ts.nunrolled ||
	    !ir_stmts_any_expr(s->loop.body, find_guard, &ts))
		return NULL;
	Arena *a = ts.a;
	IrRange rg = ir_range_in(k);
	IrExpr *E = ts.r->extent;
	IrExpr *K = ix_div(a, &rg, ts.B, ir_int(a, ts.C));
	/* the last step: r = B / C + t */
	Var *t = kir_new_var(k, ts.r->name, ts.r->dtype);
	t->extent = ir_simplify(a, &rg, ix_sub(a, E, K));
	Stmt *tail_body = copy_list(a, s->loop.body);
	ts.at = ix_add(a, K, ir_var(a, t));
	ir_stmts_rewrite(a, tail_body, last_fn, &ts);
	Stmt *tail = kir_for(k, t, tail_body);
	tail->span = s->span;
	/* the full steps */
	ts.r->extent = K;
	s->loop.body = drop_guards(&ts, s->loop.body);
	tail->next = s->next;
	s->next = tail;
	return s;
}

static void walk(Kernel *k, Stmt *list)
{
	for (Stmt *s = list; s; s = s->next) {
		if (s->kind == KS_FOR && split_loop(k, s)) {
			s = s->next; /* the last step: already split where it could be */
			continue;
		}
		Stmt **lists[3];
		int n = ir_stmt_lists(s, lists);
		for (int j = 0; j < n; j++)
			walk(k, *lists[j]);
	}
}

bool pass_tail_split(Kernel *k, Diag *d)
{
	(void)d;
	walk(k, k->body);
	return true;
}
