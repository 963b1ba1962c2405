/* check_scale.c: compile time stays near-linear in the program's size (issue 11 item 11).
 *
 * Each case builds a large program, compiles it through the whole pipeline (front end,
 * schedule, every pass with the verifier on, CUDA emission) and asserts that it compiles and,
 * in normal builds, that it takes less than a generous bound. Before the fix, 20 chained splits
 * took 7 s and 25 more than 10 minutes (the cp_wait and sync passes walked every loop body
 * twice, recursively: 2^depth), and 10^5 statements took minutes (a linear symbol lookup per
 * name in sema, a scan of every tensor per loop in loop_nest, per variable name, per buffer in
 * the CUDA emitter). Sanitizer builds run the same programs without the time bound.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define SAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define SAN_BUILD 1
#endif
#endif
#ifndef SAN_BUILD
#define SAN_BUILD 0
#endif

/* Seconds a case may take in a normal build: 10x what it takes on a loaded 2-core machine. */
#define SCALE_LIMIT_S 20.0

static int loop_depth(Stmt *s)
{
	int best = 0;
	for (; s; s = s->next) {
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++) {
			int d = loop_depth(*lists[i]) + (s->kind == KS_FOR);
			best = d > best ? d : best;
		}
	}
	return best;
}

/* Compiles src to CUDA; returns the seconds it took, and the kernel's loop depth in *depth. */
static double compile_time(const char *src, int *depth)
{
	double t0 = now_seconds();
	TestCompile *tc = tc_compile(src, true);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_str_eq(tc->diags, "");
	char *cu = tc_cuda(tc);
	double t = now_seconds() - t0;
	ck_assert_ptr_nonnull(strstr(cu, "__global__"));
	*depth = loop_depth(tc->kernels[0]->body);
	free(cu);
	tc_free(tc);
	return t;
}

static void assert_fast(double t, const char *what)
{
	if (!SAN_BUILD)
		ck_assert_msg(t < SCALE_LIMIT_S, "%s took %.1f s (limit %.0f s)", what, t, SCALE_LIMIT_S);
}

/* 200 chained splits: i -> (o0, i0), i0 -> (o1, i1), ...: 201 nested loops, each split's
 * remainder split again (a bound predicate per level), the outermost bound to blocks and the
 * innermost to threads. */
START_TEST(nested_loops_200)
{
	Buf b = {0};
	int depth;
	buf_puts(&b, "fusion deep(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0 + 1.0; }\n"
		     "schedule deep {\n");
	const char *prev = "i";
	char name[2][16];
	for (int k = 0; k < 200; k++) {
		snprintf(name[k % 2], sizeof name[0], "i%d", k);
		buf_printf(&b, "  y.split(%s, 2) -> (o%d, %s);\n", prev, k, name[k % 2]);
		prev = name[k % 2];
	}
	buf_printf(&b, "  y.bind(o0, blockIdx.x); y.bind(%s, threadIdx.x);\n}\n", prev);
	double t = compile_time(b.s, &depth);
	ck_assert_int_eq(depth, 199); /* 201 axes, two of them bound */
	assert_fast(t, "200 chained splits");
	buf_free(&b);
}
END_TEST

/* 10^5 statements: 1000 outputs, each the end of a chain of 100 pointwise statements (every
 * statement is inlined into its output, 100 levels deep), with default placement. */
START_TEST(statements_100000)
{
	Buf b = {0};
	int depth;
	buf_puts(&b, "fusion wide(x: f32[N]) -> (");
	for (int o = 0; o < 1000; o++)
		buf_printf(&b, "%sy%d: f32[N]", o ? ", " : "", o);
	buf_puts(&b, ") {\n");
	for (int o = 0; o < 1000; o++) {
		buf_printf(&b, "  t%d_0[i] = x[i] + %d.0;\n", o, o);
		for (int k = 1; k < 99; k++)
			buf_printf(&b, "  t%d_%d[i] = t%d_%d[i] * 0.5 + x[i];\n", o, k, o, k - 1);
		buf_printf(&b, "  y%d[i] = t%d_98[i];\n", o, o);
	}
	buf_puts(&b, "}\nschedule wide { }\n");
	double t = compile_time(b.s, &depth);
	ck_assert_int_eq(depth, 1);
	assert_fast(t, "10^5 statements");
	buf_free(&b);
}
END_TEST

/* The automatic scheduler lowers every schedule it keeps (size variants, segments, scalar
 * kernels) to see that it compiles; the real lowering takes those kernels (Fusion.lowered)
 * instead of running the passes again, so each fusion runs the pass pipeline once per kernel
 * it has in the output (twice per kernel before: 44 ms for auto_hgemm, 19 ms for softmax on a
 * loaded machine), and a scalar kernel only from cp_async on, from a copy of its vector
 * kernel (the passes before, mma's ldmatrix proofs among them, were half of auto_hgemm's
 * lowering). Counted, not timed. With a dump or the verifier asked for, the passes run
 * again (the trial ran neither). */
static void assert_lowered_once(const char *src, int min_kernels, bool all_scalar, int min_i32)
{
	LowerOptions o = {.arch = 80};
	TestCompile *tc = tc_compile_opts(src, &o);
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Vec all = {0};
	kernel_flatten(tc->arena, tc->kernels[0], &all);
	ck_assert_int_ge(all.len, min_kernels);
	int nscalar = 0, ni32 = 0;
	for (int i = 0; i < all.len; i++) {
		Kernel *k = VEC_AT(all, Kernel, i);
		int mine = 0;
		/* a 32-bit index variant is a copy of the kernel after it (passes/index32.c) */
		for (int j = 0; j < all.len; j++)
			mine += VEC_AT(all, Kernel, j)->fusion == k->fusion &&
				!kernel_index32(VEC_AT(all, Kernel, j));
		ck_assert_msg(k->fusion->lowerings == mine, "%s: the passes ran %d times for %d kernels",
			      k->name, k->fusion->lowerings, mine);
		/* each scalar kernel went on from a copy of its vector kernel: the passes before
		 * cp_async ran once for both (a 32-bit variant of it is a copy, not counted) */
		int scalar = 0;
		for (int j = 0; j < all.len; j++) {
			Kernel *x = VEC_AT(all, Kernel, j);
			const char *tail = strstr(x->name, "_scalar");
			scalar += x->fusion == k->fusion && tail && !tail[7] && !kernel_index32(x);
		}
		ck_assert_msg(k->fusion->resumed == scalar && scalar * 2 <= mine,
			      "%s: %d of %d scalar kernels resumed from their vector kernel's copy",
			      k->name, k->fusion->resumed, scalar);
		/* each 32-bit variant was rewritten once, in the scheduler's trial: the final
		 * chain takes the same one (twice per variant before, trial and final) */
		int i32 = 0;
		for (int j = 0; j < all.len; j++)
			i32 += VEC_AT(all, Kernel, j)->fusion == k->fusion &&
			       kernel_index32(VEC_AT(all, Kernel, j));
		ck_assert_msg(i32 <= k->fusion->index32_rewrites && k->fusion->index32_rewrites <= mine,
			      "%s: %d 32-bit variants rewritten for %d of them (%d kernels)", k->name,
			      k->fusion->index32_rewrites, i32, mine);
		ni32 += i32;
		nscalar += strstr(k->name, "_scalar") != NULL;
	}
	if (all_scalar)
		ck_assert_msg(2 * nscalar == all.len, "%d scalar kernels of %d", nscalar, all.len);
	ck_assert_msg(ni32 >= min_i32, "%d 32-bit variants (at least %d)", ni32, min_i32);
	tc_free(tc);
}

START_TEST(auto_variants_lowered_once)
{
	/* rows: 5 size variants, the long-row segments, each with its scalar kernel */
	assert_lowered_once("fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
			    "  m[i] = max(j: x[i, j]);\n"
			    "  e[i, j] = exp(x[i, j] - m[i]);\n"
			    "  s[i] = sum(j: e[i, j]);\n"
			    "  y[i, j] = e[i, j] / s[i];\n"
			    "}\n", 16, true, 18);
	/* a tensor-core matmul: 2 size variants of M and the fusion's own (no scalar kernels: the
	 * padded plan runs where their preconditions fail), then the plan's kernels */
	assert_lowered_once("fusion hgemm(A: f16[M, K], B: f16[K, N]) -> (C: f32[M, N]) {\n"
			    "  C[i, j] = sum(k: A[i, k] * B[k, j]);\n"
			    "}\n", 6, false, 13);
}
END_TEST

Suite *scale_suite(void)
{
	Suite *s = suite_create("scale");
	TCase *tc = tcase_create("compile_time");
	/* the limit is asserted above; Check's own timeout only catches a hang */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, nested_loops_200);
	tcase_add_test(tc, statements_100000);
	tcase_add_test(tc, auto_variants_lowered_once);
	suite_add_tcase(s, tc);
	return s;
}
