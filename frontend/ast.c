/* ast.c: AST constructors (one per grammar action) and the AST printer.
 *
 * Constructors freeze the parser's Vec lists into (pointer, count) pairs; a NULL list is an
 * empty one. Everything lives in the arena.
 *
 * ast_print writes an S-expression-like text, one definition per top-level form and one
 * parameter / statement / directive per line, e.g.
 *   (fusion saxpy
 *     (param a f32)
 *     (param x f32 [N])
 *     (out z f32 [N])
 *     (assign z [i] (+ (* a x[i]) y[i])))
 *   (schedule saxpy
 *     (z.split i 1024 -> io ii))
 * Expressions: literals and names as written, accesses `x[i, 0]`, operators `(+ a b)`,
 * `(- a)`, `(?: c a b)`, calls `(exp a)`, reductions `(sum [j k] body)`. */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

static const char *op_text[] = {
#define X(e, n, ar, k) [OP_##e] = n,
	IR_OPS(X)
#undef X
};

static AstExpr *expr_new(Arena *a, AstExprKind kind, Span s)
{
	AstExpr *e = NEW(a, AstExpr);

	e->kind = kind;
	e->span = s;
	e->depth = 1;
	return e;
}

/* Called once the arguments are set: constructors run bottom-up, so this is O(arguments). */
static AstExpr *with_depth(AstExpr *e)
{
	for (int i = 0; i < e->nargs; i++)
		if (e->args[i] && e->args[i]->depth >= e->depth)
			e->depth = e->args[i]->depth + 1;
	return e;
}

static AstExpr **freeze_exprs(Vec *v, int *n)
{
	*n = v ? v->len : 0;
	return v ? (AstExpr **)v->items : NULL;
}

/* A list of AstName* becomes an array of AstName values. */
static AstName *freeze_names(Arena *a, Vec *v, int *n)
{
	*n = v ? v->len : 0;
	if (*n == 0)
		return NULL;
	AstName *out = arena_alloc(a, (size_t)*n * sizeof(AstName));
	for (int i = 0; i < *n; i++)
		out[i] = *VEC_AT(*v, AstName, i);
	return out;
}

AstExpr *ast_int(Arena *a, Span s, int64_t v)
{
	AstExpr *e = expr_new(a, AE_INT, s);

	e->ival = v;
	return e;
}

AstExpr *ast_float(Arena *a, Span s, const char *text)
{
	AstExpr *e = expr_new(a, AE_FLOAT, s);

	e->name = arena_strdup(a, text);
	e->fval = strtod(text, NULL);
	return e;
}

AstExpr *ast_name(Arena *a, Span s, const char *name)
{
	AstExpr *e = expr_new(a, AE_NAME, s);

	e->name = name;
	e->name_span = s;
	return e;
}

AstExpr *ast_access(Arena *a, Span s, AstName name, Vec *args)
{
	AstExpr *e = expr_new(a, AE_ACCESS, s);

	e->name = name.name;
	e->name_span = name.span;
	e->args = freeze_exprs(args, &e->nargs);
	return with_depth(e);
}

AstExpr *ast_unary(Arena *a, Span s, int op, AstExpr *x)
{
	AstExpr *e = expr_new(a, AE_UNARY, s);

	e->op = op;
	e->args = arena_alloc(a, sizeof(AstExpr *));
	e->args[0] = x;
	e->nargs = 1;
	return with_depth(e);
}

AstExpr *ast_binary(Arena *a, Span s, int op, AstExpr *l, AstExpr *r)
{
	AstExpr *e = expr_new(a, AE_BINARY, s);

	e->op = op;
	e->args = arena_alloc(a, 2 * sizeof(AstExpr *));
	e->args[0] = l;
	e->args[1] = r;
	e->nargs = 2;
	return with_depth(e);
}

AstExpr *ast_ternary(Arena *a, Span s, AstExpr *c, AstExpr *t, AstExpr *f)
{
	AstExpr *e = expr_new(a, AE_TERNARY, s);

	e->args = arena_alloc(a, 3 * sizeof(AstExpr *));
	e->args[0] = c;
	e->args[1] = t;
	e->args[2] = f;
	e->nargs = 3;
	return with_depth(e);
}

AstExpr *ast_call(Arena *a, Span s, AstName fn, Vec *args)
{
	AstExpr *e = expr_new(a, AE_CALL, s);

	e->name = fn.name;
	e->name_span = fn.span;
	e->args = freeze_exprs(args, &e->nargs);
	return with_depth(e);
}

AstExpr *ast_reduce(Arena *a, Span s, AstName op, Vec *idx, AstExpr *body)
{
	AstExpr *e = expr_new(a, AE_REDUCE, s);

	e->name = op.name;
	e->name_span = op.span;
	e->idx = freeze_names(a, idx, &e->nidx);
	e->args = arena_alloc(a, sizeof(AstExpr *));
	e->args[0] = body;
	e->nargs = 1;
	return with_depth(e);
}

AstName *ast_name_ptr(Arena *a, Span s, const char *name)
{
	AstName *n = NEW(a, AstName);

	n->name = name;
	n->span = s;
	return n;
}

AstDim *ast_dim_int(Arena *a, Span s, int64_t v)
{
	AstDim *d = NEW(a, AstDim);

	d->value = v;
	d->span = s;
	return d;
}

AstDim *ast_dim_sym(Arena *a, Span s, const char *sym)
{
	AstDim *d = NEW(a, AstDim);

	d->sym = sym;
	d->span = s;
	return d;
}

AstParam *ast_param(Arena *a, Span s, AstName name, AstName dtype, Vec *dims)
{
	AstParam *p = NEW(a, AstParam);

	p->name = name;
	p->dtype = dtype;
	p->span = s;
	p->ndims = dims ? dims->len : 0;
	if (p->ndims) {
		p->dims = arena_alloc(a, (size_t)p->ndims * sizeof(AstDim));
		for (int i = 0; i < p->ndims; i++)
			p->dims[i] = *VEC_AT(*dims, AstDim, i);
	}
	return p;
}

AstStmt *ast_stmt(Arena *a, Span s, AstName lhs, Vec *idx, AstExpr *rhs)
{
	AstStmt *st = NEW(a, AstStmt);

	st->lhs = lhs;
	st->is_scalar = idx == NULL;
	st->idx = freeze_names(a, idx, &st->nidx);
	st->rhs = rhs;
	st->span = s;
	return st;
}

static AstArg *arg_new(Arena *a, AstArgKind kind, Span s)
{
	AstArg *g = NEW(a, AstArg);

	g->kind = kind;
	g->span = s;
	return g;
}

AstArg *ast_arg_name(Arena *a, Span s, const char *name)
{
	AstArg *g = arg_new(a, AA_NAME, s);

	g->name = name;
	return g;
}

AstArg *ast_arg_int(Arena *a, Span s, int64_t v)
{
	AstArg *g = arg_new(a, AA_INT, s);

	g->value = v;
	return g;
}

AstArg *ast_arg_dotted(Arena *a, Span s, const char *l, const char *r)
{
	AstArg *g = arg_new(a, AA_DOTTED, s);

	g->name = arena_printf(a, "%s.%s", l, r);
	return g;
}

AstDirective *ast_directive(Arena *a, Span s, AstName *result, AstName tensor, AstName verb,
			    Vec *args, Vec *outs)
{
	AstDirective *d = NEW(a, AstDirective);

	if (result)
		d->result = *result;
	d->tensor = tensor;
	d->verb = verb;
	d->nargs = args ? args->len : 0;
	if (d->nargs) {
		d->args = arena_alloc(a, (size_t)d->nargs * sizeof(AstArg));
		for (int i = 0; i < d->nargs; i++)
			d->args[i] = *VEC_AT(*args, AstArg, i);
	}
	d->outs = freeze_names(a, outs, &d->nouts);
	d->span = s;
	return d;
}

AstSchedule *ast_schedule(Arena *a, Span s, AstName fusion, bool is_auto, Vec *dirs)
{
	AstSchedule *sc = NEW(a, AstSchedule);

	sc->fusion = fusion;
	sc->is_auto = is_auto;
	sc->ndirs = dirs ? dirs->len : 0;
	sc->dirs = dirs ? (AstDirective **)dirs->items : NULL;
	sc->span = s;
	return sc;
}

AstFusion *ast_fusion(Arena *a, Span s, AstName name, Vec *params, Vec *outs, Vec *stmts)
{
	AstFusion *f = NEW(a, AstFusion);

	f->name = name;
	f->nparams = params ? params->len : 0;
	f->params = params ? (AstParam **)params->items : NULL;
	f->nouts = outs ? outs->len : 0;
	f->outs = outs ? (AstParam **)outs->items : NULL;
	f->nstmts = stmts ? stmts->len : 0;
	f->stmts = stmts ? (AstStmt **)stmts->items : NULL;
	f->span = s;
	return f;
}

/* Appends to an arena array whose capacity is implicit: the next power of two >= n. */
static void **grow(Arena *a, void **items, int n)
{
	if (n & (n - 1) && n != 0)
		return items;
	void **bigger = arena_alloc(a, (size_t)(n ? 2 * n : 1) * sizeof(void *));
	if (n)
		memcpy(bigger, items, (size_t)n * sizeof(void *));
	return bigger;
}

void ast_file_add_fusion(Arena *a, AstFile *f, AstFusion *fu)
{
	f->fusions = (AstFusion **)grow(a, (void **)f->fusions, f->nfusions);
	f->fusions[f->nfusions++] = fu;
}

void ast_file_add_schedule(Arena *a, AstFile *f, AstSchedule *s)
{
	f->schedules = (AstSchedule **)grow(a, (void **)f->schedules, f->nschedules);
	f->schedules[f->nschedules++] = s;
}

/* ---- printing ---------------------------------------------------------------------------- */

static void print_expr(Buf *b, const AstExpr *e);

static void print_args(Buf *b, const AstExpr *e, int from)
{
	for (int i = from; i < e->nargs; i++) {
		buf_puts(b, " ");
		print_expr(b, e->args[i]);
	}
}

static void print_expr(Buf *b, const AstExpr *e)
{
	switch (e->kind) {
	case AE_INT:
		buf_printf(b, "%lld", (long long)e->ival);
		break;
	case AE_FLOAT:
	case AE_NAME:
		buf_puts(b, e->name);
		break;
	case AE_ACCESS:
		buf_printf(b, "%s[", e->name);
		for (int i = 0; i < e->nargs; i++) {
			buf_puts(b, i ? ", " : "");
			print_expr(b, e->args[i]);
		}
		buf_puts(b, "]");
		break;
	case AE_UNARY:
		buf_printf(b, "(%c", (char)e->op);
		print_args(b, e, 0);
		buf_puts(b, ")");
		break;
	case AE_BINARY:
		if (e->op < 0 || e->op >= OP_COUNT)
			die("bad binary op %d", e->op);
		buf_printf(b, "(%s", op_text[e->op]);
		print_args(b, e, 0);
		buf_puts(b, ")");
		break;
	case AE_TERNARY:
		buf_puts(b, "(?:");
		print_args(b, e, 0);
		buf_puts(b, ")");
		break;
	case AE_CALL:
		buf_printf(b, "(%s", e->name);
		print_args(b, e, 0);
		buf_puts(b, ")");
		break;
	case AE_REDUCE:
		buf_printf(b, "(%s [", e->name);
		for (int i = 0; i < e->nidx; i++)
			buf_printf(b, "%s%s", i ? " " : "", e->idx[i].name);
		buf_puts(b, "]");
		print_args(b, e, 0);
		buf_puts(b, ")");
		break;
	}
}

static void print_param(Buf *b, const char *what, const AstParam *p)
{
	buf_printf(b, "\n");
	buf_indent(b, 1);
	buf_printf(b, "(%s %s %s", what, p->name.name, p->dtype.name);
	if (p->ndims) {
		buf_puts(b, " [");
		for (int i = 0; i < p->ndims; i++) {
			const AstDim *d = &p->dims[i];
			buf_puts(b, i ? " " : "");
			if (d->sym)
				buf_puts(b, d->sym);
			else
				buf_printf(b, "%lld", (long long)d->value);
		}
		buf_puts(b, "]");
	}
	buf_puts(b, ")");
}

static void print_stmt(Buf *b, const AstStmt *s)
{
	buf_printf(b, "\n");
	buf_indent(b, 1);
	buf_printf(b, "(assign %s", s->lhs.name);
	if (!s->is_scalar) {
		buf_puts(b, " [");
		for (int i = 0; i < s->nidx; i++)
			buf_printf(b, "%s%s", i ? " " : "", s->idx[i].name);
		buf_puts(b, "]");
	}
	buf_puts(b, " ");
	print_expr(b, s->rhs);
	buf_puts(b, ")");
}

static void print_fusion(Buf *b, const AstFusion *f)
{
	buf_printf(b, "(fusion %s", f->name.name);
	for (int i = 0; i < f->nparams; i++)
		print_param(b, "param", f->params[i]);
	for (int i = 0; i < f->nouts; i++)
		print_param(b, "out", f->outs[i]);
	for (int i = 0; i < f->nstmts; i++)
		print_stmt(b, f->stmts[i]);
	buf_puts(b, ")\n");
}

static void print_directive(Buf *b, const AstDirective *d)
{
	buf_printf(b, "\n");
	buf_indent(b, 1);
	buf_puts(b, "(");
	if (d->result.name)
		buf_printf(b, "%s = ", d->result.name);
	buf_printf(b, "%s.%s", d->tensor.name, d->verb.name);
	for (int i = 0; i < d->nargs; i++) {
		const AstArg *g = &d->args[i];
		if (g->kind == AA_INT)
			buf_printf(b, " %lld", (long long)g->value);
		else
			buf_printf(b, " %s", g->name);
	}
	if (d->nouts)
		buf_puts(b, " ->");
	for (int i = 0; i < d->nouts; i++)
		buf_printf(b, " %s", d->outs[i].name);
	buf_puts(b, ")");
}

static void print_schedule(Buf *b, const AstSchedule *s)
{
	buf_printf(b, "(schedule %s", s->fusion.name);
	if (s->is_auto)
		buf_puts(b, " auto");
	for (int i = 0; i < s->ndirs; i++)
		print_directive(b, s->dirs[i]);
	buf_puts(b, ")\n");
}

/* Definitions print in file order: fusions and schedules interleaved by their position. */
void ast_print(AstFile *f, Buf *out)
{
	int i = 0, j = 0;

	buf_puts(out, "");
	while (i < f->nfusions || j < f->nschedules) {
		bool fusion_first = j == f->nschedules ||
				    (i < f->nfusions &&
				     f->fusions[i]->span.lo < f->schedules[j]->span.lo);
		if (fusion_first)
			print_fusion(out, f->fusions[i++]);
		else
			print_schedule(out, f->schedules[j++]);
	}
}

/* ---- .fus text of a fusion (--emit=schedule prints a segment's fusion) ---- */

/* e in .fus syntax; an operator below the top is parenthesized (the text parses back to the
 * same tree). */
static void put_fus_expr(Buf *b, const AstExpr *e, bool nested)
{
	bool paren = nested && (e->kind == AE_UNARY || e->kind == AE_BINARY || e->kind == AE_TERNARY);
	buf_puts(b, paren ? "(" : "");
	switch (e->kind) {
	case AE_INT:
		buf_printf(b, "%lld", (long long)e->ival);
		break;
	case AE_FLOAT:
	case AE_NAME:
		buf_puts(b, e->name);
		break;
	case AE_ACCESS:
	case AE_CALL:
		buf_printf(b, "%s%s", e->name, e->kind == AE_ACCESS ? "[" : "(");
		for (int i = 0; i < e->nargs; i++) {
			buf_puts(b, i ? ", " : "");
			put_fus_expr(b, e->args[i], false);
		}
		buf_puts(b, e->kind == AE_ACCESS ? "]" : ")");
		break;
	case AE_UNARY:
		buf_printf(b, "%c", (char)e->op);
		put_fus_expr(b, e->args[0], true);
		break;
	case AE_BINARY:
		put_fus_expr(b, e->args[0], true);
		buf_printf(b, " %s ", op_text[e->op]);
		put_fus_expr(b, e->args[1], true);
		break;
	case AE_TERNARY:
		put_fus_expr(b, e->args[0], true);
		buf_puts(b, " ? ");
		put_fus_expr(b, e->args[1], true);
		buf_puts(b, " : ");
		put_fus_expr(b, e->args[2], true);
		break;
	case AE_REDUCE:
		buf_printf(b, "%s(", e->name);
		for (int i = 0; i < e->nidx; i++)
			buf_printf(b, "%s%s", i ? ", " : "", e->idx[i].name);
		buf_puts(b, ": ");
		put_fus_expr(b, e->args[0], false);
		buf_puts(b, ")");
		break;
	}
	buf_puts(b, paren ? ")" : "");
}

static void put_fus_params(Buf *b, AstParam **ps, int n)
{
	for (int i = 0; i < n; i++) {
		const AstParam *p = ps[i];
		buf_printf(b, "%s%s: %s", i ? ", " : "", p->name.name, p->dtype.name);
		for (int k = 0; k < p->ndims; k++) {
			buf_puts(b, k ? ", " : "[");
			if (p->dims[k].sym)
				buf_puts(b, p->dims[k].sym);
			else
				buf_printf(b, "%lld", (long long)p->dims[k].value);
		}
		buf_puts(b, p->ndims ? "]" : "");
	}
}

void ast_print_fusion(const AstFusion *f, Buf *out)
{
	buf_printf(out, "fusion %s(", f->name.name);
	put_fus_params(out, f->params, f->nparams);
	buf_puts(out, ") -> (");
	put_fus_params(out, f->outs, f->nouts);
	buf_puts(out, ") {\n");
	for (int i = 0; i < f->nstmts; i++) {
		const AstStmt *s = f->stmts[i];
		buf_indent(out, 1);
		buf_puts(out, s->lhs.name);
		for (int k = 0; k < s->nidx; k++)
			buf_printf(out, "%s%s", k ? ", " : "[", s->idx[k].name);
		buf_puts(out, s->nidx ? "] = " : " = ");
		put_fus_expr(out, s->rhs, false);
		buf_puts(out, ";\n");
	}
	buf_puts(out, "}\n");
}

/* `[result =] t.verb(args) [-> (outs)];` in .fus syntax */
static void print_fus_directive(Buf *b, const AstDirective *d)
{
	buf_indent(b, 1);
	if (d->result.name)
		buf_printf(b, "%s = ", d->result.name);
	buf_printf(b, "%s.%s(", d->tensor.name, d->verb.name);
	for (int i = 0; i < d->nargs; i++) {
		const AstArg *g = &d->args[i];
		buf_puts(b, i ? ", " : "");
		if (g->kind == AA_INT)
			buf_printf(b, "%lld", (long long)g->value);
		else
			buf_puts(b, g->name);
	}
	buf_puts(b, ")");
	for (int i = 0; i < d->nouts; i++)
		buf_printf(b, "%s%s", i ? ", " : d->nouts > 1 ? " -> (" : " -> ", d->outs[i].name);
	buf_puts(b, d->nouts > 1 ? ");\n" : ";\n");
}

void ast_print_schedule(const AstSchedule *s, Buf *out)
{
	if (s->is_auto && !s->ndirs) {
		buf_printf(out, "schedule %s auto;\n", s->fusion.name);
		return;
	}
	buf_printf(out, "schedule %s {\n", s->fusion.name);
	for (int i = 0; i < s->ndirs; i++)
		print_fus_directive(out, s->dirs[i]);
	buf_puts(out, "}\n");
}
