/* check.c: `fusc check FILE [--fusion NAME] [--dims M=..,N=..] [--size S] [--seed S]
 * [--max-blocks N] [--max-elements N] [--max-steps N]` (docs/check.md).
 *
 * For each selected fusion: lower it like `fusc FILE` does, make random inputs (the same seeds as
 * `fusc run`), run the kernel IR on the CPU simulator (interp/simulate.c) and the fusion on the
 * reference interpreter, compare the outputs with `fusc run`'s tolerances, and print every
 * detector report. Sizes not given with --dims get --size (default 67: small, odd, not a
 * multiple of any block), rounded up to a multiple a launcher precondition requires.
 * Work above the budget (elements held, steps taken by the simulator or the reference) is
 * refused with a message instead of running for hours.
 * Exit: 0 PASS, 1 report, mismatch or errors in the file, 2 usage, I/O, bad dims or over the
 * budget.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/scheduler.h"
#include "passes/passes.h"
#include "tools/cli.h"

#define CHECK_DEFAULT_SIZE 67
#define CHECK_DEFAULT_MAX_BLOCKS 1024
/* The budget (docs/check.md): about 1.5 GB of memory and a minute or two of work; every
 * example and golden at check_examples.sh's sizes uses at most half of it. */
#define CHECK_DEFAULT_MAX_ELEMENTS (INT64_C(1) << 27)
#define CHECK_DEFAULT_MAX_STEPS INT64_C(200000000)

typedef struct CheckOpts {
	CliOpts cli; /* first member: option() gets &cli */
	int64_t size;
	int64_t max_blocks;
	int64_t max_elements, max_steps;
} CheckOpts;

static void usage(FILE *out)
{
	fprintf(out, "usage: fusc check FILE [--fusion NAME] [--dims M=67,N=67] [--size S] "
		     "[--seed S] [--max-blocks N]\n"
		     "       [--max-elements N] [--max-steps N] [--color=auto|always|never]\n"
		     "  --size S          every size not in --dims (default %d), rounded up to a "
		     "multiple a\n"
		     "                    launcher precondition requires\n"
		     "  --max-blocks N    simulate at most N blocks, a seeded sample with the first "
		     "and last\n"
		     "                    (default %d; 0: all)\n"
		     "  --max-elements N  the budget: refuse sizes at which the simulator or the "
		     "reference\n"
		     "                    would hold more than N elements (default %lld; 0: no limit)\n"
		     "  --max-steps N     the budget: refuse work above N simulator steps or "
		     "reference\n"
		     "                    evaluations (default %lld; 0: no limit)\n",
		CHECK_DEFAULT_SIZE, CHECK_DEFAULT_MAX_BLOCKS, (long long)CHECK_DEFAULT_MAX_ELEMENTS,
		(long long)CHECK_DEFAULT_MAX_STEPS);
}

/* --seed, --size, --max-blocks, --max-elements, --max-steps */
static int option(CliOpts *c, const char *name, const char *val)
{
	CheckOpts *o = (CheckOpts *)c;
	int64_t v;

	if (!cli_parse_int(val, &v))
		return cli_usage_error(c, "bad value '%s' (expected a non-negative integer)", val);
	if (strcmp(name, "--seed") == 0)
		c->seed = (uint64_t)v;
	else if (strcmp(name, "--size") == 0)
		o->size = v;
	else if (strcmp(name, "--max-blocks") == 0)
		o->max_blocks = v;
	else if (strcmp(name, "--max-elements") == 0)
		o->max_elements = v;
	else
		o->max_steps = v;
	return -1;
}

static const char *const valued[] = {"--seed", "--size", "--max-blocks", "--max-elements",
				     "--max-steps", NULL};
static const CliCommand command = {"fusc check", usage, NULL, valued, option};

/* ---- sizes ---------------------------------------------------------------------------- */

typedef struct Job {
	Fusion *f;
	Kernel *k;          /* the variant the launcher runs for these sizes (job_sizes) */
	bool variants;      /* the fusion has several (Kernel.fallback) */
	int64_t sizes[64];
} Job;

/* The multiple that k's launcher requires of size s (1 if none). */
static int64_t required_multiple(Kernel *k, SizeSym *s)
{
	int64_t m = 1;

	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		if (p->kind != PC_MULTIPLE || p->size->index != s->index || p->value <= 1)
			continue;
		int64_t a = m, b = p->value;
		while (b) { /* m = lcm(m, value) */
			int64_t t = a % b;
			a = b;
			b = t;
		}
		m = m / a * p->value;
	}
	return m;
}

/* Sizes of one job; an exit status on error, else -1. */
static int job_sizes(CheckOpts *o, Job *j, Diag *d)
{
	Fusion *f = j->f;

	if (f->nsizes > countof(j->sizes))
		return cli_usage_error(&o->cli, "fusion %s has too many size symbols", f->name);
	/* the last variant is the one that refuses: --size is rounded up to its multiples */
	Kernel *last = kernel_last_variant(j->k);
	for (int i = 0; i < f->nsizes; i++) {
		int64_t m = required_multiple(last, f->sizes[i]);
		CliDim *dim = cli_dim(&o->cli, f->sizes[i]->name);
		if (dim) {
			j->sizes[i] = dim->value;
			continue;
		}
		/* --size rounded up to a multiple of m, without overflow */
		int64_t up = o->size / m + (o->size % m != 0);
		if (__builtin_mul_overflow(up, m, &j->sizes[i])) {
			char num[32];
			snprintf(num, sizeof num, "%lld", (long long)o->size);
			return cli_usage_error(&o->cli, "--size %s is too large", num);
		}
	}
	/* what the launcher runs for these sizes (pointers taken as aligned) */
	Kernel *v = kernel_pick(j->k, j->sizes, NULL);
	if (!v) {
		Precond *why = kernel_failed_precond(last, j->sizes, NULL);
		Arena *a = arena_new();
		PrecondText t = precond_failure(a, why);
		fprintf(stderr, "fusc check: fusion %s: the launcher refuses the sizes: %s%lld%s\n",
			f->name, t.pre, (long long)j->sizes[why->size->index], t.post);
		arena_free(a);
		return 2;
	}
	j->variants = j->k->fallback != NULL || j->k->segments.len;
	j->k = v;
	return cli_check_sizes(&o->cli, f, j->sizes);
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
		b->scalars[i] = cli_random_scalar(&o->cli, f, i);
	for (int i = 0; i < f->ninputs; i++) {
		if (!host_tensor_init(&b->in[i], f->inputs[i], j->sizes, err))
			return false;
		cli_fill_input(&o->cli, &b->in[i], i);
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
	if (j->variants && !j->k->segments.len)
		printf("%s kernel %s", f->nsizes ? ";" : "", j->k->name);
	for (int i = 0; i < j->k->segments.len; i++) { /* a plan: the kernel of each segment */
		Segment *sg = VEC_AT(j->k->fusion->segments, Segment, i);
		int64_t gs[64];
		segment_sizes(sg, j->sizes, gs);
		Kernel *v = kernel_pick(VEC_AT(j->k->segments, Kernel, i), gs, NULL);
		printf("%s%s", i ? ", " : f->nsizes ? "; kernels " : " kernels ", v ? v->name : "(none)");
	}
	printf("%s simulated %lld of %lld blocks of %lld threads in %.3f s\n",
	       f->nsizes || j->variants ? ";" : "", (long long)r->blocks_run, (long long)r->blocks_total,
	       (long long)r->threads_per_block, secs);
	if (r->ldm_phases) /* the bank model (docs/check.md, "Bank conflicts") */
		printf("  ldmatrix: %.2f shared-memory wavefronts a phase over %lld phases, at most %d "
		       "(1: no bank conflict)\n", (double)r->ldm_wavefronts / (double)r->ldm_phases,
		       (long long)r->ldm_phases, r->ldm_worst);
}

static int over_budget(CheckOpts *o, Fusion *f, const char *who, const char *why)
{
	fprintf(stderr, "fusc check: fusion %s: over the budget (%s): %s\n"
		"  (the budget is --max-elements %lld --max-steps %lld: check smaller sizes, or "
		"raise it; 0 is no limit)\n", f->name, who, why, (long long)o->max_elements,
		(long long)o->max_steps);
	return 2;
}

/* Refuses the job before anything is allocated when the reference (which holds every tensor
 * and evaluates every element, whatever --max-blocks samples) is above the budget. The
 * simulator checks its own share as it goes (SimOptions). An exit status, else -1. */
static int check_budget(CheckOpts *o, Job *j)
{
	InterpCost c;
	char *err = NULL, why[160];

	if (!interp_cost(j->f, j->sizes, &c, &err)) {
		fprintf(stderr, "fusc check: fusion %s: %s\n", j->f->name, err);
		free(err);
		return 2;
	}
	if (o->max_elements && c.elements > o->max_elements) {
		snprintf(why, sizeof why, "its tensors hold %lld elements, more than the element budget of %lld",
			 (long long)c.elements, (long long)o->max_elements);
		return over_budget(o, j->f, "reference", why);
	}
	if (o->max_steps && c.evals > o->max_steps) {
		snprintf(why, sizeof why, "it evaluates %lld terms, more than the step budget of "
			 "%lld", (long long)c.evals, (long long)o->max_steps);
		return over_budget(o, j->f, "reference", why);
	}
	return -1;
}

/* Simulation, reference, comparison, reports. Returns an exit status. */
static int check_job(CheckOpts *o, Job *j, Diag *d)
{
	Fusion *f = j->f;
	Data b = {0};
	SimResult r = {0};
	SimOptions so = {.max_blocks = o->max_blocks, .seed = o->cli.seed,
			 .max_elements = o->max_elements, .max_steps = o->max_steps};
	char *err = NULL;
	int rc = check_budget(o, j);

	if (rc >= 0)
		return rc;
	rc = 1;
	if (!setup(o, j, &b, &err)) {
		fprintf(stderr, "fusc check: fusion %s: %s\n", f->name, err);
		free(err);
		data_free(f, &b);
		return 2;
	}
	double t0 = now_seconds();
	bool ok = sim_run(j->k, j->sizes, b.scalars, b.ins, b.outs, &so, &r);
	double secs = now_seconds() - t0;
	if (!ok && r.over_budget) {
		rc = over_budget(o, f, "simulator", r.error);
		goto done;
	}
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
		if (!cli_compare(f->outputs[i], &b.out[i], &b.ref[i],
				 cli_tolerance(f->outputs[i], j->sizes), "simulated", r.written[i],
				 all, stdout))
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
		if (!o->cli.fusion || strcmp(p->fusions[i]->name, o->cli.fusion) == 0)
			jobs[(*njobs)++].f = p->fusions[i];
	if (*njobs == 0)
		return cli_no_fusion(&o->cli, p);
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
	return cli_unused_dims(&o->cli);
}

static int check_all(CheckOpts *o, const char *text, size_t len)
{
	Arena *a = arena_new();
	Diag *d = diag_new();
	cli_diag_color(d, o->cli.color);
	int file = diag_add_file(d, o->cli.file, text, len);
	Program *p = compile_program(a, d, file);
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
	o.cli.cmd = &command;
	o.size = CHECK_DEFAULT_SIZE;
	o.max_blocks = CHECK_DEFAULT_MAX_BLOCKS;
	o.max_elements = CHECK_DEFAULT_MAX_ELEMENTS;
	o.max_steps = CHECK_DEFAULT_MAX_STEPS;
	if ((rc = cli_parse_args(&o.cli, argc, argv)) < 0) {
		if (!(text = cli_read_file(o.cli.file, &len))) {
			fprintf(stderr, "fusc check: cannot read %s: %s\n", o.cli.file,
				strerror(errno));
			rc = 2;
		} else {
			rc = check_all(&o, text, len);
			free(text);
		}
	}
	cli_free(&o.cli);
	return rc;
}
