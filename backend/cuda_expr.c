/* cuda_expr.c: IR expressions as CUDA C++ text, and .fus names as C identifiers.
 *
 * Expressions are printed with the fewest parentheses C precedence allows, and every value is
 * converted explicitly to the dtype it is used as (f16/bf16 through the preamble's helpers);
 * C's own implicit conversions are relied on only where they give the same value (widening,
 * or an operand converted to the other operand's type by the usual arithmetic conversions).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

/* ---- names ---------------------------------------------------------------------------- */

/* C++ keywords, CUDA built-ins, math functions the generated code calls, and names the
 * launcher uses. A .fus name equal to one of these gets a trailing '_'. Sorted by strcmp
 * (is_reserved searches it by halves; tests/unit/check_backend.c checks the order). */
static const char *const reserved_names[] = {
	"NULL", "abs", "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor",
	"blockDim", "blockIdx", "bool", "break", "case", "catch", "ceil", "ceilf", "char", "char16_t",
	"char32_t", "char8_t", "class", "co_await", "co_return", "co_yield", "compl", "concept",
	"const", "const_cast", "consteval", "constexpr", "constinit", "continue", "cos", "cosf",
	"cudaError_t", "cudaStream_t", "decltype", "default", "delete", "dim3", "do", "double",
	"dynamic_cast", "else", "enum", "erf", "erff", "exp", "expf", "explicit", "export", "extern",
	"fabs", "fabsf", "false", "float", "floor", "floorf", "fmax", "fmaxf", "fmin", "fminf",
	"fmod", "fmodf", "for", "friend", "goto", "gridDim", "if", "inline", "int", "int32_t",
	"int64_t", "log", "logf", "long", "main", "max", "min", "mutable", "namespace", "new",
	"noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "pow", "powf", "private",
	"protected", "public", "register", "reinterpret_cast", "requires", "restrict", "return",
	"rsqrt", "rsqrtf", "short", "signed", "sin", "sinf", "sizeof", "snprintf", "sqrt", "sqrtf",
	"static", "static_assert", "static_cast", "stream", "struct", "switch", "tanh", "tanhf",
	"template", "this", "threadIdx", "thread_local", "throw", "true", "try", "typedef", "typeid",
	"typename", "uint16_t", "uintptr_t", "union", "unsigned", "using", "va_list", "virtual",
	"void", "volatile", "warpSize", "wchar_t", "while", "xor", "xor_eq",
};

static bool is_reserved(const char *s)
{
	if ((s[0] == '_' && s[1] == '_') || (s[0] == 'f' && strncmp(s, "fus_", 4) == 0))
		return true;
	if (!s[0] || !s[1]) /* every reserved name has two letters or more (x, M, i: most names) */
		return false;
	/* by halves, compared in place: the emitter asks for every name it prints (a strcmp
	 * call per step where the first letters agree cost a third of cuda_name) */
	int lo = 0, hi = countof(reserved_names);
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		const unsigned char *x = (const unsigned char *)s;
		const unsigned char *y = (const unsigned char *)reserved_names[mid];
		while (*x && *x == *y)
			x++, y++;
		if (*x == *y)
			return true;
		if (*x < *y)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

void cuda_name(Buf *out, const char *name)
{
	buf_puts(out, name);
	if (is_reserved(name))
		buf_puts(out, "_");
}

/* ---- values: text + precedence + dtype ------------------------------------------------ */

/* A printed expression: its text, the precedence of its top operator and its dtype. The text
 * is written in place, in the buffer the whole expression goes to (Val.t, the caller's): it
 * runs from `at` to the buffer's end while it is the last value begun, and a wrapper around
 * it (parentheses, a conversion, a call) is inserted before it. No value has a buffer of its
 * own: an operand is not copied into its parent's text, and nothing is allocated but the
 * output's growth. */
typedef struct Val {
	Buf *t;
	size_t at;
	int prec;
	DType dt;
} Val;

/* a value beginning at the end of t */
static Val val_new(Buf *t, int prec, DType dt)
{
	return (Val){t, t->len, prec, dt};
}

/* the first character of v's text */
static char val_first(const Val *v)
{
	return v->t->len > v->at ? v->t->s[v->at] : '\0';
}

/* s inserted before v's text (v is the last value begun: its text ends the buffer) */
static void val_prepend(Val *v, const char *s)
{
	Buf *t = v->t;
	size_t n = strlen(s), end = t->len;
	buf_puts(t, s); /* the room, and the NUL at the new end */
	memmove(t->s + v->at + n, t->s + v->at, end - v->at);
	memcpy(t->s + v->at, s, n);
}

/* v's text between pre and post */
static void val_wrap(Val *v, const char *pre, const char *post)
{
	val_prepend(v, pre);
	buf_puts(v->t, post);
}

/* Wraps v in parentheses when its operator binds less tightly than `min`. */
static void val_paren(Val *v, int min)
{
	if (v->prec >= min)
		return;
	val_wrap(v, "(", ")");
	v->prec = PREC_PRIMARY;
}

static bool is_half(DType t) { return t == DT_F16 || t == DT_BF16; }
static bool is_intlike(DType t) { return t == DT_I32 || t == DT_I64 || t == DT_BOOL; }

/* Conversions C performs implicitly without changing the value. */
bool cuda_widening(DType have, DType want)
{
	if (is_intlike(have) && is_intlike(want))
		return want != DT_BOOL && dtype_size(want) >= dtype_size(have);
	return have == DT_F32 && want == DT_F64;
}

/* `name(v)` */
static Val val_call1(const char *name, Val v, DType dt)
{
	val_prepend(&v, "(");
	val_prepend(&v, name);
	buf_puts(v.t, ")");
	return (Val){v.t, v.at, PREC_PRIMARY, dt};
}

/* Converts a printed value to `want`. `implicit`: the context converts by itself (an operand
 * next to one of type `want`, a condition), so only f16/bf16 need a helper. */
static Val val_to(Val v, DType want, bool implicit)
{
	if (v.dt == want)
		return v;
	if (v.dt == DT_F16)
		return val_to(val_call1("__fus_half2float", v, DT_F32), want, implicit);
	if (v.dt == DT_BF16)
		return val_to(val_call1("__fus_bfloat2float", v, DT_F32), want, implicit);
	if (is_half(want)) {
		v = val_to(v, DT_F32, false);
		return val_call1(want == DT_F16 ? "__fus_float2half" : "__fus_float2bfloat", v, want);
	}
	if (implicit || cuda_widening(v.dt, want)) {
		v.dt = want;
		return v;
	}
	val_paren(&v, PREC_UNARY);
	val_prepend(&v, ")");
	val_prepend(&v, dtype_ctype(want));
	val_prepend(&v, "(");
	return (Val){v.t, v.at, PREC_UNARY, want};
}

/* A float literal that reads back as exactly v (shortest such text). */
static void put_float(Buf *out, double v, bool f32)
{
	char s[64];

	if (isnan(v)) {
		buf_puts(out, f32 ? "__int_as_float(0x7fffffff)" :
				    "__longlong_as_double(0x7fffffffffffffffLL)");
		return;
	}
	if (isinf(v)) {
		if (f32)
			buf_puts(out, v > 0 ? "__int_as_float(0x7f800000)" :
					      "__int_as_float(0xff800000)");
		else
			buf_puts(out, v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)" :
					      "__longlong_as_double(0xfff0000000000000LL)");
		return;
	}
	if (f32)
		v = (float)v;
	for (int p = 1; p <= 17; p++) {
		snprintf(s, sizeof s, "%.*g", p, v);
		if (f32 ? strtof(s, NULL) == (float)v : strtod(s, NULL) == v)
			break;
	}
	buf_puts(out, s);
	if (!strpbrk(s, ".e"))
		buf_puts(out, ".0");
	if (f32)
		buf_puts(out, "f");
}

/* v (not INT64_MIN) in decimal, then suffix: the emitter prints thousands of literals, and
 * buf_printf costs several times this. */
static void put_digits(Buf *out, int64_t v, const char *suffix)
{
	char s[32], *p = s + sizeof s - 3;
	uint64_t u = v < 0 ? (uint64_t)-v : (uint64_t)v;
	memcpy(p, suffix, strlen(suffix) + 1);
	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10));
	if (v < 0)
		*--p = '-';
	buf_puts(out, p);
}

void cuda_put_int(Buf *out, int64_t v)
{
	if (v == INT64_MIN)
		buf_puts(out, "(-9223372036854775807LL - 1)");
	else if (v == INT32_MIN) /* -2147483648 is the long long 2147483648 negated */
		buf_puts(out, "(-2147483647 - 1)");
	else
		put_digits(out, v, v > INT32_MAX || v < INT32_MIN ? "LL" : "");
}

void cuda_put_n(Buf *out, const char *s, size_t n)
{
	char chunk[256];
	while (n) {
		size_t k = n < sizeof chunk - 1 ? n : sizeof chunk - 1;
		memcpy(chunk, s, k);
		chunk[k] = '\0';
		buf_puts(out, chunk);
		s += k;
		n -= k;
	}
}

static bool is_literal(IrExpr *e) { return e->kind == EX_INT || e->kind == EX_FLOAT; }

/* A literal printed directly in dtype `want` (f16/bf16: converted from an f32 literal). */
static Val val_literal(Buf *t, IrExpr *e, DType want)
{
	DType ct = dtype_compute(want);
	bool is_int = e->kind == EX_INT;
	double fv = is_int ? (double)e->ival : e->fval;
	/* a float literal read as an integer converts as CUDA (and the reference) do: truncated,
	 * saturated, NaN 0 (a plain C cast of inf, NaN or 1e30 is undefined) */
	int64_t iv = is_int ? e->ival : dtype_float_to_int(e->fval, ct == DT_I32 ? DT_I32 : DT_I64);
	Val v = val_new(t, PREC_PRIMARY, ct);

	if (ct == DT_BOOL) {
		buf_puts(t, (is_int ? iv != 0 : fv != 0) ? "true" : "false");
	} else if (is_intlike(ct)) {
		cuda_put_int(t, iv);
		if (iv < 0)
			v.prec = PREC_UNARY;
	} else {
		put_float(t, fv, ct == DT_F32);
		char c = val_first(&v);
		if (c == '-' || c == '(')
			v.prec = c == '-' ? PREC_UNARY : PREC_PRIMARY;
	}
	return val_to(v, want, false);
}

static Val val_expr(Buf *t, IrExpr *e);

/* e converted to `want`. */
static Val val_conv(Buf *t, IrExpr *e, DType want, bool implicit)
{
	if (is_literal(e))
		return val_literal(t, e, want);
	return val_to(val_expr(t, e), want, implicit);
}

/* e converted to `want`, in parentheses below precedence min */
static Val val_operand(Buf *t, IrExpr *e, DType want, bool implicit, int min)
{
	Val v = val_conv(t, e, want, implicit);
	val_paren(&v, min);
	return v;
}

/* `l OP r` computed in ct (op comes with its spaces: " + "). An operand is converted
 * implicitly when the other already has type ct (C's usual arithmetic conversions then give
 * ct). Comparison chains and && inside || get parentheses for the reader's sake. */
static Val val_infix(Buf *t, IrExpr *l, IrExpr *r, DType ct, const char *op, int prec,
		     DType result)
{
	int lmin = prec, rmin = prec + 1;

	if (prec == PREC_REL || prec == PREC_EQ)
		lmin = rmin = PREC_REL + 1;
	if (prec == PREC_OR)
		lmin = rmin = PREC_AND + 1;
	Val v = val_operand(t, l, ct, r->dtype == ct && !is_literal(r), lmin);
	buf_puts(t, op);
	val_operand(t, r, ct, l->dtype == ct && !is_literal(l), rmin);
	return (Val){t, v.at, prec, result};
}

/* `name(args...)` with every argument converted explicitly to ct. */
static Val val_callv(Buf *t, const char *name, IrExpr **args, int n, DType ct)
{
	Val v = val_new(t, PREC_PRIMARY, ct);
	buf_puts(t, name);
	buf_puts(t, "(");
	for (int i = 0; i < n; i++) {
		buf_puts(t, i ? ", " : "");
		/* an integer literal is an int in C++: with a long long beside it the (int, int)
		 * and (long long, long long) helpers would both match */
		if (ct == DT_I64 && is_literal(args[i]))
			buf_puts(t, "(long long)");
		val_conv(t, args[i], ct, false);
	}
	buf_puts(t, ")");
	return v;
}

static Val val_prefix(const char *op, Val a, DType dt)
{
	/* an operand starting with the same sign gets parentheses: - -x would read as --x */
	if (val_first(&a) == op[0])
		a.prec = 0;
	val_paren(&a, PREC_UNARY);
	val_prepend(&a, op);
	return (Val){a.t, a.at, PREC_UNARY, dt};
}

/* (a + b - 1) / b, for non-negative index arithmetic in ct (i64, or i32 in a 32-bit index
 * variant). */
static Val val_ceildiv(Buf *t, IrExpr *l, IrExpr *r, DType ct)
{
	int64_t c;
	Val v = val_new(t, PREC_MUL, ct);

	buf_puts(t, "(");
	val_operand(t, l, ct, true, PREC_ADD);
	if (ir_is_const(r, &c)) {
		buf_printf(t, " + %lld) / ", (long long)(c - 1));
		val_operand(t, r, ct, true, PREC_MUL + 1);
		return v;
	}
	buf_puts(t, " + ");
	Val b = val_operand(t, r, ct, true, PREC_MUL + 1);
	char *text = xstrdup(t->s + b.at); /* b again: the buffer may move as it grows */
	buf_puts(t, " - 1) / ");
	buf_puts(t, text);
	free(text);
	return v;
}

/* e is in [0, 2^31): a block or thread index (gridDim.x < 2^31), or a quotient or remainder
 * of one by a value >= 0 (x / d and x % d are at most x where they run: d > 0 there). */
static bool below_2_31(IrExpr *e)
{
	int64_t lo, hi;
	if (e->kind == EX_PAR)
		return true;
	if (e->kind == EX_OP && (e->op == OP_DIV || e->op == OP_MOD) && e->dtype == DT_I64)
		return below_2_31(e->args[0]) && ir_nonneg(NULL, e->args[1]);
	return ir_range(NULL, e, &lo, &hi) && lo >= 0 && hi <= INT32_MAX;
}

/* x / d or x % d of a 64-bit x in [0, 2^31) by a variable d >= 0 (a merged block index
 * divided back by a size), in 32 bits: d is clamped to 2^31 (x / d = 0 and x % d = x for any
 * larger d, as for 2^31). No branch and x written once, so that the compiler sees equal
 * quotients as one (a ?: on d kept 160 of them apart in bcast3: 4x slower). */
static Val val_divmod31(Buf *t, IrExpr *l, IrExpr *r, bool mod)
{
	Val v = val_new(t, PREC_UNARY, DT_I64);

	buf_puts(t, "(long long)((unsigned)");
	val_operand(t, l, DT_I64, true, PREC_UNARY);
	buf_puts(t, mod ? " % (unsigned)min(" : " / (unsigned)min(");
	val_conv(t, r, DT_I64, true);
	buf_puts(t, ", 2147483648LL))");
	return v;
}

/* x / d or x % d of 32-bit index values that are both >= 0 (a 32-bit index variant,
 * passes/index32.c) by a variable d, as unsigned arithmetic: no sign correction around the
 * division (a constant d divides signed as in the 64-bit kernel). */
static Val val_divmod_u32(Buf *t, IrExpr *l, IrExpr *r, bool mod)
{
	Val v = val_new(t, PREC_UNARY, DT_I32);

	buf_puts(t, "(int)((unsigned)");
	val_operand(t, l, DT_I32, true, PREC_UNARY);
	buf_puts(t, mod ? " % (unsigned)" : " / (unsigned)");
	val_operand(t, r, DT_I32, true, PREC_UNARY);
	buf_puts(t, ")");
	return v;
}

static Val val_arith(Buf *t, IrExpr *e)
{
	DType ct = dtype_compute(e->dtype);
	IrExpr **x = e->args;

	switch (e->op) {
	case OP_ADD: return val_infix(t, x[0], x[1], ct, " + ", ir_op_prec(e->op), ct);
	case OP_SUB: return val_infix(t, x[0], x[1], ct, " - ", ir_op_prec(e->op), ct);
	case OP_MUL: return val_infix(t, x[0], x[1], ct, " * ", ir_op_prec(e->op), ct);
	case OP_DIV:
	case OP_MOD:
		if (ct == DT_I64 && !ir_is_const(x[1], NULL) && below_2_31(x[0]) && ir_nonneg(NULL, x[1]))
			return val_divmod31(t, x[0], x[1], e->op == OP_MOD);
		if (ct == DT_I32 && !ir_is_const(x[1], NULL) && ir_nonneg(NULL, x[0]) &&
		    ir_nonneg(NULL, x[1]))
			return val_divmod_u32(t, x[0], x[1], e->op == OP_MOD);
		if (e->op == OP_DIV && ct == DT_F32) /* within 2 ulp: docs/language.md, "Float accuracy on the GPU" */
			return val_callv(t, "__fus_fdiv", x, 2, ct);
		if (e->op == OP_DIV)
			return val_infix(t, x[0], x[1], ct, " / ", ir_op_prec(e->op), ct);
		if (dtype_is_float(ct))
			return val_callv(t, ct == DT_F64 ? "fmod" : "fmodf", x, 2, ct);
		return val_infix(t, x[0], x[1], ct, " % ", ir_op_prec(e->op), ct);
	case OP_NEG: return val_prefix("-", val_conv(t, x[0], ct, true), ct);
	case OP_CEILDIV: return val_ceildiv(t, x[0], x[1], ct);
	case OP_XOR: return val_infix(t, x[0], x[1], ct, " ^ ", ir_op_prec(e->op), ct);
	default: die("not an arithmetic op: %s", op_name(e->op));
	}
}

static Val val_compare(Buf *t, IrExpr *e)
{
	static const struct { IrOp op; const char *text; } ops[] = {
		{OP_LT, " < "}, {OP_LE, " <= "}, {OP_GT, " > "}, {OP_GE, " >= "}, {OP_EQ, " == "},
		{OP_NE, " != "},
	};
	DType ct = dtype_compute(dtype_promote(e->args[0]->dtype, e->args[1]->dtype));

	for (int i = 0; i < countof(ops); i++)
		if (ops[i].op == e->op)
			return val_infix(t, e->args[0], e->args[1], ct, ops[i].text, ir_op_prec(e->op),
					 DT_BOOL);
	die("not a comparison: %s", op_name(e->op));
}

static Val val_logical(Buf *t, IrExpr *e)
{
	switch (e->op) {
	case OP_AND: return val_infix(t, e->args[0], e->args[1], DT_BOOL, " && ", PREC_AND, DT_BOOL);
	case OP_OR: return val_infix(t, e->args[0], e->args[1], DT_BOOL, " || ", PREC_OR, DT_BOOL);
	case OP_NOT: return val_prefix("!", val_conv(t, e->args[0], DT_BOOL, true), DT_BOOL);
	default: die("not a logical op: %s", op_name(e->op));
	}
}

/* Float built-ins: the CUDA math function for f32 and for f64. */
static const struct { IrOp op; const char *f32, *f64; } float_fns[] = {
	{OP_EXP, "expf", "exp"},       {OP_EXP_LOWP, "expf", "exp"},
	{OP_LOG, "logf", "log"},
	{OP_SQRT, "sqrtf", "sqrt"},    {OP_RSQRT, "rsqrtf", "rsqrt"},
	{OP_TANH, "tanhf", "tanh"},    {OP_SIGMOID, "__fus_sigmoid", "__fus_sigmoid"},
	{OP_ERF, "erff", "erf"},       {OP_SIN, "sinf", "sin"},
	{OP_COS, "cosf", "cos"},       {OP_FLOOR, "floorf", "floor"},
	{OP_CEIL, "ceilf", "ceil"},    {OP_POW, "powf", "pow"},
};

static Val val_func(Buf *t, IrExpr *e)
{
	DType ct = dtype_compute(e->dtype) == DT_F64 ? DT_F64 : DT_F32;

	/* an exp only f16/bf16 results see (frontend/lowp_exp.c): exp2f is ex2.approx.f32 */
	if (e->op == OP_EXP_LOWP && ct == DT_F32) {
		Val v = val_new(t, PREC_PRIMARY, ct);
		buf_puts(t, "exp2f(");
		val_operand(t, e->args[0], ct, false, PREC_MUL);
		buf_puts(t, " * 1.44269504f)");
		return val_to(v, e->dtype, false);
	}

	for (int i = 0; i < countof(float_fns); i++) {
		if (float_fns[i].op != e->op)
			continue;
		const char *fn = ct == DT_F64 ? float_fns[i].f64 : float_fns[i].f32;
		return val_to(val_callv(t, fn, e->args, e->nargs, ct), e->dtype, false);
	}
	die("not a float function: %s", op_name(e->op));
}

/* max/min/abs on any numeric type; max/min propagate NaN like PyTorch (preamble helpers). */
static Val val_minmax(Buf *t, IrExpr *e)
{
	DType ct = dtype_compute(e->dtype);
	Val v;

	if (e->op == OP_ABS) {
		if (ct == DT_BOOL)
			return val_conv(t, e->args[0], ct, false);
		const char *fn = ct == DT_F32 ? "fabsf" : ct == DT_F64 ? "fabs" : "__fus_abs";
		v = val_callv(t, fn, e->args, 1, ct);
	} else {
		v = val_callv(t, e->op == OP_MAX ? "__fus_max" : "__fus_min", e->args, 2, ct);
	}
	return val_to(v, e->dtype, false);
}

static Val val_op(Buf *t, IrExpr *e)
{
	switch (op_kind(e->op)) {
	case 'a': return val_arith(t, e);
	case 'c': return val_compare(t, e);
	case 'l': return val_logical(t, e);
	case 'f': return val_func(t, e);
	case 'm': return val_minmax(t, e);
	}
	die("bad op kind for %s", op_name(e->op));
}

static Val val_select(Buf *t, IrExpr *e)
{
	IrExpr *c = e->args[0], *a = e->args[1], *b = e->args[2];
	Val v = val_new(t, PREC_SELECT, e->dtype);

	val_operand(t, c, DT_BOOL, true, PREC_OR);
	buf_puts(t, " ? ");
	val_operand(t, a, e->dtype, b->dtype == e->dtype && !is_literal(b), PREC_OR);
	buf_puts(t, " : ");
	val_operand(t, b, e->dtype, a->dtype == e->dtype && !is_literal(a), PREC_OR);
	return v;
}

static Val val_name(Buf *t, const char *name, DType dt)
{
	Val v = val_new(t, PREC_PRIMARY, dt);
	cuda_name(t, name);
	return v;
}

static const char *par_index_text(ParType p)
{
	switch (p) {
	case PT_BIDX: return "blockIdx.x";
	case PT_BIDY: return "blockIdx.y";
	case PT_BIDZ: return "blockIdx.z";
	case PT_TIDX: return "threadIdx.x";
	case PT_TIDY: return "threadIdx.y";
	case PT_TIDZ: return "threadIdx.z";
	default: die("not a parallel index: %d", (int)p);
	}
}

/* `((long long)blockIdx.x)`, `((int)threadIdx.y)`: a parallel index in an index dtype */
static const char *par_cast_text(ParType p, bool i64)
{
	switch (p) {
	case PT_BIDX: return i64 ? "((long long)blockIdx.x)" : "((int)blockIdx.x)";
	case PT_BIDY: return i64 ? "((long long)blockIdx.y)" : "((int)blockIdx.y)";
	case PT_BIDZ: return i64 ? "((long long)blockIdx.z)" : "((int)blockIdx.z)";
	case PT_TIDX: return i64 ? "((long long)threadIdx.x)" : "((int)threadIdx.x)";
	case PT_TIDY: return i64 ? "((long long)threadIdx.y)" : "((int)threadIdx.y)";
	case PT_TIDZ: return i64 ? "((long long)threadIdx.z)" : "((int)threadIdx.z)";
	default: die("not a parallel index: %d", (int)p);
	}
}

/* e printed in its own dtype. */
static Val val_expr(Buf *t, IrExpr *e)
{
	Val v;

	switch (e->kind) {
	case EX_INT:
	case EX_FLOAT:
		return val_literal(t, e, e->dtype);
	case EX_PARAM:
		return val_name(t, e->param->name, e->dtype);
	case EX_SIZE: /* a kernel parameter: long long; (int) in a 32-bit index variant */
		v = val_name(t, e->size->name, DT_I64);
		return e->dtype == DT_I64 ? v : val_to(v, e->dtype, false);
	case EX_VAR:
		return val_name(t, e->var->name, e->dtype);
	case EX_PAR:
		v = val_new(t, PREC_PRIMARY, e->dtype);
		if (e->dtype == DT_I64 || e->dtype == DT_I32) { /* nearly all: one piece */
			buf_puts(t, par_cast_text(e->par, e->dtype == DT_I64));
			return v;
		}
		buf_puts(t, "((");
		buf_puts(t, dtype_ctype(e->dtype));
		buf_puts(t, ")");
		buf_puts(t, par_index_text(e->par));
		buf_puts(t, ")");
		return v;
	case EX_LOAD:
		if (e->tensor->sched.evict_first) { /* __fus_ld_ef(&x[off]) */
			v = val_new(t, PREC_PRIMARY, e->tensor->dtype);
			buf_puts(t, "__fus_ld_ef(&");
			cuda_name(t, e->tensor->name);
		} else {
			v = val_name(t, e->tensor->name, e->tensor->dtype);
		}
		buf_puts(t, "[");
		val_conv(t, e->args[0], DT_I64, true);
		buf_puts(t, e->tensor->sched.evict_first ? "])" : "]");
		return val_to(v, e->dtype, false);
	case EX_OP:
		return val_op(t, e);
	case EX_SELECT:
		return val_select(t, e);
	case EX_CAST:
		/* a 32-bit index widened for 64-bit arithmetic (passes/index32.c): explicitly, so
		 * that an operation of two of them is not computed in int */
		if (e->dtype == DT_I64 && e->args[0]->dtype == DT_I32 && !is_literal(e->args[0])) {
			v = val_expr(t, e->args[0]);
			val_paren(&v, PREC_UNARY);
			val_prepend(&v, "(long long)");
			return (Val){t, v.at, PREC_UNARY, DT_I64};
		}
		return val_conv(t, e->args[0], e->dtype, false);
	case EX_AXIS:
	case EX_ACCESS:
	case EX_REDUCE:
		break;
	}
	die("expression kind %d cannot reach the CUDA backend", (int)e->kind);
}

void cuda_put_expr(Buf *out, IrExpr *e, DType want, bool implicit)
{
	val_conv(out, e, want, implicit);
}

void cuda_put_operand(Buf *out, IrExpr *e, DType want, bool implicit, int min)
{
	val_operand(out, e, want, implicit, min);
}
