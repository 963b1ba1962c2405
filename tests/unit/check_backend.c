/* check_backend.c: the CUDA emitter (expressions on hand-built kernels, whole files through the
 * real pipeline), the C header, NVRTC, the vectorize pass's output and preconditions, and the
 * arch check. NVRTC needs no GPU, so every test here runs everywhere. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

/* ---- hand-built kernels: f(s: f64, x: f32[N], h: f16[N], stream: i32) -> (y: f32[N],
 * hb: bf16[N], yh: f16[N]) ------------------------------------------------------------------ */

typedef struct Mini {
	Arena *a;
	Fusion *f;
	Kernel *k;
	Param *s, *stream;
	Tensor *x, *h, *y, *hb, *yh;
	SizeSym *n;
} Mini;

static Tensor *mini_tensor(Mini *m, const char *name, DType dt, TensorKind kind, int index)
{
	Tensor *t = NEW(m->a, Tensor);
	t->name = name;
	t->dtype = dt;
	t->kind = kind;
	t->index = index;
	t->param_index = index;
	t->ndim = 1;
	t->shape = arena_alloc(m->a, sizeof(IrExpr *));
	t->shape[0] = ir_size(m->a, m->n);
	t->sched.mem = MEM_GLOBAL;
	return t;
}

static Param *mini_param(Mini *m, const char *name, DType dt, int index)
{
	Param *p = NEW(m->a, Param);
	p->name = name;
	p->dtype = dt;
	p->index = index;
	return p;
}

static Mini mini_new(void)
{
	Mini m = {.a = arena_new()};
	Arena *a = m.a;
	Fusion *f = NEW(a, Fusion);

	f->name = "f";
	m.n = NEW(a, SizeSym);
	m.n->name = "N";
	m.s = mini_param(&m, "s", DT_F64, 0);
	m.x = mini_tensor(&m, "x", DT_F32, TK_INPUT, 1);
	m.h = mini_tensor(&m, "h", DT_F16, TK_INPUT, 2);
	m.stream = mini_param(&m, "stream", DT_I32, 3);
	m.y = mini_tensor(&m, "y", DT_F32, TK_OUTPUT, 4);
	m.hb = mini_tensor(&m, "hb", DT_BF16, TK_OUTPUT, 5);
	m.yh = mini_tensor(&m, "yh", DT_F16, TK_OUTPUT, 6);
	f->nparams = 2;
	f->params = arena_alloc(a, 2 * sizeof(Param *));
	f->params[0] = m.s;
	f->params[1] = m.stream;
	f->ninputs = 2;
	f->inputs = arena_alloc(a, 2 * sizeof(Tensor *));
	f->inputs[0] = m.x;
	f->inputs[1] = m.h;
	f->noutputs = 3;
	f->outputs = arena_alloc(a, 3 * sizeof(Tensor *));
	f->outputs[0] = m.y;
	f->outputs[1] = m.hb;
	f->outputs[2] = m.yh;
	f->ntensors = 5;
	f->tensors = arena_alloc(a, 5 * sizeof(Tensor *));
	Tensor *ts[] = {m.x, m.h, m.y, m.hb, m.yh};
	memcpy(f->tensors, ts, sizeof ts);
	f->nsizes = 1;
	f->sizes = arena_alloc(a, sizeof(SizeSym *));
	f->sizes[0] = m.n;
	f->nsig = 7;
	f->sig = arena_alloc(a, 7 * sizeof(struct SigEntry));
	f->sig[0] = (struct SigEntry){'p', m.s, NULL};
	f->sig[1] = (struct SigEntry){'t', NULL, m.x};
	f->sig[2] = (struct SigEntry){'t', NULL, m.h};
	f->sig[3] = (struct SigEntry){'p', m.stream, NULL};
	f->sig[4] = (struct SigEntry){'o', NULL, m.y};
	f->sig[5] = (struct SigEntry){'o', NULL, m.hb};
	f->sig[6] = (struct SigEntry){'o', NULL, m.yh};
	m.f = f;
	m.k = kir_new(a, f);
	return m;
}

/* t[off] = value, already indexed. */
static Stmt *mini_store(Mini *m, Tensor *t, IrExpr *off, IrExpr *value)
{
	Stmt *s = kir_store(m->k, t, NULL, 0, value);
	s->store.idx = NULL;
	s->store.offset = off;
	return s;
}

static IrExpr *ld(Mini *m, Tensor *t, int64_t off) { return ir_load(m->a, t, ir_int(m->a, off)); }
static IrExpr *f32(Mini *m, double v) { return ir_float(m->a, DT_F32, v); }
static IrExpr *bin(Mini *m, IrOp op, DType t, IrExpr *l, IrExpr *r) { return ir_op(m->a, op, t, l, r); }

/* The kernel text of m with the single statement `t[0] = value`: the statement's line. */
static char *store_line(Mini *m, Tensor *t, IrExpr *value)
{
	m->k->body = mini_store(m, t, ir_int(m->a, 0), value);
	Buf b = {0};
	cuda_emit_device(&m->k, 1, &b);
	char *p = strstr(b.s, "f_kernel(");
	ck_assert_ptr_nonnull(p);
	p = strstr(p, "\n{\n");
	ck_assert_ptr_nonnull(p);
	p += 3;
	while (*p == ' ')
		p++;
	char *line = strndup(p, strcspn(p, "\n"));
	buf_free(&b);
	return line;
}

#define ck_store(m, t, value, expected)                 \
	do {                                            \
		char *l_ = store_line(m, t, value);     \
		ck_assert_str_eq(l_, expected);         \
		free(l_);                               \
	} while (0)

START_TEST(expr_precedence)
{
	Mini m = mini_new();
	IrExpr *x0 = ld(&m, m.x, 0), *x1 = ld(&m, m.x, 1), *x2 = ld(&m, m.x, 2), *x3 = ld(&m, m.x, 3);

	ck_store(&m, m.y, bin(&m, OP_MUL, DT_F32, x0, bin(&m, OP_ADD, DT_F32, x1, x2)),
		 "y[0] = x[0] * (x[1] + x[2]);");
	ck_store(&m, m.y, bin(&m, OP_ADD, DT_F32, bin(&m, OP_MUL, DT_F32, x0, x1), x2),
		 "y[0] = x[0] * x[1] + x[2];");
	ck_store(&m, m.y,
		 bin(&m, OP_SUB, DT_F32, bin(&m, OP_SUB, DT_F32, x0, x1),
		     bin(&m, OP_SUB, DT_F32, x2, x3)),
		 "y[0] = x[0] - x[1] - (x[2] - x[3]);");
	ck_store(&m, m.y, bin(&m, OP_NEG, DT_F32, f32(&m, -1.5), NULL), "y[0] = -(-1.5f);");
	ck_store(&m, m.y, bin(&m, OP_NEG, DT_F32, bin(&m, OP_ADD, DT_F32, x0, x1), NULL),
		 "y[0] = -(x[0] + x[1]);");
	IrExpr *c1 = bin(&m, OP_LT, DT_BOOL, x0, x1), *c2 = bin(&m, OP_LT, DT_BOOL, x1, x2);
	IrExpr *c3 = bin(&m, OP_GE, DT_BOOL, x2, f32(&m, 0));
	ck_store(&m, m.y,
		 ir_select(m.a, bin(&m, OP_OR, DT_BOOL, c1, bin(&m, OP_AND, DT_BOOL, c2, c3)), x0,
			   f32(&m, 0.1)),
		 "y[0] = x[0] < x[1] || (x[1] < x[2] && x[2] >= 0.0f) ? x[0] : 0.1f;");
	arena_free(m.a);
}
END_TEST

/* Index arithmetic as the emitter prints it after text already in the buffer (a value's text
 * is written in place there and wrapped where it stands: backend/cuda_expr.c, Val): a ceildiv
 * by a constant and by an expression (whose text is written twice), a 32-bit division of a
 * block index, a cast wrapped around a parenthesized sum, an operand parenthesized last. */
START_TEST(expr_index_text)
{
	Mini m = mini_new();
	IrExpr *n = ir_size(m.a, m.n), *three = ir_int(m.a, 3), *two = ir_int(m.a, 2);
	IrExpr *sum = bin(&m, OP_ADD, DT_I64, n, three), *twice = bin(&m, OP_MUL, DT_I64, n, two);
	IrExpr *bx = ir_par(m.a, PT_BIDX);
	struct {
		IrExpr *e;
		DType want;
		int min; /* 0: cuda_put_expr */
		const char *text;
	} cases[] = {
		{bin(&m, OP_CEILDIV, DT_I64, n, ir_int(m.a, 8)), DT_I64, 0, "(N + 7) / 8"},
		{bin(&m, OP_CEILDIV, DT_I64, sum, twice), DT_I64, 0, "(N + 3 + (N * 2) - 1) / (N * 2)"},
		{bin(&m, OP_MOD, DT_I64, bx, n), DT_I64, 0,
		 "(long long)((unsigned)((long long)blockIdx.x) % (unsigned)min(N, 2147483648LL))"},
		{sum, DT_I32, 0, "(int)(N + 3)"},
		{sum, DT_I64, PREC_MUL, "(N + 3)"},
		{bin(&m, OP_MUL, DT_I64, sum, bin(&m, OP_NEG, DT_I64, twice, NULL)), DT_F32, 0,
		 "(float)((N + 3) * -(N * 2))"},
	};
	for (int i = 0; i < countof(cases); i++) {
		Buf b = {0};
		buf_puts(&b, "x = ");
		if (cases[i].min)
			cuda_put_operand(&b, cases[i].e, cases[i].want, false, cases[i].min);
		else
			cuda_put_expr(&b, cases[i].e, cases[i].want, false);
		ck_assert_str_eq(b.s + 4, cases[i].text);
		ck_assert(strncmp(b.s, "x = ", 4) == 0);
		buf_free(&b);
	}
	arena_free(m.a);
}
END_TEST

/* Reserved names get a trailing '_' (backend/cuda_expr.c searches its sorted table by
 * halves): names from both ends and the middle of the table, with upper case, digits and
 * underscores, and near misses that stay as they are. */
START_TEST(reserved_names)
{
	static const char *const reserved[] = {
		"NULL", "abs", "alignas", "blockIdx", "char8_t", "co_await", "cudaStream_t", "int64_t",
		"main", "threadIdx", "thread_local", "uintptr_t", "va_list", "xor", "xor_eq", "__x",
		"fus_t",
	};
	static const char *const plain[] = {
		"Null", "ab", "absx", "blockidx", "int64", "mo_1", "ks", "x", "xor_", "zzz", "A", "_x",
	};
	for (int r = 0; r < 2; r++) {
		int n = r ? countof(plain) : countof(reserved);
		for (int i = 0; i < n; i++) {
			const char *name = r ? plain[i] : reserved[i];
			Buf b = {0};
			cuda_name(&b, name);
			size_t len = strlen(name);
			ck_assert_msg(strncmp(b.s, name, len) == 0 && strcmp(b.s + len, r ? "" : "_") == 0,
				      "%s -> %s", name, b.s);
			buf_free(&b);
		}
	}
}
END_TEST

START_TEST(expr_dtypes)
{
	Mini m = mini_new();
	IrExpr *x0 = ld(&m, m.x, 0), *h0 = ld(&m, m.h, 0);
	IrExpr *s = NEW(m.a, IrExpr);
	s->kind = EX_PARAM;
	s->dtype = DT_F64;
	s->param = m.s;
	/* f16 reads become f32 arithmetic; stores round to the stored dtype */
	ck_store(&m, m.y, bin(&m, OP_ADD, DT_F32, h0, f32(&m, 1)),
		 "y[0] = __fus_half2float(h[0]) + 1.0f;");
	ck_store(&m, m.hb, bin(&m, OP_MUL, DT_F32, h0, x0),
		 "hb[0] = __fus_float2bfloat(__fus_half2float(h[0]) * x[0]);");
	ck_store(&m, m.yh, h0, "yh[0] = h[0];");
	ck_store(&m, m.yh, x0, "yh[0] = __fus_float2half(x[0]);");
	/* f64 arithmetic with an f32 operand: implicit next to a double; narrowing is explicit */
	ck_store(&m, m.y, bin(&m, OP_MUL, DT_F64, s, x0), "y[0] = (float)(s * x[0]);");
	ck_store(&m, m.y, ir_cast(m.a, DT_F32, s), "y[0] = (float)s;");
	ck_store(&m, m.y, bin(&m, OP_SIGMOID, DT_F64, s, NULL), "y[0] = (float)__fus_sigmoid(s);");
	ck_store(&m, m.y, bin(&m, OP_EXP, DT_F32, x0, NULL), "y[0] = expf(x[0]);");
	/* helpers take exactly typed arguments */
	ck_store(&m, m.y, bin(&m, OP_MAX, DT_F32, x0, ir_int(m.a, 0)), "y[0] = __fus_max(x[0], 0.0f);");
	ck_store(&m, m.y, bin(&m, OP_MOD, DT_F32, x0, f32(&m, 2)), "y[0] = fmodf(x[0], 2.0f);");
	ck_store(&m, m.y, bin(&m, OP_ABS, DT_F32, h0, NULL), "y[0] = fabsf(__fus_half2float(h[0]));");
	/* literals: shortest exact text, big integers, infinities */
	ck_store(&m, m.y, f32(&m, 1e20), "y[0] = 1e+20f;");
	ck_store(&m, m.y, f32(&m, 0.7071067811865476), "y[0] = 0.70710677f;");
	ck_store(&m, m.y, f32(&m, 1.0 / 0.0), "y[0] = __int_as_float(0x7f800000);");
	ck_store(&m, m.y, bin(&m, OP_ADD, DT_I64, ir_int(m.a, 4294967296LL), ir_size(m.a, m.n)),
		 "y[0] = (float)(4294967296LL + N);");
	ck_store(&m, m.y, ix_ceildiv(m.a, NULL, ir_size(m.a, m.n), ir_int(m.a, 4)), "y[0] = (float)((N + 3) / 4);");
	ck_store(&m, m.y, ir_par(m.a, PT_TIDY), "y[0] = (float)((long long)threadIdx.y);");
	arena_free(m.a);
}
END_TEST

/* Loops, ifs, local arrays, vector copies and the kernel signature. */
START_TEST(kernel_statements)
{
	Mini m = mini_new();
	Arena *a = m.a;
	Var *v = kir_new_var(m.k, "iv", DT_I64);
	v->extent = ir_int(a, 4);
	Tensor *loc = NEW(a, Tensor);
	loc->name = "t_vec";
	loc->dtype = DT_F32;
	loc->sched.mem = MEM_LOCAL;
	Stmt *vs = NEW(a, Stmt);
	vs->kind = KS_VSTORE;
	vs->copy.tensor = loc;
	vs->copy.offset = ir_int(a, 0);
	vs->copy.src = m.x;
	vs->copy.src_offset = ir_op(a, OP_MUL, DT_I64, ir_par(a, PT_TIDX), ir_int(a, 4));
	vs->copy.vec = 4;
	Stmt *st = mini_store(&m, m.y, ir_var(a, v), ir_load(a, loc, ir_var(a, v)));
	Stmt *loop = kir_for(m.k, v, kir_if(m.k, ir_op(a, OP_LT, DT_BOOL, ir_var(a, v),
							 ir_size(a, m.n)), st, NULL));
	loop->loop.unroll = true;
	m.k->body = kir_append(kir_alloc(m.k, loc, MEM_LOCAL, ir_int(a, 4)), kir_append(vs, loop));
	m.k->launch[PT_TIDX] = ir_int(a, 128);
	m.k->launch[PT_TIDY] = ir_int(a, 2);
	Buf b = {0};
	cuda_emit_device(&m.k, 1, &b);
	ck_assert_contains(b.s, "extern \"C\" __global__ void __launch_bounds__(256) f_kernel("
				"double s, const float *__restrict__ x, const __fus_half *__restrict__ h, "
				"int stream_, float *__restrict__ y, __fus_bfloat *__restrict__ hb, "
				"__fus_half *__restrict__ yh, long long N)\n{\n"
				"  __align__(16) float t_vec[4];\n"
				"  *reinterpret_cast<__fus_vec<float, 4> *>(&t_vec[0]) = "
				"*reinterpret_cast<const __fus_vec<float, 4> *>(&x[((long long)threadIdx.x) * 4]);\n"
				"  #pragma unroll\n"
				"  for (long long iv = 0; iv < 4; ++iv) {\n"
				"    if (iv < N) {\n"
				"      y[iv] = t_vec[iv];\n"
				"    }\n"
				"  }\n"
				"}\n");
	ck_assert_not_contains(b.s, "#include");
	buf_free(&b);
	arena_free(m.a);
}
END_TEST

/* The launcher and header of the hand-built fusion: host types, casts, checks. */
START_TEST(launcher_and_header)
{
	Mini m = mini_new();
	Arena *a = m.a;
	m.k->body = NULL;
	m.k->launch[PT_BIDX] = ix_ceildiv(a, NULL, ir_size(a, m.n), ir_int(a, 128));
	m.k->launch[PT_TIDX] = ir_int(a, 128);
	Precond *p = NEW(a, Precond);
	p->kind = PC_ALIGNED;
	p->tensor = m.h;
	p->value = 16;
	p->where = "t.fus:3:5";
	vec_push(a, &m.k->preconds, p);
	p = NEW(a, Precond);
	p->kind = PC_MULTIPLE;
	p->size = m.n;
	p->value = 8;
	vec_push(a, &m.k->preconds, p);
	Buf b = {0};
	cuda_emit(&m.k, 1, "dir/t.fus", &b);
	ck_assert_contains(b.s, "// Generated by fusc " FUSC_VERSION " from t.fus. Do not edit.\n");
	ck_assert_contains(b.s, "\n#ifndef __CUDACC_RTC__\n");
	ck_assert_contains(b.s, "extern \"C\" cudaError_t f(double s, const float *x, "
				"const uint16_t *h, int32_t stream_, float *y, uint16_t *hb, "
				"uint16_t *yh, int64_t N, cudaStream_t stream)\n{\n");
	ck_assert_contains(b.s, "  if ((uintptr_t)h % 16 != 0)\n    return fus_fail(f_error_text, "
				"\"f: h is not 16-byte aligned (vectorized access, t.fus:3:5)\");\n");
	ck_assert_contains(b.s, "  if (N % 8 != 0)\n    return fus_fail(f_error_text, \"f: N = "
				"%lld is not a multiple of 8 (vectorized access)\", (long long)N);\n");
	/* sizes in checked arithmetic, null pointers of non-empty tensors refused, before the
	 * preconditions (issue 11 item 16) */
	ck_assert_contains(b.s, "  bool fus_ovf = false;");
	ck_assert_contains(b.s, "  const long long fus_bytes_h = fus_mul((long long)N, 2, &fus_ovf);\n"
				"  if (fus_ovf)\n    return fus_fail(f_error_text, \"f: sizes too large: "
				"the size of h in bytes does not fit in 64 bits\");\n"
				"  if (!h && fus_bytes_h != 0)\n    return fus_fail(f_error_text, \"f: h "
				"is a null pointer (%lld bytes)\", fus_bytes_h);\n");
	ck_assert(strstr(b.s, "!h && fus_bytes_h") < strstr(b.s, "(uintptr_t)h % 16"));
	ck_assert_contains(b.s, "  const long long fus_grid_x = fus_cdiv((long long)N, 128, "
				"&fus_ovf);\n  if (fus_ovf)\n    return fus_fail(f_error_text, \"f: "
				"sizes too large: grid dimension x does not fit in 64 bits\");\n");
	ck_assert_contains(b.s, "static long long fus_cdiv(long long a, long long b, bool *ovf)\n");
	ck_assert_not_contains(b.s, "fus_add"); /* only the helpers used: no unused functions */
	ck_assert_contains(b.s, "  if (fus_grid_x == 0)\n    return cudaSuccess;");
	ck_assert_contains(b.s, "  f_kernel<<<dim3((unsigned)fus_grid_x, 1, 1), dim3(128, 1, 1), 0, "
				"stream>>>(s, x, (const __fus_half *)h, stream_, y, (__fus_bfloat *)hb, "
				"(__fus_half *)yh, N);\n");
	ck_assert_contains(b.s, "extern \"C\" const char *f_last_error(void)\n");
	/* device part before the host part, no headers in it */
	char *host = strstr(b.s, "#ifndef __CUDACC_RTC__");
	*host = '\0';
	ck_assert_not_contains(b.s, "#include");
	buf_free(&b);

	header_emit(&m.k, 1, "dir/t.fus", "t", &b);
	ck_assert_contains(b.s, "/* Generated by fusc " FUSC_VERSION " from t.fus. Do not edit. */\n"
				"#ifndef FUSC_T_H\n#define FUSC_T_H\n\n#include <stdbool.h>\n"
				"#include <stdint.h>\n#include <cuda_runtime_api.h>\n\n"
				"#ifdef __cplusplus\nextern \"C\" {\n#endif\n");
	ck_assert_contains(b.s, " * fusion f(s: f64, x: f32[N], h: f16[N], stream: i32) -> "
				"(y: f32[N], hb: bf16[N], yh: f16[N])\n");
	ck_assert_contains(b.s, " * Requires: h 16-byte aligned; N a multiple of 8.\n");
	ck_assert_contains(b.s, "\ncudaError_t f(double s, const float *x, const uint16_t *h, "
				"int32_t stream_, float *y, uint16_t *hb, uint16_t *yh, int64_t N, "
				"cudaStream_t stream);\nconst char *f_last_error(void);\n");
	ck_assert_contains(b.s, "#ifdef __cplusplus\n}\n#endif\n\n#endif /* FUSC_T_H */\n");
	buf_free(&b);
	arena_free(m.a);
}
END_TEST

/* ---- whole files through the pipeline ---------------------------------------------------- */

/* Compiles src with NVRTC for sm_80 and sm_90 (cubin) and compute_80 (PTX). */
static void assert_nvrtc_ok(const char *src, const char *kernel)
{
	for (int arch = 80; arch <= 90; arch += 10) {
		char *out, *log;
		size_t len;
		bool ok = nvrtc_compile(src, "t.cu", arch, true, &out, &len, &log);
		ck_assert_msg(ok, "sm_%d: %s", arch, log ? log : "");
		ck_assert_uint_gt(len, 100);
		ck_assert_mem_eq(out, "\177ELF", 4);
		free(out);
		free(log);
	}
	char *ptx, *log;
	size_t len;
	ck_assert_msg(nvrtc_compile(src, "t.cu", 80, false, &ptx, &len, &log), "%s", log);
	ck_assert_uint_eq(len, strlen(ptx));
	ck_assert_contains(ptx, ".target sm_80");
	ck_assert_contains(ptx, kernel);
	free(ptx);
	free(log);
}

START_TEST(saxpy_cuda)
{
	TestCompile *tc = tc_compile(test_saxpy_src, true);
	ck_assert_msg(tc->kernels, "%s", tc->diags);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "extern \"C\" __global__ void __launch_bounds__(256) saxpy_kernel("
			       "float a, const float *__restrict__ x, const float *__restrict__ y, "
			       "float *__restrict__ z, long long N)\n");
	/* the vector path: whole vector in bounds */
	ck_assert_contains(cu, "  if (((long long)blockIdx.x) * 1024 + ((long long)threadIdx.x) * 4 "
			       "+ 3 < N) {\n    __align__(16) float x_vec[4];\n");
	ck_assert_contains(cu, "*reinterpret_cast<__fus_vec<float, 4> *>(&z[((long long)blockIdx.x) "
			       "* 1024 + ((long long)threadIdx.x) * 4]) = *reinterpret_cast<const "
			       "__fus_vec<float, 4> *>(&z_vec[0]);\n");
	ck_assert_contains(cu, " = a * x_vec[");
	/* the tail: lane by lane */
	ck_assert_contains(cu, "  } else {\n    #pragma unroll\n    for (long long iv = 0; iv < 4; "
			       "++iv) {\n");
	ck_assert_contains(cu, "extern \"C\" cudaError_t saxpy(float a, const float *x, const float "
			       "*y, float *z, int64_t N, cudaStream_t stream)\n");
	ck_assert_contains(cu, "  if ((uintptr_t)x % 16 != 0)\n    return fus_fail(saxpy_error_text, "
			       "\"saxpy: x is not 16-byte aligned (vectorized access, t.fus:9:3)\");\n");
	ck_assert_contains(cu, "saxpy_kernel<<<dim3((unsigned)fus_grid_x, 1, 1), dim3(256, 1, 1), 0, "
			       "stream>>>(a, x, y, z, N);\n");
	/* 1-d: the vector start is a multiple of 4 without any size condition */
	ck_assert_not_contains(cu, "N % 4");
	assert_nvrtc_ok(cu, ".entry saxpy_kernel");

	/* byte-identical on a second compilation */
	TestCompile *tc2 = tc_compile(test_saxpy_src, true);
	char *cu2 = tc_cuda(tc2);
	ck_assert_str_eq(cu, cu2);
	free(cu2);
	tc_free(tc2);
	free(cu);
	tc_free(tc);
}
END_TEST

START_TEST(saxpy_header)
{
	TestCompile *tc = tc_compile(test_saxpy_src, true);
	ck_assert_msg(tc->kernels, "%s", tc->diags);
	Buf b = {0};
	header_emit(tc->kernels, 1, "t.fus", "saxpy", &b);
	ck_assert_contains(b.s, " * fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N])\n");
	ck_assert_contains(b.s, " * Requires: x 16-byte aligned; y 16-byte aligned; z 16-byte "
				"aligned.\n");
	ck_assert_contains(b.s, "\ncudaError_t saxpy(float a, const float *x, const float *y, "
				"float *z, int64_t N, cudaStream_t stream);\n"
				"const char *saxpy_last_error(void);\n");
	buf_free(&b);
	tc_free(tc);
}
END_TEST

/* A row stride multiplies the vector's row: N must be a multiple of the vector width. */
START_TEST(vectorize_row_stride)
{
	TestCompile *tc = tc_compile(
		"fusion bias(x: f16[M, N], b: f16[N]) -> (y: f16[M, N]) {\n"
		"  y[i, j] = x[i, j] + b[j];\n"
		"}\n"
		"schedule bias {\n"
		"  y.split(j, 8) -> (jo, jv);\n"
		"  y.split(jo, 32) -> (jb, jt);\n"
		"  y.bind(i, blockIdx.y);\n"
		"  y.bind(jb, blockIdx.x);\n"
		"  y.bind(jt, threadIdx.x);\n"
		"  y.vectorize(jv);\n"
		"}\n", true);
	ck_assert_msg(tc->kernels, "%s", tc->diags);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "require aligned(x, 16);\n");
	ck_assert_contains(ir, "require aligned(b, 16);\n");
	ck_assert_contains(ir, "require aligned(y, 16);\n");
	ck_assert_contains(ir, "require N % 8 == 0;\n");
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "  if (N % 8 != 0)\n    return fus_fail(bias_error_text, \"bias: N = "
			       "%lld is not a multiple of 8 (vectorized access, t.fus:10:3)\", "
			       "(long long)N);\n");
	ck_assert_contains(cu, "__fus_float2half(__fus_half2float(x_vec[");
	assert_nvrtc_ok(cu, ".entry bias_kernel");
	free(cu);
	free(ir);
	tc_free(tc);
}
END_TEST

/* A plain copy of one dtype is one vector copy, without local arrays. */
START_TEST(vectorize_plain_copy)
{
	TestCompile *tc = tc_compile(
		"fusion cp(x: f32[N]) -> (y: f32[N]) {\n"
		"  y[i] = x[i];\n"
		"}\n"
		"schedule cp {\n"
		"  y.split(i, 4) -> (io, iv);\n"
		"  y.split(io, 128) -> (ib, it);\n"
		"  y.bind(ib, blockIdx.x);\n"
		"  y.bind(it, threadIdx.x);\n"
		"  y.vectorize(iv);\n"
		"}\n", true);
	ck_assert_msg(tc->kernels, "%s", tc->diags);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "  if (((long long)blockIdx.x) * 512 + ((long long)threadIdx.x) * 4 + 3 "
			       "< N) {\n    *reinterpret_cast<__fus_vec<float, 4> *>(&y[((long long)"
			       "blockIdx.x) * 512 + ((long long)threadIdx.x) * 4]) = *reinterpret_cast"
			       "<const __fus_vec<float, 4> *>(&x[((long long)blockIdx.x) * 512 + "
			       "((long long)threadIdx.x) * 4]);\n  } else {\n");
	ck_assert_not_contains(cu, "_vec[");
	free(cu);
	tc_free(tc);
}
END_TEST

/* A vector that does not start at a multiple of its width is an error at the directive. */
START_TEST(vectorize_misaligned)
{
	TestCompile *tc = tc_compile(
		"fusion f(x: f32[N]) -> (y: f32[N]) {\n"
		"  y[i] = x[i];\n"
		"}\n"
		"schedule f {\n"
		"  y.split(i, 6) -> (io, ii);\n"
		"  y.split(ii, 4) -> (it, iv);\n"
		"  y.bind(io, blockIdx.x);\n"
		"  y.vectorize(iv);\n"
		"}\n", true);
	ck_assert_ptr_null(tc->kernels);
	ck_assert_contains(tc->diags, "t.fus:8:3: error: cannot vectorize 'iv': y is not written as "
				      "4 contiguous elements starting at a multiple of 4");
	tc_free(tc);
}
END_TEST

/* ---- arch ------------------------------------------------------------------------------ */

START_TEST(arch_too_old)
{
	LowerOptions o = {.arch = 70, .verify = true};
	TestCompile *tc = tc_compile_opts(test_saxpy_src, &o);
	ck_assert_ptr_null(tc->kernels);
	ck_assert_contains(tc->diags, "error: the generated code needs sm_75, but the target is "
				      "sm_70");
	tc_free(tc);

	o.no_arch_check = true;
	tc = tc_compile_opts(test_saxpy_src, &o);
	ck_assert_ptr_nonnull(tc->kernels);
	ck_assert_contains(tc->diags, "warning: the generated code needs sm_75, but the target is "
				      "sm_70; emitting it anyway (--no-arch-check)");
	ck_assert_int_eq(tc->kernels[0]->min_arch, 75);
	tc_free(tc);

	o = (LowerOptions){.arch = 80, .verify = true};
	tc = tc_compile_opts(test_saxpy_src, &o);
	ck_assert_ptr_nonnull(tc->kernels);
	ck_assert_str_eq(tc->diags, "");
	tc_free(tc);
}
END_TEST

/* ---- the device preamble ---------------------------------------------------------------- */

/* The embedded preamble is backend/preamble.cuh from its first banner on (a stale build or a
 * section out of order fails here), each section starts at its banner (after the first, with
 * the blank line before it), and all of them together compile with NVRTC. */
START_TEST(preamble_embedded)
{
	FILE *f = fopen("backend/preamble.cuh", "rb");
	ck_assert_msg(f != NULL, "cannot open backend/preamble.cuh (run from the repository root)");
	static char file[1 << 16];
	size_t n = fread(file, 1, sizeof file - 1, f);
	fclose(f);
	file[n] = 0;
	const char *first = strstr(file, "// ---- fusc device preamble");
	ck_assert_ptr_nonnull(first);

	Buf all = {0};
	cuda_put_preamble(&all, (1u << PRE_COUNT) - 1);
	ck_assert_str_eq(all.s, first);
	for (int i = 0; i < PRE_COUNT; i++) {
		Buf one = {0};
		cuda_put_preamble(&one, 1u << i);
		ck_assert_msg(strncmp(one.s, i ? "\n// ---- " : "// ---- ", i ? 9 : 8) == 0,
			      "section %d does not start at its banner:\n%.80s", i, one.s);
		ck_assert_msg(!strstr(one.s + 1, "\n// ---- "), "section %d holds another banner", i);
		ck_assert_msg(one.len > 1 && one.s[one.len - 1] == '\n' && one.s[one.len - 2] != '\n',
			      "section %d does not end with exactly one newline", i);
		buf_free(&one);
	}
	buf_puts(&all, "\nextern \"C\" __global__ void k(float *x) { x[0] = __fus_max(x[0], 1.0f); }\n");
	assert_nvrtc_ok(all.s, "k");
	buf_free(&all);
}
END_TEST

/* ---- NVRTC ------------------------------------------------------------------------------ */

START_TEST(nvrtc_reports_errors)
{
	char *out, *log;
	size_t len = 7;
	bool ok = nvrtc_compile("extern \"C\" __global__ void k() { undeclared_name = 1; }\n",
				"bad.cu", 80, true, &out, &len, &log);
	ck_assert(!ok);
	ck_assert_ptr_null(out);
	ck_assert_uint_eq(len, 0);
	ck_assert_contains(log, "bad.cu(1)");
	ck_assert_contains(log, "undeclared_name");
	ck_assert_contains(log, "--gpu-architecture=sm_80");
	free(log);
}
END_TEST

Suite *backend_suite(void)
{
	Suite *s = suite_create("backend");
	TCase *tc = tcase_create("emit");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, expr_precedence);
	tcase_add_test(tc, expr_index_text);
	tcase_add_test(tc, reserved_names);
	tcase_add_test(tc, expr_dtypes);
	tcase_add_test(tc, kernel_statements);
	tcase_add_test(tc, launcher_and_header);
	tcase_add_test(tc, saxpy_cuda);
	tcase_add_test(tc, saxpy_header);
	tcase_add_test(tc, vectorize_row_stride);
	tcase_add_test(tc, vectorize_plain_copy);
	tcase_add_test(tc, vectorize_misaligned);
	tcase_add_test(tc, arch_too_old);
	tcase_add_test(tc, preamble_embedded);
	tcase_add_test(tc, nvrtc_reports_errors);
	suite_add_tcase(s, tc);
	return s;
}
