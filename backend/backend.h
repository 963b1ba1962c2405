/* backend.h: the CUDA backend: kernels + extern "C" launchers (.cu) and the C99 header (.h).
 *
 * The .cu text compiles with nvcc (kernels and launchers) and with NVRTC (the launchers sit
 * under #ifndef __CUDACC_RTC__); its device code includes no headers at all.
 */
#ifndef FUSC_BACKEND_H
#define FUSC_BACKEND_H

#include "../ir/ir.h"

/* backend/cuda.c: the whole .cu for a program's kernels (in fusion order). `header_name` is
 * the header's file name, mentioned in a comment. */
void cuda_emit(Kernel **ks, int nk, const char *source_name, Buf *out);
/* Only the device part (what NVRTC compiles): preamble + kernels. */
void cuda_emit_device(Kernel **ks, int nk, Buf *out);

/* The launcher's C prototype `cudaError_t NAME(params..., cudaStream_t stream)` (no `;`),
 * shared by the .cu definition and the header so both use the same types. */
void cuda_launcher_signature(Fusion *f, Buf *out);
/* Appends k's preconditions as a phrase: "x and y are 16-byte aligned and N is a multiple of
 * 4" (for the launcher and header text of kernels with a fallback). */
void cuda_precond_text(Kernel *k, Buf *out);
/* Appends a .fus name as a C/C++ identifier: names that clash with C++ keywords, CUDA
 * built-ins or the generated code's own names get a trailing '_'. */
void cuda_name(Buf *out, const char *name);

/* backend/header.c: the C99 header with one launcher prototype per fusion. `guard` is the
 * include-guard stem (derived from the file stem). */
void header_emit(Kernel **ks, int nk, const char *source_name, const char *guard, Buf *out);

/* backend/nvrtc.c: compiles CUDA source with NVRTC for sm_`arch`. Returns true and sets *out
 * (PTX text, or cubin bytes with *out_len) or false with the log in *log. Caller frees. */
bool nvrtc_compile(const char *src, const char *name, int arch, bool cubin, char **out,
		   size_t *out_len, char **log);
/* Whether NVRTC can compile for sm_`arch` (nvrtcGetSupportedArchs); appends the architectures
 * it lists ("sm_75, sm_80, ...") to *valid when valid is not NULL. */
bool nvrtc_arch_supported(int arch, Buf *valid);
/* NVRTC's version (nvrtcVersion); 0.0 when it cannot tell. */
void nvrtc_version(int *major, int *minor);

#endif
