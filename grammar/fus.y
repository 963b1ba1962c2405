/* fus.y: the .fus grammar (docs/language.md algorithm language, §3 schedule language).
 *
 * Pure parser over a reentrant flex scanner (fus.l). Every action is one call to an ast_*
 * constructor (frontend/ast.c) or a list append; names, dtypes, verbs and shapes are resolved
 * later in frontend/. Locations are byte offsets [lo, hi) into the source text; rule locations
 * are joined by YYLLOC_DEFAULT and turned into Spans with SPAN().
 *
 * Error recovery, so one run reports every independent mistake:
 *   - a bad statement / directive resyncs at its ';' (`stmts error ';'`), and yyerrok makes
 *     the next statement's errors reported at once,
 *   - a body broken at its end resyncs at the closing '}' (`'{' stmts error '}'`), or ends
 *     without one before a `fusion`, `schedule` or the end of file (a missing '}'),
 *   - anything else at the top level skips to the next `fusion`, `schedule` or end of file
 *     (`file error`: tokens that cannot start a definition are discarded).
 */
%define api.pure full
%define api.prefix {fus}
%define api.location.type {FusLoc}
%define parse.error custom
%define parse.lac full
/* No default reductions in states that can also shift: a body cut short by an error ends
 * only at a token that may follow a definition (see `stmts error` below). */
%define lr.default-reduction consistent
%locations
%expect 0
%param {yyscan_t scanner}
%parse-param {ParseCtx *ctx}

%code requires {
#include "frontend/frontend.h"

#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif

/* A token or rule location: byte offsets [lo, hi) into the file's text. */
typedef struct FusLoc {
	uint32_t lo, hi;
} FusLoc;

/* An empty rule sits at the end of what precedes it. */
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                  \
	do {                                                         \
		if (N) {                                             \
			(Cur).lo = YYRHSLOC(Rhs, 1).lo;              \
			(Cur).hi = YYRHSLOC(Rhs, N).hi;              \
		} else {                                             \
			(Cur).lo = (Cur).hi = YYRHSLOC(Rhs, 0).hi;   \
		}                                                    \
	} while (0)

/* State shared by the parser and the scanner (the scanner's extra data). */
typedef struct ParseCtx {
	Arena *a;
	Diag *d;
	int file;
	const char *text;
	AstFile *out;
	uint32_t off;      /* scanner: offset of the next byte to scan */
	uint32_t tok_hi;   /* end of the last token returned */
	uint32_t prev_hi;  /* end of the token before it */
	uint32_t comment;  /* start of the open block comment */
	bool comment_open; /* the file ended inside a block comment */
} ParseCtx;
}

%code {
#include <string.h>

#include "fus.lex.h"

#define SPAN(l) ((Span){ctx->file, (l).lo, (l).hi})
#define A (ctx->a)

static Vec *list1(Arena *a, void *x)
{
	Vec *v = NEW(a, Vec);
	vec_push(a, v, x);
	return v;
}

static Vec *list_add(Arena *a, Vec *v, void *x)
{
	vec_push(a, v, x);
	return v;
}

/* `sum(j, k: e)` starts like the call `max(a, b)`, so the indices are parsed as expressions
 * and must turn out to be plain names. */
static Vec *reduce_indices(ParseCtx *ctx, Vec *exprs);
static void fuserror(FusLoc *loc, yyscan_t scanner, ParseCtx *ctx, const char *msg);
}

%union {
	int64_t ival;
	const char *str;
	AstName *name;
	AstExpr *expr;
	Vec *vec;
	AstParam *param;
	AstDim *dim;
	AstStmt *stmt;
	AstArg *arg;
	AstDirective *dir;
	AstSchedule *sched;
	AstFusion *fusion;
}

%token FUSION "fusion" SCHEDULE "schedule" AUTO "auto"
%token <str> IDENT "identifier"
%token <ival> INT "integer literal"
%token <str> FLOAT "floating-point literal"
%token <str> BYTES "byte count"
%token ARROW "->" OROR "||" ANDAND "&&" EQ "==" NE "!=" LE "<=" GE ">="

%type <name> name
%type <expr> expr ternary lor land equality relational additive multiplicative unary primary
%type <expr> subscript
%type <vec> params params1 dims stmts names subscripts exprs args dargs dargs1 arrow
%type <param> param
%type <dim> dim
%type <stmt> stmt
%type <arg> darg
%type <dir> directive
%type <vec> directives
%type <sched> schedule
%type <fusion> fusion

%%

file:
	  %empty		{ }
	| file fusion		{ ast_file_add_fusion(A, ctx->out, $2); }
	| file schedule		{ ast_file_add_schedule(A, ctx->out, $2); }
	| file error		{ }
	;

name:
	  IDENT			{ $$ = ast_name_ptr(A, SPAN(@1), $1); }
	;

/* ---- fusion definitions ---------------------------------------------------------------- */

fusion:
	  "fusion" name '(' params ')' "->" '(' params ')' '{' stmts '}'
		{ $$ = ast_fusion(A, SPAN(@$), *$2, $4, $8, $11); }
	| "fusion" name '(' params ')' "->" '(' params ')' '{' stmts error '}'
		{ yyerrok; $$ = ast_fusion(A, SPAN(@$), *$2, $4, $8, $11); }
	| "fusion" name '(' params ')' "->" '(' params ')' '{' stmts error
		{ $$ = ast_fusion(A, SPAN(@$), *$2, $4, $8, $11); }
	;

params:
	  %empty		{ $$ = NULL; }
	| params1
	;

params1:
	  param			{ $$ = list1(A, $1); }
	| params1 ',' param	{ $$ = list_add(A, $1, $3); }
	;

param:
	  name ':' name			{ $$ = ast_param(A, SPAN(@$), *$1, *$3, NULL); }
	| name ':' name '[' dims ']'	{ $$ = ast_param(A, SPAN(@$), *$1, *$3, $5); }
	;

dims:
	  dim			{ $$ = list1(A, $1); }
	| dims ',' dim		{ $$ = list_add(A, $1, $3); }
	;

dim:
	  INT			{ $$ = ast_dim_int(A, SPAN(@1), $1); }
	| IDENT			{ $$ = ast_dim_sym(A, SPAN(@1), $1); }
	;

stmts:
	  %empty		{ $$ = NEW(A, Vec); }
	| stmts stmt		{ $$ = list_add(A, $1, $2); }
	| stmts error ';'	{ yyerrok; $$ = $1; }
	;

stmt:
	  name '[' names ']' '=' expr ';'	{ $$ = ast_stmt(A, SPAN(@$), *$1, $3, $6); }
	| name '=' expr ';'			{ $$ = ast_stmt(A, SPAN(@$), *$1, NULL, $3); }
	;

names:
	  name			{ $$ = list1(A, $1); }
	| names ',' name	{ $$ = list_add(A, $1, $3); }
	;

/* ---- expressions: C precedence, one level per rule ---------------------------------------- */

expr:
	  ternary
	;

ternary:
	  lor
	| lor '?' expr ':' ternary	{ $$ = ast_ternary(A, SPAN(@$), $1, $3, $5); }
	;

lor:
	  land
	| lor "||" land		{ $$ = ast_binary(A, SPAN(@$), OP_OR, $1, $3); }
	;

land:
	  equality
	| land "&&" equality	{ $$ = ast_binary(A, SPAN(@$), OP_AND, $1, $3); }
	;

equality:
	  relational
	| equality "==" relational	{ $$ = ast_binary(A, SPAN(@$), OP_EQ, $1, $3); }
	| equality "!=" relational	{ $$ = ast_binary(A, SPAN(@$), OP_NE, $1, $3); }
	;

relational:
	  additive
	| relational '<' additive	{ $$ = ast_binary(A, SPAN(@$), OP_LT, $1, $3); }
	| relational "<=" additive	{ $$ = ast_binary(A, SPAN(@$), OP_LE, $1, $3); }
	| relational '>' additive	{ $$ = ast_binary(A, SPAN(@$), OP_GT, $1, $3); }
	| relational ">=" additive	{ $$ = ast_binary(A, SPAN(@$), OP_GE, $1, $3); }
	;

additive:
	  multiplicative
	| additive '+' multiplicative	{ $$ = ast_binary(A, SPAN(@$), OP_ADD, $1, $3); }
	| additive '-' multiplicative	{ $$ = ast_binary(A, SPAN(@$), OP_SUB, $1, $3); }
	;

multiplicative:
	  unary
	| multiplicative '*' unary	{ $$ = ast_binary(A, SPAN(@$), OP_MUL, $1, $3); }
	| multiplicative '/' unary	{ $$ = ast_binary(A, SPAN(@$), OP_DIV, $1, $3); }
	| multiplicative '%' unary	{ $$ = ast_binary(A, SPAN(@$), OP_MOD, $1, $3); }
	;

unary:
	  primary
	| '-' unary		{ $$ = ast_unary(A, SPAN(@$), '-', $2); }
	| '!' unary		{ $$ = ast_unary(A, SPAN(@$), '!', $2); }
	;

primary:
	  INT				{ $$ = ast_int(A, SPAN(@$), $1); }
	| FLOAT				{ $$ = ast_float(A, SPAN(@$), $1); }
	| IDENT				{ $$ = ast_name(A, SPAN(@$), $1); }
	| name '[' subscripts ']'	{ $$ = ast_access(A, SPAN(@$), *$1, $3); }
	| name '(' args ')'		{ $$ = ast_call(A, SPAN(@$), *$1, $3); }
	| name '(' exprs ':' expr ')'
		{ $$ = ast_reduce(A, SPAN(@$), *$1, reduce_indices(ctx, $3), $5); }
	| '(' expr ')'			{ $$ = $2; }
	;

subscripts:
	  subscript		{ $$ = list1(A, $1); }
	| subscripts ',' subscript	{ $$ = list_add(A, $1, $3); }
	;

subscript:
	  IDENT			{ $$ = ast_name(A, SPAN(@1), $1); }
	| INT			{ $$ = ast_int(A, SPAN(@1), $1); }
	;

args:
	  %empty		{ $$ = NULL; }
	| exprs
	;

exprs:
	  expr			{ $$ = list1(A, $1); }
	| exprs ',' expr	{ $$ = list_add(A, $1, $3); }
	;

/* ---- schedules ----------------------------------------------------------------------------- */

schedule:
	  "schedule" name '{' directives '}'
		{ $$ = ast_schedule(A, SPAN(@$), *$2, false, $4); }
	| "schedule" name '{' directives error '}'
		{ yyerrok; $$ = ast_schedule(A, SPAN(@$), *$2, false, $4); }
	| "schedule" name '{' directives error
		{ $$ = ast_schedule(A, SPAN(@$), *$2, false, $4); }
	| "schedule" name "auto" ';'
		{ $$ = ast_schedule(A, SPAN(@$), *$2, true, NULL); }
	;

directives:
	  %empty			{ $$ = NEW(A, Vec); }
	| directives directive		{ $$ = list_add(A, $1, $2); }
	| directives error ';'		{ yyerrok; $$ = $1; }
	;

directive:
	  name '.' name '(' dargs ')' arrow ';'
		{ $$ = ast_directive(A, SPAN(@$), NULL, *$1, *$3, $5, $7); }
	| name '=' name '.' name '(' dargs ')' arrow ';'
		{ $$ = ast_directive(A, SPAN(@$), $1, *$3, *$5, $7, $9); }
	;

dargs:
	  %empty		{ $$ = NULL; }
	| dargs1
	;

dargs1:
	  darg			{ $$ = list1(A, $1); }
	| dargs1 ',' darg	{ $$ = list_add(A, $1, $3); }
	;

darg:
	  IDENT			{ $$ = ast_arg_name(A, SPAN(@$), $1); }
	| INT			{ $$ = ast_arg_int(A, SPAN(@$), $1); }
	| BYTES			{ $$ = ast_arg_name(A, SPAN(@$), $1); }
	| IDENT '.' IDENT	{ $$ = ast_arg_dotted(A, SPAN(@$), $1, $3); }
	;

arrow:
	  %empty			{ $$ = NULL; }
	| "->" name			{ $$ = list1(A, $2); }
	| "->" '(' names ')'		{ $$ = $3; }
	;

%%

static Vec *reduce_indices(ParseCtx *ctx, Vec *exprs)
{
	Vec *idx = NEW(ctx->a, Vec);

	for (int i = 0; i < exprs->len; i++) {
		AstExpr *e = VEC_AT(*exprs, AstExpr, i);
		if (e->kind != AE_NAME) {
			diag_error(ctx->d, e->span, "a reduction index must be a name");
			continue;
		}
		vec_push(ctx->a, idx, ast_name_ptr(ctx->a, e->span, e->name));
	}
	return idx;
}

/* How a token kind reads in a message: punctuation and keywords quoted ('->', 'fusion'),
 * classes of tokens plain (identifier, end of file). */
static const char *token_desc(ParseCtx *ctx, yysymbol_kind_t k)
{
	const char *n = yysymbol_name(k);
	size_t len = strlen(n);

	if (len >= 2 && n[0] == '"')
		n = arena_strndup(ctx->a, n + 1, len - 2);
	if (k == YYSYMBOL_IDENT || k == YYSYMBOL_INT || k == YYSYMBOL_FLOAT || k == YYSYMBOL_YYEOF ||
	    k == YYSYMBOL_YYUNDEF || n[0] == '\'')
		return n;
	return arena_printf(ctx->a, "'%s'", n);
}

/* The lookahead as it reads in a message: `identifier 'f32'`, `'}'`, `end of file`. */
static const char *found_desc(ParseCtx *ctx, yysymbol_kind_t k, FusLoc loc)
{
	const char *d = token_desc(ctx, k);

	if (k == YYSYMBOL_IDENT || k == YYSYMBOL_INT || k == YYSYMBOL_FLOAT)
		return arena_printf(ctx->a, "%s '%.*s'", d, (int)(loc.hi - loc.lo),
				    ctx->text + loc.lo);
	return d;
}

static bool on_later_line(ParseCtx *ctx, uint32_t prev, uint32_t next)
{
	for (uint32_t i = prev; i < next; i++)
		if (ctx->text[i] == '\n')
			return true;
	return false;
}

static bool is_token(yysymbol_kind_t k, const char *name)
{
	return strcmp(yysymbol_name(k), name) == 0;
}

/* Messages read "expected ';' before '}'", "expected identifier or ')' before ':'",
 * "expected expression before '*'" or, when too many tokens could follow, "unexpected '}'".
 * A missing ';', ')' or ']' at the end of a line is reported right after the
 * previous token, where it is missing, rather than at the start of the next line. */
static int yyreport_syntax_error(const yypcontext_t *pc, yyscan_t scanner, ParseCtx *ctx)
{
	enum { MAX_LISTED = 4 };
	yysymbol_kind_t expected[YYNTOKENS];
	int n = yypcontext_expected_tokens(pc, expected, YYNTOKENS);
	yysymbol_kind_t found = yypcontext_token(pc);
	FusLoc loc = *yypcontext_location(pc);

	/* An unterminated comment already explained the sudden end of the file. */
	if (found == YYSYMBOL_YYEOF && ctx->comment_open)
		return 0;
	const char *what = found_desc(ctx, found, loc);
	/* "expected 'fusion' or 'schedule'" reads better with the end of file left out. */
	if (n > 1 && expected[0] == YYSYMBOL_YYEOF) {
		memmove(expected, expected + 1, (size_t)(n - 1) * sizeof expected[0]);
		n--;
	}
	/* When operators could also follow, name only the token that ends the construct. */
	static const char *closers[] = {"';'", "')'", "']'", "'}'"};
	yysymbol_kind_t closer = YYSYMBOL_YYEMPTY;
	bool expr = false;
	for (int c = countof(closers) - 1; c >= 0; c--)
		for (int i = 0; i < n; i++)
			if (is_token(expected[i], closers[c]))
				closer = expected[i];
	for (int i = 0; i < n; i++)
		expr |= expected[i] == YYSYMBOL_FLOAT; /* only an expression can start with one */
	Span at = SPAN(loc);
	/* '}' is left out: "expected identifier or '}'" before a new line's first token is as
	 * likely a mistake in that token. */
	if (closer != YYSYMBOL_YYEMPTY && !is_token(closer, "'}'") && ctx->prev_hi < loc.lo &&
	    on_later_line(ctx, ctx->prev_hi, loc.lo))
		at.lo = at.hi = ctx->prev_hi;
	if (expr) {
		diag_error(ctx->d, at, "expected expression before %s", what);
		return 0;
	}
	if (n > MAX_LISTED && closer != YYSYMBOL_YYEMPTY) {
		expected[0] = closer;
		n = 1;
	}
	if (n == 0 || n > MAX_LISTED) {
		diag_error(ctx->d, SPAN(loc), "unexpected %s", what);
		return 0;
	}
	Buf b = {0};
	for (int i = 0; i < n; i++) {
		const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
		buf_printf(&b, "%s%s", sep, token_desc(ctx, expected[i]));
	}
	diag_error(ctx->d, at, "expected %s before %s", b.s, what);
	buf_free(&b);
	return 0;
}

/* Called by bison only for failures that are not syntax errors (the stack exhausted). */
static void fuserror(FusLoc *loc, yyscan_t scanner, ParseCtx *ctx, const char *msg)
{
	diag_error(ctx->d, SPAN(*loc), "%s (nested too deeply)", msg);
}

/* Every walker after the parser recurses over expressions: a statement nested deeper than
 * FUS_MAX_EXPR_DEPTH (`x[i] + x[i] + ...` with thousands of terms) is refused here, once. */
static void check_depths(ParseCtx *ctx)
{
	for (int i = 0; i < ctx->out->nfusions; i++) {
		AstFusion *f = ctx->out->fusions[i];
		for (int j = 0; j < f->nstmts; j++) {
			AstExpr *e = f->stmts[j]->rhs;
			if (e && e->depth > FUS_MAX_EXPR_DEPTH)
				diag_error(ctx->d, e->span,
					   "expression too deep: %d levels of operators (the limit is %d)",
					   e->depth, FUS_MAX_EXPR_DEPTH);
		}
	}
}

AstFile *parse_file(Arena *a, Diag *d, int file)
{
	ParseCtx ctx = {.a = a, .d = d, .file = file, .text = diag_file_text(d, file)};
	yyscan_t scanner;

	ctx.out = NEW(a, AstFile);
	if (fuslex_init_extra(&ctx, &scanner))
		die("cannot create the scanner");
	/* The true length, not strlen: a NUL byte is a lexical error, not the end of the file. */
	size_t len = diag_file_len(d, file);
	if (len > INT32_MAX - 2) {
		diag_error(d, (Span){file, 0, 0}, "the source is too large (%zu bytes)", len);
		fuslex_destroy(scanner);
		return ctx.out;
	}
	YY_BUFFER_STATE buf = fus_scan_bytes(ctx.text, (int)len, scanner);
	fusparse(scanner, &ctx);
	check_depths(&ctx);
	fus_delete_buffer(buf, scanner);
	fuslex_destroy(scanner);
	return ctx.out;
}
