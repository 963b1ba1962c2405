/* cp_async.c: copies into cp_async tensors become KS_CP_ASYNC (docs/lowering.md, §4.4).
 *
 * Runs after indexing. The predicate pass left each copy into a cp.async tensor as
 *
 *     [if (par conds)] c[o] = inb ? A[g] : 0;          (or c[o] = A[g] when always in bounds)
 *
 * where `par conds` keep threads beyond the tensor's bound extents off shared addresses outside
 * the buffer (a real branch: the zero-fill still writes the destination), and `inb` is the
 * bounds predicate of the global read: it becomes the src-size operand (0 bytes: the lane is
 * zero-filled and global memory is not read). So no shared word is ever written both by a
 * plain store (a zero-init) and by cp.async.
 *
 * A vectorized copy loop `for v in [0, V) vectorize { [if (q)] c[b + v] = inb(v) ? A[g + v] : 0 }`
 * becomes one V-element cp.async at (b, g): a conjunct of q that depends on v must hold for
 * the whole vector or for none of it (`e(v) < n`, e of stride 1 in v, e(0) and n multiples of
 * V: the split condition `threadIdx.x * 4 + v < 128` of a cache copied by fewer threads than
 * the block has), and becomes `e(0) < n`; each
 * conjunct of inb that does must be `e(v) < n` with e of stride 1 in v: the vector reads the
 * first min(n - e(0), V) elements (Stmt.size; a partial last vector), zero-fills the rest and
 * is predicated by e(0) < n; when n is a multiple of V (a constant, or a size the launcher
 * requires to be one, as a vectorized row stride K does) and so is e(0), the vector is whole
 * or empty: no min. Unvectorized copies move one element. The access must be 4, 8 or
 * 16 bytes (16 for .cg); the global pointer's alignment becomes a launch precondition.
 *
 * A tensor that is not circular-buffered gets one commit right after its load nest; the
 * cp_wait pass puts the wait before its reads. Circular buffering commits per stage itself.
 *
 * A kernel lowered without vector accesses (LowerOptions.no_vectorize: the scalar kernel of
 * an automatic schedule, which must accept any size and alignment) keeps the copies as the
 * plain zero-filling stores above: a 16-byte cp.async is a vector access, and a 2-byte
 * element has no cp.async at all (cp_async_kept).
 */
#include "passes/passes.h"

typedef struct Cp {
	Kernel *k;
	Diag *d;
	Arena *a;
	bool ok;
} Cp;

static Span cp_span(Tensor *t)
{
	return t->sched.cp_async_span.file ? t->sched.cp_async_span : t->span;
}

static bool is_zero(IrExpr *e)
{
	return (e->kind == EX_INT && e->ival == 0) || (e->kind == EX_FLOAT && e->fval == 0.0);
}

/* Splits `c[o] = [inb ?] A[g] [: 0]` into the global load and its predicate. */
static bool copy_parts(Cp *c, Stmt *st, IrExpr **load, IrExpr **inb)
{
	Tensor *t = st->store.tensor;
	IrExpr *v = st->store.value;

	*inb = NULL;
	if (v->kind == EX_SELECT && is_zero(v->args[2])) {
		*inb = v->args[0];
		v = v->args[1];
	}
	if (v->kind != EX_LOAD || v->tensor->sched.mem != MEM_GLOBAL || v->tensor->dtype != t->dtype) {
		diag_error(c->d, cp_span(t),
			   "cp_async: %s must be a plain copy of a tensor in global memory of the same "
			   "dtype", t->name);
		return false;
	}
	if (t->sched.mem != MEM_SHARED) {
		diag_error(c->d, cp_span(t), "cp_async: %s must be in shared memory (it is %s)",
			   t->name, mem_name(t->sched.mem));
		return false;
	}
	*load = v;
	return true;
}

static bool size_ok(Cp *c, Tensor *t, int64_t vec)
{
	int64_t bytes = vec * dtype_size(t->dtype);

	if (t->sched.cp_async_cg && bytes != 16) {
		diag_error(c->d, cp_span(t),
			   "cp_async(cg) moves 16 bytes, but each copy into %s moves %lld bytes", t->name,
			   (long long)bytes);
		return false;
	}
	if (bytes != 4 && bytes != 8 && bytes != 16) {
		diag_error(c->d, cp_span(t),
			   "cp.async moves 4, 8 or 16 bytes, but each copy into %s moves %lld bytes%s",
			   t->name, (long long)bytes,
			   vec == 1 ? "; vectorize its innermost axis" : "");
		return false;
	}
	return true;
}

static Stmt *cp_stmt(Cp *c, Tensor *t, IrExpr *off, IrExpr *load, IrExpr *src_off, int vec)
{
	Stmt *s = NEW(c->a, Stmt);
	s->kind = KS_CP_ASYNC;
	s->span = cp_span(t);
	s->copy.tensor = t;
	s->copy.mem = MEM_SHARED;
	s->copy.offset = off;
	s->copy.src = load->tensor;
	s->copy.src_offset = src_off;
	s->copy.vec = vec;
	return s;
}

static Stmt *lower_scalar(Cp *c, Stmt *st)
{
	IrExpr *load, *inb;

	if (!copy_parts(c, st, &load, &inb) || !size_ok(c, st->store.tensor, 1))
		return NULL;
	Stmt *s = cp_stmt(c, st->store.tensor, st->store.offset, load, load->args[0], 1);
	s->copy.cond = inb;
	return s;
}

/* The vector's predicate from inb(v) (see the file comment); false after an error. */
static bool vector_pred(Cp *c, Tensor *t, Var *v, int64_t V, IrExpr *inb, IrExpr **cond,
			IrExpr **size)
{
	Arena *a = c->a;
	int64_t st, nc;

	if (!inb)
		return true;
	if (inb->kind == EX_OP && inb->op == OP_AND)
		return vector_pred(c, t, v, V, inb->args[0], cond, size) &&
		       vector_pred(c, t, v, V, inb->args[1], cond, size);
	if (!ir_mentions(inb, v)) {
		*cond = ix_and(a, *cond, inb);
		return true;
	}
	if (inb->kind != EX_OP || inb->op != OP_LT || ir_mentions(inb->args[1], v) ||
	    !vectorize_stride(inb->args[0], v, &st) || st != 1) {
		diag_error(c->d, cp_span(t),
			   "cp_async: the bounds of the vectorized copy into %s are not a prefix of "
			   "the vector", t->name);
		return false;
	}
	IrRange rg = ir_range_in(c->k);
	IrExpr *e0 = ir_simplify(a, &rg, ir_subst(a, inb->args[0], v, ir_int(a, 0)));
	IrExpr *n = inb->args[1];
	*cond = ix_and(a, *cond, ix_lt(a, e0, n));
	/* n a multiple of V (a constant, or a size the launcher requires to be one: the vector
	 * kernel's K and N) and e0 one: the whole vector is in or out */
	bool whole = ir_is_const(n, &nc) ? nc % V == 0
					 : n->kind == EX_SIZE && ir_size_multiple(&rg, n->size) % V == 0;
	if (whole && vectorize_multiple(a, e0, V))
		return true;
	IrExpr *avail = ir_op(a, OP_MIN, DT_I64, ix_sub(a, n, e0), ir_int(a, V));
	*size = *size ? ir_op(a, OP_MIN, DT_I64, *size, avail) : avail;
	return true;
}

/* The guard q of a vectorized copy as one condition for the whole vector (see the file
 * comment) into *out; false when a conjunct may hold for only part of it. */
static bool vector_guard(Cp *c, Var *v, int64_t V, IrExpr *q, IrExpr **out)
{
	Arena *a = c->a;
	int64_t st, nc;

	if (!q)
		return true;
	if (q->kind == EX_OP && q->op == OP_AND)
		return vector_guard(c, v, V, q->args[0], out) && vector_guard(c, v, V, q->args[1], out);
	if (!ir_mentions(q, v)) {
		*out = ix_and(a, *out, q);
		return true;
	}
	if (q->kind != EX_OP || q->op != OP_LT || !ir_is_const(q->args[1], &nc) || nc % V != 0 ||
	    !vectorize_stride(q->args[0], v, &st) || st != 1)
		return false;
	IrRange rg = ir_range_in(c->k);
	IrExpr *e0 = ir_simplify(a, &rg, ir_subst(a, q->args[0], v, ir_int(a, 0)));
	if (!vectorize_multiple(a, e0, V))
		return false;
	*out = ix_and(a, *out, ix_lt(a, e0, q->args[1]));
	return true;
}

/* The single store under the ifs of a vectorized loop body, and the ifs' conjunction. */
static Stmt *loop_store(Stmt *loop, IrExpr **q, Arena *a)
{
	Stmt *s = kir_only_stmt(loop->loop.body);
	*q = NULL;
	while (s && s->kind == KS_IF && !s->branch.els) {
		*q = ix_and(a, *q, s->branch.cond);
		s = kir_only_stmt(s->branch.then);
	}
	return s && s->kind == KS_STORE && s->store.offset ? s : NULL;
}

static Stmt *lower_vector(Cp *c, Stmt *loop, Stmt *st, IrExpr *q)
{
	Tensor *t = st->store.tensor;
	Var *v = loop->loop.var;
	Axis *ax = v->axis;
	Span span = ax && ax->vectorize_span.file ? ax->vectorize_span : cp_span(t);
	IrExpr *load, *inb, *base, *src_base, *cond = NULL, *size = NULL, *guard = NULL;
	int64_t V;

	if (!copy_parts(c, st, &load, &inb))
		return NULL;
	if (!ir_is_const(v->extent, &V) || V < 1) {
		diag_error(c->d, span, "cannot vectorize '%s': its extent is not a constant",
			   ax ? ax->name : v->name);
		return NULL;
	}
	if (!size_ok(c, t, V))
		return NULL;
	if (!vector_guard(c, v, V, q, &guard) ||
	    !vectorize_access(c->k, c->d, v, V, span, "cp.async", t, st->store.offset, &base) ||
	    !vectorize_access(c->k, c->d, v, V, span, "cp.async", load->tensor, load->args[0],
			      &src_base)) {
		diag_error(c->d, cp_span(t),
			   "cp_async: the copy into %s is not %lld contiguous, aligned elements on "
			   "both sides", t->name, (long long)V);
		return NULL;
	}
	if (!vector_pred(c, t, v, V, inb, &cond, &size))
		return NULL;
	Stmt *s = cp_stmt(c, t, base, load, src_base, (int)V);
	s->copy.cond = cond;
	s->copy.size = size;
	if (!guard)
		return s;
	Stmt *g = kir_if(c->k, guard, s, NULL);
	g->span = s->span;
	return g;
}

static bool is_cp_store(Stmt *s)
{
	return s && s->kind == KS_STORE && s->store.tensor->sched.cp_async;
}

static void lower_list(Cp *c, Stmt **link)
{
	for (Stmt *s; (s = *link); link = &(*link)->next) {
		Stmt *r = NULL, *st;
		IrExpr *q;
		bool tried = true;
		if (s->kind == KS_FOR && s->loop.vectorize &&
		    is_cp_store(st = loop_store(s, &q, c->a)))
			r = lower_vector(c, s, st, q);
		else if (is_cp_store(s))
			r = lower_scalar(c, s);
		else
			tried = false;
		if (tried && !r) {
			c->ok = false;
		} else if (r) {
			r->next = s->next;
			*link = r;
		} else if (s->kind == KS_FOR) {
			lower_list(c, &s->loop.body);
		} else if (s->kind == KS_IF) {
			lower_list(c, &s->branch.then);
			lower_list(c, &s->branch.els);
		}
	}
}

/* One commit right after the load nest of each cp.async tensor that is not circular-buffered
 * (the nest is the statement after the "computed at" marker). */
static void add_commits(Kernel *k, Stmt *s)
{
	for (; s; s = s->next) {
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			add_commits(k, *lists[i]);
		if (s->kind != KS_NEST || !s->note.tensor->sched.cp_async ||
		    s->note.tensor->sched.stages >= 2 || !s->next)
			continue;
		Stmt *commit = NEW(k->arena, Stmt);
		commit->kind = KS_CP_COMMIT;
		commit->span = cp_span(s->note.tensor);
		commit->next = s->next->next;
		s->next->next = commit;
		s = commit;
	}
}

bool cp_async_kept(Kernel *k, Tensor *t)
{
	return t->sched.cp_async && !k->options->no_vectorize;
}

bool pass_cp_async(Kernel *k, Diag *d)
{
	Cp c = {.k = k, .d = d, .a = k->arena, .ok = true};
	if (k->options->no_vectorize)
		return true;

	lower_list(&c, &k->body);
	if (c.ok)
		add_commits(k, k->body);
	return c.ok;
}
