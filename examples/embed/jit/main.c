/* main.c: embedding fusc through libfusrt, the JIT runtime (include/fusrt.h).
 *
 * The .fus text is compiled at run time (front end + NVRTC for this GPU, binary cached on
 * disk), device memory goes through fusrt's API, and fusions are launched by name with their
 * arguments in signature order. Two fusions:
 *   saxpy        z = a*x + y (f32, vectorized: the runtime checks pointer alignment)
 *   rowmax_bf16  s[i] = max(j: x[i, j]) on bf16 (exact, so checked bit for bit)
 * each checked on the CPU. Built against an installed fusc with `pkg-config fusrt`.
 * Exit 0 PASS, 1 FAIL, 77 no CUDA driver or device (the error libfusrt reports is printed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fusrt.h>

#define EXIT_SKIP 77

static const char source[] =
	"fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
	"  z[i] = a * x[i] + y[i];\n"
	"}\n"
	"schedule saxpy {\n"
	"  z.split(i, 1024) -> (io, ii);\n"
	"  z.split(ii, 4) -> (it, iv);\n"
	"  z.bind(io, blockIdx.x);\n"
	"  z.bind(it, threadIdx.x);\n"
	"  z.vectorize(iv);\n"
	"}\n"
	"\n"
	"fusion rowmax_bf16(x: bf16[M, N]) -> (s: bf16[M]) {\n"
	"  s[i] = max(j: x[i, j]);\n"
	"}\n";

/* Prints the failed call and libfusrt's reason; true when s is FUSRT_OK. */
static int ok(fusrt_status s, const char *what)
{
	if (s != FUSRT_OK)
		fprintf(stderr, "%s: %s: %s\n", what, fusrt_status_name(s), fusrt_last_error());
	return s == FUSRT_OK;
}

/* bf16 is the top half of an f32; round to nearest even (inputs here are finite). */
static uint16_t bf16_from_float(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static float bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* Device buffer of `bytes` holding host data `src` (NULL: filled with 0xff, NaN). */
static int upload(fusrt_devptr *d, const void *src, size_t bytes)
{
	if (!ok(fusrt_malloc(d, bytes ? bytes : 1), "fusrt_malloc"))
		return 0;
	if (src)
		return ok(fusrt_copy_to_device(*d, src, bytes), "fusrt_copy_to_device");
	return ok(fusrt_memset(*d, 0xff, bytes), "fusrt_memset");
}

static int run_saxpy(fusrt_module *m, int64_t n)
{
	size_t bytes = (size_t)n * sizeof(float);
	float *x = malloc(bytes + 4), *y = malloc(bytes + 4), *z = malloc(bytes + 4);
	fusrt_devptr dx = 0, dy = 0, dz = 0;
	const float a = -0.75f;
	long wrong = -1;

	for (int64_t i = 0; i < n; i++) {
		x[i] = (float)((i * 37) % 101) - 50.0f;
		y[i] = (float)(i % 13) * 0.5f;
	}
	if (upload(&dx, x, bytes) && upload(&dy, y, bytes) && upload(&dz, NULL, bytes)) {
		fusrt_arg args[] = {fusrt_f(a), fusrt_ptr(dx), fusrt_ptr(dy), fusrt_ptr(dz)};
		int64_t sizes[] = {n};
		if (ok(fusrt_launch(m, "saxpy", args, 4, sizes, 1, NULL), "fusrt_launch saxpy") &&
		    ok(fusrt_synchronize(), "fusrt_synchronize") &&
		    ok(fusrt_copy_to_host(z, dz, bytes), "fusrt_copy_to_host")) {
			wrong = 0;
			for (int64_t i = 0; i < n; i++) {
				float want = a * x[i] + y[i];
				if (!(fabsf(z[i] - want) <= 1e-5f + 1e-5f * fabsf(want)) && wrong++ == 0)
					fprintf(stderr, "saxpy N = %lld: z[%lld] = %g, expected %g\n",
						(long long)n, (long long)i, z[i], want);
			}
			printf("saxpy N = %lld: %ld wrong\n", (long long)n, wrong);
		}
	}
	fusrt_free(dx);
	fusrt_free(dy);
	fusrt_free(dz);
	free(x);
	free(y);
	free(z);
	return wrong == 0;
}

static int run_rowmax(fusrt_module *m, int64_t rows, int64_t cols)
{
	size_t n = (size_t)(rows * cols);
	uint16_t *x = malloc(n * 2 + 2), *s = malloc((size_t)rows * 2 + 2);
	fusrt_devptr dx = 0, ds = 0;
	long wrong = -1;

	for (size_t i = 0; i < n; i++)
		x[i] = bf16_from_float((float)((i * 7919) % 4001) / 1000.0f - 2.0f);
	if (upload(&dx, x, n * 2) && upload(&ds, NULL, (size_t)rows * 2)) {
		fusrt_arg args[] = {fusrt_ptr(dx), fusrt_ptr(ds)};
		int64_t sizes[] = {rows, cols}; /* size symbols in order: M, N */
		if (ok(fusrt_launch(m, "rowmax_bf16", args, 2, sizes, 2, NULL), "fusrt_launch rowmax") &&
		    ok(fusrt_synchronize(), "fusrt_synchronize") &&
		    ok(fusrt_copy_to_host(s, ds, (size_t)rows * 2), "fusrt_copy_to_host")) {
			wrong = 0;
			for (int64_t r = 0; r < rows; r++) {
				float want = -INFINITY;
				for (int64_t c = 0; c < cols; c++)
					want = fmaxf(want, bf16_to_float(x[r * cols + c]));
				if (s[r] != bf16_from_float(want) && wrong++ == 0)
					fprintf(stderr, "rowmax %lldx%lld: s[%lld] = %g, expected %g\n",
						(long long)rows, (long long)cols, (long long)r,
						bf16_to_float(s[r]), want);
			}
			printf("rowmax_bf16 M = %lld, N = %lld: %ld wrong\n", (long long)rows,
			       (long long)cols, wrong);
		}
	}
	fusrt_free(dx);
	fusrt_free(ds);
	free(x);
	free(s);
	return wrong == 0;
}

/* A launch with a misaligned pointer is refused before anything runs. */
static int check_refusal(fusrt_module *m, fusrt_devptr base)
{
	fusrt_arg args[] = {fusrt_f(1), fusrt_ptr(base + 4), fusrt_ptr(base), fusrt_ptr(base)};
	int64_t sizes[] = {64};
	fusrt_status s = fusrt_launch(m, "saxpy", args, 4, sizes, 1, NULL);
	printf("saxpy(x misaligned): %s: %s\n", fusrt_status_name(s), fusrt_last_error());
	return s == FUSRT_ERR_PRECONDITION;
}

int main(void)
{
	fusrt_module *m = NULL;
	char name[256];
	int arch = 0, good = 1;

	/* Errors in the .fus text come back as FUSRT_ERR_COMPILE with the rendered diagnostics,
	 * even without a GPU (the front end runs first). */
	static const char broken[] = "fusion f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[j];\n}\n";
	fusrt_status s = fusrt_compile(broken, strlen(broken), "broken.fus", NULL, &m);
	printf("compiling broken.fus: %s\n%s", fusrt_status_name(s), fusrt_last_error());
	if (s != FUSRT_ERR_COMPILE)
		return EXIT_FAILURE;
	/* A missing driver or device is reported by the first call that needs one. */
	s = fusrt_init();
	if (s == FUSRT_ERR_NO_DRIVER || s == FUSRT_ERR_NO_DEVICE) {
		printf("skipped: %s: %s\n", fusrt_status_name(s), fusrt_last_error());
		return EXIT_SKIP;
	}
	if (!ok(s, "fusrt_init") || !ok(fusrt_device_info(name, sizeof name, &arch), "device"))
		return EXIT_FAILURE;
	printf("device: %s (sm_%d)\n", name, arch);
	if (!ok(fusrt_compile(source, strlen(source), "embedded.fus", NULL, &m), "fusrt_compile"))
		return EXIT_FAILURE;
	printf("compiled %d fusions (%s)\n", fusrt_fusion_count(m),
	       fusrt_last_compile_cached() ? "from the disk cache" : "with NVRTC");
	for (int i = 0; i < fusrt_fusion_count(m); i++) {
		const char *f = fusrt_fusion_name(m, i);
		printf("  %s(", f);
		for (int k = 0; k < fusrt_fusion_nargs(m, f); k++) {
			fusrt_arg_info ai;
			fusrt_fusion_arg(m, f, k, &ai);
			printf("%s%s: %s%s", k ? ", " : "", ai.name, ai.dtype,
			       ai.kind == FUSRT_SCALAR ? "" : ai.kind == FUSRT_INPUT ? "[in]" : "[out]");
		}
		printf(")\n");
	}
	fusrt_devptr scratch = 0;
	good &= ok(fusrt_malloc(&scratch, 1024), "fusrt_malloc") && check_refusal(m, scratch);
	fusrt_free(scratch);
	static const int64_t n[] = {1, 7, 4097, 1000003};
	for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
		good &= run_saxpy(m, n[i]);
	static const int64_t mn[][2] = {{1, 1}, {3, 5}, {1023, 4097}};
	for (size_t i = 0; i < sizeof mn / sizeof mn[0]; i++)
		good &= run_rowmax(m, mn[i][0], mn[i][1]);
	fusrt_module_free(m);
	printf("%s\n", good ? "PASS" : "FAIL");
	return good ? EXIT_SUCCESS : EXIT_FAILURE;
}
