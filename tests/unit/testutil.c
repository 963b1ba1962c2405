/* testutil.c: see testutil.h. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/testutil.h"

TestCompile *tc_compile_opts(const char *text, const LowerOptions *o)
{
	TestCompile *tc = xmalloc(sizeof *tc);
	memset(tc, 0, sizeof *tc);
	tc->arena = arena_new();
	tc->diag = diag_new();
	tc->file = diag_add_file(tc->diag, "t.fus", text, strlen(text));
	tc->prog = frontend_compile(tc->arena, tc->diag, tc->file);
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

TestCompile *tc_compile(const char *text, bool lower)
{
	LowerOptions o = {.arch = 80, .verify = true};
	return tc_compile_opts(text, lower ? &o : NULL);
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
		kir_print(tc->kernels[i], &b);
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
