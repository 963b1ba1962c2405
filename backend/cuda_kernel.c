/* cuda_kernel.c: the device part of a .cu, what NVRTC compiles: the device preamble, then
 * one `extern "C" __global__ FUSION_kernel` per fusion (and its other variants: size
 * variants, scalar kernels; Kernel.fallback).
 *
 * The preamble is backend/preamble.cuh, embedded at build time (the Makefile turns it into
 * the byte list preamble.inc in the build folder). Its sections start at `// ---- ` banner
 * lines: the basic one always goes out, the others only into files whose kernels call them,
 * in file order, each after the blank line before its banner. Text before the first banner
 * is the file's own comment and never goes out.
 */
#include <string.h>

#include "backend/backend.h"

static const unsigned char preamble_cuh[] = {
#include "backend/preamble.inc"
	0,
};

/* The sections of preamble.cuh in file order, by their banners (PRE_* bits of a mask). */
static const char *const pre_banner[PRE_COUNT] = {
	[PRE_BASE] = "// ---- fusc device preamble",
	[PRE_REDUCE] = "// ---- block reductions",
	[PRE_GRID] = "// ---- grid reductions",
	[PRE_WELFORD] = "// ---- Welford block combinations",
	[PRE_ONLINE] = "// ---- online max and sum",
};

/* Section i's text: from its banner (from the blank line before it, after the first) to the
 * blank line before the next banner, or to the end of the file. */
static void put_section(Buf *out, int i)
{
	const char *text = (const char *)preamble_cuh;
	const char *start = strstr(text, pre_banner[i]);
	const char *end = i + 1 < PRE_COUNT ? strstr(text, pre_banner[i + 1]) : text + strlen(text);

	if (!start || !end || end <= start || (i > 0 && start[-1] != '\n') ||
	    (i + 1 < PRE_COUNT && (end[-1] != '\n' || end[-2] != '\n')))
		die("backend/preamble.cuh lacks the section \"%s\" or the blank line after it",
		    pre_banner[i]);
	if (i > 0)
		start--;
	if (i + 1 < PRE_COUNT)
		end--;
	cuda_put_n(out, start, (size_t)(end - start));
}

void cuda_put_preamble(Buf *out, unsigned sections)
{
	for (int i = 0; i < PRE_COUNT; i++)
		if (sections & (1u << i))
			put_section(out, i);
}

/* ctx: the ReduceOp of the block reduction looked for */
static bool is_block_red(Stmt *s, void *ctx)
{
	return s->kind == KS_BLOCK_REDUCE && s->block_red.red == *(ReduceOp *)ctx;
}

static bool has_block_red(Stmt *s, ReduceOp r)
{
	return ir_stmts_any(s, is_block_red, &r);
}

static bool has_grid_reduce(Kernel *k)
{
	return k->grid_ws.len > 0;
}

static bool is_block_reduce(Stmt *s, void *ctx)
{
	(void)ctx;
	return s->kind == KS_BLOCK_REDUCE;
}

static bool has_block_reduce(Stmt *s)
{
	return ir_stmts_any(s, is_block_reduce, NULL);
}

/* Threads per block when every thread dimension is a constant; 0 otherwise. */
int64_t cuda_block_threads(Kernel *k)
{
	int64_t n = 1, c;

	for (ParType p = PT_TIDX; p <= PT_TIDZ; p++) {
		if (!k->launch[p])
			continue;
		if (!ir_is_const(k->launch[p], &c))
			return 0;
		n *= c;
	}
	return n;
}

static void emit_kernel_params(Fusion *f, Buf *out)
{
	bool first = true;

	for (int i = 0; i < f->nsig; i++) {
		struct SigEntry *e = &f->sig[i];
		buf_puts(out, first ? "" : ", ");
		first = false;
		if (e->kind == 'p') {
			buf_printf(out, "%s ", dtype_ctype(e->param->dtype));
			cuda_name(out, e->param->name);
			continue;
		}
		buf_printf(out, "%s%s *__restrict__ ", e->kind == 't' ? "const " : "",
			   dtype_ctype(e->tensor->dtype));
		cuda_name(out, e->tensor->name);
	}
	for (int i = 0; i < f->nsizes; i++) {
		buf_puts(out, first ? "long long " : ", long long ");
		first = false;
		cuda_name(out, f->sizes[i]->name);
	}
}

/* The workspace's C type: ws in its dtype, sem as unsigned counters (DT_I32 in the IR). */
const char *cuda_ws_ctype(Kernel *k, int i)
{
	return i % 2 ? "unsigned" : dtype_ctype(VEC_AT(k->grid_ws, Tensor, i)->dtype);
}

/* `, float *fus_ws_s, unsigned *fus_sem_s` after the sizes (names with the reserved fus_
 * prefix: no .fus name prints as one). */
static void emit_ws_params(Kernel *k, Buf *out)
{
	Fusion *f = k->fusion;
	for (int i = 0; i < k->grid_ws.len; i++)
		buf_printf(out, "%s%s *%s", i || f->nsig || f->nsizes ? ", " : "",
			   cuda_ws_ctype(k, i), VEC_AT(k->grid_ws, Tensor, i)->name);
}

static void emit_kernel(Kernel *k, Buf *out)
{
	int64_t threads = cuda_block_threads(k);

	buf_puts(out, "\nextern \"C\" __global__ void ");
	if (threads > 0)
		buf_printf(out, "__launch_bounds__(%lld) ", (long long)threads);
	buf_printf(out, "%s(", k->name);
	emit_kernel_params(k->fusion, out);
	emit_ws_params(k, out);
	buf_puts(out, ")\n{\n");
	cuda_emit_body(k, out);
	buf_puts(out, "}\n");
}

void cuda_emit_device(Kernel **ks, int nk, Buf *out)
{
	unsigned sections = 1u << PRE_BASE;
	bool grid = false;
	Arena *a = arena_new();
	Vec all = {0};
	/* every variant of every fusion (Kernel.fallback chains), segments' kernels included */
	for (int i = 0; i < nk; i++)
		kernel_flatten(a, ks[i], &all);
	for (int i = 0; i < all.len; i++)
		grid |= has_grid_reduce(VEC_AT(all, Kernel, i));
	for (int i = 0; i < all.len; i++) {
		Kernel *k = VEC_AT(all, Kernel, i);
		if (grid || has_block_reduce(k->body))
			sections |= 1u << PRE_REDUCE;
		if (has_block_red(k->body, RED_WELFORD))
			sections |= 1u << PRE_WELFORD;
		if (has_block_red(k->body, RED_ONLINE))
			sections |= 1u << PRE_ONLINE;
	}
	if (grid)
		sections |= 1u << PRE_GRID;
	cuda_put_preamble(out, sections);
	for (int i = 0; i < all.len; i++)
		emit_kernel(VEC_AT(all, Kernel, i), out);
	arena_free(a);
}
