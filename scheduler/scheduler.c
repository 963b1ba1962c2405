/* scheduler.c: text -> scheduled Program (parse, sema, schedule).
 *
 * Sema runs only on a file that parsed (sema on a broken AST would repeat the parser's
 * complaints). After sema each fusion goes on independently (docs/cli.md: every independent
 * error in one run): a fusion whose sema failed is not scheduled, every other one is, so a
 * mistake in one fusion never hides the schedule errors of another. The Program is returned
 * only when no phase of any fusion reported an error.
 *
 * Once scheduled, a fusion's expressions with the recomputed tensors expanded are checked
 * against FUS_MAX_EXPR_DEPTH: every later walker (lowering, simplifier, simulator, backends)
 * recurses over expressions and relies on that bound. */
#include "scheduler/scheduler.h"

/* A read of x recomputes x's definition in the reader: an inlined intermediate, a scalar or
 * an output read by a later statement (only reductions and stored tensors are leaves). */
static bool recomputed(Tensor *x)
{
	return x->def && x->def->kind != EX_REDUCE &&
	       (x->sched.inlined || x->kind == TK_OUTPUT || x->kind == TK_SCALAR);
}

/* Depth of e with recomputed tensors expanded. The recursion is bounded: e is one statement
 * (the parser checked FUS_MAX_EXPR_DEPTH) and an expanded read is a stored number. */
static int expanded_depth(IrExpr *e)
{
	if (!e)
		return 0;
	if (e->kind == EX_ACCESS && recomputed(e->tensor))
		return e->tensor->depth;
	int deepest = 0;
	for (int i = 0; i < e->nargs; i++) {
		int d = expanded_depth(e->args[i]);
		if (d > deepest)
			deepest = d;
	}
	return deepest + 1;
}

/* f->tensors are in definition order, so a tensor's readers come after it. */
static bool check_depths(Diag *d, Fusion *f)
{
	bool ok = true;
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		t->depth = expanded_depth(t->def);
		if (t->depth <= FUS_MAX_EXPR_DEPTH)
			continue;
		diag_error(d, t->def_span,
			   "the definition of '%s' is too deep once the tensors it reads are recomputed in it: %d levels of operators (the limit is %d)",
			   t->name, t->depth, FUS_MAX_EXPR_DEPTH);
		diag_note(d, t->def_span,
			  "pointwise tensors are recomputed in their readers; store one (compute_at, cache_after) to break the chain");
		t->depth = 1; /* reported once: its readers do not repeat it */
		ok = false;
	}
	return ok;
}

Program *compile_program(Arena *a, Diag *d, int file)
{
	return compile_program_for(a, d, file, 80);
}

Program *compile_program_for(Arena *a, Diag *d, int file, int arch)
{
	AstFile *ast = parse_file(a, d, file);
	if (diag_error_count(d))
		return NULL;
	Program *p = sema_program(a, d, ast);
	p->file_name = diag_file_name(d, file);
	bool ok = true;
	for (int i = 0; i < p->nfusions; i++) {
		Fusion *f = p->fusions[i];
		if (f->failed)
			continue;
		ok &= schedule_apply_for(a, d, f, arch) && check_depths(d, f);
	}
	if (!ok || diag_error_count(d))
		return NULL;
	return p;
}
