/* verify.c: structural invariants of the kernel IR, checked between passes (--verify, tests).
 *
 *   - every EX_VAR names a loop variable of an enclosing KS_FOR or a kernel-scope local
 *     (Kernel.locals);
 *   - fusion-IR-only nodes (EX_AXIS, EX_REDUCE) are gone;
 *   - once the indexing pass has run, no EX_ACCESS remains and every store has an offset;
 *   - stores and allocations target a tensor that is not an input;
 *   - a grid step (KS_GRID_REDUCE) reduces over block types only and its body is exactly the
 *     store of its accumulator to its element.
 * A failure is a compiler bug, reported as "internal: after pass X: ..." so that a test shows
 * which pass broke the IR.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

typedef struct Verifier {
	Kernel *k;
	Diag *d;
	const char *pass;
	bool indexed;   /* the indexing pass has run */
	Var **scope;    /* loop variables of the enclosing loops */
	int nscope, cap;
	bool ok;
} Verifier;

static void fail(Verifier *v, const char *what, const char *name)
{
	if (!v->ok)
		return; /* one report per pass is enough */
	v->ok = false;
	diag_error(v->d, (Span){0}, "internal: after pass %s: %s%s%s", v->pass, what,
		   name ? " " : "", name ? name : "");
}

static bool var_visible(Verifier *v, Var *x)
{
	for (int i = 0; i < v->nscope; i++)
		if (v->scope[i] == x)
			return true;
	for (int i = 0; i < v->k->locals.len; i++)
		if (VEC_AT(v->k->locals, Var, i) == x)
			return true;
	return false;
}

static void check_expr(Verifier *v, IrExpr *e)
{
	if (!e) {
		fail(v, "missing expression", NULL);
		return;
	}
	switch (e->kind) {
	case EX_VAR:
		if (!var_visible(v, e->var))
			fail(v, "variable used outside its loop:", e->var->name);
		break;
	case EX_AXIS:
		fail(v, "fusion-IR axis left in the kernel:", e->axis->name);
		break;
	case EX_REDUCE:
		fail(v, "reduction left in the kernel", NULL);
		break;
	case EX_ACCESS:
		if (v->indexed)
			fail(v, "unindexed access to", e->tensor->name);
		break;
	default:
		break;
	}
	for (int i = 0; i < e->nargs; i++)
		check_expr(v, e->args[i]);
}

static void check_target(Verifier *v, Tensor *t)
{
	if (!t)
		fail(v, "store without a tensor", NULL);
	else if (t->kind == TK_INPUT)
		fail(v, "store to input", t->name);
}

static void check_list(Verifier *v, Stmt *s);

/* A grid step: block types only, an operator, its workspace, and a body that is the one store
 * of its accumulator to element `offset` of its tensor. */
static void check_grid_reduce(Verifier *v, Stmt *s)
{
	const char *name = s->grid_red.tensor ? s->grid_red.tensor->name : "?";
	unsigned blocks = (1u << PT_BIDX) | (1u << PT_BIDY) | (1u << PT_BIDZ);
	Stmt *b = s->grid_red.body;
	if (!s->grid_red.var || !var_visible(v, s->grid_red.var))
		fail(v, "grid reduction of an undeclared local into", name);
	if (!s->grid_red.pars || (s->grid_red.pars & ~blocks))
		fail(v, "grid reduction over no block type or a thread type into", name);
	if (s->grid_red.red == RED_NONE || !s->grid_red.ws || !s->grid_red.sem ||
	    !s->grid_red.offset || !s->grid_red.part || !s->grid_red.nparts)
		fail(v, "grid reduction without an operator, a workspace or its indices into", name);
	if (!b || b->next || b->kind != KS_STORE || b->store.tensor != s->grid_red.tensor ||
	    !b->store.offset || !b->store.value || b->store.value->kind != EX_VAR ||
	    b->store.value->var != s->grid_red.var)
		fail(v, "grid reduction whose body is not the store of its accumulator into", name);
	if (!v->ok)
		return;
	check_target(v, s->grid_red.tensor);
	check_expr(v, s->grid_red.offset);
	check_expr(v, s->grid_red.part);
	check_expr(v, s->grid_red.nparts);
	check_list(v, s->grid_red.body);
}

static void check_stmt(Verifier *v, Stmt *s)
{
	switch (s->kind) {
	case KS_FOR:
		if (!s->loop.var || !s->loop.var->extent) {
			fail(v, "loop without a variable or extent", NULL);
			return;
		}
		check_expr(v, s->loop.var->extent);
		if (v->nscope == v->cap) {
			v->cap = v->cap ? 2 * v->cap : 16;
			v->scope = xrealloc(v->scope, sizeof(Var *) * (size_t)v->cap);
		}
		v->scope[v->nscope++] = s->loop.var;
		check_list(v, s->loop.body);
		v->nscope--;
		break;
	case KS_IF:
		check_expr(v, s->branch.cond);
		check_list(v, s->branch.then);
		check_list(v, s->branch.els);
		break;
	case KS_ALLOC:
		check_target(v, s->alloc.tensor);
		check_expr(v, s->alloc.size);
		break;
	case KS_STORE:
		check_target(v, s->store.tensor);
		if (v->indexed && !s->store.offset)
			fail(v, "store without an offset to",
			     s->store.tensor ? s->store.tensor->name : "?");
		if (s->store.offset)
			check_expr(v, s->store.offset);
		else
			for (int i = 0; i < s->store.nidx; i++)
				check_expr(v, s->store.idx[i]);
		check_expr(v, s->store.value);
		break;
	case KS_VSTORE:
		check_target(v, s->copy.tensor);
		check_expr(v, s->copy.offset);
		check_expr(v, s->copy.src_offset);
		break;
	case KS_LET:
		if (!var_visible(v, s->let.var))
			fail(v, "assignment to an undeclared local", s->let.var->name);
		check_expr(v, s->let.value);
		break;
	case KS_CP_ASYNC:
		check_target(v, s->copy.tensor);
		if (s->copy.tensor && s->copy.tensor->sched.mem != MEM_SHARED)
			fail(v, "cp.async into a buffer outside shared memory:",
			     s->copy.tensor->name);
		if (!s->copy.src || s->copy.src->sched.mem != MEM_GLOBAL)
			fail(v, "cp.async from outside global memory into",
			     s->copy.tensor ? s->copy.tensor->name : "?");
		check_expr(v, s->copy.offset);
		check_expr(v, s->copy.src_offset);
		if (s->copy.cond)
			check_expr(v, s->copy.cond);
		if (s->copy.size)
			check_expr(v, s->copy.size);
		break;
	case KS_BLOCK_REDUCE:
		if (!var_visible(v, s->block_red.var))
			fail(v, "block reduction into an undeclared local", s->block_red.var->name);
		if (!s->block_red.pars ||
		    (s->block_red.pars & ~((1u << PT_TIDX) | (1u << PT_TIDY) | (1u << PT_TIDZ))))
			fail(v, "block reduction over no thread type or a block type into",
			     s->block_red.var->name);
		if (s->block_red.red == RED_NONE)
			fail(v, "block reduction without an operator into", s->block_red.var->name);
		if ((s->block_red.red == RED_WELFORD) != (s->block_red.wmean && s->block_red.wm2))
			fail(v, "Welford block reduction without its mean and M2 (or a plain one with "
			     "them) into", s->block_red.var->name);
		if (s->block_red.red == RED_WELFORD && s->block_red.wmean && s->block_red.wm2 &&
		    (!var_visible(v, s->block_red.wmean) || !var_visible(v, s->block_red.wm2)))
			fail(v, "Welford block reduction into an undeclared local",
			     s->block_red.var->name);
		if ((s->block_red.red == RED_ONLINE) != (s->block_red.osum != NULL))
			fail(v, "online block reduction without its sum (or another one with it) into",
			     s->block_red.var->name);
		if (s->block_red.osum && !var_visible(v, s->block_red.osum))
			fail(v, "online block reduction into an undeclared local", s->block_red.var->name);
		check_expr(v, s->block_red.value);
		break;
	case KS_GRID_REDUCE:
		check_grid_reduce(v, s);
		break;
	case KS_MMA:
		check_target(v, s->mma.tensor);
		int na = 0, nb = 0;
		if (s->mma.instr) {
			mma_slot(s, 'a', &na);
			mma_slot(s, 'b', &nb);
		}
		if (!s->mma.instr || s->mma.nidx != s->mma.instr->nc + na + nb)
			fail(v, "mma without its instruction or fragments into",
			     s->mma.tensor ? s->mma.tensor->name : "?");
		else if (s->mma.tensor && s->mma.tensor->sched.mem != MEM_LOCAL)
			fail(v, "mma accumulating outside registers into", s->mma.tensor->name);
		for (int i = 0; v->ok && i < s->mma.nidx; i++) {
			check_expr(v, s->mma.idx[i]);
			if (i >= s->mma.instr->nc && s->mma.idx[i]->kind != EX_LOAD)
				fail(v, "mma operand that is not a load, into",
				     s->mma.tensor->name);
		}
		break;
	case KS_MMA_LOAD:
		check_target(v, s->mma.tensor);
		if (!s->mma.instr || (s->mma.op != 'a' && s->mma.op != 'b') ||
		    s->mma.nidx != (s->mma.ldm ? 1 : s->mma.op == 'a' ? s->mma.instr->na : s->mma.instr->nb) ||
		    s->mma.tiles < 1 || s->mma.tiles > 2 || (s->mma.tiles == 2 && s->mma.ldm != MMA_LDM_B) ||
		    (s->mma.ldt & ~s->mma.ldm))
			fail(v, "mma fragment load without its instruction or operand into",
			     s->mma.tensor ? s->mma.tensor->name : "?");
		else if (s->mma.tensor && (s->mma.tensor->sched.mem != MEM_LOCAL || !s->mma.tensor->sched.mma_frag))
			fail(v, "mma fragment load outside fragment registers:", s->mma.tensor->name);
		check_expr(v, s->mma.offset);
		for (int i = 0; v->ok && i < s->mma.nidx; i++) {
			check_expr(v, s->mma.idx[i]);
			if (s->mma.idx[i]->kind != EX_LOAD)
				fail(v, "mma fragment load of something not a load, into", s->mma.tensor->name);
		}
		break;
	case KS_CP_WAIT:
	case KS_CP_COMMIT:
	case KS_COMMENT:
	case KS_NEST:
	case KS_SYNC:
		break;
	}
}

static void check_list(Verifier *v, Stmt *s)
{
	for (; s; s = s->next)
		check_stmt(v, s);
}

/* The passes that run after indexing (passes/pipeline.c order). */
static bool is_after_indexing(const char *pass)
{
	static const char *after[] = {"indexing",      "grid_reduce", "cp_async", "circular_buffer",
				      "tail_split",    "vectorize",     "allocation", "shared_memory",
				      "cp_wait",       "sync",       "arch",
				      "simplify"};
	for (int i = 0; i < countof(after); i++)
		if (pass && strcmp(pass, after[i]) == 0)
			return true;
	return false;
}

bool ir_verify(Kernel *k, Diag *d, const char *after_pass)
{
	Verifier v = {.k = k, .d = d, .pass = after_pass ? after_pass : "?", .ok = true};
	v.indexed = is_after_indexing(after_pass);
	check_list(&v, k->body);
	for (int p = 0; p < PT_COUNT; p++)
		if (k->launch[p])
			check_expr(&v, k->launch[p]);
	free(v.scope);
	return v.ok;
}
