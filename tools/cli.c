/* cli.c: the options, checks and comparisons `fusc run` and `fusc check` share (tools/cli.h).
 * Each subcommand keeps its own usage text, its own options and its own messages beyond these.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* The option of list (NULL-terminated) spelled a[0..n), or NULL. */
static const char *find_option(const char *const *list, const char *a, size_t n)
{
	for (; list && *list; list++)
		if (strlen(*list) == n && strncmp(a, *list, n) == 0)
			return *list;
	return NULL;
}

/* FILE, -h/--help, --fusion and --dims here; the command's own options through cmd->option. */
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
	return o->cmd->option(o, name, val);
}

int cli_parse_args(CliOpts *o, int argc, char **argv)
{
	static const char *const shared[] = {"--fusion", "--dims", NULL};
	const CliCommand *c = o->cmd;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *name;
		size_t n = strcspn(a, "=");
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			c->usage(stdout);
			return 0;
		}
		if ((name = find_option(c->flags, a, strlen(a)))) {
			int rc = c->option(o, name, NULL);
			if (rc >= 0)
				return rc;
			continue;
		}
		if (a[0] != '-' || strcmp(a, "-") == 0) {
			if (o->file)
				return cli_usage_error(o, "more than one input file ('%s')", a);
			o->file = a;
			continue;
		}
		if (!(name = find_option(shared, a, n)) && !(name = find_option(c->valued, a, n)))
			return cli_usage_error(o, "unknown option '%s'", a);
		if (a[n] == '=')
			val = a + n + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return cli_usage_error(o, "option '%s' needs a value", a);
		int rc = take_option(o, name, val);
		if (rc >= 0)
			return rc;
	}
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

	if (interp_check_sizes(f, sizes, &err))
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

bool cli_compare(Tensor *t, const HostTensor *got, const HostTensor *ref, CliTol tol,
		 const char *what, const unsigned char *written, bool all_blocks)
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
	printf("  %s %s: max abs err %.3g, max rel err %.3g (atol %.3g, rtol %.3g)", t->name,
	       dtype_name(t->dtype), max_abs, max_rel, tol.atol, tol.rtol);
	if (!all_blocks)
		printf(", %lld of %lld elements written by the sampled blocks",
		       (long long)(n - unwritten), (long long)n);
	printf(": %s\n", ok ? "PASS" : "FAIL");
	if (bad) {
		printf("    %lld of %lld elements differ; first at ", (long long)bad, (long long)n);
		print_index(got, first);
		printf(": %s %.9g, reference %.9g\n", what, host_tensor_get(got, first),
		       host_tensor_get(ref, first));
	}
	if (all_blocks && unwritten) {
		printf("    %lld of %lld elements never written; first at ", (long long)unwritten,
		       (long long)n);
		print_index(got, first_un);
		printf("\n");
	}
	return ok;
}
