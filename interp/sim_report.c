/* sim_report.c: the simulator's fault reports: collecting them (merged by kind, statement and
 * buffer, so a missing predicate hit by every thread is one report with a count) and printing
 * them with the .fus location of the statement or directive that produced the kernel-IR
 * statement at fault. */
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"

#define SIM_MAX_REPORTS 100

static const char *const fault_names[] = {
#define X(e, s) s,
	SIM_FAULTS(X)
#undef X
};

const char *sim_fault_name(SimFault f)
{
	return f >= 0 && f < SF_COUNT ? fault_names[f] : "?";
}

static bool same_name(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static Span span_of(Sim *S, Stmt *s)
{
	if (s && s->span.file)
		return s->span;
	return S->f ? S->f->span : (Span){0, 0, 0};
}

SimReport *sim_report_new(Sim *S, SimFault kind, Stmt *s, const char *buffer)
{
	SimResult *res = S->res;

	for (int i = 0; i < res->nreports; i++) {
		SimReport *r = &res->reports[i];
		if (r->kind == kind && r->stmt == s && same_name(r->buffer, buffer)) {
			r->count++;
			return NULL;
		}
	}
	if (res->nreports == SIM_MAX_REPORTS)
		return NULL;
	if (res->nreports == S->capreports) {
		S->capreports = S->capreports ? 2 * S->capreports : 8;
		res->reports = realloc(res->reports, sizeof *res->reports * (size_t)S->capreports);
	}
	SimReport *r = &res->reports[res->nreports++];
	memset(r, 0, sizeof *r);
	r->kind = kind;
	r->stmt = s;
	r->span = span_of(S, s);
	r->buffer = buffer;
	r->count = 1;
	r->offset = -1;
	for (int i = 0; i < 3; i++) {
		r->block[i] = S->bid[i];
		r->thread[i] = S->cur ? S->cur->tid[i] : 0;
	}
	return r;
}

void sim_report(Sim *S, SimFault kind, SimBuf *b, int64_t off, int64_t size, bool write)
{
	SimReport *r = sim_report_new(S, kind, S->stmt, b->t->name);

	if (!r)
		return;
	r->mem = b->mem;
	r->dtype = b->dt;
	r->write = write;
	r->offset = off;
	r->size = size;
}

/* ---- text ----------------------------------------------------------------------------- */

char *sim_stmt_text(Stmt *s)
{
	Buf b = {0};

	buf_puts(&b, "");
	if (!s)
		return b.s;
	kir_print_stmt_line(s, &b);
	if (b.len > 200)
		strcpy(b.s + 196, " ...");
	return b.s;
}

static void put_loc(Diag *d, Span sp, FILE *out)
{
	int line = 0, col = 0;

	if (!d || !sp.file) {
		fputs("<kernel>", out);
		return;
	}
	diag_line_col(d, sp.file, sp.lo, &line, &col);
	fprintf(out, "%s:%d:%d", diag_file_name(d, sp.file), line, col);
}

static void put_dim3(FILE *out, const int64_t *v)
{
	fprintf(out, "(%lld, %lld, %lld)", (long long)v[0], (long long)v[1], (long long)v[2]);
}

void sim_report_print(Diag *d, const SimReport *r, FILE *out)
{
	put_loc(d, r->span, out);
	fprintf(out, ": check: %s", sim_fault_name(r->kind));
	if (r->buffer && r->offset >= 0)
		fprintf(out, ": %s of %s[%lld] (%s %s, %lld elements)", r->write ? "write" : "read",
			r->buffer, (long long)r->offset, mem_name(r->mem), dtype_name(r->dtype),
			(long long)r->size);
	else if (r->buffer)
		fprintf(out, ": %s %s", r->kind == SF_UNINIT ? "read of local variable" : "on",
			r->buffer);
	if (r->detail)
		fprintf(out, " (%s)", r->detail);
	fprintf(out, "\n  block ");
	put_dim3(out, r->block);
	fprintf(out, " thread ");
	put_dim3(out, r->thread);
	if (r->count > 1)
		fprintf(out, "; %lld times in all", (long long)r->count);
	fputc('\n', out);
	char *t = sim_stmt_text(r->stmt);
	if (*t)
		fprintf(out, "  kernel IR: %s\n", t);
	free(t);
	if (r->has_other_thread || r->other) {
		fprintf(out, "  conflicting %s by", r->other_write ? "write" : "read");
		if (r->has_other_thread) {
			fprintf(out, " block ");
			put_dim3(out, r->other_block);
			fprintf(out, " thread ");
			put_dim3(out, r->other_thread);
		}
		if (r->other) {
			t = sim_stmt_text(r->other);
			fprintf(out, " at ");
			put_loc(d, r->other->span, out);
			fprintf(out, ": %s", t);
			free(t);
		}
		fputc('\n', out);
	}
}
