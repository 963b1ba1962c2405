/* driver.c: the CUDA driver, loaded with dlopen at first use (never linked: libfusrt and fusc
 * run on machines without libcuda). Device 0's primary context is retained once and made
 * current on each thread that calls into libfusrt.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"

RtDriver rt_cu;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool init_done;
static fusrt_status init_status;
static char init_msg[512];
static CUcontext primary_ctx;
static int device_arch;
static int device_smem_optin = 48 * 1024; /* every CUDA device allows 48 KiB per block */

static const char *libcuda_name(void)
{
	const char *s = getenv("FUSRT_LIBCUDA");

	return s && *s ? s : "libcuda.so.1";
}

/* Looks up each entry point; the first name that exists wins (versioned names first). */
static bool load_symbols(void *lib, const char **missing)
{
	static const struct {
		size_t off;
		const char *names[2];
	} syms[] = {
#define S(field, a, b) {offsetof(RtDriver, field), {a, b}}
		S(init, "cuInit", NULL),
		S(device_get_count, "cuDeviceGetCount", NULL),
		S(device_get, "cuDeviceGet", NULL),
		S(device_get_attribute, "cuDeviceGetAttribute", NULL),
		S(device_get_name, "cuDeviceGetName", NULL),
		S(primary_ctx_retain, "cuDevicePrimaryCtxRetain", NULL),
		S(ctx_set_current, "cuCtxSetCurrent", NULL),
		S(ctx_synchronize, "cuCtxSynchronize", NULL),
		S(module_load_data, "cuModuleLoadData", NULL),
		S(module_unload, "cuModuleUnload", NULL),
		S(module_get_function, "cuModuleGetFunction", NULL),
		S(func_set_attribute, "cuFuncSetAttribute", NULL),
		S(launch_kernel, "cuLaunchKernel", NULL),
		S(mem_alloc, "cuMemAlloc_v2", NULL),
		S(mem_free, "cuMemFree_v2", NULL),
		S(memcpy_htod, "cuMemcpyHtoD_v2", NULL),
		S(memcpy_dtoh, "cuMemcpyDtoH_v2", NULL),
		S(memset_d8, "cuMemsetD8_v2", NULL),
		S(memset_d32, "cuMemsetD32_v2", NULL),
		S(event_create, "cuEventCreate", NULL),
		S(event_record, "cuEventRecord", NULL),
		S(event_synchronize, "cuEventSynchronize", NULL),
		S(event_elapsed_time, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		S(event_destroy, "cuEventDestroy_v2", NULL),
		S(get_error_name, "cuGetErrorName", NULL),
		S(get_error_string, "cuGetErrorString", NULL),
#undef S
	};

	for (int i = 0; i < countof(syms); i++) {
		void *p = dlsym(lib, syms[i].names[0]);
		if (!p && syms[i].names[1])
			p = dlsym(lib, syms[i].names[1]);
		if (!p) {
			*missing = syms[i].names[0];
			return false;
		}
		memcpy((char *)&rt_cu + syms[i].off, &p, sizeof p);
	}
	/* optional: stream-ordered allocation (grid-reduction workspace) */
	*(void **)&rt_cu.mem_alloc_async = dlsym(lib, "cuMemAllocAsync");
	*(void **)&rt_cu.mem_free_async = dlsym(lib, "cuMemFreeAsync");
	*(void **)&rt_cu.memset_d32_async = dlsym(lib, "cuMemsetD32Async");
	if (!rt_cu.mem_alloc_async || !rt_cu.mem_free_async || !rt_cu.memset_d32_async)
		rt_cu.mem_alloc_async = NULL, rt_cu.mem_free_async = NULL,
		rt_cu.memset_d32_async = NULL;
	return true;
}

static const char *cu_name(CUresult r)
{
	const char *s = NULL;

	if (!rt_cu.get_error_name || rt_cu.get_error_name(r, &s) != CUDA_SUCCESS || !s)
		return "CUDA_ERROR_UNKNOWN";
	return s;
}

static const char *cu_string(CUresult r)
{
	const char *s = NULL;

	if (!rt_cu.get_error_string || rt_cu.get_error_string(r, &s) != CUDA_SUCCESS || !s)
		return "unknown error";
	return s;
}

fusrt_status rt_cu_fail(CUresult r, const char *what)
{
	fusrt_status s = FUSRT_ERR_CUDA;

	switch (r) {
	case CUDA_ERROR_OUT_OF_MEMORY:
		s = FUSRT_ERR_OUT_OF_MEMORY;
		break;
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_VALUE:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
		s = FUSRT_ERR_LAUNCH;
		break;
	case CUDA_ERROR_NO_DEVICE:
		s = FUSRT_ERR_NO_DEVICE;
		break;
	default:
		break;
	}
	return rt_fail(s, "%s: %s: %s", what, cu_name(r), cu_string(r));
}

/* Loads and initializes the driver; fills init_status/init_msg. Called once, under the lock. */
static void driver_load(void)
{
	const char *name = libcuda_name(), *missing = NULL;
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	CUresult r;
	CUdevice dev;
	int n = 0, major = 0, minor = 0;

	init_status = FUSRT_OK;
	if (!lib) {
		init_status = FUSRT_ERR_NO_DRIVER;
		snprintf(init_msg, sizeof init_msg, "no CUDA driver (%s not found)", name);
		return;
	}
	if (!load_symbols(lib, &missing)) {
		init_status = FUSRT_ERR_NO_DRIVER;
		snprintf(init_msg, sizeof init_msg, "no usable CUDA driver (%s lacks %s)", name,
			 missing);
		return;
	}
	if ((r = rt_cu.init(0)) != CUDA_SUCCESS) {
		init_status = FUSRT_ERR_NO_DEVICE;
		snprintf(init_msg, sizeof init_msg, "cuInit failed: %s: %s", cu_name(r), cu_string(r));
		return;
	}
	if ((r = rt_cu.device_get_count(&n)) != CUDA_SUCCESS || n == 0) {
		init_status = FUSRT_ERR_NO_DEVICE;
		snprintf(init_msg, sizeof init_msg, "no CUDA device found");
		return;
	}
	if ((r = rt_cu.device_get(&dev, 0)) != CUDA_SUCCESS ||
	    (r = rt_cu.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
					    dev)) != CUDA_SUCCESS ||
	    (r = rt_cu.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
					    dev)) != CUDA_SUCCESS ||
	    (r = rt_cu.primary_ctx_retain(&primary_ctx, dev)) != CUDA_SUCCESS) {
		init_status = FUSRT_ERR_NO_DEVICE;
		snprintf(init_msg, sizeof init_msg, "cannot open CUDA device 0: %s: %s", cu_name(r),
			 cu_string(r));
		return;
	}
	device_arch = major * 10 + minor;
	int optin = 0;
	if (rt_cu.device_get_attribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
				       dev) == CUDA_SUCCESS && optin > device_smem_optin)
		device_smem_optin = optin;
}

fusrt_status rt_driver_init(void)
{
	pthread_mutex_lock(&init_lock);
	if (!init_done) {
		driver_load();
		init_done = true;
	}
	pthread_mutex_unlock(&init_lock);
	if (init_status != FUSRT_OK)
		return rt_fail(init_status, "%s", init_msg);
	CUresult r = rt_cu.ctx_set_current(primary_ctx);
	if (r != CUDA_SUCCESS)
		return rt_cu_fail(r, "cuCtxSetCurrent");
	return FUSRT_OK;
}

int rt_device_arch(void) { return device_arch; }

int rt_device_smem_optin(void) { return device_smem_optin; }

/* The probe of rt_have_cuda_device, in the child process. */
static int probe(void)
{
	void *lib = dlopen(libcuda_name(), RTLD_NOW | RTLD_LOCAL);
	CUresult (*init)(unsigned);
	CUresult (*count)(int *);
	int n = 0;

	if (!lib)
		return 0;
	*(void **)&init = dlsym(lib, "cuInit");
	*(void **)&count = dlsym(lib, "cuDeviceGetCount");
	if (!init || !count || init(0) != CUDA_SUCCESS || count(&n) != CUDA_SUCCESS)
		return 0;
	return n > 0;
}

int rt_have_cuda_device(void)
{
	int status;
	pid_t pid;

	if (init_done) /* this process already uses the driver: ask it directly */
		return init_status == FUSRT_OK;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return probe();
	if (pid == 0)
		_exit(probe() ? 0 : 1);
	if (waitpid(pid, &status, 0) != pid)
		return 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

fusrt_status fusrt_init(void)
{
	rt_clear_error();
	return rt_driver_init();
}

fusrt_status fusrt_device_info(char *name, size_t name_len, int *arch)
{
	fusrt_status s;
	CUdevice dev;
	CUresult r;

	rt_clear_error();
	if ((s = rt_driver_init()) != FUSRT_OK)
		return s;
	if (arch)
		*arch = device_arch;
	if (name && name_len > 0) {
		if ((r = rt_cu.device_get(&dev, 0)) != CUDA_SUCCESS ||
		    (r = rt_cu.device_get_name(name, (int)(name_len < 4096 ? name_len : 4096),
					       dev)) != CUDA_SUCCESS)
			return rt_cu_fail(r, "cuDeviceGetName");
	}
	return FUSRT_OK;
}
