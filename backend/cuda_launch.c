/* cuda_launch.c: the host part of a .cu (nvcc only: it sits under #ifndef __CUDACC_RTC__):
 * per fusion, FUSION_last_error() and the launcher FUSION(...), which checks the sizes, the
 * pointers and the kernel's preconditions, computes grid and block in checked 64-bit
 * arithmetic, and launches the first variant whose preconditions hold (Kernel.fallback: size
 * variants, scalar kernels), or refuses with the last one's failure, worded as libfusrt
 * words it (precond_failure).
 */
#include <string.h>

#include "backend/backend.h"

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
	while (*s) {
		const char *q = s; /* a run of characters that stand for themselves */
		while (*q && *q != '"' && *q != '\\' && *q != '%' && (unsigned char)*q >= 0x20 &&
		       (unsigned char)*q < 0x7f)
			q++;
		cuda_put_n(out, s, (size_t)(q - s));
		if (!*q)
			return;
		unsigned char c = (unsigned char)*q;
		char esc[5] = {'\\', (char)c, '\0'};
		if (c == '%')
			esc[0] = '%';
		else if (c < 0x20 || c >= 0x7f)
			esc[1] = (char)('0' + (c >> 6)), esc[2] = (char)('0' + (c >> 3 & 7)),
			esc[3] = (char)('0' + (c & 7)), esc[4] = '\0';
		buf_puts(out, esc);
		s = q + 1;
	}
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
	X(MIN, "fus_min", false, "  return a < b ? a : b;\n")                               \
	/* a PC_INDEX32 count's product, saturated past 2^31 - 1 (called by name: OP_COUNT) */ \
	X(COUNT, "fus_mul31", false,                                                        \
	  "  if (a == 0 || b == 0)\n    return 0;\n"                                        \
	  "  return a < 0 || b < 0 || a > 2147483647LL / b ? 2147483648LL : a * b;\n")

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
 * helpers used are marked in *used. The operations are those of ir_eval_i64, which
 * libfusrt's launch path uses for the same sizes. */
static void put_size(Buf *out, IrExpr *e, unsigned *used)
{
	static const struct { IrOp op; const char *c; } infix[] = {
		{OP_LT, "<"}, {OP_LE, "<="}, {OP_GT, ">"}, {OP_GE, ">="}, {OP_EQ, "=="},
		{OP_NE, "!="}, {OP_AND, "&&"}, {OP_OR, "||"},
	};

	switch (e->kind) {
	case EX_INT:
		cuda_put_int(out, e->ival);
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

/* dims[0] * ... * dims[ndim-1] * sizeof(element), as an expression over the sizes */
static IrExpr *tensor_bytes(Arena *a, Tensor *t)
{
	IrExpr *bytes = ir_int(a, dtype_size(t->dtype));
	for (int d = t->ndim - 1; d >= 0; d--)
		bytes = ir_op(a, OP_MUL, DT_I64, t->shape[d], bytes);
	return bytes;
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
		IrExpr *bytes = tensor_bytes(a, t);
		int64_t c = dtype_size(t->dtype), v;
		bool constant = true;
		for (int d = t->ndim - 1; d >= 0; d--)
			constant = constant && ir_is_const(t->shape[d], &v) && v >= 0 &&
				   !__builtin_mul_overflow(c, v, &c);
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

/* A PC_INDEX32 count as host C: its OP_MUL nodes by fus_mul31, its factors by put_size. */
static void put_count(Buf *out, IrExpr *e, unsigned *used)
{
	if (!(e->kind == EX_OP && e->op == OP_MUL)) {
		put_size(out, e, used);
		return;
	}
	for (int i = 0; i < countof(size_helpers); i++)
		if (size_helpers[i].op == OP_COUNT)
			*used |= 1u << i;
	buf_puts(out, "fus_mul31(");
	put_count(out, e->args[0], used);
	buf_puts(out, ", ");
	put_count(out, e->args[1], used);
	buf_puts(out, ")");
}

/* The C condition under which precondition p holds (or, holds false, fails). */
static const char *precond_c(Arena *a, Precond *p, bool holds, unsigned *used)
{
	Buf n = {0};

	if (p->kind == PC_AT_MOST && !p->size) { /* a product, saturated past 2^31 - 1 */
		put_count(&n, p->counts[0], used);
		const char *c = arena_printf(a, "%s %s %lldLL", n.s, holds ? "<=" : ">",
					     (long long)p->value);
		buf_free(&n);
		return c;
	}
	if (p->kind == PC_INDEX32) {
		for (int i = 0; i < p->ncounts; i++) {
			buf_puts(&n, i ? holds ? " && " : " || " : "");
			put_count(&n, p->counts[i], used);
			buf_printf(&n, " %s %lldLL", holds ? "<=" : ">", (long long)p->value);
		}
		const char *c = arena_strdup(a, p->ncounts ? n.s : holds ? "true" : "false");
		buf_free(&n);
		return c;
	}
	cuda_name(&n, p->kind == PC_ALIGNED ? p->tensor->name : p->size->name);
	long long v = (long long)p->value;
	const char *eq = holds ? "==" : "!=";
	const char *c = p->kind == PC_ALIGNED ? arena_printf(a, "(uintptr_t)%s %% %lld %s 0", n.s, v, eq)
			: p->kind == PC_MULTIPLE ? arena_printf(a, "%s %% %lld %s 0", n.s, v, eq)
			: arena_printf(a, "%s %s %lld", n.s, holds ? "<=" : ">", v);
	buf_free(&n);
	return c;
}

/* The refusals of the last variant's preconditions, worded by precond_failure (as libfusrt
 * words them). */
static void emit_precond_checks(Arena *a, Buf *out, Kernel *k, unsigned *used)
{
	Fusion *f = k->fusion;

	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		PrecondText t = precond_failure(a, p);
		Buf n = {0};
		if (t.sized)
			cuda_name(&n, p->size->name);
		emit_fail(out, f, (Fail){
			.cond = precond_c(a, p, false, used),
			.pre = arena_printf(a, "%s: %s", f->name, t.pre),
			.spec = t.sized ? "%lld" : NULL,
			.post = t.post,
			.arg = t.sized ? arena_printf(a, "(long long)%s", n.s) : NULL,
		});
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

	if (cuda_block_threads(k) > 0)
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
		if (e->kind == 'p') { /* f16/bf16 bits into the preamble's struct */
			bool half = e->param->dtype == DT_F16 || e->param->dtype == DT_BF16;
			if (half)
				buf_printf(out, "%s{", dtype_ctype(e->param->dtype));
			cuda_name(out, e->param->name);
			if (half)
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

/* `void *BASE[n] = {NULL, ...};` and `const size_t BASE_bytes[n]` from BASE_bytes_0 .. n-1:
 * the buffers of a launch's workspace, allocated by the caller's loop. */
static void emit_buffer_arrays(Buf *out, const char *base, int n)
{
	buf_printf(out, "  void *%s[%d] = {NULL", base, n);
	for (int i = 1; i < n; i++)
		buf_puts(out, ", NULL");
	buf_printf(out, "};\n  const size_t %s_bytes[%d] = {", base, n);
	for (int i = 0; i < n; i++)
		buf_printf(out, "%s(size_t)%s_bytes_%d", i ? ", " : "", base, i);
	buf_puts(out, "};\n");
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
	emit_buffer_arrays(out, "fus_ws", n);
	buf_printf(out, "  cudaError_t fus_ws_err = cudaSuccess;\n"
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
static void emit_variant(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used);

/* The launcher of k; marks the size helpers it uses in *helpers. A segment's launcher
 * (internal) is static: the segmented fusion's launcher calls it. */
static void emit_launcher(Arena *a, Kernel *k, Buf *out, unsigned *helpers, bool internal)
{
	Fusion *f = k->fusion;
	Buf err = {0};
	const char *linkage = internal ? "static " : "extern \"C\" ";

	cuda_name(&err, f->name);
	buf_puts(&err, "_error_text");
	buf_printf(out, "\n// Why the last call of %s() failed (\"\" after a success).\n",
		   f->name);
	buf_printf(out, "static thread_local char %s[256];\n\n", err.s);
	buf_printf(out, "%sconst char *", linkage);
	cuda_name(out, f->name);
	buf_printf(out, "_last_error(void)\n{\n  return %s;\n}\n\n", err.s);
	buf_puts(out, linkage);
	cuda_launcher_signature(f, out);
	buf_printf(out, "\n{\n  %s[0] = '\\0';\n", err.s);
	emit_size_checks(a, out, f);
	/* the rest first, to know whether it needs fus_ovf */
	Buf body = {0};
	unsigned used = 0;
	emit_tensor_checks(a, &body, f, err.s, &used);
	for (; k->fallback; k = k->fallback)
		emit_variant(a, &body, k, err.s, &used);
	emit_precond_checks(a, &body, k, &used);
	emit_launch(a, &body, k, err.s, &used);
	if (checked_helpers(used))
		buf_puts(out, "  bool fus_ovf = false; // set by size arithmetic past 64 bits\n");
	buf_puts(out, body.s);
	*helpers |= used;
	buf_puts(out, "}\n");
	buf_free(&body);
	buf_free(&err);
}

/* A segmented plan (Kernel.segments): the workspace between the segments, allocated in
 * stream order, each segment's launcher in order with its arguments (the fusion's, or a
 * workspace buffer), the workspace freed; a segment's refusal or error is the fusion's. */
static void emit_plan(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used)
{
	Fusion *f = k->fusion;
	int n = f->seg_buffers.len;

	buf_puts(out, "  // segments, in order:");
	for (int i = 0; i < f->segments.len; i++)
		buf_printf(out, " %s", VEC_AT(f->segments, Segment, i)->fusion->name);
	buf_puts(out, "\n  cudaError_t fus_err = cudaSuccess;\n");
	if (n) {
		buf_puts(out, "  // the workspace between them\n");
		for (int i = 0; i < n; i++) {
			Tensor *t = VEC_AT(f->seg_buffers, Tensor, i);
			emit_checked_size(out, f, err, arena_printf(a, "fus_seg_bytes_%d", i),
					  tensor_bytes(a, t),
					  "the size of the segments' workspace", used);
		}
		emit_buffer_arrays(out, "fus_seg", n);
		buf_printf(out, "  for (int i = 0; i < %d && fus_err == cudaSuccess; i++)\n"
				"    fus_err = cudaMallocAsync(&fus_seg[i], fus_seg_bytes[i] ? fus_seg_bytes[i] "
				": 1, stream);\n"
				"  if (fus_err != cudaSuccess)\n"
				"    fus_fail(%s, \"%s: cannot allocate the segments' workspace: %%s\", "
				"cudaGetErrorString(fus_err));\n", n, err, f->name);
	}
	for (int s = 0; s < f->segments.len; s++) {
		Segment *sg = VEC_AT(f->segments, Segment, s);
		Fusion *g = sg->fusion;
		buf_puts(out, "  if (fus_err == cudaSuccess && (fus_err = ");
		cuda_name(out, g->name);
		buf_puts(out, "(");
		for (int i = 0; i < g->nsig; i++) {
			SegArg x = sg->args[i];
			if (x.from == 's')
				cuda_name(out, f->sig[x.index].kind == 'p' ? f->sig[x.index].param->name
									: f->sig[x.index].tensor->name);
			else
				buf_printf(out, "(%s *)fus_seg[%d]", host_type(g->sig[i].tensor->dtype),
					   x.index);
			buf_puts(out, ", ");
		}
		for (int i = 0; i < g->nsizes; i++) {
			int m = sg->multiple ? sg->multiple[i] : 0;
			if (m) /* rounded up (checked with the workspace it sizes) */
				buf_puts(out, "(");
			cuda_name(out, f->sizes[sg->sizes[i]]->name);
			if (m)
				buf_printf(out, " + %d) / %d * %d", m - 1, m, m);
			buf_puts(out, ", ");
		}
		buf_puts(out, "stream)) != cudaSuccess)\n");
		buf_printf(out, "    fus_fail(%s, \"%%s\", ", err);
		cuda_name(out, g->name);
		buf_puts(out, "_last_error());\n");
	}
	if (n)
		buf_printf(out, "  for (int i = 0; i < %d; i++) {\n"
				"    cudaError_t fus_free_err = fus_seg[i] ? cudaFreeAsync(fus_seg[i], stream) "
				": cudaSuccess;\n"
				"    if (fus_free_err != cudaSuccess && fus_err == cudaSuccess) {\n"
				"      fus_err = fus_free_err;\n"
				"      fus_fail(%s, \"%s: cannot free the segments' workspace: %%s\", "
				"cudaGetErrorString(fus_err));\n"
				"    }\n"
				"  }\n", n, err, f->name);
	buf_puts(out, "  return fus_err;\n");
}

/* Grid and block of k, checks, the launch and its error: the launcher's body after the
 * argument checks (ends with `return fus_err;`). */
static void emit_launch(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used)
{
	Fusion *f = k->fusion;

	if (k->segments.len) {
		emit_plan(a, out, k, err, used);
		return;
	}

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
			   cuda_ws_ctype(k, i), i);
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
		if (p->kind != PC_ALIGNED) {
			precond_condition(p, out);
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

/* A variant before the last (Kernel.fallback): launched, with its own grid and block, when
 * all of its preconditions hold; otherwise the launcher goes on to the next one. */
static void emit_variant(Arena *a, Buf *out, Kernel *k, const char *err, unsigned *used)
{
	Buf body = {0};

	buf_printf(out, "  // %s when ", k->name);
	cuda_precond_text(k, out);
	buf_puts(out, "\n  if (");
	for (int i = 0; i < k->preconds.len; i++)
		buf_printf(out, "%s%s", i ? " && " : "",
			   precond_c(a, VEC_AT(k->preconds, Precond, i), true, used));
	buf_puts(out, k->preconds.len ? ") {\n" : "true) {\n");
	emit_launch(a, &body, k, err, used);
	for (const char *s = body.s; *s; ) { /* one level deeper */
		const char *nl = strchr(s, '\n');
		buf_puts(out, "  ");
		cuda_put_n(out, s, (size_t)(nl - s + 1));
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

void cuda_emit_host(Kernel **ks, int nk, Buf *out)
{
	Arena *a = arena_new();
	Buf launchers = {0};
	unsigned helpers = 0;

	buf_puts(out, host_prelude);
	for (int i = 0; i < nk; i++) {
		for (Kernel *k = ks[i]; k; k = k->fallback) /* the segments' launchers first */
			for (int s = 0; s < k->segments.len; s++)
				emit_launcher(a, VEC_AT(k->segments, Kernel, s), &launchers, &helpers, true);
		emit_launcher(a, ks[i], &launchers, &helpers, false);
	}
	emit_size_helpers(out, helpers);
	buf_puts(out, launchers.s ? launchers.s : "");
	buf_puts(out, "#endif // __CUDACC_RTC__\n");
	buf_free(&launchers);
	arena_free(a);
}
