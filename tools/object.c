/* object.c: fusc FILE --emit=obj -o x.o [--arch=sm_80,sm_90]: an ahead-of-time object that
 * a plain C program links with -lfusrt, no nvcc in its build (docs/embedding.md).
 *
 * NVRTC compiles the device code to a cubin for each --arch and to PTX for the highest (so
 * newer GPUs run it too); backend/aot.c writes the C source holding them, the .fus text and
 * the launchers; the C compiler ($CC, default cc) compiles it in a private temporary folder
 * beside fusrt.h (embedded in fusc at build time) and the header, with CUDA's include folder
 * (the one fusc was built with) on the path for cuda_runtime_api.h. Then the object and the
 * header are written all or nothing; `-o x.a` puts the object in an archive ($AR, default ar).
 * When the C compiler fails, its folder is kept and named.
 */
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/object.h"
#include "tools/output.h"

#ifndef FUSC_CUDA_INCLUDE
#define FUSC_CUDA_INCLUDE "/usr/local/cuda/include"
#endif

extern char **environ;

static const unsigned char fusrt_h[] = {
#include "tools/fusrt_h.inc"
};

static bool write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	bool ok = f && fwrite(data, 1, n, f) == n;

	if (f && fclose(f) != 0)
		ok = false;
	if (!ok)
		fprintf(stderr, "fusc: cannot write '%s': %s\n", path, strerror(errno));
	return ok;
}

static char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 16, got;
	char *s;

	if (!f)
		return NULL;
	s = xmalloc(cap);
	*n = 0;
	while ((got = fread(s + *n, 1, cap - *n, f)) > 0)
		if ((*n += got) == cap)
			s = xrealloc(s, cap *= 2);
	fclose(f);
	return s;
}

/* Runs $VAR (words split at spaces; dflt when unset) with the given arguments; true when it
 * exits 0. */
static bool run_tool(const char *var, const char *dflt, const char *const *args, int nargs)
{
	const char *cc = getenv(var);
	char *words = xstrdup(cc && *cc ? cc : dflt), *save = NULL;
	char **argv = xmalloc(sizeof(char *) * (strlen(words) + (size_t)nargs + 2));
	int n = 0, status = 0;
	pid_t pid;

	for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	for (int i = 0; i < nargs; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	int e = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
	bool ok = e == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		  WEXITSTATUS(status) == 0;
	if (e != 0)
		fprintf(stderr, "fusc: cannot run '%s': %s (set %s)\n", argv[0], strerror(e), var);
	free(argv);
	free(words);
	return ok;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

int object_write(const ObjectJob *job)
{
	struct AotBinary *bins = xmalloc(sizeof *bins * (size_t)(job->narchs + 1));
	Buf cu = {0}, h = {0}, c = {0}, path = {0}, cpath = {0}, opath = {0}, apath = {0};
	unsigned char digest[SHA256_BYTES];
	char hex[2 * SHA256_BYTES + 1], *log = NULL, *obj = NULL;
	const char *tmpdir = getenv("TMPDIR");
	int rc = 2, nb = 0;
	size_t olen = 0;
	Sha256 s;

	cuda_emit_device(job->ks, job->nk, &cu);
	sha256_init(&s);
	sha256_update(&s, cu.s, cu.len);
	sha256_final(&s, digest);
	sha256_hex(digest, hex);
	for (int i = 0; i <= job->narchs; i++) {
		bool ptx = i == job->narchs;
		char arch[16];
		/* the PTX of the highest arch, without an a/f suffix (those run on one GPU only) */
		snprintf(arch, sizeof arch, "%d", atoi(job->archs[job->narchs - 1]));
		char *bin = NULL;
		size_t len = 0;
		if (!nvrtc_compile_arch(cu.s, job->name, ptx ? arch : job->archs[i], !ptx, &bin, &len,
					&log)) {
			fprintf(stderr, "fusc: NVRTC failed to compile the generated code for %s_%s "
				"(internal error):\n%s\n", ptx ? "compute" : "sm", ptx ? arch : job->archs[i],
				log ? log : "");
			free(log);
			goto done;
		}
		free(log);
		log = NULL;
		bins[nb++] = (struct AotBinary){atoi(ptx ? arch : job->archs[i]), ptx, bin,
						ptx ? strlen(bin) + 1 : len};
	}
	header_emit(job->ks, job->nk, job->name, job->guard, &h);
	const char *hname = job->h_path ? base_name(job->h_path) : "fusc_object.h";
	AotInput in = {job->name, hname, job->source, job->source_len, job->lower_arch,
		       job->prefix, hex, bins, nb};
	aot_emit(job->ks, job->nk, &in, &c);

	buf_printf(&path, "%s/fusc-obj-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (!mkdtemp(path.s)) {
		fprintf(stderr, "fusc: cannot create a temporary folder '%s': %s\n", path.s,
			strerror(errno));
		goto done;
	}
	Buf fh = {0};
	buf_printf(&fh, "%s/fusrt.h", path.s);
	Buf hh = {0};
	buf_printf(&hh, "%s/%s", path.s, hname);
	buf_printf(&cpath, "%s/object.c", path.s);
	buf_printf(&opath, "%s/object.o", path.s);
	bool ok = write_file(fh.s, fusrt_h, sizeof fusrt_h) && write_file(hh.s, h.s, h.len) &&
		  write_file(cpath.s, c.s, c.len);
	const char *args[] = {"-std=c11", "-O2", "-fPIC", "-c", "-I", path.s, "-I",
			      FUSC_CUDA_INCLUDE, "-o", opath.s, cpath.s};
	if (ok && !run_tool("CC", "cc", args, countof(args))) {
		fprintf(stderr, "fusc: the C compiler failed on the object's source; it is kept in "
			"%s\n", path.s);
		ok = false;
		path.len = 0; /* keep the folder */
	}
	/* -o x.a: the object in an archive */
	size_t n = strlen(job->obj_path);
	bool archive = n > 2 && strcmp(job->obj_path + n - 2, ".a") == 0;
	buf_printf(&apath, "%s/object.a", path.s);
	const char *ar_args[] = {"rcs", apath.s, opath.s};
	if (ok && archive && !run_tool("AR", "ar", ar_args, countof(ar_args))) {
		fprintf(stderr, "fusc: ar failed to make an archive of the object\n");
		ok = false;
	}
	const char *made = archive ? apath.s : opath.s;
	if (ok && !(obj = read_file(made, &olen))) {
		fprintf(stderr, "fusc: cannot read '%s': %s\n", made, strerror(errno));
		ok = false;
	}
	if (ok) {
		OutputFile fs[2] = {{job->h_path, h.s, h.len}, {job->obj_path, obj, olen}};
		ok = job->h_path ? output_write(fs, 2) : output_write(fs + 1, 1);
	}
	if (path.len) {
		unlink(fh.s);
		unlink(hh.s);
		unlink(cpath.s);
		unlink(opath.s);
		unlink(apath.s);
		rmdir(path.s);
	}
	buf_free(&fh);
	buf_free(&hh);
	rc = ok ? 0 : 2;
done:
	for (int i = 0; i < nb; i++)
		free((void *)bins[i].data);
	free(bins);
	free(obj);
	buf_free(&cu);
	buf_free(&h);
	buf_free(&c);
	buf_free(&path);
	buf_free(&cpath);
	buf_free(&opath);
	buf_free(&apath);
	return rc;
}
