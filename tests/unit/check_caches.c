/* check_caches.c: the cache directives of issue 6 (scheduler/schedule.c, docs/caching.md):
 * cache_after, cache_before, memory(shared), cp_async, double_buffer/stages, the default
 * placement of caches and the end-of-schedule checks. Each test compiles a small .fus text
 * through the front end and compares the exact fusion IR text or the exact error and note
 * lines; one test inspects the IR structures (tensor order, readers, definitions) directly. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

/* The fusion IR text after the whole front end (parse, sema, schedule), or the exact error and
 * note lines. */
#define check_ir(text, want) tf_expect_ir((text), true, (want))
#define check_errors(text, want) tf_expect_errors((text), (want))

/* cache_after(shared) + compute_at + split/bind/vectorize of the cache + cp_async + stages(3):
 * the cache is inserted before its reader, the reader reads it, prefetch defaults to stages -
 * 1. */
START_TEST(test_cache_after_cp_async_stages)
{
	check_ir(
		"fusion f(A: f32[33, 48], B: f32[33, 48]) -> (out: f32[33, 48]) {\n"
		"  out[i, j] = A[i, j] + B[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  As = A.cache_after(shared);\n"
		"  As.compute_at(out, i);\n"
		"  As.split(j, 4) -> (jt, jv);\n"
		"  As.bind(jt, threadIdx.x);\n"
		"  As.vectorize(jv);\n"
		"  As.cp_async();\n"
		"  As.stages(3);\n"
		"  out.split(j, 12) -> (jo, jt);\n"
		"  out.bind(jt, threadIdx.x);\n"
		"}\n",
		"fusion f(A: f32[33, 48], B: f32[33, 48]) -> (out: f32[33, 48])\n"
		"  schedule: user\n"
		"  tensor A: f32[33, 48] input global\n"
		"  tensor B: f32[33, 48] input global\n"
		"  tensor As: f32[33, 48] intermediate shared compute_at(out, 0) cache_after(A) cp_async stages(3, 2)\n"
		"    def As[i, j] = A[i, j]\n"
		"    domain:\n"
		"      i: 33 = out.i (root 0)\n"
		"      jt: 12 threadIdx.x (split of j by 4, outer)\n"
		"      jv: 4 vectorize (split of j by 4, inner)\n"
		"  tensor out: f32[33, 48] output global\n"
		"    def out[i, j] = As[i, j] + B[i, j]\n"
		"    domain:\n"
		"      i: 33 (root 0)\n"
		"      jo: 4 (split of j by 12, outer)\n"
		"      jt: 12 threadIdx.x (split of j by 12, inner)\n");
}
END_TEST

/* Default placement: a shared cache stops before the reader's first threadIdx axis; a local
 * cache goes inside it (per-thread). */
START_TEST(test_default_placement)
{
	check_ir(
		"fusion f(x: f32[N], w: f32[N]) -> (y: f32[N], z: f32[N]) {\n"
		"  y[i] = x[i] * 2.0;\n"
		"  z[i] = w[i] + 1.0;\n"
		"}\n"
		"schedule f {\n"
		"  xs = x.cache_after(shared);\n"
		"  xs.cp_async();\n"
		"  ws = w.cache_after(local);\n"
		"  y.split(i, 128) -> (io, ii);\n"
		"  y.split(ii, 4) -> (tx, v);\n"
		"  y.bind(io, blockIdx.x);\n"
		"  y.bind(tx, threadIdx.x);\n"
		"  z.split(i, 32) -> (io, tx);\n"
		"  z.bind(tx, threadIdx.x);\n"
		"}\n",
		"fusion f(x: f32[N], w: f32[N]) -> (y: f32[N], z: f32[N])\n"
		"  sizes: N\n"
		"  schedule: user\n"
		"  tensor x: f32[N] input global\n"
		"  tensor w: f32[N] input global\n"
		"  tensor xs: f32[N] intermediate shared compute_at(y, 0) cache_after(x) cp_async\n"
		"    def xs[i] = x[i]\n"
		"    domain:\n"
		"      io: ceildiv(N, 128) = y.io (split of i by 128, outer)\n"
		"      ii: 128 (split of i by 128, inner)\n"
		"  tensor y: f32[N] output global\n"
		"    def y[i] = xs[i] * 2.0\n"
		"    domain:\n"
		"      io: ceildiv(N, 128) blockIdx.x (split of i by 128, outer)\n"
		"      tx: 32 threadIdx.x (split of ii by 4, outer)\n"
		"      v: 4 (split of ii by 4, inner)\n"
		"  tensor ws: f32[N] intermediate local compute_at(z, 1) cache_after(w)\n"
		"    def ws[i] = w[i]\n"
		"    domain:\n"
		"      io: ceildiv(N, 32) = z.io (split of i by 32, outer)\n"
		"      tx: 32 = z.tx (split of i by 32, inner)\n"
		"  tensor z: f32[N] output global\n"
		"    def z[i] = ws[i] + 1.0\n"
		"    domain:\n"
		"      io: ceildiv(N, 32) (split of i by 32, outer)\n"
		"      tx: 32 threadIdx.x (split of i by 32, inner)\n");
}
END_TEST

/* cache_before moves the definition (a reduction) into the cache; the tensor becomes the copy. */
START_TEST(test_cache_before_reduction)
{
	check_ir(
		"fusion f(x: f32[64, 32]) -> (s: f32[64]) {\n"
		"  s[i] = sum(j: x[i, j] * x[i, j]);\n"
		"}\n"
		"schedule f {\n"
		"  sc = s.cache_before(local);\n"
		"  s.bind(i, threadIdx.x);\n"
		"}\n",
		"fusion f(x: f32[64, 32]) -> (s: f32[64])\n"
		"  schedule: user\n"
		"  tensor x: f32[64, 32] input global\n"
		"  tensor sc: f32[64] intermediate local compute_at(s, 0) cache_before(s)\n"
		"    def sc[i] = sum(j: x[i, j] * x[i, j])\n"
		"    domain:\n"
		"      i: 64 = s.i (root 0)\n"
		"      j: 32 reduction (root 1)\n"
		"  tensor s: f32[64] output global\n"
		"    def s[i] = sc[i]\n"
		"    domain:\n"
		"      i: 64 threadIdx.x (root 0)\n");
}
END_TEST

/* A cache of a cache (shared -> local) read through an inlined intermediate with other index
 * names; caches are placed consumers first. */
START_TEST(test_cache_chain_inlined_reader)
{
	check_ir(
		"fusion f(x: f32[64, 64]) -> (z: f32[64, 64]) {\n"
		"  e[i, j] = x[i, j] * 2.0;\n"
		"  z[p, q] = e[p, q] + x[p, q];\n"
		"}\n"
		"schedule f {\n"
		"  xs = x.cache_after(shared);\n"
		"  xl = xs.cache_after(local);\n"
		"  z.split(q, 16) -> (qo, qi);\n"
		"  z.bind(qi, threadIdx.x);\n"
		"  xl.stages(4, 2);\n"
		"}\n",
		"fusion f(x: f32[64, 64]) -> (z: f32[64, 64])\n"
		"  schedule: user\n"
		"  tensor x: f32[64, 64] input global\n"
		"  tensor xs: f32[64, 64] intermediate shared compute_at(xl, 1) cache_after(x)\n"
		"    def xs[p, q] = x[p, q]\n"
		"    domain:\n"
		"      p: 64 = xl.p (root 0)\n"
		"      qo: 4 = xl.qo (split of q by 16, outer)\n"
		"      qi: 16 (split of q by 16, inner)\n"
		"  tensor xl: f32[64, 64] intermediate local compute_at(z, 2) cache_after(xs) stages(4, 2)\n"
		"    def xl[p, q] = xs[p, q]\n"
		"    domain:\n"
		"      p: 64 = z.p (root 0)\n"
		"      qo: 4 = z.qo (split of q by 16, outer)\n"
		"      qi: 16 = z.qi (split of q by 16, inner)\n"
		"  tensor e: f32[64, 64] intermediate local inline\n"
		"    def e[i, j] = xl[i, j] * 2.0\n"
		"    domain:\n"
		"      i: 64 (root 0)\n"
		"      j: 64 (root 1)\n"
		"  tensor z: f32[64, 64] output global\n"
		"    def z[p, q] = e[p, q] + xl[p, q]\n"
		"    domain:\n"
		"      p: 64 (root 0)\n"
		"      qo: 4 (split of q by 16, outer)\n"
		"      qi: 16 threadIdx.x (split of q by 16, inner)\n");
}
END_TEST

/* cache_after / cache_before rejections. */
START_TEST(test_err_cache_after_before)
{
	check_errors(
		"fusion f(x: f32[64, 64], y: f32[64, 64], a: f32, b: f32[N]) -> (z: f32[64, 64], w: f32[64, 64]) {\n"
		"  t[i, j] = x[i, j] + x[j, i];\n"
		"  z[i, j] = t[i, j] * y[i, i];\n"
		"  w[p, q] = y[p, p] + 1.0;\n"
		"}\n"
		"schedule f {\n"
		"  xs = x.cache_after(shared);\n"
		"  ys = y.cache_after(local);\n"
		"  x.cache_after(shared);\n"
		"  tc = t.cache_after(global);\n"
		"  a = t.cache_after(local);\n"
		"  N = t.cache_after(local);\n"
		"  zc = z.cache_after(local);\n"
		"  xc = x.cache_before(shared);\n"
		"  z.split(j, 4) -> (jo, ji);\n"
		"  zb = z.cache_before(local);\n"
		"}\n",
		"t.fus:7:3: error: cannot cache 'x': its readers access it with different index orders, x[i, j] and x[j, i]\n"
		"t.fus:2:13: note: read as x[i, j] here\n"
		"t.fus:2:23: note: read as x[j, i] here\n"
		"t.fus:8:3: error: cannot cache 'y': it is read as y[i, i], with the index 'i' twice\n"
		"t.fus:3:23: note: read here\n"
		"t.fus:9:3: error: 'cache_after' creates a tensor: name it, as in 'NAME = x.cache_after(...)'\n"
		"t.fus:10:22: error: a cache lives in shared or local memory, not global\n"
		"t.fus:11:3: error: 'a' is already a scalar parameter of fusion 'f'\n"
		"t.fus:1:42: note: 'a' declared here\n"
		"t.fus:12:3: error: 'N' is already a size symbol of fusion 'f'\n"
		"t.fus:1:57: note: 'N' declared here\n"
		"t.fus:13:8: error: cannot cache 'z': no statement reads it\n"
		"t.fus:14:8: error: cannot cache_before input 'x': it has no definition (use cache_after to cache its reads)\n"
		"t.fus:16:3: error: cache_before must come before the other directives on 'z' (and before compute_at into it)\n");
}
END_TEST

/* Issue 11 item 6: constants are not index orders. x read at two different constants caches
 * into a tensor whose axis there is its own loop over the whole dimension (d1); the reads
 * become xs[i, 0] and xs[i, 2]. A dimension read at a constant and at an index is refused. */
START_TEST(test_cache_after_constants)
{
	TestFrontend r = tf_compile(
		"fusion f(x: f32[M, 4]) -> (y: f32[M]) { y[i] = x[i, 0] * x[i, 2]; }\n"
		"schedule f { xs = x.cache_after(local); }\n", true);
	ck_assert_str_eq(r.errors, "");
	ck_assert_contains(r.ir, "    def xs[i, d1] = x[i, d1]\n");
	ck_assert_contains(r.ir, "    def y[i] = xs[i, 0] * xs[i, 2]\n");
	tf_free(&r);
	TestCompile *tc = tc_lowered(
		"fusion f(x: f32[2, N]) -> (y: f32[N]) { y[j] = x[0, j] - x[1, j]; }\n"
		"schedule f { xs = x.cache_after(shared); y.split(j, 32) -> (jo, ji);\n"
		"  y.bind(jo, blockIdx.x); y.bind(ji, threadIdx.x); }\n");
	tc_free(tc);
	tf_expect_errors(
		"fusion f(x: f32[M, 4]) -> (y: f32[M, 4]) { y[i, j] = x[i, 0] * x[i, j]; }\n"
		"schedule f { xs = x.cache_after(shared); }\n",
		"t.fus:2:14: error: cannot cache 'x': dimension 2 is read both at a constant and at an index, x[i, 0] and x[i, j]\n"
		"t.fus:1:54: note: read as x[i, 0] here\n"
		"t.fus:1:64: note: read as x[i, j] here\n");
}
END_TEST

/* cp_async and stages rejections at the directive. */
START_TEST(test_err_cp_async_stages)
{
	check_errors(
		"fusion f(x: f32[64, 64], h: f16[64, 64]) -> (y: f32[64, 64], z: f16[64, 64]) {\n"
		"  t[i, j] = x[i, j] * 2.0;\n"
		"  y[i, j] = t[i, j] + 1.0;\n"
		"  z[i, j] = h[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  yc = y.cache_before(shared);\n"
		"  yc.cp_async();\n"
		"  t.cp_async();\n"
		"  ts = t.cache_after(shared);\n"
		"  ts.cp_async();\n"
		"  xl = x.cache_after(local);\n"
		"  xl.cp_async();\n"
		"  hs = h.cache_after(shared);\n"
		"  hs.cp_async(ca);\n"
		"  hs.cp_async(cg, cg);\n"
		"  hs.cp_async(4);\n"
		"  hs.stages(1);\n"
		"  hs.stages(3, 3);\n"
		"  hs.stages(3, 1, 2);\n"
		"  t.double_buffer();\n"
		"  yc.stages(2);\n"
		"  hs.double_buffer();\n"
		"  hs.stages(3);\n"
		"}\n",
		"t.fus:8:3: error: cannot cp_async 'yc': it is not a copy made by cache_after (cp.async copies global memory into shared memory)\n"
		"t.fus:9:3: error: cannot cp_async 't': it is not a copy made by cache_after (cp.async copies global memory into shared memory)\n"
		"t.fus:11:3: error: cannot cp_async 'ts': it copies intermediate 't', which is not in global memory (cp.async reads an input)\n"
		"t.fus:13:3: error: cannot cp_async 'xl': it is in local memory; cp.async writes shared memory\n"
		"t.fus:12:3: note: 'xl' is placed in local memory here\n"
		"t.fus:15:15: error: unknown cp_async mode 'ca' (expected cg, or no argument for .ca)\n"
		"t.fus:16:3: error: 'cp_async' takes 0 or 1 arguments, not 2: cp_async() or cp_async(cg)\n"
		"t.fus:17:15: error: expected a name: cp_async() or cp_async(cg)\n"
		"t.fus:18:13: error: a circular buffer needs 2 to 64 stages, not 1\n"
		"t.fus:19:16: error: the prefetch distance must be at least 0 and less than the 3 stages, not 3\n"
		"t.fus:20:3: error: 'stages' takes 1 or 2 arguments, not 3: stages(n) or stages(n, prefetch)\n"
		"t.fus:21:3: error: cannot buffer 't': it is not a copy made by cache_after\n"
		"t.fus:22:3: error: cannot buffer 'yc': it is not a copy made by cache_after\n"
		"t.fus:24:3: error: 'hs' is already buffered\n"
		"t.fus:23:3: note: first buffered here\n");
}
END_TEST

/* Rejections that depend on the complete schedule: cp.async vector sizes and the buffer loop. */
START_TEST(test_err_end_of_schedule)
{
	check_errors(
		"fusion v(h: f16[32, 64], x: f32[32, 64]) -> (o: f16[32, 64], p: f32[32, 64]) {\n"
		"  o[i, j] = h[i, j] * 2.0;\n"
		"  p[i, j] = x[i, j] * 2.0;\n"
		"}\n"
		"schedule v {\n"
		"  hs = h.cache_after(shared);\n"
		"  hs.compute_at(o, i);\n"
		"  hs.bind(j, threadIdx.x);\n"
		"  hs.cp_async();\n"
		"  xs = x.cache_after(shared);\n"
		"  xs.compute_at(p, i);\n"
		"  xs.split(j, 2) -> (jt, jv);\n"
		"  xs.bind(jt, threadIdx.x);\n"
		"  xs.vectorize(jv);\n"
		"  xs.cp_async(cg);\n"
		"  xs.double_buffer();\n"
		"  o.bind(i, blockIdx.x);\n"
		"  o.bind(j, threadIdx.x);\n"
		"  p.bind(j, threadIdx.x);\n"
		"  hs.stages(2);\n"
		"}\n",
		"t.fus:9:3: error: cp_async copies 4, 8 or 16 bytes per access; 'hs' copies 2 (no vectorized axis: 1 x f16)\n"
		"t.fus:20:3: error: cannot buffer 'hs': no serial loop outside its compute-at position (the loops of 'o' up to 'i' are parallel or broadcast)\n"
		"t.fus:7:3: note: 'hs' is computed at 'o' here\n"
		"t.fus:15:3: error: cp_async(cg) copies 16 bytes per access; 'xs' copies 8 (vectorized axis 'jv': 2 x f32)\n");
}
END_TEST

/* Default placement rejections, a cache moved out of shared memory after cp_async, inline of a
 * cache, compute_at into an unplaced cache. */
START_TEST(test_err_placement)
{
	check_errors(
		"fusion two(x: f32[64]) -> (y: f32[64], z: f32[64]) {\n"
		"  y[i] = x[i] + 1.0;\n"
		"  z[i] = x[i] * 2.0;\n"
		"}\n"
		"schedule two {\n"
		"  xs = x.cache_after(shared);\n"
		"}\n"
		"fusion inner(x: f32[64]) -> (y: f32[64]) {\n"
		"  y[i] = x[i] + 1.0;\n"
		"}\n"
		"schedule inner {\n"
		"  xs = x.cache_after(shared);\n"
		"  xs.cp_async();\n"
		"  xs.memory(local);\n"
		"  y.bind(i, threadIdx.x);\n"
		"}\n"
		"fusion split(x: f32[64]) -> (y: f32[64]) {\n"
		"  y[i] = x[i] + 1.0;\n"
		"}\n"
		"schedule split {\n"
		"  xs = x.cache_after(shared);\n"
		"  xs.split(i, 4) -> (io, ii);\n"
		"  xl = xs.cache_after(local);\n"
		"  xl.inline();\n"
		"}\n"
		"fusion chain(x: f32[64]) -> (y: f32[64]) {\n"
		"  y[i] = x[i] + 1.0;\n"
		"}\n"
		"schedule chain {\n"
		"  xs = x.cache_after(shared);\n"
		"  xl = xs.cache_after(local);\n"
		"  xs.compute_at(xl, i);\n"
		"  y.split(i, 16) -> (io, ii);\n"
		"}\n"
		"fusion tid(x: f32[64]) -> (y: f32[64]) {\n"
		"  y[i] = x[i] + 1.0;\n"
		"}\n"
		"schedule tid {\n"
		"  xs = x.cache_after(shared);\n"
		"  y.bind(i, threadIdx.x);\n"
		"}\n",
		"t.fus:6:3: error: cannot place cache 'xs': it is read by both 'y' and 'z'; give it a compute_at\n"
		"t.fus:13:3: error: cannot cp_async 'xs': it is in local memory; cp.async writes shared memory\n"
		"t.fus:14:3: note: 'xs' is placed in local memory here\n"
		"t.fus:24:3: error: cannot inline cache 'xl': a cache is always stored\n"
		"t.fus:23:3: note: 'xl' is made here\n"
		"t.fus:31:3: error: cache 'xl' has 'xs' computed at it but no compute_at of its own; give it a compute_at before that\n"
		"t.fus:32:3: note: 'xs' is computed at 'xl' here\n"
		"t.fus:39:3: error: cannot place cache 'xs' by default: the outermost loop 'i' of 'y' is bound to threadIdx.x; give 'xs' a compute_at\n");
}
END_TEST

/* A computed-at tensor exists only inside its loop (issue 11): a reader placed outside it
 * (softmax's m at y.i reading x's cache computed at y.j; a reduction reading a register
 * intermediate computed at its reader's inner loop; an output in another nest that recomputes
 * the cache's reader) is an error at the compute_at, with a note at the reader's placement. */
START_TEST(test_err_reader_outside_loop)
{
	check_errors(
		"fusion sm(x: f32[M, 5]) -> (y: f32[M, 5]) {\n"
		"  m[i] = max(j: x[i, j]);\n"
		"  y[i, j] = x[i, j] - m[i];\n"
		"}\n"
		"schedule sm {\n"
		"  xc = x.cache_after(shared);\n"
		"  xc.compute_at(y, j);\n"
		"}\n"
		"fusion nm(x: f32[M, 8]) -> (y: f32[M, 8]) {\n"
		"  t[i, j] = x[i, j] * 2.0;\n"
		"  m[i] = sum(j: t[i, j]);\n"
		"  y[i, j] = t[i, j] / m[i];\n"
		"}\n"
		"schedule nm {\n"
		"  t.compute_at(y, j);\n"
		"  t.memory(local);\n"
		"}\n"
		"fusion two(x: f32[M, 8]) -> (y: f32[M, 8], z: f32[M, 8]) {\n"
		"  y[i, j] = x[i, j] * 2.0;\n"
		"  z[i, j] = y[i, j] + 1.0;\n"
		"}\n"
		"schedule two {\n"
		"  xc = x.cache_after(local);\n"
		"  xc.compute_at(y, j);\n"
		"}\n",
		"t.fus:7:3: error: 'xc' is computed inside loop 'j' of 'y', but 'm' reads it outside that loop\n"
		"t.fus:2:3: note: 'm' is computed at 'y.i' here\n"
		"t.fus:15:3: error: 't' is computed inside loop 'j' of 'y', but 'm' reads it outside that loop\n"
		"t.fus:11:3: note: 'm' is computed at 'y.i' here\n"
		"t.fus:24:3: error: 'xc' is computed inside loop 'j' of 'y', but 'z' reads it outside that loop\n");
	/* the cache at the row loop, where m and y both run: accepted */
	TestFrontend r = tf_compile("fusion sm(x: f32[M, 5]) -> (y: f32[M, 5]) {\n"
				    "  m[i] = max(j: x[i, j]);\n"
				    "  y[i, j] = x[i, j] - m[i];\n"
				    "}\n"
				    "schedule sm {\n"
				    "  xc = x.cache_after(shared);\n"
				    "  xc.compute_at(y, i);\n"
				    "}\n",
				    true);
	ck_assert_str_eq(r.errors, "");
	ck_assert_contains(r.ir, "  tensor xc: f32[M, 5] intermediate shared compute_at(y, 0) cache_after(x)\n");
	tf_free(&r);
}
END_TEST

/* A reader inside a computed-at tensor's loop may read only the elements of the current
 * iteration of the loops it shares (issue 11, fuzzer F9/F10): a reduction over one of those
 * loops (explicit or default placement), a read at a constant subscript, and a reduction
 * recomputed at a split's outer loop reading the other chunks are errors at the placement;
 * readers that follow the shared loops (the same split) are accepted. */
START_TEST(test_err_reader_other_elements)
{
	check_errors(
		"fusion a(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  e[i, j] = x[i, j] * 2.0;\n"
		"  s[i] = sum(j: e[i, j]);\n"
		"  y[i, j] = e[i, j] - s[i];\n"
		"}\n"
		"schedule a {\n"
		"  s.compute_at(y, j);\n"
		"  e.compute_at(y, j);\n"
		"}\n"
		"fusion b(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  t[i, j] = x[i, j] + 1.0;\n"
		"  u[i, j] = t[i, 0] * t[i, j];\n"
		"  y[i, j] = u[i, j] + t[i, j];\n"
		"}\n"
		"schedule b {\n"
		"  u.compute_at(y, j);\n"
		"  t.compute_at(y, j);\n"
		"}\n"
		"fusion c(x: f32[N, M]) -> (y: f32[N, M]) {\n"
		"  r[j] = sum(i: x[j, i]);\n"
		"  t = sum(j: r[j]);\n"
		"  y[j, i] = t - r[j] + x[j, i];\n"
		"}\n"
		"schedule c {\n"
		"  t.compute_at(y, j);\n"
		"}\n"
		"fusion d(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		"  e[i, j] = x[i, j] * 2.0;\n"
		"  s[i] = sum(j: e[i, j]);\n"
		"  y[i, j] = e[i, j] - s[i];\n"
		"}\n"
		"schedule d {\n"
		"  y.split(j, 4) -> (jo, ji);\n"
		"  s.compute_at(y, jo);\n"
		"  e.compute_at(y, jo);\n"
		"}\n",
		"t.fus:8:3: error: 'e' is computed inside loop 'j' of 'y', where it holds the elements of one iteration, but 's' reads it at other elements there\n"
		"t.fus:7:3: note: 's' is computed at 'y.j' here\n"
		"t.fus:17:3: error: 't' is computed inside loop 'j' of 'y', where it holds the elements of one iteration, but 'u' reads it at other elements there\n"
		"t.fus:16:3: note: 'u' is computed at 'y.j' here\n"
		"t.fus:20:3: error: 'r' is computed inside loop 'j' of 'y', where it holds the elements of one iteration, but 't' reads it at other elements there\n"
		"t.fus:25:3: note: 't' is computed at 'y.j' here\n"
		"t.fus:35:3: error: 'e' is computed inside loop 'jo' of 'y', where it holds the elements of one iteration, but 's' reads it at other elements there\n"
		"t.fus:34:3: note: 's' is computed at 'y.jo' here\n");
	/* the readers follow e's loops (the same split, the same row): accepted */
	TestFrontend r = tf_compile("fusion ok(x: f32[M, N]) -> (y: f32[M, N]) {\n"
				    "  e[i, j] = x[i, j] * 2.0;\n"
				    "  t[i, j] = e[i, j] + 1.0;\n"
				    "  s[i] = sum(j: e[i, j]);\n"
				    "  y[i, j] = e[i, j] * t[i, j] - s[i];\n"
				    "}\n"
				    "schedule ok {\n"
				    "  y.split(j, 4) -> (jo, ji);\n"
				    "  s.compute_at(y, i);\n"
				    "  t.compute_at(y, jo);\n"
				    "  e.compute_at(y, i);\n"
				    "}\n",
				    true);
	ck_assert_str_eq(r.errors, "");
	tf_free(&r);
	r = tf_compile("fusion ok(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		       "  e[i, j] = x[i, j] * 2.0;\n"
		       "  t[i, j] = e[i, j] + 1.0;\n"
		       "  y[i, j] = e[i, j] * t[i, j];\n"
		       "}\n"
		       "schedule ok {\n"
		       "  y.split(j, 4) -> (jo, ji);\n"
		       "  t.compute_at(y, jo);\n"
		       "  e.compute_at(y, jo);\n"
		       "}\n",
		       true);
	ck_assert_str_eq(r.errors, "");
	tf_free(&r);
}
END_TEST

/* Two readers that use different index names in the same order are accepted; the cache takes
 * the first reader's names, sits before the first reader in definition order, and every read
 * of x is now a read of the cache (readers lists follow). w is recomputed in z, so both read
 * the cache inside z.j. */
START_TEST(test_cache_after_structure)
{
	const char *text =
		"fusion f(x: f32[8, 16]) -> (z: f32[8, 16]) {\n"
		"  w[p, q] = x[p, q] + 1.0;\n"
		"  z[i, j] = x[i, j] * x[i, j] + w[i, j];\n"
		"}\n"
		"schedule f {\n"
		"  xs = x.cache_after(local);\n"
		"  xs.compute_at(z, j);\n"
		"}\n";
	Diag *d = diag_new();
	int file = diag_add_file(d, "t.fus", text, strlen(text));
	Arena *a = arena_new();
	Program *p = compile_program(a, d, file);
	ck_assert_int_eq(diag_error_count(d), 0);
	Fusion *f = p->fusions[0];
	ck_assert_int_eq(f->ntensors, 4);
	const char *order[] = {"x", "xs", "w", "z"};
	for (int i = 0; i < 4; i++) {
		ck_assert_str_eq(f->tensors[i]->name, order[i]);
		ck_assert_int_eq(f->tensors[i]->index, i);
	}
	Tensor *x = f->tensors[0], *xs = f->tensors[1], *w = f->tensors[2], *z = f->tensors[3];
	ck_assert_ptr_eq(xs->sched.cache_of, x);
	ck_assert(!xs->sched.cache_before);
	ck_assert_int_eq(xs->sched.mem, MEM_LOCAL);
	ck_assert_int_eq(xs->kind, TK_INTERMEDIATE);
	ck_assert(!xs->sched.inlined);
	ck_assert_ptr_eq(xs->sched.ca_tensor, z);
	ck_assert_int_eq(xs->sched.ca_pos, 1);
	ck_assert_int_eq(x->readers.len, 1);
	ck_assert_ptr_eq(VEC_AT(x->readers, Tensor, 0), xs);
	ck_assert_int_eq(xs->readers.len, 2);
	ck_assert_ptr_eq(VEC_AT(xs->readers, Tensor, 0), w);
	ck_assert_ptr_eq(VEC_AT(xs->readers, Tensor, 1), z);
	Buf b = {0};
	ir_print_expr(z->def, &b);
	buf_puts(&b, " | ");
	ir_print_expr(w->def, &b);
	buf_puts(&b, " | ");
	ir_print_expr(xs->def, &b);
	ck_assert_str_eq(b.s, "xs[i, j] * xs[i, j] + w[i, j] | xs[p, q] + 1.0 | x[i, j]");
	buf_free(&b);
	diag_free(d);
	arena_free(a);
}
END_TEST

/* compute_at of a tensor that already has another tensor computed at it would replay
 * transforms on shared axes: rejected. */
START_TEST(test_err_compute_at_order)
{
	check_errors(
		"fusion f(x: f32[64]) -> (y: f32[64]) {\n"
		"  y[i] = x[i] + 1.0;\n"
		"}\n"
		"schedule f {\n"
		"  xs = x.cache_after(shared);\n"
		"  xl = xs.cache_after(local);\n"
		"  y.split(i, 16) -> (io, ii);\n"
		"  xs.compute_at(xl, i);\n"
		"  xl.compute_at(y, io);\n"
		"}\n",
		"t.fus:9:3: error: compute_at of 'xl' must come before 'xs' is computed at it\n"
		"t.fus:8:3: note: 'xs' is computed at 'xl' here\n");
}
END_TEST

Suite *caches_suite(void)
{
	Suite *s = suite_create("caches");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_cache_after_cp_async_stages);
	tcase_add_test(tc, test_default_placement);
	tcase_add_test(tc, test_cache_before_reduction);
	tcase_add_test(tc, test_cache_chain_inlined_reader);
	tcase_add_test(tc, test_err_cache_after_before);
	tcase_add_test(tc, test_cache_after_constants);
	tcase_add_test(tc, test_err_cp_async_stages);
	tcase_add_test(tc, test_err_end_of_schedule);
	tcase_add_test(tc, test_err_placement);
	tcase_add_test(tc, test_err_reader_outside_loop);
	tcase_add_test(tc, test_err_reader_other_elements);
	tcase_add_test(tc, test_cache_after_structure);
	tcase_add_test(tc, test_err_compute_at_order);
	suite_add_tcase(s, tc);
	return s;
}
