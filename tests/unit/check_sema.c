/* check_sema.c: sema (frontend/sema.c) and the fusion IR printer (ir/fusion.c). Each test
 * compiles a small .fus text and compares the exact fusion IR text, or the exact error and note
 * lines (file:line:col: message), so a changed message or position fails. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

/* Fusion IR right after sema (root domains, no schedule applied). */
#define check_sema_ir(text, want) tf_expect_ir((text), false, (want))
/* Fusion IR after the schedule (or the automatic one). */
#define check_ir(text, want) tf_expect_ir((text), true, (want))
/* The exact error and note lines, in order. */
#define check_errors(text, want) tf_expect_errors((text), (want))

START_TEST(test_saxpy_ir)
{
	check_sema_ir(
		"fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
		"  z[i] = a * x[i] + y[i];\n"
		"}\n",
		"fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N])\n"
		"  sizes: N\n"
		"  schedule: user\n"
		"  tensor x: f32[N] input global\n"
		"  tensor y: f32[N] input global\n"
		"  tensor z: f32[N] output global\n"
		"    def z[i] = a * x[i] + y[i]\n"
		"    domain:\n"
		"      i: N (root 0)\n");
}
END_TEST

START_TEST(test_softmax_ir)
{
	check_sema_ir(
		"fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  m[i] = max(j: x[i, j]);\n"
		"  e[i, j] = exp(x[i, j] - m[i]);\n"
		"  s[i] = sum(j: e[i, j]);\n"
		"  y[i, j] = e[i, j] / s[i];\n"
		"}\n",
		"fusion softmax(x: f32[M, N]) -> (y: f32[M, N])\n"
		"  sizes: M N\n"
		"  schedule: user\n"
		"  tensor x: f32[M, N] input global\n"
		"  tensor m: f32[M] intermediate local\n"
		"    def m[i] = max(j: x[i, j])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N reduction (root 1)\n"
		"  tensor e: f32[M, N] intermediate local inline\n"
		"    def e[i, j] = exp(x[i, j] - m[i])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N (root 1)\n"
		"  tensor s: f32[M] intermediate local\n"
		"    def s[i] = sum(j: e[i, j])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N reduction (root 1)\n"
		"  tensor y: f32[M, N] output global\n"
		"    def y[i, j] = e[i, j] / s[i]\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N (root 1)\n");
}
END_TEST

START_TEST(test_dtypes_ir)
{
	check_sema_ir(
		"fusion d(h: f16[N], b: bf16[N], k: i32[N], c: f64) -> (o: f16[N], p: bool[N], q: i32[N]) {\n"
		"  t[i] = h[i] * 2.0 + b[i];\n"
		"  w = c * 3;\n"
		"  o[i] = t[i] > 0 ? t[i] : w;\n"
		"  p[i] = k[i] >= 1 && !(h[i] < 0.5);\n"
		"  q[i] = k[i] + 1 + i32(f32(k[i]) * 0.5);\n"
		"}\n",
		"fusion d(h: f16[N], b: bf16[N], k: i32[N], c: f64) -> (o: f16[N], p: bool[N], q: i32[N])\n"
		"  sizes: N\n"
		"  schedule: user\n"
		"  tensor h: f16[N] input global\n"
		"  tensor b: bf16[N] input global\n"
		"  tensor k: i32[N] input global\n"
		"  tensor t: f32[N] intermediate local inline\n"
		"    def t[i] = h[i] * 2.0 + b[i]\n"
		"    domain:\n"
		"      i: N (root 0)\n"
		"  tensor w: f64 scalar local inline\n"
		"    def w = c * 3.0\n"
		"    domain:\n"
		"  tensor o: f16[N] output global\n"
		"    def o[i] = t[i] > 0.0 ? t[i] : w[]\n"
		"    domain:\n"
		"      i: N (root 0)\n"
		"  tensor p: bool[N] output global\n"
		"    def p[i] = k[i] >= 1 && !(h[i] < 0.5)\n"
		"    domain:\n"
		"      i: N (root 0)\n"
		"  tensor q: i32[N] output global\n"
		"    def q[i] = k[i] + 1 + i32(f32(k[i]) * 0.5)\n"
		"    domain:\n"
		"      i: N (root 0)\n");
}
END_TEST

START_TEST(test_sizes_ir)
{
	check_sema_ir(
		"fusion mean(x: f32[M, N], bias: f32[N]) -> (total: f32, r: f32[M, N]) {\n"
		"  total = sum(i, j: x[i, j]);\n"
		"  r[i, j] = where(x[i, j] > bias[j], x[i, j], bias[j]) + max(x[i, 0], abs(x[i, 3])) + total / f32(M * N);\n"
		"}\n",
		"fusion mean(x: f32[M, N], bias: f32[N]) -> (total: f32, r: f32[M, N])\n"
		"  sizes: M N\n"
		"  schedule: user\n"
		"  tensor x: f32[M, N] input global\n"
		"  tensor bias: f32[N] input global\n"
		"  tensor total: f32 output global\n"
		"    def total = sum(i, j: x[i, j])\n"
		"    domain:\n"
		"      i: M reduction (root 0)\n"
		"      j: N reduction (root 1)\n"
		"  tensor r: f32[M, N] output global\n"
		"    def r[i, j] = (x[i, j] > bias[j] ? x[i, j] : bias[j]) + max(x[i, 0], abs(x[i, 3])) + total[] / f32(M * N)\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N (root 1)\n");
}
END_TEST

START_TEST(test_transpose_matmul_ir)
{
	check_sema_ir(
		"fusion mm(A: f32[M, K], B: f32[K, 8]) -> (C: f32[M, 8], T: f32[8, M]) {\n"
		"  C[i, j] = sum(k: A[i, k] * B[k, j]);\n"
		"  T[j, i] = C[i, j];\n"
		"}\n",
		"fusion mm(A: f32[M, K], B: f32[K, 8]) -> (C: f32[M, 8], T: f32[8, M])\n"
		"  sizes: M K\n"
		"  schedule: user\n"
		"  tensor A: f32[M, K] input global\n"
		"  tensor B: f32[K, 8] input global\n"
		"  tensor C: f32[M, 8] output global\n"
		"    def C[i, j] = sum(k: A[i, k] * B[k, j])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: 8 (root 1)\n"
		"      k: K reduction (root 2)\n"
		"  tensor T: f32[8, M] output global\n"
		"    def T[j, i] = C[i, j]\n"
		"    domain:\n"
		"      j: 8 (root 0)\n"
		"      i: M (root 1)\n");
}
END_TEST

START_TEST(test_err_names)
{
	check_errors(
		"fusion f(x: f32[N], y: f32[M], x: f32[N], q: f33) -> (z: f32[N], exp: f32[N]) {\n"
		"  z[i] = x[i] + y[i];\n"
		"}\n",
		"t.fus:1:32: error: 'x' is already declared as a parameter\n"
		"t.fus:1:10: note: 'x' first declared here\n"
		"t.fus:1:46: error: unknown dtype 'f33' (expected f16, bf16, f32, f64, i32, i64 or bool)\n"
		"t.fus:1:66: error: 'exp' is a built-in function and cannot be used as a name\n"
		"t.fus:2:19: error: conflicting ranges for index 'i': M here (dimension 0 of 'y'), but N elsewhere\n"
		"t.fus:1:62: note: index 'i' has range N here (declared dimension 0 of 'z')\n");
}
END_TEST

START_TEST(test_err_defs)
{
	check_errors(
		"fusion f(x: f32[N]) -> (z: f32[N], w: f32[N, N]) {\n"
		"  x[i] = 1.0;\n"
		"  t[i] = u[i] + later[i];\n"
		"  later[i] = x[i];\n"
		"  z[i] = x[i];\n"
		"  z[i] = x[i] * 2.0;\n"
		"  w[i] = x[i];\n"
		"  v[i] = v[i] + 1.0;\n"
		"}\n",
		"t.fus:2:3: error: cannot assign to input 'x'\n"
		"t.fus:1:10: note: 'x' declared here\n"
		"t.fus:3:10: error: unknown tensor 'u'\n"
		"t.fus:3:17: error: 'later' is read before it is defined\n"
		"t.fus:4:3: note: 'later' is defined here\n"
		"t.fus:6:3: error: 'z' is defined twice (single assignment)\n"
		"t.fus:5:3: note: 'z' first defined here\n"
		"t.fus:7:3: error: output 'w' has 2 dimensions but is defined with 1 index\n"
		"t.fus:1:36: note: 'w' declared here\n"
		"t.fus:8:10: error: 'v' is read by its own definition\n"
		"t.fus:8:3: note: 'v' is defined here\n");
}
END_TEST

START_TEST(test_err_indices)
{
	check_errors(
		"fusion f(x: f32[N, 4]) -> (z: f32[N]) {\n"
		"  t[i] = x[k, 0];\n"
		"  r[i] = sum(i: x[i, 0]);\n"
		"  u[i, i] = x[i, 1];\n"
		"  s[j] = 2.0;\n"
		"  z[i] = x[i] + x[i, 4] + x[N, 0];\n"
		"}\n",
		"t.fus:2:12: error: unknown index 'k': it is neither on the left-hand side nor bound by an enclosing reduction\n"
		"t.fus:3:14: error: reduction index 'i' also appears on the left-hand side\n"
		"t.fus:3:5: note: 'i' is a left-hand index here\n"
		"t.fus:4:8: error: index 'i' is repeated\n"
		"t.fus:4:5: note: 'i' first bound here\n"
		"t.fus:5:5: error: cannot infer the range of index 'j': it subscripts no tensor\n"
		"t.fus:6:10: error: 'x' has 2 dimensions but is accessed with 1 subscript\n"
		"t.fus:6:22: error: subscript 4 is out of bounds for dimension 1 of 'x' (extent 4)\n"
		"t.fus:6:29: error: 'N' is a size symbol, not an index; a subscript must be an index or an integer constant\n");
}
END_TEST

/* An unknown function names the built-in or cast it is 1 or 2 edits from, when fewer than
 * half its letters changed (issue 15). */
START_TEST(test_err_unknown_function_suggestion)
{
	check_errors(
		"fusion g(x: f32[4]) -> (y: f32[4]) {\n"
		"  y[i] = sqr(x[i]) + exxp(x[i]) + f33(x[i]) + wher(x[i] > 0.0, 1.0, 2.0) + foo(x[i]) + gelu(x[i]);\n"
		"}\n",
		"t.fus:2:10: error: unknown function 'sqr'; did you mean 'sqrt'?\n"
		"t.fus:2:22: error: unknown function 'exxp'; did you mean 'exp'?\n"
		"t.fus:2:35: error: unknown function 'f33'; did you mean 'f32'?\n"
		"t.fus:2:47: error: unknown function 'wher'; did you mean 'where'?\n"
		"t.fus:2:76: error: unknown function 'foo'\n"
		"t.fus:2:88: error: unknown function 'gelu'\n");
}
END_TEST

/* A fusion's launcher is a global C function of its name: names C, C++, the C library or
 * CUDA already use are refused at the name (issue 15); similar names are not. */
START_TEST(test_err_fusion_c_names)
{
	static const char *const bad[] = {"free", "main", "int", "new", "sqrt", "sqrtf", "powl",
					  "isnan", "printf", "memcpy", "stdout", "errno", "_Exit",
					  "__f", "cudaMalloc", "while", "typeof"};
	static const char *const good[] = {"freely", "softmax", "self", "sqrtx", "f", "cuda",
					   "cudamalloc", "_x", "mainly", "fl"};
	for (int i = 0; i < countof(bad); i++)
		ck_assert_msg(sema_c_name_clash(bad[i]), "%s accepted", bad[i]);
	for (int i = 0; i < countof(good); i++)
		ck_assert_msg(!sema_c_name_clash(good[i]), "%s refused", good[i]);
	check_errors(
		"fusion free(x: f32[4]) -> (y: f32[4]) {\n"
		"  y[i] = x[i];\n"
		"}\n",
		"t.fus:1:8: error: a fusion cannot be named 'free': it is a C standard library name (<stdlib.h>)\n"
		"t.fus:1:8: note: its launcher would be the global C function 'cudaError_t free(...)'; rename the fusion (docs/cli.md lists the names a fusion cannot have)\n");
}
END_TEST

START_TEST(test_err_types)
{
	check_errors(
		"fusion g(a: f32, x: f32[4], b: bool[4]) -> (z: f32[4]) {\n"
		"  z[i] = a[i] + x;\n"
		"  q[i] = b[i] && x[i];\n"
		"  s[i] = where(x[i], 1.0, 2.0) + pow(x[i]) + foo(x[i]) + bool(x[i]) + max(x[i]);\n"
		"  c[i] = x[i] && sum(j: x[j]);\n"
		"  d[i] = -b[i] + f32(x[i], 2);\n"
		"}\n",
		"t.fus:2:10: error: 'a' is a parameter, not a tensor; it cannot be indexed\n"
		"t.fus:2:17: error: 'x' is a tensor with 1 dimension; index it as x[...]\n"
		"t.fus:3:10: error: operands of '&&' must be bool, not bool and f32\n"
		"t.fus:4:16: error: condition must be bool, not f32\n"
		"t.fus:4:34: error: 'pow' takes 2 arguments, not 1\n"
		"t.fus:4:46: error: unknown function 'foo'\n"
		"t.fus:4:58: error: there is no cast to bool; compare with 0 instead\n"
		"t.fus:4:71: error: 'max' takes 2 arguments, not 1 (a reduction is written max(j: EXPR))\n"
		"t.fus:5:10: error: operands of '&&' must be bool, not f32 and f32\n"
		"t.fus:6:10: error: '-' needs a numeric operand, not bool\n"
		"t.fus:6:18: error: the cast f32() takes 1 argument, not 2\n");
}
END_TEST

START_TEST(test_err_schedule_blocks)
{
	check_errors(
		"fusion g(x: f32[4]) -> (z: f32[4]) {\n"
		"  z[i] = x[i];\n"
		"}\n"
		"schedule nosuch { z.split(i, 2); }\n"
		"schedule g { z.split(i, 2); }\n"
		"schedule g { z.split(i, 2); }\n",
		"t.fus:4:10: error: schedule for unknown fusion 'nosuch'\n"
		"t.fus:6:10: error: fusion 'g' has two schedule blocks\n"
		"t.fus:5:10: note: first schedule block here\n");
}
END_TEST

/* `nst` statements t0, t1, ..., y, each `PREV[i] + x[i] + ...` with `terms` terms, then
 * `sched` as the schedule block (malloc'd). */
static char *chain_program(int nst, int terms, const char *sched)
{
	Buf b = {0};
	buf_puts(&b, "fusion f(x: f32[N]) -> (y: f32[N]) {\n");
	for (int k = 0; k < nst; k++) {
		if (k == nst - 1)
			buf_puts(&b, "  y[i] = ");
		else
			buf_printf(&b, "  t%d[i] = ", k);
		if (k == 0)
			buf_puts(&b, "x[i]");
		else
			buf_printf(&b, "t%d[i]", k - 1);
		for (int j = 1; j < terms; j++)
			buf_puts(&b, " + x[i]");
		buf_puts(&b, ";\n");
	}
	buf_printf(&b, "}\n%s", sched);
	return b.s;
}

/* Expressions deeper than FUS_MAX_EXPR_DEPTH are refused before any recursive walker runs
 * (issue 11 item 12): one long statement in the parser, a chain of statements recomputed in
 * their readers after scheduling. 500 terms compile, lower and emit. */
START_TEST(test_err_expression_depth)
{
	char *text = chain_program(1, 20000, "");
	TestFrontend r = tf_compile(text, true);
	ck_assert_str_eq(r.errors,
			 "t.fus:2:10: error: expression too deep: 20001 levels of operators (the limit is 1000)\n");
	tf_free(&r);
	free(text);

	text = chain_program(5, 300, "");
	r = tf_compile(text, true);
	ck_assert_str_eq(r.errors,
			 "t.fus:5:3: error: the definition of 't3' is too deep once the tensors it reads are recomputed in it: 1198 levels of operators (the limit is 1000)\n"
			 "t.fus:5:3: note: pointwise tensors are recomputed in their readers; store one (compute_at, cache_after) to break the chain\n");
	tf_free(&r);
	free(text);

	/* a stored tensor ends the chain */
	text = chain_program(5, 300, "schedule f { t2.compute_at(y, i); }\n");
	TestCompile *tc = tc_lowered(text);
	tc_free(tc);
	free(text);

	text = chain_program(1, 500, "");
	tc = tc_lowered(text);
	char *cu = tc_cuda(tc);
	ck_assert_contains(cu, "x[");
	free(cu);
	tc_free(tc);
	free(text);
}
END_TEST

/* docs/cli.md: a sema error in one fusion hides neither the sema nor the schedule errors of the
 * others (issue 11 item 7). */
START_TEST(test_err_independent_fusions)
{
	check_errors(
		"fusion a(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * nope; }\n"
		"schedule a { y.bind(q, blockIdx.x); }\n"
		"fusion b(x: f32[N]) -> (y: f32[N]) { y[i] = x[i]; }\n"
		"schedule b { y.split(i, 0); }\n"
		"fusion c(x: f32[N]) -> (y: f32[N]) { y[i] = x[k]; }\n"
		"fusion d(x: f32[N]) -> (y: f32[N]) { y[i] = x[i]; }\n"
		"schedule d { y.bind(i, threadIdx.x); }\n",
		"t.fus:1:52: error: unknown name 'nope'\n"
		"t.fus:5:47: error: unknown index 'k': it is neither on the left-hand side nor bound by an enclosing reduction\n"
		"t.fus:4:25: error: split factor must be a positive integer, not 0\n"
		"t.fus:7:14: error: threadIdx.x needs an axis of constant extent; 'i' has a symbolic extent (split it by a constant first)\n");
}
END_TEST

/* A failed directive is reported; uses of the tensor or axes it would have made are not
 * (issue 11 item 7), while independent mistakes still are. */
START_TEST(test_err_failed_directive_no_cascade)
{
	check_errors(
		"fusion f(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j]; }\n"
		"schedule f {\n"
		"  y.merge(j, i) -> m;\n"
		"  y.split(m, 4) -> (mo, mi);\n"
		"  y.bind(mi, threadIdx.x);\n"
		"  y.reorder(mo, m, i);\n"
		"  c = x.cache_after(nowhere);\n"
		"  c.compute_at(y, mo);\n"
		"  d = c.cache_after(local);\n"
		"  d.split(j, 2);\n"
		"  y.split(q, 2);\n"
		"  y.bind(qo, blockIdx.x);\n"
		"  y.bind(w, blockIdx.y);\n"
		"}\n",
		"t.fus:3:5: error: cannot merge 'j' and 'i': they are not adjacent in 'y' [i, j] (the outer axis comes first)\n"
		"t.fus:7:21: error: unknown memory 'nowhere' (expected global, shared or local)\n"
		"t.fus:11:11: error: 'y' has no axis 'q'\n"
		"t.fus:1:44: note: the axes of 'y' are [i, j]\n"
		"t.fus:13:10: error: 'y' has no axis 'w'\n"
		"t.fus:1:44: note: the axes of 'y' are [i, j]\n");
}
END_TEST

/* Reductions inside expressions are lifted into their own tensors (docs/language.md): named
 * STATEMENT_REDk (k counts the statement's lifted reductions, innermost first), defined before
 * the statement over the enclosing indices their body reads, typed by dtype_accum as an
 * intermediate (f16 data sums in f32, whatever the statement's dtype). A size symbol is an i64
 * value. */
START_TEST(test_lift_ir)
{
	check_sema_ir(
		"fusion f(x: f16[M, N]) -> (mean: f32[M], l: f64[M]) {\n"
		"  mean[i] = sum(j: x[i, j]) / N;\n"
		"  m[i] = max(j: x[i, j]);\n"
		"  l[i] = m[i] + log(sum(j: exp(x[i, j] - m[i])));\n"
		"}\n",
		"fusion f(x: f16[M, N]) -> (mean: f32[M], l: f64[M])\n"
		"  sizes: M N\n"
		"  schedule: user\n"
		"  tensor x: f16[M, N] input global\n"
		"  tensor mean_sum0: f32[M] intermediate local lifted(mean)\n"
		"    def mean_sum0[i] = sum(j: x[i, j])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N reduction (root 1)\n"
		"  tensor mean: f32[M] output global\n"
		"    def mean[i] = mean_sum0[i] / N\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"  tensor m: f32[M] intermediate local\n"
		"    def m[i] = max(j: x[i, j])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N reduction (root 1)\n"
		"  tensor l_sum0: f32[M] intermediate local lifted(l)\n"
		"    def l_sum0[i] = sum(j: exp(x[i, j] - m[i]))\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N reduction (root 1)\n"
		"  tensor l: f64[M] output global\n"
		"    def l[i] = m[i] + log(l_sum0[i])\n"
		"    domain:\n"
		"      i: M (root 0)\n");
}
END_TEST

/* Nested reductions lift innermost first (the inner one over the outer one's index too); a
 * lifted tensor's dimensions follow the left-hand side's order whatever order the body reads
 * them in, include an index used only as a value, and are none when the body reads no
 * enclosing index (a 0-d tensor). A bool sum counts in i64, an i32 product sums in i32. */
START_TEST(test_lift_nested_ir)
{
	check_sema_ir(
		"fusion g(x: f32[B, N, M], k: i32[N]) -> (y: f32[M, B], z: i64[B]) {\n"
		"  y[i, b] = sum(n: max(j: x[b, n, j]) * x[b, n, i]) + sum(n: f32(i) * x[b, n, 0]);\n"
		"  z[b] = sum(n: k[n] > 0) + sum(n, q: k[n] * k[q]) + i64(b);\n"
		"}\n",
		"fusion g(x: f32[B, N, M], k: i32[N]) -> (y: f32[M, B], z: i64[B])\n"
		"  sizes: B N M\n"
		"  schedule: user\n"
		"  tensor x: f32[B, N, M] input global\n"
		"  tensor k: i32[N] input global\n"
		"  tensor y_max0: f32[B, N] intermediate local lifted(y_sum1)\n"
		"    def y_max0[b, n] = max(j: x[b, n, j])\n"
		"    domain:\n"
		"      b: B (root 0)\n"
		"      n: N (root 1)\n"
		"      j: M reduction (root 2)\n"
		"  tensor y_sum1: f32[M, B] intermediate local lifted(y)\n"
		"    def y_sum1[i, b] = sum(n: y_max0[b, n] * x[b, n, i])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      b: B (root 1)\n"
		"      n: N reduction (root 2)\n"
		"  tensor y_sum2: f32[M, B] intermediate local lifted(y)\n"
		"    def y_sum2[i, b] = sum(n: f32(i) * x[b, n, 0])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      b: B (root 1)\n"
		"      n: N reduction (root 2)\n"
		"  tensor y: f32[M, B] output global\n"
		"    def y[i, b] = y_sum1[i, b] + y_sum2[i, b]\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      b: B (root 1)\n"
		"  tensor z_sum0: i64 intermediate local lifted(z)\n"
		"    def z_sum0 = sum(n: k[n] > 0)\n"
		"    domain:\n"
		"      n: N reduction (root 0)\n"
		"  tensor z_sum1: i32 intermediate local lifted(z)\n"
		"    def z_sum1 = sum(n, q: k[n] * k[q])\n"
		"    domain:\n"
		"      n: N reduction (root 0)\n"
		"      q: N reduction (root 1)\n"
		"  tensor z: i64[B] output global\n"
		"    def z[b] = z_sum0[] + z_sum1[] + i64(b)\n"
		"    domain:\n"
		"      b: B (root 0)\n");
}
END_TEST

/* The lifted tensor is scheduled by its name like any reduction; the automatic scheduler
 * places it like a hand-written one. */
START_TEST(test_lift_schedule)
{
	check_ir(
		"fusion h(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  y[i, j] = x[i, j] / sum(k: x[i, k]);\n"
		"}\n"
		"schedule h {\n"
		"  y.bind(i, blockIdx.x);\n"
		"  y.split(j, 32) -> (jo, tx);\n"
		"  y.bind(tx, threadIdx.x);\n"
		"  y_sum0.compute_at(y, i);\n"
		"  y_sum0.split(k, 32) -> (ko, tx);\n"
		"  y_sum0.bind(tx, threadIdx.x);\n"
		"}\n",
		"fusion h(x: f32[M, N]) -> (y: f32[M, N])\n"
		"  sizes: M N\n"
		"  schedule: user\n"
		"  tensor x: f32[M, N] input global\n"
		"  tensor y_sum0: f32[M] intermediate local lifted(y) compute_at(y, 0)\n"
		"    def y_sum0[i] = sum(k: x[i, k])\n"
		"    domain:\n"
		"      i: M = y.i (root 0)\n"
		"      ko: ceildiv(N, 32) reduction (split of k by 32, outer)\n"
		"      tx: 32 reduction threadIdx.x (split of k by 32, inner)\n"
		"  tensor y: f32[M, N] output global\n"
		"    def y[i, j] = x[i, j] / y_sum0[i]\n"
		"    domain:\n"
		"      i: M blockIdx.x (root 0)\n"
		"      jo: ceildiv(N, 32) (split of j by 32, outer)\n"
		"      tx: 32 threadIdx.x (split of j by 32, inner)\n");
}
END_TEST

/* A lifted reduction is a tensor of its own even when its statement fails: reading it later
 * adds no error. */
START_TEST(test_err_lift_no_cascade)
{
	check_errors(
		"fusion f(x: f32[N]) -> (y: f32[N]) {\n"
		"  x[i] = x[i] / sum(j: x[j]);\n"
		"  y[i] = x_sum0 * x[i];\n"
		"}\n",
		"t.fus:2:3: error: cannot assign to input 'x'\n"
		"t.fus:1:10: note: 'x' declared here\n");
}
END_TEST

/* s with every `from` replaced by `to` (malloc'd). */
static char *replace_all(const char *s, const char *from, const char *to)
{
	Buf b = {0};
	buf_puts(&b, "");
	for (const char *p; (p = strstr(s, from)); s = p + strlen(from)) {
		buf_printf(&b, "%.*s%s", (int)(p - s), s, to);
	}
	buf_puts(&b, s);
	return b.s;
}

/* Without a schedule, a lifted reduction compiles to the same CUDA as the program with the
 * reduction written as its own statement (up to its name): logsumexp and a row
 * normalization, at a constant and a symbolic row length. */
START_TEST(test_lift_auto_same_as_written)
{
	static const char *pairs[][2] = {
		{"fusion f(x: f32[M, N]) -> (l: f32[M]) {\n"
		 "  m[i] = max(j: x[i, j]);\n"
		 "  l[i] = m[i] + log(sum(j: exp(x[i, j] - m[i])));\n"
		 "}\n",
		 "fusion f(x: f32[M, N]) -> (l: f32[M]) {\n"
		 "  m[i] = max(j: x[i, j]);\n"
		 "  l_sum0[i] = sum(j: exp(x[i, j] - m[i]));\n"
		 "  l[i] = m[i] + log(l_sum0[i]);\n"
		 "}\n"},
		{"fusion f(x: f16[M, 1024]) -> (y: f16[M, 1024]) {\n"
		 "  y[i, j] = x[i, j] - sum(k: x[i, k]) / 1024;\n"
		 "}\n",
		 "fusion f(x: f16[M, 1024]) -> (y: f16[M, 1024]) {\n"
		 "  y_sum0[i] = sum(k: x[i, k]);\n"
		 "  y[i, j] = x[i, j] - y_sum0[i] / 1024;\n"
		 "}\n"},
		{"fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		 "  y[i, j] = x[i, j] - sum(k: x[i, k]) / N;\n"
		 "}\n",
		 "fusion f(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		 "  y_sum0[i] = sum(k: x[i, k]);\n"
		 "  y[i, j] = x[i, j] - y_sum0[i] / N;\n"
		 "}\n"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		TestCompile *lifted = tc_lowered(pairs[i][0]);
		TestCompile *written = tc_lowered(pairs[i][1]);
		char *a = tc_cuda(lifted), *b = tc_cuda(written);
		ck_assert_str_eq(a, b);
		free(a);
		free(b);
		char *ia = tc_fusion_ir(lifted, 0), *ib = tc_fusion_ir(written, 0);
		char *ja = replace_all(ia, " lifted(l)", "");
		char *jb = replace_all(ja, " lifted(y)", "");
		ck_assert_str_eq(jb, ib);
		free(ia);
		free(ib);
		free(ja);
		free(jb);
		tc_free(lifted);
		tc_free(written);
	}
}
END_TEST

/* The fusion IR of src (no schedule) has `want` (a def line) in it. */
static void expect_def(const char *src, const char *want)
{
	TestFrontend r = tf_compile(src, false);
	ck_assert_str_eq(r.errors, "");
	ck_assert_contains(r.ir, want);
	tf_free(&r);
}

/* frontend/lowp_exp.c: an f32 exp becomes exp.lowp only when its value reaches f16/bf16
 * outputs through products, quotients and sums of exponentials (docs/language.md, "Float
 * accuracy on the GPU"). */
START_TEST(test_lowp_exp)
{
	const char *softmax =
		"fusion sm(x: DT[M, N]) -> (y: OUT[M, N]) {\n"
		"  m[i] = max(j: x[i, j]);\n"
		"  e[i, j] = exp(x[i, j] - m[i]);\n"
		"  s[i] = sum(j: e[i, j]);\n"
		"  y[i, j] = e[i, j] / s[i];\n"
		"}\n";
	static const struct { const char *in, *out, *def; } cases[] = {
		{"f16", "f16", "def e[i, j] = exp.lowp(x[i, j] - m[i])"},
		{"f32", "bf16", "def e[i, j] = exp.lowp(x[i, j] - m[i])"},
		/* an f32 or f64 result keeps the accurate exp */
		{"f16", "f32", "def e[i, j] = exp(x[i, j] - m[i])"},
		{"f64", "f16", "def e[i, j] = exp(x[i, j] - m[i])"},
	};
	for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
		char *a = replace_all(softmax, "DT", cases[i].in);
		char *b = replace_all(a, "OUT", cases[i].out);
		expect_def(b, cases[i].def);
		free(a);
		free(b);
	}
	/* the sum of exp(x) * w can cancel; a difference, a log: exp stays */
	expect_def("fusion f(x: f16[M, N], w: f16[N]) -> (y: f16[M]) {\n"
		   "  y[i] = sum(j: exp(x[i, j]) * w[j]);\n"
		   "}\n",
		   "exp(x[i, j]) * w[j]");
	expect_def("fusion f(x: f16[N]) -> (y: f16[N]) {\n"
		   "  y[i] = exp(x[i]) - 1.0;\n"
		   "}\n",
		   "def y[i] = exp(x[i]) - 1.0");
	expect_def("fusion f(x: f16[M, N]) -> (l: f16[M]) {\n"
		   "  l[i] = log(sum(j: exp(x[i, j])));\n"
		   "}\n",
		   "def l_sum0[i] = sum(j: exp(x[i, j]))");
	/* an f16 output also read by an f32 one: the f32 one decides */
	expect_def("fusion f(x: f16[N]) -> (y: f16[N], z: f32[N]) {\n"
		   "  y[i] = exp(x[i]) * 2.0;\n"
		   "  z[i] = y[i] + 1.0;\n"
		   "}\n",
		   "def y[i] = exp(x[i]) * 2.0");
	/* products, quotients, negations: allowed */
	expect_def("fusion f(x: f16[N], w: f16[N]) -> (y: f16[N]) {\n"
		   "  y[i] = -(w[i] * exp(x[i])) / exp(w[i]);\n"
		   "}\n",
		   "exp.lowp(x[i])) / exp.lowp(w[i])");
}
END_TEST

Suite *sema_suite(void)
{
	Suite *s = suite_create("sema");
	TCase *tc = tcase_create("sema");
	tcase_add_test(tc, test_saxpy_ir);
	tcase_add_test(tc, test_lowp_exp);
	tcase_add_test(tc, test_err_unknown_function_suggestion);
	tcase_add_test(tc, test_err_fusion_c_names);
	tcase_add_test(tc, test_softmax_ir);
	tcase_add_test(tc, test_dtypes_ir);
	tcase_add_test(tc, test_sizes_ir);
	tcase_add_test(tc, test_transpose_matmul_ir);
	tcase_add_test(tc, test_lift_ir);
	tcase_add_test(tc, test_lift_nested_ir);
	tcase_add_test(tc, test_lift_schedule);
	tcase_add_test(tc, test_lift_auto_same_as_written);
	tcase_add_test(tc, test_err_lift_no_cascade);
	tcase_add_test(tc, test_err_names);
	tcase_add_test(tc, test_err_defs);
	tcase_add_test(tc, test_err_indices);
	tcase_add_test(tc, test_err_types);
	tcase_add_test(tc, test_err_schedule_blocks);
	tcase_add_test(tc, test_err_expression_depth);
	tcase_add_test(tc, test_err_independent_fusions);
	tcase_add_test(tc, test_err_failed_directive_no_cascade);
	suite_add_tcase(s, tc);
	return s;
}
