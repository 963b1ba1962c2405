/* aot.c: the C source of an ahead-of-time object (fusc --emit=obj, docs/embedding.md).
 *
 * Plain C11 that any C compiler builds without nvcc: fusrt.h and the fusion's own header
 * (included, so every definition is checked against the prototype programs see), the .fus
 * text, the kernels' binaries as byte arrays, and per fusion FUSION_last_error() and the
 * launcher FUSION(...), which packs its arguments for fusrt_aot_launch (libfusrt: the checks
 * of fusrt_launch, the binary that fits the device loaded on first use through the driver it
 * dlopens) and maps the status to a cudaError_t. Every symbol but the launchers is static.
 */
#include <string.h>

#include "backend/backend.h"

/* A byte array `static const unsigned char NAME[]`, 16 bytes a line. */
static void put_bytes(Buf *out, const char *name, const void *data, size_t n)
{
	const unsigned char *p = data;

	buf_printf(out, "static _Alignas(64) const unsigned char %s[%zu] = {", name, n ? n : 1);
	for (size_t i = 0; i < n; i++)
		buf_printf(out, "%s%u,", i % 16 ? "" : "\n  ", p[i]);
	buf_puts(out, n ? "\n};\n" : "0};\n");
}

/* A C string literal of n bytes (any byte), split into lines. */
static void put_string(Buf *out, const char *s, size_t n)
{
	buf_puts(out, "  \"");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n' && i + 1 < n)
			buf_puts(out, "\\n\"\n  \"");
		else if (c == '\n')
			buf_puts(out, "\\n");
		else if (c == '"' || c == '\\')
			buf_printf(out, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f || c == '?') /* '?': no trigraphs */
			buf_printf(out, "\\%03o", c);
		else
			buf_printf(out, "%c", c);
	}
	buf_puts(out, "\"");
}

static const char aot_prelude[] =
	"#include <math.h>\n"
	"#include <stdint.h>\n"
	"#include <string.h>\n"
	"\n"
	"/* The status of a launch as the CUDA runtime would say it; the reason in text. */\n"
	"static cudaError_t fus_status(fusrt_status s, char *text, size_t n)\n"
	"{\n"
	"  if (s == FUSRT_OK) {\n"
	"    text[0] = '\\0';\n"
	"    return cudaSuccess;\n"
	"  }\n"
	"  strncpy(text, fusrt_last_error(), n - 1);\n"
	"  text[n - 1] = '\\0';\n"
	"  switch (s) {\n"
	"  case FUSRT_ERR_INVALID: case FUSRT_ERR_PRECONDITION: return cudaErrorInvalidValue;\n"
	"  case FUSRT_ERR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;\n"
	"  case FUSRT_ERR_NO_DRIVER: return cudaErrorInsufficientDriver;\n"
	"  case FUSRT_ERR_NO_DEVICE: return cudaErrorNoDevice;\n"
	"  case FUSRT_ERR_ARCH: return cudaErrorNoKernelImageForDevice;\n"
	"  case FUSRT_ERR_LAUNCH: return cudaErrorLaunchFailure;\n"
	"  default: return cudaErrorUnknown;\n"
	"  }\n"
	"}\n";

/* f16 and bf16 scalars travel as bits; libfusrt takes their value. */
static const char aot_f16[] =
	"\nstatic double fus_f16_value(uint16_t h)\n"
	"{\n"
	"  int e = (h >> 10) & 31, m = h & 1023;\n"
	"  double v = e == 0 ? m / 16777216.0 : e == 31 ? (m ? NAN : INFINITY)\n"
	"           : (1024 + m) * (double)(1u << e) / 33554432.0;\n"
	"  return h & 0x8000 ? -v : v;\n"
	"}\n";
static const char aot_bf16[] =
	"\nstatic double fus_bf16_value(uint16_t h)\n"
	"{\n"
	"  uint32_t u = (uint32_t)h << 16;\n"
	"  float f;\n"
	"  memcpy(&f, &u, sizeof f);\n"
	"  return f;\n"
	"}\n";

/* Whether a fusion of ks has a scalar parameter of dtype t. */
static bool has_param(Kernel **ks, int nk, DType t)
{
	for (int i = 0; i < nk; i++)
		for (int j = 0; j < ks[i]->fusion->nsig; j++)
			if (ks[i]->fusion->sig[j].kind == 'p' && ks[i]->fusion->sig[j].param->dtype == t)
				return true;
	return false;
}

static void put_arg(Buf *out, struct SigEntry *e)
{
	if (e->kind != 'p') {
		buf_puts(out, "fusrt_ptr((fusrt_devptr)(uintptr_t)");
		cuda_name(out, e->tensor->name);
		buf_puts(out, ")");
		return;
	}
	DType t = e->param->dtype;
	buf_puts(out, t == DT_F16 ? "fusrt_f(fus_f16_value(" : t == DT_BF16 ? "fusrt_f(fus_bf16_value("
		      : dtype_is_float(t) ? "fusrt_f((double)(" : "fusrt_i((int64_t)(");
	/* fusrt_f keeps .i only for finite values in range (include/fusrt.h) */
	cuda_name(out, e->param->name);
	buf_puts(out, "))");
}

static void put_launcher(Buf *out, Fusion *f)
{
	Buf err = {0};

	buf_puts(&err, "fus_error_");
	cuda_name(&err, f->name);
	buf_printf(out, "\nstatic _Thread_local char %s[1024];\n\nconst char *", err.s);
	cuda_name(out, f->name);
	buf_printf(out, "_last_error(void)\n{\n  return %s;\n}\n\n", err.s);
	cuda_launcher_signature(f, out);
	/* locals start with fus_, which cuda_name never leaves to a parameter */
	buf_printf(out, "\n{\n  fusrt_arg fus_args[%d];\n", f->nsig ? f->nsig : 1);
	for (int i = 0; i < f->nsig; i++) {
		buf_printf(out, "  fus_args[%d] = ", i);
		put_arg(out, &f->sig[i]);
		buf_puts(out, ";\n");
	}
	buf_printf(out, "  int64_t fus_sizes[%d] = {", f->nsizes ? f->nsizes : 1);
	for (int i = 0; i < f->nsizes; i++) {
		buf_puts(out, i ? ", " : "");
		cuda_name(out, f->sizes[i]->name);
	}
	buf_puts(out, f->nsizes ? "};\n" : "0};\n");
	buf_puts(out, "  fusrt_status fus_s = fusrt_aot_launch(&fus_aot, \"");
	buf_puts(out, f->name);
	buf_printf(out, "\", fus_args, %d, fus_sizes, %d, (fusrt_stream)stream);\n", f->nsig,
		   f->nsizes);
	buf_printf(out, "  return fus_status(fus_s, %s, sizeof %s);\n}\n", err.s, err.s);
	buf_free(&err);
}

void aot_emit(Kernel **ks, int nk, const AotInput *in, Buf *out)
{
	buf_printf(out, "/* Generated by fusc %s from %s (--emit=obj). Do not edit. */\n",
		   FUSC_VERSION, in->name);
	buf_printf(out, "#include \"fusrt.h\"\n#include \"%s\"\n", in->header);
	buf_puts(out, aot_prelude);
	if (has_param(ks, nk, DT_F16))
		buf_puts(out, aot_f16);
	if (has_param(ks, nk, DT_BF16))
		buf_puts(out, aot_bf16);
	buf_puts(out, "\n/* The text the kernels come from: libfusrt lowers it again (no NVRTC) */\n"
		      "static const char fus_source[] =\n");
	put_string(out, in->source, in->source_len);
	buf_puts(out, ";\n\n");
	for (int i = 0; i < in->nbinaries; i++) {
		char name[32];
		snprintf(name, sizeof name, "fus_binary_%d", i);
		buf_printf(out, "/* %s_%d */\n", in->binaries[i].ptx ? "compute" : "sm",
			   in->binaries[i].arch);
		put_bytes(out, name, in->binaries[i].data, in->binaries[i].size);
	}
	buf_printf(out, "\nstatic const fusrt_aot_binary fus_binaries[%d] = {\n", in->nbinaries);
	for (int i = 0; i < in->nbinaries; i++)
		buf_printf(out, "  {%d, %d, fus_binary_%d, %zu},\n", in->binaries[i].arch,
			   in->binaries[i].ptx, i, in->binaries[i].size);
	buf_puts(out, "};\n\nstatic fusrt_module *fus_module;\n\n"
		      "static const fusrt_aot fus_aot = {\n  \"" FUSC_VERSION "\",\n");
	put_string(out, in->name, strlen(in->name));
	buf_printf(out, ", fus_source, %zu, %d, \"%s\",\n  \"%s\",\n  fus_binaries, %d, "
			"&fus_module,\n};\n", in->source_len, in->arch, in->prefix ? in->prefix : "",
		   in->device_sha256, in->nbinaries);
	for (int i = 0; i < nk; i++)
		put_launcher(out, ks[i]->fusion);
}
