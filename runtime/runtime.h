/* runtime.h: libfusrt's internals (the public API is include/fusrt.h), shared by its files,
 * the `fusc run` tool and the unit tests.
 *
 *   driver.c        dlopen("libcuda.so.1") and the driver entry points we use; device probing
 *   binary_cache.c  the on-disk cubin cache (header with magic, key, length and checksum)
 *   fusrt.c         compile (front end, lowering, NVRTC, cache), module loading, launching
 *   memory.c        device memory, synchronization, the thread's last error
 */
#ifndef FUSC_RUNTIME_H
#define FUSC_RUNTIME_H

#include <cuda.h> /* types and constants only: libcuda is loaded with dlopen, never linked */

#include "../include/fusrt.h"
#include "../ir/ir.h"

/* runtime/driver.c */

/* The driver entry points libfusrt uses, filled by rt_driver_init from dlsym. */
typedef struct RtDriver {
	CUresult (*init)(unsigned flags);
	CUresult (*device_get_count)(int *n);
	CUresult (*device_get)(CUdevice *d, int ordinal);
	CUresult (*device_get_attribute)(int *v, CUdevice_attribute a, CUdevice d);
	CUresult (*device_get_name)(char *name, int len, CUdevice d);
	CUresult (*primary_ctx_retain)(CUcontext *c, CUdevice d);
	CUresult (*ctx_set_current)(CUcontext c);
	CUresult (*ctx_synchronize)(void);
	CUresult (*module_load_data)(CUmodule *m, const void *image);
	CUresult (*module_unload)(CUmodule m);
	CUresult (*module_get_function)(CUfunction *f, CUmodule m, const char *name);
	CUresult (*func_set_attribute)(CUfunction f, CUfunction_attribute a, int v);
	CUresult (*launch_kernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
				  unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
				  void **extra);
	CUresult (*mem_alloc)(CUdeviceptr *p, size_t n);
	CUresult (*mem_free)(CUdeviceptr p);
	CUresult (*memcpy_htod)(CUdeviceptr dst, const void *src, size_t n);
	CUresult (*memcpy_dtoh)(void *dst, CUdeviceptr src, size_t n);
	CUresult (*memset_d8)(CUdeviceptr dst, unsigned char v, size_t n);
	CUresult (*memset_d32)(CUdeviceptr dst, unsigned v, size_t n);
	/* Stream-ordered allocation (CUDA 11.2 drivers and later), for the workspace of grid
	 * reductions; NULL when the driver lacks them (then the synchronous calls are used). */
	CUresult (*mem_alloc_async)(CUdeviceptr *p, size_t n, CUstream s);
	CUresult (*mem_free_async)(CUdeviceptr p, CUstream s);
	CUresult (*memset_d32_async)(CUdeviceptr dst, unsigned v, size_t n, CUstream s);
	CUresult (*event_create)(CUevent *e, unsigned flags);
	CUresult (*event_record)(CUevent e, CUstream s);
	CUresult (*event_synchronize)(CUevent e);
	CUresult (*event_elapsed_time)(float *ms, CUevent a, CUevent b);
	CUresult (*event_destroy)(CUevent e);
	CUresult (*get_error_name)(CUresult r, const char **s);
	CUresult (*get_error_string)(CUresult r, const char **s);
} RtDriver;
extern RtDriver rt_cu;

/* Sets the last error from a failed driver call: "WHAT: CUDA_ERROR_X: description", with the
 * status that fits the error (out of memory, launch failure, ...). */
fusrt_status rt_cu_fail(CUresult r, const char *what);

/* 1 when libcuda loads, cuInit succeeds and there is at least one device. The probe runs in
 * a forked child, so the calling process never initializes CUDA (a parent that called cuInit
 * cannot use CUDA in children it forks later: the unit-test runner forks every test). */
int rt_have_cuda_device(void);
/* Loads the driver, initializes it and makes device 0's primary context current. Idempotent;
 * sets the last error and returns the status on failure. */
fusrt_status rt_driver_init(void);
/* The device's compute capability as major*10+minor (after rt_driver_init). */
int rt_device_arch(void);
/* The device's opt-in shared memory limit per block in bytes
 * (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN; after rt_driver_init). */
int rt_device_smem_optin(void);

/* runtime/memory.c: the thread's last error. */
fusrt_status rt_fail(fusrt_status s, const char *fmt, ...) PRINTF(2, 3);
/* Runs body(ctx) under a DieTrap (support.h): a die() inside (a fusc bug, host out of memory)
 * returns FUSRT_ERR_INTERNAL with "WHAT: internal error at FILE:LINE: TEXT ..." instead of
 * aborting the host program. body must hold no lock where it can die. */
fusrt_status rt_guard(const char *what, fusrt_status (*body)(void *), void *ctx);
void rt_clear_error(void);

/* runtime/binary_cache.c: the disk cache of binaries, one per key in DIR/KEY.cubin (KEY: 64 hex
 * digits). The folder is trusted only when it is this user's alone: created 0700, and an
 * existing one that is not a directory owned by this user, or that group or others can write,
 * is refused (the caller then compiles without the cache). An entry is a header (magic
 * "FUSCBIN2", key, payload length, SHA-256 of the payload) then the payload; it is loaded only
 * from a private regular file whose header matches. Stores go to a temporary (O_EXCL, 0600)
 * renamed into place, so readers never see a partial entry. */
typedef struct RtCacheKey {
	unsigned char b[SHA256_BYTES];
} RtCacheKey;
/* SHA-256 of the fusc version, the NVRTC version, arch, options and source. */
RtCacheKey rt_cache_key(const char *source, const char *options, int arch);
/* The default folder: $FUSRT_CACHE_DIR, else $XDG_CACHE_HOME/fusc, else $HOME/.cache/fusc;
 * NULL when none can be determined or FUSRT_NO_CACHE is set. Caller frees. */
char *rt_cache_default_dir(void);
char *rt_cache_path(const char *dir, RtCacheKey key); /* caller frees */
/* mkdir -p, each new folder 0700; false with *err (malloc'd). */
bool rt_make_dirs(const char *dir, char **err);
/* The folder opened (O_DIRECTORY), created first (0700, with its parents) when `create`;
 * -1 with *why (malloc'd) when it cannot be opened or is refused, and -1 with *why NULL when
 * it does not exist and create is false. */
int rt_cache_open_dir(const char *dir, bool create, char **why);
/* Loads an entry: true with *data (malloc'd) and *len, or false with *why (malloc'd; NULL
 * when there is no entry or no folder: not an error). */
bool rt_cache_load(const char *dir, RtCacheKey key, char **data, size_t *len, char **why);
/* Stores an entry (creating the folder). False with *err (malloc'd). */
bool rt_cache_store(const char *dir, RtCacheKey key, const void *data, size_t len, char **err);

/* runtime/fusrt.c */
/* A compiled binary for one architecture: a cubin for sm_`arch` or PTX (with its NUL) for
 * compute_`arch`. */
typedef struct RtImage {
	int arch;
	bool ptx;
	const void *data;
	size_t size;
} RtImage;
/* The image that runs on a device of compute capability dev (major*10+minor): the cubin of
 * the highest arch of dev's major not above dev, else the PTX of the highest arch not above
 * dev; -1 when none does. */
int rt_pick_image(const RtImage *im, int n, int dev);
/* The binary (cubin, or PTX with its NUL) for device source `src`: from the disk cache in
 * cache_dir (NULL: none; use_cache false: compile anyway), else from NVRTC, then stored.
 * Sets fusrt_last_compile_cached and, when the cache could not be used as it should,
 * fusrt_last_cache_note. */
fusrt_status rt_get_binary(const char *src, const char *name, int arch, bool cubin,
			   const char *cache_dir, bool use_cache, char **bin, size_t *len);
/* The checks fusrt_launch makes before launching (no GPU needed): argument and size counts,
 * sizes consistent with the file, null pointers, preconditions (a refusal when no variant of
 * the chain k, k->fallback, ... holds: the last one's failure); then the launch dimensions
 * of rt_pick_kernel's kernel, dims = grid x, y, z, block x, y, z. */
fusrt_status rt_launch_check(Kernel *k, const fusrt_arg *args, int nargs, const int64_t *sizes,
			     int nsizes, int64_t dims[6]);
/* The kernel a launch runs: the first variant of the chain k, k->fallback, ... whose
 * preconditions hold (kernel_pick; dims from rt_launch_check are its). Arguments as checked
 * by rt_launch_check. */
Kernel *rt_pick_kernel(Kernel *k, const fusrt_arg *args, const int64_t *sizes);
/* The arguments and sizes of segment sg of a segmented fusion launched with args and sizes
 * (out: sg->fusion->nsig entries, out_sizes: its nsizes), the workspace buffers at ws (NULL:
 * not allocated yet; each is then taken as address 256, aligned as every allocation is, to
 * tell which variant runs). */
void rt_segment_args(const Segment *sg, const fusrt_arg *args, const int64_t *sizes,
		     const CUdeviceptr *ws, fusrt_arg *out, int64_t *out_sizes);
/* Checks a kernel's shared memory (static Kernel.smem_bytes, or dynamic when
 * Kernel.smem_dynamic) against the device's opt-in limit per block. FUSRT_OK, or
 * FUSRT_ERR_LAUNCH with *msg (malloc'd) worded as the generated launcher's: "FUSION: needs R
 * bytes of shared memory (dynamic D, static S, required R) but the device allows L per
 * block". */
fusrt_status rt_check_smem(Kernel *k, int limit, char **msg);
/* The fusion IR of a compiled module's fusion (NULL when there is none of that name). */
Fusion *rt_module_fusion(const fusrt_module *m, const char *name);
/* The first of the fusion's variants (Kernel.fallback chain); NULL: no such fusion. */
Kernel *rt_module_kernel(const fusrt_module *m, const char *name);

/* runtime/dump.c: FUSRT_DUMP=DIR. rt_dump_compile writes DIR/STEM-KEY.fus, .cu, .ptx and
 * .dims for one compile (source, the device code cu lowered for arch, its kernels) and
 * returns the .dims path (malloc'd; NULL when DIR cannot be made), to which rt_dump_launch
 * appends each launch's sizes and dims (grid x, y, z, block x, y, z). */
char *rt_dump_compile(const char *dir, const char *name, const char *source, size_t len,
		      int arch, const char *cu, Kernel **ks, int nk);
void rt_dump_launch(const char *dims_path, Kernel *k, const int64_t *sizes,
		    const int64_t dims[6]);

/* tools/run.c: `fusc run FILE [--fusion NAME] [--dims M=..,N=..] [--seed S] [--bench]`.
 * argv[0] is the subcommand's name ("run"), options follow. Returns the exit status: 0 PASS,
 * 1 a mismatch or diagnostics in the file, 2 usage, I/O, bad dims or no CUDA device. */
int fusc_run_main(int argc, char **argv);

#endif
