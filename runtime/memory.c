/* memory.c: device memory and synchronization through the driver, and the per-thread last
 * error that every fusrt call sets on failure. */
#include <stdlib.h>

#include "runtime/runtime.h"

static _Thread_local char *last_error;
static _Thread_local bool last_error_lost; /* a failure whose message found no memory */

/* Never dies (it reports failures, out-of-memory included): without memory for the message
 * the message is "out of memory". */
fusrt_status rt_fail(fusrt_status s, const char *fmt, ...)
{
	va_list ap;
	char *text = NULL;

	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n >= 0 && (text = malloc((size_t)n + 1))) {
		va_start(ap, fmt);
		vsnprintf(text, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	free(last_error);
	last_error = text;
	last_error_lost = !text;
	return s;
}

fusrt_status rt_guard(const char *what, fusrt_status (*body)(void *), void *ctx)
{
	DieTrap trap;
	fusrt_status s;

	trap.outer = die_trap_get();
	if (setjmp(trap.env)) {
		die_trap_set(trap.outer);
		return rt_fail(FUSRT_ERR_INTERNAL, "%s: internal error at %s (a bug in fusc: please "
			       "report it)", what, die_message());
	}
	die_trap_set(&trap);
	s = body(ctx);
	die_trap_set(trap.outer);
	return s;
}

void rt_clear_error(void)
{
	free(last_error);
	last_error = NULL;
	last_error_lost = false;
}

const char *fusrt_last_error(void)
{
	return last_error ? last_error : last_error_lost ? "out of memory" : "";
}

#define RT_STR(x) #x
#define RT_XSTR(x) RT_STR(x)

const char *fusrt_version(void)
{
	return RT_XSTR(FUSRT_VERSION_MAJOR) "." RT_XSTR(FUSRT_VERSION_MINOR) "."
		RT_XSTR(FUSRT_VERSION_PATCH);
}

const char *fusrt_status_name(fusrt_status s)
{
	static const char *names[] = {
		"FUSRT_OK", "FUSRT_ERR_INVALID", "FUSRT_ERR_COMPILE", "FUSRT_ERR_NO_DRIVER",
		"FUSRT_ERR_NO_DEVICE", "FUSRT_ERR_ARCH", "FUSRT_ERR_NVRTC",
		"FUSRT_ERR_OUT_OF_MEMORY", "FUSRT_ERR_PRECONDITION", "FUSRT_ERR_LAUNCH",
		"FUSRT_ERR_CUDA", "FUSRT_ERR_INTERNAL",
	};

	if ((unsigned)s >= (unsigned)countof(names))
		return "FUSRT_ERR_UNKNOWN";
	return names[s];
}

fusrt_status fusrt_malloc(fusrt_devptr *out, size_t bytes)
{
	fusrt_status s;
	CUdeviceptr p = 0;
	CUresult r;

	rt_clear_error();
	if (!out)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_malloc: NULL result pointer");
	*out = 0;
	if ((s = rt_driver_init()) != FUSRT_OK)
		return s;
	if ((r = rt_cu.mem_alloc(&p, bytes ? bytes : 1)) != CUDA_SUCCESS) {
		rt_cu_fail(r, "cuMemAlloc");
		return rt_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FUSRT_ERR_OUT_OF_MEMORY : FUSRT_ERR_CUDA,
			       "out of device memory allocating %zu bytes (%s)", bytes,
			       fusrt_last_error());
	}
	*out = (fusrt_devptr)p;
	return FUSRT_OK;
}

fusrt_status fusrt_free(fusrt_devptr p)
{
	fusrt_status s;
	CUresult r;

	rt_clear_error();
	if (!p)
		return FUSRT_OK;
	if ((s = rt_driver_init()) != FUSRT_OK)
		return s;
	if ((r = rt_cu.mem_free((CUdeviceptr)p)) != CUDA_SUCCESS)
		return rt_cu_fail(r, "cuMemFree");
	return FUSRT_OK;
}

fusrt_status fusrt_copy_to_device(fusrt_devptr dst, const void *src, size_t bytes)
{
	fusrt_status s;
	CUresult r;

	rt_clear_error();
	if (bytes && (!dst || !src))
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_copy_to_device: NULL pointer");
	if ((s = rt_driver_init()) != FUSRT_OK)
		return s;
	if (bytes && (r = rt_cu.memcpy_htod((CUdeviceptr)dst, src, bytes)) != CUDA_SUCCESS)
		return rt_cu_fail(r, "cuMemcpyHtoD");
	return FUSRT_OK;
}

fusrt_status fusrt_copy_to_host(void *dst, fusrt_devptr src, size_t bytes)
{
	fusrt_status s;
	CUresult r;

	rt_clear_error();
	if (bytes && (!dst || !src))
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_copy_to_host: NULL pointer");
	if ((s = rt_driver_init()) != FUSRT_OK)
		return s;
	if (bytes && (r = rt_cu.memcpy_dtoh(dst, (CUdeviceptr)src, bytes)) != CUDA_SUCCESS)
		return rt_cu_fail(r, "cuMemcpyDtoH");
	return FUSRT_OK;
}

fusrt_status fusrt_memset(fusrt_devptr dst, unsigned char byte, size_t bytes)
{
	fusrt_status s;
	CUresult r;

	rt_clear_error();
	if (bytes && !dst)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_memset: NULL pointer");
	if ((s = rt_driver_init()) != FUSRT_OK)
		return s;
	if (bytes && (r = rt_cu.memset_d8((CUdeviceptr)dst, byte, bytes)) != CUDA_SUCCESS)
		return rt_cu_fail(r, "cuMemsetD8");
	return FUSRT_OK;
}

fusrt_status fusrt_synchronize(void)
{
	fusrt_status s;
	CUresult r;

	rt_clear_error();
	if ((s = rt_driver_init()) != FUSRT_OK)
		return s;
	if ((r = rt_cu.ctx_synchronize()) != CUDA_SUCCESS)
		return rt_cu_fail(r, "kernel execution failed (cuCtxSynchronize)");
	return FUSRT_OK;
}
