/* nvrtc.c: CUDA source -> PTX or cubin through NVRTC (no GPU needed). The generated .cu is
 * NVRTC-clean (no headers; launchers under #ifndef __CUDACC_RTC__), so it compiles as is.
 */
#include <nvrtc.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

/* A malloc'd "what: NVRTC's message" for a failed call. */
static char *nvrtc_error(const char *what, nvrtcResult r)
{
	Buf b = {0};
	buf_printf(&b, "%s: %s\n", what, nvrtcGetErrorString(r));
	return b.s;
}

/* The program's log, malloc'd (empty string when there is none). */
static char *program_log(nvrtcProgram prog)
{
	size_t n = 0;
	if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0)
		return xstrdup("");
	char *log = xmalloc(n + 1);
	if (nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
		log[0] = '\0';
	log[n] = '\0';
	return log;
}

/* Copies the compiled PTX or cubin out of prog. */
static bool program_output(nvrtcProgram prog, bool cubin, char **out, size_t *out_len,
			   char **log)
{
	size_t n = 0;
	nvrtcResult r = cubin ? nvrtcGetCUBINSize(prog, &n) : nvrtcGetPTXSize(prog, &n);
	if (r != NVRTC_SUCCESS) {
		*log = nvrtc_error(cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize", r);
		return false;
	}
	char *buf = xmalloc(n + 1);
	r = cubin ? nvrtcGetCUBIN(prog, buf) : nvrtcGetPTX(prog, buf);
	if (r != NVRTC_SUCCESS) {
		free(buf);
		*log = nvrtc_error(cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX", r);
		return false;
	}
	buf[n] = '\0';
	*out = buf;
	if (out_len)
		*out_len = cubin ? n : strlen(buf); /* PTX size counts its NUL */
	return true;
}

void nvrtc_version(int *major, int *minor)
{
	if (nvrtcVersion(major, minor) != NVRTC_SUCCESS)
		*major = *minor = 0;
}

bool nvrtc_arch_supported(int arch, Buf *valid)
{
	int n = 0, *archs = NULL;
	bool found = false;

	if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) {
		if (valid)
			buf_puts(valid, "none (NVRTC lists no architectures)");
		return false;
	}
	archs = xmalloc(sizeof(int) * (size_t)n);
	if (nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS)
		n = 0;
	for (int i = 0; i < n; i++) {
		found = found || archs[i] == arch;
		if (valid)
			buf_printf(valid, "%ssm_%d", i ? ", " : "", archs[i]);
	}
	if (valid && n == 0)
		buf_puts(valid, "none (NVRTC lists no architectures)");
	free(archs);
	return found;
}

bool nvrtc_compile(const char *src, const char *name, int arch, bool cubin, char **out,
		   size_t *out_len, char **log)
{
	nvrtcProgram prog;
	char arch_opt[64];
	bool ok = false;

	*out = NULL;
	*log = NULL;
	if (out_len)
		*out_len = 0;
	/* cubin: real architecture sm_XY; PTX: virtual compute_XY */
	snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute",
		 arch);
	const char *opts[] = {arch_opt, "--std=c++17", "-lineinfo"};
	nvrtcResult r = nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
	if (r != NVRTC_SUCCESS) {
		*log = nvrtc_error("nvrtcCreateProgram", r);
		return false;
	}
	r = nvrtcCompileProgram(prog, countof(opts), opts);
	if (r != NVRTC_SUCCESS) {
		char *plog = program_log(prog);
		Buf b = {0};
		buf_printf(&b, "%s%s(nvrtcCompileProgram: %s, %s)\n", plog,
			   plog[0] && plog[strlen(plog) - 1] != '\n' ? "\n" : "",
			   nvrtcGetErrorString(r), arch_opt);
		free(plog);
		*log = b.s;
	} else {
		ok = program_output(prog, cubin, out, out_len, log);
	}
	r = nvrtcDestroyProgram(&prog);
	if (r != NVRTC_SUCCESS && ok) {
		free(*out);
		*out = NULL;
		*log = nvrtc_error("nvrtcDestroyProgram", r);
		ok = false;
	}
	return ok;
}
