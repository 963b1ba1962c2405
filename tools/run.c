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
#include <stdlib.h>
#include <string.h>

#include "scheduler/scheduler.h"
#include "runtime/runtime.h"
#include "tools/cli.h"

typedef struct RunOpts {
	CliOpts cli; /* first member: option() gets &cli */
	bool bench;
	bool no_reference; /* --no-reference: time only (pair with a checked run at another size) */
	bool verbose;      /* --verbose: which variant of the launch contract runs */
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
		     "[--bench] [--no-reference] [--verbose]\n"
		     "                     [--color=auto|always|never]\n");
}

/* --bench, --no-reference, --seed */
static int option(CliOpts *c, const char *name, const char *val)
{
	RunOpts *o = (RunOpts *)c;
	int64_t seed;

	if (strcmp(name, "--bench") == 0)
		o->bench = true;
	else if (strcmp(name, "--no-reference") == 0)
		o->no_reference = true;
	else if (strcmp(name, "--verbose") == 0)
		o->verbose = true;
	else if (!cli_parse_int(val, &seed))
		return cli_usage_error(c, "bad --seed '%s' (expected a non-negative integer)", val);
	else
		c->seed = (uint64_t)seed;
	return -1;
}

static const char *const flags[] = {"--bench", "--no-reference", "--verbose", NULL};
static const char *const valued[] = {"--seed", NULL};
static const CliCommand command = {"fusc run", usage, flags, valued, option};

/* ---- one fusion ----------------------------------------------------------------------- */

typedef struct Job {
	Fusion *f;
	int64_t sizes[64];
} Job;

/* Sizes of f from the --dims; an exit status on error, else -1. */
static int job_sizes(RunOpts *o, Job *j)
{
	Fusion *f = j->f;

	if (f->nsizes > countof(j->sizes))
		return cli_usage_error(&o->cli, "fusion %s has too many size symbols", f->name);
	for (int i = 0; i < f->nsizes; i++) {
		CliDim *dim = cli_dim(&o->cli, f->sizes[i]->name);
		if (!dim) {
			fprintf(stderr, "fusc run: missing dimension %s for fusion %s (give --dims "
				"%s=...)\n", f->sizes[i]->name, f->name, f->sizes[i]->name);
			return 2;
		}
		j->sizes[i] = dim->value;
	}
	return cli_check_sizes(&o->cli, f, j->sizes);
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
		b->scalars[i] = cli_random_scalar(&o->cli, f, i);
		printf("  %s = %.9g\n", f->params[i]->name, b->scalars[i]);
	}
	for (int i = 0; i < f->ninputs; i++) {
		if (!host_tensor_init(&b->in[i], f->inputs[i], j->sizes, &err))
			goto fail;
		cli_fill_input(&o->cli, &b->in[i], i);
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

/* `NAME: kernel softmax_kernel_N4096 (N <= 4096, N is a multiple of 4, x is 16-byte
 * aligned, y is 16-byte aligned)`: the variant of chain k these arguments run. */
static void print_kernel(const char *name, Kernel *k, const fusrt_arg *args, const int64_t *sizes)
{
	Kernel *v = rt_pick_kernel(k, args, sizes);
	Buf t = {0};

	buf_printf(&t, "%s: kernel %s", name, v->name);
	for (int i = 0; i < v->preconds.len; i++) {
		buf_puts(&t, i ? ", " : " (");
		precond_condition(VEC_AT(v->preconds, Precond, i), &t);
	}
	buf_puts(&t, v->preconds.len ? ")" : "");
	printf("%s\n", t.s);
	buf_free(&t);
	for (int i = 0; i < v->segments.len; i++) { /* a plan: each segment's kernel, in order */
		Segment *sg = VEC_AT(v->fusion->segments, Segment, i);
		fusrt_arg *ga = calloc((size_t)sg->fusion->nsig + 1, sizeof(fusrt_arg));
		int64_t *gs = calloc((size_t)sg->fusion->nsizes + 1, sizeof(int64_t));
		rt_segment_args(sg, args, sizes, NULL, ga, gs);
		print_kernel(arena_printf(v->arena, "%s: segment %d", name, i),
			     VEC_AT(v->segments, Kernel, i), ga, gs);
		free(ga);
		free(gs);
	}
}

/* GPU run, reference run, comparison (and the benchmark). Returns an exit status. */
/* --verbose: the variant the launch runs (rt_pick_kernel), and for a segmented plan the
 * kernel of each segment. */
static void print_variant(fusrt_module *m, Job *j, Bufs *b)
{
	Kernel *k = rt_module_kernel(m, j->f->name);

	if (k)
		print_kernel(j->f->name, k, b->args, j->sizes);
}

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
	if (o->verbose)
		print_variant(m, j, &b);
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
		if (!cli_compare(f->outputs[i], &b.out[i], &b.ref[i],
				 cli_tolerance(f->outputs[i], j->sizes), "gpu", NULL, true, stdout))
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
		if (!o->cli.fusion || strcmp(p->fusions[i]->name, o->cli.fusion) == 0)
			jobs[(*njobs)++].f = p->fusions[i];
	if (p->nfusions == 0) {
		fprintf(stderr, "fusc run: %s defines no fusion\n", o->cli.file);
		return 2;
	}
	if (*njobs == 0)
		return cli_no_fusion(&o->cli, p);
	for (int i = 0; i < *njobs; i++) {
		int rc = job_sizes(o, &jobs[i]);
		if (rc >= 0)
			return rc;
	}
	return cli_unused_dims(&o->cli);
}

static int run_all(RunOpts *o, const char *text, size_t len)
{
	Arena *a = arena_new();
	Diag *d = diag_new();
	cli_diag_color(d, o->cli.color);
	int file = diag_add_file(d, o->cli.file, text, len);
	Program *p = compile_program(a, d, file);
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
	double t0 = now_seconds();
	fusrt_status s = fusrt_compile(text, len, o->cli.file, NULL, &m);
	if (s == FUSRT_OK)
		printf("jit: %s in %.1f ms\n",
		       fusrt_last_compile_cached() ? "loaded from the disk cache" : "compiled with NVRTC",
		       (now_seconds() - t0) * 1e3);
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
	o.cli.cmd = &command;
	if ((rc = cli_parse_args(&o.cli, argc, argv)) < 0) {
		if (!(text = cli_read_file(o.cli.file, &len))) {
			fprintf(stderr, "fusc run: cannot read %s: %s\n", o.cli.file,
				strerror(errno));
			rc = 2;
		} else {
			rc = run_all(&o, text, len);
			free(text);
		}
	}
	cli_free(&o.cli);
	return rc;
}
