/* cli.c: the options, checks and comparisons `fusc run` and `fusc check` share (tools/cli.h).
 * Each subcommand keeps its own usage text, its own options and its own messages beyond these.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"

int cli_usage_error(const CliOpts *o, const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", o->cmd->name);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 2;
}

bool cli_parse_int(const char *s, int64_t *out)
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
static int parse_dims(CliOpts *o, const char *spec)
{
	char *copy = xstrdup(spec), *save = NULL;
	int rc = 0;

	for (char *item = strtok_r(copy, ",", &save); item && !rc;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		int64_t v;
		if (!eq || eq == item) {
			rc = cli_usage_error(o, "bad --dims item '%s' (expected NAME=VALUE)", item);
			break;
		}
		*eq = 0;
		if (!cli_parse_int(eq + 1, &v)) {
			*eq = '=';
			rc = cli_usage_error(o, "bad --dims value in '%s' (expected a "
					     "non-negative integer)", item);
			break;
		}
		int k = 0;
		while (k < o->ndims && strcmp(o->dims[k].name, item) != 0)
			k++;
		if (k < o->ndims) {
			if (o->dims[k].value != v)
				rc = cli_usage_error(o, "dimension %s is given two different "
						     "values", item);
			continue;
		}
		if (o->ndims == countof(o->dims)) {
			rc = cli_usage_error(o, "too many --dims (at most 64)%s", "");
			break;
		}
		o->dims[o->ndims++] = (CliDim){xstrdup(item), v, false};
	}
	free(copy);
	return rc;
}

int cli_option_error(const char *prog, int ch, char **argv)
{
	const char *a = argv[optind - 1];
	int n = (int)strcspn(a, "=");
	bool is_long = strncmp(a, "--", 2) == 0;

	if (ch == ':' && is_long)
		fprintf(stderr, "%s: option '%.*s' needs a value\n", prog, n, a);
	else if (ch == ':')
		fprintf(stderr, "%s: option '-%c' needs a value\n", prog, optopt);
	else if (is_long && optopt != 0 && a[n] == '=')
		fprintf(stderr, "%s: option '%.*s' takes no value\n", prog, n, a);
	else if (is_long || optopt == 0)
		fprintf(stderr, "%s: unknown option '%s'\n", prog, a);
	else
		fprintf(stderr, "%s: unknown option '-%c'\n", prog, optopt);
	return 2;
}

void cli_diag_color(Diag *d, DiagColor when)
{
	diag_set_color(d, diag_color_wanted(when, getenv("NO_COLOR"), getenv("TERM"),
					    isatty(STDERR_FILENO)));
}

/* The getopt_long table entry of each option of list (NULL-terminated, each "--NAME"); val is
 * CLI_OPT_BASE + its index in names[]. */
enum { CLI_MAX_OPTIONS = 32, CLI_OPT_BASE = 256 };

static void add_options(struct option *longs, const char **names, int *n,
			const char *const *list, int has_arg)
{
	for (; list && *list; list++) {
		if (*n == CLI_MAX_OPTIONS - 1)
			die("too many options");
		names[*n] = *list;
		longs[*n] = (struct option){*list + 2, has_arg, NULL, CLI_OPT_BASE + *n};
		(*n)++;
	}
	longs[*n] = (struct option){0};
}

/* FILE, --fusion, --dims and --color here; the command's own options through cmd->option. */
static int take_option(CliOpts *o, const char *name, const char *val)
{
	if (strcmp(name, "--fusion") == 0) {
		o->fusion = val;
		return -1;
	}
	if (strcmp(name, "--dims") == 0) {
		int rc = parse_dims(o, val);
		return rc ? rc : -1;
	}
	if (strcmp(name, "--color") == 0) {
		if (!diag_color_from_name(val, &o->color))
			return cli_usage_error(o, "bad --color '%s' (expected auto, always or never)",
					       val);
		return -1;
	}
	return o->cmd->option(o, name, val);
}

static int take_file(CliOpts *o, const char *a)
{
	if (o->file)
		return cli_usage_error(o, "more than one input file ('%s')", a);
	o->file = a;
	return -1;
}

int cli_parse_args(CliOpts *o, int argc, char **argv)
{
	static const char *const shared[] = {"--fusion", "--dims", "--color", NULL};
	static const char *const help[] = {"--help", NULL};
	const CliCommand *c = o->cmd;
	struct option longs[CLI_MAX_OPTIONS];
	const char *names[CLI_MAX_OPTIONS];
	int n = 0, ch, rc = -1;

	add_options(longs, names, &n, help, no_argument);
	add_options(longs, names, &n, c->flags, no_argument);
	add_options(longs, names, &n, shared, required_argument);
	add_options(longs, names, &n, c->valued, required_argument);
	/* A fresh scan each call (schedfuzz runs fusc check many times in one process); "-":
	 * operands in order, ":": missing values reported here. */
	optind = 0;
	opterr = 0;
	while (rc < 0 && (ch = getopt_long(argc, argv, "-:h", longs, NULL)) != -1) {
		if (ch == 1)
			rc = take_file(o, optarg);
		else if (ch == 'h' || ch == CLI_OPT_BASE) {
			c->usage(stdout);
			rc = 0;
		} else if (ch == '?' || ch == ':')
			rc = cli_option_error(c->name, ch, argv);
		else {
			int k = ch - CLI_OPT_BASE;
			if (k <= 0 || k >= n)
				unreachable();
			rc = longs[k].has_arg ? take_option(o, names[k], optarg)
					      : c->option(o, names[k], NULL);
		}
	}
	for (; rc < 0 && optind < argc; optind++) /* after "--" */
		rc = take_file(o, argv[optind]);
	if (rc >= 0)
		return rc;
	if (!o->file) {
		c->usage(stderr);
		return 2;
	}
	return -1;
}

void cli_free(CliOpts *o)
{
	for (int i = 0; i < o->ndims; i++)
		free(o->dims[i].name);
}

char *cli_read_file(const char *path, size_t *len)
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

int cli_no_fusion(const CliOpts *o, Program *p)
{
	fprintf(stderr, "%s: no fusion named '%s' in %s (it has:", o->cmd->name,
		o->fusion ? o->fusion : "", o->file);
	for (int i = 0; i < p->nfusions; i++)
		fprintf(stderr, " %s", p->fusions[i]->name);
	fprintf(stderr, "%s)\n", p->nfusions ? "" : " none");
	return 2;
}

CliDim *cli_dim(CliOpts *o, const char *name)
{
	for (int k = 0; k < o->ndims; k++) {
		if (strcmp(o->dims[k].name, name) == 0) {
			o->dims[k].used = true;
			return &o->dims[k];
		}
	}
	return NULL;
}

int cli_check_sizes(const CliOpts *o, Fusion *f, const int64_t *sizes)
{
	char *err = NULL;

	if (fusion_check_sizes(f, sizes, &err))
		return -1;
	fprintf(stderr, "%s: dims contradict %s: fusion %s: %s\n", o->cmd->name, o->file, f->name,
		err);
	free(err);
	return 2;
}

int cli_unused_dims(const CliOpts *o)
{
	for (int k = 0; k < o->ndims; k++) {
		if (!o->dims[k].used) {
			fprintf(stderr, "%s: unknown dimension %s (no selected fusion has a size "
				"of that name)\n", o->cmd->name, o->dims[k].name);
			return 2;
		}
	}
	return -1;
}

/* ---- data ----------------------------------------------------------------------------- */

double cli_random_scalar(const CliOpts *o, Fusion *f, int i)
{
	unsigned char data[8] = {0};
	HostTensor h = {f->params[i]->dtype, 0, {0}, data};

	host_tensor_fill_random(&h, o->seed * 1000003 + 500 + i);
	return host_tensor_get(&h, 0);
}

void cli_fill_input(const CliOpts *o, HostTensor *h, int i)
{
	host_tensor_fill_random(h, o->seed * 1000003 + 1 + i);
}

/* ---- comparison ----------------------------------------------------------------------- */

CliTol cli_tolerance(Tensor *t, const int64_t *sizes)
{
	double scale = sqrt(interp_reduction_terms(t, sizes));
	CliTol r = {0, 0};

	switch (t->dtype) {
	case DT_F32: r = (CliTol){1e-5, 1e-5}; break;
	case DT_F16: r = (CliTol){1e-2, 1e-2}; break;
	case DT_BF16: r = (CliTol){2e-2, 2e-2}; break;
	case DT_F64: r = (CliTol){1e-12, 1e-12}; break;
	default: return r; /* integers and bool: exact */
	}
	if (scale > 1) {
		r.atol *= scale;
		r.rtol *= scale;
	}
	return r;
}

static void print_index(FILE *out, const HostTensor *h, int64_t i)
{
	int64_t idx[IR_MAX_DIMS];

	for (int d = h->ndim - 1; d >= 0; d--) {
		idx[d] = h->dims[d] ? i % h->dims[d] : 0;
		i = h->dims[d] ? i / h->dims[d] : 0;
	}
	fprintf(out, "[");
	for (int d = 0; d < h->ndim; d++)
		fprintf(out, "%s%lld", d ? ", " : "", (long long)idx[d]);
	fprintf(out, "]");
}

bool cli_compare(Tensor *t, const HostTensor *got, const HostTensor *ref, CliTol tol,
		 const char *what, const unsigned char *written, bool all_blocks, FILE *out)
{
	int64_t n = host_tensor_numel(got), bad = 0, first = -1, unwritten = 0, first_un = -1;
	double max_abs = 0, max_rel = 0;

	for (int64_t i = 0; i < n; i++) {
		if (written && !written[i]) {
			if (unwritten++ == 0)
				first_un = i;
			continue;
		}
		double g = host_tensor_get(got, i), r = host_tensor_get(ref, i);
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
	if (!out)
		return ok;
	fprintf(out, "  %s %s: max abs err %.3g, max rel err %.3g (atol %.3g, rtol %.3g)", t->name,
		dtype_name(t->dtype), max_abs, max_rel, tol.atol, tol.rtol);
	if (!all_blocks)
		fprintf(out, ", %lld of %lld elements written by the sampled blocks",
			(long long)(n - unwritten), (long long)n);
	fprintf(out, ": %s\n", ok ? "PASS" : "FAIL");
	if (bad) {
		fprintf(out, "    %lld of %lld elements differ; first at ", (long long)bad,
			(long long)n);
		print_index(out, got, first);
		fprintf(out, ": %s %.9g, reference %.9g\n", what, host_tensor_get(got, first),
			host_tensor_get(ref, first));
	}
	if (all_blocks && unwritten) {
		fprintf(out, "    %lld of %lld elements never written; first at ",
			(long long)unwritten, (long long)n);
		print_index(out, got, first_un);
		fprintf(out, "\n");
	}
	return ok;
}
