/* header.c: the C99 header beside the .cu: one launcher prototype per fusion plus its
 * FUSION_last_error(). The prototypes come from cuda_launcher_signature(), the function that
 * also writes the .cu definitions, so the two always agree (f16/bf16 travel as uint16_t).
 */
#include <ctype.h>
#include <string.h>

#include "backend/backend.h"

/* Text as comment lines ` * ...`, wrapped before column 100 (`N <= 256` stays on one line). */
static void put_wrapped(Buf *out, Buf *b)
{
	int col = 0;
	char *save = NULL;

	for (char *c = strstr(b->s, " <= "); c; c = strstr(c, " <= "))
		c[0] = c[3] = '\x01';
	for (char *w = strtok_r(b->s, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		int len = (int)strlen(w);
		if (col > 0 && col + 1 + len > 96) {
			buf_puts(out, "\n");
			col = 0;
		}
		for (char *c = strchr(w, '\x01'); c; c = strchr(c, '\x01'))
			*c = ' ';
		buf_printf(out, "%s%s", col ? " " : " * ", w);
		col += len + (col ? 1 : 3);
	}
	buf_puts(out, "\n");
}

/* ` * Variants (the launcher runs the first whose conditions hold): saxpy_kernel when x
 * and y are 16-byte aligned and N is a multiple of 4; saxpy_kernel_scalar otherwise.`
 * (kernels with a fallback: Kernel.fallback). */
static void put_variants(Buf *out, Kernel *k)
{
	Buf b = {0};

	buf_puts(&b, "Variants (the launcher runs the first whose conditions hold):");
	for (; k; k = k->fallback) {
		buf_printf(&b, " %s", k->name);
		if (k->fallback || k->preconds.len) {
			buf_puts(&b, k->fallback ? " when " : " otherwise, which requires ");
			cuda_precond_text(k, &b);
		} else {
			buf_puts(&b, " otherwise");
		}
		buf_puts(&b, k->fallback ? ";" : ".");
	}
	put_wrapped(out, &b);
	buf_free(&b);
}

/* ` * sub_max_segments runs segments in order: sub_max_seg0 (kernels ...), then ...; each
 * call allocates their workspace (m: f32[1]) on `stream` and frees it after them.` */
static void put_segments(Buf *out, Kernel *k)
{
	Fusion *f = k->fusion;
	Buf b = {0};

	buf_printf(&b, "%s runs segments in order:", k->name);
	for (int i = 0; i < k->segments.len; i++) {
		Kernel *s = VEC_AT(k->segments, Kernel, i);
		buf_printf(&b, "%s %s (kernel%s", i ? ", then" : "", s->fusion->name,
			   s->fallback ? "s" : "");
		for (Kernel *v = s; v; v = v->fallback)
			buf_printf(&b, "%s %s", v == s ? "" : ",", v->name);
		buf_puts(&b, ")");
	}
	if (f->seg_buffers.len) {
		buf_puts(&b, "; each call allocates their workspace (");
		for (int i = 0; i < f->seg_buffers.len; i++) {
			Tensor *t = VEC_AT(f->seg_buffers, Tensor, i);
			buf_printf(&b, "%s%s: %s[", i ? ", " : "", t->name, dtype_name(t->dtype));
			for (int d = 0; d < t->ndim; d++) {
				buf_puts(&b, d ? ", " : "");
				ir_print_expr(t->shape[d], &b);
			}
			buf_puts(&b, t->ndim ? "]" : "1]");
		}
		buf_puts(&b, ") on `stream` (cudaMallocAsync) and frees it after them");
	}
	buf_puts(&b, ".");
	put_wrapped(out, &b);
	buf_free(&b);
}

/* ` * Requires: x 16-byte aligned; N a multiple of 4.` */
static void put_preconds(Buf *out, Kernel *k)
{
	if (k->fallback) {
		put_variants(out, k);
		return;
	}
	if (k->preconds.len == 0)
		return;
	buf_puts(out, " * Requires:");
	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		buf_puts(out, i ? ";" : "");
		if (p->kind == PC_ALIGNED)
			buf_printf(out, " %s %lld-byte aligned", p->tensor->name,
				   (long long)p->value);
		else if (p->kind == PC_MULTIPLE)
			buf_printf(out, " %s a multiple of %lld", p->size->name, (long long)p->value);
		else if (p->kind == PC_AT_MOST && p->size)
			buf_printf(out, " %s <= %lld", p->size->name, (long long)p->value);
		else {
			buf_puts(out, " ");
			precond_condition(p, out);
		}
	}
	buf_puts(out, ".\n");
}

static void put_fusion(Buf *out, Kernel *k)
{
	Fusion *f = k->fusion;

	buf_puts(out, "\n/*\n");
	buf_puts(out, " * ");
	ir_print_signature(f, out);
	buf_puts(out, "\n");
	buf_puts(out, " * Runs the fusion on `stream`. Sizes come after the tensors, in order of first\n"
		      " * appearance; f16/bf16 data is passed as its bits (uint16_t). On bad arguments\n"
		      " * it returns cudaErrorInvalidValue without launching, and ");
	cuda_name(out, f->name);
	buf_puts(out, "_last_error()\n * says why.\n");
	put_preconds(out, k);
	for (Kernel *v = k; v; v = v->fallback)
		if (v->segments.len)
			put_segments(out, v);
	if (k->grid_ws.len)
		buf_puts(out, " * A grid reduction: each call allocates its workspace on `stream`\n"
			      " * (cudaMallocAsync) and frees it after the launch (cudaFreeAsync).\n");
	buf_puts(out, " */\n");
	cuda_launcher_signature(f, out);
	buf_puts(out, ";\nconst char *");
	cuda_name(out, f->name);
	buf_puts(out, "_last_error(void);\n");
}

static const char *base_name(const char *path)
{
	if (!path || strcmp(path, "-") == 0)
		return "<stdin>";
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* FUSC_SAXPY_H from "saxpy" (non-identifier characters become '_'). */
static void put_guard(Buf *out, const char *stem)
{
	buf_puts(out, "FUSC_");
	for (const char *p = stem ? stem : "OUT"; *p; p++)
		buf_printf(out, "%c", isalnum((unsigned char)*p) ? toupper((unsigned char)*p) : '_');
	buf_puts(out, "_H");
}

void header_emit(Kernel **ks, int nk, const char *source_name, const char *guard, Buf *out)
{
	Buf g = {0};

	put_guard(&g, guard);
	buf_printf(out, "/* Generated by fusc %s from %s. Do not edit. */\n", FUSC_VERSION,
		   base_name(source_name));
	buf_printf(out, "#ifndef %s\n#define %s\n\n", g.s, g.s);
	buf_puts(out, "#include <stdbool.h>\n#include <stdint.h>\n#include <cuda_runtime_api.h>\n\n");
	buf_puts(out, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n");
	for (int i = 0; i < nk; i++)
		put_fusion(out, ks[i]);
	buf_puts(out, "\n#ifdef __cplusplus\n}\n#endif\n\n");
	buf_printf(out, "#endif /* %s */\n", g.s);
	buf_free(&g);
}
