/* schedfuzz.c: the schedule fuzzer's driver (docs/fuzzing.md).
 *
 *   schedfuzz [--seed S] [--count N] [--first N] [--out DIR] [--no-FEATURE ...]
 *             [--max-dirs N] [--max-elems N] [--timeout S] [--sim-timeout S] [--stats]
 *             [--print] [--stop] [--no-minimize] [--only-auto]
 *
 * Case n of seed S is generated and checked in a child process (fork), so that a crash, an
 * abort (an internal error) or a hang (alarm) of the compiler is a verdict like any other.
 * The child leaves the case and its verdict in shared memory; before each front-end call of
 * the generator it leaves the text being compiled there, so a crash names its input.
 *
 * The check is `fusc check` itself (fusc_check_main, tools/check.c) on the case's text with
 * --dims, once per set of sizes; the child first compiles the case in-process like
 * tools/check.c does, to tell a refusal from a failure and to round the sizes up to the
 * multiples the launcher requires (vectorized accesses). Verdicts:
 *   pass      every run of `fusc check` passed;
 *   refused   the compiler said no with an error at a line of the file (allowed: counted);
 *   skipped   the reference interpreter refused the inputs, or the simulation of a schedule
 *             with much redundant work ran past --sim-timeout (not the compiler's business);
 *   FAIL      a mismatch, a simulator report (race, uninitialized read, out of bounds ...),
 *             a crash, an internal error, a hang, an error without a location, or the
 *             automatic scheduler refusing a well-typed program.
 * A failure is printed with its .fus text and dims, minimized (greedy: drop directives,
 * statements, parameters, shrink sizes, while the same class of failure persists) and, with
 * --out DIR, written to DIR/sSEED-nCASE.fus with the `fusc check` command in a comment.
 * Exit status: 0 without failures, 1 with any, 2 on usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interp/interp.h"
#include "passes/passes.h"
#include "tests/fuzz/fuzz.h"

/* ---- the front end for the generator ---------------------------------------------------- */

static Program *frontend(Arena *a, Diag *d, const char *text)
{
	int file = diag_add_file(d, FUZZ_FILE_NAME, text, strlen(text));
	AstFile *ast = parse_file(a, d, file);
	if (diag_error_count(d))
		return NULL;
	Program *p = sema_program(a, d, ast);
	p->file_name = FUZZ_FILE_NAME;
	for (int i = 0; i < p->nfusions; i++) {
		if (p->fusions[i]->failed)
			return NULL;
		schedule_apply(a, d, p->fusions[i]);
	}
	return p;
}

Program *fuzz_frontend(Arena *a, const char *text, char **diags, int *nerrors)
{
	Diag *d = diag_new();
	Program *p = frontend(a, d, text);
	*nerrors = diag_error_count(d);
	*diags = diag_render(d);
	diag_free(d);
	return p;
}

bool fuzz_error_at_line(const char *diags, int line)
{
	char pat[64];
	int n = snprintf(pat, sizeof pat, "%s:%d:", FUZZ_FILE_NAME, line);
	for (const char *p = diags; p && (p = strstr(p, pat)); p += n) {
		if (p != diags && p[-1] != '\n')
			continue;
		const char *q = p + n;
		while (*q >= '0' && *q <= '9')
			q++;
		if (strncmp(q, ": error:", 8) == 0)
			return true;
	}
	return false;
}

/* ---- what a child leaves for the driver ------------------------------------------------- */

typedef enum Verdict { V_NONE, V_PASS, V_REFUSED, V_SKIP, V_FAIL } Verdict;

#define CASE_MAX (1 << 18)

/* What a child is doing: a hang while simulating is a schedule with too much work for the
 * simulator (skipped), a hang anywhere else is the compiler's (a failure). */
enum { PH_GENERATE, PH_COMPILE, PH_SIMULATE };

typedef struct Shared {
	int phase;
	int verdict;
	int fail_run;         /* the run (0 or 1) that failed */
	int checks;           /* runs of fusc check */
	char cls[160];        /* the failure class, e.g. "report: shared-memory data race" */
	char msg[1024];       /* the first diagnostic, report or mismatch line */
	char ccase[CASE_MAX]; /* the serialized case (during generation: the attempt in flight) */
} Shared;

typedef struct Driver {
	FuzzOpts o;
	uint64_t seed;
	long first, count;
	const char *out;      /* --out DIR */
	int timeout;          /* seconds for generating and compiling a case */
	int sim_timeout;      /* seconds for one run of the simulator */
	bool stats, print, stop, minimize;
	char tmp[256];        /* scratch directory of the children */
	Shared *sh;
} Driver;

static void put_case(Shared *sh, const Case *c)
{
	Buf b = {0};
	case_serialize(c, &b);
	if (b.len < CASE_MAX) {
		memcpy(sh->ccase, b.s, b.len + 1);
	} else {
		snprintf(sh->ccase, CASE_MAX, "N too_long 0 0 0\n");
	}
	buf_free(&b);
}

typedef struct TraceCtx {
	Shared *sh;
	Case *c;
} TraceCtx;

static void trace_case(const char *text, void *ctx)
{
	TraceCtx *t = ctx;
	(void)text;
	put_case(t->sh, t->c);
}

static void set_verdict(Shared *sh, Verdict v, const char *cls, const char *msg)
{
	sh->verdict = v;
	snprintf(sh->cls, sizeof sh->cls, "%s", cls ? cls : "");
	snprintf(sh->msg, sizeof sh->msg, "%s", msg ? msg : "");
}

/* The first line of s that contains `needle` (copied, without the newline), or NULL. */
static bool find_line(const char *s, const char *needle, char *out, size_t n)
{
	const char *p = s ? strstr(s, needle) : NULL;
	if (!p)
		return false;
	while (p > s && p[-1] != '\n')
		p--;
	const char *e = strchr(p, '\n');
	size_t len = e ? (size_t)(e - p) : strlen(p);
	if (len >= n)
		len = n - 1;
	memcpy(out, p, len);
	out[len] = 0;
	return true;
}

/* Whether the case passes parse and sema (its schedule aside). */
static bool well_typed(const char *text)
{
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, FUZZ_FILE_NAME, text, strlen(text));
	AstFile *ast = parse_file(a, d, file);
	bool ok = diag_error_count(d) == 0;
	if (ok) {
		Program *p = sema_program(a, d, ast);
		ok = diag_error_count(d) == 0 && p->nfusions == 1 && !p->fusions[0]->failed;
	}
	diag_free(d);
	arena_free(a);
	return ok;
}

/* A compilation that reported errors: refused when every error has a location, a failure
 * when one is internal or has none, or when the automatic scheduler refused a well-typed
 * fusion (docs/lowering.md: a generated schedule never fails). */
static void refused(Shared *sh, const Case *c, const char *text, const char *diags)
{
	char line[1024];
	if (find_line(diags, "internal error", line, sizeof line)) {
		set_verdict(sh, V_FAIL, "internal error", line);
		return;
	}
	bool located = find_line(diags, ": error: ", line, sizeof line) &&
		       strncmp(line, FUZZ_FILE_NAME ":", strlen(FUZZ_FILE_NAME) + 1) == 0;
	if (!located)
		set_verdict(sh, V_FAIL, "error without a location", line);
	else if (c->auto_schedule && well_typed(text))
		set_verdict(sh, V_FAIL, "automatic schedule refused", line);
	else
		set_verdict(sh, V_REFUSED, "", line);
}

/* Rounds each size up to the multiple k's launcher requires of it. */
static void round_sizes(Kernel *k, Case *c)
{
	for (int s = 0; s < c->nsyms; s++) {
		int64_t m = 1;
		for (int i = 0; i < k->preconds.len; i++) {
			Precond *p = VEC_AT(k->preconds, Precond, i);
			if (p->kind == PC_MULTIPLE && p->size && strcmp(p->size->name, c->syms[s].name) == 0 &&
			    p->value > 1 && p->value > m && p->value % m == 0)
				m = p->value;
		}
		for (int r = 0; r < 2; r++)
			c->syms[s].value[r] = (c->syms[s].value[r] + m - 1) / m * m;
	}
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	Buf b = {0};
	char chunk[4096];
	size_t n;
	buf_puts(&b, "");
	while ((n = fread(chunk, 1, sizeof chunk - 1, f)) > 0) {
		chunk[n] = 0;
		buf_puts(&b, chunk);
	}
	fclose(f);
	return b.s;
}

/* The child's stdout and stderr (in_child) and its size so far. */
static char *read_log(Driver *dr)
{
	char path[300];
	snprintf(path, sizeof path, "%s/child.log", dr->tmp);
	return read_all(path);
}

static size_t child_log_size(Driver *dr)
{
	char path[300];
	struct stat st;
	snprintf(path, sizeof path, "%s/child.log", dr->tmp);
	return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* The first comparison line of `fusc check` that says FAIL ("  y f32: max abs err ...: FAIL"). */
static bool mismatch_line(const char *log, char *out, size_t n)
{
	for (const char *p = log; (p = strstr(p, "max abs err")); p++) {
		const char *b = p, *e = strchr(p, '\n');
		while (b > log && b[-1] != '\n')
			b--;
		if (!e)
			e = p + strlen(p);
		if (e - b >= 6 && strncmp(e - 6, ": FAIL", 6) == 0) {
			snprintf(out, n, "%.*s", (int)(e - b), b);
			return true;
		}
	}
	return false;
}

/* The verdict of one failed `fusc check` run from its output. */
static void check_failed(Shared *sh, int rc, const char *log)
{
	char line[1024];
	const char *p = strstr(log, ": check: ");
	if (p) {
		char kind[128];
		p += strlen(": check: ");
		snprintf(kind, sizeof kind, "report: %.*s", (int)strcspn(p, ":\n"), p);
		find_line(log, ": check: ", line, sizeof line);
		set_verdict(sh, V_FAIL, kind, line);
	} else if (find_line(log, "reference interpreter:", line, sizeof line)) {
		set_verdict(sh, V_SKIP, "reference refused", line);
	} else if (mismatch_line(log, line, sizeof line)) {
		set_verdict(sh, V_FAIL, "mismatch", line);
	} else if (find_line(log, "fusc check: ", line, sizeof line)) {
		set_verdict(sh, V_FAIL, rc == 2 ? "check usage error" : "simulation error", line);
	} else {
		set_verdict(sh, V_FAIL, "check failed without a report", log);
	}
}

/* Compiles the case like tools/check.c and runs `fusc check` on it. */
static void check_case(Driver *dr, Case *c)
{
	Shared *sh = dr->sh;
	Buf text = {0};
	case_render(c, &text);
	sh->phase = PH_COMPILE;
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, FUZZ_FILE_NAME, text.s, text.len);
	Program *p = compile_program(a, d, file);
	Kernel *k = NULL;
	if (p && diag_error_count(d) == 0) {
		LowerOptions lo = {.arch = 80, .verify = true};
		k = lower_fusion(a, d, p->fusions[0], &lo);
	}
	if (!k || diag_error_count(d) > 0) {
		char *diags = diag_render(d);
		refused(sh, c, text.s, diags);
		free(diags);
		return;
	}
	round_sizes(k, c);
	put_case(sh, c);
	/* in the scratch directory, so that reports name the file as the generator did */
	char *path = FUZZ_FILE_NAME;
	FILE *f = chdir(dr->tmp) == 0 ? fopen(path, "w") : NULL;
	if (!f || fputs(text.s, f) < 0 || fclose(f) != 0) {
		set_verdict(sh, V_FAIL, "fuzzer: cannot write the case", dr->tmp);
		return;
	}
	Buf dims0 = {0};
	case_dims(c, 0, &dims0);
	for (int r = 0; r < 2; r++) {
		Buf dims = {0};
		case_dims(c, r, &dims);
		if (r == 1 && strcmp(dims.s, dims0.s) == 0) {
			buf_free(&dims);
			break;
		}
		char *argv[] = {"fusc check", path, "--dims", dims.s, NULL};
		int argc = dims.s[0] ? 4 : 2;
		argv[argc] = NULL;
		fflush(NULL);
		size_t from = child_log_size(dr);
		sh->checks++;
		sh->phase = PH_SIMULATE; /* fusc check compiles again: no hang there before */
		alarm((unsigned)dr->sim_timeout);
		int rc = fusc_check_main(argc, argv);
		alarm(0);
		fflush(NULL);
		buf_free(&dims);
		if (rc != 0) {
			char *out = read_log(dr);
			sh->fail_run = r;
			check_failed(sh, rc, out && strlen(out) >= from ? out + from : "");
			free(out);
			buf_free(&dims0);
			return;
		}
	}
	buf_free(&dims0);
	set_verdict(sh, V_PASS, "", "");
}

/* ---- children ---------------------------------------------------------------------------- */

/* Runs fn in a child with stdout and stderr in DIR/child.log; the verdict in dr->sh. A child
 * killed by a signal gets a FAIL verdict here, named after the signal (or the internal error
 * it printed). */
static void in_child(Driver *dr, void (*fn)(Driver *, void *), void *arg)
{
	char log[300];
	snprintf(log, sizeof log, "%s/child.log", dr->tmp);
	fflush(NULL);
	unlink(log);
	pid_t pid = fork();
	if (pid < 0) {
		perror("schedfuzz: fork");
		exit(2);
	}
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		alarm((unsigned)dr->timeout);
		fn(dr, arg);
		fflush(NULL);
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	Shared *sh = dr->sh;
	if (WIFEXITED(st) && sh->verdict != V_NONE)
		return;
	char *out = read_all(log), line[1024] = "", cls[160];
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM && sh->phase == PH_SIMULATE) {
		set_verdict(sh, V_SKIP, "simulation too slow", "");
		free(out);
		return;
	}
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
		snprintf(cls, sizeof cls, "hang (more than %d s)", dr->timeout);
	} else if (find_line(out, "internal error at ", line, sizeof line)) {
		const char *at = strstr(line, "internal error at ") + strlen("internal error at ");
		snprintf(cls, sizeof cls, "internal error at %.*s", (int)strcspn(at, ":"), at);
	} else if (WIFSIGNALED(st)) {
		snprintf(cls, sizeof cls, "crash (%s)", strsignal(WTERMSIG(st)));
		find_line(out, "ERROR", line, sizeof line);
	} else {
		snprintf(cls, sizeof cls, "child exited %d without a verdict", WEXITSTATUS(st));
		snprintf(line, sizeof line, "%s", out ? out : "");
	}
	set_verdict(sh, V_FAIL, cls, line);
	free(out);
}

static void gen_and_check(Driver *dr, void *arg)
{
	long n = *(long *)arg;
	Rng r;
	Case c = {0};
	rng_seed(&r, dr->seed, (uint64_t)n);
	gen_fusion(&r, &dr->o, &c);
	put_case(dr->sh, &c);
	TraceCtx t = {dr->sh, &c};
	gen_schedule(&r, &dr->o, &c, trace_case, &t);
	put_case(dr->sh, &c);
	check_case(dr, &c);
}

static void only_check(Driver *dr, void *arg)
{
	Case *c = arg;
	put_case(dr->sh, c);
	check_case(dr, c);
}

static void run_case(Driver *dr, Case *c)
{
	memset(dr->sh, 0, offsetof(Shared, ccase));
	in_child(dr, only_check, c);
}

/* ---- minimizer --------------------------------------------------------------------------- */

static ItemList *lists(Case *c, int i)
{
	ItemList *l[] = {&c->dirs, &c->stmts, &c->outs, &c->params};
	return l[i];
}

static void set_unit(Case *c, int unit, bool dropped)
{
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < lists(c, i)->n; k++)
			if (lists(c, i)->v[k].unit == unit)
				lists(c, i)->v[k].dropped = dropped;
}

/* Whether the case still fails with class cls (its sizes as the child rounded them). */
static bool still_fails(Driver *dr, Case *c, const char *cls, int *tries)
{
	(*tries)++;
	run_case(dr, c);
	return dr->sh->verdict == V_FAIL && strcmp(dr->sh->cls, cls) == 0;
}

/* Greedy: drop one unit (a directive, a statement with its output entry, a parameter) or
 * shrink one size while the failure persists; repeat until nothing more goes. */
static void minimize(Driver *dr, Case *c, const char *cls, int *tries)
{
	static const int64_t smaller[] = {1, 2, 3, 5};
	for (int s = 0; s < c->nsyms; s++) /* the failing run's sizes in both runs */
		c->syms[s].value[0] = c->syms[s].value[1] = c->syms[s].value[dr->sh->fail_run];
	bool changed = true;
	while (changed && *tries < 400) {
		changed = false;
		for (int i = 0; i < 4; i++) {
			for (int k = lists(c, i)->n - 1; k >= 0; k--) {
				Item *it = &lists(c, i)->v[k];
				if (it->dropped)
					continue;
				int unit = it->unit;
				set_unit(c, unit, true);
				if (still_fails(dr, c, cls, tries))
					changed = true;
				else
					set_unit(c, unit, false);
			}
		}
		for (int s = 0; s < c->nsyms; s++) {
			for (int k = 0; k < countof(smaller); k++) {
				int64_t old = c->syms[s].value[0];
				if (smaller[k] >= old)
					break;
				c->syms[s].value[0] = c->syms[s].value[1] = smaller[k];
				if (still_fails(dr, c, cls, tries)) {
					changed = true;
					break;
				}
				c->syms[s].value[0] = c->syms[s].value[1] = old;
			}
		}
	}
	run_case(dr, c); /* leaves the minimized case's sizes (rounded) in c via the child */
	Case back;
	if (case_parse(dr->sh->ccase, &back)) {
		case_free(c);
		*c = back;
	}
}

/* ---- the driver -------------------------------------------------------------------------- */

typedef struct Count {
	char *key;
	int n;
} Count;

typedef struct Stats {
	long pass, refused, skipped, failed, checks, dirs;
	Count *refusals;
	int nrefusals;
	Count *fails;
	int nfails;
} Stats;

/* The message of a diagnostic line with names and numbers blotted out. */
static char *normalize(const char *line)
{
	const char *p = strstr(line, ": error: ");
	p = p ? p + strlen(": error: ") : line;
	Buf b = {0};
	buf_puts(&b, "");
	for (; *p; p++) {
		if (*p == '\'') {
			const char *e = strchr(p + 1, '\'');
			if (e) {
				buf_puts(&b, "'_'");
				p = e;
				continue;
			}
		}
		if (*p >= '0' && *p <= '9') {
			while (p[1] >= '0' && p[1] <= '9')
				p++;
			buf_puts(&b, "N");
			continue;
		}
		char ch[2] = {*p, 0};
		buf_puts(&b, ch);
	}
	return b.s;
}

static void count(Count **v, int *n, char *key)
{
	for (int i = 0; i < *n; i++) {
		if (strcmp((*v)[i].key, key) == 0) {
			(*v)[i].n++;
			free(key);
			return;
		}
	}
	*v = xrealloc(*v, sizeof(Count) * (size_t)(*n + 1));
	(*v)[(*n)++] = (Count){key, 1};
}

static int by_count(const void *x, const void *y)
{
	return ((const Count *)y)->n - ((const Count *)x)->n;
}

static void print_case(const Case *c, int run)
{
	Buf text = {0}, dims = {0};
	case_render(c, &text);
	case_dims(c, run, &dims);
	printf("---- .fus (dims %s)\n%s----\n", dims.s[0] ? dims.s : "none", text.s);
	buf_free(&text);
	buf_free(&dims);
}

static void save(Driver *dr, long n, const Case *c, const char *cls)
{
	char path[512];
	Buf text = {0}, dims = {0};
	case_render(c, &text);
	case_dims(c, 0, &dims);
	snprintf(path, sizeof path, "%s/s%llu-n%ld.fus", dr->out, (unsigned long long)dr->seed, n);
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "// schedfuzz --seed %llu --first %ld --count 1: %s\n",
			(unsigned long long)dr->seed, n, cls);
		fprintf(f, "// build/fusc check %s%s%s\n%s", path, dims.s[0] ? " --dims " : "", dims.s,
			text.s);
		fclose(f);
		printf("  minimized: %s\n  build/fusc check %s%s%s\n", path, path,
		       dims.s[0] ? " --dims " : "", dims.s);
	} else {
		printf("  cannot write %s: %s\n", path, strerror(errno));
	}
	buf_free(&text);
	buf_free(&dims);
}

static void one_case(Driver *dr, long n, Stats *st)
{
	Shared *sh = dr->sh;
	memset(sh, 0, offsetof(Shared, ccase));
	sh->ccase[0] = 0;
	sh->phase = PH_GENERATE;
	in_child(dr, gen_and_check, &n);
	st->checks += sh->checks;
	Case c;
	bool parsed = case_parse(sh->ccase, &c);
	if (parsed)
		st->dirs += c.dirs.n;
	if (dr->print && parsed) {
		printf("case %ld: %s%s%s\n", n, sh->verdict == V_PASS ? "pass" : sh->verdict == V_REFUSED ? "refused" :
		       sh->verdict == V_SKIP ? "skipped" : "FAIL", sh->msg[0] ? ": " : "", sh->msg);
		print_case(&c, 0);
	}
	switch (sh->verdict) {
	case V_PASS: st->pass++; break;
	case V_REFUSED:
		st->refused++;
		count(&st->refusals, &st->nrefusals, normalize(sh->msg));
		break;
	case V_SKIP: st->skipped++; break;
	default: {
		st->failed++;
		char cls[160], msg[1024];
		int run = sh->fail_run;
		snprintf(cls, sizeof cls, "%s", sh->cls);
		snprintf(msg, sizeof msg, "%s", sh->msg);
		count(&st->fails, &st->nfails, xstrdup(cls));
		printf("FAIL seed %llu case %ld: %s\n  %s\n", (unsigned long long)dr->seed, n, cls, msg);
		if (!parsed) {
			printf("  (the child left no case)\n");
			break;
		}
		print_case(&c, run);
		if (dr->minimize) {
			int tries = 0;
			Case m = case_copy(&c);
			if (!still_fails(dr, &m, cls, &tries)) {
				printf("  not reproduced by a plain check of the case (flaky?)\n");
			} else {
				minimize(dr, &m, cls, &tries);
				printf("  minimized with %d checks:\n", tries);
				print_case(&m, 0);
				if (dr->out)
					save(dr, n, &m, cls);
			}
			case_free(&m);
		}
		break;
	}
	}
	if (parsed)
		case_free(&c);
	fflush(stdout);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: schedfuzz [--seed S] [--count N] [--first N] [--out DIR] [--no-FEATURE ...]\n"
		"                 [--max-dirs N] [--max-elems N] [--timeout S] [--sim-timeout S]\n"
		"                 [--stats] [--print] [--stop] [--no-minimize] [--only-auto]\n"
		"  --seed S        the random seed (default 1); case n of seed S is always the same\n"
		"  --count N       cases to run (default 100), from case --first (default 0)\n"
		"  --out DIR       write each minimized failure to DIR/sSEED-nCASE.fus\n"
		"  --max-dirs N    directives per schedule at most (default 40)\n"
		"  --max-elems N   product of all sizes at most (default 4096)\n"
		"  --timeout S     generating and compiling a case longer is a hang (default 60)\n"
		"  --sim-timeout S a simulation running longer is skipped: a schedule with too\n"
		"                  much redundant work for the simulator (default 5)\n"
		"  --stats         print the most frequent refusals at the end\n"
		"  --print         print every case and its verdict\n"
		"  --stop          stop after the first failure\n"
		"  --no-minimize   do not minimize failures\n"
		"  --only-auto     every case without a schedule block (the automatic scheduler)\n"
		"features (each on by default; --no-NAME leaves it out):\n");
	for (int f = 0; f < FF_COUNT; f++)
		fprintf(out, "  %-16s %s\n", fuzz_feature_name((FuzzFeature)f),
			fuzz_feature_what((FuzzFeature)f));
}

static bool parse_num(const char *s, long long *v)
{
	char *end;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return s[0] && !*end && !errno && *v >= 0;
}

static int parse_args(Driver *dr, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		long long v = 0;
		bool valued = strcmp(a, "--seed") == 0 || strcmp(a, "--count") == 0 ||
			      strcmp(a, "--first") == 0 || strcmp(a, "--out") == 0 ||
			      strcmp(a, "--max-dirs") == 0 || strcmp(a, "--max-elems") == 0 ||
			      strcmp(a, "--timeout") == 0 || strcmp(a, "--sim-timeout") == 0;
		if (valued) {
			if (!val || (strcmp(a, "--out") != 0 && !parse_num(val, &v))) {
				fprintf(stderr, "schedfuzz: %s needs a non-negative number%s\n", a,
					strcmp(a, "--out") == 0 ? " (a directory)" : "");
				return 2;
			}
			i++;
			if (strcmp(a, "--seed") == 0) dr->seed = (uint64_t)v;
			else if (strcmp(a, "--count") == 0) dr->count = (long)v;
			else if (strcmp(a, "--first") == 0) dr->first = (long)v;
			else if (strcmp(a, "--out") == 0) dr->out = val;
			else if (strcmp(a, "--max-dirs") == 0) dr->o.max_dirs = (int)v;
			else if (strcmp(a, "--max-elems") == 0) dr->o.max_elems = v;
			else if (strcmp(a, "--timeout") == 0) dr->timeout = (int)v;
			else dr->sim_timeout = (int)v;
			continue;
		}
		if (strcmp(a, "--stats") == 0) { dr->stats = true; continue; }
		if (strcmp(a, "--print") == 0) { dr->print = true; continue; }
		if (strcmp(a, "--stop") == 0) { dr->stop = true; continue; }
		if (strcmp(a, "--no-minimize") == 0) { dr->minimize = false; continue; }
		if (strcmp(a, "--only-auto") == 0) { dr->o.only_auto = true; continue; }
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			exit(0);
		}
		bool known = false;
		for (int f = 0; f < FF_COUNT && strncmp(a, "--no-", 5) == 0; f++) {
			if (strcmp(a + 5, fuzz_feature_name((FuzzFeature)f)) == 0) {
				dr->o.off[f] = known = true;
			}
		}
		if (!known) {
			fprintf(stderr, "schedfuzz: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	Driver dr = {.seed = 1, .count = 100, .timeout = 60, .sim_timeout = 5, .minimize = true};
	dr.o.max_dirs = 40;
	dr.o.max_elems = 4096;
	int rc = parse_args(&dr, argc, argv);
	if (rc >= 0)
		return rc;
	if (dr.out && mkdir(dr.out, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "schedfuzz: cannot create %s: %s\n", dr.out, strerror(errno));
		return 2;
	}
	const char *tmpdir = getenv("TMPDIR");
	snprintf(dr.tmp, sizeof dr.tmp, "%s/schedfuzz.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	char *abs = mkdtemp(dr.tmp) ? realpath(dr.tmp, NULL) : NULL; /* children chdir there */
	if (!abs || strlen(abs) >= sizeof dr.tmp) {
		fprintf(stderr, "schedfuzz: cannot create a scratch directory: %s\n", strerror(errno));
		return 2;
	}
	snprintf(dr.tmp, sizeof dr.tmp, "%s", abs);
	free(abs);
	dr.sh = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (dr.sh == MAP_FAILED) {
		perror("schedfuzz: mmap");
		return 2;
	}
	Stats st = {0};
	double t0 = now_seconds();
	long n;
	for (n = dr.first; n < dr.first + dr.count; n++) {
		one_case(&dr, n, &st);
		if (dr.stop && st.failed)
			break;
	}
	double secs = now_seconds() - t0;
	long total = st.pass + st.refused + st.skipped + st.failed;
	printf("schedfuzz: seed %llu, cases %ld..%ld: %ld passed, %ld refused (%.0f%%), %ld skipped, "
	       "%ld FAILED; %ld fusc check runs, %.1f directives per case; %.1f s, %.1f cases/s\n",
	       (unsigned long long)dr.seed, dr.first, n - 1, st.pass, st.refused,
	       total ? 100.0 * st.refused / total : 0.0, st.skipped, st.failed, st.checks,
	       total ? (double)st.dirs / total : 0.0, secs, secs > 0 ? total / secs : 0.0);
	if (st.nfails) {
		qsort(st.fails, (size_t)st.nfails, sizeof(Count), by_count);
		printf("failures by class:\n");
		for (int i = 0; i < st.nfails; i++)
			printf("  %5d  %s\n", st.fails[i].n, st.fails[i].key);
	}
	if (dr.stats && st.nrefusals) {
		qsort(st.refusals, (size_t)st.nrefusals, sizeof(Count), by_count);
		printf("refusals by message:\n");
		for (int i = 0; i < st.nrefusals && i < 25; i++)
			printf("  %5d  %s\n", st.refusals[i].n, st.refusals[i].key);
	}
	for (int i = 0; i < st.nrefusals; i++)
		free(st.refusals[i].key);
	for (int i = 0; i < st.nfails; i++)
		free(st.fails[i].key);
	free(st.refusals);
	free(st.fails);
	char path[300];
	snprintf(path, sizeof path, "%s/%s", dr.tmp, FUZZ_FILE_NAME);
	unlink(path);
	snprintf(path, sizeof path, "%s/child.log", dr.tmp);
	unlink(path);
	rmdir(dr.tmp);
	return st.failed ? 1 : 0;
}
