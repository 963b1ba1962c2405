/* testutil.c: see testutil.h. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "tests/unit/testutil.h"

const char test_saxpy_src[] =
	"fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
	"  z[i] = a * x[i] + y[i];\n"
	"}\n"
	"schedule saxpy {\n"
	"  z.split(i, 1024) -> (io, ii);\n"
	"  z.split(ii, 4) -> (it, iv);\n"
	"  z.bind(io, blockIdx.x);\n"
	"  z.bind(it, threadIdx.x);\n"
	"  z.vectorize(iv);\n"
	"}\n";

TestCompile *tc_compile_opts(const char *text, const LowerOptions *o)
{
	TestCompile *tc = xmalloc(sizeof *tc);
	memset(tc, 0, sizeof *tc);
	tc->arena = arena_new();
	tc->diag = diag_new();
	tc->file = diag_add_file(tc->diag, "t.fus", text, strlen(text));
	tc->prog = compile_program_for(tc->arena, tc->diag, tc->file, o ? o->arch : 80);
	if (tc->prog && o) {
		Kernel **ks = arena_alloc(tc->arena, sizeof(Kernel *) * (tc->prog->nfusions + 1));
		bool ok = true;
		for (int i = 0; i < tc->prog->nfusions; i++) {
			ks[i] = lower_fusion(tc->arena, tc->diag, tc->prog->fusions[i], o);
			ok = ok && ks[i];
		}
		tc->kernels = ok ? ks : NULL;
	}
	tc->diags = diag_render(tc->diag);
	return tc;
}

/* Without the 32-bit index variants (passes/index32.c), so that kernels[i] is the fusion's
 * kernel as the passes made it; check_index32.c tests the variants. */
TestCompile *tc_compile(const char *text, bool lower)
{
	static const LowerOptions o = {.arch = 80, .verify = true, .no_index32 = true};
	return tc_compile_opts(text, lower ? &o : NULL);
}

TestCompile *tc_compile_i32(const char *text)
{
	static const LowerOptions o = {.arch = 80, .verify = true};
	return tc_compile_opts(text, &o);
}

void tc_free(TestCompile *tc)
{
	diag_free(tc->diag);
	arena_free(tc->arena);
	free(tc->diags);
	free(tc);
}

char *tc_kernel_ir(TestCompile *tc, int i)
{
	Buf b = {0};
	buf_puts(&b, "");
	if (tc->kernels)
		kir_print(kernel_own(tc->kernels[i]), &b); /* as --emit=ir */
	return b.s;
}

Kernel *tc_variant(TestCompile *tc, const char *name)
{
	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *v = tc->kernels[0];
	while (v && strcmp(v->name, name) != 0)
		v = v->fallback;
	ck_assert_msg(v != NULL, "no variant %s", name);
	return v;
}

char *tc_variant_ir(TestCompile *tc, const char *name)
{
	Buf b = {0};
	kir_print(tc_variant(tc, name), &b);
	return b.s;
}

char *tc_fusion_ir(TestCompile *tc, int i)
{
	Buf b = {0};
	buf_puts(&b, "");
	if (tc->prog)
		ir_print_fusion(tc->prog->fusions[i], &b);
	return b.s;
}

char *tc_cuda(TestCompile *tc)
{
	Buf b = {0};
	buf_puts(&b, "");
	if (tc->kernels)
		cuda_emit(tc->kernels, tc->prog->nfusions, "t.fus", &b);
	return b.s;
}

TestFrontend tf_compile(const char *text, bool schedule)
{
	Diag *d = diag_new();
	int file = diag_add_file(d, "t.fus", text, strlen(text));
	Arena *a = arena_new();
	Program *p;
	if (schedule) {
		p = compile_program(a, d, file);
	} else {
		AstFile *f = parse_file(a, d, file);
		p = diag_error_count(d) ? NULL : sema_program(a, d, f);
	}
	Buf ir = {0}, errs = {0};
	buf_puts(&ir, "");
	buf_puts(&errs, "");
	if (p && !diag_error_count(d))
		for (int i = 0; i < p->nfusions; i++)
			ir_print_fusion(p->fusions[i], &ir);
	char *all = diag_render(d);
	for (char *line = all; *line;) {
		char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		if (strncmp(line, "t.fus:", 6) == 0)
			buf_printf(&errs, "%.*s\n", (int)n, line);
		line += n + (end != NULL);
	}
	free(all);
	diag_free(d);
	arena_free(a);
	return (TestFrontend){ir.s, errs.s};
}

void tf_free(TestFrontend *r)
{
	free(r->ir);
	free(r->errors);
}

void tf_expect_ir(const char *text, bool schedule, const char *want)
{
	TestFrontend r = tf_compile(text, schedule);
	ck_assert_msg(r.errors[0] == 0, "unexpected diagnostics:\n%s", r.errors);
	ck_assert_str_eq(r.ir, want);
	tf_free(&r);
}

void tf_expect_errors(const char *text, const char *want)
{
	TestFrontend r = tf_compile(text, true);
	ck_assert_str_eq(r.errors, want);
	ck_assert_str_eq(r.ir, "");
	tf_free(&r);
}

TestCompile *tc_lowered(const char *text)
{
	TestCompile *tc = tc_compile(text, true);
	ck_assert_msg(tc->kernels, "compile failed:\n%s", tc->diags);
	return tc;
}

void tc_assert_nvrtc(TestCompile *tc)
{
	char *cu = tc_cuda(tc);
	for (int arch = 80; arch <= 90; arch += 10) {
		char *out = NULL, *log = NULL;
		size_t len = 0;
		bool ok = nvrtc_compile(cu, "t.cu", arch, true, &out, &len, &log);
		ck_assert_msg(ok && len > 0, "NVRTC sm_%d failed:\n%s\n%s", arch, log ? log : "", cu);
		free(out);
		free(log);
	}
	free(cu);
}

void tc_assert_no_reports(TestCompile *tc, SimResult *r)
{
	for (int j = 0; j < r->nreports; j++) {
		char *s = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&s, &n);
		sim_report_print(tc->diag, &r->reports[j], f);
		fclose(f);
		ck_abort_msg("simulator report:\n%s", s);
	}
	sim_result_free(r);
}

int64_t tc_simulate_bias_gelu(Kernel *k, int64_t M, int64_t N, int *nreports)
{
	int64_t sizes[2] = {M, N};
	float *x = malloc(sizeof(float) * M * N), *b = malloc(sizeof(float) * N);
	float *y = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N);
	for (int64_t e = 0; e < M * N; e++)
		x[e] = (float)((e * 37) % 101 - 50) / 8.0f;
	for (int64_t e = 0; e < N; e++)
		b[e] = (float)((e * 13) % 17 - 8) / 4.0f;
	void *ins[2] = {x, b}, *outs[1] = {y}, *refs[1] = {ref};
	char *err = NULL;
	ck_assert_msg(interp_run(k->fusion, sizes, NULL, ins, refs, &err), "%s", err);
	for (int64_t e = 0; e < M * N; e++)
		y[e] = NAN;
	SimResult r;
	SimOptions so = {.seed = 1};
	ck_assert(sim_run(k, sizes, NULL, ins, outs, &so, &r));
	int64_t bad = 0;
	for (int64_t e = 0; e < M * N; e++)
		bad += !r.written[0][e] || !(fabsf(y[e] - ref[e]) <= 1e-5f + 1e-5f * fabsf(ref[e]));
	*nreports = r.nreports;
	sim_result_free(&r);
	free(x);
	free(b);
	free(y);
	free(ref);
	return bad;
}
