/* check.c: `fusc check FILE [--fusion NAME] [--dims M=..,N=..] [--size S] [--seed S]
 * [--max-blocks N]` (docs/check.md).
 *
 * For each selected fusion: lower it like `fusc FILE` does, make random inputs (the same seeds as
 * `fusc run`), run the kernel IR on the CPU simulator (interp/simulate.c) and the fusion on the
 * reference interpreter, compare the outputs with `fusc run`'s tolerances, and print every
 * detector report. Sizes not given with --dims get --size (default 67: small, odd, not a
 * multiple of any block), rounded up to a multiple a launcher precondition requires.
 * Exit: 0 PASS, 1 report, mismatch or errors in the file, 2 usage, I/O or bad dims.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "interp/interp.h"
#include "passes/passes.h"

#define CHECK_DEFAULT_SIZE 67
#define CHECK_DEFAULT_MAX_BLOCKS 1024

typedef struct Dim {
	char *name;
	int64_t value;
	bool used;
} Dim;

typedef struct CheckOpts {
	const char *file;
	const char *fusion;
	Dim dims[64];
	int ndims;
	uint64_t seed;
	int64_t size;
	int64_t max_blocks;
} CheckOpts;

static void usage(FILE *out)
{
	fprintf(out, "usage: fusc check FILE [--fusion NAME] [--dims M=67,N=67] [--size S] "
		     "[--seed S] [--max-blocks N]\n"
		     "  --size S          every size not in --dims (default %d), rounded up to a "
		     "multiple a\n"
		     "                    launcher precondition requires\n"
		     "  --max-blocks N    simulate at most N blocks, a seeded sample with the first "
		     "and last\n"
		     "                    (default %d; 0: all)\n",
		CHECK_DEFAULT_SIZE, CHECK_DEFAULT_MAX_BLOCKS);
}

static int fail_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "fusc check: ");
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
static int parse_dims(CheckOpts *o, const char *spec)
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

static int option_value(CheckOpts *o, const char *name, const char *val)
{
	int64_t v;

	if (strcmp(name, "--fusion") == 0) {
		o->fusion = val;
		return -1;
	}
	if (strcmp(name, "--dims") == 0) {
		int rc = parse_dims(o, val);
		return rc ? rc : -1;
	}
	if (!parse_int(val, &v))
		return fail_usage("bad value '%s' (expected a non-negative integer)", val);
	if (strcmp(name, "--seed") == 0)
		o->seed = (uint64_t)v;
	else if (strcmp(name, "--size") == 0)
		o->size = v;
	else
		o->max_blocks = v;
	return -1;
}

/* Returns -1 to go on, else an exit status. */
static int parse_args(CheckOpts *o, int argc, char **argv)
{
	static const char *const valued[] = {"--fusion", "--dims", "--seed", "--size",
					     "--max-blocks"};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		size_t n = strcspn(a, "=");
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (a[0] != '-' || strcmp(a, "-") == 0) {
			if (o->file)
				return fail_usage("more than one input file ('%s')", a);
			o->file = a;
			continue;
		}
		const char *name = NULL;
		for (int k = 0; k < countof(valued); k++)
			if (strlen(valued[k]) == n && strncmp(a, valued[k], n) == 0)
				name = valued[k];
		if (!name)
			return fail_usage("unknown option '%s'", a);
		if (a[n] == '=')
			val = a + n + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return fail_usage("option '%s' needs a value", a);
		int rc = option_value(o, name, val);
		if (rc >= 0)
			return rc;
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

/* ---- sizes ---------------------------------------------------------------------------- */

typedef struct Job {
	Fusion *f;
	Kernel *k;
	int64_t sizes[64];
} Job;

/* The multiple that k's launcher requires of size s (1 if none). */
static int64_t required_multiple(Kernel *k, SizeSym *s, Precond **why)
{
	int64_t m = 1;

	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		if (p->kind != PC_MULTIPLE || p->size != s || p->value <= 1)
			continue;
		int64_t a = m, b = p->value;
		while (b) { /* m = lcm(m, value) */
			int64_t t = a % b;
			a = b;
			b = t;
		}
		m = m / a * p->value;
		*why = p;
	}
	return m;
}

static void put_span(Diag *d, Span sp, FILE *out)
{
	int line, col;

	if (!sp.file) {
		fputs("?", out);
		return;
	}
	diag_line_col(d, sp.file, sp.lo, &line, &col);
	fprintf(out, "%s:%d:%d", diag_file_name(d, sp.file), line, col);
}

/* Sizes of one job; an exit status on error, else -1. */
static int job_sizes(CheckOpts *o, Job *j, Diag *d)
{
	Fusion *f = j->f;
	char *err = NULL;

	if (f->nsizes > countof(j->sizes))
		return fail_usage("fusion %s has too many size symbols", f->name);
	for (int i = 0; i < f->nsizes; i++) {
		SizeSym *s = f->sizes[i];
		Precond *why = NULL;
		int64_t m = required_multiple(j->k, s, &why);
		int k = 0;
		while (k < o->ndims && strcmp(o->dims[k].name, s->name) != 0)
			k++;
		if (k == o->ndims) {
			j->sizes[i] = (o->size + m - 1) / m * m;
			continue;
		}
		o->dims[k].used = true;
		j->sizes[i] = o->dims[k].value;
		if (j->sizes[i] % m) {
			fprintf(stderr, "fusc check: fusion %s: the launcher refuses %s=%lld: it must "
				"be a multiple of %lld (%s at ", f->name, s->name,
				(long long)j->sizes[i], (long long)m,
				why->reason ? why->reason : "vectorized access");
			put_span(d, why->span, stderr);
			fprintf(stderr, ")\n");
			return 2;
		}
	}
	if (!interp_check_sizes(f, j->sizes, &err)) {
		fprintf(stderr, "fusc check: dims contradict %s: fusion %s: %s\n", o->file, f->name,
			err);
		free(err);
		return 2;
	}
	return -1;
}

/* ---- comparison (the tolerances of `fusc run`, tools/run.c) ------------------------------ */

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

/* Compares the elements the kernel wrote (all of them must be when every block ran). */
static bool compare(Tensor *t, const HostTensor *sim, const HostTensor *ref, Tol tol,
		    const unsigned char *written, bool all_blocks)
{
	int64_t n = host_tensor_numel(sim), bad = 0, first = -1, unwritten = 0, first_un = -1;
	double max_abs = 0, max_rel = 0;

	for (int64_t i = 0; i < n; i++) {
		if (!written[i]) {
			if (unwritten++ == 0)
				first_un = i;
			continue;
		}
		double g = host_tensor_get(sim, i), r = host_tensor_get(ref, i);
		if ((isnan(g) && isnan(r)) || g == r)
			continue;
		double e = fabs(g - r);
		if ((isnan(e) || e > tol.atol + tol.rtol * fabs(r)) && bad++ == 0)
			first = i;
		if (isnan(e))
			continue;
		if (e > max_abs)
			max_abs = e;
		if (r != 0 && e / fabs(r) > max_rel)
			max_rel = e / fabs(r);
	}
	bool ok = bad == 0 && (!all_blocks || unwritten == 0);
	printf("  %s %s: max abs err %.3g, max rel err %.3g (atol %.3g, rtol %.3g)", t->name,
	       dtype_name(t->dtype), max_abs, max_rel, tol.atol, tol.rtol);
	if (!all_blocks)
		printf(", %lld of %lld elements written by the sampled blocks",
		       (long long)(n - unwritten), (long long)n);
	printf(": %s\n", ok ? "PASS" : "FAIL");
	if (bad) {
		printf("    %lld of %lld elements differ; first at ", (long long)bad, (long long)n);
		print_index(sim, first);
		printf(": simulated %.9g, reference %.9g\n", host_tensor_get(sim, first),
		       host_tensor_get(ref, first));
	}
	if (all_blocks && unwritten) {
		printf("    %lld of %lld elements never written; first at ", (long long)unwritten,
		       (long long)n);
		print_index(sim, first_un);
		printf("\n");
	}
	return ok;
}

/* ---- one fusion ----------------------------------------------------------------------- */

typedef struct Data {
	HostTensor *in, *out, *ref;
	double *scalars;
	void **ins, **outs, **refs;
} Data;

static void data_free(Fusion *f, Data *b)
{
	for (int i = 0; b->in && i < f->ninputs; i++)
		host_tensor_free(&b->in[i]);
	for (int i = 0; b->out && i < f->noutputs; i++) {
		host_tensor_free(&b->out[i]);
		host_tensor_free(&b->ref[i]);
	}
	free(b->in);
	free(b->out);
	free(b->ref);
	free(b->scalars);
	free(b->ins);
	free(b->outs);
	free(b->refs);
}

static double random_scalar(DType t, uint64_t seed)
{
	unsigned char data[8] = {0};
	HostTensor h = {t, 0, {0}, data};

	host_tensor_fill_random(&h, seed);
	return host_tensor_get(&h, 0);
}

/* Inputs and scalars as `fusc run` makes them; outputs poisoned (0xff: NaN, -1). */
static bool setup(CheckOpts *o, Job *j, Data *b, char **err)
{
	Fusion *f = j->f;

	b->in = calloc(f->ninputs + 1, sizeof(HostTensor));
	b->out = calloc(f->noutputs + 1, sizeof(HostTensor));
	b->ref = calloc(f->noutputs + 1, sizeof(HostTensor));
	b->scalars = calloc(f->nparams + 1, sizeof(double));
	b->ins = calloc(f->ninputs + 1, sizeof(void *));
	b->outs = calloc(f->noutputs + 1, sizeof(void *));
	b->refs = calloc(f->noutputs + 1, sizeof(void *));
	for (int i = 0; i < f->nparams; i++)
		b->scalars[i] = random_scalar(f->params[i]->dtype, o->seed * 1000003 + 500 + i);
	for (int i = 0; i < f->ninputs; i++) {
		if (!host_tensor_init(&b->in[i], f->inputs[i], j->sizes, err))
			return false;
		host_tensor_fill_random(&b->in[i], o->seed * 1000003 + 1 + i);
		b->ins[i] = b->in[i].data;
	}
	for (int i = 0; i < f->noutputs; i++) {
		if (!host_tensor_init(&b->out[i], f->outputs[i], j->sizes, err) ||
		    !host_tensor_init(&b->ref[i], f->outputs[i], j->sizes, err))
			return false;
		memset(b->out[i].data, 0xff, host_tensor_bytes(&b->out[i]));
		b->outs[i] = b->out[i].data;
		b->refs[i] = b->ref[i].data;
	}
	return true;
}

static void print_header(Job *j, const SimResult *r, double secs)
{
	Fusion *f = j->f;

	printf("%s:", f->name);
	for (int i = 0; i < f->nsizes; i++)
		printf(" %s=%lld", f->sizes[i]->name, (long long)j->sizes[i]);
	printf("%s simulated %lld of %lld blocks of %lld threads in %.3f s\n",
	       f->nsizes ? ";" : "", (long long)r->blocks_run, (long long)r->blocks_total,
	       (long long)r->threads_per_block, secs);
}

/* Simulation, reference, comparison, reports. Returns an exit status. */
static int check_job(CheckOpts *o, Job *j, Diag *d)
{
	Fusion *f = j->f;
	Data b = {0};
	SimResult r = {0};
	SimOptions so = {o->max_blocks, o->seed};
	char *err = NULL;
	int rc = 1;

	if (!setup(o, j, &b, &err)) {
		fprintf(stderr, "fusc check: fusion %s: %s\n", f->name, err);
		free(err);
		data_free(f, &b);
		return 2;
	}
	double t0 = now_seconds();
	bool ok = sim_run(j->k, j->sizes, b.scalars, b.ins, b.outs, &so, &r);
	double secs = now_seconds() - t0;
	if (!ok) {
		fprintf(stderr, "fusc check: fusion %s: %s\n", f->name, r.error);
		goto done;
	}
	print_header(j, &r, secs);
	if (!interp_run(f, j->sizes, b.scalars, b.ins, b.refs, &err)) {
		fprintf(stderr, "fusc check: fusion %s: reference interpreter: %s\n", f->name, err);
		free(err);
		goto done;
	}
	rc = 0;
	bool all = r.blocks_run == r.blocks_total;
	for (int i = 0; i < f->noutputs; i++)
		if (!compare(f->outputs[i], &b.out[i], &b.ref[i], tolerance(f->outputs[i], j->sizes),
			     r.written[i], all))
			rc = 1;
	fflush(stdout);
	for (int i = 0; i < r.nreports; i++)
		sim_report_print(d, &r.reports[i], stdout);
	if (r.nreports)
		rc = 1;
	printf("%s: %s", f->name, rc ? "FAIL" : "PASS");
	if (r.nreports)
		printf(" (%d report%s)", r.nreports, r.nreports == 1 ? "" : "s");
	printf("\n");
done:
	sim_result_free(&r);
	data_free(f, &b);
	return rc;
}

/* ---- driver --------------------------------------------------------------------------- */

/* Lowers the selected fusions and fixes their sizes. An exit status on error, else -1. */
static int select_jobs(CheckOpts *o, Arena *a, Diag *d, Program *p, Job *jobs, int *njobs)
{
	LowerOptions lo = {.arch = 80, .verify = true};

	*njobs = 0;
	for (int i = 0; i < p->nfusions; i++)
		if (!o->fusion || strcmp(p->fusions[i]->name, o->fusion) == 0)
			jobs[(*njobs)++].f = p->fusions[i];
	if (*njobs == 0) {
		fprintf(stderr, "fusc check: no fusion named '%s' in %s (it has:",
			o->fusion ? o->fusion : "", o->file);
		for (int i = 0; i < p->nfusions; i++)
			fprintf(stderr, " %s", p->fusions[i]->name);
		fprintf(stderr, "%s)\n", p->nfusions ? "" : " none");
		return 2;
	}
	for (int i = 0; i < *njobs; i++) {
		jobs[i].k = lower_fusion(a, d, jobs[i].f, &lo);
		if (!jobs[i].k || diag_error_count(d) > 0) {
			diag_print(d, stderr);
			return 1;
		}
	}
	for (int i = 0; i < *njobs; i++) {
		int rc = job_sizes(o, &jobs[i], d);
		if (rc >= 0)
			return rc;
	}
	for (int k = 0; k < o->ndims; k++) {
		if (!o->dims[k].used) {
			fprintf(stderr, "fusc check: unknown dimension %s (no selected fusion has a "
				"size of that name)\n", o->dims[k].name);
			return 2;
		}
	}
	return -1;
}

static int check_all(CheckOpts *o, const char *text, size_t len)
{
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, o->file, text, len);
	Program *p = frontend_compile(a, d, file);
	Job *jobs = NULL;
	int njobs = 0, rc = -1;

	if (!p || diag_error_count(d) > 0) {
		diag_print(d, stderr);
		rc = 1;
		goto done;
	}
	jobs = calloc(p->nfusions + 1, sizeof(Job));
	if ((rc = select_jobs(o, a, d, p, jobs, &njobs)) >= 0)
		goto done;
	diag_print(d, stderr); /* warnings */
	rc = 0;
	for (int i = 0; i < njobs; i++) {
		int r = check_job(o, &jobs[i], d);
		if (r > rc)
			rc = r;
	}
done:
	free(jobs);
	diag_free(d);
	arena_free(a);
	return rc;
}

int fusc_check_main(int argc, char **argv)
{
	CheckOpts o;
	size_t len = 0;
	char *text;
	int rc;

	memset(&o, 0, sizeof o);
	o.size = CHECK_DEFAULT_SIZE;
	o.max_blocks = CHECK_DEFAULT_MAX_BLOCKS;
	if ((rc = parse_args(&o, argc, argv)) < 0) {
		if (!(text = read_file(o.file, &len))) {
			fprintf(stderr, "fusc check: cannot read %s: %s\n", o.file, strerror(errno));
			rc = 2;
		} else {
			rc = check_all(&o, text, len);
			free(text);
		}
	}
	for (int i = 0; i < o.ndims; i++)
		free(o.dims[i].name);
	return rc;
}
