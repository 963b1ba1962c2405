/* fusc.c: the command-line driver (docs/cli.md).
 *
 *   fusc FILE.fus            writes STEM.cu and STEM.h in the current directory
 *   fusc run FILE ...        JIT on the GPU and compare with the reference (tools/run.c)
 *   fusc check FILE ...      the lowered kernel on the CPU simulator (interp/simulate.c)
 *
 * Options are GNU style (getopt_long); --help lists every one, docs/fusc.1 documents them.
 * Exit status: 0 success, 1 diagnostics, 2 usage or I/O errors. Every output is written by
 * tools/output.c: all or nothing, so a failed compilation never leaves a partial file, and
 * never over the input. A file without any fusion is an error: there is nothing to write.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "scheduler/scheduler.h"
#include "interp/interp.h"
#include "passes/passes.h"
#include "runtime/runtime.h"
#include "tools/cli.h"
#include "tools/object.h"
#include "tools/output.h"

typedef enum Emit {
	EMIT_DEFAULT, EMIT_CUDA, EMIT_HEADER, EMIT_IR, EMIT_AST, EMIT_PTX, EMIT_CUBIN, EMIT_SCHEDULE,
	EMIT_OBJ
} Emit;

enum { MAX_ARCHS = 16 }; /* --arch=sm_80,sm_90,... (--emit=obj) */

typedef struct Options {
	const char *input;    /* path or "-" */
	const char *output;   /* -o: path or "-"; NULL: derived from the input */
	Emit emit;
	bool native_arch;
	bool arch_given;      /* --arch: checked against NVRTC's list when NVRTC can be loaded */
	char arch_suffix;     /* 'a' (sm_90a) or 'f' (sm_100f): for NVRTC (ptx, cubin) only */
	char archs[MAX_ARCHS][8]; /* every --arch of a list ("80", "90a"), in ascending order */
	int narchs;
	DiagColor color;
	const char *prefix;   /* --prefix: put before every launcher and kernel name; NULL: none */
	LowerOptions lower;
} Options;

/* Every option, subcommand, exit status and environment variable; docs/fusc.1 holds the same
 * options (tests/golden.sh checks both ways). */
static const char usage_text[] =
	"usage: fusc [options] FILE.fus       compile to STEM.cu and STEM.h (- : stdin)\n"
	"       fusc run FILE.fus [options]   JIT on the GPU, compare with the reference\n"
	"       fusc check FILE.fus [options] run the lowered kernel on the CPU simulator\n"
	"\n"
	"Values follow --opt=X or --opt X (-oFILE or -o FILE); -- ends the options.\n"
	"\n"
	"fusc FILE.fus:\n"
	"  -o, --output=PATH        the .cu (the header goes beside it: PATH less its\n"
	"                           extension, plus .h); - for stdout\n"
	"  --emit=KIND              only one output, to -o PATH or stdout: cuda, header,\n"
	"                           ir, ast, ptx, cubin (ptx and cubin need NVRTC);\n"
	"                           schedule: each fusion's schedule as directives; obj:\n"
	"                           an object for cc (PATH, default STEM.o; x.a: an archive)\n"
	"                           and its header\n"
	"  --prefix=NAME_           put NAME_ before every launcher and kernel name\n"
	"                           (two files may then both define softmax)\n"
	"  --arch=sm_XY|sm_XYa|native\n"
	"                           target (default sm_80), one NVRTC lists; sm_90a and\n"
	"                           sm_100f name arch-specific and family targets;\n"
	"                           --emit=obj takes a list: --arch=sm_80,sm_90\n"
	"  --no-arch-check          lower and emit for a target too old (a warning)\n"
	"  --dump-after=PASS|all    print the kernel IR after a pass (to stderr)\n"
	"  --print-passes           list the lowering passes\n"
	"  --time-passes            print the time each pass took (to stderr)\n"
	"\n"
	"fusc run and fusc check:\n"
	"  --fusion=NAME            only that fusion (default: every one)\n"
	"  --dims=M=4096,N=4096     the sizes\n"
	"  --seed=S                 the seed of the random inputs (default 0)\n"
	"fusc run only:\n"
	"  --bench                  also time the kernel (median, GB/s)\n"
	"  --no-reference           do not run the CPU reference (time only)\n"
	"  --verbose                say which kernel variant each launch runs\n"
	"fusc check only:\n"
	"  --size=S                 every size not in --dims (default 67)\n"
	"  --max-blocks=N           simulate at most N blocks (default 1024; 0: all)\n"
	"  --max-elements=N         refuse work holding more than N elements\n"
	"  --max-steps=N            refuse work above N simulator steps\n"
	"\n"
	"Everywhere:\n"
	"  --color=auto|always|never  colour in diagnostics (default auto: on a terminal)\n"
	"  -h, --help               this text (fusc run --help: run's own)\n"
	"  --version                fusc's version and NVRTC's (fusc --version only)\n"
	"\n"
	"Exit status: 0 success; 1 errors in the file (diagnostics), a mismatch (run,\n"
	"check) or a report (check); 2 usage, I/O, bad --dims, no GPU, budget exceeded.\n"
	"\n"
	"Environment:\n"
	"  NO_COLOR                 set and not empty: no colour with --color=auto\n"
	"  TERM                     dumb: no colour with --color=auto\n"
	"  FUSRT_CACHE_DIR          the JIT's disk cache (fusc run, libfusrt)\n"
	"                           (default $XDG_CACHE_HOME/fusc or $HOME/.cache/fusc)\n"
	"  FUSRT_NO_CACHE           set and not 0: no disk cache\n"
	"  FUSRT_LIBNVRTC           the NVRTC library to load (default the CUDA fusc was\n"
	"                           built with)\n"
	"  FUSRT_LIBCUDA            the CUDA driver to load (default libcuda.so.1)\n"
	"  FUSRT_DUMP               a folder: each JIT compile writes its .fus, CUDA, PTX\n"
	"                           and launch dims there, each launch appends its dims\n"
	"  FUSC_VERIFY              set: run the IR verifier between passes\n"
	"  CC                       the C compiler of --emit=obj (default cc)\n"
	"  AR                       the archiver of --emit=obj -o x.a (default ar)\n"
	"  TMPDIR                   where --emit=obj compiles (default /tmp)\n"
	"\n"
	"Manual: man fusc (docs/fusc.1); the command line: docs/cli.md.\n";

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
	if (o->emit != EMIT_DEFAULT && o->emit != EMIT_OBJ) {
		*cu = xstrdup(o->output ? o->output : "-");
		return;
	}
	if (o->output) {
		*cu = xstrdup(o->output);
	} else {
		*cu = xmalloc(strlen(stem) + 4);
		sprintf(*cu, "%s.%s", stem, o->emit == EMIT_OBJ ? "o" : "cu");
	}
	/* stdout, /dev/null or a pipe: the .cu alone, no header beside it */
	if (strcmp(*cu, "-") != 0 && !(stat(*cu, &st) == 0 && !S_ISREG(st.st_mode)))
		*h = header_path_for(*cu);
}

/* The target against NVRTC's list of architectures. NVRTC is needed for ptx and cubin; for
 * the other outputs it is loaded only to check an --arch the user gave (the default sm_80 is
 * one every NVRTC lists), and without it the target is taken as given, so fusc --emit=cuda
 * neither loads nor needs libnvrtc. -1 to go on, else an exit status. */
static int check_arch(const Options *o)
{
	bool needs_nvrtc = o->emit == EMIT_PTX || o->emit == EMIT_CUBIN || o->emit == EMIT_OBJ;
	const char *why;
	int rc = -1;

	if (!needs_nvrtc && !o->arch_given && !o->native_arch)
		return -1;
	if (!nvrtc_load(&why)) {
		if (!needs_nvrtc)
			return -1;
		fprintf(stderr, "fusc: --emit=%s needs NVRTC: %s\n",
			o->emit == EMIT_PTX ? "ptx" : o->emit == EMIT_CUBIN ? "cubin" : "obj", why);
		return 2;
	}
	Buf archs = {0};
	for (int i = 0; i < (o->narchs ? o->narchs : 1) && rc < 0; i++) {
		int a = o->narchs ? atoi(o->archs[i]) : o->lower.arch;
		if (!nvrtc_arch_supported(a, &archs)) {
			fprintf(stderr, "fusc: unsupported architecture sm_%d%s: NVRTC supports %s\n",
				a, o->native_arch ? " (--arch=native)" : "", archs.s);
			rc = 2;
		}
		buf_free(&archs);
	}
	buf_free(&archs);
	return rc;
}

/* fusc's version, and NVRTC's when it can be loaded. */
static void print_version(void)
{
	int major = 0, minor = 0;
	const char *why;

	printf("fusc %s\n", FUSC_VERSION);
	if (nvrtc_load(&why)) {
		nvrtc_version(&major, &minor);
		printf("NVRTC %d.%d\n", major, minor);
	} else {
		printf("NVRTC: not available (%s)\n", why);
	}
}

/* "sm_XY", "sm_XYa" (arch-specific features, sm_90 and later) or "sm_XYf" (family,
 * sm_100 and later), or "native". Whether NVRTC lists sm_XY is checked later (check_arch). */
static bool parse_one_arch(const char *s, Options *o)
{
	o->arch_suffix = 0;
	if (strcmp(s, "native") == 0) {
		o->native_arch = true;
		return true;
	}
	int v, end = 0;
	if (sscanf(s, "sm_%d%n", &v, &end) != 1 || v < 30 || v > 200 ||
	    !isdigit((unsigned char)s[3]))
		return false;
	o->native_arch = false;
	if ((s[end] == 'a' && v >= 90) || (s[end] == 'f' && v >= 100))
		o->arch_suffix = s[end++];
	if (s[end])
		return false;
	o->lower.arch = v;
	o->arch_given = true;
	return true;
}

/* One arch, or a comma-separated list of sm_ archs (--emit=obj): the kernels are lowered for
 * the lowest, the list is kept sorted in o->archs. */
static bool parse_arch(const char *s, Options *o)
{
	char *list = xstrdup(s), *save = NULL;
	int lowest = 0;
	bool ok = true;

	o->narchs = 0;
	for (char *w = strtok_r(list, ",", &save); w && ok; w = strtok_r(NULL, ",", &save)) {
		ok = o->narchs < MAX_ARCHS && parse_one_arch(w, o) && !o->native_arch;
		if (!ok)
			break;
		int i = o->narchs++;
		for (; i > 0 && atoi(o->archs[i - 1]) > o->lower.arch; i--)
			memcpy(o->archs[i], o->archs[i - 1], sizeof o->archs[i]);
		snprintf(o->archs[i], sizeof o->archs[i], "%d%.1s", o->lower.arch,
			 o->arch_suffix ? &o->arch_suffix : "");
		lowest = lowest && lowest < o->lower.arch ? lowest : o->lower.arch;
	}
	if (!ok && o->narchs == 0 && !strchr(s, ','))
		ok = parse_one_arch(s, o); /* native */
	free(list);
	if (ok && o->narchs > 0)
		o->lower.arch = lowest;
	return ok && (o->narchs > 0 || o->native_arch);
}

static int parse_emit(const char *s, Options *o)
{
	static const char *names[] = {"", "cuda", "header", "ir", "ast", "ptx", "cubin", "schedule", "obj"};

	for (int e = 1; e < countof(names); e++) {
		if (strcmp(s, names[e]) == 0) {
			o->emit = (Emit)e;
			return -1;
		}
	}
	return usage_error("unknown --emit kind '%s' (cuda, header, ir, ast, ptx, cubin, schedule, obj)", s);
}

enum { OPT_EMIT = 256, OPT_ARCH, OPT_NO_ARCH_CHECK, OPT_DUMP_AFTER, OPT_PRINT_PASSES,
       OPT_TIME_PASSES, OPT_COLOR, OPT_VERSION, OPT_PREFIX };

/* --prefix: a C identifier, not one of the names C reserves (leading "__" or "_X"). */
static bool prefix_ok(const char *s)
{
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_') ||
	    (s[0] == '_' && (s[1] == '_' || isupper((unsigned char)s[1]))))
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}

/* getopt_long, GNU style: --opt=X and --opt X, -oFILE and -o FILE, operands anywhere, "--"
 * ends the options. -1 to go on, else an exit status (0 after --help, --version,
 * --print-passes). */
static int parse_args(int argc, char **argv, Options *o)
{
	static const struct option longs[] = {
		{"output", required_argument, NULL, 'o'},
		{"emit", required_argument, NULL, OPT_EMIT},
		{"arch", required_argument, NULL, OPT_ARCH},
		{"no-arch-check", no_argument, NULL, OPT_NO_ARCH_CHECK},
		{"dump-after", required_argument, NULL, OPT_DUMP_AFTER},
		{"print-passes", no_argument, NULL, OPT_PRINT_PASSES},
		{"time-passes", no_argument, NULL, OPT_TIME_PASSES},
		{"color", required_argument, NULL, OPT_COLOR},
		{"prefix", required_argument, NULL, OPT_PREFIX},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{0},
	};
	int ch, rc = -1;

	optind = 0;
	opterr = 0;
	while (rc < 0 && (ch = getopt_long(argc, argv, "-:o:h", longs, NULL)) != -1) {
		switch (ch) {
		case 1:
			if (o->input)
				return usage_error("more than one input file ('%s')", optarg);
			o->input = optarg;
			break;
		case 'o':
			o->output = optarg;
			break;
		case OPT_EMIT:
			rc = parse_emit(optarg, o);
			break;
		case OPT_ARCH:
			if (!parse_arch(optarg, o))
				return usage_error("bad --arch '%s' (expected sm_XY, sm_XYa, sm_XYf "
						   "or native)", optarg);
			break;
		case OPT_NO_ARCH_CHECK:
			o->lower.no_arch_check = true;
			break;
		case OPT_DUMP_AFTER:
			o->lower.dump_after = optarg;
			if (strcmp(optarg, "all") != 0 && !pass_exists(optarg))
				return usage_error("unknown pass '%s' (see --print-passes)", optarg);
			break;
		case OPT_PRINT_PASSES:
			passes_print(stdout);
			return 0;
		case OPT_TIME_PASSES:
			o->lower.time_passes = true;
			break;
		case OPT_COLOR:
			if (!diag_color_from_name(optarg, &o->color))
				return usage_error("bad --color '%s' (expected auto, always or never)",
						   optarg);
			break;
		case OPT_PREFIX:
			if (!prefix_ok(optarg))
				return usage_error("bad --prefix '%s' (expected the start of a C "
						   "identifier, such as mylib_)", optarg);
			o->prefix = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case OPT_VERSION:
			print_version();
			return 0;
		default: /* '?' or ':' */
			cli_option_error("fusc", ch, argv);
			fprintf(stderr, "(run 'fusc --help' for usage)\n");
			return 2;
		}
	}
	for (; rc < 0 && optind < argc; optind++) { /* after "--" */
		if (o->input)
			return usage_error("more than one input file ('%s')", argv[optind]);
		o->input = argv[optind];
	}
	if (rc < 0 && !o->input)
		return usage_error("%s", "no input file");
	if (rc < 0 && o->narchs > 1 && o->emit != EMIT_OBJ)
		return usage_error("%s", "a list of --arch is for --emit=obj (one object for several "
				   "GPUs)");
	if (rc < 0 && o->emit == EMIT_OBJ && o->output && strcmp(o->output, "-") == 0)
		return usage_error("%s", "--emit=obj writes a file, not standard output (-o x.o)");
	return rc;
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
	double t0 = now_seconds();
	Program *p = compile_program_for(a, d, file, o->lower.arch);
	*prog_out = p;
	if (o->lower.time_passes)
		fprintf(stderr, "front end and scheduling: %.0f us\n", (now_seconds() - t0) * 1e6);
	if (!p)
		return NULL;
	Kernel **ks = arena_alloc(a, sizeof(Kernel *) * (p->nfusions + 1));
	bool ok = true;
	for (int i = 0; i < p->nfusions; i++) {
		/* --prefix renames the fusion after the front end checked its own name, so the
		 * launcher, its kernels and the header all carry it. */
		Fusion *f = p->fusions[i];
		if (o->prefix)
			fusion_rename(a, f, arena_printf(a, "%s%s", o->prefix, f->name));
		ks[i] = lower_fusion(a, d, p->fusions[i], &o->lower);
		ok = ok && ks[i];
	}
	if (o->lower.time_passes)
		fprintf(stderr, "lowering: %.0f us\n", (now_seconds() - t0) * 1e6);
	return ok ? ks : NULL;
}

static int emit_nvrtc(Kernel **ks, int nk, Options *o, const char *stem)
{
	Buf src = {0};
	cuda_emit_device(ks, nk, &src);
	char *out = NULL, *log = NULL;
	size_t len = 0;
	bool cubin = o->emit == EMIT_CUBIN;
	char arch[16];
	snprintf(arch, sizeof arch, "%d%.1s", o->lower.arch, o->arch_suffix ? &o->arch_suffix : "");
	if (!nvrtc_compile_arch(src.s, stem, arch, cubin, &out, &len, &log)) {
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

/* text as comment lines (`//   `) */
static void put_commented(Buf *b, const char *text)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		int n = nl ? (int)(nl - l) : (int)strlen(l);
		buf_printf(b, "//   %.*s\n", n, l);
		l += n + (nl != NULL);
	}
}

static void put_commented_schedule(Buf *b, AstSchedule *s)
{
	Buf vb = {0};
	ast_print_schedule(s, &vb);
	put_commented(b, vb.s);
	buf_free(&vb);
}

/* Where an automatic schedule of a segment or size variant came from: its outputs' classes
 * (docs/auto_schedule.md, "Classes"), or the fallback level it took. */
static void put_origin(Buf *b, Fusion *g)
{
	if (g->auto_fallback)
		buf_printf(b, "the automatic scheduler's %s schedule: the tuned one did not compile",
			   g->auto_fallback);
	else
		buf_printf(b, "class: %s", g->auto_class ? g->auto_class : "general");
}

/* A segmented fusion: no schedule block can say it (a block schedules one kernel, the launcher
 * runs several), so each segment is printed as a fusion of its own with its schedule,
 * commented out: uncommented in a file without f (whose segments' kernels have these names),
 * they compile to the segments' kernels, to launch in order by hand (tests/emit_schedule.sh). */
static void emit_segments(Fusion *f, Buf *b)
{
	buf_printf(b, "// %s: the automatic scheduler split it into %d segments, kernels its launcher runs in\n"
		      "// order (a schedule block schedules one kernel, so none can say this). Each segment is\n"
		      "// a fusion of its own: uncommented, in a file without %s, these compile to the same\n"
		      "// kernels, to launch in order (a 0-d value passes as a 1-element tensor):\n",
		   f->name, f->segments.len, f->name);
	for (int i = 0; i < f->segments.len; i++) {
		Fusion *g = VEC_AT(f->segments, Segment, i)->fusion;
		/* a comment once uncommented too: the round trip still compiles */
		buf_printf(b, "//   // %s (", g->name);
		put_origin(b, g);
		buf_puts(b, ")\n");
		Buf fb = {0};
		ast_print_fusion(g->ast, &fb);
		put_commented(b, fb.s);
		buf_free(&fb);
		put_commented_schedule(b, g->ast_schedule);
	}
}

/* `--emit=schedule`: each fusion's schedule block as the scheduler applied it (the user's
 * block, or the automatic scheduler's directives), to paste into the file and edit. */
static void emit_schedules(Program *p, Buf *b)
{
	for (int i = 0; i < p->nfusions; i++) {
		Fusion *f = p->fusions[i];
		buf_puts(b, i ? "\n" : "");
		if (f->segments.len)
			emit_segments(f, b);
		else if (!f->auto_scheduled)
			buf_printf(b, "// %s: the schedule block of the file\n", f->name);
		else if (f->auto_fallback)
			buf_printf(b, "// %s: the automatic scheduler's %s schedule (the tuned one did not compile)\n",
				   f->name, f->auto_fallback);
		else
			buf_printf(b, "// %s: the automatic scheduler's schedule (class: %s)\n", f->name,
				   f->auto_class ? f->auto_class : "general");
		bool copies = false;
		for (int k = 0; k < f->ntensors && !f->segments.len; k++) {
			Tensor *t = f->tensors[k];
			if (!t->copy_of || t->sched.inlined)
				continue;
			if (!copies)
				buf_puts(b, "// It names tensors the scheduler copied (a schedule block cannot copy;\n"
					    "// add each as a statement of its own to use this block):\n");
			buf_printf(b, "//   %s, a copy of %s\n", t->name, t->copy_of->name);
			copies = true;
		}
		if (f->pad_plan)
			buf_printf(b, "// Where an operand's rows (its last dimension) are not a multiple of 8 elements,\n"
				      "// its launcher copies the operands into rows padded to 8 and runs this schedule\n"
				      "// on the copies: %s_segments\n"
				      "// (docs/tensor_cores.md, \"Rows that are not a multiple of 8\").\n", f->name);
		if (!f->segments.len)
			ast_print_schedule(f->ast_schedule, b);
		/* size variants: a schedule block has one schedule for every size, so each is shown
		 * for reading, commented out */
		for (int v = 0; v < f->variants.len; v++) {
			Fusion *g = VEC_AT(f->variants, Fusion, v);
			buf_puts(b, "// size variant for");
			for (int k = 0; k < g->nsizes; k++)
				if (g->sizes[k]->bound > 0)
					buf_printf(b, " %s <= %lld", g->sizes[k]->name, (long long)g->sizes[k]->bound);
			SizeProd *sp = fusion_size_prod(g, false);
			for (int k = 0, n = 0; sp && k < g->nsizes && k < 64; k++)
				if (sp->of >> k & 1)
					buf_printf(b, "%s%s", n++ ? " * " : " ", g->sizes[k]->name);
			if (sp)
				buf_printf(b, " <= %lld", (long long)sp->bound);
			buf_puts(b, " (");
			put_origin(b, g);
			buf_puts(b, "; run instead when that holds; a block cannot say so):\n");
			if (g->segments.len)
				emit_segments(g, b);
			else
				put_commented_schedule(b, g->ast_schedule);
		}
	}
}

static int emit_outputs(Kernel **ks, int nk, Program *p, Options *o, const char *stem,
			const char *src_name, const char *cu_path, const char *h_path,
			const char *text, size_t len)
{
	Buf cu = {0}, h = {0};
	int rc = 0;
	/* the include guard: with --prefix, two headers of one stem may be included together */
	char *guard = xmalloc(strlen(o->prefix ? o->prefix : "") + strlen(stem) + 1);
	sprintf(guard, "%s%s", o->prefix ? o->prefix : "", stem);
	switch (o->emit) {
	case EMIT_PTX:
	case EMIT_CUBIN:
		rc = emit_nvrtc(ks, nk, o, stem);
		break;
	case EMIT_IR:
		for (int i = 0; i < p->nfusions; i++) {
			ir_print_fusion(p->fusions[i], &cu);
			buf_puts(&cu, "\n");
			kir_print(kernel_own(ks[i]), &cu); /* not the size variants' */
			buf_puts(&cu, "\n");
		}
		rc = write_one(cu_path, cu.s, cu.len);
		break;
	case EMIT_CUDA:
		cuda_emit(ks, nk, src_name, &cu);
		rc = write_one(cu_path, cu.s, cu.len);
		break;
	case EMIT_SCHEDULE:
		emit_schedules(p, &cu);
		rc = write_one(cu_path, cu.s, cu.len);
		break;
	case EMIT_HEADER:
		header_emit(ks, nk, src_name, guard, &h);
		rc = write_one(cu_path, h.s, h.len);
		break;
	case EMIT_DEFAULT: {
		cuda_emit(ks, nk, src_name, &cu);
		header_emit(ks, nk, src_name, guard, &h);
		OutputFile fs[2] = {{h_path, h.s, h.len}, {cu_path, cu.s, cu.len}};
		rc = h_path ? (output_write(fs, 2) ? 0 : 2) : write_one(cu_path, cu.s, cu.len);
		break;
	}
	case EMIT_OBJ: {
		char one[MAX_ARCHS][8];
		const char *archs[MAX_ARCHS];
		int n = o->narchs;
		if (n == 0) { /* the default target, or --arch=native */
			snprintf(one[0], sizeof one[0], "%d", o->lower.arch);
			archs[n++] = one[0];
		}
		for (int i = 0; i < o->narchs; i++)
			archs[i] = o->archs[i];
		ObjectJob job = {ks, nk, src_name, text, len, o->prefix, guard, o->lower.arch, archs, n,
				 cu_path, h_path};
		rc = object_write(&job);
		break;
	}
	case EMIT_AST:
		unreachable();
	}
	buf_free(&cu);
	buf_free(&h);
	free(guard);
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
	if (rc >= 0)
		return rc;
	if (o.native_arch) {
		char name[256];
		if (fusrt_device_info(name, sizeof name, &o.lower.arch) != FUSRT_OK) {
			fprintf(stderr, "fusc: --arch=native needs a GPU: %s\n", fusrt_last_error());
			return 2;
		}
	}
	if ((rc = check_arch(&o)) >= 0)
		return rc;

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
	if (h_path && strcmp(h_path, cu_path) == 0) {
		/* -o x.h: the .cu and its header would both be x.h */
		const char *ext = o.emit == EMIT_OBJ ? "o" : "cu";
		fprintf(stderr, "fusc: the output '%s' is the header written beside it: name the "
			".%s (-o %.*s.%s), or write only the header (--emit=header)\n", cu_path, ext,
			(int)(strlen(cu_path) - 2), cu_path, ext);
		rc = 2;
	}
	if (rc == 2 || output_is_input(cu_path, o.input) ||
	    (h_path && output_is_input(h_path, o.input))) {
		free(text);
		free(stem);
		free(cu_path);
		free(h_path);
		return 2;
	}
	Arena *a = arena_new();
	Diag *d = diag_new();
	cli_diag_color(d, o.color);
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
		rc = emit_outputs(ks, p->nfusions, p, &o, stem, base_name(shown), cu_path, h_path,
				  diag_file_text(d, file), diag_file_len(d, file));
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
