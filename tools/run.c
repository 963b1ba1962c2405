/* run.c: `fusc run FILE [--fusion NAME] [--dims M=..,N=..] [--seed S] [--bench]`.
 *
 * For each selected fusion (all of them without --fusion): random inputs (seeded; see
 * docs/runtime.md), outputs poisoned with 0xff bytes (NaN for floats, -1 for integers) before
 * the launch, the GPU run through libfusrt, the reference interpreter on the same inputs, and
 * a comparison with tolerances by dtype. Everything the user can get wrong (options, dims,
 * fusion name) is checked before anything is launched. Exit: 0 PASS, 1 mismatch or errors in
 * the file, 2 usage, I/O, bad dims or no CUDA device.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "interp/interp.h"
#include "runtime/runtime.h"

typedef struct Dim {
	char *name;
	int64_t value;
	bool used;
} Dim;

typedef struct RunOpts {
	const char *file;
	const char *fusion;
	Dim dims[64];
	int ndims;
	uint64_t seed;
	bool bench;
	bool no_reference; /* --no-reference: time only (pair with a checked run at another size) */
} RunOpts;

/* An error line on stderr, after whatever stdout holds (so the two read in order). */
static void run_error(const char *fmt, ...) PRINTF(1, 2);
static void run_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("fusc run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: fusc run FILE [--fusion NAME] [--dims M=4096,N=4096] [--seed S] "
		     "[--bench] [--no-reference]\n");
}

static int fail_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "fusc run: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 2;
}

static bool parse_int(const char *s, int64_t *out)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* "M=4096,N=4096" */
static int parse_dims(RunOpts *o, const char *spec)
{
	char *copy = xstrdup(spec), *save = NULL;
	int rc = 0;

	for (char *item = strtok_r(copy, ",", &save); item && !rc;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		int64_t v;
		if (!eq || eq == item) {
			rc = fail_usage("bad --dims item '%s' (expected NAME=VALUE)", item);
			break;
		}
		*eq = 0;
		if (!parse_int(eq + 1, &v)) {
			*eq = '=';
			rc = fail_usage("bad --dims value in '%s' (expected a non-negative integer)",
					item);
			break;
		}
		int k = 0;
		while (k < o->ndims && strcmp(o->dims[k].name, item) != 0)
			k++;
		if (k < o->ndims) {
			if (o->dims[k].value != v)
				rc = fail_usage("dimension %s is given two different values", item);
			continue;
		}
		if (o->ndims == countof(o->dims)) {
			rc = fail_usage("too many --dims (at most 64)%s", "");
			break;
		}
		o->dims[o->ndims++] = (Dim){xstrdup(item), v, false};
	}
	free(copy);
	return rc;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(RunOpts *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		size_t n = strcspn(a, "=");
		bool has_eq = a[n] == '=';
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--bench") == 0) {
			o->bench = true;
			continue;
		}
		if (strcmp(a, "--no-reference") == 0) {
			o->no_reference = true;
			continue;
		}
		if (a[0] != '-' || strcmp(a, "-") == 0) {
			if (o->file)
				return fail_usage("more than one input file ('%s')", a);
			o->file = a;
			continue;
		}
		bool known = (n == 8 && strncmp(a, "--fusion", n) == 0) ||
			     (n == 6 && strncmp(a, "--dims", n) == 0) ||
			     (n == 6 && strncmp(a, "--seed", n) == 0);
		if (!known)
			return fail_usage("unknown option '%s'", a);
		if (has_eq)
			val = a + n + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return fail_usage("option '%s' needs a value", a);
		int64_t seed;
		if (strncmp(a, "--fusion", 8) == 0) {
			o->fusion = val;
		} else if (strncmp(a, "--dims", 6) == 0) {
			int rc = parse_dims(o, val);
			if (rc)
				return rc;
		} else if (!parse_int(val, &seed)) {
			return fail_usage("bad --seed '%s' (expected a non-negative integer)", val);
		} else {
			o->seed = (uint64_t)seed;
		}
	}
	if (!o->file) {
		usage(stderr);
		return 2;
	}
	return -1;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	Buf b = {0};
	char chunk[65536];
	size_t n;

	if (!f)
		return NULL;
	buf_puts(&b, "");
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (b.len + n + 1 > b.cap) {
			b.cap = (b.len + n + 1) * 2;
			b.s = xrealloc(b.s, b.cap);
		}
		memcpy(b.s + b.len, chunk, n);
		b.len += n;
		b.s[b.len] = 0;
	}
	bool bad = ferror(f);
	if (f != stdin)
		fclose(f);
	if (bad) {
		buf_free(&b);
		return NULL;
	}
	*len = b.len;
	return b.s;
}

/* ---- one fusion ----------------------------------------------------------------------- */

typedef struct Job {
	Fusion *f;
	int64_t sizes[64];
} Job;

/* Sizes of f from the --dims; an exit status on error, else -1. */
static int job_sizes(RunOpts *o, Job *j, const char *file)
{
	Fusion *f = j->f;
	char *err = NULL;

	if (f->nsizes > countof(j->sizes))
		return fail_usage("fusion %s has too many size symbols", f->name);
	for (int i = 0; i < f->nsizes; i++) {
		int k = 0;
		while (k < o->ndims && strcmp(o->dims[k].name, f->sizes[i]->name) != 0)
			k++;
		if (k == o->ndims) {
			fprintf(stderr, "fusc run: missing dimension %s for fusion %s (give --dims "
				"%s=...)\n", f->sizes[i]->name, f->name, f->sizes[i]->name);
			return 2;
		}
		o->dims[k].used = true;
		j->sizes[i] = o->dims[k].value;
	}
	if (!interp_check_sizes(f, j->sizes, &err)) {
		fprintf(stderr, "fusc run: dims contradict %s: fusion %s: %s\n", file, f->name, err);
		free(err);
		return 2;
	}
	return -1;
}

typedef struct Tol {
	double atol, rtol;
} Tol;

static Tol tolerance(Tensor *t, const int64_t *sizes)
{
	double scale = sqrt(interp_reduction_terms(t, sizes));
	Tol r = {0, 0};

	switch (t->dtype) {
	case DT_F32: r = (Tol){1e-5, 1e-5}; break;
	case DT_F16: r = (Tol){1e-2, 1e-2}; break;
	case DT_BF16: r = (Tol){2e-2, 2e-2}; break;
	case DT_F64: r = (Tol){1e-12, 1e-12}; break;
	default: return r; /* integers and bool: exact */
	}
	if (scale > 1) {
		r.atol *= scale;
		r.rtol *= scale;
	}
	return r;
}

static void print_index(const HostTensor *h, int64_t i)
{
	int64_t idx[INTERP_MAX_DIMS];

	for (int d = h->ndim - 1; d >= 0; d--) {
		idx[d] = h->dims[d] ? i % h->dims[d] : 0;
		i = h->dims[d] ? i / h->dims[d] : 0;
	}
	printf("[");
	for (int d = 0; d < h->ndim; d++)
		printf("%s%lld", d ? ", " : "", (long long)idx[d]);
	printf("]");
}

/* Compares one output; prints its line; true when it matches. */
static bool compare(Tensor *t, const HostTensor *gpu, const HostTensor *ref, Tol tol)
{
	int64_t n = host_tensor_numel(gpu), bad = 0, first = -1;
	double max_abs = 0, max_rel = 0;

	for (int64_t i = 0; i < n; i++) {
		double g = host_tensor_get(gpu, i), r = host_tensor_get(ref, i);
		if ((isnan(g) && isnan(r)) || g == r)
			continue;
		double e = fabs(g - r);
		if (isnan(e) || e > tol.atol + tol.rtol * fabs(r)) {
			if (bad++ == 0)
				first = i;
		}
		if (isnan(e))
			continue;
		if (e > max_abs)
			max_abs = e;
		if (r != 0 && e / fabs(r) > max_rel)
			max_rel = e / fabs(r);
	}
	printf("  %s %s: max abs err %.3g, max rel err %.3g (atol %.3g, rtol %.3g): %s\n",
	       t->name, dtype_name(t->dtype), max_abs, max_rel, tol.atol, tol.rtol,
	       bad ? "FAIL" : "PASS");
	if (bad) {
		printf("    %lld of %lld elements differ; first at ", (long long)bad, (long long)n);
		print_index(gpu, first);
		printf(": gpu %.9g, reference %.9g\n", host_tensor_get(gpu, first),
		       host_tensor_get(ref, first));
	}
	return bad == 0;
}

/* Host and device buffers of one fusion's run. */
typedef struct Bufs {
	HostTensor *in, *out, *ref;
	fusrt_devptr *din, *dout;
	double *scalars;
	fusrt_arg *args;
} Bufs;

static void bufs_free(Fusion *f, Bufs *b)
{
	for (int i = 0; b->in && i < f->ninputs; i++) {
		host_tensor_free(&b->in[i]);
		if (b->din)
			fusrt_free(b->din[i]);
	}
	for (int i = 0; b->out && i < f->noutputs; i++) {
		host_tensor_free(&b->out[i]);
		host_tensor_free(&b->ref[i]);
		if (b->dout)
			fusrt_free(b->dout[i]);
	}
	free(b->in);
	free(b->out);
	free(b->ref);
	free(b->din);
	free(b->dout);
	free(b->scalars);
	free(b->args);
}

static double random_scalar(DType t, uint64_t seed)
{
	unsigned char data[8] = {0};
	HostTensor h = {t, 0, {0}, data};

	host_tensor_fill_random(&h, seed);
	return host_tensor_get(&h, 0);
}

/* Host data, device buffers and the launch arguments. An exit status on error, else -1. */
static int setup(RunOpts *o, Job *j, Bufs *b)
{
	Fusion *f = j->f;
	char *err = NULL;

	b->in = calloc(f->ninputs + 1, sizeof(HostTensor));
	b->out = calloc(f->noutputs + 1, sizeof(HostTensor));
	b->ref = calloc(f->noutputs + 1, sizeof(HostTensor));
	b->din = calloc(f->ninputs + 1, sizeof(fusrt_devptr));
	b->dout = calloc(f->noutputs + 1, sizeof(fusrt_devptr));
	b->scalars = calloc(f->nparams + 1, sizeof(double));
	b->args = calloc(f->nsig + 1, sizeof(fusrt_arg));
	for (int i = 0; i < f->nparams; i++) {
		b->scalars[i] = random_scalar(f->params[i]->dtype, o->seed * 1000003 + 500 + i);
		printf("  %s = %.9g\n", f->params[i]->name, b->scalars[i]);
	}
	for (int i = 0; i < f->ninputs; i++) {
		if (!host_tensor_init(&b->in[i], f->inputs[i], j->sizes, &err))
			goto fail;
		host_tensor_fill_random(&b->in[i], o->seed * 1000003 + 1 + i);
		if (fusrt_malloc(&b->din[i], host_tensor_bytes(&b->in[i])) ||
		    fusrt_copy_to_device(b->din[i], b->in[i].data, host_tensor_bytes(&b->in[i])))
			goto gpu_fail;
	}
	for (int i = 0; i < f->noutputs; i++) {
		if (!host_tensor_init(&b->out[i], f->outputs[i], j->sizes, &err) ||
		    !host_tensor_init(&b->ref[i], f->outputs[i], j->sizes, &err))
			goto fail;
		size_t bytes = host_tensor_bytes(&b->out[i]);
		if (fusrt_malloc(&b->dout[i], bytes) || fusrt_memset(b->dout[i], 0xff, bytes))
			goto gpu_fail;
	}
	for (int i = 0; i < f->nsig; i++) {
		struct SigEntry *e = &f->sig[i];
		int k = 0;
		if (e->kind == 'p') {
			while (f->params[k] != e->param)
				k++;
			b->args[i] = fusrt_f(b->scalars[k]);
		} else if (e->kind == 't') {
			while (f->inputs[k] != e->tensor)
				k++;
			b->args[i] = fusrt_ptr(b->din[k]);
		} else {
			while (f->outputs[k] != e->tensor)
				k++;
			b->args[i] = fusrt_ptr(b->dout[k]);
		}
	}
	return -1;
fail:
	run_error("fusion %s: %s", f->name, err);
	free(err);
	return 2;
gpu_fail:
	run_error("fusion %s: %s", f->name, fusrt_last_error());
	return 1;
}

static double total_bytes(Fusion *f, Bufs *b)
{
	double bytes = 0;

	for (int i = 0; i < f->ninputs; i++)
		bytes += (double)host_tensor_bytes(&b->in[i]);
	for (int i = 0; i < f->noutputs; i++)
		bytes += (double)host_tensor_bytes(&b->out[i]);
	return bytes;
}

static void print_sizes(Job *j)
{
	Fusion *f = j->f;

	printf("%s:", f->name);
	for (int i = 0; i < f->nsizes; i++)
		printf(" %s=%lld", f->sizes[i]->name, (long long)j->sizes[i]);
	printf("\n");
}

/* --bench: 10 warm-up launches and 100 timed ones, fewer when one launch is slow (about two
 * seconds of timed launches at most, 5 at least). Returns an exit status. */
static int bench(Fusion *f, Bufs *b, Job *j, fusrt_module *m)
{
	double first = 0, ms = 0;
	int warmup = 10, iters = 100;
	fusrt_status s;

	s = fusrt_time_launch(m, f->name, b->args, f->nsig, j->sizes, f->nsizes, 0, 1, &first);
	if (s == FUSRT_OK && first > 0) {
		double fit = 2000.0 / first;
		if (fit < iters)
			iters = fit < 5 ? 5 : (int)fit;
		if (fit < 100)
			warmup = 1;
	}
	if (s == FUSRT_OK)
		s = fusrt_time_launch(m, f->name, b->args, f->nsig, j->sizes, f->nsizes, warmup,
				      iters, &ms);
	if (s != FUSRT_OK) {
		run_error("bench: %s", fusrt_last_error());
		return 1;
	}
	double gbs = ms > 0 ? total_bytes(f, b) / (ms * 1e-3) / 1e9 : 0;
	printf("%s: bench: median %.4f ms over %d runs (%d warm-up), %.1f GB/s\n", f->name, ms,
	       iters, warmup + 1, gbs);
	return 0;
}

/* GPU run, reference run, comparison (and the benchmark). Returns an exit status. */
static int run_job(RunOpts *o, Job *j, fusrt_module *m)
{
	Fusion *f = j->f;
	Bufs b = {0};
	char *err = NULL;
	int rc;
	fusrt_status s;

	print_sizes(j);
	if ((rc = setup(o, j, &b)) >= 0)
		goto done;
	s = fusrt_launch(m, f->name, b.args, f->nsig, j->sizes, f->nsizes, NULL);
	if (s == FUSRT_OK)
		s = fusrt_synchronize();
	for (int i = 0; i < f->noutputs && s == FUSRT_OK; i++)
		s = fusrt_copy_to_host(b.out[i].data, b.dout[i], host_tensor_bytes(&b.out[i]));
	if (s != FUSRT_OK) {
		run_error("%s", fusrt_last_error()); /* the message names the fusion */
		rc = s == FUSRT_ERR_INVALID || s == FUSRT_ERR_PRECONDITION ? 2 : 1;
		goto done;
	}
	if (o->no_reference) {
		/* Large benchmark sizes: the CPU reference would dominate the run. */
		printf("%s: not checked (--no-reference)\n", f->name);
		rc = o->bench ? bench(f, &b, j, m) : 0;
		goto done;
	}
	void **ins = calloc(f->ninputs + 1, sizeof(void *));
	void **refs = calloc(f->noutputs + 1, sizeof(void *));
	for (int i = 0; i < f->ninputs; i++)
		ins[i] = b.in[i].data;
	for (int i = 0; i < f->noutputs; i++)
		refs[i] = b.ref[i].data;
	bool ok = interp_run(f, j->sizes, b.scalars, ins, refs, &err);
	free(ins);
	free(refs);
	if (!ok) {
		run_error("fusion %s: reference interpreter: %s", f->name, err);
		free(err);
		rc = 1;
		goto done;
	}
	rc = 0;
	for (int i = 0; i < f->noutputs; i++)
		if (!compare(f->outputs[i], &b.out[i], &b.ref[i], tolerance(f->outputs[i], j->sizes)))
			rc = 1;
	printf("%s: %s\n", f->name, rc ? "FAIL" : "PASS");
	if (o->bench && bench(f, &b, j, m) != 0)
		rc = 1;
done:
	bufs_free(f, &b);
	return rc;
}

/* ---- driver --------------------------------------------------------------------------- */

/* The fusions to run, their sizes checked. An exit status on error, else -1. */
static int select_jobs(RunOpts *o, Program *p, Job *jobs, int *njobs)
{
	*njobs = 0;
	for (int i = 0; i < p->nfusions; i++)
		if (!o->fusion || strcmp(p->fusions[i]->name, o->fusion) == 0)
			jobs[(*njobs)++].f = p->fusions[i];
	if (p->nfusions == 0) {
		fprintf(stderr, "fusc run: %s defines no fusion\n", o->file);
		return 2;
	}
	if (*njobs == 0) {
		fprintf(stderr, "fusc run: no fusion named '%s' in %s (it has:", o->fusion, o->file);
		for (int i = 0; i < p->nfusions; i++)
			fprintf(stderr, " %s", p->fusions[i]->name);
		fprintf(stderr, ")\n");
		return 2;
	}
	for (int i = 0; i < *njobs; i++) {
		int rc = job_sizes(o, &jobs[i], o->file);
		if (rc >= 0)
			return rc;
	}
	for (int k = 0; k < o->ndims; k++) {
		if (!o->dims[k].used) {
			fprintf(stderr, "fusc run: unknown dimension %s (no selected fusion has a size "
				"of that name)\n", o->dims[k].name);
			return 2;
		}
	}
	return -1;
}

static int run_all(RunOpts *o, const char *text, size_t len)
{
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, o->file, text, len);
	Program *p = frontend_compile(a, d, file);
	fusrt_module *m = NULL;
	Job *jobs = NULL;
	int njobs = 0, rc = -1;

	if (!p || diag_error_count(d) > 0) {
		diag_print(d, stderr);
		rc = 1;
		goto done;
	}
	diag_print(d, stderr); /* warnings */
	jobs = calloc(p->nfusions + 1, sizeof(Job));
	if ((rc = select_jobs(o, p, jobs, &njobs)) >= 0)
		goto done;
	if (fusrt_init() != FUSRT_OK) {
		fprintf(stderr, "fusc run: no CUDA device: %s\n", fusrt_last_error());
		rc = 2;
		goto done;
	}
	fusrt_status s = fusrt_compile(text, len, o->file, NULL, &m);
	if (s != FUSRT_OK) {
		const char *e = fusrt_last_error();
		fprintf(stderr, "%s%s", e, *e && e[strlen(e) - 1] == '\n' ? "" : "\n");
		rc = 1;
		goto done;
	}
	rc = 0;
	for (int i = 0; i < njobs; i++) {
		int r = run_job(o, &jobs[i], m);
		if (r > rc)
			rc = r;
	}
done:
	fusrt_module_free(m);
	free(jobs);
	diag_free(d);
	arena_free(a);
	return rc;
}

int fusc_run_main(int argc, char **argv)
{
	RunOpts o;
	size_t len = 0;
	char *text;
	int rc;

	memset(&o, 0, sizeof o);
	if ((rc = parse_args(&o, argc, argv)) < 0) {
		if (!(text = read_file(o.file, &len))) {
			fprintf(stderr, "fusc run: cannot read %s: %s\n", o.file, strerror(errno));
			rc = 2;
		} else {
			rc = run_all(&o, text, len);
			free(text);
		}
	}
	for (int i = 0; i < o.ndims; i++)
		free(o.dims[i].name);
	return rc;
}
