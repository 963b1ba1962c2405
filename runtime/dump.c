/* dump.c: FUSRT_DUMP=DIR, what each JIT compile made, for debugging (docs/runtime.md).
 *
 * fusrt_compile writes DIR/STEM-KEY.fus (the text compiled), .cu (the device code NVRTC
 * compiles), .ptx (the same for compute_ARCH, or NVRTC's log) and .dims (per fusion its
 * signature and size symbols, per kernel the launch dimensions as expressions of the sizes,
 * shared memory and preconditions); every launch of the module appends its sizes and its
 * grid and block to the .dims file. STEM is the compile's name less folders and extension,
 * KEY the first 16 hex digits of the cache key, so one text compiled twice for one arch
 * writes the same files. A file that cannot be written is reported on standard error and
 * changes nothing else: the compile and the launches go on.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "runtime/runtime.h"

/* Writes (or, with mode "a", appends) n bytes; reports a failure on stderr. */
static void dump_write(const char *path, const char *mode, const void *data, size_t n)
{
	FILE *f = fopen(path, mode);
	bool ok = f && fwrite(data, 1, n, f) == n;

	if (f && fclose(f) != 0)
		ok = false;
	if (!ok)
		fprintf(stderr, "fusrt: FUSRT_DUMP: cannot write %s: %s\n", path, strerror(errno));
}

/* "rows" from "dir/rows.fus"; characters outside [A-Za-z0-9_.-] become '_'. */
static void put_stem(Buf *out, const char *name)
{
	const char *b = strrchr(name, '/');
	const char *s = b ? b + 1 : name, *dot = strrchr(s, '.');
	size_t n = dot && dot != s ? (size_t)(dot - s) : strlen(s);

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		buf_printf(out, "%c", isalnum(c) || c == '_' || c == '-' || c == '.' ? c : '_');
	}
	if (n == 0)
		buf_puts(out, "fusion");
}

static void put_launch(Buf *out, Kernel *k, int first)
{
	for (int d = 0; d < 3; d++) {
		buf_puts(out, d ? ", " : "(");
		if (k->launch[first + d])
			ir_print_expr(k->launch[first + d], out);
		else
			buf_puts(out, "1");
	}
	buf_puts(out, ")");
}

static void put_kernel(Buf *out, Kernel *k, const char *role)
{
	buf_printf(out, "  %s %s: grid ", role, k->name);
	put_launch(out, k, PT_BIDX);
	buf_puts(out, " block ");
	put_launch(out, k, PT_TIDX);
	buf_printf(out, "\n    shared memory: %lld bytes dynamic, %lld static\n",
		   (long long)kernel_smem_dynamic(k), (long long)kernel_smem_static(k));
	if (k->preconds.len) {
		buf_puts(out, "    requires: ");
		cuda_precond_text(k, out);
		buf_puts(out, "\n");
	}
	if (k->grid_ws.len)
		buf_printf(out, "    grid-reduction workspace: %d buffers\n", k->grid_ws.len);
}

char *rt_dump_compile(const char *dir, const char *name, const char *source, size_t len,
		      int arch, const char *cu, Kernel **ks, int nk)
{
	char hex[2 * SHA256_BYTES + 1], *err = NULL, *ptx = NULL, *log = NULL;
	Buf base = {0}, path = {0}, dims = {0};

	if (!rt_make_dirs(dir, &err)) {
		fprintf(stderr, "fusrt: FUSRT_DUMP: %s\n", err);
		free(err);
		return NULL;
	}
	sha256_hex(rt_cache_key(cu, "cubin", arch).b, hex);
	buf_printf(&base, "%s/", dir);
	put_stem(&base, name);
	buf_printf(&base, "-%.16s", hex);
	buf_printf(&path, "%s.fus", base.s);
	dump_write(path.s, "w", source, len);
	path.len = 0;
	buf_printf(&path, "%s.cu", base.s);
	dump_write(path.s, "w", cu, strlen(cu));
	path.len = 0;
	buf_printf(&path, "%s.ptx", base.s);
	if (nvrtc_compile(cu, name, arch, false, &ptx, NULL, &log))
		dump_write(path.s, "w", ptx, strlen(ptx));
	else
		dump_write(path.s, "w", log ? log : "", log ? strlen(log) : 0);
	free(ptx);
	free(log);
	buf_printf(&dims, "// %s for sm_%d (fusc %s); launches are appended below\n", name, arch,
		   FUSC_VERSION);
	for (int i = 0; i < nk; i++) {
		Fusion *f = ks[i]->fusion;
		ir_print_signature(f, &dims);
		buf_puts(&dims, "\n  sizes:");
		for (int j = 0; j < f->nsizes; j++)
			buf_printf(&dims, " %s", f->sizes[j]->name);
		buf_puts(&dims, f->nsizes ? "\n" : " none\n");
		put_kernel(&dims, ks[i], "kernel");
		for (Kernel *v = ks[i]->fallback; v; v = v->fallback) /* the variants, in pick order */
			put_kernel(&dims, v, "variant");
	}
	path.len = 0;
	buf_printf(&path, "%s.dims", base.s);
	dump_write(path.s, "w", dims.s, dims.len);
	buf_free(&base);
	buf_free(&dims);
	return path.s;
}

void rt_dump_launch(const char *dims_path, Kernel *k, const int64_t *sizes,
		    const int64_t dims[6])
{
	Fusion *f = k->fusion;
	Buf b = {0};

	buf_printf(&b, "launch %s:", k->name);
	for (int i = 0; i < f->nsizes; i++)
		buf_printf(&b, " %s=%lld", f->sizes[i]->name, (long long)sizes[i]);
	buf_printf(&b, " grid (%lld, %lld, %lld) block (%lld, %lld, %lld)\n", (long long)dims[0],
		   (long long)dims[1], (long long)dims[2], (long long)dims[3], (long long)dims[4],
		   (long long)dims[5]);
	dump_write(dims_path, "a", b.s, b.len);
	buf_free(&b);
}
