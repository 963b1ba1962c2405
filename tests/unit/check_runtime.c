/* check_runtime.c: libfusrt and `fusc run`.
 *
 * Without a GPU: every call fails with a clear error (no driver, NULL arguments, bad names,
 * bad sizes) and never crashes; the launch checks (counts, sizes, alignment, launch dims) and
 * the disk cache (truncated, corrupted, renamed and foreign entries and foreign folders are
 * rejected; rt_get_binary through NVRTC) work on their own; `fusc run` rejects bad options,
 * dims and fusion names with exit 2 before any launch.
 * With a GPU (TCase "gpu"): saxpy through libfusrt matches the interpreter, the cache is hit,
 * a corrupt entry is rebuilt, a folder others can write is not used, and `fusc run` passes.
 */
#include <check.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interp/interp.h"
#include "runtime/runtime.h"
#include "tests/unit/testutil.h"

static const char saxpy_src[] =
	"fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
	"  z[i] = a * x[i] + y[i];\n"
	"}\n";

/* A vectorized bias add: needs N % 4 == 0 and 16-byte aligned pointers. */
static const char bias_src[] =
	"fusion bias(x: f32[M, N], b: f32[N]) -> (y: f32[M, N]) {\n"
	"  y[i, j] = x[i, j] + b[j];\n"
	"}\n"
	"schedule bias {\n"
	"  y.split(j, 4) -> (jo, jv);\n"
	"  y.split(jo, 128) -> (jb, jt);\n"
	"  y.bind(i, blockIdx.x);\n"
	"  y.bind(jt, threadIdx.x);\n"
	"  y.vectorize(jv);\n"
	"}\n";

static const char *no_lib = "/nonexistent/libcuda.so.1";

/* A fresh temporary folder (left in /tmp: a few small files). */
static char *temp_dir(void)
{
	char *d = xstrdup("/tmp/fusc_rt_XXXXXX");

	ck_assert_ptr_nonnull(mkdtemp(d));
	return d;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	s = xmalloc(n + 1);
	ck_assert_int_eq(fread(s, 1, n, f), n);
	s[n] = 0;
	fclose(f);
	if (len)
		*len = n;
	return s;
}

static void write_all(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* ---- no driver ------------------------------------------------------------------------ */

START_TEST(test_no_driver)
{
	fusrt_module *m = (fusrt_module *)1;
	fusrt_devptr p = 123;
	const char *want = "no CUDA driver (/nonexistent/libcuda.so.1 not found)";

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_init(), FUSRT_ERR_NO_DRIVER);
	ck_assert_str_eq(fusrt_last_error(), want);
	ck_assert_int_eq(fusrt_malloc(&p, 16), FUSRT_ERR_NO_DRIVER);
	ck_assert_uint_eq(p, 0);
	ck_assert_str_eq(fusrt_last_error(), want);
	ck_assert_int_eq(fusrt_synchronize(), FUSRT_ERR_NO_DRIVER);
	ck_assert_int_eq(fusrt_copy_to_device(8, &p, 8), FUSRT_ERR_NO_DRIVER);
	ck_assert_int_eq(fusrt_device_info(NULL, 0, NULL), FUSRT_ERR_NO_DRIVER);
	ck_assert_int_eq(fusrt_compile(saxpy_src, strlen(saxpy_src), "saxpy.fus", NULL, &m),
			 FUSRT_ERR_NO_DRIVER);
	ck_assert_ptr_null(m);
	ck_assert_str_eq(fusrt_last_error(), want);
	ck_assert_int_eq(rt_have_cuda_device(), 0);
	ck_assert_str_eq(fusrt_status_name(FUSRT_ERR_NO_DRIVER), "FUSRT_ERR_NO_DRIVER");
}
END_TEST

/* On a machine without libcuda.so.1 the message names it exactly. */
START_TEST(test_no_driver_default_name)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	unsetenv("FUSRT_LIBCUDA");
	if (lib) { /* a driver is installed: nothing to check here */
		dlclose(lib);
		return;
	}
	ck_assert_int_eq(fusrt_init(), FUSRT_ERR_NO_DRIVER);
	ck_assert_str_eq(fusrt_last_error(), "no CUDA driver (libcuda.so.1 not found)");
	ck_assert_int_eq(rt_have_cuda_device(), 0);
}
END_TEST

/* libfusrt scans all `len` bytes: a NUL byte is an error, not the end of the source
 * (issue 11 item 14: a bad schedule after a NUL used to compile). */
START_TEST(test_compile_nul_byte)
{
	static const char src[] = "fusion f(x: f32[N]) -> (y: f32[N]) { y[i] = x[i]; }\n\0"
				  "schedule f { y.bind(q, blockIdx.x); }\n";
	fusrt_module *m = NULL;

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_compile(src, sizeof src - 1, "nul.fus", NULL, &m), FUSRT_ERR_COMPILE);
	ck_assert_ptr_null(m);
	ck_assert_contains(fusrt_last_error(), "nul.fus:2:1: error: unexpected NUL byte");
}
END_TEST

/* Errors in the text are reported before the driver is needed. */
START_TEST(test_compile_error_without_gpu)
{
	const char *bad = "fusion f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[j];\n}\n";
	fusrt_module *m = NULL;

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_compile(bad, strlen(bad), "bad.fus", NULL, &m), FUSRT_ERR_COMPILE);
	ck_assert_ptr_null(m);
	ck_assert_contains(fusrt_last_error(), "bad.fus:2:");
	ck_assert_contains(fusrt_last_error(), "error:");
}
END_TEST

START_TEST(test_null_arguments)
{
	fusrt_module *m = NULL;
	fusrt_arg_info info;
	fusrt_arg args[1] = {{0, 0, 0}};
	int64_t n = 4;
	double ms;

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_compile(NULL, 0, NULL, NULL, &m), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "fusrt_compile: NULL source");
	ck_assert_int_eq(fusrt_compile(saxpy_src, strlen(saxpy_src), NULL, NULL, NULL),
			 FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_compile("", 0, NULL, NULL, &m) != FUSRT_OK, 1);
	ck_assert_int_eq(fusrt_launch(NULL, "saxpy", args, 1, &n, 1, NULL), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "fusrt_launch: NULL module");
	ck_assert_int_eq(fusrt_launch(NULL, NULL, NULL, -1, NULL, -5, NULL), FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_time_launch(NULL, "x", args, 1, &n, 1, 1, 1, &ms),
			 FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_time_launch(NULL, "x", args, 1, &n, 1, 1, 0, NULL),
			 FUSRT_ERR_INVALID);
	fusrt_module_free(NULL);
	ck_assert_int_eq(fusrt_fusion_count(NULL), 0);
	ck_assert_ptr_null(fusrt_fusion_name(NULL, 0));
	ck_assert_int_eq(fusrt_fusion_nargs(NULL, "saxpy"), -1);
	ck_assert_int_eq(fusrt_fusion_nsizes(NULL, NULL), -1);
	ck_assert_ptr_null(fusrt_fusion_size_name(NULL, "saxpy", 0));
	ck_assert_int_eq(fusrt_fusion_arg(NULL, "saxpy", 0, &info), FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_malloc(NULL, 4), FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_copy_to_device(0, &n, 8), FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_copy_to_host(NULL, 8, 8), FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_memset(0, 0, 8), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_status_name((fusrt_status)99), "FUSRT_ERR_UNKNOWN");
	ck_assert_str_eq(fusrt_status_name(FUSRT_ERR_INTERNAL), "FUSRT_ERR_INTERNAL");
	/* the library's version is the header's and fusc's (fusc --version, fusrt.pc) */
	ck_assert_str_eq(fusrt_version(), FUSC_VERSION);
	ck_assert_int_eq(fusrt_free(0), FUSRT_OK); /* like free(NULL) */
	ck_assert_str_eq(fusrt_last_error(), "");
}
END_TEST

/* ---- launch checks (no GPU) ----------------------------------------------------------- */

START_TEST(test_launch_check)
{
	TestCompile *tc = tc_compile(saxpy_src, true);
	fusrt_arg args[4] = {fusrt_f(2), fusrt_ptr(0x1000), fusrt_ptr(0x2000), fusrt_ptr(0x3000)};
	int64_t n = 4096, dims[6];

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 1, dims), FUSRT_OK);
	ck_assert_int_eq(dims[1], 1);
	ck_assert_int_eq(dims[4] * dims[5], 1);
	int64_t grid = dims[0], block = dims[3];
	n = 4096 * 8; /* the grid grows with N, the block does not */
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 1, dims), FUSRT_OK);
	ck_assert_int_eq(dims[0], grid * 8);
	ck_assert_int_eq(dims[3], block);
	n = 4096;

	ck_assert_int_eq(rt_launch_check(k, args, 3, &n, 1, dims), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "fusion saxpy takes 4 arguments (a, x, y, z), got 3");
	ck_assert_int_eq(rt_launch_check(k, NULL, 4, &n, 1, dims), FUSRT_ERR_INVALID);
	ck_assert_int_eq(rt_launch_check(k, args, 4, NULL, 1, dims), FUSRT_ERR_INVALID);
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 2, dims), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "fusion saxpy takes 1 sizes (N), got 2");

	n = -1;
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 1, dims), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "fusion saxpy: size N is negative (-1)");

	n = 4;
	args[2] = fusrt_ptr(0);
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 1, dims), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "fusion saxpy: argument y is a null pointer");
	n = 0; /* an empty tensor needs no memory, and nothing is launched */
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 1, dims), FUSRT_OK);
	ck_assert_int_eq(dims[0], 0);
	n = INT64_C(1) << 62; /* 2^64 bytes of f32: refused, null pointer or not */
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 1, dims), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "fusion saxpy: sizes too large: the size of x in "
			 "bytes does not fit in 64 bits");

	/* the auto-scheduled saxpy is vectorized for 16-byte aligned pointers; otherwise its
	 * scalar fallback runs (with the fallback's launch dims), never a refusal */
	n = 4096;
	args[2] = fusrt_ptr(0x2000);
	ck_assert_ptr_eq(rt_pick_kernel(k, args, &n), k);
	ck_assert_ptr_nonnull(k->fallback);
	ck_assert_int_gt(k->preconds.len, 0);
	args[1] = fusrt_ptr(0x1004);
	ck_assert_ptr_eq(rt_pick_kernel(k, args, &n), k->fallback);
	ck_assert_int_eq(rt_launch_check(k, args, 4, &n, 1, dims), FUSRT_OK);
	int64_t want = 1;
	ck_assert(ir_eval_i64(k->fallback->launch[PT_BIDX], &n, &want));
	ck_assert_int_eq(dims[0], want);
	tc_free(tc);
}
END_TEST

START_TEST(test_launch_check_preconditions)
{
	TestCompile *tc = tc_compile(bias_src, true);
	fusrt_arg args[3] = {fusrt_ptr(0x1000), fusrt_ptr(0x2000), fusrt_ptr(0x3000)};
	int64_t sizes[2] = {3, 1024}, dims[6]; /* M, N */

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_str_eq(tc->prog->fusions[0]->sizes[0]->name, "M");
	ck_assert_int_eq(rt_launch_check(tc->kernels[0], args, 3, sizes, 2, dims), FUSRT_OK);
	ck_assert_int_eq(dims[0], 3);
	ck_assert_int_eq(dims[3], 128);
	sizes[1] = 1001;
	ck_assert_int_eq(rt_launch_check(tc->kernels[0], args, 3, sizes, 2, dims),
			 FUSRT_ERR_PRECONDITION);
	ck_assert_str_eq(fusrt_last_error(), "fusion bias: N = 1001 is not a multiple of 4 "
			 "(vectorized access, t.fus:9:3)");
	sizes[1] = 1024;
	args[1] = fusrt_ptr(0x2008);
	ck_assert_int_eq(rt_launch_check(tc->kernels[0], args, 3, sizes, 2, dims),
			 FUSRT_ERR_PRECONDITION);
	ck_assert_str_eq(fusrt_last_error(), "fusion bias: b is not 16-byte aligned "
			 "(vectorized access, t.fus:9:3)");
	tc_free(tc);
}
END_TEST

START_TEST(test_launch_check_block_limit)
{
	const char *src = "fusion big(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i];\n}\n"
			  "schedule big {\n  y.split(i, 512) -> (io, ii);\n"
			  "  y.bind(io, blockIdx.x);\n  y.bind(ii, threadIdx.x);\n}\n";
	TestCompile *tc = tc_compile(src, true);
	fusrt_arg args[2] = {fusrt_ptr(0x1000), fusrt_ptr(0x2000)};
	int64_t n = 1000, dims[6];

	ck_assert_msg(tc->kernels != NULL, "%s", tc->diags);
	ck_assert_int_eq(rt_launch_check(tc->kernels[0], args, 2, &n, 1, dims), FUSRT_OK);
	ck_assert_int_eq(dims[0], 2);
	ck_assert_int_eq(dims[3], 512);
	tc_free(tc);
}
END_TEST

/* ---- the disk cache ------------------------------------------------------------------- */

static const char payload[] = "\x7f" "ELF fake cubin payload with some bytes \x01\x02\x03";

/* A distinct key per n. */
static RtCacheKey key_of(int n)
{
	char src[32];

	snprintf(src, sizeof src, "source %d", n);
	return rt_cache_key(src, "cubin", 80);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_mode & 07777;
}

START_TEST(test_cache_roundtrip)
{
	char *dir = temp_dir(), *sub = NULL, *data = NULL, *why = NULL;
	size_t len = 0;
	Buf b = {0};

	buf_printf(&b, "%s/a/b", dir); /* parents are created */
	sub = b.s;
	ck_assert(!rt_cache_load(sub, key_of(42), &data, &len, &why));
	ck_assert_ptr_null(why); /* a missing folder or entry is not an error */
	ck_assert(rt_cache_store(sub, key_of(42), payload, sizeof payload, NULL));
	ck_assert(!rt_cache_load(sub, key_of(43), &data, &len, &why));
	ck_assert_ptr_null(why);
	ck_assert(rt_cache_load(sub, key_of(42), &data, &len, &why));
	ck_assert_uint_eq(len, sizeof payload);
	ck_assert_int_eq(memcmp(data, payload, len), 0);
	free(data);
	/* the folders it made are private; so is the entry */
	ck_assert_uint_eq(mode_of(sub) & 077, 0);
	char *mid = xstrdup(sub);
	*strrchr(mid, '/') = 0;
	ck_assert_uint_eq(mode_of(mid) & 077, 0);
	free(mid);
	char *path = rt_cache_path(sub, key_of(42));
	ck_assert_uint_eq(mode_of(path), 0600);
	/* KEY.cubin: 64 hex digits of SHA-256; no temporary file is left behind */
	ck_assert_uint_eq(strlen(path + strlen(sub)), 1 + 64 + strlen(".cubin"));
	Buf cmd = {0};
	buf_printf(&cmd, "test $(ls -A %s | wc -l) -eq 1", sub);
	ck_assert_int_eq(system(cmd.s), 0);
	buf_free(&cmd);
	/* an empty payload is a valid entry */
	ck_assert(rt_cache_store(sub, key_of(7), "", 0, NULL));
	ck_assert(rt_cache_load(sub, key_of(7), &data, &len, NULL));
	ck_assert_uint_eq(len, 0);
	free(data);
	free(path);
	free(sub);
	free(dir);
}
END_TEST

START_TEST(test_cache_truncated)
{
	char *dir = temp_dir(), *data, *why = NULL, *path, *full;
	size_t len, flen;

	ck_assert(rt_cache_store(dir, key_of(99), payload, sizeof payload, NULL));
	path = rt_cache_path(dir, key_of(99));
	full = read_all(path, &flen);
	for (size_t cut = 0; cut < flen; cut++) {
		write_all(path, full, cut);
		ck_assert_msg(!rt_cache_load(dir, key_of(99), &data, &len, &why), "cut at %zu loaded",
			      cut);
		ck_assert_ptr_nonnull(why);
		ck_assert_ptr_null(data);
		free(why);
	}
	/* a longer file is rejected too */
	char *longer = xmalloc(flen + 1);
	memcpy(longer, full, flen);
	longer[flen] = 'x';
	write_all(path, longer, flen + 1);
	ck_assert(!rt_cache_load(dir, key_of(99), &data, &len, NULL));
	/* a store replaces the bad entry */
	ck_assert(rt_cache_store(dir, key_of(99), payload, sizeof payload, NULL));
	ck_assert(rt_cache_load(dir, key_of(99), &data, &len, NULL));
	free(data);
	free(longer);
	free(full);
	free(path);
	free(dir);
}
END_TEST

START_TEST(test_cache_corrupt)
{
	char *dir = temp_dir(), *data, *why = NULL, *path, *full;
	size_t len, flen;

	ck_assert(rt_cache_store(dir, key_of(5), payload, sizeof payload, NULL));
	path = rt_cache_path(dir, key_of(5));
	full = read_all(path, &flen);
	for (size_t i = 0; i < flen; i++) { /* every single-byte corruption is caught */
		full[i] ^= 0x20;
		write_all(path, full, flen);
		ck_assert_msg(!rt_cache_load(dir, key_of(5), &data, &len, &why), "flip at %zu loaded",
			      i);
		ck_assert_ptr_nonnull(why);
		free(why);
		full[i] ^= 0x20;
	}
	write_all(path, full, flen);
	ck_assert(rt_cache_load(dir, key_of(5), &data, &len, NULL));
	free(data);
	/* an entry renamed to another key is rejected */
	char *other = rt_cache_path(dir, key_of(6));
	ck_assert_int_eq(rename(path, other), 0);
	ck_assert(!rt_cache_load(dir, key_of(6), &data, &len, &why));
	ck_assert_contains(why, "stored under another key");
	free(why);
	/* garbage */
	write_all(other, "hello", 5);
	ck_assert(!rt_cache_load(dir, key_of(6), &data, &len, NULL));
	free(other);
	free(full);
	free(path);
	free(dir);
}
END_TEST

/* A folder someone else can write, or that someone else owns, is refused for loads and
 * stores; so is an entry that is not a private regular file (issue 11 item 18). */
START_TEST(test_cache_refuses_foreign)
{
	char *dir = temp_dir(), *data = NULL, *why = NULL, *path;
	size_t len;

	ck_assert(rt_cache_store(dir, key_of(1), payload, sizeof payload, NULL));
	ck_assert_int_eq(chmod(dir, 0777), 0); /* group and others can plant entries */
	ck_assert(!rt_cache_load(dir, key_of(1), &data, &len, &why));
	ck_assert_contains(why, "is writable by group or others (mode 0777); not used");
	free(why);
	ck_assert(!rt_cache_store(dir, key_of(2), payload, sizeof payload, &why));
	ck_assert_contains(why, "is writable by group or others");
	free(why);
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert(rt_cache_load(dir, key_of(1), &data, &len, NULL));
	free(data);

	/* someone else's folder: as root, give it away; otherwise "/" is root's */
	const char *foreign = "/";
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(dir, 65534, 65534), 0);
		foreign = dir;
	}
	ck_assert(!rt_cache_store(foreign, key_of(3), payload, sizeof payload, &why));
	ck_assert_contains(why, "is owned by uid ");
	ck_assert_contains(why, "not by this user");
	free(why);
	if (geteuid() == 0) {
		ck_assert(!rt_cache_load(dir, key_of(1), &data, &len, &why));
		ck_assert_contains(why, "not by this user");
		free(why);
		ck_assert_int_eq(chown(dir, 0, 0), 0);
	}

	/* entries: writable by others, a symlink, someone else's */
	path = rt_cache_path(dir, key_of(1));
	ck_assert_int_eq(chmod(path, 0666), 0);
	ck_assert(!rt_cache_load(dir, key_of(1), &data, &len, &why));
	ck_assert_contains(why, "is writable by group or others (mode 0666)");
	free(why);
	ck_assert_int_eq(chmod(path, 0600), 0);
	char *target = rt_cache_path(dir, key_of(9));
	ck_assert_int_eq(rename(path, target), 0);
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert(!rt_cache_load(dir, key_of(1), &data, &len, &why));
	ck_assert_contains(why, "cannot open");
	free(why);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rename(target, path), 0);
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		ck_assert(!rt_cache_load(dir, key_of(1), &data, &len, &why));
		ck_assert_contains(why, "not by this user");
		free(why);
	}
	free(target);
	free(path);
	free(dir);
}
END_TEST

START_TEST(test_cache_store_failure)
{
	char *err = NULL;

	ck_assert(!rt_cache_store("/proc/fusc_no_such_dir", key_of(1), "x", 1, &err));
	ck_assert_ptr_nonnull(err);
	free(err);
}
END_TEST

START_TEST(test_cache_key_and_dir)
{
	RtCacheKey k = rt_cache_key("src", "cubin", 80);
	char *d;

	ck_assert_mem_eq(k.b, rt_cache_key("src", "cubin", 80).b, SHA256_BYTES);
	ck_assert_mem_ne(k.b, rt_cache_key("src2", "cubin", 80).b, SHA256_BYTES);
	ck_assert_mem_ne(k.b, rt_cache_key("src", "ptx", 80).b, SHA256_BYTES);
	ck_assert_mem_ne(k.b, rt_cache_key("src", "cubin", 90).b, SHA256_BYTES);
	/* fields are length-prefixed: moving text between options and source changes the key */
	ck_assert_mem_ne(rt_cache_key("bsrc", "a", 80).b, rt_cache_key("src", "ab", 80).b,
			 SHA256_BYTES);
	/* the key is SHA-256 of (fusc version, NVRTC version, arch, options, source) */
	int nv[2];
	nvrtc_version(&nv[0], &nv[1]);
	ck_assert_int_gt(nv[0], 0);
	Sha256 s;
	RtCacheKey want;
	int arch = 80;
	uint64_t n;
	sha256_init(&s);
	n = strlen("fusc " FUSC_VERSION);
	sha256_update(&s, &n, 8);
	sha256_update(&s, "fusc " FUSC_VERSION, n);
	n = sizeof nv;
	sha256_update(&s, &n, 8);
	sha256_update(&s, nv, sizeof nv);
	n = sizeof arch;
	sha256_update(&s, &n, 8);
	sha256_update(&s, &arch, sizeof arch);
	n = 5;
	sha256_update(&s, &n, 8);
	sha256_update(&s, "cubin", 5);
	n = 3;
	sha256_update(&s, &n, 8);
	sha256_update(&s, "src", 3);
	sha256_final(&s, want.b);
	ck_assert_mem_eq(k.b, want.b, SHA256_BYTES);

	unsetenv("FUSRT_NO_CACHE");
	unsetenv("FUSRT_CACHE_DIR");
	setenv("XDG_CACHE_HOME", "/xdg", 1);
	setenv("HOME", "/home/u", 1);
	ck_assert_str_eq(d = rt_cache_default_dir(), "/xdg/fusc");
	free(d);
	unsetenv("XDG_CACHE_HOME");
	ck_assert_str_eq(d = rt_cache_default_dir(), "/home/u/.cache/fusc");
	free(d);
	setenv("FUSRT_CACHE_DIR", "/c", 1);
	ck_assert_str_eq(d = rt_cache_default_dir(), "/c");
	free(d);
	setenv("FUSRT_NO_CACHE", "1", 1);
	ck_assert_ptr_null(rt_cache_default_dir());
}
END_TEST

/* rt_get_binary, the cache as fusrt_compile uses it (NVRTC, no GPU): stored, then a hit; a
 * refused folder compiles without the cache and says why in fusrt_last_cache_note. */
static const char device_src[] = "extern \"C\" __global__ void k(float *x) { x[0] = 1.0f; }\n";

START_TEST(test_cache_get_binary)
{
	char *dir = temp_dir(), *bin = NULL;
	size_t len = 0;

	ck_assert_int_eq(rt_get_binary(device_src, "k.cu", 80, true, dir, true, &bin, &len),
			 FUSRT_OK);
	ck_assert_int_eq(fusrt_last_compile_cached(), 0);
	ck_assert_str_eq(fusrt_last_cache_note(), "");
	char *first = xmalloc(len);
	size_t first_len = len;
	memcpy(first, bin, len);
	free(bin);
	ck_assert_int_eq(rt_get_binary(device_src, "k.cu", 80, true, dir, true, &bin, &len),
			 FUSRT_OK);
	ck_assert_int_eq(fusrt_last_compile_cached(), 1);
	ck_assert_uint_eq(len, first_len);
	ck_assert_int_eq(memcmp(bin, first, len), 0);
	ck_assert_str_eq(fusrt_last_cache_note(), "");
	free(bin);
	free(first);
	free(dir);
}
END_TEST

START_TEST(test_cache_get_binary_refused)
{
	char *dir = temp_dir(), *bin = NULL;
	size_t len = 0;

	ck_assert_int_eq(chmod(dir, 0777), 0);
	ck_assert_int_eq(rt_get_binary(device_src, "k.cu", 80, true, dir, true, &bin, &len),
			 FUSRT_OK);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(fusrt_last_compile_cached(), 0);
	ck_assert_contains(fusrt_last_cache_note(), "disk cache: the cache folder ");
	ck_assert_contains(fusrt_last_cache_note(), "is writable by group or others (mode "
			   "0777); not used");
	free(bin);
	Buf cmd = {0}; /* nothing was written into it */
	buf_printf(&cmd, "test $(ls -A %s | wc -l) -eq 0", dir);
	ck_assert_int_eq(system(cmd.s), 0);
	buf_free(&cmd);
	free(dir);
}
END_TEST

/* ---- internal errors (issue 15) -------------------------------------------------------- */

static int guard_calls;

static fusrt_status dies(void *ctx)
{
	guard_calls++;
	die("broken invariant %d", *(int *)ctx);
}

static fusrt_status inner_dies(void *ctx)
{
	/* a guard inside a guard: the inner one catches, the outer one is restored */
	fusrt_status s = rt_guard("inner", dies, ctx);
	ck_assert_int_eq(s, FUSRT_ERR_INTERNAL);
	die("outer %d", *(int *)ctx);
}

static fusrt_status fine(void *ctx)
{
	(void)ctx;
	return FUSRT_OK;
}

/* die() under libfusrt's guard returns FUSRT_ERR_INTERNAL with the place and the message,
 * and the process goes on (the test would end with SIGABRT otherwise). */
START_TEST(test_guard_internal_error)
{
	int v = 7;

	ck_assert_int_eq(rt_guard("fusrt_x", dies, &v), FUSRT_ERR_INTERNAL);
	ck_assert_contains(fusrt_last_error(), "fusrt_x: internal error at tests/unit/check_runtime.c:");
	ck_assert_contains(fusrt_last_error(), "broken invariant 7 (a bug in fusc: please report it)");
	ck_assert_int_eq(rt_guard("outer", inner_dies, &v), FUSRT_ERR_INTERNAL);
	ck_assert_contains(fusrt_last_error(), "outer: internal error at ");
	ck_assert_contains(fusrt_last_error(), "outer 7");
	ck_assert_int_eq(guard_calls, 2);
	ck_assert_ptr_null(die_trap_get()); /* every trap undone */
	ck_assert_int_eq(rt_guard("fusrt_y", fine, NULL), FUSRT_OK);
}
END_TEST

/* A real path: a source length no allocation can hold makes the front end's copy of the text
 * fail (xmalloc -> die); fusrt_compile returns FUSRT_ERR_INTERNAL instead of aborting, and the
 * next compile works. (ASan refuses such an allocation itself, so not under it.) */
START_TEST(test_compile_out_of_memory)
{
#if defined(__SANITIZE_ADDRESS__)
	return;
#endif
	fusrt_module *m = NULL;
	char *dir = temp_dir();
	fusrt_options o = {80, dir};

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_compile(saxpy_src, (size_t)1 << 62, "saxpy.fus", NULL, &m),
			 FUSRT_ERR_INTERNAL);
	ck_assert_ptr_null(m);
	ck_assert_contains(fusrt_last_error(), "fusrt_compile: internal error at ");
	ck_assert_contains(fusrt_last_error(), "out of memory");
	ck_assert_ptr_null(die_trap_get());
	ck_assert_int_eq(fusrt_compile(saxpy_src, strlen(saxpy_src), "saxpy.fus", &o, &m), FUSRT_OK);
	fusrt_module_free(m);
	free(dir);
}
END_TEST

/* ---- compiling for an explicit arch without a driver (issue 15) ------------------------ */

/* NVRTC alone fills the cache with the entry a GPU of that arch looks up (the cubin of the
 * device code lowered for it); the module describes its fusions, checks launch arguments and
 * fails only when its first launch needs the driver. */
START_TEST(test_compile_offline)
{
	char *dir = temp_dir();
	fusrt_options o = {80, dir};
	fusrt_module *m = NULL;
	fusrt_arg args[4] = {fusrt_f(2), fusrt_ptr(0x1000), fusrt_ptr(0x2000), fusrt_ptr(0x3000)};
	int64_t n = 4096;

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_compile(saxpy_src, strlen(saxpy_src), "saxpy.fus", &o, &m), FUSRT_OK);
	ck_assert_str_eq(fusrt_last_error(), "");
	ck_assert_int_eq(fusrt_last_compile_cached(), 0);
	ck_assert_str_eq(fusrt_last_cache_note(), "");
	ck_assert_int_eq(fusrt_fusion_count(m), 1);
	ck_assert_int_eq(fusrt_fusion_nargs(m, "saxpy"), 4);
	int64_t extent = 99;
	ck_assert_int_eq(fusrt_fusion_arg_dim(m, "saxpy", 1, 0, &extent), 0); /* x: f32[N] */
	ck_assert_int_eq(extent, 99);
	ck_assert_int_eq(fusrt_fusion_arg_dim(m, "saxpy", 0, 0, &extent), -2); /* a scalar */
	ck_assert_int_eq(fusrt_fusion_arg_dim(m, "saxpy", 1, 1, &extent), -2);
	ck_assert_int_eq(fusrt_fusion_arg_dim(m, "saxpy", 4, 0, &extent), -2);
	ck_assert_int_eq(fusrt_fusion_arg_dim(m, "nope", 1, 0, &extent), -2);
	/* the entry is the one an sm_80 device finds: lowered for 80, a cubin */
	TestCompile *tc = tc_compile_i32(saxpy_src);
	Buf cu = {0};
	cuda_emit_device(tc->kernels, 1, &cu);
	char *path = rt_cache_path(dir, rt_cache_key(cu.s, "cubin", 80));
	tc_free(tc);
	ck_assert_int_eq(access(path, R_OK), 0);
	free(path);
	buf_free(&cu);
	/* arguments are checked before the driver is needed; then the launch needs it */
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 3, &n, 1, NULL), FUSRT_ERR_INVALID);
	ck_assert_contains(fusrt_last_error(), "takes 4 arguments");
	n = -1;
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 4, &n, 1, NULL), FUSRT_ERR_INVALID);
	n = 4096;
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 4, &n, 1, NULL), FUSRT_ERR_NO_DRIVER);
	ck_assert_contains(fusrt_last_error(), "no CUDA driver");
	fusrt_module_free(m);
	/* a second compile takes the cubin from the cache */
	ck_assert_int_eq(fusrt_compile(saxpy_src, strlen(saxpy_src), "saxpy.fus", &o, &m), FUSRT_OK);
	ck_assert_int_eq(fusrt_last_compile_cached(), 1);
	fusrt_module_free(m);
	/* without an arch there is nothing to compile for */
	ck_assert_int_eq(fusrt_compile(saxpy_src, strlen(saxpy_src), "saxpy.fus", NULL, &m),
			 FUSRT_ERR_NO_DRIVER);
	ck_assert_ptr_null(m);
	free(dir);
}
END_TEST

/* FUSRT_DUMP=DIR: the text, the device code, its PTX and the launch dimensions of a compile,
 * and a line per launch (no GPU: an offline compile, launches that fail at the driver). */
START_TEST(test_dump)
{
	char *dir = temp_dir(), *cache = temp_dir();
	fusrt_options o = {80, cache};
	fusrt_module *m = NULL;
	fusrt_arg args[4] = {fusrt_f(2), fusrt_ptr(0x1000), fusrt_ptr(0x2000), fusrt_ptr(0x3004)};
	int64_t n = 4099;
	Buf base = {0}, p = {0}, cu = {0};
	char hex[2 * SHA256_BYTES + 1];

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	setenv("FUSRT_DUMP", dir, 1);
	ck_assert_int_eq(fusrt_compile(saxpy_src, strlen(saxpy_src), "src/my saxpy.fus", &o, &m),
			 FUSRT_OK);
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 4, &n, 1, NULL), FUSRT_ERR_NO_DRIVER);
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 3, &n, 1, NULL), FUSRT_ERR_INVALID);
	fusrt_module_free(m);
	TestCompile *tc = tc_compile_i32(saxpy_src);
	cuda_emit_device(tc->kernels, 1, &cu);
	tc_free(tc);
	sha256_hex(rt_cache_key(cu.s, "cubin", 80).b, hex);
	buf_printf(&base, "%s/my_saxpy-%.16s", dir, hex);
	buf_printf(&p, "%s.fus", base.s);
	char *text = read_all(p.s, NULL);
	ck_assert_str_eq(text, saxpy_src);
	free(text);
	p.len = 0;
	buf_printf(&p, "%s.cu", base.s);
	text = read_all(p.s, NULL);
	ck_assert_str_eq(text, cu.s);
	free(text);
	p.len = 0;
	buf_printf(&p, "%s.ptx", base.s);
	text = read_all(p.s, NULL);
	ck_assert_contains(text, ".target sm_80");
	ck_assert_contains(text, ".entry saxpy_kernel(");
	free(text);
	p.len = 0;
	buf_printf(&p, "%s.dims", base.s);
	text = read_all(p.s, NULL);
	ck_assert_contains(text, "// src/my saxpy.fus for sm_80");
	ck_assert_contains(text, "fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N])\n"
			   "  sizes: N\n  kernel saxpy_kernel_i32: grid (ceildiv(N, ");
	/* z is misaligned: the scalar fallback runs (32-bit: N is small); the refused launch
	 * wrote nothing */
	ck_assert_contains(text, "\nlaunch saxpy_kernel_i32_scalar: N=4099 grid (");
	ck_assert_ptr_null(strstr(strstr(text, "\nlaunch") + 1, "\nlaunch"));
	free(text);
	buf_free(&base);
	buf_free(&p);
	buf_free(&cu);
	free(dir);
	free(cache);
}
END_TEST

/* fusrt_aot_launch, what the launchers of fusc --emit=obj call: the object's text lowered
 * again must give the device code its binaries came from (else: rebuild the object); the
 * arguments are checked before the driver is needed; the module is made once. */
START_TEST(test_aot_launch)
{
	static const fusrt_aot_binary bins[] = {{80, 0, "not a cubin", 12}};
	fusrt_module *mod = NULL;
	fusrt_aot aot = {"0.0.1", "saxpy.fus", saxpy_src, sizeof saxpy_src - 1, 80, "p_",
			 "0000", bins, 1, &mod};
	fusrt_arg args[4] = {fusrt_f(2), fusrt_ptr(0x1000), fusrt_ptr(0x2000), fusrt_ptr(0x3000)};
	int64_t n = 64;
	unsigned char d[SHA256_BYTES];
	char hex[2 * SHA256_BYTES + 1];
	Buf cu = {0};
	Sha256 h;

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_aot_launch(&aot, "p_saxpy", args, 4, &n, 1, NULL), FUSRT_ERR_INVALID);
	ck_assert_contains(fusrt_last_error(), "saxpy.fus: the object was made by fusc 0.0.1, whose "
			   "kernels this libfusrt (" FUSC_VERSION ") does not make: rebuild it");
	ck_assert_ptr_null(mod);
	/* the digest of the device code as fusc lowered it: with the prefix, for sm_80 */
	TestCompile *tc = tc_compile(saxpy_src, false);
	LowerOptions lo = {.arch = 80};
	tc->prog->fusions[0]->name = "p_saxpy";
	Kernel *k = lower_fusion(tc->arena, tc->diag, tc->prog->fusions[0], &lo);
	cuda_emit_device(&k, 1, &cu);
	tc_free(tc);
	sha256_init(&h);
	sha256_update(&h, cu.s, cu.len);
	sha256_final(&h, d);
	sha256_hex(d, hex);
	buf_free(&cu);
	aot.device_sha256 = hex;
	ck_assert_int_eq(fusrt_aot_launch(&aot, "p_saxpy", args, 3, &n, 1, NULL), FUSRT_ERR_INVALID);
	ck_assert_contains(fusrt_last_error(), "fusion p_saxpy takes 4 arguments");
	ck_assert_ptr_nonnull(mod);
	fusrt_module *first = mod;
	ck_assert_int_eq(fusrt_aot_launch(&aot, "p_saxpy", args, 4, &n, 1, NULL), FUSRT_ERR_NO_DRIVER);
	ck_assert_ptr_eq(mod, first);
	ck_assert_int_eq(fusrt_aot_launch(&aot, "saxpy", args, 4, &n, 1, NULL), FUSRT_ERR_INVALID);
	ck_assert_contains(fusrt_last_error(), "no fusion named 'saxpy' (the module has: p_saxpy)");
	ck_assert_int_eq(fusrt_aot_launch(NULL, "saxpy", args, 4, &n, 1, NULL), FUSRT_ERR_INVALID);
	fusrt_module_free(mod);
}
END_TEST

/* The image a device runs: its major's cubin not above it, else PTX not above it. */
/* A constant dimension gives its extent, a size symbol its index. */
START_TEST(test_arg_dim_constant)
{
	static const char src[] = "fusion f(x: f32[M, 3], n: i32, y: f32[K, M]) -> (z: f32[M, 3]) {\n"
				  "  z[i, j] = x[i, j] + y[0, i];\n}\n";
	char *dir = temp_dir();
	fusrt_options o = {80, dir};
	fusrt_module *m = NULL;
	int64_t extent = 0;

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(fusrt_compile(src, strlen(src), "f.fus", &o, &m), FUSRT_OK);
	ck_assert_int_eq(fusrt_fusion_arg_dim(m, "f", 0, 1, &extent), -1);
	ck_assert_int_eq(extent, 3);
	ck_assert_str_eq(fusrt_fusion_size_name(m, "f", fusrt_fusion_arg_dim(m, "f", 0, 0, NULL)), "M");
	ck_assert_str_eq(fusrt_fusion_size_name(m, "f", fusrt_fusion_arg_dim(m, "f", 2, 0, NULL)), "K");
	ck_assert_int_eq(fusrt_fusion_arg_dim(m, "f", 1, 0, NULL), -2);
	fusrt_module_free(m);
	free(dir);
}
END_TEST

/* fusrt_f keeps the value in .f and, in .i, its truncation only when that is defined. */
START_TEST(test_fusrt_f)
{
	ck_assert_int_eq(fusrt_f(-3.7).i, -3);
	ck_assert(isnan(fusrt_f(NAN).f));
	ck_assert_int_eq(fusrt_f(NAN).i, 0);
	ck_assert_int_eq(fusrt_f(INFINITY).i, 0);
	ck_assert_int_eq(fusrt_f(1e300).i, 0);
	ck_assert_int_eq(fusrt_f(-9223372036854775808.0).i, 0);
	ck_assert_int_eq(fusrt_i(-5).f, -5.0);
}
END_TEST

START_TEST(test_pick_image)
{
	RtImage im[] = {{80, false, "", 1}, {86, false, "", 1}, {90, false, "", 1}, {90, true, "", 1}};

	ck_assert_int_eq(rt_pick_image(im, 4, 80), 0);
	ck_assert_int_eq(rt_pick_image(im, 4, 89), 1);
	ck_assert_int_eq(rt_pick_image(im, 4, 90), 2);
	ck_assert_int_eq(rt_pick_image(im, 4, 100), 3);
	ck_assert_int_eq(rt_pick_image(im, 4, 75), -1);
	ck_assert_int_eq(rt_pick_image(im, 3, 100), -1);
	ck_assert_int_eq(rt_pick_image(im, 0, 90), -1);
}
END_TEST

/* ---- fusc run: checks before any launch ----------------------------------------------- */

/* Runs fusc_run_main with stdout and stderr captured into *out (malloc'd). */
static int run_capture(char **out, int argc, char **argv)
{
	char path[] = "/tmp/fusc_run_out_XXXXXX";
	int fd = mkstemp(path), save_out = dup(1), save_err = dup(2);

	ck_assert_int_ge(fd, 0);
	fflush(stdout);
	fflush(stderr);
	dup2(fd, 1);
	dup2(fd, 2);
	int rc = fusc_run_main(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(save_out, 1);
	dup2(save_err, 2);
	close(save_out);
	close(save_err);
	close(fd);
	free(*out);
	*out = read_all(path, NULL);
	unlink(path);
	return rc;
}

static char *write_fus(const char *text)
{
	char *dir = temp_dir();
	Buf b = {0};

	buf_printf(&b, "%s/t.fus", dir);
	write_all(b.s, text, strlen(text));
	free(dir);
	return b.s;
}

#define RUN(out, ...) \
	run_capture(out, countof(((char *[]){__VA_ARGS__})), (char *[]){__VA_ARGS__})

START_TEST(test_run_bad_usage)
{
	char *file = write_fus(saxpy_src), *out = NULL;
	Buf want = {0};

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(RUN(&out, "run"), 2);
	ck_assert_contains(out, "usage: fusc run FILE");
	ck_assert_int_eq(RUN(&out, "run", file, "--bogus"), 2);
	ck_assert_str_eq(out, "fusc run: unknown option '--bogus'\n");
	ck_assert_int_eq(RUN(&out, "run", file, "--dims"), 2);
	ck_assert_str_eq(out, "fusc run: option '--dims' needs a value\n");
	ck_assert_int_eq(RUN(&out, "run", "/nonexistent/x.fus", "--dims", "N=4"), 2);
	ck_assert_str_eq(out, "fusc run: cannot read /nonexistent/x.fus: No such file or directory\n");
	ck_assert_int_eq(RUN(&out, "run", file), 2);
	ck_assert_str_eq(out, "fusc run: missing dimension N for fusion saxpy (give --dims N=...)\n");
	ck_assert_int_eq(RUN(&out, "run", file, "--dims", "N=4,K=3"), 2);
	ck_assert_str_eq(out, "fusc run: unknown dimension K (no selected fusion has a size of that "
			      "name)\n");
	ck_assert_int_eq(RUN(&out, "run", file, "--dims=N=-4"), 2);
	ck_assert_str_eq(out, "fusc run: bad --dims value in 'N=-4' (expected a non-negative "
			      "integer)\n");
	ck_assert_int_eq(RUN(&out, "run", file, "--dims", "N=4,N=5"), 2);
	ck_assert_str_eq(out, "fusc run: dimension N is given two different values\n");
	ck_assert_int_eq(RUN(&out, "run", file, "--dims", "N4"), 2);
	ck_assert_int_eq(RUN(&out, "run", file, "--dims", "N=4", "--seed", "x"), 2);
	ck_assert_int_eq(RUN(&out, "run", file, "--dims", "N=4", "--fusion", "nope"), 2);
	buf_printf(&want, "fusc run: no fusion named 'nope' in %s (it has: saxpy)\n", file);
	ck_assert_str_eq(out, want.s);
	/* all good, but no driver */
	ck_assert_int_eq(RUN(&out, "run", file, "--dims", "N=4", "--fusion=saxpy"), 2);
	ck_assert_str_eq(out, "fusc run: no CUDA device: no CUDA driver "
			      "(/nonexistent/libcuda.so.1 not found)\n");
	buf_free(&want);
	free(out);
	free(file);
}
END_TEST

START_TEST(test_run_file_errors)
{
	char *file = write_fus("fusion f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[j];\n}\n");
	char *out = NULL;

	setenv("FUSRT_LIBCUDA", no_lib, 1);
	ck_assert_int_eq(RUN(&out, "run", file, "--dims", "N=4"), 1);
	ck_assert_contains(out, "t.fus:2:");
	ck_assert_contains(out, "error:");
	free(out);
	free(file);
}
END_TEST

/* ---- GPU ------------------------------------------------------------------------------ */

static fusrt_module *compile_in(const char *src, const char *cache_dir)
{
	fusrt_options o = {0, cache_dir};
	fusrt_module *m = NULL;
	fusrt_status s = fusrt_compile(src, strlen(src), "saxpy.fus", &o, &m);

	ck_assert_msg(s == FUSRT_OK, "%s: %s", fusrt_status_name(s), fusrt_last_error());
	return m;
}

/* Runs saxpy on n elements through libfusrt and checks it against the interpreter. */
static void check_saxpy(fusrt_module *m, int64_t n)
{
	Fusion *f = rt_module_fusion(m, "saxpy");
	HostTensor x, y, z, ref;
	fusrt_devptr dx, dy, dz;
	double a = 1.5;

	ck_assert_ptr_nonnull(f);
	ck_assert(host_tensor_init(&x, f->inputs[0], &n, NULL));
	ck_assert(host_tensor_init(&y, f->inputs[1], &n, NULL));
	ck_assert(host_tensor_init(&z, f->outputs[0], &n, NULL));
	ck_assert(host_tensor_init(&ref, f->outputs[0], &n, NULL));
	host_tensor_fill_random(&x, 1);
	host_tensor_fill_random(&y, 2);
	size_t bytes = host_tensor_bytes(&x);
	ck_assert_int_eq(fusrt_malloc(&dx, bytes), FUSRT_OK);
	ck_assert_int_eq(fusrt_malloc(&dy, bytes), FUSRT_OK);
	ck_assert_int_eq(fusrt_malloc(&dz, bytes), FUSRT_OK);
	ck_assert_int_eq(fusrt_copy_to_device(dx, x.data, bytes), FUSRT_OK);
	ck_assert_int_eq(fusrt_copy_to_device(dy, y.data, bytes), FUSRT_OK);
	ck_assert_int_eq(fusrt_memset(dz, 0xff, bytes), FUSRT_OK);
	fusrt_arg args[4] = {fusrt_f(a), fusrt_ptr(dx), fusrt_ptr(dy), fusrt_ptr(dz)};
	fusrt_status s = fusrt_launch(m, "saxpy", args, 4, &n, 1, NULL);
	ck_assert_msg(s == FUSRT_OK, "%s", fusrt_last_error());
	ck_assert_int_eq(fusrt_synchronize(), FUSRT_OK);
	ck_assert_int_eq(fusrt_copy_to_host(z.data, dz, bytes), FUSRT_OK);
	void *in[] = {x.data, y.data}, *out[] = {ref.data};
	ck_assert(interp_run(f, &n, &a, in, out, NULL));
	for (int64_t i = 0; i < n; i++) {
		double g = host_tensor_get(&z, i), r = host_tensor_get(&ref, i);
		ck_assert_msg(fabs(g - r) <= 1e-6 * (1 + fabs(r)), "z[%lld]: gpu %g ref %g",
			      (long long)i, g, r);
	}
	fusrt_free(dx);
	fusrt_free(dy);
	fusrt_free(dz);
	host_tensor_free(&x);
	host_tensor_free(&y);
	host_tensor_free(&z);
	host_tensor_free(&ref);
}

START_TEST(test_gpu_saxpy)
{
	char *dir = temp_dir();
	fusrt_module *m = compile_in(saxpy_src, dir);
	fusrt_arg_info info;

	ck_assert_int_eq(fusrt_last_compile_cached(), 0);
	ck_assert_int_eq(fusrt_fusion_count(m), 1);
	ck_assert_str_eq(fusrt_fusion_name(m, 0), "saxpy");
	ck_assert_int_eq(fusrt_fusion_nargs(m, "saxpy"), 4);
	ck_assert_int_eq(fusrt_fusion_arg(m, "saxpy", 3, &info), FUSRT_OK);
	ck_assert_str_eq(info.name, "z");
	ck_assert_int_eq(info.kind, FUSRT_OUTPUT);
	ck_assert_str_eq(fusrt_fusion_size_name(m, "saxpy", 0), "N");
	check_saxpy(m, 10007); /* not a multiple of anything */
	check_saxpy(m, 1);
	check_saxpy(m, 0);
	fusrt_module_free(m);

	/* the second compile comes from the cache */
	m = compile_in(saxpy_src, dir);
	ck_assert_int_eq(fusrt_last_compile_cached(), 1);
	check_saxpy(m, 4096);
	fusrt_module_free(m);

	/* corrupt every entry: it is rebuilt, not loaded */
	Buf cmd = {0};
	buf_printf(&cmd, "for f in %s/*.cubin; do printf garbage | dd of=$f bs=1 seek=40 "
		   "conv=notrunc 2>/dev/null; done", dir);
	ck_assert_int_eq(system(cmd.s), 0);
	m = compile_in(saxpy_src, dir);
	ck_assert_int_eq(fusrt_last_compile_cached(), 0);
	ck_assert_contains(fusrt_last_cache_note(), "does not match the file");
	check_saxpy(m, 4096);
	fusrt_module_free(m);
	/* a folder others can write is not used: compiled, not cached, and said so */
	ck_assert_int_eq(chmod(dir, 0777), 0);
	m = compile_in(saxpy_src, dir);
	ck_assert_int_eq(fusrt_last_compile_cached(), 0);
	ck_assert_contains(fusrt_last_cache_note(), "is writable by group or others");
	check_saxpy(m, 4096);
	fusrt_module_free(m);
	buf_free(&cmd);
	free(dir);
}
END_TEST

START_TEST(test_gpu_launch_errors)
{
	fusrt_module *m = compile_in(saxpy_src, "");
	fusrt_devptr d;
	int64_t n = 1024;
	double ms = 0;

	ck_assert_int_eq(fusrt_malloc(&d, 3 * 4096 + 16), FUSRT_OK);
	fusrt_arg args[4] = {fusrt_f(1), fusrt_ptr(d), fusrt_ptr(d + 4096), fusrt_ptr(d + 8192)};
	ck_assert_int_eq(fusrt_launch(m, "nope", args, 4, &n, 1, NULL), FUSRT_ERR_INVALID);
	ck_assert_str_eq(fusrt_last_error(), "no fusion named 'nope' (the module has: saxpy)");
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 2, &n, 1, NULL), FUSRT_ERR_INVALID);
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 4, &n, 1, NULL), FUSRT_OK);
	ck_assert_int_eq(fusrt_time_launch(m, "saxpy", args, 4, &n, 1, 2, 5, &ms), FUSRT_OK);
	ck_assert(ms > 0);
	args[1] = fusrt_ptr(d + 4); /* misaligned: the auto schedule's scalar fallback runs */
	ck_assert_int_eq(fusrt_launch(m, "saxpy", args, 4, &n, 1, NULL), FUSRT_OK);
	ck_assert_int_eq(fusrt_synchronize(), FUSRT_OK);
	char name[256];
	int arch = 0;
	ck_assert_int_eq(fusrt_device_info(name, sizeof name, &arch), FUSRT_OK);
	ck_assert_int_ge(arch, 50);
	ck_assert_int_eq(fusrt_free(d), FUSRT_OK);
	fusrt_module_free(m);
}
END_TEST

START_TEST(test_gpu_fusc_run)
{
	char *file = write_fus(saxpy_src), *bias = write_fus(bias_src), *out = NULL;
	char *rs = write_fus("fusion rowsum(x: f32[M, N]) -> (s: f32[M]) {\n"
			     "  s[i] = sum(j: x[i, j]);\n}\n"
			     "fusion scale(x: f16[N], k: i32[N]) -> (y: f16[N], z: i32[N]) {\n"
			     "  y[i] = x[i] * 3.0;\n  z[i] = k[i] * k[i] - 1;\n}\n");

	setenv("FUSRT_NO_CACHE", "1", 1);
	ck_assert_msg(RUN(&out, "run", file, "--dims", "N=100003", "--seed", "3") == 0, "%s", out);
	ck_assert_contains(out, "saxpy: PASS");
	ck_assert_msg(RUN(&out, "run", file, "--dims", "N=1048576", "--bench") == 0, "%s", out);
	ck_assert_contains(out, "GB/s");
	ck_assert_msg(RUN(&out, "run", rs, "--dims", "M=33,N=1000") == 0, "%s", out);
	ck_assert_contains(out, "rowsum: PASS");
	ck_assert_contains(out, "scale: PASS");
	ck_assert_msg(RUN(&out, "run", bias, "--dims", "M=5,N=1000") == 0, "%s", out);
	ck_assert_contains(out, "bias: PASS");
	/* a launch precondition: exit 2, nothing compared */
	ck_assert_int_eq(RUN(&out, "run", bias, "--dims", "M=5,N=1001"), 2);
	ck_assert_contains(out, "fusc run: fusion bias: N = 1001 is not a multiple of 4 (");
	ck_assert_not_contains(out, "PASS");
	free(out);
	free(file);
	free(bias);
	free(rs);
}
END_TEST

/* rt_check_smem: a 64 KiB cache (16384 floats per block) is dynamic shared memory; the
 * message against a too small limit is the generated launcher's, with the sizes spelled out. */
START_TEST(test_check_smem)
{
	TestCompile *tc = tc_compile(
		"fusion big(A: f32[4, 16384]) -> (out: f32[4, 16384]) {\n"
		"  out[i, j] = A[i, j];\n"
		"}\n"
		"schedule big {\n"
		"  As = A.cache_after(shared);\n"
		"  As.compute_at(out, i);\n"
		"  As.split(j, 1024) -> (jo, jt);\n"
		"  As.bind(jt, threadIdx.x);\n"
		"  out.bind(i, blockIdx.x);\n"
		"  out.split(j, 1024) -> (jo, jt);\n"
		"  out.bind(jt, threadIdx.x);\n"
		"}\n", true);
	char *msg = (char *)"x";

	ck_assert_msg(tc->kernels, "%s", tc->diags);
	Kernel *k = tc->kernels[0];
	ck_assert(k->smem_dynamic);
	ck_assert_int_eq(k->smem_bytes, 65536);
	ck_assert_int_eq(rt_check_smem(k, 232448, &msg), FUSRT_OK); /* the H100/H200 opt-in */
	ck_assert_ptr_null(msg);
	ck_assert_int_eq(rt_check_smem(k, 65536, &msg), FUSRT_OK);
	ck_assert_int_eq(rt_check_smem(k, 49152, &msg), FUSRT_ERR_LAUNCH);
	ck_assert_str_eq(msg, "big: needs 65536 bytes of shared memory (dynamic 65536, static 0, "
			      "required 65536) but the device allows 49152 per block");
	free(msg);
	/* static shared memory is counted as static */
	k->smem_dynamic = false;
	k->smem_bytes = 40000;
	ck_assert_int_eq(rt_check_smem(k, 32768, &msg), FUSRT_ERR_LAUNCH);
	ck_assert_str_eq(msg, "big: needs 40000 bytes of shared memory (dynamic 0, static 40000, "
			      "required 40000) but the device allows 32768 per block");
	free(msg);
	/* so are the block-reduction helpers' static arrays (issue 11 item 4) */
	k->smem_dynamic = true;
	k->smem_bytes = 65536;
	k->smem_helper_bytes = 128;
	ck_assert_int_eq(rt_check_smem(k, 65536, &msg), FUSRT_ERR_LAUNCH);
	ck_assert_str_eq(msg, "big: needs 65664 bytes of shared memory (dynamic 65536, static 128, "
			      "required 65664) but the device allows 65536 per block");
	free(msg);
	tc_free(tc);
}
END_TEST

Suite *runtime_suite(void)
{
	Suite *s = suite_create("runtime");
	TCase *tc = tcase_create("core");
	TCase *gpu = tcase_create("gpu");

	tcase_add_test(tc, test_no_driver);
	tcase_add_test(tc, test_no_driver_default_name);
	tcase_add_test(tc, test_compile_error_without_gpu);
	tcase_add_test(tc, test_compile_nul_byte);
	tcase_add_test(tc, test_null_arguments);
	tcase_add_test(tc, test_launch_check);
	tcase_add_test(tc, test_check_smem);
	tcase_add_test(tc, test_launch_check_preconditions);
	tcase_add_test(tc, test_launch_check_block_limit);
	tcase_add_test(tc, test_cache_roundtrip);
	tcase_add_test(tc, test_cache_truncated);
	tcase_add_test(tc, test_cache_corrupt);
	tcase_add_test(tc, test_cache_store_failure);
	tcase_add_test(tc, test_cache_refuses_foreign);
	tcase_add_test(tc, test_cache_get_binary);
	tcase_add_test(tc, test_cache_get_binary_refused);
	tcase_add_test(tc, test_cache_key_and_dir);
	tcase_add_test(tc, test_compile_offline);
	tcase_add_test(tc, test_dump);
	tcase_add_test(tc, test_aot_launch);
	tcase_add_test(tc, test_guard_internal_error);
	tcase_add_test(tc, test_compile_out_of_memory);
	tcase_add_test(tc, test_pick_image);
	tcase_add_test(tc, test_fusrt_f);
	tcase_add_test(tc, test_arg_dim_constant);
	tcase_add_test(tc, test_run_bad_usage);
	tcase_add_test(tc, test_run_file_errors);
	suite_add_tcase(s, tc);

	tcase_set_tags(gpu, "gpu");
	tcase_set_timeout(gpu, 120);
	tcase_add_test(gpu, test_gpu_saxpy);
	tcase_add_test(gpu, test_gpu_launch_errors);
	tcase_add_test(gpu, test_gpu_fusc_run);
	suite_add_tcase(s, gpu);
	return s;
}
