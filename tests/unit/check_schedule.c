/* check_schedule.c: schedule directives (scheduler/schedule.c), compute_at replay and the
 * automatic scheduler (scheduler/auto_schedule.c). Each test compiles a small .fus text through
 * the front end and compares the exact fusion IR text (domains with extents, bindings and how
 * each axis was derived) or the exact error and note lines. */
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

START_TEST(test_saxpy_sched)
{
	check_ir(
		"fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
		"  z[i] = a * x[i] + y[i];\n"
		"}\n"
		"schedule saxpy {\n"
		"  z.split(i, 1024) -> (io, ii);\n"
		"  z.split(ii, 4) -> (it, iv);\n"
		"  z.bind(io, blockIdx.x);\n"
		"  z.bind(it, threadIdx.x);\n"
		"  z.vectorize(iv);\n"
		"}\n",
		"fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N])\n"
		"  sizes: N\n"
		"  schedule: user\n"
		"  tensor x: f32[N] input global\n"
		"  tensor y: f32[N] input global\n"
		"  tensor z: f32[N] output global\n"
		"    def z[i] = a * x[i] + y[i]\n"
		"    domain:\n"
		"      io: ceildiv(N, 1024) blockIdx.x (split of i by 1024, outer)\n"
		"      it: 256 threadIdx.x (split of ii by 4, outer)\n"
		"      iv: 4 vectorize (split of ii by 4, inner)\n");
}
END_TEST

START_TEST(test_defaults_reorder_merge)
{
	check_ir(
		"fusion f(x: f32[M, N, 8]) -> (y: f32[M, N, 8]) {\n"
		"  y[i, j, k] = x[i, j, k] + 1.0;\n"
		"}\n"
		"schedule f {\n"
		"  y.split(j, 32);\n"
		"  y.merge(jo, ji);\n"
		"  y.reorder(k, i);\n"
		"  y.merge(joji, i);\n"
		"  y.unroll(k);\n"
		"}\n",
		"fusion f(x: f32[M, N, 8]) -> (y: f32[M, N, 8])\n"
		"  sizes: M N\n"
		"  schedule: user\n"
		"  tensor x: f32[M, N, 8] input global\n"
		"  tensor y: f32[M, N, 8] output global\n"
		"    def y[i, j, k] = x[i, j, k] + 1.0\n"
		"    domain:\n"
		"      k: 8 unroll (root 2)\n"
		"      jojii: ceildiv(N, 32) * 32 * M (merge of joji and i)\n");
}
END_TEST

START_TEST(test_compute_at_split)
{
	check_ir(
		"fusion f(x: f32[N, 64], b: f32[64]) -> (y: f32[N, 64]) {\n"
		"  t[a, c] = x[a, c] + b[c];\n"
		"  y[i, j] = t[i, j] * 2.0;\n"
		"}\n"
		"schedule f {\n"
		"  y.split(j, 16) -> (jo, ji);\n"
		"  y.bind(i, blockIdx.x);\n"
		"  y.bind(jo, threadIdx.x);\n"
		"  t.compute_at(y, jo);\n"
		"  t.split(ji, 4);\n"
		"  t.vectorize(jii);\n"
		"  t.memory(local);\n"
		"}\n",
		"fusion f(x: f32[N, 64], b: f32[64]) -> (y: f32[N, 64])\n"
		"  sizes: N\n"
		"  schedule: user\n"
		"  tensor x: f32[N, 64] input global\n"
		"  tensor b: f32[64] input global\n"
		"  tensor t: f32[N, 64] intermediate local compute_at(y, 1)\n"
		"    def t[i, j] = x[i, j] + b[j]\n"
		"    domain:\n"
		"      i: N = y.i (root 0)\n"
		"      jo: 4 = y.jo (split of j by 16, outer)\n"
		"      jio: 4 (split of ji by 4, outer)\n"
		"      jii: 4 vectorize (split of ji by 4, inner)\n"
		"  tensor y: f32[N, 64] output global\n"
		"    def y[i, j] = t[i, j] * 2.0\n"
		"    domain:\n"
		"      i: N blockIdx.x (root 0)\n"
		"      jo: 4 threadIdx.x (split of j by 16, outer)\n"
		"      ji: 16 (split of j by 16, inner)\n");
}
END_TEST

START_TEST(test_compute_at_softmax)
{
	check_ir(
		"fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  m[i] = max(j: x[i, j]);\n"
		"  e[i, j] = exp(x[i, j] - m[i]);\n"
		"  s[i] = sum(j: e[i, j]);\n"
		"  y[i, j] = e[i, j] / s[i];\n"
		"}\n"
		"schedule softmax {\n"
		"  y.split(j, 128) -> (jo, ji);\n"
		"  y.bind(i, blockIdx.x);\n"
		"  y.bind(ji, threadIdx.x);\n"
		"  m.compute_at(y, i);\n"
		"  s.compute_at(y, jo);\n"
		"  m.split(j, 128);\n"
		"}\n",
		"fusion softmax(x: f32[M, N]) -> (y: f32[M, N])\n"
		"  sizes: M N\n"
		"  schedule: user\n"
		"  tensor x: f32[M, N] input global\n"
		"  tensor m: f32[M] intermediate local compute_at(y, 0)\n"
		"    def m[i] = max(j: x[i, j])\n"
		"    domain:\n"
		"      i: M = y.i (root 0)\n"
		"      jo: ceildiv(N, 128) reduction (split of j by 128, outer)\n"
		"      ji: 128 reduction (split of j by 128, inner)\n"
		"  tensor e: f32[M, N] intermediate local inline\n"
		"    def e[i, j] = exp(x[i, j] - m[i])\n"
		"    domain:\n"
		"      i: M (root 0)\n"
		"      j: N (root 1)\n"
		"  tensor s: f32[M] intermediate local compute_at(y, 1)\n"
		"    def s[i] = sum(j: e[i, j])\n"
		"    domain:\n"
		"      i: M = y.i (root 0)\n"
		"      jo: ceildiv(N, 128) = y.jo (alias)\n"
		"      j: N reduction (root 1)\n"
		"  tensor y: f32[M, N] output global\n"
		"    def y[i, j] = e[i, j] / s[i]\n"
		"    domain:\n"
		"      i: M blockIdx.x (root 0)\n"
		"      jo: ceildiv(N, 128) (split of j by 128, outer)\n"
		"      ji: 128 threadIdx.x (split of j by 128, inner)\n");
}
END_TEST

START_TEST(test_compute_at_transpose_merge)
{
	check_ir(
		"fusion tr(x: f32[64, 32]) -> (y: f32[32, 64]) {\n"
		"  t[i, j] = x[i, j] + 1.0;\n"
		"  y[j, i] = t[i, j];\n"
		"}\n"
		"schedule tr {\n"
		"  y.merge(j, i) -> ji;\n"
		"  y.split(ji, 4) -> (o, v);\n"
		"  t.compute_at(y, o);\n"
		"}\n",
		"fusion tr(x: f32[64, 32]) -> (y: f32[32, 64])\n"
		"  schedule: user\n"
		"  tensor x: f32[64, 32] input global\n"
		"  tensor t: f32[64, 32] intermediate local compute_at(y, 0)\n"
		"    def t[i, j] = x[i, j] + 1.0\n"
		"    domain:\n"
		"      o: 512 = y.o (split of ji by 4, outer)\n"
		"      v: 4 (split of ji by 4, inner)\n"
		"  tensor y: f32[32, 64] output global\n"
		"    def y[j, i] = t[i, j]\n"
		"    domain:\n"
		"      o: 512 (split of ji by 4, outer)\n"
		"      v: 4 (split of ji by 4, inner)\n");
}
END_TEST

START_TEST(test_compute_at_broadcast)
{
	check_ir(
		"fusion bc(x: f32[M], w: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  t[i] = x[i] * 3.0;\n"
		"  y[i, j] = w[i, j] + t[i];\n"
		"}\n"
		"schedule bc {\n"
		"  y.split(j, 32) -> (jo, ji);\n"
		"  y.reorder(jo, i);\n"
		"  t.compute_at(y, i);\n"
		"}\n",
		"fusion bc(x: f32[M], w: f32[M, N]) -> (y: f32[M, N])\n"
		"  sizes: M N\n"
		"  schedule: user\n"
		"  tensor x: f32[M] input global\n"
		"  tensor w: f32[M, N] input global\n"
		"  tensor t: f32[M] intermediate local compute_at(y, 1)\n"
		"    def t[i] = x[i] * 3.0\n"
		"    domain:\n"
		"      jo: ceildiv(N, 32) = y.jo (alias)\n"
		"      i: M = y.i (root 0)\n"
		"  tensor y: f32[M, N] output global\n"
		"    def y[i, j] = w[i, j] + t[i]\n"
		"    domain:\n"
		"      jo: ceildiv(N, 32) (split of j by 32, outer)\n"
		"      i: M (root 0)\n"
		"      ji: 32 (split of j by 32, inner)\n");
}
END_TEST

START_TEST(test_auto_1d_f32)
{
	check_ir(
		"fusion a(x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
		"  z[i] = x[i] + y[i];\n"
		"}\n",
		"fusion a(x: f32[N], y: f32[N]) -> (z: f32[N])\n"
		"  sizes: N\n"
		"  schedule: auto\n"
		"  tensor x: f32[N] input global\n"
		"  tensor y: f32[N] input global\n"
		"  tensor z: f32[N] output global\n"
		"    def z[i] = x[i] + y[i]\n"
		"    domain:\n"
		"      bx: ceildiv(N, 2048) blockIdx.x (split of ib by 4, outer)\n"
		"      u: 4 unroll (split of ib by 4, inner)\n"
		"      tx: 128 threadIdx.x (split of io by 128, inner)\n"
		"      v: 4 vectorize (split of i by 4, inner)\n");
}
END_TEST

START_TEST(test_auto_2d_identity_f16)
{
	check_ir(
		"fusion a(x: f16[M, N], c: f32) -> (z: f16[M, N]) {\n"
		"  z[i, j] = x[i, j] * c;\n"
		"}\n"
		"schedule a auto;\n",
		"fusion a(x: f16[M, N], c: f32) -> (z: f16[M, N])\n"
		"  sizes: M N\n"
		"  schedule: auto\n"
		"  tensor x: f16[M, N] input global\n"
		"  tensor z: f16[M, N] output global\n"
		"    def z[i, j] = x[i, j] * c\n"
		"    domain:\n"
		"      bx: ceildiv(M * N, 4096) blockIdx.x (split of ijb by 4, outer)\n"
		"      u: 4 unroll (split of ijb by 4, inner)\n"
		"      tx: 128 threadIdx.x (split of ijo by 128, inner)\n"
		"      v: 8 vectorize (split of ij by 8, inner)\n");
}
END_TEST

START_TEST(test_auto_broadcast_const)
{
	/* a last axis shorter than a block: all axes merged (a block per row would idle most of
	 * its threads) */
	check_ir(
		"fusion a(x: f32[1000, 96], b: f32[96]) -> (z: f32[1000, 96]) {\n"
		"  z[i, j] = x[i, j] + b[j];\n"
		"}\n",
		"fusion a(x: f32[1000, 96], b: f32[96]) -> (z: f32[1000, 96])\n"
		"  schedule: auto\n"
		"  tensor x: f32[1000, 96] input global\n"
		"  tensor b: f32[96] input global\n"
		"  tensor z: f32[1000, 96] output global\n"
		"    def z[i, j] = x[i, j] + b[j]\n"
		"    domain:\n"
		"      bx: 47 blockIdx.x (split of ijb by 4, outer)\n"
		"      u: 4 unroll (split of ijb by 4, inner)\n"
		"      tx: 128 threadIdx.x (split of ijo by 128, inner)\n"
		"      v: 4 vectorize (split of ij by 4, inner)\n");
}
END_TEST

START_TEST(test_auto_small)
{
	check_ir(
		"fusion a(x: f32[24]) -> (z: f32[24]) {\n"
		"  z[i] = x[i] * x[i];\n"
		"}\n",
		"fusion a(x: f32[24]) -> (z: f32[24])\n"
		"  schedule: auto\n"
		"  tensor x: f32[24] input global\n"
		"  tensor z: f32[24] output global\n"
		"    def z[i] = x[i] * x[i]\n"
		"    domain:\n"
		"      bx: 1 blockIdx.x (split of io by 32, outer)\n"
		"      tx: 32 threadIdx.x (split of io by 32, inner)\n"
		"      v: 4 vectorize (split of i by 4, inner)\n");
}
END_TEST

START_TEST(test_auto_broadcast_symbolic_odd)
{
	check_ir(
		"fusion a(x: f64[M, 6], b: f64[6]) -> (z: f64[M, 6]) {\n"
		"  z[i, j] = x[i, j] - b[j];\n"
		"}\n",
		"fusion a(x: f64[M, 6], b: f64[6]) -> (z: f64[M, 6])\n"
		"  sizes: M\n"
		"  schedule: auto\n"
		"  tensor x: f64[M, 6] input global\n"
		"  tensor b: f64[6] input global\n"
		"  tensor z: f64[M, 6] output global\n"
		"    def z[i, j] = x[i, j] - b[j]\n"
		"    domain:\n"
		"      bx: ceildiv(M * 6, 1024) blockIdx.x (split of ijb by 4, outer)\n"
		"      u: 4 unroll (split of ijb by 4, inner)\n"
		"      tx: 128 threadIdx.x (split of ijo by 128, inner)\n"
		"      v: 2 vectorize (split of ij by 2, inner)\n");
}
END_TEST

START_TEST(test_err_sched_basic)
{
	check_errors(
		"fusion f(x: f32[N, 64], b: f32[64]) -> (y: f32[N, 64]) {\n"
		"  t[i, j] = x[i, j] + b[j];\n"
		"  y[i, j] = t[i, j] * 2.0;\n"
		"}\n"
		"schedule f {\n"
		"  q.split(i, 4);\n"
		"  y.splt(i, 4);\n"
		"  y.split(k, 4);\n"
		"  y.split(j, 0);\n"
		"  y.split(j, 16) -> (i, ji);\n"
		"  y.split(j, 16);\n"
		"  y.merge(i, ji);\n"
		"  y.reorder(jo, jo);\n"
		"  y.reorder(jo, zz);\n"
		"  y.split(i);\n"
		"  y.split(i, j);\n"
		"  y.split(i, 2) -> (a, b, c);\n"
		"}\n",
		"t.fus:6:3: error: unknown tensor 'q' in fusion 'f'\n"
		"t.fus:7:5: error: unknown directive 'splt'; did you mean 'split'?\n"
		"t.fus:8:11: error: 'y' has no axis 'k'\n"
		"t.fus:3:3: note: the axes of 'y' are [i, j]\n"
		"t.fus:9:14: error: split factor must be a positive integer, not 0\n"
		"t.fus:10:22: error: axis name 'i' is already used in 'y' [i, j]\n"
		"t.fus:12:5: error: cannot merge 'i' and 'ji': they are not adjacent in 'y' [i, jo, ji]\n"
		"t.fus:13:17: error: axis 'jo' is listed twice\n"
		"t.fus:14:17: error: 'y' has no axis 'zz'\n"
		"t.fus:3:3: note: the axes of 'y' are [i, jo, ji]\n"
		"t.fus:15:3: error: 'split' takes 2 arguments, not 1: split(axis, factor) -> (outer, inner)\n"
		"t.fus:16:14: error: expected an integer: split(axis, factor) -> (outer, inner)\n"
		"t.fus:17:21: error: 'split' makes 2 axes, but 3 names are given: split(axis, factor) -> (outer, inner)\n");
}
END_TEST

START_TEST(test_err_sched_bind)
{
	check_errors(
		"fusion f(x: f32[70000, 64]) -> (y: f32[70000, 64]) {\n"
		"  y[i, j] = x[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  y.split(j, 32) -> (jo, ji);\n"
		"  y.bind(i, blockIdx.w);\n"
		"  y.bind(i, threadIdx.x);\n"
		"  y.bind(ji, threadIdx.x);\n"
		"  y.bind(jo, threadIdx.x);\n"
		"  y.bind(ji, threadIdx.y);\n"
		"  y.bind(i, blockIdx.y);\n"
		"  y.split(i, 64) -> (io, ii);\n"
		"  y.bind(ii, threadIdx.y);\n"
		"  y.split(ji, 2);\n"
		"}\n",
		"t.fus:6:13: error: unknown parallel type 'blockIdx.w' (expected blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y or threadIdx.z)\n"
		"t.fus:7:3: error: a block of 70000 threads exceeds the limit of 1024\n"
		"t.fus:9:3: error: threadIdx.x is already bound in 'y' (to axis 'ji')\n"
		"t.fus:8:3: note: bound here\n"
		"t.fus:10:3: error: axis 'ji' is already bound to threadIdx.x\n"
		"t.fus:8:3: note: bound here\n"
		"t.fus:11:3: error: blockIdx.y extent 70000 exceeds the limit of 65535\n"
		"t.fus:13:3: error: a block of 2048 threads exceeds the limit of 1024\n"
		"t.fus:14:5: error: cannot split 'ji': it is already bound to threadIdx.x\n");
}
END_TEST

START_TEST(test_err_sched_misc)
{
	check_errors(
		"fusion f(x: f32[N, 64], h: f16[N, 64]) -> (y: f32[N, 64], z: f16[N, 64]) {\n"
		"  t[i, j] = x[i, j] + 1.0;\n"
		"  s[i] = sum(j: x[i, j]);\n"
		"  y[i, j] = t[i, j] * s[i];\n"
		"  z[i, j] = h[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  y.unroll(i);\n"
		"  y.inline();\n"
		"  s.inline();\n"
		"  x.inline();\n"
		"  y.memory(shared);\n"
		"  t.memory(shared);\n"
		"  t.memory(global);\n"
		"  t.memory(texture);\n"
		"  x.cache_after(shared);\n"
		"  c = x.cache_after(shared);\n"
		"  y.cp_asink();\n"
		"  z.split(i, 4) -> (io, ii);\n"
		"  z.vectorize(ii);\n"
		"  z.split(j, 3) -> (jo, ji);\n"
		"  z.vectorize(ji);\n"
		"  z.merge(io, ii) -> m;\n"
		"}\n",
		"t.fus:8:12: error: cannot unroll 'i': its extent N is not a constant (split it by a constant first)\n"
		"t.fus:9:3: error: cannot inline output 'y': it must be written to memory\n"
		"t.fus:10:3: error: cannot inline reduction 's'\n"
		"t.fus:11:3: error: 'x' is an input: it has no loop domain to inline\n"
		"t.fus:12:12: error: output 'y' must stay in global memory\n"
		"t.fus:14:12: error: memory(global) for an intermediate is not supported yet\n"
		"t.fus:15:12: error: unknown memory 'texture' (expected global, shared or local)\n"
		"t.fus:16:3: error: 'cache_after' creates a tensor: name it, as in 'NAME = x.cache_after(...)'\n"
		"t.fus:18:5: error: unknown directive 'cp_asink'; did you mean 'cp_async'?\n"
		"t.fus:23:5: error: cannot merge 'ii': it is already vectorized\n"
		"t.fus:20:3: error: vectorized axis 'ii' must be the innermost axis of 'z' [io, ii, jo, ji]\n"
		"t.fus:22:3: error: a vector of 3 x f16 is 6 bytes; it must be 2, 4, 8 or 16 bytes\n");
}
END_TEST

START_TEST(test_err_compute_at)
{
	check_errors(
		"fusion f(x: f32[64, 64]) -> (y: f32[64, 64], w: f32[64, 64]) {\n"
		"  t[i, j] = x[i, j] + 1.0;\n"
		"  y[i, j] = t[i, j] + t[j, i];\n"
		"  w[i, j] = x[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  t.compute_at(w, i);\n"
		"  t.compute_at(y, k);\n"
		"  t.compute_at(q, i);\n"
		"  y.compute_at(t, i);\n"
		"  t.compute_at(y, i);\n"
		"}\n"
		"fusion g(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
		"  t[j] = b[j] * 2.0;\n"
		"  y[i, j] = x[i, j] + t[j];\n"
		"}\n"
		"schedule g {\n"
		"  y.merge(i, j);\n"
		"  t.compute_at(y, ij);\n"
		"}\n"
		"fusion h(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  t[i, j] = x[i, j] + 1.0;\n"
		"  y[i, j] = t[i, j];\n"
		"}\n"
		"schedule h {\n"
		"  y.split(j, 4) -> (jo, ji);\n"
		"  t.compute_at(y, jo);\n"
		"  y.split(jo, 2);\n"
		"  t.split(jo, 2);\n"
		"  t.bind(i, blockIdx.x);\n"
		"  y.vectorize(ji);\n"
		"}\n",
		"t.fus:7:16: error: 't' does not feed 'w' ('w' does not read 't')\n"
		"t.fus:8:19: error: 'y' has no axis 'k'\n"
		"t.fus:3:3: note: the axes of 'y' are [i, j]\n"
		"t.fus:9:16: error: unknown tensor 'q'\n"
		"t.fus:10:16: error: 'y' does not feed 't', which is not an output whose first indices have the extents of 'y''s\n"
		"t.fus:11:3: error: cannot compute 't' at 'y': 'y' reads 't' with different subscripts\n"
		"t.fus:19:3: error: cannot compute 't' at 'y': 'y' merges 'i' and 'j', but 't' has no axis for 'i'\n"
		"t.fus:28:11: error: axis 'jo' of 'y' is shared with 't' by compute_at; transform it before the compute_at\n"
		"t.fus:27:3: note: compute_at here\n"
		"t.fus:29:11: error: axis 'jo' of 't' is a loop of 'y' (compute_at); schedule it on 'y'\n"
		"t.fus:30:10: error: axis 'i' of 't' is a loop of 'y' (compute_at); schedule it on 'y'\n");
}
END_TEST

START_TEST(test_err_block_over_tensors)
{
	check_errors(
		"fusion f(x: f32[64, 64]) -> (y: f32[64, 64], z: f32[64, 64]) {\n"
		"  y[i, j] = x[i, j];\n"
		"  z[i, j] = x[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  y.bind(j, threadIdx.x);\n"
		"  z.bind(i, threadIdx.y);\n"
		"  y.bind(i, blockIdx.x);\n"
		"}\n",
		"t.fus:7:3: error: the kernel of fusion 'f' needs a block of 4096 threads (the largest extent bound to each threadIdx dimension, over all tensors); the limit is 1024\n");
}
END_TEST

/* A parallel type binds one loop of a loop nest (issue 11, fuzzer class F5): a loop of the
 * consumer a tensor is computed inside counts, in either order of the binds, and an axis bound
 * before the compute_at must agree with the loop it runs as. A loop the tensor does not index
 * (y.ii for xs, which has no i) may share the type. */
START_TEST(test_err_par_reuse)
{
	check_errors(
		"fusion f(x: f32[8, 8]) -> (y: f32[8, 8]) {\n"
		"  y[i, j] = x[i, j] * 2.0;\n"
		"}\n"
		"schedule f {\n"
		"  xs = x.cache_after(shared);\n"
		"  y.split(j, 4) -> (jo, ji);\n"
		"  y.bind(jo, threadIdx.x);\n"
		"  xs.compute_at(y, jo);\n"
		"  xs.bind(ji, threadIdx.x);\n"
		"  xs.bind(ji, threadIdx.y);\n"
		"  y.bind(i, threadIdx.y);\n"
		"}\n",
		"t.fus:9:3: error: threadIdx.x is already bound in the loops around 'xs': it is computed inside loop 'jo' of 'y', bound to threadIdx.x\n"
		"t.fus:7:3: note: bound here\n"
		"t.fus:11:3: error: cannot bind 'y.i' to threadIdx.y: 'xs' is computed inside it and binds its loop 'ji' to threadIdx.y\n"
		"t.fus:10:3: note: bound here\n");
	check_errors(
		"fusion f(x: f32[8, 8]) -> (y: f32[8, 8]) {\n"
		"  y[i, j] = x[i, j] * 2.0;\n"
		"}\n"
		"schedule f {\n"
		"  xs = x.cache_after(local);\n"
		"  xs.bind(j, blockIdx.y);\n"
		"  y.bind(j, blockIdx.x);\n"
		"  xs.compute_at(y, j);\n"
		"}\n",
		"t.fus:8:3: error: cannot compute 'xs' at 'y.j': 'xs.j', bound to blockIdx.y, would run as loop 'j' of 'y', bound to blockIdx.x\n"
		"t.fus:6:3: note: bound here\n");
}
END_TEST

START_TEST(test_par_reuse_unindexed)
{
	TestFrontend r = tf_compile(
		"fusion f(x: f32[N], b: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  y[i, j] = x[j] + b[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  y.split(i, 4) -> (io, ii); y.split(j, 8) -> (jo, ji); y.reorder(io, jo, ii, ji);\n"
		"  y.bind(ii, threadIdx.y); y.bind(ji, threadIdx.x);\n"
		"  xs = x.cache_after(shared); xs.compute_at(y, ii);\n"
		"  xs.bind(ji, threadIdx.y);\n"
		"}\n", true);
	ck_assert_str_eq(r.errors, "");
	tf_free(&r);
}
END_TEST

/* `x.evict_first()`: the loads of that input, and only those, go through __fus_ld_ef, in the
 * scalar (b is not marked) and the vector form; only an input takes it, once. */
START_TEST(test_evict_first)
{
	static const char src[] = "fusion f(x: f32[M, N], b: f32[N], h: f16[M, N]) -> (y: f32[M, N]) {\n"
				  "  y[i, j] = x[i, j] + b[j] + f32(h[i, j]);\n"
				  "}\n"
				  "schedule f { x.evict_first(); h.evict_first();\n"
				  "  y.split(j, 4) -> (jo, ji); y.bind(i, blockIdx.x);\n"
				  "  xc = x.cache_after(local); xc.compute_at(y, jo); xc.vectorize(ji); }\n";
	TestFrontend r = tf_compile(src, true);
	ck_assert_str_eq(r.errors, "");
	ck_assert_msg(strstr(r.ir, "  tensor x: f32[M, N] input global evict_first\n"), "%s", r.ir);
	ck_assert_msg(strstr(r.ir, "  tensor b: f32[N] input global\n"), "%s", r.ir);
	tf_free(&r);
	TestCompile *tc = tc_lowered(src);
	char *cu = tc_cuda(tc);
	ck_assert_msg(strstr(cu, "= __fus_ld_ef(reinterpret_cast<const __fus_vec<float, 4> *>(&x["), "%s", cu);
	ck_assert_msg(strstr(cu, "__fus_half2float(__fus_ld_ef(&h["), "%s", cu);
	ck_assert_msg(!strstr(cu, "__fus_ld_ef(&b["), "%s", cu);
	ck_assert_msg(strstr(cu, "b[j"), "%s", cu);
	tc_assert_nvrtc(tc);
	free(cu);
	tc_free(tc);
	check_errors("fusion f(x: f32[N]) -> (y: f32[N]) {\n"
		     "  y[i] = x[i] * 2.0;\n"
		     "}\n"
		     "schedule f {\n"
		     "  y.evict_first();\n"
		     "  x.evict_first();\n"
		     "  x.evict_first();\n"
		     "}\n",
		     "t.fus:5:3: error: cannot evict_first 'y': it is not an input (the hint is for the loads of an input read once)\n"
		     "t.fus:7:3: error: 'x' is already evict_first\n"
		     "t.fus:6:3: note: first evict_first here\n");
}
END_TEST

Suite *schedule_suite(void)
{
	Suite *s = suite_create("schedule");
	TCase *tc = tcase_create("schedule");
	tcase_add_test(tc, test_saxpy_sched);
	tcase_add_test(tc, test_defaults_reorder_merge);
	tcase_add_test(tc, test_compute_at_split);
	tcase_add_test(tc, test_compute_at_softmax);
	tcase_add_test(tc, test_compute_at_transpose_merge);
	tcase_add_test(tc, test_compute_at_broadcast);
	tcase_add_test(tc, test_auto_1d_f32);
	tcase_add_test(tc, test_auto_2d_identity_f16);
	tcase_add_test(tc, test_auto_broadcast_const);
	tcase_add_test(tc, test_auto_small);
	tcase_add_test(tc, test_auto_broadcast_symbolic_odd);
	tcase_add_test(tc, test_err_sched_basic);
	tcase_add_test(tc, test_err_sched_bind);
	tcase_add_test(tc, test_err_sched_misc);
	tcase_add_test(tc, test_err_compute_at);
	tcase_add_test(tc, test_err_block_over_tensors);
	tcase_add_test(tc, test_err_par_reuse);
	tcase_add_test(tc, test_par_reuse_unindexed);
	tcase_add_test(tc, test_evict_first);
	suite_add_tcase(s, tc);
	return s;
}
