/* cuda.c: the CUDA emitter. One .cu per .fus file:
 *
 *   // comment header
 *   device preamble     f16/bf16 storage types and conversions (inline PTX / integer
 *                       arithmetic), __fus_vec, math helpers; no #include (NVRTC-clean)
 *   kernels             one `extern "C" __global__ FUSION_kernel` per fusion
 *   #ifndef __CUDACC_RTC__
 *   host part           per fusion: FUSION_last_error() and the launcher FUSION(...)
 *   #endif
 *
 * Expressions are printed with the fewest parentheses C precedence allows, and every value is
 * converted explicitly to the dtype it is used as (f16/bf16 through the preamble's helpers);
 * C's own implicit conversions are relied on only where they give the same value (widening,
 * or an operand converted to the other operand's type by the usual arithmetic conversions).
 * The output depends only on the kernels: no pointers, no hash order, no clock.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "interp/interp.h"

/* ---- names ---------------------------------------------------------------------------- */

/* C++ keywords, CUDA built-ins, math functions the generated code calls, and names the
 * launcher uses. A .fus name equal to one of these gets a trailing '_'. */
static const char *const reserved_names[] = {
	"alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
	"case", "catch", "char", "char16_t", "char32_t", "char8_t", "class", "compl", "concept",
	"const", "const_cast", "consteval", "constexpr", "constinit", "continue", "co_await",
	"co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
	"else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
	"if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
	"nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
	"reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof",
	"static", "static_assert", "static_cast", "struct", "switch", "template", "this",
	"thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union",
	"unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
	"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "main",
	"expf", "exp", "logf", "log", "sqrtf", "sqrt", "rsqrtf", "rsqrt", "tanhf", "tanh", "erff",
	"erf", "fabsf", "fabs", "sinf", "sin", "cosf", "cos", "floorf", "floor", "ceilf", "ceil",
	"powf", "pow", "fmodf", "fmod", "fmaxf", "fminf", "fmax", "fmin", "abs", "min", "max",
	"stream", "uint16_t", "int32_t", "int64_t", "uintptr_t", "cudaError_t", "cudaStream_t",
	"snprintf", "va_list", "NULL",
};

static bool is_reserved(const char *s)
{
	if (strncmp(s, "__", 2) == 0 || strncmp(s, "fus_", 4) == 0)
		return true;
	for (int i = 0; i < countof(reserved_names); i++)
		if (strcmp(s, reserved_names[i]) == 0)
			return true;
	return false;
}

void cuda_name(Buf *out, const char *name)
{
	buf_puts(out, name);
	if (is_reserved(name))
		buf_puts(out, "_");
}

/* The file name without directories, so output does not depend on where fusc ran. */
static const char *base_name(const char *path)
{
	if (!path || strcmp(path, "-") == 0)
		return "<stdin>";
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* ---- values: text + precedence + dtype ------------------------------------------------ */

/* C precedence levels (higher binds tighter). */
enum {
	P_TERNARY = 3,
	P_OR = 4,
	P_AND = 5,
	P_EQ = 9,
	P_REL = 10,
	P_ADD = 12,
	P_MUL = 13,
	P_UNARY = 15,
	P_PRIMARY = 16,
};

/* A printed expression: its text, the precedence of its top operator and its dtype. */
typedef struct Val {
	Buf b;
	int prec;
	DType dt;
} Val;

static Val val_new(int prec, DType dt)
{
	Val v = {{0}, prec, dt};
	buf_puts(&v.b, "");
	return v;
}

/* Wraps v in parentheses when its operator binds less tightly than `min`. */
static void val_paren(Val *v, int min)
{
	if (v->prec >= min)
		return;
	Val w = val_new(P_PRIMARY, v->dt);
	buf_puts(&w.b, "(");
	buf_puts(&w.b, v->b.s);
	buf_puts(&w.b, ")");
	buf_free(&v->b);
	*v = w;
}

/* Appends v's text to out and frees v. */
static void val_put(Buf *out, Val *v)
{
	buf_puts(out, v->b.s);
	buf_free(&v->b);
}

static bool is_half(DType t) { return t == DT_F16 || t == DT_BF16; }
static bool is_intlike(DType t) { return t == DT_I32 || t == DT_I64 || t == DT_BOOL; }

/* Conversions C performs implicitly without changing the value. */
static bool widening(DType have, DType want)
{
	if (is_intlike(have) && is_intlike(want))
		return want != DT_BOOL && dtype_size(want) >= dtype_size(have);
	return have == DT_F32 && want == DT_F64;
}

/* `name(arg)` around v. */
static Val val_call1(const char *name, Val *v, DType dt)
{
	Val w = val_new(P_PRIMARY, dt);
	buf_puts(&w.b, name);
	buf_puts(&w.b, "(");
	buf_puts(&w.b, v->b.s);
	buf_puts(&w.b, ")");
	buf_free(&v->b);
	return w;
}

/* Converts a printed value to `want`. `implicit`: the context converts by itself (an operand
 * next to one of type `want`, a condition), so only f16/bf16 need a helper. */
static Val val_to(Val v, DType want, bool implicit)
{
	if (v.dt == want)
		return v;
	if (v.dt == DT_F16)
		return val_to(val_call1("__fus_half2float", &v, DT_F32), want, implicit);
	if (v.dt == DT_BF16)
		return val_to(val_call1("__fus_bfloat2float", &v, DT_F32), want, implicit);
	if (is_half(want)) {
		v = val_to(v, DT_F32, false);
		return val_call1(want == DT_F16 ? "__fus_float2half" : "__fus_float2bfloat", &v,
				 want);
	}
	if (implicit || widening(v.dt, want)) {
		v.dt = want;
		return v;
	}
	val_paren(&v, P_UNARY);
	Val w = val_new(P_UNARY, want);
	buf_printf(&w.b, "(%s)", dtype_ctype(want));
	buf_puts(&w.b, v.b.s);
	buf_free(&v.b);
	return w;
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

static void put_int(Buf *out, int64_t v)
{
	if (v == INT64_MIN)
		buf_puts(out, "(-9223372036854775807LL - 1)");
	else if (v == INT32_MIN) /* -2147483648 is the long long 2147483648 negated */
		buf_puts(out, "(-2147483647 - 1)");
	else if (v > INT32_MAX || v < INT32_MIN)
		buf_printf(out, "%lldLL", (long long)v);
	else
		buf_printf(out, "%lld", (long long)v);
}

static bool is_literal(IrExpr *e) { return e->kind == EX_INT || e->kind == EX_FLOAT; }

/* A literal printed directly in dtype `want` (f16/bf16: converted from an f32 literal). */
static Val val_literal(IrExpr *e, DType want)
{
	DType ct = dtype_compute(want);
	bool is_int = e->kind == EX_INT;
	double fv = is_int ? (double)e->ival : e->fval;
	/* a float literal read as an integer converts as CUDA (and the reference) do: truncated,
	 * saturated, NaN 0 (a plain C cast of inf, NaN or 1e30 is undefined) */
	int64_t iv = is_int ? e->ival : interp_float_to_int(e->fval, ct == DT_I32 ? DT_I32 : DT_I64);
	Val v = val_new(P_PRIMARY, ct);

	if (ct == DT_BOOL) {
		buf_puts(&v.b, (is_int ? iv != 0 : fv != 0) ? "true" : "false");
	} else if (is_intlike(ct)) {
		put_int(&v.b, iv);
		if (iv < 0)
			v.prec = P_UNARY;
	} else {
		put_float(&v.b, fv, ct == DT_F32);
		if (v.b.s[0] == '-' || v.b.s[0] == '(')
			v.prec = v.b.s[0] == '-' ? P_UNARY : P_PRIMARY;
	}
	return val_to(v, want, false);
}

static Val val_expr(IrExpr *e);

/* e converted to `want`. */
static Val val_conv(IrExpr *e, DType want, bool implicit)
{
	if (is_literal(e))
		return val_literal(e, want);
	return val_to(val_expr(e), want, implicit);
}

/* `l OP r` computed in ct. An operand is converted implicitly when the other already has
 * type ct (C's usual arithmetic conversions then give ct). Comparison chains and && inside
 * || get parentheses for the reader's sake. */
static Val val_infix(IrExpr *l, IrExpr *r, DType ct, const char *op, int prec, DType result)
{
	int lmin = prec, rmin = prec + 1;

	if (prec == P_REL || prec == P_EQ)
		lmin = rmin = P_REL + 1;
	if (prec == P_OR)
		lmin = rmin = P_AND + 1;
	Val a = val_conv(l, ct, r->dtype == ct && !is_literal(r));
	Val b = val_conv(r, ct, l->dtype == ct && !is_literal(l));
	val_paren(&a, lmin);
	val_paren(&b, rmin);
	Val v = val_new(prec, result);
	/* buf_puts, not "%s": an operand holds its whole subtree's text */
	buf_puts(&v.b, a.b.s);
	buf_printf(&v.b, " %s ", op);
	buf_puts(&v.b, b.b.s);
	buf_free(&a.b);
	buf_free(&b.b);
	return v;
}

/* `name(args...)` with every argument converted explicitly to ct. */
static Val val_callv(const char *name, IrExpr **args, int n, DType ct)
{
	Val v = val_new(P_PRIMARY, ct);
	buf_printf(&v.b, "%s(", name);
	for (int i = 0; i < n; i++) {
		Val a = val_conv(args[i], ct, false);
		buf_puts(&v.b, i ? ", " : "");
		/* an integer literal is an int in C++: with a long long beside it the (int, int)
		 * and (long long, long long) helpers would both match */
		if (ct == DT_I64 && is_literal(args[i]))
			buf_puts(&v.b, "(long long)");
		val_put(&v.b, &a);
	}
	buf_puts(&v.b, ")");
	return v;
}

static Val val_prefix(const char *op, Val a, DType dt)
{
	/* an operand starting with the same sign gets parentheses: - -x would read as --x */
	if (a.b.s[0] == op[0])
		a.prec = 0;
	val_paren(&a, P_UNARY);
	Val v = val_new(P_UNARY, dt);
	buf_puts(&v.b, op);
	buf_puts(&v.b, a.b.s);
	buf_free(&a.b);
	return v;
}

/* (a + b - 1) / b, for non-negative index arithmetic. */
static Val val_ceildiv(IrExpr *l, IrExpr *r)
{
	int64_t c;
	Val a = val_conv(l, DT_I64, true);
	Val b = val_conv(r, DT_I64, true);
	Val v = val_new(P_MUL, DT_I64);

	val_paren(&a, P_ADD);
	val_paren(&b, P_MUL + 1);
	if (ir_is_const(r, &c))
		buf_printf(&v.b, "(%s + %lld) / %s", a.b.s, (long long)(c - 1), b.b.s);
	else
		buf_printf(&v.b, "(%s + %s - 1) / %s", a.b.s, b.b.s, b.b.s);
	buf_free(&a.b);
	buf_free(&b.b);
	return v;
}

static Val val_arith(IrExpr *e)
{
	DType ct = dtype_compute(e->dtype);
	IrExpr **x = e->args;

	switch (e->op) {
	case OP_ADD: return val_infix(x[0], x[1], ct, "+", P_ADD, ct);
	case OP_SUB: return val_infix(x[0], x[1], ct, "-", P_ADD, ct);
	case OP_MUL: return val_infix(x[0], x[1], ct, "*", P_MUL, ct);
	case OP_DIV: return val_infix(x[0], x[1], ct, "/", P_MUL, ct);
	case OP_MOD:
		if (dtype_is_float(ct))
			return val_callv(ct == DT_F64 ? "fmod" : "fmodf", x, 2, ct);
		return val_infix(x[0], x[1], ct, "%", P_MUL, ct);
	case OP_NEG: return val_prefix("-", val_conv(x[0], ct, true), ct);
	case OP_CEILDIV: return val_ceildiv(x[0], x[1]);
	default: die("not an arithmetic op: %s", op_name(e->op));
	}
}

static Val val_compare(IrExpr *e)
{
	static const struct { IrOp op; const char *text; int prec; } ops[] = {
		{OP_LT, "<", P_REL}, {OP_LE, "<=", P_REL}, {OP_GT, ">", P_REL},
		{OP_GE, ">=", P_REL}, {OP_EQ, "==", P_EQ}, {OP_NE, "!=", P_EQ},
	};
	DType ct = dtype_compute(dtype_promote(e->args[0]->dtype, e->args[1]->dtype));

	for (int i = 0; i < countof(ops); i++)
		if (ops[i].op == e->op)
			return val_infix(e->args[0], e->args[1], ct, ops[i].text, ops[i].prec,
					 DT_BOOL);
	die("not a comparison: %s", op_name(e->op));
}

static Val val_logical(IrExpr *e)
{
	switch (e->op) {
	case OP_AND: return val_infix(e->args[0], e->args[1], DT_BOOL, "&&", P_AND, DT_BOOL);
	case OP_OR: return val_infix(e->args[0], e->args[1], DT_BOOL, "||", P_OR, DT_BOOL);
	case OP_NOT: return val_prefix("!", val_conv(e->args[0], DT_BOOL, true), DT_BOOL);
	default: die("not a logical op: %s", op_name(e->op));
	}
}

/* Float built-ins: the CUDA math function for f32 and for f64. */
static const struct { IrOp op; const char *f32, *f64; } float_fns[] = {
	{OP_EXP, "expf", "exp"},       {OP_LOG, "logf", "log"},
	{OP_SQRT, "sqrtf", "sqrt"},    {OP_RSQRT, "rsqrtf", "rsqrt"},
	{OP_TANH, "tanhf", "tanh"},    {OP_SIGMOID, "__fus_sigmoid", "__fus_sigmoid"},
	{OP_ERF, "erff", "erf"},       {OP_SIN, "sinf", "sin"},
	{OP_COS, "cosf", "cos"},       {OP_FLOOR, "floorf", "floor"},
	{OP_CEIL, "ceilf", "ceil"},    {OP_POW, "powf", "pow"},
};

static Val val_func(IrExpr *e)
{
	DType ct = dtype_compute(e->dtype) == DT_F64 ? DT_F64 : DT_F32;

	for (int i = 0; i < countof(float_fns); i++) {
		if (float_fns[i].op != e->op)
			continue;
		const char *fn = ct == DT_F64 ? float_fns[i].f64 : float_fns[i].f32;
		return val_to(val_callv(fn, e->args, e->nargs, ct), e->dtype, false);
	}
	die("not a float function: %s", op_name(e->op));
}

/* max/min/abs on any numeric type; max/min propagate NaN like PyTorch (preamble helpers). */
static Val val_minmax(IrExpr *e)
{
	DType ct = dtype_compute(e->dtype);
	Val v;

	if (e->op == OP_ABS) {
		if (ct == DT_BOOL)
			return val_conv(e->args[0], ct, false);
		const char *fn = ct == DT_F32 ? "fabsf" : ct == DT_F64 ? "fabs" : "__fus_abs";
		v = val_callv(fn, e->args, 1, ct);
	} else {
		v = val_callv(e->op == OP_MAX ? "__fus_max" : "__fus_min", e->args, 2, ct);
	}
	return val_to(v, e->dtype, false);
}

static Val val_op(IrExpr *e)
{
	switch (op_kind(e->op)) {
	case 'a': return val_arith(e);
	case 'c': return val_compare(e);
	case 'l': return val_logical(e);
	case 'f': return val_func(e);
	case 'm': return val_minmax(e);
	}
	die("bad op kind for %s", op_name(e->op));
}

static Val val_select(IrExpr *e)
{
	IrExpr *c = e->args[0], *t = e->args[1], *f = e->args[2];
	Val vc = val_conv(c, DT_BOOL, true);
	Val vt = val_conv(t, e->dtype, f->dtype == e->dtype && !is_literal(f));
	Val vf = val_conv(f, e->dtype, t->dtype == e->dtype && !is_literal(t));

	val_paren(&vc, P_OR);
	val_paren(&vt, P_OR);
	val_paren(&vf, P_OR);
	Val v = val_new(P_TERNARY, e->dtype);
	buf_puts(&v.b, vc.b.s);
	buf_puts(&v.b, " ? ");
	buf_puts(&v.b, vt.b.s);
	buf_puts(&v.b, " : ");
	buf_puts(&v.b, vf.b.s);
	buf_free(&vc.b);
	buf_free(&vt.b);
	buf_free(&vf.b);
	return v;
}

static Val val_name(const char *name, DType dt)
{
	Val v = val_new(P_PRIMARY, dt);
	cuda_name(&v.b, name);
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

/* e printed in its own dtype. */
static Val val_expr(IrExpr *e)
{
	Val v;

	switch (e->kind) {
	case EX_INT:
	case EX_FLOAT:
		return val_literal(e, e->dtype);
	case EX_PARAM:
		return val_name(e->param->name, e->dtype);
	case EX_SIZE:
		return val_name(e->size->name, e->dtype);
	case EX_VAR:
		return val_name(e->var->name, e->dtype);
	case EX_PAR:
		v = val_new(P_PRIMARY, e->dtype);
		buf_printf(&v.b, "((%s)%s)", dtype_ctype(e->dtype), par_index_text(e->par));
		return v;
	case EX_LOAD: {
		Val off = val_conv(e->args[0], DT_I64, true);
		v = val_name(e->tensor->name, e->tensor->dtype);
		buf_printf(&v.b, "[%s]", off.b.s);
		buf_free(&off.b);
		return val_to(v, e->dtype, false);
	}
	case EX_OP:
		return val_op(e);
	case EX_SELECT:
		return val_select(e);
	case EX_CAST:
		return val_conv(e->args[0], e->dtype, false);
	case EX_AXIS:
	case EX_ACCESS:
	case EX_REDUCE:
		break;
	}
	die("expression kind %d cannot reach the CUDA backend", (int)e->kind);
}

/* Appends e converted to want. */
static void put_expr(Buf *out, IrExpr *e, DType want, bool implicit)
{
	Val v = val_conv(e, want, implicit);
	val_put(out, &v);
}

/* ---- device preamble ------------------------------------------------------------------ */

static const char preamble[] =
	"// ---- fusc device preamble: no headers, so NVRTC compiles it as is ----\n"
	"\n"
	"// f16 and bf16 are stored as their bits; arithmetic happens in f32.\n"
	"struct __align__(2) __fus_half { unsigned short bits; };\n"
	"struct __align__(2) __fus_bfloat { unsigned short bits; };\n"
	"\n"
	"// N elements moved by one 2/4/8/16-byte access.\n"
	"template <typename T, int N> struct __align__(sizeof(T) * N) __fus_vec { T v[N]; };\n"
	"\n"
	"__device__ __forceinline__ float __fus_half2float(__fus_half h)\n"
	"{\n"
	"  float f;\n"
	"  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h.bits));\n"
	"  return f;\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ __fus_half __fus_float2half(float f)\n"
	"{\n"
	"  __fus_half h;\n"
	"  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h.bits) : \"f\"(f));\n"
	"  return h;\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ float __fus_bfloat2float(__fus_bfloat b)\n"
	"{\n"
	"  return __uint_as_float((unsigned int)b.bits << 16);\n"
	"}\n"
	"\n"
	"// Round to nearest even in integer arithmetic (works on every arch); NaN stays NaN.\n"
	"__device__ __forceinline__ __fus_bfloat __fus_float2bfloat(float f)\n"
	"{\n"
	"  unsigned int u = __float_as_uint(f);\n"
	"  __fus_bfloat b;\n"
	"  if ((u & 0x7fffffffu) > 0x7f800000u)\n"
	"    b.bits = (unsigned short)(u >> 16 | 0x40u);\n"
	"  else\n"
	"    b.bits = (unsigned short)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);\n"
	"  return b;\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ float __fus_sigmoid(float x) { return 1.0f / (1.0f + "
	"expf(-x)); }\n"
	"__device__ __forceinline__ double __fus_sigmoid(double x) { return 1.0 / (1.0 + "
	"exp(-x)); }\n"
	"\n"
	"// max/min propagate NaN (like PyTorch): a + b is NaN when either is.\n"
	"__device__ __forceinline__ float __fus_max(float a, float b) { return a != a || b "
	"!= b ? a + b : fmaxf(a, b); }\n"
	"__device__ __forceinline__ float __fus_min(float a, float b) { return a != a || b "
	"!= b ? a + b : fminf(a, b); }\n"
	"__device__ __forceinline__ double __fus_max(double a, double b) { return a != a || "
	"b != b ? a + b : fmax(a, b); }\n"
	"__device__ __forceinline__ double __fus_min(double a, double b) { return a != a || "
	"b != b ? a + b : fmin(a, b); }\n"
	"// integer max/min (int64_t is long on LP64 and long long elsewhere: both have an\n"
	"// exact match)\n"
	"__host__ __device__ __forceinline__ int __fus_max(int a, int b) { return a > b ? a : b; }\n"
	"__host__ __device__ __forceinline__ int __fus_min(int a, int b) { return a < b ? a : b; }\n"
	"__host__ __device__ __forceinline__ long __fus_max(long a, long b) { return a > b ? a : b; }\n"
	"__host__ __device__ __forceinline__ long __fus_min(long a, long b) { return a < b ? a : b; }\n"
	"__host__ __device__ __forceinline__ long long __fus_max(long long a, long long b) { "
	"return a > b ? a : b; }\n"
	"__host__ __device__ __forceinline__ long long __fus_min(long long a, long long b) { "
	"return a < b ? a : b; }\n"
	"__device__ __forceinline__ bool __fus_max(bool a, bool b) { return a || b; }\n"
	"__device__ __forceinline__ bool __fus_min(bool a, bool b) { return a && b; }\n"
	"__device__ __forceinline__ int __fus_abs(int a) { return a < 0 ? -a : a; }\n"
	"__device__ __forceinline__ long long __fus_abs(long long a) { return a < 0 ? -a : "
	"a; }\n";

/* Block reductions (KS_BLOCK_REDUCE, docs/reductions.md), emitted only for files that use
 * them. Every thread of the block calls them; the combination order is the one of
 * kir_block_reduce_shape, which the simulator follows too. */
static const char reduce_preamble[] =
	"\n"
	"// ---- block reductions: every thread of the block calls them ----\n"
	"struct __fus_red_sum { template <typename T> __device__ static T f(T a, T b) { return a "
	"+ b; } };\n"
	"struct __fus_red_max { template <typename T> __device__ static T f(T a, T b) { return "
	"__fus_max(a, b); } };\n"
	"struct __fus_red_min { template <typename T> __device__ static T f(T a, T b) { return "
	"__fus_min(a, b); } };\n"
	"\n"
	"__device__ __forceinline__ unsigned __fus_tid(void)\n"
	"{\n"
	"  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
	"}\n"
	"\n"
	"// Groups of COUNT (a power of 2 <= 32) consecutive threads of NT: butterfly shuffles.\n"
	"template <typename Op, int COUNT, int NT, typename T>\n"
	"__device__ __forceinline__ T __fus_reduce_warp(T v)\n"
	"{\n"
	"  unsigned left = NT - (__fus_tid() & ~31u);\n"
	"  unsigned mask = left >= 32u ? 0xffffffffu : (1u << left) - 1u;\n"
	"#pragma unroll\n"
	"  for (int o = COUNT / 2; o > 0; o /= 2)\n"
	"    v = Op::f(v, __shfl_xor_sync(mask, v, o));\n"
	"  return v;\n"
	"}\n"
	"\n"
	"// Groups of COUNT (a multiple of 32) consecutive threads: shuffles in each warp, then\n"
	"// the group's warp results in order through shared memory.\n"
	"template <typename Op, int COUNT, typename T>\n"
	"__device__ __forceinline__ T __fus_reduce_warps(T v)\n"
	"{\n"
	"  __shared__ T ws[32];\n"
	"  unsigned tid = __fus_tid();\n"
	"#pragma unroll\n"
	"  for (int o = 16; o > 0; o /= 2)\n"
	"    v = Op::f(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
	"  if ((tid & 31u) == 0)\n"
	"    ws[tid >> 5] = v;\n"
	"  __syncthreads();\n"
	"  unsigned first = tid / COUNT * (COUNT / 32);\n"
	"  T r = ws[first];\n"
	"#pragma unroll\n"
	"  for (int w = 1; w < COUNT / 32; w++)\n"
	"    r = Op::f(r, ws[first + w]);\n"
	"  __syncthreads();\n"
	"  return r;\n"
	"}\n"
	"\n"
	"// Any other group (base + i * STRIDE, i < COUNT): in order through shared memory.\n"
	"template <typename Op, int COUNT, int STRIDE, int NT, typename T>\n"
	"__device__ __forceinline__ T __fus_reduce_smem(T v)\n"
	"{\n"
	"  __shared__ T ws[NT];\n"
	"  unsigned tid = __fus_tid();\n"
	"  ws[tid] = v;\n"
	"  __syncthreads();\n"
	"  unsigned base = tid / (COUNT * STRIDE) * (COUNT * STRIDE) + tid % STRIDE;\n"
	"  T r = ws[base];\n"
	"  for (int i = 1; i < COUNT; i++)\n"
	"    r = Op::f(r, ws[base + i * STRIDE]);\n"
	"  __syncthreads();\n"
	"  return r;\n"
	"}\n";

/* Grid reductions (KS_GRID_REDUCE, docs/reductions.md), emitted only for files that use
 * them, after the block reductions' operators. Called by the one thread of each block that
 * would store element o; the partials are folded in order r = 0, 1, ..., R-1 whichever block
 * arrives last, so the result has the same bits on every run (the simulator folds the same
 * way). Volatile reads go to L2, where the other blocks' fenced stores are. */
static const char grid_preamble[] =
	"\n"
	"// ---- grid reductions: the thread of each block that would store element o calls it ----\n"
	"// Leaves acc in ws[o * R + r] (r: this block among the R), counts the arrival in sem[o];\n"
	"// the last block to arrive folds the R partials in order r = 0, 1, ... into acc, resets\n"
	"// sem[o] and returns true: it alone stores the result.\n"
	"template <typename Op, typename T>\n"
	"__device__ __forceinline__ bool __fus_grid_reduce(T &acc, T *ws, unsigned *sem, long long "
	"o, long long r, long long R)\n"
	"{\n"
	"  ws[o * R + r] = acc;\n"
	"  __threadfence();\n"
	"  if (atomicAdd(&sem[o], 1u) != (unsigned)(R - 1))\n"
	"    return false;\n"
	"  __threadfence();\n"
	"  const volatile T *p = ws + o * R;\n"
	"  T v = p[0];\n"
	"  for (long long i = 1; i < R; i++)\n"
	"    v = Op::f(v, (T)p[i]);\n"
	"  acc = v;\n"
	"  sem[o] = 0u;\n"
	"  return true;\n"
	"}\n";

/* Welford block combinations (KS_BLOCK_REDUCE with RED_WELFORD, docs/reductions.md),
 * emitted only for files that use them, after the block reductions (they use __fus_tid). The
 * triples (n, mean, M2) combine with Chan et al.'s formula, the lower-numbered thread's triple
 * first, so both sides of a butterfly step get the same bits; the order is the one of
 * kir_block_reduce_shape, which the simulator follows too. */
static const char welford_preamble[] =
	"\n"
	"// ---- Welford block combinations: every thread of the block calls them ----\n"
	"// (n, m, m2) = (n, m, m2) + (nb, mb, m2b); an empty side (count 0) gives the other.\n"
	"template <typename T>\n"
	"__device__ __forceinline__ void __fus_welford_combine(T &n, T &m, T &m2, T nb, T mb, T m2b)\n"
	"{\n"
	"  if (nb == (T)0)\n"
	"    return;\n"
	"  if (n == (T)0) {\n"
	"    n = nb; m = mb; m2 = m2b;\n"
	"    return;\n"
	"  }\n"
	"  T nn = n + nb;\n"
	"  T d = mb - m;\n"
	"  T f = nb / nn;\n"
	"  m = m + d * f;\n"
	"  m2 = m2 + m2b + d * d * n * f;\n"
	"  n = nn;\n"
	"}\n"
	"\n"
	"// Butterfly over groups of COUNT (a power of 2 <= 32) consecutive lanes of `mask`.\n"
	"template <int COUNT, typename T>\n"
	"__device__ __forceinline__ void __fus_welford_shfl(unsigned mask, unsigned tid, T &n, T &m, T &m2)\n"
	"{\n"
	"#pragma unroll\n"
	"  for (int o = COUNT / 2; o > 0; o /= 2) {\n"
	"    T nb = __shfl_xor_sync(mask, n, o);\n"
	"    T mb = __shfl_xor_sync(mask, m, o);\n"
	"    T m2b = __shfl_xor_sync(mask, m2, o);\n"
	"    if (tid & (unsigned)o) { // the partner is the lower thread: its triple goes first\n"
	"      T t = n; n = nb; nb = t;\n"
	"      t = m; m = mb; mb = t;\n"
	"      t = m2; m2 = m2b; m2b = t;\n"
	"    }\n"
	"    __fus_welford_combine(n, m, m2, nb, mb, m2b);\n"
	"  }\n"
	"}\n"
	"\n"
	"// Groups of COUNT (a power of 2 <= 32) consecutive threads of NT: shuffles only.\n"
	"template <int COUNT, int NT, typename T>\n"
	"__device__ __forceinline__ void __fus_welford_warp(T &n, T &m, T &m2)\n"
	"{\n"
	"  unsigned tid = __fus_tid();\n"
	"  unsigned left = NT - (tid & ~31u);\n"
	"  unsigned mask = left >= 32u ? 0xffffffffu : (1u << left) - 1u;\n"
	"  __fus_welford_shfl<COUNT>(mask, tid, n, m, m2);\n"
	"}\n"
	"\n"
	"// Groups of COUNT (a multiple of 32) consecutive threads: a butterfly in each warp, then\n"
	"// the group's warp results in order through shared memory.\n"
	"template <int COUNT, typename T>\n"
	"__device__ __forceinline__ void __fus_welford_warps(T &n, T &m, T &m2)\n"
	"{\n"
	"  __shared__ T wn[32], wm[32], wm2[32];\n"
	"  unsigned tid = __fus_tid();\n"
	"  __fus_welford_shfl<32>(0xffffffffu, tid, n, m, m2);\n"
	"  if ((tid & 31u) == 0) {\n"
	"    wn[tid >> 5] = n; wm[tid >> 5] = m; wm2[tid >> 5] = m2;\n"
	"  }\n"
	"  __syncthreads();\n"
	"  unsigned first = tid / COUNT * (COUNT / 32);\n"
	"  n = wn[first]; m = wm[first]; m2 = wm2[first];\n"
	"#pragma unroll\n"
	"  for (int w = 1; w < COUNT / 32; w++)\n"
	"    __fus_welford_combine(n, m, m2, wn[first + w], wm[first + w], wm2[first + w]);\n"
	"  __syncthreads();\n"
	"}\n"
	"\n"
	"// Any other group (base + i * STRIDE, i < COUNT): in order through shared memory.\n"
	"template <int COUNT, int STRIDE, int NT, typename T>\n"
	"__device__ __forceinline__ void __fus_welford_smem(T &n, T &m, T &m2)\n"
	"{\n"
	"  __shared__ T wn[NT], wm[NT], wm2[NT];\n"
	"  unsigned tid = __fus_tid();\n"
	"  wn[tid] = n; wm[tid] = m; wm2[tid] = m2;\n"
	"  __syncthreads();\n"
	"  unsigned base = tid / (COUNT * STRIDE) * (COUNT * STRIDE) + tid % STRIDE;\n"
	"  n = wn[base]; m = wm[base]; m2 = wm2[base];\n"
	"  for (int i = 1; i < COUNT; i++)\n"
	"    __fus_welford_combine(n, m, m2, wn[base + i * STRIDE], wm[base + i * STRIDE],\n"
	"                          wm2[base + i * STRIDE]);\n"
	"  __syncthreads();\n"
	"}\n";

static bool has_welford(Stmt *s)
{
	for (; s; s = s->next)
		if ((s->kind == KS_BLOCK_REDUCE && s->red == RED_WELFORD) || has_welford(s->body) ||
		    has_welford(s->then) || has_welford(s->els))
			return true;
	return false;
}

static bool has_grid_reduce(Kernel *k)
{
	return k->grid_ws.len > 0 || (k->fallback && k->fallback->grid_ws.len > 0);
}

static bool has_block_reduce(Stmt *s)
{
	for (; s; s = s->next)
		if (s->kind == KS_BLOCK_REDUCE || has_block_reduce(s->body) ||
		    has_block_reduce(s->then) || has_block_reduce(s->els))
			return true;
	return false;
}

/* ---- kernels -------------------------------------------------------------------------- */

typedef struct Em {
	Kernel *k;
	Buf *out;
	int depth;
	Map vec_bytes;  /* Tensor * -> int *: the largest vector access touching it (vector_bytes) */
} Em;

static void line_start(Em *em)
{
	buf_indent(em->out, em->depth);
}

static void vector_touch(Em *em, Tensor *t, int bytes)
{
	int *best = map_lookup(&em->vec_bytes, t);
	if (!best) {
		best = arena_alloc(em->k->arena, sizeof *best);
		map_insert(em->k->arena, &em->vec_bytes, t, best);
	}
	if (bytes > *best)
		*best = bytes;
}

/* Em.vec_bytes for every tensor of list s, in one walk (a buffer is aligned for the largest
 * vector access that touches it). */
static void vector_bytes(Em *em, Stmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == KS_VSTORE) {
			vector_touch(em, s->tensor, s->vec * dtype_size(s->tensor->dtype));
			vector_touch(em, s->src, s->vec * dtype_size(s->src->dtype));
		}
		vector_bytes(em, s->body);
		vector_bytes(em, s->then);
		vector_bytes(em, s->els);
	}
}

static void emit_stmts(Em *em, Stmt *s);

static void emit_block(Em *em, Stmt *body)
{
	buf_puts(em->out, " {\n");
	em->depth++;
	emit_stmts(em, body);
	em->depth--;
	line_start(em);
	buf_puts(em->out, "}");
}

static void emit_for(Em *em, Stmt *s)
{
	if (s->unroll || s->vectorize) {
		line_start(em);
		buf_puts(em->out, "#pragma unroll\n");
	}
	line_start(em);
	buf_printf(em->out, "for (%s ", dtype_ctype(s->var->dtype));
	cuda_name(em->out, s->var->name);
	buf_puts(em->out, " = 0; ");
	cuda_name(em->out, s->var->name);
	buf_puts(em->out, " < ");
	put_expr(em->out, s->var->extent, s->var->dtype, true);
	buf_puts(em->out, "; ++");
	cuda_name(em->out, s->var->name);
	buf_puts(em->out, ")");
	emit_block(em, s->body);
	buf_puts(em->out, "\n");
}

/* if / else if / else chains. */
static void emit_if(Em *em, Stmt *s)
{
	line_start(em);
	for (;;) {
		buf_puts(em->out, "if (");
		put_expr(em->out, s->cond, DT_BOOL, true);
		buf_puts(em->out, ")");
		emit_block(em, s->then);
		if (!s->els)
			break;
		buf_puts(em->out, " else ");
		if (s->els->kind == KS_IF && !s->els->next) {
			s = s->els;
			continue;
		}
		buf_puts(em->out, "{\n");
		em->depth++;
		emit_stmts(em, s->els);
		em->depth--;
		line_start(em);
		buf_puts(em->out, "}");
		break;
	}
	buf_puts(em->out, "\n");
}

static int count_shared(Stmt *s)
{
	int n = 0;
	for (; s; s = s->next)
		n += (s->kind == KS_ALLOC && s->mem == MEM_SHARED) + count_shared(s->body) +
		     count_shared(s->then) + count_shared(s->els);
	return n;
}

/* Several shared buffers (which may share bytes) or a dynamic one live in one pool,
 * `fus_smem`; a single static buffer is a plain array. */
static bool smem_pooled(Kernel *k)
{
	return k->smem_dynamic || count_shared(k->body) > 1;
}

static void emit_alloc(Em *em, Stmt *s)
{
	Tensor *t = s->tensor;
	int *vb = map_lookup(&em->vec_bytes, t);
	int align = vb ? *vb : 0;

	line_start(em);
	if (s->mem == MEM_SHARED && smem_pooled(em->k)) {
		buf_printf(em->out, "%s *", dtype_ctype(t->dtype));
		cuda_name(em->out, t->name);
		buf_printf(em->out, " = reinterpret_cast<%s *>(fus_smem + %lld); // ",
			   dtype_ctype(t->dtype), (long long)s->smem_offset);
		put_expr(em->out, s->size, DT_I64, true);
		buf_puts(em->out, " elements\n");
		return;
	}
	if (s->mem == MEM_SHARED)
		buf_puts(em->out, "__shared__ __align__(16) ");
	else if (s->mem != MEM_LOCAL)
		die("%s: only local and shared buffers are allocated in kernels", t->name);
	else if (align > dtype_size(t->dtype))
		buf_printf(em->out, "__align__(%d) ", align);
	buf_printf(em->out, "%s ", dtype_ctype(t->dtype));
	cuda_name(em->out, t->name);
	buf_puts(em->out, "[");
	put_expr(em->out, s->size, DT_I64, true);
	buf_puts(em->out, "];\n");
}

static void emit_store(Em *em, Stmt *s)
{
	if (!s->offset)
		die("%s: store reached the backend before indexing", s->tensor->name);
	line_start(em);
	cuda_name(em->out, s->tensor->name);
	buf_puts(em->out, "[");
	put_expr(em->out, s->offset, DT_I64, true);
	buf_puts(em->out, "] = ");
	DType want = s->tensor->dtype;
	put_expr(em->out, s->value, want, widening(s->value->dtype, want));
	buf_puts(em->out, ";\n");
}

/* *reinterpret_cast<__fus_vec<T, N> *>(&dst[o]) = *reinterpret_cast<const ...>(&src[so]); */
static void emit_vstore(Em *em, Stmt *s)
{
	Tensor *d = s->tensor, *src = s->src;

	if (d->dtype != src->dtype)
		die("vector copy %s <- %s changes dtype", d->name, src->name);
	line_start(em);
	buf_printf(em->out, "*reinterpret_cast<__fus_vec<%s, %d> *>(&", dtype_ctype(d->dtype),
		   s->vec);
	cuda_name(em->out, d->name);
	buf_puts(em->out, "[");
	put_expr(em->out, s->offset, DT_I64, true);
	buf_printf(em->out, "]) = *reinterpret_cast<const __fus_vec<%s, %d> *>(&",
		   dtype_ctype(d->dtype), s->vec);
	cuda_name(em->out, src->name);
	buf_puts(em->out, "[");
	put_expr(em->out, s->src_offset, DT_I64, true);
	buf_puts(em->out, "]);\n");
}

static bool is_local(Kernel *k, Var *v)
{
	for (int i = 0; i < k->locals.len; i++)
		if (VEC_AT(k->locals, Var, i) == v)
			return true;
	return false;
}

/* A let of a kernel-scope local assigns it; any other let declares its variable. */
static void emit_let(Em *em, Stmt *s)
{
	line_start(em);
	if (!is_local(em->k, s->var))
		buf_printf(em->out, "%s ", dtype_ctype(s->var->dtype));
	cuda_name(em->out, s->var->name);
	buf_puts(em->out, " = ");
	put_expr(em->out, s->value, s->var->dtype, widening(s->value->dtype, s->var->dtype));
	buf_puts(em->out, ";\n");
}

/* acc = __fus_reduce_warps<__fus_red_sum, 128, float>(acc); (bool travels as int: shuffles
 * have no bool overload) */
/* __fus_welford_warps<128, float>(s1_n, s1_mean, s1_m2); */
static void emit_block_welford(Em *em, Stmt *s, BlockReduceShape *sh)
{
	const char *ct = dtype_ctype(s->var->dtype);
	line_start(em);
	switch (sh->kind) {
	case BR_WARP:
		buf_printf(em->out, "__fus_welford_warp<%lld, %lld, %s>(", (long long)sh->count,
			   (long long)sh->nthreads, ct);
		break;
	case BR_WARPS:
		buf_printf(em->out, "__fus_welford_warps<%lld, %s>(", (long long)sh->count, ct);
		break;
	case BR_SMEM:
		buf_printf(em->out, "__fus_welford_smem<%lld, %lld, %lld, %s>(", (long long)sh->count,
			   (long long)sh->stride, (long long)sh->nthreads, ct);
		break;
	}
	cuda_name(em->out, s->var->name);
	buf_puts(em->out, ", ");
	cuda_name(em->out, s->wmean->name);
	buf_puts(em->out, ", ");
	cuda_name(em->out, s->wm2->name);
	buf_puts(em->out, ");\n");
}

static void emit_block_reduce(Em *em, Stmt *s)
{
	BlockReduceShape sh;
	if (!kir_block_reduce_shape(em->k, s->pars, &sh))
		die("block reduction without a layout reached the backend");
	if (s->red == RED_WELFORD) {
		emit_block_welford(em, s, &sh);
		return;
	}
	const char *op = red_name(s->red);
	bool is_bool = s->var->dtype == DT_BOOL;
	const char *ct = is_bool ? "int" : dtype_ctype(s->var->dtype);
	line_start(em);
	cuda_name(em->out, s->var->name);
	buf_printf(em->out, " = %s", is_bool ? "(bool)" : "");
	switch (sh.kind) {
	case BR_WARP:
		buf_printf(em->out, "__fus_reduce_warp<__fus_red_%s, %lld, %lld, %s>(", op,
			   (long long)sh.count, (long long)sh.nthreads, ct);
		break;
	case BR_WARPS:
		buf_printf(em->out, "__fus_reduce_warps<__fus_red_%s, %lld, %s>(", op,
			   (long long)sh.count, ct);
		break;
	case BR_SMEM:
		buf_printf(em->out, "__fus_reduce_smem<__fus_red_%s, %lld, %lld, %lld, %s>(", op,
			   (long long)sh.count, (long long)sh.stride, (long long)sh.nthreads, ct);
		break;
	}
	buf_puts(em->out, is_bool ? "(int)" : "");
	cuda_name(em->out, s->var->name);
	buf_puts(em->out, ");\n");
}

/* if (__fus_grid_reduce<__fus_red_sum>(acc, fus_ws_s, fus_sem_s, o, r, R)) { store } */
static void emit_grid_reduce(Em *em, Stmt *s)
{
	const char *op = red_name(s->red);
	line_start(em);
	buf_printf(em->out, "if (__fus_grid_reduce<__fus_red_%s>(", op);
	cuda_name(em->out, s->var->name);
	buf_printf(em->out, ", %s, %s, ", s->ws->name, s->sem->name);
	put_expr(em->out, s->offset, DT_I64, true);
	buf_puts(em->out, ", ");
	put_expr(em->out, s->part, DT_I64, true);
	buf_puts(em->out, ", ");
	put_expr(em->out, s->nparts, DT_I64, true);
	buf_puts(em->out, "))");
	emit_block(em, s->body);
	buf_puts(em->out, "\n");
}

static void emit_comment(Em *em, Stmt *s)
{
	const char *p = s->text ? s->text : "";

	/* one // line per line of text */
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		line_start(em);
		buf_printf(em->out, "// %.*s\n", (int)n, p);
		p += n + (nl != NULL);
	}
}

/* The 32-bit shared address of &t[off]. */
static void put_smem_addr(Em *em, Tensor *t, IrExpr *off)
{
	buf_puts(em->out, "(unsigned)__cvta_generic_to_shared(&");
	cuda_name(em->out, t->name);
	buf_puts(em->out, "[");
	put_expr(em->out, off, DT_I64, true);
	buf_puts(em->out, "])");
}

/* asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem), "l"(gmem),
 * "r"(src_size) : "memory"); the src-size operand zero-fills lanes not read from global. */
static void emit_cp_async(Em *em, Stmt *s)
{
	Tensor *t = s->tensor;
	int esize = dtype_size(t->dtype), bytes = s->vec * esize;
	bool src_size = s->cond || s->size;

	line_start(em);
	buf_printf(em->out, "asm volatile(\"cp.async.%s.shared.global [%%0], [%%1], %d%s;\\n\" :: \"r\"(",
		   t->cp_async_cg ? "cg" : "ca", bytes, src_size ? ", %2" : "");
	put_smem_addr(em, t, s->offset);
	buf_puts(em->out, "), \"l\"(&");
	cuda_name(em->out, s->src->name);
	buf_puts(em->out, "[");
	put_expr(em->out, s->src_offset, DT_I64, true);
	buf_puts(em->out, "])");
	if (src_size) {
		buf_puts(em->out, ", \"r\"(");
		if (s->cond) {
			Val c = val_conv(s->cond, DT_BOOL, true);
			val_paren(&c, P_OR);
			val_put(em->out, &c);
			buf_puts(em->out, " ? ");
		}
		if (s->size) {
			Val n = val_conv(s->size, DT_I64, true);
			val_paren(&n, P_MUL);
			buf_puts(em->out, "(unsigned)(");
			val_put(em->out, &n);
			buf_printf(em->out, " * %d)", esize);
		} else {
			buf_printf(em->out, "%du", bytes);
		}
		if (s->cond)
			buf_puts(em->out, " : 0u");
		buf_puts(em->out, ")");
	}
	buf_puts(em->out, " : \"memory\");\n");
}

static void emit_cp_wait(Em *em, Stmt *s)
{
	line_start(em);
	if (s->wait_n < 0)
		buf_puts(em->out, "asm volatile(\"cp.async.wait_all;\\n\" ::: \"memory\");\n");
	else
		buf_printf(em->out, "asm volatile(\"cp.async.wait_group %d;\\n\" ::: \"memory\");\n",
			   s->wait_n);
}

static void emit_stmts(Em *em, Stmt *s)
{
	for (; s; s = s->next) {
		switch (s->kind) {
		case KS_FOR: emit_for(em, s); break;
		case KS_IF: emit_if(em, s); break;
		case KS_ALLOC: emit_alloc(em, s); break;
		case KS_STORE: emit_store(em, s); break;
		case KS_VSTORE: emit_vstore(em, s); break;
		case KS_LET: emit_let(em, s); break;
		case KS_COMMENT: emit_comment(em, s); break;
		case KS_SYNC: line_start(em); buf_puts(em->out, "__syncthreads();\n"); break;
		case KS_BLOCK_REDUCE: emit_block_reduce(em, s); break;
		case KS_GRID_REDUCE: emit_grid_reduce(em, s); break;
		case KS_CP_ASYNC: emit_cp_async(em, s); break;
		case KS_CP_COMMIT:
			line_start(em);
			buf_puts(em->out, "asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n");
			break;
		case KS_CP_WAIT: emit_cp_wait(em, s); break;
		default: die("statement kind %d cannot reach the CUDA backend", (int)s->kind);
		}
	}
}

/* Threads per block when every thread dimension is a constant; 0 otherwise. */
static int64_t block_threads(Kernel *k)
{
	int64_t n = 1, c;

	for (ParType p = PT_TIDX; p <= PT_TIDZ; p++) {
		if (!k->launch[p])
			continue;
		if (!ir_is_const(k->launch[p], &c))
			return 0;
		n *= c;
	}
	return n;
}

static void emit_kernel_params(Fusion *f, Buf *out)
{
	bool first = true;

	for (int i = 0; i < f->nsig; i++) {
		struct SigEntry *e = &f->sig[i];
		buf_puts(out, first ? "" : ", ");
		first = false;
		if (e->kind == 'p') {
			buf_printf(out, "%s ", dtype_ctype(e->param->dtype));
			cuda_name(out, e->param->name);
			continue;
		}
		buf_printf(out, "%s%s *__restrict__ ", e->kind == 't' ? "const " : "",
			   dtype_ctype(e->tensor->dtype));
		cuda_name(out, e->tensor->name);
	}
	for (int i = 0; i < f->nsizes; i++) {
		buf_puts(out, first ? "long long " : ", long long ");
		first = false;
		cuda_name(out, f->sizes[i]->name);
	}
}

/* The workspace's C type: ws in its dtype, sem as unsigned counters (DT_I32 in the IR). */
static const char *ws_ctype(Kernel *k, int i)
{
	return i % 2 ? "unsigned" : dtype_ctype(VEC_AT(k->grid_ws, Tensor, i)->dtype);
}

/* `, float *fus_ws_s, unsigned *fus_sem_s` after the sizes (names with the reserved fus_
 * prefix: no .fus name prints as one). */
static void emit_ws_params(Kernel *k, Buf *out)
{
	Fusion *f = k->fusion;
	for (int i = 0; i < k->grid_ws.len; i++)
		buf_printf(out, "%s%s *%s", i || f->nsig || f->nsizes ? ", " : "", ws_ctype(k, i),
			   VEC_AT(k->grid_ws, Tensor, i)->name);
}

static void emit_kernel(Kernel *k, Buf *out)
{
	int64_t threads = block_threads(k);
	Em em = {k, out, 1, {0}};

	buf_puts(out, "\nextern \"C\" __global__ void ");
	if (threads > 0)
		buf_printf(out, "__launch_bounds__(%lld) ", (long long)threads);
	buf_printf(out, "%s(", k->name);
	emit_kernel_params(k->fusion, out);
	emit_ws_params(k, out);
	buf_puts(out, ")\n{\n");
	if (k->smem_dynamic)
		buf_printf(out, "  extern __shared__ __align__(16) unsigned char fus_smem[]; // %lld "
				"bytes, dynamic\n", (long long)k->smem_bytes);
	else if (smem_pooled(k))
		buf_printf(out, "  __shared__ __align__(16) unsigned char fus_smem[%lld];\n",
			   (long long)k->smem_bytes);
	for (int i = 0; i < k->locals.len; i++) {
		Var *v = VEC_AT(k->locals, Var, i);
		buf_printf(out, "  %s ", dtype_ctype(v->dtype));
		cuda_name(out, v->name);
		buf_puts(out, ";\n");
	}
	vector_bytes(&em, k->body);
	emit_stmts(&em, k->body);
	buf_puts(out, "}\n");
}

void cuda_emit_device(Kernel **ks, int nk, Buf *out)
{
	buf_puts(out, preamble);
	bool grid = false;
	for (int i = 0; i < nk; i++)
		grid |= has_grid_reduce(ks[i]);
	for (int i = 0; i < nk; i++) {
		if (grid || has_block_reduce(ks[i]->body)) {
			buf_puts(out, reduce_preamble);
			break;
		}
	}
	if (grid)
		buf_puts(out, grid_preamble);
	for (int i = 0; i < nk; i++) {
		if (has_welford(ks[i]->body) || (ks[i]->fallback && has_welford(ks[i]->fallback->body))) {
			buf_puts(out, welford_preamble);
			break;
		}
	}
	for (int i = 0; i < nk; i++) {
		emit_kernel(ks[i], out);
		if (ks[i]->fallback)
			emit_kernel(ks[i]->fallback, out);
	}
}

/* ---- host part ------------------------------------------------------------------------ */

/* The C99 spelling of a dtype in launcher signatures (f16/bf16 travel as their bits). */
static const char *host_type(DType t)
{
	switch (t) {
	case DT_F16: case DT_BF16: return "uint16_t";
	case DT_I32: return "int32_t";
	case DT_I64: return "int64_t";
	default: return dtype_ctype(t);
	}
}

void cuda_launcher_signature(Fusion *f, Buf *out)
{
	buf_puts(out, "cudaError_t ");
	cuda_name(out, f->name);
	buf_puts(out, "(");
	for (int i = 0; i < f->nsig; i++) {
		struct SigEntry *e = &f->sig[i];
		if (e->kind == 'p') {
			buf_printf(out, "%s ", host_type(e->param->dtype));
			cuda_name(out, e->param->name);
		} else {
			buf_printf(out, "%s%s *", e->kind == 't' ? "const " : "",
				   host_type(e->tensor->dtype));
			cuda_name(out, e->tensor->name);
		}
		buf_puts(out, ", ");
	}
	for (int i = 0; i < f->nsizes; i++) {
		buf_puts(out, "int64_t ");
		cuda_name(out, f->sizes[i]->name);
		buf_puts(out, ", ");
	}
	buf_puts(out, "cudaStream_t stream)");
}

/* Appends s to a C string literal's body that is also a printf format printing exactly s. */
static void put_format_text(Buf *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			buf_printf(out, "\\%c", c);
		else if (c == '%')
			buf_puts(out, "%%");
		else if (c < 0x20 || c >= 0x7f)
			buf_printf(out, "\\%03o", c);
		else
			buf_printf(out, "%c", c);
	}
}

/* ` (vectorized access, saxpy.fus:4:3)` */
static const char *precond_why(Arena *a, Precond *p)
{
	const char *reason = p->reason ? p->reason : "vectorized access";
	if (p->where)
		return arena_printf(a, " (%s, %s)", reason, p->where);
	return arena_printf(a, " (%s)", reason);
}

/* A refusal: `  if (COND)\n    return fus_fail(ERR, "PRE" SPEC "POST", ARG);` where PRE and
 * POST are plain text, SPEC a printf conversion for ARG (both may be empty). */
typedef struct Fail {
	const char *cond, *pre, *spec, *post, *arg;
} Fail;

static void emit_fail(Buf *out, Fusion *f, Fail m)
{
	buf_printf(out, "  if (%s)\n    return fus_fail(", m.cond);
	cuda_name(out, f->name);
	buf_puts(out, "_error_text, \"");
	put_format_text(out, m.pre);
	buf_puts(out, m.spec ? m.spec : "");
	put_format_text(out, m.post ? m.post : "");
	buf_puts(out, "\"");
	if (m.arg)
		buf_printf(out, ", %s", m.arg);
	buf_puts(out, ");\n");
}

/* ---- launch sizes in checked arithmetic ---------------------------------------------- */

/* The host helpers for size arithmetic, each emitted only into files whose launchers use it
 * (an unused static function is a warning in the user's build). The checked ones take
 * `&fus_ovf` and set it when the result does not fit in a long long. */
#define SIZE_HELPERS(X)                                                                     \
	X(ADD, "fus_add", true,                                                             \
	  "  if ((b > 0 && a > LLONG_MAX - b) || (b < 0 && a < LLONG_MIN - b))\n"           \
	  "    return *ovf = true, 0;\n  return a + b;\n")                                  \
	X(SUB, "fus_sub", true,                                                             \
	  "  if ((b < 0 && a > LLONG_MAX + b) || (b > 0 && a < LLONG_MIN + b))\n"           \
	  "    return *ovf = true, 0;\n  return a - b;\n")                                  \
	X(MUL, "fus_mul", true,                                                             \
	  "  if (a > 0 ? (b > 0 ? a > LLONG_MAX / b : b < LLONG_MIN / a)\n"                 \
	  "            : (b > 0 ? a < LLONG_MIN / b : a != 0 && b < LLONG_MAX / a))\n"      \
	  "    return *ovf = true, 0;\n  return a * b;\n")                                  \
	X(DIV, "fus_div", true,                                                             \
	  "  if (b == 0 || (a == LLONG_MIN && b == -1))\n"                                  \
	  "    return *ovf = true, 0;\n  return a / b;\n")                                  \
	X(MOD, "fus_mod", true,                                                             \
	  "  if (b == 0 || (a == LLONG_MIN && b == -1))\n"                                  \
	  "    return *ovf = true, 0;\n  return a % b;\n")                                  \
	X(CEILDIV, "fus_cdiv", true,                                                        \
	  "  if (b <= 0)\n    return *ovf = true, 0;\n  return a / b + (a % b > 0);\n")     \
	X(NEG, "fus_neg", true, "  if (a == LLONG_MIN)\n    return *ovf = true, 0;\n  return -a;\n") \
	X(MAX, "fus_max", false, "  return a > b ? a : b;\n")                               \
	X(MIN, "fus_min", false, "  return a < b ? a : b;\n")

static const struct {
	IrOp op;
	const char *name, *body;
	bool checked;
} size_helpers[] = {
#define X(op, name, checked, body) {OP_##op, name, body, checked},
	SIZE_HELPERS(X)
#undef X
};

/* Bits of size_helpers that use fus_ovf. */
static unsigned checked_helpers(unsigned used)
{
	unsigned m = 0;
	for (int i = 0; i < countof(size_helpers); i++)
		if (size_helpers[i].checked)
			m |= 1u << i;
	return used & m;
}

/* The helpers marked in `used`, as static functions of the host part. */
static void emit_size_helpers(Buf *out, unsigned used)
{
	if (!used)
		return;
	buf_puts(out, "\n// Sizes (bytes of tensors, grid and block dimensions, workspaces) in checked\n"
		      "// 64-bit arithmetic, portable C99, like libfusrt's launch path: a result that\n"
		      "// does not fit sets *ovf (and gives 0) instead of wrapping, and the launcher\n"
		      "// refuses the sizes.\n");
	for (int i = 0; i < countof(size_helpers); i++) {
		if (!(used & (1u << i)))
			continue;
		bool unary = size_helpers[i].op == OP_NEG;
		buf_printf(out, "static long long %s(long long a%s%s)\n{\n%s}\n",
			   size_helpers[i].name, unary ? "" : ", long long b",
			   size_helpers[i].checked ? ", bool *ovf" : "", size_helpers[i].body);
	}
}

/* Appends integer expression e over the sizes (a launch dimension, a workspace or tensor
 * size) as host C in which every operation that can overflow is a call of a checked helper
 * (`fus_mul(M, N, &fus_ovf)`): a result past 64 bits sets fus_ovf instead of wrapping. The
 * helpers used are marked in *used. The operations are those of interp_eval_i64, which
 * libfusrt's launch path uses for the same sizes. */
static void put_size(Buf *out, IrExpr *e, unsigned *used)
{
	static const struct { IrOp op; const char *c; } infix[] = {
		{OP_LT, "<"}, {OP_LE, "<="}, {OP_GT, ">"}, {OP_GE, ">="}, {OP_EQ, "=="},
		{OP_NE, "!="}, {OP_AND, "&&"}, {OP_OR, "||"},
	};

	switch (e->kind) {
	case EX_INT:
		put_int(out, e->ival);
		return;
	case EX_SIZE:
		buf_puts(out, "(long long)");
		cuda_name(out, e->size->name);
		return;
	case EX_CAST:
		if (dtype_is_float(e->dtype) || dtype_is_float(e->args[0]->dtype))
			break;
		if (e->dtype == DT_I64) {
			put_size(out, e->args[0], used);
			return;
		}
		buf_printf(out, "(long long)(%s)(", dtype_ctype(e->dtype));
		put_size(out, e->args[0], used);
		buf_puts(out, ")");
		return;
	case EX_SELECT:
		buf_puts(out, "(");
		put_size(out, e->args[0], used);
		buf_puts(out, " ? ");
		put_size(out, e->args[1], used);
		buf_puts(out, " : ");
		put_size(out, e->args[2], used);
		buf_puts(out, ")");
		return;
	case EX_OP:
		if (e->op == OP_NOT) {
			buf_puts(out, "!(");
			put_size(out, e->args[0], used);
			buf_puts(out, ")");
			return;
		}
		for (int i = 0; i < countof(size_helpers); i++) {
			if (size_helpers[i].op != e->op)
				continue;
			*used |= 1u << i;
			buf_printf(out, "%s(", size_helpers[i].name);
			put_size(out, e->args[0], used);
			if (e->op != OP_NEG) {
				buf_puts(out, ", ");
				put_size(out, e->args[1], used);
			}
			buf_puts(out, size_helpers[i].checked ? ", &fus_ovf)" : ")");
			return;
		}
		for (int i = 0; i < countof(infix); i++) {
			if (infix[i].op != e->op)
				continue;
			buf_puts(out, "(");
			put_size(out, e->args[0], used);
			buf_printf(out, " %s ", infix[i].c);
			put_size(out, e->args[1], used);
			buf_puts(out, ")");
			return;
		}
		break;
	default:
		break;
	}
	die("a launch size is not integer arithmetic of the sizes (expression kind %d)",
	    (int)e->kind);
}

/* `  const long long NAME = SIZE;` and, when SIZE can overflow, its refusal. */
static void emit_checked_size(Buf *out, Fusion *f, const char *err, const char *name,
			      IrExpr *e, const char *what, unsigned *used)
{
	unsigned here = 0;

	buf_printf(out, "  const long long %s = ", name);
	put_size(out, e, &here);
	buf_puts(out, ";\n");
	*used |= here;
	if (!checked_helpers(here))
		return;
	buf_printf(out, "  if (fus_ovf)\n    return fus_fail(%s, \"%s: sizes too large: %s does "
			"not fit in 64 bits\");\n", err, f->name, what);
}

/* Every tensor argument's size in bytes, in checked arithmetic (a size past 64 bits is
 * refused, never wrapped), and a null pointer refused for a tensor that is not empty: what
 * libfusrt's check_launch refuses, in the same order (sizes, pointers, preconditions). */
static void emit_tensor_checks(Arena *a, Buf *out, Fusion *f, const char *err, unsigned *used)
{
	for (int i = 0; i < f->nsig; i++) {
		Tensor *t = f->sig[i].tensor;
		if (f->sig[i].kind == 'p')
			continue;
		Buf n = {0};
		cuda_name(&n, t->name);
		/* bytes = dims[0] * ... * dims[ndim-1] * sizeof(element) */
		IrExpr *bytes = ir_int(a, dtype_size(t->dtype));
		int64_t c = dtype_size(t->dtype), v;
		bool constant = true;
		for (int d = t->ndim - 1; d >= 0; d--) {
			bytes = ir_op(a, OP_MUL, DT_I64, t->shape[d], bytes);
			constant = constant && ir_is_const(t->shape[d], &v) && v >= 0 &&
				   !__builtin_mul_overflow(c, v, &c);
		}
		if (constant) { /* a constant shape: refused at compile time if too large */
			if (c > 0)
				emit_fail(out, f, (Fail){
					.cond = arena_printf(a, "!%s", n.s),
					.pre = arena_printf(a, "%s: %s is a null pointer", f->name,
							    t->name),
				});
			buf_free(&n);
			continue;
		}
		const char *var = arena_printf(a, "fus_bytes_%s", n.s);
		emit_checked_size(out, f, err, var, bytes,
				  arena_printf(a, "the size of %s in bytes", t->name), used);
		emit_fail(out, f, (Fail){
			.cond = arena_printf(a, "!%s && %s != 0", n.s, var),
			.pre = arena_printf(a, "%s: %s is a null pointer (", f->name, t->name),
			.spec = "%lld",
			.post = " bytes)",
			.arg = var,
		});
		buf_free(&n);
	}
}

static void emit_size_checks(Arena *a, Buf *out, Fusion *f)
{
	for (int i = 0; i < f->nsizes; i++) {
		Buf n = {0};
		cuda_name(&n, f->sizes[i]->name);
		emit_fail(out, f, (Fail){
			.cond = arena_printf(a, "%s < 0", n.s),
			.pre = arena_printf(a, "%s: size %s = ", f->name, f->sizes[i]->name),
			.spec = "%lld",
			.post = " is negative",
			.arg = arena_printf(a, "(long long)%s", n.s),
		});
		buf_free(&n);
	}
}

/* The C condition under which precondition p fails. */
static const char *precond_fails(Arena *a, Precond *p)
{
	Buf n = {0};

	cuda_name(&n, p->kind == PC_ALIGNED ? p->tensor->name : p->size->name);
	const char *c = p->kind == PC_ALIGNED
		? arena_printf(a, "(uintptr_t)%s %% %lld != 0", n.s, (long long)p->value)
		: arena_printf(a, "%s %% %lld != 0", n.s, (long long)p->value);
	buf_free(&n);
	return c;
}

static void emit_precond_checks(Arena *a, Buf *out, Kernel *k)
{
	Fusion *f = k->fusion;

	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		long long v = (long long)p->value;
		Buf n = {0};
		if (p->kind == PC_ALIGNED) {
			cuda_name(&n, p->tensor->name);
			emit_fail(out, f, (Fail){
				.cond = precond_fails(a, p),
				.pre = arena_printf(a, "%s: %s is not %lld-byte aligned%s", f->name,
						    p->tensor->name, v, precond_why(a, p)),
			});
		} else {
			cuda_name(&n, p->size->name);
			emit_fail(out, f, (Fail){
				.cond = precond_fails(a, p),
				.pre = arena_printf(a, "%s: %s = ", f->name, p->size->name),
				.spec = "%lld",
				.post = arena_printf(a, " is not a multiple of %lld%s", v,
						     precond_why(a, p)),
				.arg = arena_printf(a, "(long long)%s", n.s),
			});
		}
		buf_free(&n);
	}
}

static const char *const dim_names[] = {"x", "y", "z"};

/* A launch dimension printed as a constant: absent or a constant within [1, limit]. A
 * dimension that is not gets a variable `fus_grid_x` and launch-time checks. */
static bool dim_const(IrExpr *e, int64_t limit, int64_t *c)
{
	*c = 1;
	return !e || (ir_is_const(e, c) && *c >= 1 && *c <= limit);
}

static const int64_t grid_limits[3] = {2147483647, 65535, 65535};
static const int64_t block_limits[3] = {1024, 1024, 64};

static const int64_t *dim_limits(ParType first)
{
	return first == PT_BIDX ? grid_limits : block_limits;
}

static void emit_launch_dims(Arena *a, Buf *out, Kernel *k, const char *what, ParType first,
			     const char *err, unsigned *used)
{
	const int64_t *limits = dim_limits(first);

	for (int d = 0; d < 3; d++) {
		IrExpr *e = k->launch[first + d];
		int64_t c;
		if (dim_const(e, limits[d], &c))
			continue;
		const char *v = arena_printf(a, "fus_%s_%s", what, dim_names[d]);
		emit_checked_size(out, k->fusion, err, v, e,
				  arena_printf(a, "%s dimension %s", what, dim_names[d]), used);
		emit_fail(out, k->fusion, (Fail){
			.cond = arena_printf(a, "%s > %lld", v, (long long)limits[d]),
			.pre = arena_printf(a, "%s: %s dimension %s = ", k->fusion->name, what,
					    dim_names[d]),
			.spec = "%lld",
			.post = arena_printf(a, " exceeds the CUDA limit %lld", (long long)limits[d]),
			.arg = v,
		});
	}
}

/* `dim3((unsigned)fus_grid_x, 1, 1)` */
static void put_dim3(Buf *out, Kernel *k, const char *what, ParType first)
{
	int64_t c;

	buf_puts(out, "dim3(");
	for (int d = 0; d < 3; d++) {
		buf_puts(out, d ? ", " : "");
		if (dim_const(k->launch[first + d], dim_limits(first)[d], &c))
			buf_printf(out, "%lld", (long long)c);
		else
			buf_printf(out, "(unsigned)fus_%s_%s", what, dim_names[d]);
	}
	buf_puts(out, ")");
}

/* A launch with an empty grid or block does nothing and succeeds. */
static void emit_zero_check(Buf *out, Kernel *k)
{
	bool any = false;
	int64_t c;

	for (ParType p = PT_BIDX; p <= PT_TIDZ; p++) {
		bool grid = par_is_block(p);
		int d = grid ? p - PT_BIDX : p - PT_TIDX;
		if (dim_const(k->launch[p], dim_limits(grid ? PT_BIDX : PT_TIDX)[d], &c))
			continue;
		buf_printf(out, "%sfus_%s_%s == 0", any ? " || " : "  if (", grid ? "grid" : "block",
			   dim_names[d]);
		any = true;
	}
	if (any)
		buf_puts(out, ")\n    return cudaSuccess; /* nothing to do */\n");
}

/* Block dimensions known only at launch time: their product must not pass 1024. */
static void emit_block_check(Buf *out, Kernel *k, const char *err)
{
	bool any = false;
	int64_t c;

	if (block_threads(k) > 0)
		return;
	for (int d = 0; d < 3; d++) {
		IrExpr *e = k->launch[PT_TIDX + d];
		buf_puts(out, any ? " * " : "  if (");
		any = true;
		if (dim_const(e, block_limits[d], &c))
			buf_printf(out, "%lld", (long long)c);
		else
			buf_printf(out, "fus_block_%s", dim_names[d]);
	}
	buf_printf(out, " > 1024)\n    return fus_fail(%s, \"%s: more than 1024 threads per "
			"block\");\n", err, k->fusion->name);
}

static void emit_launch_args(Buf *out, Fusion *f)
{
	for (int i = 0; i < f->nsig; i++) {
		struct SigEntry *e = &f->sig[i];
		buf_puts(out, i ? ", " : "");
		if (e->kind == 'p') {
			if (is_half(e->param->dtype))
				buf_printf(out, "%s{", dtype_ctype(e->param->dtype));
			cuda_name(out, e->param->name);
			if (is_half(e->param->dtype))
				buf_puts(out, "}");
			continue;
		}
		DType t = e->tensor->dtype;
		if (strcmp(host_type(t), dtype_ctype(t)) != 0)
			buf_printf(out, "(%s%s *)", e->kind == 't' ? "const " : "", dtype_ctype(t));
		cuda_name(out, e->tensor->name);
	}
	for (int i = 0; i < f->nsizes; i++) {
		buf_puts(out, i || f->nsig ? ", " : "");
		cuda_name(out, f->sizes[i]->name);
	}
}

/* More than 48 KiB of shared memory is dynamic: check it against the device's opt-in limit
 * (the message states dynamic, static, required and limit sizes) and raise the kernel's limit
 * once per device. */
static void emit_smem_setup(Buf *out, Kernel *k, const char *err)
{
	long long dyn = (long long)kernel_smem_dynamic(k), stat = (long long)kernel_smem_static(k);

	if (!k->smem_dynamic)
		return;
	buf_puts(out, "  int fus_dev = 0, fus_smem_limit = 0;\n"
		      "  cudaError_t fus_attr_err = cudaGetDevice(&fus_dev);\n"
		      "  if (fus_attr_err == cudaSuccess)\n"
		      "    fus_attr_err = cudaDeviceGetAttribute(&fus_smem_limit, "
		      "cudaDevAttrMaxSharedMemoryPerBlockOptin, fus_dev);\n");
	buf_printf(out, "  if (fus_attr_err != cudaSuccess)\n"
			"    return fus_fail(%s, \"%s: cannot query the shared memory limit: %%s\", "
			"cudaGetErrorString(fus_attr_err));\n", err, k->fusion->name);
	buf_printf(out, "  if (%lld > (long long)fus_smem_limit)\n"
			"    return fus_fail(%s, \"%s: needs %lld bytes of shared memory (dynamic %lld, "
			"static %lld, required %lld) but the device allows %%d per block\", "
			"fus_smem_limit);\n", dyn + stat, err, k->fusion->name, dyn + stat, dyn, stat,
		   dyn + stat);
	buf_printf(out, "  static bool fus_smem_raised[64]; // cudaFuncSetAttribute once per device\n"
			"  if (fus_dev >= 64 || !fus_smem_raised[fus_dev]) {\n"
			"    fus_attr_err = cudaFuncSetAttribute(%s, "
			"cudaFuncAttributeMaxDynamicSharedMemorySize, %lld);\n"
			"    if (fus_attr_err != cudaSuccess)\n"
			"      return fus_fail(%s, \"%s: cannot raise the dynamic shared memory to %lld "
			"bytes: %%s\", cudaGetErrorString(fus_attr_err));\n"
			"    if (fus_dev < 64)\n"
			"      fus_smem_raised[fus_dev] = true;\n"
			"  }\n", k->name, dyn, err, k->fusion->name, dyn);
}

/* Grid reductions: the workspace of this launch, in stream order (cudaMallocAsync, the
 * counters zeroed with cudaMemsetAsync), freed after the launch with cudaFreeAsync. */
static void emit_ws_alloc(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used)
{
	int n = k->grid_ws.len;
	if (!n)
		return;
	buf_puts(out, "  // grid reductions: the workspace of this launch (partials, counters)\n");
	for (int i = 0; i < n; i++) {
		Tensor *t = VEC_AT(k->grid_ws, Tensor, i);
		IrExpr *bytes = ir_op(a, OP_MUL, DT_I64, t->shape[0], ir_int(a, dtype_size(t->dtype)));
		emit_checked_size(out, k->fusion, err, arena_printf(a, "fus_ws_bytes_%d", i), bytes,
				  "the size of the grid-reduction workspace", used);
	}
	buf_printf(out, "  void *fus_ws[%d] = {NULL", n);
	for (int i = 1; i < n; i++)
		buf_puts(out, ", NULL");
	buf_printf(out, "};\n  const size_t fus_ws_bytes[%d] = {", n);
	for (int i = 0; i < n; i++)
		buf_printf(out, "%s(size_t)fus_ws_bytes_%d", i ? ", " : "", i);
	buf_printf(out, "};\n"
			"  cudaError_t fus_ws_err = cudaSuccess;\n"
			"  for (int i = 0; i < %d && fus_ws_err == cudaSuccess; i++)\n"
			"    fus_ws_err = cudaMallocAsync(&fus_ws[i], fus_ws_bytes[i] ? fus_ws_bytes[i] : 1, "
			"stream);\n"
			"  for (int i = 1; i < %d && fus_ws_err == cudaSuccess; i += 2)\n"
			"    fus_ws_err = cudaMemsetAsync(fus_ws[i], 0, fus_ws_bytes[i], stream);\n"
			"  if (fus_ws_err != cudaSuccess) {\n"
			"    for (int i = 0; i < %d; i++) // the first error is the one reported\n"
			"      if (fus_ws[i] && cudaFreeAsync(fus_ws[i], stream) != cudaSuccess)\n"
			"        break;\n"
			"    fus_fail(%s, \"%s: cannot allocate the grid-reduction workspace: %%s\", "
			"cudaGetErrorString(fus_ws_err));\n"
			"    return fus_ws_err;\n"
			"  }\n", n, n, n, err, k->fusion->name);
}

/* After the launch: the workspace goes back in stream order (the kernel finishes first). */
static void emit_ws_free(Buf *out, Kernel *k, const char *err)
{
	if (!k->grid_ws.len)
		return;
	buf_printf(out, "  for (int i = 0; i < %d; i++) {\n"
			"    cudaError_t fus_free_err = cudaFreeAsync(fus_ws[i], stream);\n"
			"    if (fus_free_err != cudaSuccess && fus_err == cudaSuccess) {\n"
			"      fus_err = fus_free_err;\n"
			"      fus_fail(%s, \"%s: cannot free the grid-reduction workspace: %%s\", "
			"cudaGetErrorString(fus_err));\n"
			"    }\n"
			"  }\n", k->grid_ws.len, err, k->fusion->name);
}

static void emit_launch(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used);
static void emit_fallback(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used);

/* The launcher of k; marks the size helpers it uses in *helpers. */
static void emit_launcher(Arena *a, Kernel *k, Buf *out, unsigned *helpers)
{
	Fusion *f = k->fusion;
	Buf err = {0};

	cuda_name(&err, f->name);
	buf_puts(&err, "_error_text");
	buf_printf(out, "\n// Why the last call of %s() failed (\"\" after a success).\n",
		   f->name);
	buf_printf(out, "static thread_local char %s[256];\n\n", err.s);
	buf_puts(out, "extern \"C\" const char *");
	cuda_name(out, f->name);
	buf_printf(out, "_last_error(void)\n{\n  return %s;\n}\n\n", err.s);
	buf_puts(out, "extern \"C\" ");
	cuda_launcher_signature(f, out);
	buf_printf(out, "\n{\n  %s[0] = '\\0';\n", err.s);
	emit_size_checks(a, out, f);
	/* the rest first, to know whether it needs fus_ovf */
	Buf body = {0};
	unsigned used = 0;
	emit_tensor_checks(a, &body, f, err.s, &used);
	if (k->fallback)
		emit_fallback(a, &body, k, err.s, &used);
	else
		emit_precond_checks(a, &body, k);
	emit_launch(a, &body, k, err.s, &used);
	if (checked_helpers(used))
		buf_puts(out, "  bool fus_ovf = false; // set by size arithmetic past 64 bits\n");
	buf_puts(out, body.s);
	*helpers |= used;
	buf_puts(out, "}\n");
	buf_free(&body);
	buf_free(&err);
}

/* Grid and block of k, checks, the launch and its error: the launcher's body after the
 * argument checks (ends with `return fus_err;`). */
static void emit_launch(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used)
{
	Fusion *f = k->fusion;

	emit_launch_dims(a, out, k, "grid", PT_BIDX, err, used);
	emit_launch_dims(a, out, k, "block", PT_TIDX, err, used);
	emit_block_check(out, k, err);
	emit_zero_check(out, k);
	emit_smem_setup(out, k, err);
	emit_ws_alloc(a, out, k, err, used);
	buf_printf(out, "  %s<<<", k->name);
	put_dim3(out, k, "grid", PT_BIDX);
	buf_puts(out, ", ");
	put_dim3(out, k, "block", PT_TIDX);
	buf_printf(out, ", %lld, stream>>>(", k->smem_dynamic ? (long long)k->smem_bytes : 0LL);
	emit_launch_args(out, f);
	for (int i = 0; i < k->grid_ws.len; i++)
		buf_printf(out, "%s(%s *)fus_ws[%d]", i || f->nsig || f->nsizes ? ", " : "",
			   ws_ctype(k, i), i);
	buf_puts(out, ");\n");
	buf_puts(out, "  cudaError_t fus_err = cudaGetLastError();\n");
	buf_printf(out, "  if (fus_err != cudaSuccess)\n"
			"    fus_fail(%s, \"%s: launch failed: %%s\", cudaGetErrorString(fus_err));\n",
		   err, f->name);
	emit_ws_free(out, k, err);
	buf_puts(out, "  return fus_err;\n");
}

/* Separator before item i of n: "", ", " or " and ". */
static const char *list_sep(int i, int n)
{
	return i == 0 ? "" : i == n - 1 ? " and " : ", ";
}

void cuda_precond_text(Kernel *k, Buf *out)
{
	Vec *v = &k->preconds;
	int groups = 0, g = 0;

	/* alignments of one value (consecutive: sorted by the vectorize pass) form one group */
	for (int i = 0; i < v->len; i++) {
		Precond *p = VEC_AT(*v, Precond, i), *q = i ? VEC_AT(*v, Precond, i - 1) : NULL;
		groups += !(p->kind == PC_ALIGNED && q && q->kind == PC_ALIGNED &&
			    q->value == p->value);
	}
	for (int i = 0; i < v->len; g++) {
		Precond *p = VEC_AT(*v, Precond, i);
		buf_puts(out, list_sep(g, groups));
		if (p->kind == PC_MULTIPLE) {
			buf_printf(out, "%s is a multiple of %lld", p->size->name, (long long)p->value);
			i++;
			continue;
		}
		int n = 1;
		while (i + n < v->len && VEC_AT(*v, Precond, i + n)->kind == PC_ALIGNED &&
		       VEC_AT(*v, Precond, i + n)->value == p->value)
			n++;
		for (int j = 0; j < n; j++)
			buf_printf(out, "%s%s", list_sep(j, n), VEC_AT(*v, Precond, i + j)->tensor->name);
		buf_printf(out, " %s %lld-byte aligned", n > 1 ? "are" : "is", (long long)p->value);
		i += n;
	}
}

/* An auto-scheduled fusion runs its scalar kernel (own grid and block) when any precondition
 * of the vectorized one fails, instead of refusing: the user did not ask for vectors. */
static void emit_fallback(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used)
{
	Buf body = {0};

	buf_puts(out, "  // vectorized when ");
	cuda_precond_text(k, out);
	buf_puts(out, "; otherwise the scalar kernel\n  if (");
	for (int i = 0; i < k->preconds.len; i++)
		buf_printf(out, "%s%s", i ? " || " : "",
			   precond_fails(a, VEC_AT(k->preconds, Precond, i)));
	buf_puts(out, ") {\n");
	emit_launch(a, &body, k->fallback, err, used);
	for (const char *s = body.s; *s; ) { /* one level deeper */
		const char *nl = strchr(s, '\n');
		buf_printf(out, "  %.*s\n", (int)(nl - s), s);
		s = nl + 1;
	}
	buf_puts(out, "  }\n");
	buf_free(&body);
}

static const char host_prelude[] =
	"\n#ifndef __CUDACC_RTC__\n"
	"// ---- host part: launchers (nvcc only; NVRTC skips it) ----\n"
	"#include <cuda_runtime.h>\n"
	"#include <limits.h>\n"
	"#include <stdarg.h>\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"\n"
	"// Records why a launch was refused; returns cudaErrorInvalidValue.\n"
	"static cudaError_t fus_fail(char *text, const char *fmt, ...)\n"
	"{\n"
	"  va_list ap;\n"
	"  va_start(ap, fmt);\n"
	"  vsnprintf(text, 256, fmt, ap);\n"
	"  va_end(ap);\n"
	"  return cudaErrorInvalidValue;\n"
	"}\n";

void cuda_emit(Kernel **ks, int nk, const char *source_name, Buf *out)
{
	Arena *a = arena_new();

	buf_printf(out, "// Generated by fusc %s from %s. Do not edit.\n", FUSC_VERSION,
		   base_name(source_name));
	buf_puts(out, "// Kernels:");
	for (int i = 0; i < nk; i++) {
		buf_printf(out, " %s", ks[i]->name);
		if (ks[i]->fallback)
			buf_printf(out, " %s", ks[i]->fallback->name);
	}
	buf_puts(out, ". Launchers: see the generated header.\n\n");
	cuda_emit_device(ks, nk, out);
	buf_puts(out, host_prelude);
	Buf launchers = {0};
	unsigned helpers = 0;
	for (int i = 0; i < nk; i++)
		emit_launcher(a, ks[i], &launchers, &helpers);
	emit_size_helpers(out, helpers);
	buf_puts(out, launchers.s ? launchers.s : "");
	buf_puts(out, "#endif // __CUDACC_RTC__\n");
	buf_free(&launchers);
	arena_free(a);
}
