/* lowp_exp.c: the exponentials whose error the output's rounding hides.
 *
 * An f32 exp whose value reaches only f16/bf16 outputs, through products, quotients,
 * negations, float casts and sums whose terms are the exponentials themselves (softmax's
 * e = exp(x - m), s = sum(e), y = e / s), becomes OP_EXP_LOWP: the backend computes it as
 * 2^(x log2 e) with `ex2.approx.f32` (exp2f), as Triton's tl.exp does, instead of expf.
 * Relative error: ex2 is within 2 ulp (2^-22) of 2^t, and t = x * log2(e) in f32 is off by
 * at most 2 * |x| * log2(e) * 2^-24 (the constant's and the product's rounding), which
 * moves 2^t by |x| * 2^-23: at most 2^-22 + |x| * 2^-23, below 2^-16 wherever exp(x) is a
 * finite, nonzero f32 (|x| < 104). Each product, quotient and sum of non-negative terms
 * adds its operands' relative errors, so an output rounded to f16 (half an ulp: 2^-11) or
 * bf16 (2^-8) sees far less than its own rounding. A sum of mixed signs (exp(x) * w), a
 * difference, a log or any other function could magnify the error, so a value that goes
 * through one of them, or into an f32/f64 output, keeps expf
 * (docs/language.md, "Float accuracy on the GPU").
 */
#include "frontend/frontend.h"

/* How a value is used: NONE: somewhere the approximation is not allowed; TERM: as a term of
 * a sum (only an exponential itself may be there); ANY: through products and quotients only. */
typedef enum Use { USE_NONE, USE_TERM, USE_ANY } Use;

/* The use of operand i of e, when e is used as u. */
static Use operand_use(IrExpr *e, Use u)
{
	if (e->kind == EX_CAST)
		return dtype_is_float(e->dtype) ? u : USE_NONE;
	if (e->kind == EX_REDUCE)
		return u == USE_ANY && e->red == RED_SUM ? USE_TERM : USE_NONE;
	if (e->kind == EX_OP && u == USE_ANY &&
	    (e->op == OP_MUL || e->op == OP_DIV || e->op == OP_NEG))
		return USE_ANY;
	return USE_NONE;
}

/* Lowers use[t] of every tensor t that e (used as u) reads to the use of that read. */
static void record(IrExpr *e, Use u, Use *use)
{
	if (e->kind == EX_ACCESS) {
		Tensor *t = e->tensor;
		if (u < use[t->index])
			use[t->index] = u;
		return; /* subscripts are indices */
	}
	for (int i = 0; i < e->nargs; i++)
		record(e->args[i], operand_use(e, u), use);
}

/* e (used as u) with its allowed exponentials made OP_EXP_LOWP, copied on write. */
static IrExpr *mark(Arena *a, IrExpr *e, Use u)
{
	bool lowp = e->kind == EX_OP && e->op == OP_EXP && u != USE_NONE &&
		    dtype_compute(e->dtype) == DT_F32;
	IrExpr *c = e;
	for (int i = 0; i < e->nargs; i++) {
		IrExpr *x = mark(a, e->args[i], operand_use(e, u));
		if (x == e->args[i])
			continue;
		if (c == e)
			c = ir_copy(a, e);
		c->args[i] = x;
	}
	if (lowp) {
		if (c == e)
			c = ir_copy(a, e);
		c->op = OP_EXP_LOWP;
	}
	return c;
}

void sema_lowp_exp(Arena *a, Fusion *f)
{
	Use *use = arena_alloc(a, sizeof(Use) * (size_t)(f->ntensors ? f->ntensors : 1));
	for (int i = 0; i < f->ntensors; i++) {
		Tensor *t = f->tensors[i];
		use[i] = t->kind != TK_OUTPUT || t->dtype == DT_F16 || t->dtype == DT_BF16 ? USE_ANY
											  : USE_NONE;
	}
	/* readers come after what they read: each tensor's use is final when it is reached */
	for (int i = f->ntensors - 1; i >= 0; i--) {
		Tensor *t = f->tensors[i];
		if (!t->def)
			continue;
		record(t->def, use[i], use);
		t->def = mark(a, t->def, use[i]);
	}
}
