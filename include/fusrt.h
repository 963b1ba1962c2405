/* fusrt.h: libfusrt, the fusc JIT runtime (plain C99).
 *
 * Compiles .fus text at run time (fusc front end and lowering, NVRTC for the device's
 * architecture), caches the binary on disk, loads it with the CUDA driver API and launches a
 * fusion by name. The driver (libcuda.so.1) is loaded with dlopen at first use: a program
 * linked with libfusrt runs on machines without a GPU, and every call then fails cleanly with
 * FUSRT_ERR_NO_DRIVER and the message "no CUDA driver (libcuda.so.1 not found)".
 *
 * Every call returns a fusrt_status; on failure fusrt_last_error() gives a readable reason
 * (the diagnostics for a compile error, the NVRTC log, the CUDA error, ...). The message is
 * per thread and valid until the thread's next fusrt call.
 *
 *     fusrt_module *m;
 *     if (fusrt_compile(text, strlen(text), "saxpy.fus", NULL, &m) != FUSRT_OK)
 *             fprintf(stderr, "%s\n", fusrt_last_error());
 *     fusrt_arg args[] = {fusrt_f(2.0), fusrt_ptr(x), fusrt_ptr(y), fusrt_ptr(z)};
 *     int64_t sizes[] = {n};
 *     fusrt_launch(m, "saxpy", args, 4, sizes, 1, NULL);
 *     fusrt_synchronize();
 *
 * Environment: FUSRT_CACHE_DIR overrides the cache folder ($XDG_CACHE_HOME/fusc, else
 * ~/.cache/fusc; created 0700, and used only when it is this user's and not writable by group
 * or others: see fusrt_last_cache_note); FUSRT_NO_CACHE=1 disables the cache; FUSRT_LIBCUDA
 * names another driver library (tests use it to simulate a machine without one);
 * FUSRT_LIBNVRTC another NVRTC; FUSRT_DUMP=DIR writes each compile's .fus, CUDA, PTX and
 * launch dimensions into DIR, and each launch's sizes (docs/runtime.md).
 */
#ifndef FUSRT_H
#define FUSRT_H

#include <stddef.h>
#include <stdint.h>

/* The library's version (fusrt_version() gives the one the program runs with). The soname is
 * libfusrt.so.MAJOR. */
#define FUSRT_VERSION_MAJOR 0
#define FUSRT_VERSION_MINOR 1
#define FUSRT_VERSION_PATCH 0

/* What libfusrt exports: the functions declared here and nothing else (it is built with
 * -fvisibility=hidden; libfusrt.a's internal symbols are local too). */
#if defined(__GNUC__) || defined(__clang__)
#define FUSRT_API __attribute__((visibility("default")))
#else
#define FUSRT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fusrt_status {
	FUSRT_OK = 0,
	FUSRT_ERR_INVALID,        /* bad argument: NULL, unknown fusion, wrong count, bad size */
	FUSRT_ERR_COMPILE,        /* the .fus text has errors (message: the diagnostics) */
	FUSRT_ERR_NO_DRIVER,      /* libcuda.so.1 not found or unusable */
	FUSRT_ERR_NO_DEVICE,      /* cuInit failed or no CUDA device */
	FUSRT_ERR_ARCH,           /* the kernel needs a newer GPU than this one */
	FUSRT_ERR_NVRTC,          /* NVRTC failed (message: its log) */
	FUSRT_ERR_OUT_OF_MEMORY,  /* device memory */
	FUSRT_ERR_PRECONDITION,   /* a launch precondition failed (alignment, size multiple) */
	FUSRT_ERR_LAUNCH,         /* the launch or the kernel failed */
	FUSRT_ERR_CUDA,           /* another CUDA driver error */
	FUSRT_ERR_INTERNAL,       /* a bug in fusc (message: where); the process goes on */
} fusrt_status;

/* "0.1.0": FUSRT_VERSION_MAJOR.MINOR.PATCH of the library in use. */
FUSRT_API const char *fusrt_version(void);

/* The reason for the calling thread's last failure ("" when none). */
FUSRT_API const char *fusrt_last_error(void);
/* "FUSRT_ERR_NO_DRIVER", ... */
FUSRT_API const char *fusrt_status_name(fusrt_status s);

/* Loads the driver and makes device 0's primary context current on the calling thread. Every
 * call below does it when needed; calling it first just reports problems early. */
FUSRT_API fusrt_status fusrt_init(void);
/* The device's name and compute capability as major*10+minor (e.g. 90). */
FUSRT_API fusrt_status fusrt_device_info(char *name, size_t name_len, int *arch);

/* ---- device memory ---- */
typedef uint64_t fusrt_devptr;  /* a CUdeviceptr */
typedef void *fusrt_stream;     /* a CUstream; NULL is the default stream */

FUSRT_API fusrt_status fusrt_malloc(fusrt_devptr *out, size_t bytes);
FUSRT_API fusrt_status fusrt_free(fusrt_devptr p);
FUSRT_API fusrt_status fusrt_copy_to_device(fusrt_devptr dst, const void *src, size_t bytes);
FUSRT_API fusrt_status fusrt_copy_to_host(void *dst, fusrt_devptr src, size_t bytes);
FUSRT_API fusrt_status fusrt_memset(fusrt_devptr dst, unsigned char byte, size_t bytes);
FUSRT_API fusrt_status fusrt_synchronize(void);

/* ---- compiling ---- */
typedef struct fusrt_module fusrt_module;

typedef struct fusrt_options {
	int arch;             /* 0: the device's; else e.g. 80 (must not exceed the device's) */
	const char *cache_dir;/* NULL: the default; "" disables the cache */
} fusrt_options;

/* Compiles every fusion of `source` (len bytes; `name` is used in diagnostics). With an
 * explicit arch and no driver or device (FUSRT_ERR_NO_DRIVER, FUSRT_ERR_NO_DEVICE), NVRTC
 * alone compiles the cubin for sm_ARCH and stores it in the cache (the entry a GPU of that
 * arch finds later), and the module describes its fusions and checks launch arguments; its
 * first launch loads the cubin (and fails as every call does where there is still no
 * driver). */
FUSRT_API fusrt_status fusrt_compile(const char *source, size_t len, const char *name,
				     const fusrt_options *opt, fusrt_module **out);
/* Releases the module (its device code too). NULL is fine. */
FUSRT_API void fusrt_module_free(fusrt_module *m);
/* Whether the last fusrt_compile of this thread took the binary from the disk cache. */
FUSRT_API int fusrt_last_compile_cached(void);
/* Why the last fusrt_compile of this thread could not use the disk cache as it should, or ""
 * when nothing went wrong (a hit, a stored entry, or the cache off): a cache folder that is
 * not this user's or that group or others can write (refused: the binary is compiled and not
 * stored), an entry rejected (not private, wrong key, length or SHA-256; then rebuilt), an
 * entry that could not be written. The compilation itself succeeds either way. */
FUSRT_API const char *fusrt_last_cache_note(void);

/* ---- introspection ---- */
FUSRT_API int fusrt_fusion_count(const fusrt_module *m);
/* NULL when out of range */
FUSRT_API const char *fusrt_fusion_name(const fusrt_module *m, int i);

typedef enum fusrt_arg_kind { FUSRT_SCALAR, FUSRT_INPUT, FUSRT_OUTPUT } fusrt_arg_kind;
typedef struct fusrt_arg_info {
	const char *name;
	fusrt_arg_kind kind;
	const char *dtype;    /* "f32", "f16", ... */
	int ndim;             /* tensors */
} fusrt_arg_info;
/* The launch arguments of a fusion (its signature in declaration order) and its size
 * symbols (in launcher order). -1 / NULL when the fusion does not exist. */
FUSRT_API int fusrt_fusion_nargs(const fusrt_module *m, const char *fusion);
FUSRT_API fusrt_status fusrt_fusion_arg(const fusrt_module *m, const char *fusion, int i,
					fusrt_arg_info *out);
FUSRT_API int fusrt_fusion_nsizes(const fusrt_module *m, const char *fusion);
/* Dimension d of argument i (a tensor) of a fusion: the index of its size symbol (as
 * fusrt_fusion_size_name counts them), or -1 when it is a constant, whose extent goes to
 * *extent (when not NULL); -2 when there is no such argument or dimension. Wrappers read
 * the sizes from the shapes of the tensors passed (python/fusc). */
FUSRT_API int fusrt_fusion_arg_dim(const fusrt_module *m, const char *fusion, int i, int d,
				   int64_t *extent);
FUSRT_API const char *fusrt_fusion_size_name(const fusrt_module *m, const char *fusion,
					      int i);

/* ---- launching ---- */

/* One launch argument: a scalar in `f` (floating params) or `i` (integer and bool params), a
 * tensor's device pointer in `ptr`. */
typedef struct fusrt_arg {
	double f;
	int64_t i;
	fusrt_devptr ptr;
} fusrt_arg;

/* (.i also gets v truncated when it fits in an int64_t, else 0: NaN and infinities too) */
static inline fusrt_arg fusrt_f(double v)
{
	fusrt_arg a = {0, 0, 0};
	a.f = v;
	a.i = v > -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v : 0;
	return a;
}
static inline fusrt_arg fusrt_i(int64_t v) { fusrt_arg a = {0, 0, 0}; a.i = v; a.f = (double)v; return a; }
static inline fusrt_arg fusrt_ptr(fusrt_devptr p) { fusrt_arg a = {0, 0, 0}; a.ptr = p; return a; }

/* Launches fusion `fusion` asynchronously on `stream`: args in signature order (nargs of
 * them), sizes in size-symbol order (nsizes). Checks the counts, the sizes (non-negative and
 * consistent with the constant dimensions of the file) and the kernel's preconditions
 * (pointer alignment, size multiples) and launches nothing when one fails. A grid with a zero
 * dimension launches nothing and succeeds. */
FUSRT_API fusrt_status fusrt_launch(fusrt_module *m, const char *fusion, const fusrt_arg *args,
				    int nargs, const int64_t *sizes, int nsizes,
				    fusrt_stream stream);

/* Times the launch with CUDA events: `warmup` untimed launches, then `iters` timed ones;
 * *median_ms is the median of the per-launch times. */
FUSRT_API fusrt_status fusrt_time_launch(fusrt_module *m, const char *fusion,
					 const fusrt_arg *args, int nargs, const int64_t *sizes,
					 int nsizes, int warmup, int iters, double *median_ms);

/* ---- ahead-of-time objects (fusc --emit=obj) ----
 * An object written by `fusc FILE --emit=obj -o x.o` holds the .fus text, how fusc lowered
 * it, and its kernels compiled by NVRTC (a cubin per --arch, and the PTX of the highest for
 * newer GPUs); its launchers (declared in x.h) call fusrt_aot_launch. Programs call the
 * launchers, not this. */
typedef struct fusrt_aot_binary {
	int arch;             /* sm_ARCH cubin, or compute_ARCH PTX (NUL-terminated) when ptx */
	int ptx;
	const void *data;
	size_t size;
} fusrt_aot_binary;

typedef struct fusrt_aot {
	const char *fusc_version;   /* of the fusc that wrote the object */
	const char *name;           /* the .fus file's name (messages) */
	const char *source;         /* its text, source_len bytes */
	size_t source_len;
	int arch;                   /* the kernels were lowered for sm_ARCH */
	const char *prefix;         /* fusc --prefix, "" for none */
	const char *device_sha256;  /* SHA-256 (hex) of the device code the binaries come from */
	const fusrt_aot_binary *binaries;
	int nbinaries;
	fusrt_module **module;      /* the object's module: NULL until its first launch */
} fusrt_aot;

/* fusrt_launch for a fusion of an object. The first call makes the object's module: the
 * text lowered again (milliseconds; no NVRTC), which must give the device code the binaries
 * were compiled from (else FUSRT_ERR_INVALID: the object was made by another fusc, rebuild
 * it); the first launch loads the binary that fits the device (its major arch's cubin, else
 * the PTX; none: FUSRT_ERR_ARCH). Arguments are checked as fusrt_launch checks them, before
 * the driver is needed. */
FUSRT_API fusrt_status fusrt_aot_launch(const fusrt_aot *aot, const char *fusion,
					const fusrt_arg *args, int nargs, const int64_t *sizes,
					int nsizes, fusrt_stream stream);

#ifdef __cplusplus
}
#endif

#endif
