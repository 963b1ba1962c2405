/* backend.h: the CUDA backend: kernels + extern "C" launchers (.cu) and the C99 header (.h).
 *
 * The .cu text compiles with nvcc (kernels and launchers) and with NVRTC (the launchers sit
 * under #ifndef __CUDACC_RTC__); its device code includes no headers at all.
 */
#ifndef FUSC_BACKEND_H
#define FUSC_BACKEND_H

#include "../ir/ir.h"

/* backend/cuda.c: the whole .cu for a program's kernels (in fusion order): a comment header,
 * the device part (cuda_emit_device), the host part (cuda_emit_host). */
void cuda_emit(Kernel **ks, int nk, const char *source_name, Buf *out);

/* backend/cuda_kernel.c: only the device part (what NVRTC compiles): preamble + kernels. */
void cuda_emit_device(Kernel **ks, int nk, Buf *out);
/* The sections of backend/preamble.cuh, bits of the mask cuda_put_preamble takes. */
enum { PRE_BASE, PRE_REDUCE, PRE_GRID, PRE_WELFORD, PRE_ONLINE, PRE_COUNT };
/* Appends the preamble sections in `sections` (1u << PRE_*), in file order. */
void cuda_put_preamble(Buf *out, unsigned sections);
/* Threads per block when every thread dimension is a constant; 0 otherwise. */
int64_t cuda_block_threads(Kernel *k);
/* The C type of grid-reduction workspace i: ws in its dtype, sem as unsigned counters. */
const char *cuda_ws_ctype(Kernel *k, int i);

/* backend/cuda_stmt.c: what goes between a kernel's braces: the shared-memory pool, the
 * kernel-scope locals, the statements. */
void cuda_emit_body(Kernel *k, Buf *out);

/* backend/cuda_expr.c: expressions and names. */
/* Appends e converted to `want`. `implicit`: the context converts by itself (an operand next
 * to one of type `want`, a condition), so only f16/bf16 need a helper. */
void cuda_put_expr(Buf *out, IrExpr *e, DType want, bool implicit);
/* The same, in parentheses unless its top operator binds at least as tightly as `min`. */
void cuda_put_operand(Buf *out, IrExpr *e, DType want, bool implicit, int min);
/* Whether C converts `have` to `want` implicitly without changing the value. */
bool cuda_widening(DType have, DType want);
/* An integer literal of any i64 value (INT64_MIN and INT32_MIN spelled so they parse). */
void cuda_put_int(Buf *out, int64_t v);
/* The n bytes at s (no NUL needed; not in out) appended to out: buf_printf's "%.*s" goes
 * through vsnprintf, several hundred instructions a call. */
void cuda_put_n(Buf *out, const char *s, size_t n);
/* Appends a .fus name as a C/C++ identifier: names that clash with C++ keywords, CUDA
 * built-ins or the generated code's own names get a trailing '_'. */
void cuda_name(Buf *out, const char *name);

/* backend/cuda_launch.c: the host part: `#ifndef __CUDACC_RTC__`, per fusion the launcher
 * and FUSION_last_error(), `#endif`. */
void cuda_emit_host(Kernel **ks, int nk, Buf *out);
/* The launcher's C prototype `cudaError_t NAME(params..., cudaStream_t stream)` (no `;`),
 * shared by the .cu definition and the header so both use the same types. */
void cuda_launcher_signature(Fusion *f, Buf *out);
/* Appends k's preconditions as a phrase: "x and y are 16-byte aligned and N is a multiple of
 * 4" (for the launcher and header text of kernels with a fallback). */
void cuda_precond_text(Kernel *k, Buf *out);

/* backend/header.c: the C99 header with one launcher prototype per fusion. `guard` is the
 * include-guard stem (derived from the file stem). */
void header_emit(Kernel **ks, int nk, const char *source_name, const char *guard, Buf *out);

/* backend/aot.c: the C source of an ahead-of-time object (fusc --emit=obj): the .fus text,
 * the binaries (include/fusrt.h's fusrt_aot_binary) and launchers that call
 * fusrt_aot_launch; it includes "fusrt.h" and the fusion's header. */
typedef struct AotInput {
	const char *name;          /* the .fus file's name */
	const char *header;        /* the header to include ("saxpy.h") */
	const char *source;
	size_t source_len;
	int arch;                  /* the kernels were lowered for sm_ARCH */
	const char *prefix;        /* --prefix or NULL */
	const char *device_sha256; /* hex SHA-256 of cuda_emit_device's text */
	const struct AotBinary {
		int arch, ptx;
		const void *data;
		size_t size;
	} *binaries;
	int nbinaries;
} AotInput;
void aot_emit(Kernel **ks, int nk, const AotInput *in, Buf *out);

/* backend/nvrtc.c: NVRTC, loaded with dlopen on first use (FUSRT_LIBNVRTC names the library).
 * nvrtc_load loads it once (thread-safe); false with the reason in *why (static text) when
 * it cannot. Every function below loads it first and fails cleanly without it. */
bool nvrtc_load(const char **why);
/* Compiles CUDA source with NVRTC for sm_`arch`. Returns true and sets *out (PTX text, or
 * cubin bytes with *out_len) or false with the log in *log. Caller frees. */
bool nvrtc_compile(const char *src, const char *name, int arch, bool cubin, char **out,
		   size_t *out_len, char **log);
/* The same for an architecture spelled as text: "90", "90a" (compute_90a / sm_90a). */
bool nvrtc_compile_arch(const char *src, const char *name, const char *arch, bool cubin,
			char **out, size_t *out_len, char **log);
/* Whether NVRTC can compile for sm_`arch` (nvrtcGetSupportedArchs); appends the architectures
 * it lists ("sm_75, sm_80, ...") to *valid when valid is not NULL. */
bool nvrtc_arch_supported(int arch, Buf *valid);
/* NVRTC's version (nvrtcVersion); 0.0 when it cannot tell. */
void nvrtc_version(int *major, int *minor);

#endif
