/* fusc.c: the command-line driver (SPEC §5).
 *
 *   fusc FILE.fus            writes STEM.cu and STEM.h in the current directory
 *   fusc run FILE ...        JIT on the GPU and compare with the reference (tools/run.c)
 *   fusc check FILE ...      the lowered kernel on the CPU simulator (interp/simulate.c)
 *
 * Exit status: 0 success, 1 diagnostics, 2 usage or I/O errors. Every output is written by
 * tools/output.c: all or nothing, so a failed compilation never leaves a partial file, and
 * never over the input. A file without any fusion is an error: there is nothing to write.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "frontend/frontend.h"
#include "interp/interp.h"
#include "passes/passes.h"
#include "runtime/runtime.h"
#include "tools/output.h"

typedef enum Emit { EMIT_DEFAULT, EMIT_CUDA, EMIT_HEADER, EMIT_IR, EMIT_AST, EMIT_PTX, EMIT_CUBIN } Emit;

typedef struct Options {
	const char *input;    /* path or "-" */
	const char *output;   /* -o: path or "-"; NULL: derived from the input */
	Emit emit;
	bool native_arch;
	LowerOptions lower;
} Options;

static const char usage_text[] =
	"usage: fusc [options] FILE.fus        compile to FILE.cu + FILE.h\n"
	"       fusc run FILE.fus [--fusion NAME] [--dims M=..,N=..] [--seed S] [--bench]\n"
	"       fusc check FILE.fus [--fusion NAME] [--dims ...]\n"
	"options:\n"
	"  -o PATH                  the .cu output (the header goes beside it); - for stdout\n"
	"  --emit=cuda|header|ir|ast|ptx|cubin\n"
	"                           write only that (to -o PATH, or stdout)\n"
	"  --arch=sm_XY|native      target architecture (default sm_80), one NVRTC supports\n"
	"  --no-arch-check          lower and emit even when the target is too old (warning)\n"
	"  --dump-after=PASS|all    print the kernel IR after a pass (to stderr)\n"
	"  --print-passes           list the lowering passes\n"
	"  --time-passes            print the time each pass took (to stderr)\n"
	"  --help, --version\n"
	"FILE may be - for standard input.\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "fusc: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(run 'fusc --help' for usage)\n");
	return 2;
}

static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *s = xmalloc(cap);
	size_t got;
	while ((got = fread(s + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (n + 1 == cap)
			s = xrealloc(s, cap *= 2);
	}
	if (ferror(f)) {
		free(s);
		return NULL;
	}
	s[n] = 0;
	*len = n;
	return s;
}

/* One output (tools/output.c); an exit status. */
static int write_one(const char *path, const char *data, size_t len)
{
	OutputFile f = {path, data, len};
	return output_write(&f, 1) ? 0 : 2;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* "dir/saxpy.fus" -> "saxpy" (the stem used for default outputs and the include guard). */
static char *stem_of(const char *path)
{
	const char *b = base_name(path);
	char *s = xstrdup(b);
	char *dot = strrchr(s, '.');
	if (dot && dot != s)
		*dot = 0;
	return s;
}

/* "out/k.cu" -> "out/k.h" */
static char *header_path_for(const char *cu)
{
	char *s = xmalloc(strlen(cu) + 4);
	strcpy(s, cu);
	char *dot = strrchr(s, '.');
	char *slash = strrchr(s, '/');
	if (dot && (!slash || dot > slash))
		*dot = 0;
	strcat(s, ".h");
	return s;
}

/* Where the outputs go: cu (-o PATH, "-", or STEM.cu by default) and, for the default emit to
 * a regular file, the header beside it (else *h is NULL). Both malloc'd. */
static void output_paths(const Options *o, const char *stem, char **cu, char **h)
{
	struct stat st;

	*h = NULL;
	if (o->emit != EMIT_DEFAULT) {
		*cu = xstrdup(o->output ? o->output : "-");
		return;
	}
	if (o->output) {
		*cu = xstrdup(o->output);
	} else {
		*cu = xmalloc(strlen(stem) + 4);
		sprintf(*cu, "%s.cu", stem);
	}
	/* stdout, /dev/null or a pipe: the .cu alone, no header beside it */
	if (strcmp(*cu, "-") != 0 && !(stat(*cu, &st) == 0 && !S_ISREG(st.st_mode)))
		*h = header_path_for(*cu);
}

static bool parse_arch(const char *s, Options *o)
{
	if (strcmp(s, "native") == 0) {
		o->native_arch = true;
		return true;
	}
	int v;
	char rest;
	if (sscanf(s, "sm_%d%c", &v, &rest) != 1 || v < 30 || v > 200)
		return false;
	o->lower.arch = v;
	return true;
}

static int parse_args(int argc, char **argv, Options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage_text, stdout);
			exit(0);
		} else if (strcmp(a, "--version") == 0) {
			printf("fusc %s\n", FUSC_VERSION);
			exit(0);
		} else if (strcmp(a, "-o") == 0) {
			if (++i == argc)
				return usage_error("%s needs a path", a);
			o->output = argv[i];
		} else if (strncmp(a, "--emit=", 7) == 0) {
			static const char *names[] = {"", "cuda", "header", "ir", "ast", "ptx", "cubin"};
			o->emit = EMIT_DEFAULT;
			for (int e = 1; e < countof(names); e++)
				if (strcmp(a + 7, names[e]) == 0)
					o->emit = (Emit)e;
			if (o->emit == EMIT_DEFAULT)
				return usage_error("unknown --emit kind '%s' (cuda, header, ir, ast, ptx, cubin)",
						   a + 7);
		} else if (strncmp(a, "--arch=", 7) == 0) {
			if (!parse_arch(a + 7, o))
				return usage_error("bad --arch '%s' (expected sm_XY or native)", a + 7);
		} else if (strcmp(a, "--no-arch-check") == 0) {
			o->lower.no_arch_check = true;
		} else if (strncmp(a, "--dump-after=", 13) == 0) {
			o->lower.dump_after = a + 13;
			if (strcmp(a + 13, "all") != 0 && !pass_exists(a + 13))
				return usage_error("unknown pass '%s' (see --print-passes)", a + 13);
		} else if (strcmp(a, "--print-passes") == 0) {
			passes_print(stdout);
			exit(0);
		} else if (strcmp(a, "--time-passes") == 0) {
			o->lower.time_passes = true;
		} else if (a[0] == '-' && a[1] != 0) {
			return usage_error("unknown option '%s'", a);
		} else if (o->input) {
			return usage_error("more than one input file ('%s')", a);
		} else {
			o->input = a;
		}
	}
	if (!o->input)
		return usage_error("%s", "no input file");
	return 0;
}

/* A file with no fusion (empty, or only comments) compiles to nothing: an error, not empty
 * outputs. */
static void no_fusion(Diag *d, int file)
{
	diag_error(d, (Span){file, 0, 0}, "no fusion in this file: nothing to compile");
}

/* Front end + lowering of every fusion. Returns the kernels, or NULL after diagnostics. */
static Kernel **compile(Arena *a, Diag *d, int file, Options *o, Program **prog_out)
{
	Program *p = frontend_compile(a, d, file);
	*prog_out = p;
	if (!p)
		return NULL;
	Kernel **ks = arena_alloc(a, sizeof(Kernel *) * (p->nfusions + 1));
	bool ok = true;
	for (int i = 0; i < p->nfusions; i++) {
		ks[i] = lower_fusion(a, d, p->fusions[i], &o->lower);
		ok = ok && ks[i];
	}
	return ok ? ks : NULL;
}

static int emit_nvrtc(Kernel **ks, int nk, Options *o, const char *stem)
{
	Buf src = {0};
	cuda_emit_device(ks, nk, &src);
	char *out = NULL, *log = NULL;
	size_t len = 0;
	bool cubin = o->emit == EMIT_CUBIN;
	if (!nvrtc_compile(src.s, stem, o->lower.arch, cubin, &out, &len, &log)) {
		fprintf(stderr, "fusc: NVRTC failed to compile the generated code (internal error):\n%s\n",
			log ? log : "");
		buf_free(&src);
		free(log);
		return 2;
	}
	int rc = write_one(o->output ? o->output : "-", out, cubin ? len : strlen(out));
	buf_free(&src);
	free(out);
	free(log);
	return rc;
}

static int emit_outputs(Kernel **ks, int nk, Program *p, Options *o, const char *stem,
			const char *src_name, const char *cu_path, const char *h_path)
{
	Buf cu = {0}, h = {0};
	int rc = 0;
	switch (o->emit) {
	case EMIT_PTX:
	case EMIT_CUBIN:
		return emit_nvrtc(ks, nk, o, stem);
	case EMIT_IR:
		for (int i = 0; i < p->nfusions; i++) {
			ir_print_fusion(p->fusions[i], &cu);
			buf_puts(&cu, "\n");
			kir_print(ks[i], &cu);
			buf_puts(&cu, "\n");
		}
		rc = write_one(cu_path, cu.s, cu.len);
		break;
	case EMIT_CUDA:
		cuda_emit(ks, nk, src_name, &cu);
		rc = write_one(cu_path, cu.s, cu.len);
		break;
	case EMIT_HEADER:
		header_emit(ks, nk, src_name, stem, &h);
		rc = write_one(cu_path, h.s, h.len);
		break;
	case EMIT_DEFAULT: {
		cuda_emit(ks, nk, src_name, &cu);
		header_emit(ks, nk, src_name, stem, &h);
		OutputFile fs[2] = {{h_path, h.s, h.len}, {cu_path, cu.s, cu.len}};
		rc = h_path ? (output_write(fs, 2) ? 0 : 2) : write_one(cu_path, cu.s, cu.len);
		break;
	}
	case EMIT_AST:
		unreachable();
	}
	buf_free(&cu);
	buf_free(&h);
	return rc;
}

static int compile_main(int argc, char **argv)
{
	Options o = {0};
	o.lower.arch = 80;
	o.lower.dump_out = stderr;
#ifdef FUSC_VERIFY
	o.lower.verify = true;
#endif
	if (getenv("FUSC_VERIFY"))
		o.lower.verify = true;
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	if (o.native_arch) {
		char name[256];
		if (fusrt_device_info(name, sizeof name, &o.lower.arch) != FUSRT_OK) {
			fprintf(stderr, "fusc: --arch=native needs a GPU: %s\n", fusrt_last_error());
			return 2;
		}
	}
	Buf archs = {0};
	if (!nvrtc_arch_supported(o.lower.arch, &archs)) {
		fprintf(stderr, "fusc: unsupported architecture sm_%d%s: NVRTC supports %s\n",
			o.lower.arch, o.native_arch ? " (--arch=native)" : "", archs.s);
		buf_free(&archs);
		return 2;
	}
	buf_free(&archs);

	bool from_stdin = strcmp(o.input, "-") == 0;
	FILE *in = from_stdin ? stdin : fopen(o.input, "rb");
	if (!in) {
		fprintf(stderr, "fusc: cannot open '%s': %s\n", o.input, strerror(errno));
		return 2;
	}
	size_t len = 0;
	char *text = read_all(in, &len);
	if (!from_stdin)
		fclose(in);
	if (!text) {
		fprintf(stderr, "fusc: cannot read '%s'\n", o.input);
		return 2;
	}
	if (from_stdin && !o.output && o.emit == EMIT_DEFAULT)
		o.output = "-";

	const char *shown = from_stdin ? "<stdin>" : o.input;
	char *stem = from_stdin ? xstrdup("stdin") : stem_of(o.input);
	char *cu_path, *h_path;
	output_paths(&o, stem, &cu_path, &h_path);
	if (output_is_input(cu_path, o.input) || (h_path && output_is_input(h_path, o.input))) {
		free(text);
		free(stem);
		free(cu_path);
		free(h_path);
		return 2;
	}
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, shown, text, len);
	free(text);

	Program *p = NULL;
	Kernel **ks = NULL;
	double t0 = now_seconds();
	if (o.emit == EMIT_AST) {
		/* The AST is printed straight from the parser, before sema. */
		AstFile *af = parse_file(a, d, file);
		if (diag_error_count(d) == 0 && af->nfusions == 0)
			no_fusion(d, file);
		if (diag_error_count(d) == 0) {
			Buf b = {0};
			ast_print(af, &b);
			rc = write_one(cu_path, b.s, b.len);
			buf_free(&b);
		} else {
			rc = 1;
		}
	} else if ((ks = compile(a, d, file, &o, &p)) && p->nfusions == 0) {
		no_fusion(d, file);
		rc = 1;
	} else if (ks && diag_error_count(d) == 0) {
		diag_print(d, stderr); /* warnings */
		rc = emit_outputs(ks, p->nfusions, p, &o, stem, base_name(shown), cu_path, h_path);
		if (o.lower.time_passes)
			fprintf(stderr, "total: text to output %.0f us\n", (now_seconds() - t0) * 1e6);
	} else {
		rc = 1;
	}
	diag_print(d, stderr);
	diag_free(d);
	arena_free(a);
	free(stem);
	free(cu_path);
	free(h_path);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return fusc_run_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "check") == 0)
		return fusc_check_main(argc - 1, argv + 1);
	return compile_main(argc, argv);
}
