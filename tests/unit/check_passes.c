/* check_passes.c: the lowering passes, through the real front end: exact kernel IR after
 * specific passes (`--dump-after`) for the shapes that matter: the README.md saxpy schedule, a
 * non-divisible 2-D split with a broadcast, a transpose through a merge, a serial reduction,
 * a max reduction computed at its reader (NaN-propagating), a local buffer computed at a
 * split loop, 0-d outputs, partially used parallel dims; plus the pass manager's options. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

/* Compiles `src` and lowers its first fusion with the verifier on; returns the dump after
 * `pass` (without the "// ---- after" line), or the rendered diagnostics when it fails.
 * Caller frees. */
static char *lower_dump(const char *src, const char *pass)
{
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, "t.fus", src, strlen(src));
	Program *p = compile_program(a, d, file);
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	LowerOptions o = {.arch = 80, .verify = true, .dump_after = pass, .dump_out = out};
	Kernel *k = p ? lower_fusion(a, d, p->fusions[0], &o) : NULL;
	fclose(out);
	char *result;
	if (!k) {
		result = diag_render(d);
		free(text);
	} else {
		char *nl = strchr(text, '\n');
		result = xstrdup(nl ? nl + 1 : text);
		free(text);
	}
	diag_free(d);
	arena_free(a);
	return result;
}

#define ASSERT_DUMP(src, pass, expected)                     \
	do {                                                 \
		char *got_ = lower_dump((src), (pass));      \
		ck_assert_str_eq(got_, (expected));          \
		free(got_);                                  \
	} while (0)

START_TEST(saxpy_loop_nest)
{
	ASSERT_DUMP(test_saxpy_src, "loop_nest",
		    "kernel saxpy_kernel grid(ceildiv(N, 1024)) block(256) {\n"
		    "  // nest of z\n"
		    "  for iv in [0, 4) vectorize {\n"
		    "    z[blockIdx.x * 1024 + threadIdx.x * 4 + iv] = a * x[blockIdx.x * 1024 + threadIdx.x * 4 + iv] + y[blockIdx.x * 1024 + threadIdx.x * 4 + iv];\n"
		    "  }\n"
		    "}\n");
}
END_TEST

/* The passes find a tensor's statements by its KS_NEST marker (not by a comment): one per
 * top-level nest and one per computed-at tensor, in that order, each naming its tensor. */
static void markers(Stmt *s, Buf *out)
{
	for (; s; s = s->next) {
		if (s->kind == KS_NEST)
			buf_printf(out, "%s:%s;", s->note.tensor->name, s->note.text);
		ck_assert(s->kind != KS_COMMENT || !s->note.tensor);
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			markers(*lists[i], out);
	}
}

START_TEST(nest_markers)
{
	TestCompile *tc = tc_lowered(
		"fusion f(x: f32[N]) -> (y: f32[N]) { t[i] = x[i] * 2.0; y[i] = t[i] + 1.0; }\n"
		"schedule f { y.split(i, 32) -> (io, ii); t.compute_at(y, io); }\n");
	Buf b = {0};
	markers(tc->kernels[0]->body, &b);
	ck_assert_str_eq(b.s, "y:nest of y;t:t computed at y.io;");
	buf_free(&b);
	tc_free(tc);
}
END_TEST

START_TEST(saxpy_indexing)
{
	/* a symbolic N always keeps its bound */
	ASSERT_DUMP(test_saxpy_src, "indexing",
		    "kernel saxpy_kernel grid(ceildiv(N, 1024)) block(256) {\n"
		    "  // nest of z\n"
		    "  for iv in [0, 4) vectorize {\n"
		    "    if (blockIdx.x * 1024 + threadIdx.x * 4 + iv < N) {\n"
		    "      z[blockIdx.x * 1024 + threadIdx.x * 4 + iv] = a * x[blockIdx.x * 1024 + threadIdx.x * 4 + iv] + y[blockIdx.x * 1024 + threadIdx.x * 4 + iv];\n"
		    "    }\n"
		    "  }\n"
		    "}\n");
}
END_TEST

START_TEST(split_2d_broadcast)
{
	/* 33 = 3 * 11 needs no predicate on i; 10 is not a multiple of 4: j is predicated */
	ASSERT_DUMP("fusion add2(x: f32[33, 10], b: f32[10]) -> (z: f32[33, 10]) {\n"
		    "  z[i, j] = x[i, j] + b[j];\n"
		    "}\n"
		    "schedule add2 {\n"
		    "  z.split(i, 11) -> (io, ii);\n"
		    "  z.split(j, 4) -> (jo, ji);\n"
		    "  z.bind(io, blockIdx.x);\n"
		    "  z.bind(ii, threadIdx.x);\n"
		    "  z.unroll(ji);\n"
		    "}\n",
		    "simplify",
		    "kernel add2_kernel grid(3) block(11) {\n"
		    "  // nest of z\n"
		    "  for jo in [0, 3) {\n"
		    "    for ji in [0, 4) unroll {\n"
		    "      if (jo * 4 + ji < 10) {\n"
		    "        z[blockIdx.x * 110 + threadIdx.x * 10 + jo * 4 + ji] = x[blockIdx.x * 110 + threadIdx.x * 10 + jo * 4 + ji] + b[jo * 4 + ji];\n"
		    "      }\n"
		    "    }\n"
		    "  }\n"
		    "}\n");
}
END_TEST

START_TEST(no_predicate_when_divisible)
{
	char *got = lower_dump("fusion divisible(x: f32[1024]) -> (z: f32[1024]) {\n"
			       "  z[i] = x[i] + 1.0;\n"
			       "}\n"
			       "schedule divisible {\n"
			       "  z.split(i, 128) -> (io, ii);\n"
			       "  z.bind(io, blockIdx.x);\n"
			       "  z.bind(ii, threadIdx.x);\n"
			       "}\n",
			       "predicate");
	ck_assert_str_eq(got, "kernel divisible_kernel grid(8) block(128) {\n"
			      "  // nest of z\n"
			      "  z[blockIdx.x * 128 + threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x] + 1.0;\n"
			      "}\n");
	ck_assert_not_contains(got, "if (");
	free(got);
}
END_TEST

START_TEST(nested_split_predicate)
{
	/* issue 11 item 1: ji = jio * 3 + jii reaches 8 >= 7, the element (jo + 1, 0): the
	 * accumulation needs its own bound besides the root's, or padding enters the sum twice */
	char *got = lower_dump("fusion rs(x: f32[M, N]) -> (s: f32[M]) { s[i] = sum(j: x[i, j]); }\n"
			       "schedule rs { s.split(j, 7) -> (jo, ji); s.split(ji, 3) -> (jio, jii);\n"
			       "  s.bind(i, blockIdx.x); }\n",
			       "predicate");
	ck_assert_contains(got, "if (blockIdx.x < M && jo * 7 + jio * 3 + jii < N && "
				"jio * 3 + jii < 7) {\n          s_acc = s_acc + x[");
	free(got);
	/* a merge of the remainder: ii = m / N may reach 5 */
	got = lower_dump("fusion mg(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j]; }\n"
			 "schedule mg { y.split(i, 5) -> (io, ii); y.merge(ii, j) -> m;\n"
			 "  y.split(m, 4) -> (mo, mi); y.bind(io, blockIdx.x); y.bind(mi, threadIdx.x); }\n",
			 "predicate");
	ck_assert_contains(got, "(mo * 4 + threadIdx.x) / N < 5");
	free(got);
	/* outer remainders need nothing of their own: the root bound covers them */
	got = lower_dump("fusion so(x: f32[N]) -> (y: f32[N]) { y[i] = x[i]; }\n"
			 "schedule so { y.split(i, 7) -> (io, ii); y.split(io, 3) -> (ioo, ioi); }\n",
			 "predicate");
	ck_assert_contains(got, "if (ioo * 21 + ioi * 7 + ii < N) {");
	ck_assert_not_contains(got, "&&");
	free(got);
}
END_TEST

START_TEST(merged_pair_bound)
{
	/* a merge of two whole dimensions: x[q / N, q % N] is in bounds where q < M * N, one
	 * comparison and no division per lane (collapsed axes) */
	char *got = lower_dump("fusion mp(x: f32[B, M, N]) -> (s: f32[B]) {\n"
			       "  s[b] = sum(i, j: x[b, i, j]);\n}\n"
			       "schedule mp { s.merge(i, j) -> q; s.split(q, 128) -> (qo, tx);\n"
			       "  s.bind(b, blockIdx.x); s.bind(tx, threadIdx.x); }\n",
			       "predicate");
	ck_assert_contains(got, "if (blockIdx.x < B && qo * 128 + threadIdx.x < M * N) {");
	ck_assert_not_contains(got, "/ N < M");
	free(got);
	/* the pair must be the row and column of the same index over the tensor's own extent */
	got = lower_dump("fusion np(x: f32[M, N], y: f32[M, N]) -> (z: f32[M, N]) {\n"
			 "  z[i, j] = x[i, j] + y[i, j];\n}\n"
			 "schedule np { z.merge(i, j) -> q; z.split(q, 7) -> (qo, qi);\n"
			 "  z.bind(qo, blockIdx.x); }\n",
			 "predicate");
	ck_assert_contains(got, "blockIdx.x * 7 + qi < M * N");
	free(got);
}
END_TEST

START_TEST(nested_split_divisible)
{
	/* 8 = 2 * 4 and 64 = 8 * 8: every bound is proved, nothing is predicated */
	char *got = lower_dump("fusion nd(x: f32[64]) -> (y: f32[64]) { y[i] = x[i]; }\n"
			       "schedule nd { y.split(i, 8) -> (io, ii); y.split(ii, 4) -> (iio, iii);\n"
			       "  y.bind(io, blockIdx.x); y.bind(iii, threadIdx.x); }\n",
			       "predicate");
	ck_assert_not_contains(got, "if (");
	free(got);
}
END_TEST

START_TEST(transpose_merge)
{
	/* the merged index reads back as itself; the inner bound m % M < M is dropped, and the
	 * row bound m / M < N is m < N * M (merged_pair_bound) */
	ASSERT_DUMP("fusion tr(x: f32[M, N]) -> (y: f32[N, M]) {\n"
		    "  y[i, j] = x[j, i];\n"
		    "}\n"
		    "schedule tr {\n"
		    "  y.merge(i, j) -> m;\n"
		    "  y.split(m, 128) -> (mo, mi);\n"
		    "  y.bind(mo, blockIdx.x);\n"
		    "  y.bind(mi, threadIdx.x);\n"
		    "}\n",
		    "simplify",
		    "kernel tr_kernel grid(ceildiv(N * M, 128)) block(128) {\n"
		    "  // nest of y\n"
		    "  if (blockIdx.x * 128 + threadIdx.x < N * M) {\n"
		    "    y[blockIdx.x * 128 + threadIdx.x] = x[(blockIdx.x * 128 + threadIdx.x) % M * N + (blockIdx.x * 128 + threadIdx.x) / M];\n"
		    "  }\n"
		    "}\n");
}
END_TEST

START_TEST(serial_reduction)
{
	ASSERT_DUMP("fusion rs(x: f32[M, N]) -> (s: f32[M]) {\n"
		    "  s[i] = sum(j: x[i, j]);\n"
		    "}\n"
		    "schedule rs {\n"
		    "  s.split(i, 128) -> (io, ii);\n"
		    "  s.bind(io, blockIdx.x);\n"
		    "  s.bind(ii, threadIdx.x);\n"
		    "}\n",
		    "simplify",
		    "kernel rs_kernel grid(ceildiv(M, 128)) block(128) {\n"
		    "  local f32 s_acc;\n"
		    "  // nest of s\n"
		    "  s_acc = 0.0;\n"
		    "  for j in [0, N) {\n"
		    "    if (blockIdx.x * 128 + threadIdx.x < M) {\n"
		    "      s_acc = s_acc + x[(blockIdx.x * 128 + threadIdx.x) * N + j];\n"
		    "    }\n"
		    "  }\n"
		    "  if (blockIdx.x * 128 + threadIdx.x < M) {\n"
		    "    s[blockIdx.x * 128 + threadIdx.x] = s_acc;\n"
		    "  }\n"
		    "}\n");
}
END_TEST

START_TEST(max_computed_at)
{
	/* the max keeps NaN; the value and the accumulation share one predicate */
	ASSERT_DUMP("fusion nm(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		    "  m[i] = max(j: x[i, j]);\n"
		    "  y[i, j] = x[i, j] - m[i];\n"
		    "}\n"
		    "schedule nm {\n"
		    "  y.split(i, 128) -> (io, ii);\n"
		    "  y.bind(io, blockIdx.x);\n"
		    "  y.bind(ii, threadIdx.x);\n"
		    "  m.compute_at(y, ii);\n"
		    "}\n",
		    "simplify",
		    "kernel nm_kernel grid(ceildiv(M, 128)) block(128) {\n"
		    "  local f32 m_acc;\n"
		    "  local f32 m_v;\n"
		    "  // nest of y\n"
		    "  alloc local f32 m[1];\n"
		    "  // m computed at y.ii\n"
		    "  m_acc = -inf;\n"
		    "  for j in [0, N) {\n"
		    "    if (blockIdx.x * 128 + threadIdx.x < M) {\n"
		    "      m_v = x[(blockIdx.x * 128 + threadIdx.x) * N + j];\n"
		    "      m_acc = m_v > m_acc || m_v != m_v ? m_v : m_acc;\n"
		    "    }\n"
		    "  }\n"
		    "  m[0] = m_acc;\n"
		    "  for j_1 in [0, N) {\n"
		    "    if (blockIdx.x * 128 + threadIdx.x < M) {\n"
		    "      y[(blockIdx.x * 128 + threadIdx.x) * N + j_1] = x[(blockIdx.x * 128 + threadIdx.x) * N + j_1] - m[0];\n"
		    "    }\n"
		    "  }\n"
		    "}\n");
}
END_TEST

static const char *ca_src =
	"fusion ca(x: f32[N]) -> (z: f32[N]) {\n"
	"  t[i] = exp(x[i]);\n"
	"  z[i] = t[i] * 2.0;\n"
	"}\n"
	"schedule ca {\n"
	"  z.split(i, 4) -> (io, ii);\n"
	"  z.split(io, 64) -> (ib, it);\n"
	"  z.bind(ib, blockIdx.x);\n"
	"  z.bind(it, threadIdx.x);\n"
	"  t.compute_at(z, it);\n"
	"}\n";

START_TEST(compute_at_local_buffer)
{
	/* t's buffer is indexed by its own inner loop: (...* 4 + ii) % 4 -> ii */
	ASSERT_DUMP(ca_src, "simplify",
		    "kernel ca_kernel grid(ceildiv(N, 256)) block(64) {\n"
		    "  // nest of z\n"
		    "  alloc local f32 t[4];\n"
		    "  // t computed at z.it\n"
		    "  for ii in [0, 4) {\n"
		    "    if (blockIdx.x * 256 + threadIdx.x * 4 + ii < N) {\n"
		    "      t[ii] = exp(x[blockIdx.x * 256 + threadIdx.x * 4 + ii]);\n"
		    "    }\n"
		    "  }\n"
		    "  for ii_1 in [0, 4) {\n"
		    "    if (blockIdx.x * 256 + threadIdx.x * 4 + ii_1 < N) {\n"
		    "      z[blockIdx.x * 256 + threadIdx.x * 4 + ii_1] = t[ii_1] * 2.0;\n"
		    "    }\n"
		    "  }\n"
		    "}\n");
}
END_TEST

START_TEST(compute_at_logical_before_indexing)
{
	char *got = lower_dump(ca_src, "loop_nest");
	ck_assert_contains(got, "t[blockIdx.x * 256 + threadIdx.x * 4 + ii] = exp(x[blockIdx.x * 256 + threadIdx.x * 4 + ii]);");
	ck_assert_not_contains(got, "alloc");
	free(got);
}
END_TEST

START_TEST(zero_d_output_beside_parallel)
{
	/* the 0-d reduction is computed and written by the first thread only; the grid keeps a
	 * block for it when N = 0 (so z's threads test their block against z's extent: the
	 * predicate pass's `blockIdx.x < ceildiv(N, 128)` follows from the flat bound, and the
	 * simplify pass drops it) */
	ASSERT_DUMP("fusion two(x: f32[N]) -> (z: f32[N], total: f32) {\n"
		    "  z[i] = x[i] * 2.0;\n"
		    "  total = sum(i: x[i]);\n"
		    "}\n"
		    "schedule two {\n"
		    "  z.split(i, 128) -> (io, ii);\n"
		    "  z.bind(io, blockIdx.x);\n"
		    "  z.bind(ii, threadIdx.x);\n"
		    "}\n",
		    "simplify",
		    "kernel two_kernel grid(max(ceildiv(N, 128), 1)) block(128) {\n"
		    "  local f32 total_acc;\n"
		    "  // nest of z\n"
		    "  if (blockIdx.x * 128 + threadIdx.x < N) {\n"
		    "    z[blockIdx.x * 128 + threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x] * 2.0;\n"
		    "  }\n"
		    "  // nest of total\n"
		    "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
		    "    total_acc = 0.0;\n"
		    "    for i in [0, N) {\n"
		    "      total_acc = total_acc + x[i];\n"
		    "    }\n"
		    "    total[0] = total_acc;\n"
		    "  }\n"
		    "}\n");
}
END_TEST

START_TEST(partial_launch_dims)
{
	/* y uses 64 of 128 threads and no block index: both get predicates */
	ASSERT_DUMP("fusion rw(x: f32[64], w: f32[4096]) -> (y: f32[64], v: f32[4096]) {\n"
		    "  y[i] = x[i] + 1.0;\n"
		    "  v[i] = w[i] * 3.0;\n"
		    "}\n"
		    "schedule rw {\n"
		    "  y.bind(i, threadIdx.x);\n"
		    "  v.split(i, 128) -> (io, ii);\n"
		    "  v.bind(io, blockIdx.x);\n"
		    "  v.bind(ii, threadIdx.x);\n"
		    "}\n",
		    "simplify",
		    "kernel rw_kernel grid(32) block(128) {\n"
		    "  // nest of y\n"
		    "  if (blockIdx.x == 0) {\n"
		    "    if (threadIdx.x < 64) {\n"
		    "      y[threadIdx.x] = x[threadIdx.x] + 1.0;\n"
		    "    }\n"
		    "  }\n"
		    "  // nest of v\n"
		    "  v[blockIdx.x * 128 + threadIdx.x] = w[blockIdx.x * 128 + threadIdx.x] * 3.0;\n"
		    "}\n");
}
END_TEST

START_TEST(inline_recomputes_outputs)
{
	/* t is inlined; the output u read by v is recomputed, never read back */
	char *got = lower_dump("fusion f(x: f32[256]) -> (u: f32[256], v: f32[256]) {\n"
			       "  t[i] = x[i] + 1.0;\n"
			       "  u[i] = t[i] * t[i];\n"
			       "  v[i] = u[i] - 2.0;\n"
			       "}\n"
			       "schedule f {\n"
			       "  u.bind(i, threadIdx.x);\n"
			       "  v.bind(i, threadIdx.x);\n"
			       "}\n",
			       "simplify");
	ck_assert_contains(got, "u[threadIdx.x] = (x[threadIdx.x] + 1.0) * (x[threadIdx.x] + 1.0);");
	ck_assert_contains(got, "v[threadIdx.x] = (x[threadIdx.x] + 1.0) * (x[threadIdx.x] + 1.0) - 2.0;");
	free(got);
}
END_TEST

START_TEST(recompute_rounds_to_dtype)
{
	/* A recomputed output is rounded to its declared dtype as its store is (issue 11, fuzzer
	 * F2): v reads u's f16 values and w reads g's bf16 values of u's f16 ones, never the f32
	 * expressions. */
	char *got = lower_dump("fusion f(x: f32[256]) -> (u: f16[256], g: bf16[256], v: f32[256], w: f32[256]) {\n"
			       "  u[i] = x[i] * 1.37;\n"
			       "  g[i] = u[i] + 1.0;\n"
			       "  v[i] = u[i] - 2.0;\n"
			       "  w[i] = g[i] * 3.0;\n"
			       "}\n"
			       "schedule f {\n"
			       "  u.bind(i, threadIdx.x);\n"
			       "  g.bind(i, threadIdx.x);\n"
			       "  v.bind(i, threadIdx.x);\n"
			       "  w.bind(i, threadIdx.x);\n"
			       "}\n",
			       "simplify");
	ck_assert_contains(got, "v[threadIdx.x] = f16(x[threadIdx.x] * 1.37) - 2.0;");
	ck_assert_contains(got, "w[threadIdx.x] = bf16(f16(x[threadIdx.x] * 1.37) + 1.0) * 3.0;");
	free(got);
}
END_TEST

START_TEST(dump_and_time_options)
{
	TestCompile *tc = tc_compile(test_saxpy_src, false);
	ck_assert_ptr_nonnull(tc->prog);
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	LowerOptions o = {.arch = 80, .dump_after = "all", .dump_out = out, .time_passes = true};
	ck_assert_ptr_nonnull(lower_fusion(tc->arena, tc->diag, tc->prog->fusions[0], &o));
	fclose(out);
	int dumps = 0, times = 0;
	for (char *p = text; (p = strstr(p, "// ---- after ")); p++)
		dumps++;
	for (char *p = text; (p = strstr(p, "saxpy: pass ")); p++)
		times++;
	ck_assert_int_eq(dumps, pass_count);
	ck_assert_int_eq(times, pass_count);
	ck_assert_contains(text, "// ---- after loop_nest ----\nkernel saxpy_kernel");
	free(text);
	tc_free(tc);
	ck_assert(pass_exists("predicate"));
	ck_assert(pass_exists("all"));
	ck_assert(!pass_exists("nope"));
	ck_assert_str_eq(pass_list[0].name, "loop_nest");
	ck_assert_str_eq(pass_list[pass_count - 1].name, "raster");
}
END_TEST

/* private_local: shared memory is private to a block (issue 11). A shared tensor whose own
 * axis is bound to blockIdx.y is an error when a block reads elements outside its own part
 * (a serial reader loop over them, or blockIdx.y on another part of the index); the same
 * binding on both sides is accepted, and the buffer holds one block's part. */
START_TEST(shared_private_to_block)
{
	const char *head = "fusion f(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j] * 2.0; }\n"
			   "schedule f {\n"
			   "  y.bind(i, blockIdx.x); y.split(j, 8) -> (jo, jt); y.bind(jt, threadIdx.x);\n"
			   "  xs = x.cache_after(shared); xs.compute_at(y, i);\n"
			   "  xs.split(j, 8) -> (jo, jt); xs.bind(jo, blockIdx.y); xs.bind(jt, threadIdx.x);\n";
	Buf b = {0};
	buf_printf(&b, "%s}\n", head);
	char *got = lower_dump(b.s, "loop_nest");
	ck_assert_contains(got, "t.fus:4:3: error: 'xs' is in shared memory, but 'y' reads elements "
				"of it that other blocks wrote ('xs.jo' is bound to blockIdx.y)\n");
	ck_assert_contains(got, "t.fus:5:31: note: 'xs' is spread over blockIdx.y here\n");
	ck_assert_contains(got, "note: each block has its own registers and shared memory: bind the "
				"reader's loop over these elements to blockIdx.y the same way, or leave "
				"'xs.jo' unbound so that every block computes what it reads\n");
	free(got);
	buf_free(&b);
	/* the reader's blocks over the same chunks: legal, one block's chunk in the buffer */
	b = (Buf){0};
	buf_printf(&b, "%s  y.bind(jo, blockIdx.y);\n}\n", head);
	got = lower_dump(b.s, "simplify");
	ck_assert_contains(got, "alloc shared f32 xs[8];\n");
	ck_assert_contains(got, "xs[threadIdx.x] = x[blockIdx.x * N + blockIdx.y * 8 + threadIdx.x];\n");
	free(got);
	buf_free(&b);
	/* blockIdx.y on both sides, but on i % 2 in the writer and i / 2 in the reader */
	got = lower_dump("fusion g(x: f32[6, N]) -> (y: f32[6, N]) { y[i, j] = x[i, j] * 2.0; }\n"
			 "schedule g {\n"
			 "  y.split(j, 8) -> (jo, jt); y.reorder(jo, i, jt); y.bind(jt, threadIdx.x);\n"
			 "  y.bind(jo, blockIdx.x); y.split(i, 2) -> (io, ii); y.bind(io, blockIdx.y);\n"
			 "  xs = x.cache_after(shared); xs.compute_at(y, jo);\n"
			 "  xs.split(i, 2) -> (a, c); xs.bind(c, blockIdx.y);\n"
			 "}\n",
			 "loop_nest");
	ck_assert_contains(got, "error: 'xs' is in shared memory, but 'y' reads elements of it that "
				"other blocks wrote ('xs.c' is bound to blockIdx.y)\n");
	free(got);
	/* threads of one block share it: xs spread over threadIdx.x in fives, read in eights */
	got = lower_dump("fusion h(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j] * 2.0; }\n"
			 "schedule h {\n"
			 "  y.bind(i, blockIdx.x); y.split(j, 8) -> (jo, jt); y.bind(jt, threadIdx.x);\n"
			 "  xs = x.cache_after(shared); xs.compute_at(y, jo);\n"
			 "  xs.split(jt, 5) -> (a, c); xs.bind(c, threadIdx.x);\n"
			 "}\n",
			 "simplify");
	ck_assert_not_contains(got, "error");
	ck_assert_contains(got, "__syncthreads();\n");
	free(got);
}
END_TEST

/* circular_buffer: a buffered cache computed at a loop of another buffered cache's load nest
 * (issue 11). The outer (xl, over ioo) is buffered first; its load nest, xs's included, is
 * copied into the prologue and the main loop, and xs is buffered in each copy: its own
 * prologue, and reads of its slot ioi % 2. */
START_TEST(buffered_cache_of_buffered_cache)
{
	char *got = lower_dump("fusion q(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0; }\n"
			       "schedule q {\n"
			       "  y.split(i, 8) -> (io, ii); y.split(io, 3) -> (ioo, ioi);\n"
			       "  xs = x.cache_after(shared);\n"
			       "  xl = xs.cache_after(local); xl.compute_at(y, ioo); xl.stages(2);\n"
			       "  xs.compute_at(xl, ioi); xs.stages(2);\n"
			       "}\n",
			       "circular_buffer");
	/* the outer prologue: stage 0 of xl, with xs buffered inside it */
	ck_assert_contains(got, "  if (0 < ceildiv(N, 24)) {\n"
				"    // xs computed at xl.ioi\n"
				"    if (true) {\n"
				"      for ii in [0, 8) {\n"
				"        if (ii < N) {\n"
				"          xs[ii] = x[ii];\n");
	ck_assert_contains(got, "          xl[ioi * 8 + ii_1] = xs[ii_1 + ioi % 2 * 8];\n");
	/* the main loop's load of stage ioo + 1, xs buffered again */
	ck_assert_contains(got, "    if (ioo + 1 < ceildiv(N, 24)) {\n"
				"      // xs computed at xl.ioi\n"
				"      if (true) {\n");
	ck_assert_contains(got, "            xl[ioi * 8 + ii_1 + (ioo + 1) % 2 * 24] = xs[ii_1 + ioi % 2 * 8];\n");
	ck_assert_contains(got, "y[ioo * 24 + ioi_1 * 8 + ii_2] = xl[ioi_1 * 8 + ii_2 + ioo % 2 * 24] * 2.0;\n");
	free(got);
}
END_TEST

/* indexing, redundant_write: a shared tensor computed inside its consumer's loop bound to
 * threadIdx.x (issue 11) holds an element per thread (the block shares the buffer), and each
 * thread stores its own, also when that loop is the consumer's reduction: no `threadIdx.x ==
 * 0` (the cache's axis is no reduction of its own). */
START_TEST(shared_inside_thread_loop)
{
	char *got = lower_dump("fusion pw(x: f32[M, N]) -> (y: f32[M, N]) { y[i, j] = x[i, j] * 2.0 + 1.0; }\n"
			       "schedule pw { y.bind(i, blockIdx.x); y.split(j, 8) -> (jo, jt);\n"
			       "  y.bind(jt, threadIdx.x); xs = x.cache_after(shared); xs.compute_at(y, jt); }\n",
			       "simplify");
	ck_assert_contains(got, "    alloc shared f32 xs[8];\n");
	ck_assert_contains(got, "      xs[threadIdx.x] = x[blockIdx.x * N + jo * 8 + threadIdx.x];\n");
	ck_assert_contains(got, "= xs[threadIdx.x] * 2.0 + 1.0;\n");
	free(got);
	got = lower_dump("fusion br(x: f32[M, N]) -> (y: f32[M]) { y[i] = sum(j: x[i, j] * 0.5); }\n"
			 "schedule br { y.bind(i, blockIdx.x); y.split(j, 7) -> (jo, jt);\n"
			 "  y.bind(jt, threadIdx.x); xc = x.cache_after(shared); xc.compute_at(y, jt); }\n",
			 "simplify");
	ck_assert_contains(got, "    alloc shared f32 xc[7];\n");
	ck_assert_contains(got, "    if (blockIdx.x < M && jo * 7 + threadIdx.x < N) {\n"
				"      xc[threadIdx.x] = x[blockIdx.x * N + jo * 7 + threadIdx.x];\n");
	ck_assert_contains(got, "y_acc = y_acc + xc[threadIdx.x] * 0.5;\n");
	free(got);
}
END_TEST

/* private_local: who wrote an element, through nested non-divisible splits (issue 11, fuzzer
 * class F12). t's own ii (32) split by 7, its inner part b (7) by 9 and that outer part c
 * (extent 1) by 32, g bound to threadIdx.x: only g = 0 is in range, so thread 0 writes t[0..6]
 * and y's thread x reads t[x], another thread's registers. The position along g of what
 * either side touches simplifies to 0, which says nothing about who wrote it: an error. A
 * written schedule cannot split 1 by 32 (an error at the factor); a generated one, or the
 * directives applied one by one as here, can. */
static char *f12_lowered(bool split_past_extent)
{
	const char *src = "fusion f12(x: f32[M]) -> (y: f32[M]) { t[i] = x[i] * 2.0; y[i] = t[i] + 1.0; }\n"
			  "schedule f12 { y.split(i, 32) -> (io, ii); y.bind(ii, threadIdx.x);\n"
			  "  t.compute_at(y, io); t.split(ii, 7) -> (a, b); }\n";
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, "t.fus", src, strlen(src));
	Program *p = compile_program(a, d, file);
	ck_assert_msg(p != NULL, "front end failed");
	Fusion *f = p->fusions[0];
	Tensor *t = fusion_find_tensor(f, "t");
	Span at = t->span;
	ck_assert(sched_split(a, d, t, tensor_find_axis(t, "b"), split_past_extent ? 9 : 3, "c", "e", at));
	ck_assert(sched_split(a, d, t, tensor_find_axis(t, "c"), split_past_extent ? 32 : 2, "f", "g", at));
	ck_assert(sched_bind(f, d, t, tensor_find_axis(t, "g"), PT_TIDX, at));
	LowerOptions o = {.arch = 80, .verify = true};
	Kernel *k = lower_fusion(a, d, f, &o);
	char *got = k ? xstrdup("lowered") : diag_render(d);
	diag_free(d);
	arena_free(a);
	return got;
}

START_TEST(local_nested_nondivisible_thread_split)
{
	char *got = f12_lowered(true);
	ck_assert_contains(got, "error: 't' is a register (local) tensor, but 'y' reads elements of "
				"it that other threads wrote ('t.g' is bound to threadIdx.x)\n");
	free(got);
	got = f12_lowered(false);
	ck_assert_contains(got, "error: 't' is a register (local) tensor, but 'y' reads elements of "
				"it that other threads wrote ('t.g' is bound to threadIdx.x)\n");
	free(got);
}
END_TEST

/* passes/hoist.c: the transpose's merged block index is divided back into its tiles once,
 * at the top (two locals), and every load, store and predicate reads the locals. */
START_TEST(hoist_block_division)
{
	TestCompile *tc = tc_lowered("fusion t(x: f32[M, N]) -> (y: f32[N, M]) { y[j, i] = x[i, j]; }");
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "  local i64 rem;\n  local i64 quot;\n"
			       "  rem = blockIdx.x % max(ceildiv(M, 64), 1);\n"
			       "  quot = blockIdx.x / max(ceildiv(M, 64), 1);\n  // nest of y\n");
	const char *body = strstr(ir, "// nest of y");
	ck_assert_ptr_nonnull(body);
	ck_assert_not_contains(body, "blockIdx.x /");
	ck_assert_not_contains(body, "blockIdx.x %");
	ck_assert_contains(body, "if (quot * 32 + ar * 8 + threadIdx.y < N && rem * 64 + bh * 32 + threadIdx.x < M)");
	free(ir);
	tc_free(tc);
}
END_TEST

/* A hoisted division runs in every thread, also where its nest is empty and another output's
 * nest gives the grid its size (N = 0 beside K = 5000; N a multiple of the vector width the launcher requires): its divisor is at least 1, so the
 * simulator sees no division by zero (which the predicates' order once allowed). */
START_TEST(hoist_empty_nest)
{
	static const char *src =
		"fusion two(x: f32[M, N], b: f32[N], w: f32[K]) -> (y: f32[M, N], z: f32[K]) {\n"
		"  y[i, j] = x[i, j] + b[j];\n"
		"  z[k] = w[k] * 2.0;\n"
		"}\n";
	const char *dims[] = {"M=3,N=0,K=5000", "M=0,N=8,K=3000", "M=67,N=44,K=1", "M=1,N=4,K=0"};
	TestCompile *tc = expect_auto(src, dims, 4);
	char *ir = tc_kernel_ir(tc, 0);
	ck_assert_contains(ir, "quot = blockIdx.x / max(ceildiv(N, 2048), 1);");
	free(ir);
	tc_free(tc);
}
END_TEST

/* The simplify pass drops a conjunct that another one of the same condition implies (the
 * bound of a block index beside the flat bound it follows from, the outer bounds of a chain
 * of splits), keeps those nothing implies, keeps one of two equal ones, and leaves a condition
 * alone when a conjunct loads memory (`&&` stops before the load). Built by hand: the
 * goldens show the conditions the predicate pass really writes (two_extents, col_sum_grid,
 * mid_sum_vec_rfactor). */
static const char *simplified_cond(Kernel *k, Tensor *z, IrExpr *cond)
{
	Arena *a = k->arena;
	IrExpr *off = ir_int(a, 0);
	Stmt *st = kir_store(k, z, &off, 1, ir_float(a, DT_F32, 1));
	k->body = kir_if(k, cond, st, NULL);
	ck_assert(pass_simplify(k, NULL));
	ck_assert_int_eq(k->body->kind, KS_IF);
	Buf b = {0};
	ir_print_expr(k->body->branch.cond, &b);
	const char *r = arena_strdup(a, b.s);
	buf_free(&b);
	return r;
}

START_TEST(simplify_implied_conjuncts)
{
	Arena *a = arena_new();
	SizeSym n = {.name = "N"}, m = {.name = "M"};
	Tensor z = {.name = "z", .dtype = DT_F32, .ndim = 1, .kind = TK_OUTPUT};
	z.sched.mem = MEM_GLOBAL;
	Tensor *ts[] = {&z};
	Fusion f = {.name = "f", .tensors = ts, .ntensors = 1};
	Kernel *k = kir_new(a, &f);
	IrExpr *N = ir_size(a, &n), *M = ir_size(a, &m);
	IrExpr *bx = ir_par(a, PT_BIDX), *tx = ir_par(a, PT_TIDX);
	k->launch[PT_TIDX] = ir_int(a, 128);
	k->launch[PT_BIDX] = ix_ceildiv(a, NULL, N, ir_int(a, 64));
	IrExpr *flat = ix_add(a, ix_mul(a, bx, ir_int(a, 128)), tx);
	IrExpr *bx_in = ix_lt(a, bx, ix_ceildiv(a, NULL, N, ir_int(a, 128)));
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_lt(a, flat, N), bx_in)),
			 "blockIdx.x * 128 + threadIdx.x < N");
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_and(a, bx_in, ix_lt(a, flat, N)),
						       ix_lt(a, tx, ir_int(a, 64)))),
			 "blockIdx.x * 128 + threadIdx.x < N && threadIdx.x < 64");
	/* another size: nothing implied */
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_lt(a, flat, M), bx_in)),
			 "blockIdx.x * 128 + threadIdx.x < M && blockIdx.x < ceildiv(N, 128)");
	/* a chain of splits: i * 4 + u < ceildiv(N, 16) follows from i * 64 + u * 16 + x < N */
	Var *i = kir_new_var(k, "i", DT_I64), *u = kir_new_var(k, "u", DT_I64);
	i->extent = N;
	u->extent = ir_int(a, 4);
	IrExpr *iu = ix_add(a, ix_mul(a, ir_var(a, i), ir_int(a, 4)), ir_var(a, u));
	IrExpr *deep = ix_add(a, ix_mul(a, iu, ir_int(a, 16)), ix_mod(a, NULL, tx, ir_int(a, 16)));
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_lt(a, iu, ix_ceildiv(a, NULL, N, ir_int(a, 16))),
						       ix_lt(a, deep, N))),
			 "i * 64 + u * 16 + threadIdx.x % 16 < N");
	/* the other way round: (i * 4 + u) * 16 < N implies (i * 4 + u) * 8 < N, not more */
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_lt(a, ix_mul(a, iu, ir_int(a, 8)), N),
						       ix_lt(a, iu, ix_ceildiv(a, NULL, N, ir_int(a, 16))))),
			 "i * 4 + u < ceildiv(N, 16)");
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_lt(a, ix_mul(a, iu, ir_int(a, 8)), N),
						       ix_lt(a, iu, ix_ceildiv(a, NULL, M, ir_int(a, 16))))),
			 "i * 32 + u * 8 < N && i * 4 + u < ceildiv(M, 16)");
	/* two equal conjuncts: one stays */
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_lt(a, flat, N), ix_lt(a, flat, N))),
			 "blockIdx.x * 128 + threadIdx.x < N");
	/* a load after the bound it needs: left alone */
	IrExpr *ld = ix_lt(a, ir_cast(a, DT_I64, ir_load(a, &z, flat)), N);
	ck_assert_str_eq(simplified_cond(k, &z, ix_and(a, ix_and(a, bx_in, ld), ix_lt(a, flat, N))),
			 "blockIdx.x < ceildiv(N, 128) && i64(z[blockIdx.x * 128 + threadIdx.x]) < N && blockIdx.x * 128 + threadIdx.x < N");
	arena_free(a);
}
END_TEST

Suite *passes_suite(void)
{
	Suite *s = suite_create("passes");
	TCase *tc = tcase_create("lowering");
	tcase_add_test(tc, saxpy_loop_nest);
	tcase_add_test(tc, saxpy_indexing);
	tcase_add_test(tc, nest_markers);
	tcase_add_test(tc, split_2d_broadcast);
	tcase_add_test(tc, no_predicate_when_divisible);
	tcase_add_test(tc, merged_pair_bound);
	tcase_add_test(tc, nested_split_predicate);
	tcase_add_test(tc, nested_split_divisible);
	tcase_add_test(tc, transpose_merge);
	tcase_add_test(tc, serial_reduction);
	tcase_add_test(tc, max_computed_at);
	tcase_add_test(tc, compute_at_local_buffer);
	tcase_add_test(tc, compute_at_logical_before_indexing);
	tcase_add_test(tc, zero_d_output_beside_parallel);
	tcase_add_test(tc, partial_launch_dims);
	tcase_add_test(tc, inline_recomputes_outputs);
	tcase_add_test(tc, recompute_rounds_to_dtype);
	tcase_add_test(tc, dump_and_time_options);
	tcase_add_test(tc, shared_private_to_block);
	tcase_add_test(tc, local_nested_nondivisible_thread_split);
	tcase_add_test(tc, buffered_cache_of_buffered_cache);
	tcase_add_test(tc, shared_inside_thread_loop);
	tcase_add_test(tc, hoist_block_division);
	tcase_add_test(tc, hoist_empty_nest);
	tcase_add_test(tc, simplify_implied_conjuncts);
	suite_add_tcase(s, tc);
	return s;
}
