/* testutil.h: helpers shared by the Check suites: compile .fus text through the real pipeline
 * and get at every stage's result as text. Every helper uses one arena per call chain; the
 * caller frees the TestCompile with tc_free. */
#ifndef FUSC_TESTUTIL_H
#define FUSC_TESTUTIL_H

#include "backend/backend.h"
#include "interp/sim.h"
#include "scheduler/scheduler.h"
#include "passes/passes.h"

typedef struct TestCompile {
	Arena *arena;
	Diag *diag;
	int file;
	Program *prog;     /* NULL after front-end errors */
	Kernel **kernels;  /* NULL after front-end or lowering errors */
	char *diags;       /* rendered diagnostics (malloc'd), "" if none */
} TestCompile;

/* Parses, checks, schedules and (when lower is true) lowers `text` named "t.fus" for sm_80
 * with the verifier on, without the 32-bit index variants (passes/index32.c): kernels[i] is
 * the fusion's kernel as the passes made it. */
TestCompile *tc_compile(const char *text, bool lower);
/* tc_compile lowering as fusc and libfusrt do: with the 32-bit index variants. */
TestCompile *tc_compile_i32(const char *text);
/* Like tc_compile with explicit lowering options (arch, no_arch_check); automatic schedules
 * are made for o->arch. */
TestCompile *tc_compile_opts(const char *text, const LowerOptions *o);
void tc_free(TestCompile *tc);
/* Simulates kernel k of a fusion bias_gelu(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) at M, N
 * against the reference interpreter; returns the number of wrong or unwritten elements of y
 * and the simulator's reports in *nreports. */
int64_t tc_simulate_bias_gelu(Kernel *k, int64_t M, int64_t N, int *nreports);
/* tc_compile with lowering that must succeed (a Check failure with the diagnostics if not). */
TestCompile *tc_lowered(const char *text);
/* The CUDA source of tc compiles with NVRTC for sm_80 and sm_90 (a Check failure if not). */
void tc_assert_nvrtc(TestCompile *tc);
/* A Check failure with the first report's text if the simulation r of tc reported anything;
 * frees r otherwise. */
void tc_assert_no_reports(TestCompile *tc, SimResult *r);
/* Text of stages (malloc'd; caller frees). */
char *tc_kernel_ir(TestCompile *tc, int i);
/* The variant of kernel 0 named `name` (a Check failure if there is none), and its kernel IR. */
Kernel *tc_variant(TestCompile *tc, const char *name);
char *tc_variant_ir(TestCompile *tc, const char *name);
char *tc_fusion_ir(TestCompile *tc, int i);
char *tc_cuda(TestCompile *tc);
/* The front end only (parse, sema and, when schedule is true, the schedule) of `text` named
 * "t.fus": the fusion IR text of every fusion ("" after errors) and the error and note lines
 * of the rendered diagnostics (`t.fus:L:C: ...`, without source excerpts), both malloc'd. */
typedef struct TestFrontend {
	char *ir;
	char *errors;
} TestFrontend;

TestFrontend tf_compile(const char *text, bool schedule);
void tf_free(TestFrontend *r);
/* Asserts no diagnostics and exactly `want` as the fusion IR text. */
void tf_expect_ir(const char *text, bool schedule, const char *want);
/* Asserts exactly `want` as the error and note lines, in order, after the whole front end,
 * and no fusion IR. */
void tf_expect_errors(const char *text, const char *want);

/* Every fusion of src compiles without a schedule block, and its kernel (and the scalar
 * fallback, when the launcher has one) matches the reference in the simulator at each of
 * the sizes ("M=67,N=45": every size named), with no report (check_auto_shapes.c). */
TestCompile *expect_auto(const char *src, const char **dims, int ndims);
/* The size values of f from `dims` ("A=3,B=5": every size of f named; check_auto_shapes.c). */
void parse_dims(Fusion *f, const char *dims, int64_t *sizes);
/* Kernel k (one of a chain) matches the reference in the simulator at dims, with no report. */
void expect_sim(Kernel *k, const char *dims);
/* The same comparison, returned (a report still fails the test): a mutated kernel must not
 * agree. */
bool sim_agrees(Kernel *k, const char *dims);
/* The same without failing on reports: their number, and the first's kind when there is one. */
bool sim_agrees_reporting(Kernel *k, const char *dims, int *nreports, SimFault *first);
/* The kernel of chain k that the launcher runs at dims (kernel_pick, aligned pointers) passes
 * expect_sim; returns it. */
Kernel *expect_sim_picked(Kernel *k, const char *dims);
/* README's saxpy (examples/saxpy.fus), scheduled: split by 1024 and by 4, bound to blockIdx.x and threadIdx.x,
 * vectorized by 4. */
extern const char test_saxpy_src[];

/* True when `needle` occurs in `hay`; a failing assertion prints both. */
#define ck_assert_contains(hay, needle) \
	ck_assert_msg(strstr((hay), (needle)) != NULL, "expected to find\n%s\nin\n%s", (needle), (hay))
#define ck_assert_not_contains(hay, needle) \
	ck_assert_msg(strstr((hay), (needle)) == NULL, "expected NOT to find\n%s\nin\n%s", (needle), (hay))

#endif
