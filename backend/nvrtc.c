/* nvrtc.c: CUDA source -> PTX or cubin through NVRTC (no GPU needed). The generated .cu is
 * NVRTC-clean (no headers; launchers under #ifndef __CUDACC_RTC__), so it compiles as is.
 *
 * libnvrtc is loaded with dlopen on first use, never linked (as runtime/driver.c loads
 * libcuda): `fusc --emit=cuda` starts without loading it (about 1 ms instead of 10) and works
 * where it is absent; only ptx, cubin, the JIT, an explicit --arch check and --version use it.
 * The library is FUSRT_LIBNVRTC when set (a name or a path: tests point it at a missing file
 * to run without NVRTC), else the soname of the CUDA fusc was built with (FUSC_NVRTC_SONAME,
 * found through the executable's run path), else "libnvrtc.so".
 */
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

#ifndef FUSC_NVRTC_SONAME
#define FUSC_NVRTC_SONAME "libnvrtc.so"
#endif

/* The NVRTC entry points fusc calls, filled once by nvrtc_load. */
typedef struct Nvrtc {
	const char *(*get_error_string)(nvrtcResult);
	nvrtcResult (*version)(int *, int *);
	nvrtcResult (*get_num_supported_archs)(int *);
	nvrtcResult (*get_supported_archs)(int *);
	nvrtcResult (*create_program)(nvrtcProgram *, const char *, const char *, int,
				      const char *const *, const char *const *);
	nvrtcResult (*compile_program)(nvrtcProgram, int, const char *const *);
	nvrtcResult (*destroy_program)(nvrtcProgram *);
	nvrtcResult (*get_program_log_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get_program_log)(nvrtcProgram, char *);
	nvrtcResult (*get_ptx_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get_ptx)(nvrtcProgram, char *);
	nvrtcResult (*get_cubin_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get_cubin)(nvrtcProgram, char *);
} Nvrtc;

static Nvrtc rtc;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool load_ok;
static char load_msg[512];

static void *open_library(void)
{
	const char *env = getenv("FUSRT_LIBNVRTC");
	const char *names[] = {FUSC_NVRTC_SONAME, "libnvrtc.so"};
	void *lib = NULL;

	if (env && *env) {
		if (!(lib = dlopen(env, RTLD_NOW | RTLD_LOCAL)))
			snprintf(load_msg, sizeof load_msg, "cannot load NVRTC: %s", dlerror());
		return lib;
	}
	for (int i = 0; i < countof(names) && !lib; i++)
		if (!(lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
			snprintf(load_msg, sizeof load_msg, "cannot load NVRTC: %s (set FUSRT_LIBNVRTC "
				 "to its path)", dlerror());
	return lib;
}

/* Opens the library and looks up every entry point; load_ok, or load_msg says why not. */
static void load(void)
{
	static const struct {
		size_t off;
		const char *name;
	} syms[] = {
#define S(field, name) {offsetof(Nvrtc, field), name}
		S(get_error_string, "nvrtcGetErrorString"),
		S(version, "nvrtcVersion"),
		S(get_num_supported_archs, "nvrtcGetNumSupportedArchs"),
		S(get_supported_archs, "nvrtcGetSupportedArchs"),
		S(create_program, "nvrtcCreateProgram"),
		S(compile_program, "nvrtcCompileProgram"),
		S(destroy_program, "nvrtcDestroyProgram"),
		S(get_program_log_size, "nvrtcGetProgramLogSize"),
		S(get_program_log, "nvrtcGetProgramLog"),
		S(get_ptx_size, "nvrtcGetPTXSize"),
		S(get_ptx, "nvrtcGetPTX"),
		S(get_cubin_size, "nvrtcGetCUBINSize"),
		S(get_cubin, "nvrtcGetCUBIN"),
#undef S
	};
	void *lib = open_library();

	if (!lib)
		return;
	for (int i = 0; i < countof(syms); i++) {
		void *p = dlsym(lib, syms[i].name);
		if (!p) {
			snprintf(load_msg, sizeof load_msg, "cannot load NVRTC: the library lacks %s",
				 syms[i].name);
			dlclose(lib);
			return;
		}
		memcpy((char *)&rtc + syms[i].off, &p, sizeof p);
	}
	load_ok = true;
}

bool nvrtc_load(const char **why)
{
	pthread_once(&load_once, load);
	if (!load_ok && why)
		*why = load_msg;
	return load_ok;
}

/* A malloc'd "what: NVRTC's message" for a failed call. */
static char *nvrtc_error(const char *what, nvrtcResult r)
{
	Buf b = {0};
	buf_printf(&b, "%s: %s\n", what, rtc.get_error_string(r));
	return b.s;
}

/* The program's log, malloc'd (empty string when there is none). */
static char *program_log(nvrtcProgram prog)
{
	size_t n = 0;
	if (rtc.get_program_log_size(prog, &n) != NVRTC_SUCCESS || n == 0)
		return xstrdup("");
	char *log = xmalloc(n + 1);
	if (rtc.get_program_log(prog, log) != NVRTC_SUCCESS)
		log[0] = '\0';
	log[n] = '\0';
	return log;
}

/* Copies the compiled PTX or cubin out of prog. */
static bool program_output(nvrtcProgram prog, bool cubin, char **out, size_t *out_len,
			   char **log)
{
	size_t n = 0;
	nvrtcResult r = cubin ? rtc.get_cubin_size(prog, &n) : rtc.get_ptx_size(prog, &n);
	if (r != NVRTC_SUCCESS) {
		*log = nvrtc_error(cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize", r);
		return false;
	}
	char *buf = xmalloc(n + 1);
	r = cubin ? rtc.get_cubin(prog, buf) : rtc.get_ptx(prog, buf);
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
	if (!nvrtc_load(NULL) || rtc.version(major, minor) != NVRTC_SUCCESS)
		*major = *minor = 0;
}

bool nvrtc_arch_supported(int arch, Buf *valid)
{
	int n = 0, *archs = NULL;
	bool found = false;
	const char *why;

	if (!nvrtc_load(&why)) {
		if (valid)
			buf_printf(valid, "none (%s)", why);
		return false;
	}
	if (rtc.get_num_supported_archs(&n) != NVRTC_SUCCESS || n <= 0) {
		if (valid)
			buf_puts(valid, "none (NVRTC lists no architectures)");
		return false;
	}
	archs = xmalloc(sizeof(int) * (size_t)n);
	if (rtc.get_supported_archs(archs) != NVRTC_SUCCESS)
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
	char xy[16];

	snprintf(xy, sizeof xy, "%d", arch);
	return nvrtc_compile_arch(src, name, xy, cubin, out, out_len, log);
}

bool nvrtc_compile_arch(const char *src, const char *name, const char *arch, bool cubin,
			char **out, size_t *out_len, char **log)
{
	nvrtcProgram prog;
	char arch_opt[64];
	bool ok = false;
	const char *why;

	*out = NULL;
	*log = NULL;
	if (out_len)
		*out_len = 0;
	if (!nvrtc_load(&why)) {
		Buf b = {0};
		buf_printf(&b, "%s\n", why);
		*log = b.s;
		return false;
	}
	/* cubin: real architecture sm_XY; PTX: virtual compute_XY */
	snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%s", cubin ? "sm" : "compute",
		 arch);
	const char *opts[] = {arch_opt, "--std=c++17", "-lineinfo"};
	nvrtcResult r = rtc.create_program(&prog, src, name, 0, NULL, NULL);
	if (r != NVRTC_SUCCESS) {
		*log = nvrtc_error("nvrtcCreateProgram", r);
		return false;
	}
	r = rtc.compile_program(prog, countof(opts), opts);
	if (r != NVRTC_SUCCESS) {
		char *plog = program_log(prog);
		Buf b = {0};
		buf_printf(&b, "%s%s(nvrtcCompileProgram: %s, %s)\n", plog,
			   plog[0] && plog[strlen(plog) - 1] != '\n' ? "\n" : "",
			   rtc.get_error_string(r), arch_opt);
		free(plog);
		*log = b.s;
	} else {
		ok = program_output(prog, cubin, out, out_len, log);
	}
	r = rtc.destroy_program(&prog);
	if (r != NVRTC_SUCCESS && ok) {
		free(*out);
		*out = NULL;
		*log = nvrtc_error("nvrtcDestroyProgram", r);
		ok = false;
	}
	return ok;
}
